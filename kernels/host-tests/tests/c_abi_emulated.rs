//! The C ABI's GPU path on the emulated device: an AUTO handle finds the
//! emulated device's arrays (the device is registered with
//! `rusparse::backend::gpu::register_device`) and runs the product through
//! `src/product/gpu.rs` and the shared pipeline, as a C program on a GPU
//! would: the three phases, the reuse flow with new values, alpha and beta
//! in host and in device memory, plan info and bins, mixed placements, and
//! no device memory left once the descriptors and the handle are destroyed.

use rusparse::backend::gpu::{register_device, unregister_device, GpuDevice};
use rusparse::ffi::errors::rusparseGetLastErrorMessage;
use rusparse::ffi::handle::*;
use rusparse::ffi::matrix::*;
use rusparse::ffi::spgemm::*;
use rusparse::ffi::spgemm_ext::*;
use rusparse::ffi::*;
use rusparse::plan::gpu_bins::DeviceLimits;
use rusparse::{BackendKind, CsrView, IndexBase, Op};
use rusparse_kernel_host_tests::device::EmulatedDevice;
use rusparse_kernel_host_tests::support::{csr_from_rows, random_rows, Rng, CANONICAL};
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::Arc;

const OK: rusparseStatus_t = rusparseStatus_t::RUSPARSE_STATUS_SUCCESS;
const INVALID: rusparseStatus_t = rusparseStatus_t::RUSPARSE_STATUS_INVALID_VALUE;
const I32: i32 = 2;
const R64: i32 = 1;
const N: usize = 40;

fn last_message() -> String {
    // SAFETY: the library returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(rusparseGetLastErrorMessage()) }
        .to_string_lossy()
        .into_owned()
}

/// An N x N matrix (zero-based, i32, f64): a band, one long row, an empty
/// row and rows of one entry; values from `salt`.
fn matrix(salt: i32) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let mut rows = vec![0];
    let mut cols = Vec::new();
    for i in 0..N as i32 {
        let range: Vec<i32> = match i {
            3 => vec![],
            7 => (0..N as i32).step_by(2).collect(),
            _ if i % 5 == 1 => vec![(i * 7) % N as i32],
            _ => ((i - 2).max(0)..=(i + 2).min(N as i32 - 1)).collect(),
        };
        cols.extend(range);
        rows.push(cols.len() as i32);
    }
    let vals = (0..cols.len() as i32)
        .map(|k| f64::from((k * salt) % 7 - 3))
        .collect();
    (rows, cols, vals)
}

/// `alpha * A * A (+ beta * old)` by the reference, as C's three arrays.
fn reference(a: &(Vec<i32>, Vec<i32>, Vec<f64>), alpha: f64) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let v = CsrView::try_new(N, N, &a.0, &a.1, &a.2, IndexBase::Zero).unwrap();
    let c = rusparse::reference::spgemm(&v, Op::N, &v, Op::N, alpha).unwrap();
    let (r, k, x) = c.into_parts();
    (r, k, x)
}

/// The emulated device, registered for AUTO placement while alive.
struct Registered(Arc<EmulatedDevice>);

impl Registered {
    fn new() -> Self {
        let dev = EmulatedDevice::new("H100", DeviceLimits::H100, BackendKind::Cuda);
        register_device(dev.clone());
        Registered(dev)
    }
    fn ptr<T: Copy>(&self, data: &[T]) -> *mut c_void {
        self.0.upload_new(data) as *mut c_void
    }
    fn zeros(&self, bytes: usize) -> *mut c_void {
        self.ptr(&vec![0u8; bytes.max(8)])
    }
    fn read<T: Copy + Default>(&self, p: *mut c_void, n: usize) -> Vec<T> {
        self.0.read_back(p as u64, n)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let dev: Arc<dyn GpuDevice> = self.0.clone();
        unregister_device(&dev);
    }
}

/// Descriptors of one product, destroyed on drop.
struct Mats {
    a: rusparseSpMatDescr_t,
    c: rusparseSpMatDescr_t,
    d: rusparseSpGEMMDescr_t,
}

