//! Work per output row (nprod: the number of scalar products that row needs)
//! and the split of the rows into contiguous chunks of equal work.

use super::operand::RowPattern;
use crate::error::{try_reserve, try_vec, Result};
use crate::parallel::map_pieces;
use crate::types::Index;

/// Rows per parallel task when counting products.
const COUNT_GRAIN: usize = 4096;

/// Work per row of `op(A) * op(B)` and the balanced chunks it is split into.
#[derive(Debug, Clone)]
pub struct RowWork {
    /// `prefix[i]` = products of rows `0..i` (so `nrows + 1` entries).
    prefix: Vec<u64>,
    /// Chunk boundaries: chunk `c` is rows `bounds[c]..bounds[c + 1]`.
    bounds: Vec<usize>,
    /// The largest nprod of a single row.
    max_row: u64,
    /// Rows with products by magnitude of nprod and of entry count (see
    /// [`RowWork::strata`]).
    strata: Strata,
    /// Bit `m` of entry `k`: some row of `k * MAGNITUDE_BLOCK ..` has nprod
    /// in `[2^m, 2^(m+1))` (see [`RowWork::block_magnitudes`]).
    block_magnitudes: Vec<u64>,
    /// Whether consecutive rows of op(A) read rows of op(B) that follow
    /// each other (see [`RowWork::b_rows_in_order`]).
    b_rows_in_order: bool,
    /// Whether op(B)'s rows take at most [`CACHED_B_BYTES`] (see
    /// [`RowWork::b_fits_in_cache`]).
    b_fits_in_cache: bool,
    /// For A·A (op(B) is op(A)'s very pattern), whether its rows are
    /// canonical, checked on the counting pass (see
    /// [`RowWork::b_rows_canonical`]).
    b_canonical: Option<bool>,
    /// The length every row of op(B) has, when they all have the same
    /// (see [`RowWork::b_row_length`]).
    b_row_length: Option<u64>,
}

/// An entry of op(A) whose column lies at most this far past the column
/// of the entry at the same position of the row before counts as reading
/// op(B) in order ([`RowWork::b_rows_in_order`]).
const IN_ORDER_STEP: usize = 8;

/// The share of op(A)'s entries that must read op(B) in order for
/// [`RowWork::b_rows_in_order`].
const IN_ORDER_SHARE: f64 = 0.75;

/// op(B) whose columns, values and row offsets take at most this many
/// bytes (counting 16 bytes an entry and 8 a row) stays in a core's L2
/// cache once read ([`RowWork::b_fits_in_cache`]).
const CACHED_B_BYTES: usize = 256 << 10;

/// Rows compared with the row before for [`RowWork::b_rows_in_order`]: one
/// in this many (comparing every row cost 4.5 ms of 19 in planning
/// stencil2d_5pt_725 on one thread).
const IN_ORDER_SAMPLE: usize = 16;

/// How many entries of row `i > 0` of `a` lie at most [`IN_ORDER_STEP`]
/// columns past the entry at the same position of row `i - 1` (none when
/// the two rows differ in length).
#[inline]
fn entries_in_order<I: Index, J: Index>(a: &RowPattern<'_, I, J>, i: usize) -> u64 {
    let (p, r) = (a.range(i - 1), a.range(i));
    if p.len() != r.len() {
        return 0;
    }
    let (p, r) = (&a.cols[p], &a.cols[r]);
    let mut n = 0;
    for (&x, &y) in p.iter().zip(r) {
        n += u64::from(y.as_usize().wrapping_sub(x.as_usize()) <= IN_ORDER_STEP);
    }
    n
}

/// The length every row of `b` has, if they all have the same (`None`
/// for no rows, or as soon as two rows differ: a pass over the offsets
/// that stops early on most operands). An aggregation (GAMG's tentative
/// prolongator: one entry a row) is such an operand, and
/// [`RowWork::new`] then counts a row's products as its entries times
/// that length, without reading op(B)'s offsets at each entry of A (27-point
/// Poisson at 64³ times its aggregation, one thread, minimum of 15 runs:
/// the plan 16.1 -> 10.2 ms, beside a listing of 36-39 ms).
fn uniform_row_length<I: Index, J: Index>(b: &RowPattern<'_, I, J>) -> Option<u64> {
    let first = b.offsets.first()?.as_usize();
    let l = b.offsets.get(1)?.as_usize() - first;
    let mut expected = first;
    for o in b.offsets {
        if o.as_usize() != expected {
            return None;
        }
        expected += l;
    }
    Some(l as u64)
}

/// Rows per entry of [`RowWork::block_magnitudes`] (a divisor of the
/// counting grain).
pub const MAGNITUDE_BLOCK: usize = 256;

