//! The soak's C ABI flows, as a C program calls them: the three phases of
//! cuSPARSE's SpGEMM sample (work estimation, compute, copy) and the reuse
//! flow (`SpGEMMreuse_*`: the pattern once, then `compute` again after the
//! values of A and B changed, with β), on arrays in host memory (a CPU
//! handle), in a GPU's memory (an AUTO handle, which finds the device
//! from the pointers), or in host memory on a GPU's handle (which stages
//! them), with α and β on the host or, in device pointer mode, on the
//! device (on the host for staged products). Every handle, descriptor, buffer and device
//! allocation is released on every path.

use crate::sparse::BenchScalar;
use rusparse::backend::gpu::GpuDevice;
use rusparse::ffi::errors::rusparseGetLastErrorMessage;
use rusparse::ffi::handle::{
    rusparseCreate, rusparseCreateWithBackend, rusparseDestroy, rusparseSetMemoryBudget,
    rusparseSetNumThreads, rusparseSetPointerMode,
};
use rusparse::ffi::matrix::{
    rusparseCreateCsr, rusparseCsrSetPointers, rusparseDestroySpMat, rusparseSpMatGetSize,
};
use rusparse::ffi::spgemm::{
    rusparseSpGEMM_compute, rusparseSpGEMM_copy, rusparseSpGEMM_createDescr,
    rusparseSpGEMM_destroyDescr, rusparseSpGEMM_workEstimation, rusparseSpGEMMreuse_compute,
    rusparseSpGEMMreuse_copy, rusparseSpGEMMreuse_nnz, rusparseSpGEMMreuse_workEstimation,
};
use rusparse::ffi::spgemm_ext::{rusparseSpGEMM_estimateMemory, rusparseSpGEMM_getPlanInfo};
use rusparse::ffi::types::{
    rusparseHandle_t, rusparseSpGEMMDescr_t, rusparseSpMatDescr_t, rusparseStatus_t,
};
use rusparse::{BackendKind, CsrMatrix, Index, IndexBase, Op};
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::Arc;

/// C's row offsets, column indices and values.
pub(super) type CsrArrays<T, I, J> = (Vec<I>, Vec<J>, Vec<T>);

/// C after the reuse flow's first compute, and its values after the
/// second.
pub(super) type Reused<T, I, J> = (CsrArrays<T, I, J>, Vec<T>);

