//! Where a product runs: the handle's back end, and for AUTO handles the
//! memory A's arrays live in. Also the check that every other pointer of
//! the call lives in the same memory (mixing is INVALID_VALUE naming the
//! pointer).
//!
//! Pointers are told apart by the devices registered from outside
//! (`backend::gpu::registry`) and the GPU runtimes built in
//! (`cuPointerGetAttribute`, `hipPointerGetAttributes`); memory no device
//! knows, and everything in a build without GPU back ends, is host memory.

use super::arrays::MatrixArrays;
use crate::backend::gpu::GpuDevice;
use crate::types::BackendKind;
use crate::{Context, Error, Result};
use std::ffi::c_void;
use std::sync::Arc;

/// The back end one product runs on.
#[derive(Clone)]
pub(crate) enum Placement {
    /// Host arrays, the CPU back end.
    Cpu,
    /// Device arrays on this GPU (CUDA or HIP).
    Gpu(Arc<dyn GpuDevice>),
    /// Host arrays on a GPU handle: multiplied on its GPU, the library
    /// copying A and B there and C back at each phase.
    StagedGpu(Arc<dyn GpuDevice>),
}

impl Placement {
    pub(crate) fn backend(&self) -> BackendKind {
        match self {
            Placement::Cpu => BackendKind::Cpu,
            Placement::Gpu(dev) | Placement::StagedGpu(dev) => dev.backend(),
        }
    }
}

/// The memory a pointer refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Space {
    /// Host memory (pageable or pinned: the GPU kernels do not read through
    /// mapped pointers).
    Host,
    /// Plain or managed memory of a GPU: its runtime and ordinal.
    Device(BackendKind, usize),
}

impl Space {
    /// "host memory" / "memory of CUDA device 1".
    fn describe(self) -> String {
        match self {
            Space::Host => "host memory".into(),
            Space::Device(kind, d) => format!("memory of {} device {d}", runtime_name(kind)),
        }
    }

    fn of_device(dev: &dyn GpuDevice) -> Space {
        Space::Device(dev.backend(), dev.ordinal())
    }
}

fn runtime_name(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Hip => "HIP",
        _ => "CUDA",
    }
}

/// Where `p` lives, asking each GPU runtime built in.
///
/// # Errors
/// A runtime that cannot say whether `p` is its memory (an error other
/// than "not my memory"): running on the wrong side would crash.
fn space_of(p: *const c_void) -> Result<Space> {
    if p.is_null() {
        return Ok(Space::Host);
    }
    if let Some(dev) = crate::backend::gpu::registry::holding(p) {
        return Ok(Space::of_device(&*dev));
    }
    #[cfg(feature = "cuda")]
    if let crate::backend::cuda::MemorySpace::Device(d) = crate::backend::cuda::memory_space(p)? {
        return Ok(Space::Device(BackendKind::Cuda, d));
    }
    #[cfg(feature = "hip")]
    if let Some(d) = crate::backend::hip::device_of(p)? {
        return Ok(Space::Device(BackendKind::Hip, d));
    }
    Ok(Space::Host)
}

/// The device holding memory of `kind` and `ordinal`, for AUTO handles.
fn open_device(kind: BackendKind, ordinal: usize) -> Result<Arc<dyn GpuDevice>> {
    if let Some(dev) = crate::backend::gpu::registry::find(kind, ordinal) {
        return Ok(dev);
    }
    match kind {
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => Ok(crate::backend::cuda::CudaDevice::for_ordinal(ordinal)?),
        #[cfg(feature = "hip")]
        BackendKind::Hip => Ok(crate::backend::hip::HipDevice::get(ordinal)?),
        _ => Err(Error::InternalError(format!(
            "memory of {} device {ordinal} in a build without that back end",
            runtime_name(kind)
        ))),
    }
}

/// The arrays of a matrix descriptor, named for messages.
pub(crate) fn arrays(m: &MatrixArrays, name: &str) -> [(*const c_void, String); 3] {
    [
        (m.offsets.cast_const(), format!("{name}'s rowOffsets")),
        (m.col_ind.cast_const(), format!("{name}'s colInd")),
        (m.values.cast_const(), format!("{name}'s values")),
    ]
}

