//! `rusparse._rusparse`: the compiled half of the Python package.
//!
//! The pure-Python layer (`python/rusparse/__init__.py`) checks types and
//! shapes and turns scipy/CuPy matrices into CSR arrays; this module only
//! borrows those numpy arrays (no copy: their memory is read in place),
//! runs the product with the GIL released, and writes C straight into
//! numpy arrays allocated at nnz(C) between the symbolic and the numeric
//! phase, as a C program does with the C ABI's compute and copy (no copy
//! of C, and no pass that zero-fills it first).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use num_complex::{Complex32, Complex64};
use numpy::{
    dtype, Element, PyArray1, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray1,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use rusparse::{
    Algorithm, BackendKind, ColumnOrder, Context, CsrOutput, CsrView, Index, IndexBase, Op, Scalar,
    SpgemmOptions, SpgemmPlan,
};

mod device;

pyo3::create_exception!(
    _rusparse,
    Error,
    pyo3::exceptions::PyException,
    "A rusparse failure: args are (status name, status number, message)."
);

/// A rusparse error as the Python exception `_rusparse.Error(name, code,
/// message)`; the Python layer re-raises it as `rusparse.RusparseError`.
pub(crate) fn to_py(e: rusparse::Error) -> PyErr {
    let name = status_name(e.status_code());
    Error::new_err((name, e.status_code(), e.message().to_string()))
}

/// cuSPARSE's name of a status number (as `rusparseGetErrorName` has it,
/// without the prefix).
pub(crate) fn status_name(code: i32) -> &'static str {
    match code {
        0 => "SUCCESS",
        1 => "NOT_INITIALIZED",
        2 => "ALLOC_FAILED",
        3 => "INVALID_VALUE",
        4 => "ARCH_MISMATCH",
        5 => "MAPPING_ERROR",
        6 => "EXECUTION_FAILED",
        7 => "INTERNAL_ERROR",
        8 => "MATRIX_TYPE_NOT_SUPPORTED",
        9 => "ZERO_PIVOT",
        10 => "NOT_SUPPORTED",
        _ => "INSUFFICIENT_RESOURCES",
    }
}

/// A value type of both rusparse and numpy, and alpha converted to it.
trait Value: Scalar + Element {
    fn from_alpha(re: f64, im: f64) -> Self;
}

impl Value for f32 {
    fn from_alpha(re: f64, _: f64) -> Self {
        re as f32
    }
}

impl Value for f64 {
    fn from_alpha(re: f64, _: f64) -> Self {
        re
    }
}

impl Value for Complex32 {
    fn from_alpha(re: f64, im: f64) -> Self {
        Complex32::new(re as f32, im as f32)
    }
}

impl Value for Complex64 {
    fn from_alpha(re: f64, im: f64) -> Self {
        Complex64::new(re, im)
    }
}

trait Idx: Index + Element {}
impl Idx for i32 {}
impl Idx for i64 {}

/// One operand as the Python layer passes it: `(rows, cols, indptr,
/// indices, data)`, zero-based CSR, one-dimensional contiguous arrays.
#[derive(FromPyObject)]
struct Operand<'py> {
    #[pyo3(item(0))]
    rows: usize,
    #[pyo3(item(1))]
    cols: usize,
    #[pyo3(item(2))]
    indptr: Bound<'py, PyUntypedArray>,
    #[pyo3(item(3))]
    indices: Bound<'py, PyUntypedArray>,
    #[pyo3(item(4))]
    data: Bound<'py, PyUntypedArray>,
}

/// The operand's three arrays borrowed read-only (a numpy array written
/// meanwhile by another thread is refused by numpy's borrow checking).
struct Borrowed<'py, T: Element, I: Element> {
    rows: usize,
    cols: usize,
    indptr: PyReadonlyArray1<'py, I>,
    indices: PyReadonlyArray1<'py, I>,
    data: PyReadonlyArray1<'py, T>,
}

