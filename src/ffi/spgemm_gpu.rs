//! The SpGEMM phases of the C ABI on a GPU (CUDA or HIP): descriptors
//! become [`DeviceCsr`]s and the phases call [`GpuSpgemm`]. Nothing here
//! reads the matrices (they are device memory); the kernels validate them.

use super::matrix::SpMat;
use crate::backend::gpu::{
    DeviceCsr, GpuDevice, GpuPlanInfo, GpuSpgemm, KernelTypes, RawStream, ValueKind,
};
use crate::types::{Algorithm, DataType, IndexBase, IndexType, Op};
use crate::{Error, Result};
use std::ffi::c_void;
use std::sync::Arc;

/// One product on a GPU, kept in the SpGEMM descriptor between phases.
pub(crate) struct GpuProduct {
    dev: Arc<dyn GpuDevice>,
    spgemm: GpuSpgemm,
    /// alpha and beta copied to the device in host pointer mode.
    scalars: Option<DeviceScalars>,
}

/// 32 bytes of device memory holding alpha (at 0) and beta (at 16),
/// allocated synchronously (they serve calls on any stream).
struct DeviceScalars {
    dev: Arc<dyn GpuDevice>,
    ptr: u64,
}

impl Drop for DeviceScalars {
    fn drop(&mut self) {
        // The device must be current for the free; if it cannot be made
        // current the 32 bytes are left to the context's teardown.
        if self.dev.bind().is_ok() {
            // SAFETY: allocated synchronously in `upload_scalars` on this
            // device, freed once; a synchronous free waits for work that
            // still reads it.
            unsafe { self.dev.free(self.ptr, None) };
        }
    }
}

fn device_csr(m: &SpMat) -> DeviceCsr {
    DeviceCsr {
        rows: m.offsets as u64,
        cols: m.col_ind as u64,
        vals: m.values as u64,
        nrows: m.rows,
        ncols: m.cols,
        nnz: m.nnz,
        base: match m.base {
            IndexBase::Zero => 0,
            IndexBase::One => 1,
        },
    }
}

fn kernel_types(m: &SpMat) -> KernelTypes {
    KernelTypes {
        value: match m.value_type {
            DataType::R32F => ValueKind::F32,
            DataType::R64F => ValueKind::F64,
            DataType::C32F => ValueKind::C32,
            DataType::C64F => ValueKind::C64,
        },
        offset64: m.offset_type == IndexType::I64,
        index64: m.col_type == IndexType::I64,
    }
}

fn check_supported(alg: Algorithm) -> Result<()> {
    if alg.is_concrete() {
        return Err(Error::NotSupported(format!(
            "{} is a CPU algorithm but the product's arrays are in GPU memory",
            alg.name()
        )));
    }
    Ok(())
}

impl GpuProduct {
    /// What the plan ran so far (bins, device, modes).
    pub(crate) fn info(&self) -> GpuPlanInfo {
        self.spgemm.info()
    }

