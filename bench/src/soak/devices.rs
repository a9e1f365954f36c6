//! The GPUs the soak's device flows run on (`--gpu`): the machine's CUDA
//! device, or, with the `emulated-gpu` feature, two emulated devices
//! (`kernels/host-tests`: host memory and the host-emulated kernels, an
//! H100's limits at warp 32 and an MI50's at wavefront 64) registered for
//! AUTO placement, so that CI, which has no GPU, drives the same C ABI
//! calls and the same pipeline.

use rusparse::backend::gpu::{GpuDevice, KernelTypes};
use std::sync::Arc;

/// Which GPUs `--gpu` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuChoice {
    /// CPU flows only.
    Off,
    /// The machine's CUDA device 0 (an error without one).
    Cuda,
    /// Emulated devices (needs the `emulated-gpu` feature).
    Emulated,
}

/// The devices of a run.
pub struct Gpus {
    devices: Vec<Arc<dyn GpuDevice>>,
    /// Registered with `register_device` (unregistered on drop).
    registered: bool,
}

impl Gpus {
    /// Opens the devices `choice` names (`None` for [`GpuChoice::Off`]).
    ///
    /// # Errors
    /// Why the devices cannot be had.
    pub fn open(choice: GpuChoice) -> Result<Option<Gpus>, String> {
        match choice {
            GpuChoice::Off => Ok(None),
            GpuChoice::Cuda => {
                use rusparse::backend::cuda::{loader, CudaDevice};
                let dev = CudaDevice::get(0)
                    .and_then(|d| loader::nvrtc().map(|_| d))
                    .map_err(|e| format!("--gpu cuda: no usable CUDA device: {e}"))?;
                Ok(Some(Gpus {
                    devices: vec![dev],
                    registered: false,
                }))
            }
            GpuChoice::Emulated => Self::emulated().map(Some),
        }
    }

    #[cfg(feature = "emulated-gpu")]
    fn emulated() -> Result<Gpus, String> {
        use rusparse::plan::gpu_bins::DeviceLimits;
        use rusparse::BackendKind;
        use rusparse_kernel_host_tests::device::EmulatedDevice;
        let devices: Vec<Arc<dyn GpuDevice>> = vec![
            EmulatedDevice::new("H100", DeviceLimits::H100, BackendKind::Cuda),
            EmulatedDevice::new("MI50", DeviceLimits::MI50, BackendKind::Hip),
        ];
        for d in &devices {
            rusparse::backend::gpu::register_device(d.clone());
        }
        Ok(Gpus {
            devices,
            registered: true,
        })
    }

    #[cfg(not(feature = "emulated-gpu"))]
    fn emulated() -> Result<Gpus, String> {
        Err(
            "--gpu emulated: rusparse-bench was built without the `emulated-gpu` feature \
             (cargo run -p rusparse-bench --features emulated-gpu -- soak ...)"
                .into(),
        )
    }

    /// The first device with kernels for `types` (a real device compiles
    /// them at the first call; an emulated one has a few type variants).
    pub fn device_for(&self, types: KernelTypes) -> Option<&Arc<dyn GpuDevice>> {
        self.devices.iter().find(|d| d.kernels(types).is_ok())
    }

    /// The devices' names.
    pub fn names(&self) -> Vec<String> {
        self.devices.iter().map(|d| d.name().to_string()).collect()
    }
}

impl Drop for Gpus {
    fn drop(&mut self) {
        if self.registered {
            for d in &self.devices {
                rusparse::backend::gpu::unregister_device(d);
            }
        }
    }
}
