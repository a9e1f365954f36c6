//! The CPU arm of a product ([`CpuPlan`]): planning on the host, the
//! symbolic and numeric phases on [`CpuBackend`]'s kernels, and the
//! [`Backend`] phases over arrays by pointer that the C ABI calls.

use super::arrays::{slice_at, slice_at_mut, MatrixArrays};
#[cfg(doc)]
use super::SpgemmPlan;
use super::{check_output_lengths, Backend, Fill, NumericJob, Operation};
use crate::backend::cpu::memory::{upper_temporary_entries, RowBounds};
use crate::backend::cpu::scratch::{bytes_of, Scratch};
use crate::backend::cpu::ScratchPool;
use crate::backend::cpu::{
    lanes_in_registers, position_bytes, worth_recording, ChunkPositions, CpuBackend,
    KnownPositions, ListedColumns, ListedValues, NumericOutput, Operand, SplitInput, SplitRows,
    SymbolicOutput, UpperChunk, LANES_MAX_ROW, LISTED_BLOCK_ENTRIES,
};
use crate::context::Context;
use crate::csr::{validate_and_fingerprint, CsrOutput, CsrView, SplitValues};
use crate::error::{invalid, try_vec, Error, Result};
use crate::plan::features::{cheap_features, planning_features};
use crate::plan::fingerprint::{pattern_fingerprint, values_fingerprint};
use crate::plan::memory::{self, concurrency_levels, scratch_room, MemoryNeed};
use crate::plan::predict::{self, NnzPrediction, PLANNING_SAMPLING};
use crate::plan::select::{budget_fallbacks, for_structure_first, select, ProductShape};
use crate::plan::{OperandPattern, RowPattern, RowWork};
use crate::spgemm::{check_nnz_fits, operands};
use crate::types::{Algorithm, ColumnOrder, Index, IndexBase, IndexType, Op, PatternCheck, Scalar};
use crate::validate_structure;
use std::any::Any;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

/// A product planned on the CPU (the CPU arm of [`SpgemmPlan`]): the row
/// access to op(A) and op(B), the products of every row, the chosen CPU
/// algorithm, and after the symbolic phase C's row offsets. Every phase
/// checks A's and B's shapes and nnz against the plan's; the phases that
/// write C (numeric, structure) also check that the patterns are the ones
/// the plan was made for (a parallel hash of the index arrays, O(nnz)).
/// The symbolic phase does not hash them (but for BRMerge-Upper, whose
/// temporary C the numeric phase copies, and in the reuse flow, whose
/// listed columns the structure phase copies): its kernels refuse a pattern
/// that does not fit the plan's row work, and a changed pattern they miss
/// makes only C's row sizes wrong: the numeric phase then refuses the
/// changed operands (hash), and on the planned ones it refuses a row whose
/// size differs or computes their exact product. So a product (plan,
/// symbolic, numeric) reads the patterns for checking twice, not three
/// times.
#[derive(Debug)]
pub(crate) struct CpuPlan<I, J> {
    algorithm: Algorithm,
    selected: Algorithm,
    b_canonical: bool,
    a: OperandPattern<I, J>,
    b: OperandPattern<I, J>,
    /// The fingerprints of A's and B's patterns, which every later phase
    /// checks; `None` for the plan of one [`Context::spgemm`] call, whose
    /// phases run back to back on borrowed arrays that cannot change.
    fingerprints: Option<(u64, u64)>,
    /// Whether the plan serves several calls, between which A's and B's
    /// values may change (so values kept from one phase for another are
    /// fingerprinted); `false` for the plan of one [`Context::spgemm`]
    /// call.
    lasting: bool,
    /// nnz of A and B as planned, checked by every phase (O(1)).
    nnz: (usize, usize),
    work: RowWork,
    /// C's zero-based row offsets, once the symbolic phase ran.
    c_offsets: Option<Vec<usize>>,
    /// BRMerge-Upper's temporary C, made by the symbolic phase.
    upper: Option<KeptValues>,
    /// The output-size prediction, when the automatic choice or
    /// BRMerge-Upper needed it.
    prediction: Option<NnzPrediction>,
    /// The memory budget the plan was made under.
    budget: Option<u64>,
    /// The planner's upper bound of the product's peak beyond A, B and C.
    peak_bound: u64,
    /// Chunks of rows the phases work on at once: the context's threads,
    /// or fewer when the budget asks for it.
    concurrency: usize,
    /// This plan's own number (no two plans of a process share one), for
    /// the values of a transposed A it keeps in the context's pool
    /// ([`GatheredValues`]).
    id: u64,
    /// Under a budget, the most entries BRMerge-Upper's temporary C takes
    /// (its predicted size with head room, shared by the chunks).
    upper_cap: Option<usize>,
    /// The algorithm, and the peak bound with it, that
    /// [`CpuPlan::expect_structure_first`] switches to
    /// ([`for_structure_first`]); `None` when it keeps `selected`.
    structure_first: Option<(Algorithm, u64)>,
    /// Whether the symbolic phase keeps C's columns for
    /// [`CpuPlan::write_structure`] ([`CpuPlan::expect_structure_first`]).
    list_in_symbolic: bool,
    /// C's columns kept by the symbolic phase, until the structure is
    /// written.
    listed: ListedStore<J>,
    /// C's values listed by the symbolic phase with its columns (when A
    /// and B had values then), until the next numeric phase, which copies
    /// them when A's and B's values are still those.
    listed_values: Mutex<Option<KeptValues>>,
    /// Whether the symbolic phase lists C's values without hashing A's and
    /// B's, for [`SpgemmPlan::write_structure_with_values`]
    /// ([`CpuPlan::expect_values_with_structure`]).
    values_with_structure: bool,
    /// Bytes of one value of C.
    value_bytes: u64,
    /// Whether a numeric phase on C's checked known structure may record
    /// the positions of C's products, and later ones replay them
    /// ([`CpuPlan::expect_structure_first`], which adds them to the peak
    /// bound).
    record_positions: bool,
    /// Tests: keep lane masks where they pay though the machine cannot sum
    /// them in registers (they are then walked in scalar code), so that
    /// the plan's course with them runs on every machine.
    #[cfg(test)]
    lanes_anywhere: bool,
    /// The positions recorded, with the structure of C they hold for, or
    /// the structure a numeric phase computed on without them.
    positions: Mutex<Positions>,
    /// The fingerprint and index base of C's columns as the Rust API's
    /// [`SpgemmPlan::write_structure`] last wrote them: a values-only output
    /// on the same columns then needs no per-column product counts
    /// ([`CpuPlan::numeric`]).
    written: Mutex<Option<(u64, IndexBase)>>,
    /// Whether the phases hash the patterns or trust the caller
    /// ([`PatternCheck`]).
    pattern_check: PatternCheck,
}

/// C's columns as the symbolic phase listed them, chunk by chunk
/// ([`CpuPlan::expect_structure_first`]); taken by the structure phase.
struct ListedStore<J>(Mutex<Option<Vec<ListedColumns<J>>>>);

impl<J> ListedStore<J> {
    fn take(&self) -> Option<Vec<ListedColumns<J>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
    fn put(&self, chunks: Option<Vec<ListedColumns<J>>>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = chunks;
    }
}

impl<J> std::fmt::Debug for ListedStore<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map(|g| g.is_some()).unwrap_or(false);
        write!(f, "ListedStore {{ kept: {kept} }}")
    }
}

/// Bytes of slack in every bound for the phases' small bookkeeping (the
/// per-chunk slices of C, rayon's jobs), plus [`SLACK_PER_CHUNK`] per chunk.
const SLACK_BYTES: u64 = 16 << 10;
/// See [`SLACK_BYTES`].
const SLACK_PER_CHUNK: u64 = 256;

/// What the memory bounds of a CPU plan read (see [`Footprint::need`]).
struct Footprint {
    /// Held by the plan from its start: row work and transposed patterns.
    plan: u64,
    /// Bytes of values a numeric phase gathers (transposed operands).
    gathered: u64,
    /// Bytes of one entry (value and column index) of C.
    entry_bytes: u64,
    rows: RowBounds,
    m: usize,
    chunks: usize,
    products: u64,
    /// The most products of one chunk (BRMerge-Upper's temporary C grows
    /// to it).
    chunk_products: u64,
    /// Under a budget, the entries of BRMerge-Upper's temporary C over all
    /// chunks, which never grows past its predicted size then; `None`
    /// without a budget (it grows up to the products).
    upper_capped: Option<u64>,
    b_canonical: bool,
}

impl Footprint {
    /// The memory of `algorithm` run `concurrency` chunks at a time (the
    /// kernels' bounds of [`CpuBackend`], for values of `T`).
    fn need<T: Scalar, J: Index>(
        &self,
        algorithm: Algorithm,
        concurrency: usize,
        scratch: &ScratchPool,
    ) -> MemoryNeed {
        let backend = CpuBackend {
            threads: concurrency,
            algorithm,
            b_canonical: self.b_canonical,
            scratch,
        };
        let c = concurrency.min(self.chunks).max(1) as u64;
        let upper = algorithm == Algorithm::BrmergeUpper;
        let offsets = (self.m as u64 + 1) * 8;
        let temporary_c = match (upper, self.upper_capped) {
            (false, _) => 0,
            (true, Some(entries)) => entries.saturating_mul(self.entry_bytes),
            (true, None) => self.products.saturating_mul(self.entry_bytes),
        };
        let kept = self
            .plan
            .saturating_add(offsets)
            .saturating_add(temporary_c)
            .saturating_add(EXTERNAL_BUFFER_BYTES);
        let mut symbolic = c.saturating_mul(backend.symbolic_chunk_bytes(&self.rows, false));
        if upper {
            // Uncapped, each chunk's temporary C may be copied once as it
            // grows; capped, it never grows.
            let growth = match self.upper_capped {
                Some(_) => 0,
                None => self.chunk_products.saturating_mul(self.entry_bytes),
            };
            let chunk = backend
                .upper_chunk_bytes::<T, J>(&self.rows)
                .saturating_add(growth);
            symbolic = symbolic.max(c.saturating_mul(chunk).saturating_add(self.gathered));
        }
        let numeric = c
            .saturating_mul(backend.numeric_chunk_bytes::<T, J>(&self.rows))
            .saturating_add(self.gathered);
        let slack = SLACK_BYTES + self.chunks as u64 * SLACK_PER_CHUNK;
        MemoryNeed {
            kept,
            transient: symbolic.max(numeric).saturating_add(slack),
        }
    }
}

/// The fastest configuration (algorithm, chunks at once) whose peak fits
/// the budget (`budget, planning`: the budget and planning's own bound),
/// fastest first: the selected algorithm on every thread, then its
/// fallbacks (an automatic choice only), then the same on half the
/// threads, and so on. Without a budget, the selected algorithm on every
/// thread, unless its peak is large and would not fit in the memory the
/// system has left while a fallback would. Returns the configuration and
/// its peak.
///
/// # Errors
/// [`Error::AllocFailed`] naming the smallest budget when none fits.
fn fit_budget<T: Scalar, J: Index>(
    ctx: &Context,
    (requested, selected): (Algorithm, Algorithm),
    shape: &ProductShape,
    footprint: &Footprint,
    (budget, planning): (Option<u64>, u64),
) -> Result<(Algorithm, usize, u64)> {
    let threads = ctx.num_threads().max(1);
    let peak = |alg, c| plan_peak::<T, J>(ctx, footprint, (alg, c), planning);
    let first = peak(selected, threads);
    let limit = match budget {
        Some(b) => b,
        None => match crate::system_memory::short_of_memory(first) {
            Some(left) => left,
            None => return Ok((selected, threads, first)),
        },
    };
    let algorithms = budget_fallbacks(requested, selected, shape);
    let candidates: Vec<((Algorithm, usize), u64)> = concurrency_levels(threads)
        .into_iter()
        .flat_map(|c| algorithms.iter().map(move |&alg| (alg, c)))
        .map(|(alg, c)| ((alg, c), peak(alg, c)))
        .collect();
    match (memory::fastest_fitting(Some(limit), &candidates), budget) {
        (Ok(((alg, c), p)), _) => Ok((alg, c, p)),
        (Err(smallest), Some(b)) => Err(memory::too_small(
            b,
            smallest.unwrap_or(first),
            "this product",
        )),
        // Over the memory left but no budget: run as selected, and let the
        // allocations say what did not fit.
        (Err(_), None) => Ok((selected, threads, first)),
    }
}

/// The peak bound of a plan that runs `algorithm` on `concurrency` chunks
/// at once (and so, below the context's threads, in a pool of its own).
fn plan_peak<T: Scalar, J: Index>(
    ctx: &Context,
    footprint: &Footprint,
    (algorithm, concurrency): (Algorithm, usize),
    planning: u64,
) -> u64 {
    let pool = if concurrency < ctx.num_threads().max(1) {
        budget_pool_bytes(concurrency)
    } else {
        0
    };
    footprint
        .need::<T, J>(algorithm, concurrency, ctx.scratch())
        .peak()
        .saturating_add(pool)
        .max(planning)
}

/// Whether a one-call product of `products` follows one of `previous`
/// products (0: none) of about its size, whose temporary C it could take
/// back (see [`one_pass_instead_of_dense`]): within a factor of 2.
fn similar_products(previous: u64, products: u64) -> bool {
    previous > 0 && products <= previous.saturating_mul(2) && previous <= products.saturating_mul(2)
}

/// The algorithm a one-call product that follows one of about its size
/// ([`similar_products`]) on the same context takes where the automatic
/// choice picked the dense accumulator:
/// BRMerge-Upper, which beside a dense accumulator runs the same row
/// kernels in one pass into a temporary C that the numeric phase copies
/// (no counting pass), when op(B)'s rows are canonical and the temporary
/// C, at most its products' worth of entries or else the predicted
/// nnz(C) with BRMerge-Upper's head room, fits in the context's scratch
/// limit, and twice it passes the allocator's check (the memory limit,
/// the memory the system has left): it is then given back after the
/// product and taken again by the next one ([`CpuPlan::recycle`]), so its
/// pages are faulted once. A
/// one-call product after none, or after one of another size, keeps the
/// dense accumulator: a fresh temporary C costs page faults that the
/// single call does not win back (uniform_r4_200000 24 % slower, memplus
/// 35 %, with the scratch emptied before each call). `prediction`
/// is made with `predict` when needed, and kept; `temporary` gives the
/// temporary C's starting entries for a predicted compression.
///
/// Repeated one-call products at 2 threads through the Python binding,
/// medians of 21 interleaved with scipy: lp_maros_r7 A·Aᵀ 12.2 -> 9.6 ms,
/// lp_fit2p A·Aᵀ 48.3 -> 37.5, stencil2d_5pt_725 29.4 -> 27.6, memplus
/// 14.9 -> 14.5, luxembourg_osm 3.5 -> 3.7; one thread, in Rust:
/// wiki-Vote 24.6 -> 16.3, HEP-th-new 64.3 -> 48.9, ca-CondMat 39.9 -> 31.7,
/// as20000102 12.2 -> 9.8, uniform_r4_200000 27.5 -> 24.5, memplus
/// 37.1 -> 39.5.
fn one_pass_instead_of_dense(
    shape: &ProductShape,
    scratch_limit: usize,
    prediction: &mut Option<NnzPrediction>,
    (predict, temporary): (impl FnOnce() -> NnzPrediction, impl FnOnce(f64) -> u64),
) -> Algorithm {
    if !shape.b_canonical {
        return Algorithm::Dense;
    }
    let limit = scratch_limit as u64;
    let entry = shape.entry_bytes as u64;
    let at_most = shape.products.saturating_mul(entry);
    let bytes = if at_most <= limit {
        at_most
    } else {
        let ratio = prediction.get_or_insert_with(predict).ratio;
        temporary(ratio).saturating_mul(entry)
    };
    // The temporary C beside C, as the automatic choice checks for
    // BRMerge-Upper: under a memory limit, or short of memory, the dense
    // accumulator, which needs only C.
    let beside_c = bytes.saturating_mul(2);
    if bytes <= limit && crate::error::ensure_memory_for(beside_c, "one pass").is_ok() {
        Algorithm::BrmergeUpper
    } else {
        Algorithm::Dense
    }
}

/// Bytes the thread pool of `threads` threads that a phase starts when it
/// runs fewer chunks at once than the context has threads
/// ([`CpuPlan::run`]) allocates: rayon's registry and deques and the
/// threads' own structures, measured at 9-12 KiB for one or two threads
/// and about 5.5 KiB per thread beyond.
fn budget_pool_bytes(threads: usize) -> u64 {
    (8 << 10) + (threads as u64).saturating_mul(6 << 10)
}

/// The bytes the C ABI's external buffers are asked for, all three.
const EXTERNAL_BUFFER_BYTES: u64 = 3 * crate::ffi::spgemm::CPU_BUFFER_BYTES as u64;

/// An upper bound of the bytes planning `op(A) * op(B)` takes, from the
/// shapes alone: the operands' patterns, the row work, and the samples of
/// the prediction and the selector's features (a column set per thread,
/// row lists).
fn planning_bound<T: Scalar, I: Index, J: Index>(
    (a, op_a): (&CsrView<'_, T, I, J>, Op),
    (b, op_b): (&CsrView<'_, T, I, J>, Op),
    threads: usize,
    chunks: usize,
) -> u64 {
    let (m, _) = OperandPattern::shape(a, op_a);
    let (_, n) = OperandPattern::shape(b, op_b);
    let (m, n, t) = (m as u64, n as u64, threads.max(1) as u64);
    let samples = m
        .saturating_add(1)
        .saturating_mul(16)
        .saturating_add(t.saturating_mul(n.saturating_add(4096)))
        .saturating_add(n / 16)
        .saturating_add(1 << 16);
    OperandPattern::pair_bytes_needed(a, op_a, b, op_b)
        .saturating_add(RowWork::bytes_needed(m as usize))
        .saturating_add((chunks as u64 + 1) * 8)
        .saturating_add(samples)
}

/// Values of C that a symbolic phase computed ahead of the numeric phase:
/// BRMerge-Upper's temporary C (a `Vec<UpperChunk<T, J>>`) or the values
/// the reuse flow's listing summed (a `Vec<ListedValues<T>>`), with the
/// fingerprints of the values they were computed from: a numeric phase
/// copies them only when A's and B's values are still the same, and
/// recomputes otherwise (the reuse API changes values in place).
struct KeptValues {
    chunks: Arc<dyn Any + Send + Sync>,
    /// Fingerprints of A's and B's values; `None` when not hashed (values
    /// listed for [`SpgemmPlan::write_structure_with_values`] alone).
    values: Option<(u64, u64)>,
    bytes: usize,
}

impl std::fmt::Debug for KeptValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeptValues {{ {} bytes }}", self.bytes)
    }
}

