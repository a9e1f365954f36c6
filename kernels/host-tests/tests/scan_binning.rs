//! kernels/scan.cu and kernels/binning.cu on the emulator, against
//! sequential code: prefix sums (both warp widths), C's row offsets with
//! the offset_t overflow check, and row binning (every variant).

use rusparse_kernel_host_tests::scan_binning::{self, ScanBinning, MAX_BINS};
use rusparse_kernel_host_tests::{
    visit_variants, Index, Kernels, Launch, Rng, VariantVisitor, F64I32I32W32, F64I32I32W64,
};

fn sequential_exclusive(data: &[i64]) -> Vec<i64> {
    let mut sum = 0;
    data.iter()
        .map(|&x| {
            let s = sum;
            sum += x;
            s
        })
        .collect()
}

fn random_data(rng: &mut Rng, n: usize) -> Vec<i64> {
    // Mostly small sizes, some zeros and a few large ones (64-bit sums).
    (0..n)
        .map(|_| match rng.below(10) {
            0 => 0,
            1 => rng.below(1 << 40) as i64,
            _ => rng.below(1000) as i64,
        })
        .collect()
}

fn check_scan<V: ScanBinning>(rng: &mut Rng, n: usize, block: i64, grid: i64) {
    let data = random_data(rng, n);
    let mut got = data.clone();
    scan_binning::exclusive_scan::<V>(block, grid, &mut got);
    assert!(
        got == sequential_exclusive(&data),
        "{} scan of {n} items, block {block}, grid {grid}",
        V::NAME
    );
}

fn scans<V: ScanBinning>(seed: u64) {
    let mut rng = Rng::new(seed);
    let w = V::WARP;
    for n in [0, 1, 2, 2 * w as usize - 1, 2047, 2048, 2049] {
        for block in [w, 256] {
            check_scan::<V>(&mut rng, n, block, 1 << 20);
            check_scan::<V>(&mut rng, n, block, 3);
        }
    }
}

#[test]
fn scan_warp32() {
    scans::<F64I32I32W32>(1);
}

#[test]
fn scan_warp64() {
    scans::<F64I32I32W64>(2);
}

/// 100k items: with 256 threads one rs_scan_sums chunk holds every tile
/// total; with 64 threads the totals take several chunks with a carry.
#[test]
fn scan_100k() {
    let mut rng = Rng::new(3);
    check_scan::<F64I32I32W32>(&mut rng, 100_000, 256, 64);
    check_scan::<F64I32I32W64>(&mut rng, 100_000, 64, 1 << 20);
}

/// The tile totals rs_scan_blocks writes, and the per-tile scans.
#[test]
fn scan_blocks_tiles() {
    let mut rng = Rng::new(4);
    let (n, block) = (1000, 64);
    let data = random_data(&mut rng, n);
    let mut got = data.clone();
    let tiles = scan_binning::scan_tiles(n, block);
    let mut sums = vec![-1; tiles];
    scan_binning::scan_blocks::<F64I32I32W64>(Launch::new(2, block), &mut got, &mut sums);
    for (t, chunk) in data.chunks(2 * block as usize).enumerate() {
        assert_eq!(sums[t], chunk.iter().sum::<i64>(), "total of tile {t}");
        let start = t * 2 * block as usize;
        assert_eq!(
            &got[start..start + chunk.len()],
            &sequential_exclusive(chunk)[..],
            "scan of tile {t}"
        );
    }
}

fn write_offsets_case<V: Kernels>(offsets: &[i64], base: i32, l: Launch) {
    let m = offsets.len() - 1;
    let mut c_rows = vec![V::Offset::default(); m + 1];
    let mut error = u64::MAX;
    scan_binning::write_offsets::<V>(l, offsets, &mut c_rows, base, &mut error);
    let max = V::Offset::MAX as i64;
    let first_bad = offsets.iter().position(|&v| v + base as i64 > max);
    match first_bad {
        None => assert_eq!(error, u64::MAX, "{} no overflow", V::NAME),
        Some(i) => assert_eq!(
            error,
            (((i - 1) as u64) << 8) | 5,
            "{} overflow first at offset {i} (row {})",
            V::NAME,
            i - 1
        ),
    }
    let good = first_bad.unwrap_or(m + 1);
    for i in 0..good {
        assert_eq!(
            c_rows[i].to_i64(),
            offsets[i] + base as i64,
            "{} c_rows[{i}], base {base}",
            V::NAME
        );
    }
}

struct WriteOffsets(Rng);

