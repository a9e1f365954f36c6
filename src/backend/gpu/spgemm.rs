//! The SpGEMM pipeline on one GPU, `C = alpha * op(A) * op(B) (+ beta * C)`,
//! driven phase by phase by the FFI (`docs/gpu-pipeline.md` gives the
//! order of kernels and what runs where). Submodules: `resources` (buffers,
//! forked streams, global tables), `transpose` (transposed operands),
//! `row_counts` (per-row counts for the prediction), `diagnose` (readable
//! errors from the kernels' error word).
//!
//! Every device operation goes through [`GpuDevice`]: the caller's stream
//! is a raw handle owned by someone else and every array a raw device
//! address, so the same code runs on CUDA, on HIP and on the host emulation
//! of the kernel tests.

use super::device::{checked_launch, GpuDevice, GpuKernels, RawEvent, RawStream};
use super::launch::LaunchConfig;
use super::launch::{BIN_BLOCK, PLAIN_BLOCK, SETUP_BLOCK};
use crate::backend::kernel_source::KernelTypes;
use crate::error::{Error, Result};
use crate::plan::gpu_bins::{self, GpuBins, KernelBin};
use crate::types::Op;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use resources::{DeviceBuffer, GlobalTables, Lanes};
use transpose::Transposed;

/// One CSR matrix in device memory, as the FFI describes it. The types of
/// the arrays are given separately ([`KernelTypes`]); A, B and C share them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCsr {
    /// Row offsets, `nrows + 1` entries of the offset type.
    pub rows: u64,
    /// Column indices, `nnz` entries of the index type (0 allowed when
    /// `nnz == 0`).
    pub cols: u64,
    /// Values, `nnz` entries (0 allowed when `nnz == 0`, and for A and B in
    /// the symbolic phases).
    pub vals: u64,
    /// Rows.
    pub nrows: i64,
    /// Columns.
    pub ncols: i64,
    /// Stored entries.
    pub nnz: i64,
    /// Index base, 0 or 1.
    pub base: i32,
}

/// `rs_csr` of `kernels/portability.h`, passed to kernels by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCsr {
    /// `const offset_t* rows`.
    pub rows: u64,
    /// `const index_t* cols`.
    pub cols: u64,
    /// `const value_t* vals`.
    pub vals: u64,
    /// `long long nrows`.
    pub nrows: i64,
    /// `long long ncols`.
    pub ncols: i64,
    /// `long long nnz`.
    pub nnz: i64,
    /// `int base`.
    pub base: i32,
    /// `int pad_`.
    pub pad: i32,
}

impl From<&DeviceCsr> for KernelCsr {
    fn from(x: &DeviceCsr) -> Self {
        KernelCsr {
            rows: x.rows,
            cols: x.cols,
            vals: x.vals,
            nrows: x.nrows,
            ncols: x.ncols,
            nnz: x.nnz,
            base: x.base,
            pad: 0,
        }
    }
}

/// Most rows of A a GPU plan takes (row lists are `unsigned int`; one value
/// is kept free).
pub const MAX_ROWS: i64 = (1i64 << 32) - 2;

/// Extra streams the largest bins run on, beside the caller's.
const AUX_STREAMS: usize = 3;
/// The binning kernels take fewer than this many bins (`RS_BIN_MAX`).
const MAX_BINS: usize = 32;
/// Bytes of global hash tables one batch of spilled or huge rows may use
/// at least (and at least one row's table); batches run one after another.
/// Beyond it a batch grows with C ([`GpuSpgemm::global_batch_bytes`]).
const GLOBAL_TABLE_BUDGET: u64 = 256 << 20;
/// The numeric phase's batches of global tables may take up to C's bytes
/// divided by this: with C allocated, the device then holds at most 1.2
/// times C beside the inputs (and the O(rows) metadata).
const NUMERIC_BATCH_C_DIVISOR: u64 = 5;
/// Reading `k` single entries costs about as much as copying `k * 20000`
/// entries in one transfer.
const GATHER_RATIO: u64 = 20_000;

// The metadata header, in 8-byte words.
const H_ERROR: usize = 0;
// 2 words: unsorted B, longest B row (rs_validate writes both; the host
// reads the first since threads per B row come from nprod / nnz(A)).
const H_FLAGS: usize = 1;
const H_NPROD: usize = 3;
const H_MAX: usize = 4;
const H_SPILL: usize = 5;
const H_ZERO: usize = 6; // 2 words of zero: a value_t 0 for beta
const H_BIN_SIZE: usize = 8;
const H_BIN_CURSOR: usize = H_BIN_SIZE + MAX_BINS;
const H_BIN_OFFSET: usize = H_BIN_CURSOR + MAX_BINS;
const H_BOUNDS_SYM: usize = H_BIN_OFFSET + MAX_BINS;
const H_BOUNDS_NUM: usize = H_BOUNDS_SYM + MAX_BINS;
const HEADER_WORDS: usize = H_BOUNDS_NUM + MAX_BINS;

// The header fits the layout's first 256-byte block multiple; the zero
// value is 16-byte aligned.
const _: () = assert!(HEADER_WORDS <= 200 && H_ZERO.is_multiple_of(2));

/// The alignment of the arrays inside one allocation.
const ALIGN: u64 = 256;

fn align(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// Offsets (bytes) of the arrays in the one metadata allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// `m + 1` long long: nprod, then nnz, then C's zero-based offsets.
    row_size: u64,
    /// Scan tile totals.
    block_sums: u64,
    /// `m` unsigned: the rows of every bin, one bin after another.
    bins: u64,
    /// Total bytes.
    total: u64,
}

impl Layout {
    fn new(m: u64, scan_block: u32) -> Layout {
        let row_size = align((HEADER_WORDS * 8) as u64);
        let block_sums = row_size + align((m + 1) * 8);
        let bins = block_sums + align(scan_tiles(m + 1, scan_block).max(1) * 8);
        Layout {
            row_size,
            block_sums,
            bins,
            total: bins + align(m * 4),
        }
    }
}

/// The most device memory work estimation allocates: the row metadata,
/// the transposes of operands whose op transposes, and the larger of a
/// transpose's scratch and the copy the product count is scanned in.
fn work_estimation_bytes(
    layout: &Layout,
    types: KernelTypes,
    scan_block: u32,
    operands: [(Op, &DeviceCsr); 2],
) -> u64 {
    // The copy of the m + 1 products per row (as long as the metadata's).
    let scan_copy = layout.block_sums - layout.row_size;
    let mut kept = layout.total;
    let mut scratch = scan_copy;
    for (op, x) in operands {
        if op.transposes() {
            let (rows, nnz) = (x.ncols.max(0) as u64, x.nnz.max(0) as u64);
            kept += transpose::transposed_layout(types, rows, nnz)[3];
            let words = rows + 1;
            scratch = scratch.max(2 * align(words * 8) + scan_tiles(words, scan_block).max(1) * 8);
        }
    }
    kept + scratch
}

fn scan_tiles(n: u64, scan_block: u32) -> u64 {
    n.div_ceil(2 * u64::from(scan_block))
}

/// Splits rows with global tables of `tables[k]` entries into consecutive
/// batches of at most `budget` entries (a batch holds at least one row).
fn batches(tables: &[u64], budget: u64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut sum) = (0, 0u64);
    for (k, &t) in tables.iter().enumerate() {
        if k > start && sum + t > budget {
            out.push(start..k);
            start = k;
            sum = 0;
        }
        sum += t;
    }
    if start < tables.len() {
        out.push(start..tables.len());
    }
    out
}

/// Exclusive prefix sum of `counts`.
fn exclusive(counts: &[i64]) -> Vec<i64> {
    let mut acc = 0;
    counts
        .iter()
        .map(|&c| {
            let o = acc;
            acc += c;
            o
        })
        .collect()
}

/// `src` as bytes, for copies of plain old data.
fn as_bytes<T: Copy>(src: &[T]) -> &[u8] {
    // SAFETY: any initialised `T: Copy` used here (integers) is plain bytes.
    unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), std::mem::size_of_val(src)) }
}

/// Kernel arguments: a pointer to each value and its size (checked against
/// [`super::device::KERNEL_PARAMS`] at launch).
macro_rules! args {
    ($($x:expr),* $(,)?) => {
        [$((&$x as *const _ as *mut c_void, std::mem::size_of_val(&$x))),*]
    };
}

