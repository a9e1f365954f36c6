//! The multi-core CPU back end (rayon).
//!
//! Rows are processed in the contiguous chunks of equal work computed by
//! [`crate::plan::RowWork`]; each chunk takes its workspace (hash table,
//! dense accumulator or merge buffers) once, sized for its largest row,
//! and reuses it for all its rows, so there is no per-row allocation and
//! no lock. Workspaces come from, and go back to, the context's
//! [`ScratchPool`], so later chunks, phases and products reuse them
//! ([`scratch`]). Each row is accumulated by one thread in a fixed order, so
//! results are bitwise identical for any thread count.
//!
//! Algorithms (chosen by [`crate::plan::select`]):
//! - [`hash`]: hash symbolic → exact row offsets → hash numeric + sort;
//! - [`dense`]: bit-map symbolic → dense accumulator numeric, rows read
//!   back in order from the bit map or a sorted list;
//! - [`brmerge`]: BRMerge-Precise (bit-map or hash symbolic → binary row
//!   merging straight into C) and BRMerge-Upper (merging into a temporary
//!   C during the symbolic phase, then a copy).
//!
//! Every kernel skips empty rows and copies the scaled row of B directly
//! for rows of A with a single entry when B's rows are canonical.

pub(crate) mod brmerge;
mod dense;
mod hash;
mod lanes;
pub(crate) mod memory;
mod pattern;
mod positions;
mod rows;
pub mod scratch;
mod sort_columns;

pub(crate) use brmerge::UpperChunk;
pub(crate) use dense::{ListedColumns, ListedValues, LISTED_BLOCK_ENTRIES};
pub(crate) use lanes::{in_registers as lanes_in_registers, LANES_MAX_ROW};
#[cfg(test)]
pub(crate) use positions::tests::with_each_width;
pub(crate) use positions::{position_bytes, worth_recording, ChunkPositions};
pub(crate) use rows::{Operand, Scale};
pub use scratch::ScratchPool;

use rows::{Chunk, ColumnsPiece, NumericPiece};

use crate::error::{try_vec, Result};
use crate::parallel::{try_for_each_piece, try_map_pieces};
use crate::plan::select::DENSE_MAX_BYTES;
use crate::plan::{RowPattern, RowWork};
use crate::types::{Algorithm, Index, Scalar};

/// Where the symbolic phase puts its result.
#[derive(Debug)]
pub enum SymbolicOutput<'a, J> {
    /// `counts[i]` receives nnz of output row `i`.
    Counts(&'a mut [usize]),
    /// Each row's sorted, distinct columns (plus `base`) go to
    /// `cols[offsets[i]..offsets[i + 1]]` (zero-based `offsets`).
    Columns {
        /// Exact zero-based row offsets of C from an earlier counting pass.
        offsets: &'a [usize],
        /// C's column array.
        cols: &'a mut [J],
        /// C's index base.
        base: usize,
    },
}

/// The numeric phase's target: `values = alpha * op(A) op(B) + beta * values`
/// on the pattern given by `offsets`, columns sorted within each row.
#[derive(Debug)]
pub struct NumericOutput<'a, T, J> {
    /// Exact zero-based row offsets of C.
    pub offsets: &'a [usize],
    /// When present, receives C's sorted column indices (plus `base`).
    pub cols: Option<&'a mut [J]>,
    /// False: with `cols` present, each row may be written in any
    /// deterministic order (no sort). Ignored without `cols`.
    pub sorted: bool,
    /// C's values; read first when `beta != 0`.
    pub values: &'a mut [T],
    /// For a values-only output (`cols` is `None`): C's columns as an
    /// earlier structure phase wrote them (with `base`), so the products
    /// can be added into known positions. `None`: find the columns again.
    pub pattern: Option<&'a [J]>,
    /// `pattern` is C's structure for these A and B: the fingerprints of
    /// A's and B's patterns matched the plan's and `pattern`'s matched the
    /// structure the plan wrote. The known-structure kernel then keeps sums
    /// without per-column product counts (see `pattern.rs`).
    pub pattern_checked: bool,
    /// C's index base.
    pub base: usize,
    /// Scales the product.
    pub alpha: T,
    /// Scales the values already in `values` (0 means they are not read).
    pub beta: T,
    /// C's values in two arrays per row instead of `values` (which is then
    /// empty): see [`SplitRows`].
    pub split: Option<SplitRows<'a, T>>,
}

/// What [`CpuBackend::numeric_at_positions`] does with the positions of
/// C's products.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KnownPositions<'p> {
    /// Records them, for C's rows of at most `max_row` entries.
    Record { max_row: usize },
    /// Adds each product at its position, one set per chunk.
    Replay(&'p [ChunkPositions]),
}

/// C's values kept in two arrays, each row split between them
/// ([`crate::SplitValues`] with zero-based offsets checked against C's
/// row offsets): row `i`'s values are
/// `first[first_offsets[i]..first_offsets[i + 1]]` followed by
/// `second[second_offsets[i]..second_offsets[i + 1]]`.
#[derive(Debug)]
pub struct SplitRows<'a, T> {
    /// Row offsets of the first block (`nrows + 1`, zero-based).
    pub first_offsets: &'a [usize],
    /// The first block's values.
    pub first: &'a mut [T],
    /// Row offsets of the second block (`nrows + 1`, zero-based).
    pub second_offsets: &'a [usize],
    /// The second block's values.
    pub second: &'a mut [T],
}

