//! BRMerge row kernels (the BRMerge paper, Algorithm 1).
//!
//! For one output row, the multiply phase writes every scaled row of B it
//! needs, `a_ik * B[k, :]`, one after the other into a "ping" buffer: each
//! is a sorted list because B's rows are canonical. The accumulate phase
//! then merges the lists two by two, summing equal columns, from ping into
//! "pong" and back, halving their number each round until one list is
//! left. Every access streams through the two buffers, which is what makes
//! the method cache- and TLB-friendly for rows with many products.
//!
//! The buffers belong to a chunk of rows and are sized for its largest
//! row (nprod entries, and nnz(A row) + 1 list offsets), so nothing is
//! allocated per row. Summation order is fixed by the tree, so results
//! are reproducible bit for bit.
//!
//! - **BRMerge-Precise** ([`accumulate_rows`]): the row sizes come from a
//!   symbolic count; each merged row goes straight into C.
//! - **BRMerge-Upper** ([`upper_chunk`] then [`copy_upper_chunk`]): rows
//!   are merged into a temporary C sized by nprod during the symbolic phase
//!   (which then knows the exact sizes for free) and copied into C later.

use super::dense::UnsizedRows;
use super::rows::{
    prefetch_rows_of_b, row_mismatch, shift_cols, too_many_columns, Chunk, NumericPiece, Operand,
    Scale, PREFETCH_AHEAD,
};
use super::scratch::{bytes_of, Scratch, ScratchPool};
use crate::error::{try_reserve, try_vec, Result};
use crate::plan::{RowPattern, RowWork};
use crate::types::{Index, Scalar};
use std::ops::Range;

/// Sorted lists stored one after another.
struct Lists<T, J> {
    cols: Vec<J>,
    vals: Vec<T>,
    /// List `l` is `offsets[l]..offsets[l + 1]`.
    offsets: Vec<usize>,
}

impl<T: Scalar, J: Index> Lists<T, J> {
    fn new(entries: usize, lists: usize) -> Result<Self> {
        Ok(Lists {
            cols: try_vec(entries, J::default(), "BRMerge buffer")?,
            vals: try_vec(entries, T::zero(), "BRMerge buffer")?,
            offsets: try_vec(lists + 1, 0usize, "BRMerge list offsets")?,
        })
    }
}

/// Bytes of a chunk's ping-pong buffers for rows of up to `entries`
/// products merged from up to `lists` lists, entries of `entry_bytes`
/// (a column and a value).
pub(super) fn merger_bytes(entries: u64, lists: usize, entry_bytes: usize) -> u64 {
    entries
        .saturating_mul(entry_bytes as u64)
        .saturating_add((lists as u64 + 1) * 8)
        .saturating_mul(2)
}

/// The ping-pong buffers of one chunk.
pub(super) struct Merger<T, J> {
    ping: Lists<T, J>,
    pong: Lists<T, J>,
}

impl<T: Scalar, J: Index> Scratch for Merger<T, J> {
    fn bytes(&self) -> usize {
        [&self.ping, &self.pong]
            .iter()
            .map(|l| bytes_of(&l.cols) + bytes_of(&l.vals) + bytes_of(&l.offsets))
            .sum()
    }
}

impl<T: Scalar, J: Index> Merger<T, J> {
    /// Buffers for the rows `rows`: as many entries as the largest row's
    /// nprod, as many lists as the longest row of A (kept ones from
    /// `scratch` when they are large enough).
    pub(super) fn for_rows<I: Index>(
        a: &RowPattern<'_, I, J>,
        work: &RowWork,
        rows: &Range<usize>,
        scratch: &ScratchPool,
    ) -> Result<Self> {
        Self::for_merged_rows(a, work, rows, |_| true, scratch)
    }

