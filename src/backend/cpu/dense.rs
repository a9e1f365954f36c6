//! Dense-accumulator row kernels (Gustavson's method with a bit map).
//!
//! Each chunk of rows owns one array of sums as wide as op(B) and a bit map
//! of the same width (one bit per column). A product `a_ik * b_kj` adds into
//! `sums[j]` and sets bit `j` (long clustered rows), or stamps column `j`
//! with the row's tag and appends a new column to a short list (other
//! rows). The stamp test is a branch, not a branch-free count: an
//! unconditional store of the tag made every product wait on the previous
//! product's store to the same array (one thread, 11 matrices, minimum of
//! 11 interleaved runs: stencil2d_5pt_725 199 -> 123 ms, stencil3d_7pt_100
//! 533 -> 376 ms, uniform_r4_200000 112 -> 85 ms, graphs within 1 %). A
//! row is then read back in column order in one of two ways, whichever is
//! cheaper for it:
//! - scanning the words of the bit map between its smallest and largest
//!   column (one `trailing_zeros` per entry), when that range is at most
//!   [`SCAN_WORDS_PER_ENTRY`] words per entry: stencils, FEM and banded rows;
//! - sorting the list, when the columns are scattered (random and power-law
//!   rows): in AVX2 registers up to 32 columns ([`super::sort_columns`]),
//!   or not at all when the row holds exactly the previous row's columns
//!   moved by the distance between the two rows' first columns of A
//!   (stencils, bands, structured meshes).
//!
//! Reading clears the bits and sums it used, so nothing is cleared per row
//! beyond the row's own entries. The symbolic count uses the bit map alone
//! (`ncols / 8` bytes per chunk), which makes it the symbolic pass of every
//! algorithm whose op(B) is narrow enough ([`super::BITMAP_MAX_COLS`]).
//! Products are added in stored order, so results are bitwise reproducible.

use super::brmerge::make_room;
use super::rows::{
    copy_cols, copy_scaled_row, merge_two_rows, merged_len, one_entry_rows, prefetch_rows_of_b,
    repeats_previous, row_mismatch, shift_cols, single_entry, too_many_columns, two_entries, Chunk,
    ColumnsPiece, NumericPiece, Operand, Scale, PREFETCH_AHEAD,
};
use super::scratch::{bytes_of, Scratch, ScratchPool};
use super::sort_columns::{ColumnSorter, KEYS};
use crate::error::{try_vec, Result};
use crate::plan::RowPattern;
use crate::types::{Index, Scalar};
use std::ops::Range;

/// Rows whose column range spans at most this many 64-bit words per output
/// entry are read by scanning the bit map; others by sorting their list.
pub(super) const SCAN_WORDS_PER_ENTRY: usize = 4;

/// Number of 64-bit words of a bit map over `ncols` columns.
fn words(ncols: usize) -> usize {
    ncols.div_ceil(64).max(1)
}

/// The column span `(lo, hi)` of row `i` from the first and last column of
/// each row of B it reads (B's rows canonical); `lo > hi` for an empty row.
#[inline(always)]
fn row_span<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    i: usize,
) -> (usize, usize) {
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    for k in a.range(i) {
        let r = b.range(a.col(k));
        if !r.is_empty() {
            lo = lo.min(b.cols[r.start].as_usize() - b.base);
            hi = hi.max(b.cols[r.end - 1].as_usize() - b.base);
        }
    }
    (lo, hi)
}

/// Words of the bit map between `lo` and `hi`.
#[inline(always)]
fn span_words(lo: usize, hi: usize) -> usize {
    if lo > hi {
        0
    } else {
        (hi >> 6) - (lo >> 6) + 1
    }
}

/// Sets the bits of row `i` (canonical rows of B). A row of B with at
/// least one column per word of its span (its columns cluster: bands,
/// FEM's blocks of nodes) has the bits of consecutive columns in one word
/// gathered in a register and stored once, so neighbouring columns do not
/// wait on each other's read-modify-write of the same word. A sparser row
/// of B sets each column's bit directly: there the gathering's test for a
/// new word mispredicts about as often as it is taken (the rows of GAMG's
/// A·P, 13 columns in clusters of two or three over some 60 words, read
/// by the rows of Pᵀ; graphs), which cost more than the stores it saves.
/// One thread, minimum of 15 runs, the two kernels in alternating rounds:
/// Pᵀ·(A·P) of a 64³ Poisson matrix's GAMG prolongator count 62.8 -> 32.7
/// ms, listing 88.5 -> 52.2, numeric with columns 92.7 -> 63.9;
/// HEP-th-new² count 18.2 -> 12.9 ms; rmat_16_3² 28.9 -> 20.3 (listing
/// 88.7 -> 76.3); wiki-Vote² listing 12.0 -> 9.4; ca-CondMat² count 9.6 ->
/// 8.4; fem27_3dof_20, band_r120_8000 and the stencils unchanged; memplus²
/// listing 5 % slower (12.7 -> 13.4 ms). With values, also adds the
/// products into `sums` (the same sums in the same order either way).
#[inline(always)]
fn mark_clustered<T: Scalar, I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    a_vals: Option<&[T]>,
    b: &RowPattern<'_, I, J>,
    b_vals: Option<&[T]>,
    i: usize,
    bits: &mut [u64],
    sums: &mut [T],
) {
    for k in a.range(i) {
        let r = b.range(a.col(k));
        if r.is_empty() {
            continue;
        }
        let cols = &b.cols[r.clone()];
        let mut word = (cols[0].as_usize() - b.base) >> 6;
        let last_word = (cols[cols.len() - 1].as_usize() - b.base) >> 6;
        let clustered = cols.len() > last_word - word;
        match (a_vals, b_vals, clustered) {
            (Some(av), Some(bv), false) => {
                let f = av[k];
                for (&c, &v) in cols.iter().zip(&bv[r]) {
                    let j = c.as_usize() - b.base;
                    bits[j >> 6] |= 1u64 << (j & 63);
                    sums[j] += f * v;
                }
            }
            (_, _, false) => {
                for &c in cols {
                    let j = c.as_usize() - b.base;
                    bits[j >> 6] |= 1u64 << (j & 63);
                }
            }
            (Some(av), Some(bv), true) => {
                let f = av[k];
                let mut acc = 0u64;
                for (&c, &v) in cols.iter().zip(&bv[r]) {
                    let j = c.as_usize() - b.base;
                    if j >> 6 != word {
                        bits[word] |= acc;
                        acc = 0;
                        word = j >> 6;
                    }
                    acc |= 1u64 << (j & 63);
                    sums[j] += f * v;
                }
                bits[word] |= acc;
            }
            (_, _, true) => {
                let mut acc = 0u64;
                for &c in cols {
                    let j = c.as_usize() - b.base;
                    if j >> 6 != word {
                        bits[word] |= acc;
                        acc = 0;
                        word = j >> 6;
                    }
                    acc |= 1u64 << (j & 63);
                }
                bits[word] |= acc;
            }
        }
    }
}

/// The symbolic count of op(B) up to this many columns stamps long rows
/// too, instead of marking them in the bit map: the stamps (4 bytes a
/// column, 80 KiB at most) stay in the fastest caches, and their test per
/// product cost less than the bit map's marking, whose branch on a change
/// of word predicts badly where the rows of B neither cluster nor scatter.
/// Dense algorithm, one thread, minimum of 20 interleaved runs each, count
/// phase: ego-Facebook (4,039 columns) 34 -> 20 ms, as20000102 8.5 -> 7.0
/// ms, bcsstk15 9.3 -> 8.0 ms, orani678 5.2 -> 4.6 ms, fem27_3dof_16 29 ->
/// 19 ms, ex31, memplus and wiki-Vote within the noise. Past it the bit
/// map is kept: HEP-th-new's 27,770 columns counted 27 ms with it, 33 ms
/// stamped.
const STAMPED_COUNT_MAX_COLS: usize = 20 << 10;

/// Rows with fewer products than this never take the bit-map path: for
/// them the span scan and popcount cost more than stamping and a small sort.
const LONG_ROW_PRODUCTS: u64 = 64;

/// Per-column stamps: `stamps[j] == tag` means column `j` was seen in the
/// current row. A new row takes a new tag, so nothing is cleared per row.
struct Stamps {
    stamps: Vec<u32>,
    tag: u32,
}

impl Stamps {
    fn new(ncols: usize) -> Result<Self> {
        Ok(Stamps {
            stamps: try_vec(ncols, 0u32, "column stamps")?,
            tag: 0,
        })
    }

    /// Starts a row; returns its tag.
    #[inline(always)]
    fn next_row(&mut self) -> u32 {
        self.tag = self.tag.wrapping_add(1);
        if self.tag == 0 {
            self.stamps.fill(0);
            self.tag = 1;
        }
        self.tag
    }
}

/// Counts the distinct columns of each row of the chunk: with B's rows
/// canonical, a row of A with one entry from that row's length and one
/// with two from a merge of the two rows ([`merged_len`]); long rows over
/// more than [`STAMPED_COUNT_MAX_COLS`] columns that cluster with a bit map
/// and a popcount, others with column stamps.
pub(super) fn count_rows<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    chunk: Chunk<'_>,
    counts: &mut [usize],
) -> Result<()> {
    if chunk.prefetch() {
        count_rows_with::<true, I, J>(a, b, chunk, counts)
    } else {
        count_rows_with::<false, I, J>(a, b, chunk, counts)
    }
}

/// [`count_rows`], prefetching the rows of B or not (two copies of the
/// loop: a prefetch skipped by a branch still slowed the numeric phase of
/// stencil2d_5pt_725 by 5-10 %).
fn count_rows_with<const PREFETCH: bool, I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    chunk: Chunk<'_>,
    counts: &mut [usize],
) -> Result<()> {
    let Chunk {
        rows,
        work,
        scratch,
        b_canonical,
    } = chunk;
    let mut ws = Workspace::<f32>::take(scratch, b.ncols, 0, false, b_canonical)?;
    let Workspace { bits, stamps, .. } = &mut ws;
    let count_in_bits = b.ncols > STAMPED_COUNT_MAX_COLS;
    let first = rows.start;
    for (c, i) in rows.enumerate() {
        if PREFETCH {
            prefetch_rows_of_b::<f32, I, J>(a, b, &[], i + PREFETCH_AHEAD);
        }
        let nprod = work.row(i);
        if nprod <= 1 {
            counts[c] = nprod as usize;
            continue;
        }
        if repeats_previous(a, first, i) {
            counts[c] = counts[c - 1];
            continue;
        }
        let count = &mut counts[c];
        if b_canonical {
            if let Some(k) = single_entry(a, i) {
                *count = b.row_len(a.col(k));
                continue;
            }
            if let Some((k, l)) = two_entries(a, i) {
                *count = merged_len(&b.cols[b.range(a.col(k))], &b.cols[b.range(a.col(l))]);
                continue;
            }
        }
        if b_canonical && nprod >= LONG_ROW_PRODUCTS && count_in_bits {
            let (lo, hi) = row_span(a, b, i);
            if span_words(lo, hi) as u64 <= nprod {
                mark_clustered::<f32, I, J>(a, None, b, None, i, bits, &mut []);
                let span = &mut bits[lo >> 6..=hi >> 6];
                *count = span.iter().map(|w| w.count_ones() as usize).sum();
                span.fill(0);
                continue;
            }
        }
        let tag = stamps.next_row();
        let mut distinct = 0usize;
        for k in a.range(i) {
            for &col in &b.cols[b.range(a.col(k))] {
                let s = &mut stamps.stamps[col.as_usize() - b.base];
                if *s != tag {
                    *s = tag;
                    distinct += 1;
                }
            }
        }
        *count = distinct;
    }
    ws.keep(scratch);
    Ok(())
}

