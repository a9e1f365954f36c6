//! Huge requests and index overflow (issue 10): a product whose C cannot
//! exist (nnz(C) = 10^12 from two inputs of 10^6 entries) is refused in
//! milliseconds with ALLOC_FAILED or INVALID_VALUE, never by an OOM kill or
//! after hours of counting; an nnz(C) that does not fit 32-bit row offsets
//! is INVALID_VALUE before anything is written, decided exactly at the
//! boundary 2^31 - 1 (and 2^31 - 2 with one-based indices).
//!
//! The inputs are rank-one products (every row of A holds one entry), so
//! the lower bound of nnz(C) that planning computes is exact and the
//! symbolic phase counts each row in O(1).

use rusparse::ffi::errors::rusparseGetLastErrorMessage;
use rusparse::ffi::handle::{rusparseCreateWithBackend, rusparseDestroy};
use rusparse::ffi::matrix::{rusparseCreateCsr, rusparseDestroySpMat, rusparseSpMatGetSize};
use rusparse::ffi::spgemm::{
    rusparseSpGEMM_compute, rusparseSpGEMM_createDescr, rusparseSpGEMM_destroyDescr,
    rusparseSpGEMM_workEstimation,
};
use rusparse::ffi::types::{rusparseHandle_t, rusparseSpGEMMDescr_t, rusparseSpMatDescr_t};
use rusparse::{
    Algorithm, Context, CsrMatrix, Error, Index, IndexBase, Op, SpgemmOptions, SpgemmPlan,
};
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::time::{Duration, Instant};

/// Generous: these calls take milliseconds in a release build, and up to
/// 25 s with the library unoptimised (the dev profile) under ASan in
/// scripts/test.sh; the bound only catches a planner that counts 10^12
/// products (hours) instead of refusing.
const FAST: Duration = Duration::from_secs(120);

/// `rows` × 2 with one entry per row: the first `first` rows in column 0,
/// the others in column 1 (so op(A) * op(B) copies row 0 or row 1 of B).
fn column_pick<I: Index>(rows: usize, first: usize, base: IndexBase) -> CsrMatrix<f64, I, I> {
    let t: Vec<_> = (0..rows)
        .map(|i| (i, usize::from(i >= first), 1.0))
        .collect();
    CsrMatrix::from_triplets(rows, 2, &t, base).unwrap()
}

/// 2 × `cols`: row 0 holds `len0` entries, row 1 `len1` (sorted, distinct).
fn two_rows<I: Index>(
    cols: usize,
    len0: usize,
    len1: usize,
    base: IndexBase,
) -> CsrMatrix<f64, I, I> {
    let mut t: Vec<_> = (0..len0).map(|j| (0, j, 1.0)).collect();
    t.extend((0..len1).map(|j| (1, j, 1.0)));
    CsrMatrix::from_triplets(2, cols, &t, base).unwrap()
}

const MILLION: usize = 1_000_000;

#[test]
fn trillion_entry_product_fails_fast_on_memory() {
    let ctx = Context::cpu().unwrap();
    let a = column_pick::<i64>(MILLION, MILLION, IndexBase::Zero);
    let b = two_rows::<i64>(MILLION, MILLION, 0, IndexBase::Zero);
    let opts = SpgemmOptions::<f64>::default();
    let t = Instant::now();
    let err = ctx.spgemm(&a.view(), &b.view(), &opts).unwrap_err();
    let took = t.elapsed();
    assert!(
        matches!(&err, Error::AllocFailed(m) if m.contains("C's")),
        "{err}"
    );
    assert!(took < FAST, "took {took:?}");
    println!("nnz(C) = 10^12, 64-bit indices: {err} after {took:?}");

    // Planning knows the bound exactly; the symbolic phase counts it in
    // O(rows) (what the C ABI's compute runs before the caller allocates C).
    let mut plan =
        SpgemmPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Default).unwrap();
    assert_eq!(plan.nnz_lower_bound(), 1_000_000_000_000);
    let t = Instant::now();
    assert_eq!(
        plan.symbolic(&ctx, &a.view(), &b.view()).unwrap(),
        1_000_000_000_000
    );
    assert!(t.elapsed() < FAST);
}

