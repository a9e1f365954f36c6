//! Cheap features of a product `op(A) * op(B)` for the algorithm selector
//! (after the pattern-based selector paper): sizes, row-length statistics
//! of A and B, the distribution of the work per row, the predicted
//! compression ratio, how close A's entries lie to its diagonal, a coarse
//! density image of A, how a dense accumulator's adds fall on cache lines,
//! and BRMerge's merge passes.
//!
//! Everything is read from what planning has already computed (the row
//! patterns, [`RowWork`] and its strata, the [`NnzPrediction`]) plus one
//! integer pass over the row offsets of A and of B (O(rows)), a sample of
//! at most [`BAND_SAMPLE_ROWS`] rows of A for the diagonal and image
//! features, and [`LOCALITY_WINDOWS`] windows of
//! [`LOCALITY_WINDOW_PRODUCTS`] products for the cache-line features: 0.7
//! to 1.7 ms on products of 110,000 to 400,000 rows (1 thread).
//! [`planning_features`] adds the planner's cheap prediction; the automatic
//! run cost 0 to 4 % more than the same algorithm forced on 30 of the 31
//! held-out products of `docs/benchmarks.md`, 7.7 % on luxembourg_osm,
//! when every feature was computed for every choice. The choice now reads
//! [`cheap_features`] first (O(1) from the row work) and computes the rest
//! only when the tree's path reaches one: the committed tree splits on
//! `mean_row_b` alone, so the products it sends to the dense accumulator
//! skip the prediction and the feature passes (luxembourg_osm, 2 threads,
//! minimum of 30: plan 1.17 -> 0.84 ms, the same as with dense asked for;
//! stencil2d_5pt_725 5.4 -> 4.4 ms).
//!
//! The vector is what a trained model reads; [`FEATURE_NAMES`] names each
//! entry, in order, for the training script and for reports.

use super::predict::{predict_nnz, NnzPrediction, PLANNING_SAMPLING};
use super::row_work::{ENTRY_CLASSES, STRATA};
use super::{RowPattern, RowWork};
use crate::parallel::map_blocks;
use crate::types::Index;

/// Side of the square density image of A (its cells are
/// `IMAGE_SIDE x IMAGE_SIDE` blocks of rows and columns).
pub const IMAGE_SIDE: usize = 4;

/// Rows of A sampled, evenly spaced, for the diagonal and image features
/// (4096 cost up to 4 % of a small product's time, from the image's
/// per-entry divisions; 512 estimate the shares to a few per cent).
pub const BAND_SAMPLE_ROWS: usize = 512;

/// Windows of consecutive rows of A, evenly spaced by work, in which
/// [`accumulator_locality`] follows the columns a dense accumulator touches.
pub const LOCALITY_WINDOWS: usize = 8;

/// Products followed per locality window: 4096 adds touch at most 4096
/// cache lines (256 KiB), the scale of a core's L2 cache, so the share of
/// new lines in a window approximates the accumulator's miss rate when it
/// does not fit in cache.
pub const LOCALITY_WINDOW_PRODUCTS: u64 = 4096;

/// Columns per cache line of the accumulator's values (64 bytes of `f64`).
const COLUMNS_PER_LINE: usize = 8;

/// Number of features.
pub const NUM_FEATURES: usize = 20 + IMAGE_SIDE * IMAGE_SIDE + 3;

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
    "window_new_line_share",
    "sample_new_line_share",
    "merge_depth",
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

/// Statistics of the row lengths of a pattern (see [`row_lengths`]).
#[derive(Debug, Default, Clone, Copy)]
struct RowLengths {
    max: f64,
    /// Standard deviation over mean (0 for an empty or all-empty pattern).
    cv: f64,
    /// Share of empty rows.
    empty: f64,
    /// Products-weighted mean of the merge passes per row (0 without work).
    merge_depth: f64,
}

/// Integer sums behind [`RowLengths`] (integers: exact, and cheaper than
/// floating point on a pass that must cost little next to the product).
#[derive(Default, Clone, Copy)]
struct LengthSums {
    sum: u64,
    sum_sq: u128,
    max: u64,
    empty: u64,
    passes: u128,
}

impl LengthSums {
    fn add(self, o: Self) -> Self {
        LengthSums {
            sum: self.sum + o.sum,
            sum_sq: self.sum_sq + o.sum_sq,
            max: self.max.max(o.max),
            empty: self.empty + o.empty,
            passes: self.passes + o.passes,
        }
    }
}

