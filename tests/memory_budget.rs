//! The memory budget on the CPU (`Context::set_memory_budget`): every
//! product's real peak beyond A, B and C, measured by a counting global
//! allocator, stays within the planner's bound and within the budget; a
//! budget too small fails before the phases with the smallest budget that
//! works, and that budget then works.
//!
//! The counters are process-wide, so the tests of this file run one at a
//! time (`SERIAL`) and compute everything they compare with outside the
//! measured windows.

mod support;

use rusparse::memory_meter::{current_bytes, peak_bytes, reset_peak, CountingAllocator};
use rusparse::{
    reference, Algorithm, Complex, Context, CsrMatrix, CsrOutput, Error, Index, IndexBase, Op,
    SpgemmPlan,
};
use std::sync::Mutex;
use support::{csr_from_rows, random_rows, Rng, TestValue, CANONICAL, MESSY};

#[global_allocator]
static METER: CountingAllocator = CountingAllocator;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// What one measured product gave.
struct Run<T, I, J> {
    /// C's arrays: offsets, columns, values.
    c: (Vec<I>, Vec<J>, Vec<T>),
    /// The measured peak beyond what was allocated before the plan and C.
    extra: usize,
    bound: u64,
    algorithm: Algorithm,
    concurrency: usize,
}

/// Plans and runs `op(a) * op(b)` as the C ABI does (plan, symbolic, the
/// caller allocates C, numeric), then the numeric phase again on C's known
/// structure (reuse); measures the peak of each window beyond the bytes
/// allocated before it, less C's arrays. On an error, the peak of the
/// failed step is returned with it.
fn run<T: TestValue, I: Index, J: Index>(
    ctx: &Context,
    (a, op_a): (&CsrMatrix<T, I, J>, Op),
    (b, op_b): (&CsrMatrix<T, I, J>, Op),
    algorithm: Algorithm,
) -> Result<Run<T, I, J>, (Error, usize)> {
    let (av, bv) = (a.view(), b.view());
    // The scratch the context kept from earlier products is rusparse's
    // too: it counts against the budget.
    let base = current_bytes() - ctx.scratch_bytes();
    reset_peak();
    let failed = |e: Error| (e, peak_bytes().saturating_sub(base));
    let mut plan = SpgemmPlan::new(ctx, &av, op_a, &bv, op_b, algorithm).map_err(failed)?;
    let nnz = plan.symbolic(ctx, &av, &bv).map_err(failed)?;
    let mut extra = peak_bytes() - base;
    let m = plan.shape().0;
    let mut offsets = vec![I::default(); m + 1];
    let mut cols = vec![J::default(); nnz];
    let mut vals = vec![T::zero(); nnz];
    let c_bytes = (m + 1) * std::mem::size_of::<I>()
        + nnz * (std::mem::size_of::<J>() + std::mem::size_of::<T>());
    reset_peak();
    let out = CsrOutput::full(&mut offsets[..], &mut cols[..], &mut vals[..], a.base());
    plan.numeric(ctx, &av, &bv, T::one(), T::zero(), out)
        .map_err(|e| (e, 0))?;
    extra = extra.max(peak_bytes().saturating_sub(base + c_bytes));
    reset_peak();
    let again = CsrOutput::<T, I, J>::values_on_pattern(&mut vals[..], &cols[..], a.base());
    plan.numeric(ctx, &av, &bv, T::one(), T::zero(), again)
        .map_err(|e| (e, 0))?;
    extra = extra.max(peak_bytes().saturating_sub(base + c_bytes));
    let bound = plan.peak_memory_bound().expect("a CPU plan");
    let algorithm = plan.selected_algorithm();
    let concurrency = plan.concurrency().expect("a CPU plan");
    drop(plan);
    Ok(Run {
        c: (offsets, cols, vals),
        extra,
        bound,
        algorithm,
        concurrency,
    })
}

