//! One CUDA device: its primary context, its limits, and its kernels.
//!
//! A [`CudaDevice`] is created once per device ordinal and process
//! ([`CudaDevice::get`]) and shared by every handle and plan on that device,
//! so each kernel module (one per [`KernelTypes`]) is compiled or read from
//! the disk cache once per process.

use super::compile::{
    self, cache_key, kernel_source, load_or_compile, Arch, Compiled, DiskCache, KernelOptions,
    KernelTypes,
};
use super::loader;
use crate::backend::gpu::device::StreamOrderedAlloc;
use crate::backend::gpu::launch::{
    planner_sized, threads_for, LaunchConfig, KERNEL_PARAMS, LARGE_SHARED_KERNELS,
};
use crate::backend::gpu::{GpuDevice, GpuKernels, RawEvent, RawStream};
use crate::error::{Error, Result};
use crate::plan::gpu_bins::DeviceLimits;
use crate::types::BackendKind;
use cudarc::driver::result as cu;
use cudarc::driver::sys::{self, CUdevice_attribute, CUfunction_attribute, CUresult};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, DriverError};
use cudarc::nvrtc::Ptx;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// A driver error as `CUDA_ERROR_NAME (the driver's description)`.
pub fn describe_driver_error(e: &DriverError) -> String {
    let name = e
        .error_name()
        .ok()
        .and_then(|n| n.to_str().ok().map(str::to_owned))
        .unwrap_or_else(|| format!("{:?}", e.0));
    let text = e
        .error_string()
        .ok()
        .and_then(|n| n.to_str().ok().map(str::to_owned))
        .unwrap_or_default();
    format!("{name} ({text})")
}

/// Turns a driver error into a rusparse error naming `what`.
/// Out of memory becomes [`Error::InsufficientResources`].
pub(crate) fn driver_error(what: &str, e: DriverError) -> Error {
    let msg = format!("{what}: {}", describe_driver_error(&e));
    match e.0 {
        CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::InsufficientResources(msg),
        // The driver cannot run this image: another form may run.
        CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU
        | CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | CUresult::CUDA_ERROR_INVALID_PTX
        | CUresult::CUDA_ERROR_INVALID_IMAGE
        | CUresult::CUDA_ERROR_JIT_COMPILER_NOT_FOUND => Error::ArchMismatch(msg),
        CUresult::CUDA_ERROR_INVALID_CONTEXT | CUresult::CUDA_ERROR_INVALID_HANDLE => {
            Error::InvalidValue(msg)
        }
        _ => Error::ExecutionFailed(msg),
    }
}

/// A kernel module for one type combination, with every contract kernel
/// looked up.
#[derive(Debug)]
pub struct KernelModule {
    _module: Arc<CudaModule>,
    functions: HashMap<&'static str, CudaFunction>,
    options: KernelOptions,
    /// The least `MAX_THREADS_PER_BLOCK` of the planner-sized kernels.
    planner_threads: u32,
}

impl KernelModule {
    /// The kernel `name` (one of [`KERNEL_PARAMS`]).
    ///
    /// # Errors
    /// [`Error::InternalError`] for a name outside the contract.
    pub fn function(&self, name: &str) -> Result<&CudaFunction> {
        self.functions
            .get(name)
            .ok_or_else(|| Error::InternalError(format!("kernel {name} is not in the module")))
    }

    /// The options the module was compiled with.
    pub fn options(&self) -> &KernelOptions {
        &self.options
    }
}

// SAFETY: the module's functions are used only with the device's context
// current (every pipeline call binds it first); the driver allows launches
// from any thread.
unsafe impl Send for KernelModule {}
// SAFETY: as above; `&self` methods only read the function table.
unsafe impl Sync for KernelModule {}

impl GpuKernels for KernelModule {
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
        let f = self.function(name)?;
        // SAFETY: the caller's contract (argument types and lifetimes).
        unsafe {
            cu::launch_kernel(
                f.cu_function(),
                (grid, 1, 1),
                (block, 1, 1),
                shared,
                stream as sys::CUstream,
                args,
            )
        }
        .map_err(|e| driver_error("cuLaunchKernel", e))
    }
}

/// One CUDA device (see the module docs).
#[derive(Debug)]
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    name: String,
    compute_capability: (u32, u32),
    limits: DeviceLimits,
    async_alloc: StreamOrderedAlloc,
    driver_version: i32,
    modules: Mutex<HashMap<KernelTypes, Arc<KernelModule>>>,
}

