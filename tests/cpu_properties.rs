//! Property tests of the CPU back end against `rusparse::reference::spgemm`
//! (and, for integer-valued inputs, against an independent dense product).
//!
//! Every property runs for every value type (`f32`, `f64`, `Complex<f32>`,
//! `Complex<f64>`) and every index combination (`i32/i32`, `i64/i64`,
//! `i64` offsets with `i32` columns, `i32` offsets with `i64` columns): the
//! `combinations!` macro at the end makes one module per combination.
//!
//! Inputs are generated with both index bases, every `op_a` / `op_b` in
//! `N`, `T`, `C`, shapes from 0x0 up to 40 (rectangular, with zero rows or
//! columns), empty rows and runs of empty rows, an optional dense row,
//! duplicate entries and unsorted columns within a row. Values are small
//! integers, so sums are exact and results are compared with `assert_eq`,
//! except in the tolerance and determinism properties, which use random
//! non-integer values.

mod support;

use proptest::prelude::*;
use proptest::sample::Index as Pick;
use proptest::test_runner::TestCaseError;
use rusparse::plan::operand::{renumbers_inner, RENUMBER_INNER_FROM};
use rusparse::{
    reference, validate_structure, Algorithm, ColumnOrder, Complex, Context, CsrMatrix, CsrOutput,
    CsrView, Error, Index, IndexBase, Op, PatternCheck, Scalar, SpgemmOptions, SpgemmPlan,
    SplitValues,
};
use std::fmt::Debug;
use std::sync::OnceLock;
use support::TestValue;

type TestResult = Result<(), TestCaseError>;

/// Largest dimension of a generated operand.
const MAX_DIM: usize = 40;

/// A property's configuration: its own cases from a fixed seed (see
/// `support::proptest_config`).
fn config(cases: u32, name: &str) -> ProptestConfig {
    support::proptest_config(cases, 0x5EED_C0DE_2026, name)
}

// ---------------------------------------------------------------------------
// Value types
// ---------------------------------------------------------------------------

/// A generated value, independent of the value type under test.
trait Val: Clone + Debug + 'static {
    fn to<T: TestValue>(&self) -> T;
}

/// A small integer-valued (complex) number: sums of products are exact.
type IntV = (i8, i8);
/// A random non-integer (complex) number.
type FltV = (f64, f64);

impl Val for IntV {
    fn to<T: TestValue>(&self) -> T {
        T::from_parts(self.0 as f64, self.1 as f64)
    }
}

impl Val for FltV {
    fn to<T: TestValue>(&self) -> T {
        T::from_parts(self.0, self.1)
    }
}

fn int_value() -> BoxedStrategy<IntV> {
    (-4i8..=4, -4i8..=4).boxed()
}

/// Integer alpha, including 0 (often) and negative values.
fn int_alpha() -> BoxedStrategy<IntV> {
    prop_oneof![1 => Just((0i8, 0i8)), 1 => Just((-1, 0)), 4 => (-3i8..=3, -3i8..=3)].boxed()
}

/// Integer beta with a non-zero real part (so it is non-zero for every type).
fn int_beta() -> BoxedStrategy<IntV> {
    (-3i8..=3, -3i8..=3)
        .prop_filter("beta must be non-zero", |b| b.0 != 0)
        .boxed()
}

fn float_value() -> BoxedStrategy<FltV> {
    prop_oneof![
        4 => (-1.0f64..1.0, -1.0f64..1.0),
        1 => (-1e3f64..1e3, -1e-3f64..1e-3),
    ]
    .boxed()
}

fn float_alpha() -> BoxedStrategy<FltV> {
    prop_oneof![1 => Just((0.0, 0.0)), 1 => Just((1.0, 0.0)), 4 => (-3.0f64..3.0, -3.0f64..3.0)]
        .boxed()
}

// ---------------------------------------------------------------------------
// Generated problems
// ---------------------------------------------------------------------------

/// Positions of the stored entries of one operand, in stored order within
/// each row (so unsorted and repeated columns occur).
#[derive(Clone, Debug)]
struct Pattern {
    nrows: usize,
    ncols: usize,
    entries: Vec<(usize, usize)>,
}

fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(0usize),
        1 => Just(1usize),
        4 => 2..=8usize,
        2 => 9..=MAX_DIM,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![Just(Op::N), Just(Op::T), Just(Op::C)]
}

fn base() -> impl Strategy<Value = IndexBase> {
    prop_oneof![Just(IndexBase::Zero), Just(IndexBase::One)]
}

fn algorithm() -> impl Strategy<Value = Algorithm> {
    prop::sample::select(Algorithm::all().to_vec())
}

/// The stored shape of an operand whose `op` is `rows x cols`.
fn stored(op: Op, rows: usize, cols: usize) -> (usize, usize) {
    if op.transposes() {
        (cols, rows)
    } else {
        (rows, cols)
    }
}

/// A random pattern: random positions (unsorted, possibly repeated), an
/// optional dense row (columns in decreasing order), extra copies of some
/// entries, an optional run of emptied rows, sometimes sorted.
fn pattern(nrows: usize, ncols: usize) -> BoxedStrategy<Pattern> {
    if nrows == 0 || ncols == 0 {
        return Just(Pattern {
            nrows,
            ncols,
            entries: Vec::new(),
        })
        .boxed();
    }
    let max_random = (nrows * ncols).min(2 * (nrows + ncols)).min(100);
    (
        prop::collection::vec((0..nrows, 0..ncols), 0..=max_random),
        prop::option::weighted(0.25, 0..nrows),
        prop::collection::vec(any::<Pick>(), 0..4),
        prop::option::weighted(0.3, (any::<Pick>(), any::<Pick>())),
        prop::bool::weighted(0.2),
    )
        .prop_map(move |(mut entries, dense, dups, empty, sort)| {
            if let Some((lo, hi)) = empty {
                let (lo, hi) = (lo.index(nrows), hi.index(nrows));
                let (lo, hi) = (lo.min(hi), lo.max(hi));
                entries.retain(|&(r, _)| r < lo || r > hi);
            }
            if let Some(r) = dense {
                entries.extend((0..ncols).rev().map(|c| (r, c)));
            }
            if !entries.is_empty() {
                for d in dups {
                    let e = entries[d.index(entries.len())];
                    entries.push(e);
                }
            }
            if sort {
                entries.sort_unstable();
            }
            Pattern {
                nrows,
                ncols,
                entries,
            }
        })
        .boxed()
}

/// `alpha * op_a(A) * op_b(B)` with `op_a(A)` of shape `m x ka` and
/// `op_b(B)` of shape `kb x n` (`ka == kb` except in the mismatch property),
/// two value sets on the same pattern, and a beta.
#[derive(Clone, Debug)]
struct Problem<V> {
    m: usize,
    ka: usize,
    kb: usize,
    n: usize,
    op_a: Op,
    op_b: Op,
    base: IndexBase,
    algorithm: Algorithm,
    a: Pattern,
    b: Pattern,
    a_vals: Vec<V>,
    b_vals: Vec<V>,
    a_vals2: Vec<V>,
    b_vals2: Vec<V>,
    alpha: V,
    beta: V,
}

type Header = (usize, usize, usize, usize, Op, Op, IndexBase, Algorithm);

fn problem_from<V: Val>(
    header: BoxedStrategy<Header>,
    val: BoxedStrategy<V>,
    alpha: BoxedStrategy<V>,
    beta: BoxedStrategy<V>,
) -> BoxedStrategy<Problem<V>> {
    header
        .prop_flat_map(|h| {
            let (m, ka, kb, n, op_a, op_b, _, _) = h;
            let (ar, ac) = stored(op_a, m, ka);
            let (br, bc) = stored(op_b, kb, n);
            (Just(h), pattern(ar, ac), pattern(br, bc))
        })
        .prop_flat_map(move |(h, a, b)| {
            let (la, lb) = (a.entries.len(), b.entries.len());
            (
                Just(h),
                Just(a),
                Just(b),
                prop::collection::vec(val.clone(), la),
                prop::collection::vec(val.clone(), lb),
                prop::collection::vec(val.clone(), la),
                prop::collection::vec(val.clone(), lb),
                alpha.clone(),
                beta.clone(),
            )
        })
        .prop_map(|(h, a, b, a_vals, b_vals, a_vals2, b_vals2, alpha, beta)| {
            let (m, ka, kb, n, op_a, op_b, base, algorithm) = h;
            Problem {
                m,
                ka,
                kb,
                n,
                op_a,
                op_b,
                base,
                algorithm,
                a,
                b,
                a_vals,
                b_vals,
                a_vals2,
                b_vals2,
                alpha,
                beta,
            }
        })
        .boxed()
}

/// Shapes whose inner dimensions agree.
fn matching_header() -> BoxedStrategy<Header> {
    (dim(), dim(), dim(), op(), op(), base(), algorithm())
        .prop_map(|(m, k, n, op_a, op_b, base, alg)| (m, k, k, n, op_a, op_b, base, alg))
        .boxed()
}

/// Shapes whose inner dimensions differ.
fn mismatched_header() -> BoxedStrategy<Header> {
    (
        dim(),
        dim(),
        1..=3usize,
        any::<bool>(),
        dim(),
        op(),
        op(),
        base(),
    )
        .prop_map(|(m, k, d, a_larger, n, op_a, op_b, base)| {
            let (ka, kb) = if a_larger { (k + d, k) } else { (k, k + d) };
            (m, ka, kb, n, op_a, op_b, base, Algorithm::Default)
        })
        .boxed()
}

fn int_problem() -> BoxedStrategy<Problem<IntV>> {
    problem_from(matching_header(), int_value(), int_alpha(), int_beta())
}

fn float_problem() -> BoxedStrategy<Problem<FltV>> {
    problem_from(
        matching_header(),
        float_value(),
        float_alpha(),
        float_value(),
    )
}

fn mismatched_problem() -> BoxedStrategy<Problem<IntV>> {
    problem_from(mismatched_header(), int_value(), int_alpha(), int_beta())
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn ok<X>(r: rusparse::Result<X>) -> Result<X, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(format!("unexpected error: {e:?}")))
}

/// The plan of problem `p` (its ops and algorithm) for `a` and `b` on `ctx`.
fn plan_for<T: Scalar, I: Index, J: Index, V>(
    ctx: &Context,
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    p: &Problem<V>,
) -> Result<SpgemmPlan<I, J>, TestCaseError> {
    ok(SpgemmPlan::new(
        ctx,
        &a.view(),
        p.op_a,
        &b.view(),
        p.op_b,
        p.algorithm,
    ))
}

fn is_invalid<X>(r: &rusparse::Result<X>) -> bool {
    matches!(r, Err(Error::InvalidValue(_)))
}

