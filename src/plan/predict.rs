//! Sampling the output rows of a product (seed 000).
//!
//! [`predict_nnz`] estimates nnz(C) without computing C. The paper's idea:
//! the errors of a sample's nprod and nnz are correlated, so the sampled
//! compression ratio nprod / nnz is far more accurate than the sampled nnz
//! scaled up. rusparse stratifies the sample ([`Sampling::Stratified`], the
//! default): rows are grouped by their work and their entry count, and each
//! group is sampled and estimated with its own ratio, so the few rows that
//! carry most of the work in a power-law graph are never missed. The
//! paper's uniform row sample ([`Sampling::UniformRows`]) and a sample
//! weighted by work ([`Sampling::ProductWeighted`]) are kept for
//! comparison (`rusparse-bench predict`).
//!
//! The planner uses the prediction for the algorithm choice (the predicted
//! compression is a feature of [`super::select`]) and to size
//! BRMerge-Upper's temporary C.

use super::row_work::{row_lower_bound, stratum_of, ENTRY_CLASSES, STRATA};
use super::{RowPattern, RowWork};
use crate::types::Index;
use rayon::prelude::*;

/// How [`predict_nnz`] picks the rows it computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// The paper's: `min(0.003 M, 300)` evenly spaced rows of A (at least
    /// one), nnz(C) = nprod / (sampled nprod / sampled nnz).
    UniformRows,
    /// Products sampled evenly (rows picked in proportion to their nprod),
    /// rows of at least one step computed exactly, the rest estimated from
    /// the sampled rows' nnz / nprod. Accurate, but on heavy-tailed inputs
    /// most of its cost goes to the long rows.
    ProductWeighted,
    /// rusparse's default: rows grouped by the binary magnitudes of their
    /// nprod and of their entry count in A (the strata [`RowWork`] gathers
    /// while counting: how much work, and how many rows of B it merges,
    /// which is what decides the compression); each group
    /// sampled (every row of a small group) and estimated with its own
    /// ratio, applied above a lower bound known for every row (its longest
    /// merged row of B); samples split between groups in proportion to
    /// `rows^(2/3)`, which minimises the error for the cost when a group's
    /// cost per sample is its mean nprod.
    Stratified,
}

/// The sampler the planner uses for itself (the algorithm choice and
/// BRMerge-Upper's first allocation): the paper's evenly spaced rows, about
/// 0.1 to 0.5 % of a SpGEMM where the stratified sampler behind
/// `predict_nnz` costs 1 to 6 % on small irregular matrices. Neither use
/// needs its accuracy: the choice compares the compression with coarse
/// thresholds, and BRMerge-Upper grows its buffer when short.
pub const PLANNING_SAMPLING: Sampling = Sampling::UniformRows;

/// A prediction of nnz(C) (see [`predict_nnz`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NnzPrediction {
    /// Predicted nnz(C), rounded to the nearest integer (exact when
    /// [`NnzPrediction::exact`]).
    pub nnz: u64,
    /// nprod of the whole product (exact).
    pub nprod: u64,
    /// Predicted compression ratio nprod / nnz(C) (1 when nothing is
    /// multiplied).
    pub ratio: f64,
    /// Distinct rows whose nnz was computed.
    pub sampled_rows: usize,
    /// Products of those rows (the prediction's cost).
    pub sampled_products: u64,
    /// Every row with products was computed: `nnz` is nnz(C).
    pub exact: bool,
}

impl NnzPrediction {
    /// Estimated nnz of a row with `row_nprod` products: `row_nprod /
    /// ratio`, rounded up, at most `row_nprod` and `ncols`.
    pub fn row_estimate(&self, row_nprod: u64, ncols: usize) -> u64 {
        if row_nprod == 0 {
            return 0;
        }
        let e = (row_nprod as f64 / self.ratio).ceil() as u64;
        e.clamp(1, row_nprod.min(ncols as u64).max(1))
    }
}

/// A group of [`Sampling::Stratified`] with at most this many rows is
/// computed whole, and every group samples at least this many rows, even
/// beyond the budget: with fewer, a group of long rows that compress
/// unlike the rest is mispredicted by tens of percent (measured on the
/// real matrices of `shared/matrices`).
const STRATUM_MIN_SAMPLES: u64 = 4;

/// Sampled product positions for [`Sampling::ProductWeighted`], before the
/// budget shrinks them.
const PRODUCT_SAMPLES: u64 = 2048;