impl<'a, T> SplitRows<'a, T> {
    /// The chunks' parts of both arrays (chunk `c` is rows
    /// `bounds[c]..bounds[c + 1]`), each with the whole offsets.
    fn by_chunks(self, bounds: &[usize]) -> Vec<SplitRows<'a, T>> {
        let SplitRows {
            first_offsets,
            first,
            second_offsets,
            second,
        } = self;
        let firsts = split_by_chunks(first, bounds, |r| first_offsets[r]);
        let seconds = split_by_chunks(second, bounds, |r| second_offsets[r]);
        firsts
            .into_iter()
            .zip(seconds)
            .map(|(first, second)| SplitRows {
                first_offsets,
                first,
                second_offsets,
                second,
            })
            .collect()
    }
}

impl<T: Scalar> SplitRows<'_, T> {
    /// The values of each row in turn, `offsets` being C's: gathered into
    /// one array (`into_split` false) or spread from it.
    fn copy_rows(&mut self, offsets: &[usize], values: &mut [T], into_split: bool) {
        for i in 0..offsets.len().saturating_sub(1) {
            let row = &mut values[offsets[i]..offsets[i + 1]];
            let (head, tail) = row.split_at_mut(self.first_offsets[i + 1] - self.first_offsets[i]);
            let first = &mut self.first[self.first_offsets[i]..self.first_offsets[i + 1]];
            let second = &mut self.second[self.second_offsets[i]..self.second_offsets[i + 1]];
            if into_split {
                first.copy_from_slice(head);
                second.copy_from_slice(tail);
            } else {
                head.copy_from_slice(first);
                tail.copy_from_slice(second);
            }
        }
    }
}

/// A's values kept in two arrays, each row split between them (the
/// read-only counterpart of [`SplitRows`], for op(A) = A walked as stored):
/// row `i`'s values are `first[first_offsets[i] - base..first_offsets[i +
/// 1] - base]` followed by the same range of `second` by
/// `second_offsets`, in the order of the row's stored columns. The offsets
/// are the caller's, with A's index base `base`. Every row is checked as
/// it is read ([`SplitInput::row`] is `None` outside the arrays, and the
/// readers compare the two parts' lengths with A's row); [`SplitInput::new`]
/// can also check them all first.
#[derive(Debug)]
pub struct SplitInput<'a, T, I> {
    a_offsets: &'a [I],
    first_offsets: &'a [I],
    first: &'a [T],
    second_offsets: &'a [I],
    second: &'a [T],
    base: usize,
}

impl<T, I> Clone for SplitInput<'_, T, I> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, I> Copy for SplitInput<'_, T, I> {}

impl<'a, T: Scalar, I: Index> SplitInput<'a, T, I> {
    /// The two blocks (offsets with index base `base`, each beside its
    /// values) of A, whose row `i` has `a_offsets[i + 1] - a_offsets[i]`
    /// entries (`a_offsets` with `base` too). The offset arrays' lengths
    /// are checked here; with `check_rows`, so is every row, in one pass
    /// over the three offset arrays with nothing allocated, before anything
    /// is read (otherwise each row is checked as the product reads it).
    ///
    /// # Errors
    /// [`crate::Error::InvalidValue`] when a block's offsets are not as
    /// many as A's or (`check_rows`) a row's parts lie outside their arrays
    /// or do not add up to the row; the message names the block or the
    /// row.
    pub(crate) fn new(
        a_offsets: &'a [I],
        (first_offsets, first): (&'a [I], &'a [T]),
        (second_offsets, second): (&'a [I], &'a [T]),
        (base, check_rows): (usize, bool),
    ) -> Result<Self> {
        let m = a_offsets.len().saturating_sub(1);
        for (name, o) in [("first", first_offsets), ("second", second_offsets)] {
            if o.len() != m + 1 {
                crate::error::invalid!(
                    "the {name} block's row offsets of A have {} entries, not nrows + 1 = {}",
                    o.len(),
                    m + 1
                );
            }
        }
        let split = SplitInput {
            a_offsets,
            first_offsets,
            first,
            second_offsets,
            second,
            base,
        };
        if check_rows {
            for i in 0..m {
                split.checked_row(i)?;
            }
        }
        Ok(split)
    }

