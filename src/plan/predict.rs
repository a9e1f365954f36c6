//! A cheap estimate of the compression ratio nprod / nnz(C) from a sample
//! of rows (the idea of seed 000: the errors of a sample's nprod and nnz
//! are correlated, so their ratio is far more accurate than either alone).
//! The full predictor of nnz(C) builds on this later; the algorithm choice
//! uses the ratio now.

use super::{RowPattern, RowWork};
use crate::types::Index;

/// Rows sampled at most (seed 000 uses about min(0.003 M, 300)).
const SAMPLE_ROWS: usize = 300;

/// Stop sampling once this share of all products (1/64, but at least 4096
/// and at most 2^20 products) was looked at, so the sample stays a small
/// part of the product's cost even for small matrices with long rows.
fn sample_budget(total: u64) -> u64 {
    (total / 64).clamp(1 << 12, 1 << 20)
}

/// What a sample of output rows says about the product.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowSample {
    /// nprod / nnz over the sampled rows (1.0 when nothing was sampled).
    pub compression: f64,
    /// Share of the sampled products in rows whose columns are scattered:
    /// the row's column span is more than 1024 columns per entry (so a
    /// dense accumulator touches a new cache line for almost every entry).
    pub scattered: f64,
    /// Average number of rows of B merged per output row, weighted by the
    /// row's products (what the depth of a BRMerge tree costs).
    pub lists: f64,
}

/// A row whose span exceeds this many columns per entry counts as scattered.
const SCATTERED_SPAN_PER_ENTRY: usize = 1024;

/// Samples evenly spaced rows of `a * b`. Deterministic; costs
/// O(sampled products · log).
pub fn sample_rows<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
) -> RowSample {
    let m = a.nrows;
    let mut sample = RowSample {
        compression: 1.0,
        scattered: 0.0,
        lists: 0.0,
    };
    if m == 0 || work.total() == 0 {
        return sample;
    }
    let (mut scattered, mut weighted_lists) = (0u64, 0f64);
    let budget = sample_budget(work.total());
    let step = m.div_ceil(SAMPLE_ROWS).max(1);
    let (mut products, mut distinct) = (0u64, 0u64);
    let mut cols: Vec<usize> = Vec::new();
    for i in (step / 2..m).step_by(step) {
        let p = work.row(i);
        if p == 0 {
            continue;
        }
        if products > 0 && products + p > budget {
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
        if let (Some(first), Some(last)) = (cols.first(), cols.last()) {
            if last - first > SCATTERED_SPAN_PER_ENTRY * cols.len() {
                scattered += p;
            }
        }
        weighted_lists += p as f64 * a.row_len(i) as f64;
    }
    if distinct > 0 {
        sample.compression = products as f64 / distinct as f64;
        sample.scattered = scattered as f64 / products as f64;
        sample.lists = weighted_lists / products as f64;
    }
    sample
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern<'a>(offsets: &'a [i32], cols: &'a [i32], ncols: usize) -> RowPattern<'a, i32, i32> {
        RowPattern::zero_based(offsets, cols, ncols)
    }

    #[test]
    fn identity_compresses_nothing_and_a_dense_product_compresses_by_its_width() {
        let off: Vec<i32> = (0..=8).collect();
        let id_cols: Vec<i32> = (0..8).collect();
        let id = pattern(&off, &id_cols, 8);
        let work = RowWork::new(&id, &id, 1).unwrap();
        let s = sample_rows(&id, &id, &work);
        assert_eq!(s.compression, 1.0);
        assert_eq!(s.lists, 1.0);
        assert_eq!(s.scattered, 0.0);

        let dense_off: Vec<i32> = (0..=8).map(|i| i * 8).collect();
        let dense_cols: Vec<i32> = (0..64).map(|k| k % 8).collect();
        let dense = pattern(&dense_off, &dense_cols, 8);
        let work = RowWork::new(&dense, &dense, 1).unwrap();
        // Every row: 64 products onto 8 columns.
        let s = sample_rows(&dense, &dense, &work);
        assert_eq!(s.compression, 8.0);
        assert_eq!(s.lists, 8.0);
    }

    #[test]
    fn empty_products_give_one() {
        let off = [0i32, 0, 0];
        let e = pattern(&off, &[], 2);
        let work = RowWork::new(&e, &e, 1).unwrap();
        assert_eq!(sample_rows(&e, &e, &work).compression, 1.0);
    }

    #[test]
    fn far_apart_columns_count_as_scattered() {
        // One row of A with two entries; B's rows 0 and 1 hit columns 0 and 5000.
        let a_off = [0i32, 2, 2];
        let a_cols = [0i32, 1];
        let b_off = [0i32, 1, 2];
        let b_cols = [0i32, 5000];
        let a = pattern(&a_off, &a_cols, 2);
        let b = pattern(&b_off, &b_cols, 6000);
        let work = RowWork::new(&a, &b, 1).unwrap();
        let s = sample_rows(&a, &b, &work);
        assert_eq!(s.scattered, 1.0);
        assert_eq!(s.compression, 1.0);
    }
}
