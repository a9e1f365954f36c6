//! The CUDA pipeline against `rusparse::reference::spgemm`.
//!
//! Compiled whenever the `cuda` feature is on; every test first looks for a
//! GPU (and NVRTC) and, without one, prints a `SKIPPED` line with the
//! reason and passes, or fails with `RUSPARSE_REQUIRE_GPU=1`
//! (`tests/support`).
//! On a GPU, small matrices are uploaded with cudarc's safe API and run
//! through `GpuSpgemm::work_estimation` / `symbolic` / `numeric`: every
//! value type, i32/i64 offsets and indices, base 0 and 1, empty rows, rows
//! of A with one entry, unsorted B rows with repeated columns, a row of
//! 3·10^4 distinct columns (symbolic spill and the global numeric kernel),
//! deterministic mode, beta, bad input, and op(A), op(B) = T / C (the
//! transposes built on the device, their values re-gathered by every
//! numeric phase).
#![cfg(feature = "cuda")]

mod support;
#[path = "support/gpu.rs"]
mod support_gpu;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use rusparse::backend::cuda::CudaDevice;
use rusparse::backend::gpu::{
    DeviceCsr, DeviceScalars, GpuDevice, GpuSpgemm, KernelTypes, RawStream, ValueKind,
};
use rusparse::{reference, Complex, CsrMatrix, Error, Index, IndexBase, IndexType, Op, Scalar};
use std::sync::Arc;
use support::{csr_from_rows, random_rows, Rng, TestValue, CANONICAL, MESSY};
use support_gpu::gpu;

/// The device as the pipeline takes it.
fn as_gpu(dev: &Arc<CudaDevice>) -> Arc<dyn GpuDevice> {
    dev.clone()
}

/// A small integer value (re in -3..=3, im in -2..=2, zeros included), so
/// sums are exact.
fn value<T: TestValue>(rng: &mut Rng) -> T {
    T::from_parts(rng.below(7) as f64 - 3.0, rng.below(5) as f64 - 2.0)
}

/// A random `nrows x ncols` matrix: each row empty with probability 1/5,
/// else up to `max_row` entries (sorted, distinct unless `messy`, when
/// they are in random order and may repeat).
fn random<T: TestValue, I: Index, J: Index>(
    rng: &mut Rng,
    nrows: usize,
    ncols: usize,
    max_row: usize,
    messy: bool,
    base: IndexBase,
) -> CsrMatrix<T, I, J> {
    let len = |rng: &mut Rng, _| {
        if rng.below(5) == 0 {
            0
        } else {
            1 + rng.below(max_row as u64) as usize
        }
    };
    let cols = if messy { MESSY } else { CANONICAL };
    let rows = random_rows(rng, nrows, ncols, cols, len, value::<T>);
    csr_from_rows(ncols, &rows, base)
}

fn types_of<T: Scalar, I: Index, J: Index>() -> KernelTypes {
    KernelTypes {
        value: ValueKind::of(T::DATA_TYPE),
        offset64: I::INDEX_TYPE == IndexType::I64,
        index64: J::INDEX_TYPE == IndexType::I64,
    }
}

fn bytes_of<T>(v: &[T]) -> &[u8] {
    // SAFETY: plain numeric data viewed as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn from_bytes<T: Copy + Default>(b: &[u8]) -> Vec<T> {
    let mut v = vec![T::default(); b.len() / std::mem::size_of::<T>()];
    // SAFETY: `v` has room for `b.len()` bytes; T is plain numeric data.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr().cast::<u8>(), b.len()) };
    v
}

/// Device memory kept alive for one test, and its stream.
struct Gpu {
    stream: Arc<CudaStream>,
    keep: Vec<CudaSlice<u8>>,
}

impl Gpu {
    fn new(dev: &Arc<CudaDevice>, own_stream: bool) -> Gpu {
        let ctx = dev.context();
        let stream = if own_stream {
            ctx.new_stream().unwrap()
        } else {
            ctx.default_stream()
        };
        Gpu {
            stream,
            keep: Vec::new(),
        }
    }

    /// Copies `data` to the device; 0 for an empty slice.
    fn upload<T>(&mut self, data: &[T]) -> u64 {
        if data.is_empty() {
            return 0;
        }
        let s = self.stream.clone_htod(bytes_of(data)).unwrap();
        let ptr = s.device_ptr(&self.stream).0;
        self.keep.push(s);
        ptr
    }