/// Bytes of the workspace a chunk takes over `ncols` columns for rows of
/// up to `longest_row` entries, with sums of `value_bytes` each (0: the
/// symbolic phase's, without sums).
pub(super) fn workspace_bytes(ncols: usize, longest_row: usize, value_bytes: usize) -> u64 {
    let n = ncols as u64;
    let lists = (longest_row as u64).saturating_mul(2).saturating_add(1);
    (words(ncols) as u64 * 8)
        .saturating_add(n.saturating_mul(4 + value_bytes as u64))
        .saturating_add(lists.saturating_mul(8))
}

/// The per-chunk state of the numeric kernel.
struct Workspace<T> {
    bits: Vec<u64>,
    stamps: Stamps,
    sums: Vec<T>,
    /// New columns in order of first appearance (one spare slot for the
    /// branch-free append).
    list: Vec<usize>,
    /// The columns of the last row emitted, in the order written, for a next row of A
    /// with the same pattern, or the same pattern moved (a shifted row).
    previous: Vec<usize>,
    /// How rows read from `list` are sorted.
    sorter: ColumnSorter,
    /// Whether the rows of op(B) the workspace is taken for are canonical:
    /// only then may a row be read back from the bit map.
    b_canonical: bool,
}

/// Whether op(B) maps its rows onto at most half as many columns (A times
/// a prolongator, Pᵀ times A·P: the products of a row of C fall into few
/// columns, in an order that changes from row to row). There the dense
/// accumulator tests a column's stamp without a branch
/// ([`Workspace::accumulate_branch_free`]), whose outcome no predictor learns: one
/// thread, A times GAMG's smoothed prolongator at 7 points, listing 64 ->
/// 55 ms, numeric 63.5 -> 60; its tentative one at 27 points (27 products
/// into 4 columns) 77.4 -> 63.1 and 71.5 -> 58.6. Elsewhere (stencils',
/// FEM's and graphs' squares) the branch is predicted and faster (A² of
/// the 7-point stencil: 55 -> 60.5 and 49 -> 56 ms without it).
fn coarsens<I: Index, J: Index>(b: &RowPattern<'_, I, J>) -> bool {
    b.ncols.saturating_mul(2) <= b.nrows
}

impl<T: Scalar> Scratch for Workspace<T> {
    fn bytes(&self) -> usize {
        bytes_of(&self.bits)
            + bytes_of(&self.stamps.stamps)
            + bytes_of(&self.sums)
            + bytes_of(&self.list)
            + bytes_of(&self.previous)
    }
}

impl<T: Scalar> Workspace<T> {
    /// A workspace kept in `scratch` that is wide enough (made when none
    /// is), with room for rows of `longest_row` entries, for rows of op(B)
    /// that are canonical or not (`b_canonical`).
    fn take(
        scratch: &ScratchPool,
        ncols: usize,
        longest_row: usize,
        with_sums: bool,
        b_canonical: bool,
    ) -> Result<Self> {
        let fits = |w: &Self| {
            w.bits.len() >= words(ncols)
                && w.stamps.stamps.len() >= ncols
                && (!with_sums || w.sums.len() >= ncols)
        };
        let mut ws = scratch.take_or_make(fits, || Workspace::new(ncols, with_sums))?;
        ws.sorter = ColumnSorter::new(ncols);
        ws.b_canonical = b_canonical;
        if ws.list.len() < longest_row + 1 {
            ws.list = try_vec(longest_row + 1, 0usize, "dense accumulator column list")?;
        }
        ws.previous.clear();
        crate::error::try_reserve(
            &mut ws.previous,
            longest_row,
            "dense accumulator column list",
        )?;
        Ok(ws)
    }

    /// Gives the workspace back to `scratch` (its bit map and sums are all
    /// zero again: every row read back clears what it set).
    fn keep(self, scratch: &ScratchPool) {
        debug_assert!(
            self.bits.iter().all(|&w| w == 0) && self.sums.iter().all(|s| *s == T::zero()),
            "a dense workspace given back with bits or sums left set"
        );
        scratch.give(self);
    }

    /// A workspace over `ncols` columns (sums only `with_sums`); its
    /// column lists are sized by [`Workspace::take`].
    fn new(ncols: usize, with_sums: bool) -> Result<Self> {
        Ok(Workspace {
            bits: try_vec(words(ncols), 0u64, "dense accumulator bit map")?,
            stamps: Stamps::new(ncols)?,
            sums: if with_sums {
                try_vec(ncols, T::zero(), "dense accumulator")?
            } else {
                Vec::new()
            },
            list: Vec::new(),
            previous: Vec::new(),
            sorter: ColumnSorter::new(ncols),
            b_canonical: false,
        })
    }

    /// Accumulates row `i` (values only when `a_vals` / `b_vals` are given).
    /// At most `limit` new columns are recorded; `expected`, the row's
    /// expected size (at most `limit`), decides whether the row goes into
    /// the bit map; the return value is the
    /// number of distinct columns (more than `limit` means a stale plan)
    /// and, when the row went into the bit map, its column span (otherwise
    /// its columns are in `list`, unsorted). The values are arguments of
    /// their own, not a pair, so that the compiler knows nothing else
    /// writes them (inlined, also in the caller's loops).
    #[inline(always)]
    fn accumulate<I: Index, J: Index>(
        &mut self,
        a: &RowPattern<'_, I, J>,
        a_vals: Option<&[T]>,
        b: &RowPattern<'_, I, J>,
        b_vals: Option<&[T]>,
        i: usize,
        (limit, expected): (usize, usize),
    ) -> (usize, Option<(usize, usize)>) {
        let (bits, sums, list) = (&mut self.bits, &mut self.sums, &mut self.list);
        if self.b_canonical && expected as u64 >= LONG_ROW_PRODUCTS / 2 {
            let (lo, hi) = row_span(a, b, i);
            let words = span_words(lo, hi);
            if words > 0 && words < SCAN_WORDS_PER_ENTRY * expected {
                mark_clustered(a, a_vals, b, b_vals, i, bits, sums);
                let n = bits[lo >> 6..=hi >> 6]
                    .iter()
                    .map(|w| w.count_ones() as usize)
                    .sum();
                return (n, Some((lo, hi)));
            }
        }
        let tag = self.stamps.next_row();
        // Slices of exactly the widths the loops index, so each product
        // costs one bounds check (the column against `width`), not three,
        // and fewer registers are spilled (stencil2d_5pt_725, one thread:
        // numeric 41.5 -> 33.8 ms; fem27_3dof_16 44.3 -> 41.1 ms).
        let width = b.ncols;
        let stamps = &mut self.stamps.stamps[..width];
        let list = &mut list[..=limit];
        let mut n = 0usize;
        match (a_vals, b_vals) {
            (Some(av), Some(bv)) => {
                let sums = &mut sums[..width];
                for k in a.range(i) {
                    let r = b.range(a.col(k));
                    let f = av[k];
                    for (&c, &v) in b.cols[r.clone()].iter().zip(&bv[r]) {
                        let j = c.as_usize() - b.base;
                        if j >= width {
                            unreachable_column(j, width);
                        }
                        if stamps[j] != tag {
                            stamps[j] = tag;
                            list[n.min(limit)] = j;
                            n += 1;
                        }
                        sums[j] += f * v;
                    }
                }
            }
            _ => {
                for k in a.range(i) {
                    for &c in &b.cols[b.range(a.col(k))] {
                        let j = c.as_usize() - b.base;
                        if j >= width {
                            unreachable_column(j, width);
                        }
                        if stamps[j] != tag {
                            stamps[j] = tag;
                            list[n.min(limit)] = j;
                            n += 1;
                        }
                    }
                }
            }
        }
        (n, None)
    }

    /// [`Workspace::accumulate`] for a product that [`coarsens`], with the
    /// stamp test without a branch: every product stamps its column and
    /// writes it at the list's end, which moves on only for a new column
    /// (the list has a spare slot; at most `limit` columns are recorded).
    /// Long rows still go to `accumulate`, which may read them from the bit
    /// map. Out of line, and chosen by the callers once per chunk, so that
    /// the branching loop inlined in them keeps its registers (a test
    /// inside `accumulate` made the 7-point stencil's A² listing 5 %
    /// slower).
    #[inline(never)]
    fn accumulate_branch_free<I: Index, J: Index>(
        &mut self,
        a: &RowPattern<'_, I, J>,
        a_vals: Option<&[T]>,
        b: &RowPattern<'_, I, J>,
        b_vals: Option<&[T]>,
        (i, one): (usize, Option<usize>),
        (limit, expected): (usize, usize),
    ) -> (usize, Option<(usize, usize)>) {
        if self.b_canonical && expected as u64 >= LONG_ROW_PRODUCTS / 2 {
            return self.accumulate(a, a_vals, b, b_vals, i, (limit, expected));
        }
        let tag = self.stamps.next_row();
        let width = b.ncols;
        let stamps = &mut self.stamps.stamps[..width];
        let list = &mut self.list[..=limit];
        let mut n = 0usize;
        let mut stamp = |j: usize| {
            let new = usize::from(stamps[j] != tag);
            stamps[j] = tag;
            list[n.min(limit)] = j;
            n += new;
        };
        match (a_vals, b_vals, one) {
            (Some(av), Some(bv), Some(origin)) => {
                // op(B)'s row r is its entry `origin + r` ([`one_entry_rows`]):
                // no offsets read, no loop over a row.
                let sums = &mut self.sums[..width];
                for k in a.range(i) {
                    let e = origin + a.col(k);
                    let j = b.cols[e].as_usize() - b.base;
                    if j >= width {
                        unreachable_column(j, width);
                    }
                    stamp(j);
                    sums[j] += av[k] * bv[e];
                }
            }
            (Some(av), Some(bv), None) => {
                let sums = &mut self.sums[..width];
                for k in a.range(i) {
                    let r = b.range(a.col(k));
                    let f = av[k];
                    for (&c, &v) in b.cols[r.clone()].iter().zip(&bv[r]) {
                        let j = c.as_usize() - b.base;
                        if j >= width {
                            unreachable_column(j, width);
                        }
                        stamp(j);
                        sums[j] += f * v;
                    }
                }
            }
            _ => {
                for k in a.range(i) {
                    for &c in &b.cols[b.range(a.col(k))] {
                        let j = c.as_usize() - b.base;
                        if j >= width {
                            unreachable_column(j, width);
                        }
                        stamp(j);
                    }
                }
            }
        }
        (n, None)
    }