fn describe<X: Debug>(r: &rusparse::Result<X>) -> String {
    match r {
        Ok(_) => "Ok(..)".to_string(),
        Err(e) => format!("{e:?}"),
    }
}

fn build<T: TestValue, I: Index, J: Index, V: Val>(
    p: &Pattern,
    vals: &[V],
    base: IndexBase,
) -> CsrMatrix<T, I, J> {
    assert_eq!(p.entries.len(), vals.len());
    let triplets: Vec<(usize, usize, T)> = p
        .entries
        .iter()
        .zip(vals)
        .map(|(&(r, c), v)| (r, c, v.to::<T>()))
        .collect();
    CsrMatrix::from_triplets(p.nrows, p.ncols, &triplets, base).expect("generated triplets")
}

fn reference_product<T: TestValue, I: Index, J: Index>(
    a: &CsrMatrix<T, I, J>,
    op_a: Op,
    b: &CsrMatrix<T, I, J>,
    op_b: Op,
    alpha: T,
) -> CsrMatrix<T, I, J> {
    reference::spgemm(&a.view(), op_a, &b.view(), op_b, alpha).expect("reference product")
}

fn other_base(b: IndexBase) -> IndexBase {
    match b {
        IndexBase::Zero => IndexBase::One,
        IndexBase::One => IndexBase::Zero,
    }
}

fn conjugated<T: TestValue, I: Index, J: Index>(x: &CsrMatrix<T, I, J>) -> CsrMatrix<T, I, J> {
    let mut y = x.clone();
    for v in y.values_mut() {
        *v = v.conj();
    }
    y
}

/// The shared CPU contexts with 1, 2, 3 and 7 threads (pools are started once).
fn contexts() -> &'static [(usize, Context)] {
    static CONTEXTS: OnceLock<Vec<(usize, Context)>> = OnceLock::new();
    CONTEXTS.get_or_init(|| {
        [1usize, 2, 3, 7]
            .iter()
            .map(|&n| {
                let mut ctx = Context::cpu().expect("CPU context");
                ctx.set_num_threads(n).expect("thread pool");
                (n, ctx)
            })
            .collect()
    })
}

/// A context chosen by the problem, so each property sees several thread counts.
fn context_for<V>(p: &Problem<V>) -> &'static Context {
    let all = contexts();
    &all[(p.a.entries.len() + 3 * p.b.entries.len()) % all.len()].1
}

/// Number of scalar products of `op(A) * op(B)`, counted from the patterns.
fn count_products<V>(p: &Problem<V>) -> u64 {
    let mut row_len_b = vec![0u64; p.kb];
    for &(r, c) in &p.b.entries {
        row_len_b[if p.op_b.transposes() { c } else { r }] += 1;
    }
    p.a.entries
        .iter()
        .map(|&(r, c)| row_len_b[if p.op_a.transposes() { r } else { c }])
        .sum()
}

/// Checks what every output must satisfy: shape, base, offsets starting at
/// the base and ending at nnz + base, strictly increasing in-range columns.
fn check_output<T: TestValue, I: Index, J: Index>(
    c: &CsrMatrix<T, I, J>,
    m: usize,
    n: usize,
    base: IndexBase,
) -> TestResult {
    prop_assert_eq!((c.nrows(), c.ncols()), (m, n));
    prop_assert_eq!(c.base(), base);
    let b = base.offset() as i64;
    let ro = c.row_offsets();
    prop_assert_eq!(ro.len(), m + 1);
    prop_assert_eq!(ro[0].to_i64(), b, "row_offsets[0] must equal the base");
    prop_assert_eq!(ro[m].to_i64() - b, c.nnz() as i64);
    prop_assert_eq!(c.values().len(), c.nnz());
    for i in 0..m {
        let (lo, hi) = (ro[i].to_i64(), ro[i + 1].to_i64());
        prop_assert!(lo <= hi, "offsets decrease at row {}", i);
        let cols = &c.col_indices()[(lo - b) as usize..(hi - b) as usize];
        for w in cols.windows(2) {
            prop_assert!(
                w[0] < w[1],
                "row {} columns not strictly increasing: {:?}",
                i,
                cols
            );
        }
        for col in cols {
            let col = col.to_i64();
            prop_assert!(
                col >= b && col < n as i64 + b,
                "column {} out of range",
                col
            );
        }
    }
    prop_assert!(validate_structure(m, n, ro, c.col_indices(), base).is_ok());
    Ok(())
}

/// A dense matrix with a structural mask (for the independent oracle).
#[derive(Debug, PartialEq)]
struct Dense {
    rows: usize,
    cols: usize,
    present: Vec<bool>,
    val: Vec<Complex<f64>>,
}

/// `op(x)` as a dense matrix, conjugating explicitly for `Op::C`.
fn dense_op<T: TestValue, I: Index, J: Index>(x: &CsrMatrix<T, I, J>, op: Op) -> Dense {
    let (rows, cols) = stored(op, x.nrows(), x.ncols());
    let mut d = Dense {
        rows,
        cols,
        present: vec![false; rows * cols],
        val: vec![Complex::new(0.0, 0.0); rows * cols],
    };
    let b = x.base().offset();
    for i in 0..x.nrows() {
        let lo = x.row_offsets()[i].to_usize() - b;
        let hi = x.row_offsets()[i + 1].to_usize() - b;
        for k in lo..hi {
            let j = x.col_indices()[k].to_usize() - b;
            let v = x.values()[k].to_c64();
            let (r, c, v) = match op {
                Op::N => (i, j, v),
                Op::T => (j, i, v),
                Op::C => (j, i, v.conj()),
            };
            d.present[r * cols + c] = true;
            d.val[r * cols + c] += v;
        }
    }
    d
}

fn dense_of<T: TestValue, I: Index, J: Index>(x: &CsrMatrix<T, I, J>) -> Dense {
    dense_op(x, Op::N)
}

fn dense_product(a: &Dense, b: &Dense, alpha: Complex<f64>) -> Dense {
    assert_eq!(a.cols, b.rows);
    let (m, n) = (a.rows, b.cols);
    let mut c = Dense {
        rows: m,
        cols: n,
        present: vec![false; m * n],
        val: vec![Complex::new(0.0, 0.0); m * n],
    };
    for i in 0..m {
        for k in 0..a.cols {
            if !a.present[i * a.cols + k] {
                continue;
            }
            let av = a.val[i * a.cols + k];
            for j in 0..n {
                if b.present[k * n + j] {
                    c.present[i * n + j] = true;
                    c.val[i * n + j] += av * b.val[k * n + j];
                }
            }
        }
    }
    for v in &mut c.val {
        *v *= alpha;
    }
    c
}

type Bits<I, J> = (Vec<I>, Vec<J>, Vec<(u64, u64)>);

fn bits<T: TestValue, I: Index, J: Index>(c: &CsrMatrix<T, I, J>) -> Bits<I, J> {
    (
        c.row_offsets().to_vec(),
        c.col_indices().to_vec(),
        c.values().iter().map(|v| v.bits()).collect(),
    )
}

/// Fresh output arrays for a plan with `nnz` entries.
fn outputs<T: TestValue, I: Index, J: Index>(m: usize, nnz: usize) -> (Vec<I>, Vec<J>, Vec<T>) {
    (
        vec![I::default(); m + 1],
        vec![J::default(); nnz],
        vec![T::zero(); nnz],
    )
}

// ---------------------------------------------------------------------------
// Properties (generic over the value and index types)
// ---------------------------------------------------------------------------

/// The options of problem `p` with `alpha`.
fn options_of<T: Scalar, V>(p: &Problem<V>, alpha: T) -> SpgemmOptions<T> {
    SpgemmOptions {
        op_a: p.op_a,
        op_b: p.op_b,
        alpha,
        algorithm: p.algorithm,
        column_order: Default::default(),
    }
}

/// The prediction counts products this small exactly.
fn check_exact_prediction<T: TestValue, I: Index, J: Index>(
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    opts: &SpgemmOptions<T>,
    nnz: usize,
    nprod: u64,
) -> TestResult {
    let predicted = ok(rusparse::predict_nnz(&a.view(), &b.view(), opts))?;
    prop_assert!(predicted.exact);
    prop_assert_eq!(predicted.nnz as usize, nnz, "predict_nnz");
    prop_assert_eq!(predicted.nprod, nprod);
    Ok(())
}

/// One-call `spgemm` with integer values: equal to the reference (structure,
/// sorted columns, values), to an independent dense product with explicit
/// conjugation, and `op = C` equal to `op = T` of the conjugated operand.
fn prop_exact<T: TestValue, I: Index, J: Index>(p: &Problem<IntV>) -> TestResult {
    let a = build::<T, I, J, _>(&p.a, &p.a_vals, p.base);
    let b = build::<T, I, J, _>(&p.b, &p.b_vals, p.base);
    let alpha: T = p.alpha.to();
    let opts = options_of(p, alpha);
    let c = ok(rusparse::spgemm(&a.view(), &b.view(), &opts))?;
    check_output(&c, p.m, p.n, p.base)?;
    let r = reference_product(&a, p.op_a, &b, p.op_b, alpha);
    prop_assert_eq!(&c, &r);
    check_exact_prediction(&a, &b, &opts, r.nnz(), count_products(p))?;
    check_spgemm_into(context_for(p), &a, &b, &opts, &r)?;

    let expected = dense_product(&dense_op(&a, p.op_a), &dense_op(&b, p.op_b), alpha.to_c64());
    prop_assert_eq!(dense_of(&c), expected, "differs from the dense oracle");

    // op = C must be op = T of the conjugated operand.
    if p.op_a == Op::C || p.op_b == Op::C {
        let (a2, op_a2) = if p.op_a == Op::C {
            (conjugated(&a), Op::T)
        } else {
            (a.clone(), p.op_a)
        };
        let (b2, op_b2) = if p.op_b == Op::C {
            (conjugated(&b), Op::T)
        } else {
            (b.clone(), p.op_b)
        };
        let opts2 = SpgemmOptions {
            op_a: op_a2,
            op_b: op_b2,
            ..opts
        };
        let c2 = ok(rusparse::spgemm(&a2.view(), &b2.view(), &opts2))?;
        prop_assert_eq!(&c, &c2, "op C differs from op T of the conjugate");
    }
    Ok(())
}

