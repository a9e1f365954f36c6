//! What the GPU pipeline needs from a device, whichever runtime drives it.
//!
//! [`GpuDevice`] is the whole interface between the SpGEMM pipeline
//! ([`super::spgemm::GpuSpgemm`]) and a GPU runtime: memory, copies,
//! streams, events and kernel launches. The CUDA back end implements it
//! with the driver API (cudarc), the HIP back end with libamdhip64, and the
//! kernel host tests (`kernels/host-tests`) with host memory and the
//! host-emulated kernels, so the pipeline's host code (binning, batching,
//! spills, transposes, error reporting, frees) runs in CI without a GPU.
//!
//! Streams and events are the runtime's raw handles (`CUstream`,
//! `hipStream_t`, ...) as untyped pointers; null is the legacy default
//! stream. Device memory is a `u64` address. Every method that takes a
//! handle or an address is `unsafe`: the caller vouches that it is live and
//! that the bytes touched lie inside one allocation.

use super::launch::kernel_params;
use super::launch::LaunchConfig;
use crate::backend::kernel_source::KernelTypes;
use crate::error::{Error, Result};
use crate::plan::gpu_bins::DeviceLimits;
use crate::types::BackendKind;
use std::ffi::c_void;
use std::fmt::Debug;
use std::sync::Arc;

/// A stream of the runtime (`CUstream`, `hipStream_t`); null is the legacy
/// default stream.
pub type RawStream = *mut c_void;
/// An event of the runtime (`CUevent`, `hipEvent_t`).
pub type RawEvent = *mut c_void;

/// One GPU as the pipeline sees it (see the module docs).
///
/// Implementations map their runtime's errors to rusparse's: out of device
/// memory is [`Error::InsufficientResources`], a kernel image the device
/// cannot run [`Error::ArchMismatch`], anything else
/// [`Error::ExecutionFailed`], each naming what was being done.
pub trait GpuDevice: Send + Sync + Debug {
    /// Which runtime drives it (`Cuda` or `Hip`; the host emulation of the
    /// tests says `Cuda` or `Hip` after the device it imitates).
    fn backend(&self) -> BackendKind;

    /// The runtime's device number.
    fn ordinal(&self) -> usize;

    /// The device's name, e.g. `NVIDIA H100 80GB HBM3`.
    fn name(&self) -> &str;

    /// One line for people: the runtime, ordinal and name, and what the
    /// runtime adds (CUDA: compute capability, driver, the NVRTC loaded and
    /// from where).
    fn describe(&self) -> String {
        format!(
            "{:?} device {}: {}",
            self.backend(),
            self.ordinal(),
            self.name()
        )
    }

    /// The limits the bins and launch sizes are planned from.
    fn limits(&self) -> &DeviceLimits;

    /// Makes the device current on the calling thread (a no-op where the
    /// runtime has no such notion).
    ///
    /// # Errors
    /// A runtime error.
    fn bind(&self) -> Result<()>;

    /// Whether `addr` lies in this device's memory. Only devices
    /// registered with [`super::registry::register_device`] are asked (the
    /// CUDA and HIP back ends answer through their runtimes' pointer
    /// queries); the default is `false`.
    fn holds(&self, addr: usize) -> bool {
        let _ = addr;
        false
    }

    /// The compiled kernels for one type combination (compiled on first
    /// use, then cached).
    ///
    /// # Errors
    /// [`Error::NotSupported`] when the device has no compiler, or not for
    /// these types; compile and load errors otherwise.
    fn kernels(&self, types: KernelTypes) -> Result<Arc<dyn GpuKernels>>;

    /// The device memory free now, in bytes, when the runtime says
    /// (`cuMemGetInfo`); `None` otherwise (the default).
    fn free_memory(&self) -> Option<u64> {
        None
    }

    /// The memory budget of the product this device is seen through, and
    /// the bytes it holds now ([`super::budget::BudgetedDevice`]); `None`
    /// for a plain device or a product without a budget.
    fn budget(&self) -> Option<super::budget::BudgetState> {
        None
    }

    /// Allocates `bytes` (> 0) of device memory: ordered on `stream` where
    /// the runtime supports stream-ordered allocation and `stream` is
    /// `Some`, else synchronously.
    ///
    /// # Errors
    /// [`Error::InsufficientResources`] when the device is out of memory.
    fn alloc(&self, bytes: usize, stream: Option<RawStream>) -> Result<u64>;

    /// Frees an allocation of [`GpuDevice::alloc`] after the work queued on
    /// `stream` (or, with `None`, at once, once the device is done with
    /// it). Errors are dropped: nothing can report them.
    ///
    /// # Safety
    /// `ptr` came from `alloc` on this device and is freed once; `stream`
    /// is live.
    unsafe fn free(&self, ptr: u64, stream: Option<RawStream>);

