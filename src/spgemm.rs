//! The SpGEMM operation of the Rust API: a one-call [`spgemm`] and the
//! plan/execute split behind it ([`SpgemmPlan`]), which the C ABI's phases
//! and its reuse API call.

use crate::backend::cpu::{CpuBackend, UpperChunk};
use crate::backend::{Backend, NumericOutput, SymbolicOutput};
use crate::context::Context;
use crate::csr::{CsrMatrix, CsrOutput, CsrView};
use crate::error::{ensure_memory_for, invalid, try_reserve, try_vec, Error, Result};
use crate::plan::features::planning_features;
use crate::plan::fingerprint::{pattern_fingerprint, values_fingerprint};
use crate::plan::predict::{self, NnzPrediction, Sampling, PLANNING_SAMPLING};
use crate::plan::select::{select, ProductShape};
use crate::plan::{OperandPattern, RowWork};
use crate::system_memory::resize_in_parallel;
use crate::types::{Algorithm, ColumnOrder, Index, IndexBase, IndexType, Op, Scalar};
use std::any::Any;
use std::sync::Arc;

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
    /// `C = alpha * op(A) * op(B)` on this context (see [`spgemm`]). On a
    /// CUDA or HIP context the product runs on the context's GPU: A and B
    /// are copied there, and C back
    /// ([`crate::backend::gpu::spgemm_on_device`]); on a CPU or AUTO
    /// context (host slices are host memory) on the CPU.
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
        if let Some(dev) = self.gpu_device() {
            return crate::backend::gpu::spgemm_on_device(dev, a, b, opts);
        }
        // One call: the phases run back to back on `a` and `b`, so nothing
        // is fingerprinted.
        let mut plan =
            SpgemmPlan::planned(self, (a, opts.op_a), (b, opts.op_b), opts.algorithm, || {
                None
            })?;
        // A C too large for `I` or for memory is refused here, from the
        // lower bound of nnz(C), before the symbolic phase spends O(nprod)
        // on it: C's arrays are reserved at that bound first.
        let bound = plan.nnz_lower_bound();
        check_nnz_fits(bound, a.base(), I::INDEX_TYPE, "at least ")?;
        let bound = usize::try_from(bound).unwrap_or(usize::MAX);
        let mut cols = Vec::new();
        let mut values = Vec::new();
        try_reserve(&mut cols, bound, "C's column indices")?;
        try_reserve(&mut values, bound, "C's values")?;
        plan.symbolic(self, a, b)?;
        plan.execute_into(self, a, b, opts.alpha, opts.column_order, (cols, values))
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
fn operands<T: Scalar, I: Index, J: Index>(
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

/// A product planned once and executed many times with new values.
///
/// [`SpgemmPlan::new`] checks the shapes and counts the work per row
/// (cuSPARSE's work estimation); [`SpgemmPlan::symbolic`] finds nnz(C) and
/// keeps only C's row offsets (cuSPARSE's compute); the numeric calls write
/// straight into the caller's arrays (cuSPARSE's copy and reuse compute).
/// Every phase checks A's and B's shapes and nnz against the plan's; the
/// phases that write C (numeric, structure) also check that the patterns
/// are the ones the plan was made for (a parallel hash of the index arrays,
/// O(nnz)). The symbolic phase does not hash them (but for BRMerge-Upper,
/// whose temporary C the numeric phase copies): its kernels refuse
/// a pattern that does not fit the plan's row work, and a changed pattern
/// they miss makes only C's row sizes wrong: the numeric phase then refuses
/// the changed operands (hash), and on the planned ones it refuses a row
/// whose size differs or computes their exact product. So a product (plan,
/// symbolic, numeric) reads the patterns for checking twice, not three
/// times.
#[derive(Debug, Clone)]
pub struct SpgemmPlan<I, J> {
    algorithm: Algorithm,
    selected: Algorithm,
    b_canonical: bool,
    a: OperandPattern<I, J>,
    b: OperandPattern<I, J>,
    /// The fingerprints of A's and B's patterns, which every later phase
    /// checks; `None` for the plan of one [`Context::spgemm`] call, whose
    /// phases run back to back on borrowed arrays that cannot change.
    fingerprints: Option<(u64, u64)>,
    /// nnz of A and B as planned, checked by every phase (O(1)).
    nnz: (usize, usize),
    work: RowWork,
    /// C's zero-based row offsets, once the symbolic phase ran.
    c_offsets: Option<Vec<usize>>,
    /// BRMerge-Upper's temporary C, made by the symbolic phase.
    upper: Option<UpperStore>,
    /// The output-size prediction, when the automatic choice or
    /// BRMerge-Upper needed it.
    prediction: Option<NnzPrediction>,
}

/// BRMerge-Upper's temporary C (a `Vec<UpperChunk<T, J>>`) with the
/// fingerprints of the values it was computed from: a numeric phase copies
/// it only when A's and B's values are still the same, and recomputes
/// otherwise (the reuse API changes values in place).
#[derive(Clone)]
struct UpperStore {
    chunks: Arc<dyn Any + Send + Sync>,
    /// Fingerprints of A's and B's values.
    values: (u64, u64),
    bytes: usize,
}

impl std::fmt::Debug for UpperStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UpperStore {{ {} bytes }}", self.bytes)
    }
}

