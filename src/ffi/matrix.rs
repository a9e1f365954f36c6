//! Sparse matrix descriptors (CSR): create, destroy, query, set pointers.
//!
//! A descriptor only records pointers, sizes and types, as cuSPARSE's does:
//! creating one never reads the arrays (C is created before its arrays
//! exist, and callers may fill A's arrays after creating its descriptor).
//! The arrays are checked by the first SpGEMM phase that reads them.

use super::boundary::{boundary, out_ref, Opaque};
use super::types::*;
use crate::product::MatrixArrays;
use crate::{Error, Result};
use std::ffi::c_void;

impl Opaque for rusparseSpMatDescr {
    type Inner = MatrixArrays;
    const NAME: &'static str = "matrix descriptor";
    fn null_error() -> Error {
        Error::InvalidValue("the matrix descriptor is NULL".into())
    }
}

/// The arguments of `rusparseCreateCsr` after the descriptor slot, as the
/// caller gave them.
struct CsrArgs {
    rows: i64,
    cols: i64,
    nnz: i64,
    offsets: *mut c_void,
    col_ind: *mut c_void,
    values: *mut c_void,
    offset_type: IndexTypeArg,
    col_type: IndexTypeArg,
    base: IndexBaseArg,
    value_type: DataTypeArg,
}

/// Checks `args` and writes a new descriptor of them into `descr`
/// (`constant`: read-only, rusparseCreateConstCsr).
fn create(descr: *mut rusparseSpMatDescr_t, args: CsrArgs, constant: bool) -> Result<()> {
    let CsrArgs {
        rows,
        cols,
        nnz,
        offsets,
        col_ind,
        values,
        offset_type,
        col_type,
        base,
        value_type,
    } = args;
    // SAFETY: NULL or a writable descriptor slot.
    let slot = unsafe { out_ref(descr, "spMatDescr") }?;
    *slot = std::ptr::null_mut();
    for (v, what) in [(rows, "rows"), (cols, "cols"), (nnz, "nnz")] {
        if v < 0 {
            return Err(Error::InvalidValue(format!("{what} = {v} is negative")));
        }
    }
    let offset_type = index_type(offset_type, "csrRowOffsetsType")?;
    let col_type = index_type(col_type, "csrColIndType")?;
    let base = index_base(base, "idxBase")?;
    let value_type = data_type(value_type, "valueType")?;
    let b = base.offset() as u64;
    if nnz as u64 + b > offset_type.max() {
        return Err(Error::InvalidValue(format!(
            "nnz = {nnz} does not fit csrRowOffsetsType {}",
            offset_type.name()
        )));
    }
    if cols as u64 > col_type.max() + 1 - b {
        return Err(Error::InvalidValue(format!(
            "cols = {cols} does not fit csrColIndType {}",
            col_type.name()
        )));
    }
    // The arrays must be addressable: (rows + 1) offsets and nnz entries.
    let addressable = |n: i64, size: usize| {
        (n as u64)
            .checked_mul(size as u64)
            .is_some_and(|b| b <= isize::MAX as u64)
    };
    if !addressable(rows.saturating_add(1), offset_type.size())
        || !addressable(nnz, value_type.size().max(col_type.size()))
    {
        return Err(Error::InvalidValue(format!(
            "rows = {rows}, nnz = {nnz} describe arrays larger than the address space"
        )));
    }
    if nnz > 0 && col_ind.is_null() {
        return Err(Error::InvalidValue(format!(
            "csrColInd is NULL but nnz = {nnz}"
        )));
    }
    *slot = rusparseSpMatDescr::into_raw(MatrixArrays {
        rows,
        cols,
        nnz,
        offsets,
        col_ind,
        values,
        offset_type,
        col_type,
        base,
        value_type,
        constant,
        split: None,
    });
    Ok(())
}

