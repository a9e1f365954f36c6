//! One product `C = alpha * op(A) * op(B) + beta * C` from work estimation
//! to C, on whichever back end it was placed: [`SpgemmPlan`], an enum over
//! the CPU plan (`cpu.rs`) and the GPU product (`gpu.rs`), which both
//! implement the [`Backend`] phases over arrays by pointer
//! ([`MatrixArrays`], `arrays.rs`). `placement.rs` decides where a C ABI
//! product runs from the memory its arrays live in.
//!
//! The Rust API and the C ABI run the same object: the Rust API's typed
//! calls ([`SpgemmPlan::new`], `symbolic`, `numeric`, and
//! [`crate::Context::spgemm`] on top of them) and the C ABI's phases
//! (`ffi::spgemm`, which keeps a [`Product`], the plan for the index types
//! of its operands, in the SpGEMM descriptor and only converts arguments).
//! On a CUDA or HIP context the Rust API's host arrays are staged on the
//! context's GPU, as the C ABI stages a GPU handle's host arrays.

/// Calls `$e` with `$t` the Rust type of the value type `$dt`.
macro_rules! with_value_type {
    ($dt:expr, $t:ident => $e:expr) => {
        match $dt {
            $crate::types::DataType::R32F => {
                type $t = f32;
                $e
            }
            $crate::types::DataType::R64F => {
                type $t = f64;
                $e
            }
            $crate::types::DataType::C32F => {
                type $t = $crate::Complex<f32>;
                $e
            }
            $crate::types::DataType::C64F => {
                type $t = $crate::Complex<f64>;
                $e
            }
        }
    };
}

mod arrays;
mod cpu;
mod gpu;
pub(crate) mod placement;

pub(crate) use arrays::MatrixArrays;
pub(crate) use cpu::{read_scalar, validated_views};
pub(crate) use gpu::{predict_nnz as predict_nnz_on_device, Staging};
pub(crate) use placement::Placement;

use crate::backend::gpu::GpuPlanInfo;
use crate::context::Context;
use crate::csr::{CsrMatrix, CsrOutput, CsrView};
use crate::error::{invalid, try_reserve, try_vec, Result};
use crate::plan::predict::NnzPrediction;
use crate::spgemm::check_nnz_fits;
use crate::system_memory::resize_in_parallel;
use crate::types::{Algorithm, ColumnOrder, Index, IndexBase, IndexType, Op, PatternCheck, Scalar};
use cpu::CpuPlan;
use gpu::GpuProduct;
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

/// A GPU product for a phase; a lock poisoned by a panic in an earlier
/// phase is an error (the product's state is unknown).
fn lock(g: &Mutex<GpuProduct>) -> Result<MutexGuard<'_, GpuProduct>> {
    g.lock().map_err(|_| {
        crate::Error::InternalError("an earlier phase of this GPU product panicked".into())
    })
}

/// A GPU product for a query (reads that a poisoned lock cannot mislead).
fn read(g: &Mutex<GpuProduct>) -> MutexGuard<'_, GpuProduct> {
    g.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a product computes: the operations on A and B and the algorithm
/// asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Operation {
    pub(crate) op_a: Op,
    pub(crate) op_b: Op,
    pub(crate) algorithm: Algorithm,
}

/// Which of C's arrays a numeric phase writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fill {
    /// Row offsets, columns and values (cuSPARSE's `copy`).
    All,
    /// Row offsets and columns (`reuse_copy`).
    Structure,
    /// Values on the structure `Structure` wrote (`reuse_compute`).
    Values,
}

/// The arguments of a numeric phase besides the arrays.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NumericJob {
    pub(crate) fill: Fill,
    /// alpha and beta: one value of C's type each, in host memory, or in
    /// device memory with `device_scalars` (not read for `Structure`).
    pub(crate) alpha: *const c_void,
    pub(crate) beta: *const c_void,
    pub(crate) device_scalars: bool,
    /// For `Values`: the fingerprint of C's structure `Structure` wrote.
    pub(crate) c_fingerprint: Option<u64>,
    /// C's column order within each row, for `All`.
    pub(crate) column_order: ColumnOrder,
    /// Whether the patterns are hashed or vouched for by the caller.
    pub(crate) pattern_check: PatternCheck,
    /// For `Structure`: C's values too, α = 1 and β = 0
    /// (`rusparseSpGEMM_setReuseCopyValues`; a GPU writes them anyway).
    pub(crate) structure_values: bool,
}

/// The phases of one planned product on one back end, over arrays by
/// pointer in that back end's memory (host for the CPU; device, or host
/// staged by the product, for a GPU). Implementations produce C with
/// sorted columns (or any order where the job allows it) and duplicates
/// summed, refuse operands that do not fit the plan with an error, and
/// never write out of bounds.
pub(crate) trait Backend {
    /// The symbolic phase: nnz(C). `c_offsets`: the type of C's row
    /// offsets.
    ///
    /// # Safety
    /// Each non-NULL array holds what its description states.
    unsafe fn symbolic(
        &mut self,
        ctx: &Context,
        stream: *mut c_void,
        arrays: (&MatrixArrays, &MatrixArrays),
        c_offsets: IndexType,
    ) -> Result<usize>;

