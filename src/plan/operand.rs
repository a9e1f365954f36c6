//! `op(X)` in a form whose rows can be walked: the caller's arrays for
//! `op = N`, an internal transposed pattern for `op = T / C`.

use crate::csr::CsrView;
use crate::error::{try_reserve, try_vec, Error, Result};
use crate::types::{Index, Op, Scalar};

/// Borrowed row access to a pattern: rows `offsets[i] - base .. offsets[i+1] - base`
/// of `cols`, columns counted from `base`.
#[derive(Debug)]
pub struct RowPattern<'a, I, J> {
    /// Number of rows of `op(X)`.
    pub nrows: usize,
    /// Number of columns of `op(X)`.
    pub ncols: usize,
    /// `nrows + 1` offsets.
    pub offsets: &'a [I],
    /// Column indices.
    pub cols: &'a [J],
    /// Index base of `offsets` and `cols` (0 or 1).
    pub base: usize,
}

impl<I, J> Clone for RowPattern<'_, I, J> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I, J> Copy for RowPattern<'_, I, J> {}

impl<'a, I: Index, J: Index> RowPattern<'a, I, J> {
    /// A zero-based pattern over plain arrays (for tests of the kernels).
    #[cfg(test)]
    pub(crate) fn zero_based(offsets: &'a [I], cols: &'a [J], ncols: usize) -> Self {
        RowPattern {
            nrows: offsets.len() - 1,
            ncols,
            offsets,
            cols,
            base: 0,
        }
    }

    /// Zero-based range of row `i`.
    #[inline(always)]
    pub fn range(&self, i: usize) -> std::ops::Range<usize> {
        self.offsets[i].as_usize() - self.base..self.offsets[i + 1].as_usize() - self.base
    }
    /// Zero-based column of entry `k`.
    #[inline(always)]
    pub fn col(&self, k: usize) -> usize {
        self.cols[k].as_usize() - self.base
    }
    /// Number of entries of row `i`.
    #[inline(always)]
    pub fn row_len(&self, i: usize) -> usize {
        self.offsets[i + 1].as_usize() - self.offsets[i].as_usize()
    }
    /// True when every row lists strictly increasing columns (sorted, no
    /// duplicates): the merge-based kernels and the single-entry fast path
    /// need it. O(nnz), parallel.
    pub fn rows_canonical(&self) -> bool {
        use rayon::prelude::*;
        (0..self.nrows).into_par_iter().with_min_len(1024).all(|i| {
            let r = self.range(i);
            self.cols[r].windows(2).all(|w| w[0] < w[1])
        })
    }
}

/// The transposed pattern of an operand (zero-based), with the permutation
/// that maps each transposed entry to its source entry so values can be
/// gathered again for every numeric phase (the reuse API changes values).
#[derive(Debug, Clone)]
pub struct Transposed<I, J> {
    offsets: Vec<I>,
    cols: Vec<J>,
    source: Vec<usize>,
}

/// How `op(X)` is walked by rows.
#[derive(Debug, Clone)]
pub struct OperandPattern<I, J> {
    op: Op,
    nrows: usize,
    ncols: usize,
    transposed: Option<Transposed<I, J>>,
}

impl<I: Index, J: Index> OperandPattern<I, J> {
    /// Prepares `op(x)`. For `op = T / C` this builds the transposed pattern
    /// (O(nnz + ncols) time, nnz indices + nnz permutation entries of memory).
    ///
    /// # Errors
    /// [`Error::NotSupported`] when `x` has more rows than its column-index
    /// type can hold (they become column indices); [`Error::AllocFailed`].
    pub fn new<T: Scalar>(x: &CsrView<'_, T, I, J>, op: Op) -> Result<Self> {
        let (nrows, ncols) = if op.transposes() {
            (x.ncols(), x.nrows())
        } else {
            (x.nrows(), x.ncols())
        };
        let transposed = if op.transposes() {
            Some(transpose_pattern(x)?)
        } else {
            None
        };
        Ok(OperandPattern {
            op,
            nrows,
            ncols,
            transposed,
        })
    }

