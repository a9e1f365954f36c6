//! The numeric phase replayed at recorded positions: for a product whose
//! structure of C is known and kept (the reuse flow, PETSc's
//! MAT_REUSE_MATRIX), the place of every product in its row of C,
//! recorded once, one byte each (two when a row of C has more than 256
//! entries).
//!
//! The known-structure kernel (`pattern.rs`) adds each product into a
//! dense accumulator indexed by op(B)'s column, then gathers C's row from
//! it at C's columns. Replayed, a product is added straight into C's row
//! at its recorded place: op(B)'s columns and C's are not read at all,
//! and there is no gather. The products are added in the same order into
//! cells that start at zero, so the values are those of the
//! known-structure kernel, bit for bit.
//!
//! Measured on the 2-core VM, one thread, GAMG's operators at 64³
//! (`phases_vs_gustavson 1 A.mtx 7 dense P.mtx`, the values of C on the
//! structure kept, minimum of 7, three alternating rounds): A·P, 6.4 M
//! products into 2.2 M entries, 17.0-18.2 ms -> 15.3-15.5 ms replayed;
//! Pᵀ·(A·P), 7.9 M products into 0.93 M entries, 16.2-16.7 -> 12.4-12.9
//! ms. The phase that records takes 22.5 and 20.8-21.3 ms, once. The
//! gain depends on the machine: on another 2-vCPU VM (AMD EPYC, 8 MiB of
//! L3), where every phase took about twice as long, A·P went from
//! 35.3-36.8 to 34.1-35.2 ms (recording: 52.4-53.4). A stand-alone copy
//! of both loops had A·P at 18.0 ms with every row through a buffer (C's
//! values scaled), which loses; hence [`worth_recording`]. C's values
//! split between two arrays with α = 1 and β = 0 (PETSc's blocks) are
//! written in place, but for the rows with entries in both.
//!
//! Where op(B)'s rows are short, a row's products are first written a
//! fixed width at a time into a buffer and then added at their places in
//! one loop a row ([`RowProducts`], [`product_width`]):
//! a loop over each row of op(B) mispredicted its end about once an entry
//! of A, which made the replay no faster than the known-structure kernel
//! on a third VM (session 64: A·P 33.5-37.7 ms, 24.8-28.9 written 8 at a
//! time).
//!
//! The positions are only as good as the patterns they were recorded on:
//! the plan keeps them with the fingerprint of C's structure and replays
//! them only on A's and B's checked patterns ([`crate::PatternCheck`]).
//! Should the patterns differ anyway (a caller that vouched for changed
//! ones), a position past C's row or a row with more products than
//! recorded is an error, and otherwise only the call's values are wrong;
//! nothing is written outside C.

use super::pattern::{
    self, OneArray, RowInput, RowRecorder, RowValues, TwoArrays, PREFETCH_MIN_B_BYTES,
};
use super::rows::{prefetch_parts_of_b, Chunk, NumericPiece, Operand, Scale, PREFETCH_AHEAD};
use super::{SplitInput, SplitRows};
use crate::error::{try_vec, Error, Result};
use crate::plan::{RowPattern, RowWork};
use crate::types::{Index, Scalar};
use std::ops::Range;

/// The recorded positions of one chunk's products, in the order the
/// kernels visit them (row by row; in a row, A's entries as stored, and
/// for each its row of op(B) as stored).
#[derive(Debug)]
pub(crate) enum ChunkPositions {
    /// C's rows have at most 256 entries.
    Narrow(Vec<u8>),
    /// C's rows have at most 65,536 entries.
    Wide(Vec<u16>),
    /// Not positions but, for each entry of op(A), the lanes of its row
    /// of C that its row of op(B) adds into (`lanes.rs`): C's rows have at
    /// most [`super::lanes::LANES_MAX_ROW`] entries.
    Lanes(Vec<u64>),
}

impl ChunkPositions {
    /// The bytes they take.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            ChunkPositions::Narrow(p) => p.capacity(),
            ChunkPositions::Wide(p) => 2 * p.capacity(),
            ChunkPositions::Lanes(m) => 8 * m.capacity(),
        }
    }
}

/// Bytes of one recorded position for C's rows of at most `max_row`
/// entries; `None` when a row is too long to record.
pub(crate) fn position_bytes(max_row: usize) -> Option<u64> {
    match max_row {
        0..=256 => Some(1),
        257..=65_536 => Some(2),
        _ => None,
    }
}

