//! The HIP back end (AMD GPUs, Hygon DCUs; after the DCU study), behind the
//! `hip` feature.
//!
//! - [`loader`]: the HIP runtime and hiprtc, loaded at run time;
//! - [`compile`]: the kernels' single source (`kernels/`, the same text the
//!   CUDA back end compiles) compiled with hiprtc for the device's
//!   `gcnArchName` and wavefront width; CI compiles every type
//!   instantiation for gfx906 and gfx90a;
//! - [`device`]: [`HipDevice`], the device's limits and kernels and
//!   [`crate::backend::gpu::GpuDevice`] over libamdhip64, so the pipeline
//!   shared with CUDA ([`crate::backend::gpu::GpuSpgemm`]) runs here too;
//!   [`device_of`] tells device pointers from host ones for AUTO handles;
//! - [`probe`]: what a HIP handle finds on this machine.
//!
//! No AMD GPU has run this yet: without a device a HIP handle is
//! NOT_SUPPORTED with the runtime's reason. The pipeline's host code is
//! exercised without a GPU by `kernels/host-tests`, which runs it on an
//! emulated device with the MI50 / Hygon DCU limits (wavefront 64, 64 KiB
//! of LDS); the bins for those limits are tested in
//! [`crate::plan::gpu_bins`].

pub mod compile;
pub mod device;
pub mod loader;

pub use device::{device_of, HipDevice};

use crate::error::{Error, Result};

/// What this machine offers a HIP handle: the number of HIP devices. Asked
/// once per process (every pointer check of an AUTO handle asks again).
///
/// # Errors
/// [`Error::NotSupported`] with the reason when the runtime cannot be
/// loaded, `hipInit` fails or no device is present.
pub fn probe() -> Result<u32> {
    let _process_wide = crate::host_allocator::process_wide();
    PROBED.get_or_init(probe_runtime).clone()
}

static PROBED: std::sync::OnceLock<Result<u32>> = std::sync::OnceLock::new();

/// Whether [`probe`] already found a HIP device (never loads the runtime).
pub fn probed() -> bool {
    matches!(PROBED.get(), Some(Ok(_)))
}

fn probe_runtime() -> Result<u32> {
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
