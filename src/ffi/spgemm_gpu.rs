//! The SpGEMM phases of the C ABI on a GPU (CUDA or HIP): descriptors
//! become [`DeviceCsr`]s and the phases call [`GpuSpgemm`]. Nothing here
//! reads the matrices (they are device memory); the kernels validate them.
//!
//! Host arrays on a GPU handle are *staged* ([`Staging`]): each phase
//! copies A's and B's arrays to device memory the product keeps (so the
//! caller may change values between phases, as on the CPU), and the
//! numeric phases write C on the device and copy it back into the
//! caller's arrays (C's old values go first when β is not zero). The
//! kernels then validate the copies; α and β are read on the host in
//! either pointer mode, since every array of such a product is host
//! memory.

use super::matrix::SpMat;
use crate::backend::gpu::{
    DeviceArrays, DeviceCsr, GpuDevice, GpuPlanInfo, GpuSpgemm, KernelTypes, RawStream,
};
use crate::types::{Algorithm, IndexBase, IndexType, Op};
use crate::{Error, Result};
use std::ffi::c_void;
use std::sync::Arc;

/// One product on a GPU, kept in the SpGEMM descriptor between phases.
pub(crate) struct GpuProduct {
    // Declared before `staging`: the plan's queued work is ordered before
    // the copies it reads are freed.
    spgemm: GpuSpgemm,
    /// alpha and beta copied to the device in host pointer mode.
    scalars: Option<DeviceArrays>,
    /// The device copies of a product of host arrays.
    staging: Option<Staging>,
    dev: Arc<dyn GpuDevice>,
}

/// Bytes of `m`'s row offsets, column indices and values.
fn array_sizes(m: &SpMat) -> Result<[usize; 3]> {
    let count = |n: i64, what: &str| {
        usize::try_from(n).map_err(|_| Error::InvalidValue(format!("{what} is negative ({n})")))
    };
    let (rows, nnz) = (count(m.rows, "rows")?, count(m.nnz, "nnz")?);
    DeviceArrays::sizes(
        rows,
        nnz,
        [m.offset_type.size(), m.col_type.size(), m.value_type.size()],
    )
}

/// The staged copy of `m` as the pipeline takes it, with `m`'s shape
/// (NULL arrays of `m` stay NULL, so the pipeline's checks see them).
fn staged_csr(copy: &DeviceArrays, m: &SpMat) -> DeviceCsr {
    let or_null = |p: *mut c_void, k: usize| if p.is_null() { 0 } else { copy.ptrs()[k] };
    DeviceCsr {
        rows: or_null(m.offsets, 0),
        cols: or_null(m.col_ind, 1),
        vals: or_null(m.values, 2),
        ..device_csr(m)
    }
}

/// `m` with nnz cut to the entries its (host) row offsets use: spare room
/// at the end of the arrays is neither copied nor read
/// ([`crate::csr::used_entries`]).
fn host_used(m: &SpMat) -> SpMat {
    if m.offsets.is_null() || m.rows < 0 {
        return m.clone();
    }
    let rows = m.rows as usize;
    // SAFETY: a descriptor's non-NULL row offsets hold rows + 1 entries
    // (the C API's contract) of the offset type.
    let last = unsafe {
        match m.offset_type {
            IndexType::I32 => i64::from(m.offsets.cast::<i32>().add(rows).read_unaligned()),
            IndexType::I64 => m.offsets.cast::<i64>().add(rows).read_unaligned(),
        }
    };
    SpMat {
        nnz: crate::csr::used_entries(last, m.base.offset() as i64, m.nnz),
        ..m.clone()
    }
}

/// The device copies of a product of host arrays: A's and B's (refreshed
/// at every phase) and C's (made at the first numeric phase).
#[derive(Default)]
struct Staging {
    a: Option<DeviceArrays>,
    b: Option<DeviceArrays>,
    c: Option<DeviceArrays>,
}

