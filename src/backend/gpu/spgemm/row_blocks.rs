//! C in row blocks: the numeric phase of a product whose C lives in host
//! memory and does not fit on the device beside the inputs.
//!
//! The symbolic phase already left C's row offsets and the numeric bins
//! (rows grouped by nnz) on the device. Here each bin's list is sorted by
//! row once, so the rows of any row range are one stretch of every bin.
//! C's rows are then cut into blocks whose entries fit a device buffer, and
//! for each block the numeric kernels run on its stretch of every bin,
//! writing through C's column and value pointers shifted back by the
//! block's first entry: the kernels index C by the plan's zero-based row
//! offsets, so entry `e` of the block lands at `e - first` in the buffer.
//! No kernel knows it runs on a block.
//!
//! With room for two buffers, block `k + 1` runs while block `k` is copied
//! to the host on a second stream (the copy of a block waits for the event
//! recorded after its kernels; the kernels of block `k + 2` wait for the
//! event recorded after that copy, as they reuse its buffer). With room for
//! one, copies and kernels alternate. The results are those of the whole
//! C computed at once, bit for bit: every row is computed by the same
//! kernel with the same table as without blocks.

use super::*;

/// C's column and value arrays in host memory (either may be NULL: not
/// copied back), for [`GpuSpgemm::numeric_in_row_blocks`].
#[derive(Clone, Copy, Debug)]
pub struct HostColumns {
    /// C's column indices (nnz(C) of the plan's index type), or NULL.
    pub cols: *mut u8,
    /// C's values (nnz(C) of the plan's value type), or NULL.
    pub vals: *mut u8,
}

/// One block of C's rows.
#[derive(Clone, Debug)]
struct RowBlock {
    /// C's zero-based entries of the block's rows.
    entries: Range<i64>,
    /// Per numeric bin (the direct bin last): the device address of the
    /// block's rows in the bin array, and how many there are.
    lists: Vec<(u64, i64)>,
    /// The block's rows of the global bin: positions in that bin's list.
    global: Range<usize>,
}

impl RowBlock {
    /// Entries of C in the block.
    fn len(&self) -> usize {
        (self.entries.end - self.entries.start) as usize
    }
}

/// Rows `r0..` of C taken while their entries fit `cap` (each row's
/// entries are at most `cap`): the row ranges of the blocks. `offsets`:
/// C's zero-based row offsets.
fn cut_rows(offsets: &[i64], cap: i64) -> Vec<Range<usize>> {
    let m = offsets.len() - 1;
    let mut blocks = Vec::new();
    let mut r0 = 0;
    while r0 < m {
        let limit = offsets[r0] + cap;
        // Rows r0..r0 + p end within the limit (a row always fits).
        let p = offsets[r0 + 1..].partition_point(|&o| o <= limit);
        let r1 = (r0 + p).max(r0 + 1);
        blocks.push(r0..r1);
        r0 = r1;
    }
    blocks
}

/// The device buffers of the blocks: `buffers` of `cap` column indices
/// and values each.
struct BlockBuffers {
    _buf: DeviceBuffer,
    cols: Vec<u64>,
    vals: Vec<u64>,
}

/// The copy stream and the events that order the blocks' kernels and
/// copies (one pair per buffer), destroyed on drop.
struct CopyLane {
    dev: Arc<dyn GpuDevice>,
    stream: RawStream,
    computed: Vec<RawEvent>,
    copied: Vec<RawEvent>,
}

impl CopyLane {
    fn new(dev: &Arc<dyn GpuDevice>, buffers: usize) -> Result<CopyLane> {
        let mut lane = CopyLane {
            dev: dev.clone(),
            stream: std::ptr::null_mut(),
            computed: Vec::new(),
            copied: Vec::new(),
        };
        lane.stream = dev.create_stream()?;
        for _ in 0..buffers {
            lane.computed.push(dev.create_event()?);
            lane.copied.push(dev.create_event()?);
        }
        Ok(lane)
    }
}