    /// [`Merger::for_rows`] sized only for the rows that `merged` keeps
    /// (BRMerge-Upper's rows with many lists take the dense accumulator).
    fn for_merged_rows<I: Index>(
        a: &RowPattern<'_, I, J>,
        work: &RowWork,
        rows: &Range<usize>,
        merged: impl Fn(usize) -> bool,
        scratch: &ScratchPool,
    ) -> Result<Self> {
        let kept = || rows.clone().filter(|&i| merged(i));
        let entries = kept().map(|i| work.row(i)).max().unwrap_or(0);
        let entries = usize::try_from(entries).unwrap_or(usize::MAX);
        let lists = kept().map(|i| a.row_len(i)).max().unwrap_or(0);
        let fits = |m: &Self| m.ping.cols.len() >= entries && m.ping.offsets.len() > lists;
        scratch.take_or_make(fits, || {
            Ok(Merger {
                ping: Lists::new(entries, lists)?,
                pong: Lists::new(entries, lists)?,
            })
        })
    }

    /// Merges row `i` of `op(A) op(B)`; returns the merged row (zero-based
    /// columns, unscaled sums).
    ///
    /// # Errors
    /// When the row has more products than the buffers were sized for (the
    /// pattern changed since the plan was made).
    #[inline]
    pub(super) fn merge_row<I: Index>(
        &mut self,
        a: &RowPattern<'_, I, J>,
        a_vals: &[T],
        b: &RowPattern<'_, I, J>,
        b_vals: &[T],
        i: usize,
    ) -> Result<(&[J], &[T])> {
        // Multiply phase: one sorted list per entry of A's row.
        let cap = self.ping.cols.len();
        let (mut n, mut lists) = (0usize, 0usize);
        self.ping.offsets[0] = 0;
        for k in a.range(i) {
            let r = b.range(a.col(k));
            if r.is_empty() {
                continue;
            }
            if n + r.len() > cap || lists + 1 >= self.ping.offsets.len() {
                return Err(too_many_columns(i, cap));
            }
            let f = a_vals[k];
            shift_cols(
                &b.cols[r.clone()],
                b.base,
                0,
                &mut self.ping.cols[n..n + r.len()],
            );
            for (d, &v) in self.ping.vals[n..n + r.len()]
                .iter_mut()
                .zip(&b_vals[r.clone()])
            {
                *d = f * v;
            }
            n += r.len();
            lists += 1;
            self.ping.offsets[lists] = n;
        }
        // Accumulate phase: merge pairs between ping and pong.
        while lists > 1 {
            let (src, dst) = (&self.ping, &mut self.pong);
            let mut out = 0usize;
            let mut merged = 0usize;
            dst.offsets[0] = 0;
            let mut l = 0;
            while l < lists {
                let x = src.offsets[l]..src.offsets[l + 1];
                if l + 1 < lists {
                    let y = src.offsets[l + 1]..src.offsets[l + 2];
                    out += merge_two(
                        (&src.cols[x.clone()], &src.vals[x]),
                        (&src.cols[y.clone()], &src.vals[y]),
                        (&mut dst.cols[out..], &mut dst.vals[out..]),
                    );
                    l += 2;
                } else {
                    let len = x.len();
                    dst.cols[out..out + len].copy_from_slice(&src.cols[x.clone()]);
                    dst.vals[out..out + len].copy_from_slice(&src.vals[x]);
                    out += len;
                    l += 1;
                }
                merged += 1;
                dst.offsets[merged] = out;
            }
            lists = merged;
            n = out;
            std::mem::swap(&mut self.ping, &mut self.pong);
        }
        Ok((&self.ping.cols[..n], &self.ping.vals[..n]))
    }
}

/// Merges two sorted lists, summing equal columns (the left one first);
/// returns the merged length.
#[inline]
fn merge_two<T: Scalar, J: Index>(
    (xc, xv): (&[J], &[T]),
    (yc, yv): (&[J], &[T]),
    (oc, ov): (&mut [J], &mut [T]),
) -> usize {
    let (mut p, mut q, mut o) = (0, 0, 0);
    while p < xc.len() && q < yc.len() {
        let (cx, cy) = (xc[p], yc[q]);
        if cx < cy {
            oc[o] = cx;
            ov[o] = xv[p];
            p += 1;
        } else if cy < cx {
            oc[o] = cy;
            ov[o] = yv[q];
            q += 1;
        } else {
            oc[o] = cx;
            ov[o] = xv[p] + yv[q];
            p += 1;
            q += 1;
        }
        o += 1;
    }
    let (rc, rv) = if p < xc.len() {
        (&xc[p..], &xv[p..])
    } else {
        (&yc[q..], &yv[q..])
    };
    oc[o..o + rc.len()].copy_from_slice(rc);
    ov[o..o + rv.len()].copy_from_slice(rv);
    o + rc.len()
}

