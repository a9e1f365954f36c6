//! Host allocator hooks of the C ABI (`rusparseSetAllocator`).
//!
//! A library cannot route `Vec`'s memory anywhere but through the global
//! allocator, so the C library (built with the cargo feature
//! `c-allocator-hooks`, as CMake builds it) installs [`Dispatch`] as its
//! `#[global_allocator]`. Each call takes memory from the hooks that
//! apply to the calling thread: those of the handle whose C ABI call it
//! runs ([`HooksGuard`], entered when a call claims a handle) and, on the
//! worker threads of that handle's pool, the handle's hooks for the life
//! of the thread ([`enter_for_thread`], the pool's start handler). Where
//! none apply, the memory is [`System`]'s.
//!
//! Every block carries a header just before the pointer it returns: the
//! hooks that made it (null: [`System`]) and where the block starts. So a
//! block is given back to the allocator that made it, from any thread and
//! whatever hooks apply there. Hooks are registered once and leaked
//! ([`register`]), so a header's pointer stays valid for the life of the
//! process.
//!
//! Without the feature, nothing here is installed: a Rust program's own
//! `#[global_allocator]` is its host allocator, and `rusparseSetAllocator`
//! refuses host hooks.

// Without the feature the dispatcher is only unit-tested.
#![cfg_attr(not(feature = "c-allocator-hooks"), allow(dead_code))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Mutex;

/// `void* alloc(size_t bytes, void* userCtx)`: NULL when it cannot.
pub type HostAllocFn = unsafe extern "C" fn(bytes: usize, user_ctx: *mut c_void) -> *mut c_void;
/// `void free(void* ptr, size_t bytes, void* userCtx)`.
pub type HostFreeFn = unsafe extern "C" fn(ptr: *mut c_void, bytes: usize, user_ctx: *mut c_void);

/// A pair of host hooks and the pointer they are called with.
#[derive(Debug, Clone, Copy)]
pub struct HostHooks {
    /// Allocates; NULL when it cannot.
    pub alloc: HostAllocFn,
    /// Frees what `alloc` gave, with the bytes asked for.
    pub free: HostFreeFn,
    /// Passed to both.
    pub user_ctx: *mut c_void,
}

impl PartialEq for HostHooks {
    /// The same three addresses (a registration is reused for them).
    fn eq(&self, other: &Self) -> bool {
        (self.alloc as usize, self.free as usize, self.user_ctx)
            == (other.alloc as usize, other.free as usize, other.user_ctx)
    }
}

// SAFETY: the caller of rusparseSetAllocator promises hooks that may be
// called from any thread (the handle's worker threads call them) with
// their context pointer.
unsafe impl Send for HostHooks {}
// SAFETY: as for Send; the struct is never changed after registration.
unsafe impl Sync for HostHooks {}

/// Every pair registered so far, each leaked once.
static REGISTRY: Mutex<Vec<&'static HostHooks>> = Mutex::new(Vec::new());

/// The registered copy of `hooks`: the same `'static` reference for the
/// same three pointers, leaked the first time, so headers may point at it
/// for the rest of the process. The registry's own memory is [`System`]'s.
pub fn register(hooks: HostHooks) -> &'static HostHooks {
    let _system = process_wide();
    let mut all = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&h) = all.iter().find(|&&h| *h == hooks) {
        return h;
    }
    let h: &'static HostHooks = Box::leak(Box::new(hooks));
    all.push(h);
    h
}

thread_local! {
    /// The hooks that apply to this thread's allocations now (null:
    /// [`System`]). Const-initialised with no destructor, so it is usable
    /// inside the allocator at any point of a thread's life.
    static CURRENT: Cell<*const HostHooks> = const { Cell::new(std::ptr::null()) };
}

fn current() -> *const HostHooks {
    CURRENT.try_with(Cell::get).unwrap_or(std::ptr::null())
}

fn set_current(hooks: *const HostHooks) -> *const HostHooks {
    CURRENT
        .try_with(|c| c.replace(hooks))
        .unwrap_or(std::ptr::null())
}

/// Makes `hooks` (`None`: [`System`]) apply to this thread's allocations
/// until dropped, then restores what applied before.
#[must_use = "the hooks apply only while the guard lives"]
pub struct HooksGuard {
    previous: *const HostHooks,
}

