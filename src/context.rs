//! The execution context: which back end runs, and with how many threads.

use crate::backend::cpu::ScratchPool;
use crate::backend::gpu::budget::ProductMemory;
use crate::backend::gpu::{DeviceAllocator, GpuDevice};
use crate::error::{Error, Result};
use crate::host_allocator::{self, HostHooks};
use crate::types::BackendKind;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;

/// Name of the environment variable that sets the CPU thread count of every
/// new context (overridden by [`Context::set_num_threads`]).
pub const NUM_THREADS_ENV: &str = "RUSPARSE_NUM_THREADS";

/// Name of the environment variable that sets the scratch limit of every
/// new context, in bytes (`4096`, `512M`, `1G`; overridden by
/// [`Context::set_scratch_limit`]); `0` keeps no scratch between products.
pub const SCRATCH_LIMIT_ENV: &str = "RUSPARSE_SCRATCH_LIMIT";

/// Name of the environment variable that sets the memory budget of every
/// new context, in bytes (`4096`, `512M`, `1G`; overridden by
/// [`Context::set_memory_budget`]).
pub const MEMORY_BUDGET_ENV: &str = "RUSPARSE_MEMORY_BUDGET";

/// The most CPU threads one context may ask for (a guard against typos that
/// would start a hundred thousand threads).
pub const MAX_THREADS: usize = 4096;

/// Where and how products run. One context is used by one thread at a time;
/// different contexts work concurrently and never share a thread setting.
///
/// A context keeps the CPU kernels' scratch memory (accumulators, hash
/// tables, merge buffers) between products, up to
/// [`Context::scratch_limit`] bytes (256 MiB unless set, or
/// `RUSPARSE_SCRATCH_LIMIT`), so a product
/// does not pay page faults for the scratch of the one before it; clones
/// share it. It is freed with the last clone, or at once by
/// [`Context::trim_scratch`].
#[derive(Clone)]
pub struct Context {
    backend: BackendKind,
    pool: Option<Arc<Pool>>,
    scratch: Arc<ScratchPool>,
    /// The memory budget in bytes, `u64::MAX` for none; shared by clones.
    budget: Arc<AtomicU64>,
    /// The products (nprod) of the last one-call product
    /// ([`Context::spgemm`], [`Context::spgemm_into`]) planned on the CPU,
    /// 0 before the first; shared by clones. A one-call product of about
    /// as many may run the dense accumulator in one pass (see
    /// `one_pass_instead_of_dense` in the CPU plan).
    last_one_call: Arc<AtomicU64>,
    /// Where GPU products take device memory from (`None`: the runtime);
    /// shared by clones.
    device_allocator: Arc<RwLock<Option<Arc<dyn DeviceAllocator>>>>,
    /// The C ABI's host hooks (`rusparseSetAllocator`): the threads of
    /// this context's pools allocate through them.
    host_hooks: Option<&'static HostHooks>,
    /// The GPU of a CUDA or HIP context (AUTO contexts open devices per
    /// call).
    gpu: Option<Arc<dyn GpuDevice>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("backend", &self.backend)
            .field("threads", &self.num_threads())
            .finish()
    }
}

impl Context {
    /// A context for `backend`. `Auto` and `Cpu` always work: `Auto` runs
    /// each product where A's data lives (device memory on that GPU, host
    /// memory on the CPU). `Cuda` opens the current CUDA device (the one
    /// whose context is current on this thread, else device 0), loads the
    /// driver and NVRTC and fails cleanly when any is missing. The CPU
    /// thread count comes from `RUSPARSE_NUM_THREADS` when set, else from
    /// rayon's global pool (all cores, or `RAYON_NUM_THREADS`).
    ///
    /// # Errors
    /// [`Error::NotSupported`] for `Cuda` when this build has no CUDA back
    /// end or the machine has no NVIDIA driver, GPU or NVRTC (the message
    /// says which), and for `Hip` (not built in, or built in and saying why
    /// it cannot run: no runtime, no device, or the HIP pipeline not yet
    /// ported; see `backend::hip`); [`Error::InvalidValue`]
    /// when `RUSPARSE_NUM_THREADS` is not a positive integer or
    /// `RUSPARSE_SCRATCH_LIMIT` not a number of bytes.
    pub fn new(backend: BackendKind) -> Result<Self> {
        let gpu = match backend {
            BackendKind::Auto | BackendKind::Cpu => None,
            BackendKind::Cuda => Some(open_cuda()?),
            BackendKind::Hip => Some(open_hip()?),
        };
        Context::with(backend, gpu)
    }

