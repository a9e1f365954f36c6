/* kernels/symbolic.cu: nnz of each row of C by hashing its columns
 * (OpSparse's symbolic step, §5.2, with the DCU study's threads per B
 * row).
 *
 *   rs_symbolic_shared  one hash table per row in shared memory, several
 *                       rows per block when team < block; a row whose count
 *                       reaches spill_limit goes to a spill list;
 *   rs_symbolic_global  one block per row, the table in global memory (the
 *                       spilled rows and any row too long for shared memory).
 *
 * Tables hold column keys, empty = -1. An insert is linear probing with ONE
 * atomicCAS per probe (Algorithm 4): old = CAS(slot, -1, key); old == -1:
 * the key is new; old == key: it was there; else the next slot. Each thread
 * counts the keys it inserted in a register and the counts are summed at the
 * end (shuffles, or the dead table for teams wider than a warp), except in a
 * row that may spill, where a shared counter is kept so the whole block can
 * stop as soon as the limit is reached.
 */
#ifndef RS_AMALGAMATED
#include "portability.h"
#endif

/* Uses the helpers (rsh_*) defined in setup.cu, which precedes this file
 * in the kernels' concatenation order (kernels/README.md). */

/* Inserts `key` into `table` (`size` slots; `pow2`: size is a power of
 * two, so the first slot is a mask, else a modulo). One atomicCAS per
 * probe. Returns 1 when the key is new, 0 when it was already there, -1 when
 * all `size` slots hold other keys (only when a row has more distinct
 * columns than its table: the caller spills or reports it). */
template <class S, class I>
RS_DEVICE RS_INLINE int rsh_insert_key(I* table, S size, bool pow2, I key) {
  S h = pow2 ? ((S)rsh_hash(key) & (size - 1)) : (S)(rsh_hash(key) % size);
  for (S p = 0; p < size; ++p) {
    const I old = rs_atomic_cas(table + h, (I)-1, key);
    if (old == (I)-1) return 1;
    if (old == key) return 0;
    h = h + 1 == size ? 0 : h + 1;
  }
  return -1;
}

/* Hashes the columns of row `row` of A*B into `table`: thread `t` of a team
 * of `team` threads, `g` threads per B row, so team / g entries of A's row
 * are taken at once and each B row is read by g consecutive threads
 * (coalesced); where a team of whole warps has several sub-groups, the
 * entries whose B row has at least `team` entries are taken by the whole
 * team instead (rsh_team_long_rows; every lane of the team's warps must
 * call this). Returns the number of new keys this thread inserted; a full
 * table adds `size` (so the row's total reaches any spill limit) and stops.
 * With `counter` non-NULL (a shared count of the row's keys), stops when
 * the count reaches `limit`. */
template <class S, class V, class O, class I>
RS_DEVICE RS_INLINE long long rsh_hash_row(const rsh_csr<V, O, I>& a, const rsh_csr<V, O, I>& b,
                                           long long row, I* table, S size, bool pow2, int t,
                                           int team, int g, long long* counter,
                                           long long limit) {
  typedef typename rsh_unsigned<O>::type U;
  const int sub = t / g, l = t % g, nsub = team / g;
  const bool balance = rsh_balance_long_rows(team, g);
  U alo, ahi;
  rsh_urow(a, row, alo, ahi);
  long long mine = 0;
  /* One product: false once this thread stops (a full table, or the
   * row's count at the limit). */
  auto insert = [&](U kb) -> bool {
    const I key = b.cols[kb] - (I)b.base;
    const int r = rsh_insert_key(table, size, pow2, key);
    if (r == 0) return true;
    if (r < 0) {
      if (counter != 0) rs_atomic_add(counter, (long long)size);
      mine += (long long)size;
      return false;
    }
    ++mine;
    return !(counter != 0 && rs_atomic_add(counter, 1ll) + 1 >= limit);
  };
  bool go = true;
  for (U ka = alo + (U)sub; go && ka < ahi; ka += (U)nsub) {
    if (counter != 0 && rs_atomic_load(counter) >= limit) {
      go = false;
      break;
    }
    U blo, bhi;
    rsh_urow(b, (unsigned long long)(a.cols[ka] - (I)a.base), blo, bhi);
    if (balance && bhi - blo >= (U)team) continue; /* the whole team's, below */
    for (U kb = blo + (U)l; go && kb < bhi; kb += (U)g) go = insert(kb);
  }
  if (balance)
    rsh_team_long_rows(a, b, alo, ahi, t, team, go, [&](U ka, U kb) -> bool {
      (void)ka;
      if (counter != 0 && rs_atomic_load(counter) >= limit) return false;
      return insert(kb);
    });
  return mine;
}

/* Sum of `v` over each team (valid in the team's thread 0). Teams of at
 * most a warp: shuffles. Wider teams: warp sums are parked in `parking` (at
 * least block / RS_WARP entries of shared memory nobody reads any more)
 * across one barrier. Every thread of the block calls it. */
template <class I>
RS_DEVICE RS_INLINE long long rsh_team_sum(long long v, int team, I* parking) {
  const int w = team < RS_WARP ? team : RS_WARP;
  for (int d = w / 2; d > 0; d >>= 1) v += rs_shfl_xor(v, d);
  if (team <= RS_WARP) return v;
  const int tid = rs_tid();
  if (rs_lane() == 0) parking[tid / RS_WARP] = (I)v;
  rs_sync();
  long long total = 0;
  if (tid % team == 0)
    for (int wi = tid / RS_WARP; wi < (tid + team) / RS_WARP; ++wi) total += parking[wi];
  return total;
}