impl HooksGuard {
    /// See [`HooksGuard`].
    pub fn enter(hooks: Option<&'static HostHooks>) -> HooksGuard {
        HooksGuard {
            previous: set_current(hooks.map_or(std::ptr::null(), std::ptr::from_ref)),
        }
    }
}

impl Drop for HooksGuard {
    fn drop(&mut self) {
        set_current(self.previous);
    }
}

/// A guard under which this thread allocates from [`System`], for
/// process-wide state that outlives any handle (the GPU runtimes loaded,
/// devices opened, kernels compiled): hooks would get memory back only at
/// exit, if ever.
pub fn process_wide() -> HooksGuard {
    HooksGuard::enter(None)
}

/// Makes `hooks` apply to this thread's allocations from now on (a pool's
/// worker threads, from their start handler).
pub fn enter_for_thread(hooks: &'static HostHooks) {
    // The thread's record in crossbeam's epoch collector (which rayon's
    // work stealing uses) outlives the thread: made now, it is System's.
    #[cfg(feature = "c-allocator-hooks")]
    drop(crossbeam_epoch::pin());
    set_current(hooks);
}

/// Back to [`System`] for what a pool's worker thread allocates as it
/// exits (from its exit handler): its thread-local state hands memory to
/// process-wide structures that outlive the pool.
pub fn leave_for_thread() {
    set_current(std::ptr::null());
}

/// What sits just before every pointer [`Dispatch`] returns.
#[repr(C)]
struct Header {
    /// The hooks that made the block; null for [`System`].
    hooks: *const HostHooks,
    /// Where the block starts.
    base: *mut u8,
}

const HEADER: usize = std::mem::size_of::<Header>();
/// The alignment every block gets at least (that of the header too).
const MIN_ALIGN: usize = 16;
const _: () = assert!(HEADER <= MIN_ALIGN);

/// The offset of the pointer returned in a [`System`] block, and the
/// block's layout.
fn system_layout(layout: Layout) -> Option<(usize, Layout)> {
    let align = layout.align().max(MIN_ALIGN);
    let size = layout.size().checked_add(align)?;
    Some((align, Layout::from_size_align(size, align).ok()?))
}

/// The bytes asked of hooks for `layout`: the size, room for the header
/// and for aligning by hand whatever address the hook returns.
fn hooked_bytes(layout: Layout) -> Option<usize> {
    layout
        .size()
        .checked_add(layout.align().max(MIN_ALIGN))?
        .checked_add(MIN_ALIGN - 1)
}

/// # Safety
/// `ptr` came from [`Dispatch`].
unsafe fn header<'a>(ptr: *mut u8) -> &'a mut Header {
    // SAFETY: every block has its header just before the pointer, aligned
    // (the pointer is at least 16-aligned).
    unsafe { &mut *ptr.sub(HEADER).cast::<Header>() }
}

/// The global allocator of the C library (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct Dispatch;

impl Dispatch {
    /// # Safety
    /// `layout` has a non-zero size; `hooks` is null or registered.
    unsafe fn allocate(layout: Layout, hooks: *const HostHooks, zeroed: bool) -> *mut u8 {
        let (base, ptr) = if hooks.is_null() {
            let Some((offset, outer)) = system_layout(layout) else {
                return std::ptr::null_mut();
            };
            // SAFETY: `outer` is at least 16 bytes.
            let base = unsafe {
                if zeroed {
                    System.alloc_zeroed(outer)
                } else {
                    System.alloc(outer)
                }
            };
            if base.is_null() {
                return base;
            }
            // SAFETY: `offset + size` bytes are the block's.
            (base, unsafe { base.add(offset) })
        } else {
            let Some(bytes) = hooked_bytes(layout) else {
                return std::ptr::null_mut();
            };
            // SAFETY: registered hooks live forever; the caller of
            // rusparseSetAllocator vouches for them.
            let base = unsafe { ((*hooks).alloc)(bytes, (*hooks).user_ctx) }.cast::<u8>();
            if base.is_null() {
                return base;
            }
            let align = layout.align().max(MIN_ALIGN);
            let start = base as usize + HEADER;
            let offset = start.next_multiple_of(align) - base as usize;
            // SAFETY: offset <= HEADER + align - 1, so offset + size fits
            // the bytes asked for.
            let ptr = unsafe { base.add(offset) };
            if zeroed {
                // SAFETY: the block's `size` bytes from `ptr`.
                unsafe { ptr.write_bytes(0, layout.size()) };
            }
            (base, ptr)
        };
        // SAFETY: `ptr - base >= HEADER`, so the header lies in the block.
        unsafe {
            ptr.sub(HEADER)
                .cast::<Header>()
                .write(Header { hooks, base })
        };
        ptr
    }
}

