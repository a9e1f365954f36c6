/* kernels/numeric.cu: columns and values of C's rows (OpSparse's numeric
 * step, OpSparse §5.2/5.6, with the DCU study's direct path and bitonic sort).
 *
 *   rs_numeric_shared  (column, value) hash tables in shared memory, several
 *                      rows per block when team < block;
 *   rs_numeric_global  one block per row, tables in global memory: the rows
 *                      too long for shared memory (10^4 entries, 10^6
 *                      products and more);
 *   rs_numeric_single  rows of A with one entry: C's row is a scaled copy of
 *                      B's row (B canonical).
 *
 * Each hashed row goes through three phases:
 *   hash      (column, product) pairs into the table, linear probing with
 *             ONE atomicCAS per probe (Algorithm 5): old = CAS(key slot, -1,
 *             col); old == -1 or old == col: add the product to the value
 *             slot (atomically; plainly in the deterministic mode); else the
 *             next slot;
 *   condense  the occupied slots are moved to the front of the table: a
 *             shared counter bumped once per warp (one row per block), or
 *             ballots and popcounts (teams of at most a warp, no atomics);
 *   sort      by column: a bitonic sorting network over the next power of
 *             two >= the row's nnz, the missing positions acting as +inf
 *             keys (tables of 64 and more); a rank sort, in which each entry
 *             counts the smaller keys of its (uncondensed) table and writes
 *             itself to C at that rank, for the small per-team tables.
 * Then c_cols = col + c_base, c_vals = alpha * sum (+ beta * old value)
 * at c_offsets[row] onwards.
 *
 * Deterministic modes (the bits of C do not depend on timing):
 *   deterministic = 1  the entries of A's row are taken one after another
 *                      with a block barrier between them, the team splitting
 *                      each B row; as a column appears once per B row, each
 *                      value slot has one writer per step and plain adds
 *                      form every sum in A's order. Needs B without
 *                      repeated columns in a row.
 *   deterministic = 2  for B that may repeat a column in a row: one thread
 *                      of the team accumulates the row alone (A's order,
 *                      then B's), plain adds; the team still condenses,
 *                      sorts and writes. (team = 1 with mode 1 is the same.)
 */
#ifndef RS_AMALGAMATED
#include "portability.h"
#endif

/* Uses the helpers (rsh_*) defined in setup.cu, which precedes this file
 * in the kernels' concatenation order (kernels/README.md). */

/* Adds v to the value of `key` in the table (`size` slots, `pow2` as in
 * symbolic.cu): one atomicCAS per probe. PLAIN: the caller guarantees it is
 * the only writer of this key's value (deterministic mode). A full table
 * without the key drops the product (cannot happen when the table has at
 * least the row's nnz slots). */
template <bool PLAIN, class S, class I, class V>
RS_DEVICE RS_INLINE void rsh_insert_pair(I* keys, V* vals, S size, bool pow2, I key, V v) {
  S h = pow2 ? ((S)rsh_hash(key) & (size - 1)) : (S)(rsh_hash(key) % size);
  for (S p = 0; p < size; ++p) {
    const I old = rs_atomic_cas(keys + h, (I)-1, key);
    if (old == (I)-1 || old == key) {
      if (PLAIN)
        vals[h] = vals[h] + v;
      else
        rs_atomic_add_value(vals + h, v);
      return;
    }
    h = h + 1 == size ? 0 : h + 1;
  }
}

/* Hash phase of row `row`, thread t of `team`, g threads per B row (team /
 * g entries of A at once, each B row read by g consecutive threads). */
