//! The process-wide memory ceiling (`RUSPARSE_MEMORY_LIMIT`,
//! `rusparse::set_memory_limit`): a request above it is ALLOC_FAILED with a
//! message naming the limit, through the Rust API and the C ABI, and
//! smaller products still run. Its own test binary with one test, because
//! the limit is process-wide and read from the environment at first use.

use rusparse::ffi::errors::rusparseGetLastErrorMessage;
use rusparse::ffi::handle::{rusparseCreateWithBackend, rusparseDestroy};
use rusparse::ffi::matrix::{rusparseCreateCsr, rusparseDestroySpMat};
use rusparse::ffi::spgemm_ext::rusparseSpGEMM_predictNnz;
use rusparse::ffi::types::{rusparseHandle_t, rusparseSpMatDescr_t};
use rusparse::{memory_limit, set_memory_limit, Context, CsrMatrix, Error, IndexBase, Op};
use rusparse::{SpgemmOptions, MEMORY_LIMIT_ENV};
use std::ffi::CStr;
use std::ptr::null_mut;

/// A 2 × `cols` matrix with an entry in its first and last column.
fn wide(cols: usize) -> CsrMatrix<f64, i32, i32> {
    let t = [(0, 0, 1.0), (1, cols - 1, 2.0)];
    CsrMatrix::from_triplets(2, cols, &t, IndexBase::Zero).unwrap()
}

/// predictNnz of op(A) * B through the C ABI: the status and the message.
fn c_predict(
    a: &CsrMatrix<f64, i32, i32>,
    op_a: i32,
    b: &CsrMatrix<f64, i32, i32>,
) -> (i32, String) {
    let mut arrays = [a, b].map(|x| {
        (
            x.row_offsets().to_vec(),
            x.col_indices().to_vec(),
            x.values().to_vec(),
        )
    });
    let mut handle: rusparseHandle_t = null_mut();
    let mut mats: [rusparseSpMatDescr_t; 2] = [null_mut(); 2];
    let mut nnz = -1i64;
    // SAFETY: the arrays outlive the descriptors; everything created is
    // destroyed before returning.
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
                2,
                2,
                0,
                1,
            );
            assert_eq!(s as i32, 0);
        }
        let status = rusparseSpGEMM_predictNnz(handle, op_a, 0, mats[0], mats[1], &mut nnz) as i32;
        let message = CStr::from_ptr(rusparseGetLastErrorMessage())
            .to_string_lossy()
            .into_owned();
        for m in mats {
            rusparseDestroySpMat(m);
        }
        rusparseDestroy(handle);
        (status, message)
    }
}

#[test]
fn requests_above_the_ceiling_are_alloc_failed_and_smaller_ones_run() {
    // Read at first use: set before any call of rusparse in this process.
    std::env::set_var(MEMORY_LIMIT_ENV, "1M");
    assert_eq!(memory_limit(), Some(1 << 20));

    let ctx = Context::cpu().unwrap();
    // op(A) = A^T of a 2 × 2^20 matrix: its 2^20 rows need 4 MiB of offsets.
    let a = wide(1 << 20);
    let b = wide(2);
    let opts = SpgemmOptions {
        op_a: Op::T,
        ..SpgemmOptions::default()
    };
    let err = ctx.spgemm(&a.view(), &b.view(), &opts).unwrap_err();
    assert!(
        matches!(&err, Error::AllocFailed(m)
            if m.contains("more than the limit of 1048576 bytes") && m.contains(MEMORY_LIMIT_ENV)),
        "{err}"
    );
    let (status, message) = c_predict(&a, 1, &b);
    assert_eq!(status, 2, "ALLOC_FAILED: {message}");
    assert!(
        message.contains("more than the limit of 1048576 bytes"),
        "{message}"
    );

    // A product under the ceiling runs: op(A) = A (2 × 2^20) times a
    // 2^20 × 2 matrix needs no array per column.
    let bt = CsrMatrix::<f64, i32, i32>::from_triplets(
        1 << 20,
        2,
        &[(0, 0, 3.0), ((1 << 20) - 1, 1, 4.0)],
        IndexBase::Zero,
    )
    .unwrap();
    let c = ctx
        .spgemm(&a.view(), &bt.view(), &SpgemmOptions::default())
        .unwrap();
    assert_eq!(c.values(), &[3.0, 8.0]);

    // Lifted, the refused product runs.
    set_memory_limit(None);
    assert_eq!(memory_limit(), None);
    let c = ctx.spgemm(&a.view(), &b.view(), &opts).unwrap();
    assert_eq!((c.nrows(), c.nnz()), (1 << 20, 2));
    assert_eq!(c_predict(&a, 1, &b).0, 0);
    set_memory_limit(Some(4 << 20));
    assert_eq!(memory_limit(), Some(4 << 20));
}