/// `Context::spgemm_into` writes `expected` into the arrays its `alloc`
/// makes at nnz(C) (filled with garbage first: every entry must be
/// written); arrays of the wrong length, values alone and an `alloc` error
/// are refused, each with its message.
fn check_spgemm_into<T: TestValue, I: Index, J: Index>(
    ctx: &Context,
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    opts: &SpgemmOptions<T>,
    expected: &CsrMatrix<T, I, J>,
) -> TestResult {
    let m = expected.nrows();
    let (mut offsets, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
    let mut asked = None;
    ok(ctx.spgemm_into(&a.view(), &b.view(), opts, |rows, nnz| {
        asked = Some((rows, nnz));
        offsets = vec![I::from_usize_unchecked(7); m + 1];
        cols = vec![J::from_usize_unchecked(5); nnz];
        vals = vec![T::one() + T::one(); nnz];
        Ok(CsrOutput::full(
            &mut offsets,
            &mut cols,
            &mut vals,
            expected.base(),
        ))
    }))?;
    prop_assert_eq!(asked, Some((m, expected.nnz())));
    prop_assert_eq!(&offsets[..], expected.row_offsets());
    prop_assert_eq!(&cols[..], expected.col_indices());
    prop_assert_eq!(&vals[..], expected.values());

    let (mut o2, mut c2, mut v2) = (vec![I::default(); m + 1], Vec::new(), Vec::new());
    let short = ctx.spgemm_into(&a.view(), &b.view(), opts, |_, nnz| {
        c2 = vec![J::default(); nnz + 1];
        v2 = vec![T::zero(); nnz + 1];
        Ok(CsrOutput::full(&mut o2, &mut c2, &mut v2, expected.base()))
    });
    prop_assert!(
        is_invalid(&short),
        "arrays one too long: {}",
        describe(&short)
    );
    let message = short
        .err()
        .map(|e| e.message().to_string())
        .unwrap_or_default();
    prop_assert!(
        message.contains("C's column indices hold") && message.contains("expected nnz(C)"),
        "{}",
        message
    );
    let mut v3 = Vec::new();
    let partial = ctx.spgemm_into(&a.view(), &b.view(), opts, |_, nnz| {
        v3 = vec![T::zero(); nnz];
        Ok(CsrOutput::values_only(&mut v3, expected.base()))
    });
    prop_assert!(is_invalid(&partial), "values alone: {}", describe(&partial));
    let message = partial
        .err()
        .map(|e| e.message().to_string())
        .unwrap_or_default();
    prop_assert!(
        message.contains("needs all three of C's arrays"),
        "{}",
        message
    );
    let refused = ctx.spgemm_into::<T, I, J>(&a.view(), &b.view(), opts, |_, _| {
        Err(Error::AllocFailed("the caller's arrays".into()))
    });
    prop_assert!(
        matches!(&refused, Err(Error::AllocFailed(m)) if m == "the caller's arrays"),
        "alloc's error, as it returned it: {}",
        describe(&refused)
    );
    Ok(())
}

/// `p` with its inner dimension spread out to at least
/// [`RENUMBER_INNER_FROM`]: inner index `i` becomes `i * stride + stride / 2`.
/// With op(B) transposed the inner dimension is then renumbered
/// ([`rusparse::plan::OperandPattern::pair`]); C does not change.
fn widened<V: Clone>(p: &Problem<V>) -> Problem<V> {
    let stride = RENUMBER_INNER_FROM / p.ka.max(1) + 1;
    let k = p.ka.max(1) * stride;
    let wide = |i: usize| i * stride + stride / 2;
    let mut w = p.clone();
    (w.ka, w.kb) = (k, k);
    let widen = |x: &mut Pattern, inner_is_row: bool| {
        if inner_is_row {
            x.nrows = k;
            x.entries.iter_mut().for_each(|e| e.0 = wide(e.0));
        } else {
            x.ncols = k;
            x.entries.iter_mut().for_each(|e| e.1 = wide(e.1));
        }
    };
    // The inner index is a stored row of a transposed A and of an
    // untransposed B, a stored column otherwise.
    widen(&mut w.a, p.op_a.transposes());
    widen(&mut w.b, !p.op_b.transposes());
    w
}

/// A wide, hypersparse inner dimension gives the narrow problem's C, its
/// prediction and its plan (every phase, both value sets).
fn prop_wide_inner<T: TestValue, I: Index, J: Index>(p: &Problem<IntV>) -> TestResult {
    let w = widened(p);
    let (a, b) = (
        build::<T, I, J, _>(&w.a, &w.a_vals, w.base),
        build::<T, I, J, _>(&w.b, &w.b_vals, w.base),
    );
    let renumbered = renumbers_inner(w.ka, a.nnz(), b.nnz(), w.op_b);
    prop_assert_eq!(renumbered, w.op_b.transposes());
    let alpha: T = p.alpha.to();
    let opts = options_of(&w, alpha);
    let c = ok(rusparse::spgemm(&a.view(), &b.view(), &opts))?;
    let narrow = reference_product(
        &build::<T, I, J, _>(&p.a, &p.a_vals, p.base),
        p.op_a,
        &build::<T, I, J, _>(&p.b, &p.b_vals, p.base),
        p.op_b,
        alpha,
    );
    prop_assert_eq!(&c, &narrow);
    check_exact_prediction(&a, &b, &opts, narrow.nnz(), count_products(p))?;
    prop_plan::<T, I, J>(&w)
}

/// Non-integer values: identical structure to the reference and every value
/// within `8 eps |alpha| sum_k |a_ik| |b_kj|` of it.
fn prop_tolerance<T: TestValue, I: Index, J: Index>(p: &Problem<FltV>) -> TestResult {
    let a = build::<T, I, J, _>(&p.a, &p.a_vals, p.base);
    let b = build::<T, I, J, _>(&p.b, &p.b_vals, p.base);
    let alpha: T = p.alpha.to();
    let opts = SpgemmOptions {
        op_a: p.op_a,
        op_b: p.op_b,
        alpha,
        algorithm: p.algorithm,
        column_order: Default::default(),
    };
    let c = ok(context_for(p).spgemm(&a.view(), &b.view(), &opts))?;
    check_output(&c, p.m, p.n, p.base)?;
    let r = reference_product(&a, p.op_a, &b, p.op_b, alpha);
    prop_assert_eq!(c.row_offsets(), r.row_offsets());
    prop_assert_eq!(c.col_indices(), r.col_indices());

    // sum_k |a_ik| |b_kj| on the same pattern, in f64.
    let abs = |x: &CsrMatrix<T, I, J>| {
        CsrMatrix::<f64, I, J>::try_from_parts(
            x.nrows(),
            x.ncols(),
            x.row_offsets().to_vec(),
            x.col_indices().to_vec(),
            x.values().iter().map(|v| v.magnitude()).collect(),
            x.base(),
        )
        .expect("same structure")
    };
    let (aa, ab) = (abs(&a), abs(&b));
    let s = reference::spgemm(&aa.view(), p.op_a, &ab.view(), p.op_b, 1.0).expect("bound");
    prop_assert_eq!(s.col_indices(), r.col_indices());
    let scale = 8.0 * T::EPS * alpha.magnitude();
    for (k, ((cv, rv), sv)) in c
        .values()
        .iter()
        .zip(r.values())
        .zip(s.values())
        .enumerate()
    {
        let diff = (cv.to_c64() - rv.to_c64()).norm();
        prop_assert!(
            diff <= scale * sv,
            "entry {}: {:?} vs reference {:?}, |diff| = {} > bound {}",
            k,
            cv,
            rv,
            diff,
            scale * sv
        );
    }
    Ok(())
}

/// Plan once, numeric many times: symbolic once, numeric with two value sets
/// on the same pattern (each equal to its reference), `execute`, and
/// `write_structure` followed by a values-only numeric (also into 64-bit
/// offsets with the other base). Phases out of order and wrong output
/// lengths are refused with `InvalidValue`.
fn prop_plan<T: TestValue, I: Index, J: Index>(p: &Problem<IntV>) -> TestResult {
    let ctx = context_for(p);
    let a1 = build::<T, I, J, _>(&p.a, &p.a_vals, p.base);
    let b1 = build::<T, I, J, _>(&p.b, &p.b_vals, p.base);
    let a2 = build::<T, I, J, _>(&p.a, &p.a_vals2, p.base);
    let b2 = build::<T, I, J, _>(&p.b, &p.b_vals2, p.base);
    let alpha: T = p.alpha.to();
    let r1 = reference_product(&a1, p.op_a, &b1, p.op_b, alpha);
    let r2 = reference_product(&a2, p.op_a, &b2, p.op_b, alpha);

    let mut plan = plan_for(ctx, &a1, &b1, p)?;
    prop_assert_eq!(plan.shape(), (p.m, p.n));
    prop_assert_eq!(plan.algorithm(), p.algorithm);
    let selected = plan.selected_algorithm();
    prop_assert!(selected.is_concrete(), "selected {:?}", selected);
    if p.algorithm.is_concrete() && (selected != p.algorithm) {
        // Only BRMerge may be replaced, and only on unsorted or duplicated input.
        prop_assert!(
            matches!(
                p.algorithm,
                Algorithm::BrmergePrecise | Algorithm::BrmergeUpper
            ),
            "{:?} ran as {:?}",
            p.algorithm,
            selected
        );
    }
    prop_assert_eq!(plan.num_products(), count_products(p));
    prop_assert_eq!(plan.nnz(), None);

    // Before the symbolic phase every later phase is refused.
    let early = plan.execute(ctx, &a1.view(), &b1.view(), alpha);
    prop_assert!(
        is_invalid(&early),
        "execute before symbolic: {}",
        describe(&early)
    );
    let mut v = vec![T::zero(); r1.nnz()];
    let early = plan.numeric::<T, I>(
        ctx,
        &a1.view(),
        &b1.view(),
        alpha,
        T::zero(),
        CsrOutput::values_only(&mut v, p.base),
    );
    prop_assert!(
        is_invalid(&early),
        "numeric before symbolic: {}",
        describe(&early)
    );

    // The symbolic phase only looks at the pattern: run it on the second values.
    let nnz = ok(plan.symbolic(ctx, &a2.view(), &b2.view()))?;
    prop_assert_eq!(nnz, r1.nnz());
    prop_assert_eq!(plan.nnz(), Some(nnz));

    for (a, b, r) in [(&a1, &b1, &r1), (&a2, &b2, &r2), (&a1, &b1, &r1)] {
        let (mut ro, mut cols, mut vals) = outputs::<T, I, J>(p.m, nnz);
        ok(plan.numeric(
            ctx,
            &a.view(),
            &b.view(),
            alpha,
            T::zero(),
            CsrOutput::full(&mut ro, &mut cols, &mut vals, p.base),
        ))?;
        let c = ok(CsrMatrix::try_from_parts(p.m, p.n, ro, cols, vals, p.base))?;
        check_output(&c, p.m, p.n, p.base)?;
        prop_assert_eq!(&c, r);
        let e = ok(plan.execute(ctx, &a.view(), &b.view(), alpha))?;
        prop_assert_eq!(&e, r);
    }

    // write_structure, then numeric with values only (same base, same types).
    let (mut ro, mut cols, mut vals) = outputs::<T, I, J>(p.m, nnz);
    ok(plan.write_structure(ctx, &a2.view(), &b2.view(), &mut ro, &mut cols, p.base))?;
    ok(plan.numeric::<T, I>(
        ctx,
        &a2.view(),
        &b2.view(),
        alpha,
        T::zero(),
        CsrOutput::values_only(&mut vals, p.base),
    ))?;
    let c = ok(CsrMatrix::try_from_parts(p.m, p.n, ro, cols, vals, p.base))?;
    prop_assert_eq!(&c, &r2);

    // The same into 64-bit row offsets with the other base.
    let ob = other_base(p.base);
    let shift = ob.offset() as i64 - p.base.offset() as i64;
    let mut ro64 = vec![-7i64; p.m + 1];
    let mut cols = vec![J::default(); nnz];
    ok(plan.write_structure(ctx, &a1.view(), &b1.view(), &mut ro64, &mut cols, ob))?;
    let mut vals = vec![T::zero(); nnz];
    ok(plan.numeric::<T, i64>(
        ctx,
        &a1.view(),
        &b1.view(),
        alpha,
        T::zero(),
        CsrOutput::values_only(&mut vals, ob),
    ))?;
    let want_ro: Vec<i64> = r1
        .row_offsets()
        .iter()
        .map(|x| x.to_i64() + shift)
        .collect();
    let want_cols: Vec<i64> = r1
        .col_indices()
        .iter()
        .map(|x| x.to_i64() + shift)
        .collect();
    prop_assert_eq!(ro64, want_ro);
    prop_assert_eq!(
        cols.iter().map(|x| x.to_i64()).collect::<Vec<_>>(),
        want_cols
    );
    prop_assert_eq!(&vals[..], r1.values());

    // write_structure_with_values: C whole in one call, from the values
    // the symbolic phase saw, with those values listed and kept unhashed
    // (expect_values_with_structure) or not. Values changed after it are
    // computed again by the numeric phase on the structure; so are they
    // after a plain write_structure, which leaves unhashed values unused.
    let u1 = reference_product(&a1, p.op_a, &b1, p.op_b, T::one());
    for (unhashed, with_values) in [(false, true), (true, true), (true, false)] {
        let mut plan = plan_for(ctx, &a1, &b1, p)?;
        plan.expect_structure_first();
        if unhashed {
            plan.expect_values_with_structure();
        }
        let nnz = ok(plan.symbolic(ctx, &a1.view(), &b1.view()))?;
        let (mut ro, mut cols, mut vals) = outputs::<T, I, J>(p.m, nnz);
        if with_values {
            ok(plan.write_structure_with_values(
                ctx,
                &a1.view(),
                &b1.view(),
                (&mut ro, &mut cols, &mut vals),
                p.base,
            ))?;
            let c = ok(CsrMatrix::try_from_parts(
                p.m,
                p.n,
                ro.clone(),
                cols.clone(),
                vals,
                p.base,
            ))?;
            prop_assert_eq!(&c, &u1);
        } else {
            ok(plan.write_structure(ctx, &a1.view(), &b1.view(), &mut ro, &mut cols, p.base))?;
        }
        let mut changed = vec![T::zero(); nnz];
        ok(plan.numeric::<T, I>(
            ctx,
            &a2.view(),
            &b2.view(),
            alpha,
            T::zero(),
            CsrOutput::values_on_pattern(&mut changed, &cols, p.base),
        ))?;
        prop_assert_eq!(&changed[..], r2.values());
    }

    // Values on the known structure (reuse_compute's path) are the same.
    let mut on_pattern = vec![T::zero(); nnz];
    ok(plan.numeric::<T, i64>(
        ctx,
        &a1.view(),
        &b1.view(),
        alpha,
        T::zero(),
        CsrOutput::values_on_pattern(&mut on_pattern, &cols, ob),
    ))?;
    prop_assert_eq!(&on_pattern[..], r1.values());

    // And split between two arrays, each row at a point of its own (PETSc's
    // diagonal and off-diagonal blocks), each array a value longer than
    // the offsets ask, which must stay untouched; then with beta = 1 on
    // those values.
    let want = r1.values();
    let (offsets, ob_off) = (r1.row_offsets(), ob.offset() as i64);
    let row = |i: usize| {
        offsets[i].as_usize() - p.base.offset()..offsets[i + 1].as_usize() - p.base.offset()
    };
    let cut = |i: usize| (i * 7 + 3) % (row(i).len() + 1);
    let (mut fo, mut so) = (vec![ob_off], vec![ob_off]);
    for i in 0..p.m {
        fo.push(fo[i] + cut(i) as i64);
        so.push(so[i] + (row(i).len() - cut(i)) as i64);
    }
    let gap = T::from_parts(-3.0, 0.0);
    let mut first = vec![gap; (fo[p.m] - ob_off) as usize + 1];
    let mut second = vec![gap; (so[p.m] - ob_off) as usize + 1];
    for beta in [T::zero(), T::one()] {
        ok(plan.numeric::<T, i64>(
            ctx,
            &a1.view(),
            &b1.view(),
            alpha,
            beta,
            CsrOutput::split_values_on_pattern(
                SplitValues {
                    first_offsets: &fo,
                    first: &mut first,
                    second_offsets: &so,
                    second: &mut second,
                },
                &cols,
                ob,
            ),
        ))?;
        for i in 0..p.m {
            let (f, s) = ((fo[i] - ob_off) as usize, (so[i] - ob_off) as usize);
            let (r, k) = (row(i), cut(i));
            for (t, &w) in want[r.clone()].iter().enumerate() {
                let got = if t < k {
                    first[f + t]
                } else {
                    second[s + t - k]
                };
                let w = if beta == T::zero() { w } else { w + w };
                prop_assert_eq!(got, w, "row {} entry {}", i, t);
            }
        }
        prop_assert_eq!(first.last(), Some(&gap));
        prop_assert_eq!(second.last(), Some(&gap));
    }

    // Columns only (values None) give the sorted structure as well.
    let mut cols_only = vec![J::default(); nnz];
    ok(plan.numeric::<T, I>(
        ctx,
        &a1.view(),
        &b1.view(),
        alpha,
        T::zero(),
        CsrOutput {
            row_offsets: None,
            col_indices: Some(&mut cols_only),
            values: None,
            base: p.base,
            pattern: None,
            column_order: Default::default(),
            split_values: None,
        },
    ))?;
    prop_assert_eq!(&cols_only[..], r1.col_indices());

    // The reuse flow's plan: the symbolic phase keeps C's columns and the
    // first write_structure copies them (the second lists them again);
    // the same structure either way, and the values on it.
    let mut keeping = plan_for(ctx, &a1, &b1, p)?;
    keeping.expect_structure_first();
    prop_assert!(keeping.peak_memory_bound() >= plan.peak_memory_bound());
    prop_assert_eq!(ok(keeping.symbolic(ctx, &a2.view(), &b2.view()))?, nnz);
    for _ in 0..2 {
        let (mut ro, mut cols, mut vals) = outputs::<T, I, J>(p.m, nnz);
        ok(keeping.write_structure(ctx, &a2.view(), &b2.view(), &mut ro, &mut cols, p.base))?;
        ok(keeping.numeric::<T, I>(
            ctx,
            &a2.view(),
            &b2.view(),
            alpha,
            T::zero(),
            CsrOutput::values_on_pattern(&mut vals, &cols, p.base),
        ))?;
        let c = ok(CsrMatrix::try_from_parts(p.m, p.n, ro, cols, vals, p.base))?;
        prop_assert_eq!(&c, &r2);
    }

    // Output arrays of the wrong length are refused.
    let mut long_vals = vec![T::zero(); nnz + 1];
    let bad = plan.numeric::<T, I>(
        ctx,
        &a1.view(),
        &b1.view(),
        alpha,
        T::zero(),
        CsrOutput::values_only(&mut long_vals, p.base),
    );
    prop_assert!(
        is_invalid(&bad),
        "values of length nnz + 1: {}",
        describe(&bad)
    );
    let mut long_ro = vec![I::default(); p.m + 2];
    let mut cols = vec![J::default(); nnz];
    let bad = plan.write_structure(ctx, &a1.view(), &b1.view(), &mut long_ro, &mut cols, p.base);
    prop_assert!(
        is_invalid(&bad),
        "row offsets of length m + 2: {}",
        describe(&bad)
    );
    if nnz > 0 {
        let mut ro = vec![I::default(); p.m + 1];
        let mut short_cols = vec![J::default(); nnz - 1];
        let bad = plan.write_structure(
            ctx,
            &a1.view(),
            &b1.view(),
            &mut ro,
            &mut short_cols,
            p.base,
        );
        prop_assert!(
            is_invalid(&bad),
            "columns of length nnz - 1: {}",
            describe(&bad)
        );
    }
    Ok(())
}

/// `values = alpha * op(A) op(B) + beta * values` with beta != 0 on known old
/// values (twice in a row), and beta == 0 never reading the old values (NaN).
fn prop_beta<T: TestValue, I: Index, J: Index>(p: &Problem<IntV>) -> TestResult {
    let ctx = context_for(p);
    let a = build::<T, I, J, _>(&p.a, &p.a_vals, p.base);
    let b = build::<T, I, J, _>(&p.b, &p.b_vals, p.base);
    let alpha: T = p.alpha.to();
    let beta: T = p.beta.to();
    prop_assert!(beta != T::zero());
    let r = reference_product(&a, p.op_a, &b, p.op_b, alpha);
    let mut plan = plan_for(ctx, &a, &b, p)?;
    let nnz = ok(plan.symbolic(ctx, &a.view(), &b.view()))?;
    prop_assert_eq!(nnz, r.nnz());

    let old: Vec<T> = (0..nnz)
        .map(|k| {
            T::from_parts(
                ((k * 5 + 3) % 9) as f64 - 4.0,
                ((k * 7 + 1) % 9) as f64 - 4.0,
            )
        })
        .collect();
    let (mut ro, mut cols, _) = outputs::<T, I, J>(p.m, nnz);
    let mut vals = old.clone();
    ok(plan.numeric(
        ctx,
        &a.view(),
        &b.view(),
        alpha,
        beta,
        CsrOutput::full(&mut ro, &mut cols, &mut vals, p.base),
    ))?;
    prop_assert_eq!(&ro[..], r.row_offsets());
    prop_assert_eq!(&cols[..], r.col_indices());
    let expected: Vec<T> = r
        .values()
        .iter()
        .zip(&old)
        .map(|(&rv, &o)| rv + beta * o)
        .collect();
    prop_assert_eq!(&vals, &expected, "alpha * ref + beta * old");

    // Again on the result, values only.
    ok(plan.numeric::<T, I>(
        ctx,
        &a.view(),
        &b.view(),
        alpha,
        beta,
        CsrOutput::values_only(&mut vals, p.base),
    ))?;
    let expected2: Vec<T> = r
        .values()
        .iter()
        .zip(&expected)
        .map(|(&rv, &o)| rv + beta * o)
        .collect();
    prop_assert_eq!(&vals, &expected2, "second accumulation");

    // beta == 0: the old values are not read, so NaN must not leak through.
    let mut nan_vals = vec![T::from_parts(f64::NAN, f64::NAN); nnz];
    ok(plan.numeric::<T, I>(
        ctx,
        &a.view(),
        &b.view(),
        alpha,
        T::zero(),
        CsrOutput::values_only(&mut nan_vals, p.base),
    ))?;
    prop_assert_eq!(&nan_vals[..], r.values(), "beta = 0 must ignore old values");
    Ok(())
}

/// Row `i` of `c` as (column, value bits) pairs sorted by column.
fn sorted_row<T: TestValue, I: Index, J: Index>(
    c: &CsrMatrix<T, I, J>,
    i: usize,
) -> Vec<(i64, (u64, u64))> {
    let o = c.row_offsets();
    let (lo, hi) = (o[i].to_usize(), o[i + 1].to_usize());
    let lo = lo - c.base().offset();
    let hi = hi - c.base().offset();
    let mut row: Vec<_> = (lo..hi)
        .map(|k| (c.col_indices()[k].to_i64(), c.values()[k].bits()))
        .collect();
    row.sort_unstable();
    row
}

/// `ColumnOrder::Any`: every row of C holds exactly the entries of the
/// sorted product (the same columns, bitwise the same values: only the
/// order of writing differs), in an order that repeats (a second product
/// gives the same arrays), and a full numeric output with beta = 1 into
/// that C adds to the right entries (C becomes 2 C, in the same order).
fn prop_unsorted<T: TestValue, I: Index, J: Index>(p: &Problem<FltV>) -> TestResult {
    let ctx = context_for(p);
    let a = build::<T, I, J, _>(&p.a, &p.a_vals, p.base);
    let b = build::<T, I, J, _>(&p.b, &p.b_vals, p.base);
    let sorted_opts = options_of(p, p.alpha.to::<T>());
    let any_opts = SpgemmOptions {
        column_order: ColumnOrder::Any,
        ..sorted_opts
    };
    let s = ok(ctx.spgemm(&a.view(), &b.view(), &sorted_opts))?;
    let u = ok(ctx.spgemm(&a.view(), &b.view(), &any_opts))?;
    prop_assert_eq!(u.row_offsets(), s.row_offsets());
    for i in 0..u.nrows() {
        prop_assert_eq!(sorted_row(&u, i), sorted_row(&s, i), "row {}", i);
    }
    let again = ok(ctx.spgemm(&a.view(), &b.view(), &any_opts))?;
    prop_assert!(
        bits(&again) == bits(&u),
        "ColumnOrder::Any gave another order the second time"
    );

    let mut plan = plan_for(ctx, &a, &b, p)?;
    ok(plan.symbolic(ctx, &a.view(), &b.view()))?;
    let (mut offsets, mut cols, mut vals) = (
        u.row_offsets().to_vec(),
        u.col_indices().to_vec(),
        u.values().to_vec(),
    );
    ok(plan.numeric(
        ctx,
        &a.view(),
        &b.view(),
        any_opts.alpha,
        T::one(),
        CsrOutput::full(&mut offsets, &mut cols, &mut vals, p.base)
            .with_column_order(ColumnOrder::Any),
    ))?;
    prop_assert_eq!(&cols[..], u.col_indices(), "beta = 1: another column order");
    for (k, (got, once)) in vals.iter().zip(u.values()).enumerate() {
        // Equal as numbers (beta * old may turn a -0 into +0).
        let twice = *once + *once;
        prop_assert!(
            got.to_c64() == twice.to_c64(),
            "entry {}: {:?}, expected 2 x {:?}",
            k,
            got,
            once
        );
    }
    Ok(())
}

/// The same product on 1, 2, 3 and 7 threads (one call, and plans made,
/// run symbolically and executed on different contexts) is bitwise identical.
fn prop_deterministic<T: TestValue, I: Index, J: Index>(p: &Problem<FltV>) -> TestResult {
    let a = build::<T, I, J, _>(&p.a, &p.a_vals, p.base);
    let b = build::<T, I, J, _>(&p.b, &p.b_vals, p.base);
    let opts = SpgemmOptions {
        op_a: p.op_a,
        op_b: p.op_b,
        alpha: p.alpha.to::<T>(),
        algorithm: p.algorithm,
        column_order: Default::default(),
    };
    let ctxs = contexts();
    let first = ok(ctxs[0].1.spgemm(&a.view(), &b.view(), &opts))?;
    check_output(&first, p.m, p.n, p.base)?;
    let want = bits(&first);
    for (n, ctx) in ctxs {
        prop_assert_eq!(ctx.num_threads(), *n);
        let c = ok(ctx.spgemm(&a.view(), &b.view(), &opts))?;
        prop_assert!(bits(&c) == want, "{} threads differ from 1 thread", n);
    }
    for (x, (nx, cx)) in ctxs.iter().enumerate() {
        let (ny, cy) = &ctxs[(x + 1) % ctxs.len()];
        let (nz, cz) = &ctxs[(x + 3) % ctxs.len()];
        let mut plan = plan_for(cx, &a, &b, p)?;
        ok(plan.symbolic(cy, &a.view(), &b.view()))?;
        let c = ok(plan.execute(cz, &a.view(), &b.view(), opts.alpha))?;
        prop_assert!(
            bits(&c) == want,
            "plan on {} threads, symbolic on {}, execute on {} differs",
            nx,
            ny,
            nz
        );
    }
    Ok(())
}

/// How an operand is changed after the plan was made.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// One entry moves to another column of its row.
    Move,
    /// One entry is removed.
    Remove,
    /// One entry is added.
    Add,
    /// Two entries of one row with different columns swap places.
    Swap,
    /// One more (empty) row.
    GrowRows,
    /// One more (empty) column.
    GrowCols,
}

