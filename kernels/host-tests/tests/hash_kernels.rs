//! The hash SpGEMM kernels (`kernels/setup.cu`, `symbolic.cu`,
//! `numeric.cu`) run on the host emulator through the whole pipeline and
//! compared exactly with `rusparse::reference` (integer-valued entries, so
//! every sum is exact whatever its order), for every variant (f32/f64/c32/
//! c64, i32/i64 offsets and indices, warps of 32 and 64).

use rusparse::plan::gpu_bins::{gpu_bins, DeviceLimits, KernelBin};
use rusparse::{Index, Op};
use rusparse_kernel_host_tests::hash::{
    hash_spgemm, setup, validate, visit_hash_variants, Bin, HashVariant, HashVisitor, HostCsr,
    PipelineConfig, PipelineStats, NO_ERROR,
};
use rusparse_kernel_host_tests::support::{self, Order, Pick};
use rusparse_kernel_host_tests::{
    fractional_value as frac_val, small_int_value as int_val, variant_rng as seed, Launch, Rng,
    TestValue, Variant,
};

type Val<V> = <V as Variant>::Value;

/// How random rows are drawn.
#[derive(Clone, Copy)]
struct Shape {
    /// A row's columns: with repeats, or distinct (`support::Pick`).
    pick: Pick,
    /// Rows sorted by column, or never in order.
    order: Order,
    /// Index base.
    base: i32,
    /// Fractional values instead of integers.
    frac: bool,
}

/// Distinct columns (`len(i)` of them while that is at most half the
/// columns, else `len(i)` draws without the repeats), sorted; base 0,
/// integer values.
const CANONICAL: Shape = Shape {
    pick: Pick::DistinctOrDeduped,
    order: Order::Sorted,
    base: 0,
    frac: false,
};

/// Rows of `len(i)` entries over `ncols` columns, drawn as `shape` says.
fn random_rows<V: Variant>(
    rng: &mut Rng,
    nrows: usize,
    ncols: usize,
    len: impl FnMut(&mut Rng, usize) -> usize,
    shape: Shape,
) -> HostCsr<V> {
    let value = if shape.frac {
        frac_val::<V>
    } else {
        int_val::<V>
    };
    let rows = support::random_rows(rng, nrows, ncols, (shape.pick, shape.order), len, value);
    HostCsr::from_rows(ncols, &rows, shape.base)
}

/// rusparse's reference product as a `HostCsr`.
fn reference<V: Variant>(a: &HostCsr<V>, b: &HostCsr<V>, alpha: Val<V>) -> HostCsr<V> {
    let c = rusparse::reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, alpha)
        .expect("reference product");
    HostCsr {
        nrows: c.nrows(),
        ncols: c.ncols(),
        rows: c.row_offsets().to_vec(),
        cols: c.col_indices().to_vec(),
        vals: c.values().to_vec(),
        base: a.base,
    }
}

fn bits<V: Variant>(v: Val<V>) -> (u64, u64) {
    let (re, im) = v.parts();
    (re.to_bits(), im.to_bits())
}

/// Same structure and equal values (0 == -0).
#[track_caller]
fn assert_same<V: Variant>(got: &HostCsr<V>, want: &HostCsr<V>, what: &str) {
    compare(got, want, what, |v| {
        let (re, im) = v.parts();
        // Equal values, one representation (-0 as 0).
        ((re + 0.0).to_bits(), (im + 0.0).to_bits())
    });
}

/// Same structure and the same bits in every value.
#[track_caller]
fn assert_bits<V: Variant>(got: &HostCsr<V>, want: &HostCsr<V>, what: &str) {
    compare(got, want, what, bits::<V>);
}

#[track_caller]
fn compare<V: Variant>(
    got: &HostCsr<V>,
    want: &HostCsr<V>,
    what: &str,
    key: impl Fn(Val<V>) -> (u64, u64),
) {
    let name = V::NAME;
    assert_eq!(got.nrows, want.nrows, "{name} {what}: rows");
    let offs = |x: &HostCsr<V>| x.rows.iter().map(|o| o.to_i64()).collect::<Vec<_>>();
    assert_eq!(offs(got), offs(want), "{name} {what}: row offsets");
    for i in 0..got.nrows {
        let (g, w) = (got.range(i), want.range(i));
        let gc: Vec<i64> = got.cols[g.clone()].iter().map(|c| c.to_i64()).collect();
        let wc: Vec<i64> = want.cols[w.clone()].iter().map(|c| c.to_i64()).collect();
        assert_eq!(gc, wc, "{name} {what}: columns of row {i}");
        let gv: Vec<_> = got.vals[g].iter().map(|&v| key(v)).collect();
        let wv: Vec<_> = want.vals[w].iter().map(|&v| key(v)).collect();
        assert!(
            gv == wv,
            "{name} {what}: values of row {i}: {:?} != {:?}",
            &got.vals[got.range(i)],
            &want.vals[want.range(i)]
        );
    }
}

