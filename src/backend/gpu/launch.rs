//! The launch contract of `kernels/README.md` as data: every kernel with the
//! size of each parameter, shared by every runtime.

/// The shape of one kernel launch: `grid` blocks of `block` threads with
/// `shared` bytes of dynamic shared memory each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks.
    pub grid: u32,
    /// Threads a block.
    pub block: u32,
    /// Bytes of dynamic shared memory a block.
    pub shared: u32,
}

/// Every kernel of the launch contract (`kernels/README.md`) with the size
/// in bytes of each parameter, in order: 56 for `rs_csr`, 8 for pointers
/// and `long long`, 4 for `int`. Every launch is checked against it, and
/// `tests/nvrtc_kernels.rs` checks it against the compiled PTX, so an
/// argument list that drifts from a kernel's signature fails without a GPU.
pub const KERNEL_PARAMS: &[(&str, &[usize])] = &[
    ("rs_setup", &[56, 56, 8, 8]),
    ("rs_validate", &[56, 4, 4, 8, 8]),
    ("rs_row_shapes", &[56, 56, 8]),
    ("rs_bin_count", &[8, 8, 8, 4, 8, 4, 8, 8]),
    ("rs_bin_fill", &[8, 8, 8, 4, 8, 4, 8, 8, 8]),
    ("rs_scan_blocks", &[8, 8, 8]),
    ("rs_scan_sums", &[8, 8]),
    ("rs_scan_add", &[8, 8, 8]),
    ("rs_write_offsets", &[8, 8, 8, 4, 8]),
    ("rs_write_offsets_wide", &[8, 8, 8, 4, 8]),
    ("rs_write_offsets_narrow", &[8, 8, 8, 4, 8]),
    ("rs_transpose_count", &[56, 8]),
    ("rs_transpose_scatter", &[56, 8, 8, 8]),
    ("rs_transpose_sort_rows", &[8, 8, 4, 8, 8, 4]),
    ("rs_transpose_gather", &[8, 8, 8, 8, 4]),
    ("rs_symbolic_shared", &[8, 8, 56, 56, 8, 8, 4, 4, 8, 8, 8]),
    ("rs_symbolic_global", &[8, 8, 56, 56, 8, 8, 8]),
    (
        "rs_numeric_shared",
        &[8, 8, 56, 56, 8, 8, 8, 8, 8, 4, 8, 4, 4, 4],
    ),
    (
        "rs_numeric_global",
        &[8, 8, 56, 56, 8, 8, 8, 8, 8, 4, 8, 8, 8, 4],
    ),
    ("rs_numeric_single", &[8, 8, 56, 56, 8, 8, 8, 8, 8, 4]),
];

/// The parameter sizes of kernel `name` (see [`KERNEL_PARAMS`]).
pub fn kernel_params(name: &str) -> Option<&'static [usize]> {
    KERNEL_PARAMS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, p)| *p)
}

/// Block of the grid-stride setup, validation, row-shape and transpose
/// kernels.
pub const SETUP_BLOCK: u32 = 256;
/// Block of the binning kernels (at least the bin count + 1).
pub const BIN_BLOCK: u32 = 512;
/// Block of `rs_write_offsets*`, `rs_transpose_gather` and
/// `rs_numeric_single`.
pub const PLAIN_BLOCK: u32 = 256;
/// The largest block of the planner's bins, the scans and the global-memory
/// kernels (the device's limit, at most this).
pub const MAX_BLOCK: u32 = 1024;

/// The most threads a block of each kernel is launched with. Each kernel
/// is compiled with these launch bounds (`RS_LAUNCH_BOUNDS(n)` in
/// `kernels/`, compared with this table by a test), so the compiler keeps
/// its registers within what that block may use, and every launch is
/// checked against it ([`checked_launch`](super::device::checked_launch)).
pub const KERNEL_MAX_BLOCK: &[(&str, u32)] = &[
    ("rs_setup", SETUP_BLOCK),
    ("rs_validate", SETUP_BLOCK),
    ("rs_row_shapes", SETUP_BLOCK),
    ("rs_bin_count", BIN_BLOCK),
    ("rs_bin_fill", BIN_BLOCK),
    ("rs_scan_blocks", MAX_BLOCK),
    ("rs_scan_sums", MAX_BLOCK),
    ("rs_scan_add", MAX_BLOCK),
    ("rs_write_offsets", PLAIN_BLOCK),
    ("rs_write_offsets_wide", PLAIN_BLOCK),
    ("rs_write_offsets_narrow", PLAIN_BLOCK),
    ("rs_transpose_count", SETUP_BLOCK),
    ("rs_transpose_scatter", SETUP_BLOCK),
    ("rs_transpose_sort_rows", SETUP_BLOCK),
    ("rs_transpose_gather", PLAIN_BLOCK),
    ("rs_symbolic_shared", MAX_BLOCK),
    ("rs_symbolic_global", MAX_BLOCK),
    ("rs_numeric_shared", MAX_BLOCK),
    ("rs_numeric_global", MAX_BLOCK),
    ("rs_numeric_single", PLAIN_BLOCK),
];