template <class S, class V, class O, class I>
RS_DEVICE RS_INLINE void rsh_accumulate_row(const rsh_csr<V, O, I>& a, const rsh_csr<V, O, I>& b,
                                            long long row, I* keys, V* vals, S size, bool pow2,
                                            int t, int team, int g) {
  typedef typename rsh_unsigned<O>::type U;
  const int sub = t / g, l = t % g, nsub = team / g;
  const bool balance = rsh_balance_long_rows(team, g);
  U alo, ahi;
  rsh_urow(a, row, alo, ahi);
  for (U ka = alo + (U)sub; ka < ahi; ka += (U)nsub) {
    U blo, bhi;
    rsh_urow(b, (unsigned long long)(a.cols[ka] - (I)a.base), blo, bhi);
    if (balance && bhi - blo >= (U)team) continue; /* the whole team's, below */
    const V av = a.vals[ka];
    for (U kb = blo + (U)l; kb < bhi; kb += (U)g)
      rsh_insert_pair<false>(keys, vals, size, pow2, (I)(b.cols[kb] - (I)b.base),
                             av * b.vals[kb]);
  }
  if (balance)
    rsh_team_long_rows(a, b, alo, ahi, t, team, true, [&](U ka, U kb) -> bool {
      rsh_insert_pair<false>(keys, vals, size, pow2, (I)(b.cols[kb] - (I)b.base),
                             a.vals[ka] * b.vals[kb]);
      return true;
    });
}

/* Deterministic step: entry ka of A times its B row, split over the team,
 * plain adds. */
template <class S, class V, class O, class I>
RS_DEVICE RS_INLINE void rsh_accumulate_entry(const rsh_csr<V, O, I>& a,
                                              const rsh_csr<V, O, I>& b, long long ka, I* keys,
                                              V* vals, S size, bool pow2, int t, int team) {
  typedef typename rsh_unsigned<O>::type U;
  const V av = a.vals[ka];
  U blo, bhi;
  rsh_urow(b, (unsigned long long)(a.cols[ka] - (I)a.base), blo, bhi);
  for (U kb = blo + (U)t; kb < bhi; kb += (U)team)
    rsh_insert_pair<true>(keys, vals, size, pow2, (I)(b.cols[kb] - (I)b.base),
                          av * b.vals[kb]);
}

/* Condense with the whole block on one table: chunks of block size; each
 * chunk is read, then (after a barrier, so no slot is overwritten before it
 * is read) every warp reserves its occupied slots with one atomicAdd on the
 * shared `counter` (zero, and the zero visible, on entry) and writes them at
 * counter's old value + its rank in the warp's ballot. Writes of chunk c go
 * below the number of occupied slots in chunks 0..c, slots already read.
 * Returns the number of occupied slots. Every thread of the block calls it. */
template <class S, class I, class V>
RS_DEVICE long long rsh_condense_block(I* keys, V* vals, S size, long long* counter) {
  const int tid = rs_tid(), lane = rs_lane();
  const S bdim = (S)rs_bdim();
  for (S base = 0; base < size; base += bdim) {
    const S s = base + (S)tid;
    I key = (I)-1;
    V v = rs_zero<V>();
    if (s < size) {
      key = keys[s];
      v = vals[s];
    }
    rs_sync();
    const bool full = key != (I)-1;
    const unsigned long long bal = rs_ballot(full);
    long long at = 0;
    if (lane == 0 && bal != 0ull) at = rs_atomic_add(counter, (long long)rs_popcll(bal));
    at = rs_shfl(at, 0);
    if (full) {
      at += rs_popcll(bal & ((1ull << lane) - 1ull));
      keys[at] = key;
      vals[at] = v;
    }
  }
  rs_sync();
  return *counter;
}

/* Condense of a team of at most a warp (teams aligned in the warp), with
 * ballots only: chunk by chunk, each occupied slot goes to the team's count
 * so far + its rank in the team's ballot bits. Writes go at or below the
 * slots of this and earlier chunks; a warp barrier (rs_syncwarp) after the
 * ballot orders them after every lane's read of the chunk (the ballot alone
 * orders execution, not memory). Returns the count. Every thread of the
 * warp calls it (same `size` and `team`). kWarpBarrier is false only in the
 * emulator's planted race (kernels/testing/launch_emulator.cpp), which shows
 * that the race check reports the routine without its barrier. */
