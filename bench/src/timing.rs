//! Timed runs of one product and the counting allocator that measures their
//! peak extra memory.
//!
//! One timed run is exactly the C ABI's path: plan (work estimation),
//! symbolic phase, allocation of C's three arrays, numeric phase
//! ([`Flow::OneCall`]), or, with [`Flow::Reuse`], the reuse flow's first
//! product (structure, then values). Dropping C and the plan happens after
//! the clock stops.

use rusparse::{
    Algorithm, ColumnOrder, Context, CsrMatrix, CsrOutput, CsrView, Index, IndexBase, Op, Scalar,
    SpgemmPlan,
};
use std::time::Instant;

pub use rusparse::memory_meter::{current_bytes, peak_bytes, reset_peak, CountingAllocator};

/// Median, minimum and maximum of a set of run times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// The median (mean of the two middle values for an even count).
    pub median: f64,
    /// The fastest run.
    pub min: f64,
    /// The slowest run.
    pub max: f64,
}

impl Stats {
    /// Statistics of `times`; `None` when empty.
    pub fn of(times: &[f64]) -> Option<Stats> {
        if times.is_empty() {
            return None;
        }
        let mut t = times.to_vec();
        t.sort_by(f64::total_cmp);
        let n = t.len();
        let median = if n % 2 == 1 {
            t[n / 2]
        } else {
            (t[n / 2 - 1] + t[n / 2]) / 2.0
        };
        Some(Stats {
            median,
            min: t[0],
            max: t[n - 1],
        })
    }
}

/// The median of `runs` (at least one) timed calls of `f`, in seconds; no
/// warm-up.
pub fn median_seconds(runs: usize, mut f: impl FnMut()) -> f64 {
    let times: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    Stats::of(&times).expect("at least one run").median
}

/// The median seconds of each of `fs` over `runs` (at least one) rounds;
/// every round calls each of `fs` once, in order, so a slow spell of a
/// shared machine falls on all of them alike rather than on one. No
/// warm-up.
pub fn interleaved_medians(runs: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let mut times = vec![Vec::with_capacity(runs.max(1)); fs.len()];
    for _ in 0..runs.max(1) {
        for (f, t) in fs.iter_mut().zip(&mut times) {
            let start = std::time::Instant::now();
            f();
            t.push(start.elapsed().as_secs_f64());
        }
    }
    times
        .iter()
        .map(|t| Stats::of(t).expect("at least one run").median)
        .collect()
}

/// What the runs of one product measured.
pub struct Measurement<T, I> {
    /// Seconds of each timed run.
    pub times: Vec<f64>,
    /// Seconds of the first run (the first warm-up, or the first timed run
    /// without warm-up).
    pub first_call_s: f64,
    /// The largest peak of bytes beyond those live before a run and C's own
    /// arrays, over the timed runs.
    pub peak_extra_bytes: u64,
    /// The number of scalar products.
    pub nprod: u64,
    /// The concrete algorithm the plan chose.
    pub algorithm: &'static str,
    /// The peak extra bytes of one more, untimed run after the context's
    /// kept scratch was freed, so that everything rusparse holds during
    /// the product is counted (in the timed runs, scratch kept from the
    /// run before is live before the run and so not counted as extra).
    pub peak_extra_cold_bytes: u64,
    /// The memory budget the runs were planned under (`None`: none).
    pub budget: Option<usize>,
    /// The planner's bound of the peak extra bytes (the last timed run).
    pub peak_bound: Option<u64>,
    /// Chunks of rows the plan ran at once (the last timed run).
    pub concurrency: Option<usize>,
    /// C from the last timed run.
    pub c: CsrMatrix<T, I, I>,
}

/// Which of the C ABI's flows a timed run follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// `rusparseSpGEMM_compute` / `rusparseSpGEMM_copy`: plan, symbolic,
    /// allocate C, numeric phase writing C's columns and values.
    OneCall,
    /// cuSPARSE's reuse flow as PETSc's MAT_INITIAL_MATRIX runs it: plan
    /// ([`SpgemmPlan::expect_structure_first`]), symbolic (`reuse_nnz`),
    /// allocate C, C's structure (`reuse_copy`), then C's values on it
    /// (`reuse_compute`).
    Reuse,
    /// The reuse flow's later products, as PETSc's MAT_REUSE_MATRIX runs
    /// them: only C's values on its known structure (`reuse_compute`). The
    /// plan, symbolic phase and structure are made before the clock starts.
    ReuseValues,
}

