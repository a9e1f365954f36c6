//! The harness's matrix descriptors: create, query, set pointers, change
//! values.

use super::*;

impl Harness {
    /// A size: mostly small, sometimes negative or far too large to allocate.
    fn dim(p: &mut Bytes<'_>) -> i64 {
        let b = p.byte();
        match b {
            0..=239 => (b % 10) as i64,
            240..=243 => 1000,
            244 | 245 => -1,
            246 | 247 => 1 << 40,
            248 => i64::MAX,
            249 => 1 << 31,
            250 => (1 << 31) - 1,
            _ => 17,
        }
    }

    /// Creates a descriptor in `slot` (an operand with entries, or an
    /// output with none), with arrays, types and sizes from the program.
    pub(super) fn create(&mut self, p: &mut Bytes<'_>) {
        let slot = p.below(SLOTS);
        self.destroy_mat(slot);
        let output = p.below(4) == 3;
        let constant = p.rare();
        let (rows, cols) = (Self::dim(p), Self::dim(p));
        let off_c = if p.rare() {
            p.pick(&[1, 0, 7, -1])
        } else {
            p.pick(&[2, 3])
        };
        let col_c = if p.rare() {
            p.pick(&[1, 0, 9])
        } else {
            p.pick(&[2, 3])
        };
        let base = if p.rare() {
            p.pick(&[2, -1])
        } else {
            p.pick(&[0, 1])
        };
        let ty_c = if p.rare() {
            p.pick(&[2, 14, 3, -1])
        } else {
            p.pick(&[1, 0, 4, 5])
        };
        let (off64, col64) = (off_c == 3, col_c == 3);
        let ty = Ty::from_c(ty_c).unwrap_or(Ty::F64);
        let (iw, jw) = (if off64 { 8 } else { 4 }, if col64 { 8 } else { 4 });
        let b = base.clamp(0, 1);
        // Arrays only for sizes a caller could hold; larger ones stay NULL.
        let small_rows = (0..=4096).contains(&rows);
        let mut offsets = Array::NULL;
        let (mut col_ind, mut values) = (Array::NULL, Array::NULL);
        let mut nnz = 0i64;
        if small_rows && !(output && p.below(2) == 1) {
            let n = rows as usize;
            offsets = Array {
                ptr: self.block((n + 1) * iw),
                capacity: n + 1,
            };
            let mut entries: Vec<(i64, Val)> = Vec::new();
            let mut ends = Vec::with_capacity(n);
            if !output {
                let width = cols.clamp(0, 64);
                for _ in 0..n {
                    let len = if width == 0 { 0 } else { p.below(5) };
                    for _ in 0..len {
                        let c = match p.byte() {
                            250 => width, // one past the last column
                            251 => -1,
                            x => x as i64 % width,
                        };
                        let v = p.byte();
                        let im = if ty.complex() {
                            (v / 7 % 7) as i64 - 3
                        } else {
                            0
                        };
                        entries.push((c + b, ((v % 7) as i64 - 3, im)));
                    }
                    ends.push(entries.len() as i64);
                }
            } else {
                ends.resize(n, 0);
            }
            nnz = entries.len() as i64;
            let cap = entries.len() + 1;
            col_ind = Array {
                ptr: self.block(cap * jw),
                capacity: cap,
            };
            values = Array {
                ptr: self.block(cap * ty.size()),
                capacity: cap,
            };
            // SAFETY: the arrays were just allocated for these sizes.
            unsafe {
                write_index(offsets.ptr, off64, 0, b);
                for (i, e) in ends.iter().enumerate() {
                    write_index(offsets.ptr, off64, i + 1, e + b);
                }
                for (k, &(c, v)) in entries.iter().enumerate() {
                    write_index(col_ind.ptr, col64, k, c);
                    write_value(values.ptr, ty, k, v);
                }
                // Mistakes callers make: a corrupt offset, a wrong nnz.
                if p.rare() {
                    let i = p.below(n + 1);
                    let v = p.pick(&[-1, 0, 1, 5, 1000, i64::from(i32::MAX)]);
                    write_index(offsets.ptr, off64, i, v);
                }
            }
            if p.rare() {
                nnz = p.pick(&[nnz + 1, nnz - 1, 0]).max(0);
            }
        } else if p.rare() {
            nnz = p.pick(&[-1, 5, 1 << 40]);
        }
        if output && p.below(2) == 1 {
            // C as cuSPARSE's sample makes it: arrays set after compute.
            (col_ind, values) = (Array::NULL, Array::NULL);
        }
        // NULL arrays and misaligned pointers.
        let flags = p.byte();
        if flags >= 240 {
            for (bit, a) in [&mut offsets, &mut col_ind, &mut values]
                .into_iter()
                .enumerate()
            {
                if flags & (1 << bit) != 0 {
                    *a = Array::NULL;
                } else if flags & (8 << bit) != 0 && !a.is_null() {
                    // Misaligned: one byte in (the capacity shrinks to what fits).
                    a.ptr = a.ptr.wrapping_add(1);
                    a.capacity = a.capacity.saturating_sub(1);
                }
            }
        }
        let mut d: rusparseSpMatDescr_t = null_mut();
        let out: *mut rusparseSpMatDescr_t = if p.byte() == 255 { null_mut() } else { &mut d };
        let ok = if constant {
            call!(
                self,
                rusparseCreateConstCsr(
                    out.cast(),
                    rows,
                    cols,
                    nnz,
                    offsets.ptr.cast(),
                    col_ind.ptr.cast(),
                    values.ptr.cast(),
                    off_c,
                    col_c,
                    base as i32,
                    ty_c
                )
            )
        } else {
            call!(
                self,
                rusparseCreateCsr(
                    out,
                    rows,
                    cols,
                    nnz,
                    offsets.ptr.cast(),
                    col_ind.ptr.cast(),
                    values.ptr.cast(),
                    off_c,
                    col_c,
                    base as i32,
                    ty_c
                )
            )
        };
        if ok {
            assert!(
                !out.is_null(),
                "CreateCsr succeeded with a NULL descriptor slot"
            );
            assert!(!d.is_null(), "CreateCsr succeeded without a descriptor");
            assert!(Ty::from_c(ty_c).is_some() && (0..=1).contains(&base));
            assert!(rows >= 0 && cols >= 0 && nnz >= 0);
            self.mats[slot] = Some(Mat {
                descr: d,
                constant,
                rows,
                cols,
                nnz,
                off64,
                col64,
                base,
                ty,
                offsets,
                col_ind,
                values,
            });
        }
    }

