#ifndef RS_AMALGAMATED
#include "portability.h"
#endif

/* The transpose of a CSR matrix X (nrows x ncols, nnz entries) on the
 * device, for op(A), op(B) = T or C (kernels/README.md, "Transposes"):
 *
 *   1. rs_transpose_count: counts[c] = entries of column c (counts holds
 *      ncols + 1 long long, zeroed by the host);
 *   2. the scan kernels turn the counts into the transpose's zero-based row
 *      offsets and rs_write_offsets writes them as offset_t (+ base); the
 *      host copies the offsets to a cursor array;
 *   3. rs_transpose_scatter: entry p of row i goes to slot
 *      rs_atomic_add(&cursor[c], 1) of row c of the transpose, with
 *      perm[slot] = p and t_cols[slot] = i + base;
 *   4. rs_transpose_sort_rows (twice: short rows by warps, long rows by
 *      blocks) sorts every row of the transpose by perm, so the result does
 *      not depend on the order of the atomics: row c lists the entries of
 *      column c in the order of their positions in X (by row, then by
 *      position within the row). When X's rows have no repeated column the
 *      transpose's rows are sorted without repeats (canonical);
 *   5. rs_transpose_gather: t_vals[k] = X.vals[perm[k]] (conjugated for
 *      op C), rerun on every numeric phase.
 *
 * The kernels expect X to have passed validation (rs_validate): with bad
 * offsets or columns the result is meaningless, but every write stays in
 * bounds (columns outside 0..ncols are skipped, slots past nnz are dropped,
 * perm entries outside 0..nnz are not followed). */

/* Long rows of the transpose (more than RS_WARP entries) whose pairs fit
 * this many entries are sorted in shared memory (16 bytes per entry); longer
 * ones in global memory. */
#define RS_TR_SHARED_SORT 1024

/* Entry p's column of x, zero-based, or -1 when outside 0..ncols. */
template <class I>
RS_DEVICE RS_INLINE long long rs_tr_col(const I* cols, long long p, long long ncols, int base) {
  const long long c = (long long)cols[p] - base;
  return (c >= 0 && c < ncols) ? c : -1;
}

template <class I>
RS_DEVICE RS_INLINE void rs_transpose_count_impl(const I* cols, long long ncols, long long nnz,
                                                 int base, long long* counts) {
  const long long stride = rs_gdim() * rs_bdim();
  for (long long p = rs_bid() * rs_bdim() + rs_tid(); p < nnz; p += stride) {
    const long long c = rs_tr_col<I>(cols, p, ncols, base);
    if (c >= 0) rs_atomic_add(&counts[c], 1LL);
  }
}

/* A warp per row of x (grid-stride over warps), its lanes striding over the
 * row's entries. No warp operations: lanes may diverge freely. */
template <class O, class I>
RS_DEVICE RS_INLINE void rs_transpose_scatter_impl(const O* rows, const I* cols, long long nrows,
                                                   long long ncols, long long nnz, int base,
                                                   long long* cursor, I* t_cols, O* perm) {
  const long long warps = rs_gdim() * (rs_bdim() / RS_WARP);
  const long long first = rs_bid() * (rs_bdim() / RS_WARP) + rs_tid() / RS_WARP;
  for (long long i = first; i < nrows; i += warps) {
    long long lo = (long long)rows[i] - base;
    long long hi = (long long)rows[i + 1] - base;
    if (lo < 0) lo = 0;
    if (hi > nnz) hi = nnz;
    for (long long p = lo + rs_lane(); p < hi; p += RS_WARP) {
      const long long c = rs_tr_col<I>(cols, p, ncols, base);
      if (c < 0) continue;
      const long long slot = rs_atomic_add(&cursor[c], 1LL);
      if (slot < 0 || slot >= nnz) continue;
      perm[slot] = (O)p;
      t_cols[slot] = (I)(i + base);
    }
  }
}

/* Bitonic sort of key[0..len) (carrying col) ascending, by the whole block:
 * the variant whose comparators all put the minimum at the lower index
 * (each merge starts by comparing i with its mirror i ^ (k - 1)), over the
 * next power of two; positions from len on act as +infinity, so their
 * comparators never swap and are skipped. Ends with a barrier. Block
 * uniform: len. */
template <class K, class C>
RS_DEVICE RS_INLINE void rs_tr_bitonic(K* key, C* col, long long len) {
  long long pow2 = 1;
  while (pow2 < len) pow2 <<= 1;
  for (long long k = 2; k <= pow2; k <<= 1) {
    for (long long j = k >> 1; j > 0; j >>= 1) {
      for (long long i = rs_tid(); i < len; i += rs_bdim()) {
        const long long partner = (j == (k >> 1)) ? (i ^ (k - 1)) : (i ^ j);
        if (partner <= i || partner >= len) continue;
        const K a = key[i], b = key[partner];
        if (b < a) {
          key[i] = b;
          key[partner] = a;
          const C ca = col[i];
          col[i] = col[partner];
          col[partner] = ca;
        }
      }
      rs_sync();
    }
  }
}

