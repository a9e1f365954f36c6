//! Where a short-row product's time goes, without Python or a peer's
//! process in the way: rusparse's phases (plan, symbolic, numeric) against
//! scipy's algorithm (`csr_matmat`: a count pass with a mask, then a
//! numeric pass with a linked list of the row's columns; output unsorted)
//! written plainly in Rust, both on one matrix, C's arrays allocated and
//! touched once outside the timing. The matrix is the 5-point stencil on an
//! n × n grid (stencil2d_5pt_n: 5 entries a row, 25 products into 13).
//!
//!     cargo run --release -p rusparse-bench --example phases_vs_gustavson -- [threads] [n] [runs]
//!     cargo run --release -p rusparse-bench --example phases_vs_gustavson -- [threads] FILE.mtx[.gz] [runs]
//!
//! With a Matrix Market file in place of n, the product is that matrix
//! squared (real values; a square matrix). A fourth argument names the
//! algorithm (hash, brmerge-precise, brmerge-upper, dense; default: the
//! planner's choice, `auto`), and a fifth, a second Matrix Market file,
//! makes the product A·B (GAMG's A·P, say).
//!
//! Also times the reuse flow's phases (`symbolic`, `write_structure`, then
//! the values alone on that structure, the patterns vouched for by the
//! caller) with and without `expect_structure_first`, those values again
//! with C split between two arrays (the PETSc plug-in's MPI route writes
//! a rank's rows into its two blocks), and PETSc's numeric
//! phase on that structure (`MatMatMultNumeric_SeqAIJ_SeqAIJ_Sorted`,
//! written plainly in Rust). Prints the minimum over the runs of each
//! phase, in ms.

use rusparse::{
    Algorithm, BackendKind, Context, CsrOutput, CsrView, IndexBase, Op, PatternCheck, SpgemmPlan,
};
use std::time::Instant;

// The benchmark's own reader, shared with its binary.
#[path = "../src/matrix_market.rs"]
#[allow(dead_code)]
mod matrix_market;
#[path = "../src/sparse.rs"]
#[allow(dead_code)]
mod sparse;

/// The 5-point stencil on an n × n grid (zero-based CSR pattern).
fn stencil(n: usize) -> (Vec<i32>, Vec<i32>) {
    let mut offsets = vec![0i32];
    let mut cols = Vec::new();
    for y in 0..n {
        for x in 0..n {
            let (i, w) = ((y * n + x) as i32, n as i32);
            let neighbours = [
                (y > 0, i - w),
                (x > 0, i - 1),
                (true, i),
                (x + 1 < n, i + 1),
                (y + 1 < n, i + w),
            ];
            cols.extend(neighbours.iter().filter(|(on, _)| *on).map(|&(_, c)| c));
            offsets.push(cols.len() as i32);
        }
    }
    (offsets, cols)
}

#[path = "support/petsc_loop.rs"]
mod petsc_loop;
use petsc_loop::{petsc_numeric, Csr};

/// scipy's count pass: the number of entries of C = A·B.
fn gustavson_count(a: &Csr, b: &Csr) -> usize {
    let (offsets, cols, m) = (&a.0, &a.1, a.3);
    let mut mask = vec![usize::MAX; b.4];
    let mut nnz = 0;
    for i in 0..m {
        for &j in &cols[offsets[i] as usize..offsets[i + 1] as usize] {
            let j = j as usize;
            for &k in &b.1[b.0[j] as usize..b.0[j + 1] as usize] {
                let k = k as usize;
                if mask[k] != i {
                    mask[k] = i;
                    nnz += 1;
                }
            }
        }
    }
    nnz
}

/// scipy's numeric pass into C's arrays (rows unsorted).
fn gustavson_numeric(
    a: &Csr,
    b: &Csr,
    (c_offsets, c_cols, c_vals): (&mut [i32], &mut [i32], &mut [f64]),
) {
    let (offsets, cols, vals, m) = (&a.0, &a.1, &a.2, a.3);
    let mut next = vec![-1i64; b.4];
    let mut sums = vec![0f64; b.4];
    let mut nnz = 0usize;
    c_offsets[0] = 0;
    for i in 0..m {
        let (mut head, mut length) = (-2i64, 0);
        for jj in offsets[i] as usize..offsets[i + 1] as usize {
            let (j, v) = (cols[jj] as usize, vals[jj]);
            for kk in b.0[j] as usize..b.0[j + 1] as usize {
                let k = b.1[kk] as usize;
                sums[k] += v * b.2[kk];
                if next[k] == -1 {
                    next[k] = head;
                    head = k as i64;
                    length += 1;
                }
            }
        }
        for _ in 0..length {
            let h = head as usize;
            c_cols[nnz] = h as i32;
            c_vals[nnz] = sums[h];
            nnz += 1;
            head = next[h];
            next[h] = -1;
            sums[h] = 0.0;
        }
        c_offsets[i + 1] = nnz as i32;
    }
}

