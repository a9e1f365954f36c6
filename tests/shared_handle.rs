//! Threads and the C ABI (issue 10): a handle (or SpGEMM descriptor) used
//! by two threads at once is detected — the second call gets
//! INVALID_VALUE with a message saying so and touches nothing — instead of
//! racing; the calls that succeed give the reference result; and
//! `rusparseSetNumThreads` on one handle while other handles compute does
//! not disturb them.

use rusparse::ffi::errors::rusparseGetLastErrorMessage;
use rusparse::ffi::handle::{rusparseCreateWithBackend, rusparseDestroy, rusparseSetNumThreads};
use rusparse::ffi::matrix::{
    rusparseCreateCsr, rusparseCsrSetPointers, rusparseDestroySpMat, rusparseSpMatGetSize,
};
use rusparse::ffi::spgemm::{
    rusparseSpGEMM_compute, rusparseSpGEMM_copy, rusparseSpGEMM_createDescr,
    rusparseSpGEMM_destroyDescr, rusparseSpGEMM_workEstimation,
};
use rusparse::ffi::types::{rusparseHandle_t, rusparseStatus_t};
use rusparse::{reference, CsrMatrix, IndexBase, Op};
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A send-able handle pointer (the test shares it on purpose).
#[derive(Clone, Copy)]
struct Shared(rusparseHandle_t);
// SAFETY: the library claims the handle per call; that is what is tested.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

fn matrix(n: usize, seed: usize) -> CsrMatrix<f64, i32, i32> {
    let mut t = Vec::new();
    for i in 0..n {
        for e in 0..8 {
            let j = (i * 31 + e * 97 + seed * 13) % n;
            t.push((i, j, ((i + e + seed) % 5) as f64 - 2.0));
        }
    }
    CsrMatrix::from_triplets(n, n, &t, IndexBase::Zero).unwrap()
}

const IN_USE: &str = "in use by a call on another thread";

/// Calls `f` until it is not refused for concurrent use; counts refusals.
fn retrying(refusals: &AtomicU64, mut f: impl FnMut() -> rusparseStatus_t) -> rusparseStatus_t {
    loop {
        let s = f();
        if s == rusparseStatus_t::RUSPARSE_STATUS_INVALID_VALUE {
            // SAFETY: the library returns this thread's message.
            let msg = unsafe { CStr::from_ptr(rusparseGetLastErrorMessage()) };
            let msg = msg.to_string_lossy();
            assert!(msg.contains(IN_USE), "unexpected INVALID_VALUE: {msg}");
            refusals.fetch_add(1, Ordering::Relaxed);
            std::thread::yield_now();
            continue;
        }
        return s;
    }
}

/// C = A * B through the three phases on `handle`, each call retried while
/// another thread holds the handle; returns C's arrays.
fn product(
    handle: rusparseHandle_t,
    a: &CsrMatrix<f64, i32, i32>,
    b: &CsrMatrix<f64, i32, i32>,
    refusals: &AtomicU64,
) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    const OK: rusparseStatus_t = rusparseStatus_t::RUSPARSE_STATUS_SUCCESS;
    let (alpha, beta) = (1.0f64, 0.0f64);
    let (pa, pb) = (
        (&alpha as *const f64).cast::<c_void>(),
        (&beta as *const f64).cast::<c_void>(),
    );
    let mut arrays = [a, b].map(|x| {
        (
            x.row_offsets().to_vec(),
            x.col_indices().to_vec(),
            x.values().to_vec(),
        )
    });
    let mut mats = [null_mut(); 3];
    let mut descr = null_mut();
    let m = a.nrows();
    // SAFETY: all pointers are valid for the sizes stated and outlive the
    // calls; each object is destroyed once at the end.
    unsafe {
        for (k, (o, c, v)) in arrays.iter_mut().enumerate() {
            let s = rusparseCreateCsr(
                &mut mats[k],
                m as i64,
                m as i64,
                c.len() as i64,
                o.as_mut_ptr().cast(),
                c.as_mut_ptr().cast(),
                v.as_mut_ptr().cast(),
                2,
                2,
                0,
                1,
            );
            assert_eq!(s, OK);
        }
        assert_eq!(
            rusparseCreateCsr(
                &mut mats[2],
                m as i64,
                m as i64,
                0,
                null_mut(),
                null_mut(),
                null_mut(),
                2,
                2,
                0,
                1
            ),
            OK
        );
        assert_eq!(rusparseSpGEMM_createDescr(&mut descr), OK);
        let [ma, mb, mc] = mats;
        let mut buffer = [0u64; 16];
        let buf = buffer.as_mut_ptr().cast::<c_void>();
        let mut size = 128usize;
        let s = retrying(refusals, || {
            rusparseSpGEMM_workEstimation(
                handle, 0, 0, pa, ma, mb, pb, mc, 1, 0, descr, &mut size, buf,
            )
        });
        assert_eq!(s, OK);
        let s = retrying(refusals, || {
            rusparseSpGEMM_compute(
                handle, 0, 0, pa, ma, mb, pb, mc, 1, 0, descr, &mut size, buf,
            )
        });
        assert_eq!(s, OK);
        let (mut r, mut c, mut z) = (0, 0, 0);
        assert_eq!(rusparseSpMatGetSize(mc, &mut r, &mut c, &mut z), OK);
        let mut co = vec![0i32; m + 1];
        let mut cc = vec![0i32; z as usize];
        let mut cv = vec![0f64; z as usize];
        assert_eq!(
            rusparseCsrSetPointers(
                mc,
                co.as_mut_ptr().cast(),
                cc.as_mut_ptr().cast(),
                cv.as_mut_ptr().cast()
            ),
            OK
        );
        let s = retrying(refusals, || {
            rusparseSpGEMM_copy(handle, 0, 0, pa, ma, mb, pb, mc, 1, 0, descr)
        });
        assert_eq!(s, OK);
        rusparseSpGEMM_destroyDescr(descr);
        for x in mats {
            rusparseDestroySpMat(x);
        }
        (co, cc, cv)
    }
}