    /// Row `i`'s values, its first part and the rest; `None` when a part
    /// is not within its array (an offset below the base, decreasing, or
    /// past the end). The lengths are not compared with A's row here.
    #[inline(always)]
    pub(crate) fn row(&self, i: usize) -> Option<(&'a [T], &'a [T])> {
        let base = self.base;
        let part = |o: &[I], v: &'a [T]| {
            v.get(o[i].as_usize().wrapping_sub(base)..o[i + 1].as_usize().wrapping_sub(base))
        };
        Some((
            part(self.first_offsets, self.first)?,
            part(self.second_offsets, self.second)?,
        ))
    }

    /// [`SplitInput::row`], checked against A's row `i`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidValue`] naming the row.
    pub(crate) fn checked_row(&self, i: usize) -> Result<(&'a [T], &'a [T])> {
        let len = self.a_offsets[i + 1].to_i64() - self.a_offsets[i].to_i64();
        self.row_of_len(i, len)
    }

    /// [`SplitInput::row`], checked to hold `len` entries (row `i`'s of
    /// A, which a caller walking A's rows has at hand).
    ///
    /// # Errors
    /// [`crate::Error::InvalidValue`] naming the row.
    #[inline(always)]
    pub(crate) fn row_of_len(&self, i: usize, len: i64) -> Result<(&'a [T], &'a [T])> {
        match self.row(i) {
            Some((head, tail)) if (head.len() + tail.len()) as i64 == len => Ok((head, tail)),
            parts => Err(bad_split_row(
                i,
                len,
                parts.map(|(h, t)| (h.len(), t.len())),
            )),
        }
    }

    /// Every row's values one after the other, each row checked: the
    /// operand's values in one array, for the kernels that read them so.
    /// O(nnz).
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`]; [`crate::Error::InvalidValue`] for
    /// a row the split does not hold.
    pub(crate) fn gather(&self) -> Result<Vec<T>> {
        let rows = self.a_offsets.len().saturating_sub(1);
        let nnz = self.a_offsets[rows].as_usize() - self.a_offsets[0].as_usize();
        let mut out = Vec::new();
        crate::error::try_reserve(&mut out, nnz, "A's values gathered from their two arrays")?;
        for i in 0..rows {
            let (head, tail) = self.checked_row(i)?;
            out.extend_from_slice(head);
            out.extend_from_slice(tail);
        }
        Ok(out)
    }
}

/// The error for row `i` of A (`len` entries) whose two parts of a split
/// are `parts` long, or lie outside their arrays (`None`).
#[cold]
#[inline(never)]
pub(crate) fn bad_split_row(i: usize, len: i64, parts: Option<(usize, usize)>) -> crate::Error {
    crate::Error::InvalidValue(match parts {
        Some((f, s)) => {
            format!("row {i} of A has {len} entries but its two blocks hold {f} and {s}")
        }
        None => format!(
            "row {i} of A: its part of a block lies outside that block's values (offsets below the \
             index base, decreasing or past the array's end)"
        ),
    })
}

/// The widest op(B) whose symbolic pass uses a bit map (`ncols / 8` bytes
/// per chunk: 1 MiB here, which stays in L2/L3); wider ones hash.
pub const BITMAP_MAX_COLS: usize = 1 << 23;

/// The CPU executor.
#[derive(Debug, Clone, Copy)]
pub struct CpuBackend<'s> {
    /// Threads of the pool the calls run in.
    pub threads: usize,
    /// The concrete algorithm (see [`crate::plan::select`]).
    pub algorithm: Algorithm,
    /// Whether every row of op(B) has strictly increasing columns.
    pub b_canonical: bool,
    /// Where chunks take their workspaces from and give them back to.
    pub scratch: &'s ScratchPool,
}

/// Chunks per thread: a few more than one so that rows whose cost differs
/// from their nprod (cache misses, long sorts) still balance.
const CHUNKS_PER_THREAD: usize = 4;

/// Splits `data` into one mutable piece per chunk of rows; `position(r)` is
/// where row `r` starts in `data`.
fn split_by_chunks<'a, X>(
    mut data: &'a mut [X],
    bounds: &[usize],
    position: impl Fn(usize) -> usize,
) -> Vec<&'a mut [X]> {
    let mut pieces = Vec::with_capacity(bounds.len().saturating_sub(1));
    for w in bounds.windows(2) {
        let len = position(w[1]) - position(w[0]);
        let (head, tail) = std::mem::take(&mut data).split_at_mut(len);
        pieces.push(head);
        data = tail;
    }
    pieces
}

/// Each piece with the rows of its chunk (pieces made by [`split_by_chunks`]
/// or [`output_pieces`] from `work`'s bounds), for the parallel loops.
fn with_rows<P>(pieces: Vec<P>, work: &RowWork) -> Vec<(P, std::ops::Range<usize>)> {
    pieces.into_iter().zip(work.chunks()).collect()
}

/// The pieces of C's values (and columns, when given) per chunk of rows,
/// and the scaling of the numeric phase.
#[allow(clippy::type_complexity)]
fn output_pieces<'a, T: Scalar, J>(
    out: NumericOutput<'a, T, J>,
    bounds: &[usize],
) -> (Vec<(&'a mut [T], Option<&'a mut [J]>)>, Scale<T>) {
    let NumericOutput {
        offsets,
        cols,
        values,
        base,
        alpha,
        beta,
        pattern: _,
        pattern_checked: _,
        sorted: _,
        split: _,
    } = out;
    let cols: Vec<Option<&mut [J]>> = match cols {
        Some(c) => split_by_chunks(c, bounds, |r| offsets[r])
            .into_iter()
            .map(Some)
            .collect(),
        None => bounds.windows(2).map(|_| None).collect(),
    };
    // Values kept in two arrays ([`SplitRows`]) leave `values` empty.
    let vals = if values.is_empty() {
        bounds.windows(2).map(|_| <&mut [T]>::default()).collect()
    } else {
        split_by_chunks(values, bounds, |r| offsets[r])
    };
    (
        vals.into_iter().zip(cols).collect(),
        Scale { alpha, beta, base },
    )
}

impl CpuBackend<'_> {
    /// The number of chunks a pool of `threads` threads splits the rows into.
    pub fn chunks_for(threads: usize) -> usize {
        threads.max(1) * CHUNKS_PER_THREAD
    }

    /// The job of the chunk of `rows`, for any kernel.
    fn chunk<'w>(&'w self, rows: std::ops::Range<usize>, work: &'w RowWork) -> Chunk<'w> {
        Chunk {
            rows,
            work,
            scratch: self.scratch,
            b_canonical: self.b_canonical,
        }
    }

    /// The kernel the numeric phase runs: the algorithm's own, except that
    /// merging needs sorted rows without duplicates (the planner never
    /// picks BRMerge otherwise; this is only a safety net).
    fn numeric_algorithm(&self) -> Algorithm {
        match self.algorithm {
            Algorithm::BrmergePrecise | Algorithm::BrmergeUpper if !self.b_canonical => {
                Algorithm::Hash
            }
            other => other,
        }
    }

    /// Whether the symbolic pass counts with a bit map (else a hash table).
    fn counts_with_bitmap(&self, ncols: usize) -> bool {
        self.algorithm != Algorithm::Hash && ncols <= BITMAP_MAX_COLS
    }

    /// BRMerge-Upper's symbolic phase: every chunk merges its rows into a
    /// temporary C, first sized by the predicted compression `ratio`
    /// (nprod / nnz(C), the sampling predictor; 1 for the upper bound nprod);
    /// `counts[i]` receives the size of row `i`. `cap` (under a memory
    /// budget): the chunks' temporary C take at most this many entries
    /// together; when they would need more (the prediction was low), the
    /// temporary C is dropped and `None` returned, and the caller counts
    /// the rows instead.
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`]; [`crate::Error::InvalidValue`] on a
    /// stale plan (without `cap`; with one, the counting pass after `None`
    /// finds it).
    pub(crate) fn upper_symbolic<T: Scalar, I: Index, J: Index>(
        &self,
        a: &Operand<'_, T, I, J>,
        b: &Operand<'_, T, I, J>,
        work: &RowWork,
        (ratio, cap): (f64, Option<usize>),
        counts: &mut [usize],
    ) -> Result<Option<Vec<UpperChunk<T, J>>>> {
        let dense_ok = b.pattern.ncols.saturating_mul(std::mem::size_of::<T>()) <= DENSE_MAX_BYTES;
        let pool = cap.map(brmerge::UpperPool::new);
        let pieces = split_by_chunks(counts, work.bounds(), |r| r);
        let chunks = try_map_pieces(with_rows(pieces, work), |(counts, rows)| {
            let chunk = self.chunk(rows, work);
            brmerge::upper_chunk(a, b, chunk, (dense_ok, ratio, pool.as_ref()), counts)
        });
        match chunks {
            Err(crate::Error::InvalidValue(_)) if pool.is_some() => Ok(None),
            other => other.map(Some),
        }
    }

    /// BRMerge-Upper's numeric phase: copies the temporary C made by
    /// [`CpuBackend::upper_symbolic`] into `out`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidValue`] when the sizes do not match.
    pub(crate) fn upper_numeric<T: Scalar, J: Index>(
        &self,
        chunks: &[UpperChunk<T, J>],
        work: &RowWork,
        out: NumericOutput<'_, T, J>,
    ) -> Result<()> {
        let (pieces, scale) = output_pieces(out, work.bounds());
        try_for_each_piece(
            pieces.into_iter().zip(chunks).collect(),
            |((vals, cols), chunk)| brmerge::copy_upper_chunk(chunk, &scale, cols, vals),
        )
    }
}