fn borrow<'py, T: Value, I: Idx>(x: &Operand<'py>) -> PyResult<Borrowed<'py, T, I>> {
    let cast = |a: &Bound<'py, PyUntypedArray>, what: &str| -> PyResult<Bound<'py, PyAny>> {
        if a.ndim() != 1 {
            return Err(PyValueError::new_err(format!(
                "{what} must be one-dimensional"
            )));
        }
        Ok(a.clone().into_any())
    };
    let indptr = cast(&x.indptr, "indptr")?;
    let indices = cast(&x.indices, "indices")?;
    let data = cast(&x.data, "data")?;
    let wrong = |what: &str| PyTypeError::new_err(format!("{what} has an unexpected dtype"));
    Ok(Borrowed {
        rows: x.rows,
        cols: x.cols,
        indptr: indptr.extract().map_err(|_| wrong("indptr"))?,
        indices: indices.extract().map_err(|_| wrong("indices"))?,
        data: data.extract().map_err(|_| wrong("data"))?,
    })
}

/// An operand's shape and arrays, not yet validated.
struct Slices<'a, T, I> {
    rows: usize,
    cols: usize,
    indptr: &'a [I],
    indices: &'a [I],
    data: &'a [T],
}

impl<'a, T: Value, I: Idx> Slices<'a, T, I> {
    /// The operand as a validated view (validation runs in the current
    /// rayon pool).
    fn view(&self) -> rusparse::Result<CsrView<'a, T, I, I>> {
        CsrView::try_new(
            self.rows,
            self.cols,
            self.indptr,
            self.indices,
            self.data,
            IndexBase::Zero,
        )
    }

    /// Whether `other` is the same matrix (the same arrays): A·A.
    fn same(&self, other: &Self) -> bool {
        (self.rows, self.cols) == (other.rows, other.cols)
            && std::ptr::eq(self.indptr, other.indptr)
            && std::ptr::eq(self.indices, other.indices)
            && std::ptr::eq(self.data, other.data)
    }
}

impl<T: Value, I: Idx> Borrowed<'_, T, I> {
    fn slices(&self) -> PyResult<Slices<'_, T, I>> {
        fn slice<X>(r: Result<&[X], numpy::NotContiguousError>) -> PyResult<&[X]> {
            r.map_err(|_| PyValueError::new_err("arrays must be contiguous"))
        }
        Ok(Slices {
            rows: self.rows,
            cols: self.cols,
            indptr: slice(self.indptr.as_slice())?,
            indices: slice(self.indices.as_slice())?,
            data: slice(self.data.as_slice())?,
        })
    }

    fn view(&self) -> PyResult<CsrView<'_, T, I, I>> {
        self.slices()?.view().map_err(to_py)
    }
}

pub(crate) fn parse_op(op: &str) -> PyResult<Op> {
    match op {
        "N" | "n" => Ok(Op::N),
        "T" | "t" => Ok(Op::T),
        "C" | "c" | "H" | "h" => Ok(Op::C),
        _ => Err(PyValueError::new_err(format!(
            "op must be 'N', 'T' or 'C' (conjugate transpose), not {op:?}"
        ))),
    }
}

pub(crate) fn parse_algorithm(name: &str) -> PyResult<Algorithm> {
    if name == "auto" {
        return Ok(Algorithm::Default);
    }
    Algorithm::all()
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| {
            let names: Vec<&str> = Algorithm::all().iter().map(|a| a.name()).collect();
            PyValueError::new_err(format!(
                "algorithm must be 'auto' or one of {}, not {name:?}",
                names.join(", ")
            ))
        })
}