    /// A numeric phase into C's arrays (`arrays.2`); returns the
    /// fingerprint of C's structure after a `Structure` fill on the CPU,
    /// else 0.
    ///
    /// # Safety
    /// Each non-NULL array holds what its description states, and C's
    /// arrays are not accessed by anything else during the call.
    unsafe fn numeric(
        &mut self,
        ctx: &Context,
        stream: *mut c_void,
        arrays: (&MatrixArrays, &MatrixArrays, &MatrixArrays),
        job: &NumericJob,
    ) -> Result<u64>;
}

/// A product planned once and executed many times with new values, on the
/// CPU or on a GPU.
///
/// [`SpgemmPlan::new`] checks the shapes and counts the work per row
/// (cuSPARSE's work estimation); [`SpgemmPlan::symbolic`] finds nnz(C) and
/// keeps only C's row metadata (cuSPARSE's compute); the numeric calls
/// write straight into the caller's arrays (cuSPARSE's copy and reuse
/// compute).
///
/// On a CPU or AUTO context the plan runs on the CPU. Every phase checks
/// A's and B's shapes and nnz against the plan's; the phases that write C
/// also check that the patterns are the ones the plan was made for (a
/// parallel hash of the index arrays, O(nnz)); the symbolic phase's
/// kernels refuse a pattern that does not fit the plan's row work, so a
/// product reads the patterns for checking twice, not three times.
///
/// On a CUDA or HIP context the plan runs on the context's GPU: every
/// phase copies A's and B's arrays there (values from the numeric phase
/// on), whose kernels validate them and refuse a pattern that does not fit
/// the plan, and the numeric phases copy C back into the caller's arrays.
/// The output is sorted whatever column order is asked for, and the CPU
/// algorithms are refused ([`Error::NotSupported`]).
///
/// [`Error::NotSupported`]: crate::Error::NotSupported
pub struct SpgemmPlan<I, J> {
    on: On<I, J>,
}

enum On<I, J> {
    Cpu(Box<CpuPlan<I, J>>),
    /// Behind a lock: the GPU phases change the product (its staged
    /// copies, its device scalars) where the CPU's numeric phases only
    /// read the plan.
    Gpu(Box<Mutex<GpuProduct>>),
}

impl<I, J> std::fmt::Debug for SpgemmPlan<I, J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.on {
            On::Cpu(_) => f.write_str("SpgemmPlan { on: CPU }"),
            On::Gpu(g) => write!(f, "SpgemmPlan {{ on: {} }}", read(g).device().describe()),
        }
    }
}

/// `x`'s arrays by pointer (host memory); values NULL when the view has
/// none.
fn host_arrays<T: Scalar, I: Index, J: Index>(x: &CsrView<'_, T, I, J>) -> MatrixArrays {
    let nnz = x.col_indices().len();
    let values = if x.values().len() == nnz {
        x.values().as_ptr().cast_mut().cast()
    } else {
        std::ptr::null_mut()
    };
    MatrixArrays {
        rows: x.nrows() as i64,
        cols: x.ncols() as i64,
        nnz: nnz as i64,
        offsets: x.row_offsets().as_ptr().cast_mut().cast(),
        col_ind: x.col_indices().as_ptr().cast_mut().cast(),
        values,
        offset_type: I::INDEX_TYPE,
        col_type: J::INDEX_TYPE,
        base: x.base(),
        value_type: T::DATA_TYPE,
        constant: true,
        split: None,
    }
}

impl<I: Index, J: Index> SpgemmPlan<I, J> {
    /// Plans `op(A) * op(B)` on the context's back end: checks the shapes,
    /// builds the row access to transposed operands, and counts the
    /// products of every row. Cost on the CPU: O(nnz(A) + nnz(B) + rows),
    /// parallel; on a GPU, the copies of A's and B's patterns and the
    /// device's work estimation.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when the inner dimensions differ (on a GPU
    /// also malformed operands); [`Error::NotSupported`] when a transposed
    /// operand's rows do not fit `J`, and for a CPU algorithm on a GPU
    /// context; [`Error::AllocFailed`];
    /// [`Error::InsufficientResources`] when device memory runs out.
    ///
    /// [`Error::InvalidValue`]: crate::Error::InvalidValue
    /// [`Error::NotSupported`]: crate::Error::NotSupported
    /// [`Error::AllocFailed`]: crate::Error::AllocFailed
    /// [`Error::InsufficientResources`]: crate::Error::InsufficientResources
    pub fn new<T: Scalar>(
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        op_a: Op,
        b: &CsrView<'_, T, I, J>,
        op_b: Op,
        algorithm: Algorithm,
    ) -> Result<Self> {
        let operation = Operation {
            op_a,
            op_b,
            algorithm,
        };
        match ctx.gpu_device() {
            None => Ok(SpgemmPlan {
                on: On::Cpu(Box::new(CpuPlan::new(ctx, a, op_a, b, op_b, algorithm)?)),
            }),
            Some(_) => SpgemmPlan::on_gpu(ctx, operation, a, b, false),
        }
    }

