//! A byte-driven program that calls rusparse's C ABI (issue 10, "fuzzing
//! the C ABI"). Shared by the libFuzzer target (`fuzz/fuzz_targets/c_abi.rs`,
//! run with `cargo fuzz`) and by `tests/fuzz_c_abi.rs`, which replays the
//! shipped corpus and the regression inputs and runs random programs under
//! proptest on every `cargo test`.
//!
//! The input is read as a list of calls: a byte picks the call, the bytes
//! after it its arguments: handles (the live one or NULL), up to four
//! matrix descriptors with arbitrary sizes, index and value types (valid or
//! not), bases, row offsets, column indices (in range or not, unsorted,
//! duplicated), NULL or misaligned arrays, operations, algorithms, α and β,
//! buffer sizes, and any call order (phases skipped, repeated, mixed
//! between the compute and the reuse flows, descriptors destroyed and
//! made again, values changed between phases).
//!
//! The harness keeps the C API's contract where the library cannot check
//! it (a pointer is NULL or points to as many elements as the descriptor
//! states; a destroyed object is never passed again) and asserts:
//!
//! - every status is a `rusparseStatus_t`, and every failure leaves a
//!   non-empty message for `rusparseGetLastErrorMessage`;
//! - a phase never succeeds on A or B that break the CSR rules (the
//!   harness checks them itself: offsets from the base, non-decreasing, up
//!   to nnz, columns in range);
//! - after a successful `compute` / `reuse_nnz`, nnz(C) is the size of the
//!   product's pattern; after a successful `copy` / `reuse_copy` /
//!   `reuse_compute`, C's offsets, columns and values are those of an
//!   integer reference computed here from A's and B's arrays, independent
//!   of the library (values are small integers, so every type is exact).
//!
//! Anything else (a crash, a hang, a leak, an out-of-bounds access under
//! AddressSanitizer) is found by the fuzzer itself.

use rusparse::ffi::errors::{
    rusparseGetErrorName, rusparseGetErrorString, rusparseGetLastErrorMessage,
};
use rusparse::ffi::handle::*;
use rusparse::ffi::matrix::*;
use rusparse::ffi::spgemm::*;
use rusparse::ffi::spgemm_ext::*;
use rusparse::ffi::types::*;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

/// What one run did, for the replay test's coverage checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// C ABI calls made.
    pub calls: u64,
    /// Calls that returned SUCCESS.
    pub successes: u64,
    /// Products whose nnz(C) was checked after `compute` / `reuse_nnz`.
    pub sizes_checked: u64,
    /// Products whose C was compared with the reference after a copy.
    pub products_checked: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.calls += o.calls;
        self.successes += o.successes;
        self.sizes_checked += o.sizes_checked;
        self.products_checked += o.products_checked;
    }
}

/// Reads the program; past the end every byte reads as 0.
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n
    }
    /// `xs[0]` for the byte 0, so that a zero byte is the usual choice.
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    /// True for about one byte in sixteen (bytes 240..=255).
    fn rare(&mut self) -> bool {
        self.byte() >= 240
    }
}

/// Memory of a device that the host can read and write directly, for
/// running the programs on arrays in that device's memory ([`run_on`]):
/// the emulated GPU of `kernels/host-tests`, whose allocations are host
/// memory, so that AUTO handles take the GPU path.
pub trait HostVisibleMemory {
    /// `bytes` (at least 1) of zero-filled memory, aligned to 16 bytes.
    fn alloc_zeroed(&self, bytes: usize) -> *mut u8;
    /// Frees an allocation of `alloc_zeroed`.
    ///
    /// # Safety
    /// `ptr` came from `alloc_zeroed` and is freed once.
    unsafe fn free(&self, ptr: *mut u8);
}

std::thread_local! {
    /// Where this thread's runs take their arrays (None: the host heap).
    static MEMORY: std::cell::RefCell<Option<std::rc::Rc<dyn HostVisibleMemory>>> =
        const { std::cell::RefCell::new(None) };
}

/// Memory handed to the library: 16-byte aligned, exactly `bytes` long (so
/// AddressSanitizer sees any access past the end), zero-filled; from the
/// host heap, or from the device memory of [`run_on`]. Freed only when the
/// run ends, because descriptors keep pointers to it.
struct Block {
    ptr: *mut u8,
    layout: Layout,
    device: Option<std::rc::Rc<dyn HostVisibleMemory>>,
}

impl Block {
    fn new(bytes: usize) -> Block {
        let layout = Layout::from_size_align(bytes.max(1), 16).expect("layout");
        let device = MEMORY.with(|m| m.borrow().clone());
        let ptr = match &device {
            Some(d) => d.alloc_zeroed(layout.size()),
            // SAFETY: the layout has a non-zero size.
            None => unsafe { alloc_zeroed(layout) },
        };
        assert!(!ptr.is_null(), "harness allocation of {bytes} bytes failed");
        Block {
            ptr,
            layout,
            device,
        }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        match &self.device {
            // SAFETY: allocated in `new` by this device.
            Some(d) => unsafe { d.free(self.ptr) },
            // SAFETY: allocated in `new` with this layout.
            None => unsafe { dealloc(self.ptr, self.layout) },
        }
    }
}

/// A value type, by its C number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    F32,
    F64,
    C32,
    C64,
}

impl Ty {
    fn from_c(n: i32) -> Option<Ty> {
        match n {
            0 => Some(Ty::F32),
            1 => Some(Ty::F64),
            4 => Some(Ty::C32),
            5 => Some(Ty::C64),
            _ => None,
        }
    }
    fn c(self) -> i32 {
        match self {
            Ty::F32 => 0,
            Ty::F64 => 1,
            Ty::C32 => 4,
            Ty::C64 => 5,
        }
    }
    fn size(self) -> usize {
        match self {
            Ty::F32 => 4,
            Ty::F64 | Ty::C32 => 8,
            Ty::C64 => 16,
        }
    }
    fn complex(self) -> bool {
        matches!(self, Ty::C32 | Ty::C64)
    }
}

/// An exact small complex integer (the real types use `im == 0`).
type Val = (i64, i64);

fn mul(x: Val, y: Val) -> Val {
    (x.0 * y.0 - x.1 * y.1, x.0 * y.1 + x.1 * y.0)
}

fn add(x: Val, y: Val) -> Val {
    (x.0 + y.0, x.1 + y.1)
}

/// Reads element `i` of an index array of width 4 or 8 bytes.
///
/// # Safety
/// `p` points to at least `i + 1` elements of that width.
unsafe fn read_index(p: *const u8, wide: bool, i: usize) -> i64 {
    if wide {
        p.cast::<i64>().add(i).read()
    } else {
        p.cast::<i32>().add(i).read() as i64
    }
}

/// # Safety
/// As [`read_index`], writable.
unsafe fn write_index(p: *mut u8, wide: bool, i: usize, v: i64) {
    if wide {
        p.cast::<i64>().add(i).write(v)
    } else {
        p.cast::<i32>().add(i).write(v as i32)
    }
}

