//! Transposed operands (`op(A)`, `op(B)` = T or C): built on the device
//! by work estimation into plan-owned memory, their values re-gathered by
//! every numeric phase (see `docs/gpu-pipeline.md`).

use super::*;

/// The transpose of an operand (op T or C), built on the device during
/// work estimation and kept by the plan: its row offsets, column indices,
/// values and `perm` (each entry's position in the user's arrays), in one
/// allocation of O(nnz) (the CPU back end keeps the same).
pub(super) struct Transposed {
    pub(super) buf: DeviceBuffer,
    /// The transpose as the kernels take it (`vals` points at the plan's
    /// values array, refilled by [`GpuSpgemm::regather`]).
    pub(super) csr: DeviceCsr,
    /// `nnz` offsets: entry `k` of the transpose is entry `perm[k]` of the
    /// user's matrix.
    pub(super) perm: u64,
    /// op C: the values are conjugated.
    pub(super) conjugate: bool,
}

/// Byte offsets of a transpose's arrays in its allocation.
pub(super) fn transposed_layout(types: KernelTypes, rows: u64, nnz: u64) -> [u64; 4] {
    let (ob, ib, vb) = (
        u64::from(types.offset_bytes()),
        u64::from(types.index_bytes()),
        u64::from(types.value_bytes()),
    );
    let cols = align((rows + 1) * ob);
    let perm = cols + align(nnz * ib);
    let vals = perm + align(nnz * ob);
    [cols, perm, vals, vals + nnz * vb]
}

impl GpuSpgemm {
    /// Validates the operands that are transposed (as the user gave them:
    /// a transpose of a malformed matrix would be meaningless), then builds
    /// their transposes into `a_t` / `b_t`. One wait, for the error word.
    pub(super) fn build_transposes(
        &mut self,
        stream: RawStream,
        op_a: Op,
        a: &DeviceCsr,
        op_b: Op,
        b: &DeviceCsr,
    ) -> Result<()> {
        let h = self.meta.ptr();
        let word = |w: usize| h + 8 * w as u64;
        let (error, flags) = (word(H_ERROR), word(H_FLAGS));
        for (x, op, code_offsets, code_cols) in [(a, op_a, 1i32, 2i32), (b, op_b, 3, 4)] {
            if !op.transposes() {
                continue;
            }
            let kx = KernelCsr::from(x);
            let grid = self.grid(x.nrows as u64, SETUP_BLOCK);
            // SAFETY: see `estimate`.
            unsafe {
                self.launch(
                    "rs_validate",
                    grid,
                    SETUP_BLOCK,
                    0,
                    stream,
                    &args![kx, code_offsets, code_cols, error, flags],
                )?;
            }
        }
        let err: Vec<u64> = self.read(stream, error, 1)?;
        if err[0] != u64::MAX {
            return Err(self.describe(stream, err[0], a, b));
        }
        // The flags are op(B)'s, set again by `estimate`.
        self.memset(stream, flags, 0, 16)?;
        if op_a.transposes() {
            self.a_t = Some(self.transpose(stream, a, op_a == Op::C)?);
        }
        if op_b.transposes() {
            self.b_t = Some(self.transpose(stream, b, op_b == Op::C)?);
        }
        Ok(())
    }

