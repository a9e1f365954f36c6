//! Handle functions: create, destroy, stream, pointer mode, version, back
//! end, threads.

use super::allocator::Hooks;
use super::boundary::{boundary, out_ref, Claim, Opaque};
use super::types::*;
use crate::host_allocator::HooksGuard;
use crate::{Context, Error};
use std::ffi::{c_int, c_void};

/// What a `rusparseHandle_t` points to.
pub(crate) struct Handle {
    pub(crate) ctx: Context,
    pub(crate) stream: *mut c_void,
    /// true: alpha/beta in device memory (read as host memory on the CPU).
    pub(crate) device_pointers: bool,
    /// Where the last work estimation of an AUTO handle placed its product.
    pub(crate) last_placed: std::cell::Cell<Option<crate::BackendKind>>,
    /// The hooks set by `rusparseSetAllocator`, as given.
    pub(crate) hooks: Hooks,
}

/// A handle claimed by the running call (see [`Opaque::claim`]), with the
/// handle's host allocator hooks applying to the calling thread's
/// allocations until it is dropped.
pub(crate) struct HandleClaim {
    _hooks: HooksGuard,
    _claim: Claim,
}

impl rusparseContext {
    /// Claims the handle behind `p` for this call and makes its host hooks
    /// apply to this thread's allocations while the claim lives. Every call
    /// on a handle enters it this way, so every allocation made for the
    /// handle on the calling thread goes through its hooks (those on its
    /// pool's threads do too, see `Context::thread_pool`).
    ///
    /// # Safety
    /// As [`Opaque::claim`].
    pub(crate) unsafe fn enter(p: *const Self) -> crate::Result<HandleClaim> {
        // SAFETY: the caller's contract.
        let claim = unsafe { Self::claim(p) }?;
        // SAFETY: as above; claimed, so no other call changes it.
        let hooks = unsafe { Self::get(p) }?.ctx.host_hooks();
        Ok(HandleClaim {
            _hooks: HooksGuard::enter(hooks),
            _claim: claim,
        })
    }
}

impl Opaque for rusparseContext {
    type Inner = Handle;
    const NAME: &'static str = "handle";
    fn null_error() -> Error {
        Error::NotInitialized("handle is NULL (create it with rusparseCreate)".into())
    }
}

fn create(handle: *mut rusparseHandle_t, backend: BackendArg) -> crate::Result<()> {
    // SAFETY: the caller passes NULL or a writable handle slot.
    let slot = unsafe { out_ref(handle, "handle") }?;
    *slot = std::ptr::null_mut();
    let ctx = Context::new(super::types::backend(backend)?)?;
    *slot = into_handle(ctx);
    Ok(())
}

fn into_handle(ctx: Context) -> rusparseHandle_t {
    rusparseContext::into_raw(Handle {
        ctx,
        stream: std::ptr::null_mut(),
        device_pointers: false,
        last_placed: std::cell::Cell::new(None),
        hooks: Hooks::default(),
    })
}

/// A handle on `dev` (Rust only, no C symbol): what
/// `rusparseCreateWithBackend(CUDA or HIP)` makes, for a device rusparse
/// did not open itself, such as the emulated GPU of `kernels/host-tests`
/// (see [`Context::on_device`]). Destroy it with `rusparseDestroy`.
///
/// # Errors
/// As [`Context::on_device`].
pub fn handle_on_device(
    dev: std::sync::Arc<dyn crate::backend::gpu::GpuDevice>,
) -> crate::Result<rusparseHandle_t> {
    Ok(into_handle(Context::on_device(dev)?))
}

/// Creates a handle with the AUTO back end (host data runs on the CPU).
/// The CPU thread count comes from `RUSPARSE_NUM_THREADS` when set (an
/// invalid value is INVALID_VALUE), else all cores. A handle serves one
/// call at a time: a call that finds it in use by a call on another thread
/// returns INVALID_VALUE and touches nothing (give each thread its own
/// handle, or synchronise); the same holds for SpGEMM descriptors and matC.
#[no_mangle]
pub unsafe extern "C" fn rusparseCreate(handle: *mut rusparseHandle_t) -> rusparseStatus_t {
    boundary("rusparseCreate", || create(handle, 0))
}