/// True for the changes of shape (refused in O(1) by every phase).
fn change_shape(change: Change) -> bool {
    matches!(change, Change::GrowRows | Change::GrowCols)
}

/// Applies `change` to `(pattern, values)`; `None` when it does not apply.
fn apply_change(
    pat: &Pattern,
    vals: &[IntV],
    change: Change,
    pick: Pick,
    pick2: Pick,
) -> Option<(Pattern, Vec<IntV>)> {
    let mut q = pat.clone();
    let mut v = vals.to_vec();
    let len = q.entries.len();
    match change {
        Change::Move => {
            if len == 0 || q.ncols < 2 {
                return None;
            }
            let e = pick.index(len);
            let (r, c) = q.entries[e];
            q.entries[e] = (r, (c + 1 + pick2.index(q.ncols - 1)) % q.ncols);
        }
        Change::Remove => {
            if len == 0 {
                return None;
            }
            let e = pick.index(len);
            q.entries.remove(e);
            v.remove(e);
        }
        Change::Add => {
            if q.nrows == 0 || q.ncols == 0 {
                return None;
            }
            let e = (pick.index(q.nrows), pick2.index(q.ncols));
            let at = if len == 0 { 0 } else { pick2.index(len + 1) };
            q.entries.insert(at, e);
            v.insert(at, (1, 1));
        }
        Change::Swap => {
            let pairs: Vec<(usize, usize)> = (0..len)
                .flat_map(|i| (i + 1..len).map(move |j| (i, j)))
                .filter(|&(i, j)| {
                    q.entries[i].0 == q.entries[j].0 && q.entries[i].1 != q.entries[j].1
                })
                .collect();
            if pairs.is_empty() {
                return None;
            }
            let (i, j) = pairs[pick.index(pairs.len())];
            q.entries.swap(i, j);
            v.swap(i, j);
        }
        Change::GrowRows => q.nrows += 1,
        Change::GrowCols => q.ncols += 1,
    }
    Some((q, v))
}

