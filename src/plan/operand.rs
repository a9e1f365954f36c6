//! `op(X)` in a form whose rows can be walked: the caller's arrays for
//! `op = N`, an internal transposed pattern for `op = T / C`.

use crate::csr::CsrView;
use crate::error::{ensure_memory_for, try_reserve, try_vec, Error, Result};
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
    /// True when both patterns are the same arrays read the same way (a
    /// product of a pattern with itself, as A·A).
    pub fn same_arrays(&self, other: &Self) -> bool {
        (self.nrows, self.ncols, self.base) == (other.nrows, other.ncols, other.base)
            && std::ptr::eq(self.offsets, other.offsets)
            && std::ptr::eq(self.cols, other.cols)
    }

    /// True when every row lists strictly increasing columns (sorted, no
    /// duplicates): the merge-based kernels and the single-entry fast path
    /// need it. O(nnz), parallel.
    ///
    /// Each block of rows is read flat: the positions where a column does
    /// not exceed the one before it (a vectorised count over the block's
    /// columns) must all be first entries of rows (a pass over the block's
    /// row offsets). Row by row, the short rows of stencils and meshes
    /// cost a loop set-up each (stencil2d_5pt_725: 2.2 ms one thread).
    pub fn rows_canonical(&self) -> bool {
        const BLOCK: usize = 1 << 14;
        crate::parallel::map_blocks(self.nrows, BLOCK, |rows| self.block_canonical(rows))
            .into_iter()
            .all(|canonical| canonical)
    }

    /// [`RowPattern::rows_canonical`] for the rows `rows` alone, in one
    /// thread.
    pub fn block_canonical(&self, rows: std::ops::Range<usize>) -> bool {
        let start = self.offsets[rows.start].as_usize() - self.base;
        let end = self.offsets[rows.end].as_usize() - self.base;
        let cols = &self.cols[start..end];
        let descents: usize = cols
            .iter()
            .zip(cols.iter().skip(1))
            .map(|(x, y)| usize::from(y <= x))
            .sum();
        if descents == 0 {
            return true;
        }
        // Descents at the first entry of a row (several empty rows share
        // one position; it is counted once).
        let mut at_row_starts = 0usize;
        let mut last = start;
        for o in &self.offsets[rows.start + 1..rows.end] {
            let p = o.as_usize() - self.base;
            if p > last && p < end {
                at_row_starts += usize::from(cols[p - start] <= cols[p - start - 1]);
                last = p;
            }
        }
        descents == at_row_starts
    }
}

/// A pattern rusparse builds for `op(X)` (zero-based): the transpose, or
/// a pattern with its inner dimension renumbered (see
/// [`OperandPattern::pair`]), with the permutation that maps each of its
/// entries to the source entry so values can be gathered again for every
/// numeric phase (the reuse API changes values).
#[derive(Debug, Clone)]
pub struct OwnedPattern<I, J> {
    offsets: Vec<I>,
    cols: Vec<J>,
    source: Vec<I>,
}

/// How `op(X)` is walked by rows.
#[derive(Debug, Clone)]
pub struct OperandPattern<I, J> {
    op: Op,
    /// The shape of `op(x)`.
    nrows: usize,
    ncols: usize,
    /// The shape of the pattern [`OperandPattern::rows`] walks: that of
    /// `op(x)` unless the inner dimension was renumbered.
    walked: (usize, usize),
    /// `None`: the caller's arrays are walked as they are.
    owned: Option<OwnedPattern<I, J>>,
}

/// An inner dimension at least this long is renumbered (see
/// [`OperandPattern::pair`]) when it is also more than
/// [`RENUMBER_INNER_RATIO`] times the operands' entries together.
pub const RENUMBER_INNER_FROM: usize = 1 << 16;
/// See [`RENUMBER_INNER_FROM`].
pub const RENUMBER_INNER_RATIO: usize = 4;

/// True when `op(A) * op(B)` with inner dimension `k` renumbers it: only
/// when op(B) is transposed (so its rows would be rusparse's to make, one
/// offset per inner index) and `k` dwarfs the entries.
pub fn renumbers_inner(k: usize, nnz_a: usize, nnz_b: usize, op_b: Op) -> bool {
    op_b.transposes()
        && k >= RENUMBER_INNER_FROM
        && k / RENUMBER_INNER_RATIO > nnz_a.saturating_add(nnz_b)
}

