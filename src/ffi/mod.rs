//! The C ABI: cuSPARSE's generic SpGEMM API with the prefix `rusparse`.
//!
//! This layer only converts and validates: every `extern "C"` body runs
//! inside [`boundary::boundary`], which catches panics, maps
//! [`crate::Error`] to a status and records the thread-local message.
//! `include/rusparse.h` is generated from these modules by cbindgen.

//!
//! # Safety
//! Every function here is `unsafe` to call from Rust, with one contract,
//! stated once instead of on each function: each pointer argument is NULL
//! or valid for the reads and writes its C type implies (arrays for the
//! sizes the descriptor states), and handles and descriptors come from their
//! create functions and have not been destroyed. NULL is always detected
//! and reported; nothing else about a pointer can be checked.
//!
//! # Threads
//! A handle, an SpGEMM descriptor and a matC descriptor are used by one
//! call at a time: each call claims them (`Opaque::claim` in `boundary.rs`), and a
//! call on another thread that finds them claimed gets INVALID_VALUE instead
//! of racing. A and B descriptors are only read and may be shared.

#![allow(non_snake_case)]
#![allow(clippy::missing_safety_doc)]

pub mod allocator;
mod boundary;
pub mod errors;
pub mod handle;
pub mod matrix;
pub mod spgemm;
pub mod spgemm_ext;
pub mod types;

pub use types::*;
