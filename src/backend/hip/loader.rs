//! The HIP runtime (`libamdhip64`) and hiprtc, loaded at run time.
//!
//! Loading instead of linking keeps `--features hip` buildable and linkable
//! on machines with no ROCm (CI, CUDA-only clusters), as cudarc's
//! `dynamic-loading` does for CUDA, and turns a missing library into a
//! NOT_SUPPORTED status with the loader's reason instead of a failure to
//! start the program. hiprtc lives in `libhiprtc.so` from ROCm 6 on and
//! inside `libamdhip64.so` before (Debian's ROCm 5.2 packages).

use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

/// `hipError_t`.
pub type HipError = c_int;
/// `hipStream_t`, `hipEvent_t`, `hipModule_t`, `hipFunction_t`.
pub type HipHandle = *mut c_void;
/// `hiprtcResult`.
pub type HiprtcResult = c_int;
/// `hiprtcProgram`.
pub type HiprtcProgram = *mut c_void;

/// Names tried, in order, for the HIP runtime.
pub const RUNTIME_NAMES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "/opt/rocm/lib/libamdhip64.so",
];

/// Names tried, in order, for hiprtc (ROCm 6 and later ship it apart;
/// ROCm 5 inside the runtime).
pub const HIPRTC_NAMES: &[&str] = &[
    "libhiprtc.so",
    "libhiprtc.so.7",
    "libhiprtc.so.6",
    "/opt/rocm/lib/libhiprtc.so",
    "libamdhip64.so",
    "libamdhip64.so.5",
    "/opt/rocm/lib/libamdhip64.so",
];