/// A plan refuses operands whose pattern or shape changed since it was made
/// (write_structure, numeric and execute give InvalidValue, symbolic does
/// when the shape or nnz changed; never a wrong result or a panic), and
/// still works with the original.
fn prop_changed_pattern<T: TestValue, I: Index, J: Index>(
    p: &Problem<IntV>,
    change_b: bool,
    choice: Pick,
    pick: Pick,
    pick2: Pick,
) -> TestResult {
    const CHANGES: [Change; 6] = [
        Change::Move,
        Change::Remove,
        Change::Add,
        Change::Swap,
        Change::GrowRows,
        Change::GrowCols,
    ];
    // Every applicable (operand, change); growing always applies.
    let mut candidates = Vec::new();
    for on_b in [change_b, !change_b] {
        let (pat, vals) = if on_b {
            (&p.b, &p.b_vals)
        } else {
            (&p.a, &p.a_vals)
        };
        for change in CHANGES {
            if let Some(changed) = apply_change(pat, vals, change, pick, pick2) {
                candidates.push((on_b, change, changed));
            }
        }
    }
    let (on_b, change, (pat2, vals2)) = candidates.swap_remove(choice.index(candidates.len()));

    let ctx = context_for(p);
    let a = build::<T, I, J, _>(&p.a, &p.a_vals, p.base);
    let b = build::<T, I, J, _>(&p.b, &p.b_vals, p.base);
    let changed = build::<T, I, J, _>(&pat2, &vals2, p.base);
    let (a2, b2) = if on_b { (&a, &changed) } else { (&changed, &b) };
    let alpha: T = p.alpha.to();
    let what = format!("{change:?} on {}", if on_b { "B" } else { "A" });

    let mut plan = plan_for(ctx, &a, &b, p)?;
    // The symbolic phase refuses a changed shape or nnz, but it need not
    // hash the patterns: it may accept a changed pattern with the planned
    // nnz. Then the numeric phase refuses the changed operands, and on the
    // planned ones it refuses or gives their exact product, never the
    // changed one's (BRMerge-Upper's temporary C included).
    let mut unsymbolic = plan_for(ctx, &a, &b, p)?;
    let r = unsymbolic.symbolic(ctx, &a2.view(), &b2.view());
    let same_nnz = (a2.nnz(), b2.nnz()) == (a.nnz(), b.nnz()) && !change_shape(change);
    if !same_nnz || r.is_err() {
        prop_assert!(is_invalid(&r), "symbolic after {}: {}", what, describe(&r));
    } else {
        let r = unsymbolic.execute(ctx, &a2.view(), &b2.view(), alpha);
        prop_assert!(
            is_invalid(&r),
            "execute after symbolic on {}: {}",
            what,
            describe(&r)
        );
        let r = unsymbolic.execute(ctx, &a.view(), &b.view(), alpha);
        if !is_invalid(&r) {
            let want = reference_product(&a, p.op_a, &b, p.op_b, alpha);
            prop_assert_eq!(ok(r)?, want, "planned operands after symbolic on {}", what);
        }
    }

    let nnz = ok(plan.symbolic(ctx, &a.view(), &b.view()))?;
    let (mut ro, mut cols, mut vals) = outputs::<T, I, J>(p.m, nnz);
    let r = plan.numeric(
        ctx,
        &a2.view(),
        &b2.view(),
        alpha,
        T::zero(),
        CsrOutput::full(&mut ro, &mut cols, &mut vals, p.base),
    );
    prop_assert!(is_invalid(&r), "numeric after {}: {}", what, describe(&r));
    let r = plan.numeric::<T, I>(
        ctx,
        &a2.view(),
        &b2.view(),
        alpha,
        T::zero(),
        CsrOutput::values_only(&mut vals, p.base),
    );
    prop_assert!(
        is_invalid(&r),
        "values-only numeric after {}: {}",
        what,
        describe(&r)
    );
    let r = plan.write_structure(ctx, &a2.view(), &b2.view(), &mut ro, &mut cols, p.base);
    prop_assert!(
        is_invalid(&r),
        "write_structure after {}: {}",
        what,
        describe(&r)
    );
    let r = plan.execute(ctx, &a2.view(), &b2.view(), alpha);
    prop_assert!(is_invalid(&r), "execute after {}: {}", what, describe(&r));

    // The refused calls leave the plan usable.
    let c = ok(plan.execute(ctx, &a.view(), &b.view(), alpha))?;
    prop_assert_eq!(c, reference_product(&a, p.op_a, &b, p.op_b, alpha));
    Ok(())
}