// SAFETY: every block is at least `layout.size()` bytes at an address
// aligned to `layout.align()`, made by System or by hooks the caller
// vouches for, and given back to the one that made it (its header says
// which) with the size it was made with (recomputed from the same layout).
unsafe impl GlobalAlloc for Dispatch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: GlobalAlloc's contract (non-zero size).
        unsafe { Dispatch::allocate(layout, current(), false) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe { Dispatch::allocate(layout, current(), true) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`.
        let Header { hooks, base } = *unsafe { header(ptr) };
        if hooks.is_null() {
            if let Some((_, outer)) = system_layout(layout) {
                // SAFETY: `base` came from System with `outer`.
                unsafe { System.dealloc(base, outer) };
            }
        } else if let Some(bytes) = hooked_bytes(layout) {
            // SAFETY: `base` came from these hooks with `bytes`.
            unsafe { ((*hooks).free)(base.cast(), bytes, (*hooks).user_ctx) };
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`.
        let old = unsafe { header(ptr) };
        let hooks = current();
        if old.hooks.is_null() && hooks.is_null() {
            // Both System: grow in place where System can. The pointer
            // keeps its offset from the block's start, so only the
            // header's record of that start changes.
            let (Some((offset, outer)), Some(new_outer)) = (
                system_layout(layout),
                new_size.checked_add(layout.align().max(MIN_ALIGN)),
            ) else {
                return std::ptr::null_mut();
            };
            // SAFETY: `old.base` came from System with `outer`; the new size
            // is non-zero and, rounded to the alignment, cannot overflow
            // (`new_size` is a valid layout size, plus one alignment).
            let base = unsafe { System.realloc(old.base, outer, new_outer) };
            if base.is_null() {
                return base;
            }
            // SAFETY: as in `allocate`.
            let ptr = unsafe { base.add(offset) };
            // SAFETY: the header moved with the block.
            unsafe { header(ptr) }.base = base;
            return ptr;
        }
        // Across allocators: the new block from the hooks that apply now,
        // the old one back to its own.
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: non-zero size (GlobalAlloc's contract).
        let new = unsafe { Dispatch::allocate(new_layout, hooks, false) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least the bytes copied.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

/// Routes the C library's Rust allocations (see the module docs).
#[cfg(feature = "c-allocator-hooks")]
#[global_allocator]
static GLOBAL: Dispatch = Dispatch;

/// Whether this build routes host allocations to hooks.
pub const ROUTES_HOST_ALLOCATIONS: bool = cfg!(feature = "c-allocator-hooks");

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

    // Hooks over System that count per context: [calls, live bytes].
    struct Counts {
        calls: AtomicUsize,
        live: AtomicIsize,
    }

    unsafe extern "C" fn counted_alloc(bytes: usize, ctx: *mut c_void) -> *mut c_void {
        // SAFETY: the tests pass a live `Counts`.
        let c = unsafe { &*ctx.cast::<Counts>() };
        c.calls.fetch_add(1, Ordering::SeqCst);
        c.live.fetch_add(bytes as isize, Ordering::SeqCst);
        // Deliberately only 8-aligned: the dispatcher aligns by hand.
        // SAFETY: non-zero size.
        let p = unsafe { System.alloc(Layout::from_size_align(bytes + 8, 8).unwrap()) };
        // SAFETY: 8 of the bytes + 8 allocated.
        unsafe { p.add(8) }.cast()
    }

    unsafe extern "C" fn counted_free(ptr: *mut c_void, bytes: usize, ctx: *mut c_void) {
        // SAFETY: as `counted_alloc`.
        let c = unsafe { &*ctx.cast::<Counts>() };
        c.live.fetch_sub(bytes as isize, Ordering::SeqCst);
        // SAFETY: made by `counted_alloc` with `bytes`.
        unsafe {
            System.dealloc(
                ptr.cast::<u8>().sub(8),
                Layout::from_size_align(bytes + 8, 8).unwrap(),
            )
        };
    }

    fn hooks() -> (&'static Counts, &'static HostHooks) {
        let counts: &'static Counts = Box::leak(Box::new(Counts {
            calls: AtomicUsize::new(0),
            live: AtomicIsize::new(0),
        }));
        let h = register(HostHooks {
            alloc: counted_alloc,
            free: counted_free,
            user_ctx: std::ptr::from_ref(counts).cast_mut().cast(),
        });
        (counts, h)
    }

    #[test]
    fn registration_is_deduplicated() {
        let (counts, h) = hooks();
        let again = register(*h);
        assert!(std::ptr::eq(h, again));
        assert_eq!(counts.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn blocks_go_back_to_the_allocator_that_made_them_at_every_alignment() {
        let (counts, h) = hooks();
        for align in [1, 8, 16, 32, 64, 4096] {
            for size in [1, 15, 16, 100, 5000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; each block freed once with its layout.
                unsafe {
                    let hooked = {
                        let _g = HooksGuard::enter(Some(h));
                        Dispatch.alloc_zeroed(layout)
                    };
                    let system = Dispatch.alloc(layout);
                    for p in [hooked, system] {
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align.max(16), 0, "align {align}");
                        p.write_bytes(0x5A, size);
                    }
                    assert!(counts.live.load(Ordering::SeqCst) > size as isize);
                    // Freed with the hooks on for the System block and off
                    // for the hooked one: each goes back where it came from.
                    Dispatch.dealloc(hooked, layout);
                    {
                        let _g = HooksGuard::enter(Some(h));
                        Dispatch.dealloc(system, layout);
                    }
                    assert_eq!(counts.live.load(Ordering::SeqCst), 0, "align {align}");
                }
            }
        }
        assert_eq!(counts.calls.load(Ordering::SeqCst), 30);
    }

    #[test]
    fn realloc_moves_blocks_across_allocators_and_keeps_their_bytes() {
        let (counts, h) = hooks();
        let (other_counts, other) = hooks();
        let layout = Layout::from_size_align(40, 64).unwrap();
        // SAFETY: each block is used within its size and freed once.
        unsafe {
            // System -> System, in place or not: bytes kept.
            let mut p = Dispatch.alloc(layout);
            for i in 0..40 {
                *p.add(i) = i as u8;
            }
            p = Dispatch.realloc(p, layout, 4000);
            assert_eq!(p as usize % 64, 0);
            let grown = Layout::from_size_align(4000, 64).unwrap();
            // System -> hooks `h`.
            p = {
                let _g = HooksGuard::enter(Some(h));
                Dispatch.realloc(p, grown, 100)
            };
            let small = Layout::from_size_align(100, 64).unwrap();
            assert!(counts.live.load(Ordering::SeqCst) >= 100);
            // `h` -> `other`: `h` gets its block back.
            p = {
                let _g = HooksGuard::enter(Some(other));
                Dispatch.realloc(p, small, 200)
            };
            assert_eq!(counts.live.load(Ordering::SeqCst), 0);
            assert!(other_counts.live.load(Ordering::SeqCst) >= 200);
            assert_eq!(p as usize % 64, 0);
            assert!((0..40).all(|i| *p.add(i) == i as u8));
            // `other` -> System: freed on another thread, with no hooks.
            let addr = p as usize;
            let q = std::thread::spawn(move || {
                Dispatch.realloc(
                    addr as *mut u8,
                    Layout::from_size_align(200, 64).unwrap(),
                    50,
                ) as usize
            })
            .join()
            .unwrap() as *mut u8;
            assert_eq!(other_counts.live.load(Ordering::SeqCst), 0);
            assert!((0..40).all(|i| *q.add(i) == i as u8));
            Dispatch.dealloc(q, Layout::from_size_align(50, 64).unwrap());
        }
    }

    #[test]
    fn a_refusing_hook_gives_null_and_guards_nest() {
        unsafe extern "C" fn refuse(_: usize, _: *mut c_void) -> *mut c_void {
            std::ptr::null_mut()
        }
        unsafe extern "C" fn never(_: *mut c_void, _: usize, _: *mut c_void) {
            unreachable!("nothing was allocated")
        }
        let no = register(HostHooks {
            alloc: refuse,
            free: never,
            user_ctx: std::ptr::null_mut(),
        });
        let (_, h) = hooks();
        let layout = Layout::new::<[u64; 4]>();
        let outer = HooksGuard::enter(Some(h));
        {
            let _inner = HooksGuard::enter(Some(no));
            // SAFETY: non-zero size.
            assert!(unsafe { Dispatch.alloc(layout) }.is_null());
        }
        assert_eq!(current(), std::ptr::from_ref(h));
        drop(outer);
        assert!(current().is_null());
    }
}
