//! Error names, descriptions and the thread-local last message.

use super::boundary::{boundary_value, last_error_ptr};
use super::types::StatusArg;
use std::ffi::{c_char, CStr};

fn status_text(status: StatusArg) -> (&'static CStr, &'static CStr) {
    match status {
        0 => (c"RUSPARSE_STATUS_SUCCESS", c"success"),
        1 => (
            c"RUSPARSE_STATUS_NOT_INITIALIZED",
            c"the handle or descriptor is not initialized",
        ),
        2 => (
            c"RUSPARSE_STATUS_ALLOC_FAILED",
            c"a host memory allocation failed",
        ),
        3 => (c"RUSPARSE_STATUS_INVALID_VALUE", c"an argument is invalid"),
        4 => (
            c"RUSPARSE_STATUS_ARCH_MISMATCH",
            c"the device architecture is not supported",
        ),
        5 => (c"RUSPARSE_STATUS_MAPPING_ERROR", c"memory mapping failed"),
        6 => (
            c"RUSPARSE_STATUS_EXECUTION_FAILED",
            c"the operation failed while running",
        ),
        7 => (
            c"RUSPARSE_STATUS_INTERNAL_ERROR",
            c"an internal error occurred",
        ),
        8 => (
            c"RUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED",
            c"the matrix type is not supported",
        ),
        9 => (c"RUSPARSE_STATUS_ZERO_PIVOT", c"a zero pivot was found"),
        10 => (
            c"RUSPARSE_STATUS_NOT_SUPPORTED",
            c"the operation or type is not supported",
        ),
        11 => (
            c"RUSPARSE_STATUS_INSUFFICIENT_RESOURCES",
            c"device resources are insufficient",
        ),
        _ => (c"RUSPARSE_STATUS_UNKNOWN", c"unknown status value"),
    }
}

/// The enumerator name of a status, e.g. `"RUSPARSE_STATUS_INVALID_VALUE"`
/// (`"RUSPARSE_STATUS_UNKNOWN"` for other numbers). Static storage.
#[no_mangle]
pub extern "C" fn rusparseGetErrorName(status: StatusArg) -> *const c_char {
    boundary_value(c"RUSPARSE_STATUS_UNKNOWN".as_ptr(), || {
        status_text(status).0.as_ptr()
    })
}

/// A short description of a status. Static storage.
#[no_mangle]
pub extern "C" fn rusparseGetErrorString(status: StatusArg) -> *const c_char {
    boundary_value(c"unknown status value".as_ptr(), || {
        status_text(status).1.as_ptr()
    })
}

/// The message of the last rusparse call on this thread: names the
/// function, the argument and the reason, e.g.
/// `rusparseSpGEMM_workEstimation: matA: colInd[17] = 9 is out of range for
/// 8 columns (index base 0)`. Empty after a successful call. Never NULL;
/// valid until the next rusparse call on the same thread.
#[no_mangle]
pub extern "C" fn rusparseGetLastErrorMessage() -> *const c_char {
    boundary_value(c"".as_ptr(), last_error_ptr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::types::rusparseStatus_t;

    #[test]
    fn every_status_has_its_own_name() {
        for s in rusparseStatus_t::ALL {
            let name = status_text(s as StatusArg).0.to_str().unwrap();
            assert_eq!(name, format!("RUSPARSE_STATUS_{}", &format!("{s:?}")[16..]));
        }
        assert_eq!(
            status_text(12).0.to_str().unwrap(),
            "RUSPARSE_STATUS_UNKNOWN"
        );
    }
}