/// What the symbolic phase leaves for the numeric one.
#[derive(Clone, Debug)]
struct SymbolicResult {
    nnz: i64,
    /// Rows per numeric bin (the direct bin last).
    numeric_counts: Vec<i64>,
    /// Where each numeric bin starts in the bin array.
    numeric_offsets: Vec<i64>,
    /// Global table entries of each row of the global numeric bin, in the
    /// order of the bin array.
    global_tables: Vec<u64>,
    /// Rows per symbolic bin (the direct bin last).
    symbolic_counts: Vec<i64>,
    /// Rows moved from the last shared symbolic bin to the global kernel.
    spilled: i64,
    /// Batches of global tables they ran in.
    spilled_batches: usize,
    /// Each numeric bin's rows are sorted (for C in row blocks).
    bins_by_row: bool,
}

/// What a plan ran, for `rusparseSpGEMM_getPlanInfo` and benchmarks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuPlanInfo {
    /// The device's name.
    pub device: String,
    /// Products of the whole multiplication.
    pub nprod: i64,
    /// nnz(C), once the symbolic phase ran.
    pub nnz: Option<i64>,
    /// Rows per symbolic bin, the direct bin (one entry in A's row) last.
    pub symbolic_rows: Vec<i64>,
    /// Rows per numeric bin, the global bin second to last, the direct bin
    /// last.
    pub numeric_rows: Vec<i64>,
    /// Rows whose symbolic count overflowed shared memory.
    pub spilled_rows: i64,
    /// Batches of global hash tables the symbolic phase ran its spilled
    /// rows in, and the last numeric phase its global bin in (0: none).
    pub global_batches: (usize, usize),
    /// Threads per B row in the shared-memory kernels.
    pub threads_per_b_row: u32,
    /// B has sorted rows without repeated columns (enables the direct path
    /// and the parallel deterministic mode).
    pub b_canonical: bool,
    /// Bitwise-reproducible numeric phase.
    pub deterministic: bool,
    /// Row blocks the last numeric phase computed C in (0: whole; see
    /// [`GpuSpgemm::numeric_in_row_blocks`]).
    pub row_blocks: usize,
}

/// A kernel configuration other than the planner's, for the GPU
/// selector's timing sweep (`rusparse-bench --gpu-threads-per-b-row`,
/// `--gpu-bin-scale`): applied by [`GpuSpgemm::tune`] between the work
/// estimation and the symbolic phase. Every setting keeps the product
/// correct; only its speed changes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuTuning {
    /// Threads sharing one row of B in the shared-memory kernels (a power
    /// of two from 2 to the warp width; `None`: the planner's
    /// [`gpu_bins::threads_per_b_row`]).
    pub threads_per_b_row: Option<u32>,
    /// Scales every bin's upper bound (symbolic by products, numeric by
    /// entries) by this factor in (0, 1]: below 1, rows move to the next,
    /// larger table sooner (`None`: the planner's bounds).
    pub bin_scale: Option<f64>,
    /// Bytes of global hash tables (rows too long for shared memory) one
    /// batch may take, batches running one after another (`None`: the
    /// planner's [`GpuSpgemm::global_batch_bytes`]; at least one row's
    /// table; a memory budget or ALG3's chunk fraction still bounds it).
    pub global_batch_bytes: Option<u64>,
}

/// Where the numeric kernels write C's entries: device addresses that the
/// plan's zero-based row offsets index (shifted back by a row block's first
/// entry when C is computed in row blocks), C's index base, and alpha and
/// beta (0: not read).
struct NumericOut {
    cols: u64,
    vals: u64,
    base: i32,
    alpha: u64,
    beta: u64,
}

/// alpha and beta of a numeric phase: device pointers to one value each,
/// of C's type; with `beta_is_zero`, `beta` is not read (and may be 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceScalars {
    /// alpha's address.
    pub alpha: u64,
    /// beta's address.
    pub beta: u64,
    /// C's old values are not read.
    pub beta_is_zero: bool,
}

impl DeviceScalars {
    /// `C = alpha * op(A) * op(B)`: C's old values are not read.
    pub fn alpha_only(alpha: u64) -> DeviceScalars {
        DeviceScalars {
            alpha,
            beta: 0,
            beta_is_zero: true,
        }
    }
}

/// One product `A * B` on a GPU (CUDA, HIP or emulated): work estimation (validation and
/// products per row), symbolic phase (nnz of every row of C) and numeric
/// phase (C's arrays), each queued on the caller's stream.
///
/// Holds one device allocation of row metadata (about 12 bytes per row of
/// A) from [`GpuSpgemm::work_estimation`] until dropped; hash tables of
/// spilled or very long rows live only during the phase that needs them.
pub struct GpuSpgemm {
    // Declared before `lanes`: freed (on an extra stream) before the
    // streams are destroyed.
    meta: DeviceBuffer,
    /// Transposes of A and B for op T / C (`None` for op N).
    a_t: Option<Transposed>,
    b_t: Option<Transposed>,
    lanes: Lanes,
    dev: Arc<dyn GpuDevice>,
    kernels: Arc<dyn GpuKernels>,
    types: KernelTypes,
    deterministic: bool,
    bins: GpuBins,
    layout: Layout,
    scan_block: u32,
    /// Rows of op(A) (and C).
    m: i64,
    /// Columns of op(B) (and C).
    n: i64,
    /// The user's A and B as given to every phase: (rows, columns, nnz).
    a_dims: (i64, i64, i64),
    b_dims: (i64, i64, i64),
    /// The entries A's and B's offsets use (their nnz less any spare room,
    /// [`with_used_entries`]), read once by work estimation; the later
    /// phases take the same pattern and need not read them again.
    a_used: i64,
    b_used: i64,
    nprod: i64,
    b_canonical: bool,
    group: u32,
    /// ALG3's `chunk_fraction`: the global hash tables of long rows use at
    /// most this fraction of what all of them need at once (at least one
    /// row's table); `None`: batches of [`GpuSpgemm::global_batch_bytes`].
    chunk_fraction: Option<f32>,
    /// [`GpuTuning::global_batch_bytes`].
    global_batch: Option<u64>,
    /// C's row offsets are 64-bit (else 32-bit), whatever A's and B's are:
    /// another type than theirs is written by `rs_write_offsets_wide` /
    /// `_narrow`. Starts as A's offset type.
    c_offsets64: bool,
    symbolic: Option<SymbolicResult>,
    /// The numeric bins' rows, sorted, on the host (C in row blocks).
    bins_host: Option<Vec<u32>>,
    /// Row blocks of C in the last numeric phase (0: C was computed whole).
    row_blocks_run: usize,
    /// Batches of global tables the last numeric phase ran (summed over
    /// its row blocks); written by `launch_numeric_bins`, which borrows
    /// the plan shared.
    numeric_batches_run: AtomicUsize,
    /// The error of a failed symbolic phase (its metadata is then partly
    /// overwritten, so it cannot run again).
    symbolic_failed: Option<Error>,
}

// SAFETY: the raw handles (streams, events, device pointers) may be used
// from any thread once the device's context is current, which every method
// and `Drop` ensure; `&self` methods only read host data.
unsafe impl Send for GpuSpgemm {}
// SAFETY: as above.
unsafe impl Sync for GpuSpgemm {}

impl std::fmt::Debug for GpuSpgemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSpgemm")
            .field("device", &self.dev.name())
            .field("types", &self.types)
            .field("m", &self.m)
            .field("n", &self.n)
            .field("nprod", &self.nprod)
            .field("nnz", &self.symbolic.as_ref().map(|s| s.nnz))
            .finish()
    }
}

fn check_csr(x: &DeviceCsr, name: &str, need_vals: bool) -> Result<()> {
    if x.nrows < 0 || x.ncols < 0 || x.nnz < 0 {
        return Err(Error::InvalidValue(format!(
            "{name} has a negative size ({} x {}, nnz {})",
            x.nrows, x.ncols, x.nnz
        )));
    }
    if x.base != 0 && x.base != 1 {
        return Err(Error::InvalidValue(format!(
            "{name}'s index base is {} (0 or 1 expected)",
            x.base
        )));
    }
    if x.rows == 0 {
        return Err(Error::InvalidValue(format!(
            "{name}'s row offsets are NULL"
        )));
    }
    if x.nnz > 0 && x.cols == 0 {
        return Err(Error::InvalidValue(format!(
            "{name}'s column indices are NULL with nnz = {}",
            x.nnz
        )));
    }
    if need_vals && x.nnz > 0 && x.vals == 0 {
        return Err(Error::InvalidValue(format!(
            "{name}'s values are NULL with nnz = {}",
            x.nnz
        )));
    }
    Ok(())
}

