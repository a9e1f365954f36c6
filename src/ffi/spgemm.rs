//! The SpGEMM phases of the C ABI (cuSPARSE 12's parameter lists) and the
//! reuse API.
//!
//! Phase map onto the Rust plan ([`crate::SpgemmPlan`]):
//! `workEstimation` validates A and B and counts the work per row;
//! `compute` (or `reuse_nnz`) runs the symbolic phase and sets nnz(C) in
//! matC; `copy` runs the numeric phase straight into C's arrays;
//! `reuse_copy` writes C's structure and `reuse_compute` its values (again
//! and again with new values of A and B).
//!
//! Memory: the CPU back end keeps its O(rows) metadata in the SpGEMM
//! descriptor (freed by `rusparseSpGEMM_destroyDescr`) and never stores C
//! twice; the external buffers are requested at a small fixed size
//! ([`CPU_BUFFER_BYTES`]) so the cuSPARSE call sequence works unchanged.
//!
//! The rusparse extensions (C's column order, the output-size prediction,
//! the plan's report) are in [`super::spgemm_ext`]; the GPU phases in
//! `spgemm_gpu.rs`.

use super::boundary::{boundary, out_ref, Claim, Opaque};
use super::handle::Handle;
use super::matrix::{slice_at_mut, SpMat};
use super::placement::{arrays, check_same, place, Placement};
use super::types::*;
use crate::csr::validate_and_fingerprint;
use crate::plan::fingerprint::pattern_fingerprint;
use crate::spgemm::{check_nnz_fits, same_pattern_arrays};
use crate::types::{Algorithm, ColumnOrder, DataType, IndexType, Op};
use crate::{
    validate_structure, Complex, CsrOutput, CsrView, Error, Index, Result, Scalar, SpgemmPlan,
};
use std::any::Any;
use std::ffi::c_void;

/// Bytes each external buffer is asked for on the CPU back end (never 0,
/// as cuSPARSE's protocol requires).
pub(crate) const CPU_BUFFER_BYTES: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    Compute,
    Reuse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
    WorkEstimated,
    Sized,
    Copied,
}

/// The arguments that must stay the same across the phases of one product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Call {
    op_a: Op,
    op_b: Op,
    alg: Algorithm,
    a: *const SpMat,
    b: *const SpMat,
    c: *const SpMat,
}

pub(super) struct Planned {
    flow: Flow,
    phase: Phase,
    call: Call,
    pub(super) num_products: u64,
    /// Where the product runs (decided by work estimation).
    pub(super) placement: Placement,
    /// The algorithm that runs: a concrete CPU algorithm, or on the GPU
    /// `Deterministic` / `NonDeterministic`.
    pub(super) selected: Algorithm,
    /// nnz(C) once the symbolic phase ran.
    pub(super) nnz: Option<i64>,
    /// A `SpgemmPlan<I, J>` for the index types of A and B (CPU), or a
    /// `GpuProduct` (CUDA).
    pub(super) plan: Box<dyn Any + Send>,
    /// Fingerprint of C's structure after `reuse_copy`.
    c_fingerprint: Option<u64>,
}

/// What a `rusparseSpGEMMDescr_t` points to.
#[derive(Default)]
pub(crate) struct SpgemmDescr {
    pub(super) planned: Option<Planned>,
    /// C's column order for `rusparseSpGEMM_copy` (rusparse extension).
    pub(super) column_order: ColumnOrder,
}

impl Opaque for rusparseSpGEMMDescr {
    type Inner = SpgemmDescr;
    const NAME: &'static str = "SpGEMM descriptor";
    fn null_error() -> Error {
        Error::InvalidValue(
            "spgemmDescr is NULL (create it with rusparseSpGEMM_createDescr)".into(),
        )
    }
}

/// The checked arguments of one phase call.
pub(super) struct Args<'a> {
    h: &'a Handle,
    call: Call,
    a: &'a SpMat,
    b: &'a SpMat,
    c: &'a mut SpMat,
    descr: &'a mut SpgemmDescr,
    /// The handle, the SpGEMM descriptor and matC, claimed for the call.
    _claims: [Claim; 3],
}

impl Args<'_> {
    fn value_type(&self) -> DataType {
        self.a.value_type
    }
    fn index_types(&self) -> (IndexType, IndexType) {
        (self.a.offset_type, self.a.col_type)
    }
}

fn dims(m: &SpMat, op: Op) -> (i64, i64) {
    if op.transposes() {
        (m.cols, m.rows)
    } else {
        (m.rows, m.cols)
    }
}