/// Asserts that `got` equals the reference product exactly (integer
/// values: every sum is exact).
fn assert_reference<T: TestValue, I: Index, J: Index>(
    (a, op_a): (&CsrMatrix<T, I, J>, Op),
    (b, op_b): (&CsrMatrix<T, I, J>, Op),
    got: &(Vec<I>, Vec<J>, Vec<T>),
    what: &str,
) {
    let want = reference::spgemm(&a.view(), op_a, &b.view(), op_b, T::one()).unwrap();
    assert_eq!(got.0, want.row_offsets(), "{what}: row offsets");
    assert_eq!(got.1, want.col_indices(), "{what}: columns");
    // Equal as numbers (a sum that starts from a product 0 · -2 is -0).
    let parts = |v: &[T]| v.iter().map(|x| x.parts()).collect::<Vec<_>>();
    assert_eq!(parts(&got.2), parts(want.values()), "{what}: values");
}

fn value<T: TestValue>(rng: &mut Rng) -> T {
    T::from_parts(rng.below(7) as f64 - 3.0, rng.below(5) as f64 - 2.0)
}

/// A random `nrows x ncols` matrix whose row `i` has about `len(i)`
/// entries, canonical or messy (unsorted, repeated columns).
fn matrix<T: TestValue, I: Index, J: Index>(
    rng: &mut Rng,
    (nrows, ncols): (usize, usize),
    canonical: bool,
    base: IndexBase,
    len: impl Fn(&mut Rng, usize) -> usize,
) -> CsrMatrix<T, I, J> {
    let kind = if canonical { CANONICAL } else { MESSY };
    let rows = random_rows(rng, nrows, ncols, kind, len, value::<T>);
    csr_from_rows(ncols, &rows, base)
}

/// A named product `op(A) * op(B)`: name, A, B, op(A), op(B).
type Case<T, I, J> = (String, CsrMatrix<T, I, J>, CsrMatrix<T, I, J>, Op, Op);

/// The shapes the bound must cover: uniform, power-law rows (one very
/// long), wide (a dense accumulator of a million columns), rectangular,
/// and messy B (unsorted, duplicates), one-based.
fn cases<T: TestValue, I: Index, J: Index>(seed: u64) -> Vec<Case<T, I, J>> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let a = matrix::<T, I, J>(&mut rng, (3000, 3000), true, IndexBase::Zero, |r, _| {
        2 + r.below(8) as usize
    });
    out.push(("uniform".into(), a.clone(), a, Op::N, Op::N));
    let a = matrix::<T, I, J>(&mut rng, (2000, 2000), true, IndexBase::Zero, |r, i| {
        if i % 500 == 0 {
            400
        } else {
            1 + r.below(4) as usize
        }
    });
    out.push(("power-law".into(), a.clone(), a, Op::N, Op::N));
    let a = matrix::<T, I, J>(&mut rng, (400, 2000), true, IndexBase::Zero, |r, _| {
        1 + r.below(6) as usize
    });
    let b = matrix::<T, I, J>(&mut rng, (2000, 1 << 20), true, IndexBase::Zero, |r, _| {
        1 + r.below(6) as usize
    });
    out.push(("wide".into(), a, b, Op::N, Op::N));
    let a = matrix::<T, I, J>(&mut rng, (700, 1500), true, IndexBase::One, |r, _| {
        r.below(9) as usize
    });
    let b = matrix::<T, I, J>(&mut rng, (900, 1500), false, IndexBase::One, |r, _| {
        r.below(9) as usize
    });
    out.push((
        "rectangular, B transposed, messy".into(),
        a,
        b,
        Op::N,
        Op::T,
    ));
    let a = matrix::<T, I, J>(&mut rng, (1200, 800), false, IndexBase::Zero, |r, _| {
        r.below(12) as usize
    });
    out.push(("Aᵀ A, messy".into(), a.clone(), a, Op::T, Op::N));
    out
}

const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::Default,
    Algorithm::Hash,
    Algorithm::Dense,
    Algorithm::BrmergePrecise,
    Algorithm::BrmergeUpper,
];