impl<I: Index, J: Index> OperandPattern<I, J> {
    /// Prepares `op(x)`. For `op = T / C` this builds the transposed pattern
    /// (O(nnz + ncols) time; ncols + 1 offsets and 2·nnz indices of memory).
    ///
    /// # Errors
    /// [`Error::NotSupported`] when `x` has more rows than its column-index
    /// type can hold (they become column indices); [`Error::AllocFailed`].
    pub fn new<T: Scalar>(x: &CsrView<'_, T, I, J>, op: Op) -> Result<Self> {
        let (nrows, ncols) = Self::shape(x, op);
        let owned = if op.transposes() {
            Some(transpose_pattern(x)?)
        } else {
            None
        };
        Ok(OperandPattern {
            op,
            nrows,
            ncols,
            walked: (nrows, ncols),
            owned,
        })
    }

    /// Prepares `op(a)` and `op(b)` for the product `op(a) * op(b)`, after
    /// checking that the inner dimensions agree.
    ///
    /// A transposed `b` whose inner dimension `k` is huge beside the
    /// entries (see [`renumbers_inner`]: a hypersparse operand, say 2^31
    /// columns and a thousand entries) would need `k + 1` row offsets for
    /// `op(b)`. Instead only the inner indices where `b` has entries become
    /// rows of `op(b)`, numbered in increasing order, and `op(a)` keeps only
    /// the entries in those columns, renumbered alike. The entries dropped
    /// meet empty rows of `op(b)`, so C is unchanged (the same entries, in
    /// the same order), and memory and time are O(nnz · log nnz) instead of
    /// O(k).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the inner dimensions differ; as
    /// [`OperandPattern::new`].
    pub fn pair<T: Scalar>(
        a: &CsrView<'_, T, I, J>,
        op_a: Op,
        b: &CsrView<'_, T, I, J>,
        op_b: Op,
    ) -> Result<(Self, Self)> {
        let (m, k, n) = Self::product_shape(a, op_a, b, op_b)?;
        if !renumbers_inner(k, a.nnz(), b.nnz(), op_b) {
            return Ok((Self::new(a, op_a)?, Self::new(b, op_b)?));
        }
        let (keys, owned_b) = transpose_present_columns(b)?;
        let pa = Self::new(a, op_a)?;
        let source_a = pa.owned.as_ref().map(|t| t.source.as_slice());
        let owned_a = keep_inner_columns(&pa.rows(a), source_a, &keys)?;
        let d = keys.len();
        Ok((
            OperandPattern {
                op: op_a,
                nrows: m,
                ncols: k,
                walked: (m, d),
                owned: Some(owned_a),
            },
            OperandPattern {
                op: op_b,
                nrows: k,
                ncols: n,
                walked: (d, n),
                owned: Some(owned_b),
            },
        ))
    }

    /// Bytes [`OperandPattern::pair`] will allocate (saturating), so a
    /// caller can check a whole step before starting it.
    pub fn pair_bytes_needed<T: Scalar>(
        a: &CsrView<'_, T, I, J>,
        op_a: Op,
        b: &CsrView<'_, T, I, J>,
        op_b: Op,
    ) -> u64 {
        let (m, k) = Self::shape(a, op_a);
        let nb = b.nnz() as u64;
        let a_bytes = Self::bytes_needed(a, op_a);
        if !renumbers_inner(k, a.nnz(), b.nnz(), op_b) {
            return a_bytes.saturating_add(Self::bytes_needed(b, op_b));
        }
        // B: the sorted entries (three words each), the keys (a word
        // each) and its pattern; A: its own pattern and the renumbered copy.
        let b_bytes = nb
            .saturating_mul(24 + 8)
            .saturating_add(transposed_bytes::<I, J>(b.nnz(), b.nnz()));
        let a_copy = transposed_bytes::<I, J>(a.nnz(), m);
        b_bytes.saturating_add(a_bytes).saturating_add(a_copy)
    }

    /// `(m, k, n)` of `op(a) * op(b)`: op(a) is m × k and op(b) k × n.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the inner dimensions differ.
    pub fn product_shape<T: Scalar>(
        a: &CsrView<'_, T, I, J>,
        op_a: Op,
        b: &CsrView<'_, T, I, J>,
        op_b: Op,
    ) -> Result<(usize, usize, usize)> {
        let (m, k) = Self::shape(a, op_a);
        let (kb, n) = Self::shape(b, op_b);
        if k != kb {
            return Err(Error::InvalidValue(format!(
                "inner dimensions differ: op(A) is {m} x {k} but op(B) is {kb} x {n}"
            )));
        }
        Ok((m, k, n))
    }