impl CudaDevice {
    /// The device with this ordinal, created on first use and shared
    /// afterwards.
    ///
    /// Cost: on first use, loading the driver and retaining the device's
    /// primary context (tens of milliseconds); a map look-up afterwards.
    ///
    /// # Errors
    /// [`Error::NotSupported`] when there is no driver or no such device
    /// (the message says which); a driver error otherwise.
    pub fn get(ordinal: usize) -> Result<Arc<CudaDevice>> {
        let _process_wide = crate::host_allocator::process_wide();
        static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = OnceLock::new();
        let info = loader::device(ordinal)?;
        let map = DEVICES.get_or_init(Default::default);
        let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = map.get(&ordinal) {
            return Ok(d.clone());
        }
        let dev = Arc::new(loader::guarded("opening the CUDA device", || {
            CudaDevice::open(ordinal, info.version)
        })?);
        map.insert(ordinal, dev.clone());
        Ok(dev)
    }

    fn open(ordinal: usize, driver_version: i32) -> Result<CudaDevice> {
        let what = format!("CUDA device {ordinal}");
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_error(&what, e))?;
        let attr = |a: CUdevice_attribute| -> Result<u32> {
            ctx.attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(|e| driver_error(&format!("{what}: reading {a:?}"), e))
        };
        use CUdevice_attribute as A;
        let (major, minor) = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let shared_per_block = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?;
        let limits = DeviceLimits {
            warp: attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            max_threads_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_threads_per_sm: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            shared_per_block,
            shared_per_block_optin: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
                .max(shared_per_block),
            shared_per_sm: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            reserved_shared_per_block: attr(
                A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
            )?,
        };
        if limits.warp == 0 || limits.max_threads_per_block < limits.warp {
            return Err(Error::NotSupported(format!(
                "{what} reports warp size {} and {} threads per block",
                limits.warp, limits.max_threads_per_block
            )));
        }
        let name = ctx.name().unwrap_or_else(|_| "unknown".into());
        Ok(CudaDevice {
            async_alloc: StreamOrderedAlloc::new(ctx.has_async_alloc()),
            ctx,
            name,
            compute_capability: (major, minor),
            limits,
            driver_version,
            modules: Mutex::new(HashMap::new()),
        })
    }

    /// The device's primary context (shared with the CUDA runtime).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The device's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `(major, minor)` compute capability.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.compute_capability
    }

    /// The limits the bins are planned from.
    pub fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    /// Whether the device supports stream-ordered allocation
    /// (`cuMemAllocAsync`); without it, plans allocate synchronously.
    pub fn has_async_alloc(&self) -> bool {
        self.async_alloc.enabled()
    }

    /// `cuDriverGetVersion`, e.g. 12040.
    pub fn driver_version(&self) -> i32 {
        self.driver_version
    }

    /// Makes the device's context current on the calling thread.
    ///
    /// # Errors
    /// A driver error.
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error("making the CUDA context current", e))
    }

    /// The kernels for `types`: from the in-memory cache, else the disk
    /// cache, else NVRTC.
    ///
    /// Cost: the first call per type combination and process compiles
    /// (about a second) or reads the disk cache (milliseconds).
    ///
    /// # Errors
    /// [`Error::NotSupported`] without NVRTC; [`Error::ArchMismatch`] when
    /// NVRTC or the driver cannot target the device; compile and load
    /// errors otherwise.
    pub fn module(&self, types: KernelTypes) -> Result<Arc<KernelModule>> {
        let _process_wide = crate::host_allocator::process_wide();
        // Held while compiling: two threads wanting the same module wait
        // for one compilation instead of running two.
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = modules.get(&types) {
            return Ok(m.clone());
        }
        self.bind()?;
        let m = Arc::new(loader::guarded("loading the rusparse kernels", || {
            self.build_module(types)
        })?);
        modules.insert(types, m.clone());
        Ok(m)
    }

    fn build_module(&self, types: KernelTypes) -> Result<KernelModule> {
        let (nv_major, nv_minor) = loader::nvrtc()?;
        let compiler = format!("nvrtc {nv_major}.{nv_minor}");
        let (major, minor) = self.compute_capability;
        let cc = major * 10 + minor;
        let supported = compile::nvrtc_supported_archs()?;
        let arch = compile::pick_arch(cc, &supported).ok_or_else(|| {
            Error::ArchMismatch(format!(
                "{} (compute capability {major}.{minor}) is older than every architecture \
                 {compiler} supports ({supported:?})",
                self.name
            ))
        })?;
        let cache = DiskCache::from_env();
        let source = kernel_source();
        let build = |arch: Arch| -> Result<KernelModule> {
            let opts = KernelOptions {
                types,
                warp: self.limits.warp,
                arch,
            };
            let key = cache_key(source, &opts, &compiler);
            let compile = || -> Result<Compiled> { compile::compile_nvrtc(source, &opts, false) };
            let load = |image: &[u8]| self.load_image(image, opts);
            load_or_compile(&cache, key, compile, load).map(|(m, _)| m)
        };
        compile::first_that_loads(&compile::image_order(cc, arch, &supported), build).map_err(|e| {
            match e {
                Error::ArchMismatch(m) => Error::ArchMismatch(format!(
                    "{m} (the NVIDIA driver supports CUDA {}.{}; {compiler} may be newer: update \
                     the driver, or point {} at an older NVRTC)",
                    self.driver_version / 1000,
                    self.driver_version % 1000 / 10,
                    super::nvrtc::NVRTC_ENV
                )),
                other => other,
            }
        })
    }

    /// Loads one image into the context and looks every kernel up.
    fn load_image(&self, image: &[u8], options: KernelOptions) -> Result<KernelModule> {
        // A PTX image must be NUL-terminated text (a damaged cache file
        // could be neither); refuse it here rather than let the driver read
        // past the end.
        if matches!(options.arch, Arch::Virtual(_))
            && (image.last() != Some(&0) || image[..image.len() - 1].contains(&0))
        {
            return Err(Error::InternalError(
                "the PTX image is not one NUL-terminated text".into(),
            ));
        }
        let what = format!("loading the kernels ({})", options.types);
        let module = self
            .ctx
            .load_module(Ptx::from_binary(image.to_vec()))
            .map_err(|e| driver_error(&what, e))?;
        let mut functions = HashMap::new();
        let mut planner_threads = u32::MAX;
        for &(name, _) in KERNEL_PARAMS {
            let f = module.load_function(name).map_err(|e| {
                Error::InternalError(format!(
                    "{what}: kernel {name} not found in the module ({})",
                    driver_error("", e)
                ))
            })?;
            if LARGE_SHARED_KERNELS.contains(&name) {
                let fixed = f.shared_size_bytes().map_err(|e| driver_error(&what, e))?;
                let dynamic = (self.limits.shared_per_block_optin as i32 - fixed).max(0);
                f.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic,
                )
                .map_err(|e| {
                    driver_error(
                        &format!("{what}: opting {name} into {dynamic} bytes of shared memory"),
                        e,
                    )
                })?;
            }
            // Registers can make a function's limit lower than the
            // device's: fixed blocks must fit, planner-sized ones shrink.
            let max = f
                .max_threads_per_block()
                .map_err(|e| driver_error(&what, e))?;
            let usable = threads_for(name, u32::try_from(max).unwrap_or(0), self.limits.warp)
                .map_err(|e| e.context(&what))?;
            if planner_sized(name) {
                planner_threads = planner_threads.min(usable);
            }
            functions.insert(name, f);
        }
        Ok(KernelModule {
            _module: module,
            functions,
            options,
            planner_threads,
        })
    }
}