/// The fewest sampled positions: below this, rows of a few percent of the
/// products stop counting exactly, which costs more accuracy than their
/// exact computation costs time.
const MIN_PRODUCT_SAMPLES: u64 = 64;

/// At most this share of all products is computed by a prediction (but
/// at least [`MIN_PREDICTION_BUDGET`]); a product this small is computed
/// exactly.
const PREDICTION_BUDGET_SHARE: u64 = 256;
const MIN_PREDICTION_BUDGET: u64 = 1 << 14;

/// The rows the paper samples from `m` rows: `min(0.003 m, 300)`, at least
/// one.
pub fn paper_sample_rows(m: usize) -> usize {
    ((0.003 * m as f64) as usize).clamp(1, 300)
}

/// Widest op(B) whose sampled rows are counted on a bit map (one bit per
/// column, 512 KiB at this width) rather than a hash set: a bit's test and
/// set cost about a third of a hash probe, and the map is cleared through
/// the words a row touched.
const BITMAP_COUNT_MAX_COLS: usize = 1 << 22;

/// Counts one row's distinct columns, reused from row to row: a bit map
/// over op(B)'s columns (allocated at the first row) when they are at most
/// [`BITMAP_COUNT_MAX_COLS`], otherwise a hash set with open addressing and
/// linear probing, sized to twice the row's products (a power of two).
struct ColumnSet {
    ncols: usize,
    bits: Vec<u64>,
    touched: Vec<usize>,
    slots: Vec<usize>,
    /// Slots of `slots` in use for the current row.
    cap: usize,
}

impl ColumnSet {
    const EMPTY: usize = usize::MAX;

    /// A counter for columns `0..ncols` (allocates nothing yet).
    fn new(ncols: usize) -> Self {
        ColumnSet {
            ncols,
            bits: Vec::new(),
            touched: Vec::new(),
            slots: Vec::new(),
            cap: 0,
        }
    }

    /// Whether this counter uses the bit map.
    #[inline(always)]
    fn on_bits(&self) -> bool {
        self.ncols <= BITMAP_COUNT_MAX_COLS
    }

    /// Starts a row of at most `len` values.
    fn begin(&mut self, len: usize) {
        if self.on_bits() {
            if self.bits.is_empty() {
                self.bits = vec![0u64; self.ncols.div_ceil(64).max(1)];
            }
        } else {
            let cap = (2 * len).next_power_of_two().max(16);
            if self.slots.len() < cap {
                self.slots.resize(cap, Self::EMPTY);
            }
            self.cap = cap;
        }
    }

    /// Adds column `c` (below `ncols`) to the row; 1 if it is new.
    #[inline(always)]
    fn insert(&mut self, c: usize) -> u64 {
        if self.on_bits() {
            let (word, bit) = (c / 64, 1u64 << (c % 64));
            let w = &mut self.bits[word];
            if *w & bit != 0 {
                return 0;
            }
            if *w == 0 {
                self.touched.push(word);
            }
            *w |= bit;
            return 1;
        }
        let shift = 64 - self.cap.trailing_zeros();
        let mask = self.cap - 1;
        let mut h = ((c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize;
        loop {
            let slot = &mut self.slots[h];
            if *slot == Self::EMPTY {
                *slot = c;
                return 1;
            }
            if *slot == c {
                return 0;
            }
            h = (h + 1) & mask;
        }
    }

    /// Ends the row, clearing what it set.
    fn end(&mut self) {
        if self.on_bits() {
            for word in self.touched.drain(..) {
                self.bits[word] = 0;
            }
        } else {
            self.slots[..self.cap].fill(Self::EMPTY);
        }
    }

    /// The number of distinct values in `cols` (each below `ncols`), at
    /// most `len` of them.
    #[cfg(test)]
    fn count_distinct(&mut self, len: usize, cols: impl Iterator<Item = usize>) -> u64 {
        self.begin(len);
        let distinct = cols.map(|c| self.insert(c)).sum();
        self.end();
        distinct
    }
}

/// nnz of row `i` of `a * b`: its distinct columns (`set` is reused).
fn row_nnz<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    i: usize,
    nprod: u64,
    set: &mut ColumnSet,
) -> u64 {
    set.begin(nprod as usize);
    let mut distinct = 0;
    for k in a.range(i) {
        for c in &b.cols[b.range(a.col(k))] {
            distinct += set.insert(c.as_usize() - b.base);
        }
    }
    set.end();
    distinct
}

/// The exact nnz of each of `rows` (in parallel).
fn rows_nnz<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    rows: &[usize],
) -> Vec<u64> {
    rows.par_iter()
        .with_min_len(8)
        .map_init(
            || ColumnSet::new(b.ncols),
            |set, &i| row_nnz(a, b, i, work.row(i), set),
        )
        .collect()
}

