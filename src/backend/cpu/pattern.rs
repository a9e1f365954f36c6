//! The numeric phase on a structure of C that is already known (the reuse
//! flow's `reuse_compute`, and PETSc's MAT_REUSE_MATRIX through the C ABI):
//! every product is added into a dense accumulator as wide as op(B), and
//! each row of C then reads its values at its known columns, so nothing is
//! searched, marked in a bit map or sorted.
//!
//! This is PETSc's numeric phase for sorted C (`MatMatMultNumeric_SeqAIJ_
//! SeqAIJ_Sorted`: scatter the products into `ab_dense`, gather C's row and
//! zero what was read), in two forms:
//!
//! - **Counted** (a pattern nobody checked: the Rust API's
//!   [`crate::CsrOutput::values_on_pattern`] on columns other than those
//!   the plan's `write_structure` wrote last): each cell also counts its
//!   products, which makes the kernel safe on its own. A row's gather
//!   reads, and zeroes, the sum and the count of each of its columns, so
//!   after it every column of the row has had at least one product (a zero
//!   count is a column listed twice, or one no product reaches) and the
//!   counts add up to the row's products exactly when no product fell
//!   outside the row. Any mismatch is an error, and the kernel then drops
//!   its accumulator, so a product outside C's row is never written into C
//!   nor left for a later row.
//! - **Sums alone** (the C ABI's `reuse_compute`, which has compared the
//!   fingerprints of A's and B's patterns with the plan's and of C's with
//!   the structure `reuse_copy` wrote, before anything is written; the
//!   Rust API likewise on the columns `write_structure` wrote; and any
//!   values-only output whose caller vouched for the patterns with
//!   [`crate::PatternCheck::Caller`]): C's pattern is then the product's
//!   structure, up to a 64-bit hash collision or the caller's word, and
//!   the counts would only repeat that check. Should it not be, the call's
//!   values are wrong but the accumulator is cleared before it is kept.
//!   Without them a cell is 8 bytes instead of 16 (f64), and the
//!   accumulator of A·P below (82,007 columns) 0.66 MB instead of 1.3 MB. The gather still
//!   refuses a column out of range, so nothing is written outside C or the
//!   accumulator. On PETSc's MAT_REUSE_MATRIX A·P (n = 64, one rank, one
//!   thread, five alternating runs) this took the median `reuse_compute`
//!   from 55 to 44 ms; PETSc's own numeric phase took 32-46 ms in the same
//!   runs.
//!
//! Per product this is one read-modify-write of a 16-byte cell (f64; 8
//! bytes with sums alone), where
//! the slot table it replaced (claim each column's slot, then look up the
//! slot's position and add into a row buffer) cost a dependent load more,
//! a pass to claim the row and a tag test: about a third less CPU time per
//! `reuse_compute` on the GAMG prolongator product A·P (n = 64: 8.4 M
//! products into 3.5 M entries, 13 a row) and 2-3x less on long rows (band
//! and FEM block matrices). A merge of each row
//! of B along C's sorted row (PETSc's `_Scalable` variant) was measured too
//! and lost on every row length tried (4 to 32 entries): its searches are
//! branches that do not predict.
//!
//! With α = 1, β = 0 and sums alone, four shapes have loops of their own:
//! an op(B) with one entry a row (GAMG's tentative prolongator, an
//! aggregation: [`add_rows_one`], PETSc's loop over plain slices); short
//! rows of op(B) of uneven length under long rows of A (the 27-point
//! Poisson times a smoothed prolongator: [`add_rows_masked`], each row of
//! op(B) added a fixed width, the products past its end into spare cells
//! chosen by a mask, so that no loop ends at a row's unpredictable end);
//! the same under short rows of A (the 7-point Poisson times a smoothed
//! prolongator: [`add_rows_staged`], each row's products listed first,
//! its rows of op(B) copied a fixed width, then added in one loop); and
//! long rows of A over short rows of op(B) of even length
//! ([`add_rows_paired`], two rows of A at a time into two accumulators,
//! each row's additions in the same order).
//!
//! From the third numeric phase on one checked structure, the plan may
//! replay instead the positions of the products in C's rows that this
//! kernel recorded on the second (`positions.rs`,
//! [`accumulate_rows_recording`]): the same sums without the accumulator.

use super::rows::{
    one_entry_rows, prefetch_rows_of_b, too_many_columns, Chunk, NumericPiece, Operand, Scale,
    PREFETCH_AHEAD,
};
use super::scratch::{bytes_of, Scratch};
use super::{SplitInput, SplitRows};
use crate::error::{try_vec, Error, Result};
use crate::plan::select::DENSE_MAX_BYTES;
use crate::plan::RowPattern;
use crate::types::{Index, Scalar};

/// Whether the accumulator of op(B)'s `ncols` columns is small enough for
/// the known-structure kernel: at most [`DENSE_MAX_BYTES`] / 8 columns
/// (the kernel's bound before the accumulator held its sums: 8 MiB of
/// 8-byte slots), so 16-24 MiB per chunk for 16-24-byte cells.
pub(super) fn fits(ncols: usize) -> bool {
    ncols.saturating_mul(8) <= DENSE_MAX_BYTES
}

/// The least size of op(B) (16 bytes an entry) for which the kernel
/// prefetches the rows of op(B) that the rows of A read out of order
/// ([`Chunk::prefetch`]). One thread, minimum of 5 runs in three
/// alternating rounds, values on a known structure: delaunay_262144
/// 69.3 -> 51.7 ms, band_r120_8000 43.4 -> 38.7, uniform_r4_200000 13.9 ->
/// 12.4, GAMG's Pᵀ·(A·P) at 64³ 16.5 -> 15.8 (and, as the second product
/// of PETSc's MPI PtAP with Pᵀ gathered, 9.8-10.5 -> 7.8-8.6 ms a rank on
/// two ranks); but products whose op(B) stays in the last-level cache
/// (1.4-4.7 MB: bcsstk15, orani678, ex31, luxembourg_osm) 4-9 % slower,
/// hence the bound.
pub(super) const PREFETCH_MIN_B_BYTES: u64 = 8 << 20;

/// One column's cell in the accumulator. Zero between rows.
trait Slot<T: Scalar>: Copy + Send + 'static {
    /// Whether the cell counts its products, so that each row's gather
    /// checks C's row against its products exactly.
    const COUNTED: bool;
    fn zero() -> Self;
    /// Adds one product.
    fn add(&mut self, product: T);
    fn sum(self) -> T;
    /// The products added (0 when not [`Slot::COUNTED`]).
    fn count(self) -> u64;
}

/// The sum of the row's products in the column and their number.
#[derive(Clone, Copy)]
struct Counted<T> {
    sum: T,
    count: u64,
}

impl<T: Scalar> Slot<T> for Counted<T> {
    const COUNTED: bool = true;
    #[inline(always)]
    fn zero() -> Self {
        Counted {
            sum: T::zero(),
            count: 0,
        }
    }
    #[inline(always)]
    fn add(&mut self, product: T) {
        self.sum += product;
        self.count += 1;
    }
    #[inline(always)]
    fn sum(self) -> T {
        self.sum
    }
    #[inline(always)]
    fn count(self) -> u64 {
        self.count
    }
}

/// The sum alone: half the bytes of [`Counted`] for f64, for a pattern
/// whose fingerprints were checked.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct Sum<T>(T);

impl<T: Scalar> Slot<T> for Sum<T> {
    const COUNTED: bool = false;
    #[inline(always)]
    fn zero() -> Self {
        Sum(T::zero())
    }
    #[inline(always)]
    fn add(&mut self, product: T) {
        self.0 += product;
    }
    #[inline(always)]
    fn sum(self) -> T {
        self.0
    }
    #[inline(always)]
    fn count(self) -> u64 {
        0
    }
}

/// Bytes a chunk takes to add into C's known structure over `ncols`
/// columns of op(B) (with index base up to 1), for values of `T`: those
/// of the counted cells, an upper bound for the sums alone, and for the
/// two accumulators of sums of [`add_rows_paired`], which is taken only
/// where they fit it (f32, f64 and complex f32).
pub(super) fn workspace_bytes<T>(ncols: usize) -> u64 {
    (ncols as u64 + 1).saturating_mul(std::mem::size_of::<Counted<T>>() as u64)
}

/// A chunk's accumulator, indexed by op(B)'s columns as stored (with its
/// index base). Every cell is zero whenever it is not in use, also when it
/// is kept for a later product: a kernel that fails drops it.
struct Accumulator<S> {
    cells: Vec<S>,
}

impl<S> Accumulator<S> {
    /// One of at least `len` cells, all zero, kept in `scratch` or made.
    fn take<T: Scalar>(scratch: &super::ScratchPool, len: usize) -> Result<Self>
    where
        S: Slot<T>,
    {
        scratch.take_or_make(
            |t: &Accumulator<S>| t.cells.len() >= len,
            || {
                Ok::<_, Error>(Accumulator {
                    cells: try_vec(len, S::zero(), "dense accumulator")?,
                })
            },
        )
    }
}

impl<S: Send + 'static> Scratch for Accumulator<S> {
    fn bytes(&self) -> usize {
        bytes_of(&self.cells)
    }
}

/// Adds the products of the chunk's rows into its values of C at the
/// known columns `pattern` (all of C's columns with C's index base
/// `out.scale.base`; row `i` is `pattern[offsets[i]..offsets[i + 1]]`).
/// `out.vals` holds the values of these rows only, from
/// `offsets[rows.start]`; `out.cols` and `out.sorted` are not used. The
/// columns may be in any order within a row. With `split`, C's values go
/// to its two arrays instead (`out.vals` is then empty): each row's first
/// part to the first, the rest to the second, each array's part of the
/// chunk starting at its offset of `rows.start`.
///
/// `checked`: the caller compared the fingerprints of A's and B's
/// patterns with the plan's and of `pattern` with the structure the plan
/// wrote, so `pattern` is C's structure for these operands (up to a
/// 64-bit hash collision). The cells then hold sums alone, and a row's
/// gather checks only that its columns are in range. Otherwise each cell
/// also counts its products and every row is checked exactly (below).
///
/// # Errors
/// [`Error::InvalidValue`] when a row of `pattern` is not the set of its
/// products' columns (a column out of range, listed twice or reached by no
/// product, or a product outside the row; with `checked`, a column out of
/// range only); rows before it are written. [`Error::AllocFailed`] for
/// the accumulator.
pub(super) fn accumulate_rows<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    a_split: Option<SplitInput<'_, T, I>>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    (pattern, checked): (&[J], bool),
    out: NumericPiece<'_, T, J>,
    split: Option<SplitRows<'_, T>>,
) -> Result<()> {
    let job = (chunk, pattern, out, split);
    match (checked, a_split) {
        (true, None) => {
            accumulate_with::<Sum<T>, T, I, J, _, _>(a, a.values, b, job, &mut NoRecord)
        }
        (false, None) => {
            accumulate_with::<Counted<T>, T, I, J, _, _>(a, a.values, b, job, &mut NoRecord)
        }
        (true, Some(s)) => accumulate_with::<Sum<T>, T, I, J, _, _>(a, s, b, job, &mut NoRecord),
        (false, Some(s)) => {
            accumulate_with::<Counted<T>, T, I, J, _, _>(a, s, b, job, &mut NoRecord)
        }
    }
}