#[test]
fn trillion_entry_product_with_32_bit_offsets_is_invalid_value() {
    let ctx = Context::cpu().unwrap();
    let a = column_pick::<i32>(MILLION, MILLION, IndexBase::Zero);
    let b = two_rows::<i32>(MILLION, MILLION, 0, IndexBase::Zero);
    let t = Instant::now();
    let err = ctx
        .spgemm(&a.view(), &b.view(), &SpgemmOptions::default())
        .unwrap_err();
    assert!(t.elapsed() < FAST);
    assert!(
        matches!(&err, Error::InvalidValue(m) if m.contains("at least 1000000000000") && m.contains("64-bit")),
        "{err}"
    );
}

/// The C ABI's work estimation and compute on A, B and a C with the given
/// row offset type; returns the statuses, the last message and nnz(C).
struct CFlow {
    estimation: i32,
    compute: Option<i32>,
    message: String,
    nnz: i64,
    /// C's row offsets array after the calls (must be untouched: filled by copy only).
    c_offsets: Vec<i64>,
}

fn c_flow<I: Index>(
    a: &CsrMatrix<f64, I, I>,
    b: &CsrMatrix<f64, I, I>,
    c_offsets_type: i32,
    base: i32,
) -> CFlow {
    let index_type = if std::mem::size_of::<I>() == 8 { 3 } else { 2 };
    let (m, n) = (a.nrows(), b.ncols());
    let mut arrays = [a, b].map(|x| {
        (
            x.row_offsets().to_vec(),
            x.col_indices().to_vec(),
            x.values().to_vec(),
        )
    });
    // C's row offsets are set before compute (as in cuSPARSE's sample);
    // 64-bit sentinels, which must survive the phases that fail.
    let mut c_offsets = vec![-7i64; m + 1];
    let (alpha, beta) = (1.0f64, 0.0f64);
    let (pa, pb) = (
        (&alpha as *const f64).cast::<c_void>(),
        (&beta as *const f64).cast::<c_void>(),
    );
    let mut handle: rusparseHandle_t = null_mut();
    let mut mats: [rusparseSpMatDescr_t; 3] = [null_mut(); 3];
    let mut descr: rusparseSpGEMMDescr_t = null_mut();
    let mut flow = CFlow {
        estimation: -1,
        compute: None,
        message: String::new(),
        nnz: -1,
        c_offsets: Vec::new(),
    };
    // SAFETY: every pointer is valid for the sizes stated; everything
    // created is destroyed at the end.
    unsafe {
        assert_eq!(rusparseCreateWithBackend(&mut handle, 1) as i32, 0);
        for (k, (x, (o, c, v))) in [a, b].iter().zip(arrays.iter_mut()).enumerate() {
            let s = rusparseCreateCsr(
                &mut mats[k],
                x.nrows() as i64,
                x.ncols() as i64,
                x.nnz() as i64,
                o.as_mut_ptr().cast(),
                c.as_mut_ptr().cast(),
                v.as_mut_ptr().cast(),
                index_type,
                index_type,
                base,
                1,
            );
            assert_eq!(s as i32, 0);
        }
        let p: *mut c_void = if c_offsets_type == 3 {
            c_offsets.as_mut_ptr().cast()
        } else {
            null_mut()
        };
        let s = rusparseCreateCsr(
            &mut mats[2],
            m as i64,
            n as i64,
            0,
            p,
            null_mut(),
            null_mut(),
            c_offsets_type,
            index_type,
            base,
            1,
        );
        assert_eq!(s as i32, 0);
        assert_eq!(rusparseSpGEMM_createDescr(&mut descr) as i32, 0);
        let [ma, mb, mc] = mats;
        let mut size = 0usize;
        let mut buffer = [0u64; 64];
        let buf = buffer.as_mut_ptr().cast::<c_void>();
        // Each phase asked for its buffer size (NULL buffer), then run.
        let work = |size: &mut usize, b: *mut c_void| {
            rusparseSpGEMM_workEstimation(handle, 0, 0, pa, ma, mb, pb, mc, 1, 0, descr, size, b)
                as i32
        };
        let compute = |size: &mut usize, b: *mut c_void| {
            rusparseSpGEMM_compute(handle, 0, 0, pa, ma, mb, pb, mc, 1, 0, descr, size, b) as i32
        };
        assert_eq!(work(&mut size, null_mut()), 0);
        flow.estimation = work(&mut size, buf);
        if flow.estimation == 0 {
            assert_eq!(compute(&mut size, null_mut()), 0);
            flow.compute = Some(compute(&mut size, buf));
        }
        flow.message = CStr::from_ptr(rusparseGetLastErrorMessage())
            .to_string_lossy()
            .into_owned();
        let (mut r, mut c) = (0, 0);
        assert_eq!(
            rusparseSpMatGetSize(mc, &mut r, &mut c, &mut flow.nnz) as i32,
            0
        );
        rusparseSpGEMM_destroyDescr(descr);
        for x in mats {
            rusparseDestroySpMat(x);
        }
        rusparseDestroy(handle);
    }
    flow.c_offsets = c_offsets;
    flow
}

