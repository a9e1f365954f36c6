//! `kernels/transpose.cu` through `kernels/testing/launch_transpose.cpp`,
//! and [`transpose`], a host driver of the whole device transpose (count,
//! scan, offsets, scatter, row sorts, gather) as the CUDA back end runs it,
//! for the tests in `tests/transpose.rs`.

use crate::scan_binning;
use crate::{need, Kernels, Launch, Variant};
use rusparse::Index;

pub use crate::Csr;

/// The entry points of this launcher file after the launch geometry
/// `(grid, block, shared)`, with `$V` for the variant: the one list that
/// [`TransposeKernels`] and its implementation for every variant are made from
/// (`raw_x = x`: the method `raw_x` calls `rs_host_x_<suffix>`).
macro_rules! transpose_launchers {
    ($then:ident { $($head:tt)* } $V:ty) => {
        $then! {
            $($head)*
            raw_transpose_count = transpose_count(x: crate::Csr<$V>, counts: *mut i64);
            raw_transpose_scatter = transpose_scatter(
                x: crate::Csr<$V>,
                cursor: *mut i64,
                t_cols: *mut crate::IndexOf<$V>,
                perm: *mut crate::OffsetOf<$V>,
            );
            raw_transpose_sort_rows = transpose_sort_rows(
                nrows: i64,
                rows: *const crate::OffsetOf<$V>,
                base: i32,
                perm: *mut crate::OffsetOf<$V>,
                cols: *mut crate::IndexOf<$V>,
                long_rows: i32,
            );
            raw_transpose_gather = transpose_gather(
                nnz: i64,
                perm: *const crate::OffsetOf<$V>,
                src: *const crate::ValueOf<$V>,
                dst: *mut crate::ValueOf<$V>,
                conjugate: i32,
            );
        }
    };
}

transpose_launchers!(launcher_trait {
    /// The raw host entry points of `launch_transpose.cpp`, one per kernel,
    /// with the kernel's parameters after the launch geometry. Pointers are
    /// host pointers.
    ///
    /// # Safety
    /// Every function runs a kernel that reads and writes through its pointers
    /// as kernels/README.md ("Transposes") says: `counts`/`cursor` hold
    /// `ncols + 1` words, `t_cols`/`perm`/`dst` hold nnz entries, `rows` is a
    /// valid row pointer of `nrows + 1` entries. [`transpose`] is the safe way
    /// in.
    pub trait TransposeKernels(grid, block, shared);
} Self);

for_each_variant!(
    launchers_for_variant,
    transpose_launchers,
    TransposeKernels,
    (grid, block, shared)
);

/// What the transpose tests run: every launcher of the crate plus this one.
pub trait TransposeVariant: Kernels + TransposeKernels {}
impl<T: Kernels + TransposeKernels> TransposeVariant for T {}

/// Runs a test body once per variant (as [`crate::VariantVisitor`], with
/// the transpose kernels available).
pub trait TransposeVisitor {
    /// Called once per variant.
    fn visit<V: TransposeVariant>(&mut self);
}

/// Calls `visitor.visit::<V>()` for every variant.
pub fn visit_transpose_variants(visitor: &mut impl TransposeVisitor) {
    macro_rules! visit {
        ($name:ident, $($rest:tt)*) => {
            visitor.visit::<crate::$name>();
        };
    }
    for_each_variant!(visit);
}

/// Launch geometry of the device transpose: blocks of `block` threads
/// (a multiple of the warp), at most `grid` blocks per kernel.
#[derive(Clone, Copy, Debug)]
pub struct TransposeConfig {
    /// Threads per block.
    pub block: i64,
    /// Most blocks of a grid-stride launch.
    pub grid: i64,
}

/// The transpose of a matrix as the device builds it: `ncols + 1` row
/// offsets (with the input's base), the row (with base) of each entry, the
/// entry's position in the input, and the values.
#[derive(Clone, Debug, PartialEq)]
pub struct Transposed<V: Variant> {
    /// `ncols + 1` offsets, starting at the input's base.
    pub rows: Vec<V::Offset>,
    /// Column indices (the input's rows, base-based).
    pub cols: Vec<V::Index>,
    /// Position of each entry in the input.
    pub perm: Vec<V::Offset>,
    /// Values (conjugated for op C).
    pub vals: Vec<V::Value>,
}

/// `rs_transpose_count` over `x`'s entries: `counts[c] += ` entries of
/// column `c` (`x.ncols + 1` words).
pub fn count<V: TransposeKernels>(l: Launch, x: &Csr<'_, V>, counts: &mut [i64]) {
    need("counts", counts, x.ncols as usize + 1);
    unsafe { V::raw_transpose_count(l, *x, counts.as_mut_ptr()) }
}