    /// The operation.
    pub fn op(&self) -> Op {
        self.op
    }
    /// Rows of `op(x)`.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Columns of `op(x)`.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Row access to `op(x)`; `x` must be the matrix this was built from.
    pub fn rows<'a, T: Scalar>(&'a self, x: &CsrView<'a, T, I, J>) -> RowPattern<'a, I, J> {
        match &self.transposed {
            None => RowPattern {
                nrows: self.nrows,
                ncols: self.ncols,
                offsets: x.row_offsets(),
                cols: x.col_indices(),
                base: x.base().offset(),
            },
            Some(t) => RowPattern {
                nrows: self.nrows,
                ncols: self.ncols,
                offsets: &t.offsets,
                cols: &t.cols,
                base: 0,
            },
        }
    }

    /// The values of `op(x)` in the order of [`OperandPattern::rows`]:
    /// borrowed for `op = N`, gathered (and conjugated for `op = C`) into
    /// `scratch` otherwise. O(nnz) for a transposed operand.
    ///
    /// # Errors
    /// [`Error::AllocFailed`].
    pub fn values<'a, T: Scalar>(
        &self,
        x: &CsrView<'a, T, I, J>,
        scratch: &'a mut Vec<T>,
    ) -> Result<&'a [T]> {
        let Some(t) = &self.transposed else {
            return Ok(x.values());
        };
        let src = x.values();
        scratch.clear();
        try_reserve(scratch, t.source.len(), "transposed values")?;
        if self.op == Op::C {
            scratch.extend(t.source.iter().map(|&s| src[s].conj()));
        } else {
            scratch.extend(t.source.iter().map(|&s| src[s]));
        }
        Ok(scratch)
    }

    /// Bytes held by this operand's internal pattern.
    pub fn memory_bytes(&self) -> usize {
        self.transposed.as_ref().map_or(0, |t| {
            t.offsets.len() * std::mem::size_of::<I>()
                + t.cols.len() * std::mem::size_of::<J>()
                + t.source.len() * std::mem::size_of::<usize>()
        })
    }
}

/// Counting sort of the entries by column: O(nnz + ncols), stable, so each
/// transposed row lists its entries by increasing source row.
fn transpose_pattern<T: Scalar, I: Index, J: Index>(
    x: &CsrView<'_, T, I, J>,
) -> Result<Transposed<I, J>> {
    if x.nrows() as u64 > J::MAX {
        return Err(Error::NotSupported(format!(
            "a transposed operand with {} rows needs column indices wider than {}",
            x.nrows(),
            J::INDEX_TYPE.name()
        )));
    }
    let b = x.base().offset();
    let nnz = x.nnz();
    let mut offsets = try_vec(x.ncols() + 1, 0usize, "transposed row offsets")?;
    for &c in x.col_indices() {
        offsets[c.to_usize() - b + 1] += 1;
    }
    for j in 0..x.ncols() {
        offsets[j + 1] += offsets[j];
    }
    let mut next = try_vec(x.ncols(), 0usize, "transpose cursor")?;
    next.copy_from_slice(&offsets[..x.ncols()]);
    let mut cols = try_vec(nnz, J::default(), "transposed column indices")?;
    let mut source = try_vec(nnz, 0usize, "transpose permutation")?;
    for i in 0..x.nrows() {
        for k in x.row_range(i) {
            let j = x.col_indices()[k].to_usize() - b;
            let p = next[j];
            next[j] += 1;
            cols[p] = J::from_usize_unchecked(i);
            source[p] = k;
        }
    }
    // nnz fits I because x's own offsets hold nnz + base.
    let mut offsets_i = try_vec(offsets.len(), I::default(), "transposed row offsets")?;
    for (d, &s) in offsets_i.iter_mut().zip(&offsets) {
        *d = I::from_usize_unchecked(s);
    }
    Ok(Transposed {
        offsets: offsets_i,
        cols,
        source,
    })
}
