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

mod handles;
mod matrices;
mod phases;

use phases::PhaseCall;
