//! The emulator's primitives (kernels/testing/host.h) in every variant, so
//! both warp widths: thread ids, warp shuffles and ballots, atomics under
//! contention, barriers and shared memory, complex values; the numeric
//! kernels' warp-cooperative condense; that a divergent barrier aborts with
//! a message; and, with the feature `race-check`, that a missing
//! `rs_syncwarp` is reported as a data race.

use rusparse::Index;
use rusparse_kernel_host_tests::emulator::{self, Emulator, WarpBarrier};
use rusparse_kernel_host_tests::{
    small_int_value, visit_variants, Kernels, Launch, Rng, TestValue, VariantVisitor,
};

/// The shared-memory fill of host.h (kGarbage).
const GARBAGE: u64 = 0xFFF4_DEAD_BEEF_5A5A;

fn launches(warp: i64) -> Vec<Launch> {
    vec![
        Launch::new(1, warp),
        Launch::new(3, 2 * warp),
        Launch::new(2, 256),
    ]
}

fn check_ids<V: Emulator>(l: Launch) {
    let w = V::WARP;
    for (g, ids) in emulator::ids::<V>(l).iter().enumerate() {
        let g = g as i64;
        assert_eq!(
            *ids,
            [g % l.block, g / l.block, l.block, l.grid, (g % l.block) % w],
            "{} {l:?} thread {g}",
            V::NAME
        );
    }
}

fn check_shuffles<V: Emulator>(l: Launch) {
    let w = V::WARP;
    let out = emulator::shuffles::<V>(l);
    for (g, per_type) in out.iter().enumerate() {
        let g = g as i64;
        let lane = (g % l.block) % w;
        let value = |src: i64| 5 * (g - lane + src) + 7;
        let down = |d: i64| if lane + d < w { lane + d } else { lane };
        let xor = |m: i64| if (lane ^ m) < w { lane ^ m } else { lane };
        let expect = [
            value((lane * 7 + 3) % w),
            value((lane + 1) % w),
            value(w - 1),
            value(down(1)),
            value(down(5)),
            value(down(w - 1)),
            value(down(w)),
            value(xor(1)),
            value(xor(6)),
            value(xor(w - 1)),
            value(xor(w)),
        ];
        for (t, got) in per_type.iter().enumerate() {
            assert_eq!(*got, expect, "{} {l:?} thread {g} type {t}", V::NAME);
        }
    }
}

fn check_ballot<V: Emulator>(l: Launch, rng: &mut Rng) {
    let w = V::WARP as usize;
    let n = (l.grid * l.block) as usize;
    // 0 to 4 quarters of the lanes set, all of them included.
    let density = rng.below(5);
    let pred: Vec<i32> = (0..n).map(|_| i32::from(rng.below(4) < density)).collect();
    let all = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
    let out = emulator::ballot::<V>(l, &pred);
    for (g, got) in out.iter().enumerate() {
        let first = g - g % w;
        let mask = (0..w).fold(0u64, |m, k| m | (u64::from(pred[first + k] != 0) << k));
        assert_eq!(
            *got,
            [mask, all, 0, u64::from(mask.count_ones())],
            "{} {l:?} thread {g}",
            V::NAME
        );
    }
}

fn check_atomics<V: Emulator>(l: Launch) {
    let reps = 40;
    let t = l.grid * l.block;
    let total = t * reps as i64;
    let out = emulator::atomics::<V>(l, reps);
    let c = out.counters;
    let what = format!("{} {l:?}", V::NAME);
    assert_eq!(c[0], total, "int add, {what}");
    assert_eq!(c[1], 2 * total, "unsigned add, {what}");
    assert_eq!(c[2], -3 * total, "long long add, {what}");
    assert_eq!(c[3], total, "unsigned long long add, {what}");
    assert_eq!(&c[4..8], &[total; 4], "CAS increments, {what}");
    assert_eq!(c[8], 1000, "atomic_min, {what}");
    assert_eq!(c[9], 10 * (t - 1), "atomic_max, {what}");
    assert_eq!(out.fsum, total as f32, "float add, {what}");
    assert_eq!(out.dsum, total as f64, "double add, {what}");
    let mut olds = out.olds.clone();
    olds.sort_unstable();
    assert!(
        olds.iter().enumerate().all(|(k, &o)| o == k as u64),
        "rs_atomic_add returned each old value once, {what}"
    );
    for (b, got) in out.block_out.iter().enumerate() {
        let per_block = l.block * reps as i64;
        assert_eq!(
            *got,
            [per_block, per_block],
            "shared atomics of block {b}, {what}"
        );
    }
}

