//! rusparse's real GPU pipeline (`rusparse::backend::gpu::GpuSpgemm`, the
//! code the CUDA and HIP back ends run) on an emulated device
//! (`rusparse_kernel_host_tests::device`): H100 limits for the warp-32
//! variants, MI50 / Hygon DCU limits (wavefront 64, 64 KiB of LDS) for the
//! warp-64 ones. Every product is compared exactly with
//! `rusparse::reference` (integer-valued entries), and every run checks
//! that the plan gave back all device memory, streams and events.
//!
//! Covered: every op pair (N, T, C) and both index bases, duplicates and
//! unsorted rows, empty operands, rows long enough to spill to the global
//! kernels (with and without ALG3's chunk fraction), deterministic plans,
//! beta and reuse with new values, C's row offsets of the other width,
//! malformed input (INVALID_VALUE naming the entry) and an allocation
//! failure at every allocation of a product.

use rusparse::backend::gpu::{
    predict_nnz, DeviceCsr, DeviceScalars, GpuDevice, GpuPlanInfo, GpuSpgemm, GpuTuning,
    KernelTypes, RawStream, ValueKind,
};
use rusparse::plan::predict::{self, Sampling};
use rusparse::plan::row_work::{PackedRowShapes, PatternShapes, RowShapes};
use rusparse::plan::{OperandPattern, RowPattern, RowWork};
use rusparse::{Error, Index, Op};
use rusparse_kernel_host_tests::device::EmulatedDevice;
use rusparse_kernel_host_tests::hash::{visit_hash_variants, HashVariant, HashVisitor, HostCsr};
use rusparse_kernel_host_tests::support::{random_rows, CANONICAL, MESSY};
use rusparse_kernel_host_tests::{
    fractional_value as frac_val, small_int_value as int_val, variant_rng as seed, Rng, TestValue,
    Variant,
};
use std::sync::Arc;

type Val<V> = <V as Variant>::Value;

/// The kernel types of a variant.
fn types<V: Variant>() -> KernelTypes {
    let value = match (V::COMPLEX, std::mem::size_of::<Val<V>>()) {
        (false, 4) => ValueKind::F32,
        (false, _) => ValueKind::F64,
        (true, 8) => ValueKind::C32,
        (true, _) => ValueKind::C64,
    };
    KernelTypes {
        value,
        offset64: std::mem::size_of::<V::Offset>() == 8,
        index64: std::mem::size_of::<V::Index>() == 8,
    }
}

/// `nrows x ncols` with row `i` of `len(i)` entries, columns random (with
/// repeats and in random order when `messy`, else sorted with the repeats
/// removed), small integer values.
fn random<V: Variant>(
    rng: &mut Rng,
    nrows: usize,
    ncols: usize,
    base: i32,
    messy: bool,
    len: impl FnMut(&mut Rng, usize) -> usize,
) -> HostCsr<V> {
    let cols = if messy { MESSY } else { CANONICAL };
    let rows = random_rows(rng, nrows, ncols, cols, len, int_val::<V>);
    HostCsr::from_rows(ncols, &rows, base)
}

/// Row lengths from empty to a few dozen, one row of one entry in five.
fn mixed(rng: &mut Rng, i: usize) -> usize {
    match i % 5 {
        0 => 1,
        1 => 0,
        2 => rng.below(4) as usize,
        3 => 4 + rng.below(12) as usize,
        _ => 16 + rng.below(40) as usize,
    }
}

/// A matrix on the emulated device, freed when dropped.
struct Uploaded {
    dev: Arc<EmulatedDevice>,
    csr: DeviceCsr,
}

impl Uploaded {
    /// `x` on the device, its arrays declared `spare` entries longer than
    /// its offsets use (spare room, as cuSPARSE's sample declares it): the
    /// spare entries hold an out-of-range column and a NaN, so a kernel
    /// that read them would fail validation or poison C.
    fn new<V: Variant>(dev: &Arc<EmulatedDevice>, x: &HostCsr<V>, spare: usize) -> Uploaded {
        let mut cols = x.cols.clone();
        let mut vals = x.vals.clone();
        let junk = V::Index::try_from_usize(x.ncols + 7).expect("a column index");
        cols.extend(std::iter::repeat_n(junk, spare));
        vals.extend(std::iter::repeat_n(
            Val::<V>::from_parts(f64::NAN, 0.0),
            spare,
        ));
        let nnz = cols.len();
        Uploaded {
            dev: dev.clone(),
            csr: DeviceCsr {
                rows: dev.upload_new(&x.rows),
                cols: if nnz > 0 { dev.upload_new(&cols) } else { 0 },
                vals: if nnz > 0 { dev.upload_new(&vals) } else { 0 },
                nrows: x.nrows as i64,
                ncols: x.ncols as i64,
                nnz: nnz as i64,
                base: x.base,
            },
        }
    }
}

impl Drop for Uploaded {
    fn drop(&mut self) {
        for p in [self.csr.rows, self.csr.cols, self.csr.vals] {
            if p != 0 {
                self.dev.free_input(p);
            }
        }
    }
}

/// One device allocation of the test (C's arrays, alpha, beta).
struct Buffer {
    dev: Arc<EmulatedDevice>,
    ptr: u64,
}

