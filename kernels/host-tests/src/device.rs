//! An emulated GPU: [`EmulatedDevice`] implements rusparse's
//! [`GpuDevice`] with host memory and the host-emulated kernels, so
//! rusparse's real GPU pipeline ([`rusparse::backend::gpu::GpuSpgemm`]: its
//! binning, spills, batches of global tables, transposes, stream forks,
//! error reports and frees) runs on the host against the reference.
//!
//! Launches go through `kernels/testing/launch_by_name.cpp`, one entry point
//! per variant that takes the kernel's name and `cuLaunchKernel`-style
//! argument pointers. Everything runs at once on the calling thread, so
//! streams and events only need to be tracked, not honoured; what the
//! emulation checks instead:
//!
//! * every copy, memset and download lies inside one live allocation;
//! * every free names a live allocation (no double free), and
//!   [`EmulatedDevice::live_allocations`] lets a test check that a plan
//!   gives back everything it took;
//! * streams and events are destroyed once and only after being created;
//! * launches stay within the device's limits (threads per block, shared
//!   memory), as a device would refuse them;
//! * [`EmulatedDevice::fail_allocation`] makes a chosen allocation fail
//!   with [`Error::InsufficientResources`], for the pipeline's error paths.

use rusparse::backend::gpu::launch::LaunchConfig;
use rusparse::backend::gpu::{GpuDevice, GpuKernels, KernelTypes, RawEvent, RawStream, ValueKind};
use rusparse::plan::gpu_bins::DeviceLimits;
use rusparse::{BackendKind, Error, Result};
use std::alloc::Layout;
use std::collections::{BTreeMap, HashSet};
use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// `rs_host_launch_by_name_<suffix>`.
type LaunchByName = unsafe extern "C" fn(*const c_char, i64, i64, i64, *mut *mut c_void) -> i32;

macro_rules! launch_by_name_fns {
    ($($sfx:literal => $fname:ident),* $(,)?) => {
        extern "C" {
            $(
                #[link_name = concat!("rs_host_launch_by_name_", $sfx)]
                fn $fname(name: *const c_char, grid: i64, block: i64, shared: i64, args: *mut *mut c_void) -> i32;
            )*
        }
    };
}
launch_by_name_fns!(
    "f64_i32_i32_w32" => by_name_f64_i32_i32_w32,
    "f64_i32_i32_w64" => by_name_f64_i32_i32_w64,
    "f32_i64_i32_w32" => by_name_f32_i64_i32_w32,
    "c64_i64_i64_w64" => by_name_c64_i64_i64_w64,
    "c32_i32_i64_w32" => by_name_c32_i32_i64_w32,
);

/// The compiled variant for `types` at warp width `warp`, if any (see the
/// variant table in the crate docs).
fn variant(types: KernelTypes, warp: u32) -> Option<(LaunchByName, &'static str)> {
    use ValueKind::*;
    let t = (types.value, types.offset64, types.index64, warp);
    Some(match t {
        (F64, false, false, 32) => (by_name_f64_i32_i32_w32 as LaunchByName, "f64_i32_i32_w32"),
        (F64, false, false, 64) => (by_name_f64_i32_i32_w64, "f64_i32_i32_w64"),
        (F32, true, false, 32) => (by_name_f32_i64_i32_w32, "f32_i64_i32_w32"),
        (C64, true, true, 64) => (by_name_c64_i64_i64_w64, "c64_i64_i64_w64"),
        (C32, false, true, 32) => (by_name_c32_i32_i64_w32, "c32_i32_i64_w32"),
        _ => return None,
    })
}

/// Whether the emulation has kernels for `types` at warp width `warp`.
pub fn has_variant(types: KernelTypes, warp: u32) -> bool {
    variant(types, warp).is_some()
}

/// Allocations are aligned like `cuMemAlloc`'s.
const ALIGN: usize = 256;

#[derive(Debug, Default)]
struct Tracked {
    /// Live allocations: start address -> bytes.
    memory: BTreeMap<u64, usize>,
    streams: HashSet<usize>,
    events: HashSet<usize>,
    /// Allocations made so far (fails are counted too).
    allocations: usize,
    /// The 1-based allocation that fails, if any.
    fail_at: Option<usize>,
    bytes_live: usize,
    bytes_peak: usize,
    /// The device's memory ([`EmulatedDevice::set_capacity`]); `None`:
    /// only the host's.
    capacity: Option<usize>,
}

