//! A product on a GPU (CUDA, HIP or emulated): the operands become
//! [`DeviceCsr`]s and the phases call the one GPU pipeline
//! ([`GpuSpgemm`]). Nothing here reads device arrays; the kernels validate
//! them.
//!
//! Host arrays on a GPU are *staged* ([`Staging`]): each phase copies A's
//! and B's arrays to device memory the product keeps (so the caller may
//! change values between phases, as on the CPU), and the numeric phases
//! write C on the device and copy it back into the caller's arrays (C's
//! old values go first when β is not zero). The kernels then validate the
//! copies; α and β are read on the host in either pointer mode, since every
//! array of such a product is host memory. The C ABI stages the host
//! arrays of a CUDA or HIP handle; the Rust API stages every product of a
//! CUDA or HIP context.

use super::arrays::MatrixArrays;
use super::{Backend, Fill, NumericJob, Operation};
use crate::backend::caller_binding::CallerBinding;
use crate::backend::gpu::budget::BudgetedDevice;
use crate::backend::gpu::host_arrays::scalar_bytes;
use crate::backend::gpu::spgemm::work_estimation_need;
use crate::backend::gpu::{
    DeviceArrays, DeviceCsr, DeviceScalars, GpuDevice, GpuPlanInfo, GpuSpgemm, HostColumns,
    KernelTypes, RawStream,
};
use crate::types::{Algorithm, IndexBase, IndexType, Op};
use crate::{Context, Error, Result, Scalar};
use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// One product on a GPU, from work estimation to C.
pub(crate) struct GpuProduct {
    /// Dropped with the caller's GPU binding saved and restored (freeing
    /// device memory makes the device current).
    parts: ManuallyDrop<Parts>,
}

struct Parts {
    // Declared before `staging`: the plan's queued work is ordered before
    // the copies it reads are freed.
    spgemm: GpuSpgemm,
    /// alpha and beta copied to the device in host pointer mode.
    scalars: Option<DeviceArrays>,
    /// The device copies of a product of host arrays.
    staging: Option<Staging>,
    dev: Arc<dyn GpuDevice>,
    /// The algorithm asked for.
    algorithm: Algorithm,
}

/// Whether `algorithm` asks for the bitwise-reproducible numeric phase.
fn deterministic(algorithm: Algorithm) -> bool {
    matches!(algorithm, Algorithm::Deterministic | Algorithm::Alg1)
}

impl Drop for GpuProduct {
    fn drop(&mut self) {
        let _binding = CallerBinding::save();
        // SAFETY: dropped once, here.
        unsafe { ManuallyDrop::drop(&mut self.parts) };
    }
}