/// [`accumulate_rows`] on a checked pattern (sums alone), with `recorder`
/// told each row of C after it is written (see [`RowRecorder`]).
///
/// # Errors
/// As [`accumulate_rows`], and the recorder's.
pub(super) fn accumulate_rows_recording<T: Scalar, I: Index, J: Index, R: RowRecorder<J>>(
    a: &Operand<'_, T, I, J>,
    a_split: Option<SplitInput<'_, T, I>>,
    b: &Operand<'_, T, I, J>,
    (chunk, pattern): (Chunk<'_>, &[J]),
    out: NumericPiece<'_, T, J>,
    split: Option<SplitRows<'_, T>>,
    recorder: &mut R,
) -> Result<()> {
    let job = (chunk, pattern, out, split);
    match a_split {
        None => accumulate_with::<Sum<T>, T, I, J, _, _>(a, a.values, b, job, recorder),
        Some(s) => accumulate_with::<Sum<T>, T, I, J, _, _>(a, s, b, job, recorder),
    }
}

/// What [`accumulate_rows_recording`] tells: each row of C before its
/// products are added (C's columns of the row, `cols`, with C's index
/// base `c_base`), then each product's column of op(B) (zero-based), in
/// the order they are added.
pub(super) trait RowRecorder<J> {
    /// Whether it records anything (else the kernel skips the calls).
    const RECORDS: bool;
    /// # Errors
    /// The recorder's own (a column out of range).
    fn row(&mut self, i: usize, c_row: (&[J], usize)) -> Result<()>;
    fn product(&mut self, column: usize);
}

/// The recorder of [`accumulate_rows`]: nothing.
struct NoRecord;

impl<J> RowRecorder<J> for NoRecord {
    const RECORDS: bool = false;
    #[inline(always)]
    fn row(&mut self, _: usize, _: (&[J], usize)) -> Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn product(&mut self, _: usize) {}
}

/// [`accumulate_rows`] with cells `S`, A's values read from `a_in`, each
/// row told to `recorder`.
#[allow(clippy::type_complexity)]
fn accumulate_with<S: Slot<T>, T: Scalar, I: Index, J: Index, A: RowInput<T>, R: RowRecorder<J>>(
    a: &Operand<'_, T, I, J>,
    a_in: A,
    b: &Operand<'_, T, I, J>,
    (chunk, pattern, out, split): (
        Chunk<'_>,
        &[J],
        NumericPiece<'_, T, J>,
        Option<SplitRows<'_, T>>,
    ),
    recorder: &mut R,
) -> Result<()> {
    let prefetch = chunk.prefetch() && b.pattern.cols.len() as u64 * 16 > PREFETCH_MIN_B_BYTES;
    let Chunk {
        rows,
        scratch,
        work,
        ..
    } = chunk;
    // An op(B) with one entry a row (an aggregation): its row `r` is the
    // entry `origin + r`, found without reading its offsets.
    let one = one_entry_rows(&b.pattern, work);
    let len = b.pattern.ncols + b.pattern.base;
    let plain =
        out.scale.alpha == T::one() && out.scale.beta == T::zero() && !S::COUNTED && !R::RECORDS;
    let a_entries =
        a.pattern.offsets[rows.end].as_usize() - a.pattern.offsets[rows.start].as_usize();
    let products = work.rows(rows.clone());
    // The spread of op(B)'s rows, read only when the rest of `masks_rows`
    // holds.
    let spread = || {
        let (ap, bp) = (&a.pattern, &b.pattern);
        let entries = ap.offsets[rows.start].as_usize()..ap.offsets[rows.end].as_usize();
        spread_of_rows_of_b((ap.cols, ap.base), bp.offsets, entries)
    };
    // Not where op(B)'s rows are prefetched: the masked loop has no
    // prefetching copy (one copy per width for every type is build time
    // enough), and the loops that do were measured there.
    let maskable = plain && one.is_none() && !prefetch;
    let masked = match maskable && spare_cells_fit::<T>(len, b.pattern.ncols) {
        true => masks_rows(rows.len(), a_entries, products, spread),
        false => None,
    };
    // The masked loop's spare cells, after the accumulator's.
    let spare = if masked.is_some() {
        MASK_SPARE_CELLS
    } else {
        0
    };
    let mut acc = Accumulator::<S>::take(scratch, len + spare)?;
    let (offsets, scale) = (out.offsets, out.scale);
    let cells = &mut acc.cells[..len + spare];
    // The second accumulator of `add_rows_paired`.
    let pairs = masked.is_none() && pairs_rows(a_entries, products, rows.len());
    let mut paired = match plain && one.is_none() && two_sums_fit::<T>() && pairs {
        true => Some(Accumulator::<S>::take(scratch, len)?),
        false => None,
    };
    let row_loop = match (paired.as_mut(), masked) {
        (Some(p), _) => RowLoop::Paired(&mut p.cells[..len]),
        (None, Some(width)) => RowLoop::Masked { width, spare: len },
        (None, None)
            if plain && one.is_none() && stages_rows(rows.len(), a_entries, products, spread) =>
        {
            RowLoop::Staged
        }
        (None, None) => RowLoop::General,
    };
    match split {
        None if plain && one.is_some() => {
            let whole = OneArray {
                vals: out.vals,
                origin: offsets[rows.start],
            };
            let c = (offsets, pattern, scale.base);
            add_rows_one((a, a_in, b), rows, one.unwrap_or(0), c, whole, cells)?;
        }
        Some(split) if plain && one.is_some() => {
            let c = (offsets, pattern, scale.base);
            add_rows_one_split((a, a_in, b), rows, one.unwrap_or(0), c, split, cells)?;
        }
        None => {
            let whole = OneArray {
                vals: out.vals,
                origin: offsets[rows.start],
            };
            let job = (a, a_in, b, rows, one);
            let c = (offsets, pattern);
            add_rows_either(
                prefetch,
                job,
                c,
                (whole, scale),
                (cells, row_loop),
                recorder,
            )?;
        }
        Some(split) => {
            let origins = (
                split.first_offsets[rows.start],
                split.second_offsets[rows.start],
            );
            let two = TwoArrays { split, origins };
            let job = (a, a_in, b, rows, one);
            let c = (offsets, pattern);
            add_rows_either(prefetch, job, c, (two, scale), (cells, row_loop), recorder)?;
        }
    }
    // The spare cells' sums, never read.
    acc.cells[len..len + spare].fill(S::zero());
    if !S::COUNTED {
        // Sums alone cannot tell a product outside C's row: one is left in
        // its cell only when the pattern is not this product's structure
        // (a caller that vouched for a changed pattern, or a hash
        // collision). That call's values are then wrong, but the
        // accumulator goes back to the pool all zero, so no later product
        // inherits it. One read of the accumulator per chunk (82,007
        // cells for the GAMG A·P below: about 0.1 ms of 20).
        for acc in std::iter::once(&mut acc).chain(paired.as_mut()) {
            let cells = &mut acc.cells[..len];
            if cells.iter().any(|c| c.sum() != T::zero()) {
                cells.fill(S::zero());
            }
        }
    }
    scratch.give(acc);
    if let Some(second) = paired {
        scratch.give(second);
    }
    Ok(())
}

/// Whether two accumulators of sums fit the bytes planned for a chunk of
/// the kernel ([`workspace_bytes`]: one of counted cells), so that
/// [`add_rows_paired`] stays within the plan's peak: for f32, f64 and
/// complex f32, not complex f64.
fn two_sums_fit<T: Scalar>() -> bool {
    2 * std::mem::size_of::<Sum<T>>() <= std::mem::size_of::<Counted<T>>()
}

/// Whether a chunk's rows go through [`add_rows_paired`]: rows of A of
/// [`PAIRED_MIN_A_ROW`] entries or more on average, each entry's row of
/// op(B) short (2 to [`PAIRED_MAX_B_ROW`] entries on average); unless
/// they are masked instead ([`masks_rows`]: rows of op(B) of uneven
/// length, the smoothed prolongators below).
fn pairs_rows(a_entries: usize, products: u64, rows: usize) -> bool {
    let (entries, products) = (a_entries as f64, products as f64);
    rows > 1
        && entries >= PAIRED_MIN_A_ROW * rows as f64
        && products >= 2.0 * entries
        && products <= PAIRED_MAX_B_ROW * entries
}

/// See [`pairs_rows`]. `numeric_variants`-style loops, one thread, the
/// 2-vCPU AMD EPYC VM of session 79, minimum of 7, PETSc's loop / two rows
/// at a time: the 27-point Poisson at 64³ (27 entries a row) times GAMG's
/// smoothed prolongator (3.9 entries a row) 56.1 -> 47.9 ms, and times
/// the 7-point one's (3.5) 58.0 -> 50.6; the 7-point Poisson (7 entries)
/// times either 19.0 -> 18.9 and 18.4 -> 18.0, at 96³ 63.8 -> 64.3; the
/// squares of FEM matrices (30 entries a row of A and of B) lost 4-13 %
/// (ex31 2.54 -> 2.86 ms), as did one entry a row of op(B) (an
/// aggregation, which has its own loop).
const PAIRED_MIN_A_ROW: f64 = 16.0;

/// See [`pairs_rows`].
const PAIRED_MAX_B_ROW: f64 = 8.0;

/// Which loop adds a chunk's rows (α = 1, β = 0, sums alone and nothing
/// recorded, for all but the general one).
enum RowLoop<'c, S> {
    /// [`add_rows`].
    General,
    /// [`add_rows_paired`], with its second accumulator.
    Paired(&'c mut [S]),
    /// [`add_rows_staged`].
    Staged,
    /// [`add_rows_masked`] at `width` (6 or 8), its spare cells from
    /// `spare`.
    Masked { width: usize, spare: usize },
}

/// The chunk's rows by the loop `row_loop` names, prefetching the rows of
/// op(B) or not.
#[allow(clippy::type_complexity)]
fn add_rows_either<
    S: Slot<T>,
    T: Scalar,
    I: Index,
    J: Index,
    A: RowInput<T>,
    O: RowValues<T>,
    R: RowRecorder<J>,
>(
    prefetch: bool,
    (a, a_in, b, rows, one): (
        &Operand<'_, T, I, J>,
        A,
        &Operand<'_, T, I, J>,
        std::ops::Range<usize>,
        Option<usize>,
    ),
    c: (&[usize], &[J]),
    out: (O, &Scale<T>),
    (cells, row_loop): (&mut [S], RowLoop<'_, S>),
    recorder: &mut R,
) -> Result<()> {
    let job = ((a, a_in, b), rows.clone(), c);
    let general = (rows, one);
    match (row_loop, prefetch) {
        (RowLoop::Paired(second), true) => {
            add_rows_paired::<true, _, _, _, _, _, _>(job, out, (cells, second))
        }
        (RowLoop::Paired(second), false) => {
            add_rows_paired::<false, _, _, _, _, _, _>(job, out, (cells, second))
        }
        (RowLoop::Staged, true) => add_rows_staged::<true, _, _, _, _, _, _>(job, out, cells),
        (RowLoop::Staged, false) => add_rows_staged::<false, _, _, _, _, _, _>(job, out, cells),
        // Never with prefetching (`accumulate_with`).
        (RowLoop::Masked { width, spare }, _) => match width {
            6 => add_rows_masked::<6, _, _, _, _, _, _>(job, out, (cells, spare)),
            _ => add_rows_masked::<8, _, _, _, _, _, _>(job, out, (cells, spare)),
        },
        (RowLoop::General, true) => {
            add_rows::<true, _, _, _, _, _, _, _>(a, a_in, b, general, c, out, cells, recorder)
        }
        (RowLoop::General, false) => {
            add_rows::<false, _, _, _, _, _, _, _>(a, a_in, b, general, c, out, cells, recorder)
        }
    }
}

/// Whether a chunk's rows go through [`add_rows_staged`]: `rows` rows of
/// A of fewer than [`PAIRED_MIN_A_ROW`] entries on average (`entries` in
/// all), each entry's row of op(B) short (2 to [`STAGE_WIDTH`] entries on
/// average, `products` in all) and of uneven length, so that a loop over
/// each row of op(B) ends where the branch predictor cannot learn: a
/// standard deviation (`spread()`, [`spread_of_rows_of_b`], not called
/// unless the rest holds) of at least [`UNEVEN_MIN_SPREAD`] entries. One
/// thread, `phases_vs_gustavson`'s values on a known structure, general
/// loop / staged: the 7-point Poisson times GAMG's smoothed prolongator
/// (7 entries a row of A, 3.6 a row of P, spread 1.2) 21.9-22.2 ->
/// 15.3-15.5 ms at 64³ and 75.0-76.2 -> 53.4-54.0 at 96³; delaunay_262144
/// squared (7.3, spread 1.4) 112.6 -> 109.7. Rows of op(B) of even length
/// lose where staged (`numeric_variants`: the 5- and 7-point stencils
/// squared 25-30 %, spread 0.1-0.3), and so do the short ones of a road
/// graph (luxembourg_osm squared, 2.2 a row, spread 0.5).
fn stages_rows(rows: usize, entries: usize, products: u64, spread: impl FnOnce() -> f64) -> bool {
    let per_entry = products as f64 / entries.max(1) as f64;
    rows > 0
        && (entries as f64) < PAIRED_MIN_A_ROW * rows as f64
        && (2.0..=STAGE_WIDTH as f64).contains(&per_entry)
        && spread() >= UNEVEN_MIN_SPREAD
}

/// The width [`add_rows_masked`] adds each row of op(B) at, or `None` for
/// another loop: where `rows` rows of A of [`PAIRED_MIN_A_ROW`] entries or
/// more on average (`entries` in all; shorter ones are staged,
/// [`stages_rows`]) name rows of op(B) that are short (2 to
/// [`MASK_MAX_WIDTH`] entries on average, `products` in all) and of
/// uneven length, so that a loop over each row of op(B) ends where the
/// branch predictor cannot learn: a standard deviation (`spread()`,
/// [`spread_of_rows_of_b`], not called unless the rest holds) of at least
/// [`UNEVEN_MIN_SPREAD`] entries. The
/// width is 6 where the mean plus one standard deviation is at most 6,
/// else 8, so that few rows of op(B) are longer (4 wide lost to 6 on both
/// products measured, `numeric_variants`: 55.0 and 16.2 ms against 45.3
/// and 15.6).
fn masks_rows(
    rows: usize,
    entries: usize,
    products: u64,
    spread: impl FnOnce() -> f64,
) -> Option<usize> {
    let per_entry = products as f64 / entries.max(1) as f64;
    let long = entries as f64 >= PAIRED_MIN_A_ROW * rows as f64;
    if rows == 0 || !long || !(2.0..=MASK_MAX_WIDTH as f64).contains(&per_entry) {
        return None;
    }
    let spread = spread();
    if spread < UNEVEN_MIN_SPREAD {
        return None;
    }
    Some(if per_entry + spread <= 6.0 {
        6
    } else {
        MASK_MAX_WIDTH
    })
}

/// Whether the known-structure kernel adds the product of `a` (op(A)'s
/// pattern) and `b` (op(B)'s), of `products` products, masked
/// ([`add_rows_masked`], [`masks_rows`] on all of A's rows) for values of
/// `T`, with α = 1, β = 0 and sums alone. There it beat the replay of
/// recorded positions (`positions.rs`): one thread, the 27-point Poisson
/// at 64³ times GAMG's smoothed prolongator, values on the known structure
/// 48.7-49.1 ms, the phase that records 99.8, replayed 55.8-55.9
/// (`phases_vs_gustavson`, session 84).
pub(super) fn adds_masked<T: Scalar, I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    products: u64,
) -> bool {
    let len = b.ncols + b.base;
    let spread = || spread_of_rows_of_b((a.cols, a.base), b.offsets, a.base..a.base + a.cols.len());
    spare_cells_fit::<T>(len, b.ncols)
        && masks_rows(a.nrows, a.cols.len(), products, spread).is_some()
}

/// The standard deviation of the lengths of the rows of op(B) (offsets
/// `b_offsets`) that A's entries `entries` (columns
/// `a_cols`, with index base `a_base`; the range with that base too) name,
/// over up to 256 of them spread evenly through the range; 0 for none or
/// an index out of range.
fn spread_of_rows_of_b<I: Index, J: Index>(
    (a_cols, a_base): (&[J], usize),
    b_offsets: &[I],
    entries: std::ops::Range<usize>,
) -> f64 {
    let step = entries.len().div_ceil(256).max(1);
    let (mut n, mut sum, mut squares) = (0.0, 0.0, 0.0);
    for e in entries.step_by(step) {
        let Some(k) = a_cols.get(e.wrapping_sub(a_base)) else {
            return 0.0;
        };
        let r = k.as_usize().wrapping_sub(a_base);
        let Some(bounds) = b_offsets.get(r..r.saturating_add(2)) else {
            return 0.0;
        };
        let len = bounds[1].as_usize().saturating_sub(bounds[0].as_usize()) as f64;
        n += 1.0;
        sum += len;
        squares += len * len;
    }
    if n == 0.0 {
        return 0.0;
    }
    let mean = sum / n;
    (squares / n - mean * mean).max(0.0).sqrt()
}

/// The standard deviation of the lengths of the rows of op(B) (entries)
/// from which they are uneven, for [`stages_rows`] and [`masks_rows`].
const UNEVEN_MIN_SPREAD: f64 = 0.8;

/// The widest [`add_rows_masked`] adds a row of op(B) at.
const MASK_MAX_WIDTH: usize = 8;

/// The spare cells [`add_rows_masked`] adds its masked-off products into,
/// after the accumulator's: two sets of [`MASK_MAX_WIDTH`], used by turns,
/// so that one entry's additions into them do not wait on the last's.
const MASK_SPARE_CELLS: usize = 2 * MASK_MAX_WIDTH;

/// Whether an accumulator of sums with [`MASK_SPARE_CELLS`] spare cells
/// after its `len` fits the bytes planned for a chunk of the kernel over
/// `ncols` columns ([`workspace_bytes`]: one of counted cells).
fn spare_cells_fit<T: Scalar>(len: usize, ncols: usize) -> bool {
    let bytes = (len as u64 + MASK_SPARE_CELLS as u64) * std::mem::size_of::<Sum<T>>() as u64;
    bytes <= workspace_bytes::<T>(ncols)
}

/// The products [`add_rows_staged`] copies of a row of op(B) at once.
const STAGE_WIDTH: usize = 8;

/// The products [`add_rows_staged`] holds before it adds them.
const STAGE_LEN: usize = 512;

/// A row's products staged, in the order they are to be added: columns
/// of op(B) as stored and the products, `len` of them.
struct Stage<J, T> {
    cols: [J; STAGE_LEN + STAGE_WIDTH],
    vals: [T; STAGE_LEN + STAGE_WIDTH],
    len: usize,
}

impl<J: Index, T: Scalar> Stage<J, T> {
    fn new() -> Self {
        Stage {
            cols: [J::default(); STAGE_LEN + STAGE_WIDTH],
            vals: [T::zero(); STAGE_LEN + STAGE_WIDTH],
            len: 0,
        }
    }

    /// Stages entries `s..e` of op(B) (`b_cols`, `b_vals`) times `f`: a
    /// row of [`STAGE_WIDTH`] entries or fewer is copied that wide (what
    /// follows it too, past the stage's end), else the stage is added and
    /// the row added straight into `cells`, so every column's products
    /// are added in order.
    #[inline(always)]
    fn add_row<S: Slot<T>>(
        &mut self,
        (s, e, f): (usize, usize, T),
        (b_cols, b_vals): (&[J], &[T]),
        cells: &mut [S],
    ) {
        let len = e - s;
        if len <= STAGE_WIDTH {
            let end = s + STAGE_WIDTH;
            if let (Some(bc), Some(bv)) = (b_cols.get(s..end), b_vals.get(s..end)) {
                if self.len > STAGE_LEN {
                    self.add_into(cells);
                }
                // As arrays of STAGE_WIDTH (`self.len` is at most
                // STAGE_LEN here), so that the copy is vectorized in every
                // instance of the kernel: as slices, with A's values split,
                // it was not, and the staged loop took a quarter longer.
                let at = self.len;
                let to = (
                    &mut self.cols[at..at + STAGE_WIDTH],
                    &mut self.vals[at..at + STAGE_WIDTH],
                );
                let arrays = (
                    <&[J; STAGE_WIDTH]>::try_from(bc),
                    <&[T; STAGE_WIDTH]>::try_from(bv),
                    <&mut [J; STAGE_WIDTH]>::try_from(to.0),
                    <&mut [T; STAGE_WIDTH]>::try_from(to.1),
                );
                if let (Ok(bc), Ok(bv), Ok(cols), Ok(vals)) = arrays {
                    *cols = *bc;
                    for (to, &v) in vals.iter_mut().zip(bv) {
                        *to = f * v;
                    }
                    self.len += len;
                    return;
                }
            }
        }
        self.add_into(cells);
        for (&c, &v) in b_cols[s..e].iter().zip(&b_vals[s..e]) {
            cells[c.as_usize()].add(f * v);
        }
    }

    /// Adds the staged products into `cells` and empties the stage.
    #[inline(always)]
    fn add_into<S: Slot<T>>(&mut self, cells: &mut [S]) {
        let n = self.len.min(STAGE_LEN + STAGE_WIDTH);
        for (&c, &v) in self.cols[..n].iter().zip(&self.vals[..n]) {
            cells[c.as_usize()].add(v);
        }
        self.len = 0;
    }
}

/// [`add_rows`] with each row's products first staged ([`Stage`]) and
/// then added in one loop (α = 1, β = 0, sums alone, nothing recorded):
/// each row of op(B) is copied [`STAGE_WIDTH`] entries wide whatever its
/// length, so the loops end once a row of C instead of once a row of
/// op(B). The products are added in the same order as by [`add_rows`], so
/// C's values are the same, bit for bit. Taken where rows of op(B) are
/// short and uneven ([`stages_rows`]): the 7-point Poisson times GAMG's
/// smoothed prolongator (7 entries a row of A, 3.6 a row of P, standard
/// deviation 1.2).
#[inline(never)]
#[allow(clippy::type_complexity)]
fn add_rows_staged<
    const PREFETCH: bool,
    S: Slot<T>,
    T: Scalar,
    I: Index,
    J: Index,
    A: RowInput<T>,
    O: RowValues<T>,
>(
    ((a, a_in, b), rows, (offsets, pattern)): (
        (&Operand<'_, T, I, J>, A, &Operand<'_, T, I, J>),
        std::ops::Range<usize>,
        (&[usize], &[J]),
    ),
    (mut out, scale): (O, &Scale<T>),
    cells: &mut [S],
) -> Result<()> {
    let (ap, bp) = (&a.pattern, &b.pattern);
    let scale = *scale;
    let n = bp.cols.len().min(b.values.len());
    let (b_cols, b_vals) = (&bp.cols[..n], &b.values[..n]);
    let mut stage = Box::new(Stage::<J, T>::new());
    for i in rows {
        if PREFETCH {
            prefetch_rows_of_b(ap, bp, b_vals, i + PREFETCH_AHEAD);
        }
        let (head, tail) = row_parts(ap, &a_in, i)?;
        for (cols, vals) in [head, tail] {
            for (&k, &f) in cols.iter().zip(vals) {
                let bounds = &bp.offsets[k.as_usize() - ap.base..][..2];
                let (s, e) = (
                    bounds[0].as_usize() - bp.base,
                    bounds[1].as_usize() - bp.base,
                );
                stage.add_row((s, e, f), (b_cols, b_vals), cells);
            }
        }
        stage.add_into(cells);
        let c_row = offsets[i]..offsets[i + 1];
        let cols = &pattern[c_row.clone()];
        let parts = out.row(i, c_row);
        gather_parts(parts, cols, &mut cells[bp.base..], (i, &scale, bp.ncols))?;
    }
    Ok(())
}

/// [`add_rows`] with each row of op(B) added `W` products at a time
/// whatever its length (α = 1, β = 0, sums alone, nothing recorded): the
/// first `W` entries from where the row starts (reading what follows it
/// in op(B)'s arrays), each product past the row's end added into a spare
/// cell (`cells[spare..]`, [`MASK_SPARE_CELLS`] of them, after op(B)'s
/// columns and base) chosen by a mask instead of a branch, and a row
/// longer than `W` finished in a loop. The loops end once an entry of A
/// instead of at each row of op(B)'s unpredictable end. Every cell of C
/// gets the same products in the same order as by [`add_rows`], so C's
/// values are the same, bit for bit; the spare cells' sums are never read
/// and are zeroed by the caller. Where a row's `W` entries would pass the
/// end of op(B)'s arrays it is added plainly.
///
/// One thread, 2-vCPU AMD EPYC VM, session 84, minimum of 7. Stand-alone
/// (`numeric_variants`; PETSc's loop / two rows at a time / each row
/// staged 8 wide / masked 6 wide): the 27-point Poisson at 64³ times
/// GAMG's smoothed prolongator (26 entries a row of A, 4.0 a row of P,
/// standard deviation 1.3) 64.0 / 58.2 / 63.1 / 43.4-45.3 ms; the 7-point
/// one times its own (6.9 entries, 3.6, 1.2) 21.5 / 21.6 / 19.1 / 14.7-15.6.
/// With the width known only at run time the loop was not unrolled (51 ms
/// on the first); with a branch instead of the mask, 80.7. In the library
/// (`phases_vs_gustavson`, values on the kept structure) the first went
/// from 58.3-58.9 ms paired to 48.7-49.1, but the second took 17.2 ms
/// masked against 16.5-16.6 staged, hence [`masks_rows`]' long rows of A.
#[inline(never)]
#[allow(clippy::type_complexity)]
fn add_rows_masked<
    const W: usize,
    S: Slot<T>,
    T: Scalar,
    I: Index,
    J: Index,
    A: RowInput<T>,
    O: RowValues<T>,
>(
    ((a, a_in, b), rows, (offsets, pattern)): (
        (&Operand<'_, T, I, J>, A, &Operand<'_, T, I, J>),
        std::ops::Range<usize>,
        (&[usize], &[J]),
    ),
    (mut out, scale): (O, &Scale<T>),
    (cells, spare): (&mut [S], usize),
) -> Result<()> {
    let (ap, bp) = (&a.pattern, &b.pattern);
    let scale = *scale;
    let n = bp.cols.len().min(b.values.len());
    let (b_cols, b_vals) = (&bp.cols[..n], &b.values[..n]);
    for i in rows {
        let (head, tail) = row_parts(ap, &a_in, i)?;
        let mut turn = 0;
        for (cols, vals) in [head, tail] {
            for (&k, &f) in cols.iter().zip(vals) {
                let bounds = &bp.offsets[k.as_usize() - ap.base..][..2];
                let (s, e) = (
                    bounds[0].as_usize() - bp.base,
                    bounds[1].as_usize() - bp.base,
                );
                let spare = spare + (turn & 1) * MASK_MAX_WIDTH;
                turn += 1;
                add_row_masked::<W, S, T, J>((s, e, f), (b_cols, b_vals), (cells, spare));
            }
        }
        let c_row = offsets[i]..offsets[i + 1];
        let cols = &pattern[c_row.clone()];
        let parts = out.row(i, c_row);
        // Op(B)'s cells alone: a column of C at a spare cell is out of
        // range.
        gather_parts(
            parts,
            cols,
            &mut cells[bp.base..spare],
            (i, &scale, bp.ncols),
        )?;
    }
    Ok(())
}

/// Adds entries `s..e` of op(B) (`b_cols`, `b_vals`) times `f` into
/// `cells` as [`add_rows_masked`] does, `W` at a time, the products past
/// `e` into `cells[spare..spare + W]`.
#[inline(always)]
fn add_row_masked<const W: usize, S: Slot<T>, T: Scalar, J: Index>(
    (s, e, f): (usize, usize, T),
    (b_cols, b_vals): (&[J], &[T]),
    (cells, spare): (&mut [S], usize),
) {
    let len = e - s;
    let end = s + W;
    if let (Some(bc), Some(bv)) = (b_cols.get(s..end), b_vals.get(s..end)) {
        if let (Ok(bc), Ok(bv)) = (<&[J; W]>::try_from(bc), <&[T; W]>::try_from(bv)) {
            for t in 0..W {
                // All ones where `t` is within the row, else zero: the
                // column or the spare cell, without a branch.
                let mask = usize::from(t < len).wrapping_neg();
                let c = (bc[t].as_usize() & mask) | ((spare + t) & !mask);
                cells[c].add(f * bv[t]);
            }
            if len > W {
                for (&c, &v) in b_cols[end..e].iter().zip(&b_vals[end..e]) {
                    cells[c.as_usize()].add(f * v);
                }
            }
            return;
        }
    }
    for (&c, &v) in b_cols[s..e].iter().zip(&b_vals[s..e]) {
        cells[c.as_usize()].add(f * v);
    }
}

/// [`add_rows`] two rows at a time (α = 1, β = 0, sums alone, nothing
/// recorded): the entries of the two rows of A taken in turns, each
/// adding its row of op(B) into its row's own accumulator (`cells`), so
/// that the two rows' additions do not wait on each other. Each row's
/// products are added in the same order as by [`add_rows`], so C's values
/// are the same, bit for bit. Where rows of A are long and their rows of
/// op(B) short (A times a smoothed prolongator at 27 points: 105 products
/// into 9 columns a row) this took 15 % less time; see [`pairs_rows`].
#[inline(never)]
#[allow(clippy::type_complexity)]
fn add_rows_paired<
    const PREFETCH: bool,
    S: Slot<T>,
    T: Scalar,
    I: Index,
    J: Index,
    A: RowInput<T>,
    O: RowValues<T>,
>(
    ((a, a_in, b), rows, (offsets, pattern)): (
        (&Operand<'_, T, I, J>, A, &Operand<'_, T, I, J>),
        std::ops::Range<usize>,
        (&[usize], &[J]),
    ),
    (mut out, scale): (O, &Scale<T>),
    (first, second): (&mut [S], &mut [S]),
) -> Result<()> {
    let (ap, bp) = (&a.pattern, &b.pattern);
    let scale = *scale;
    let n = bp.cols.len().min(b.values.len());
    let (b_cols, b_vals) = (&bp.cols[..n], &b.values[..n]);
    let bs = (bp.offsets, b_cols, b_vals, bp.base);
    let parts = |i: usize| row_parts(ap, &a_in, i);
    let mut gather = |i: usize, cells: &mut [S]| -> Result<u64> {
        let c_row = offsets[i]..offsets[i + 1];
        let cols = &pattern[c_row.clone()];
        let parts = out.row(i, c_row);
        gather_parts(parts, cols, &mut cells[bp.base..], (i, &scale, bp.ncols))
    };
    for i in rows.clone().step_by(2) {
        let j = i + 1;
        if PREFETCH {
            prefetch_rows_of_b(ap, bp, b_vals, i + PREFETCH_AHEAD);
            prefetch_rows_of_b(ap, bp, b_vals, j + PREFETCH_AHEAD);
        }
        let (head, tail) = parts(i)?;
        if j < rows.end {
            let (other_head, other_tail) = parts(j)?;
            add_products_paired((head, other_head), ap.base, bs, (first, second));
            add_products_paired((tail, other_tail), ap.base, bs, (first, second));
        } else {
            add_products((head.0, head.1, ap.base), bs, first, &mut NoRecord);
            add_products((tail.0, tail.1, ap.base), bs, first, &mut NoRecord);
        }
        gather(i, first)?;
        if j < rows.end {
            gather(j, second)?;
        }
    }
    Ok(())
}

/// The products of two parts of rows of A (columns and values), the
/// first's into `cells.0` and the second's into `cells.1`, their entries
/// taken in turns and each part's in stored order.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn add_products_paired<S: Slot<T>, T: Scalar, I: Index, J: Index>(
    (x, y): ((&[J], &[T]), (&[J], &[T])),
    a_base: usize,
    bs: (&[I], &[J], &[T], usize),
    (first, second): (&mut [S], &mut [S]),
) {
    let add = |k: J, f: T, cells: &mut [S]| {
        add_row_of_b((k.as_usize() - a_base, f), bs, cells, &mut NoRecord);
    };
    let n = x.0.len().min(x.1.len());
    let m = y.0.len().min(y.1.len());
    let both = n.min(m);
    for t in 0..both {
        add(x.0[t], x.1[t], first);
        add(y.0[t], y.1[t], second);
    }
    for t in both..n {
        add(x.0[t], x.1[t], first);
    }
    for t in both..m {
        add(y.0[t], y.1[t], second);
    }
}

