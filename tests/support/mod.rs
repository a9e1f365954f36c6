//! The test support of rusparse's integration tests and of the kernel host
//! tests (`kernels/host-tests`, whose library includes this file by
//! `#[path]` as `rusparse_kernel_host_tests::support`):
//!
//! * [`TestValue`] (`value.rs`): the value types as pairs of `f64` parts.
//! * [`Rng`] and [`random_rows`] (`random.rs`): random test matrices, row
//!   by row, with the row lengths, columns and values each test chooses;
//!   [`csr_from_rows`] makes them a `CsrMatrix`.
//! * [`proptest_config`]: the proptest configuration every property and
//!   fuzz test uses.
//! * What happens when a test needs hardware or a run-time library the
//!   machine may lack (a GPU, NVRTC, hiprtc) and it is missing
//!   ([`available`]); the CUDA tests' `gpu()` is in `gpu.rs`, which they
//!   include beside this module (this file is also compiled where there is
//!   no `cuda` feature):
//!   - With the test's `RUSPARSE_REQUIRE_*` variable set to `1` (for a GPU:
//!     `RUSPARSE_REQUIRE_GPU=1`), a missing piece fails the test with the
//!     loader's reason: a test that could not run never looks green.
//!   - Otherwise the test passes without running, and says so where a
//!     person sees it: one `SKIPPED` line on the terminal (written past the
//!     test runner's output capture), also appended to the file named by
//!     `RUSPARSE_SKIP_LOG` when it is set (`scripts/test.sh` prints those
//!     lines as a summary at the end of the suite).

#![allow(dead_code)] // each test file uses part of it

mod random;
mod value;

// Each test file uses some of these.
#[allow(unused_imports)]
pub use random::{csr_from_rows, random_rows, Order, Pick, Rng, CANONICAL, MESSY};
#[allow(unused_imports)]
pub use value::TestValue;

use std::fmt::Display;
use std::io::Write;

/// The number that follows `after` in `message` (the bytes a refusal
/// names), if any.
pub fn number_after(message: &str, after: &str) -> Option<u64> {
    let at = message.find(after)? + after.len();
    message[at..].split_whitespace().next()?.parse().ok()
}

/// The variable that turns a missing GPU into a failure.
pub const REQUIRE_GPU: &str = "RUSPARSE_REQUIRE_GPU";

/// Whether `var` is set to `1`.
pub fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v.trim() == "1")
}

/// `Some(x)` when `probe` found what the test needs. Otherwise panics
/// when `require_var` is `1`, else reports the skip (see the module docs)
/// and returns `None`. `what` names what is missing ("a CUDA GPU").
///
/// # Panics
/// When the probe failed and `require_var` is `1`.
pub fn available<T, E: Display>(probe: Result<T, E>, what: &str, require_var: &str) -> Option<T> {
    match probe {
        Ok(x) => Some(x),
        Err(e) if required(require_var) => {
            panic!("{require_var}=1 but this test found no {what}: {e}")
        }
        Err(e) => {
            skipped(&format!(
                "no {what}: {e} (set {require_var}=1 to fail instead)"
            ));
            None
        }
    }
}

/// Reports that the current test did not run, and why.
pub fn skipped(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().filter(|n| *n != "main").unwrap_or("a test");
    let exe = std::env::args()
        .next()
        .and_then(|p| {
            std::path::Path::new(&p)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    // The test binary's name ends in a hash: `cuda_backend-1a2b3c...`.
    let file = exe.rsplit_once('-').map_or(exe.as_str(), |(f, _)| f);
    let line = format!("SKIPPED tests/{file}.rs {test}: {why}\n");
    // Straight to the terminal: `eprintln!` would be captured and hidden
    // for a passing test. One write each, so that lines of tests running
    // in parallel do not interleave.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os("RUSPARSE_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The proptest configuration of rusparse's property and fuzz tests:
/// `default_cases` cases (`PROPTEST_CASES` overrides), from a fixed seed
/// (`PROPTEST_RNG_SEED` overrides `default_seed`) mixed with `name` when it
/// is not empty (an FNV-1a hash, so each property and type combination
/// draws its own cases), so every CI run replays the same cases and a red
/// run is reproducible. No persistence files: a failure prints its minimal
/// case, and the working tree stays clean.
pub fn proptest_config(
    default_cases: u32,
    default_seed: u64,
    name: &str,
) -> proptest::test_runner::Config {
    fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
        std::env::var(name).ok().and_then(|s| s.trim().parse().ok())
    }
    let seed = var("PROPTEST_RNG_SEED").unwrap_or(default_seed);
    let name_hash = if name.is_empty() {
        0
    } else {
        name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01B3)
        })
    };
    proptest::test_runner::Config {
        cases: var("PROPTEST_CASES").unwrap_or(default_cases),
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed ^ name_hash),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}
