//! The SpGEMM phases of the C ABI (cuSPARSE 12's parameter lists) and the
//! reuse API: each call checks its arguments and the protocol (phases in
//! order, the same operands and options, cuSPARSE's buffer-size queries)
//! and calls the product (`product::Product`) kept in the SpGEMM
//! descriptor.
//!
//! Phase map onto the product: `workEstimation` places it (CPU, GPU or
//! host arrays staged on a GPU), validates A and B and counts the work per
//! row; `compute` (or `reuse_nnz`) runs the symbolic phase and sets nnz(C)
//! in matC; `copy` runs the numeric phase straight into C's arrays;
//! `reuse_copy` writes C's structure and `reuse_compute` its values (again
//! and again with new values of A and B).
//!
//! Memory: the product keeps its O(rows) metadata in the SpGEMM descriptor
//! (freed by `rusparseSpGEMM_destroyDescr`) and never stores C twice; the
//! external buffers are requested at a small fixed size
//! ([`CPU_BUFFER_BYTES`]) so the cuSPARSE call sequence works unchanged.
//!
//! The rusparse extensions (C's column order, the output-size prediction,
//! the plan's report) are in [`super::spgemm_ext`].

use super::boundary::{boundary, out_ref, Claim, Opaque};
use super::handle::{Handle, HandleClaim};
use super::types::*;
use crate::product::placement::{arrays, check_same, place};
use crate::product::{Fill, MatrixArrays, NumericJob, Operation, Product};
use crate::spgemm::check_nnz_fits;
use crate::types::{ColumnOrder, Op, PatternCheck};
use crate::{Error, Result};
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
    operation: Operation,
    a: *const MatrixArrays,
    b: *const MatrixArrays,
    c: *const MatrixArrays,
}

pub(super) struct Planned {
    flow: Flow,
    phase: Phase,
    call: Call,
    /// The product, made by work estimation.
    pub(super) product: Product,
    /// nnz(C) once the symbolic phase ran.
    pub(super) nnz: Option<i64>,
    /// Fingerprint of C's structure after `reuse_copy`.
    c_fingerprint: Option<u64>,
}

/// What a `rusparseSpGEMMDescr_t` points to.
#[derive(Default)]
pub(crate) struct SpgemmDescr {
    pub(super) planned: Option<Planned>,
    /// C's column order for `rusparseSpGEMM_copy` (rusparse extension).
    pub(super) column_order: ColumnOrder,
    /// How the numeric phases check the patterns (rusparse extension).
    pub(super) pattern_check: PatternCheck,
    /// Whether `reuse_copy` writes C's values too (rusparse extension).
    pub(super) copy_values: bool,
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
    a: &'a MatrixArrays,
    b: &'a MatrixArrays,
    c: &'a mut MatrixArrays,
    descr: &'a mut SpgemmDescr,
    /// The handle, the SpGEMM descriptor and matC, claimed for the call.
    _claims: (HandleClaim, [Claim; 2]),
}

fn dims(m: &MatrixArrays, op: Op) -> (i64, i64) {
    if op.transposes() {
        (m.cols, m.rows)
    } else {
        (m.rows, m.cols)
    }
}

/// Checks what A and B must share (value and index types, the inner
/// dimension); returns the shape of op(A) * op(B).
pub(super) fn check_operands(
    a: &MatrixArrays,
    op_a: Op,
    b: &MatrixArrays,
    op_b: Op,
) -> Result<(i64, i64)> {
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

/// The raw arguments every SpGEMM phase call shares (cuSPARSE's order).
#[derive(Clone, Copy)]
pub(super) struct PhaseArgs {
    pub(super) handle: rusparseHandle_t,
    pub(super) op_a: OperationArg,
    pub(super) op_b: OperationArg,
    pub(super) mat_a: rusparseConstSpMatDescr_t,
    pub(super) mat_b: rusparseConstSpMatDescr_t,
    pub(super) mat_c: rusparseSpMatDescr_t,
    /// `None` for the reuse phases, which take no compute type.
    pub(super) compute_type: Option<DataTypeArg>,
    pub(super) alg: SpGEMMAlgArg,
    pub(super) descr: rusparseSpGEMMDescr_t,
    /// alpha and beta, for the phases that require them non-NULL.
    pub(super) scalars: Option<(*const c_void, *const c_void)>,
}

impl PhaseArgs {
    /// Checks the handle, the descriptors, their types and shapes, then
    /// the scalars.
    pub(super) fn check<'a>(self) -> Result<Args<'a>> {
        let x = args(self)?;
        if let Some((alpha, beta)) = self.scalars {
            non_null_scalars(alpha, beta)?;
        }
        Ok(x)
    }
}

/// Checks the handle, the descriptors, their types and shapes.
fn args<'a>(
    PhaseArgs {
        handle,
        op_a,
        op_b,
        mat_a,
        mat_b,
        mat_c,
        compute_type,
        alg,
        descr,
        ..
    }: PhaseArgs,
) -> Result<Args<'a>> {
    // SAFETY: each pointer is NULL or a live object of its type, and no
    // other reference to the mutable ones exists during the call (matC is
    // checked to differ from matA and matB below before it is borrowed).
    let claim_h = unsafe { rusparseContext::enter(handle) }?;
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
        operation: Operation {
            op_a,
            op_b,
            algorithm: alg,
        },
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
        _claims: (claim_h, [claim_d, claim_c]),
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

