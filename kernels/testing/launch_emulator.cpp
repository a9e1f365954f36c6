// Kernels that exercise the emulator's primitives (thread ids, shared
// memory, barriers, atomics, warp operations, complex values), with their
// host entry points; kernels/host-tests/tests/emulator.rs checks them.
// Compiled by kernels/host-tests/build.rs once per variant, after
// portability.h and every kernels/*.cu.

namespace {

// out[5 * g + k] = tid, bid, bdim, gdim, lane of global thread g.
RS_GLOBAL void rs_test_ids(long long* out) {
  const long long g = rs_bid() * rs_bdim() + rs_tid();
  out[5 * g + 0] = rs_tid();
  out[5 * g + 1] = rs_bid();
  out[5 * g + 2] = rs_bdim();
  out[5 * g + 3] = rs_gdim();
  out[5 * g + 4] = rs_lane();
}

// The shuffles of one type; x = 5 g + 7 in thread g. Writes 11 results.
template <class T>
RS_DEVICE void rs_test_shuffle_type(long long* out, long long g) {
  const int lane = rs_lane();
  const T x = T(5 * g + 7);
  out[0] = (long long)rs_shfl(x, (lane * 7 + 3) % RS_WARP);
  out[1] = (long long)rs_shfl(x, lane + RS_WARP + 1);
  out[2] = (long long)rs_shfl(x, -1);
  out[3] = (long long)rs_shfl_down(x, 1u);
  out[4] = (long long)rs_shfl_down(x, 5u);
  out[5] = (long long)rs_shfl_down(x, unsigned(RS_WARP - 1));
  out[6] = (long long)rs_shfl_down(x, unsigned(RS_WARP));
  out[7] = (long long)rs_shfl_xor(x, 1);
  out[8] = (long long)rs_shfl_xor(x, 6);
  out[9] = (long long)rs_shfl_xor(x, RS_WARP - 1);
  out[10] = (long long)rs_shfl_xor(x, RS_WARP);
}

// out[66 * g + 11 * t + k]: result k for type t (int, unsigned, long long,
// unsigned long long, float, double).
RS_GLOBAL void rs_test_shuffles(long long* out) {
  const long long g = rs_bid() * rs_bdim() + rs_tid();
  long long* o = out + 66 * g;
  rs_test_shuffle_type<int>(o, g);
  rs_test_shuffle_type<unsigned>(o + 11, g);
  rs_test_shuffle_type<long long>(o + 22, g);
  rs_test_shuffle_type<unsigned long long>(o + 33, g);
  rs_test_shuffle_type<float>(o + 44, g);
  rs_test_shuffle_type<double>(o + 55, g);
}

// out[4 * g + k]: ballot of pred[g], of true, of false, popcll of the first.
RS_GLOBAL void rs_test_ballot(const int* pred, unsigned long long* out) {
  const long long g = rs_bid() * rs_bdim() + rs_tid();
  const unsigned long long b = rs_ballot(pred[g] != 0);
  out[4 * g + 0] = b;
  out[4 * g + 1] = rs_ballot(true);
  out[4 * g + 2] = rs_ballot(false);
  out[4 * g + 3] = (unsigned long long)rs_popcll(b);
}

// Every thread hits the same global counters (`reps` times each) and, per
// block, shared ones. counters: [0] int add, [1] unsigned add, [2] long long
// add of -3, [3] unsigned long long add, [4] int CAS increments, [5] long
// long CAS increments, [6] unsigned CAS increments, [7] unsigned long long
// CAS increments, [8] atomic_min (as unsigned long long) of 1000 + g, [9]
// atomic_max of 10 * g. fsum/dsum: float and double adds of 1. olds[g * reps
// + r]: the value rs_atomic_add returned on counter [3]. block_out[2 * b]:
// the block's shared int counter, [2 * b + 1] its shared double counter.
RS_GLOBAL void rs_test_atomics(int reps, long long* counters, float* fsum, double* dsum,
                               unsigned long long* olds, long long* block_out) {
  RS_SHARED(int, s_count, 1);
  RS_SHARED(double, s_sum, 1);
  const long long g = rs_bid() * rs_bdim() + rs_tid();
  if (rs_tid() == 0) {
    s_count[0] = 0;
    s_sum[0] = 0.0;
  }
  rs_sync();
  int* c_int = reinterpret_cast<int*>(&counters[0]);
  unsigned* c_uns = reinterpret_cast<unsigned*>(&counters[1]);
  int* cas_int = reinterpret_cast<int*>(&counters[4]);
  unsigned* cas_uns = reinterpret_cast<unsigned*>(&counters[6]);
  unsigned long long* c_ull = reinterpret_cast<unsigned long long*>(&counters[3]);
  unsigned long long* cas_ull = reinterpret_cast<unsigned long long*>(&counters[7]);
  for (int r = 0; r < reps; ++r) {
    rs_atomic_add(c_int, 1);
    rs_atomic_add(c_uns, 2u);
    rs_atomic_add(&counters[2], -3LL);
    olds[g * reps + r] = rs_atomic_add(c_ull, 1ull);
    int oi = rs_atomic_add(cas_int, 0);
    for (;;) {
      const int seen = rs_atomic_cas(cas_int, oi, oi + 1);
      if (seen == oi) break;
      oi = seen;
    }
    long long ol = rs_atomic_add(&counters[5], 0LL);
    for (;;) {
      const long long seen = rs_atomic_cas(&counters[5], ol, ol + 1);
      if (seen == ol) break;
      ol = seen;
    }
    unsigned ou = rs_atomic_add(cas_uns, 0u);
    for (;;) {
      const unsigned seen = rs_atomic_cas(cas_uns, ou, ou + 1u);
      if (seen == ou) break;
      ou = seen;
    }
    unsigned long long oull = rs_atomic_add(cas_ull, 0ull);
    for (;;) {
      const unsigned long long seen = rs_atomic_cas(cas_ull, oull, oull + 1ull);
      if (seen == oull) break;
      oull = seen;
    }
    rs_atomic_min(reinterpret_cast<unsigned long long*>(&counters[8]),
                  (unsigned long long)(1000 + g));
    rs_atomic_max(&counters[9], 10 * g);
    rs_atomic_add(fsum, 1.0f);
    rs_atomic_add(dsum, 1.0);
    rs_atomic_add(s_count, 1);
    rs_atomic_add(s_sum, 0.5);
  }
  rs_sync();
  if (rs_tid() == 0) {
    block_out[2 * rs_bid()] = s_count[0];
    block_out[2 * rs_bid() + 1] = (long long)(2.0 * s_sum[0]);
  }
}

// Barriers and shared memory. garbage[g]: the raw bits thread g found in
// its slot of the static and dynamic shared arrays before writing them
// (2 words). Then `rounds` times: write own slot, rs_sync, read the slot of
// thread (tid + r + 1) % bdim, rs_sync; sum[g] = the sum of what it read.
// addr[2 g], addr[2 g + 1]: the addresses of both arrays as seen by g.
RS_GLOBAL void rs_test_barrier(int rounds, unsigned long long* garbage, long long* sum,
                               unsigned long long* addr) {
  RS_SHARED(long long, s_val, 1024);
  RS_DYNAMIC_SHARED(long long, d_val);
  const int tid = rs_tid();
  const int bdim = rs_bdim();
  const long long g = rs_bid() * bdim + tid;
  long long raw_s = s_val[tid];
  long long raw_d = d_val[tid];
  garbage[2 * g] = (unsigned long long)raw_s;
  garbage[2 * g + 1] = (unsigned long long)raw_d;
  addr[2 * g] = (unsigned long long)reinterpret_cast<unsigned long long>(&s_val[0]);
  addr[2 * g + 1] = (unsigned long long)reinterpret_cast<unsigned long long>(d_val);
  rs_sync();
  long long acc = 0;
  for (int r = 0; r < rounds; ++r) {
    s_val[tid] = 100000LL * r + 1000LL * rs_bid() + tid;
    d_val[tid] = -(100000LL * r + 1000LL * rs_bid() + tid);
    rs_sync();
    const int src = (tid + r + 1) % bdim;
    acc += s_val[src] - d_val[(src + 1) % bdim];
    rs_sync();
  }
  sum[g] = acc;
}

// value_t: out[0] = (a * b + c) with a = 2 + 1i, b = 3 - 2i, c = 1 + 1i for
// complex types (a = 2, b = 3, c = 1 for real ones); out[1] = rs_zero;
// flags[0] = rs_is_zero(rs_zero), flags[1] = rs_is_zero(a). Every thread
// adds (1, 2) (or 1) to *acc with rs_atomic_add_value.
template <class T>
struct rs_test_vals {
  static RS_DEVICE T make(double re, double) { return T(re); }
};
template <class F>
struct rs_test_vals<rs_complex<F> > {
  static RS_DEVICE rs_complex<F> make(double re, double im) {
    rs_complex<F> z;
    z.re = F(re);
    z.im = F(im);
    return z;
  }
};

RS_GLOBAL void rs_test_values(value_t* out, int* flags, value_t* acc) {
  typedef rs_test_vals<value_t> V;
  const value_t a = V::make(2, 1), b = V::make(3, -2), c = V::make(1, 1);
  if (rs_bid() == 0 && rs_tid() == 0) {
    value_t r = a * b;
    r += rs_zero<value_t>();
    out[0] = r + c;
    out[1] = rs_zero<value_t>();
    flags[0] = rs_is_zero(rs_zero<value_t>()) ? 1 : 0;
    flags[1] = rs_is_zero(a) ? 1 : 0;
  }
  rs_atomic_add_value(acc, V::make(1, 2));
}

// rsh_condense_team (kernels/numeric.cu) in place on global tables: the
// block's lanes form teams of `team` lanes (team divides RS_WARP); team k
// condenses keys[k * size ..) and vals[k * size ..) (key -1 = empty) and
// its first lane writes the count to counts[k]. kWarpBarrier = false plants
// the missing rs_syncwarp that the race check must report.
template <bool kWarpBarrier>
RS_DEVICE void rs_test_condense_team(index_t* keys, value_t* vals, unsigned size, int team,
                                     long long* counts) {
  const int t = rs_lane() % team;
  const long long k = (rs_bid() * rs_bdim() + rs_tid()) / team;
  const long long n = rsh_condense_team<index_t, value_t, kWarpBarrier>(
      keys + k * (long long)size, vals + k * (long long)size, size, t, team);
  if (t == 0) counts[k] = n;
}

// Threads of a block meet at different barriers: the emulator aborts.
RS_GLOBAL void rs_test_divergent_sync() {
  if (rs_tid() == 0) {
    rs_sync();
  } else {
    rs_sync();
  }
}

}  // namespace

