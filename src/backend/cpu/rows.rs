//! Pieces every CPU row kernel shares: what a kernel is given (an operand
//! with its values, a chunk of rows, the chunk's piece of C), the output
//! scaling, the error for a row whose size differs from the plan's, and
//! the direct paths for rows of A with one or two entries.

use super::scratch::ScratchPool;
use crate::error::Error;
use crate::plan::{RowPattern, RowWork};
use crate::types::{Index, Scalar};
use std::ops::Range;

/// op(A) or op(B) with its values: `values[k]` is the value of the entry
/// at position `k` of `pattern.cols`. Kernels take it by reference: the
/// pattern is held by value (a few pointers and sizes), so that the
/// compiler knows it does not change while a kernel runs and keeps its
/// fields in registers in the loops (through a second reference it
/// reloads them after every store: 2-8 % more instructions in callgrind).
#[derive(Debug)]
pub(crate) struct Operand<'a, T, I, J> {
    /// The operand's rows.
    pub pattern: RowPattern<'a, I, J>,
    /// One value per stored entry.
    pub values: &'a [T],
}

impl<'a, T, I: Copy, J: Copy> Operand<'a, T, I, J> {
    /// The operand of `pattern`'s rows with `values`.
    pub(crate) fn of(pattern: &RowPattern<'a, I, J>, values: &'a [T]) -> Self {
        Operand {
            pattern: *pattern,
            values,
        }
    }
}

impl<T, I, J> Clone for Operand<'_, T, I, J> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, I, J> Copy for Operand<'_, T, I, J> {}

/// One chunk of rows as every row kernel takes it: the rows, and what the
/// kernel needs to know about them besides the operands.
pub(crate) struct Chunk<'a> {
    /// The chunk's rows of C.
    pub rows: Range<usize>,
    /// Products per row (the size of tables and buffers).
    pub work: &'a RowWork,
    /// Where the chunk takes its workspace from and gives it back to.
    pub scratch: &'a ScratchPool,
    /// Whether every row of op(B) has strictly increasing columns.
    pub b_canonical: bool,
}

impl Chunk<'_> {
    /// Whether the kernels prefetch the rows of B ([`prefetch_rows_of_b`]):
    /// not when consecutive rows read rows of B that follow each other
    /// ([`RowWork::b_rows_in_order`]), which the hardware prefetcher
    /// already streams (one thread, minimum of 15 interleaved runs through
    /// the C ABI: stencil2d_5pt_725 126 -> 109 ms, stencil3d_7pt_100 412 ->
    /// 394 ms; scattered rows lose without it: uniform_r4_200000's
    /// symbolic phase 16 -> 37 ms); nor when op(B) stays in cache anyway
    /// ([`RowWork::b_fits_in_cache`]).
    pub fn prefetch(&self) -> bool {
        !(self.work.b_rows_in_order() || self.work.b_fits_in_cache())
    }
}

/// A chunk's piece of C in the numeric phase.
pub(crate) struct NumericPiece<'a, T, J> {
    /// C's zero-based row offsets (of all rows: the chunk's slices start at
    /// `offsets[rows.start]`).
    pub offsets: &'a [usize],
    /// The chunk's columns of C, when they are written.
    pub cols: Option<&'a mut [J]>,
    /// The chunk's values of C.
    pub vals: &'a mut [T],
    /// α, β and C's index base. A kernel that stores through `vals` in
    /// the same loop as it scales copies it first (else α and β are read
    /// again after every store).
    pub scale: &'a Scale<T>,
    /// False: with `cols` present, each row may be written in any
    /// deterministic order (no sort).
    pub sorted: bool,
}

/// A chunk's piece of C's columns in the symbolic phase.
pub(crate) struct ColumnsPiece<'a, J> {
    /// C's zero-based row offsets (of all rows: `cols` starts at
    /// `offsets[rows.start]`).
    pub offsets: &'a [usize],
    /// The chunk's columns of C.
    pub cols: &'a mut [J],
    /// C's index base.
    pub base: usize,
}

