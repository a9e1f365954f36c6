//! The one boundary every `extern "C"` body runs inside, the thread-local
//! last-error message, and the pointer helpers the bodies use.

use super::types::rusparseStatus_t;
use crate::{Error, Result};
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    // Interior NULs would truncate the C string; replace them.
    let c = CString::new(message.replace('\0', "?")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Pointer to this thread's last error message (empty when the last call
/// succeeded); valid until the next rusparse call on this thread.
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Runs `body` for the C function `function`: catches panics (reported as
/// INTERNAL_ERROR), turns an [`Error`] into its status, and records the
/// message `function: reason` for `rusparseGetLastErrorMessage`. A success
/// clears the message. The calling thread's GPU binding (CUDA context, HIP
/// device) is the same after the call as before.
pub(crate) fn boundary(function: &str, body: impl FnOnce() -> Result<()>) -> rusparseStatus_t {
    // The caller's current CUDA context / HIP device, given back however
    // the body ends (it may bind a device's primary context).
    let _binding = crate::backend::caller_binding::CallerBinding::save();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            LAST_ERROR.with(|e| *e.borrow_mut() = CString::default());
            rusparseStatus_t::RUSPARSE_STATUS_SUCCESS
        }
        Ok(Err(e)) => {
            set_last_error(format!("{function}: {}", e.message()));
            rusparseStatus_t::of(&e)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(format!(
                "{function}: internal error (please report): {what}"
            ));
            rusparseStatus_t::RUSPARSE_STATUS_INTERNAL_ERROR
        }
    }
}