impl Buffer {
    fn new<T: Copy>(dev: &Arc<EmulatedDevice>, data: &[T]) -> Buffer {
        Buffer {
            dev: dev.clone(),
            ptr: dev.upload_new(data),
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.dev.free_input(self.ptr);
    }
}

/// What one product is asked to do.
#[derive(Clone)]
struct Job<V: Variant> {
    op_a: Op,
    op_b: Op,
    alpha: Val<V>,
    /// beta and C's old values (on the product's pattern).
    beta: Option<(Val<V>, Vec<Val<V>>)>,
    deterministic: bool,
    chunk_fraction: Option<f32>,
    /// C's row offsets 64-bit (else 32-bit); `None`: A's type.
    c_offsets64: Option<bool>,
    /// Numeric phases to run (the later ones on the same plan, as reuse).
    rounds: usize,
    /// Entries past the offsets in A's and B's arrays (spare room).
    spare: usize,
    /// A kernel configuration other than the planner's (the GPU
    /// selector's sweep).
    tuning: GpuTuning,
}

impl<V: Variant> Job<V> {
    fn new(op_a: Op, op_b: Op) -> Self {
        Job {
            op_a,
            op_b,
            alpha: Val::<V>::from_parts(2.0, -1.0),
            beta: None,
            deterministic: false,
            chunk_fraction: None,
            c_offsets64: None,
            rounds: 1,
            spare: 0,
            tuning: GpuTuning::default(),
        }
    }
}

/// C as read back: row offsets (as i64), columns, values.
struct Output<V: Variant> {
    rows: Vec<i64>,
    cols: Vec<V::Index>,
    vals: Vec<Val<V>>,
}

/// Runs the pipeline for `job` on `dev`; checks afterwards (also on
/// failure) that the plan gave back every allocation, stream and event.
fn run<V: Variant>(
    dev: &Arc<EmulatedDevice>,
    a: &HostCsr<V>,
    b: &HostCsr<V>,
    job: &Job<V>,
) -> Result<(Output<V>, GpuPlanInfo), Error> {
    let before = dev.live_allocations().len();
    let r = run_inner(dev, a, b, job);
    assert_eq!(
        dev.live_allocations().len(),
        before,
        "{}: device memory left after the product: {:?}",
        V::NAME,
        dev.live_allocations()
    );
    assert_eq!(dev.live_handles(), 0, "{}: streams or events left", V::NAME);
    r
}

fn run_inner<V: Variant>(
    dev: &Arc<EmulatedDevice>,
    a: &HostCsr<V>,
    b: &HostCsr<V>,
    job: &Job<V>,
) -> Result<(Output<V>, GpuPlanInfo), Error> {
    let gpu: Arc<dyn GpuDevice> = dev.clone();
    let stream: RawStream = std::ptr::null_mut();
    let (da, db) = (
        Uploaded::new(dev, a, job.spare),
        Uploaded::new(dev, b, job.spare),
    );
    let mut plan = GpuSpgemm::work_estimation(
        &gpu,
        stream,
        (job.op_a, &da.csr),
        (job.op_b, &db.csr),
        types::<V>(),
        job.deterministic,
    )?;
    if let Some(f) = job.chunk_fraction {
        plan.set_chunk_fraction(f);
    }
    if job.tuning != GpuTuning::default() {
        plan.tune(stream, job.tuning)?;
    }
    let c64 = job
        .c_offsets64
        .unwrap_or(std::mem::size_of::<V::Offset>() == 8);
    plan.set_c_offsets64(c64);
    let nnz = plan.symbolic(stream, &da.csr, &db.csr)? as usize;
    let (m, n) = (
        if job.op_a.transposes() {
            a.ncols
        } else {
            a.nrows
        },
        if job.op_b.transposes() {
            b.nrows
        } else {
            b.ncols
        },
    );
    let c_rows = if c64 {
        Buffer::new(dev, &vec![-1i64; m + 1])
    } else {
        Buffer::new(dev, &vec![-1i32; m + 1])
    };
    let c_cols = Buffer::new(dev, &vec![V::Index::default(); nnz.max(1)]);
    let old = match &job.beta {
        Some((_, old)) => {
            assert_eq!(old.len(), nnz, "old values on the product's pattern");
            old.clone()
        }
        None => vec![Val::<V>::from_parts(f64::NAN, 0.0); nnz],
    };
    let c_vals = Buffer::new(
        dev,
        &if nnz > 0 {
            old
        } else {
            vec![Val::<V>::from_parts(0.0, 0.0)]
        },
    );
    let c = DeviceCsr {
        rows: c_rows.ptr,
        cols: if nnz > 0 { c_cols.ptr } else { 0 },
        vals: if nnz > 0 { c_vals.ptr } else { 0 },
        nrows: m as i64,
        ncols: n as i64,
        nnz: nnz as i64,
        base: a.base,
    };
    let alpha = Buffer::new(dev, &[job.alpha]);
    let beta_value = job
        .beta
        .as_ref()
        .map_or(Val::<V>::from_parts(0.0, 0.0), |b| b.0);
    let beta = Buffer::new(dev, &[beta_value]);
    for _ in 0..job.rounds {
        plan.numeric(
            stream,
            &da.csr,
            &db.csr,
            &c,
            DeviceScalars {
                alpha: alpha.ptr,
                beta: beta.ptr,
                beta_is_zero: job.beta.is_none(),
            },
        )?;
    }
    let rows: Vec<i64> = if c64 {
        dev.read_back::<i64>(c_rows.ptr, m + 1)
    } else {
        dev.read_back::<i32>(c_rows.ptr, m + 1)
            .into_iter()
            .map(i64::from)
            .collect()
    };
    let out = Output {
        rows,
        cols: dev.read_back(c_cols.ptr, nnz),
        vals: dev.read_back(c_vals.ptr, nnz),
    };
    Ok((out, plan.info()))
}

/// `alpha * op(A) op(B) (+ beta * old)` by rusparse's reference.
fn reference<V: Variant>(a: &HostCsr<V>, b: &HostCsr<V>, job: &Job<V>) -> Output<V> {
    let c = rusparse::reference::spgemm(&a.view(), job.op_a, &b.view(), job.op_b, job.alpha)
        .expect("reference product");
    let mut vals = c.values().to_vec();
    if let Some((beta, old)) = &job.beta {
        for (v, &o) in vals.iter_mut().zip(old) {
            *v += *beta * o;
        }
    }
    Output {
        rows: c.row_offsets().iter().map(|o| o.to_i64()).collect(),
        cols: c.col_indices().to_vec(),
        vals,
    }
}

/// Equal values, -0 taken as 0.
fn key<V: Variant>(v: Val<V>) -> (u64, u64) {
    let (re, im) = v.parts();
    ((re + 0.0).to_bits(), (im + 0.0).to_bits())
}

#[track_caller]
fn assert_output<V: Variant>(got: &Output<V>, want: &Output<V>, what: &str) {
    let name = V::NAME;
    assert_eq!(got.rows, want.rows, "{name} {what}: row offsets");
    let cols = |x: &Output<V>| x.cols.iter().map(|c| c.to_i64()).collect::<Vec<_>>();
    assert_eq!(cols(got), cols(want), "{name} {what}: column indices");
    let k = |x: &Output<V>| x.vals.iter().map(|&v| key::<V>(v)).collect::<Vec<_>>();
    assert!(
        k(got) == k(want),
        "{name} {what}: values {:?} != {:?}",
        got.vals,
        want.vals
    );
}

/// Runs `job` and compares with the reference; returns the plan's info.
#[track_caller]
fn check<V: Variant>(
    dev: &Arc<EmulatedDevice>,
    a: &HostCsr<V>,
    b: &HostCsr<V>,
    job: &Job<V>,
    what: &str,
) -> GpuPlanInfo {
    let (got, info) = run(dev, a, b, job).unwrap_or_else(|e| panic!("{} {what}: {e}", V::NAME));
    assert_output(&got, &reference(a, b, job), what);
    info
}

const OPS: [Op; 3] = [Op::N, Op::T, Op::C];

#[test]
fn every_op_pair_and_base_matches_the_reference() {
    /// Counts the variants: each takes a third of the op pairs, so the
    /// warp-32 variants cover all nine and the warp-64 ones six (the
    /// emulation costs about a second per product).
    struct T(usize);
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            self.0 += 1;
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(1);
            let (m, k, n) = (37, 29, 41);
            for (t, (op_a, op_b)) in OPS
                .iter()
                .flat_map(|&x| OPS.iter().map(move |&y| (x, y)))
                .enumerate()
                .filter(|(t, _)| (t + self.0).is_multiple_of(3))
            {
                let base = (t % 2) as i32;
                // op(A) is m x k, op(B) is k x n.
                let (ar, ac) = if op_a.transposes() { (k, m) } else { (m, k) };
                let (br, bc) = if op_b.transposes() { (n, k) } else { (k, n) };
                let a = random::<V>(&mut rng, ar, ac, base, t % 3 == 0, mixed);
                let b = random::<V>(&mut rng, br, bc, base, t % 3 == 1, mixed);
                // Every other pair with spare room past the offsets.
                let job = Job {
                    spare: 3 * (t % 2),
                    ..Job::new(op_a, op_b)
                };
                let what = format!(
                    "op(A) = {op_a:?}, op(B) = {op_b:?}, base {base}, {} spare entries",
                    job.spare
                );
                let info = check(&dev, &a, &b, &job, &what);
                assert_eq!(
                    info.nnz,
                    Some(reference(&a, &b, &Job::new(op_a, op_b)).vals.len() as i64)
                );
            }
        }
    }
    visit_hash_variants(&mut T(0));
}

