#ifndef RS_AMALGAMATED
#include "portability.h"
#endif

/* Row binning in two passes (OpSparse section 5.1, algorithms 1
 * and 2, with the DCU study's warp aggregation): rs_bin_count counts the
 * rows of each bin, the host turns the counts into offsets, rs_bin_fill
 * writes the row numbers. A warp classifies RS_WARP rows at a time with one
 * ballot per bin; counts stay in registers (lane j keeps bin j's) and
 * shared memory, and a block makes one global atomic per bin (per pass over
 * the block's rows in rs_bin_fill).
 *
 * Bin j < nb holds the rows whose size is in (bounds[j-1], bounds[j]]
 * (bounds[-1] = 0); sizes above bounds[nb-1] go to bin nb - 1 as well; size
 * 0 goes nowhere; with a_rows, rows of A with exactly one entry go to bin nb
 * (the direct bin). 1 <= nb < RS_BIN_MAX; other nb do nothing. */

#define RS_BIN_MAX 32
/* Most warps in a block of 1024 threads. */
#define RS_BIN_WARPS (1024 / RS_WARP)

template <class O>
RS_DEVICE RS_INLINE int rs_bin_of(long long size, long long i, const O* a_rows,
                                  const long long* s_bounds, int nb) {
  if (size <= 0) return -1;
  if (a_rows != nullptr && a_rows[i + 1] - a_rows[i] == 1) return nb;
  int j = 0;
  while (j < nb - 1 && size > s_bounds[j]) ++j;
  return j;
}

template <class O>
RS_DEVICE RS_INLINE void rs_bin_count_impl(long long m, const long long* row_size,
                                           const O* a_rows, const long long* bounds, int nb,
                                           long long* bin_size, long long* max_size) {
  RS_SHARED(long long, s_bounds, RS_BIN_MAX);
  RS_SHARED(unsigned, s_count, RS_BIN_MAX);
  RS_SHARED(long long, s_max, 1);
  if (nb < 1 || nb >= RS_BIN_MAX) return;
  const int tid = rs_tid();
  const int lane = rs_lane();
  const int bdim = rs_bdim();
  for (int j = tid; j < nb; j += bdim) s_bounds[j] = bounds[j];
  for (int j = tid; j <= nb; j += bdim) s_count[j] = 0;
  if (tid == 0) s_max[0] = 0;
  rs_sync();

  unsigned my_count = 0; /* rows of bin `lane` seen by this warp */
  long long my_max = 0;
  const long long stride = rs_gdim() * bdim;
  /* Block-uniform trip counts: the ballots need every lane. */
  for (long long first = rs_bid() * bdim; first < m; first += stride) {
    const long long i = first + tid;
    int bin = -1;
    if (i < m) {
      const long long size = row_size[i];
      if (size > my_max) my_max = size;
      bin = rs_bin_of(size, i, a_rows, s_bounds, nb);
    }
    for (int j = 0; j <= nb; ++j) {
      const unsigned long long mask = rs_ballot(bin == j);
      if (lane == j) my_count += (unsigned)rs_popcll(mask);
    }
  }
  for (int d = RS_WARP / 2; d > 0; d >>= 1) {
    const long long other = rs_shfl_xor(my_max, d);
    if (other > my_max) my_max = other;
  }
  if (lane <= nb && my_count != 0) rs_atomic_add(&s_count[lane], my_count);
  if (lane == 0 && my_max > 0) rs_atomic_max(s_max, my_max);
  rs_sync();

  for (int j = tid; j <= nb; j += bdim)
    if (s_count[j] != 0) rs_atomic_add(&bin_size[j], (long long)s_count[j]);
  if (tid == 0 && s_max[0] > 0) rs_atomic_max(max_size, s_max[0]);
}

template <class O>
RS_DEVICE RS_INLINE void rs_bin_fill_impl(long long m, const long long* row_size, const O* a_rows,
                                          const long long* bounds, int nb,
                                          const long long* bin_offset, long long* bin_cursor,
                                          unsigned* bins) {
  RS_SHARED(long long, s_bounds, RS_BIN_MAX);
  /* Per pass: rows of bin j in warp w at s_warp[j * RS_BIN_WARPS + w],
   * turned in place into the warp's offset within the block's range of bin
   * j, which starts at s_base[j]. Both double-buffered by the pass's
   * parity, so two barriers per pass suffice. */
  RS_SHARED(unsigned, s_warp, 2 * RS_BIN_MAX * RS_BIN_WARPS);
  RS_SHARED(long long, s_base, 2 * RS_BIN_MAX);
  if (nb < 1 || nb >= RS_BIN_MAX) return;
  const int tid = rs_tid();
  const int lane = rs_lane();
  const int warp = tid / RS_WARP;
  const int nwarps = rs_bdim() / RS_WARP;
  const int bdim = rs_bdim();
  const unsigned long long below = (1ull << lane) - 1ull;
  for (int j = tid; j < nb; j += bdim) s_bounds[j] = bounds[j];
  rs_sync();

  const long long stride = rs_gdim() * bdim;
  int parity = 0;
  for (long long first = rs_bid() * bdim; first < m; first += stride) {
    const long long i = first + tid;
    int bin = -1;
    if (i < m) bin = rs_bin_of(row_size[i], i, a_rows, s_bounds, nb);
    unsigned* counts = s_warp + parity * (RS_BIN_MAX * RS_BIN_WARPS);
    long long* base = s_base + parity * RS_BIN_MAX;
    unsigned long long my_mask = 0;
    for (int j = 0; j <= nb; ++j) {
      const unsigned long long mask = rs_ballot(bin == j);
      if (bin == j) my_mask = mask;
      if (lane == 0) counts[j * RS_BIN_WARPS + warp] = (unsigned)rs_popcll(mask);
    }
    rs_sync();
    for (int j = tid; j <= nb; j += bdim) {
      unsigned sum = 0;
      for (int w = 0; w < nwarps; ++w) {
        const unsigned c = counts[j * RS_BIN_WARPS + w];
        counts[j * RS_BIN_WARPS + w] = sum;
        sum += c;
      }
      base[j] = sum != 0 ? bin_offset[j] + rs_atomic_add(&bin_cursor[j], (long long)sum) : 0;
    }
    rs_sync();
    if (bin >= 0)
      bins[base[bin] + counts[bin * RS_BIN_WARPS + warp] + (unsigned)rs_popcll(my_mask & below)] =
          (unsigned)i;
    parity ^= 1;
  }
}

RS_GLOBAL RS_LAUNCH_BOUNDS(512) void rs_bin_count(long long m, const long long* row_size, const offset_t* a_rows,
                            int a_base, const long long* bounds, int nb, long long* bin_size,
                            long long* max_size) {
  (void)a_base; /* lengths of A's rows are differences of offsets */
  rs_bin_count_impl<offset_t>(m, row_size, a_rows, bounds, nb, bin_size, max_size);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(512) void rs_bin_fill(long long m, const long long* row_size, const offset_t* a_rows,
                           int a_base, const long long* bounds, int nb,
                           const long long* bin_offset, long long* bin_cursor,
                           unsigned int* bins) {
  (void)a_base;
  rs_bin_fill_impl<offset_t>(m, row_size, a_rows, bounds, nb, bin_offset, bin_cursor, bins);
}