/// Writes a merged row (zero-based columns, unscaled sums) into C's slices.
#[inline]
fn store_row<T: Scalar, J: Index>(
    (cols, sums): (&[J], &[T]),
    scale: &Scale<T>,
    out_cols: Option<&mut [J]>,
    out_vals: &mut [T],
) {
    scale.store_each(out_vals, sums, |s| s);
    if let Some(oc) = out_cols {
        shift_cols(cols, 0, scale.base, oc);
    }
}

/// BRMerge-Precise numeric phase for the chunk's rows, straight into C
/// (always sorted: `out.sorted` is not used). B's rows must be canonical.
pub(super) fn accumulate_rows<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    out: NumericPiece<'_, T, J>,
) -> Result<()> {
    let prefetch = chunk.prefetch();
    let Chunk {
        rows,
        work,
        scratch,
        ..
    } = chunk;
    let NumericPiece {
        offsets,
        mut cols,
        vals,
        scale,
        ..
    } = out;
    let mut merger = Merger::for_rows(&a.pattern, work, &rows, scratch)?;
    let origin = offsets[rows.start];
    for i in rows {
        if prefetch {
            prefetch_rows_of_b(&a.pattern, &b.pattern, b.values, i + PREFETCH_AHEAD);
        }
        let out = offsets[i] - origin..offsets[i + 1] - origin;
        let row = merger.merge_row(&a.pattern, a.values, &b.pattern, b.values, i)?;
        if row.0.len() != out.len() {
            return Err(row_mismatch(i, row.0.len(), out.len()));
        }
        let out_cols = cols.as_deref_mut().map(|c| &mut c[out.clone()]);
        store_row(row, scale, out_cols, &mut vals[out]);
    }
    scratch.give(merger);
    Ok(())
}

/// The temporary C of one chunk made by BRMerge-Upper: its rows one after
/// another (zero-based columns, unscaled sums).
#[derive(Debug)]
pub(crate) struct UpperChunk<T, J> {
    cols: Vec<J>,
    vals: Vec<T>,
    /// The chunk's first row (which chunk of a product run again takes
    /// it back, see [`upper_chunk`]).
    first: usize,
}

/// A one-call product gives its temporary C back to the context's scratch
/// pool once C is written ([`crate::SpgemmPlan::recycle`]), so that the
/// next BRMerge-Upper product on the context fills pages already faulted
/// in: the kernel's zeroing of fresh pages, 1.4-4 µs a page on the
/// project's VM, was 10-40 % of BRMerge-Upper's symbolic phase (ego-Facebook,
/// ex31, bcsstk15, orani678; one and two threads).
impl<T: Scalar, J: Index> Scratch for UpperChunk<T, J> {
    fn bytes(&self) -> usize {
        bytes_of(&self.cols) + bytes_of(&self.vals)
    }

    fn is_output(&self) -> bool {
        true
    }
}

