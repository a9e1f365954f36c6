//! `rusparse-bench soak`: many small random products checked against
//! `rusparse::reference::spgemm`, for the reliability figures (issue 10).
//!
//! Case `k` of seed `S` is a pure function of `(S, k)`: its shapes (0 to
//! `--max-dim`, including 0×k, k×0 and 1×1), its patterns (random rows,
//! runs of empty rows, one dense row, power-law row lengths, duplicate
//! entries, unsorted columns), value type × index types × base × op(A) ×
//! op(B) × requested algorithm × α and β, and the flow:
//!
//! - `once`: `Context::spgemm` (C = α·op(A)·op(B) into a new matrix);
//! - `plan`: `SpgemmPlan` new → symbolic → numeric into caller arrays that
//!   hold old values (C = α·op(A)·op(B) + β·C_old), then A's and B's values
//!   changed and numeric run again on the same plan (the reuse path of AMG
//!   setups);
//! - `C ABI`: the three phases of cuSPARSE's sample on a CPU handle;
//! - with `--gpu`, a share of the cases (`--gpu-share`) runs on a GPU
//!   instead ([`devices`]): the arrays in device memory and an AUTO handle,
//!   either the three phases (ALG3 with `estimateMemory` and a drawn chunk
//!   fraction) or the reuse flow (`SpGEMMreuse_*`, then compute again on
//!   new values with β), α and β on the host or in device memory; a
//!   quarter of them with host arrays on a handle of the GPU, which stages
//!   them ([`c_abi`]). CPU algorithms are replaced by the GPU ones for these
//!   cases, and on emulated devices, which have a few type variants, the
//!   index types by ones the device has.
//!
//! A share of the CPU cases of the `once` and `plan` flows
//! (`--budget-share`) runs under a memory budget
//! (`Context::set_memory_budget`) drawn as a multiple of 0.5 to 4 of the
//! peak bound of the same product planned without one
//! (`SpgemmPlan::peak_memory_bound`). Such a case either gives the same C
//! (the reference's) or, for a budget below that bound only, fails with
//! `ALLOC_FAILED` naming the smallest budget that would work, which must
//! exceed the budget and then work. The same share of the GPU cases' three
//! phases runs with the handle's budget (`rusparseSetMemoryBudget`) at 0.5
//! to 4 times the bytes of A, B and C: the same C (staged C's below the
//! device's copy of C come in row blocks), or INSUFFICIENT_RESOURCES
//! naming the smallest budget, which must exceed it and then work.
//!
//! Values are small integers (complex: integer parts), so every sum is
//! exact in every type and results are compared exactly, whatever order an
//! algorithm adds in (0.0 and -0.0 count as equal: the sign of a zero sum
//! depends on the order of its terms). C must also be a well-formed CSR (sorted, no
//! duplicates, A's base). An error is a failure: on these inputs every call
//! must succeed. A failure prints the command that reruns it alone.

mod c_abi;
mod devices;

use crate::sparse::BenchScalar;
use c_abi::{Call, Memory};
use clap::Args;
use devices::{GpuChoice, Gpus};
use rusparse::backend::gpu::{KernelTypes, ValueKind};
use rusparse::{
    reference, validate_structure, Algorithm, BackendKind, Complex, Context, CsrMatrix, CsrOutput,
    Index, IndexBase, Op, SpgemmOptions, SpgemmPlan,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// `rusparse::plan::select::SMALL_PRODUCTS`: above it the automatic choice
/// reads the trained tree.
const SMALL_PRODUCTS: u64 = rusparse::plan::select::SMALL_PRODUCTS;

/// Random products checked against the reference implementation.
#[derive(Args, Debug)]
pub struct SoakCli {
    /// Number of cases.
    #[arg(long, default_value_t = 10_000)]
    cases: u64,
    /// Seed: case k of seed S is always the same product.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// First case number (to rerun one case: --first K --cases 1).
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Largest dimension of op(A) and op(B).
    #[arg(long, default_value_t = 40)]
    max_dim: usize,
    /// Worker threads, each with its own one-thread CPU context.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Print each failure's case description in full.
    #[arg(long)]
    verbose: bool,
    /// GPUs for the device flows: off, the machine's CUDA device, or
    /// emulated devices (built with `--features emulated-gpu`).
    #[arg(long, value_enum, default_value_t = GpuChoice::Off)]
    gpu: GpuChoice,
    /// Percent of the cases run on the GPU when `--gpu` is not off.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u64).range(0..=100))]
    gpu_share: u64,
    /// Percent of the CPU cases of the once and plan flows run under a
    /// memory budget (0.5 to 4 times the unbudgeted plan's peak bound), and
    /// of the GPU cases' three phases (0.5 to 4 times A, B and C).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=100))]
    budget_share: u64,
}

/// splitmix64: small, fast, and the same sequence on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, case: u64) -> Rng {
        let mut r = Rng(seed ^ case.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        r.next();
        r
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    /// A small integer in `-3..=3`.
    fn small(&mut self) -> i64 {
        self.below(7) as i64 - 3
    }
}

/// How a matrix's rows are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RowKind {
    /// 0 to 6 entries per row.
    Random,
    /// Half the rows empty, in runs.
    EmptyRuns,
    /// Random rows and one full row.
    DenseRow,
    /// Row lengths `ncols * u^3`: a few long rows, many short ones.
    PowerLaw,
}

