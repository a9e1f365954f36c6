//! The GPU binding of the caller's thread, given back when a call returns.
//!
//! To work on a device rusparse makes that device's primary context
//! current (CUDA) or sets the current device (HIP). A caller may have had
//! another context or device current, its own `cuCtxCreate` context or the
//! device of its next `cudaMalloc`; leaving the thread changed would move
//! the caller's later work. Every C ABI call and every GPU product of the
//! Rust API therefore saves the binding first and restores it after
//! ([`CallerBinding`]), when it changed. Runtimes not loaded yet are not
//! loaded for this.

/// The binding found when the call began; restored on drop.
#[must_use = "the binding is restored when this is dropped"]
pub(crate) struct CallerBinding {
    #[cfg(feature = "cuda")]
    cuda: Option<cudarc::driver::sys::CUcontext>,
    #[cfg(feature = "hip")]
    hip: Option<std::ffi::c_int>,
}

impl CallerBinding {
    /// Saves the calling thread's current CUDA context and HIP device,
    /// for each runtime that is loaded.
    pub(crate) fn save() -> CallerBinding {
        CallerBinding {
            #[cfg(feature = "cuda")]
            cuda: cuda_current(),
            #[cfg(feature = "hip")]
            hip: hip_current(),
        }
    }
}

impl Drop for CallerBinding {
    fn drop(&mut self) {
        #[cfg(feature = "cuda")]
        if let Some(saved) = self.cuda {
            if cuda_current() != Some(saved) {
                // SAFETY: the driver is loaded (the context was read from
                // it); a context that was current at entry, or null.
                unsafe { cudarc::driver::sys::cuCtxSetCurrent(saved) };
            }
        }
        #[cfg(feature = "hip")]
        if let Some(saved) = self.hip {
            if hip_current() != Some(saved) {
                if let Ok(rt) = super::hip::loader::runtime() {
                    // SAFETY: a device ordinal the runtime reported.
                    unsafe { (rt.set_device)(saved) };
                }
            }
        }
    }
}

#[cfg(feature = "cuda")]
fn cuda_current() -> Option<cudarc::driver::sys::CUcontext> {
    use cudarc::driver::sys as cu;
    if !super::cuda::loader::driver_loaded() {
        return None;
    }
    let mut ctx: cu::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is loaded and initialised; a valid out pointer.
    let r = unsafe { cu::cuCtxGetCurrent(&mut ctx) };
    (r == cu::CUresult::CUDA_SUCCESS).then_some(ctx)
}

#[cfg(feature = "hip")]
fn hip_current() -> Option<std::ffi::c_int> {
    if !super::hip::probed() {
        return None;
    }
    let rt = super::hip::loader::runtime().ok()?;
    let mut d: std::ffi::c_int = -1;
    // SAFETY: a writable int.
    let r = unsafe { (rt.get_device)(&mut d) };
    (r == 0 && d >= 0).then_some(d)
}
