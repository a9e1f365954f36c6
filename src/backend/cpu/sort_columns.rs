//! Sorting the short column lists of C's rows.
//!
//! The dense accumulator finds a row's columns in the order they first
//! appear; on scattered rows (random and power-law graphs) that order is
//! random, and sorting it was most of the numeric phase: on
//! uniform_r4_200000 (16 random columns a row) an insertion sort took about
//! 130 ns a row, 40 % of the numeric time. Rows of up to 32 columns are
//! sorted here with a bitonic network in AVX2 registers (8 columns a
//! register, as `u32`), 20-50 ns a row, when the CPU has AVX2 and the
//! columns fit in `u32`; otherwise an insertion sort for short lists and
//! the standard library's sort for longer ones. A list that is already
//! sorted (one row of B, or rows of B read in column order) is found by one
//! pass and left alone.

/// Lists longer than this are sorted by the standard library (its own
/// small-sort networks win from about here over an insertion sort).
const INSERTION_MAX: usize = 20;

/// How a workspace sorts its rows' columns: chosen once per workspace, from
/// the CPU's features and the width of op(B).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ColumnSorter {
    /// Rows of up to 32 columns go through the AVX2 network.
    simd: bool,
}

impl ColumnSorter {
    /// A sorter for columns below `ncols`.
    pub(super) fn new(ncols: usize) -> Self {
        ColumnSorter {
            simd: avx2::usable(ncols),
        }
    }

    /// A sorter that never uses SIMD (tests compare the two).
    #[cfg(test)]
    fn scalar() -> Self {
        ColumnSorter { simd: false }
    }

    /// The most keys [`ColumnSorter::sort_keys`] sorts in registers: with
    /// fewer, rows of more products go to the dense accumulator.
    pub(super) fn key_registers_len(&self) -> usize {
        if self.simd {
            avx2::MAX_LEN
        } else {
            KEYS_SCALAR_MAX
        }
    }

    /// Sorts the first `n` of `keys` (`n <= KEYS`) in increasing order;
    /// the keys past `n` must be `u32::MAX` (they stay there).
    #[inline]
    pub(super) fn sort_keys(&self, keys: &mut [u32; KEYS], n: usize) {
        if n < 2 {
            return;
        }
        if self.simd && n > KEYS_SCALAR_MAX {
            // SAFETY: `simd` is set only when the CPU has AVX2.
            unsafe { avx2::sort_lanes(keys, n) };
        } else {
            insertion_sort(&mut keys[..n]);
        }
    }

    /// [`ColumnSorter::sort_keys`] for `n <= 8` keys, in one register
    /// also when there are few (its network has no branch; an insertion
    /// sort mispredicts on keys in no order).
    #[inline]
    pub(super) fn sort_few_keys(&self, keys: &mut [u32; KEYS], n: usize) {
        debug_assert!(n <= KEYS_SCALAR_MAX);
        if n < 2 {
            return;
        }
        if self.simd {
            // SAFETY: `simd` is set only when the CPU has AVX2.
            unsafe { avx2::sort_lanes(keys, n) };
        } else {
            insertion_sort(&mut keys[..n]);
        }
    }

    /// Sorts `list` in increasing order.
    #[inline]
    pub(super) fn sort(&self, list: &mut [usize]) {
        let n = list.len();
        if n < 2 || list.windows(2).all(|w| w[0] <= w[1]) {
            return;
        }
        // Short lists by insertion, as `sort_keys` does: the network pads
        // to 8 lanes at least (GAMG's A·P_tent, about 3 columns a row of C:
        // numeric phase 16.5 / 16.4 / 15.3 -> 15.4 / 14.4 / 13.7 ms, one
        // thread, alternating runs).
        if n <= KEYS_SCALAR_MAX {
            insertion_sort(list);
        } else if self.simd && n <= avx2::MAX_LEN {
            // SAFETY: `simd` is set only when the CPU has AVX2 and every
            // column is below `u32::MAX` (`avx2::usable`).
            unsafe { avx2::sort(list) };
        } else if n <= INSERTION_MAX {
            insertion_sort(list);
        } else {
            list.sort_unstable();
        }
    }
}

/// The length of the key arrays [`ColumnSorter::sort_keys`] sorts.
pub(super) const KEYS: usize = 32;

/// Keys up to this many are sorted by insertion, also with AVX2 (the
/// network sorts 8 lanes at least).
const KEYS_SCALAR_MAX: usize = 8;

