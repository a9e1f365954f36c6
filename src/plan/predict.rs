//! Sampling the output rows of a product (the sampling predictor).
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

use super::row_work::{
    magnitude, stratum_of, PatternShapes, RowShapes, Stratum, ENTRY_CLASSES, MAGNITUDE_BLOCK,
    STRATA,
};
use super::{RowPattern, RowWork};
use crate::parallel::map_blocks;
use crate::types::Index;
use std::convert::Infallible;

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
/// 0.03 to 0.4 % of a SpGEMM where the stratified sampler behind
/// `predict_nnz` costs 0.1 to 0.7 % (above 10^6 products). Neither use
/// needs the stratified sampler's accuracy: the choice compares the
/// compression with coarse thresholds (the trained tree saw the paper's
/// estimate), and BRMerge-Upper grows its buffer when short.
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
/// beyond the budget (except the [`narrow_groups`], pinned by their bounds,
/// which sample one): with fewer, a group of long rows that compress
/// unlike the rest is mispredicted by tens of percent (measured on the
/// real matrices of `shared/matrices`).
const STRATUM_MIN_SAMPLES: u64 = 4;

/// No group of [`Sampling::Stratified`] samples more rows than this. The
/// error of a group's ratio falls as one over the root of its sample, so
/// beyond a thousand rows more samples buy little, while on a matrix of a
/// million rows each costs several cache misses (its rows of A and B lie
/// far from the last sampled row's): on stencil3d_7pt_100 the budget alone
/// would take 3,900 rows of one group, 0.6 % of the SpGEMM's time.
const STRATUM_MAX_SAMPLES: u64 = 1024;

/// The groups that sample a single row ([`narrow_groups`]) may together be
/// off by at most this share of nnz(C).
const NARROW_BOUNDS_SHARE: f64 = 0.05;

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

/// Widest op(B) whose sampled rows are counted on a byte map (one byte per
/// column, 4 MiB at this width) rather than a hash set.
const BYTE_MAP_COUNT_MAX_COLS: usize = 1 << 22;

/// A row whose products reach `ncols / DENSE_ROW_DIVISOR` is counted by
/// summing the whole byte map (eight columns a step) and clearing it with
/// one fill; a sparser row reads back and clears only the bytes it set.
const DENSE_ROW_DIVISOR: usize = 8;

/// Counts one row's distinct columns, reused from row to row: a byte map
/// over op(B)'s columns (allocated at the first row, all zero between
/// rows) when they are at most [`BYTE_MAP_COUNT_MAX_COLS`], otherwise a
/// hash set with open addressing and linear probing, sized to twice the
/// row's products (a power of two).
///
/// The byte map is counted in two branch-free passes over the row's
/// products: the first stores 1 at every column, the second adds each
/// column's byte and stores 0, so a column counts once, at its first
/// product. A store has no load to wait for, where a bit map's
/// test-and-set waits on the word it just wrote (sorted rows of B put
/// neighbouring columns in one word) and mispredicts whether the column is
/// new: 2 to 4 times less time per product on the real matrices of
/// `shared/matrices`.
struct ColumnSet {
    ncols: usize,
    seen: Vec<u8>,
    slots: Vec<usize>,
}

impl ColumnSet {
    const EMPTY: usize = usize::MAX;

