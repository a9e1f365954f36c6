//! Compressed sparse row matrices: borrowed views and owned matrices.

use crate::error::{invalid, Error, Result};
use crate::parallel::map_blocks;
use crate::plan::fingerprint::{first_bad, scan_pattern};
use crate::types::{ColumnOrder, Index, IndexBase, Scalar};

/// A borrowed CSR matrix whose structure has been validated.
///
/// `I` is the row-offset type and `J` the column-index type (each `i32` or
/// `i64`). Columns within a row may be unsorted and may repeat (repeated
/// entries are summed by every product).
#[derive(Debug)]
pub struct CsrView<'a, T, I = i32, J = I> {
    nrows: usize,
    ncols: usize,
    row_offsets: &'a [I],
    col_indices: &'a [J],
    values: &'a [T],
    base: IndexBase,
}

impl<T, I, J> Clone for CsrView<'_, T, I, J> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, I, J> Copy for CsrView<'_, T, I, J> {}

impl<'a, T: Scalar, I: Index, J: Index> CsrView<'a, T, I, J> {
    /// Checks the structure and builds a view.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `row_offsets.len() != nrows + 1`, the
    /// first offset is not `base`, offsets decrease, the last offset minus
    /// `base` differs from `col_indices.len()`, `values.len()` differs from
    /// `col_indices.len()`, a column is out of `base..ncols + base`, or a
    /// dimension does not fit the index types. The message names the first
    /// offending element. Cost: one pass over the arrays.
    pub fn try_new(
        nrows: usize,
        ncols: usize,
        row_offsets: &'a [I],
        col_indices: &'a [J],
        values: &'a [T],
        base: IndexBase,
    ) -> Result<Self> {
        if values.len() != col_indices.len() {
            invalid!(
                "values has {} entries but colInd has {}",
                values.len(),
                col_indices.len()
            );
        }
        validate_structure(nrows, ncols, row_offsets, col_indices, base)?;
        Ok(CsrView {
            nrows,
            ncols,
            row_offsets,
            col_indices,
            values,
            base,
        })
    }

    /// Builds a view of data already checked by [`validate_structure`].
    /// `values` is empty in a pattern-only view (the C ABI's phases that
    /// read no values accept a NULL value array); nothing that reads
    /// values may be given such a view.
    pub(crate) fn from_checked(
        nrows: usize,
        ncols: usize,
        row_offsets: &'a [I],
        col_indices: &'a [J],
        values: &'a [T],
        base: IndexBase,
    ) -> Self {
        debug_assert_eq!(row_offsets.len(), nrows + 1);
        debug_assert!(values.is_empty() || values.len() == col_indices.len());
        CsrView {
            nrows,
            ncols,
            row_offsets,
            col_indices,
            values,
            base,
        }
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of stored entries (duplicates counted).
    pub fn nnz(&self) -> usize {
        self.col_indices.len()
    }
    /// The index base.
    pub fn base(&self) -> IndexBase {
        self.base
    }
    /// Row offsets (`nrows + 1` entries, starting at `base`).
    pub fn row_offsets(&self) -> &'a [I] {
        self.row_offsets
    }
    /// Column indices.
    pub fn col_indices(&self) -> &'a [J] {
        self.col_indices
    }
    /// Values.
    pub fn values(&self) -> &'a [T] {
        self.values
    }
    /// The zero-based range of row `i` in `col_indices` / `values`.
    #[inline]
    pub fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        let b = self.base.offset();
        self.row_offsets[i].to_usize() - b..self.row_offsets[i + 1].to_usize() - b
    }
}

/// The entries a CSR matrix's row offsets use, `last - base` (`last` =
/// `rowOffsets[rows]`), when it lies in `0..=nnz`: a declared nnz larger
/// than that is spare room at the end of the arrays, never read (cuSPARSE
/// accepts it). Otherwise the declared `nnz`, for validation to report the
/// mismatch against. The one rule of the C ABI's views, its staged copies
/// and the GPU pipeline.
pub(crate) fn used_entries(last: i64, base: i64, nnz: i64) -> i64 {
    match last.checked_sub(base) {
        Some(used) if (0..=nnz).contains(&used) => used,
        _ => nnz,
    }
}

/// Entries per parallel task when validating.
const VALIDATE_GRAIN: usize = 1 << 16;