template <class I, class V, bool kWarpBarrier = true>
RS_DEVICE long long rsh_condense_team(I* keys, V* vals, unsigned size, int t, int team) {
  const int first_lane = rs_lane() - t;
  const unsigned long long team_bits = team >= 64 ? ~0ull : ((1ull << team) - 1ull);
  long long run = 0;
  for (unsigned base = 0; base < size; base += (unsigned)team) {
    const unsigned s = base + (unsigned)t;
    I key = (I)-1;
    V v = rs_zero<V>();
    if (s < size) {
      key = keys[s];
      v = vals[s];
    }
    const bool full = key != (I)-1;
    const unsigned long long bits = (rs_ballot(full) >> first_lane) & team_bits;
    /* The ballot orders execution, not memory: without this a lane's write
     * below could overtake another lane's read of that slot above. */
    if (kWarpBarrier) rs_syncwarp();
    if (full) {
      const long long at = run + rs_popcll(bits & ((1ull << t) - 1ull));
      keys[at] = key;
      vals[at] = v;
    }
    run += rs_popcll(bits);
  }
  return run;
}

/* Bitonic sort of keys[0..n) (with their values) by unsigned key (-1 last),
 * in place, by `nthreads` threads (this is thread t) with a block barrier
 * after each step; S, the index type, is 32-bit for shared tables. `len` is
 * a power of two >= n, the same in the whole block
 * (every thread of the block calls this with it, whatever its n). The
 * network is the one whose first step of each stage compares mirrored
 * positions, so every comparator puts the smaller key at the lower
 * position; positions >= n behave as +inf keys and their comparators are
 * skipped, which sorts any n without padding. */
template <class S, class I, class V>
RS_DEVICE void rsh_bitonic(I* keys, V* vals, S n, S len, S t, S nthreads) {
  typedef typename rsh_unsigned<I>::type U;
  const S half = len >> 1;
  int lk = 1;
  for (S k = 2; k <= len; k <<= 1, ++lk) {
    int lj = lk - 1;
    for (S j = k >> 1; j > 0; j >>= 1, --lj) {
      const bool mirror = j == (k >> 1);
      for (S p = t; p < half; p += nthreads) {
        const S r = p & (j - 1);
        const S lo = ((p >> lj) << (lj + 1)) + r;
        const S hi = mirror ? lo + 2 * (j - r) - 1 : lo + j;
        if (hi < n) {
          const I kl = keys[lo], kh = keys[hi];
          if ((U)kh < (U)kl) {
            const V vl = vals[lo];
            keys[lo] = kh;
            keys[hi] = kl;
            vals[lo] = vals[hi];
            vals[hi] = vl;
          }
        }
      }
      rs_sync();
    }
  }
}

/* C's value of a sum: alpha * sum (+ beta * the value already there, read
 * only when beta != 0). alpha and beta are read here, from the cache, rather
 * than held in registers through the hash phase. */
template <class V>
RS_DEVICE RS_INLINE V rsh_out(V sum, const V* alpha, const V* beta, const V* old) {
  V v = *alpha * sum;
  const V b = *beta;
  if (!rs_is_zero(b)) v = v + b * *old;
  return v;
}

/* Writes the first min(n, c_len) entries of a sorted table to C. */
template <class I, class V>
RS_DEVICE RS_INLINE void rsh_write_sorted(const I* keys, const V* vals, long long n,
                                          long long c_lo, long long c_len, I* c_cols, V* c_vals,
                                          int c_base, const V* alpha, const V* beta, long long t,
                                          long long nthreads) {
  const long long nout = n < c_len ? n : c_len;
  for (long long e = t; e < nout; e += nthreads) {
    const I key = keys[e];
    if (key == (I)-1) continue;
    c_cols[c_lo + e] = (I)(key + c_base);
    c_vals[c_lo + e] = rsh_out(vals[e], alpha, beta, c_vals + c_lo + e);
  }
}