#[test]
fn empty_operands_and_products() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(2);
            let shapes: [(usize, usize, usize); 5] =
                [(0, 5, 3), (4, 0, 3), (4, 5, 0), (0, 0, 0), (6, 7, 8)];
            for (m, k, n) in shapes {
                // The last shape: operands with entries but no products
                // (A's columns hit only empty rows of B).
                let a = random::<V>(&mut rng, m, k, 0, false, |_, i| usize::from(i % 2 == 0));
                let b = random::<V>(&mut rng, k, n, 0, false, |_, _| 0);
                let info = check(
                    &dev,
                    &a,
                    &b,
                    &Job::new(Op::N, Op::N),
                    &format!("{m}x{k}x{n}"),
                );
                assert_eq!(info.nnz, Some(0));
                assert_eq!(info.nprod, 0);
            }
        }
    }
    visit_hash_variants(&mut T);
}

/// A with ordinary rows and one row that reaches `spread` distinct
/// columns of C through `spread / 16` rows of B.
fn with_long_row<V: Variant>(
    rng: &mut Rng,
    spread: usize,
    stride: usize,
) -> (HostCsr<V>, HostCsr<V>) {
    with_long_rows(rng, spread, stride, &[5])
}

/// [`with_long_row`] with the rows `long` (of 24) long.
fn with_long_rows<V: Variant>(
    rng: &mut Rng,
    spread: usize,
    stride: usize,
    long: &[usize],
) -> (HostCsr<V>, HostCsr<V>) {
    let k = spread / 16;
    let n = spread * stride + 64;
    // B's row r holds 16 distinct columns (r*16 .. r*16 + 15) * stride, so
    // A's long row (all k rows of B) has `spread` entries over `n` columns.
    let b_rows: Vec<Vec<(usize, Val<V>)>> = (0..k)
        .map(|r| {
            (0..16)
                .map(|j| ((r * 16 + j) * stride, int_val::<V>(rng)))
                .collect()
        })
        .collect();
    let b = HostCsr::from_rows(n, &b_rows, 0);
    let a_rows: Vec<Vec<(usize, Val<V>)>> = (0..24)
        .map(|i| {
            if long.contains(&i) {
                (0..k).map(|c| (c, int_val::<V>(rng))).collect()
            } else {
                (0..(i % 4))
                    .map(|_| (rng.below(k as u64) as usize, int_val::<V>(rng)))
                    .collect()
            }
        })
        .collect();
    (HostCsr::from_rows(k, &a_rows, 0), b)
}