/// Like [`boundary`] for functions that return a value instead of a status
/// (the error-name getters): a panic yields `fallback`.
pub(crate) fn boundary_value<R>(fallback: R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// `&mut *p`, or INVALID_VALUE naming `what` when `p` is NULL.
///
/// # Safety
/// `p` must be NULL or valid for writes of a `T` for `'a`.
pub(crate) unsafe fn out_ref<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T> {
    p.as_mut()
        .ok_or_else(|| Error::InvalidValue(format!("{what} is NULL")))
}

/// What a C pointer points to: the object, and a flag set while a call
/// that reads or changes it runs, so that a second thread using the same
/// handle or descriptor at once is refused instead of racing (handles and
/// descriptors need external synchronisation, as cuSPARSE's do).
struct Slot<T> {
    busy: AtomicBool,
    inner: T,
}

/// An object claimed by the running call (see [`Opaque::claim`]); the
/// claim ends when this is dropped.
pub(crate) struct Claim {
    busy: *const AtomicBool,
}

impl Drop for Claim {
    fn drop(&mut self) {
        // SAFETY: the object outlives the call that claimed it (it is only
        // freed after a successful claim, which this one prevents).
        unsafe { (*self.busy).store(false, Ordering::Release) }
    }
}

/// Ties an opaque C type to the Rust value behind it.
pub(crate) trait Opaque: Sized {
    /// The Rust object behind the C pointer.
    type Inner;
    /// The error for a NULL pointer of this type.
    fn null_error() -> Error;
    /// What the object is called in the message for concurrent use.
    const NAME: &'static str;

    /// Moves `inner` to the heap and returns the C pointer.
    fn into_raw(inner: Self::Inner) -> *mut Self {
        let slot = Slot {
            busy: AtomicBool::new(false),
            inner,
        };
        Box::into_raw(Box::new(slot)).cast()
    }

    /// Borrows the object behind `p`.
    ///
    /// # Safety
    /// `p` must be NULL or come from [`Opaque::into_raw`] and not be freed.
    unsafe fn get<'a>(p: *const Self) -> Result<&'a Self::Inner> {
        let slot = p.cast::<Slot<Self::Inner>>();
        if slot.is_null() {
            return Err(Self::null_error());
        }
        Ok(&*std::ptr::addr_of!((*slot).inner))
    }

    /// Mutably borrows the object behind `p`.
    ///
    /// # Safety
    /// As [`Opaque::get`], and no other reference to it may be live.
    unsafe fn get_mut<'a>(p: *mut Self) -> Result<&'a mut Self::Inner> {
        let slot = p.cast::<Slot<Self::Inner>>();
        if slot.is_null() {
            return Err(Self::null_error());
        }
        Ok(&mut *std::ptr::addr_of_mut!((*slot).inner))
    }

    /// Marks the object behind `p` as used by this call until the returned
    /// claim is dropped: INVALID_VALUE when another thread's call holds it
    /// (the object is then not touched), the null error for NULL.
    ///
    /// # Safety
    /// As [`Opaque::get`].
    unsafe fn claim(p: *const Self) -> Result<Claim> {
        let slot = p.cast::<Slot<Self::Inner>>();
        if slot.is_null() {
            return Err(Self::null_error());
        }
        let busy = std::ptr::addr_of!((*slot).busy);
        if (*busy)
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(Error::InvalidValue(format!(
                "the {} is in use by a call on another thread; a {} must not be used by two \
                 threads at once (give each thread its own, or synchronise the calls)",
                Self::NAME,
                Self::NAME
            )));
        }
        Ok(Claim { busy })
    }

    /// Frees the object behind `p`; NULL is a no-op. INVALID_VALUE, and
    /// nothing freed, while another thread's call uses it.
    ///
    /// # Safety
    /// `p` must be NULL or come from [`Opaque::into_raw`] and not be freed.
    unsafe fn free(p: *mut Self) -> Result<()> {
        if p.is_null() {
            return Ok(());
        }
        let claim = Self::claim(p)?;
        std::mem::forget(claim);
        drop(Box::from_raw(p.cast::<Slot<Self::Inner>>()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: the pointer is to this thread's live message.
        unsafe { CStr::from_ptr(last_error_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    struct Thing;
    impl Opaque for Thing {
        type Inner = u32;
        const NAME: &'static str = "thing";
        fn null_error() -> Error {
            Error::InvalidValue("thing is NULL".into())
        }
    }

    #[test]
    fn a_claimed_object_is_refused_to_other_calls_and_to_destroy() {
        let p = Thing::into_raw(7);
        // SAFETY: `p` is live until the final free.
        unsafe {
            let claim = Thing::claim(p).unwrap();
            let again = Thing::claim(p).err().unwrap();
            assert!(
                matches!(&again, Error::InvalidValue(m) if m.contains("the thing is in use by a call on another thread")),
                "{again}"
            );
            let destroy = Thing::free(p).unwrap_err();
            assert!(
                matches!(&destroy, Error::InvalidValue(m) if m.contains("in use")),
                "{destroy}"
            );
            assert_eq!(
                *Thing::get(p).unwrap(),
                7,
                "a refused destroy freed nothing"
            );
            drop(claim);
            drop(Thing::claim(p).unwrap());
            Thing::free(p).unwrap();
            assert!(
                matches!(Thing::claim(std::ptr::null()), Err(Error::InvalidValue(m)) if m == "thing is NULL")
            );
        }
    }

    #[test]
    fn a_panic_becomes_internal_error_with_its_message() {
        let s = boundary("rusparseTest", || panic!("boom {}", 42));
        assert_eq!(s, rusparseStatus_t::RUSPARSE_STATUS_INTERNAL_ERROR);
        assert!(
            last().starts_with("rusparseTest: internal error"),
            "{}",
            last()
        );
        assert!(last().contains("boom 42"));
    }

    #[test]
    fn errors_keep_their_status_and_success_clears_the_message() {
        let s = boundary("rusparseTest", || Err(Error::NotSupported("no\0pe".into())));
        assert_eq!(s, rusparseStatus_t::RUSPARSE_STATUS_NOT_SUPPORTED);
        assert_eq!(last(), "rusparseTest: no?pe");
        assert_eq!(
            boundary("rusparseTest", || Ok(())),
            rusparseStatus_t::RUSPARSE_STATUS_SUCCESS
        );
        assert_eq!(last(), "");
    }
}