/// Predicts nnz(C) of `a * b` (both `op`-applied patterns) from a sample of
/// rows; `work` is the product's [`RowWork`]. Deterministic for a given
/// input. Costs the sampled products (about 1/256 of all or 2^14; the
/// stratified sampler's floor of [`STRATUM_MIN_SAMPLES`] rows per group can
/// take more on small matrices with long rows) plus, for
/// [`Sampling::Stratified`], one pass over the rows.
pub fn predict_nnz<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    sampling: Sampling,
) -> NnzPrediction {
    let total = work.total();
    let mut p = NnzPrediction {
        nnz: 0,
        nprod: total,
        ratio: 1.0,
        sampled_rows: 0,
        sampled_products: 0,
        exact: true,
    };
    if total == 0 {
        return p;
    }
    let budget = (total / PREDICTION_BUDGET_SHARE).max(MIN_PREDICTION_BUDGET);
    if total <= budget {
        let rows: Vec<usize> = (0..a.nrows).filter(|&i| work.row(i) > 0).collect();
        p.nnz = rows_nnz(a, b, work, &rows).iter().sum();
        p.sampled_rows = rows.len();
        p.sampled_products = total;
    } else {
        match sampling {
            Sampling::UniformRows => uniform_rows(a, b, work, &mut p),
            Sampling::ProductWeighted => product_weighted(a, b, work, budget, &mut p),
            Sampling::Stratified => stratified(a, b, work, budget, &mut p),
        }
    }
    p.ratio = if p.nnz > 0 {
        total as f64 / p.nnz as f64
    } else {
        1.0
    };
    p
}

/// The paper's estimator over evenly spaced rows.
fn uniform_rows<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    p: &mut NnzPrediction,
) {
    let m = a.nrows;
    let count = paper_sample_rows(m);
    let rows: Vec<usize> = (0..count).map(|k| (2 * k + 1) * m / (2 * count)).collect();
    let nnz: u64 = rows_nnz(a, b, work, &rows).iter().sum();
    let products: u64 = rows.iter().map(|&i| work.row(i)).sum();
    p.sampled_rows = rows.len();
    p.sampled_products = products;
    p.exact = false;
    p.nnz = if nnz == 0 {
        // Only empty rows were sampled: nothing to scale; nprod is the
        // only bound known.
        p.nprod
    } else {
        (p.nprod as f64 * nnz as f64 / products as f64).round() as u64
    };
}

/// Rows picked by `samples` evenly spaced product positions: `(row, hits)`
/// in row order.
fn rows_at_positions(work: &RowWork, samples: u64) -> Vec<(usize, u64)> {
    let mut rows: Vec<(usize, u64)> = Vec::new();
    for k in 0..samples {
        let i = work.row_at_share(k, samples);
        match rows.last_mut() {
            Some((last, hits)) if *last == i => *hits += 1,
            _ => rows.push((i, 1)),
        }
    }
    rows
}

/// Product-weighted sampling: rows at evenly spaced product positions;
/// rows of at least one step (`total / samples` products) count exactly,
/// each other picked row stands for one step of products at its own
/// nnz / nprod. The number of positions halves until the picked rows'
/// products fit `budget`, down to [`MIN_PRODUCT_SAMPLES`].
fn product_weighted<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    budget: u64,
    p: &mut NnzPrediction,
) {
    let total = work.total();
    let cost = |rows: &[(usize, u64)]| rows.iter().map(|&(i, _)| work.row(i)).sum::<u64>();
    let mut samples = PRODUCT_SAMPLES.min(total);
    let mut rows = rows_at_positions(work, samples);
    while samples > MIN_PRODUCT_SAMPLES && cost(&rows) > budget {
        samples /= 2;
        rows = rows_at_positions(work, samples);
    }
    let step = total as f64 / samples as f64;
    let picked: Vec<usize> = rows.iter().map(|&(i, _)| i).collect();
    let nnz = rows_nnz(a, b, work, &picked);
    let (mut exact_nnz, mut exact_products) = (0u64, 0u64);
    let (mut light_ratio_sum, mut light_hits) = (0f64, 0u64);
    for (&(i, hits), &z) in rows.iter().zip(&nnz) {
        let w = work.row(i);
        if w as f64 >= step {
            exact_nnz += z;
            exact_products += w;
        } else {
            light_ratio_sum += hits as f64 * z as f64 / w as f64;
            light_hits += hits;
        }
    }
    let light_products = total - exact_products;
    let light_nnz = if light_hits > 0 {
        light_products as f64 * light_ratio_sum / light_hits as f64
    } else {
        // Every product is in a row computed exactly.
        0.0
    };
    p.sampled_rows = rows.len();
    p.sampled_products = cost(&rows);
    p.exact = light_products == 0;
    p.nnz = exact_nnz + light_nnz.round() as u64;
}

