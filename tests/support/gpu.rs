//! The CUDA tests' GPU ([`gpu`]): the first CUDA device with NVRTC, or a
//! skip, which `RUSPARSE_REQUIRE_GPU=1` makes a failure (see
//! `tests/support/mod.rs`).
//!
//! Not a module of `tests/support/mod.rs`, which the kernel host tests
//! compile too, in a crate without rusparse's `cuda` feature: a CUDA test
//! file (`#![cfg(feature = "cuda")]`) includes this file beside `mod
//! support;` as `#[path = "support/gpu.rs"] mod support_gpu;`.

use crate::support;
use rusparse::backend::cuda::{loader, CudaDevice};
use std::sync::Arc;

/// The first GPU, or `None` after reporting why the test is skipped
/// (a failure with `RUSPARSE_REQUIRE_GPU=1`).
pub fn gpu() -> Option<Arc<CudaDevice>> {
    let dev = CudaDevice::get(0).and_then(|d| loader::nvrtc().map(|_| d));
    support::available(dev, "CUDA GPU with NVRTC", support::REQUIRE_GPU)
}