/// How a case calls rusparse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    /// `Context::spgemm`.
    Once,
    /// `SpgemmPlan` symbolic, numeric with β, numeric again on new values.
    Plan,
    /// The C ABI's three phases with caller buffers, as cuSPARSE's sample.
    CAbi,
    /// The C ABI on arrays in GPU memory ([`GpuCall`]).
    Gpu,
}

/// How a GPU case calls the C ABI.
#[derive(Clone, Copy, Debug)]
struct GpuCall {
    /// The reuse flow (else the three phases).
    reuse: bool,
    /// α and β in device memory.
    device_scalars: bool,
    /// ALG3's chunk fraction (three phases with ALG3 only).
    chunk_fraction: Option<f32>,
    /// Host arrays on a handle of the GPU (staged by the library), not
    /// device arrays.
    staged: bool,
}

/// One operand's pattern recipe.
#[derive(Clone, Copy, Debug)]
struct Recipe {
    kind: RowKind,
    duplicates: bool,
    unsorted: bool,
}

/// Everything that defines one case.
#[derive(Clone, Debug)]
struct Case {
    value: &'static str,
    offset64: bool,
    index64: bool,
    base: IndexBase,
    op_a: Op,
    op_b: Op,
    algorithm: Algorithm,
    flow: Flow,
    alpha: (i64, i64),
    beta: (i64, i64),
    dims: (usize, usize, usize),
    a: Recipe,
    b: Recipe,
    /// `--max-dim`: dimensions above it make a large case.
    max_dim: usize,
    /// Set for [`Flow::Gpu`].
    gpu: Option<GpuCall>,
    /// The memory budget as a multiple of the unbudgeted plan's peak bound
    /// (CPU cases of [`Flow::Once`] and [`Flow::Plan`] only).
    budget: Option<f64>,
}

fn dim(rng: &mut Rng, max: usize) -> usize {
    match rng.below(20) {
        0 => 0,
        1 => 1,
        _ => 1 + rng.below(max.max(1)),
    }
}

fn recipe(rng: &mut Rng) -> Recipe {
    Recipe {
        kind: rng.pick(&[
            RowKind::Random,
            RowKind::Random,
            RowKind::EmptyRuns,
            RowKind::DenseRow,
            RowKind::PowerLaw,
        ]),
        duplicates: rng.chance(20),
        unsorted: rng.chance(20),
    }
}

fn scalar_pair(rng: &mut Rng, zero_percent: u64) -> (i64, i64) {
    if rng.chance(zero_percent) {
        (0, 0)
    } else {
        (rng.small(), rng.small())
    }
}

impl Case {
    /// Case `k` of `seed`; `gpu_share` percent of the cases become GPU
    /// cases (drawn last, so a run without GPUs draws the same cases as
    /// before GPU flows existed).
    fn draw(seed: u64, k: u64, max_dim: usize, gpu_share: u64, budget_share: u64) -> Case {
        let mut rng = Rng::new(seed, k);
        let mut case = Case::draw_with(&mut rng, max_dim);
        // Large cases mostly get long rows, so that many of them pass 2^16
        // products.
        if case.dims.0.max(case.dims.1).max(case.dims.2) > max_dim && rng.chance(70) {
            case.a.kind = RowKind::PowerLaw;
            case.b.kind = rng.pick(&[RowKind::PowerLaw, RowKind::DenseRow]);
        }
        if gpu_share > 0 && rng.chance(gpu_share) {
            case.flow = Flow::Gpu;
            if case.algorithm.is_concrete() {
                let gpu_algorithms: Vec<Algorithm> = Algorithm::all()
                    .into_iter()
                    .filter(|a| !a.is_concrete())
                    .collect();
                case.algorithm = rng.pick(&gpu_algorithms);
            }
            let reuse = rng.chance(50);
            let device_scalars = rng.chance(30);
            let chunk_fraction = (!reuse && case.algorithm == Algorithm::Alg3)
                .then(|| rng.pick(&[0.05f32, 0.3, 1.0]));
            case.gpu = Some(GpuCall {
                reuse,
                device_scalars,
                chunk_fraction,
                staged: rng.chance(25),
            });
        }
        // From a stream of its own: the cases stay those drawn before
        // budgets existed.
        let mut brng = Rng::new(seed ^ 0xb0d6_e700, k);
        let budgeted = match case.flow {
            Flow::Once | Flow::Plan => true,
            // The three phases of a GPU case (not its reuse flow).
            Flow::Gpu => case.gpu.is_some_and(|g| !g.reuse),
            _ => false,
        };
        if budgeted && brng.chance(budget_share) {
            // 0.5 to 4 in steps of 1/64.
            case.budget = Some(0.5 + brng.below(225) as f64 / 64.0);
        }
        case
    }

    /// The kernel types of the case's value and index types.
    fn kernel_types(&self) -> KernelTypes {
        KernelTypes {
            value: match self.value {
                "f32" => ValueKind::F32,
                "f64" => ValueKind::F64,
                "c32" => ValueKind::C32,
                _ => ValueKind::C64,
            },
            offset64: self.offset64,
            index64: self.index64,
        }
    }

    /// For a GPU case: keeps its index types when some device has kernels
    /// for them, else takes the first pair (i32/i32, i32/i64, i64/i32,
    /// i64/i64) some device has for its value type.
    ///
    /// # Errors
    /// No device has kernels for the value type.
    fn fit_to(&mut self, gpus: &Gpus) -> Result<(), String> {
        if gpus.device_for(self.kernel_types()).is_some() {
            return Ok(());
        }
        for (offset64, index64) in [(false, false), (false, true), (true, false), (true, true)] {
            (self.offset64, self.index64) = (offset64, index64);
            if gpus.device_for(self.kernel_types()).is_some() {
                return Ok(());
            }
        }
        Err(format!(
            "no device of {:?} has kernels for {} values",
            gpus.names(),
            self.value
        ))
    }