impl Mats {
    unsafe fn new(a: [*mut c_void; 3], nnz: usize) -> Mats {
        let mut m = Mats {
            a: null_mut(),
            c: null_mut(),
            d: null_mut(),
        };
        let (n, z) = (N as i64, nnz as i64);
        unsafe {
            assert_eq!(
                rusparseCreateCsr(&mut m.a, n, n, z, a[0], a[1], a[2], I32, I32, 0, R64),
                OK
            );
            assert_eq!(
                rusparseCreateCsr(
                    &mut m.c,
                    n,
                    n,
                    0,
                    null_mut(),
                    null_mut(),
                    null_mut(),
                    I32,
                    I32,
                    0,
                    R64
                ),
                OK
            );
            assert_eq!(rusparseSpGEMM_createDescr(&mut m.d), OK);
        }
        m
    }
}

impl Drop for Mats {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe {
            rusparseSpGEMM_destroyDescr(self.d);
            rusparseDestroySpMat(self.a);
            rusparseDestroySpMat(self.c);
        }
    }
}

fn check(s: rusparseStatus_t, what: &str) {
    assert_eq!(s, OK, "{what}: {}", last_message());
}

/// Work estimation and compute of `alpha * A * A` on `m`'s descriptors,
/// each asked for its buffer size first and then run with `buffer`;
/// returns nnz(C).
///
/// # Safety
/// Live handle and descriptors; `al`, `be` point to f64; `buffer` holds
/// 256 bytes where the product's arrays live.
unsafe fn estimate_and_compute(
    h: rusparseHandle_t,
    m: &Mats,
    al: *const c_void,
    be: *const c_void,
    buffer: *mut c_void,
) -> usize {
    let mut size = 0usize;
    // SAFETY: by the caller's contract.
    unsafe {
        for buf in [null_mut(), buffer] {
            check(
                rusparseSpGEMM_workEstimation(
                    h, 0, 0, al, m.a, m.a, be, m.c, R64, 0, m.d, &mut size, buf,
                ),
                "workEstimation",
            );
        }
        for buf in [null_mut(), buffer] {
            check(
                rusparseSpGEMM_compute(h, 0, 0, al, m.a, m.a, be, m.c, R64, 0, m.d, &mut size, buf),
                "compute",
            );
        }
        let (mut r, mut c, mut z) = (0, 0, 0);
        assert_eq!(rusparseSpMatGetSize(m.c, &mut r, &mut c, &mut z), OK);
        assert_eq!((r, c), (N as i64, N as i64));
        z as usize
    }
}

#[test]
fn auto_handle_runs_the_three_phases_on_the_emulated_device() {
    let g = Registered::new();
    let host = matrix(3);
    let a = [g.ptr(&host.0), g.ptr(&host.1), g.ptr(&host.2)];
    let buffer = g.zeros(256);
    let own = g.0.live_allocations().len();
    let mut h = null_mut();
    // SAFETY: device arrays of the stated sizes; host scalars.
    unsafe {
        assert_eq!(rusparseCreate(&mut h), OK);
        let m = Mats::new(a, host.1.len());
        let (alpha, beta) = (2.0f64, 0.0f64);
        let (al, be) = ((&alpha as *const f64).cast(), (&beta as *const f64).cast());
        let nnz = estimate_and_compute(h, &m, al, be, buffer);
        let want = reference(&host, alpha);
        assert_eq!(nnz, want.1.len());
        let (o, k, v) = (g.zeros((N + 1) * 4), g.zeros(nnz * 4), g.zeros(nnz * 8));
        assert_eq!(rusparseCsrSetPointers(m.c, o, k, v), OK);
        check(
            rusparseSpGEMM_copy(h, 0, 0, al, m.a, m.a, be, m.c, R64, 0, m.d),
            "copy",
        );
        assert_eq!(g.read::<i32>(o, N + 1), want.0);
        assert_eq!(g.read::<i32>(k, nnz), want.1);
        assert_eq!(g.read::<f64>(v, nnz), want.2);

        let mut backend = -1;
        assert_eq!(rusparseGetBackend(h, &mut backend), OK);
        assert_eq!(
            backend, 2,
            "an AUTO handle reports CUDA after a device product"
        );
        let mut bins = -1;
        assert_eq!(
            rusparseSpGEMM_getBinCounts(m.d, 1, null_mut(), 0, &mut bins),
            OK
        );
        assert!(bins >= 2, "a GPU plan has numeric bins: {bins}");
        let mut rows = vec![-1i64; bins as usize];
        let mut got = 0;
        assert_eq!(
            rusparseSpGEMM_getBinCounts(m.d, 1, rows.as_mut_ptr(), bins, &mut got),
            OK
        );
        let binned: i64 = rows.iter().sum();
        assert!(binned > 0 && binned < N as i64, "rows per bin {rows:?}");
        drop(m);
        rusparseDestroy(h);
    }
    // The plan's metadata and the device scalars are gone with the
    // descriptor; what is left is the test's own arrays.
    assert_eq!(g.0.live_allocations().len(), own + 3);
    assert_eq!(g.0.live_handles(), 0);
}