/// The CPU context for `threads` (None: RUSPARSE_NUM_THREADS or all
/// cores) on the calling thread. Kept per thread and thread count, so a
/// count starts its thread pool once; like a C handle it keeps scratch
/// memory between products (up to RUSPARSE_SCRATCH_LIMIT, 256 MiB by
/// default), so repeated products do not allocate and page-fault it again.
/// Its pool includes the calling thread
/// ([`Context::set_num_threads_with_caller`]): the product computes on the
/// thread that called, which otherwise slept while the pool's threads
/// woke up to take it over, and at 2 threads after other Python work
/// sometimes took twice as long.
fn context(threads: Option<usize>) -> PyResult<Context> {
    type Key = (std::thread::ThreadId, Option<usize>);
    static CONTEXTS: OnceLock<Mutex<HashMap<Key, Context>>> = OnceLock::new();
    let mut map = CONTEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let key = (std::thread::current().id(), threads);
    if let Some(ctx) = map.get(&key) {
        return Ok(ctx.clone());
    }
    let mut ctx = Context::new(BackendKind::Cpu).map_err(to_py)?;
    let n = match threads {
        Some(0) => return Err(PyValueError::new_err("threads must be at least 1")),
        Some(n) => n,
        None => ctx.num_threads(),
    };
    // A thread belongs to one pool: a second thread count on this thread
    // (or a thread rayon already runs) gets a pool of its own, also for
    // the default count (loops started on this thread would otherwise run
    // in the pool it belongs to).
    if n < 2 || ctx.set_num_threads_with_caller(n).is_err() {
        ctx.set_num_threads(n).map_err(to_py)?;
    }
    map.insert(key, ctx.clone());
    Ok(ctx)
}

/// C's arrays (row offsets, columns, values) as numpy arrays.
type Arrays<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

struct Call {
    op_a: Op,
    op_b: Op,
    alpha: (f64, f64),
    algorithm: Algorithm,
    order: ColumnOrder,
    threads: Option<usize>,
}

/// New numpy arrays for C's `rows + 1` row offsets and `nnz` columns and
/// values, uninitialised: the numeric phase writes every entry (checked
/// against these lengths) before anything reads them, and on an error they
/// are dropped unread.
type CArrays<'py, T, I> = (
    Bound<'py, PyArray1<I>>,
    Bound<'py, PyArray1<I>>,
    Bound<'py, PyArray1<T>>,
);

fn new_c_arrays<'py, T: Value, I: Idx>(
    py: Python<'py>,
    rows: usize,
    nnz: usize,
) -> CArrays<'py, T, I> {
    // SAFETY: see above; nothing reads the arrays before rusparse has
    // written them.
    unsafe {
        (
            PyArray1::<I>::new(py, [rows + 1], false),
            PyArray1::<I>::new(py, [nnz], false),
            PyArray1::<T>::new(py, [nnz], false),
        )
    }
}

/// The numeric phase of `plan` into new numpy arrays of C (row offsets,
/// columns, values), written in place by rusparse, as the C ABI's `copy`
/// writes a caller's arrays: numpy allocates them uninitialised (no pass
/// that zero-fills C before rusparse writes it), and they are returned
/// without a copy. The GIL is released during the product.
fn numeric_into_numpy<'py, T: Value, I: Idx>(
    py: Python<'py>,
    plan: &SpgemmPlan<I, I>,
    ctx: &Context,
    a: &CsrView<'_, T, I, I>,
    b: &CsrView<'_, T, I, I>,
    alpha: T,
    order: ColumnOrder,
) -> PyResult<Arrays<'py>> {
    let Some(nnz) = plan.nnz() else {
        return Err(PyValueError::new_err("the symbolic phase has not run"));
    };
    let (m, _) = plan.shape();
    let (indptr, indices, data) = new_c_arrays::<T, I>(py, m, nnz);
    {
        // SAFETY: the arrays were just made here; nothing else holds them.
        let (o, c, v) = unsafe {
            (
                indptr.as_slice_mut(),
                indices.as_slice_mut(),
                data.as_slice_mut(),
            )
        };
        let (o, c, v) = (
            o.map_err(|_| PyValueError::new_err("not contiguous"))?,
            c.map_err(|_| PyValueError::new_err("not contiguous"))?,
            v.map_err(|_| PyValueError::new_err("not contiguous"))?,
        );
        py.detach(|| {
            let out = CsrOutput::full(o, c, v, IndexBase::Zero).with_column_order(order);
            plan.numeric(ctx, a, b, alpha, T::zero(), out)
        })
        .map_err(to_py)?;
    }
    Ok((indptr.into_any(), indices.into_any(), data.into_any()))
}