/// The error for column `c` of row `i` of C (`cols`, with index base
/// `c_base`, of `ncols` columns), which the gather found out of range or
/// without products: out of range, listed twice, or reached by no product.
#[cold]
#[inline(never)]
fn bad_column<J: Index>(i: usize, cols: &[J], c: J, (c_base, ncols): (usize, usize)) -> Error {
    let j = c.as_usize().wrapping_sub(c_base);
    Error::InvalidValue(if j >= ncols {
        format!(
            "C's column index {} in row {i} is out of range for {ncols} columns",
            c.to_i64()
        )
    } else if cols.iter().filter(|&&x| x == c).count() > 1 {
        format!("row {i} of C lists column {j} twice")
    } else {
        format!(
            "row {i} of C lists column {j}, which no product of the row reaches: \
             the pattern of A or B changed between phases"
        )
    })
}

/// Where a chunk's rows of C go: row `i` (at `c_row` of C's entries) as
/// two slices, the first part of the row and the rest ([`OneArray`]: all
/// of it and none).
pub(super) trait RowValues<T> {
    fn row(&mut self, i: usize, c_row: std::ops::Range<usize>) -> (&mut [T], &mut [T]);
}

/// The chunk's values in one array, from C's offset of its first row
/// (`origin`).
pub(super) struct OneArray<'a, T> {
    pub vals: &'a mut [T],
    pub origin: usize,
}

