//! One HIP device: its limits, its kernels (hiprtc code objects, one module
//! per type combination) and [`GpuDevice`] over libamdhip64, so the shared
//! pipeline ([`crate::backend::gpu::GpuSpgemm`]) runs on AMD GPUs and
//! Hygon DCUs.
//!
//! The runtime is loaded at run time ([`super::loader`]); its attribute and
//! memory-type numbers are ROCm 5's (Debian's 5.2 headers). Every number
//! read from the device is checked for plausibility (warp 32 or 64 and the
//! one the architecture name implies, a block of at least a warp, 16 KiB to
//! 1 MiB of LDS), so a runtime whose numbering moved is refused with
//! NOT_SUPPORTED instead of planning from nonsense.

use super::compile::{cached_code_object, wavefront_of_arch, HipKernelOptions};
use super::loader::{c_text, runtime, HipError, HipHandle, HipRuntime};
use crate::backend::gpu::device::StreamOrderedAlloc;
use crate::backend::gpu::launch::{planner_sized, threads_for, LaunchConfig, KERNEL_PARAMS};
use crate::backend::gpu::{GpuDevice, GpuKernels, RawEvent, RawStream};
use crate::backend::kernel_cache::DiskCache;
use crate::backend::kernel_source::{kernel_source, KernelTypes};
use crate::error::{Error, Result};
use crate::plan::gpu_bins::DeviceLimits;
use crate::types::BackendKind;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::{Arc, Mutex, OnceLock};

/// `hipDeviceAttribute_t` numbers (ROCm 5, `hip_runtime_api.h`).
mod attr {
    pub const MAX_THREADS_PER_BLOCK: i32 = 56;
    pub const MAX_THREADS_PER_MULTIPROCESSOR: i32 = 57;
    pub const MULTIPROCESSOR_COUNT: i32 = 63;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 74;
    pub const WARP_SIZE: i32 = 87;
    pub const MEMORY_POOLS_SUPPORTED: i32 = 88;
    pub const MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: i32 = 10002;
}

/// `hipStreamNonBlocking`, `hipEventDisableTiming`.
const STREAM_NON_BLOCKING: u32 = 1;
const EVENT_DISABLE_TIMING: u32 = 2;
/// `hipErrorOutOfMemory`.
const ERROR_OUT_OF_MEMORY: HipError = 2;
/// `hipErrorInvalidValue`: for a pointer, memory the runtime never saw.
const ERROR_INVALID_VALUE: HipError = 1;
/// `hipErrorNotSupported`.
const ERROR_NOT_SUPPORTED: HipError = 801;
/// `hipErrorNoBinaryForGpu`, `hipErrorInvalidImage`.
const ERROR_NO_BINARY: HipError = 209;
const ERROR_INVALID_IMAGE: HipError = 200;
/// Bytes of `hipDeviceProp_t` (ROCm 5: 792) with room to spare, and where
/// its `gcnArchName[256]` starts.
const PROPS_BYTES: usize = 4096;
const PROPS_GCN_ARCH_NAME: usize = 396;

/// The runtime, or NOT_SUPPORTED with the loader's reason.
fn rt() -> Result<&'static HipRuntime> {
    runtime().map_err(Error::NotSupported)
}

/// A HIP error as `hipErrorName (description)` naming `what`; out of memory
/// becomes [`Error::InsufficientResources`], a code object the device cannot
/// run [`Error::ArchMismatch`].
pub(crate) fn hip_error(what: &str, e: HipError) -> Error {
    let text = match runtime() {
        // SAFETY: both take any value and return static strings.
        Ok(rt) => unsafe {
            format!(
                "{} ({})",
                c_text((rt.get_error_name)(e), "unknown HIP error"),
                c_text((rt.get_error_string)(e), "")
            )
        },
        Err(_) => format!("HIP error {e}"),
    };
    let msg = format!("{what}: {text}");
    match e {
        ERROR_OUT_OF_MEMORY => Error::InsufficientResources(msg),
        ERROR_NO_BINARY | ERROR_INVALID_IMAGE => Error::ArchMismatch(msg),
        _ => Error::ExecutionFailed(msg),
    }
}

/// `Ok` for `hipSuccess`, else [`hip_error`].
fn check(what: &str, e: HipError) -> Result<()> {
    if e == 0 {
        Ok(())
    } else {
        Err(hip_error(what, e))
    }
}

/// The kernels of one type combination: a loaded code object.
#[derive(Debug)]
pub struct HipModule {
    module: HipHandle,
    functions: HashMap<&'static str, usize>,
    /// The least `HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK` of the
    /// planner-sized kernels.
    planner_threads: u32,
}