/// The first `i < n` with `bad(i)`, scanning blocks of indices in parallel
/// (each block serially, so the inner loop stays tight).
fn first_position(n: usize, bad: impl Fn(usize) -> bool + Sync) -> Option<usize> {
    map_blocks(n, VALIDATE_GRAIN, |mut block| block.find(|&i| bad(i)))
        .into_iter()
        .flatten()
        .min()
}

/// Checks the structure of a CSR matrix (see [`CsrView::try_new`]).
/// Parallel in the current rayon pool; reports the first offending element.
pub fn validate_structure<I: Index, J: Index>(
    nrows: usize,
    ncols: usize,
    row_offsets: &[I],
    col_indices: &[J],
    base: IndexBase,
) -> Result<()> {
    check_structure(nrows, ncols, row_offsets, col_indices, base, false).map(|_| ())
}

/// [`validate_structure`] and the pattern's fingerprint
/// ([`crate::plan::fingerprint::pattern_fingerprint`]) in one pass over the
/// arrays: what the C ABI's work estimation does with each operand.
pub(crate) fn validate_and_fingerprint<I: Index, J: Index>(
    nrows: usize,
    ncols: usize,
    row_offsets: &[I],
    col_indices: &[J],
    base: IndexBase,
) -> Result<u64> {
    check_structure(nrows, ncols, row_offsets, col_indices, base, true)
        .map(|print| print.unwrap_or_default())
}

/// The checks of [`validate_structure`]; with `fingerprint`, fused with the
/// pattern's hash, which it returns.
fn check_structure<I: Index, J: Index>(
    nrows: usize,
    ncols: usize,
    row_offsets: &[I],
    col_indices: &[J],
    base: IndexBase,
    fingerprint: bool,
) -> Result<Option<u64>> {
    let b = base.offset();
    if row_offsets.len() != nrows + 1 {
        invalid!(
            "rowOffsets has {} entries, expected rows + 1 = {}",
            row_offsets.len(),
            nrows + 1
        );
    }
    if ncols as u64 + b as u64 > J::MAX + 1 {
        invalid!(
            "{} columns do not fit the column index type {}",
            ncols,
            J::INDEX_TYPE.name()
        );
    }
    let first = row_offsets[0].to_i64();
    if first != b as i64 {
        invalid!("rowOffsets[0] = {first} but the index base is {b}");
    }
    let decreases = |i: usize| i < nrows && row_offsets[i + 1] < row_offsets[i];
    // Below the base the difference wraps to a huge value: one unsigned
    // comparison tests both ends.
    let out_of_range = |c: &J| (c.to_i64().wrapping_sub(b as i64) as u64) >= ncols as u64;
    // Without the fingerprint the columns are scanned only once the
    // offsets passed; with it, everything is read in the one pass.
    let (print, bad_offset, bad_col) = if fingerprint {
        let s = scan_pattern(
            nrows,
            ncols,
            row_offsets,
            col_indices,
            decreases,
            out_of_range,
        );
        (Some(s.fingerprint), s.bad_offset, Some(s.bad_col))
    } else {
        (None, first_position(nrows, decreases), None)
    };
    if let Some(i) = bad_offset {
        invalid!(
            "rowOffsets decrease at row {i}: rowOffsets[{i}] = {} > rowOffsets[{}] = {}",
            row_offsets[i].to_i64(),
            i + 1,
            row_offsets[i + 1].to_i64()
        );
    }
    let last = row_offsets[nrows].to_i64() - b as i64;
    if last != col_indices.len() as i64 {
        invalid!(
            "rowOffsets[{nrows}] - base = {last} but nnz = {}",
            col_indices.len()
        );
    }
    let bad_col = bad_col.unwrap_or_else(|| {
        map_blocks(col_indices.len(), VALIDATE_GRAIN, |r| {
            first_bad(&col_indices[r.clone()], out_of_range).map(|k| r.start + k)
        })
        .into_iter()
        .flatten()
        .min()
    });
    if let Some(k) = bad_col {
        invalid!(
            "colInd[{k}] = {} is out of range for {ncols} columns (index base {b})",
            col_indices[k].to_i64()
        );
    }
    Ok(print)
}

/// An owned CSR matrix, as returned by [`crate::spgemm`].
#[derive(Clone, Debug, PartialEq)]
pub struct CsrMatrix<T, I = i32, J = I> {
    nrows: usize,
    ncols: usize,
    row_offsets: Vec<I>,
    col_indices: Vec<J>,
    values: Vec<T>,
    base: IndexBase,
}