/// Checks what A and B must share (value and index types, the inner
/// dimension); returns the shape of op(A) * op(B).
pub(super) fn check_operands(a: &SpMat, op_a: Op, b: &SpMat, op_b: Op) -> Result<(i64, i64)> {
    if b.value_type != a.value_type {
        return Err(Error::NotSupported(format!(
            "matA and matB must have the same value type (got {} and {})",
            a.value_type.name(),
            b.value_type.name()
        )));
    }
    if (b.offset_type, b.col_type) != (a.offset_type, a.col_type) {
        return Err(Error::NotSupported(format!(
            "matA and matB must have the same index types (matA: {}/{}, matB: {}/{})",
            a.offset_type.name(),
            a.col_type.name(),
            b.offset_type.name(),
            b.col_type.name()
        )));
    }
    let (ma, ka) = dims(a, op_a);
    let (kb, nb) = dims(b, op_b);
    if ka != kb {
        return Err(Error::InvalidValue(format!(
            "inner dimensions differ: op(A) is {ma} x {ka} but op(B) is {kb} x {nb}"
        )));
    }
    Ok((ma, nb))
}

/// Checks the handle, the descriptors, their types and shapes.
#[allow(clippy::too_many_arguments)]
pub(super) fn args<'a>(
    handle: rusparseHandle_t,
    op_a: OperationArg,
    op_b: OperationArg,
    mat_a: rusparseConstSpMatDescr_t,
    mat_b: rusparseConstSpMatDescr_t,
    mat_c: rusparseSpMatDescr_t,
    compute_type: Option<DataTypeArg>,
    alg: SpGEMMAlgArg,
    descr: rusparseSpGEMMDescr_t,
) -> Result<Args<'a>> {
    // SAFETY: each pointer is NULL or a live object of its type, and no
    // other reference to the mutable ones exists during the call (matC is
    // checked to differ from matA and matB below before it is borrowed).
    let claim_h = unsafe { rusparseContext::claim(handle) }?;
    let h = unsafe { rusparseContext::get(handle) }?;
    let op_a = operation(op_a, "opA")?;
    let op_b = operation(op_b, "opB")?;
    let alg = algorithm(alg)?;
    let a = unsafe { rusparseSpMatDescr::get(mat_a) }.map_err(|e| e.context("matA"))?;
    let b = unsafe { rusparseSpMatDescr::get(mat_b) }.map_err(|e| e.context("matB"))?;
    if std::ptr::eq(mat_c, mat_a) || std::ptr::eq(mat_c, mat_b) {
        return Err(Error::InvalidValue(
            "matC must be a descriptor of its own, not matA or matB".into(),
        ));
    }
    let claim_c = unsafe { rusparseSpMatDescr::claim(mat_c) }.map_err(|e| e.context("matC"))?;
    let c = unsafe { rusparseSpMatDescr::get_mut(mat_c) }.map_err(|e| e.context("matC"))?;
    let claim_d = unsafe { rusparseSpGEMMDescr::claim(descr) }?;
    let descr = unsafe { rusparseSpGEMMDescr::get_mut(descr) }?;
    if c.constant {
        return Err(Error::InvalidValue(
            "matC was created with rusparseCreateConstCsr; the product needs a writable descriptor"
                .into(),
        ));
    }
    if b.value_type != a.value_type || c.value_type != a.value_type {
        return Err(Error::NotSupported(format!(
            "matA, matB and matC must have the same value type (got {}, {}, {})",
            a.value_type.name(),
            b.value_type.name(),
            c.value_type.name()
        )));
    }
    if let Some(ct) = compute_type {
        let ct = data_type(ct, "computeType")?;
        if ct != a.value_type {
            return Err(Error::NotSupported(format!(
                "computeType {} differs from the value type {}; rusparse computes in the value type",
                ct.name(),
                a.value_type.name()
            )));
        }
    }
    if c.col_type != a.col_type {
        return Err(Error::NotSupported(format!(
            "matC's column index type {} must equal matA's {} (its row offset type may differ)",
            c.col_type.name(),
            a.col_type.name()
        )));
    }
    let (ma, nb) = check_operands(a, op_a, b, op_b)?;
    if (c.rows, c.cols) != (ma, nb) {
        return Err(Error::InvalidValue(format!(
            "matC is {} x {} but op(A) * op(B) is {ma} x {nb}",
            c.rows, c.cols
        )));
    }
    let call = Call {
        op_a,
        op_b,
        alg,
        a,
        b,
        c: &*c,
    };
    Ok(Args {
        h,
        call,
        a,
        b,
        c,
        descr,
        _claims: [claim_h, claim_d, claim_c],
    })
}

