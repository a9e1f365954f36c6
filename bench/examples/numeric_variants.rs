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
//! apart), then added 6 wide with no mask nor offsets; masked 6 wide
//! two rows of A at a time; masked 6 wide with each row's entries split
//! between two accumulators (values to 1e-12 of C's largest); and each
//! row of C summed in AVX-512 registers, each entry's row of op(B)
//! expanded into the lanes of its columns in C's row from a bit mask an
//! entry of A, kept beside the plan (`lanes_all`), with the masks' build
//! timed apart four ways (a table of lanes read per column, 8 wide, by
//! compares, gathered) and in one pass with the values (`lanes_record`).
//! The AVX-512 variants print NaN where the CPU lacks AVX-512F/VL. Every
//! other variant's values are checked against the
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

/// [`masked`] with each row's entries split by turns between two
/// accumulators interleaved cell by cell (`dense[2j]`, `dense[2j + 1]`),
/// summed where gathered: two chains of additions into a column of C
/// instead of one. The sums' order differs, so its values are checked to
/// 1e-12, not bit for bit.
#[inline(never)]
fn masked_split<const W: usize>(
    a: &Csr,
    b: &Csr,
    c: (&[i32], &[i32], &mut [f64]),
    dense: &mut [f64],
) {
    let (co, cc, cv) = c;
    let n = b.1.len();
    let spare0 = 2 * b.4;
    for i in 0..a.3 {
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let (r, f) = (a.1[k] as usize, a.2[k]);
            let half = k & 1;
            let spare = spare0 + half * W;
            let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
            let len = e - s;
            if s + W <= n {
                let bc: &[i32; W] = b.1[s..s + W].try_into().unwrap();
                let bv: &[f64; W] = b.2[s..s + W].try_into().unwrap();
                for t in 0..W {
                    let m = usize::from(t < len).wrapping_neg();
                    let j = ((2 * bc[t] as usize + half) & m) | ((spare + t) & !m);
                    dense[j] += f * bv[t];
                }
                for e in s + W..e {
                    dense[2 * b.1[e] as usize + half] += f * b.2[e];
                }
            } else {
                for e in s..e {
                    dense[2 * b.1[e] as usize + half] += f * b.2[e];
                }
            }
        }
        for e in co[i] as usize..co[i + 1] as usize {
            let j = 2 * cc[e] as usize;
            cv[e] = dense[j] + dense[j + 1];
            dense[j] = 0.0;
            dense[j + 1] = 0.0;
        }
    }
}

/// For each entry of A, the lanes of its row of C that its row of op(B)
/// adds into (bit t for C's t-th column of that row), when C's row has
/// at most 32 columns; `None` when a row of C is longer.
#[allow(clippy::needless_range_loop)]
fn lane_masks(
    a: &Csr,
    b: &Csr,
    (co, cc): (&[i32], &[i32]),
    lane_of: &mut [u8],
) -> Option<Vec<u32>> {
    let mut m = vec![0u32; a.1.len()];
    for i in 0..a.3 {
        let row = &cc[co[i] as usize..co[i + 1] as usize];
        if row.len() > 32 {
            continue;
        }
        for (l, &c) in row.iter().enumerate() {
            lane_of[c as usize] = l as u8;
        }
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let r = a.1[k] as usize;
            let mut bits = 0u32;
            for e in b.0[r] as usize..b.0[r + 1] as usize {
                bits |= 1 << lane_of[b.1[e] as usize];
            }
            m[k] = bits;
        }
    }
    Some(m)
}

/// [`lane_masks`] with each row of op(B) read 8 wide and the lanes past
/// its end masked off, so that no loop ends at a row's end (op(B)'s
/// columns with 8 more, at column 0).
#[allow(clippy::needless_range_loop)]
fn lane_masks8(
    a: &Csr,
    b: &Csr,
    bc: &[i32],
    (co, cc): (&[i32], &[i32]),
    lane_of: &mut [u8],
) -> Option<Vec<u32>> {
    let mut m = vec![0u32; a.1.len()];
    for i in 0..a.3 {
        let row = &cc[co[i] as usize..co[i + 1] as usize];
        if row.len() > 32 {
            continue;
        }
        for (l, &c) in row.iter().enumerate() {
            lane_of[c as usize] = l as u8;
        }
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let r = a.1[k] as usize;
            let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
            let len = e - s;
            let cols: &[i32; 8] = bc[s..s + 8].try_into().unwrap();
            let mut bits = 0u32;
            for (t, &c) in cols.iter().enumerate() {
                let keep = u32::from(t < len).wrapping_neg();
                bits |= (1u32 << (lane_of[c as usize] & 31)) & keep;
            }
            for e in s + 8..e {
                bits |= 1 << (lane_of[b.1[e] as usize] & 31);
            }
            m[k] = bits;
        }
    }
    Some(m)
}

