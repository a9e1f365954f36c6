//! Variants of PETSc's numeric loop on a known structure of C
//! (`MatMatMultNumeric_SeqAIJ_SeqAIJ_Sorted`: each row's products added
//! into a dense accumulator, then gathered at C's columns), written plainly
//! in Rust, one thread, minimum of the runs: as PETSc has it; two rows of
//! A at a time (each into its own accumulator, entries in turns); each row
//! of op(B) four products at a time (the rest of a longer row in a loop);
//! each row's products staged in a list first (rows of op(B) copied 8
//! wide), then added in one loop; and each row of op(B) added 4, 6 or 8
//! wide, the products past its end into spare cells chosen by a mask (6
//! wide with a branch instead, beside); op(B) padded to 6 slots a row
//! (columns past a row's end at spare cells, values 0; the padding timed
//! apart), then added 6 wide with no mask nor offsets; and masked 6 wide
//! two rows of A at a time. Every variant's values are checked against the
//! first, bit for bit. It prints the product's shape (entries
//! a row of A, products an entry and their standard deviation) and chose
//! the shapes the known-structure kernel pairs, stages and masks rows for
//! (`src/backend/cpu/pattern.rs`, `pairs_rows`, `stages_rows`,
//! `masks_rows`).
//!
//! ```sh
//! cargo run --release --example numeric_variants -- A.mtx B.mtx [runs] [ptap]
//! ```
//! With `ptap`, the product timed is Pᵀ·(A·P), B being P.
use std::time::Instant;

#[path = "../src/matrix_market.rs"]
#[allow(dead_code)]
mod matrix_market;
#[path = "../src/sparse.rs"]
#[allow(dead_code)]
mod sparse;

#[path = "support/petsc_loop.rs"]
mod petsc_loop;
use petsc_loop::{gather, petsc_numeric as v0, read, Csr};

/// Adds row `a.1[k]` of B times `a.2[k]` into `d`.
#[inline(always)]
fn add_entry(a: &Csr, b: &Csr, k: usize, d: &mut [f64]) {
    let (r, f) = (a.1[k] as usize, a.2[k]);
    for e in b.0[r] as usize..b.0[r + 1] as usize {
        d[b.1[e] as usize] += f * b.2[e];
    }
}

fn structure(a: &Csr, b: &Csr) -> (Vec<i32>, Vec<i32>) {
    let mut mark = vec![usize::MAX; b.4];
    let mut off = vec![0i32];
    let mut cols = Vec::new();
    for i in 0..a.3 {
        let s = cols.len();
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let r = a.1[k] as usize;
            for e in b.0[r] as usize..b.0[r + 1] as usize {
                let j = b.1[e] as usize;
                if mark[j] != i {
                    mark[j] = i;
                    cols.push(j as i32);
                }
            }
        }
        cols[s..].sort_unstable();
        off.push(cols.len() as i32);
    }
    (off, cols)
}

/// Two rows at a time into two accumulators, entries interleaved.
#[inline(never)]
fn v1(a: &Csr, b: &Csr, c: (&[i32], &[i32], &mut [f64]), d0: &mut [f64], d1: &mut [f64]) {
    let (co, cc, cv) = c;
    let m = a.3;
    let mut i = 0;
    let add = |k: usize, d: &mut [f64]| add_entry(a, b, k, d);
    while i + 1 < m {
        let (s0, e0) = (a.0[i] as usize, a.0[i + 1] as usize);
        let (s1, e1) = (e0, a.0[i + 2] as usize);
        let n = (e0 - s0).min(e1 - s1);
        for t in 0..n {
            add(s0 + t, d0);
            add(s1 + t, d1);
        }
        for k in s0 + n..e0 {
            add(k, d0);
        }
        for k in s1 + n..e1 {
            add(k, d1);
        }
        gather(i, (co, cc), cv, d0);
        gather(i + 1, (co, cc), cv, d1);
        i += 2;
    }
    if i < m {
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            add(k, d0);
        }
        gather(i, (co, cc), cv, d0);
    }
}