fn check_barrier<V: Emulator>(l: Launch) {
    let rounds = 12;
    let out = emulator::barrier::<V>(l, rounds);
    let what = format!("{} {l:?}", V::NAME);
    assert!(
        out.garbage.iter().all(|g| *g == [GARBAGE, GARBAGE]),
        "shared memory holds the garbage pattern at every block start, {what}"
    );
    assert!(
        out.addr.iter().all(|a| *a == out.addr[0]),
        "every thread sees the same shared arrays, {what}"
    );
    let bdim = l.block;
    for (g, &got) in out.sum.iter().enumerate() {
        let (b, tid) = (g as i64 / bdim, g as i64 % bdim);
        let expect: i64 = (0..rounds as i64)
            .map(|r| {
                let src = (tid + r + 1) % bdim;
                let s = 100_000 * r + 1000 * b;
                (s + src) + (s + (src + 1) % bdim)
            })
            .sum();
        assert_eq!(got, expect, "thread {g}, {what}");
    }
}

fn check_values<V: Emulator>(l: Launch) {
    let (out, flags, acc) = emulator::values::<V>(l);
    let t = (l.grid * l.block) as f64;
    let what = format!("{} {l:?}", V::NAME);
    if V::COMPLEX {
        assert_eq!(out[0].parts(), (9.0, 0.0), "(2+i)(3-2i) + (1+i), {what}");
        assert_eq!(acc.parts(), (t, 2.0 * t), "rs_atomic_add_value, {what}");
    } else {
        assert_eq!(out[0].parts(), (7.0, 0.0), "2 * 3 + 1, {what}");
        assert_eq!(acc.parts(), (t, 0.0), "rs_atomic_add_value, {what}");
    }
    assert_eq!(out[1].parts(), (0.0, 0.0), "rs_zero, {what}");
    assert_eq!(flags, [1, 0], "rs_is_zero, {what}");
}

/// Tables for `condense_team`: `teams` tables of `size` slots, each slot
/// full with probability `full_in_4 / 4` (key = slot number + 1, so keys
/// are distinct and ordered), the rest empty (-1, the all-ones pattern).
fn condense_tables<V: Emulator>(
    rng: &mut Rng,
    teams: usize,
    size: usize,
    full_in_4: u64,
) -> (Vec<V::Index>, Vec<V::Value>) {
    let empty = V::Index::from_usize_unchecked(usize::MAX);
    let mut keys = Vec::with_capacity(teams * size);
    let mut vals = Vec::with_capacity(teams * size);
    for _ in 0..teams {
        for s in 0..size {
            let full = rng.below(4) < full_in_4;
            keys.push(if full {
                V::Index::from_usize_unchecked(s + 1)
            } else {
                empty
            });
            vals.push(small_int_value::<V>(rng));
        }
    }
    (keys, vals)
}