/// Where a plan stands with the positions of C's products
/// ([`CpuPlan::numeric_at_positions`]).
#[derive(Debug)]
enum Positions {
    None,
    /// A numeric phase computed C's values on the structure of this
    /// fingerprint without positions: the next one there records them.
    Computed(u64),
    Kept(Arc<KeptPositions>),
}

/// What a plan holds for one structure of C ([`CpuPlan::positions_now`]).
struct PositionsNow {
    /// Positions or lane masks kept for that structure.
    kept: Option<Arc<KeptPositions>>,
    /// A numeric phase computed C's values on it without positions.
    computed: bool,
}

impl PositionsNow {
    /// Whether no numeric phase has computed on the structure yet.
    fn first(&self) -> bool {
        self.kept.is_none() && !self.computed
    }
}

/// See [`CpuPlan::lanes_pay`].
const LANES_MIN_PRODUCTS_PER_ENTRY: f64 = 1.5;

/// The positions of C's products in C's rows (`positions.rs`), recorded
/// by one numeric phase on C's known structure for the next ones; or the
/// lane masks of its entries of op(A) (`lanes.rs`), found by the first.
#[derive(Debug)]
struct KeptPositions {
    chunks: Vec<ChunkPositions>,
    /// The fingerprint of C's structure they were recorded on: a numeric
    /// phase replays them only on that structure (the one the plan wrote,
    /// in the order it wrote it).
    c_print: u64,
    /// C's longest row.
    max_row: usize,
}