    /// Queries of a descriptor, checked against what it was created with.
    pub(super) fn query(&mut self, p: &mut Bytes<'_>) {
        let slot = p.below(SLOTS + 1);
        let d = self.descr_of(slot);
        let null_out = p.rare();
        let (mut r, mut c, mut z) = (-7i64, -7i64, -7i64);
        match p.below(4) {
            0 => {
                let rp: *mut i64 = if null_out { null_mut() } else { &mut r };
                if call!(self, rusparseSpMatGetSize(d, rp, &mut c, &mut z)) {
                    let m = self
                        .mats
                        .get(slot)
                        .and_then(Option::as_ref)
                        .expect("GetSize on NULL succeeded");
                    assert_eq!((r, c, z), (m.rows, m.cols, m.nnz), "GetSize");
                }
            }
            1 => {
                let (mut o, mut k, mut v) = (null_mut(), null_mut(), null_mut());
                let (mut it, mut jt, mut bs, mut dt) = (-1, -1, -1, -1);
                let op: *mut *mut c_void = if null_out { null_mut() } else { &mut o };
                if call!(
                    self,
                    rusparseCsrGet(
                        d, &mut r, &mut c, &mut z, op, &mut k, &mut v, &mut it, &mut jt, &mut bs,
                        &mut dt
                    )
                ) {
                    let m = self
                        .mats
                        .get(slot)
                        .and_then(Option::as_ref)
                        .expect("CsrGet on NULL succeeded");
                    assert_eq!((r, c, z), (m.rows, m.cols, m.nnz), "CsrGet sizes");
                    assert_eq!(o.cast::<u8>(), m.offsets.ptr, "CsrGet offsets");
                    assert_eq!(k.cast::<u8>(), m.col_ind.ptr, "CsrGet columns");
                    assert_eq!(v.cast::<u8>(), m.values.ptr, "CsrGet values");
                    assert_eq!((it == 3, jt == 3), (m.off64, m.col64), "CsrGet types");
                    assert_eq!((bs as i64, dt), (m.base, m.ty.c()), "CsrGet base, type");
                }
            }
            2 => {
                let mut v = null_mut();
                let vp: *mut *mut c_void = if null_out { null_mut() } else { &mut v };
                if call!(self, rusparseSpMatGetValues(d, vp)) {
                    let m = self
                        .mats
                        .get(slot)
                        .and_then(Option::as_ref)
                        .expect("GetValues on NULL succeeded");
                    assert_eq!(v.cast::<u8>(), m.values.ptr, "GetValues");
                }
            }
            _ => {
                let mut bs = -1;
                let bp: *mut i32 = if null_out { null_mut() } else { &mut bs };
                if call!(self, rusparseSpMatGetIndexBase(d, bp)) {
                    let m = self
                        .mats
                        .get(slot)
                        .and_then(Option::as_ref)
                        .expect("GetIndexBase on NULL succeeded");
                    assert_eq!(bs as i64, m.base, "GetIndexBase");
                }
            }
        }
    }

