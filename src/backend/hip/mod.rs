//! The HIP back end (AMD GPUs, Hygon DCUs; seed 004), behind the `hip`
//! feature.
//!
//! What exists so far:
//! - [`loader`]: the HIP runtime and hiprtc, loaded at run time;
//! - [`compile`]: the kernels' single source (`kernels/`, the same text the
//!   CUDA back end compiles) compiled with hiprtc for an AMD target and
//!   wavefront width; CI compiles every type instantiation for gfx906 and
//!   gfx90a;
//! - [`probe`]: what a HIP handle finds on this machine.
//!
//! The device pipeline (allocations, launches, the three phases) is not
//! ported yet, so a HIP handle is NOT_SUPPORTED everywhere, with the reason:
//! no runtime, no device, or, on a machine with an AMD GPU, that the
//! pipeline is missing. The planning it will use (bins and launch
//! configurations from the device's LDS and wavefront width) is shared with
//! CUDA in [`crate::plan::gpu_bins`] and tested there for 64-wide devices.

pub mod compile;
pub mod loader;

use crate::error::{Error, Result};

/// What this machine offers a HIP handle: the number of HIP devices.
///
/// # Errors
/// [`Error::NotSupported`] with the reason when the runtime cannot be
/// loaded, `hipInit` fails or no device is present.
pub fn probe() -> Result<u32> {
    let rt = loader::runtime().map_err(Error::NotSupported)?;
    // SAFETY: hipGetErrorName takes any value and returns a static string.
    let name = |e| unsafe { loader::c_text((rt.get_error_name)(e), "unknown HIP error") };
    // SAFETY: plain calls into the loaded runtime.
    let e = unsafe { (rt.init)(0) };
    let mut count = 0;
    // SAFETY: `count` is a writable int.
    let c = unsafe { (rt.get_device_count)(&mut count) };
    if c != 0 || count <= 0 {
        let mut version = 0;
        // SAFETY: `version` is a writable int.
        unsafe { (rt.runtime_get_version)(&mut version) };
        return Err(Error::NotSupported(format!(
            "no HIP device: the HIP runtime {}.{} reports hipInit: {}, hipGetDeviceCount: {} \
             ({count} devices)",
            version / 10_000_000,
            version / 100_000 % 100,
            name(e),
            name(c)
        )));
    }
    Ok(count as u32)
}

/// Opens a HIP handle: the reason it cannot run here.
///
/// # Errors
/// Always [`Error::NotSupported`]: [`probe`]'s reason, or, with a device
/// present, that the HIP pipeline is not implemented in this version.
pub fn open() -> Result<()> {
    let devices = probe()?;
    Err(Error::NotSupported(format!(
        "found {devices} HIP device(s), but this version of rusparse has no HIP SpGEMM \
         pipeline yet (its kernels compile for AMD targets; the launches are not ported)"
    )))
}