impl KeptPositions {
    /// Whether these are lane masks.
    fn lanes(&self) -> bool {
        matches!(self.chunks.first(), Some(ChunkPositions::Lanes(_)))
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

impl<I: Index, J: Index> CpuPlan<I, J> {
    /// Plans `op(A) * op(B)` on the CPU (see [`SpgemmPlan::new`]), with
    /// A's and B's pattern fingerprints.
    pub(crate) fn new<T: Scalar>(
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        op_a: Op,
        b: &CsrView<'_, T, I, J>,
        op_b: Op,
        algorithm: Algorithm,
    ) -> Result<Self> {
        let mut plan = Self::planned(ctx, (a, op_a), (b, op_b), (algorithm, false), || {
            Some(fingerprints(a, b))
        })?;
        plan.lasting = true;
        Ok(plan)
    }

    /// [`CpuPlan::new`] with A's and B's pattern fingerprints already
    /// made (by the C ABI's work estimation, in its validation pass), or
    /// none where the caller vouched for the patterns from the start: a
    /// later phase asked to hash them then has nothing to compare them
    /// with, and checks what it can (C's structure by its hash, a known
    /// structure's products column by column), so that a changed pattern
    /// gives its exact product or an error.
    pub(crate) fn with_fingerprints<T: Scalar>(
        ctx: &Context,
        (a, op_a): (&CsrView<'_, T, I, J>, Op),
        (b, op_b): (&CsrView<'_, T, I, J>, Op),
        algorithm: Algorithm,
        prints: Option<(u64, u64)>,
    ) -> Result<Self> {
        let mut plan = Self::planned(ctx, (a, op_a), (b, op_b), (algorithm, false), || prints)?;
        plan.lasting = true;
        Ok(plan)
    }

    /// [`CpuPlan::new`], with the patterns' fingerprints from `prints`
    /// (run in the context's pool). `None`, for phases that all run inside
    /// one call on the same borrowed arrays: the patterns and values are
    /// not fingerprinted (nothing can change them in between).
    /// `one_call`: the plan of a one-call product whose C is wanted sorted,
    /// which may run the dense accumulator in one pass
    /// ([`one_pass_instead_of_dense`]).
    pub(crate) fn planned<T: Scalar>(
        ctx: &Context,
        (a, op_a): (&CsrView<'_, T, I, J>, Op),
        (b, op_b): (&CsrView<'_, T, I, J>, Op),
        (algorithm, one_call): (Algorithm, bool),
        prints: impl FnOnce() -> Option<(u64, u64)> + Send,
    ) -> Result<Self> {
        let budget = ctx.memory_budget().map(|b| b as u64);
        let chunks = CpuBackend::chunks_for(ctx.num_threads());
        let planning = planning_bound((a, op_a), (b, op_b), ctx.num_threads(), chunks);
        if let Some(b) = budget.filter(|&b| planning > b) {
            return Err(memory::too_small_to_plan(b, planning));
        }
        ctx.scratch()
            .set_room(budget.map(|b| scratch_room(b, planning)));
        ctx.run(|| {
            let (pa, pb) = operands(a, op_a, b, op_b)?;
            let (ra, rb) = (pa.rows(a), pb.rows(b));
            let work = RowWork::new(&ra, &rb, chunks)?;
            // Rows of at most one entry (an aggregation) are sorted and
            // without duplicates: not read for it.
            let b_canonical = work.b_rows_canonical().unwrap_or_else(|| {
                work.b_row_length().is_some_and(|l| l <= 1) || rb.rows_canonical()
            });
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
            let cheap = cheap_features(&ra, &rb, &work);
            let selected = select(algorithm, &shape, &cheap, || {
                let (p, f) = planning_features(&ra, &rb, &work);
                prediction = Some(p);
                f
            });
            let previous = if one_call {
                ctx.swap_last_one_call(work.total())
            } else {
                0
            };
            let selected = if similar_products(previous, work.total())
                && budget.is_none()
                && !algorithm.is_concrete()
                && selected == Algorithm::Dense
            {
                let predict = || predict::predict_nnz(&ra, &rb, &work, PLANNING_SAMPLING);
                let temporary = |ratio| upper_temporary_entries(&work, ratio);
                let limit = ctx.scratch().limit();
                one_pass_instead_of_dense(&shape, limit, &mut prediction, (predict, temporary))
            } else {
                selected
            };
            if selected == Algorithm::BrmergeUpper && prediction.is_none() {
                prediction = Some(predict::predict_nnz(&ra, &rb, &work, PLANNING_SAMPLING));
            }
            let footprint = Footprint {
                plan: RowWork::bytes_needed(work.nrows())
                    + (work.bounds().len() as u64) * 8
                    + (pa.memory_bytes() + pb.memory_bytes()) as u64,
                // A transposed A's values gathered, with the copy of the
                // caller's values kept beside them (GatheredValues).
                gathered: ((2 * pa.gathered_values_len() + pb.gathered_values_len())
                    * std::mem::size_of::<T>()) as u64,
                entry_bytes: shape.entry_bytes as u64,
                rows: RowBounds::of(&ra, &work, rb.ncols),
                m: work.nrows(),
                chunks: work.bounds().len().saturating_sub(1),
                products: work.total(),
                chunk_products: work.chunks().map(|r| work.rows(r)).max().unwrap_or(0),
                upper_capped: budget
                    .map(|_| upper_temporary_entries(&work, prediction.map_or(1.0, |p| p.ratio))),
                b_canonical,
            };
            let (selected, concurrency, peak_bound) = fit_budget::<T, J>(
                ctx,
                (algorithm, selected),
                &shape,
                &footprint,
                (budget, planning),
            )?;
            // Never under a budget: the reuse flow keeps what fit it.
            let structure_first = Some(for_structure_first(algorithm, selected, &shape))
                .filter(|&alg| alg != selected && budget.is_none())
                .map(|alg| {
                    let peak = plan_peak::<T, J>(ctx, &footprint, (alg, concurrency), planning);
                    (alg, peak)
                });
            Ok(CpuPlan {
                algorithm,
                selected,
                b_canonical,
                upper: None,
                prediction,
                fingerprints: prints(),
                lasting: false,
                nnz: (a.col_indices().len(), b.col_indices().len()),
                a: pa,
                b: pb,
                work,
                c_offsets: None,
                budget,
                peak_bound,
                concurrency,
                id: NEXT_PLAN_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                upper_cap: footprint
                    .upper_capped
                    .map(|e| usize::try_from(e).unwrap_or(usize::MAX)),
                structure_first,
                list_in_symbolic: false,
                listed: ListedStore(Mutex::new(None)),
                listed_values: Mutex::new(None),
                values_with_structure: false,
                value_bytes: std::mem::size_of::<T>() as u64,
                record_positions: false,
                #[cfg(test)]
                lanes_anywhere: false,
                positions: Mutex::new(Positions::None),
                written: Mutex::new(None),
                pattern_check: PatternCheck::Hash,
            })
        })
    }

    /// [`SpgemmPlan::peak_memory_bound`] on the CPU.
    pub(crate) fn peak_memory_bound(&self) -> u64 {
        self.peak_bound
    }

    /// [`SpgemmPlan::concurrency`] on the CPU.
    pub(crate) fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// [`SpgemmPlan::set_pattern_check`] on the CPU.
    pub(crate) fn set_pattern_check(&mut self, check: PatternCheck) {
        self.pattern_check = check;
    }

    /// [`SpgemmPlan::expect_values_with_structure`] on the CPU: the
    /// values the symbolic phase lists beside C's columns
    /// ([`CpuPlan::expect_structure_first`]) are kept without hashing A's
    /// and B's values, for [`CpuPlan::values_after_structure`] alone.
    pub(crate) fn expect_values_with_structure(&mut self) {
        self.values_with_structure = true;
    }

    /// Tells the plan that its caller writes C's structure before C's
    /// values (the C ABI's reuse flow: `reuse_nnz`, `reuse_copy`, then
    /// `reuse_compute`). The symbolic phase then keeps C's columns as it
    /// counts them, and the structure phase copies them, instead of a
    /// counting pass and a listing pass over the products. When A and B
    /// have values then, it also sums the products beside the columns, and
    /// the numeric phase that follows copies those values if A's and B's
    /// are still the same (their fingerprints), instead of computing every
    /// product again. Not under a memory budget, nor when the columns
    /// might not fit in the memory the system has left: the kept columns'
    /// and values' blocks (at most 4 * nprod of each: a block is left when
    /// the next row does not fit, so it is half full, or the row that did
    /// not fit is at least half its size) are added to the plan's peak
    /// bound. Without a budget, an automatic
    /// choice of BRMerge-Upper also becomes the dense accumulator where it
    /// fits ([`for_structure_first`]), with that algorithm's peak bound.
    ///
    /// Likewise (no budget, the memory there), the numeric phases on the
    /// structure written may keep the place of every product in its row of
    /// C (one byte each, two past 256 entries a row: added to the peak
    /// bound), recorded by the first that computes and replayed by the
    /// next ones, when that pays and takes no more memory than C's
    /// columns and values ([`worth_recording`]).
    pub(crate) fn expect_structure_first(&mut self) {
        if self.budget.is_some() || self.list_in_symbolic {
            return;
        }
        if let Some((algorithm, peak)) = self.structure_first.take() {
            self.selected = algorithm;
            self.peak_bound = peak;
        }
        // The columns, and the values listed beside them.
        let index = std::mem::size_of::<J>() as u64 + self.value_bytes;
        let chunks = self.work.bounds().len().saturating_sub(1) as u64;
        let bytes = self
            .work
            .total()
            .saturating_mul(4 * index)
            .saturating_add(chunks.saturating_mul(LISTED_BLOCK_ENTRIES as u64 * index));
        let peak = self.peak_bound.saturating_add(bytes);
        if crate::system_memory::short_of_memory(peak).is_none() {
            self.list_in_symbolic = true;
            self.peak_bound = peak;
        }
        // The positions of C's products, one or two bytes each (a row of C
        // has at most as many entries as products), kept from the first
        // numeric phase on C's structure that records them.
        // Or, for op(A) transposed, a lane mask of 8 bytes an entry of
        // op(A) ([`CpuPlan::lanes_pay`]: at least 1.5 products an entry,
        // so at most 16/3 bytes a product).
        let longest = usize::try_from(self.work.max_row()).unwrap_or(usize::MAX);
        let width = position_bytes(longest).unwrap_or(2);
        let lanes = if self.a.op().transposes() {
            self.work.total().saturating_mul(16) / 3
        } else {
            0
        };
        let peak = self
            .peak_bound
            .saturating_add(self.work.total().saturating_mul(width).max(lanes));
        if crate::system_memory::short_of_memory(peak).is_none() {
            self.record_positions = true;
            self.peak_bound = peak;
        }
    }

    /// Runs a phase on at most [`CpuPlan::concurrency`] threads (fewer
    /// than the context's when a budget, or the memory the system has
    /// left, asked for it), with the context's kept scratch capped, under
    /// a budget, to the room the plan leaves it.
    fn run<R: Send>(&self, ctx: &Context, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
        ctx.scratch()
            .set_room(self.budget.map(|b| scratch_room(b, self.peak_bound)));
        if ctx.num_threads() <= self.concurrency {
            return ctx.run(f);
        }
        if self.concurrency == 1 && ctx.host_hooks().is_none() {
            return crate::parallel::serially(f);
        }
        ctx.thread_pool(self.concurrency, "rusparse-budget")?
            .install(f)
    }

    /// [`SpgemmPlan::nnz_lower_bound`] on the CPU.
    pub(crate) fn nnz_lower_bound(&self) -> u64 {
        self.work.nnz_lower_bound(self.b_canonical)
    }

    /// [`SpgemmPlan::algorithm`] on the CPU.
    pub(crate) fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
    /// [`SpgemmPlan::selected_algorithm`] on the CPU.
    pub(crate) fn selected_algorithm(&self) -> Algorithm {
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
    /// [`SpgemmPlan::shape`] on the CPU.
    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.a.nrows(), self.b.ncols())
    }
    /// [`SpgemmPlan::num_products`] on the CPU.
    pub(crate) fn num_products(&self) -> u64 {
        self.work.total()
    }
    /// [`SpgemmPlan::prediction`] on the CPU.
    pub(crate) fn prediction(&self) -> Option<NnzPrediction> {
        self.prediction
    }
    /// [`SpgemmPlan::nnz`] on the CPU.
    pub(crate) fn nnz(&self) -> Option<usize> {
        self.c_offsets.as_ref().map(|o| o[o.len() - 1])
    }
    /// [`SpgemmPlan::memory_bytes`] on the CPU.
    pub(crate) fn memory_bytes(&self) -> usize {
        let rows = self.work.nrows() + 1;
        rows * 8
            + self.c_offsets.as_ref().map_or(0, |o| o.len() * 8)
            + self.upper.as_ref().map_or(0, |u| u.bytes)
            + self.positions_bytes()
            + self.a.memory_bytes()
            + self.b.memory_bytes()
    }

    /// Bytes of the positions of C's products the plan keeps.
    fn positions_bytes(&self) -> usize {
        match &*self
            .positions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Positions::Kept(k) => k.chunks.iter().map(ChunkPositions::bytes).sum(),
            _ => 0,
        }
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
        let hashed = patterns && self.pattern_check == PatternCheck::Hash;
        let Some((a_fingerprint, b_fingerprint)) = self.fingerprints.filter(|_| hashed) else {
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

    /// [`SpgemmPlan::symbolic`] on the CPU.
    pub(crate) fn symbolic<T: Scalar>(
        &mut self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
    ) -> Result<usize> {
        self.upper = None;
        self.listed.put(None);
        *self
            .listed_values
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        if self.selected != Algorithm::BrmergeUpper {
            // A kept temporary C serves only BRMerge-Upper; held while
            // another product runs, it would keep that product from the
            // memory the allocator would otherwise hand it back.
            ctx.scratch().discard_outputs();
        }
        let (offsets, upper) = self.run(ctx, || -> Result<(Vec<usize>, Option<KeptValues>)> {
            // BRMerge-Upper keeps a temporary C that the numeric phase copies,
            // and a listing symbolic phase C's columns that the structure
            // phase copies, so they must see the planned patterns now.
            let keeps = self.selected == Algorithm::BrmergeUpper || self.list_in_symbolic;
            self.check_inputs(a, b, keeps)?;
            let m = self.work.nrows();
            let mut counts = try_vec(m + 1, 0usize, "C's row sizes")?;
            let (ra, rb) = (self.a.rows(a), self.b.rows(b));
            let backend = self.backend(ctx);
            // BRMerge-Upper keeps a temporary C with values; without values
            // (a structure-only caller) only the counts are made and the
            // numeric phase computes from scratch.
            let has_values = |x: &CsrView<'_, T, I, J>| x.values().len() == x.col_indices().len();
            // Under a budget, its temporary C stays at the predicted size;
            // when the prediction was low, it is dropped and the rows
            // counted instead (the numeric phase then merges from scratch).
            let upper_chunks =
                if self.selected == Algorithm::BrmergeUpper && has_values(a) && has_values(b) {
                    let (mut sa, mut sb) = (Vec::new(), Vec::new());
                    let av = self.a.values(a, &mut sa)?;
                    let bv = self.b.values(b, &mut sb)?;
                    let ratio = self.prediction.map_or(1.0, |p| p.ratio);
                    backend.upper_symbolic(
                        &Operand {
                            pattern: ra,
                            values: av,
                        },
                        &Operand {
                            pattern: rb,
                            values: bv,
                        },
                        &self.work,
                        (ratio, self.upper_cap),
                        &mut counts[1..],
                    )?
                } else {
                    None
                };
            let upper = match upper_chunks {
                Some(chunks) => {
                    let entries: usize = counts[1..].iter().sum();
                    Some(KeptValues {
                        chunks: Arc::new(chunks),
                        values: Some(self.value_fingerprints(a, b)),
                        bytes: entries * (std::mem::size_of::<T>() + std::mem::size_of::<J>()),
                    })
                }
                None => {
                    let listed = if !self.list_in_symbolic {
                        None
                    } else if has_values(a) && has_values(b) {
                        // The values too, for the numeric phase to copy. A
                        // transposed A's gathered values are kept for the
                        // numeric phases (GatheredValues).
                        let (mut sa, mut sb) = (Vec::new(), Vec::new());
                        let mut kept_a = None;
                        let av = self.a_values(ctx.scratch(), a, &mut sa, &mut kept_a)?;
                        let bv = self.b.values(b, &mut sb)?;
                        let (oa, ob) = (
                            Operand {
                                pattern: ra,
                                values: av,
                            },
                            Operand {
                                pattern: rb,
                                values: bv,
                            },
                        );
                        let work = &self.work;
                        let listed = match backend.listing_symbolic_with_values(
                            &oa,
                            &ob,
                            work,
                            &mut counts[1..],
                        )? {
                            Some((cols, vals)) => {
                                let bytes = vals.iter().map(|v| v.len()).sum::<usize>()
                                    * std::mem::size_of::<T>();
                                *self
                                    .listed_values
                                    .lock()
                                    .unwrap_or_else(PoisonError::into_inner) = Some(KeptValues {
                                    chunks: Arc::new(vals),
                                    // Not hashed for the structure phase,
                                    // which writes them as they are.
                                    values: (!self.values_with_structure)
                                        .then(|| self.value_fingerprints(a, b)),
                                    bytes,
                                });
                                Some(cols)
                            }
                            None => None,
                        };
                        if let Some(kept) = kept_a {
                            ctx.scratch().give(kept);
                        }
                        listed
                    } else {
                        backend.listing_symbolic(&ra, &rb, &self.work, &mut counts[1..])?
                    };
                    if listed.is_none() {
                        backend.symbolic(
                            &ra,
                            &rb,
                            &self.work,
                            SymbolicOutput::Counts(&mut counts[1..]),
                        )?;
                    }
                    self.listed.put(listed);
                    None
                }
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

    /// Gives BRMerge-Upper's temporary C to the context's scratch pool,
    /// for the next product's symbolic phase to fill (see
    /// [`crate::SpgemmPlan::recycle`]); not under a memory budget.
    pub(crate) fn recycle<T: Scalar>(&mut self, ctx: &Context) {
        if self.budget.is_some() {
            return;
        }
        let Some(upper) = self.upper.take() else {
            return;
        };
        let chunks = upper.chunks.downcast::<Vec<UpperChunk<T, J>>>().ok();
        if let Some(chunks) = chunks.and_then(|c| Arc::try_unwrap(c).ok()) {
            // Only the last product's: the buffers of an earlier one that no
            // chunk of this one took would otherwise pile up to the limit.
            let scratch = ctx.scratch();
            scratch.discard_outputs();
            for chunk in chunks {
                scratch.give(chunk);
            }
        }
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
        (u.values == Some(self.value_fingerprints(a, b))).then_some(chunks)
    }

    /// The values the symbolic phase listed, when the output `usable`
    /// takes them and A's and B's values are still those they were summed
    /// from (their fingerprints, hashed only then); taken either way, as
    /// they serve the first numeric phase after the symbolic phase at most.
    /// The caller gives them to the context's scratch pool after use; others
    /// go there now.
    fn take_listed_values<T: Scalar>(
        &self,
        ctx: &Context,
        (a, b): (&CsrView<'_, T, I, J>, &CsrView<'_, T, I, J>),
        (usable, unhashed_usable): (bool, bool),
    ) -> Option<Vec<ListedValues<T>>> {
        let store = self
            .listed_values
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        let chunks = store.chunks.downcast::<Vec<ListedValues<T>>>().ok()?;
        let chunks = Arc::try_unwrap(chunks).ok()?;
        // Values listed without a hash serve the structure phase alone
        // (`unhashed_usable`).
        let current = match store.values {
            Some(prints) => usable && prints == self.value_fingerprints(a, b),
            None => usable && unhashed_usable,
        };
        if current {
            return Some(chunks);
        }
        for chunk in chunks {
            chunk.keep(ctx.scratch());
        }
        None
    }

    /// The numeric phase on C's checked known structure `c_print` at the
    /// positions of its products: replayed when kept for that structure,
    /// recorded when not (then kept) by the second numeric phase that
    /// computes on that structure, when the plan may keep them
    /// ([`CpuPlan::expect_structure_first`]) and [`worth_recording`] for
    /// this output (`direct`: α = 1, β = 0).
    /// Otherwise the output comes back for the plain numeric phase.
    #[allow(clippy::type_complexity)]
    fn numeric_at_positions<'o, T: Scalar>(
        &self,
        backend: &CpuBackend<'_>,
        ((ra, a_vals), (rb, b_vals)): (
            (&RowPattern<'_, I, J>, (&[T], Option<SplitInput<'_, T, I>>)),
            (&RowPattern<'_, I, J>, &[T]),
        ),
        out: NumericOutput<'o, T, J>,
        c_print: u64,
        direct: bool,
    ) -> Result<Option<NumericOutput<'o, T, J>>> {
        let work = &self.work;
        let now = self.positions_now(c_print);
        // Lane masks: replayed when kept for this structure, else found by
        // the first numeric phase on it where they pay.
        let kept_lanes = match (&now.kept, out.pattern) {
            (Some(kept), _) if kept.lanes() => Some(kept.clone()),
            (None, Some(pattern)) if now.first() && self.lanes_pay::<T>(ra) => {
                let structure = (out.offsets, pattern, out.base);
                self.keep_lanes(backend, (ra, rb), structure, c_print)?
            }
            _ => None,
        };
        if let Some(kept) = kept_lanes {
            let replay = KnownPositions::Replay(&kept.chunks);
            backend.numeric_at_positions(ra, a_vals, rb, b_vals, work, out, replay)?;
            return Ok(None);
        }
        if !self.record_positions
            || !backend.adds_into_known_structure(rb.ncols, work)
            || (direct && backend.adds_masked::<T, I, J>(ra, rb, work))
        {
            return Ok(Some(out));
        }
        let nnz = out.offsets.last().copied().unwrap_or(0);
        let a_entries = ra.cols.len();
        let entry_bytes = self.value_bytes + std::mem::size_of::<J>() as u64;
        // Positions (lane masks were replayed above).
        if let Some(kept) = now.kept {
            if !worth_recording(
                (work.total(), a_entries, nnz, kept.max_row),
                entry_bytes,
                direct,
            ) {
                return Ok(Some(out));
            }
            let replay = KnownPositions::Replay(&kept.chunks);
            backend.numeric_at_positions(ra, a_vals, rb, b_vals, work, out, replay)?;
            return Ok(None);
        }
        // Recorded by the second numeric phase on the structure: a caller
        // that computes C's values once more only does not pay for it.
        if !now.computed {
            *self
                .positions
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Positions::Computed(c_print);
            return Ok(Some(out));
        }
        let max_row = out.offsets.windows(2).map(|w| w[1] - w[0]).max();
        let max_row = max_row.unwrap_or(0);
        if !worth_recording((work.total(), a_entries, nnz, max_row), entry_bytes, direct) {
            return Ok(Some(out));
        }
        let record = KnownPositions::Record { max_row };
        let chunks = backend.numeric_at_positions(ra, a_vals, rb, b_vals, work, out, record)?;
        *self
            .positions
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Positions::Kept(Arc::new(KeptPositions {
            chunks,
            c_print,
            max_row,
        }));
        Ok(None)
    }

    /// Whether the plan finds and keeps the lane masks of C's rows
    /// (`lanes.rs`) for op(A) `a` and op(B) `b`: when it may keep
    /// positions at all ([`CpuPlan::expect_structure_first`]), this
    /// machine sums f64 rows in AVX-512 registers, op(A) is transposed
    /// (Aᵀ·B, and Pᵀ·(A·P) in PETSc's PtAP: op(A)'s rows gather rows of
    /// op(B) out of order, which makes the numeric phase slow and finding
    /// the masks, which reads each product's column alone, cheap beside
    /// it), and op(B)'s rows average at least 1.5 products an entry of
    /// op(A). `numeric_variants`, one thread, Pᵀ·(A·P_tent) of GAMG's
    /// 7-point Poisson at 64³: the masks found in 4.8-5.0 ms, the numeric
    /// phase 8.2-8.7 ms, 4.2-4.3 from the masks. Not for A·P: there the
    /// masks took longer to find than a numeric phase (27-point A ·
    /// smoothed P 55-65 ms against 43-44), so the first phase on a
    /// structure would be slower.
    fn lanes_pay<T: Scalar>(&self, a: &RowPattern<'_, I, J>) -> bool {
        let machine = lanes_in_registers::<T>();
        #[cfg(test)]
        let machine = machine || self.lanes_anywhere;
        self.record_positions
            && self.a.op().transposes()
            && self.work.total() as f64 >= LANES_MIN_PRODUCTS_PER_ENTRY * a.cols.len() as f64
            && machine
    }

    /// What the plan holds for C's structure `c_print`, read under one
    /// lock.
    fn positions_now(&self, c_print: u64) -> PositionsNow {
        match &*self
            .positions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Positions::Kept(k) if k.c_print == c_print => PositionsNow {
                kept: Some(k.clone()),
                computed: false,
            },
            Positions::Computed(print) => PositionsNow {
                kept: None,
                computed: *print == c_print,
            },
            Positions::Kept(_) | Positions::None => PositionsNow {
                kept: None,
                computed: false,
            },
        }
    }

    /// Finds the lane masks of C's structure (`offsets`, `pattern`, C's
    /// index base), fingerprint `c_print`, and keeps them; `None` when its
    /// rows do not suit them (a row longer than [`LANES_MAX_ROW`], rows not
    /// sorted), the positions' course then left as it was.
    ///
    /// # Errors
    /// As [`CpuBackend::lane_masks`].
    fn keep_lanes(
        &self,
        backend: &CpuBackend<'_>,
        (a, b): (&RowPattern<'_, I, J>, &RowPattern<'_, I, J>),
        (offsets, pattern, base): (&[usize], &[J], usize),
        c_print: u64,
    ) -> Result<Option<Arc<KeptPositions>>> {
        let max_row = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let chunks = if max_row <= LANES_MAX_ROW {
            backend.lane_masks((a, b), &self.work, (offsets, pattern, base))?
        } else {
            None
        };
        let Some(chunks) = chunks else {
            return Ok(None);
        };
        let kept = Arc::new(KeptPositions {
            chunks,
            c_print,
            max_row,
        });
        *self
            .positions
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Positions::Kept(kept.clone());
        Ok(Some(kept))
    }

    /// Fingerprints of A's and B's values; `(0, 0)` for the plan of one
    /// call, whose values cannot change.
    fn value_fingerprints<T: Scalar>(
        &self,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
    ) -> (u64, u64) {
        if self.lasting {
            value_fingerprints(a, b)
        } else {
            (0, 0)
        }
    }

    /// [`SpgemmPlan::write_row_offsets`] on the CPU.
    pub(crate) fn write_row_offsets<IC: Index>(
        &self,
        out: &mut [IC],
        base: IndexBase,
    ) -> Result<()> {
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

    /// Remembers (or, with `None`, forgets) C's columns as the Rust API's
    /// [`SpgemmPlan::write_structure`] wrote them, by fingerprint and
    /// base, for [`CpuPlan::numeric`]. The C ABI keeps its own fingerprint
    /// of C and never calls this.
    pub(crate) fn remember_written(
        &self,
        ctx: &Context,
        cols: Option<(&[J], IndexBase)>,
    ) -> Option<u64> {
        let print = cols.map(|(c, base)| (self.columns_fingerprint(ctx, c), base));
        *self.written.lock().unwrap_or_else(PoisonError::into_inner) = print;
        print.map(|p| p.0)
    }

    /// [`CpuPlan::write_structure`], the columns then remembered as
    /// written ([`CpuPlan::remember_written`]) for a values-only numeric
    /// phase on them; returns their fingerprint.
    pub(crate) fn write_structure_remembered<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        (a, b): (&CsrView<'_, T, I, J>, &CsrView<'_, T, I, J>),
        row_offsets: &mut [IC],
        col_indices: &mut [J],
        base: IndexBase,
    ) -> Result<u64> {
        self.remember_written(ctx, None);
        self.write_structure(ctx, a, b, row_offsets, col_indices, base)?;
        let print = self.remember_written(ctx, Some((col_indices, base)));
        Ok(print.unwrap_or_default())
    }

    /// The fingerprint of C's columns `cols` (the rows are the plan's).
    fn columns_fingerprint(&self, ctx: &Context, cols: &[J]) -> u64 {
        let rows = self.c_offsets.as_ref().map_or(0, |o| o.len());
        ctx.run(|| pattern_fingerprint::<J, J>(rows, self.b.ncols(), &[], cols))
    }

    /// [`SpgemmPlan::write_structure`] on the CPU.
    pub(crate) fn write_structure<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        row_offsets: &mut [IC],
        col_indices: &mut [J],
        base: IndexBase,
    ) -> Result<()> {
        self.check_output_sizes(Some(row_offsets.len()), Some(col_indices.len()), None)?;
        self.run(ctx, || {
            self.check_inputs(a, b, true)?;
            self.write_row_offsets(row_offsets, base)?;
            let offsets = self.offsets()?;
            let backend = self.backend(ctx);
            // BRMerge-Upper's temporary C holds the columns (its values
            // need not be current for the structure).
            let upper = self
                .upper
                .as_ref()
                .and_then(|u| u.chunks.downcast_ref::<Vec<UpperChunk<T, J>>>());
            if let Some(chunks) = upper {
                return backend.kept_structure(
                    chunks,
                    &self.work,
                    offsets,
                    col_indices,
                    base.offset(),
                );
            }
            if let Some(listed) = self.listed.take() {
                backend.kept_structure(&listed, &self.work, offsets, col_indices, base.offset())?;
                for chunk in listed {
                    chunk.keep(ctx.scratch());
                }
                return Ok(());
            }
            backend.symbolic(
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
        check_output_lengths((offsets, cols, vals), o.len() - 1, o[o.len() - 1])
    }

    /// [`SpgemmPlan::numeric`] on the CPU.
    pub(crate) fn numeric<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        a: &CsrView<'_, T, I, J>,
        b: &CsrView<'_, T, I, J>,
        alpha: T,
        beta: T,
        out: CsrOutput<'_, T, IC, J>,
    ) -> Result<()> {
        // Columns given without values to write: checked when they are
        // the ones `write_structure` wrote last, with the same base.
        let written = *self.written.lock().unwrap_or_else(PoisonError::into_inner);
        let c_checked = match (&out.col_indices, out.pattern, written) {
            // The caller vouches for C's pattern: the structure written last.
            (None, Some(_), w) if self.pattern_check == PatternCheck::Caller => {
                Some(w.filter(|w| w.1 == out.base).map(|w| w.0))
            }
            (None, Some(p), Some((print, base))) => (base == out.base
                && self.columns_fingerprint(ctx, p) == print)
                .then_some(Some(print)),
            _ => None,
        };
        self.numeric_with(ctx, (a, b), (alpha, beta), out, (c_checked, false), None)
    }

    /// C's values right after [`CpuPlan::write_structure`] wrote the
    /// columns `cols` (fingerprint `c_print`): those the symbolic phase
    /// summed without a hash ([`CpuPlan::expect_values_with_structure`])
    /// when it did, else computed from A's and B's values now (α = 1,
    /// β = 0).
    pub(crate) fn values_after_structure<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        (a, b): (&CsrView<'_, T, I, J>, &CsrView<'_, T, I, J>),
        out: CsrOutput<'_, T, IC, J>,
        c_print: u64,
    ) -> Result<()> {
        let checked = (Some(Some(c_print)), true);
        self.numeric_with(ctx, (a, b), (T::one(), T::zero()), out, checked, None)
    }

    /// [`CpuPlan::numeric`]; `c_checked`: `out.pattern`'s fingerprint was
    /// found equal to that of the structure this plan wrote (with it, when
    /// known: the positions recorded on that structure may be replayed),
    /// or the caller vouched for it, which, with A's and B's fingerprints
    /// checked here, lets the known-structure kernel skip its per-column
    /// product counts. `a_split`: A's values are in two arrays (checked
    /// against `a`'s rows), not in `a`. `structure_values`: the phase
    /// right after the structure was written, for which values listed
    /// without a hash are current ([`CpuPlan::values_after_structure`]).
    fn numeric_with<T: Scalar, IC: Index>(
        &self,
        ctx: &Context,
        (a, b): (&CsrView<'_, T, I, J>, &CsrView<'_, T, I, J>),
        (alpha, beta): (T, T),
        out: CsrOutput<'_, T, IC, J>,
        (c_checked, structure_values): (Option<Option<u64>>, bool),
        a_split: Option<SplitInput<'_, T, I>>,
    ) -> Result<()> {
        let CsrOutput {
            row_offsets,
            col_indices,
            mut values,
            base,
            pattern,
            column_order,
            split_values,
        } = out;
        // The back end sorts anyway when the columns are not written.
        let sorted = column_order == ColumnOrder::Sorted;
        self.check_output_sizes(
            row_offsets.as_ref().map(|x| x.len()),
            col_indices.as_ref().map(|x| x.len()),
            values.as_ref().map(|x| x.len()),
        )?;
        let mut split = match split_values {
            None => None,
            Some(s) => {
                if row_offsets.is_some() || col_indices.is_some() || values.is_some() {
                    return Err(Error::InvalidValue(
                        "C's values split between two arrays are written only on a known structure, with no other output array".into(),
                    ));
                }
                if pattern.is_none() {
                    return Err(Error::InvalidValue(
                        "C's values split between two arrays need C's columns (the structure written earlier)".into(),
                    ));
                }
                Some(split_offsets(ctx.scratch(), self.offsets()?, s, base)?)
            }
        };
        // The known structure only serves a values-only output.
        let pattern = match (&col_indices, pattern) {
            (None, Some(p)) => {
                self.check_output_sizes(None, Some(p.len()), None)?;
                Some(p)
            }
            _ => None,
        };
        // A's and B's fingerprints are compared below when the plan has them
        // (or the caller vouches for the patterns).
        let pattern_checked = c_checked.is_some()
            && pattern.is_some()
            && (self.fingerprints.is_some() || self.pattern_check == PatternCheck::Caller);
        // A transposed A's gathered values, kept in the pool after the call.
        let mut kept_a: Option<GatheredValues<T>> = None;
        let result = self.run(ctx, || {
            self.check_inputs(a, b, true)?;
            if let Some(ro) = row_offsets {
                self.write_row_offsets(ro, base)?;
            }
            let offsets = self.offsets()?;
            let backend = self.backend(ctx);
            // The values the symbolic phase listed, on the structure it
            // listed (the reuse flow's first values): copied when A's and
            // B's values are still those. A's split values never match
            // (A's array is then empty).
            let usable =
                pattern_checked && col_indices.is_none() && (values.is_some() || split.is_some());
            if let Some(listed) = self.take_listed_values(ctx, (a, b), (usable, structure_values)) {
                let values = values.as_deref_mut().unwrap_or_default();
                let result = backend.listed_numeric(
                    &listed,
                    &self.work,
                    NumericOutput {
                        offsets,
                        cols: None,
                        sorted,
                        values,
                        base: base.offset(),
                        alpha,
                        beta,
                        pattern,
                        pattern_checked,
                        split: split.as_mut().map(CheckedSplit::rows),
                    },
                );
                for chunk in listed {
                    chunk.keep(ctx.scratch());
                }
                result?;
                // The lane masks of this structure, found now where they
                // pay, so that the next numeric phase (PETSc's first
                // MAT_REUSE_MATRIX) sums from them.
                let c_print = c_checked.flatten().filter(|_| pattern_checked);
                if let (Some(c_print), Some(pattern)) = (c_print, pattern) {
                    let (ra, rb) = (self.a.rows(a), self.b.rows(b));
                    if self.positions_now(c_print).first() && self.lanes_pay::<T>(&ra) {
                        let structure = (offsets, pattern, base.offset());
                        self.keep_lanes(&backend, (&ra, &rb), structure, c_print)?;
                    }
                }
                return Ok(());
            }
            // BRMerge-Upper's temporary C was computed from A's array.
            let upper = a_split.is_none().then(|| self.fresh_upper(a, b)).flatten();
            if let (Some(values), Some(chunks)) = (values.as_deref_mut(), upper) {
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
                        pattern_checked: false,
                        split: None,
                    },
                );
            }
            let (mut sa, mut sb) = (Vec::new(), Vec::new());
            // A's values from two arrays: read there by the back end when A
            // is walked as stored, else first put in one array in A's order.
            let gathered = match a_split {
                Some(s) if !self.a.walks_stored() => Some(s.gather()?),
                _ => None,
            };
            let a_split = a_split.filter(|_| gathered.is_none());
            let av = match &gathered {
                Some(whole) => self.a.values_of(whole, &mut sa)?,
                None => self.a_values(ctx.scratch(), a, &mut sa, &mut kept_a)?,
            };
            let bv = self.b.values(b, &mut sb)?;
            // Split values: `values` is empty and the blocks take them.
            let split = split.as_mut().map(CheckedSplit::rows);
            let values = match (values, &split) {
                (None, Some(_)) => Some(<&mut [T]>::default()),
                (values, _) => values,
            };
            match values {
                Some(values) => {
                    let direct = alpha == T::one() && beta == T::zero();
                    let out = NumericOutput {
                        offsets,
                        cols: col_indices,
                        sorted,
                        values,
                        base: base.offset(),
                        alpha,
                        beta,
                        pattern,
                        pattern_checked,
                        split,
                    };
                    let (ra, rb) = (self.a.rows(a), self.b.rows(b));
                    let c_print = c_checked.flatten().filter(|_| pattern_checked);
                    if let Some(c_print) = c_print.filter(|_| out.cols.is_none()) {
                        let operands = ((&ra, (av, a_split)), (&rb, bv));
                        let done =
                            self.numeric_at_positions(&backend, operands, out, c_print, direct)?;
                        return done.map_or(Ok(()), |out| {
                            backend.numeric(&ra, (av, a_split), &rb, bv, &self.work, out)
                        });
                    }
                    backend.numeric(&ra, (av, a_split), &rb, bv, &self.work, out)
                }
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
        });
        if let Some(split) = split {
            split.recycle(ctx.scratch());
        }
        if let Some(kept) = kept_a {
            ctx.scratch().give(kept);
        }
        result
    }

    /// A's values as the plan walks them ([`OperandPattern::values`]):
    /// a lasting plan's transposed (or renumbered) A's from
    /// [`CpuPlan::gathered_a`], held in `kept` for the caller to give back
    /// to `pool`; otherwise A's own or gathered into `scratch`.
    ///
    /// # Errors
    /// [`Error::AllocFailed`].
    fn a_values<'v, T: Scalar>(
        &self,
        pool: &ScratchPool,
        a: &CsrView<'v, T, I, J>,
        scratch: &'v mut Vec<T>,
        kept: &'v mut Option<GatheredValues<T>>,
    ) -> Result<&'v [T]> {
        if self.lasting && !self.a.walks_stored() {
            let g = kept.insert(self.gathered_a(pool, a.values())?);
            return Ok(&g.values);
        }
        self.a.values(a, scratch)
    }

    /// A transposed (or renumbered) A's values as the plan walks them, for
    /// the caller's values `src`: gathered again only when `src` differs
    /// from the values of this plan's last numeric phase, which the
    /// context's pool keeps with them (compared exactly: bit for bit, so a
    /// zero's sign or a NaN is never taken for another).
    ///
    /// # Errors
    /// [`Error::AllocFailed`].
    fn gathered_a<T: Scalar>(&self, pool: &ScratchPool, src: &[T]) -> Result<GatheredValues<T>> {
        // This plan's, else another's buffers (a plan gone, most often: an
        // initial product's), whose memory is then not fresh, and so plans
        // gone do not pile their sets up in the pool.
        let mut kept = pool
            .take(|g: &GatheredValues<T>| g.plan == self.id)
            .or_else(|| pool.take(|_: &GatheredValues<T>| true))
            .unwrap_or(GatheredValues {
                plan: self.id,
                source: Vec::new(),
                values: Vec::new(),
            });
        let same = kept.plan == self.id
            && kept.values.len() == self.a.gathered_values_len()
            && kept.source.len() == src.len()
            && kept
                .source
                .iter()
                .zip(src)
                .all(|(&x, &y)| x == y && x.hash_bits() == y.hash_bits());
        if !same {
            kept.plan = self.id;
            self.a.values_of(src, &mut kept.values)?;
            kept.source.clear();
            crate::error::try_reserve(&mut kept.source, src.len(), "A's values kept")?;
            kept.source.extend_from_slice(src);
        }
        Ok(kept)
    }
}

/// The numbers of [`CpuPlan::id`].
static NEXT_PLAN_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A transposed A's values as a plan walks them (Pᵀ in the PETSc plug-in's
/// Pᵀ·(A·P)), kept in the context's scratch pool between numeric phases
/// with a copy of the caller's values they were gathered from
/// ([`CpuPlan::gathered_a`]): a numeric phase on the same values (P, in a
/// MAT_REUSE_MATRIX PtAP with A's new values) compares them instead of
/// gathering each through the transpose's permutation, and the gathered
/// values' memory is not fresh at every call. GAMG's smoothed prolongator
/// of the 7-point Poisson at 64³ on two ranks: the gather took 525 `perf`
/// samples a rank where the A·P kernel took 923, and 150 (all in the
/// symbolic phase) kept.
struct GatheredValues<T> {
    plan: u64,
    source: Vec<T>,
    values: Vec<T>,
}

impl<T: Scalar> Scratch for GatheredValues<T> {
    fn bytes(&self) -> usize {
        bytes_of(&self.source) + bytes_of(&self.values)
    }
}

/// C's split values with their offsets made zero-based and checked
/// against C's row offsets ([`split_offsets`]).
struct CheckedSplit<'a, T> {
    offsets: SplitOffsetBuffers,
    first: &'a mut [T],
    second: &'a mut [T],
}

/// The zero-based offsets of C's two blocks, kept in the context's scratch
/// pool between calls: a rank's `reuse_compute` then converts them into
/// memory it has touched before (two fresh arrays of a million entries
/// cost their page faults at every call).
struct SplitOffsetBuffers {
    first: Vec<usize>,
    second: Vec<usize>,
}

impl Scratch for SplitOffsetBuffers {
    fn bytes(&self) -> usize {
        bytes_of(&self.first) + bytes_of(&self.second)
    }
}

impl<T> CheckedSplit<'_, T> {
    /// The split as the back end takes it.
    fn rows(&mut self) -> SplitRows<'_, T> {
        SplitRows {
            first_offsets: &self.offsets.first,
            first: &mut *self.first,
            second_offsets: &self.offsets.second,
            second: &mut *self.second,
        }
    }

    /// Gives the offsets' memory back to `pool` for the next call.
    fn recycle(self, pool: &ScratchPool) {
        pool.give(self.offsets);
    }
}

/// Checks that `split` divides each row of C (zero-based row `offsets`)
/// exactly and stays within its arrays, and returns its offsets
/// zero-based, in buffers from `pool`.
///
/// # Errors
/// [`Error::InvalidValue`] when a block's offsets are not `nrows + 1`
/// long, decrease, fall below `base`, ask for more values than its array
/// holds, or the two parts of a row do not add up to the row's length;
/// the message names the first offending row or block.
/// [`Error::AllocFailed`] for the offsets.
fn split_offsets<'a, T, IC: Index>(
    pool: &ScratchPool,
    offsets: &[usize],
    split: SplitValues<'a, T, IC>,
    base: IndexBase,
) -> Result<CheckedSplit<'a, T>> {
    let SplitValues {
        first_offsets,
        first,
        second_offsets,
        second,
    } = split;
    let m = offsets.len() - 1;
    let mut kept = pool
        .take(|_: &SplitOffsetBuffers| true)
        .unwrap_or(SplitOffsetBuffers {
            first: Vec::new(),
            second: Vec::new(),
        });
    // One pass over the three offset arrays, without a branch an entry
    // (the flags folded; the offending row or block looked for only on a
    // failure): the plug-in's MPI route gives C's two blocks at every
    // numeric phase, and the checks with a test and a push an entry, then
    // the rows' lengths compared in a pass of their own, took 0.7 ms of
    // GAMG's A·P_tent at 64³ (262,144 rows; values 5.6 ms in one array).
    for (name, o) in [("first", first_offsets), ("second", second_offsets)] {
        if o.len() != m + 1 {
            return Err(Error::InvalidValue(format!(
                "the {name} block's row offsets of C have {} entries, not nrows + 1 = {}",
                o.len(),
                m + 1
            )));
        }
    }
    let shift = base.offset() as i64;
    for out in [&mut kept.first, &mut kept.second] {
        out.clear();
        crate::error::try_reserve(out, m + 1, "split row offsets")?;
        out.resize(m + 1, 0);
    }
    // Each block's offsets from the base up and not decreasing, and every
    // row's two parts holding its entries: C's offset less the two
    // blocks' the same at every row (the lengths telescope).
    let at_zero = offsets[0]
        .wrapping_sub((first_offsets[0].to_i64() - shift) as usize)
        .wrapping_sub((second_offsets[0].to_i64() - shift) as usize);
    let (mut previous, mut bad) = ((0i64, 0i64), false);
    let rows = kept.first.iter_mut().zip(kept.second.iter_mut());
    let given = first_offsets.iter().zip(second_offsets).zip(offsets);
    for ((f, s), ((&fo, &so), &o)) in rows.zip(given) {
        let (fo, so) = (fo.to_i64() - shift, so.to_i64() - shift);
        bad |= (fo < previous.0) | (so < previous.1);
        bad |= o.wrapping_sub(fo as usize).wrapping_sub(so as usize) != at_zero;
        previous = (fo, so);
        (*f, *s) = (fo as usize, so as usize);
    }
    if bad {
        return Err(bad_split(offsets, (first_offsets, second_offsets), shift));
    }
    for (name, last, len) in [
        ("first", kept.first[m], first.len()),
        ("second", kept.second[m], second.len()),
    ] {
        if last > len {
            return Err(Error::InvalidValue(format!(
                "the {name} block's last row offset of C asks for {last} values; its array holds {len}"
            )));
        }
    }
    Ok(CheckedSplit {
        offsets: kept,
        first,
        second,
    })
}