/// Where the arrays the library reads and writes live.
#[derive(Clone, Copy)]
pub(super) enum Memory<'d> {
    /// Host memory, a CPU handle with one thread.
    Host,
    /// A GPU's memory, an AUTO handle.
    Device(&'d Arc<dyn GpuDevice>),
    /// Host memory on a handle of this GPU, which stages the arrays (copies
    /// them to the device and C back).
    Staged(&'d Arc<dyn GpuDevice>),
}

/// How a case calls the C ABI.
#[derive(Clone, Copy, Debug)]
pub(super) struct Call {
    pub op_a: Op,
    pub op_b: Op,
    /// `rusparseSpGEMMAlg_t`.
    pub algorithm: i32,
    pub base: IndexBase,
    /// op(A)'s rows and op(B)'s columns.
    pub dims: (usize, usize),
    /// ALG3's `chunk_fraction` for `estimateMemory` (three phases only).
    pub chunk_fraction: Option<f32>,
    /// α and β in device memory (`rusparseSetPointerMode(DEVICE)`).
    pub device_scalars: bool,
    /// The handle's memory budget (`rusparseSetMemoryBudget`).
    pub budget: Option<usize>,
}

/// Plain values as bytes.
fn bytes_of<T: Copy>(x: &[T]) -> &[u8] {
    // SAFETY: the soak's values and indices are plain old data.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), std::mem::size_of_val(x)) }
}

/// One array handed to the library: host bytes, or a device allocation
/// (freed on drop).
struct Array<'d> {
    host: Vec<u8>,
    device: Option<(&'d Arc<dyn GpuDevice>, u64)>,
    len: usize,
}

impl<'d> Array<'d> {
    fn new(memory: Memory<'d>, data: &[u8]) -> Result<Array<'d>, String> {
        let mut array = Array {
            host: Vec::new(),
            device: None,
            len: data.len(),
        };
        match memory {
            Memory::Host | Memory::Staged(_) => array.host = data.to_vec(),
            Memory::Device(dev) => {
                // A zero-size allocation is refused: keep one byte.
                let ptr = dev
                    .alloc(data.len().max(1), None)
                    .map_err(|e| format!("device allocation: {e}"))?;
                array.device = Some((dev, ptr));
                array.write(data)?;
            }
        }
        Ok(array)
    }

    fn zeroed(memory: Memory<'d>, bytes: usize) -> Result<Array<'d>, String> {
        Array::new(memory, &vec![0u8; bytes])
    }

    fn ptr(&mut self) -> *mut c_void {
        match self.device {
            Some((_, p)) => p as *mut c_void,
            None if self.len == 0 => null_mut(),
            None => self.host.as_mut_ptr().cast(),
        }
    }

    /// Overwrites the array with `data` (of its length).
    fn write(&mut self, data: &[u8]) -> Result<(), String> {
        assert_eq!(data.len(), self.len);
        match self.device {
            // Queued on the default stream, before the library's work on
            // the handle's (the default) stream.
            Some((dev, p)) if !data.is_empty() => {
                // SAFETY: `p` holds `len` bytes.
                unsafe { dev.upload(p, data, null_mut()) }.map_err(|e| format!("upload: {e}"))
            }
            Some(_) => Ok(()),
            None => {
                self.host.copy_from_slice(data);
                Ok(())
            }
        }
    }

    /// The array's contents as `n` values of `T`.
    fn read<T: Copy + Default>(&self, n: usize) -> Result<Vec<T>, String> {
        let mut out = vec![T::default(); n];
        assert!(std::mem::size_of_val(&out[..]) <= self.len.max(1));
        // SAFETY: plain old data viewed as bytes.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(
                out.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(&out[..]),
            )
        };
        match self.device {
            // SAFETY: `p` holds at least `dst.len()` bytes; the default
            // stream, after everything queued on it.
            Some((dev, p)) => {
                unsafe { dev.download(dst, p, null_mut()) }.map_err(|e| format!("download: {e}"))?
            }
            None => dst.copy_from_slice(&self.host[..dst.len()]),
        }
        Ok(out)
    }
}

impl Drop for Array<'_> {
    fn drop(&mut self) {
        if let Some((dev, p)) = self.device {
            // SAFETY: allocated in `new`, freed once, nothing queued on it.
            unsafe { dev.free(p, None) };
        }
    }
}

/// A matrix's three arrays.
struct Operand<'d> {
    arrays: [Array<'d>; 3],
}

impl<'d> Operand<'d> {
    fn new<T: BenchScalar, I: Index, J: Index>(
        memory: Memory<'d>,
        x: &CsrMatrix<T, I, J>,
    ) -> Result<Operand<'d>, String> {
        Ok(Operand {
            arrays: [
                Array::new(memory, bytes_of(x.row_offsets()))?,
                Array::new(memory, bytes_of(x.col_indices()))?,
                Array::new(memory, bytes_of(x.values()))?,
            ],
        })
    }
}

/// The handle and descriptors of one flow, released on drop (before the
/// arrays they point to, which are declared after it by the callers).
struct Objects {
    handle: rusparseHandle_t,
    mats: [rusparseSpMatDescr_t; 3],
    descr: rusparseSpGEMMDescr_t,
}

impl Drop for Objects {
    fn drop(&mut self) {
        // SAFETY: each is NULL (a no-op) or created below and not yet
        // destroyed.
        unsafe {
            rusparseSpGEMM_destroyDescr(self.descr);
            for m in self.mats {
                rusparseDestroySpMat(m);
            }
            rusparseDestroy(self.handle);
        }
    }
}

fn check(what: &str, s: rusparseStatus_t) -> Result<(), String> {
    if s == rusparseStatus_t::RUSPARSE_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: the library returns a valid NUL-terminated string.
    let msg = unsafe { CStr::from_ptr(rusparseGetLastErrorMessage()) };
    Err(format!("{what}: {s:?}: {}", msg.to_string_lossy()))
}

fn op_number(o: Op) -> i32 {
    match o {
        Op::N => 0,
        Op::T => 1,
        Op::C => 2,
    }
}

/// What every phase of a session passes: the handle, the SpGEMM
/// descriptor, A's, B's and C's descriptors, op(A), op(B), the algorithm
/// and the compute type.
struct Ids {
    h: rusparseHandle_t,
    d: rusparseSpGEMMDescr_t,
    mats: [rusparseSpMatDescr_t; 3],
    opa: i32,
    opb: i32,
    alg: i32,
    dt: i32,
}

