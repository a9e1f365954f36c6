//! What the subcommands (`predict`, `selector-data`) share: their cases,
//! C = A·A or, for matrices named by `--aat`, C = A·Aᵀ, and their CPU
//! context.

use crate::generate::Spec;
use crate::sparse::SparseMatrix;
use rusparse::{Context, Op};

/// The subcommands' common options: which cases, on how many threads.
#[derive(clap::Args, Debug)]
pub struct CaseArgs {
    /// Matrices A: generator specs or .mtx / .mtx.gz paths (as for the
    /// main command).
    #[arg(value_name = "MATRIX", required = true)]
    pub matrices: Vec<String>,
    /// C = A·Aᵀ instead of A·A for the matrices whose spec contains one of
    /// these (repeatable; e.g. lp_ for rectangular LP matrices).
    #[arg(long = "aat", value_name = "SUBSTRING")]
    pub aat: Vec<String>,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seed of the generators.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

impl CaseArgs {
    /// The CPU context these options ask for.
    pub fn context(&self) -> Result<Context, String> {
        cpu_context(self.threads)
    }
    /// Loads the case of `spec` (see [`load_self_product`]).
    pub fn load(&self, spec: &str) -> Result<SelfProduct, String> {
        load_self_product(spec, &self.aat, self.seed)
    }
}

/// One product of a matrix with itself.
pub struct SelfProduct {
    /// The case name: the spec's safe name, `_aat` appended for A·Aᵀ.
    pub name: String,
    /// A.
    pub matrix: SparseMatrix,
    /// `Op::T` for A·Aᵀ, else `Op::N`.
    pub op_b: Op,
}

/// Loads (or generates, with `seed`) the matrix of `spec`; the product is
/// A·Aᵀ when `spec` contains one of `aat`.
pub fn load_self_product(spec: &str, aat: &[String], seed: u64) -> Result<SelfProduct, String> {
    let parsed = Spec::parse(spec)?;
    let mut name = parsed.safe_name();
    let transposed = aat.iter().any(|s| spec.contains(s.as_str()));
    if transposed {
        name.push_str("_aat");
    }
    let matrix = match &parsed {
        Spec::File(path) => crate::matrix_market::read_path(path)?,
        other => other.generate(seed)?,
    };
    Ok(SelfProduct {
        name,
        matrix,
        op_b: if transposed { Op::T } else { Op::N },
    })
}

/// A CPU context with `threads` threads (all cores when `None`).
pub fn cpu_context(threads: Option<usize>) -> Result<Context, String> {
    let mut ctx = Context::new(rusparse::BackendKind::Cpu).map_err(|e| e.to_string())?;
    if let Some(t) = threads {
        ctx.set_num_threads(t)
            .map_err(|e| format!("--threads {t}: {e}"))?;
    }
    Ok(ctx)
}
