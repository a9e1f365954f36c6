//! The CuPy path: `C = alpha * op(A) * op(B)` of arrays in GPU memory,
//! through rusparse's C ABI on a CUDA handle (the same functions a C
//! program calls: device pointers, the caller's stream, cuSPARSE's
//! three phases), with C's arrays and the work buffers allocated by the
//! caller (CuPy's memory pool) through a Python callback.

use std::ffi::{c_int, c_void, CStr};
use std::ptr::null_mut;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rusparse::ffi::{
    errors::rusparseGetLastErrorMessage,
    handle::{rusparseCreateWithBackend, rusparseDestroy, rusparseSetStream},
    matrix::{
        rusparseCreateConstCsr, rusparseCreateCsr, rusparseCsrSetPointers, rusparseDestroySpMat,
        rusparseSpMatGetSize,
    },
    rusparseBackend_t, rusparseConstSpMatDescr_t, rusparseHandle_t, rusparseSpGEMMDescr_t,
    rusparseSpMatDescr_t, rusparseStatus_t,
    spgemm::{
        rusparseSpGEMM_compute, rusparseSpGEMM_copy, rusparseSpGEMM_createDescr,
        rusparseSpGEMM_destroyDescr, rusparseSpGEMM_workEstimation,
    },
    spgemm_ext::rusparseSpGEMM_setColumnOrder,
};

use crate::{parse_algorithm, parse_op, status_name, Error};

/// A device operand: `(rows, cols, nnz, indptr, indices, data)` with the
/// three arrays as device addresses (zero-based CSR).
type DeviceOperand = (i64, i64, i64, usize, usize, usize);

/// rusparse's status as a Python `_rusparse.Error` with the thread's last
/// message (read on the thread that made the call, before the next one).
fn check(status: rusparseStatus_t) -> PyResult<()> {
    if status == rusparseStatus_t::RUSPARSE_STATUS_SUCCESS {
        return Ok(());
    }
    let code = status as i32;
    // SAFETY: rusparse returns a NUL-terminated string valid until its next
    // call on this thread.
    let message = unsafe { CStr::from_ptr(rusparseGetLastErrorMessage()) }
        .to_string_lossy()
        .into_owned();
    Err(Error::new_err((status_name(code), code, message)))
}

/// The handle and descriptors of one product, destroyed on every path out.
struct Objects {
    handle: rusparseHandle_t,
    a: rusparseConstSpMatDescr_t,
    b: rusparseConstSpMatDescr_t,
    c: rusparseSpMatDescr_t,
    descr: rusparseSpGEMMDescr_t,
}

impl Drop for Objects {
    fn drop(&mut self) {
        // SAFETY: each is NULL (a no-op) or from its create function.
        unsafe {
            rusparseSpGEMM_destroyDescr(self.descr);
            rusparseDestroySpMat(self.c);
            rusparseDestroySpMat(self.b);
            rusparseDestroySpMat(self.a);
            rusparseDestroy(self.handle);
        }
    }
}

/// A raw pointer used inside `py.detach` (whose closure runs on this
/// thread; the GIL is only released around it).
#[derive(Clone, Copy)]
struct Raw(*mut c_void);
// SAFETY: only moved into a closure that runs on the calling thread.
unsafe impl Send for Raw {}
// SAFETY: as above.
unsafe impl Sync for Raw {}

impl Raw {
    /// The pointer (a method, so closures capture the whole `Raw`).
    fn get(self) -> *mut c_void {
        self.0
    }
}

fn value_size(value_type: c_int) -> PyResult<usize> {
    match value_type {
        0 => Ok(4),
        1 | 4 => Ok(8),
        5 => Ok(16),
        _ => Err(PyValueError::new_err(format!(
            "value type {value_type} is not supported"
        ))),
    }
}

/// alpha (and a zero beta) as the bytes of `value_type`.
fn scalar(value_type: c_int, (re, im): (f64, f64)) -> [u8; 16] {
    let mut out = [0u8; 16];
    match value_type {
        0 => out[..4].copy_from_slice(&(re as f32).to_ne_bytes()),
        1 => out[..8].copy_from_slice(&re.to_ne_bytes()),
        4 => {
            out[..4].copy_from_slice(&(re as f32).to_ne_bytes());
            out[4..8].copy_from_slice(&(im as f32).to_ne_bytes());
        }
        _ => {
            out[..8].copy_from_slice(&re.to_ne_bytes());
            out[8..].copy_from_slice(&im.to_ne_bytes());
        }
    }
    out
}