impl<T: Scalar, I: Index, J: Index> CsrMatrix<T, I, J> {
    /// Checks the parts (as [`CsrView::try_new`]) and takes ownership.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] on a malformed structure.
    pub fn try_from_parts(
        nrows: usize,
        ncols: usize,
        row_offsets: Vec<I>,
        col_indices: Vec<J>,
        values: Vec<T>,
        base: IndexBase,
    ) -> Result<Self> {
        CsrView::try_new(nrows, ncols, &row_offsets, &col_indices, &values, base)?;
        Ok(CsrMatrix {
            nrows,
            ncols,
            row_offsets,
            col_indices,
            values,
            base,
        })
    }

    /// Builds a matrix from a list of `(row, col, value)` triplets (zero-based),
    /// keeping them in the given order within each row (duplicates kept).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when an index is out of range or a size does
    /// not fit the index types.
    pub fn from_triplets(
        nrows: usize,
        ncols: usize,
        triplets: &[(usize, usize, T)],
        base: IndexBase,
    ) -> Result<Self> {
        let b = base.offset();
        let mut counts = vec![0usize; nrows + 1];
        for (k, &(r, c, _)) in triplets.iter().enumerate() {
            if r >= nrows || c >= ncols {
                invalid!("triplet {k} = ({r}, {c}) is out of range for {nrows} x {ncols}");
            }
            counts[r + 1] += 1;
        }
        for i in 0..nrows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut cols = vec![J::default(); triplets.len()];
        let mut vals = vec![T::zero(); triplets.len()];
        let to_j = |v: usize| {
            J::try_from_usize(v).ok_or_else(|| {
                Error::InvalidValue(format!("index {v} does not fit the index type"))
            })
        };
        for &(r, c, v) in triplets {
            cols[next[r]] = to_j(c + b)?;
            vals[next[r]] = v;
            next[r] += 1;
        }
        let offsets = counts
            .iter()
            .map(|&o| {
                I::try_from_usize(o + b).ok_or_else(|| {
                    Error::InvalidValue(format!("offset {o} does not fit the index type"))
                })
            })
            .collect::<Result<Vec<I>>>()?;
        Self::try_from_parts(nrows, ncols, offsets, cols, vals, base)
    }

    pub(crate) fn from_parts_unchecked(
        nrows: usize,
        ncols: usize,
        row_offsets: Vec<I>,
        col_indices: Vec<J>,
        values: Vec<T>,
        base: IndexBase,
    ) -> Self {
        CsrMatrix {
            nrows,
            ncols,
            row_offsets,
            col_indices,
            values,
            base,
        }
    }

    /// A borrowed view.
    pub fn view(&self) -> CsrView<'_, T, I, J> {
        CsrView::from_checked(
            self.nrows,
            self.ncols,
            &self.row_offsets,
            &self.col_indices,
            &self.values,
            self.base,
        )
    }
    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.col_indices.len()
    }
    /// The index base.
    pub fn base(&self) -> IndexBase {
        self.base
    }
    /// Row offsets.
    pub fn row_offsets(&self) -> &[I] {
        &self.row_offsets
    }
    /// Column indices.
    pub fn col_indices(&self) -> &[J] {
        &self.col_indices
    }
    /// Values.
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// Mutable values (the pattern stays fixed).
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.values
    }
    /// Splits into `(row_offsets, col_indices, values)`.
    pub fn into_parts(self) -> (Vec<I>, Vec<J>, Vec<T>) {
        (self.row_offsets, self.col_indices, self.values)
    }
}