/// Runs the pipeline and compares with the reference; returns the stats.
#[track_caller]
fn check<V: HashVariant>(
    a: &HostCsr<V>,
    b: &HostCsr<V>,
    cfg: &PipelineConfig,
    what: &str,
) -> PipelineStats {
    let alpha = Val::<V>::from_parts(2.0, -1.0);
    let (c, stats) = hash_spgemm(a, b, alpha, Val::<V>::zero_value(), None, cfg)
        .unwrap_or_else(|e| panic!("{} {what}: error key {e:#x}", V::NAME));
    assert_same(&c, &reference(a, b, alpha), what);
    stats
}

/// `0` of a value type (TestValue has no zero of its own).
trait Zero {
    fn zero_value() -> Self;
}
impl<T: TestValue> Zero for T {
    fn zero_value() -> Self {
        T::from_parts(0.0, 0.0)
    }
}

/// Row lengths such that every ten rows cover every bin of
/// `PipelineConfig::small`: mostly short, some long, an empty one, one with
/// one entry.
fn mixed_len(rng: &mut Rng, i: usize) -> usize {
    match i % 10 {
        0 => 0,
        1 => 1,
        2..=5 => 1 + rng.below(4) as usize,
        6..=7 => 4 + rng.below(12) as usize,
        8 => 16 + rng.below(40) as usize,
        _ => 56 + rng.below(120) as usize,
    }
}

// ---------------------------------------------------------------------------

#[test]
fn random_products_through_every_path() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(1);
            let cfg = PipelineConfig::small(V::WARP);
            let a = random_rows::<V>(&mut rng, 70, 90, mixed_len, CANONICAL);
            let b = random_rows::<V>(&mut rng, 90, 700, |r, i| mixed_len(r, i) / 2, CANONICAL);
            let s = check(&a, &b, &cfg, "random canonical");
            assert!(s.direct_rows > 0, "{}: direct rows {s:?}", V::NAME);
            assert!(s.numeric_rows.iter().all(|&n| n > 0), "{}: {s:?}", V::NAME);
            assert!(
                s.symbolic_rows[..3].iter().all(|&n| n > 0),
                "{}: {s:?}",
                V::NAME
            );

            // The same with the binning and scan kernels, a grid of one
            // block (every loop strides), and several rows per block with
            // teams wider than a warp (symbolic partial sums parked in the
            // table, numeric tables sorted without condensing).
            let w = V::WARP;
            let mut cfg2 = cfg.clone();
            cfg2.device_binning = true;
            cfg2.max_grid = 1;
            cfg2.symbolic[2] = Bin {
                max_size: 426,
                table_size: 512,
                block: 4 * w,
                team: 2 * w,
            };
            cfg2.numeric[3] = Bin {
                max_size: 512,
                table_size: 1024,
                block: 4 * w,
                team: 2 * w,
            };
            cfg2.group = 32;
            let a = HostCsr::<V>::from_rows(a.ncols, &strip(&a)[..40], 0);
            check(&a, &b, &cfg2, "device binning, one block, wide teams");
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn repeated_and_unsorted_columns_are_summed() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(2);
            let cfg = PipelineConfig::small(V::WARP);
            let messy = Shape {
                pick: Pick::Repeats,
                order: Order::Unsorted,
                ..CANONICAL
            };
            let a = random_rows::<V>(&mut rng, 50, 60, mixed_len, messy);
            let b = random_rows::<V>(&mut rng, 60, 300, |r, i| mixed_len(r, i) / 2, messy);
            let s = check(&a, &b, &cfg, "duplicates in A and B");
            assert_eq!(s.b_flags[0], 1, "{}: B flagged", V::NAME);
            assert_eq!(
                s.direct_rows,
                0,
                "{}: no direct path for a messy B",
                V::NAME
            );
            // Unsorted but distinct B: still no direct path, still exact.
            let b = random_rows::<V>(
                &mut rng,
                60,
                300,
                |r, i| 2 + mixed_len(r, i) / 2,
                Shape {
                    order: Order::Unsorted,
                    ..CANONICAL
                },
            );
            let s = check(&a, &b, &cfg, "unsorted B");
            assert_eq!((s.b_flags[0], s.direct_rows), (1, 0), "{}", V::NAME);
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn base_one() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(3);
            let shape = Shape {
                base: 1,
                ..CANONICAL
            };
            let a = random_rows::<V>(&mut rng, 40, 50, mixed_len, shape);
            let b = random_rows::<V>(&mut rng, 50, 400, |r, i| mixed_len(r, i) / 2, shape);
            let mut cfg = PipelineConfig::small(V::WARP);
            cfg.device_binning = true;
            let s = check(&a, &b, &cfg, "base 1");
            assert!(s.direct_rows > 0);
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn empty_rows_and_empty_products() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(4);
            let cfg = PipelineConfig::small(V::WARP);
            // B's even rows are empty; A's rows 0..10 use only even rows.
            let b = random_rows::<V>(
                &mut rng,
                40,
                100,
                |r, i| {
                    if i % 2 == 0 {
                        0
                    } else {
                        1 + r.below(9) as usize
                    }
                },
                CANONICAL,
            );
            let mut rows: Vec<Vec<(usize, Val<V>)>> = Vec::new();
            for i in 0..30 {
                let n = if i % 3 == 0 { 0 } else { 1 + i % 5 };
                let mut cols: Vec<usize> = (0..n)
                    .map(|k| {
                        let c = (i * 7 + k * 11) % 40;
                        if i < 10 {
                            c & !1
                        } else {
                            c
                        }
                    })
                    .collect();
                cols.sort_unstable();
                cols.dedup();
                rows.push(
                    cols.into_iter()
                        .map(|c| (c, int_val::<V>(&mut rng)))
                        .collect(),
                );
            }
            let a = HostCsr::<V>::from_rows(40, &rows, 0);
            check(&a, &b, &cfg, "empty rows");
            // Nothing at all: A without rows, A without entries.
            let none = HostCsr::<V>::from_rows(40, &[], 0);
            check(&none, &b, &cfg, "A with no rows");
            let zero = HostCsr::<V>::from_rows(40, &vec![Vec::new(); 9], 0);
            check(&zero, &b, &cfg, "A with no entries");
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn single_entry_rows_take_the_direct_path() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(5);
            let cfg = PipelineConfig::small(V::WARP);
            let a = random_rows::<V>(
                &mut rng,
                64,
                50,
                |_, i| 1 + (i % 9 == 0) as usize,
                CANONICAL,
            );
            let b = random_rows::<V>(&mut rng, 50, 900, |r, _| r.below(100) as usize, CANONICAL);
            let s = check(&a, &b, &cfg, "single-entry rows");
            let singles = (0..a.nrows)
                .filter(|&i| {
                    let r = a.range(i);
                    r.len() == 1 && !b.range(a.cols[r.start].to_usize()).is_empty()
                })
                .count();
            assert_eq!(s.direct_rows, singles, "{}", V::NAME);
            // Without the direct path the hash kernels do the same rows.
            let mut cfg = cfg;
            cfg.direct = false;
            let s = check(&a, &b, &cfg, "single-entry rows hashed");
            assert_eq!(s.direct_rows, 0);
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn colliding_columns() {
    // Columns that are multiples of 1024 all hash to slot 0 of every
    // power-of-two table up to 1024 (107 * 1024 k = 0 mod 2^j), so each
    // insert probes past all the keys before it.
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(6);
            let cfg = PipelineConfig::small(V::WARP);
            let ncols = 1024 * 600;
            let mut b_rows = Vec::new();
            for r in 0..50 {
                let n = [3usize, 8, 20, 60][r % 4];
                let mut cols: Vec<usize> =
                    (0..n).map(|k| 1024 * ((r * 13 + k * 7) % 600)).collect();
                cols.sort_unstable();
                cols.dedup();
                b_rows.push(
                    cols.into_iter()
                        .map(|c| (c, int_val::<V>(&mut rng)))
                        .collect(),
                );
            }
            let b = HostCsr::<V>::from_rows(ncols, &b_rows, 0);
            let a = random_rows::<V>(&mut rng, 40, 50, |r, _| 2 + r.below(10) as usize, CANONICAL);
            let s = check(&a, &b, &cfg, "colliding columns");
            assert!(
                s.numeric_rows.iter().filter(|&&n| n > 0).count() >= 3,
                "{s:?}"
            );
        }
    }
    visit_hash_variants(&mut T);
}