/// Each row of op(B) added W products at a time (past its end into W
/// spare cells, with value 0), the rest of a longer row in a loop.
#[inline(never)]
fn vw<const W: usize>(a: &Csr, b: &Csr, c: (&[i32], &[i32], &mut [f64]), dense: &mut [f64]) {
    let (co, cc, cv) = c;
    let n = b.1.len();
    let spare = b.4;
    for i in 0..a.3 {
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let (r, f) = (a.1[k] as usize, a.2[k]);
            let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
            for t in 0..W {
                let at = (s + t).min(n - 1);
                let inside = s + t < e;
                let j = if inside { b.1[at] as usize } else { spare + t };
                let v = if inside { b.2[at] } else { 0.0 };
                dense[j] += f * v;
            }
            for e in s + W..e {
                dense[b.1[e] as usize] += f * b.2[e];
            }
        }
        gather(i, (co, cc), cv, dense);
    }
}

/// Each row's products first staged in a list (each row of op(B) copied
/// W at a time, past its end where it is shorter, the list's end moved by
/// its length), then added into the accumulator in one loop: one loop end
/// a row instead of one a row of op(B).
#[inline(never)]
fn staged<const W: usize>(
    a: &Csr,
    b: &Csr,
    c: (&[i32], &[i32], &mut [f64]),
    dense: &mut [f64],
    (sc, sv): (&mut [u32], &mut [f64]),
) {
    let (co, cc, cv) = c;
    let n = b.1.len();
    for i in 0..a.3 {
        let mut p = 0;
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let (r, f) = (a.1[k] as usize, a.2[k]);
            let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
            if e - s <= W && s + W <= n {
                let bc: &[i32; W] = b.1[s..s + W].try_into().unwrap();
                let bv: &[f64; W] = b.2[s..s + W].try_into().unwrap();
                let tc: &mut [u32; W] = (&mut sc[p..p + W]).try_into().unwrap();
                let tv: &mut [f64; W] = (&mut sv[p..p + W]).try_into().unwrap();
                for t in 0..W {
                    tc[t] = bc[t] as u32;
                    tv[t] = f * bv[t];
                }
                p += e - s;
            } else {
                for e in s..e {
                    sc[p] = b.1[e] as u32;
                    sv[p] = f * b.2[e];
                    p += 1;
                }
            }
        }
        for q in 0..p {
            dense[sc[q] as usize] += sv[q];
        }
        gather(i, (co, cc), cv, dense);
    }
}

/// Each row of op(B) added W products unconditionally (past its end into
/// spare cells, two sets used by turns, chosen by a mask or, with
/// `BRANCH`, a branch), then the rest of a longer row in a loop: the
/// known-structure kernel's `add_rows_masked`.
#[inline(never)]
fn masked<const W: usize, const BRANCH: bool>(
    a: &Csr,
    b: &Csr,
    c: (&[i32], &[i32], &mut [f64]),
    dense: &mut [f64],
) {
    let (co, cc, cv) = c;
    for i in 0..a.3 {
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let spare = b.4 + (k & 1) * W;
            masked_entry::<W, BRANCH>(b, (a.1[k] as usize, a.2[k]), dense, spare);
        }
        gather(i, (co, cc), cv, dense);
    }
}

/// Op(B) padded: each row's first W columns and values in fixed slots
/// (columns past its end at spare cells, values 0), and which rows are
/// longer than W.
struct Padded<const W: usize> {
    cols: Vec<i32>,
    vals: Vec<f64>,
    long: Vec<bool>,
}

fn pad<const W: usize>(b: &Csr, p: &mut Padded<W>) {
    let rows = b.0.len() - 1;
    p.cols.resize(rows * W, 0);
    p.vals.resize(rows * W, 0.0);
    p.long.resize(rows, false);
    for r in 0..rows {
        let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
        for t in 0..W {
            let (c, v) = if s + t < e {
                (b.1[s + t], b.2[s + t])
            } else {
                ((b.4 + t + (r & 1) * W) as i32, 0.0)
            };
            p.cols[r * W + t] = c;
            p.vals[r * W + t] = v;
        }
        p.long[r] = e - s > W;
    }
}

