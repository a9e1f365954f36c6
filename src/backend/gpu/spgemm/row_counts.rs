//! Per-row counts a plan can report before its symbolic phase: the products
//! of every row, the rows' shapes, and the exact nnz of chosen rows (what
//! the output-size prediction on the GPU reads, `super::super::predict`).

use super::*;

impl GpuSpgemm {
    /// The products of every row of op(A) · op(B) (`m` values), as work
    /// estimation counted them. Waits for `stream`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] after the symbolic phase (which replaced
    /// them by the rows' nnz) or [`GpuSpgemm::count_rows`]; device errors.
    pub fn row_products(&self, stream: RawStream) -> Result<Vec<u64>> {
        if self.symbolic.is_some() || self.symbolic_failed.is_some() {
            return Err(Error::InvalidValue(
                "the products per row are gone once the symbolic phase ran".into(),
            ));
        }
        self.dev.bind()?;
        let row_size = self.meta.ptr() + self.layout.row_size;
        let v: Vec<i64> = self.read(stream, row_size, self.m as usize)?;
        Ok(v.into_iter().map(|x| x.max(0) as u64).collect())
    }

    /// Each row's shape for the output-size prediction: the entries of its
    /// row of op(A) and the length of the longest row of op(B) it merges,
    /// packed one word a row as [`crate::plan::row_work::PackedRowShapes`]
    /// reads them (`rs_row_shapes`, one pass over op(A) reading op(B)'s
    /// offsets, into a temporary buffer of 8 bytes a row). Waits for
    /// `stream`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for operands other than the work
    /// estimation's; [`Error::InsufficientResources`] when device memory
    /// runs out; device errors.
    pub fn row_shapes(&self, stream: RawStream, a: &DeviceCsr, b: &DeviceCsr) -> Result<Vec<u64>> {
        let (a, b) = &self.used_entries(a, b, "row shapes", false)?;
        let m = self.m as u64;
        if m == 0 {
            return Ok(Vec::new());
        }
        self.dev.bind()?;
        self.run_row_shapes(stream, a, b)
    }

    pub(super) fn run_row_shapes(
        &self,
        stream: RawStream,
        a: &DeviceCsr,
        b: &DeviceCsr,
    ) -> Result<Vec<u64>> {
        let m = self.m as u64;
        let (a, b) = self.operands(a, b);
        let (ka, kb) = (KernelCsr::from(&a), KernelCsr::from(&b));
        let shapes = DeviceBuffer::new(&self.dev, stream, m * 8, "the row shapes")?;
        let out = shapes.ptr();
        // SAFETY: see `estimate`; `shapes` holds m words.
        unsafe {
            self.launch(
                "rs_row_shapes",
                self.grid(m, SETUP_BLOCK),
                SETUP_BLOCK,
                0,
                stream,
                &args![ka, kb, out],
            )?;
        }
        self.read(stream, out, m as usize)
    }

    /// The exact nnz of each listed row of C (`rows`: rows with products,
    /// increasing), computed on the device by the symbolic kernels: one
    /// shared-memory launch in the smallest bin that holds the longest
    /// listed row, spills to global tables. For a prediction (the
    /// output-size sample): it overwrites those rows' counts, so the plan
    /// cannot run its symbolic phase afterwards. Waits for `stream`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a row outside op(A) or after the
    /// symbolic phase; [`Error::InsufficientResources`] when device memory
    /// runs out; device errors.
    pub fn count_rows(
        &mut self,
        stream: RawStream,
        a: &DeviceCsr,
        b: &DeviceCsr,
        rows: &[usize],
    ) -> Result<Vec<u64>> {
        if self.symbolic.is_some() || self.symbolic_failed.is_some() {
            return Err(Error::InvalidValue(
                "rows can be counted only before the symbolic phase".into(),
            ));
        }
        let (a, b) = &self.used_entries(a, b, "counting rows", false)?;
        let list: Vec<u32> = rows
            .iter()
            .map(|&r| {
                u32::try_from(r)
                    .ok()
                    .filter(|&r| i64::from(r) < self.m)
                    .ok_or_else(|| Error::InvalidValue(format!("row {r} is not a row of C")))
            })
            .collect::<Result<_>>()?;
        if list.is_empty() {
            return Ok(Vec::new());
        }
        self.dev.bind()?;
        // From here the listed rows' products become their nnz.
        self.symbolic_failed = Some(Error::InvalidValue(
            "this plan counted rows for a prediction and cannot run the symbolic phase".into(),
        ));
        let r = self.run_count_rows(stream, a, b, &list);
        let done = self.lanes.record_done(stream);
        let nnz = r?;
        done?;
        Ok(nnz)
    }

    pub(super) fn run_count_rows(
        &self,
        stream: RawStream,
        a: &DeviceCsr,
        b: &DeviceCsr,
        list: &[u32],
    ) -> Result<Vec<u64>> {
        let (a, b) = self.operands(a, b);
        let (ka, kb) = (KernelCsr::from(&a), KernelCsr::from(&b));
        let h = self.meta.ptr();
        let row_size = h + self.layout.row_size;
        let m = self.m as u64;
        let longest = self
            .gather(stream, row_size, m + 1, list, false)?
            .into_iter()
            .max()
            .unwrap_or(0);
        let sym = &self.bins.symbolic;
        let last = sym.len() - 1;
        let bounds = gpu_bins::bin_bounds(sym);
        let j = bounds.iter().position(|&bd| bd >= longest).unwrap_or(last);
        let n = list.len() as u64;
        let rows_buf = DeviceBuffer::new(&self.dev, stream, n * 4, "the sampled rows")?;
        self.upload(stream, rows_buf.ptr(), list)?;
        let spill_cap = if j == last { n } else { 0 };
        let spill = DeviceBuffer::new(&self.dev, stream, spill_cap * 4, "the spilled rows")?;
        self.memset(stream, h + 8 * H_SPILL as u64, 0, 8)?;
        // SAFETY: see `estimate`; the list holds `n` rows of C, and the
        // spill buffer room for them when `j` is the last bin.
        unsafe {
            self.launch_symbolic_bin(stream, j, (rows_buf.ptr(), n as i64), (ka, kb), &spill)
        }?;
        if spill_cap > 0 {
            self.symbolic_spilled(stream, &spill, ka, kb)?;
        }
        let nnz = self.gather(stream, row_size, m + 1, list, false)?;
        Ok(nnz.into_iter().map(|x| x.max(0) as u64).collect())
    }
}