/// Whether recording the positions of `products` products of op(A)'s
/// `a_entries` entries into C's `nnz` entries (rows of at most `max_row`)
/// pays, for a numeric phase whose output is written straight into C's
/// rows (`direct`: α = 1 and β = 0; C's values in one array, or split
/// between two, where only rows with entries in both go through a buffer)
/// or through a row buffer: straight, always; through the buffer only when
/// a row averages at least [`BUFFERED_MIN_PRODUCTS`] products an entry
/// (A·P, 2.9 a entry, lost 5 % that way; Pᵀ·(A·P), 8.5, gained 30 %).
/// Never when the positions would take more memory than C's own values and
/// columns (`entry_bytes` an entry), nor when op(B)'s rows average fewer
/// than [`RECORDED_MIN_PRODUCTS_PER_ENTRY`] products an entry of op(A).
pub(crate) fn worth_recording(
    (products, a_entries, nnz, max_row): (u64, usize, usize, usize),
    entry_bytes: u64,
    direct: bool,
) -> bool {
    let Some(width) = position_bytes(max_row) else {
        return false;
    };
    let fits = products.saturating_mul(width) <= (nnz as u64).saturating_mul(entry_bytes);
    let dense = products >= (nnz as u64).saturating_mul(BUFFERED_MIN_PRODUCTS);
    let long_rows_of_b = products as f64 >= RECORDED_MIN_PRODUCTS_PER_ENTRY * a_entries as f64;
    nnz > 0 && fits && long_rows_of_b && (direct || dense)
}

/// See [`worth_recording`].
const BUFFERED_MIN_PRODUCTS: u64 = 4;

/// Where op(B)'s rows hold about one entry (A times GAMG's tentative
/// prolongator, an aggregation: one entry a row), a replay reads a
/// position where the known-structure kernel reads a column, for each
/// entry of A alike, and gains nothing, while the phase that records took
/// twice the known-structure kernel's time. `phases_vs_gustavson`, one
/// thread, GAMG's A·P_tent at 64³ (minimum of 9; 2-vCPU AMD EPYC VM,
/// session 69), values on the known structure / recording / replay:
/// 7-point (1.0 products an entry of A, 1.9 an entry of C) 8.5 / 16.1 /
/// 8.7 ms; 27-point (1.0 and 6.7) 22.8 / 53.2 / 24.9 ms.
const RECORDED_MIN_PRODUCTS_PER_ENTRY: f64 = 1.5;

/// One position: a place in a row of C.
trait Position: Copy + Default + Send + 'static {
    /// The place `k`, which fits (rows are checked before).
    fn at(k: usize) -> Self;
    fn get(self) -> usize;
}

impl Position for u8 {
    #[inline(always)]
    fn at(k: usize) -> Self {
        k as u8
    }
    #[inline(always)]
    fn get(self) -> usize {
        self as usize
    }
}

impl Position for u16 {
    #[inline(always)]
    fn at(k: usize) -> Self {
        k as u16
    }
    #[inline(always)]
    fn get(self) -> usize {
        self as usize
    }
}

/// Records, after each row of C is written, the place of each of the
/// row's products in it.
struct Recorder<P> {
    /// Each of op(B)'s columns' place in the current row of C.
    places: Vec<P>,
    positions: Vec<P>,
}

impl<P: Position, J: Index> RowRecorder<J> for Recorder<P> {
    const RECORDS: bool = true;

    fn row(&mut self, i: usize, (cols, c_base): (&[J], usize)) -> Result<()> {
        for (k, &c) in cols.iter().enumerate() {
            // Checked here: the kernel's gather checks C's columns only
            // after the row's products.
            let place = c.as_usize().wrapping_sub(c_base);
            *self
                .places
                .get_mut(place)
                .ok_or_else(|| not_recorded_here(i))? = P::at(k);
        }
        Ok(())
    }

    #[inline(always)]
    fn product(&mut self, column: usize) {
        // In range: the kernel's accumulator is as wide.
        self.positions.push(self.places[column]);
    }
}

/// A, A's values when they are in two arrays, and op(B).
type Operands<'o, 'a, T, I, J> = (
    &'o Operand<'a, T, I, J>,
    Option<SplitInput<'a, T, I>>,
    &'o Operand<'a, T, I, J>,
);