/// Each row of op(B) added W products from its padded slots, the rest of a
/// longer row in a loop.
#[inline(never)]
fn padded<const W: usize>(
    a: &Csr,
    b: &Csr,
    p: &Padded<W>,
    c: (&[i32], &[i32], &mut [f64]),
    dense: &mut [f64],
) {
    let (co, cc, cv) = c;
    for i in 0..a.3 {
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let (r, f) = (a.1[k] as usize, a.2[k]);
            let pc: &[i32; W] = p.cols[r * W..r * W + W].try_into().unwrap();
            let pv: &[f64; W] = p.vals[r * W..r * W + W].try_into().unwrap();
            for t in 0..W {
                dense[pc[t] as usize] += f * pv[t];
            }
            if p.long[r] {
                for e in b.0[r] as usize + W..b.0[r + 1] as usize {
                    dense[b.1[e] as usize] += f * b.2[e];
                }
            }
        }
        gather(i, (co, cc), cv, dense);
    }
}

/// One entry of A (row `r` of op(B), factor `f`) added W wide into
/// `dense`, the products past the row's end into the spare cells from
/// `spare` (chosen by a mask or, with `BRANCH`, a branch).
#[inline(always)]
fn masked_entry<const W: usize, const BRANCH: bool>(
    b: &Csr,
    (r, f): (usize, f64),
    dense: &mut [f64],
    spare: usize,
) {
    let n = b.1.len();
    let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
    let len = e - s;
    if s + W <= n {
        let bc: &[i32; W] = b.1[s..s + W].try_into().unwrap();
        let bv: &[f64; W] = b.2[s..s + W].try_into().unwrap();
        for t in 0..W {
            let j = if BRANCH {
                if t < len {
                    bc[t] as usize
                } else {
                    spare + t
                }
            } else {
                let m = usize::from(t < len).wrapping_neg();
                (bc[t] as usize & m) | ((spare + t) & !m)
            };
            dense[j] += f * bv[t];
        }
        for e in s + W..e {
            dense[b.1[e] as usize] += f * b.2[e];
        }
    } else {
        for e in s..e {
            dense[b.1[e] as usize] += f * b.2[e];
        }
    }
}

