//! The one error type of rusparse.
//!
//! Every variant corresponds to exactly one `rusparseStatus_t` value of the C
//! ABI (and so to one `cusparseStatus_t` value), and carries a human-readable
//! message that names the argument and the reason.

use std::fmt;

/// The outcome of a failed rusparse operation.
///
/// The variants map 1:1 onto the C statuses (see [`Error::status_code`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A handle or descriptor was missing or not initialised (status 1).
    NotInitialized(String),
    /// A host allocation failed (status 2).
    AllocFailed(String),
    /// An argument was wrong: a NULL pointer, a bad size, a malformed matrix,
    /// phases called out of order (status 3).
    InvalidValue(String),
    /// The device architecture is not supported (status 4).
    ArchMismatch(String),
    /// Memory could not be mapped (status 5).
    MappingError(String),
    /// A kernel or a back-end call failed while running (status 6).
    ExecutionFailed(String),
    /// A bug in rusparse, including a caught panic (status 7).
    InternalError(String),
    /// The matrix type is not supported (status 8).
    MatrixTypeNotSupported(String),
    /// A zero pivot was met (status 9; unused by SpGEMM, kept for the numbering).
    ZeroPivot(String),
    /// The requested type, operation or back end is not supported (status 10).
    NotSupported(String),
    /// A device resource (memory, streams) ran out (status 11).
    InsufficientResources(String),
}

/// `Result` with rusparse's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The `rusparseStatus_t` number of this error (same as cuSPARSE's).
    pub fn status_code(&self) -> i32 {
        match self {
            Error::NotInitialized(_) => 1,
            Error::AllocFailed(_) => 2,
            Error::InvalidValue(_) => 3,
            Error::ArchMismatch(_) => 4,
            Error::MappingError(_) => 5,
            Error::ExecutionFailed(_) => 6,
            Error::InternalError(_) => 7,
            Error::MatrixTypeNotSupported(_) => 8,
            Error::ZeroPivot(_) => 9,
            Error::NotSupported(_) => 10,
            Error::InsufficientResources(_) => 11,
        }
    }

    /// The message carried by the error.
    pub fn message(&self) -> &str {
        match self {
            Error::NotInitialized(m)
            | Error::AllocFailed(m)
            | Error::InvalidValue(m)
            | Error::ArchMismatch(m)
            | Error::MappingError(m)
            | Error::ExecutionFailed(m)
            | Error::InternalError(m)
            | Error::MatrixTypeNotSupported(m)
            | Error::ZeroPivot(m)
            | Error::NotSupported(m)
            | Error::InsufficientResources(m) => m,
        }
    }

    /// Returns the same error with `prefix: ` put before its message
    /// (used to name the matrix or phase an error comes from).
    pub fn context(self, prefix: &str) -> Error {
        let wrap = |m: String| format!("{prefix}: {m}");
        match self {
            Error::NotInitialized(m) => Error::NotInitialized(wrap(m)),
            Error::AllocFailed(m) => Error::AllocFailed(wrap(m)),
            Error::InvalidValue(m) => Error::InvalidValue(wrap(m)),
            Error::ArchMismatch(m) => Error::ArchMismatch(wrap(m)),
            Error::MappingError(m) => Error::MappingError(wrap(m)),
            Error::ExecutionFailed(m) => Error::ExecutionFailed(wrap(m)),
            Error::InternalError(m) => Error::InternalError(wrap(m)),
            Error::MatrixTypeNotSupported(m) => Error::MatrixTypeNotSupported(wrap(m)),
            Error::ZeroPivot(m) => Error::ZeroPivot(wrap(m)),
            Error::NotSupported(m) => Error::NotSupported(wrap(m)),
            Error::InsufficientResources(m) => Error::InsufficientResources(wrap(m)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

/// Returns `Err(Error::InvalidValue(format!(...)))` from the enclosing function.
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err($crate::Error::InvalidValue(format!($($arg)*)))
    };
}
pub(crate) use invalid;

/// Allocates a vector of `len` copies of `value`, reporting failure as
/// [`Error::AllocFailed`] instead of aborting the process.
pub(crate) fn try_vec<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    try_reserve(&mut v, len, what)?;
    v.resize(len, value);
    Ok(v)
}

/// Reserves room for `additional` more elements in `v`, reporting failure
/// as [`Error::AllocFailed`] instead of aborting the process.
pub(crate) fn try_reserve<T>(v: &mut Vec<T>, additional: usize, what: &str) -> Result<()> {
    #[cfg(feature = "failure-injection")]
    if failure_injection::fails_now() {
        return Err(Error::AllocFailed(format!(
            "could not allocate {what} ({additional} elements of {} bytes; injected failure)",
            std::mem::size_of::<T>()
        )));
    }
    let bytes = (additional as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    ensure_memory_for(bytes, what)?;
    v.try_reserve_exact(additional).map_err(|_| {
        Error::AllocFailed(format!(
            "could not allocate {what} ({additional} elements of {} bytes)",
            std::mem::size_of::<T>()
        ))
    })?;
    crate::system_memory::advise_huge_pages(v);
    Ok(())
}

/// Fails with [`Error::AllocFailed`] when `bytes` exceeds the process's
/// [`memory_limit`](crate::memory_limit), or (from
/// [`CHECKED_FROM_BYTES`](crate::system_memory::CHECKED_FROM_BYTES) up)
/// would not fit in the memory the system has left: Linux would grant such a
/// request and kill the process when rusparse fills it. Called by
/// [`try_reserve`] for each allocation, and up front by steps that make
/// several large arrays, with their total.
pub(crate) fn ensure_memory_for(bytes: u64, what: &str) -> Result<()> {
    if let Some(limit) = crate::system_memory::memory_limit().filter(|&l| bytes > l) {
        return Err(Error::AllocFailed(format!(
            "could not allocate {what}: {bytes} bytes needed, more than the limit of \
             {limit} bytes ({} or rusparse::set_memory_limit)",
            crate::system_memory::MEMORY_LIMIT_ENV
        )));
    }
    match crate::system_memory::short_of_memory(bytes) {
        Some(left) => Err(Error::AllocFailed(format!(
            "could not allocate {what}: {bytes} bytes needed, {left} bytes of memory left"
        ))),
        None => Ok(()),
    }
}

/// Allocation-failure injection for the reliability tests (cargo feature
/// `failure-injection`, never in a release): every fallible allocation of
/// rusparse goes through [`try_reserve`], which asks [`fails_now`] first.
/// The counter is process-wide (rayon's worker threads allocate too), so a
/// test using it must not run other rusparse work at the same time.
#[cfg(feature = "failure-injection")]
pub mod failure_injection {
    use std::sync::atomic::{AtomicU64, Ordering};

    static FAIL_AT: AtomicU64 = AtomicU64::new(0);
    static COUNT: AtomicU64 = AtomicU64::new(0);

    /// From now on, the `k`-th fallible allocation (counting from 1) fails
    /// with ALLOC_FAILED; `k = 0` injects nothing. Resets the count.
    pub fn fail_at(k: u64) {
        COUNT.store(0, Ordering::SeqCst);
        FAIL_AT.store(k, Ordering::SeqCst);
    }

    /// Fallible allocations attempted since the last [`fail_at`].
    pub fn attempted() -> u64 {
        COUNT.load(Ordering::SeqCst)
    }

    /// Counts one fallible allocation; true when it is the one to fail.
    pub(crate) fn fails_now() -> bool {
        let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
        n == FAIL_AT.load(Ordering::SeqCst)
    }
}
