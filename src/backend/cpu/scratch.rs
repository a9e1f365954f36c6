//! Scratch memory kept between products.
//!
//! The CPU kernels work in per-chunk scratch buffers: a dense accumulator
//! and bit map as wide as op(B), column stamps, hash tables, merge
//! buffers. Allocated afresh for every product, these cost page faults
//! (the kernel zeroes every new page it hands out) and, for large ones, an
//! `mmap` / `munmap` pair per chunk: on the project's 2-core VM a fresh page
//! costs 1.4-4 µs, so a dense accumulator over a million columns adds
//! milliseconds to each phase. A [`ScratchPool`], one per
//! [`crate::Context`] (so one per C handle), keeps the buffers of finished
//! chunks and hands them to the next chunk, phase or product that fits in
//! them.
//!
//! Rules:
//! - A kernel takes a buffer with [`ScratchPool::take`] (or makes one when
//!   none fits) and gives it back with [`ScratchPool::give`] only when it
//!   finished without error, having restored the buffer's invariant (bit
//!   maps and sums zero, hash tables empty, stamps older than their tag).
//!   A kernel that fails drops its buffer, so a half-written buffer is
//!   never reused.
//! - The pool holds at most [`ScratchPool::limit`] bytes (default
//!   [`DEFAULT_SCRATCH_LIMIT`]); giving back more evicts the oldest
//!   buffers first, and a buffer larger than the limit is freed at once.
//! - [`ScratchPool::trim`] frees everything (`Context::trim_scratch`,
//!   `rusparseTrimScratch`); dropping the last clone of the context
//!   (`rusparseDestroy`) frees it too.

use std::any::Any;
use std::sync::Mutex;

/// Bytes a context keeps between products unless told otherwise
/// ([`crate::Context::set_scratch_limit`]): enough for the dense
/// accumulators of a few million columns on every thread of a small
/// machine, small beside the C of such a product.
pub const DEFAULT_SCRATCH_LIMIT: usize = 256 << 20;

/// A buffer the pool can keep: its size, for the limit.
pub(crate) trait Scratch: Any + Send {
    /// Bytes of memory the buffer holds.
    fn bytes(&self) -> usize;

    /// Whether the buffer is a product's output kept for the next product
    /// of the same kind (BRMerge-Upper's temporary C), not a workspace:
    /// such buffers go at [`ScratchPool::discard_outputs`].
    fn is_output(&self) -> bool {
        false
    }
}

struct Kept {
    item: Box<dyn Any + Send>,
    bytes: usize,
    output: bool,
}

struct State {
    /// Oldest first.
    kept: Vec<Kept>,
    bytes: usize,
    limit: usize,
    /// A product's memory budget leaves the pool at most this much room
    /// ([`ScratchPool::set_room`]); `usize::MAX` without a budget.
    room: usize,
}

impl State {
    /// The most bytes kept now: the limit, or less under a budget.
    fn keeps_at_most(&self) -> usize {
        self.limit.min(self.room)
    }

    /// Frees the oldest buffers until at most `keeps_at_most` bytes are kept.
    fn evict(&mut self) {
        while self.bytes > self.keeps_at_most() {
            let old = self.kept.remove(0);
            self.bytes -= old.bytes;
        }
    }
}

/// Scratch buffers kept between products (see the module documentation).
pub struct ScratchPool {
    state: Mutex<State>,
}

impl std::fmt::Debug for ScratchPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScratchPool")
            .field("bytes", &self.bytes())
            .field("limit", &self.limit())
            .finish()
    }
}

impl Default for ScratchPool {
    fn default() -> Self {
        ScratchPool::new(DEFAULT_SCRATCH_LIMIT)
    }
}