/// Runs `f` on the plan of an earlier phase, checked for flow, order and
/// arguments. The plan stays in the descriptor whatever `f` returns.
pub(super) fn with_planned<R>(
    x: &mut Args<'_>,
    flow: Flow,
    after: Phase,
    what: &str,
    f: impl FnOnce(&mut Args<'_>, &mut Planned) -> Result<R>,
) -> Result<R> {
    let before = match (flow, after) {
        (Flow::Compute, Phase::WorkEstimated) => "rusparseSpGEMM_workEstimation",
        (Flow::Compute, _) => "rusparseSpGEMM_compute",
        (Flow::Reuse, Phase::WorkEstimated) => "rusparseSpGEMMreuse_workEstimation",
        (Flow::Reuse, Phase::Sized) => "rusparseSpGEMMreuse_nnz",
        (Flow::Reuse, Phase::Copied) => "rusparseSpGEMMreuse_copy",
    };
    let mut p = match x.descr.planned.take() {
        Some(p) if p.flow == flow && p.phase >= after => p,
        other => {
            x.descr.planned = other;
            return Err(Error::InvalidValue(format!(
                "called before {before} on this spgemmDescr (phases must run in order)"
            )));
        }
    };
    let result = if p.call != x.call {
        Err(Error::InvalidValue(format!(
            "{what} must get the same opA, opB, alg, matA, matB and matC as {before}"
        )))
    } else {
        f(x, &mut p)
    };
    x.descr.planned = Some(p);
    result
}

/// cuSPARSE's buffer protocol: a NULL buffer asks for the size; otherwise
/// the given size must be at least what was asked for. Returns whether the
/// call must do the work.
pub(super) fn buffer_protocol(size: *mut usize, buffer: *mut c_void, name: &str) -> Result<bool> {
    // SAFETY: NULL or a writable size slot.
    let size = unsafe { out_ref(size, name) }?;
    if buffer.is_null() {
        *size = CPU_BUFFER_BYTES;
        return Ok(false);
    }
    if *size < CPU_BUFFER_BYTES {
        return Err(Error::InvalidValue(format!(
            "{name} = {} is smaller than the {CPU_BUFFER_BYTES} bytes the size query returned",
            *size
        )));
    }
    Ok(true)
}

/// Reads a scalar argument.
fn scalar<T: Scalar>(p: *const c_void, name: &str) -> Result<T> {
    if p.is_null() {
        return Err(Error::InvalidValue(format!("{name} is NULL")));
    }
    // SAFETY: non-NULL and, per the API, points to one value of the compute type.
    Ok(unsafe { p.cast::<T>().read_unaligned() })
}

/// Calls `$f::<T, I, J>($args)` for the value type and index types given.
macro_rules! dispatch {
    ($dt:expr, $it:expr, $f:ident($($arg:expr),*)) => {
        match $dt {
            DataType::R32F => dispatch!(@index f32, $it, $f($($arg),*)),
            DataType::R64F => dispatch!(@index f64, $it, $f($($arg),*)),
            DataType::C32F => dispatch!(@index Complex<f32>, $it, $f($($arg),*)),
            DataType::C64F => dispatch!(@index Complex<f64>, $it, $f($($arg),*)),
        }
    };
    (@index $t:ty, $it:expr, $f:ident($($arg:expr),*)) => {
        match $it {
            (IndexType::I32, IndexType::I32) => $f::<$t, i32, i32>($($arg),*),
            (IndexType::I32, IndexType::I64) => $f::<$t, i32, i64>($($arg),*),
            (IndexType::I64, IndexType::I32) => $f::<$t, i64, i32>($($arg),*),
            (IndexType::I64, IndexType::I64) => $f::<$t, i64, i64>($($arg),*),
        }
    };
}
pub(super) use dispatch;

fn plan_mut<I: Index, J: Index>(plan: &mut (dyn Any + Send)) -> Result<&mut SpgemmPlan<I, J>> {
    plan.downcast_mut().ok_or_else(|| {
        Error::InvalidValue("the index types of matA or matB changed since work estimation".into())
    })
}

/// Fingerprints of A's and B's patterns.
type PatternPrints = (u64, u64);

/// Views of A and B.
type Operands<'m, T, I, J> = (CsrView<'m, T, I, J>, CsrView<'m, T, I, J>);

/// Views of A's and B's host arrays, their structure checked completely
/// (offsets, column ranges) in the handle's thread pool.
pub(super) fn validated_views<'m, T: Scalar, I: Index, J: Index>(
    h: &Handle,
    a: &'m SpMat,
    b: &'m SpMat,
) -> Result<Operands<'m, T, I, J>> {
    scanned_views(h, a, b, false).map(|(views, _)| views)
}