/// B with rows of 4 disjoint columns (row r: 4r..4r+4, in a scrambled
/// order when `sorted` is false), so that a row of A with `e` entries over
/// `d` distinct rows has nprod = 4e and nnz = 4d exactly.
fn blocks_b<V: Variant>(rng: &mut Rng, nrows: usize, sorted: bool) -> HostCsr<V> {
    let rows: Vec<Vec<(usize, Val<V>)>> = (0..nrows)
        .map(|r| {
            let mut cols: Vec<usize> = (4 * r..4 * r + 4).collect();
            if !sorted {
                cols.swap(0, 3);
                cols.swap(1, 2);
            }
            cols.into_iter().map(|c| (c, int_val::<V>(rng))).collect()
        })
        .collect();
    HostCsr::from_rows(4 * nrows, &rows, 0)
}

/// A row of A with nprod = 4 * `entries`, nnz = 4 * `distinct` over
/// `blocks_b` with `nb` rows.
fn blocks_row<V: Variant>(
    rng: &mut Rng,
    nb: usize,
    entries: usize,
    distinct: usize,
) -> Vec<(usize, Val<V>)> {
    assert!(distinct <= entries && distinct <= nb && (distinct > 0 || entries == 0));
    let start = rng.below(nb as u64) as usize;
    let step = [1usize, 3, 7, 11][rng.below(4) as usize];
    let pick: Vec<usize> = (0..distinct).map(|k| (start + k * step) % nb).collect();
    let mut distinct_cols = pick.clone();
    distinct_cols.sort_unstable();
    distinct_cols.dedup();
    assert_eq!(
        distinct_cols.len(),
        distinct,
        "nb must be prime to the step"
    );
    (0..entries)
        .map(|k| (pick[k % distinct], int_val::<V>(rng)))
        .collect()
}