    /// `bytes` zeroed bytes; 0 when `bytes == 0`. Returns the index in `keep`.
    fn zeros(&mut self, bytes: usize) -> (u64, Option<usize>) {
        if bytes == 0 {
            return (0, None);
        }
        let s = self.stream.alloc_zeros::<u8>(bytes).unwrap();
        let ptr = s.device_ptr(&self.stream).0;
        self.keep.push(s);
        (ptr, Some(self.keep.len() - 1))
    }

    fn download<T: Copy + Default>(&self, slot: Option<usize>) -> Vec<T> {
        slot.map_or_else(Vec::new, |k| {
            from_bytes(&self.stream.clone_dtoh(&self.keep[k]).unwrap())
        })
    }

    fn csr<T: Scalar, I: Index, J: Index>(&mut self, x: &CsrMatrix<T, I, J>) -> DeviceCsr {
        DeviceCsr {
            rows: self.upload(x.row_offsets()),
            cols: self.upload(x.col_indices()),
            vals: self.upload(x.values()),
            nrows: x.nrows() as i64,
            ncols: x.ncols() as i64,
            nnz: x.nnz() as i64,
            base: x.base().offset() as i32,
        }
    }

    fn raw(&self) -> RawStream {
        self.stream.cu_stream() as RawStream
    }
}

/// Runs `C = alpha * A * B (+ beta * C0)` through the three phases.
/// `b_is_a` passes A's device arrays as B. `c0` gives C's initial values
/// (on the product's pattern) for beta.
#[allow(clippy::too_many_arguments)]
fn run<T: TestValue, I: Index, J: Index>(
    dev: &Arc<CudaDevice>,
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    b_is_a: bool,
    alpha: T,
    beta: Option<(T, &[T])>,
    deterministic: bool,
    own_stream: bool,
) -> Result<(CsrMatrix<T, I, J>, GpuSpgemm), Error> {
    let ops = (Op::N, Op::N);
    run_ops(
        dev,
        ops,
        a,
        b,
        b_is_a,
        alpha,
        beta,
        deterministic,
        own_stream,
    )
}

/// `(rows, columns)` of `op(x)`.
fn op_dims<T: Scalar, I: Index, J: Index>(x: &CsrMatrix<T, I, J>, op: Op) -> (usize, usize) {
    if op.transposes() {
        (x.ncols(), x.nrows())
    } else {
        (x.nrows(), x.ncols())
    }
}

/// [`run`] for `C = alpha * op(A) * op(B) (+ beta * C0)`.
#[allow(clippy::too_many_arguments)]
fn run_ops<T: TestValue, I: Index, J: Index>(
    dev: &Arc<CudaDevice>,
    (op_a, op_b): (Op, Op),
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    b_is_a: bool,
    alpha: T,
    beta: Option<(T, &[T])>,
    deterministic: bool,
    own_stream: bool,
) -> Result<(CsrMatrix<T, I, J>, GpuSpgemm), Error> {
    let mut g = Gpu::new(dev, own_stream);
    let da = g.csr(a);
    let db = if b_is_a { da } else { g.csr(b) };
    let types = types_of::<T, I, J>();
    let mut plan = GpuSpgemm::work_estimation(
        &as_gpu(dev),
        g.raw(),
        (op_a, &da),
        (op_b, &db),
        types,
        deterministic,
    )?;
    let nnz = plan.symbolic(g.raw(), &da, &db)?;
    assert_eq!(
        plan.symbolic(g.raw(), &da, &db)?,
        nnz,
        "symbolic is idempotent"
    );
    let (m, n) = (op_dims(a, op_a).0, op_dims(b, op_b).1);
    let nnz_u = nnz as usize;
    let (c_rows, rows_slot) = g.zeros((m + 1) * std::mem::size_of::<I>());
    let (c_cols, cols_slot) = g.zeros(nnz_u * std::mem::size_of::<J>());
    let (c_vals, vals_slot) = match beta {
        Some((_, c0)) => {
            assert_eq!(c0.len(), nnz_u);
            let p = g.upload(c0);
            (p, (!c0.is_empty()).then(|| g.keep.len() - 1))
        }
        None => g.zeros(nnz_u * std::mem::size_of::<T>()),
    };
    let dc = DeviceCsr {
        rows: c_rows,
        cols: c_cols,
        vals: c_vals,
        nrows: m as i64,
        ncols: n as i64,
        nnz,
        base: a.base().offset() as i32,
    };
    let alpha_p = g.upload(&[alpha]);
    let (beta_p, beta_zero) = match beta {
        Some((v, _)) => (g.upload(&[v]), false),
        None => (0, true),
    };
    plan.numeric(
        g.raw(),
        &da,
        &db,
        &dc,
        DeviceScalars {
            alpha: alpha_p,
            beta: beta_p,
            beta_is_zero: beta_zero,
        },
    )?;
    g.stream.synchronize().unwrap();
    let rows: Vec<I> = g.download(rows_slot);
    let cols: Vec<J> = g.download(cols_slot);
    let vals: Vec<T> = g.download(vals_slot);
    let c = CsrMatrix::try_from_parts(m, n, rows, cols, vals, a.base())
        .unwrap_or_else(|e| panic!("the GPU's C is not a valid CSR matrix: {e}"));
    Ok((c, plan))
}