/// [`lane_masks`] by comparing each column of a row of op(B) with all of
/// its row of C at once (C's row in two AVX-512 registers of 16 columns),
/// 8 columns of op(B) at a time, those past its end masked off.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline(never)]
#[allow(clippy::needless_range_loop)]
unsafe fn lane_masks_cmp(
    a: &Csr,
    b: &Csr,
    bc: &[i32],
    (co, cc): (&[i32], &[i32]),
) -> Option<Vec<u32>> {
    use std::arch::x86_64::*;
    let mut m = vec![0u32; a.1.len()];
    let mut cc32 = cc.to_vec();
    cc32.extend([-1; 32]);
    for i in 0..a.3 {
        let (s0, e0) = (co[i] as usize, co[i + 1] as usize);
        if e0 - s0 > 32 {
            continue;
        }
        let keep_c = if e0 - s0 >= 32 {
            u32::MAX
        } else {
            (1u32 << (e0 - s0)) - 1
        };
        let lo = _mm512_maskz_loadu_epi32(keep_c as u16, cc32.as_ptr().add(s0));
        let hi = _mm512_maskz_loadu_epi32((keep_c >> 16) as u16, cc32.as_ptr().add(s0 + 16));
        let lo = _mm512_mask_blend_epi32(keep_c as u16, _mm512_set1_epi32(-1), lo);
        let hi = _mm512_mask_blend_epi32((keep_c >> 16) as u16, _mm512_set1_epi32(-1), hi);
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let r = a.1[k] as usize;
            let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
            let len = e - s;
            let mut bits = 0u32;
            for t in 0..8 {
                let c = _mm512_set1_epi32(*bc.get_unchecked(s + t));
                let hit = _mm512_cmpeq_epi32_mask(c, lo) as u32
                    | ((_mm512_cmpeq_epi32_mask(c, hi) as u32) << 16);
                bits |= hit & u32::from(t < len).wrapping_neg();
            }
            for e in s + 8..e {
                let c = _mm512_set1_epi32(b.1[e]);
                bits |= _mm512_cmpeq_epi32_mask(c, lo) as u32
                    | ((_mm512_cmpeq_epi32_mask(c, hi) as u32) << 16);
            }
            m[k] = bits;
        }
    }
    Some(m)
}

/// The OR of the 8 lanes of `bits` (each lane one bit of a lane mask).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn or_of_lanes(bits: std::arch::x86_64::__m256i) -> u32 {
    use std::arch::x86_64::*;
    let x = _mm_or_si128(
        _mm256_castsi256_si128(bits),
        _mm256_extracti128_si256::<1>(bits),
    );
    let x = _mm_or_si128(x, _mm_unpackhi_epi64(x, x));
    let x = _mm_or_si128(x, _mm_srli_si128::<4>(x));
    _mm_cvtsi128_si32(x) as u32
}

/// Adds op(B)'s row at `p` times `f` into the lanes of `acc` that `m`
/// names (8 a register, in order): each register takes as many of the
/// row's next values as its byte of `m` has bits, expanded into them.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn add_expanded<const R: usize>(
    acc: &mut [std::arch::x86_64::__m512d; R],
    m: u32,
    f: f64,
    mut p: *const f64,
) {
    use std::arch::x86_64::*;
    let f = _mm512_set1_pd(f);
    for (q, acc) in acc.iter_mut().enumerate() {
        let mq = (m >> (8 * q)) as u8;
        let v = _mm512_maskz_expand_pd(mq, _mm512_loadu_pd(p));
        *acc = _mm512_mask_add_pd(*acc, mq, *acc, _mm512_mul_pd(f, v));
        p = p.add(mq.count_ones() as usize);
    }
}

/// Stores the first `len` lanes of `acc` (at most 32) at `out`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_lanes<const R: usize>(
    acc: &[std::arch::x86_64::__m512d; R],
    out: *mut f64,
    len: usize,
) {
    use std::arch::x86_64::*;
    let all = if len >= 32 {
        u32::MAX
    } else {
        (1u32 << len) - 1
    };
    for (q, acc) in acc.iter().enumerate() {
        _mm512_mask_storeu_pd(out.add(8 * q), (all >> (8 * q)) as u8, *acc);
    }
}