#[test]
fn reuse_with_new_values_and_scalars_in_device_memory() {
    let g = Registered::new();
    let host = matrix(3);
    let later = matrix(5);
    let a = [g.ptr(&host.0), g.ptr(&host.1), g.ptr(&host.2)];
    let buffer = g.zeros(256);
    let mut h = null_mut();
    // SAFETY: device arrays of the stated sizes.
    unsafe {
        assert_eq!(rusparseCreate(&mut h), OK);
        let m = Mats::new(a, host.1.len());
        let (mut s1, mut s2, mut s3, mut s4, mut s5) = (0usize, 0, 0, 0, 0);
        for buf in [null_mut(), buffer] {
            check(
                rusparseSpGEMMreuse_workEstimation(h, 0, 0, m.a, m.a, m.c, 0, m.d, &mut s1, buf),
                "reuse_workEstimation",
            );
        }
        for buf in [null_mut(), buffer] {
            check(
                rusparseSpGEMMreuse_nnz(
                    h, 0, 0, m.a, m.a, m.c, 0, m.d, &mut s2, buf, &mut s3, buf, &mut s4, buf,
                ),
                "reuse_nnz",
            );
        }
        let (mut r, mut c, mut z) = (0, 0, 0);
        assert_eq!(rusparseSpMatGetSize(m.c, &mut r, &mut c, &mut z), OK);
        let nnz = z as usize;
        let (o, k, v) = (g.zeros((N + 1) * 4), g.zeros(nnz * 4), g.zeros(nnz * 8));
        assert_eq!(rusparseCsrSetPointers(m.c, o, k, v), OK);
        for buf in [null_mut(), buffer] {
            check(
                rusparseSpGEMMreuse_copy(h, 0, 0, m.a, m.a, m.c, 0, m.d, &mut s5, buf),
                "reuse_copy",
            );
        }
        // Host scalars: C = 1.5 A A.
        let (alpha, beta) = (1.5f64, 0.0f64);
        check(
            rusparseSpGEMMreuse_compute(
                h,
                0,
                0,
                (&alpha as *const f64).cast(),
                m.a,
                m.a,
                (&beta as *const f64).cast(),
                m.c,
                R64,
                0,
                m.d,
            ),
            "reuse_compute",
        );
        let first = reference(&host, 1.5);
        assert_eq!(g.read::<i32>(k, nnz), first.1);
        assert_eq!(g.read::<f64>(v, nnz), first.2);

        // New values of A on the same pattern; alpha and beta in device
        // memory: C = -1 A' A' + 2 C.
        let vals = a[2] as u64;
        let bytes: Vec<u8> = later.2.iter().flat_map(|x| x.to_ne_bytes()).collect();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), vals as *mut u8, bytes.len());
        assert_eq!(rusparseSetPointerMode(h, 1), OK);
        let (dal, dbe) = (g.ptr(&[-1.0f64]), g.ptr(&[2.0f64]));
        check(
            rusparseSpGEMMreuse_compute(h, 0, 0, dal, m.a, m.a, dbe, m.c, R64, 0, m.d),
            "reuse_compute, device scalars",
        );
        let second = reference(&later, -1.0);
        assert_eq!(second.1, first.1, "the same pattern");
        let want: Vec<f64> = second
            .2
            .iter()
            .zip(&first.2)
            .map(|(x, y)| x + 2.0 * y)
            .collect();
        assert_eq!(g.read::<f64>(v, nnz), want);

        // C's values split between two arrays are written by a CPU handle
        // only: refused here, C untouched; cleared, reuse_compute runs.
        let (fv, sv) = (g.zeros(nnz * 8), g.zeros(8));
        assert_eq!(rusparseCsrSetSplitValues(m.c, o, fv, o, sv), OK);
        let status = rusparseSpGEMMreuse_compute(h, 0, 0, dal, m.a, m.a, dbe, m.c, R64, 0, m.d);
        assert_eq!(
            status,
            rusparseStatus_t::RUSPARSE_STATUS_NOT_SUPPORTED,
            "{}",
            last_message()
        );
        assert!(
            last_message().contains("only a CPU handle"),
            "{}",
            last_message()
        );
        assert_eq!(g.read::<f64>(v, nnz), want);
        assert_eq!(
            rusparseCsrSetSplitValues(m.c, null_mut(), null_mut(), null_mut(), null_mut()),
            OK
        );
        check(
            rusparseSpGEMMreuse_compute(h, 0, 0, dal, m.a, m.a, dbe, m.c, R64, 0, m.d),
            "reuse_compute, split cleared",
        );
        drop(m);
        rusparseDestroy(h);
    }
    assert_eq!(g.0.live_handles(), 0);
}