/// The error for C's two blocks' offsets ([`split_offsets`]) that fall
/// below the base, decrease, or do not add up to C's rows: the first
/// offending block offset or row, looked for once the check failed.
fn bad_split<IC: Index>(offsets: &[usize], (first, second): (&[IC], &[IC]), shift: i64) -> Error {
    for (name, o) in [("first", first), ("second", second)] {
        let below = |i: usize| o[i].to_i64() < if i == 0 { shift } else { o[i - 1].to_i64() };
        if let Some(i) = (0..o.len()).find(|&i| below(i)) {
            return Error::InvalidValue(format!(
                "the {name} block's row offset {i} of C is {} (below the index base or the offset before it)",
                o[i].to_i64()
            ));
        }
    }
    let part = |o: &[IC], i: usize| (o[i + 1].to_i64() - o[i].to_i64()) as usize;
    let m = offsets.len() - 1;
    let i = (0..m)
        .find(|&i| offsets[i + 1] - offsets[i] != part(first, i) + part(second, i))
        .unwrap_or(0);
    let (row, held) = (
        offsets[i + 1] - offsets[i],
        part(first, i) + part(second, i),
    );
    Error::InvalidValue(format!(
        "row {i} of C has {row} entries but its two blocks hold {held}"
    ))
}

/// Refuses matrices whose values a phase of `fill` would not read from, or
/// write into, their two arrays (`rusparseCsrSetSplitValues`): matB's
/// always, matA's and matC's except in `reuse_compute`, which reads and
/// writes them there. `reuse_copy` reads and writes no values, so it
/// ignores all three.
///
/// # Errors
/// [`Error::InvalidValue`] naming the matrix.
pub(crate) fn check_splits(
    (a, b, c): (&MatrixArrays, &MatrixArrays, &MatrixArrays),
    fill: Fill,
) -> Result<()> {
    if fill == Fill::Structure {
        return Ok(());
    }
    if c.split.is_some() && fill == Fill::All {
        invalid!(
            "matC's values are split between two arrays (rusparseCsrSetSplitValues), which only \
             rusparseSpGEMMreuse_compute writes"
        );
    }
    if b.split.is_some() {
        invalid!(
            "matB's values are split between two arrays (rusparseCsrSetSplitValues); only matA's \
             (read by rusparseSpGEMMreuse_compute) and matC's may be"
        );
    }
    if a.split.is_some() && fill == Fill::All {
        invalid!(
            "matA's values are split between two arrays (rusparseCsrSetSplitValues), which only \
             rusparseSpGEMMreuse_compute reads"
        );
    }
    Ok(())
}

/// A's two blocks of `rusparseCsrSetSplitValues` as A's values: the
/// offsets `rows + 1` long with `a`'s index base, each values array as
/// long as its last offset asks; every row checked first with
/// `check_rows` (RUSPARSE_PATTERN_CHECK_HASH), else as the product reads
/// it (the caller vouched for the patterns: a bad split is still an error,
/// but rows of C before it may be written).
///
/// # Safety
/// The pointers must be as that function's contract says, and the values
/// not written by anything else during `'a`.
unsafe fn input_split<'a, T: Scalar, I: Index, J: Index>(
    [fo, fv, so, sv]: [*mut c_void; 4],
    a: &CsrView<'a, T, I, J>,
    check_rows: bool,
) -> Result<SplitInput<'a, T, I>> {
    let block = |o: *mut c_void, v: *mut c_void, name: &str| -> Result<(&'a [I], &'a [T])> {
        let name = format!("matA {name}");
        let (offsets, len) = unsafe { block_offsets::<I>(o, a.nrows(), a.base(), &name) }?;
        let values = unsafe { slice_at::<T>(v, len, &format!("{name}Values")) }?;
        Ok((offsets, values))
    };
    let first = block(fo, fv, "first")?;
    let second = block(so, sv, "second")?;
    SplitInput::new(
        a.row_offsets(),
        first,
        second,
        (a.base().offset(), check_rows),
    )
}

/// One block's row offsets of `rusparseCsrSetSplitValues` (`rows + 1`
/// entries at `o`, with index base `base`) and the number of values its
/// last offset asks for. `name` names the block in messages.
///
/// # Safety
/// `o` must be as that function's contract says.
unsafe fn block_offsets<'a, IC: Index>(
    o: *mut c_void,
    rows: usize,
    base: IndexBase,
    name: &str,
) -> Result<(&'a [IC], usize)> {
    let offsets = unsafe { slice_at::<IC>(o, rows + 1, &format!("{name}RowOffsets")) }?;
    let last = offsets[rows].to_i64() - base.offset() as i64;
    match usize::try_from(last) {
        Ok(len) => Ok((offsets, len)),
        Err(_) => Err(Error::InvalidValue(format!(
            "{name}RowOffsets[{rows}] = {} is below the index base",
            offsets[rows].to_i64()
        ))),
    }
}

/// The two blocks of `rusparseCsrSetSplitValues` (`[first offsets, first
/// values, second offsets, second values]`) as slices: the offsets
/// `rows + 1` long, each values array as long as its last offset asks.
///
/// # Safety
/// The pointers must be as that function's contract says, and not
/// accessed by anything else during `'a`.
unsafe fn split_arrays<'a, T: Scalar, IC: Index>(
    [fo, fv, so, sv]: [*mut c_void; 4],
    rows: usize,
    base: IndexBase,
) -> Result<SplitValues<'a, T, IC>> {
    let block = |o: *mut c_void, v: *mut c_void, name: &str| -> Result<(&'a [IC], &'a mut [T])> {
        let (offsets, len) = unsafe { block_offsets::<IC>(o, rows, base, name) }?;
        let values = unsafe { slice_at_mut::<T>(v, len, &format!("{name}Values")) }?;
        Ok((offsets, values))
    };
    let (first_offsets, first) = block(fo, fv, "first")?;
    let (second_offsets, second) = block(so, sv, "second")?;
    Ok(SplitValues {
        first_offsets,
        first,
        second_offsets,
        second,
    })
}

/// Fingerprints of A's and B's patterns.
type PatternPrints = (u64, u64);

/// Views of A and B.
type Operands<'m, T, I, J> = (CsrView<'m, T, I, J>, CsrView<'m, T, I, J>);

/// Views of A's and B's host arrays, their structure checked completely
/// (offsets, column ranges) in `ctx`'s thread pool.
///
/// # Safety
/// The arrays hold the sizes they state.
pub(crate) unsafe fn validated_views<'m, T: Scalar, I: Index, J: Index>(
    ctx: &Context,
    a: &'m MatrixArrays,
    b: &'m MatrixArrays,
) -> Result<Operands<'m, T, I, J>> {
    scanned_views(ctx, a, b, false).map(|(views, _)| views)
}

/// [`validated_views`]; with `fingerprint`, also A's and B's pattern
/// fingerprints, made in the same pass as the checks (once when A and B are
/// the same arrays).
unsafe fn scanned_views<'m, T: Scalar, I: Index, J: Index>(
    ctx: &Context,
    a: &'m MatrixArrays,
    b: &'m MatrixArrays,
    fingerprint: bool,
) -> Result<(Operands<'m, T, I, J>, PatternPrints)> {
    // SAFETY: by the caller's contract. Values are not read before the
    // numeric phase.
    let a = unsafe { a.view::<T, I, J>("matA", false) }?;
    let b = unsafe { b.view::<T, I, J>("matB", false) }?;
    let scan = |m: &CsrView<'m, T, I, J>, name: &str| {
        let (rows, cols) = (m.nrows(), m.ncols());
        let (offsets, indices) = (m.row_offsets(), m.col_indices());
        if fingerprint {
            validate_and_fingerprint(rows, cols, offsets, indices, m.base())
        } else {
            validate_structure(rows, cols, offsets, indices, m.base()).map(|()| 0)
        }
        .map_err(|e| e.context(name))
    };
    let prints = ctx.run(|| {
        let fa = scan(&a, "matA")?;
        let fb = if same_pattern_arrays(&a, &b) && a.base() == b.base() {
            fa
        } else {
            scan(&b, "matB")?
        };
        Ok::<(u64, u64), Error>((fa, fb))
    })?;
    Ok(((a, b), prints))
}

