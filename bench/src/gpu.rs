//! `--backend cuda`: C = A·B on the CUDA back end, timed as a user of the
//! C ABI sees it.
//!
//! A (and B) are uploaded once with `cuMemAlloc` + `cuMemcpyHtoD` (outside
//! the device's memory pool, so they never count as the product's memory).
//! One run, on a stream of its own, is
//!
//! 1. [`GpuSpgemm::work_estimation`] (validation, products per row),
//! 2. [`GpuSpgemm::symbolic`] (nnz(C)),
//! 3. C's three arrays from `cuMemAllocAsync` on the same stream (the
//!    device's current memory pool, as the plan's own buffers),
//! 4. [`GpuSpgemm::numeric`],
//! 5. `cuStreamSynchronize` (C is ready: the end of the product as a user
//!    sees it),
//! 6. `cuMemFreeAsync` of C's arrays, dropping the plan (its metadata is
//!    freed stream-ordered) and `cuCtxSynchronize`.
//!
//! The timed interval is 1–6. The first run of a process also loads or
//! compiles the kernels for the type combination (NVRTC, or the disk cache
//! in `$XDG_CACHE_HOME/rusparse`); it is reported apart as the "first call"
//! and never timed with the others. Its C is downloaded (untimed) for the
//! check against the CPU back end and for `--dump`.
//!
//! Peak device memory: the device's current memory pool's
//! `CU_MEMPOOL_ATTR_USED_MEM_HIGH`, reset (to the bytes in use) before each
//! timed run and read after it. Every allocation of a run comes from that
//! pool when the device supports stream-ordered allocation (the plan's
//! metadata, its temporary scan copy and global hash tables, C's arrays), so
//! `high - in use before` is exactly the run's peak; minus C's three arrays
//! it is the "peak extra" of the CPU path. Without stream-ordered
//! allocation the peak is not reported.
//!
//! Every driver call's result is checked; every allocation is freed by RAII
//! on every path.

use crate::sparse::BenchScalar;
use cudarc::driver::result as cu;
use cudarc::driver::sys::{self, CUdeviceptr, CUmemPool_attribute, CUstream};
use cudarc::driver::DriverError;
use rusparse::backend::cuda::device::describe_driver_error;
use rusparse::backend::cuda::CudaDevice;
use rusparse::backend::gpu::{
    predict_nnz, DeviceCsr, DeviceScalars, GpuDevice, GpuSpgemm, GpuTuning, KernelTypes, ValueKind,
};
use rusparse::plan::predict::Sampling;
use rusparse::{CsrMatrix, Index, IndexBase, IndexType, Op};
use std::sync::Arc;
use std::time::Instant;

/// The device ordinal the benchmark runs on.
pub const ORDINAL: usize = 0;

/// The CUDA device, or why there is none (the loader's NOT_SUPPORTED text).
pub fn device() -> Result<Arc<CudaDevice>, String> {
    CudaDevice::get(ORDINAL).map_err(|e| format!("the CUDA back end is not available: {e}"))
}

fn drv(what: &str) -> impl Fn(DriverError) -> String + '_ {
    move |e: DriverError| format!("CUDA: {what}: {}", describe_driver_error(&e))
}

/// The kernel types of `T` and `I` (one index type for offsets and columns).
pub fn kernel_types<T: BenchScalar, I: Index>() -> Result<KernelTypes, String> {
    let value = match T::NAME {
        "f32" => ValueKind::F32,
        "f64" => ValueKind::F64,
        "c32" => ValueKind::C32,
        "c64" => ValueKind::C64,
        other => {
            return Err(format!(
                "--value {other} is not supported on the CUDA back end"
            ))
        }
    };
    let wide = matches!(I::INDEX_TYPE, IndexType::I64);
    Ok(KernelTypes {
        value,
        offset64: wide,
        index64: wide,
    })
}

/// A stream of our own, destroyed on drop.
struct Stream(CUstream);

impl Stream {
    fn new() -> Result<Stream, String> {
        cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map(Stream)
            .map_err(drv("creating a stream"))
    }
    fn sync(&self) -> Result<(), String> {
        // SAFETY: a live stream created above.
        unsafe { cu::stream::synchronize(self.0) }.map_err(drv("synchronizing the stream"))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once; queued work completes.
        let _ = unsafe { cu::stream::destroy(self.0) };
    }
}

