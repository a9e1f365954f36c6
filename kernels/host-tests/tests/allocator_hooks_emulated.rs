//! Device allocator hooks on the emulated H100: with
//! `Context::set_device_allocator` every device allocation of a product
//! goes through the caller's allocator (the device counts no allocation
//! the hooks did not ask for), each is given back with its size, the
//! hooks' peak is the device's, and C equals `rusparse::reference`. A
//! refusal at the first or the last allocation fails the product with
//! INSUFFICIENT_RESOURCES saying the allocator refused, leaves no device
//! memory behind, and the next product works. Through the C ABI,
//! `rusparseSetAllocator`'s device hooks take work estimation's device
//! memory on a GPU handle with host arrays (a refusing hook is
//! INSUFFICIENT_RESOURCES), and one hook of a pair alone is INVALID_VALUE.

use rusparse::backend::gpu::{DeviceAllocator, GpuDevice, RawStream};
use rusparse::ffi::allocator::{rusparseDeviceAlloc_t, rusparseSetAllocator};
use rusparse::ffi::errors::rusparseGetLastErrorMessage;
use rusparse::ffi::handle::{handle_on_device, rusparseDestroy};
use rusparse::ffi::matrix::{rusparseCreateCsr, rusparseDestroySpMat};
use rusparse::ffi::rusparseStatus_t;
use rusparse::ffi::spgemm::{
    rusparseSpGEMM_createDescr, rusparseSpGEMM_destroyDescr, rusparseSpGEMM_workEstimation,
};
use rusparse::{reference, Algorithm, Context, CsrMatrix, Error, Op, SpgemmOptions};
use rusparse_kernel_host_tests::device::EmulatedDevice;
use rusparse_kernel_host_tests::hash::HostCsr;
use rusparse_kernel_host_tests::support::{random_rows, CANONICAL};
use rusparse_kernel_host_tests::{small_int_value, variant_rng, Rng, F64I32I32W32};
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

type V = F64I32I32W32;

/// Hooks over the emulated device that count, and refuse the `refuse_at`-th
/// allocation from now on when set.
#[derive(Debug)]
struct Counting {
    dev: Arc<EmulatedDevice>,
    calls: AtomicUsize,
    frees: AtomicUsize,
    refuse_at: Mutex<Option<usize>>,
    bytes: Mutex<Bytes>,
}

/// What the hooks hold.
#[derive(Debug, Default)]
struct Bytes {
    live: usize,
    peak: usize,
    /// Each allocation and its size.
    blocks: Vec<(u64, usize)>,
}

impl Counting {
    fn new(dev: &Arc<EmulatedDevice>) -> Arc<Counting> {
        Arc::new(Counting {
            dev: dev.clone(),
            calls: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
            refuse_at: Mutex::new(None),
            bytes: Mutex::default(),
        })
    }
}

fn stream(s: RawStream) -> Option<RawStream> {
    (!s.is_null()).then_some(s)
}

impl DeviceAllocator for Counting {
    fn alloc(&self, bytes: usize, s: RawStream) -> Option<u64> {
        let n = self.calls.fetch_add(1, SeqCst);
        if *self.refuse_at.lock().unwrap() == Some(n) {
            return None;
        }
        let p = self.dev.alloc(bytes, stream(s)).ok()?;
        let mut b = self.bytes.lock().unwrap();
        b.live += bytes;
        b.peak = b.peak.max(b.live);
        b.blocks.push((p, bytes));
        Some(p)
    }

    unsafe fn free(&self, ptr: u64, bytes: usize, s: RawStream) {
        self.frees.fetch_add(1, SeqCst);
        let mut b = self.bytes.lock().unwrap();
        let i = b.blocks.iter().position(|&x| x == (ptr, bytes));
        assert!(
            i.is_some(),
            "free of {ptr:#x} with {bytes} bytes: not so allocated"
        );
        b.blocks.swap_remove(i.unwrap());
        b.live -= bytes;
        // SAFETY: allocated on this device by `alloc`, freed once.
        unsafe { self.dev.free(ptr, stream(s)) }
    }
}

