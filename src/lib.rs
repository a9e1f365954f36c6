//! rusparse: sparse matrix-matrix multiplication (SpGEMM),
//! `C = alpha * op(A) * op(B)` in CSR, with a cuSPARSE-compatible C ABI.
//!
//! The Rust API is the core; the C ABI (`ffi`) only converts descriptors
//! into these types and errors into statuses.
//!
//! Comments cite the five papers rusparse is built from by short names
//! (the sampling predictor, the pattern-based selector, OpSparse, BRMerge,
//! the DCU study); `docs/bibliography.md` lists them and what each part
//! takes from which.
//!
//! ```
//! use rusparse::{spgemm, CsrMatrix, IndexBase, SpgemmOptions};
//! // A = [[1, 2], [0, 3]]
//! let a = CsrMatrix::<f64, i32>::from_triplets(
//!     2, 2, &[(0, 0, 1.0), (0, 1, 2.0), (1, 1, 3.0)], IndexBase::Zero).unwrap();
//! let c = spgemm(&a.view(), &a.view(), &SpgemmOptions::default()).unwrap();
//! assert_eq!(c.values(), &[1.0, 8.0, 9.0]); // A² = [[1, 8], [0, 9]]
//! ```

#![warn(missing_docs)]

// The C header is generated from `ffi` and the types it uses; cbindgen
// skips the back ends and the planner.
/// cbindgen:ignore
pub mod backend;
mod context;
mod csr;
mod error;
pub mod ffi;
/// cbindgen:ignore
mod host_allocator;
/// cbindgen:ignore
pub mod memory_meter;
/// cbindgen:ignore
mod parallel;
pub mod plan;
mod product;
pub mod reference;
mod spgemm;
mod system_memory;
mod types;

pub use backend::gpu::DeviceAllocator;
pub use context::{Context, MAX_THREADS, MEMORY_BUDGET_ENV, NUM_THREADS_ENV, SCRATCH_LIMIT_ENV};
pub use csr::{validate_structure, CsrMatrix, CsrOutput, CsrView, SplitValues};
#[cfg(feature = "failure-injection")]
pub use error::failure_injection;
pub use error::{Error, Result};
pub use num_complex::Complex;
pub use plan::predict::NnzPrediction;
pub use product::SpgemmPlan;
pub use spgemm::{predict_nnz, spgemm, SpgemmOptions};
pub use system_memory::{
    advise_huge_pages, memory_limit, resize_in_parallel, set_memory_limit, HUGE_PAGES_ENV,
    HUGE_PAGES_FROM_BYTES, MEMORY_LIMIT_ENV,
};
pub use types::{
    Algorithm, BackendKind, ColumnOrder, DataType, Index, IndexBase, IndexType, Op, PatternCheck,
    Scalar,
};

/// The library version, from Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