#[test]
fn long_rows_spill_to_the_global_kernels_with_and_without_alg3() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(3);
            // Above the largest shared symbolic table of each device
            // (8,192 entries on the MI50; about 58,000 on the H100).
            let spread = if V::WARP == 64 { 9_216 } else { 65_536 };
            let (a, b) = with_long_row::<V>(&mut rng, spread, 1);
            let job = Job::new(Op::N, Op::N);
            let info = check(&dev, &a, &b, &job, "long row");
            // The same row over 2^11 times as many columns: too wide for the
            // rank bitmap, so the global kernel sorts it (bitonic) instead.
            let (wa, wb) = with_long_row::<V>(&mut rng, spread, 1 << 11);
            let wide = check(&dev, &wa, &wb, &job, "long row over many columns");
            assert_eq!(
                wide.numeric_rows.iter().rev().nth(1),
                Some(&1),
                "{}: {wide:?}",
                V::NAME
            );
            assert_eq!(info.spilled_rows, 1, "{}: {info:?}", V::NAME);
            assert_eq!(
                info.numeric_rows.iter().rev().nth(1),
                Some(&1),
                "{}: {info:?}",
                V::NAME
            );
            let peak = dev.peak_bytes();
            let alg3 = Job {
                chunk_fraction: Some(0.25),
                ..job
            };
            check(&dev, &a, &b, &alg3, "long row, ALG3");
            assert!(dev.peak_bytes() <= peak, "ALG3 used more memory");
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn hub_rows_of_b_are_taken_by_the_whole_team() {
    // B rows longer than a block (a power-law graph's hubs) among short
    // ones: where a block's team splits a row of A into sub-groups, the
    // shared and global kernels hand those B rows to the whole team
    // (rsh_team_long_rows) and the short ones to their sub-groups. Rows of
    // A that reach a mid hub (a large shared bin), a big hub (the global
    // numeric bin), all big hubs (a symbolic spill, whose block stops at the
    // spill limit) and none must all give the reference's C, in the
    // default and the deterministic mode.
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(21);
            let (big, mid, hubs) = (8_192usize, 3_000usize, 4usize);
            let n = hubs * big + mid + 512;
            let short_rows = 600usize;
            // B: rows 0..hubs the big hubs (disjoint columns), row `hubs`
            // the mid hub, then short rows of 1 to 4 random columns.
            let mut b_rows: Vec<Vec<(usize, Val<V>)>> = (0..hubs)
                .map(|h| {
                    (0..big)
                        .map(|j| (h * big + j, int_val::<V>(&mut rng)))
                        .collect()
                })
                .collect();
            b_rows.push(
                (0..mid)
                    .map(|j| (hubs * big + j, int_val::<V>(&mut rng)))
                    .collect(),
            );
            for r in 0..short_rows {
                let mut cols: Vec<usize> = (0..1 + r % 4)
                    .map(|_| rng.below(n as u64) as usize)
                    .collect();
                cols.sort_unstable();
                cols.dedup();
                b_rows.push(
                    cols.into_iter()
                        .map(|c| (c, int_val::<V>(&mut rng)))
                        .collect(),
                );
            }
            let k = b_rows.len();
            let b: HostCsr<V> = HostCsr::from_rows(n, &b_rows, 0);
            let shorts = |rng: &mut Rng, count: usize| -> Vec<(usize, Val<V>)> {
                (0..count)
                    .map(|j| {
                        (
                            hubs + 1 + (j * 7 + rng.below(5) as usize) % short_rows,
                            int_val::<V>(rng),
                        )
                    })
                    .collect()
            };
            let mut a_rows: Vec<Vec<(usize, Val<V>)>> = Vec::new();
            for i in 0..40usize {
                let mut row = match i {
                    0 => shorts(&mut rng, 300),
                    1 => shorts(&mut rng, 20),
                    2 => Vec::new(),
                    _ => shorts(&mut rng, i % 6),
                };
                match i {
                    // A big hub among short rows: the global numeric bin.
                    0 => row.push((2, int_val::<V>(&mut rng))),
                    // Every big hub: a symbolic spill.
                    1 => row.extend((0..hubs).map(|h| (h, int_val::<V>(&mut rng)))),
                    // The mid hub among short rows: a large shared bin.
                    5 | 17 => row.push((hubs, int_val::<V>(&mut rng))),
                    _ => {}
                }
                row.sort_by_key(|e| e.0);
                row.dedup_by_key(|e| e.0);
                a_rows.push(row);
            }
            let a: HostCsr<V> = HostCsr::from_rows(k, &a_rows, 0);
            let info = check(&dev, &a, &b, &Job::new(Op::N, Op::N), "hubs");
            assert!(info.spilled_rows >= 1, "{}: {info:?}", V::NAME);
            assert!(info.threads_per_b_row < 1024, "{}: {info:?}", V::NAME);
            let det = Job {
                deterministic: true,
                ..Job::new(Op::N, Op::N)
            };
            check(&dev, &a, &b, &det, "hubs, deterministic");
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn global_tables_run_in_batches_of_the_size_asked() {
    // Three long rows: batches of one table each, of all three at once and
    // the planner's (C small: its least size, all three) give the same C.
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(12);
            let spread = if V::WARP == 64 { 9_216 } else { 65_536 };
            let (a, b) = with_long_rows::<V>(&mut rng, spread, 1, &[2, 11, 17]);
            for (bytes, batches) in [(None, 1), (Some(1), 3), (Some(1 << 40), 1)] {
                let job = Job {
                    tuning: GpuTuning {
                        global_batch_bytes: bytes,
                        ..GpuTuning::default()
                    },
                    ..Job::new(Op::N, Op::N)
                };
                let what = format!("global batches of {bytes:?} bytes");
                let info = check(&dev, &a, &b, &job, &what);
                assert_eq!(info.spilled_rows, 3, "{what}: {info:?}");
                assert_eq!(
                    info.numeric_rows.iter().rev().nth(1),
                    Some(&3),
                    "{what}: {info:?}"
                );
                assert_eq!(info.global_batches, (batches, batches), "{what}: {info:?}");
            }
            let job = Job {
                tuning: GpuTuning {
                    global_batch_bytes: Some(0),
                    ..GpuTuning::default()
                },
                ..Job::new(Op::N, Op::N)
            };
            let e = run(&dev, &a, &b, &job).err().expect("refused");
            assert!(
                matches!(&e, Error::InvalidValue(m) if m.contains("more than 0 bytes")),
                "{e}"
            );
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn every_tuned_configuration_matches_the_reference() {
    // The GPU selector's sweep runs every threads-per-B-row choice and
    // smaller bin bounds: each must give the same C, and rows must move to
    // larger tables as the bounds shrink.
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(9);
            let a = random::<V>(&mut rng, 60, 50, 0, true, mixed);
            let b = random::<V>(&mut rng, 50, 70, 0, false, mixed);
            let weight = |rows: &[i64]| -> i64 {
                // The last entry is the direct bin (one entry in A's row).
                let bins = &rows[..rows.len() - 1];
                bins.iter().enumerate().map(|(j, &r)| j as i64 * r).sum()
            };
            let base = check(&dev, &a, &b, &Job::new(Op::N, Op::N), "planner's");
            let mut g: u32 = 2;
            while i64::from(g) <= V::WARP {
                for scale in [None, Some(0.5), Some(0.01)] {
                    let job = Job {
                        tuning: GpuTuning {
                            threads_per_b_row: Some(g),
                            bin_scale: scale,
                            ..GpuTuning::default()
                        },
                        ..Job::new(Op::N, Op::N)
                    };
                    let what = format!("{g} threads per B row, bin scale {scale:?}");
                    let info = check(&dev, &a, &b, &job, &what);
                    assert_eq!(info.threads_per_b_row, g, "{what}");
                    if let Some(f) = scale {
                        // Far smaller bounds move some row for certain.
                        let moved = |now: i64, before: i64| {
                            if f < 0.1 {
                                now > before
                            } else {
                                now >= before
                            }
                        };
                        assert!(
                            moved(weight(&info.symbolic_rows), weight(&base.symbolic_rows))
                                && moved(weight(&info.numeric_rows), weight(&base.numeric_rows)),
                            "{what}: rows did not move to larger tables: {info:?} vs {base:?}"
                        );
                    }
                }
                g *= 2;
            }
            for (bad, needle) in [
                ((Some(3), None), "power of two"),
                ((Some(1), None), "power of two"),
                ((Some(2 * V::WARP as u32), None), "power of two"),
                ((None, Some(0.0)), "bin scale"),
                ((None, Some(1.5)), "bin scale"),
                ((None, Some(f64::NAN)), "bin scale"),
            ] {
                let job = Job {
                    tuning: GpuTuning {
                        threads_per_b_row: bad.0,
                        bin_scale: bad.1,
                        ..GpuTuning::default()
                    },
                    ..Job::new(Op::N, Op::N)
                };
                let e = run(&dev, &a, &b, &job).err().expect("refused");
                assert!(
                    matches!(&e, Error::InvalidValue(m) if m.contains(needle)),
                    "{bad:?}: {e}"
                );
            }
            // After the symbolic phase the configuration is fixed.
            let gpu: Arc<dyn GpuDevice> = dev.clone();
            let stream: RawStream = std::ptr::null_mut();
            let (da, db) = (Uploaded::new(&dev, &a, 0), Uploaded::new(&dev, &b, 0));
            let mut plan = GpuSpgemm::work_estimation(
                &gpu,
                stream,
                (Op::N, &da.csr),
                (Op::N, &db.csr),
                types::<V>(),
                false,
            )
            .expect("work estimation");
            plan.symbolic(stream, &da.csr, &db.csr)
                .expect("symbolic phase");
            let late = GpuTuning {
                threads_per_b_row: Some(4),
                ..GpuTuning::default()
            };
            let e = plan.tune(stream, late).expect_err("too late");
            assert!(
                matches!(&e, Error::InvalidValue(m) if m.contains("only before the symbolic phase")),
                "{e}"
            );
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn deterministic_plans_are_bitwise_reproducible() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(4);
            for messy in [false, true] {
                let mut a = random::<V>(&mut rng, 40, 30, 0, false, mixed);
                let mut b = random::<V>(&mut rng, 30, 50, 0, messy, mixed);
                for v in a.vals.iter_mut().chain(b.vals.iter_mut()) {
                    *v = frac_val::<V>(&mut rng);
                }
                let job = Job {
                    deterministic: true,
                    ..Job::new(Op::N, Op::N)
                };
                let (first, info) = run(&dev, &a, &b, &job).unwrap();
                assert!(info.deterministic);
                let (second, _) = run(&dev, &a, &b, &job).unwrap();
                let bits = |x: &Output<V>| {
                    x.vals
                        .iter()
                        .map(|v| {
                            let (re, im) = v.parts();
                            (re.to_bits(), im.to_bits())
                        })
                        .collect::<Vec<_>>()
                };
                assert_eq!(first.rows, second.rows);
                assert_eq!(bits(&first), bits(&second), "{} messy {messy}", V::NAME);
            }
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn beta_reuse_and_the_other_offset_width() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(5);
            let a = random::<V>(&mut rng, 33, 21, 1, true, mixed);
            let b = random::<V>(&mut rng, 21, 27, 1, false, mixed);
            let nnz = reference(&a, &b, &Job::new(Op::N, Op::N)).vals.len();
            let old: Vec<Val<V>> = (0..nnz).map(|_| int_val::<V>(&mut rng)).collect();
            let job = Job {
                beta: Some((Val::<V>::from_parts(-1.0, 2.0), old)),
                ..Job::new(Op::N, Op::N)
            };
            check(&dev, &a, &b, &job, "beta");
            // Three numeric phases on one plan: with beta = 0 each
            // overwrites C, so the result is the product's.
            let reuse = Job {
                rounds: 3,
                ..Job::new(Op::N, Op::N)
            };
            check(&dev, &a, &b, &reuse, "three numeric phases");
            let wide = std::mem::size_of::<V::Offset>() == 8;
            let other = Job {
                c_offsets64: Some(!wide),
                ..Job::new(Op::T, Op::N)
            };
            let at = random::<V>(&mut rng, 21, 33, 1, true, mixed);
            check(&dev, &at, &b, &other, "C's offsets of the other width");
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn malformed_input_is_invalid_value_naming_the_entry() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(6);
            let a = random::<V>(&mut rng, 12, 9, 0, false, |_, _| 3);
            let b = random::<V>(&mut rng, 9, 10, 0, false, |_, _| 2);
            let job = Job::new(Op::N, Op::N);

            let mut bad_col = a.clone();
            bad_col.cols[7] = V::Index::try_from_usize(9).unwrap();
            let row = (0..a.nrows).find(|&i| a.range(i).contains(&7)).unwrap();
            let e = run(&dev, &bad_col, &b, &job)
                .err()
                .expect("a bad column is refused");
            let msg = e.to_string();
            assert!(
                matches!(e, Error::InvalidValue(_))
                    && msg.contains(&format!("A's row {row} has a column index outside 0..9"))
                    && msg.contains("colInd[7] = 9"),
                "{}: {msg}",
                V::NAME
            );

            let mut bad_offsets = b.clone();
            bad_offsets.rows[4] = V::Offset::try_from_usize(1).unwrap();
            let e = run(&dev, &a, &bad_offsets, &job)
                .err()
                .expect("bad offsets are refused");
            assert!(
                matches!(&e, Error::InvalidValue(m) if m.contains("B's row offsets are invalid at row 3")),
                "{}: {e}",
                V::NAME
            );

            // The same check for a transposed operand, as given.
            let b12 = random::<V>(&mut rng, 12, 10, 0, false, |_, _| 2);
            let e = run(&dev, &bad_col, &b12, &Job::new(Op::T, Op::N)).err();
            assert!(
                matches!(&e, Some(Error::InvalidValue(m)) if m.contains("colInd[7] = 9")),
                "{}: {e:?}",
                V::NAME
            );
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn every_allocation_failure_is_reported_and_leaks_nothing() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(7);
            // Transposes, spills and global tables: every kind of
            // allocation the pipeline makes (the long row on one variant
            // of the 64 KiB device, where it is cheapest to emulate).
            let (a, b) = if V::NAME == "f64_i32_i32_w64" {
                with_long_row::<V>(&mut rng, 9_216, 1)
            } else {
                let a = random::<V>(&mut rng, 30, 20, 0, true, mixed);
                (a, random::<V>(&mut rng, 20, 25, 0, false, mixed))
            };
            let job = Job::new(Op::N, Op::T);
            let bt = HostCsr::<V>::from_rows(b.nrows, &transpose_rows::<V>(&b), b.base);
            // The test's own buffers are not counted (`upload_new`).
            let start = dev.allocations();
            check(&dev, &a, &bt, &job, "no failure");
            let total = dev.allocations() - start;
            let mut failed = 0;
            for k in 1..=total {
                dev.fail_allocation(Some(k));
                match run(&dev, &a, &bt, &job) {
                    Err(Error::InsufficientResources(m)) => {
                        failed += 1;
                        assert!(m.contains("made to fail"), "{m}");
                    }
                    Err(e) => panic!("{} allocation {k}: {e}", V::NAME),
                    Ok(_) => {}
                }
                dev.fail_allocation(None);
            }
            assert_eq!(failed, total, "{}: every allocation can fail", V::NAME);
            eprintln!("{}: {total} device allocations, each made to fail", V::NAME);
        }
    }
    visit_hash_variants(&mut T);
}