/// An input array: `cuMemAlloc`, freed with `cuMemFree` on drop.
struct InputBuf {
    ptr: CUdeviceptr,
}

impl InputBuf {
    /// Uploads `data` (synchronously). An empty slice gives a null pointer.
    fn upload<T>(data: &[T], what: &str) -> Result<InputBuf, String> {
        let bytes = std::mem::size_of_val(data);
        if bytes == 0 {
            return Ok(InputBuf { ptr: 0 });
        }
        // SAFETY: plain allocation of `bytes` bytes in the current context.
        let ptr = unsafe { cu::malloc_sync(bytes) }
            .map_err(drv(&format!("allocating {bytes} bytes for {what}")))?;
        let buf = InputBuf { ptr };
        // SAFETY: `ptr` holds `bytes` bytes; `data` is a live host slice.
        unsafe { cu::memcpy_htod_sync(ptr, data) }.map_err(drv(&format!("uploading {what}")))?;
        Ok(buf)
    }
}

impl Drop for InputBuf {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // SAFETY: allocated by `upload`, freed once; every use was
            // synchronized before the owner drops it.
            let _ = unsafe { cu::free_sync(self.ptr) };
        }
    }
}

/// A matrix on the device.
struct DeviceMatrix {
    _bufs: [InputBuf; 3],
    csr: DeviceCsr,
}

impl DeviceMatrix {
    fn upload<T: BenchScalar, I: Index>(
        m: &CsrMatrix<T, I, I>,
        name: &str,
    ) -> Result<DeviceMatrix, String> {
        let rows = InputBuf::upload(m.row_offsets(), &format!("{name}'s row offsets"))?;
        let cols = InputBuf::upload(m.col_indices(), &format!("{name}'s column indices"))?;
        let vals = InputBuf::upload(m.values(), &format!("{name}'s values"))?;
        let csr = DeviceCsr {
            rows: rows.ptr,
            cols: cols.ptr,
            vals: vals.ptr,
            nrows: m.nrows() as i64,
            ncols: m.ncols() as i64,
            nnz: m.nnz() as i64,
            base: 0,
        };
        Ok(DeviceMatrix {
            _bufs: [rows, cols, vals],
            csr,
        })
    }
}

/// C's arrays: `cuMemAllocAsync` on the run's stream, `cuMemFreeAsync` on
/// the same stream when dropped.
struct OutputBuf {
    ptr: CUdeviceptr,
    stream: CUstream,
}

impl OutputBuf {
    fn alloc(stream: CUstream, bytes: usize, what: &str) -> Result<OutputBuf, String> {
        if bytes == 0 {
            return Ok(OutputBuf { ptr: 0, stream });
        }
        // SAFETY: a live stream of the current context; the memory is used
        // in stream order only.
        let ptr = unsafe { cu::malloc_async(stream, bytes) }
            .map_err(drv(&format!("allocating {bytes} bytes for {what}")))?;
        Ok(OutputBuf { ptr, stream })
    }

    fn free(mut self) -> Result<(), String> {
        let ptr = std::mem::take(&mut self.ptr);
        if ptr == 0 {
            return Ok(());
        }
        // SAFETY: allocated in `alloc`, freed once after the work queued
        // before on the same stream.
        unsafe { cu::free_async(ptr, self.stream) }.map_err(drv("freeing C"))
    }
}

impl Drop for OutputBuf {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // SAFETY: as in `free` (an error path).
            let _ = unsafe { cu::free_async(self.ptr, self.stream) };
        }
    }
}

/// Waits for all work of the context when dropped.
struct SyncOnDrop;

impl Drop for SyncOnDrop {
    fn drop(&mut self) {
        let _ = cu::ctx::synchronize();
    }
}

/// The device's current memory pool (where `cuMemAllocAsync` allocates).
struct Pool(sys::CUmemoryPool);

impl Pool {
    fn current(dev: &CudaDevice) -> Result<Option<Pool>, String> {
        if !dev.has_async_alloc() {
            return Ok(None);
        }
        let d = cu::device::get(dev.ordinal() as i32).map_err(drv("cuDeviceGet"))?;
        // SAFETY: `d` comes from cuDeviceGet.
        let pool = unsafe { cu::device::get_mem_pool(d) }.map_err(drv("cuDeviceGetMemPool"))?;
        Ok(Some(Pool(pool)))
    }