/// α, β and C's index base for the numeric phase.
#[derive(Clone, Copy)]
pub(crate) struct Scale<T> {
    pub alpha: T,
    pub beta: T,
    pub base: usize,
}

impl<T: Scalar> Scale<T> {
    /// `dst = alpha * sum + beta * dst` (the old value is not read when
    /// `beta == 0`, so it may be uninitialised garbage or NaN).
    #[inline(always)]
    pub fn store(&self, dst: &mut T, sum: T) {
        *dst = if self.beta == T::zero() {
            self.alpha * sum
        } else {
            self.alpha * sum + self.beta * *dst
        };
    }

    /// [`Scale::store`] of `sum(x)` into each `dst[p]`, `x` the `p`-th of
    /// `from`, with `beta` tested once for the whole row rather than per
    /// entry (the compiler kept the test inside such loops: a compare and
    /// two branches an entry of C).
    #[inline(always)]
    pub fn store_each<X: Copy>(&self, dst: &mut [T], from: &[X], mut sum: impl FnMut(X) -> T) {
        let alpha = self.alpha;
        if self.beta == T::zero() {
            for (d, &x) in dst.iter_mut().zip(from) {
                *d = alpha * sum(x);
            }
        } else {
            let beta = self.beta;
            for (d, &x) in dst.iter_mut().zip(from) {
                *d = alpha * sum(x) + beta * *d;
            }
        }
    }
}

/// The error for a row whose size differs from the planned one: the
/// pattern of A or B changed in a way the fingerprint did not see.
pub(crate) fn row_mismatch(row: usize, found: usize, expected: usize) -> Error {
    Error::InvalidValue(format!(
        "row {row} of C has {found} entries now but {expected} when the plan was made: \
         the pattern of A or B changed between phases"
    ))
}

/// The error for a row with more columns than its table or buffer allows.
pub(crate) fn too_many_columns(row: usize, limit: usize) -> Error {
    Error::InvalidValue(format!(
        "row {row} of C has more than the {limit} columns its plan allows: \
         the pattern of A or B changed between phases"
    ))
}

/// Where every row of op(B) `b` has one entry (`work` says so: GAMG's
/// tentative prolongator, an aggregation), the entry of its row 0
/// (zero-based): row `r` is entry `origin + r`, found without reading
/// `b`'s offsets.
pub(crate) fn one_entry_rows<I: Index, J: Index>(
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
) -> Option<usize> {
    (work.b_row_length() == Some(1)).then(|| b.offsets[0].as_usize() - b.base)
}

/// When row `i` of `a` has exactly one entry `a_ik`, returns `k`'s position
/// in `a`: C's row is then row `a.col(k)` of B scaled by `a_ik`, already
/// sorted when B's rows are canonical (the DCU study's direct path).
#[inline(always)]
pub(crate) fn single_entry<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    i: usize,
) -> Option<usize> {
    let r = a.range(i);
    (r.end == r.start + 1).then_some(r.start)
}

/// The positions of the two entries of row `i` of A, when it has exactly
/// two.
#[inline(always)]
pub(crate) fn two_entries<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    i: usize,
) -> Option<(usize, usize)> {
    let r = a.range(i);
    (r.end == r.start + 2).then_some((r.start, r.start + 1))
}

/// The number of distinct columns of two rows with strictly increasing
/// columns: a merge that counts the common ones, with no branch on the
/// columns (road networks and meshes' boundaries have many rows of A with
/// two entries, whose few products a dense accumulator spent most of its
/// time setting up and reading back).
#[inline]
pub(crate) fn merged_len<J: Index>(x: &[J], y: &[J]) -> usize {
    let (mut p, mut q, mut common) = (0, 0, 0);
    while p < x.len() && q < y.len() {
        let (c, d) = (x[p], y[q]);
        p += usize::from(c <= d);
        q += usize::from(d <= c);
        common += usize::from(c == d);
    }
    x.len() + y.len() - common
}

