//! The C ABI fuzz harness (`fuzz/harness/c_abi/`) on the emulated GPU:
//! every array a program hands to the library lies in the emulated
//! device's memory, which is registered for AUTO placement, so the AUTO
//! handles of the programs run the GPU path (`src/product/gpu.rs`, the
//! pipeline and the host-emulated kernels) on arbitrary sizes, offsets,
//! indices, types, NULLs and call orders, with the harness's checks: no
//! crash, a valid status with a message, no success on a malformed
//! operand, and nnz(C) and C equal to its own integer reference. (CPU
//! handles refuse the device arrays, a checked error.)
//!
//! The emulator runs a kernel launch in milliseconds to a second, so this
//! replays the seed programs and a fixed set of mutated and random
//! programs, far fewer than `tests/fuzz_c_abi.rs` on the CPU.

#[path = "../../../fuzz/harness/c_abi/mod.rs"]
#[allow(dead_code)]
mod harness;

use harness::HostVisibleMemory;
use proptest::prelude::*;
use rusparse::backend::gpu::{register_device, unregister_device, GpuDevice};
use rusparse::plan::gpu_bins::DeviceLimits;
use rusparse::BackendKind;
use rusparse_kernel_host_tests::device::EmulatedDevice;
use rusparse_kernel_host_tests::support;
use std::rc::Rc;
use std::sync::Arc;

thread_local! {
    /// One emulated H100 per test thread (tests run in parallel, and each
    /// checks that its programs leave no device memory), registered for
    /// AUTO placement until the thread ends.
    static DEVICE: Registered = Registered::new();
}

struct Registered(Arc<EmulatedDevice>);

impl Registered {
    fn new() -> Registered {
        let d = EmulatedDevice::new("H100", DeviceLimits::H100, BackendKind::Cuda);
        register_device(d.clone());
        Registered(d)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let d: Arc<dyn GpuDevice> = self.0.clone();
        unregister_device(&d);
    }
}

fn device() -> Arc<EmulatedDevice> {
    DEVICE.with(|d| d.0.clone())
}

/// The emulated device's memory, as the harness takes it.
struct Emulated(Arc<EmulatedDevice>);

impl HostVisibleMemory for Emulated {
    fn alloc_zeroed(&self, bytes: usize) -> *mut u8 {
        let p = self.0.alloc(bytes, None).expect("emulated allocation") as *mut u8;
        // SAFETY: the emulated device's memory is host memory of `bytes`.
        unsafe { p.write_bytes(0, bytes) };
        p
    }
    unsafe fn free(&self, ptr: *mut u8) {
        // SAFETY: allocated by `alloc_zeroed`, freed once.
        unsafe { self.0.free(ptr as u64, None) }
    }
}

fn run(data: &[u8]) -> harness::Stats {
    let dev = device();
    let before = dev.live_allocations().len();
    let stats = harness::run_on(Rc::new(Emulated(dev.clone())), data);
    // Every array of the program and everything the library allocated on
    // the device is gone with the program's objects.
    assert_eq!(dev.live_allocations().len(), before, "device memory left");
    stats
}

/// The seed programs run their flows on the device: the products the
/// harness checks are the GPU's (the seeds create AUTO handles).
#[test]
fn seed_programs_run_on_the_device() {
    let mut total = harness::Stats::default();
    for program in harness::seed_programs() {
        total += run(&program);
    }
    // 12 today: the seeds of types the emulated H100 has kernels for and
    // of GPU algorithms (the others get NOT_SUPPORTED with a message).
    assert!(total.products_checked >= 10, "{total:?}");
    println!("seed programs on the emulated GPU: {total:?}");
}

/// The inputs that once made the CPU fuzzer fail.
#[test]
fn regressions_replay_cleanly_on_the_device() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/c_abi");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("the regression inputs") {
        let path = entry.expect("directory entry").path();
        if path.is_file() && path.file_name().is_some_and(|f| f != "README.md") {
            run(&std::fs::read(&path).expect("read regression input"));
            n += 1;
        }
    }
    assert!(n > 0);
}

/// A seed program with some bytes replaced, inserted or removed.
fn mutated_seed() -> impl Strategy<Value = Vec<u8>> {
    let edits = prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6);
    (0..harness::seed_programs().len(), edits)
        .prop_map(|(k, edits)| harness::mutated_seed(k, &edits))
}

/// A fixed seed, so that every CI run replays the same programs; set
/// `PROPTEST_RNG_SEED` (and `PROPTEST_CASES`) to explore others.
fn config() -> ProptestConfig {
    support::proptest_config(60, 0x060D_2026, "")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_seed_programs_on_the_device(data in mutated_seed()) {
        run(&data);
    }

    #[test]
    fn random_programs_on_the_device(data in prop::collection::vec(any::<u8>(), 0..400)) {
        run(&data);
    }
}