fn fingerprint<T: Scalar, I: Index, J: Index>(x: &CsrView<'_, T, I, J>) -> u64 {
    pattern_fingerprint(x.nrows(), x.ncols(), x.row_offsets(), x.col_indices())
}

/// True when A and B are the same arrays (C = A * A, A * Aᵀ).
pub(crate) fn same_pattern_arrays<T: Scalar, I: Index, J: Index>(
    a: &CsrView<'_, T, I, J>,
    b: &CsrView<'_, T, I, J>,
) -> bool {
    a.nrows() == b.nrows()
        && a.ncols() == b.ncols()
        && std::ptr::eq(a.row_offsets(), b.row_offsets())
        && std::ptr::eq(a.col_indices(), b.col_indices())
}

/// Fingerprints of A's and B's patterns, hashing once when both are the
/// same arrays.
fn fingerprints<T: Scalar, I: Index, J: Index>(
    a: &CsrView<'_, T, I, J>,
    b: &CsrView<'_, T, I, J>,
) -> (u64, u64) {
    let fa = fingerprint(a);
    (
        fa,
        if same_pattern_arrays(a, b) {
            fa
        } else {
            fingerprint(b)
        },
    )
}

/// Fingerprints of A's and B's values, hashing once when both are the
/// same arrays.
fn value_fingerprints<T: Scalar, I: Index, J: Index>(
    a: &CsrView<'_, T, I, J>,
    b: &CsrView<'_, T, I, J>,
) -> (u64, u64) {
    let fa = values_fingerprint(a.values());
    let same = std::ptr::eq(a.values(), b.values());
    (
        fa,
        if same {
            fa
        } else {
            values_fingerprint(b.values())
        },
    )
}

impl<I: Index, J: Index> SpgemmPlan<I, J> {
    /// Plans `op(A) * op(B)` on the CPU: checks the shapes, builds the row
    /// access to transposed operands, and counts the products of every row.
    /// Cost: O(nnz(A) + nnz(B) + rows), parallel.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the inner dimensions differ;
    /// [`Error::NotSupported`] when a transposed operand's rows do not fit
    /// `J`, and on a CUDA or HIP context (a plan runs on the CPU; never
    /// silently: [`Context::spgemm`] runs a product on the context's GPU,
    /// the C ABI runs plans there too); [`Error::AllocFailed`].
    pub fn new<T: Scalar>(
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        op_a: Op,
        b: &CsrView<'_, T, I, J>,
        op_b: Op,
        algorithm: Algorithm,
    ) -> Result<Self> {
        Self::planned(ctx, (a, op_a), (b, op_b), algorithm, || {
            Some(fingerprints(a, b))
        })
    }