/// Caller-owned output arrays of a product (the C API's `copy` target).
///
/// `row_offsets` must hold `nrows + 1` entries; `col_indices` and `values`
/// exactly nnz(C) entries. With `beta != 0` the numeric phase reads `values`
/// before overwriting them.
#[derive(Debug)]
pub struct CsrOutput<'a, T, I, J> {
    /// Receives C's row offsets (with C's index base).
    pub row_offsets: Option<&'a mut [I]>,
    /// Receives C's column indices, sorted within each row (in any order
    /// with [`ColumnOrder::Any`]).
    pub col_indices: Option<&'a mut [J]>,
    /// Receives C's values.
    pub values: Option<&'a mut [T]>,
    /// The index base C's row offsets and columns are written with.
    pub base: IndexBase,
    /// With `values` alone: C's sorted columns (with `base`) exactly as an
    /// earlier call of this plan wrote them. On products large enough for
    /// it, the numeric phase then sums the products in a dense accumulator
    /// and reads each row's values at these columns instead of finding the
    /// row's columns again (the reuse flow's `reuse_compute`, whose C ABI
    /// checks the structure's fingerprint first); a product whose column is
    /// not in its row, a column listed twice or reached by no product is
    /// INVALID_VALUE, never a write elsewhere. Columns whose fingerprint
    /// and base equal those the plan's last `write_structure` wrote are
    /// trusted as C's structure (as the C ABI trusts its checked ones):
    /// only their range is checked, which skips counting each column's
    /// products (docs/behaviour.md, "When input is checked"). The values
    /// always follow the plan's structure.
    pub pattern: Option<&'a [J]>,
    /// The order of the columns within each row: honoured when the columns
    /// and the values are written together, sorted otherwise (see
    /// [`ColumnOrder`]).
    pub column_order: ColumnOrder,
    /// C's values kept in two arrays instead of `values`, each row split
    /// between them ([`SplitValues`]); only with `pattern` and nothing else
    /// (see [`CsrOutput::split_values_on_pattern`]).
    pub split_values: Option<SplitValues<'a, T, I>>,
}

/// C's values kept in two arrays, each row of C split between them: row
/// `i`'s first `first_offsets[i + 1] - first_offsets[i]` values (in C's
/// column order) at `first[first_offsets[i]..]`, the rest at
/// `second[second_offsets[i]..]`. This is how a distributed matrix keeps a
/// rank's rows (PETSc's MPIAIJ: the diagonal and off-diagonal blocks;
/// hypre's ParCSR: `diag` and `offd`) when C's columns are numbered with
/// the rank's own columns first: the numeric phase then writes the blocks'
/// values in place, with no copy of C. The offsets have C's index base,
/// increase, and split every row exactly (the two lengths add up to the
/// row's nnz); each array holds at least its last offset's entries.
#[derive(Debug)]
pub struct SplitValues<'a, T, I> {
    /// Row offsets of the first block (`nrows + 1`, with C's index base).
    pub first_offsets: &'a [I],
    /// The first block's values.
    pub first: &'a mut [T],
    /// Row offsets of the second block (`nrows + 1`, with C's index base).
    pub second_offsets: &'a [I],
    /// The second block's values.
    pub second: &'a mut [T],
}

impl<'a, T, I, J> CsrOutput<'a, T, I, J> {
    /// All three arrays of C (cuSPARSE's `copy`).
    pub fn full(
        row_offsets: &'a mut [I],
        col_indices: &'a mut [J],
        values: &'a mut [T],
        base: IndexBase,
    ) -> Self {
        CsrOutput {
            row_offsets: Some(row_offsets),
            col_indices: Some(col_indices),
            values: Some(values),
            base,
            pattern: None,
            column_order: ColumnOrder::Sorted,
            split_values: None,
        }
    }

    /// The same output with C's columns in `order` within each row.
    pub fn with_column_order(self, order: ColumnOrder) -> Self {
        CsrOutput {
            column_order: order,
            ..self
        }
    }

    /// Only C's values, on a structure written earlier (cuSPARSE's
    /// `reuse_compute`).
    pub fn values_only(values: &'a mut [T], base: IndexBase) -> Self {
        CsrOutput {
            row_offsets: None,
            col_indices: None,
            values: Some(values),
            base,
            pattern: None,
            column_order: ColumnOrder::Sorted,
            split_values: None,
        }
    }

    /// Only C's values, on the structure an earlier call wrote into
    /// `col_indices` (with `base`) for the same plan: the products are added
    /// into these known positions (see [`CsrOutput::pattern`]).
    pub fn values_on_pattern(values: &'a mut [T], col_indices: &'a [J], base: IndexBase) -> Self {
        CsrOutput {
            row_offsets: None,
            col_indices: None,
            values: Some(values),
            base,
            pattern: Some(col_indices),
            column_order: ColumnOrder::Sorted,
            split_values: None,
        }
    }

