//! The C ABI with GPU memory: CUDA handles, AUTO placement, mixed
//! placements, device pointer mode.
//!
//! Compiled whenever the `cuda` feature is on; without a GPU every test
//! prints a `SKIPPED` line with the reason and passes, or fails with
//! `RUSPARSE_REQUIRE_GPU=1` (`tests/support`). On a GPU, C = A·A of a small
//! matrix is computed from device arrays through the same calls a C program
//! makes and compared with the CPU handle's result on host arrays.
#![cfg(feature = "cuda")]

mod support;
#[path = "support/gpu.rs"]
mod support_gpu;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use rusparse::backend::cuda::CudaDevice;
use rusparse::ffi::errors::rusparseGetLastErrorMessage;
use rusparse::ffi::handle::*;
use rusparse::ffi::matrix::*;
use rusparse::ffi::spgemm::*;
use rusparse::ffi::spgemm_ext::*;
use rusparse::ffi::*;
use rusparse::IndexBase;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::Arc;
use support::{csr_from_rows, random_rows, Rng, CANONICAL};
use support_gpu::gpu;

fn last_message() -> String {
    // SAFETY: the library returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(rusparseGetLastErrorMessage()) }
        .to_string_lossy()
        .into_owned()
}

const OK: rusparseStatus_t = rusparseStatus_t::RUSPARSE_STATUS_SUCCESS;
const INVALID: rusparseStatus_t = rusparseStatus_t::RUSPARSE_STATUS_INVALID_VALUE;
const I32: i32 = 2;
const R64: i32 = 1;

/// A 6 x 6 test matrix (zero-based, i32, f64): a tridiagonal band plus one
/// long row and one empty row.
fn matrix() -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let mut rows = vec![0];
    let mut cols = Vec::new();
    for i in 0..6i32 {
        if i == 3 {
            rows.push(cols.len() as i32);
            continue;
        }
        let range: Vec<i32> = if i == 5 {
            (0..6).collect()
        } else {
            ((i - 1).max(0)..=(i + 1).min(5)).collect()
        };
        cols.extend(range);
        rows.push(cols.len() as i32);
    }
    let vals = (0..cols.len()).map(|k| (k % 5) as f64 - 2.0).collect();
    (rows, cols, vals)
}

struct Device {
    stream: Arc<CudaStream>,
    keep: Vec<CudaSlice<u8>>,
}

impl Device {
    fn new(dev: &Arc<CudaDevice>) -> Device {
        Device {
            stream: dev.context().default_stream(),
            keep: Vec::new(),
        }
    }
    fn upload<T: Copy>(&mut self, data: &[T]) -> *mut c_void {
        // SAFETY: plain values viewed as bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data))
        };
        let s = self.stream.clone_htod(bytes).unwrap();
        let p = s.device_ptr(&self.stream).0;
        self.keep.push(s);
        p as *mut c_void
    }
    fn alloc(&mut self, bytes: usize) -> *mut c_void {
        let s = self.stream.alloc_zeros::<u8>(bytes.max(8)).unwrap();
        let p = s.device_ptr(&self.stream).0;
        self.keep.push(s);
        p as *mut c_void
    }
    fn download<T: Copy + Default>(&self, p: *mut c_void, n: usize) -> Vec<T> {
        let k = self
            .keep
            .iter()
            .position(|s| s.device_ptr(&self.stream).0 as *mut c_void == p)
            .unwrap();
        let bytes = self.stream.clone_dtoh(&self.keep[k]).unwrap();
        let mut out = vec![T::default(); n];
        // SAFETY: the buffer holds at least n values of T.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                out.as_mut_ptr().cast::<u8>(),
                n * std::mem::size_of::<T>(),
            );
        }
        out
    }
}

/// C's three arrays.
type Csr = (Vec<i32>, Vec<i32>, Vec<f64>);
/// The status and message of a failed call.
type Failure = (rusparseStatus_t, String);

fn check(s: rusparseStatus_t) -> Result<(), Failure> {
    if s == OK {
        Ok(())
    } else {
        Err((s, last_message()))
    }
}

