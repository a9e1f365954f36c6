//! Device resources of a plan that clean up after themselves: stream-ordered
//! buffers, the extra streams a phase forks onto, and the batched global
//! hash tables of long rows.

use super::*;

/// A device allocation freed when dropped, stream-ordered where the device
/// supports it (`cuMemAllocAsync` / `cuMemFreeAsync`), else synchronously.
pub(super) struct DeviceBuffer {
    pub(super) dev: Arc<dyn GpuDevice>,
    pub(super) ptr: u64,
    pub(super) bytes: u64,
    /// The stream the free is ordered on.
    pub(super) stream: RawStream,
}

impl DeviceBuffer {
    pub(super) fn new(
        dev: &Arc<dyn GpuDevice>,
        stream: RawStream,
        bytes: u64,
        what: &str,
    ) -> Result<Self> {
        let mut buf = DeviceBuffer {
            dev: dev.clone(),
            ptr: 0,
            bytes,
            stream,
        };
        if bytes == 0 {
            return Ok(buf);
        }
        let size = usize::try_from(bytes).map_err(|_| {
            Error::InsufficientResources(format!("{what}: {bytes} bytes exceed the address space"))
        })?;
        buf.ptr = dev
            .alloc(size, Some(stream))
            .map_err(|e| e.context(&format!("allocating {bytes} bytes for {what}")))?;
        Ok(buf)
    }

    pub(super) fn ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        // Errors cannot be reported from here; the memory is lost at worst.
        let _ = self.dev.bind();
        // SAFETY: allocated above, freed once, after the work ordered
        // before it on `stream`.
        unsafe { self.dev.free(self.ptr, Some(self.stream)) };
        self.ptr = 0;
    }
}

/// The extra streams and events of one plan.
pub(super) struct Lanes {
    pub(super) dev: Arc<dyn GpuDevice>,
    pub(super) streams: Vec<RawStream>,
    /// Recorded on the caller's stream before a fork.
    pub(super) fork: RawEvent,
    /// One per extra stream, recorded at a join.
    pub(super) joins: Vec<RawEvent>,
    /// Recorded on the caller's stream at the end of every phase, so the
    /// plan's memory can be freed after its last work even when the
    /// caller's stream no longer exists.
    pub(super) done: RawEvent,
}

impl Lanes {
    pub(super) fn new(dev: &Arc<dyn GpuDevice>) -> Result<Lanes> {
        let mut lanes = Lanes {
            dev: dev.clone(),
            streams: Vec::new(),
            fork: std::ptr::null_mut(),
            joins: Vec::new(),
            done: std::ptr::null_mut(),
        };
        lanes.fork = dev.create_event()?;
        lanes.done = dev.create_event()?;
        for _ in 0..AUX_STREAMS {
            lanes.streams.push(dev.create_stream()?);
            lanes.joins.push(dev.create_event()?);
        }
        Ok(lanes)
    }

    pub(super) fn record_done(&self, caller: RawStream) -> Result<()> {
        // SAFETY: live event and stream.
        unsafe { self.dev.record(self.done, caller) }
    }

    /// Makes `n` extra streams wait for the work queued on `caller`.
    pub(super) fn fork(&self, caller: RawStream, n: usize) -> Result<Fork<'_>> {
        let n = n.min(self.streams.len());
        let mut fork = Fork {
            lanes: self,
            caller,
            used: 0,
        };
        if n > 0 {
            // SAFETY: live events and streams.
            unsafe { self.dev.record(self.fork, caller) }?;
            for &s in &self.streams[..n] {
                // SAFETY: as above.
                unsafe { self.dev.wait(s, self.fork) }?;
                fork.used += 1;
            }
        }
        Ok(fork)
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        let _ = self.dev.bind();
        // SAFETY: created in `new`, destroyed once. Destroying a stream
        // with queued work returns at once; the work still completes.
        unsafe {
            for &s in &self.streams {
                self.dev.destroy_stream(s);
            }
            for &e in self.joins.iter().chain([&self.fork, &self.done]) {
                if !e.is_null() {
                    self.dev.destroy_event(e);
                }
            }
        }
    }
}

/// Work spread over the caller's stream and some extra streams; joining
/// (explicitly, or on drop after an error) makes the caller's stream wait
/// for all of it.
pub(super) struct Fork<'a> {
    pub(super) lanes: &'a Lanes,
    pub(super) caller: RawStream,
    pub(super) used: usize,
}

impl Fork<'_> {
    /// Lane `i` of `used + 1`: the extra streams first, the caller's last.
    pub(super) fn stream(&self, i: usize) -> RawStream {
        let i = i % (self.used + 1);
        if i < self.used {
            self.lanes.streams[i]
        } else {
            self.caller
        }
    }

    pub(super) fn join_all(&mut self) -> Result<()> {
        let mut first_err = None;
        let dev = &self.lanes.dev;
        for i in 0..self.used {
            // SAFETY: live events and streams.
            let r = unsafe {
                dev.record(self.lanes.joins[i], self.lanes.streams[i])
                    .and_then(|()| dev.wait(self.caller, self.lanes.joins[i]))
            };
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        self.used = 0;
        first_err.map_or(Ok(()), |e| Err(e.context("joining streams")))
    }

    pub(super) fn join(mut self) -> Result<()> {
        self.join_all()
    }
}

