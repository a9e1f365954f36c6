//! Result rows and their outputs: the stdout table, CSV, and JSON (written
//! by this tool and read back from it and from the peer script).
//!
//! JSON schema (the peer script writes the same, with `"tool"` set to
//! `"scipy"`, `"mkl"` or `"graphblas"`):
//!
//! ```json
//! {"machine": {"cpu": "...", "cores": 2, "os": "linux", "arch": "x86_64"},
//!  "date": "2026-11-23T15:53:57Z", "threads": 2,
//!  "rows": [{"tool": "rusparse", "matrix": "stencil2d_5pt_725", "rows": 525625,
//!            "cols": 525625, "nnz_a": 2625225, "nprod": 13118725, "nnz_c": 6822921,
//!            "median_s": 0.1, "min_s": 0.1, "max_s": 0.1, "gflops": 0.26,
//!            "peak_extra_bytes": 1234, "algorithm": "hash", "threads": 2,
//!            "value": "f64", "index": "i32"}]}
//! ```
//!
//! When reading, only `tool`, `matrix` and `median_s` are required; other
//! fields may be missing or `null`, and a bare array of rows is accepted too.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// The tool name of this benchmark's own rows.
pub const TOOL: &str = "rusparse";

/// `null` or missing → the default.
fn lenient<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One measured case.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `rusparse`, or a peer (`scipy`, `mkl`, `graphblas`).
    pub tool: String,
    /// The case name (file-system safe; the `--dump` folder name).
    pub matrix: String,
    /// Rows of A.
    #[serde(default, deserialize_with = "lenient")]
    pub rows: u64,
    /// Columns of A.
    #[serde(default, deserialize_with = "lenient")]
    pub cols: u64,
    /// nnz(A).
    #[serde(default, deserialize_with = "lenient")]
    pub nnz_a: u64,
    /// Scalar products of the SpGEMM.
    #[serde(default, deserialize_with = "lenient")]
    pub nprod: u64,
    /// nnz(C).
    #[serde(default, deserialize_with = "lenient")]
    pub nnz_c: u64,
    /// Median seconds of the timed runs.
    pub median_s: f64,
    /// Fastest run, seconds.
    #[serde(default, deserialize_with = "lenient")]
    pub min_s: f64,
    /// Slowest run, seconds.
    #[serde(default, deserialize_with = "lenient")]
    pub max_s: f64,
    /// `2 * nprod / median_s / 1e9`.
    #[serde(default, deserialize_with = "lenient")]
    pub gflops: f64,
    /// Peak bytes beyond the inputs and C (None when the tool cannot tell).
    #[serde(default)]
    pub peak_extra_bytes: Option<u64>,
    /// The algorithm that ran.
    #[serde(default, deserialize_with = "lenient")]
    pub algorithm: String,
    /// Threads used.
    #[serde(default, deserialize_with = "lenient")]
    pub threads: u64,
    /// Value type (`f32`, `f64`, `c32`, `c64`).
    #[serde(default, deserialize_with = "lenient")]
    pub value: String,
    /// Index type (`i32`, `i64`).
    #[serde(default, deserialize_with = "lenient")]
    pub index: String,
    /// Where it ran: `cpu` or `cuda` (empty in older files and peer rows).
    #[serde(default, deserialize_with = "lenient")]
    pub backend: String,
    /// The GPU's name for `cuda` rows.
    #[serde(default, deserialize_with = "lenient")]
    pub device: String,
    /// `cuda` rows: seconds of the first call of the process (incl. loading
    /// or compiling the kernels), not among the timed runs.
    #[serde(default)]
    pub first_call_s: Option<f64>,
    /// `cuda` rows: peak device bytes of one product beyond the inputs, C
    /// included (the memory pool's high-water mark).
    #[serde(default)]
    pub peak_device_bytes: Option<u64>,
    /// Bytes of C's three arrays.
    #[serde(default)]
    pub c_bytes: Option<u64>,
    /// The memory budget of the runs in bytes (`--memory-budget`; `None`:
    /// no budget), which `peak_extra_bytes` should stay within.
    #[serde(default)]
    pub memory_budget: Option<u64>,
    /// The planner's bound of the peak extra bytes (CPU rows).
    #[serde(default)]
    pub peak_bound: Option<u64>,
    /// CPU rows: the peak extra bytes of one more run after the context's
    /// kept scratch was freed (everything rusparse holds counted; in the
    /// timed runs, scratch kept from the run before counts as live input).
    #[serde(default)]
    pub peak_extra_cold_bytes: Option<u64>,
    /// Chunks of rows the CPU phases ran at once (fewer than the threads
    /// when a budget asked for it).
    #[serde(default)]
    pub concurrency: Option<u64>,
    /// `cuda` rows: seconds of each phase in one run that waited for the
    /// device after each (`work_estimation=…;symbolic=…;allocate_c=…;
    /// numeric=…;free=…`), then `predict_nnz=…`: rusparseSpGEMM_predictNnz on
    /// the device arrays (its second call).
    #[serde(default)]
    pub phases_s: Option<String>,
    /// `cuda` rows: the plan (threads per B row, rows per bin, spills).
    #[serde(default)]
    pub plan: Option<String>,
}