/// Creates a handle for one back end. CUDA and HIP give NOT_SUPPORTED in a
/// build without them or on a machine without their GPU; `*handle` is NULL
/// after any failure. A CUDA or HIP handle takes device (or managed)
/// arrays, or host arrays throughout: those it stages, copying A and B to
/// its GPU at each phase and C back into the caller's arrays after each
/// numeric phase (α and β are then read on the host in either pointer
/// mode); a mix of the two is INVALID_VALUE naming the pointer.
#[no_mangle]
pub unsafe extern "C" fn rusparseCreateWithBackend(
    handle: *mut rusparseHandle_t,
    backend: BackendArg,
) -> rusparseStatus_t {
    boundary("rusparseCreateWithBackend", || create(handle, backend))
}

/// Destroys a handle and its thread pool. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn rusparseDestroy(handle: rusparseHandle_t) -> rusparseStatus_t {
    // SAFETY: NULL or a handle from rusparseCreate*, destroyed once.
    boundary("rusparseDestroy", || unsafe {
        rusparseContext::free(handle)
    })
}

/// Sets the stream later GPU work is queued on (stored; the CPU ignores it).
#[no_mangle]
pub unsafe extern "C" fn rusparseSetStream(
    handle: rusparseHandle_t,
    stream_id: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSetStream", || {
        // SAFETY: NULL or a live handle, claimed for this call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        unsafe { rusparseContext::get_mut(handle) }?.stream = stream_id;
        Ok(())
    })
}

/// Returns the stream set by `rusparseSetStream` (NULL: the default stream).
#[no_mangle]
pub unsafe extern "C" fn rusparseGetStream(
    handle: rusparseHandle_t,
    stream_id: *mut *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseGetStream", || {
        // SAFETY: NULL or a live handle, claimed for this call; NULL or a
        // writable slot.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        *unsafe { out_ref(stream_id, "streamId") }? = h.stream;
        Ok(())
    })
}

/// Sets where alpha and beta live (HOST or DEVICE; on a CPU handle, and for
/// host arrays on a GPU handle, both are host memory).
#[no_mangle]
pub unsafe extern "C" fn rusparseSetPointerMode(
    handle: rusparseHandle_t,
    mode: PointerModeArg,
) -> rusparseStatus_t {
    boundary("rusparseSetPointerMode", || {
        // SAFETY: NULL or a live handle, claimed for this call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get_mut(handle) }?;
        h.device_pointers = match mode {
            0 => false,
            1 => true,
            _ => {
                return Err(Error::InvalidValue(format!(
                    "mode = {mode} is not a rusparsePointerMode_t"
                )))
            }
        };
        Ok(())
    })
}

/// Returns the pointer mode.
#[no_mangle]
pub unsafe extern "C" fn rusparseGetPointerMode(
    handle: rusparseHandle_t,
    mode: *mut PointerModeArg,
) -> rusparseStatus_t {
    boundary("rusparseGetPointerMode", || {
        // SAFETY: NULL or a live handle, claimed for this call; NULL or a
        // writable slot.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        *unsafe { out_ref(mode, "mode") }? = c_int::from(h.device_pointers);
        Ok(())
    })
}

/// The library version as `major * 1000 + minor * 100 + patch` (as
/// cuSPARSE counts), equal to `RUSPARSE_VERSION` in the header.
#[no_mangle]
pub unsafe extern "C" fn rusparseGetVersion(
    handle: rusparseHandle_t,
    version: *mut c_int,
) -> rusparseStatus_t {
    boundary("rusparseGetVersion", || {
        // SAFETY: NULL or a live handle; NULL or a writable slot.
        unsafe { rusparseContext::get(handle) }?;
        *unsafe { out_ref(version, "version") }? = version_number();
        Ok(())
    })
}

/// The version from Cargo.toml as a number.
pub(crate) fn version_number() -> c_int {
    let part = |s: &str| s.parse::<c_int>().unwrap_or(0);
    part(env!("CARGO_PKG_VERSION_MAJOR")) * 1000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + part(env!("CARGO_PKG_VERSION_PATCH"))
}