    /// The planner's upper bound of the bytes this product holds at its
    /// peak beyond A, B and C (plan, workspaces), at most the memory budget
    /// when one is set; the scratch the context keeps fits in what the
    /// budget leaves. Without a budget, scratch kept from earlier products
    /// comes on top. `None` on a GPU.
    pub fn peak_memory_bound(&self) -> Option<u64> {
        match &self.on {
            On::Cpu(p) => Some(p.peak_memory_bound()),
            On::Gpu(_) => None,
        }
    }

    /// How many chunks of rows the CPU phases work on at once: the
    /// context's threads, or fewer when a memory budget asked for it;
    /// `None` on a GPU.
    pub fn concurrency(&self) -> Option<usize> {
        match &self.on {
            On::Cpu(p) => Some(p.concurrency()),
            On::Gpu(_) => None,
        }
    }

    /// The plan of one [`Context::spgemm`] call, whose phases run back to
    /// back on borrowed arrays that cannot change: nothing is
    /// fingerprinted, and a GPU copies A and B once. `one_pass_ok`: the
    /// automatic choice may run the dense accumulator in one pass (C is
    /// wanted sorted; see `one_pass_instead_of_dense` in the CPU plan).
    pub(crate) fn for_one_call<T: Scalar>(
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        operation: Operation,
        one_pass_ok: bool,
    ) -> Result<Self> {
        if ctx.gpu_device().is_some() {
            return SpgemmPlan::on_gpu(ctx, operation, a, b, true);
        }
        let plan = CpuPlan::planned(
            ctx,
            (a, operation.op_a),
            (b, operation.op_b),
            (operation.algorithm, one_pass_ok),
            || None,
        )?;
        Ok(SpgemmPlan {
            on: On::Cpu(Box::new(plan)),
        })
    }

    fn on_gpu<T: Scalar>(
        ctx: &Context,
        operation: Operation,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        fixed: bool,
    ) -> Result<Self> {
        let dev = ctx
            .gpu_device()
            .ok_or_else(|| crate::Error::InternalError("a GPU plan without a GPU".into()))?;
        // SAFETY: the arrays come from live slices of the sizes they state.
        let g = unsafe {
            GpuProduct::new(
                dev.clone(),
                Some(Staging::for_rust_api(fixed)),
                std::ptr::null_mut(),
                operation,
                (&host_arrays(a), &host_arrays(b)),
                I::INDEX_TYPE,
                ctx.product_memory(),
            )
        }?;
        Ok(SpgemmPlan {
            on: On::Gpu(Box::new(Mutex::new(g))),
        })
    }

    /// A plan from work estimation over arrays by pointer (the C ABI's):
    /// on the CPU, or on `placement`'s GPU (`stream`: the queue of its
    /// work; staged when the arrays are host memory).
    ///
    /// # Safety
    /// Each non-NULL array holds what its description states.
    unsafe fn from_arrays<T: Scalar>(
        ctx: &Context,
        placement: &Placement,
        stream: *mut c_void,
        (operation, check): (Operation, PatternCheck),
        (a, b, c): (&MatrixArrays, &MatrixArrays, &MatrixArrays),
    ) -> Result<Self> {
        let on = match placement {
            Placement::Cpu => On::Cpu(Box::new(unsafe {
                CpuPlan::from_arrays::<T>(ctx, (operation, check), (a, b), c)
            }?)),
            Placement::Gpu(dev) | Placement::StagedGpu(dev) => {
                let staging = matches!(placement, Placement::StagedGpu(_)).then(Staging::for_c_abi);
                On::Gpu(Box::new(Mutex::new(unsafe {
                    GpuProduct::new(
                        dev.clone(),
                        staging,
                        stream,
                        operation,
                        (a, b),
                        c.offset_type,
                        ctx.product_memory(),
                    )
                }?)))
            }
        };
        Ok(SpgemmPlan { on })
    }

    /// Runs `f` on the plan's [`Backend`].
    fn with_backend<R>(&mut self, f: impl FnOnce(&mut dyn Backend) -> Result<R>) -> Result<R> {
        match &mut self.on {
            On::Cpu(p) => f(&mut **p),
            On::Gpu(g) => f(&mut *lock(g)?),
        }
    }

