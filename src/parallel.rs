//! Parallel loops whose rayon scheduling code is compiled once.
//!
//! rayon's loop machinery (its jobs, splitting and `join`) is generic over
//! the closure and the iterator of each loop. A loop inside a function that
//! is generic over the value and index types was therefore compiled again
//! for each of their sixteen combinations, and again in every crate that
//! instantiates them (the test binaries, the benchmark): that machinery was
//! about a third of the library's LLVM IR, and of the time `cargo test`
//! spends compiling it. Here it is instantiated for one closure type,
//! `&dyn Fn(usize)`, and the typed work is reached through it: one dynamic
//! call per task (a chunk of rows, a block of entries), never per row.
//!
//! The loops run in the current rayon pool (a [`crate::Context`]'s inside
//! [`crate::Context::run`]), or one after another on the calling thread
//! inside [`serially`] (a context of one thread). Results come back in
//! index order; of several errors, the one of the lowest index among the
//! tasks that ran is reported.

use std::cell::Cell;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use crate::Result;

thread_local! {
    /// Whether this thread is inside [`serially`].
    static SERIAL: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on the calling thread with this module's loops serial inside
/// it (and [`current_num_threads`] 1): how a context of one thread runs its
/// work. Handing it to the pool's one thread instead put the caller to
/// sleep and woke that thread for every phase, two context switches that
/// were about half the time of a small product (1138_bus squared, one
/// thread: 240 us, of which 50 us was the products).
pub(crate) fn serially<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the flag back as it was, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SERIAL.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SERIAL.with(|s| s.replace(true)));
    f()
}

/// Whether the calling thread is inside [`serially`].
pub(crate) fn is_serial() -> bool {
    SERIAL.with(Cell::get)
}

/// The threads this module's loops run on here: 1 inside [`serially`],
/// else the current rayon pool's.
pub(crate) fn current_num_threads() -> usize {
    if is_serial() {
        1
    } else {
        rayon::current_num_threads()
    }
}

/// Runs `task(k)` for each `k` in `0..n`, in parallel (in order inside
/// [`serially`]).
fn for_each_index(n: usize, task: &(dyn Fn(usize) + Sync)) {
    use rayon::prelude::*;
    if is_serial() {
        (0..n).for_each(task);
        return;
    }
    (0..n).into_par_iter().for_each(task);
}

/// `f(k)` for each `k` in `0..n`, computed in parallel, in index order.
pub(crate) fn map_indices<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let slots: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    for_each_index(n, &|k| {
        let r = f(k);
        *slots[k].lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .expect("every index ran")
        })
        .collect()
}

/// `f(range)` for each block `range` of `block` consecutive indices of
/// `0..n` (the last one shorter), computed in parallel, in order.
pub(crate) fn map_blocks<R: Send>(
    n: usize,
    block: usize,
    f: impl Fn(Range<usize>) -> R + Sync,
) -> Vec<R> {
    map_indices(n.div_ceil(block), |k| f(k * block..n.min((k + 1) * block)))
}

/// `f(piece)` for each of `pieces` (say, the mutable parts of an output
/// that belong to each chunk of rows), in parallel, in order.
pub(crate) fn map_pieces<P: Send, R: Send>(pieces: Vec<P>, f: impl Fn(P) -> R + Sync) -> Vec<R> {
    let slots: Vec<Mutex<Option<P>>> = pieces.into_iter().map(|p| Mutex::new(Some(p))).collect();
    map_indices(slots.len(), |k| {
        let piece = slots[k]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        f(piece.expect("each piece is taken once"))
    })
}

/// [`map_pieces`] for work that can fail. Once a piece has failed, pieces
/// not yet started are skipped; the error reported is the first, in order,
/// of the pieces that ran.
pub(crate) fn try_map_pieces<P: Send, R: Send>(
    pieces: Vec<P>,
    f: impl Fn(P) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let failed = std::sync::atomic::AtomicBool::new(false);
    let results = map_pieces(pieces, |p| {
        if failed.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let r = f(p);
        if r.is_err() {
            failed.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Some(r)
    });
    // A skipped piece comes after a failed one has started, but may come
    // before it in order: report the first error, whatever its place.
    let mut out = Vec::with_capacity(results.len());
    let mut skipped = false;
    for r in results {
        match r {
            Some(Ok(x)) => out.push(x),
            Some(Err(e)) => return Err(e),
            None => skipped = true,
        }
    }
    assert!(!skipped, "a piece was skipped although none failed");
    Ok(out)
}

/// [`try_map_pieces`] for work that returns nothing.
pub(crate) fn try_for_each_piece<P: Send>(
    pieces: Vec<P>,
    f: impl Fn(P) -> Result<()> + Sync,
) -> Result<()> {
    try_map_pieces(pieces, f).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn results_come_back_in_order() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        pool.install(|| {
            assert_eq!(
                map_indices(1000, |k| k * k),
                (0..1000).map(|k| k * k).collect::<Vec<_>>()
            );
            assert!(map_indices(0, |k| k).is_empty());
            assert_eq!(map_blocks(10, 4, |r| r), vec![0..4, 4..8, 8..10]);
            assert_eq!(map_blocks(8, 4, |r| r), vec![0..4, 4..8]);
            assert!(map_blocks(0, 4, |r| r).is_empty());
            let mut data = vec![0usize; 100];
            let pieces: Vec<&mut [usize]> = data.chunks_mut(9).collect();
            let lens = map_pieces(pieces, |p| {
                p.iter_mut().for_each(|x| *x += 1);
                p.len()
            });
            assert_eq!(lens.iter().sum::<usize>(), 100);
            assert!(data.iter().all(|&x| x == 1));
        });
    }

    /// Inside `serially` the loops run on the calling thread, in order,
    /// and the flag is put back afterwards, also after a panic.
    #[test]
    fn serial_loops_run_on_the_caller_in_order() {
        let caller = std::thread::current().id();
        let order = Mutex::new(Vec::new());
        let threads = serially(|| {
            map_indices(100, |k| {
                order.lock().unwrap().push(k);
                assert_eq!(std::thread::current().id(), caller);
            });
            current_num_threads()
        });
        assert_eq!(threads, 1);
        assert_eq!(*order.lock().unwrap(), (0..100).collect::<Vec<_>>());
        assert!(!is_serial());
        let r = std::panic::catch_unwind(|| serially(|| panic!("inside")));
        assert!(r.is_err());
        assert!(!is_serial());
        // Nested: the inner call leaves the outer one serial.
        serially(|| {
            serially(|| ());
            assert!(is_serial());
        });
        assert!(!is_serial());
    }

    #[test]
    fn the_first_error_in_order_is_reported() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        pool.install(|| {
            let r = try_map_pieces((0..64).collect(), |k: usize| {
                if k % 10 == 3 {
                    Err(Error::InvalidValue(format!("piece {k}")))
                } else {
                    Ok(k)
                }
            });
            // Piece 3 may be skipped when a later one failed first, but
            // then that later error is the one reported; never Ok.
            assert!(matches!(r, Err(Error::InvalidValue(m)) if m.starts_with("piece ")));
            assert_eq!(
                try_map_pieces((0..64).collect(), |k: usize| Ok::<_, Error>(2 * k)).unwrap(),
                (0..64).map(|k| 2 * k).collect::<Vec<_>>()
            );
            assert!(try_for_each_piece(vec![1, 2], |_| Ok(())).is_ok());
        });
    }
}