    /// The shape of `op(x)`.
    pub fn shape<T: Scalar>(x: &CsrView<'_, T, I, J>, op: Op) -> (usize, usize) {
        if op.transposes() {
            (x.ncols(), x.nrows())
        } else {
            (x.nrows(), x.ncols())
        }
    }

    /// Bytes [`OperandPattern::new`] will allocate for `op(x)` (0 for
    /// `op = N`), so a caller can check a whole step before starting it.
    pub fn bytes_needed<T: Scalar>(x: &CsrView<'_, T, I, J>, op: Op) -> u64 {
        if op.transposes() {
            transposed_bytes::<I, J>(x.nnz(), x.ncols())
        } else {
            0
        }
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
    /// Its inner dimension (columns of op(A), rows of op(B)) is smaller
    /// than `op(x)`'s when [`OperandPattern::pair`] renumbered it.
    pub fn rows<'a, T: Scalar>(&'a self, x: &CsrView<'a, T, I, J>) -> RowPattern<'a, I, J> {
        match &self.owned {
            None => RowPattern {
                nrows: self.walked.0,
                ncols: self.walked.1,
                offsets: x.row_offsets(),
                cols: x.col_indices(),
                base: x.base().offset(),
            },
            Some(t) => RowPattern {
                nrows: self.walked.0,
                ncols: self.walked.1,
                offsets: &t.offsets,
                cols: &t.cols,
                base: 0,
            },
        }
    }

    /// The values of `op(x)` in the order of [`OperandPattern::rows`]:
    /// borrowed when the caller's arrays are walked, gathered (and
    /// conjugated for `op = C`) into `scratch` otherwise. O(nnz).
    ///
    /// # Errors
    /// [`Error::AllocFailed`].
    pub fn values<'a, T: Scalar>(
        &self,
        x: &CsrView<'a, T, I, J>,
        scratch: &'a mut Vec<T>,
    ) -> Result<&'a [T]> {
        self.values_of(x.values(), scratch)
    }

    /// [`OperandPattern::values`] of the matrix this was built from, its
    /// values given as `src` (one per stored entry, in its order).
    ///
    /// # Errors
    /// [`Error::AllocFailed`].
    pub fn values_of<'a, T: Scalar>(
        &self,
        src: &'a [T],
        scratch: &'a mut Vec<T>,
    ) -> Result<&'a [T]> {
        let Some(t) = &self.owned else {
            return Ok(src);
        };
        scratch.clear();
        try_reserve(scratch, t.source.len(), "gathered operand values")?;
        if self.op == Op::C {
            scratch.extend(t.source.iter().map(|&s| src[s.as_usize()].conj()));
        } else {
            scratch.extend(t.source.iter().map(|&s| src[s.as_usize()]));
        }
        Ok(scratch)
    }

    /// Whether [`OperandPattern::rows`] are the matrix's own rows as stored
    /// (no transpose nor renumbering): its values are then read in place.
    pub fn walks_stored(&self) -> bool {
        self.owned.is_none()
    }

    /// Values [`OperandPattern::values`] gathers for each numeric phase (0
    /// when the caller's arrays are walked as they are).
    pub fn gathered_values_len(&self) -> usize {
        self.owned.as_ref().map_or(0, |t| t.source.len())
    }

    /// Bytes held by this operand's internal pattern.
    pub fn memory_bytes(&self) -> usize {
        self.owned.as_ref().map_or(0, |t| {
            t.offsets.len() * std::mem::size_of::<I>()
                + t.cols.len() * std::mem::size_of::<J>()
                + t.source.len() * std::mem::size_of::<I>()
        })
    }
}

/// A transposed operand's rows become column indices: they must fit `J`.
fn check_rows_fit_columns<T: Scalar, I: Index, J: Index>(x: &CsrView<'_, T, I, J>) -> Result<()> {
    if x.nrows() as u64 > J::MAX {
        return Err(Error::NotSupported(format!(
            "a transposed operand with {} rows needs column indices wider than {}",
            x.nrows(),
            J::INDEX_TYPE.name()
        )));
    }
    Ok(())
}

/// Bytes of the transposed pattern of a matrix with `nnz` entries and
/// `ncols` columns (saturating).
fn transposed_bytes<I, J>(nnz: usize, ncols: usize) -> u64 {
    let entry = (std::mem::size_of::<J>() + std::mem::size_of::<I>()) as u64;
    (ncols as u64)
        .saturating_add(1)
        .saturating_mul(std::mem::size_of::<I>() as u64)
        .saturating_add((nnz as u64).saturating_mul(entry))
}

