//! Compiles every kernel instantiation with hiprtc for AMD targets, as CI
//! does without an AMD GPU: 4 value types × 32/64-bit offsets × 32/64-bit
//! indices, for gfx906 (MI50, Hygon DCU) and gfx90a (MI200) with 64-wide
//! wavefronts. Strict: any warning fails. Each code object must contain
//! every kernel the source declares (`RS_GLOBAL RS_LAUNCH_BOUNDS(n) void rs_...`).
//!
//! Without hiprtc each test prints a `SKIPPED` line and passes, unless
//! `RUSPARSE_REQUIRE_HIPRTC=1` is set (the test command sets it after
//! installing Debian's ROCm 5.2 packages).
#![cfg(feature = "hip")]

use rusparse::backend::hip::compile::{compile_hiprtc, wavefront_of_arch, HipKernelOptions};
use rusparse::backend::hip::loader;
use rusparse::backend::kernel_source::{kernel_source, KernelTypes};
use std::sync::Mutex;
use std::time::Instant;

mod support;

const ARCHS: [&str; 2] = ["gfx906", "gfx90a"];
const REQUIRE_HIPRTC: &str = "RUSPARSE_REQUIRE_HIPRTC";

/// The kernels `source` declares: the names after `RS_GLOBAL` (and its
/// launch bounds) and `void`.
fn declared_kernels(source: &str) -> Vec<String> {
    let mut names: Vec<String> = source
        .split("RS_GLOBAL ")
        .skip(1)
        .filter_map(|rest| {
            let rest = match rest.strip_prefix("RS_LAUNCH_BOUNDS(") {
                Some(r) => r.split_once(')')?.1.trim_start(),
                None => rest,
            };
            let rest = rest.strip_prefix("void ")?;
            let end = rest.find('(')?;
            let name = rest[..end].trim();
            name.starts_with("rs_").then(|| name.to_string())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Set in the processes [`every_instantiation_compiles_for_amd_targets`]
/// starts, one per target: `compile_hiprtc` compiles one program at a time
/// in a process (ROCm 5.2's hiprtc crashes when threads compile at once),
/// so the two targets compile in two processes, on two cores (72 s on one
/// before, Zen 3 VM).
const ONE_TARGET: &str = "RUSPARSE_TEST_HIP_TARGET";

#[test]
fn every_instantiation_compiles_for_amd_targets() {
    let Some(rtc) = support::available(loader::hiprtc(), "hiprtc", REQUIRE_HIPRTC) else {
        return;
    };
    if let Ok(arch) = std::env::var(ONE_TARGET) {
        return every_instantiation_compiles_for(&arch, rtc.path);
    }
    let started = Instant::now();
    let children: Vec<_> = ARCHS
        .iter()
        .map(|arch| {
            let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
                .args([
                    "--exact",
                    "every_instantiation_compiles_for_amd_targets",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ONE_TARGET, arch)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start the test binary");
            (arch, child)
        })
        .collect();
    for (arch, child) in children {
        let out = child.wait_with_output().expect("the child's output");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        // Passed, and ran the test (a filter that matched nothing passes too).
        assert!(
            out.status.success()
                && stdout.contains("1 passed")
                && stderr.contains(&format!("for {arch}")),
            "the compile for {arch} failed or did not run:\n{stdout}\n{stderr}"
        );
        eprint!(
            "{}",
            stderr
                .lines()
                .filter(|l| l.starts_with("hiprtc"))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        );
    }
    eprintln!("both targets in {:.1} s", started.elapsed().as_secs_f64());
}

/// Every kernel instantiation compiled for `arch`, strictly, each code
/// object holding every kernel the source declares.
fn every_instantiation_compiles_for(arch: &str, rtc_path: &str) {
    let source = kernel_source();
    let kernels = declared_kernels(source);
    assert!(kernels.len() >= 15, "kernels found: {kernels:?}");
    let warp = wavefront_of_arch(arch).expect("a gfx target");
    assert_eq!(warp, 64);
    let jobs: Vec<HipKernelOptions> = KernelTypes::all()
        .map(|types| HipKernelOptions {
            types,
            warp,
            arch: arch.to_string(),
        })
        .collect();
    let started = Instant::now();
    let failures = Mutex::new(Vec::new());
    let next = Mutex::new(0usize);
    // Two threads, though `compile_hiprtc` serialises them: calling it from
    // several threads at once must be safe.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let k = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(opts) = jobs.get(k) else { break };
                match compile_hiprtc(source, opts, true) {
                    Ok(c) => {
                        let missing: Vec<&String> = kernels
                            .iter()
                            .filter(|n| !contains(&c.code, n.as_bytes()))
                            .collect();
                        if c.code.len() < 1024 || !missing.is_empty() {
                            failures.lock().unwrap().push(format!(
                                "{} ({}): {} bytes, missing kernels {missing:?}",
                                opts.arch,
                                opts.types,
                                c.code.len()
                            ));
                        }
                    }
                    Err(e) => failures.lock().unwrap().push(e.to_string()),
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!(
        "hiprtc ({rtc_path}): {} instantiations × {} kernels for {arch} in {:.1} s",
        jobs.len(),
        kernels.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn kernel_names_are_read_from_the_source() {
    let src =
        "RS_GLOBAL void rs_a(int x) {}\nRS_GLOBAL RS_LAUNCH_BOUNDS(256) void rs_b (long y);\nRS_GLOBAL void helper(int);";
    assert_eq!(declared_kernels(src), ["rs_a", "rs_b"]);
}

#[test]
fn a_broken_kernel_fails_with_the_compiler_log() {
    if support::available(loader::hiprtc(), "hiprtc", REQUIRE_HIPRTC).is_none() {
        return;
    }
    let opts = HipKernelOptions {
        types: KernelTypes::all().next().unwrap(),
        warp: 64,
        arch: "gfx906".into(),
    };
    let e = compile_hiprtc(
        "extern \"C\" __global__ void rs_x() { undeclared_name = 1; }",
        &opts,
        true,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("undeclared_name") && e.contains("gfx906"), "{e}");
}

#[test]
fn code_objects_are_cached_per_target() {
    use rusparse::backend::hip::compile::cached_code_object;
    use rusparse::backend::kernel_cache::{DiskCache, ImageSource};
    if support::available(loader::hiprtc(), "hiprtc", REQUIRE_HIPRTC).is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("rusparse-hip-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = DiskCache::at(&dir);
    let source = kernel_source();
    let opts = |arch: &str| HipKernelOptions {
        types: KernelTypes::all().next().unwrap(),
        warp: 64,
        arch: arch.into(),
    };
    let (first, from) = cached_code_object(&cache, source, &opts("gfx906")).unwrap();
    assert_eq!(from, ImageSource::Compiler);
    let (again, from) = cached_code_object(&cache, source, &opts("gfx906")).unwrap();
    assert_eq!((from, &again), (ImageSource::Cache, &first));
    // Another target is another file.
    let (other, from) = cached_code_object(&cache, source, &opts("gfx90a")).unwrap();
    assert_eq!(from, ImageSource::Compiler);
    assert_ne!(other, first);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}