/// Creates a CSR descriptor (cuSPARSE's parameter order). The arrays are
/// not read here: `csrRowOffsets` may be NULL for a C to be filled by
/// SpGEMM; `csrColInd` may be NULL only when `nnz == 0`; `csrValues` may
/// be NULL for a structure-only matrix (the phases that read values refuse
/// it, naming the array). `nnz` may exceed `rowOffsets[rows] - base`: the
/// entries past the offsets are spare room, never read (as cuSPARSE).
/// Errors: INVALID_VALUE for a NULL `spMatDescr`, negative sizes, sizes that
/// do not fit the index types, bad enum values; NOT_SUPPORTED for 16-bit
/// index or value types.
#[no_mangle]
pub unsafe extern "C" fn rusparseCreateCsr(
    spMatDescr: *mut rusparseSpMatDescr_t,
    rows: i64,
    cols: i64,
    nnz: i64,
    csrRowOffsets: *mut c_void,
    csrColInd: *mut c_void,
    csrValues: *mut c_void,
    csrRowOffsetsType: IndexTypeArg,
    csrColIndType: IndexTypeArg,
    idxBase: IndexBaseArg,
    valueType: DataTypeArg,
) -> rusparseStatus_t {
    boundary("rusparseCreateCsr", || {
        let args = CsrArgs {
            rows,
            cols,
            nnz,
            offsets: csrRowOffsets,
            col_ind: csrColInd,
            values: csrValues,
            offset_type: csrRowOffsetsType,
            col_type: csrColIndType,
            base: idxBase,
            value_type: valueType,
        };
        create(spMatDescr, args, false)
    })
}

/// Creates a read-only CSR descriptor (usable as A or B, not as C).
#[no_mangle]
pub unsafe extern "C" fn rusparseCreateConstCsr(
    spMatDescr: *mut rusparseConstSpMatDescr_t,
    rows: i64,
    cols: i64,
    nnz: i64,
    csrRowOffsets: *const c_void,
    csrColInd: *const c_void,
    csrValues: *const c_void,
    csrRowOffsetsType: IndexTypeArg,
    csrColIndType: IndexTypeArg,
    idxBase: IndexBaseArg,
    valueType: DataTypeArg,
) -> rusparseStatus_t {
    boundary("rusparseCreateConstCsr", || {
        let args = CsrArgs {
            rows,
            cols,
            nnz,
            offsets: csrRowOffsets.cast_mut(),
            col_ind: csrColInd.cast_mut(),
            values: csrValues.cast_mut(),
            offset_type: csrRowOffsetsType,
            col_type: csrColIndType,
            base: idxBase,
            value_type: valueType,
        };
        create(spMatDescr.cast(), args, true)
    })
}

/// Destroys a descriptor (never the arrays it points to). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn rusparseDestroySpMat(
    spMatDescr: rusparseConstSpMatDescr_t,
) -> rusparseStatus_t {
    // SAFETY: NULL or a descriptor from rusparseCreate(Const)Csr, destroyed once.
    boundary("rusparseDestroySpMat", || unsafe {
        rusparseSpMatDescr::free(spMatDescr.cast_mut())
    })
}

/// Rows, columns and nnz (for C: nnz(C) once `rusparseSpGEMM_compute` or
/// `rusparseSpGEMMreuse_nnz` ran).
#[no_mangle]
pub unsafe extern "C" fn rusparseSpMatGetSize(
    spMatDescr: rusparseConstSpMatDescr_t,
    rows: *mut i64,
    cols: *mut i64,
    nnz: *mut i64,
) -> rusparseStatus_t {
    boundary("rusparseSpMatGetSize", || {
        // SAFETY: NULL or live descriptor; NULL or writable slots.
        let m = unsafe { rusparseSpMatDescr::get(spMatDescr) }?;
        let (r, c, n) = unsafe {
            (
                out_ref(rows, "rows")?,
                out_ref(cols, "cols")?,
                out_ref(nnz, "nnz")?,
            )
        };
        (*r, *c, *n) = (m.rows, m.cols, m.nnz);
        Ok(())
    })
}

/// Where `rusparseCsrGet` writes what a descriptor records.
struct CsrSlots {
    rows: *mut i64,
    cols: *mut i64,
    nnz: *mut i64,
    offsets: *mut *mut c_void,
    col_ind: *mut *mut c_void,
    values: *mut *mut c_void,
    offset_type: *mut IndexTypeArg,
    col_type: *mut IndexTypeArg,
    base: *mut IndexBaseArg,
    value_type: *mut DataTypeArg,
}

fn csr_get(descr: rusparseConstSpMatDescr_t, slots: CsrSlots) -> Result<()> {
    let CsrSlots {
        rows,
        cols,
        nnz,
        offsets,
        col_ind,
        values,
        offset_type,
        col_type,
        base,
        value_type,
    } = slots;
    // SAFETY: NULL or live descriptor; NULL or writable slots.
    unsafe {
        let m = rusparseSpMatDescr::get(descr)?;
        *out_ref(rows, "rows")? = m.rows;
        *out_ref(cols, "cols")? = m.cols;
        *out_ref(nnz, "nnz")? = m.nnz;
        *out_ref(offsets, "csrRowOffsets")? = m.offsets;
        *out_ref(col_ind, "csrColInd")? = m.col_ind;
        *out_ref(values, "csrValues")? = m.values;
        *out_ref(offset_type, "csrRowOffsetsType")? = m.offset_type.c_number();
        *out_ref(col_type, "csrColIndType")? = m.col_type.c_number();
        *out_ref(base, "idxBase")? = m.base.offset() as IndexBaseArg;
        *out_ref(value_type, "valueType")? = m.value_type.c_number();
    }
    Ok(())
}

