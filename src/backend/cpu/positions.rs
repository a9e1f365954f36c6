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
//! one loop a row ([`super::rows::RowProducts`], [`super::rows::product_width`]):
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
use super::rows::{
    prefetch_parts_of_b, rows_product_width, Chunk, NumericPiece, Operand, RowProducts, Scale,
    PREFETCH_AHEAD,
};
use super::{SplitInput, SplitRows};
use crate::error::{try_vec, Error, Result};
use crate::types::{Index, Scalar};

/// The recorded positions of one chunk's products, in the order the
/// kernels visit them (row by row; in a row, A's entries as stored, and
/// for each its row of op(B) as stored).
#[derive(Debug)]
pub(crate) enum ChunkPositions {
    /// C's rows have at most 256 entries.
    Narrow(Vec<u8>),
    /// C's rows have at most 65,536 entries.
    Wide(Vec<u16>),
}

impl ChunkPositions {
    /// The bytes they take.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            ChunkPositions::Narrow(p) => p.capacity(),
            ChunkPositions::Wide(p) => 2 * p.capacity(),
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

/// Whether recording the positions of `products` products into C's
/// `nnz` entries (rows of at most `max_row`) pays, for a numeric phase
/// whose output is written straight into C's rows (`direct`: α = 1 and
/// β = 0; C's values in one array, or split between two, where only rows
/// with entries in both go through a buffer) or through a row buffer:
/// straight, always; through the buffer only when a row averages at least
/// [`BUFFERED_MIN_PRODUCTS`] products an entry (A·P, 2.9 a entry, lost 5 %
/// that way; Pᵀ·(A·P), 8.5, gained 30 %). Never when the positions would
/// take more memory than C's own values and columns (`entry_bytes` an
/// entry).
pub(crate) fn worth_recording(
    (products, nnz, max_row): (u64, usize, usize),
    entry_bytes: u64,
    direct: bool,
) -> bool {
    let Some(width) = position_bytes(max_row) else {
        return false;
    };
    let fits = products.saturating_mul(width) <= (nnz as u64).saturating_mul(entry_bytes);
    let dense = products >= (nnz as u64).saturating_mul(BUFFERED_MIN_PRODUCTS);
    nnz > 0 && fits && (direct || dense)
}

/// See [`worth_recording`].
const BUFFERED_MIN_PRODUCTS: u64 = 4;

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
    let rows = chunk.rows;
    let (offsets, scale) = (out.offsets, *out.scale);
    let plain = scale.alpha == T::one() && scale.beta == T::zero();
    let width = rows_product_width(&a.pattern, chunk.work, &rows);
    let mut products = RowProducts::<T>::new(width, chunk.work, &rows)?;
    let job = Replay {
        a,
        a_in,
        b,
        rows: rows.clone(),
        offsets,
        positions,
        products: &mut products,
    };
    let last = rows.end.saturating_sub(1);
    let run = (prefetch, width);
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
    products: &'o mut RowProducts<T>,
}

impl<T: Scalar, I: Index, J: Index, A: RowInput<T>, P: Position> Replay<'_, '_, T, I, J, A, P> {
    /// Adds every row's products at their positions into the cells `out`
    /// gives, prefetching op(B)'s rows or not, the products written
    /// `width` at a time first or not (0, [`product_width`]); returns the
    /// positions read.
    #[inline(always)]
    fn run<R: ReplayRow<T>>(self, (prefetch, width): (bool, usize), out: R) -> Result<usize> {
        match (prefetch, width) {
            (true, 8) => self.rows_of::<true, 8, R>(out),
            (false, 8) => self.rows_of::<false, 8, R>(out),
            (true, 16) => self.rows_of::<true, 16, R>(out),
            (false, 16) => self.rows_of::<false, 16, R>(out),
            (true, _) => self.rows_of::<true, 0, R>(out),
            (false, _) => self.rows_of::<false, 0, R>(out),
        }
    }

    /// [`Replay::run`], out of line over plain slices (the loop keeps its
    /// pointers in registers).
    #[inline(never)]
    fn rows_of<const PREFETCH: bool, const W: usize, R: ReplayRow<T>>(
        self,
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
            let written = if W > 0 {
                let (cols_head, cols_tail) = a.cols[ra.clone()].split_at(a_head.len());
                let parts = [(cols_head, a_head), (cols_tail, a_tail)];
                self.products.write::<W, I, J>(parts, a.base, bs)
            } else {
                None
            };
            let found = if let Some(n) = written {
                positions.get(t..t + n).and_then(|at| {
                    for (&x, &p) in self.products.0[..n].iter().zip(at) {
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