/// Whether BRMerge-Upper merges a row of A with `entries` entries and
/// `products` products when op(B) is narrow enough for a dense accumulator
/// (otherwise it merges every row): only rows of one or two entries over
/// more than [`PAIR_DENSE_MAX_PRODUCTS`] products, which a merge writes in
/// one pass. The others take the dense numeric phase's row kernels
/// ([`super::dense::UnsizedRows`]): rows of three entries or more, whose
/// merge passes (one per doubling of the lists) cost more than
/// accumulating and sorting, and short pairs of short rows of B. Up to
/// session 56 only rows of more than 16 entries were accumulated; one
/// thread, one-call products run again, medians of 15-21 alternating in
/// one process: ego-Facebook 33.4 -> 28.1 ms, ca-CondMat 37.6 -> 32.2,
/// HEP-th-new 52.9 -> 48.5, wiki-Vote 17.6 -> 16.2, bcsstk15 6.21 -> 5.68,
/// memplus 41.0 -> 39.0, as20000102 10.4 -> 9.7, ex31 5.64 -> 5.47,
/// 1138_bus 0.25 -> 0.16, orani678 and luxembourg_osm unchanged; the same
/// within 1-2 % more at two threads. Accumulating pairs over long rows of
/// B too made as20000102 25-38 % slower (a count pass and a merge, where
/// the merge alone writes the row).
pub(super) fn upper_merges_row(entries: usize, products: u64) -> bool {
    entries <= MERGE_MAX_LISTS_BESIDE_DENSE && products > PAIR_DENSE_MAX_PRODUCTS
}

/// See [`upper_merges_row`].
const PAIR_DENSE_MAX_PRODUCTS: u64 = 32;

/// The most lists BRMerge-Upper merges in one row when op(B) is narrow
/// enough for a dense accumulator ([`upper_merges_row`]).
pub(super) const MERGE_MAX_LISTS_BESIDE_DENSE: usize = 2;

/// Head room over the predicted size of a chunk's temporary C. The
/// planner's prediction is the paper's cheap sample (a few per cent off on
/// most inputs, tens of per cent on power-law graphs); when it is low the
/// buffer grows by half at a time (see `make_room`).
const UPPER_HEADROOM: f64 = 1.125;

/// Entries a chunk's temporary C starts with: its `products` divided by the
/// predicted compression `ratio`, with [`UPPER_HEADROOM`] and a small
/// floor, never more than `products` (the upper bound).
pub(super) fn upper_initial_capacity(products: usize, ratio: f64) -> usize {
    if ratio.is_nan() || ratio <= 1.0 {
        return products;
    }
    let predicted = (products as f64 / ratio * UPPER_HEADROOM).ceil() as usize;
    predicted.saturating_add(1024).min(products)
}

/// The entries `products` compress to at the predicted `ratio` (all of
/// them without a usable prediction), never more than `products`.
fn predicted_entries(products: usize, ratio: f64) -> usize {
    if ratio.is_nan() || ratio <= 1.0 {
        products
    } else {
        ((products as f64 / ratio).ceil() as usize).min(products)
    }
}

/// Makes room for `extra` more entries in `v`, growing its capacity by
/// half at least (never past `bound`) when it is too small.
pub(super) fn make_room<X>(v: &mut Vec<X>, extra: usize, bound: usize) -> Result<()> {
    let len = v.len() + extra;
    if len > v.capacity() {
        let want = len.max(v.capacity().saturating_add(v.capacity() / 2).min(bound));
        try_reserve(v, want - v.len(), "BRMerge-Upper temporary C")?;
    }
    Ok(())
}