/* long_rows == 0: a warp per row (grid-stride over the warps of the grid),
 * rows of 2..RS_WARP entries, by rank (keys are distinct); other rows are
 * left alone. long_rows == 1: a block per row (grid-stride over blocks),
 * rows of more than RS_WARP entries, bitonic in shared memory up to
 * RS_TR_SHARED_SORT entries, in global memory beyond. */
template <class O, class I>
RS_DEVICE RS_INLINE void rs_transpose_sort_rows_impl(long long nrows, const O* rows, int base,
                                                     O* perm, I* cols, int long_rows) {
  if (long_rows == 0) {
    const long long warps = rs_gdim() * (rs_bdim() / RS_WARP);
    const long long first = rs_bid() * (rs_bdim() / RS_WARP) + rs_tid() / RS_WARP;
    const int lane = rs_lane();
    for (long long r = first; r < nrows; r += warps) {
      const long long lo = (long long)rows[r] - base;
      const long long len = (long long)rows[r + 1] - base - lo;
      if (len < 2 || len > RS_WARP) continue; /* uniform over the warp */
      const bool has = lane < len;
      const long long key = has ? (long long)perm[lo + lane] : RS_LLONG_MAX;
      const long long col = has ? (long long)cols[lo + lane] : 0;
      int rank = 0;
      for (int k = 0; k < RS_WARP; ++k) {
        const long long other = rs_shfl(key, k);
        if (other < key) ++rank;
      }
      /* Lane t fetches the entry of rank t: every lane has read its entry
       * (the shuffles use it) before any lane writes. */
      long long my_key = 0, my_col = 0;
      for (int k = 0; k < RS_WARP; ++k) {
        const int rk = rs_shfl(rank, k);
        const long long kk = rs_shfl(key, k);
        const long long cc = rs_shfl(col, k);
        if (rk == lane) {
          my_key = kk;
          my_col = cc;
        }
      }
      if (has) {
        perm[lo + lane] = (O)my_key;
        cols[lo + lane] = (I)my_col;
      }
    }
    return;
  }
  RS_SHARED(long long, s_key, RS_TR_SHARED_SORT);
  RS_SHARED(long long, s_col, RS_TR_SHARED_SORT);
  for (long long r = rs_bid(); r < nrows; r += rs_gdim()) {
    const long long lo = (long long)rows[r] - base;
    const long long len = (long long)rows[r + 1] - base - lo;
    if (len <= RS_WARP) continue; /* uniform over the block */
    if (len <= RS_TR_SHARED_SORT) {
      for (long long i = rs_tid(); i < len; i += rs_bdim()) {
        s_key[i] = (long long)perm[lo + i];
        s_col[i] = (long long)cols[lo + i];
      }
      rs_sync();
      rs_tr_bitonic(s_key, s_col, len);
      for (long long i = rs_tid(); i < len; i += rs_bdim()) {
        perm[lo + i] = (O)s_key[i];
        cols[lo + i] = (I)s_col[i];
      }
      rs_sync(); /* before the next row overwrites the shared arrays */
    } else {
      rs_tr_bitonic(perm + lo, cols + lo, len);
    }
  }
}

RS_DEVICE RS_INLINE float rs_tr_conj(float v) { return v; }
RS_DEVICE RS_INLINE double rs_tr_conj(double v) { return v; }
template <class F>
RS_DEVICE RS_INLINE rs_complex<F> rs_tr_conj(rs_complex<F> v) {
  rs_complex<F> r;
  r.re = v.re;
  r.im = -v.im;
  return r;
}

template <class O, class V>
RS_DEVICE RS_INLINE void rs_transpose_gather_impl(long long nnz, const O* perm, const V* src,
                                                  V* dst, int conjugate) {
  const long long stride = rs_gdim() * rs_bdim();
  for (long long k = rs_bid() * rs_bdim() + rs_tid(); k < nnz; k += stride) {
    const long long q = (long long)perm[k];
    if (q < 0 || q >= nnz) continue;
    const V v = src[q];
    dst[k] = conjugate ? rs_tr_conj(v) : v;
  }
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_transpose_count(rs_csr x, long long* counts) {
  rs_transpose_count_impl<index_t>(x.cols, x.ncols, x.nnz, x.base, counts);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_transpose_scatter(rs_csr x, long long* cursor, index_t* t_cols,
                                    offset_t* perm) {
  rs_transpose_scatter_impl<offset_t, index_t>(x.rows, x.cols, x.nrows, x.ncols, x.nnz, x.base,
                                               cursor, t_cols, perm);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_transpose_sort_rows(long long nrows, const offset_t* rows, int base,
                                      offset_t* perm, index_t* cols, int long_rows) {
  rs_transpose_sort_rows_impl<offset_t, index_t>(nrows, rows, base, perm, cols, long_rows);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_transpose_gather(long long nnz, const offset_t* perm, const value_t* src,
                                   value_t* dst, int conjugate) {
  rs_transpose_gather_impl<offset_t, value_t>(nnz, perm, src, dst, conjugate);
}