fn expect_space(pointers: &[(*const c_void, String)], want: Space, why: &str) -> Result<()> {
    for (p, what) in pointers {
        if p.is_null() {
            continue;
        }
        let got = space_of(*p)?;
        if got != want {
            return Err(Error::InvalidValue(format!(
                "{what} is {} but {why} ({}); all arrays and buffers of a product must live in the same memory",
                got.describe(),
                want.describe()
            )));
        }
    }
    Ok(())
}

/// Decides where the product of `a` and `b` runs and checks that
/// `others` (C's arrays, buffers) live there too.
///
/// * CPU handle: host memory; device pointers are INVALID_VALUE (when a
///   GPU runtime is installed to tell them apart).
/// * CUDA or HIP handle: device or managed memory of the handle's GPU,
///   or, when the first non-NULL array of A (else B, C, the buffers) is
///   host memory, host memory throughout: the product runs on the GPU with
///   its arrays copied there and back ([`Placement::StagedGpu`]).
/// * AUTO handle: where the first non-NULL array of A (else B, C, the
///   buffers) lives.
pub(crate) fn place(
    ctx: &Context,
    a: &MatrixArrays,
    b: &MatrixArrays,
    others: &[(*const c_void, String)],
) -> Result<Placement> {
    let mut all: Vec<(*const c_void, String)> = arrays(a, "matA").into();
    all.extend(arrays(b, "matB"));
    all.extend(others.iter().cloned());
    let (placement, want, why) = match ctx.backend() {
        BackendKind::Cpu => (
            Placement::Cpu,
            Space::Host,
            "the handle runs on the CPU".to_string(),
        ),
        BackendKind::Cuda | BackendKind::Hip => {
            let dev = ctx
                .gpu_device()
                .ok_or_else(|| Error::InternalError("GPU handle without a device".into()))?;
            let first = all.iter().find(|(p, _)| !p.is_null());
            let runtime = runtime_name(dev.backend());
            let first = first
                .map(|(p, what)| space_of(*p).map(|s| (s, what)))
                .transpose()?;
            match first {
                Some((Space::Host, what)) => (
                    Placement::StagedGpu(dev.clone()),
                    Space::Host,
                    format!(
                        "{what} is host memory, so the {runtime} handle copies the product's \
                         arrays to device {} and back",
                        dev.ordinal()
                    ),
                ),
                _ => (
                    Placement::Gpu(dev.clone()),
                    Space::of_device(&**dev),
                    format!(
                        "the handle runs on {runtime} device {} and takes device or managed \
                         pointers (or host arrays throughout, which it copies)",
                        dev.ordinal()
                    ),
                ),
            }
        }
        BackendKind::Auto => {
            let first = all.iter().find(|(p, _)| !p.is_null());
            let first = first
                .map(|(p, what)| space_of(*p).map(|s| (s, what.clone())))
                .transpose()?;
            match first {
                Some((Space::Device(kind, d), what)) => (
                    Placement::Gpu(open_device(kind, d)?),
                    Space::Device(kind, d),
                    format!("{what} decides where an AUTO handle runs"),
                ),
                Some((Space::Host, what)) => (
                    Placement::Cpu,
                    Space::Host,
                    format!("{what} decides where an AUTO handle runs"),
                ),
                None => (Placement::Cpu, Space::Host, String::new()),
            }
        }
    };
    expect_space(&all, want, &why)?;
    Ok(placement)
}

/// Checks that later pointers of a product (C's arrays, buffers, device
/// scalars) live where the product was placed.
pub(crate) fn check_same(
    placement: &Placement,
    pointers: &[(*const c_void, String)],
) -> Result<()> {
    match placement {
        Placement::Cpu => expect_space(pointers, Space::Host, "the product runs on the CPU"),
        Placement::Gpu(dev) => expect_space(
            pointers,
            Space::of_device(&**dev),
            &format!(
                "the product runs on {} device {}",
                runtime_name(dev.backend()),
                dev.ordinal()
            ),
        ),
        Placement::StagedGpu(dev) => expect_space(
            pointers,
            Space::Host,
            &format!(
                "the product's arrays are host memory, copied to {} device {} and back",
                runtime_name(dev.backend()),
                dev.ordinal()
            ),
        ),
    }
}