/// The launch bounds of kernel `name` (see [`KERNEL_MAX_BLOCK`]).
pub fn kernel_max_block(name: &str) -> Option<u32> {
    KERNEL_MAX_BLOCK
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, b)| b)
}

/// The kernels whose blocks the planner sizes from the device (bins,
/// scans, global kernels): a device or a compiled kernel that allows
/// fewer threads makes the planner use smaller blocks.
pub fn planner_sized(name: &str) -> bool {
    kernel_max_block(name) == Some(MAX_BLOCK)
}

/// What a loaded kernel's limit on threads per block (the runtime's
/// `MAX_THREADS_PER_BLOCK` of the function) leaves the planner: for a
/// planner-sized kernel the threads it may use (at most [`MAX_BLOCK`]);
/// for one launched with a fixed block, that block when the function
/// allows it.
///
/// # Errors
/// [`crate::Error::NotSupported`] when a fixed-block kernel cannot run its
/// block, or a planner-sized one not even a warp, on this device.
pub fn threads_for(name: &str, function_max: u32, warp: u32) -> crate::Result<u32> {
    let needed = kernel_max_block(name).ok_or_else(|| {
        crate::Error::InternalError(format!("{name} is not in the launch contract"))
    })?;
    let usable = function_max.min(needed);
    let enough = if planner_sized(name) { warp } else { needed };
    if usable < enough {
        return Err(crate::Error::NotSupported(format!(
            "kernel {name} can run at most {function_max} threads a block on this device \
             (registers), but needs {enough}"
        )));
    }
    Ok(usable / warp.max(1) * warp.max(1))
}

/// Kernels launched with more dynamic shared memory than the 48 KiB
/// default; they get `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` at
/// load time (CUDA; HIP devices give every kernel their whole LDS).
pub const LARGE_SHARED_KERNELS: &[&str] = &["rs_symbolic_shared", "rs_numeric_shared"];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel of the contract has launch bounds, and the kernels'
    /// source declares exactly those (`RS_LAUNCH_BOUNDS(n)`).
    #[test]
    fn a_functions_limit_bounds_the_planner_and_fails_fixed_blocks() {
        // Bins: the planner takes what the function allows, in warps.
        assert_eq!(threads_for("rs_numeric_shared", 1024, 32).unwrap(), 1024);
        assert_eq!(threads_for("rs_numeric_shared", 2048, 32).unwrap(), 1024);
        assert_eq!(threads_for("rs_numeric_shared", 700, 32).unwrap(), 672);
        assert!(threads_for("rs_numeric_shared", 16, 32).is_err());
        // A fixed block the function cannot run.
        assert_eq!(threads_for("rs_setup", 1024, 32).unwrap(), SETUP_BLOCK);
        let e = threads_for("rs_setup", 128, 32).unwrap_err().to_string();
        assert!(e.contains("rs_setup") && e.contains("128"), "{e}");
        assert!(threads_for("rs_nothing", 1024, 32).is_err());
    }

    #[test]
    fn the_sources_launch_bounds_are_the_tables() {
        let source = crate::backend::kernel_source::kernel_source();
        let mut declared = Vec::new();
        for rest in source.split("RS_GLOBAL RS_LAUNCH_BOUNDS(").skip(1) {
            let (n, after) = rest.split_once(')').expect("RS_LAUNCH_BOUNDS(n)");
            let name = after
                .trim_start()
                .strip_prefix("void ")
                .and_then(|a| a.split('(').next())
                .expect("RS_GLOBAL RS_LAUNCH_BOUNDS(n) void rs_name(")
                .trim()
                .to_string();
            declared.push((name, n.trim().parse::<u32>().expect("a number")));
        }
        assert!(
            !source.contains("RS_GLOBAL void"),
            "a kernel without RS_LAUNCH_BOUNDS"
        );
        declared.sort();
        let mut table: Vec<(String, u32)> = KERNEL_MAX_BLOCK
            .iter()
            .map(|&(n, b)| (n.to_string(), b))
            .collect();
        table.sort();
        assert_eq!(declared, table);
        let mut params: Vec<&str> = KERNEL_PARAMS.iter().map(|&(n, _)| n).collect();
        params.sort_unstable();
        let mut bounded: Vec<&str> = KERNEL_MAX_BLOCK.iter().map(|&(n, _)| n).collect();
        bounded.sort_unstable();
        assert_eq!(params, bounded);
    }
}