/// Inner dimensions that differ are refused with InvalidValue by `spgemm`
/// and `SpgemmPlan::new`.
fn prop_mismatch<T: TestValue, I: Index, J: Index>(p: &Problem<IntV>) -> TestResult {
    prop_assert!(p.ka != p.kb);
    let a = build::<T, I, J, _>(&p.a, &p.a_vals, p.base);
    let b = build::<T, I, J, _>(&p.b, &p.b_vals, p.base);
    let opts = SpgemmOptions {
        op_a: p.op_a,
        op_b: p.op_b,
        alpha: p.alpha.to::<T>(),
        algorithm: p.algorithm,
        column_order: Default::default(),
    };
    let r = rusparse::spgemm(&a.view(), &b.view(), &opts);
    prop_assert!(is_invalid(&r), "spgemm: {}", describe(&r));
    let r = context_for(p).spgemm(&a.view(), &b.view(), &opts);
    prop_assert!(is_invalid(&r), "Context::spgemm: {}", describe(&r));
    let r = SpgemmPlan::new(
        context_for(p),
        &a.view(),
        p.op_a,
        &b.view(),
        p.op_b,
        p.algorithm,
    );
    prop_assert!(is_invalid(&r), "SpgemmPlan::new: {}", describe(&r));
    let r = rusparse::predict_nnz(&a.view(), &b.view(), &opts);
    prop_assert!(is_invalid(&r), "predict_nnz: {}", describe(&r));
    Ok(())
}

// ---------------------------------------------------------------------------
// One module per (value type, row-offset type, column-index type)
// ---------------------------------------------------------------------------

/// One proptest with its own configuration (and so its own seed).
macro_rules! property {
    ($cases:expr, fn $test:ident($($arg:ident in $strategy:expr),+ $(,)?) $body:block) => {
        proptest! {
            #![proptest_config(config($cases, concat!(module_path!(), "::", stringify!($test))))]
            #[test]
            fn $test($($arg in $strategy),+) $body
        }
    };
}

macro_rules! combinations {
    ($($name:ident: $t:ty, $i:ty, $j:ty;)*) => {$(
        mod $name {
            use super::*;

            property!(64, fn exact_matches_reference(p in int_problem()) {
                prop_exact::<$t, $i, $j>(&p)?;
            });

            property!(64, fn non_integer_within_tolerance(p in float_problem()) {
                prop_tolerance::<$t, $i, $j>(&p)?;
            });

            property!(64, fn plan_symbolic_once_numeric_many(p in int_problem()) {
                prop_plan::<$t, $i, $j>(&p)?;
            });

            property!(64, fn numeric_with_beta(p in int_problem()) {
                prop_beta::<$t, $i, $j>(&p)?;
            });

            property!(64, fn unsorted_output_holds_the_sorted_entries(p in float_problem()) {
                prop_unsorted::<$t, $i, $j>(&p)?;
            });

            property!(64, fn bitwise_identical_across_thread_counts(p in float_problem()) {
                prop_deterministic::<$t, $i, $j>(&p)?;
            });

            property!(64, fn changed_pattern_is_refused(
                p in int_problem(),
                change_b in any::<bool>(),
                choice in any::<Pick>(),
                pick in any::<Pick>(),
                pick2 in any::<Pick>(),
            ) {
                prop_changed_pattern::<$t, $i, $j>(&p, change_b, choice, pick, pick2)?;
            });

            property!(32, fn wide_inner_dimension_gives_the_same_product(p in int_problem()) {
                prop_wide_inner::<$t, $i, $j>(&p)?;
            });

            property!(32, fn inner_dimension_mismatch_is_refused(p in mismatched_problem()) {
                prop_mismatch::<$t, $i, $j>(&p)?;
            });
        }
    )*};
}

type C32 = Complex<f32>;
type C64 = Complex<f64>;

combinations! {
    f32_i32_i32: f32, i32, i32;
    f32_i64_i64: f32, i64, i64;
    f32_i64_i32: f32, i64, i32;
    f32_i32_i64: f32, i32, i64;
    f64_i32_i32: f64, i32, i32;
    f64_i64_i64: f64, i64, i64;
    f64_i64_i32: f64, i64, i32;
    f64_i32_i64: f64, i32, i64;
    c32_i32_i32: C32, i32, i32;
    c32_i64_i64: C32, i64, i64;
    c32_i64_i32: C32, i64, i32;
    c32_i32_i64: C32, i32, i64;
    c64_i32_i32: C64, i32, i32;
    c64_i64_i64: C64, i64, i64;
    c64_i64_i32: C64, i64, i32;
    c64_i32_i64: C64, i32, i64;
}

// ---------------------------------------------------------------------------
// Fixed cases
// ---------------------------------------------------------------------------

/// `ColumnOrder::Any` really skips the sort where an algorithm sorts: a
/// row whose columns first appear as 5, 2, 4 is written in that order by
/// the hash accumulator (BRMerge merges, and the dense accumulator sorts
/// rows of few products and merges rows of A with two entries, so they
/// sort anyway), and sorted by default; the dense accumulator keeps the
/// order on a row of many scattered products.
#[test]
fn any_column_order_skips_the_sort() {
    // A = [1 1], B = [[0 0 0 0 0 1], [0 0 2 0 3 0]]: C = [0 0 2 0 3 1].
    let a =
        CsrMatrix::<f64, i32>::from_triplets(1, 2, &[(0, 0, 1.0), (0, 1, 1.0)], IndexBase::Zero)
            .unwrap();
    let b = CsrMatrix::<f64, i32>::from_triplets(
        2,
        6,
        &[(0, 5, 1.0), (1, 2, 2.0), (1, 4, 3.0)],
        IndexBase::Zero,
    )
    .unwrap();
    for algorithm in [
        Algorithm::Hash,
        Algorithm::Dense,
        Algorithm::BrmergePrecise,
        Algorithm::BrmergeUpper,
    ] {
        let run = |column_order| {
            let opts = SpgemmOptions {
                algorithm,
                column_order,
                ..SpgemmOptions::default()
            };
            rusparse::spgemm(&a.view(), &b.view(), &opts).unwrap()
        };
        let sorted = run(ColumnOrder::Sorted);
        assert_eq!(sorted.col_indices(), [2, 4, 5], "{algorithm:?}");
        assert_eq!(sorted.values(), [2.0, 3.0, 1.0], "{algorithm:?}");
        let any = run(ColumnOrder::Any);
        // BRMerge merges, and the dense accumulator sorts the products of
        // rows with at most 32 of them (keys sorted in registers).
        let sorts_anyway = matches!(
            algorithm,
            Algorithm::BrmergePrecise | Algorithm::BrmergeUpper | Algorithm::Dense
        );
        let (cols, vals) = if sorts_anyway {
            ([2, 4, 5], [2.0, 3.0, 1.0])
        } else {
            ([5, 2, 4], [1.0, 2.0, 3.0])
        };
        assert_eq!(any.col_indices(), cols, "{algorithm:?}");
        assert_eq!(any.values(), vals, "{algorithm:?}");
    }

    // The dense accumulator on a row of 35 scattered products (of three
    // entries of A: a row of two is a merge, sorted anyway): B's row 0
    // holds columns 50,000, 51,000, ..., row 1 columns 0, 1,000, ..., row
    // 2 column 99,999; in any order the row keeps the order the columns
    // first appear in.
    let n = 100_000;
    let a = CsrMatrix::<f64, i32>::from_triplets(
        1,
        3,
        &[(0, 0, 1.0), (0, 1, 1.0), (0, 2, 1.0)],
        IndexBase::Zero,
    )
    .unwrap();
    let b_entries: Vec<(usize, usize, f64)> = (0..17)
        .flat_map(|k| [(0, 50_000 + 1000 * k, 1.0), (1, 1000 * k, 2.0)])
        .chain([(2, n - 1, 3.0)])
        .collect();
    let b = CsrMatrix::<f64, i32>::from_triplets(3, n, &b_entries, IndexBase::Zero).unwrap();
    let run = |column_order| {
        let opts = SpgemmOptions {
            algorithm: Algorithm::Dense,
            column_order,
            ..SpgemmOptions::default()
        };
        rusparse::spgemm(&a.view(), &b.view(), &opts).unwrap()
    };
    let first_seen: Vec<i32> = (0..17)
        .map(|k| 50_000 + 1000 * k)
        .chain((0..17).map(|k| 1000 * k))
        .chain([n as i32 - 1])
        .collect();
    let mut sorted_cols = first_seen.clone();
    sorted_cols.sort_unstable();
    assert_eq!(run(ColumnOrder::Any).col_indices(), first_seen);
    assert_eq!(run(ColumnOrder::Sorted).col_indices(), sorted_cols);
}