/// The rows of `x`'s transpose (zero-based columns).
fn transpose_rows<V: Variant>(x: &HostCsr<V>) -> Vec<Vec<(usize, Val<V>)>> {
    let mut rows = vec![Vec::new(); x.ncols];
    for i in 0..x.nrows {
        for p in x.range(i) {
            rows[x.cols[p].to_usize() - x.base as usize].push((i, x.vals[p]));
        }
    }
    rows
}

/// The CPU's patterns of `op(a)` and `op(b)`, handed to `f`.
fn with_cpu_rows<V: Variant, R>(
    a: &HostCsr<V>,
    op_a: Op,
    b: &HostCsr<V>,
    op_b: Op,
    f: impl FnOnce(&RowPattern<'_, V::Offset, V::Index>, &RowPattern<'_, V::Offset, V::Index>) -> R,
) -> R {
    let (va, vb) = (a.view(), b.view());
    let (pa, pb) = OperandPattern::pair(&va, op_a, &vb, op_b).unwrap();
    f(&pa.rows(&va), &pb.rows(&vb))
}

/// The CPU's prediction of `op(a) * op(b)` with `sampling`.
fn cpu_prediction<V: Variant>(
    a: &HostCsr<V>,
    op_a: Op,
    b: &HostCsr<V>,
    op_b: Op,
    sampling: Sampling,
) -> rusparse::NnzPrediction {
    with_cpu_rows(a, op_a, b, op_b, |ra, rb| {
        let work = RowWork::new(ra, rb, 1).unwrap();
        predict::predict_nnz(ra, rb, &work, sampling)
    })
}