// SAFETY: module and function handles may be used from any thread once the
// device is current, which every pipeline call ensures.
unsafe impl Send for HipModule {}
// SAFETY: as above; `&self` only reads the table.
unsafe impl Sync for HipModule {}

impl Drop for HipModule {
    fn drop(&mut self) {
        if let Ok(rt) = rt() {
            // SAFETY: loaded once by hipModuleLoadData, unloaded once.
            unsafe { (rt.module_unload)(self.module) };
        }
    }
}

impl GpuKernels for HipModule {
    fn max_threads_per_block(&self) -> u32 {
        self.planner_threads
    }

    unsafe fn launch(
        &self,
        name: &str,
        config: LaunchConfig,
        stream: RawStream,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        let LaunchConfig {
            grid,
            block,
            shared,
        } = config;
        let f = *self
            .functions
            .get(name)
            .ok_or_else(|| Error::InternalError(format!("kernel {name} is not in the module")))?;
        let rt = rt()?;
        // SAFETY: the caller's contract (argument types and lifetimes).
        let e = unsafe {
            (rt.module_launch_kernel)(
                f as HipHandle,
                grid,
                1,
                1,
                block,
                1,
                1,
                shared,
                stream,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check("hipModuleLaunchKernel", e)
    }
}

/// One HIP device (see the module docs).
#[derive(Debug)]
pub struct HipDevice {
    ordinal: usize,
    name: String,
    /// `gcnArchName`, e.g. `gfx906` or `gfx90a:sramecc+:xnack-`.
    arch: String,
    limits: DeviceLimits,
    async_alloc: StreamOrderedAlloc,
    modules: Mutex<HashMap<KernelTypes, Arc<HipModule>>>,
}

impl HipDevice {
    /// The device with this ordinal, opened on first use and shared
    /// afterwards.
    ///
    /// # Errors
    /// [`Error::NotSupported`] without a runtime or such a device, or when
    /// the device reports implausible limits (see the module docs).
    pub fn get(ordinal: usize) -> Result<Arc<HipDevice>> {
        let _process_wide = crate::host_allocator::process_wide();
        static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<HipDevice>>>> = OnceLock::new();
        let count = super::probe()?;
        if ordinal >= count as usize {
            return Err(Error::NotSupported(format!(
                "HIP device {ordinal} does not exist ({count} found)"
            )));
        }
        let mut map = DEVICES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(d) = map.get(&ordinal) {
            return Ok(d.clone());
        }
        let dev = Arc::new(HipDevice::open(ordinal)?);
        map.insert(ordinal, dev.clone());
        Ok(dev)
    }

    /// The device current on this thread (`hipSetDevice`), else 0.
    ///
    /// # Errors
    /// As [`HipDevice::get`].
    pub fn current() -> Result<Arc<HipDevice>> {
        let rt = rt()?;
        super::probe()?;
        let mut d: c_int = 0;
        // SAFETY: a writable int.
        let ordinal = if unsafe { (rt.get_device)(&mut d) } == 0 && d >= 0 {
            d as usize
        } else {
            0
        };
        HipDevice::get(ordinal)
    }

    fn open(ordinal: usize) -> Result<HipDevice> {
        let rt = rt()?;
        let dev = ordinal as c_int;
        let what = format!("HIP device {ordinal}");
        let attribute = |a: i32| -> Result<u32> {
            let mut v: c_int = 0;
            // SAFETY: a writable int; the runtime checks `a`.
            check(&format!("{what}: hipDeviceGetAttribute({a})"), unsafe {
                (rt.device_get_attribute)(&mut v, a, dev)
            })?;
            Ok(v.max(0) as u32)
        };
        let mut name = vec![0 as c_char; 256];
        // SAFETY: `name` holds 256 bytes.
        check(&what, unsafe {
            (rt.device_get_name)(name.as_mut_ptr(), 256, dev)
        })?;
        // SAFETY: NUL-terminated within the buffer (zeroed, 256 bytes).
        let name = unsafe { c_text(name.as_ptr(), "unknown") };
        let mut props = vec![0u8; PROPS_BYTES];
        // SAFETY: `props` is larger than any hipDeviceProp_t.
        check(&what, unsafe {
            (rt.get_device_properties)(props.as_mut_ptr().cast(), dev)
        })?;
        let arch_bytes = &props[PROPS_GCN_ARCH_NAME..PROPS_GCN_ARCH_NAME + 256];
        let end = arch_bytes.iter().position(|&b| b == 0).unwrap_or(256);
        let arch = String::from_utf8_lossy(&arch_bytes[..end]).into_owned();
        let shared = attribute(attr::MAX_SHARED_MEMORY_PER_BLOCK)?;
        let limits = DeviceLimits {
            warp: attribute(attr::WARP_SIZE)?,
            sm_count: attribute(attr::MULTIPROCESSOR_COUNT)?,
            max_threads_per_block: attribute(attr::MAX_THREADS_PER_BLOCK)?,
            max_threads_per_sm: attribute(attr::MAX_THREADS_PER_MULTIPROCESSOR)?,
            shared_per_block: shared,
            // AMD devices give a block its whole LDS without opting in.
            shared_per_block_optin: shared,
            shared_per_sm: attribute(attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
                .unwrap_or(shared)
                .max(shared),
            reserved_shared_per_block: 0,
        };
        check_limits(&what, &arch, &limits)?;
        Ok(HipDevice {
            ordinal,
            name,
            arch,
            limits,
            async_alloc: StreamOrderedAlloc::new(
                rt.malloc_async.is_some()
                    && rt.free_async.is_some()
                    && attribute(attr::MEMORY_POOLS_SUPPORTED).unwrap_or(0) == 1,
            ),
            modules: Mutex::new(HashMap::new()),
        })
    }

    /// The `gcnArchName` the kernels are compiled for.
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The kernels for `types`: from the in-memory cache, else the disk
    /// cache, else hiprtc (about a second per type combination).
    ///
    /// # Errors
    /// [`Error::NotSupported`] without hiprtc; compile and load errors
    /// otherwise.
    pub fn module(&self, types: KernelTypes) -> Result<Arc<HipModule>> {
        let _process_wide = crate::host_allocator::process_wide();
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = modules.get(&types) {
            return Ok(m.clone());
        }
        self.bind()?;
        let opts = HipKernelOptions {
            types,
            warp: self.limits.warp,
            arch: self.arch.clone(),
        };
        let (image, _) = cached_code_object(&DiskCache::from_env(), kernel_source(), &opts)?;
        let rt = rt()?;
        let what = format!("loading the kernels ({types}) for {}", self.arch);
        let mut module: HipHandle = std::ptr::null_mut();
        // SAFETY: a code object hiprtc produced (checked to be an AMD GPU
        // ELF), alive for the call.
        check(&what, unsafe {
            (rt.module_load_data)(&mut module, image.as_ptr().cast())
        })?;
        let mut m = HipModule {
            module,
            functions: HashMap::new(),
            planner_threads: u32::MAX,
        };
        for &(name, _) in KERNEL_PARAMS {
            let c_name = CString::new(name).expect("kernel names have no NUL");
            let mut f: HipHandle = std::ptr::null_mut();
            // SAFETY: a loaded module and a NUL-terminated name.
            check(&format!("{what}: kernel {name}"), unsafe {
                (rt.module_get_function)(&mut f, m.module, c_name.as_ptr())
            })?;
            // Registers can make a function's limit lower than the
            // device's (HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK is 0).
            if let Some(get) = rt.func_get_attribute {
                let mut max: c_int = 0;
                // SAFETY: a function of the loaded module; a writable int.
                check(&format!("{what}: hipFuncGetAttribute({name})"), unsafe {
                    get(&mut max, 0, f)
                })?;
                let usable = threads_for(name, u32::try_from(max).unwrap_or(0), self.limits.warp)
                    .map_err(|e| e.context(&what))?;
                if planner_sized(name) {
                    m.planner_threads = m.planner_threads.min(usable);
                }
            }
            m.functions.insert(name, f as usize);
        }
        let m = Arc::new(m);
        modules.insert(types, m.clone());
        Ok(m)
    }
}

/// Refuses limits a device cannot have (a runtime whose attribute numbers
/// differ from ROCm 5's would report such).
fn check_limits(what: &str, arch: &str, l: &DeviceLimits) -> Result<()> {
    let expected_warp = wavefront_of_arch(arch);
    let plausible = matches!(l.warp, 32 | 64)
        && (expected_warp.is_none() || expected_warp == Some(l.warp))
        && (l.warp..=2048).contains(&l.max_threads_per_block)
        && l.max_threads_per_sm >= l.max_threads_per_block
        && l.sm_count > 0
        && ((16 << 10)..=(1 << 20)).contains(&l.shared_per_block);
    if plausible {
        Ok(())
    } else {
        Err(Error::NotSupported(format!(
            "{what} ({arch}) reports implausible limits ({l:?}); this HIP runtime's attribute \
             numbering may differ from ROCm 5's, which rusparse was built against"
        )))
    }
}

impl GpuDevice for HipDevice {
    fn backend(&self) -> BackendKind {
        BackendKind::Hip
    }

    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    fn bind(&self) -> Result<()> {
        // SAFETY: a plain call into the loaded runtime.
        check("hipSetDevice", unsafe {
            (rt()?.set_device)(self.ordinal as c_int)
        })
    }

    fn kernels(&self, types: KernelTypes) -> Result<Arc<dyn GpuKernels>> {
        Ok(self.module(types)?)
    }

    fn free_memory(&self) -> Option<u64> {
        let f = rt().ok()?.mem_get_info?;
        self.bind().ok()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: two writable slots; the device is current.
        (unsafe { f(&mut free, &mut total) } == 0).then_some(free as u64)
    }

    fn alloc(&self, bytes: usize, stream: Option<RawStream>) -> Result<u64> {
        let rt = rt()?;
        let result = |e: HipError, p: *mut c_void| if e == 0 { Ok(p as u64) } else { Err(e) };
        self.async_alloc
            .alloc(
                stream.filter(|_| rt.malloc_async.is_some()),
                |s| {
                    let mut p: *mut c_void = std::ptr::null_mut();
                    let f = rt.malloc_async.expect("checked above");
                    // SAFETY: a writable pointer; the device is current.
                    result(unsafe { f(&mut p, bytes, s) }, p)
                },
                || {
                    let mut p: *mut c_void = std::ptr::null_mut();
                    // SAFETY: as above.
                    result(unsafe { (rt.malloc)(&mut p, bytes) }, p)
                },
                |&e| e == ERROR_NOT_SUPPORTED,
            )
            .map_err(|e| hip_error("allocating device memory (hipMallocAsync / hipMalloc)", e))
    }

    unsafe fn free(&self, ptr: u64, stream: Option<RawStream>) {
        let Ok(rt) = rt() else { return };
        // SAFETY: the caller's contract.
        unsafe {
            match (stream, rt.free_async) {
                (Some(s), Some(f)) if self.async_alloc.enabled() => {
                    f(ptr as *mut c_void, s);
                }
                (Some(s), _) => {
                    (rt.stream_synchronize)(s);
                    (rt.free)(ptr as *mut c_void);
                }
                (None, _) => {
                    (rt.free)(ptr as *mut c_void);
                }
            }
        }
    }

    unsafe fn memset(&self, dst: u64, byte: u8, bytes: usize, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipMemsetD8Async", unsafe {
            (rt()?.memset_d8_async)(dst as *mut c_void, byte, bytes, stream)
        })
    }

    unsafe fn upload(&self, dst: u64, src: &[u8], stream: RawStream) -> Result<()> {
        let rt = rt()?;
        // SAFETY: the caller's contract. The copy from pageable memory is
        // waited for, so `src` may be dropped after (HIP may read it later
        // otherwise).
        check("hipMemcpyHtoDAsync", unsafe {
            (rt.memcpy_htod_async)(dst as *mut c_void, src.as_ptr().cast(), src.len(), stream)
        })?;
        // SAFETY: a live stream.
        check("hipStreamSynchronize", unsafe {
            (rt.stream_synchronize)(stream)
        })
    }

    unsafe fn download(&self, dst: &mut [u8], src: u64, stream: RawStream) -> Result<()> {
        let rt = rt()?;
        // SAFETY: the caller's contract; the stream is synchronised before
        // `dst` is read.
        check("hipMemcpyDtoHAsync", unsafe {
            (rt.memcpy_dtoh_async)(
                dst.as_mut_ptr().cast(),
                src as *mut c_void,
                dst.len(),
                stream,
            )
        })?;
        // SAFETY: a live stream.
        check("hipStreamSynchronize", unsafe {
            (rt.stream_synchronize)(stream)
        })
    }

    unsafe fn copy(&self, dst: u64, src: u64, bytes: usize, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipMemcpyDtoDAsync", unsafe {
            (rt()?.memcpy_dtod_async)(dst as *mut c_void, src as *mut c_void, bytes, stream)
        })
    }

    fn create_stream(&self) -> Result<RawStream> {
        let mut s: HipHandle = std::ptr::null_mut();
        // SAFETY: a writable handle.
        check("hipStreamCreateWithFlags", unsafe {
            (rt()?.stream_create_with_flags)(&mut s, STREAM_NON_BLOCKING)
        })?;
        Ok(s)
    }

    unsafe fn destroy_stream(&self, stream: RawStream) {
        if let Ok(rt) = rt() {
            // SAFETY: the caller's contract.
            unsafe { (rt.stream_destroy)(stream) };
        }
    }

    fn create_event(&self) -> Result<RawEvent> {
        let mut e: HipHandle = std::ptr::null_mut();
        // SAFETY: a writable handle.
        check("hipEventCreateWithFlags", unsafe {
            (rt()?.event_create_with_flags)(&mut e, EVENT_DISABLE_TIMING)
        })?;
        Ok(e)
    }

    unsafe fn destroy_event(&self, event: RawEvent) {
        if let Ok(rt) = rt() {
            // SAFETY: the caller's contract.
            unsafe { (rt.event_destroy)(event) };
        }
    }

    unsafe fn record(&self, event: RawEvent, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipEventRecord", unsafe {
            (rt()?.event_record)(event, stream)
        })
    }

    unsafe fn wait(&self, stream: RawStream, event: RawEvent) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipStreamWaitEvent", unsafe {
            (rt()?.stream_wait_event)(stream, event, 0)
        })
    }

    unsafe fn synchronize(&self, event: RawEvent) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipEventSynchronize", unsafe {
            (rt()?.event_synchronize)(event)
        })
    }
}