/// `op = C` really conjugates: A = [[1+2i, 0], [3i, 1]], B = I.
#[test]
fn conjugate_transpose_conjugates() {
    let a = CsrMatrix::<C64, i32>::from_triplets(
        2,
        2,
        &[
            (0, 0, Complex::new(1.0, 2.0)),
            (1, 0, Complex::new(0.0, 3.0)),
            (1, 1, Complex::new(1.0, 0.0)),
        ],
        IndexBase::Zero,
    )
    .unwrap();
    let id = CsrMatrix::<C64, i32>::from_triplets(
        2,
        2,
        &[
            (0, 0, Complex::new(1.0, 0.0)),
            (1, 1, Complex::new(1.0, 0.0)),
        ],
        IndexBase::Zero,
    )
    .unwrap();
    let product = |op_a, op_b, x: &CsrMatrix<C64, i32>, y: &CsrMatrix<C64, i32>| {
        let opts = SpgemmOptions {
            op_a,
            op_b,
            ..Default::default()
        };
        rusparse::spgemm(&x.view(), &y.view(), &opts).unwrap()
    };
    // Aᴴ = [[1-2i, -3i], [0, 1]]
    let ah = product(Op::C, Op::N, &a, &id);
    assert_eq!(ah.row_offsets(), &[0, 2, 3]);
    assert_eq!(ah.col_indices(), &[0, 1, 1]);
    assert_eq!(
        ah.values(),
        &[
            Complex::new(1.0, -2.0),
            Complex::new(0.0, -3.0),
            Complex::new(1.0, 0.0)
        ]
    );
    // Aᵀ keeps the signs.
    let at = product(Op::T, Op::N, &a, &id);
    assert_eq!(
        at.values(),
        &[
            Complex::new(1.0, 2.0),
            Complex::new(0.0, 3.0),
            Complex::new(1.0, 0.0)
        ]
    );
    // I * Aᴴ through op_b.
    let ah_b = product(Op::N, Op::C, &id, &a);
    assert_eq!(ah_b, ah);
    // AᴴA = [[14, -3i], [3i, 1]]: (1-2i)(1+2i) + (-3i)(3i) = 5 + 9 = 14.
    let aha = product(Op::C, Op::N, &a, &a);
    assert_eq!(aha.col_indices(), &[0, 1, 0, 1]);
    assert_eq!(
        aha.values(),
        &[
            Complex::new(14.0, 0.0),
            Complex::new(0.0, -3.0),
            Complex::new(0.0, 3.0),
            Complex::new(1.0, 0.0)
        ]
    );
    assert_eq!(
        aha,
        reference::spgemm(&a.view(), Op::C, &a.view(), Op::N, Complex::new(1.0, 0.0)).unwrap()
    );
}

/// Duplicates within a row are summed and unsorted columns come out sorted,
/// with base 1 kept in the output.
#[test]
fn duplicates_summed_and_columns_sorted() {
    // A = one row with columns 2, 0, 2, 1 (1-based output).
    let a = CsrMatrix::<f64, i64, i32>::from_triplets(
        1,
        3,
        &[(0, 2, 1.0), (0, 0, 2.0), (0, 2, 3.0), (0, 1, -1.0)],
        IndexBase::One,
    )
    .unwrap();
    let id = CsrMatrix::<f64, i64, i32>::from_triplets(
        3,
        3,
        &[(2, 2, 1.0), (0, 0, 1.0), (1, 1, 1.0)],
        IndexBase::One,
    )
    .unwrap();
    let c = rusparse::spgemm(&a.view(), &id.view(), &SpgemmOptions::default()).unwrap();
    assert_eq!(c.base(), IndexBase::One);
    assert_eq!(c.row_offsets(), &[1, 4]);
    assert_eq!(c.col_indices(), &[1, 2, 3]);
    assert_eq!(c.values(), &[2.0, -1.0, 4.0]);
}

/// A symbolic phase run on a changed pattern with the planned nnz (an
/// entry of A moved, values the same) may be accepted, as it does not hash
/// the patterns; the numeric phase on the planned operands must then give
/// their product or refuse, for every algorithm. BRMerge-Upper's temporary
/// C, made from the moved pattern with the same values, must not be copied.
#[test]
fn symbolic_on_a_moved_entry_never_leaks_into_the_product() {
    let ctx = Context::cpu().unwrap();
    let a = CsrMatrix::<f64, i32>::from_triplets(1, 2, &[(0, 0, 1.0)], IndexBase::Zero).unwrap();
    let moved =
        CsrMatrix::<f64, i32>::from_triplets(1, 2, &[(0, 1, 1.0)], IndexBase::Zero).unwrap();
    let b =
        CsrMatrix::<f64, i32>::from_triplets(2, 2, &[(0, 0, 2.0), (1, 1, 3.0)], IndexBase::Zero)
            .unwrap();
    let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 1.0).unwrap();
    for algorithm in [
        Algorithm::Hash,
        Algorithm::Dense,
        Algorithm::BrmergePrecise,
        Algorithm::BrmergeUpper,
    ] {
        let mut plan =
            SpgemmPlan::new(&ctx, &a.view(), Op::N, &b.view(), Op::N, algorithm).unwrap();
        assert_eq!(plan.selected_algorithm(), algorithm);
        if plan.symbolic(&ctx, &moved.view(), &b.view()).is_err() {
            continue;
        }
        let r = plan.execute(&ctx, &moved.view(), &b.view(), 1.0);
        assert!(is_invalid(&r), "{algorithm:?}: the moved A accepted");
        match plan.execute(&ctx, &a.view(), &b.view(), 1.0) {
            Ok(c) => assert_eq!(c, want, "{algorithm:?}"),
            Err(e) => assert!(matches!(e, Error::InvalidValue(_)), "{algorithm:?}: {e}"),
        }
    }
}

/// Regression: a pattern change must be refused even when the fingerprint
/// of the plan collides. A (1 x 4) has columns [0, 1, 2, 3] and A' has
/// [2, 3, 2, 3] (same row offsets). The 4-lane fingerprint hashes x0 and x1
/// in lanes seeded `s` and `s ^ 1`, so a quad starting with [2j, 2j + 1]
/// makes lanes 0 and 1 equal for every j, and the symmetric lane combine
/// (`mix(l0, l1)` only sees `l0 ^ l1`) cancels them. With `op_a = T` the plan
/// keeps A's transposed pattern, so A' is silently multiplied with A's
/// pattern: the result is Aᵀ·B = [1, 2, 3, 4]ᵀ instead of an error (A'ᵀ·B
/// only has rows 2 and 3, with 4 and 6).
#[test]
fn changed_pattern_with_pairwise_swapped_columns_is_refused() {
    let ctx = Context::cpu().unwrap();
    let vals = vec![1.0, 2.0, 3.0, 4.0];
    let a = CsrMatrix::<f64, i32>::try_from_parts(
        1,
        4,
        vec![0, 4],
        vec![0, 1, 2, 3],
        vals.clone(),
        IndexBase::Zero,
    )
    .unwrap();
    let a2 = CsrMatrix::<f64, i32>::try_from_parts(
        1,
        4,
        vec![0, 4],
        vec![2, 3, 2, 3],
        vals,
        IndexBase::Zero,
    )
    .unwrap();
    let b = CsrMatrix::<f64, i32>::from_triplets(1, 1, &[(0, 0, 1.0)], IndexBase::Zero).unwrap();
    let mut accepted = Vec::new();
    for op_a in [Op::N, Op::T] {
        let b = if op_a == Op::N {
            CsrMatrix::<f64, i32>::from_triplets(
                4,
                1,
                &[(0, 0, 1.0), (1, 0, 1.0), (2, 0, 1.0), (3, 0, 1.0)],
                IndexBase::Zero,
            )
            .unwrap()
        } else {
            b.clone()
        };
        let mut plan =
            SpgemmPlan::new(&ctx, &a.view(), op_a, &b.view(), Op::N, Algorithm::Default).unwrap();
        plan.symbolic(&ctx, &a.view(), &b.view()).unwrap();
        let r = plan.execute(&ctx, &a2.view(), &b.view(), 1.0);
        let want = reference::spgemm(&a2.view(), op_a, &b.view(), Op::N, 1.0).unwrap();
        if !is_invalid(&r) {
            accepted.push(format!(
                "op_a = {op_a:?}: got {:?}, op(A')·B has values {:?} with row offsets {:?}",
                r.as_ref()
                    .map(|c| (c.row_offsets().to_vec(), c.values().to_vec())),
                want.values(),
                want.row_offsets()
            ));
        }
    }
    assert!(
        accepted.is_empty(),
        "A' accepted by a plan made for A:\n{}",
        accepted.join("\n")
    );
}

/// Values on a known structure (`CsrOutput::values_on_pattern`, the reuse
/// flow's numeric phase) on a product large enough for the known-structure
/// kernel: the values of the structure the plan wrote (the columns it
/// fingerprinted, which skip the per-column counts), the same values on a
/// copy of those columns shifted to base one (not the fingerprinted
/// columns: counted), and INVALID_VALUE for a structure in which a
/// product's column is missing.
#[test]
fn values_on_pattern_use_and_check_the_structure() {
    let ctx = Context::cpu().unwrap();
    // A: 64 x 6 with 3 entries a row; B: 6 x 6 tridiagonal. Every C row
    // has products well above the kernel's threshold (6 columns).
    let mut ta = Vec::new();
    for i in 0..64usize {
        for k in 0..3 {
            ta.push((i, (i + 2 * k) % 6, (i * 3 + k) as f64 + 0.5));
        }
    }
    let mut tb = Vec::new();
    for i in 0..6usize {
        for j in i.saturating_sub(1)..(i + 2).min(6) {
            tb.push((i, j, (i + 2 * j) as f64 - 2.5));
        }
    }
    let a = CsrMatrix::<f64, i32>::from_triplets(64, 6, &ta, IndexBase::Zero).unwrap();
    let b = CsrMatrix::<f64, i32>::from_triplets(6, 6, &tb, IndexBase::Zero).unwrap();
    let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 2.0).unwrap();
    for algorithm in [Algorithm::Default, Algorithm::Hash, Algorithm::Dense] {
        let (plan, nnz, ro, cols) = planned_structure(&ctx, &a, &b, algorithm);
        let mut vals = vec![f64::NAN; nnz];
        let out = CsrOutput::<f64, i32, i32>::values_on_pattern(&mut vals, &cols, IndexBase::Zero);
        plan.numeric(&ctx, &a.view(), &b.view(), 2.0, 0.0, out)
            .unwrap();
        assert_eq!(&vals[..], want.values(), "{algorithm:?}");
        let one_based: Vec<i32> = cols.iter().map(|c| c + 1).collect();
        let mut vals1 = vec![f64::NAN; nnz];
        let out =
            CsrOutput::<f64, i32, i32>::values_on_pattern(&mut vals1, &one_based, IndexBase::One);
        plan.numeric(&ctx, &a.view(), &b.view(), 2.0, 0.0, out)
            .unwrap();
        assert_eq!(&vals1[..], want.values(), "{algorithm:?}, base one");
        // The first row's last column replaced by its first: a column listed
        // twice, and products with nowhere to go.
        let mut wrong = cols.clone();
        let row0 = ro[1] as usize;
        wrong[row0 - 1] = wrong[0];
        let out = CsrOutput::<f64, i32, i32>::values_on_pattern(&mut vals, &wrong, IndexBase::Zero);
        let r = plan.numeric(&ctx, &a.view(), &b.view(), 2.0, 0.0, out);
        assert!(is_invalid(&r), "{algorithm:?}: {}", describe(&r));
    }
}

