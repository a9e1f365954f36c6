//! `rusparse::predict_nnz` (the sampling predictor with a stratified
//! sample) on products large enough to be sampled: close to the exact
//! nnz(C), deterministic, the same for op T as for the explicit transpose,
//! and for every index type and base; and the edge cases (empty matrices,
//! shapes that do not multiply). Small products are checked exactly in
//! `cpu_properties.rs`.

use rusparse::{predict_nnz, spgemm, CsrMatrix, Error, Index, IndexBase, Op, SpgemmOptions};

/// A deterministic generator (64-bit LCG, high bits).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

/// `n x n` with a heavy-tailed row length (row r has 300 / (r·7919 mod
/// 1000 + 1) + 2 entries: one row in a thousand has 302) and columns
/// clustered around the row, so rows compress by different amounts.
fn heavy_tailed<I: Index>(n: usize, base: IndexBase, seed: u64) -> CsrMatrix<f64, I, I> {
    CsrMatrix::from_triplets(n, n, &heavy_tailed_triplets(n, seed), base).unwrap()
}

fn heavy_tailed_triplets(n: usize, seed: u64) -> Vec<(usize, usize, f64)> {
    let mut rng = Lcg(seed);
    let mut triplets = Vec::new();
    for r in 0..n {
        let len = 300 / ((r * 7919) % 1000 + 1) + 2;
        for _ in 0..len {
            let spread = 1 + rng.below(400) as usize;
            let c = (r + spread * rng.below(8) as usize) % n;
            triplets.push((r, c, 1.0));
        }
    }
    triplets
}

fn relative_error(predicted: u64, exact: usize) -> f64 {
    (predicted as f64 - exact as f64).abs() / exact.max(1) as f64
}

#[test]
fn sampled_predictions_are_close_and_deterministic() {
    let a = heavy_tailed::<i32>(30_000, IndexBase::Zero, 1);
    let opts = SpgemmOptions::<f64>::default();
    let exact = spgemm(&a.view(), &a.view(), &opts).unwrap().nnz();
    let p = predict_nnz(&a.view(), &a.view(), &opts).unwrap();
    assert!(!p.exact, "{p:?} should be sampled");
    assert!(p.sampled_products * 4 < p.nprod, "{p:?} computes most rows");
    let err = relative_error(p.nnz, exact);
    assert!(
        err < 0.03,
        "predicted {} for nnz(C) = {exact}: {err}",
        p.nnz
    );
    assert!((p.ratio - p.nprod as f64 / p.nnz as f64).abs() < 1e-9);
    assert_eq!(predict_nnz(&a.view(), &a.view(), &opts).unwrap(), p);
}

#[test]
fn op_t_matches_the_explicit_transpose_for_every_index_type_and_base() {
    fn check<I: Index>(base: IndexBase) {
        let triplets = heavy_tailed_triplets(20_000, 2);
        let a = CsrMatrix::<f64, I, I>::from_triplets(20_000, 20_000, &triplets, base).unwrap();
        let swapped: Vec<_> = triplets.iter().map(|&(r, c, v)| (c, r, v)).collect();
        let at = CsrMatrix::<f64, I, I>::from_triplets(20_000, 20_000, &swapped, base).unwrap();
        let t_opts = SpgemmOptions::<f64> {
            op_a: Op::T,
            ..Default::default()
        };
        let with_op = predict_nnz(&a.view(), &a.view(), &t_opts).unwrap();
        let explicit = predict_nnz(&at.view(), &a.view(), &SpgemmOptions::default()).unwrap();
        assert_eq!(
            with_op, explicit,
            "op T and the transposed copy sample alike"
        );
        let exact = spgemm(&a.view(), &a.view(), &t_opts).unwrap().nnz();
        let err = relative_error(with_op.nnz, exact);
        assert!(
            err < 0.03,
            "Aᵀ·A: predicted {} for {exact}: {err}",
            with_op.nnz
        );
    }
    check::<i32>(IndexBase::One);
    check::<i64>(IndexBase::Zero);
    check::<i64>(IndexBase::One);
}

