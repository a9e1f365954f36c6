//! The numeric phase on a known structure of C whose rows are short (at
//! most [`LANES_MAX_ROW`] entries), each row summed in place of an
//! accumulator as wide as op(B): a "lane" per column of the row.
//!
//! For every entry of op(A), a 64-bit mask, kept beside the plan as the
//! positions of `positions.rs` are, names the lanes of its row of C that
//! its row of op(B) adds into. Op(B)'s row is sorted and a subset of C's
//! sorted row, so its values go to the mask's lanes in order: the `t`-th
//! value to the `t`-th set bit. With AVX-512F (f64), a row of C is up to
//! eight registers of 8 lanes, and each entry of op(A) adds its row of op(B) to
//! them by one `vexpandpd` per register under that register's byte of the
//! mask: no accumulator, no column read, no gather. Elsewhere, a scalar
//! loop walks the mask's bits. Either way each lane's sum takes the
//! products in the order of the known-structure kernel (`pattern.rs`:
//! A's entries as stored, each row of op(B) as stored), from zero, so the
//! values are those of every other numeric phase bit for bit.
//!
//! `numeric_variants` (one thread, the 2-vCPU Zen 4 VM of session 86,
//! minimum of 7), PETSc's loop / the library's kind of loop / in
//! registers: Pᵀ·(A·P_tent) of GAMG's 7-point Poisson at 64³ 8.7-9.1 /
//! 8.2-8.7 / 4.22-4.26 ms; 27-point A · smoothed P 64.0-65.3 / 43.1-44.4
//! / 24.4-24.9; 7-point A · smoothed P 21.3-21.7 / 15.0-15.3 / 6.2-6.4.
//! Finding the masks ([`masks_of_rows`]) reads every product's column
//! once more: 4.8-5.0 ms for that Pᵀ·(A·P_tent), whose op(B) rows are read
//! out of order, but 55-65 ms for the 27-point A·P, more than one numeric
//! phase; so the plan builds them only where that pays
//! (`CpuPlan::lanes_pay`).
//!
//! The masks hold only if the patterns are those they were found on: the
//! plan keeps them with the fingerprint of C's structure and uses them on
//! A's and B's checked patterns. Should the patterns differ anyway, an
//! entry whose row of op(B) does not hold as many entries as its mask
//! lanes, or a lane past its row of C, is an error; nothing is read or
//! written outside op(B)'s and C's arrays.

use super::pattern::{OneArray, RowInput, RowValues, TwoArrays};
use super::rows::{NumericPiece, Operand, Scale};
use super::{SplitInput, SplitRows};
use crate::error::{try_vec, Error, Result};
use crate::plan::RowPattern;
use crate::types::{Index, Scalar};
use std::ops::Range;

/// The longest row of C summed in lanes: eight registers of 8 doubles.
pub(crate) const LANES_MAX_ROW: usize = 64;