impl Drop for CopyLane {
    fn drop(&mut self) {
        let _ = self.dev.bind();
        // SAFETY: created in `new`, destroyed once; work queued on the
        // stream still completes.
        unsafe {
            if !self.stream.is_null() {
                self.dev.destroy_stream(self.stream);
            }
            for &e in self.computed.iter().chain(&self.copied) {
                self.dev.destroy_event(e);
            }
        }
    }
}

impl GpuSpgemm {
    /// Sorts each numeric bin's rows (and the global bin's table sizes
    /// with them), once: the rows of a row range are then one stretch of
    /// every bin.
    fn sort_bins_by_row(&mut self, stream: RawStream) -> Result<()> {
        let s = self.symbolic.as_ref().expect("checked by the caller");
        if s.bins_by_row {
            return Ok(());
        }
        let bins_ptr = self.meta.ptr() + self.layout.bins;
        let total: i64 = s.numeric_counts.iter().sum();
        let mut rows: Vec<u32> = self.read(stream, bins_ptr, total as usize)?;
        let g = self.bins.numeric.len() - 1;
        let mut tables = s.global_tables.clone();
        for (j, (&at, &count)) in s.numeric_offsets.iter().zip(&s.numeric_counts).enumerate() {
            let list = &mut rows[at as usize..(at + count) as usize];
            if j == g {
                let mut pairs: Vec<(u32, u64)> =
                    list.iter().copied().zip(tables.iter().copied()).collect();
                pairs.sort_unstable();
                for (k, (row, table)) in pairs.into_iter().enumerate() {
                    list[k] = row;
                    tables[k] = table;
                }
            } else {
                list.sort_unstable();
            }
        }
        self.upload(stream, bins_ptr, &rows)?;
        let s = self.symbolic.as_mut().expect("checked above");
        s.global_tables = tables;
        s.bins_by_row = true;
        self.bins_host = Some(rows);
        Ok(())
    }

    /// The blocks of C for buffers of `cap` entries, from C's zero-based
    /// row offsets.
    fn row_blocks(&self, offsets: &[i64], cap: i64) -> Vec<RowBlock> {
        let s = self.symbolic.as_ref().expect("checked by the caller");
        let rows = self.bins_host.as_ref().expect("sorted first");
        let g = self.bins.numeric.len() - 1;
        let bins_ptr = self.meta.ptr() + self.layout.bins;
        cut_rows(offsets, cap)
            .into_iter()
            .map(|r| {
                let (r0, r1) = (r.start as u32, r.end as u32);
                let mut global = 0..0;
                let lists = (s.numeric_offsets.iter().zip(&s.numeric_counts))
                    .enumerate()
                    .map(|(j, (&at, &count))| {
                        let list = &rows[at as usize..(at + count) as usize];
                        let lo = list.partition_point(|&x| x < r0);
                        let hi = list.partition_point(|&x| x < r1);
                        if j == g {
                            global = lo..hi;
                        }
                        (bins_ptr + 4 * (at as u64 + lo as u64), (hi - lo) as i64)
                    })
                    .collect();
                RowBlock {
                    entries: offsets[r.start]..offsets[r.end],
                    lists,
                    global,
                }
            })
            .collect()
    }