#[test]
fn empty_and_mismatched_products() {
    let opts = SpgemmOptions::<f64>::default();
    for (m, k, n) in [(0, 0, 0), (5, 0, 7), (0, 3, 4), (3, 4, 0)] {
        let a = CsrMatrix::<f64, i32>::from_triplets(m, k, &[], IndexBase::One).unwrap();
        let b = CsrMatrix::<f64, i32>::from_triplets(k, n, &[], IndexBase::One).unwrap();
        let p = predict_nnz(&a.view(), &b.view(), &opts).unwrap();
        assert_eq!((p.nnz, p.nprod, p.exact), (0, 0, true), "{m} x {k} x {n}");
    }
    let a = CsrMatrix::<f64, i64>::from_triplets(3, 4, &[(0, 1, 1.0)], IndexBase::Zero).unwrap();
    let r = predict_nnz(&a.view(), &a.view(), &opts);
    assert!(
        matches!(r, Err(Error::InvalidValue(ref m)) if m.contains("inner dimensions")),
        "{r:?}"
    );
}

/// Random products of every shape, row-length mix and input form (A and B
/// with duplicate entries and unsorted rows, one-based), large enough that
/// most are sampled: the prediction always lies between the rows that have
/// products (each has an entry) and nprod, is exact when it says so, counts
/// nprod exactly, and is deterministic. (About four in five of these cases
/// are sampled; the rest are small enough to be counted exactly.)
mod sampled_bounds {
    use super::Lcg;
    use proptest::prelude::*;
    use rusparse::{predict_nnz, spgemm, CsrMatrix, IndexBase, SpgemmOptions};

    /// `rows x cols` triplets: most rows short, some long, one nearly full;
    /// with `messy`, repeated columns within a row and no order.
    fn triplets(rng: &mut Lcg, rows: usize, cols: usize, messy: bool) -> Vec<(usize, usize, f64)> {
        let full = rng.below(rows as u64) as usize;
        let mut t = Vec::new();
        for r in 0..rows {
            let len = match rng.below(10) {
                _ if r == full => cols * 9 / 10,
                0 | 1 => 20 + rng.below(60) as usize,
                2 => 0,
                _ => 1 + rng.below(6) as usize,
            };
            let centre = rng.below(cols as u64) as usize;
            for _ in 0..len {
                let c = if rng.below(2) == 0 {
                    (centre + rng.below(40) as usize) % cols
                } else {
                    rng.below(cols as u64) as usize
                };
                t.push((r, c, 1.0));
                if messy && rng.below(8) == 0 {
                    t.push((r, c, 1.0));
                }
            }
        }
        if !messy {
            t.sort_by_key(|&(r, c, _)| (r, c));
            t.dedup_by_key(|x| (x.0, x.1));
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn predictions_stay_within_their_bounds(
            seed in any::<u64>(),
            m in 40usize..400,
            k in 40usize..400,
            n in 40usize..400,
            messy in any::<bool>(),
            one_based in any::<bool>(),
        ) {
            let mut rng = Lcg(seed);
            let base = if one_based { IndexBase::One } else { IndexBase::Zero };
            let a = CsrMatrix::<f64, i32, i32>::from_triplets(m, k, &triplets(&mut rng, m, k, messy), base).unwrap();
            let b = CsrMatrix::<f64, i32, i32>::from_triplets(k, n, &triplets(&mut rng, k, n, messy), base).unwrap();
            let opts = SpgemmOptions::<f64>::default();
            let exact = spgemm(&a.view(), &b.view(), &opts).unwrap().nnz() as u64;
            let b_len = |j: usize| (b.row_offsets()[j + 1] - b.row_offsets()[j]) as u64;
            let off = a.row_offsets();
            let row_nprod: Vec<u64> = (0..m)
                .map(|i| {
                    let z = base_offset(base);
                    (off[i] as usize - z..off[i + 1] as usize - z)
                        .map(|e| b_len(a.col_indices()[e] as usize - z))
                        .sum()
                })
                .collect();
            let nprod: u64 = row_nprod.iter().sum();
            let busy_rows = row_nprod.iter().filter(|&&w| w > 0).count() as u64;
            let p = predict_nnz(&a.view(), &b.view(), &opts).unwrap();
            prop_assert_eq!(p.nprod, nprod);
            prop_assert!(busy_rows <= p.nnz && p.nnz <= nprod, "{:?}: {} rows with products", p, busy_rows);
            prop_assert!(p.sampled_products <= nprod);
            if p.exact {
                prop_assert_eq!(p.nnz, exact);
            }
            prop_assert_eq!(predict_nnz(&a.view(), &b.view(), &opts).unwrap(), p);
        }
    }

    fn base_offset(base: IndexBase) -> usize {
        match base {
            IndexBase::Zero => 0,
            IndexBase::One => 1,
        }
    }
}