/// A GPU emulated on the host (see the module docs).
#[derive(Debug)]
pub struct EmulatedDevice {
    name: String,
    /// From 100 on, so no real device shares it (see
    /// `rusparse::backend::gpu::registry`).
    ordinal: usize,
    limits: DeviceLimits,
    backend: BackendKind,
    tracked: Mutex<Tracked>,
    next_handle: AtomicUsize,
    launches: Arc<AtomicUsize>,
    /// What the loaded kernels report as their most threads a block (as
    /// registers can limit a real compilation); the planner must stay within.
    kernel_threads: AtomicUsize,
}

impl EmulatedDevice {
    /// A device with `limits` (one of [`DeviceLimits`]' reference
    /// devices), reporting itself as `backend` (`Cuda` or `Hip`).
    pub fn new(name: &str, limits: DeviceLimits, backend: BackendKind) -> Arc<EmulatedDevice> {
        static NEXT_ORDINAL: AtomicUsize = AtomicUsize::new(100);
        Arc::new(EmulatedDevice {
            name: format!("emulated {name}"),
            ordinal: NEXT_ORDINAL.fetch_add(1, Ordering::Relaxed),
            limits,
            backend,
            tracked: Mutex::default(),
            next_handle: AtomicUsize::new(1),
            launches: Arc::new(AtomicUsize::new(0)),
            kernel_threads: AtomicUsize::new(u32::MAX as usize),
        })
    }

    /// The device a variant's kernels run on: an H100 (CUDA) for warp 32,
    /// an MI50 / Hygon DCU (HIP, wavefront 64) for warp 64.
    pub fn for_variant<V: crate::Variant>() -> Arc<EmulatedDevice> {
        if V::WARP == 64 {
            EmulatedDevice::new("MI50", DeviceLimits::MI50, BackendKind::Hip)
        } else {
            EmulatedDevice::new("H100", DeviceLimits::H100, BackendKind::Cuda)
        }
    }

    fn tracked(&self) -> std::sync::MutexGuard<'_, Tracked> {
        self.tracked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Allocations not yet freed, as `(address, bytes)`.
    pub fn live_allocations(&self) -> Vec<(u64, usize)> {
        self.tracked()
            .memory
            .iter()
            .map(|(&a, &b)| (a, b))
            .collect()
    }

    /// Streams and events created and not yet destroyed.
    pub fn live_handles(&self) -> usize {
        let t = self.tracked();
        t.streams.len() + t.events.len()
    }

    /// Allocations the code under test requested so far.
    pub fn allocations(&self) -> usize {
        self.tracked().allocations
    }

    /// The most bytes allocated at once so far.
    pub fn peak_bytes(&self) -> usize {
        self.tracked().bytes_peak
    }

    /// Kernel launches so far.
    pub fn launches(&self) -> usize {
        self.launches.load(Ordering::Relaxed)
    }

