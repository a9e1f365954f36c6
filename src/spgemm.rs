//! The SpGEMM operation of the Rust API: the one-call [`spgemm`] and
//! [`Context::spgemm`] (an [`SpgemmPlan`] run phase after phase), and the
//! output-size prediction.

use crate::context::Context;
use crate::csr::{CsrMatrix, CsrOutput, CsrView};
#[cfg(doc)]
use crate::error::Error;
use crate::error::{ensure_memory_for, invalid, try_reserve, Result};
use crate::plan::predict::{self, NnzPrediction, Sampling};
use crate::plan::{OperandPattern, RowWork};
use crate::product::{Operation, SpgemmPlan};
use crate::types::{Algorithm, ColumnOrder, Index, IndexBase, IndexType, Op, Scalar};

/// Options of a product `C = alpha * op(A) * op(B)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpgemmOptions<T> {
    /// Operation applied to A.
    pub op_a: Op,
    /// Operation applied to B.
    pub op_b: Op,
    /// Scale of the product.
    pub alpha: T,
    /// Algorithm (every CPU algorithm is deterministic).
    pub algorithm: Algorithm,
    /// The order of C's columns within each row (sorted by default; see
    /// [`ColumnOrder`]).
    pub column_order: ColumnOrder,
}

impl<T: Scalar> Default for SpgemmOptions<T> {
    fn default() -> Self {
        SpgemmOptions {
            op_a: Op::N,
            op_b: Op::N,
            alpha: T::one(),
            algorithm: Algorithm::Default,
            column_order: ColumnOrder::Sorted,
        }
    }
}

/// `C = alpha * op(A) * op(B)` on a default context (CPU, threads from
/// `RUSPARSE_NUM_THREADS` or all cores). C has A's index base, sorted
/// columns (unless [`SpgemmOptions::column_order`] says otherwise) and no
/// duplicates. The default context keeps no scratch memory between calls
/// (nothing stays allocated after this returns); run repeated products on
/// a [`Context`] of your own to reuse it.
///
/// # Errors
/// [`Error::InvalidValue`] when the inner dimensions differ or nnz(C) does
/// not fit `I`; [`Error::AllocFailed`] when memory runs out.
pub fn spgemm<T: Scalar, I: Index, J: Index>(
    a: &CsrView<'_, T, I, J>,
    b: &CsrView<'_, T, I, J>,
    opts: &SpgemmOptions<T>,
) -> Result<CsrMatrix<T, I, J>> {
    default_context()?.spgemm(a, b, opts)
}

/// INVALID_VALUE when `nnz` entries (plus the base) do not fit the row
/// offset type `offsets`; `what` qualifies the count ("at least " for a bound).
pub(crate) fn check_nnz_fits(
    nnz: u64,
    base: IndexBase,
    offsets: IndexType,
    what: &str,
) -> Result<()> {
    if nnz.saturating_add(base.offset() as u64) > offsets.max() {
        invalid!(
            "nnz(C) is {what}{nnz}, which does not fit C's row offset type {}; use 64-bit row offsets",
            offsets.name()
        );
    }
    Ok(())
}

/// One default context per process, so a thread count from the
/// environment starts its pool once, not on every call.
fn default_context() -> Result<Context> {
    static DEFAULT: std::sync::OnceLock<Result<Context>> = std::sync::OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            let ctx = Context::new(crate::BackendKind::Auto)?;
            ctx.set_scratch_limit(0);
            Ok(ctx)
        })
        .clone()
}

impl Context {
    /// `C = alpha * op(A) * op(B)` on this context (see [`spgemm`]), as an
    /// [`SpgemmPlan`] run phase after phase. On a CUDA or HIP context the
    /// product runs on the context's GPU: A and B are copied there once,
    /// and C back, and every device allocation is freed before it returns;
    /// on a CPU or AUTO context (host slices are host memory) on the CPU.
    ///
    /// # Errors
    /// As [`spgemm`]; on a GPU context also [`Error::NotSupported`] for a
    /// CPU-only algorithm and [`Error::InsufficientResources`] when device
    /// memory runs out.
    ///
    /// [`Error::NotSupported`]: crate::Error::NotSupported
    /// [`Error::InsufficientResources`]: crate::Error::InsufficientResources
    pub fn spgemm<T: Scalar, I: Index, J: Index>(
        &self,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        opts: &SpgemmOptions<T>,
    ) -> Result<CsrMatrix<T, I, J>> {
        let mut plan = self.plan_for_one_call(a, b, opts)?;
        // A C too large for memory is refused here, from the lower bound
        // of nnz(C), before the symbolic phase spends O(nprod) on it: C's
        // arrays are reserved at that bound first.
        let bound = usize::try_from(plan.nnz_lower_bound()).unwrap_or(usize::MAX);
        let mut cols = Vec::new();
        let mut values = Vec::new();
        try_reserve(&mut cols, bound, "C's column indices")?;
        try_reserve(&mut values, bound, "C's values")?;
        plan.symbolic(self, a, b)?;
        let c = plan.execute_into(self, a, b, opts.alpha, opts.column_order, (cols, values))?;
        plan.recycle::<T>(self);
        Ok(c)
    }