/// Reads a scalar argument of type `T`.
pub(crate) fn read_scalar<T: Scalar>(p: *const c_void, name: &str) -> Result<T> {
    if p.is_null() {
        return Err(Error::InvalidValue(format!("{name} is NULL")));
    }
    // SAFETY: non-NULL and, per the API, points to one value of the compute type.
    Ok(unsafe { p.cast::<T>().read_unaligned() })
}

impl<I: Index, J: Index> CpuPlan<I, J> {
    /// Work estimation over arrays by pointer: validates A and B fully
    /// (offsets, column ranges) while fingerprinting their patterns, plans
    /// the product, and refuses a C that cannot fit `c`'s row offsets
    /// from the lower bound of nnz(C), before the symbolic phase counts
    /// every product.
    ///
    /// # Safety
    /// The arrays hold the sizes they state.
    pub(crate) unsafe fn from_arrays<T: Scalar>(
        ctx: &Context,
        (operation, check): (Operation, PatternCheck),
        (a, b): (&MatrixArrays, &MatrixArrays),
        c: &MatrixArrays,
    ) -> Result<Self> {
        // A caller that vouches for the patterns from work estimation on
        // is spared their fingerprints (about a third of the validation
        // pass).
        let hashed = check == PatternCheck::Hash;
        let ((a, b), prints) = unsafe { scanned_views::<T, I, J>(ctx, a, b, hashed) }?;
        let plan = CpuPlan::with_fingerprints(
            ctx,
            (&a, operation.op_a),
            (&b, operation.op_b),
            operation.algorithm,
            hashed.then_some(prints),
        )?;
        check_nnz_fits(plan.nnz_lower_bound(), c.base, c.offset_type, "at least ")?;
        Ok(plan)
    }

    unsafe fn symbolic_arrays<T: Scalar>(
        &mut self,
        ctx: &Context,
        (a, b): (&MatrixArrays, &MatrixArrays),
    ) -> Result<usize> {
        // SAFETY: by the caller's contract; the plan checks the shapes and
        // nnz. The symbolic phase reads values only to keep BRMerge-Upper's
        // temporary C, which it skips when they are NULL.
        let a = unsafe { a.view::<T, I, J>("matA", false) }?;
        let b = unsafe { b.view::<T, I, J>("matB", false) }?;
        CpuPlan::symbolic(self, ctx, &a, &b)
    }

    unsafe fn numeric_arrays<T: Scalar, IC: Index>(
        &mut self,
        ctx: &Context,
        (a, b, c): (&MatrixArrays, &MatrixArrays, &MatrixArrays),
        job: &NumericJob,
    ) -> Result<u64> {
        self.pattern_check = job.pattern_check;
        let (alpha, beta) = if job.fill == Fill::Structure {
            (T::one(), T::zero())
        } else {
            (
                read_scalar::<T>(job.alpha, "alpha")?,
                read_scalar::<T>(job.beta, "beta")?,
            )
        };
        // SAFETY: by the caller's contract. `reuse_copy` reads no values
        // unless it writes C's values too (`structure_values`).
        let with_values = job.fill == Fill::Structure && job.structure_values;
        let values = job.fill != Fill::Structure || with_values;
        check_splits((a, b, c), if with_values { Fill::Values } else { job.fill })?;
        let a_split = a.split.filter(|_| values);
        let a = unsafe { a.view::<T, I, J>("matA", values && a_split.is_none()) }?;
        let b = unsafe { b.view::<T, I, J>("matB", values) }?;
        let (rows, nnz) = (c.nrows(), c.nnz_usize());
        // SAFETY: C's arrays were set by the caller for nnz(C) entries and
        // are not accessed by anything else during the call.
        let offsets = unsafe { slice_at_mut::<IC>(c.offsets, rows + 1, "matC rowOffsets") }?;
        let cols = unsafe { slice_at_mut::<J>(c.col_ind, nnz, "matC colInd") }?;
        // In the context's pool, as every other phase of the product: the
        // thread count the caller set holds for the checks as well.
        let ncols = c.ncols();
        let fingerprint = |o: &[IC], k: &[J]| ctx.run(|| pattern_fingerprint(rows, ncols, o, k));
        match job.fill {
            Fill::All => {
                let values = unsafe { slice_at_mut::<T>(c.values, nnz, "matC values") }?;
                let out = CsrOutput::full(&mut *offsets, &mut *cols, values, c.base)
                    .with_column_order(job.column_order);
                CpuPlan::numeric(self, ctx, &a, &b, alpha, beta, out)?;
                // C is written: BRMerge-Upper's temporary C goes to the
                // handle's scratch for its next product (a second copy
                // computes the values again).
                self.recycle::<T>(ctx);
                Ok(0)
            }
            Fill::Structure | Fill::Values => {
                let c_print = if job.fill == Fill::Structure {
                    self.write_structure(ctx, &a, &b, offsets, cols, c.base)?;
                    let print = fingerprint(offsets, cols);
                    if !with_values {
                        return Ok(print);
                    }
                    Some(print)
                } else {
                    // The caller may vouch for C's structure as for A's and
                    // B's; `reuse_copy` must have written it either way.
                    let unchanged = match job.pattern_check {
                        PatternCheck::Hash => Some(fingerprint(offsets, cols)) == job.c_fingerprint,
                        PatternCheck::Caller => job.c_fingerprint.is_some(),
                    };
                    if !unchanged {
                        return Err(Error::InvalidValue(
                            "matC's row offsets or column indices changed since rusparseSpGEMMreuse_copy wrote them".into(),
                        ));
                    }
                    job.c_fingerprint
                };
                let out = match c.split {
                    // SAFETY: by the contract of rusparseCsrSetSplitValues.
                    Some(split) => unsafe { split_arrays::<T, IC>(split, rows, c.base) }
                        .map(|s| CsrOutput::split_values_on_pattern(s, cols, c.base))?,
                    None => {
                        let values = unsafe { slice_at_mut::<T>(c.values, nnz, "matC values") }?;
                        CsrOutput::<T, IC, J>::values_on_pattern(values, cols, c.base)
                    }
                };
                let check_rows = job.pattern_check == PatternCheck::Hash;
                let a_split = match a_split {
                    // SAFETY: by the contract of rusparseCsrSetSplitValues.
                    Some(split) => Some(unsafe { input_split::<T, I, J>(split, &a, check_rows) }?),
                    None => None,
                };
                // Right after the structure, values listed without a hash
                // are current (`rusparseSpGEMM_setReuseCopyValues`).
                let checked = (Some(c_print), with_values);
                self.numeric_with(ctx, (&a, &b), (alpha, beta), out, checked, a_split)?;
                Ok(c_print.unwrap_or_default())
            }
        }
    }

    unsafe fn numeric_of<T: Scalar>(
        &mut self,
        ctx: &Context,
        arrays: (&MatrixArrays, &MatrixArrays, &MatrixArrays),
        job: &NumericJob,
    ) -> Result<u64> {
        match arrays.2.offset_type {
            IndexType::I32 => unsafe { self.numeric_arrays::<T, i32>(ctx, arrays, job) },
            IndexType::I64 => unsafe { self.numeric_arrays::<T, i64>(ctx, arrays, job) },
        }
    }
}

impl<I: Index, J: Index> Backend for CpuPlan<I, J> {
    unsafe fn symbolic(
        &mut self,
        ctx: &Context,
        _stream: *mut c_void,
        arrays: (&MatrixArrays, &MatrixArrays),
        _c_offsets: IndexType,
    ) -> Result<usize> {
        with_value_type!(arrays.0.value_type, T => unsafe {
            self.symbolic_arrays::<T>(ctx, arrays)
        })
    }

