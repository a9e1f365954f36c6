//! `kernels/scan.cu` and `kernels/binning.cu` through
//! `kernels/testing/launch_scan_binning.cpp`.

use crate::{need, Launch};
use rusparse::Index;

/// The entry points of this launcher file after the launch geometry
/// `(grid, block, shared)`, with `$V` for the variant: the one list that
/// [`ScanBinning`] and its implementation for every variant are made from
/// (`raw_x = x`: the method `raw_x` calls `rs_host_x_<suffix>`).
macro_rules! scan_binning_launchers {
    ($then:ident { $($head:tt)* } $V:ty) => {
        $then! {
            $($head)*
            raw_scan_blocks = scan_blocks(n: i64, data: *mut i64, block_sums: *mut i64);
            raw_scan_sums = scan_sums(nblocks: i64, block_sums: *mut i64);
            raw_scan_add = scan_add(n: i64, data: *mut i64, block_sums: *const i64);
            raw_write_offsets = write_offsets(
                m: i64,
                offsets: *const i64,
                c_rows: *mut crate::OffsetOf<$V>,
                base: i32,
                error: *mut u64,
            );
            raw_write_offsets_wide = write_offsets_wide(
                m: i64,
                offsets: *const i64,
                c_rows: *mut i64,
                base: i32,
                error: *mut u64,
            );
            raw_write_offsets_narrow = write_offsets_narrow(
                m: i64,
                offsets: *const i64,
                c_rows: *mut i32,
                base: i32,
                error: *mut u64,
            );
            raw_bin_count = bin_count(
                m: i64,
                row_size: *const i64,
                a_rows: *const crate::OffsetOf<$V>,
                a_base: i32,
                bounds: *const i64,
                nb: i32,
                bin_size: *mut i64,
                max_size: *mut i64,
            );
            raw_bin_fill = bin_fill(
                m: i64,
                row_size: *const i64,
                a_rows: *const crate::OffsetOf<$V>,
                a_base: i32,
                bounds: *const i64,
                nb: i32,
                bin_offset: *const i64,
                bin_cursor: *mut i64,
                bins: *mut u32,
            );
        }
    };
}

scan_binning_launchers!(launcher_trait {
    /// The raw host entry points of `launch_scan_binning.cpp`, one per kernel.
    ///
    /// # Safety
    /// Every pointer must be valid for all the kernel reads and writes (the
    /// safe functions of this module check the lengths), and the launch
    /// geometry must be what the kernel expects.
    pub trait ScanBinning(grid, block, shared);
} Self);

for_each_variant!(
    launchers_for_variant,
    scan_binning_launchers,
    ScanBinning,
    (grid, block, shared)
);

/// Largest `nb` the binning kernels take (`RS_BIN_MAX - 1` in binning.cu).
pub const MAX_BINS: usize = 31;

/// Tiles of `rs_scan_blocks` for `n` items and blocks of `block` threads.
pub fn scan_tiles(n: usize, block: i64) -> usize {
    n.div_ceil(2 * block as usize)
}

/// `rs_scan_blocks` over all of `data`: each tile of `2 * block` items
/// scanned in place, tile totals to `block_sums` (`scan_tiles` entries).
pub fn scan_blocks<V: ScanBinning>(l: Launch, data: &mut [i64], block_sums: &mut [i64]) {
    need("block_sums", block_sums, scan_tiles(data.len(), l.block));
    unsafe {
        V::raw_scan_blocks(
            l,
            data.len() as i64,
            data.as_mut_ptr(),
            block_sums.as_mut_ptr(),
        )
    }
}

/// `rs_scan_sums`: exclusive scan of `block_sums` in place (one block does
/// the work).
pub fn scan_sums<V: ScanBinning>(l: Launch, block_sums: &mut [i64]) {
    unsafe { V::raw_scan_sums(l, block_sums.len() as i64, block_sums.as_mut_ptr()) }
}

/// `rs_scan_add`: adds tile `t`'s offset `block_sums[t]` to its items
/// (`l.block` must be the block of the `scan_blocks` launch).
pub fn scan_add<V: ScanBinning>(l: Launch, data: &mut [i64], block_sums: &[i64]) {
    need("block_sums", block_sums, scan_tiles(data.len(), l.block));
    unsafe { V::raw_scan_add(l, data.len() as i64, data.as_mut_ptr(), block_sums.as_ptr()) }
}

/// The device scan as a back end runs it: `rs_scan_blocks` on `grid`
/// blocks (at most one per tile), `rs_scan_sums` on one block,
/// `rs_scan_add` on `grid` blocks. Exclusive, in place.
pub fn exclusive_scan<V: ScanBinning>(block: i64, grid: i64, data: &mut [i64]) {
    let tiles = scan_tiles(data.len(), block);
    let grid = grid.min(tiles as i64).max(1);
    let mut sums = vec![0i64; tiles];
    scan_blocks::<V>(Launch::new(grid, block), data, &mut sums);
    scan_sums::<V>(Launch::new(1, block), &mut sums);
    scan_add::<V>(Launch::new(grid, block), data, &sums);
}