/// The lane mask of op(B)'s row `s..e` from the table of lanes
/// `lane_of`: 8 lanes gathered at a time (AVX-512 masked gather), shifted
/// into bits and OR-reduced, the rest of a longer row one at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
unsafe fn gathered_mask(b: &Csr, (s, e): (usize, usize), lane_of: &[u32]) -> u32 {
    use std::arch::x86_64::*;
    let len = e - s;
    let keep = if len >= 8 {
        0xffu8
    } else {
        ((1u32 << len) - 1) as u8
    };
    let cols = _mm256_maskz_loadu_epi32(keep, b.1.as_ptr().add(s));
    let lanes = _mm256_mmask_i32gather_epi32::<4>(
        _mm256_setzero_si256(),
        keep,
        cols,
        lane_of.as_ptr() as *const i32,
    );
    let bits = _mm256_maskz_sllv_epi32(keep, _mm256_set1_epi32(1), lanes);
    let mut bits = or_of_lanes(bits);
    for e in s + 8..e {
        bits |= 1 << (lane_of[b.1[e] as usize] & 31);
    }
    bits
}

/// [`lane_masks`] with each row of op(B)'s lanes gathered 8 at a time
/// (AVX-512 masked gather from a table of lanes), shifted into bits and
/// OR-reduced.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline(never)]
#[allow(clippy::needless_range_loop)]
unsafe fn lane_masks_gather(
    a: &Csr,
    b: &Csr,
    (co, cc): (&[i32], &[i32]),
    lane_of: &mut [u32],
) -> Option<Vec<u32>> {
    let mut m = vec![0u32; a.1.len()];
    for i in 0..a.3 {
        let row = &cc[co[i] as usize..co[i + 1] as usize];
        if row.len() > 32 {
            continue;
        }
        for (l, &c) in row.iter().enumerate() {
            lane_of[c as usize] = l as u32;
        }
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let r = a.1[k] as usize;
            let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
            let bits = gathered_mask(b, (s, e), lane_of);
            m[k] = bits;
        }
    }
    Some(m)
}

/// Row `i` of C summed in `R` AVX-512 registers (8 lanes each, its
/// columns in order): each row of op(B) expanded into the lanes of its
/// columns (`lanes`), multiplied and added under that mask, so each
/// column's sum is in the order of the scalar loops.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
#[allow(clippy::needless_range_loop)]
unsafe fn lanes_row<const R: usize>(
    i: usize,
    a: &Csr,
    b: &Csr,
    bv: &[f64],
    lanes: &[u32],
    out: *mut f64,
    len: usize,
) {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_pd(); R];
    for k in a.0[i] as usize..a.0[i + 1] as usize {
        let r = a.1[k] as usize;
        add_expanded(&mut acc, lanes[k], a.2[k], bv.as_ptr().add(b.0[r] as usize));
    }
    store_lanes(&acc, out, len);
}

/// [`lanes_all`] and [`lane_masks_gather`] in one pass: each entry's lanes
/// gathered, kept in `m`, and its row of op(B) added at them.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline(never)]
#[allow(clippy::needless_range_loop)]
unsafe fn lanes_record(
    a: &Csr,
    b: &Csr,
    bv: &[f64],
    (co, cc): (&[i32], &[i32]),
    (lane_of, m): (&mut [u32], &mut [u32]),
    cv: &mut [f64],
    dense: &mut [f64],
) {
    use std::arch::x86_64::*;
    for i in 0..a.3 {
        let row = &cc[co[i] as usize..co[i + 1] as usize];
        if row.len() > 32 {
            for k in a.0[i] as usize..a.0[i + 1] as usize {
                add_entry(a, b, k, dense);
            }
            gather(i, (co, cc), cv, dense);
            continue;
        }
        for (l, &c) in row.iter().enumerate() {
            lane_of[c as usize] = l as u32;
        }
        let mut acc = [_mm512_setzero_pd(); 4];
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let r = a.1[k] as usize;
            let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
            let bits = gathered_mask(b, (s, e), lane_of);
            m[k] = bits;
            add_expanded(&mut acc, bits, a.2[k], bv.as_ptr().add(s));
        }
        let len = row.len();
        let out = cv.as_mut_ptr().add(co[i] as usize);
        store_lanes(&acc, out, len);
    }
}

