//! The GPU SpGEMM pipeline, shared by the CUDA and HIP back ends.
//!
//! * [`device`]: [`GpuDevice`], what the pipeline needs from a runtime
//!   (memory, copies, streams, events, launches); the CUDA back end
//!   implements it with the driver API, the HIP back end with
//!   libamdhip64, and `kernels/host-tests` with host memory and the
//!   host-emulated kernels.
//! * [`launch`]: the launch contract of `kernels/README.md` as data
//!   (every kernel's parameter sizes, checked at every launch).
//! * [`spgemm`]: [`GpuSpgemm`], one product, phase by phase.
//! * [`predict`]: the output-size prediction for operands in GPU memory.
//! * [`host_arrays`]: device copies of host arrays, and a whole product of
//!   host matrices on a GPU (the Rust API's CUDA and HIP contexts).
//! * [`registry`]: devices implemented outside rusparse (the emulated
//!   device of the kernel tests) taking part in AUTO placement.
//!
//! # The pipeline (OpSparse, seed 002, with seed 004's refinements)
//!
//! Everything is queued on the caller's stream (a raw `CUstream` or
//! `hipStream_t`; null is the legacy default stream). The host waits for that stream only where it
//! must read a number back; there is no device-wide synchronisation.
//!
//! 1. **Work estimation** ([`spgemm::GpuSpgemm::work_estimation`]):
//!    `rs_setup` validates A (offsets and columns) fused with counting the
//!    products of each row (`row_size[i] = nprod_i`); `rs_validate` checks
//!    all of B and reports whether its rows are sorted without repeats
//!    ("canonical") and its longest row. A scan of a temporary copy gives
//!    the total products. One wait reads the error word: a bad matrix is
//!    [`crate::Error::InvalidValue`] naming the matrix, row and value.
//! 2. **Symbolic phase** ([`spgemm::GpuSpgemm::symbolic`], called by
//!    `compute`): rows are binned by products (`rs_bin_count`, one wait for
//!    the bin sizes, `rs_bin_fill`; empty rows go nowhere, rows of A with
//!    one entry need no work when B is canonical); one shared-memory hash
//!    kernel per bin, largest rows first on up to three extra streams
//!    forked from and joined back into the caller's with events; rows of
//!    the last bin whose count overflows spill to `rs_symbolic_global`
//!    with tables in a second, temporary allocation sized from those rows
//!    only. Then the rows are binned again by nnz for the numeric phase,
//!    and an exclusive scan turns the counts into C's zero-based row
//!    offsets; nnz(C) is read back. Only per-row metadata is kept (about
//!    12 bytes per row of A, one allocation): C is never stored twice.
//! 3. **Numeric phase** ([`spgemm::GpuSpgemm::numeric`], called by `copy`):
//!    `rs_write_offsets` writes C's row offsets; the global-memory kernel
//!    (rows too long for shared memory, tables in batches of at most
//!    256 MiB), the shared-memory bins from the largest, and the direct
//!    path for rows of A with one entry write columns and values straight
//!    into the caller's arrays, sorted. No wait.
//!
//! Bin bounds, table sizes, blocks and teams come from
//! [`crate::plan::gpu_bins`], derived from the device's shared memory, warp
//! width and SM count; threads per B row from B's mean and longest row.
//! Kernels whose shared memory exceeds 48 KiB are opted in with
//! `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` when the module loads.
//! Allocations are stream-ordered (`cuMemAllocAsync`/`cuMemFreeAsync` on CUDA) so
//! they overlap running kernels; out of device memory is
//! [`crate::Error::InsufficientResources`] and every allocation is freed by
//! RAII on every path. Deterministic plans (`CSR_ALG_DETERMINISTIC`,
//! `ALG1`) add each row's products in A's order: the team splits each B
//! row when B is canonical, one thread per row otherwise.
//!
//! `op(A)`, `op(B)` = T or C: work estimation first validates the
//! transposed operand as given (`rs_validate`, one wait), then transposes it
//! on the device (`kernels/transpose.cu`: column counts, a scan, scatter
//! with a permutation, per-row sorts by original position so the result is
//! deterministic) into plan-owned memory (O(nnz)); the pipeline then runs on
//! the transpose, and every numeric phase first re-gathers its values
//! (conjugated for op C) from the caller's current array.
//!
//! C's row offsets may be 32- or 64-bit whatever A's are
//! ([`spgemm::GpuSpgemm::set_c_offsets64`]; `rs_write_offsets_wide` /
//! `_narrow`): only that kernel reads C's offset type, everything before it
//! uses 64-bit zero-based offsets. C's column indices have A's index type.
//!
//! ALG3 ([`spgemm::GpuSpgemm::set_chunk_fraction`]) bounds the global
//! hash tables of long rows; the FFI chooses a GPU back end for device
//! pointers (AUTO placement, `ffi/placement.rs`).

pub mod device;
pub mod host_arrays;
pub mod launch;
pub mod predict;
pub mod registry;
pub mod spgemm;

pub use crate::backend::kernel_source::{KernelTypes, ValueKind};
pub use device::{GpuDevice, GpuKernels, RawEvent, RawStream};
pub use host_arrays::{spgemm_on_device, DeviceArrays};
pub use launch::{kernel_params, KERNEL_PARAMS};
pub use predict::predict_nnz;
pub use registry::{register_device, unregister_device};
pub use spgemm::{DeviceCsr, GpuPlanInfo, GpuSpgemm, KernelCsr};
