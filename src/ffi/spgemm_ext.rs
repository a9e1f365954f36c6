//! The rusparse extensions of the SpGEMM C ABI (not in cuSPARSE): the
//! column order of C, the output-size prediction, and what a plan reports
//! about itself (products, chosen algorithm, GPU bins, memory estimate).

use super::boundary::{boundary, out_ref, Opaque};
use super::handle::Handle;
use super::spgemm::*;
use super::types::*;
use crate::product::placement::place;
use crate::product::{dispatch, predict_nnz_on_device, validated_views, MatrixArrays, Placement};
use crate::types::{ColumnOrder, Op, PatternCheck};
use crate::{Error, Index, Result, Scalar, SpgemmOptions};
use std::ffi::{c_int, c_void};

/// Sets the order of C's columns within each row that
/// `rusparseSpGEMM_copy` writes (a rusparse extension: cuSPARSE always
/// sorts). `RUSPARSE_COLUMN_ORDER_ANY` lets the CPU back end skip sorting
/// each row of C: every row holds the same entries as with
/// `RUSPARSE_COLUMN_ORDER_SORTED` (the default), in an order that is the
/// same for the same inputs and thread count (so `beta != 0` adds to the
/// right entries), but not sorted. For callers that do not need sorted rows
/// (an SpMV next, graph analytics). The reuse flow (`reuse_copy`,
/// `reuse_compute`) and the GPU back ends always write sorted rows, which
/// any order admits. May be called at any time before `rusparseSpGEMM_copy`;
/// INVALID_VALUE for a NULL descriptor or an `order` that is not a
/// `rusparseColumnOrder_t`.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_setColumnOrder(
    spgemmDescr: rusparseSpGEMMDescr_t,
    order: ColumnOrderArg,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_setColumnOrder", || {
        let order = match order {
            0 => ColumnOrder::Sorted,
            1 => ColumnOrder::Any,
            _ => {
                return Err(Error::InvalidValue(format!(
                    "order = {order} is not a rusparseColumnOrder_t"
                )))
            }
        };
        // SAFETY: as `set_on_descr` asks.
        unsafe { set_on_descr(spgemmDescr, |d| d.column_order = order) }
    })
}

/// Sets one of the descriptor's rusparse options.
///
/// # Safety
/// `descr` is NULL or a live descriptor.
unsafe fn set_on_descr(
    descr: rusparseSpGEMMDescr_t,
    set: impl FnOnce(&mut SpgemmDescr),
) -> Result<()> {
    // SAFETY: NULL or a live descriptor; claimed first, so no other call
    // holds a reference to it.
    let _claim = unsafe { rusparseSpGEMMDescr::claim(descr) }?;
    set(unsafe { rusparseSpGEMMDescr::get_mut(descr) }?);
    Ok(())
}

/// Sets how the numeric phases (`rusparseSpGEMM_copy`,
/// `rusparseSpGEMMreuse_copy`, `rusparseSpGEMMreuse_compute`) and the
/// symbolic phases where they keep what a later phase copies
/// (`rusparseSpGEMMreuse_nnz`'s listed structure, a temporary C) check
/// that A's and B's patterns, and for `reuse_compute` C's structure, are
/// the ones planned (a rusparse extension: cuSPARSE does not check).
/// `RUSPARSE_PATTERN_CHECK_HASH` (the default) compares a 64-bit hash of
/// the index arrays before C is written: O(nnz(A) + nnz(B) + nnz(C)) per
/// call, about a tenth of a `reuse_compute` on short rows.
/// `RUSPARSE_PATTERN_CHECK_CALLER` skips the hashes, for callers that
/// know the patterns did not change (they own the arrays, or track
/// changes, as PETSc's nonzero state): shapes and nnz are still checked
/// and nothing is read or written outside the arrays, but a pattern
/// changed with the same nnz then gives wrong values or an error instead
/// of the hash's INVALID_VALUE. Set before work estimation, it also spares
/// the fingerprints of A's and B's patterns that work estimation makes for
/// the later hashes: a phase asked to hash after that has nothing to
/// compare the patterns with and checks C's products column by column
/// instead (a changed pattern then gives its exact product or an error).
/// The GPU back ends ignore it (their kernels validate the operands). May
/// be called at any time; it holds for the calls after it. INVALID_VALUE
/// for a NULL descriptor or a `check` that is not a
/// `rusparsePatternCheck_t`.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_setPatternCheck(
    spgemmDescr: rusparseSpGEMMDescr_t,
    check: PatternCheckArg,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_setPatternCheck", || {
        let check = match check {
            0 => PatternCheck::Hash,
            1 => PatternCheck::Caller,
            _ => {
                return Err(Error::InvalidValue(format!(
                    "check = {check} is not a rusparsePatternCheck_t"
                )))
            }
        };
        // SAFETY: as `set_on_descr` asks.
        unsafe { set_on_descr(spgemmDescr, |d| d.pattern_check = check) }
    })
}