    fn draw_with(rng: &mut Rng, max_dim: usize) -> Case {
        let ops = [Op::N, Op::T, Op::C];
        Case {
            value: rng.pick(&["f32", "f64", "c32", "c64"]),
            offset64: rng.chance(50),
            index64: rng.chance(50),
            base: if rng.chance(50) {
                IndexBase::Zero
            } else {
                IndexBase::One
            },
            op_a: rng.pick(&ops),
            op_b: rng.pick(&ops),
            algorithm: rng.pick(&Algorithm::all()),
            flow: rng.pick(&[Flow::Once, Flow::Plan, Flow::CAbi]),
            alpha: scalar_pair(rng, 5),
            beta: scalar_pair(rng, 30),
            dims: match rng.below(40) {
                // Large: above max_dim up to 4 * max_dim, so that long rows make more
                // than 2^16 products (the automatic choice then runs the
                // trained tree, and the prediction samples rows).
                0 => (
                    max_dim + 1 + rng.below(3 * max_dim),
                    max_dim + 1 + rng.below(3 * max_dim),
                    max_dim + 1 + rng.below(3 * max_dim),
                ),
                // Tiny: every dimension 0, 1 or 2 (1x1x1 among them).
                1..=4 => (rng.below(3), rng.below(3), rng.below(3)),
                5..=8 => {
                    let d = dim(rng, max_dim);
                    (d, d, d)
                }
                _ => (dim(rng, max_dim), dim(rng, max_dim), dim(rng, max_dim)),
            },
            a: recipe(rng),
            b: recipe(rng),
            max_dim,
            gpu: None,
            budget: None,
        }
    }

