//! A cheap estimate of the compression ratio nprod / nnz(C) from a sample
//! of rows (the idea of seed 000: the errors of a sample's nprod and nnz
//! are correlated, so their ratio is far more accurate than either alone).
//! The full predictor of nnz(C) builds on this later; the algorithm choice
//! uses the ratio now.

use super::{RowPattern, RowWork};
use crate::types::Index;

/// Rows sampled at most (seed 000 uses about min(0.003 M, 300)).
const SAMPLE_ROWS: usize = 300;

/// Stop sampling once this many products were looked at, so a few very
/// long rows cannot make the estimate expensive.
const SAMPLE_PRODUCTS: u64 = 1 << 20;

/// `nprod / nnz` over evenly spaced rows of `a * b` (1.0 when nothing
/// was sampled). Deterministic; costs O(sampled products · log).
pub fn sampled_compression<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
) -> f64 {
    let m = a.nrows;
    if m == 0 || work.total() == 0 {
        return 1.0;
    }
    let step = m.div_ceil(SAMPLE_ROWS).max(1);
    let (mut products, mut distinct) = (0u64, 0u64);
    let mut cols: Vec<usize> = Vec::new();
    for i in (step / 2..m).step_by(step) {
        let p = work.row(i);
        if p == 0 {
            continue;
        }
        if products > 0 && products + p > SAMPLE_PRODUCTS {
            break;
        }
        cols.clear();
        for k in a.range(i) {
            cols.extend(b.cols[b.range(a.col(k))].iter().map(|c| c.as_usize()));
        }
        cols.sort_unstable();
        cols.dedup();
        products += p;
        distinct += cols.len() as u64;
    }
    if distinct == 0 {
        1.0
    } else {
        products as f64 / distinct as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern<'a>(offsets: &'a [i32], cols: &'a [i32], ncols: usize) -> RowPattern<'a, i32, i32> {
        RowPattern {
            nrows: offsets.len() - 1,
            ncols,
            offsets,
            cols,
            base: 0,
        }
    }

    #[test]
    fn identity_compresses_nothing_and_a_dense_product_compresses_by_its_width() {
        let off: Vec<i32> = (0..=8).collect();
        let id_cols: Vec<i32> = (0..8).collect();
        let id = pattern(&off, &id_cols, 8);
        let work = RowWork::new(&id, &id, 1).unwrap();
        assert_eq!(sampled_compression(&id, &id, &work), 1.0);

        let dense_off: Vec<i32> = (0..=8).map(|i| i * 8).collect();
        let dense_cols: Vec<i32> = (0..64).map(|k| k % 8).collect();
        let dense = pattern(&dense_off, &dense_cols, 8);
        let work = RowWork::new(&dense, &dense, 1).unwrap();
        // Every row: 64 products onto 8 columns.
        assert_eq!(sampled_compression(&dense, &dense, &work), 8.0);
    }

    #[test]
    fn empty_products_give_one() {
        let off = [0i32, 0, 0];
        let e = pattern(&off, &[], 2);
        let work = RowWork::new(&e, &e, 1).unwrap();
        assert_eq!(sampled_compression(&e, &e, &work), 1.0);
    }
}