/// Counting sort of the entries by column: O(nnz + ncols), stable, so each
/// transposed row lists its entries by increasing source row.
///
/// Memory: one array of `ncols + 1` offsets of `I` (used as the scatter
/// cursor too) and two of nnz, all checked against the memory left before
/// the first is made. A wide operand (few entries, 2^31 columns) needs its
/// offsets whatever the algorithm, since its columns become rows.
fn transpose_pattern<T: Scalar, I: Index, J: Index>(
    x: &CsrView<'_, T, I, J>,
) -> Result<OwnedPattern<I, J>> {
    check_rows_fit_columns(x)?;
    let b = x.base().offset();
    let (nnz, ncols) = (x.nnz(), x.ncols());
    ensure_memory_for(transposed_bytes::<I, J>(nnz, ncols), "a transposed operand")?;
    // nnz fits I because x's own offsets hold nnz + base, so every count
    // and offset below does.
    let mut offsets = try_vec(ncols + 1, I::default(), "transposed row offsets")?;
    let bump = |o: &mut I| *o = I::from_usize_unchecked(o.as_usize() + 1);
    for &c in x.col_indices() {
        bump(&mut offsets[c.to_usize() - b + 1]);
    }
    // offsets[j + 1] becomes the end of row j, which is where row j + 1 starts.
    let mut end = 0;
    for o in &mut offsets[1..] {
        end += o.as_usize();
        *o = I::from_usize_unchecked(end);
    }
    // Scatter with offsets[j] as row j's cursor: afterwards offsets[j] is
    // the end of row j, and one shift puts the starts back.
    let mut cols = try_vec(nnz, J::default(), "transposed column indices")?;
    let mut source = try_vec(nnz, I::default(), "transpose permutation")?;
    for i in 0..x.nrows() {
        for k in x.row_range(i) {
            let cursor = &mut offsets[x.col_indices()[k].to_usize() - b];
            let p = cursor.as_usize();
            bump(cursor);
            cols[p] = J::from_usize_unchecked(i);
            source[p] = I::from_usize_unchecked(k);
        }
    }
    offsets.copy_within(..ncols, 1);
    offsets[0] = I::default();
    Ok(OwnedPattern {
        offsets,
        cols,
        source,
    })
}

/// Sorts `(column, entry, row)` triples by column, then entry, in parallel
/// (serially inside [`crate::parallel::serially`]); not generic, so
/// rayon's sort is compiled once.
fn sort_by_column(entries: &mut [(usize, usize, usize)]) {
    use rayon::slice::ParallelSliceMut;
    if crate::parallel::is_serial() {
        entries.sort_unstable_by_key(|&(c, k, _)| (c, k));
    } else {
        entries.par_sort_unstable_by_key(|&(c, k, _)| (c, k));
    }
}

/// The transpose of `x` restricted to its non-empty columns: the sorted
/// distinct (zero-based) columns of `x`, and a pattern whose row `r` is
/// column `keys[r]` of `x` (entries by increasing source row, as
/// [`transpose_pattern`] lists them). O(nnz · log nnz), nothing per column.
fn transpose_present_columns<T: Scalar, I: Index, J: Index>(
    x: &CsrView<'_, T, I, J>,
) -> Result<(Vec<usize>, OwnedPattern<I, J>)> {
    check_rows_fit_columns(x)?;
    let b = x.base().offset();
    let nnz = x.nnz();
    // (column, entry, row), sorted by column then entry: entries of one
    // column come out by increasing row, since entries follow the rows.
    let mut entries = Vec::new();
    try_reserve(&mut entries, nnz, "sorted operand entries")?;
    for i in 0..x.nrows() {
        entries.extend(
            x.row_range(i)
                .map(|k| (x.col_indices()[k].to_usize() - b, k, i)),
        );
    }
    sort_by_column(&mut entries);
    let (mut keys, mut offsets) = (Vec::new(), Vec::new());
    try_reserve(&mut keys, nnz, "inner indices")?;
    try_reserve(&mut offsets, nnz + 1, "transposed row offsets")?;
    let mut cols = try_vec(nnz, J::default(), "transposed column indices")?;
    let mut source = try_vec(nnz, I::default(), "transpose permutation")?;
    for (p, &(c, k, i)) in entries.iter().enumerate() {
        if keys.last() != Some(&c) {
            keys.push(c);
            offsets.push(I::from_usize_unchecked(p));
        }
        cols[p] = J::from_usize_unchecked(i);
        source[p] = I::from_usize_unchecked(k);
    }
    offsets.push(I::from_usize_unchecked(nnz));
    Ok((
        keys,
        OwnedPattern {
            offsets,
            cols,
            source,
        },
    ))
}

