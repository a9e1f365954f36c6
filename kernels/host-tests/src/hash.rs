//! The hash SpGEMM kernels of `kernels/setup.cu`, `kernels/symbolic.cu` and
//! `kernels/numeric.cu` through `kernels/testing/launch_hash.cpp`, and
//! [`hash_spgemm`], a small host driver of the kernels in pipeline order
//! (validation, setup, binning, symbolic, scan, numeric) whose bins, blocks
//! and tables a test chooses ([`PipelineConfig`]), for the kernel-level
//! tests in `tests/hash_kernels.rs` (tables filled to their bounds, rows at
//! the spill limit). rusparse's own pipeline, with the bins it plans for a
//! device, runs on the emulated device in `tests/gpu_pipeline.rs`.

use crate::scan_binning;
use crate::{need, KernelCsr, Kernels, Launch, TestValue, Variant};
use rusparse::{CsrView, Index, IndexBase};

pub use crate::Csr;

/// The entry points of this launcher file after the launch geometry
/// `(grid, block, shared)`, with `$V` for the variant: the one list that
/// [`HashKernels`] and its implementation for every variant are made from
/// (`raw_x = x`: the method `raw_x` calls `rs_host_x_<suffix>`).
macro_rules! hash_launchers {
    ($then:ident { $($head:tt)* } $V:ty) => {
        $then! {
            $($head)*
            raw_setup = setup(
                a: crate::Csr<$V>,
                b: crate::Csr<$V>,
                row_size: *mut i64,
                error: *mut u64,
            );
            raw_validate = validate(
                x: crate::Csr<$V>,
                code_offsets: i32,
                code_cols: i32,
                error: *mut u64,
                flags: *mut i64,
            );
            raw_symbolic_shared = symbolic_shared(
                rows: *const u32,
                count: i64,
                a: crate::Csr<$V>,
                b: crate::Csr<$V>,
                row_size: *mut i64,
                table_size: i64,
                team: i32,
                group: i32,
                spill_limit: i64,
                spill_rows: *mut u32,
                spill_count: *mut i64,
            );
            raw_symbolic_global = symbolic_global(
                rows: *const u32,
                count: i64,
                a: crate::Csr<$V>,
                b: crate::Csr<$V>,
                row_size: *mut i64,
                table_offsets: *const i64,
                tables: *mut crate::IndexOf<$V>,
            );
            raw_numeric_shared = numeric_shared(
                rows: *const u32,
                count: i64,
                a: crate::Csr<$V>,
                b: crate::Csr<$V>,
                alpha: *const crate::ValueOf<$V>,
                beta: *const crate::ValueOf<$V>,
                c_offsets: *const i64,
                c_cols: *mut crate::IndexOf<$V>,
                c_vals: *mut crate::ValueOf<$V>,
                c_base: i32,
                table_size: i64,
                team: i32,
                group: i32,
                deterministic: i32,
            );
            raw_numeric_global = numeric_global(
                rows: *const u32,
                count: i64,
                a: crate::Csr<$V>,
                b: crate::Csr<$V>,
                alpha: *const crate::ValueOf<$V>,
                beta: *const crate::ValueOf<$V>,
                c_offsets: *const i64,
                c_cols: *mut crate::IndexOf<$V>,
                c_vals: *mut crate::ValueOf<$V>,
                c_base: i32,
                table_offsets: *const i64,
                key_tables: *mut crate::IndexOf<$V>,
                val_tables: *mut crate::ValueOf<$V>,
                deterministic: i32,
            );
            raw_numeric_single = numeric_single(
                rows: *const u32,
                count: i64,
                a: crate::Csr<$V>,
                b: crate::Csr<$V>,
                alpha: *const crate::ValueOf<$V>,
                beta: *const crate::ValueOf<$V>,
                c_offsets: *const i64,
                c_cols: *mut crate::IndexOf<$V>,
                c_vals: *mut crate::ValueOf<$V>,
                c_base: i32,
            );
        }
    };
}