/// `x` with `nnz` cut to the entries its row offsets use
/// ([`crate::csr::used_entries`]: a declared nnz above
/// `rowOffsets[nrows] - base` is spare room, never read); otherwise `x`
/// unchanged, for the validating kernels to report. Reads one offset back
/// (waits for `stream`).
///
/// # Errors
/// A runtime error of the copy (or of earlier work on `stream`).
pub(crate) fn with_used_entries(
    dev: &Arc<dyn GpuDevice>,
    stream: RawStream,
    x: &DeviceCsr,
    offset64: bool,
) -> Result<DeviceCsr> {
    if x.rows == 0 || x.nrows < 0 || x.nnz <= 0 {
        return Ok(*x);
    }
    let width = if offset64 { 8 } else { 4 };
    let mut word = [0u8; 8];
    // SAFETY: `x.rows` holds `nrows + 1` offsets (the API contract); the
    // last one is read.
    unsafe {
        dev.download(
            &mut word[..width],
            x.rows + width as u64 * x.nrows as u64,
            stream,
        )
    }
    .map_err(|e| e.context("reading the last row offset"))?;
    let last = if offset64 {
        i64::from_le_bytes(word)
    } else {
        i64::from(i32::from_le_bytes([word[0], word[1], word[2], word[3]]))
    };
    Ok(DeviceCsr {
        nnz: crate::csr::used_entries(last, i64::from(x.base), x.nnz),
        ..*x
    })
}

/// `(rows, columns)` of `op(x)`.
/// The kernels for `types` on `dev`, the device's limits as the planner
/// sizes blocks within them (no more threads a block than the kernels'
/// compilation allows), and the scan's block.
fn planned_limits(
    dev: &Arc<dyn GpuDevice>,
    types: KernelTypes,
) -> Result<(Arc<dyn GpuKernels>, gpu_bins::DeviceLimits, u32)> {
    let kernels = dev.kernels(types)?;
    let mut limits = *dev.limits();
    limits.max_threads_per_block = limits
        .max_threads_per_block
        .min(kernels.max_threads_per_block() / limits.warp * limits.warp)
        .max(limits.warp);
    let scan_block =
        (limits.max_threads_per_block.min(1024) / limits.warp * limits.warp).max(limits.warp);
    Ok((kernels, limits, scan_block))
}

/// The most device memory [`GpuSpgemm::work_estimation`] of `op(a) *
/// op(b)` allocates (only the shapes of `a` and `b` are read), so a caller
/// can check it, with what it stages first, before allocating anything.
///
/// # Errors
/// As [`GpuDevice::kernels`].
pub fn work_estimation_need(
    dev: &Arc<dyn GpuDevice>,
    types: KernelTypes,
    (op_a, a): (Op, &DeviceCsr),
    (op_b, b): (Op, &DeviceCsr),
) -> Result<u64> {
    let (_, _, scan_block) = planned_limits(dev, types)?;
    let m = op_dims(a, op_a).0.max(0) as u64;
    let layout = Layout::new(m, scan_block);
    Ok(work_estimation_bytes(
        &layout,
        types,
        scan_block,
        [(op_a, a), (op_b, b)],
    ))
}

fn op_dims(x: &DeviceCsr, op: Op) -> (i64, i64) {
    if op.transposes() {
        (x.ncols, x.nrows)
    } else {
        (x.nrows, x.ncols)
    }
}

impl GpuSpgemm {
    /// Validates A and B on the device and counts the products of every
    /// row of `op(A) * op(B)`.
    ///
    /// Queues `rs_setup` (op(A), and op(B)'s offsets where read) and
    /// `rs_validate` (all of op(B): offsets, columns, sortedness, longest
    /// row) on `stream` (raw; null is the legacy default stream), then
    /// waits for `stream` once to read the error word. Cost: one pass over
    /// A and B, plus the first-use compilation of the kernels for `types`
    /// (about a second, or a disk-cache read).
    ///
    /// A transposed operand (`op_a` / `op_b` T or C; C conjugates complex
    /// values) is first validated as given (`rs_validate`, one more wait
    /// for the error word), then transposed on the device into memory the
    /// plan keeps (offsets, columns, values and a permutation: about
    /// `nnz * (offset + index + value bytes)`): `rs_transpose_count`, a
    /// scan, `rs_transpose_scatter` and `rs_transpose_sort_rows`, so the
    /// transpose is deterministic and its rows are sorted (canonical when
    /// the input repeats no column within a row). Its values are gathered
    /// from the user's array by every numeric phase.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a malformed matrix (naming the matrix,
    /// the row and what is wrong, e.g. `A's row 17 has a column index
    /// outside 0..8: colInd[42] = 9`) or mismatched sizes;
    /// [`Error::NotSupported`] for more than 2^32 - 2 rows or without the
    /// device's kernel compiler (NVRTC, hiprtc); [`Error::InsufficientResources`] when device
    /// memory runs out (nothing is leaked).
    pub fn work_estimation(
        dev: &Arc<dyn GpuDevice>,
        stream: RawStream,
        (op_a, a): (Op, &DeviceCsr),
        (op_b, b): (Op, &DeviceCsr),
        types: KernelTypes,
        deterministic: bool,
    ) -> Result<Self> {
        check_csr(a, "A", false)?;
        check_csr(b, "B", false)?;
        dev.bind()?;
        let dims = |x: &DeviceCsr| (x.nrows, x.ncols, x.nnz);
        let (a_dims, b_dims) = (dims(a), dims(b));
        // The shapes first, from the declared sizes: reading the operands'
        // last offsets (below) trusts their row counts.
        let ((m, inner), (inner_b, n)) = (op_dims(a, op_a), op_dims(b, op_b));
        if inner != inner_b {
            return Err(Error::InvalidValue(format!(
                "op(A) is {m} x {inner} but op(B) is {inner_b} x {n}: op(A)'s columns must \
                 equal op(B)'s rows"
            )));
        }
        let a = &with_used_entries(dev, stream, a, types.offset64)?;
        // C = A * A (or A * Aᵀ): the same offsets, read once.
        let b = &if (b.rows, b.base, b_dims) == (a.rows, a.base, a_dims) {
            DeviceCsr { nnz: a.nnz, ..*b }
        } else {
            with_used_entries(dev, stream, b, types.offset64)?
        };
        if m > MAX_ROWS {
            return Err(Error::NotSupported(format!(
                "op(A) has {m} rows; the GPU back ends take at most 2^32 - 2"
            )));
        }
        if !types.index64 && n > i64::from(i32::MAX) {
            return Err(Error::InvalidValue(format!(
                "op(B) has {n} columns, more than 32-bit column indices hold"
            )));
        }
        for (x, op, name) in [(a, op_a, "A"), (b, op_b, "B")] {
            // A transpose's column indices are the operand's rows (+ base).
            if op.transposes()
                && !types.index64
                && x.nrows + i64::from(x.base) > i64::from(i32::MAX) + 1
            {
                return Err(Error::InvalidValue(format!(
                    "op({name}) has {} columns, more than 32-bit column indices hold",
                    x.nrows
                )));
            }
        }
        let (kernels, limits, scan_block) = planned_limits(dev, types)?;
        let bins = gpu_bins::gpu_bins(&limits, types.index_bytes(), types.value_bytes());
        if bins.symbolic.len() + 1 > MAX_BINS || bins.numeric.len() + 1 > MAX_BINS {
            return Err(Error::InternalError(format!(
                "the planner made {} symbolic and {} numeric bins; the binning kernels take at most {}",
                bins.symbolic.len(),
                bins.numeric.len(),
                MAX_BINS - 1
            )));
        }
        let layout = Layout::new(m as u64, scan_block);
        if let Some(state) = dev.budget() {
            let need = state.live
                + work_estimation_bytes(&layout, types, scan_block, [(op_a, a), (op_b, b)]);
            if need > state.budget {
                return Err(state.too_small_to_plan(need));
            }
        }
        let lanes = Lanes::new(dev)?;
        let meta = DeviceBuffer::new(dev, stream, layout.total, "the SpGEMM row metadata")?;
        let mut plan = GpuSpgemm {
            meta,
            a_t: None,
            b_t: None,
            lanes,
            dev: dev.clone(),
            kernels,
            types,
            deterministic,
            bins,
            layout,
            scan_block,
            m,
            n,
            a_dims,
            b_dims,
            a_used: a.nnz,
            b_used: b.nnz,
            nprod: 0,
            b_canonical: false,
            group: 2,
            chunk_fraction: None,
            global_batch: None,
            c_offsets64: types.offset64,
            symbolic: None,
            bins_host: None,
            row_blocks_run: 0,
            numeric_batches_run: AtomicUsize::new(0),
            symbolic_failed: None,
        };
        let r = plan
            .estimate(stream, op_a, a, op_b, b)
            .and_then(|()| plan.check_budget(stream));
        // Recorded even after an error: dropping the plan frees its memory
        // after the work already queued.
        let done = plan.lanes.record_done(stream);
        r?;
        done?;
        Ok(plan)
    }

