//! A counting global allocator, to measure the memory a product really
//! takes (the benchmark's "peak extra" column, the memory-budget tests).
//!
//! rusparse never installs it; a program that wants the figures does:
//!
//! ```
//! #[global_allocator]
//! static METER: rusparse::memory_meter::CountingAllocator =
//!     rusparse::memory_meter::CountingAllocator;
//!
//! rusparse::memory_meter::reset_peak();
//! let before = rusparse::memory_meter::current_bytes();
//! let v = vec![0u8; 1 << 20];
//! assert!(rusparse::memory_meter::peak_bytes() - before >= 1 << 20);
//! # drop(v);
//! ```
//!
//! The counters are process-wide: every thread's allocations count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// A `#[global_allocator]` wrapper around [`System`] that tracks the bytes
/// currently allocated and their peak.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAllocator;

impl CountingAllocator {
    fn grew(by: usize) {
        let now = CURRENT.fetch_add(by, Relaxed) + by;
        PEAK.fetch_max(now, Relaxed);
    }
    fn shrank(by: usize) {
        CURRENT.fetch_sub(by, Relaxed);
    }
}

// SAFETY: every call forwards to `System` with the same arguments; the
// counters only observe sizes.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            Self::grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            Self::grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) };
        Self::shrank(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                Self::grew(new_size - layout.size());
            } else {
                Self::shrank(layout.size() - new_size);
            }
        }
        p
    }
}

/// Bytes allocated now (through the counting allocator, when installed).
pub fn current_bytes() -> usize {
    CURRENT.load(Relaxed)
}

/// The peak of [`current_bytes`] since the last [`reset_peak`].
pub fn peak_bytes() -> usize {
    PEAK.load(Relaxed)
}

/// Starts a new peak at the current level.
pub fn reset_peak() {
    PEAK.store(CURRENT.load(Relaxed), Relaxed);
}