    /// Whether the row just accumulated into `list` (its `n` distinct
    /// columns stamped) holds exactly the previous row's columns moved by
    /// `shift`; if so, writes them into `list` in that (sorted) order, so
    /// the row needs no sort. Rows of a stencil, a band or a structured
    /// mesh repeat their neighbour's columns one column further on:
    /// stencil3d_7pt's rows of 25 columns otherwise took about 45 ns each
    /// to sort. The previous row's `n` columns moved by `shift` are
    /// distinct, so if all `n` are stamped in this row, the two sets of
    /// `n` columns are equal.
    /// `shift` is asked only for a row of the previous row's size, so rows
    /// that cannot match (most rows of graphs) pay one comparison.
    #[inline]
    fn take_shifted_previous(&mut self, n: usize, shift: impl FnOnce() -> isize) -> bool {
        let previous = &self.previous;
        if previous.len() != n || n == 0 {
            return false;
        }
        let shift = shift();
        let (stamps, tag) = (&self.stamps.stamps, self.stamps.tag);
        let moved = |j: usize| j.wrapping_add_signed(shift);
        if !previous.iter().all(|&j| stamps.get(moved(j)) == Some(&tag)) {
            return false;
        }
        for (d, &j) in self.list[..n].iter_mut().zip(previous) {
            *d = moved(j);
        }
        true
    }

    /// Forgets everything (after a stale-plan error).
    fn reset(&mut self) {
        self.bits.fill(0);
        self.sums.fill(T::zero());
    }

    /// Writes the accumulated row in column order into `cols` / `vals`
    /// (each exactly `n` long when present) and clears what it read. With
    /// `sort` false, a row whose columns are in `list` keeps the order they
    /// first appeared in (rows read from the bit map come sorted anyway).
    fn emit<J: Index>(
        &mut self,
        n: usize,
        span: Option<(usize, usize)>,
        cols: Option<&mut [J]>,
        vals: Option<(&mut [T], &Scale<T>)>,
        base: usize,
        sort: bool,
    ) {
        self.previous.clear();
        if n == 0 {
            return;
        }
        // The row's columns, in the order written, into `list[..n]`.
        let list = &mut self.list[..n];
        if let Some((lo, hi)) = span {
            let mut p = 0;
            for w in lo >> 6..=hi >> 6 {
                let mut x = self.bits[w];
                if x == 0 {
                    continue;
                }
                self.bits[w] = 0;
                while x != 0 {
                    list[p] = (w << 6) + x.trailing_zeros() as usize;
                    x &= x - 1;
                    p += 1;
                }
            }
        } else if sort {
            self.sorter.sort(list);
        }
        if let Some(c) = cols {
            for (d, &j) in c.iter_mut().zip(list.iter()) {
                *d = J::from_usize_unchecked(j + base);
            }
        }
        if let Some((v, scale)) = vals {
            let sums = &mut self.sums;
            scale.store_each(v, list, |j| std::mem::replace(&mut sums[j], T::zero()));
        }
        self.previous.extend_from_slice(list);
    }
}

/// A dense accumulator for rows whose size is not known in advance
/// (the rows BRMerge-Upper does not merge, see
/// [`super::brmerge::upper_merges_row`]): each row is written, sorted and
/// unscaled, at the end of the vectors it is given, by the numeric phase's
/// row kernels (one entry: B's row; two over short rows of B: their merge,
/// sized by [`merged_len`]; rows of at most [`TINY_ROW`] products;
/// scattered rows of few products, sorted in registers; repeated and
/// shifted rows; the accumulator).
pub(super) struct UnsizedRows<T> {
    ws: Workspace<T>,
    ncols: usize,
    /// Scattered rows of at most this many products are sorted in
    /// registers ([`sorted_products_row`]).
    sorted_rows_upto: u64,
}

impl<T: Scalar> UnsizedRows<T> {
    /// For rows of up to `longest_nprod` products over `ncols` columns,
    /// of a B whose rows are canonical or not (a workspace kept in
    /// `scratch` when one fits).
    pub(super) fn new(
        ncols: usize,
        longest_nprod: usize,
        b_canonical: bool,
        scratch: &ScratchPool,
    ) -> Result<Self> {
        let longest = longest_nprod.min(ncols);
        let ws = Workspace::take(scratch, ncols, longest, true, b_canonical)?;
        Ok(UnsizedRows {
            sorted_rows_upto: sorted_rows_upto(&ws.sorter, ncols),
            ws,
            ncols,
        })
    }

    /// Gives the workspace back to `scratch` (after rows that all
    /// succeeded).
    pub(super) fn keep(self, scratch: &ScratchPool) {
        self.ws.keep(scratch);
    }