#[test]
fn full_tables_at_the_bin_bounds() {
    // Bins whose bound equals the table size: the largest rows fill every
    // slot of the symbolic and of the numeric tables (rank sort, team
    // condense + bitonic, block condense + bitonic, non-power-of-two
    // tables probing by modulo).
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(7);
            let w = V::WARP;
            let nb = 1009;
            let b = blocks_b::<V>(&mut rng, nb, true);
            let bin = |max_size, table_size, block, team| Bin {
                max_size,
                table_size,
                block,
                team,
            };
            let mut cfg = PipelineConfig::small(w);
            cfg.symbolic = vec![
                bin(32, 32, 2 * w, 4),
                bin(64, 64, w, 16),
                bin(256, 256, 2 * w, 2 * w),
                bin(i64::MAX, 512, 2 * w, 2 * w),
            ];
            cfg.spill_limit = 512;
            cfg.numeric = vec![
                bin(32, 32, 2 * w, 8),
                bin(48, 48, 2 * w, 8),
                bin(64, 64, 2 * w, 8),
                bin(96, 96, w, w),
                bin(256, 256, 2 * w, 2 * w),
            ];
            let mut rows = Vec::new();
            for &(e, d) in &[
                (8, 8),
                (16, 8),
                (12, 12),
                (16, 16),
                (24, 24),
                (64, 24),
                (64, 64),
                (100, 64),
                (128, 128),
                (2, 2),
                (0, 0),
            ] {
                rows.push(blocks_row::<V>(&mut rng, nb, e, d));
            }
            let a = HostCsr::<V>::from_rows(nb, &rows, 0);
            let s = check(&a, &b, &cfg, "full tables");
            assert!(s.numeric_rows.iter().all(|&n| n > 0), "{s:?}");
            // (128, 128): nnz 512 fills the last symbolic table, spills.
            assert_eq!(s.spilled, vec![8], "{s:?}");
        }
    }
    visit_hash_variants(&mut T);
}

/// Row lists of a `HostCsr` (zero-based columns).
fn strip<V: Variant>(a: &HostCsr<V>) -> Vec<Vec<(usize, Val<V>)>> {
    (0..a.nrows)
        .map(|i| {
            a.range(i)
                .map(|k| (a.cols[k].to_usize() - a.base as usize, a.vals[k]))
                .collect()
        })
        .collect()
}

#[test]
fn rows_above_the_spill_limit_go_global() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(8);
            let w = V::WARP;
            let nb = 1009;
            let b = blocks_b::<V>(&mut rng, nb, false);
            let cfg = PipelineConfig::small(w);
            // Last symbolic bin: nprod > 426, table 1024, spill at 819.
            let shapes = [
                (120, 120), // nnz 480: stays
                (300, 100), // nprod 1200, nnz 400: stays
                (204, 204), // nnz 816: stays (below 819)
                (205, 205), // nnz 820: spills
                (300, 260), // nnz 1040 > table: spills (full table)
                (400, 380), // nnz 1520: spills
            ];
            let rows: Vec<_> = shapes
                .iter()
                .map(|&(e, d)| blocks_row::<V>(&mut rng, nb, e, d))
                .collect();
            let a = HostCsr::<V>::from_rows(nb, &rows, 0);
            let s = check(&a, &b, &cfg, "spill");
            let mut spilled = s.spilled.clone();
            spilled.sort_unstable();
            assert_eq!(spilled, vec![3, 4, 5], "{}: {s:?}", V::NAME);
            // nnz above the last numeric bin (512): rows 2..=5.
            assert_eq!(s.numeric_global_rows, 4, "{s:?}");

            // Spilling from a bin of several rows per block (no shared
            // count: the per-thread counts decide at the end).
            let mut cfg = cfg;
            cfg.symbolic = vec![Bin {
                max_size: i64::MAX,
                table_size: 64,
                block: 2 * w,
                team: 8,
            }];
            cfg.spill_limit = 48;
            let shapes = [(4, 4), (11, 11), (12, 12), (16, 16), (30, 20), (2, 1)];
            let rows: Vec<_> = shapes
                .iter()
                .map(|&(e, d)| blocks_row::<V>(&mut rng, nb, e, d))
                .collect();
            let a = HostCsr::<V>::from_rows(nb, &rows, 0);
            let s = check(&a, &b, &cfg, "spill from packed teams");
            let mut spilled = s.spilled.clone();
            spilled.sort_unstable();
            assert_eq!(spilled, vec![2, 3, 4], "{}: {s:?}", V::NAME);
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn huge_row_through_the_global_kernels() {
    // 3000 distinct columns from 10^5 products in one row, plus ordinary
    // rows, with no shared bin able to take it.
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            if !matches!(V::NAME, "f64_i32_i32_w32" | "c64_i64_i64_w64") {
                return;
            }
            let mut rng = seed::<V>(9);
            let b_rows: Vec<Vec<(usize, Val<V>)>> = (0..120)
                .map(|r| {
                    let mut cols: Vec<usize> = (0..1000).map(|j| (r * 37 + j * 3) % 3000).collect();
                    cols.sort_unstable();
                    cols.dedup();
                    cols.into_iter()
                        .map(|c| (c, int_val::<V>(&mut rng)))
                        .collect()
                })
                .collect();
            let b = HostCsr::<V>::from_rows(3000, &b_rows, 0);
            let mut rows: Vec<Vec<(usize, Val<V>)>> =
                vec![(0..100).map(|k| (k, int_val::<V>(&mut rng))).collect()];
            rows.push(vec![
                (5, int_val::<V>(&mut rng)),
                (7, int_val::<V>(&mut rng)),
            ]);
            rows.push(vec![(9, int_val::<V>(&mut rng))]);
            let a = HostCsr::<V>::from_rows(120, &rows, 0);
            let mut cfg = PipelineConfig::small(V::WARP);
            cfg.symbolic.truncate(3);
            cfg.numeric.truncate(3);
            cfg.global_block = 4 * V::WARP;
            let s = check(&a, &b, &cfg, "huge row");
            // nprod 10^5, 2000 and 1000, above the bins (426).
            assert_eq!(s.symbolic_global_rows, 3, "{s:?}");
            // nnz 3000 and about 2000; the row of one entry is direct.
            assert_eq!((s.numeric_global_rows, s.direct_rows), (2, 1), "{s:?}");
            // Deterministic: one barrier per entry of A's row.
            cfg.deterministic = true;
            check(&a, &b, &cfg, "huge row, deterministic");
        }
    }
    visit_hash_variants(&mut T);
}