/// The runtime functions rusparse calls.
pub struct HipRuntime {
    _lib: Library,
    /// `hipInit(flags)`.
    pub init: unsafe extern "C" fn(c_uint) -> HipError,
    /// `hipGetDeviceCount(int*)`.
    pub get_device_count: unsafe extern "C" fn(*mut c_int) -> HipError,
    /// `hipGetErrorName(err)`.
    pub get_error_name: unsafe extern "C" fn(HipError) -> *const c_char,
    /// `hipRuntimeGetVersion(int*)`.
    pub runtime_get_version: unsafe extern "C" fn(*mut c_int) -> HipError,
    /// `hipGetErrorString(err)`.
    pub get_error_string: unsafe extern "C" fn(HipError) -> *const c_char,
    /// `hipSetDevice(ordinal)`.
    pub set_device: unsafe extern "C" fn(c_int) -> HipError,
    /// `hipGetDevice(int*)`.
    pub get_device: unsafe extern "C" fn(*mut c_int) -> HipError,
    /// `hipDeviceGetAttribute(int*, attr, ordinal)`.
    pub device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> HipError,
    /// `hipDeviceGetName(char*, len, ordinal)`.
    pub device_get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> HipError,
    /// `hipGetDeviceProperties(hipDeviceProp_t*, ordinal)` (the ROCm 5
    /// layout, which ROCm 6 keeps under this symbol).
    pub get_device_properties: unsafe extern "C" fn(*mut c_void, c_int) -> HipError,
    /// `hipMalloc(void**, size)`.
    pub malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> HipError,
    /// `hipFree(void*)`.
    pub free: unsafe extern "C" fn(*mut c_void) -> HipError,
    /// `hipMemGetInfo(size_t* free, size_t* total)` of the current device.
    pub mem_get_info: Option<unsafe extern "C" fn(*mut usize, *mut usize) -> HipError>,
    /// `hipMallocAsync(void**, size, stream)` (ROCm 5.2 and later).
    pub malloc_async: Option<unsafe extern "C" fn(*mut *mut c_void, usize, HipHandle) -> HipError>,
    /// `hipFreeAsync(void*, stream)`.
    pub free_async: Option<unsafe extern "C" fn(*mut c_void, HipHandle) -> HipError>,
    /// `hipMemsetD8Async(dst, value, count, stream)`.
    pub memset_d8_async: unsafe extern "C" fn(*mut c_void, u8, usize, HipHandle) -> HipError,
    /// `hipMemcpyHtoDAsync(dst, src, bytes, stream)`.
    pub memcpy_htod_async:
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, HipHandle) -> HipError,
    /// `hipMemcpyDtoHAsync(dst, src, bytes, stream)`.
    pub memcpy_dtoh_async:
        unsafe extern "C" fn(*mut c_void, *mut c_void, usize, HipHandle) -> HipError,
    /// `hipMemcpyDtoDAsync(dst, src, bytes, stream)`.
    pub memcpy_dtod_async:
        unsafe extern "C" fn(*mut c_void, *mut c_void, usize, HipHandle) -> HipError,
    /// `hipStreamCreateWithFlags(hipStream_t*, flags)`.
    pub stream_create_with_flags: unsafe extern "C" fn(*mut HipHandle, c_uint) -> HipError,
    /// `hipStreamDestroy(stream)`.
    pub stream_destroy: unsafe extern "C" fn(HipHandle) -> HipError,
    /// `hipStreamSynchronize(stream)`.
    pub stream_synchronize: unsafe extern "C" fn(HipHandle) -> HipError,
    /// `hipStreamWaitEvent(stream, event, flags)`.
    pub stream_wait_event: unsafe extern "C" fn(HipHandle, HipHandle, c_uint) -> HipError,
    /// `hipEventCreateWithFlags(hipEvent_t*, flags)`.
    pub event_create_with_flags: unsafe extern "C" fn(*mut HipHandle, c_uint) -> HipError,
    /// `hipEventDestroy(event)`.
    pub event_destroy: unsafe extern "C" fn(HipHandle) -> HipError,
    /// `hipEventRecord(event, stream)`.
    pub event_record: unsafe extern "C" fn(HipHandle, HipHandle) -> HipError,
    /// `hipEventSynchronize(event)`.
    pub event_synchronize: unsafe extern "C" fn(HipHandle) -> HipError,
    /// `hipModuleLoadData(hipModule_t*, image)`.
    pub module_load_data: unsafe extern "C" fn(*mut HipHandle, *const c_void) -> HipError,
    /// `hipModuleUnload(module)`.
    pub module_unload: unsafe extern "C" fn(HipHandle) -> HipError,
    /// `hipFuncGetAttribute(int*, hipFunction_attribute, hipFunction_t)`.
    pub func_get_attribute: Option<unsafe extern "C" fn(*mut c_int, c_int, HipHandle) -> HipError>,
    /// `hipModuleGetFunction(hipFunction_t*, module, name)`.
    pub module_get_function:
        unsafe extern "C" fn(*mut HipHandle, HipHandle, *const c_char) -> HipError,
    /// `hipModuleLaunchKernel(f, grid xyz, block xyz, shared, stream,
    /// params, extra)`.
    #[allow(clippy::type_complexity)]
    pub module_launch_kernel: unsafe extern "C" fn(
        HipHandle,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        HipHandle,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> HipError,
    /// `hipPointerGetAttributes(hipPointerAttribute_t*, ptr)`.
    pub pointer_get_attributes: unsafe extern "C" fn(*mut c_void, *const c_void) -> HipError,
}