/// The known-structure kernel ([`pattern::accumulate_rows`] on a checked
/// pattern) on one chunk, recording the positions of its products, for
/// C's rows of at most `max_row` entries.
///
/// # Errors
/// As the kernel's; [`Error::AllocFailed`] for the positions;
/// [`Error::InvalidValue`] when a row has more than 65,536 entries.
pub(super) fn record_rows<T: Scalar, I: Index, J: Index>(
    (a, a_split, b): Operands<'_, '_, T, I, J>,
    (chunk, pattern, max_row): (Chunk<'_>, &[J], usize),
    out: NumericPiece<'_, T, J>,
    split: Option<SplitRows<'_, T>>,
) -> Result<ChunkPositions> {
    let products = chunk.work.rows(chunk.rows.clone()) as usize;
    let ncols = b.pattern.ncols;
    fn recorder<P: Position>(ncols: usize, products: usize) -> Result<Recorder<P>> {
        let mut positions = Vec::new();
        positions
            .try_reserve_exact(products)
            .map_err(|_| Error::AllocFailed("the recorded positions of C's products".into()))?;
        Ok(Recorder {
            places: try_vec(ncols, P::default(), "the places of C's columns")?,
            positions,
        })
    }
    let job = (chunk, pattern);
    match position_bytes(max_row) {
        Some(1) => {
            let mut r = recorder::<u8>(ncols, products)?;
            pattern::accumulate_rows_recording(a, a_split, b, job, out, split, &mut r)?;
            Ok(ChunkPositions::Narrow(r.positions))
        }
        Some(_) => {
            let mut r = recorder::<u16>(ncols, products)?;
            pattern::accumulate_rows_recording(a, a_split, b, job, out, split, &mut r)?;
            Ok(ChunkPositions::Wide(r.positions))
        }
        None => Err(Error::InvalidValue(format!(
            "a row of C with {max_row} entries is too long to record its products' positions"
        ))),
    }
}

/// The numeric phase of one chunk at its recorded `positions`
/// ([`record_rows`] on the same patterns): `alpha * op(A) * op(B) + beta
/// * C` into the chunk's values of C, in one array or split between two.
///
/// # Errors
/// [`Error::InvalidValue`] when the patterns are not those the positions
/// were recorded on, as far as it shows (a row with more products than
/// recorded, a position past its row of C, products left over); rows
/// before it are written. [`Error::AllocFailed`] for a row buffer.
pub(super) fn replay_rows<T: Scalar, I: Index, J: Index>(
    (a, a_split, b): Operands<'_, '_, T, I, J>,
    chunk: Chunk<'_>,
    positions: &ChunkPositions,
    out: NumericPiece<'_, T, J>,
    split: Option<SplitRows<'_, T>>,
) -> Result<()> {
    match (positions, a_split) {
        (ChunkPositions::Lanes(m), a_split) => {
            super::lanes::replay_rows((a, a_split, b), chunk.rows, m, out, split)
        }
        (ChunkPositions::Narrow(p), None) => replay_with(a, a.values, b, chunk, p, out, split),
        (ChunkPositions::Narrow(p), Some(s)) => replay_with(a, s, b, chunk, p, out, split),
        (ChunkPositions::Wide(p), None) => replay_with(a, a.values, b, chunk, p, out, split),
        (ChunkPositions::Wide(p), Some(s)) => replay_with(a, s, b, chunk, p, out, split),
    }
}

/// The error for positions that do not fit the patterns.
#[cold]
#[inline(never)]
fn not_recorded_here(i: usize) -> Error {
    Error::InvalidValue(format!(
        "row {i} of C: its products do not match the positions recorded for the plan's \
         patterns: the pattern of A or B changed between phases"
    ))
}

/// [`replay_rows`] with A's values read from `a_in`, positions `P`.
fn replay_with<T: Scalar, I: Index, J: Index, A: RowInput<T>, P: Position>(
    a: &Operand<'_, T, I, J>,
    a_in: A,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    positions: &[P],
    out: NumericPiece<'_, T, J>,
    split: Option<SplitRows<'_, T>>,
) -> Result<()> {
    let prefetch = chunk.prefetch() && b.pattern.cols.len() as u64 * 16 > PREFETCH_MIN_B_BYTES;
    #[cfg(test)]
    let prefetch = prefetch || tests::forced_prefetch();
    let rows = chunk.rows;
    let (offsets, scale) = (out.offsets, *out.scale);
    let plain = scale.alpha == T::one() && scale.beta == T::zero();
    let mut products = match rows_product_width(&a.pattern, chunk.work, &rows) {
        0 => None,
        width => Some(RowProducts::<T>::new(width, chunk.work, &rows)?),
    };
    let job = Replay {
        a,
        a_in,
        b,
        rows: rows.clone(),
        offsets,
        positions,
        products: products.as_mut(),
    };
    let last = rows.end.saturating_sub(1);
    let run = prefetch;
    let done = if split.is_none() && plain {
        job.run(run, Straight(out.vals, offsets[rows.start]))?
    } else {
        // A row buffer, for every row or for those split between both
        // arrays.
        let longest = rows.clone().map(|i| offsets[i + 1] - offsets[i]).max();
        let mut row = try_vec(longest.unwrap_or(0), T::zero(), "a row of C")?;
        match split {
            None => {
                let whole = OneArray {
                    vals: out.vals,
                    origin: offsets[rows.start],
                };
                job.run(run, Buffered(whole, &scale, &mut row))?
            }
            Some(split) => {
                let origins = (
                    split.first_offsets[rows.start],
                    split.second_offsets[rows.start],
                );
                let buffered = Buffered(TwoArrays { split, origins }, &scale, &mut row);
                if plain {
                    let out = SplitStraight {
                        buffered,
                        in_buffer: false,
                    };
                    job.run(run, out)?
                } else {
                    job.run(run, buffered)?
                }
            }
        }
    };
    if done != positions.len() {
        return Err(not_recorded_here(last));
    }
    Ok(())
}

/// Where [`Replay::run`] adds a row's products, and how the row reaches C.
trait ReplayRow<T> {
    /// The cells, all zero, to add row `i`'s products into (C's row
    /// itself, or a buffer as long).
    fn cells(&mut self, i: usize, c_row: std::ops::Range<usize>) -> &mut [T];
    /// Writes row `i` (its cells, as [`ReplayRow::cells`] gave them) into
    /// C and leaves the buffer zero.
    fn finish(&mut self, i: usize, c_row: std::ops::Range<usize>);
}

/// C's values in one array, α = 1 and β = 0: the row is zeroed and the
/// products added into it in place. From C's offset of the chunk's first
/// row.
struct Straight<'a, T>(&'a mut [T], usize);