#[test]
fn mixed_placements_name_the_pointer_and_predict_runs_on_the_device() {
    let g = Registered::new();
    let (mut r, mut c, mut v) = matrix(3);
    let dev_a = [g.ptr(&r), g.ptr(&c), g.ptr(&v)];
    let host_a: [*mut c_void; 3] = [
        r.as_mut_ptr().cast(),
        c.as_mut_ptr().cast(),
        v.as_mut_ptr().cast(),
    ];
    let buffer = g.zeros(256);
    let mut h = null_mut();
    // SAFETY: arrays of the stated sizes.
    unsafe {
        assert_eq!(rusparseCreate(&mut h), OK);
        let md = Mats::new(dev_a, c.len());
        let mh = Mats::new(host_a, c.len());
        let (alpha, beta) = (1.0f64, 0.0f64);
        let (al, be) = ((&alpha as *const f64).cast(), (&beta as *const f64).cast());
        let mut size = 256usize;
        let s = rusparseSpGEMM_workEstimation(
            h, 0, 0, al, md.a, mh.a, be, md.c, R64, 0, md.d, &mut size, buffer,
        );
        assert_eq!(s, INVALID);
        let msg = last_message();
        assert!(msg.contains("matB's rowOffsets is host memory"), "{msg}");
        assert!(
            msg.contains(&format!("CUDA device {}", g.0.ordinal())),
            "{msg}"
        );

        // The prediction runs on the device (a product this small is
        // counted exactly), and refuses mixed placements too.
        let mut nnz = -1i64;
        check(
            rusparseSpGEMM_predictNnz(h, 0, 0, md.a, md.a, &mut nnz),
            "predictNnz",
        );
        assert_eq!(
            nnz as usize,
            reference(&(r.clone(), c.clone(), v.clone()), 1.0).1.len()
        );
        let s = rusparseSpGEMM_predictNnz(h, 0, 0, md.a, mh.a, &mut nnz);
        assert_eq!(s, INVALID);

        // A CPU handle refuses the device arrays instead of reading them.
        let mut hc = null_mut();
        assert_eq!(rusparseCreateWithBackend(&mut hc, 1), OK);
        let mut host_buffer = [0u8; 256];
        let s = rusparseSpGEMM_workEstimation(
            hc,
            0,
            0,
            al,
            md.a,
            md.a,
            be,
            mh.c,
            R64,
            0,
            mh.d,
            &mut size,
            host_buffer.as_mut_ptr().cast(),
        );
        assert_eq!(s, INVALID);
        assert!(last_message().contains("matA's rowOffsets is memory of CUDA device"));
        drop((md, mh));
        rusparseDestroy(hc);
        rusparseDestroy(h);
    }
}