impl VariantVisitor for WriteOffsets {
    fn visit<V: Kernels>(&mut self) {
        let rng = &mut self.0;
        for base in [0, 1] {
            for m in [0usize, 1, 1000] {
                let sizes = random_data(rng, m + 1)
                    .into_iter()
                    .map(|x| x % 1000)
                    .collect::<Vec<_>>();
                let offsets = sequential_exclusive(&sizes);
                write_offsets_case::<V>(&offsets, base, Launch::new(2, V::WARP));
                write_offsets_case::<V>(&offsets, base, Launch::new(12, 128));
            }
            // Crossing i32::MAX: rows of 3,000,000 entries overflow at
            // offset 716 (both bases); an offset of exactly i32::MAX
            // overflows only with base 1.
            let offsets: Vec<i64> = (0..=1000).map(|i| i * 3_000_000).collect();
            write_offsets_case::<V>(&offsets, base, Launch::new(3, 64));
            let mut edge: Vec<i64> = (0..=100).collect();
            edge[100] = i32::MAX as i64;
            write_offsets_case::<V>(&edge, base, Launch::new(1, 64));
        }
    }
}

#[test]
fn write_offsets_every_variant() {
    visit_variants(&mut WriteOffsets(Rng::new(5)));
}

#[test]
fn write_offsets_reports_the_first_row() {
    // Explicitly, for i32 offsets: offsets[3] = 2^31 does not fit, so C's
    // row 2 is named; the smallest row wins over later ones.
    let offsets = [0, 10, 20, 1 << 31, 1 << 32, 1 << 33];
    let mut c_rows = [0i32; 6];
    let mut error = u64::MAX;
    scan_binning::write_offsets::<F64I32I32W32>(
        Launch::new(1, 32),
        &offsets,
        &mut c_rows,
        0,
        &mut error,
    );
    assert_eq!(error, (2 << 8) | 5);
    assert_eq!(&c_rows[..3], &[0, 10, 20]);
}

#[test]
fn write_offsets_into_other_c_offset_types() {
    // C's row offsets of another type than offset_t: 64-bit ones take what
    // 32-bit ones refuse; 32-bit ones refuse it whatever offset_t is.
    struct OtherTypes;
    impl VariantVisitor for OtherTypes {
        fn visit<V: Kernels>(&mut self) {
            let big: Vec<i64> = (0..=1000).map(|i| i * 3_000_000).collect();
            let small: Vec<i64> = (0..=1000).map(|i| i * 7).collect();
            for base in [0, 1] {
                for offsets in [&big, &small] {
                    let want: Vec<i64> = offsets.iter().map(|v| v + i64::from(base)).collect();
                    let mut wide = vec![-7i64; offsets.len()];
                    let mut error = u64::MAX;
                    scan_binning::write_offsets_as::<V, i64>(
                        Launch::new(3, 64),
                        offsets,
                        &mut wide,
                        base,
                        &mut error,
                    );
                    assert_eq!(error, u64::MAX, "{} no overflow", V::NAME);
                    assert_eq!(wide, want, "{} wide, base {base}", V::NAME);
                    let mut narrow = vec![-7i32; offsets.len()];
                    scan_binning::write_offsets_as::<V, i32>(
                        Launch::new(2, V::WARP),
                        offsets,
                        &mut narrow,
                        base,
                        &mut error,
                    );
                    if offsets == &big {
                        // 716 * 3e6 > 2^31 - 1: C's row 715 is named.
                        assert_eq!(error, (715 << 8) | 5, "{} narrow", V::NAME);
                        assert_eq!(narrow[715], (want[715]) as i32);
                    } else {
                        assert_eq!(error, u64::MAX, "{} narrow", V::NAME);
                        let got: Vec<i64> = narrow.iter().map(|&v| i64::from(v)).collect();
                        assert_eq!(got, want, "{} narrow, base {base}", V::NAME);
                    }
                }
            }
            // i64::MAX does not fit with base 1: row 1 is named.
            let mut c_rows = [0i64; 3];
            let mut error = u64::MAX;
            scan_binning::write_offsets_as::<V, i64>(
                Launch::new(1, V::WARP),
                &[0, 5, i64::MAX],
                &mut c_rows,
                1,
                &mut error,
            );
            assert_eq!(error, (1 << 8) | 5, "{}", V::NAME);
            assert_eq!(&c_rows[..2], &[1, 6]);
        }
    }
    visit_variants(&mut OtherTypes);
}

/// Rows of a bin table: the bin of each row as the README defines it.
fn expected_bin(size: i64, a_len: Option<i64>, bounds: &[i64]) -> Option<usize> {
    if size <= 0 {
        return None;
    }
    if a_len == Some(1) {
        return Some(bounds.len());
    }
    Some(
        bounds
            .iter()
            .position(|&b| size <= b)
            .unwrap_or(bounds.len() - 1),
    )
}

struct Rows<O> {
    size: Vec<i64>,
    a_rows: Vec<O>,
}

