//! The harness's handle calls: create with any back-end number, and the
//! setters and getters on a live or NULL handle.

use super::*;

impl Harness {
    pub(super) fn create_handle(&mut self, p: &mut Bytes<'_>) {
        if !self.handle.is_null() {
            call!(self, rusparseDestroy(self.handle));
            self.handle = null_mut();
        }
        // The usual choice (byte 0) is the back end where the arrays are:
        // the CPU, or AUTO for device memory ([`run_on`]).
        let on_device = MEMORY.with(|m| m.borrow().is_some());
        let backend = if p.rare() {
            p.pick(&[2, 3, 9, -1])
        } else if on_device {
            p.pick(&[0, 1])
        } else {
            p.pick(&[1, 0])
        };
        let mut h = null_mut();
        let out: *mut rusparseHandle_t = if p.rare() { null_mut() } else { &mut h };
        if call!(self, rusparseCreateWithBackend(out, backend)) {
            self.handle = h;
        }
    }

    pub(super) fn handle_call(&mut self, p: &mut Bytes<'_>) {
        let h = if p.rare() { null_mut() } else { self.handle };
        match p.below(8) {
            0 => {
                let n = p.pick(&[1, 2, 0, 3, -1, 5000, 4, i32::MIN]);
                call!(self, rusparseSetNumThreads(h, n));
            }
            1 => {
                let mut n = -1;
                if call!(self, rusparseGetNumThreads(h, &mut n)) {
                    assert!(n >= 1, "GetNumThreads gave {n}");
                }
            }
            2 => {
                let mode = p.pick(&[0, 1, 7, -1]);
                call!(self, rusparseSetPointerMode(h, mode));
            }
            3 => {
                let mut mode = -1;
                if call!(self, rusparseGetPointerMode(h, &mut mode)) {
                    assert!(mode == 0 || mode == 1, "GetPointerMode gave {mode}");
                }
            }
            4 => {
                let mut v = -1;
                let vp: *mut i32 = if p.rare() { null_mut() } else { &mut v };
                if call!(self, rusparseGetVersion(h, vp)) {
                    assert!(v > 0, "GetVersion gave {v}");
                }
            }
            5 => {
                let mut b = -1;
                if call!(self, rusparseGetBackend(h, &mut b)) {
                    assert!((0..=3).contains(&b), "GetBackend gave {b}");
                }
            }
            6 => {
                call!(self, rusparseSetStream(h, null_mut()));
                // No input byte is read here, so recorded inputs replay as
                // before.
                call!(self, rusparseTrimScratch(h));
            }
            _ => {
                let mut s: *mut c_void = null_mut();
                call!(self, rusparseGetStream(h, &mut s));
                let (mut kept, mut limit) = (usize::MAX, 0usize);
                if call!(self, rusparseGetScratchSize(h, &mut kept, &mut limit)) {
                    assert!(
                        kept <= limit,
                        "{kept} bytes of scratch kept over a limit of {limit}"
                    );
                }
            }
        }
    }
}
