//! Cheap features of a product `op(A) * op(B)` for the algorithm selector
//! (seed 001): sizes, row-length statistics of A and B, the distribution of
//! the work per row, the predicted compression ratio, how close A's entries
//! lie to its diagonal, and a coarse density image of A.
//!
//! Everything is read from what planning has already computed (the row
//! patterns, [`RowWork`] and its strata, the [`NnzPrediction`]) plus one
//! pass over the row offsets of A and B (O(rows)) and a sample of at most
//! [`BAND_SAMPLE_ROWS`] rows of A for the diagonal and image features: tens
//! of microseconds to about a millisecond for a million rows.
//! [`planning_features`] adds the planner's cheap prediction; together they
//! cost under 1 % of the SpGEMM on most of the real matrices of
//! `shared/matrices` and at most about 3 % (1 thread, measured as the
//! automatic run against the same algorithm forced).
//!
//! The vector is what a trained model reads; [`FEATURE_NAMES`] names each
//! entry, in order, for the training script and for reports.

use super::predict::{predict_nnz, NnzPrediction, PLANNING_SAMPLING};
use super::row_work::{ENTRY_CLASSES, STRATA};
use super::{RowPattern, RowWork};
use crate::types::Index;
use rayon::prelude::*;

/// Side of the square density image of A (its cells are
/// `IMAGE_SIDE x IMAGE_SIDE` blocks of rows and columns).
pub const IMAGE_SIDE: usize = 4;

/// Rows of A sampled, evenly spaced, for the diagonal and image features
/// (4096 cost up to 4 % of a small product's time, from the image's
/// per-entry divisions; 512 estimate the shares to a few per cent).
pub const BAND_SAMPLE_ROWS: usize = 512;

/// Number of features.
pub const NUM_FEATURES: usize = 20 + IMAGE_SIDE * IMAGE_SIDE;

/// The name of each feature, in [`Features::values`] order.
pub const FEATURE_NAMES: [&str; NUM_FEATURES] = [
    "log2_rows_a",
    "log2_inner",
    "log2_cols_b",
    "log2_nnz_a",
    "log2_nnz_b",
    "mean_row_a",
    "max_row_a",
    "cv_row_a",
    "empty_rows_a",
    "mean_row_b",
    "max_row_b",
    "cv_row_b",
    "log2_nprod",
    "nprod_per_row",
    "max_nprod_over_mean",
    "top_strata_product_share",
    "single_entry_row_product_share",
    "predicted_compression",
    "diagonal_distance",
    "near_diagonal_share",
    "image_00",
    "image_01",
    "image_02",
    "image_03",
    "image_10",
    "image_11",
    "image_12",
    "image_13",
    "image_20",
    "image_21",
    "image_22",
    "image_23",
    "image_30",
    "image_31",
    "image_32",
    "image_33",
];

/// The features of one product (see [`FEATURE_NAMES`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Features {
    /// One value per name of [`FEATURE_NAMES`].
    pub values: [f64; NUM_FEATURES],
}

impl Features {
    /// The value of the feature called `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<f64> {
        FEATURE_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|k| self.values[k])
    }
}

/// Mean, maximum and coefficient of variation (standard deviation over
/// mean, 0 for an empty or all-empty set) of the row lengths of `x`, and
/// its share of empty rows.
fn row_lengths<I: Index, J: Index>(x: &RowPattern<'_, I, J>) -> (f64, f64, f64, f64) {
    if x.nrows == 0 {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let (sum, sum_sq, max, empty) = (0..x.nrows)
        .into_par_iter()
        .with_min_len(1 << 14)
        .map(|i| {
            let l = x.row_len(i) as f64;
            (l, l * l, l, u64::from(l == 0.0))
        })
        .reduce(
            || (0.0, 0.0, 0.0, 0),
            |a, b| (a.0 + b.0, a.1 + b.1, a.2.max(b.2), a.3 + b.3),
        );
    let n = x.nrows as f64;
    let mean = sum / n;
    let var = (sum_sq / n - mean * mean).max(0.0);
    let cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
    (mean, max, cv, empty as f64 / n)
}

/// The planner's prediction (with [`PLANNING_SAMPLING`]) and the features
/// of `a * b`, as the automatic choice computes them (the selector's
/// training data must use the same).
pub fn planning_features<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
) -> (NnzPrediction, Features) {
    let p = predict_nnz(a, b, work, PLANNING_SAMPLING);
    let f = features(a, b, work, &p);
    (p, f)
}

