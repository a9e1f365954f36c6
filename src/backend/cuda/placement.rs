//! Where a pointer lives, and which device a CUDA handle opens.
//!
//! A CUDA handle takes device (or managed) pointers, as cuSPARSE's does; an
//! AUTO handle runs each product where A's arrays live. Both ask the driver
//! (`cuPointerGetAttribute`, unified addressing) rather than guess from
//! address ranges. Without a driver every pointer is host memory.

use super::device::{describe_driver_error, CudaDevice};
use super::loader;
use crate::error::{Error, Result};
use cudarc::driver::sys as cu;
use cudarc::driver::DriverError;
use std::ffi::c_void;
use std::sync::Arc;

/// The memory a pointer refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySpace {
    /// Pageable or pinned host memory (pinned host memory is host memory
    /// here: rusparse's GPU kernels do not read through mapped pointers).
    Host,
    /// Memory of the GPU with this ordinal (plain or managed).
    Device(usize),
}

impl MemorySpace {
    /// "host memory" / "memory of CUDA device 1".
    pub fn describe(self) -> String {
        match self {
            MemorySpace::Host => "host memory".into(),
            MemorySpace::Device(d) => format!("memory of CUDA device {d}"),
        }
    }
}

/// Where `p` lives. NULL and any pointer the driver does not know (plain
/// `malloc` memory: `CUDA_ERROR_INVALID_VALUE`) are host memory; so is
/// everything when no driver is installed. When no context is current on
/// the calling thread the driver may answer `CUDA_ERROR_INVALID_CONTEXT`
/// (or `NOT_INITIALIZED`): the question is asked again in the first active
/// primary context (the caller's binding is given back); with none active
/// no device memory of the runtime API exists, and the pointer is host
/// memory.
///
/// # Errors
/// [`crate::Error::ExecutionFailed`] with the driver's message for any
/// other answer: a device pointer taken for host memory would be read on
/// the host and crash, so nothing runs.
pub fn memory_space(p: *const c_void) -> Result<MemorySpace> {
    if p.is_null() || loader::driver().is_err() {
        return Ok(MemorySpace::Host);
    }
    loader::guarded("cuPointerGetAttribute", || {
        let answer = match query(p) {
            Answer::NeedsContext(r) => ask_in_an_active_context(p).unwrap_or(
                // No device has an active primary context, so no memory
                // of the runtime API (or of rusparse) exists: host memory.
                // (A driver-API context made with cuCtxCreate on another
                // thread is the case this cannot see.)
                if r == cu::CUresult::CUDA_ERROR_INVALID_CONTEXT {
                    Answer::Space(MemorySpace::Host)
                } else {
                    Answer::Failed(r)
                },
            ),
            a => a,
        };
        match answer {
            Answer::Space(s) => Ok(s),
            Answer::NeedsContext(r) | Answer::Failed(r) => Err(Error::ExecutionFailed(format!(
                "cuPointerGetAttribute({p:p}): {}; cannot tell whether the array is device or host \
                 memory, so the product does not run",
                describe_driver_error(&DriverError(r))
            ))),
        }
    })
}

/// Asks again with the primary context of the first device that has an
/// active one made current (the caller's binding is restored after);
/// `None` when no device has one. Making a context just to ask would cost
/// a CPU-only caller on a GPU machine a context on device 0.
fn ask_in_an_active_context(p: *const c_void) -> Option<Answer> {
    let _binding = crate::backend::caller_binding::CallerBinding::save();
    let mut count = 0;
    // SAFETY: the driver is loaded; valid out pointers throughout.
    unsafe {
        if cu::cuDeviceGetCount(&mut count) != cu::CUresult::CUDA_SUCCESS {
            return None;
        }
        for ordinal in 0..count {
            let mut dev: cu::CUdevice = 0;
            let (mut flags, mut active) = (0u32, 0i32);
            if cu::cuDeviceGet(&mut dev, ordinal) != cu::CUresult::CUDA_SUCCESS
                || cu::cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active)
                    != cu::CUresult::CUDA_SUCCESS
                || active == 0
            {
                continue;
            }
            let mut ctx: cu::CUcontext = std::ptr::null_mut();
            if cu::cuDevicePrimaryCtxRetain(&mut ctx, dev) != cu::CUresult::CUDA_SUCCESS {
                continue;
            }
            let answer = if cu::cuCtxSetCurrent(ctx) == cu::CUresult::CUDA_SUCCESS {
                Some(query(p))
            } else {
                None
            };
            cu::cuDevicePrimaryCtxRelease_v2(dev);
            if answer.is_some() {
                return answer;
            }
        }
    }
    None
}

/// The driver's answer about a pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Space(MemorySpace),
    /// No usable context on this thread: ask again with one current.
    NeedsContext(cu::CUresult),
    Failed(cu::CUresult),
}