impl ScratchPool {
    /// An empty pool that keeps at most `limit` bytes (0: keeps nothing).
    pub fn new(limit: usize) -> Self {
        ScratchPool {
            state: Mutex::new(State {
                kept: Vec::new(),
                bytes: 0,
                limit,
                room: usize::MAX,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while the lock is held cannot leave the list inconsistent
        // (every change is one push, remove or clear), so a poisoned lock
        // is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes and returns the most recently kept buffer of type `S` for
    /// which `fits` holds, if any.
    pub(crate) fn take<S: Scratch>(&self, fits: impl Fn(&S) -> bool) -> Option<S> {
        let mut st = self.lock();
        let at = st
            .kept
            .iter()
            .rposition(|k| k.item.downcast_ref::<S>().is_some_and(&fits))?;
        let k = st.kept.remove(at);
        st.bytes -= k.bytes;
        k.item.downcast::<S>().ok().map(|b| *b)
    }

    /// [`ScratchPool::take`], or a new buffer from `make` when none fits.
    ///
    /// # Errors
    /// Those of `make`.
    pub(crate) fn take_or_make<S: Scratch, E>(
        &self,
        fits: impl Fn(&S) -> bool,
        make: impl FnOnce() -> Result<S, E>,
    ) -> Result<S, E> {
        self.take(fits).map_or_else(make, Ok)
    }

    /// Keeps `item` for a later [`ScratchPool::take`], evicting the oldest
    /// buffers while the pool would exceed its limit; an item larger than
    /// the limit is dropped.
    pub(crate) fn give<S: Scratch>(&self, item: S) {
        let (bytes, output) = (item.bytes(), item.is_output());
        let mut st = self.lock();
        let most = st.keeps_at_most();
        if bytes > most {
            return;
        }
        while st.bytes + bytes > most {
            let old = st.kept.remove(0);
            st.bytes -= old.bytes;
        }
        st.bytes += bytes;
        st.kept.push(Kept {
            item: Box::new(item),
            bytes,
            output,
        });
    }

    /// Bytes currently kept.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The most bytes the pool keeps.
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    /// Sets the most bytes the pool keeps, freeing the oldest buffers above
    /// it (0: keep nothing).
    pub fn set_limit(&self, limit: usize) {
        let mut st = self.lock();
        st.limit = limit;
        st.evict();
    }

    /// Under a memory budget, the room the running phase leaves the pool
    /// (`None`: no budget, only the limit applies): kept buffers above it
    /// are freed now, and until the next call the pool keeps no more.
    pub(crate) fn set_room(&self, room: Option<usize>) {
        let mut st = self.lock();
        st.room = room.unwrap_or(usize::MAX);
        st.evict();
    }

    /// Frees every kept output ([`Scratch::is_output`]): a product that
    /// will not fill it should find its memory with the allocator, not
    /// held here.
    pub(crate) fn discard_outputs(&self) {
        let mut st = self.lock();
        let mut freed = 0;
        st.kept.retain(|k| {
            freed += if k.output { k.bytes } else { 0 };
            !k.output
        });
        st.bytes -= freed;
    }

    /// Frees every kept buffer; returns the bytes freed.
    pub fn trim(&self) -> usize {
        let mut st = self.lock();
        let freed = st.bytes;
        st.kept.clear();
        st.bytes = 0;
        freed
    }
}

/// `len` elements of `X`, in bytes.
pub(crate) fn bytes_of<X>(v: &Vec<X>) -> usize {
    v.capacity() * std::mem::size_of::<X>()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Buf(Vec<u8>);
    impl Scratch for Buf {
        fn bytes(&self) -> usize {
            self.0.len()
        }
    }
    struct Other(usize);
    impl Scratch for Other {
        fn bytes(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn takes_only_a_fitting_buffer_of_the_asked_type() {
        let pool = ScratchPool::new(1000);
        pool.give(Buf(vec![1; 100]));
        pool.give(Other(50));
        assert_eq!(pool.bytes(), 150);
        assert!(pool.take(|b: &Buf| b.0.len() >= 200).is_none());
        let b = pool.take(|b: &Buf| b.0.len() >= 100).expect("kept");
        assert_eq!(b.0.len(), 100);
        assert_eq!(pool.bytes(), 50);
        assert!(pool.take(|_: &Buf| true).is_none());
        assert_eq!(pool.take(|_: &Other| true).map(|o| o.0), Some(50));
        assert_eq!(pool.bytes(), 0);
    }

    #[test]
    fn stays_within_its_limit_and_trims() {
        let pool = ScratchPool::new(250);
        pool.give(Buf(vec![0; 100]));
        pool.give(Buf(vec![1; 100]));
        // A third evicts the oldest.
        pool.give(Buf(vec![2; 100]));
        assert_eq!(pool.bytes(), 200);
        let newest = pool.take(|_: &Buf| true).unwrap();
        assert_eq!(newest.0[0], 2);
        pool.give(newest);
        // Larger than the limit: not kept.
        pool.give(Buf(vec![3; 300]));
        assert_eq!(pool.bytes(), 200);
        pool.set_limit(150);
        assert_eq!(pool.bytes(), 100);
        assert_eq!(pool.trim(), 100);
        assert_eq!(pool.bytes(), 0);
        pool.set_limit(0);
        pool.give(Buf(vec![4; 1]));
        assert_eq!(pool.bytes(), 0);
    }

    #[test]
    fn a_budget_room_caps_the_pool_below_its_limit() {
        let pool = ScratchPool::new(1000);
        pool.give(Buf(vec![0; 300]));
        pool.give(Buf(vec![1; 300]));
        pool.set_room(Some(400));
        assert_eq!(pool.bytes(), 300);
        // Giving back more evicts down to the room, not the limit.
        pool.give(Buf(vec![2; 300]));
        assert_eq!(pool.bytes(), 300);
        pool.give(Buf(vec![3; 500]));
        assert_eq!(pool.bytes(), 300);
        pool.set_room(None);
        pool.give(Buf(vec![4; 500]));
        assert_eq!(pool.bytes(), 800);
    }
}