    /// Accumulates row `i` (of a chunk that starts at row `first`) and
    /// appends it (sorted, unscaled, zero-based)
    /// to `cols` / `vals`, which grow as BRMerge-Upper's temporary C does,
    /// never past `bound` entries; returns the row's number of entries. At
    /// most `limit` entries are recorded (the row's nprod): more means the
    /// pattern changed since the plan, and the row is then not appended and
    /// the workspace is reset.
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`] when the vectors cannot grow; a row
    /// longer than `limit`.
    pub(super) fn append_row<I: Index, J: Index>(
        &mut self,
        a: &Operand<'_, T, I, J>,
        b: &Operand<'_, T, I, J>,
        (first, i, scattered): (usize, usize, bool),
        limit: usize,
        (cols, vals, bound): (&mut Vec<J>, &mut Vec<T>, usize),
    ) -> Result<usize> {
        let limit = limit.min(self.ncols);
        let unscaled = Scale {
            alpha: T::one(),
            beta: T::zero(),
            base: 0,
        };
        // The sized numeric phase's short paths (see `accumulate_rows_with`),
        // each row's size found first where that is cheap.
        if self.ws.b_canonical {
            if let Some(k) = single_entry(&a.pattern, i) {
                let row_of_b = a.pattern.col(k);
                let n = b.pattern.row_len(row_of_b);
                let at = open_slots(cols, vals, n, bound, i)?;
                let (oc, ov) = (&mut cols[at..], &mut vals[at..]);
                copy_scaled_row(b, row_of_b, a.values[k], i, &unscaled, Some(oc), ov)?;
                self.ws.previous.clear();
                return Ok(n);
            }
            if let Some((k, l)) = two_entries(&a.pattern, i) {
                let (x, y) = (a.pattern.col(k), a.pattern.col(l));
                let bp = &b.pattern;
                let n = merged_len(&bp.cols[bp.range(x)], &bp.cols[bp.range(y)]);
                let at = open_slots(cols, vals, n, bound, i)?;
                let (oc, ov) = (&mut cols[at..], &mut vals[at..]);
                let (x, y) = ((x, a.values[k]), (y, a.values[l]));
                merge_two_rows(b, x, y, i, &unscaled, Some(oc), ov)?;
                self.ws.previous.clear();
                return Ok(n);
            }
        }
        // At most TINY_ROW products: the row fits the tiny kernel.
        if limit <= TINY_ROW {
            if let Some(row) = TinyRow::of(a, b, i) {
                let n = row.n;
                let at = open_slots(cols, vals, n, bound, i)?;
                vals[at..].copy_from_slice(&row.sums[..n]);
                row.write_cols(0, &mut cols[at..]);
                self.ws.previous.clear();
                return Ok(n);
            }
        }
        if scattered && limit as u64 <= self.sorted_rows_upto {
            let at = open_slots(cols, vals, limit, bound, i)?;
            let (oc, ov) = (&mut cols[at..], &mut vals[at..]);
            let sorter = &self.ws.sorter;
            let n = sorted_products_row(a, b, i, sorter, &unscaled, Some(oc), ov)?;
            cols.truncate(at + n);
            vals.truncate(at + n);
            self.ws.previous.clear();
            return Ok(n);
        }
        // A row of A with the pattern of the one before (FEM's rows of one
        // node): the same columns, so no bit map and no sort.
        let n = self.ws.previous.len();
        if repeats_previous(&a.pattern, first, i) && n > 0 {
            let at = open_slots(cols, vals, n, bound, i)?;
            accumulate_repeated_row(
                a,
                b,
                i,
                &mut self.ws,
                &unscaled,
                Some(&mut cols[at..]),
                &mut vals[at..],
            );
            return Ok(n);
        }
        let (a_vals, b_vals) = (Some(a.values), Some(b.values));
        let (n, span) =
            self.ws
                .accumulate(&a.pattern, a_vals, &b.pattern, b_vals, i, (limit, limit));
        if n > limit {
            self.ws.reset();
            let room = bound - cols.len().min(bound);
            return Err(too_many_columns(i, limit.min(room)));
        }
        let at = match open_slots(cols, vals, n, bound, i) {
            Ok(at) => at,
            Err(e) => {
                self.ws.reset();
                return Err(e);
            }
        };
        let sort = !(span.is_none()
            && self
                .ws
                .take_shifted_previous(n, || first_column_shift(&a.pattern, first, i)));
        self.ws.emit(
            n,
            span,
            Some(&mut cols[at..]),
            Some((&mut vals[at..], &unscaled)),
            0,
            sort,
        );
        Ok(n)
    }
}

/// Grows `cols` / `vals` by `n` slots for row `i`, never past `bound`
/// entries (BRMerge-Upper's temporary C); returns where the slots start.
/// Only the row's own entries are written before it fills them.
fn open_slots<T: Scalar, J: Index>(
    cols: &mut Vec<J>,
    vals: &mut Vec<T>,
    n: usize,
    bound: usize,
    i: usize,
) -> Result<usize> {
    let at = cols.len();
    if at + n > bound {
        return Err(too_many_columns(i, bound - at.min(bound)));
    }
    make_room(cols, n, bound)?;
    make_room(vals, n, bound)?;
    cols.resize(at + n, J::default());
    vals.resize(at + n, T::zero());
    Ok(at)
}

/// A column index of op(B) at or past its width: validated CSR input never
/// has one, so this is a broken invariant, not a user error.
#[cold]
#[inline(never)]
fn unreachable_column(j: usize, width: usize) -> ! {
    panic!("column {j} of op(B) is outside its {width} columns")
}

/// The longest output row of `rows`.
fn longest(offsets: &[usize], rows: &Range<usize>) -> usize {
    rows.clone()
        .map(|i| offsets[i + 1] - offsets[i])
        .max()
        .unwrap_or(0)
}

/// Writes the sorted distinct columns (plus `base`) of each row of the
/// chunk into its piece of C's columns.
pub(super) fn list_rows<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    chunk: Chunk<'_>,
    out: ColumnsPiece<'_, J>,
) -> Result<()> {
    let Chunk {
        rows,
        scratch,
        b_canonical,
        ..
    } = chunk;
    let ColumnsPiece {
        offsets,
        cols,
        base,
    } = out;
    let longest = longest(offsets, &rows);
    let mut ws = Workspace::<f32>::take(scratch, b.ncols, longest, false, b_canonical)?;
    let origin = offsets[rows.start];
    let first = rows.start;
    let coarse = coarsens(b);
    for i in rows {
        let (start, end) = (offsets[i] - origin, offsets[i + 1] - origin);
        if repeats_previous(a, first, i) {
            let prev = offsets[i - 1] - origin;
            if start - prev != end - start {
                return Err(row_mismatch(i, start - prev, end - start));
            }
            cols.copy_within(prev..start, start);
            continue;
        }
        let out = &mut cols[start..end];
        if b_canonical {
            if let Some(k) = single_entry(a, i) {
                let r = a.col(k);
                if b.row_len(r) != out.len() {
                    return Err(row_mismatch(i, b.row_len(r), out.len()));
                }
                copy_cols(b, r, base, out);
                continue;
            }
        }
        let size = (out.len(), out.len());
        let (n, span) = if coarse {
            ws.accumulate_branch_free(a, None, b, None, (i, None), size)
        } else {
            ws.accumulate(a, None, b, None, i, size)
        };
        if n != out.len() {
            ws.reset();
            return Err(row_mismatch(i, n, out.len()));
        }
        let sort =
            !(span.is_none() && ws.take_shifted_previous(n, || first_column_shift(a, first, i)));
        ws.emit(n, span, Some(out), None, base, sort);
    }
    ws.keep(scratch);
    Ok(())
}

/// Entries of one block of [`ListedColumns`] (a row longer than this takes
/// a block of its own size).
pub(crate) const LISTED_BLOCK_ENTRIES: usize = 1 << 16;

/// The sorted distinct columns (zero-based) of a chunk's rows of C, listed
/// by a symbolic phase whose caller writes C's structure next (the reuse
/// flow's `reuse_nnz`, then `reuse_copy`): the structure is then copied
/// from here instead of listed by a second pass over the products. The
/// rows follow each other in blocks; no row is split between blocks, and
/// a block is never grown (so nothing is copied while listing, and the
/// memory is C's columns plus at most a block per chunk).
pub(crate) struct ListedColumns<J> {
    /// Each block with the number of its entries in use.
    blocks: Vec<(Vec<J>, usize)>,
}

/// A block of [`ListedColumns`] or [`ListedValues`] kept in the context's
/// scratch pool between products (a fresh block costs a page fault per 4
/// KiB, which on stencil2d_5pt_725 made listing slower than counting and
/// listing again).
struct ListedBlock<X>(Vec<X>);

impl<X: Copy + Send + 'static> Scratch for ListedBlock<X> {
    fn bytes(&self) -> usize {
        bytes_of(&self.0)
    }
}

impl<X: Copy + Send + 'static> ListedBlock<X> {
    /// A block of at least `len` entries from `scratch`, or a new one of
    /// `len` entries `fill` (`what` names it in an allocation failure).
    fn take(scratch: &ScratchPool, len: usize, fill: X, what: &str) -> Result<Vec<X>> {
        let ListedBlock(block) = scratch.take_or_make(
            |b: &ListedBlock<X>| b.0.len() >= len,
            || try_vec(len, fill, what).map(ListedBlock),
        )?;
        Ok(block)
    }
}

impl<J: Index> ListedColumns<J> {
    /// Room for a row of `n` entries at the end of the last block (a
    /// block from `scratch`, or a new one, when it has none); returns that
    /// row's slice.
    #[inline]
    fn push_row(&mut self, n: usize, scratch: &ScratchPool) -> Result<&mut [J]> {
        let (k, at) = self.reserve(n, scratch)?;
        Ok(&mut self.blocks[k].0[at..at + n])
    }

    /// [`ListedColumns::push_row`], returning the row's block and where it
    /// starts in it. Small, so that it is inlined into the listing's loop,
    /// which calls it for every row (as a call, with [`ListedValues::row`],
    /// it took a tenth of the listing of GAMG's A·P_tent, 7 products a
    /// row: see [`ListedColumns::add_block`]); a new block is taken out of
    /// line.
    #[inline]
    fn reserve(&mut self, n: usize, scratch: &ScratchPool) -> Result<(usize, usize)> {
        let fits = self
            .blocks
            .last()
            .is_some_and(|(b, used)| b.len() - used >= n);
        if !fits {
            self.add_block(n, scratch)?;
        }
        let k = self.blocks.len() - 1;
        let used = &mut self.blocks[k].1;
        let at = *used;
        *used += n;
        Ok((k, at))
    }

    /// A new last block, from `scratch` or allocated, for a row of `n`
    /// entries. Out of line so that [`ListedColumns::reserve`] and
    /// [`ListedValues::row`] are inlined: in the shared library (where
    /// they were calls, unlike in the benchmarks' binaries) 7-point
    /// Poisson times GAMG's tentative prolongator (64³, one rank,
    /// `reuse_nnz` in the PETSc plug-in) listed in 30.0-30.4 ms with both
    /// as calls, 26.4-27.3 inlined.
    #[cold]
    #[inline(never)]
    fn add_block(&mut self, n: usize, scratch: &ScratchPool) -> Result<()> {
        let want = n.max(LISTED_BLOCK_ENTRIES);
        let what = "C's columns listed by the symbolic phase";
        let block = ListedBlock::take(scratch, want, J::default(), what)?;
        self.blocks.push((block, 0));
        Ok(())
    }

    /// Lists the last row listed (its `n` columns) once more.
    fn repeat_last_row(&mut self, n: usize, scratch: &ScratchPool) -> Result<()> {
        let last = self.blocks.len() - 1;
        let (block, used) = &mut self.blocks[last];
        let start = *used - n;
        if block.len() - *used >= n {
            block.copy_within(start..*used, *used);
            *used += n;
        } else {
            self.push_row(n, scratch)?;
            let (old, new) = self.blocks.split_at_mut(last + 1);
            new[0].0[..n].copy_from_slice(&old[last].0[start..start + n]);
        }
        Ok(())
    }

    /// Where the last row listed (its `n` columns) lies: its block, its
    /// start there and the block's length.
    fn last_row(&self, n: usize) -> (usize, usize, usize) {
        let k = self.blocks.len() - 1;
        let (block, used) = &self.blocks[k];
        (k, used - n, block.len())
    }

    /// Number of columns listed.
    fn len(&self) -> usize {
        self.blocks.iter().map(|(_, used)| used).sum()
    }

    /// Writes the listed columns, plus `base`, into `out`.
    ///
    /// # Errors
    /// [`crate::Error::InternalError`] when `out` is not
    /// [`ListedColumns::len`] long.
    pub(crate) fn copy_to(&self, out: &mut [J], base: usize) -> Result<()> {
        if out.len() != self.len() {
            return Err(crate::Error::InternalError(format!(
                "the symbolic phase listed {} columns for a chunk of C whose offsets hold {}",
                self.len(),
                out.len()
            )));
        }
        let mut at = 0;
        for (block, used) in &self.blocks {
            shift_cols(&block[..*used], 0, base, &mut out[at..at + used]);
            at += used;
        }
        Ok(())
    }

    /// Gives the blocks to `scratch` for the next listing.
    pub(crate) fn keep(self, scratch: &ScratchPool) {
        for (block, _) in self.blocks {
            scratch.give(ListedBlock(block));
        }
    }
}

/// C's values (unscaled sums) listed with its columns by a symbolic phase
/// given A's and B's values ([`list_rows_with_values`]): block `k` holds
/// the values of the rows in block `k` of the chunk's [`ListedColumns`],
/// at the same positions. They outlive the columns (which the structure
/// phase takes), so that the numeric phase after it can copy them instead
/// of computing every product a second time.
pub(crate) struct ListedValues<T> {
    /// Each block with the number of its entries in use.
    blocks: Vec<(Vec<T>, usize)>,
}

impl<T: Scalar> ListedValues<T> {
    /// The slots of the values of a row of `n` entries listed in block `k`
    /// of the columns, at `at`, that block being `len` long (a block from
    /// `scratch`, or a new one, when the values have no block `k` yet).
    /// Small, to be inlined as [`ListedColumns::reserve`]; new blocks are
    /// taken out of line.
    #[inline]
    fn row(
        &mut self,
        (k, at, len): (usize, usize, usize),
        n: usize,
        scratch: &ScratchPool,
    ) -> Result<&mut [T]> {
        if self.blocks.len() <= k {
            self.add_blocks(k, len, scratch)?;
        }
        let (block, used) = &mut self.blocks[k];
        *used = at + n;
        Ok(&mut block[at..at + n])
    }

    /// Blocks of `len` entries, from `scratch` or allocated, up to block
    /// `k`.
    #[cold]
    #[inline(never)]
    fn add_blocks(&mut self, k: usize, len: usize, scratch: &ScratchPool) -> Result<()> {
        while self.blocks.len() <= k {
            let what = "C's values listed by the symbolic phase";
            let block = ListedBlock::take(scratch, len, T::zero(), what)?;
            self.blocks.push((block, 0));
        }
        Ok(())
    }

    /// Number of values listed.
    pub(crate) fn len(&self) -> usize {
        self.blocks.iter().map(|(_, used)| used).sum()
    }

    /// The values listed, block by block, in C's order.
    pub(crate) fn parts(&self) -> impl Iterator<Item = &[T]> {
        self.blocks.iter().map(|(block, used)| &block[..*used])
    }

    /// Calls `f` with each of the chunk's rows, in order, whose lengths
    /// `lens` gives (a row never spans two blocks).
    ///
    /// # Errors
    /// [`crate::Error::InternalError`] when the rows do not fit the blocks
    /// as listed.
    pub(crate) fn for_each_row(
        &self,
        lens: impl Iterator<Item = usize>,
        mut f: impl FnMut(&[T]),
    ) -> Result<()> {
        let mut parts = self.parts();
        let mut part: &[T] = &[];
        for len in lens {
            while part.is_empty() && len > 0 {
                part = parts.next().ok_or_else(too_few_listed)?;
            }
            if part.len() < len {
                return Err(too_few_listed());
            }
            let (row, rest) = part.split_at(len);
            f(row);
            part = rest;
        }
        if !part.is_empty() || parts.any(|p| !p.is_empty()) {
            return Err(too_few_listed());
        }
        Ok(())
    }

    /// Gives the blocks to `scratch` for the next listing.
    pub(crate) fn keep(self, scratch: &ScratchPool) {
        for (block, _) in self.blocks {
            scratch.give(ListedBlock(block));
        }
    }
}

/// Listed values that do not match C's rows (never: they come from the
/// same pass as C's row sizes).
#[cold]
fn too_few_listed() -> crate::Error {
    crate::Error::InternalError(
        "the values listed by the symbolic phase do not match C's rows".into(),
    )
}

/// The size to expect of a row of at most `limit` columns in
/// [`list_rows_unsized`], which decides between the bit map and stamps:
/// the share of columns to products of the chunk's rows accumulated so far
/// (`listed` columns of rows with `products` products, capped at the
/// width), or half its products for the first rows and for short rows
/// (which never take the bit map). Half the products suits graphs, whose
/// products rarely repeat a column, but sent the 27-point Poisson's A·P
/// with GAMG's prolongator (104 products into 9 columns a row) to the
/// bit map, where stamps and a sort of 9 are faster: its listing took
/// 113.9 ms, and 78.6 with this guess (one thread, minimum of 15 in three
/// alternating rounds; the other products of docs/benchmarks.md's session
/// 60 within ±4 %). The previous row's size as the guess did the same for
/// it but cost graphs up to 1.7×, their neighbouring rows being unlike.
fn expected_size(limit: usize, (listed, products): (usize, usize)) -> usize {
    if limit < (LONG_ROW_PRODUCTS / 2) as usize || products == 0 {
        limit / 2
    } else {
        (limit as f64 * (listed as f64 / products as f64)) as usize
    }
}

/// The symbolic phase of a chunk that also keeps C's columns: each row's
/// size into `counts` (as [`count_rows`]) and its sorted distinct columns
/// into the [`ListedColumns`] returned (as [`list_rows`] writes them), in
/// one pass over the products.
pub(super) fn list_rows_unsized<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    chunk: Chunk<'_>,
    counts: &mut [usize],
) -> Result<ListedColumns<J>> {
    let none: &[f32] = &[];
    let (a, b) = (
        &Operand {
            pattern: *a,
            values: none,
        },
        &Operand {
            pattern: *b,
            values: none,
        },
    );
    list_rows_with::<false, f32, I, J>(a, b, chunk, counts).map(|(cols, _)| cols)
}

/// [`list_rows_unsized`] that also sums each row's products: C's values,
/// unscaled, into the [`ListedValues`] returned, each as the numeric
/// phase on C's known structure computes it (from zero, in stored order),
/// so bit for bit the values that phase would write.
pub(super) fn list_rows_with_values<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    counts: &mut [usize],
) -> Result<(ListedColumns<J>, ListedValues<T>)> {
    list_rows_with::<true, T, I, J>(a, b, chunk, counts)
}

/// [`list_rows_unsized`], with C's values when `VALUES` (a copy of the
/// loop of its own, so that listing alone tests nothing more per row).
fn list_rows_with<const VALUES: bool, T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    counts: &mut [usize],
) -> Result<(ListedColumns<J>, ListedValues<T>)> {
    let Chunk {
        rows,
        work,
        scratch,
        b_canonical,
    } = chunk;
    let (ap, bp) = (&a.pattern, &b.pattern);
    // A row has at most its products' and op(B)'s columns.
    let limit_of = |i: usize| {
        usize::try_from(work.row(i))
            .unwrap_or(usize::MAX)
            .min(bp.ncols)
    };
    let longest = rows.clone().map(limit_of).max().unwrap_or(0);
    let mut ws = Workspace::<T>::take(scratch, bp.ncols, longest, VALUES, b_canonical)?;
    let mut out = ListedColumns { blocks: Vec::new() };
    let mut vals = ListedValues { blocks: Vec::new() };
    let unscaled = Scale {
        alpha: T::one(),
        beta: T::zero(),
        base: 0,
    };
    let (av, bv) = if VALUES {
        (Some(a.values), Some(b.values))
    } else {
        (None, None)
    };
    let first = rows.start;
    let mut seen = (0usize, 0usize);
    let small_rows = small_rows_fit(bp.ncols);
    let coarse = coarsens(bp);
    let one = one_entry_rows(bp, work);
    for (c, i) in rows.enumerate() {
        let limit = limit_of(i);
        if limit == 0 {
            counts[c] = 0;
            continue;
        }
        if repeats_previous(ap, first, i) {
            let n = counts[c - 1];
            counts[c] = n;
            if n > 0 {
                out.repeat_last_row(n, scratch)?;
                if VALUES {
                    // `ws.previous` holds the row before's columns, as
                    // listed.
                    let slot = vals.row(out.last_row(n), n, scratch)?;
                    accumulate_repeated_row(a, b, i, &mut ws, &unscaled, None, slot);
                }
            }
            continue;
        }
        if b_canonical {
            if let Some(k) = single_entry(ap, i) {
                let r = ap.col(k);
                let n = bp.row_len(r);
                counts[c] = n;
                let (kb, at) = out.reserve(n, scratch)?;
                copy_cols(bp, r, 0, &mut out.blocks[kb].0[at..at + n]);
                if VALUES {
                    let slot = vals.row(out.last_row(n), n, scratch)?;
                    let f = a.values[k];
                    // From zero, as the numeric phase adds (-0.0 becomes 0.0).
                    for (d, &v) in slot.iter_mut().zip(&b.values[bp.range(r)]) {
                        *d = T::zero() + f * v;
                    }
                    // For a next row of A with this row's pattern.
                    ws.previous.clear();
                    ws.previous
                        .extend(bp.cols[bp.range(r)].iter().map(|c| c.as_usize() - bp.base));
                }
                continue;
            }
        }
        // 5 to 8 products: sorted in registers and summed without
        // branches ([`small_row`]), with no stamps, list and sort.
        if VALUES && small_rows && takes_small_row(work.row(i)) {
            // Written straight into the listed blocks (and `ws.previous`,
            // for a next row of A with this row's pattern), room for every
            // product taken first and what the row did not fill given back.
            let products = work.row(i) as usize;
            let (kb, at) = out.reserve(products, scratch)?;
            let slot = vals.row(out.last_row(products), products, scratch)?;
            ws.previous.clear();
            ws.previous.resize(products, 0);
            let mut sink = ListedSlots {
                cols: &mut out.blocks[kb].0[at..at + products],
                vals: slot,
                previous: &mut ws.previous,
            };
            let written = small_row_into(a, b, (i, one), &ws.sorter, &mut sink);
            let n = written.unwrap_or(0);
            out.blocks[kb].1 = at + n;
            vals.row(out.last_row(n), n, scratch)?;
            ws.previous.truncate(n);
            if written.is_some() {
                counts[c] = n;
                continue;
            }
        }
        // Not knowing the row's size, expect the share of columns to
        // products of the rows before (`expected_size`).
        let size = (limit, expected_size(limit, seen));
        let (n, span) = if coarse {
            ws.accumulate_branch_free(ap, av, bp, bv, (i, one), size)
        } else {
            ws.accumulate(ap, av, bp, bv, i, size)
        };
        if n > limit {
            // More products than planned: the pattern changed.
            ws.reset();
            return Err(too_many_columns(i, limit));
        }
        seen = (seen.0 + n, seen.1 + limit);
        let sort =
            !(span.is_none() && ws.take_shifted_previous(n, || first_column_shift(ap, first, i)));
        let (kb, at) = match out.reserve(n, scratch) {
            Ok(at) => at,
            Err(e) => {
                ws.reset();
                return Err(e);
            }
        };
        let row_vals = if VALUES {
            match vals.row(out.last_row(n), n, scratch) {
                Ok(slot) => Some((slot, &unscaled)),
                Err(e) => {
                    ws.reset();
                    return Err(e);
                }
            }
        } else {
            None
        };
        let row = &mut out.blocks[kb].0[at..at + n];
        ws.emit(n, span, Some(row), row_vals, 0, sort);
        counts[c] = n;
    }
    ws.keep(scratch);
    Ok((out, vals))
}

/// Numeric phase for the chunk's rows: `vals = alpha * row + beta * vals`,
/// columns into `out.cols` when given.
pub(super) fn accumulate_rows<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    out: NumericPiece<'_, T, J>,
) -> Result<()> {
    if chunk.prefetch() {
        accumulate_rows_with::<true, T, I, J>(a, b, chunk, out)
    } else {
        accumulate_rows_with::<false, T, I, J>(a, b, chunk, out)
    }
}

/// [`accumulate_rows`] for rows of A that read the rows of B out of order
/// (`SCATTERED`: graphs, random matrices) or in order (stencils, meshes;
/// [`crate::plan::RowWork::b_rows_in_order`]) or from a B that stays in
/// cache ([`crate::plan::RowWork::b_fits_in_cache`]). Scattered rows
/// prefetch the rows of B and compute rows of few products by sorting them
/// ([`sorted_products_row`]); the others do neither, in a copy of the loop
/// of their own (a test per row still cost stencil2d_5pt_725's numeric
/// phase 5-15 %). With B's rows canonical, a row of A with one entry is B's
/// row scaled, and one with two the merge of B's two rows
/// ([`merge_two_rows`]: luxembourg_osm, 85 % of whose rows have two
/// entries, numeric phase 7.8 -> 5.4 ms on one thread, minimum of 75
/// interleaved runs).
fn accumulate_rows_with<const SCATTERED: bool, T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    out: NumericPiece<'_, T, J>,
) -> Result<()> {
    let Chunk {
        rows,
        work,
        scratch,
        b_canonical,
    } = chunk;
    let NumericPiece {
        offsets,
        mut cols,
        vals,
        scale,
        sorted,
    } = out;
    let longest = longest(offsets, &rows);
    let mut ws = Workspace::<T>::take(scratch, b.pattern.ncols, longest, true, b_canonical)?;
    // Only scattered rows sort their products: the sums and stamps of rows
    // in order stay in cache, and most such rows are the previous row
    // moved, which needs no sort (stencil2d_5pt_725's numeric phase took
    // 18 % longer sorted).
    let sorted_rows_upto = sorted_rows_upto(&ws.sorter, b.pattern.ncols);
    let small_rows = small_rows_fit(b.pattern.ncols);
    let coarse = coarsens(&b.pattern);
    let one = one_entry_rows(&b.pattern, work);
    let origin = offsets[rows.start];
    let first = rows.start;
    for i in rows {
        if SCATTERED {
            prefetch_rows_of_b(&a.pattern, &b.pattern, b.values, i + PREFETCH_AHEAD);
        }
        let out = offsets[i] - origin..offsets[i + 1] - origin;
        let len = out.len();
        let mut out_cols = cols.as_deref_mut().map(|c| &mut c[out.clone()]);
        let out_vals = &mut vals[out];
        if b_canonical {
            if let Some(k) = single_entry(&a.pattern, i) {
                let (row_of_b, factor) = (a.pattern.col(k), a.values[k]);
                copy_scaled_row(b, row_of_b, factor, i, scale, out_cols, out_vals)?;
                ws.previous.clear();
                continue;
            }
            if let Some((k, l)) = two_entries(&a.pattern, i) {
                let (x, y) = (
                    (a.pattern.col(k), a.values[k]),
                    (a.pattern.col(l), a.values[l]),
                );
                merge_two_rows(b, x, y, i, scale, out_cols, out_vals)?;
                ws.previous.clear();
                continue;
            }
        }
        if small_rows && takes_small_row(work.row(i)) {
            // With β = 0 the row is written where it lands, as the listing
            // writes it ([`ListedSlots`]); otherwise C's old values are
            // read once, from the row's own arrays.
            let written = if scale.beta == T::zero() {
                let mut sink = ScaledSlots {
                    cols: out_cols.as_deref_mut(),
                    vals: &mut *out_vals,
                    alpha: scale.alpha,
                    base: scale.base,
                };
                small_row_into(a, b, (i, one), &ws.sorter, &mut sink)
            } else {
                small_row(a, b, (i, one), &ws.sorter).map(|row| {
                    if row.n == len {
                        for (d, &sum) in out_vals.iter_mut().zip(&row.sums) {
                            scale.store(d, sum);
                        }
                        if let Some(oc) = out_cols.as_deref_mut() {
                            row.write_cols(scale.base, oc);
                        }
                    }
                    row.n
                })
            };
            if let Some(n) = written {
                if n != len {
                    return Err(row_mismatch(i, n, len));
                }
                ws.previous.clear();
                continue;
            }
        }
        if len <= TINY_ROW && a.pattern.row_len(i) <= TINY_ROW {
            tiny_row(a, b, i, scale, out_cols, out_vals)?;
            ws.previous.clear();
            continue;
        }
        if repeats_previous(&a.pattern, first, i) && ws.previous.len() == len && len > 0 {
            accumulate_repeated_row(a, b, i, &mut ws, scale, out_cols, out_vals);
            continue;
        }
        if SCATTERED && work.row(i) <= sorted_rows_upto {
            let n = sorted_products_row(a, b, i, &ws.sorter, scale, out_cols, out_vals)?;
            if n != len {
                return Err(row_mismatch(i, n, len));
            }
            ws.previous.clear();
            continue;
        }
        let (a_vals, b_vals) = (Some(a.values), Some(b.values));
        let (n, span) = if coarse {
            ws.accumulate_branch_free(&a.pattern, a_vals, &b.pattern, b_vals, (i, one), (len, len))
        } else {
            ws.accumulate(&a.pattern, a_vals, &b.pattern, b_vals, i, (len, len))
        };
        if n != len {
            ws.reset();
            return Err(row_mismatch(i, n, len));
        }
        let sort = sorted
            && !(span.is_none()
                && ws.take_shifted_previous(n, || first_column_shift(&a.pattern, first, i)));
        ws.emit(n, span, out_cols, Some((out_vals, scale)), scale.base, sort);
    }
    ws.keep(scratch);
    Ok(())
}

/// Bits of a sort key that hold the product's position in its row
/// ([`sorted_products_row`]).
const POSITION_BITS: u32 = 5;

/// The most products of a row that [`sorted_products_row`] computes (0:
/// none): as many keys as the sorter keeps in registers, when every
/// column of op(B) fits a key.
fn sorted_rows_upto(sorter: &ColumnSorter, ncols: usize) -> u64 {
    if ncols <= (u32::MAX >> POSITION_BITS) as usize {
        sorter.key_registers_len().min(KEYS) as u64
    } else {
        0
    }
}

/// Row `i` of C from its few products without the dense accumulator: each
/// product is kept with the key `column << 5 | position`, the keys are
/// sorted (in registers), and the products of each column, now adjacent
/// and in stored order, are summed into C's row. This touches no array as
/// wide as op(B), whose sums and stamps are scattered cache misses on
/// graphs and random matrices. The sums are those of the accumulator bit
/// for bit (from zero, in stored order); the row comes out sorted.
///
/// Writes the row at the front of `out_vals` (and `out_cols`), which may
/// be longer than it, and returns its number of entries.
///
/// # Errors
/// A row with more products than the sorter's keys, or more columns than
/// `out_vals` holds (a pattern that changed since the plan).
// Out of line, so that its arrays do not enlarge the frame of the
// accumulator's loop (the 7 % that stencil2d_5pt_725 lost with this path
// in its loop came back only with the loop's own copy, `SCATTERED`).
#[inline(never)]
fn sorted_products_row<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    i: usize,
    sorter: &ColumnSorter,
    scale: &Scale<T>,
    mut out_cols: Option<&mut [J]>,
    out_vals: &mut [T],
) -> Result<usize> {
    let mut keys = [u32::MAX; KEYS];
    let mut products = [T::zero(); KEYS];
    let Some(n) =
        keyed_products::<POSITION_BITS, T, I, J>(a, b, (i, None), &mut keys, &mut products)
    else {
        return Err(too_many_columns(i, KEYS));
    };
    sorter.sort_keys(&mut keys, n);
    let len = out_vals.len();
    let mut written = 0usize;
    let mut p = 0usize;
    while p < n {
        let col = keys[p] >> POSITION_BITS;
        let mut sum = T::zero();
        while p < n && keys[p] >> POSITION_BITS == col {
            sum += products[(keys[p] & ((1 << POSITION_BITS) - 1)) as usize];
            p += 1;
        }
        if written == len {
            return Err(row_mismatch(i, written + 1, len));
        }
        scale.store(&mut out_vals[written], sum);
        if let Some(c) = out_cols.as_deref_mut() {
            c[written] = J::from_usize_unchecked(col as usize + scale.base);
        }
        written += 1;
    }
    Ok(written)
}

/// The most columns of a row of C, and entries of its row of A, that
/// [`tiny_row`] computes.
const TINY_ROW: usize = 8;

/// Row `i` of C when it has at most [`TINY_ROW`] columns (and its row of
/// A at most as many entries): the products are summed into a small array
/// kept sorted by insertion, with no dense accumulator to stamp, list, sort
/// and read back. Such rows are those of a product with an aggregation
/// prolongator (one entry a row of B: GAMG's A·P_tent, 7 products into
/// about 3 columns), whose numeric phase this took from 17.2-26.4 to
/// 13.4-16.7 ms (65³ Poisson, one thread, minimum of 20 alternating runs
/// in one process); stencil2d_5pt_725 (13 columns a row, which the test
/// on C's row length skips at no cost) and luxembourg_osm did not move.
/// The sums are the accumulator's bit for bit (from zero, in stored
/// order); the row comes out sorted.
///
/// # Errors
/// A row whose products or columns differ from the plan's (a pattern that
/// changed since the plan).
#[inline]
fn tiny_row<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    i: usize,
    scale: &Scale<T>,
    out_cols: Option<&mut [J]>,
    out_vals: &mut [T],
) -> Result<()> {
    let Some(row) = TinyRow::of(a, b, i) else {
        return Err(too_many_columns(i, TINY_ROW));
    };
    if row.n != out_vals.len() {
        return Err(row_mismatch(i, row.n, out_vals.len()));
    }
    for (d, &sum) in out_vals.iter_mut().zip(&row.sums[..row.n]) {
        scale.store(d, sum);
    }
    if let Some(out) = out_cols {
        row.write_cols(scale.base, out);
    }
    Ok(())
}

/// The sorted columns (zero-based) and sums of a row of C of at most
/// [`TINY_ROW`] columns ([`tiny_row`]).
struct TinyRow<T> {
    cols: [usize; TINY_ROW],
    sums: [T; TINY_ROW],
    n: usize,
}

impl<T: Scalar> TinyRow<T> {
    /// Row `i` of C summed into a small array kept sorted by insertion;
    /// `None` when it has more than [`TINY_ROW`] columns.
    #[inline(always)]
    fn of<I: Index, J: Index>(
        a: &Operand<'_, T, I, J>,
        b: &Operand<'_, T, I, J>,
        i: usize,
    ) -> Option<Self> {
        const N: usize = TINY_ROW;
        let (ap, bp) = (&a.pattern, &b.pattern);
        let mut cols = [0usize; N];
        let mut sums = [T::zero(); N];
        let mut n = 0usize;
        for k in ap.range(i) {
            let r = bp.range(ap.col(k));
            let f = a.values[k];
            for (&c, &v) in bp.cols[r.clone()].iter().zip(&b.values[r]) {
                let c = c.as_usize() - bp.base;
                let product = f * v;
                // The first position whose column is not below c.
                let mut j = n;
                while j > 0 && cols[j - 1] > c {
                    j -= 1;
                }
                if j > 0 && cols[j - 1] == c {
                    sums[j - 1] += product;
                    continue;
                }
                if n == N {
                    return None;
                }
                for t in (j..n).rev() {
                    cols[t + 1] = cols[t];
                    sums[t + 1] = sums[t];
                }
                cols[j] = c;
                sums[j] = T::zero() + product;
                n += 1;
            }
        }
        Some(TinyRow { cols, sums, n })
    }

    /// Writes the row's columns, counted from index base `base`, into the
    /// front of `out`.
    #[inline(always)]
    fn write_cols<J: Index>(&self, base: usize, out: &mut [J]) {
        for (d, &c) in out.iter_mut().zip(&self.cols[..self.n]) {
            *d = J::from_usize_unchecked(c + base);
        }
    }
}

/// Row `i`'s products `a_ik * b_kj`, in stored order, into `products`,
/// each with the key `column << BITS | place` in `keys`; their number, or
/// `None` when there are more than `products` holds. `keys` must hold as
/// many and `1 << BITS` places each product's. `one`: op(B) has one entry
/// a row, row `r` at entry `origin + r` ([`one_entry_rows`]).
#[inline(always)]
fn keyed_products<const BITS: u32, T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    (i, one): (usize, Option<usize>),
    keys: &mut [u32],
    products: &mut [T],
) -> Option<usize> {
    let (ap, bp) = (&a.pattern, &b.pattern);
    if let Some(origin) = one {
        // op(B)'s row r is its entry `origin + r`: no offsets read, no
        // loop over a row.
        let range = ap.range(i);
        if range.len() > products.len() {
            return None;
        }
        let n = range.len();
        for (t, k) in range.enumerate() {
            let e = origin + ap.col(k);
            keys[t] = ((bp.cols[e].as_usize() - bp.base) as u32) << BITS | t as u32;
            products[t] = a.values[k] * b.values[e];
        }
        return Some(n);
    }
    let mut n = 0usize;
    for k in ap.range(i) {
        let r = bp.range(ap.col(k));
        let f = a.values[k];
        for (&c, &v) in bp.cols[r.clone()].iter().zip(&b.values[r]) {
            if n == products.len() {
                return None;
            }
            keys[n] = ((c.as_usize() - bp.base) as u32) << BITS | n as u32;
            products[n] = f * v;
            n += 1;
        }
    }
    Some(n)
}

/// The most products of a row that [`small_row`] computes.
const SMALL_ROW: usize = 8;

/// Whether a row of `products` products goes through [`small_row`]: from
/// [`SMALL_ROW_MIN`] to [`SMALL_ROW`]. Rows of fewer products cost the
/// insertion of [`TinyRow`] or the accumulator few mispredictions, less
/// than the sort's fixed cost: with every row of at most 8 products
/// through it, the listing of as20000102² took 16.3 ms against 15.0 and
/// orani678²'s 11.2 against 9.9 (one thread, session 69).
fn takes_small_row(products: u64) -> bool {
    (SMALL_ROW_MIN as u64..=SMALL_ROW as u64).contains(&products)
}

/// The fewest products of a row that [`small_row`] computes.
const SMALL_ROW_MIN: usize = 5;

/// Bits of a [`small_row`] key that hold the product's place in the row.
const SMALL_ROW_BITS: u32 = 3;

/// Whether [`small_row`]'s keys hold every column of an op(B) of `ncols`
/// columns.
fn small_rows_fit(ncols: usize) -> bool {
    ncols <= (u32::MAX >> SMALL_ROW_BITS) as usize
}

/// The sorted columns (zero-based) and sums of a row of C of at most
/// [`SMALL_ROW`] products ([`small_row`]).
struct SmallRow<T> {
    cols: [u32; SMALL_ROW],
    sums: [T; SMALL_ROW],
    n: usize,
}

impl<T> SmallRow<T> {
    /// Writes the row's columns, counted from index base `base`, into the
    /// front of `out` (as [`TinyRow::write_cols`]).
    #[inline(always)]
    fn write_cols<J: Index>(&self, base: usize, out: &mut [J]) {
        for (d, &c) in out.iter_mut().zip(&self.cols[..self.n]) {
            *d = J::from_usize_unchecked(c as usize + base);
        }
    }
}

/// Row `i` of C when it has at most [`SMALL_ROW`] products (`None`
/// otherwise), for op(B)'s columns that [`small_rows_fit`]: each product
/// keyed `column << 3 | place`, the keys sorted in one register
/// (`sorter`), and the products of each column, now adjacent and in stored
/// order, summed into the row without a branch (each sum starts at zero,
/// so the sums are the accumulator's bit for bit). The insertion into a
/// sorted array of [`TinyRow`] and the stamps of the accumulator both
/// branch on the columns, which mispredicts about once a product where a
/// row's columns come in no order (GAMG's A·P_tent: 7 products into 3.5
/// columns a row, those of the grid's z-neighbours far from the others).
/// On that product (`phases_vs_gustavson`, one thread, 7-point Poisson at
/// 64³, 2-vCPU AMD EPYC VM, session 69) the symbolic phase that lists it
/// with its values took 32.9 ms with [`TinyRow`], 34.0 through the
/// accumulator and 26.9-28.0 this way, and the numeric phase 27.5-28.3 ms
/// with [`TinyRow`] and 21.4 this way.
#[inline(always)]
fn small_row<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    row: (usize, Option<usize>),
    sorter: &ColumnSorter,
) -> Option<SmallRow<T>> {
    let mut out = SmallRow {
        cols: [0u32; SMALL_ROW],
        sums: [T::zero(); SMALL_ROW],
        n: 0,
    };
    out.n = small_row_into(a, b, row, sorter, &mut out)?;
    Some(out)
}

/// Where [`small_row_into`] writes a row of C.
trait SmallRowSink<T> {
    /// How many products the row may have (and so entries).
    fn room(&self) -> usize;
    /// Entry `at` (below [`SmallRowSink::room`]) gets column `col` and the
    /// sum so far of its products: called at every product, the last call
    /// for an entry carrying its sum.
    fn put(&mut self, at: usize, col: u32, sum: T);
}

impl<T: Copy> SmallRowSink<T> for SmallRow<T> {
    fn room(&self) -> usize {
        SMALL_ROW
    }
    #[inline(always)]
    fn put(&mut self, at: usize, col: u32, sum: T) {
        self.cols[at % SMALL_ROW] = col;
        self.sums[at % SMALL_ROW] = sum;
    }
}

/// The listing's [`SmallRowSink`]: the slots taken for the row in the
/// listed columns and values, and the workspace's `previous` columns. Read
/// back from an array of its own, the row waited on its entries' stores
/// (a vector load of entries stored one by one is not forwarded from the
/// stores): GAMG's A·P_tent, 7-point Poisson at 64³, one rank, listed in
/// 27.2-27.3 ms that way and in 18.5-18.7 written in place (`reuse_nnz`
/// in the PETSc plug-in, medians of 7, three alternating runs).
struct ListedSlots<'s, T, J> {
    cols: &'s mut [J],
    vals: &'s mut [T],
    previous: &'s mut [usize],
}

impl<T: Copy, J: Index> SmallRowSink<T> for ListedSlots<'_, T, J> {
    fn room(&self) -> usize {
        self.cols
            .len()
            .min(self.vals.len())
            .min(self.previous.len())
    }
    #[inline(always)]
    fn put(&mut self, at: usize, col: u32, sum: T) {
        self.cols[at] = J::from_usize_unchecked(col as usize);
        self.vals[at] = sum;
        self.previous[at] = col as usize;
    }
}

/// The numeric phase's [`SmallRowSink`] when β = 0: C's row, each entry
/// stored as α times the sum so far (the last store being α times its
/// sum, as [`Scale::store`] writes it). A row with more entries than C's
/// row (a pattern changed since the plan) writes only those that fit, and
/// its caller reports the mismatch.
struct ScaledSlots<'s, T, J> {
    cols: Option<&'s mut [J]>,
    vals: &'s mut [T],
    alpha: T,
    base: usize,
}

impl<T: Scalar, J: Index> SmallRowSink<T> for ScaledSlots<'_, T, J> {
    fn room(&self) -> usize {
        SMALL_ROW
    }
    #[inline(always)]
    fn put(&mut self, at: usize, col: u32, sum: T) {
        if let Some(d) = self.vals.get_mut(at) {
            *d = self.alpha * sum;
        }
        if let Some(c) = self.cols.as_deref_mut().and_then(|c| c.get_mut(at)) {
            *c = J::from_usize_unchecked(col as usize + self.base);
        }
    }
}

/// [`small_row`], written into `sink` as it is summed; returns the row's
/// number of entries, or `None` when it has more products than
/// [`SMALL_ROW`] or the sink's room (nothing written then).
#[inline(always)]
fn small_row_into<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    row: (usize, Option<usize>),
    sorter: &ColumnSorter,
    sink: &mut impl SmallRowSink<T>,
) -> Option<usize> {
    const PLACE: u32 = (1 << SMALL_ROW_BITS) - 1;
    let mut keys = [u32::MAX; KEYS];
    let mut products = [T::zero(); SMALL_ROW];
    let n = keyed_products::<SMALL_ROW_BITS, T, I, J>(a, b, row, &mut keys, &mut products)?;
    if n > sink.room() {
        return None;
    }
    sorter.sort_few_keys(&mut keys, n);
    // The entry written: one further at each new column (none before the
    // first: `u32::MAX` is no column's key). Its sum is carried in a
    // register and stored at every product, the last store being the
    // column's sum: added in the row's array itself, each product waited
    // for the store of the one before.
    let (mut w, mut previous, mut sum) = (usize::MAX, u32::MAX, T::zero());
    for &key in &keys[..n] {
        let col = key >> SMALL_ROW_BITS;
        let new = col != previous;
        w = w.wrapping_add(usize::from(new));
        previous = col;
        // A mask, not a branch: which products share a column is data
        // (the `if` compiled to a branch, which held 16 % of the 7-point
        // A·P_tent listing's samples; `Scalar::zero_unless`).
        sum = sum.zero_unless(!new);
        sum += products[(key & PLACE) as usize];
        sink.put(w, col, sum);
    }
    Some(w.wrapping_add(1))
}

/// How far the first column of row `i` of A lies past that of row `i - 1`
/// (0 for the first row of a chunk or an empty row).
#[inline]
fn first_column_shift<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    first: usize,
    i: usize,
) -> isize {
    if i == first {
        return 0;
    }
    let (p, r) = (a.range(i - 1), a.range(i));
    if p.is_empty() || r.is_empty() {
        return 0;
    }
    a.col(r.start) as isize - a.col(p.start) as isize
}

/// Row `i` whose row of A has the pattern of row `i - 1`, whose sorted
/// columns are `previous`: the products go into `sums` with no bit map,
/// and the row is read back at `previous`.
#[inline]
fn accumulate_repeated_row<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    i: usize,
    ws: &mut Workspace<T>,
    scale: &Scale<T>,
    out_cols: Option<&mut [J]>,
    out_vals: &mut [T],
) {
    let (a, a_vals) = (&a.pattern, a.values);
    let (b, b_vals) = (&b.pattern, b.values);
    let sums = &mut ws.sums;
    for k in a.range(i) {
        let r = b.range(a.col(k));
        let f = a_vals[k];
        for (&c, &v) in b.cols[r.clone()].iter().zip(&b_vals[r]) {
            sums[c.as_usize() - b.base] += f * v;
        }
    }
    scale.store_each(out_vals, &ws.previous, |j| {
        std::mem::replace(&mut sums[j], T::zero())
    });
    if let Some(oc) = out_cols {
        for (d, &j) in oc.iter_mut().zip(&ws.previous) {
            *d = J::from_usize_unchecked(j + scale.base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Workspace;
    use crate::{
        reference, Algorithm, Context, CsrMatrix, IndexBase, Op, SpgemmOptions, SpgemmPlan,
    };

    /// Stamps `cols` as the columns of a new row of `ws` (as `accumulate`
    /// does), in the given order, into `list`.
    fn stamp_row(ws: &mut Workspace<f64>, cols: &[usize]) {
        let tag = ws.stamps.next_row();
        for (p, &j) in cols.iter().enumerate() {
            ws.stamps.stamps[j] = tag;
            ws.list[p] = j;
        }
    }

    /// `C = 2·A·B` with the dense kernel (which the plan must select) on
    /// each of `threads` equals `expected` (the reference's) bit for bit.
    fn dense_equals_bit_for_bit(
        a: &crate::CsrView<'_, f64, i32, i32>,
        b: &crate::CsrView<'_, f64, i32, i32>,
        expected: &CsrMatrix<f64, i32, i32>,
        threads: &[usize],
    ) {
        let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for &threads in threads {
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            let plan = SpgemmPlan::new(&ctx, a, Op::N, b, Op::N, Algorithm::Dense).unwrap();
            assert_eq!(plan.selected_algorithm(), Algorithm::Dense);
            let opts = SpgemmOptions {
                alpha: 2.0,
                algorithm: Algorithm::Dense,
                ..SpgemmOptions::default()
            };
            let c = ctx.spgemm(a, b, &opts).unwrap();
            assert_eq!(c.row_offsets(), expected.row_offsets(), "{threads} threads");
            assert_eq!(c.col_indices(), expected.col_indices(), "{threads} threads");
            assert_eq!(
                bits(c.values()),
                bits(expected.values()),
                "{threads} threads"
            );
        }
    }

    /// The previous row's sorted columns are taken, moved, only when they
    /// are exactly this row's set: not for a set of the same size with
    /// one column elsewhere, another size, or a move below column 0.
    #[test]
    fn shifted_previous_row_only_for_the_same_set() {
        let mut ws = Workspace::<f64>::new(32, true).unwrap();
        ws.list = vec![0; 8];
        ws.previous = vec![2, 5, 9];
        stamp_row(&mut ws, &[10, 3, 6]);
        assert!(ws.take_shifted_previous(3, || 1));
        assert_eq!(&ws.list[..3], &[3, 6, 10]);

        stamp_row(&mut ws, &[11, 3, 6]);
        assert!(!ws.take_shifted_previous(3, || 1), "one column differs");
        stamp_row(&mut ws, &[3, 6, 10, 12]);
        assert!(!ws.take_shifted_previous(4, || 1), "another size");
        stamp_row(&mut ws, &[1, 4, 8]);
        assert!(ws.take_shifted_previous(3, || -1));
        assert_eq!(&ws.list[..3], &[1, 4, 8]);
        ws.previous = vec![0, 4, 8];
        stamp_row(&mut ws, &[3, 7, 31]);
        assert!(
            !ws.take_shifted_previous(3, || -1),
            "column 0 moved below 0"
        );
        ws.previous = vec![0, 4, 30];
        stamp_row(&mut ws, &[2, 6, 31]);
        assert!(
            !ws.take_shifted_previous(3, || 2),
            "column 30 moved past the last"
        );
    }

    /// C = A·B for a banded A whose rows repeat their neighbour's pattern
    /// one column on and a bidiagonal B, so most rows of C are the
    /// previous row moved by one (the shifted-row path). Every 11th row of
    /// A moves its last column two further: its row of C has the same
    /// size and first column as the moved previous row but another set
    /// (it must be sorted, not taken), and so has the row after it. C
    /// equals the reference exactly on 1, 2 and 3 threads.
    #[test]
    fn shifted_rows_equal_the_reference() {
        let n = 300usize;
        let value = |i: usize, j: usize| ((i + 3 * j) % 7) as f64 - 3.0;
        let (mut ta, mut tb) = (Vec::new(), Vec::new());
        for i in 0..n {
            for d in [-7i64, -3, -1, 0, 2, 5] {
                let j = i as i64 + d + if i % 11 == 4 && d == 5 { 2 } else { 0 };
                if (0..n as i64).contains(&j) {
                    ta.push((i, j as usize, value(i, j as usize)));
                }
            }
            tb.push((i, i, value(i, i)));
            if i + 1 < n {
                tb.push((i, i + 1, value(i, i + 1)));
            }
        }
        let a = CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &ta, IndexBase::Zero).unwrap();
        let b = CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &tb, IndexBase::Zero).unwrap();
        let (av, bv) = (a.view(), b.view());
        let expected = reference::spgemm(&av, Op::N, &bv, Op::N, 2.0).unwrap();
        dense_equals_bit_for_bit(&av, &bv, &expected, &[1, 2, 3]);
    }

    /// Rows of C with at most `TINY_ROW` columns from rows of A with at
    /// most as many entries (the tiny-row path), beside rows past either
    /// limit: A's rows have 0 to 11 entries, B is an aggregation (one entry
    /// a row, three rows a column) but for every 7th row, which has three
    /// entries out of order with one column twice (B not canonical), and
    /// some products are -0.0 (a zero of A times a negative value of B).
    /// C equals the reference bit for bit (a sum of -0.0 alone is +0.0, as
    /// the accumulator's from zero) on 1 and 2 threads.
    #[test]
    fn tiny_rows_equal_the_reference_bit_for_bit() {
        use crate::CsrView;
        let (n, k) = (240usize, 80usize);
        let mut ta = Vec::new();
        for i in 0..n {
            for e in 0..(i % 12) {
                let j = (i + 5 * e) % n;
                let v = if (i + e) % 9 == 0 {
                    0.0
                } else {
                    ((i + e) % 5) as f64 - 2.5
                };
                ta.push((i, j, v));
            }
        }
        let a = CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &ta, IndexBase::Zero).unwrap();
        let (mut offsets, mut cols, mut vals) = (vec![0i32], Vec::new(), Vec::new());
        for r in 0..n {
            if r % 7 == 3 {
                let c = ((r / 3 + 1) % k) as i32;
                cols.extend([c, (r / 3) as i32, c]);
                vals.extend([-1.5, 0.25, 3.0]);
            } else {
                cols.push((r / 3) as i32);
                vals.push(-((r % 4) as f64) - 0.5);
            }
            offsets.push(cols.len() as i32);
        }
        let b = CsrView::try_new(n, k, &offsets, &cols, &vals, IndexBase::Zero).unwrap();
        let av = a.view();
        let expected = reference::spgemm(&av, Op::N, &b, Op::N, 2.0).unwrap();
        let lens: Vec<usize> = expected
            .row_offsets()
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .collect();
        assert!(lens.iter().any(|&l| (1..=super::TINY_ROW).contains(&l)));
        assert!((0..n).any(|i| i % 12 > super::TINY_ROW && lens[i] > 0));
        assert!(
            expected.values().contains(&0.0),
            "some sums are zeros of A's"
        );
        dense_equals_bit_for_bit(&av, &b, &expected, &[1, 2]);
    }

    /// Long rows are counted with stamps up to `STAMPED_COUNT_MAX_COLS`
    /// columns of B and in the bit map past it: a band of 12 entries a row
    /// (144 products, over 64) whose rows of B cluster, and every 5th row
    /// of A with one far column, squared on either side of the limit: C
    /// equals the reference in both, the one past it counted in bits.
    #[test]
    fn long_rows_count_with_stamps_or_bits_by_width() {
        use super::STAMPED_COUNT_MAX_COLS;
        for n in [STAMPED_COUNT_MAX_COLS - 1000, STAMPED_COUNT_MAX_COLS + 1000] {
            let mut t = Vec::new();
            for i in 0..n {
                for d in 0..12 {
                    t.push((i, (i + d) % n, 1.0 + d as f64));
                }
                if i % 5 == 0 {
                    t.push((i, (i + n / 2) % n, -1.0));
                }
            }
            let a = CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &t, IndexBase::Zero).unwrap();
            let av = a.view();
            let expected = reference::spgemm(&av, Op::N, &av, Op::N, 1.0).unwrap();
            let opts = SpgemmOptions {
                algorithm: Algorithm::Dense,
                ..SpgemmOptions::default()
            };
            let c = Context::cpu().unwrap().spgemm(&av, &av, &opts).unwrap();
            assert_eq!(c.row_offsets(), expected.row_offsets(), "{n} columns");
            assert_eq!(c.col_indices(), expected.col_indices(), "{n} columns");
            assert_eq!(c.values(), expected.values(), "{n} columns");
        }
    }

    /// Long rows of A (90 products) read rows of B that cluster (12
    /// consecutive columns) and rows that do not (6 columns 130 apart, one
    /// word each), over more columns than are counted with stamps, so the
    /// count, the listing and both numeric phases mark the bit map, with
    /// the gathered and the direct marking in one row: C equals the
    /// reference bit for bit, in one call and in the reuse flow (structure
    /// listed by the symbolic phase, then values on it).
    #[test]
    fn clustered_and_sparse_rows_of_b_mark_the_bit_map_alike() {
        use crate::{CsrOutput, PatternCheck};
        let n = super::STAMPED_COUNT_MAX_COLS + 3000;
        let mut t = Vec::new();
        for i in 0..n {
            let cols: Vec<usize> = if i % 2 == 0 {
                (0..12).map(|d| i + d).collect()
            } else {
                (0..6).map(|d| i + 130 * d).collect()
            };
            for (d, j) in cols.into_iter().filter(|&j| j < n).enumerate() {
                t.push((i, j, 1.0 + (i % 7) as f64 + 0.25 * d as f64));
            }
        }
        let b = CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &t, IndexBase::Zero).unwrap();
        let t: Vec<_> = (0..n)
            .flat_map(|i| (0..10).map(move |d| (i, i + d, 0.5 - (d % 3) as f64)))
            .filter(|&(_, j, _)| j < n)
            .collect();
        let a = CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &t, IndexBase::Zero).unwrap();
        let (av, bv) = (a.view(), b.view());
        let expected = reference::spgemm(&av, Op::N, &bv, Op::N, 2.0).unwrap();
        dense_equals_bit_for_bit(&av, &bv, &expected, &[1, 2]);

        let ctx = Context::cpu().unwrap();
        let mut plan = SpgemmPlan::new(&ctx, &av, Op::N, &bv, Op::N, Algorithm::Dense).unwrap();
        plan.expect_structure_first();
        plan.set_pattern_check(PatternCheck::Caller);
        let nnz = plan.symbolic(&ctx, &av, &bv).unwrap();
        assert_eq!(nnz, expected.col_indices().len());
        let (mut offsets, mut cols) = (vec![0i32; n + 1], vec![0i32; nnz]);
        plan.write_structure(&ctx, &av, &bv, &mut offsets, &mut cols, IndexBase::Zero)
            .unwrap();
        assert_eq!(offsets, expected.row_offsets());
        assert_eq!(cols, expected.col_indices());
        let mut vals = vec![0.0; nnz];
        let out = CsrOutput::<f64, i32, i32>::values_on_pattern(&mut vals, &cols, IndexBase::Zero);
        plan.numeric(&ctx, &av, &bv, 2.0, 0.0, out).unwrap();
        let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&vals), bits(expected.values()));
    }

    #[test]
    fn listed_columns_keep_rows_whole_across_blocks_and_reuse_them() {
        use super::{ListedColumns, ScratchPool, LISTED_BLOCK_ENTRIES};
        let pool = ScratchPool::new(1 << 30);
        let mut listed = ListedColumns::<i32> { blocks: Vec::new() };
        let first: Vec<i32> = (0..LISTED_BLOCK_ENTRIES as i32 - 3).collect();
        let long: Vec<i32> = (0..LISTED_BLOCK_ENTRIES as i32 + 5).rev().collect();
        listed
            .push_row(first.len(), &pool)
            .unwrap()
            .copy_from_slice(&first);
        // Fits in the first block's last three entries.
        listed.push_row(2, &pool).unwrap().copy_from_slice(&[7, 9]);
        assert_eq!(listed.blocks.len(), 1);
        // Its repeat does not: a new block.
        listed.repeat_last_row(2, &pool).unwrap();
        assert_eq!(listed.blocks.len(), 2);
        // A row longer than a block, in a block of its own, and its repeat.
        listed
            .push_row(long.len(), &pool)
            .unwrap()
            .copy_from_slice(&long);
        listed.repeat_last_row(long.len(), &pool).unwrap();
        assert_eq!(listed.blocks.len(), 4);
        let want: Vec<i32> = [&first[..], &[7, 9, 7, 9], &long, &long]
            .concat()
            .iter()
            .map(|c| c + 1)
            .collect();
        assert_eq!(listed.len(), want.len());
        let mut out = vec![0i32; want.len()];
        listed.copy_to(&mut out, 1).unwrap();
        assert!(listed.copy_to(&mut out[1..], 1).is_err());
        assert_eq!(out, want);
        // The blocks go to the pool, and the next listing takes one.
        listed.keep(&pool);
        let kept = pool.bytes();
        assert!(kept >= 4 * LISTED_BLOCK_ENTRIES * 4);
        let mut next = ListedColumns::<i32> { blocks: Vec::new() };
        next.push_row(1, &pool).unwrap()[0] = 5;
        assert!(pool.bytes() < kept);
    }
}
