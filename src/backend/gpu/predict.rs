//! The output-size prediction (seed 000) for operands in GPU memory.
//!
//! The products per row come from the pipeline's work estimation on the
//! device (which also validates A and B and builds the transposes of op T
//! and C); only they travel to the host (8 bytes a row). The host picks
//! the rows to sample by work ([`Sampling::ProductWeighted`]: rows at
//! evenly spaced product positions, so the heavy rows are counted whole),
//! the device counts their exact nnz with the symbolic kernels, and the
//! host combines them. The CPU's default stratified sampler also needs the
//! length of the longest row of B each row merges, which the device does
//! not count; the product-weighted one needs the work alone.
//!
//! [`Sampling::ProductWeighted`]: crate::plan::predict::Sampling::ProductWeighted

use super::{DeviceCsr, GpuDevice, GpuSpgemm, KernelTypes, RawStream};
use crate::error::Result;
use crate::plan::predict::{predict_nnz_counting, NnzPrediction};
use crate::plan::RowWork;
use crate::types::Op;
use std::sync::Arc;

/// Predicts nnz(C) of `op(A) * op(B)` for operands in `dev`'s memory (see
/// the module docs). Deterministic. Exact for products of at most 2^14
/// scalar products. Cost: the work estimation of a product (a pass over A
/// and B on the device, plus the transposes for op T / C), reading back
/// 8 bytes per row of C, and one symbolic launch over the sampled rows
/// (about 1/256 of the products); waits for `stream` a few times.
///
/// # Errors
/// As [`GpuSpgemm::work_estimation`] (malformed input is
/// [`crate::Error::InvalidValue`] naming the entry).
#[allow(clippy::too_many_arguments)]
pub fn predict_nnz(
    dev: &Arc<dyn GpuDevice>,
    stream: RawStream,
    op_a: Op,
    a: &DeviceCsr,
    op_b: Op,
    b: &DeviceCsr,
    types: KernelTypes,
) -> Result<NnzPrediction> {
    let mut plan = GpuSpgemm::work_estimation(dev, stream, op_a, a, op_b, b, types, false)?;
    let products = plan.row_products(stream)?;
    let work = RowWork::from_row_products(&products)?;
    predict_nnz_counting(&work, |rows| plan.count_rows(stream, a, b, rows))
}