/// Up to `per_bin` rows of `pool` for each numeric bin of `bins` and for the
/// global kernel beyond them (by the nnz of the row of `pool * b`), plus
/// the empty and one-entry rows of the first ten.
fn covering_rows<V: Variant>(
    pool: &HostCsr<V>,
    b: &HostCsr<V>,
    bins: &[Bin],
    per_bin: usize,
) -> HostCsr<V> {
    let one = Val::<V>::from_parts(1.0, 0.0);
    let c = reference(pool, b, one);
    let rows = strip(pool);
    let mut taken = vec![0usize; bins.len() + 1];
    let mut keep = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let nnz = c.range(i).len() as i64;
        if row.len() <= 1 && i < 10 {
            keep.push(row.clone());
            continue;
        }
        if nnz == 0 {
            continue;
        }
        let j = bins
            .iter()
            .position(|bin| nnz <= bin.max_size)
            .unwrap_or(bins.len());
        if taken[j] < per_bin {
            taken[j] += 1;
            keep.push(row.clone());
        }
    }
    assert!(
        taken.iter().all(|&t| t > 0),
        "{}: no rows for some bin: {taken:?}",
        V::NAME
    );
    HostCsr::from_rows(pool.ncols, &keep, pool.base)
}

#[test]
fn deterministic_mode_is_bitwise_reproducible() {
    // Fractional values: sums round, so the atomics of the default mode
    // may differ from run to run; the deterministic mode forms every sum in
    // A's order (as the reference does), so it matches the reference bit
    // for bit, with B canonical (mode 1) or not (mode 2), in shared bins
    // of packed teams and of one row per block, and in the global kernel.
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(10);
            let frac = Shape {
                frac: true,
                ..CANONICAL
            };
            let mut cfg = PipelineConfig::small(V::WARP);
            cfg.deterministic = true;
            cfg.numeric.truncate(3);
            let pool = random_rows::<V>(&mut rng, 60, 80, mixed_len, frac);
            for (what, shape) in [
                ("canonical B", frac),
                (
                    "B with repeats",
                    Shape {
                        pick: Pick::Repeats,
                        order: Order::Unsorted,
                        ..frac
                    },
                ),
            ] {
                let b = random_rows::<V>(&mut rng, 80, 500, |r, i| mixed_len(r, i) / 2, shape);
                let a = covering_rows(&pool, &b, &cfg.numeric, 3);
                let alpha = Val::<V>::from_parts(0.75, 0.5);
                let zero = Val::<V>::from_parts(0.0, 0.0);
                let (c1, s) = hash_spgemm(&a, &b, alpha, zero, None, &cfg).expect("run 1");
                let (c2, _) = hash_spgemm(&a, &b, alpha, zero, None, &cfg).expect("run 2");
                assert_bits(&c1, &c2, what);
                assert_bits(&c1, &reference(&a, &b, alpha), what);
                let all = s.numeric_global_rows > 0 && s.numeric_rows.iter().all(|&n| n > 0);
                assert!(all, "{} {what}: {s:?}", V::NAME);
            }
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn beta_scales_the_old_values() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(11);
            let cfg = PipelineConfig::small(V::WARP);
            let a = random_rows::<V>(&mut rng, 30, 70, mixed_len, CANONICAL);
            let b = random_rows::<V>(&mut rng, 70, 400, |r, i| mixed_len(r, i) / 2, CANONICAL);
            let v = |re, im| Val::<V>::from_parts(re, im);
            let (c0, _) = hash_spgemm(&a, &b, v(1.0, 0.0), v(0.0, 0.0), None, &cfg).unwrap();
            // C = 2 A B + (-3 + i) C0 = (-1 + i) A B.
            let (c1, s) =
                hash_spgemm(&a, &b, v(2.0, 0.0), v(-3.0, 1.0), Some(&c0.vals), &cfg).unwrap();
            assert!(s.direct_rows > 0 && s.numeric_global_rows == 0);
            assert_same(&c1, &reference(&a, &b, v(-1.0, 1.0)), "beta");
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn wide_column_indices() {
    // Columns beyond 2^32 where the index type has 64 bits.
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            if V::Index::MAX < u64::from(u32::MAX) * 4 {
                return;
            }
            let mut rng = seed::<V>(12);
            let ncols = (1usize << 34) + 5;
            let b_rows: Vec<Vec<(usize, Val<V>)>> = (0..40)
                .map(|r| {
                    let mut cols: Vec<usize> = (0..1 + r % 23)
                        .map(|k| ((r * 977 + k * 131) % 400) << 25)
                        .collect();
                    cols.sort_unstable();
                    cols.dedup();
                    cols.into_iter()
                        .map(|c| (c, int_val::<V>(&mut rng)))
                        .collect()
                })
                .collect();
            let b = HostCsr::<V>::from_rows(ncols, &b_rows, 1);
            let a = random_rows::<V>(
                &mut rng,
                50,
                40,
                mixed_len,
                Shape {
                    base: 1,
                    ..CANONICAL
                },
            );
            check(
                &a,
                &b,
                &PipelineConfig::small(V::WARP),
                "columns beyond 2^32",
            );
        }
    }
    visit_hash_variants(&mut T);
}

