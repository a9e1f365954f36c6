//! kernels/transpose.cu on the emulator, every variant (both warp widths):
//! the device transpose against a host transpose that is stable (each row
//! of the transpose lists its entries by their position in the input), on
//! random matrices with empty rows and columns, repeated and unsorted
//! columns, base 1, a column of 5000 entries (sorted in global memory) and
//! columns between a warp and the shared-memory limit; values conjugated
//! for op C.

use rusparse_kernel_host_tests::hash::HostCsr;
use rusparse_kernel_host_tests::support::{random_rows, Order, Pick, MESSY};
use rusparse_kernel_host_tests::transpose::{
    self, visit_transpose_variants, TransposeConfig, TransposeVariant, TransposeVisitor, Transposed,
};
use rusparse_kernel_host_tests::{Index, Launch, Rng, TestValue, Variant};

/// The stable host transpose (see the module docs).
fn host_transpose<V: Variant>(x: &HostCsr<V>, conjugate: bool) -> Transposed<V> {
    let base = x.base as usize;
    let mut by_col: Vec<Vec<(usize, usize)>> = vec![Vec::new(); x.ncols];
    for i in 0..x.nrows {
        for p in x.range(i) {
            by_col[x.cols[p].to_usize() - base].push((p, i));
        }
    }
    let mut t = Transposed::<V> {
        rows: vec![V::Offset::try_from_usize(base).unwrap()],
        cols: Vec::new(),
        perm: Vec::new(),
        vals: Vec::new(),
    };
    for col in &by_col {
        for &(p, i) in col {
            t.perm.push(V::Offset::try_from_usize(p).unwrap());
            t.cols.push(V::Index::try_from_usize(i + base).unwrap());
            let (re, im) = x.vals[p].parts();
            t.vals
                .push(V::Value::from_parts(re, if conjugate { -im } else { im }));
        }
        t.rows
            .push(V::Offset::try_from_usize(t.perm.len() + base).unwrap());
    }
    t
}

/// Row lengths and columns: `len(rng, i)` entries in row `i`, columns
/// below `ncols`, sorted and distinct unless `messy` (then unsorted, with
/// repeats); integer values in -1000..1000 (both parts).
fn random<V: Variant>(
    rng: &mut Rng,
    nrows: usize,
    ncols: usize,
    base: i32,
    messy: bool,
    len: impl Fn(&mut Rng, usize) -> usize,
) -> HostCsr<V> {
    let cols = if messy {
        MESSY
    } else {
        (Pick::Distinct, Order::Sorted)
    };
    let rows = random_rows(rng, nrows, ncols, cols, len, |rng| {
        let re = rng.below(2000) as f64 - 1000.0;
        let im = rng.below(2000) as f64 - 1000.0;
        V::Value::from_parts(re, im)
    });
    HostCsr::from_rows(ncols, &rows, base)
}

fn check<V: TransposeVariant>(x: &HostCsr<V>, cfg: TransposeConfig, what: &str) -> Transposed<V> {
    // The whole pipeline once (conjugating for complex types), then the
    // gather alone for the other op.
    let conjugate = V::COMPLEX;
    let got = transpose::transpose::<V>(cfg, &x.kernel(), &x.vals, conjugate);
    let want = host_transpose(x, conjugate);
    assert!(
        got.rows == want.rows,
        "{} {what}: row offsets differ",
        V::NAME
    );
    assert!(
        got.perm == want.perm,
        "{} {what}: permutation differs",
        V::NAME
    );
    assert!(got.cols == want.cols, "{} {what}: columns differ", V::NAME);
    assert!(got.vals == want.vals, "{} {what}: values differ", V::NAME);
    let mut other = vec![<V::Value as rusparse::Scalar>::zero(); got.perm.len()];
    let grid = (got.perm.len() as i64 + cfg.block - 1) / cfg.block;
    let grid = grid.clamp(1, cfg.grid);
    transpose::gather::<V>(
        Launch::new(grid, cfg.block),
        &got.perm,
        &x.vals,
        &mut other,
        !conjugate,
    );
    assert!(
        other == host_transpose(x, !conjugate).vals,
        "{} {what}: values (conjugate {}) differ",
        V::NAME,
        !conjugate
    );
    got
}

/// Mostly short rows (empty ones included), some longer than a warp.
fn mixed(rng: &mut Rng, _i: usize) -> usize {
    match rng.below(10) {
        0 | 1 => 0,
        2 => 40 + rng.below(60) as usize,
        _ => rng.below(8) as usize,
    }
}

struct Random;

impl TransposeVisitor for Random {
    fn visit<V: TransposeVariant>(&mut self) {
        let mut rng = Rng::new(0x7a5e ^ V::WARP as u64 ^ (V::NAME.len() as u64) << 8);
        let cfg = TransposeConfig { block: 64, grid: 8 };
        // Wide: many empty columns; tall: columns longer than a warp.
        for (nrows, ncols, base, messy) in [
            (60, 200, 0, false),
            (200, 40, 1, false),
            (250, 30, 0, true),
            (120, 25, 1, true),
        ] {
            let x = random::<V>(&mut rng, nrows, ncols, base, messy, mixed);
            let t = check::<V>(
                &x,
                cfg,
                &format!("{nrows} x {ncols}, base {base}, messy {messy}"),
            );
            if messy {
                continue;
            }
            // Canonical input: a canonical transpose.
            let b = base as usize;
            for c in 0..ncols {
                let r = t.rows[c].to_usize() - b..t.rows[c + 1].to_usize() - b;
                assert!(
                    t.cols[r].windows(2).all(|w| w[0] < w[1]),
                    "{}: row {c} of the transpose is not canonical",
                    V::NAME
                );
            }
        }
        // Degenerate shapes.
        for (nrows, ncols) in [(0, 5), (5, 0), (7, 3)] {
            let x = random::<V>(&mut rng, nrows, ncols, 0, false, |_, _| 0);
            check::<V>(&x, cfg, &format!("empty {nrows} x {ncols}"));
        }
    }
}

