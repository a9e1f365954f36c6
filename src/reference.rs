//! The obviously correct SpGEMM every test compares against.
//!
//! Not used by any production path: it transposes by building triplets and
//! accumulates each output row in a `BTreeMap`, in the same order as the
//! back ends traverse the products (row of op(A) in stored order, then the
//! row of op(B) in stored order), so integer-valued inputs give exactly the
//! same result and others the same up to rounding of the sum order.

use crate::csr::{CsrMatrix, CsrView};
use crate::error::Result;
use crate::types::{Index, Op, Scalar};
use std::collections::BTreeMap;

/// `op(x)` as zero-based rows of `(col, value)` in stored order.
fn op_rows<T: Scalar, I: Index, J: Index>(
    x: &CsrView<'_, T, I, J>,
    op: Op,
) -> Vec<Vec<(usize, T)>> {
    let b = x.base().offset();
    let (cols, vals) = (x.col_indices(), x.values());
    match op {
        Op::N => (0..x.nrows())
            .map(|i| {
                x.row_range(i)
                    .map(|k| (cols[k].to_usize() - b, vals[k]))
                    .collect()
            })
            .collect(),
        Op::T | Op::C => {
            let mut rows = vec![Vec::new(); x.ncols()];
            for i in 0..x.nrows() {
                for k in x.row_range(i) {
                    let v = if op == Op::C { vals[k].conj() } else { vals[k] };
                    rows[cols[k].to_usize() - b].push((i, v));
                }
            }
            rows
        }
    }
}

/// `C = alpha * op(A) * op(B)` with C's index base equal to A's, sorted
/// columns and no duplicates. Products that cancel to zero stay stored, as
/// in every back end (the pattern is structural).
///
/// # Panics
/// When the inner dimensions of `op(A)` and `op(B)` differ.
///
/// # Errors
/// When nnz(C) does not fit the index types.
pub fn spgemm<T: Scalar, I: Index, J: Index>(
    a: &CsrView<'_, T, I, J>,
    op_a: Op,
    b: &CsrView<'_, T, I, J>,
    op_b: Op,
    alpha: T,
) -> Result<CsrMatrix<T, I, J>> {
    let ra = op_rows(a, op_a);
    let rb = op_rows(b, op_b);
    let ncols_b = if op_b.transposes() {
        b.nrows()
    } else {
        b.ncols()
    };
    let inner_b = rb.len();
    let mut triplets = Vec::new();
    for (i, row) in ra.iter().enumerate() {
        let mut acc: BTreeMap<usize, T> = BTreeMap::new();
        for &(k, av) in row {
            assert!(k < inner_b, "inner dimensions differ");
            for &(j, bv) in &rb[k] {
                *acc.entry(j).or_insert_with(T::zero) += av * bv;
            }
        }
        triplets.extend(acc.into_iter().map(|(j, v)| (i, j, alpha * v)));
    }
    CsrMatrix::from_triplets(ra.len(), ncols_b, &triplets, a.base())
}

/// Sorts each row of `x` by column and sums duplicates, in stored order.
pub fn canonicalize<T: Scalar, I: Index, J: Index>(
    x: &CsrView<'_, T, I, J>,
) -> Result<CsrMatrix<T, I, J>> {
    let b = x.base().offset();
    let mut triplets = Vec::new();
    for i in 0..x.nrows() {
        let mut acc: BTreeMap<usize, T> = BTreeMap::new();
        for k in x.row_range(i) {
            *acc.entry(x.col_indices()[k].to_usize() - b)
                .or_insert_with(T::zero) += x.values()[k];
        }
        triplets.extend(acc.into_iter().map(|(j, v)| (i, j, v)));
    }
    CsrMatrix::from_triplets(x.nrows(), x.ncols(), &triplets, x.base())
}
