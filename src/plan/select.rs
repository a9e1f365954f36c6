//! The algorithm choice: a simple written-down rule for now (the trained
//! selector of seed 001 replaces it later).
//!
//! The rule, per product (measured on the generated suite and the real
//! matrices of `shared/matrices`, 2-core AMD EPYC, see docs/benchmarks.md):
//! 1. A concrete algorithm asked for is used as asked, except that BRMerge
//!    needs op(B)'s rows sorted without duplicates; on other input the
//!    automatic choice below runs instead.
//! 2. (The dense accumulator's cost per product is one load and one add
//!    with no probing, and its rows come back sorted from the bit map.)
//! 3. Otherwise, when the sampled compression ratio nprod / nnz(C) is at
//!    most [`UPPER_MAX_RATIO`] and op(B)'s rows are canonical,
//!    BRMerge-Upper: nearly every product is its own output entry, so the
//!    temporary C it fills during the symbolic phase is barely larger than
//!    C, and the product reads B once instead of twice.
//! 4. Otherwise, when most sampled products lie in scattered rows (columns
//!    far apart, as in a mesh with random numbering) that merge few rows of
//!    B ([`MERGE_MAX_LISTS`], weighted by products) and op(B)'s rows are
//!    canonical, BRMerge-Precise: a shallow merge tree streams through two
//!    small buffers, while a dense array pays a cache miss per scattered
//!    column and a hash table a probe and a sort. (Measured: a Delaunay mesh
//!    with random numbering runs 1.4x faster merged than dense; stencils in
//!    natural order run 1.1-1.2x faster dense.)
//! 5. Otherwise, when one dense accumulator row (`ncols(B)` values) fits in
//!    [`DENSE_MAX_BYTES`], the dense accumulator.
//! 6. Otherwise hash.

use super::predict::RowSample;
use crate::types::Algorithm;

/// The largest dense accumulator (`ncols(B) * size_of::<T>()` bytes) the
/// automatic choice uses.
pub const DENSE_MAX_BYTES: usize = 8 << 20;

/// The largest sampled compression ratio for which the automatic choice
/// computes C in one pass (BRMerge-Upper).
pub const UPPER_MAX_RATIO: f64 = 1.2;

/// BRMerge-Precise is chosen when output rows merge at most this many rows
/// of B on average (weighted by products): deeper trees cost more passes
/// over the row than a dense accumulator's scattered adds.
pub const MERGE_MAX_LISTS: f64 = 16.0;

/// Share of sampled products in scattered rows above which a product counts
/// as scattered (see [`RowSample::scattered`]).
pub const SCATTERED_SHARE: f64 = 0.5;

/// What the rule looks at.
#[derive(Debug, Clone, Copy)]
pub struct ProductShape {
    /// Columns of op(B) (= of C).
    pub b_cols: usize,
    /// Bytes of one value.
    pub value_bytes: usize,
    /// Whether op(B)'s rows are sorted without duplicates.
    pub b_canonical: bool,
    /// The sampled rows (see [`super::predict`]).
    pub sample: RowSample,
}

/// The concrete algorithm to run for `requested` on a product of `shape`.
pub fn select(requested: Algorithm, shape: &ProductShape) -> Algorithm {
    match requested {
        Algorithm::BrmergePrecise | Algorithm::BrmergeUpper if !shape.b_canonical => {
            automatic(shape)
        }
        r if r.is_concrete() => r,
        _ => automatic(shape),
    }
}

fn automatic(shape: &ProductShape) -> Algorithm {
    let s = &shape.sample;
    if shape.b_canonical && s.compression <= UPPER_MAX_RATIO {
        Algorithm::BrmergeUpper
    } else if shape.b_canonical && s.scattered > SCATTERED_SHARE && s.lists <= MERGE_MAX_LISTS {
        Algorithm::BrmergePrecise
    } else if shape.b_cols.saturating_mul(shape.value_bytes) <= DENSE_MAX_BYTES {
        Algorithm::Dense
    } else {
        Algorithm::Hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(b_cols: usize, b_canonical: bool) -> ProductShape {
        ProductShape {
            b_cols,
            value_bytes: 8,
            b_canonical,
            sample: RowSample {
                compression: 4.0,
                scattered: 0.0,
                lists: 40.0,
            },
        }
    }

    #[test]
    fn concrete_requests_are_honoured_when_they_can_run() {
        for alg in [
            Algorithm::Hash,
            Algorithm::Dense,
            Algorithm::BrmergePrecise,
            Algorithm::BrmergeUpper,
        ] {
            assert_eq!(select(alg, &shape(1 << 30, true)), alg);
        }
    }

    #[test]
    fn brmerge_on_unsorted_input_falls_back() {
        let s = shape(100, false);
        assert_eq!(select(Algorithm::BrmergePrecise, &s), Algorithm::Dense);
        assert_eq!(select(Algorithm::BrmergeUpper, &s), Algorithm::Dense);
    }

    #[test]
    fn automatic_choice_follows_the_width_of_b() {
        let narrow = shape(DENSE_MAX_BYTES / 8, true);
        let wide = shape(DENSE_MAX_BYTES / 8 + 1, true);
        for generic in [Algorithm::Default, Algorithm::Alg1, Algorithm::Alg3] {
            assert_eq!(select(generic, &narrow), Algorithm::Dense);
            assert_eq!(select(generic, &wide), Algorithm::Hash);
        }
    }

    #[test]
    fn low_compression_computes_in_one_pass_when_rows_are_sorted() {
        let mut s = shape(1000, true);
        s.sample.compression = 1.1;
        assert_eq!(select(Algorithm::Default, &s), Algorithm::BrmergeUpper);
        s.b_canonical = false;
        assert_eq!(select(Algorithm::Default, &s), Algorithm::Dense);
        s.b_canonical = true;
        s.sample.compression = 2.0;
        assert_eq!(select(Algorithm::Default, &s), Algorithm::Dense);
    }

    #[test]
    fn scattered_rows_merging_few_lists_use_brmerge() {
        let mut s = shape(1000, true);
        s.sample.lists = 7.0;
        assert_eq!(select(Algorithm::Default, &s), Algorithm::Dense);
        s.sample.scattered = 0.9;
        assert_eq!(select(Algorithm::Default, &s), Algorithm::BrmergePrecise);
        s.sample.lists = 200.0;
        assert_eq!(select(Algorithm::Default, &s), Algorithm::Dense);
        s.sample.lists = 7.0;
        s.b_canonical = false;
        assert_eq!(select(Algorithm::Default, &s), Algorithm::Dense);
    }
}