/* Ranks a condensed row of n entries (keys[0..n), columns below ncols)
 * by a bitmap of its columns and writes each entry straight to C at its
 * rank: no sort. The bitmap (one bit per column, `words` 32-bit words) and
 * the exclusive prefix counts of its words are the 2 * words unsigned ints
 * `bits`, placed by the caller after the row's entries. Cost: O(n + words)
 * per row, where a bitonic sort in global memory costs O(n log^2 n) with a
 * block barrier per step (rmat rows of 10^4..10^5 entries spent most of the
 * numeric phase sorting). `scan` is a shared array of rs_bdim() long longs.
 * Every thread of the block calls it. */
template <class I, class V>
RS_DEVICE void rsh_rank_write_global(const I* keys, const V* vals, long long n,
                                     unsigned* bits, long long words, long long* scan,
                                     long long c_lo, long long c_len, I* c_cols, V* c_vals,
                                     int c_base, const V* alpha, const V* beta) {
  const int tid = rs_tid(), bdim = rs_bdim();
  unsigned* const prefix = bits + words;
  for (long long w = tid; w < words; w += bdim) bits[w] = 0u;
  rs_sync();
  for (long long e = tid; e < n; e += bdim) {
    const unsigned long long col = (unsigned long long)keys[e];
    rs_atomic_or(bits + (col >> 5), 1u << (col & 31ull));
  }
  rs_sync();
  /* Exclusive scan of the words' popcounts: each thread a contiguous
   * chunk, then a Hillis-Steele scan of the chunk sums in `scan`. */
  const long long chunk = (words + bdim - 1) / bdim;
  const long long w0 = (long long)tid * chunk;
  const long long w1 = w0 + chunk < words ? w0 + chunk : words;
  long long sum = 0;
  for (long long w = w0; w < w1; ++w) sum += rs_popcll((unsigned long long)bits[w]);
  scan[tid] = sum;
  rs_sync();
  for (int d = 1; d < bdim; d <<= 1) {
    const long long add = tid >= d ? scan[tid - d] : 0;
    rs_sync();
    scan[tid] += add;
    rs_sync();
  }
  long long run = scan[tid] - sum;
  for (long long w = w0; w < w1; ++w) {
    prefix[w] = (unsigned)run;
    run += rs_popcll((unsigned long long)bits[w]);
  }
  rs_sync();
  for (long long e = tid; e < n; e += bdim) {
    const I key = keys[e];
    const unsigned long long col = (unsigned long long)key;
    const unsigned below = bits[col >> 5] & ((1u << (col & 31ull)) - 1u);
    const long long rank = (long long)prefix[col >> 5] + rs_popcll((unsigned long long)below);
    if (rank < c_len) {
      c_cols[c_lo + rank] = (I)(key + c_base);
      c_vals[c_lo + rank] = rsh_out(vals[e], alpha, beta, c_vals + c_lo + rank);
    }
  }
}

/* Rank sort of a small uncondensed table straight into C: each occupied
 * slot counts the smaller keys (empty slots compare as the largest) and
 * writes itself at that rank. Each lane starts its scan at its own slot so
 * that the teams of a warp read different banks. */
template <class I, class V>
RS_DEVICE RS_INLINE void rsh_rank_write(const I* keys, const V* vals, unsigned size, int t,
                                        int team, long long c_lo, long long c_len, I* c_cols,
                                        V* c_vals, int c_base, const V* alpha, const V* beta) {
  typedef typename rsh_unsigned<I>::type U;
  const unsigned start = (unsigned)rs_lane() % size;
  for (unsigned s = (unsigned)t; s < size; s += (unsigned)team) {
    const I key = keys[s];
    if (key == (I)-1) continue;
    long long rank = 0;
    unsigned j = start;
    for (unsigned i = 0; i < size; ++i) {
      rank += (U)keys[j] < (U)key ? 1 : 0;
      j = j + 1 == size ? 0 : j + 1;
    }
    if (rank < c_len) {
      c_cols[c_lo + rank] = (I)(key + c_base);
      c_vals[c_lo + rank] = rsh_out(vals[s], alpha, beta, c_vals + c_lo + rank);
    }
  }
}