    /// Under a memory budget, refuses a product whose phases cannot fit
    /// before they allocate: besides what the plan holds, the symbolic
    /// phase needs a spill list and the global table of its longest row,
    /// the numeric phase the global table of its longest row of C (both
    /// bounded from the row products, read back here; the batches of
    /// tables then shrink to what the budget leaves). C's own device copy
    /// (host arrays) is checked when nnz(C) is known.
    fn check_budget(&self, stream: RawStream) -> Result<()> {
        let Some(state) = self.dev.budget() else {
            return Ok(());
        };
        let m = self.m as usize;
        let products: Vec<i64> = self.read(stream, self.meta.ptr() + self.layout.row_size, m)?;
        let longest = products.iter().copied().max().unwrap_or(0);
        let (ib, vb) = (
            u64::from(self.types.index_bytes()),
            u64::from(self.types.value_bytes()),
        );
        // Rows above the second-to-last bin's bound may reach the last
        // (global) bin: a row's nnz is at most its products.
        let above = |bins: &[KernelBin]| {
            let bound = bins.len().checked_sub(2).map_or(-1, |k| bins[k].max_size);
            products.iter().filter(|&&p| p > bound).count()
        };
        let spilled = above(&self.bins.symbolic);
        let symbolic = spilled as u64 * 4
            + resources::least_table_bytes(
                spilled,
                gpu_bins::symbolic_global_table(longest, self.n),
                ib,
            );
        let numeric = resources::least_table_bytes(
            above(&self.bins.numeric),
            gpu_bins::numeric_global_table(longest.min(self.n), self.n, vb as u32),
            ib + vb,
        );
        let smallest = state.live + symbolic.max(numeric);
        if smallest > state.budget {
            return Err(state.too_small(smallest, "this product"));
        }
        Ok(())
    }

    /// The least device memory the numeric phase's global hash tables
    /// take (its longest row's table, the batches shrinking to it); 0 when
    /// no row needs one. Known after the symbolic phase.
    pub fn least_numeric_table_bytes(&self) -> u64 {
        let Some(s) = &self.symbolic else {
            return 0;
        };
        let largest = s.global_tables.iter().copied().max().unwrap_or(0);
        let entry = u64::from(self.types.index_bytes() + self.types.value_bytes());
        resources::least_table_bytes(s.global_tables.len(), largest, entry)
    }

    fn estimate(
        &mut self,
        stream: RawStream,
        op_a: Op,
        user_a: &DeviceCsr,
        op_b: Op,
        user_b: &DeviceCsr,
    ) -> Result<()> {
        let h = self.meta.ptr();
        let word = |w: usize| h + 8 * w as u64;
        self.memset(stream, h, 0, (HEADER_WORDS * 8) as u64)?;
        self.memset(stream, word(H_ERROR), 0xff, 8)?;
        self.upload_bin_bounds(stream)?;

        if op_a.transposes() || op_b.transposes() {
            self.build_transposes(stream, op_a, user_a, op_b, user_b)?;
        }
        let (a_eff, b_eff) = self.operands(user_a, user_b);
        let (a, b) = (&a_eff, &b_eff);
        let (ka, kb) = (KernelCsr::from(a), KernelCsr::from(b));
        let row_size = h + self.layout.row_size;
        let error = word(H_ERROR);
        let flags = word(H_FLAGS);
        let grid = self.grid(self.m as u64, SETUP_BLOCK);
        // SAFETY (all launches): arguments match the kernel's parameters
        // (kernels/README.md); every pointer is a live device allocation of
        // the stated size, queued in stream order.
        unsafe {
            self.launch(
                "rs_setup",
                grid,
                SETUP_BLOCK,
                0,
                stream,
                &args![ka, kb, row_size, error],
            )?;
            let (code_offsets, code_cols) = (3i32, 4i32);
            let grid_b = self.grid(b.nrows as u64, SETUP_BLOCK);
            self.launch(
                "rs_validate",
                grid_b,
                SETUP_BLOCK,
                0,
                stream,
                &args![kb, code_offsets, code_cols, error, flags],
            )?;
        }
        // nprod: a scan of a copy of the per-row counts (kept per row for
        // the symbolic binning); the copy lives only here.
        let n = self.m as u64 + 1;
        let copy = DeviceBuffer::new(&self.dev, stream, n * 8, "counting the products")?;
        let sums = self.meta.ptr() + self.layout.block_sums;
        // SAFETY: both ranges are `n * 8` bytes of live allocations.
        unsafe {
            self.dev
                .copy(copy.ptr(), row_size, (n * 8) as usize, stream)
        }
        .map_err(|e| e.context("copying the products per row"))?;
        self.scan(stream, copy.ptr(), n, sums)?;
        // SAFETY: one word inside each allocation.
        unsafe {
            self.dev
                .copy(word(H_NPROD), copy.ptr() + 8 * (n - 1), 8, stream)
        }
        .map_err(|e| e.context("copying the product count"))?;
        drop(copy);
        let head: Vec<i64> = self.read(stream, h, 4)?;
        if head[H_ERROR] as u64 != u64::MAX {
            return Err(self.describe(stream, head[H_ERROR] as u64, a, b));
        }
        self.b_canonical = head[H_FLAGS] == 0;
        self.nprod = head[H_NPROD];
        self.group = gpu_bins::threads_per_b_row(self.nprod, a.nnz, self.dev.limits().warp);
        Ok(())
    }

    /// op(A) and op(B) as the kernels see them: the plan's transposes, or
    /// the user's matrices.
    fn operands(&self, a: &DeviceCsr, b: &DeviceCsr) -> (DeviceCsr, DeviceCsr) {
        (
            self.a_t.as_ref().map_or(*a, |t| t.csr),
            self.b_t.as_ref().map_or(*b, |t| t.csr),
        )
    }

    /// Runs the next phases with `tuning` instead of the planner's
    /// configuration. Call it after [`GpuSpgemm::work_estimation`] and
    /// before [`GpuSpgemm::symbolic`]; the new bin bounds are queued on
    /// `stream`.
    pub fn tune(&mut self, stream: RawStream, tuning: GpuTuning) -> Result<()> {
        if self.symbolic.is_some() {
            return Err(Error::InvalidValue(
                "the kernel configuration can change only before the symbolic phase".into(),
            ));
        }
        let warp = self.dev.limits().warp.max(2);
        if let Some(g) = tuning.threads_per_b_row {
            if !g.is_power_of_two() || !(2..=warp).contains(&g) {
                return Err(Error::InvalidValue(format!(
                    "threads per row of B must be a power of two from 2 to {warp}, not {g}"
                )));
            }
            self.group = g;
        }
        if let Some(bytes) = tuning.global_batch_bytes {
            if bytes == 0 {
                return Err(Error::InvalidValue(
                    "a batch of global tables needs more than 0 bytes".into(),
                ));
            }
            self.global_batch = Some(bytes);
        }
        if let Some(f) = tuning.bin_scale {
            if !(f > 0.0 && f <= 1.0) {
                return Err(Error::InvalidValue(format!(
                    "the bin scale must be in (0, 1], not {f}"
                )));
            }
            for bins in [&mut self.bins.symbolic, &mut self.bins.numeric] {
                for bin in bins.iter_mut().filter(|b| b.max_size != i64::MAX) {
                    bin.max_size = ((bin.max_size as f64 * f) as i64).max(1);
                }
            }
            self.upload_bin_bounds(stream)?;
        }
        Ok(())
    }

    /// Queues the bins' upper bounds (symbolic by products, numeric by
    /// entries) into the header, where the binning kernels read them.
    fn upload_bin_bounds(&self, stream: RawStream) -> Result<()> {
        let word = |w: usize| self.meta.ptr() + 8 * w as u64;
        let sym = gpu_bins::bin_bounds(&self.bins.symbolic);
        let num = gpu_bins::bin_bounds(&self.bins.numeric);
        self.upload(stream, word(H_BOUNDS_SYM), &sym)?;
        self.upload(stream, word(H_BOUNDS_NUM), &num)
    }

    /// Rows of C (of op(A)).
    pub fn nrows(&self) -> i64 {
        self.m
    }

    /// Columns of op(B) (and C).
    pub fn ncols(&self) -> i64 {
        self.n
    }

    /// Products of the whole multiplication (`rusparseSpGEMM_getNumProducts`).
    pub fn num_products(&self) -> i64 {
        self.nprod
    }

    /// nnz(C), once [`GpuSpgemm::symbolic`] ran.
    pub fn nnz(&self) -> Option<i64> {
        self.symbolic.as_ref().map(|s| s.nnz)
    }

    /// The types the plan was made for.
    pub fn types(&self) -> KernelTypes {
        self.types
    }