/// Everything a CSR descriptor records. Every output pointer is required.
#[no_mangle]
pub unsafe extern "C" fn rusparseCsrGet(
    spMatDescr: rusparseSpMatDescr_t,
    rows: *mut i64,
    cols: *mut i64,
    nnz: *mut i64,
    csrRowOffsets: *mut *mut c_void,
    csrColInd: *mut *mut c_void,
    csrValues: *mut *mut c_void,
    csrRowOffsetsType: *mut IndexTypeArg,
    csrColIndType: *mut IndexTypeArg,
    idxBase: *mut IndexBaseArg,
    valueType: *mut DataTypeArg,
) -> rusparseStatus_t {
    boundary("rusparseCsrGet", || {
        let slots = CsrSlots {
            rows,
            cols,
            nnz,
            offsets: csrRowOffsets,
            col_ind: csrColInd,
            values: csrValues,
            offset_type: csrRowOffsetsType,
            col_type: csrColIndType,
            base: idxBase,
            value_type: valueType,
        };
        csr_get(spMatDescr, slots)
    })
}

/// `rusparseCsrGet` for a read-only descriptor.
#[no_mangle]
pub unsafe extern "C" fn rusparseConstCsrGet(
    spMatDescr: rusparseConstSpMatDescr_t,
    rows: *mut i64,
    cols: *mut i64,
    nnz: *mut i64,
    csrRowOffsets: *mut *const c_void,
    csrColInd: *mut *const c_void,
    csrValues: *mut *const c_void,
    csrRowOffsetsType: *mut IndexTypeArg,
    csrColIndType: *mut IndexTypeArg,
    idxBase: *mut IndexBaseArg,
    valueType: *mut DataTypeArg,
) -> rusparseStatus_t {
    boundary("rusparseConstCsrGet", || {
        let slots = CsrSlots {
            rows,
            cols,
            nnz,
            offsets: csrRowOffsets.cast(),
            col_ind: csrColInd.cast(),
            values: csrValues.cast(),
            offset_type: csrRowOffsetsType,
            col_type: csrColIndType,
            base: idxBase,
            value_type: valueType,
        };
        csr_get(spMatDescr, slots)
    })
}

fn writable<'a>(descr: rusparseSpMatDescr_t) -> Result<&'a mut MatrixArrays> {
    // SAFETY: NULL or a live descriptor not otherwise borrowed during the call.
    let m = unsafe { rusparseSpMatDescr::get_mut(descr) }?;
    if m.constant {
        return Err(Error::InvalidValue(
            "the descriptor was created with rusparseCreateConstCsr and is read-only".into(),
        ));
    }
    Ok(m)
}

/// Sets the three arrays (used for C after `compute` told its nnz).
/// `csrColInd` may be NULL only when nnz is 0; `csrValues` may be NULL for
/// a structure-only matrix (`rusparseSpGEMMreuse_copy` writes no values;
/// the phases that read or write values refuse it).
#[no_mangle]
pub unsafe extern "C" fn rusparseCsrSetPointers(
    spMatDescr: rusparseSpMatDescr_t,
    csrRowOffsets: *mut c_void,
    csrColInd: *mut c_void,
    csrValues: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseCsrSetPointers", || {
        // SAFETY: NULL or a live descriptor.
        let _claim = unsafe { rusparseSpMatDescr::claim(spMatDescr) }?;
        let m = writable(spMatDescr)?;
        if csrRowOffsets.is_null() {
            return Err(Error::InvalidValue("csrRowOffsets is NULL".into()));
        }
        if m.nnz > 0 && csrColInd.is_null() {
            return Err(Error::InvalidValue(format!(
                "csrColInd is NULL but nnz = {}",
                m.nnz
            )));
        }
        (m.offsets, m.col_ind, m.values) = (csrRowOffsets, csrColInd, csrValues);
        Ok(())
    })
}

