//! `rusparse-bench predict`: how close and how cheap the output-size
//! prediction is (the sampling predictor), per matrix, for each way of
//! sampling rows.
//!
//! For every case it computes nnz(C) exactly (the symbolic phase), times
//! the whole SpGEMM (plan, symbolic, C's allocation, numeric; median of
//! `--runs`), and runs each sampler of `rusparse::plan::predict` on the
//! same planned operands: the paper's uniform rows, product-weighted
//! positions and rusparse's stratified sample (the default). Cost is the
//! sampler's median time given the per-row products the planner counts
//! anyway, as a share of the SpGEMM's median; `api` is the whole public
//! `predict_nnz` call (operands, row count, sample), for comparison.

use crate::cases::{CaseArgs, SelfProduct};
use crate::sparse::{BenchScalar, SparseMatrix};
use crate::timing::median_seconds;
use clap::Args;
use rusparse::plan::predict::{predict_nnz, NnzPrediction, Sampling};
use rusparse::plan::{OperandPattern, RowWork};
use rusparse::{Complex, Context, CsrMatrix, Op, SpgemmOptions, SpgemmPlan};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Prediction accuracy and cost per matrix (C = A·A or A·Aᵀ).
#[derive(Args, Debug)]
pub struct PredictCli {
    #[command(flatten)]
    cases: CaseArgs,
    /// Timed runs of the SpGEMM and of each sampler.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Write the table as Markdown.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write the measurements as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// The samplers compared, in table order.
const SAMPLERS: [(Sampling, &str); 3] = [
    (Sampling::UniformRows, "paper"),
    (Sampling::ProductWeighted, "weighted"),
    (Sampling::Stratified, "stratified"),
];

/// One sampler on one case.
#[derive(Debug, Clone, serde::Serialize)]
struct SamplerResult {
    sampler: &'static str,
    predicted: u64,
    /// (predicted - exact) / exact.
    error: f64,
    sampled_rows: usize,
    sampled_products: u64,
    exact: bool,
    median_s: f64,
}

/// One case.
#[derive(Debug, Clone, serde::Serialize)]
struct CaseResult {
    matrix: String,
    rows: usize,
    nprod: u64,
    nnz_c: usize,
    spgemm_median_s: f64,
    api_median_s: f64,
    samplers: Vec<SamplerResult>,
}

/// One case, with complex values for complex files (the prediction looks
/// at patterns only; the SpGEMM it is compared with uses the file's type).
fn run_case(
    cli: &PredictCli,
    ctx: &Context,
    name: &str,
    m: &SparseMatrix,
    op_b: Op,
) -> Result<CaseResult, String> {
    if m.is_complex() {
        run_typed::<Complex<f64>>(cli, ctx, name, m, op_b)
    } else {
        run_typed::<f64>(cli, ctx, name, m, op_b)
    }
}

fn run_typed<T: BenchScalar>(
    cli: &PredictCli,
    ctx: &Context,
    name: &str,
    m: &SparseMatrix,
    op_b: Op,
) -> Result<CaseResult, String> {
    let a: CsrMatrix<T, i64, i64> = m.to_csr()?;
    let (av, bv) = (a.view(), a.view());
    let fail = |e: rusparse::Error| format!("{name}: {e}");
    let opts = SpgemmOptions::<T> {
        op_b,
        ..Default::default()
    };
    let mut plan = SpgemmPlan::new(ctx, &av, Op::N, &bv, op_b, opts.algorithm).map_err(fail)?;
    let nnz_c = plan.symbolic(ctx, &av, &bv).map_err(fail)?;
    let nprod = plan.num_products();
    // Warm-up, then the timed SpGEMMs (C's allocation included).
    ctx.spgemm(&av, &bv, &opts).map_err(fail)?;
    let spgemm_median_s = median_seconds(cli.runs, || {
        ctx.spgemm(&av, &bv, &opts).expect("ran once already");
    });
    let api_median_s = median_seconds(cli.runs, || {
        ctx.predict_nnz(&av, &bv, &opts).expect("valid input");
    });
    let pa = OperandPattern::new(&av, Op::N).map_err(fail)?;
    let pb = OperandPattern::new(&bv, op_b).map_err(fail)?;
    let (ra, rb) = (pa.rows(&av), pb.rows(&bv));
    let work = RowWork::new(&ra, &rb, 1).map_err(fail)?;
    let mut samplers = Vec::new();
    for (sampling, label) in SAMPLERS {
        let mut p: Option<NnzPrediction> = None;
        let median_s = ctx.run(|| {
            p = Some(predict_nnz(&ra, &rb, &work, sampling));
            median_seconds(cli.runs, || {
                std::hint::black_box(predict_nnz(&ra, &rb, &work, sampling));
            })
        });
        let p = p.expect("ran");
        samplers.push(SamplerResult {
            sampler: label,
            predicted: p.nnz,
            error: (p.nnz as f64 - nnz_c as f64) / (nnz_c as f64).max(1.0),
            sampled_rows: p.sampled_rows,
            sampled_products: p.sampled_products,
            exact: p.exact,
            median_s,
        });
    }
    Ok(CaseResult {
        matrix: name.to_string(),
        rows: a.nrows(),
        nprod,
        nnz_c,
        spgemm_median_s,
        api_median_s,
        samplers,
    })
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}

/// The Markdown table and the summary lines.
fn table(results: &[CaseResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| matrix | rows | nprod | nnz(C) | SpGEMM ms | paper err % | weighted err % | stratified err % | \
         paper cost % | weighted cost % | stratified cost % | stratified sampled products % | api cost % |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in results {
        let s = |k: usize| &r.samplers[k];
        let cost = |k: usize| pct(s(k).median_s / r.spgemm_median_s);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.2} | {} | {} | {}{} | {} | {} | {} | {} | {} |",
            r.matrix,
            r.rows,
            r.nprod,
            r.nnz_c,
            1e3 * r.spgemm_median_s,
            pct(s(0).error),
            pct(s(1).error),
            pct(s(2).error),
            if s(2).exact { " (exact)" } else { "" },
            cost(0),
            cost(1),
            cost(2),
            pct(s(2).sampled_products as f64 / r.nprod.max(1) as f64),
            pct(r.api_median_s / r.spgemm_median_s),
        );
    }
    let _ = writeln!(out);
    for (k, (_, label)) in SAMPLERS.iter().enumerate() {
        let errs: Vec<f64> = results.iter().map(|r| r.samplers[k].error.abs()).collect();
        let big: Vec<&CaseResult> = results.iter().filter(|r| r.nprod > 1_000_000).collect();
        let costs: Vec<f64> = big
            .iter()
            .map(|r| r.samplers[k].median_s / r.spgemm_median_s)
            .collect();
        let mean = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
        let worst = errs.iter().copied().fold(0.0, f64::max);
        let worst_cost = costs.iter().copied().fold(0.0, f64::max);
        let mean_cost = costs.iter().sum::<f64>() / costs.len().max(1) as f64;
        let _ = writeln!(
            out,
            "- **{label}**: mean |error| {} %, worst {} %; cost on the {} cases with more than 10^6 \
             products: mean {} %, worst {} % of the SpGEMM",
            pct(mean),
            pct(worst),
            big.len(),
            pct(mean_cost),
            pct(worst_cost)
        );
    }
    out
}

/// Runs `rusparse-bench predict`.
pub fn run(cli: PredictCli) -> Result<(), String> {
    let ctx = cli.cases.context()?;
    let mut results = Vec::new();
    for spec in &cli.cases.matrices {
        let SelfProduct {
            name,
            matrix: m,
            op_b,
        } = cli.cases.load(spec)?;
        let r = run_case(&cli, &ctx, &name, &m, op_b)?;
        eprintln!(
            "{name}: nnz(C) {} nprod {} | {}",
            r.nnz_c,
            r.nprod,
            r.samplers
                .iter()
                .map(|s| format!(
                    "{} {:+.2} % ({:.2} % of SpGEMM)",
                    s.sampler,
                    100.0 * s.error,
                    100.0 * s.median_s / r.spgemm_median_s
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        results.push(r);
    }
    let text = table(&results);
    println!(
        "threads {}, {} runs per timing\n\n{text}",
        ctx.num_threads(),
        cli.runs
    );
    if let Some(path) = &cli.markdown {
        std::fs::write(path, &text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &cli.json {
        let json = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
        std::fs::write(path, json).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
