//! The multi-core CPU back end (rayon).
//!
//! Rows are processed in the contiguous chunks of equal work computed by
//! [`crate::plan::RowWork`]; each chunk allocates one hash table sized for
//! its longest row and reuses it for all its rows, so there is no per-row
//! allocation and no lock. Each row is accumulated by one thread in the
//! stored order of its products, so results are bitwise identical for any
//! thread count.

mod hash;

use crate::backend::{Backend, NumericOutput, SymbolicOutput};
use crate::error::Result;
use crate::plan::{RowPattern, RowWork};
use crate::types::{Index, Scalar};
use rayon::prelude::*;

/// The CPU executor; `threads` is the size of the pool it runs in.
#[derive(Debug, Clone, Copy)]
pub struct CpuBackend {
    /// Threads of the pool the calls run in.
    pub threads: usize,
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

impl Backend for CpuBackend {
    fn preferred_chunks(&self) -> usize {
        self.threads.max(1) * CHUNKS_PER_THREAD
    }

    fn symbolic<I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        b: &RowPattern<'_, I, J>,
        work: &RowWork,
        out: SymbolicOutput<'_, J>,
    ) -> Result<()> {
        let bounds = work.bounds();
        match out {
            SymbolicOutput::Counts(counts) => split_by_chunks(counts, bounds, |r| r)
                .into_par_iter()
                .zip(work.chunks().collect::<Vec<_>>())
                .try_for_each(|(counts, rows)| hash::count_rows(a, b, work, rows, counts)),
            SymbolicOutput::Columns {
                offsets,
                cols,
                base,
            } => split_by_chunks(cols, bounds, |r| offsets[r])
                .into_par_iter()
                .zip(work.chunks().collect::<Vec<_>>())
                .try_for_each(|(cols, rows)| {
                    hash::list_rows(a, b, work, rows, offsets, base, cols)
                }),
        }
    }

    fn numeric<T: Scalar, I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        a_vals: &[T],
        b: &RowPattern<'_, I, J>,
        b_vals: &[T],
        work: &RowWork,
        out: NumericOutput<'_, T, J>,
    ) -> Result<()> {
        let bounds = work.bounds();
        let NumericOutput {
            offsets,
            cols,
            values,
            base,
            alpha,
            beta,
        } = out;
        let val_pieces = split_by_chunks(values, bounds, |r| offsets[r]);
        let col_pieces: Vec<Option<&mut [J]>> = match cols {
            Some(c) => split_by_chunks(c, bounds, |r| offsets[r])
                .into_iter()
                .map(Some)
                .collect(),
            None => bounds.windows(2).map(|_| None).collect(),
        };
        let scale = hash::Scale { alpha, beta, base };
        val_pieces
            .into_par_iter()
            .zip(col_pieces)
            .zip(work.chunks().collect::<Vec<_>>())
            .try_for_each(|((vals, cols), rows)| {
                hash::accumulate_rows(
                    a, a_vals, b, b_vals, work, rows, offsets, &scale, cols, vals,
                )
            })
    }
}