    /// [`Context::spgemm`] into arrays the caller makes once nnz(C) is
    /// known: after the symbolic phase, `alloc(rows, nnz)` returns C's
    /// three arrays (`rows + 1` row offsets, `nnz` columns and values,
    /// with the index base C is to have), and the numeric phase overwrites
    /// every entry without reading any (their old contents do not
    /// matter), with C's columns in `opts.column_order`. So a binding
    /// hands C to its own arrays (numpy's) without a copy and without a
    /// pass that fills them first. Nothing is fingerprinted, as in
    /// [`Context::spgemm`].
    ///
    /// # Errors
    /// As [`Context::spgemm`]; what `alloc` returns; INVALID_VALUE when
    /// its arrays are not C's lengths or it leaves one out.
    pub fn spgemm_into<'o, T: Scalar, I: Index, J: Index>(
        &self,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        opts: &SpgemmOptions<T>,
        alloc: impl FnOnce(usize, usize) -> Result<CsrOutput<'o, T, I, J>>,
    ) -> Result<()> {
        let mut plan = self.plan_for_one_call(a, b, opts)?;
        plan.symbolic(self, a, b)?;
        let nnz = plan.nnz().unwrap_or(0);
        let mut out = alloc(plan.shape().0, nnz)?;
        check_nnz_fits(nnz as u64, out.base, I::INDEX_TYPE, "")?;
        if out.row_offsets.is_none() || out.col_indices.is_none() || out.values.is_none() {
            invalid!("spgemm_into needs all three of C's arrays");
        }
        out.pattern = None;
        out.column_order = opts.column_order;
        plan.numeric(self, a, b, opts.alpha, T::zero(), out)?;
        plan.recycle::<T>(self);
        Ok(())
    }

    /// The plan of one [`Context::spgemm`] or [`Context::spgemm_into`]
    /// call: its phases run back to back on `a` and `b`, so nothing is
    /// fingerprinted, and a GPU copies A and B once. A C too large for `I`
    /// is refused here, from the lower bound of nnz(C), before the
    /// symbolic phase spends O(nprod) on it.
    fn plan_for_one_call<T: Scalar, I: Index, J: Index>(
        &self,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        opts: &SpgemmOptions<T>,
    ) -> Result<SpgemmPlan<I, J>> {
        let operation = Operation {
            op_a: opts.op_a,
            op_b: opts.op_b,
            algorithm: opts.algorithm,
        };
        // One pass writes sorted rows: a product asked for in any order
        // keeps the order the planned flow gives it (see ColumnOrder::Any).
        let one_pass_ok = opts.column_order == crate::ColumnOrder::Sorted;
        let plan = SpgemmPlan::for_one_call(self, a, b, operation, one_pass_ok)?;
        check_nnz_fits(plan.nnz_lower_bound(), a.base(), I::INDEX_TYPE, "at least ")?;
        Ok(plan)
    }
}

/// Predicts nnz(C) of `C = op(A) * op(B)` without computing C (the sampling
/// predictor, with rusparse's stratified sample; see
/// [`crate::plan::predict`]), on a default context. Deterministic for a
/// given input. Costs the row count of the product (one pass over A's
/// entries), sampled rows of about 1/256 of the products (more on small
/// matrices with long rows, where every group of rows samples at least 4
/// unless its bounds pin its nnz; at most 1,024 a group on large ones),
/// and, for op T or C, the transposed pattern. Small products (up to 2^14
/// products) are counted exactly.
///
/// # Errors
/// [`Error::InvalidValue`] when the inner dimensions differ;
/// [`Error::AllocFailed`] when memory runs out.
///
/// [`Error::InvalidValue`]: crate::Error::InvalidValue
/// [`Error::AllocFailed`]: crate::Error::AllocFailed
pub fn predict_nnz<T: Scalar, I: Index, J: Index>(
    a: &CsrView<'_, T, I, J>,
    b: &CsrView<'_, T, I, J>,
    opts: &SpgemmOptions<T>,
) -> Result<NnzPrediction> {
    default_context()?.predict_nnz(a, b, opts)
}

impl Context {
    /// [`predict_nnz`] on this context (its threads). On a CUDA or HIP
    /// context too it computes on the host: the host's arrays are there,
    /// and the device's prediction of the same operands is the same number
    /// (`backend::gpu::predict_nnz`, checked on the emulated device).
    ///
    /// # Errors
    /// As [`predict_nnz`].
    pub fn predict_nnz<T: Scalar, I: Index, J: Index>(
        &self,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        opts: &SpgemmOptions<T>,
    ) -> Result<NnzPrediction> {
        self.run(|| {
            let (pa, pb) = operands(a, opts.op_a, b, opts.op_b)?;
            let (ra, rb) = (pa.rows(a), pb.rows(b));
            let work = RowWork::new(&ra, &rb, 1)?;
            Ok(predict::predict_nnz(&ra, &rb, &work, Sampling::Stratified))
        })
    }
}

/// The row-accessible patterns of op(A) and op(B) ([`OperandPattern::pair`]:
/// the inner dimensions must agree), after checking that planning (the
/// operands' patterns and the per-row work) fits in the memory left: a
/// wide operand taken transposed as op(A) needs offsets for each of its
/// columns, which a small input with 2^31 columns turns into gigabytes.
pub(crate) fn operands<T: Scalar, I: Index, J: Index>(
    a: &CsrView<'_, T, I, J>,
    op_a: Op,
    b: &CsrView<'_, T, I, J>,
    op_b: Op,
) -> Result<(OperandPattern<I, J>, OperandPattern<I, J>)> {
    let (m, _, _) = OperandPattern::product_shape(a, op_a, b, op_b)?;
    let bytes = OperandPattern::pair_bytes_needed(a, op_a, b, op_b)
        .saturating_add(RowWork::bytes_needed(m));
    ensure_memory_for(bytes, "planning op(A) * op(B)")?;
    OperandPattern::pair(a, op_a, b, op_b)
}