fn bound_covers<T: TestValue, I: Index, J: Index>(seed: u64) {
    let mut ctx = Context::cpu().unwrap();
    ctx.set_num_threads(3).unwrap();
    for (name, a, b, op_a, op_b) in cases::<T, I, J>(seed) {
        for algorithm in ALGORITHMS {
            let what = format!("{name}, {algorithm:?}, {}", std::any::type_name::<T>());
            ctx.set_memory_budget(None);
            let free = run(&ctx, (&a, op_a), (&b, op_b), algorithm)
                .unwrap_or_else(|(e, _)| panic!("{what}: {e}"));
            assert_reference((&a, op_a), (&b, op_b), &free.c, &what);
            // A budget of exactly the bound keeps the configuration and
            // leaves the kept scratch no room; twice the bound leaves it
            // some. Each after a warm pool (kept buffers count too).
            for budget in [free.bound, 2 * free.bound] {
                ctx.set_memory_budget(Some(budget as usize));
                for round in ["warm", "again"] {
                    let r = run(&ctx, (&a, op_a), (&b, op_b), algorithm)
                        .unwrap_or_else(|(e, _)| panic!("{what}: {e}"));
                    assert!(
                        r.extra as u64 <= budget,
                        "{what} ({round}): measured {} bytes over the budget {budget} ({:?} x{})",
                        r.extra,
                        r.algorithm,
                        r.concurrency
                    );
                    // The same algorithm; under a budget BRMerge-Upper's
                    // temporary C is capped, so its bound can only shrink.
                    assert_eq!(r.algorithm, free.algorithm, "{what}");
                    assert!(
                        r.bound <= free.bound,
                        "{what}: bound {} > {}",
                        r.bound,
                        free.bound
                    );
                    assert_eq!(r.c, free.c, "{what}: the budget changed C");
                }
            }
        }
    }
}

#[test]
fn the_planners_bound_covers_every_algorithm_value_and_index_type() {
    let _g = serial();
    bound_covers::<f64, i32, i32>(1);
    bound_covers::<Complex<f64>, i64, i64>(2);
    bound_covers::<f32, i64, i32>(3);
}

/// The number of bytes that follows `after` in `e`'s message.
fn bytes_after(e: &Error, after: &str) -> Option<u64> {
    let Error::AllocFailed(m) = e else {
        panic!("expected ALLOC_FAILED, got {e:?}");
    };
    support::number_after(m, after)
}

/// The smallest budget a refusal names.
fn smallest_budget(e: &Error) -> u64 {
    bytes_after(e, "smallest budget that would work is ")
        .unwrap_or_else(|| panic!("no smallest budget in {e}"))
}

#[test]
fn budgets_from_ample_to_too_small_are_met_or_refused_with_the_smallest() {
    let _g = serial();
    let mut rng = Rng::new(7);
    let mut ctx = Context::cpu().unwrap();
    ctx.set_num_threads(4).unwrap();
    let wide = matrix::<f64, i32, i32>(&mut rng, (3000, 600_000), true, IndexBase::Zero, |r, _| {
        3 + r.below(6) as usize
    });
    let tall = matrix::<f64, i32, i32>(&mut rng, (600_000, 3000), true, IndexBase::Zero, |r, _| {
        r.below(3) as usize
    });
    let square =
        matrix::<f64, i32, i32>(&mut rng, (20_000, 20_000), true, IndexBase::Zero, |r, _| {
            4 + r.below(8) as usize
        });
    for (name, a, b) in [
        ("square", &square, &square),
        ("long inner dimension", &wide, &tall),
    ] {
        for algorithm in [
            Algorithm::Default,
            Algorithm::Dense,
            Algorithm::BrmergeUpper,
        ] {
            let what = format!("{name}, {algorithm:?}");
            ctx.set_memory_budget(None);
            ctx.trim_scratch();
            let free = run(&ctx, (a, Op::N), (b, Op::N), algorithm)
                .unwrap_or_else(|(e, _)| panic!("{what}: {e}"));
            let c_bytes = (free.c.0.len() * 4 + free.c.1.len() * 12) as u64;
            // Too small: refused, naming the smallest; that one works.
            ctx.set_memory_budget(Some(1 << 10));
            let (e, spent) = run(&ctx, (a, Op::N), (b, Op::N), algorithm)
                .err()
                .unwrap_or_else(|| panic!("{what}: 1 KiB accepted"));
            assert!(spent <= 1 << 10, "{what}: {spent} bytes spent refusing");
            assert!(
                matches!(&e, Error::AllocFailed(m) if m.contains("too small")),
                "{what}: {e}"
            );
            // Going down from 4x C's size: each budget is met, until one
            // is refused with the smallest that works (the refusal at
            // 1 KiB may be planning's, which names no exact smallest).
            for budget in [
                4 * c_bytes,
                c_bytes * 5 / 4,
                c_bytes / 2,
                c_bytes / 8,
                c_bytes / 64,
            ] {
                ctx.set_memory_budget(Some(budget as usize));
                match run(&ctx, (a, Op::N), (b, Op::N), algorithm) {
                    Ok(r) => {
                        assert!(
                            r.extra as u64 <= budget,
                            "{what}: budget {budget}, measured {} ({:?} x{})",
                            r.extra,
                            r.algorithm,
                            r.concurrency
                        );
                        assert!(r.bound <= budget, "{what}: bound {} over {budget}", r.bound);
                        assert_eq!(r.c, free.c, "{what}: budget {budget} changed C");
                    }
                    Err((mut e, spent)) => {
                        assert!(spent as u64 <= budget, "{what}: {spent} spent refusing");
                        // Refused at planning: planning's bound is a lower
                        // bound of the smallest; from there, the phases'.
                        if let Some(planning) = bytes_after(&e, "planning alone may take ") {
                            ctx.set_memory_budget(Some(planning as usize));
                            match run(&ctx, (a, Op::N), (b, Op::N), algorithm) {
                                Ok(r) => {
                                    assert!(r.extra as u64 <= planning, "{what}");
                                    assert_eq!(r.c, free.c, "{what}");
                                    break;
                                }
                                Err((next, _)) => e = next,
                            }
                        }
                        let smallest = smallest_budget(&e);
                        assert!(smallest > budget, "{what}: {smallest} <= {budget}");
                        ctx.set_memory_budget(Some(smallest as usize));
                        let r = run(&ctx, (a, Op::N), (b, Op::N), algorithm)
                            .unwrap_or_else(|(e, _)| panic!("{what}: smallest {smallest}: {e}"));
                        assert!(
                            r.extra as u64 <= smallest,
                            "{what}: {} > {smallest}",
                            r.extra
                        );
                        assert_eq!(r.c, free.c, "{what}: smallest budget changed C");
                        // One byte less is refused.
                        ctx.set_memory_budget(Some(smallest as usize - 1));
                        let e = run(&ctx, (a, Op::N), (b, Op::N), algorithm)
                            .err()
                            .unwrap_or_else(|| panic!("{what}: {} accepted", smallest - 1))
                            .0;
                        assert_eq!(smallest_budget(&e), smallest, "{what}");
                        break;
                    }
                }
            }
        }
    }
    ctx.set_memory_budget(None);
}

