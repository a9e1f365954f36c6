/* kernels/setup.cu: input validation fused with the products per row.
 *
 *   rs_setup     validates A (row offsets and columns) while it computes
 *                nprod_i = sum of len(B row c) over the entries (i, c) of A,
 *                checking B's offsets at the rows it reads;
 *   rs_validate  checks a whole CSR matrix (B when B is not A) and reports
 *                whether some row is unsorted or repeats a column and the
 *                longest row;
 *   rs_row_shapes  for the output-size prediction: each row's entry count
 *                and the length of the longest row of B it merges.
 *
 * Both are grid-stride loops in which a warp takes RS_WARP consecutive rows
 * at a time, one lane per row; rows longer than RS_WARP entries are then
 * taken by the whole warp, one after another, so that a power-law row of
 * 10^4 entries costs one warp 10^4 / RS_WARP steps instead of one thread
 * 10^4 dependent loads. Launch (all three): any grid, block a multiple of
 * RS_WARP, no shared memory. Errors go to `error` with rs_atomic_min((row << 8) | code)
 * (kernels/README.md, "Launch contract").
 */
#ifndef RS_AMALGAMATED
#include "portability.h"
#endif

/* ---- helpers of setup.cu, symbolic.cu and numeric.cu ------------------- *
 * Defined here, the first of the three in the concatenation order
 * (kernels/README.md, "Host emulation"), and used by the other two.        */

/* op(X) in CSR, as rs_csr but templated on the value, offset and index
 * types the kernels are written for. */
template <class V, class O, class I>
struct rsh_csr {
  const O* rows;
  const I* cols;
  const V* vals;
  long long nrows, ncols, nnz;
  int base;
};

RS_DEVICE RS_INLINE rsh_csr<value_t, offset_t, index_t> rsh_view(const rs_csr& x) {
  rsh_csr<value_t, offset_t, index_t> v;
  v.rows = x.rows;
  v.cols = x.cols;
  v.vals = x.vals;
  v.nrows = x.nrows;
  v.ncols = x.ncols;
  v.nnz = x.nnz;
  v.base = x.base;
  return v;
}

/* The unsigned type of an index (empty keys, -1, compare as the largest). */
template <class I>
struct rsh_unsigned;
template <>
struct rsh_unsigned<int> {
  typedef unsigned type;
};
template <>
struct rsh_unsigned<long long> {
  typedef unsigned long long type;
};

/* Multiplicative hash of a column (nsparse's scale 107): the slot is this
 * modulo the table size. 107 is odd, so consecutive columns land 107 slots
 * apart and 32 consecutive columns hit 32 different banks. */
RS_DEVICE RS_INLINE unsigned rsh_hash(int key) { return (unsigned)key * 107u; }
RS_DEVICE RS_INLINE unsigned long long rsh_hash(long long key) {
  return (unsigned long long)key * 107ull;
}

/* Smallest power of two >= x (x >= 1). */
RS_DEVICE RS_INLINE long long rsh_pow2_ceil(long long x) {
  long long p = 1;
  while (p < x) p <<= 1;
  return p;
}

/* log2 of a power of two. */
RS_DEVICE RS_INLINE int rsh_log2(long long p) {
  int l = 0;
  while ((1ll << l) < p) ++l;
  return l;
}

/* Position of the lowest set bit of a nonzero mask. */
RS_DEVICE RS_INLINE int rsh_lowest_bit(unsigned long long x) {
  return rs_popcll((x & (~x + 1ull)) - 1ull);
}

/* Sum over the whole warp (all lanes active). */
RS_DEVICE RS_INLINE long long rsh_warp_sum(long long v) {
  for (int d = RS_WARP / 2; d > 0; d >>= 1) v += rs_shfl_xor(v, d);
  return v;
}

/* Maximum over the whole warp (all lanes active). */
RS_DEVICE RS_INLINE long long rsh_warp_max(long long v) {
  for (int d = RS_WARP / 2; d > 0; d >>= 1) {
    const long long other = rs_shfl_xor(v, d);
    if (other > v) v = other;
  }
  return v;
}

/* Zero-based range [lo, hi) of row r of x. */
template <class V, class O, class I>
RS_DEVICE RS_INLINE void rsh_row(const rsh_csr<V, O, I>& x, long long r, long long& lo,
                                 long long& hi) {
  lo = (long long)x.rows[r] - x.base;
  hi = (long long)x.rows[r + 1] - x.base;
}

/* Zero-based range [lo, hi) of row r of x in the unsigned type of the
 * offsets: the hash loops then count in 32 bits when offsets are int (fewer
 * registers; validated rows, and lo + step < 2^32 since nnz < 2^31). */