/// The prediction on the device.
fn gpu_prediction<V: Variant>(
    dev: &Arc<EmulatedDevice>,
    a: &HostCsr<V>,
    op_a: Op,
    b: &HostCsr<V>,
    op_b: Op,
    sampling: Sampling,
) -> Result<rusparse::NnzPrediction, Error> {
    let gpu: Arc<dyn GpuDevice> = dev.clone();
    let before = dev.live_allocations().len();
    let r = {
        // Spare room past the offsets: the prediction reads the offsets' part.
        let (da, db) = (Uploaded::new(dev, a, 2), Uploaded::new(dev, b, 2));
        predict_nnz(
            &gpu,
            std::ptr::null_mut(),
            (op_a, &da.csr),
            (op_b, &db.csr),
            types::<V>(),
            sampling,
        )
    };
    assert_eq!(dev.live_allocations().len(), before, "memory left");
    assert_eq!(dev.live_handles(), 0, "streams or events left");
    r
}

/// `rs_row_shapes` on the device gives each row's entries (at most 255)
/// and longest merged row of B as the CPU counts them from the patterns,
/// for op N and T, both bases, and rows longer than a warp and than 255
/// entries (the warp-wide path and the clamp).
#[test]
fn row_shapes_on_the_device_match_the_patterns() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let gpu: Arc<dyn GpuDevice> = dev.clone();
            let mut rng = seed::<V>(9);
            for (op_a, base) in [(Op::N, 0), (Op::T, 1)] {
                // op(A) is 90 x 400 either way; rows 3 and 40 are long.
                let long = |r: &mut Rng, i: usize| match i {
                    3 => 1000,
                    40 => 70,
                    _ => r.below(9) as usize,
                };
                let a = if op_a == Op::N {
                    random::<V>(&mut rng, 90, 400, base, true, long)
                } else {
                    // A's transpose gets long rows from A's dense columns.
                    let at = random::<V>(&mut rng, 90, 400, base, false, long);
                    HostCsr::from_rows(90, &transpose_rows(&at), base)
                };
                let b = random::<V>(&mut rng, 400, 60, base, true, |r, j| {
                    if j == 17 {
                        60
                    } else {
                        r.below(12) as usize
                    }
                });
                let (da, db) = (Uploaded::new(&dev, &a, 0), Uploaded::new(&dev, &b, 0));
                let plan = GpuSpgemm::work_estimation(
                    &gpu,
                    std::ptr::null_mut(),
                    (op_a, &da.csr),
                    (Op::N, &db.csr),
                    types::<V>(),
                    false,
                )
                .unwrap();
                let words = plan
                    .row_shapes(std::ptr::null_mut(), &da.csr, &db.csr)
                    .unwrap();
                let expected: Vec<u64> = with_cpu_rows(&a, op_a, &b, Op::N, |ra, rb| {
                    let shapes = PatternShapes { a: ra, b: rb };
                    (0..ra.nrows)
                        .map(|i| {
                            PackedRowShapes::pack(ra.row_len(i) as u64, shapes.longest_merged(i))
                        })
                        .collect()
                });
                assert_eq!(words, expected, "{} op {op_a:?}", V::NAME);
                assert!(
                    words.iter().any(|&w| w & 255 == 255),
                    "{}: no clamped row",
                    V::NAME
                );
                assert!(
                    words.iter().any(|&w| w >> 8 == 60),
                    "{}: B's row 17 unread",
                    V::NAME
                );
            }
        }
    }
    visit_hash_variants(&mut T);
}