/* rs_symbolic_shared: row_size[row] = nnz of C's row for each listed row.
 *
 * Launch: block = (rows per block) * team, a multiple of RS_WARP; grid any
 * (grid-stride over groups of rows per block); dynamic shared = rows per
 * block * table_size * sizeof(index_t) + 16 bytes. team: power of two <=
 * block; group: power of two (clamped to team); table_size >= team /
 * RS_WARP and, when spill_limit == 0, at least the row's distinct columns
 * (nprod bounds them). Shared layout: 16 bytes of counters, then the
 * tables, table r for the block's r-th row.
 *
 * spill_limit > 0: a row whose count reaches min(spill_limit, table_size)
 * is appended to spill_rows (slot rs_atomic_add(spill_count, 1)) and its
 * row_size (nprod) is left for the global kernel. With one row per block the
 * block keeps a shared count and stops early. */
template <class V, class O, class I>
RS_DEVICE void rsh_symbolic_shared(const unsigned* rows, long long count,
                                   const rsh_csr<V, O, I> a, const rsh_csr<V, O, I> b,
                                   long long* row_size, long long table_size, int team,
                                   int group, long long spill_limit, unsigned* spill_rows,
                                   long long* spill_count) {
  RS_DYNAMIC_SHARED(long long, counters);
  I* const tables = reinterpret_cast<I*>(counters + 2);
  const int tid = rs_tid();
  const int rpb = rs_bdim() / team;
  const int slot = tid / team, t = tid % team;
  const int g = group < 1 ? 1 : (group < team ? group : team);
  const unsigned size = (unsigned)table_size;
  const bool pow2 = (size & (size - 1u)) == 0u;
  I* const table = tables + (long long)slot * table_size;
  const long long limit =
      spill_limit > 0 ? (spill_limit < table_size ? spill_limit : table_size) : 0;
  const bool track = spill_limit > 0 && rpb == 1;
  for (long long first = rs_bid() * rpb; first < count; first += rs_gdim() * rpb) {
    const long long k = first + slot;
    const bool valid = k < count;
    const long long row = valid ? (long long)rows[k] : 0;
    for (unsigned s = (unsigned)t; s < size; s += (unsigned)team) table[s] = (I)-1;
    if (tid == 0) counters[0] = 0;
    rs_sync();
    long long mine = 0;
    if (valid)
      mine = rsh_hash_row(a, b, row, table, size, pow2, t, team, g, track ? counters : 0, limit);
    rs_sync();
    const long long total = track ? counters[0] : rsh_team_sum(mine, team, tables);
    if (valid && t == 0) {
      if (spill_limit > 0 && total >= limit)
        spill_rows[rs_atomic_add(spill_count, 1ll)] = (unsigned)row;
      else
        row_size[row] = total;
    }
    rs_sync();
  }
}

/* rs_symbolic_global: the same for one listed row per block (grid-stride
 * over the list), with row k's table at tables[table_offsets[k] ..
 * table_offsets[k + 1]) in global memory (any size >= the row's distinct
 * columns; a power of two probes with a mask), filled with -1 here.
 * Launch: block a multiple of RS_WARP (up to 1024), no dynamic shared
 * memory. Threads per B row: rsh_row_group, per row. */
template <class V, class O, class I>
RS_DEVICE void rsh_symbolic_global(const unsigned* rows, long long count,
                                   const rsh_csr<V, O, I> a, const rsh_csr<V, O, I> b,
                                   long long* row_size, const long long* table_offsets,
                                   I* tables) {
  RS_SHARED(long long, parts, 1024 / 32);
  RS_SHARED(long long, products, 1);
  const int tid = rs_tid(), bdim = rs_bdim();
  for (long long k = rs_bid(); k < count; k += rs_gdim()) {
    const long long row = (long long)rows[k];
    const long long off = table_offsets[k];
    const unsigned long long size = (unsigned long long)(table_offsets[k + 1] - off);
    const bool pow2 = (size & (size - 1ull)) == 0ull;
    I* const table = tables + off;
    for (unsigned long long s = (unsigned long long)tid; s < size; s += (unsigned long long)bdim)
      table[s] = (I)-1;
    rs_sync();
    const int g = rsh_row_group(a, b, row, &products[0]);
    long long mine = 0;
    if (size > 0) mine = rsh_hash_row(a, b, row, table, size, pow2, tid, bdim, g, 0, 0);
    mine = rsh_warp_sum(mine);
    if (rs_lane() == 0) parts[tid / RS_WARP] = mine;
    rs_sync();
    if (tid == 0) {
      long long total = 0;
      for (int w = 0; w < bdim / RS_WARP; ++w) total += parts[w];
      row_size[row] = total;
    }
    rs_sync();
  }
}

RS_GLOBAL RS_LAUNCH_BOUNDS(1024) void rs_symbolic_shared(const unsigned* rows, long long count, rs_csr a, rs_csr b,
                                  long long* row_size, long long table_size, int team, int group,
                                  long long spill_limit, unsigned* spill_rows,
                                  long long* spill_count) {
  rsh_symbolic_shared(rows, count, rsh_view(a), rsh_view(b), row_size, table_size, team, group,
                      spill_limit, spill_rows, spill_count);
}

RS_GLOBAL RS_LAUNCH_BOUNDS(1024) void rs_symbolic_global(const unsigned* rows, long long count, rs_csr a, rs_csr b,
                                  long long* row_size, const long long* table_offsets,
                                  index_t* tables) {
  rsh_symbolic_global(rows, count, rsh_view(a), rsh_view(b), row_size, table_offsets, tables);
}
