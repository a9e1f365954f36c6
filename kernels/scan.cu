#ifndef RS_AMALGAMATED
#include "portability.h"
#endif

/* Exclusive prefix sums of long long arrays (row sizes -> C's row offsets)
 * in three launches: rs_scan_blocks scans tiles of 2 * blockDim items and
 * writes each tile's total, rs_scan_sums scans the totals in one block,
 * rs_scan_add adds each tile's offset. Then rs_write_offsets turns the
 * offsets into C's row pointer, checking that they fit offset_t. */

/* Words of the shared buffer rs_scan_block_exclusive uses: the warp totals
 * (at most 1024 / 32 warps) and the block total. */
#define RS_SCAN_WORDS 33

/* Exclusive scan of x over the block's threads in thread order: returns the
 * sum of x over the lower threads; *total gets the block's sum, the same in
 * every thread. s_warp holds RS_SCAN_WORDS words; callers alternate two
 * such buffers between calls, so no barrier is needed after the last read. */
RS_DEVICE RS_INLINE long long rs_scan_block_exclusive(long long x, long long* s_warp,
                                                      long long* total) {
  const int lane = rs_lane();
  const int warp = rs_tid() / RS_WARP;
  const int nwarps = rs_bdim() / RS_WARP;
  long long inc = x;
  for (int d = 1; d < RS_WARP; d <<= 1) {
    const long long y = rs_shfl(inc, lane >= d ? lane - d : lane);
    if (lane >= d) inc += y;
  }
  if (lane == RS_WARP - 1) s_warp[warp] = inc;
  rs_sync();
  if (warp == 0) {
    const long long w = lane < nwarps ? s_warp[lane] : 0;
    long long winc = w;
    for (int d = 1; d < RS_WARP; d <<= 1) {
      const long long y = rs_shfl(winc, lane >= d ? lane - d : lane);
      if (lane >= d) winc += y;
    }
    if (lane < nwarps) s_warp[lane] = winc - w;
    if (lane == RS_WARP - 1) s_warp[RS_SCAN_WORDS - 1] = winc;
  }
  rs_sync();
  *total = s_warp[RS_SCAN_WORDS - 1];
  return s_warp[warp] + inc - x;
}

/* Tile t (grid-stride over the tiles) = items [t * 2B, (t + 1) * 2B) with
 * B = blockDim; thread k owns items 2k and 2k + 1 of its tile. */
RS_DEVICE RS_INLINE void rs_scan_blocks_impl(long long n, long long* data,
                                             long long* block_sums) {
  RS_SHARED(long long, s_warp, 2 * RS_SCAN_WORDS);
  const long long tile = 2LL * rs_bdim();
  const long long tiles = (n + tile - 1) / tile;
  int parity = 0;
  for (long long t = rs_bid(); t < tiles; t += rs_gdim()) {
    const long long i = t * tile + 2LL * rs_tid();
    const long long a = i < n ? data[i] : 0;
    const long long b = i + 1 < n ? data[i + 1] : 0;
    long long total = 0;
    const long long excl = rs_scan_block_exclusive(a + b, s_warp + parity * RS_SCAN_WORDS, &total);
    if (i < n) data[i] = excl;
    if (i + 1 < n) data[i + 1] = excl + a;
    if (rs_tid() == 0) block_sums[t] = total;
    parity ^= 1;
  }
}

/* Block 0 scans block_sums[0..nblocks) in chunks of 2B, carrying the sum. */
RS_DEVICE RS_INLINE void rs_scan_sums_impl(long long nblocks, long long* block_sums) {
  RS_SHARED(long long, s_warp, 2 * RS_SCAN_WORDS);
  if (rs_bid() != 0) return;
  const long long chunk = 2LL * rs_bdim();
  long long carry = 0;
  int parity = 0;
  for (long long c = 0; c < nblocks; c += chunk) {
    const long long i = c + 2LL * rs_tid();
    const long long a = i < nblocks ? block_sums[i] : 0;
    const long long b = i + 1 < nblocks ? block_sums[i + 1] : 0;
    long long total = 0;
    const long long excl =
        carry + rs_scan_block_exclusive(a + b, s_warp + parity * RS_SCAN_WORDS, &total);
    if (i < nblocks) block_sums[i] = excl;
    if (i + 1 < nblocks) block_sums[i + 1] = excl + a;
    carry += total;
    parity ^= 1;
  }
}

RS_DEVICE RS_INLINE void rs_scan_add_impl(long long n, long long* data,
                                          const long long* block_sums) {
  const long long tile = 2LL * rs_bdim();
  const long long stride = rs_gdim() * rs_bdim();
  for (long long i = rs_bid() * rs_bdim() + rs_tid(); i < n; i += stride)
    data[i] += block_sums[i / tile];
}

/* c_rows[i] = offsets[i] + base for i <= m; an entry beyond offset_t sets
 * error code 5 for row i - 1 (the first row of C that ends past it). */
template <class O>
RS_DEVICE RS_INLINE void rs_write_offsets_impl(long long m, const long long* offsets, O* c_rows,
                                               int base, unsigned long long* error) {
  const long long stride = rs_gdim() * rs_bdim();
  const long long limit = (long long)rs_limits<O>::max() - base;
  for (long long i = rs_bid() * rs_bdim() + rs_tid(); i <= m; i += stride) {
    const long long v = offsets[i];
    if (v > limit) {
      const unsigned long long row = (unsigned long long)(i > 0 ? i - 1 : 0);
      rs_atomic_min(error, (row << 8) | 5ull);
    } else {
      c_rows[i] = (O)(v + base);
    }
  }
}

RS_GLOBAL RS_LAUNCH_BOUNDS(1024) void rs_scan_blocks(long long n, long long* data, long long* block_sums) {
  rs_scan_blocks_impl(n, data, block_sums);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(1024) void rs_scan_sums(long long nblocks, long long* block_sums) {
  rs_scan_sums_impl(nblocks, block_sums);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(1024) void rs_scan_add(long long n, long long* data, const long long* block_sums) {
  rs_scan_add_impl(n, data, block_sums);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_write_offsets(long long m, const long long* offsets, offset_t* c_rows, int base,
                                unsigned long long* error) {
  rs_write_offsets_impl<offset_t>(m, offsets, c_rows, base, error);
}

/* The same for a C whose row offsets are of another type than A's and B's
 * (offset_t is theirs): 64-bit (limit LLONG_MAX - base) and 32-bit (limit
 * INT_MAX - base). */
RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_write_offsets_wide(long long m, const long long* offsets, long long* c_rows,
                                     int base, unsigned long long* error) {
  rs_write_offsets_impl<long long>(m, offsets, c_rows, base, error);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_write_offsets_narrow(long long m, const long long* offsets, int* c_rows,
                                       int base, unsigned long long* error) {
  rs_write_offsets_impl<int>(m, offsets, c_rows, base, error);
}
