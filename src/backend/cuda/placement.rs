//! Where a pointer lives, and which device a CUDA handle opens.
//!
//! A CUDA handle takes device (or managed) pointers, as cuSPARSE's does; an
//! AUTO handle runs each product where A's arrays live. Both ask the driver
//! (`cuPointerGetAttribute`, unified addressing) rather than guess from
//! address ranges. Without a driver every pointer is host memory.

use super::device::CudaDevice;
use super::loader;
use crate::error::Result;
use cudarc::driver::sys as cu;
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
/// `malloc` memory) are host memory; so is everything when no driver is
/// installed.
pub fn memory_space(p: *const c_void) -> MemorySpace {
    if p.is_null() || loader::driver().is_err() {
        return MemorySpace::Host;
    }
    loader::guarded("cuPointerGetAttribute", || Ok(query(p))).unwrap_or(MemorySpace::Host)
}

fn query(p: *const c_void) -> MemorySpace {
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
    if r != cu::CUresult::CUDA_SUCCESS {
        // CUDA_ERROR_INVALID_VALUE: memory the driver never saw.
        return MemorySpace::Host;
    }
    if kind == cu::CUmemorytype::CU_MEMORYTYPE_HOST as u32 {
        return MemorySpace::Host;
    }
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
        ordinal = 0;
    }
    MemorySpace::Device(ordinal as usize)
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
        assert_eq!(memory_space(v.as_ptr().cast()), MemorySpace::Host);
        assert_eq!(memory_space(std::ptr::null()), MemorySpace::Host);
        let x = 5i32;
        assert_eq!(memory_space((&x as *const i32).cast()), MemorySpace::Host);
        assert_eq!(MemorySpace::Device(1).describe(), "memory of CUDA device 1");
    }
}