    /// A counter for columns `0..ncols` (allocates nothing yet).
    fn new(ncols: usize) -> Self {
        ColumnSet {
            ncols,
            seen: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// The number of distinct columns among the `nprod` that `cols()`
    /// yields (each below `ncols`; `cols` is walked once or twice).
    fn count<It: Iterator<Item = usize>>(&mut self, nprod: usize, cols: impl Fn() -> It) -> u64 {
        if self.ncols <= BYTE_MAP_COUNT_MAX_COLS {
            self.count_on_bytes(nprod, cols)
        } else {
            self.count_on_hash(nprod, cols())
        }
    }

    fn count_on_bytes<It: Iterator<Item = usize>>(
        &mut self,
        nprod: usize,
        cols: impl Fn() -> It,
    ) -> u64 {
        if self.seen.is_empty() {
            self.seen = vec![0u8; self.ncols.max(1)];
        }
        let seen = &mut self.seen;
        cols().for_each(|c| seen[c] = 1);
        if nprod * DENSE_ROW_DIVISOR >= seen.len() {
            // Each byte is 0 or 1: a word's set bits are its set bytes.
            let words = seen.chunks_exact(8);
            let tail: u64 = words.remainder().iter().map(|&x| x as u64).sum();
            let distinct = words
                .map(|w| u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
                .map(|w| w.count_ones() as u64)
                .sum::<u64>()
                + tail;
            seen.fill(0);
            return distinct;
        }
        cols().fold(0u64, |distinct, c| {
            let first = seen[c];
            seen[c] = 0;
            distinct + first as u64
        })
    }

    fn count_on_hash(&mut self, nprod: usize, cols: impl Iterator<Item = usize>) -> u64 {
        let cap = (2 * nprod).next_power_of_two().max(16);
        if self.slots.len() < cap {
            self.slots.resize(cap, Self::EMPTY);
        }
        let slots = &mut self.slots[..cap];
        let shift = 64 - cap.trailing_zeros();
        let mask = cap - 1;
        let mut distinct = 0;
        for c in cols {
            let mut h = ((c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize;
            loop {
                let slot = &mut slots[h];
                if *slot == Self::EMPTY {
                    *slot = c;
                    distinct += 1;
                    break;
                }
                if *slot == c {
                    break;
                }
                h = (h + 1) & mask;
            }
        }
        slots.fill(Self::EMPTY);
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
    set.count(nprod as usize, || {
        a.range(i).flat_map(move |k| {
            b.cols[b.range(a.col(k))]
                .iter()
                .map(move |c| c.as_usize() - b.base)
        })
    })
}

/// The exact nnz of each of `rows` (in parallel).
fn rows_nnz<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    rows: &[usize],
) -> Vec<u64> {
    // A column set per piece: 4 pieces per thread, of 8 rows at least.
    let per_piece = rows
        .len()
        .div_ceil(4 * crate::parallel::current_num_threads())
        .max(8);
    map_blocks(rows.len(), per_piece, |piece| {
        let mut set = ColumnSet::new(b.ncols);
        rows[piece]
            .iter()
            .map(|&i| row_nnz(a, b, i, work.row(i), &mut set))
            .collect::<Vec<u64>>()
    })
    .concat()
}

/// Predicts nnz(C) of `a * b` (both `op`-applied patterns) from a sample of
/// rows; `work` is the product's [`RowWork`]. Deterministic for a given
/// input. Costs the sampled products (about 1/256 of all or 2^14; the
/// stratified sampler's floor of [`STRATUM_MIN_SAMPLES`] rows per group can
/// take more on small matrices with long rows, its cap of
/// [`STRATUM_MAX_SAMPLES`] less on large ones) plus, for
/// [`Sampling::Stratified`], a hash of every row index (the work is read
/// only for rows the hash or their block's magnitudes leave in question).
pub fn predict_nnz<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    work: &RowWork,
    sampling: Sampling,
) -> NnzPrediction {
    let shapes = PatternShapes { a, b };
    let count = |rows: &[usize]| Ok::<_, Infallible>(rows_nnz(a, b, work, rows));
    match predict_nnz_counting(work, sampling, &shapes, b.ncols, count) {
        Ok(p) => p,
        Err(never) => match never {},
    }
}

/// [`predict_nnz`] where the patterns are not at hand (a GPU holds them):
/// `work` holds each row's products (and the strata, for
/// [`Sampling::Stratified`]), `shapes` each row's entries and longest
/// merged row of op(B), `ncols` is op(B)'s width, and `count(rows)` gives
/// the exact nnz of each listed row (rows with products, in increasing
/// order), computed wherever the operands are. A product within the
/// budget is counted whole (`count` gets every row with products). With
/// the same work, shapes and counts it picks the same rows and returns
/// the same prediction as [`predict_nnz`]. Deterministic when `count` is.
///
/// # Errors
/// What `count` returns.
pub fn predict_nnz_counting<E>(
    work: &RowWork,
    sampling: Sampling,
    shapes: &impl RowShapes,
    ncols: usize,
    count: impl FnOnce(&[usize]) -> Result<Vec<u64>, E>,
) -> Result<NnzPrediction, E> {
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
        return Ok(p);
    }
    let budget = (total / PREDICTION_BUDGET_SHARE).max(MIN_PREDICTION_BUDGET);
    if total <= budget {
        let rows: Vec<usize> = (0..work.nrows()).filter(|&i| work.row(i) > 0).collect();
        p.nnz = count(&rows)?.iter().sum();
        p.sampled_rows = rows.len();
        p.sampled_products = total;
    } else {
        match sampling {
            Sampling::UniformRows => uniform_rows(work, &mut p, count)?,
            Sampling::ProductWeighted => product_weighted(work, budget, &mut p, count)?,
            Sampling::Stratified => stratified(work, shapes, ncols, budget, &mut p, count)?,
        }
    }
    p.ratio = if p.nnz > 0 {
        total as f64 / p.nnz as f64
    } else {
        1.0
    };
    Ok(p)
}

/// The paper's estimator over evenly spaced rows (the empty ones among
/// them are not counted: their nnz is 0).
fn uniform_rows<E>(
    work: &RowWork,
    p: &mut NnzPrediction,
    count: impl FnOnce(&[usize]) -> Result<Vec<u64>, E>,
) -> Result<(), E> {
    let m = work.nrows();
    let samples = paper_sample_rows(m);
    let rows: Vec<usize> = (0..samples)
        .map(|k| (2 * k + 1) * m / (2 * samples))
        .collect();
    let with_products: Vec<usize> = rows.iter().copied().filter(|&i| work.row(i) > 0).collect();
    let nnz: u64 = count(&with_products)?.iter().sum();
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
    Ok(())
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
/// `count(rows)` gives the exact nnz of each of `rows` (on whichever
/// device holds the operands).
fn product_weighted<E>(
    work: &RowWork,
    budget: u64,
    p: &mut NnzPrediction,
    count: impl FnOnce(&[usize]) -> Result<Vec<u64>, E>,
) -> Result<(), E> {
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
    let nnz = count(&picked)?;
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
    Ok(())
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

/// An upper bound of a group's nnz: each row holds at most its products
/// and at most every column.
fn upper_bound(s: &Stratum, ncols: usize) -> u64 {
    s.products.min(s.rows.saturating_mul(ncols as u64))
}

/// The groups of [`Sampling::Stratified`] that sample one row instead of
/// [`STRATUM_MIN_SAMPLES`]: those whose nnz is pinned by its bounds (the
/// known lower bound and [`upper_bound`]), chosen by the products they
/// save per unit of bound width, as long as their widths sum to at most
/// [`NARROW_BOUNDS_SHARE`] of the whole product's lower bound (itself at
/// most nnz(C)). Their estimates are kept within their bounds, so together
/// they can be off by no more than that share of nnz(C), and in practice
/// far less: on the real matrices of `shared/matrices` this halved the cost
/// of the sample (orani678: 6.6 % to 2.4 % of its products, whose 8
/// longest rows hold 13 times the columns of C each but nearly all
/// of them) and lowered the mean error (1.29 % to 1.12 %).
/// `planned(rows)` is the sample a group of `rows` rows gets before the
/// floor.
fn narrow_groups(
    strata: &[Stratum; STRATA],
    ncols: usize,
    planned: impl Fn(u64) -> f64,
) -> [bool; STRATA] {
    let mut narrow = [false; STRATA];
    // (bound width, products saved) of each group the floor enlarges.
    let mut candidates: Vec<(usize, u64, f64)> = strata
        .iter()
        .enumerate()
        .filter_map(|(h, s)| {
            let floor = (STRATUM_MIN_SAMPLES as f64).min(s.rows as f64);
            let saved =
                (floor - planned(s.rows).max(1.0)) * s.products as f64 / s.rows.max(1) as f64;
            let width = upper_bound(s, ncols).saturating_sub(s.lower_bound);
            (s.rows > 1 && saved > 0.0).then_some((h, width, saved))
        })
        .collect();
    // Most saved per unit of width first (no width at all: free).
    candidates.sort_by(|x, y| (x.1 as f64 * y.2).total_cmp(&(y.1 as f64 * x.2)));
    let total_lower: u64 = strata.iter().map(|s| s.lower_bound).sum();
    let mut room = NARROW_BOUNDS_SHARE * total_lower as f64;
    for (h, width, _) in candidates {
        if width as f64 <= room {
            room -= width as f64;
            narrow[h] = true;
        }
    }
    narrow
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
/// so one parallel pass over the row indices picks them; `count` then
/// computes their nnz). A group's nnz is its known lower bound (each row's
/// longest merged row of B, summed while counting the work) plus the nnz
/// above that bound, estimated by the sample's ratio of nnz above the bound
/// to products above the bound: only the uncertain part is scaled, which
/// halved the mean error on the real matrices (2.26 % to 1.28 %) at no
/// extra sampling. Every estimate is kept between the group's row count
/// and its [`upper_bound`], bounds that hold for any input. A group whose
/// sample came out empty takes the middle of its bounds when it is one of
/// the [`narrow_groups`], otherwise the plain ratio of all samples.
fn stratified<E>(
    work: &RowWork,
    shapes: &impl RowShapes,
    ncols: usize,
    budget: u64,
    p: &mut NnzPrediction,
    count: impl FnOnce(&[usize]) -> Result<Vec<u64>, E>,
) -> Result<(), E> {
    let plan = StratifiedPlan::new(work.strata(), ncols, budget);
    let picked = plan.pick(work, shapes);
    let rows: Vec<usize> = picked.iter().map(|&(i, _)| i).collect();
    let nnz = count(&rows)?;
    let mut sums = [StratumSample::default(); STRATA];
    for (&(i, h), &z) in picked.iter().zip(&nnz) {
        let s = &mut sums[h];
        s.rows += 1;
        s.products += work.row(i);
        s.lower_bound += shapes.longest_merged(i);
        s.nnz += z;
    }
    let (estimate, exact) = plan.estimate(work.strata(), &sums, ncols);
    p.sampled_rows = rows.len();
    p.sampled_products = sums.iter().map(|s| s.products).sum();
    p.exact = exact;
    p.nnz = estimate.round() as u64;
    Ok(())
}

/// Which rows [`stratified`] samples: per group, the hash threshold under
/// which a row is taken (or the whole group), and per binary magnitude of
/// nprod the same, so most rows are passed over on their hash alone.
struct StratifiedPlan {
    threshold: [u64; STRATA],
    whole: [bool; STRATA],
    narrow: [bool; STRATA],
    /// The largest threshold of the groups of rows with nprod in
    /// `[2^m, 2^(m+1))` that are not taken whole.
    magnitude_threshold: [u64; 64],
    /// Bit m: some group of rows with nprod in `[2^m, 2^(m+1))` is taken
    /// whole.
    whole_magnitudes: u64,
}

impl StratifiedPlan {
    /// Samples per group: c * N^(2/3), scaled so that the expected cost
    /// sum(n_h * mean_h) is the budget; at least STRATUM_MIN_SAMPLES (one
    /// row in a narrow group, or the whole group), at most the whole group
    /// and STRATUM_MAX_SAMPLES.
    fn new(strata: &[Stratum; STRATA], ncols: usize, budget: u64) -> Self {
        let weight = |rows: u64| (rows as f64).powf(2.0 / 3.0);
        let cost: f64 = strata
            .iter()
            .filter(|s| s.rows > 0)
            .map(|s| weight(s.rows) * s.products as f64 / s.rows as f64)
            .sum();
        let c = budget as f64 / cost.max(1.0);
        let narrow = narrow_groups(strata, ncols, |rows| c * weight(rows));
        let mut threshold = [0u64; STRATA];
        let mut whole = [false; STRATA];
        for (h, s) in strata.iter().enumerate() {
            if s.rows == 0 {
                continue;
            }
            let floor = if narrow[h] {
                1.0
            } else {
                STRATUM_MIN_SAMPLES as f64
            };
            let n = (c * weight(s.rows)).clamp(floor, STRATUM_MAX_SAMPLES as f64);
            let prob = n / s.rows as f64;
            whole[h] = prob >= 1.0;
            threshold[h] = (prob.min(1.0) * u64::MAX as f64) as u64;
        }
        let mut magnitude_threshold = [0u64; 64];
        let mut whole_magnitudes = 0u64;
        for h in 0..STRATA {
            let m = h / ENTRY_CLASSES;
            if whole[h] {
                whole_magnitudes |= 1 << m;
            } else {
                magnitude_threshold[m] = magnitude_threshold[m].max(threshold[h]);
            }
        }
        StratifiedPlan {
            threshold,
            whole,
            narrow,
            magnitude_threshold,
            whole_magnitudes,
        }
    }

    /// The sampled rows with their groups, in increasing row order. Most
    /// rows are skipped on their hash alone, without reading their work: a
    /// row can be taken only if its hash is under the largest threshold of
    /// the groups its block holds (by nprod's magnitude) or a group of its
    /// magnitude is taken whole.
    fn pick(&self, work: &RowWork, shapes: &impl RowShapes) -> Vec<(usize, usize)> {
        // Rows in blocks of 16 magnitude blocks, in parallel.
        const BLOCKS: usize = 16;
        let nrows = work.nrows();
        let block_magnitudes = work.block_magnitudes();
        let blocks = map_blocks(block_magnitudes.len(), BLOCKS, |blocks| {
            let mut taken = Vec::new();
            let first = blocks.start;
            for (k, &magnitudes) in block_magnitudes[blocks].iter().enumerate() {
                let block_threshold = (0..64)
                    .filter(|&m| magnitudes >> m & 1 == 1)
                    .map(|m| self.magnitude_threshold[m])
                    .max()
                    .unwrap_or(0);
                let block_whole = magnitudes & self.whole_magnitudes != 0;
                if block_threshold == 0 && !block_whole {
                    continue;
                }
                let start = (first + k) * MAGNITUDE_BLOCK;
                for i in start..(start + MAGNITUDE_BLOCK).min(nrows) {
                    let hash = row_hash(i);
                    let hashed_in = hash < block_threshold;
                    if !hashed_in && !block_whole {
                        continue;
                    }
                    let w = work.row(i);
                    if w == 0 || (!hashed_in && self.whole_magnitudes >> magnitude(w) & 1 == 0) {
                        continue;
                    }
                    let h = stratum_of(w, shapes.entries(i));
                    if self.whole[h] || hash < self.threshold[h] {
                        taken.push((i, h));
                    }
                }
            }
            taken
        });
        blocks.concat()
    }

    /// nnz(C) from the groups' sums over their sampled rows, and whether
    /// every group was taken whole (the estimate is then exact).
    fn estimate(
        &self,
        strata: &[Stratum; STRATA],
        sums: &[StratumSample; STRATA],
        ncols: usize,
    ) -> (f64, bool) {
        let (all_products, all_nnz) = sums
            .iter()
            .fold((0u64, 0u64), |(p, z), s| (p + s.products, z + s.nnz));
        let mut nnz = 0f64;
        let mut exact = true;
        for (h, s) in strata.iter().enumerate() {
            if s.rows == 0 {
                continue;
            }
            let sample = &sums[h];
            if self.whole[h] {
                nnz += sample.nnz as f64;
                continue;
            }
            exact = false;
            // Bounds that hold for every input: each row with products has
            // an entry, and at most its products and every column.
            let (lower, upper) = (s.rows as f64, upper_bound(s, ncols) as f64);
            let estimate = if sample.products > sample.lower_bound
                && sample.nnz >= sample.lower_bound
            {
                // Known part plus the ratio estimate of the rest: each
                // row's nnz is at least its longest row of B
                // (`lower_bound`, summed over the whole group while
                // counting), so only the nnz above it is estimated,
                // from the products above it. (Rows of B with duplicate
                // columns can break the bound; where the sample shows
                // that, the plain ratio below is used.)
                let rest = (s.products - s.lower_bound) as f64;
                let above = (sample.nnz - sample.lower_bound) as f64;
                s.lower_bound as f64 + rest * above / (sample.products - sample.lower_bound) as f64
            } else if self.narrow[h] && sample.rows == 0 {
                // Nothing sampled (the hash took none of its few rows):
                // the middle of its bounds, off by at most half their
                // width.
                (s.lower_bound as f64 + upper) / 2.0
            } else {
                let (sp, sz) = if sample.products > 0 {
                    (sample.products, sample.nnz)
                } else {
                    (all_products.max(1), all_nnz)
                };
                s.products as f64 * sz as f64 / sp as f64
            };
            nnz += estimate.clamp(lower, upper);
        }
        (nnz, exact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern<'a>(offsets: &'a [i32], cols: &'a [i32], ncols: usize) -> RowPattern<'a, i32, i32> {
        RowPattern::zero_based(offsets, cols, ncols)
    }

    use crate::plan::operand::arrays_from_rows as build;

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

    /// The distinct values of `cols` through `set`.
    fn distinct(set: &mut ColumnSet, cols: &[usize]) -> u64 {
        set.count(cols.len(), || cols.iter().copied())
    }

    #[test]
    fn column_sets_count_distinct_values() {
        // Hash table (op(B) too wide for the byte map).
        let mut set = ColumnSet::new(usize::MAX);
        assert_eq!(distinct(&mut set, &[]), 0);
        assert_eq!(distinct(&mut set, &[3, 3, 3, 3, 3]), 1);
        // Many collisions: multiples of a large power of two.
        let cols: Vec<usize> = (0..1000).map(|k| (k % 300) << 40).collect();
        assert_eq!(distinct(&mut set, &cols), 300);
        assert_eq!(distinct(&mut set, &[7, 8, 7]), 2);
        // Byte map (a width that is no multiple of 8), left clear between
        // rows by both ways of counting: dense rows (summed whole) and
        // sparse ones (read back), each followed by the other.
        let n = 1003;
        let mut set = ColumnSet::new(n);
        assert_eq!(distinct(&mut set, &[]), 0);
        let all: Vec<usize> = (0..3000).map(|k| (k * 7) % n).collect();
        assert_eq!(distinct(&mut set, &all), n as u64);
        assert_eq!(distinct(&mut set, &[0, 63, 64, 63]), 3);
        let dense: Vec<usize> = (0..200).map(|k| (k * 7) % 150 + 853).collect();
        assert_eq!(distinct(&mut set, &dense), 150);
        assert_eq!(distinct(&mut set, &[n - 1, n - 1]), 1);
        assert_eq!(distinct(&mut set, &[5]), 1);
        assert_eq!(distinct(&mut set, &all[..125]), 125);
        assert_eq!(distinct(&mut set, &[1000, 1001, 1002, 1000]), 3);
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

    /// Groups whose bounds pin their nnz sample one row, most products
    /// saved per unit of width first, while their widths fit the share of
    /// the product's lower bound; groups the floor does not enlarge, and
    /// groups of one row, are never chosen.
    #[test]
    fn narrow_groups_fit_their_widths_in_the_allowed_share() {
        let group = |rows, products, lower_bound| Stratum {
            rows,
            products,
            lower_bound,
        };
        let mut strata = [Stratum::default(); STRATA];
        // Lower bounds sum to 10,000, so widths may sum to 500.
        strata[0] = group(100, 100, 100); // width 0: free
        strata[1] = group(8, 80_000, 1_000); // 8 rows, ncols 200: width 600
        strata[2] = group(8, 80_000, 1_300); // width 300, saves 30,000
        strata[3] = group(50, 5_000, 4_800); // width 200, saves 300
        strata[4] = group(1, 10_000, 100); // one row: nothing to save
        strata[5] = group(1_000, 10_000, 2_700); // planned above the floor
        let ncols = 200;
        let planned = |rows: u64| if rows >= 1_000 { 10.0 } else { 0.5 };
        let narrow = narrow_groups(&strata, ncols, planned);
        let chosen: Vec<usize> = (0..6).filter(|&h| narrow[h]).collect();
        // Group 2 (100 saved per unit of width) first, then group 1 (50),
        // which no longer fits, then group 3 (1.5), which does
        // (300 + 200 = 500).
        assert_eq!(chosen, vec![0, 2, 3]);
        assert_eq!(upper_bound(&strata[1], ncols), 1_600);
        assert_eq!(upper_bound(&strata[3], ncols), 5_000);
    }

    /// A few long rows that hold every column of C (each merges 100 rows
    /// of B of 512 columns out of 2,048) beside many short rows: the long
    /// rows' nnz lies between 512 (their longest row of B) and 2,048 (every
    /// column), a width within 5 % of the product's lower bound, so their
    /// group samples one row instead of four, and the prediction stays
    /// close.
    #[test]
    fn rows_pinned_by_their_bounds_sample_one_row() {
        let (m, n, b_len, long_len) = (1024usize, 2048usize, 512usize, 100usize);
        let mut state = 11u64;
        let rows: Vec<Vec<i32>> = (0..m)
            .map(|i| {
                let len = if i % 128 == 7 {
                    long_len
                } else {
                    1 + (lcg(&mut state) % 3) as usize
                };
                let mut c: Vec<i32> = (0..len)
                    .map(|_| (lcg(&mut state) % n as u64) as i32)
                    .collect();
                c.sort_unstable();
                c.dedup();
                c
            })
            .collect();
        let (off, cols) = build(&rows);
        let a = pattern(&off, &cols, n);
        // B: row j is a window of 512 consecutive columns (wrapping).
        let brows: Vec<Vec<i32>> = (0..n)
            .map(|j| {
                let mut c: Vec<i32> = (0..b_len).map(|k| ((j * 37 + k) % n) as i32).collect();
                c.sort_unstable();
                c
            })
            .collect();
        let (boff, bcols) = build(&brows);
        let b = pattern(&boff, &bcols, n);
        let work = RowWork::new(&a, &b, 1).unwrap();
        let exact = exact_nnz(&a, &b) as f64;
        let p = predict_nnz(&a, &b, &work, Sampling::Stratified);
        let err = (p.nnz as f64 - exact).abs() / exact;
        assert!(!p.exact);
        assert!(err < 0.02, "error {err}");
        // Each long row has about 51,000 products; four of them alone
        // would be 200,000. The short rows' sample is under 40,000.
        let long_row = work.row(7);
        assert!(long_row > 45_000, "{long_row}");
        assert!(
            p.sampled_products < 2 * long_row + 40_000,
            "{} sampled",
            p.sampled_products
        );
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