/// [`validated_views`]; with `fingerprint`, also A's and B's pattern
/// fingerprints, made in the same pass as the checks (once when A and B are
/// the same arrays).
fn scanned_views<'m, T: Scalar, I: Index, J: Index>(
    h: &Handle,
    a: &'m SpMat,
    b: &'m SpMat,
    fingerprint: bool,
) -> Result<(Operands<'m, T, I, J>, PatternPrints)> {
    // SAFETY: the descriptors' arrays hold the sizes they state (API
    // contract). Values are not read before the numeric phase.
    let a = unsafe { a.view::<T, I, J>("matA", false) }?;
    let b = unsafe { b.view::<T, I, J>("matB", false) }?;
    let scan = |m: &CsrView<'m, T, I, J>, name: &str| {
        let (rows, cols) = (m.nrows(), m.ncols());
        let (offsets, indices) = (m.row_offsets(), m.col_indices());
        if fingerprint {
            validate_and_fingerprint(rows, cols, offsets, indices, m.base())
        } else {
            validate_structure(rows, cols, offsets, indices, m.base()).map(|()| 0)
        }
        .map_err(|e| e.context(name))
    };
    let prints = h.ctx.run(|| {
        let fa = scan(&a, "matA")?;
        let fb = if same_pattern_arrays(&a, &b) && a.base() == b.base() {
            fa
        } else {
            scan(&b, "matB")?
        };
        Ok::<(u64, u64), Error>((fa, fb))
    })?;
    Ok(((a, b), prints))
}

/// Work estimation: validates A and B fully and plans the product.
fn plan_new<T: Scalar, I: Index, J: Index>(
    x: &Args<'_>,
) -> Result<(Box<dyn Any + Send>, u64, Algorithm)> {
    let ((a, b), prints) = scanned_views::<T, I, J>(x.h, x.a, x.b, true)?;
    let plan = SpgemmPlan::with_fingerprints(
        &x.h.ctx,
        (&a, x.call.op_a),
        (&b, x.call.op_b),
        x.call.alg,
        prints,
    )?;
    // A C that cannot fit matC's row offsets is refused now, from the lower
    // bound of nnz(C), not after compute has counted every product.
    check_nnz_fits(
        plan.nnz_lower_bound(),
        x.c.base,
        x.c.offset_type,
        "at least ",
    )?;
    let (n, selected) = (plan.num_products(), plan.selected_algorithm());
    Ok((Box::new(plan), n, selected))
}

/// Symbolic phase: returns nnz(C).
fn symbolic<T: Scalar, I: Index, J: Index>(
    x: &Args<'_>,
    plan: &mut (dyn Any + Send),
) -> Result<usize> {
    // SAFETY: as in `plan_new`; the plan checks the patterns' fingerprints.
    // The symbolic phase reads values only to keep BRMerge-Upper's
    // temporary C, which it skips when they are NULL.
    let a = unsafe { x.a.view::<T, I, J>("matA", false) }?;
    let b = unsafe { x.b.view::<T, I, J>("matB", false) }?;
    plan_mut::<I, J>(plan)?.symbolic(&x.h.ctx, &a, &b)
}

/// Which of C's arrays a numeric call writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// `copy`: row offsets, columns and values.
    All,
    /// `reuse_copy`: row offsets and columns.
    Structure,
    /// `reuse_compute`: values on the structure `reuse_copy` wrote.
    Values,
}

struct Numeric {
    fill: Fill,
    alpha: *const c_void,
    beta: *const c_void,
    /// For `Values`: the fingerprint of C's structure written by `reuse_copy`.
    c_fingerprint: Option<u64>,
}

/// Numeric phases into C's arrays; returns the fingerprint of C's structure.
fn numeric<T: Scalar, I: Index, J: Index>(
    x: &mut Args<'_>,
    plan: &mut (dyn Any + Send),
    job: &Numeric,
) -> Result<u64> {
    match x.c.offset_type {
        IndexType::I32 => numeric_into::<T, I, J, i32>(x, plan, job),
        IndexType::I64 => numeric_into::<T, I, J, i64>(x, plan, job),
    }
}