/// The value at `i` as exact integers, or None when it is not one (the
/// library wrote something no integer product gives).
///
/// # Safety
/// `p` points to at least `i + 1` values of type `ty`.
unsafe fn read_value(p: *const u8, ty: Ty, i: usize) -> Option<Val> {
    let (re, im) = match ty {
        Ty::F32 => (p.cast::<f32>().add(i).read() as f64, 0.0),
        Ty::F64 => (p.cast::<f64>().add(i).read(), 0.0),
        Ty::C32 => {
            let q = p.cast::<f32>().add(2 * i);
            (q.read() as f64, q.add(1).read() as f64)
        }
        Ty::C64 => {
            let q = p.cast::<f64>().add(2 * i);
            (q.read(), q.add(1).read())
        }
    };
    let exact = |x: f64| (x.fract() == 0.0 && x.abs() < 1e15).then_some(x as i64);
    Some((exact(re)?, exact(im)?))
}

/// # Safety
/// As [`read_value`], writable.
unsafe fn write_value(p: *mut u8, ty: Ty, i: usize, v: Val) {
    match ty {
        Ty::F32 => p.cast::<f32>().add(i).write(v.0 as f32),
        Ty::F64 => p.cast::<f64>().add(i).write(v.0 as f64),
        Ty::C32 => {
            let q = p.cast::<f32>().add(2 * i);
            q.write(v.0 as f32);
            q.add(1).write(v.1 as f32);
        }
        Ty::C64 => {
            let q = p.cast::<f64>().add(2 * i);
            q.write(v.0 as f64);
            q.add(1).write(v.1 as f64);
        }
    }
}

/// The `i`-th of a run of small values drawn from one program byte.
fn small_value(fill: u8, i: usize, ty: Ty) -> Val {
    let x = (fill as usize).wrapping_mul(31).wrapping_add(i * 17) as u64;
    let im = if ty.complex() {
        (x / 7 % 7) as i64 - 3
    } else {
        0
    };
    ((x % 7) as i64 - 3, im)
}

/// One array the harness gave a descriptor: where it is and how many
/// elements of the descriptor's type fit in it.
#[derive(Clone, Copy, Debug)]
struct Array {
    ptr: *mut u8,
    capacity: usize,
}

impl Array {
    const NULL: Array = Array {
        ptr: null_mut(),
        capacity: 0,
    };
    fn is_null(&self) -> bool {
        self.ptr.is_null()
    }
    /// Usable for `n` elements: NULL (the library must refuse it when n > 0)
    /// or at least `n` elements.
    fn holds(&self, n: i64) -> bool {
        self.ptr.is_null() || (n >= 0 && self.capacity as u64 >= n as u64)
    }
}

/// What the harness knows of a live matrix descriptor: what it declared,
/// with the C numbers as given (valid, or the descriptor would not exist).
#[derive(Debug)]
struct Mat {
    descr: rusparseSpMatDescr_t,
    constant: bool,
    rows: i64,
    cols: i64,
    nnz: i64,
    off64: bool,
    col64: bool,
    base: i64,
    ty: Ty,
    offsets: Array,
    col_ind: Array,
    values: Array,
}

impl Mat {
    /// The arrays hold what the descriptor states, so the library may read
    /// (and, for C, write) them: the contract a caller keeps.
    fn arrays_hold_sizes(&self) -> bool {
        self.offsets.holds(self.rows.saturating_add(1))
            && self.col_ind.holds(self.nnz)
            && self.values.holds(self.nnz)
    }

    /// The matrix as rows of `(column, value)` (zero-based), when it keeps
    /// the CSR rules; None when the library must refuse it. A declared nnz
    /// above `rowOffsets[rows] - base` is spare room (accepted, as
    /// cuSPARSE does). NULL values are accepted by the phases that read
    /// none (`values` false), with zeros in their place.
    fn rows_if_valid(&self, values: bool) -> Option<Vec<Vec<(usize, Val)>>> {
        let empty = |a: &Array| self.nnz > 0 && a.is_null();
        if self.offsets.is_null() || empty(&self.col_ind) || (values && empty(&self.values)) {
            return None;
        }
        let (rows, nnz) = (usize::try_from(self.rows).ok()?, self.nnz);
        let mut out = Vec::with_capacity(rows);
        // SAFETY: `arrays_hold_sizes` holds for every matrix passed here.
        unsafe {
            let at = |i: usize| read_index(self.offsets.ptr, self.off64, i) - self.base;
            if at(0) != 0 || at(rows) > nnz {
                return None;
            }
            for i in 0..rows {
                let (lo, hi) = (at(i), at(i + 1));
                if lo > hi || hi > nnz {
                    return None;
                }
                let mut row = Vec::new();
                for k in lo as usize..hi as usize {
                    let c = read_index(self.col_ind.ptr, self.col64, k) - self.base;
                    if c < 0 || c >= self.cols {
                        return None;
                    }
                    let v = if self.values.is_null() {
                        (0, 0)
                    } else {
                        read_value(self.values.ptr, self.ty, k)?
                    };
                    row.push((c as usize, v));
                }
                out.push(row);
            }
        }
        Some(out)
    }
}

/// op(x) as rows of `(column, value)`.
fn op_rows(x: &[Vec<(usize, Val)>], cols: usize, op: i32, complex: bool) -> Vec<Vec<(usize, Val)>> {
    if op == 0 {
        return x.to_vec();
    }
    let mut t = vec![Vec::new(); cols];
    for (i, row) in x.iter().enumerate() {
        for &(c, v) in row {
            let v = if op == 2 && complex { (v.0, -v.1) } else { v };
            t[c].push((i, v));
        }
    }
    t
}

/// The pattern of op(A)·op(B) (structural: cancelling products stay) and
/// its unscaled values.
fn product(a: &[Vec<(usize, Val)>], b: &[Vec<(usize, Val)>]) -> Vec<BTreeMap<usize, Val>> {
    a.iter()
        .map(|row| {
            let mut acc = BTreeMap::new();
            for &(k, av) in row {
                for &(j, bv) in &b[k] {
                    let e = acc.entry(j).or_insert((0, 0));
                    *e = add(*e, mul(av, bv));
                }
            }
            acc
        })
        .collect()
}

const STATUS_SUCCESS: i32 = 0;

/// `RUSPARSE_FUZZ_TRACE=1` prints every call and its status (to read what
/// an input does).
fn tracing() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("RUSPARSE_FUZZ_TRACE").is_some())
}
const SLOTS: usize = 4;

/// A phase's arguments, decoded from the program.
#[derive(Clone, Copy, Debug)]
struct Phase {
    null_handle: bool,
    op_a: i32,
    op_b: i32,
    alpha: Option<Val>,
    beta: Option<Val>,
    a: usize,
    b: usize,
    c: usize,
    compute_type: Option<i32>,
    alg: i32,
    null_descr: bool,
    /// 0: size query then the call with that size; 1: size query only;
    /// 2: a buffer one byte smaller than asked; 3: NULL size pointer.
    buffer_mode: u8,
}

/// Which phase to call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PhaseCall {
    WorkEstimation,
    Compute,
    Copy,
    ReuseWorkEstimation,
    ReuseNnz,
    ReuseCopy,
    ReuseCompute,
    PredictNnz,
    EstimateMemory,
}

struct Harness {
    handle: rusparseHandle_t,
    mats: [Option<Mat>; SLOTS],
    descr: rusparseSpGEMMDescr_t,
    blocks: Vec<Block>,
    stats: Stats,
    /// Values of C's array before the last numeric phase, to check β·C.
    scratch: Vec<Val>,
}

/// Calls a C function and checks its status and message.
macro_rules! call {
    ($h:expr, $e:expr) => {{
        // SAFETY: the harness passes NULL or live objects, and arrays that
        // hold what their descriptors state (checked before each call).
        let s = unsafe { $e } as i32;
        $h.status(s, stringify!($e))
    }};
}

