//! What each kernel needs from an SM (registers, static shared memory,
//! spills), as ptxas reports it when NVRTC compiles a CUBIN with
//! `--ptxas-options=--verbose`, and whether it can launch at the largest
//! block the planner gives it. This needs NVRTC but no GPU, so CI checks
//! every instantiation for sm_80 and sm_90 (`tests/nvrtc_kernels.rs`) and
//! `rusparse-bench kernels` prints the table for the GPU at hand.

use super::compile::{compile_nvrtc_with, kernel_source, Arch, KernelOptions, KernelTypes};
use crate::error::{Error, Result};

pub use crate::backend::gpu::launch::kernel_max_block;

/// Registers of one SM on every architecture rusparse targets (compute
/// capability 7.0 to 10.x): 64 Ki 32-bit registers.
pub const REGISTERS_PER_SM: u32 = 65536;

/// One kernel's resources in one compilation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelResources {
    /// The kernel (`rs_...`).
    pub kernel: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory, bytes (dynamic shared memory comes on top).
    pub shared: u32,
    /// Stack frame per thread, bytes.
    pub stack: u32,
    /// Bytes spilled to local memory (stores).
    pub spill_stores: u32,
    /// Bytes reloaded from local memory.
    pub spill_loads: u32,
}

impl KernelResources {
    /// Why it cannot launch with `block` threads (registers are given out
    /// per warp in units of 256, so a thread's count rounds up to 8), or
    /// `None` when it can.
    pub fn launch_problem(&self, block: u32) -> Option<String> {
        let per_thread = self.registers.div_ceil(8) * 8;
        let need = u64::from(per_thread) * u64::from(block.div_ceil(32) * 32);
        (need > u64::from(REGISTERS_PER_SM)).then(|| {
            format!(
                "{} uses {} registers a thread: {} threads need {need} of the SM's {}",
                self.kernel, self.registers, block, REGISTERS_PER_SM
            )
        })
    }
}

/// The kernels' resources from ptxas's verbose log (`Compiling entry
/// function 'rs_x'`, `... bytes stack frame, ... bytes spill stores, ...
/// bytes spill loads`, `Used N registers, ... M bytes smem`).
pub fn parse_ptxas_log(log: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let end = line.find(unit)?;
        line[..end]
            .trim_end()
            .rsplit(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default();
            out.push(KernelResources {
                kernel: name.to_string(),
                ..KernelResources::default()
            });
            continue;
        }
        let Some(k) = out.last_mut() else { continue };
        if line.contains("bytes stack frame") {
            k.stack = number_before(line, "bytes stack frame").unwrap_or(0);
            k.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
            k.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
        } else if line.contains("Used ") && line.contains("registers") {
            k.registers = number_before(line, "registers").unwrap_or(0);
            k.shared = number_before(line, "bytes smem").unwrap_or(0);
        }
    }
    out
}

/// Compiles `types` as a CUBIN for `sm_<arch>` with ptxas's report and
/// returns every kernel's resources.
///
/// # Errors
/// As [`super::compile::compile_nvrtc`] (NVRTC missing, an architecture it does not know,
/// a compile error); [`Error::InternalError`] when the report names no
/// kernel.
pub fn kernel_resources(types: KernelTypes, arch: u32) -> Result<Vec<KernelResources>> {
    let opts = KernelOptions {
        types,
        warp: 32,
        arch: Arch::Real(arch),
    };
    let report = ["--ptxas-options=--verbose"];
    let compiled =
        compile_nvrtc_with(kernel_source(), &opts, false, &report).map_err(|e| match e {
            Error::InternalError(m) | Error::ArchMismatch(m) if m.contains("ptxas-options") => {
                Error::NotSupported(m)
            }
            other => other,
        });
    let log = compiled?.log;
    let found = parse_ptxas_log(&log);
    if found.is_empty() {
        return Err(Error::InternalError(format!(
            "ptxas reported no kernel for {types} on sm_{arch}:\n{log}"
        )));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'rs_a' for 'sm_90'
ptxas info    : Function properties for rs_a
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 72 registers, used 1 barriers, 512 bytes smem, 400 bytes cmem[0]
ptxas info    : Compile time = 6.553 ms
ptxas info    : Compiling entry function 'rs_b' for 'sm_90'
ptxas info    : Function properties for rs_b
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 400 bytes cmem[0]
";

    #[test]
    fn the_verbose_report_is_parsed() {
        let r = parse_ptxas_log(LOG);
        assert_eq!(
            r,
            vec![
                KernelResources {
                    kernel: "rs_a".into(),
                    registers: 72,
                    shared: 512,
                    stack: 16,
                    spill_stores: 8,
                    spill_loads: 12,
                },
                KernelResources {
                    kernel: "rs_b".into(),
                    registers: 10,
                    ..KernelResources::default()
                },
            ]
        );
    }

    #[test]
    fn registers_bound_the_block() {
        let k = |registers| KernelResources {
            kernel: "rs_k".into(),
            registers,
            ..KernelResources::default()
        };
        assert_eq!(k(64).launch_problem(1024), None);
        // 65 rounds up to 72: 72 * 1024 > 65536.
        assert!(k(65).launch_problem(1024).unwrap().contains("65 registers"));
        assert_eq!(k(65).launch_problem(512), None);
        assert_eq!(k(255).launch_problem(256), None);
    }
}