fn expected<T: TestValue, I: Index, J: Index>(
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    alpha: T,
) -> CsrMatrix<T, I, J> {
    reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, alpha).unwrap()
}

fn nprod<T: Scalar, I: Index, J: Index>(a: &CsrMatrix<T, I, J>, b: &CsrMatrix<T, I, J>) -> i64 {
    let base = a.base().offset();
    a.col_indices()
        .iter()
        .map(|c| {
            let r = c.to_usize() - base;
            b.row_offsets()[r + 1].to_i64() - b.row_offsets()[r].to_i64()
        })
        .sum()
}

fn check_types<T: TestValue, I: Index, J: Index>(dev: &Arc<CudaDevice>, seed: u64) {
    let mut rng = Rng::new(seed);
    for base in [IndexBase::Zero, IndexBase::One] {
        for messy in [false, true] {
            let a = random::<T, I, J>(&mut rng, 57, 41, 9, false, base);
            let b = random::<T, I, J>(&mut rng, 41, 33, 12, messy, base);
            let alpha = T::from_parts(2.0, 1.0);
            let (c, plan) = run(dev, &a, &b, false, alpha, None, false, false).unwrap();
            assert_eq!(
                c,
                expected(&a, &b, alpha),
                "{:?} base {base:?} messy {messy}",
                types_of::<T, I, J>()
            );
            assert_eq!(plan.num_products(), nprod(&a, &b));
            if !messy {
                assert!(plan.info().b_canonical);
            }
        }
    }
}

#[test]
fn every_value_and_index_type_matches_the_reference() {
    let Some(dev) = gpu() else { return };
    check_types::<f32, i32, i32>(&dev, 1);
    check_types::<f64, i32, i32>(&dev, 2);
    check_types::<Complex<f32>, i32, i32>(&dev, 3);
    check_types::<Complex<f64>, i32, i32>(&dev, 4);
    check_types::<f64, i64, i64>(&dev, 5);
    check_types::<Complex<f32>, i64, i64>(&dev, 6);
    check_types::<f32, i64, i32>(&dev, 7);
    check_types::<Complex<f64>, i32, i64>(&dev, 8);
}

#[test]
fn a_squared_with_empty_and_single_entry_rows() {
    let Some(dev) = gpu() else { return };
    // Rows with 0, 1 and many entries; B is A (same device arrays).
    let n = 300;
    let len = |_: &mut Rng, r: usize| [0, 1, 3, 40][r % 4];
    let rows = random_rows(&mut Rng::new(11), n, n, CANONICAL, len, value::<f64>);
    for base in [IndexBase::Zero, IndexBase::One] {
        let a: CsrMatrix<f64, i32> = csr_from_rows(n, &rows, base);
        for own_stream in [false, true] {
            let (c, plan) = run(&dev, &a, &a, true, 1.0, None, false, own_stream).unwrap();
            assert_eq!(c, expected(&a, &a, 1.0));
            let info = plan.info();
            assert!(info.b_canonical);
            assert!(
                *info.numeric_rows.last().unwrap() > 0,
                "direct path used: {info:?}"
            );
            assert!(plan.device_bytes() > 0);
        }
    }
}