/// `rusparseSpGEMM_predictNnz` on device arrays samples a product above
/// 2^14 scalar products with the stratified sampler, picking and counting
/// the rows the CPU does: the AUTO handle's prediction on the emulated
/// device equals its prediction on the same arrays in host memory, for
/// op(A) = N and T, one-based.
#[test]
fn predict_nnz_on_device_arrays_equals_the_host_arrays_prediction() {
    let g = Registered::new();
    let n = 1500usize;
    // Power-law rows (400 / k draws for k uniform in 1..=200, canonical),
    // one-based.
    let power_law = |rng: &mut Rng, _| (400 / (rng.below(200) as usize + 1)).max(1);
    let x = random_rows(&mut Rng::new(5), n, n, CANONICAL, power_law, |_| 1.0);
    let (mut rows, mut cols, mut vals) =
        csr_from_rows::<f64, i32, i32>(n, &x, IndexBase::One).into_parts();
    let dev = [g.ptr(&rows), g.ptr(&cols), g.ptr(&vals)];
    let host: [*mut c_void; 3] = [
        rows.as_mut_ptr().cast(),
        cols.as_mut_ptr().cast(),
        vals.as_mut_ptr().cast(),
    ];
    // Both products are sampled: A·A has sum over A's entries (i, k) of
    // len(row k) products, Aᵀ·A sum over rows k of len(row k)^2.
    let len = |k: usize| (rows[k + 1] - rows[k]) as u64;
    let nprod_nn: u64 = cols.iter().map(|&c| len(c as usize - 1)).sum();
    let nprod_tn: u64 = (0..n).map(|k| len(k) * len(k)).sum();
    assert!(
        nprod_nn > 1 << 15 && nprod_tn > 1 << 15,
        "{nprod_nn} {nprod_tn}"
    );
    let (dim, nnz) = (n as i64, cols.len() as i64);
    // SAFETY: arrays of the stated sizes.
    unsafe {
        let mut h = null_mut();
        assert_eq!(rusparseCreate(&mut h), OK);
        let (mut md, mut mh) = (null_mut(), null_mut());
        for (m, p) in [(&mut md, dev), (&mut mh, host)] {
            assert_eq!(
                rusparseCreateCsr(m, dim, dim, nnz, p[0], p[1], p[2], I32, I32, 1, R64),
                OK
            );
        }
        for op_a in [0, 1] {
            let (mut on_device, mut on_host) = (-1i64, -2i64);
            check(
                rusparseSpGEMM_predictNnz(h, op_a, 0, md, md, &mut on_device),
                "predictNnz on the device",
            );
            check(
                rusparseSpGEMM_predictNnz(h, op_a, 0, mh, mh, &mut on_host),
                "predictNnz on the host",
            );
            assert_eq!(on_device, on_host, "op(A) = {op_a}");
            assert!(on_device > 0);
        }
        rusparseDestroySpMat(md);
        rusparseDestroySpMat(mh);
        rusparseDestroy(h);
    }
    assert_eq!(g.0.live_handles(), 0);
}