fn main() -> rusparse::Result<()> {
    let arg = |k: usize, default: usize| {
        std::env::args()
            .nth(k)
            .map_or(default, |s| s.parse().expect("a number"))
    };
    let (threads, runs) = (arg(1, 1), arg(3, 20).max(1));
    let algorithm = match std::env::args().nth(4).as_deref() {
        None | Some("auto") => Algorithm::Default,
        Some("hash") => Algorithm::Hash,
        Some("brmerge-precise") => Algorithm::BrmergePrecise,
        Some("brmerge-upper") => Algorithm::BrmergeUpper,
        Some("dense") => Algorithm::Dense,
        Some(other) => panic!("unknown algorithm {other}"),
    };
    let matrix = std::env::args()
        .nth(2)
        .filter(|s| s.parse::<usize>().is_err());
    let read = |path: &str| -> (String, Csr) {
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        (name, petsc_loop::read(path))
    };
    let (name, ma) = match matrix {
        Some(path) => read(&path),
        None => {
            let n = arg(2, 725);
            let (offsets, cols) = stencil(n);
            let vals: Vec<f64> = (0..cols.len()).map(|k| 1.0 + (k % 7) as f64).collect();
            (
                format!("stencil2d_5pt_{n}"),
                (offsets, cols, vals, n * n, n * n),
            )
        }
    };
    let (name, mb) = match std::env::args().nth(5) {
        Some(path) => {
            let (b_name, mb) = read(&path);
            (format!("{name} · {b_name}"), mb)
        }
        None => (name, ma.clone()),
    };
    assert_eq!(ma.4, mb.3, "A's columns and B's rows differ");
    let m = ma.3;
    let nnz = gustavson_count(&ma, &mb);
    let mut c = (vec![0i32; m + 1], vec![0i32; nnz], vec![0f64; nnz]);

    let mut ctx = Context::new(BackendKind::Cpu)?;
    ctx.set_num_threads(threads)?;
    let a = CsrView::try_new(ma.3, ma.4, &ma.0, &ma.1, &ma.2, IndexBase::Zero)?;
    let b = CsrView::try_new(mb.3, mb.4, &mb.0, &mb.1, &mb.2, IndexBase::Zero)?;
    let chosen = SpgemmPlan::new(&ctx, &a, Op::N, &b, Op::N, algorithm)?.selected_algorithm();
    let mut rusparse = [f64::MAX; 4];
    let mut plain = [f64::MAX; 3];
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    // PHASES_ONLY=plugin times the plug-in's symbolic phase alone (for
    // profiles of it).
    let plugin_only = std::env::var("PHASES_ONLY").is_ok_and(|v| v == "plugin");
    let other_runs = if plugin_only { 0 } else { runs };
    for _ in 0..other_runs {
        let t0 = Instant::now();
        let mut plan = SpgemmPlan::new(&ctx, &a, Op::N, &b, Op::N, algorithm)?;
        let planned = ms(t0);
        let t1 = Instant::now();
        plan.symbolic(&ctx, &a, &b)?;
        let symbolic = ms(t1);
        let t2 = Instant::now();
        let out = CsrOutput::full(&mut c.0, &mut c.1, &mut c.2, IndexBase::Zero);
        plan.numeric(&ctx, &a, &b, 1.0, 0.0, out)?;
        let numeric = ms(t2);
        for (best, t) in rusparse
            .iter_mut()
            .zip([planned, symbolic, numeric, ms(t0)])
        {
            *best = best.min(t);
        }

        let t0 = Instant::now();
        std::hint::black_box(gustavson_count(&ma, &mb));
        let count = ms(t0);
        let t1 = Instant::now();
        let arrays = (&mut c.0[..], &mut c.1[..], &mut c.2[..]);
        gustavson_numeric(&ma, &mb, arrays);
        let numeric = ms(t1);
        for (best, t) in plain.iter_mut().zip([count, numeric, ms(t0)]) {
            *best = best.min(t);
        }
    }
    // The reuse flow's symbolic phases (cuSPARSE's reuse_nnz, reuse_copy):
    // counted, then listed by a second pass; or listed once as counted
    // (expect_structure_first) and copied.
    // Then the values alone on the written structure (reuse_compute),
    // with the patterns vouched for by the caller.
    let mut reuse = [[f64::MAX; 6]; 2];
    for _ in 0..other_runs {
        for (keep, best) in reuse.iter_mut().enumerate() {
            let mut plan = SpgemmPlan::new(&ctx, &a, Op::N, &b, Op::N, algorithm)?;
            if keep == 1 {
                plan.expect_structure_first();
            }
            plan.set_pattern_check(PatternCheck::Caller);
            let t0 = Instant::now();
            plan.symbolic(&ctx, &a, &b)?;
            let symbolic = ms(t0);
            let t1 = Instant::now();
            plan.write_structure(&ctx, &a, &b, &mut c.0, &mut c.1, IndexBase::Zero)?;
            let structure = ms(t1);
            let t2 = Instant::now();
            let out =
                CsrOutput::<f64, i32, i32>::values_on_pattern(&mut c.2, &c.1, IndexBase::Zero);
            plan.numeric(&ctx, &a, &b, 1.0, 0.0, out)?;
            let first = ms(t2);
            // Values again (MAT_REUSE_MATRIX): the first values may be the
            // symbolic phase's, copied.
            let t3 = Instant::now();
            let out =
                CsrOutput::<f64, i32, i32>::values_on_pattern(&mut c.2, &c.1, IndexBase::Zero);
            plan.numeric(&ctx, &a, &b, 1.0, 0.0, out)?;
            let again = ms(t3);
            // And twice more: the positions of C's products recorded by
            // the third call (expect_structure_first, when that pays), and
            // replayed by the fourth.
            let mut later = [0.0; 2];
            for t in &mut later {
                let t4 = Instant::now();
                let out =
                    CsrOutput::<f64, i32, i32>::values_on_pattern(&mut c.2, &c.1, IndexBase::Zero);
                plan.numeric(&ctx, &a, &b, 1.0, 0.0, out)?;
                *t = ms(t4);
            }
            let times = [symbolic, structure, first, again, later[0], later[1]];
            for (b, t) in best.iter_mut().zip(times) {
                *b = b.min(t);
            }
        }
    }
    // The values again with C's values split between two arrays (PETSc's
    // diagonal and off-diagonal blocks on the plug-in's MPI route): the
    // last entry of 64 rows in every 4,096 in the second (a rank's rows
    // with other ranks' columns), the rest in the first; and in one array,
    // alternating which goes second, each on a plan's second and third
    // call.
    let (first_offsets, second_offsets) = {
        let (mut f, mut s) = (vec![0i32], vec![0i32]);
        for i in 0..c.0.len() - 1 {
            let len = c.0[i + 1] - c.0[i];
            let tail = i32::from(i % 4096 < 64 && len > 0);
            f.push(f[i] + len - tail);
            s.push(s[i] + tail);
        }
        (f, s)
    };
    let mut first = vec![0f64; *first_offsets.last().unwrap_or(&0) as usize];
    let mut second = vec![0f64; *second_offsets.last().unwrap_or(&0) as usize];
    let mut split_or_one = [f64::MAX; 2];
    for run in 0..other_runs {
        let mut plan = SpgemmPlan::new(&ctx, &a, Op::N, &b, Op::N, algorithm)?;
        plan.expect_structure_first();
        plan.set_pattern_check(PatternCheck::Caller);
        plan.symbolic(&ctx, &a, &b)?;
        plan.write_structure(&ctx, &a, &b, &mut c.0, &mut c.1, IndexBase::Zero)?;
        let out = CsrOutput::<f64, i32, i32>::values_on_pattern(&mut c.2, &c.1, IndexBase::Zero);
        plan.numeric(&ctx, &a, &b, 1.0, 0.0, out)?;
        for turn in 0..2 {
            let split = (run + turn) % 2 == 0;
            let t0 = Instant::now();
            let out = match split {
                true => {
                    let parts = rusparse::SplitValues {
                        first_offsets: &first_offsets[..],
                        first: &mut first[..],
                        second_offsets: &second_offsets[..],
                        second: &mut second[..],
                    };
                    CsrOutput::<f64, i32, i32>::split_values_on_pattern(
                        parts,
                        &c.1,
                        IndexBase::Zero,
                    )
                }
                false => {
                    CsrOutput::<f64, i32, i32>::values_on_pattern(&mut c.2, &c.1, IndexBase::Zero)
                }
            };
            plan.numeric(&ctx, &a, &b, 1.0, 0.0, out)?;
            let t = &mut split_or_one[usize::from(!split)];
            *t = t.min(ms(t0));
        }
    }
    println!(
        "values again, C split between two arrays {:.2}, in one {:.2}",
        split_or_one[0], split_or_one[1]
    );
    // PETSc's own numeric phase, written plainly, on the structure the
    // reuse flow wrote (like for like with "values again").
    let mut petsc = f64::MAX;
    let mut dense = vec![0f64; mb.4];
    for _ in 0..other_runs {
        let t0 = Instant::now();
        petsc_numeric(&ma, &mb, (&c.0, &c.1, &mut c.2), &mut dense);
        petsc = petsc.min(ms(t0));
    }
    // The PETSc plug-in's symbolic phase: the plan (the patterns vouched
    // for), C listed with its values, then structure and values written
    // in one call (rusparseSpGEMM_setReuseCopyValues).
    let mut plugin = [f64::MAX; 4];
    for _ in 0..runs {
        let t0 = Instant::now();
        let mut plan = SpgemmPlan::new(&ctx, &a, Op::N, &b, Op::N, algorithm)?;
        plan.set_pattern_check(PatternCheck::Caller);
        plan.expect_structure_first();
        plan.expect_values_with_structure();
        let planned = ms(t0);
        let t1 = Instant::now();
        plan.symbolic(&ctx, &a, &b)?;
        let symbolic = ms(t1);
        let t2 = Instant::now();
        let arrays = (&mut c.0[..], &mut c.1[..], &mut c.2[..]);
        plan.write_structure_with_values(&ctx, &a, &b, arrays, IndexBase::Zero)?;
        let written = ms(t2);
        for (best, t) in plugin.iter_mut().zip([planned, symbolic, written, ms(t0)]) {
            *best = best.min(t);
        }
    }
    if plugin_only {
        println!(
            "{name} ({m} rows, nnz(C) {nnz}), f64, minimum of {runs} runs, ms\n\
             the PETSc plug-in's symbolic phase (values listed with the structure): plan {:.2}  listing {:.2}  structure and values {:.2}  total {:.2}",
            plugin[0], plugin[1], plugin[2], plugin[3]
        );
        return Ok(());
    }
    println!(
        "{name} ({m} rows, nnz(C) {nnz}), f64, minimum of {runs} runs, ms\n\
         the PETSc plug-in's symbolic phase (values listed with the structure): plan {:.2}  listing {:.2}  structure and values {:.2}  total {:.2}\n\
         rusparse's reuse flow, structure listed again: symbolic {:.2}  structure {:.2}  values {:.2}\n\
         rusparse's reuse flow, structure kept (expect_structure_first): symbolic {:.2}  structure {:.2}  values {:.2}  values again {:.2}  third (records) {:.2}  fourth (replays) {:.2}\n\
         rusparse, {threads} thread(s), {chosen:?}: plan {:.2}  symbolic {:.2}  numeric {:.2}  total {:.2}\n\
         scipy's algorithm in Rust, 1 thread: count {:.2}  numeric {:.2}  total {:.2}\n\
         PETSc's numeric phase on the known structure, in Rust, 1 thread: {petsc:.2}",
        plugin[0],
        plugin[1],
        plugin[2],
        plugin[3],
        reuse[0][0],
        reuse[0][1],
        reuse[0][2],
        reuse[1][0],
        reuse[1][1],
        reuse[1][2],
        reuse[1][3],
        reuse[1][4],
        reuse[1][5],
        rusparse[0],
        rusparse[1],
        rusparse[2],
        rusparse[3],
        plain[0],
        plain[1],
        plain[2]
    );
    Ok(())
}