    /// Sets `bytes` bytes at `dst` to `byte`, queued on `stream`.
    ///
    /// # Errors
    /// A runtime error.
    ///
    /// # Safety
    /// `dst..dst + bytes` lies in a live allocation; `stream` is live.
    unsafe fn memset(&self, dst: u64, byte: u8, bytes: usize, stream: RawStream) -> Result<()>;

    /// Copies `src` to `dst`, queued on `stream`; `src` may be dropped when
    /// this returns (the runtime stages it).
    ///
    /// # Errors
    /// A runtime error.
    ///
    /// # Safety
    /// `dst` has room for `src.len()` bytes in a live allocation.
    unsafe fn upload(&self, dst: u64, src: &[u8], stream: RawStream) -> Result<()>;

    /// Waits for `stream`, then copies `dst.len()` bytes at `src` into
    /// `dst`.
    ///
    /// # Errors
    /// A runtime error, including one of earlier work on `stream`.
    ///
    /// # Safety
    /// `src` holds `dst.len()` bytes of a live allocation.
    unsafe fn download(&self, dst: &mut [u8], src: u64, stream: RawStream) -> Result<()>;

    /// Copies `bytes` bytes from `src` to `dst` on the device, queued on
    /// `stream`.
    ///
    /// # Errors
    /// A runtime error.
    ///
    /// # Safety
    /// Both ranges lie in live allocations and do not overlap.
    unsafe fn copy(&self, dst: u64, src: u64, bytes: usize, stream: RawStream) -> Result<()>;

    /// A new non-blocking stream.
    ///
    /// # Errors
    /// A runtime error.
    fn create_stream(&self) -> Result<RawStream>;

    /// Destroys a stream of [`GpuDevice::create_stream`]; work queued on it
    /// still completes.
    ///
    /// # Safety
    /// `stream` is live and destroyed once.
    unsafe fn destroy_stream(&self, stream: RawStream);

    /// A new event without timing.
    ///
    /// # Errors
    /// A runtime error.
    fn create_event(&self) -> Result<RawEvent>;

    /// Destroys an event of [`GpuDevice::create_event`].
    ///
    /// # Safety
    /// `event` is live and destroyed once.
    unsafe fn destroy_event(&self, event: RawEvent);

    /// Records `event` on `stream`.
    ///
    /// # Errors
    /// A runtime error.
    ///
    /// # Safety
    /// Both are live.
    unsafe fn record(&self, event: RawEvent, stream: RawStream) -> Result<()>;

    /// Makes `stream` wait for the work recorded in `event`.
    ///
    /// # Errors
    /// A runtime error.
    ///
    /// # Safety
    /// Both are live.
    unsafe fn wait(&self, stream: RawStream, event: RawEvent) -> Result<()>;

    /// Blocks the host until the work recorded in `event` is done.
    ///
    /// # Errors
    /// A runtime error.
    ///
    /// # Safety
    /// `event` is live.
    unsafe fn synchronize(&self, event: RawEvent) -> Result<()>;
}

/// The kernels of one compilation (one [`KernelTypes`]).
pub trait GpuKernels: Send + Sync + Debug {
    /// Launches kernel `name` (one of [`super::launch::KERNEL_PARAMS`]) on
    /// `config.grid` blocks of `config.block` threads with `config.shared`
    /// bytes of dynamic shared memory, queued on `stream`. `args` point at the arguments,
    /// as `cuLaunchKernel`'s `kernelParams`.
    ///
    /// # Errors
    /// [`Error::InternalError`] for a name outside the launch contract; a
    /// runtime error otherwise.
    ///
    /// # Safety
    /// `args` point at values of exactly the kernel's parameter types,
    /// alive until this returns; device pointers among them are valid for
    /// the kernel's accesses in stream order.
    unsafe fn launch(
        &self,
        name: &str,
        config: LaunchConfig,
        stream: RawStream,
        args: &mut [*mut c_void],
    ) -> Result<()>;

    /// The most threads a block of the planner-sized kernels (bins, scans,
    /// global kernels; [`super::launch::planner_sized`]) may have in this
    /// compilation: what the runtime reports for the loaded functions
    /// (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`), which registers can
    /// make lower than the device's limit. The planner sizes those blocks
    /// within it.
    fn max_threads_per_block(&self) -> u32 {
        u32::MAX
    }
}