/* rs_numeric_shared: C's row for each listed row (nnz(row) = c_offsets[row
 * + 1] - c_offsets[row], zero-based long long offsets).
 *
 * Launch: block = (rows per block) * team, a multiple of RS_WARP; grid any
 * (grid-stride); dynamic shared = rows per block * table_size *
 * (sizeof(index_t) + sizeof(value_t)) + 16 bytes. team: power of two <=
 * block; group: power of two (clamped to team); table_size (any size, a
 * power of two probes with a mask) >= the nnz of every listed row. Shared
 * layout: 16 bytes of counters, then the value tables and the key tables,
 * the array of the wider type first (alignment); table r for the block's
 * r-th row. Tables below 64 slots are rank-sorted; larger ones are
 * condensed (block counter when team == block, ballots when team <=
 * RS_WARP; not at all otherwise, sorting the whole table) and
 * bitonic-sorted. alpha, beta: device pointers to one value each. */
template <class V, class O, class I>
RS_DEVICE void rsh_numeric_shared(const unsigned* rows, long long count,
                                  const rsh_csr<V, O, I> a, const rsh_csr<V, O, I> b,
                                  const V* alpha_p, const V* beta_p, const long long* c_offsets,
                                  I* c_cols, V* c_vals, int c_base, long long table_size,
                                  int team, int group, int deterministic) {
  RS_DYNAMIC_SHARED(long long, counters);
  const int tid = rs_tid(), bdim = rs_bdim();
  const int rpb = bdim / team;
  const int slot = tid / team, t = tid % team;
  const int g = group < 1 ? 1 : (group < team ? group : team);
  const unsigned size = (unsigned)table_size;
  const bool pow2 = (size & (size - 1u)) == 0u;
  const long long slots = (long long)rpb * table_size;
  V* vals;
  I* keys;
  if (sizeof(V) >= sizeof(I)) {
    vals = reinterpret_cast<V*>(counters + 2);
    keys = reinterpret_cast<I*>(vals + slots);
  } else {
    keys = reinterpret_cast<I*>(counters + 2);
    vals = reinterpret_cast<V*>(keys + slots);
  }
  I* const my_keys = keys + (long long)slot * table_size;
  V* const my_vals = vals + (long long)slot * table_size;
  for (long long first = rs_bid() * rpb; first < count; first += rs_gdim() * rpb) {
    const long long k = first + slot;
    const bool valid = k < count;
    const long long row = valid ? (long long)rows[k] : 0;
    for (unsigned s = (unsigned)t; s < size; s += (unsigned)team) {
      my_keys[s] = (I)-1;
      my_vals[s] = rs_zero<V>();
    }
    if (tid == 0) {
      counters[0] = 0;
      counters[1] = 0;
    }
    rs_sync();

    /* hash */
    long long alo = 0, ahi = 0;
    if (valid) rsh_row(a, row, alo, ahi);
    if (!deterministic) {
      if (valid) rsh_accumulate_row(a, b, row, my_keys, my_vals, size, pow2, t, team, g);
    } else if (deterministic == 2 || team == 1) {
      if (t == 0)
        for (long long ka = alo; ka < ahi; ++ka)
          rsh_accumulate_entry(a, b, ka, my_keys, my_vals, size, pow2, 0, 1);
    } else {
      if (valid && t == 0) rs_atomic_max(&counters[0], ahi - alo);
      rs_sync();
      const long long steps = counters[0];
      for (long long j = 0; j < steps; ++j) {
        if (alo + j < ahi)
          rsh_accumulate_entry(a, b, alo + j, my_keys, my_vals, size, pow2, t, team);
        rs_sync();
      }
    }
    rs_sync();

    /* condense, sort, write */
    long long c_lo = 0, c_len = 0;
    if (valid) {
      c_lo = c_offsets[row];
      c_len = c_offsets[row + 1] - c_lo;
    }
    if (size < 64u) {
      if (valid)
        rsh_rank_write(my_keys, my_vals, size, t, team, c_lo, c_len, c_cols, c_vals, c_base,
                       alpha_p, beta_p);
    } else {
      long long n, len;
      if (team == bdim) {
        n = rsh_condense_block(my_keys, my_vals, size, &counters[1]);
        len = rsh_pow2_ceil(n);
      } else if (team <= RS_WARP) {
        n = rsh_condense_team(my_keys, my_vals, size, t, team);
        if (t == 0 && n > 0) rs_atomic_max(&counters[1], n);
        rs_sync();
        len = rsh_pow2_ceil(counters[1]);
      } else {
        n = valid ? (long long)size : 0;
        len = rsh_pow2_ceil((long long)size);
      }
      rsh_bitonic(my_keys, my_vals, (unsigned)n, (unsigned)len, (unsigned)t, (unsigned)team);
      if (valid)
        rsh_write_sorted(my_keys, my_vals, n, c_lo, c_len, c_cols, c_vals, c_base, alpha_p,
                         beta_p, t, team);
    }
    rs_sync();
  }
}