impl<T: Scalar> ReplayRow<T> for Straight<'_, T> {
    #[inline(always)]
    fn cells(&mut self, _: usize, c_row: std::ops::Range<usize>) -> &mut [T] {
        let row = &mut self.0[c_row.start - self.1..c_row.end - self.1];
        row.fill(T::zero());
        row
    }
    #[inline(always)]
    fn finish(&mut self, _: usize, _: std::ops::Range<usize>) {}
}

/// C's values split between two arrays, α = 1 and β = 0: a row that lies
/// in one of them is zeroed and the products added into it in place; a
/// row split between both goes through [`Buffered`] (which stores the sums
/// as they are for α = 1 and β = 0).
struct SplitStraight<'a, 'b, T> {
    buffered: Buffered<'b, TwoArrays<'a, T>, T>,
    /// Whether the current row is in the buffer.
    in_buffer: bool,
}

impl<T: Scalar> ReplayRow<T> for SplitStraight<'_, '_, T> {
    #[inline(always)]
    fn cells(&mut self, i: usize, c_row: std::ops::Range<usize>) -> &mut [T] {
        let s = &self.buffered.0.split;
        self.in_buffer = s.first_offsets[i + 1] > s.first_offsets[i]
            && s.second_offsets[i + 1] > s.second_offsets[i];
        if self.in_buffer {
            return self.buffered.cells(i, c_row);
        }
        let (head, tail) = self.buffered.0.row(i, c_row);
        let whole = if tail.is_empty() { head } else { tail };
        whole.fill(T::zero());
        whole
    }
    #[inline(always)]
    fn finish(&mut self, i: usize, c_row: std::ops::Range<usize>) {
        if self.in_buffer {
            self.buffered.finish(i, c_row);
        }
    }
}

/// Any other output: the products are added into a buffer as long as the
/// row, then stored, scaled, where `O` puts the row.
struct Buffered<'a, O, T>(O, &'a Scale<T>, &'a mut [T]);

