//! Row bins and kernel configurations of the GPU pipeline, derived from the
//! device's properties (OpSparse §5.6; the DCU study for the
//! refinements), shared by the CUDA and HIP back ends.
//!
//! OpSparse tuned its tables for a V100 (96 KiB of shared memory and 2,048
//! threads per SM). The same reasoning, applied to whatever device runs:
//!
//! * **Bin 0** packs many short rows into one block, `team` threads per row
//!   (4 in the symbolic phase, 8 in the numeric one, as OpSparse), with the
//!   largest power-of-two table that still lets a full SM's worth of teams
//!   be resident: `shared_per_sm * team / max_threads_per_sm` bytes per row.
//! * **Bins 1..** give one block per row. Block sizes double from 64
//!   threads; each table is the largest power of two that lets
//!   `max_threads_per_sm / block` blocks share the SM's memory (full
//!   occupancy), then one more bin with the largest power-of-two table one
//!   block may opt into (half or less occupancy, but far cheaper than
//!   global memory).
//! * A row goes to the first bin whose table is at least 1.2× its nprod
//!   (symbolic, OpSparse's `sym_1.2x`) or 2× its nnz (numeric, `num_2x`).
//! * The symbolic phase's last bin takes every longer row and spills a row
//!   to the global-memory kernel once its count reaches 0.8 of the table;
//!   the numeric phase's last bin *is* the global-memory kernel, so rows of
//!   10⁴ and more entries (power-law graphs) never overflow anything.
//!
//! Tables are powers of two so probing uses a mask; every table size, block
//! size and byte count here is checked against the device's limits by the
//! tests below for a V100, an A100, an H100, a 64-wide AMD MI50 and a Hygon
//! DCU (48 KiB per block), the last compared with the DCU study's tables.

/// The device properties the bins are derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceLimits {
    /// Threads per warp (32 on NVIDIA, 64 on AMD GCN/CDNA and Hygon DCUs).
    pub warp: u32,
    /// Streaming multiprocessors (compute units).
    pub sm_count: u32,
    /// Most threads in one block.
    pub max_threads_per_block: u32,
    /// Most threads resident on one SM.
    pub max_threads_per_sm: u32,
    /// Shared memory one block gets without opting in (48 KiB on NVIDIA).
    pub shared_per_block: u32,
    /// Shared memory one block may opt into (equal to `shared_per_block`
    /// where the device has no opt-in).
    pub shared_per_block_optin: u32,
    /// Shared memory of one SM.
    pub shared_per_sm: u32,
    /// Shared memory the hardware reserves for each resident block (1 KiB
    /// from sm_80 on, `CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK`;
    /// 0 on a V100 and on AMD).
    pub reserved_shared_per_block: u32,
}

/// Reference devices: the planner's tests and the host-emulated kernel
/// tests derive their bins from these.
impl DeviceLimits {
    /// NVIDIA V100 (sm_70): 96 KiB of shared memory per SM, OpSparse's device.
    pub const V100: DeviceLimits = DeviceLimits {
        warp: 32,
        sm_count: 80,
        max_threads_per_block: 1024,
        max_threads_per_sm: 2048,
        shared_per_block: 48 << 10,
        shared_per_block_optin: 96 << 10,
        shared_per_sm: 96 << 10,
        reserved_shared_per_block: 0,
    };
    /// NVIDIA A100 (sm_80).
    pub const A100: DeviceLimits = DeviceLimits {
        warp: 32,
        sm_count: 108,
        max_threads_per_block: 1024,
        max_threads_per_sm: 2048,
        shared_per_block: 48 << 10,
        shared_per_block_optin: 163 << 10,
        shared_per_sm: 164 << 10,
        reserved_shared_per_block: 1024,
    };
    /// NVIDIA H100 (sm_90): 227 KiB of shared memory a block may opt into.
    pub const H100: DeviceLimits = DeviceLimits {
        warp: 32,
        sm_count: 132,
        max_threads_per_block: 1024,
        max_threads_per_sm: 2048,
        shared_per_block: 48 << 10,
        shared_per_block_optin: 227 << 10,
        shared_per_sm: 228 << 10,
        reserved_shared_per_block: 1024,
    };
    /// AMD MI50 (gfx906): 64-wide wavefronts, 64 KiB of LDS per CU, all of
    /// it available to one block.
    pub const MI50: DeviceLimits = DeviceLimits {
        warp: 64,
        sm_count: 60,
        max_threads_per_block: 1024,
        max_threads_per_sm: 2560,
        shared_per_block: 64 << 10,
        shared_per_block_optin: 64 << 10,
        shared_per_sm: 64 << 10,
        reserved_shared_per_block: 0,
    };
    /// Hygon DCU as the DCU study describes it (gfx906-like): 64-wide
    /// wavefronts, 64 KiB of LDS per CU, 48 KiB per block.
    pub const HYGON_DCU: DeviceLimits = DeviceLimits {
        warp: 64,
        sm_count: 60,
        max_threads_per_block: 1024,
        max_threads_per_sm: 2560,
        shared_per_block: 48 << 10,
        shared_per_block_optin: 48 << 10,
        shared_per_sm: 64 << 10,
        reserved_shared_per_block: 0,
    };
}