#[test]
fn a_budget_of_a_quarter_of_c_runs_fewer_chunks_at_once_or_another_algorithm() {
    let _g = serial();
    let mut rng = Rng::new(11);
    let mut ctx = Context::cpu().unwrap();
    ctx.set_num_threads(4).unwrap();
    // A wide product: the dense accumulator of every thread dwarfs C.
    let a = matrix::<f64, i64, i32>(&mut rng, (64, 1000), true, IndexBase::Zero, |_, _| 2);
    let b = matrix::<f64, i64, i32>(&mut rng, (1000, 1 << 21), true, IndexBase::Zero, |_, _| 2);
    let free = run(&ctx, (&a, Op::N), (&b, Op::N), Algorithm::Dense)
        .unwrap_or_else(|(e, _)| panic!("{e}"));
    assert_eq!(free.concurrency, 4);
    assert!(free.bound > 4 * (1 << 21) * 12, "bound {}", free.bound);
    // Dense on one thread fits; four do not.
    let budget = free.bound / 3;
    ctx.set_memory_budget(Some(budget as usize));
    let r = run(&ctx, (&a, Op::N), (&b, Op::N), Algorithm::Dense)
        .unwrap_or_else(|(e, _)| panic!("{e}"));
    assert!(
        r.concurrency < 4 && r.extra as u64 <= budget,
        "x{} {}",
        r.concurrency,
        r.extra
    );
    assert_eq!(r.algorithm, Algorithm::Dense, "a named algorithm is kept");
    // The automatic choice may take hash instead, on every thread.
    let r = run(&ctx, (&a, Op::N), (&b, Op::N), Algorithm::Default)
        .unwrap_or_else(|(e, _)| panic!("{e}"));
    assert!(r.extra as u64 <= budget);
    assert_eq!((r.algorithm, r.concurrency), (Algorithm::Hash, 4));
    assert_reference((&a, Op::N), (&b, Op::N), &r.c, "hash under the budget");
    ctx.set_memory_budget(None);
}