impl<T: Scalar, O: RowValues<T>> ReplayRow<T> for Buffered<'_, O, T> {
    #[inline(always)]
    fn cells(&mut self, _: usize, c_row: std::ops::Range<usize>) -> &mut [T] {
        &mut self.2[..c_row.len()]
    }
    #[inline(always)]
    fn finish(&mut self, i: usize, c_row: std::ops::Range<usize>) {
        let row = &mut self.2[..c_row.len()];
        let (head, tail) = self.0.row(i, c_row);
        let (first, second) = row.split_at(head.len().min(row.len()));
        self.1.store_each(head, first, |v| v);
        self.1.store_each(tail, second, |v| v);
        row.fill(T::zero());
    }
}

/// One chunk's replay: its rows, the operands, and its positions.
struct Replay<'a, 'o, T, I, J, A, P> {
    a: &'o Operand<'a, T, I, J>,
    a_in: A,
    b: &'o Operand<'a, T, I, J>,
    rows: std::ops::Range<usize>,
    offsets: &'o [usize],
    positions: &'o [P],
    /// A row's products, for a replay that writes them first
    /// ([`product_width`]).
    products: Option<&'o mut RowProducts<T>>,
}

impl<T: Scalar, I: Index, J: Index, A: RowInput<T>, P: Position> Replay<'_, '_, T, I, J, A, P> {
    /// Adds every row's products at their positions into the cells `out`
    /// gives, prefetching op(B)'s rows or not; returns the positions read.
    ///
    /// Without prefetching (op(B)'s rows read in order, or op(B) in cache:
    /// GAMG's products), a loop for each width (0, 8, 16). Prefetching,
    /// one loop for every width, which it takes from the rows
    /// ([`ANY_WIDTH`]): each loop is built for every value, index,
    /// position and output type, and a loop for each width and each
    /// prefetch made the debug library 50 % larger (11.7 -> 17.6 MiB
    /// stripped, session 65). The width as a branch in the loop costs a
    /// little: A·P as in [`product_width`], 8 at a time, 18.7-18.9 ms with
    /// a loop for each width, 19.7-22.5 with the branch (session 65).
    #[inline(always)]
    fn run<R: ReplayRow<T>>(self, prefetch: bool, out: R) -> Result<usize> {
        let width = self.products.as_ref().map_or(0, |p| p.width);
        match (prefetch, width) {
            (true, _) => self.rows_of::<true, ANY_WIDTH, R>(out),
            (false, 8) => self.rows_of::<false, 8, R>(out),
            (false, 16) => self.rows_of::<false, 16, R>(out),
            (false, _) => self.rows_of::<false, 0, R>(out),
        }
    }

    /// [`Replay::run`], out of line over plain slices (the loop keeps its
    /// pointers in registers).
    #[inline(never)]
    fn rows_of<const PREFETCH: bool, const W: usize, R: ReplayRow<T>>(
        mut self,
        mut out: R,
    ) -> Result<usize> {
        let (a, b) = (self.a.pattern, self.b.pattern);
        let b_vals = self.b.values;
        let (positions, offsets) = (self.positions, self.offsets);
        let mut t = 0usize;
        for i in self.rows {
            if PREFETCH {
                prefetch_parts_of_b::<false, T, I, J>(&a, &b, b_vals, i + PREFETCH_AHEAD);
            }
            let c_row = offsets[i]..offsets[i + 1];
            let ra = a.range(i);
            let (a_head, a_tail) = self.a_in.row(i, ra.clone())?;
            let cells = out.cells(i, c_row.clone());
            let bs = (b.offsets, b_vals, b.base);
            let written = match self.products.as_deref_mut() {
                Some(products) if W > 0 => {
                    let (cols_head, cols_tail) = a.cols[ra.clone()].split_at(a_head.len());
                    let parts = [(cols_head, a_head), (cols_tail, a_tail)];
                    products.write_row::<W, I, J>(parts, a.base, bs)
                }
                _ => None,
            };
            let found = if let Some(written) = written {
                let n = written.len();
                positions.get(t..t + n).and_then(|at| {
                    for (&x, &p) in written.iter().zip(at) {
                        *cells.get_mut(p.get())? += x;
                    }
                    Some(n)
                })
            } else if a_tail.is_empty() {
                add_at((&a.cols[ra], a_head, a.base), bs, &positions[t..], cells)
            } else {
                let (cols_head, cols_tail) = a.cols[ra].split_at(a_head.len());
                add_at((cols_head, a_head, a.base), bs, &positions[t..], cells).and_then(|n| {
                    let rest = positions.get(t + n..).unwrap_or_default();
                    add_at((cols_tail, a_tail, a.base), bs, rest, cells).map(|m| n + m)
                })
            };
            t += found.ok_or_else(|| not_recorded_here(i))?;
            out.finish(i, c_row);
        }
        Ok(t)
    }
}

