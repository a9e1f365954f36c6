//! Times `Context::spgemm_into` (the one-call path the Python binding
//! takes) run again and again on one matrix: C's arrays fresh each call.
//!
//!     cargo run --release -p rusparse-bench --example repeat_one_call -- THREADS FILE.mtx[.gz] RUNS [trim] [busy=US] [caller] [ALGORITHM]
//!
//! `trim` empties the context's scratch before each call; `busy=US` keeps
//! the calling thread busy for US microseconds between calls (as a Python
//! program's own work between two products); `caller` makes the calling
//! thread one of the context's threads
//! (`Context::set_num_threads_with_caller`, as the Python binding does);
//! ALGORITHM is auto (the default), hash, dense, brmerge-upper or
//! brmerge-precise. Prints the median, minimum and 90th percentile.
use rusparse::{Algorithm, BackendKind, Context, CsrOutput, CsrView, IndexBase, SpgemmOptions};
use std::time::Instant;

#[path = "../src/matrix_market.rs"]
#[allow(dead_code)]
mod matrix_market;
#[path = "../src/sparse.rs"]
#[allow(dead_code)]
mod sparse;

fn main() -> rusparse::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args[1].parse().unwrap();
    let x = matrix_market::read_path(std::path::Path::new(&args[2]))
        .and_then(|x| x.to_csr::<f64, i32>())
        .expect("a real Matrix Market file");
    let runs: usize = args[3].parse().unwrap();
    let trim = args[4..].iter().any(|s| s == "trim");
    let caller = args[4..].iter().any(|s| s == "caller");
    let busy = args[4..]
        .iter()
        .find_map(|s| s.strip_prefix("busy="))
        .map(|us| std::time::Duration::from_micros(us.parse().expect("busy=MICROSECONDS")));
    let (m, n) = (x.nrows(), x.ncols());
    let (o, c, v) = x.into_parts();
    let mut ctx = Context::new(BackendKind::Cpu)?;
    if caller {
        ctx.set_num_threads_with_caller(threads)?;
    } else {
        ctx.set_num_threads(threads)?;
    }
    let a = CsrView::try_new(m, n, &o, &c, &v, IndexBase::Zero)?;
    let mut opts = SpgemmOptions::default();
    for arg in &args[4..] {
        opts.algorithm = match arg.as_str() {
            "trim" | "caller" => continue,
            s if s.starts_with("busy=") => continue,
            "auto" => Algorithm::Default,
            "hash" => Algorithm::Hash,
            "dense" => Algorithm::Dense,
            "brmerge-upper" => Algorithm::BrmergeUpper,
            "brmerge-precise" => Algorithm::BrmergePrecise,
            other => panic!("unknown argument {other}"),
        };
    }
    let mut times = Vec::new();
    for _ in 0..runs {
        if trim {
            ctx.trim_scratch();
        }
        if let Some(d) = busy {
            let until = Instant::now() + d;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        let t = Instant::now();
        let mut kept = None;
        ctx.spgemm_into(&a, &a, &opts, |rows, nnz| {
            let mut arrays = (
                vec![0i32; rows + 1],
                Vec::<i32>::with_capacity(nnz),
                Vec::<f64>::with_capacity(nnz),
            );
            // SAFETY: the numeric phase writes every entry before anything reads it.
            unsafe {
                arrays.1.set_len(nnz);
                arrays.2.set_len(nnz);
            }
            let p = (
                arrays.0.as_mut_ptr(),
                arrays.1.as_mut_ptr(),
                arrays.2.as_mut_ptr(),
            );
            kept = Some(arrays);
            // SAFETY: the arrays live in `kept` until after the call.
            unsafe {
                Ok(CsrOutput::full(
                    std::slice::from_raw_parts_mut(p.0, rows + 1),
                    std::slice::from_raw_parts_mut(p.1, nnz),
                    std::slice::from_raw_parts_mut(p.2, nnz),
                    IndexBase::Zero,
                ))
            }
        })?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        drop(kept);
    }
    let mut s = times.clone();
    s.sort_by(f64::total_cmp);
    println!(
        "{threads} thread(s){}: median {:.2} ms, min {:.2} ms, 90th percentile {:.2} ms, scratch kept {} MB",
        if trim {
            ", scratch trimmed each call"
        } else {
            ""
        },
        s[s.len() / 2],
        s[0],
        s[s.len() * 9 / 10],
        ctx.scratch_bytes() >> 20
    );
    Ok(())
}