    /// [`CsrOutput::values_on_pattern`] with C's values written into two
    /// arrays, each row split between them ([`SplitValues`]), instead of
    /// one. With `beta != 0` the values are read from there first.
    pub fn split_values_on_pattern(
        split: SplitValues<'a, T, I>,
        col_indices: &'a [J],
        base: IndexBase,
    ) -> Self {
        CsrOutput {
            row_offsets: None,
            col_indices: None,
            values: None,
            base,
            pattern: Some(col_indices),
            column_order: ColumnOrder::Sorted,
            split_values: Some(split),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of both validations, which must agree.
    fn check(offsets: &[i32], cols: &[i32], nrows: usize, ncols: usize, base: IndexBase) -> String {
        let fused = validate_and_fingerprint(nrows, ncols, offsets, cols, base);
        match validate_structure(nrows, ncols, offsets, cols, base) {
            Err(Error::InvalidValue(m)) => {
                assert!(
                    matches!(&fused, Err(Error::InvalidValue(f)) if *f == m),
                    "{fused:?}"
                );
                m
            }
            other => panic!("expected INVALID_VALUE, got {other:?}"),
        }
    }

    #[test]
    fn the_fused_validation_returns_the_fingerprint() {
        use crate::plan::fingerprint::pattern_fingerprint;
        // Blocks of 2^16 entries: a bad entry in the second block, the
        // first entry of a block, and a row offset that decreases across
        // a block boundary are all found.
        let n = (1usize << 17) + 5;
        let offsets: Vec<i32> = (0..=n as i32).collect();
        let cols: Vec<i32> = (0..n as i32).map(|k| k % 7).collect();
        let z = IndexBase::Zero;
        let print = validate_and_fingerprint(n, 7, &offsets, &cols, z).unwrap();
        assert_eq!(print, pattern_fingerprint(n, 7, &offsets, &cols));
        for k in [0, 1 << 16, (1 << 16) + 3, n - 1] {
            let mut bad = cols.clone();
            bad[k] = 7;
            bad[n - 1] = 9;
            let m = check(&offsets, &bad, n, 7, z);
            let first = k.min(n - 1);
            assert!(m.starts_with(&format!("colInd[{first}] = ")), "{m}");
        }
        let mut down = offsets.clone();
        down[1 << 16] -= 2;
        let m = check(&down, &cols, n, 7, z);
        assert!(
            m.contains(&format!("decrease at row {}", (1 << 16) - 1)),
            "{m}"
        );
    }

    #[test]
    fn every_malformed_structure_is_named() {
        let z = IndexBase::Zero;
        assert!(check(&[0, 1], &[0], 2, 2, z).contains("expected rows + 1 = 3"));
        assert!(
            check(&[1, 1, 1], &[], 2, 2, z).contains("rowOffsets[0] = 1 but the index base is 0")
        );
        assert!(check(&[0, 2, 1], &[0, 1], 2, 2, z).contains("rowOffsets decrease at row 1"));
        assert!(
            check(&[0, 1, 1], &[0, 1], 2, 2, z).contains("rowOffsets[2] - base = 1 but nnz = 2")
        );
        let m = check(&[0, 1, 2], &[0, 9], 2, 8, z);
        assert!(
            m.contains("colInd[1] = 9 is out of range for 8 columns"),
            "{m}"
        );
        assert!(check(&[0, 1, 1], &[-1], 2, 2, z).contains("colInd[0] = -1"));
        // One-based: column 0 is out of range, column ncols is in range.
        assert!(check(&[1, 2, 2], &[0], 2, 2, IndexBase::One).contains("colInd[0] = 0"));
        assert!(validate_structure(2, 2, &[1i32, 2, 2], &[2i32], IndexBase::One).is_ok());
        assert!(validate_structure(0, 0, &[0i32], &[] as &[i32], z).is_ok());
    }

    #[test]
    fn values_must_match_columns() {
        let r = CsrView::<f64, i32>::try_new(1, 2, &[0, 1], &[0], &[], IndexBase::Zero);
        assert!(matches!(r, Err(Error::InvalidValue(m)) if m.contains("values has 0 entries")));
    }

    #[test]
    fn columns_must_fit_their_type() {
        let r = validate_structure(
            1,
            i32::MAX as usize + 1,
            &[1i32, 1],
            &[] as &[i32],
            IndexBase::One,
        );
        assert!(matches!(r, Err(Error::InvalidValue(m)) if m.contains("do not fit")));
    }
}