/// The hiprtc functions rusparse calls.
pub struct Hiprtc {
    _lib: Library,
    /// The file it was loaded from.
    pub path: &'static str,
    /// `hiprtcCreateProgram(prog, src, name, numHeaders, headers, includeNames)`.
    pub create_program: unsafe extern "C" fn(
        *mut HiprtcProgram,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> HiprtcResult,
    /// `hiprtcCompileProgram(prog, numOptions, options)`.
    pub compile_program:
        unsafe extern "C" fn(HiprtcProgram, c_int, *const *const c_char) -> HiprtcResult,
    /// `hiprtcGetProgramLogSize(prog, size*)`.
    pub get_program_log_size: unsafe extern "C" fn(HiprtcProgram, *mut usize) -> HiprtcResult,
    /// `hiprtcGetProgramLog(prog, log)`.
    pub get_program_log: unsafe extern "C" fn(HiprtcProgram, *mut c_char) -> HiprtcResult,
    /// `hiprtcGetCodeSize(prog, size*)`.
    pub get_code_size: unsafe extern "C" fn(HiprtcProgram, *mut usize) -> HiprtcResult,
    /// `hiprtcGetCode(prog, code)`.
    pub get_code: unsafe extern "C" fn(HiprtcProgram, *mut c_char) -> HiprtcResult,
    /// `hiprtcDestroyProgram(prog*)`.
    pub destroy_program: unsafe extern "C" fn(*mut HiprtcProgram) -> HiprtcResult,
    /// `hiprtcGetErrorString(result)`.
    pub get_error_string: unsafe extern "C" fn(HiprtcResult) -> *const c_char,
    /// `hiprtcVersion(major*, minor*)`.
    pub version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> HiprtcResult,
}

impl Hiprtc {
    /// What identifies this compiler in the kernel cache's key: the file it
    /// was loaded from and its reported version.
    pub fn identity(&self) -> String {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two writable ints.
        let r = unsafe { (self.version)(&mut major, &mut minor) };
        if r == 0 {
            format!("hiprtc {major}.{minor} ({})", self.path)
        } else {
            format!("hiprtc ({})", self.path)
        }
    }
}

/// Opens the first of `names` that loads; the error lists every attempt.
fn open(names: &'static [&'static str]) -> Result<(Library, &'static str), String> {
    let mut tried = Vec::new();
    for name in names {
        // SAFETY: loading a shared library runs its initialisers; the HIP
        // runtime and hiprtc are ordinary libraries meant to be loaded so.
        match unsafe { Library::new(*name) } {
            Ok(lib) => return Ok((lib, name)),
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    Err(tried.join("; "))
}

/// Copies the function pointer `name` (NUL-terminated) out of `lib`.
///
/// # Safety
/// `T` must be the function's real type.
unsafe fn symbol<T: Copy>(lib: &Library, name: &[u8]) -> Result<T, String> {
    // SAFETY: the caller gives the right type; the pointer stays valid
    // while `lib` is loaded, and the structs keep `lib` with it.
    unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
        let shown = String::from_utf8_lossy(name.strip_suffix(&[0]).unwrap_or(name)).into_owned();
        format!("{shown}: {e}")
    })
}

