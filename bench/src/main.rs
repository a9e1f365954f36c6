//! `rusparse-bench`: times rusparse's SpGEMM on generated and Matrix Market
//! matrices and reports GFLOPS, memory and the algorithm the planner chose.
//!
//! Run from the repository root:
//!
//! ```text
//! # C = A·A on two generated matrices, 5 timed runs after 1 warm-up:
//! cargo run --release --bin rusparse-bench -- stencil2d_5pt:725 fem27_3dof:28
//! # A·Aᵀ of a Matrix Market file, complex doubles, 64-bit indices, 2 threads:
//! cargo run --release --bin rusparse-bench -- --product aat --value c64 --index i64 \
//!     --threads 2 /work/shared/matrices/lp_fit2p.mtx.gz
//! # A·B:
//! cargo run --release --bin rusparse-bench -- --product ab --b uniform_r4:100000 uniform_r4:100000
//! # Save results, dump the inputs for the peer script, plot:
//! cargo run --release --bin rusparse-bench -- --json results.json --csv results.csv \
//!     --dump dump/ --plot gflops.png delaunay:1048576 band_r120:36000
//! # Output-size prediction: error and cost of each sampler per matrix:
//! cargo run --release --bin rusparse-bench -- predict --markdown p.md stencil2d_5pt:725
//! # Plot only, from saved results and peer results (runs nothing):
//! cargo run --release --bin rusparse-bench -- --plot out.png --from results.json --peers peers.json
//! ```
//!
//! Matrix specs: `uniform_rK:N`, `stencil2d_5pt:S`, `stencil3d_7pt:S`,
//! `fem27_3dof:S`, `rmat:SCALE:EDGEFACTOR`, `delaunay:N`, `band_rR:N`, or a
//! path ending in `.mtx` / `.mtx.gz` (see `generate.rs` and
//! `matrix_market.rs`). Real matrices used with `--value c32|c64` get zero
//! imaginary parts; complex files with a real `--value` are an error.
//!
//! Each timed run is the C ABI's path: plan, symbolic phase, allocation of
//! C's three arrays, numeric phase. The exit status is non-zero, with a
//! message on stderr, on any error.

mod cases;
mod dump;
mod generate;
mod gpu;
mod kernels;
mod matrix_market;
mod npy;
#[cfg(feature = "plot")]
mod plot;
mod predict;
mod report;
mod selector_data;
mod soak;
mod sparse;
mod timing;

use clap::{Parser, Subcommand, ValueEnum};
use generate::Spec;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use report::{Machine, Report, Row, TOOL};
use rusparse::backend::gpu::GpuTuning;
use rusparse::{Algorithm, BackendKind, ColumnOrder, Complex, Context, CsrMatrix, Index, Op};
use sparse::{index_name, BenchScalar, SparseMatrix};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use timing::{Flow, Product, Stats};

#[global_allocator]
static ALLOCATOR: timing::CountingAllocator = timing::CountingAllocator;

/// Which product each case computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProductArg {
    /// C = A·A.
    Aa,
    /// C = A·B (B from --b).
    Ab,
    /// C = A·Aᵀ.
    Aat,
}