/// [`masked`] two rows of A at a time, their entries in turns, each row
/// into its own accumulator.
#[inline(never)]
fn masked_two<const W: usize>(
    a: &Csr,
    b: &Csr,
    c: (&[i32], &[i32], &mut [f64]),
    (d0, d1): (&mut [f64], &mut [f64]),
) {
    let (co, cc, cv) = c;
    let spare = b.4;
    let mut i = 0;
    while i + 1 < a.3 {
        let (s0, e0) = (a.0[i] as usize, a.0[i + 1] as usize);
        let (s1, e1) = (a.0[i + 1] as usize, a.0[i + 2] as usize);
        let both = (e0 - s0).min(e1 - s1);
        for q in 0..both {
            let (k0, k1) = (s0 + q, s1 + q);
            masked_entry::<W, false>(b, (a.1[k0] as usize, a.2[k0]), d0, spare);
            masked_entry::<W, false>(b, (a.1[k1] as usize, a.2[k1]), d1, spare);
        }
        for k in s0 + both..e0 {
            masked_entry::<W, false>(b, (a.1[k] as usize, a.2[k]), d0, spare + W);
        }
        for k in s1 + both..e1 {
            masked_entry::<W, false>(b, (a.1[k] as usize, a.2[k]), d1, spare + W);
        }
        gather(i, (co, cc), cv, d0);
        gather(i + 1, (co, cc), cv, d1);
        i += 2;
    }
    while i < a.3 {
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            masked_entry::<W, false>(b, (a.1[k] as usize, a.2[k]), d0, spare + (k & 1) * W);
        }
        gather(i, (co, cc), cv, d0);
        i += 1;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let a = read(&args[1]);
    let b = read(&args[2]);
    let runs: usize = args.get(3).map_or(7, |s| s.parse().unwrap());
    let (a, b) = if args.get(4).is_some_and(|s| s == "ptap") {
        let (co, cc) = structure(&a, &b);
        let mut cv = vec![0f64; cc.len()];
        let mut d = vec![0f64; b.4];
        v0(&a, &b, (&co, &cc, &mut cv), &mut d);
        let ap: Csr = (co, cc, cv, a.3, b.4);
        // P transposed.
        let mut cnt = vec![0i32; b.4 + 1];
        for &j in &b.1 {
            cnt[j as usize + 1] += 1;
        }
        for j in 0..b.4 {
            cnt[j + 1] += cnt[j];
        }
        let mut next = cnt.clone();
        let mut tc = vec![0i32; b.1.len()];
        let mut tv = vec![0f64; b.1.len()];
        for i in 0..b.3 {
            for e in b.0[i] as usize..b.0[i + 1] as usize {
                let j = b.1[e] as usize;
                let at = next[j] as usize;
                tc[at] = i as i32;
                tv[at] = b.2[e];
                next[j] += 1;
            }
        }
        ((cnt, tc, tv, b.4, b.3), ap)
    } else {
        (a, b)
    };
    let (co, cc) = structure(&a, &b);
    let nnz = cc.len();
    let mut d0 = vec![0f64; b.4];
    let mut d1 = vec![0f64; b.4];
    let mut r0 = vec![0f64; nnz];
    let mut r = vec![0f64; nnz];
    let mut best = [f64::MAX; 11];
    let mut dw1 = vec![0f64; b.4 + 64];
    let mut p6 = Padded::<6> {
        cols: Vec::new(),
        vals: Vec::new(),
        long: Vec::new(),
    };
    let mut dw = vec![0f64; b.4 + 64];
    let most = (0..a.3)
        .map(|i| {
            (a.0[i]..a.0[i + 1])
                .map(|k| {
                    (b.0[a.1[k as usize] as usize + 1] - b.0[a.1[k as usize] as usize]) as usize
                })
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    {
        let entries = a.1.len() as f64;
        let prods: f64 =
            a.1.iter()
                .map(|&k| (b.0[k as usize + 1] - b.0[k as usize]) as f64)
                .sum();
        let sq: f64 =
            a.1.iter()
                .map(|&k| ((b.0[k as usize + 1] - b.0[k as usize]) as f64).powi(2))
                .sum();
        let mean = prods / entries;
        println!(
            "A rows {} entries/row {:.2} products/entry {:.2} sd {:.2} B bytes {:.1} MB",
            a.3,
            entries / a.3 as f64,
            mean,
            (sq / entries - mean * mean).sqrt(),
            b.1.len() as f64 * 12e-6
        );
    }
    let (mut sc, mut sv) = (vec![0u32; most + 16], vec![0f64; most + 16]);
    for _ in 0..runs {
        for (v, slot) in best.iter_mut().enumerate() {
            let t = Instant::now();
            match v {
                0 => v0(&a, &b, (&co, &cc, &mut r0), &mut d0),
                1 => v1(&a, &b, (&co, &cc, &mut r), &mut d0, &mut d1),
                2 => vw::<4>(&a, &b, (&co, &cc, &mut r), &mut dw),
                3 => staged::<8>(&a, &b, (&co, &cc, &mut r), &mut d0, (&mut sc, &mut sv)),
                4 => masked::<4, false>(&a, &b, (&co, &cc, &mut r), &mut dw),
                5 => masked::<6, false>(&a, &b, (&co, &cc, &mut r), &mut dw),
                6 => masked::<8, false>(&a, &b, (&co, &cc, &mut r), &mut dw),
                7 => masked::<6, true>(&a, &b, (&co, &cc, &mut r), &mut dw),
                8 => pad(&b, &mut p6),
                10 => masked_two::<6>(&a, &b, (&co, &cc, &mut r), (&mut dw, &mut dw1)),
                _ => padded::<6>(&a, &b, &p6, (&co, &cc, &mut r), &mut dw),
            }
            *slot = slot.min(t.elapsed().as_secs_f64() * 1e3);
            if v > 0 && v != 8 {
                assert!(
                    r.iter().zip(&r0).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "variant {v} differs"
                );
            }
        }
    }
    println!("nnz(C) {nnz}; v0 petsc {:.2}  v1 two rows {:.2}  four at a time {:.2}  staged 8 {:.2}  masked 4 {:.2}  masked 6 {:.2}  masked 8 {:.2}  6 with a branch {:.2} ms; padding 6 {:.2}, padded 6 {:.2}, masked 6 two rows {:.2}", best[0], best[1], best[2], best[3], best[4], best[5], best[6], best[7], best[8], best[9], best[10]);
}