impl Harness {
    fn new() -> Harness {
        Harness {
            handle: null_mut(),
            mats: Default::default(),
            descr: null_mut(),
            blocks: Vec::new(),
            stats: Stats::default(),
            scratch: Vec::new(),
        }
    }

    /// Checks a status; returns whether it is SUCCESS.
    fn status(&mut self, s: i32, what: &str) -> bool {
        self.stats.calls += 1;
        if tracing() {
            eprintln!(
                "{s:2} <- {}",
                what.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
        assert!(
            (0..=11).contains(&s),
            "{what}: status {s} is not a rusparseStatus_t"
        );
        if s == STATUS_SUCCESS {
            self.stats.successes += 1;
            return true;
        }
        // SAFETY: the library returns a NUL-terminated string it owns.
        let msg = unsafe { CStr::from_ptr(rusparseGetLastErrorMessage()) };
        let msg = msg.to_str().expect("the last error message is UTF-8");
        assert!(!msg.is_empty(), "{what}: status {s} without a message");
        if tracing() {
            eprintln!("   {msg}");
        }
        false
    }

    fn block(&mut self, bytes: usize) -> *mut u8 {
        let b = Block::new(bytes);
        let p = b.ptr;
        self.blocks.push(b);
        p
    }

    fn descr_of(&self, slot: usize) -> rusparseSpMatDescr_t {
        self.mats
            .get(slot)
            .and_then(|m| m.as_ref())
            .map_or(null_mut(), |m| m.descr)
    }

    fn destroy_mat(&mut self, slot: usize) {
        if let Some(m) = self.mats[slot].take() {
            call!(self, rusparseDestroySpMat(m.descr));
        }
    }

    /// A size: mostly small, sometimes negative or far too large to allocate.
    fn dim(p: &mut Bytes<'_>) -> i64 {
        let b = p.byte();
        match b {
            0..=239 => (b % 10) as i64,
            240..=243 => 1000,
            244 | 245 => -1,
            246 | 247 => 1 << 40,
            248 => i64::MAX,
            249 => 1 << 31,
            250 => (1 << 31) - 1,
            _ => 17,
        }
    }

    /// Creates a descriptor in `slot` (an operand with entries, or an
    /// output with none), with arrays, types and sizes from the program.
    fn create(&mut self, p: &mut Bytes<'_>) {
        let slot = p.below(SLOTS);
        self.destroy_mat(slot);
        let output = p.below(4) == 3;
        let constant = p.rare();
        let (rows, cols) = (Self::dim(p), Self::dim(p));
        let off_c = if p.rare() {
            p.pick(&[1, 0, 7, -1])
        } else {
            p.pick(&[2, 3])
        };
        let col_c = if p.rare() {
            p.pick(&[1, 0, 9])
        } else {
            p.pick(&[2, 3])
        };
        let base = if p.rare() {
            p.pick(&[2, -1])
        } else {
            p.pick(&[0, 1])
        };
        let ty_c = if p.rare() {
            p.pick(&[2, 14, 3, -1])
        } else {
            p.pick(&[1, 0, 4, 5])
        };
        let (off64, col64) = (off_c == 3, col_c == 3);
        let ty = Ty::from_c(ty_c).unwrap_or(Ty::F64);
        let (iw, jw) = (if off64 { 8 } else { 4 }, if col64 { 8 } else { 4 });
        let b = base.clamp(0, 1);
        // Arrays only for sizes a caller could hold; larger ones stay NULL.
        let small_rows = (0..=4096).contains(&rows);
        let mut offsets = Array::NULL;
        let (mut col_ind, mut values) = (Array::NULL, Array::NULL);
        let mut nnz = 0i64;
        if small_rows && !(output && p.below(2) == 1) {
            let n = rows as usize;
            offsets = Array {
                ptr: self.block((n + 1) * iw),
                capacity: n + 1,
            };
            let mut entries: Vec<(i64, Val)> = Vec::new();
            let mut ends = Vec::with_capacity(n);
            if !output {
                let width = cols.clamp(0, 64);
                for _ in 0..n {
                    let len = if width == 0 { 0 } else { p.below(5) };
                    for _ in 0..len {
                        let c = match p.byte() {
                            250 => width, // one past the last column
                            251 => -1,
                            x => x as i64 % width,
                        };
                        let v = p.byte();
                        let im = if ty.complex() {
                            (v / 7 % 7) as i64 - 3
                        } else {
                            0
                        };
                        entries.push((c + b, ((v % 7) as i64 - 3, im)));
                    }
                    ends.push(entries.len() as i64);
                }
            } else {
                ends.resize(n, 0);
            }
            nnz = entries.len() as i64;
            let cap = entries.len() + 1;
            col_ind = Array {
                ptr: self.block(cap * jw),
                capacity: cap,
            };
            values = Array {
                ptr: self.block(cap * ty.size()),
                capacity: cap,
            };
            // SAFETY: the arrays were just allocated for these sizes.
            unsafe {
                write_index(offsets.ptr, off64, 0, b);
                for (i, e) in ends.iter().enumerate() {
                    write_index(offsets.ptr, off64, i + 1, e + b);
                }
                for (k, &(c, v)) in entries.iter().enumerate() {
                    write_index(col_ind.ptr, col64, k, c);
                    write_value(values.ptr, ty, k, v);
                }
                // Mistakes callers make: a corrupt offset, a wrong nnz.
                if p.rare() {
                    let i = p.below(n + 1);
                    let v = p.pick(&[-1, 0, 1, 5, 1000, i64::from(i32::MAX)]);
                    write_index(offsets.ptr, off64, i, v);
                }
            }
            if p.rare() {
                nnz = p.pick(&[nnz + 1, nnz - 1, 0]).max(0);
            }
        } else if p.rare() {
            nnz = p.pick(&[-1, 5, 1 << 40]);
        }
        if output && p.below(2) == 1 {
            // C as cuSPARSE's sample makes it: arrays set after compute.
            (col_ind, values) = (Array::NULL, Array::NULL);
        }
        // NULL arrays and misaligned pointers.
        let flags = p.byte();
        if flags >= 240 {
            for (bit, a) in [&mut offsets, &mut col_ind, &mut values]
                .into_iter()
                .enumerate()
            {
                if flags & (1 << bit) != 0 {
                    *a = Array::NULL;
                } else if flags & (8 << bit) != 0 && !a.is_null() {
                    // Misaligned: one byte in (the capacity shrinks to what fits).
                    a.ptr = a.ptr.wrapping_add(1);
                    a.capacity = a.capacity.saturating_sub(1);
                }
            }
        }
        let mut d: rusparseSpMatDescr_t = null_mut();
        let out: *mut rusparseSpMatDescr_t = if p.byte() == 255 { null_mut() } else { &mut d };
        let ok = if constant {
            call!(
                self,
                rusparseCreateConstCsr(
                    out.cast(),
                    rows,
                    cols,
                    nnz,
                    offsets.ptr.cast(),
                    col_ind.ptr.cast(),
                    values.ptr.cast(),
                    off_c,
                    col_c,
                    base as i32,
                    ty_c
                )
            )
        } else {
            call!(
                self,
                rusparseCreateCsr(
                    out,
                    rows,
                    cols,
                    nnz,
                    offsets.ptr.cast(),
                    col_ind.ptr.cast(),
                    values.ptr.cast(),
                    off_c,
                    col_c,
                    base as i32,
                    ty_c
                )
            )
        };
        if ok {
            assert!(
                !out.is_null(),
                "CreateCsr succeeded with a NULL descriptor slot"
            );
            assert!(!d.is_null(), "CreateCsr succeeded without a descriptor");
            assert!(Ty::from_c(ty_c).is_some() && (0..=1).contains(&base));
            assert!(rows >= 0 && cols >= 0 && nnz >= 0);
            self.mats[slot] = Some(Mat {
                descr: d,
                constant,
                rows,
                cols,
                nnz,
                off64,
                col64,
                base,
                ty,
                offsets,
                col_ind,
                values,
            });
        }
    }

    /// Queries of a descriptor, checked against what it was created with.
    fn query(&mut self, p: &mut Bytes<'_>) {
        let slot = p.below(SLOTS + 1);
        let d = self.descr_of(slot);
        let null_out = p.rare();
        let (mut r, mut c, mut z) = (-7i64, -7i64, -7i64);
        match p.below(4) {
            0 => {
                let rp: *mut i64 = if null_out { null_mut() } else { &mut r };
                if call!(self, rusparseSpMatGetSize(d, rp, &mut c, &mut z)) {
                    let m = self
                        .mats
                        .get(slot)
                        .and_then(Option::as_ref)
                        .expect("GetSize on NULL succeeded");
                    assert_eq!((r, c, z), (m.rows, m.cols, m.nnz), "GetSize");
                }
            }
            1 => {
                let (mut o, mut k, mut v) = (null_mut(), null_mut(), null_mut());
                let (mut it, mut jt, mut bs, mut dt) = (-1, -1, -1, -1);
                let op: *mut *mut c_void = if null_out { null_mut() } else { &mut o };
                if call!(
                    self,
                    rusparseCsrGet(
                        d, &mut r, &mut c, &mut z, op, &mut k, &mut v, &mut it, &mut jt, &mut bs,
                        &mut dt
                    )
                ) {
                    let m = self
                        .mats
                        .get(slot)
                        .and_then(Option::as_ref)
                        .expect("CsrGet on NULL succeeded");
                    assert_eq!((r, c, z), (m.rows, m.cols, m.nnz), "CsrGet sizes");
                    assert_eq!(o.cast::<u8>(), m.offsets.ptr, "CsrGet offsets");
                    assert_eq!(k.cast::<u8>(), m.col_ind.ptr, "CsrGet columns");
                    assert_eq!(v.cast::<u8>(), m.values.ptr, "CsrGet values");
                    assert_eq!((it == 3, jt == 3), (m.off64, m.col64), "CsrGet types");
                    assert_eq!((bs as i64, dt), (m.base, m.ty.c()), "CsrGet base, type");
                }
            }
            2 => {
                let mut v = null_mut();
                let vp: *mut *mut c_void = if null_out { null_mut() } else { &mut v };
                if call!(self, rusparseSpMatGetValues(d, vp)) {
                    let m = self
                        .mats
                        .get(slot)
                        .and_then(Option::as_ref)
                        .expect("GetValues on NULL succeeded");
                    assert_eq!(v.cast::<u8>(), m.values.ptr, "GetValues");
                }
            }
            _ => {
                let mut bs = -1;
                let bp: *mut i32 = if null_out { null_mut() } else { &mut bs };
                if call!(self, rusparseSpMatGetIndexBase(d, bp)) {
                    let m = self
                        .mats
                        .get(slot)
                        .and_then(Option::as_ref)
                        .expect("GetIndexBase on NULL succeeded");
                    assert_eq!(bs as i64, m.base, "GetIndexBase");
                }
            }
        }
    }

    /// New arrays for a descriptor: C's arrays at the size compute
    /// published (the usual step before copy), or new values for an
    /// operand (new values of A for the reuse path), or NULLs.
    fn set_pointers(&mut self, p: &mut Bytes<'_>) {
        let slot = p.below(SLOTS);
        let mode = p.below(4);
        let Some(m) = self.mats[slot].as_ref() else {
            call!(
                self,
                rusparseCsrSetPointers(null_mut(), null_mut(), null_mut(), null_mut())
            );
            return;
        };
        let (descr, rows, nnz, ty) = (m.descr, m.rows, m.nnz, m.ty);
        let (iw, jw) = (if m.off64 { 8 } else { 4 }, if m.col64 { 8 } else { 4 });
        if rows > 4096 || nnz > 1 << 20 {
            return;
        }
        let (rows, nnz) = (rows as usize, nnz as usize);
        match mode {
            // C's three arrays, values filled for β.
            0 | 1 => {
                let o = Array {
                    ptr: self.block((rows + 1) * iw),
                    capacity: rows + 1,
                };
                let k = Array {
                    ptr: self.block(nnz * jw),
                    capacity: nnz,
                };
                let v = Array {
                    ptr: self.block(nnz * ty.size()),
                    capacity: nnz,
                };
                let fill = p.byte() as usize;
                for i in 0..nnz {
                    let x = ((fill + 3 * i) % 5) as i64 - 2;
                    // SAFETY: allocated above for nnz values.
                    unsafe { write_value(v.ptr, ty, i, (x, 0)) };
                }
                let null_values = mode == 1 && p.rare();
                let vp = if null_values { null_mut() } else { v.ptr };
                if call!(
                    self,
                    rusparseCsrSetPointers(descr, o.ptr.cast(), k.ptr.cast(), vp.cast())
                ) {
                    let m = self.mats[slot].as_mut().expect("live");
                    m.offsets = o;
                    m.col_ind = k;
                    m.values = if null_values { Array::NULL } else { v };
                }
            }
            // New values of an operand.
            2 => {
                let v = Array {
                    ptr: self.block(nnz * ty.size()),
                    capacity: nnz,
                };
                let fill = p.byte();
                for i in 0..nnz {
                    // SAFETY: allocated above for nnz values.
                    unsafe { write_value(v.ptr, ty, i, small_value(fill, i, ty)) };
                }
                if call!(self, rusparseSpMatSetValues(descr, v.ptr.cast())) {
                    self.mats[slot].as_mut().expect("live").values = v;
                }
            }
            // NULL values: a structure-only matrix (cuSPARSE takes it too);
            // the phases that read values must then refuse.
            _ => {
                if call!(self, rusparseSpMatSetValues(descr, null_mut())) {
                    self.mats[slot].as_mut().expect("live").values = Array::NULL;
                }
            }
        }
    }

    /// Changes an operand's values in place between phases.
    fn revalue(&mut self, p: &mut Bytes<'_>) {
        let slot = p.below(SLOTS);
        let Some(m) = self.mats[slot].as_ref() else {
            return;
        };
        if m.values.is_null() || m.constant {
            return;
        }
        let n = m.values.capacity.min(m.nnz.max(0) as usize);
        let (ptr, ty) = (m.values.ptr, m.ty);
        let fill = p.byte();
        for i in 0..n {
            // SAFETY: within the array's capacity.
            unsafe { write_value(ptr, ty, i, small_value(fill, i, ty)) };
        }
    }

    fn handle_call(&mut self, p: &mut Bytes<'_>) {
        let h = if p.rare() { null_mut() } else { self.handle };
        match p.below(8) {
            0 => {
                let n = p.pick(&[1, 2, 0, 3, -1, 5000, 4, i32::MIN]);
                call!(self, rusparseSetNumThreads(h, n));
            }
            1 => {
                let mut n = -1;
                if call!(self, rusparseGetNumThreads(h, &mut n)) {
                    assert!(n >= 1, "GetNumThreads gave {n}");
                }
            }
            2 => {
                let mode = p.pick(&[0, 1, 7, -1]);
                call!(self, rusparseSetPointerMode(h, mode));
            }
            3 => {
                let mut mode = -1;
                if call!(self, rusparseGetPointerMode(h, &mut mode)) {
                    assert!(mode == 0 || mode == 1, "GetPointerMode gave {mode}");
                }
            }
            4 => {
                let mut v = -1;
                let vp: *mut i32 = if p.rare() { null_mut() } else { &mut v };
                if call!(self, rusparseGetVersion(h, vp)) {
                    assert!(v > 0, "GetVersion gave {v}");
                }
            }
            5 => {
                let mut b = -1;
                if call!(self, rusparseGetBackend(h, &mut b)) {
                    assert!((0..=3).contains(&b), "GetBackend gave {b}");
                }
            }
            6 => {
                call!(self, rusparseSetStream(h, null_mut()));
                // No input byte is read here, so recorded inputs replay as
                // before.
                call!(self, rusparseTrimScratch(h));
            }
            _ => {
                let mut s: *mut c_void = null_mut();
                call!(self, rusparseGetStream(h, &mut s));
                let (mut kept, mut limit) = (usize::MAX, 0usize);
                if call!(self, rusparseGetScratchSize(h, &mut kept, &mut limit)) {
                    assert!(
                        kept <= limit,
                        "{kept} bytes of scratch kept over a limit of {limit}"
                    );
                }
            }
        }
    }

    fn phase_args(&self, p: &mut Bytes<'_>) -> Phase {
        let scalar = |p: &mut Bytes<'_>, usual: Val| -> Option<Val> {
            match p.below(8) {
                0..=2 => Some(usual),
                3 => Some((2, 0)),
                4 => Some((-1, 0)),
                5 => Some((0, 0)),
                6 => Some((1, 1)),
                _ => p.rare().then_some((3, -2)),
            }
        };
        let null_handle = p.rare();
        let op_a = if p.rare() {
            p.pick(&[3, -1])
        } else {
            p.pick(&[0, 1, 2])
        };
        let op_b = if p.rare() {
            p.pick(&[3, -1])
        } else {
            p.pick(&[0, 1, 2])
        };
        let alpha = scalar(p, (1, 0));
        let beta = scalar(p, (0, 0));
        let x = p.byte() as usize;
        let (a, b, c) = (x % 5, (x / 5 + 1) % 5, (x / 25 + 2) % 5);
        let compute_type = if p.rare() {
            Some(p.pick(&[0, 1, 4, 5, 2, 9]))
        } else {
            None
        };
        // On device memory ([`run_on`]) the usual choices are the GPU's
        // algorithms; the CPU's (100..=103, NOT_SUPPORTED there) stay among
        // the rare ones.
        let on_device = MEMORY.with(|m| m.borrow().is_some());
        let alg = if p.rare() {
            if on_device {
                p.pick(&[6, 99, -1, 104, 200, 100, 103])
            } else {
                p.pick(&[6, 99, -1, 104, 200])
            }
        } else if on_device {
            p.pick(&[0, 1, 2, 3, 4, 5, 0, 1, 4, 5])
        } else {
            p.pick(&[0, 1, 2, 3, 4, 5, 100, 101, 102, 103])
        };
        let null_descr = p.rare();
        let buffer_mode = if p.rare() { 1 + p.below(3) as u8 } else { 0 };
        Phase {
            null_handle,
            op_a,
            op_b,
            alpha,
            beta,
            a,
            b,
            c,
            compute_type,
            alg,
            null_descr,
            buffer_mode,
        }
    }

    /// Whether the library may touch the arrays of the descriptors this
    /// phase names (the contract the harness keeps; a NULL descriptor is fine).
    fn arrays_ok(&self, x: &Phase) -> bool {
        [x.a, x.b, x.c]
            .iter()
            .all(|&s| match self.mats.get(s).and_then(|m| m.as_ref()) {
                Some(m) => m.arrays_hold_sizes(),
                None => true,
            })
    }

    /// The expected product of a phase's A and B when both are valid and
    /// the call is one rusparse must accept; None otherwise.
    fn expected(&self, which: PhaseCall, x: &Phase) -> Option<(Vec<BTreeMap<usize, Val>>, Ty)> {
        use PhaseCall::*;
        if x.null_handle || self.handle.is_null() || x.null_descr || self.descr.is_null() {
            return None;
        }
        if ![0, 1, 2, 3, 4, 5, 100, 101, 102, 103].contains(&x.alg) {
            return None;
        }
        let (a, b, c) = (
            self.mats.get(x.a)?.as_ref()?,
            self.mats.get(x.b)?.as_ref()?,
            self.mats.get(x.c)?.as_ref()?,
        );
        if x.a == x.c || x.b == x.c || c.constant {
            return None;
        }
        if !(0..=2).contains(&x.op_a) || !(0..=2).contains(&x.op_b) {
            return None;
        }
        if a.ty != b.ty || a.ty != c.ty || (a.off64, a.col64) != (b.off64, b.col64) {
            return None;
        }
        if c.col64 != a.col64 {
            return None;
        }
        // Phases that take computeType, alpha and beta.
        if matches!(
            which,
            WorkEstimation | Compute | Copy | ReuseCompute | EstimateMemory
        ) && (x.compute_type.is_some_and(|t| t != a.ty.c())
            || x.alpha.is_none()
            || x.beta.is_none())
        {
            return None;
        }
        let values = matches!(which, Copy | ReuseCompute);
        let ra = a.rows_if_valid(values)?;
        let rb = b.rows_if_valid(values)?;
        let complex = a.ty.complex();
        let oa = op_rows(&ra, a.cols as usize, x.op_a, complex);
        let ob = op_rows(&rb, b.cols as usize, x.op_b, complex);
        let inner_b = if x.op_b == 0 { b.rows } else { b.cols };
        let cols_b = if x.op_b == 0 { b.cols } else { b.rows };
        if ob.len() as i64 != inner_b || inner_b != if x.op_a == 0 { a.cols } else { a.rows } {
            return None;
        }
        if (c.rows, c.cols) != (oa.len() as i64, cols_b) {
            return None;
        }
        Some((product(&oa, &ob), a.ty))
    }

    /// Whether the library had to refuse this phase for its inputs: A or
    /// B breaks the CSR rules (the harness's own check).
    fn invalid_operand(&self, which: PhaseCall, x: &Phase) -> bool {
        let values = matches!(which, PhaseCall::Copy | PhaseCall::ReuseCompute);
        [x.a, x.b].iter().any(|&s| {
            self.mats
                .get(s)
                .and_then(|m| m.as_ref())
                .is_some_and(|m| m.rows_if_valid(values).is_none())
        })
    }

    /// Runs a buffer-taking phase per the buffer mode: a NULL buffer asks
    /// for the size, then a buffer of that size (or one byte less) runs it.
    /// Returns whether the working call (not the size query) succeeded.
    fn with_buffer(
        &mut self,
        mode: u8,
        what: &str,
        f: &dyn Fn(*mut usize, *mut c_void) -> i32,
    ) -> bool {
        let mut size = 0usize;
        if mode == 3 {
            let b = self.block(64);
            let s = f(null_mut(), b.cast());
            self.status(s, what);
            return false;
        }
        let s = f(&mut size, null_mut());
        if !self.status(s, what) || mode == 1 {
            return false;
        }
        if size > 1 << 30 {
            // Not a size a caller could give; the library asked for it.
            panic!("{what}: a buffer of {size} bytes asked for a small product");
        }
        let mut given = size;
        if mode == 2 {
            given = size.saturating_sub(1);
        }
        let b = self.block(given);
        let s = f(&mut given, b.cast());
        let ok = self.status(s, what);
        assert!(
            !(ok && mode == 2 && size > 0),
            "{what} succeeded with a buffer smaller than it asked for"
        );
        ok
    }

    fn phase(&mut self, which: PhaseCall, p: &mut Bytes<'_>) {
        let x = self.phase_args(p);
        if !self.arrays_ok(&x) {
            return;
        }
        let h = if x.null_handle {
            null_mut()
        } else {
            self.handle
        };
        let d = if x.null_descr { null_mut() } else { self.descr };
        let (ma, mb, mc) = (self.descr_of(x.a), self.descr_of(x.b), self.descr_of(x.c));
        // The compute type: the operands' own unless the program says otherwise.
        let ty = self
            .mats
            .get(x.a)
            .and_then(|m| m.as_ref())
            .map_or(Ty::F64, |m| m.ty);
        let ct = x.compute_type.unwrap_or(ty.c());
        let scalar_block = |h: &mut Harness, v: Option<Val>| -> *const c_void {
            match v {
                None => null(),
                Some(v) => {
                    let b = h.block(16);
                    // SAFETY: 16 bytes hold one value of any type.
                    unsafe { write_value(b, ty, 0, v) };
                    b.cast_const().cast()
                }
            }
        };
        let (pa, pb) = (scalar_block(self, x.alpha), scalar_block(self, x.beta));
        let (oa, ob, alg) = (x.op_a, x.op_b, x.alg);
        // C's values before a numeric phase, for β·C_old.
        self.scratch = self.c_values(x.c);
        let ok = match which {
            PhaseCall::WorkEstimation => {
                self.with_buffer(x.buffer_mode, "workEstimation", &|s, b| {
                    // SAFETY: see `call!`.
                    unsafe {
                        rusparseSpGEMM_workEstimation(
                            h, oa, ob, pa, ma, mb, pb, mc, ct, alg, d, s, b,
                        ) as i32
                    }
                })
            }
            PhaseCall::Compute => self.with_buffer(x.buffer_mode, "compute", &|s, b| {
                // SAFETY: see `call!`.
                unsafe {
                    rusparseSpGEMM_compute(h, oa, ob, pa, ma, mb, pb, mc, ct, alg, d, s, b) as i32
                }
            }),
            PhaseCall::Copy => {
                call!(
                    self,
                    rusparseSpGEMM_copy(h, oa, ob, pa, ma, mb, pb, mc, ct, alg, d)
                )
            }
            PhaseCall::ReuseWorkEstimation => {
                self.with_buffer(x.buffer_mode, "reuse_workEstimation", &|s, b| {
                    // SAFETY: see `call!`.
                    unsafe {
                        rusparseSpGEMMreuse_workEstimation(h, oa, ob, ma, mb, mc, alg, d, s, b)
                            as i32
                    }
                })
            }
            PhaseCall::ReuseNnz => {
                let mode = x.buffer_mode;
                let (mut s2, mut s3, mut s4) = (0usize, 0usize, 0usize);
                let q = call!(
                    self,
                    rusparseSpGEMMreuse_nnz(
                        h,
                        oa,
                        ob,
                        ma,
                        mb,
                        mc,
                        alg,
                        d,
                        &mut s2,
                        null_mut(),
                        &mut s3,
                        null_mut(),
                        &mut s4,
                        null_mut()
                    )
                );
                if !q || mode == 1 || s2.max(s3).max(s4) > 1 << 30 {
                    false
                } else {
                    let shrink = usize::from(mode == 2);
                    let (mut g2, mut g3, mut g4) = (s2.saturating_sub(shrink), s3, s4);
                    let (b2, b3, b4) = (self.block(g2), self.block(g3), self.block(g4));
                    let ok = call!(
                        self,
                        rusparseSpGEMMreuse_nnz(
                            h,
                            oa,
                            ob,
                            ma,
                            mb,
                            mc,
                            alg,
                            d,
                            &mut g2,
                            b2.cast(),
                            &mut g3,
                            b3.cast(),
                            &mut g4,
                            b4.cast()
                        )
                    );
                    assert!(
                        !(ok && mode == 2 && s2 > 0),
                        "reuse_nnz took a small buffer2"
                    );
                    ok
                }
            }
            PhaseCall::ReuseCopy => self.with_buffer(x.buffer_mode, "reuse_copy", &|s, b| {
                // SAFETY: see `call!`.
                unsafe { rusparseSpGEMMreuse_copy(h, oa, ob, ma, mb, mc, alg, d, s, b) as i32 }
            }),
            PhaseCall::ReuseCompute => {
                call!(
                    self,
                    rusparseSpGEMMreuse_compute(h, oa, ob, pa, ma, mb, pb, mc, ct, alg, d)
                )
            }
            PhaseCall::PredictNnz => {
                let mut nnz = -1i64;
                let ok = call!(self, rusparseSpGEMM_predictNnz(h, oa, ob, ma, mb, &mut nnz));
                if ok {
                    assert!(nnz >= 0, "predictNnz gave {nnz}");
                }
                // A prediction reads a sample, not every entry: no check of
                // validity or of the value here.
                return;
            }
            PhaseCall::EstimateMemory => {
                let frac = p.pick(&[0.2f32, 1.0, 0.0, -1.0, f32::NAN, 2.0]);
                let (mut s3, mut s2) = (0usize, 0usize);
                let mut estimate = |s3: &mut usize, s2: &mut usize, buffer: *mut u8| {
                    // SAFETY: see `call!`.
                    let s = unsafe {
                        rusparseSpGEMM_estimateMemory(
                            h,
                            oa,
                            ob,
                            pa,
                            ma,
                            mb,
                            pb,
                            mc,
                            ct,
                            alg,
                            d,
                            frac,
                            s3,
                            buffer.cast(),
                            s2,
                        )
                    };
                    self.status(s as i32, "estimateMemory")
                };
                if estimate(&mut s3, &mut s2, null_mut()) && s3 <= 1 << 20 {
                    let b3 = Block::new(s3);
                    estimate(&mut s3, &mut s2, b3.ptr);
                    self.blocks.push(b3);
                }
                return;
            }
        };
        if !ok {
            return;
        }
        // A phase that reads A and B succeeded: they must be valid, and C
        // must be what the reference says.
        assert!(
            !self.invalid_operand(which, &x),
            "{which:?} succeeded on an invalid A or B: {x:?}"
        );
        let expected = self.expected(which, &x);
        let Some((pattern, ty)) = expected else {
            panic!("{which:?} succeeded on arguments rusparse must refuse: {x:?}");
        };
        match which {
            PhaseCall::Compute | PhaseCall::ReuseNnz => {
                let nnz: usize = pattern.iter().map(|r| r.len()).sum();
                let m = self.mats[x.c].as_mut().expect("C is live");
                let mut z = -1;
                let (mut r, mut c) = (-1, -1);
                // SAFETY: a live descriptor and writable slots.
                let s = unsafe { rusparseSpMatGetSize(m.descr, &mut r, &mut c, &mut z) };
                assert_eq!(s as i32, STATUS_SUCCESS);
                assert_eq!(z as usize, nnz, "{which:?}: nnz(C)");
                m.nnz = z;
                self.stats.sizes_checked += 1;
            }
            PhaseCall::Copy | PhaseCall::ReuseCopy | PhaseCall::ReuseCompute => {
                let values = which != PhaseCall::ReuseCopy;
                // reuse_copy takes no alpha or beta: it writes the structure only.
                let scalars = values.then(|| (x.alpha.expect("alpha"), x.beta.expect("beta")));
                self.check_c(x.c, &pattern, ty, scalars);
                self.stats.products_checked += 1;
            }
            _ => {}
        }
    }

    /// C's current values (empty when it has none).
    fn c_values(&self, slot: usize) -> Vec<Val> {
        let Some(m) = self.mats.get(slot).and_then(|m| m.as_ref()) else {
            return Vec::new();
        };
        if m.values.is_null() || m.nnz <= 0 || m.values.capacity < m.nnz as usize {
            return Vec::new();
        }
        // SAFETY: within the array's capacity.
        (0..m.nnz as usize)
            .map(|i| unsafe { read_value(m.values.ptr, m.ty, i) }.unwrap_or((0, 0)))
            .collect()
    }

    /// Compares C's arrays with the reference pattern (and with
    /// α·product + β·C_old when `scalars` is given).
    fn check_c(
        &self,
        slot: usize,
        pattern: &[BTreeMap<usize, Val>],
        ty: Ty,
        scalars: Option<(Val, Val)>,
    ) {
        let m = self.mats[slot].as_ref().expect("C is live");
        let nnz: usize = pattern.iter().map(|r| r.len()).sum();
        assert_eq!(m.nnz as usize, nnz, "nnz(C) in the descriptor");
        assert!(m.offsets.capacity > pattern.len() && m.col_ind.holds(nnz as i64));
        let mut k = 0usize;
        // SAFETY: the arrays hold rows + 1 offsets and nnz entries.
        unsafe {
            for (i, row) in pattern.iter().enumerate() {
                assert_eq!(
                    read_index(m.offsets.ptr, m.off64, i) - m.base,
                    k as i64,
                    "C offset {i}"
                );
                for (&j, &v) in row {
                    let col = read_index(m.col_ind.ptr, m.col64, k) - m.base;
                    assert_eq!(col, j as i64, "C row {i}, entry {k}: column");
                    if let Some((alpha, beta)) = scalars {
                        let old = self.scratch.get(k).copied().unwrap_or((0, 0));
                        let want = add(mul(alpha, v), mul(beta, old));
                        let want = if ty.complex() { want } else { (want.0, 0) };
                        let got = read_value(m.values.ptr, ty, k);
                        assert_eq!(got, Some(want), "C row {i}, column {j}: value");
                    }
                    k += 1;
                }
            }
            assert_eq!(
                read_index(m.offsets.ptr, m.off64, pattern.len()) - m.base,
                k as i64
            );
        }
    }

    fn spgemm_descr(&mut self, p: &mut Bytes<'_>) {
        match p.below(3) {
            0 | 1 => {
                if !self.descr.is_null() {
                    call!(self, rusparseSpGEMM_destroyDescr(self.descr));
                    self.descr = null_mut();
                }
                let mut d = null_mut();
                let out: *mut rusparseSpGEMMDescr_t = if p.rare() { null_mut() } else { &mut d };
                if call!(self, rusparseSpGEMM_createDescr(out)) {
                    self.descr = d;
                }
            }
            _ => {
                call!(self, rusparseSpGEMM_destroyDescr(self.descr));
                self.descr = null_mut();
            }
        }
    }

    fn descr_query(&mut self, p: &mut Bytes<'_>) {
        let d = if p.rare() { null_mut() } else { self.descr };
        match p.below(3) {
            0 => {
                let mut n = -1i64;
                if call!(self, rusparseSpGEMM_getNumProducts(d, &mut n)) {
                    assert!(n >= 0, "getNumProducts gave {n}");
                }
            }
            1 => {
                let (mut b, mut a, mut n, mut z) = (-1, -1, -1i64, -9i64);
                if call!(
                    self,
                    rusparseSpGEMM_getPlanInfo(d, &mut b, &mut a, &mut n, &mut z)
                ) {
                    assert!((1..=3).contains(&b) && n >= 0 && z >= -1, "getPlanInfo");
                }
            }
            _ => {
                let which = p.pick(&[0, 1, 2, -1]);
                let cap = p.pick(&[8, 0, 1, -1]);
                let mut counts = [0i64; 8];
                let mut n = -1;
                if call!(
                    self,
                    rusparseSpGEMM_getBinCounts(d, which, counts.as_mut_ptr(), cap, &mut n)
                ) {
                    assert!(n >= 0, "getBinCounts gave {n} bins");
                }
            }
        }
    }

    fn create_handle(&mut self, p: &mut Bytes<'_>) {
        if !self.handle.is_null() {
            call!(self, rusparseDestroy(self.handle));
            self.handle = null_mut();
        }
        // The usual choice (byte 0) is the back end where the arrays are:
        // the CPU, or AUTO for device memory ([`run_on`]).
        let on_device = MEMORY.with(|m| m.borrow().is_some());
        let backend = if p.rare() {
            p.pick(&[2, 3, 9, -1])
        } else if on_device {
            p.pick(&[0, 1])
        } else {
            p.pick(&[1, 0])
        };
        let mut h = null_mut();
        let out: *mut rusparseHandle_t = if p.rare() { null_mut() } else { &mut h };
        if call!(self, rusparseCreateWithBackend(out, backend)) {
            self.handle = h;
        }
    }

    fn step(&mut self, p: &mut Bytes<'_>) {
        match p.below(20) {
            0 => self.create_handle(p),
            1 => {
                call!(self, rusparseDestroy(self.handle));
                self.handle = null_mut();
            }
            2 => self.handle_call(p),
            3 => self.create(p),
            4 => {
                let slot = p.below(SLOTS);
                self.destroy_mat(slot);
            }
            5 => self.query(p),
            6 => self.set_pointers(p),
            7 => self.revalue(p),
            8 => self.spgemm_descr(p),
            9 => self.descr_query(p),
            10 => self.phase(PhaseCall::WorkEstimation, p),
            11 => self.phase(PhaseCall::Compute, p),
            12 => self.phase(PhaseCall::Copy, p),
            13 => self.phase(PhaseCall::ReuseWorkEstimation, p),
            14 => self.phase(PhaseCall::ReuseNnz, p),
            15 => self.phase(PhaseCall::ReuseCopy, p),
            16 => self.phase(PhaseCall::ReuseCompute, p),
            17 => self.phase(PhaseCall::PredictNnz, p),
            18 => self.phase(PhaseCall::EstimateMemory, p),
            _ => {
                // Error strings of any status number.
                let s = p.pick(&[0, 3, 11, 12, -1, 1000]);
                assert!(!rusparseGetErrorName(s).is_null());
                assert!(!rusparseGetErrorString(s).is_null());
            }
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for slot in 0..SLOTS {
            self.destroy_mat(slot);
        }
        // SAFETY: NULL or live objects, destroyed once.
        unsafe {
            rusparseSpGEMM_destroyDescr(self.descr);
            rusparseDestroy(self.handle);
        }
    }
}

/// The longest program run (longer inputs are cut): keeps one input fast.
pub const MAX_STEPS: usize = 64;

/// The memory ceiling the programs run under (`rusparse::set_memory_limit`).
/// Sizes such as 2^31 columns make legitimate products whose planning needs
/// tens of GiB (a transposed 5 × 2^31 operand has 2^31 rows); under the
/// ceiling they fail fast with ALLOC_FAILED, on any machine, instead of
/// filling its memory for minutes under valgrind.
pub const MEMORY_LIMIT: u64 = 2 << 30;

/// Runs the program `data`; panics when rusparse broke a rule above.
pub fn run(data: &[u8]) -> Stats {
    rusparse::set_memory_limit(Some(MEMORY_LIMIT));
    let mut h = Harness::new();
    let mut p = Bytes { data, pos: 0 };
    for _ in 0..MAX_STEPS {
        if p.done() {
            break;
        }
        h.step(&mut p);
    }
    let stats = h.stats;
    drop(h);
    stats
}

/// [`run`] with every array the program hands to the library (A's, B's
/// and C's, the buffers, and α and β whatever the pointer mode) in
/// `memory`.
#[allow(dead_code)] // used by kernels/host-tests/tests/fuzz_c_abi_emulated.rs only
pub fn run_on(memory: std::rc::Rc<dyn HostVisibleMemory>, data: &[u8]) -> Stats {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            MEMORY.with(|m| *m.borrow_mut() = None);
        }
    }
    MEMORY.with(|m| *m.borrow_mut() = Some(memory));
    let _reset = Reset;
    run(data)
}