/* rs_numeric_global: the same for one listed row per block (grid-stride over
 * the list), with row k's tables at key_tables / val_tables[table_offsets[k]
 * .. table_offsets[k + 1]) in global memory (any size >= the row's nnz; the
 * planner uses a power of two >= 2 nnz), initialised here. Condense with a
 * shared counter; then, when the values past the row's entries hold a
 * bitmap of op(B)'s columns (the planner sizes the tables for it where
 * op(B) is narrow enough: gpu_bins::numeric_global_table), rank the entries
 * by it and write them (rsh_rank_write_global); else a bitonic sort in
 * global memory with block barriers.
 * Launch: block a multiple of RS_WARP (up to 1024), no dynamic shared
 * memory. Threads per B row: rsh_row_group, per row. */
template <class V, class O, class I>
RS_DEVICE void rsh_numeric_global(const unsigned* rows, long long count,
                                  const rsh_csr<V, O, I> a, const rsh_csr<V, O, I> b,
                                  const V* alpha_p, const V* beta_p, const long long* c_offsets,
                                  I* c_cols, V* c_vals, int c_base, const long long* table_offsets,
                                  I* key_tables, V* val_tables, int deterministic) {
  RS_SHARED(long long, counters, 2);
  RS_SHARED(long long, scan, 1024);
  const int tid = rs_tid(), bdim = rs_bdim();
  const long long words = (b.ncols + 31) / 32;
  for (long long k = rs_bid(); k < count; k += rs_gdim()) {
    const long long row = (long long)rows[k];
    const long long off = table_offsets[k];
    const unsigned long long size = (unsigned long long)(table_offsets[k + 1] - off);
    const bool pow2 = (size & (size - 1ull)) == 0ull;
    I* const keys = key_tables + off;
    V* const vals = val_tables + off;
    for (unsigned long long s = (unsigned long long)tid; s < size; s += (unsigned long long)bdim) {
      keys[s] = (I)-1;
      vals[s] = rs_zero<V>();
    }
    if (tid == 0) counters[1] = 0;
    rs_sync();

    long long alo, ahi;
    rsh_row(a, row, alo, ahi);
    if (size > 0) {
      if (!deterministic) {
        const int g = rsh_row_group(a, b, row, &counters[0]);
        rsh_accumulate_row(a, b, row, keys, vals, size, pow2, tid, bdim, g);
      } else if (deterministic == 2) {
        if (tid == 0)
          for (long long ka = alo; ka < ahi; ++ka)
            rsh_accumulate_entry(a, b, ka, keys, vals, size, pow2, 0, 1);
      } else {
        for (long long ka = alo; ka < ahi; ++ka) {
          rsh_accumulate_entry(a, b, ka, keys, vals, size, pow2, tid, bdim);
          rs_sync();
        }
      }
    }
    rs_sync();

    const long long n = rsh_condense_block(keys, vals, size, &counters[1]);
    const long long c_lo = c_offsets[row];
    /* The bitmap at the end of the values, past the n entries (the same
     * test in every thread: n and size are the block's). */
    unsigned* const bits = (unsigned*)(vals + size) - 2 * words;
    if ((const char*)bits >= (const char*)(vals + n)) {
      rsh_rank_write_global(keys, vals, n, bits, words, scan, c_lo, c_offsets[row + 1] - c_lo,
                            c_cols, c_vals, c_base, alpha_p, beta_p);
    } else {
      rsh_bitonic(keys, vals, (unsigned long long)n, (unsigned long long)rsh_pow2_ceil(n),
                  (unsigned long long)tid, (unsigned long long)bdim);
      rsh_write_sorted(keys, vals, n, c_lo, c_offsets[row + 1] - c_lo, c_cols, c_vals, c_base,
                       alpha_p, beta_p, tid, bdim);
    }
    rs_sync();
  }
}