/// Columns of C that a symbolic phase kept, one chunk of rows each: BRMerge-
/// Upper's temporary C ([`UpperChunk`]) or the listed columns
/// ([`ListedColumns`]). The structure phase copies them.
pub(crate) trait KeptColumns<J>: Sync {
    /// Writes the chunk's columns, plus `base`, into `out`, its piece of
    /// C's columns.
    ///
    /// # Errors
    /// When `out` is not as long as the chunk's columns.
    fn copy_columns(&self, out: &mut [J], base: usize) -> Result<()>;
}

impl<T: Scalar, J: Index> KeptColumns<J> for UpperChunk<T, J> {
    fn copy_columns(&self, out: &mut [J], base: usize) -> Result<()> {
        brmerge::copy_upper_cols(self, base, out)
    }
}

impl<J: Index> KeptColumns<J> for ListedColumns<J> {
    fn copy_columns(&self, out: &mut [J], base: usize) -> Result<()> {
        self.copy_to(out, base)
    }
}

impl CpuBackend<'_> {
    /// The structure phase from the columns a symbolic phase kept
    /// ([`CpuBackend::upper_symbolic`], [`CpuBackend::listing_symbolic`]),
    /// one per chunk of `work`, copied into C's columns (`offsets`: C's
    /// zero-based row offsets), plus `base`, instead of listed again from
    /// the products.
    ///
    /// # Errors
    /// Those of [`KeptColumns::copy_columns`] when the sizes do not match:
    /// [`crate::Error::InvalidValue`] for BRMerge-Upper's temporary C,
    /// [`crate::Error::InternalError`] for listed columns (never: their
    /// counts and columns come from the same pass).
    pub(crate) fn kept_structure<J: Index, K: KeptColumns<J>>(
        &self,
        kept: &[K],
        work: &RowWork,
        offsets: &[usize],
        cols: &mut [J],
        base: usize,
    ) -> Result<()> {
        let pieces = split_by_chunks(cols, work.bounds(), |r| offsets[r]);
        try_for_each_piece(pieces.into_iter().zip(kept).collect(), |(cols, chunk)| {
            chunk.copy_columns(cols, base)
        })
    }
}

