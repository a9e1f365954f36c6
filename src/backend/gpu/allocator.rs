//! Device memory from the caller ([`DeviceAllocator`]).

use super::device::RawStream;
use std::fmt::Debug;

/// Where a context's GPU products take their device memory from, when the
/// caller supplies it (`Context::set_device_allocator`, the C ABI's
/// `rusparseSetAllocator`): a memory pool of the application, a
/// framework's caching allocator, a PETSc or Kokkos memory space.
///
/// Every device allocation of a product (staged copies of host arrays, row
/// metadata, transposes, spill lists, global hash tables, C's device copy)
/// then goes through it, still counted against the memory budget. Memory
/// is asked for and given back on the product's streams, in stream order
/// as `cudaMallocAsync` / `cudaFreeAsync` use them; a null stream means
/// none: the memory must be usable by any stream once `alloc` returns, and
/// `free` may reuse it only once the device is done with it (as
/// `cudaFree` waits).
pub trait DeviceAllocator: Send + Sync + Debug {
    /// `bytes` (> 0) of memory on the context's device, ordered on
    /// `stream`; `None` when it cannot (the product then fails with
    /// [`crate::Error::InsufficientResources`] and frees what it holds).
    fn alloc(&self, bytes: usize, stream: RawStream) -> Option<u64>;

    /// Gives back `ptr`, `bytes` long, from [`DeviceAllocator::alloc`],
    /// after the work queued on `stream`.
    ///
    /// # Safety
    /// `ptr` came from `alloc` on this allocator with `bytes`, and is freed
    /// once; `stream` is null or live.
    unsafe fn free(&self, ptr: u64, bytes: usize, stream: RawStream);
}