hash_launchers!(launcher_trait {
    /// The raw host entry points of `launch_hash.cpp`, one per kernel, with the
    /// kernel's parameters (kernels/README.md, "Launch contract") after the
    /// launch geometry. Pointers are host pointers.
    ///
    /// # Safety
    /// Every function runs a kernel that reads and writes through its pointers
    /// as the launch contract says: the arrays must be as long as the contract
    /// requires, the matrices must have passed `rs_setup` / `rs_validate`
    /// (except for those two), and row lists must name rows of A.
    /// [`hash_spgemm`], [`setup`] and [`validate`] are the safe ways in.
    pub trait HashKernels(grid, block, shared);
} Self);

for_each_variant!(
    launchers_for_variant,
    hash_launchers,
    HashKernels,
    (grid, block, shared)
);

/// What the hash tests run: every launcher of the crate plus this one.
pub trait HashVariant: Kernels + HashKernels {}
impl<T: Kernels + HashKernels> HashVariant for T {}

/// Runs a test body once per variant (as [`crate::VariantVisitor`], with
/// the hash kernels available).
pub trait HashVisitor {
    /// Called once per variant.
    fn visit<V: HashVariant>(&mut self);
}

/// Calls `visitor.visit::<V>()` for every variant.
pub fn visit_hash_variants(visitor: &mut impl HashVisitor) {
    macro_rules! visit {
        ($name:ident, $($rest:tt)*) => {
            visitor.visit::<crate::$name>();
        };
    }
    for_each_variant!(visit);
}

/// A CSR matrix in a variant's types, owned by the host (the emulator's
/// "device memory"). Rows may be unsorted and repeat columns; the arrays may
/// be malformed (the validation tests build such matrices on purpose), as
/// long as `cols` and `vals` hold the `rows[nrows] - base` entries the
/// offsets claim.
pub struct HostCsr<V: Variant> {
    /// Rows.
    pub nrows: usize,
    /// Columns.
    pub ncols: usize,
    /// `nrows + 1` offsets, starting at `base`.
    pub rows: Vec<V::Offset>,
    /// Column indices (`base`-based).
    pub cols: Vec<V::Index>,
    /// Values.
    pub vals: Vec<V::Value>,
    /// 0 or 1.
    pub base: i32,
}

impl<V: Variant> Clone for HostCsr<V> {
    fn clone(&self) -> Self {
        HostCsr {
            nrows: self.nrows,
            ncols: self.ncols,
            rows: self.rows.clone(),
            cols: self.cols.clone(),
            vals: self.vals.clone(),
            base: self.base,
        }
    }
}

impl<V: Variant> std::fmt::Debug for HostCsr<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostCsr")
            .field("variant", &V::NAME)
            .field("nrows", &self.nrows)
            .field("ncols", &self.ncols)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("vals", &self.vals)
            .field("base", &self.base)
            .finish()
    }
}

impl<V: Variant> HostCsr<V> {
    /// The matrix whose row `i` holds `rows[i]` (zero-based `(col, value)`
    /// in stored order, repeats kept).
    ///
    /// # Panics
    /// When an index does not fit the variant's types.
    pub fn from_rows(ncols: usize, rows: &[Vec<(usize, V::Value)>], base: i32) -> Self {
        let b = base as usize;
        let off = |v: usize| V::Offset::try_from_usize(v).expect("offset fits");
        let mut offsets = vec![off(b)];
        let mut cols = Vec::new();
        let mut vals = Vec::new();
        for row in rows {
            for &(c, v) in row {
                assert!(c < ncols, "column {c} of {ncols}");
                cols.push(V::Index::try_from_usize(c + b).expect("column fits"));
                vals.push(v);
            }
            offsets.push(off(cols.len() + b));
        }
        HostCsr {
            nrows: rows.len(),
            ncols,
            rows: offsets,
            cols,
            vals,
            base,
        }
    }