/// The back end of the handle: CPU or CUDA as created; for an AUTO handle,
/// the back end its last product ran on (chosen by where matA's arrays
/// live), or AUTO before its first product.
#[no_mangle]
pub unsafe extern "C" fn rusparseGetBackend(
    handle: rusparseHandle_t,
    backend: *mut BackendArg,
) -> rusparseStatus_t {
    boundary("rusparseGetBackend", || {
        // SAFETY: NULL or a live handle, claimed for this call; NULL or a
        // writable slot.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        let kind = match h.ctx.backend() {
            crate::BackendKind::Auto => h.last_placed.get().unwrap_or(crate::BackendKind::Auto),
            other => other,
        };
        *unsafe { out_ref(backend, "backend") }? = backend_number(kind);
        Ok(())
    })
}

/// One line describing where the handle runs (rusparse extension), e.g.
/// `CUDA device 0: NVIDIA H100 80GB HBM3 (sm_90), driver for CUDA 13.0,
/// NVRTC 12.9 (libnvrtc.so.12)` or `CPU with 16 threads`; for an AUTO
/// handle the CPU's line and which GPUs its device arrays would go to.
/// Writes at most `capacity` bytes including the terminating NUL (a
/// longer line is cut); `text` may be NULL only with `capacity` 0.
/// INVALID_VALUE for a NULL handle or such a `text`.
#[no_mangle]
pub unsafe extern "C" fn rusparseGetBackendDescription(
    handle: rusparseHandle_t,
    text: *mut std::ffi::c_char,
    capacity: usize,
) -> rusparseStatus_t {
    boundary("rusparseGetBackendDescription", || {
        // SAFETY: NULL or a live handle, claimed for this call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        if text.is_null() && capacity > 0 {
            return Err(Error::InvalidValue(format!(
                "text is NULL with capacity = {capacity}"
            )));
        }
        let line = h.ctx.describe();
        if capacity > 0 {
            let n = line.len().min(capacity - 1);
            // SAFETY: `text` holds `capacity` writable bytes (the caller's
            // contract); n + 1 <= capacity are written.
            unsafe {
                std::ptr::copy_nonoverlapping(line.as_ptr(), text.cast::<u8>(), n);
                *text.add(n) = 0;
            }
        }
        Ok(())
    })
}

/// Gives this handle its own pool of `num_threads` CPU threads (0: back to
/// the default, all cores or `RUSPARSE_NUM_THREADS`). Other handles are not
/// affected. Negative values and values above 4096 are INVALID_VALUE.
#[no_mangle]
pub unsafe extern "C" fn rusparseSetNumThreads(
    handle: rusparseHandle_t,
    num_threads: c_int,
) -> rusparseStatus_t {
    boundary("rusparseSetNumThreads", || {
        // SAFETY: NULL or a live handle, claimed for this call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get_mut(handle) }?;
        let n = usize::try_from(num_threads)
            .map_err(|_| Error::InvalidValue(format!("numThreads = {num_threads} is negative")))?;
        if n == 0 {
            // Back to the default of a new handle (which reads the
            // environment); the scratch limit set on the handle stays.
            // The allocators stay too.
            let mut ctx = Context::new(h.ctx.backend())?;
            ctx.set_scratch_limit(h.ctx.scratch_limit());
            ctx.keep_allocators_of(&h.ctx)?;
            h.ctx = ctx;
            Ok(())
        } else {
            h.ctx.set_num_threads(n)
        }
    })
}

/// The number of CPU threads this handle's products run on.
#[no_mangle]
pub unsafe extern "C" fn rusparseGetNumThreads(
    handle: rusparseHandle_t,
    num_threads: *mut c_int,
) -> rusparseStatus_t {
    boundary("rusparseGetNumThreads", || {
        // SAFETY: NULL or a live handle, claimed for this call; NULL or a
        // writable slot.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        *unsafe { out_ref(num_threads, "numThreads") }? =
            c_int::try_from(h.ctx.num_threads()).unwrap_or(c_int::MAX);
        Ok(())
    })
}