    /// A context for `dev`'s back end (CUDA or HIP) on `dev`, a device
    /// rusparse opened (`backend::cuda::CudaDevice::get`) or one implemented
    /// outside it (the emulated device of `kernels/host-tests`). Threads as
    /// [`Context::new`].
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a device that reports neither CUDA nor
    /// HIP, or a bad `RUSPARSE_NUM_THREADS` or `RUSPARSE_SCRATCH_LIMIT`.
    pub fn on_device(dev: Arc<dyn GpuDevice>) -> Result<Self> {
        let backend = dev.backend();
        if !matches!(backend, BackendKind::Cuda | BackendKind::Hip) {
            return Err(Error::InvalidValue(format!(
                "device {} reports the {backend:?} back end, not CUDA or HIP",
                dev.name()
            )));
        }
        Context::with(backend, Some(dev))
    }

    fn with(backend: BackendKind, gpu: Option<Arc<dyn GpuDevice>>) -> Result<Self> {
        let mut ctx = Context {
            backend,
            pool: None,
            scratch: Arc::new(ScratchPool::default()),
            budget: Arc::new(AtomicU64::new(u64::MAX)),
            last_one_call: Arc::new(AtomicU64::new(0)),
            device_allocator: Arc::default(),
            host_hooks: None,
            gpu,
        };
        if let Ok(v) = std::env::var(NUM_THREADS_ENV) {
            let n = v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    Error::InvalidValue(format!(
                        "{NUM_THREADS_ENV} = {v:?} is not a positive integer"
                    ))
                })?;
            ctx.set_num_threads(n)?;
        }
        if let Some(bytes) = env_bytes(SCRATCH_LIMIT_ENV)? {
            ctx.set_scratch_limit(bytes);
        }
        if let Some(bytes) = env_bytes(MEMORY_BUDGET_ENV)? {
            ctx.set_memory_budget(Some(bytes));
        }
        Ok(ctx)
    }

    /// A CPU context (see [`Context::new`]).
    ///
    /// # Errors
    /// As [`Context::new`].
    pub fn cpu() -> Result<Self> {
        Context::new(BackendKind::Cpu)
    }

    /// One line describing where products run: the GPU's
    /// [`GpuDevice::describe`] for a CUDA or HIP context, the CPU thread
    /// count otherwise.
    pub fn describe(&self) -> String {
        let cpu = format!("CPU with {} threads", self.num_threads());
        match (&self.gpu, self.backend) {
            (Some(dev), _) => dev.describe(),
            (None, BackendKind::Auto) => {
                format!("AUTO: {cpu} for host arrays, the GPU holding them for device arrays")
            }
            (None, _) => cpu,
        }
    }

    /// The back end this context was created for.
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// The GPU of a CUDA or HIP context.
    pub fn gpu_device(&self) -> Option<&Arc<dyn GpuDevice>> {
        self.gpu.as_ref()
    }

    /// Gives this context its own pool of `n` CPU threads; `0` returns to the
    /// shared default pool (a context with host allocator hooks, which only
    /// the C ABI sets, keeps a pool of its own, as large as the default).
    /// The threads of the pool replaced are stopped and joined. Cost:
    /// starting `n` threads.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `n` exceeds [`MAX_THREADS`];
    /// [`Error::AllocFailed`] when the threads cannot be started.
    pub fn set_num_threads(&mut self, n: usize) -> Result<()> {
        if n > MAX_THREADS {
            return Err(Error::InvalidValue(format!(
                "{n} threads exceed the limit of {MAX_THREADS}"
            )));
        }
        self.pool = match (n, self.host_hooks) {
            (0, None) => None,
            (0, Some(_)) => Some(Arc::new(
                self.thread_pool(rayon::current_num_threads(), "rusparse")?,
            )),
            (n, _) => Some(Arc::new(self.thread_pool(n, "rusparse")?)),
        };
        Ok(())
    }

    /// [`Context::set_num_threads`] with the calling thread as one of the
    /// `n` (`n - 1` threads are started beside it): a product run from this
    /// thread computes on it, where a pool of its own hands every product
    /// to its threads and puts the caller to sleep until they are done.
    /// On the project's 2-core VM that hand-over, after the caller had kept
    /// its core busy (a Python program between two products), left the
    /// pool's second thread waking up late or on the busy core:
    /// luxembourg_osm squared at 2 threads, 4 ms of other work on the
    /// calling thread between calls, took 3.8 ms median but 6.3 ms at the
    /// 90th percentile, and 3.7 / 3.9 ms with the caller in the pool.
    ///
    /// Products run from other threads are handed to the pool as usual,
    /// where only the `n - 1` started threads take them. rayon never frees
    /// the bookkeeping of a pool that includes an outside thread, and a
    /// thread belongs to one such pool for its whole life: make one such
    /// context per thread and keep it (the Python binding keeps one per
    /// thread and thread count). Once it is dropped, rayon loops started
    /// on this thread outside any pool (a context on rayon's global pool,
    /// or the program's own `par_iter`) still count it as a thread of that
    /// finished pool and run on this thread alone.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `n` is below 2 or exceeds
    /// [`MAX_THREADS`], when the context has host allocator hooks (the
    /// calling thread does not allocate through them), or when the calling
    /// thread already belongs to a pool; [`Error::AllocFailed`] when the
    /// threads cannot be started.
    pub fn set_num_threads_with_caller(&mut self, n: usize) -> Result<()> {
        if !(2..=MAX_THREADS).contains(&n) {
            return Err(Error::InvalidValue(format!(
                "a pool with the calling thread needs 2 to {MAX_THREADS} threads, not {n}"
            )));
        }
        if self.host_hooks.is_some() {
            return Err(Error::InvalidValue(
                "a context with host allocator hooks cannot run products on the calling thread"
                    .into(),
            ));
        }
        if rayon::current_thread_index().is_some() {
            return Err(Error::InvalidValue(
                "the calling thread already belongs to a thread pool".into(),
            ));
        }
        self.pool = Some(Arc::new(self.pool_of(n, "rusparse", true)?));
        Ok(())
    }

    /// A pool of `n` threads named `name-<i>` for this context's work: its
    /// threads allocate through the context's host hooks, if any, and are
    /// joined when it is dropped.
    ///
    /// # Errors
    /// [`Error::AllocFailed`] when the threads cannot be started.
    pub(crate) fn thread_pool(&self, n: usize, name: &'static str) -> Result<Pool> {
        self.pool_of(n, name, false)
    }

    /// [`Context::thread_pool`], with the calling thread as its thread 0
    /// when `with_caller`.
    fn pool_of(&self, n: usize, name: &'static str, with_caller: bool) -> Result<Pool> {
        let threads: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let spawned = threads.clone();
        let mut builder = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(move |i| format!("{name}-{i}"))
            .spawn_handler(move |thread| {
                let mut b = std::thread::Builder::new();
                if let Some(name) = thread.name() {
                    b = b.name(name.to_owned());
                }
                if let Some(bytes) = thread.stack_size() {
                    b = b.stack_size(bytes);
                }
                let handle = b.spawn(|| thread.run())?;
                spawned
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(handle);
                Ok(())
            });
        if with_caller {
            builder = builder.use_current_thread();
        }
        if let Some(hooks) = self.host_hooks {
            builder = builder
                .start_handler(move |_| host_allocator::enter_for_thread(hooks))
                .exit_handler(|_| host_allocator::leave_for_thread());
        }
        let pool = builder
            .build()
            .map_err(|e| Error::AllocFailed(format!("could not start {n} threads: {e}")))?;
        let threads = std::mem::take(&mut *threads.lock().unwrap_or_else(PoisonError::into_inner));
        Ok(Pool {
            pool: ManuallyDrop::new(pool),
            threads,
        })
    }

    /// Threads a CPU product runs on.
    pub fn num_threads(&self) -> usize {
        self.pool
            .as_ref()
            .map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
    }

    /// Sets the caller's device memory for the GPU products planned from
    /// now on (`None`: the runtime's, the default): every device
    /// allocation of a product goes through `allocator`, still counted
    /// against the memory budget, and a refusal fails the product with
    /// [`Error::InsufficientResources`]. Products planned before keep the
    /// allocator they were planned with and give their memory back to it.
    /// Applies to every clone of this context. See docs/memory.md
    /// ("Allocator hooks"); host memory in Rust is the program's
    /// `#[global_allocator]`.
    pub fn set_device_allocator(&self, allocator: Option<Arc<dyn DeviceAllocator>>) {
        *self
            .device_allocator
            .write()
            .unwrap_or_else(PoisonError::into_inner) = allocator;
    }

    /// The allocator set by [`Context::set_device_allocator`].
    pub fn device_allocator(&self) -> Option<Arc<dyn DeviceAllocator>> {
        self.device_allocator
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The budget and allocator of a GPU product planned now.
    pub(crate) fn product_memory(&self) -> ProductMemory {
        ProductMemory {
            budget: self.memory_budget().map(|b| b as u64),
            allocator: self.device_allocator(),
        }
    }

    /// Makes this context's threads allocate host memory through `hooks`
    /// (`None`: the global allocator): its pool is rebuilt with as many
    /// threads, one of its own even when it had none. Only the C library's
    /// dispatching global allocator reads the hooks (see
    /// `host_allocator`).
    ///
    /// # Errors
    /// [`Error::AllocFailed`] when the threads cannot be started (nothing
    /// changes then).
    pub(crate) fn set_host_hooks(&mut self, hooks: Option<&'static HostHooks>) -> Result<()> {
        let same = match (hooks, self.host_hooks) {
            (Some(a), Some(b)) => std::ptr::eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        if same {
            return Ok(());
        }
        let previous = std::mem::replace(&mut self.host_hooks, hooks);
        if hooks.is_some() || self.pool.is_some() {
            match self.thread_pool(self.num_threads(), "rusparse") {
                Ok(pool) => self.pool = Some(Arc::new(pool)),
                Err(e) => {
                    self.host_hooks = previous;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The host hooks set by [`Context::set_host_hooks`].
    pub(crate) fn host_hooks(&self) -> Option<&'static HostHooks> {
        self.host_hooks
    }

    /// Takes `other`'s device allocator (shared from now on) and host
    /// hooks, for a context that replaces it.
    ///
    /// # Errors
    /// As [`Context::set_host_hooks`].
    pub(crate) fn keep_allocators_of(&mut self, other: &Context) -> Result<()> {
        self.device_allocator = other.device_allocator.clone();
        self.set_host_hooks(other.host_hooks)
    }

    /// The scratch memory kept between products.
    pub(crate) fn scratch(&self) -> &ScratchPool {
        &self.scratch
    }

    /// Bytes of scratch memory this context keeps between products now.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch.bytes()
    }

    /// The most bytes of scratch memory this context keeps between
    /// products.
    pub fn scratch_limit(&self) -> usize {
        self.scratch.limit()
    }

    /// Sets the most bytes of scratch memory kept between products (`0`:
    /// keep none, every product allocates its own); kept memory above the
    /// new limit is freed now. Applies to every clone of this context.
    pub fn set_scratch_limit(&self, bytes: usize) {
        self.scratch.set_limit(bytes);
    }

    /// Frees the scratch memory kept between products; returns the bytes
    /// freed. The next product allocates what it needs again.
    pub fn trim_scratch(&self) -> usize {
        self.scratch.trim()
    }

    /// Sets the memory budget of the products planned from now on (`None`:
    /// no budget): the peak of everything rusparse allocates for a product
    /// beyond the caller's A, B and C (the plan, every phase's workspaces,
    /// the scratch this context keeps) stays at most `bytes`. The planner
    /// meets it by choosing the fastest configuration that fits (another
    /// algorithm, fewer chunks of rows at once); when none fits, planning
    /// fails with [`Error::AllocFailed`] before allocating, naming the
    /// smallest budget that would work. Applies to every clone of this
    /// context. See docs/memory.md.
    ///
    /// On a CUDA or HIP context the budget bounds the product's device
    /// memory (staged copies of A, B and C, row metadata, transposes, hash
    /// tables), and a product that cannot fit fails with
    /// [`Error::InsufficientResources`] naming the smallest budget; without
    /// a budget the device's free memory stands in for one.
    pub fn set_memory_budget(&self, bytes: Option<usize>) {
        let v = bytes.map_or(u64::MAX, |b| (b as u64).min(u64::MAX - 1));
        self.budget.store(v, Ordering::Relaxed);
        // Scratch kept from before counts against the budget: keep at most
        // half of it (each product trims further to what it leaves).
        self.scratch.set_room(bytes.map(|b| b / 2));
    }

    /// Records the products (nprod) of a one-call product planned on the
    /// CPU; returns those of the one before (0: none).
    pub(crate) fn swap_last_one_call(&self, products: u64) -> u64 {
        self.last_one_call.swap(products, Ordering::Relaxed)
    }

    /// The memory budget (see [`Context::set_memory_budget`]).
    pub fn memory_budget(&self) -> Option<usize> {
        match self.budget.load(Ordering::Relaxed) {
            u64::MAX => None,
            b => Some(usize::try_from(b).unwrap_or(usize::MAX)),
        }
    }

    /// Runs `f` inside this context's thread pool (rayon work started by
    /// `f`, such as the planner's, then uses this context's threads). A
    /// context of one thread runs `f` on the calling thread, its loops one
    /// task after another ([`crate::parallel::serially`]), unless it has
    /// host allocator hooks (its pool's thread is the one that allocates
    /// through them).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) if p.current_num_threads() == 1 && self.host_hooks.is_none() => {
                crate::parallel::serially(f)
            }
            Some(p) => p.install(f),
            None => f(),
        }
    }
}

