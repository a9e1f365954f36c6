//! The numeric phase on a structure of C that is already known (the reuse
//! flow's `reuse_compute`, and PETSc's MAT_REUSE_MATRIX through the C ABI):
//! every product is added straight into the position of its column in C's
//! row, found through a per-column slot table, so nothing is searched,
//! marked in a bit map or sorted.
//!
//! Per row: the row's columns of C take their slots (one pass over the
//! row), then each product costs one table look-up and one add. A product
//! whose column is not in C's row (a plan made for another pattern, which
//! the fingerprints let through only on a collision) is an error, never a
//! write elsewhere.

use super::rows::{too_many_columns, Chunk, NumericPiece, Operand};
use super::scratch::{bytes_of, Scratch};
use crate::error::{try_vec, Error, Result};
use crate::types::{Index, Scalar};

/// One table entry per column of op(B): the row tag that last claimed the
/// column and the column's position in that row of C.
#[derive(Clone, Copy, Default)]
struct Slot {
    tag: u32,
    position: u32,
}

/// Bytes a chunk takes to add rows of up to `longest_row` entries (values
/// of `value_bytes`) into C's known structure over `ncols` columns.
pub(super) fn workspace_bytes(ncols: usize, longest_row: usize, value_bytes: usize) -> u64 {
    (ncols as u64)
        .saturating_mul(std::mem::size_of::<Slot>() as u64)
        .saturating_add((longest_row as u64).saturating_mul(value_bytes as u64))
}

/// The slot table of a chunk and the newest tag in it (every slot's tag is
/// at most `tag`, so the next row's tag claims no slot by accident, also
/// when the table is kept for a later product).
struct SlotTable {
    slots: Vec<Slot>,
    tag: u32,
}

impl Scratch for SlotTable {
    fn bytes(&self) -> usize {
        bytes_of(&self.slots)
    }
}