#[test]
fn prediction_on_the_device_matches_the_cpu_sampler() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            let dev = EmulatedDevice::for_variant::<V>();
            let mut rng = seed::<V>(8);
            // Small: every row counted, the exact nnz.
            let a = random::<V>(&mut rng, 37, 29, 1, true, mixed);
            let b = random::<V>(&mut rng, 37, 41, 1, false, mixed);
            let p = gpu_prediction(&dev, &a, Op::T, &b, Op::N, Sampling::Stratified).unwrap();
            let exact = reference(&a, &b, &Job::new(Op::T, Op::N)).vals.len() as u64;
            assert!(
                p.exact && p.nnz == exact,
                "{}: {p:?}, exact {exact}",
                V::NAME
            );

            // Above 2^14 products: every sampler picks the same rows on
            // the device as on the CPU and gets the same counts, so the
            // same estimate; the stratified and weighted ones are close to
            // the truth.
            let a = random::<V>(&mut rng, 1200, 300, 0, false, |r, i| {
                if i % 97 == 0 {
                    120
                } else {
                    4 + r.below(12) as usize
                }
            });
            let b = random::<V>(&mut rng, 300, 500, 0, true, |r, _| 4 + r.below(16) as usize);
            let exact = reference(&a, &b, &Job::new(Op::N, Op::N)).vals.len() as f64;
            for sampling in [
                Sampling::Stratified,
                Sampling::ProductWeighted,
                Sampling::UniformRows,
            ] {
                let p = gpu_prediction(&dev, &a, Op::N, &b, Op::N, sampling).unwrap();
                let cpu = cpu_prediction(&a, Op::N, &b, Op::N, sampling);
                assert!(!p.exact && p.nprod > 1 << 14, "{}: {p:?}", V::NAME);
                assert_eq!(p, cpu, "{} {sampling:?}: device and CPU differ", V::NAME);
                let error = (p.nnz as f64 - exact).abs() / exact;
                if sampling != Sampling::UniformRows {
                    assert!(
                        error < 0.05,
                        "{} {sampling:?}: {p:?}, exact {exact}",
                        V::NAME
                    );
                }
            }

            // Malformed input: the work estimation's message.
            let mut bad = a.clone();
            bad.cols[3] = V::Index::try_from_usize(300).unwrap();
            let e = gpu_prediction(&dev, &bad, Op::N, &b, Op::N, Sampling::Stratified).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidValue(m) if m.contains("colInd[3] = 300")),
                "{}: {e}",
                V::NAME
            );
        }
    }
    visit_hash_variants(&mut T);
}

/// Kernels whose compilation allows fewer threads a block than the device
/// (registers, as a real GPU's `MAX_THREADS_PER_BLOCK` of a function can
/// say): the planner sizes its bins, scans and global kernels within it
/// (the emulator refuses a larger launch), and the product is the same.
#[test]
fn the_planner_keeps_to_the_kernels_thread_limit() {
    struct T;
    impl HashVisitor for T {
        fn visit<V: HashVariant>(&mut self) {
            if V::WARP != 32 {
                return;
            }
            let mut rng = seed::<V>(12);
            let (a, b) = with_long_row::<V>(&mut rng, 9_216, 1);
            let dev = EmulatedDevice::for_variant::<V>();
            dev.limit_kernel_threads(128);
            let job = Job::new(Op::N, Op::N);
            let info = check(&dev, &a, &b, &job, "kernels limited to 128 threads");
            assert!(info.nnz.is_some());
        }
    }
    visit_hash_variants(&mut T);
}