    /// The transpose of the validated `x` (see `kernels/transpose.cu`), in
    /// a new allocation; its values are filled by [`GpuSpgemm::regather`].
    pub(super) fn transpose(
        &self,
        stream: RawStream,
        x: &DeviceCsr,
        conjugate: bool,
    ) -> Result<Transposed> {
        let (rows, nnz) = (x.ncols as u64, x.nnz as u64);
        let [cols_at, perm_at, vals_at, total] = transposed_layout(self.types, rows, nnz);
        let buf = DeviceBuffer::new(&self.dev, stream, total, "the transpose of an operand")?;
        let t = buf.ptr();
        // Counts, then offsets (ncols + 1 words), cursors, scan tile sums.
        let words = rows + 1;
        let sums_at = 2 * align(words * 8);
        let tmp_bytes = sums_at + scan_tiles(words, self.scan_block).max(1) * 8;
        let tmp = DeviceBuffer::new(&self.dev, stream, tmp_bytes, "transposing an operand")?;
        let (counts, cursor, sums) = (tmp.ptr(), tmp.ptr() + align(words * 8), tmp.ptr() + sums_at);
        let (t_rows, t_cols, perm) = (t, t + cols_at, t + perm_at);
        self.memset(stream, counts, 0, words * 8)?;
        let kx = KernelCsr::from(x);
        let warp = u64::from(self.dev.limits().warp);
        let error = self.meta.ptr() + 8 * H_ERROR as u64;
        let (rows_arg, base) = (rows as i64, x.base);
        // SAFETY: see `estimate`; `counts` and `cursor` hold ncols + 1
        // words, the transpose's arrays ncols + 1 offsets and nnz entries.
        unsafe {
            self.launch(
                "rs_transpose_count",
                self.grid(nnz, SETUP_BLOCK),
                SETUP_BLOCK,
                0,
                stream,
                &args![kx, counts],
            )?;
        }
        self.scan(stream, counts, words, sums)?;
        // SAFETY: as above.
        unsafe {
            self.launch(
                "rs_write_offsets",
                self.grid(words, PLAIN_BLOCK),
                PLAIN_BLOCK,
                0,
                stream,
                &args![rows_arg, counts, t_rows, base, error],
            )?;
            self.dev
                .copy(cursor, counts, (words * 8) as usize, stream)
                .map_err(|e| e.context("copying the transpose's offsets"))?;
            self.launch(
                "rs_transpose_scatter",
                self.grid(x.nrows as u64 * warp, SETUP_BLOCK),
                SETUP_BLOCK,
                0,
                stream,
                &args![kx, cursor, t_cols, perm],
            )?;
            for long_rows in [0i32, 1] {
                let grid = if long_rows == 0 {
                    self.grid(rows * warp, SETUP_BLOCK)
                } else {
                    self.grid(rows * u64::from(SETUP_BLOCK), SETUP_BLOCK)
                };
                self.launch(
                    "rs_transpose_sort_rows",
                    grid,
                    SETUP_BLOCK,
                    0,
                    stream,
                    &args![rows_arg, t_rows, base, perm, t_cols, long_rows],
                )?;
            }
        }
        // `tmp` is freed in stream order after the kernels above.
        drop(tmp);
        Ok(Transposed {
            csr: DeviceCsr {
                rows: t_rows,
                cols: if nnz > 0 { t_cols } else { 0 },
                vals: if nnz > 0 { t + vals_at } else { 0 },
                nrows: x.ncols,
                ncols: x.nrows,
                nnz: x.nnz,
                base: x.base,
            },
            perm,
            conjugate,
            buf,
        })
    }

    /// Refills the values of the transposes from the user's current arrays
    /// (`rs_transpose_gather`; conjugated for op C).
    pub(super) fn regather(&self, stream: RawStream, a: &DeviceCsr, b: &DeviceCsr) -> Result<()> {
        for (t, x) in [(&self.a_t, a), (&self.b_t, b)] {
            let Some(t) = t else { continue };
            if x.nnz == 0 {
                continue;
            }
            let (nnz, perm, src, dst) = (x.nnz, t.perm, x.vals, t.csr.vals);
            let conjugate = i32::from(t.conjugate);
            // SAFETY: see `estimate`; `perm` and `dst` hold nnz entries.
            unsafe {
                self.launch(
                    "rs_transpose_gather",
                    self.grid(nnz as u64, PLAIN_BLOCK),
                    PLAIN_BLOCK,
                    0,
                    stream,
                    &args![nnz, perm, src, dst, conjugate],
                )?;
            }
        }
        Ok(())
    }
}