/// Sets the most bytes of CPU scratch memory (accumulators, hash tables,
/// merge buffers) this handle keeps between products, so a later product
/// reuses it instead of allocating and page-faulting its own; 0 keeps
/// none. Kept memory above the new limit is freed now. A new handle keeps
/// up to 256 MiB. (A rusparse extension; cuSPARSE has no such memory.)
#[no_mangle]
pub unsafe extern "C" fn rusparseSetScratchLimit(
    handle: rusparseHandle_t,
    bytes: usize,
) -> rusparseStatus_t {
    boundary("rusparseSetScratchLimit", || {
        // SAFETY: NULL or a live handle, claimed for this call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        h.ctx.set_scratch_limit(bytes);
        Ok(())
    })
}

/// The bytes of CPU scratch memory this handle keeps now (`kept_bytes`) and
/// the most it keeps (`limit_bytes`); either pointer may be NULL, not both.
#[no_mangle]
pub unsafe extern "C" fn rusparseGetScratchSize(
    handle: rusparseHandle_t,
    kept_bytes: *mut usize,
    limit_bytes: *mut usize,
) -> rusparseStatus_t {
    boundary("rusparseGetScratchSize", || {
        // SAFETY: NULL or a live handle, claimed for this call; NULL or
        // writable slots.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        if kept_bytes.is_null() && limit_bytes.is_null() {
            return Err(Error::InvalidValue(
                "kept_bytes and limit_bytes are both NULL".into(),
            ));
        }
        if !kept_bytes.is_null() {
            *unsafe { out_ref(kept_bytes, "kept_bytes") }? = h.ctx.scratch_bytes();
        }
        if !limit_bytes.is_null() {
            *unsafe { out_ref(limit_bytes, "limit_bytes") }? = h.ctx.scratch_limit();
        }
        Ok(())
    })
}

/// Sets the memory budget of the products this handle plans from now on, in
/// bytes (0: no budget, the default; a rusparse extension). The peak of
/// everything rusparse allocates for a product beyond the caller's A, B and
/// C (the plan, every phase's workspaces, the external buffers it asks
/// for, the scratch the handle keeps) stays at most `bytes`: work
/// estimation picks the fastest configuration that fits, or fails with
/// ALLOC_FAILED before the product allocates anything more, and
/// `rusparseGetLastErrorMessage` names the smallest budget that would work.
/// On a GPU it bounds the product's device memory and a product that
/// cannot fit fails with INSUFFICIENT_RESOURCES (see docs/memory.md).
/// `RUSPARSE_MEMORY_BUDGET` sets it for new handles.
/// See docs/memory.md.
#[no_mangle]
pub unsafe extern "C" fn rusparseSetMemoryBudget(
    handle: rusparseHandle_t,
    bytes: usize,
) -> rusparseStatus_t {
    boundary("rusparseSetMemoryBudget", || {
        // SAFETY: NULL or a live handle, claimed for this call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        h.ctx.set_memory_budget((bytes > 0).then_some(bytes));
        Ok(())
    })
}

/// The handle's memory budget in bytes (0: none).
#[no_mangle]
pub unsafe extern "C" fn rusparseGetMemoryBudget(
    handle: rusparseHandle_t,
    bytes: *mut usize,
) -> rusparseStatus_t {
    boundary("rusparseGetMemoryBudget", || {
        // SAFETY: NULL or a live handle, claimed for this call; NULL or a
        // writable slot.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        *unsafe { out_ref(bytes, "bytes") }? = h.ctx.memory_budget().unwrap_or(0);
        Ok(())
    })
}

/// Frees the CPU scratch memory this handle keeps between products (the
/// next product allocates what it needs again). `rusparseDestroy` frees it
/// too.
#[no_mangle]
pub unsafe extern "C" fn rusparseTrimScratch(handle: rusparseHandle_t) -> rusparseStatus_t {
    boundary("rusparseTrimScratch", || {
        // SAFETY: NULL or a live handle, claimed for this call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        h.ctx.trim_scratch();
        Ok(())
    })
}