/// BRMerge-Upper, symbolic phase of one chunk: merges every row into a
/// temporary C and records the exact row sizes in `counts`. The temporary C
/// starts at the chunk's predicted size (nprod over the predicted
/// compression `ratio`, the sampling predictor) rather than its nprod (the
/// upper bound BRMerge-Upper is named after), and grows when the prediction
/// was low; it never exceeds nprod. When `dense_ok`, rows go through a
/// dense accumulator instead, except those [`upper_merges_row`] keeps. B's rows
/// must be canonical (`chunk.b_canonical` is not read). With a `pool`
/// (under a memory budget), every entry of room the temporary C takes comes
/// from it (the chunk starts at its predicted size, without head room, and
/// grows from what the pool has left; it gives back what it did not fill),
/// and a chunk whose rows do not fit fails as a row that does not fit its
/// plan would (the caller then counts instead).
pub(super) fn upper_chunk<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    (dense_ok, ratio, pool): (bool, f64, Option<&UpperPool>),
    counts: &mut [usize],
) -> Result<UpperChunk<T, J>> {
    let prefetch = chunk.prefetch();
    let Chunk {
        rows,
        work,
        scratch,
        ..
    } = chunk;
    let products = usize::try_from(work.rows(rows.clone())).unwrap_or(usize::MAX);
    let (start, mut bound) = match pool {
        None => (upper_initial_capacity(products, ratio), products),
        Some(pool) => {
            let got = pool
                .take(predicted_entries(products, ratio), 0)
                .unwrap_or(0);
            (got, got)
        }
    };
    // Under a pool, `bound` is the room taken from it: room for `needed`
    // entries (with an eighth more) is taken before a row is stored; for a
    // row whose size is only bounded (`exact` false), whatever is left, the
    // row itself then failing if it does not fit.
    let room_for = |needed: usize, exact: bool, bound: &mut usize, i: usize| -> Result<()> {
        if let Some(pool) = pool.filter(|_| needed > *bound) {
            let short = needed - *bound;
            match pool.take(short + needed / 8, if exact { short } else { 0 }) {
                Some(got) => *bound += got,
                None => return Err(too_many_columns(i, *bound)),
            }
        }
        Ok(())
    };
    // A temporary C an earlier product gave back (at its exact size), not
    // twice `start` (a much larger one is left for a larger product): the
    // one of the chunk that started at the same row, when it has room for
    // three quarters of the predicted entries at least (the sampled
    // prediction may be high; the same product run again takes its own,
    // of exactly its rows), else one with room for `start`. It is used as
    // it is and grows as a new one would if the rows need more (a smaller
    // one is not grown now: growing an empty vector makes the allocator
    // copy its whole old block). Not under a budget, whose pool accounts
    // for every entry of room.
    let predicted = predicted_entries(products, ratio);
    let least = (predicted - predicted / 4).max(1);
    let fits = |c: &UpperChunk<T, J>, least: usize| {
        let room = c.cols.capacity().min(c.vals.capacity());
        room >= least && room <= start.saturating_mul(2)
    };
    let kept = match pool {
        None => scratch
            .take(|c: &UpperChunk<T, J>| c.first == rows.start && fits(c, least))
            .or_else(|| scratch.take(|c| fits(c, start))),
        Some(_) => None,
    };
    let (mut cols, mut vals) = match kept {
        Some(UpperChunk {
            mut cols, mut vals, ..
        }) => {
            cols.clear();
            vals.clear();
            (cols, vals)
        }
        None => {
            let (mut cols, mut vals) = (Vec::new(), Vec::new());
            try_reserve(&mut cols, start, "BRMerge-Upper temporary C")?;
            try_reserve(&mut vals, start, "BRMerge-Upper temporary C")?;
            (cols, vals)
        }
    };
    let goes_dense = |i: usize| dense_ok && !upper_merges_row(a.pattern.row_len(i), work.row(i));
    let mut merger = Merger::for_merged_rows(&a.pattern, work, &rows, |i| !goes_dense(i), scratch)?;
    let mut dense: Option<UnsizedRows<T>> = None;
    let first = rows.start;
    // `cols` and `vals` always hold exactly the finished rows.
    for (i, count) in rows.zip(counts.iter_mut()) {
        if prefetch {
            prefetch_rows_of_b(&a.pattern, &b.pattern, b.values, i + PREFETCH_AHEAD);
        }
        let n = cols.len();
        if goes_dense(i) {
            if dense.is_none() {
                let longest = usize::try_from(work.max_row()).unwrap_or(usize::MAX);
                dense = Some(UnsizedRows::new(b.pattern.ncols, longest, true, scratch)?);
            }
            if let Some(d) = dense.as_mut() {
                let nprod = usize::try_from(work.row(i)).unwrap_or(usize::MAX);
                room_for(n + nprod.min(b.pattern.ncols), false, &mut bound, i)?;
                let at = (first, i, prefetch);
                *count = d.append_row(a, b, at, nprod, (&mut cols, &mut vals, bound))?;
            }
            continue;
        }
        let (rc, rv) = merger.merge_row(&a.pattern, a.values, &b.pattern, b.values, i)?;
        room_for(n + rc.len(), true, &mut bound, i)?;
        if n + rc.len() > bound {
            return Err(too_many_columns(i, bound));
        }
        make_room(&mut cols, rc.len(), bound)?;
        make_room(&mut vals, rv.len(), bound)?;
        cols.extend_from_slice(rc);
        vals.extend_from_slice(rv);
        *count = rc.len();
    }
    scratch.give(merger);
    if let Some(d) = dense {
        d.keep(scratch);
    }
    // The head room over the prediction is given back before C is
    // allocated beside the temporary C (a shrinking `realloc`: no copy,
    // `mremap` for large blocks), so the numeric phase's peak holds C and
    // the temporary C at its exact size.
    cols.shrink_to_fit();
    vals.shrink_to_fit();
    if let Some(pool) = pool {
        pool.give(bound - cols.len());
    }
    Ok(UpperChunk { cols, vals, first })
}