    fn get(&self, attr: CUmemPool_attribute) -> Result<u64, String> {
        let mut v: u64 = 0;
        // SAFETY: the attributes read here are cuuint64_t.
        unsafe { cu::mem_pool::get_attribute(self.0, attr, (&mut v as *mut u64).cast()) }
            .map_err(drv("cuMemPoolGetAttribute"))?;
        Ok(v)
    }

    fn set(&self, attr: CUmemPool_attribute, mut v: u64) -> Result<(), String> {
        // SAFETY: the attributes written here are cuuint64_t.
        unsafe { cu::mem_pool::set_attribute(self.0, attr, (&mut v as *mut u64).cast()) }
            .map_err(drv("cuMemPoolSetAttribute"))
    }

    /// Bytes in use now, after resetting the high-water mark to it.
    fn reset(&self) -> Result<u64, String> {
        self.set(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0)?;
        self.get(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    }

    fn high(&self) -> Result<u64, String> {
        self.get(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)
    }
}

/// What the CUDA runs measured.
pub struct GpuMeasurement<T, I> {
    /// Seconds of each timed run.
    pub times: Vec<f64>,
    /// Seconds of the first run (incl. loading/compiling the kernels).
    pub first_call_s: f64,
    /// Largest peak of pool bytes over the timed runs beyond those in use
    /// before the run, C included (None without stream-ordered allocation).
    pub peak_device_bytes: Option<u64>,
    /// Bytes of C's three arrays.
    pub c_bytes: u64,
    /// Bytes the plan holds between phases ([`GpuSpgemm::device_bytes`]).
    pub plan_bytes: u64,
    /// Scalar products.
    pub nprod: u64,
    /// A description of the plan (rows per bin, spills).
    pub plan_note: String,
    /// Seconds of each phase in one more run that waited for the device
    /// after each (work estimation, symbolic, C's allocation, numeric,
    /// freeing), not among the timed runs.
    pub phases: Vec<(&'static str, f64)>,
    /// `rusparseSpGEMM_predictNnz` on the device arrays (stratified
    /// sampling): seconds of its second call (the first loads its
    /// kernels) and the predicted nnz(C).
    pub predict: (f64, u64),
    /// The device's name.
    pub device: String,
    /// C of the first run, downloaded.
    pub c: CsrMatrix<T, I, I>,
}

/// The inputs of one product on the device.
pub struct GpuProduct<'a> {
    /// The device.
    pub dev: &'a Arc<CudaDevice>,
    /// Release the pool's free memory to the driver after every run
    /// (`--cuda-pool release`); else the pool keeps it cached, as CuPy's
    /// pool does.
    pub release_pool: bool,
    /// The product's memory budget (`--memory-budget`): every device
    /// allocation of rusparse goes through a `BudgetedDevice` that keeps
    /// it, beyond A, B and C, within this many bytes.
    pub budget: Option<u64>,
    /// A kernel configuration other than the planner's (the GPU
    /// selector's sweep); the default runs the planner's.
    pub tuning: GpuTuning,
    /// The bitwise-reproducible numeric phase.
    pub deterministic: bool,
}

/// What one run does besides the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunKind {
    /// Nothing: a timed run.
    Timed,
    /// Downloads C after the clock stopped.
    KeepC,
    /// Waits for the device after each phase and times it.
    Phased,
}