/// `hipPointerAttribute_t` (ROCm 5 layout: 32 bytes).
#[repr(C)]
struct PointerAttributes {
    memory_type: c_int,
    device: c_int,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
    is_managed: c_int,
    allocation_flags: u32,
}

/// The HIP device holding `p` (device or managed memory), or `None` for
/// host memory, memory the runtime does not know (`hipErrorInvalidValue`),
/// and machines without a HIP runtime or device.
///
/// # Errors
/// [`Error::ExecutionFailed`] with the runtime's message for any other
/// answer of `hipPointerGetAttributes`: a device pointer taken for host
/// memory would be read on the host and crash, so nothing runs.
pub fn device_of(p: *const c_void) -> Result<Option<usize>> {
    if p.is_null() || super::probe().is_err() {
        return Ok(None);
    }
    let rt = rt()?;
    let mut a = PointerAttributes {
        memory_type: -1,
        device: -1,
        device_pointer: std::ptr::null_mut(),
        host_pointer: std::ptr::null_mut(),
        is_managed: 0,
        allocation_flags: 0,
    };
    // The runtime only looks the address up; it never dereferences it.
    let addr = p as usize as *const c_void;
    // SAFETY: a writable struct of the runtime's layout.
    let e = unsafe { (rt.pointer_get_attributes)((&mut a as *mut PointerAttributes).cast(), addr) };
    match e {
        0 => {}
        ERROR_INVALID_VALUE => return Ok(None),
        _ => {
            return Err(Error::ExecutionFailed(format!(
                "{}; cannot tell whether the array is device or host memory, so the product \
                 does not run",
                hip_error(&format!("hipPointerGetAttributes({p:p})"), e).message()
            )))
        }
    }
    // ROCm 5 numbers hipMemoryTypeHost 0, Device 1, Array 2, Unified 3;
    // ROCm 6 Unregistered 0, Host 1, Device 2, Managed 3. Both: managed
    // memory sets `isManaged`.
    let mut version = 0;
    // SAFETY: a writable int.
    unsafe { (rt.runtime_get_version)(&mut version) };
    let device_type = if version >= 60_000_000 { 2 } else { 1 };
    let on_device = a.memory_type == device_type || a.is_managed != 0;
    Ok((on_device && a.device >= 0).then_some(a.device as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_limits_are_plausible_and_others_refused() {
        check_limits("t", "gfx906", &DeviceLimits::MI50).unwrap();
        let mut wrong_warp = DeviceLimits::MI50;
        wrong_warp.warp = 32;
        assert!(matches!(
            check_limits("t", "gfx906", &wrong_warp),
            Err(Error::NotSupported(m)) if m.contains("implausible")
        ));
        let mut no_lds = DeviceLimits::MI50;
        no_lds.shared_per_block = 0;
        assert!(check_limits("t", "gfx90a", &no_lds).is_err());
    }

    #[test]
    fn host_memory_is_not_a_hip_device() {
        let v = [1.0f64; 8];
        assert_eq!(device_of(v.as_ptr().cast()).unwrap(), None);
        assert_eq!(device_of(std::ptr::null()).unwrap(), None);
    }
}
