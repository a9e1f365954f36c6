//! The CUDA back end (feature `cuda`, on by default).
//!
//! Nothing CUDA is needed to build it: cudarc loads `libcuda` and NVRTC at
//! run time. [`loader`] probes for both before anything touches them (cudarc
//! panics on a missing library) and turns every absence into
//! [`crate::Error::NotSupported`] naming what was missing.
//!
//! # Pieces
//!
//! * [`loader`]: finding the driver, a device and NVRTC.
//! * [`device`]: [`device::CudaDevice`], one per device ordinal and
//!   process: the primary context, the limits the bins are planned from
//!   ([`crate::plan::gpu_bins::DeviceLimits`]) and the compiled kernel
//!   modules, one per type combination.
//! * [`compile`]: the kernel source (`kernels/portability.h` and
//!   `kernels/*.cu`, embedded), NVRTC options, compilation and the disk
//!   cache in `$XDG_CACHE_HOME/rusparse`.
//!
//! [`CudaDevice`] implements [`crate::backend::gpu::GpuDevice`]: the
//! pipeline itself ([`crate::backend::gpu::GpuSpgemm`]) is shared with the
//! HIP back end; see [`crate::backend::gpu`] for the order of kernels and
//! what runs where.

pub mod compile;
pub mod device;
pub mod loader;
pub mod nvrtc;
pub mod placement;
pub mod resources;

pub use compile::{KernelTypes, ValueKind};
pub use device::CudaDevice;
pub use placement::{memory_space, MemorySpace};