impl<T> RowValues<T> for OneArray<'_, T> {
    #[inline(always)]
    fn row(&mut self, _: usize, c_row: std::ops::Range<usize>) -> (&mut [T], &mut [T]) {
        (
            &mut self.vals[c_row.start - self.origin..c_row.end - self.origin],
            &mut [],
        )
    }
}

/// The chunk's parts of the two arrays of a [`SplitRows`], each from its
/// offset of the chunk's first row (`origins`).
pub(super) struct TwoArrays<'a, T> {
    pub split: SplitRows<'a, T>,
    pub origins: (usize, usize),
}

impl<T> RowValues<T> for TwoArrays<'_, T> {
    #[inline(always)]
    fn row(&mut self, i: usize, _: std::ops::Range<usize>) -> (&mut [T], &mut [T]) {
        let (s, (f, g)) = (&mut self.split, self.origins);
        let head = s.first_offsets[i] - f..s.first_offsets[i + 1] - f;
        let tail = s.second_offsets[i] - g..s.second_offsets[i + 1] - g;
        (&mut s.first[head], &mut s.second[tail])
    }
}

/// Where a chunk's rows of A take their values from: row `i` (at `a_row`
/// of A's entries) as two slices, the values of the row's first stored
/// columns and those of the rest (one array: all of it and none).
pub(super) trait RowInput<T>: Copy {
    /// An error when the input does not hold the row as A's pattern has it
    /// (a split not checked before: see [`SplitInput`]).
    fn row(&self, i: usize, a_row: std::ops::Range<usize>) -> Result<(&[T], &[T])>;
    /// A's values in one array, as A's entries: `None` when split.
    fn whole(&self) -> Option<&[T]>;
}

impl<T> RowInput<T> for &[T] {
    #[inline(always)]
    fn row(&self, _: usize, a_row: std::ops::Range<usize>) -> Result<(&[T], &[T])> {
        Ok((&self[a_row], &[]))
    }
    fn whole(&self) -> Option<&[T]> {
        Some(self)
    }
}

impl<T: Scalar, I: Index> RowInput<T> for SplitInput<'_, T, I> {
    #[inline(always)]
    fn row(&self, i: usize, a_row: std::ops::Range<usize>) -> Result<(&[T], &[T])> {
        self.row_of_len(i, a_row.len() as i64)
    }
    fn whole(&self) -> Option<&[T]> {
        None
    }
}

/// Row `i` of A (pattern `ap`, values from `a_in`): its columns and
/// values in its two parts, as [`RowInput::row`] splits them.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn row_parts<'r, T: Scalar, I: Index, J: Index, A: RowInput<T>>(
    ap: &RowPattern<'r, I, J>,
    a_in: &'r A,
    i: usize,
) -> Result<((&'r [J], &'r [T]), (&'r [J], &'r [T]))> {
    let ra = ap.range(i);
    let (head, tail) = a_in.row(i, ra.clone())?;
    let (cols_head, cols_tail) = ap.cols[ra].split_at(head.len());
    Ok(((cols_head, head), (cols_tail, tail)))
}