    /// New arrays for a descriptor: C's arrays at the size compute
    /// published (the usual step before copy), or new values for an
    /// operand (new values of A for the reuse path), or NULLs.
    pub(super) fn set_pointers(&mut self, p: &mut Bytes<'_>) {
        let slot = p.below(SLOTS);
        let mode = p.below(4);
        let Some(m) = self.mats[slot].as_ref() else {
            call!(
                self,
                rusparseCsrSetPointers(null_mut(), null_mut(), null_mut(), null_mut())
            );
            return;
        };
        let (descr, rows, nnz, ty) = (m.descr, m.rows, m.nnz, m.ty);
        let (iw, jw) = (if m.off64 { 8 } else { 4 }, if m.col64 { 8 } else { 4 });
        if rows > 4096 || nnz > 1 << 20 {
            return;
        }
        let (rows, nnz) = (rows as usize, nnz as usize);
        match mode {
            // C's three arrays, values filled for β.
            0 | 1 => {
                let o = Array {
                    ptr: self.block((rows + 1) * iw),
                    capacity: rows + 1,
                };
                let k = Array {
                    ptr: self.block(nnz * jw),
                    capacity: nnz,
                };
                let v = Array {
                    ptr: self.block(nnz * ty.size()),
                    capacity: nnz,
                };
                let fill = p.byte() as usize;
                for i in 0..nnz {
                    let x = ((fill + 3 * i) % 5) as i64 - 2;
                    // SAFETY: allocated above for nnz values.
                    unsafe { write_value(v.ptr, ty, i, (x, 0)) };
                }
                let null_values = mode == 1 && p.rare();
                let vp = if null_values { null_mut() } else { v.ptr };
                if call!(
                    self,
                    rusparseCsrSetPointers(descr, o.ptr.cast(), k.ptr.cast(), vp.cast())
                ) {
                    let m = self.mats[slot].as_mut().expect("live");
                    m.offsets = o;
                    m.col_ind = k;
                    m.values = if null_values { Array::NULL } else { v };
                }
            }
            // New values of an operand.
            2 => {
                let v = Array {
                    ptr: self.block(nnz * ty.size()),
                    capacity: nnz,
                };
                let fill = p.byte();
                for i in 0..nnz {
                    // SAFETY: allocated above for nnz values.
                    unsafe { write_value(v.ptr, ty, i, small_value(fill, i, ty)) };
                }
                if call!(self, rusparseSpMatSetValues(descr, v.ptr.cast())) {
                    self.mats[slot].as_mut().expect("live").values = v;
                }
            }
            // NULL values: a structure-only matrix (cuSPARSE takes it too);
            // the phases that read values must then refuse.
            _ => {
                if call!(self, rusparseSpMatSetValues(descr, null_mut())) {
                    self.mats[slot].as_mut().expect("live").values = Array::NULL;
                }
            }
        }
    }

    /// Changes an operand's values in place between phases.
    pub(super) fn revalue(&mut self, p: &mut Bytes<'_>) {
        let slot = p.below(SLOTS);
        let Some(m) = self.mats[slot].as_ref() else {
            return;
        };
        if m.values.is_null() || m.constant {
            return;
        }
        let n = m.values.capacity.min(m.nnz.max(0) as usize);
        let (ptr, ty) = (m.values.ptr, m.ty);
        let fill = p.byte();
        for i in 0..n {
            // SAFETY: within the array's capacity.
            unsafe { write_value(ptr, ty, i, small_value(fill, i, ty)) };
        }
    }
}
