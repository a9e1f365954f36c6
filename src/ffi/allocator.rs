//! Allocator hooks: `rusparseSetAllocator`, `rusparseGetAllocator` (a
//! rusparse extension; see docs/memory.md, "Allocator hooks").

#![allow(non_camel_case_types)]

use super::boundary::{boundary, Opaque};
use super::types::*;
use crate::backend::gpu::{DeviceAllocator, RawStream};
use crate::host_allocator::{self, HostHooks};
use crate::Error;
use std::ffi::c_void;
use std::sync::Arc;

/// Host allocation hook: returns `bytes` bytes of host memory, or NULL when
/// it cannot. The memory need not be aligned (rusparse aligns inside it).
/// Called from the handle's calls and from its worker threads, possibly at
/// once: it must be thread-safe.
pub type rusparseHostAlloc_t =
    Option<unsafe extern "C" fn(bytes: usize, userCtx: *mut c_void) -> *mut c_void>;

/// Host free hook: gives back `ptr`, which `rusparseHostAlloc_t` returned
/// for `bytes` bytes. Called from any thread.
pub type rusparseHostFree_t =
    Option<unsafe extern "C" fn(ptr: *mut c_void, bytes: usize, userCtx: *mut c_void)>;

/// Device allocation hook: returns `bytes` bytes of memory on the handle's
/// GPU, ordered on `stream` as `cudaMallocAsync` / `hipMallocAsync` do, or
/// NULL when it cannot. A NULL `stream` is the legacy default stream; the
/// memory must then be usable by any stream once the hook returns.
pub type rusparseDeviceAlloc_t = Option<
    unsafe extern "C" fn(bytes: usize, stream: *mut c_void, userCtx: *mut c_void) -> *mut c_void,
>;

/// Device free hook: gives back `ptr` (`bytes` bytes from
/// `rusparseDeviceAlloc_t`) after the work queued on `stream`, as
/// `cudaFreeAsync` does; with a NULL `stream`, once the device is done with
/// it, as `cudaFree` does.
pub type rusparseDeviceFree_t = Option<
    unsafe extern "C" fn(ptr: *mut c_void, bytes: usize, stream: *mut c_void, userCtx: *mut c_void),
>;

/// The hooks of a handle, as `rusparseSetAllocator` got them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hooks {
    host_alloc: rusparseHostAlloc_t,
    host_free: rusparseHostFree_t,
    device_alloc: rusparseDeviceAlloc_t,
    device_free: rusparseDeviceFree_t,
    user_ctx: *mut c_void,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            host_alloc: None,
            host_free: None,
            device_alloc: None,
            device_free: None,
            user_ctx: std::ptr::null_mut(),
        }
    }
}

/// Device hooks given through the C ABI.
#[derive(Debug)]
struct CDeviceAllocator {
    alloc: unsafe extern "C" fn(usize, *mut c_void, *mut c_void) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void, usize, *mut c_void, *mut c_void),
    user_ctx: *mut c_void,
}

// SAFETY: the caller of rusparseSetAllocator promises hooks that may be
// called from any thread with their context pointer.
unsafe impl Send for CDeviceAllocator {}
// SAFETY: as for Send; never changed after creation.
unsafe impl Sync for CDeviceAllocator {}

impl DeviceAllocator for CDeviceAllocator {
    fn alloc(&self, bytes: usize, stream: RawStream) -> Option<u64> {
        // SAFETY: the caller of rusparseSetAllocator vouches for the hook.
        let p = unsafe { (self.alloc)(bytes, stream, self.user_ctx) };
        (!p.is_null()).then_some(p as u64)
    }

    unsafe fn free(&self, ptr: u64, bytes: usize, stream: RawStream) {
        // SAFETY: as `alloc`; `ptr` came from it with `bytes`.
        unsafe { (self.free)(ptr as *mut c_void, bytes, stream, self.user_ctx) }
    }
}

/// Both of a pair, neither, or INVALID_VALUE naming the one missing.
fn pair<A, F>(alloc: Option<A>, free: Option<F>, kind: &str) -> crate::Result<Option<(A, F)>> {
    match (alloc, free) {
        (Some(a), Some(f)) => Ok(Some((a, f))),
        (None, None) => Ok(None),
        (a, _) => {
            let (given, missing) = if a.is_some() {
                ("Alloc", "Free")
            } else {
                ("Free", "Alloc")
            };
            Err(Error::InvalidValue(format!(
                "{kind}{given} is set but {kind}{missing} is NULL; give both {kind} hooks, or \
                 neither for rusparse's own {kind} memory"
            )))
        }
    }
}