/// Adds the products of A's entries `a_cols` (values `a_vals`, as many)
/// with their rows of op(B) (`b_offsets`; columns and values `b_cols`,
/// `b_vals`, zero-based from `b_base`) into `cells`; returns how many.
#[inline(always)]
fn add_products<S: Slot<T>, T: Scalar, I: Index, J: Index, R: RowRecorder<J>>(
    (a_cols, a_vals, a_base): (&[J], &[T], usize),
    (b_offsets, b_cols, b_vals, b_base): (&[I], &[J], &[T], usize),
    cells: &mut [S],
    recorder: &mut R,
) -> u64 {
    let mut products = 0u64;
    for (&k, &f) in a_cols.iter().zip(a_vals) {
        let bs = (b_offsets, b_cols, b_vals, b_base);
        products += add_row_of_b((k.as_usize() - a_base, f), bs, cells, recorder);
    }
    products
}

/// Adds row `r` of op(B) times `f` into `cells` (op(B) as in
/// [`add_products`]); returns its length.
#[inline(always)]
fn add_row_of_b<S: Slot<T>, T: Scalar, I: Index, J: Index, R: RowRecorder<J>>(
    (r, f): (usize, T),
    (b_offsets, b_cols, b_vals, b_base): (&[I], &[J], &[T], usize),
    cells: &mut [S],
    recorder: &mut R,
) -> u64 {
    let bounds = &b_offsets[r..r + 2];
    let rb = bounds[0].as_usize() - b_base..bounds[1].as_usize() - b_base;
    let len = rb.len() as u64;
    for (&c, &v) in b_cols[rb.clone()].iter().zip(&b_vals[rb]) {
        cells[c.as_usize()].add(f * v);
        if R::RECORDS {
            recorder.product(c.as_usize() - b_base);
        }
    }
    len
}

/// [`add_products`] for an op(B) with one entry a row, row `r` at entry
/// `origin + r` of `b_cols` / `b_vals`.
#[inline(always)]
fn add_products_one<S: Slot<T>, T: Scalar, J: Index, R: RowRecorder<J>>(
    (a_cols, a_vals, a_base): (&[J], &[T], usize),
    (origin, b_cols, b_vals, b_base): (usize, &[J], &[T], usize),
    cells: &mut [S],
    recorder: &mut R,
) -> u64 {
    let n = b_cols.len().min(b_vals.len());
    let (b_cols, b_vals) = (&b_cols[origin.min(n)..n], &b_vals[origin.min(n)..n]);
    for (&k, &f) in a_cols.iter().zip(a_vals) {
        let r = k.as_usize() - a_base;
        let c = b_cols[r];
        cells[c.as_usize()].add(f * b_vals[r]);
        if R::RECORDS {
            recorder.product(c.as_usize() - b_base);
        }
    }
    a_cols.len() as u64
}

/// [`add_rows`] for an op(B) with one entry a row (row `r` at entry
/// `origin.0 + r`), A's values from `a_in` (in one array or two),
/// An op(B) with one entry a row (its row `r` is the entry `origin + r`),
/// C's values where `out` puts them (one array, or PETSc's two blocks on
/// the MPI route), α = 1, β = 0 and sums alone: PETSc's loop
/// (`MatMatMultNumeric_SeqAIJ_SeqAIJ_Sorted`) as it is, over plain
/// slices. Through [`add_rows`]' general row loop GAMG's A·P_tent (7-point
/// Poisson at 96³, 6.1 M products into 3.2 M entries, operands past the
/// last-level cache) took 21.5-22.0 ms, against 18.0-18.6 for PETSc's loop
/// written plainly in Rust and 17.3 for PETSc's own; this loop takes
/// 13.8-15.1 ms (27-point at 64³: 10.6-11.4 -> 10.0-10.2; 7-point at 64³
/// 4.0 -> 4.1-4.3, within the noise). One thread, `phases_vs_gustavson`
/// and `petsc/tests/timing.c`, 2-vCPU AMD EPYC VM, session 78.
#[inline(never)]
#[allow(clippy::type_complexity)]
fn add_rows_one<S: Slot<T>, T: Scalar, I: Index, J: Index, A: RowInput<T>, O: RowValues<T>>(
    (a, a_in, b): (&Operand<'_, T, I, J>, A, &Operand<'_, T, I, J>),
    rows: std::ops::Range<usize>,
    origin: usize,
    (offsets, pattern, c_base): (&[usize], &[J], usize),
    mut out: O,
    cells: &mut [S],
) -> Result<()> {
    let (ap, bp) = (&a.pattern, &b.pattern);
    let (a_cols, a_base) = (ap.cols, ap.base);
    let n = bp.cols.len().min(b.values.len());
    let (b_cols, b_vals) = (&bp.cols[origin.min(n)..n], &b.values[origin.min(n)..n]);
    let (b_base, ncols) = (bp.base, bp.ncols);
    // A's values in one array, as A's entries, or split (each row its two
    // parts, as `add_rows` reads them).
    let whole = a_in.whole().map(|v| {
        let n = a_cols.len().min(v.len());
        (&a_cols[..n], &v[..n])
    });
    for i in rows {
        if let Some((a_cols, a_vals)) = whole {
            for k in ap.range(i) {
                let r = a_cols[k].as_usize() - a_base;
                cells[b_cols[r].as_usize()].add(a_vals[k] * b_vals[r]);
            }
        } else {
            let (head, tail) = row_parts(ap, &a_in, i)?;
            for (cols, vals) in [head, tail] {
                for (&k, &f) in cols.iter().zip(vals) {
                    let r = k.as_usize() - a_base;
                    cells[b_cols[r].as_usize()].add(f * b_vals[r]);
                }
            }
        }
        // `gather_row`'s α = 1, β = 0 loop, without its test of α and β
        // each row: through `gather_row` this kernel took 8-17 % longer
        // (27-point A·P_tent at 64³: 10.2-10.5 -> 12.0-12.2 ms).
        let columns = &mut cells[b_base..];
        let c_row = offsets[i]..offsets[i + 1];
        let row = &pattern[c_row.clone()];
        // C's row in one part, or two (PETSc's diagonal and off-diagonal
        // blocks on the MPI route; one array's second part is a constant
        // empty slice, its loop gone).
        let (head, tail) = out.row(i, c_row);
        for (d, &c) in head.iter_mut().zip(row) {
            let Some(cell) = columns.get_mut(c.as_usize().wrapping_sub(c_base)) else {
                return Err(bad_column(i, row, c, (c_base, ncols)));
            };
            *d = std::mem::replace(cell, S::zero()).sum();
        }
        // The second part (on the MPI route, the rows of C with other
        // ranks' columns: a few; one array's is a constant empty slice).
        if !tail.is_empty() {
            let second = &row[head.len().min(row.len())..];
            for (d, &c) in tail.iter_mut().zip(second) {
                let Some(cell) = columns.get_mut(c.as_usize().wrapping_sub(c_base)) else {
                    return Err(bad_column(i, row, c, (c_base, ncols)));
                };
                *d = std::mem::replace(cell, S::zero()).sum();
            }
        }
    }
    Ok(())
}

/// [`add_rows_one`] with C's values split between two arrays (PETSc's
/// diagonal and off-diagonal blocks on the plug-in's MPI route), where
/// most rows have nothing in the second (the rows of a rank's interior):
/// runs of [`ONE_ARRAY_MIN_RUN`] such rows or more are written as one
/// array (the first block's part of the run, contiguous), the other rows
/// through both. Both arrays for every row cost 1.3 ms more than one
/// array on GAMG's A·P_tent at 64³ (7-point Poisson, 262,144 rows;
/// `phases_vs_gustavson`, one thread, Zen 4 VM of session 83: 5.6 -> 7.0
/// ms); the runs win 0.4 of it back (6.6 ms; most of the rest is the
/// check of the blocks' offsets). On two ranks the plug-in's A·P_tent
/// reuse went 4.2-4.3 -> 3.8-3.9 ms.
#[allow(clippy::type_complexity)]
fn add_rows_one_split<S: Slot<T>, T: Scalar, I: Index, J: Index, A: RowInput<T>>(
    (a, a_in, b): (&Operand<'_, T, I, J>, A, &Operand<'_, T, I, J>),
    rows: std::ops::Range<usize>,
    origin: usize,
    c: (&[usize], &[J], usize),
    split: SplitRows<'_, T>,
    cells: &mut [S],
) -> Result<()> {
    let SplitRows {
        first_offsets,
        first,
        second_offsets,
        second,
    } = split;
    // The chunk's parts of both arrays start at its first row's offsets.
    let origins = (first_offsets[rows.start], second_offsets[rows.start]);
    let offsets = c.0;
    let job = (a, a_in, b);
    let alone = |i: usize| second_offsets[i + 1] == second_offsets[i];
    // The first run of ONE_ARRAY_MIN_RUN rows or more with nothing in the
    // second array from row `from` on (empty at the chunk's end).
    let next_run = |from: usize| {
        let mut i = from;
        while i < rows.end {
            let run = i;
            while i < rows.end && alone(i) {
                i += 1;
            }
            if i - run >= ONE_ARRAY_MIN_RUN {
                return run..i;
            }
            i += 1;
        }
        rows.end..rows.end
    };
    let mut pending = rows.start;
    while pending < rows.end {
        let run = next_run(pending);
        if pending < run.start {
            let split = SplitRows {
                first_offsets,
                first: &mut *first,
                second_offsets,
                second: &mut *second,
            };
            let both = TwoArrays { split, origins };
            add_rows_one(job, pending..run.start, origin, c, both, cells)?;
        }
        if !run.is_empty() {
            // Row r of the run is at C's offset less the run's constant
            // difference between C's offsets and the first block's.
            let gap = offsets[run.start] - (first_offsets[run.start] - origins.0);
            let one = OneArray {
                vals: &mut *first,
                origin: gap,
            };
            add_rows_one(job, run.clone(), origin, c, one, cells)?;
        }
        pending = run.end;
    }
    Ok(())
}

/// See [`add_rows_one_split`]: shorter runs go through both arrays, where
/// a call of [`add_rows_one`] a run would cost more than it saves.
const ONE_ARRAY_MIN_RUN: usize = 64;

/// [`accumulate_rows`] into the accumulator `cells` (one per column of
/// op(B) plus its base, all zero), writing each row of C where `out` puts
/// it. Out of line and over plain slices, so that the product loop keeps
/// its pointers in registers; one copy for C's values in one array and
/// one for two.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn add_rows<
    const PREFETCH: bool,
    S: Slot<T>,
    T: Scalar,
    I: Index,
    J: Index,
    A: RowInput<T>,
    O: RowValues<T>,
    R: RowRecorder<J>,
>(
    a: &Operand<'_, T, I, J>,
    a_in: A,
    b: &Operand<'_, T, I, J>,
    (rows, one): (std::ops::Range<usize>, Option<usize>),
    (offsets, pattern): (&[usize], &[J]),
    (mut out, scale): (O, &Scale<T>),
    cells: &mut [S],
    recorder: &mut R,
) -> Result<()> {
    let a = a.pattern;
    let (b, b_vals) = (b.pattern, b.values);
    // A copy: the loops store through the output, which the compiler
    // cannot tell apart from `*scale`, so it would read α and β again
    // after each.
    let scale = *scale;
    let (b_base, ncols) = (b.base, b.ncols);
    // Equal lengths, so one bounds check covers a row's columns and values.
    let n = b.cols.len().min(b_vals.len());
    let (b_cols, b_vals) = (&b.cols[..n], &b_vals[..n]);
    for i in rows {
        if PREFETCH {
            prefetch_rows_of_b(&a, &b, b_vals, i + PREFETCH_AHEAD);
        }
        let c_row = offsets[i]..offsets[i + 1];
        let cols = &pattern[c_row.clone()];
        let (head, tail) = out.row(i, c_row);
        let ra = a.range(i);
        // A's row in one part or two (never two for one array, where the
        // second part is a constant empty slice), checked to cover the row
        // exactly.
        let (a_head, a_tail) = a_in.row(i, ra.clone())?;
        let bs = (b.offsets, b_cols, b_vals, b_base);
        if R::RECORDS {
            recorder.row(i, (cols, scale.base))?;
        }
        let products = if let (Some(origin), true) = (one, a_tail.is_empty()) {
            let ones = (origin, b_cols, b_vals, b_base);
            add_products_one((&a.cols[ra], a_head, a.base), ones, cells, recorder)
        } else if a_tail.is_empty() {
            add_products((&a.cols[ra], a_head, a.base), bs, cells, recorder)
        } else {
            let (cols_head, cols_tail) = a.cols[ra].split_at(a_head.len());
            add_products((cols_head, a_head, a.base), bs, cells, recorder)
                + add_products((cols_tail, a_tail, a.base), bs, cells, recorder)
        };
        // The cells of op(B)'s columns, zero-based.
        let counted = gather_parts((head, tail), cols, &mut cells[b_base..], (i, &scale, ncols))?;
        if S::COUNTED && counted != products {
            return Err(too_many_columns(i, cols.len()));
        }
    }
    Ok(())
}