/// Whether this machine sums rows in AVX-512 registers for values of `T`
/// (f64 on x86-64 with AVX-512F); elsewhere the masks are walked by a
/// scalar loop, which is not faster than the known-structure kernel, so
/// the plan does not build them.
pub(crate) fn in_registers<T: Scalar>() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::any::TypeId::of::<T>() == std::any::TypeId::of::<f64>()
            && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The lane masks of the entries of op(A) in rows `rows` (op(A) `a`,
/// op(B) `b`; C's zero-based row offsets `offsets` and columns `pattern`,
/// with C's index base `c_base`), in the order of A's entries; `lane_of`
/// has a cell for each column of op(B). `None` when the structure does
/// not suit: a row of C longer than [`LANES_MAX_ROW`], or a row of op(B)
/// whose columns do not fall in increasing lanes (rows not sorted, or
/// repeated columns).
///
/// # Errors
/// [`Error::InvalidValue`] when a column of C is out of range, or a
/// product's column is not in its row of C (patterns other than C's
/// structure). [`Error::AllocFailed`] for the masks.
pub(crate) fn masks_of_rows<I: Index, J: Index>(
    (a, b): (&RowPattern<'_, I, J>, &RowPattern<'_, I, J>),
    rows: Range<usize>,
    (offsets, pattern, c_base): (&[usize], &[J], usize),
    lane_of: &mut [u8],
) -> Result<Option<Vec<u64>>> {
    let entries = match rows.clone().last() {
        Some(last) => a.range(rows.start).start..a.range(last).end,
        None => 0..0,
    };
    let mut masks = try_vec(entries.len(), 0u64, "the lane masks of C's rows")?;
    let mut at = 0usize;
    for i in rows {
        let row = &pattern[offsets[i]..offsets[i + 1]];
        if row.len() > LANES_MAX_ROW {
            return Ok(None);
        }
        for (l, &c) in row.iter().enumerate() {
            let Some(cell) = lane_of.get_mut(c.as_usize().wrapping_sub(c_base)) else {
                return Err(not_in_row(i));
            };
            *cell = l as u8;
        }
        for e in a.range(i) {
            let r = a.col(e);
            let (s, t) = (
                b.offsets[r].as_usize() - b.base,
                b.offsets[r + 1].as_usize() - b.base,
            );
            let mut mask = 0u64;
            let mut next = 0usize;
            for &c in &b.cols[s..t] {
                let col = c.as_usize().wrapping_sub(b.base);
                let l = *lane_of.get(col).ok_or_else(|| not_in_row(i))? as usize;
                // The lane must hold this column (else the column is not
                // in the row), after the lanes before it.
                if row.get(l).map(|x| x.as_usize().wrapping_sub(c_base)) != Some(col) {
                    return Err(not_in_row(i));
                }
                if l < next {
                    return Ok(None);
                }
                next = l + 1;
                mask |= 1 << l;
            }
            masks[at] = mask;
            at += 1;
        }
    }
    Ok(Some(masks))
}

/// The error for masks that do not fit the patterns.
#[cold]
#[inline(never)]
fn not_in_row(i: usize) -> Error {
    Error::InvalidValue(format!(
        "row {i} of C: its products do not match the lanes found for the plan's patterns: \
         the pattern of A, B or C changed between phases"
    ))
}

/// The numeric phase of the rows `rows` from their lane `masks`
/// ([`masks_of_rows`] on the same patterns): `alpha * op(A) * op(B) +
/// beta * C` into the chunk's values of C (`out`, in one array, or split
/// between two).
///
/// # Errors
/// [`Error::InvalidValue`] when the patterns are not those the masks were
/// found on, as far as it shows (a mask lanes more or fewer values than
/// its row of op(B) holds, or lanes past its row of C, or masks left
/// over); rows before it are written.
#[allow(clippy::type_complexity)]
pub(crate) fn replay_rows<T: Scalar, I: Index, J: Index>(
    (a, a_split, b): (
        &Operand<'_, T, I, J>,
        Option<SplitInput<'_, T, I>>,
        &Operand<'_, T, I, J>,
    ),
    rows: Range<usize>,
    masks: &[u64],
    out: NumericPiece<'_, T, J>,
    split: Option<SplitRows<'_, T>>,
) -> Result<()> {
    match a_split {
        None => replay_with(a, a.values, b, rows, masks, out, split),
        Some(s) => replay_with(a, s, b, rows, masks, out, split),
    }
}

/// [`replay_rows`] with A's values read from `a_in`.
fn replay_with<T: Scalar, I: Index, J: Index, A: RowInput<T>>(
    a: &Operand<'_, T, I, J>,
    a_in: A,
    b: &Operand<'_, T, I, J>,
    rows: Range<usize>,
    masks: &[u64],
    out: NumericPiece<'_, T, J>,
    split: Option<SplitRows<'_, T>>,
) -> Result<()> {
    let offsets = out.offsets;
    let scale = *out.scale;
    let job = (a, a_in, b, masks);
    let used = match split {
        None => {
            let whole = OneArray {
                vals: out.vals,
                origin: offsets.get(rows.start).copied().unwrap_or(0),
            };
            rows_into(job, rows.clone(), offsets, (whole, &scale))?
        }
        Some(split) => {
            let origins = (
                split.first_offsets[rows.start],
                split.second_offsets[rows.start],
            );
            let two = TwoArrays { split, origins };
            rows_into(job, rows.clone(), offsets, (two, &scale))?
        }
    };
    if used != masks.len() {
        return Err(not_in_row(rows.end.saturating_sub(1)));
    }
    Ok(())
}

/// Every row of `rows` summed from its masks and written where `o` puts
/// it, scaled; returns the masks read.
#[allow(clippy::type_complexity)]
fn rows_into<T: Scalar, I: Index, J: Index, A: RowInput<T>, O: RowValues<T>>(
    (a, a_in, b, masks): (&Operand<'_, T, I, J>, A, &Operand<'_, T, I, J>, &[u64]),
    rows: Range<usize>,
    offsets: &[usize],
    (mut o, scale): (O, &Scale<T>),
) -> Result<usize> {
    let (ap, bp) = (&a.pattern, &b.pattern);
    let plain = scale.alpha == T::one() && scale.beta == T::zero();
    let registers = in_registers::<T>();
    #[cfg(test)]
    let registers = registers && !tests::SCALAR.with(std::cell::Cell::get);
    let mut sums = [T::zero(); LANES_MAX_ROW];
    let mut at = 0usize;
    for i in rows {
        let c_row = offsets[i]..offsets[i + 1];
        let len = c_row.len();
        if len > LANES_MAX_ROW {
            return Err(not_in_row(i));
        }
        let ra = ap.range(i);
        let (head, tail) = a_in.row(i, ra.clone())?;
        let (cols_head, cols_tail) = ap.cols[ra.clone()].split_at(head.len());
        let row_masks = masks.get(at..at + ra.len()).ok_or_else(|| not_in_row(i))?;
        at += ra.len();
        let (m_head, m_tail) = row_masks.split_at(head.len());
        let done = [(cols_head, head, m_head), (cols_tail, tail, m_tail)]
            .into_iter()
            .all(|part| add_entries(part, (ap.base, bp, b.values), len, registers, &mut sums));
        if !done {
            return Err(not_in_row(i));
        }
        let (first, second) = o.row(i, c_row);
        let (s1, s2) = sums[..len].split_at(first.len().min(len));
        if plain {
            first.copy_from_slice(s1);
            second.copy_from_slice(s2);
        } else {
            scale.store_each(first, s1, |v| v);
            scale.store_each(second, s2, |v| v);
        }
        sums[..len].fill(T::zero());
    }
    Ok(at)
}

/// Adds the products of A's entries `a_cols` (values `a_vals`, lane
/// masks `masks`; A's index base `a_base`) with their rows of op(B) into
/// `sums` (zero before the row's first entry), in registers where
/// `registers`; false when a mask does not fit its row of op(B) or a row
/// of C of `len` entries.
#[inline(always)]
fn add_entries<T: Scalar, I: Index, J: Index>(
    (a_cols, a_vals, masks): (&[J], &[T], &[u64]),
    (a_base, b, b_vals): (usize, &RowPattern<'_, I, J>, &[T]),
    len: usize,
    registers: bool,
    sums: &mut [T; LANES_MAX_ROW],
) -> bool {
    // Lanes past the row of C.
    let beyond = if len >= LANES_MAX_ROW {
        0
    } else {
        u64::MAX << len
    };
    #[cfg(target_arch = "x86_64")]
    if registers {
        // SAFETY: `registers` is `in_registers::<T>()`: T is f64 (so the
        // casts below are the identity) and the CPU has AVX-512F.
        unsafe {
            let a_vals = &*(a_vals as *const [T] as *const [f64]);
            let b_vals = &*(b_vals as *const [T] as *const [f64]);
            let sums = &mut *(sums as *mut [T; LANES_MAX_ROW] as *mut [f64; LANES_MAX_ROW]);
            return avx512::add_entries((a_cols, a_vals, masks), (a_base, b, b_vals), beyond, sums);
        }
    }
    let _ = registers;
    for ((&k, &f), &mask) in a_cols.iter().zip(a_vals).zip(masks) {
        let Some((s, e)) = masked_row(k, mask, (a_base, b, b_vals.len()), beyond) else {
            return false;
        };
        let mut m = mask;
        for &v in &b_vals[s..e] {
            sums[m.trailing_zeros() as usize] += f * v;
            m &= m - 1;
        }
    }
    true
}

/// The entries `s..e` of op(B)'s row that A's entry of column `k` (A's
/// index base `a_base`) names, when its lane mask `mask` fits them: as
/// many lanes as the row has values, none of `beyond` (past C's row), the
/// row within op(B)'s `b_len` values; `None` otherwise.
#[inline(always)]
fn masked_row<I: Index, J: Index>(
    k: J,
    mask: u64,
    (a_base, b, b_len): (usize, &RowPattern<'_, I, J>, usize),
    beyond: u64,
) -> Option<(usize, usize)> {
    let r = k.as_usize() - a_base;
    let (s, e) = (
        b.offsets[r].as_usize() - b.base,
        b.offsets[r + 1].as_usize() - b.base,
    );
    (mask.count_ones() as usize == e - s && mask & beyond == 0 && e <= b_len).then_some((s, e))
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{masked_row, LANES_MAX_ROW};
    use crate::plan::RowPattern;
    use crate::types::Index;
    use std::arch::x86_64::*;

    /// [`super::add_entries`] in up to eight AVX-512 registers of 8
    /// lanes, as many as the row of C needs (`len / 8`, rounded up; lanes
    /// past it are never set): see [`add_entries_in`].
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn add_entries<I: Index, J: Index>(
        a: (&[J], &[f64], &[u64]),
        b: (usize, &RowPattern<'_, I, J>, &[f64]),
        beyond: u64,
        sums: &mut [f64; LANES_MAX_ROW],
    ) -> bool {
        match (LANES_MAX_ROW - beyond.count_ones() as usize).div_ceil(8) {
            0 | 1 => add_entries_in::<1, I, J>(a, b, beyond, sums),
            2 => add_entries_in::<2, I, J>(a, b, beyond, sums),
            3 => add_entries_in::<3, I, J>(a, b, beyond, sums),
            4 => add_entries_in::<4, I, J>(a, b, beyond, sums),
            5 => add_entries_in::<5, I, J>(a, b, beyond, sums),
            6 => add_entries_in::<6, I, J>(a, b, beyond, sums),
            7 => add_entries_in::<7, I, J>(a, b, beyond, sums),
            _ => add_entries_in::<8, I, J>(a, b, beyond, sums),
        }
    }

    /// [`add_entries`] in `R` registers: each takes the row of op(B)'s
    /// next values (a masked load of as many as its byte of the mask has
    /// bits, so nothing past the row is read), expanded into those lanes,
    /// times the entry's value, added under the same byte.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `R` registers hold the row of C (`beyond`
    /// has every lane from `8 * R` on).
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add_entries_in<const R: usize, I: Index, J: Index>(
        (a_cols, a_vals, masks): (&[J], &[f64], &[u64]),
        (a_base, b, b_vals): (usize, &RowPattern<'_, I, J>, &[f64]),
        beyond: u64,
        sums: &mut [f64; LANES_MAX_ROW],
    ) -> bool {
        let p = sums.as_mut_ptr();
        let mut acc = [_mm512_setzero_pd(); R];
        for (q, acc) in acc.iter_mut().enumerate() {
            *acc = _mm512_loadu_pd(p.add(8 * q));
        }
        for ((&k, &f), &mask) in a_cols.iter().zip(a_vals).zip(masks) {
            let Some((s, _)) = masked_row(k, mask, (a_base, b, b_vals.len()), beyond) else {
                return false;
            };
            let f = _mm512_set1_pd(f);
            let mut from = b_vals.as_ptr().add(s);
            for (q, acc) in acc.iter_mut().enumerate() {
                let lanes = (mask >> (8 * q)) as u8;
                let n = lanes.count_ones();
                // `n` values from `from`, within the row (the counts add
                // up to its length, checked above).
                let v = _mm512_maskz_loadu_pd(((1u32 << n) - 1) as u8, from);
                let v = _mm512_maskz_expand_pd(lanes, v);
                *acc = _mm512_mask_add_pd(*acc, lanes, *acc, _mm512_mul_pd(f, v));
                from = from.add(n as usize);
            }
        }
        for (q, acc) in acc.iter().enumerate() {
            _mm512_storeu_pd(p.add(8 * q), *acc);
        }
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::RowPattern;
    use std::cell::Cell;

    thread_local! {
        /// The scalar loop even where AVX-512 sums in registers.
        pub(crate) static SCALAR: Cell<bool> = const { Cell::new(false) };
    }

    /// Zero-based CSR rows of (column, value), as offsets, columns and
    /// values shifted to `base`.
    fn csr(rows: &[Vec<(usize, f64)>], base: usize) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
        let mut off = vec![base as i32];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for r in rows {
            for &(c, v) in r {
                cols.push((c + base) as i32);
                vals.push(v);
            }
            off.push((cols.len() + base) as i32);
        }
        (off, cols, vals)
    }

    fn xorshift(mut x: u64) -> impl FnMut() -> usize {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as usize
        }
    }

    /// Random rows: `n` rows over `ncols` columns, up to `most` entries
    /// each, sorted and without repeats; values with cancellations.
    fn random_rows(n: usize, ncols: usize, most: usize, seed: u64) -> Vec<Vec<(usize, f64)>> {
        let mut next = xorshift(seed);
        (0..n)
            .map(|_| {
                let mut cols: Vec<usize> =
                    (0..next() % (most + 1)).map(|_| next() % ncols).collect();
                cols.sort_unstable();
                cols.dedup();
                cols.into_iter()
                    .map(|c| (c, (next() % 2001) as f64 / 97.0 - 10.0))
                    .collect()
            })
            .collect()
    }

    /// C's structure (sorted rows) and values of `a` · `b`, each column's
    /// sum in the kernels' order (A's entries as stored, each row of B as
    /// stored), from zero.
    fn reference(
        a: &[Vec<(usize, f64)>],
        b: &[Vec<(usize, f64)>],
        ncols: usize,
    ) -> Vec<Vec<(usize, f64)>> {
        let mut acc = vec![0.0f64; ncols];
        let mut seen = vec![false; ncols];
        a.iter()
            .map(|row| {
                let mut cols = Vec::new();
                for &(k, f) in row {
                    for &(c, v) in &b[k] {
                        acc[c] += f * v;
                        if !seen[c] {
                            seen[c] = true;
                            cols.push(c);
                        }
                    }
                }
                cols.sort_unstable();
                cols.iter()
                    .map(|&c| {
                        seen[c] = false;
                        (c, std::mem::replace(&mut acc[c], 0.0))
                    })
                    .collect()
            })
            .collect()
    }

    /// The masks of `a` · `b` on C's structure `c`, all rows in one
    /// chunk, index base `base` for A, B and C.
    #[allow(clippy::type_complexity)]
    fn masks(
        (a, b): (&[Vec<(usize, f64)>], &[Vec<(usize, f64)>]),
        c: &[Vec<(usize, f64)>],
        (ncols, base): (usize, usize),
    ) -> Result<Option<Vec<u64>>> {
        let ((ao, ac, _), (bo, bc, _), (_, cc, _)) = (csr(a, base), csr(b, base), csr(c, base));
        let offsets = offsets_of(c);
        let (ra, rb) = patterns((&ao, &ac), (&bo, &bc), (b.len(), ncols, base));
        let mut lane_of = vec![0u8; ncols];
        masks_of_rows((&ra, &rb), 0..a.len(), (&offsets, &cc, base), &mut lane_of)
    }

    /// The patterns of A (offsets and columns `a`, as many columns as B
    /// has rows, `b_rows`) and B (`b`, `ncols` columns), index base
    /// `base`.
    #[allow(clippy::type_complexity)]
    fn patterns<'p>(
        a: (&'p [i32], &'p [i32]),
        b: (&'p [i32], &'p [i32]),
        (b_rows, ncols, base): (usize, usize, usize),
    ) -> (RowPattern<'p, i32, i32>, RowPattern<'p, i32, i32>) {
        let rows = |(offsets, cols): (&'p [i32], &'p [i32]), ncols| RowPattern {
            nrows: offsets.len() - 1,
            ncols,
            offsets,
            cols,
            base,
        };
        (rows(a, b_rows), rows(b, ncols))
    }

    fn offsets_of(c: &[Vec<(usize, f64)>]) -> Vec<usize> {
        std::iter::once(0)
            .chain(c.iter().scan(0, |n, r| {
                *n += r.len();
                Some(*n)
            }))
            .collect()
    }

    /// `alpha * a * b + beta * vals` from `masks` into `vals` (C's values
    /// in one array; or split, each row's first half in one array and the
    /// rest in the other, when `split`), in registers or not.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn replay(
        (a, b): (&[Vec<(usize, f64)>], &[Vec<(usize, f64)>]),
        c: &[Vec<(usize, f64)>],
        (ncols, base): (usize, usize),
        masks: &[u64],
        (alpha, beta): (f64, f64),
        vals: &mut [f64],
        (split, registers): (bool, bool),
    ) -> Result<()> {
        let ((ao, ac, av), (bo, bc, bv)) = (csr(a, base), csr(b, base));
        let offsets = offsets_of(c);
        let (ra, rb) = patterns((&ao, &ac), (&bo, &bc), (b.len(), ncols, base));
        let scale = Scale { alpha, beta, base };
        let (oa, ob) = (
            Operand {
                pattern: ra,
                values: &av[..],
            },
            Operand {
                pattern: rb,
                values: &bv[..],
            },
        );
        SCALAR.with(|s| s.set(!registers));
        let result = if split {
            let (mut fo, mut so) = (vec![0usize], vec![0usize]);
            let (mut first, mut second) = (Vec::new(), Vec::new());
            for (i, row) in c.iter().enumerate() {
                let h = row.len() / 2;
                first.extend_from_slice(&vals[offsets[i]..offsets[i] + h]);
                second.extend_from_slice(&vals[offsets[i] + h..offsets[i + 1]]);
                fo.push(first.len());
                so.push(second.len());
            }
            let split_rows = SplitRows {
                first_offsets: &fo,
                first: &mut first,
                second_offsets: &so,
                second: &mut second,
            };
            let out = NumericPiece {
                offsets: &offsets,
                cols: None,
                vals: &mut [],
                scale: &scale,
                sorted: true,
            };
            let r = replay_rows((&oa, None, &ob), 0..a.len(), masks, out, Some(split_rows));
            for (i, _) in c.iter().enumerate() {
                let h = fo[i + 1] - fo[i];
                vals[offsets[i]..offsets[i] + h].copy_from_slice(&first[fo[i]..fo[i + 1]]);
                vals[offsets[i] + h..offsets[i + 1]].copy_from_slice(&second[so[i]..so[i + 1]]);
            }
            r
        } else {
            let out = NumericPiece {
                offsets: &offsets,
                cols: None,
                vals,
                scale: &scale,
                sorted: true,
            };
            replay_rows((&oa, None, &ob), 0..a.len(), masks, out, None)
        };
        SCALAR.with(|s| s.set(false));
        result
    }

    /// Every output, base and loop gives the reference's values bit for
    /// bit (α = 1, β = 0), or the reference scaled as `Scale` stores it.
    #[test]
    fn lanes_sum_as_the_other_kernels_bit_for_bit() {
        let ncols = 90;
        for seed in 1..6u64 {
            let b = random_rows(40, ncols, 7, seed);
            let a = random_rows(60, 40, 9, seed + 100);
            let c = reference(&a, &b, ncols);
            assert!(c.iter().all(|r| r.len() <= LANES_MAX_ROW), "seed {seed}");
            let want: Vec<f64> = c.iter().flatten().map(|&(_, v)| v).collect();
            for base in [0, 1] {
                let m = masks((&a, &b), &c, (ncols, base))
                    .unwrap()
                    .expect("rows fit");
                assert_eq!(m.len(), a.iter().map(Vec::len).sum::<usize>());
                for (split, registers) in
                    [(false, false), (false, true), (true, false), (true, true)]
                {
                    let at = format!("seed {seed} base {base} split {split} registers {registers}");
                    let mut vals = vec![f64::NAN; want.len()];
                    replay(
                        (&a, &b),
                        &c,
                        (ncols, base),
                        &m,
                        (1.0, 0.0),
                        &mut vals,
                        (split, registers),
                    )
                    .unwrap();
                    for (x, y) in vals.iter().zip(&want) {
                        assert_eq!(x.to_bits(), y.to_bits(), "{at}");
                    }
                    let old: Vec<f64> = (0..want.len()).map(|i| i as f64 * 0.25 - 3.0).collect();
                    let mut vals = old.clone();
                    replay(
                        (&a, &b),
                        &c,
                        (ncols, base),
                        &m,
                        (2.0, 0.5),
                        &mut vals,
                        (split, registers),
                    )
                    .unwrap();
                    for ((x, y), o) in vals.iter().zip(&want).zip(&old) {
                        assert_eq!(x.to_bits(), (2.0 * y + 0.5 * o).to_bits(), "{at}");
                    }
                }
            }
        }
    }

    /// Rows of C longer than [`LANES_MAX_ROW`] and rows of B whose columns
    /// do not fall in increasing lanes give no masks; a column of B
    /// outside its row of C is an error.
    #[test]
    fn masks_refuse_what_they_cannot_hold() {
        let one = |cols: &[usize]| cols.iter().map(|&c| (c, 1.0)).collect::<Vec<_>>();
        // 65 rows of B, one column each: C's one row has 65 columns.
        let b: Vec<Vec<(usize, f64)>> = (0..65).map(|j| one(&[j])).collect();
        let a = vec![one(&(0..65).collect::<Vec<_>>())];
        let c = reference(&a, &b, 65);
        assert_eq!(masks((&a, &b), &c, (65, 0)).unwrap(), None);
        // 64 of them fit.
        let a64 = vec![one(&(0..64).collect::<Vec<_>>())];
        let c64 = reference(&a64, &b, 65);
        assert!(masks((&a64, &b), &c64, (65, 0)).unwrap().is_some());
        // A row of B unsorted.
        let b = vec![one(&[3, 1])];
        let a = vec![one(&[0])];
        let c = vec![one(&[1, 3])];
        assert_eq!(masks((&a, &b), &c, (4, 0)).unwrap(), None);
        // A column of B not in C's row.
        let b = vec![one(&[1, 2])];
        assert!(masks((&a, &b), &c, (4, 0)).is_err());
        // A column of C out of range.
        let c = vec![one(&[1, 7])];
        assert!(masks((&a, &b), &c, (4, 0)).is_err());
    }

    /// Masks found on one pattern of B, replayed on another whose rows'
    /// lengths differ, or with masks left over: an error, in registers or
    /// not.
    #[test]
    fn masks_of_other_patterns_are_an_error() {
        let ncols = 50;
        let b = random_rows(30, ncols, 6, 7);
        let a = random_rows(20, 30, 8, 8);
        let c = reference(&a, &b, ncols);
        let m = masks((&a, &b), &c, (ncols, 0)).unwrap().unwrap();
        let nnz: usize = c.iter().map(Vec::len).sum();
        for registers in [false, true] {
            // A row of B one entry longer.
            let mut longer = b.clone();
            let r = (0..longer.len())
                .find(|&r| a.iter().flatten().any(|&(k, _)| k == r))
                .unwrap();
            let free = (0..ncols)
                .find(|c| longer[r].iter().all(|e| e.0 != *c))
                .unwrap();
            longer[r].push((free, 1.0));
            longer[r].sort_by_key(|e| e.0);
            let mut vals = vec![0.0; nnz];
            let job = (&a[..], &longer[..]);
            assert!(replay(
                job,
                &c,
                (ncols, 0),
                &m,
                (1.0, 0.0),
                &mut vals,
                (false, registers)
            )
            .is_err());
            // More masks than A's entries.
            let mut more = m.clone();
            more.push(0);
            let mut vals = vec![0.0; nnz];
            assert!(replay(
                (&a, &b),
                &c,
                (ncols, 0),
                &more,
                (1.0, 0.0),
                &mut vals,
                (false, registers)
            )
            .is_err());
        }
    }
}