    /// [`SpgemmPlan::new`] with A's and B's pattern fingerprints already
    /// made (by the C ABI's work estimation, in its validation pass).
    pub(crate) fn with_fingerprints<T: Scalar>(
        ctx: &Context,
        (a, op_a): (&CsrView<'_, T, I, J>, Op),
        (b, op_b): (&CsrView<'_, T, I, J>, Op),
        algorithm: Algorithm,
        prints: (u64, u64),
    ) -> Result<Self> {
        Self::planned(ctx, (a, op_a), (b, op_b), algorithm, || Some(prints))
    }

    /// [`SpgemmPlan::new`], with the patterns' fingerprints from `prints`
    /// (run in the context's pool). `None`, for phases that all run inside
    /// one call on the same borrowed arrays: the patterns and values are
    /// not fingerprinted (nothing can change them in between).
    fn planned<T: Scalar>(
        ctx: &Context,
        (a, op_a): (&CsrView<'_, T, I, J>, Op),
        (b, op_b): (&CsrView<'_, T, I, J>, Op),
        algorithm: Algorithm,
        prints: impl FnOnce() -> Option<(u64, u64)> + Send,
    ) -> Result<Self> {
        if let Some(dev) = ctx.gpu_device() {
            return Err(Error::NotSupported(format!(
                "SpgemmPlan runs on the CPU, but the context is on {:?} device {} ({}); use \
                 Context::spgemm, which runs there, or a CPU context",
                dev.backend(),
                dev.ordinal(),
                dev.name()
            )));
        }
        ctx.run(|| {
            let (pa, pb) = operands(a, op_a, b, op_b)?;
            let (ra, rb) = (pa.rows(a), pb.rows(b));
            let b_canonical = rb.rows_canonical();
            let chunks = CpuBackend::chunks_for(ctx.num_threads());
            let work = RowWork::new(&ra, &rb, chunks)?;
            let shape = ProductShape {
                products: work.total(),
                b_cols: pb.ncols(),
                value_bytes: std::mem::size_of::<T>(),
                b_canonical,
                entry_bytes: std::mem::size_of::<T>() + std::mem::size_of::<J>(),
                nnz_lower_bound: work.nnz_lower_bound(b_canonical),
            };
            // The prediction (the sampling predictor) feeds the automatic
            // choice and sizes BRMerge-Upper's temporary C; it is made only
            // when needed.
            let mut prediction = None;
            let selected = select(algorithm, &shape, || {
                let (p, f) = planning_features(&ra, &rb, &work);
                prediction = Some(p);
                f
            });
            if selected == Algorithm::BrmergeUpper && prediction.is_none() {
                prediction = Some(predict::predict_nnz(&ra, &rb, &work, PLANNING_SAMPLING));
            }
            Ok(SpgemmPlan {
                algorithm,
                selected,
                b_canonical,
                upper: None,
                prediction,
                fingerprints: prints(),
                nnz: (a.col_indices().len(), b.col_indices().len()),
                a: pa,
                b: pb,
                work,
                c_offsets: None,
            })
        })
    }

    /// A lower bound of nnz(C), known after planning (no symbolic phase):
    /// the sum over the rows of op(A) of the longest row of op(B) each one
    /// merges (all of that row's columns are in C) when op(B)'s rows hold
    /// no duplicate columns; otherwise the number of rows with products
    /// (each holds at least one entry). [`Context::spgemm`] refuses a C
    /// that cannot fit its index type or memory from it in O(1).
    pub fn nnz_lower_bound(&self) -> u64 {
        self.work.nnz_lower_bound(self.b_canonical)
    }

    /// The algorithm asked for.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
    /// The concrete algorithm that runs ([`Algorithm::Hash`],
    /// [`Algorithm::BrmergePrecise`], [`Algorithm::BrmergeUpper`] or
    /// [`Algorithm::Dense`]): the one asked for, or the planner's choice.
    pub fn selected_algorithm(&self) -> Algorithm {
        self.selected
    }

    fn backend<'c>(&self, ctx: &'c Context) -> CpuBackend<'c> {
        CpuBackend {
            threads: ctx.num_threads(),
            algorithm: self.selected,
            b_canonical: self.b_canonical,
            scratch: ctx.scratch(),
        }
    }
    /// `(rows, cols)` of C.
    pub fn shape(&self) -> (usize, usize) {
        (self.a.nrows(), self.b.ncols())
    }
    /// Total number of scalar products (nprod).
    pub fn num_products(&self) -> u64 {
        self.work.total()
    }
    /// The output-size prediction made while planning (the automatic
    /// choice and BRMerge-Upper use it), if one was needed.
    pub fn prediction(&self) -> Option<NnzPrediction> {
        self.prediction
    }
    /// nnz(C), once [`SpgemmPlan::symbolic`] ran.
    pub fn nnz(&self) -> Option<usize> {
        self.c_offsets.as_ref().map(|o| o[o.len() - 1])
    }
    /// Bytes of metadata the plan holds (row work, C's row offsets,
    /// transposed patterns); never a copy of C.
    pub fn memory_bytes(&self) -> usize {
        let rows = self.work.nrows() + 1;
        rows * 8
            + self.c_offsets.as_ref().map_or(0, |o| o.len() * 8)
            + self.upper.as_ref().map_or(0, |u| u.bytes)
            + self.a.memory_bytes()
            + self.b.memory_bytes()
    }

    /// Checks A's and B's shapes and nnz against the plan's (O(1)) and,
    /// with `patterns`, their fingerprints (O(nnz)).
    fn check_inputs<T: Scalar>(
        &self,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        patterns: bool,
    ) -> Result<()> {
        let (ar, ac) = OperandPattern::shape(a, self.a.op());
        let (br, bc) = OperandPattern::shape(b, self.b.op());
        if (ar, ac, br, bc)
            != (
                self.a.nrows(),
                self.a.ncols(),
                self.b.nrows(),
                self.b.ncols(),
            )
        {
            invalid!("the shapes of A or B changed since the plan was made");
        }
        for (name, x, planned) in [("A", a, self.nnz.0), ("B", b, self.nnz.1)] {
            let nnz = x.col_indices().len();
            if nnz != planned {
                invalid!(
                    "the pattern of {name} changed since the plan was made (nnz {nnz}, planned \
                     {planned}; only values may change)"
                );
            }
        }
        let Some((a_fingerprint, b_fingerprint)) = self.fingerprints.filter(|_| patterns) else {
            return Ok(());
        };
        let (fa, fb) = fingerprints(a, b);
        if fa != a_fingerprint {
            invalid!("the pattern of A changed since the plan was made (only values may change)");
        }
        if fb != b_fingerprint {
            invalid!("the pattern of B changed since the plan was made (only values may change)");
        }
        Ok(())
    }

    fn offsets(&self) -> Result<&[usize]> {
        match &self.c_offsets {
            Some(o) => Ok(o),
            None => invalid!("the symbolic phase has not run yet"),
        }
    }

    /// Symbolic phase: finds the exact size of every row of C and returns
    /// nnz(C). Cost: O(nprod), parallel; memory O(rows) plus one hash table
    /// per chunk.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when A's or B's shape or nnz differs from the
    /// planned one, or the kernels find a row that does not fit the plan
    /// (the patterns are not hashed here; see [`SpgemmPlan`]);
    /// [`Error::AllocFailed`].
    pub fn symbolic<T: Scalar>(
        &mut self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
    ) -> Result<usize> {
        self.upper = None;
        let (offsets, upper) = ctx.run(|| -> Result<(Vec<usize>, Option<UpperStore>)> {
            // BRMerge-Upper keeps a temporary C that the numeric phase copies,
            // so its plan must see the planned patterns now.
            self.check_inputs(a, b, self.selected == Algorithm::BrmergeUpper)?;
            let m = self.work.nrows();
            let mut counts = try_vec(m + 1, 0usize, "C's row sizes")?;
            let (ra, rb) = (self.a.rows(a), self.b.rows(b));
            let backend = self.backend(ctx);
            // BRMerge-Upper keeps a temporary C with values; without values
            // (a structure-only caller) only the counts are made and the
            // numeric phase computes from scratch.
            let has_values = |x: &CsrView<'_, T, I, J>| x.values().len() == x.col_indices().len();
            let upper =
                if self.selected == Algorithm::BrmergeUpper && has_values(a) && has_values(b) {
                    let (mut sa, mut sb) = (Vec::new(), Vec::new());
                    let av = self.a.values(a, &mut sa)?;
                    let bv = self.b.values(b, &mut sb)?;
                    let ratio = self.prediction.map_or(1.0, |p| p.ratio);
                    let chunks = backend.upper_symbolic(
                        (&ra, av),
                        (&rb, bv),
                        &self.work,
                        ratio,
                        &mut counts[1..],
                    )?;
                    let entries: usize = counts[1..].iter().sum();
                    Some(UpperStore {
                        chunks: Arc::new(chunks),
                        values: self.value_fingerprints(a, b),
                        bytes: entries * (std::mem::size_of::<T>() + std::mem::size_of::<J>()),
                    })
                } else {
                    backend.symbolic(
                        &ra,
                        &rb,
                        &self.work,
                        SymbolicOutput::Counts(&mut counts[1..]),
                    )?;
                    None
                };
            for i in 0..m {
                counts[i + 1] += counts[i];
            }
            Ok((counts, upper))
        })?;
        let nnz = offsets[offsets.len() - 1];
        self.c_offsets = Some(offsets);
        self.upper = upper;
        Ok(nnz)
    }

    /// BRMerge-Upper's temporary C, when it was computed from the values
    /// `a` and `b` hold now.
    fn fresh_upper<T: Scalar>(
        &self,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
    ) -> Option<&Vec<UpperChunk<T, J>>> {
        let u = self.upper.as_ref()?;
        let chunks = u.chunks.downcast_ref::<Vec<UpperChunk<T, J>>>()?;
        (u.values == self.value_fingerprints(a, b)).then_some(chunks)
    }

    /// Fingerprints of A's and B's values; `(0, 0)` for the plan of one
    /// call, whose values cannot change.
    fn value_fingerprints<T: Scalar>(
        &self,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
    ) -> (u64, u64) {
        if self.fingerprints.is_some() {
            value_fingerprints(a, b)
        } else {
            (0, 0)
        }
    }

    /// Writes C's row offsets (with `base`) into `out` (`rows + 1` entries).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] before the symbolic phase, on a wrong length,
    /// or when nnz(C) + base does not fit `IC`.
    pub fn write_row_offsets<IC: Index>(&self, out: &mut [IC], base: IndexBase) -> Result<()> {
        let offsets = self.offsets()?;
        if out.len() != offsets.len() {
            invalid!(
                "C's row offsets hold {} entries, expected rows + 1 = {}",
                out.len(),
                offsets.len()
            );
        }
        check_nnz_fits(offsets[offsets.len() - 1] as u64, base, IC::INDEX_TYPE, "")?;
        let b = base.offset();
        for (d, &o) in out.iter_mut().zip(offsets) {
            *d = IC::from_usize_unchecked(o + b);
        }
        Ok(())
    }

    /// Writes C's structure (row offsets and sorted columns) without values
    /// (cuSPARSE's `reuse_copy`). Cost: O(nprod), parallel.
    ///
    /// # Errors
    /// As [`SpgemmPlan::numeric`].
    pub fn write_structure<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        row_offsets: &mut [IC],
        col_indices: &mut [J],
        base: IndexBase,
    ) -> Result<()> {
        self.check_output_sizes(Some(row_offsets.len()), Some(col_indices.len()), None)?;
        ctx.run(|| {
            self.check_inputs(a, b, true)?;
            self.write_row_offsets(row_offsets, base)?;
            let offsets = self.offsets()?;
            self.backend(ctx).symbolic(
                &self.a.rows(a),
                &self.b.rows(b),
                &self.work,
                SymbolicOutput::Columns {
                    offsets,
                    cols: col_indices,
                    base: base.offset(),
                },
            )
        })
    }

    fn check_output_sizes(
        &self,
        offsets: Option<usize>,
        cols: Option<usize>,
        vals: Option<usize>,
    ) -> Result<()> {
        let o = self.offsets()?;
        let nnz = o[o.len() - 1];
        if let Some(n) = offsets {
            if n != o.len() {
                invalid!(
                    "C's row offsets hold {n} entries, expected rows + 1 = {}",
                    o.len()
                );
            }
        }
        if let Some(n) = cols {
            if n != nnz {
                invalid!("C's column indices hold {n} entries, expected nnz(C) = {nnz}");
            }
        }
        if let Some(n) = vals {
            if n != nnz {
                invalid!("C's values hold {n} entries, expected nnz(C) = {nnz}");
            }
        }
        Ok(())
    }

    /// Numeric phase: `C.values = alpha * op(A) op(B) + beta * C.values` on
    /// the planned pattern, written straight into `out` (the old values are
    /// read only when `beta != 0`). Each array of `out` that is present is
    /// written: row offsets, sorted columns, values. Cost: O(nprod +
    /// nnz(C) log(row length)), parallel, with no copy of C.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] before the symbolic phase, when an output
    /// array has the wrong length, when nnz(C) does not fit C's offset type,
    /// or when A's or B's pattern changed; [`Error::AllocFailed`].
    pub fn numeric<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        alpha: T,
        beta: T,
        out: CsrOutput<'_, T, IC, J>,
    ) -> Result<()> {
        let CsrOutput {
            row_offsets,
            col_indices,
            mut values,
            base,
            pattern,
            column_order,
        } = out;
        // The back end sorts anyway when the columns are not written.
        let sorted = column_order == ColumnOrder::Sorted;
        self.check_output_sizes(
            row_offsets.as_ref().map(|x| x.len()),
            col_indices.as_ref().map(|x| x.len()),
            values.as_ref().map(|x| x.len()),
        )?;
        // The known structure only serves a values-only output.
        let pattern = match (&col_indices, pattern) {
            (None, Some(p)) => {
                self.check_output_sizes(None, Some(p.len()), None)?;
                Some(p)
            }
            _ => None,
        };
        ctx.run(|| {
            self.check_inputs(a, b, true)?;
            if let Some(ro) = row_offsets {
                self.write_row_offsets(ro, base)?;
            }
            let offsets = self.offsets()?;
            let backend = self.backend(ctx);
            if let (Some(values), Some(chunks)) = (values.as_deref_mut(), self.fresh_upper(a, b)) {
                return backend.upper_numeric(
                    chunks,
                    &self.work,
                    NumericOutput {
                        offsets,
                        cols: col_indices,
                        sorted,
                        values,
                        base: base.offset(),
                        alpha,
                        beta,
                        pattern: None,
                    },
                );
            }
            let (mut sa, mut sb) = (Vec::new(), Vec::new());
            let av = self.a.values(a, &mut sa)?;
            let bv = self.b.values(b, &mut sb)?;
            match values {
                Some(values) => backend.numeric(
                    &self.a.rows(a),
                    av,
                    &self.b.rows(b),
                    bv,
                    &self.work,
                    NumericOutput {
                        offsets,
                        cols: col_indices,
                        sorted,
                        values,
                        base: base.offset(),
                        alpha,
                        beta,
                        pattern,
                    },
                ),
                None => match col_indices {
                    Some(cols) => backend.symbolic(
                        &self.a.rows(a),
                        &self.b.rows(b),
                        &self.work,
                        SymbolicOutput::Columns {
                            offsets,
                            cols,
                            base: base.offset(),
                        },
                    ),
                    None => Ok(()),
                },
            }
        })
    }