/// [`gather_row`] on row `i` of C (columns `cols`) written in its two
/// parts (`head`, then `tail`, as [`RowValues::row`] gives them); returns
/// the products the cells counted.
#[inline(always)]
fn gather_parts<S: Slot<T>, T: Scalar, J: Index>(
    (head, tail): (&mut [T], &mut [T]),
    cols: &[J],
    columns: &mut [S],
    (i, scale, ncols): (usize, &Scale<T>, usize),
) -> Result<u64> {
    let (first, second) = cols.split_at(head.len());
    let at = (i, cols, scale, ncols);
    Ok(gather_row(head, first, columns, at)? + gather_row(tail, second, columns, at)?)
}

/// Reads (and zeroes) the cells of C's columns `cols`, part of row `i`
/// (`row`, with `ncols` columns of op(B)), into `out`, scaled; returns
/// the products the cells counted (0 unless [`Slot::COUNTED`]).
#[inline(always)]
fn gather_row<S: Slot<T>, T: Scalar, J: Index>(
    out: &mut [T],
    cols: &[J],
    columns: &mut [S],
    (i, row, scale, ncols): (usize, &[J], &Scale<T>, usize),
) -> Result<u64> {
    let c_base = scale.base;
    let mut counted = 0u64;
    // α = 1, β = 0 (PETSc's products, every reuse_compute of a plain
    // product): the sums as they are, no multiply nor test per entry
    // (GAMG's A·P at 64³, one thread, three alternating rounds: 17.2 ->
    // 16.8 ms).
    if !S::COUNTED && scale.alpha == T::one() && scale.beta == T::zero() {
        for (d, &c) in out.iter_mut().zip(cols) {
            let Some(cell) = columns.get_mut(c.as_usize().wrapping_sub(c_base)) else {
                return Err(bad_column(i, row, c, (c_base, ncols)));
            };
            *d = std::mem::replace(cell, S::zero()).sum();
        }
        return Ok(0);
    }
    for (d, &c) in out.iter_mut().zip(cols) {
        // One test for both ends of the range: below C's base the index
        // wraps to a huge value.
        let Some(cell) = columns.get_mut(c.as_usize().wrapping_sub(c_base)) else {
            return Err(bad_column(i, row, c, (c_base, ncols)));
        };
        let cell = std::mem::replace(cell, S::zero());
        if S::COUNTED {
            if cell.count() == 0 {
                return Err(bad_column(i, row, c, (c_base, ncols)));
            }
            counted += cell.count();
        }
        scale.store(d, cell.sum());
    }
    Ok(counted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::rows::Scale;
    use crate::backend::cpu::ScratchPool;
    use crate::plan::RowWork;

    /// A CSR matrix with zero-based `i32` indices, for the kernel's tests.
    struct Csr {
        offsets: Vec<i32>,
        cols: Vec<i32>,
        vals: Vec<f64>,
        ncols: usize,
    }

    impl Csr {
        fn rows(rows: &[&[(i32, f64)]], ncols: usize) -> Csr {
            let mut m = Csr {
                offsets: vec![0],
                cols: Vec::new(),
                vals: Vec::new(),
                ncols,
            };
            for r in rows {
                m.cols.extend(r.iter().map(|e| e.0));
                m.vals.extend(r.iter().map(|e| e.1));
                m.offsets.push(m.cols.len() as i32);
            }
            m
        }

        /// The pattern with its indices shifted to `base`.
        fn shifted(&self, base: i32) -> (Vec<i32>, Vec<i32>) {
            (
                self.offsets.iter().map(|x| x + base).collect(),
                self.cols.iter().map(|x| x + base).collect(),
            )
        }
    }

    /// The kernel on `alpha * a * b + beta * vals` into `vals` at C's
    /// columns `pattern` (index base `base` for A, B and C) with row offsets
    /// `offsets`, all rows in one chunk, with the accumulators of `scratch`;
    /// `checked` for a pattern whose fingerprints matched (sums alone).
    fn run_in(
        scratch: &ScratchPool,
        (a, b): (&Csr, &Csr),
        (pattern, offsets, base): (&[i32], &[usize], i32),
        (alpha, beta): (f64, f64),
        vals: &mut [f64],
        checked: bool,
    ) -> Result<()> {
        let at = (pattern, offsets, base);
        run_split(scratch, (a, b), at, (alpha, beta), vals, (checked, None))
    }

    /// [`run_in`], with A's values split between two arrays when `split`
    /// (each row's first `split` entries in the first, as
    /// `rusparseCsrSetSplitValues` gives them; A's own array then NaN).
    fn run_split(
        scratch: &ScratchPool,
        (a, b): (&Csr, &Csr),
        (pattern, offsets, base): (&[i32], &[usize], i32),
        (alpha, beta): (f64, f64),
        vals: &mut [f64],
        (checked, split): (bool, Option<usize>),
    ) -> Result<()> {
        let (mut fo, mut fv, mut so, mut sv) = (vec![base], Vec::new(), vec![base], Vec::new());
        for row in a.offsets.windows(2) {
            let (s, e) = (row[0] as usize, row[1] as usize);
            let h = (s + split.unwrap_or(0)).min(e);
            fv.extend_from_slice(&a.vals[s..h]);
            sv.extend_from_slice(&a.vals[h..e]);
            fo.push(fv.len() as i32 + base);
            so.push(sv.len() as i32 + base);
        }
        let nan = vec![f64::NAN; a.vals.len()];
        let (ao, ac) = a.shifted(base);
        let (bo, bc) = b.shifted(base);
        let rows = |offsets, cols, ncols| RowPattern {
            nrows: a.offsets.len().max(b.offsets.len()),
            ncols,
            offsets,
            cols,
            base: base as usize,
        };
        let mut ra = rows(&ao[..], &ac[..], a.ncols);
        ra.nrows = a.offsets.len() - 1;
        let mut rb = rows(&bo[..], &bc[..], b.ncols);
        rb.nrows = b.offsets.len() - 1;
        let work = RowWork::new(&ra, &rb, 1)?;
        let chunk = Chunk {
            rows: 0..a.offsets.len() - 1,
            work: &work,
            scratch,
            b_canonical: true,
        };
        let scale = Scale {
            alpha,
            beta,
            base: base as usize,
        };
        let out = NumericPiece {
            offsets,
            cols: None,
            vals,
            scale: &scale,
            sorted: true,
        };
        let operand = |pattern, values| Operand { pattern, values };
        let a_split = match split {
            Some(_) => Some(SplitInput::new(
                &ao,
                (&fo, &fv),
                (&so, &sv),
                (base as usize, true),
            )?),
            None => None,
        };
        let a_vals = if split.is_some() { &nan } else { &a.vals };
        accumulate_rows(
            &operand(ra, a_vals),
            a_split,
            &operand(rb, &b.vals),
            chunk,
            (pattern, checked),
            out,
            None,
        )
    }

    fn run(
        ab: (&Csr, &Csr),
        at: (&[i32], &[usize], i32),
        scale: (f64, f64),
        vals: &mut [f64],
    ) -> Result<()> {
        run_in(&ScratchPool::default(), ab, at, scale, vals, false)
    }

    /// A = [1 2; 0 3], B = [4 0; 5 6]: C = [14 12; 15 18].
    fn two_by_two() -> (Csr, Csr) {
        (
            Csr::rows(&[&[(0, 1.0), (1, 2.0)], &[(1, 3.0)]], 2),
            Csr::rows(&[&[(0, 4.0)], &[(0, 5.0), (1, 6.0)]], 2),
        )
    }

    /// C's values at the columns `pattern` (rows of two), with counted
    /// cells or (`checked`) sums alone.
    fn two_by_two_at(pattern: &[i32], checked: bool) -> [f64; 4] {
        let (a, b) = two_by_two();
        let mut vals = [f64::NAN; 4];
        let at = (pattern, &[0, 2, 4][..], 0);
        let scratch = ScratchPool::default();
        run_in(&scratch, (&a, &b), at, (1.0, 0.0), &mut vals, checked).unwrap();
        vals
    }

    #[test]
    fn sums_into_known_columns() {
        for checked in [false, true] {
            let at = |p: &[i32]| two_by_two_at(p, checked);
            assert_eq!(at(&[0, 1, 0, 1]), [14.0, 12.0, 15.0, 18.0]);
            // Columns in another order give the values in that order.
            assert_eq!(at(&[1, 0, 1, 0]), [12.0, 14.0, 18.0, 15.0]);
            assert_eq!(at(&[0, 1, 1, 0]), [14.0, 12.0, 18.0, 15.0]);
        }
    }

    /// A checked pattern skips the counts, not the range test: a column
    /// outside op(B)'s columns is still an error, never a write elsewhere.
    #[test]
    fn a_checked_pattern_keeps_the_range_test() {
        let (a, b) = two_by_two();
        let cases = [
            ([0, 7, 0, 1], 0),
            ([-1, 1, 0, 1], 0),
            ([1, 3, 1, 2], 1),
            ([0, 2, 1, 2], 1),
        ];
        for (pattern, base) in cases {
            let scratch = ScratchPool::default();
            let mut vals = [0.0; 4];
            let at = (&pattern[..], &[0, 2, 4][..], base);
            let e = run_in(&scratch, (&a, &b), at, (1.0, 0.0), &mut vals, true).unwrap_err();
            assert!(e.to_string().contains("out of range"), "{pattern:?}: {e}");
            assert_eq!(scratch.bytes(), 0, "a failed accumulator was kept");
        }
    }

    /// A product outside C's row, a repeated, out-of-range or unreached
    /// column of C is an error, not a write elsewhere; the failed kernel's
    /// accumulator, which holds the stray product, is not kept.
    #[test]
    fn refuses_a_pattern_that_is_not_c() {
        let (a, b) = two_by_two();
        let fail = |pattern: &[i32], offsets: &[usize]| {
            let scratch = ScratchPool::default();
            let mut vals = vec![0.0; pattern.len()];
            let at = (pattern, offsets, 0);
            let e = run_in(&scratch, (&a, &b), at, (1.0, 0.0), &mut vals, false).unwrap_err();
            assert_eq!(
                scratch.bytes(),
                0,
                "{pattern:?}: a failed accumulator was kept"
            );
            e.to_string()
        };
        let stale = "pattern of A or B changed";
        // Row 1 lacks column 0, then column 1: products outside the row.
        for pattern in [[0, 1, 1], [0, 1, 0]] {
            let e = fail(&pattern, &[0, 2, 3]);
            assert!(e.contains(stale), "{e}");
        }
        // Row 1 is empty but has products.
        let e = fail(&[0, 1], &[0, 2, 2]);
        assert!(e.contains(stale), "{e}");
        // A column no product reaches: A's only row reads B's row 0, which
        // has column 0 alone.
        let a0 = Csr::rows(&[&[(0, 1.0)]], 2);
        let mut vals = [0.0; 2];
        let e = run((&a0, &b), (&[0, 1], &[0, 2], 0), (1.0, 0.0), &mut vals).unwrap_err();
        assert!(
            e.to_string().contains("no product of the row reaches"),
            "{e}"
        );
        let e = fail(&[0, 0, 0, 1], &[0, 2, 4]);
        assert!(e.contains("lists column 0 twice"), "{e}");
        let e = fail(&[0, 1, 1, 1], &[0, 2, 4]);
        assert!(e.contains("lists column 1 twice"), "{e}");
        let e = fail(&[0, 7, 0, 1], &[0, 2, 4]);
        assert!(e.contains("out of range"), "{e}");
        let e = fail(&[-1, 1, 0, 1], &[0, 2, 4]);
        assert!(e.contains("out of range"), "{e}");
    }

    /// An op(B) with one entry a row (an aggregation, as GAMG's tentative
    /// prolongator) takes the path that reads no offsets of op(B): the
    /// same sums as the general path, with empty rows of A, both index
    /// bases, counted cells or sums alone, and the same refusals.
    #[test]
    fn one_entry_a_row_of_b_sums_as_the_general_path() {
        // A: 4 x 5 with an empty row; B: 5 x 3, one entry a row.
        let a = Csr::rows(
            &[
                &[(0, 1.0), (1, 2.0), (3, -1.5)],
                &[],
                &[(4, 0.5), (2, 3.0)],
                &[(1, 1.0), (0, 4.0), (4, -2.0), (3, 1.0)],
            ],
            5,
        );
        let b = Csr::rows(
            &[
                &[(0, 2.0)],
                &[(0, -1.0)],
                &[(2, 3.0)],
                &[(1, 5.0)],
                &[(2, 0.25)],
            ],
            3,
        );
        // C's rows with their columns in no particular order.
        let pattern = [1, 0, 2, 2, 0, 1];
        let offsets = [0, 2, 2, 3, 6];
        let pattern_of = |base: i32| pattern.iter().map(|c| c + base).collect::<Vec<_>>();
        // The dense product, read at C's columns.
        let mut dense = [[0.0f64; 3]; 4];
        for (i, row) in dense.iter_mut().enumerate() {
            for e in a.offsets[i] as usize..a.offsets[i + 1] as usize {
                let k = a.cols[e] as usize;
                let bk = b.offsets[k] as usize;
                row[b.cols[bk] as usize] += a.vals[e] * b.vals[bk];
            }
        }
        let want = |alpha: f64| -> Vec<f64> {
            (0..4)
                .flat_map(|i| (offsets[i]..offsets[i + 1]).map(move |e| (i, e)))
                .map(|(i, e)| alpha * dense[i][pattern[e] as usize])
                .collect()
        };
        // α = 1 with sums alone (`checked`) takes `add_rows_one`, with A's
        // values in one array or split (each row at its second entry).
        for (alpha, split) in [(2.0, None), (1.0, None), (1.0, Some(1)), (2.0, Some(1))] {
            for (base, checked) in [(0, false), (0, true), (1, false), (1, true)] {
                let mut vals = vec![f64::NAN; pattern.len()];
                let c = pattern_of(base);
                let at = (&c[..], &offsets[..], base);
                let scratch = ScratchPool::default();
                let how = (checked, split);
                run_split(&scratch, (&a, &b), at, (alpha, 0.0), &mut vals, how).unwrap();
                let what = format!("base {base}, checked {checked}, alpha {alpha}, {split:?}");
                assert_eq!(vals, want(alpha), "{what}");
            }
        }
        // A column of C out of range is refused there too.
        let mut vals = vec![0.0; pattern.len()];
        let wide = [1, 0, 2, 2, 0, 3];
        let at = (&wide[..], &offsets[..], 0);
        let scratch = ScratchPool::default();
        let e = run_in(&scratch, (&a, &b), at, (1.0, 0.0), &mut vals, true).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        // A row of C missing a column its products reach is refused.
        let short = [1, 0, 2, 2, 0];
        let mut vals = vec![0.0; short.len()];
        let at = (&short[..], &[0, 2, 2, 3, 5][..], 0);
        let e = run((&a, &b), at, (1.0, 0.0), &mut vals).unwrap_err();
        assert!(e.to_string().contains("pattern of A or B changed"), "{e}");
    }

    /// Long rows of A over short rows of op(B) of one length (α = 1, sums
    /// alone) take `add_rows_paired`: an odd number of rows (the last one
    /// alone), rows of unequal lengths, A's values in one array or split at
    /// each row's third entry, and values whose sums round, so that the
    /// order of the additions shows: C's values are those of the general
    /// loop (counted cells), bit for bit, and near the dense product's.
    #[test]
    fn long_rows_of_a_over_short_rows_of_b_pair_as_the_general_path() {
        let (m, k, n) = (7, 200, 40);
        let mut a = random(m, k, 60, 5);
        // Rows of B of four entries each (even: not masked).
        let b_rows: Vec<Vec<(i32, f64)>> = (0..k)
            .map(|r| {
                let mut cols: Vec<i32> = (0..4).map(|e| ((r * 3 + e * 5) % n) as i32).collect();
                cols.sort_unstable();
                let value = |(e, c): (usize, i32)| (c, ((r + e) % 7) as f64 - 3.0);
                cols.into_iter().enumerate().map(value).collect()
            })
            .collect();
        let b = Csr::rows(&refs(&b_rows), n);
        // Values that round: thirds and tenths.
        for (e, v) in a.vals.iter_mut().enumerate() {
            *v = (*v + 0.1) / 3.0 + e as f64 * 1e-3;
        }
        let (a_entries, products) = {
            let mut p = 0usize;
            for &c in &a.cols {
                p += (b.offsets[c as usize + 1] - b.offsets[c as usize]) as usize;
            }
            (a.cols.len(), p as u64)
        };
        assert!(
            pairs_rows(a_entries, products, m),
            "{a_entries} entries, {products} products"
        );
        let spread = spread_of_rows_of_b((&a.cols, 0), &b.offsets, 0..a_entries);
        assert_eq!(masks_rows(m, a_entries, products, || spread), None);
        let lengths: Vec<i32> = a.offsets.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(lengths.windows(2).any(|w| w[0] != w[1]), "{lengths:?}");
        same_as_the_general_path(&a, &b, 2);
    }

    /// C's values by the loop the kernel chooses for `a`·`b` (sums alone)
    /// and by the general loop (counted cells): the same bits, and the
    /// dense product's values, with A's values in one array and split,
    /// index bases 0 and 1; the `accumulators` the chosen loop used go
    /// back to the pool all zero; and a column of C out of range is
    /// refused there too.
    fn same_as_the_general_path(a: &Csr, b: &Csr, accumulators: usize) {
        let (m, n) = (a.offsets.len() - 1, b.ncols);
        let mut dense = vec![vec![None::<f64>; n]; m];
        for (i, row) in dense.iter_mut().enumerate() {
            for p in a.offsets[i] as usize..a.offsets[i + 1] as usize {
                let r = a.cols[p] as usize;
                for q in b.offsets[r] as usize..b.offsets[r + 1] as usize {
                    let d = &mut row[b.cols[q] as usize];
                    *d = Some(d.unwrap_or(0.0) + a.vals[p] * b.vals[q]);
                }
            }
        }
        let (mut offsets, mut pattern, mut want) = (vec![0usize], Vec::new(), Vec::new());
        for row in &dense {
            for (j, v) in row.iter().enumerate().rev() {
                if let Some(v) = v {
                    pattern.push(j as i32);
                    want.push(*v);
                }
            }
            offsets.push(pattern.len());
        }
        for split in [None, Some(2)] {
            for base in [0, 1] {
                let scratch = ScratchPool::default();
                let c: Vec<i32> = pattern.iter().map(|x| x + base).collect();
                let at = (&c[..], &offsets[..], base);
                let mut general = vec![f64::NAN; c.len()];
                let how = (false, split);
                run_split(&scratch, (a, b), at, (1.0, 0.0), &mut general, how).unwrap();
                let mut chosen = vec![f64::NAN; c.len()];
                let how = (true, split);
                run_split(&scratch, (a, b), at, (1.0, 0.0), &mut chosen, how).unwrap();
                let differs = (0..c.len()).find(|&e| chosen[e].to_bits() != general[e].to_bits());
                assert_eq!(
                    differs, None,
                    "base {base}, {split:?}: {chosen:?} {general:?}"
                );
                for (x, y) in chosen.iter().zip(&want) {
                    assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{x} {y}");
                }
                // The accumulators go back all zero.
                let mut kept = Vec::new();
                while let Some(acc) = scratch.take(|_: &Accumulator<Sum<f64>>| true) {
                    assert!(acc.cells.iter().all(|c| c.0 == 0.0));
                    kept.push(acc);
                }
                assert_eq!(kept.len(), accumulators);
                kept.into_iter().for_each(|acc| scratch.give(acc));
            }
        }
        // A column of C out of range is refused there too.
        let scratch = ScratchPool::default();
        let mut wide = pattern.clone();
        let row = (0..m).find(|&i| offsets[i + 1] > offsets[i]).unwrap();
        wide[offsets[row]] = n as i32;
        let mut vals = vec![0.0; wide.len()];
        let at = (&wide[..], &offsets[..], 0);
        let e = run_in(&scratch, (a, b), at, (1.0, 0.0), &mut vals, true).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }

    /// The tests' draws: a xorshift from `seed`.
    fn xorshift(seed: u64) -> impl FnMut() -> usize {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as usize
        }
    }

    /// Rows 5 and 155 of [`uneven_rows_of_b`]: 12 entries.
    fn long_row_of_b(r: usize) -> bool {
        r % 150 == 5
    }

    /// `k` rows of B over `n` columns: runs of a length drawn from
    /// `lengths` from a drawn column, 12 long at [`long_row_of_b`] and
    /// `last_len` long last (read past no end); values 0.7 - e/7.
    fn uneven_rows_of_b(
        (k, n): (usize, usize),
        lengths: &[usize],
        last_len: usize,
        next: &mut impl FnMut() -> usize,
    ) -> Vec<Vec<(i32, f64)>> {
        (0..k)
            .map(|r| {
                let len = match r {
                    _ if r == k - 1 => last_len,
                    _ if long_row_of_b(r) => 12,
                    _ => lengths[next() % lengths.len()],
                };
                let start = next() % (n - len);
                (0..len)
                    .map(|e| ((start + e) as i32, 0.7 - e as f64 / 7.0))
                    .collect()
            })
            .collect()
    }

    /// `m` rows of A over `k` columns: `special(i)`'s columns where it
    /// names some, else `shortest` plus a drawn number below `extra` of
    /// entries 7 columns apart; thirds and tenths.
    fn rows_of_a(
        (m, k): (usize, usize),
        (shortest, extra): (usize, usize),
        special: impl Fn(usize) -> Option<Vec<i32>>,
        next: &mut impl FnMut() -> usize,
    ) -> Vec<Vec<(i32, f64)>> {
        (0..m)
            .map(|i| {
                let mut cols: Vec<i32> = special(i).unwrap_or_else(|| {
                    (0..shortest + next() % extra)
                        .map(|e| ((i * 5 + e * 7) % k) as i32)
                        .collect()
                });
                cols.sort_unstable();
                cols.dedup();
                let to = |(e, &c): (usize, &i32)| (c, (1.0 + e as f64) / 3.0 - 0.1 * i as f64);
                cols.iter().enumerate().map(to).collect()
            })
            .collect()
    }

    fn refs(rows: &[Vec<(i32, f64)>]) -> Vec<&[(i32, f64)]> {
        rows.iter().map(|r| &r[..]).collect()
    }

    /// Short rows of A over short rows of op(B) of uneven length (the
    /// 7-point Poisson times a smoothed prolongator) are staged
    /// ([`add_rows_staged`]), as the general loop adds them: rows of op(B)
    /// longer than the stage's width, a row of A whose products overflow
    /// the stage, the last rows of op(B) (read past no end).
    #[test]
    fn short_uneven_rows_of_b_stage_as_the_general_path() {
        let (m, k, n) = (60, 300, 50);
        let mut next = xorshift(7);
        // Rows of B of 1 to 8 entries; the last of 3 (a copy as wide as
        // the stage would pass the arrays' end).
        let b_rows = uneven_rows_of_b((k, n), &[1, 2, 3, 4, 5, 6, 7, 8], 3, &mut next);
        // Rows of A of 3 to 9 entries, one empty, and one over every short
        // row of B (over 512 products between two long rows of B: the
        // stage is added within the row).
        let special = |i: usize| match i {
            7 => Some(
                (0..k)
                    .filter(|&r| !long_row_of_b(r))
                    .map(|r| r as i32)
                    .collect(),
            ),
            8 => Some(Vec::new()),
            _ => None,
        };
        let a_rows = rows_of_a((m, k), (3, 7), special, &mut next);
        let a = Csr::rows(&refs(&a_rows), k);
        let b = Csr::rows(&refs(&b_rows), n);
        let row_len = |r: usize| (b.offsets[r + 1] - b.offsets[r]) as u64;
        let products: u64 = a.cols.iter().map(|&c| row_len(c as usize)).sum();
        // Row 7's products between the two long rows of B.
        let run = (6..155).map(row_len).sum::<u64>();
        assert!(run > (STAGE_LEN + STAGE_WIDTH) as u64, "{run}");
        assert!(a
            .cols
            .iter()
            .any(|&c| row_len(c as usize) > STAGE_WIDTH as u64));
        assert!(a.cols.contains(&(k as i32 - 1)));
        let spread = spread_of_rows_of_b((&a.cols, 0), &b.offsets, 0..a.cols.len());
        assert!(
            stages_rows(m, a.cols.len(), products, || spread),
            "{} entries, {products} products, spread {spread}",
            a.cols.len()
        );
        same_as_the_general_path(&a, &b, 1);
    }

    /// Which rows are staged: short rows of op(B) of uneven length under
    /// short rows of A, not rows of op(B) of one length (a stencil), long
    /// or one-entry ones, nor long rows of A (paired instead).
    #[test]
    fn rows_are_staged_where_rows_of_b_are_short_and_uneven() {
        // 7 entries a row of A over rows of B of 3.6 on average.
        assert!(stages_rows(100, 700, 2520, || 1.2));
        assert!(!stages_rows(100, 700, 2520, || 0.3), "even rows of op(B)");
        assert!(!stages_rows(100, 700, 7000, || 1.2), "rows of op(B) of 10");
        assert!(
            !stages_rows(100, 700, 700, || 1.2),
            "one entry a row of op(B)"
        );
        assert!(!stages_rows(100, 2000, 7200, || 1.2), "rows of A of 20");
        assert!(!stages_rows(0, 0, 0, || 1.2), "no rows");
        // The spread is not read where the shape already says no.
        assert!(!stages_rows(100, 700, 7000, || unreachable!()));
        // The spread: rows of B of 1 and 3 entries, named alike: 1.
        let b_offsets = [0i32, 1, 4, 5, 8];
        let a_cols = [0i32, 1, 2, 3];
        let spread = spread_of_rows_of_b((&a_cols[..], 0), &b_offsets[..], 0..4);
        assert!((spread - 1.0).abs() < 1e-12, "{spread}");
        // Base 1, and an entry naming a row out of range: 0.
        let a_one = [1i32, 2, 3, 4];
        let spread = spread_of_rows_of_b((&a_one[..], 1), &b_offsets[..], 1..5);
        assert!((spread - 1.0).abs() < 1e-12, "{spread}");
        let a_bad = [0i32, 9];
        assert_eq!(
            spread_of_rows_of_b((&a_bad[..], 0), &b_offsets[..], 0..2),
            0.0
        );
    }

    /// Long rows of A over short rows of op(B) of uneven length (the
    /// 27-point Poisson times a smoothed prolongator) are added masked
    /// ([`add_rows_masked`]) at each width, as the general loop adds them:
    /// rows of op(B) longer than the width (finished in a loop), the last
    /// rows of op(B) (`W` entries from there would pass the arrays' end),
    /// an empty row of A and one over every row of op(B).
    #[test]
    fn short_uneven_rows_of_b_are_masked_as_the_general_path() {
        // Rows of B of 1 or 3 entries and 2 to 5 (6 wide), 1 to 8 (8).
        for (lengths, width) in [
            (&[1usize, 3][..], 6),
            (&[2, 3, 4, 5], 6),
            (&[1, 2, 3, 4, 5, 6, 7, 8], 8),
        ] {
            let (m, k, n) = (60, 300, 50);
            let mut next = xorshift(7);
            // The last row of B of 1 entry.
            let b_rows = uneven_rows_of_b((k, n), lengths, 1, &mut next);
            // Rows of A of 16 to 28 entries, one empty, one over every row
            // of B, and one over the last rows of B.
            let special = |i: usize| match i {
                7 => Some((0..k).map(|r| r as i32).collect()),
                8 => Some(Vec::new()),
                9 => Some((k - 4..k).map(|r| r as i32).collect()),
                _ => None,
            };
            let a_rows = rows_of_a((m, k), (16, 13), special, &mut next);
            let a = Csr::rows(&refs(&a_rows), k);
            let b = Csr::rows(&refs(&b_rows), n);
            let row_len = |r: usize| (b.offsets[r + 1] - b.offsets[r]) as usize;
            let products: u64 = a.cols.iter().map(|&c| row_len(c as usize) as u64).sum();
            assert!(a.cols.iter().any(|&c| row_len(c as usize) > width));
            let spread = spread_of_rows_of_b((&a.cols, 0), &b.offsets, 0..a.cols.len());
            assert_eq!(
                masks_rows(m, a.cols.len(), products, || spread),
                Some(width),
                "{} entries, {products} products, spread {spread}",
                a.cols.len()
            );
            same_as_the_general_path(&a, &b, 1);
        }
    }

    /// Which rows are masked, and how wide: short rows of op(B) of uneven
    /// length under long rows of A; not under short ones (staged), nor rows
    /// of op(B) of one length (a stencil: paired), long or one-entry ones;
    /// nor where the spare cells would not fit the planned bytes.
    #[test]
    fn rows_are_masked_where_rows_of_a_are_long_and_rows_of_b_short_and_uneven() {
        // 20 entries a row of A over rows of B of 3.6 on average, spread
        // 1.2 (4.8: 6 wide) and 0.9 (4.5: 6 wide); 2.5 and 0.9 (3.4: 6
        // wide); 5.0 and 1.1 (6.1: 8 wide).
        assert_eq!(masks_rows(100, 2000, 7200, || 1.2), Some(6));
        assert_eq!(masks_rows(100, 2000, 7200, || 0.9), Some(6));
        assert_eq!(masks_rows(100, 2000, 5000, || 0.9), Some(6));
        assert_eq!(masks_rows(100, 2000, 10000, || 1.1), Some(8));
        // Rows of A of 26 entries over rows of 4.0, spread 1.3: 6 wide.
        assert_eq!(masks_rows(100, 2600, 10400, || 1.3), Some(6));
        // 7.3 and 1.4: the widest.
        assert_eq!(masks_rows(100, 2000, 14600, || 1.4), Some(8));
        assert_eq!(masks_rows(100, 700, 2520, || 1.2), None, "rows of A of 7");
        assert_eq!(
            masks_rows(100, 2000, 7200, || 0.3),
            None,
            "even rows of op(B)"
        );
        assert_eq!(
            masks_rows(100, 2000, 20000, || 1.2),
            None,
            "rows of op(B) of 10"
        );
        assert_eq!(
            masks_rows(100, 2000, 2000, || 1.2),
            None,
            "one entry a row of op(B)"
        );
        assert_eq!(masks_rows(0, 0, 0, || 1.2), None, "no rows");
        // The spread is not read where the shape already says no.
        assert_eq!(masks_rows(100, 2000, 20000, || unreachable!()), None);
        assert_eq!(masks_rows(100, 700, 2520, || unreachable!()), None);
        // The spare cells fit the planned bytes but for the narrowest.
        assert!(spare_cells_fit::<f64>(101, 100));
        assert!(!spare_cells_fit::<f64>(6, 5));
        assert!(spare_cells_fit::<num_complex::Complex<f64>>(101, 100));
        assert!(!spare_cells_fit::<num_complex::Complex<f64>>(21, 20));
    }

    /// The paired kernel's two accumulators stay within the bytes planned
    /// for the kernel, and it is not taken where they would not.
    #[test]
    fn two_accumulators_of_sums_fit_the_planned_bytes_or_are_not_used() {
        use num_complex::Complex;
        fn check<T: Scalar>(fits: bool) {
            assert_eq!(two_sums_fit::<T>(), fits, "{}", std::any::type_name::<T>());
            let two = 2 * (100 + 1) * std::mem::size_of::<Sum<T>>() as u64;
            assert_eq!(two <= workspace_bytes::<T>(100), fits);
        }
        check::<f32>(true);
        check::<f64>(true);
        check::<Complex<f32>>(true);
        check::<Complex<f64>>(false);
    }

    /// A small pseudo-random `rows x cols` matrix with sorted rows of up
    /// to `per_row` entries (integers, so sums are exact).
    fn random(rows: usize, cols: usize, per_row: usize, seed: u64) -> Csr {
        let mut next = xorshift(seed);
        let rows: Vec<Vec<(i32, f64)>> = (0..rows)
            .map(|_| {
                let mut r: Vec<i32> = (0..next() % (per_row + 1))
                    .map(|_| (next() % cols) as i32)
                    .collect();
                r.sort_unstable();
                r.dedup();
                r.into_iter()
                    .map(|c| (c, (next() % 7) as f64 - 3.0))
                    .collect()
            })
            .collect();
        Csr::rows(&refs(&rows), cols)
    }

    /// C = alpha * A B + beta * C0 on C's exact pattern (rows sorted and
    /// reversed, short and long), bases 0 and 1, by the kernel and by dense
    /// arithmetic; the accumulator is kept, all zero, and serves the next
    /// product.
    #[test]
    fn agrees_with_a_dense_product() {
        let scratch = ScratchPool::default();
        for (seed, (k, n, per_row)) in [(1u64, (12, 9, 4)), (2, (30, 80, 12)), (3, (5, 200, 40))] {
            let (m, alpha, beta) = (25, 2.0, -1.0);
            let a = random(m, k, 5, seed);
            let b = random(k, n, per_row, seed + 100);
            let mut dense = vec![vec![None::<f64>; n]; m];
            for (i, row) in dense.iter_mut().enumerate() {
                for p in a.offsets[i] as usize..a.offsets[i + 1] as usize {
                    let r = a.cols[p] as usize;
                    for q in b.offsets[r] as usize..b.offsets[r + 1] as usize {
                        let d = &mut row[b.cols[q] as usize];
                        *d = Some(d.unwrap_or(0.0) + a.vals[p] * b.vals[q]);
                    }
                }
            }
            for reversed in [false, true] {
                let (mut offsets, mut pattern, mut old, mut want) =
                    (vec![0usize], Vec::new(), Vec::new(), Vec::new());
                for row in &dense {
                    let mut entries: Vec<(usize, f64)> = row
                        .iter()
                        .enumerate()
                        .filter_map(|(j, v)| v.map(|v| (j, v)))
                        .collect();
                    if reversed {
                        entries.reverse();
                    }
                    for (j, v) in entries {
                        let c0 = (j % 5) as f64;
                        pattern.push(j as i32);
                        old.push(c0);
                        want.push(alpha * v + beta * c0);
                    }
                    offsets.push(pattern.len());
                }
                for (base, checked) in [(0, false), (1, false), (0, true), (1, true)] {
                    let shifted: Vec<i32> = pattern.iter().map(|c| c + base).collect();
                    let mut vals = old.clone();
                    let at = (&shifted[..], &offsets[..], base);
                    let ab = (&a, &b);
                    run_in(&scratch, ab, at, (alpha, beta), &mut vals, checked).unwrap();
                    assert_eq!(
                        vals, want,
                        "seed {seed} base {base} reversed {reversed} checked {checked}"
                    );
                    if checked {
                        let kept = scratch.take(|_: &Accumulator<Sum<f64>>| true).unwrap();
                        assert!(kept.cells.iter().all(|c| c.0 == 0.0));
                        scratch.give(kept);
                    } else {
                        let kept = scratch.take(|_: &Accumulator<Counted<f64>>| true).unwrap();
                        assert!(kept.cells.iter().all(|c| c.count == 0 && c.sum == 0.0));
                        scratch.give(kept);
                    }
                }
            }
        }
    }
}