/// Rows with products grouped by the binary magnitude of their nprod and
/// of their number of entries in A (the rows of B they merge):
/// `strata[stratum_of(nprod, entries)]` counts those rows and their
/// products. Gathered while counting, for the output-size prediction.
pub type Strata = [Stratum; STRATA];

/// Number of groups in [`Strata`]: 64 magnitudes of nprod times
/// [`ENTRY_CLASSES`] classes of row length.
pub const STRATA: usize = 64 * ENTRY_CLASSES;

/// Classes of a row's entry count: 1, 2-3, 4-7, 8 or more.
pub const ENTRY_CLASSES: usize = 4;

/// One group of [`Strata`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stratum {
    /// Rows in the group.
    pub rows: u64,
    /// Their products.
    pub products: u64,
    /// The sum over its rows of a lower bound of the row's nnz in C: the
    /// longest row of B the row merges (see [`row_lower_bound`]).
    pub lower_bound: u64,
}

/// A lower bound of nnz of row `i` of `a * b` when B's rows hold no
/// duplicate columns: the length of the longest
/// row of B it merges (all of that row's columns appear in the output).
#[inline]
pub fn row_lower_bound<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    i: usize,
) -> u64 {
    a.range(i)
        .map(|k| b.row_len(a.col(k)) as u64)
        .max()
        .unwrap_or(0)
}

/// What the output-size prediction reads of a row of op(A) besides its
/// work: how many rows of op(B) it merges (its entries) and the length of
/// the longest of them (a lower bound of the row's nnz in C, see
/// [`row_lower_bound`]).
pub trait RowShapes: Sync {
    /// Entries of row `i` of op(A); counts above 255 may read as 255 (only
    /// their class, [`ENTRY_CLASSES`], matters).
    fn entries(&self, i: usize) -> usize;
    /// The length of the longest row of op(B) that row `i` merges (0 for
    /// an empty row).
    fn longest_merged(&self, i: usize) -> u64;
}

/// The shapes of the rows of `a * b` read from the patterns themselves
/// (the CPU back end).
pub struct PatternShapes<'p, 'a, I, J> {
    /// op(A).
    pub a: &'p RowPattern<'a, I, J>,
    /// op(B).
    pub b: &'p RowPattern<'a, I, J>,
}

impl<I: Index, J: Index> RowShapes for PatternShapes<'_, '_, I, J> {
    fn entries(&self, i: usize) -> usize {
        self.a.row_len(i)
    }
    fn longest_merged(&self, i: usize) -> u64 {
        row_lower_bound(self.a, self.b, i)
    }
}

/// Row shapes counted elsewhere, one word per row of op(A) as the GPU's
/// `rs_row_shapes` kernel writes them ([`PackedRowShapes::pack`]).
#[derive(Debug, Clone, Copy)]
pub struct PackedRowShapes<'a>(pub &'a [u64]);

impl PackedRowShapes<'_> {
    /// The word of a row with `entries` entries whose longest merged row
    /// of op(B) has `longest` entries: `longest << 8 | min(entries, 255)`
    /// (`longest` below 2^56).
    pub fn pack(entries: u64, longest: u64) -> u64 {
        longest << 8 | entries.min(255)
    }
}

impl RowShapes for PackedRowShapes<'_> {
    fn entries(&self, i: usize) -> usize {
        (self.0[i] & 255) as usize
    }
    fn longest_merged(&self, i: usize) -> u64 {
        self.0[i] >> 8
    }
}

/// The binary magnitude of `nprod > 0`: `m` with `nprod` in
/// `[2^m, 2^(m+1))`.
#[inline]
pub fn magnitude(nprod: u64) -> usize {
    nprod.ilog2() as usize
}

/// The group of a row with `nprod > 0` products and `entries > 0` entries
/// in A.
#[inline]
pub fn stratum_of(nprod: u64, entries: usize) -> usize {
    let magnitude = magnitude(nprod);
    let class = (usize::BITS - 1 - entries.leading_zeros()) as usize;
    magnitude * ENTRY_CLASSES + class.min(ENTRY_CLASSES - 1)
}

fn add_strata(mut x: Strata, y: Strata) -> Strata {
    for (a, b) in x.iter_mut().zip(y) {
        a.rows += b.rows;
        a.products += b.products;
        a.lower_bound += b.lower_bound;
    }
    x
}

/// A piece of [`RowWork::new`]'s count: rows `first..` of `a` (one per
/// slot of `out`, which gets each row's nprod; `magnitudes`: the piece's
/// blocks of [`MAGNITUDE_BLOCK`] rows), adding its rows to `strata` and
/// its sampled rows to `in_order`; returns the largest nprod.
type Piece<'p> = (usize, &'p mut [u64], &'p mut [u64]);