#[test]
fn c_abi_refuses_32_bit_offsets_at_work_estimation_and_counts_64_bit_fast() {
    let a = column_pick::<i64>(MILLION, MILLION, IndexBase::Zero);
    let b = two_rows::<i64>(MILLION, MILLION, 0, IndexBase::Zero);
    let t = Instant::now();
    // matC with 32-bit row offsets (columns stay 64-bit, as A's).
    let narrow = c_flow(&a, &b, 2, 0);
    assert_eq!(
        narrow.estimation, 3,
        "INVALID_VALUE expected: {}",
        narrow.message
    );
    assert!(
        narrow.message.contains("at least 1000000000000"),
        "{}",
        narrow.message
    );
    assert_eq!(narrow.nnz, 0);
    // 64-bit: compute publishes nnz(C) = 10^12 in O(rows); allocating C is
    // then the caller's (and fails there, as it would with cuSPARSE).
    let wide = c_flow(&a, &b, 3, 0);
    assert_eq!(
        (wide.estimation, wide.compute),
        (0, Some(0)),
        "{}",
        wide.message
    );
    assert_eq!(wide.nnz, 1_000_000_000_000);
    assert!(
        wide.c_offsets.iter().all(|&o| o == -7),
        "compute wrote C's row offsets"
    );
    assert!(t.elapsed() < FAST, "took {:?}", t.elapsed());
}

#[test]
fn thirty_two_bit_offsets_hold_exactly_up_to_the_boundary() {
    // nnz(C) = 32767 * 65536 + 1 * 65535 = 2^31 - 1.
    let (first, rows) = (32_767, 32_768);
    for (base, base_c, fits) in [(IndexBase::Zero, 0, true), (IndexBase::One, 1, false)] {
        let a = column_pick::<i32>(rows, first, base);
        let b = two_rows::<i32>(65_536, 65_536, 65_535, base);
        let ctx = Context::cpu().unwrap();
        let plan =
            SpgemmPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Default).unwrap();
        assert_eq!(plan.nnz_lower_bound(), (1u64 << 31) - 1);
        let flow = c_flow(&a, &b, 2, base_c);
        if fits {
            assert_eq!(
                (flow.estimation, flow.compute),
                (0, Some(0)),
                "{}",
                flow.message
            );
            assert_eq!(flow.nnz, i64::from(i32::MAX));
        } else {
            // One-based: the last offset would be 2^31, past i32.
            assert_eq!(flow.estimation, 3, "{}", flow.message);
            assert!(flow.message.contains("does not fit"), "{}", flow.message);
        }
    }
    // One more entry: 2^31 does not fit zero-based 32-bit offsets either.
    let a = column_pick::<i32>(rows, first, IndexBase::Zero);
    let b = two_rows::<i32>(65_536, 65_536, 65_536, IndexBase::Zero);
    let flow = c_flow(&a, &b, 2, 0);
    assert_eq!(flow.estimation, 3, "{}", flow.message);
    assert!(
        flow.message.contains("at least 2147483648"),
        "{}",
        flow.message
    );
}

/// `rows` × `cols` with the given `(row, col, value)` entries.
fn sparse<I: Index>(rows: usize, cols: usize, t: &[(usize, usize, f64)]) -> CsrMatrix<f64, I, I> {
    CsrMatrix::from_triplets(rows, cols, t, IndexBase::One).unwrap()
}

/// `A * B^T` by dot products of rows (the oracle for a hypersparse inner
/// dimension, where the reference would make a row per inner index).
fn dot_rows(a: &[(usize, usize, f64)], b: &[(usize, usize, f64)]) -> Vec<(usize, usize, f64)> {
    let mut c = std::collections::BTreeMap::new();
    for &(i, k, x) in a {
        for &(j, k2, y) in b {
            if k == k2 {
                *c.entry((i, j)).or_insert(0.0) += x * y;
            }
        }
    }
    c.into_iter().map(|((i, j), v)| (i, j, v)).collect()
}

