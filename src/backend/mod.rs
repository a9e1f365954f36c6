//! The engines that execute a planned product; they never decide it
//! ([`crate::plan`] does, and `src/product/` runs it).
//!
//! - `cpu/`: the multi-core CPU kernels (rayon), [`crate::backend::cpu::CpuBackend`].
//! - `gpu/`: the one GPU pipeline ([`crate::backend::gpu::GpuSpgemm`]) and the runtime
//!   services it needs ([`crate::backend::gpu::GpuDevice`]), which `cuda/` (CUDA driver and
//!   NVRTC) and `hip/` (HIP runtime and hiprtc) implement; kernels are
//!   written once (`kernel_source`, `kernel_cache`).
//!
//! Both are behind one trait, `product::Backend`: the phases of
//! one planned product over arrays by pointer, implemented by the CPU plan
//! and the GPU product.

pub(crate) mod caller_binding;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod gpu;
#[cfg(feature = "hip")]
pub mod hip;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod kernel_cache;
pub mod kernel_source;