/// One product, timed.
pub struct Product<'a, T, I> {
    /// The context.
    pub ctx: &'a Context,
    /// Left operand.
    pub a: CsrView<'a, T, I, I>,
    /// Operation on A.
    pub op_a: Op,
    /// Right operand.
    pub b: CsrView<'a, T, I, I>,
    /// Operation on B.
    pub op_b: Op,
    /// Algorithm asked for.
    pub algorithm: Algorithm,
    /// The order of C's columns within each row (the reuse flow always
    /// sorts).
    pub column_order: ColumnOrder,
    /// The flow each run follows.
    pub flow: Flow,
}

/// C of one run, and what the plan told.
struct Run<T, I> {
    seconds: f64,
    c: CsrMatrix<T, I, I>,
    nprod: u64,
    algorithm: &'static str,
    peak_bound: Option<u64>,
    concurrency: Option<usize>,
}

/// The runs of one budget so far in [`Product::measure_budgets`].
struct Variant<T, I> {
    budget: Option<usize>,
    times: Vec<f64>,
    first_call_s: Option<f64>,
    peak_extra: u64,
    peak_extra_cold: u64,
    last: Option<Run<T, I>>,
    error: Option<rusparse::Error>,
}

impl<T: Scalar, I: Index> Product<'_, T, I> {
    /// One run: plan, symbolic, allocate C, numeric (timed), then C's
    /// structure is checked as a matrix outside the clock. C's arrays are
    /// allocated as [`rusparse::Context::spgemm`] allocates them
    /// (transparent huge pages from 4 MiB), as numpy allocates the outputs
    /// of scipy and MKL in `bench/peers.py`; a C program gets the same
    /// from `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`.
    fn run_once(&self) -> Result<Run<T, I>, rusparse::Error> {
        let (a, b) = (&self.a, &self.b);
        let mut start = Instant::now();
        let mut plan = SpgemmPlan::new(self.ctx, a, self.op_a, b, self.op_b, self.algorithm)?;
        if self.flow != Flow::OneCall {
            plan.expect_structure_first();
        }
        let nnz = plan.symbolic(self.ctx, a, b)?;
        let (rows, cols) = plan.shape();
        let (mut ro, mut ci, mut v) = self.ctx.run(|| {
            (
                filled(rows + 1, I::default()),
                filled(nnz, I::default()),
                filled(nnz, T::zero()),
            )
        });
        let out = match self.flow {
            Flow::OneCall => CsrOutput::full(&mut ro, &mut ci, &mut v, IndexBase::Zero)
                .with_column_order(self.column_order),
            Flow::Reuse | Flow::ReuseValues => {
                plan.write_structure(self.ctx, a, b, &mut ro, &mut ci, IndexBase::Zero)?;
                if self.flow == Flow::ReuseValues {
                    // The first reuse_compute (BRMerge-Upper's copies its
                    // temporary C), untimed: the clock covers a later one.
                    let first =
                        CsrOutput::<T, I, I>::values_on_pattern(&mut v, &ci, IndexBase::Zero);
                    plan.numeric(self.ctx, a, b, T::one(), T::zero(), first)?;
                    start = Instant::now();
                }
                CsrOutput::values_on_pattern(&mut v, &ci, IndexBase::Zero)
            }
        };
        plan.numeric(self.ctx, a, b, T::one(), T::zero(), out)?;
        let seconds = start.elapsed().as_secs_f64();
        let nprod = plan.num_products();
        let algorithm = plan.selected_algorithm().name();
        let (peak_bound, concurrency) = (plan.peak_memory_bound(), plan.concurrency());
        drop(plan);
        let c = CsrMatrix::try_from_parts(rows, cols, ro, ci, v, IndexBase::Zero)?;
        Ok(Run {
            seconds,
            c,
            nprod,
            algorithm,
            peak_bound,
            concurrency,
        })
    }

    /// Bytes of C's three arrays, from one untimed product without a
    /// memory budget (the context's budget is restored afterwards).
    pub fn c_bytes_unbudgeted(&self) -> Result<usize, rusparse::Error> {
        let saved = self.ctx.memory_budget();
        self.ctx.set_memory_budget(None);
        let run = self.run_once();
        self.ctx.set_memory_budget(saved);
        Ok(c_bytes(&run?.c))
    }

    /// `warmup` untimed runs, then `runs` timed ones (at least one);
    /// `tick` is called after every run. The context's memory budget
    /// applies.
    pub fn measure(
        &self,
        warmup: usize,
        runs: usize,
        tick: impl FnMut(),
    ) -> Result<Measurement<T, I>, rusparse::Error> {
        let budget = self.ctx.memory_budget();
        self.measure_budgets(&[budget], warmup, runs, tick)
            .pop()
            .expect("one budget")
    }

    /// The product under each of `budgets` (`None`: no memory budget), in
    /// interleaved rounds: `warmup` untimed rounds, then `runs` timed ones
    /// (at least one), every round running each budget once, in order, so
    /// a slow spell of a shared machine falls on all of them alike. `tick`
    /// is called after every round. Then one more untimed run of each
    /// budget after freeing the context's kept scratch
    /// ([`Measurement::peak_extra_cold_bytes`]). A budget whose product fails (e.g.
    /// `ALLOC_FAILED` for one that is too small) stops running and gives
    /// its error; the others go on. The context's budget is set before
    /// each run and restored at the end.
    pub fn measure_budgets(
        &self,
        budgets: &[Option<usize>],
        warmup: usize,
        runs: usize,
        mut tick: impl FnMut(),
    ) -> Vec<Result<Measurement<T, I>, rusparse::Error>> {
        let saved = self.ctx.memory_budget();
        let mut variants: Vec<Variant<T, I>> = budgets
            .iter()
            .map(|&budget| Variant {
                budget,
                times: Vec::with_capacity(runs.max(1)),
                first_call_s: None,
                peak_extra: 0,
                peak_extra_cold: 0,
                last: None,
                error: None,
            })
            .collect();
        // The first product of each budget on this matrix in this process
        // (the context's threads already exist): what a one-off product pays.
        for _ in 0..warmup {
            for v in variants.iter_mut().filter(|v| v.error.is_none()) {
                self.set_budget(v.budget);
                match self.run_once() {
                    Ok(run) => {
                        v.first_call_s.get_or_insert(run.seconds);
                    }
                    Err(e) => v.error = Some(e),
                }
            }
            tick();
        }
        for _ in 0..runs.max(1) {
            for v in variants.iter_mut().filter(|v| v.error.is_none()) {
                self.set_budget(v.budget);
                // Free the previous C first, so it does not count as live input.
                drop(v.last.take());
                let before = current_bytes();
                reset_peak();
                match self.run_once() {
                    Ok(run) => {
                        let c_bytes = c_bytes(&run.c);
                        let extra = peak_bytes().saturating_sub(before).saturating_sub(c_bytes);
                        v.peak_extra = v.peak_extra.max(extra as u64);
                        v.first_call_s.get_or_insert(run.seconds);
                        v.times.push(run.seconds);
                        v.last = Some(run);
                    }
                    Err(e) => v.error = Some(e),
                }
            }
            tick();
        }
        // One more run each, untimed, from no kept scratch.
        for v in variants.iter_mut().filter(|v| v.error.is_none()) {
            self.set_budget(v.budget);
            self.ctx.trim_scratch();
            let before = current_bytes();
            reset_peak();
            match self.run_once() {
                Ok(run) => {
                    let extra = peak_bytes()
                        .saturating_sub(before)
                        .saturating_sub(c_bytes(&run.c));
                    v.peak_extra_cold = extra as u64;
                }
                Err(e) => v.error = Some(e),
            }
        }
        self.set_budget(saved);
        variants
            .into_iter()
            .map(|v| {
                if let Some(e) = v.error {
                    return Err(e);
                }
                let last = v.last.expect("at least one timed run");
                Ok(Measurement {
                    times: v.times,
                    first_call_s: v.first_call_s.expect("at least one run"),
                    peak_extra_bytes: v.peak_extra,
                    peak_extra_cold_bytes: v.peak_extra_cold,
                    nprod: last.nprod,
                    algorithm: last.algorithm,
                    budget: v.budget,
                    peak_bound: last.peak_bound,
                    concurrency: last.concurrency,
                    c: last.c,
                })
            })
            .collect()
    }

    /// Sets the context's memory budget when it differs (setting it also
    /// resets the room of the context's kept scratch).
    fn set_budget(&self, budget: Option<usize>) {
        if self.ctx.memory_budget() != budget {
            self.ctx.set_memory_budget(budget);
        }
    }
}