/// The width at which the replay writes each row's products first
/// ([`RowProducts`]) for a chunk whose entries of A (`a_entries`) read
/// `products` products: 8 or 16 where op(B)'s rows are short on average,
/// 0 (each row of op(B) added in a loop of its own length) otherwise, and
/// where they hold about one entry, whose loop then always runs once
/// (8 at a time wrote 8 products for each one: GAMG's 7-point A·P_tent at
/// 64³, 1.0 products an entry of A, replayed in 16.6 ms, 8.7 this way,
/// session 69). Rows of op(B) of a few entries, each of its own length, made
/// that loop's end mispredict about once an entry of A. Replays of GAMG's
/// products at 64³ (`phases_vs_gustavson`, one thread, minimum of 7, three
/// alternating rounds, 2-vCPU Intel Xeon VM, session 64), a loop for each
/// row of op(B) / written 8 at a time / 16 at a time:
/// - A·P, 7-point Poisson (3.5 products an entry of A): 33.5-37.7 /
///   24.8-28.9 / 24.8-26.7 ms;
/// - Pᵀ·(A·P), 7-point (8.5): 25.6-29.5 / 22.9-31.6 / 16.1-17.6 ms;
/// - Pᵀ·(A·P), 27-point (9.2): 34.0-36.6 / 28.2-37.2 / 28.3-31.8 ms;
/// - A·P, 27-point (3.9): 119 ms one row of op(B) at a time, 69 written 8
///   at a time (one run each).
///
/// On a smoothed-aggregation A·P made alike (7-point Poisson at 64³, P
/// from 2×2×2 aggregates smoothed once: 3.9 products an entry of A; same
/// VM kind, session 65, 15 runs) 8 at a time was faster than 16: 19.7-21.2
/// ms against 24.7-27.4.
///
/// The known-structure kernel that records the positions (`pattern.rs`)
/// lost with its products and columns written the same way (A·P 7-point:
/// 33-38 ms -> 38-46 at width 8): its accumulator's read-modify-writes,
/// not the loop's end, bound it.
fn product_width(products: u64, a_entries: usize) -> usize {
    #[cfg(test)]
    if let Some(width) = tests::forced_width() {
        return width;
    }
    let mean = products as f64 / a_entries.max(1) as f64;
    if mean < RECORDED_MIN_PRODUCTS_PER_ENTRY {
        0
    } else if mean <= 6.0 {
        8
    } else if mean <= 12.0 {
        16
    } else {
        0
    }
}

/// [`product_width`] for the rows `rows` of op(A) `a` (their products
/// from `work`).
fn rows_product_width<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    work: &RowWork,
    rows: &Range<usize>,
) -> usize {
    let a_entries = match rows.clone().last() {
        Some(last) => a.range(last).end - a.range(rows.start).start,
        None => 0,
    };
    product_width(work.rows(rows.clone()), a_entries)
}

/// The width of a replay loop built for every width: it takes the one of
/// its [`RowProducts`].
const ANY_WIDTH: usize = usize::MAX;

/// Rows longer than this many products are not written first
/// ([`RowProducts::write`] declines them): the buffer stays small.
const ROW_PRODUCTS_MAX: usize = 4096;

/// One row's products `a_ik * b_kj`, in the order the kernels add them:
/// A's entries as stored, for each its row of op(B) as stored. Each row of
/// op(B) is read a fixed width at a time (past its end too; the next
/// row's products overwrite those), so the loop that adds them at their
/// places runs once a row, not once an entry of A ([`product_width`]).
struct RowProducts<T> {
    vals: Vec<T>,
    /// 8 or 16.
    width: usize,
}

