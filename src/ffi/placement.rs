//! Where a product runs: the handle's back end, and for AUTO handles the
//! memory A's arrays live in. Also the check that every other pointer of
//! the call lives in the same memory (mixing is INVALID_VALUE naming the
//! pointer).

use super::matrix::SpMat;
use crate::types::BackendKind;
use crate::{Context, Error, Result};
use std::ffi::c_void;

#[cfg(feature = "cuda")]
use crate::backend::cuda::{memory_space, CudaDevice, MemorySpace};
#[cfg(feature = "cuda")]
use std::sync::Arc;

/// The back end one product runs on.
#[derive(Clone)]
pub(crate) enum Placement {
    /// Host arrays, the CPU back end.
    Cpu,
    /// Device arrays on this GPU.
    #[cfg(feature = "cuda")]
    Cuda(Arc<CudaDevice>),
}

impl Placement {
    pub(crate) fn backend(&self) -> BackendKind {
        match self {
            Placement::Cpu => BackendKind::Cpu,
            #[cfg(feature = "cuda")]
            Placement::Cuda(_) => BackendKind::Cuda,
        }
    }
}

/// The arrays of a matrix descriptor, named for messages.
pub(crate) fn arrays(m: &SpMat, name: &str) -> [(*const c_void, String); 3] {
    [
        (m.offsets.cast_const(), format!("{name}'s rowOffsets")),
        (m.col_ind.cast_const(), format!("{name}'s colInd")),
        (m.values.cast_const(), format!("{name}'s values")),
    ]
}

#[cfg(feature = "cuda")]
fn expect_space(pointers: &[(*const c_void, String)], want: MemorySpace, why: &str) -> Result<()> {
    for (p, what) in pointers {
        if p.is_null() {
            continue;
        }
        let got = memory_space(*p);
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
///   CUDA driver is installed to tell them apart).
/// * CUDA handle: device or managed memory of the handle's GPU; host
///   pointers are INVALID_VALUE.
/// * AUTO handle: where A's row offsets live.
pub(crate) fn place(
    ctx: &Context,
    a: &SpMat,
    b: &SpMat,
    others: &[(*const c_void, String)],
) -> Result<Placement> {
    #[cfg(feature = "cuda")]
    {
        let mut all: Vec<(*const c_void, String)> = arrays(a, "matA").into();
        all.extend(arrays(b, "matB"));
        all.extend(others.iter().cloned());
        let (placement, want, why) = match ctx.backend() {
            BackendKind::Cpu => (
                Placement::Cpu,
                MemorySpace::Host,
                "the handle runs on the CPU".to_string(),
            ),
            BackendKind::Cuda => {
                let dev = ctx
                    .cuda_device()
                    .ok_or_else(|| Error::InternalError("CUDA handle without a device".into()))?;
                (
                    Placement::Cuda(dev.clone()),
                    MemorySpace::Device(dev.ordinal()),
                    format!(
                        "the handle runs on CUDA device {} and takes device or managed pointers",
                        dev.ordinal()
                    ),
                )
            }
            _ => {
                let first = all.iter().find(|(p, _)| !p.is_null());
                match first.map(|(p, what)| (memory_space(*p), what.clone())) {
                    Some((MemorySpace::Device(d), what)) => (
                        Placement::Cuda(CudaDevice::for_ordinal(d)?),
                        MemorySpace::Device(d),
                        format!("{what} decides where an AUTO handle runs"),
                    ),
                    Some((MemorySpace::Host, what)) => (
                        Placement::Cpu,
                        MemorySpace::Host,
                        format!("{what} decides where an AUTO handle runs"),
                    ),
                    None => (Placement::Cpu, MemorySpace::Host, String::new()),
                }
            }
        };
        expect_space(&all, want, &why)?;
        Ok(placement)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (a, b, others);
        match ctx.backend() {
            BackendKind::Cpu | BackendKind::Auto => Ok(Placement::Cpu),
            other => Err(Error::NotSupported(format!(
                "this build has no {other:?} back end"
            ))),
        }
    }
}

/// Checks that later pointers of a product (C's arrays, buffers, device
/// scalars) live where the product was placed.
pub(crate) fn check_same(
    placement: &Placement,
    pointers: &[(*const c_void, String)],
) -> Result<()> {
    match placement {
        #[cfg(feature = "cuda")]
        Placement::Cpu => expect_space(pointers, MemorySpace::Host, "the product runs on the CPU"),
        #[cfg(not(feature = "cuda"))]
        Placement::Cpu => {
            let _ = pointers;
            Ok(())
        }
        #[cfg(feature = "cuda")]
        Placement::Cuda(dev) => expect_space(
            pointers,
            MemorySpace::Device(dev.ordinal()),
            &format!("the product runs on CUDA device {}", dev.ordinal()),
        ),
    }
}