/// Row `i` of C for a row of A with two entries, `(row_of_b, factor)`
/// each, as the merge of the two scaled rows of B (canonical), written in
/// increasing columns into `out_vals` (and `out_cols`, when given), which
/// are exactly that row's slices. Each sum is the dense accumulator's bit
/// for bit: from zero, the first entry's product first.
///
/// # Errors
/// The merged row's length differs from the slices' (a pattern that
/// changed since the plan).
#[inline]
pub(crate) fn merge_two_rows<T: Scalar, I: Index, J: Index>(
    b: &Operand<'_, T, I, J>,
    (first, f): (usize, T),
    (second, g): (usize, T),
    i: usize,
    scale: &Scale<T>,
    mut out_cols: Option<&mut [J]>,
    out_vals: &mut [T],
) -> Result<(), Error> {
    let (bp, bv) = (&b.pattern, b.values);
    let (rx, ry) = (bp.range(first), bp.range(second));
    let (xc, xv) = (&bp.cols[rx.clone()], &bv[rx]);
    let (yc, yv) = (&bp.cols[ry.clone()], &bv[ry]);
    let len = out_vals.len();
    let shift = |c: J| J::from_usize_unchecked(c.as_usize() - bp.base + scale.base);
    let (mut p, mut q, mut w) = (0, 0, 0);
    while p < xc.len() && q < yc.len() {
        let (c, d) = (xc[p], yc[q]);
        let (take_x, take_y) = (c <= d, d <= c);
        // Masks, not branches: which row's column comes first is data.
        let sx = (f * xv[p]).zero_unless(take_x);
        let sy = (g * yv[q]).zero_unless(take_y);
        let Some(dst) = out_vals.get_mut(w) else {
            return Err(row_mismatch(i, merged_len(xc, yc), len));
        };
        scale.store(dst, T::zero() + sx + sy);
        if let Some(oc) = out_cols.as_deref_mut() {
            oc[w] = shift(if take_x { c } else { d });
        }
        w += 1;
        p += usize::from(take_x);
        q += usize::from(take_y);
    }
    let (rest, rest_vals, factor, from) = if p < xc.len() {
        (xc, xv, f, p)
    } else {
        (yc, yv, g, q)
    };
    if w + rest.len() - from != len {
        return Err(row_mismatch(i, w + rest.len() - from, len));
    }
    scale.store_each(&mut out_vals[w..], &rest_vals[from..], |v| {
        T::zero() + factor * v
    });
    if let Some(oc) = out_cols {
        shift_cols(&rest[from..], bp.base, scale.base, &mut oc[w..]);
    }
    Ok(())
}

/// Writes row `row_of_b` of B scaled by `factor` as row `i` of C
/// (`out_cols` / `out_vals` are exactly that row's slices). B's rows must
/// be canonical.
#[inline]
pub(crate) fn copy_scaled_row<T: Scalar, I: Index, J: Index>(
    b: &Operand<'_, T, I, J>,
    row_of_b: usize,
    factor: T,
    i: usize,
    scale: &Scale<T>,
    out_cols: Option<&mut [J]>,
    out_vals: &mut [T],
) -> Result<(), Error> {
    let (b, b_vals) = (&b.pattern, b.values);
    let r = b.range(row_of_b);
    if r.len() != out_vals.len() {
        return Err(row_mismatch(i, r.len(), out_vals.len()));
    }
    scale.store_each(out_vals, &b_vals[r.clone()], |v| factor * v);
    if let Some(c) = out_cols {
        copy_cols(b, row_of_b, scale.base, c);
    }
    Ok(())
}

/// Copies the columns of row `row_of_b` of B (shifted to `base`) into `out`,
/// whose length the caller has checked.
#[inline]
pub(crate) fn copy_cols<I: Index, J: Index>(
    b: &RowPattern<'_, I, J>,
    row_of_b: usize,
    base: usize,
    out: &mut [J],
) {
    shift_cols(&b.cols[b.range(row_of_b)], b.base, base, out);
}