/// GFLOPS of `nprod` products (two flops each) in `seconds`.
pub fn gflops(nprod: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        2.0 * nprod as f64 / seconds / 1e9
    } else {
        0.0
    }
}

/// The machine a report was measured on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model name from /proc/cpuinfo.
    pub cpu: String,
    /// Logical cores available to the process.
    pub cores: usize,
    /// Operating system.
    pub os: String,
    /// Architecture.
    pub arch: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
        }
    }
}

/// A JSON report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// When it ran (ISO 8601, UTC).
    pub date: String,
    /// Threads of the runs.
    pub threads: u64,
    /// The measured cases.
    pub rows: Vec<Row>,
}

/// Seconds since the Unix epoch as an ISO 8601 UTC timestamp.
pub fn iso_date(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Now, as [`iso_date`].
pub fn now_iso() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    iso_date(secs)
}

/// Writes the JSON report.
pub fn write_json(path: &Path, report: &Report) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes the rows as CSV (header = the JSON row fields).
pub fn write_csv(path: &Path, rows: &[Row]) -> Result<(), String> {
    let err = |e: csv::Error| format!("cannot write {}: {e}", path.display());
    let mut w = csv::Writer::from_path(path).map_err(err)?;
    for r in rows {
        w.serialize(r).map_err(err)?;
    }
    w.flush()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Either a report object or a bare array of rows.
#[derive(Deserialize)]
#[serde(untagged)]
enum ReportIn {
    Object { rows: Vec<Row> },
    Rows(Vec<Row>),
}

/// The rows of a JSON file of this schema.
pub fn read_rows(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_rows(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The rows of a JSON text (see [`read_rows`]).
pub fn parse_rows(text: &str) -> Result<Vec<Row>, String> {
    let parsed: ReportIn = serde_json::from_str(text).map_err(|e| {
        format!("not a benchmark report ({{\"rows\": [...]}} with tool, matrix, median_s): {e}")
    })?;
    let mut rows = match parsed {
        ReportIn::Object { rows } | ReportIn::Rows(rows) => rows,
    };
    for r in &mut rows {
        if r.gflops == 0.0 {
            r.gflops = gflops(r.nprod, r.median_s);
        }
    }
    Ok(rows)
}

/// Peer rows that lack nprod (hence GFLOPS) take them from this tool's row
/// of the same matrix.
pub fn fill_peer_gflops(rows: &mut [Row]) {
    let ours: Vec<(String, u64)> = rows
        .iter()
        .filter(|r| r.tool == TOOL && r.nprod > 0)
        .map(|r| (r.matrix.clone(), r.nprod))
        .collect();
    for r in rows.iter_mut().filter(|r| r.nprod == 0) {
        if let Some((_, n)) = ours.iter().find(|(m, _)| *m == r.matrix) {
            r.nprod = *n;
            r.gflops = gflops(*n, r.median_s);
        }
    }
}

/// `peer median / rusparse median` for a peer row: against this tool's row
/// of the same matrix and value type, else of the same matrix.
pub fn ratio(peer: &Row, rows: &[Row]) -> Option<f64> {
    if peer.tool == TOOL {
        return None;
    }
    let ours = |same_value: bool| {
        rows.iter().find(|r| {
            r.tool == TOOL && r.matrix == peer.matrix && (!same_value || r.value == peer.value)
        })
    };
    let base = ours(true).or_else(|| ours(false))?;
    (base.median_s > 0.0).then(|| peer.median_s / base.median_s)
}

/// Matrix names in order of first appearance.
pub fn matrices(rows: &[Row]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    rows.iter()
        .filter(|r| seen.insert(r.matrix.clone()))
        .map(|r| r.matrix.clone())
        .collect()
}

/// Tool names, this tool first, then in order of first appearance.
pub fn tools(rows: &[Row]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<String> = rows
        .iter()
        .filter(|r| seen.insert(r.tool.clone()))
        .map(|r| r.tool.clone())
        .collect();
    out.sort_by_key(|t| t != TOOL);
    out
}

/// The table printed on stdout: one line per row, grouped by matrix (this
/// tool first), with the peer/rusparse median ratio on peer lines (> 1 means
/// rusparse is faster).
pub fn table(rows: &[Row]) -> String {
    let headers = [
        "tool",
        "matrix",
        "rows",
        "cols",
        "nnz(A)",
        "nprod",
        "nnz(C)",
        "median s",
        "min s",
        "max s",
        "GFLOPS",
        "peak extra MiB",
        "budget MiB",
        "algorithm",
        "thr",
        "conc",
        "type",
        "peer/rusparse",
    ];
    let mut lines: Vec<Vec<String>> = Vec::new();
    let order = tools(rows);
    for m in matrices(rows) {
        for t in &order {
            for r in rows.iter().filter(|r| r.matrix == m && &r.tool == t) {
                // Peers may leave counts out (read as 0): show "-".
                let count = |v: u64| {
                    if v == 0 && r.tool != TOOL {
                        "-".to_string()
                    } else {
                        v.to_string()
                    }
                };
                lines.push(vec![
                    r.tool.clone(),
                    r.matrix.clone(),
                    count(r.rows),
                    count(r.cols),
                    count(r.nnz_a),
                    count(r.nprod),
                    count(r.nnz_c),
                    secs(r.median_s),
                    secs(r.min_s),
                    secs(r.max_s),
                    format!("{:.3}", r.gflops),
                    mib(r.peak_extra_bytes),
                    mib(r.memory_budget),
                    dash(&r.algorithm),
                    if r.threads == 0 {
                        "-".into()
                    } else {
                        r.threads.to_string()
                    },
                    r.concurrency.map_or("-".into(), |c| c.to_string()),
                    format!("{}/{}", dash(&r.value), dash(&r.index)),
                    ratio(r, rows).map_or("-".into(), |x| format!("{x:.2}x")),
                ]);
            }
        }
    }
    let mut width: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for l in &lines {
        for (w, c) in width.iter_mut().zip(l) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let mut put = |cells: &[String]| {
        let mut line = String::new();
        for (k, (c, w)) in cells.iter().zip(&width).enumerate() {
            // Text columns left-aligned, numbers right-aligned.
            if matches!(k, 0 | 1 | 13 | 16) {
                let _ = write!(line, "{c:<w$}  ");
            } else {
                let _ = write!(line, "{c:>w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    put(&headers.map(String::from));
    for l in &lines {
        put(l);
    }
    out
}

/// Bytes in MiB with one decimal, "-" when unknown.
fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("-".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

fn dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.into()
    }
}

/// Seconds with four significant digits.
fn secs(s: f64) -> String {
    if s == 0.0 {
        "-".into()
    } else if s >= 100.0 {
        format!("{s:.1}")
    } else {
        let digits = (3 - s.abs().log10().floor() as i32).clamp(0, 9) as usize;
        format!("{s:.digits$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tool: &str, matrix: &str, median: f64) -> Row {
        Row {
            tool: tool.into(),
            matrix: matrix.into(),
            rows: 10,
            cols: 10,
            nnz_a: 30,
            nprod: 1_000_000,
            nnz_c: 50,
            median_s: median,
            min_s: median * 0.9,
            max_s: median * 1.1,
            gflops: gflops(1_000_000, median),
            peak_extra_bytes: Some(2 * 1048576),
            algorithm: "hash".into(),
            threads: 2,
            value: "f64".into(),
            index: "i32".into(),
            ..Row::default()
        }
    }

    #[test]
    fn dates_are_iso_8601_utc() {
        assert_eq!(iso_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_date(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso_date(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(iso_date(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn gflops_counts_two_flops_per_product() {
        assert_eq!(gflops(1_000_000_000, 2.0), 1.0);
        assert_eq!(gflops(5, 0.0), 0.0);
    }

    #[test]
    fn json_round_trip_and_lenient_peer_rows() {
        let report = Report {
            machine: Machine::this(),
            date: now_iso(),
            threads: 2,
            rows: vec![row(TOOL, "m", 0.5)],
        };
        let text = serde_json::to_string(&report).unwrap();
        assert!(text.contains("\"machine\":{\"cpu\""));
        assert!(text.contains("\"peak_extra_bytes\":2097152"));
        assert_eq!(parse_rows(&text).unwrap(), report.rows);
        // A peer row with only the required fields and some nulls.
        let peer = r#"{"machine": "x", "rows": [{"tool": "scipy", "matrix": "m",
            "median_s": 1.5, "peak_extra_bytes": null, "algorithm": null}]}"#;
        let mut rows = parse_rows(peer).unwrap();
        assert_eq!(rows[0].tool, "scipy");
        assert_eq!((rows[0].nprod, rows[0].gflops), (0, 0.0));
        assert_eq!(rows[0].peak_extra_bytes, None);
        rows.push(row(TOOL, "m", 0.5));
        fill_peer_gflops(&mut rows);
        assert_eq!(rows[0].nprod, 1_000_000);
        assert!((rows[0].gflops - gflops(1_000_000, 1.5)).abs() < 1e-12);
        // A bare array works too; garbage does not.
        assert_eq!(
            parse_rows(r#"[{"tool":"mkl","matrix":"m","median_s":1}]"#)
                .unwrap()
                .len(),
            1
        );
        assert!(parse_rows(r#"{"rows": [{"tool": "mkl"}]}"#).is_err());
    }

    #[test]
    fn table_groups_by_matrix_and_shows_ratios() {
        let rows = vec![
            row("scipy", "a", 2.0),
            row(TOOL, "a", 0.5),
            row(TOOL, "b", 1.0),
            row("mkl", "b", 0.25),
            row("mkl", "c", 1.0),
        ];
        assert_eq!(ratio(&rows[0], &rows), Some(4.0));
        assert_eq!(ratio(&rows[1], &rows), None);
        assert_eq!(ratio(&rows[3], &rows), Some(0.25));
        assert_eq!(ratio(&rows[4], &rows), None);
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6);
        assert!(lines[0].starts_with("tool") && lines[0].ends_with("peer/rusparse"));
        assert!(lines[1].starts_with("rusparse  a"));
        assert!(lines[2].starts_with("scipy") && lines[2].ends_with("4.00x"));
        assert!(lines[4].starts_with("mkl") && lines[4].ends_with("0.25x"));
        assert!(lines[1].contains(" 0.5000 ") && lines[1].contains(" 2.0 "));
    }

    #[test]
    fn csv_has_a_header_and_one_line_per_row() {
        let path = std::env::temp_dir().join(format!("rusparse-bench-{}.csv", std::process::id()));
        write_csv(&path, &[row(TOOL, "a", 0.5), row("scipy", "a", 1.0)]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "tool,matrix,rows,cols,nnz_a,nprod,nnz_c,median_s,min_s,max_s,gflops,\
             peak_extra_bytes,algorithm,threads,value,index,backend,device,first_call_s,\
             peak_device_bytes,c_bytes,memory_budget,peak_bound,peak_extra_cold_bytes,\
             concurrency,phases_s,plan"
        );
        assert!(lines[1].starts_with("rusparse,a,10,10,30,1000000,50,0.5,"));
        // No budget: empty cells.
        assert!(lines[1].ends_with(",,,,"), "{}", lines[1]);
    }

    #[test]
    fn the_budget_is_a_column_of_every_format() {
        let budgeted = Row {
            memory_budget: Some(3 * 1048576),
            peak_bound: Some(2_500_000),
            peak_extra_cold_bytes: Some(2_400_000),
            concurrency: Some(1),
            ..row(TOOL, "a", 0.5)
        };
        let rows = vec![row(TOOL, "a", 0.4), budgeted.clone()];
        // Table: "budget MiB" after "peak extra MiB", "conc" after "thr".
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        let cells = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
        let head = cells(lines[0]);
        let at = |name: &str| head.iter().position(|h| h == name).unwrap();
        assert_eq!(head[at("MiB") + 1], "budget");
        let (unbudgeted, budgeted_line) = (cells(lines[1]), cells(lines[2]));
        // Header words "peak extra MiB" and "budget MiB" are split, so
        // compare the row cells from the end: peer ratio, type, conc, thr,
        // algorithm, budget, peak.
        let n = budgeted_line.len();
        assert_eq!(budgeted_line[n - 6], "3.0");
        assert_eq!(budgeted_line[n - 7], "2.0");
        assert_eq!(budgeted_line[n - 3], "1");
        assert_eq!(unbudgeted[n - 6], "-");
        assert_eq!(unbudgeted[n - 3], "-");
        // JSON: a number, or null without a budget; both read back.
        let text = serde_json::to_string(&rows).unwrap();
        assert!(text.contains("\"memory_budget\":3145728"), "{text}");
        assert!(text.contains("\"memory_budget\":null"), "{text}");
        assert_eq!(parse_rows(&text).unwrap(), rows);
        // Older files without the field read as no budget.
        let old = parse_rows(r#"[{"tool":"rusparse","matrix":"m","median_s":1}]"#).unwrap();
        assert_eq!((old[0].memory_budget, old[0].concurrency), (None, None));
        // CSV: the budget in bytes.
        let path =
            std::env::temp_dir().join(format!("rusparse-bench-b-{}.csv", std::process::id()));
        write_csv(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(text
            .lines()
            .nth(2)
            .unwrap()
            .ends_with(",3145728,2500000,2400000,1,,"));
    }
}