/// The passes of a binary merge tree over `len` sorted lists:
/// ceil(log2(len)), 0 for at most one list.
#[inline(always)]
fn merge_passes(len: u64) -> u64 {
    if len <= 1 {
        0
    } else {
        u64::from(u64::BITS - (len - 1).leading_zeros())
    }
}

/// Row-length statistics of `x`, in one pass over its offsets; with
/// `work` (the products of each row of `x * B`), also the products-weighted
/// mean number of merge passes of BRMerge's tree over each row's rows of B.
fn row_lengths<I: Index, J: Index>(x: &RowPattern<'_, I, J>, work: Option<&RowWork>) -> RowLengths {
    if x.nrows == 0 {
        return RowLengths::default();
    }
    const GRAIN: usize = 1 << 14;
    let sums = map_blocks(x.nrows, GRAIN, |rows| {
        let mut s = LengthSums::default();
        let mut previous = x.offsets[rows.start].as_usize() as u64;
        for (i, end) in rows.clone().zip(&x.offsets[rows.start + 1..=rows.end]) {
            let end = end.as_usize() as u64;
            let l = end - previous;
            previous = end;
            s.sum += l;
            s.sum_sq += u128::from(l) * u128::from(l);
            s.max = s.max.max(l);
            s.empty += u64::from(l == 0);
            if let Some(work) = work {
                s.passes += u128::from(work.row(i) * merge_passes(l));
            }
        }
        s
    })
    .into_iter()
    .fold(LengthSums::default(), LengthSums::add);
    let n = x.nrows as f64;
    let mean = sums.sum as f64 / n;
    let var = (sums.sum_sq as f64 / n - mean * mean).max(0.0);
    let total = work.map_or(0, RowWork::total);
    RowLengths {
        max: sums.max as f64,
        cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
        empty: sums.empty as f64 / n,
        merge_depth: if total > 0 {
            sums.passes as f64 / total as f64
        } else {
            0.0
        },
    }
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

/// The entries of `x`.
fn entries<I: Index, J: Index>(x: &RowPattern<'_, I, J>) -> usize {
    x.offsets.get(x.nrows).map_or(0, |o| o.as_usize() - x.base)
}

/// Whether feature `k` (of [`FEATURE_NAMES`]) is one of the cheap ones
/// that [`cheap_features`] computes.
pub const fn is_cheap(k: usize) -> bool {
    matches!(k, 0..=5 | 9 | 12..=14)
}

/// The features that cost O(1) once the planner's `work` is known (see
/// [`is_cheap`]): the sizes, the mean row lengths of A and B and the
/// products' total, mean and peak per row, each equal to what
/// [`features`] computes; the others are NaN. The automatic choice reads
/// these first and computes the rest (the prediction among them) only when
/// the tree's path reaches one: on the committed tree
/// (`mean_row_b` alone) that spares the prediction and the passes behind
/// the other features of every product the tree sends to the dense
/// accumulator.
pub fn cheap_features<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
) -> Features {
    let mut v = [f64::NAN; NUM_FEATURES];
    let log2 = |x: usize| ((x as f64) + 1.0).log2();
    v[0] = log2(a.nrows);
    v[1] = log2(a.ncols);
    v[2] = log2(b.ncols);
    v[3] = log2(entries(a));
    v[4] = log2(entries(b));
    // The row lengths' sum over the rows, as `row_lengths` adds it up.
    let mean_row = |x: &RowPattern<'_, I, J>| match (x.offsets.first(), x.offsets.get(x.nrows)) {
        (Some(first), Some(last)) if x.nrows > 0 => {
            (last.as_usize() - first.as_usize()) as f64 / x.nrows as f64
        }
        _ => 0.0,
    };
    v[5] = mean_row(a);
    v[9] = mean_row(b);
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
    Features { values: v }
}