    /// Makes the kernels loaded from now on report at most `threads`
    /// threads a block for the planner-sized kernels, as a compilation
    /// whose registers limit it would (CUDA's
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`); a launch above it fails.
    pub fn limit_kernel_threads(&self, threads: u32) {
        self.kernel_threads
            .store(threads as usize, Ordering::Relaxed);
    }

    /// Gives the device `bytes` of memory: an allocation that would take
    /// the live bytes (inputs included) past it fails with
    /// [`Error::InsufficientResources`], and [`GpuDevice::free_memory`]
    /// reports what is left, as a real device's would.
    pub fn set_capacity(&self, bytes: usize) {
        self.tracked().capacity = Some(bytes);
    }

    /// Starts a new peak at the bytes live now.
    pub fn reset_peak(&self) {
        let mut t = self.tracked();
        t.bytes_peak = t.bytes_live;
    }

    /// Bytes allocated now (inputs included).
    pub fn live_bytes(&self) -> usize {
        self.tracked().bytes_live
    }

    /// Makes the `k`-th allocation from now (1-based) fail with
    /// [`Error::InsufficientResources`]; `None` stops failing.
    pub fn fail_allocation(&self, k: Option<usize>) {
        let mut t = self.tracked();
        t.fail_at = k.map(|k| t.allocations + k);
    }

    /// Copies `data` into a new allocation (a test's input matrix or
    /// output buffer). Not counted by [`EmulatedDevice::allocations`] and
    /// never made to fail.
    ///
    /// # Panics
    /// When the host is out of memory.
    pub fn upload_new<T: Copy>(&self, data: &[T]) -> u64 {
        let bytes = std::mem::size_of_val(data).max(1);
        let ptr = self.allocate(bytes, false).expect("test input allocation");
        // SAFETY: fresh allocation of at least `bytes`; `T: Copy` data.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr().cast::<u8>(),
                ptr as *mut u8,
                std::mem::size_of_val(data),
            );
        }
        ptr
    }

    /// Reads `n` values of `T` at `ptr` (a test's output).
    ///
    /// # Panics
    /// When the range is not inside one live allocation.
    pub fn read_back<T: Copy + Default>(&self, ptr: u64, n: usize) -> Vec<T> {
        let mut out = vec![T::default(); n];
        if n == 0 {
            return out;
        }
        self.check_range(ptr, n * std::mem::size_of::<T>(), "read_back")
            .unwrap();
        // SAFETY: checked to lie inside a live allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr as *const T, out.as_mut_ptr(), n);
        }
        out
    }

    /// Frees an allocation of [`EmulatedDevice::upload_new`].
    pub fn free_input(&self, ptr: u64) {
        // SAFETY: the test's own allocation, freed once.
        unsafe { self.free(ptr, None) }
    }

    fn check_range(&self, ptr: u64, bytes: usize, what: &str) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        if self.lies_inside(ptr, bytes as u64) {
            Ok(())
        } else {
            Err(Error::InternalError(format!(
                "emulated device: {what} of {bytes} bytes at {ptr:#x} is not inside one live allocation"
            )))
        }
    }

    /// Whether `ptr..ptr + bytes` lies inside one live allocation.
    fn lies_inside(&self, ptr: u64, bytes: u64) -> bool {
        self.tracked()
            .memory
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&start, &len)| ptr + bytes <= start + len as u64)
    }

    /// An allocation of `bytes`, filled with a pattern (device memory
    /// starts undefined, and code that reads it before writing must fail);
    /// `counted` ones may be made to fail.
    fn allocate(&self, bytes: usize, counted: bool) -> Result<u64> {
        let mut t = self.tracked();
        if counted {
            t.allocations += 1;
            if t.fail_at == Some(t.allocations) {
                return Err(Error::InsufficientResources(format!(
                    "emulated device: allocation {} of {bytes} bytes made to fail",
                    t.allocations
                )));
            }
        }
        if let Some(cap) = t.capacity.filter(|&cap| t.bytes_live + bytes > cap) {
            return Err(Error::InsufficientResources(format!(
                "emulated device: out of memory: {bytes} bytes asked, {} of {cap} in use",
                t.bytes_live
            )));
        }
        let layout = Layout::from_size_align(bytes.max(1), ALIGN)
            .map_err(|e| Error::InsufficientResources(format!("{bytes} bytes: {e}")))?;
        // SAFETY: non-zero size. Filled with a pattern: device memory
        // starts undefined, and code that reads it before writing must fail.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return Err(Error::InsufficientResources(format!(
                "emulated device: out of host memory for {bytes} bytes"
            )));
        }
        // SAFETY: `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(ptr, 0xA5, bytes) };
        t.memory.insert(ptr as u64, bytes.max(1));
        t.bytes_live += bytes;
        t.bytes_peak = t.bytes_peak.max(t.bytes_live);
        Ok(ptr as u64)
    }

    fn new_handle(&self) -> usize {
        self.next_handle.fetch_add(1, Ordering::Relaxed) * 16
    }
}