/// Routes the handle's internal memory through the caller's functions (a
/// rusparse extension, as GraphBLAS's `GxB_init` hooks and Kokkos' memory
/// spaces do). `userCtx` is passed to every hook.
///
/// - **Host** (`hostAlloc`, `hostFree`): every host allocation rusparse
///   makes in the handle's calls (plans, workspaces, kept scratch)
///   and on the handle's worker threads, which the handle then gets of its
///   own (as many as before). Needs a library built with the cargo feature
///   `c-allocator-hooks`, as the CMake build is; otherwise NOT_SUPPORTED.
/// - **Device** (`deviceAlloc`, `deviceFree`): every device allocation of a
///   GPU product, stream-ordered, still counted against the memory budget;
///   a NULL from the hook is INSUFFICIENT_RESOURCES.
///
/// Each pair is both or neither: NULL, NULL keeps rusparse's own memory for
/// that kind (the default), one of the two NULL is INVALID_VALUE and
/// changes nothing. Set the hooks before products are planned with the
/// handle (work estimation, `rusparseSpGEMM_predictNnz`): memory is always
/// given back to the hooks that allocated it, so a product planned before
/// keeps its old hooks, and memory made under hooks may be freed after the
/// handle is destroyed (a thread's state, a message): the hooks must stay
/// callable, with `userCtx`, until the program ends. A host hook returning
/// NULL fails the call with ALLOC_FAILED where rusparse allocates
/// fallibly (every array sized by the matrices) and aborts the process
/// where it does not (small bookkeeping), as Rust's allocations do.
/// rusparse keeps each set of host hooks for the life of the process (a
/// few bytes). See docs/memory.md.
#[no_mangle]
pub unsafe extern "C" fn rusparseSetAllocator(
    handle: rusparseHandle_t,
    hostAlloc: rusparseHostAlloc_t,
    hostFree: rusparseHostFree_t,
    deviceAlloc: rusparseDeviceAlloc_t,
    deviceFree: rusparseDeviceFree_t,
    userCtx: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSetAllocator", || {
        // SAFETY: NULL or a live handle, claimed for this call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get_mut(handle) }?;
        let host = pair(hostAlloc, hostFree, "host")?;
        let device = pair(deviceAlloc, deviceFree, "device")?;
        if host.is_some() && !host_allocator::ROUTES_HOST_ALLOCATIONS {
            return Err(Error::NotSupported(
                "this librusparse was built without the cargo feature `c-allocator-hooks`, so it \
                 cannot route host memory (the CMake build enables it); device hooks work in \
                 every build"
                    .into(),
            ));
        }
        let host = host.map(|(alloc, free)| {
            host_allocator::register(HostHooks {
                alloc,
                free,
                user_ctx: userCtx,
            })
        });
        h.ctx.set_host_hooks(host)?;
        h.ctx.set_device_allocator(device.map(|(alloc, free)| {
            Arc::new(CDeviceAllocator {
                alloc,
                free,
                user_ctx: userCtx,
            }) as Arc<dyn DeviceAllocator>
        }));
        h.hooks = Hooks {
            host_alloc: hostAlloc,
            host_free: hostFree,
            device_alloc: deviceAlloc,
            device_free: deviceFree,
            user_ctx: userCtx,
        };
        Ok(())
    })
}

/// The hooks set by `rusparseSetAllocator` (NULL where none is set). Any
/// output pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn rusparseGetAllocator(
    handle: rusparseHandle_t,
    hostAlloc: *mut rusparseHostAlloc_t,
    hostFree: *mut rusparseHostFree_t,
    deviceAlloc: *mut rusparseDeviceAlloc_t,
    deviceFree: *mut rusparseDeviceFree_t,
    userCtx: *mut *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseGetAllocator", || {
        // SAFETY: NULL or a live handle, claimed for this call; each output
        // NULL or writable.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let hooks = unsafe { rusparseContext::get(handle) }?.hooks;
        unsafe {
            if let Some(p) = hostAlloc.as_mut() {
                *p = hooks.host_alloc;
            }
            if let Some(p) = hostFree.as_mut() {
                *p = hooks.host_free;
            }
            if let Some(p) = deviceAlloc.as_mut() {
                *p = hooks.device_alloc;
            }
            if let Some(p) = deviceFree.as_mut() {
                *p = hooks.device_free;
            }
            if let Some(p) = userCtx.as_mut() {
                *p = hooks.user_ctx;
            }
        }
        Ok(())
    })
}