/// A (48 x 40) and B (40 x 64), 0 to 7 entries a row, and a long row 7 in
/// each for a larger bin.
fn operands() -> (HostCsr<V>, HostCsr<V>) {
    let mut rng = variant_rng::<V>(41);
    let len = |r: &mut Rng, i: usize| if i == 7 { 40 } else { r.below(8) as usize };
    let a = random_rows(&mut rng, 48, 40, CANONICAL, len, small_int_value::<V>);
    let b = random_rows(&mut rng, 40, 64, CANONICAL, len, small_int_value::<V>);
    (HostCsr::from_rows(40, &a, 0), HostCsr::from_rows(64, &b, 0))
}

fn product(
    ctx: &Context,
    (a, b): (&HostCsr<V>, &HostCsr<V>),
) -> Result<CsrMatrix<f64, i32, i32>, Error> {
    let options = SpgemmOptions {
        op_a: Op::N,
        op_b: Op::N,
        alpha: 1.0,
        algorithm: Algorithm::Default,
        column_order: Default::default(),
    };
    ctx.spgemm(&a.view(), &b.view(), &options)
}

#[test]
fn every_device_byte_of_a_product_goes_through_the_hooks() {
    let dev = EmulatedDevice::for_variant::<V>();
    let ctx = Context::on_device(dev.clone()).unwrap();
    let (a, b) = operands();
    let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
    let hooks = Counting::new(&dev);
    ctx.set_device_allocator(Some(hooks.clone()));
    assert!(ctx.device_allocator().is_some());
    let before = dev.allocations();
    dev.reset_peak();
    assert_eq!(product(&ctx, (&a, &b)).unwrap(), want);
    let calls = hooks.calls.load(SeqCst);
    assert!(calls >= 5, "{calls} hooked allocations");
    assert_eq!(
        dev.allocations() - before,
        calls,
        "a device allocation bypassed the hooks"
    );
    assert_eq!(hooks.frees.load(SeqCst), calls);
    let (live, peak, left) = {
        let b = hooks.bytes.lock().unwrap();
        (b.live, b.peak, b.blocks.len())
    };
    assert_eq!((live, left), (0, 0));
    assert!(
        peak > want.nnz() * 12,
        "peak {peak}: C's device copy alone is larger"
    );
    assert_eq!(peak, dev.peak_bytes(), "the hooks' peak is the device's");
    assert!(dev.live_allocations().is_empty());

    // The first allocation refused (staging) and the last (C's copy, after
    // every kernel): a clean refusal, nothing left, and the next product
    // works.
    for k in [0, calls - 1] {
        *hooks.refuse_at.lock().unwrap() = Some(hooks.calls.load(SeqCst) + k);
        let e = product(&ctx, (&a, &b)).expect_err("a refused allocation");
        assert!(
            matches!(&e, Error::InsufficientResources(m)
                if m.contains("device allocator set with rusparseSetAllocator refused")),
            "refusal {k}: {e}"
        );
        assert!(
            dev.live_allocations().is_empty(),
            "refusal {k}: device memory left"
        );
        *hooks.refuse_at.lock().unwrap() = None;
        assert_eq!(product(&ctx, (&a, &b)).unwrap(), want, "after refusal {k}");
    }
    assert_eq!(hooks.bytes.lock().unwrap().live, 0);

    // Without hooks again: the device's own memory.
    ctx.set_device_allocator(None);
    let calls = hooks.calls.load(SeqCst);
    assert_eq!(product(&ctx, (&a, &b)).unwrap(), want);
    assert_eq!(hooks.calls.load(SeqCst), calls);
}

static C_CALLS: AtomicUsize = AtomicUsize::new(0);
static C_LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn c_alloc(bytes: usize, stream: *mut c_void, user: *mut c_void) -> *mut c_void {
    // SAFETY: the test passes its device.
    let dev = unsafe { &*user.cast::<EmulatedDevice>() };
    C_CALLS.fetch_add(1, SeqCst);
    match dev.alloc(bytes, (!stream.is_null()).then_some(stream)) {
        Ok(p) => {
            C_LIVE.fetch_add(bytes, SeqCst);
            p as *mut c_void
        }
        Err(_) => null_mut(),
    }
}

unsafe extern "C" fn c_free(
    ptr: *mut c_void,
    bytes: usize,
    stream: *mut c_void,
    user: *mut c_void,
) {
    // SAFETY: as `c_alloc`; `ptr` came from it.
    unsafe {
        let dev = &*user.cast::<EmulatedDevice>();
        C_LIVE.fetch_sub(bytes, SeqCst);
        dev.free(ptr as u64, (!stream.is_null()).then_some(stream));
    }
}