    /// Bytes of global hash tables one batch of long rows may take, given
    /// `c_share` bytes that the phase may use beside what it holds already
    /// without raising the product's peak: the symbolic phase, before C
    /// exists, as many bytes as its spilled rows hold of C at least; the
    /// numeric phase, beside C, C's bytes / [`NUMERIC_BATCH_C_DIVISOR`].
    /// Never below [`GLOBAL_TABLE_BUDGET`]. Batches run one after another,
    /// each waiting for its slowest row, so that few rows a batch leave the
    /// device idle: rmat at scale 20 ran its 22,812 longest rows of C (an
    /// H200, 2026-12-04) in about a hundred batches of 256 MiB.
    pub(crate) fn global_batch_bytes(&self, c_share: u64) -> u64 {
        self.global_batch
            .unwrap_or_else(|| GLOBAL_TABLE_BUDGET.max(c_share))
    }

    /// ALG3: bounds the global hash tables of long rows to `fraction` (in
    /// (0, 1]) of what all of them need at once, computing them in that
    /// many more batches (each at least one row). The rest of the plan's
    /// memory is row metadata, O(rows), whatever the fraction.
    pub fn set_chunk_fraction(&mut self, fraction: f32) {
        self.chunk_fraction = Some(fraction.clamp(f32::MIN_POSITIVE, 1.0));
    }

    /// C's row offsets are 64-bit (`true`) or 32-bit (`false`); by default
    /// they have A's offset type. C's column indices always have A's index
    /// type. Set before [`GpuSpgemm::symbolic`] (which checks that nnz(C)
    /// fits) and kept for [`GpuSpgemm::numeric`]; a later call overrides
    /// it.
    pub fn set_c_offsets64(&mut self, wide: bool) {
        self.c_offsets64 = wide;
    }

    /// Device memory the plan holds between phases, in bytes (for
    /// `rusparseSpGEMM_estimateMemory` and the plan info).
    pub fn device_bytes(&self) -> usize {
        let t = |t: &Option<Transposed>| t.as_ref().map_or(0, |t| t.buf.bytes);
        (self.meta.bytes + t(&self.a_t) + t(&self.b_t)) as usize
    }

    /// What the plan ran so far.
    pub fn info(&self) -> GpuPlanInfo {
        let s = self.symbolic.as_ref();
        GpuPlanInfo {
            device: self.dev.name().to_string(),
            nprod: self.nprod,
            nnz: s.map(|s| s.nnz),
            symbolic_rows: s.map(|s| s.symbolic_counts.clone()).unwrap_or_default(),
            numeric_rows: s.map(|s| s.numeric_counts.clone()).unwrap_or_default(),
            spilled_rows: s.map_or(0, |s| s.spilled),
            global_batches: (
                s.map_or(0, |s| s.spilled_batches),
                self.numeric_batches_run.load(Ordering::Relaxed),
            ),
            threads_per_b_row: self.group,
            b_canonical: self.b_canonical,
            deterministic: self.deterministic,
            row_blocks: self.row_blocks_run,
        }
    }

    /// A and B as work estimation found them, with their spare room cut
    /// ([`with_used_entries`]): the same declared sizes are checked first.
    fn used_entries(
        &self,
        a: &DeviceCsr,
        b: &DeviceCsr,
        phase: &str,
        need_vals: bool,
    ) -> Result<(DeviceCsr, DeviceCsr)> {
        self.check_same(a, b, phase, need_vals)?;
        Ok((
            DeviceCsr {
                nnz: self.a_used,
                ..*a
            },
            DeviceCsr {
                nnz: self.b_used,
                ..*b
            },
        ))
    }

    fn check_same(&self, a: &DeviceCsr, b: &DeviceCsr, phase: &str, need_vals: bool) -> Result<()> {
        check_csr(a, "A", need_vals)?;
        check_csr(b, "B", need_vals)?;
        if ((a.nrows, a.ncols, a.nnz), (b.nrows, b.ncols, b.nnz)) != (self.a_dims, self.b_dims) {
            return Err(Error::InvalidValue(format!(
                "{phase}: A ({} x {}, nnz {}) or B ({} x {}, nnz {}) differ from the work \
                 estimation's ({} x {}, nnz {}; {} x {}, nnz {})",
                a.nrows,
                a.ncols,
                a.nnz,
                b.nrows,
                b.ncols,
                b.nnz,
                self.a_dims.0,
                self.a_dims.1,
                self.a_dims.2,
                self.b_dims.0,
                self.b_dims.1,
                self.b_dims.2
            )));
        }
        Ok(())
    }

    /// Symbolic phase: nnz of every row of C, then C's zero-based row
    /// offsets, kept in the plan's metadata; returns nnz(C).
    ///
    /// Bins the rows by products (`rs_bin_count`, `rs_bin_fill`), runs the
    /// shared-memory hash kernels (largest rows first, on extra streams),
    /// the global-memory kernel for rows that spill, bins the rows again by
    /// nnz for the numeric phase, and scans. Waits for `stream` four times
    /// at most, to read bin sizes, the spill count and nnz(C). Calling it
    /// again returns the same count without work.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when A or B changed size or nnz(C) does not
    /// fit the offset type; [`Error::InsufficientResources`] when device
    /// memory runs out; driver errors as [`Error::ExecutionFailed`]. After
    /// a failure the plan cannot run the phase again (the same error is
    /// returned).
    pub fn symbolic(&mut self, stream: RawStream, a: &DeviceCsr, b: &DeviceCsr) -> Result<i64> {
        if let Some(s) = &self.symbolic {
            return Ok(s.nnz);
        }
        if let Some(e) = &self.symbolic_failed {
            return Err(e.clone());
        }
        let (a, b) = &self.used_entries(a, b, "symbolic phase", false)?;
        self.dev.bind()?;
        let (a, b) = self.operands(a, b);
        let r = self.run_symbolic(stream, &a, &b);
        let done = self.lanes.record_done(stream);
        let s = r.inspect_err(|e| {
            self.symbolic_failed = Some(
                e.clone()
                    .context("an earlier symbolic phase of this plan failed"),
            );
        })?;
        done?;
        let nnz = s.nnz;
        self.symbolic = Some(s);
        Ok(nnz)
    }

    /// Launches the shared-memory symbolic kernel on the `count` rows of C
    /// listed at `rows` with symbolic bin `j`'s table, team and block; rows
    /// of the last bin that overflow its table go to `spill` (counted in
    /// the header's spill word) for the global kernels.
    ///
    /// # Safety
    /// `rows` holds `count` rows of C; `spill` holds `count` entries when
    /// `j` is the last bin.
    unsafe fn launch_symbolic_bin(
        &self,
        stream: RawStream,
        j: usize,
        (rows, count): (u64, i64),
        (ka, kb): (KernelCsr, KernelCsr),
        spill: &DeviceBuffer,
    ) -> Result<()> {
        let h = self.meta.ptr();
        let row_size = h + self.layout.row_size;
        let sym = &self.bins.symbolic;
        let bin = &sym[j];
        let table = i64::from(bin.table_size);
        let (team, group) = (bin.team as i32, self.group.min(bin.team) as i32);
        let spill_limit = if j == sym.len() - 1 {
            i64::from(self.bins.spill_limit)
        } else {
            0
        };
        let (spill_rows, spill_count) = (spill.ptr(), h + 8 * H_SPILL as u64);
        // SAFETY: the caller's contract; the other pointers are this
        // plan's metadata.
        unsafe {
            self.launch(
                "rs_symbolic_shared",
                Self::rows_grid(count, bin),
                bin.block,
                bin.shared_bytes,
                stream,
                &args![
                    rows,
                    count,
                    ka,
                    kb,
                    row_size,
                    table,
                    team,
                    group,
                    spill_limit,
                    spill_rows,
                    spill_count
                ],
            )
        }
    }

