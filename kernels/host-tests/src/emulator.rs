//! The emulator's self-test kernels in
//! `kernels/testing/launch_emulator.cpp` (checked by `tests/emulator.rs`).

use crate::Launch;

/// The entry points of this launcher file after the launch geometry
/// `(grid, block)`, with `$V` for the variant: the one list that
/// [`Emulator`] and its implementation for every variant are made from
/// (`raw_x = x`: the method `raw_x` calls `rs_host_x_<suffix>`).
macro_rules! emulator_launchers {
    ($then:ident { $($head:tt)* } $V:ty) => {
        $then! {
            $($head)*
            raw_test_ids = test_ids(out: *mut i64);
            raw_test_shuffles = test_shuffles(out: *mut i64);
            raw_test_ballot = test_ballot(pred: *const i32, out: *mut u64);
            raw_test_atomics = test_atomics(
                reps: i32,
                counters: *mut i64,
                fsum: *mut f32,
                dsum: *mut f64,
                olds: *mut u64,
                block_out: *mut i64,
            );
            raw_test_barrier = test_barrier(
                rounds: i32,
                garbage: *mut u64,
                sum: *mut i64,
                addr: *mut u64,
            );
            raw_test_values = test_values(
                out: *mut crate::ValueOf<$V>,
                flags: *mut i32,
                acc: *mut crate::ValueOf<$V>,
            );
            raw_test_condense_team = test_condense_team(
                keys: *mut crate::IndexOf<$V>,
                vals: *mut crate::ValueOf<$V>,
                size: u32,
                team: i32,
                planted: i32,
                counts: *mut i64,
            );
            raw_test_divergent_sync = test_divergent_sync();
        }
    };
}

emulator_launchers!(launcher_trait {
    /// The raw host entry points of `launch_emulator.cpp`.
    ///
    /// # Safety
    /// Every pointer must be valid for all the kernel reads and writes (the
    /// safe functions of this module check the lengths), and the launch
    /// geometry must be what the kernel expects.
    pub trait Emulator(grid, block);
} Self);

for_each_variant!(
    launchers_for_variant,
    emulator_launchers,
    Emulator,
    (grid, block)
);

fn threads(l: Launch) -> usize {
    (l.grid * l.block) as usize
}

/// `[tid, bid, bdim, gdim, lane]` of every global thread.
pub fn ids<V: Emulator>(l: Launch) -> Vec<[i64; 5]> {
    let mut out = vec![[0i64; 5]; threads(l)];
    unsafe { V::raw_test_ids(l, out.as_mut_ptr().cast()) }
    out
}

/// Shuffle tests per type; `out[g][t][k]` is result `k` of type `t` (int,
/// unsigned, long long, unsigned long long, float, double) in thread `g`,
/// where thread `g` holds `5 g + 7`. The results, by `k`: `rs_shfl` from
/// lane `(7 lane + 3) % W`, `lane + W + 1`, `-1`; `rs_shfl_down` by 1, 5,
/// `W - 1`, `W`; `rs_shfl_xor` with 1, 6, `W - 1`, `W`.
pub fn shuffles<V: Emulator>(l: Launch) -> Vec<[[i64; 11]; 6]> {
    let mut out = vec![[[0i64; 11]; 6]; threads(l)];
    unsafe { V::raw_test_shuffles(l, out.as_mut_ptr().cast()) }
    out
}

/// `[ballot(pred[g] != 0), ballot(true), ballot(false), popcll(first)]` per
/// thread.
pub fn ballot<V: Emulator>(l: Launch, pred: &[i32]) -> Vec<[u64; 4]> {
    crate::need("pred", pred, threads(l));
    let mut out = vec![[0u64; 4]; threads(l)];
    unsafe { V::raw_test_ballot(l, pred.as_ptr(), out.as_mut_ptr().cast()) }
    out
}

/// What `rs_test_atomics` leaves (see launch_emulator.cpp).
#[derive(Clone, Debug)]
pub struct AtomicsOut {
    /// The ten global counters.
    pub counters: [i64; 10],
    /// `rs_atomic_add(float)` of 1 by every thread `reps` times.
    pub fsum: f32,
    /// `rs_atomic_add(double)` of 1 likewise.
    pub dsum: f64,
    /// The old values `rs_atomic_add(unsigned long long)` returned.
    pub olds: Vec<u64>,
    /// Per block: its shared int counter and twice its shared double sum.
    pub block_out: Vec<[i64; 2]>,
}