fn numeric_into<T: Scalar, I: Index, J: Index, IC: Index>(
    x: &mut Args<'_>,
    plan: &mut (dyn Any + Send),
    job: &Numeric,
) -> Result<u64> {
    let plan = plan_mut::<I, J>(plan)?;
    let (alpha, beta) = if job.fill == Fill::Structure {
        (T::one(), T::zero())
    } else {
        (
            scalar::<T>(job.alpha, "alpha")?,
            scalar::<T>(job.beta, "beta")?,
        )
    };
    // SAFETY: as in `plan_new`. `reuse_copy` reads no values.
    let values = job.fill != Fill::Structure;
    let a = unsafe { x.a.view::<T, I, J>("matA", values) }?;
    let b = unsafe { x.b.view::<T, I, J>("matB", values) }?;
    let c = &*x.c;
    let (rows, nnz) = (c.nrows(), c.nnz_usize());
    // SAFETY: C's arrays were set by the caller for nnz(C) entries and are
    // not accessed by anything else during the call.
    let offsets = unsafe { slice_at_mut::<IC>(c.offsets, rows + 1, "matC rowOffsets") }?;
    let cols = unsafe { slice_at_mut::<J>(c.col_ind, nnz, "matC colInd") }?;
    let fingerprint = |o: &[IC], k: &[J]| pattern_fingerprint(rows, c.ncols(), o, k);
    match job.fill {
        Fill::All => {
            let values = unsafe { slice_at_mut::<T>(c.values, nnz, "matC values") }?;
            let out = CsrOutput::full(&mut *offsets, &mut *cols, values, c.base)
                .with_column_order(x.descr.column_order);
            plan.numeric(&x.h.ctx, &a, &b, alpha, beta, out)?;
            Ok(0)
        }
        Fill::Structure => {
            plan.write_structure(&x.h.ctx, &a, &b, offsets, cols, c.base)?;
            Ok(fingerprint(offsets, cols))
        }
        Fill::Values => {
            let now = fingerprint(offsets, cols);
            if Some(now) != job.c_fingerprint {
                return Err(Error::InvalidValue(
                    "matC's row offsets or column indices changed since rusparseSpGEMMreuse_copy wrote them".into(),
                ));
            }
            let values = unsafe { slice_at_mut::<T>(c.values, nnz, "matC values") }?;
            let out = CsrOutput::<T, IC, J>::values_on_pattern(values, cols, c.base);
            plan.numeric(&x.h.ctx, &a, &b, alpha, beta, out)?;
            Ok(now)
        }
    }
}

/// A numeric phase on the GPU. `reuse_copy` (structure) runs the whole
/// numeric phase with alpha = 1, beta = 0 (its values are overwritten by
/// `reuse_compute`), so C's value array must be set by then.
fn numeric_gpu<T: Scalar>(
    x: &mut Args<'_>,
    g: &mut super::spgemm_gpu::GpuProduct,
    job: &Numeric,
) -> Result<()> {
    use super::spgemm_gpu::Scalars;
    use crate::backend::gpu::host_arrays::scalar_bytes as bytes;
    let (alpha, beta) = match job.fill {
        Fill::Structure => (T::one(), T::zero()),
        // A staged product's arrays are all host memory: so are alpha and
        // beta, in either pointer mode.
        _ if x.h.device_pointers && !g.staged() => {
            if job.alpha.is_null() || job.beta.is_null() {
                return Err(Error::InvalidValue("alpha or beta is NULL".into()));
            }
            let scalars = Scalars::Device {
                alpha: job.alpha,
                beta: job.beta,
            };
            return g.numeric(x.h.stream, x.a, x.b, x.c, scalars);
        }
        _ => (
            scalar::<T>(job.alpha, "alpha")?,
            scalar::<T>(job.beta, "beta")?,
        ),
    };
    let scalars = Scalars::Host {
        alpha: bytes(&alpha),
        beta: bytes(&beta),
        beta_is_zero: beta == T::zero(),
    };
    g.numeric(x.h.stream, x.a, x.b, x.c, scalars)
}

/// Runs work estimation for `flow` and stores the plan in the descriptor.
/// `buffer` is the external buffer of the call (it must live where the
/// product runs).
fn estimate_work(x: &mut Args<'_>, flow: Flow, buffer: *mut c_void) -> Result<()> {
    x.descr.planned = None;
    let mut others = vec![(x.c.offsets.cast_const(), "matC's rowOffsets".to_string())];
    others.push((buffer.cast_const(), "externalBuffer1".to_string()));
    let placement = place(&x.h.ctx, x.a, x.b, &others)?;
    let (plan, num_products, selected) = match &placement {
        Placement::Cpu => dispatch!(x.value_type(), x.index_types(), plan_new(x))?,
        Placement::Gpu(dev) | Placement::StagedGpu(dev) => {
            let (g, n) = super::spgemm_gpu::GpuProduct::new(
                dev.clone(),
                matches!(placement, Placement::StagedGpu(_)),
                x.h.stream,
                x.call.op_a,
                x.call.op_b,
                x.call.alg,
                x.a,
                x.b,
                x.c,
            )?;
            let selected = if matches!(x.call.alg, Algorithm::Deterministic | Algorithm::Alg1) {
                Algorithm::Deterministic
            } else {
                Algorithm::NonDeterministic
            };
            (Box::new(g) as Box<dyn Any + Send>, n, selected)
        }
    };
    x.h.last_placed.set(Some(placement.backend()));
    x.descr.planned = Some(Planned {
        flow,
        phase: Phase::WorkEstimated,
        call: x.call,
        num_products,
        placement,
        selected,
        nnz: None,
        plan,
        c_fingerprint: None,
    });
    Ok(())
}

pub(super) fn gpu_product(
    plan: &mut (dyn Any + Send),
) -> Result<&mut super::spgemm_gpu::GpuProduct> {
    plan.downcast_mut()
        .ok_or_else(|| Error::InternalError("GPU product of the wrong kind".into()))
}

