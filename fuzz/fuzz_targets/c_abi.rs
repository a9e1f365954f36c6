//! libFuzzer target: runs the byte program of `fuzz/harness/c_abi.rs`
//! against rusparse's C ABI (see that file for what it asserts).
#![no_main]

#[path = "../harness/c_abi/mod.rs"]
#[allow(dead_code)] // the replay test reads what the fuzzer does not
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