    /// Where the plan runs.
    pub(crate) fn placement(&self) -> Placement {
        match &self.on {
            On::Cpu(_) => Placement::Cpu,
            On::Gpu(g) => {
                let g = read(g);
                if g.staged() {
                    Placement::StagedGpu(g.device().clone())
                } else {
                    Placement::Gpu(g.device().clone())
                }
            }
        }
    }

    /// A lower bound of nnz(C), known after planning (no symbolic phase):
    /// on the CPU the sum over the rows of op(A) of the longest row of
    /// op(B) each one merges (all of that row's columns are in C) when
    /// op(B)'s rows hold no duplicate columns, otherwise the number of rows
    /// with products; 0 on a GPU (not counted on the host).
    /// [`Context::spgemm`] refuses a C that cannot fit its index type or
    /// memory from it in O(1).
    pub fn nnz_lower_bound(&self) -> u64 {
        match &self.on {
            On::Cpu(p) => p.nnz_lower_bound(),
            On::Gpu(_) => 0,
        }
    }

    /// The algorithm asked for.
    pub fn algorithm(&self) -> Algorithm {
        match &self.on {
            On::Cpu(p) => p.algorithm(),
            On::Gpu(g) => read(g).algorithm(),
        }
    }

    /// The algorithm that runs: on the CPU [`Algorithm::Hash`],
    /// [`Algorithm::BrmergePrecise`], [`Algorithm::BrmergeUpper`] or
    /// [`Algorithm::Dense`] (the one asked for, or the planner's choice);
    /// on a GPU [`Algorithm::Deterministic`] or
    /// [`Algorithm::NonDeterministic`].
    pub fn selected_algorithm(&self) -> Algorithm {
        match &self.on {
            On::Cpu(p) => p.selected_algorithm(),
            On::Gpu(g) => read(g).selected_algorithm(),
        }
    }

    /// `(rows, cols)` of C.
    pub fn shape(&self) -> (usize, usize) {
        match &self.on {
            On::Cpu(p) => p.shape(),
            On::Gpu(g) => read(g).shape(),
        }
    }

    /// Total number of scalar products (nprod).
    pub fn num_products(&self) -> u64 {
        match &self.on {
            On::Cpu(p) => p.num_products(),
            On::Gpu(g) => read(g).num_products(),
        }
    }

    /// The output-size prediction made while planning on the CPU (the
    /// automatic choice and BRMerge-Upper use it), if one was needed.
    pub fn prediction(&self) -> Option<NnzPrediction> {
        match &self.on {
            On::Cpu(p) => p.prediction(),
            On::Gpu(_) => None,
        }
    }

    /// nnz(C), once [`SpgemmPlan::symbolic`] ran.
    pub fn nnz(&self) -> Option<usize> {
        match &self.on {
            On::Cpu(p) => p.nnz(),
            On::Gpu(g) => read(g).nnz(),
        }
    }

    /// Bytes of host metadata the plan holds (row work, C's row offsets,
    /// transposed patterns, the positions of C's products kept for the
    /// reuse flow: [`SpgemmPlan::expect_structure_first`]); never a copy of C. A GPU plan's metadata is
    /// device memory: 0.
    pub fn memory_bytes(&self) -> usize {
        match &self.on {
            On::Cpu(p) => p.memory_bytes(),
            On::Gpu(_) => 0,
        }
    }

    /// What a GPU plan ran so far (bins, device, modes); `None` on the CPU.
    pub fn gpu_info(&self) -> Option<GpuPlanInfo> {
        match &self.on {
            On::Cpu(_) => None,
            On::Gpu(g) => Some(read(g).info()),
        }
    }

    /// Says that C's structure will be written
    /// ([`SpgemmPlan::write_structure`]) before its values, as cuSPARSE's
    /// reuse flow does. On the CPU the symbolic phase then keeps C's sorted
    /// columns as it counts the rows, and `write_structure` copies them
    /// (once; a second call lists them again), instead of a second pass
    /// over the products. When A and B have values in the symbolic phase,
    /// it sums C's values beside the columns too, and the next numeric
    /// phase on the written structure copies them if A's and B's values are
    /// still those (their hashes), instead of multiplying again. Call it
    /// before [`SpgemmPlan::symbolic`]. It changes nothing under a memory
    /// budget, when the kept columns might not fit in the memory the system
    /// has left, or on a GPU; otherwise [`SpgemmPlan::peak_memory_bound`]
    /// grows by the kept columns' and values' bound (4 * nprod of each). Without a budget, an automatic choice of
    /// BRMerge-Upper also becomes the dense accumulator where op(B) is
    /// narrow enough for it ([`SpgemmPlan::selected_algorithm`] says so):
    /// BRMerge-Upper's advantage, a numeric phase that copies the values
    /// its symbolic phase merged, serves only the first values of the
    /// flow, and its symbolic phase costs more than the dense one's.
    ///
    /// It also lets the numeric phases on the written structure keep the
    /// place of each product in its row of C (one byte a product, two
    /// where a row of C has more than 256 entries; added to the peak
    /// bound): the second numeric phase on that structure records them
    /// and the later ones add each product straight at its place, with
    /// the same values bit for bit, when that pays (C's values in one
    /// array with α = 1 and β = 0, or at least four products an entry)
    /// and the positions take no more memory than C's columns and values.
    pub fn expect_structure_first(&mut self) {
        if let On::Cpu(p) = &mut self.on {
            p.expect_structure_first();
        }
    }