/// Runs work estimation for `flow` and stores the plan in the descriptor.
/// `buffer` is the external buffer of the call (it must live where the
/// product runs).
fn estimate_work(x: &mut Args<'_>, flow: Flow, buffer: *mut c_void) -> Result<()> {
    x.descr.planned = None;
    let mut others = vec![(x.c.offsets.cast_const(), "matC's rowOffsets".to_string())];
    others.push((buffer.cast_const(), "externalBuffer1".to_string()));
    let placement = place(&x.h.ctx, x.a, x.b, &others)?;
    // SAFETY: the descriptors' arrays hold the sizes they state (the C
    // API's contract).
    let mut product = unsafe {
        Product::work_estimation(
            &x.h.ctx,
            &placement,
            x.h.stream,
            (x.call.operation, x.descr.pattern_check),
            (x.a, x.b, x.c),
        )
    }?;
    if flow == Flow::Reuse {
        // reuse_copy writes C's structure before reuse_compute its values.
        product.expect_structure_first();
    }
    x.h.last_placed.set(Some(placement.backend()));
    x.descr.planned = Some(Planned {
        flow,
        phase: Phase::WorkEstimated,
        call: x.call,
        product,
        nnz: None,
        c_fingerprint: None,
    });
    Ok(())
}

/// Runs the symbolic phase and publishes nnz(C) in matC.
fn size_output(x: &mut Args<'_>, flow: Flow, what: &str) -> Result<()> {
    with_planned(x, flow, Phase::WorkEstimated, what, |x, p| {
        check_same(&p.product.placement(), &arrays(x.c, "matC")[..1])?;
        if flow == Flow::Reuse && x.descr.copy_values {
            p.product.expect_values_with_structure();
        }
        // The reuse flow's symbolic phase checks the patterns too (the
        // structure it lists is what reuse_copy writes), as the
        // descriptor says.
        p.product.set_pattern_check(x.descr.pattern_check);
        // SAFETY: as in `estimate_work`.
        let nnz = unsafe {
            p.product
                .symbolic(&x.h.ctx, x.h.stream, (x.a, x.b), x.c.offset_type)
        }?;
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
    (fill, alpha, beta): (Fill, *const c_void, *const c_void),
) -> Result<()> {
    with_planned(x, flow, after, what, |x, p| {
        if x.c.nnz < 0 || p.phase < Phase::Sized {
            return Err(Error::InternalError("plan without nnz(C)".into()));
        }
        let job = NumericJob {
            fill,
            alpha,
            beta,
            device_scalars: x.h.device_pointers,
            c_fingerprint: p.c_fingerprint,
            column_order: x.descr.column_order,
            pattern_check: x.descr.pattern_check,
            structure_values: fill == Fill::Structure && x.descr.copy_values,
        };
        if job.structure_values && x.c.values.is_null() && x.c.split.is_none() && x.c.nnz > 0 {
            return Err(Error::InvalidValue(
                "matC's values are NULL, but rusparseSpGEMM_setReuseCopyValues asks rusparseSpGEMMreuse_copy to write them".into(),
            ));
        }
        let mut pointers: Vec<_> = arrays(x.c, "matC").into();
        if x.h.device_pointers && fill != Fill::Structure {
            pointers.push((alpha, "alpha".to_string()));
            pointers.push((beta, "beta".to_string()));
        }
        check_same(&p.product.placement(), &pointers)?;
        // SAFETY: as in `estimate_work`; matC is claimed for the call.
        let print = unsafe {
            p.product
                .numeric(&x.h.ctx, x.h.stream, (x.a, x.b, &*x.c), &job)
        }?;
        if fill == Fill::Structure {
            p.c_fingerprint = Some(print);
        }
        p.phase = Phase::Copied;
        Ok(())
    })
}

/// The product planned on a descriptor.
pub(super) fn planned(d: &SpgemmDescr) -> Result<&Planned> {
    d.planned.as_ref().ok_or_else(|| {
        Error::InvalidValue(
            "called before rusparseSpGEMM_workEstimation on this spgemmDescr".into(),
        )
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
        let mut x = PhaseArgs {
            handle,
            op_a: opA,
            op_b: opB,
            mat_a: matA,
            mat_b: matB,
            mat_c: matC,
            compute_type: Some(computeType),
            alg,
            descr: spgemmDescr,
            scalars: Some((alpha, beta)),
        }
        .check()?;
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
        let mut x = PhaseArgs {
            handle,
            op_a: opA,
            op_b: opB,
            mat_a: matA,
            mat_b: matB,
            mat_c: matC,
            compute_type: Some(computeType),
            alg,
            descr: spgemmDescr,
            scalars: Some((alpha, beta)),
        }
        .check()?;
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
        let mut x = PhaseArgs {
            handle,
            op_a: opA,
            op_b: opB,
            mat_a: matA,
            mat_b: matB,
            mat_c: matC,
            compute_type: Some(computeType),
            alg,
            descr: spgemmDescr,
            scalars: None,
        }
        .check()?;
        fill_output(
            &mut x,
            Flow::Compute,
            Phase::Sized,
            "rusparseSpGEMM_copy",
            (Fill::All, alpha, beta),
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
        let mut x = PhaseArgs {
            handle,
            op_a: opA,
            op_b: opB,
            mat_a: matA,
            mat_b: matB,
            mat_c: matC,
            compute_type: None,
            alg,
            descr: spgemmDescr,
            scalars: None,
        }
        .check()?;
        if !buffer_protocol(bufferSize1, externalBuffer1, "bufferSize1")? {
            return Ok(());
        }
        estimate_work(&mut x, Flow::Reuse, externalBuffer1)
    })
}

/// Reuse phase 2: the symbolic product; sets nnz(C) in matC. With all three
/// buffers NULL it only writes the three sizes; with all three given it does
/// the work; a mix is INVALID_VALUE. On the CPU, when matA and matB have
/// values, it also sums C's values as it lists C's structure, and keeps
/// them (nnz(C) values, inside the descriptor) for the next
/// `rusparseSpGEMMreuse_compute`, which copies them if A's and B's values
/// are still those (compared by hash) instead of multiplying again.
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
        let mut x = PhaseArgs {
            handle,
            op_a: opA,
            op_b: opB,
            mat_a: matA,
            mat_b: matB,
            mat_c: matC,
            compute_type: None,
            alg,
            descr: spgemmDescr,
            scalars: None,
        }
        .check()?;
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
/// into the arrays set on matC, and C's values too after
/// `rusparseSpGEMM_setReuseCopyValues`. With `externalBuffer5 == NULL` it
/// only writes `*bufferSize5`.
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
        let mut x = PhaseArgs {
            handle,
            op_a: opA,
            op_b: opB,
            mat_a: matA,
            mat_b: matB,
            mat_c: matC,
            compute_type: None,
            alg,
            descr: spgemmDescr,
            scalars: None,
        }
        .check()?;
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
        let none = std::ptr::null();
        fill_output(
            &mut x,
            Flow::Reuse,
            Phase::Sized,
            "rusparseSpGEMMreuse_copy",
            (Fill::Structure, none, none),
        )
    })
}

/// Reuse phase 4: C's values `alpha * op(A) op(B) + beta * values` on the
/// structure written by `rusparseSpGEMMreuse_copy`, for the current values
/// of A and B. Call it again whenever A's or B's values change (their
/// patterns must not: INVALID_VALUE). The first call after
/// `rusparseSpGEMMreuse_nnz` may copy the values that phase summed (see
/// there); it hashes A's and B's values to make sure they did not change.
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
        let mut x = PhaseArgs {
            handle,
            op_a: opA,
            op_b: opB,
            mat_a: matA,
            mat_b: matB,
            mat_c: matC,
            compute_type: Some(computeType),
            alg,
            descr: spgemmDescr,
            scalars: None,
        }
        .check()?;
        fill_output(
            &mut x,
            Flow::Reuse,
            Phase::Copied,
            "rusparseSpGEMMreuse_compute",
            (Fill::Values, alpha, beta),
        )
    })
}