/// `C = alpha * op(A) * op(B)` on the CUDA back end. `alloc(kind,
/// count)` allocates device memory on the caller's side and returns
/// `(address, owner)`: kind "index" (count entries of the index type),
/// "value" (of the value type) or "bytes". Returns `(nnz, (indptr owner,
/// indices owner, data owner))`. Errors as `_rusparse.Error`; with no GPU
/// (or no CUDA driver) the handle's creation fails with NOT_SUPPORTED.
#[pyfunction]
#[pyo3(signature = (a, b, value_type, index_type, op_a, op_b, alpha, stream, sorted, algorithm, alloc))]
#[allow(clippy::too_many_arguments)]
fn device_spgemm<'py>(
    py: Python<'py>,
    a: DeviceOperand,
    b: DeviceOperand,
    value_type: c_int,
    index_type: c_int,
    op_a: &str,
    op_b: &str,
    alpha: (f64, f64),
    stream: usize,
    sorted: bool,
    algorithm: &str,
    alloc: Bound<'py, PyAny>,
) -> PyResult<(i64, crate::Arrays<'py>)> {
    value_size(value_type)?;
    if index_type != 2 && index_type != 3 {
        return Err(PyValueError::new_err(
            "index type must be 2 (int32) or 3 (int64)",
        ));
    }
    let (op_a, op_b) = (parse_op(op_a)? as c_int, parse_op(op_b)? as c_int);
    let alg = parse_algorithm(algorithm)?.c_number();
    let alpha = scalar(value_type, alpha);
    let beta = [0u8; 16];
    let mut o = Objects {
        handle: null_mut(),
        a: std::ptr::null(),
        b: std::ptr::null(),
        c: null_mut(),
        descr: null_mut(),
    };
    let take = |r: Bound<'py, PyAny>| -> PyResult<(Raw, Bound<'py, PyAny>)> {
        let (ptr, owner): (usize, Bound<'py, PyAny>) = r.extract()?;
        Ok((Raw(ptr as *mut c_void), owner))
    };
    let (m, n) = {
        let rows = |x: &DeviceOperand, op: c_int| if op == 0 { (x.0, x.1) } else { (x.1, x.0) };
        (rows(&a, op_a).0, rows(&b, op_b).1)
    };
    // SAFETY (every call below): the descriptors and handle come from
    // their create functions; the arrays are the caller's device arrays of
    // the stated sizes, or ones `alloc` just made of the sizes asked.
    unsafe {
        check(rusparseCreateWithBackend(
            &mut o.handle,
            rusparseBackend_t::RUSPARSE_BACKEND_CUDA as c_int,
        ))?;
        check(rusparseSetStream(o.handle, stream as *mut c_void))?;
        for (x, slot) in [(&a, &mut o.a), (&b, &mut o.b)] {
            check(rusparseCreateConstCsr(
                slot,
                x.0,
                x.1,
                x.2,
                x.3 as *const c_void,
                x.4 as *const c_void,
                x.5 as *const c_void,
                index_type,
                index_type,
                0,
                value_type,
            ))?;
        }
    }
    let (c_offsets, offsets_owner) = take(alloc.call1(("index", m + 1))?)?;
    unsafe {
        check(rusparseCreateCsr(
            &mut o.c,
            m,
            n,
            0,
            c_offsets.0,
            null_mut(),
            null_mut(),
            index_type,
            index_type,
            0,
            value_type,
        ))?;
        check(rusparseSpGEMM_createDescr(&mut o.descr))?;
        check(rusparseSpGEMM_setColumnOrder(o.descr, c_int::from(!sorted)))?;
    }
    let (h, ma, mb, mc, d) = (
        Raw(o.handle.cast()),
        Raw(o.a.cast_mut().cast()),
        Raw(o.b.cast_mut().cast()),
        Raw(o.c.cast()),
        Raw(o.descr.cast()),
    );
    let (alpha_p, beta_p) = (
        Raw(alpha.as_ptr().cast_mut().cast()),
        Raw(beta.as_ptr().cast_mut().cast()),
    );
    // A phase of the product with the arguments every phase takes, then
    // the phase's own (work estimation and compute: the buffer's size and
    // the buffer).
    macro_rules! call_phase {
        ($phase:ident $(, $extra:expr)*) => {
            $phase(
                h.get().cast(),
                op_a,
                op_b,
                alpha_p.get(),
                ma.get().cast_const().cast(),
                mb.get().cast_const().cast(),
                beta_p.get(),
                mc.get().cast(),
                value_type,
                alg,
                d.get().cast(),
                $($extra),*
            )
        };
    }
    // The two sized phases: a call without a buffer asks its size, the
    // caller allocates it, the same call with it does the work.
    let mut buffers = Vec::new();
    for phase in [rusparseSpGEMM_workEstimation, rusparseSpGEMM_compute] {
        let run = |buffer: Raw, size: &mut usize| {
            py.detach(|| {
                // SAFETY: as above; the buffer is NULL or `size` bytes.
                unsafe { call_phase!(phase, size, buffer.get()) }
            })
        };
        let mut size = 0usize;
        check(run(Raw(null_mut()), &mut size))?;
        let (buffer, owner) = take(alloc.call1(("bytes", size.max(1)))?)?;
        check(run(buffer, &mut size))?;
        buffers.push(owner);
    }
    let mut nnz = 0i64;
    let (mut rows, mut cols) = (0i64, 0i64);
    unsafe { check(rusparseSpMatGetSize(o.c, &mut rows, &mut cols, &mut nnz))? };
    let (c_cols, cols_owner) = take(alloc.call1(("index", nnz))?)?;
    let (c_values, values_owner) = take(alloc.call1(("value", nnz))?)?;
    unsafe {
        check(rusparseCsrSetPointers(
            o.c,
            c_offsets.0,
            c_cols.0,
            c_values.0,
        ))?
    };
    let status = py.detach(|| {
        // SAFETY: as above; C's arrays hold rows + 1 and nnz entries.
        unsafe { call_phase!(rusparseSpGEMM_copy) }
    });
    check(status)?;
    drop(o);
    drop(buffers);
    Ok((nnz, (offsets_owner, cols_owner, values_owner)))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(device_spgemm, m)?)
}
