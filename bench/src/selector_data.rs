//! `rusparse-bench selector-data`: the training and evaluation data of the
//! algorithm selector (after the pattern-based selector paper). For every
//! case it writes one CSV row: the product's features
//! (`rusparse::plan::features::FEATURE_NAMES`, as the planner computes
//! them), the median time of every CPU algorithm forced in turn, the
//! automatic choice and its time, and the fastest algorithm.
//!
//! A case is a matrix spec (C = A·A, or A·Aᵀ with `--aat`) or two specs
//! joined by `@` (C = A·B, e.g. `stencil2d_5pt:256@rmat:16:4`, both with
//! 65,536 rows): products of different families.
//!
//! A model trained on these rows (a training script reads the CSV) replaces
//! the written-down rule in `src/plan/select.rs`; rows of matrices the model
//! never saw evaluate it (geomean of auto / best, accuracy, worst loss).

use crate::cases::{CaseArgs, SelfProduct};
use crate::sparse::{BenchScalar, SparseMatrix};
use crate::timing::interleaved_medians;
use clap::Args;
use rusparse::plan::features::{planning_features, FEATURE_NAMES};
use rusparse::plan::{OperandPattern, RowWork};
use rusparse::{Algorithm, Complex, Context, CsrMatrix, Op, SpgemmOptions, SpgemmPlan};
use std::io::Write as _;
use std::path::PathBuf;

/// Features and per-algorithm times for training the selector.
#[derive(Args, Debug)]
pub struct SelectorDataCli {
    #[command(flatten)]
    cases: CaseArgs,
    /// Timed rounds (after one warm-up run of each algorithm); each round
    /// runs every algorithm once, so a slow spell of the machine falls on
    /// all of them.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The CSV to write (appended to when it exists, without a new header).
    #[arg(long, value_name = "FILE")]
    csv: PathBuf,
    /// Write the features only, without timing anything (for adding a new
    /// feature to rows whose times were collected before).
    #[arg(long)]
    features_only: bool,
}

/// The CPU algorithms the selector chooses between, with their CSV names.
const ALGORITHMS: [(Algorithm, &str); 4] = [
    (Algorithm::Hash, "hash"),
    (Algorithm::Dense, "dense"),
    (Algorithm::BrmergePrecise, "brmerge_precise"),
    (Algorithm::BrmergeUpper, "brmerge_upper"),
];

fn header(features_only: bool) -> String {
    let mut cols: Vec<String> = vec!["matrix".into(), "product".into()];
    cols.extend(FEATURE_NAMES.iter().map(|s| s.to_string()));
    if features_only {
        return cols.join(",");
    }
    cols.extend(ALGORITHMS.iter().map(|(_, n)| format!("seconds_{n}")));
    cols.extend(["seconds_auto", "auto_choice", "best"].map(String::from));
    cols.join(",")
}

