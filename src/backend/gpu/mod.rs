//! The GPU SpGEMM pipeline, shared by the CUDA and HIP back ends.
//!
//! * [`device`]: [`GpuDevice`], what the pipeline needs from a runtime
//!   (memory, copies, streams, events, launches); the CUDA back end
//!   implements it with the driver API, the HIP back end with
//!   libamdhip64, and `kernels/host-tests` with host memory and the
//!   host-emulated kernels.
//! * [`budget`]: a device seen through one product's memory budget (every
//!   allocation counted, none past the budget).
//! * [`launch`]: the launch contract of `kernels/README.md` as data
//!   (every kernel's parameter sizes, checked at every launch).
//! * [`spgemm`]: [`GpuSpgemm`], one product, phase by phase, with its
//!   resources, transposes, per-row counts and diagnostics in submodules.
//! * [`predict`]: the output-size prediction for operands in GPU memory.
//! * [`host_arrays`]: device copies of host arrays, and a whole product of
//!   host matrices on a GPU (the Rust API's CUDA and HIP contexts).
//! * [`registry`]: devices implemented outside rusparse (the emulated
//!   device of the kernel tests) taking part in AUTO placement.
//!
//! The pipeline is OpSparse's (work estimation, symbolic and numeric
//! phases over rows binned by size, with shared-memory hash tables per bin)
//! with the DCU study's refinements, all queued on the caller's stream;
//! `docs/gpu-pipeline.md` describes it step by step.

pub mod allocator;
pub mod budget;
pub mod device;
pub mod host_arrays;
pub mod launch;
pub mod predict;
pub mod registry;
pub mod spgemm;

pub use crate::backend::kernel_source::{KernelTypes, ValueKind};
pub use allocator::DeviceAllocator;
pub use device::{GpuDevice, GpuKernels, RawEvent, RawStream};
pub use host_arrays::DeviceArrays;
pub use launch::{kernel_params, KERNEL_PARAMS};
pub use predict::predict_nnz;
pub use registry::{register_device, unregister_device};
pub use spgemm::{
    DeviceCsr, DeviceScalars, GpuPlanInfo, GpuSpgemm, GpuTuning, HostColumns, KernelCsr,
};
