//! Readable errors from the kernels' error word: which matrix, row and
//! value was wrong, read back from the device.

use super::*;

impl GpuSpgemm {
    /// The message for an error word `(row << 8) | code` of the kernels,
    /// with the offending values read back where possible.
    pub(super) fn describe(
        &self,
        stream: RawStream,
        word: u64,
        a: &DeviceCsr,
        b: &DeviceCsr,
    ) -> Error {
        let (row, code) = ((word >> 8) as i64, (word & 0xff) as u32);
        let (x, name) = match code {
            1 | 2 => (a, "A"),
            3 | 4 => (b, "B"),
            _ => {
                return Error::InvalidValue(format!(
                    "nnz(C) does not fit the row offset type (at row {row} of C)"
                ))
            }
        };
        let offsets = self.read_offsets(stream, x, row);
        if code == 1 || code == 3 {
            let detail = match offsets {
                Some((lo, hi)) => {
                    let (base, nnz, last) = (i64::from(x.base), x.nnz, x.nrows - 1);
                    let why = if row == 0 && lo != base {
                        format!("rowOffsets[0] = {lo} is not the index base {base}")
                    } else if lo < base {
                        format!("rowOffsets[{row}] = {lo} is below the index base {base}")
                    } else if hi < lo {
                        format!(
                            "rowOffsets decrease: rowOffsets[{row}] = {lo} > rowOffsets[{}] = {hi}",
                            row + 1
                        )
                    } else if row == last && hi - base != nnz {
                        format!(
                            "rowOffsets[{}] - base = {} but nnz = {nnz}",
                            row + 1,
                            hi - base
                        )
                    } else {
                        format!(
                            "rowOffsets[{}] = {hi} exceeds nnz + base = {}",
                            row + 1,
                            nnz + base
                        )
                    };
                    format!(": {why}")
                }
                None => String::new(),
            };
            return Error::InvalidValue(format!(
                "{name}'s row offsets are invalid at row {row}{detail}"
            ));
        }
        let range = format!("{}..{}", x.base, x.ncols + i64::from(x.base));
        let detail = offsets
            .and_then(|(lo, hi)| self.first_bad_column(stream, x, lo, hi))
            .map(|(k, v)| format!(": colInd[{k}] = {v}"))
            .unwrap_or_default();
        Error::InvalidValue(format!(
            "{name}'s row {row} has a column index outside {range}{detail}"
        ))
    }

    /// `(rows[row], rows[row + 1])` of `x`, when readable.
    pub(super) fn read_offsets(
        &self,
        stream: RawStream,
        x: &DeviceCsr,
        row: i64,
    ) -> Option<(i64, i64)> {
        if row < 0 || row >= x.nrows {
            return None;
        }
        let w = u64::from(self.types.offset_bytes());
        let at = x.rows + w * row as u64;
        if self.types.offset64 {
            let v: Vec<i64> = self.read(stream, at, 2).ok()?;
            Some((v[0], v[1]))
        } else {
            let v: Vec<i32> = self.read(stream, at, 2).ok()?;
            Some((i64::from(v[0]), i64::from(v[1])))
        }
    }

    /// The first column of `x.cols[lo - base..hi - base]` outside the
    /// matrix, for a row of at most 2^20 entries.
    pub(super) fn first_bad_column(
        &self,
        stream: RawStream,
        x: &DeviceCsr,
        lo: i64,
        hi: i64,
    ) -> Option<(i64, i64)> {
        let base = i64::from(x.base);
        let (lo, hi) = (lo - base, hi - base);
        if lo < 0 || hi < lo || hi > x.nnz || hi - lo > 1 << 20 {
            return None;
        }
        let w = u64::from(self.types.index_bytes());
        let at = x.cols + w * lo as u64;
        let n = (hi - lo) as usize;
        let cols: Vec<i64> = if self.types.index64 {
            self.read(stream, at, n).ok()?
        } else {
            self.read::<i32>(stream, at, n)
                .ok()?
                .into_iter()
                .map(i64::from)
                .collect()
        };
        cols.iter()
            .position(|&c| c - base < 0 || c - base >= x.ncols)
            .map(|k| (lo + k as i64, cols[k]))
    }
}
