//! The C ABI fuzz harness (`fuzz/harness/c_abi/`) without libFuzzer:
//! the shipped corpus and every regression input replayed, the seed
//! programs checked to reach and verify real products, and random and
//! mutated programs under proptest. `cargo fuzz run c_abi` runs the same
//! harness coverage-guided (fuzz/README.md).

#[path = "../fuzz/harness/c_abi/mod.rs"]
mod harness;
mod support;

use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn inputs(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "README.md"))
        .collect();
    files.sort();
    files
}

#[test]
fn seed_programs_run_and_check_products() {
    for (k, program) in harness::seed_programs().iter().enumerate() {
        let stats = harness::run(program);
        // A compute flow checks nnz(C) and C; a reuse flow nnz(C), C's
        // structure and C's values twice.
        assert!(stats.sizes_checked >= 1, "seed {k}: {stats:?}");
        assert!(stats.products_checked >= 1, "seed {k}: {stats:?}");
        assert_eq!(
            stats.successes, stats.calls,
            "seed {k} hit an error: {stats:?}"
        );
    }
}

/// `fuzz/corpus/c_abi/seed-*` are the seed programs (regenerate them with
/// RUSPARSE_WRITE_FUZZ_SEEDS=1 after changing the harness's encoding).
#[test]
fn shipped_seed_files_are_the_seed_programs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/c_abi");
    for (k, program) in harness::seed_programs().iter().enumerate() {
        let path = dir.join(format!("seed-{k:02}"));
        if std::env::var_os("RUSPARSE_WRITE_FUZZ_SEEDS").is_some() {
            std::fs::write(&path, program).expect("write seed");
        }
        let shipped = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            &shipped,
            program,
            "{} differs from seed program {k}",
            path.display()
        );
    }
}

#[test]
fn corpus_replays_cleanly() {
    let files = inputs("fuzz/corpus/c_abi");
    assert!(files.len() >= harness::seed_programs().len());
    let mut total = harness::Stats::default();
    for f in &files {
        let data = std::fs::read(f).expect("read corpus input");
        total += harness::run(&data);
    }
    assert!(total.products_checked > 0, "{total:?}");
    println!("{} corpus inputs: {total:?}", files.len());
}

/// Every input that once made the fuzzer fail, kept as a regression test.
#[test]
fn regressions_replay_cleanly() {
    for f in inputs("fuzz/regressions/c_abi") {
        let data = std::fs::read(&f).expect("read regression input");
        let result = std::panic::catch_unwind(|| harness::run(&data));
        assert!(result.is_ok(), "{} fails again", f.display());
    }
}

/// A seed program with some bytes replaced, inserted or removed.
fn mutated_seed() -> impl Strategy<Value = Vec<u8>> {
    let edits = prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6);
    (0..harness::seed_programs().len(), edits)
        .prop_map(|(k, edits)| harness::mutated_seed(k, &edits))
}

/// 1,500 cases from a fixed seed, so every CI run replays the same
/// programs (a red run is reproducible); set `PROPTEST_RNG_SEED` to explore
/// others (`PROPTEST_CASES` to run more). Open-ended exploration is `cargo fuzz run c_abi` (fuzz/README.md).
fn config() -> ProptestConfig {
    support::proptest_config(1500, 0xC0FF_EE00_2026, "")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_programs(data in prop::collection::vec(any::<u8>(), 0..400)) {
        harness::run(&data);
    }

    #[test]
    fn mutated_seed_programs(data in mutated_seed()) {
        harness::run(&data);
    }
}