/// Adds the products of the chunk's rows into its values of C at the
/// known columns `pattern` (all of C's columns with C's index base
/// `out.scale.base`; row `i` is `pattern[offsets[i]..offsets[i + 1]]`).
/// `out.vals` holds the values of these rows only, from
/// `offsets[rows.start]`; `out.cols` and `out.sorted` are not used.
pub(super) fn accumulate_rows<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    pattern: &[J],
    out: NumericPiece<'_, T, J>,
) -> Result<()> {
    let (a, a_vals) = (&a.pattern, a.values);
    let (b, b_vals) = (&b.pattern, b.values);
    let Chunk { rows, scratch, .. } = chunk;
    let NumericPiece {
        offsets,
        vals,
        scale,
        ..
    } = out;
    // A copy: the loops store through `vals`, which the compiler cannot
    // tell apart from `*scale`, so it would read α and β again after each.
    let scale = *scale;
    let longest = rows
        .clone()
        .map(|i| offsets[i + 1] - offsets[i])
        .max()
        .unwrap_or(0);
    if longest > u32::MAX as usize {
        return Err(Error::InvalidValue(format!(
            "a row of C has {longest} entries, more than a reuse row table holds"
        )));
    }
    let mut kept = scratch.take_or_make(
        |t: &SlotTable| t.slots.len() >= b.ncols,
        || {
            Ok::<_, Error>(SlotTable {
                slots: try_vec(b.ncols, Slot::default(), "column slot table")?,
                tag: 0,
            })
        },
    )?;
    let SlotTable {
        slots: ref mut table,
        ref mut tag,
    } = kept;
    let mut sums = try_vec(longest, T::zero(), "row sums")?;
    let origin = offsets[rows.start];
    for i in rows {
        *tag = tag.wrapping_add(1);
        if *tag == 0 {
            table.fill(Slot::default());
            *tag = 1;
        }
        let tag = *tag;
        let cols = &pattern[offsets[i]..offsets[i + 1]];
        let sums = &mut sums[..cols.len()];
        for (p, &c) in cols.iter().enumerate() {
            let j = c
                .as_usize()
                .checked_sub(scale.base)
                .filter(|&j| j < b.ncols)
                .ok_or_else(|| {
                    Error::InvalidValue(format!(
                        "C's column index {} in row {i} is out of range for {} columns",
                        c.to_i64(),
                        b.ncols
                    ))
                })?;
            let slot = &mut table[j];
            if slot.tag == tag {
                return Err(Error::InvalidValue(format!(
                    "row {i} of C lists column {j} twice"
                )));
            }
            *slot = Slot {
                tag,
                position: p as u32,
            };
            sums[p] = T::zero();
        }
        for k in a.range(i) {
            let f = a_vals[k];
            let r = b.range(a.col(k));
            for (&c, &v) in b.cols[r.clone()].iter().zip(&b_vals[r]) {
                let slot = table[c.as_usize() - b.base];
                if slot.tag != tag {
                    return Err(too_many_columns(i, cols.len()));
                }
                sums[slot.position as usize] += f * v;
            }
        }
        let out = &mut vals[offsets[i] - origin..offsets[i + 1] - origin];
        for (d, &s) in out.iter_mut().zip(sums.iter()) {
            scale.store(d, s);
        }
    }
    scratch.give(kept);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::rows::Scale;
    use crate::backend::cpu::ScratchPool;
    use crate::plan::{RowPattern, RowWork};

    fn scale() -> Scale<f64> {
        Scale {
            alpha: 1.0,
            beta: 0.0,
            base: 0,
        }
    }

    /// A = [1 2; 0 3] times B = [4 0; 5 6] into `vals`, at C's columns
    /// `pattern` with row offsets `offsets`.
    fn two_by_two_into(pattern: &[i32], offsets: &[usize], vals: &mut [f64]) -> Result<()> {
        let (ao, ac, av) = ([0i32, 2, 3], [0i32, 1, 1], [1.0, 2.0, 3.0]);
        let (bo, bc, bv) = ([0i32, 1, 3], [0i32, 0, 1], [4.0, 5.0, 6.0]);
        let a = RowPattern::zero_based(&ao, &ac, 2);
        let b = RowPattern::zero_based(&bo, &bc, 2);
        let scratch = ScratchPool::default();
        let work = RowWork::new(&a, &b, 1)?;
        let chunk = Chunk {
            rows: 0..2,
            work: &work,
            scratch: &scratch,
            b_canonical: true,
        };
        let out = NumericPiece {
            offsets,
            cols: None,
            vals,
            scale: &scale(),
            sorted: true,
        };
        accumulate_rows(
            &Operand {
                pattern: a,
                values: &av,
            },
            &Operand {
                pattern: b,
                values: &bv,
            },
            chunk,
            pattern,
            out,
        )
    }

    /// C = [14 12; 15 18] at C's columns `pattern`.
    fn two_by_two(pattern: &[i32]) -> [f64; 4] {
        let mut vals = [f64::NAN; 4];
        two_by_two_into(pattern, &[0, 2, 4], &mut vals).unwrap();
        vals
    }

    #[test]
    fn sums_into_known_columns() {
        assert_eq!(two_by_two(&[0, 1, 0, 1]), [14.0, 12.0, 15.0, 18.0]);
        // Columns in another order give the values in that order.
        assert_eq!(two_by_two(&[1, 0, 1, 0]), [12.0, 14.0, 18.0, 15.0]);
    }

    /// A product outside C's row, a repeated or an out-of-range column of C
    /// is an error, not a write elsewhere.
    #[test]
    fn refuses_a_pattern_that_is_not_c() {
        let mut vals = [0.0; 4];
        let run = |pattern: &[i32], offsets: &[usize], vals: &mut [f64]| {
            two_by_two_into(pattern, offsets, vals).unwrap_err()
        };
        let e = run(&[0, 1, 1], &[0, 2, 3], &mut vals[..3]);
        assert!(e.to_string().contains("pattern of A or B changed"), "{e}");
        let e = run(&[0, 0, 0, 1], &[0, 2, 4], &mut vals);
        assert!(e.to_string().contains("lists column 0 twice"), "{e}");
        let e = run(&[0, 7, 0, 1], &[0, 2, 4], &mut vals);
        assert!(e.to_string().contains("out of range"), "{e}");
    }
}
