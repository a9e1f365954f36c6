//! Random test matrices: a small deterministic generator ([`Rng`]) and the
//! rows of a random sparse matrix ([`random_rows`]: row lengths, columns
//! and values each test chooses), as `CsrMatrix` by [`csr_from_rows`] (the
//! kernel host tests build their own `HostCsr` from the same rows).

use rusparse::{CsrMatrix, Index, IndexBase, Scalar};
use std::collections::HashSet;

/// A small deterministic generator (SplitMix64) for test data.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Which columns a row of [`random_rows`] gets for `len` entries (drawn
/// uniformly below `ncols`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// `len` draws, repeated columns kept.
    Repeats,
    /// `len` draws with the repeats removed: up to `len` distinct columns.
    Deduped,
    /// Exactly `min(len, ncols)` distinct columns.
    Distinct,
    /// `len` distinct columns while that is at most half of `ncols`, else
    /// as [`Pick::Deduped`] (long rows come out shorter than `len`): the
    /// rows the hash kernel tests' bin assertions were written for.
    DistinctOrDeduped,
}

/// The order of a row's columns in [`random_rows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// As picked: random.
    Drawn,
    /// Ascending.
    Sorted,
    /// Random, and never ascending (reversed if the shuffle left a row of
    /// two or more entries in order).
    Unsorted,
}

/// Rows of `len` draws as they come: repeated columns, in random order.
pub const MESSY: (Pick, Order) = (Pick::Repeats, Order::Drawn);

/// Canonical rows: `len` draws sorted, without the repeats.
pub const CANONICAL: (Pick, Order) = (Pick::Deduped, Order::Sorted);

/// The stored rows of a random `nrows x ncols` matrix, each row's
/// `(column, value)` entries in stored order: row `i` has `len(rng, i)`
/// entries, their columns picked by `pick` and in `order` (none when
/// `ncols` is 0), each with `value(rng)`. Build the matrix with [`csr_from_rows`] or the kernel
/// host tests' `HostCsr::from_rows`.
pub fn random_rows<T>(
    rng: &mut Rng,
    nrows: usize,
    ncols: usize,
    (pick, order): (Pick, Order),
    mut len: impl FnMut(&mut Rng, usize) -> usize,
    mut value: impl FnMut(&mut Rng) -> T,
) -> Vec<Vec<(usize, T)>> {
    (0..nrows)
        .map(|i| {
            let n = len(rng, i);
            let mut cols = if ncols == 0 {
                Vec::new()
            } else {
                match pick {
                    Pick::Repeats => draws(rng, n, ncols),
                    Pick::Deduped => deduped(draws(rng, n, ncols)),
                    Pick::Distinct => distinct(rng, n.min(ncols), ncols),
                    Pick::DistinctOrDeduped if 2 * n <= ncols => distinct(rng, n, ncols),
                    Pick::DistinctOrDeduped => deduped(draws(rng, n, ncols)),
                }
            };
            match order {
                Order::Drawn => {}
                Order::Sorted => cols.sort_unstable(),
                Order::Unsorted => {
                    for k in (1..cols.len()).rev() {
                        cols.swap(k, rng.below(k as u64 + 1) as usize);
                    }
                    if cols.len() >= 2 && cols.windows(2).all(|w| w[0] <= w[1]) {
                        cols.reverse();
                    }
                }
            }
            cols.into_iter().map(|c| (c, value(rng))).collect()
        })
        .collect()
}

/// `n` uniform draws below `ncols`.
fn draws(rng: &mut Rng, n: usize, ncols: usize) -> Vec<usize> {
    (0..n).map(|_| rng.below(ncols as u64) as usize).collect()
}

/// `cols` without its repeats (the first of each kept, in order).
fn deduped(mut cols: Vec<usize>) -> Vec<usize> {
    let mut seen = HashSet::new();
    cols.retain(|&c| seen.insert(c));
    cols
}

/// `n <= ncols` distinct columns below `ncols`, a uniform choice in random
/// order: by rejection while `n` is at most half of them (any `ncols`),
/// else the first `n` of a partial shuffle of all of them.
fn distinct(rng: &mut Rng, n: usize, ncols: usize) -> Vec<usize> {
    if 2 * n <= ncols {
        let mut seen = HashSet::new();
        let mut cols = Vec::with_capacity(n);
        while cols.len() < n {
            let c = rng.below(ncols as u64) as usize;
            if seen.insert(c) {
                cols.push(c);
            }
        }
        cols
    } else {
        let mut all: Vec<usize> = (0..ncols).collect();
        for k in 0..n {
            let j = k + rng.below((ncols - k) as u64) as usize;
            all.swap(k, j);
        }
        all.truncate(n);
        all
    }
}

/// The `ncols`-column matrix whose stored rows are `rows` (entries in
/// their order, repeats kept), with index base `base`.
///
/// # Panics
/// When a column is `ncols` or more, or an index does not fit `I` or `J`.
pub fn csr_from_rows<T: Scalar, I: Index, J: Index>(
    ncols: usize,
    rows: &[Vec<(usize, T)>],
    base: IndexBase,
) -> CsrMatrix<T, I, J> {
    let triplets: Vec<(usize, usize, T)> = rows
        .iter()
        .enumerate()
        .flat_map(|(r, row)| row.iter().map(move |&(c, v)| (r, c, v)))
        .collect();
    CsrMatrix::from_triplets(rows.len(), ncols, &triplets, base).expect("a valid matrix")
}