fn expected(
    a: &CsrMatrix<f64, i32, i32>,
    b: &CsrMatrix<f64, i32, i32>,
) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let c = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
    c.into_parts()
}

#[test]
fn one_handle_shared_by_threads_is_refused_not_raced() {
    let mut h = null_mut();
    // SAFETY: a writable slot.
    unsafe {
        assert_eq!(
            rusparseCreateWithBackend(&mut h, 1),
            rusparseStatus_t::RUSPARSE_STATUS_SUCCESS
        )
    };
    let shared = Shared(h);
    let refusals = AtomicU64::new(0);
    let products = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (refusals, products) = (&refusals, &products);
            s.spawn(move || {
                let shared = shared;
                let a = matrix(3000, t);
                let b = matrix(3000, t + 7);
                let want = expected(&a, &b);
                // Until a few calls were refused (at least 2 s, at most 60 s).
                while start.elapsed() < Duration::from_secs(2)
                    || (refusals.load(Ordering::Relaxed) < 3
                        && start.elapsed() < Duration::from_secs(60))
                {
                    let got = product(shared.0, &a, &b, refusals);
                    assert!(got == want, "thread {t}: wrong C with a shared handle");
                    products.fetch_add(1, Ordering::Relaxed);
                    // The thread count of the shared handle changes under the others.
                    let n = 1 + (products.load(Ordering::Relaxed) % 2) as i32;
                    retrying(refusals, || unsafe { rusparseSetNumThreads(shared.0, n) });
                }
            });
        }
    });
    // SAFETY: created above, no thread uses it any more.
    unsafe { rusparseDestroy(h) };
    let refused = refusals.load(Ordering::Relaxed);
    println!(
        "{} products on one shared handle, {refused} calls refused as concurrent",
        products.load(Ordering::Relaxed)
    );
    assert!(refused >= 3, "no concurrent use was detected in 60 s");
}

#[test]
fn set_num_threads_on_one_handle_does_not_disturb_the_others() {
    let stop = AtomicBool::new(false);
    let refusals = AtomicU64::new(0);
    std::thread::scope(|s| {
        // A handle whose thread count changes all the time.
        s.spawn(|| {
            let mut h = null_mut();
            // SAFETY: this thread owns the handle.
            unsafe {
                assert_eq!(
                    rusparseCreateWithBackend(&mut h, 1),
                    rusparseStatus_t::RUSPARSE_STATUS_SUCCESS
                );
                let mut k = 0;
                while !stop.load(Ordering::Relaxed) {
                    assert_eq!(
                        rusparseSetNumThreads(h, [1, 2, 4, 0][k % 4]),
                        rusparseStatus_t::RUSPARSE_STATUS_SUCCESS
                    );
                    k += 1;
                }
                rusparseDestroy(h);
            }
        });
        let workers: Vec<_> = (0..3)
            .map(|t| {
                let refusals = &refusals;
                s.spawn(move || {
                    let mut h = null_mut();
                    // SAFETY: this thread owns the handle.
                    unsafe {
                        assert_eq!(
                            rusparseCreateWithBackend(&mut h, 1),
                            rusparseStatus_t::RUSPARSE_STATUS_SUCCESS
                        )
                    };
                    let (a, b) = (matrix(1500, t), matrix(1500, t + 3));
                    let want = expected(&a, &b);
                    for _ in 0..20 {
                        assert!(product(h, &a, &b, refusals) == want, "thread {t}: wrong C");
                    }
                    // SAFETY: created above.
                    unsafe { rusparseDestroy(h) };
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(
        refusals.load(Ordering::Relaxed),
        0,
        "separate handles were refused"
    );
}