    /// The kernels' view (`struct rs_csr`).
    pub fn kernel(&self) -> Csr<'_, V> {
        assert_eq!(
            self.rows.len(),
            self.nrows + 1,
            "rows holds nrows + 1 offsets"
        );
        KernelCsr::new(
            &self.rows,
            &self.cols,
            Some(&self.vals),
            self.ncols as i64,
            self.base,
        )
    }

    /// rusparse's validated view (for the reference product).
    ///
    /// # Panics
    /// When the structure is invalid.
    pub fn view(&self) -> CsrView<'_, V::Value, V::Offset, V::Index> {
        let base = if self.base == 0 {
            IndexBase::Zero
        } else {
            IndexBase::One
        };
        CsrView::try_new(
            self.nrows, self.ncols, &self.rows, &self.cols, &self.vals, base,
        )
        .expect("a valid matrix")
    }

    /// Zero-based range of row `i`.
    pub fn range(&self, i: usize) -> std::ops::Range<usize> {
        let b = self.base as usize;
        self.rows[i].to_usize() - b..self.rows[i + 1].to_usize() - b
    }
}

/// Runs one launch; with `RS_HASH_TRACE` set, prints its kernel, geometry
/// and host time (the emulator's cost is per thread and barrier).
fn traced<R>(kernel: &str, l: Launch, f: impl FnOnce() -> R) -> R {
    let start = std::time::Instant::now();
    let r = f();
    if std::env::var_os("RS_HASH_TRACE").is_some() {
        eprintln!(
            "{kernel}: grid {} block {} shared {}: {:.1} ms",
            l.grid,
            l.block,
            l.shared,
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    r
}

/// The error key a kernel leaves when the inputs are good.
pub const NO_ERROR: u64 = !0;

/// Blocks for a grid-stride loop over `items` with `per_block` items per
/// block, at most `max_grid`.
pub fn grid_for(items: usize, per_block: usize, max_grid: i64) -> i64 {
    (items.div_ceil(per_block.max(1)) as i64).clamp(1, max_grid.max(1))
}

/// `rs_setup`: returns `row_size` (nprod of each row of A, then 0) and the
/// error key ([`NO_ERROR`] when A and B's rows it reads are good).
pub fn setup<V: HashKernels>(l: Launch, a: &Csr<'_, V>, b: &Csr<'_, V>) -> (Vec<i64>, u64) {
    let mut row_size = vec![-1i64; a.nrows as usize + 1];
    let mut error = NO_ERROR;
    // SAFETY: rs_setup reads a's nrows + 1 offsets, b's nrows + 1 offsets,
    // and only entries inside the ranges it validated against nnz, which
    // KernelCsr::new checked against the arrays; it writes m + 1 sizes.
    traced("setup", l, || unsafe {
        V::raw_setup(l, *a, *b, row_size.as_mut_ptr(), &mut error)
    });
    (row_size, error)
}

/// `rs_validate`: returns the error key and the flags (`[unsorted or
/// repeated, longest row]`).
pub fn validate<V: HashKernels>(
    l: Launch,
    x: &Csr<'_, V>,
    code_offsets: i32,
    code_cols: i32,
) -> (u64, [i64; 2]) {
    let mut error = NO_ERROR;
    let mut flags = [0i64; 2];
    // SAFETY: as for `setup`, rs_validate reads only validated ranges.
    traced("validate", l, || unsafe {
        V::raw_validate(
            l,
            *x,
            code_offsets,
            code_cols,
            &mut error,
            flags.as_mut_ptr(),
        )
    });
    (error, flags)
}

/// One bin of a phase: rows of size in (previous `max_size`, `max_size`]
/// run the shared-memory kernel with `table_size` slots per row, `team`
/// threads per row and blocks of `block` threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bin {
    /// Inclusive upper bound of the sizes (nprod or nnz) of the bin.
    pub max_size: i64,
    /// Table slots per row.
    pub table_size: i64,
    /// Threads per block.
    pub block: i64,
    /// Threads per row.
    pub team: i64,
}

/// How [`hash_spgemm`] runs the pipeline.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// Symbolic bins by nprod; longer rows go to `rs_symbolic_global`.
    pub symbolic: Vec<Bin>,
    /// `spill_limit` of the last symbolic bin (0: no spill).
    pub spill_limit: i64,
    /// Numeric bins by nnz; longer rows go to `rs_numeric_global`.
    pub numeric: Vec<Bin>,
    /// Block of the global-memory kernels.
    pub global_block: i64,
    /// Threads per B row in the shared kernels (clamped to the team).
    pub group: i64,
    /// Deterministic numeric phase.
    pub deterministic: bool,
    /// Rows of A with one entry through `rs_numeric_single` (when B is
    /// canonical).
    pub direct: bool,
    /// Largest grid of any launch (small values exercise the grid-stride
    /// loops).
    pub max_grid: i64,
    /// Block of setup and validation.
    pub setup_block: i64,
    /// Bin rows and scan with the binning and scan kernels (else on the
    /// host).
    pub device_binning: bool,
}