/// C of one run, when asked for.
struct RunOut<T, I> {
    seconds: f64,
    nprod: u64,
    plan_bytes: u64,
    plan_note: String,
    /// Seconds of each phase, when the run synchronized after each.
    phases: Vec<(&'static str, f64)>,
    c: Option<CsrMatrix<T, I, I>>,
}

fn download<T: Copy + Default>(ptr: CUdeviceptr, n: usize, what: &str) -> Result<Vec<T>, String> {
    let mut v = vec![T::default(); n];
    if n > 0 {
        // SAFETY: `ptr` holds `n` values of `T`, written by work that was
        // synchronized before this call.
        unsafe { cu::memcpy_dtoh_sync(&mut v, ptr) }
            .map_err(drv(&format!("downloading {what}")))?;
    }
    Ok(v)
}

impl GpuProduct<'_> {
    /// One full product on `stream`; with `keep`, C is downloaded after
    /// the clock stopped.
    fn run_once<T: BenchScalar, I: Index>(
        &self,
        stream: &Stream,
        a: &DeviceCsr,
        b: &DeviceCsr,
        alpha: CUdeviceptr,
        types: KernelTypes,
        kind: RunKind,
    ) -> Result<RunOut<T, I>, String> {
        let (keep, phased) = (kind == RunKind::KeepC, kind == RunKind::Phased);
        fn lib(phase: &'static str) -> impl Fn(rusparse::Error) -> String {
            move |e| format!("CUDA {phase}: {e}")
        }
        let s = stream.0 as rusparse::backend::gpu::RawStream;
        let dev: Arc<dyn GpuDevice> = match self.budget {
            Some(b) => {
                rusparse::backend::gpu::budget::BudgetedDevice::wrap(self.dev.clone(), Some(b))
            }
            None => self.dev.clone(),
        };
        let mut phases = Vec::new();
        let mut lap = Instant::now();
        let mut mark = |name: &'static str| -> Result<(), String> {
            if phased {
                stream.sync()?;
                phases.push((name, lap.elapsed().as_secs_f64()));
                lap = Instant::now();
            }
            Ok(())
        };
        let start = Instant::now();
        let mut plan =
            GpuSpgemm::work_estimation(&dev, s, (Op::N, a), (Op::N, b), types, self.deterministic)
                .map_err(lib("work estimation"))?;
        if self.tuning != GpuTuning::default() {
            plan.tune(s, self.tuning).map_err(lib("tuning"))?;
        }
        mark("work_estimation")?;
        let nnz = plan.symbolic(s, a, b).map_err(lib("symbolic phase"))?;
        mark("symbolic")?;
        let nnz_u = usize::try_from(nnz).map_err(|_| format!("nnz(C) = {nnz}"))?;
        let m = a.nrows as usize;
        let isz = std::mem::size_of::<I>();
        let c_rows = OutputBuf::alloc(stream.0, (m + 1) * isz, "C's row offsets")?;
        let c_cols = OutputBuf::alloc(stream.0, nnz_u * isz, "C's column indices")?;
        let c_vals = OutputBuf::alloc(stream.0, nnz_u * std::mem::size_of::<T>(), "C's values")?;
        let c = DeviceCsr {
            rows: c_rows.ptr,
            cols: c_cols.ptr,
            vals: c_vals.ptr,
            nrows: a.nrows,
            ncols: b.ncols,
            nnz,
            base: 0,
        };
        mark("allocate_c")?;
        plan.numeric(s, a, b, &c, DeviceScalars::alpha_only(alpha))
            .map_err(lib("numeric phase"))?;
        mark("numeric")?;
        stream.sync()?;
        let mut seconds = start.elapsed().as_secs_f64();
        let host = if keep {
            let ro: Vec<I> = download(c.rows, m + 1, "C's row offsets")?;
            let ci: Vec<I> = download(c.cols, nnz_u, "C's column indices")?;
            let v: Vec<T> = download(c.vals, nnz_u, "C's values")?;
            Some(
                CsrMatrix::try_from_parts(m, b.ncols as usize, ro, ci, v, IndexBase::Zero)
                    .map_err(|e| format!("the CUDA back end's C is not a valid CSR matrix: {e}"))?,
            )
        } else {
            None
        };
        let resumed = Instant::now();
        let nprod = plan.num_products() as u64;
        let plan_bytes = plan.device_bytes() as u64;
        let info = plan.info();
        c_vals.free()?;
        c_cols.free()?;
        c_rows.free()?;
        drop(plan);
        cu::ctx::synchronize().map_err(drv("synchronizing the context"))?;
        let freeing = resumed.elapsed().as_secs_f64();
        seconds += freeing;
        if phased {
            phases.push(("free", freeing));
        }
        let plan_note = format!(
            "tpr {}, B canonical {}, spilled {}, symbolic bins {:?}, numeric bins {:?}, \
             global batches (symbolic, numeric) {:?}",
            info.threads_per_b_row,
            info.b_canonical,
            info.spilled_rows,
            info.symbolic_rows,
            info.numeric_rows,
            info.global_batches
        );
        Ok(RunOut {
            seconds,
            nprod,
            plan_bytes,
            plan_note,
            phases,
            c: host,
        })
    }

    /// Uploads A and B, runs the first call (kept C), `warmup` untimed runs
    /// and `runs` timed ones; `tick` after each warm-up and timed run.
    pub fn measure<T: BenchScalar, I: Index>(
        &self,
        a: &CsrMatrix<T, I, I>,
        b: Option<&CsrMatrix<T, I, I>>,
        warmup: usize,
        runs: usize,
        mut tick: impl FnMut(),
    ) -> Result<GpuMeasurement<T, I>, String> {
        let types = kernel_types::<T, I>()?;
        self.dev
            .bind()
            .map_err(|e| format!("CUDA: binding the context: {e}"))?;
        let pool = Pool::current(self.dev)?;
        if let Some(p) = &pool {
            // Keep freed memory in the pool between runs (like CuPy's
            // pool), unless asked to give it back.
            let keep = if self.release_pool { 0 } else { u64::MAX };
            p.set(CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, keep)?;
        }
        let stream = Stream::new()?;
        let da = DeviceMatrix::upload(a, "A")?;
        let db = match b {
            Some(b) => Some(DeviceMatrix::upload(b, "B")?),
            None => None,
        };
        let bcsr = db.as_ref().map_or(da.csr, |d| d.csr);
        let alpha = InputBuf::upload(&[T::one()], "alpha")?;
        // Dropped first (declared last): on every path, the device is idle
        // before the inputs are freed.
        let _idle = SyncOnDrop;

        let first =
            self.run_once::<T, I>(&stream, &da.csr, &bcsr, alpha.ptr, types, RunKind::KeepC)?;
        for _ in 0..warmup {
            self.run_once::<T, I>(&stream, &da.csr, &bcsr, alpha.ptr, types, RunKind::Timed)?;
            self.trim(&pool)?;
            tick();
        }
        let c = first.c.expect("kept");
        let c_bytes = crate::timing::c_bytes(&c) as u64;
        let mut times = Vec::with_capacity(runs);
        let mut peak: Option<u64> = None;
        for _ in 0..runs.max(1) {
            let before = pool.as_ref().map(Pool::reset).transpose()?;
            let r =
                self.run_once::<T, I>(&stream, &da.csr, &bcsr, alpha.ptr, types, RunKind::Timed)?;
            if let (Some(p), Some(before)) = (&pool, before) {
                let used = p.high()?.saturating_sub(before);
                peak = Some(peak.unwrap_or(0).max(used));
            }
            self.trim(&pool)?;
            times.push(r.seconds);
            tick();
        }
        let phased =
            self.run_once::<T, I>(&stream, &da.csr, &bcsr, alpha.ptr, types, RunKind::Phased)?;
        self.trim(&pool)?;
        let predict = self.time_predict(&stream, &da.csr, &bcsr, types)?;
        Ok(GpuMeasurement {
            phases: phased.phases,
            predict,
            times,
            first_call_s: first.seconds,
            peak_device_bytes: peak,
            c_bytes,
            plan_bytes: first.plan_bytes,
            nprod: first.nprod,
            plan_note: first.plan_note,
            device: self.dev.name().to_string(),
            c,
        })
    }

    /// Times the output-size prediction on the device arrays: its second
    /// call, waited for.
    fn time_predict(
        &self,
        stream: &Stream,
        a: &DeviceCsr,
        b: &DeviceCsr,
        types: KernelTypes,
    ) -> Result<(f64, u64), String> {
        let dev: Arc<dyn GpuDevice> = self.dev.clone();
        let s = stream.0 as rusparse::backend::gpu::RawStream;
        let mut last = (0.0, 0);
        for _ in 0..2 {
            let start = Instant::now();
            let p = predict_nnz(&dev, s, (Op::N, a), (Op::N, b), types, Sampling::Stratified)
                .map_err(|e| format!("CUDA nnz prediction: {e}"))?;
            stream.sync()?;
            last = (start.elapsed().as_secs_f64(), p.nnz);
        }
        Ok(last)
    }

    fn trim(&self, pool: &Option<Pool>) -> Result<(), String> {
        if let (true, Some(p)) = (self.release_pool, pool) {
            // SAFETY: a live pool; nothing of it is in use between runs.
            unsafe { cu::mem_pool::trim_to(p.0, 0) }.map_err(drv("cuMemPoolTrimTo"))?;
        }
        Ok(())
    }
}