/// One bin: the rows it takes and the kernel configuration that runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelBin {
    /// Largest row size (nprod or nnz) of the bin, inclusive; the previous
    /// bin's `max_size` is the exclusive lower bound. The last bin has
    /// `i64::MAX`.
    pub max_size: i64,
    /// Hash table entries per row (a power of two); 0 for the
    /// global-memory kernel.
    pub table_size: u32,
    /// Threads per block.
    pub block: u32,
    /// Threads per row (`block` when a block takes one row).
    pub team: u32,
    /// Dynamic shared memory per block in bytes.
    pub shared_bytes: u32,
}

impl KernelBin {
    /// Rows one block computes.
    pub fn rows_per_block(&self) -> u32 {
        self.block / self.team
    }

    /// Whether this bin runs the global-memory kernel.
    pub fn is_global(&self) -> bool {
        self.table_size == 0
    }
}

/// The bins of both phases for one device and one pair of types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuBins {
    /// Symbolic bins by nprod; all use shared tables, the last spills.
    pub symbolic: Vec<KernelBin>,
    /// Count at which a row of the last symbolic bin moves to the
    /// global-memory kernel (0.8 of its table).
    pub spill_limit: u32,
    /// Numeric bins by nnz; the last is the global-memory kernel.
    pub numeric: Vec<KernelBin>,
}

/// Bytes of shared memory a kernel keeps beside its tables (counters).
pub const KERNEL_SHARED_EXTRA: u32 = 16;

/// Smallest block of the one-row-per-block kernels (OpSparse's 64).
const MIN_ROW_BLOCK: u32 = 64;

/// Block size of bin 0 (many rows per block).
const PACKED_BLOCK: u32 = 256;

fn pow2_floor(x: u64) -> u64 {
    if x == 0 {
        0
    } else {
        1 << (63 - x.leading_zeros())
    }
}

/// Inputs of one phase's bin list.
struct PhaseShape {
    /// Bytes per table entry.
    entry_bytes: u32,
    /// Threads per row in bin 0.
    packed_team: u32,
    /// Table entries per row size unit: a row of size `s` needs a table of
    /// at least `s * load_num / load_den` entries.
    load_num: i64,
    load_den: i64,
    /// The last bin is the global-memory kernel.
    global_last: bool,
}

impl PhaseShape {
    fn max_rows_for(&self, table: u32) -> i64 {
        i64::from(table) * self.load_den / self.load_num
    }
}