/* rs_numeric_single: rows of A with exactly one entry (a, c) and B without
 * repeated or unsorted columns: C's row = alpha * (a * B's row c) (+ beta *
 * old), written in B's order. Launch: grid-stride, a warp per listed row
 * (lanes stride over B's row, coalesced), any block, no shared memory. */
template <class V, class O, class I>
RS_DEVICE void rsh_numeric_single(const unsigned* rows, long long count,
                                  const rsh_csr<V, O, I> a, const rsh_csr<V, O, I> b,
                                  const V* alpha_p, const V* beta_p, const long long* c_offsets,
                                  I* c_cols, V* c_vals, int c_base) {
  const long long gtid = rs_bid() * rs_bdim() + rs_tid();
  const long long lane = gtid % RS_WARP;
  const long long nwarps = rs_gdim() * rs_bdim() / RS_WARP;
  for (long long k = gtid / RS_WARP; k < count; k += nwarps) {
    const long long row = (long long)rows[k];
    const long long ka = (long long)a.rows[row] - a.base;
    const V av = a.vals[ka];
    long long blo, bhi;
    rsh_row(b, (long long)a.cols[ka] - a.base, blo, bhi);
    const long long c_lo = c_offsets[row];
    const long long c_len = c_offsets[row + 1] - c_lo;
    const long long len = bhi - blo < c_len ? bhi - blo : c_len;
    for (long long e = lane; e < len; e += RS_WARP) {
      /* 0 + product, as a hash table forms it. */
      const V sum = rs_zero<V>() + av * b.vals[blo + e];
      c_cols[c_lo + e] = (I)(b.cols[blo + e] - b.base + c_base);
      c_vals[c_lo + e] = rsh_out(sum, alpha_p, beta_p, c_vals + c_lo + e);
    }
  }
}

RS_GLOBAL RS_LAUNCH_BOUNDS(1024) void rs_numeric_shared(const unsigned* rows, long long count, rs_csr a, rs_csr b,
                                 const value_t* alpha, const value_t* beta,
                                 const long long* c_offsets, index_t* c_cols, value_t* c_vals,
                                 int c_base, long long table_size, int team, int group,
                                 int deterministic) {
  rsh_numeric_shared(rows, count, rsh_view(a), rsh_view(b), alpha, beta, c_offsets, c_cols,
                     c_vals, c_base, table_size, team, group, deterministic);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(1024) void rs_numeric_global(const unsigned* rows, long long count, rs_csr a, rs_csr b,
                                 const value_t* alpha, const value_t* beta,
                                 const long long* c_offsets, index_t* c_cols, value_t* c_vals,
                                 int c_base, const long long* table_offsets, index_t* key_tables,
                                 value_t* val_tables, int deterministic) {
  rsh_numeric_global(rows, count, rsh_view(a), rsh_view(b), alpha, beta, c_offsets, c_cols,
                     c_vals, c_base, table_offsets, key_tables, val_tables, deterministic);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_numeric_single(const unsigned* rows, long long count, rs_csr a, rs_csr b,
                                 const value_t* alpha, const value_t* beta,
                                 const long long* c_offsets, index_t* c_cols, value_t* c_vals,
                                 int c_base) {
  rsh_numeric_single(rows, count, rsh_view(a), rsh_view(b), alpha, beta, c_offsets, c_cols,
                     c_vals, c_base);
}