/// C's numpy arrays, made at nnz(C) by [`spgemm_typed`]'s allocation.
type Made<T, I> = (Py<PyArray1<I>>, Py<PyArray1<I>>, Py<PyArray1<T>>);

fn spgemm_typed<'py, T: Value, I: Idx>(
    py: Python<'py>,
    a: &Operand<'py>,
    b: &Operand<'py>,
    call: &Call,
) -> PyResult<Arrays<'py>> {
    let (ba, bb) = (borrow::<T, I>(a)?, borrow::<T, I>(b)?);
    let (sa, sb) = (ba.slices()?, bb.slices()?);
    let ctx = context(call.threads)?;
    let opts = SpgemmOptions {
        op_a: call.op_a,
        op_b: call.op_b,
        alpha: T::from_alpha(call.alpha.0, call.alpha.1),
        algorithm: call.algorithm,
        column_order: call.order,
    };
    let mut made: Option<Made<T, I>> = None;
    // One call with the GIL released, all of it on the context's pool (one
    // hand-over to its threads, not one per phase: a 10 x 10 product took
    // 75 us with five): the operands validated (once for A·A), the phases
    // back to back with nothing fingerprinted (the arrays stay borrowed),
    // and C's arrays made by numpy at nnz(C), uninitialised, for the
    // numeric phase to write (the pool's thread takes the GIL for that).
    py.detach(|| {
        ctx.run(|| {
            let va = sa.view()?;
            let vb = if sa.same(&sb) { va } else { sb.view()? };
            ctx.spgemm_into(&va, &vb, &opts, |rows, nnz| {
                Python::attach(|py| {
                    let (o, c, v) = new_c_arrays::<T, I>(py, rows, nnz);
                    // SAFETY: the arrays are new, contiguous and held in
                    // `made` until the numeric phase has written them; nothing
                    // else refers to them before they are returned.
                    let out = unsafe {
                        CsrOutput::full(
                            std::slice::from_raw_parts_mut(o.data(), rows + 1),
                            std::slice::from_raw_parts_mut(c.data(), nnz),
                            std::slice::from_raw_parts_mut(v.data(), nnz),
                            IndexBase::Zero,
                        )
                    };
                    made = Some((o.unbind(), c.unbind(), v.unbind()));
                    Ok(out)
                })
            })
        })
    })
    .map_err(to_py)?;
    let (o, c, v) = made.ok_or_else(|| PyValueError::new_err("C was not made"))?;
    Ok((
        o.into_bound(py).into_any(),
        c.into_bound(py).into_any(),
        v.into_bound(py).into_any(),
    ))
}

/// Runs `f::<T, I>` for the value and index dtypes of `a`'s arrays (the
/// Python layer made B's the same).
macro_rules! dispatch {
    ($py:expr, $a:expr, $f:ident ( $($arg:expr),* )) => {{
        let py = $py;
        let value = $a.data.dtype();
        let index = $a.indices.dtype();
        let wide = if index.is_equiv_to(&dtype::<i64>(py)) {
            true
        } else if index.is_equiv_to(&dtype::<i32>(py)) {
            false
        } else {
            return Err(PyTypeError::new_err(format!(
                "index arrays must be int32 or int64, not {index}"
            )));
        };
        macro_rules! by_index {
            ($t:ty) => {
                if wide {
                    $f::<$t, i64>($($arg),*)
                } else {
                    $f::<$t, i32>($($arg),*)
                }
            };
        }
        if value.is_equiv_to(&dtype::<f64>(py)) {
            by_index!(f64)
        } else if value.is_equiv_to(&dtype::<f32>(py)) {
            by_index!(f32)
        } else if value.is_equiv_to(&dtype::<Complex64>(py)) {
            by_index!(Complex64)
        } else if value.is_equiv_to(&dtype::<Complex32>(py)) {
            by_index!(Complex32)
        } else {
            Err(PyTypeError::new_err(format!(
                "values must be float32, float64, complex64 or complex128, not {value}"
            )))
        }
    }};
}

