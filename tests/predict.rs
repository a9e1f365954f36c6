//! `rusparse::predict_nnz` (seed 000 with a stratified sample) on products
//! large enough to be sampled: close to the exact nnz(C), deterministic,
//! the same for op T as for the explicit transpose, and for every index
//! type and base; and the edge cases (empty matrices, shapes that do not
//! multiply). Small products are checked exactly in `cpu_properties.rs`.

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
