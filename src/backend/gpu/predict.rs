//! The output-size prediction (the sampling predictor) for operands in GPU
//! memory.
//!
//! The device counts what the prediction reads of every row: its products
//! (the pipeline's work estimation, which also validates A and B and
//! builds the transposes of op T and C) and its shape (`rs_row_shapes`:
//! its entries and the longest row of B it merges); only they travel to
//! the host (16 bytes a row). The host groups the rows and picks the ones
//! to sample exactly as the CPU's default [`Sampling::Stratified`] does,
//! the device counts their exact nnz with the symbolic kernels, and the
//! host combines them. With the same inputs it therefore returns what the
//! CPU's `predict_nnz` returns.
//!
//! [`Sampling::Stratified`]: crate::plan::predict::Sampling::Stratified

use super::{DeviceCsr, GpuDevice, GpuSpgemm, KernelTypes, RawStream};
use crate::error::Result;
use crate::plan::predict::{predict_nnz_counting, NnzPrediction, Sampling};
use crate::plan::row_work::PackedRowShapes;
use crate::plan::RowWork;
use crate::types::Op;
use std::sync::Arc;

/// Predicts nnz(C) of `op(A) * op(B)` for operands in `dev`'s memory with
/// `sampling` (see the module docs; `rusparseSpGEMM_predictNnz` uses
/// [`Sampling::Stratified`]). Deterministic. Exact for products of at most
/// 2^14 scalar products. Cost: the work estimation of a product (a pass
/// over A and B on the device, plus the transposes for op T / C), a second
/// pass over op(A) for the shapes, reading back 16 bytes per row of C, and
/// one symbolic launch over the sampled rows (about 1/256 of the
/// products); waits for `stream` a few times.
///
/// # Errors
/// As [`GpuSpgemm::work_estimation`] (malformed input is
/// [`crate::Error::InvalidValue`] naming the entry).
pub fn predict_nnz(
    dev: &Arc<dyn GpuDevice>,
    stream: RawStream,
    (op_a, a): (Op, &DeviceCsr),
    (op_b, b): (Op, &DeviceCsr),
    types: KernelTypes,
    sampling: Sampling,
) -> Result<NnzPrediction> {
    let mut plan = GpuSpgemm::work_estimation(dev, stream, (op_a, a), (op_b, b), types, false)?;
    let products = plan.row_products(stream)?;
    let words = plan.row_shapes(stream, a, b)?;
    let shapes = PackedRowShapes(&words);
    let work = RowWork::from_row_products(&products, &shapes)?;
    let ncols = usize::try_from(plan.ncols()).unwrap_or(usize::MAX);
    predict_nnz_counting(&work, sampling, &shapes, ncols, |rows| {
        plan.count_rows(stream, a, b, rows)
    })
}