/// A hypersparse inner dimension (2^31 - 1 with 32-bit indices, 2^40 with
/// 64-bit ones) taken transposed as op(B) costs memory and time for its
/// entries, not for its length: only the inner indices where B has entries
/// become rows of op(B). Before, op(B) got 2^31 row offsets (8 GiB).
fn hypersparse_inner<I: Index>(k: usize) {
    let ctx = Context::cpu().unwrap();
    let at = [
        (0, k - 1, 2.0),
        (0, 5, 3.0),
        (1, 1 << 30, -1.0),
        (2, 7, 4.0),
        (2, 6, 1.0),
    ];
    let bt = [
        (0, k - 1, 5.0),
        (0, 1 << 30, 1.0),
        (1, 5, -2.0),
        (3, 7, 0.5),
        (3, k - 1, 1.0),
        (3, 9, 8.0),
    ];
    let (a, b) = (sparse::<I>(3, k, &at), sparse::<I>(4, k, &bt));
    let expected = sparse::<I>(3, 4, &dot_rows(&at, &bt));
    let t = Instant::now();
    let patterns =
        rusparse::plan::OperandPattern::pair(&a.view(), Op::N, &b.view(), Op::T).unwrap();
    let bytes = patterns.0.memory_bytes() + patterns.1.memory_bytes();
    assert!(bytes < 4096, "{bytes} bytes for 11 entries");
    let opts = SpgemmOptions {
        op_b: Op::T,
        ..SpgemmOptions::default()
    };
    let c = ctx.spgemm(&a.view(), &b.view(), &opts).unwrap();
    assert_eq!(c, expected);
    let predicted = ctx.predict_nnz(&a.view(), &b.view(), &opts).unwrap();
    assert_eq!(predicted.nnz as usize, expected.nnz());
    let mut plan =
        SpgemmPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::T, Algorithm::Default).unwrap();
    assert_eq!(plan.shape(), (3, 4));
    assert_eq!(
        plan.symbolic(&ctx, &a.view(), &b.view()).unwrap(),
        expected.nnz()
    );
    assert_eq!(
        plan.execute(&ctx, &a.view(), &b.view(), 1.0).unwrap(),
        expected
    );
    let took = t.elapsed();
    assert!(took < FAST, "took {took:?}");
    println!("inner dimension {k}: {bytes} bytes of operand patterns, {took:?}");
}

#[test]
fn hypersparse_inner_dimension_costs_its_entries_with_32_bit_indices() {
    hypersparse_inner::<i32>(i32::MAX as usize);
}

#[test]
fn hypersparse_inner_dimension_costs_its_entries_with_64_bit_indices() {
    hypersparse_inner::<i64>(1 << 40);
}

/// op(A) = A^T of a 5 × 2^40 matrix has 2^40 rows: planning needs their
/// offsets (8 TiB), more than any machine here has, and says so at once,
/// before allocating anything, instead of being killed when Linux's
/// overcommitted pages are touched.
#[test]
fn transposed_wide_operand_beyond_memory_is_alloc_failed_fast() {
    let ctx = Context::cpu().unwrap();
    let a = sparse::<i64>(5, 1 << 40, &[(0, 3, 1.0), (4, (1 << 40) - 1, 2.0)]);
    let b = sparse::<i64>(5, 3, &[(0, 0, 1.0), (4, 2, 1.0)]);
    let opts = SpgemmOptions {
        op_a: Op::T,
        ..SpgemmOptions::default()
    };
    let t = Instant::now();
    for err in [
        ctx.predict_nnz(&a.view(), &b.view(), &opts).unwrap_err(),
        ctx.spgemm(&a.view(), &b.view(), &opts).unwrap_err(),
        SpgemmPlan::new(&ctx, &a.view(), Op::T, &b.view(), Op::N, Algorithm::Default).unwrap_err(),
    ] {
        assert!(
            matches!(&err, Error::AllocFailed(m) if m.contains("planning op(A) * op(B)") && m.contains("bytes of memory left")),
            "{err}"
        );
    }
    assert!(t.elapsed() < FAST, "took {:?}", t.elapsed());
}