impl PipelineConfig {
    /// A small configuration for emulation: the bins as OpSparse shapes them
    /// (a packed bin of small tables, then one row per block with doubling
    /// tables, the last symbolic bin spilling at 0.8 of its table), with
    /// blocks of at most 128 threads.
    pub fn small(warp: i64) -> Self {
        let w = warp;
        PipelineConfig {
            symbolic: vec![
                Bin {
                    max_size: 26,
                    table_size: 32,
                    block: 2 * w,
                    team: 4,
                },
                Bin {
                    max_size: 106,
                    table_size: 128,
                    block: w,
                    team: w,
                },
                Bin {
                    max_size: 426,
                    table_size: 512,
                    block: 2 * w,
                    team: 2 * w,
                },
                Bin {
                    max_size: i64::MAX,
                    table_size: 1024,
                    block: 2 * w,
                    team: 2 * w,
                },
            ],
            spill_limit: 819,
            numeric: vec![
                Bin {
                    max_size: 16,
                    table_size: 32,
                    block: 2 * w,
                    team: 8,
                },
                Bin {
                    max_size: 32,
                    table_size: 64,
                    block: 2 * w,
                    team: 8,
                },
                Bin {
                    max_size: 128,
                    table_size: 256,
                    block: w,
                    team: w,
                },
                Bin {
                    max_size: 512,
                    table_size: 1024,
                    block: 2 * w,
                    team: 2 * w,
                },
            ],
            global_block: 2 * w,
            group: 4,
            deterministic: false,
            direct: true,
            max_grid: 8,
            setup_block: w,
            device_binning: false,
        }
    }
}

/// Where the rows of one product went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Rows per symbolic bin (shared kernels).
    pub symbolic_rows: Vec<usize>,
    /// Rows sent straight to `rs_symbolic_global` (nprod above every bin).
    pub symbolic_global_rows: usize,
    /// Rows the last symbolic bin spilled to `rs_symbolic_global`.
    pub spilled: Vec<u32>,
    /// Rows per numeric bin (shared kernels).
    pub numeric_rows: Vec<usize>,
    /// Rows through `rs_numeric_global`.
    pub numeric_global_rows: usize,
    /// Rows through `rs_numeric_single`.
    pub direct_rows: usize,
    /// Flags of `rs_validate` on B.
    pub b_flags: [i64; 2],
}

/// Dynamic shared memory of the symbolic kernel for `bin`.
pub fn symbolic_shared_bytes<V: Variant>(bin: &Bin) -> i64 {
    (bin.block / bin.team) * bin.table_size * std::mem::size_of::<V::Index>() as i64 + 16
}

/// Dynamic shared memory of the numeric kernel for `bin`.
pub fn numeric_shared_bytes<V: Variant>(bin: &Bin) -> i64 {
    let entry = std::mem::size_of::<V::Index>() + std::mem::size_of::<V::Value>();
    (bin.block / bin.team) * bin.table_size * entry as i64 + 16
}