/// [`RowWork::new`]'s count of a piece (see [`Piece`]) for any op(B): one
/// bounds check per row of A (its entries) and per entry (the two offsets
/// of B's row), columns and offsets walked as slices: this loop is a pass
/// over every entry of A on every product.
fn count_piece<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    (first, out, magnitudes): Piece<'_>,
    strata: &mut Strata,
    in_order: &mut (u64, u64),
) -> u64 {
    let mut max_row = 0u64;
    let offsets = &a.offsets[first..=first + out.len()];
    let mut start = offsets[0].as_usize() - a.base;
    for (r, (slot, end)) in out.iter_mut().zip(&offsets[1..]).enumerate() {
        let end = end.as_usize() - a.base;
        let entries = &a.cols[start..end];
        if r % IN_ORDER_SAMPLE == 1 {
            in_order.0 += entries_in_order(a, first + r);
            in_order.1 += entries.len() as u64;
        }
        let (mut nprod, mut longest) = (0u64, 0u64);
        for &k in entries {
            let j = k.as_usize() - a.base;
            let row = &b.offsets[j..j + 2];
            let l = (row[1].as_usize() - row[0].as_usize()) as u64;
            nprod += l;
            longest = longest.max(l);
        }
        *slot = nprod;
        max_row = max_row.max(nprod);
        if nprod > 0 {
            magnitudes[r / MAGNITUDE_BLOCK] |= 1 << magnitude(nprod);
            let s = &mut strata[stratum_of(nprod, entries.len())];
            s.rows += 1;
            s.products += nprod;
            s.lower_bound += longest;
        }
        start = end;
    }
    max_row
}

/// [`count_piece`] where every row of op(B) has `l` entries (see
/// [`uniform_row_length`]): a row's products are its entries times `l`,
/// read from A's offsets alone, and a run of rows of one length (a
/// stencil's interior) joins its stratum at once, as a block's magnitudes
/// do, rather than row by row through memory (the same counts). The
/// sample of rows in order ([`RowWork::b_rows_in_order`]) takes one row of
/// each block of [`MAGNITUDE_BLOCK`] rather than one of
/// [`IN_ORDER_SAMPLE`].
fn count_uniform_piece<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    l: u64,
    (first, out, magnitudes): Piece<'_>,
    strata: &mut Strata,
    in_order: &mut (u64, u64),
) -> u64 {
    let offsets = &a.offsets[first..=first + out.len()];
    let mut add_run = |(entries, rows): (usize, u64)| {
        let nprod = entries as u64 * l;
        if nprod > 0 && rows > 0 {
            let s = &mut strata[stratum_of(nprod, entries)];
            s.rows += rows;
            s.products += rows * nprod;
            s.lower_bound += rows * l;
        }
    };
    let (mut run, mut longest) = ((0usize, 0u64), 0usize);
    for (block, (slots, bits)) in out.chunks_mut(MAGNITUDE_BLOCK).zip(magnitudes).enumerate() {
        let r0 = block * MAGNITUDE_BLOCK;
        let ends = &offsets[r0..=r0 + slots.len()];
        let mut mask = 0u64;
        for (k, (slot, pair)) in slots.iter_mut().zip(ends.windows(2)).enumerate() {
            let entries = pair[1].as_usize() - pair[0].as_usize();
            // One row a block in the sample: A's columns are read for it
            // alone, a cache miss each (every 16th row took 3 ms of a 3.4
            // ms count at 27 points, 64³).
            if k == 1 {
                in_order.0 += entries_in_order(a, first + r0 + k);
                in_order.1 += entries as u64;
            }
            let nprod = entries as u64 * l;
            *slot = nprod;
            longest = longest.max(entries);
            if nprod > 0 {
                mask |= 1 << magnitude(nprod);
            }
            if entries != run.0 {
                add_run(run);
                run = (entries, 0);
            }
            run.1 += 1;
        }
        *bits |= mask;
    }
    add_run(run);
    longest as u64 * l
}

impl RowWork {
    /// Bytes [`RowWork::new`] allocates for `nrows` rows (saturating).
    pub fn bytes_needed(nrows: usize) -> u64 {
        (nrows as u64)
            .saturating_add(1)
            .saturating_add((nrows as u64).div_ceil(MAGNITUDE_BLOCK as u64))
            .saturating_mul(8)
    }