/// Makes `rusparseSpGEMMreuse_copy` write C's values as well as its
/// structure (a rusparse extension; `enable` nonzero, or 0 for the
/// default): C = op(A) op(B) (alpha = 1, beta = 0) into the values array
/// set on matC (INVALID_VALUE if it is NULL then, for nnz(C) > 0), in the
/// same call. A's and B's values must be those `rusparseSpGEMMreuse_nnz`
/// saw: where that phase sums C's values as it lists C's structure (the
/// CPU), it then keeps them without hashing A's and B's values, and
/// `reuse_copy` writes them as they are; elsewhere they are computed from
/// A's and B's values at `reuse_copy`. For values that changed since
/// `reuse_nnz`, call `rusparseSpGEMMreuse_compute` after it, as always.
/// Spares a caller that wants C whole right away (PETSc's symbolic phase)
/// the two hashes of A's and B's values and the copy by `reuse_compute`.
/// Set before `rusparseSpGEMMreuse_nnz` to spare the hashes (set after
/// it, `reuse_copy` still writes the values, as `reuse_compute` would);
/// it holds for the calls after it. INVALID_VALUE for a NULL descriptor.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_setReuseCopyValues(
    spgemmDescr: rusparseSpGEMMDescr_t,
    enable: c_int,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_setReuseCopyValues", || {
        // SAFETY: as `set_on_descr` asks.
        unsafe { set_on_descr(spgemmDescr, |d| d.copy_values = enable != 0) }
    })
}

/// Predicts nnz(C) of `op(A) * op(B)` without computing C (rusparse
/// extension; the sampling predictor's ratio over a stratified sample of
/// rows): no buffer, no SpGEMM descriptor, no matC. A and B are checked as
/// in work estimation; the cost is their check, one pass counting each
/// row's products, and the sampled rows (about 1/256 of the products, more
/// on small matrices with long rows; products of up to 2^14 scalar products
/// are counted exactly). Deterministic. Measured error: 0.09 % mean on
/// large generated matrices, 1.1 % mean and 4.3 % worst on small real ones;
/// the sample costs 0.1 to 0.6 % of the SpGEMM above 10^6 products
/// (`docs/benchmarks.md`). Device arrays (a CUDA or HIP handle, or an AUTO
/// handle given device pointers) are predicted on the GPU, on the handle's
/// stream, with the same stratified sample: the device counts each row's
/// products and shape (its entries and longest merged row of B; 16 bytes a
/// row read back) and the exact nnz of the sampled rows (the symbolic
/// kernels); the host picks the rows and combines. It returns what the CPU
/// returns for the same operands (checked on an emulated GPU), so the
/// errors above hold. Its cost on a GPU is not measured yet.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_predictNnz(
    handle: rusparseHandle_t,
    opA: OperationArg,
    opB: OperationArg,
    matA: rusparseConstSpMatDescr_t,
    matB: rusparseConstSpMatDescr_t,
    nnz: *mut i64,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_predictNnz", || {
        // SAFETY: each pointer is NULL or a live object of its type; the
        // handle is claimed for the call.
        let _claim = unsafe { rusparseContext::enter(handle) }?;
        let h = unsafe { rusparseContext::get(handle) }?;
        let op_a = operation(opA, "opA")?;
        let op_b = operation(opB, "opB")?;
        let a = unsafe { rusparseSpMatDescr::get(matA) }.map_err(|e| e.context("matA"))?;
        let b = unsafe { rusparseSpMatDescr::get(matB) }.map_err(|e| e.context("matB"))?;
        let out = unsafe { out_ref(nnz, "nnz") }?;
        check_operands(a, op_a, b, op_b)?;
        let predicted = match place(&h.ctx, a, b, &[])? {
            // Host arrays on a GPU handle: the same prediction as the
            // device's, without copying them.
            Placement::Cpu | Placement::StagedGpu(_) => dispatch!(
                a.value_type,
                (a.offset_type, a.col_type),
                predict(h, a, op_a, b, op_b)
            )?,
            Placement::Gpu(dev) => predict_nnz_on_device(&dev, h.stream, (op_a, op_b), a, b)?,
        };
        *out = predicted;
        Ok(())
    })
}