#[test]
fn empty_products() {
    let Some(dev) = gpu() else { return };
    for base in [IndexBase::Zero, IndexBase::One] {
        // 0 x 0, rows without entries, and entries whose B rows are empty.
        let zero = CsrMatrix::<f32, i32>::from_triplets(0, 0, &[], base).unwrap();
        let (c, plan) = run(&dev, &zero, &zero, false, 1.0, None, false, false).unwrap();
        assert_eq!((c.nrows(), c.nnz(), plan.num_products()), (0, 0, 0));
        let a =
            CsrMatrix::<f32, i32>::from_triplets(5, 4, &[(1, 2, 1.0), (3, 0, 2.0)], base).unwrap();
        let b = CsrMatrix::<f32, i32>::from_triplets(4, 6, &[(1, 5, 1.0)], base).unwrap();
        let (c, plan) = run(&dev, &a, &b, false, 1.0, None, false, false).unwrap();
        assert_eq!(c, expected(&a, &b, 1.0));
        assert_eq!((c.nnz(), plan.num_products()), (0, 0));
        assert!(c.row_offsets().iter().all(|&o| o as usize == base.offset()));
    }
}

/// A row of A whose product has 3·10^4 distinct columns: it spills out of
/// the largest shared symbolic table and runs in the global numeric kernel.
fn long_row_case(base: IndexBase) -> (CsrMatrix<f64, i32>, CsrMatrix<f64, i32>) {
    let (brows, per, ncols) = (300usize, 100usize, 30_000usize);
    // Column (r * per + k) * 7919 mod 30000 is a bijection (7919 is prime
    // and does not divide 30000): the B rows are disjoint, sorted here.
    let mut bt = Vec::new();
    for r in 0..brows {
        let mut cols: Vec<usize> = (0..per).map(|k| (r * per + k) * 7919 % ncols).collect();
        cols.sort_unstable();
        bt.extend(
            cols.into_iter()
                .enumerate()
                .map(|(k, c)| (r, c, ((r + k) % 5) as f64 - 2.0)),
        );
    }
    let b = CsrMatrix::from_triplets(brows, ncols, &bt, base).unwrap();
    let mut at = Vec::new();
    for c in 0..brows {
        at.push((0, c, 1.0 + (c % 3) as f64)); // all of B: 3·10^4 columns
    }
    for c in (0..brows).step_by(3) {
        at.push((1, c, -1.0)); // 10^4 columns
    }
    at.push((2, 7, 3.0)); // one entry: the direct path
    for r in 3..40 {
        at.push((r, (r * 13) % brows, 1.0));
        at.push((r, (r * 29) % brows, 2.0));
    }
    let a = CsrMatrix::from_triplets(40, brows, &at, base).unwrap();
    (a, b)
}

#[test]
fn rows_of_ten_thousand_columns_use_the_global_kernels() {
    let Some(dev) = gpu() else { return };
    for base in [IndexBase::Zero, IndexBase::One] {
        let (a, b) = long_row_case(base);
        for deterministic in [false, true] {
            let (c, plan) = run(&dev, &a, &b, false, 1.0, None, deterministic, false).unwrap();
            assert_eq!(c, expected(&a, &b, 1.0));
            let info = plan.info();
            let global = info.numeric_rows[info.numeric_rows.len() - 2];
            assert!(global >= 1, "the long rows run in global memory: {info:?}");
        }
    }
}

#[test]
fn deterministic_runs_are_bitwise_identical() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(21);
    for messy in [false, true] {
        let a = random::<f64, i32, i32>(&mut rng, 200, 150, 60, false, IndexBase::Zero);
        let mut b = random::<f64, i32, i32>(&mut rng, 150, 500, 80, messy, IndexBase::Zero);
        // Non-integer values, so the order of the sums shows in the bits.
        for v in b.values_mut() {
            *v = *v * 0.1 + 1.0 / 3.0;
        }
        let (c1, _) = run(&dev, &a, &b, false, 1.0, None, true, false).unwrap();
        let (c2, _) = run(&dev, &a, &b, false, 1.0, None, true, true).unwrap();
        assert_eq!(c1.col_indices(), c2.col_indices());
        let bits =
            |c: &CsrMatrix<f64, i32>| c.values().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&c1), bits(&c2), "messy {messy}");
        let r = expected(&a, &b, 1.0);
        assert_eq!(c1.col_indices(), r.col_indices());
        for (x, y) in c1.values().iter().zip(r.values()) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
}

