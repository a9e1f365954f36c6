//! The harness's SpGEMM phases: arguments decoded from the program, the
//! buffer protocol, the expected result from the integer reference, and the
//! checks of C; the SpGEMM descriptor's calls.

use super::*;

/// A phase's arguments, decoded from the program.
#[derive(Clone, Copy, Debug)]
pub(super) struct Phase {
    null_handle: bool,
    op_a: i32,
    op_b: i32,
    alpha: Option<Val>,
    beta: Option<Val>,
    a: usize,
    b: usize,
    c: usize,
    compute_type: Option<i32>,
    alg: i32,
    null_descr: bool,
    /// 0: size query then the call with that size; 1: size query only;
    /// 2: a buffer one byte smaller than asked; 3: NULL size pointer.
    buffer_mode: u8,
}

/// Which phase to call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PhaseCall {
    WorkEstimation,
    Compute,
    Copy,
    ReuseWorkEstimation,
    ReuseNnz,
    ReuseCopy,
    ReuseCompute,
    PredictNnz,
    EstimateMemory,
}

impl Harness {
    fn phase_args(&self, p: &mut Bytes<'_>) -> Phase {
        let scalar = |p: &mut Bytes<'_>, usual: Val| -> Option<Val> {
            match p.below(8) {
                0..=2 => Some(usual),
                3 => Some((2, 0)),
                4 => Some((-1, 0)),
                5 => Some((0, 0)),
                6 => Some((1, 1)),
                _ => p.rare().then_some((3, -2)),
            }
        };
        let null_handle = p.rare();
        let op_a = if p.rare() {
            p.pick(&[3, -1])
        } else {
            p.pick(&[0, 1, 2])
        };
        let op_b = if p.rare() {
            p.pick(&[3, -1])
        } else {
            p.pick(&[0, 1, 2])
        };
        let alpha = scalar(p, (1, 0));
        let beta = scalar(p, (0, 0));
        let x = p.byte() as usize;
        let (a, b, c) = (x % 5, (x / 5 + 1) % 5, (x / 25 + 2) % 5);
        let compute_type = if p.rare() {
            Some(p.pick(&[0, 1, 4, 5, 2, 9]))
        } else {
            None
        };
        // On device memory ([`run_on`]) the usual choices are the GPU's
        // algorithms; the CPU's (100..=103, NOT_SUPPORTED there) stay among
        // the rare ones.
        let on_device = MEMORY.with(|m| m.borrow().is_some());
        let alg = if p.rare() {
            if on_device {
                p.pick(&[6, 99, -1, 104, 200, 100, 103])
            } else {
                p.pick(&[6, 99, -1, 104, 200])
            }
        } else if on_device {
            p.pick(&[0, 1, 2, 3, 4, 5, 0, 1, 4, 5])
        } else {
            p.pick(&[0, 1, 2, 3, 4, 5, 100, 101, 102, 103])
        };
        let null_descr = p.rare();
        let buffer_mode = if p.rare() { 1 + p.below(3) as u8 } else { 0 };
        Phase {
            null_handle,
            op_a,
            op_b,
            alpha,
            beta,
            a,
            b,
            c,
            compute_type,
            alg,
            null_descr,
            buffer_mode,
        }
    }

    /// Whether the library may touch the arrays of the descriptors this
    /// phase names (the contract the harness keeps; a NULL descriptor is fine).
    fn arrays_ok(&self, x: &Phase) -> bool {
        [x.a, x.b, x.c]
            .iter()
            .all(|&s| match self.mats.get(s).and_then(|m| m.as_ref()) {
                Some(m) => m.arrays_hold_sizes(),
                None => true,
            })
    }

    /// The expected product of a phase's A and B when both are valid and
    /// the call is one rusparse must accept; None otherwise.
    fn expected(&self, which: PhaseCall, x: &Phase) -> Option<(Vec<BTreeMap<usize, Val>>, Ty)> {
        use PhaseCall::*;
        if x.null_handle || self.handle.is_null() || x.null_descr || self.descr.is_null() {
            return None;
        }
        if ![0, 1, 2, 3, 4, 5, 100, 101, 102, 103].contains(&x.alg) {
            return None;
        }
        let (a, b, c) = (
            self.mats.get(x.a)?.as_ref()?,
            self.mats.get(x.b)?.as_ref()?,
            self.mats.get(x.c)?.as_ref()?,
        );
        if x.a == x.c || x.b == x.c || c.constant {
            return None;
        }
        if !(0..=2).contains(&x.op_a) || !(0..=2).contains(&x.op_b) {
            return None;
        }
        if a.ty != b.ty || a.ty != c.ty || (a.off64, a.col64) != (b.off64, b.col64) {
            return None;
        }
        if c.col64 != a.col64 {
            return None;
        }
        // Phases that take computeType, alpha and beta.
        if matches!(
            which,
            WorkEstimation | Compute | Copy | ReuseCompute | EstimateMemory
        ) && (x.compute_type.is_some_and(|t| t != a.ty.c())
            || x.alpha.is_none()
            || x.beta.is_none())
        {
            return None;
        }
        let values = matches!(which, Copy | ReuseCompute);
        let ra = a.rows_if_valid(values)?;
        let rb = b.rows_if_valid(values)?;
        let complex = a.ty.complex();
        let oa = op_rows(&ra, a.cols as usize, x.op_a, complex);
        let ob = op_rows(&rb, b.cols as usize, x.op_b, complex);
        let inner_b = if x.op_b == 0 { b.rows } else { b.cols };
        let cols_b = if x.op_b == 0 { b.cols } else { b.rows };
        if ob.len() as i64 != inner_b || inner_b != if x.op_a == 0 { a.cols } else { a.rows } {
            return None;
        }
        if (c.rows, c.cols) != (oa.len() as i64, cols_b) {
            return None;
        }
        Some((product(&oa, &ob), a.ty))
    }

    /// Whether the library had to refuse this phase for its inputs: A or
    /// B breaks the CSR rules (the harness's own check).
    fn invalid_operand(&self, which: PhaseCall, x: &Phase) -> bool {
        let values = matches!(which, PhaseCall::Copy | PhaseCall::ReuseCompute);
        [x.a, x.b].iter().any(|&s| {
            self.mats
                .get(s)
                .and_then(|m| m.as_ref())
                .is_some_and(|m| m.rows_if_valid(values).is_none())
        })
    }

    /// Runs a buffer-taking phase per the buffer mode: a NULL buffer asks
    /// for the size, then a buffer of that size (or one byte less) runs it.
    /// Returns whether the working call (not the size query) succeeded.
    fn with_buffer(
        &mut self,
        mode: u8,
        what: &str,
        f: &dyn Fn(*mut usize, *mut c_void) -> i32,
    ) -> bool {
        let mut size = 0usize;
        if mode == 3 {
            let b = self.block(64);
            let s = f(null_mut(), b.cast());
            self.status(s, what);
            return false;
        }
        let s = f(&mut size, null_mut());
        if !self.status(s, what) || mode == 1 {
            return false;
        }
        if size > 1 << 30 {
            // Not a size a caller could give; the library asked for it.
            panic!("{what}: a buffer of {size} bytes asked for a small product");
        }
        let mut given = size;
        if mode == 2 {
            given = size.saturating_sub(1);
        }
        let b = self.block(given);
        let s = f(&mut given, b.cast());
        let ok = self.status(s, what);
        assert!(
            !(ok && mode == 2 && size > 0),
            "{what} succeeded with a buffer smaller than it asked for"
        );
        ok
    }

    pub(super) fn phase(&mut self, which: PhaseCall, p: &mut Bytes<'_>) {
        let x = self.phase_args(p);
        if !self.arrays_ok(&x) {
            return;
        }
        let h = if x.null_handle {
            null_mut()
        } else {
            self.handle
        };
        let d = if x.null_descr { null_mut() } else { self.descr };
        let (ma, mb, mc) = (self.descr_of(x.a), self.descr_of(x.b), self.descr_of(x.c));
        // The compute type: the operands' own unless the program says otherwise.
        let ty = self
            .mats
            .get(x.a)
            .and_then(|m| m.as_ref())
            .map_or(Ty::F64, |m| m.ty);
        let ct = x.compute_type.unwrap_or(ty.c());
        let scalar_block = |h: &mut Harness, v: Option<Val>| -> *const c_void {
            match v {
                None => null(),
                Some(v) => {
                    let b = h.block(16);
                    // SAFETY: 16 bytes hold one value of any type.
                    unsafe { write_value(b, ty, 0, v) };
                    b.cast_const().cast()
                }
            }
        };
        let (pa, pb) = (scalar_block(self, x.alpha), scalar_block(self, x.beta));
        let (oa, ob, alg) = (x.op_a, x.op_b, x.alg);
        // C's values before a numeric phase, for β·C_old.
        self.scratch = self.c_values(x.c);
        let ok = match which {
            PhaseCall::WorkEstimation => {
                self.with_buffer(x.buffer_mode, "workEstimation", &|s, b| {
                    // SAFETY: see `call!`.
                    unsafe {
                        rusparseSpGEMM_workEstimation(
                            h, oa, ob, pa, ma, mb, pb, mc, ct, alg, d, s, b,
                        ) as i32
                    }
                })
            }
            PhaseCall::Compute => self.with_buffer(x.buffer_mode, "compute", &|s, b| {
                // SAFETY: see `call!`.
                unsafe {
                    rusparseSpGEMM_compute(h, oa, ob, pa, ma, mb, pb, mc, ct, alg, d, s, b) as i32
                }
            }),
            PhaseCall::Copy => {
                call!(
                    self,
                    rusparseSpGEMM_copy(h, oa, ob, pa, ma, mb, pb, mc, ct, alg, d)
                )
            }
            PhaseCall::ReuseWorkEstimation => {
                self.with_buffer(x.buffer_mode, "reuse_workEstimation", &|s, b| {
                    // SAFETY: see `call!`.
                    unsafe {
                        rusparseSpGEMMreuse_workEstimation(h, oa, ob, ma, mb, mc, alg, d, s, b)
                            as i32
                    }
                })
            }
            PhaseCall::ReuseNnz => {
                let mode = x.buffer_mode;
                let (mut s2, mut s3, mut s4) = (0usize, 0usize, 0usize);
                let q = call!(
                    self,
                    rusparseSpGEMMreuse_nnz(
                        h,
                        oa,
                        ob,
                        ma,
                        mb,
                        mc,
                        alg,
                        d,
                        &mut s2,
                        null_mut(),
                        &mut s3,
                        null_mut(),
                        &mut s4,
                        null_mut()
                    )
                );
                if !q || mode == 1 || s2.max(s3).max(s4) > 1 << 30 {
                    false
                } else {
                    let shrink = usize::from(mode == 2);
                    let (mut g2, mut g3, mut g4) = (s2.saturating_sub(shrink), s3, s4);
                    let (b2, b3, b4) = (self.block(g2), self.block(g3), self.block(g4));
                    let ok = call!(
                        self,
                        rusparseSpGEMMreuse_nnz(
                            h,
                            oa,
                            ob,
                            ma,
                            mb,
                            mc,
                            alg,
                            d,
                            &mut g2,
                            b2.cast(),
                            &mut g3,
                            b3.cast(),
                            &mut g4,
                            b4.cast()
                        )
                    );
                    assert!(
                        !(ok && mode == 2 && s2 > 0),
                        "reuse_nnz took a small buffer2"
                    );
                    ok
                }
            }
            PhaseCall::ReuseCopy => self.with_buffer(x.buffer_mode, "reuse_copy", &|s, b| {
                // SAFETY: see `call!`.
                unsafe { rusparseSpGEMMreuse_copy(h, oa, ob, ma, mb, mc, alg, d, s, b) as i32 }
            }),
            PhaseCall::ReuseCompute => {
                call!(
                    self,
                    rusparseSpGEMMreuse_compute(h, oa, ob, pa, ma, mb, pb, mc, ct, alg, d)
                )
            }
            PhaseCall::PredictNnz => {
                let mut nnz = -1i64;
                let ok = call!(self, rusparseSpGEMM_predictNnz(h, oa, ob, ma, mb, &mut nnz));
                if ok {
                    assert!(nnz >= 0, "predictNnz gave {nnz}");
                }
                // A prediction reads a sample, not every entry: no check of
                // validity or of the value here.
                return;
            }
            PhaseCall::EstimateMemory => {
                let frac = p.pick(&[0.2f32, 1.0, 0.0, -1.0, f32::NAN, 2.0]);
                let (mut s3, mut s2) = (0usize, 0usize);
                let mut estimate = |s3: &mut usize, s2: &mut usize, buffer: *mut u8| {
                    // SAFETY: see `call!`.
                    let s = unsafe {
                        rusparseSpGEMM_estimateMemory(
                            h,
                            oa,
                            ob,
                            pa,
                            ma,
                            mb,
                            pb,
                            mc,
                            ct,
                            alg,
                            d,
                            frac,
                            s3,
                            buffer.cast(),
                            s2,
                        )
                    };
                    self.status(s as i32, "estimateMemory")
                };
                if estimate(&mut s3, &mut s2, null_mut()) && s3 <= 1 << 20 {
                    let b3 = Block::new(s3);
                    estimate(&mut s3, &mut s2, b3.ptr);
                    self.blocks.push(b3);
                }
                return;
            }
        };
        if !ok {
            return;
        }
        // A phase that reads A and B succeeded: they must be valid, and C
        // must be what the reference says.
        assert!(
            !self.invalid_operand(which, &x),
            "{which:?} succeeded on an invalid A or B: {x:?}"
        );
        let expected = self.expected(which, &x);
        let Some((pattern, ty)) = expected else {
            panic!("{which:?} succeeded on arguments rusparse must refuse: {x:?}");
        };
        match which {
            PhaseCall::Compute | PhaseCall::ReuseNnz => {
                let nnz: usize = pattern.iter().map(|r| r.len()).sum();
                let m = self.mats[x.c].as_mut().expect("C is live");
                let mut z = -1;
                let (mut r, mut c) = (-1, -1);
                // SAFETY: a live descriptor and writable slots.
                let s = unsafe { rusparseSpMatGetSize(m.descr, &mut r, &mut c, &mut z) };
                assert_eq!(s as i32, STATUS_SUCCESS);
                assert_eq!(z as usize, nnz, "{which:?}: nnz(C)");
                m.nnz = z;
                self.stats.sizes_checked += 1;
            }
            PhaseCall::Copy | PhaseCall::ReuseCopy | PhaseCall::ReuseCompute => {
                let values = which != PhaseCall::ReuseCopy;
                // reuse_copy takes no alpha or beta: it writes the structure only.
                let scalars = values.then(|| (x.alpha.expect("alpha"), x.beta.expect("beta")));
                self.check_c(x.c, &pattern, ty, scalars);
                self.stats.products_checked += 1;
            }
            _ => {}
        }
    }

    /// C's current values (empty when it has none).
    fn c_values(&self, slot: usize) -> Vec<Val> {
        let Some(m) = self.mats.get(slot).and_then(|m| m.as_ref()) else {
            return Vec::new();
        };
        if m.values.is_null() || m.nnz <= 0 || m.values.capacity < m.nnz as usize {
            return Vec::new();
        }
        // SAFETY: within the array's capacity.
        (0..m.nnz as usize)
            .map(|i| unsafe { read_value(m.values.ptr, m.ty, i) }.unwrap_or((0, 0)))
            .collect()
    }

    /// Compares C's arrays with the reference pattern (and with
    /// α·product + β·C_old when `scalars` is given).
    fn check_c(
        &self,
        slot: usize,
        pattern: &[BTreeMap<usize, Val>],
        ty: Ty,
        scalars: Option<(Val, Val)>,
    ) {
        let m = self.mats[slot].as_ref().expect("C is live");
        let nnz: usize = pattern.iter().map(|r| r.len()).sum();
        assert_eq!(m.nnz as usize, nnz, "nnz(C) in the descriptor");
        assert!(m.offsets.capacity > pattern.len() && m.col_ind.holds(nnz as i64));
        let mut k = 0usize;
        // SAFETY: the arrays hold rows + 1 offsets and nnz entries.
        unsafe {
            for (i, row) in pattern.iter().enumerate() {
                assert_eq!(
                    read_index(m.offsets.ptr, m.off64, i) - m.base,
                    k as i64,
                    "C offset {i}"
                );
                for (&j, &v) in row {
                    let col = read_index(m.col_ind.ptr, m.col64, k) - m.base;
                    assert_eq!(col, j as i64, "C row {i}, entry {k}: column");
                    if let Some((alpha, beta)) = scalars {
                        let old = self.scratch.get(k).copied().unwrap_or((0, 0));
                        let want = add(mul(alpha, v), mul(beta, old));
                        let want = if ty.complex() { want } else { (want.0, 0) };
                        let got = read_value(m.values.ptr, ty, k);
                        assert_eq!(got, Some(want), "C row {i}, column {j}: value");
                    }
                    k += 1;
                }
            }
            assert_eq!(
                read_index(m.offsets.ptr, m.off64, pattern.len()) - m.base,
                k as i64
            );
        }
    }

    pub(super) fn spgemm_descr(&mut self, p: &mut Bytes<'_>) {
        match p.below(3) {
            0 | 1 => {
                if !self.descr.is_null() {
                    call!(self, rusparseSpGEMM_destroyDescr(self.descr));
                    self.descr = null_mut();
                }
                let mut d = null_mut();
                let out: *mut rusparseSpGEMMDescr_t = if p.rare() { null_mut() } else { &mut d };
                if call!(self, rusparseSpGEMM_createDescr(out)) {
                    self.descr = d;
                }
            }
            _ => {
                call!(self, rusparseSpGEMM_destroyDescr(self.descr));
                self.descr = null_mut();
            }
        }
    }

    pub(super) fn descr_query(&mut self, p: &mut Bytes<'_>) {
        let d = if p.rare() { null_mut() } else { self.descr };
        match p.below(3) {
            0 => {
                let mut n = -1i64;
                if call!(self, rusparseSpGEMM_getNumProducts(d, &mut n)) {
                    assert!(n >= 0, "getNumProducts gave {n}");
                }
            }
            1 => {
                let (mut b, mut a, mut n, mut z) = (-1, -1, -1i64, -9i64);
                if call!(
                    self,
                    rusparseSpGEMM_getPlanInfo(d, &mut b, &mut a, &mut n, &mut z)
                ) {
                    assert!((1..=3).contains(&b) && n >= 0 && z >= -1, "getPlanInfo");
                }
            }
            _ => {
                let which = p.pick(&[0, 1, 2, -1]);
                let cap = p.pick(&[8, 0, 1, -1]);
                let mut counts = [0i64; 8];
                let mut n = -1;
                if call!(
                    self,
                    rusparseSpGEMM_getBinCounts(d, which, counts.as_mut_ptr(), cap, &mut n)
                ) {
                    assert!(n >= 0, "getBinCounts gave {n} bins");
                }
            }
        }
    }
}