/// Splits rows `0..m` by size: bin `j < bounds.len()` takes sizes in
/// `(bounds[j - 1], bounds[j]]`, size 0 goes nowhere, and rows with `direct`
/// go to the extra last bin. Either on the host or with `rs_bin_count`,
/// a scan and `rs_bin_fill`.
fn bin_rows<V: HashVariant>(
    cfg: &PipelineConfig,
    sizes: &[i64],
    a_rows: Option<&[V::Offset]>,
    bounds: &[i64],
) -> Vec<Vec<u32>> {
    let m = sizes.len();
    let nb = bounds.len();
    if !cfg.device_binning {
        let mut bins = vec![Vec::new(); nb + 1];
        for (i, &s) in sizes.iter().enumerate() {
            if s == 0 {
                continue;
            }
            let single = a_rows.is_some_and(|r| r[i + 1].to_i64() - r[i].to_i64() == 1);
            let j = if single {
                nb
            } else {
                bounds
                    .iter()
                    .position(|&b| s <= b)
                    .expect("the last bound takes every size")
            };
            bins[j].push(i as u32);
        }
        return bins;
    }
    let l = Launch::new(
        grid_for(m, cfg.setup_block as usize, cfg.max_grid),
        cfg.setup_block,
    );
    let mut bin_size = vec![0i64; nb + 1];
    let mut max_size = 0i64;
    scan_binning::bin_count::<V>(l, m, sizes, a_rows, bounds, &mut bin_size, &mut max_size);
    let mut bin_offset = vec![0i64; nb + 1];
    for j in 1..=nb {
        bin_offset[j] = bin_offset[j - 1] + bin_size[j - 1];
    }
    let total = (bin_offset[nb] + bin_size[nb]) as usize;
    let mut bins = vec![u32::MAX; total];
    let mut cursor = vec![0i64; nb + 1];
    // SAFETY: bin_offset is the exclusive scan of the counts rs_bin_count
    // made of the same sizes, and `bins` holds their sum.
    unsafe {
        scan_binning::bin_fill::<V>(
            l,
            m,
            sizes,
            a_rows,
            bounds,
            &bin_offset,
            &mut cursor,
            &mut bins,
        )
    };
    (0..=nb)
        .map(|j| {
            let lo = bin_offset[j] as usize;
            bins[lo..lo + bin_size[j] as usize].to_vec()
        })
        .collect()
}

/// Global-memory tables: offsets (`sizes.len() + 1`) of power-of-two
/// tables of at least `want(size)` slots.
fn table_offsets(sizes: impl Iterator<Item = i64>, want: impl Fn(i64) -> i64) -> Vec<i64> {
    let mut off = vec![0i64];
    for s in sizes {
        let t = (want(s).max(32) as u64).next_power_of_two() as i64;
        off.push(off.last().unwrap() + t);
    }
    off
}