/// Runs the symbolic phase and publishes nnz(C) in matC.
fn size_output(x: &mut Args<'_>, flow: Flow, what: &str) -> Result<()> {
    let (dt, it) = (x.value_type(), x.index_types());
    with_planned(x, flow, Phase::WorkEstimated, what, |x, p| {
        check_same(&p.placement, &arrays(x.c, "matC")[..1])?;
        let nnz = match &p.placement {
            Placement::Cpu => dispatch!(dt, it, symbolic(x, p.plan.as_mut()))?,
            Placement::Gpu(_) | Placement::StagedGpu(_) => {
                gpu_product(p.plan.as_mut())?.symbolic(x.h.stream, x.a, x.b, x.c)?
            }
        };
        check_nnz_fits(nnz as u64, x.c.base, x.c.offset_type, "")?;
        x.c.nnz = nnz as i64;
        p.nnz = Some(nnz as i64);
        p.phase = Phase::Sized;
        p.c_fingerprint = None;
        Ok(())
    })
}

/// Runs a numeric phase after `after` and moves to `Copied`.
fn fill_output(
    x: &mut Args<'_>,
    flow: Flow,
    after: Phase,
    what: &str,
    mut job: Numeric,
) -> Result<()> {
    let (dt, it) = (x.value_type(), x.index_types());
    with_planned(x, flow, after, what, |x, p| {
        if x.c.nnz < 0 || p.phase < Phase::Sized {
            return Err(Error::InternalError("plan without nnz(C)".into()));
        }
        job.c_fingerprint = p.c_fingerprint;
        let mut pointers: Vec<_> = arrays(x.c, "matC").into();
        if x.h.device_pointers && job.fill != Fill::Structure {
            pointers.push((job.alpha, "alpha".to_string()));
            pointers.push((job.beta, "beta".to_string()));
        }
        check_same(&p.placement, &pointers)?;
        let print = match &p.placement {
            Placement::Cpu => dispatch!(dt, it, numeric(x, p.plan.as_mut(), &job))?,
            Placement::Gpu(_) | Placement::StagedGpu(_) => {
                let g = gpu_product(p.plan.as_mut())?;
                match dt {
                    DataType::R32F => numeric_gpu::<f32>(x, g, &job),
                    DataType::R64F => numeric_gpu::<f64>(x, g, &job),
                    DataType::C32F => numeric_gpu::<Complex<f32>>(x, g, &job),
                    DataType::C64F => numeric_gpu::<Complex<f64>>(x, g, &job),
                }?;
                0
            }
        };
        if job.fill == Fill::Structure {
            p.c_fingerprint = Some(print);
        }
        p.phase = Phase::Copied;
        Ok(())
    })
}

/// The SpGEMM descriptor, claimed for the call (the claim first).
pub(super) fn descr_ref<'a>(descr: rusparseSpGEMMDescr_t) -> Result<(Claim, &'a SpgemmDescr)> {
    // SAFETY: NULL or a live descriptor; claimed, so no other call uses it.
    let claim = unsafe { rusparseSpGEMMDescr::claim(descr) }?;
    Ok((claim, unsafe { rusparseSpGEMMDescr::get(descr) }?))
}

/// Creates an SpGEMM descriptor (holds the plan between phases).
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_createDescr(
    descr: *mut rusparseSpGEMMDescr_t,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_createDescr", || {
        // SAFETY: NULL or a writable slot. The slot is checked before the
        // descriptor is allocated, so a NULL slot leaks nothing.
        let slot = unsafe { out_ref(descr, "descr") }?;
        *slot = rusparseSpGEMMDescr::into_raw(SpgemmDescr::default());
        Ok(())
    })
}

/// Destroys an SpGEMM descriptor and the metadata it holds. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_destroyDescr(
    descr: rusparseSpGEMMDescr_t,
) -> rusparseStatus_t {
    // SAFETY: NULL or a descriptor from rusparseSpGEMM_createDescr, destroyed once.
    boundary("rusparseSpGEMM_destroyDescr", || unsafe {
        rusparseSpGEMMDescr::free(descr)
    })
}

/// Phase 1 of `C = alpha op(A) op(B) + beta C`. With `externalBuffer1 ==
/// NULL` it only writes `*bufferSize1`; with a buffer of at least that size
/// it checks A and B completely (offsets, column ranges) and counts the
/// products of every row. Cost O(nnz(A) + nnz(B) + rows). `alpha` and `beta`
/// must not be NULL; their values are read by `rusparseSpGEMM_copy`.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_workEstimation(
    handle: rusparseHandle_t,
    opA: OperationArg,
    opB: OperationArg,
    alpha: *const c_void,
    matA: rusparseConstSpMatDescr_t,
    matB: rusparseConstSpMatDescr_t,
    beta: *const c_void,
    matC: rusparseSpMatDescr_t,
    computeType: DataTypeArg,
    alg: SpGEMMAlgArg,
    spgemmDescr: rusparseSpGEMMDescr_t,
    bufferSize1: *mut usize,
    externalBuffer1: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_workEstimation", || {
        let mut x = args(
            handle,
            opA,
            opB,
            matA,
            matB,
            matC,
            Some(computeType),
            alg,
            spgemmDescr,
        )?;
        non_null_scalars(alpha, beta)?;
        if !buffer_protocol(bufferSize1, externalBuffer1, "bufferSize1")? {
            return Ok(());
        }
        estimate_work(&mut x, Flow::Compute, externalBuffer1)
    })
}