/// Every thread adds to shared and global counters `reps` times.
pub fn atomics<V: Emulator>(l: Launch, reps: i32) -> AtomicsOut {
    let mut out = AtomicsOut {
        counters: [0; 10],
        fsum: 0.0,
        dsum: 0.0,
        olds: vec![0; threads(l) * reps as usize],
        block_out: vec![[0; 2]; l.grid as usize],
    };
    out.counters[8] = -1; // u64::MAX for rs_atomic_min
    out.counters[9] = i64::MIN;
    unsafe {
        V::raw_test_atomics(
            l,
            reps,
            out.counters.as_mut_ptr(),
            &mut out.fsum,
            &mut out.dsum,
            out.olds.as_mut_ptr(),
            out.block_out.as_mut_ptr().cast(),
        )
    }
    out
}

/// What `rs_test_barrier` leaves, per global thread.
#[derive(Clone, Debug)]
pub struct BarrierOut {
    /// The raw bits of the thread's static and dynamic shared slots before
    /// the kernel wrote them.
    pub garbage: Vec<[u64; 2]>,
    /// The sum of what the thread read from its neighbours' slots.
    pub sum: Vec<i64>,
    /// The addresses of the static and dynamic shared arrays it saw.
    pub addr: Vec<[u64; 2]>,
}

/// Neighbour exchanges through shared memory, `rounds` times, with a
/// barrier between writes and reads (`l.shared` is ignored: the launcher
/// asks for `8 * block` bytes).
pub fn barrier<V: Emulator>(l: Launch, rounds: i32) -> BarrierOut {
    let n = threads(l);
    let mut out = BarrierOut {
        garbage: vec![[0; 2]; n],
        sum: vec![0; n],
        addr: vec![[0; 2]; n],
    };
    unsafe {
        V::raw_test_barrier(
            l,
            rounds,
            out.garbage.as_mut_ptr().cast(),
            out.sum.as_mut_ptr(),
            out.addr.as_mut_ptr().cast(),
        )
    }
    out
}

/// `(a * b + c, zero)`, `[is_zero(zero), is_zero(a)]` and the sum of
/// `(1, 2)` (or 1) over all threads, by `rs_atomic_add_value`.
pub fn values<V: Emulator>(l: Launch) -> ([V::Value; 2], [i32; 2], V::Value) {
    let mut out = [V::Value::default(); 2];
    let mut flags = [0i32; 2];
    let mut acc = V::Value::default();
    unsafe { V::raw_test_values(l, out.as_mut_ptr(), flags.as_mut_ptr(), &mut acc) }
    (out, flags, acc)
}

/// Whether `rsh_condense_team` runs with its warp barrier or without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WarpBarrier {
    /// As the kernels run it.
    Kept,
    /// The planted race: the `rs_syncwarp` after the ballot left out.
    Planted,
}

/// `rsh_condense_team` (kernels/numeric.cu) in place: the launch's threads
/// form teams of `team` lanes (a divisor of the warp width); team `k`
/// condenses the `size` slots `keys[k * size..]`, `vals[k * size..]` (key
/// -1 empty) to their front, in order. Returns each team's count.
///
/// # Panics
/// When `team` does not divide the warp width or the tables are shorter
/// than `size` slots per team.
pub fn condense_team<V: Emulator>(
    l: Launch,
    keys: &mut [V::Index],
    vals: &mut [V::Value],
    size: u32,
    team: i32,
    barrier: WarpBarrier,
) -> Vec<i64> {
    assert!(
        team > 0 && V::WARP % i64::from(team) == 0,
        "team {team} must divide the warp width {}",
        V::WARP
    );
    let teams = threads(l) / team as usize;
    crate::need("keys", keys, teams * size as usize);
    crate::need("vals", vals, teams * size as usize);
    let mut counts = vec![-1i64; teams];
    let planted = i32::from(barrier == WarpBarrier::Planted);
    unsafe {
        V::raw_test_condense_team(
            l,
            keys.as_mut_ptr(),
            vals.as_mut_ptr(),
            size,
            team,
            planted,
            counts.as_mut_ptr(),
        )
    }
    counts
}

/// A kernel whose threads call `rs_sync` at two different lines: the
/// emulator aborts the process (used from a child process).
pub fn divergent_sync<V: Emulator>(l: Launch) {
    unsafe { V::raw_test_divergent_sync(l) }
}