impl GpuDevice for CudaDevice {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn ordinal(&self) -> usize {
        CudaDevice::ordinal(self)
    }

    fn name(&self) -> &str {
        CudaDevice::name(self)
    }

    fn describe(&self) -> String {
        let (major, minor) = self.compute_capability;
        let nvrtc = match super::nvrtc::nvrtc() {
            Ok(n) => format!("NVRTC {}.{} ({})", n.version.0, n.version.1, n.path),
            Err(e) => format!("no NVRTC: {}", e.message()),
        };
        format!(
            "CUDA device {}: {} (sm_{major}{minor}), driver for CUDA {}.{}, {nvrtc}",
            GpuDevice::ordinal(self),
            self.name,
            self.driver_version / 1000,
            self.driver_version % 1000 / 10
        )
    }

    fn limits(&self) -> &DeviceLimits {
        CudaDevice::limits(self)
    }

    fn bind(&self) -> Result<()> {
        CudaDevice::bind(self)
    }

    fn kernels(&self, types: KernelTypes) -> Result<Arc<dyn GpuKernels>> {
        Ok(self.module(types)?)
    }

    fn free_memory(&self) -> Option<u64> {
        self.bind().ok()?;
        cu::mem_get_info().ok().map(|(free, _)| free as u64)
    }