/// Computes the features of `a * b` (both `op`-applied patterns) from the
/// planner's `work` and `prediction`.
pub fn features<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    prediction: &NnzPrediction,
) -> Features {
    let mut v = cheap_features(a, b, work).values;
    for (k, x) in v.iter_mut().enumerate() {
        if !is_cheap(k) {
            *x = 0.0;
        }
    }
    let la = row_lengths(a, Some(work));
    // A·A (or a product of one pattern with itself): B's rows are A's.
    let lb = if a.same_arrays(b) {
        la
    } else {
        row_lengths(b, None)
    };
    (v[6], v[7], v[8]) = (la.max, la.cv, la.empty);
    (v[10], v[11]) = (lb.max, lb.cv);

    let total = work.total();
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
    if a.nrows > 0 && a.ncols > 0 && entries(a) > 0 {
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
            for (slot, &count) in v[IMAGE_FIRST..].iter_mut().zip(&image) {
                *slot = count as f64 / e;
            }
        }
    }
    let after_image = IMAGE_FIRST + IMAGE_SIDE * IMAGE_SIDE;
    (v[after_image], v[after_image + 1]) = accumulator_locality(a, b, work);
    v[after_image + 2] = la.merge_depth;
    Features { values: v }
}

/// Index of the first image cell in [`Features::values`].
const IMAGE_FIRST: usize = 20;