/// [`lanes_all`] with each entry's lane mask found as it goes, nothing
/// kept: a row of C's columns (at most 32) are told apart by their low 6
/// bits when no two share them (else the row goes through the scalar
/// loop, counted in `scalar_rows`), and a table of 64 bytes, one
/// register, gives each column's lane (`vpermb`), 8 columns of op(B) at
/// a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512vbmi")]
#[inline(never)]
#[allow(clippy::needless_range_loop)]
unsafe fn lanes_hashed(
    a: &Csr,
    b: &Csr,
    (bc, bv): (&[i32], &[f64]),
    (co, cc): (&[i32], &[i32]),
    cv: &mut [f64],
    dense: &mut [f64],
) -> usize {
    use std::arch::x86_64::*;
    let one = _mm256_set1_epi32(1);
    let low = _mm256_set1_epi32(63);
    let mut scalar_rows = 0;
    for i in 0..a.3 {
        let (s0, e0) = (co[i] as usize, co[i + 1] as usize);
        let row = &cc[s0..e0];
        let len = row.len();
        let mut table = [0u8; 64];
        let mut occupied = 0u64;
        for (l, &c) in row.iter().enumerate() {
            table[(c & 63) as usize] = l as u8;
            occupied |= 1 << (c & 63);
        }
        if len > 32 || occupied.count_ones() as usize != len {
            scalar_rows += 1;
            for k in a.0[i] as usize..a.0[i + 1] as usize {
                add_entry(a, b, k, dense);
            }
            gather(i, (co, cc), cv, dense);
            continue;
        }
        let table = _mm512_loadu_si512(table.as_ptr() as *const _);
        let mut acc = [_mm512_setzero_pd(); 4];
        for k in a.0[i] as usize..a.0[i + 1] as usize {
            let r = a.1[k] as usize;
            let (s, e) = (b.0[r] as usize, b.0[r + 1] as usize);
            let n = e - s;
            let keep = if n >= 8 {
                0xffu8
            } else {
                ((1u32 << n) - 1) as u8
            };
            let cols = _mm256_maskz_loadu_epi32(keep, bc.as_ptr().add(s));
            let h = _mm256_cvtepi32_epi8(_mm256_and_si256(cols, low));
            let lanes =
                _mm512_castsi512_si128(_mm512_permutexvar_epi8(_mm512_castsi128_si512(h), table));
            let bits = _mm256_maskz_sllv_epi32(keep, one, _mm256_cvtepu8_epi32(lanes));
            let mut m = or_of_lanes(bits);
            let tab: [u8; 64] = std::mem::transmute(table);
            for e in s + 8..e {
                m |= 1 << tab[(bc[e] & 63) as usize];
            }
            add_expanded(&mut acc, m, a.2[k], bv.as_ptr().add(s));
        }
        let out = cv.as_mut_ptr().add(s0);
        store_lanes(&acc, out, len);
    }
    scalar_rows
}