    unsafe fn numeric(
        &mut self,
        ctx: &Context,
        _stream: *mut c_void,
        arrays: (&MatrixArrays, &MatrixArrays, &MatrixArrays),
        job: &NumericJob,
    ) -> Result<u64> {
        with_value_type!(arrays.0.value_type, T => unsafe {
            self.numeric_of::<T>(ctx, arrays, job)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CsrMatrix, Error, SpgemmPlan};

    fn one_by_one() -> CsrMatrix<f64, i64, i32> {
        CsrMatrix::from_triplets(1, 1, &[(0, 0, 2.0)], IndexBase::Zero).unwrap()
    }

    #[test]
    fn nnz_that_does_not_fit_the_offset_type_is_refused() {
        let ctx = Context::cpu().unwrap();
        let a = one_by_one();
        let mut plan =
            CpuPlan::new(&ctx, &a.view(), Op::N, &a.view(), Op::N, Algorithm::Default).unwrap();
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

    /// A (2000 rows) and B (1002 x 100,000) whose product has empty rows,
    /// rows of one entry of A (B's row copied), rows of A repeating the
    /// row before, rows of three products, and two rows of C with every
    /// column, longer than a block of kept columns.
    fn listing_operands() -> (CsrMatrix<f64, i64, i32>, CsrMatrix<f64, i64, i32>) {
        let n = 100_000usize;
        assert!(n > LISTED_BLOCK_ENTRIES);
        let mut tb = Vec::new();
        for c in 0..n {
            tb.push(((c % 2) as i32, c as i32, 1.0 + (c % 5) as f64));
        }
        for r in 2..1002usize {
            for c in [(r * 37) % n, (r * 37 + 1) % n, (r * 91 + 5) % n] {
                tb.push((r as i32, c as i32, r as f64));
            }
        }
        let mut ta = Vec::new();
        for i in 0..2000usize {
            let g = i / 7;
            let cols: Vec<usize> = match i % 7 {
                0 => vec![],
                1 => vec![2 + i % 1000],
                // Rows 2 and 3: every column; row 3 repeats row 2 and
                // starts a new block.
                2 | 3 if i % 500 == i % 7 => vec![0, 1],
                3 | 4 => vec![2 + g % 500, 503 + g % 400, 1001],
                _ => vec![
                    2 + (i * 13) % 333,
                    400 + (i * 17) % 300,
                    800 + (i * 29) % 200,
                ],
            };
            for c in cols {
                ta.push((i as i32, c as i32, 1.0 + (i % 3) as f64));
            }
        }
        let to = |t: Vec<(i32, i32, f64)>| -> Vec<(usize, usize, f64)> {
            t.into_iter()
                .map(|(r, c, v)| (r as usize, c as usize, v))
                .collect()
        };
        (
            CsrMatrix::from_triplets(2000, 1002, &to(ta), IndexBase::Zero).unwrap(),
            CsrMatrix::from_triplets(1002, n, &to(tb), IndexBase::Zero).unwrap(),
        )
    }

    /// One-based offsets of two arrays that split each row of C (zero-based
    /// row offsets `ro`) at its own point, `(i * 5 + 1) % (len + 1)`, and
    /// the two arrays, filled with `fill`.
    fn split_rows(ro: &[usize], fill: f64) -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<f64>) {
        split_rows_at(ro, fill, |i, len| (i * 5 + 1) % (len + 1))
    }

    /// [`split_rows`] with row `i` (of `len` entries) cut at `cut(i, len)`.
    fn split_rows_at(
        ro: &[usize],
        fill: f64,
        cut: impl Fn(usize, usize) -> usize,
    ) -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<f64>) {
        let m = ro.len() - 1;
        let (mut fo, mut so) = (vec![1i64], vec![1i64]);
        for i in 0..m {
            let len = ro[i + 1] - ro[i];
            let cut = cut(i, len).min(len);
            fo.push(fo[i] + cut as i64);
            so.push(so[i] + (len - cut) as i64);
        }
        let (nf, ns) = (fo[m] as usize - 1, so[m] as usize - 1);
        (fo, so, vec![fill; nf], vec![fill; ns])
    }

    /// C's values read back, row by row, from the two arrays of
    /// [`split_rows`].
    fn join_rows((fo, so): (&[i64], &[i64]), (first, second): (&[f64], &[f64])) -> Vec<f64> {
        let part = |o: &[i64], i: usize| o[i] as usize - 1..o[i + 1] as usize - 1;
        (0..fo.len() - 1)
            .flat_map(|i| {
                first[part(fo, i)]
                    .iter()
                    .chain(&second[part(so, i)])
                    .copied()
            })
            .collect()
    }

    /// A plan made without fingerprints (the C ABI's, where the caller
    /// vouched for the patterns from work estimation on) and asked to hash
    /// later has no planned patterns to compare with: the values on C's
    /// known structure are then counted column by column, so that a moved
    /// column of A gives an error or its exact product, never the planned
    /// product's values; new values are multiplied, not taken from the
    /// symbolic phase's listing.
    #[test]
    fn a_plan_without_fingerprints_counts_products_when_asked_to_hash() {
        let ctx = Context::cpu().unwrap();
        let t = |rows: &[&[(usize, f64)]], ncols| {
            let triplets: Vec<(usize, usize, f64)> = rows
                .iter()
                .enumerate()
                .flat_map(|(i, r)| r.iter().map(move |&(c, v)| (i, c, v)))
                .collect();
            CsrMatrix::<f64, i64, i32>::from_triplets(rows.len(), ncols, &triplets, IndexBase::Zero)
                .unwrap()
        };
        let a = t(
            &[
                &[(0, 1.0), (2, 2.0)],
                &[(1, 3.0)],
                &[],
                &[(3, 1.0), (4, -1.0)],
            ],
            5,
        );
        let b = t(
            &[
                &[(0, 1.0), (1, 2.0)],
                &[(1, 1.0)],
                &[(2, 5.0)],
                &[(3, 1.0)],
                &[(0, 2.0)],
            ],
            4,
        );
        let (av, bv) = (a.view(), b.view());
        let mut plan =
            CpuPlan::with_fingerprints(&ctx, (&av, Op::N), (&bv, Op::N), Algorithm::Dense, None)
                .unwrap();
        plan.expect_structure_first();
        let nnz = plan.symbolic(&ctx, &av, &bv).unwrap();
        let (_, cols) = written_structure(&plan, &ctx, (&a, &b), nnz, IndexBase::Zero).unwrap();
        let values_on = |x: &CsrView<'_, f64, i64, i32>| {
            let mut v = vec![f64::NAN; nnz];
            let out = CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, &cols, IndexBase::Zero);
            plan.numeric(&ctx, x, &bv, 1.0, 0.0, out).map(|_| v)
        };
        let product = |x: &CsrView<'_, f64, i64, i32>| {
            crate::reference::spgemm(x, Op::N, &bv, Op::N, 1.0).unwrap()
        };
        // New values of A, same pattern: multiplied.
        let doubled: Vec<f64> = a.values().iter().map(|x| 2.0 * x).collect();
        let (offsets, columns) = (a.row_offsets(), a.col_indices());
        let a2 = CsrView::try_new(4, 5, offsets, columns, &doubled, IndexBase::Zero).unwrap();
        assert_eq!(values_on(&a2).unwrap(), product(&a2).values());
        // Row 3's column 4 moved to column 0: the row's products reach
        // C's columns 0 and 3 as planned, and one more, 1, outside it.
        let mut moved_cols = columns.to_vec();
        moved_cols[4] = 0;
        let moved =
            CsrView::try_new(4, 5, offsets, &moved_cols, a.values(), IndexBase::Zero).unwrap();
        let want = product(&moved);
        assert_ne!(
            want.col_indices(),
            &cols[..],
            "test bug: the move kept C's structure"
        );
        match values_on(&moved) {
            Err(e) => assert!(matches!(e, Error::InvalidValue(_)), "{e}"),
            Ok(v) => panic!("the moved column gave values {v:?}, not its product {want:?}"),
        }
        // The planned pattern again: its product.
        assert_eq!(values_on(&av).unwrap(), product(&av).values());
    }

    /// C's structure as `plan.write_structure` writes it with `base`, read
    /// back zero-based; `cols` entries long (an error when that is not nnz).
    fn written_structure(
        plan: &CpuPlan<i64, i32>,
        ctx: &Context,
        (a, b): (&CsrMatrix<f64, i64, i32>, &CsrMatrix<f64, i64, i32>),
        cols: usize,
        base: IndexBase,
    ) -> Result<(Vec<i64>, Vec<i32>)> {
        let mut ro = vec![-1i64; a.nrows() + 1];
        let mut c = vec![-1i32; cols];
        plan.write_structure(ctx, &a.view(), &b.view(), &mut ro, &mut c, base)?;
        let k = base.offset();
        Ok((
            ro.iter().map(|v| v - k as i64).collect(),
            c.iter().map(|v| v - k as i32).collect(),
        ))
    }

    #[test]
    fn kept_columns_give_the_structure_across_blocks_and_once() {
        let (a, b) = listing_operands();
        let want = crate::reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
        for threads in [1, 2, 3] {
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            let mut plan =
                CpuPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Dense).unwrap();
            let plain_bound = plan.peak_memory_bound();
            plan.expect_structure_first();
            assert!(plan.list_in_symbolic);
            assert!(plan.peak_memory_bound() >= plain_bound + 4 * 4 * plan.work.total());
            let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
            assert_eq!(nnz, want.nnz());
            assert!(plan.listed.0.lock().unwrap().is_some());
            for round in 0..2 {
                let (ro, cols) =
                    written_structure(&plan, &ctx, (&a, &b), nnz, IndexBase::One).unwrap();
                // The first call took the kept columns; the second listed them.
                assert!(plan.listed.0.lock().unwrap().is_none(), "round {round}");
                let at = format!("threads {threads}, round {round}");
                assert_eq!(&ro[..], want.row_offsets(), "{at}");
                assert_eq!(&cols[..], want.col_indices(), "{at}");
            }
        }
    }

    /// A times an aggregation (op(B) with a third as many columns as rows,
    /// one entry a row or none, as GAMG's tentative prolongator), the
    /// products the dense accumulator adds without a branch on new
    /// columns: listed with values, counted, written and multiplied as the
    /// reference does, on 1 to 3 threads, and the listing as the numeric
    /// phase bit for bit. Also with exactly one entry in every row of
    /// op(B), which the listing reads without op(B)'s offsets.
    #[test]
    fn aggregations_are_multiplied_as_the_reference() {
        for every_row in [false, true] {
            multiplies_an_aggregation(every_row);
        }
    }

    /// [`aggregations_are_multiplied_as_the_reference`], with an entry in
    /// every row of op(B) or not.
    fn multiplies_an_aggregation(every_row: bool) {
        let (n, m) = (3000usize, 2500usize);
        let mut tb = Vec::new();
        for r in (0..n).filter(|r| every_row || r % 11 != 4) {
            tb.push((r, r / 3, 1.0 + (r % 5) as f64));
        }
        let mut ta = Vec::new();
        for i in 0..m {
            // 14 entries (rows of more products than `small_row` takes),
            // or 6 in every third row (rows it takes).
            let entries = if i % 3 == 1 { 6 } else { 14 };
            for d in [0usize, 1, 2, 3, 4, 5, 61, 62, 63, 64, 997, 998, 1500, 1501][..entries].iter()
            {
                ta.push((i, (i * 7 + d * (1 + i % 3)) % n, 0.5 + ((i + d) % 4) as f64));
            }
        }
        let a = CsrMatrix::from_triplets(m, n, &ta, IndexBase::Zero).unwrap();
        let b = CsrMatrix::from_triplets(n, n / 3, &tb, IndexBase::Zero).unwrap();
        let want = crate::reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
        for threads in [1, 2, 3] {
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            for keep in [false, true] {
                let mut plan =
                    CpuPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Dense)
                        .unwrap();
                if keep {
                    plan.expect_structure_first();
                }
                let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
                assert_eq!(nnz, want.nnz());
                let (ro, cols) =
                    written_structure(&plan, &ctx, (&a, &b), nnz, IndexBase::Zero).unwrap();
                assert_eq!(&ro[..], want.row_offsets(), "{threads} threads");
                assert_eq!(&cols[..], want.col_indices(), "{threads} threads");
                let mut v = vec![0.0; nnz];
                let out = CsrOutput::<f64, i64, i32>::values_only(&mut v, IndexBase::Zero);
                plan.numeric(&ctx, &a.view(), &b.view(), 1.0, 0.0, out)
                    .unwrap();
                let close = v
                    .iter()
                    .zip(want.values())
                    .all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs()));
                assert!(close, "{threads} threads, listed {keep}");
            }
        }
        listed_values_serve_the_first_numeric_phase(&a, &b);
    }

    /// After `expect_values_with_structure` the listed values are kept
    /// unhashed; the phase right after the structure (`rusparseSpGEMM_setReuseCopyValues`)
    /// copies them bit for bit, and any other numeric phase multiplies.
    #[test]
    fn values_listed_for_the_structure_are_kept_unhashed() {
        let (a, b) = listing_operands();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let ctx = Context::cpu().unwrap();
        let plan_for = || {
            let mut plan =
                CpuPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Dense).unwrap();
            plan.expect_structure_first();
            plan.expect_values_with_structure();
            let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
            let kept = plan
                .listed_values
                .lock()
                .unwrap()
                .as_ref()
                .map(|k| k.values);
            assert_eq!(kept, Some(None), "listed, not hashed");
            let (_, cols) = written_structure(&plan, &ctx, (&a, &b), nnz, IndexBase::Zero).unwrap();
            let print = plan
                .remember_written(&ctx, Some((&cols, IndexBase::Zero)))
                .unwrap();
            (plan, cols, print)
        };
        let want = crate::reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
        // Copied by the phase right after the structure.
        let (plan, cols, print) = plan_for();
        let mut v = vec![7.0; cols.len()];
        let out = CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, &cols, IndexBase::Zero);
        plan.values_after_structure(&ctx, (&a.view(), &b.view()), out, print)
            .unwrap();
        assert!(plan.listed_values.lock().unwrap().is_none());
        let mut again = vec![7.0; cols.len()];
        let out = CsrOutput::<f64, i64, i32>::values_on_pattern(&mut again, &cols, IndexBase::Zero);
        plan.numeric(&ctx, &a.view(), &b.view(), 1.0, 0.0, out)
            .unwrap();
        assert_eq!(bits(&v), bits(&again));
        assert_eq!(cols, want.col_indices());
        // Another numeric phase first: A's values changed, multiplied.
        let (plan, cols, _) = plan_for();
        let other: Vec<f64> = a.values().iter().map(|v| 0.5 - v).collect();
        let changed = with_values(&a, &other);
        let mut v = vec![7.0; cols.len()];
        let out = CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, &cols, IndexBase::Zero);
        plan.numeric(&ctx, &changed, &b.view(), 1.0, 0.0, out)
            .unwrap();
        assert!(plan.listed_values.lock().unwrap().is_none());
        let want_changed =
            crate::reference::spgemm(&changed, Op::N, &b.view(), Op::N, 1.0).unwrap();
        let close = v
            .iter()
            .zip(want_changed.values())
            .all(|(x, y)| (x - y).abs() <= 1e-9 * (1.0 + y.abs()));
        assert!(close, "the changed values were multiplied");
    }

    /// The reuse flow's symbolic phase also sums C's values when A and B
    /// have values, and the numeric phase after the structure copies them
    /// (α and β applied, one array or split between two) only while A's
    /// and B's values are those: the values are those of the numeric
    /// phase bit for bit, they serve one numeric phase, and values changed
    /// in between are multiplied, not the listed ones copied.
    #[test]
    fn listed_values_serve_the_first_numeric_phase_while_current() {
        let (a, b) = listing_operands();
        listed_values_serve_the_first_numeric_phase(&a, &b);
    }

    /// As [`listed_values_serve_the_first_numeric_phase_while_current`], on
    /// rows of C of up to ten products (those of 5 to 8 through the
    /// listing's and the numeric phase's `small_row`),
    /// their columns in no order and repeated across rows of B, with
    /// signed zeros and sums that round differently in another order; and
    /// rows of more products beside them.
    #[test]
    fn listed_small_rows_are_the_numeric_phases_bit_for_bit() {
        let (m, k, n) = (3000usize, 700usize, 90usize);
        let mut tb = Vec::new();
        for r in 0..k {
            // One or two columns a row, far apart or not, at most 3 apart
            // between neighbouring rows.
            tb.push((r, (r * 53) % n, 0.1 + 0.07 * (r % 13) as f64));
            if r % 3 != 0 {
                tb.push((
                    r,
                    (r * 53 + 7 + r % 4) % n,
                    if r % 11 == 0 {
                        -0.0
                    } else {
                        -1.3e-3 * r as f64
                    },
                ));
            }
        }
        let mut ta = Vec::new();
        for i in 0..m {
            let entries = match i % 9 {
                0 => 0,
                8 => 7,
                e => e.min(5),
            };
            for e in 0..entries {
                let c = (i * 31 + e * 97 + (e * e) % 5) % k;
                let v = if (i + e) % 17 == 0 {
                    -0.0
                } else {
                    1.0e8 * (1 + e) as f64 - 0.3 * i as f64
                };
                ta.push((i, c, v));
            }
        }
        let mut seen = std::collections::HashSet::new();
        ta.retain(|&(i, c, _)| seen.insert((i, c)));
        let a = CsrMatrix::from_triplets(m, k, &ta, IndexBase::Zero).unwrap();
        let b = CsrMatrix::from_triplets(k, n, &tb, IndexBase::Zero).unwrap();
        listed_values_serve_the_first_numeric_phase(&a, &b);
    }

    /// `a`'s pattern with the values `values`.
    fn with_values<'a>(
        a: &'a CsrMatrix<f64, i64, i32>,
        values: &'a [f64],
    ) -> CsrView<'a, f64, i64, i32> {
        CsrView::try_new(
            a.nrows(),
            a.ncols(),
            a.row_offsets(),
            a.col_indices(),
            values,
            IndexBase::Zero,
        )
        .unwrap()
    }

    fn listed_values_serve_the_first_numeric_phase(
        a: &CsrMatrix<f64, i64, i32>,
        b: &CsrMatrix<f64, i64, i32>,
    ) {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // A's values changed, same pattern.
        let other: Vec<f64> = a.values().iter().map(|v| 0.5 - v).collect();
        let changed = with_values(a, &other);
        for threads in [1, 2, 3] {
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            let plan_for = |keep: bool| {
                let mut plan =
                    CpuPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Dense)
                        .unwrap();
                if keep {
                    plan.expect_structure_first();
                }
                let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
                assert_eq!(plan.listed_values.lock().unwrap().is_some(), keep);
                let (_, cols) =
                    written_structure(&plan, &ctx, (a, b), nnz, IndexBase::One).unwrap();
                let cols: Vec<i32> = cols.iter().map(|c| c + 1).collect();
                // As the Rust API's `write_structure` does: a values-only
                // output on these columns is then C's known structure.
                plan.remember_written(&ctx, Some((&cols, IndexBase::One)));
                (plan, cols)
            };
            // C = 2·A·B + 0.5·C on C's known structure, from A's values `av`.
            let values =
                |plan: &CpuPlan<i64, i32>, cols: &[i32], av: &CsrView<'_, f64, i64, i32>| {
                    let mut v = vec![3.0; cols.len()];
                    let out =
                        CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, cols, IndexBase::One);
                    plan.numeric(&ctx, av, &b.view(), 2.0, 0.5, out).unwrap();
                    v
                };
            let at = format!("{threads} threads");
            let (plain, cols) = plan_for(false);
            let want = values(&plain, &cols, &a.view());
            let want_changed = values(&plain, &cols, &changed);
            let (kept, kept_cols) = plan_for(true);
            assert_eq!(kept_cols, cols, "{at}");
            assert_eq!(bits(&values(&kept, &cols, &a.view())), bits(&want), "{at}");
            assert!(kept.listed_values.lock().unwrap().is_none(), "{at}");
            // Computed again, from the values given.
            assert_eq!(
                bits(&values(&kept, &cols, &changed)),
                bits(&want_changed),
                "{at}"
            );
            assert_eq!(bits(&values(&kept, &cols, &a.view())), bits(&want), "{at}");
            // A's values changed between the symbolic and numeric phases.
            let (kept, _) = plan_for(true);
            assert_eq!(
                bits(&values(&kept, &cols, &changed)),
                bits(&want_changed),
                "{at}"
            );
            assert!(kept.listed_values.lock().unwrap().is_none(), "{at}");

            // Split between two arrays, each row at its own point.
            let (kept, _) = plan_for(true);
            let (fo, so, mut first, mut second) = split_rows(plain.offsets().unwrap(), 3.0);
            let split = SplitValues {
                first_offsets: &fo,
                first: &mut first,
                second_offsets: &so,
                second: &mut second,
            };
            let out =
                CsrOutput::<f64, i64, i32>::split_values_on_pattern(split, &cols, IndexBase::One);
            kept.numeric(&ctx, &a.view(), &b.view(), 2.0, 0.5, out)
                .unwrap();
            assert!(kept.listed_values.lock().unwrap().is_none(), "{at}");
            let joined = join_rows((&fo, &so), (&first, &second));
            assert_eq!(bits(&joined), bits(&want), "{at}");
        }
    }

    /// A's arrays: a band of nine entries a row, three columns apart and
    /// wrapping around (A·A: 81 products into 17 entries a row, enough for
    /// a replay through a row buffer), with values whose sums round
    /// differently in another order; with `long_row`, row 5 has 300
    /// entries and its row of A·A more than 256 (two-byte positions).
    /// Each row's columns stored in descending order (unsorted input).
    fn position_operand(long_row: bool) -> (Vec<i64>, Vec<i32>, Vec<f64>) {
        let n = 3000usize;
        let (mut ro, mut cols, mut vals) = (vec![0i64], Vec::new(), Vec::new());
        for i in 0..n {
            let row: Vec<usize> = if long_row && i == 5 {
                (0..300).map(|k| k * 10).collect()
            } else {
                let mut r: Vec<usize> = (0..9).map(|k| (i + k * 3) % n).collect();
                r.sort_unstable();
                r
            };
            for &j in row.iter().rev() {
                cols.push(j as i32);
                vals.push(0.1 + 0.07 * ((i * 5 + j) % 13) as f64);
            }
            ro.push(cols.len() as i64);
        }
        (ro, cols, vals)
    }

    /// Pᵀ·X with P an aggregation (3000 rows into 300 aggregates of 10
    /// consecutive rows, one entry a row) and X a band of 2 to 4 entries a
    /// row: op(A) transposed, rows of C of 11 to 15 columns. Where AVX-512
    /// sums f64 rows in registers, the first numeric phase on the structure
    /// finds and keeps the lane masks (`lanes.rs`, 8 bytes an entry of
    /// op(A)) and every phase after it sums from them; elsewhere none are
    /// kept. Either way the values are a plain plan's bit for bit, for new
    /// values of X, scaled, and on 1 and 3 threads.
    #[test]
    fn lane_masks_of_a_transposed_product_sum_as_a_plain_plan() {
        let n = 3000usize;
        let p_off: Vec<i64> = (0..=n as i64).collect();
        let p_cols: Vec<i32> = (0..n).map(|i| (i / 10) as i32).collect();
        let p_vals: Vec<f64> = (0..n).map(|i| 0.5 + 0.01 * (i % 17) as f64).collect();
        let (mut x_off, mut x_cols, mut x_vals) = (vec![0i64], Vec::new(), Vec::new());
        for i in 0..n {
            for j in i.saturating_sub(1)..(i + 2 + i % 2).min(n) {
                x_cols.push(j as i32);
                x_vals.push(1.0 / (1 + (i * 7 + j) % 11) as f64 - 0.3);
            }
            x_off.push(x_cols.len() as i64);
        }
        let other: Vec<f64> = x_vals.iter().map(|v| 0.7 - v).collect();
        let p = CsrView::try_new(n, 300, &p_off, &p_cols, &p_vals, IndexBase::Zero).unwrap();
        fn x_of<'v>(
            (off, cols): (&'v [i64], &'v [i32]),
            v: &'v [f64],
        ) -> CsrView<'v, f64, i64, i32> {
            CsrView::try_new(3000, 3000, off, cols, v, IndexBase::Zero).unwrap()
        }
        let parts = (&x_off[..], &x_cols[..]);
        let x = x_of(parts, &x_vals);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let in_registers = crate::backend::cpu::lanes_in_registers::<f64>();
        // Also with the masks kept where AVX-512 is missing (walked in
        // scalar code), so that the plan's course with them runs on every
        // machine.
        for (threads, anywhere) in [(1, false), (3, false), (1, true), (3, true)] {
            let masks_kept = in_registers || anywhere;
            let at =
                format!("{threads} threads, registers {in_registers}, masks anywhere {anywhere}");
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            let plan_for = |keep: bool| {
                let mut plan = CpuPlan::new(&ctx, &p, Op::T, &x, Op::N, Algorithm::Dense).unwrap();
                plan.lanes_anywhere = anywhere;
                if keep {
                    plan.expect_structure_first();
                    assert!(plan.record_positions, "{at}");
                }
                let nnz = plan.symbolic(&ctx, &p, &x).unwrap();
                let mut c = vec![0i64; 301];
                let mut cols = vec![0i32; nnz];
                plan.write_structure(&ctx, &p, &x, &mut c, &mut cols, IndexBase::Zero)
                    .unwrap();
                plan.remember_written(&ctx, Some((&cols, IndexBase::Zero)));
                (plan, c, cols)
            };
            let values = |plan: &CpuPlan<i64, i32>, cols: &[i32], xv: &[f64], ab: (f64, f64)| {
                let mut v = vec![3.0; cols.len()];
                let out =
                    CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, cols, IndexBase::Zero);
                plan.numeric(&ctx, &p, &x_of(parts, xv), ab.0, ab.1, out)
                    .unwrap();
                v
            };
            let lanes_kept = |plan: &CpuPlan<i64, i32>| match &*plan.positions.lock().unwrap() {
                Positions::Kept(k) if k.lanes() => {
                    Some(k.chunks.iter().map(ChunkPositions::bytes).sum())
                }
                _ => None::<usize>,
            };
            let (plain, c, cols) = plan_for(false);
            let rows = c.windows(2).map(|w| (w[1] - w[0]) as usize);
            assert!(rows.clone().all(|l| (11..=15).contains(&l)), "{at}");
            let want = values(&plain, &cols, &x_vals, (1.0, 0.0));
            let reference = crate::reference::spgemm(&p, Op::T, &x, Op::N, 1.0).unwrap();
            assert!(
                want.iter()
                    .zip(reference.values())
                    .all(|(a, b)| (a - b).abs() <= 1e-12 * b.abs().max(1.0)),
                "{at}"
            );
            let want_other = values(&plain, &cols, &other, (1.0, 0.0));
            let want_scaled = values(&plain, &cols, &x_vals, (2.0, 0.5));
            assert!(lanes_kept(&plain).is_none(), "{at}");

            let (kept, _, kept_cols) = plan_for(true);
            assert_eq!(kept_cols, cols, "{at}");
            for round in 0..3 {
                let got = values(&kept, &cols, &x_vals, (1.0, 0.0));
                assert_eq!(bits(&got), bits(&want), "{at}, round {round}");
                let held = lanes_kept(&kept);
                assert_eq!(held, masks_kept.then_some(8 * n), "{at}, round {round}");
            }
            let got = values(&kept, &cols, &other, (1.0, 0.0));
            assert_eq!(bits(&got), bits(&want_other), "{at}");
            let got = values(&kept, &cols, &x_vals, (2.0, 0.5));
            assert_eq!(bits(&got), bits(&want_scaled), "{at}");
            if masks_kept {
                assert!(kept.memory_bytes() >= plain.memory_bytes() + 8 * n, "{at}");
            }
        }
    }

    /// A plan's numeric phases on C's known structure record the positions
    /// of C's products on the second one that computes and replay them on
    /// the next ones, with the values of the known-structure kernel bit
    /// for bit (a plan that keeps none: one array, α = 1 and β = 0 or
    /// scaled through a row buffer, C's values split between two arrays,
    /// A's read from two, one- and two-byte positions, 1 to 3 threads);
    /// tampered positions show in the values (the replay ran) or are an
    /// error; a product on A's pattern changed under
    /// [`PatternCheck::Caller`] is an error, not a panic; another
    /// structure of C drops them.
    /// Each replay is run with its products added one row of op(B) at a
    /// time and written 8 and 16 at a time first, then at its own choice,
    /// each with op(B)'s rows prefetched at its own choice and always.
    #[test]
    fn recorded_positions_replay_the_known_structure_kernel_bit_for_bit() {
        crate::backend::cpu::with_each_width(replay_at_width);
    }

    fn replay_at_width(width: usize, prefetch: bool) {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (long_row, threads) in [(false, 1), (false, 3), (true, 2)] {
            let at = format!(
                "long row {long_row}, {threads} threads, width {width}, prefetch {prefetch}"
            );
            let (ro, ac, av) = position_operand(long_row);
            fn band_view<'v>(
                (ro, ac): (&'v [i64], &'v [i32]),
                vals: &'v [f64],
            ) -> CsrView<'v, f64, i64, i32> {
                CsrView::try_new(3000, 3000, ro, ac, vals, IndexBase::Zero).unwrap()
            }
            let parts = (&ro[..], &ac[..]);
            let a = band_view(parts, &av);
            let other: Vec<f64> = av.iter().map(|v| 1.3 - v).collect();
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            let plan_for = |keep: bool| {
                let mut plan = CpuPlan::new(&ctx, &a, Op::N, &a, Op::N, Algorithm::Dense).unwrap();
                let plain_bound = plan.peak_memory_bound();
                if keep {
                    plan.expect_structure_first();
                    assert!(plan.record_positions, "{at}");
                    let width = if long_row { 2 } else { 1 };
                    let grown = plan.peak_memory_bound() - plain_bound;
                    assert!(grown >= (4 * 12 + width) * plan.work.total(), "{at}");
                }
                let nnz = plan.symbolic(&ctx, &a, &a).unwrap();
                let mut c = vec![0i64; 3001];
                let mut cols = vec![0i32; nnz];
                plan.write_structure(&ctx, &a, &a, &mut c, &mut cols, IndexBase::One)
                    .unwrap();
                plan.remember_written(&ctx, Some((&cols, IndexBase::One)));
                (plan, c, cols)
            };
            // α·A·A + β·C into values that start at 3.0.
            let values = |plan: &CpuPlan<i64, i32>, cols: &[i32], vals: &[f64], ab: (f64, f64)| {
                let mut v = vec![3.0; cols.len()];
                let out =
                    CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, cols, IndexBase::One);
                plan.numeric(
                    &ctx,
                    &band_view(parts, vals),
                    &band_view(parts, &av),
                    ab.0,
                    ab.1,
                    out,
                )
                .map(|()| v)
            };
            let kept_state = |plan: &CpuPlan<i64, i32>| match &*plan.positions.lock().unwrap() {
                Positions::Kept(k) => Some(k.chunks.iter().map(ChunkPositions::bytes).sum()),
                _ => None::<usize>,
            };
            let (plain, c_offsets, cols) = plan_for(false);
            let want = values(&plain, &cols, &av, (1.0, 0.0)).unwrap();
            let reference = crate::reference::spgemm(&a, Op::N, &a, Op::N, 1.0).unwrap();
            let close = want.iter().zip(reference.values());
            assert!(
                close.clone().all(|(x, y)| (x - y).abs() <= 1e-12 * y.abs()),
                "{at}"
            );
            assert_eq!(want.len(), reference.nnz(), "{at}");
            let want_other = values(&plain, &cols, &other, (1.0, 0.0)).unwrap();
            let want_scaled = values(&plain, &cols, &av, (2.0, 0.5)).unwrap();
            assert!(kept_state(&plain).is_none(), "{at}");

            let (kept, _, kept_cols) = plan_for(true);
            assert_eq!(kept_cols, cols, "{at}");
            // The first two compute (the first may copy the values the
            // symbolic phase listed); the third records.
            for round in 0..3 {
                let got = values(&kept, &cols, &av, (1.0, 0.0)).unwrap();
                assert_eq!(bits(&got), bits(&want), "{at}, round {round}");
                assert_eq!(
                    kept_state(&kept).is_some(),
                    round == 2,
                    "{at}, round {round}"
                );
            }
            let held = kept_state(&kept).unwrap();
            let products = kept.work.total() as usize;
            assert_eq!(held, products * if long_row { 2 } else { 1 }, "{at}");
            assert!(kept.memory_bytes() >= plain.memory_bytes() + held, "{at}");
            // Replayed: other values, then scaled into a row buffer.
            let got = values(&kept, &cols, &other, (1.0, 0.0)).unwrap();
            assert_eq!(bits(&got), bits(&want_other), "{at}");
            let got = values(&kept, &cols, &av, (2.0, 0.5)).unwrap();
            assert_eq!(bits(&got), bits(&want_scaled), "{at}");

            // C's values split between two arrays, each row at its own point:
            // scaled through a buffer; unscaled, rows in one array written
            // in place (over the 3.0 the arrays hold), rows in both through
            // the buffer.
            let zero_based: Vec<usize> = c_offsets.iter().map(|&o| o as usize - 1).collect();
            for (scale, want) in [((2.0, 0.5), &want_scaled), ((1.0, 0.0), &want)] {
                let (fo, so, mut first, mut second) = split_rows(&zero_based, 3.0);
                let split = SplitValues {
                    first_offsets: &fo,
                    first: &mut first,
                    second_offsets: &so,
                    second: &mut second,
                };
                let out = CsrOutput::<f64, i64, i32>::split_values_on_pattern(
                    split,
                    &cols,
                    IndexBase::One,
                );
                kept.numeric(&ctx, &a, &a, scale.0, scale.1, out).unwrap();
                let joined = join_rows((&fo, &so), (&first, &second));
                assert_eq!(bits(&joined), bits(want), "{at}, {scale:?}");
            }

            // A's values read from two arrays, each row cut at its own point.
            let cut = |i: usize| ro[i] as usize + (i % 4).min((ro[i + 1] - ro[i]) as usize);
            let mut a_first_offsets = vec![0i64];
            let mut a_second_offsets = vec![0i64];
            let (mut a_first, mut a_second) = (Vec::new(), Vec::new());
            for i in 0..3000 {
                a_first.extend_from_slice(&av[ro[i] as usize..cut(i)]);
                a_second.extend_from_slice(&av[cut(i)..ro[i + 1] as usize]);
                a_first_offsets.push(a_first.len() as i64);
                a_second_offsets.push(a_second.len() as i64);
            }
            let a_split = SplitInput::new(
                &ro,
                (&a_first_offsets, &a_first),
                (&a_second_offsets, &a_second),
                (0, true),
            )
            .unwrap();
            let mut v = vec![3.0; cols.len()];
            let out = CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, &cols, IndexBase::One);
            let no_values = band_view(parts, &other);
            let print = kept.written.lock().unwrap().map(|w| w.0);
            kept.numeric_with(
                &ctx,
                (&no_values, &a),
                (1.0, 0.0),
                out,
                (Some(print), false),
                Some(a_split),
            )
            .unwrap();
            assert_eq!(bits(&v), bits(&want), "{at}");

            // Tampered positions: every product at its row's first entry
            // (the replay ran), then past every row (an error).
            let tamper = |place: usize| {
                let mut positions = kept.positions.lock().unwrap();
                let Positions::Kept(k) = &*positions else {
                    panic!("{at}: no positions kept");
                };
                let chunks = k
                    .chunks
                    .iter()
                    .map(|c| match c {
                        ChunkPositions::Narrow(p) => {
                            ChunkPositions::Narrow(vec![place as u8; p.len()])
                        }
                        ChunkPositions::Wide(p) => {
                            ChunkPositions::Wide(vec![place as u16; p.len()])
                        }
                        // Every entry's row of op(B) at lane `place`.
                        ChunkPositions::Lanes(m) => {
                            ChunkPositions::Lanes(vec![1 << place; m.len()])
                        }
                    })
                    .collect();
                let (c_print, max_row) = (k.c_print, k.max_row);
                *positions = Positions::Kept(Arc::new(KeptPositions {
                    chunks,
                    c_print,
                    max_row,
                }));
            };
            let untouched = kept_state(&kept);
            let saved = match &*kept.positions.lock().unwrap() {
                Positions::Kept(k) => k.clone(),
                _ => unreachable!(),
            };
            tamper(0);
            let got = values(&kept, &cols, &av, (1.0, 0.0)).unwrap();
            assert_ne!(bits(&got), bits(&want), "{at}");
            tamper(if long_row { 65_535 } else { 255 });
            let err = values(&kept, &cols, &av, (1.0, 0.0)).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidValue(m) if m.contains("do not match the positions")),
                "{at}: {err}"
            );
            *kept.positions.lock().unwrap() = Positions::Kept(saved);
            assert_eq!(kept_state(&kept), untouched);
            let got = values(&kept, &cols, &av, (1.0, 0.0)).unwrap();
            assert_eq!(bits(&got), bits(&want), "{at}");

            if long_row {
                // Under PatternCheck::Caller, A's pattern changed anyway:
                // row 0's first entry now reads B's long row 5 (same nnz).
                let mut kept = kept;
                kept.set_pattern_check(PatternCheck::Caller);
                let mut moved = ac.clone();
                moved[0] = 5;
                let changed =
                    CsrView::try_new(3000, 3000, &ro, &moved, &av, IndexBase::Zero).unwrap();
                let mut v = vec![3.0; cols.len()];
                let out =
                    CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, &cols, IndexBase::One);
                let err = kept.numeric(&ctx, &changed, &a, 1.0, 0.0, out).unwrap_err();
                assert!(
                    matches!(&err, Error::InvalidValue(m) if m.contains("changed between phases")),
                    "{at}: {err}"
                );
                let got = values(&kept, &cols, &av, (1.0, 0.0)).unwrap();
                assert_eq!(bits(&got), bits(&want), "{at}");
                kept.set_pattern_check(PatternCheck::Hash);

                // Another structure of C (zero-based columns written): the
                // positions are dropped, the values still the kernel's.
                let zero: Vec<i32> = cols.iter().map(|c| c - 1).collect();
                kept.remember_written(&ctx, Some((&zero, IndexBase::Zero)));
                let mut v = vec![3.0; cols.len()];
                let out =
                    CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, &zero, IndexBase::Zero);
                kept.numeric(&ctx, &a, &a, 1.0, 0.0, out).unwrap();
                assert_eq!(bits(&v), bits(&want), "{at}");
                assert!(kept_state(&kept).is_none(), "{at}");
            }
        }
    }

    /// Values on C's known structure when the rows of A read a large op(B)
    /// out of order (the known-structure kernel then prefetches B's rows):
    /// the reference's values, from one and two threads.
    #[test]
    fn known_structure_values_with_a_large_scattered_b() {
        let n = 200_000usize;
        let tb: Vec<(usize, usize, f64)> = (0..n)
            .flat_map(|r| {
                (0..3).map(move |k| (r, (r * 7 + k * 1_009) % 5_000, 1.0 + (r % 7) as f64))
            })
            .collect();
        let ta: Vec<(usize, usize, f64)> = (0..3_000usize)
            .flat_map(|i| (0..4).map(move |k| (i, (i * 48_271 + k * 69_621) % n, 0.5 + k as f64)))
            .collect();
        let a = CsrMatrix::<f64, i64, i32>::from_triplets(3_000, n, &ta, IndexBase::Zero).unwrap();
        let b = CsrMatrix::<f64, i64, i32>::from_triplets(n, 5_000, &tb, IndexBase::Zero).unwrap();
        let want = crate::reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
        for threads in [1, 2] {
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            let plan = |ctx: &Context| {
                CpuPlan::new(ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Dense)
            };
            let mut plan = plan(&ctx).unwrap();
            assert!(!plan.work.b_rows_in_order() && !plan.work.b_fits_in_cache());
            let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
            let (ro, cols) =
                written_structure(&plan, &ctx, (&a, &b), nnz, IndexBase::Zero).unwrap();
            assert_eq!(&ro[..], want.row_offsets());
            plan.remember_written(&ctx, Some((&cols, IndexBase::Zero)));
            let mut v = vec![0.0; nnz];
            let out = CsrOutput::<f64, i64, i32>::values_on_pattern(&mut v, &cols, IndexBase::Zero);
            plan.numeric(&ctx, &a.view(), &b.view(), 1.0, 0.0, out)
                .unwrap();
            assert_eq!(&v[..], want.values(), "{threads} threads");
        }
    }

    #[test]
    fn keeping_columns_refuses_a_changed_pattern_in_the_symbolic_phase() {
        let (a, b) = listing_operands();
        let ctx = Context::cpu().unwrap();
        let mut plan =
            CpuPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Dense).unwrap();
        plan.expect_structure_first();
        // Same nnz, one entry moved to a row of B with 50,000 entries.
        let mut cols = a.col_indices().to_vec();
        let k = a.row_offsets()[5] as usize;
        cols[k] = 0;
        let moved = CsrView::try_new(
            a.nrows(),
            a.ncols(),
            a.row_offsets(),
            &cols,
            a.values(),
            IndexBase::Zero,
        )
        .unwrap();
        let err = plan.symbolic(&ctx, &moved, &b.view()).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidValue(m) if m.contains("changed")),
            "{err}"
        );
        assert!(plan.listed.0.lock().unwrap().is_none());
        // The planned pattern still works.
        assert!(plan.symbolic(&ctx, &a.view(), &b.view()).is_ok());
    }

    #[test]
    fn columns_are_not_kept_under_a_memory_budget() {
        let (a, b) = listing_operands();
        let ctx = Context::cpu().unwrap();
        ctx.set_memory_budget(Some(1 << 30));
        let mut plan =
            CpuPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Dense).unwrap();
        let bound = plan.peak_memory_bound();
        plan.expect_structure_first();
        assert!(!plan.list_in_symbolic);
        assert_eq!(plan.peak_memory_bound(), bound);
        plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
        assert!(plan.listed.0.lock().unwrap().is_none());
    }

    /// A band of `width` entries a row on `n` rows: B's rows are long
    /// enough for the trained tree to pick BRMerge-Upper for A·A.
    fn band(n: usize, width: usize) -> CsrMatrix<f64, i64, i32> {
        let t: Vec<(usize, usize, f64)> = (0..n)
            .flat_map(|i| {
                (i..(i + width).min(n)).map(move |j| (i, j, 1.0 + ((i * 7 + j) % 5) as f64))
            })
            .collect();
        CsrMatrix::from_triplets(n, n, &t, IndexBase::Zero).unwrap()
    }

    /// A one-call BRMerge-Upper product gives its temporary C to the
    /// context's scratch pool once C is written, and the next one fills
    /// it: every product equals the reference (a smaller one between them
    /// too), the pool holds one product's temporary C rather than one per
    /// call, a product of another algorithm frees it, and under a memory
    /// budget nothing of it is kept.
    #[test]
    fn one_call_brmerge_upper_recycles_its_temporary_c() {
        let mut ctx = Context::cpu().unwrap();
        ctx.set_num_threads(2).unwrap();
        let opts = crate::SpgemmOptions {
            algorithm: Algorithm::BrmergeUpper,
            ..Default::default()
        };
        let (big, small) = (band(3000, 40), band(500, 30));
        let multiply = |ctx: &Context, a: &CsrMatrix<f64, i64, i32>| {
            let want = crate::reference::spgemm(&a.view(), Op::N, &a.view(), Op::N, 1.0).unwrap();
            let got = ctx.spgemm(&a.view(), &a.view(), &opts).unwrap();
            assert_eq!(ctx.spgemm(&a.view(), &a.view(), &opts).unwrap(), got);
            assert_eq!(got.row_offsets(), want.row_offsets());
            assert_eq!(got.col_indices(), want.col_indices());
            assert_eq!(got.values(), want.values());
            got.col_indices().len() * (std::mem::size_of::<f64>() + std::mem::size_of::<i32>())
        };
        let mut kept = Vec::new();
        let mut temporary_c = 0;
        for a in [&big, &big, &small, &big] {
            let bytes = multiply(&ctx, a);
            temporary_c = temporary_c.max(bytes);
            kept.push(ctx.scratch_bytes());
        }
        assert!(kept[0] >= temporary_c, "{kept:?} {temporary_c}");
        assert!(
            kept.iter().all(|&k| k < 2 * temporary_c),
            "{kept:?} {temporary_c}"
        );
        let dense = crate::SpgemmOptions {
            algorithm: Algorithm::Dense,
            ..Default::default()
        };
        ctx.spgemm(&big.view(), &big.view(), &dense).unwrap();
        assert!(ctx.scratch_bytes() < temporary_c, "{}", ctx.scratch_bytes());
        ctx.trim_scratch();
        ctx.set_memory_budget(Some(1 << 30));
        multiply(&ctx, &big);
        assert!(ctx.scratch_bytes() < temporary_c, "{}", ctx.scratch_bytes());
    }

    /// An automatic choice of the dense accumulator runs in one pass
    /// (BRMerge-Upper) for a one-call product that follows one of about
    /// its size on the same context, and stays the dense accumulator for
    /// the first, after one of another size, under a memory budget, when
    /// the temporary C would not be kept (scratch limit), for a concrete
    /// request, for C wanted in any order (one pass writes sorted rows, the
    /// planned flow's order may differ), and in the plan API. Every product
    /// equals the reference.
    #[test]
    fn repeated_one_call_products_run_the_dense_choice_in_one_pass() {
        use crate::product::{Operation, SpgemmPlan};
        let (a, big) = (band(400, 3), band(4000, 3));
        let mut ctx = Context::cpu().unwrap();
        ctx.set_num_threads(2).unwrap();
        let auto = Operation {
            op_a: Op::N,
            op_b: Op::N,
            algorithm: Algorithm::Default,
        };
        let one_call = |ctx: &Context, x: &CsrMatrix<f64, i64, i32>, operation| {
            let (v, w) = (x.view(), x.view());
            SpgemmPlan::for_one_call(ctx, &v, &w, operation, true)
                .unwrap()
                .selected_algorithm()
        };
        assert_eq!(one_call(&ctx, &a, auto), Algorithm::Dense, "the first");
        assert_eq!(one_call(&ctx, &a, auto), Algorithm::BrmergeUpper);
        assert_eq!(one_call(&ctx, &big, auto), Algorithm::Dense, "another size");
        assert_eq!(one_call(&ctx, &big, auto), Algorithm::BrmergeUpper);
        let dense = Operation {
            algorithm: Algorithm::Dense,
            ..auto
        };
        assert_eq!(one_call(&ctx, &big, dense), Algorithm::Dense, "asked for");
        let (v, w) = (big.view(), big.view());
        let any_order = SpgemmPlan::for_one_call(&ctx, &v, &w, auto, false).unwrap();
        assert_eq!(
            any_order.selected_algorithm(),
            Algorithm::Dense,
            "any order"
        );
        let (v, w) = (big.view(), big.view());
        let planned = SpgemmPlan::new(&ctx, &v, Op::N, &w, Op::N, Algorithm::Default).unwrap();
        assert_eq!(planned.selected_algorithm(), Algorithm::Dense, "plan API");
        ctx.set_memory_budget(Some(1 << 30));
        assert_eq!(one_call(&ctx, &big, auto), Algorithm::Dense, "budget");
        ctx.set_memory_budget(None);
        ctx.set_scratch_limit(1 << 10);
        assert_eq!(one_call(&ctx, &big, auto), Algorithm::Dense, "not kept");
        ctx.set_scratch_limit(64 << 20);
        assert_eq!(one_call(&ctx, &big, auto), Algorithm::BrmergeUpper);
        let want = crate::reference::spgemm(&v, Op::N, &w, Op::N, 1.0).unwrap();
        for _ in 0..3 {
            let got = ctx.spgemm(&v, &w, &Default::default()).unwrap();
            assert_eq!(got.row_offsets(), want.row_offsets());
            assert_eq!(got.col_indices(), want.col_indices());
            assert_eq!(got.values(), want.values());
        }
    }

    /// C's values split between two arrays ([`SplitValues`]), each row at
    /// its own point, on a product the known-structure kernel takes (a
    /// band) and on one it leaves (few products over a wide op(B): the
    /// values go through one array first); and every malformed split is
    /// refused before anything is written.
    #[test]
    fn split_values_follow_the_rows_on_both_paths_and_bad_splits_are_refused() {
        let wide: Vec<(usize, usize, f64)> = (0..40)
            .flat_map(|i| {
                (0..3).map(move |k| (i, (i * 977 + k * 31_013) % 200_000, 1.0 + k as f64))
            })
            .collect();
        let wide = CsrMatrix::from_triplets(40, 200_000, &wide, IndexBase::Zero).unwrap();
        let square: Vec<(usize, usize, f64)> = (0..40)
            .map(|i| (i, (i * 13) % 40, 0.5 + i as f64))
            .collect();
        let square = CsrMatrix::from_triplets(40, 40, &square, IndexBase::Zero).unwrap();
        let ctx = Context::cpu().unwrap();
        let band = band(500, 9);
        for (a, b) in [(&band, &band), (&square, &wide)] {
            let want = crate::reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
            let mut plan =
                CpuPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Default).unwrap();
            let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
            let base = IndexBase::One;
            let (ro, cols) = written_structure(&plan, &ctx, (a, b), nnz, base).unwrap();
            let cols: Vec<i32> = cols.iter().map(|c| c + 1).collect();
            let m = a.nrows();
            let ro: Vec<usize> = ro.iter().map(|&r| r as usize).collect();
            let (fo, so, mut first, mut second) = split_rows(&ro, 7.0);
            let run = |fo: &[i64], so: &[i64], first: &mut [f64], second: &mut [f64], beta| {
                let split = SplitValues {
                    first_offsets: fo,
                    first,
                    second_offsets: so,
                    second,
                };
                let out = CsrOutput::<f64, i64, i32>::split_values_on_pattern(split, &cols, base);
                plan.numeric(&ctx, &a.view(), &b.view(), 2.0, beta, out)
            };
            run(&fo, &so, &mut first, &mut second, 0.5).unwrap();
            let joined = join_rows((&fo, &so), (&first, &second));
            let expected: Vec<f64> = want.values().iter().map(|v| 2.0 * v + 0.5 * 7.0).collect();
            assert_eq!(joined, expected);

            // Malformed splits: refused, nothing written.
            let (mut f2, mut s2) = (vec![9.0; first.len()], vec![9.0; second.len() + 1]);
            let short = &fo[..m];
            let mut shifted = so.clone();
            shifted[m] += 1;
            let mut falling = fo.clone();
            falling[1] = 0;
            let (nf, ns) = (first.len(), second.len());
            // First's and second's offsets, their arrays' lengths, the message.
            type Case<'c> = (&'c [i64], &'c [i64], (usize, usize), &'c str);
            let cases: [Case<'_>; 4] = [
                (short, &so, (nf, ns), "not nrows + 1"),
                (&fo, &shifted, (nf, ns + 1), "its two blocks hold"),
                (&falling, &so, (nf, ns), "below the index base"),
                (&fo, &so, (nf.saturating_sub(1), ns), "its array holds"),
            ];
            for (f, s, (nf, ns), message) in cases {
                let e = run(f, s, &mut f2[..nf], &mut s2[..ns], 0.0).unwrap_err();
                assert!(
                    matches!(&e, Error::InvalidValue(t) if t.contains(message)),
                    "{e:?}"
                );
                assert!(f2.iter().chain(&s2).all(|&v| v == 9.0));
            }
        }
    }

    /// Long rows of A over short rows of op(B) (the 27-point Poisson
    /// times GAMG's smoothed prolongator): the known-structure kernel adds
    /// two rows at a time; with C's values in one array and split between
    /// two, on one thread and two, they are the reference's, bit for bit.
    #[test]
    fn long_rows_of_a_over_short_rows_of_b_give_the_reference() {
        let (m, k, n) = (41, 300, 30);
        let a = rows_of_a(m, k, |i| 18 + i % 7);
        let b = matrix_of_rows(
            (k, n),
            |r| 2 + r % 4,
            |r, e| ((r / 10 + e * 3) % n, 0.7 - e as f64 / 7.0),
        );
        known_structure_is_the_reference(&a, &b);
    }

    /// A transposed A's values, which a plan keeps gathered between
    /// numeric phases: the same values again give the same C, and new ones
    /// the new product, bit for bit, on one thread and two (kept values
    /// left in place of new ones fail it: mutation checked). A zero's sign
    /// is compared too, though the dense accumulator's sums, which start
    /// from +0, do not show it here.
    #[test]
    fn a_transposed_a_is_gathered_again_when_its_values_change() {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let diagonal = |d: &[f64]| {
            let t: Vec<(usize, usize, f64)> =
                d.iter().enumerate().map(|(i, &v)| (i, i, v)).collect();
            CsrMatrix::from_triplets(d.len(), d.len(), &t, IndexBase::Zero).unwrap()
        };
        let cases = [
            (band(300, 5), band(300, 4)),
            (diagonal(&[0.5, 2.0, 3.0]), diagonal(&[1.0, 1.0, 1.0])),
        ];
        for threads in [1, 2] {
            for (a, b) in &cases {
                let mut a = a.clone();
                let mut ctx = Context::cpu().unwrap();
                ctx.set_num_threads(threads).unwrap();
                let (av, bv) = (a.view(), b.view());
                let mut plan =
                    CpuPlan::new(&ctx, &av, Op::T, &bv, Op::N, Algorithm::Dense).unwrap();
                let nnz = plan.symbolic(&ctx, &av, &bv).unwrap();
                let (_, cols) =
                    written_structure(&plan, &ctx, (&a, b), nnz, IndexBase::Zero).unwrap();
                let product_of = |a: &CsrMatrix<f64, i64, i32>| {
                    let want =
                        crate::reference::spgemm(&a.view(), Op::T, &b.view(), Op::N, 1.0).unwrap();
                    let mut vals = vec![f64::NAN; nnz];
                    let out = CsrOutput::<f64, i64, i32>::values_on_pattern(
                        &mut vals,
                        &cols,
                        IndexBase::Zero,
                    );
                    plan.numeric(&ctx, &a.view(), &b.view(), 1.0, 0.0, out)
                        .unwrap();
                    assert_eq!(bits(&vals), bits(want.values()), "{threads} thread(s)");
                };
                product_of(&a);
                product_of(&a);
                // One value changed, then made a zero, then the zero's sign.
                a.values_mut()[1] *= -3.0;
                product_of(&a);
                a.values_mut()[0] = 0.0;
                product_of(&a);
                a.values_mut()[0] = -0.0;
                product_of(&a);
                product_of(&a);
            }
        }
        // Two plans on one context in turns, their A's values the same
        // array on two patterns: neither takes the other's kept values.
        let ctx = Context::cpu().unwrap();
        let values = [0.5, 2.0, 3.0];
        let t = [(0, 1, values[0]), (1, 2, values[1]), (2, 0, values[2])];
        let turned = CsrMatrix::from_triplets(3, 3, &t, IndexBase::Zero).unwrap();
        let (diag, one) = (diagonal(&values), diagonal(&[1.0; 3]));
        let mut plans: Vec<_> = [&diag, &turned]
            .iter()
            .map(|a| {
                let (av, bv) = (a.view(), one.view());
                let mut plan =
                    CpuPlan::new(&ctx, &av, Op::T, &bv, Op::N, Algorithm::Dense).unwrap();
                let nnz = plan.symbolic(&ctx, &av, &bv).unwrap();
                let (_, cols) =
                    written_structure(&plan, &ctx, (a, &one), nnz, IndexBase::Zero).unwrap();
                (plan, cols, *a)
            })
            .collect();
        for _ in 0..2 {
            for (plan, cols, a) in &mut plans {
                let want =
                    crate::reference::spgemm(&a.view(), Op::T, &one.view(), Op::N, 1.0).unwrap();
                let mut vals = vec![f64::NAN; cols.len()];
                let out =
                    CsrOutput::<f64, i64, i32>::values_on_pattern(&mut vals, cols, IndexBase::Zero);
                CpuPlan::numeric(plan, &ctx, &a.view(), &one.view(), 1.0, 0.0, out).unwrap();
                assert_eq!(bits(&vals), bits(want.values()));
            }
        }
    }

    /// An aggregation as op(B) (one entry a row: GAMG's tentative
    /// prolongator) takes its own loop, with C's values in one array and
    /// split between two (PETSc's blocks on the MPI route), on one thread
    /// and two: the reference's values, bit for bit.
    #[test]
    fn an_aggregation_as_b_gives_the_reference_in_one_array_and_two() {
        let (m, k, n) = (57, 400, 45);
        let a = rows_of_a(m, k, |i| 3 + i % 9);
        let b = matrix_of_rows((k, n), |_| 1, |r, _| ((r * 7) % n, 0.3 + (r % 11) as f64));
        known_structure_is_the_reference(&a, &b);
        // Most rows wholly in the first array (a rank's interior rows),
        // in runs long enough to be written as one array and too short,
        // between rows with entries in the second.
        let (m, k, n) = (700, 900, 60);
        let a = rows_of_a(m, k, |i| 2 + i % 9);
        let b = matrix_of_rows((k, n), |_| 1, |r, _| ((r * 11) % n, 0.7 - (r % 5) as f64));
        let boundary = |i: usize| (90..95).contains(&i) || (140..150).contains(&i) || i % 230 == 7;
        known_structure_split_at(&a, &b, |i, len| match boundary(i) {
            true => len / 2,
            false => len,
        });
    }

    /// Short rows of A over short rows of op(B) of uneven length (the
    /// 7-point Poisson times GAMG's smoothed prolongator): the
    /// known-structure kernel stages each row's products; with C's values
    /// in one array and split between two, on one thread and two, they
    /// are the reference's, bit for bit.
    #[test]
    fn short_uneven_rows_of_b_give_the_reference() {
        let (m, k, n) = (400, 500, 120);
        let a = rows_of_a(m, k, |i| 3 + i % 7);
        // Rows of 1 to 8 entries in an uneven order, every 50th of 11.
        let len = |r: usize| if r % 50 == 3 { 11 } else { 1 + (r * r / 3) % 8 };
        let b = matrix_of_rows((k, n), len, |r, e| {
            ((r / 5 + e * 3) % n, 0.7 - e as f64 / 7.0)
        });
        known_structure_is_the_reference(&a, &b);
    }

    /// An `m × k` A whose row `i` has `len(i)` entries, its values thirds
    /// and tenths.
    fn rows_of_a(m: usize, k: usize, len: impl Fn(usize) -> usize) -> CsrMatrix<f64, i64, i32> {
        matrix_of_rows((m, k), len, |i, e| {
            (
                (i * 7 + e * 13) % k,
                (1.0 + e as f64) / 3.0 - 0.1 * i as f64,
            )
        })
    }

    /// A `rows × cols` matrix whose row `r` has the entries `entry(r, e)`
    /// (column and value) for `e` below `len(r)`, in that order (a column
    /// that repeats is kept twice, as `from_triplets` keeps it).
    fn matrix_of_rows(
        (rows, cols): (usize, usize),
        len: impl Fn(usize) -> usize,
        entry: impl Fn(usize, usize) -> (usize, f64),
    ) -> CsrMatrix<f64, i64, i32> {
        let triplets: Vec<(usize, usize, f64)> = (0..rows)
            .flat_map(|r| (0..len(r)).map(move |e| (r, e)))
            .map(|(r, e)| {
                let (c, v) = entry(r, e);
                (r, c, v)
            })
            .collect();
        CsrMatrix::from_triplets(rows, cols, &triplets, IndexBase::Zero).unwrap()
    }

    /// C = A·B by the known-structure kernel on the columns
    /// `write_structure` wrote (sums alone), with C's values in one array
    /// and split between two, on one thread and two: the reference's, bit
    /// for bit.
    fn known_structure_is_the_reference(
        a: &CsrMatrix<f64, i64, i32>,
        b: &CsrMatrix<f64, i64, i32>,
    ) {
        known_structure_split_at(a, b, |i, len| (i * 5 + 1) % (len + 1));
    }

    /// [`known_structure_is_the_reference`] with C's values split as
    /// [`split_rows_at`] cuts them.
    fn known_structure_split_at(
        a: &CsrMatrix<f64, i64, i32>,
        b: &CsrMatrix<f64, i64, i32>,
        cut: impl Fn(usize, usize) -> usize + Copy,
    ) {
        let want = crate::reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for threads in [1, 2] {
            let mut ctx = Context::cpu().unwrap();
            ctx.set_num_threads(threads).unwrap();
            let mut plan =
                CpuPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, Algorithm::Dense).unwrap();
            let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
            let base = IndexBase::One;
            let (ro, cols) = written_structure(&plan, &ctx, (a, b), nnz, base).unwrap();
            let cols: Vec<i32> = cols.iter().map(|c| c + 1).collect();
            // As the Rust API's write_structure: the columns it wrote are
            // checked, so the kernel adds sums alone.
            plan.remember_written(&ctx, Some((&cols, base)));
            let mut vals = vec![f64::NAN; nnz];
            let out = CsrOutput::<f64, i64, i32>::values_on_pattern(&mut vals, &cols, base);
            plan.numeric(&ctx, &a.view(), &b.view(), 1.0, 0.0, out)
                .unwrap();
            assert_eq!(bits(&vals), bits(want.values()), "{threads} thread(s)");
            let ro: Vec<usize> = ro.iter().map(|&r| r as usize).collect();
            let (fo, so, mut first, mut second) = split_rows_at(&ro, f64::NAN, cut);
            let split = SplitValues {
                first_offsets: &fo,
                first: &mut first,
                second_offsets: &so,
                second: &mut second,
            };
            let out = CsrOutput::<f64, i64, i32>::split_values_on_pattern(split, &cols, base);
            plan.numeric(&ctx, &a.view(), &b.view(), 1.0, 0.0, out)
                .unwrap();
            let joined = join_rows((&fo, &so), (&first, &second));
            assert_eq!(
                bits(&joined),
                bits(want.values()),
                "split, {threads} thread(s)"
            );
        }
    }

    /// The reuse flow trades an automatic BRMerge-Upper for the dense
    /// accumulator, with that algorithm's peak bound, and its C is the
    /// reference's; BRMerge-Upper asked for by name stays, as does every
    /// choice under a memory budget.
    #[test]
    fn the_reuse_flow_trades_an_automatic_brmerge_upper_for_dense() {
        let a = band(3000, 40);
        let want = crate::reference::spgemm(&a.view(), Op::N, &a.view(), Op::N, 1.0).unwrap();
        let ctx = Context::cpu().unwrap();
        let plan_for =
            |algorithm| CpuPlan::new(&ctx, &a.view(), Op::N, &a.view(), Op::N, algorithm).unwrap();
        let mut plan = plan_for(Algorithm::Default);
        assert_eq!(plan.selected, Algorithm::BrmergeUpper);
        let dense_bound = plan_for(Algorithm::Dense).peak_memory_bound();
        plan.expect_structure_first();
        assert_eq!(plan.selected, Algorithm::Dense);
        assert!(plan.list_in_symbolic);
        assert!(plan.peak_memory_bound() >= dense_bound + 4 * 4 * plan.work.total());
        let nnz = plan.symbolic(&ctx, &a.view(), &a.view()).unwrap();
        assert!(plan.upper.is_none());
        let (ro, cols) = written_structure(&plan, &ctx, (&a, &a), nnz, IndexBase::Zero).unwrap();
        assert_eq!(&ro[..], want.row_offsets());
        assert_eq!(&cols[..], want.col_indices());
        let mut vals = vec![f64::NAN; nnz];
        let out = CsrOutput::<f64, i64, i32>::values_on_pattern(&mut vals, &cols, IndexBase::Zero);
        plan.numeric(&ctx, &a.view(), &a.view(), 1.0, 0.0, out)
            .unwrap();
        assert_eq!(&vals[..], want.values());

        let mut named = plan_for(Algorithm::BrmergeUpper);
        named.expect_structure_first();
        assert_eq!(named.selected, Algorithm::BrmergeUpper);
        ctx.set_memory_budget(Some(1 << 30));
        let mut budgeted = plan_for(Algorithm::Default);
        let (selected, bound) = (budgeted.selected, budgeted.peak_memory_bound());
        budgeted.expect_structure_first();
        assert_eq!(
            (budgeted.selected, budgeted.peak_memory_bound()),
            (selected, bound)
        );
    }

    #[test]
    fn brmerge_upper_writes_the_structure_from_its_temporary_c() {
        let (a, b) = listing_operands();
        let want = crate::reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
        let mut ctx = Context::cpu().unwrap();
        ctx.set_num_threads(2).unwrap();
        let mut plan = CpuPlan::new(
            &ctx,
            &a.view(),
            Op::N,
            &b.view(),
            Op::N,
            Algorithm::BrmergeUpper,
        )
        .unwrap();
        assert_eq!(plan.selected, Algorithm::BrmergeUpper);
        let nnz = plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
        assert!(plan.upper.is_some());
        let (ro, cols) = written_structure(&plan, &ctx, (&a, &b), nnz, IndexBase::Zero).unwrap();
        assert_eq!(&ro[..], want.row_offsets());
        assert_eq!(&cols[..], want.col_indices());
        // Too short an output is refused, not written past.
        assert!(written_structure(&plan, &ctx, (&a, &b), nnz - 1, IndexBase::Zero).is_err());
    }
}