    fn alloc(&self, bytes: usize, stream: Option<RawStream>) -> Result<u64> {
        // SAFETY: a valid stream of the current context (or the legacy
        // default stream); the memory is only used in stream order.
        self.async_alloc
            .alloc(
                stream,
                |s| unsafe { cu::malloc_async(s as sys::CUstream, bytes) },
                || unsafe { cu::malloc_sync(bytes) },
                |e| e.0 == CUresult::CUDA_ERROR_NOT_SUPPORTED,
            )
            .map_err(|e| driver_error("allocating device memory (cuMemAllocAsync / cuMemAlloc)", e))
    }

    unsafe fn free(&self, ptr: u64, stream: Option<RawStream>) {
        // SAFETY: the caller's contract. Without stream-ordered frees the
        // stream's work is waited for first.
        unsafe {
            match stream {
                Some(s) if self.async_alloc.enabled() => {
                    let _ = cu::free_async(ptr, s as sys::CUstream);
                }
                Some(s) => {
                    let _ = cu::stream::synchronize(s as sys::CUstream);
                    let _ = cu::free_sync(ptr);
                }
                None => {
                    let _ = cu::free_sync(ptr);
                }
            }
        }
    }

    unsafe fn memset(&self, dst: u64, byte: u8, bytes: usize, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { cu::memset_d8_async(dst, byte, bytes, stream as sys::CUstream) }
            .map_err(|e| driver_error("cuMemsetD8Async", e))
    }

    unsafe fn upload(&self, dst: u64, src: &[u8], stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract; a copy from pageable memory is
        // staged before the call returns.
        unsafe { cu::memcpy_htod_async(dst, src, stream as sys::CUstream) }
            .map_err(|e| driver_error("cuMemcpyHtoDAsync", e))
    }

    unsafe fn download(&self, dst: &mut [u8], src: u64, stream: RawStream) -> Result<()> {
        let s = stream as sys::CUstream;
        // SAFETY: the caller's contract; the stream is synchronised before
        // `dst` is read or dropped.
        unsafe { cu::memcpy_dtoh_async(dst, src, s).and_then(|()| cu::stream::synchronize(s)) }
            .map_err(|e| driver_error("cuMemcpyDtoHAsync", e))
    }

    unsafe fn copy(&self, dst: u64, src: u64, bytes: usize, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { cu::memcpy_dtod_async(dst, src, bytes, stream as sys::CUstream) }
            .map_err(|e| driver_error("cuMemcpyDtoDAsync", e))
    }

    fn create_stream(&self) -> Result<RawStream> {
        cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map(|s| s as RawStream)
            .map_err(|e| driver_error("creating a CUDA stream", e))
    }

    unsafe fn destroy_stream(&self, stream: RawStream) {
        // SAFETY: the caller's contract.
        let _ = unsafe { cu::stream::destroy(stream as sys::CUstream) };
    }

    fn create_event(&self) -> Result<RawEvent> {
        cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(|e| e as RawEvent)
            .map_err(|e| driver_error("creating a CUDA event", e))
    }

    unsafe fn destroy_event(&self, event: RawEvent) {
        // SAFETY: the caller's contract.
        let _ = unsafe { cu::event::destroy(event as sys::CUevent) };
    }

    unsafe fn record(&self, event: RawEvent, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { cu::event::record(event as sys::CUevent, stream as sys::CUstream) }
            .map_err(|e| driver_error("recording a CUDA event", e))
    }

    unsafe fn wait(&self, stream: RawStream, event: RawEvent) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            cu::stream::wait_event(
                stream as sys::CUstream,
                event as sys::CUevent,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| driver_error("making a CUDA stream wait for an event", e))
    }

    unsafe fn synchronize(&self, event: RawEvent) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { cu::event::synchronize(event as sys::CUevent) }
            .map_err(|e| driver_error("waiting for a CUDA event", e))
    }
}