    /// Counts the products of every row of `a * b` (both already `op`-applied)
    /// in parallel, then splits the rows into `chunks` contiguous ranges of
    /// about equal work. A row weighs its nprod plus one, so runs of empty
    /// rows are not all given to one chunk.
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`].
    pub fn new<I: Index, J: Index>(
        a: &RowPattern<'_, I, J>,
        b: &RowPattern<'_, I, J>,
        chunks: usize,
    ) -> Result<Self> {
        let m = a.nrows;
        let mut prefix = try_vec(m + 1, 0u64, "row products")?;
        let mut block_magnitudes = try_vec(m.div_ceil(MAGNITUDE_BLOCK), 0u64, "row magnitudes")?;
        let pieces = prefix[1..]
            .chunks_mut(COUNT_GRAIN)
            .zip(block_magnitudes.chunks_mut(COUNT_GRAIN / MAGNITUDE_BLOCK))
            .enumerate()
            .collect();
        let b_is_a = a.same_arrays(b);
        let uniform = uniform_row_length(b);
        let (strata, in_order, max_row, canonical) =
            map_pieces(pieces, |(c, (out, magnitudes))| {
                let first = c * COUNT_GRAIN;
                let mut strata = [Stratum::default(); STRATA];
                let mut in_order = (0u64, 0u64);
                let rows = first..first + out.len();
                let max_row = match uniform {
                    // Every row of op(B) has `l` entries: no need to read
                    // their offsets.
                    Some(l) => {
                        let piece = (first, out, magnitudes);
                        count_uniform_piece(a, l, piece, &mut strata, &mut in_order)
                    }
                    None => {
                        let piece = (first, out, magnitudes);
                        count_piece(a, b, piece, &mut strata, &mut in_order)
                    }
                };
                // A·A: B's rows are these, just read (in cache).
                let canonical = b_is_a && a.block_canonical(rows);
                (strata, in_order, max_row, canonical)
            })
            .into_iter()
            .fold(
                ([Stratum::default(); STRATA], (0, 0), 0, true),
                |(x, p, m, k), (y, q, n, l)| {
                    (add_strata(x, y), (p.0 + q.0, p.1 + q.1), m.max(n), k && l)
                },
            );
        for i in 0..m {
            prefix[i + 1] += prefix[i];
        }
        let bounds = balanced_bounds(&prefix, chunks)?;
        let (in_order, sampled) = (in_order.0 as f64, in_order.1 as f64);
        Ok(RowWork {
            prefix,
            bounds,
            max_row,
            strata,
            block_magnitudes,
            b_rows_in_order: sampled > 0.0 && in_order >= IN_ORDER_SHARE * sampled,
            b_fits_in_cache: b.cols.len().saturating_mul(16).saturating_add(b.nrows * 8)
                <= CACHED_B_BYTES,
            b_canonical: b_is_a.then_some(canonical),
            b_row_length: uniform,
        })
    }

    /// The work of rows whose products and shapes were counted elsewhere
    /// (a GPU's work estimation and `rs_row_shapes`): `products[i]` is row
    /// `i`'s nprod, `shapes` its entries and longest merged row of op(B).
    /// One chunk; the strata as [`RowWork::new`] gathers them.
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`].
    pub fn from_row_products(products: &[u64], shapes: &impl RowShapes) -> Result<Self> {
        let m = products.len();
        let mut prefix = Vec::new();
        try_reserve(&mut prefix, m + 1, "row products")?;
        prefix.push(0u64);
        let mut block_magnitudes = try_vec(m.div_ceil(MAGNITUDE_BLOCK), 0u64, "row magnitudes")?;
        let mut strata = [Stratum::default(); STRATA];
        for (i, &p) in products.iter().enumerate() {
            if p > 0 {
                block_magnitudes[i / MAGNITUDE_BLOCK] |= 1 << magnitude(p);
                let s = &mut strata[stratum_of(p, shapes.entries(i))];
                s.rows += 1;
                s.products += p;
                s.lower_bound += shapes.longest_merged(i);
            }
            prefix.push(prefix[i] + p);
        }
        let bounds = balanced_bounds(&prefix, 1)?;
        Ok(RowWork {
            prefix,
            bounds,
            max_row: products.iter().copied().max().unwrap_or(0),
            strata,
            block_magnitudes,
            b_rows_in_order: false,
            b_fits_in_cache: false,
            b_canonical: None,
            b_row_length: None,
        })
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.prefix.len() - 1
    }
    /// Total number of products (nprod of the whole product).
    pub fn total(&self) -> u64 {
        self.prefix[self.nrows()]
    }
    /// Products of row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> u64 {
        self.prefix[i + 1] - self.prefix[i]
    }
    /// Products of the rows `range`.
    pub fn rows(&self, range: std::ops::Range<usize>) -> u64 {
        self.prefix[range.end] - self.prefix[range.start]
    }
    /// The row holding product number `position` (`position < total()`),
    /// counting products row by row: the row `i` with
    /// `prefix[i] <= position < prefix[i + 1]` (so never an empty row).
    pub fn row_containing(&self, position: u64) -> usize {
        debug_assert!(position < self.total());
        self.prefix.partition_point(|&p| p <= position) - 1
    }
    /// The row holding the middle product of the `k`-th of `parts` equal
    /// shares of the work (`k < parts`, `total() > 0`): evenly spaced
    /// samples by work.
    pub fn row_at_share(&self, k: u64, parts: u64) -> usize {
        let position = ((2 * k + 1) as u128 * self.total() as u128 / (2 * parts) as u128) as u64;
        self.row_containing(position)
    }

    /// The rows with products grouped by the magnitudes of their nprod
    /// and entry count ([`Strata`]).
    pub fn strata(&self) -> &Strata {
        &self.strata
    }

    /// A lower bound of nnz(C): the sum over the rows of op(A) of the
    /// longest row of op(B) each one merges when op(B)'s rows hold no
    /// duplicate columns (`b_canonical`), else the number of rows with
    /// products.
    pub fn nnz_lower_bound(&self, b_canonical: bool) -> u64 {
        let strata = self.strata.iter();
        if b_canonical {
            strata.map(|s| s.lower_bound).sum()
        } else {
            strata.map(|s| s.rows).sum()
        }
    }
    /// For each block of [`MAGNITUDE_BLOCK`] rows, the binary magnitudes
    /// of its rows' nprod: bit `m` is set when some row of the block has
    /// nprod in `[2^m, 2^(m+1))` (empty rows set none). Lets the sampler
    /// pass over blocks without a row of the groups it looks for.
    pub fn block_magnitudes(&self) -> &[u64] {
        &self.block_magnitudes
    }
    /// Whether most entries of op(A) (at least 75 % of them, in a sample of
    /// one row in 16) lie at most 8 columns past the entry at the same
    /// position of the row before: then consecutive rows of C read rows of
    /// op(B) that follow each other (stencils, bands, structured meshes),
    /// which the hardware prefetcher already streams, and the CPU kernels
    /// do not prefetch them. False for work counted elsewhere
    /// ([`RowWork::from_row_products`]).
    pub fn b_rows_in_order(&self) -> bool {
        self.b_rows_in_order
    }
    /// Whether op(B) is small enough to stay in a core's cache once read
    /// (at most 256 KiB counting 16 bytes an entry and 8 a row; 1138_bus):
    /// then its rows are no cache misses however A's rows read them, and
    /// the CPU kernels neither prefetch them nor sort short rows instead
    /// of accumulating them (1138_bus squared, one thread, minimum of 500
    /// interleaved runs: numeric phase 0.24 -> 0.20 ms). False for work counted
    /// elsewhere ([`RowWork::from_row_products`]).
    pub fn b_fits_in_cache(&self) -> bool {
        self.b_fits_in_cache
    }
    /// The length every row of op(B) had when the work was counted, if
    /// they all had the same (an aggregation such as GAMG's tentative
    /// prolongator has one entry a row): then row `r` of op(B) holds the
    /// entries `origin + r * length ..` of its arrays, found without
    /// reading its offsets. `None` for work counted elsewhere
    /// ([`RowWork::from_row_products`]).
    pub fn b_row_length(&self) -> Option<u64> {
        self.b_row_length
    }
    /// When op(B) is op(A)'s very pattern (A·A), whether its rows are
    /// canonical ([`RowPattern::rows_canonical`]), checked block by block
    /// on the counting pass while the block is in cache, which spares the
    /// plan a second pass over A's columns (stencil2d_5pt_725, one thread:
    /// that pass took about 2.5 ms of a 15 ms plan with the data cold; the
    /// whole plan measured about 1 ms faster). `None` otherwise.
    pub fn b_rows_canonical(&self) -> Option<bool> {
        self.b_canonical
    }
    /// The largest nprod of one row.
    pub fn max_row(&self) -> u64 {
        self.max_row
    }
    /// The chunk boundaries (`chunks + 1` entries, first 0, last nrows).
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }
    /// The chunks as row ranges.
    pub fn chunks(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        self.bounds.windows(2).map(|w| w[0]..w[1])
    }
}