/// Reads `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)`'s
/// status and memory type (the ordinal is asked only for device memory).
fn answer(r: cu::CUresult, kind: u32, ordinal: impl FnOnce() -> usize) -> Answer {
    use cu::CUresult as R;
    match r {
        R::CUDA_SUCCESS if kind == cu::CUmemorytype::CU_MEMORYTYPE_HOST as u32 => {
            Answer::Space(MemorySpace::Host)
        }
        R::CUDA_SUCCESS => Answer::Space(MemorySpace::Device(ordinal())),
        // Memory the driver never saw: plain host memory.
        R::CUDA_ERROR_INVALID_VALUE => Answer::Space(MemorySpace::Host),
        R::CUDA_ERROR_INVALID_CONTEXT
        | R::CUDA_ERROR_NOT_INITIALIZED
        | R::CUDA_ERROR_CONTEXT_IS_DESTROYED => Answer::NeedsContext(r),
        _ => Answer::Failed(r),
    }
}

fn query(p: *const c_void) -> Answer {
    let ptr = p as cu::CUdeviceptr;
    let mut kind: u32 = 0;
    // SAFETY: the driver is loaded and initialised (loader::driver); the
    // out pointer is valid for the attribute's type (an unsigned int).
    let r = unsafe {
        cu::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr,
        )
    };
    answer(r, kind, || {
        let mut ordinal: i32 = 0;
        // SAFETY: as above; the attribute is an int.
        let r = unsafe {
            cu::cuPointerGetAttribute(
                (&mut ordinal as *mut i32).cast(),
                cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr,
            )
        };
        if r != cu::CUresult::CUDA_SUCCESS || ordinal < 0 {
            0
        } else {
            ordinal as usize
        }
    })
}

/// The ordinal of the device whose context is current on this thread (the
/// CUDA runtime's `cudaSetDevice`), else 0.
fn current_ordinal() -> usize {
    loader::guarded("cuCtxGetDevice", || {
        let mut ctx: cu::CUcontext = std::ptr::null_mut();
        // SAFETY: the driver is loaded; valid out pointers.
        unsafe {
            if cu::cuCtxGetCurrent(&mut ctx) != cu::CUresult::CUDA_SUCCESS || ctx.is_null() {
                return Ok(0);
            }
            let mut dev: cu::CUdevice = 0;
            if cu::cuCtxGetDevice(&mut dev) != cu::CUresult::CUDA_SUCCESS || dev < 0 {
                return Ok(0);
            }
            Ok(dev as usize)
        }
    })
    .unwrap_or(0)
}

impl CudaDevice {
    /// The device a new CUDA handle runs on: the current one of this thread
    /// (as cuSPARSE's `cusparseCreate`), else device 0. Checks NVRTC too,
    /// since nothing runs without it.
    ///
    /// # Errors
    /// [`crate::Error::NotSupported`] naming what is missing: the driver
    /// library, a GPU, or NVRTC.
    pub fn current() -> Result<Arc<CudaDevice>> {
        loader::driver()?;
        loader::nvrtc()?;
        CudaDevice::get(current_ordinal())
    }

    /// The device holding `p`'s memory, for AUTO handles.
    ///
    /// # Errors
    /// As [`CudaDevice::current`].
    pub fn for_ordinal(ordinal: usize) -> Result<Arc<CudaDevice>> {
        loader::nvrtc()?;
        CudaDevice::get(ordinal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_is_host() {
        let v: Vec<f64> = (0..16).map(f64::from).collect();
        assert_eq!(memory_space(v.as_ptr().cast()).unwrap(), MemorySpace::Host);
        assert_eq!(memory_space(std::ptr::null()).unwrap(), MemorySpace::Host);
        let x = 5i32;
        assert_eq!(
            memory_space((&x as *const i32).cast()).unwrap(),
            MemorySpace::Host
        );
        assert_eq!(MemorySpace::Device(1).describe(), "memory of CUDA device 1");
    }

    /// Only INVALID_VALUE means "not CUDA memory"; a missing context asks
    /// again; anything else is an error, never host memory.
    #[test]
    fn the_drivers_answers_are_read_strictly() {
        use cu::CUresult as R;
        let host = cu::CUmemorytype::CU_MEMORYTYPE_HOST as u32;
        let device = cu::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
        let unified = cu::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32;
        let no = || -> usize { panic!("the ordinal of host memory was asked") };
        assert_eq!(
            answer(R::CUDA_SUCCESS, host, no),
            Answer::Space(MemorySpace::Host)
        );
        assert_eq!(
            answer(R::CUDA_SUCCESS, device, || 3),
            Answer::Space(MemorySpace::Device(3))
        );
        assert_eq!(
            answer(R::CUDA_SUCCESS, unified, || 1),
            Answer::Space(MemorySpace::Device(1))
        );
        assert_eq!(
            answer(R::CUDA_ERROR_INVALID_VALUE, 0, no),
            Answer::Space(MemorySpace::Host)
        );
        for r in [R::CUDA_ERROR_INVALID_CONTEXT, R::CUDA_ERROR_NOT_INITIALIZED] {
            assert_eq!(answer(r, 0, no), Answer::NeedsContext(r));
        }
        for r in [
            R::CUDA_ERROR_DEINITIALIZED,
            R::CUDA_ERROR_UNKNOWN,
            R::CUDA_ERROR_ILLEGAL_ADDRESS,
        ] {
            assert_eq!(answer(r, 0, no), Answer::Failed(r));
        }
    }
}