/// `len` copies of `x` in a vector allocated as rusparse allocates C
/// (transparent huge pages for large arrays, see
/// [`rusparse::advise_huge_pages`]).
fn filled<X: Copy + Send + Sync>(len: usize, x: X) -> Vec<X> {
    // Advised before the first write. (Advising a `vec!` of zeros after
    // `calloc`, so that the numeric phase faults the pages on both
    // threads, measured slower in steady state on the 2-core VM:
    // stencil2d_5pt_725 52 ms against 40 ms.)
    let mut v = Vec::with_capacity(len);
    rusparse::advise_huge_pages(&mut v);
    rusparse::resize_in_parallel(&mut v, len, x);
    v
}

/// Bytes of C's three arrays.
pub fn c_bytes<T, I>(c: &CsrMatrix<T, I, I>) -> usize
where
    T: Scalar,
    I: Index,
{
    std::mem::size_of_val(c.row_offsets())
        + std::mem::size_of_val(c.col_indices())
        + std::mem::size_of_val(c.values())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max() {
        let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Stats::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        let s = Stats::of(&[0.5]).unwrap();
        assert_eq!((s.median, s.min, s.max), (0.5, 0.5, 0.5));
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn a_measured_product_is_correct_and_reports_the_plan() {
        // A = [[1, 2], [0, 3]], A² = [[1, 8], [0, 9]]. nprod: row 0 has
        // a00 * (2 entries of row 0) + a01 * (1 entry of row 1) = 3, row 1 has 1.
        let a = CsrMatrix::<f64, i32, i32>::from_triplets(
            2,
            2,
            &[(0, 0, 1.0), (0, 1, 2.0), (1, 1, 3.0)],
            IndexBase::Zero,
        )
        .unwrap();
        let ctx = Context::cpu().unwrap();
        let p = Product {
            ctx: &ctx,
            a: a.view(),
            op_a: Op::N,
            b: a.view(),
            op_b: Op::N,
            algorithm: Algorithm::Default,
            column_order: ColumnOrder::Sorted,
            flow: Flow::OneCall,
        };
        let mut ticks = 0;
        let m = p.measure(2, 3, || ticks += 1).unwrap();
        assert_eq!(ticks, 5);
        assert_eq!(m.times.len(), 3);
        assert!(m.times.iter().all(|&t| t > 0.0));
        assert_eq!(m.nprod, 4);
        assert_eq!(m.c.values(), &[1.0, 8.0, 9.0]);
        assert_eq!(m.c.col_indices(), &[0, 1, 1]);
        assert!(!m.algorithm.is_empty());
        // A·Aᵀ = [[5, 6], [6, 9]].
        let t = Product { op_b: Op::T, ..p };
        let m = t.measure(0, 1, || {}).unwrap();
        assert_eq!(m.c.values(), &[5.0, 6.0, 6.0, 9.0]);
        // The reuse flows write the same C, for each algorithm.
        for flow in [Flow::Reuse, Flow::ReuseValues] {
            for algorithm in [
                Algorithm::Default,
                Algorithm::Dense,
                Algorithm::BrmergeUpper,
            ] {
                let r = Product {
                    flow,
                    algorithm,
                    ..t
                };
                let m = r.measure(0, 1, || {}).unwrap();
                assert_eq!(
                    m.c.values(),
                    &[5.0, 6.0, 6.0, 9.0],
                    "{flow:?} {algorithm:?}"
                );
                assert_eq!(m.c.col_indices(), &[0, 1, 0, 1], "{flow:?} {algorithm:?}");
            }
        }
    }

    #[test]
    fn budgets_are_measured_side_by_side_and_a_too_small_one_fails() {
        // A tridiagonal matrix: C = A² is pentadiagonal. The memory figures
        // are checked in bench/tests/memory_rows.rs, in a process of their
        // own: the counting allocator is process-wide, and this binary's
        // other tests allocate beside this one.
        let n: usize = 20_000;
        let mut t = Vec::new();
        for i in 0..n {
            for j in i.saturating_sub(1)..(i + 2).min(n) {
                t.push((i, j, 1.0 + (i + j) as f64));
            }
        }
        let a = CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &t, IndexBase::Zero).unwrap();
        let ctx = Context::cpu().unwrap();
        let p = Product {
            ctx: &ctx,
            a: a.view(),
            op_a: Op::N,
            b: a.view(),
            op_b: Op::N,
            algorithm: Algorithm::Default,
            column_order: ColumnOrder::Sorted,
            flow: Flow::OneCall,
        };
        let c_bytes = p.c_bytes_unbudgeted().unwrap();
        assert_eq!(c_bytes, 4 * (n + 1) + 12 * (5 * n - 6));
        let mut rounds = 0;
        let ms = p.measure_budgets(&[None, Some(1 << 30), Some(1)], 1, 2, || rounds += 1);
        assert_eq!(rounds, 3);
        assert_eq!(
            ctx.memory_budget(),
            None,
            "the context's budget is restored"
        );
        let free = ms[0].as_ref().unwrap();
        let roomy = ms[1].as_ref().unwrap();
        assert_eq!((free.budget, roomy.budget), (None, Some(1 << 30)));
        assert_eq!(free.c, roomy.c);
        assert_eq!(roomy.times.len(), 2);
        assert!(roomy.peak_bound.unwrap() <= 1 << 30);
        assert!(roomy.concurrency.unwrap() >= 1);
        match &ms[2] {
            Err(rusparse::Error::AllocFailed(m)) => assert!(m.contains("budget"), "{m}"),
            Err(e) => panic!("a 1-byte budget failed otherwise: {e}"),
            Ok(_) => panic!("a 1-byte budget was met"),
        }
    }
}