/// `slot`'s copy of `m`'s arrays, reallocated when their sizes changed,
/// with `upload` of the arrays chosen (offsets, columns, values) queued on
/// `stream`; the pipeline's view of it.
fn stage(
    dev: &Arc<dyn GpuDevice>,
    slot: &mut Option<DeviceArrays>,
    stream: *mut c_void,
    m: &SpMat,
    upload: [bool; 3],
) -> Result<DeviceCsr> {
    let bytes = array_sizes(m)?;
    if slot.as_ref().map(|c| c.bytes()) != Some(bytes) {
        *slot = None;
        *slot = Some(DeviceArrays::new(dev, bytes)?);
    }
    let copy = slot.as_ref().expect("just made");
    let host = [m.offsets, m.col_ind, m.values];
    let chosen = [0, 1, 2].map(|k| {
        if upload[k] {
            host[k].cast_const()
        } else {
            std::ptr::null()
        }
    });
    // SAFETY: the C API's contract: a descriptor's non-NULL arrays hold
    // what it states (rows + 1 offsets, nnz columns and values).
    unsafe { copy.upload(stream as RawStream, chosen) }?;
    Ok(staged_csr(copy, m))
}

/// The pipeline's view of A and B: the caller's device arrays, or (with
/// `staging`) the staged copies refreshed from the caller's host arrays
/// (`values`: with A's and B's values).
fn operands(
    dev: &Arc<dyn GpuDevice>,
    staging: Option<&mut Staging>,
    stream: *mut c_void,
    a: &SpMat,
    b: &SpMat,
    values: bool,
) -> Result<(DeviceCsr, DeviceCsr)> {
    match staging {
        None => Ok((device_csr(a), device_csr(b))),
        Some(st) => {
            dev.bind()?;
            let arrays = [true, true, values];
            Ok((
                stage(dev, &mut st.a, stream, &host_used(a), arrays)?,
                stage(dev, &mut st.b, stream, &host_used(b), arrays)?,
            ))
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
    KernelTypes::new(m.value_type, m.offset_type, m.col_type)
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
    /// `staged`: A's, B's and C's arrays are host memory, copied to the
    /// device and back by every phase (see the module docs).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dev: Arc<dyn GpuDevice>,
        staged: bool,
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
        let mut staging = staged.then(Staging::default);
        // Values are not read before the numeric phase.
        let (da, db) = operands(&dev, staging.as_mut(), stream, a, b, false)?;
        let mut spgemm = GpuSpgemm::work_estimation(
            &dev,
            stream as RawStream,
            op_a,
            &da,
            op_b,
            &db,
            kernel_types(a),
            deterministic,
        )?;
        spgemm.set_c_offsets64(c.offset_type == IndexType::I64);
        let n = spgemm.num_products().max(0) as u64;
        Ok((
            GpuProduct {
                spgemm,
                scalars: None,
                staging,
                dev,
            },
            n,
        ))
    }

    /// Whether the product's arrays are host memory staged on the device.
    pub(crate) fn staged(&self) -> bool {
        self.staging.is_some()
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
        let (da, db) = operands(&self.dev, self.staging.as_mut(), stream, a, b, false)?;
        let nnz = self.spgemm.symbolic(stream as RawStream, &da, &db)?;
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
        let (da, db) = operands(&self.dev, self.staging.as_mut(), stream, a, b, true)?;
        let dc = match &mut self.staging {
            None => device_csr(c),
            // C's old values go to the device only when beta reads them.
            Some(st) => stage(
                &self.dev,
                &mut st.c,
                stream,
                c,
                [false, false, !beta_is_zero],
            )?,
        };
        self.spgemm.numeric(
            stream as RawStream,
            &da,
            &db,
            &dc,
            alpha,
            beta,
            beta_is_zero,
        )?;
        if let Some(copy) = self.staging.as_ref().and_then(|st| st.c.as_ref()) {
            // SAFETY: the C API's contract: C's non-NULL arrays hold rows + 1
            // offsets and nnz columns and values, the sizes of the copy.
            unsafe { copy.download(stream as RawStream, [c.offsets, c.col_ind, c.values]) }?;
        }
        Ok(())
    }

    /// ALG3's `chunk_fraction` (see [`GpuSpgemm::set_chunk_fraction`]).
    pub(crate) fn set_chunk_fraction(&mut self, fraction: f32) {
        self.spgemm.set_chunk_fraction(fraction);
    }

    /// Copies alpha and beta into this product's device scalars, queued on
    /// `stream` (ordered after earlier products that still read them).
    fn upload_scalars(&mut self, stream: *mut c_void, alpha: &[u8], beta: &[u8]) -> Result<u64> {
        let scalars = match &mut self.scalars {
            Some(s) => s,
            slot => slot.insert(DeviceArrays::scalars(&self.dev)?),
        };
        scalars.set_scalars(stream as RawStream, alpha, beta)
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