pub(super) fn non_null_scalars(alpha: *const c_void, beta: *const c_void) -> Result<()> {
    if alpha.is_null() {
        return Err(Error::InvalidValue("alpha is NULL".into()));
    }
    if beta.is_null() {
        return Err(Error::InvalidValue("beta is NULL".into()));
    }
    Ok(())
}

/// Phase 2: the symbolic product. With `externalBuffer2 == NULL` it only
/// writes `*bufferSize2`; with the buffer it finds the exact size of every
/// row of C and sets nnz(C) in matC (read it with `rusparseSpMatGetSize`).
/// Only C's row metadata is kept. INVALID_VALUE when nnz(C) does not fit
/// matC's row offset type, or when A's or B's shape or nnz changed since
/// work estimation (a pattern changed with the same nnz is refused by
/// `rusparseSpGEMM_copy`, which checks a hash of the patterns before it
/// writes C; compute reads them once fewer).
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_compute(
    handle: rusparseHandle_t,
    opA: OperationArg,
    opB: OperationArg,
    alpha: *const c_void,
    matA: rusparseConstSpMatDescr_t,
    matB: rusparseConstSpMatDescr_t,
    beta: *const c_void,
    matC: rusparseSpMatDescr_t,
    computeType: DataTypeArg,
    alg: SpGEMMAlgArg,
    spgemmDescr: rusparseSpGEMMDescr_t,
    bufferSize2: *mut usize,
    externalBuffer2: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_compute", || {
        let mut x = args(
            handle,
            opA,
            opB,
            matA,
            matB,
            matC,
            Some(computeType),
            alg,
            spgemmDescr,
        )?;
        non_null_scalars(alpha, beta)?;
        with_planned(
            &mut x,
            Flow::Compute,
            Phase::WorkEstimated,
            "rusparseSpGEMM_compute",
            |_, _| Ok(()),
        )?;
        if !buffer_protocol(bufferSize2, externalBuffer2, "bufferSize2")? {
            return Ok(());
        }
        size_output(&mut x, Flow::Compute, "rusparseSpGEMM_compute")
    })
}

/// Phase 3: the numeric product, straight into the arrays set on matC with
/// `rusparseCsrSetPointers`: row offsets (matC's base), sorted columns
/// without duplicates, and values `alpha * op(A) op(B) + beta * values`,
/// where the old values are read only when `*beta != 0`. INVALID_VALUE,
/// before C is written, when A's or B's pattern changed since work
/// estimation (a hash of their index arrays).
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_copy(
    handle: rusparseHandle_t,
    opA: OperationArg,
    opB: OperationArg,
    alpha: *const c_void,
    matA: rusparseConstSpMatDescr_t,
    matB: rusparseConstSpMatDescr_t,
    beta: *const c_void,
    matC: rusparseSpMatDescr_t,
    computeType: DataTypeArg,
    alg: SpGEMMAlgArg,
    spgemmDescr: rusparseSpGEMMDescr_t,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_copy", || {
        let mut x = args(
            handle,
            opA,
            opB,
            matA,
            matB,
            matC,
            Some(computeType),
            alg,
            spgemmDescr,
        )?;
        let job = Numeric {
            fill: Fill::All,
            alpha,
            beta,
            c_fingerprint: None,
        };
        fill_output(
            &mut x,
            Flow::Compute,
            Phase::Sized,
            "rusparseSpGEMM_copy",
            job,
        )
    })
}

/// Reuse phase 1: as `rusparseSpGEMM_workEstimation`, without scalars.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMMreuse_workEstimation(
    handle: rusparseHandle_t,
    opA: OperationArg,
    opB: OperationArg,
    matA: rusparseConstSpMatDescr_t,
    matB: rusparseConstSpMatDescr_t,
    matC: rusparseSpMatDescr_t,
    alg: SpGEMMAlgArg,
    spgemmDescr: rusparseSpGEMMDescr_t,
    bufferSize1: *mut usize,
    externalBuffer1: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMMreuse_workEstimation", || {
        let mut x = args(handle, opA, opB, matA, matB, matC, None, alg, spgemmDescr)?;
        if !buffer_protocol(bufferSize1, externalBuffer1, "bufferSize1")? {
            return Ok(());
        }
        estimate_work(&mut x, Flow::Reuse, externalBuffer1)
    })
}