/// The bins the planner derives for `limits` (with the variant's warp
/// width), with blocks of one-row bins capped at `cap` threads for the
/// emulator.
fn device_config<V: Variant>(limits: DeviceLimits, cap: i64) -> PipelineConfig {
    let limits = DeviceLimits {
        warp: V::WARP as u32,
        ..limits
    };
    let bins = gpu_bins(
        &limits,
        std::mem::size_of::<V::Index>() as u32,
        std::mem::size_of::<V::Value>() as u32,
    );
    let conv = |k: &KernelBin| {
        let (block, team) = if k.team == k.block {
            let b = i64::from(k.block).min(cap);
            (b, b)
        } else {
            (i64::from(k.block), i64::from(k.team))
        };
        Bin {
            max_size: k.max_size,
            table_size: i64::from(k.table_size),
            block,
            team,
        }
    };
    let mut cfg = PipelineConfig::small(V::WARP);
    cfg.symbolic = bins.symbolic.iter().map(conv).collect();
    cfg.spill_limit = i64::from(bins.spill_limit);
    cfg.numeric = bins
        .numeric
        .iter()
        .filter(|k| !k.is_global())
        .map(conv)
        .collect();
    cfg.global_block = cap;
    cfg.group = 8;
    cfg.max_grid = 4;
    cfg
}

/// Rows at both ends of every symbolic and numeric bin of `cfg`, and rows
/// past the last numeric bin (global kernel), checked against the
/// reference.
fn every_bin_of<V: HashVariant>(cfg: &PipelineConfig, salt: u64, what: &str) {
    let mut rng = seed::<V>(salt);
    let nb = 12_007; // prime, more than 4 * the largest nnz / 4
    let b = blocks_b::<V>(&mut rng, nb, true);
    let mut shapes: Vec<(usize, usize)> = Vec::new();
    let mut lo = 0i64;
    let sym = &cfg.symbolic;
    for bin in sym.iter().take(sym.len() - 1) {
        // nprod just above lo and at the bound (multiples of 4).
        let first = (lo / 4 + 1) as usize;
        let last = (bin.max_size / 4) as usize;
        shapes.push((first, (first / 2).max(1)));
        shapes.push((last, last));
        lo = bin.max_size;
    }
    let spill = cfg.spill_limit as usize;
    let last_table = sym.last().unwrap().table_size as usize;
    // The last symbolic bin, with few distinct columns (spilling is the
    // business of rows_above_the_spill_limit_go_global).
    shapes.push(((lo / 4 + 1) as usize, 100));
    assert!(spill < last_table);
    let mut lo = 0i64;
    for bin in &cfg.numeric {
        let first = (lo / 4 + 1) as usize;
        let last = (bin.max_size / 4) as usize;
        shapes.push((2 * first, first));
        shapes.push((last, last));
        lo = bin.max_size;
    }
    let rows: Vec<_> = shapes
        .iter()
        .map(|&(e, d)| blocks_row::<V>(&mut rng, nb, e, d))
        .collect();
    let a = HostCsr::<V>::from_rows(nb, &rows, 0);
    let s = check(&a, &b, cfg, what);
    assert!(s.symbolic_rows.iter().all(|&n| n > 0), "{}: {s:?}", V::NAME);
    assert!(s.numeric_rows.iter().all(|&n| n > 0), "{}: {s:?}", V::NAME);
    assert!(s.spilled.is_empty(), "{}: {s:?}", V::NAME);
    assert!(s.numeric_global_rows > 0, "{}: {s:?}", V::NAME);
}