/// The entries of `rows` whose column is one of `keys` (sorted), with the
/// column replaced by its position in `keys`. `source` maps an entry of
/// `rows` to the caller's entry (`None`: the same index). Zero-based.
fn keep_inner_columns<I: Index, J: Index>(
    rows: &RowPattern<'_, I, J>,
    source: Option<&[I]>,
    keys: &[usize],
) -> Result<OwnedPattern<I, J>> {
    let nnz = rows.offsets[rows.nrows].as_usize() - rows.base;
    let mut offsets = try_vec(rows.nrows + 1, I::default(), "renumbered row offsets")?;
    let (mut cols, mut kept) = (Vec::new(), Vec::new());
    try_reserve(&mut cols, nnz, "renumbered columns")?;
    try_reserve(&mut kept, nnz, "renumbered permutation")?;
    for i in 0..rows.nrows {
        for k in rows.range(i) {
            if let Ok(id) = keys.binary_search(&rows.col(k)) {
                cols.push(J::from_usize_unchecked(id));
                kept.push(source.map_or_else(|| I::from_usize_unchecked(k), |s| s[k]));
            }
        }
        offsets[i + 1] = I::from_usize_unchecked(cols.len());
    }
    Ok(OwnedPattern {
        offsets,
        cols,
        source: kept,
    })
}

/// The zero-based offsets and columns of a pattern given as rows of
/// column lists (for tests).
#[cfg(test)]
pub(crate) fn arrays_from_rows(rows: &[Vec<i32>]) -> (Vec<i32>, Vec<i32>) {
    let mut off = vec![0i32];
    let mut cols = Vec::new();
    for r in rows {
        cols.extend_from_slice(r);
        off.push(cols.len() as i32);
    }
    (off, cols)
}

#[cfg(test)]
mod tests {
    use super::arrays_from_rows as pattern;
    use super::RowPattern;
    use proptest::prelude::*;

    /// Row by row, as the definition says.
    fn canonical_by_rows(off: &[i32], cols: &[i32]) -> bool {
        off.windows(2).all(|r| {
            cols[r[0] as usize..r[1] as usize]
                .windows(2)
                .all(|w| w[0] < w[1])
        })
    }

    #[test]
    fn rows_canonical_cases() {
        let cases: [(&[&[i32]], bool); 8] = [
            (&[], true),
            (&[&[], &[]], true),
            (&[&[0, 3, 5], &[1, 2]], true),
            // A row starting at or below the previous row's last column.
            (&[&[4, 5], &[5, 6], &[], &[0]], true),
            (&[&[0, 2, 1]], false),
            (&[&[1, 1]], false),
            (&[&[3], &[], &[2, 2]], false),
            (&[&[0, 1], &[7, 2]], false),
        ];
        for (rows, canonical) in cases {
            let (off, cols) = pattern(&rows.iter().map(|r| r.to_vec()).collect::<Vec<_>>());
            let p = RowPattern::zero_based(&off, &cols, 8);
            assert_eq!(p.rows_canonical(), canonical, "{rows:?}");
        }
    }

    /// One bad row anywhere among blocks of many rows (empty rows, rows
    /// ending above the next row's start) is found; without it the pattern
    /// is canonical.
    #[test]
    fn rows_canonical_across_blocks() {
        let rows: Vec<Vec<i32>> = (0..40_000)
            .map(|i| match i % 5 {
                0 => vec![],
                1 => vec![i % 7],
                _ => vec![i % 3, 10 + i % 4, 20],
            })
            .collect();
        let (off, cols) = pattern(&rows);
        assert!(RowPattern::zero_based(&off, &cols, 32).rows_canonical());
        for bad in [2, 16_383, 16_384, 16_387, 39_999] {
            let mut rows = rows.clone();
            rows[bad] = vec![5, 5];
            let (off, cols) = pattern(&rows);
            assert!(
                !RowPattern::zero_based(&off, &cols, 32).rows_canonical(),
                "row {bad}"
            );
        }
    }

    proptest! {
        #[test]
        fn rows_canonical_matches_rows(rows in proptest::collection::vec(
            proptest::collection::vec(0i32..6, 0..4), 0..40)) {
            let (off, cols) = pattern(&rows);
            let p = RowPattern::zero_based(&off, &cols, 6);
            prop_assert_eq!(p.rows_canonical(), canonical_by_rows(&off, &cols));
        }
    }
}
