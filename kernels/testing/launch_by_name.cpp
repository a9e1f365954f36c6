// One host entry point that launches any kernel of the launch contract by
// name, with its arguments as an array of pointers to their values: what
// cuLaunchKernel and hipModuleLaunchKernel take. The emulated GPU device of
// kernels/host-tests (src/device.rs) drives rusparse's real pipeline
// (src/backend/gpu/spgemm.rs) through it. kernels/host-tests/build.rs
// compiles this file once per variant, after portability.h and every
// kernels/*.cu; RS_HOST_FN appends the variant's suffix.
//
// Returns 0 after the launch, 1 for a name outside the contract.

#include <cstring>

template <class T>
static T& rs_by_name_arg(void** args, int i) {
  return *static_cast<T*>(args[i]);
}

#define RS_A(i, T) rs_by_name_arg<T>(args, i)
#define RS_LAUNCH_AS(kernel_name, call)                               \
  if (std::strcmp(name, kernel_name) == 0) {                          \
    rs_host::launch(grid, block, shared, [&] { call; });               \
    return 0;                                                           \
  }

extern "C" int RS_HOST_FN(rs_host_launch_by_name)(const char* name, long long grid,
                                                  long long block, long long shared,
                                                  void** args) {
  typedef long long ll;
  typedef unsigned long long ull;
  RS_LAUNCH_AS("rs_setup", rs_setup(RS_A(0, rs_csr), RS_A(1, rs_csr), RS_A(2, ll*), RS_A(3, ull*)))
  RS_LAUNCH_AS("rs_validate", rs_validate(RS_A(0, rs_csr), RS_A(1, int), RS_A(2, int),
                                          RS_A(3, ull*), RS_A(4, ll*)))
  RS_LAUNCH_AS("rs_row_shapes", rs_row_shapes(RS_A(0, rs_csr), RS_A(1, rs_csr), RS_A(2, ull*)))
  RS_LAUNCH_AS("rs_bin_count",
               rs_bin_count(RS_A(0, ll), RS_A(1, const ll*), RS_A(2, const offset_t*),
                            RS_A(3, int), RS_A(4, const ll*), RS_A(5, int), RS_A(6, ll*),
                            RS_A(7, ll*)))
  RS_LAUNCH_AS("rs_bin_fill",
               rs_bin_fill(RS_A(0, ll), RS_A(1, const ll*), RS_A(2, const offset_t*),
                           RS_A(3, int), RS_A(4, const ll*), RS_A(5, int), RS_A(6, const ll*),
                           RS_A(7, ll*), RS_A(8, unsigned*)))
  RS_LAUNCH_AS("rs_scan_blocks", rs_scan_blocks(RS_A(0, ll), RS_A(1, ll*), RS_A(2, ll*)))
  RS_LAUNCH_AS("rs_scan_sums", rs_scan_sums(RS_A(0, ll), RS_A(1, ll*)))
  RS_LAUNCH_AS("rs_scan_add", rs_scan_add(RS_A(0, ll), RS_A(1, ll*), RS_A(2, const ll*)))
  RS_LAUNCH_AS("rs_write_offsets", rs_write_offsets(RS_A(0, ll), RS_A(1, const ll*),
                                                    RS_A(2, offset_t*), RS_A(3, int),
                                                    RS_A(4, ull*)))
  RS_LAUNCH_AS("rs_write_offsets_wide",
               rs_write_offsets_wide(RS_A(0, ll), RS_A(1, const ll*), RS_A(2, ll*),
                                     RS_A(3, int), RS_A(4, ull*)))
  RS_LAUNCH_AS("rs_write_offsets_narrow",
               rs_write_offsets_narrow(RS_A(0, ll), RS_A(1, const ll*), RS_A(2, int*),
                                       RS_A(3, int), RS_A(4, ull*)))
  RS_LAUNCH_AS("rs_transpose_count", rs_transpose_count(RS_A(0, rs_csr), RS_A(1, ll*)))
  RS_LAUNCH_AS("rs_transpose_scatter",
               rs_transpose_scatter(RS_A(0, rs_csr), RS_A(1, ll*), RS_A(2, index_t*),
                                    RS_A(3, offset_t*)))
  RS_LAUNCH_AS("rs_transpose_sort_rows",
               rs_transpose_sort_rows(RS_A(0, ll), RS_A(1, const offset_t*), RS_A(2, int),
                                      RS_A(3, offset_t*), RS_A(4, index_t*), RS_A(5, int)))
  RS_LAUNCH_AS("rs_transpose_gather",
               rs_transpose_gather(RS_A(0, ll), RS_A(1, const offset_t*),
                                   RS_A(2, const value_t*), RS_A(3, value_t*), RS_A(4, int)))
  RS_LAUNCH_AS("rs_symbolic_shared",
               rs_symbolic_shared(RS_A(0, const unsigned*), RS_A(1, ll), RS_A(2, rs_csr),
                                  RS_A(3, rs_csr), RS_A(4, ll*), RS_A(5, ll), RS_A(6, int),
                                  RS_A(7, int), RS_A(8, ll), RS_A(9, unsigned*), RS_A(10, ll*)))
  RS_LAUNCH_AS("rs_symbolic_global",
               rs_symbolic_global(RS_A(0, const unsigned*), RS_A(1, ll), RS_A(2, rs_csr),
                                  RS_A(3, rs_csr), RS_A(4, ll*), RS_A(5, const ll*),
                                  RS_A(6, index_t*)))
  RS_LAUNCH_AS("rs_numeric_shared",
               rs_numeric_shared(RS_A(0, const unsigned*), RS_A(1, ll), RS_A(2, rs_csr),
                                 RS_A(3, rs_csr), RS_A(4, const value_t*),
                                 RS_A(5, const value_t*), RS_A(6, const ll*), RS_A(7, index_t*),
                                 RS_A(8, value_t*), RS_A(9, int), RS_A(10, ll), RS_A(11, int),
                                 RS_A(12, int), RS_A(13, int)))
  RS_LAUNCH_AS("rs_numeric_global",
               rs_numeric_global(RS_A(0, const unsigned*), RS_A(1, ll), RS_A(2, rs_csr),
                                 RS_A(3, rs_csr), RS_A(4, const value_t*),
                                 RS_A(5, const value_t*), RS_A(6, const ll*), RS_A(7, index_t*),
                                 RS_A(8, value_t*), RS_A(9, int), RS_A(10, const ll*),
                                 RS_A(11, index_t*), RS_A(12, value_t*), RS_A(13, int)))
  RS_LAUNCH_AS("rs_numeric_single",
               rs_numeric_single(RS_A(0, const unsigned*), RS_A(1, ll), RS_A(2, rs_csr),
                                 RS_A(3, rs_csr), RS_A(4, const value_t*),
                                 RS_A(5, const value_t*), RS_A(6, const ll*), RS_A(7, index_t*),
                                 RS_A(8, value_t*), RS_A(9, int)))
  return 1;
}

#undef RS_LAUNCH_AS
#undef RS_A