    /// How the later phases check that A's and B's patterns (and a
    /// values-only output's columns) are the planned ones: hashed
    /// ([`PatternCheck::Hash`], the default) or vouched for by the caller
    /// ([`PatternCheck::Caller`]), which spares an O(nnz) hash of A, B and
    /// C per phase. With [`PatternCheck::Caller`], a values-only output
    /// ([`CsrOutput::values_on_pattern`]) is taken to be this product's
    /// structure: its sums are gathered at its columns with no per-column
    /// product counts, so a wrong pattern gives wrong values (or an error
    /// for a column out of range) rather than the counts' error. Shapes
    /// and nnz are still checked, and nothing is read or written outside
    /// the given arrays. A GPU plan ignores it (its kernels validate the
    /// operands in every phase).
    pub fn set_pattern_check(&mut self, check: PatternCheck) {
        if let On::Cpu(p) = &mut self.on {
            p.set_pattern_check(check);
        }
    }

    /// Symbolic phase: finds the exact size of every row of C and returns
    /// nnz(C). Cost on the CPU: O(nprod), parallel; memory O(rows) plus
    /// one hash table per chunk.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when A's or B's shape or nnz differs from the
    /// planned one, or the kernels find a row that does not fit the plan
    /// (the patterns are not hashed here; see [`SpgemmPlan`]);
    /// [`Error::AllocFailed`].
    ///
    /// [`Error::InvalidValue`]: crate::Error::InvalidValue
    /// [`Error::AllocFailed`]: crate::Error::AllocFailed
    pub fn symbolic<T: Scalar>(
        &mut self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
    ) -> Result<usize> {
        match &mut self.on {
            On::Cpu(p) => p.symbolic(ctx, a, b),
            On::Gpu(g) => {
                let arrays = (&host_arrays(a), &host_arrays(b));
                // SAFETY: the arrays come from live slices.
                unsafe { lock(g)?.symbolic(ctx, std::ptr::null_mut(), arrays, I::INDEX_TYPE) }
            }
        }
    }

    /// Writes C's row offsets (with `base`) into `out` (`rows + 1`
    /// entries). On a GPU this runs the numeric phase (the offsets are
    /// device memory).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] before the symbolic phase, on a wrong length,
    /// or when nnz(C) + base does not fit `IC`.
    ///
    /// [`Error::InvalidValue`]: crate::Error::InvalidValue
    pub fn write_row_offsets<IC: Index>(&self, out: &mut [IC], base: IndexBase) -> Result<()> {
        match &self.on {
            On::Cpu(p) => p.write_row_offsets(out, base),
            On::Gpu(_) => Err(crate::Error::NotSupported(
                "a GPU plan's row offsets of C are device memory; write them with \
                 SpgemmPlan::write_structure or SpgemmPlan::numeric"
                    .into(),
            )),
        }
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
        match &self.on {
            On::Cpu(p) => p
                .write_structure_remembered(ctx, (a, b), row_offsets, col_indices, base)
                .map(|_| ()),
            On::Gpu(g) => {
                let out = CsrOutput::<T, IC, J> {
                    row_offsets: Some(row_offsets),
                    col_indices: Some(col_indices),
                    values: None,
                    base,
                    pattern: None,
                    column_order: ColumnOrder::Sorted,
                    split_values: None,
                };
                Self::numeric_gpu(g, ctx, a, b, (T::one(), T::zero()), out, Fill::Structure)
            }
        }
    }

    /// Makes [`SpgemmPlan::write_structure_with_values`] cheaper: a CPU
    /// plan's symbolic phase, where it sums C's values beside C's columns
    /// ([`SpgemmPlan::expect_structure_first`]), then keeps them without
    /// hashing A's and B's values, for `write_structure_with_values` alone
    /// (an O(nnz(A) + nnz(B)) hash when they are listed and another when
    /// they are copied, otherwise). Call it before the symbolic phase. A
    /// GPU plan ignores it.
    pub fn expect_values_with_structure(&mut self) {
        if let On::Cpu(p) = &mut self.on {
            p.expect_values_with_structure();
        }
    }

