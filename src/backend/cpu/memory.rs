//! Upper bounds of the workspaces the CPU kernels take, per chunk of rows,
//! for the memory budget ([`crate::plan::memory`]).
//!
//! Each bound mirrors the allocations of the kernel the phase dispatches
//! to (see [`CpuBackend::symbolic`] and [`CpuBackend::numeric`]), sized for
//! the largest row of the whole product: a workspace taken from the
//! context's pool is reused by later chunks and grows to their rows, so at
//! most `concurrency` workspaces of this size are alive at once.

use super::{brmerge, dense, hash, pattern, CpuBackend};
use crate::plan::select::DENSE_MAX_BYTES;
use crate::plan::{RowPattern, RowWork};
use crate::types::{Algorithm, Index, Scalar};

/// The row statistics the bounds read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowBounds {
    /// The most products of one output row.
    pub products: u64,
    /// The most entries of one row of op(A) (lists merged by BRMerge).
    pub a_row: usize,
    /// Columns of op(B) (= of C).
    pub ncols: usize,
    /// The most products of one row BRMerge-Upper merges beside a dense
    /// accumulator (when op(B) is narrow enough for one), those of
    /// `brmerge::upper_merges_row`.
    pub merged_products: u64,
}

impl RowBounds {
    /// The bounds of `op(A) * op(B)` from the row access to op(A) and the
    /// product's row work.
    pub(crate) fn of<I: Index, J: Index>(
        a: &RowPattern<'_, I, J>,
        work: &RowWork,
        ncols: usize,
    ) -> RowBounds {
        let (mut a_row, mut merged_products) = (0, 0);
        for i in 0..a.nrows {
            let len = a.row_len(i);
            a_row = a_row.max(len);
            if brmerge::upper_merges_row(len, work.row(i)) {
                merged_products = merged_products.max(work.row(i));
            }
        }
        RowBounds {
            products: work.max_row(),
            a_row,
            ncols,
            merged_products,
        }
    }

    /// The most entries of one row of C.
    fn c_row(&self) -> usize {
        usize::try_from(self.products)
            .unwrap_or(usize::MAX)
            .min(self.ncols)
    }
}

/// Entries of BRMerge-Upper's temporary C over all chunks of `work` when it
/// stays at its first size (under a memory budget): each chunk's products
/// over the predicted compression `ratio`, with head room.
pub(crate) fn upper_temporary_entries(work: &RowWork, ratio: f64) -> u64 {
    work.chunks()
        .map(|r| {
            let products = usize::try_from(work.rows(r)).unwrap_or(usize::MAX);
            brmerge::upper_initial_capacity(products, ratio) as u64
        })
        .sum()
}

impl CpuBackend<'_> {
    /// Bytes one chunk takes in the symbolic phase, counting rows or
    /// (`columns`) listing them.
    pub(crate) fn symbolic_chunk_bytes(&self, r: &RowBounds, columns: bool) -> u64 {
        if self.counts_with_bitmap(r.ncols) {
            dense::workspace_bytes(r.ncols, if columns { r.c_row() } else { 0 }, 0)
        } else {
            hash::table_bytes(r.products, r.ncols, 0)
        }
    }

    /// Bytes one chunk takes in the numeric phase with values of `T`: the
    /// algorithm's own, or adding into C's known structure (reuse), or
    /// listing the columns of a structure-only output, whichever is most.
    pub(crate) fn numeric_chunk_bytes<T: Scalar, J: Index>(&self, r: &RowBounds) -> u64 {
        let t = std::mem::size_of::<T>();
        let c_row = r.c_row() as u64;
        let own = match self.numeric_algorithm() {
            Algorithm::Dense => dense::workspace_bytes(r.ncols, r.c_row(), t),
            Algorithm::BrmergePrecise | Algorithm::BrmergeUpper => {
                brmerge::merger_bytes(r.products, r.a_row, t + std::mem::size_of::<J>())
            }
            _ => hash::table_bytes(r.products, r.ncols, t)
                .saturating_add(c_row.saturating_mul(std::mem::size_of::<(usize, T)>() as u64))
                .saturating_add((c_row + 1) * 8),
        };
        let known = if pattern::fits(r.ncols) {
            pattern::workspace_bytes::<T>(r.ncols)
        } else {
            0
        };
        own.max(known).max(self.symbolic_chunk_bytes(r, true))
    }

    /// Bytes one chunk of BRMerge-Upper's symbolic phase takes besides its
    /// temporary C: merge buffers and, when op(B) is narrow enough, a dense
    /// accumulator for the rows it does not merge.
    pub(crate) fn upper_chunk_bytes<T: Scalar, J: Index>(&self, r: &RowBounds) -> u64 {
        let t = std::mem::size_of::<T>();
        let dense_ok = r.ncols.saturating_mul(t) <= DENSE_MAX_BYTES;
        // With a dense accumulator, only rows of one or two lists are
        // merged.
        let (products, lists) = if dense_ok {
            (
                r.merged_products,
                r.a_row.min(brmerge::MERGE_MAX_LISTS_BESIDE_DENSE),
            )
        } else {
            (r.products, r.a_row)
        };
        let merge = brmerge::merger_bytes(products, lists, t + std::mem::size_of::<J>());
        let dense = if dense_ok && r.products > 0 {
            dense::workspace_bytes(r.ncols, r.c_row(), t)
        } else {
            0
        };
        merge.saturating_add(dense)
    }
}