/// Each row of C summed in registers ([`lanes_row`]), as many as its
/// length needs. `bv` is op(B)'s values with 32 more.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline(never)]
unsafe fn lanes_all(
    a: &Csr,
    b: &Csr,
    bv: &[f64],
    lanes: &[u32],
    c: (&[i32], &[i32], &mut [f64]),
    dense: &mut [f64],
) {
    let (co, cc, cv) = c;
    for i in 0..a.3 {
        let (s, e) = (co[i] as usize, co[i + 1] as usize);
        let out = cv.as_mut_ptr().add(s);
        match e - s {
            0..=8 => lanes_row::<1>(i, a, b, bv, lanes, out, e - s),
            9..=16 => lanes_row::<2>(i, a, b, bv, lanes, out, e - s),
            17..=24 => lanes_row::<3>(i, a, b, bv, lanes, out, e - s),
            25..=32 => lanes_row::<4>(i, a, b, bv, lanes, out, e - s),
            // Longer rows of C (no masks): PETSc's loop.
            _ => {
                for k in a.0[i] as usize..a.0[i + 1] as usize {
                    add_entry(a, b, k, dense);
                }
                gather(i, (co, cc), cv, dense);
            }
        }
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
    {
        let lens: Vec<usize> = co.windows(2).map(|w| (w[1] - w[0]) as usize).collect();
        let over = |t: usize| lens.iter().filter(|&&l| l > t).count();
        println!(
            "C rows: longest {}, over 8 {}, over 16 {}, over 32 {} of {}",
            lens.iter().max().unwrap_or(&0),
            over(8),
            over(16),
            over(32),
            lens.len()
        );
    }
    let mut d0 = vec![0f64; b.4];
    let mut d1 = vec![0f64; b.4];
    let mut r0 = vec![0f64; nnz];
    let mut r = vec![0f64; nnz];
    let mut best = [f64::MAX; 19];
    let mut scalar_rows = 0;
    let mut mrec = vec![0u32; a.1.len()];
    let mut lane32 = vec![0u32; b.4];
    let mut bc8 = b.1.clone();
    bc8.extend([0; 8]);
    let mut lanes = None;
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl");
    #[cfg(target_arch = "x86_64")]
    let vbmi = avx512
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi");
    let mut lane_of = vec![0u8; b.4];
    let mut bv16 = b.2.clone();
    bv16.extend([0.0; 32]);
    let mut d2 = vec![0f64; 2 * b.4 + 64];
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
                11 => masked_split::<6>(&a, &b, (&co, &cc, &mut r), &mut d2),
                12 => lanes = lane_masks(&a, &b, (&co, &cc), &mut lane_of),
                14 => lanes = lane_masks8(&a, &b, &bc8, (&co, &cc), &mut lane_of),
                #[cfg(target_arch = "x86_64")]
                15 if avx512 => lanes = unsafe { lane_masks_cmp(&a, &b, &bc8, (&co, &cc)) },
                #[cfg(target_arch = "x86_64")]
                16 if avx512 => {
                    lanes = unsafe { lane_masks_gather(&a, &b, (&co, &cc), &mut lane32) }
                }
                #[cfg(target_arch = "x86_64")]
                17 if avx512 => unsafe {
                    lanes_record(
                        &a,
                        &b,
                        &bv16,
                        (&co, &cc),
                        (&mut lane32, &mut mrec),
                        &mut r,
                        &mut d0,
                    )
                },
                #[cfg(target_arch = "x86_64")]
                18 if vbmi => {
                    scalar_rows =
                        unsafe { lanes_hashed(&a, &b, (&bc8, &bv16), (&co, &cc), &mut r, &mut d0) }
                }
                #[cfg(target_arch = "x86_64")]
                13 if avx512 && lanes.is_some() => unsafe {
                    lanes_all(
                        &a,
                        &b,
                        &bv16,
                        lanes.as_deref().unwrap_or(&[]),
                        (&co, &cc, &mut r),
                        &mut d0,
                    )
                },
                // Not run: C's values as the first variant's, the time NaN.
                13 | 15..=18 => {
                    r.copy_from_slice(&r0);
                    *slot = f64::NAN;
                    continue;
                }
                _ => padded::<6>(&a, &b, &p6, (&co, &cc, &mut r), &mut dw),
            }
            *slot = slot.min(t.elapsed().as_secs_f64() * 1e3);
            if v == 11 {
                // Relative to C's largest entry: a sum that cancels to
                // near zero differs relatively in its last bits.
                let big = r0.iter().fold(0f64, |m, y| m.max(y.abs()));
                let worst = r
                    .iter()
                    .zip(&r0)
                    .fold(0f64, |m, (x, y)| m.max((x - y).abs()));
                assert!(
                    worst <= 1e-12 * big,
                    "variant {v} differs by {worst:e} (largest {big:e})"
                );
            } else if v > 0 && v != 8 && v != 12 && v != 14 && v != 15 && v != 16 {
                assert!(
                    r.iter().zip(&r0).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "variant {v} differs"
                );
            }
        }
    }
    println!("nnz(C) {nnz}; v0 petsc {:.2}  v1 two rows {:.2}  four at a time {:.2}  staged 8 {:.2}  masked 4 {:.2}  masked 6 {:.2}  masked 8 {:.2}  6 with a branch {:.2} ms; padding 6 {:.2}, padded 6 {:.2}, masked 6 two rows {:.2}, masked 6 split {:.2}; lane masks {:.2}, in registers {:.2} ({}), lane masks 8 wide {:.2}, by compares {:.2}, gathered {:.2}, recorded with the values {:.2}; hashed, nothing kept {:.2} ({} rows scalar)", best[0], best[1], best[2], best[3], best[4], best[5], best[6], best[7], best[8], best[9], best[10], best[11], best[12], best[13], if lanes.is_some() {"run"} else {"not run"}, best[14], best[15], best[16], best[17], best[18], scalar_rows);
}