fn phase_bins(d: &DeviceLimits, p: &PhaseShape) -> Vec<KernelBin> {
    let max_block = d.max_threads_per_block.min(1024).max(d.warp);
    let fits = |table: u64, rows: u32| -> Option<u32> {
        let bytes =
            table * u64::from(p.entry_bytes) * u64::from(rows) + u64::from(KERNEL_SHARED_EXTRA);
        (bytes <= u64::from(d.shared_per_block_optin)).then_some(bytes as u32)
    };
    let mut bins = Vec::new();
    let push = |bins: &mut Vec<KernelBin>, table: u64, block: u32, team: u32| {
        let rows = block / team;
        let Some(shared_bytes) = fits(table, rows) else {
            return;
        };
        let table = table as u32;
        let max_size = p.max_rows_for(table);
        if bins
            .last()
            .is_some_and(|b: &KernelBin| b.max_size >= max_size)
            || max_size < 1
        {
            return;
        }
        bins.push(KernelBin {
            max_size,
            table_size: table,
            block,
            team,
            shared_bytes,
        });
    };

    // Bin 0: packed teams at full occupancy.
    let team = p.packed_team.min(max_block);
    let block = PACKED_BLOCK.clamp(d.warp, max_block);
    let per_row = u64::from(d.shared_per_sm) * u64::from(team) / u64::from(d.max_threads_per_sm);
    let per_row = per_row.saturating_sub(
        u64::from(d.reserved_shared_per_block + KERNEL_SHARED_EXTRA) * u64::from(team)
            / u64::from(block),
    );
    push(
        &mut bins,
        pow2_floor(per_row / u64::from(p.entry_bytes)),
        block,
        team,
    );

    // Bins 1..: one row per block, full occupancy.
    let mut block = MIN_ROW_BLOCK.max(d.warp).min(max_block);
    loop {
        let resident = (d.max_threads_per_sm / block).max(1);
        let share = (d.shared_per_sm / resident)
            .min(d.shared_per_block_optin)
            .saturating_sub(d.reserved_shared_per_block + KERNEL_SHARED_EXTRA);
        push(
            &mut bins,
            pow2_floor(u64::from(share / p.entry_bytes)),
            block,
            block,
        );
        if block >= max_block {
            break;
        }
        block *= 2;
    }
    // One more: the largest table a block may opt into.
    let share = d
        .shared_per_block_optin
        .min(d.shared_per_sm.saturating_sub(d.reserved_shared_per_block))
        .saturating_sub(KERNEL_SHARED_EXTRA);
    push(
        &mut bins,
        pow2_floor(u64::from(share / p.entry_bytes)),
        max_block,
        max_block,
    );

    if p.global_last {
        bins.push(KernelBin {
            max_size: i64::MAX,
            table_size: 0,
            block: max_block,
            team: max_block,
            shared_bytes: KERNEL_SHARED_EXTRA,
        });
    } else if let Some(last) = bins.last_mut() {
        last.max_size = i64::MAX;
    }
    bins
}

/// The symbolic and numeric bins for a device, with column indices of
/// `index_bytes` and values of `value_bytes`.
pub fn gpu_bins(limits: &DeviceLimits, index_bytes: u32, value_bytes: u32) -> GpuBins {
    let symbolic = phase_bins(
        limits,
        &PhaseShape {
            entry_bytes: index_bytes,
            packed_team: 4,
            load_num: 6,
            load_den: 5,
            global_last: false,
        },
    );
    let numeric = phase_bins(
        limits,
        &PhaseShape {
            entry_bytes: index_bytes + value_bytes,
            packed_team: 8,
            load_num: 2,
            load_den: 1,
            global_last: true,
        },
    );
    let spill_limit = symbolic
        .last()
        .map_or(0, |b| (u64::from(b.table_size) * 4 / 5) as u32);
    GpuBins {
        symbolic,
        spill_limit,
        numeric,
    }
}

/// The inclusive upper bounds of `bins`, as the binning kernels take them.
pub fn bin_bounds(bins: &[KernelBin]) -> Vec<i64> {
    bins.iter().map(|b| b.max_size).collect()
}