    /// Runs the numeric phase into a new matrix with A's index base.
    ///
    /// # Errors
    /// As [`SpgemmPlan::numeric`].
    pub fn execute<T: Scalar>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        alpha: T,
    ) -> Result<CsrMatrix<T, I, J>> {
        self.execute_into(
            ctx,
            a,
            b,
            alpha,
            ColumnOrder::Sorted,
            (Vec::new(), Vec::new()),
        )
    }

    /// [`SpgemmPlan::execute`] with C's columns in `order`, into column and
    /// value vectors (`room`) that may already hold room for C (they are
    /// cleared first).
    fn execute_into<T: Scalar>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        alpha: T,
        order: ColumnOrder,
        room: (Vec<J>, Vec<T>),
    ) -> Result<CsrMatrix<T, I, J>> {
        let (mut col_indices, mut values) = room;
        let offsets = self.offsets()?;
        let nnz = offsets[offsets.len() - 1];
        // Before C's arrays are allocated (numeric checks it again as it writes).
        check_nnz_fits(nnz as u64, a.base(), I::INDEX_TYPE, "")?;
        let mut row_offsets = try_vec(offsets.len(), I::default(), "C's row offsets")?;
        // Room reserved at the lower bound that is too small is given back
        // rather than grown: growing an empty vector makes the allocator
        // copy the whole old block (one thread: 59 -> 48 ms on as20000102,
        // 83 -> 69 ms on memplus).
        if col_indices.capacity() < nnz {
            col_indices = Vec::new();
        }
        if values.capacity() < nnz {
            values = Vec::new();
        }
        col_indices.clear();
        values.clear();
        try_reserve(&mut col_indices, nnz, "C's column indices")?;
        try_reserve(&mut values, nnz, "C's values")?;
        ctx.run(|| {
            resize_in_parallel(&mut col_indices, nnz, J::default());
            resize_in_parallel(&mut values, nnz, T::zero());
        });
        self.numeric(
            ctx,
            a,
            b,
            alpha,
            T::zero(),
            CsrOutput::full(&mut row_offsets, &mut col_indices, &mut values, a.base())
                .with_column_order(order),
        )?;
        let (m, n) = self.shape();
        Ok(CsrMatrix::from_parts_unchecked(
            m,
            n,
            row_offsets,
            col_indices,
            values,
            a.base(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn one_by_one() -> CsrMatrix<f64, i64, i32> {
        CsrMatrix::from_triplets(1, 1, &[(0, 0, 2.0)], IndexBase::Zero).unwrap()
    }

    #[test]
    fn nnz_that_does_not_fit_the_offset_type_is_refused() {
        let ctx = Context::cpu().unwrap();
        let a = one_by_one();
        let mut plan =
            SpgemmPlan::new(&ctx, &a.view(), Op::N, &a.view(), Op::N, Algorithm::Default).unwrap();
        plan.symbolic(&ctx, &a.view(), &a.view()).unwrap();
        // Pretend the only row of C holds 3e9 entries (too many to build in a test).
        plan.c_offsets = Some(vec![0, 3_000_000_000]);
        let mut narrow = [0i32; 2];
        let err = plan
            .write_row_offsets(&mut narrow, IndexBase::Zero)
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidValue(m) if m.contains("does not fit") && m.contains("64-bit")),
            "{err}"
        );
        let mut wide = [0i64; 2];
        plan.write_row_offsets(&mut wide, IndexBase::One).unwrap();
        assert_eq!(wide, [1, 3_000_000_001]);
    }

    #[test]
    fn numeric_before_symbolic_is_refused() {
        let ctx = Context::cpu().unwrap();
        let a = one_by_one();
        let plan =
            SpgemmPlan::new(&ctx, &a.view(), Op::N, &a.view(), Op::N, Algorithm::Default).unwrap();
        let err = plan.execute(&ctx, &a.view(), &a.view(), 1.0).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidValue(m) if m.contains("symbolic phase has not run")),
            "{err}"
        );
    }

    #[test]
    fn output_arrays_of_the_wrong_length_are_refused() {
        let ctx = Context::cpu().unwrap();
        let a = one_by_one();
        let mut plan =
            SpgemmPlan::new(&ctx, &a.view(), Op::N, &a.view(), Op::N, Algorithm::Default).unwrap();
        plan.symbolic(&ctx, &a.view(), &a.view()).unwrap();
        let (mut o, mut c, mut v) = ([0i64; 2], [0i32; 2], [0.0f64; 1]);
        let out = CsrOutput::full(&mut o[..], &mut c[..], &mut v[..], IndexBase::Zero);
        let err = plan
            .numeric(&ctx, &a.view(), &a.view(), 1.0, 0.0, out)
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidValue(m) if m.contains("column indices hold 2 entries")),
            "{err}"
        );
    }
}