template <class V, class O, class I>
RS_DEVICE RS_INLINE void rsh_urow(const rsh_csr<V, O, I>& x, unsigned long long r,
                                  typename rsh_unsigned<O>::type& lo,
                                  typename rsh_unsigned<O>::type& hi) {
  typedef typename rsh_unsigned<O>::type U;
  lo = (U)(x.rows[r] - (O)x.base);
  hi = (U)(x.rows[r + 1] - (O)x.base);
}

/* Whether a row's products are spread over whole-team passes of its long
 * B rows (rsh_team_long_rows): when a team of whole warps splits its row
 * into several sub-groups, one per B row. Entries whose B row has at
 * least `team` entries are then taken by the whole team, the others by
 * their sub-group as before. */
RS_DEVICE RS_INLINE bool rsh_balance_long_rows(int team, int g) {
  return team > g && team % RS_WARP == 0;
}

/* The whole-team pass over the long B rows of A's row [alo, ahi): for
 * each entry ka whose B row [lo, hi) has at least `team` entries, thread
 * t of the team (every lane of its warps calls this, warp-uniformly)
 * visits kb = lo + t, lo + t + team, ... while visit(ka, kb) returns true
 * (`go`: false skips the visits but keeps the lane in the ballots). The
 * warps read A's row RS_WARP entries at a time and agree on the long ones
 * by ballot. Without it one sub-group walks a hub's B row (10^4 entries in
 * rmat at scale 20) while the team's other warps wait at the next block
 * barrier: 64-76 % of the stalls of rs_symbolic_shared and
 * rs_numeric_global on rmat at scale 18 (Nsight Compute, H200,
 * 2026-12-04). Returns `go` as the visits left it. */
template <class V, class O, class I, class F>
RS_DEVICE RS_INLINE bool rsh_team_long_rows(const rsh_csr<V, O, I>& a, const rsh_csr<V, O, I>& b,
                                            typename rsh_unsigned<O>::type alo,
                                            typename rsh_unsigned<O>::type ahi, int t, int team,
                                            bool go, F visit) {
  typedef typename rsh_unsigned<O>::type U;
  const int lane = rs_lane();
  for (U base = alo; base < ahi; base += (U)RS_WARP) {
    const U ka = base + (U)lane;
    U blo = 0, bhi = 0;
    if (ka < ahi) rsh_urow(b, (unsigned long long)(a.cols[ka] - (I)a.base), blo, bhi);
    unsigned long long longs = rs_ballot(ka < ahi && bhi - blo >= (U)team);
    while (longs != 0ull) {
      const int j = rs_popcll((longs & (~longs + 1ull)) - 1ull);
      longs &= longs - 1ull;
      const U kl = base + (U)j;
      U lo, hi;
      rsh_urow(b, (unsigned long long)(a.cols[kl] - (I)a.base), lo, hi);
      for (U kb = lo + (U)t; go && kb < hi; kb += (U)team) go = visit(kl, kb);
    }
  }
  return go;
}

/* Threads per B row for one row of A in the global kernels: about four
 * entries per thread of the B rows that row reads (their mean length is the
 * row's products over its entries: the rule of gpu_bins::threads_per_b_row
 * for one row; a power-law graph's long rows read its hubs), a power of two
 * from 2 to RS_WARP. Every thread of the block calls it; `sum` is a shared
 * long long it overwrites. A pass over A's row and two barriers. */
template <class V, class O, class I>
RS_DEVICE int rsh_row_group(const rsh_csr<V, O, I>& a, const rsh_csr<V, O, I>& b, long long row,
                            long long* sum) {
  const int tid = rs_tid(), bdim = rs_bdim();
  if (tid == 0) *sum = 0;
  rs_sync();
  long long alo, ahi;
  rsh_row(a, row, alo, ahi);
  long long mine = 0;
  for (long long ka = alo + tid; ka < ahi; ka += bdim) {
    long long blo, bhi;
    rsh_row(b, (long long)(a.cols[ka] - (I)a.base), blo, bhi);
    mine += bhi - blo;
  }
  if (mine != 0) rs_atomic_add(sum, mine);
  rs_sync();
  const long long entries = ahi - alo;
  const long long products = *sum;
  rs_sync(); /* every thread has read it before the caller reuses it */
  const long long mean = entries > 0 ? (products + entries - 1) / entries : 0;
  const long long want = (mean + 3) / 4;
  long long g = rsh_pow2_ceil(want > 0 ? want : 1);
  if (g < 2) g = 2;
  if (g > RS_WARP) g = RS_WARP;
  return (int)g;
}

/* ------------------------------------------------------------------------ */