/// Reuse phase 2: the symbolic product; sets nnz(C) in matC. With all three
/// buffers NULL it only writes the three sizes; with all three given it does
/// the work; a mix is INVALID_VALUE.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMMreuse_nnz(
    handle: rusparseHandle_t,
    opA: OperationArg,
    opB: OperationArg,
    matA: rusparseConstSpMatDescr_t,
    matB: rusparseConstSpMatDescr_t,
    matC: rusparseSpMatDescr_t,
    alg: SpGEMMAlgArg,
    spgemmDescr: rusparseSpGEMMDescr_t,
    bufferSize2: *mut usize,
    externalBuffer2: *mut c_void,
    bufferSize3: *mut usize,
    externalBuffer3: *mut c_void,
    bufferSize4: *mut usize,
    externalBuffer4: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMMreuse_nnz", || {
        let mut x = args(handle, opA, opB, matA, matB, matC, None, alg, spgemmDescr)?;
        with_planned(
            &mut x,
            Flow::Reuse,
            Phase::WorkEstimated,
            "rusparseSpGEMMreuse_nnz",
            |_, _| Ok(()),
        )?;
        let given = [externalBuffer2, externalBuffer3, externalBuffer4].map(|b| !b.is_null());
        if given.iter().any(|&g| g) && !given.iter().all(|&g| g) {
            return Err(Error::InvalidValue(
                "externalBuffer2, externalBuffer3 and externalBuffer4 must be all NULL (size query) or all given".into(),
            ));
        }
        let mut work = true;
        for (size, buffer, name) in [
            (bufferSize2, externalBuffer2, "bufferSize2"),
            (bufferSize3, externalBuffer3, "bufferSize3"),
            (bufferSize4, externalBuffer4, "bufferSize4"),
        ] {
            work &= buffer_protocol(size, buffer, name)?;
        }
        if !work {
            return Ok(());
        }
        size_output(&mut x, Flow::Reuse, "rusparseSpGEMMreuse_nnz")
    })
}

/// Reuse phase 3: writes C's structure (row offsets and sorted columns)
/// into the arrays set on matC. With `externalBuffer5 == NULL` it only
/// writes `*bufferSize5`.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMMreuse_copy(
    handle: rusparseHandle_t,
    opA: OperationArg,
    opB: OperationArg,
    matA: rusparseConstSpMatDescr_t,
    matB: rusparseConstSpMatDescr_t,
    matC: rusparseSpMatDescr_t,
    alg: SpGEMMAlgArg,
    spgemmDescr: rusparseSpGEMMDescr_t,
    bufferSize5: *mut usize,
    externalBuffer5: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMMreuse_copy", || {
        let mut x = args(handle, opA, opB, matA, matB, matC, None, alg, spgemmDescr)?;
        with_planned(
            &mut x,
            Flow::Reuse,
            Phase::Sized,
            "rusparseSpGEMMreuse_copy",
            |_, _| Ok(()),
        )?;
        if !buffer_protocol(bufferSize5, externalBuffer5, "bufferSize5")? {
            return Ok(());
        }
        let job = Numeric {
            fill: Fill::Structure,
            alpha: std::ptr::null(),
            beta: std::ptr::null(),
            c_fingerprint: None,
        };
        fill_output(
            &mut x,
            Flow::Reuse,
            Phase::Sized,
            "rusparseSpGEMMreuse_copy",
            job,
        )
    })
}

/// Reuse phase 4: C's values `alpha * op(A) op(B) + beta * values` on the
/// structure written by `rusparseSpGEMMreuse_copy`, for the current values
/// of A and B. Call it again whenever A's or B's values change (their
/// patterns must not: INVALID_VALUE).
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMMreuse_compute(
    handle: rusparseHandle_t,
    opA: OperationArg,
    opB: OperationArg,
    alpha: *const c_void,
    matA: rusparseConstSpMatDescr_t,
    matB: rusparseConstSpMatDescr_t,
    beta: *const c_void,
    matC: rusparseSpMatDescr_t,
    computeType: DataTypeArg,
    alg: SpGEMMAlgArg,
    spgemmDescr: rusparseSpGEMMDescr_t,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMMreuse_compute", || {
        let mut x = args(
            handle,
            opA,
            opB,
            matA,
            matB,
            matC,
            Some(computeType),
            alg,
            spgemmDescr,
        )?;
        let job = Numeric {
            fill: Fill::Values,
            alpha,
            beta,
            c_fingerprint: None,
        };
        fill_output(
            &mut x,
            Flow::Reuse,
            Phase::Copied,
            "rusparseSpGEMMreuse_compute",
            job,
        )
    })
}