/// Entries of room BRMerge-Upper's temporary C may take under a memory
/// budget, shared by the chunks of one symbolic phase (see
/// [`upper_chunk`]).
#[derive(Debug)]
pub(crate) struct UpperPool(std::sync::atomic::AtomicUsize);

impl UpperPool {
    /// A pool of `entries`.
    pub(crate) fn new(entries: usize) -> UpperPool {
        UpperPool(std::sync::atomic::AtomicUsize::new(entries))
    }

    /// Takes up to `want` entries, at least `least`; `None` (taking
    /// nothing) when fewer than `least` are left.
    fn take(&self, want: usize, least: usize) -> Option<usize> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut left = self.0.load(Relaxed);
        loop {
            if left < least {
                return None;
            }
            let got = want.min(left);
            match self
                .0
                .compare_exchange_weak(left, left - got, Relaxed, Relaxed)
            {
                Ok(_) => return Some(got),
                Err(now) => left = now,
            }
        }
    }

    /// Gives `entries` back.
    fn give(&self, entries: usize) {
        self.0
            .fetch_add(entries, std::sync::atomic::Ordering::Relaxed);
    }
}

/// BRMerge-Upper, numeric phase of one chunk: copies (and scales) the
/// temporary rows into C's slices for the same rows.
pub(super) fn copy_upper_chunk<T: Scalar, J: Index>(
    chunk: &UpperChunk<T, J>,
    scale: &Scale<T>,
    cols: Option<&mut [J]>,
    vals: &mut [T],
) -> Result<()> {
    if chunk.vals.len() != vals.len() {
        return Err(row_mismatch(0, chunk.vals.len(), vals.len()));
    }
    store_row((&chunk.cols, &chunk.vals), scale, cols, vals);
    Ok(())
}