    /// Work estimation on `dev`: validates A and B on the device, builds
    /// the transpose of an operand whose op is T or C, and counts the
    /// products. Returns the product and nprod.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dev: Arc<dyn GpuDevice>,
        stream: *mut c_void,
        op_a: Op,
        op_b: Op,
        alg: Algorithm,
        a: &SpMat,
        b: &SpMat,
        c: &SpMat,
    ) -> Result<(GpuProduct, u64)> {
        check_supported(alg)?;
        let deterministic = matches!(alg, Algorithm::Deterministic | Algorithm::Alg1);
        let mut spgemm = GpuSpgemm::work_estimation(
            &dev,
            stream as RawStream,
            op_a,
            &device_csr(a),
            op_b,
            &device_csr(b),
            kernel_types(a),
            deterministic,
        )?;
        spgemm.set_c_offsets64(c.offset_type == IndexType::I64);
        let n = spgemm.num_products().max(0) as u64;
        Ok((
            GpuProduct {
                dev,
                spgemm,
                scalars: None,
            },
            n,
        ))
    }

    /// The symbolic phase; returns nnz(C).
    pub(crate) fn symbolic(
        &mut self,
        stream: *mut c_void,
        a: &SpMat,
        b: &SpMat,
        c: &SpMat,
    ) -> Result<usize> {
        self.spgemm.set_c_offsets64(c.offset_type == IndexType::I64);
        let nnz = self
            .spgemm
            .symbolic(stream as RawStream, &device_csr(a), &device_csr(b))?;
        Ok(nnz.max(0) as usize)
    }

    /// The numeric phase into C's arrays. `alpha`/`beta` are device
    /// pointers in device pointer mode, else host values given as bytes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn numeric(
        &mut self,
        stream: *mut c_void,
        a: &SpMat,
        b: &SpMat,
        c: &SpMat,
        scalars: Scalars<'_>,
    ) -> Result<()> {
        let (alpha, beta, beta_is_zero) = match scalars {
            Scalars::Device { alpha, beta } => (alpha as u64, beta as u64, false),
            Scalars::Host {
                alpha,
                beta,
                beta_is_zero,
            } => {
                let base = self.upload_scalars(stream, alpha, beta)?;
                (base, base + 16, beta_is_zero)
            }
        };
        self.spgemm.set_c_offsets64(c.offset_type == IndexType::I64);
        self.spgemm.numeric(
            stream as RawStream,
            &device_csr(a),
            &device_csr(b),
            &device_csr(c),
            alpha,
            beta,
            beta_is_zero,
        )
    }

    /// ALG3's `chunk_fraction` (see [`GpuSpgemm::set_chunk_fraction`]).
    pub(crate) fn set_chunk_fraction(&mut self, fraction: f32) {
        self.spgemm.set_chunk_fraction(fraction);
    }

    /// Copies alpha and beta into this product's device scalars, queued on
    /// `stream` (ordered after earlier products that still read them).
    fn upload_scalars(&mut self, stream: *mut c_void, alpha: &[u8], beta: &[u8]) -> Result<u64> {
        self.dev.bind()?;
        if self.scalars.is_none() {
            let ptr = self
                .dev
                .alloc(32, None)
                .map_err(|e| e.context("allocating 32 bytes for alpha and beta"))?;
            self.scalars = Some(DeviceScalars {
                dev: self.dev.clone(),
                ptr,
            });
        }
        let ptr = self.scalars.as_ref().map_or(0, |s| s.ptr);
        let mut bytes = [0u8; 32];
        bytes[..alpha.len()].copy_from_slice(alpha);
        bytes[16..16 + beta.len()].copy_from_slice(beta);
        // SAFETY: `ptr` holds 32 bytes; the source is host memory copied
        // before the call returns (pageable memory is staged).
        unsafe { self.dev.upload(ptr, &bytes, stream as RawStream) }
            .map_err(|e| e.context("copying alpha and beta to the device"))?;
        Ok(ptr)
    }
}

/// Where alpha and beta are.
pub(crate) enum Scalars<'a> {
    /// Device pointers (device pointer mode).
    Device {
        alpha: *const c_void,
        beta: *const c_void,
    },
    /// Host values, as bytes of the value type.
    Host {
        alpha: &'a [u8],
        beta: &'a [u8],
        beta_is_zero: bool,
    },
}

/// `rusparseSpGEMM_predictNnz` for operands in `dev`'s memory, on `stream`
/// (see [`crate::backend::gpu::predict_nnz`]).
pub(crate) fn predict_nnz(
    dev: Arc<dyn GpuDevice>,
    stream: *mut c_void,
    op_a: Op,
    op_b: Op,
    a: &SpMat,
    b: &SpMat,
) -> Result<i64> {
    let p = crate::backend::gpu::predict_nnz(
        &dev,
        stream as RawStream,
        op_a,
        &device_csr(a),
        op_b,
        &device_csr(b),
        kernel_types(a),
        crate::plan::predict::Sampling::Stratified,
    )?;
    Ok(i64::try_from(p.nnz).unwrap_or(i64::MAX))
}
