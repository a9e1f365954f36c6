//! Hash-table row kernels of the CPU back end.
//!
//! One open-addressing table (linear probing, multiplicative hash) per chunk
//! of rows, sized for the chunk's longest row: a row with `p` products has
//! at most `min(p, ncols)` distinct columns and uses the first
//! `next_pow2(2 * min(p, ncols))` slots, so the load factor stays at or
//! under one half and clearing costs O(p).

use super::rows::{
    copy_scaled_row, prefetch_rows_of_b, repeats_previous, row_mismatch, single_entry,
    too_many_columns, Chunk, ColumnsPiece, NumericPiece, Operand, PREFETCH_AHEAD,
};
use super::scratch::{bytes_of, Scratch, ScratchPool};
use crate::error::{try_reserve, try_vec, Result};
use crate::plan::{RowPattern, RowWork};
use crate::types::{Index, Scalar};
use std::ops::Range;

const EMPTY: usize = usize::MAX;

/// Slots used by a row with `nprod` products and `ncols` possible columns.
#[inline]
fn table_size(nprod: u64, ncols: usize) -> usize {
    let distinct = usize::try_from(nprod).unwrap_or(usize::MAX).min(ncols);
    distinct.saturating_mul(2).next_power_of_two().max(8)
}

/// Bytes of the hash table a chunk whose longest row has `nprod` products
/// takes (keys, and sums of `value_bytes` each; 0 for the symbolic
/// phase's keys-only table).
pub(super) fn table_bytes(nprod: u64, ncols: usize, value_bytes: usize) -> u64 {
    (table_size(nprod, ncols) as u64).saturating_mul(8 + value_bytes as u64)
}

/// A hash table's keys, every slot [`EMPTY`] between rows (and when kept
/// between products), with the sums of the numeric phase beside them.
struct Table<T> {
    keys: Vec<usize>,
    sums: Vec<T>,
}

impl<T: Scalar> Scratch for Table<T> {
    fn bytes(&self) -> usize {
        bytes_of(&self.keys) + bytes_of(&self.sums)
    }
}

impl<T: Scalar> Table<T> {
    /// A table of at least `size` slots (sums only `with_sums`), a kept one
    /// from `scratch` when one is large enough.
    fn take(scratch: &ScratchPool, size: usize, with_sums: bool) -> Result<Self> {
        let fits = |t: &Self| t.keys.len() >= size && (!with_sums || t.sums.len() >= size);
        scratch.take_or_make(fits, || {
            Ok(Table {
                keys: try_vec(size, EMPTY, "hash table")?,
                sums: if with_sums {
                    try_vec(size, T::zero(), "hash table sums")?
                } else {
                    Vec::new()
                },
            })
        })
    }

    /// Gives the table back to `scratch`; every key is [`EMPTY`] again.
    fn keep(self, scratch: &ScratchPool) {
        debug_assert!(
            self.keys.iter().all(|&k| k == EMPTY),
            "a hash table given back with keys left in it"
        );
        scratch.give(self);
    }
}

/// Slots needed by the longest row of `rows`.
fn chunk_table_size(work: &RowWork, rows: &Range<usize>, ncols: usize) -> usize {
    let longest = rows.clone().map(|i| work.row(i)).max().unwrap_or(0);
    table_size(longest, ncols)
}