/// Launches `name` after checking the argument sizes and the block against
/// the launch contract ([`super::launch::KERNEL_PARAMS`],
/// [`super::launch::KERNEL_MAX_BLOCK`]), so a drifted argument list or a
/// block above the kernel's launch bounds is an [`Error::InternalError`] on
/// every runtime (the emulator included) instead of a wrong read or a
/// launch failure on the device.
///
/// # Safety
/// As [`GpuKernels::launch`]; `args` pairs each argument's address with its
/// size.
pub(crate) unsafe fn checked_launch(
    kernels: &dyn GpuKernels,
    name: &str,
    config: LaunchConfig,
    stream: RawStream,
    args: &[(*mut c_void, usize)],
) -> Result<()> {
    let block = config.block;
    let sizes: Vec<usize> = args.iter().map(|&(_, s)| s).collect();
    if kernel_params(name) != Some(&sizes[..]) {
        return Err(Error::InternalError(format!(
            "{name} launched with arguments of {sizes:?} bytes; its parameters take {:?}",
            kernel_params(name)
        )));
    }
    match super::launch::kernel_max_block(name) {
        Some(max) if block <= max => {}
        max => {
            return Err(Error::InternalError(format!(
                "{name} launched with {block} threads; its launch bounds allow {max:?}"
            )))
        }
    }
    let mut ptrs: Vec<*mut c_void> = args.iter().map(|&(p, _)| p).collect();
    // SAFETY: the caller's contract; sizes checked above.
    unsafe { kernels.launch(name, config, stream, &mut ptrs) }
}

/// Whether a device still allocates in stream order (`cuMemAllocAsync`,
/// `hipMallocAsync`). A runtime may report memory pools and then refuse
/// the call with "not supported" (some virtualised and MIG set-ups); the
/// first such refusal turns stream-ordered allocation off for the device,
/// and that allocation and every later one use the synchronous allocator,
/// instead of every product failing.
#[derive(Debug)]
#[cfg_attr(not(any(feature = "cuda", feature = "hip")), allow(dead_code))]
pub(crate) struct StreamOrderedAlloc(std::sync::atomic::AtomicBool);

#[cfg_attr(not(any(feature = "cuda", feature = "hip")), allow(dead_code))]
impl StreamOrderedAlloc {
    /// `reported`: the runtime says the device has memory pools.
    pub(crate) fn new(reported: bool) -> Self {
        StreamOrderedAlloc(std::sync::atomic::AtomicBool::new(reported))
    }

    /// Whether allocations (and so frees) are stream-ordered now.
    pub(crate) fn enabled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Allocates with `ordered` on `stream` while enabled, else (or
    /// without a stream) with `synchronous`; an `ordered` error that
    /// `unsupported` recognises switches to `synchronous` for good.
    pub(crate) fn alloc<E>(
        &self,
        stream: Option<RawStream>,
        ordered: impl FnOnce(RawStream) -> std::result::Result<u64, E>,
        synchronous: impl FnOnce() -> std::result::Result<u64, E>,
        unsupported: impl Fn(&E) -> bool,
    ) -> std::result::Result<u64, E> {
        match stream {
            Some(s) if self.enabled() => match ordered(s) {
                Err(e) if unsupported(&e) => {
                    self.0.store(false, std::sync::atomic::Ordering::Relaxed);
                    synchronous()
                }
                r => r,
            },
            _ => synchronous(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_stream_ordered_allocation_falls_back_for_good() {
        let s: RawStream = 8usize as RawStream;
        let a = StreamOrderedAlloc::new(true);
        // Supported: stream-ordered.
        assert_eq!(
            a.alloc(Some(s), |_| Ok::<u64, i32>(1), || Ok(2), |&e| e == 801),
            Ok(1)
        );
        // Another error is the caller's.
        assert_eq!(
            a.alloc(Some(s), |_| Err(2), || Ok(2), |&e| e == 801),
            Err(2)
        );
        assert!(a.enabled());
        // "Not supported": this allocation and every later one synchronous.
        assert_eq!(
            a.alloc(Some(s), |_| Err(801), || Ok(3), |&e| e == 801),
            Ok(3)
        );
        assert!(!a.enabled());
        let never = |_| -> Result<u64, i32> { panic!("stream-ordered after the fallback") };
        assert_eq!(a.alloc(Some(s), never, || Ok(4), |&e| e == 801), Ok(4));
        // No stream, or no pools reported: synchronous.
        let b = StreamOrderedAlloc::new(false);
        assert_eq!(b.alloc(Some(s), never, || Ok(5), |&e| e == 801), Ok(5));
        assert_eq!(
            StreamOrderedAlloc::new(true).alloc(None, never, || Ok(6), |&e| e == 801),
            Ok(6)
        );
    }
}