#[test]
fn every_bin_of_the_h100_table_list() {
    // The bins the planner derives for an H100 (tables up to 32768 keys).
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            every_bin_of::<V>(
                &device_config::<V>(DeviceLimits::H100, 2 * V::WARP),
                13,
                "H100 bins",
            );
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn every_bin_of_the_dcu_table_list() {
    // The bins the planner derives for a Hygon DCU (the DCU study's device:
    // wavefronts of 64, 48 KiB of LDS per block), on the 64-wide variants.
    struct T(usize);
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            if V::WARP != 64 {
                return;
            }
            self.0 += 1;
            every_bin_of::<V>(
                &device_config::<V>(DeviceLimits::HYGON_DCU, 2 * V::WARP),
                17,
                "DCU bins",
            );
        }
    }
    let mut t = T(0);
    visit_hash_variants(&mut t);
    assert!(t.0 >= 2, "64-wide variants run: {}", t.0);
}

// ---- validation -------------------------------------------------------------

fn key(row: u64, code: u64) -> u64 {
    (row << 8) | code
}

/// A matrix from raw parts (possibly malformed offsets).
fn raw<V: Variant>(ncols: usize, rows: &[i64], cols: &[i64], base: i32) -> HostCsr<V> {
    let mut rng = Rng::new(99);
    HostCsr {
        nrows: rows.len() - 1,
        ncols,
        rows: rows
            .iter()
            .map(|&o| V::Offset::try_from_usize(o as usize).unwrap())
            .collect(),
        cols: cols
            .iter()
            .map(|&c| V::Index::try_from_usize(c as usize).unwrap())
            .collect(),
        vals: cols.iter().map(|_| int_val::<V>(&mut rng)).collect(),
        base,
    }
}