/// Copies column indices counted from index base `from` into `out` (as
/// long as `src`), counted from base `to`.
#[inline]
pub(crate) fn shift_cols<J: Index>(src: &[J], from: usize, to: usize, out: &mut [J]) {
    if from == to {
        out.copy_from_slice(src);
    } else {
        for (d, &c) in out.iter_mut().zip(src) {
            *d = J::from_usize_unchecked(c.as_usize() - from + to);
        }
    }
}

/// True when row `i` of A (not the first row of its chunk, `first`) has
/// exactly the columns of row `i - 1`: then row `i` of C has the pattern
/// of row `i - 1` (block matrices such as FEM with several unknowns per
/// node repeat every row pattern). Costs one comparison of the two rows,
/// after a test of their first columns, which tells most rows that differ
/// without a call to `memcmp` (one thread, medians of three interleaved
/// runs: stencil2d_5pt_725 151 -> 145 ms, stencil3d_7pt_60 111 -> 109 ms,
/// fem27_3dof_16 106 -> 98 ms).
#[inline(always)]
pub(crate) fn repeats_previous<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    first: usize,
    i: usize,
) -> bool {
    i > first && {
        let (p, r) = (a.range(i - 1), a.range(i));
        p.len() == r.len()
            && (p.is_empty() || a.cols[p.start] == a.cols[r.start])
            && a.cols[p] == a.cols[r]
    }
}

/// How many rows ahead the row kernels prefetch the rows of B. Interleaved
/// A/B on the 2-core VM, 2 threads, medians of 5-7: uniform_r4_200000
/// 39-47 -> 35-38 ms, delaunay_1048576 736-769 -> 602-711 ms, wiki-Vote and
/// ca-CondMat about 3 % faster, as20000102, luxembourg_osm and
/// fem27_3dof_16 unchanged, stencil2d_5pt_725 (rows of B read in order,
/// which the hardware prefetcher already follows) 0-5 % slower; 4 rows
/// ahead measured the same as 2.
pub(crate) const PREFETCH_AHEAD: usize = 2;

/// Starts loading, without waiting, the rows of B that row `i` of A reads
/// (their columns, and their values when `b_vals` is not empty), so that
/// they are in cache when row `i` is computed after the current one. The
/// rows of B a row of A reads are scattered over B on graphs and random
/// matrices, and each is a cache miss otherwise. Does nothing past the last
/// row, or on targets without a prefetch instruction.
#[inline(always)]
pub(crate) fn prefetch_rows_of_b<T, I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    b_vals: &[T],
    i: usize,
) {
    prefetch_parts_of_b::<true, T, I, J>(a, b, b_vals, i);
}