/// Compares the CUDA back end's C with the CPU back end's: the structure
/// exactly, the values within `tol` relative to the larger of the entry and
/// the largest magnitude of its row (cancellation makes single entries
/// arbitrarily small). Returns a description of the first difference.
pub fn compare<T: BenchScalar, I: Index>(
    gpu: &CsrMatrix<T, I, I>,
    cpu: &CsrMatrix<T, I, I>,
    tol: f64,
) -> Result<f64, String> {
    if (gpu.nrows(), gpu.ncols(), gpu.nnz()) != (cpu.nrows(), cpu.ncols(), cpu.nnz()) {
        return Err(format!(
            "C is {} x {} with nnz {} on the GPU but {} x {} with nnz {} on the CPU",
            gpu.nrows(),
            gpu.ncols(),
            gpu.nnz(),
            cpu.nrows(),
            cpu.ncols(),
            cpu.nnz()
        ));
    }
    let (gro, cro) = (gpu.row_offsets(), cpu.row_offsets());
    if let Some(i) = (0..gro.len()).find(|&i| gro[i] != cro[i]) {
        return Err(format!(
            "row offsets differ first at {i}: GPU {} vs CPU {}",
            gro[i].to_i64(),
            cro[i].to_i64()
        ));
    }
    let (gci, cci) = (gpu.col_indices(), cpu.col_indices());
    if let Some(k) = (0..gci.len()).find(|&k| gci[k] != cci[k]) {
        let row = cro.partition_point(|o| o.to_usize() <= k) - 1;
        return Err(format!(
            "column indices differ first at entry {k} (row {row}): GPU {} vs CPU {}",
            gci[k].to_i64(),
            cci[k].to_i64()
        ));
    }
    let (gv, cv) = (gpu.values(), cpu.values());
    let mut worst = 0.0f64;
    for i in 0..cpu.nrows() {
        let range = cro[i].to_usize()..cro[i + 1].to_usize();
        let row_max = range
            .clone()
            .map(|k| cv[k].to_c64().norm())
            .fold(0.0, f64::max);
        for k in range {
            let (g, c) = (gv[k].to_c64(), cv[k].to_c64());
            let scale = c.norm().max(row_max);
            let err = (g - c).norm();
            let rel = if scale > 0.0 { err / scale } else { err };
            if rel.is_nan() || rel > tol {
                return Err(format!(
                    "values differ at row {i}, column {}: GPU {g} vs CPU {c} (relative error \
                     {rel:.3e} > {tol:.1e})",
                    cci[k].to_i64()
                ));
            }
            worst = worst.max(rel);
        }
    }
    Ok(worst)
}