/// Bytes of `m`'s row offsets, column indices and values.
fn array_sizes(m: &MatrixArrays) -> Result<[usize; 3]> {
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

/// `m` with nnz cut to the entries its (host) row offsets use: spare room
/// at the end of the arrays is neither copied nor read
/// ([`crate::csr::used_entries`]).
fn host_used(m: &MatrixArrays) -> MatrixArrays {
    if m.offsets.is_null() || m.rows < 0 {
        return m.clone();
    }
    let rows = m.rows as usize;
    // SAFETY: non-NULL row offsets hold rows + 1 entries (the contract of
    // every array description) of the offset type.
    let last = unsafe {
        match m.offset_type {
            IndexType::I32 => i64::from(m.offsets.cast::<i32>().add(rows).read_unaligned()),
            IndexType::I64 => m.offsets.cast::<i64>().add(rows).read_unaligned(),
        }
    };
    MatrixArrays {
        nnz: crate::csr::used_entries(last, m.base.offset() as i64, m.nnz),
        ..m.clone()
    }
}

/// The device copies of a product of host arrays: A's and B's (refreshed
/// at every phase unless the product is one call on arrays that cannot
/// change) and C's (made at the first numeric phase).
#[derive(Default)]
pub(crate) struct Staging {
    a: Option<StagedCopy>,
    b: Option<StagedCopy>,
    c: Option<StagedCopy>,
    /// C's row offsets on the device when C is computed in row blocks
    /// (its columns and values then go straight to the host).
    c_offsets: Option<DeviceArrays>,
    /// A and B cannot change between the phases (one call on borrowed
    /// arrays): each array is copied once.
    fixed: bool,
    /// C's device copy holds all three arrays even where the caller's
    /// output leaves one out (the Rust API's outputs); the C ABI passes
    /// matC's NULL arrays on, so the pipeline refuses them.
    whole_c: bool,
}

impl Staging {
    /// Staging for the C ABI: A and B refreshed at every phase.
    pub(crate) fn for_c_abi() -> Staging {
        Staging::default()
    }

    /// Staging for the Rust API; `fixed`: A and B are copied once.
    pub(crate) fn for_rust_api(fixed: bool) -> Staging {
        Staging {
            fixed,
            whole_c: true,
            ..Staging::default()
        }
    }
}

/// One matrix's device copy and which of its arrays hold the caller's data.
struct StagedCopy {
    arrays: DeviceArrays,
    uploaded: [bool; 3],
}

/// `slot`'s copy of `m`'s arrays, reallocated when their sizes changed,
/// with `upload` of the arrays chosen (offsets, columns, values) queued on
/// `stream` (`fixed`: only those not copied yet); the pipeline's view of
/// it (`whole`: all three arrays, else NULL where `m`'s array is NULL, so
/// the pipeline's checks see it).
fn stage(
    dev: &Arc<dyn GpuDevice>,
    slot: &mut Option<StagedCopy>,
    stream: RawStream,
    m: &MatrixArrays,
    (upload, fixed, whole): ([bool; 3], bool, bool),
) -> Result<DeviceCsr> {
    let bytes = array_sizes(m)?;
    if slot.as_ref().map(|c| c.arrays.bytes()) != Some(bytes) {
        *slot = None;
        *slot = Some(StagedCopy {
            arrays: DeviceArrays::new(dev, bytes)?,
            uploaded: [false; 3],
        });
    }
    let copy = slot.as_mut().expect("just made");
    let host = [m.offsets, m.col_ind, m.values];
    let chosen = [0, 1, 2].map(|k| {
        if upload[k] && !(fixed && copy.uploaded[k]) {
            host[k].cast_const()
        } else {
            std::ptr::null()
        }
    });
    // SAFETY: the contract of every array description: non-NULL arrays
    // hold what it states (rows + 1 offsets, nnz columns and values).
    unsafe { copy.arrays.upload(stream, chosen) }?;
    for (done, p) in copy.uploaded.iter_mut().zip(chosen) {
        *done |= !p.is_null();
    }
    let ptrs = copy.arrays.ptrs();
    let or_null = |p: *mut c_void, k: usize| if p.is_null() && !whole { 0 } else { ptrs[k] };
    Ok(DeviceCsr {
        rows: or_null(m.offsets, 0),
        cols: or_null(m.col_ind, 1),
        vals: or_null(m.values, 2),
        ..device_csr(m)
    })
}

pub(crate) fn device_csr(m: &MatrixArrays) -> DeviceCsr {
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

pub(crate) fn kernel_types(m: &MatrixArrays) -> KernelTypes {
    KernelTypes::new(m.value_type, m.offset_type, m.col_type)
}

fn check_supported(alg: Algorithm, dev: &dyn GpuDevice) -> Result<()> {
    if alg.is_concrete() {
        return Err(Error::NotSupported(format!(
            "{} is a CPU algorithm but the product runs on {} ({:?}); use a CPU context or \
             host arrays on a CPU handle",
            alg.name(),
            dev.name(),
            dev.backend()
        )));
    }
    Ok(())
}

/// The pipeline's view of A and B: the caller's device arrays, or the
/// staged copies refreshed from the caller's host arrays (`values`: with
/// A's and B's values).
fn operands(
    dev: &Arc<dyn GpuDevice>,
    staging: Option<&mut Staging>,
    stream: RawStream,
    (a, b): (&MatrixArrays, &MatrixArrays),
    values: bool,
) -> Result<(DeviceCsr, DeviceCsr)> {
    match staging {
        None => Ok((device_csr(a), device_csr(b))),
        Some(st) => {
            dev.bind()?;
            let how = ([true, true, values], st.fixed, false);
            Ok((
                stage(dev, &mut st.a, stream, &host_used(a), how)?,
                stage(dev, &mut st.b, stream, &host_used(b), how)?,
            ))
        }
    }
}

impl Parts {
    /// [`operands`] of this product.
    fn operands(
        &mut self,
        stream: RawStream,
        a: &MatrixArrays,
        b: &MatrixArrays,
        values: bool,
    ) -> Result<(DeviceCsr, DeviceCsr)> {
        operands(&self.dev, self.staging.as_mut(), stream, (a, b), values)
    }

    /// Copies alpha and beta into this product's device scalars, queued on
    /// `stream` (ordered after earlier products that still read them).
    fn upload_scalars(&mut self, stream: RawStream, alpha: &[u8], beta: &[u8]) -> Result<u64> {
        let scalars = match &mut self.scalars {
            Some(s) => s,
            slot => slot.insert(DeviceArrays::scalars(&self.dev)?),
        };
        scalars.set_scalars(stream, alpha, beta)
    }
}

impl GpuProduct {
    /// Work estimation on `dev`: validates A and B on the device, builds
    /// the transpose of an operand whose op is T or C, and counts the
    /// products. `staging`: A's, B's and C's arrays are host memory,
    /// copied to the device and back by every phase (see the module docs).
    /// `c_offsets`: the type of C's row offsets. `budget`: the most device
    /// memory the product may hold at once (see docs/memory.md); every
    /// allocation is counted ([`BudgetedDevice`]).
    ///
    /// # Safety
    /// Host arrays of `a` and `b` (staged products) hold what they state.
    pub(crate) unsafe fn new(
        dev: Arc<dyn GpuDevice>,
        mut staging: Option<Staging>,
        stream: *mut c_void,
        operation: Operation,
        (a, b): (&MatrixArrays, &MatrixArrays),
        c_offsets: IndexType,
        budget: crate::backend::gpu::budget::ProductMemory,
    ) -> Result<GpuProduct> {
        let _binding = CallerBinding::save();
        check_supported(operation.algorithm, &*dev)?;
        let dev: Arc<dyn GpuDevice> = BudgetedDevice::wrap(dev, budget);
        if let Some(state) = dev.budget() {
            // What staging and work estimation allocate, checked before
            // either does.
            let staged: u64 = match &staging {
                None => 0,
                Some(_) => [a, b]
                    .into_iter()
                    .map(|m| array_sizes(&host_used(m)).map(|s| s.iter().sum::<usize>() as u64))
                    .sum::<Result<u64>>()?,
            };
            // Host arrays' used entries are read here; device arrays'
            // declared nnz bounds theirs.
            let dims = |m: &MatrixArrays| match &staging {
                Some(_) => device_csr(&host_used(m)),
                None => device_csr(m),
            };
            let need = staged
                + work_estimation_need(
                    &dev,
                    kernel_types(a),
                    (operation.op_a, &dims(a)),
                    (operation.op_b, &dims(b)),
                )?;
            if state.live + need > state.budget {
                return Err(state.too_small_to_plan(state.live + need));
            }
        }
        let stream = stream as RawStream;
        // Values are not read before the numeric phase.
        let (da, db) = operands(&dev, staging.as_mut(), stream, (a, b), false)?;
        let mut spgemm = GpuSpgemm::work_estimation(
            &dev,
            stream,
            (operation.op_a, &da),
            (operation.op_b, &db),
            kernel_types(a),
            deterministic(operation.algorithm),
        )?;
        spgemm.set_c_offsets64(c_offsets == IndexType::I64);
        let parts = Parts {
            spgemm,
            scalars: None,
            staging,
            dev,
            algorithm: operation.algorithm,
        };
        Ok(GpuProduct {
            parts: ManuallyDrop::new(parts),
        })
    }

    /// What the plan ran so far (bins, device, modes).
    pub(crate) fn info(&self) -> GpuPlanInfo {
        self.parts.spgemm.info()
    }

    /// The device the product runs on.
    pub(crate) fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.parts.dev
    }

    /// Whether the product's arrays are host memory staged on the device.
    pub(crate) fn staged(&self) -> bool {
        self.parts.staging.is_some()
    }

    /// The algorithm asked for.
    pub(crate) fn algorithm(&self) -> Algorithm {
        self.parts.algorithm
    }

    /// The mode that runs: [`Algorithm::Deterministic`] or
    /// [`Algorithm::NonDeterministic`].
    pub(crate) fn selected_algorithm(&self) -> Algorithm {
        if deterministic(self.parts.algorithm) {
            Algorithm::Deterministic
        } else {
            Algorithm::NonDeterministic
        }
    }

    /// Products of the whole multiplication.
    pub(crate) fn num_products(&self) -> u64 {
        self.parts.spgemm.num_products().max(0) as u64
    }

    /// `(rows, cols)` of C.
    pub(crate) fn shape(&self) -> (usize, usize) {
        let s = &self.parts.spgemm;
        (s.nrows().max(0) as usize, s.ncols().max(0) as usize)
    }

    /// nnz(C), once the symbolic phase ran.
    pub(crate) fn nnz(&self) -> Option<usize> {
        self.info().nnz.map(|n| n.max(0) as usize)
    }

    /// ALG3's `chunk_fraction` (see [`GpuSpgemm::set_chunk_fraction`]).
    pub(crate) fn set_chunk_fraction(&mut self, fraction: f32) {
        self.parts.spgemm.set_chunk_fraction(fraction);
    }

    /// The numeric phase with `alpha` and `beta` given as values of C's
    /// type (`T`), or as device pointers.
    unsafe fn numeric_with<T: Scalar>(
        &mut self,
        stream: RawStream,
        (a, b, c): (&MatrixArrays, &MatrixArrays, &MatrixArrays),
        job: &NumericJob,
    ) -> Result<()> {
        let p = &mut *self.parts;
        let scalars = match job.fill {
            // `reuse_copy` runs the whole numeric phase with alpha = 1,
            // beta = 0 (its values are overwritten by `reuse_compute`), so
            // C's value array must be set by then.
            Fill::Structure => {
                let at = p.upload_scalars(stream, scalar_bytes(&T::one()), &[])?;
                DeviceScalars::alpha_only(at)
            }
            // A staged product's arrays are all host memory: so are alpha
            // and beta, in either pointer mode.
            _ if job.device_scalars && p.staging.is_none() => {
                if job.alpha.is_null() || job.beta.is_null() {
                    return Err(Error::InvalidValue("alpha or beta is NULL".into()));
                }
                DeviceScalars {
                    alpha: job.alpha as u64,
                    beta: job.beta as u64,
                    beta_is_zero: false,
                }
            }
            _ => {
                let alpha = super::read_scalar::<T>(job.alpha, "alpha")?;
                let beta = super::read_scalar::<T>(job.beta, "beta")?;
                let at = p.upload_scalars(stream, scalar_bytes(&alpha), scalar_bytes(&beta))?;
                DeviceScalars {
                    alpha: at,
                    beta: at + 16,
                    beta_is_zero: beta == T::zero(),
                }
            }
        };
        p.spgemm.set_c_offsets64(c.offset_type == IndexType::I64);
        let (da, db) = p.operands(stream, a, b, true)?;
        let dc = match &mut p.staging {
            None => device_csr(c),
            Some(st) if !staged_c_fits(&*p.dev, &p.spgemm, st, c)? => {
                return p.numeric_in_row_blocks(stream, (&da, &db), c, scalars);
            }
            // C's old values go to the device only when beta reads them.
            Some(st) => {
                st.c_offsets = None;
                let how = ([false, false, !scalars.beta_is_zero], false, st.whole_c);
                stage(&p.dev, &mut st.c, stream, c, how)?
            }
        };
        p.spgemm.numeric(stream, &da, &db, &dc, scalars)?;
        if let Some(copy) = p.staging.as_ref().and_then(|st| st.c.as_ref()) {
            // SAFETY: the contract of every array description: C's non-NULL
            // arrays hold rows + 1 offsets and nnz columns and values, the
            // sizes of the copy.
            unsafe {
                copy.arrays
                    .download(stream, [c.offsets, c.col_ind, c.values])
            }?;
        }
        Ok(())
    }
}

impl Parts {
    /// The numeric phase of a staged product whose C does not fit on the
    /// device: C's row offsets are written on the device and copied back,
    /// its columns and values are computed in row blocks copied straight
    /// into the caller's arrays ([`GpuSpgemm::numeric_in_row_blocks`]).
    ///
    /// # Safety
    /// C's non-NULL host arrays hold rows + 1 offsets and nnz columns and
    /// values (with C's old values when beta is not zero).
    unsafe fn numeric_in_row_blocks(
        &mut self,
        stream: RawStream,
        (da, db): (&DeviceCsr, &DeviceCsr),
        c: &MatrixArrays,
        scalars: DeviceScalars,
    ) -> Result<()> {
        let st = self.staging.as_mut().expect("a staged product");
        if !st.whole_c {
            // The C ABI passes matC's arrays on: NULL ones are refused as
            // the pipeline refuses them.
            for (p, what) in [
                (c.offsets, "row offsets"),
                (c.col_ind, "column indices"),
                (c.values, "values"),
            ] {
                if p.is_null() {
                    return Err(Error::InvalidValue(format!("C's {what} are NULL")));
                }
            }
        }
        // A whole copy of C made by an earlier call goes first.
        st.c = None;
        let bytes = array_sizes(c)?;
        let offsets_bytes = [bytes[0], 0, 0];
        if st.c_offsets.as_ref().map(|o| o.bytes()) != Some(offsets_bytes) {
            st.c_offsets = None;
            st.c_offsets = Some(DeviceArrays::new(&self.dev, offsets_bytes)?);
        }
        let offsets = st.c_offsets.as_ref().expect("just made");
        let dc = DeviceCsr {
            rows: offsets.ptrs()[0],
            cols: 0,
            vals: 0,
            ..device_csr(c)
        };
        let host = HostColumns {
            cols: c.col_ind.cast(),
            vals: c.values.cast(),
        };
        // SAFETY: the caller's contract.
        unsafe {
            self.spgemm
                .numeric_in_row_blocks(stream, (da, db), &dc, host, scalars)?;
            let none = std::ptr::null_mut();
            offsets.download(stream, [c.offsets, none, none])
        }
    }
}

/// Whether a staged product's C (host arrays) fits on the device beside
/// what the product holds and the numeric phase's least tables, within
/// its budget (or the device's free memory): if not, C is computed in row
/// blocks. Always true where neither is known.
fn staged_c_fits(
    dev: &dyn GpuDevice,
    spgemm: &GpuSpgemm,
    st: &Staging,
    c: &MatrixArrays,
) -> Result<bool> {
    let Some(state) = dev.budget() else {
        return Ok(true);
    };
    let bytes = array_sizes(c)?;
    if st.c.as_ref().map(|s| s.arrays.bytes()) == Some(bytes) {
        return Ok(true);
    }
    let held = [st.c.as_ref().map(|s| &s.arrays), st.c_offsets.as_ref()]
        .into_iter()
        .flatten()
        .map(|a| a.bytes().iter().sum::<usize>() as u64)
        .sum::<u64>();
    let need =
        state.live - held + bytes.iter().sum::<usize>() as u64 + spgemm.least_numeric_table_bytes();
    Ok(need <= state.budget)
}

impl Backend for GpuProduct {
    unsafe fn symbolic(
        &mut self,
        _ctx: &Context,
        stream: *mut c_void,
        (a, b): (&MatrixArrays, &MatrixArrays),
        c_offsets: IndexType,
    ) -> Result<usize> {
        let _binding = CallerBinding::save();
        let stream = stream as RawStream;
        let p = &mut *self.parts;
        p.spgemm.set_c_offsets64(c_offsets == IndexType::I64);
        let (da, db) = p.operands(stream, a, b, false)?;
        let nnz = p.spgemm.symbolic(stream, &da, &db)?;
        Ok(nnz.max(0) as usize)
    }

    unsafe fn numeric(
        &mut self,
        _ctx: &Context,
        stream: *mut c_void,
        arrays: (&MatrixArrays, &MatrixArrays, &MatrixArrays),
        job: &NumericJob,
    ) -> Result<u64> {
        if job.fill != Fill::Structure {
            for (x, name, does) in [(arrays.0, "matA", "reads"), (arrays.2, "matC", "writes")] {
                if x.split.is_some() {
                    return Err(Error::NotSupported(format!(
                        "{name}'s values are split between two arrays (rusparseCsrSetSplitValues), which only a CPU handle {does}"
                    )));
                }
            }
            crate::product::cpu::check_splits(arrays, Fill::Values)?;
        }
        let _binding = CallerBinding::save();
        let stream = stream as RawStream;
        with_value_type!(arrays.2.value_type, T => unsafe {
            self.numeric_with::<T>(stream, arrays, job)
        })?;
        Ok(0)
    }
}

/// The output-size prediction for operands in `dev`'s memory, on `stream`
/// (see [`crate::backend::gpu::predict_nnz`]).
pub(crate) fn predict_nnz(
    dev: &Arc<dyn GpuDevice>,
    stream: *mut c_void,
    (op_a, op_b): (Op, Op),
    a: &MatrixArrays,
    b: &MatrixArrays,
) -> Result<i64> {
    let p = crate::backend::gpu::predict_nnz(
        dev,
        stream as RawStream,
        (op_a, &device_csr(a)),
        (op_b, &device_csr(b)),
        kernel_types(a),
        crate::plan::predict::Sampling::Stratified,
    )?;
    Ok(i64::try_from(p.nnz).unwrap_or(i64::MAX))
}