    /// The categories this case counts under.
    fn categories(&self) -> Vec<String> {
        let (m, k, n) = self.dims;
        let shape = if m.max(k).max(n) > self.max_dim {
            "large"
        } else if m == 0 || k == 0 || n == 0 {
            "a zero dimension"
        } else if (m, k, n) == (1, 1, 1) {
            "1x1x1"
        } else if m == n && n == k {
            "square"
        } else {
            "rectangular"
        };
        let idx = |w: bool| if w { "i64" } else { "i32" };
        let mut out = vec![
            format!("value {}", self.value),
            format!(
                "offsets {} / columns {}",
                idx(self.offset64),
                idx(self.index64)
            ),
            format!("base {}", self.base.offset()),
            format!("op(A) {:?}, op(B) {:?}", self.op_a, self.op_b),
            format!("algorithm {:?}", self.algorithm),
            format!(
                "flow {}",
                match self.flow {
                    Flow::Once => "once",
                    Flow::Plan => "plan + reuse (beta)",
                    Flow::CAbi => "C ABI (workEstimation, compute, copy)",
                    Flow::Gpu => "GPU: C ABI on device arrays",
                }
            ),
            format!("shape {shape}"),
        ];
        if let Some(g) = self.gpu {
            out.push(
                if g.reuse {
                    "GPU: reuse flow (SpGEMMreuse_*, new values, beta)"
                } else {
                    "GPU: three phases"
                }
                .into(),
            );
            if g.staged {
                out.push("GPU: host arrays on a GPU handle (staged)".into());
            } else if g.device_scalars {
                out.push("GPU: alpha and beta in device memory".into());
            }
            if let Some(f) = g.chunk_fraction {
                out.push(format!("GPU: ALG3, chunk fraction {f}"));
            }
        }
        match (self.budget, self.flow) {
            (Some(_), Flow::Gpu) => out.push("GPU: memory budget 0.5-4x A, B and C".into()),
            (Some(x), _) if x < 1.0 => out.push("memory budget 0.5-1x the bound".into()),
            (Some(_), _) => out.push("memory budget 1-4x the bound".into()),
            (None, _) => {}
        }
        for r in [self.a, self.b] {
            out.push(format!("rows {:?}", r.kind));
            if r.duplicates {
                out.push("duplicate entries".into());
            }
            if r.unsorted {
                out.push("unsorted columns".into());
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// The stored pattern of an `op`-applied operand of `rows x cols`: rows
/// of zero-based columns.
fn pattern(rng: &mut Rng, rows: usize, cols: usize, r: Recipe) -> Vec<Vec<usize>> {
    let dense_row = (r.kind == RowKind::DenseRow && rows > 0).then(|| rng.below(rows));
    let mut empty_run = 0usize;
    (0..rows)
        .map(|i| {
            if cols == 0 {
                return Vec::new();
            }
            let len = match r.kind {
                _ if dense_row == Some(i) => cols,
                RowKind::EmptyRuns => {
                    if empty_run > 0 {
                        empty_run -= 1;
                        0
                    } else if rng.chance(50) {
                        empty_run = rng.below(4);
                        0
                    } else {
                        rng.below(7)
                    }
                }
                RowKind::PowerLaw => {
                    let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                    (cols as f64 * u * u * u) as usize
                }
                _ => rng.below(7),
            }
            .min(cols);
            // Distinct columns by a partial Fisher-Yates shuffle.
            let mut all: Vec<usize> = (0..cols).collect();
            for j in 0..len {
                let pick = j + rng.below(cols - j);
                all.swap(j, pick);
            }
            let mut row: Vec<usize> = all[..len].to_vec();
            if r.duplicates && !row.is_empty() {
                for _ in 0..=rng.below(3) {
                    let again = row[rng.below(row.len())];
                    row.push(again);
                }
            }
            if r.unsorted {
                for j in (1..row.len()).rev() {
                    let pick = rng.below(j + 1);
                    row.swap(j, pick);
                }
            } else {
                row.sort_unstable();
            }
            row
        })
        .collect()
}

/// A value from a pair of small integers (real types keep the real part).
fn value<T: BenchScalar>(pair: (i64, i64)) -> T {
    T::from_complex(Complex::new(pair.0 as f64, pair.1 as f64))
}

fn matrix<T: BenchScalar, I: Index, J: Index>(
    rng: &mut Rng,
    rows: &[Vec<usize>],
    ncols: usize,
    base: IndexBase,
) -> Result<CsrMatrix<T, I, J>, String> {
    let triplets: Vec<(usize, usize, T)> = rows
        .iter()
        .enumerate()
        .flat_map(|(i, row)| row.iter().map(move |&j| (i, j)))
        .map(|(i, j)| (i, j, value::<T>((rng.small(), rng.small()))))
        .collect();
    CsrMatrix::from_triplets(rows.len(), ncols, &triplets, base)
        .map_err(|e| format!("building an operand: {e}"))
}

/// The same pattern with new values.
fn revalued<T: BenchScalar, I: Index, J: Index>(
    rng: &mut Rng,
    x: &CsrMatrix<T, I, J>,
) -> Result<CsrMatrix<T, I, J>, String> {
    let values = (0..x.nnz())
        .map(|_| value::<T>((rng.small(), rng.small())))
        .collect();
    CsrMatrix::try_from_parts(
        x.nrows(),
        x.ncols(),
        x.row_offsets().to_vec(),
        x.col_indices().to_vec(),
        values,
        x.base(),
    )
    .map_err(|e| format!("revaluing an operand: {e}"))
}

/// Equal as numbers: exact, but 0.0 equals -0.0 (the sign of a zero sum
/// depends on the order of its terms, which differs between algorithms).
fn same<T: BenchScalar>(x: T, y: T) -> bool {
    let (x, y) = (x.to_c64(), y.to_c64());
    x.re == y.re && x.im == y.im
}

/// Checks C's arrays against the reference `want` (with `beta * old` added
/// to its values when given).
fn compare<T: BenchScalar, I: Index, J: Index>(
    what: &str,
    (offsets, cols, vals): (&[I], &[J], &[T]),
    want: &CsrMatrix<T, I, J>,
    old: Option<(&[T], T)>,
) -> Result<(), String> {
    validate_structure(want.nrows(), want.ncols(), offsets, cols, want.base())
        .map_err(|e| format!("{what}: C is not a valid CSR: {e}"))?;
    if offsets != want.row_offsets() || cols != want.col_indices() {
        return Err(format!(
            "{what}: C's pattern differs from the reference (nnz {} vs {})",
            cols.len(),
            want.nnz()
        ));
    }
    for (k, (&got, &w)) in vals.iter().zip(want.values()).enumerate() {
        let w = match old {
            Some((old, beta)) => w + beta * old[k],
            None => w,
        };
        if !same(got, w) {
            return Err(format!(
                "{what}: C's entry {k} is {:?}, the reference {:?}",
                got.to_c64(),
                w.to_c64()
            ));
        }
    }
    Ok(())
}

/// Runs one case; `Ok` holds its number of scalar products and what
/// became of its memory budget.
fn run_case<T: BenchScalar, I: Index, J: Index>(
    ctx: &Context,
    gpus: Option<&Gpus>,
    case: &Case,
    rng: &mut Rng,
) -> Result<Outcome, String> {
    let (m, k, n) = case.dims;
    let stored = |op: Op, r: usize, c: usize| if op == Op::N { (r, c) } else { (c, r) };
    let (ar, ac) = stored(case.op_a, m, k);
    let (br, bc) = stored(case.op_b, k, n);
    let pa = pattern(rng, ar, ac, case.a);
    let pb = pattern(rng, br, bc, case.b);
    let a = matrix::<T, I, J>(rng, &pa, ac, case.base)?;
    let b = matrix::<T, I, J>(rng, &pb, bc, case.base)?;
    let alpha: T = value(case.alpha);
    fn fail(what: &'static str) -> impl Fn(rusparse::Error) -> String {
        move |e| format!("{what}: {e}")
    }
    let want = reference::spgemm(&a.view(), case.op_a, &b.view(), case.op_b, alpha)
        .map_err(fail("the reference"))?;
    let nprod = SpgemmPlan::new(
        ctx,
        &a.view(),
        case.op_a,
        &b.view(),
        case.op_b,
        Algorithm::Hash,
    )
    .map_err(fail("counting the products"))?
    .num_products();
    let call = |chunk_fraction, device_scalars| Call {
        op_a: case.op_a,
        op_b: case.op_b,
        algorithm: case.algorithm.c_number(),
        base: case.base,
        dims: (m, n),
        chunk_fraction,
        device_scalars,
        budget: None,
    };
    if case.flow == Flow::CAbi {
        let (offsets, cols, vals) =
            c_abi::three_phases(Memory::Host, call(None, false), &a, &b, alpha)?;
        return compare("C ABI", (&offsets, &cols, &vals), &want, None)
            .map(|()| Outcome::passed(nprod));
    }
    if let Some(g) = case.gpu {
        let gpus = gpus.ok_or("a GPU case without --gpu")?;
        let dev = gpus
            .device_for(case.kernel_types())
            .ok_or("no device has kernels for the case's types")?;
        let call = call(g.chunk_fraction, g.device_scalars);
        let memory = if g.staged {
            Memory::Staged(dev)
        } else {
            Memory::Device(dev)
        };
        if let (false, Some(times)) = (g.reuse, case.budget) {
            return gpu_under_budget(memory, call, [&a, &b, &want], alpha, times).map(|kind| {
                Outcome {
                    nprod,
                    budget: Some(kind),
                }
            });
        }
        if !g.reuse {
            let (offsets, cols, vals) = c_abi::three_phases(memory, call, &a, &b, alpha)?;
            return compare("GPU three phases", (&offsets, &cols, &vals), &want, None)
                .map(|()| Outcome::passed(nprod));
        }
        let beta: T = value(case.beta);
        let (a2, b2) = (revalued(rng, &a)?, revalued(rng, &b)?);
        let want2 = reference::spgemm(&a2.view(), case.op_a, &b2.view(), case.op_b, alpha)
            .map_err(fail("the reference"))?;
        let ((offsets, cols, vals), second) =
            c_abi::reuse(memory, call, &a, &b, a2.values(), b2.values(), alpha, beta)?;
        compare("GPU reuse", (&offsets, &cols, &vals), &want, None)?;
        return compare(
            "GPU reuse (new values, beta)",
            (&offsets, &cols, &second),
            &want2,
            Some((&vals, beta)),
        )
        .map(|()| Outcome::passed(nprod));
    }
    let Some(times) = case.budget else {
        return cpu_flow(ctx, case, &a, &b, &want, alpha, rng)
            .map(|()| Outcome::passed(nprod))
            .map_err(FlowError::describe);
    };
    // Under a budget: a multiple of the bound of the same product planned
    // without one.
    let bound = SpgemmPlan::new(
        ctx,
        &a.view(),
        case.op_a,
        &b.view(),
        case.op_b,
        case.algorithm,
    )
    .map_err(fail("planning without a budget"))?
    .peak_memory_bound()
    .ok_or("a CPU plan without a peak bound")?;
    let budget = (bound as f64 * times) as usize;
    let under = |budget: usize, rng: &mut Rng| {
        ctx.set_memory_budget(Some(budget));
        let result = cpu_flow(ctx, case, &a, &b, &want, alpha, rng);
        ctx.set_memory_budget(None);
        result
    };
    let what = format!("under a budget of {budget} bytes ({times}x the unbudgeted bound {bound})");
    match under(budget, rng) {
        // C is the reference's, as without a budget.
        Ok(()) => Ok(Outcome {
            nprod,
            budget: Some("memory budget: met"),
        }),
        Err(FlowError::Call(call, rusparse::Error::AllocFailed(msg))) => {
            if budget as u64 >= bound {
                return Err(format!(
                    "{call} {what}: ALLOC_FAILED for a budget at least the bound: {msg}"
                ));
            }
            let (smallest, kind) = named_budget(&msg).ok_or_else(|| {
                format!("{call} {what}: ALLOC_FAILED without naming the smallest budget: {msg}")
            })?;
            if smallest <= budget as u64 {
                return Err(format!(
                    "{call} {what}: refused, naming {smallest} bytes, which the budget meets: {msg}"
                ));
            }
            if kind == "memory budget: refused (too small to plan)" {
                // Planning's own bound: not a budget that works, only a
                // lower bound of one.
                return Ok(Outcome {
                    nprod,
                    budget: Some(kind),
                });
            }
            // The smallest budget named must work.
            let smallest = usize::try_from(smallest).map_err(|_| "a huge smallest budget")?;
            under(smallest, rng).map_err(|e| {
                format!(
                    "{what}: refused naming {smallest} bytes as the smallest budget, and under \
                     {smallest} bytes: {}",
                    e.describe()
                )
            })?;
            Ok(Outcome {
                nprod,
                budget: Some(kind),
            })
        }
        Err(e) => Err(format!("{what}: {}", e.describe())),
    }
}

/// A GPU case's three phases under a device memory budget of `times` the
/// bytes of A, B and C: C is the reference's, or the first phase that
/// cannot fit is INSUFFICIENT_RESOURCES naming the smallest budget, which
/// must exceed the budget and then work (a budget below what planning
/// alone takes is only checked to be named). An allocation refused by the
/// budget's safety net, not by the planner, names none and fails the case.
fn gpu_under_budget<T: BenchScalar, I: Index, J: Index>(
    memory: Memory<'_>,
    call: Call,
    [a, b, want]: [&CsrMatrix<T, I, J>; 3],
    alpha: T,
    times: f64,
) -> Result<&'static str, String> {
    let size = |x: &CsrMatrix<T, I, J>| {
        (x.nrows() + 1) * std::mem::size_of::<I>()
            + x.nnz() * (std::mem::size_of::<J>() + std::mem::size_of::<T>())
    };
    let budget = ((size(a) + size(b) + size(want)) as f64 * times) as usize;
    let what = format!("under a device memory budget of {budget} bytes ({times}x A, B and C)");
    let run = |budget: usize| {
        let call = Call {
            budget: Some(budget),
            ..call
        };
        let (offsets, cols, vals) = c_abi::three_phases(memory, call, a, b, alpha)?;
        compare("GPU three phases", (&offsets, &cols, &vals), want, None)
    };
    match run(budget) {
        Ok(()) => Ok("memory budget: met"),
        Err(msg) if msg.contains("INSUFFICIENT_RESOURCES") => {
            let (smallest, kind) = named_budget(&msg).ok_or_else(|| {
                format!("{what}: refused without naming the smallest budget: {msg}")
            })?;
            if smallest <= budget as u64 {
                return Err(format!(
                    "{what}: refused, naming {smallest} bytes, which the budget meets: {msg}"
                ));
            }
            if kind == "memory budget: refused (too small to plan)" {
                return Ok(kind);
            }
            let smallest = usize::try_from(smallest).map_err(|_| "a huge smallest budget")?;
            run(smallest).map_err(|e| {
                format!("{what}: refused naming {smallest} bytes, and under {smallest} bytes: {e}")
            })?;
            Ok(kind)
        }
        Err(msg) => Err(format!("{what}: {msg}")),
    }
}

/// The bytes an ALLOC_FAILED message of a budget names, and what kind of
/// refusal it is: "the smallest budget that would work is N bytes", or
/// "planning alone may take N bytes".
fn named_budget(msg: &str) -> Option<(u64, &'static str)> {
    let after = |marker: &str| {
        msg.split(marker)
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    after("the smallest budget that would work is ")
        .map(|n| (n, "memory budget: refused, the smallest budget named works"))
        .or_else(|| {
            // The CPU's words, then the GPU's.
            after("planning alone may take ")
                .or_else(|| after("work estimation alone takes "))
                .map(|n| (n, "memory budget: refused (too small to plan)"))
        })
}

/// A passed case: its number of products and, under a memory budget,
/// what became of it.
struct Outcome {
    nprod: u64,
    budget: Option<&'static str>,
}

impl Outcome {
    fn passed(nprod: u64) -> Outcome {
        Outcome {
            nprod,
            budget: None,
        }
    }
}

/// Why a CPU flow failed: a library call's error (kept whole, to tell a
/// budget's refusal), or anything else.
enum FlowError {
    Call(&'static str, rusparse::Error),
    Other(String),
}

impl From<String> for FlowError {
    fn from(e: String) -> FlowError {
        FlowError::Other(e)
    }
}

impl FlowError {
    fn describe(self) -> String {
        match self {
            FlowError::Call(what, e) => format!("{what}: {e}"),
            FlowError::Other(e) => e,
        }
    }
}

/// The CPU flows ([`Flow::Once`], [`Flow::Plan`]) against the reference
/// `want`.
fn cpu_flow<T: BenchScalar, I: Index, J: Index>(
    ctx: &Context,
    case: &Case,
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    want: &CsrMatrix<T, I, J>,
    alpha: T,
    rng: &mut Rng,
) -> Result<(), FlowError> {
    fn call(what: &'static str) -> impl Fn(rusparse::Error) -> FlowError {
        move |e| FlowError::Call(what, e)
    }
    let m = case.dims.0;
    if case.flow == Flow::Once {
        let opts = SpgemmOptions {
            op_a: case.op_a,
            op_b: case.op_b,
            alpha,
            algorithm: case.algorithm,
            column_order: Default::default(),
        };
        let c = ctx
            .spgemm(&a.view(), &b.view(), &opts)
            .map_err(call("spgemm"))?;
        compare(
            "spgemm",
            (c.row_offsets(), c.col_indices(), c.values()),
            want,
            None,
        )?;
        return Ok(());
    }
    let beta: T = value(case.beta);
    let mut plan = SpgemmPlan::new(
        ctx,
        &a.view(),
        case.op_a,
        &b.view(),
        case.op_b,
        case.algorithm,
    )
    .map_err(call("SpgemmPlan::new"))?;
    let nnz = plan
        .symbolic(ctx, &a.view(), &b.view())
        .map_err(call("symbolic"))?;
    let mut offsets = vec![I::default(); m + 1];
    let mut cols = vec![J::default(); nnz];
    let old: Vec<T> = (0..nnz)
        .map(|_| value::<T>((rng.small(), rng.small())))
        .collect();
    let mut vals = old.clone();
    plan.numeric(
        ctx,
        &a.view(),
        &b.view(),
        alpha,
        beta,
        CsrOutput::full(&mut offsets, &mut cols, &mut vals, case.base),
    )
    .map_err(call("numeric"))?;
    compare(
        "numeric",
        (&offsets, &cols, &vals),
        want,
        Some((&old, beta)),
    )?;
    // Reuse: new values on the same patterns, only C's values written.
    let (a2, b2) = (revalued(rng, a)?, revalued(rng, b)?);
    let want2 = reference::spgemm(&a2.view(), case.op_a, &b2.view(), case.op_b, alpha)
        .map_err(|e| format!("the reference: {e}"))?;
    let old2 = vals.clone();
    plan.numeric(
        ctx,
        &a2.view(),
        &b2.view(),
        alpha,
        beta,
        CsrOutput::<T, I, J>::values_only(&mut vals, case.base),
    )
    .map_err(call("numeric (reuse)"))?;
    compare(
        "numeric (reuse)",
        (&offsets, &cols, &vals),
        &want2,
        Some((&old2, beta)),
    )?;
    Ok(())
}

fn run_value<T: BenchScalar>(
    ctx: &Context,
    gpus: Option<&Gpus>,
    case: &Case,
    rng: &mut Rng,
) -> Result<Outcome, String> {
    match (case.offset64, case.index64) {
        (false, false) => run_case::<T, i32, i32>(ctx, gpus, case, rng),
        (false, true) => run_case::<T, i32, i64>(ctx, gpus, case, rng),
        (true, false) => run_case::<T, i64, i32>(ctx, gpus, case, rng),
        (true, true) => run_case::<T, i64, i64>(ctx, gpus, case, rng),
    }
}

/// The run's settings every case reads.
struct Settings<'g> {
    seed: u64,
    max_dim: usize,
    gpus: Option<&'g Gpus>,
    gpu_share: u64,
    budget_share: u64,
}

/// Runs case `k`: its number of products, or the failure's description.
fn run_numbered(ctx: &Context, settings: &Settings<'_>, k: u64) -> (Case, Result<Outcome, String>) {
    let (gpus, share) = (settings.gpus, settings.gpu_share);
    let mut case = Case::draw(
        settings.seed,
        k,
        settings.max_dim,
        share * u64::from(gpus.is_some()),
        settings.budget_share,
    );
    let fitted = match (case.flow, gpus) {
        (Flow::Gpu, Some(g)) => case.fit_to(g),
        _ => Ok(()),
    };
    // The pattern and value stream is separate from the case's draw, so a
    // case keeps its inputs when the draw gains fields.
    let mut rng = Rng::new(settings.seed ^ 0x5eed_da7a, k);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fitted?;
        match case.value {
            "f32" => run_value::<f32>(ctx, gpus, &case, &mut rng),
            "f64" => run_value::<f64>(ctx, gpus, &case, &mut rng),
            "c32" => run_value::<Complex<f32>>(ctx, gpus, &case, &mut rng),
            _ => run_value::<Complex<f64>>(ctx, gpus, &case, &mut rng),
        }
    }))
    .unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("panicked: {msg}"))
    });
    // A panic under a budget must not leave it to the next case.
    ctx.set_memory_budget(None);
    (case, result)
}