/// `C = alpha * op(A) * op(B)` of two zero-based CSR operands given as
/// `(rows, cols, indptr, indices, data)` with the same dtypes; returns
/// `(indptr, indices, data)` of C. The GIL is released during the product.
#[pyfunction]
#[pyo3(signature = (a, b, op_a, op_b, alpha, threads, sorted, algorithm))]
#[allow(clippy::too_many_arguments)]
fn spgemm<'py>(
    py: Python<'py>,
    a: Operand<'py>,
    b: Operand<'py>,
    op_a: &str,
    op_b: &str,
    alpha: (f64, f64),
    threads: Option<usize>,
    sorted: bool,
    algorithm: &str,
) -> PyResult<Arrays<'py>> {
    let call = Call {
        op_a: parse_op(op_a)?,
        op_b: parse_op(op_b)?,
        alpha,
        algorithm: parse_algorithm(algorithm)?,
        order: if sorted {
            ColumnOrder::Sorted
        } else {
            ColumnOrder::Any
        },
        threads,
    };
    dispatch!(py, a, spgemm_typed(py, &a, &b, &call))
}

fn predict_typed<'py, T: Value, I: Idx>(
    py: Python<'py>,
    a: &Operand<'py>,
    b: &Operand<'py>,
    ops: (Op, Op),
    threads: Option<usize>,
) -> PyResult<(u64, u64, bool)> {
    let (ba, bb) = (borrow::<T, I>(a)?, borrow::<T, I>(b)?);
    let (va, vb) = (ba.view()?, bb.view()?);
    let opts = SpgemmOptions::<T> {
        op_a: ops.0,
        op_b: ops.1,
        ..SpgemmOptions::default()
    };
    let ctx = context(threads)?;
    let p = py
        .detach(|| ctx.predict_nnz(&va, &vb, &opts))
        .map_err(to_py)?;
    Ok((p.nnz, p.nprod, p.exact))
}

/// Predicted nnz(C) of `op(A) * op(B)`: `(nnz, nprod, exact)`.
#[pyfunction]
#[pyo3(signature = (a, b, op_a, op_b, threads))]
fn predict_nnz<'py>(
    py: Python<'py>,
    a: Operand<'py>,
    b: Operand<'py>,
    op_a: &str,
    op_b: &str,
    threads: Option<usize>,
) -> PyResult<(u64, u64, bool)> {
    let ops = (parse_op(op_a)?, parse_op(op_b)?);
    dispatch!(py, a, predict_typed(py, &a, &b, ops, threads))
}

/// A planned product for one pair of patterns of either index width.
enum AnyPlan {
    Narrow(SpgemmPlan<i32, i32>),
    Wide(SpgemmPlan<i64, i64>),
}

trait PlanOf: Idx {
    fn wrap(plan: SpgemmPlan<Self, Self>) -> AnyPlan;
    fn unwrap(plan: &AnyPlan) -> Option<&SpgemmPlan<Self, Self>>;
}

impl PlanOf for i32 {
    fn wrap(plan: SpgemmPlan<i32, i32>) -> AnyPlan {
        AnyPlan::Narrow(plan)
    }
    fn unwrap(plan: &AnyPlan) -> Option<&SpgemmPlan<i32, i32>> {
        match plan {
            AnyPlan::Narrow(p) => Some(p),
            AnyPlan::Wide(_) => None,
        }
    }
}

impl PlanOf for i64 {
    fn wrap(plan: SpgemmPlan<i64, i64>) -> AnyPlan {
        AnyPlan::Wide(plan)
    }
    fn unwrap(plan: &AnyPlan) -> Option<&SpgemmPlan<i64, i64>> {
        match plan {
            AnyPlan::Wide(p) => Some(p),
            AnyPlan::Narrow(_) => None,
        }
    }
}