/// BRMerge-Upper's structure phase for one chunk: its temporary C's
/// columns, plus `base`, into the chunk's piece of C's columns.
///
/// # Errors
/// [`crate::Error::InvalidValue`] when the sizes do not match.
pub(super) fn copy_upper_cols<T, J: Index>(
    chunk: &UpperChunk<T, J>,
    base: usize,
    cols: &mut [J],
) -> Result<()> {
    if chunk.cols.len() != cols.len() {
        return Err(row_mismatch(0, chunk.cols.len(), cols.len()));
    }
    shift_cols(&chunk.cols, 0, base, cols);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{
        reference, Algorithm, Context, CsrMatrix, IndexBase, Op, SpgemmOptions, SpgemmPlan,
    };

    /// A from `triplets` sorted by row and column (BRMerge needs canonical
    /// rows; on others the planner silently takes another algorithm), and
    /// checks that BRMerge-Upper computes `alpha * A²` exactly as the
    /// reference on 1, 2 and 5 threads (chunk borders in other places).
    fn upper_equals_reference(n: usize, mut triplets: Vec<(usize, usize, f64)>, alpha: f64) {
        triplets.sort_by_key(|&(i, j, _)| (i, j));
        let a =
            CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &triplets, IndexBase::Zero).unwrap();
        let expected = reference::spgemm(&a.view(), Op::N, &a.view(), Op::N, alpha).unwrap();
        for threads in [1, 2, 5] {
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            let (av, up) = (a.view(), Algorithm::BrmergeUpper);
            let plan = SpgemmPlan::new(&ctx, &av, Op::N, &av, Op::N, up).unwrap();
            assert_eq!(
                plan.selected_algorithm(),
                up,
                "the test must run BRMerge-Upper"
            );
            let opts = SpgemmOptions {
                alpha,
                algorithm: up,
                ..SpgemmOptions::default()
            };
            let c = ctx.spgemm(&av, &av, &opts).unwrap();
            assert_eq!(c.row_offsets(), expected.row_offsets(), "{threads} threads");
            assert_eq!(c.col_indices(), expected.col_indices(), "{threads} threads");
            assert_eq!(c.values(), expected.values(), "{threads} threads");
        }
    }

    /// BRMerge-Upper beside a dense accumulator takes a different row
    /// kernel for each kind of row: empty, single entries, pairs of short
    /// rows of B (the dense phase's short paths) and of long ones (merged),
    /// tiny rows and rows that overflow the tiny kernel, rows repeating the
    /// previous row's pattern, a band whose rows are their neighbour's
    /// moved, and long rows. All must equal the reference exactly.
    #[test]
    fn upper_row_kernels_each_equal_the_reference() {
        let n = 200usize;
        let mut rows: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, r) in rows.iter_mut().enumerate() {
            *r = match i {
                0..40 => (i.saturating_sub(1)..(i + 2)).collect(),
                40..60 => vec![5, 9, 17, 30 + (i - 40) / 2],
                60..70 => vec![(i * 3) % n],
                70..80 => vec![i - 70, i - 60],
                80..90 => vec![100 + i % 10, 105 + i % 5],
                90..100 => Vec::new(),
                100..110 => (0..40).map(|k| (i + 5 * k) % n).collect(),
                110..130 => vec![150 + i % 7, 160 + i % 11, 175 + i % 13],
                _ => (0..3 + i % 4).map(|k| (i * 31 + k * 17) % n).collect(),
            };
            if (150..200).contains(&i) {
                r.extend((0..5).map(|k| (i * 7 + k * 29) % n));
            }
            r.sort_unstable();
            r.dedup();
        }
        let products = |i: usize| -> u64 { rows[i].iter().map(|&k| rows[k].len() as u64).sum() };
        let merged = (0..n).filter(|&i| super::upper_merges_row(rows[i].len(), products(i)));
        assert!(merged.count() >= 5, "some pairs must be merged");
        assert!(
            (70..80).all(|i| !super::upper_merges_row(2, products(i))),
            "short pairs take the dense phase's path"
        );
        let t = rows
            .iter()
            .enumerate()
            .flat_map(|(i, r)| {
                r.iter()
                    .map(move |&j| (i, j, ((i + 2 * j) % 7) as f64 - 3.0))
            })
            .collect();
        upper_equals_reference(n, t, 3.0);
    }

    /// A B too large for a core's cache, read out of order: BRMerge-Upper's
    /// dense rows then take the scattered kernels (few products sorted in
    /// registers, prefetching), which must equal the reference exactly.
    #[test]
    fn upper_scattered_rows_equal_the_reference() {
        let n = 8000usize;
        let mut x = 12345u64;
        let mut next = |m: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % m
        };
        let mut t = Vec::new();
        for i in 0..n {
            let len = 1 + next(7) + if i % 97 == 0 { 30 } else { 0 };
            let mut cols: Vec<usize> = (0..len).map(|_| next(n)).collect();
            cols.sort_unstable();
            cols.dedup();
            t.extend(cols.into_iter().map(|j| (i, j, (next(9) as f64) - 4.0)));
        }
        // 16 bytes an entry and 8 a row: past the 256 KiB that
        // `RowWork::b_fits_in_cache` counts as staying in cache.
        assert!(t.len() * 16 + n * 8 > 256 << 10);
        upper_equals_reference(n, t, 3.0);
    }

    /// Rows that BRMerge-Upper merges ([`super::upper_merges_row`]) and
    /// rows it accumulates must equal the reference exactly (integer
    /// values), for any thread count.
    #[test]
    fn upper_mixes_merged_and_dense_rows_exactly() {
        let n = 64usize;
        let mut t = Vec::new();
        for i in 0..n {
            // Row i has 2 + (i % 40) entries: from 2 lists to 41.
            for k in 0..2 + i % 40 {
                let j = (i * 7 + k * 13) % n;
                t.push((i, j, ((i + 3 * k) % 5) as f64 - 2.0));
            }
        }
        upper_equals_reference(n, t, 3.0);
    }

    /// Rows of A in groups of three with one pattern (a FEM node's rows),
    /// long enough for BRMerge-Upper's dense path: all but the first of a
    /// group reuse the previous row's columns. Thread counts that split
    /// groups between chunks must give the same exact result.
    #[test]
    fn upper_dense_rows_with_repeated_patterns_equal_the_reference() {
        let n = 90usize;
        let mut t = Vec::new();
        for i in 0..n {
            let node = i / 3;
            for k in 0..20 + node % 7 {
                let j = (node * 11 + k * 4) % n;
                t.push((i, j, ((i + 2 * k) % 7) as f64 - 3.0));
            }
        }
        upper_equals_reference(n, t, -2.0);
    }

    #[test]
    fn upper_starts_at_the_predicted_size_within_the_bound() {
        use super::upper_initial_capacity as start;
        assert_eq!(start(10_000, 1.0), 10_000);
        assert_eq!(start(10_000, f64::NAN), 10_000);
        assert_eq!(start(10_000, 0.5), 10_000);
        assert_eq!(start(1_000_000, 4.0), 281_250 + 1024);
        assert_eq!(start(2000, 4.0), 563 + 1024);
        assert_eq!(start(1000, 4.0), 1000);
        assert_eq!(start(0, 3.0), 0);
    }

    /// A prediction far too low makes the temporary C grow; the rows and
    /// sizes must not change, merged or dense.
    #[test]
    fn upper_grows_past_a_low_prediction() {
        use super::{Chunk, Operand};
        use crate::plan::{RowPattern, RowWork};
        let n = 600usize;
        let (mut off, mut cols, mut vals) = (vec![0i32], Vec::new(), Vec::new());
        for i in 0..n {
            let mut row: Vec<i32> = (0..2 + i % 30)
                .map(|k| ((i * 7 + k * 13) % n) as i32)
                .collect();
            row.sort_unstable();
            row.dedup();
            vals.extend(row.iter().map(|&c| f64::from(c % 5) - 2.0));
            cols.extend(row);
            off.push(cols.len() as i32);
        }
        let a = RowPattern::zero_based(&off, &cols, n);
        let work = RowWork::new(&a, &a, 1).unwrap();
        for dense_ok in [false, true] {
            // One chunk of every row: its temporary C and row sizes.
            let upper = |ratio: f64, pool: Option<&super::UpperPool>| {
                let mut counts = vec![0usize; n];
                let a = &Operand {
                    pattern: a,
                    values: &vals,
                };
                let scratch = super::ScratchPool::default();
                let job = Chunk {
                    rows: 0..n,
                    work: &work,
                    scratch: &scratch,
                    b_canonical: true,
                };
                super::upper_chunk(a, a, job, (dense_ok, ratio, pool), &mut counts)
                    .map(|c| (c.cols, c.vals, counts))
            };
            let exact = upper(1.0, None).unwrap();
            assert!(exact.0.len() > 4 * 1024, "{} entries", exact.0.len());
            assert_eq!(upper(1e9, None).unwrap(), exact);
            // Under a memory budget the room comes from a pool: a low
            // prediction takes it as the chunk grows, the right one gives
            // the same temporary C, and a pool smaller than C refuses as a
            // row that does not fit.
            let pool = || super::UpperPool::new(super::upper_initial_capacity(exact.0.len(), 1.0));
            assert_eq!(upper(1e9, Some(&pool())).unwrap(), exact);
            assert_eq!(upper(1.0, Some(&pool())).unwrap(), exact);
            let short = super::UpperPool::new(exact.0.len() - 1);
            let e = upper(3.0, Some(&short)).unwrap_err();
            assert!(matches!(e, crate::Error::InvalidValue(_)), "{e}");
        }
    }
}