/// Threads that share one row of B (the DCU study's G): a power of two
/// from 2 to the warp width, about four entries each of the B rows the
/// product reads. Their mean length is the products per entry of A
/// (`nprod / nnz(A)`): each entry of A reads one row of B, so rows read
/// often (the hubs of a power-law graph) weigh as often as they are read.
///
/// Trained on an H200 (`scripts/gpu-check.sh`'s selector sweep: G from 2
/// to 32 on 8 generated and 11 real matrices; `bench/fit_gpu_selector.py`,
/// docs/benchmarks.md "GPU selector"): with each matrix left out of the fit
/// in turn, the rule's time on it is 1.033× its best G (geomean), where the
/// rule before (about eight entries per thread of B's mean row, at most four
/// times the mean) was 1.12× off: power-law graphs read their long rows far
/// more often than B's mean says (rmat at scale 18: 2× faster at G = 32).
pub fn threads_per_b_row(nprod: i64, a_nnz: i64, warp: u32) -> u32 {
    const ENTRIES_PER_THREAD: u64 = 4;
    let mean_read = match u64::try_from(a_nnz) {
        Ok(entries) if entries > 0 => (nprod.max(0) as u64).div_ceil(entries),
        _ => 0,
    };
    let want = mean_read.div_ceil(ENTRIES_PER_THREAD).max(1);
    let g = u32::try_from(want)
        .unwrap_or(u32::MAX)
        .checked_next_power_of_two()
        .unwrap_or(u32::MAX);
    g.clamp(2, warp.max(2))
}

/// Keys of the global symbolic table of a row with `nprod` products and
/// `ncols` possible columns: a power of two with load at most 0.8, never
/// below 32.
pub fn symbolic_global_table(nprod: i64, ncols: i64) -> u64 {
    let distinct = nprod.min(ncols).max(0) as u64;
    (distinct.saturating_mul(5) / 4 + 1)
        .max(32)
        .next_power_of_two()
}

/// Bytes of the column bitmap with which `rs_numeric_global` ranks a
/// row's entries (one bit per column of op(B) and one prefix count per 32
/// columns, 32-bit words).
pub fn rank_bitmap_bytes(ncols: i64) -> u64 {
    (ncols.max(0) as u64).div_ceil(32).saturating_mul(8)
}

/// How much larger than its hash table (twice the row's nnz) a global
/// numeric table may grow to hold the rank bitmap as well.
const RANK_TABLE_GROWTH: u64 = 4;