#[inline(always)]
fn home_slot(col: usize, mask: usize) -> usize {
    ((col as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
}

/// Inserts `col`; returns its slot and whether it was new.
#[inline(always)]
fn insert(keys: &mut [usize], mask: usize, col: usize) -> (usize, bool) {
    let mut s = home_slot(col, mask);
    loop {
        let k = keys[s];
        if k == col {
            return (s, false);
        }
        if k == EMPTY {
            keys[s] = col;
            return (s, true);
        }
        s = (s + 1) & mask;
    }
}

/// Inserts every column of output row `i` into `keys`; returns the number
/// of distinct columns.
///
/// # Errors
/// When the row has more distinct columns than half the table, which only
/// happens if the pattern differs from the one the table was sized for
/// (a stale plan); stopping there also keeps linear probing from looping.
#[inline]
fn insert_row<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    i: usize,
    keys: &mut [usize],
) -> Result<usize> {
    let mask = keys.len() - 1;
    let limit = keys.len() / 2;
    let mut distinct = 0;
    for k in a.range(i) {
        for kk in b.range(a.col(k)) {
            if insert(keys, mask, b.col(kk)).1 {
                distinct += 1;
                if distinct > limit {
                    keys.fill(EMPTY);
                    return Err(too_many_columns(i, limit));
                }
            }
        }
    }
    Ok(distinct)
}

/// Counts the distinct columns of each row of the chunk into `counts`.
pub(super) fn count_rows<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    chunk: Chunk<'_>,
    counts: &mut [usize],
) -> Result<()> {
    let Chunk {
        rows,
        work,
        scratch,
        ..
    } = chunk;
    let mut kept = Table::<f32>::take(scratch, chunk_table_size(work, &rows, b.ncols), false)?;
    let keys = &mut kept.keys;
    let first = rows.start;
    for (c, i) in rows.enumerate() {
        let nprod = work.row(i);
        if nprod <= 1 {
            counts[c] = nprod as usize;
            continue;
        }
        if repeats_previous(a, first, i) {
            counts[c] = counts[c - 1];
            continue;
        }
        let table = &mut keys[..table_size(nprod, b.ncols)];
        counts[c] = insert_row(a, b, i, table)?;
        table.fill(EMPTY);
    }
    kept.keep(scratch);
    Ok(())
}

/// Writes the sorted distinct columns (plus `base`) of each row of the
/// chunk into its piece of C's columns.
pub(super) fn list_rows<I: Index, J: Index>(
    a: &RowPattern<'_, I, J>,
    b: &RowPattern<'_, I, J>,
    chunk: Chunk<'_>,
    out: ColumnsPiece<'_, J>,
) -> Result<()> {
    let Chunk {
        rows,
        work,
        scratch,
        ..
    } = chunk;
    let ColumnsPiece {
        offsets,
        cols,
        base,
    } = out;
    let mut kept = Table::<f32>::take(scratch, chunk_table_size(work, &rows, b.ncols), false)?;
    let keys = &mut kept.keys;
    let origin = offsets[rows.start];
    for i in rows {
        let out = &mut cols[offsets[i] - origin..offsets[i + 1] - origin];
        let table = &mut keys[..table_size(work.row(i), b.ncols)];
        let distinct = insert_row(a, b, i, table)?;
        if distinct != out.len() {
            table.fill(EMPTY);
            return Err(row_mismatch(i, distinct, out.len()));
        }
        let mut n = 0;
        for key in table.iter_mut() {
            if *key != EMPTY {
                out[n] = J::from_usize_unchecked(*key + base);
                n += 1;
                *key = EMPTY;
            }
        }
        out.sort_unstable();
    }
    kept.keep(scratch);
    Ok(())
}