/// Keeps a matrix's values in two arrays instead of `csrValues`, each row
/// split between them: row `i`'s first `firstRowOffsets[i + 1] -
/// firstRowOffsets[i]` values (in the row's column order) at
/// `firstValues + firstRowOffsets[i]`, the rest at
/// `secondValues + secondRowOffsets[i]`
/// (offsets with the descriptor's offset type and index base). This is how
/// an MPI rank keeps its rows of a distributed matrix (PETSc's MPIAIJ
/// diagonal and off-diagonal blocks, hypre's `diag` and `offd`) when its
/// columns number the rank's own columns first, so no merged copy of the
/// values is needed:
///
/// - on **matC**, `rusparseSpGEMMreuse_compute` writes C's values into the
///   two arrays in place;
/// - on **matA** (op(A) = A or its transpose), `rusparseSpGEMMreuse_compute`
///   reads A's values from them, and `csrValues` may be NULL. With op(A) =
///   A the known-structure kernel reads the two arrays directly; otherwise
///   they are first copied into one array (no saving, same results).
///
/// The offsets must increase and split every row exactly; this is checked
/// at each `reuse_compute`, before anything is read or written (matA's
/// under `RUSPARSE_PATTERN_CHECK_CALLER`: row by row as they are read, so
/// rows of C before a bad one may be written; still INVALID_VALUE).
///
/// All four NULL: the values are `csrValues` again. A values pointer may
/// be NULL only for a block with no entries. Only `reuse_compute` on a CPU
/// handle reads or writes split values: `rusparseSpGEMM_compute`/`copy`, a
/// GPU handle, and any product whose matB has them refuse them
/// (`reuse_copy` reads and writes no values and ignores them). The arrays
/// must stay valid until the split is cleared or the descriptor destroyed.
#[no_mangle]
pub unsafe extern "C" fn rusparseCsrSetSplitValues(
    spMatDescr: rusparseSpMatDescr_t,
    firstRowOffsets: *mut c_void,
    firstValues: *mut c_void,
    secondRowOffsets: *mut c_void,
    secondValues: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseCsrSetSplitValues", || {
        // SAFETY: NULL or a live descriptor.
        let _claim = unsafe { rusparseSpMatDescr::claim(spMatDescr) }?;
        let m = writable(spMatDescr)?;
        let all = [firstRowOffsets, firstValues, secondRowOffsets, secondValues];
        if all.iter().all(|p| p.is_null()) {
            m.split = None;
            return Ok(());
        }
        if firstRowOffsets.is_null() || secondRowOffsets.is_null() {
            return Err(Error::InvalidValue(format!(
                "{} is NULL (all four NULL clear the split)",
                if firstRowOffsets.is_null() {
                    "firstRowOffsets"
                } else {
                    "secondRowOffsets"
                }
            )));
        }
        m.split = Some(all);
        Ok(())
    })
}

fn get_values(descr: rusparseConstSpMatDescr_t, values: *mut *mut c_void) -> Result<()> {
    // SAFETY: NULL or live descriptor; NULL or writable slot.
    let m = unsafe { rusparseSpMatDescr::get(descr) }?;
    *unsafe { out_ref(values, "values") }? = m.values;
    Ok(())
}

/// The values pointer.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpMatGetValues(
    spMatDescr: rusparseSpMatDescr_t,
    values: *mut *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSpMatGetValues", || get_values(spMatDescr, values))
}

/// The values pointer of a read-only descriptor.
#[no_mangle]
pub unsafe extern "C" fn rusparseConstSpMatGetValues(
    spMatDescr: rusparseConstSpMatDescr_t,
    values: *mut *const c_void,
) -> rusparseStatus_t {
    boundary("rusparseConstSpMatGetValues", || {
        get_values(spMatDescr, values.cast())
    })
}

/// Replaces the values pointer. NULL is accepted (a structure-only
/// matrix); the phases that read values refuse it.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpMatSetValues(
    spMatDescr: rusparseSpMatDescr_t,
    values: *mut c_void,
) -> rusparseStatus_t {
    boundary("rusparseSpMatSetValues", || {
        // SAFETY: NULL or a live descriptor.
        let _claim = unsafe { rusparseSpMatDescr::claim(spMatDescr) }?;
        let m = writable(spMatDescr)?;
        m.values = values;
        Ok(())
    })
}

/// The index base.
#[no_mangle]
pub unsafe extern "C" fn rusparseSpMatGetIndexBase(
    spMatDescr: rusparseConstSpMatDescr_t,
    idxBase: *mut IndexBaseArg,
) -> rusparseStatus_t {
    boundary("rusparseSpMatGetIndexBase", || {
        // SAFETY: NULL or live descriptor; NULL or writable slot.
        let m = unsafe { rusparseSpMatDescr::get(spMatDescr) }?;
        *unsafe { out_ref(idxBase, "idxBase") }? = m.base.offset() as IndexBaseArg;
        Ok(())
    })
}