/// The HIP runtime, loaded once; the error says what failed.
pub fn runtime() -> Result<&'static HipRuntime, String> {
    let _process_wide = crate::host_allocator::process_wide();
    static RUNTIME: OnceLock<Result<HipRuntime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let (lib, _) = open(RUNTIME_NAMES)
                .map_err(|e| format!("the HIP runtime (libamdhip64) could not be loaded ({e})"))?;
            // SAFETY: the types are those of hip_runtime_api.h.
            unsafe {
                Ok(HipRuntime {
                    init: symbol(&lib, b"hipInit\0")?,
                    get_device_count: symbol(&lib, b"hipGetDeviceCount\0")?,
                    get_error_name: symbol(&lib, b"hipGetErrorName\0")?,
                    runtime_get_version: symbol(&lib, b"hipRuntimeGetVersion\0")?,
                    get_error_string: symbol(&lib, b"hipGetErrorString\0")?,
                    set_device: symbol(&lib, b"hipSetDevice\0")?,
                    get_device: symbol(&lib, b"hipGetDevice\0")?,
                    device_get_attribute: symbol(&lib, b"hipDeviceGetAttribute\0")?,
                    device_get_name: symbol(&lib, b"hipDeviceGetName\0")?,
                    get_device_properties: symbol(&lib, b"hipGetDeviceProperties\0")?,
                    malloc: symbol(&lib, b"hipMalloc\0")?,
                    free: symbol(&lib, b"hipFree\0")?,
                    mem_get_info: symbol(&lib, b"hipMemGetInfo\0").ok(),
                    malloc_async: symbol(&lib, b"hipMallocAsync\0").ok(),
                    free_async: symbol(&lib, b"hipFreeAsync\0").ok(),
                    memset_d8_async: symbol(&lib, b"hipMemsetD8Async\0")?,
                    memcpy_htod_async: symbol(&lib, b"hipMemcpyHtoDAsync\0")?,
                    memcpy_dtoh_async: symbol(&lib, b"hipMemcpyDtoHAsync\0")?,
                    memcpy_dtod_async: symbol(&lib, b"hipMemcpyDtoDAsync\0")?,
                    stream_create_with_flags: symbol(&lib, b"hipStreamCreateWithFlags\0")?,
                    stream_destroy: symbol(&lib, b"hipStreamDestroy\0")?,
                    stream_synchronize: symbol(&lib, b"hipStreamSynchronize\0")?,
                    stream_wait_event: symbol(&lib, b"hipStreamWaitEvent\0")?,
                    event_create_with_flags: symbol(&lib, b"hipEventCreateWithFlags\0")?,
                    event_destroy: symbol(&lib, b"hipEventDestroy\0")?,
                    event_record: symbol(&lib, b"hipEventRecord\0")?,
                    event_synchronize: symbol(&lib, b"hipEventSynchronize\0")?,
                    module_load_data: symbol(&lib, b"hipModuleLoadData\0")?,
                    module_unload: symbol(&lib, b"hipModuleUnload\0")?,
                    func_get_attribute: symbol(&lib, b"hipFuncGetAttribute\0").ok(),
                    module_get_function: symbol(&lib, b"hipModuleGetFunction\0")?,
                    module_launch_kernel: symbol(&lib, b"hipModuleLaunchKernel\0")?,
                    pointer_get_attributes: symbol(&lib, b"hipPointerGetAttributes\0")?,
                    _lib: lib,
                })
            }
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// hiprtc, loaded once; the error says what failed.
pub fn hiprtc() -> Result<&'static Hiprtc, String> {
    let _process_wide = crate::host_allocator::process_wide();
    static HIPRTC: OnceLock<Result<Hiprtc, String>> = OnceLock::new();
    HIPRTC
        .get_or_init(|| {
            let mut errors = Vec::new();
            // A library may load yet lack hiprtc (a ROCm 6 runtime): go on.
            for (k, name) in HIPRTC_NAMES.iter().enumerate() {
                let (lib, path) = match open(&HIPRTC_NAMES[k..=k]) {
                    Ok(x) => x,
                    Err(e) => {
                        errors.push(e);
                        continue;
                    }
                };
                // SAFETY: the types are those of hiprtc.h.
                let loaded = unsafe {
                    (|| -> Result<Hiprtc, String> {
                        Ok(Hiprtc {
                            create_program: symbol(&lib, b"hiprtcCreateProgram\0")?,
                            compile_program: symbol(&lib, b"hiprtcCompileProgram\0")?,
                            get_program_log_size: symbol(&lib, b"hiprtcGetProgramLogSize\0")?,
                            get_program_log: symbol(&lib, b"hiprtcGetProgramLog\0")?,
                            get_code_size: symbol(&lib, b"hiprtcGetCodeSize\0")?,
                            get_code: symbol(&lib, b"hiprtcGetCode\0")?,
                            destroy_program: symbol(&lib, b"hiprtcDestroyProgram\0")?,
                            get_error_string: symbol(&lib, b"hiprtcGetErrorString\0")?,
                            version: symbol(&lib, b"hiprtcVersion\0")?,
                            path,
                            _lib: lib,
                        })
                    })()
                };
                match loaded {
                    Ok(h) => return Ok(h),
                    Err(e) => errors.push(format!("{name}: {e}")),
                }
            }
            Err(format!(
                "hiprtc could not be loaded ({})",
                errors.join("; ")
            ))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A C string from the runtime, or `fallback` for NULL.
///
/// # Safety
/// `p` is NULL or points at a NUL-terminated string (as HIP's and hiprtc's
/// error-name functions return).
pub unsafe fn c_text(p: *const c_char, fallback: &str) -> String {
    if p.is_null() {
        fallback.to_string()
    } else {
        // SAFETY: the caller's contract.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}