/// Host arrays on a GPU handle (a handle on the emulated device, as
/// `rusparseCreateWithBackend(CUDA)` makes on a machine with a GPU) are
/// staged: the three phases and the reuse flow run on the device (plan
/// info CUDA, rows in bins), with C copied back into the caller's host
/// arrays, new values of A picked up by each phase, β applied to C's
/// values, α and β read on the host in either pointer mode; host and
/// device arrays mixed are INVALID_VALUE; nothing is left on the device.
#[test]
fn host_arrays_on_a_gpu_handle_are_staged() {
    let g = Registered::new();
    let mut host = matrix(3);
    let baseline = g.0.live_allocations().len();
    let dev: Arc<dyn GpuDevice> = g.0.clone();
    let h = rusparse::ffi::handle::handle_on_device(dev).unwrap();
    let host_a = |x: &mut (Vec<i32>, Vec<i32>, Vec<f64>)| -> [*mut c_void; 3] {
        [
            x.0.as_mut_ptr().cast(),
            x.1.as_mut_ptr().cast(),
            x.2.as_mut_ptr().cast(),
        ]
    };
    let mut buffer = [0u8; 256];
    let buf = buffer.as_mut_ptr().cast::<c_void>();
    // SAFETY: host arrays of the stated sizes, alive until the end.
    unsafe {
        let m = Mats::new(host_a(&mut host), host.1.len());
        let (alpha, beta) = (2.0f64, 0.0f64);
        let (al, be) = ((&alpha as *const f64).cast(), (&beta as *const f64).cast());
        let nnz = estimate_and_compute(h, &m, al, be, buf);
        let want = reference(&host, alpha);
        assert_eq!(nnz, want.1.len());
        let (mut co, mut ck, mut cv) = (vec![0i32; N + 1], vec![0i32; nnz], vec![0f64; nnz]);
        let c_ptrs = [
            co.as_mut_ptr().cast(),
            ck.as_mut_ptr().cast(),
            cv.as_mut_ptr().cast(),
        ];
        assert_eq!(
            rusparseCsrSetPointers(m.c, c_ptrs[0], c_ptrs[1], c_ptrs[2]),
            OK
        );
        check(
            rusparseSpGEMM_copy(h, 0, 0, al, m.a, m.a, be, m.c, R64, 0, m.d),
            "copy",
        );
        assert_eq!((&co, &ck, &cv), (&want.0, &want.1, &want.2));
        let mut backend = -1;
        assert_eq!(
            rusparseSpGEMM_getPlanInfo(m.d, &mut backend, null_mut(), null_mut(), null_mut()),
            OK
        );
        assert_eq!(backend, 2, "the product ran on the (emulated) CUDA device");
        let mut bins = -1;
        assert_eq!(
            rusparseSpGEMM_getBinCounts(m.d, 1, null_mut(), 0, &mut bins),
            OK
        );
        assert!(bins >= 2, "{bins}");
        drop(m);

        // The reuse flow: C = 1.5 A A, then new values of A and, in device
        // pointer mode (host scalars all the same), C = -1 A' A' + 2 C.
        let m = Mats::new(host_a(&mut host), host.1.len());
        let mut sizes = [0usize; 5];
        let [s1, s2, s3, s4, s5] = &mut sizes;
        for b in [null_mut(), buf] {
            check(
                rusparseSpGEMMreuse_workEstimation(h, 0, 0, m.a, m.a, m.c, 0, m.d, s1, b),
                "reuse_workEstimation",
            );
        }
        for b in [null_mut(), buf] {
            check(
                rusparseSpGEMMreuse_nnz(h, 0, 0, m.a, m.a, m.c, 0, m.d, s2, b, s3, b, s4, b),
                "reuse_nnz",
            );
        }
        let (mut co, mut ck, mut cv) = (vec![0i32; N + 1], vec![0i32; nnz], vec![0f64; nnz]);
        let c_ptrs = [
            co.as_mut_ptr().cast(),
            ck.as_mut_ptr().cast(),
            cv.as_mut_ptr().cast(),
        ];
        assert_eq!(
            rusparseCsrSetPointers(m.c, c_ptrs[0], c_ptrs[1], c_ptrs[2]),
            OK
        );
        for b in [null_mut(), buf] {
            check(
                rusparseSpGEMMreuse_copy(h, 0, 0, m.a, m.a, m.c, 0, m.d, s5, b),
                "reuse_copy",
            );
        }
        let alpha = 1.5f64;
        check(
            rusparseSpGEMMreuse_compute(
                h,
                0,
                0,
                (&alpha as *const f64).cast(),
                m.a,
                m.a,
                be,
                m.c,
                R64,
                0,
                m.d,
            ),
            "reuse_compute",
        );
        let first = reference(&host, 1.5);
        assert_eq!((&co, &ck, &cv), (&first.0, &first.1, &first.2));
        let later = matrix(5);
        host.2.copy_from_slice(&later.2);
        assert_eq!(rusparseSetPointerMode(h, 1), OK);
        let (minus_one, two) = (-1.0f64, 2.0f64);
        check(
            rusparseSpGEMMreuse_compute(
                h,
                0,
                0,
                (&minus_one as *const f64).cast(),
                m.a,
                m.a,
                (&two as *const f64).cast(),
                m.c,
                R64,
                0,
                m.d,
            ),
            "reuse_compute, new values and beta",
        );
        let second = reference(&later, -1.0);
        let want: Vec<f64> = second
            .2
            .iter()
            .zip(&first.2)
            .map(|(x, y)| x + 2.0 * y)
            .collect();
        assert_eq!(cv, want);
        assert_eq!(ck, first.1, "the same pattern");
        assert_eq!(rusparseSetPointerMode(h, 0), OK);

        // The prediction of host arrays on the GPU handle: exact here.
        let mut predicted = -1i64;
        check(
            rusparseSpGEMM_predictNnz(h, 0, 0, m.a, m.a, &mut predicted),
            "predictNnz",
        );
        assert_eq!(predicted as usize, nnz);
        drop(m);

        // Host A with C's offsets in device memory: refused, naming both.
        let m = Mats::new(host_a(&mut host), host.1.len());
        let dev_c = g.zeros((N + 1) * 4);
        assert_eq!(
            rusparseCsrSetPointers(m.c, dev_c, null_mut(), null_mut()),
            OK
        );
        let mut size = 256usize;
        let s = rusparseSpGEMM_workEstimation(
            h, 0, 0, al, m.a, m.a, be, m.c, R64, 0, m.d, &mut size, buf,
        );
        assert_eq!(s, INVALID);
        let msg = last_message();
        assert!(
            msg.contains("matC's rowOffsets is memory of CUDA device")
                && msg.contains("copies the product's arrays"),
            "{msg}"
        );
        drop(m);
        g.0.free_input(dev_c as u64);
        rusparseDestroy(h);
    }
    assert_eq!(g.0.live_allocations().len(), baseline, "device memory left");
    assert_eq!(g.0.live_handles(), 0);
}