    /// The numeric phase with C's columns and values in host memory,
    /// computed in row blocks that fit the device memory the product has
    /// left (its budget, or the device's free memory): C's row offsets are
    /// written on the device at `c.rows` (C's offset type, `c.base` added;
    /// the caller copies them back), its columns and values block by block
    /// into `host` (see the module docs); `c.cols` and `c.vals` are not
    /// used. Returns the number of blocks.
    ///
    /// # Errors
    /// As [`GpuSpgemm::numeric`]; [`Error::InsufficientResources`] when the
    /// device cannot hold the longest row of C beside what the product
    /// holds, naming the smallest budget that would work.
    ///
    /// # Safety
    /// `host`'s non-NULL arrays hold nnz(C) column indices or values of the
    /// plan's types; with a non-zero beta they hold C's old values.
    pub unsafe fn numeric_in_row_blocks(
        &mut self,
        stream: RawStream,
        (a, b): (&DeviceCsr, &DeviceCsr),
        c: &DeviceCsr,
        host: HostColumns,
        scalars: DeviceScalars,
    ) -> Result<usize> {
        let Some(nnz) = self.symbolic.as_ref().map(|s| s.nnz) else {
            return Err(Error::InvalidValue(
                "the numeric phase (copy) was called before the symbolic phase (compute)".into(),
            ));
        };
        self.check_c_shape(c, nnz)?;
        let (c_rows, c_base) = (c.rows, c.base);
        if c_rows == 0 {
            return Err(Error::InvalidValue("C's row offsets are NULL".into()));
        }
        if scalars.alpha == 0 || (scalars.beta == 0 && !scalars.beta_is_zero) {
            return Err(Error::InvalidValue(
                "alpha or beta is a NULL device pointer".into(),
            ));
        }
        if !scalars.beta_is_zero && host.vals.is_null() {
            return Err(Error::InvalidValue(
                "beta is not zero but C's values are NULL".into(),
            ));
        }
        let (a, b) = &self.used_entries(a, b, "numeric phase", true)?;
        self.dev.bind()?;
        self.numeric_batches_run.store(0, Ordering::Relaxed);
        let r = self.regather(stream, a, b).and_then(|()| {
            let (a, b) = self.operands(a, b);
            self.write_c_offsets(stream, c_rows, c_base)?;
            if nnz == 0 {
                return Ok(0);
            }
            self.sort_bins_by_row(stream)?;
            // SAFETY: the caller's contract.
            unsafe { self.run_row_blocks(stream, (&a, &b), c_base, host, scalars) }
        });
        let done = self.lanes.record_done(stream);
        let blocks = r?;
        done?;
        self.row_blocks_run = blocks;
        Ok(blocks)
    }

    /// The buffers' capacity in entries and their number (2 when two fit
    /// the longest row, else 1), within the room the product has left
    /// once the global tables' least need is set aside.
    fn block_capacity(&self, longest_row: i64) -> Result<(i64, usize)> {
        let entry = u64::from(self.types.index_bytes() + self.types.value_bytes());
        let state = self.dev.budget().ok_or_else(|| {
            Error::InternalError(
                "C in row blocks needs the device's free memory or a budget".into(),
            )
        })?;
        // Each buffer's column region is aligned.
        let slack = 4 * ALIGN;
        let least = self.least_numeric_table_bytes() + slack;
        let room = state.room().saturating_sub(least);
        let longest = longest_row.max(1) as u64;
        let two = room / 2 / entry;
        if two >= longest {
            return Ok((two.min(i64::MAX as u64) as i64, 2));
        }
        let one = room / entry;
        if one >= longest {
            return Ok((one as i64, 1));
        }
        Err(state.too_small(
            state.live + least + longest * entry,
            "the longest row of this product's C on the device (C is computed in row blocks)",
        ))
    }