    /// [`SpgemmPlan::write_structure`], and C's values `op(A) op(B)`
    /// (α = 1, β = 0) into `values` in the same call. A's and B's values
    /// must be those of the symbolic phase: after
    /// [`SpgemmPlan::expect_values_with_structure`], a CPU plan writes the
    /// values that phase summed as it listed C's columns, without reading
    /// A's and B's values again (where it summed none, and on a GPU, they
    /// are computed now, from A's and B's current values). For values that
    /// changed since, call [`SpgemmPlan::numeric`] after it. C's structure
    /// counts as written for later values-only numeric phases, as with
    /// `write_structure`.
    ///
    /// # Errors
    /// As [`SpgemmPlan::numeric`].
    pub fn write_structure_with_values<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        (row_offsets, col_indices, values): (&mut [IC], &mut [J], &mut [T]),
        base: IndexBase,
    ) -> Result<()> {
        match &self.on {
            On::Cpu(p) => {
                let print =
                    p.write_structure_remembered(ctx, (a, b), row_offsets, col_indices, base)?;
                let out = CsrOutput::<T, IC, J>::values_on_pattern(values, col_indices, base);
                p.values_after_structure(ctx, (a, b), out, print)
            }
            On::Gpu(g) => {
                let out = CsrOutput::full(row_offsets, col_indices, values, base);
                Self::numeric_gpu(g, ctx, a, b, (T::one(), T::zero()), out, Fill::Structure)
            }
        }
    }

    /// Numeric phase: `C.values = alpha * op(A) op(B) + beta * C.values` on
    /// the planned pattern, written straight into `out` (the old values are
    /// read only when `beta != 0`). Each array of `out` that is present is
    /// written: row offsets, sorted columns, values. Cost on the CPU:
    /// O(nprod + nnz(C) log(row length)), parallel, with no copy of C.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] before the symbolic phase, when an output
    /// array has the wrong length, when nnz(C) does not fit C's offset type,
    /// or when A's or B's pattern changed; [`Error::AllocFailed`]; on a GPU
    /// [`Error::InsufficientResources`].
    ///
    /// [`Error::InvalidValue`]: crate::Error::InvalidValue
    /// [`Error::AllocFailed`]: crate::Error::AllocFailed
    /// [`Error::InsufficientResources`]: crate::Error::InsufficientResources
    pub fn numeric<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        alpha: T,
        beta: T,
        out: CsrOutput<'_, T, IC, J>,
    ) -> Result<()> {
        match &self.on {
            On::Cpu(p) => p.numeric(ctx, a, b, alpha, beta, out),
            On::Gpu(g) => Self::numeric_gpu(g, ctx, a, b, (alpha, beta), out, Fill::All),
        }
    }

    /// A numeric phase of the GPU product `g` into `out`'s host arrays.
    fn numeric_gpu<T: Scalar, IC: Index>(
        g: &Mutex<GpuProduct>,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        (alpha, beta): (T, T),
        out: CsrOutput<'_, T, IC, J>,
        fill: Fill,
    ) -> Result<()> {
        if out.split_values.is_some() {
            return Err(crate::Error::NotSupported(
                "C's values split between two arrays are written by the CPU back end only".into(),
            ));
        }
        let mut g = lock(g)?;
        let Some(nnz) = g.nnz() else {
            invalid!("the symbolic phase has not run yet");
        };
        let (m, n) = g.shape();
        check_output_lengths(
            (
                out.row_offsets.as_ref().map(|o| o.len()),
                out.col_indices.as_ref().map(|c| c.len()),
                out.values.as_ref().map(|v| v.len()),
            ),
            m,
            nnz,
        )?;
        check_nnz_fits(nnz as u64, out.base, IC::INDEX_TYPE, "")?;
        let ptr = |p: Option<*mut c_void>| p.unwrap_or(std::ptr::null_mut());
        let c = MatrixArrays {
            rows: m as i64,
            cols: n as i64,
            nnz: nnz as i64,
            offsets: ptr(out.row_offsets.map(|o| o.as_mut_ptr().cast())),
            col_ind: ptr(out.col_indices.map(|o| o.as_mut_ptr().cast())),
            values: ptr(out.values.map(|o| o.as_mut_ptr().cast())),
            offset_type: IC::INDEX_TYPE,
            col_type: J::INDEX_TYPE,
            base: out.base,
            value_type: T::DATA_TYPE,
            constant: false,
            split: None,
        };
        let job = NumericJob {
            fill,
            alpha: (&alpha as *const T).cast(),
            beta: (&beta as *const T).cast(),
            device_scalars: false,
            c_fingerprint: None,
            column_order: ColumnOrder::Sorted,
            pattern_check: PatternCheck::Hash,
            structure_values: false,
        };
        let arrays = (&host_arrays(a), &host_arrays(b), &c);
        // SAFETY: the arrays come from live slices, C's from exclusive ones
        // whose lengths were checked.
        unsafe { g.numeric(ctx, std::ptr::null_mut(), arrays, &job) }?;
        Ok(())
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

    /// Gives the context what the plan kept only for its numeric phase,
    /// once that phase has run for the last time (the one-call products
    /// [`Context::spgemm`] and [`Context::spgemm_into`]): BRMerge-Upper's
    /// temporary C goes to the context's scratch pool, whose limit bounds
    /// it ([`Context::set_scratch_limit`]), so that the next BRMerge-Upper
    /// product on the context fills pages already faulted in instead of
    /// fresh ones (the kernel's zeroing of fresh pages was 10-40 % of that
    /// symbolic phase on the project's VM). Not under a memory budget.
    pub(crate) fn recycle<T: Scalar>(&mut self, ctx: &Context) {
        if let On::Cpu(p) = &mut self.on {
            p.recycle::<T>(ctx);
        }
    }

    /// [`SpgemmPlan::execute`] with C's columns in `order`, into column and
    /// value vectors (`room`) that may already hold room for C (they are
    /// cleared first).
    pub(crate) fn execute_into<T: Scalar>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        alpha: T,
        order: ColumnOrder,
        room: (Vec<J>, Vec<T>),
    ) -> Result<CsrMatrix<T, I, J>> {
        let (mut col_indices, mut values) = room;
        let Some(nnz) = self.nnz() else {
            invalid!("the symbolic phase has not run yet");
        };
        let (m, n) = self.shape();
        // Before C's arrays are allocated (numeric checks it again as it writes).
        check_nnz_fits(nnz as u64, a.base(), I::INDEX_TYPE, "")?;
        let mut row_offsets = try_vec(m + 1, I::default(), "C's row offsets")?;
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

/// Checks the lengths of C's arrays that are given (row offsets, columns,
/// values) against C's `rows` and `nnz`.
pub(crate) fn check_output_lengths(
    (offsets, cols, values): (Option<usize>, Option<usize>, Option<usize>),
    rows: usize,
    nnz: usize,
) -> Result<()> {
    if let Some(n) = offsets.filter(|&n| n != rows + 1) {
        invalid!(
            "C's row offsets hold {n} entries, expected rows + 1 = {}",
            rows + 1
        );
    }
    if let Some(n) = cols.filter(|&n| n != nnz) {
        invalid!("C's column indices hold {n} entries, expected nnz(C) = {nnz}");
    }
    if let Some(n) = values.filter(|&n| n != nnz) {
        invalid!("C's values hold {n} entries, expected nnz(C) = {nnz}");
    }
    Ok(())
}

/// The C ABI's product: the [`SpgemmPlan`] for the index types of its
/// operands, made by work estimation and kept in the SpGEMM descriptor.
pub(crate) enum Product {
    I32I32(SpgemmPlan<i32, i32>),
    I32I64(SpgemmPlan<i32, i64>),
    I64I32(SpgemmPlan<i64, i32>),
    I64I64(SpgemmPlan<i64, i64>),
}

/// `$e` with `$p` the plan inside a [`Product`].
macro_rules! each_plan {
    ($product:expr, $p:ident => $e:expr) => {
        match $product {
            Product::I32I32($p) => $e,
            Product::I32I64($p) => $e,
            Product::I64I32($p) => $e,
            Product::I64I64($p) => $e,
        }
    };
}

macro_rules! product_from {
    ($($variant:ident($i:ty, $j:ty)),*) => {$(
        impl From<SpgemmPlan<$i, $j>> for Product {
            fn from(p: SpgemmPlan<$i, $j>) -> Product {
                Product::$variant(p)
            }
        }
    )*};
}
product_from!(
    I32I32(i32, i32),
    I32I64(i32, i64),
    I64I32(i64, i32),
    I64I64(i64, i64)
);

/// Calls `$f::<T, I, J>($args)` for the value type and index types given.
macro_rules! dispatch {
    ($dt:expr, $it:expr, $f:ident($($arg:expr),*)) => {
        match $dt {
            $crate::types::DataType::R32F => $crate::product::dispatch!(@index f32, $it, $f($($arg),*)),
            $crate::types::DataType::R64F => $crate::product::dispatch!(@index f64, $it, $f($($arg),*)),
            $crate::types::DataType::C32F => {
                $crate::product::dispatch!(@index $crate::Complex<f32>, $it, $f($($arg),*))
            }
            $crate::types::DataType::C64F => {
                $crate::product::dispatch!(@index $crate::Complex<f64>, $it, $f($($arg),*))
            }
        }
    };
    (@index $t:ty, $it:expr, $f:ident($($arg:expr),*)) => {
        match $it {
            ($crate::types::IndexType::I32, $crate::types::IndexType::I32) => $f::<$t, i32, i32>($($arg),*),
            ($crate::types::IndexType::I32, $crate::types::IndexType::I64) => $f::<$t, i32, i64>($($arg),*),
            ($crate::types::IndexType::I64, $crate::types::IndexType::I32) => $f::<$t, i64, i32>($($arg),*),
            ($crate::types::IndexType::I64, $crate::types::IndexType::I64) => $f::<$t, i64, i64>($($arg),*),
        }
    };
}
pub(crate) use dispatch;

/// [`SpgemmPlan::from_arrays`] for `T`, `I`, `J`.
unsafe fn product_from_arrays<T: Scalar, I: Index, J: Index>(
    ctx: &Context,
    placement: &Placement,
    stream: *mut c_void,
    operation: (Operation, PatternCheck),
    arrays: (&MatrixArrays, &MatrixArrays, &MatrixArrays),
) -> Result<Product>
where
    SpgemmPlan<I, J>: Into<Product>,
{
    Ok(
        unsafe { SpgemmPlan::<I, J>::from_arrays::<T>(ctx, placement, stream, operation, arrays) }?
            .into(),
    )
}

impl Product {
    /// Work estimation: plans `op(A) * op(B)` where `placement` says (on
    /// the CPU: validating A and B completely, and refusing a C that
    /// cannot fit `c`'s row offsets from the lower bound of nnz(C)).
    /// `operation.1`: how the descriptor checks patterns now; with
    /// [`PatternCheck::Caller`] the CPU plan keeps no fingerprints of A's
    /// and B's patterns (see `CpuPlan::from_arrays`).
    ///
    /// # Safety
    /// Each non-NULL array holds what its description states.
    pub(crate) unsafe fn work_estimation(
        ctx: &Context,
        placement: &Placement,
        stream: *mut c_void,
        operation: (Operation, PatternCheck),
        arrays: (&MatrixArrays, &MatrixArrays, &MatrixArrays),
    ) -> Result<Product> {
        let a = arrays.0;
        let types = (a.offset_type, a.col_type);
        unsafe {
            dispatch!(
                a.value_type,
                types,
                product_from_arrays(ctx, placement, stream, operation, arrays)
            )
        }
    }

    /// Where the product runs.
    pub(crate) fn placement(&self) -> Placement {
        each_plan!(self, p => p.placement())
    }

    /// The algorithm that runs (see [`SpgemmPlan::selected_algorithm`]).
    pub(crate) fn selected_algorithm(&self) -> Algorithm {
        each_plan!(self, p => p.selected_algorithm())
    }

    /// nprod.
    pub(crate) fn num_products(&self) -> u64 {
        each_plan!(self, p => p.num_products())
    }

    /// The planner's bound of the peak memory and the chunks run at once
    /// (CPU only).
    pub(crate) fn memory_plan(&self) -> Option<(u64, usize)> {
        each_plan!(self, p => p.peak_memory_bound().zip(p.concurrency()))
    }

    /// What a GPU product ran so far; `None` on the CPU.
    pub(crate) fn gpu_info(&self) -> Option<GpuPlanInfo> {
        each_plan!(self, p => p.gpu_info())
    }

    /// The caller writes C's structure before its values (the reuse flow;
    /// [`SpgemmPlan::expect_structure_first`]).
    pub(crate) fn expect_structure_first(&mut self) {
        each_plan!(self, p => p.expect_structure_first())
    }

    /// [`SpgemmPlan::expect_values_with_structure`] (the reuse flow's
    /// `rusparseSpGEMM_setReuseCopyValues`).
    pub(crate) fn expect_values_with_structure(&mut self) {
        each_plan!(self, p => p.expect_values_with_structure())
    }

    /// How the phases after this call check that A's and B's patterns are
    /// the planned ones ([`SpgemmPlan::set_pattern_check`]).
    pub(crate) fn set_pattern_check(&mut self, check: PatternCheck) {
        each_plan!(self, p => p.set_pattern_check(check))
    }

    /// ALG3's `chunk_fraction` on a GPU (the CPU has no such tables).
    pub(crate) fn set_chunk_fraction(&mut self, fraction: f32) {
        each_plan!(self, p => {
            if let On::Gpu(g) = &p.on {
                read(g).set_chunk_fraction(fraction);
            }
        })
    }

    /// The symbolic phase: nnz(C).
    ///
    /// # Safety
    /// As [`Backend::symbolic`].
    pub(crate) unsafe fn symbolic(
        &mut self,
        ctx: &Context,
        stream: *mut c_void,
        arrays: (&MatrixArrays, &MatrixArrays),
        c_offsets: IndexType,
    ) -> Result<usize> {
        each_plan!(self, p => p.with_backend(|b| unsafe { b.symbolic(ctx, stream, arrays, c_offsets) }))
    }

    /// A numeric phase (see [`Backend::numeric`]).
    ///
    /// # Safety
    /// As [`Backend::numeric`].
    pub(crate) unsafe fn numeric(
        &mut self,
        ctx: &Context,
        stream: *mut c_void,
        arrays: (&MatrixArrays, &MatrixArrays, &MatrixArrays),
        job: &NumericJob,
    ) -> Result<u64> {
        each_plan!(self, p => p.with_backend(|b| unsafe { b.numeric(ctx, stream, arrays, job) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_and_products_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<SpgemmPlan<i32, i64>>();
        fn send<T: Send>() {}
        send::<Product>();
    }
}