/// Runs `rusparse-bench soak`.
pub fn run(cli: SoakCli) -> Result<(), String> {
    let gpus = Gpus::open(cli.gpu)?;
    let settings = Settings {
        seed: cli.seed,
        max_dim: cli.max_dim,
        gpus: gpus.as_ref(),
        gpu_share: cli.gpu_share,
        budget_share: cli.budget_share,
    };
    let started = Instant::now();
    let next = AtomicU64::new(cli.first);
    let end = cli.first.saturating_add(cli.cases);
    let counts: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let passed = AtomicU64::new(0);
    // One rayon worker per soak worker, each with its own one-thread
    // context, taking cases from a shared counter.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cli.workers.max(1))
        .thread_name(|i| format!("soak-{i}"))
        .build()
        .map_err(|e| format!("soak workers: {e}"))?;
    let outcomes = pool.broadcast(|_| -> Result<(), String> {
        let mut ctx = Context::new(BackendKind::Cpu).map_err(|e| e.to_string())?;
        ctx.set_num_threads(1).map_err(|e| e.to_string())?;
        let mut local: BTreeMap<String, u64> = BTreeMap::new();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= end {
                break;
            }
            let (case, result) = run_numbered(&ctx, &settings, k);
            for c in case.categories() {
                *local.entry(c).or_default() += 1;
            }
            match result {
                Ok(Outcome { nprod, budget }) => {
                    passed.fetch_add(1, Ordering::Relaxed);
                    if let Some(b) = budget {
                        *local.entry(b.to_string()).or_default() += 1;
                    }
                    let class = if nprod > SMALL_PRODUCTS {
                        "products > 2^16 (trained choice, sampled prediction)"
                    } else {
                        "products <= 2^16"
                    };
                    *local.entry(class.to_string()).or_default() += 1;
                }
                Err(e) => {
                    let detail = if cli.verbose {
                        format!("\n    {case:?}")
                    } else {
                        String::new()
                    };
                    let gpu = match cli.gpu {
                        GpuChoice::Off => String::new(),
                        choice => format!(
                            " --gpu {} --gpu-share {}",
                            format!("{choice:?}").to_lowercase(),
                            cli.gpu_share
                        ),
                    };
                    failures.lock().unwrap().push(format!(
                        "case {k}: {e}{detail}\n    rerun: rusparse-bench soak --seed {} \
                         --first {k} --cases 1 --max-dim {}{gpu} --budget-share {} --verbose",
                        cli.seed, cli.max_dim, cli.budget_share
                    ));
                }
            }
        }
        let mut all = counts.lock().unwrap();
        for (c, n) in local {
            *all.entry(c).or_default() += n;
        }
        Ok(())
    });
    outcomes.into_iter().collect::<Result<(), String>>()?;
    let failures = failures.into_inner().unwrap();
    println!(
        "rusparse soak: seed {}, cases {}..{}, dimensions up to {}, {} workers, {} % of the CPU \
         once/plan cases and of the GPU three-phase cases under a memory budget, {:.1} s",
        cli.seed,
        cli.first,
        end,
        cli.max_dim,
        cli.workers,
        cli.budget_share,
        started.elapsed().as_secs_f64()
    );
    if let Some(g) = &gpus {
        println!("GPU cases: {} % on {}", cli.gpu_share, g.names().join(", "));
    }
    println!("cases by category (a case counts in each of its categories):");
    for (c, n) in counts.into_inner().unwrap() {
        println!("  {c:<40} {n}");
    }
    for f in &failures {
        println!("FAILED {f}");
    }
    println!(
        "{} passed, {} failed",
        passed.load(Ordering::Relaxed),
        failures.len()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} of {} cases failed", failures.len(), cli.cases))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_reproducible_and_varied() {
        let a = Case::draw(7, 123, 40, 0, 0);
        let b = Case::draw(7, 123, 40, 0, 0);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let mut kinds = std::collections::BTreeSet::new();
        for k in 0..2000 {
            kinds.extend(Case::draw(7, k, 40, 0, 20).categories());
        }
        for want in [
            "value c32",
            "base 1",
            "op(A) C, op(B) T",
            "algorithm BrmergeUpper",
            "shape a zero dimension",
            "shape 1x1x1",
            "shape square",
            "shape large",
            "rows DenseRow",
            "rows PowerLaw",
            "duplicate entries",
            "unsorted columns",
            "offsets i64 / columns i32",
            "flow plan + reuse (beta)",
            "flow C ABI (workEstimation, compute, copy)",
            "memory budget 0.5-1x the bound",
            "memory budget 1-4x the bound",
        ] {
            assert!(kinds.contains(want), "{want} never drawn: {kinds:?}");
        }
    }

    #[test]
    fn patterns_follow_their_recipe() {
        let mut rng = Rng::new(1, 2);
        let r = Recipe {
            kind: RowKind::DenseRow,
            duplicates: false,
            unsorted: false,
        };
        let p = pattern(&mut rng, 10, 8, r);
        assert!(p.iter().any(|row| row.len() == 8));
        assert!(p.iter().all(|row| row.windows(2).all(|w| w[0] < w[1])));
        let dup = Recipe {
            duplicates: true,
            ..r
        };
        let p = pattern(&mut rng, 10, 8, dup);
        assert!(p.iter().any(|row| row.windows(2).any(|w| w[0] == w[1])));
        assert!(pattern(&mut rng, 3, 0, r).iter().all(Vec::is_empty));
    }

    /// GPU cases are drawn after everything else: without GPUs the cases
    /// are those of a run before GPU flows existed, and with them the
    /// GPU cases keep their draw but run on device arrays.
    #[test]
    fn gpu_cases_are_drawn_last() {
        let mut gpu_cases = 0;
        for k in 0..400 {
            let cpu = Case::draw(3, k, 40, 0, 0);
            let gpu = Case::draw(3, k, 40, 50, 0);
            assert!(cpu.gpu.is_none() && cpu.flow != Flow::Gpu);
            assert_eq!(cpu.dims, gpu.dims);
            assert_eq!(
                (cpu.value, cpu.op_a, cpu.op_b),
                (gpu.value, gpu.op_a, gpu.op_b)
            );
            match gpu.gpu {
                Some(g) => {
                    gpu_cases += 1;
                    assert_eq!(gpu.flow, Flow::Gpu);
                    assert!(!gpu.algorithm.is_concrete(), "{gpu:?}");
                    assert!(g.chunk_fraction.is_none() || gpu.algorithm == Algorithm::Alg3);
                }
                None => assert_eq!(format!("{cpu:?}"), format!("{gpu:?}")),
            }
        }
        assert!(
            (150..250).contains(&gpu_cases),
            "{gpu_cases} GPU cases of 400"
        );
    }

    /// The GPU flows on the emulated devices (every case a GPU case).
    #[cfg(feature = "emulated-gpu")]
    #[test]
    fn a_short_gpu_soak_passes() {
        soak(&[
            "--cases",
            "16",
            "--seed",
            "4",
            "--workers",
            "1",
            "--gpu",
            "emulated",
            "--gpu-share",
            "100",
        ])
        .unwrap();
    }

    /// Runs the soak with `args` as its command line.
    fn soak(args: &[&str]) -> Result<(), String> {
        #[derive(clap::Parser)]
        struct Soak {
            #[command(flatten)]
            cli: SoakCli,
        }
        let line = std::iter::once("soak").chain(args.iter().copied());
        run(<Soak as clap::Parser>::try_parse_from(line).unwrap().cli)
    }

    /// Budgets are drawn from a stream of their own: the cases are those
    /// drawn without budgets, and only CPU once/plan cases and the GPU
    /// cases' three phases get one.
    #[test]
    fn budgets_leave_the_cases_as_they_were() {
        let mut budgeted = 0;
        for k in 0..400 {
            let plain = Case::draw(5, k, 40, 30, 0);
            let mut with = Case::draw(5, k, 40, 30, 50);
            assert!(plain.budget.is_none());
            if let Some(x) = with.budget.take() {
                budgeted += 1;
                assert!((0.5..=4.0).contains(&x), "{x}");
                let gpu_three_phases = with.flow == Flow::Gpu && with.gpu.is_some_and(|g| !g.reuse);
                assert!(matches!(with.flow, Flow::Once | Flow::Plan) || gpu_three_phases);
            }
            assert_eq!(format!("{plain:?}"), format!("{with:?}"));
        }
        assert!((80..220).contains(&budgeted), "{budgeted} of 400");
        assert_eq!(
            named_budget("the memory budget of 10 bytes (10 bytes) is too small for this product: the smallest budget that would work is 4242 bytes (4.1 KiB); nothing was allocated"),
            Some((4242, "memory budget: refused, the smallest budget named works"))
        );
        assert_eq!(
            named_budget("the memory budget of 10 bytes (10 bytes) is too small to plan this product: work estimation alone takes 5000 bytes (4.9 KiB), and the phases need more; nothing more was allocated"),
            Some((5000, "memory budget: refused (too small to plan)"))
        );
        assert!(named_budget("out of memory").is_none());
    }

    /// Every CPU once/plan case under a budget (met, or refused naming a
    /// budget that works).
    #[test]
    fn a_short_budgeted_soak_passes() {
        soak(&["--cases", "150", "--seed", "9", "--budget-share", "100"]).unwrap();
    }

    /// Two workers of the pool share the cases.
    #[test]
    fn a_short_soak_passes() {
        soak(&["--cases", "300", "--seed", "3", "--workers", "2"]).unwrap();
    }
}