    /// # Safety
    /// As [`GpuSpgemm::numeric_in_row_blocks`].
    unsafe fn run_row_blocks(
        &self,
        stream: RawStream,
        (a, b): (&DeviceCsr, &DeviceCsr),
        c_base: i32,
        host: HostColumns,
        scalars: DeviceScalars,
    ) -> Result<usize> {
        let s = self.symbolic.as_ref().expect("checked by the caller");
        let m = self.m as usize;
        let offsets: Vec<i64> = self.read(stream, self.meta.ptr() + self.layout.row_size, m + 1)?;
        let longest = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let (cap, buffers) = self.block_capacity(longest)?;
        let cap = cap.min(s.nnz);
        let blocks = self.row_blocks(&offsets, cap);
        let buffers = buffers.min(blocks.len());
        let (ib, vb) = (
            u64::from(self.types.index_bytes()),
            u64::from(self.types.value_bytes()),
        );
        let (cols_bytes, vals_bytes) = (align(cap as u64 * ib), align(cap as u64 * vb));
        let each = cols_bytes + vals_bytes;
        let buf = DeviceBuffer::new(
            &self.dev,
            stream,
            each * buffers as u64,
            "C's row blocks on the device",
        )?;
        let bufs = BlockBuffers {
            cols: (0..buffers).map(|k| buf.ptr() + k as u64 * each).collect(),
            vals: (0..buffers)
                .map(|k| buf.ptr() + k as u64 * each + cols_bytes)
                .collect(),
            _buf: buf,
        };
        let lane = CopyLane::new(&self.dev, buffers)?;
        let dev = &self.dev;
        // Copies block k's entries to the host on the copy stream, after
        // its kernels; records that its buffer is free again.
        let copy_back = |k: usize| -> Result<()> {
            let blk = &blocks[k];
            let x = k % buffers;
            let (first, len) = (blk.entries.start as usize, blk.len());
            // SAFETY: live events and streams; the host arrays hold nnz(C)
            // entries (the caller's contract) and the buffer holds the
            // block's `len <= cap`.
            unsafe {
                dev.wait(lane.stream, lane.computed[x])?;
                for (host, dev_ptr, size) in
                    [(host.cols, bufs.cols[x], ib), (host.vals, bufs.vals[x], vb)]
                {
                    if !host.is_null() {
                        let size = size as usize;
                        let dst =
                            std::slice::from_raw_parts_mut(host.add(first * size), len * size);
                        dev.download(dst, dev_ptr, lane.stream)
                            .map_err(|e| e.context("copying a row block of C to the host"))?;
                    }
                }
                dev.record(lane.copied[x], lane.stream)
            }
        };
        for (k, blk) in blocks.iter().enumerate() {
            let x = k % buffers;
            if buffers == 1 && k > 0 {
                copy_back(k - 1)?;
            }
            if k >= buffers {
                // SAFETY: live event and stream; recorded by `copy_back`.
                unsafe { dev.wait(stream, lane.copied[x]) }?;
            }
            let first = blk.entries.start as u64;
            if !scalars.beta_is_zero {
                // SAFETY: the caller's contract: C's old values.
                let old = unsafe {
                    std::slice::from_raw_parts(
                        host.vals.add((first * vb) as usize),
                        blk.len() * vb as usize,
                    )
                };
                self.upload(stream, bufs.vals[x], old)?;
            }
            let out = NumericOut {
                cols: bufs.cols[x].wrapping_sub(first * ib),
                vals: bufs.vals[x].wrapping_sub(first * vb),
                base: c_base,
                alpha: scalars.alpha,
                beta: if scalars.beta_is_zero {
                    0
                } else {
                    scalars.beta
                },
            };
            self.launch_numeric_bins(
                stream,
                a,
                b,
                &out,
                &blk.lists,
                // C is not on the device whole: batches of the least size.
                (&s.global_tables[blk.global.clone()], 0),
            )?;
            // SAFETY: live event and stream.
            unsafe { dev.record(lane.computed[x], stream) }?;
            if buffers == 2 && k > 0 {
                copy_back(k - 1)?;
            }
        }
        copy_back(blocks.len() - 1)?;
        // The caller's stream goes on after the last copy (the copies run
        // in order on the copy stream).
        // SAFETY: live event and stream.
        unsafe { dev.wait(stream, lane.copied[(blocks.len() - 1) % buffers]) }?;
        Ok(blocks.len())
    }
}

#[cfg(test)]
mod tests {
    use super::cut_rows;

    #[test]
    fn blocks_cover_every_row_within_the_capacity() {
        // Rows of 3, 0, 5, 2, 2, 0, 4 entries.
        let offsets = [0, 3, 3, 8, 10, 12, 12, 16];
        for cap in 5..20 {
            let blocks = cut_rows(&offsets, cap);
            assert_eq!(blocks.first().map(|r| r.start), Some(0));
            assert_eq!(blocks.last().map(|r| r.end), Some(7));
            for w in blocks.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            for r in &blocks {
                assert!(!r.is_empty());
                assert!(offsets[r.end] - offsets[r.start] <= cap, "cap {cap}: {r:?}");
            }
        }
        assert_eq!(cut_rows(&offsets, 5), vec![0..2, 2..3, 3..6, 6..7]);
        assert_eq!(cut_rows(&offsets, 16), vec![0..7]);
        // Empty rows at the end join the last block.
        assert_eq!(cut_rows(&[0, 4, 4, 4], 4), vec![0..3]);
    }
}
