//! A cheap, deterministic hash of a CSR pattern, so that a phase run after
//! the plan was made can refuse an input whose pattern changed (the reuse
//! API allows new values, never a new pattern).

use crate::parallel::map_blocks;
use crate::types::{Index, Scalar};

/// Elements hashed per parallel task; fixed so the result does not depend
/// on the thread count.
const BLOCK: usize = 1 << 16;

#[inline]
fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

/// Hashes a block in four independent lanes, so the multiply chains
/// overlap, then folds the lanes in order into a fifth accumulator (so equal
/// lanes do not cancel and the lane order matters).
fn hash_block<X>(block: &[X], seed: u64, key: impl Fn(&X) -> u64) -> u64 {
    let mut lanes = [
        seed,
        seed.wrapping_add(0x243F_6A88_85A3_08D3),
        seed.wrapping_add(0x1319_8A2E_0370_7344),
        seed.wrapping_add(0xA409_3822_299F_31D0),
    ];
    let tail = if std::mem::size_of::<X>() <= 4 {
        // 32-bit keys (indices of 32 bits) go two to a mix: the low 32
        // bits of a key tell it from any other key of its type, and half
        // the multiplies make the hash about twice as fast.
        let mut octets = block.chunks_exact(8);
        for o in &mut octets {
            for (lane, pair) in lanes.iter_mut().zip(o.chunks_exact(2)) {
                let word = (key(&pair[0]) & 0xFFFF_FFFF) | (key(&pair[1]) << 32);
                *lane = mix(*lane, word);
            }
        }
        octets.remainder()
    } else {
        let mut quads = block.chunks_exact(4);
        for q in &mut quads {
            for (lane, x) in lanes.iter_mut().zip(q) {
                *lane = mix(*lane, key(x));
            }
        }
        quads.remainder()
    };
    let tail = tail
        .iter()
        .fold(seed ^ 0xA076_1D64_78BD_642F, |h, x| mix(h, key(x)));
    lanes.iter().fold(tail, |h, &l| mix(h, l))
}

fn hash_slice<X: Sync>(xs: &[X], seed: u64, key: impl Fn(&X) -> u64 + Sync + Copy) -> u64 {
    hash_slice_finding(xs, seed, key, |_, _| None).0
}

/// [`hash_slice`], running `find(start, block)` on each block right after
/// hashing it, while the block is still in cache (`start`: the block's
/// first position in `xs`). Returns the hash and the smallest position any
/// `find` reported: one pass over memory for a hash and a check.
fn hash_slice_finding<X: Sync>(
    xs: &[X],
    seed: u64,
    key: impl Fn(&X) -> u64 + Sync + Copy,
    find: impl Fn(usize, &[X]) -> Option<usize> + Sync,
) -> (u64, Option<usize>) {
    let blocks = map_blocks(xs.len(), BLOCK, |r| {
        let block = &xs[r.clone()];
        (hash_block(block, seed, key), find(r.start, block))
    });
    let first = blocks.iter().filter_map(|&(_, f)| f).min();
    let hash = blocks
        .iter()
        .fold(seed ^ xs.len() as u64, |h, &(b, _)| mix(h, b));
    (hash, first)
}

/// Hash of `(nrows, ncols, offsets, cols)`. O(nnz), parallel.
pub fn pattern_fingerprint<I: Index, J: Index>(
    nrows: usize,
    ncols: usize,
    offsets: &[I],
    cols: &[J],
) -> u64 {
    scan_pattern(nrows, ncols, offsets, cols, |_| false, |_| false).fingerprint
}

/// What [`scan_pattern`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternScan {
    /// [`pattern_fingerprint`] of the pattern.
    pub fingerprint: u64,
    /// The first `i` (of `0..offsets.len()`) with `bad_offset(i)`.
    pub bad_offset: Option<usize>,
    /// The first `k` with `bad_col(cols[k])`.
    pub bad_col: Option<usize>,
}