/// A plan of `a * b` (zero-based `i32`) through its symbolic phase, with
/// C's structure written: the plan, nnz(C), C's row offsets and columns.
fn planned_structure(
    ctx: &Context,
    a: &CsrMatrix<f64, i32>,
    b: &CsrMatrix<f64, i32>,
    algorithm: Algorithm,
) -> (SpgemmPlan<i32, i32>, usize, Vec<i32>, Vec<i32>) {
    let mut plan = SpgemmPlan::new(ctx, &a.view(), Op::N, &b.view(), Op::N, algorithm).unwrap();
    let nnz = plan.symbolic(ctx, &a.view(), &b.view()).unwrap();
    let (mut ro, mut cols) = (vec![0i32; a.nrows() + 1], vec![0i32; nnz]);
    plan.write_structure(
        ctx,
        &a.view(),
        &b.view(),
        &mut ro,
        &mut cols,
        IndexBase::Zero,
    )
    .unwrap();
    (plan, nnz, ro, cols)
}

/// `PatternCheck::Caller` skips the hashes: the same values as with the
/// hashes while the patterns are unchanged; a changed pattern of A (same
/// nnz) that the hash refuses is computed instead; and a wrong values-only
/// pattern (a column listed twice, leaving a product in the accumulator)
/// gives that call wrong values but no later product of the context
/// inherits the leftover.
#[test]
fn pattern_check_caller_skips_the_hashes() {
    let ctx = Context::cpu().unwrap();
    let a = seeded::<f64>(200, 40, 3, 11, |x| x as f64 - 2.5);
    let b = seeded::<f64>(40, 30, 4, 12, |x| x as f64 * 0.5 + 1.0);
    let want = reference::spgemm(&a.view(), Op::N, &b.view(), Op::N, 2.0).unwrap();
    // A with one column moved within its row: same shape and nnz.
    let (mut moved_cols, offsets) = (a.col_indices().to_vec(), a.row_offsets().to_vec());
    let row = (0..200)
        .find(|&i| offsets[i + 1] - offsets[i] >= 1)
        .unwrap();
    let e = offsets[row] as usize;
    let taken: Vec<i32> = moved_cols[e..offsets[row + 1] as usize].to_vec();
    moved_cols[e] = (0..40).find(|c| !taken.contains(c)).unwrap();
    let moved =
        CsrView::try_new(200, 40, &offsets, &moved_cols, a.values(), IndexBase::Zero).unwrap();
    for algorithm in [Algorithm::Default, Algorithm::Hash, Algorithm::Dense] {
        let (mut plan, nnz, ro, cols) = planned_structure(&ctx, &a, &b, algorithm);
        let full = |plan: &SpgemmPlan<i32, i32>, a: &CsrView<'_, f64, i32, i32>| {
            let (mut o, mut c, mut v) = (vec![0i32; 201], vec![0i32; nnz], vec![0.0; nnz]);
            let out = CsrOutput::full(&mut o, &mut c, &mut v, IndexBase::Zero);
            plan.numeric(&ctx, a, &b.view(), 2.0, 0.0, out).map(|_| v)
        };
        let on_pattern = |plan: &SpgemmPlan<i32, i32>, cols: &[i32]| {
            let mut v = vec![f64::NAN; nnz];
            let out = CsrOutput::<f64, i32, i32>::values_on_pattern(&mut v, cols, IndexBase::Zero);
            plan.numeric(&ctx, &a.view(), &b.view(), 2.0, 0.0, out)
                .map(|_| v)
        };
        // The hash refuses the moved column.
        let r = full(&plan, &moved);
        assert!(is_invalid(&r), "{algorithm:?}: {}", describe(&r));
        plan.set_pattern_check(PatternCheck::Caller);
        assert_eq!(
            full(&plan, &a.view()).unwrap(),
            want.values(),
            "{algorithm:?}"
        );
        assert_eq!(
            on_pattern(&plan, &cols).unwrap(),
            want.values(),
            "{algorithm:?}"
        );
        // Vouched for, the moved column is not hashed: computed, or
        // refused by the kernels for another reason (a row size).
        if let Err(e) = full(&plan, &moved) {
            assert!(
                !e.to_string().contains("changed since"),
                "{algorithm:?}: {e}"
            );
        }
        // A column listed twice in the last row (so that no later row of
        // the call reads the product it leaves behind): wrong values for
        // this call only.
        let mut wrong = cols.clone();
        let last_row = ro[199] as usize;
        assert!(nnz - last_row >= 2, "test bug: C's last row is too short");
        wrong[nnz - 1] = wrong[last_row];
        let got = on_pattern(&plan, &wrong).unwrap();
        assert_ne!(
            got,
            want.values(),
            "{algorithm:?}: the wrong pattern went unnoticed"
        );
        assert_eq!(
            on_pattern(&plan, &cols).unwrap(),
            want.values(),
            "{algorithm:?}: a leftover"
        );
        // Hashed again, the moved column is refused again.
        plan.set_pattern_check(PatternCheck::Hash);
        let r = full(&plan, &moved);
        assert!(is_invalid(&r), "{algorithm:?}: {}", describe(&r));
    }
}

/// A random `rows x cols` matrix with `per_row` entries a row (repeats
/// merged), from a fixed seed.
fn seeded<T: Scalar>(
    rows: usize,
    cols: usize,
    per_row: usize,
    seed: u64,
    value: impl Fn(u64) -> T,
) -> CsrMatrix<T, i32> {
    let mut s = seed;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 33
    };
    let mut t = Vec::new();
    for i in 0..rows {
        for _ in 0..per_row {
            let j = next() as usize % cols;
            t.push((i, j, value(next() % 7)));
        }
    }
    CsrMatrix::from_triplets(rows, cols, &t, IndexBase::Zero).unwrap()
}

/// Scratch a context keeps between products (issue 28 part 3): products
/// of every algorithm and of two value types, run one after another on
/// one context, equal bit for bit those of a context that keeps nothing;
/// the kept bytes never exceed the limit, a lower limit frees the excess
/// and trimming frees everything.
#[test]
fn scratch_kept_between_products_changes_no_result() {
    let a = seeded(400, 3000, 6, 1, |v| v as f64 - 3.0);
    let b = seeded(3000, 5000, 5, 2, |v| 0.5 * v as f64 + 1.0);
    let wide = seeded(300, 9000, 40, 3, |v| v as f64);
    let ca = seeded(400, 3000, 6, 4, |v| Complex::new(v as f64, 1.0 - v as f64));
    let cb = seeded(3000, 5000, 5, 5, |v| Complex::new(1.0, v as f64));
    let mut kept = Context::cpu().unwrap();
    kept.set_num_threads(2).unwrap();
    let mut fresh = Context::cpu().unwrap();
    fresh.set_num_threads(2).unwrap();
    fresh.set_scratch_limit(0);
    for round in 0..2 {
        for algorithm in [
            Algorithm::Hash,
            Algorithm::Dense,
            Algorithm::BrmergePrecise,
            Algorithm::BrmergeUpper,
        ] {
            for column_order in [ColumnOrder::Sorted, ColumnOrder::Any] {
                let what = format!("{algorithm:?}, {column_order:?}, round {round}");
                // A rectangular wide-row product and one with a transposed B.
                let wide_b = seeded(9000, 700, 3, 6, |v| v as f64);
                for (x, y, op_b) in [
                    (&a, &b, Op::N),
                    (&wide, &wide_b, Op::N),
                    (&wide, &wide, Op::T),
                ] {
                    let opts = SpgemmOptions {
                        algorithm,
                        column_order,
                        op_b,
                        ..SpgemmOptions::default()
                    };
                    let want = fresh.spgemm(&x.view(), &y.view(), &opts).unwrap();
                    let got = kept.spgemm(&x.view(), &y.view(), &opts).unwrap();
                    assert_eq!(got.row_offsets(), want.row_offsets(), "{what}");
                    assert_eq!(got.col_indices(), want.col_indices(), "{what}");
                    let bits = |c: &CsrMatrix<f64, i32>| -> Vec<u64> {
                        c.values().iter().map(|v| v.to_bits()).collect()
                    };
                    assert_eq!(bits(&got), bits(&want), "{what}");
                }
                let copts = SpgemmOptions {
                    algorithm,
                    column_order,
                    ..SpgemmOptions::<Complex<f64>>::default()
                };
                let want = fresh.spgemm(&ca.view(), &cb.view(), &copts).unwrap();
                let got = kept.spgemm(&ca.view(), &cb.view(), &copts).unwrap();
                assert_eq!(got.col_indices(), want.col_indices(), "complex, {what}");
                assert_eq!(got.values(), want.values(), "complex, {what}");
                assert!(kept.scratch_bytes() > 0, "nothing kept after {what}");
                assert!(kept.scratch_bytes() <= kept.scratch_limit());
                assert_eq!(fresh.scratch_bytes(), 0, "{what}");
            }
        }
    }
    // A clone shares the scratch.
    let clone = kept.clone();
    assert_eq!(clone.scratch_bytes(), kept.scratch_bytes());
    kept.set_scratch_limit(64 << 10);
    assert!(kept.scratch_bytes() <= 64 << 10);
    kept.spgemm(&a.view(), &b.view(), &SpgemmOptions::default())
        .unwrap();
    assert!(kept.scratch_bytes() <= 64 << 10);
    let held = clone.scratch_bytes();
    assert_eq!(clone.trim_scratch(), held);
    assert_eq!(kept.scratch_bytes(), 0);
}