/// One CSV row (without the newline): C = A·op(B), with B = A when `mb`
/// is `None`.
fn row<T: BenchScalar>(
    cli: &SelectorDataCli,
    ctx: &Context,
    name: &str,
    (ma, mb): (&SparseMatrix, Option<&SparseMatrix>),
    op_b: Op,
) -> Result<String, String> {
    let a: CsrMatrix<T, i64, i64> = ma.to_csr()?;
    let b: Option<CsrMatrix<T, i64, i64>> = mb.map(|m| m.to_csr()).transpose()?;
    let av = a.view();
    let bv = b.as_ref().map_or_else(|| a.view(), |b| b.view());
    let fail = |e: rusparse::Error| format!("{name}: {e}");
    let f = ctx.run(|| -> Result<_, String> {
        let pa = OperandPattern::new(&av, Op::N).map_err(fail)?;
        let pb = OperandPattern::new(&bv, op_b).map_err(fail)?;
        let (ra, rb) = (pa.rows(&av), pb.rows(&bv));
        let work = RowWork::new(&ra, &rb, 1).map_err(fail)?;
        Ok(planning_features(&ra, &rb, &work).1)
    })?;
    let product = match (mb.is_some(), op_b) {
        (true, _) => "ab",
        (false, Op::T) => "aat",
        (false, _) => "aa",
    };
    let mut fields: Vec<String> = vec![name.into(), product.into()];
    fields.extend(f.values.iter().map(|v| format!("{v}")));
    if cli.features_only {
        return Ok(fields.join(","));
    }
    // Every algorithm forced in turn, then the automatic choice: one
    // untimed run each (it also reports errors), then interleaved rounds.
    let configs: Vec<Algorithm> = ALGORITHMS
        .iter()
        .map(|(a, _)| *a)
        .chain([Algorithm::Default])
        .collect();
    let options = |algorithm| SpgemmOptions::<T> {
        op_b,
        algorithm,
        ..Default::default()
    };
    for &algorithm in &configs {
        ctx.spgemm(&av, &bv, &options(algorithm)).map_err(fail)?;
    }
    let mut runners: Vec<Box<dyn FnMut()>> = configs
        .iter()
        .map(|&algorithm| {
            let opts = options(algorithm);
            let (ctx, av, bv) = (ctx, &av, &bv);
            Box::new(move || {
                ctx.spgemm(av, bv, &opts).expect("ran once already");
            }) as Box<dyn FnMut()>
        })
        .collect();
    let mut refs: Vec<&mut dyn FnMut()> = runners.iter_mut().map(|r| &mut **r as _).collect();
    let seconds = interleaved_medians(cli.runs, &mut refs);
    let mut best = ("", f64::INFINITY);
    for ((_, label), &t) in ALGORITHMS.iter().zip(&seconds) {
        if t < best.1 {
            best = (label, t);
        }
        fields.push(format!("{t}"));
    }
    fields.push(format!("{}", seconds[ALGORITHMS.len()]));
    let chosen = SpgemmPlan::new(ctx, &av, Op::N, &bv, op_b, Algorithm::Default)
        .map_err(fail)?
        .selected_algorithm();
    let chosen = ALGORITHMS
        .iter()
        .find(|(a, _)| *a == chosen)
        .map_or("other", |(_, label)| label);
    fields.push(chosen.into());
    fields.push(best.0.into());
    Ok(fields.join(","))
}

/// Runs `rusparse-bench selector-data`.
pub fn run(cli: SelectorDataCli) -> Result<(), String> {
    let ctx = cli.cases.context()?;
    let fresh = !cli.csv.exists();
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&cli.csv)
        .map_err(|e| format!("{}: {e}", cli.csv.display()))?;
    if fresh {
        writeln!(out, "{}", header(cli.features_only)).map_err(|e| e.to_string())?;
    }
    for spec in &cli.cases.matrices {
        let (name, a, b, op_b) = match spec.split_once('@') {
            Some((sa, sb)) => {
                let (a, b) = (cli.cases.load(sa)?, cli.cases.load(sb)?);
                if a.matrix.ncols != b.matrix.nrows {
                    return Err(format!(
                        "{spec}: A has {} columns but B has {} rows",
                        a.matrix.ncols, b.matrix.nrows
                    ));
                }
                let name = format!("{}@{}", a.name, b.name);
                (name, a.matrix, Some(b.matrix), Op::N)
            }
            None => {
                let SelfProduct { name, matrix, op_b } = cli.cases.load(spec)?;
                (name, matrix, None, op_b)
            }
        };
        let operands = (&a, b.as_ref());
        let line = if a.is_complex() || b.as_ref().is_some_and(|b| b.is_complex()) {
            row::<Complex<f64>>(&cli, &ctx, &name, operands, op_b)?
        } else {
            row::<f64>(&cli, &ctx, &name, operands, op_b)?
        };
        if !cli.features_only {
            eprintln!("{name}: best {}", line.rsplit(',').next().unwrap_or("?"));
        }
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_every_column_once() {
        for features_only in [false, true] {
            let h = header(features_only);
            let cols: Vec<&str> = h.split(',').collect();
            let timed = if features_only {
                0
            } else {
                ALGORITHMS.len() + 3
            };
            assert_eq!(cols.len(), 2 + FEATURE_NAMES.len() + timed);
            let mut unique = cols.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), cols.len());
        }
    }
}