/// The relative tolerance of [`compare`] for `T`: 1e-4 for single, 1e-10
/// for double precision.
pub fn tolerance<T: BenchScalar>() -> f64 {
    match T::NAME {
        "f32" | "c32" => 1e-4,
        _ => 1e-10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(vals: &[f64]) -> CsrMatrix<f64, i32, i32> {
        CsrMatrix::try_from_parts(
            2,
            3,
            vec![0, 2, 3],
            vec![0, 2, 1],
            vals.to_vec(),
            IndexBase::Zero,
        )
        .unwrap()
    }

    #[test]
    fn compare_checks_structure_and_values() {
        let c = m(&[1.0, 2.0, 3.0]);
        assert_eq!(compare(&c, &c, 1e-10), Ok(0.0));
        // Within the tolerance of the row's largest entry.
        let near = m(&[1.0 + 1e-12, 2.0, 3.0]);
        assert!(compare(&near, &c, 1e-10).unwrap() < 1e-11);
        let e = compare(&m(&[1.0, 2.0, 3.5]), &c, 1e-10).unwrap_err();
        assert!(e.contains("row 1, column 1"), "{e}");
        let e = compare(&m(&[f64::NAN, 2.0, 3.0]), &c, 1e-10).unwrap_err();
        assert!(e.contains("row 0, column 0"), "{e}");
        let other = CsrMatrix::try_from_parts(
            2,
            3,
            vec![0, 2, 3],
            vec![0, 1, 1],
            vec![1.0, 2.0, 3.0],
            IndexBase::Zero,
        )
        .unwrap();
        let e = compare(&other, &c, 1e-10).unwrap_err();
        assert!(e.contains("entry 1 (row 0)"), "{e}");
    }

    #[test]
    fn kernel_types_follow_the_bench_types() {
        let t = kernel_types::<f32, i64>().unwrap();
        assert_eq!(
            (t.value, t.offset64, t.index64),
            (ValueKind::F32, true, true)
        );
        let t = kernel_types::<rusparse::Complex<f64>, i32>().unwrap();
        assert_eq!(
            (t.value, t.offset64, t.index64),
            (ValueKind::C64, false, false)
        );
    }
}