fn predict<T: Scalar, I: Index, J: Index>(
    h: &Handle,
    a: &MatrixArrays,
    op_a: Op,
    b: &MatrixArrays,
    op_b: Op,
) -> Result<i64> {
    // SAFETY: the descriptors' arrays hold the sizes they state (the C
    // API's contract).
    let (a, b) = unsafe { validated_views::<T, I, J>(&h.ctx, a, b) }?;
    let opts = SpgemmOptions {
        op_a,
        op_b,
        ..SpgemmOptions::default()
    };
    let p = h.ctx.predict_nnz(&a, &b, &opts)?;
    Ok(i64::try_from(p.nnz).unwrap_or(i64::MAX))
}

/// The number of scalar products of the planned product (after work estimation).
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_getNumProducts(
    spgemmDescr: rusparseSpGEMMDescr_t,
    num_prods: *mut i64,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_getNumProducts", || {
        let (_claim, d) = descr_ref(spgemmDescr)?;
        let p = planned(d)?;
        *unsafe { out_ref(num_prods, "num_prods") }? =
            i64::try_from(p.product.num_products()).unwrap_or(i64::MAX);
        Ok(())
    })
}

/// What a product planned on `spgemmDescr` runs (rusparse extension): the
/// back end (`RUSPARSE_BACKEND_CPU`, `_CUDA` or `_HIP`, also for AUTO handles), the
/// algorithm (on the CPU the concrete one the planner chose,
/// `RUSPARSE_SPGEMM_CPU_*`; on a GPU `RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC`
/// or `_NONDETERMINISTIC`), the number of products, and nnz(C) (-1 before
/// `compute` / `reuse_nnz`). Any output pointer may be NULL. INVALID_VALUE
/// before work estimation.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_getPlanInfo(
    spgemmDescr: rusparseSpGEMMDescr_t,
    backend: *mut BackendArg,
    algorithm: *mut SpGEMMAlgArg,
    numProducts: *mut i64,
    nnzC: *mut i64,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_getPlanInfo", || {
        let (_claim, d) = descr_ref(spgemmDescr)?;
        let p = planned(d)?;
        // SAFETY: each is NULL (skipped) or a writable slot.
        unsafe {
            if !backend.is_null() {
                *backend = backend_number(p.product.placement().backend());
            }
            if !algorithm.is_null() {
                *algorithm = p.product.selected_algorithm().c_number();
            }
            if !numProducts.is_null() {
                *numProducts = i64::try_from(p.product.num_products()).unwrap_or(i64::MAX);
            }
            if !nnzC.is_null() {
                *nnzC = p.nnz.unwrap_or(-1);
            }
        }
        Ok(())
    })
}

/// The memory plan of a product planned on the CPU (rusparse extension):
/// `*peakBytes`, the planner's upper bound of everything the product
/// allocates beyond A, B and C (at most the handle's memory budget when
/// one is set), and `*concurrency`, how many chunks of rows its phases
/// work on at once (the handle's threads, or fewer to fit the budget).
/// Either pointer may be NULL. INVALID_VALUE before work estimation;
/// NOT_SUPPORTED for a product on a GPU.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_getMemoryPlan(
    spgemmDescr: rusparseSpGEMMDescr_t,
    peakBytes: *mut usize,
    concurrency: *mut i32,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_getMemoryPlan", || {
        let (_claim, d) = descr_ref(spgemmDescr)?;
        let p = planned(d)?;
        let Some((peak, chunks)) = p.product.memory_plan() else {
            return Err(Error::NotSupported(
                "the product runs on a GPU, whose planner has no memory plan yet".into(),
            ));
        };
        // SAFETY: each is NULL (skipped) or a writable slot.
        unsafe {
            if !peakBytes.is_null() {
                *peakBytes = usize::try_from(peak).unwrap_or(usize::MAX);
            }
            if !concurrency.is_null() {
                *concurrency = i32::try_from(chunks).unwrap_or(i32::MAX);
            }
        }
        Ok(())
    })
}