/// Where row `i` falls in `[0, 2^64)` for the sampling decision: the Weyl
/// sequence `i * 2^64 / phi` (one multiplication), whose values spread
/// evenly over the interval for consecutive rows, so a group's rows are
/// taken about evenly spaced through the matrix. On the real matrices of
/// `shared/matrices` this halves the mean error of a pseudo-random choice
/// (rows near each other tend to be alike, and an even spread covers all
/// parts of the matrix); its weak spot, a row structure that repeats with
/// a period lining up with the spacing, was not seen there.
#[inline]
fn row_hash(i: usize) -> u64 {
    (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Sums over the sampled rows of one stratum.
#[derive(Debug, Clone, Copy, Default)]
struct StratumSample {
    rows: u64,
    products: u64,
    nnz: u64,
    lower_bound: u64,
}

/// Stratified sampling (see [`Sampling::Stratified`]): each row of group
/// `h` is taken with probability `n_h / N_h` (a hash of its index decides,
/// so one parallel pass picks and computes them). A group's nnz is its
/// known lower bound (each row's longest merged row of B, summed while
/// counting the work) plus the nnz above that bound, estimated by the
/// sample's ratio of nnz above the bound to products above the bound: only
/// the uncertain part is scaled, which halved the mean error on the real
/// matrices (2.26 % to 1.28 %) at no extra sampling. A group whose sample
/// came out empty takes the plain ratio of all samples.
fn stratified<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    budget: u64,
    p: &mut NnzPrediction,
) {
    let strata = work.strata();
    // Samples per group: c * N^(2/3), scaled so that the expected cost
    // sum(n_h * mean_h) is the budget; at least STRATUM_MIN_SAMPLES (or
    // the whole group), at most the whole group.
    let weight = |rows: u64| (rows as f64).powf(2.0 / 3.0);
    let cost: f64 = strata
        .iter()
        .filter(|s| s.rows > 0)
        .map(|s| weight(s.rows) * s.products as f64 / s.rows as f64)
        .sum();
    let c = budget as f64 / cost.max(1.0);
    let mut threshold = [0u64; STRATA];
    let mut whole = [false; STRATA];
    for (h, s) in strata.iter().enumerate() {
        if s.rows == 0 {
            continue;
        }
        let n = (c * weight(s.rows)).max(STRATUM_MIN_SAMPLES as f64);
        let prob = n / s.rows as f64;
        whole[h] = prob >= 1.0;
        threshold[h] = (prob.min(1.0) * u64::MAX as f64) as u64;
    }
    // Most rows are skipped on their work and hash alone, without reading
    // A: a row can be taken only if its hash is under the largest threshold
    // or a group of its nprod's magnitude is taken whole.
    let any_threshold = (0..STRATA)
        .filter(|&h| !whole[h])
        .map(|h| threshold[h])
        .max()
        .unwrap_or(0);
    // Bit m: some group of rows with nprod in [2^m, 2^(m+1)) is taken whole.
    let whole_magnitudes = (0..STRATA)
        .filter(|&h| whole[h])
        .fold(0u64, |m, h| m | 1 << (h / ENTRY_CLASSES));
    // Rows in blocks, one accumulator per block (not moved per row) and
    // one column counter per rayon job.
    const BLOCK: usize = 4096;
    let sums = (0..a.nrows.div_ceil(BLOCK))
        .into_par_iter()
        .map_init(
            || ColumnSet::new(b.ncols),
            |set, blk| {
                let mut sums = [StratumSample::default(); STRATA];
                for i in blk * BLOCK..((blk + 1) * BLOCK).min(a.nrows) {
                    let w = work.row(i);
                    if w == 0
                        || (row_hash(i) >= any_threshold
                            && whole_magnitudes >> (63 - w.leading_zeros()) & 1 == 0)
                    {
                        continue;
                    }
                    let h = stratum_of(w, a.row_len(i));
                    if whole[h] || row_hash(i) < threshold[h] {
                        let s = &mut sums[h];
                        s.rows += 1;
                        s.products += w;
                        s.lower_bound += row_lower_bound(a, b, i);
                        s.nnz += row_nnz(a, b, i, w, set);
                    }
                }
                sums
            },
        )
        .reduce(
            || [StratumSample::default(); STRATA],
            |mut x, y| {
                for (a, b) in x.iter_mut().zip(y) {
                    a.rows += b.rows;
                    a.products += b.products;
                    a.nnz += b.nnz;
                    a.lower_bound += b.lower_bound;
                }
                x
            },
        );
    let all = sums
        .iter()
        .fold(StratumSample::default(), |acc, s| StratumSample {
            rows: acc.rows + s.rows,
            products: acc.products + s.products,
            nnz: acc.nnz + s.nnz,
            lower_bound: acc.lower_bound + s.lower_bound,
        });
    let mut nnz = 0f64;
    let mut exact = true;
    for (h, s) in strata.iter().enumerate() {
        if s.rows == 0 {
            continue;
        }
        let sample = &sums[h];
        if whole[h] {
            nnz += sample.nnz as f64;
            continue;
        }
        exact = false;
        if sample.products > sample.lower_bound && sample.nnz >= sample.lower_bound {
            // Known part plus the ratio estimate of the rest: each row's
            // nnz is at least its longest row of B (`lower_bound`, summed
            // over the whole group while counting), so only the nnz above
            // it is estimated, from the products above it. (Rows of B with
            // duplicate columns can break the bound; where the sample shows
            // that, the plain ratio below is used.)
            let rest = (s.products - s.lower_bound) as f64;
            let above = (sample.nnz - sample.lower_bound) as f64;
            nnz +=
                s.lower_bound as f64 + rest * above / (sample.products - sample.lower_bound) as f64;
            continue;
        }
        let (sp, sz) = if sample.products > 0 {
            (sample.products, sample.nnz)
        } else {
            (all.products.max(1), all.nnz)
        };
        nnz += s.products as f64 * sz as f64 / sp as f64;
    }
    p.sampled_rows = all.rows as usize;
    p.sampled_products = all.products;
    p.exact = exact;
    p.nnz = nnz.round() as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern<'a>(offsets: &'a [i32], cols: &'a [i32], ncols: usize) -> RowPattern<'a, i32, i32> {
        RowPattern::zero_based(offsets, cols, ncols)
    }

    /// A pattern from rows of column lists (zero-based).
    fn build(rows: &[Vec<i32>]) -> (Vec<i32>, Vec<i32>) {
        let mut off = vec![0i32];
        let mut cols = Vec::new();
        for r in rows {
            cols.extend_from_slice(r);
            off.push(cols.len() as i32);
        }
        (off, cols)
    }

    /// nnz(C) by sorting each row's columns (independent of ColumnSet).
    fn exact_nnz(a: &RowPattern<'_, i32, i32>, b: &RowPattern<'_, i32, i32>) -> u64 {
        let mut total = 0;
        for i in 0..a.nrows {
            let mut cols: Vec<usize> = a
                .range(i)
                .flat_map(|k| b.cols[b.range(a.col(k))].iter().map(|&c| c as usize))
                .collect();
            cols.sort_unstable();
            cols.dedup();
            total += cols.len() as u64;
        }
        total
    }

    #[test]
    fn column_sets_count_distinct_values() {
        // Hash table (op(B) too wide for the bit map).
        let mut set = ColumnSet::new(usize::MAX);
        assert_eq!(set.count_distinct(0, std::iter::empty()), 0);
        assert_eq!(set.count_distinct(5, [3, 3, 3, 3, 3].into_iter()), 1);
        // Many collisions: multiples of a large power of two.
        let cols: Vec<usize> = (0..1000).map(|k| (k % 300) << 40).collect();
        assert_eq!(set.count_distinct(cols.len(), cols.into_iter()), 300);
        assert_eq!(set.count_distinct(3, [7, 8, 7].into_iter()), 2);
        // Bit map, cleared between rows (the same words again, and the
        // last column of the last word).
        let n = 1000;
        let mut set = ColumnSet::new(n);
        assert_eq!(set.count_distinct(0, std::iter::empty()), 0);
        let cols: Vec<usize> = (0..3000).map(|k| (k * 7) % n).collect();
        assert_eq!(set.count_distinct(cols.len(), cols.into_iter()), 1000);
        assert_eq!(set.count_distinct(4, [0, 63, 64, 63].into_iter()), 3);
        assert_eq!(set.count_distinct(2, [n - 1, n - 1].into_iter()), 1);
        assert_eq!(set.count_distinct(1, [5].into_iter()), 1);
    }

    /// A deterministic pseudo-random generator for test patterns.
    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *state >> 33
    }

    #[test]
    fn small_products_are_computed_exactly() {
        let (off, cols) = build(&[vec![0, 2], vec![], vec![1], vec![0, 1, 2]]);
        let a = pattern(&off, &cols, 3);
        let (boff, bcols) = build(&[vec![0, 1], vec![1, 2], vec![2, 0]]);
        let b = pattern(&boff, &bcols, 3);
        let work = RowWork::new(&a, &b, 1).unwrap();
        for sampling in [
            Sampling::UniformRows,
            Sampling::ProductWeighted,
            Sampling::Stratified,
        ] {
            let p = predict_nnz(&a, &b, &work, sampling);
            assert!(p.exact);
            assert_eq!(p.nnz, exact_nnz(&a, &b));
            assert_eq!(p.nprod, work.total());
            assert_eq!(p.sampled_rows, 3);
        }
    }

    #[test]
    fn empty_products_predict_zero() {
        let off = [0i32, 0, 0];
        let e = pattern(&off, &[], 2);
        let work = RowWork::new(&e, &e, 1).unwrap();
        let p = predict_nnz(&e, &e, &work, Sampling::Stratified);
        assert_eq!((p.nnz, p.nprod, p.ratio, p.exact), (0, 0, 1.0, true));
        assert_eq!(p.row_estimate(0, 5), 0);
    }

    /// A power-law product: row lengths of A follow a Zipf law (a few rows
    /// of thousands of entries, most of one or two), and long rows
    /// compress far more than short ones. An evenly spaced row sample
    /// mostly sees short rows; the product-weighted one counts the long
    /// rows exactly.
    #[test]
    fn power_law_rows_are_predicted_closely() {
        let n = 20_000usize;
        let mut state = 7u64;
        let mut rows: Vec<Vec<i32>> = Vec::new();
        for _ in 0..n {
            // Zipf-like lengths in random order: about 4000 / (u + 1)
            // entries for u uniform in 0..2000.
            let len = (4000 / (lcg(&mut state) % 2000 + 1) as usize).max(1);
            let mut c: Vec<i32> = (0..len)
                .map(|_| (lcg(&mut state) % n as u64) as i32)
                .collect();
            c.sort_unstable();
            c.dedup();
            rows.push(c);
        }
        let (off, cols) = build(&rows);
        let a = pattern(&off, &cols, n);
        // B: row j has 8 columns near j, so long rows of A overlap a lot.
        let brows: Vec<Vec<i32>> = (0..n as i32)
            .map(|j| (0..8).map(|k| (j / 16 * 16 + k) % n as i32).collect())
            .collect();
        let (boff, bcols) = build(&brows);
        let b = pattern(&boff, &bcols, n);
        let work = RowWork::new(&a, &b, 1).unwrap();
        let exact = exact_nnz(&a, &b) as f64;
        let stratified = predict_nnz(&a, &b, &work, Sampling::Stratified);
        let weighted = predict_nnz(&a, &b, &work, Sampling::ProductWeighted);
        let uniform = predict_nnz(&a, &b, &work, Sampling::UniformRows);
        let err = |p: &NnzPrediction| (p.nnz as f64 - exact).abs() / exact;
        assert!(!stratified.exact);
        assert!(err(&stratified) < 0.02, "stratified {}", err(&stratified));
        assert!(err(&weighted) < 0.02, "product-weighted {}", err(&weighted));
        assert!(
            err(&uniform) > 2.0 * err(&stratified),
            "uniform {} vs stratified {}",
            err(&uniform),
            err(&stratified)
        );
        assert!(stratified.sampled_products < work.total() / 8);
        // Deterministic.
        assert_eq!(predict_nnz(&a, &b, &work, Sampling::Stratified), stratified);
    }

    #[test]
    fn row_estimates_stay_within_bounds() {
        let p = NnzPrediction {
            nnz: 10,
            nprod: 40,
            ratio: 4.0,
            sampled_rows: 1,
            sampled_products: 40,
            exact: false,
        };
        assert_eq!(p.row_estimate(9, 100), 3);
        assert_eq!(p.row_estimate(1, 100), 1);
        assert_eq!(p.row_estimate(1000, 100), 100);
    }
}
