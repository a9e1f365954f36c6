//! The emulator's primitives (kernels/testing/host.h) in every variant, so
//! both warp widths: thread ids, warp shuffles and ballots, atomics under
//! contention, barriers and shared memory, complex values; and that a
//! divergent barrier aborts with a message.

use rusparse_kernel_host_tests::emulator::{self, Emulator};
use rusparse_kernel_host_tests::{visit_variants, Kernels, Launch, Rng, TestValue, VariantVisitor};

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