#[test]
fn beta_adds_the_values_already_in_c() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(31);
    let a = random::<Complex<f64>, i32, i32>(&mut rng, 60, 50, 10, false, IndexBase::One);
    let b = random::<Complex<f64>, i32, i32>(&mut rng, 50, 70, 10, false, IndexBase::One);
    let alpha = Complex::new(1.0, -1.0);
    let r = expected(&a, &b, alpha);
    let c0: Vec<Complex<f64>> = (0..r.nnz()).map(|k| Complex::new(k as f64, 1.0)).collect();
    let beta = Complex::new(2.0, 0.0);
    let (c, _) = run(&dev, &a, &b, false, alpha, Some((beta, &c0)), false, false).unwrap();
    assert_eq!(c.col_indices(), r.col_indices());
    for ((x, y), z) in c.values().iter().zip(r.values()).zip(&c0) {
        assert_eq!(*x, *y + beta * *z);
    }
}

/// Uploads raw arrays (no host-side validation) and runs the work
/// estimation.
fn estimate_raw(
    dev: &Arc<CudaDevice>,
    rows: &[i32],
    cols: &[i32],
    ncols: i64,
    base: i32,
) -> Result<GpuSpgemm, Error> {
    let mut g = Gpu::new(dev, false);
    let vals = vec![1.0f64; cols.len()];
    let x = DeviceCsr {
        rows: g.upload(rows),
        cols: g.upload(cols),
        vals: g.upload(&vals),
        nrows: rows.len() as i64 - 1,
        ncols,
        nnz: cols.len() as i64,
        base,
    };
    let types = types_of::<f64, i32, i32>();
    GpuSpgemm::work_estimation(
        &as_gpu(dev),
        g.raw(),
        (Op::N, &x),
        (Op::N, &x),
        types,
        false,
    )
}

#[test]
fn bad_input_is_invalid_value_naming_the_row() {
    let Some(dev) = gpu() else { return };
    // Row 2 has column 8 in an 8 x 8 matrix.
    let rows = [0, 2, 3, 5, 6, 6, 7, 8, 9];
    let cols = [0, 1, 2, 3, 8, 4, 5, 6, 7];
    let e = estimate_raw(&dev, &rows, &cols, 8, 0).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue(m) if m.contains("A's row 2 has a column index outside 0..8") && m.contains("colInd[4] = 8")),
        "{e:?}"
    );
    // One-based: column 0 is out of range.
    let cols1: Vec<i32> = cols
        .iter()
        .map(|&c| if c == 8 { 0 } else { c + 1 })
        .collect();
    let rows1: Vec<i32> = rows.iter().map(|&r| r + 1).collect();
    let e = estimate_raw(&dev, &rows1, &cols1, 8, 1).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue(m) if m.contains("row 2") && m.contains("outside 1..9")),
        "{e:?}"
    );
    // Decreasing offsets at row 3.
    let rows = [0, 2, 3, 5, 4, 6, 7, 8, 9];
    let e = estimate_raw(&dev, &rows, &[0, 1, 2, 3, 4, 4, 5, 6, 7], 8, 0).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue(m) if m.contains("row offsets") && m.contains("row 3")),
        "{e:?}"
    );
    // Last offset beyond nnz.
    let e = estimate_raw(&dev, &[0, 1, 3], &[0, 1], 2, 0).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue(m) if m.contains("row offsets")),
        "{e:?}"
    );
}

