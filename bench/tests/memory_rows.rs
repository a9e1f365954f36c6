//! The benchmark's memory columns, measured in a process of their own.
//!
//! The counting allocator behind "peak extra" is process-wide: in the unit
//! tests' binary the other tests allocate and free in parallel, so a peak
//! measured there can be anyone's. Here each measurement runs the
//! `rusparse-bench` binary itself, alone in its process, so the figures it
//! reports are the product's own and the bounds below are exact checks.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// Runs `rusparse-bench ARGS --json FILE` and returns the report's rows.
fn rows(name: &str, args: &[&str]) -> Vec<Value> {
    let dir = std::env::temp_dir().join(format!("rusparse-bench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json: PathBuf = dir.join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_rusparse-bench"))
        .args(["-q", "--json", json.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rusparse-bench {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    report["rows"].as_array().unwrap().clone()
}

fn bytes(row: &Value, key: &str) -> Option<u64> {
    row[key].as_u64()
}

#[test]
fn budgeted_rows_carry_the_budget_and_stay_within_it_and_a_refused_budget_is_a_row() {
    let rows = rows(
        "budgets",
        &[
            "--runs",
            "2",
            "--warmup",
            "1",
            "--threads",
            "2",
            "--memory-budget",
            "none",
            "--memory-budget",
            "4c",
            "--memory-budget",
            "1",
            "stencil2d_5pt:20",
        ],
    );
    assert_eq!(rows.len(), 3, "{rows:#?}");
    let (free, four, tiny) = (&rows[0], &rows[1], &rows[2]);
    assert!(rows.iter().all(|r| r["matrix"] == "stencil2d_5pt_20"));
    assert!(free["memory_budget"].is_null());
    let c = bytes(free, "c_bytes").expect("C's bytes");
    assert!(c > 0);
    assert_eq!(bytes(four, "memory_budget"), Some(4 * c));
    assert_eq!(four["nnz_c"], free["nnz_c"]);
    let bound = bytes(four, "peak_bound").unwrap();
    assert!(bound <= 4 * c, "{four:#}");
    // Measured alone in this process: the product's extra memory, steady
    // and on the first (cold) call, is within the planner's bound (so
    // within the budget) and not nothing.
    let (steady, cold) = (
        bytes(four, "peak_extra_bytes").unwrap(),
        bytes(four, "peak_extra_cold_bytes").unwrap(),
    );
    assert!(steady <= bound && cold <= bound, "{four:#}");
    assert!(cold > 0, "{four:#}");
    assert!((1..=2).contains(&bytes(four, "concurrency").unwrap()));
    assert_eq!(bytes(tiny, "memory_budget"), Some(1));
    assert!(
        tiny["algorithm"].as_str().unwrap().starts_with("refused"),
        "{tiny:#}"
    );
    assert_eq!(tiny["median_s"].as_f64(), Some(0.0));
    assert!(tiny["peak_extra_bytes"].is_null());
}