/// Seed program `k` (modulo their number) with `edits` applied in turn:
/// `(at, byte, kind)` at position `i = at % (len + 1)` replaces the byte
/// there (kind 0), inserts `byte` before it (1) or removes it (2); at the
/// end (`i == len`) kinds 0 and 2 append `byte`. The tests' mutated
/// programs.
#[allow(dead_code)] // used by the proptest replays only
pub fn mutated_seed(k: usize, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    let seeds = seed_programs();
    let mut p = seeds[k % seeds.len()].clone();
    for &(at, byte, kind) in edits {
        let i = at % (p.len() + 1);
        match kind {
            0 if i < p.len() => p[i] = byte,
            1 => p.insert(i, byte),
            _ if i < p.len() => {
                p.remove(i);
            }
            _ => p.push(byte),
        }
    }
    p
}

/// Programs for the usual flows, as starting points of the fuzzer's corpus
/// and for the replay test: cuSPARSE's compute flow and its reuse flow on
/// small operands of every value type, index types and base.
pub fn seed_programs() -> Vec<Vec<u8>> {
    // Step numbers (the byte `step` reads, `% 20`).
    const CREATE_HANDLE: u8 = 0;
    const CREATE: u8 = 3;
    const SET_POINTERS: u8 = 6;
    const DESCR: u8 = 8;
    const WORK: u8 = 10;
    const COMPUTE: u8 = 11;
    const COPY: u8 = 12;
    const REUSE_WORK: u8 = 13;
    const REUSE_NNZ: u8 = 14;
    const REUSE_COPY: u8 = 15;
    const REUSE_COMPUTE: u8 = 16;
    const REVALUE: u8 = 7;
    const PREDICT: u8 = 17;
    // A phase with the usual arguments: A = slot 0, B = 1, C = 2, ops and
    // algorithm from the arguments.
    let phase = |step: u8, op_a: u8, op_b: u8, alg: u8| -> Vec<u8> {
        // null_handle, op_a, op_b, alpha, beta, slots (0 → 0, 1, 2),
        // compute type, alg, null_descr, buffer mode.
        vec![step, 0, 0, op_a, 0, op_b, 0, 0, 0, 0, 0, alg, 0, 0]
    };
    // An operand of `rows` × `cols` with a few entries per row.
    let operand = |slot: u8, rows: u8, cols: u8, off: u8, col: u8, base: u8, ty: u8, seed: u8| {
        let mut v = vec![
            CREATE, slot, 0, 0, rows, cols, 0, off, 0, col, 0, base, 0, ty,
        ];
        for i in 0..rows {
            let len = (i + seed) % 4;
            v.push(len);
            for e in 0..len {
                v.push(i.wrapping_mul(7).wrapping_add(e * 3).wrapping_add(seed));
                v.push(seed.wrapping_add(i).wrapping_add(e));
            }
        }
        v.extend([0, 0, 0, 0]); // corruption flag, nnz flag, NULL flags, out slot
        v
    };
    let output = |slot: u8, rows: u8, cols: u8, off: u8, col: u8, base: u8, ty: u8| {
        // output kind (3), arrays: offsets allocated (0), C's columns and
        // values NULL (1).
        vec![
            CREATE, slot, 3, 0, rows, cols, 0, off, 0, col, 0, base, 0, ty, 0, 0, 0, 1, 0, 0,
        ]
    };
    let mut programs = Vec::new();
    for (ty, off, col, base, op_a, op_b, alg) in [
        (0u8, 0u8, 0u8, 0u8, 0u8, 0u8, 0u8),
        (1, 1, 1, 1, 1, 0, 6),
        (2, 0, 1, 0, 0, 1, 7),
        (3, 1, 0, 1, 2, 2, 8),
        (0, 0, 0, 1, 0, 0, 9),
        (1, 1, 1, 0, 1, 1, 3),
    ] {
        let (m, k, n) = (6u8, 5u8, 7u8);
        let (ar, ac) = if op_a == 0 { (m, k) } else { (k, m) };
        let (br, bc) = if op_b == 0 { (k, n) } else { (n, k) };
        let mut v = vec![CREATE_HANDLE, 0, 0, 0, DESCR, 0, 0];
        v.extend(operand(0, ar, ac, off, col, base, ty, 1));
        v.extend(operand(1, br, bc, off, col, base, ty, 2));
        v.extend(output(2, m, n, off, col, base, ty));
        // Compute flow: work estimation, compute, C's arrays, copy.
        v.extend(phase(WORK, op_a, op_b, alg));
        v.extend(phase(COMPUTE, op_a, op_b, alg));
        v.extend([SET_POINTERS, 2, 0, 3]);
        v.extend(phase(COPY, op_a, op_b, alg));
        v.extend(phase(PREDICT, op_a, op_b, alg));
        programs.push(v.clone());
        // Reuse flow on a fresh C and descriptor: new values of A between
        // two reuse_compute calls.
        let mut r = vec![CREATE_HANDLE, 0, 0, 0, DESCR, 0, 0];
        r.extend(operand(0, ar, ac, off, col, base, ty, 3));
        r.extend(operand(1, br, bc, off, col, base, ty, 4));
        r.extend(output(2, m, n, off, col, base, ty));
        r.extend(phase(REUSE_WORK, op_a, op_b, alg));
        r.extend(phase(REUSE_NNZ, op_a, op_b, alg));
        r.extend([SET_POINTERS, 2, 0, 4]);
        r.extend(phase(REUSE_COPY, op_a, op_b, alg));
        r.extend(phase(REUSE_COMPUTE, op_a, op_b, alg));
        r.extend([REVALUE, 0, 5]);
        r.extend(phase(REUSE_COMPUTE, op_a, op_b, alg));
        programs.push(r);
    }
    programs
}
