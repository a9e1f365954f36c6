//! The C ABI: cuSPARSE's generic SpGEMM API with the prefix `rusparse`.
//!
//! This layer only converts and validates: every `extern "C"` body runs
//! inside [`boundary::boundary`], which catches panics, maps
//! [`crate::Error`] to a status and records the thread-local message.
//! `include/rusparse.h` is generated from these modules by cbindgen.

#![allow(non_snake_case)]

mod boundary;
pub mod errors;
pub mod handle;
pub mod matrix;
pub mod spgemm;
pub mod types;

pub use types::*;