impl GpuDevice for EmulatedDevice {
    fn backend(&self) -> BackendKind {
        self.backend
    }

    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn holds(&self, addr: usize) -> bool {
        self.lies_inside(addr as u64, 1)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    fn bind(&self) -> Result<()> {
        Ok(())
    }

    fn kernels(&self, types: KernelTypes) -> Result<Arc<dyn GpuKernels>> {
        let (launch, suffix) = variant(types, self.limits.warp).ok_or_else(|| {
            Error::NotSupported(format!(
                "the host emulation has no kernels for {types} at warp width {}",
                self.limits.warp
            ))
        })?;
        Ok(Arc::new(EmulatedKernels {
            launch,
            suffix,
            limits: self.limits,
            kernel_threads: self.kernel_threads.load(Ordering::Relaxed) as u32,
            launches: self.launches.clone(),
        }))
    }

    fn alloc(&self, bytes: usize, _stream: Option<RawStream>) -> Result<u64> {
        self.allocate(bytes, true)
    }

    fn free_memory(&self) -> Option<u64> {
        let t = self.tracked();
        t.capacity
            .map(|cap| cap.saturating_sub(t.bytes_live) as u64)
    }

    unsafe fn free(&self, ptr: u64, _stream: Option<RawStream>) {
        let mut t = self.tracked();
        let bytes = t
            .memory
            .remove(&ptr)
            .unwrap_or_else(|| panic!("emulated device: free of {ptr:#x}, not a live allocation"));
        t.bytes_live -= bytes.min(t.bytes_live);
        let layout = Layout::from_size_align(bytes, ALIGN).expect("layout of a live allocation");
        // SAFETY: allocated in `alloc` with this layout, freed once.
        unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
    }

    unsafe fn memset(&self, dst: u64, byte: u8, bytes: usize, _stream: RawStream) -> Result<()> {
        self.check_range(dst, bytes, "memset")?;
        // SAFETY: checked.
        unsafe { std::ptr::write_bytes(dst as *mut u8, byte, bytes) };
        Ok(())
    }

    unsafe fn upload(&self, dst: u64, src: &[u8], _stream: RawStream) -> Result<()> {
        self.check_range(dst, src.len(), "upload")?;
        // SAFETY: checked.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    unsafe fn download(&self, dst: &mut [u8], src: u64, _stream: RawStream) -> Result<()> {
        self.check_range(src, dst.len(), "download")?;
        // SAFETY: checked.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    unsafe fn copy(&self, dst: u64, src: u64, bytes: usize, _stream: RawStream) -> Result<()> {
        self.check_range(dst, bytes, "copy (destination)")?;
        self.check_range(src, bytes, "copy (source)")?;
        // SAFETY: checked; the pipeline never copies overlapping ranges.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
        Ok(())
    }

    fn create_stream(&self) -> Result<RawStream> {
        let h = self.new_handle();
        self.tracked().streams.insert(h);
        Ok(h as RawStream)
    }

    unsafe fn destroy_stream(&self, stream: RawStream) {
        assert!(
            self.tracked().streams.remove(&(stream as usize)),
            "emulated device: destroying {stream:?}, not a live stream"
        );
    }

    fn create_event(&self) -> Result<RawEvent> {
        let h = self.new_handle();
        self.tracked().events.insert(h);
        Ok(h as RawEvent)
    }

    unsafe fn destroy_event(&self, event: RawEvent) {
        assert!(
            self.tracked().events.remove(&(event as usize)),
            "emulated device: destroying {event:?}, not a live event"
        );
    }

    unsafe fn record(&self, event: RawEvent, stream: RawStream) -> Result<()> {
        let t = self.tracked();
        if !t.events.contains(&(event as usize)) {
            return Err(Error::InternalError(format!(
                "emulated device: recording {event:?}, not a live event"
            )));
        }
        if !stream.is_null() && !t.streams.contains(&(stream as usize)) {
            return Err(Error::InternalError(format!(
                "emulated device: recording on {stream:?}, not a live stream"
            )));
        }
        Ok(())
    }

    unsafe fn wait(&self, stream: RawStream, event: RawEvent) -> Result<()> {
        // SAFETY: the same checks as `record`.
        unsafe { self.record(event, stream) }
    }

    unsafe fn synchronize(&self, event: RawEvent) -> Result<()> {
        // SAFETY: the same checks as `record` on the default stream.
        unsafe { self.record(event, std::ptr::null_mut()) }
    }
}

/// The kernels of one variant.
#[derive(Debug)]
struct EmulatedKernels {
    launch: LaunchByName,
    suffix: &'static str,
    limits: DeviceLimits,
    /// What the kernels report as their most threads a block.
    kernel_threads: u32,
    /// The device's launch count.
    launches: Arc<AtomicUsize>,
}

impl GpuKernels for EmulatedKernels {
    fn max_threads_per_block(&self) -> u32 {
        self.kernel_threads
    }

    unsafe fn launch(
        &self,
        name: &str,
        config: LaunchConfig,
        _stream: RawStream,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        let LaunchConfig {
            grid,
            block,
            shared,
        } = config;
        let l = &self.limits;
        let planner_sized = rusparse::backend::gpu::launch::planner_sized(name);
        if grid == 0
            || block == 0
            || block > l.max_threads_per_block
            || (planner_sized && block > self.kernel_threads)
            || !block.is_multiple_of(l.warp)
        {
            return Err(Error::ExecutionFailed(format!(
                "emulated device: {name} launched with grid {grid}, block {block} (warp {}, at most {} threads; the kernels allow {})",
                l.warp, l.max_threads_per_block, self.kernel_threads
            )));
        }
        if shared > l.shared_per_block_optin {
            return Err(Error::ExecutionFailed(format!(
                "emulated device: {name} asks for {shared} bytes of shared memory, the device has {}",
                l.shared_per_block_optin
            )));
        }
        let c_name = CString::new(name).map_err(|_| Error::InternalError("kernel name".into()))?;
        // SAFETY: the caller's contract (argument types and lifetimes).
        let r = unsafe {
            (self.launch)(
                c_name.as_ptr(),
                i64::from(grid),
                i64::from(block),
                i64::from(shared),
                args.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(Error::InternalError(format!(
                "emulated device ({}): no kernel named {name}",
                self.suffix
            )));
        }
        self.launches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