/// [`prefetch_rows_of_b`], their columns only when `COLUMNS` (a numeric
/// phase replayed at recorded positions reads none).
#[inline(always)]
pub(crate) fn prefetch_parts_of_b<const COLUMNS: bool, T, I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    b_vals: &[T],
    i: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if i < a.nrows {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        for k in a.range(i) {
            let start = b.range(a.col(k)).start;
            if let Some(c) = b.cols.get(start).filter(|_| COLUMNS) {
                // SAFETY: a prefetch only hints the cache; the addresses
                // are those of existing elements.
                unsafe { _mm_prefetch::<_MM_HINT_T0>((c as *const J).cast::<i8>()) };
            }
            if let Some(v) = b_vals.get(start) {
                // SAFETY: as above.
                unsafe { _mm_prefetch::<_MM_HINT_T0>((v as *const T).cast::<i8>()) };
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{merge_two_rows, merged_len, Operand, Scale};
    use crate::plan::RowPattern;
    use std::collections::BTreeMap;

    /// B's rows, one-based (base 1), for the merges below: disjoint,
    /// interleaved, overlapping, nested, empty and single rows.
    const ROWS: [&[i32]; 6] = [
        &[1, 4, 6],
        &[2, 4, 5, 9],
        &[],
        &[4],
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
        &[7, 8],
    ];

    fn b_arrays() -> (Vec<i32>, Vec<i32>, Vec<f64>) {
        let mut offsets = vec![1];
        let mut cols = Vec::new();
        for r in ROWS {
            cols.extend_from_slice(r);
            offsets.push(cols.len() as i32 + 1);
        }
        // Values with distinct bits, and one negative zero.
        let mut vals: Vec<f64> = (0..cols.len()).map(|k| 0.5 + k as f64 * 1.25).collect();
        vals[1] = -0.0;
        (offsets, cols, vals)
    }

    /// B over the arrays of [`b_arrays`]: one-based, 10 columns.
    fn operand<'a>(
        offsets: &'a [i32],
        cols: &'a [i32],
        vals: &'a [f64],
    ) -> Operand<'a, f64, i32, i32> {
        Operand {
            pattern: RowPattern {
                nrows: ROWS.len(),
                ncols: 10,
                offsets,
                cols,
                base: 1,
            },
            values: vals,
        }
    }

    #[test]
    fn merged_rows_equal_accumulated_ones_in_either_base() {
        let (offsets, cols, vals) = b_arrays();
        let b = operand(&offsets, &cols, &vals);
        let (f, g) = (1.5, -0.75);
        for x in 0..ROWS.len() {
            for y in 0..ROWS.len() {
                // The dense accumulator's sums: from zero, x's products first.
                let mut sums = BTreeMap::new();
                for (row, factor) in [(x, f), (y, g)] {
                    let r = b.pattern.range(row);
                    for (&c, &v) in cols[r.clone()].iter().zip(&vals[r]) {
                        *sums.entry(c as usize - 1).or_insert(0.0) += factor * v;
                    }
                }
                let rx = &cols[b.pattern.range(x)];
                let ry = &cols[b.pattern.range(y)];
                assert_eq!(merged_len(rx, ry), sums.len(), "rows {x} and {y}");
                for base in [0usize, 1] {
                    let scale = Scale {
                        alpha: 2.0,
                        beta: 0.0,
                        base,
                    };
                    let (mut out_cols, mut out_vals) =
                        (vec![-7; sums.len()], vec![f64::NAN; sums.len()]);
                    merge_two_rows(
                        &b,
                        (x, f),
                        (y, g),
                        0,
                        &scale,
                        Some(&mut out_cols),
                        &mut out_vals,
                    )
                    .unwrap();
                    let want_cols: Vec<i32> = sums.keys().map(|&c| (c + base) as i32).collect();
                    let want_vals: Vec<u64> = sums.values().map(|&s| (2.0 * s).to_bits()).collect();
                    assert_eq!(out_cols, want_cols, "rows {x} and {y}, base {base}");
                    let got: Vec<u64> = out_vals.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want_vals, "rows {x} and {y}, base {base}");
                    // Values alone (C's columns known), and beta = 1.
                    let keep = Scale {
                        alpha: 1.0,
                        beta: 1.0,
                        base,
                    };
                    let mut again = vec![1.0; sums.len()];
                    merge_two_rows(&b, (x, f), (y, g), 0, &keep, None, &mut again).unwrap();
                    for (a, s) in again.iter().zip(sums.values()) {
                        assert_eq!(*a, s + 1.0);
                    }
                }
            }
        }
    }

    #[test]
    fn a_merged_row_of_another_length_is_refused() {
        let (offsets, cols, vals) = b_arrays();
        let b = operand(&offsets, &cols, &vals);
        let scale = Scale {
            alpha: 1.0,
            beta: 0.0,
            base: 0,
        };
        // Rows 0 and 1 merge into 6 columns: 5 and 7 slots are both wrong,
        // and nothing is written past the slots given.
        for len in [0, 5, 7] {
            let mut out = vec![0.0; len];
            let mut oc = vec![0i32; len];
            let err = merge_two_rows(&b, (0, 1.0), (1, 1.0), 3, &scale, Some(&mut oc), &mut out)
                .unwrap_err();
            assert!(err.to_string().contains("row 3"), "{err}");
        }
    }
}