/// The two phases of a planned product, over row access to op(A) and
/// op(B). Output is sorted with duplicates summed and deterministic; a row
/// whose size differs from the plan's is an error, never a write out of
/// bounds.
impl CpuBackend<'_> {
    /// Symbolic phase: exact nnz, or the sorted columns, of every output row.
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`]; [`crate::Error::InvalidValue`] when a
    /// row does not match the given offsets.
    pub fn symbolic<I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        b: &RowPattern<'_, I, J>,
        work: &RowWork,
        out: SymbolicOutput<'_, J>,
    ) -> Result<()> {
        let bounds = work.bounds();
        let bitmap = self.counts_with_bitmap(b.ncols);
        match out {
            SymbolicOutput::Counts(counts) => {
                let pieces = split_by_chunks(counts, bounds, |r| r);
                try_for_each_piece(with_rows(pieces, work), |(counts, rows)| {
                    let chunk = self.chunk(rows, work);
                    if bitmap {
                        dense::count_rows(a, b, chunk, counts)
                    } else {
                        hash::count_rows(a, b, chunk, counts)
                    }
                })
            }
            SymbolicOutput::Columns {
                offsets,
                cols,
                base,
            } => {
                let pieces = split_by_chunks(cols, bounds, |r| offsets[r]);
                try_for_each_piece(with_rows(pieces, work), |(cols, rows)| {
                    let chunk = self.chunk(rows, work);
                    let out = ColumnsPiece {
                        offsets,
                        cols,
                        base,
                    };
                    if bitmap {
                        dense::list_rows(a, b, chunk, out)
                    } else {
                        hash::list_rows(a, b, chunk, out)
                    }
                })
            }
        }
    }

    /// The symbolic phase of a caller that writes C's structure next:
    /// `counts[i]` receives nnz of row `i`, and each chunk's sorted columns
    /// are kept ([`ListedColumns`]), in one pass over the products, so that
    /// writing the structure is a copy. `None` (nothing counted) when the
    /// rows are not counted with a bit map (op(B) too wide, or the hash
    /// algorithm): then count with [`CpuBackend::symbolic`].
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`]; [`crate::Error::InvalidValue`] when
    /// a row has more products than planned.
    pub(crate) fn listing_symbolic<I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        b: &RowPattern<'_, I, J>,
        work: &RowWork,
        counts: &mut [usize],
    ) -> Result<Option<Vec<ListedColumns<J>>>> {
        if !self.counts_with_bitmap(b.ncols) {
            return Ok(None);
        }
        let pieces = split_by_chunks(counts, work.bounds(), |r| r);
        try_map_pieces(with_rows(pieces, work), |(counts, rows)| {
            dense::list_rows_unsized(a, b, self.chunk(rows, work), counts)
        })
        .map(Some)
    }

    /// [`CpuBackend::listing_symbolic`] that also lists C's values,
    /// unscaled, beside its columns ([`ListedValues`], one per chunk), for
    /// [`CpuBackend::listed_numeric`] to copy.
    ///
    /// # Errors
    /// As [`CpuBackend::listing_symbolic`].
    #[allow(clippy::type_complexity)]
    pub(crate) fn listing_symbolic_with_values<T: Scalar, I: Index, J: Index>(
        &self,
        a: &Operand<'_, T, I, J>,
        b: &Operand<'_, T, I, J>,
        work: &RowWork,
        counts: &mut [usize],
    ) -> Result<Option<(Vec<ListedColumns<J>>, Vec<ListedValues<T>>)>> {
        if !self.counts_with_bitmap(b.pattern.ncols) {
            return Ok(None);
        }
        let pieces = split_by_chunks(counts, work.bounds(), |r| r);
        let chunks = try_map_pieces(with_rows(pieces, work), |(counts, rows)| {
            dense::list_rows_with_values(a, b, self.chunk(rows, work), counts)
        })?;
        Ok(Some(chunks.into_iter().unzip()))
    }

    /// The numeric phase from the values a symbolic phase listed
    /// ([`CpuBackend::listing_symbolic_with_values`], one per chunk of
    /// `work`): `alpha * listed + beta * C` into C's values, in one array
    /// or split between two ([`SplitRows`]); C's columns are not written
    /// (`out.cols` must be `None`: this serves a values-only output on the
    /// structure the listing wrote).
    ///
    /// # Errors
    /// [`crate::Error::InternalError`] when the values listed do not match
    /// C's rows.
    pub(crate) fn listed_numeric<T: Scalar, J: Index>(
        &self,
        listed: &[ListedValues<T>],
        work: &RowWork,
        mut out: NumericOutput<'_, T, J>,
    ) -> Result<()> {
        let offsets = out.offsets;
        let bounds = work.bounds();
        if listed.len() + 1 != bounds.len() || out.cols.is_some() {
            return Err(crate::Error::InternalError(
                "the values listed by the symbolic phase do not match C's chunks".into(),
            ));
        }
        if let Some(split) = out.split.take() {
            let scale = Scale {
                alpha: out.alpha,
                beta: out.beta,
                base: 0,
            };
            let jobs: Vec<_> = split.by_chunks(bounds).into_iter().zip(listed).collect();
            return try_for_each_piece(with_rows(jobs, work), |((s, chunk), rows)| {
                let (f0, s0) = (s.first_offsets[rows.start], s.second_offsets[rows.start]);
                let mut i = rows.start;
                chunk.for_each_row(rows.clone().map(|r| offsets[r + 1] - offsets[r]), |row| {
                    let (h, t) = (
                        s.first_offsets[i] - f0..s.first_offsets[i + 1] - f0,
                        s.second_offsets[i] - s0..s.second_offsets[i + 1] - s0,
                    );
                    let (head, tail) = row.split_at(h.len().min(row.len()));
                    scale.store_each(&mut s.first[h], head, |v| v);
                    scale.store_each(&mut s.second[t], tail, |v| v);
                    i += 1;
                })
            });
        }
        let (pieces, scale) = output_pieces(out, bounds);
        try_for_each_piece(
            pieces.into_iter().zip(listed).collect(),
            |((vals, _), chunk)| {
                if chunk.len() != vals.len() {
                    return Err(crate::Error::InternalError(
                        "the values listed by the symbolic phase do not match C's rows".into(),
                    ));
                }
                let mut at = 0;
                for part in chunk.parts() {
                    scale.store_each(&mut vals[at..at + part.len()], part, |v| v);
                    at += part.len();
                }
                Ok(())
            },
        )
    }

    /// Whether a values-only numeric phase on C's known structure, over
    /// op(B)'s `ncols` columns, adds into it (the known-structure kernel,
    /// `pattern.rs`): when its dense accumulator (one per chunk) fits and
    /// each chunk has at least a quarter as many products as the
    /// accumulator has columns (else allocating it would dominate, as on
    /// hypersparse products, which keep their planned algorithm).
    pub(crate) fn adds_into_known_structure(&self, ncols: usize, work: &RowWork) -> bool {
        let chunks = work.bounds().len().saturating_sub(1).max(1) as u64;
        let busy = work.total() / chunks >= ncols as u64 / 4;
        pattern::fits(ncols) && busy
    }

    /// Whether the known-structure kernel adds `a`·`b` (op(A)'s and
    /// op(B)'s patterns, `work` their products) masked with α = 1, β = 0
    /// ([`pattern::adds_masked`]), where it beats a replay of recorded
    /// positions.
    pub(crate) fn adds_masked<T: Scalar, I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        b: &RowPattern<'_, I, J>,
        work: &RowWork,
    ) -> bool {
        pattern::adds_masked::<T, I, J>(a, b, work.total())
    }

    /// `f(k, chunk, piece, split)` on every chunk `k` of `work`, in
    /// parallel, with the chunk's piece of C's values (`out.values`, or
    /// its part of `out.split`), for the kernels on C's known structure
    /// (which write no columns).
    fn map_known_chunks<'o, T: Scalar, J: Index, R: Send>(
        &self,
        work: &RowWork,
        mut out: NumericOutput<'o, T, J>,
        f: impl Fn(usize, Chunk<'_>, NumericPiece<'_, T, J>, Option<SplitRows<'o, T>>) -> Result<R>
            + Sync,
    ) -> Result<Vec<R>> {
        let (offsets, sorted) = (out.offsets, out.sorted);
        let split = out.split.take();
        let (pieces, scale) = output_pieces(out, work.bounds());
        let splits: Vec<Option<SplitRows<'o, T>>> = match split {
            Some(split) => split
                .by_chunks(work.bounds())
                .into_iter()
                .map(Some)
                .collect(),
            None => pieces.iter().map(|_| None).collect(),
        };
        let pieces = with_rows(pieces, work)
            .into_iter()
            .zip(splits)
            .enumerate()
            .map(|(k, ((p, rows), s))| (k, p, s, rows));
        try_map_pieces(pieces.collect(), |(k, (vals, cols), split, rows)| {
            let out = NumericPiece {
                offsets,
                cols,
                vals,
                scale: &scale,
                sorted,
            };
            f(k, self.chunk(rows, work), out, split)
        })
    }

    /// The lane masks of the entries of op(A) `a` over op(B) `b` for C's
    /// structure (zero-based row `offsets`, columns `pattern` with index
    /// base `c_base`), one set per chunk of `work`, for
    /// [`CpuBackend::numeric_at_positions`]'s replay (`lanes.rs`); `None`
    /// when the structure does not suit them (a row of C longer than
    /// [`LANES_MAX_ROW`], rows of op(B) or C not sorted).
    ///
    /// # Errors
    /// As [`lanes::masks_of_rows`].
    pub(crate) fn lane_masks<I: Index, J: Index>(
        &self,
        (a, b): (&RowPattern<'_, I, J>, &RowPattern<'_, I, J>),
        work: &RowWork,
        (offsets, pattern, c_base): (&[usize], &[J], usize),
    ) -> Result<Option<Vec<ChunkPositions>>> {
        let chunks: Vec<std::ops::Range<usize>> = work.chunks().collect();
        let masks = try_map_pieces(chunks, |rows| {
            let mut lane_of = try_vec(b.ncols, 0u8, "the lanes of a row of C")?;
            lanes::masks_of_rows((a, b), rows, (offsets, pattern, c_base), &mut lane_of)
        })?;
        Ok(masks
            .into_iter()
            .map(|m| m.map(ChunkPositions::Lanes))
            .collect())
    }

    /// The numeric phase on C's known structure, checked
    /// ([`NumericOutput::pattern_checked`]), with the positions of its
    /// products (`positions.rs`): recorded as the known-structure kernel
    /// runs ([`KnownPositions::Record`], returned one per chunk of
    /// `work`), or replayed ([`KnownPositions::Replay`], recorded on the
    /// same patterns and `work`; nothing returned). A's values as for
    /// [`CpuBackend::numeric`]; only into C's values (`out.cols` is
    /// `None`).
    ///
    /// # Errors
    /// [`crate::Error::InternalError`] for an output that is not C's
    /// checked known structure, or positions of other chunks; as
    /// [`positions::record_rows`] and [`positions::replay_rows`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn numeric_at_positions<T: Scalar, I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        (a_vals, a_split): (&[T], Option<SplitInput<'_, T, I>>),
        b: &RowPattern<'_, I, J>,
        b_vals: &[T],
        work: &RowWork,
        out: NumericOutput<'_, T, J>,
        positions: KnownPositions<'_>,
    ) -> Result<Vec<ChunkPositions>> {
        let chunks = work.bounds().len().saturating_sub(1);
        let pattern = match (&out.cols, out.pattern) {
            (None, Some(p)) if out.pattern_checked => p,
            _ => {
                return Err(crate::Error::InternalError(
                    "positions of C's products serve a checked known structure only".into(),
                ))
            }
        };
        let (a, b) = (&Operand::of(a, a_vals), &Operand::of(b, b_vals));
        match positions {
            KnownPositions::Record { max_row } => {
                self.map_known_chunks(work, out, |_, chunk, out, split| {
                    let job = (chunk, pattern, max_row);
                    positions::record_rows((a, a_split, b), job, out, split)
                })
            }
            KnownPositions::Replay(kept) if kept.len() == chunks => {
                self.map_known_chunks(work, out, |k, chunk, out, split| {
                    positions::replay_rows((a, a_split, b), chunk, &kept[k], out, split)
                })?;
                Ok(Vec::new())
            }
            KnownPositions::Replay(_) => Err(crate::Error::InternalError(
                "the recorded positions do not match C's chunks".into(),
            )),
        }
    }

    /// Numeric phase, straight into C's arrays. `a_split`: A's values are
    /// in its two arrays instead of `a_vals` (then empty), A walked as
    /// stored; the known-structure kernel reads them there, the others
    /// from a copy in one array.
    ///
    /// # Errors
    /// As [`CpuBackend::symbolic`].
    pub fn numeric<T: Scalar, I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        (a_vals, a_split): (&[T], Option<SplitInput<'_, T, I>>),
        b: &RowPattern<'_, I, J>,
        b_vals: &[T],
        work: &RowWork,
        mut out: NumericOutput<'_, T, J>,
    ) -> Result<()> {
        let offsets = out.offsets;
        let known = match (&out.cols, out.pattern) {
            (None, Some(p)) if self.adds_into_known_structure(b.ncols, work) => {
                Some((p, out.pattern_checked))
            }
            _ => None,
        };
        if let (Some(split), None) = (a_split, known) {
            let whole = split.gather()?;
            return self.numeric(a, (&whole, None), b, b_vals, work, out);
        }
        let mut split = out.split.take();
        if let (Some(split), None) = (split.as_mut(), known) {
            // C's values go through one array of their own, then into the
            // two (the known-structure kernel writes the two directly).
            let nnz = offsets.last().copied().unwrap_or(0);
            let mut values = try_vec(nnz, T::zero(), "C's values before their split")?;
            if out.beta != T::zero() {
                split.copy_rows(offsets, &mut values, false);
            }
            let whole = NumericOutput {
                values: &mut values,
                ..out
            };
            self.numeric(a, (a_vals, a_split), b, b_vals, work, whole)?;
            split.copy_rows(offsets, &mut values, true);
            return Ok(());
        }
        let (a, b) = (&Operand::of(a, a_vals), &Operand::of(b, b_vals));
        if let Some(pattern) = known {
            out.split = split;
            return self
                .map_known_chunks(work, out, |_, chunk, out, split| {
                    pattern::accumulate_rows(a, a_split, b, chunk, pattern, out, split)
                })
                .map(drop);
        }
        let sorted = out.sorted || out.cols.is_none();
        let (pieces, scale) = output_pieces(out, work.bounds());
        let piece = |vals, cols| NumericPiece {
            offsets,
            cols,
            vals,
            scale: &scale,
            sorted,
        };
        let pieces = with_rows(pieces, work);
        let algorithm = self.numeric_algorithm();
        try_for_each_piece(pieces, |((vals, cols), rows)| {
            let (chunk, out) = (self.chunk(rows, work), piece(vals, cols));
            match algorithm {
                Algorithm::Dense => dense::accumulate_rows(a, b, chunk, out),
                Algorithm::BrmergePrecise | Algorithm::BrmergeUpper => {
                    brmerge::accumulate_rows(a, b, chunk, out)
                }
                _ => hash::accumulate_rows(a, b, chunk, out),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn stale(e: Error) -> bool {
        matches!(&e, Error::InvalidValue(m) if m.contains("pattern of A or B changed"))
    }

    /// A's values split between two arrays: a good split reads every row
    /// as its two parts, in the row's order; each kind of bad split (a
    /// row's parts not adding up, an offset past its array, offsets that
    /// decrease, below the base, or too few of them) is INVALID_VALUE
    /// naming the row or block, whether checked first or row by row, and
    /// never a panic.
    #[test]
    fn split_input_reads_rows_and_refuses_bad_splits() {
        // A's rows of 2, 0 and 3 entries, base 1; values 1..=5 in row order.
        let a_offsets = [1i32, 3, 3, 6];
        let (first, second) = ([1.0, 3.0, 4.0], [2.0, 5.0]);
        let (fo, so) = ([1i32, 2, 2, 4], [1i32, 2, 2, 3]);
        let split = SplitInput::new(&a_offsets, (&fo, &first), (&so, &second), (1, true)).unwrap();
        assert_eq!(split.checked_row(0).unwrap(), (&[1.0][..], &[2.0][..]));
        assert_eq!(split.checked_row(1).unwrap(), (&[][..], &[][..]));
        assert_eq!(split.checked_row(2).unwrap(), (&[3.0, 4.0][..], &[5.0][..]));
        assert_eq!(split.gather().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0]);

        let refused = |fo: &[i32], so: &[i32], what: &str| {
            for check_rows in [true, false] {
                let made =
                    SplitInput::new(&a_offsets, (fo, &first), (so, &second), (1, check_rows));
                let e = made.and_then(|s| s.gather().map(|_| ())).unwrap_err();
                assert!(
                    matches!(&e, Error::InvalidValue(m) if m.contains(what)),
                    "{fo:?} {so:?} (check_rows {check_rows}): {e}"
                );
            }
        };
        refused(
            &[1, 3, 3, 4],
            &so,
            "row 0 of A has 2 entries but its two blocks hold 2 and 1",
        );
        refused(
            &[1, 2, 2, 5],
            &[1, 2, 2, 2],
            "row 2 of A: its part of a block lies outside",
        );
        refused(&[1, 2, 1, 4], &so, "row 1 of A");
        refused(&[0, 1, 1, 3], &so, "row 0 of A");
        refused(
            &[1, 2, 4],
            &so,
            "the first block's row offsets of A have 3 entries",
        );
    }

    /// Every algorithm, run with row sizes planned for another pattern (what
    /// a fingerprint collision would allow), must refuse with the stale-plan
    /// message, never write out of bounds or panic.
    #[test]
    fn every_algorithm_refuses_a_stale_plan() {
        // Planned: A = one row with two entries, B = identity 64 x 64.
        let b_off: Vec<i32> = (0..=64).collect();
        let b_cols: Vec<i32> = (0..64).collect();
        let b = RowPattern::zero_based(&b_off, &b_cols, 64);
        let a_off = [0i32, 2];
        let planned = RowPattern::zero_based(&a_off, &[0, 1], 64);
        let work = RowWork::new(&planned, &b, 1).unwrap();
        // Actual: the row of A touches all 64 rows of B.
        let wide_off = [0i32, 64];
        let wide = RowPattern::zero_based(&wide_off, &b_cols, 64);
        let offsets = [0usize, 2];
        let ones = [1.0f64; 64];
        let scratch = ScratchPool::default();
        for algorithm in [
            Algorithm::Hash,
            Algorithm::Dense,
            Algorithm::BrmergePrecise,
            Algorithm::BrmergeUpper,
        ] {
            for b_canonical in [true, false] {
                let backend = CpuBackend {
                    threads: 1,
                    algorithm,
                    b_canonical,
                    scratch: &scratch,
                };
                let (mut cols, mut vals) = ([0i32; 2], [0.0f64; 2]);
                let out = NumericOutput {
                    offsets: &offsets,
                    cols: Some(&mut cols[..]),
                    sorted: true,
                    values: &mut vals,
                    base: 0,
                    alpha: 1.0,
                    beta: 0.0,
                    pattern: None,
                    pattern_checked: false,
                    split: None,
                };
                let e = backend
                    .numeric(&wide, (&ones, None), &b, &ones, &work, out)
                    .unwrap_err();
                assert!(stale(e), "{algorithm:?} numeric, canonical {b_canonical}");
                let out = SymbolicOutput::Columns {
                    offsets: &offsets,
                    cols: &mut cols,
                    base: 0,
                };
                let e = backend.symbolic(&wide, &b, &work, out).unwrap_err();
                assert!(stale(e), "{algorithm:?} columns, canonical {b_canonical}");
            }
        }
    }
}