/* Error key of (row, code), ordered so that the smallest row wins. */
RS_DEVICE RS_INLINE unsigned long long rsh_error_key(long long row, int code) {
  return ((unsigned long long)row << 8) | (unsigned long long)code;
}

/* Checks the offsets of row r of x: lo >= 0, hi >= lo, hi <= nnz, the first
 * row starting at 0 and the last one ending at nnz. Returns false (and the
 * empty range) when one fails. */
template <class V, class O, class I>
RS_DEVICE RS_INLINE bool rsh_check_row(const rsh_csr<V, O, I>& x, long long r, long long& lo,
                                       long long& hi) {
  rsh_row(x, r, lo, hi);
  bool ok = lo >= 0 && hi >= lo && hi <= x.nnz;
  if (r == 0 && lo != 0) ok = false;
  if (r == x.nrows - 1 && hi != x.nnz) ok = false;
  if (!ok) lo = hi = 0;
  return ok;
}

/* Products of entry k of A (row i): the length of the B row it names, after
 * checking the column (code 2, A's row i) and B's offsets there (code 3,
 * B's row). 0 for a bad entry. */
template <class V, class O, class I>
RS_DEVICE RS_INLINE long long rsh_entry_products(const rsh_csr<V, O, I>& a,
                                                 const rsh_csr<V, O, I>& b, long long i,
                                                 long long k, unsigned long long* error) {
  const long long c = (long long)a.cols[k] - a.base;
  if (c < 0 || c >= a.ncols || c >= b.nrows) {
    rs_atomic_min(error, rsh_error_key(i, 2));
    return 0;
  }
  long long lo, hi;
  rsh_row(b, c, lo, hi);
  if (lo < 0 || hi < lo || hi > b.nnz) {
    rs_atomic_min(error, rsh_error_key(c, 3));
    return 0;
  }
  return hi - lo;
}

/* rs_setup: row_size[i] = nprod_i for every row of A, row_size[m] = 0;
 * code 1 for A's offsets (at row i), 2 for A's columns (at row i), 3 for
 * B's offsets (at B's row). A row with bad offsets gets nprod 0. */
template <class V, class O, class I>
RS_DEVICE void rsh_setup(const rsh_csr<V, O, I> a, const rsh_csr<V, O, I> b,
                         long long* row_size, unsigned long long* error) {
  const long long m = a.nrows;
  const int lane = rs_lane();
  const long long gtid = rs_bid() * rs_bdim() + rs_tid();
  const long long stride = rs_gdim() * rs_bdim();
  if (gtid == 0) row_size[m] = 0;
  /* i0 is the same in every lane of a warp, so the loop is warp-uniform. */
  for (long long i0 = gtid - lane; i0 < m; i0 += stride) {
    const long long i = i0 + lane;
    long long lo = 0, hi = 0;
    if (i < m && !rsh_check_row(a, i, lo, hi)) rs_atomic_min(error, rsh_error_key(i, 1));
    const bool is_long = hi - lo > RS_WARP;
    long long nprod = 0;
    if (!is_long)
      for (long long k = lo; k < hi; ++k) nprod += rsh_entry_products(a, b, i, k, error);
    /* Long rows: the warp reads them together (coalesced) and sums. */
    unsigned long long longs = rs_ballot(is_long);
    while (longs != 0) {
      const int src = rsh_lowest_bit(longs);
      longs &= longs - 1ull;
      const long long rlo = rs_shfl(lo, src);
      const long long rhi = rs_shfl(hi, src);
      long long part = 0;
      for (long long k = rlo + lane; k < rhi; k += RS_WARP)
        part += rsh_entry_products(a, b, i0 + src, k, error);
      part = rsh_warp_sum(part);
      if (lane == src) nprod = part;
    }
    if (i < m) row_size[i] = nprod;
  }
}

/* rs_validate: checks every row of x (offsets: code_offsets, columns out of
 * [0, ncols): code_cols, both at x's row). flags[0] becomes 1 when some row
 * has a column not above the previous one (unsorted or repeated);
 * flags[1] = max(flags[1], longest row). The host zeroes both. */