/// C = A·A through the three phases with `buffer` as the external buffers;
/// returns C's arrays (in device memory and downloaded when `dev` is given)
/// or the status and message of the first failing call.
unsafe fn product(
    h: rusparseHandle_t,
    a: [*mut c_void; 3],
    b: [*mut c_void; 3],
    nnz: i64,
    buffer: *mut c_void,
    dev: Option<&mut Device>,
) -> Result<Csr, Failure> {
    let mut ma = null_mut();
    let mut mb = null_mut();
    let mut mc = null_mut();
    let mut d = null_mut();
    assert_eq!(
        rusparseCreateCsr(&mut ma, 6, 6, nnz, a[0], a[1], a[2], I32, I32, 0, R64),
        OK
    );
    assert_eq!(
        rusparseCreateCsr(&mut mb, 6, 6, nnz, b[0], b[1], b[2], I32, I32, 0, R64),
        OK
    );
    assert_eq!(
        rusparseCreateCsr(
            &mut mc,
            6,
            6,
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
    assert_eq!(rusparseSpGEMM_createDescr(&mut d), OK);
    let (alpha, beta) = (1.0f64, 0.0f64);
    let (al, be) = ((&alpha as *const f64).cast(), (&beta as *const f64).cast());
    let run = || -> Result<Csr, Failure> {
        let mut size = 0usize;
        for buf in [null_mut(), buffer] {
            check(rusparseSpGEMM_workEstimation(
                h, 0, 0, al, ma, mb, be, mc, R64, 0, d, &mut size, buf,
            ))?;
        }
        for buf in [null_mut(), buffer] {
            check(rusparseSpGEMM_compute(
                h, 0, 0, al, ma, mb, be, mc, R64, 0, d, &mut size, buf,
            ))?;
        }
        let (mut r, mut c, mut z) = (0, 0, 0);
        assert_eq!(rusparseSpMatGetSize(mc, &mut r, &mut c, &mut z), OK);
        check_bins(d, dev.is_some());
        let n = z as usize;
        match dev {
            Some(g) => {
                let (o, k, v) = (g.alloc(7 * 4), g.alloc(n * 4), g.alloc(n * 8));
                assert_eq!(rusparseCsrSetPointers(mc, o, k, v), OK);
                check(rusparseSpGEMM_copy(h, 0, 0, al, ma, mb, be, mc, R64, 0, d))?;
                Ok((g.download(o, 7), g.download(k, n), g.download(v, n)))
            }
            None => {
                let (mut o, mut k, mut v) = (vec![0i32; 7], vec![0i32; n], vec![0f64; n]);
                let ptrs = [
                    o.as_mut_ptr().cast(),
                    k.as_mut_ptr().cast(),
                    v.as_mut_ptr().cast(),
                ];
                assert_eq!(rusparseCsrSetPointers(mc, ptrs[0], ptrs[1], ptrs[2]), OK);
                check(rusparseSpGEMM_copy(h, 0, 0, al, ma, mb, be, mc, R64, 0, d))?;
                Ok((o, k, v))
            }
        }
    };
    let result = run();
    rusparseSpGEMM_destroyDescr(d);
    rusparseDestroySpMat(ma);
    rusparseDestroySpMat(mb);
    rusparseDestroySpMat(mc);
    result
}

/// `rusparseSpGEMM_getBinCounts` after the symbolic phase: the GPU bins
/// hold between one and all six rows of C in each phase; the CPU back end
/// reports no bins.
unsafe fn check_bins(d: rusparseSpGEMMDescr_t, on_gpu: bool) {
    for which in [0, 1] {
        let mut n = -1;
        assert_eq!(
            rusparseSpGEMM_getBinCounts(d, which, null_mut(), 0, &mut n),
            OK
        );
        if !on_gpu {
            assert_eq!(n, 0, "the CPU back end does not bin rows");
            continue;
        }
        assert!(n >= 2, "phase {which}: {n} bins");
        let mut rows = vec![-1i64; n as usize + 1];
        let mut m = -1;
        assert_eq!(
            rusparseSpGEMM_getBinCounts(d, which, rows.as_mut_ptr(), n + 1, &mut m),
            OK
        );
        assert_eq!(m, n);
        assert_eq!(rows[n as usize], -1, "wrote past numBins");
        let binned: i64 = rows[..n as usize].iter().sum();
        assert!(
            rows[..n as usize].iter().all(|&r| r >= 0) && (1..=6).contains(&binned),
            "phase {which}: rows per bin {rows:?}"
        );
    }
}

fn host_product() -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let (mut r, mut c, mut v) = matrix();
    let arrays = [
        r.as_mut_ptr().cast(),
        c.as_mut_ptr().cast(),
        v.as_mut_ptr().cast(),
    ];
    let mut buffer = [0u8; 256];
    let mut h = null_mut();
    // SAFETY: valid arrays for the stated sizes.
    unsafe {
        assert_eq!(rusparseCreateWithBackend(&mut h, 1), OK);
        let out = product(
            h,
            arrays,
            arrays,
            c.len() as i64,
            buffer.as_mut_ptr().cast(),
            None,
        )
        .unwrap();
        rusparseDestroy(h);
        out
    }
}

#[test]
fn auto_handle_runs_device_arrays_on_the_gpu() {
    let Some(dev) = gpu() else { return };
    let mut g = Device::new(&dev);
    let buffer = g.alloc(256);
    let (r, c, v) = matrix();
    let a = [g.upload(&r), g.upload(&c), g.upload(&v)];
    let mut h = null_mut();
    // SAFETY: device arrays of the stated sizes.
    unsafe {
        assert_eq!(rusparseCreate(&mut h), OK);
        let got = product(h, a, a, c.len() as i64, buffer, Some(&mut g)).unwrap();
        assert_eq!(got, host_product());
        let mut be = -1;
        assert_eq!(rusparseGetBackend(h, &mut be), OK);
        assert_eq!(be, 2, "AUTO handle reports CUDA after a device product");
        rusparseDestroy(h);
    }
}

#[test]
fn cuda_handle_runs_and_refuses_host_arrays() {
    let Some(dev) = gpu() else { return };
    let mut g = Device::new(&dev);
    let buffer = g.alloc(256);
    let (mut r, mut c, mut v) = matrix();
    let dev_a = [g.upload(&r), g.upload(&c), g.upload(&v)];
    let host_a = [
        r.as_mut_ptr().cast(),
        c.as_mut_ptr().cast(),
        v.as_mut_ptr().cast(),
    ];
    let mut h = null_mut();
    // SAFETY: arrays of the stated sizes.
    unsafe {
        assert_eq!(rusparseCreateWithBackend(&mut h, 2), OK);
        let got = product(h, dev_a, dev_a, c.len() as i64, buffer, Some(&mut g)).unwrap();
        assert_eq!(got, host_product());
        let (s, m) = product(h, host_a, host_a, c.len() as i64, buffer, Some(&mut g)).unwrap_err();
        assert_eq!(s, INVALID);
        assert!(m.contains("matA's rowOffsets is host memory"), "{m}");
        rusparseDestroy(h);
    }
}

#[test]
fn mixed_placements_name_the_pointer() {
    let Some(dev) = gpu() else { return };
    let mut g = Device::new(&dev);
    let buffer = g.alloc(256);
    let (mut r, mut c, mut v) = matrix();
    let dev_a = [g.upload(&r), g.upload(&c), g.upload(&v)];
    let host_b = [
        r.as_mut_ptr().cast(),
        c.as_mut_ptr().cast(),
        v.as_mut_ptr().cast(),
    ];
    let mut h = null_mut();
    // SAFETY: arrays of the stated sizes.
    unsafe {
        assert_eq!(rusparseCreate(&mut h), OK);
        let (s, m) = product(h, dev_a, host_b, c.len() as i64, buffer, Some(&mut g)).unwrap_err();
        assert_eq!(s, INVALID);
        assert!(m.contains("matB's rowOffsets is host memory"), "{m}");
        // And a CPU handle refuses device arrays instead of reading them.
        let mut hc = null_mut();
        assert_eq!(rusparseCreateWithBackend(&mut hc, 1), OK);
        let mut host_buffer = [0u8; 256];
        let (s, m) = product(
            hc,
            dev_a,
            dev_a,
            c.len() as i64,
            host_buffer.as_mut_ptr().cast(),
            None,
        )
        .unwrap_err();
        assert_eq!(s, INVALID);
        assert!(
            m.contains("matA's rowOffsets is memory of CUDA device 0"),
            "{m}"
        );
        rusparseDestroy(hc);
        rusparseDestroy(h);
    }
}

#[test]
fn predict_nnz_runs_on_device_arrays() {
    let Some(dev) = gpu() else { return };
    let mut g = Device::new(&dev);
    let (r, c, v) = matrix();
    let a = [g.upload(&r), g.upload(&c), g.upload(&v)];
    let mut h = null_mut();
    let mut ma = null_mut();
    let mut nnz = -1i64;
    // SAFETY: device arrays of the stated sizes.
    unsafe {
        assert_eq!(rusparseCreate(&mut h), OK);
        assert_eq!(
            rusparseCreateCsr(
                &mut ma,
                6,
                6,
                c.len() as i64,
                a[0],
                a[1],
                a[2],
                I32,
                I32,
                0,
                R64
            ),
            OK
        );
        // A product this small is counted exactly on the device.
        let s = rusparseSpGEMM_predictNnz(h, 0, 0, ma, ma, &mut nnz);
        assert_eq!(s, OK, "{}", last_message());
        assert_eq!(nnz as usize, host_product().1.len());
        rusparseDestroySpMat(ma);
        rusparseDestroy(h);
    }
    // A sampled product (about 10^6 products, power-law rows): the device
    // picks and counts the rows the CPU does, so the same prediction, for
    // op N and op T.
    let n = 4000usize;
    // 600 / k draws for k uniform in 1..=300, canonical.
    let power_law = |rng: &mut Rng, _| (600 / (rng.below(300) as usize + 1)).max(1);
    let x = random_rows(&mut Rng::new(5), n, n, CANONICAL, power_law, |_| 1.0);
    let (rows, cols, vals) = csr_from_rows::<f64, i32, i32>(n, &x, IndexBase::Zero).into_parts();
    let d = [g.upload(&rows), g.upload(&cols), g.upload(&vals)];
    let host = [rows.as_ptr(), cols.as_ptr().cast(), vals.as_ptr().cast()];
    // SAFETY: host and device arrays of the stated sizes.
    unsafe {
        let mut h = null_mut();
        assert_eq!(rusparseCreate(&mut h), OK);
        let (mut md, mut mh) = (null_mut(), null_mut());
        let nnz = cols.len() as i64;
        let n = n as i64;
        assert_eq!(
            rusparseCreateCsr(&mut md, n, n, nnz, d[0], d[1], d[2], I32, I32, 0, R64),
            OK
        );
        assert_eq!(
            rusparseCreateCsr(
                &mut mh,
                n,
                n,
                nnz,
                host[0] as *mut c_void,
                host[1] as *mut c_void,
                host[2] as *mut c_void,
                I32,
                I32,
                0,
                R64
            ),
            OK
        );
        for op_a in [0, 1] {
            let (mut on_gpu, mut on_cpu) = (-1i64, -2i64);
            let s = rusparseSpGEMM_predictNnz(h, op_a, 0, md, md, &mut on_gpu);
            assert_eq!(s, OK, "{}", last_message());
            let s = rusparseSpGEMM_predictNnz(h, op_a, 0, mh, mh, &mut on_cpu);
            assert_eq!(s, OK, "{}", last_message());
            assert_eq!(on_gpu, on_cpu, "op(A) = {op_a}");
        }
        rusparseDestroySpMat(md);
        rusparseDestroySpMat(mh);
        rusparseDestroy(h);
    }
}