/// A thread pool whose threads are joined when it is dropped, so that
/// what they hold (thread-local state, memory from the context's host
/// hooks) is freed by then.
pub(crate) struct Pool {
    pool: ManuallyDrop<rayon::ThreadPool>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Runs `op` in the pool (see [`rayon::ThreadPool::install`]).
    ///
    /// rayon's `install` is generic over `op`; it is instantiated here once,
    /// for a `dyn` closure, instead of for every closure of every value and
    /// index type (see [`crate::parallel`]).
    pub(crate) fn install<R: Send>(&self, op: impl FnOnce() -> R + Send) -> R {
        let mut op = Some(op);
        let mut result = None;
        self.install_dyn(&mut || result = Some(op.take().expect("install runs op once")()));
        result.expect("install ran op")
    }

    fn install_dyn(&self, op: &mut (dyn FnMut() + Send)) {
        self.pool.install(op)
    }

    fn current_num_threads(&self) -> usize {
        self.pool.current_num_threads()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // A pool dropped by one of its own threads cannot wait for it.
        let inside = self.pool.current_thread_index().is_some();
        // SAFETY: dropped once, here; the field is not used after.
        unsafe { ManuallyDrop::drop(&mut self.pool) };
        if !inside {
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

/// The size in bytes the environment variable `name` sets (`4096`, `512M`,
/// `1G`), if it is set.
fn env_bytes(name: &str) -> Result<Option<usize>> {
    let Ok(v) = std::env::var(name) else {
        return Ok(None);
    };
    crate::system_memory::parse_bytes(&v)
        .and_then(|b| usize::try_from(b).ok())
        .map(Some)
        .ok_or_else(|| {
            Error::InvalidValue(format!(
                "{name} = {v:?} is not a size in bytes (4096, 512M, 1G)"
            ))
        })
}

/// The current CUDA device (see [`Context::new`]).
fn open_cuda() -> Result<Arc<dyn GpuDevice>> {
    #[cfg(feature = "cuda")]
    {
        Ok(crate::backend::cuda::CudaDevice::current()?)
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(Error::NotSupported(
            "this build of rusparse has no CUDA back end (build with the default feature `cuda`)"
                .into(),
        ))
    }
}

/// The current HIP device (see [`Context::new`]).
fn open_hip() -> Result<Arc<dyn GpuDevice>> {
    #[cfg(feature = "hip")]
    {
        Ok(crate::backend::hip::HipDevice::current()?)
    }
    #[cfg(not(feature = "hip"))]
    {
        Err(Error::NotSupported(
            "this build of rusparse has no HIP back end (build with --features hip)".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A context whose pool includes the calling thread runs products on
    /// it (thread 0 of its pool), and still from other threads (on the
    /// pool's started threads); the thread can join one such pool only.
    /// Run on a thread of its own: the pool's bookkeeping stays with it.
    #[test]
    fn a_pool_with_the_caller_computes_on_the_caller() {
        std::thread::spawn(|| {
            let n = 40;
            let t: Vec<(usize, usize, f64)> = (0..n)
                .flat_map(|i| [(i, i, 2.0), (i, (i * 7 + 3) % n, 1.0)])
                .collect();
            let a =
                crate::CsrMatrix::<f64, i32, i32>::from_triplets(n, n, &t, crate::IndexBase::Zero)
                    .unwrap();
            let expected =
                crate::reference::spgemm(&a.view(), crate::Op::N, &a.view(), crate::Op::N, 1.0)
                    .unwrap();
            let mut ctx = Context::cpu().unwrap();
            for bad in [0, 1, MAX_THREADS + 1] {
                assert!(matches!(
                    ctx.set_num_threads_with_caller(bad),
                    Err(Error::InvalidValue(m)) if m.contains(&format!("not {bad}"))
                ));
            }
            ctx.set_num_threads_with_caller(2).unwrap();
            assert_eq!(ctx.num_threads(), 2);
            let me = std::thread::current().id();
            assert_eq!(
                ctx.run(|| (rayon::current_thread_index(), std::thread::current().id())),
                (Some(0), me)
            );
            let opts = crate::SpgemmOptions::default();
            let c = ctx.spgemm(&a.view(), &a.view(), &opts).unwrap();
            assert_eq!(c.values(), expected.values());
            // From another thread: handed to the started thread.
            let other = ctx.clone();
            let (index, c2) = std::thread::scope(|s| {
                s.spawn(|| {
                    let index = other.run(rayon::current_thread_index);
                    (index, other.spgemm(&a.view(), &a.view(), &opts).unwrap())
                })
                .join()
                .unwrap()
            });
            assert_eq!(index, Some(1));
            assert_eq!(c2.col_indices(), expected.col_indices());
            assert_eq!(c2.values(), expected.values());
            let mut second = Context::cpu().unwrap();
            assert!(matches!(
                second.set_num_threads_with_caller(2),
                Err(Error::InvalidValue(m)) if m.contains("already belongs")
            ));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn thread_counts_are_per_context_and_bounded() {
        let mut a = Context::cpu().unwrap();
        let mut b = Context::cpu().unwrap();
        a.set_num_threads(1).unwrap();
        b.set_num_threads(3).unwrap();
        assert_eq!((a.num_threads(), b.num_threads()), (1, 3));
        assert!(
            matches!(a.set_num_threads(MAX_THREADS + 1), Err(Error::InvalidValue(m)) if m.contains("limit"))
        );
        assert_eq!(a.num_threads(), 1);
        assert_eq!(a.run(crate::parallel::current_num_threads), 1);
        assert_eq!(b.run(crate::parallel::current_num_threads), 3);
        assert_eq!(b.run(rayon::current_num_threads), 3);
        // One thread: the caller's own, its loops serial.
        let caller = std::thread::current().id();
        assert_eq!(a.run(|| std::thread::current().id()), caller);
        assert!(a.run(crate::parallel::is_serial) && !crate::parallel::is_serial());
        assert!(!b.run(crate::parallel::is_serial));
        assert_ne!(b.run(|| std::thread::current().id()), caller);
    }

    #[test]
    #[cfg(not(feature = "hip"))]
    fn hip_is_not_built_in() {
        let e = Context::new(BackendKind::Hip).unwrap_err();
        assert!(
            matches!(&e, Error::NotSupported(m) if m.contains("no HIP back end")),
            "{e}"
        );
    }

    #[test]
    #[cfg(feature = "hip")]
    fn hip_says_why_it_cannot_run_here() {
        // No HIP pipeline yet: NOT_SUPPORTED on every machine, naming the
        // missing runtime, the missing device or the missing pipeline.
        let e = Context::new(BackendKind::Hip).unwrap_err();
        assert!(
            matches!(&e, Error::NotSupported(m)
                if m.contains("could not be loaded") || m.contains("no HIP device")
                    || m.contains("no HIP SpGEMM pipeline")),
            "{e}"
        );
    }

    #[test]
    fn cuda_opens_a_gpu_or_says_what_is_missing() {
        match Context::new(BackendKind::Cuda) {
            Ok(ctx) => {
                assert_eq!(ctx.backend(), BackendKind::Cuda);
                assert!(ctx.gpu_device().is_some());
            }
            Err(Error::NotSupported(m)) => {
                assert!(
                    m.contains("not found")
                        || m.contains("no CUDA back end")
                        || m.contains("failed"),
                    "{m}"
                );
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
}