template <class V, class O, class I>
RS_DEVICE void rsh_validate(const rsh_csr<V, O, I> x, int code_offsets, int code_cols,
                            unsigned long long* error, long long* flags) {
  const long long m = x.nrows;
  const int lane = rs_lane();
  const long long gtid = rs_bid() * rs_bdim() + rs_tid();
  const long long stride = rs_gdim() * rs_bdim();
  bool unsorted = false;
  long long longest = 0;
  for (long long i0 = gtid - lane; i0 < m; i0 += stride) {
    const long long i = i0 + lane;
    long long lo = 0, hi = 0;
    if (i < m && !rsh_check_row(x, i, lo, hi)) rs_atomic_min(error, rsh_error_key(i, code_offsets));
    if (hi - lo > longest) longest = hi - lo;
    const bool is_long = hi - lo > RS_WARP;
    if (!is_long) {
      bool bad = false;
      for (long long k = lo; k < hi; ++k) {
        const long long c = (long long)x.cols[k] - x.base;
        if (c < 0 || c >= x.ncols) bad = true;
        if (k > lo && x.cols[k] <= x.cols[k - 1]) unsorted = true;
      }
      if (bad) rs_atomic_min(error, rsh_error_key(i, code_cols));
    }
    unsigned long long longs = rs_ballot(is_long);
    while (longs != 0) {
      const int src = rsh_lowest_bit(longs);
      longs &= longs - 1ull;
      const long long rlo = rs_shfl(lo, src);
      const long long rhi = rs_shfl(hi, src);
      bool bad = false;
      for (long long k = rlo + lane; k < rhi; k += RS_WARP) {
        const long long c = (long long)x.cols[k] - x.base;
        if (c < 0 || c >= x.ncols) bad = true;
        if (k > rlo && x.cols[k] <= x.cols[k - 1]) unsorted = true;
      }
      if (rs_ballot(bad) != 0 && lane == src) rs_atomic_min(error, rsh_error_key(i, code_cols));
    }
  }
  /* One pair of atomics per warp. */
  const bool any_unsorted = rs_ballot(unsorted) != 0;
  longest = rsh_warp_max(longest);
  if (lane == 0) {
    if (any_unsorted) rs_atomic_max(&flags[0], 1ll);
    if (longest > 0) rs_atomic_max(&flags[1], longest);
  }
}

/* Length of the row of b named by entry k of a (validated). */
template <class V, class O, class I>
RS_DEVICE RS_INLINE long long rsh_merged_len(const rsh_csr<V, O, I>& a, const rsh_csr<V, O, I>& b,
                                             long long k) {
  long long lo, hi;
  rsh_row(b, (long long)a.cols[k] - a.base, lo, hi);
  return hi - lo;
}

/* rs_row_shapes: shapes[i] = (longest << 8) | min(entries, 255) for every
 * row i of A, where entries is the row's length and longest the length of
 * the longest row of B it names (0 for an empty row): the word
 * PackedRowShapes reads in src/plan/row_work.rs, by which the output-size
 * prediction groups the rows and bounds their nnz from below. A and B must
 * have passed rs_setup and rs_validate (no checks here). */
template <class V, class O, class I>
RS_DEVICE void rsh_row_shapes(const rsh_csr<V, O, I> a, const rsh_csr<V, O, I> b,
                              unsigned long long* shapes) {
  const long long m = a.nrows;
  const int lane = rs_lane();
  const long long gtid = rs_bid() * rs_bdim() + rs_tid();
  const long long stride = rs_gdim() * rs_bdim();
  for (long long i0 = gtid - lane; i0 < m; i0 += stride) {
    const long long i = i0 + lane;
    long long lo = 0, hi = 0;
    if (i < m) rsh_row(a, i, lo, hi);
    const bool is_long = hi - lo > RS_WARP;
    long long longest = 0;
    if (!is_long)
      for (long long k = lo; k < hi; ++k) {
        const long long len = rsh_merged_len(a, b, k);
        if (len > longest) longest = len;
      }
    /* Long rows: the warp reads them together and takes the maximum. */
    unsigned long long longs = rs_ballot(is_long);
    while (longs != 0) {
      const int src = rsh_lowest_bit(longs);
      longs &= longs - 1ull;
      const long long rlo = rs_shfl(lo, src);
      const long long rhi = rs_shfl(hi, src);
      long long part = 0;
      for (long long k = rlo + lane; k < rhi; k += RS_WARP) {
        const long long len = rsh_merged_len(a, b, k);
        if (len > part) part = len;
      }
      part = rsh_warp_max(part);
      if (lane == src) longest = part;
    }
    if (i < m) {
      const long long entries = hi - lo < 255 ? hi - lo : 255;
      shapes[i] = ((unsigned long long)longest << 8) | (unsigned long long)entries;
    }
  }
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_setup(rs_csr a, rs_csr b, long long* row_size, unsigned long long* error) {
  rsh_setup(rsh_view(a), rsh_view(b), row_size, error);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_validate(rs_csr x, int code_offsets, int code_cols, unsigned long long* error,
                           long long* flags) {
  rsh_validate(rsh_view(x), code_offsets, code_cols, error, flags);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_row_shapes(rs_csr a, rs_csr b, unsigned long long* shapes) {
  rsh_row_shapes(rsh_view(a), rsh_view(b), shapes);
}