    fn run_symbolic(
        &self,
        stream: RawStream,
        a: &DeviceCsr,
        b: &DeviceCsr,
    ) -> Result<SymbolicResult> {
        let h = self.meta.ptr();
        let row_size = h + self.layout.row_size;
        let bins_ptr = h + self.layout.bins;
        let (ka, kb) = (KernelCsr::from(a), KernelCsr::from(b));
        let m = self.m as u64;
        let a_rows = if self.b_canonical { a.rows } else { 0 };
        let sym = &self.bins.symbolic;
        let nb = sym.len();
        let mut result = SymbolicResult {
            nnz: 0,
            numeric_counts: vec![0; self.bins.numeric.len() + 1],
            numeric_offsets: vec![0; self.bins.numeric.len() + 1],
            global_tables: Vec::new(),
            symbolic_counts: vec![0; nb + 1],
            spilled: 0,
            spilled_batches: 0,
            bins_by_row: false,
        };
        if self.nprod == 0 {
            // Every row is empty: row_size is all zeros, and so are C's
            // offsets.
            return Ok(result);
        }

        // 1. Bin by products; run the shared-memory kernels, largest first.
        let (counts, offsets) = self.bin_rows(stream, a_rows, a.base, H_BOUNDS_SYM, nb)?;
        result.symbolic_counts = counts.clone();
        let last = nb - 1;
        let spill_cap = counts[last].max(0) as u64;
        let spill = DeviceBuffer::new(&self.dev, stream, spill_cap * 4, "the spilled rows")?;
        {
            let order: Vec<usize> = (0..nb).rev().filter(|&j| counts[j] > 0).collect();
            let fork = self.lanes.fork(stream, order.len().saturating_sub(1))?;
            for (lane, &j) in order.iter().enumerate() {
                let rows = bins_ptr + 4 * offsets[j] as u64;
                // SAFETY: see `estimate`.
                unsafe {
                    self.launch_symbolic_bin(
                        fork.stream(lane),
                        j,
                        (rows, counts[j]),
                        (ka, kb),
                        &spill,
                    )
                }?;
            }
            fork.join()?;
        }

        // 2. Rows that spilled: global tables sized from their products.
        if spill_cap > 0 {
            (result.spilled, result.spilled_batches) =
                self.symbolic_spilled(stream, &spill, ka, kb)?;
        }
        drop(spill);

        // 3. Bin by nnz for the numeric phase (kept until C is written).
        let (counts, offsets) = self.bin_rows(
            stream,
            a_rows,
            a.base,
            H_BOUNDS_NUM,
            self.bins.numeric.len(),
        )?;
        result.numeric_counts = counts;
        result.numeric_offsets = offsets;

        // 4. C's zero-based row offsets, and nnz(C).
        self.scan(stream, row_size, m + 1, h + self.layout.block_sums)?;
        let nnz = self.read::<i64>(stream, row_size + 8 * m, 1)?[0];
        if !self.c_offsets64 && nnz > i64::from(i32::MAX) {
            return Err(Error::InvalidValue(format!(
                "nnz(C) = {nnz} does not fit 32-bit row offsets (use 64-bit offsets for C)"
            )));
        }
        result.nnz = nnz;

        // 5. Table sizes of the rows the numeric phase runs in global memory.
        let g = self.bins.numeric.len() - 1;
        if result.numeric_counts[g] > 0 {
            let rows: Vec<u32> = self.read(
                stream,
                bins_ptr + 4 * result.numeric_offsets[g] as u64,
                result.numeric_counts[g] as usize,
            )?;
            let sizes = self.gather(stream, row_size, m + 1, &rows, true)?;
            result.global_tables = sizes
                .iter()
                .map(|&s| gpu_bins::numeric_global_table(s, self.n, self.types.value_bytes()))
                .collect();
        }
        Ok(result)
    }

    /// Runs the rows the last shared symbolic bin spilled (listed in
    /// `spill`, their count in the header) with global hash tables sized
    /// from their products; returns how many spilled and in how many
    /// batches they ran.
    fn symbolic_spilled(
        &self,
        stream: RawStream,
        spill: &DeviceBuffer,
        ka: KernelCsr,
        kb: KernelCsr,
    ) -> Result<(i64, usize)> {
        let h = self.meta.ptr();
        let row_size = h + self.layout.row_size;
        let spilled = self.read::<i64>(stream, h + 8 * H_SPILL as u64, 1)?[0];
        if spilled <= 0 {
            return Ok((0, 0));
        }
        let rows: Vec<u32> = self.read(stream, spill.ptr(), spilled as usize)?;
        let nprod = self.gather(stream, row_size, self.m as u64 + 1, &rows, false)?;
        let tables: Vec<u64> = nprod
            .iter()
            .map(|&p| gpu_bins::symbolic_global_table(p, self.n))
            .collect();
        // Each spilled row holds more than the spill limit of C's entries.
        let c_share = spilled as u64
            * u64::from(self.bins.spill_limit)
            * u64::from(self.types.index_bytes() + self.types.value_bytes());
        let global = GlobalTables::new(
            self,
            stream,
            &tables,
            (u64::from(self.types.index_bytes()), 0),
            c_share,
        )?;
        let block = self.bins.symbolic[self.bins.symbolic.len() - 1].block;
        for (range, table_offsets) in &global.batches {
            let rows_b = spill.ptr() + 4 * range.start as u64;
            let count = range.len() as i64;
            let keys = global.keys;
            let table_offsets = *table_offsets;
            let grid = count.min(i64::from(i32::MAX)) as u32;
            // SAFETY: see `estimate`.
            unsafe {
                self.launch(
                    "rs_symbolic_global",
                    grid,
                    block,
                    0,
                    stream,
                    &args![rows_b, count, ka, kb, row_size, table_offsets, keys],
                )?;
            }
        }
        Ok((spilled, global.batches.len()))
    }

    /// Numeric phase: writes C's row offsets, column indices and values
    /// (`alpha * A * B`, plus `beta` times the values already in C when
    /// `beta` is not zero) straight into C's arrays.
    ///
    /// `c` has `nnz` = the count [`GpuSpgemm::symbolic`] returned and its
    /// three arrays allocated by the caller (columns and values may be 0
    /// when nnz(C) = 0). `scalars` holds device pointers to alpha and beta
    /// ([`DeviceScalars`]). Queues
    /// everything on `stream` without waiting; may be called again (with
    /// new values of A and B on the same pattern).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] before the symbolic phase, or for a C of the
    /// wrong size or NULL arrays; [`Error::InsufficientResources`] when the
    /// hash tables of very long rows do not fit in device memory.
    pub fn numeric(
        &mut self,
        stream: RawStream,
        a: &DeviceCsr,
        b: &DeviceCsr,
        c: &DeviceCsr,
        scalars: DeviceScalars,
    ) -> Result<()> {
        let DeviceScalars {
            alpha,
            beta,
            beta_is_zero,
        } = scalars;
        let Some(s) = self.symbolic.as_ref() else {
            return Err(Error::InvalidValue(
                "the numeric phase (copy) was called before the symbolic phase (compute)".into(),
            ));
        };
        let (a, b) = &self.used_entries(a, b, "numeric phase", true)?;
        check_csr(c, "C", true)?;
        self.check_c_shape(c, s.nnz)?;
        if alpha == 0 || (beta == 0 && !beta_is_zero) {
            return Err(Error::InvalidValue(
                "alpha or beta is a NULL device pointer".into(),
            ));
        }
        self.dev.bind()?;
        self.numeric_batches_run.store(0, Ordering::Relaxed);
        let r = self.regather(stream, a, b).and_then(|()| {
            let (a, b) = self.operands(a, b);
            let beta = if beta_is_zero { 0 } else { beta };
            self.run_numeric(stream, &a, &b, c, alpha, beta)
        });
        let done = self.lanes.record_done(stream);
        r?;
        self.row_blocks_run = 0;
        done
    }

    /// Refuses a C whose shape or nnz is not the product's.
    fn check_c_shape(&self, c: &DeviceCsr, nnz: i64) -> Result<()> {
        if (c.nrows, c.ncols, c.nnz) != (self.m, self.n, nnz) {
            return Err(Error::InvalidValue(format!(
                "C is {} x {} with nnz {}; the product is {} x {} with nnz {}",
                c.nrows, c.ncols, c.nnz, self.m, self.n, nnz
            )));
        }
        Ok(())
    }

    fn run_numeric(
        &self,
        stream: RawStream,
        a: &DeviceCsr,
        b: &DeviceCsr,
        c: &DeviceCsr,
        alpha: u64,
        beta: u64,
    ) -> Result<()> {
        let s = self.symbolic.as_ref().expect("checked by numeric");
        self.write_c_offsets(stream, c.rows, c.base)?;
        if s.nnz == 0 {
            return Ok(());
        }
        let bins_ptr = self.meta.ptr() + self.layout.bins;
        let lists: Vec<(u64, i64)> = (s.numeric_offsets.iter().zip(&s.numeric_counts))
            .map(|(&at, &count)| (bins_ptr + 4 * at as u64, count))
            .collect();
        let out = NumericOut {
            cols: c.cols,
            vals: c.vals,
            base: c.base,
            alpha,
            beta,
        };
        // C is on the device whole: the batches of global tables may grow
        // with it.
        let entry = u64::from(self.types.index_bytes() + self.types.value_bytes());
        let c_share = s.nnz.max(0) as u64 * entry / NUMERIC_BATCH_C_DIVISOR;
        let global = (&s.global_tables[..], c_share);
        self.launch_numeric_bins(stream, a, b, &out, &lists, global)
    }