#[test]
fn phases_out_of_order_and_bad_sizes_are_refused() {
    let Some(dev) = gpu() else { return };
    let a =
        CsrMatrix::<f32, i32>::from_triplets(3, 3, &[(0, 1, 1.0), (2, 2, 1.0)], IndexBase::Zero)
            .unwrap();
    let mut g = Gpu::new(&dev, false);
    let da = g.csr(&a);
    let types = types_of::<f32, i32, i32>();
    let mut plan = GpuSpgemm::work_estimation(
        &as_gpu(&dev),
        g.raw(),
        (Op::N, &da),
        (Op::N, &da),
        types,
        false,
    )
    .unwrap();
    let alpha = g.upload(&[1.0f32]);
    let e = plan
        .numeric(g.raw(), &da, &da, &da, DeviceScalars::alpha_only(alpha))
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue(m) if m.contains("before the symbolic")),
        "{e:?}"
    );
    let mut tall = da;
    tall.nrows = 4;
    assert!(matches!(
        GpuSpgemm::work_estimation(
            &as_gpu(&dev),
            g.raw(),
            (Op::N, &da),
            (Op::N, &tall),
            types,
            false
        ),
        Err(Error::InvalidValue(_))
    ));
    let nnz = plan.symbolic(g.raw(), &da, &da).unwrap();
    let mut c = da;
    c.nnz = nnz + 1;
    assert!(matches!(
        plan.numeric(g.raw(), &da, &da, &c, DeviceScalars::alpha_only(alpha)),
        Err(Error::InvalidValue(_))
    ));
}

fn check_ops<T: TestValue, I: Index, J: Index>(dev: &Arc<CudaDevice>, seed: u64) {
    let mut rng = Rng::new(seed);
    let ops = [Op::N, Op::T, Op::C];
    for base in [IndexBase::Zero, IndexBase::One] {
        for op_a in ops {
            for op_b in ops {
                // op(A) is 37 x 29 and op(B) is 29 x 23.
                let (ar, ac) = if op_a.transposes() {
                    (29, 37)
                } else {
                    (37, 29)
                };
                let (br, bc) = if op_b.transposes() {
                    (23, 29)
                } else {
                    (29, 23)
                };
                let a = random::<T, I, J>(&mut rng, ar, ac, 9, false, base);
                let b = random::<T, I, J>(&mut rng, br, bc, 12, false, base);
                let alpha = T::from_parts(2.0, 1.0);
                let det = rng.below(2) == 0;
                let (c, plan) =
                    run_ops(dev, (op_a, op_b), &a, &b, false, alpha, None, det, false).unwrap();
                let want = reference::spgemm(&a.view(), op_a, &b.view(), op_b, alpha).unwrap();
                assert_eq!(
                    c,
                    want,
                    "{:?} base {base:?} op {op_a:?} {op_b:?}",
                    types_of::<T, I, J>()
                );
                // A transpose is canonical whenever its input repeats no
                // column in a row.
                if op_b.transposes() {
                    assert!(plan.info().b_canonical);
                }
            }
        }
    }
}

#[test]
fn transposed_operands_match_the_reference() {
    let Some(dev) = gpu() else { return };
    check_ops::<f64, i32, i32>(&dev, 21);
    check_ops::<Complex<f64>, i32, i32>(&dev, 22);
    check_ops::<Complex<f32>, i64, i64>(&dev, 23);
    check_ops::<f32, i64, i32>(&dev, 24);
}

/// `Aᴴ · A` with A's column 0 holding 5000 entries (a row of 5000 in the
/// transpose: the global-memory row sort), and A with itself as B.
#[test]
fn transpose_of_a_long_column() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(31);
    let mut triplets = Vec::new();
    for r in 0..5000usize {
        triplets.push((r, 0, Complex::new((1 + r % 7) as f64, -((r % 3) as f64))));
        let c = 1 + rng.below(40) as usize;
        triplets.push((r, c, Complex::new(2.0, 1.0)));
    }
    let a =
        CsrMatrix::<Complex<f64>, i32>::from_triplets(5000, 41, &triplets, IndexBase::One).unwrap();
    let alpha = Complex::new(1.0, 0.0);
    for (op_a, op_b) in [(Op::C, Op::N), (Op::T, Op::N), (Op::N, Op::C)] {
        let (c, _) = run_ops(&dev, (op_a, op_b), &a, &a, true, alpha, None, true, false).unwrap();
        let want = reference::spgemm(&a.view(), op_a, &a.view(), op_b, alpha).unwrap();
        assert_eq!(c, want, "op {op_a:?} {op_b:?}");
    }
}