/// The symbolic phase of `op(A) * op(B)`, kept for products of the same
/// patterns with new values (`execute`).
#[pyclass(module = "rusparse._rusparse")]
struct Plan {
    plan: AnyPlan,
    ctx: Context,
}

fn plan_typed<'py, T: Value, I: Idx + PlanOf>(
    py: Python<'py>,
    a: &Operand<'py>,
    b: &Operand<'py>,
    (op_a, op_b, algorithm): (Op, Op, Algorithm),
    ctx: Context,
) -> PyResult<Plan> {
    let (ba, bb) = (borrow::<T, I>(a)?, borrow::<T, I>(b)?);
    let (va, vb) = (ba.view()?, bb.view()?);
    let plan = py
        .detach(|| {
            let mut plan = SpgemmPlan::new(&ctx, &va, op_a, &vb, op_b, algorithm)?;
            plan.symbolic(&ctx, &va, &vb)?;
            Ok(plan)
        })
        .map_err(to_py)?;
    Ok(Plan {
        plan: I::wrap(plan),
        ctx,
    })
}

fn execute_typed<'py, T: Value, I: Idx + PlanOf>(
    py: Python<'py>,
    plan: &Plan,
    a: &Operand<'py>,
    b: &Operand<'py>,
    alpha: (f64, f64),
) -> PyResult<Arrays<'py>> {
    let Some(p) = I::unwrap(&plan.plan) else {
        return Err(PyTypeError::new_err(
            "the index dtype differs from the one the plan was made with",
        ));
    };
    let (ba, bb) = (borrow::<T, I>(a)?, borrow::<T, I>(b)?);
    let (va, vb) = (ba.view()?, bb.view()?);
    let alpha = T::from_alpha(alpha.0, alpha.1);
    numeric_into_numpy(py, p, &plan.ctx, &va, &vb, alpha, ColumnOrder::Sorted)
}

#[pymethods]
impl Plan {
    #[new]
    #[pyo3(signature = (a, b, op_a, op_b, threads, algorithm))]
    fn new<'py>(
        py: Python<'py>,
        a: Operand<'py>,
        b: Operand<'py>,
        op_a: &str,
        op_b: &str,
        threads: Option<usize>,
        algorithm: &str,
    ) -> PyResult<Plan> {
        let how = (
            parse_op(op_a)?,
            parse_op(op_b)?,
            parse_algorithm(algorithm)?,
        );
        let ctx = context(threads)?;
        dispatch!(py, a, plan_typed(py, &a, &b, how, ctx.clone()))
    }

    /// nnz(C) of the planned product.
    #[getter]
    fn nnz(&self) -> Option<usize> {
        match &self.plan {
            AnyPlan::Narrow(p) => p.nnz(),
            AnyPlan::Wide(p) => p.nnz(),
        }
    }

    /// The algorithm the planner chose.
    #[getter]
    fn algorithm(&self) -> &'static str {
        match &self.plan {
            AnyPlan::Narrow(p) => p.selected_algorithm().name(),
            AnyPlan::Wide(p) => p.selected_algorithm().name(),
        }
    }

    /// The numeric phase on operands with the planned patterns.
    fn execute<'py>(
        &self,
        py: Python<'py>,
        a: Operand<'py>,
        b: Operand<'py>,
        alpha: (f64, f64),
    ) -> PyResult<Arrays<'py>> {
        dispatch!(py, a, execute_typed(py, self, &a, &b, alpha))
    }
}

#[pymodule]
fn _rusparse(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("VERSION", rusparse::VERSION)?;
    m.add_function(wrap_pyfunction!(spgemm, m)?)?;
    m.add_function(wrap_pyfunction!(predict_nnz, m)?)?;
    m.add_class::<Plan>()?;
    device::register(m)?;
    Ok(())
}