extern "C" void RS_HOST_FN(rs_host_test_ids)(long long grid, long long block, long long* out) {
  rs_host::launch(grid, block, 0, [&] { rs_test_ids(out); });
}

extern "C" void RS_HOST_FN(rs_host_test_shuffles)(long long grid, long long block,
                                                  long long* out) {
  rs_host::launch(grid, block, 0, [&] { rs_test_shuffles(out); });
}

extern "C" void RS_HOST_FN(rs_host_test_ballot)(long long grid, long long block, const int* pred,
                                                unsigned long long* out) {
  rs_host::launch(grid, block, 0, [&] { rs_test_ballot(pred, out); });
}

extern "C" void RS_HOST_FN(rs_host_test_atomics)(long long grid, long long block, int reps,
                                                 long long* counters, float* fsum, double* dsum,
                                                 unsigned long long* olds, long long* block_out) {
  rs_host::launch(grid, block, 0,
                  [&] { rs_test_atomics(reps, counters, fsum, dsum, olds, block_out); });
}

extern "C" void RS_HOST_FN(rs_host_test_barrier)(long long grid, long long block, int rounds,
                                                 unsigned long long* garbage, long long* sum,
                                                 unsigned long long* addr) {
  rs_host::launch(grid, block, block * 8,
                  [&] { rs_test_barrier(rounds, garbage, sum, addr); });
}

extern "C" void RS_HOST_FN(rs_host_test_values)(long long grid, long long block, value_t* out,
                                                int* flags, value_t* acc) {
  rs_host::launch(grid, block, 0, [&] { rs_test_values(out, flags, acc); });
}

extern "C" void RS_HOST_FN(rs_host_test_condense_team)(long long grid, long long block,
                                                       index_t* keys, value_t* vals,
                                                       unsigned size, int team, int planted,
                                                       long long* counts) {
  rs_host::launch(grid, block, 0, [&] {
    if (planted)
      rs_test_condense_team<false>(keys, vals, size, team, counts);
    else
      rs_test_condense_team<true>(keys, vals, size, team, counts);
  });
}

extern "C" void RS_HOST_FN(rs_host_test_divergent_sync)(long long grid, long long block) {
  rs_host::launch(grid, block, 0, [&] { rs_test_divergent_sync(); });
}