/// The reuse flow: new values of a transposed A on the same pattern are
/// picked up by the next numeric phase.
#[test]
fn numeric_again_regathers_the_transposed_values() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(41);
    // op(A) = Aᴴ is 40 x 30, op(B) = Bᵀ is 30 x 20.
    let a = random::<Complex<f64>, i32, i32>(&mut rng, 30, 40, 8, false, IndexBase::Zero);
    let b = random::<Complex<f64>, i32, i32>(&mut rng, 20, 30, 8, false, IndexBase::Zero);
    let mut g = Gpu::new(&dev, false);
    let (da, db) = (g.csr(&a), g.csr(&b));
    let types = types_of::<Complex<f64>, i32, i32>();
    let mut plan = GpuSpgemm::work_estimation(
        &as_gpu(&dev),
        g.raw(),
        (Op::C, &da),
        (Op::T, &db),
        types,
        false,
    )
    .unwrap();
    let nnz = plan.symbolic(g.raw(), &da, &db).unwrap();
    let alpha = Complex::new(1.0, 0.0);
    let want = reference::spgemm(&a.view(), Op::C, &b.view(), Op::T, alpha).unwrap();
    assert_eq!(nnz as usize, want.nnz());
    // Second values of A: doubled, on the same pattern.
    let a2_vals: Vec<Complex<f64>> = a.values().iter().map(|v| *v + *v).collect();
    let a2 = CsrMatrix::try_from_parts(
        a.nrows(),
        a.ncols(),
        a.row_offsets().to_vec(),
        a.col_indices().to_vec(),
        a2_vals.clone(),
        a.base(),
    )
    .unwrap();
    let mut da2 = da;
    da2.vals = g.upload(&a2_vals);
    let want2 = reference::spgemm(&a2.view(), Op::C, &b.view(), Op::T, alpha).unwrap();
    let (c_rows, rows_slot) = g.zeros((40 + 1) * 4);
    let (c_cols, cols_slot) = g.zeros(nnz as usize * 4);
    let (c_vals, vals_slot) = g.zeros(nnz as usize * 16);
    let dc = DeviceCsr {
        rows: c_rows,
        cols: c_cols,
        vals: c_vals,
        nrows: 40,
        ncols: 20,
        nnz,
        base: 0,
    };
    let alpha_p = g.upload(&[alpha]);
    for (x, want) in [(&da, &want), (&da2, &want2), (&da, &want)] {
        plan.numeric(g.raw(), x, &db, &dc, DeviceScalars::alpha_only(alpha_p))
            .unwrap();
        g.stream.synchronize().unwrap();
        let c = CsrMatrix::try_from_parts(
            40,
            20,
            g.download::<i32>(rows_slot),
            g.download::<i32>(cols_slot),
            g.download::<Complex<f64>>(vals_slot),
            IndexBase::Zero,
        )
        .unwrap();
        assert_eq!(&c, want);
    }
}

/// C's row offsets of the other width than A's (i32 A with i64 C, i64 A
/// with i32 C): `rs_write_offsets_wide` / `_narrow`; columns and values are
/// those of the reference.
fn check_c_offset_width<I: Index, IC: Index>(dev: &Arc<CudaDevice>, seed: u64) {
    let mut rng = Rng::new(seed);
    let a = random::<f64, I, i32>(&mut rng, 45, 38, 7, true, IndexBase::One);
    let b = random::<f64, I, i32>(&mut rng, 38, 27, 9, false, IndexBase::One);
    let want = expected(&a, &b, 1.5);
    let mut g = Gpu::new(dev, true);
    let (da, db) = (g.csr(&a), g.csr(&b));
    let mut plan = GpuSpgemm::work_estimation(
        &as_gpu(dev),
        g.raw(),
        (Op::N, &da),
        (Op::N, &db),
        types_of::<f64, I, i32>(),
        false,
    )
    .unwrap();
    plan.set_c_offsets64(IC::INDEX_TYPE == IndexType::I64);
    let nnz = plan.symbolic(g.raw(), &da, &db).unwrap();
    assert_eq!(nnz as usize, want.nnz());
    let (c_rows, rows_slot) = g.zeros(46 * std::mem::size_of::<IC>());
    let (c_cols, cols_slot) = g.zeros(want.nnz() * 4);
    let (c_vals, vals_slot) = g.zeros(want.nnz() * 8);
    let dc = DeviceCsr {
        rows: c_rows,
        cols: c_cols,
        vals: c_vals,
        nrows: 45,
        ncols: 27,
        nnz,
        base: 1,
    };
    let alpha = g.upload(&[1.5f64]);
    plan.numeric(g.raw(), &da, &db, &dc, DeviceScalars::alpha_only(alpha))
        .unwrap();
    g.stream.synchronize().unwrap();
    let rows: Vec<i64> = g
        .download::<IC>(rows_slot)
        .iter()
        .map(|r| r.to_i64())
        .collect();
    let want_rows: Vec<i64> = want.row_offsets().iter().map(|r| r.to_i64()).collect();
    assert_eq!(rows, want_rows, "C's row offsets");
    assert_eq!(g.download::<i32>(cols_slot), want.col_indices());
    assert_eq!(g.download::<f64>(vals_slot), want.values());
}