#[test]
fn random_matrices_every_variant() {
    visit_transpose_variants(&mut Random);
}

struct LongColumns;

impl TransposeVisitor for LongColumns {
    fn visit<V: TransposeVariant>(&mut self) {
        let mut rng = Rng::new(0x10c0 ^ V::WARP as u64 ^ (V::NAME.len() as u64) << 8);
        let cfg = TransposeConfig {
            block: 256,
            grid: 4,
        };
        // 5000 rows, each with column 0 (a column of 5000 entries: global
        // memory), column 1 in every 7th row (715: shared memory), a few
        // other columns, shuffled within the row; base 1.
        let rows: Vec<Vec<(usize, V::Value)>> = (0..5000)
            .map(|i| {
                let mut r = vec![0usize];
                if i % 7 == 0 {
                    r.push(1);
                }
                if rng.below(4) == 0 {
                    r.push(2 + rng.below(60) as usize);
                }
                for k in (1..r.len()).rev() {
                    r.swap(k, rng.below(k as u64 + 1) as usize);
                }
                r.into_iter()
                    .map(|c| {
                        let v = rng.below(1000) as f64;
                        (c, V::Value::from_parts(v, -v - 1.0))
                    })
                    .collect()
            })
            .collect();
        let x = HostCsr::<V>::from_rows(62, &rows, 1);
        check::<V>(&x, cfg, "a column of 5000 entries");
    }
}

#[test]
fn long_columns_every_variant() {
    visit_transpose_variants(&mut LongColumns);
}

/// The sort alone on rows already scattered in reverse order (the worst
/// case for the atomics' order), lengths around the warp and shared-memory
/// limits and powers of two.
struct SortRows;

impl TransposeVisitor for SortRows {
    fn visit<V: TransposeVariant>(&mut self) {
        let mut rng = Rng::new(0x5027 ^ V::WARP as u64);
        let w = V::WARP as usize;
        let lens = [
            0,
            1,
            2,
            3,
            w - 1,
            w,
            w + 1,
            2 * w,
            100,
            1023,
            1024,
            1025,
            2048,
            3001,
        ];
        let mut rows = vec![V::Offset::try_from_usize(1).unwrap()];
        let mut perm = Vec::new();
        let mut cols = Vec::new();
        for &n in &lens {
            // Distinct keys in random order; the column mirrors the key.
            let start = perm.len();
            let mut keys: Vec<usize> = (0..n).map(|k| 3 * (start + k) + 1).collect();
            for k in (1..n).rev() {
                keys.swap(k, rng.below(k as u64 + 1) as usize);
            }
            for &k in &keys {
                perm.push(V::Offset::try_from_usize(k).unwrap());
                cols.push(V::Index::try_from_usize(k / 3).unwrap());
            }
            rows.push(V::Offset::try_from_usize(perm.len() + 1).unwrap());
        }
        let (mut p, mut c) = (perm.clone(), cols.clone());
        let nr = lens.len() as i64;
        transpose::sort_rows::<V>(Launch::new(3, 64), &rows, 1, &mut p, &mut c, false);
        transpose::sort_rows::<V>(Launch::new(nr, 128), &rows, 1, &mut p, &mut c, true);
        for r in 0..lens.len() {
            let range = rows[r].to_usize() - 1..rows[r + 1].to_usize() - 1;
            let mut want: Vec<_> = perm[range.clone()].to_vec();
            want.sort();
            assert!(
                p[range.clone()] == want[..],
                "{}: row of {} not sorted",
                V::NAME,
                lens[r]
            );
            assert!(
                p[range.clone()]
                    .iter()
                    .zip(&c[range])
                    .all(|(k, c)| k.to_usize() / 3 == c.to_usize()),
                "{}: columns do not follow their keys in the row of {}",
                V::NAME,
                lens[r]
            );
        }
    }
}

#[test]
fn sort_rows_every_variant() {
    visit_transpose_variants(&mut SortRows);
}

/// Columns outside the matrix are skipped and never written out of bounds.
struct BadColumns;

impl TransposeVisitor for BadColumns {
    fn visit<V: TransposeVariant>(&mut self) {
        let mut rng = Rng::new(0xbad ^ V::WARP as u64);
        let mut x = random::<V>(&mut rng, 40, 20, 0, true, |r, _| r.below(6) as usize);
        // Columns -1 and ncols appear; the transpose counts only the rest.
        let n = x.cols.len();
        let mut bad = 0;
        for k in (0..n).step_by(5) {
            x.cols[k] = V::Index::try_from_usize(20 + k % 3).unwrap();
            bad += 1;
        }
        let mut counts = vec![0i64; 21];
        transpose::count::<V>(Launch::new(2, 64), &x.kernel(), &mut counts);
        assert_eq!(
            counts.iter().sum::<i64>(),
            (n - bad) as i64,
            "{}: out-of-range columns counted",
            V::NAME
        );
        assert_eq!(counts[20], 0);
    }
}

#[test]
fn out_of_range_columns_are_skipped() {
    visit_transpose_variants(&mut BadColumns);
}