impl ProductArg {
    fn name(self) -> &'static str {
        match self {
            ProductArg::Aa => "aa",
            ProductArg::Ab => "ab",
            ProductArg::Aat => "aat",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    /// The CPU back end.
    Cpu,
    /// CUDA device 0 when there is one (the data are uploaded, as AUTO
    /// placement would run device data there), else the CPU.
    Auto,
    /// CUDA device 0: upload A (and B), time the device pipeline, check C
    /// against the CPU back end.
    Cuda,
}

/// What the device's memory pool does with freed memory between runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CudaPoolArg {
    /// Keep it cached (release threshold = max), as CuPy's pool does.
    Cached,
    /// Give it back to the driver after every run (cuMemPoolTrimTo 0, the
    /// driver's default release threshold of 0).
    Release,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ColumnOrderArg {
    /// Increasing columns in every row (the default, as cuSPARSE).
    Sorted,
    /// Each row in any order (no sort).
    Any,
}

impl ColumnOrderArg {
    fn order(self) -> ColumnOrder {
        match self {
            ColumnOrderArg::Sorted => ColumnOrder::Sorted,
            ColumnOrderArg::Any => ColumnOrder::Any,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FlowArg {
    /// Plan, symbolic, allocate C, numeric (rusparseSpGEMM_compute).
    OneCall,
    /// The reuse flow's first product, as PETSc runs it: structure
    /// (reuse_nnz, reuse_copy), then values on it (reuse_compute).
    Reuse,
    /// The reuse flow's later products (PETSc's MAT_REUSE_MATRIX): only
    /// reuse_compute is timed.
    ReuseValues,
}

impl FlowArg {
    fn flow(self) -> Flow {
        match self {
            FlowArg::OneCall => Flow::OneCall,
            FlowArg::Reuse => Flow::Reuse,
            FlowArg::ReuseValues => Flow::ReuseValues,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum AlgorithmArg {
    /// Let the planner choose.
    Auto,
    Hash,
    BrmergePrecise,
    BrmergeUpper,
    Dense,
}

impl AlgorithmArg {
    fn algorithm(self) -> Algorithm {
        match self {
            AlgorithmArg::Auto => Algorithm::Default,
            AlgorithmArg::Hash => Algorithm::Hash,
            AlgorithmArg::BrmergePrecise => Algorithm::BrmergePrecise,
            AlgorithmArg::BrmergeUpper => Algorithm::BrmergeUpper,
            AlgorithmArg::Dense => Algorithm::Dense,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ValueArg {
    F32,
    F64,
    C32,
    C64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum IndexArg {
    I32,
    I64,
}

/// One `--memory-budget`: none, bytes, or a multiple of C's size.
#[derive(Clone, Copy, Debug, PartialEq)]
enum BudgetArg {
    /// No budget (`none`): the unbudgeted product, for comparison.
    None,
    /// A number of bytes (`4096`, `512M`, `1G`).
    Bytes(u64),
    /// A multiple of the bytes of C's three arrays (`1.25c`, `4c`).
    TimesC(f64),
}

impl BudgetArg {
    /// Parses `none`, bytes with an optional binary unit (`4096`, `512M`,
    /// `1G`, `4GiB`: K, M, G, T are powers of 1024, as
    /// `RUSPARSE_MEMORY_BUDGET` reads them) or a multiple of C's size
    /// (`1.25c`).
    fn parse(text: &str) -> Result<BudgetArg, String> {
        let t = text.trim();
        let bad = || {
            format!(
                "{text:?} is not a memory budget: bytes (4096, 512M, 1G), a multiple of C's \
                 size (1.25c, 4c) or none"
            )
        };
        if t.eq_ignore_ascii_case("none") {
            return Ok(BudgetArg::None);
        }
        if let Some(x) = t.strip_suffix(['c', 'C']) {
            let x: f64 = x.trim().parse().map_err(|_| bad())?;
            return if x.is_finite() && x > 0.0 {
                Ok(BudgetArg::TimesC(x))
            } else {
                Err(bad())
            };
        }
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let number: u64 = t[..digits].parse().map_err(|_| bad())?;
        let unit = t[digits..].trim().to_ascii_lowercase();
        let shift = match unit.trim_end_matches('b').trim_end_matches('i') {
            "" => 0,
            "k" => 10,
            "m" => 20,
            "g" => 30,
            "t" => 40,
            _ => return Err(bad()),
        };
        number
            .checked_mul(1 << shift)
            .map(BudgetArg::Bytes)
            .ok_or_else(bad)
    }

    /// The budget in bytes for a C of `c_bytes` bytes (`None`: no budget).
    fn bytes(self, c_bytes: usize) -> Option<usize> {
        match self {
            BudgetArg::None => None,
            BudgetArg::Bytes(b) => Some(usize::try_from(b).unwrap_or(usize::MAX)),
            BudgetArg::TimesC(x) => Some((x * c_bytes as f64).round() as usize),
        }
    }
}

fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

/// Benchmark rusparse SpGEMM (C = A·A, A·B or A·Aᵀ) on generated or
/// Matrix Market matrices.
#[derive(Parser, Debug)]
#[command(
    name = "rusparse-bench",
    version,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Another measurement than the timing of products (without one, the
    /// MATRIX arguments are timed).
    #[command(subcommand)]
    command: Option<Command>,
    /// Matrices A: generator specs (uniform_rK:N, stencil2d_5pt:S,
    /// stencil3d_7pt:S, fem27_3dof:S, rmat:SCALE:EDGEFACTOR, delaunay:N,
    /// band_rR:N) or paths ending in .mtx / .mtx.gz.
    #[arg(value_name = "MATRIX")]
    matrices: Vec<String>,
    /// The product.
    #[arg(long, value_enum, default_value_t = ProductArg::Aa)]
    product: ProductArg,
    /// B for --product ab (a spec or a path).
    #[arg(long = "b", value_name = "SPEC")]
    b: Option<String>,
    /// Back end.
    #[arg(long, value_enum, default_value_t = BackendArg::Cpu)]
    backend: BackendArg,
    /// Algorithm (auto lets the planner choose; the table shows the choice).
    #[arg(long, value_enum, default_value_t = AlgorithmArg::Auto)]
    algorithm: AlgorithmArg,
    /// CPU: the order of C's columns within each row (any: rows are not
    /// sorted, a rusparse extension; the GPU always sorts).
    #[arg(long, value_enum, default_value_t = ColumnOrderArg::Sorted)]
    column_order: ColumnOrderArg,
    /// CPU: the C ABI flow each timed run follows.
    #[arg(long, value_enum, default_value_t = FlowArg::OneCall)]
    flow: FlowArg,
    /// Value type.
    #[arg(long, value_enum, default_value_t = ValueArg::F64)]
    value: ValueArg,
    /// Index type of row offsets and columns.
    #[arg(long, value_enum, default_value_t = IndexArg::I32)]
    index: IndexArg,
    /// CPU threads (default: RUSPARSE_NUM_THREADS, else all cores).
    #[arg(long, value_parser = at_least_one())]
    threads: Option<usize>,
    /// Timed runs per case.
    #[arg(long, default_value_t = 5, value_parser = at_least_one())]
    runs: usize,
    /// Untimed warm-up runs per case.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// The memory budget of the products (Context::set_memory_budget):
    /// bytes (4096, 512M, 1G), a multiple of C's size (1.25c, 4c: the bytes
    /// of C's three arrays, from one unbudgeted product first) or none.
    /// Repeatable: each budget gives its own row per case (e.g.
    /// --memory-budget none --memory-budget 1.25c); on the CPU the budgets
    /// are timed in interleaved rounds, on CUDA one after another (every
    /// device allocation of rusparse, beyond A, B and C, is held to it).
    /// Without it, RUSPARSE_MEMORY_BUDGET applies on the CPU.
    #[arg(long, value_name = "B", value_parser = BudgetArg::parse)]
    memory_budget: Vec<BudgetArg>,
    /// Seed of the generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// CUDA: skip checking C against the CPU back end.
    #[arg(long)]
    no_verify: bool,
    /// CUDA: what the memory pool does with freed memory between runs.
    #[arg(long, value_enum, default_value_t = CudaPoolArg::Cached)]
    cuda_pool: CudaPoolArg,
    /// CUDA: the bitwise-reproducible numeric phase (the check against the
    /// CPU back end then also says whether C is bitwise equal).
    #[arg(long)]
    deterministic: bool,
    /// CUDA, for the GPU selector's sweep: threads sharing one row of B
    /// instead of the planner's choice (a power of two from 2 to the warp
    /// width). Repeatable: a row per value (and per --gpu-bin-scale).
    #[arg(long, value_name = "N")]
    gpu_threads_per_b_row: Vec<u32>,
    /// CUDA, for the GPU selector's sweep: scale every kernel bin's upper
    /// bound by F in (0, 1] (rows move to larger tables sooner).
    /// Repeatable: a row per value.
    #[arg(long, value_name = "F")]
    gpu_bin_scale: Vec<f64>,
    /// CUDA: MiB of global hash tables (rows too long for shared memory)
    /// one batch may take instead of the planner's (batches run one after
    /// another). Repeatable: a row per value (and per other GPU option).
    #[arg(long, value_name = "MIB")]
    gpu_global_batch_mib: Vec<u64>,
    /// Write the rows as CSV.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write the rows as JSON (with machine, date and threads).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw a grouped bar chart of GFLOPS per matrix and tool (PNG).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Peer results (JSON of the same schema) to compare with; repeatable.
    #[arg(long = "peers", value_name = "FILE")]
    peers: Vec<PathBuf>,
    /// Earlier results of this tool (JSON) to include; with no MATRIX,
    /// nothing runs (plot/table only). Repeatable.
    #[arg(long = "from", value_name = "FILE")]
    from: Vec<PathBuf>,
    /// Write each case's inputs and a check of C as .npy files into DIR/<name>/.
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    /// No progress bar or progress messages.
    #[arg(long, short)]
    quiet: bool,
}

const AFTER_HELP: &str = "\
Examples (from the repository root):
  cargo run --release --bin rusparse-bench -- stencil2d_5pt:725 fem27_3dof:28
  cargo run --release --bin rusparse-bench -- --product aat lp_fit2p.mtx.gz
  cargo run --release --bin rusparse-bench -- --json r.json --dump dump/ delaunay:1048576
  cargo run --release --bin rusparse-bench -- --plot out.png --from r.json --peers peers.json
  cargo run --release --bin rusparse-bench -- predict --aat lp_ stencil2d_5pt:725 lp_fit2p.mtx.gz
    (output-size prediction: error and cost per matrix; `predict --help`)
  cargo run --release --bin rusparse-bench -- selector-data --csv train.csv uniform_r4:100000
    (features and every CPU algorithm's time, for training the selector)
  cargo run --release --bin rusparse-bench -- soak --cases 1000000 --seed 1
    (random products of every type, base, op and algorithm checked against the reference;
     --gpu cuda|emulated runs a share of them through the C ABI on device arrays)
  cargo run --release --bin rusparse-bench -- kernels --device-arch 90
    (registers, shared memory and spills of every kernel instantiation by NVRTC; no GPU needed)

Case names (the `matrix` column and the --dump folder): the spec with ':' as '_'
(stencil2d_5pt_725) or the file stem (1138_bus); '_aat' is appended for
--product aat and '_x_<B name>' for --product ab.";

/// One case to run: A's spec and the case name.
struct Case {
    spec: Spec,
    name: String,
}

fn load(spec: &Spec, seed: u64) -> Result<SparseMatrix, String> {
    let m = match spec {
        Spec::File(path) => matrix_market::read_path(path)?,
        _ => spec.generate(seed)?,
    };
    debug_assert!(m.is_canonical(), "{spec:?} did not give canonical CSR");
    Ok(m)
}

/// Progress output: a bar on a terminal, plain lines otherwise, nothing
/// with --quiet.
struct Progress {
    bar: ProgressBar,
    quiet: bool,
}

impl Progress {
    fn new(total: u64, quiet: bool) -> Progress {
        let visible = !quiet && std::io::stderr().is_terminal();
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        bar.set_style(
            ProgressStyle::with_template(
                "[{elapsed_precise}] {bar:40.cyan/blue} {pos}/{len} runs  {msg}",
            )
            .expect("valid template"),
        );
        Progress { bar, quiet }
    }
    fn log(&self, msg: String) {
        if self.quiet {
            return;
        }
        if self.bar.is_hidden() {
            eprintln!("{msg}");
        } else {
            self.bar.println(msg);
        }
    }
}

/// Runs every case with value type `T` and index type `I`, on the CPU, or
/// on `gpu` when given.
fn run_cases<T: BenchScalar, I: Index>(
    cli: &Cli,
    ctx: &Context,
    gpu: Option<&std::sync::Arc<rusparse::backend::cuda::CudaDevice>>,
    cases: &[Case],
    b_spec: Option<&Case>,
    progress: &Progress,
) -> Result<Vec<Row>, String> {
    let b: Option<CsrMatrix<T, I, I>> = match b_spec {
        Some(bc) => {
            progress.log(format!("loading B = {}", bc.name));
            let m = load(&bc.spec, cli.seed).map_err(|e| format!("B: {e}"))?;
            Some(
                m.to_csr::<T, I>()
                    .map_err(|e| format!("B ({}): {e}", bc.name))?,
            )
        }
        None => None,
    };
    let mut rows = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        progress.bar.set_message(format!("{} (loading)", case.name));
        let started = std::time::Instant::now();
        let a = load(&case.spec, cli.seed)
            .and_then(|m| m.to_csr::<T, I>())
            .map_err(|e| format!("{}: {e}", case.name))?;
        progress.log(format!(
            "[{}/{}] {}: {} x {}, nnz {} (ready in {:.2} s)",
            k + 1,
            cases.len(),
            case.name,
            a.nrows(),
            a.ncols(),
            a.nnz(),
            started.elapsed().as_secs_f64()
        ));
        let (b_view, op_b) = match (cli.product, &b) {
            (ProductArg::Aa, _) => (a.view(), Op::N),
            (ProductArg::Aat, _) => (a.view(), Op::T),
            (ProductArg::Ab, Some(b)) => (b.view(), Op::N),
            (ProductArg::Ab, None) => return Err("--product ab needs --b SPEC".into()),
        };
        progress.bar.set_message(case.name.clone());
        if let Some(dev) = gpu {
            let b_gpu = match cli.product {
                ProductArg::Ab => b.as_ref(),
                _ => None,
            };
            rows.extend(run_case_gpu(cli, ctx, dev, case, &a, b_gpu, progress)?);
            continue;
        }
        let product = Product {
            ctx,
            a: a.view(),
            op_a: Op::N,
            b: b_view,
            op_b,
            algorithm: cli.algorithm.algorithm(),
            column_order: cli.column_order.order(),
            flow: cli.flow.flow(),
        };
        let failed = |e: rusparse::Error| format!("{}: rusparse failed: {e}", case.name);
        let budgets: Vec<Option<usize>> = if cli.memory_budget.is_empty() {
            // The context's own budget (RUSPARSE_MEMORY_BUDGET or none).
            vec![ctx.memory_budget()]
        } else {
            let needs_c = cli
                .memory_budget
                .iter()
                .any(|b| matches!(b, BudgetArg::TimesC(_)));
            let c_bytes = if needs_c {
                let c = product.c_bytes_unbudgeted().map_err(failed)?;
                progress.log(format!(
                    "    C takes {c} bytes ({:.1} MiB)",
                    c as f64 / 1048576.0
                ));
                c
            } else {
                0
            };
            cli.memory_budget.iter().map(|b| b.bytes(c_bytes)).collect()
        };
        let measured =
            product.measure_budgets(&budgets, cli.warmup, cli.runs, || progress.bar.inc(1));
        let mut last_c = None;
        for (budget, m) in budgets.iter().zip(measured) {
            let m = match (m, budget) {
                // A budget too small: a row that says so, not the end of
                // the benchmark.
                (Err(rusparse::Error::AllocFailed(msg)), Some(b)) => {
                    progress.log(format!("    budget {b} bytes: refused: {msg}"));
                    rows.push(Row {
                        threads: ctx.num_threads() as u64,
                        ..refused_row(case, &a, "cpu", *b as u64, &msg)
                    });
                    continue;
                }
                (m, _) => m.map_err(failed)?,
            };
            let row = Row {
                peak_extra_bytes: Some(m.peak_extra_bytes),
                algorithm: match cli.column_order {
                    ColumnOrderArg::Sorted => m.algorithm.into(),
                    ColumnOrderArg::Any => format!("{}, any order", m.algorithm),
                },
                threads: ctx.num_threads() as u64,
                backend: "cpu".into(),
                c_bytes: Some(timing::c_bytes(&m.c) as u64),
                first_call_s: Some(m.first_call_s),
                memory_budget: m.budget.map(|b| b as u64),
                peak_bound: m.peak_bound,
                peak_extra_cold_bytes: Some(m.peak_extra_cold_bytes),
                concurrency: m.concurrency.map(|c| c as u64),
                ..measured_row(&case.name, &a, m.nprod, m.c.nnz(), &m.times)
            };
            let peak = m.peak_extra_bytes.max(m.peak_extra_cold_bytes);
            let budget_note = match row.memory_budget {
                Some(b) => format!(
                    ", budget {b} bytes: peak extra {} bytes, {} from no kept scratch ({:.0} % of \
                     the budget{}), planner's bound {}, {} chunks at once",
                    m.peak_extra_bytes,
                    m.peak_extra_cold_bytes,
                    100.0 * peak.max(1) as f64 / b.max(1) as f64,
                    if peak > b { ", OVER THE BUDGET" } else { "" },
                    m.peak_bound.map_or("-".into(), |p| p.to_string()),
                    m.concurrency.map_or("-".into(), |c| c.to_string()),
                ),
                None => String::new(),
            };
            progress.log(format!(
                "    nprod {}, nnz(C) {}, median {:.4} s, {:.3} GFLOPS, {}{budget_note}",
                row.nprod, row.nnz_c, row.median_s, row.gflops, row.algorithm
            ));
            rows.push(row);
            last_c = Some(m.c);
        }
        let Some(c) = last_c else {
            continue;
        };
        if let Some(dir) = &cli.dump {
            let b_dump = match cli.product {
                ProductArg::Ab => b.as_ref(),
                _ => None,
            };
            dump::write_case(dir, &case.name, cli.product.name(), &a, b_dump, &c)
                .map_err(|e| format!("{}: dump: {e}", case.name))?;
        }
    }
    progress.bar.finish_and_clear();
    Ok(rows)
}

/// The algorithm cell of a budget the planner refused: `refused`, with
/// the smallest budget that would work when the message names it.
/// The row of a case refused under `budget` on `backend`.
fn refused_row<T: BenchScalar, I: Index>(
    case: &Case,
    a: &CsrMatrix<T, I, I>,
    backend: &str,
    budget: u64,
    msg: &str,
) -> Row {
    Row {
        tool: TOOL.into(),
        matrix: case.name.clone(),
        rows: a.nrows() as u64,
        cols: a.ncols() as u64,
        nnz_a: a.nnz() as u64,
        algorithm: refused(msg),
        value: T::NAME.into(),
        index: index_name::<I>().into(),
        backend: backend.into(),
        memory_budget: Some(budget),
        ..Row::default()
    }
}

fn refused(msg: &str) -> String {
    let smallest = msg
        .split("the smallest budget that would work is ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next());
    match smallest {
        Some(n) => format!("refused (smallest budget {n} bytes)"),
        None => "refused (budget too small to plan)".into(),
    }
}

/// The fields of a result row every back end fills the same way: the case,
/// A's shape, the work, and the statistics of the timed runs.
fn measured_row<T: BenchScalar, I: Index>(
    case: &str,
    a: &CsrMatrix<T, I>,
    nprod: u64,
    nnz_c: usize,
    times: &[f64],
) -> Row {
    let stats = Stats::of(times).expect("at least one run");
    Row {
        tool: TOOL.into(),
        matrix: case.into(),
        rows: a.nrows() as u64,
        cols: a.ncols() as u64,
        nnz_a: a.nnz() as u64,
        nprod,
        nnz_c: nnz_c as u64,
        median_s: stats.median,
        min_s: stats.min,
        max_s: stats.max,
        gflops: report::gflops(nprod, stats.median),
        value: T::NAME.into(),
        index: index_name::<I>().into(),
        ..Row::default()
    }
}

/// One case on the CUDA back end, a row per `--memory-budget` (one
/// without): the timed runs, the check of C against the CPU back end, the
/// dump.
fn run_case_gpu<T: BenchScalar, I: Index>(
    cli: &Cli,
    ctx: &Context,
    dev: &std::sync::Arc<rusparse::backend::cuda::CudaDevice>,
    case: &Case,
    a: &CsrMatrix<T, I, I>,
    b: Option<&CsrMatrix<T, I, I>>,
    progress: &Progress,
) -> Result<Vec<Row>, String> {
    let product = |budget: Option<u64>| gpu::GpuProduct {
        dev,
        release_pool: cli.cuda_pool == CudaPoolArg::Release,
        budget,
        tuning: GpuTuning::default(),
        deterministic: cli.deterministic,
    };
    let budgets: Vec<Option<u64>> = if cli.memory_budget.is_empty() {
        vec![None]
    } else {
        let needs_c = cli
            .memory_budget
            .iter()
            .any(|b| matches!(b, BudgetArg::TimesC(_)));
        let c_bytes = if needs_c {
            product(None)
                .measure(a, b, 0, 1, || {})
                .map_err(|e| format!("{}: rusparse (CUDA) failed: {e}", case.name))?
                .c_bytes as usize
        } else {
            0
        };
        cli.memory_budget
            .iter()
            .map(|x| x.bytes(c_bytes).map(|b| b as u64))
            .collect()
    };
    // The sweep's configurations (one, the planner's, without the flags).
    fn or_planners<T: Copy>(v: &[T]) -> Vec<Option<T>> {
        if v.is_empty() {
            vec![None]
        } else {
            v.iter().copied().map(Some).collect()
        }
    }
    let scales = or_planners(&cli.gpu_bin_scale);
    let batches = or_planners(&cli.gpu_global_batch_mib);
    let tunings: Vec<GpuTuning> = or_planners(&cli.gpu_threads_per_b_row)
        .into_iter()
        .flat_map(|t| scales.iter().map(move |&f| (t, f)))
        .flat_map(|(t, f)| {
            batches.iter().map(move |&mib| GpuTuning {
                threads_per_b_row: t,
                bin_scale: f,
                global_batch_bytes: mib.map(|m| m << 20),
            })
        })
        .collect();
    let mut rows = Vec::with_capacity(budgets.len() * tunings.len());
    for (budget, tuning) in budgets
        .iter()
        .flat_map(|&b| tunings.iter().map(move |&t| (b, t)))
    {
        if tuning != GpuTuning::default() {
            progress.log(format!(
                "    configuration: threads per B row {}, bin scale {}, global batches of {}",
                tuning
                    .threads_per_b_row
                    .map_or("planner's".into(), |t| t.to_string()),
                tuning.bin_scale.map_or("1".into(), |f| f.to_string()),
                tuning
                    .global_batch_bytes
                    .map_or("the planner's size".into(), |b| format!("{} MiB", b >> 20))
            ));
        }
        let product = gpu::GpuProduct {
            tuning,
            ..product(budget)
        };
        match run_case_gpu_budget(cli, ctx, &product, case, a, b, progress) {
            Ok(row) => rows.push(row),
            // A budget too small: a row that says so.
            Err(msg) if budget.is_some() && msg.contains("too small") => {
                let b = budget.unwrap_or(0);
                progress.log(format!("    budget {b} bytes: refused: {msg}"));
                rows.push(refused_row(case, a, "cuda", b, &msg));
            }
            Err(msg) => return Err(msg),
        }
    }
    Ok(rows)
}

/// [`run_case_gpu`] with one product (and its budget).
fn run_case_gpu_budget<T: BenchScalar, I: Index>(
    cli: &Cli,
    ctx: &Context,
    product: &gpu::GpuProduct<'_>,
    case: &Case,
    a: &CsrMatrix<T, I, I>,
    b: Option<&CsrMatrix<T, I, I>>,
    progress: &Progress,
) -> Result<Row, String> {
    let m = product
        .measure(a, b, cli.warmup, cli.runs, || progress.bar.inc(1))
        .map_err(|e| format!("{}: rusparse (CUDA) failed: {e}", case.name))?;
    if cli.no_verify {
        progress.log("    (C not checked against the CPU back end: --no-verify)".into());
    } else {
        let started = std::time::Instant::now();
        let cpu = Product {
            ctx,
            a: a.view(),
            op_a: Op::N,
            b: b.map_or(a.view(), |b| b.view()),
            op_b: Op::N,
            algorithm: Algorithm::Default,
            column_order: ColumnOrder::Sorted,
            flow: Flow::OneCall,
        }
        .measure(0, 1, || {})
        .map_err(|e| {
            format!(
                "{}: the CPU back end (for the check) failed: {e}",
                case.name
            )
        })?;
        let tol = gpu::tolerance::<T>();
        match gpu::compare(&m.c, &cpu.c, tol) {
            Ok(worst) => {
                progress.log(format!(
                    "    C matches the CPU back end (structure exact, largest relative difference                      {worst:.2e}; checked in {:.2} s)",
                    started.elapsed().as_secs_f64()
                ));
                if cli.deterministic {
                    let bitwise = m.c.values() == cpu.c.values();
                    progress.log(format!(
                        "    deterministic mode: C's values {} the CPU back end's",
                        if bitwise {
                            "are bitwise equal to"
                        } else {
                            "are NOT bitwise equal to"
                        }
                    ));
                }
            }
            Err(e) => {
                let msg = format!(
                    "{}: WRONG RESULT: the CUDA back end's C differs from the CPU back end's: {e}",
                    case.name
                );
                eprintln!("!!!!!! {msg}");
                return Err(msg);
            }
        }
    }
    let t = product.tuning;
    let mut algorithm = String::from(if cli.deterministic {
        "cuda-hash-deterministic"
    } else {
        "cuda-hash"
    });
    if let Some(g) = t.threads_per_b_row {
        algorithm += &format!(" tpr={g}");
    }
    if let Some(f) = t.bin_scale {
        algorithm += &format!(" scale={f}");
    }
    if let Some(b) = t.global_batch_bytes {
        algorithm += &format!(" batch={}M", b >> 20);
    }
    let phases = m
        .phases
        .iter()
        .map(|(name, s)| format!("{name}={s:.6}"))
        .chain(std::iter::once(format!("predict_nnz={:.6}", m.predict.0)))
        .collect::<Vec<_>>()
        .join(";");
    let row = Row {
        peak_extra_bytes: m.peak_device_bytes.map(|p| p.saturating_sub(m.c_bytes)),
        algorithm,
        phases_s: Some(phases.clone()),
        plan: Some(m.plan_note.clone()),
        threads: 0,
        backend: "cuda".into(),
        device: m.device.clone(),
        first_call_s: Some(m.first_call_s),
        peak_device_bytes: m.peak_device_bytes,
        c_bytes: Some(m.c_bytes),
        memory_budget: product.budget,
        ..measured_row(&case.name, a, m.nprod, m.c.nnz(), &m.times)
    };
    let mib = |b: u64| b as f64 / 1048576.0;
    progress.log(format!(
        "    {}: nprod {}, nnz(C) {}, median {:.6} s, {:.3} GFLOPS, first call {:.3} s,          peak {} MiB (C {:.1} MiB, plan metadata {:.1} MiB)",
        row.device,
        row.nprod,
        row.nnz_c,
        row.median_s,
        row.gflops,
        m.first_call_s,
        m.peak_device_bytes
            .map_or("-".into(), |p| format!("{:.1}", mib(p))),
        mib(m.c_bytes),
        mib(m.plan_bytes)
    ));
    if let (Some(budget), Some(peak)) = (product.budget, row.peak_extra_bytes) {
        progress.log(format!(
            "    budget {budget} bytes: peak extra {peak} bytes ({:.0} % of the budget{})",
            100.0 * peak.max(1) as f64 / budget.max(1) as f64,
            if peak > budget {
                ", OVER THE BUDGET"
            } else {
                ""
            }
        ));
    }
    progress.log(format!("    plan: {}", m.plan_note));
    progress.log(format!(
        "    phases (s, one run waiting after each): {phases}"
    ));
    let nnz = m.c.nnz().max(1) as f64;
    progress.log(format!(
        "    predictNnz on the device arrays: {:.6} s ({:.1} % of the median product), predicted \
         nnz(C) {} ({:+.2} %)",
        m.predict.0,
        100.0 * m.predict.0 / row.median_s.max(1e-12),
        m.predict.1,
        100.0 * (m.predict.1 as f64 - nnz) / nnz
    ));
    if let Some(dir) = &cli.dump {
        dump::write_case(dir, &case.name, cli.product.name(), a, b, &m.c)
            .map_err(|e| format!("{}: dump: {e}", case.name))?;
    }
    Ok(row)
}

fn run(cli: &Cli) -> Result<(), String> {
    #[cfg(not(feature = "plot"))]
    if cli.plot.is_some() {
        return Err("--plot: this rusparse-bench was built without its feature `plot`".into());
    }
    if cli.matrices.is_empty() && cli.from.is_empty() {
        return Err(
            "no MATRIX given and no --from results to show; see --help for the matrix specs".into(),
        );
    }
    match (cli.product, &cli.b) {
        (ProductArg::Ab, None) => return Err("--product ab needs --b SPEC".into()),
        (p, Some(_)) if p != ProductArg::Ab => {
            return Err("--b is only used with --product ab".into())
        }
        _ => {}
    }
    let b_case = cli
        .b
        .as_deref()
        .map(|s| {
            Spec::parse(s).map(|spec| Case {
                name: spec.safe_name(),
                spec,
            })
        })
        .transpose()?;
    let cases = cli
        .matrices
        .iter()
        .map(|s| {
            let spec = Spec::parse(s)?;
            let mut name = spec.safe_name();
            match (cli.product, &b_case) {
                (ProductArg::Aat, _) => name.push_str("_aat"),
                (ProductArg::Ab, Some(b)) => name = format!("{name}_x_{}", b.name),
                _ => {}
            }
            Ok(Case { spec, name })
        })
        .collect::<Result<Vec<Case>, String>>()?;

    // Earlier results and peers are read first, so a bad file fails fast.
    let mut own: Vec<Row> = Vec::new();
    for f in &cli.from {
        own.extend(report::read_rows(f)?);
    }
    let mut peers: Vec<Row> = Vec::new();
    for f in &cli.peers {
        peers.extend(report::read_rows(f)?);
    }

    let mut threads = own.first().map_or(0, |r| r.threads);
    if !cases.is_empty() {
        let gpu = match cli.backend {
            BackendArg::Cpu => None,
            BackendArg::Cuda => Some(gpu::device()?),
            BackendArg::Auto => match gpu::device() {
                Ok(d) => Some(d),
                Err(e) => {
                    if !cli.quiet {
                        eprintln!("rusparse-bench: --backend auto runs on the CPU ({e})");
                    }
                    None
                }
            },
        };
        if gpu.is_some() && cli.product == ProductArg::Aat {
            return Err(
                "--product aat: the benchmark's CUDA path times op N only so far (the library \
                 takes op T on the GPU); use --backend cpu"
                    .into(),
            );
        }
        // The CPU context runs the CPU cases and, for CUDA, the check of C.
        let backend = match cli.backend {
            BackendArg::Cpu => BackendKind::Cpu,
            BackendArg::Auto | BackendArg::Cuda => BackendKind::Auto,
        };
        let mut ctx =
            Context::new(backend).map_err(|e| format!("cannot create the context: {e}"))?;
        if let Some(t) = cli.threads {
            ctx.set_num_threads(t)
                .map_err(|e| format!("--threads {t}: {e}"))?;
        }
        threads = ctx.num_threads() as u64;
        let total = (cases.len() * (cli.warmup + cli.runs)) as u64;
        let progress = Progress::new(total, cli.quiet);
        let b = b_case.as_ref();
        let measured = match (cli.value, cli.index) {
            (ValueArg::F32, IndexArg::I32) => {
                run_cases::<f32, i32>(cli, &ctx, gpu.as_ref(), &cases, b, &progress)
            }
            (ValueArg::F32, IndexArg::I64) => {
                run_cases::<f32, i64>(cli, &ctx, gpu.as_ref(), &cases, b, &progress)
            }
            (ValueArg::F64, IndexArg::I32) => {
                run_cases::<f64, i32>(cli, &ctx, gpu.as_ref(), &cases, b, &progress)
            }
            (ValueArg::F64, IndexArg::I64) => {
                run_cases::<f64, i64>(cli, &ctx, gpu.as_ref(), &cases, b, &progress)
            }
            (ValueArg::C32, IndexArg::I32) => {
                run_cases::<Complex<f32>, i32>(cli, &ctx, gpu.as_ref(), &cases, b, &progress)
            }
            (ValueArg::C32, IndexArg::I64) => {
                run_cases::<Complex<f32>, i64>(cli, &ctx, gpu.as_ref(), &cases, b, &progress)
            }
            (ValueArg::C64, IndexArg::I32) => {
                run_cases::<Complex<f64>, i32>(cli, &ctx, gpu.as_ref(), &cases, b, &progress)
            }
            (ValueArg::C64, IndexArg::I64) => {
                run_cases::<Complex<f64>, i64>(cli, &ctx, gpu.as_ref(), &cases, b, &progress)
            }
        };
        let measured = measured.inspect_err(|_| progress.bar.abandon())?;
        own.extend(measured);
    }

    let mut all: Vec<Row> = own.iter().chain(&peers).cloned().collect();
    report::fill_peer_gflops(&mut all);
    print!("{}", report::table(&all));

    if let Some(path) = &cli.csv {
        report::write_csv(path, &own)?;
    }
    if let Some(path) = &cli.json {
        let rep = Report {
            machine: Machine::this(),
            date: report::now_iso(),
            threads,
            rows: own.clone(),
        };
        report::write_json(path, &rep)?;
    }
    #[cfg(feature = "plot")]
    if let Some(path) = &cli.plot {
        plot::plot(&all, path)?;
    }
    Ok(())
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// Output-size prediction: the error and cost of each way of sampling
    /// rows, per matrix (C = A·A or A·Aᵀ).
    Predict(predict::PredictCli),
    /// The selector's features and every CPU algorithm's time per case, as
    /// CSV rows for training the selector.
    SelectorData(selector_data::SelectorDataCli),
    /// Random products of every type, base, op and algorithm checked
    /// against the reference implementation.
    Soak(soak::SoakCli),
    /// Registers, shared memory and spills of every kernel instantiation,
    /// compiled by NVRTC (no GPU needed).
    Kernels(kernels::KernelsCli),
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    let result = match cli.command.take() {
        Some(Command::Predict(c)) => predict::run(c),
        Some(Command::SelectorData(c)) => selector_data::run(c),
        Some(Command::Soak(c)) => soak::run(c),
        Some(Command::Kernels(c)) => kernels::run(c),
        None => run(&cli),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rusparse-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_parses_the_documented_options() {
        let cli = Cli::try_parse_from([
            "rusparse-bench",
            "--product",
            "aat",
            "--algorithm",
            "brmerge-precise",
            "--value",
            "c32",
            "--index",
            "i64",
            "--threads",
            "3",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--peers",
            "a.json",
            "--peers",
            "b.json",
            "stencil2d_5pt:4",
            "x.mtx",
        ])
        .unwrap();
        assert_eq!(cli.product, ProductArg::Aat);
        assert_eq!(cli.algorithm.algorithm(), Algorithm::BrmergePrecise);
        assert_eq!((cli.value, cli.index), (ValueArg::C32, IndexArg::I64));
        assert_eq!((cli.threads, cli.runs, cli.warmup), (Some(3), 2, 0));
        assert_eq!(cli.peers.len(), 2);
        assert_eq!(cli.matrices, ["stencil2d_5pt:4", "x.mtx"]);
        assert!(Cli::try_parse_from(["rusparse-bench", "--runs", "0", "m"]).is_err());
        assert!(Cli::try_parse_from(["rusparse-bench", "--value", "f16", "m"]).is_err());
    }

    #[test]
    fn memory_budgets_parse_as_bytes_or_multiples_of_c() {
        assert_eq!(BudgetArg::parse("1.25c"), Ok(BudgetArg::TimesC(1.25)));
        assert_eq!(BudgetArg::parse("4C"), Ok(BudgetArg::TimesC(4.0)));
        assert_eq!(BudgetArg::parse("512M"), Ok(BudgetArg::Bytes(512 << 20)));
        assert_eq!(BudgetArg::parse("1G"), Ok(BudgetArg::Bytes(1 << 30)));
        assert_eq!(BudgetArg::parse("4 GiB"), Ok(BudgetArg::Bytes(4 << 30)));
        assert_eq!(BudgetArg::parse("4096"), Ok(BudgetArg::Bytes(4096)));
        assert_eq!(BudgetArg::parse("none"), Ok(BudgetArg::None));
        for bad in ["", "c", "-1c", "0c", "infc", "1.5M", "12x", "M"] {
            let e = BudgetArg::parse(bad).unwrap_err();
            assert!(e.contains("not a memory budget"), "{bad}: {e}");
        }
        assert_eq!(BudgetArg::TimesC(1.25).bytes(1000), Some(1250));
        assert_eq!(BudgetArg::Bytes(4096).bytes(1000), Some(4096));
        assert_eq!(BudgetArg::None.bytes(1000), None);
        let parsed = cli(&[
            "--memory-budget",
            "none",
            "--memory-budget",
            "1.25c",
            "--memory-budget",
            "512M",
            "m",
        ]);
        assert_eq!(
            parsed.memory_budget,
            [
                BudgetArg::None,
                BudgetArg::TimesC(1.25),
                BudgetArg::Bytes(512 << 20)
            ]
        );
        assert!(Cli::try_parse_from(["rusparse-bench", "--memory-budget", "lots", "m"]).is_err());
    }

    #[test]
    fn subcommands_are_parsed_and_listed_in_help() {
        let help = Cli::command().render_long_help().to_string();
        for name in ["predict", "selector-data", "soak", "kernels"] {
            assert!(help.contains(name), "--help does not list {name}:\n{help}");
        }
        let parsed = cli(&["predict", "--runs", "2", "stencil2d_5pt:4"]);
        assert!(
            matches!(&parsed.command, Some(Command::Predict(_))),
            "{parsed:?}"
        );
        assert!(parsed.matrices.is_empty());
        let parsed = cli(&["soak", "--cases", "3"]);
        assert!(
            matches!(&parsed.command, Some(Command::Soak(_))),
            "{parsed:?}"
        );
        let parsed = cli(&["selector-data", "--csv", "x.csv", "uniform_r4:10"]);
        assert!(matches!(&parsed.command, Some(Command::SelectorData(_))));
        let parsed = cli(&["kernels", "--all"]);
        assert!(matches!(&parsed.command, Some(Command::Kernels(_))));
        // Without a subcommand, the arguments are matrices to time.
        let parsed = cli(&["--runs", "2", "uniform_r4:10"]);
        assert!(parsed.command.is_none());
        assert_eq!(parsed.matrices, ["uniform_r4:10"]);
        // After the timing's own options a subcommand's name is a matrix
        // (its options are never silently dropped).
        let parsed = cli(&["--runs", "2", "soak"]);
        assert!(parsed.command.is_none());
        assert_eq!(parsed.matrices, ["soak"]);
    }

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("rusparse-bench").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn bad_requests_fail_with_a_message() {
        let e = run(&cli(&[])).unwrap_err();
        assert!(e.contains("no MATRIX"), "{e}");
        let e = run(&cli(&["--product", "ab", "uniform_r4:10"])).unwrap_err();
        assert!(e.contains("needs --b"), "{e}");
        let e = run(&cli(&["--b", "uniform_r4:10", "uniform_r4:10"])).unwrap_err();
        assert!(e.contains("only used with --product ab"), "{e}");
        let e = run(&cli(&["-q", "nope:3"])).unwrap_err();
        assert!(e.contains("unknown family"), "{e}");
        if gpu::device().is_err() {
            // No GPU here: a clear message, no panic; auto falls back to the CPU.
            let e = run(&cli(&["-q", "--backend", "cuda", "uniform_r4:10"])).unwrap_err();
            assert!(e.contains("the CUDA back end is not available: "), "{e}");
            run(&cli(&[
                "-q",
                "--backend",
                "auto",
                "--runs",
                "1",
                "uniform_r4:10",
            ]))
            .unwrap();
        }
        let e = run(&cli(&["-q", "/nonexistent/m.mtx"])).unwrap_err();
        assert!(e.contains("cannot open /nonexistent/m.mtx"), "{e}");
        let e = run(&cli(&["-q", "--from", "/nonexistent/r.json"])).unwrap_err();
        assert!(e.contains("cannot read /nonexistent/r.json"), "{e}");
        // Inner dimensions differ: a library error, named with the case.
        let e = run(&cli(&[
            "-q",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--product",
            "ab",
            "--b",
            "uniform_r4:12",
            "uniform_r4:10",
        ]))
        .unwrap_err();
        assert!(
            e.contains("uniform_r4_10_x_uniform_r4_12: rusparse failed"),
            "{e}"
        );
    }

    #[test]
    #[cfg(feature = "plot")]
    fn end_to_end_json_dump_and_plot_only() {
        let dir = std::env::temp_dir().join(format!("rusparse-bench-e2e-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("r.json");
        let csv = dir.join("r.csv");
        let dump = dir.join("dump");
        let png = dir.join("p.png");
        let s = |p: &PathBuf| p.to_str().unwrap().to_string();
        run(&cli(&[
            "-q",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--threads",
            "2",
            "--json",
            &s(&json),
            "--csv",
            &s(&csv),
            "--dump",
            &s(&dump),
            "stencil2d_5pt:6",
            "fem27_3dof:3",
        ]))
        .unwrap();
        let rows = report::read_rows(&json).unwrap();
        assert_eq!(rows.len(), 2);
        let st = &rows[0];
        assert_eq!(st.matrix, "stencil2d_5pt_6");
        assert_eq!((st.rows, st.nnz_a), (36, 5 * 36 - 4 * 6));
        // C = A² of the 5-point stencil is the 13-point stencil: offset
        // (dx, dy) with |dx| + |dy| <= 2 fits (6 - |dx|)(6 - |dy|) times.
        assert_eq!(st.nnz_c, 36 + 4 * 30 + 4 * 24 + 4 * 25);
        assert_eq!(
            (st.threads, st.value.as_str(), st.index.as_str()),
            (2, "f64", "i32")
        );
        assert!(st.median_s > 0.0 && st.min_s <= st.median_s && st.median_s <= st.max_s);
        assert!(st.gflops > 0.0);
        assert!(!st.algorithm.is_empty());
        let text = std::fs::read_to_string(&json).unwrap();
        assert!(text.contains("\"machine\"") && text.contains("\"date\""));
        assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 3);
        for f in [
            "A_indptr.npy",
            "A_indices.npy",
            "A_data.npy",
            "shape.json",
            "check_x.npy",
            "check_y.npy",
        ] {
            assert!(dump.join("fem27_3dof_3").join(f).exists(), "{f}");
        }
        // Plot only: a peer file of the same schema.
        let peers = dir.join("peers.json");
        std::fs::write(
            &peers,
            r#"{"rows": [{"tool": "scipy", "matrix": "stencil2d_5pt_6", "median_s": 0.001}]}"#,
        )
        .unwrap();
        run(&cli(&[
            "--plot",
            &s(&png),
            "--from",
            &s(&json),
            "--peers",
            &s(&peers),
        ]))
        .unwrap();
        assert!(std::fs::metadata(&png).unwrap().len() > 1000);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
