//! The numeric phase on a structure of C that is already known (the reuse
//! flow's `reuse_compute`, and PETSc's MAT_REUSE_MATRIX through the C ABI):
//! every product is added straight into the position of its column in C's
//! row, so nothing is searched, marked in a bit map or sorted. Two ways to
//! find that position, chosen per row:
//!
//! - **Merge** (short rows, PETSc's `MatMatMultNumeric_SeqAIJ_SeqAIJ_Sorted`):
//!   when B's rows are canonical and C's row is strictly increasing, each
//!   row of B is a subsequence of C's row, so a position in C's row that
//!   only moves forward finds every product's column. C's row is copied
//!   (zero-based, with a sentinel) into a small buffer first. Per product
//!   this costs a few comparisons in L1 instead of a look-up in a table as
//!   wide as op(B) (a cache miss once the table outgrows L1/L2).
//! - **Slot table** (longer rows, unsorted rows, B not canonical): the
//!   row's columns of C take their slots in a per-column table (one pass
//!   over the row), then each product costs one table look-up and one add.
//!
//! A product whose column is not in C's row (a plan made for another
//! pattern, which the fingerprints let through only on a collision) is an
//! error on both ways, never a write elsewhere: the merge reaches the end of
//! C's row, or the table's slot belongs to another row. A column listed
//! twice or out of range is an error too (such a row never merges: it is
//! not strictly increasing, or its last column is out of range, and the
//! table refuses it).

use super::rows::{too_many_columns, Chunk, NumericPiece, Operand};
use super::scratch::{bytes_of, Scratch, ScratchPool};
use crate::error::{try_vec, Error, Result};
use crate::plan::RowPattern;
use crate::types::{Index, Scalar};

/// C's rows of at most this many entries are merged (when B's rows are
/// canonical and the row is strictly increasing); longer rows use the slot
/// table. A merge walks C's row once per entry of A's row, so its cost
/// grows with the row's length times A's row length, while the table's
/// grows with the products alone (see the measurements in
/// `docs/performance.md`).
pub(super) const MERGE_MAX_ROW: usize = 32;

/// One table entry per column of op(B): the row tag that last claimed the
/// column and the column's position in that row of C.
#[derive(Clone, Copy, Default)]
struct Slot {
    tag: u32,
    position: u32,
}