#[test]
fn c_offsets_of_another_width_than_a() {
    let Some(dev) = gpu() else { return };
    check_c_offset_width::<i32, i64>(&dev, 51);
    check_c_offset_width::<i64, i32>(&dev, 52);
}

/// C's columns and values by a plan on `ctx` (Rust API, host arrays staged
/// on the device), and the row blocks its numeric phase used.
fn plan_product(
    ctx: &rusparse::Context,
    a: &CsrMatrix<f64, i32>,
    b: &CsrMatrix<f64, i32>,
) -> Result<(CsrMatrix<f64, i32>, usize), Error> {
    let (a, b) = (a.view(), b.view());
    let mut plan = rusparse::SpgemmPlan::new(
        ctx,
        &a,
        Op::N,
        &b,
        Op::N,
        rusparse::Algorithm::Deterministic,
    )?;
    let nnz = plan.symbolic(ctx, &a, &b)?;
    let (mut rows, mut cols, mut vals) =
        (vec![0i32; a.nrows() + 1], vec![0i32; nnz], vec![0.0; nnz]);
    let out = rusparse::CsrOutput::full(&mut rows, &mut cols, &mut vals, IndexBase::Zero);
    plan.numeric(ctx, &a, &b, 1.0, 0.0, out)?;
    let blocks = plan.gpu_info().expect("a GPU plan").row_blocks;
    let c = CsrMatrix::try_from_parts(a.nrows(), b.ncols(), rows, cols, vals, IndexBase::Zero)?;
    Ok((c, blocks))
}

#[test]
fn a_budget_below_c_computes_it_in_row_blocks_with_the_same_bits() {
    let Some(dev) = gpu() else { return };
    let ctx = rusparse::Context::on_device(as_gpu(&dev)).unwrap();
    let mut rng = Rng::new(51);
    let mut a = random::<f64, i32, i32>(&mut rng, 20_000, 400, 8, false, IndexBase::Zero);
    let b = random::<f64, i32, i32>(&mut rng, 400, 100_000, 60, false, IndexBase::Zero);
    for v in a.values_mut() {
        *v = *v * 0.1 + 1.0 / 3.0;
    }
    let (whole, blocks) = plan_product(&ctx, &a, &b).unwrap();
    assert_eq!(blocks, 0, "C computed whole without a budget");
    let r = expected(&a, &b, 1.0);
    assert_eq!(whole.col_indices(), r.col_indices());
    // The staged inputs and a quarter of C: row blocks, or a refusal
    // naming the smallest budget, which then works in blocks.
    let bytes = |x: &CsrMatrix<f64, i32>| (x.nrows() + 1) * 4 + x.nnz() * 12;
    let mut budget = bytes(&a) + bytes(&b) + 64 * a.nrows() + bytes(&whole) / 4;
    for _ in 0..4 {
        ctx.set_memory_budget(Some(budget));
        match plan_product(&ctx, &a, &b) {
            Ok((c, blocks)) => {
                assert!(blocks > 1, "{blocks} blocks under a budget of {budget}");
                assert_eq!(c.col_indices(), whole.col_indices());
                let bits = |c: &CsrMatrix<f64, i32>| {
                    c.values().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                assert!(bits(&c) == bits(&whole), "the blocks' bits differ");
                return;
            }
            Err(e) => {
                let Error::InsufficientResources(m) = &e else {
                    panic!("{e}")
                };
                let smallest = support::number_after(m, "smallest budget that would work is ")
                    .unwrap_or_else(|| panic!("{m}")) as usize;
                assert!(smallest > budget, "{smallest} <= {budget}");
                budget = smallest;
            }
        }
    }
    panic!("still refused at {budget}");
}