/// A handle on a device needs a GPU back end: a device that reports the
/// CPU is INVALID_VALUE naming it, and no handle is made.
#[test]
fn a_handle_on_a_device_needs_a_gpu_back_end() {
    let dev: Arc<dyn GpuDevice> = EmulatedDevice::new("H100", DeviceLimits::H100, BackendKind::Cpu);
    let e = rusparse::ffi::handle::handle_on_device(dev).unwrap_err();
    assert!(
        matches!(&e, rusparse::Error::InvalidValue(m)
            if m.contains("emulated H100") && m.contains("not CUDA or HIP")),
        "{e}"
    );
}

/// A declared nnz above `rowOffsets[rows] - base` is spare room at the end
/// of the arrays: on the device (AUTO handle, device arrays) and staged
/// (CUDA handle, host arrays) the product is the one the offsets describe,
/// and the spare entries (an out-of-range column, a NaN) are never read.
/// Offsets that need more entries than declared are INVALID_VALUE.
#[test]
fn spare_room_past_the_offsets_is_never_read() {
    let g = Registered::new();
    let host = matrix(5);
    let want = reference(&host, 1.0);
    let used = host.1.len();
    let mut cols = host.1.clone();
    let mut vals = host.2.clone();
    cols.extend([9999, -7, 9999]);
    vals.extend([f64::NAN; 3]);
    let dev_arrays = [g.ptr(&host.0), g.ptr(&cols), g.ptr(&vals)];
    let host_arrays = [
        host.0.as_ptr() as *mut c_void,
        cols.as_ptr() as *mut c_void,
        vals.as_ptr() as *mut c_void,
    ];
    let buffer = g.zeros(256);
    let mut host_buffer = [0u8; 256];
    let dev: Arc<dyn GpuDevice> = g.0.clone();
    let (alpha, beta) = (1.0f64, 0.0f64);
    let (al, be) = ((&alpha as *const f64).cast(), (&beta as *const f64).cast());
    // SAFETY: arrays of the stated sizes (used + 3 entries) where each
    // handle takes them; host scalars.
    unsafe {
        for on_device in [true, false] {
            let mut h = null_mut();
            let (arrays, buf) = if on_device {
                assert_eq!(rusparseCreate(&mut h), OK);
                (dev_arrays, buffer)
            } else {
                h = rusparse::ffi::handle::handle_on_device(dev.clone()).unwrap();
                (host_arrays, host_buffer.as_mut_ptr().cast())
            };
            let m = Mats::new(arrays, used + 3);
            let nnz = estimate_and_compute(h, &m, al, be, buf);
            assert_eq!(nnz, want.1.len());
            let mut out = (vec![0i32; N + 1], vec![0i32; nnz], vec![0f64; nnz]);
            let (o, k, v) = if on_device {
                (g.zeros((N + 1) * 4), g.zeros(nnz * 4), g.zeros(nnz * 8))
            } else {
                (
                    out.0.as_mut_ptr().cast(),
                    out.1.as_mut_ptr().cast(),
                    out.2.as_mut_ptr().cast(),
                )
            };
            assert_eq!(rusparseCsrSetPointers(m.c, o, k, v), OK);
            check(
                rusparseSpGEMM_copy(h, 0, 0, al, m.a, m.a, be, m.c, R64, 0, m.d),
                "copy",
            );
            if on_device {
                out = (g.read(o, N + 1), g.read(k, nnz), g.read(v, nnz));
            }
            assert_eq!(out, want, "on_device = {on_device}");
            drop(m);
            // One entry fewer declared than the offsets use.
            let m = Mats::new(arrays, used - 1);
            let mut size = 256usize;
            let s = rusparseSpGEMM_workEstimation(
                h, 0, 0, al, m.a, m.a, be, m.c, R64, 0, m.d, &mut size, buf,
            );
            let msg = last_message();
            assert_eq!(s, INVALID, "{msg}");
            assert!(
                msg.contains(&format!("- base = {used} but nnz = {}", used - 1)),
                "{msg}"
            );
            drop(m);
            rusparseDestroy(h);
        }
    }
    assert_eq!(g.0.live_handles(), 0);
}