/// `C = alpha * A * B (+ beta * C)` through the device pipeline: validation
/// of B, setup (A's validation and nprod), symbolic binning, the symbolic
/// kernels (spilling to the global kernel), the scan into C's row offsets,
/// numeric binning (with the direct bin when B is canonical) and the
/// numeric kernels. C's base is A's. `initial` fills C's values before the
/// numeric phase (the old values beta scales); without it they are NaN, so
/// a kernel reading them while `beta == 0` shows. Blocks and tables come
/// from `cfg`.
///
/// # Errors
/// The error key of the validation kernels (`(row << 8) | code`).
///
/// # Panics
/// When `initial` does not hold nnz(C) values, or nnz(C) does not fit the
/// offset type.
pub fn hash_spgemm<V: HashVariant>(
    a: &HostCsr<V>,
    b: &HostCsr<V>,
    alpha: V::Value,
    beta: V::Value,
    initial: Option<&[V::Value]>,
    cfg: &PipelineConfig,
) -> Result<(HostCsr<V>, PipelineStats), u64> {
    let (ka, kb) = (a.kernel(), b.kernel());
    let m = a.nrows;
    let mut stats = PipelineStats::default();
    let setup_launch = |rows: usize| {
        Launch::new(
            grid_for(rows, cfg.setup_block as usize, cfg.max_grid),
            cfg.setup_block,
        )
    };

    // Validation and setup.
    let (b_error, b_flags) = validate::<V>(setup_launch(b.nrows), &kb, 3, 4);
    stats.b_flags = b_flags;
    let (mut row_size, a_error) = setup::<V>(setup_launch(m), &ka, &kb);
    let error = b_error.min(a_error);
    if error != NO_ERROR {
        return Err(error);
    }
    let b_canonical = b_flags[0] == 0;

    // Symbolic phase.
    let mut bounds: Vec<i64> = cfg.symbolic.iter().map(|bin| bin.max_size).collect();
    let unbounded = bounds.last() == Some(&i64::MAX);
    if !unbounded {
        bounds.push(i64::MAX);
    }
    let bins = bin_rows::<V>(cfg, &row_size[..m], None, &bounds);
    let mut global_rows: Vec<u32> = if unbounded {
        Vec::new()
    } else {
        bins[cfg.symbolic.len()].clone()
    };
    stats.symbolic_global_rows = global_rows.len();
    for (j, bin) in cfg.symbolic.iter().enumerate() {
        let rows = &bins[j];
        stats.symbolic_rows.push(rows.len());
        if rows.is_empty() {
            continue;
        }
        let rpb = (bin.block / bin.team) as usize;
        let spill = if j + 1 == cfg.symbolic.len() {
            cfg.spill_limit
        } else {
            0
        };
        let mut spill_rows = vec![u32::MAX; rows.len()];
        let mut spill_count = 0i64;
        let l = Launch {
            grid: grid_for(rows.len(), rpb, cfg.max_grid),
            block: bin.block,
            shared: symbolic_shared_bytes::<V>(bin),
        };
        // SAFETY: A and B passed validation; the row list holds rows < m;
        // row_size holds m + 1 entries; spill_rows has room for every row.
        traced("symbolic_shared", l, || unsafe {
            V::raw_symbolic_shared(
                l,
                rows.as_ptr(),
                rows.len() as i64,
                ka,
                kb,
                row_size.as_mut_ptr(),
                bin.table_size,
                bin.team as i32,
                cfg.group as i32,
                spill,
                spill_rows.as_mut_ptr(),
                &mut spill_count,
            )
        });
        spill_rows.truncate(spill_count as usize);
        global_rows.extend_from_slice(&spill_rows);
        stats.spilled.extend_from_slice(&spill_rows);
    }
    if !global_rows.is_empty() {
        let ncols = b.ncols as i64;
        let offsets = table_offsets(global_rows.iter().map(|&r| row_size[r as usize]), |nprod| {
            nprod.min(ncols) * 5 / 4 + 1
        });
        let mut tables = vec![V::Index::default(); *offsets.last().unwrap() as usize];
        let l = Launch::new(
            grid_for(global_rows.len(), 1, cfg.max_grid),
            cfg.global_block,
        );
        // SAFETY: validated inputs; table k spans offsets[k]..offsets[k + 1]
        // of `tables`, at least the row's distinct columns.
        traced("symbolic_global", l, || unsafe {
            V::raw_symbolic_global(
                l,
                global_rows.as_ptr(),
                global_rows.len() as i64,
                ka,
                kb,
                row_size.as_mut_ptr(),
                offsets.as_ptr(),
                tables.as_mut_ptr(),
            )
        });
    }

    // C's row offsets.
    let nnz_row: Vec<i64> = row_size[..m].to_vec();
    let mut offsets = row_size.clone();
    offsets[m] = 0;
    if cfg.device_binning {
        scan_binning::exclusive_scan::<V>(cfg.setup_block, cfg.max_grid, &mut offsets);
    } else {
        let mut run = 0i64;
        for o in offsets.iter_mut() {
            let s = *o;
            *o = run;
            run += s;
        }
    }
    let nnz = offsets[m] as usize;
    let c_rows: Vec<V::Offset> = offsets
        .iter()
        .map(|&o| V::Offset::try_from_usize(o as usize + a.base as usize).expect("nnz(C) fits"))
        .collect();

    // Numeric phase.
    let mut c_cols = vec![V::Index::default(); nnz];
    let mut c_vals = match initial {
        Some(v) => {
            assert_eq!(v.len(), nnz, "initial holds nnz(C) values");
            v.to_vec()
        }
        None => vec![V::Value::from_parts(f64::NAN, f64::NAN); nnz],
    };
    let mut bounds: Vec<i64> = cfg.numeric.iter().map(|bin| bin.max_size).collect();
    bounds.push(i64::MAX);
    let direct = cfg.direct && b_canonical;
    let bins = bin_rows::<V>(cfg, &nnz_row, direct.then_some(&a.rows[..]), &bounds);
    // Deterministic mode 2 when B's rows may repeat a column (README).
    let det = match (cfg.deterministic, b_canonical) {
        (false, _) => 0,
        (true, true) => 1,
        (true, false) => 2,
    };
    for (j, bin) in cfg.numeric.iter().enumerate() {
        let rows = &bins[j];
        stats.numeric_rows.push(rows.len());
        if rows.is_empty() {
            continue;
        }
        let rpb = (bin.block / bin.team) as usize;
        let l = Launch {
            grid: grid_for(rows.len(), rpb, cfg.max_grid),
            block: bin.block,
            shared: numeric_shared_bytes::<V>(bin),
        };
        // SAFETY: validated inputs; c_offsets from the symbolic counts, C's
        // arrays hold nnz(C) entries.
        traced("numeric_shared", l, || unsafe {
            V::raw_numeric_shared(
                l,
                rows.as_ptr(),
                rows.len() as i64,
                ka,
                kb,
                &alpha,
                &beta,
                offsets.as_ptr(),
                c_cols.as_mut_ptr(),
                c_vals.as_mut_ptr(),
                a.base,
                bin.table_size,
                bin.team as i32,
                cfg.group as i32,
                det,
            )
        });
    }
    let global_rows = &bins[cfg.numeric.len()];
    stats.numeric_global_rows = global_rows.len();
    if !global_rows.is_empty() {
        let toff = table_offsets(global_rows.iter().map(|&r| nnz_row[r as usize]), |n| 2 * n);
        let total = *toff.last().unwrap() as usize;
        let mut keys = vec![V::Index::default(); total];
        let mut vals = vec![V::Value::default(); total];
        let l = Launch::new(
            grid_for(global_rows.len(), 1, cfg.max_grid),
            cfg.global_block,
        );
        // SAFETY: as above; table k spans toff[k]..toff[k + 1] of both.
        traced("numeric_global", l, || unsafe {
            V::raw_numeric_global(
                l,
                global_rows.as_ptr(),
                global_rows.len() as i64,
                ka,
                kb,
                &alpha,
                &beta,
                offsets.as_ptr(),
                c_cols.as_mut_ptr(),
                c_vals.as_mut_ptr(),
                a.base,
                toff.as_ptr(),
                keys.as_mut_ptr(),
                vals.as_mut_ptr(),
                det,
            )
        });
    }
    let single = &bins[cfg.numeric.len() + 1];
    stats.direct_rows = single.len();
    if !single.is_empty() {
        let per_block = (cfg.setup_block / V::WARP) as usize;
        let l = Launch::new(
            grid_for(single.len(), per_block, cfg.max_grid),
            cfg.setup_block,
        );
        // SAFETY: validated inputs, B canonical, rows of A with one entry.
        traced("numeric_single", l, || unsafe {
            V::raw_numeric_single(
                l,
                single.as_ptr(),
                single.len() as i64,
                ka,
                kb,
                &alpha,
                &beta,
                offsets.as_ptr(),
                c_cols.as_mut_ptr(),
                c_vals.as_mut_ptr(),
                a.base,
            )
        });
    }
    need("c_rows", &c_rows, m + 1);
    Ok((
        HostCsr {
            nrows: m,
            ncols: b.ncols,
            rows: c_rows,
            cols: c_cols,
            vals: c_vals,
            base: a.base,
        },
        stats,
    ))
}
