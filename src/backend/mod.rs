//! Back ends execute a plan made by [`crate::plan`]; they never decide it.
//!
//! The `Backend` trait is the contract between the shared planning and the
//! CPU executor (`cpu/`, always built): a symbolic phase that counts (or
//! lists) the columns of every output row, and a numeric phase that writes
//! the values straight into the caller's arrays. Only the CPU back end
//! implements it. The GPU back ends do not: CUDA (`cuda/`) and HIP (`hip/`)
//! implement [`gpu::device::GpuDevice`], the runtime services of the one GPU
//! pipeline in `gpu/` ([`gpu::GpuSpgemm`]), which the C ABI and
//! `Context::spgemm` drive phase by phase.

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

use crate::error::Result;
use crate::plan::{RowPattern, RowWork};
use crate::types::{Index, Scalar};

/// Where the symbolic phase puts its result.
#[derive(Debug)]
pub enum SymbolicOutput<'a, J> {
    /// `counts[i]` receives nnz of output row `i`.
    Counts(&'a mut [usize]),
    /// Each row's sorted, distinct columns (plus `base`) go to
    /// `cols[offsets[i]..offsets[i + 1]]` (zero-based `offsets`).
    Columns {
        /// Exact zero-based row offsets of C from an earlier counting pass.
        offsets: &'a [usize],
        /// C's column array.
        cols: &'a mut [J],
        /// C's index base.
        base: usize,
    },
}

/// The numeric phase's target: `values = alpha * op(A) op(B) + beta * values`
/// on the pattern given by `offsets`, columns sorted within each row.
#[derive(Debug)]
pub struct NumericOutput<'a, T, J> {
    /// Exact zero-based row offsets of C.
    pub offsets: &'a [usize],
    /// When present, receives C's sorted column indices (plus `base`).
    pub cols: Option<&'a mut [J]>,
    /// False: with `cols` present, each row may be written in any
    /// deterministic order (no sort). Ignored without `cols`.
    pub sorted: bool,
    /// C's values; read first when `beta != 0`.
    pub values: &'a mut [T],
    /// For a values-only output (`cols` is `None`): C's columns as an
    /// earlier structure phase wrote them (with `base`), so the products
    /// can be added into known positions. `None`: find the columns again.
    pub pattern: Option<&'a [J]>,
    /// C's index base.
    pub base: usize,
    /// Scales the product.
    pub alpha: T,
    /// Scales the values already in `values` (0 means they are not read).
    pub beta: T,
}

/// An executor of row-wise SpGEMM plans.
///
/// `a` and `b` are `op(A)` and `op(B)` with row access; `a_vals` / `b_vals`
/// are their values in the same order. Implementations must produce sorted
/// output with duplicates summed, be deterministic, and return an error
/// (never panic, never write out of bounds) when an output row does not
/// have the size the plan recorded.
pub trait Backend {
    /// Symbolic phase: exact nnz, or the sorted columns, of every output row.
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`]; [`crate::Error::InvalidValue`] when a
    /// row does not match the given offsets.
    fn symbolic<I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        b: &RowPattern<'_, I, J>,
        work: &RowWork,
        out: SymbolicOutput<'_, J>,
    ) -> Result<()>;

    /// Numeric phase, straight into C's arrays.
    ///
    /// # Errors
    /// [`crate::Error::AllocFailed`]; [`crate::Error::InvalidValue`] when a
    /// row does not match the given offsets.
    fn numeric<T: Scalar, I: Index, J: Index>(
        &self,
        a: &RowPattern<'_, I, J>,
        a_vals: &[T],
        b: &RowPattern<'_, I, J>,
        b_vals: &[T],
        work: &RowWork,
        out: NumericOutput<'_, T, J>,
    ) -> Result<()>;
}
