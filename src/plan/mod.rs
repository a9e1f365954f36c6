//! Back-end independent planning of a product `op(A) * op(B)`.
//!
//! Everything here looks only at patterns (never at values) and is shared by
//! every back end: the row-accessible form of each operand
//! ([`operand`]), the work per output row and its balanced split into
//! chunks ([`row_work`], which also groups the rows into strata by work and
//! length), the output-size prediction ([`predict`]), the GPU pipeline's bins and kernel
//! configurations derived from the device ([`gpu_bins`]), the pattern
//! fingerprint that lets later phases refuse a changed input
//! ([`fingerprint`]), the features a trained selector reads
//! ([`features`]), and the algorithm choice ([`select`], which walks the
//! trained tree of [`selector_model`]), and the choice of the fastest
//! configuration that fits a memory budget ([`memory`]).

pub mod features;
pub mod fingerprint;
pub mod gpu_bins;
pub mod memory;
pub mod operand;
pub mod predict;
pub mod row_work;
pub mod select;
pub mod selector_model;

pub use operand::{OperandPattern, RowPattern};
pub use row_work::RowWork;
