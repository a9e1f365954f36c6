//! Finding the CUDA driver and NVRTC at run time, without panicking.
//!
//! cudarc loads `libcuda` and `libnvrtc` lazily on the first call into
//! them and *panics* when a library (or a symbol in it) is missing. Behind a
//! C ABI that would abort the caller's process, so every entry into the
//! CUDA back end goes through this module first:
//!
//! 1. `is_culib_present()` tries the same file names cudarc will try (for
//!    `cuda-12080`: `libcuda.so`, ..., `libcuda.so.12`, `libcuda.so.1`), so
//!    a later load cannot fail; NVRTC is loaded by rusparse itself
//!    ([`super::nvrtc`]: CUDA 12's or 13's, or the file `RUSPARSE_NVRTC`
//!    names);
//! 2. `cuInit` and `cuDeviceGetCount` tell whether a usable GPU exists;
//! 3. every call is also wrapped in `catch_unwind` as a second line of
//!    defence (a driver older than the bindings lacks symbols cudarc looks
//!    up on first use, which panics too).
//!
//! Every absence becomes [`Error::NotSupported`] with a message that says
//! exactly what was not found. Results are computed once per process.

use crate::error::{Error, Result};
use cudarc::driver::sys as cu;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// Runs `f`, turning a panic inside cudarc into [`Error::NotSupported`]
/// that names `what` and carries the panic message.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let _process_wide = crate::host_allocator::process_wide();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(Error::NotSupported(format!("{what}: {msg}")))
        }
    }
}

/// What the driver probe found.
#[derive(Clone, Debug)]
pub struct DriverInfo {
    /// `cuDriverGetVersion`, e.g. 12040 for CUDA 12.4.
    pub version: i32,
    /// `cuDeviceGetCount` (at least 1).
    pub device_count: usize,
}

/// Loads the CUDA driver, initialises it and counts the devices.
///
/// Cost: one `dlopen` attempt per candidate name and `cuInit` on the first
/// call; a cached result afterwards.
///
/// # Errors
/// [`Error::NotSupported`] when `libcuda` is missing, `cuInit` fails or no
/// device is found; the message names which.
pub fn driver() -> Result<DriverInfo> {
    DRIVER
        .get_or_init(|| guarded("loading the CUDA driver", probe_driver))
        .clone()
}

static DRIVER: OnceLock<Result<DriverInfo>> = OnceLock::new();

/// Whether [`driver`] already loaded and initialised the driver (never
/// loads it).
pub fn driver_loaded() -> bool {
    matches!(DRIVER.get(), Some(Ok(_)))
}

fn probe_driver() -> Result<DriverInfo> {
    // SAFETY: only tries to dlopen candidate names; no symbol is called.
    if !unsafe { cu::is_culib_present() } {
        return Err(Error::NotSupported(
            "CUDA driver library libcuda.so not found (no NVIDIA driver installed, or its \
             folder is not on the library search path)"
                .into(),
        ));
    }
    // SAFETY: the library is present; cuInit(0) is always valid to call.
    let r = unsafe { cu::cuInit(0) };
    if r != cu::CUresult::CUDA_SUCCESS {
        return Err(Error::NotSupported(format!(
            "cuInit failed with {r:?} (the NVIDIA driver is installed but no usable GPU was \
             found, or the kernel module is not loaded)"
        )));
    }
    let mut version = 0;
    // SAFETY: valid out pointer.
    let r = unsafe { cu::cuDriverGetVersion(&mut version) };
    if r != cu::CUresult::CUDA_SUCCESS {
        return Err(Error::NotSupported(format!(
            "cuDriverGetVersion failed with {r:?}"
        )));
    }
    // The bindings (cuda-12080) call entry points that CUDA 11.x drivers
    // may lack (cudarc would panic on them); stream-ordered allocation
    // needs 11.2. Require a CUDA 12 driver, which every supported GPU has.
    if version < 12000 {
        return Err(Error::NotSupported(format!(
            "the NVIDIA driver supports CUDA {}.{}; rusparse needs a driver for CUDA 12.0 or newer",
            version / 1000,
            version % 1000 / 10
        )));
    }
    let mut count = 0;
    // SAFETY: valid out pointer; the driver is initialised.
    let r = unsafe { cu::cuDeviceGetCount(&mut count) };
    if r != cu::CUresult::CUDA_SUCCESS {
        return Err(Error::NotSupported(format!(
            "cuDeviceGetCount failed with {r:?}"
        )));
    }
    if count <= 0 {
        return Err(Error::NotSupported(
            "no CUDA device found (cuDeviceGetCount = 0)".into(),
        ));
    }
    Ok(DriverInfo {
        version,
        device_count: count as usize,
    })
}

/// Checks that device `ordinal` exists (after [`driver`]).
///
/// # Errors
/// As [`driver`]; [`Error::NotSupported`] when `ordinal` is not below the
/// device count.
pub fn device(ordinal: usize) -> Result<DriverInfo> {
    let info = driver()?;
    if ordinal >= info.device_count {
        return Err(Error::NotSupported(format!(
            "CUDA device {ordinal} not found ({} device(s) present)",
            info.device_count
        )));
    }
    Ok(info)
}

/// Loads NVRTC (CUDA 12's or 13's, see [`super::nvrtc`]) and returns its
/// version `(major, minor)`.
///
/// Cost: one `dlopen` attempt per candidate on the first call; a cached
/// result afterwards.
///
/// # Errors
/// [`Error::NotSupported`] naming what was tried when no NVRTC can be
/// loaded.
pub fn nvrtc() -> Result<(i32, i32)> {
    super::nvrtc::nvrtc().map(|n| n.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_not_supported() {
        // (The default hook prints the panic; that is expected here.)
        let r: Result<()> = guarded("loading X", || panic!("Missing symbol cuFoo"));
        assert_eq!(
            r,
            Err(Error::NotSupported(
                "loading X: Missing symbol cuFoo".into()
            ))
        );
    }

    #[test]
    fn probes_never_panic() {
        // Whatever this machine has, the probes answer with a value or a
        // NotSupported message; they never panic.
        match driver() {
            Ok(info) => assert!(info.device_count >= 1 && info.version >= 12000),
            Err(e) => assert!(matches!(e, Error::NotSupported(_)), "{e:?}"),
        }
        match nvrtc() {
            Ok((major, _)) => assert!(major >= 11),
            Err(e) => assert!(matches!(e, Error::NotSupported(_)), "{e:?}"),
        }
        assert!(device(usize::MAX).is_err());
    }
}