/// Insertion sort: no call and no recursion for the shortest lists.
fn insertion_sort<X: Copy + PartialOrd>(list: &mut [X]) {
    for k in 1..list.len() {
        let x = list[k];
        let mut p = k;
        while p > 0 && list[p - 1] > x {
            list[p] = list[p - 1];
            p -= 1;
        }
        list[p] = x;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_blend_epi32, _mm256_loadu_si256, _mm256_max_epu32, _mm256_min_epu32,
        _mm256_permute2x128_si256, _mm256_permutevar8x32_epi32, _mm256_setr_epi32,
        _mm256_shuffle_epi32, _mm256_storeu_si256,
    };

    /// The longest list sorted in registers (four registers of 8 lanes).
    pub(super) const MAX_LEN: usize = 32;

    /// Whether the network may sort columns below `ncols`: the CPU has
    /// AVX2, and every column is below `u32::MAX` (the padding value).
    pub(super) fn usable(ncols: usize) -> bool {
        ncols <= u32::MAX as usize && std::arch::is_x86_feature_detected!("avx2")
    }

    /// The lanes that keep the larger value in the step of the bitonic
    /// network that compares lane `i` with lane `i ^ j` in a sequence of
    /// blocks of `k` (lane `i` of an ascending block keeps the larger value
    /// when `i & j` is set; a descending block, `i & k` set, the opposite).
    const fn keeps_max(k: usize, j: usize) -> i32 {
        let mut mask = 0;
        let mut i = 0;
        while i < 8 {
            if ((i & j) != 0) != ((i & k) != 0) {
                mask |= 1 << i;
            }
            i += 1;
        }
        mask
    }

    /// One compare-exchange step: `v` against its partner lanes `p`.
    #[inline(always)]
    unsafe fn step<const KEEPS_MAX: i32>(v: __m256i, p: __m256i) -> __m256i {
        _mm256_blend_epi32::<KEEPS_MAX>(_mm256_min_epu32(v, p), _mm256_max_epu32(v, p))
    }

    /// Lanes `i ^ 1`, `i ^ 2` and `i ^ 4`.
    #[inline(always)]
    unsafe fn swap1(v: __m256i) -> __m256i {
        _mm256_shuffle_epi32::<0b10_11_00_01>(v)
    }
    #[inline(always)]
    unsafe fn swap2(v: __m256i) -> __m256i {
        _mm256_shuffle_epi32::<0b01_00_11_10>(v)
    }
    #[inline(always)]
    unsafe fn swap4(v: __m256i) -> __m256i {
        _mm256_permute2x128_si256::<0x01>(v, v)
    }

    /// Sorts the 8 lanes of `v` ascending.
    #[inline(always)]
    unsafe fn sort8(mut v: __m256i) -> __m256i {
        v = step::<{ keeps_max(2, 1) }>(v, swap1(v));
        v = step::<{ keeps_max(4, 2) }>(v, swap2(v));
        v = step::<{ keeps_max(4, 1) }>(v, swap1(v));
        merge8(v)
    }

    /// Sorts the bitonic 8 lanes of `v` ascending.
    #[inline(always)]
    unsafe fn merge8(mut v: __m256i) -> __m256i {
        v = step::<{ keeps_max(8, 4) }>(v, swap4(v));
        v = step::<{ keeps_max(8, 2) }>(v, swap2(v));
        step::<{ keeps_max(8, 1) }>(v, swap1(v))
    }

    /// The lanes of `v` in reverse order.
    #[inline(always)]
    unsafe fn reverse(v: __m256i) -> __m256i {
        _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0))
    }

    /// Sorts the bitonic 16 lanes `(lo, hi)` ascending.
    #[inline(always)]
    unsafe fn merge16(lo: __m256i, hi: __m256i) -> (__m256i, __m256i) {
        (
            merge8(_mm256_min_epu32(lo, hi)),
            merge8(_mm256_max_epu32(lo, hi)),
        )
    }

    /// Sorts two ascending runs of 8 into 16.
    #[inline(always)]
    unsafe fn merge_8_8(a: __m256i, b: __m256i) -> (__m256i, __m256i) {
        let b = reverse(b);
        merge16(_mm256_min_epu32(a, b), _mm256_max_epu32(a, b))
    }

    /// Sorts `list` (at most [`MAX_LEN`] columns, each below `u32::MAX`).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sort(list: &mut [usize]) {
        debug_assert!(list.len() <= MAX_LEN);
        debug_assert!(list.iter().all(|&c| c < u32::MAX as usize));
        let mut lanes = [u32::MAX; MAX_LEN];
        for (d, &c) in lanes.iter_mut().zip(list.iter()) {
            *d = c as u32;
        }
        sort_lanes(&mut lanes, list.len());
        for (d, &c) in list.iter_mut().zip(lanes.iter()) {
            *d = c as usize;
        }
    }

    /// Sorts the first `n` lanes of `lanes` (`n <= MAX_LEN`), whose lanes
    /// past `n` hold `u32::MAX`.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sort_lanes(lanes: &mut [u32; MAX_LEN], n: usize) {
        debug_assert!(n <= MAX_LEN && lanes[n..].iter().all(|&x| x == u32::MAX));
        let p = lanes.as_mut_ptr().cast::<__m256i>();
        // SAFETY (all loads and stores): `lanes` holds 32 u32, four
        // registers, and p.add(r) for r < 4 stays inside it; the unaligned
        // forms need no alignment.
        if n <= 8 {
            _mm256_storeu_si256(p, sort8(_mm256_loadu_si256(p)));
        } else if n <= 16 {
            let (lo, hi) = merge_8_8(
                sort8(_mm256_loadu_si256(p)),
                sort8(_mm256_loadu_si256(p.add(1))),
            );
            _mm256_storeu_si256(p, lo);
            _mm256_storeu_si256(p.add(1), hi);
        } else {
            let (a0, a1) = merge_8_8(
                sort8(_mm256_loadu_si256(p)),
                sort8(_mm256_loadu_si256(p.add(1))),
            );
            let (b0, b1) = merge_8_8(
                sort8(_mm256_loadu_si256(p.add(2))),
                sort8(_mm256_loadu_si256(p.add(3))),
            );
            // Two ascending runs of 16: reverse the second, split into the
            // 16 smaller and the 16 larger (each bitonic), sort each.
            let (r0, r1) = (reverse(b1), reverse(b0));
            let (l0, l1) = merge16(_mm256_min_epu32(a0, r0), _mm256_min_epu32(a1, r1));
            let (h0, h1) = merge16(_mm256_max_epu32(a0, r0), _mm256_max_epu32(a1, r1));
            _mm256_storeu_si256(p, l0);
            _mm256_storeu_si256(p.add(1), l1);
            _mm256_storeu_si256(p.add(2), h0);
            _mm256_storeu_si256(p.add(3), h1);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod avx2 {
    pub(super) const MAX_LEN: usize = 0;
    pub(super) fn usable(_ncols: usize) -> bool {
        false
    }
    pub(super) unsafe fn sort(_list: &mut [usize]) {
        unreachable!("no AVX2 outside x86-64")
    }
    pub(super) unsafe fn sort_lanes(_lanes: &mut [u32; 32], _n: usize) {
        unreachable!("no AVX2 outside x86-64")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The sorters to check: SIMD where the CPU has AVX2, and scalar.
    fn sorters() -> [ColumnSorter; 2] {
        [ColumnSorter::new(u32::MAX as usize), ColumnSorter::scalar()]
    }

    fn check(list: &[usize]) {
        let mut want = list.to_vec();
        want.sort_unstable();
        for sorter in sorters() {
            let mut got = list.to_vec();
            sorter.sort(&mut got);
            assert_eq!(got, want, "{sorter:?}");
        }
    }

    proptest! {
        /// Random lists of every length up to past the longest SIMD list,
        /// with few or many distinct values, against the standard sort.
        #[test]
        fn sorts_like_the_standard_library(
            list in prop::collection::vec(0usize..1000, 0..=48),
            small in prop::collection::vec(0usize..4, 0..=40),
        ) {
            check(&list);
            check(&small);
        }
    }

    proptest! {
        /// Keys of every length up to the most the sorter takes, padded
        /// with `u32::MAX`, against the standard sort; the padding stays.
        #[test]
        fn sorts_keys_like_the_standard_library(
            keys in prop::collection::vec(0u32..5000, 0..=KEYS),
        ) {
            for sorter in sorters() {
                let n = keys.len().min(sorter.key_registers_len());
                let mut lanes = [u32::MAX; KEYS];
                lanes[..n].copy_from_slice(&keys[..n]);
                sorter.sort_keys(&mut lanes, n);
                let mut want = keys[..n].to_vec();
                want.sort_unstable();
                prop_assert_eq!(&lanes[..n], &want[..], "{:?}", sorter);
                prop_assert!(lanes[n..].iter().all(|&x| x == u32::MAX));
            }
        }
    }

    /// Sorted, reversed and near-`u32::MAX` lists of every length.
    #[test]
    fn sorts_edge_lists() {
        for n in 0..=40usize {
            check(&(0..n).collect::<Vec<_>>());
            check(&(0..n).rev().collect::<Vec<_>>());
            check(
                &(0..n)
                    .map(|k| u32::MAX as usize - 1 - (k * 7) % 11)
                    .collect::<Vec<_>>(),
            );
        }
    }

    /// The SIMD path is taken where the CPU has AVX2 (so the tests above
    /// covered it), and never for columns that do not fit below `u32::MAX`.
    #[test]
    fn simd_only_where_columns_fit() {
        assert!(!ColumnSorter::new(u32::MAX as usize + 1).simd);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            ColumnSorter::new(10).simd,
            std::arch::is_x86_feature_detected!("avx2")
        );
    }
}