/// Entries of the global numeric table of a row with `nnz` entries: a
/// power of two of at least twice `nnz` (OpSparse's `num_2x`), never below
/// 32. Where op(B)'s `ncols` columns are few enough, also room past the
/// row's entries for the rank bitmap ([`rank_bitmap_bytes`], in the values
/// of `value_bytes` each), up to [`RANK_TABLE_GROWTH`] times the hash
/// table: the kernel then writes the row in column order by ranks, O(nnz +
/// ncols / 32), instead of a bitonic sort, O(nnz log^2 nnz) in global
/// memory. Without the room it sorts.
pub fn numeric_global_table(nnz: i64, ncols: i64, value_bytes: u32) -> u64 {
    let nnz = nnz.max(0) as u64;
    let hashed = nnz.saturating_mul(2).max(32).next_power_of_two();
    let bitmap_values = rank_bitmap_bytes(ncols).div_ceil(u64::from(value_bytes.max(1)));
    let ranked = nnz
        .saturating_add(bitmap_values)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX);
    if ranked <= hashed.saturating_mul(RANK_TABLE_GROWTH) {
        hashed.max(ranked)
    } else {
        hashed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(d: &DeviceLimits, bins: &[KernelBin], entry: u32, global_last: bool) {
        assert!(bins.len() >= 4, "{bins:?}");
        let mut prev = 0;
        for (k, b) in bins.iter().enumerate() {
            assert!(b.max_size > prev, "bounds increase: {bins:?}");
            prev = b.max_size;
            assert!(b.block <= d.max_threads_per_block && b.block % d.warp == 0);
            assert!(b.team.is_power_of_two() && b.block % b.team == 0);
            assert!(b.shared_bytes <= d.shared_per_block_optin);
            let last = k + 1 == bins.len();
            assert_eq!(b.max_size == i64::MAX, last);
            if b.is_global() {
                assert!(global_last && last);
                continue;
            }
            assert!(b.table_size.is_power_of_two());
            assert_eq!(
                b.shared_bytes,
                b.table_size * entry * b.rows_per_block() + KERNEL_SHARED_EXTRA
            );
            // Every row of the bin fits its table with the phase's load.
            if !last {
                let load = if global_last { 2 } else { 1 };
                assert!(b.max_size * load <= i64::from(b.table_size), "{b:?}");
            }
        }
        assert!(bins[0].team < bins[0].block, "bin 0 packs rows");
    }

    #[test]
    fn bins_respect_every_device() {
        for d in [
            DeviceLimits::V100,
            DeviceLimits::A100,
            DeviceLimits::H100,
            DeviceLimits::MI50,
            DeviceLimits::HYGON_DCU,
        ] {
            for (ib, vb) in [(4, 4), (4, 8), (8, 16), (8, 8)] {
                let g = gpu_bins(&d, ib, vb);
                check(&d, &g.symbolic, ib, false);
                check(&d, &g.numeric, ib + vb, true);
                let last = g.symbolic.last().unwrap();
                assert!(g.spill_limit > 0 && g.spill_limit < last.table_size);
            }
        }
    }

    #[test]
    fn v100_resembles_opsparse_tables() {
        // OpSparse Table 1 (symbolic) starts with a 32-entry table for 4
        // threads per row (rows up to 26) and 512 entries for 64-thread
        // blocks; Table 2 (numeric, f64) with 31 entries for 8 threads
        // (rows up to 16) and 255 for 64-thread blocks. Powers of two keep
        // the first bins and halve the 255 (rows up to 64, not 128).
        let g = gpu_bins(&DeviceLimits::V100, 4, 8);
        assert_eq!((g.symbolic[0].table_size, g.symbolic[0].team), (32, 4));
        assert_eq!(g.symbolic[0].max_size, 26);
        assert_eq!(g.symbolic[1].block, 64);
        assert_eq!(g.symbolic[1].table_size, 512);
        assert_eq!((g.numeric[0].table_size, g.numeric[0].team), (32, 8));
        assert_eq!(g.numeric[0].max_size, 16);
        assert_eq!(g.numeric[1].table_size, 128);
    }

    #[test]
    fn h100_uses_its_larger_shared_memory() {
        let v = gpu_bins(&DeviceLimits::V100, 4, 8);
        let h = gpu_bins(&DeviceLimits::H100, 4, 8);
        let largest = |b: &[KernelBin]| b.iter().map(|b| b.table_size).max().unwrap();
        assert!(largest(&h.symbolic) > largest(&v.symbolic));
        assert!(largest(&h.numeric) > largest(&v.numeric));
        // The largest shared numeric bin uses more than the 48 KiB default.
        let big = h.numeric[h.numeric.len() - 2];
        assert!(
            big.shared_bytes > DeviceLimits::H100.shared_per_block,
            "{big:?}"
        );
        assert_eq!(h.numeric.last().unwrap().table_size, 0);
    }

    #[test]
    fn dcu_follows_the_dcu_study_configuration() {
        // The DCU study, Tables 2 and 3 (Hygon DeviceLimits::HYGON_DCU,
        // 4-byte indices, f64): the symbolic shared tables go up to 12,288
        // entries (48 KiB / 4 B), the numeric ones up to 4,096 (48 KiB / 12
        // B); rows beyond go to global-memory kernels; short rows are packed
        // several to a block (thread groups of 8); the other kernels take a
        // row per warp or per block of up to 1,024 threads. rusparse keeps
        // tables powers of two (masked probing) and 16 bytes of counters
        // beside them, so its largest tables are the powers of two below the
        // paper's.
        let g = gpu_bins(&DeviceLimits::HYGON_DCU, 4, 8);
        for b in g.symbolic.iter().chain(&g.numeric) {
            assert_eq!(b.block % 64, 0, "whole wavefronts: {b:?}");
            assert!(b.shared_bytes <= 48 << 10, "{b:?}");
        }
        let largest = |bins: &[KernelBin]| bins.iter().map(|b| b.table_size).max().unwrap();
        assert_eq!(largest(&g.symbolic), 8192, "largest power of two <= 12,288");
        assert_eq!(
            largest(&g.numeric),
            2048,
            "4,096 pairs of 12 B leave no room for the counters"
        );
        // Packed short rows: teams of 4 (symbolic) and 8 (numeric), the
        // paper's thread groups of eight.
        assert_eq!((g.symbolic[0].team, g.numeric[0].team), (4, 8));
        assert!(g.symbolic[0].rows_per_block() >= 16 && g.numeric[0].rows_per_block() >= 16);
        // One row per block from 64 threads (a wavefront) up to 1,024.
        assert_eq!(g.symbolic[1].block, 64);
        assert_eq!(g.symbolic.last().unwrap().block, 1024);
        // The numeric phase ends with the global-memory kernel (the paper's
        // Kernel 9, a hash table of twice the row's nnz); the symbolic one
        // spills rows past 0.8 of its last table to the global kernel.
        assert!(g.numeric.last().unwrap().is_global());
        assert_eq!(numeric_global_table(5000, 5000, 8), 16384);
        assert_eq!(g.spill_limit, 6553);
        // The same device with all 64 KiB for one block (MI50): the paper
        // scales its last numeric bin to 5,461 pairs; here 4,096.
        let mi50 = gpu_bins(&DeviceLimits::MI50, 4, 8);
        assert_eq!(largest(&mi50.numeric), 4096);
        // Threads per B row up to a whole wavefront (the paper's G in
        // {2..warp}).
        assert_eq!(threads_per_b_row(500 * 1000, 1000, 64), 64);
        assert_eq!(threads_per_b_row(16 * 1000, 1000, 64), 4);
    }

    #[test]
    fn threads_per_b_row_follow_the_rows_read() {
        // About four entries of each B row read per thread.
        assert_eq!(threads_per_b_row(5 * 100, 100, 32), 2);
        assert_eq!(threads_per_b_row(8 * 100, 100, 32), 2);
        assert_eq!(threads_per_b_row(9 * 100, 100, 32), 4);
        assert_eq!(threads_per_b_row(77 * 100, 100, 32), 32);
        assert_eq!(threads_per_b_row(1000 * 100, 100, 32), 32);
        assert_eq!(threads_per_b_row(1000 * 100, 100, 64), 64);
        // A power-law graph (rmat at scale 18): B's mean row is 4 long, but
        // the rows read are 239 long on average.
        assert_eq!(threads_per_b_row(244_671_242, 1_024_281, 32), 32);
        // Nothing to read.
        assert_eq!(threads_per_b_row(0, 0, 32), 2);
        assert_eq!(threads_per_b_row(0, 10, 32), 2);
        assert_eq!(threads_per_b_row(i64::MAX, 1, 32), 32);
    }

    #[test]
    fn global_tables_hold_their_rows() {
        assert_eq!(symbolic_global_table(0, 10), 32);
        assert_eq!(symbolic_global_table(1_000_000, 8), 32);
        let t = symbolic_global_table(1_000_000, 1 << 30);
        assert!(t.is_power_of_two() && t * 4 >= 5 * 1_000_000);
        // Narrow B: the hash table alone (2 nnz) already holds the bitmap.
        assert_eq!(numeric_global_table(9977, 1000, 8), 32768);
        assert_eq!(numeric_global_table(16384, 1000, 8), 32768);
        assert_eq!(numeric_global_table(16385, 1000, 8), 65536);
        assert_eq!(numeric_global_table(0, 10, 8), 32);
    }

    #[test]
    fn global_tables_grow_to_rank_their_rows() {
        // 2^20 columns: a bitmap of 256 KiB, 32,768 f64 values.
        assert_eq!(rank_bitmap_bytes(1 << 20), 256 << 10);
        let ranked = |nnz: i64, ncols: i64, vb: u32| {
            let size = numeric_global_table(nnz, ncols, vb);
            // The kernel's test: the bitmap fits past the row's entries.
            size * u64::from(vb) >= nnz as u64 * u64::from(vb) + rank_bitmap_bytes(ncols)
        };
        // A row of 5,000 entries (hash table 16,384) grows to 65,536.
        assert_eq!(numeric_global_table(5000, 1 << 20, 8), 65536);
        assert!(ranked(5000, 1 << 20, 8));
        // At most 4x: a row of 2,000 entries keeps its 4,096 and sorts.
        assert_eq!(numeric_global_table(2000, 1 << 20, 8), 4096);
        assert!(!ranked(2000, 1 << 20, 8));
        // f32 values need twice the entries for the same bitmap.
        assert!(ranked(9000, 1 << 20, 4));
        assert!(ranked(100_000, 1 << 20, 16));
        // Very wide B: no growth.
        assert_eq!(numeric_global_table(5000, 1 << 40, 8), 16384);
    }
}