/// The real routine (with its warp barrier): every team's full slots end at
/// the front of its table, in their order, with their values.
fn check_condense<V: Emulator>(rng: &mut Rng) {
    let w = V::WARP;
    let mut team = 1;
    while i64::from(team) <= w {
        for (block, size, full_in_4) in [(w, 3 * team as usize + 1, 2), (2 * w, 5, 0), (w, 40, 4)] {
            let l = Launch::new(2, block);
            let teams = (l.grid * l.block) as usize / team as usize;
            let (keys0, vals0) = condense_tables::<V>(rng, teams, size, full_in_4);
            let (mut keys, mut vals) = (keys0.clone(), vals0.clone());
            let counts = emulator::condense_team::<V>(
                l,
                &mut keys,
                &mut vals,
                size as u32,
                team,
                WarpBarrier::Kept,
            );
            for (k, &count) in counts.iter().enumerate() {
                let table = k * size..(k + 1) * size;
                let expect: Vec<(i64, (f64, f64))> = table
                    .clone()
                    .filter(|&p| keys0[p].to_i64() != -1)
                    .map(|p| (keys0[p].to_i64(), vals0[p].parts()))
                    .collect();
                let what = format!("{} team {team} size {size} table {k}", V::NAME);
                assert_eq!(count, expect.len() as i64, "{what}: count");
                let got: Vec<(i64, (f64, f64))> = table
                    .take(expect.len())
                    .map(|p| (keys[p].to_i64(), vals[p].parts()))
                    .collect();
                assert_eq!(got, expect, "{what}: condensed slots");
            }
        }
        team *= 2;
    }
}

struct Primitives(Rng);

impl VariantVisitor for Primitives {
    fn visit<V: Kernels>(&mut self) {
        for l in launches(V::WARP) {
            check_ids::<V>(l);
            check_shuffles::<V>(l);
            check_ballot::<V>(l, &mut self.0);
            check_atomics::<V>(l);
            check_barrier::<V>(l);
            check_values::<V>(l);
        }
        check_condense::<V>(&mut self.0);
    }
}

#[test]
fn primitives_in_every_variant() {
    visit_variants(&mut Primitives(Rng::new(7)));
}

const CHILD: &str = "RS_HOST_TEST_CHILD";

/// In a child process (see below): a kernel whose threads call rs_sync at
/// different lines. Does nothing in a normal run.
#[test]
fn divergent_sync_child() {
    if std::env::var_os(CHILD).is_some() {
        emulator::divergent_sync::<rusparse_kernel_host_tests::F64I32I32W32>(Launch::new(1, 64));
    }
}

#[test]
fn divergent_sync_aborts_with_a_message() {
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "divergent_sync_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the test binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the child should abort; stderr: {stderr}"
    );
    assert!(
        stderr.contains("rs_host emulator") && stderr.contains("rs_sync at line"),
        "stderr names the divergent barrier: {stderr}"
    );
}

/// In a child process of the race check (see below): `rsh_condense_team`
/// without its `rs_syncwarp`, on tables where lanes write slots that other
/// lanes of the same chunk read.
#[test]
#[ignore = "run by planted_missing_syncwarp_is_a_reported_race, in a child process"]
fn planted_missing_syncwarp_child() {
    type V = rusparse_kernel_host_tests::F64I32I32W32;
    let l = Launch::new(1, 32);
    let mut rng = Rng::new(11);
    let (mut keys, mut vals) = condense_tables::<V>(&mut rng, 1, 96, 2);
    emulator::condense_team::<V>(l, &mut keys, &mut vals, 96, 32, WarpBarrier::Planted);
}

/// The race check (kernels/README.md, "Race check") catches the class of
/// bug it exists for: the condense routine with its warp barrier left out
/// is reported by ThreadSanitizer, naming the routine, although the lanes
/// ran in whatever order the host gave them (the same routine with the
/// barrier runs clean in every variant above, in this process).
#[cfg(feature = "race-check")]
#[test]
fn planted_missing_syncwarp_is_a_reported_race() {
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "planted_missing_syncwarp_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TSAN_OPTIONS", "halt_on_error=0 exitcode=66")
        .output()
        .expect("run the test binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(66),
        "ThreadSanitizer should fail the child; stderr: {stderr}"
    );
    assert!(
        stderr.contains("WARNING: ThreadSanitizer: data race")
            && stderr.contains("rsh_condense_team"),
        "the report names the routine: {stderr}"
    );
}