impl Drop for Fork<'_> {
    fn drop(&mut self) {
        if self.used > 0 {
            let _ = self.join_all();
        }
    }
}

/// Entries of global hash tables one batch may hold: `chunk_fraction` of
/// all of `tables` (ALG3), else `batch_bytes` of entries of `entry_bytes`;
/// never less than the largest table.
pub(super) fn table_budget(
    tables: &[u64],
    entry_bytes: u64,
    chunk_fraction: Option<f32>,
    batch_bytes: u64,
) -> u64 {
    let largest = tables.iter().copied().max().unwrap_or(0);
    match chunk_fraction {
        Some(f) => {
            let all: u64 = tables.iter().sum();
            ((all as f64 * f64::from(f)).ceil() as u64).max(largest)
        }
        None => (batch_bytes / entry_bytes.max(1)).max(largest),
    }
}

/// Bytes a [`GlobalTables`] of `rows` tables takes besides their entries:
/// the table offsets (each batch's from 0) and the alignment of the key
/// and value regions.
pub(super) fn table_overhead(rows: usize) -> u64 {
    align((2 * rows as u64 + 1) * 8) + 2 * ALIGN
}

/// The least bytes a [`GlobalTables`] of `rows` tables, the largest of
/// `largest` entries of `entry` bytes, takes: its batches shrink to that
/// table alone.
pub(super) fn least_table_bytes(rows: usize, largest: u64, entry: u64) -> u64 {
    if rows == 0 {
        return 0;
    }
    table_overhead(rows) + largest * entry
}

/// Global hash tables for a list of rows, in batches that fit the budget:
/// per batch, `count + 1` table offsets (from 0), then one key region and
/// one value region shared by the batches (which run one after another on
/// one stream).
pub(super) struct GlobalTables {
    pub(super) _buf: DeviceBuffer,
    /// Rows of the list and the device address of their table offsets.
    pub(super) batches: Vec<(Range<usize>, u64)>,
    pub(super) keys: u64,
    pub(super) vals: u64,
}

impl GlobalTables {
    /// `c_part_bytes`: bytes of C these rows are known to hold at least
    /// (what [`GpuSpgemm::global_batch_bytes`] sizes the batches from).
    pub(super) fn new(
        plan: &GpuSpgemm,
        stream: RawStream,
        tables: &[u64],
        (key_bytes, val_bytes): (u64, u64),
        c_part_bytes: u64,
    ) -> Result<Self> {
        let entry = key_bytes + val_bytes;
        let batch_bytes = plan.global_batch_bytes(c_part_bytes);
        let mut budget = table_budget(tables, entry, plan.chunk_fraction, batch_bytes);
        // Under a memory budget, batches shrink to what it leaves (down to
        // the largest table); without one, to the device's free memory
        // (less an eighth), which the allocation itself then checks.
        let largest = tables.iter().copied().max().unwrap_or(0);
        let overhead = table_overhead(tables.len());
        let room = match plan.dev.budget() {
            Some(state) => {
                let fits = state.room().saturating_sub(overhead) / entry.max(1);
                if fits < largest {
                    return Err(state.too_small(
                        state.live + least_table_bytes(tables.len(), largest, entry),
                        "the global hash tables of this product's longest rows",
                    ));
                }
                Some(fits)
            }
            None => plan
                .dev
                .free_memory()
                .map(|free| (free - free / 8).saturating_sub(overhead) / entry.max(1)),
        };
        if let Some(room) = room {
            budget = budget.min(room.max(largest));
        }
        let ranges = batches(tables, budget);
        let mut offsets: Vec<i64> = Vec::with_capacity(tables.len() + ranges.len());
        let mut starts = Vec::with_capacity(ranges.len());
        let mut widest = 0u64;
        for r in &ranges {
            starts.push(offsets.len());
            let mut acc = 0u64;
            offsets.push(0);
            for &t in &tables[r.clone()] {
                acc += t;
                offsets.push(acc as i64);
            }
            widest = widest.max(acc);
        }
        let offsets_bytes = align(offsets.len() as u64 * 8);
        let keys_bytes = align(widest * key_bytes);
        let total = offsets_bytes + keys_bytes + widest * val_bytes;
        let buf = DeviceBuffer::new(
            &plan.dev,
            stream,
            total,
            "the global hash tables of long rows",
        )?;
        plan.upload(stream, buf.ptr(), &offsets)?;
        let batches = ranges
            .into_iter()
            .zip(starts)
            .map(|(r, s)| (r, buf.ptr() + 8 * s as u64))
            .collect();
        Ok(GlobalTables {
            keys: buf.ptr() + offsets_bytes,
            vals: buf.ptr() + offsets_bytes + keys_bytes,
            batches,
            _buf: buf,
        })
    }
}