#[test]
fn validation_error_codes() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let mut rng = seed::<V>(14);
            let name = V::NAME;
            let l = Launch::new(2, V::WARP);
            let idx = |v: i64| V::Index::try_from_usize(v as usize).unwrap();
            let good_a = random_rows::<V>(&mut rng, 50, 30, mixed_len, CANONICAL);
            let good_b = random_rows::<V>(&mut rng, 30, 40, mixed_len, CANONICAL);
            let kb = good_b.kernel();

            // Good inputs: nprod per row, no error, B's flags.
            let (sizes, e) = setup::<V>(l, &good_a.kernel(), &kb);
            assert_eq!(e, NO_ERROR);
            for (i, &size) in sizes[..good_a.nrows].iter().enumerate() {
                let want: usize = good_a
                    .range(i)
                    .map(|k| good_b.range(good_a.cols[k].to_usize()).len())
                    .sum();
                assert_eq!(size, want as i64, "{name}: nprod of row {i}");
            }
            assert_eq!(sizes[good_a.nrows], 0);
            let (e, flags) = validate::<V>(l, &kb, 3, 4);
            assert_eq!(e, NO_ERROR);
            let longest = (0..good_b.nrows)
                .map(|i| good_b.range(i).len())
                .max()
                .unwrap();
            assert_eq!(flags, [0, longest as i64], "{name}");

            // Code 2: A's column out of range in rows 37 and 41 (41 long,
            // taken by the whole warp); the smaller row wins.
            let mut rows = strip(&good_a);
            rows[41] = (0..70).map(|k| (k % 30, int_val::<V>(&mut rng))).collect();
            rows[37] = vec![(3, int_val::<V>(&mut rng)), (5, int_val::<V>(&mut rng))];
            let mut a = HostCsr::<V>::from_rows(30, &rows, 0);
            let r41 = a.range(41);
            a.cols[r41.start + 50] = idx(30);
            assert_eq!(setup::<V>(l, &a.kernel(), &kb).1, key(41, 2), "{name}");
            let r37 = a.range(37);
            a.cols[r37.start] = idx(31);
            assert_eq!(setup::<V>(l, &a.kernel(), &kb).1, key(37, 2), "{name}");
            let cfg = PipelineConfig::small(V::WARP);
            let one = Val::<V>::from_parts(1.0, 0.0);
            let zero = Val::<V>::from_parts(0.0, 0.0);
            let err = hash_spgemm(&a, &good_b, one, zero, None, &cfg).unwrap_err();
            assert_eq!(err, key(37, 2), "{name}");
            let mut a1 = a.clone();
            a1.base = 1;
            let shift =
                |o: &mut V::Offset| *o = V::Offset::try_from_usize(o.to_usize() + 1).unwrap();
            a1.rows.iter_mut().for_each(shift);
            a1.cols.iter_mut().for_each(|c| *c = idx(c.to_i64() + 1));
            a1.cols[r41.start + 50] = idx(30); // in range with base 1
            a1.cols[r37.start] = idx(0); // below base 1
            assert_eq!(
                setup::<V>(l, &a1.kernel(), &kb).1,
                key(37, 2),
                "{name}: base 1"
            );

            // Code 1: offsets decreasing (row 2), below the base (row 0),
            // first offset not the base, past nnz, last offset not nnz.
            let cols = [1, 2, 3, 4, 5, 6, 7];
            let a = raw::<V>(30, &[0, 2, 4, 3, 5, 6], &cols[..6], 0);
            assert_eq!(
                setup::<V>(l, &a.kernel(), &kb).1,
                key(2, 1),
                "{name}: decreasing"
            );
            let a = raw::<V>(30, &[0, 2, 4, 6], &cols[..5], 1);
            assert_eq!(
                setup::<V>(l, &a.kernel(), &kb).1,
                key(0, 1),
                "{name}: below base"
            );
            let a = raw::<V>(30, &[1, 2, 4, 6], &cols[..6], 0);
            assert_eq!(
                setup::<V>(l, &a.kernel(), &kb).1,
                key(0, 1),
                "{name}: first offset"
            );
            let a = raw::<V>(30, &[0, 2, 9, 6], &cols[..6], 0);
            assert_eq!(
                setup::<V>(l, &a.kernel(), &kb).1,
                key(1, 1),
                "{name}: past nnz"
            );
            let a = raw::<V>(30, &[0, 2, 4, 6], &cols[..7], 0);
            let mut k = a.kernel();
            k.nnz = 7;
            assert_eq!(setup::<V>(l, &k, &kb).1, key(2, 1), "{name}: last offset");
            let err = hash_spgemm(
                &raw::<V>(30, &[0, 2, 4, 3, 5, 6], &cols[..6], 0),
                &good_b,
                one,
                zero,
                None,
                &cfg,
            );
            assert_eq!(err.unwrap_err(), key(2, 1), "{name}");

            // Code 3: B's offsets decreasing at row 1, found by setup where A
            // reads that row and by validate.
            let b = raw::<V>(10, &[0, 2, 1, 3, 4], &[1, 2, 3, 4], 0);
            let (e, _) = validate::<V>(l, &b.kernel(), 3, 4);
            assert_eq!(e, key(1, 3), "{name}");
            let a = raw::<V>(4, &[0, 1, 2, 3], &[0, 3, 1], 0);
            assert_eq!(
                setup::<V>(l, &a.kernel(), &b.kernel()).1,
                key(1, 3),
                "{name}"
            );
            let a = raw::<V>(4, &[0, 1, 2], &[0, 3], 0);
            assert_eq!(
                setup::<V>(l, &a.kernel(), &b.kernel()).1,
                NO_ERROR,
                "{name}"
            );

            // Code 4: B's column out of range at rows 25 (long) and 20.
            let mut rows = strip(&good_b);
            rows[20] = vec![(1, int_val::<V>(&mut rng)), (2, int_val::<V>(&mut rng))];
            rows[25] = (0..40).map(|k| (k, int_val::<V>(&mut rng))).collect();
            let mut b = HostCsr::<V>::from_rows(40, &rows, 0);
            let r25 = b.range(25);
            b.cols[r25.start + 39] = idx(40);
            assert_eq!(validate::<V>(l, &b.kernel(), 3, 4).0, key(25, 4), "{name}");
            let r20 = b.range(20);
            b.cols[r20.start + 1] = idx(45);
            assert_eq!(validate::<V>(l, &b.kernel(), 3, 4).0, key(20, 4), "{name}");
            let err = hash_spgemm(&good_a, &b, one, zero, None, &cfg).unwrap_err();
            assert_eq!(err, key(20, 4), "{name}");

            // Flags: a repeated column; an unsorted long row; a sorted one.
            let mut rows = strip(&good_b);
            rows[4] = vec![(1, int_val::<V>(&mut rng)), (1, int_val::<V>(&mut rng))];
            let b = HostCsr::<V>::from_rows(40, &rows, 0);
            assert_eq!(validate::<V>(l, &b.kernel(), 3, 4).1[0], 1, "{name}");
            let mut rows = strip(&good_b);
            rows[29] = (0..100)
                .map(|k| ((k * 7) % 40, int_val::<V>(&mut rng)))
                .collect();
            let b = HostCsr::<V>::from_rows(40, &rows, 0);
            assert_eq!(validate::<V>(l, &b.kernel(), 3, 4).1, [1, 100], "{name}");
            let mut rows = strip(&good_b);
            rows[29] = (0..40).map(|k| (k, int_val::<V>(&mut rng))).collect();
            let b = HostCsr::<V>::from_rows(40, &rows, 0);
            assert_eq!(validate::<V>(l, &b.kernel(), 3, 4).1, [0, 40], "{name}");
        }
    }
    visit_hash_variants(&mut T);
}