/// `rs_write_offsets`: `c_rows[i] = offsets[i] + base` for `i <= m`, with
/// `m = offsets.len() - 1`; an offset beyond `offset_t` sets
/// `*error = min(*error, ((i - 1) << 8) | 5)` instead.
pub fn write_offsets<V: ScanBinning>(
    l: Launch,
    offsets: &[i64],
    c_rows: &mut [V::Offset],
    base: i32,
    error: &mut u64,
) {
    let m = offsets
        .len()
        .checked_sub(1)
        .expect("offsets holds m + 1 entries");
    need("c_rows", c_rows, m + 1);
    unsafe {
        V::raw_write_offsets(
            l,
            m as i64,
            offsets.as_ptr(),
            c_rows.as_mut_ptr(),
            base,
            error,
        )
    }
}

/// `rs_write_offsets_wide` (`c_rows` of `i64`) and `rs_write_offsets_narrow`
/// (`i32`): [`write_offsets`] into C row offsets of a type other than
/// A's and B's, whatever the variant's `offset_t`.
pub fn write_offsets_as<V: ScanBinning, O: Index>(
    l: Launch,
    offsets: &[i64],
    c_rows: &mut [O],
    base: i32,
    error: &mut u64,
) {
    let m = offsets
        .len()
        .checked_sub(1)
        .expect("offsets holds m + 1 entries");
    need("c_rows", c_rows, m + 1);
    let (m, offsets, c_rows) = (m as i64, offsets.as_ptr(), c_rows.as_mut_ptr());
    // SAFETY: lengths checked above; O is exactly i64 or i32 (the casts
    // below only reinterpret the same type).
    unsafe {
        if std::mem::size_of::<O>() == 8 {
            V::raw_write_offsets_wide(l, m, offsets, c_rows.cast(), base, error)
        } else {
            V::raw_write_offsets_narrow(l, m, offsets, c_rows.cast(), base, error)
        }
    }
}

fn check_bins<O: Index>(m: usize, row_size: &[i64], a_rows: Option<&[O]>, bounds: &[i64]) {
    need("row_size", row_size, m);
    if let Some(a) = a_rows {
        need("a_rows", a, m + 1);
    }
    assert!(
        (1..=MAX_BINS).contains(&bounds.len()),
        "{} bins: the kernels take 1 to {MAX_BINS}",
        bounds.len()
    );
}

/// `rs_bin_count` over rows `0..m`: adds each bin's row count to
/// `bin_size[j]` (`bounds.len() + 1` entries, the last the direct bin of
/// rows whose A row (`a_rows`) has one entry) and raises `*max_size` to the
/// largest size.
pub fn bin_count<V: ScanBinning>(
    l: Launch,
    m: usize,
    row_size: &[i64],
    a_rows: Option<&[V::Offset]>,
    bounds: &[i64],
    bin_size: &mut [i64],
    max_size: &mut i64,
) {
    check_bins(m, row_size, a_rows, bounds);
    need("bin_size", bin_size, bounds.len() + 1);
    unsafe {
        V::raw_bin_count(
            l,
            m as i64,
            row_size.as_ptr(),
            a_rows.map_or(std::ptr::null(), <[V::Offset]>::as_ptr),
            0,
            bounds.as_ptr(),
            bounds.len() as i32,
            bin_size.as_mut_ptr(),
            max_size,
        )
    }
}

/// `rs_bin_fill` over rows `0..m`: writes each row of bin `j` to
/// `bins[bin_offset[j] + k]`, counting `k` in `bin_cursor[j]`.
///
/// # Safety
/// For every bin `j`, `bin_offset[j]` plus the number of rows `rs_bin_count`
/// counts in bin `j` must be at most `bins.len()` (true when `bin_offset` is
/// the exclusive scan of correct counts and `bins` has their sum), and
/// `bin_cursor` must start at zero.
#[allow(clippy::too_many_arguments)]
pub unsafe fn bin_fill<V: ScanBinning>(
    l: Launch,
    m: usize,
    row_size: &[i64],
    a_rows: Option<&[V::Offset]>,
    bounds: &[i64],
    bin_offset: &[i64],
    bin_cursor: &mut [i64],
    bins: &mut [u32],
) {
    check_bins(m, row_size, a_rows, bounds);
    need("bin_offset", bin_offset, bounds.len() + 1);
    need("bin_cursor", bin_cursor, bounds.len() + 1);
    unsafe {
        V::raw_bin_fill(
            l,
            m as i64,
            row_size.as_ptr(),
            a_rows.map_or(std::ptr::null(), <[V::Offset]>::as_ptr),
            0,
            bounds.as_ptr(),
            bounds.len() as i32,
            bin_offset.as_ptr(),
            bin_cursor.as_mut_ptr(),
            bins.as_mut_ptr(),
        )
    }
}