/// A flow's set-up: the handle (CPU or AUTO, pointer mode), A's and B's
/// descriptors on `memory`, an empty C and the SpGEMM descriptor.
struct Session<'d> {
    memory: Memory<'d>,
    call: Call,
    objects: Objects,
    /// A's and B's arrays (after `objects`: dropped after the descriptors).
    operands: [Operand<'d>; 2],
    /// Buffers handed to the phases, kept until the end of the flow.
    buffers: Vec<Array<'d>>,
    index_types: (i32, i32),
    data_type: i32,
}

impl<'d> Session<'d> {
    fn new<T: BenchScalar, I: Index, J: Index>(
        memory: Memory<'d>,
        call: Call,
        a: &CsrMatrix<T, I, J>,
        b: &CsrMatrix<T, I, J>,
    ) -> Result<Session<'d>, String> {
        let mut s = Session {
            memory,
            call,
            objects: Objects {
                handle: null_mut(),
                mats: [null_mut(); 3],
                descr: null_mut(),
            },
            operands: [Operand::new(memory, a)?, Operand::new(memory, b)?],
            buffers: Vec::new(),
            index_types: (I::INDEX_TYPE.c_number(), J::INDEX_TYPE.c_number()),
            data_type: T::DATA_TYPE.c_number(),
        };
        let (it, jt) = s.index_types;
        let base = call.base.offset() as i32;
        let o = &mut s.objects;
        // SAFETY: every pointer is valid for the sizes stated and outlives
        // the descriptors (`Session` drops them first).
        unsafe {
            match memory {
                Memory::Host => {
                    check("create", rusparseCreateWithBackend(&mut o.handle, 1))?;
                    check("setNumThreads", rusparseSetNumThreads(o.handle, 1))?;
                }
                Memory::Device(_) => check("create", rusparseCreate(&mut o.handle))?,
                Memory::Staged(dev) => {
                    o.handle = rusparse::ffi::handle::handle_on_device(dev.clone())
                        .map_err(|e| format!("a handle on {}: {e}", dev.name()))?;
                }
            }
            if call.device_scalars {
                check("setPointerMode", rusparseSetPointerMode(o.handle, 1))?;
            }
            if let Some(bytes) = call.budget {
                check("setMemoryBudget", rusparseSetMemoryBudget(o.handle, bytes))?;
            }
            for (k, (x, op)) in [
                (a.nrows(), a.ncols(), a.nnz()),
                (b.nrows(), b.ncols(), b.nnz()),
            ]
            .into_iter()
            .zip(s.operands.iter_mut())
            .enumerate()
            {
                let [r, c, v] = &mut op.arrays;
                check(
                    "createCsr",
                    rusparseCreateCsr(
                        &mut o.mats[k],
                        x.0 as i64,
                        x.1 as i64,
                        x.2 as i64,
                        r.ptr(),
                        c.ptr(),
                        v.ptr(),
                        it,
                        jt,
                        base,
                        s.data_type,
                    ),
                )?;
            }
            let (m, n) = call.dims;
            check(
                "createCsr(C)",
                rusparseCreateCsr(
                    &mut o.mats[2],
                    m as i64,
                    n as i64,
                    0,
                    null_mut(),
                    null_mut(),
                    null_mut(),
                    it,
                    jt,
                    base,
                    s.data_type,
                ),
            )?;
            check("createDescr", rusparseSpGEMM_createDescr(&mut o.descr))?;
        }
        Ok(s)
    }

    /// The handle, descriptors and call numbers every phase passes.
    fn ids(&self) -> Ids {
        Ids {
            h: self.objects.handle,
            d: self.objects.descr,
            mats: self.objects.mats,
            opa: op_number(self.call.op_a),
            opb: op_number(self.call.op_b),
            alg: self.call.algorithm,
            dt: self.data_type,
        }
    }

    /// A scalar as the library reads it: host memory, or device memory in
    /// device pointer mode (kept until the flow ends).
    fn scalar<T: BenchScalar>(&mut self, x: &T) -> Result<*const c_void, String> {
        if !self.call.device_scalars {
            return Ok((x as *const T).cast());
        }
        let mut array = Array::new(self.memory, bytes_of(std::slice::from_ref(x)))?;
        let p = array.ptr();
        self.buffers.push(array);
        Ok(p)
    }

    /// A phase asked for its buffer size first (a NULL buffer), then run
    /// with a buffer of that size, kept until the flow ends.
    fn sized(
        &mut self,
        what: &str,
        phase: &dyn Fn(*mut usize, *mut c_void) -> rusparseStatus_t,
    ) -> Result<(), String> {
        let mut size = 0usize;
        check(&format!("{what} (size)"), phase(&mut size, null_mut()))?;
        let mut buffer = Array::zeroed(self.memory, size.max(1))?;
        check(what, phase(&mut size, buffer.ptr()))?;
        self.buffers.push(buffer);
        Ok(())
    }

    /// After the phase that set nnz(C): C's arrays, allocated and handed
    /// to C's descriptor.
    fn c_arrays<T: BenchScalar, I: Index, J: Index>(&mut self) -> Result<[Array<'d>; 3], String> {
        let (m, n) = self.call.dims;
        let (mut r, mut c, mut z) = (0i64, 0i64, 0i64);
        // SAFETY: a live descriptor and three writable slots.
        check("getSize", unsafe {
            rusparseSpMatGetSize(self.objects.mats[2], &mut r, &mut c, &mut z)
        })?;
        if (r, c) != (m as i64, n as i64) || z < 0 {
            return Err(format!(
                "C's size after the symbolic phase: {r} x {c}, nnz {z}"
            ));
        }
        let z = z as usize;
        let mut arrays = [
            Array::zeroed(self.memory, (m + 1) * std::mem::size_of::<I>())?,
            Array::zeroed(self.memory, z * std::mem::size_of::<J>())?,
            Array::zeroed(self.memory, z * std::mem::size_of::<T>())?,
        ];
        let [o, k, v] = &mut arrays;
        // SAFETY: arrays of the sizes C needs, alive until after the
        // descriptor is destroyed (the caller drops the session first).
        check("csrSetPointers", unsafe {
            rusparseCsrSetPointers(self.objects.mats[2], o.ptr(), k.ptr(), v.ptr())
        })?;
        Ok(arrays)
    }

    /// Checks that the product ran where its arrays are (a GPU's back end
    /// for device arrays: an AUTO handle that missed them would run on the
    /// CPU and still give the right C).
    fn check_backend(&self) -> Result<(), String> {
        let want = match self.memory {
            Memory::Host => BackendKind::Cpu,
            Memory::Device(dev) | Memory::Staged(dev) => dev.backend(),
        };
        let want = match want {
            BackendKind::Auto => 0,
            BackendKind::Cpu => 1,
            BackendKind::Cuda => 2,
            BackendKind::Hip => 3,
        };
        let mut backend = -1;
        // SAFETY: a live descriptor after work estimation; one slot.
        check("getPlanInfo", unsafe {
            rusparseSpGEMM_getPlanInfo(
                self.objects.descr,
                &mut backend,
                null_mut(),
                null_mut(),
                null_mut(),
            )
        })?;
        if backend != want {
            return Err(format!(
                "the product ran on back end {backend}, not {want} where its arrays are"
            ));
        }
        Ok(())
    }

    /// Writes new values of A and B into their arrays (same patterns).
    fn set_values<T: BenchScalar>(&mut self, a: &[T], b: &[T]) -> Result<(), String> {
        self.operands[0].arrays[2].write(bytes_of(a))?;
        self.operands[1].arrays[2].write(bytes_of(b))
    }
}