unsafe extern "C" fn c_refuse(_: usize, _: *mut c_void, _: *mut c_void) -> *mut c_void {
    null_mut()
}

#[test]
fn the_c_abi_routes_device_memory_through_its_hooks() {
    let dev = EmulatedDevice::for_variant::<V>();
    let user = Arc::as_ptr(&dev).cast_mut().cast::<c_void>();
    let h = handle_on_device(dev.clone()).unwrap();
    let (a, _) = operands();
    let v = a.view();
    let (mut off, mut col, mut val) = (
        v.row_offsets().to_vec(),
        v.col_indices().to_vec(),
        v.values().to_vec(),
    );
    let message = || {
        unsafe { CStr::from_ptr(rusparseGetLastErrorMessage()) }
            .to_string_lossy()
            .into_owned()
    };
    let ok = rusparseStatus_t::RUSPARSE_STATUS_SUCCESS;
    // SAFETY: host arrays of the sizes stated, alive until the end; every
    // descriptor and the handle destroyed once.
    unsafe {
        assert_eq!(
            rusparseSetAllocator(h, None, None, Some(c_alloc), None, user),
            rusparseStatus_t::RUSPARSE_STATUS_INVALID_VALUE
        );
        assert!(message().contains("deviceFree is NULL"), "{}", message());
        let mut estimate = |descr_alloc: rusparseDeviceAlloc_t| {
            assert_eq!(
                rusparseSetAllocator(h, None, None, descr_alloc, Some(c_free), user),
                ok
            );
            let (mut ma, mut mc, mut d) = (null_mut(), null_mut(), null_mut());
            let (n, m) = (v.nrows() as i64, v.ncols() as i64);
            assert_eq!(
                rusparseCreateCsr(
                    &mut ma,
                    n,
                    m,
                    v.nnz() as i64,
                    off.as_mut_ptr().cast(),
                    col.as_mut_ptr().cast(),
                    val.as_mut_ptr().cast(),
                    2,
                    2,
                    0,
                    1
                ),
                ok
            );
            assert_eq!(
                rusparseCreateCsr(
                    &mut mc,
                    n,
                    n,
                    0,
                    null_mut(),
                    null_mut(),
                    null_mut(),
                    2,
                    2,
                    0,
                    1
                ),
                ok
            );
            assert_eq!(rusparseSpGEMM_createDescr(&mut d), ok);
            let (alpha, beta) = (1.0f64, 0.0f64);
            let (al, be) = ((&alpha as *const f64).cast(), (&beta as *const f64).cast());
            let (mut size, mut buffer) = (0usize, [0u8; 256]);
            // A * A' is square.
            let mut s = ok;
            for buf in [null_mut(), buffer.as_mut_ptr().cast()] {
                s = rusparseSpGEMM_workEstimation(
                    h, 0, 1, al, ma, ma, be, mc, 1, 0, d, &mut size, buf,
                );
            }
            let m = message();
            assert_eq!(rusparseSpGEMM_destroyDescr(d), ok);
            assert_eq!(rusparseDestroySpMat(mc), ok);
            assert_eq!(rusparseDestroySpMat(ma), ok);
            (s, m)
        };
        let (s, m) = estimate(Some(c_refuse));
        assert_eq!(
            s,
            rusparseStatus_t::RUSPARSE_STATUS_INSUFFICIENT_RESOURCES,
            "{m}"
        );
        assert!(
            m.contains("refused") && m.starts_with("rusparseSpGEMM_workEstimation"),
            "{m}"
        );
        assert!(dev.live_allocations().is_empty());
        let (s, m) = estimate(Some(c_alloc));
        assert_eq!(s, ok, "{m}");
        assert!(
            C_CALLS.load(SeqCst) >= 3,
            "{} hooked allocations",
            C_CALLS.load(SeqCst)
        );
        assert_eq!(
            dev.allocations(),
            C_CALLS.load(SeqCst),
            "a device allocation bypassed the hooks"
        );
        assert_eq!(C_LIVE.load(SeqCst), 0, "hooked device bytes left");
        assert!(dev.live_allocations().is_empty());
        assert_eq!(rusparseDestroy(h), ok);
    }
}