/// Computes the features of `a * b` (both `op`-applied patterns) from the
/// planner's `work` and `prediction`.
pub fn features<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    prediction: &NnzPrediction,
) -> Features {
    let mut v = [0.0f64; NUM_FEATURES];
    let log2 = |x: usize| ((x as f64) + 1.0).log2();
    let nnz_a = a.offsets.get(a.nrows).map_or(0, |o| o.as_usize() - a.base);
    let nnz_b = b.offsets.get(b.nrows).map_or(0, |o| o.as_usize() - b.base);
    v[0] = log2(a.nrows);
    v[1] = log2(a.ncols);
    v[2] = log2(b.ncols);
    v[3] = log2(nnz_a);
    v[4] = log2(nnz_b);
    let (mean_a, max_a, cv_a, empty_a) = row_lengths(a);
    let (mean_b, max_b, cv_b, _) = row_lengths(b);
    (v[5], v[6], v[7], v[8]) = (mean_a, max_a, cv_a, empty_a);
    (v[9], v[10], v[11]) = (mean_b, max_b, cv_b);

    let total = work.total();
    v[12] = ((total as f64) + 1.0).log2();
    let per_row = if a.nrows > 0 {
        total as f64 / a.nrows as f64
    } else {
        0.0
    };
    v[13] = per_row;
    v[14] = if per_row > 0.0 {
        work.max_row() as f64 / per_row
    } else {
        0.0
    };
    // Share of the products in the three highest magnitudes of nprod, and
    // in rows of A with a single entry (copied rows of B).
    let strata = work.strata();
    debug_assert_eq!(strata.len(), STRATA);
    let top = (0..STRATA)
        .rev()
        .find(|&h| strata[h].rows > 0)
        .map(|h| h / ENTRY_CLASSES);
    if let (Some(top), true) = (top, total > 0) {
        let mut top_products = 0u64;
        let mut single = 0u64;
        for (h, s) in strata.iter().enumerate() {
            if h / ENTRY_CLASSES + 2 >= top {
                top_products += s.products;
            }
            if h % ENTRY_CLASSES == 0 {
                single += s.products;
            }
        }
        v[15] = top_products as f64 / total as f64;
        v[16] = single as f64 / total as f64;
    }
    v[17] = prediction.ratio;

    // Diagonal distance and density image from evenly spaced rows of A.
    if a.nrows > 0 && a.ncols > 0 && nnz_a > 0 {
        let step = a.nrows.div_ceil(BAND_SAMPLE_ROWS).max(1);
        let (m, n) = (a.nrows as f64, a.ncols as f64);
        let mut image = [0u64; IMAGE_SIDE * IMAGE_SIDE];
        let (mut distance, mut near, mut entries) = (0.0f64, 0u64, 0u64);
        for i in (step / 2..a.nrows).step_by(step) {
            let r = i as f64 / m;
            let cell_row = (i * IMAGE_SIDE / a.nrows).min(IMAGE_SIDE - 1);
            for k in a.range(i) {
                let c = a.col(k);
                let d = (c as f64 / n - r).abs();
                distance += d;
                near += u64::from(d <= 0.01);
                entries += 1;
                let cell_col = (c * IMAGE_SIDE / a.ncols).min(IMAGE_SIDE - 1);
                image[cell_row * IMAGE_SIDE + cell_col] += 1;
            }
        }
        if entries > 0 {
            let e = entries as f64;
            v[18] = distance / e;
            v[19] = near as f64 / e;
            for (slot, &count) in v[20..].iter_mut().zip(&image) {
                *slot = count as f64 / e;
            }
        }
    }
    Features { values: v }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::predict::{predict_nnz, Sampling};

    fn of(offsets: &[i32], cols: &[i32], ncols: usize) -> Features {
        let a = RowPattern::zero_based(offsets, cols, ncols);
        let work = RowWork::new(&a, &a, 1).unwrap();
        let p = predict_nnz(&a, &a, &work, Sampling::Stratified);
        features(&a, &a, &work, &p)
    }

    #[test]
    fn names_match_values_and_are_unique() {
        let mut names = FEATURE_NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), NUM_FEATURES);
    }

    #[test]
    fn identity_is_diagonal_and_single_entry() {
        let n = 64;
        let off: Vec<i32> = (0..=n).collect();
        let cols: Vec<i32> = (0..n).collect();
        let f = of(&off, &cols, n as usize);
        assert_eq!(f.get("log2_rows_a"), Some(65f64.log2()));
        assert_eq!(f.get("mean_row_a"), Some(1.0));
        assert_eq!(f.get("cv_row_a"), Some(0.0));
        assert_eq!(f.get("empty_rows_a"), Some(0.0));
        assert_eq!(f.get("nprod_per_row"), Some(1.0));
        assert_eq!(f.get("single_entry_row_product_share"), Some(1.0));
        assert_eq!(f.get("predicted_compression"), Some(1.0));
        assert_eq!(f.get("diagonal_distance"), Some(0.0));
        assert_eq!(f.get("near_diagonal_share"), Some(1.0));
        // The image has its mass on the diagonal blocks only.
        for r in 0..IMAGE_SIDE {
            for c in 0..IMAGE_SIDE {
                let want = if r == c { 0.25 } else { 0.0 };
                assert_eq!(f.get(&format!("image_{r}{c}")), Some(want));
            }
        }
    }

    #[test]
    fn a_dense_row_shows_in_the_length_statistics() {
        // Row 0 is full (8 entries), rows 1..8 have one entry each, row 8
        // is empty.
        let mut off = vec![0i32, 8];
        let mut cols: Vec<i32> = (0..8).collect();
        for r in 1..8 {
            cols.push(r);
            off.push(cols.len() as i32);
        }
        off.push(cols.len() as i32);
        let f = of(&off, &cols, 9);
        assert_eq!(f.get("max_row_a"), Some(8.0));
        assert_eq!(f.get("empty_rows_a"), Some(1.0 / 9.0));
        let mean = 15.0 / 9.0;
        assert!((f.get("mean_row_a").unwrap() - mean).abs() < 1e-12);
        assert!(f.get("cv_row_a").unwrap() > 1.0);
        assert!(f.get("max_nprod_over_mean").unwrap() > 1.0);
        let shares: f64 = (0..NUM_FEATURES - 20).map(|k| f.values[20 + k]).sum();
        assert!((shares - 1.0).abs() < 1e-12, "image shares sum to one");
    }

    #[test]
    fn empty_products_have_zero_features_beyond_sizes() {
        let off = [0i32; 4];
        let f = of(&off, &[], 3);
        assert_eq!(f.get("log2_nprod"), Some(0.0));
        assert_eq!(f.get("diagonal_distance"), Some(0.0));
        assert_eq!(f.get("predicted_compression"), Some(1.0));
        assert!(f.values.iter().all(|x| x.is_finite()));
    }
}