impl<T: Scalar> RowProducts<T> {
    /// Room for the rows `rows` of up to [`ROW_PRODUCTS_MAX`] products
    /// (`work`) written `width` at a time (8 or 16).
    fn new(width: usize, work: &RowWork, rows: &Range<usize>) -> Result<Self> {
        let longest = rows.clone().map(|i| work.row(i)).max().unwrap_or(0);
        let room = usize::try_from(longest).map_or(ROW_PRODUCTS_MAX, |l| l.min(ROW_PRODUCTS_MAX));
        let vals = try_vec(room + width, T::zero(), "the products of a row of C")?;
        Ok(RowProducts { vals, width })
    }

    /// [`RowProducts::write`] at the width `W`, or at the width of `self`
    /// for [`ANY_WIDTH`].
    #[inline(always)]
    fn write_row<const W: usize, I: Index, J: Index>(
        &mut self,
        parts: [(&[J], &[T]); 2],
        a_base: usize,
        b: (&[I], &[T], usize),
    ) -> Option<&[T]> {
        let width = if W == ANY_WIDTH { self.width } else { W };
        if width == 16 {
            self.write::<16, I, J>(parts, a_base, b)
        } else {
            self.write::<8, I, J>(parts, a_base, b)
        }
    }

    /// Writes the products of A's entries in `parts` (each: columns and
    /// values, zero-based from `a_base`) with their rows of op(B)
    /// (`b_offsets` and values, zero-based from `b_base`), `W` at a time;
    /// returns them, or `None` when they do not fit (a row past
    /// [`ROW_PRODUCTS_MAX`], or more products than planned): the caller
    /// then adds that row's products one row of op(B) at a time. Each
    /// product is the value `f * v` the kernels add.
    #[inline(always)]
    fn write<const W: usize, I: Index, J: Index>(
        &mut self,
        parts: [(&[J], &[T]); 2],
        a_base: usize,
        (b_offsets, b_vals, b_base): (&[I], &[T], usize),
    ) -> Option<&[T]> {
        let vals = &mut self.vals[..];
        let mut at = 0usize;
        for (a_cols, a_vals) in parts {
            for (&k, &f) in a_cols.iter().zip(a_vals) {
                let r = k.as_usize() - a_base;
                let bounds = &b_offsets[r..r + 2];
                let (start, end) = (bounds[0].as_usize() - b_base, bounds[1].as_usize() - b_base);
                let mut j = start;
                loop {
                    let to = at + (j - start);
                    let src = b_vals.get(j..).and_then(|v| v.first_chunk::<W>());
                    let dst = vals.get_mut(to..).and_then(|d| d.first_chunk_mut::<W>());
                    if let (Some(src), Some(dst)) = (src, dst) {
                        for (d, &v) in dst.iter_mut().zip(src) {
                            *d = f * v;
                        }
                    } else {
                        // The last values of op(B), or the buffer's end.
                        let src = b_vals.get(j..end)?;
                        let dst = vals.get_mut(to..to + (end - j))?;
                        for (d, &v) in dst.iter_mut().zip(src) {
                            *d = f * v;
                        }
                        break;
                    }
                    j += W;
                    if j >= end {
                        break;
                    }
                }
                at += end - start;
            }
        }
        Some(&self.vals[..at])
    }
}