    /// Writes C's row offsets (C's offset type, `base` added) at `c_rows`
    /// from the plan's zero-based ones.
    fn write_c_offsets(&self, stream: RawStream, c_rows: u64, c_base: i32) -> Result<()> {
        let h = self.meta.ptr();
        let offsets = h + self.layout.row_size;
        let error = h + 8 * H_ERROR as u64;
        let m = self.m;
        let grid = self.grid(m as u64 + 1, PLAIN_BLOCK);
        // SAFETY: see `estimate`.
        unsafe {
            self.launch(
                match (self.c_offsets64, self.types.offset64) {
                    (true, false) => "rs_write_offsets_wide",
                    (false, true) => "rs_write_offsets_narrow",
                    _ => "rs_write_offsets",
                },
                grid,
                PLAIN_BLOCK,
                0,
                stream,
                &args![m, offsets, c_rows, c_base, error],
            )
        }
    }

    /// Launches the numeric kernels on the rows of `lists` (per numeric
    /// bin, the direct bin last: the device address of its rows and their
    /// count), the global bin's rows with tables of `global_tables`
    /// entries (in the order of its list) in batches of
    /// [`GpuSpgemm::global_batch_bytes`] of `c_share`, writing C's columns
    /// and values through `out` at the plan's zero-based row offsets.
    fn launch_numeric_bins(
        &self,
        stream: RawStream,
        a: &DeviceCsr,
        b: &DeviceCsr,
        out: &NumericOut,
        lists: &[(u64, i64)],
        (global_tables, c_share): (&[u64], u64),
    ) -> Result<()> {
        let h = self.meta.ptr();
        let beta = if out.beta == 0 {
            h + 8 * H_ZERO as u64
        } else {
            out.beta
        };
        let offsets = h + self.layout.row_size;
        let (ka, kb) = (KernelCsr::from(a), KernelCsr::from(b));
        let (alpha, c_cols, c_vals, c_base) = (out.alpha, out.cols, out.vals, out.base);
        let det: i32 = match (self.deterministic, self.b_canonical) {
            (false, _) => 0,
            (true, true) => 1,
            // Repeated columns in a B row: one thread per row keeps the
            // order of the sums.
            (true, false) => 2,
        };
        let num = &self.bins.numeric;
        let g = num.len() - 1;
        let direct = num.len();
        // Tables first: allocated on the caller's stream before the fork.
        let global = if lists[g].1 > 0 {
            Some(GlobalTables::new(
                self,
                stream,
                global_tables,
                (
                    u64::from(self.types.index_bytes()),
                    u64::from(self.types.value_bytes()),
                ),
                c_share,
            )?)
        } else {
            None
        };
        // Largest rows first: the global bin, shared bins from the largest,
        // the direct bin last.
        let order: Vec<usize> = std::iter::once(g)
            .chain((0..g).rev())
            .chain(std::iter::once(direct))
            .filter(|&j| lists[j].1 > 0)
            .collect();
        let fork = self.lanes.fork(stream, order.len().saturating_sub(1))?;
        for (lane, &j) in order.iter().enumerate() {
            let lane = fork.stream(lane);
            let (rows, count) = lists[j];
            if j == g {
                let global = global.as_ref().expect("allocated above");
                self.numeric_batches_run
                    .fetch_add(global.batches.len(), Ordering::Relaxed);
                let (keys, vals) = (global.keys, global.vals);
                for (range, table_offsets) in &global.batches {
                    let rows_b = rows + 4 * range.start as u64;
                    let count = range.len() as i64;
                    let table_offsets = *table_offsets;
                    let grid = count.min(i64::from(i32::MAX)) as u32;
                    // SAFETY: see `estimate`.
                    unsafe {
                        self.launch(
                            "rs_numeric_global",
                            grid,
                            num[g].block,
                            0,
                            lane,
                            &args![
                                rows_b,
                                count,
                                ka,
                                kb,
                                alpha,
                                beta,
                                offsets,
                                c_cols,
                                c_vals,
                                c_base,
                                table_offsets,
                                keys,
                                vals,
                                det
                            ],
                        )?;
                    }
                }
            } else if j == direct {
                let warps_per_block = u64::from(PLAIN_BLOCK / self.dev.limits().warp);
                let grid = (count as u64)
                    .div_ceil(warps_per_block)
                    .min(i32::MAX as u64) as u32;
                // SAFETY: see `estimate`.
                unsafe {
                    self.launch(
                        "rs_numeric_single",
                        grid,
                        PLAIN_BLOCK,
                        0,
                        lane,
                        &args![rows, count, ka, kb, alpha, beta, offsets, c_cols, c_vals, c_base],
                    )?;
                }
            } else {
                let bin = &num[j];
                let table = i64::from(bin.table_size);
                let (team, group) = (bin.team as i32, self.group.min(bin.team) as i32);
                let grid = Self::rows_grid(count, bin);
                // SAFETY: see `estimate`.
                unsafe {
                    self.launch(
                        "rs_numeric_shared",
                        grid,
                        bin.block,
                        bin.shared_bytes,
                        lane,
                        &args![
                            rows, count, ka, kb, alpha, beta, offsets, c_cols, c_vals, c_base,
                            table, team, group, det
                        ],
                    )?;
                }
            }
        }
        fork.join()?;
        // `global` is freed here, on the caller's stream, after the join.
        drop(global);
        Ok(())
    }

    // ---- helpers ------------------------------------------------------

    /// Blocks for a grid-stride kernel over `items`: enough to fill the
    /// device four times over, at least one.
    fn grid(&self, items: u64, block: u32) -> u32 {
        let l = self.dev.limits();
        let resident =
            u64::from(l.sm_count.max(1)) * u64::from((l.max_threads_per_sm / block).max(1));
        items.div_ceil(u64::from(block)).clamp(1, 4 * resident) as u32
    }

    /// Blocks for `count` rows of a shared-memory bin.
    fn rows_grid(count: i64, bin: &KernelBin) -> u32 {
        (count as u64)
            .div_ceil(u64::from(bin.rows_per_block().max(1)))
            .clamp(1, i32::MAX as u64) as u32
    }

    /// Launches kernel `name` (argument sizes checked against the launch
    /// contract).
    ///
    /// # Safety
    /// `args` must point at values of exactly the kernel's parameter types,
    /// alive until this returns; device pointers must be valid for the
    /// kernel's accesses in stream order.
    unsafe fn launch(
        &self,
        name: &str,
        grid: u32,
        block: u32,
        shared: u32,
        stream: RawStream,
        args: &[(*mut c_void, usize)],
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        let config = LaunchConfig {
            grid,
            block,
            shared,
        };
        unsafe { checked_launch(&*self.kernels, name, config, stream, args) }.map_err(|e| {
            e.context(&format!(
                "launching {name} (grid {grid}, block {block}, {shared} bytes of shared memory)"
            ))
        })
    }

    fn memset(&self, stream: RawStream, dst: u64, byte: u8, bytes: u64) -> Result<()> {
        // SAFETY: `dst..dst + bytes` lies in a live allocation.
        unsafe { self.dev.memset(dst, byte, bytes as usize, stream) }
            .map_err(|e| e.context("clearing device memory"))
    }

    fn upload<T: Copy>(&self, stream: RawStream, dst: u64, src: &[T]) -> Result<()> {
        // SAFETY: `dst` has room for `src`; plain old data viewed as bytes.
        unsafe { self.dev.upload(dst, as_bytes(src), stream) }
            .map_err(|e| e.context("copying to the device"))
    }

