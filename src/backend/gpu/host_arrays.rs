//! Host arrays on a GPU: device copies of a matrix's three arrays
//! ([`DeviceArrays`]), with which a product staged on a GPU (the Rust
//! API's on a CUDA or HIP context, the C ABI's of host arrays on a GPU
//! handle; `product::gpu`) copies A and B there and C back.

use super::{GpuDevice, RawStream};
use crate::error::{Error, Result};
use crate::types::Scalar;
use std::ffi::c_void;
use std::sync::Arc;

/// Device copies of up to three host arrays (a matrix's row offsets,
/// column indices and values; 0 where an array is empty), allocated
/// synchronously, freed on drop.
pub struct DeviceArrays {
    dev: Arc<dyn GpuDevice>,
    ptrs: [u64; 3],
    bytes: [usize; 3],
}

impl DeviceArrays {
    /// Bytes of `rows + 1` offsets and `nnz` column indices and values of
    /// `sizes` bytes each (offset, index, value).
    ///
    /// # Errors
    /// [`Error::AllocFailed`] when a size overflows.
    pub fn sizes(rows: usize, nnz: usize, sizes: [usize; 3]) -> Result<[usize; 3]> {
        let bytes = |n: usize, each: usize| {
            n.checked_mul(each)
                .ok_or_else(|| Error::AllocFailed(format!("{n} entries of {each} bytes")))
        };
        Ok([
            bytes(rows.saturating_add(1), sizes[0])?,
            bytes(nnz, sizes[1])?,
            bytes(nnz, sizes[2])?,
        ])
    }

    /// Allocates the three arrays on `dev` (made current first).
    ///
    /// # Errors
    /// [`Error::InsufficientResources`] when device memory runs out
    /// (nothing is left allocated).
    pub fn new(dev: &Arc<dyn GpuDevice>, bytes: [usize; 3]) -> Result<DeviceArrays> {
        DeviceArrays::allocate(dev, bytes, "to stage a matrix")
    }

    /// 32 bytes for alpha (at 0) and beta (at 16), filled by
    /// [`DeviceArrays::set_scalars`]; allocated synchronously, so they
    /// serve calls on any stream.
    ///
    /// # Errors
    /// As [`DeviceArrays::new`].
    pub fn scalars(dev: &Arc<dyn GpuDevice>) -> Result<DeviceArrays> {
        DeviceArrays::allocate(dev, [32, 0, 0], "for alpha and beta")
    }

    fn allocate(dev: &Arc<dyn GpuDevice>, bytes: [usize; 3], what: &str) -> Result<DeviceArrays> {
        dev.bind()?;
        let mut arrays = DeviceArrays {
            dev: dev.clone(),
            ptrs: [0; 3],
            bytes,
        };
        for (ptr, &n) in arrays.ptrs.iter_mut().zip(&bytes) {
            if n > 0 {
                *ptr = dev
                    .alloc(n, None)
                    .map_err(|e| e.context(&format!("allocating {n} bytes {what}")))?;
            }
        }
        Ok(arrays)
    }

    /// The device addresses (0 for an empty array).
    pub fn ptrs(&self) -> [u64; 3] {
        self.ptrs
    }

    /// The bytes of each array.
    pub fn bytes(&self) -> [usize; 3] {
        self.bytes
    }

    /// Copies `host[k]` (`bytes[k]` bytes, or nothing when NULL) to the
    /// device, queued on `stream`.
    ///
    /// # Errors
    /// A runtime error.
    ///
    /// # Safety
    /// Each non-NULL `host[k]` holds `bytes[k]` readable bytes.
    pub unsafe fn upload(&self, stream: RawStream, host: [*const c_void; 3]) -> Result<()> {
        for ((&dst, &n), src) in self.ptrs.iter().zip(&self.bytes).zip(host) {
            if dst != 0 && !src.is_null() {
                // SAFETY: by the caller's contract, and `dst` holds `n`
                // bytes.
                let src = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), n) };
                unsafe { self.dev.upload(dst, src, stream) }
                    .map_err(|e| e.context("copying a matrix to the device"))?;
            }
        }
        Ok(())
    }

    /// Copies the device arrays into `host[k]` (`bytes[k]` bytes, or
    /// nothing when NULL); each copy waits for `stream`, so for the work
    /// queued on it.
    ///
    /// # Errors
    /// A runtime error, including one of earlier work on `stream`.
    ///
    /// # Safety
    /// Each non-NULL `host[k]` holds `bytes[k]` writable bytes.
    pub unsafe fn download(&self, stream: RawStream, host: [*mut c_void; 3]) -> Result<()> {
        for ((&src, &n), dst) in self.ptrs.iter().zip(&self.bytes).zip(host) {
            if src != 0 && !dst.is_null() {
                // SAFETY: by the caller's contract, and `src` holds `n`
                // bytes.
                let dst = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), n) };
                unsafe { self.dev.download(dst, src, stream) }
                    .map_err(|e| e.context("copying C back from the device"))?;
            }
        }
        Ok(())
    }
}

impl DeviceArrays {
    /// Copies `alpha` and `beta` (a value's bytes, at most 16 each) into
    /// scalars made by [`DeviceArrays::scalars`], queued on `stream`
    /// (ordered after earlier work that still reads them); returns alpha's
    /// address, beta's is 16 bytes on.
    ///
    /// # Errors
    /// A runtime error; [`Error::InternalError`] for other arrays or a
    /// value over 16 bytes.
    pub(crate) fn set_scalars(&self, stream: RawStream, alpha: &[u8], beta: &[u8]) -> Result<u64> {
        if self.bytes != [32, 0, 0] || alpha.len() > 16 || beta.len() > 16 {
            return Err(Error::InternalError(
                "alpha and beta go into DeviceArrays::scalars, 16 bytes each".into(),
            ));
        }
        let mut bytes = [0u8; 32];
        bytes[..alpha.len()].copy_from_slice(alpha);
        bytes[16..16 + beta.len()].copy_from_slice(beta);
        self.dev.bind()?;
        let none = std::ptr::null();
        // SAFETY: `bytes` holds the 32 bytes of the first array; the
        // runtime copies pageable memory before the call returns.
        unsafe { self.upload(stream, [bytes.as_ptr().cast(), none, none]) }
            .map_err(|e| e.context("copying alpha and beta to the device"))?;
        Ok(self.ptrs[0])
    }
}

/// A scalar's bytes, for [`DeviceArrays::set_scalars`].
pub(crate) fn scalar_bytes<T: Scalar>(v: &T) -> &[u8] {
    // SAFETY: any value is readable as its bytes (Scalar types are plain
    // floats or pairs of floats, without padding).
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

impl Drop for DeviceArrays {
    fn drop(&mut self) {
        // The device must be current for the free; a synchronous free
        // waits for the work that still reads the copies. If the device
        // cannot be made current the memory is left to the context's
        // teardown.
        if self.dev.bind().is_ok() {
            for &p in &self.ptrs {
                if p != 0 {
                    // SAFETY: allocated in `new` on this device, freed once.
                    unsafe { self.dev.free(p, None) };
                }
            }
        }
    }
}
