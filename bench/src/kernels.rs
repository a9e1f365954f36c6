//! `rusparse-bench kernels`: every kernel instantiation compiled as a CUBIN
//! by this machine's NVRTC, with ptxas's registers, static shared memory
//! and spills, and whether each kernel can run the largest block rusparse
//! launches it with. Needs NVRTC, not a GPU (`--arch` picks the target;
//! `auto` asks the first GPU). `scripts/gpu-check.sh` runs it on the GPU
//! machine; `tests/nvrtc_kernels.rs` checks sm_80 and sm_90 in CI.

use clap::Args;
use rusparse::backend::cuda::compile::{nvrtc_supported_archs, KernelTypes};
use rusparse::backend::cuda::resources::{kernel_max_block, kernel_resources};

/// Kernel resources per instantiation (needs NVRTC).
#[derive(Args, Debug)]
pub struct KernelsCli {
    /// The target: `auto` (the first GPU's, else 90) or a number such as 90
    /// for sm_90.
    #[arg(long = "device-arch", default_value = "auto")]
    arch: String,
    /// Every kernel of every instantiation, not only the worst per one.
    #[arg(long)]
    all: bool,
}

/// Runs the subcommand.
///
/// # Errors
/// NVRTC missing or failing, or a kernel that cannot launch at its block.
pub fn run(a: KernelsCli) -> Result<(), String> {
    let arch = match a.arch.as_str() {
        "auto" => device_arch().unwrap_or(90),
        s => s
            .trim_start_matches("sm_")
            .parse::<u32>()
            .map_err(|_| format!("--device-arch {s}: expected auto or a number such as 90"))?,
    };
    let (major, minor) =
        rusparse::backend::cuda::loader::nvrtc().map_err(|e| e.message().to_string())?;
    let supported = nvrtc_supported_archs().map_err(|e| e.message().to_string())?;
    println!("NVRTC {major}.{minor}, sm_{arch} (NVRTC knows {supported:?})");
    if !supported.contains(&arch) {
        return Err(format!("this NVRTC cannot compile for sm_{arch}"));
    }
    println!(
        "{:<38} | {:<24} | {:>4} | {:>6} | {:>6} | {:>5}",
        "types", "kernel", "regs", "smem B", "spill", "block"
    );
    let mut problems = Vec::new();
    for types in KernelTypes::all() {
        let kernels = kernel_resources(types, arch).map_err(|e| e.message().to_string())?;
        let worst = kernels.iter().map(|k| k.registers).max().unwrap_or(0);
        for k in &kernels {
            let block = kernel_max_block(&k.kernel).unwrap_or(0);
            if let Some(p) = k.launch_problem(block) {
                problems.push(format!("{types}: {p}"));
            }
            if a.all || k.registers == worst || k.spill_stores > 0 {
                println!(
                    "{:<38} | {:<24} | {:>4} | {:>6} | {:>6} | {:>5}",
                    types.to_string(),
                    k.kernel,
                    k.registers,
                    k.shared,
                    k.spill_stores,
                    block
                );
            }
        }
    }
    if problems.is_empty() {
        println!("every kernel launches at its largest block");
        Ok(())
    } else {
        Err(format!(
            "kernels that cannot launch at their largest block:\n{}",
            problems.join("\n")
        ))
    }
}

/// `10 * major + minor` of the first GPU, when there is one.
fn device_arch() -> Option<u32> {
    let d = rusparse::backend::cuda::CudaDevice::get(0).ok()?;
    let (major, minor) = d.compute_capability();
    Some(major * 10 + minor)
}