/// Bytes a chunk takes to add rows of up to `longest_row` entries (values
/// of `value_bytes`) into C's known structure over `ncols` columns: the
/// slot table, the row's sums and the merge's copy of C's row.
pub(super) fn workspace_bytes(ncols: usize, longest_row: usize, value_bytes: usize) -> u64 {
    let merged = longest_row.min(MERGE_MAX_ROW) as u64 + 1;
    (ncols as u64)
        .saturating_mul(std::mem::size_of::<Slot>() as u64)
        .saturating_add((longest_row as u64).saturating_mul(value_bytes as u64))
        .saturating_add(merged * std::mem::size_of::<usize>() as u64)
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

impl SlotTable {
    /// A kept table of at least `ncols` slots, or a new one.
    fn take(scratch: &ScratchPool, ncols: usize) -> Result<Self> {
        scratch.take_or_make(
            |t: &SlotTable| t.slots.len() >= ncols,
            || {
                Ok::<_, Error>(SlotTable {
                    slots: try_vec(ncols, Slot::default(), "column slot table")?,
                    tag: 0,
                })
            },
        )
    }

    /// Sums the products of row `i` into `sums` (one per column of C's row
    /// `cols`, which has C's index base `base`) through the table.
    #[inline]
    fn sum_row<T: Scalar, I: Index, J: Index>(
        &mut self,
        (a, a_vals): (&RowPattern<'_, I, J>, &[T]),
        (b, b_vals): (&RowPattern<'_, I, J>, &[T]),
        (i, cols, base): (usize, &[J], usize),
        sums: &mut [T],
    ) -> Result<()> {
        self.tag = self.tag.wrapping_add(1);
        if self.tag == 0 {
            self.slots.fill(Slot::default());
            self.tag = 1;
        }
        let (table, tag) = (&mut self.slots, self.tag);
        for (p, &c) in cols.iter().enumerate() {
            let j = c
                .as_usize()
                .checked_sub(base)
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
        Ok(())
    }
}

/// Sums the products of row `i` into `sums` by merging each row of B
/// along C's row `cols` (C's index base `base`; B's rows canonical), or
/// returns `false` without summing when C's row is not strictly increasing
/// within `0..b.ncols` (the caller then uses the slot table, which accepts
/// any order and refuses repeated and out-of-range columns). `local` holds
/// at least `cols.len() + 1` entries.
#[inline]
fn merge_row<T: Scalar, I: Index, J: Index>(
    (a, a_vals): (&RowPattern<'_, I, J>, &[T]),
    (b, b_vals): (&RowPattern<'_, I, J>, &[T]),
    (i, cols, base): (usize, &[J], usize),
    local: &mut [usize],
    sums: &mut [T],
) -> Result<bool> {
    let n = cols.len();
    let local = &mut local[..=n];
    // Zero-based; a column below the base wraps to a huge value, which
    // fails the order or range test below.
    for (d, &c) in local.iter_mut().zip(cols) {
        *d = c.as_usize().wrapping_sub(base);
    }
    // Strictly increasing with the last column in range: every column is
    // in range, none repeats, and the sentinel stops every search.
    let fits = local[..n].windows(2).all(|w| w[0] < w[1])
        && n.checked_sub(1).map_or(true, |l| local[l] < b.ncols);
    if !fits {
        return Ok(false);
    }
    local[n] = usize::MAX;
    sums.fill(T::zero());
    for k in a.range(i) {
        let f = a_vals[k];
        let r = b.range(a.col(k));
        let mut p = 0;
        for (&c, &v) in b.cols[r.clone()].iter().zip(&b_vals[r]) {
            let j = c.as_usize() - b.base;
            while local[p] < j {
                p += 1;
            }
            // Passed it (not in C's row, or B's row is not increasing) or
            // reached the sentinel: the column is not where the plan
            // says.
            if local[p] != j {
                return Err(too_many_columns(i, n));
            }
            sums[p] += f * v;
            p += 1;
        }
    }
    Ok(true)
}

/// Adds the products of the chunk's rows into its values of C at the
/// known columns `pattern` (all of C's columns with C's index base
/// `out.scale.base`; row `i` is `pattern[offsets[i]..offsets[i + 1]]`).
/// `out.vals` holds the values of these rows only, from
/// `offsets[rows.start]`; `out.cols` and `out.sorted` are not used.
/// Returns the number of rows summed by merging (the others used the slot
/// table).
pub(super) fn accumulate_rows<T: Scalar, I: Index, J: Index>(
    a: &Operand<'_, T, I, J>,
    b: &Operand<'_, T, I, J>,
    chunk: Chunk<'_>,
    pattern: &[J],
    out: NumericPiece<'_, T, J>,
) -> Result<usize> {
    let (a, a_vals) = (&a.pattern, a.values);
    let (b, b_vals) = (&b.pattern, b.values);
    let Chunk {
        rows,
        scratch,
        b_canonical,
        ..
    } = chunk;
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
    // Taken at the first row that needs it: a chunk of short sorted rows
    // never touches the table.
    let mut table: Option<SlotTable> = None;
    let mut sums = try_vec(longest, T::zero(), "row sums")?;
    let merge_len = if b_canonical {
        longest.min(MERGE_MAX_ROW) + 1
    } else {
        0
    };
    let mut local = try_vec(merge_len, 0usize, "merged row of C")?;
    let mut merged = 0;
    let origin = offsets[rows.start];
    for i in rows {
        let cols = &pattern[offsets[i]..offsets[i + 1]];
        let sums = &mut sums[..cols.len()];
        let row = (i, cols, scale.base);
        if b_canonical
            && cols.len() <= MERGE_MAX_ROW
            && merge_row((a, a_vals), (b, b_vals), row, &mut local, sums)?
        {
            merged += 1;
        } else {
            let t = match &mut table {
                Some(t) => t,
                None => table.insert(SlotTable::take(scratch, b.ncols)?),
            };
            t.sum_row((a, a_vals), (b, b_vals), row, sums)?;
        }
        let out = &mut vals[offsets[i] - origin..offsets[i + 1] - origin];
        for (d, &s) in out.iter_mut().zip(sums.iter()) {
            scale.store(d, s);
        }
    }
    if let Some(t) = table {
        scratch.give(t);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::rows::Scale;
    use crate::backend::cpu::ScratchPool;
    use crate::plan::{RowPattern, RowWork};

    /// A CSR matrix with zero-based `i32` indices, for the kernel's tests.
    struct Csr {
        offsets: Vec<i32>,
        cols: Vec<i32>,
        vals: Vec<f64>,
        ncols: usize,
    }

    impl Csr {
        fn rows(rows: &[&[(i32, f64)]], ncols: usize) -> Csr {
            let mut m = Csr {
                offsets: vec![0],
                cols: Vec::new(),
                vals: Vec::new(),
                ncols,
            };
            for r in rows {
                m.cols.extend(r.iter().map(|e| e.0));
                m.vals.extend(r.iter().map(|e| e.1));
                m.offsets.push(m.cols.len() as i32);
            }
            m
        }

        /// The pattern with its indices shifted to `base`.
        fn shifted(&self, base: i32) -> (Vec<i32>, Vec<i32>) {
            (
                self.offsets.iter().map(|x| x + base).collect(),
                self.cols.iter().map(|x| x + base).collect(),
            )
        }
    }

    /// The kernel on `a * b` into `vals` at C's columns `pattern` (index
    /// base `base` for A, B and C) with row offsets `offsets`, all rows in
    /// one chunk; returns the rows it merged.
    fn run(
        (a, b): (&Csr, &Csr),
        (pattern, offsets, base): (&[i32], &[usize], i32),
        (alpha, beta, b_canonical): (f64, f64, bool),
        vals: &mut [f64],
    ) -> Result<usize> {
        let (ao, ac) = a.shifted(base);
        let (bo, bc) = b.shifted(base);
        let pat = |offsets, cols, ncols| RowPattern {
            nrows: a.offsets.len().max(b.offsets.len()),
            ncols,
            offsets,
            cols,
            base: base as usize,
        };
        let mut ra = pat(&ao[..], &ac[..], a.ncols);
        ra.nrows = a.offsets.len() - 1;
        let mut rb = pat(&bo[..], &bc[..], b.ncols);
        rb.nrows = b.offsets.len() - 1;
        let scratch = ScratchPool::default();
        let work = RowWork::new(&ra, &rb, 1)?;
        let chunk = Chunk {
            rows: 0..a.offsets.len() - 1,
            work: &work,
            scratch: &scratch,
            b_canonical,
        };
        let scale = Scale {
            alpha,
            beta,
            base: base as usize,
        };
        let out = NumericPiece {
            offsets,
            cols: None,
            vals,
            scale: &scale,
            sorted: true,
        };
        let operand = |pattern, values| Operand { pattern, values };
        accumulate_rows(
            &operand(ra, &a.vals),
            &operand(rb, &b.vals),
            chunk,
            pattern,
            out,
        )
    }

    /// A = [1 2; 0 3], B = [4 0; 5 6]: C = [14 12; 15 18].
    fn two_by_two() -> (Csr, Csr) {
        (
            Csr::rows(&[&[(0, 1.0), (1, 2.0)], &[(1, 3.0)]], 2),
            Csr::rows(&[&[(0, 4.0)], &[(0, 5.0), (1, 6.0)]], 2),
        )
    }

    /// C's values at the columns `pattern` (rows of two), and the rows
    /// merged.
    fn two_by_two_at(pattern: &[i32], b_canonical: bool) -> ([f64; 4], usize) {
        let (a, b) = two_by_two();
        let mut vals = [f64::NAN; 4];
        let opts = (1.0, 0.0, b_canonical);
        let merged = run((&a, &b), (pattern, &[0, 2, 4], 0), opts, &mut vals).unwrap();
        (vals, merged)
    }

    #[test]
    fn sums_into_known_columns() {
        // Sorted rows and canonical B: merged.
        let sorted = [14.0, 12.0, 15.0, 18.0];
        assert_eq!(two_by_two_at(&[0, 1, 0, 1], true), (sorted, 2));
        // B not known to be canonical: the table, same values.
        assert_eq!(two_by_two_at(&[0, 1, 0, 1], false), (sorted, 0));
        // Columns in another order give the values in that order, through
        // the table.
        let reversed = [12.0, 14.0, 18.0, 15.0];
        assert_eq!(two_by_two_at(&[1, 0, 1, 0], true), (reversed, 0));
        assert_eq!(two_by_two_at(&[1, 0, 1, 0], false), (reversed, 0));
        // One row in order, one not: one row each way.
        assert_eq!(
            two_by_two_at(&[0, 1, 1, 0], true),
            ([14.0, 12.0, 18.0, 15.0], 1)
        );
    }

    /// A product outside C's row, a repeated or an out-of-range column of C
    /// is an error, not a write elsewhere, on both ways.
    #[test]
    fn refuses_a_pattern_that_is_not_c() {
        let (a, b) = two_by_two();
        for b_canonical in [true, false] {
            let mut vals = [0.0; 4];
            let mut fail = |pattern: &[i32], offsets: &[usize]| {
                let vals = &mut vals[..pattern.len()];
                let opts = (1.0, 0.0, b_canonical);
                run((&a, &b), (pattern, offsets, 0), opts, vals)
                    .unwrap_err()
                    .to_string()
            };
            // Row 1 lacks column 0 (merge: the product passes C's column 1).
            let e = fail(&[0, 1, 1], &[0, 2, 3]);
            assert!(e.contains("pattern of A or B changed"), "{e}");
            // Row 1 lacks column 1 (merge: reaches the end of C's row).
            let e = fail(&[0, 1, 0], &[0, 2, 3]);
            assert!(e.contains("pattern of A or B changed"), "{e}");
            // Row 1 is empty but has products.
            let e = fail(&[0, 1], &[0, 2, 2]);
            assert!(e.contains("pattern of A or B changed"), "{e}");
            let e = fail(&[0, 0, 0, 1], &[0, 2, 4]);
            assert!(e.contains("lists column 0 twice"), "{e}");
            let e = fail(&[0, 1, 1, 1], &[0, 2, 4]);
            assert!(e.contains("lists column 1 twice"), "{e}");
            let e = fail(&[0, 7, 0, 1], &[0, 2, 4]);
            assert!(e.contains("out of range"), "{e}");
            let e = fail(&[-1, 1, 0, 1], &[0, 2, 4]);
            assert!(e.contains("out of range"), "{e}");
        }
    }

    /// A row of B that is not increasing (what `b_canonical` promised, on a
    /// fingerprint collision) makes a merge fail, never sum wrongly.
    #[test]
    fn a_row_of_b_out_of_order_is_refused_by_the_merge() {
        let a = Csr::rows(&[&[(0, 1.0)]], 1);
        let b = Csr::rows(&[&[(1, 2.0), (0, 3.0)]], 2);
        let mut vals = [0.0; 2];
        let e = run((&a, &b), (&[0, 1], &[0, 2], 0), (1.0, 0.0, true), &mut vals).unwrap_err();
        assert!(e.to_string().contains("pattern of A or B changed"), "{e}");
        // Not canonical: the table sums it.
        let merged = run((&a, &b), (&[0, 1], &[0, 2], 0), (1.0, 0.0, false), &mut vals);
        assert_eq!((merged.unwrap(), vals), (0, [3.0, 2.0]));
    }

    /// A small pseudo-random `rows x cols` matrix with sorted rows of up
    /// to `per_row` entries (integers, so sums are exact).
    fn random(rows: usize, cols: usize, per_row: usize, seed: u64) -> Csr {
        let mut x = seed;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let rows: Vec<Vec<(i32, f64)>> = (0..rows)
            .map(|_| {
                let mut r: Vec<i32> = (0..next() as usize % (per_row + 1))
                    .map(|_| (next() as usize % cols) as i32)
                    .collect();
                r.sort_unstable();
                r.dedup();
                r.into_iter()
                    .map(|c| (c, (next() % 7) as f64 - 3.0))
                    .collect()
            })
            .collect();
        let refs: Vec<&[(i32, f64)]> = rows.iter().map(|r| &r[..]).collect();
        Csr::rows(&refs, cols)
    }

    /// C = alpha * A B + beta * C0 on C's exact pattern, by the kernel
    /// (both ways, bases 0 and 1) and by dense arithmetic; rows short and
    /// long (over [`MERGE_MAX_ROW`]) in one chunk.
    #[test]
    fn merge_and_table_agree_with_a_dense_product() {
        for (seed, (k, n, per_row)) in [(1u64, (12, 9, 4)), (2, (30, 80, 12)), (3, (5, 200, 40))]
            .into_iter()
        {
            let (m, alpha, beta) = (25, 2.0, -1.0);
            let a = random(m, k, 5, seed);
            let b = random(k, n, per_row, seed + 100);
            // Dense product and C's pattern (every column a product reaches).
            let mut dense = vec![vec![None::<f64>; n]; m];
            for i in 0..m {
                for p in a.offsets[i] as usize..a.offsets[i + 1] as usize {
                    let r = a.cols[p] as usize;
                    for q in b.offsets[r] as usize..b.offsets[r + 1] as usize {
                        let d = &mut dense[i][b.cols[q] as usize];
                        *d = Some(d.unwrap_or(0.0) + a.vals[p] * b.vals[q]);
                    }
                }
            }
            let (mut offsets, mut pattern, mut old) = (vec![0usize], Vec::new(), Vec::new());
            let mut want = Vec::new();
            for row in &dense {
                for (j, v) in row.iter().enumerate() {
                    if let Some(v) = v {
                        let c0 = (j % 5) as f64;
                        pattern.push(j as i32);
                        old.push(c0);
                        want.push(alpha * v + beta * c0);
                    }
                }
                offsets.push(pattern.len());
            }
            let longest = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap();
            let short = offsets
                .windows(2)
                .filter(|w| w[1] - w[0] <= MERGE_MAX_ROW)
                .count();
            for base in [0, 1] {
                let shifted: Vec<i32> = pattern.iter().map(|c| c + base).collect();
                for b_canonical in [true, false] {
                    let mut vals = old.clone();
                    let at = (&shifted[..], &offsets[..], base);
                    let merged = run((&a, &b), at, (alpha, beta, b_canonical), &mut vals);
                    let expected = if b_canonical { short } else { 0 };
                    let case = format!("seed {seed} base {base} canonical {b_canonical}");
                    assert_eq!(merged.unwrap(), expected, "{case}, longest row {longest}");
                    assert_eq!(vals, want, "{case}");
                }
            }
            if seed == 3 {
                assert!(longest > MERGE_MAX_ROW && short > 0, "{longest} {short}");
            }
        }
    }
}