/// How the columns of `a * b` fall on a dense accumulator's cache lines:
///
/// - the share of products, in [`LOCALITY_WINDOWS`] windows of about
///   [`LOCALITY_WINDOW_PRODUCTS`] products of consecutive rows of A (evenly
///   spaced by work), that touch an accumulator line ([`COLUMNS_PER_LINE`]
///   columns) not touched before in their window: near 0 for banded and
///   stencil products, whose neighbouring rows reuse the same lines; near 1
///   for scattered columns, where a large accumulator misses on every add;
/// - the same share with a line counted as new only the first time any
///   window touches it: the windows together follow about as many lines as
///   a core's L2 cache holds, so lines that every part of the matrix
///   reuses (the hot columns of power-law graphs, or all lines of a narrow
///   accumulator) count as cached, where scattered columns over a wide
///   accumulator still miss;
///
/// Cost: at most `LOCALITY_WINDOWS * LOCALITY_WINDOW_PRODUCTS` column reads
/// and a bit per accumulator line.
fn accumulator_locality<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
) -> (f64, f64) {
    let total = work.total();
    if total == 0 {
        return (0.0, 0.0);
    }
    let words = (b.ncols / COLUMNS_PER_LINE).div_ceil(64).max(1);
    let (mut in_window, mut in_sample) = (vec![0u64; words], vec![0u64; words]);
    let mut touched: Vec<usize> = Vec::new();
    let (mut window_new, mut sample_new, mut followed) = (0u64, 0u64, 0u64);
    let windows = LOCALITY_WINDOWS as u64;
    for w in 0..windows {
        let mut i = work.row_at_share(w, windows);
        let mut products = 0u64;
        'window: while i < a.nrows {
            for k in a.range(i) {
                for kb in b.range(a.col(k)) {
                    let line = b.col(kb) / COLUMNS_PER_LINE;
                    let (word, bit) = (line / 64, 1u64 << (line % 64));
                    if in_window[word] & bit == 0 {
                        in_window[word] |= bit;
                        touched.push(word);
                        window_new += 1;
                        if in_sample[word] & bit == 0 {
                            in_sample[word] |= bit;
                            sample_new += 1;
                        }
                    }
                    products += 1;
                    if products == LOCALITY_WINDOW_PRODUCTS {
                        break 'window;
                    }
                }
            }
            i += 1;
        }
        followed += products;
        for word in touched.drain(..) {
            in_window[word] = 0;
        }
    }
    let followed = followed.max(1) as f64;
    (window_new as f64 / followed, sample_new as f64 / followed)
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
        let shares: f64 = f.values[IMAGE_FIRST..IMAGE_FIRST + IMAGE_SIDE * IMAGE_SIDE]
            .iter()
            .sum();
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

    /// `rows` rows of `per_row` columns each, column `k` of row `i` given
    /// by `col(i, k)` (sorted and deduplicated per row).
    fn pattern(
        rows: usize,
        per_row: usize,
        col: impl Fn(usize, usize) -> i32,
    ) -> (Vec<i32>, Vec<i32>) {
        let (mut off, mut cols) = (vec![0i32], Vec::new());
        for i in 0..rows {
            let mut row: Vec<i32> = (0..per_row).map(|k| col(i, k)).collect();
            row.sort_unstable();
            row.dedup();
            cols.extend(row);
            off.push(cols.len() as i32);
        }
        (off, cols)
    }

    /// A pseudo-random column in `0..n` for entry `k` of row `i`
    /// (splitmix64's finaliser).
    fn scattered(i: usize, k: usize, n: usize) -> i32 {
        let mut z = (i as u64 * 64 + k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as i32
    }

    #[test]
    fn banded_products_reuse_their_accumulator_lines() {
        let n = 100_000usize;
        let (off, cols) = pattern(n, 3, |i, k| (i + k).saturating_sub(1).min(n - 1) as i32);
        let f = of(&off, &cols, n);
        let window = f.get("window_new_line_share").unwrap();
        let sample = f.get("sample_new_line_share").unwrap();
        assert!(window < 0.05 && sample <= window, "{window} {sample}");
    }

    #[test]
    fn scattered_columns_over_a_wide_accumulator_touch_new_lines() {
        let n = 400_000usize;
        let (off, cols) = pattern(n, 4, |i, k| scattered(i, k, n));
        let f = of(&off, &cols, n);
        let window = f.get("window_new_line_share").unwrap();
        let sample = f.get("sample_new_line_share").unwrap();
        assert!(window > 0.8 && sample > 0.5, "{window} {sample}");
        assert!(sample <= window);
    }

    #[test]
    fn hot_columns_count_as_cached_across_windows() {
        // Every row of A reads scattered rows of B, but all rows of B hold
        // the same 64 columns spread over a wide range: each window
        // touches them anew, the sample only once.
        let n = 200_000usize;
        let (off, cols) = pattern(n, 4, |i, k| scattered(i, k, n));
        let (b_off, b_cols) = pattern(n, 64, |_, k| (k * (n / 64)) as i32);
        let a = RowPattern::zero_based(&off, &cols, n);
        let b = RowPattern::zero_based(&b_off, &b_cols, n);
        let work = RowWork::new(&a, &b, 1).unwrap();
        let p = predict_nnz(&a, &b, &work, Sampling::Stratified);
        let f = features(&a, &b, &work, &p);
        let window = f.get("window_new_line_share").unwrap();
        let sample = f.get("sample_new_line_share").unwrap();
        let followed = (LOCALITY_WINDOWS as u64 * LOCALITY_WINDOW_PRODUCTS) as f64;
        assert_eq!(window, LOCALITY_WINDOWS as f64 * 64.0 / followed);
        assert_eq!(sample, 64.0 / followed);
    }

    /// The cheap features are exactly the full ones at their places
    /// (bit for bit, as the tree compares them), and NaN elsewhere; on
    /// A·B with rows of different lengths, empty rows and an empty
    /// product.
    #[test]
    fn cheap_features_equal_the_full_ones() {
        let n = 3000usize;
        let (a_off, a_cols) = pattern(n, 3, |i, k| ((i * 7 + k * 13) % n) as i32);
        let mut b_off = vec![0i32];
        let mut b_cols = Vec::new();
        for i in 0..n {
            b_cols.extend((0..i % 9).map(|k| ((i + 31 * k) % 500) as i32));
            b_cols[b_off[i] as usize..].sort_unstable();
            b_off.push(b_cols.len() as i32);
        }
        let empty_off = vec![0i32; n + 1];
        for (bo, bc) in [(&b_off, &b_cols), (&empty_off, &Vec::new())] {
            let a = RowPattern::zero_based(&a_off, &a_cols, n);
            let b = RowPattern::zero_based(bo, bc, 500);
            let work = RowWork::new(&a, &b, 4).unwrap();
            let p = predict_nnz(&a, &b, &work, Sampling::Stratified);
            let (full, cheap) = (features(&a, &b, &work, &p), cheap_features(&a, &b, &work));
            for (k, name) in FEATURE_NAMES.iter().enumerate() {
                if is_cheap(k) {
                    assert_eq!(
                        cheap.values[k].to_bits(),
                        full.values[k].to_bits(),
                        "{name}"
                    );
                } else {
                    assert!(cheap.values[k].is_nan(), "{name}");
                }
            }
        }
    }

    #[test]
    fn merge_depth_is_the_work_weighted_merge_passes() {
        // Rows of 4 entries: two merge passes each.
        let n = 1000usize;
        let (off, cols) = pattern(n, 4, |i, k| ((i + 7 * k) % n) as i32);
        assert_eq!(of(&off, &cols, n).get("merge_depth"), Some(2.0));
        // Single-entry rows copy a row of B: no merge.
        let off: Vec<i32> = (0..=n as i32).collect();
        let cols: Vec<i32> = (0..n as i32).collect();
        assert_eq!(of(&off, &cols, n).get("merge_depth"), Some(0.0));
    }
}
