//! The launch contract of `kernels/README.md` as data: every kernel with the
//! size of each parameter, shared by every runtime.

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

/// Kernels launched with more dynamic shared memory than the 48 KiB
/// default; they get `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` at
/// load time (CUDA; HIP devices give every kernel their whole LDS).
pub const LARGE_SHARED_KERNELS: &[&str] = &["rs_symbolic_shared", "rs_numeric_shared"];