/// Numeric phase for the chunk's rows: accumulates each row in the table
/// in stored product order, sorts it by column (unless `out.sorted` is
/// false: then the row stays in the order its columns first appeared) and
/// writes `alpha * sum + beta * old` into `out.vals` (and the columns into
/// `out.cols`).
pub(super) fn accumulate_rows<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    out: NumericPiece<'_, T, J>,
) -> Result<()> {
    let prefetch = chunk.prefetch();
    let Chunk {
        rows,
        work,
        scratch,
        b_canonical,
    } = chunk;
    let NumericPiece {
        offsets,
        mut cols,
        vals,
        scale,
        sorted: sorted_output,
    } = out;
    // A copy: the loops store through `vals`, which the compiler cannot
    // tell apart from `*scale`, so it would read α and β again after each.
    let scale = *scale;
    let size = chunk_table_size(work, &rows, b.pattern.ncols);
    let mut kept = Table::<T>::take(scratch, size, true)?;
    let Table {
        ref mut keys,
        sums: ref mut acc,
    } = kept;
    let longest = rows
        .clone()
        .map(|i| offsets[i + 1] - offsets[i])
        .max()
        .unwrap_or(0);
    let mut row: Vec<(usize, T)> = Vec::new();
    let mut slots: Vec<usize> = Vec::new();
    try_reserve(&mut row, longest, "the row sort buffer")?;
    try_reserve(&mut slots, longest + 1, "the row slot list")?;
    let origin = offsets[rows.start];
    for i in rows {
        if prefetch {
            prefetch_rows_of_b(&a.pattern, &b.pattern, b.values, i + PREFETCH_AHEAD);
        }
        let out = offsets[i] - origin..offsets[i + 1] - origin;
        if b_canonical {
            if let Some(k) = single_entry(&a.pattern, i) {
                let out_cols = cols.as_deref_mut().map(|c| &mut c[out.clone()]);
                copy_scaled_row(
                    b,
                    a.pattern.col(k),
                    a.values[k],
                    i,
                    &scale,
                    out_cols,
                    &mut vals[out],
                )?;
                continue;
            }
        }
        let table_len = table_size(work.row(i), b.pattern.ncols);
        let (table, sums) = (&mut keys[..table_len], &mut acc[..table_len]);
        let mask = table_len - 1;
        // The slots in insertion order: collecting from them avoids scanning
        // (and clearing) the whole table.
        slots.clear();
        'products: for k in a.pattern.range(i) {
            let av = a.values[k];
            let r = a.pattern.col(k);
            for kk in b.pattern.range(r) {
                let (s, new) = insert(table, mask, b.pattern.col(kk));
                let p = av * b.values[kk];
                if new {
                    sums[s] = p;
                    slots.push(s);
                    // More columns than planned: the pattern changed. Stop
                    // before the table can fill up.
                    if slots.len() > out.len() {
                        break 'products;
                    }
                } else {
                    sums[s] += p;
                }
            }
        }
        row.clear();
        row.extend(slots.iter().map(|&s| (table[s], sums[s])));
        for &s in &slots {
            table[s] = EMPTY;
        }
        if slots.len() != out.len() {
            return Err(row_mismatch(i, slots.len(), out.len()));
        }
        if sorted_output {
            row.sort_unstable_by_key(|e| e.0);
        }
        scale.store_each(&mut vals[out.clone()], &row, |(_, v)| v);
        if let Some(cols) = cols.as_deref_mut() {
            for (d, &(c, _)) in cols[out].iter_mut().zip(row.iter()) {
                *d = J::from_usize_unchecked(c + scale.base);
            }
        }
    }
    kept.keep(scratch);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::rows::Scale;
    use crate::Error;

    fn pattern<'a>(offsets: &'a [i32], cols: &'a [i32], ncols: usize) -> RowPattern<'a, i32, i32> {
        RowPattern::zero_based(offsets, cols, ncols)
    }

    /// A plan made for one pattern and run on another (what a fingerprint
    /// collision would allow) must give an error, never a hang or a panic.
    #[test]
    fn a_stale_plan_errors_instead_of_probing_forever() {
        // Planned: A = one row with two entries, B = identity 64 x 64 (2 products).
        let a_off = [0i32, 2];
        let b_off: Vec<i32> = (0..=64).collect();
        let b_cols: Vec<i32> = (0..64).collect();
        let b = pattern(&b_off, &b_cols, 64);
        let planned = pattern(&a_off, &[0, 1], 64);
        let work = RowWork::new(&planned, &b, 1).unwrap();
        // Actual: the single row of A touches all 64 rows of B.
        let wide_off = [0i32, 64];
        let wide = pattern(&wide_off, &b_cols, 64);
        let mut counts = [0usize; 1];
        let scratch = ScratchPool::default();
        let chunk = || Chunk {
            rows: 0..1,
            work: &work,
            scratch: &scratch,
            b_canonical: false,
        };
        let e = count_rows(&wide, &b, chunk(), &mut counts).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidValue(m) if m.contains("pattern of A or B changed")),
            "{e}"
        );

        let offsets = [0usize, 2];
        let (mut cols, mut vals) = ([0i32; 2], [0.0f64; 2]);
        let scale = Scale {
            alpha: 1.0,
            beta: 0.0,
            base: 0,
        };
        let ones = [1.0f64; 64];
        let e = accumulate_rows(
            &Operand {
                pattern: wide,
                values: &ones,
            },
            &Operand {
                pattern: b,
                values: &ones,
            },
            chunk(),
            NumericPiece {
                offsets: &offsets,
                cols: Some(&mut cols[..]),
                vals: &mut vals,
                scale: &scale,
                sorted: true,
            },
        )
        .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidValue(m) if m.contains("pattern of A or B changed")),
            "{e}"
        );
        let out = ColumnsPiece {
            offsets: &offsets,
            cols: &mut cols,
            base: 0,
        };
        let e = list_rows(&wide, &b, chunk(), out).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidValue(m) if m.contains("pattern of A or B changed")),
            "{e}"
        );
        // A kernel that failed part-way keeps none of its tables.
        assert_eq!(scratch.bytes(), 0);
    }
}
