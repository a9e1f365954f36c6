//! GPU devices implemented outside rusparse.
//!
//! A [`GpuDevice`] registered here takes part in AUTO placement like a CUDA
//! or HIP device: a product whose arrays it [holds](GpuDevice::holds) runs
//! on it through the C ABI. `kernels/host-tests` registers its emulated
//! device this way, so the C ABI's GPU path (descriptors, scalars, buffers,
//! reuse, plan info) runs in CI without a GPU. A registered device should
//! report a `(backend, ordinal)` pair no real device has (the emulated one
//! uses ordinals from 100).

use super::GpuDevice;
use crate::types::BackendKind;
use std::ffi::c_void;
use std::sync::{Arc, RwLock};

static REGISTERED: RwLock<Vec<Arc<dyn GpuDevice>>> = RwLock::new(Vec::new());

/// Registers `dev` for AUTO placement (see the module docs). Registering
/// the same device twice has no further effect.
pub fn register_device(dev: Arc<dyn GpuDevice>) {
    let mut all = REGISTERED.write().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|d| Arc::ptr_eq(d, &dev)) {
        all.push(dev);
    }
}

/// Removes `dev` from AUTO placement; products already placed on it keep
/// their reference.
pub fn unregister_device(dev: &Arc<dyn GpuDevice>) {
    REGISTERED
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|d| !Arc::ptr_eq(d, dev));
}

/// The registered device holding `p`, if any.
pub(crate) fn holding(p: *const c_void) -> Option<Arc<dyn GpuDevice>> {
    let addr = p as usize;
    REGISTERED
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|d| d.holds(addr))
        .cloned()
}

/// The registered device with this runtime and ordinal, if any.
pub(crate) fn find(kind: BackendKind, ordinal: usize) -> Option<Arc<dyn GpuDevice>> {
    REGISTERED
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|d| d.backend() == kind && d.ordinal() == ordinal)
        .cloned()
}