/// Rows per bin of a planned product (rusparse extension): how the GPU
/// back end grouped the rows of C for `which` phase, so users and
/// benchmarks can see what ran. The symbolic bins are the shared-memory
/// hash kernels from the smallest table up, then the direct bin (rows of
/// A with one entry) last; the numeric bins the same, with the global-memory
/// bin second to last. The bins are known once the symbolic phase ran
/// (`compute` with a NULL buffer, or `reuse_nnz`); before that, and always
/// on the CPU back end (which does not bin rows: its choice is the
/// algorithm `getPlanInfo` reports), `*numBins` is 0. Writes the first
/// `min(capacity, *numBins)` counts to `rowsPerBin` (which may be NULL when
/// `capacity` is 0, to ask for `*numBins`). INVALID_VALUE before work
/// estimation, for a `which` that is not a `rusparseSpGEMMBins_t`, a
/// negative capacity or a NULL `numBins`.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_getBinCounts(
    spgemmDescr: rusparseSpGEMMDescr_t,
    which: SpGEMMBinsArg,
    rowsPerBin: *mut i64,
    capacity: i32,
    numBins: *mut i32,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_getBinCounts", || {
        let (_claim, d) = descr_ref(spgemmDescr)?;
        let numeric = match which {
            0 => false,
            1 => true,
            _ => {
                return Err(Error::InvalidValue(format!(
                    "which = {which} is not a rusparseSpGEMMBins_t"
                )))
            }
        };
        let capacity = usize::try_from(capacity)
            .map_err(|_| Error::InvalidValue(format!("capacity = {capacity} is negative")))?;
        if numBins.is_null() {
            return Err(Error::InvalidValue("numBins is NULL".into()));
        }
        if capacity > 0 && rowsPerBin.is_null() {
            return Err(Error::InvalidValue(format!(
                "rowsPerBin is NULL with capacity = {capacity}"
            )));
        }
        let p = planned(d)?;
        let bins: Vec<i64> = match p.product.gpu_info() {
            None => Vec::new(),
            Some(info) if numeric => info.numeric_rows,
            Some(info) => info.symbolic_rows,
        };
        let n = i32::try_from(bins.len())
            .map_err(|_| Error::InternalError("more bins than an int32_t counts".into()))?;
        // SAFETY: `numBins` is non-NULL and writable; `rowsPerBin` holds
        // `capacity` writable slots when capacity > 0 (checked above).
        unsafe {
            *numBins = n;
            for (k, &rows) in bins.iter().take(capacity).enumerate() {
                *rowsPerBin.add(k) = rows;
            }
        }
        Ok(())
    })
}

/// ALG3's memory estimate, between work estimation and compute. With
/// `externalBuffer3 == NULL` it writes `*bufferSize3`; with a buffer it
/// writes the size `compute` will ask for into `*bufferSize2`.
/// `chunk_fraction` must be in (0, 1]. On the CPU the product is already
/// memory-bounded (metadata O(rows), no copy of C), so the estimate is the
/// small fixed buffer size. On a GPU the row metadata is O(rows) too; the
/// hash tables of rows too long for shared memory are then built at most
/// `chunk_fraction` of them at a time (at least one row's table).
#[no_mangle]
pub unsafe extern "C" fn rusparseSpGEMM_estimateMemory(
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
    chunk_fraction: f32,
    bufferSize3: *mut usize,
    externalBuffer3: *mut c_void,
    bufferSize2: *mut usize,
) -> rusparseStatus_t {
    boundary("rusparseSpGEMM_estimateMemory", || {
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
        if !(chunk_fraction > 0.0 && chunk_fraction <= 1.0) {
            return Err(Error::InvalidValue(format!(
                "chunk_fraction = {chunk_fraction} is not in (0, 1]"
            )));
        }
        with_planned(
            &mut x,
            Flow::Compute,
            Phase::WorkEstimated,
            "rusparseSpGEMM_estimateMemory",
            |_, p| {
                p.product.set_chunk_fraction(chunk_fraction);
                if buffer_protocol(bufferSize3, externalBuffer3, "bufferSize3")? {
                    // SAFETY: NULL or a writable size slot.
                    *unsafe { out_ref(bufferSize2, "bufferSize2") }? = CPU_BUFFER_BYTES;
                }
                Ok(())
            },
        )
    })
}