    /// Waits for `stream` and reads `n` values at `src`.
    fn read<T: Copy + Default>(&self, stream: RawStream, src: u64, n: usize) -> Result<Vec<T>> {
        let mut out = vec![T::default(); n];
        if n == 0 {
            return Ok(out);
        }
        // SAFETY: `src` holds `n` values of `T`, plain old data (integers).
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                out.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(&out[..]),
            )
        };
        // SAFETY: as above.
        unsafe { self.dev.download(bytes, src, stream) }
            .map_err(|e| e.context("reading back from the device"))?;
        Ok(out)
    }

    /// `array[r]` (or `array[r + 1] - array[r]` with `diff`) of `len` long
    /// longs for each listed row: single reads for a few rows, one copy of
    /// the whole array otherwise.
    fn gather(
        &self,
        stream: RawStream,
        array: u64,
        len: u64,
        rows: &[u32],
        diff: bool,
    ) -> Result<Vec<i64>> {
        let width = if diff { 2 } else { 1 };
        if (rows.len() as u64).saturating_mul(GATHER_RATIO) < len {
            rows.iter()
                .map(|&r| {
                    let v: Vec<i64> = self.read(stream, array + 8 * u64::from(r), width)?;
                    Ok(if diff { v[1] - v[0] } else { v[0] })
                })
                .collect()
        } else {
            let all: Vec<i64> = self.read(stream, array, len as usize)?;
            Ok(rows
                .iter()
                .map(|&r| {
                    let r = r as usize;
                    if diff {
                        all[r + 1] - all[r]
                    } else {
                        all[r]
                    }
                })
                .collect())
        }
    }

    /// Exclusive scan of `n` long longs at `data`, in place, with
    /// `scan_tiles(n)` words of tile totals at `sums`.
    fn scan(&self, stream: RawStream, data: u64, n: u64, sums: u64) -> Result<()> {
        let sb = self.scan_block;
        let tiles = scan_tiles(n, sb);
        let (n_arg, tiles_arg) = (n as i64, tiles as i64);
        let grid_tiles = tiles.clamp(1, i32::MAX as u64) as u32;
        let grid_add = self.grid(n, sb);
        // SAFETY: see `estimate`; `block_sums` holds a word per tile.
        unsafe {
            self.launch(
                "rs_scan_blocks",
                grid_tiles,
                sb,
                0,
                stream,
                &args![n_arg, data, sums],
            )?;
            self.launch("rs_scan_sums", 1, sb, 0, stream, &args![tiles_arg, sums])?;
            self.launch(
                "rs_scan_add",
                grid_add,
                sb,
                0,
                stream,
                &args![n_arg, data, sums],
            )?;
        }
        Ok(())
    }

    /// Bins the rows by `row_size` with the bounds at header word
    /// `bounds_word`; returns the rows per bin (`nb + 1`, the direct bin
    /// last) and where each bin starts in the bin array.
    fn bin_rows(
        &self,
        stream: RawStream,
        a_rows: u64,
        a_base: i32,
        bounds_word: usize,
        nb: usize,
    ) -> Result<(Vec<i64>, Vec<i64>)> {
        let h = self.meta.ptr();
        let word = |w: usize| h + 8 * w as u64;
        self.memset(stream, word(H_BIN_SIZE), 0, (2 * MAX_BINS * 8) as u64)?;
        self.memset(stream, word(H_MAX), 0, 8)?;
        let m = self.m;
        let row_size = h + self.layout.row_size;
        let (bounds, nb_arg) = (word(bounds_word), nb as i32);
        let (bin_size, bin_cursor, bin_offset, max_size) = (
            word(H_BIN_SIZE),
            word(H_BIN_CURSOR),
            word(H_BIN_OFFSET),
            word(H_MAX),
        );
        let bins = h + self.layout.bins;
        let grid = self.grid(m as u64, BIN_BLOCK);
        // SAFETY: see `estimate`.
        unsafe {
            self.launch(
                "rs_bin_count",
                grid,
                BIN_BLOCK,
                0,
                stream,
                &args![m, row_size, a_rows, a_base, bounds, nb_arg, bin_size, max_size],
            )?;
        }
        let counts: Vec<i64> = self.read(stream, bin_size, nb + 1)?;
        let offsets = exclusive(&counts);
        if counts.iter().sum::<i64>() > 0 {
            self.upload(stream, bin_offset, &offsets)?;
            // SAFETY: see `estimate`.
            unsafe {
                self.launch(
                    "rs_bin_fill",
                    grid,
                    BIN_BLOCK,
                    0,
                    stream,
                    &args![
                        m, row_size, a_rows, a_base, bounds, nb_arg, bin_offset, bin_cursor, bins
                    ],
                )?;
            }
        }
        Ok((counts, offsets))
    }
}

impl Drop for GpuSpgemm {
    fn drop(&mut self) {
        // Free the metadata after the plan's last work, ordered through the
        // `done` event on an extra stream: the caller's stream may be gone.
        let _ = self.dev.bind();
        let aux = self.lanes.streams[0];
        // SAFETY: live stream and event.
        let waited = unsafe { self.dev.wait(aux, self.lanes.done) };
        let stream = if waited.is_ok() {
            aux
        } else {
            // SAFETY: live event; then every earlier use has finished.
            let _ = unsafe { self.dev.synchronize(self.lanes.done) };
            std::ptr::null_mut()
        };
        self.meta.stream = stream;
        for t in [&mut self.a_t, &mut self.b_t].into_iter().flatten() {
            t.buf.stream = stream;
        }
    }
}

// After the `args!` macro above, which they use.
mod diagnose;
mod resources;
mod row_blocks;
pub use row_blocks::HostColumns;
mod row_counts;
mod transpose;

#[cfg(test)]
mod tests {
    use super::resources::table_budget;
    use super::*;

    #[test]
    fn kernel_csr_matches_rs_csr() {
        assert_eq!(std::mem::size_of::<KernelCsr>(), 56);
        assert_eq!(std::mem::align_of::<KernelCsr>(), 8);
        let d = DeviceCsr {
            rows: 1,
            cols: 2,
            vals: 3,
            nrows: 4,
            ncols: 5,
            nnz: 6,
            base: 1,
        };
        let k = KernelCsr::from(&d);
        assert_eq!(
            (k.rows, k.cols, k.vals, k.nrows, k.ncols, k.nnz, k.base, k.pad),
            (1, 2, 3, 4, 5, 6, 1, 0)
        );
    }

    #[test]
    fn batches_respect_the_budget() {
        assert_eq!(batches(&[], 10), Vec::<Range<usize>>::new());
        assert_eq!(batches(&[4, 4, 4], 10), vec![0..2, 2..3]);
        assert_eq!(batches(&[4, 4, 2], 10), vec![0..3]);
        // A table above the budget gets a batch of its own.
        assert_eq!(batches(&[2, 64, 2, 2], 10), vec![0..1, 1..2, 2..4]);
        assert_eq!(exclusive(&[3, 0, 2, 5]), vec![0, 3, 3, 5]);
    }

    #[test]
    fn chunk_fraction_bounds_the_global_tables() {
        let tables = [1u64 << 10, 1 << 12, 1 << 10, 1 << 11];
        let all: u64 = tables.iter().sum();
        // Without ALG3: 256 MiB of 12-byte entries.
        assert_eq!(table_budget(&tables, 12, None, 256 << 20), (256 << 20) / 12);
        // A batch smaller than the largest table holds that table.
        assert_eq!(table_budget(&tables, 12, None, 12), 1 << 12);
        // ALG3: a fraction of all tables, at least the largest one.
        assert_eq!(table_budget(&tables, 12, Some(1.0), 0), all);
        assert_eq!(table_budget(&tables, 12, Some(0.5), 0), all / 2);
        assert_eq!(table_budget(&tables, 12, Some(0.01), 0), 1 << 12);
        let b = table_budget(&tables, 12, Some(0.5), 0);
        let parts = batches(&tables, b);
        assert_eq!(parts.len(), 3);
        assert!(parts
            .iter()
            .all(|r| tables[r.clone()].iter().sum::<u64>() <= b));
        assert_eq!(
            batches(&tables, table_budget(&tables, 12, Some(1.0), 0)).len(),
            1
        );
    }

    #[test]
    fn layout_is_aligned_and_sized() {
        for m in [0u64, 1, 1000, 1 << 20] {
            let l = Layout::new(m, 1024);
            assert!(l.row_size >= (HEADER_WORDS * 8) as u64);
            for off in [l.row_size, l.block_sums, l.bins, l.total] {
                assert_eq!(off % 256, 0);
            }
            assert!(l.block_sums - l.row_size >= (m + 1) * 8);
            assert!(l.bins - l.block_sums >= scan_tiles(m + 1, 1024) * 8);
            assert!(l.total - l.bins >= m * 4);
        }
        // About 12 bytes per row.
        let l = Layout::new(1 << 20, 1024);
        assert!(l.total < 13 << 20, "{}", l.total);
    }

    #[test]
    fn bad_arguments_are_refused_before_any_device_work() {
        let good = DeviceCsr {
            rows: 8,
            cols: 16,
            vals: 24,
            nrows: 3,
            ncols: 3,
            nnz: 2,
            base: 0,
        };
        assert!(check_csr(&good, "A", true).is_ok());
        let bad = |f: fn(&mut DeviceCsr)| {
            let mut x = good;
            f(&mut x);
            check_csr(&x, "A", true).unwrap_err()
        };
        assert!(matches!(bad(|x| x.nrows = -1), Error::InvalidValue(m) if m.contains("negative")));
        assert!(matches!(bad(|x| x.base = 2), Error::InvalidValue(m) if m.contains("base")));
        assert!(matches!(bad(|x| x.rows = 0), Error::InvalidValue(m) if m.contains("row offsets")));
        assert!(matches!(bad(|x| x.cols = 0), Error::InvalidValue(m) if m.contains("column")));
        assert!(matches!(bad(|x| x.vals = 0), Error::InvalidValue(m) if m.contains("values")));
        let mut empty = good;
        (empty.nnz, empty.cols, empty.vals) = (0, 0, 0);
        assert!(check_csr(&empty, "A", true).is_ok());
    }
}