fn read_c<T: BenchScalar, I: Index, J: Index>(
    c: &[Array<'_>; 3],
    m: usize,
) -> Result<CsrArrays<T, I, J>, String> {
    let offsets: Vec<I> = c[0].read(m + 1)?;
    let nnz = c[1].len / std::mem::size_of::<J>();
    Ok((offsets, c[1].read(nnz)?, c[2].read(nnz)?))
}

/// C = α·op(A)·op(B) by the three phases of cuSPARSE's SpGEMM sample:
/// work estimation and compute, each asked for its buffer size first
/// (ALG3 with `estimateMemory` between them), C's arrays allocated at
/// the size compute published, then copy.
pub(super) fn three_phases<T: BenchScalar, I: Index, J: Index>(
    memory: Memory<'_>,
    call: Call,
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    alpha: T,
) -> Result<CsrArrays<T, I, J>, String> {
    let mut s = Session::new(memory, call, a, b)?;
    let zero = T::zero();
    let (pa, pb) = (s.scalar(&alpha)?, s.scalar(&zero)?);
    let Ids {
        h,
        d,
        mats: [ma, mb, mc],
        opa,
        opb,
        alg,
        dt,
    } = s.ids();
    // SAFETY (every call): live objects, scalars and buffers of the sizes
    // the library asked for.
    s.sized("workEstimation", &|size, buf| unsafe {
        rusparseSpGEMM_workEstimation(h, opa, opb, pa, ma, mb, pb, mc, dt, alg, d, size, buf)
    })?;
    if let Some(fraction) = call.chunk_fraction {
        let size2 = std::cell::Cell::new(0usize);
        s.sized("estimateMemory", &|size3, buf| unsafe {
            rusparseSpGEMM_estimateMemory(
                h,
                opa,
                opb,
                pa,
                ma,
                mb,
                pb,
                mc,
                dt,
                alg,
                d,
                fraction,
                size3,
                buf,
                size2.as_ptr(),
            )
        })?;
    }
    s.sized("compute", &|size, buf| unsafe {
        rusparseSpGEMM_compute(h, opa, opb, pa, ma, mb, pb, mc, dt, alg, d, size, buf)
    })?;
    s.check_backend()?;
    let c = s.c_arrays::<T, I, J>()?;
    check("copy", unsafe {
        rusparseSpGEMM_copy(h, opa, opb, pa, ma, mb, pb, mc, dt, alg, d)
    })?;
    let out = read_c(&c, call.dims.0);
    drop(s);
    out
}

/// The reuse flow: `reuse_workEstimation`, `reuse_nnz` and `reuse_copy`
/// (each asked for its buffer sizes first) build C's pattern; then
/// `reuse_compute` with C = α·op(A)·op(B) (β = 0), and, after A's and B's
/// values were replaced by `a2` and `b2`, again with β:
/// C = α·op(A2)·op(B2) + β·C. Returns C after the first compute and C's
/// values after the second.
#[allow(clippy::too_many_arguments)]
pub(super) fn reuse<T: BenchScalar, I: Index, J: Index>(
    memory: Memory<'_>,
    call: Call,
    a: &CsrMatrix<T, I, J>,
    b: &CsrMatrix<T, I, J>,
    a2: &[T],
    b2: &[T],
    alpha: T,
    beta: T,
) -> Result<Reused<T, I, J>, String> {
    let mut s = Session::new(memory, call, a, b)?;
    let zero = T::zero();
    let (pa, p0, pb) = (s.scalar(&alpha)?, s.scalar(&zero)?, s.scalar(&beta)?);
    let Ids {
        h,
        d,
        mats: [ma, mb, mc],
        opa,
        opb,
        alg,
        dt,
    } = s.ids();
    // SAFETY (every call): live objects, scalars and buffers of the sizes
    // the library asked for.
    s.sized("reuse_workEstimation", &|size, buf| unsafe {
        rusparseSpGEMMreuse_workEstimation(h, opa, opb, ma, mb, mc, alg, d, size, buf)
    })?;
    // reuse_nnz takes three buffers; ask their sizes, then run with all.
    let mut sizes = [0usize; 3];
    let [s2, s3, s4] = &mut sizes;
    check("reuse_nnz (sizes)", unsafe {
        rusparseSpGEMMreuse_nnz(
            h,
            opa,
            opb,
            ma,
            mb,
            mc,
            alg,
            d,
            s2,
            null_mut(),
            s3,
            null_mut(),
            s4,
            null_mut(),
        )
    })?;
    for size in sizes {
        s.buffers.push(Array::zeroed(memory, size.max(1))?);
    }
    let n = s.buffers.len();
    let [b2_, b3, b4] = &mut s.buffers[n - 3..] else {
        unreachable!("three buffers were just pushed")
    };
    let (b2_, b3, b4) = (b2_.ptr(), b3.ptr(), b4.ptr());
    let [s2, s3, s4] = &mut sizes;
    check("reuse_nnz", unsafe {
        rusparseSpGEMMreuse_nnz(h, opa, opb, ma, mb, mc, alg, d, s2, b2_, s3, b3, s4, b4)
    })?;
    s.check_backend()?;
    let c = s.c_arrays::<T, I, J>()?;
    s.sized("reuse_copy", &|size, buf| unsafe {
        rusparseSpGEMMreuse_copy(h, opa, opb, ma, mb, mc, alg, d, size, buf)
    })?;
    check("reuse_compute", unsafe {
        rusparseSpGEMMreuse_compute(h, opa, opb, pa, ma, mb, p0, mc, dt, alg, d)
    })?;
    let first = read_c(&c, call.dims.0)?;
    s.set_values(a2, b2)?;
    check("reuse_compute (new values, beta)", unsafe {
        rusparseSpGEMMreuse_compute(h, opa, opb, pa, ma, mb, pb, mc, dt, alg, d)
    })?;
    let second: Vec<T> = c[2].read(first.2.len())?;
    drop(s);
    Ok((first, second))
}