fn random_rows<O: Index>(rng: &mut Rng, m: usize, top: i64) -> Rows<O> {
    let bits = 64 - (2 * top as u64).leading_zeros() as u64;
    let size: Vec<i64> = (0..m)
        .map(|_| match rng.below(5) {
            0 => 0,
            1 => 1 + rng.below(4) as i64,
            // log-uniform up to twice the top bound (above it too)
            _ => {
                let scale = 1u64 << rng.below(bits);
                1 + rng.below(scale) as i64
            }
        })
        .collect();
    // A's offsets (base 1): lengths 0 to 3, a third of them 1.
    let mut a_rows = vec![O::from_usize_unchecked(1)];
    let mut at = 1usize;
    for _ in 0..m {
        at += match rng.below(3) {
            0 => 1,
            _ => [0, 2, 3][rng.below(3) as usize],
        };
        a_rows.push(O::from_usize_unchecked(at));
    }
    Rows { size, a_rows }
}

fn check_binning<V: Kernels>(rows: &Rows<V::Offset>, direct: bool, bounds: &[i64], l: Launch) {
    let m = rows.size.len();
    let nb = bounds.len();
    let a_rows = direct.then_some(&rows.a_rows[..]);
    let what = format!("{} m {m} direct {direct} bounds {bounds:?} {l:?}", V::NAME);

    let mut expect: Vec<Vec<u32>> = vec![Vec::new(); nb + 1];
    for i in 0..m {
        let a_len = a_rows.map(|a| a[i + 1].to_i64() - a[i].to_i64());
        if let Some(j) = expected_bin(rows.size[i], a_len, bounds) {
            expect[j].push(i as u32);
        }
    }

    let mut bin_size = vec![0i64; nb + 1];
    let mut max_size = 0i64;
    scan_binning::bin_count::<V>(
        l,
        m,
        &rows.size,
        a_rows,
        bounds,
        &mut bin_size,
        &mut max_size,
    );
    let counts: Vec<i64> = expect.iter().map(|b| b.len() as i64).collect();
    assert_eq!(bin_size, counts, "bin sizes, {what}");
    assert_eq!(
        max_size,
        rows.size.iter().copied().max().unwrap_or(0),
        "max size, {what}"
    );

    let bin_offset = sequential_exclusive(&counts)
        .into_iter()
        .chain([counts.iter().sum()])
        .collect::<Vec<i64>>();
    let total = bin_offset[nb + 1] as usize;
    let mut cursor = vec![0i64; nb + 1];
    let mut bins = vec![u32::MAX; total];
    // SAFETY: the offsets are the scan of the counts just checked.
    unsafe {
        scan_binning::bin_fill::<V>(
            l,
            m,
            &rows.size,
            a_rows,
            bounds,
            &bin_offset,
            &mut cursor,
            &mut bins,
        )
    };
    assert_eq!(cursor, counts, "bin cursors, {what}");
    for j in 0..=nb {
        let mut got = bins[bin_offset[j] as usize..bin_offset[j + 1] as usize].to_vec();
        got.sort_unstable();
        assert!(got == expect[j], "rows of bin {j}, {what}");
    }
}

const TABLES: &[&[i64]] = &[
    &[32, 64, 128, 256, 512, 1024, 2048, 4096],
    &[1],
    &[8, 1 << 40],
];

struct Binning(Rng);

impl VariantVisitor for Binning {
    fn visit<V: Kernels>(&mut self) {
        let rng = &mut self.0;
        let w = V::WARP;
        for (k, bounds) in TABLES.iter().enumerate() {
            let top = bounds.last().expect("a bound").min(&(1 << 20));
            let m = [1500, 700, 300][k];
            let rows = random_rows::<V::Offset>(rng, m, *top);
            // More blocks than rows need, then fewer (several passes each).
            let enough = m.div_ceil(256) as i64 + 2;
            check_binning::<V>(&rows, true, bounds, Launch::new(enough, 256));
            check_binning::<V>(&rows, false, bounds, Launch::new(3, w));
            check_binning::<V>(&rows, k == 0, bounds, Launch::new(2, 128));
        }
        // Empty and tiny inputs; the most bins.
        for m in [0, 1, 2] {
            let rows = random_rows::<V::Offset>(rng, m, 100);
            check_binning::<V>(&rows, true, TABLES[0], Launch::new(1, w));
        }
        let most: Vec<i64> = (1..=MAX_BINS as u32).map(|k| 1i64 << k).collect();
        let rows = random_rows::<V::Offset>(rng, 500, 1 << 20);
        check_binning::<V>(&rows, true, &most, Launch::new(2, 64));
    }
}

#[test]
fn binning_every_variant() {
    visit_variants(&mut Binning(Rng::new(6)));
}

/// Every row of A has one entry: all non-empty rows go to the direct bin.
#[test]
fn binning_all_direct() {
    let m: i32 = 300;
    let size: Vec<i64> = (0..m).map(|i| i64::from(i % 7)).collect();
    let a_rows: Vec<i32> = (0..=m).collect();
    let rows = Rows { size, a_rows };
    check_binning::<F64I32I32W32>(&rows, true, TABLES[0], Launch::new(2, 64));
}