/// Adds the products of A's entries `a_cols` (values `a_vals`) with their
/// rows of op(B) (`b_offsets`; values `b_vals`, zero-based from
/// `b_base`) into `cells` at `positions`, in order; returns how many
/// positions it read, or `None` when they run out or one is past `cells`.
#[inline(always)]
fn add_at<T: Scalar, I: Index, J: Index, P: Position>(
    (a_cols, a_vals, a_base): (&[J], &[T], usize),
    (b_offsets, b_vals, b_base): (&[I], &[T], usize),
    positions: &[P],
    cells: &mut [T],
) -> Option<usize> {
    let mut t = 0usize;
    for (&k, &f) in a_cols.iter().zip(a_vals) {
        let r = k.as_usize() - a_base;
        let bounds = &b_offsets[r..r + 2];
        let rb = bounds[0].as_usize() - b_base..bounds[1].as_usize() - b_base;
        let at = positions.get(t..t + rb.len())?;
        t += rb.len();
        for (&v, &p) in b_vals[rb].iter().zip(at) {
            *cells.get_mut(p.get())? += f * v;
        }
    }
    Some(t)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::RowProducts;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// The width every replay of recorded positions takes while set
    /// (`usize::MAX`: its own choice). Every width gives the same values
    /// bit for bit, so a test that sets it while others run changes only
    /// which loop they run.
    static FORCED_WIDTH: AtomicUsize = AtomicUsize::new(usize::MAX);

    /// Whether every replay prefetches op(B)'s rows while set (the loop
    /// that takes its width from the rows, [`super::ANY_WIDTH`]).
    static FORCED_PREFETCH: AtomicBool = AtomicBool::new(false);

    pub(super) fn forced_prefetch() -> bool {
        FORCED_PREFETCH.load(Ordering::Relaxed)
    }

    pub(super) fn forced_width() -> Option<usize> {
        match FORCED_WIDTH.load(Ordering::Relaxed) {
            usize::MAX => None,
            w => Some(w),
        }
    }

    /// Runs `f(width, prefetch)` with every product width
    /// ([`super::product_width`]) forced to each of 0, 8 and 16, then
    /// with the kernels' own choice (`usize::MAX`), each with the replays
    /// prefetching op(B)'s rows at their own choice and always.
    pub(crate) fn with_each_width(mut f: impl FnMut(usize, bool)) {
        for prefetch in [false, true] {
            FORCED_PREFETCH.store(prefetch, Ordering::Relaxed);
            for width in [0, 8, 16, usize::MAX] {
                FORCED_WIDTH.store(width, Ordering::Relaxed);
                f(width, prefetch);
            }
        }
        FORCED_WIDTH.store(usize::MAX, Ordering::Relaxed);
        FORCED_PREFETCH.store(false, Ordering::Relaxed);
    }

    /// The products written 1, 8 or 16 at a time are those of the plain
    /// loop, bit for bit: rows of op(B) shorter and longer than the width,
    /// empty ones, the last row of op(B) (read up to its end, not past),
    /// one-based indices, A's row in two parts; a buffer too short for the
    /// products is `None`, not a panic.
    #[test]
    fn products_written_at_a_width_are_the_plain_loops() {
        // op(B): rows of 0, 1, 3, 8, 9, 17 and 2 entries (the last row
        // ends the values), one-based.
        let lens = [0usize, 1, 3, 8, 9, 17, 2];
        let mut b_offsets = vec![1i64];
        for l in lens {
            b_offsets.push(b_offsets.last().unwrap() + l as i64);
        }
        let nb = *b_offsets.last().unwrap() as usize - 1;
        let b_vals: Vec<f64> = (0..nb).map(|k| 0.3 + 0.11 * k as f64).collect();
        // A's row (one-based rows of op(B)), ending on the last row.
        let a_cols = [4i32, 1, 6, 2, 3, 7, 5, 7];
        let a_vals: Vec<f64> = (0..a_cols.len()).map(|k| 1.7 - 0.23 * k as f64).collect();
        let mut want = Vec::new();
        for (&k, &f) in a_cols.iter().zip(&a_vals) {
            let r = k as usize - 1;
            let rb = b_offsets[r] as usize - 1..b_offsets[r + 1] as usize - 1;
            want.extend(b_vals[rb].iter().map(|&v| f * v));
        }
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let b = (&b_offsets[..], &b_vals[..], 1);
        fn check<const W: usize>(
            (a_cols, a_vals): (&[i32], &[f64]),
            b: (&[i64], &[f64], usize),
            want: &[f64],
            bits: impl Fn(&[f64]) -> Vec<u64>,
        ) {
            for cut in [0, 3, a_cols.len()] {
                let parts = [
                    (&a_cols[..cut], &a_vals[..cut]),
                    (&a_cols[cut..], &a_vals[cut..]),
                ];
                for room in [want.len() + W, want.len()] {
                    let mut p = RowProducts {
                        vals: vec![f64::NAN; room],
                        width: W,
                    };
                    let written = p.write::<W, i64, i32>(parts, 1, b).map(&bits);
                    assert_eq!(written, Some(bits(want)), "width {W}");
                }
                let vals = vec![0.0f64; want.len() - 1];
                let mut short = RowProducts { vals, width: W };
                assert_eq!(short.write::<W, i64, i32>(parts, 1, b), None, "width {W}");
            }
        }
        let a = (&a_cols[..], &a_vals[..]);
        check::<1>(a, b, &want, bits);
        check::<8>(a, b, &want, bits);
        check::<16>(a, b, &want, bits);
    }
}