/// Splits rows into at most `chunks` contiguous ranges whose weight
/// (`nprod + 1` per row) is as equal as a binary search on the prefix allows.
/// Empty ranges are dropped; the result starts at 0 and ends at nrows (so
/// an empty matrix gets `[0]`: no chunk).
pub fn balanced_bounds(prefix: &[u64], chunks: usize) -> Result<Vec<usize>> {
    let m = prefix.len() - 1;
    let weight = |i: usize| prefix[i] + i as u64;
    let total = weight(m);
    let chunks = chunks.clamp(1, m.max(1));
    let mut bounds = Vec::new();
    try_reserve(&mut bounds, chunks + 1, "chunk bounds")?;
    bounds.push(0);
    for c in 1..chunks {
        let target = (total as u128 * c as u128 / chunks as u128) as u64;
        // First row index whose weight prefix reaches the target.
        let mut lo = *bounds.last().unwrap_or(&0);
        let mut hi = m;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if weight(mid) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo > *bounds.last().unwrap_or(&0) && lo < m {
            bounds.push(lo);
        }
    }
    bounds.push(m);
    // An empty matrix has no chunk at all: bounds = [0].
    bounds.dedup();
    Ok(bounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix_of(rows: &[u64]) -> Vec<u64> {
        let mut p = vec![0];
        for &r in rows {
            p.push(p.last().unwrap() + r);
        }
        p
    }

    #[test]
    fn bounds_cover_all_rows_in_order() {
        let p = prefix_of(&[5, 0, 0, 100, 1, 1, 1, 50, 0, 3]);
        for chunks in 1..15 {
            let b = balanced_bounds(&p, chunks).unwrap();
            assert_eq!(b[0], 0);
            assert_eq!(*b.last().unwrap(), 10);
            assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
            assert!(b.len() - 1 <= chunks);
        }
    }

    #[test]
    fn bounds_balance_work_not_rows() {
        // One heavy row at the start: it should sit alone in its chunk.
        let mut rows = vec![10_000u64];
        rows.extend(std::iter::repeat_n(1, 999));
        let b = balanced_bounds(&prefix_of(&rows), 2).unwrap();
        assert_eq!(b, vec![0, 1, 1000]);
    }

    #[test]
    fn bounds_of_empty_matrix() {
        assert_eq!(balanced_bounds(&[0], 4).unwrap(), vec![0]);
    }

    /// Rows of A of a 5-point stencil read the rows of B in order; the
    /// same rows with columns scattered by a multiplicative hash do not;
    /// nor does work counted elsewhere.
    #[test]
    fn stencil_rows_read_b_in_order_and_scattered_rows_do_not() {
        let s = 120usize;
        let n = s * s;
        let pattern = |scatter: bool| {
            let (mut off, mut cols) = (vec![0i32], Vec::new());
            for i in 0..n {
                let (x, y) = (i % s, i / s);
                let mut row = vec![i];
                if x > 0 {
                    row.push(i - 1);
                }
                if x + 1 < s {
                    row.push(i + 1);
                }
                if y > 0 {
                    row.push(i - s);
                }
                if y + 1 < s {
                    row.push(i + s);
                }
                if scatter {
                    for c in &mut row {
                        *c = c.wrapping_mul(2_654_435_761) % n;
                    }
                }
                row.sort_unstable();
                row.dedup();
                cols.extend(row.iter().map(|&c| c as i32));
                off.push(cols.len() as i32);
            }
            (off, cols)
        };
        for (scatter, expected) in [(false, true), (true, false)] {
            let (off, cols) = pattern(scatter);
            let a = RowPattern::zero_based(&off, &cols, n);
            let work = RowWork::new(&a, &a, 2).unwrap();
            assert_eq!(work.b_rows_in_order(), expected, "scattered: {scatter}");
        }
        let shapes = [PackedRowShapes::pack(1, 3); 2];
        let counted = RowWork::from_row_products(&[3, 3], &PackedRowShapes(&shapes)).unwrap();
        assert!(!counted.b_rows_in_order());
    }

    /// Where every row of op(B) has the same length, a row's products are
    /// counted as its entries times that length: the same work, strata and
    /// longest row as the count entry by entry (one-based offsets, empty
    /// rows of A, lengths 0, 1 and 3), and a B whose last row differs is
    /// counted entry by entry.
    #[test]
    fn uniform_rows_of_b_are_counted_as_the_entries_times_their_length() {
        // Row lengths changing at every row, and in runs of 37 rows (a
        // stencil's interior) across the blocks of the magnitudes.
        for run in [1, 37] {
            uniform_rows_counted(run);
        }
    }

    fn uniform_rows_counted(run: usize) {
        let n = 2 * COUNT_GRAIN + 7;
        let (mut a_off, mut a_cols) = (vec![1i32], Vec::new());
        for i in 0..n {
            let len = [3, 0, 27, 1, 5][(i / run) % 5];
            a_cols.extend((0..len).map(|k| ((i * 7 + k * 13) % n + 1) as i32));
            a_off.push(a_cols.len() as i32 + 1);
        }
        let a = RowPattern {
            nrows: n,
            ncols: n,
            offsets: &a_off,
            cols: &a_cols,
            base: 1,
        };
        for (l, last) in [(0, 0), (1, 1), (3, 3), (1, 2), (3, 0)] {
            let mut lengths = vec![l; n];
            lengths[n - 1] = last;
            let b_off: Vec<i32> = std::iter::once(0)
                .chain(lengths.iter().scan(0, |o, &x| {
                    *o += x;
                    Some(*o)
                }))
                .map(|o| o + 1)
                .collect();
            let b_cols: Vec<i32> = (0..b_off[n] - 1).map(|k| k % 4 + 1).collect();
            let b = RowPattern {
                nrows: n,
                ncols: 4,
                offsets: &b_off,
                cols: &b_cols,
                base: 1,
            };
            assert_eq!(uniform_row_length(&b), (l == last).then_some(l as u64));
            let work = RowWork::new(&a, &b, 3).unwrap();
            let mut strata = [Stratum::default(); STRATA];
            let mut magnitudes = vec![0u64; n.div_ceil(MAGNITUDE_BLOCK)];
            let mut max_row = 0;
            for i in 0..n {
                let entries = &a_cols[a_off[i] as usize - 1..a_off[i + 1] as usize - 1];
                let row_lengths = entries.iter().map(|&k| lengths[k as usize - 1] as u64);
                let nprod: u64 = row_lengths.clone().sum();
                assert_eq!(work.row(i), nprod, "row {i}, lengths {l} and {last}");
                max_row = max_row.max(nprod);
                if nprod > 0 {
                    magnitudes[i / MAGNITUDE_BLOCK] |= 1 << magnitude(nprod);
                    let s = &mut strata[stratum_of(nprod, entries.len())];
                    s.rows += 1;
                    s.products += nprod;
                    s.lower_bound += row_lengths.max().unwrap_or(0);
                }
            }
            assert_eq!(work.max_row(), max_row);
            assert_eq!(work.strata(), &strata);
            assert_eq!(work.block_magnitudes(), &magnitudes[..]);
        }
    }

    #[test]
    fn only_a_small_b_fits_in_cache() {
        // Tridiagonal n × n: 3n - 2 entries, 16 bytes an entry and 8 a row
        // counted against 256 KiB.
        let tridiagonal = |n: usize| {
            let (mut off, mut cols) = (vec![0i64], Vec::new());
            for i in 0..n {
                cols.extend((i.saturating_sub(1)..(i + 2).min(n)).map(|c| c as i64));
                off.push(cols.len() as i64);
            }
            (off, cols)
        };
        for (n, fits) in [
            (1, true),
            (1000, true),
            (4000, true),
            (6000, false),
            (100_000, false),
        ] {
            let (off, cols) = tridiagonal(n);
            let a = RowPattern::zero_based(&off, &cols, n);
            let work = RowWork::new(&a, &a, 2).unwrap();
            assert_eq!(work.b_fits_in_cache(), fits, "n = {n}");
        }
        let shapes = [PackedRowShapes::pack(1, 3); 2];
        let counted = RowWork::from_row_products(&[3, 3], &PackedRowShapes(&shapes)).unwrap();
        assert!(!counted.b_fits_in_cache());
    }

    /// A·A's count checks B's rows for the planner on the same pass: the
    /// answer of `rows_canonical`, over several pieces, with the bad row in
    /// the first, a middle or the last piece; another B is left to it.
    #[test]
    fn a_times_a_checks_canonical_rows_on_the_count() {
        let rows: Vec<Vec<i32>> = (0..3 * COUNT_GRAIN as i32 + 5)
            .map(|i| {
                if i % 3 == 0 {
                    vec![]
                } else {
                    vec![i % 5, 5 + i % 2, 9]
                }
            })
            .collect();
        let check = |rows: &[Vec<i32>], expected: bool| {
            let (off, cols) = crate::plan::operand::arrays_from_rows(rows);
            let a = RowPattern::zero_based(&off, &cols, 10);
            assert_eq!(a.rows_canonical(), expected);
            let work = RowWork::new(&a, &a, 2).unwrap();
            assert_eq!(work.b_rows_canonical(), Some(expected));
            let copy = cols.clone();
            let b = RowPattern::zero_based(&off, &copy, 10);
            assert_eq!(RowWork::new(&a, &b, 2).unwrap().b_rows_canonical(), None);
        };
        check(&rows, true);
        for bad in [1, COUNT_GRAIN + 7, rows.len() - 1] {
            let mut rows = rows.clone();
            rows[bad] = vec![4, 2];
            check(&rows, false);
        }
    }

    /// Each block of MAGNITUDE_BLOCK rows records the magnitudes of its
    /// rows' nprod; empty rows record none, and the last block may be short.
    #[test]
    fn blocks_record_the_magnitudes_of_their_rows() {
        let m = 2 * MAGNITUDE_BLOCK + 3;
        // Row i of A: i % 7 entries, each on B's row 0 of 5 entries, so
        // nprod = 5 * (i % 7); row 300 (block 1) is longer: 40 entries.
        let mut a_off = vec![0i32];
        let mut a_cols = Vec::new();
        for i in 0..m {
            let len = if i == 300 { 40 } else { i % 7 };
            a_cols.extend(std::iter::repeat_n(0i32, len));
            a_off.push(a_cols.len() as i32);
        }
        let (b_off, b_cols) = ([0i32, 5], [0i32, 1, 2, 3, 4]);
        let a = RowPattern::zero_based(&a_off, &a_cols, 1);
        let b = RowPattern::zero_based(&b_off, &b_cols, 5);
        let work = RowWork::new(&a, &b, 1).unwrap();
        let magnitude = |nprod: u64| 63 - nprod.leading_zeros();
        let mut expected = vec![0u64; m.div_ceil(MAGNITUDE_BLOCK)];
        for i in 0..m {
            if work.row(i) > 0 {
                expected[i / MAGNITUDE_BLOCK] |= 1 << magnitude(work.row(i));
            }
        }
        assert_eq!(work.block_magnitudes(), &expected[..]);
        // nprod 5..30 is magnitudes 2..4; row 300's 200 is magnitude 7.
        assert_eq!(expected[0], 0b1_1100);
        assert_eq!(expected[1], 0b1001_1100);
        assert_eq!(expected.len(), 3);
    }

    /// The strata's lower bounds sum each row's longest merged row of B,
    /// which never exceeds the row's nnz in C nor its nprod.
    #[test]
    fn strata_sum_the_longest_merged_row_of_b() {
        // A: row 0 = {0, 1}, row 1 = {2}, row 2 = {} ; B rows of length 3, 1, 2.
        let (a_off, a_cols) = ([0i32, 2, 3, 3], [0i32, 1, 2]);
        let (b_off, b_cols) = ([0i32, 3, 4, 6], [0i32, 1, 2, 1, 0, 4]);
        let a = RowPattern::zero_based(&a_off, &a_cols, 3);
        let b = RowPattern::zero_based(&b_off, &b_cols, 5);
        assert_eq!(row_lower_bound(&a, &b, 0), 3);
        assert_eq!(row_lower_bound(&a, &b, 1), 2);
        assert_eq!(row_lower_bound(&a, &b, 2), 0);
        let work = RowWork::new(&a, &b, 1).unwrap();
        let (rows, products, bound) = work.strata().iter().fold((0, 0, 0), |t, s| {
            (t.0 + s.rows, t.1 + s.products, t.2 + s.lower_bound)
        });
        // Row 0: nprod 4, nnz 3 ({0, 1, 2}); row 1: nprod 2, nnz 2.
        assert_eq!((rows, products, bound), (2, 6, 5));
    }

    /// Work and shapes counted elsewhere and packed one word a row give
    /// the strata, magnitudes and prefix that counting the patterns gives;
    /// a row of more than 255 entries keeps its class.
    #[test]
    fn packed_shapes_give_the_same_strata() {
        let m = 700usize;
        let mut a_off = vec![0i32];
        let mut a_cols = Vec::new();
        for i in 0..m {
            let len = match i {
                5 => 300,
                _ => i % 11,
            };
            a_cols.extend((0..len).map(|k| ((i * 7 + k * 13) % 40) as i32));
            a_off.push(a_cols.len() as i32);
        }
        let mut b_off = vec![0i32];
        let mut b_cols = Vec::new();
        for j in 0..40i32 {
            b_cols.extend((0..j % 9).map(|k| (j + k) % 50));
            b_off.push(b_cols.len() as i32);
        }
        let a = RowPattern::zero_based(&a_off, &a_cols, 40);
        let b = RowPattern::zero_based(&b_off, &b_cols, 50);
        let work = RowWork::new(&a, &b, 1).unwrap();
        let patterns = PatternShapes { a: &a, b: &b };
        let words: Vec<u64> = (0..m)
            .map(|i| PackedRowShapes::pack(a.row_len(i) as u64, patterns.longest_merged(i)))
            .collect();
        let packed = PackedRowShapes(&words);
        assert_eq!(packed.entries(5), 255);
        assert_eq!(packed.longest_merged(5), row_lower_bound(&a, &b, 5));
        let products: Vec<u64> = (0..m).map(|i| work.row(i)).collect();
        let counted = RowWork::from_row_products(&products, &packed).unwrap();
        assert_eq!(counted.strata(), work.strata());
        assert_eq!(counted.block_magnitudes(), work.block_magnitudes());
        assert_eq!(counted.total(), work.total());
        assert_eq!(counted.max_row(), work.max_row());
        assert!(work
            .strata()
            .iter()
            .any(|s| s.rows > 0 && s.lower_bound > 0));
    }
}