/// [`pattern_fingerprint`] and a check of every offset position and every
/// column, in one pass over the arrays (validation and fingerprint of an
/// operand read its pattern once).
pub fn scan_pattern<I: Index, J: Index>(
    nrows: usize,
    ncols: usize,
    offsets: &[I],
    cols: &[J],
    bad_offset: impl Fn(usize) -> bool + Sync,
    bad_col: impl Fn(&J) -> bool + Sync,
) -> PatternScan {
    let h = mix(mix(0x5EED, nrows as u64), ncols as u64);
    let (ho, bad_offset) = hash_slice_finding(
        offsets,
        0x0FF5,
        |x: &I| x.to_i64() as u64,
        |start, block| (start..start + block.len()).find(|&i| bad_offset(i)),
    );
    let (hc, bad_col) = hash_slice_finding(
        cols,
        0xC015,
        |x: &J| x.to_i64() as u64,
        |start, block| first_bad(block, &bad_col).map(|k| start + k),
    );
    PatternScan {
        fingerprint: mix(mix(h, ho), hc),
        bad_offset,
        bad_col,
    }
}

/// The first position in `xs` where `bad` holds. The slice is tested
/// whole first, without a branch per element (which vectorizes), and
/// searched only when it holds a bad element: a search that may stop at
/// every element costs a branch each (the columns of a 27-point stencil at
/// 64³, 6.9 M of them, one thread: 3 ms searched, about a third of that
/// tested whole).
#[inline]
pub fn first_bad<X>(xs: &[X], bad: impl Fn(&X) -> bool) -> Option<usize> {
    if !xs.iter().fold(false, |any, x| any | bad(x)) {
        return None;
    }
    xs.iter().position(bad)
}

/// Hash of a value array (bit patterns, so `-0.0 != 0.0` and NaNs are
/// compared by payload). O(nnz), parallel.
pub fn values_fingerprint<T: Scalar>(values: &[T]) -> u64 {
    hash_slice(values, 0x7A1E, |x: &T| x.hash_bits())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_a_moved_entry() {
        let off = [0i32, 2, 3];
        let a = pattern_fingerprint(2, 3, &off, &[0i32, 1, 2]);
        let b = pattern_fingerprint(2, 3, &off, &[0i32, 2, 2]);
        let c = pattern_fingerprint(2, 3, &[0i32, 1, 3], &[0i32, 1, 2]);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, pattern_fingerprint(2, 3, &off, &[0i32, 1, 2]));
    }

    /// 32-bit indices are hashed two to a word: a changed entry, or two
    /// entries swapped within a word or across words, still change the
    /// fingerprint, in the words and in the tail after them.
    #[test]
    fn packed_keys_detect_changes() {
        let cols: Vec<i32> = (0..67).map(|k| (k * 7919) % 1000).collect();
        let off = [0i32, 67];
        let f = |c: &[i32]| pattern_fingerprint(1, 1000, &off, c);
        let print = f(&cols);
        for k in 0..cols.len() {
            let mut c = cols.clone();
            c[k] += 1;
            assert_ne!(f(&c), print, "entry {k} changed");
            if k + 1 < cols.len() {
                let mut c = cols.clone();
                c.swap(k, k + 1);
                assert_ne!(f(&c), print, "entries {k} and {} swapped", k + 1);
            }
        }
    }

    #[test]
    fn lanes_do_not_cancel() {
        // Pairs that collided when lanes were seeded `seed ^ k` and combined symmetrically.
        let off = [0i32, 4];
        let f = |c: [i32; 4]| pattern_fingerprint(1, 4, &off, &c);
        assert_ne!(f([2, 3, 2, 3]), f([3, 2, 2, 3]));
        assert_ne!(f([0, 1, 2, 3]), f([2, 3, 2, 3]));
        assert_ne!(f([0, 1, 2, 3]), f([1, 0, 3, 2]));
        assert_ne!(f([0, 0, 1, 1]), f([1, 1, 0, 0]));
    }
}