/// `rs_transpose_sort_rows` over `rows` (`nrows + 1` offsets).
pub fn sort_rows<V: TransposeKernels>(
    l: Launch,
    rows: &[V::Offset],
    base: i32,
    perm: &mut [V::Offset],
    cols: &mut [V::Index],
    long_rows: bool,
) {
    let nrows = rows.len().checked_sub(1).expect("nrows + 1 offsets");
    let nnz = (rows[nrows].to_i64() - i64::from(base)) as usize;
    need("perm", perm, nnz);
    need("cols", cols, nnz);
    assert!(
        rows.windows(2).all(|w| w[0] <= w[1]) && rows[0].to_i64() == i64::from(base),
        "rows must be a valid row pointer"
    );
    unsafe {
        V::raw_transpose_sort_rows(
            l,
            nrows as i64,
            rows.as_ptr(),
            base,
            perm.as_mut_ptr(),
            cols.as_mut_ptr(),
            i32::from(long_rows),
        )
    }
}

/// `rs_transpose_gather`: `dst[k] = src[perm[k]]` (conjugated with
/// `conjugate`); `perm` entries outside `0..nnz` are skipped.
pub fn gather<V: TransposeKernels>(
    l: Launch,
    perm: &[V::Offset],
    src: &[V::Value],
    dst: &mut [V::Value],
    conjugate: bool,
) {
    let nnz = perm.len();
    need("src", src, nnz);
    need("dst", dst, nnz);
    unsafe {
        V::raw_transpose_gather(
            l,
            nnz as i64,
            perm.as_ptr(),
            src.as_ptr(),
            dst.as_mut_ptr(),
            i32::from(conjugate),
        )
    }
}

/// The whole device transpose of a valid `x` (offsets and columns checked),
/// as the CUDA back end runs it: count, scan, `rs_write_offsets`, cursor
/// copy, scatter, sort (short rows by warps, then long rows by blocks),
/// gather (with `vals`).
pub fn transpose<V: TransposeVariant>(
    cfg: TransposeConfig,
    x: &Csr<'_, V>,
    vals: &[V::Value],
    conjugate: bool,
) -> Transposed<V> {
    let (ncols, nnz) = (x.ncols as usize, x.nnz as usize);
    let grid =
        |items: usize| -> i64 { ((items as i64 + cfg.block - 1) / cfg.block).clamp(1, cfg.grid) };
    let mut counts = vec![0i64; ncols + 1];
    count::<V>(Launch::new(grid(nnz), cfg.block), x, &mut counts);
    scan_binning::exclusive_scan::<V>(cfg.block, cfg.grid, &mut counts);
    let mut rows = vec![V::Offset::default(); ncols + 1];
    let mut error = u64::MAX;
    scan_binning::write_offsets::<V>(
        Launch::new(grid(ncols + 1), cfg.block),
        &counts,
        &mut rows,
        x.base,
        &mut error,
    );
    assert_eq!(error, u64::MAX, "the transpose's offsets overflow");
    let mut cursor = counts.clone();
    let mut cols = vec![V::Index::default(); nnz];
    let mut perm = vec![V::Offset::default(); nnz];
    let warps = (x.nrows as usize).div_ceil((cfg.block / V::WARP) as usize);
    // SAFETY: the cursors start at the scanned counts of the same entries,
    // so every slot lies in 0..nnz.
    unsafe {
        V::raw_transpose_scatter(
            Launch::new(warps.clamp(1, cfg.grid as usize) as i64, cfg.block),
            *x,
            cursor.as_mut_ptr(),
            cols.as_mut_ptr(),
            perm.as_mut_ptr(),
        )
    }
    let warps = ncols.div_ceil((cfg.block / V::WARP) as usize);
    sort_rows::<V>(
        Launch::new(warps.clamp(1, cfg.grid as usize) as i64, cfg.block),
        &rows,
        x.base,
        &mut perm,
        &mut cols,
        false,
    );
    sort_rows::<V>(
        Launch::new(ncols.clamp(1, cfg.grid as usize) as i64, cfg.block),
        &rows,
        x.base,
        &mut perm,
        &mut cols,
        true,
    );
    let mut t_vals = vec![<V::Value as rusparse::Scalar>::zero(); nnz];
    gather::<V>(
        Launch::new(grid(nnz), cfg.block),
        &perm,
        vals,
        &mut t_vals,
        conjugate,
    );
    Transposed {
        rows,
        cols,
        perm,
        vals: t_vals,
    }
}
