// Host entry points for kernels/scan.cu and kernels/binning.cu (see
// kernels/README.md, "Host emulation"). kernels/host-tests/build.rs compiles
// this file once per variant, after portability.h and every kernels/*.cu;
// RS_HOST_FN appends the variant's suffix. Each entry point takes the launch
// geometry (grid, block, dynamic shared bytes) and then the kernel's
// arguments, as host pointers.

extern "C" void RS_HOST_FN(rs_host_scan_blocks)(long long grid, long long block, long long shared,
                                                long long n, long long* data,
                                                long long* block_sums) {
  rs_host::launch(grid, block, shared, [&] { rs_scan_blocks(n, data, block_sums); });
}

extern "C" void RS_HOST_FN(rs_host_scan_sums)(long long grid, long long block, long long shared,
                                              long long nblocks, long long* block_sums) {
  rs_host::launch(grid, block, shared, [&] { rs_scan_sums(nblocks, block_sums); });
}

extern "C" void RS_HOST_FN(rs_host_scan_add)(long long grid, long long block, long long shared,
                                             long long n, long long* data,
                                             const long long* block_sums) {
  rs_host::launch(grid, block, shared, [&] { rs_scan_add(n, data, block_sums); });
}

extern "C" void RS_HOST_FN(rs_host_write_offsets)(long long grid, long long block,
                                                  long long shared, long long m,
                                                  const long long* offsets, offset_t* c_rows,
                                                  int base, unsigned long long* error) {
  rs_host::launch(grid, block, shared,
                  [&] { rs_write_offsets(m, offsets, c_rows, base, error); });
}

extern "C" void RS_HOST_FN(rs_host_write_offsets_wide)(long long grid, long long block,
                                                       long long shared, long long m,
                                                       const long long* offsets, long long* c_rows,
                                                       int base, unsigned long long* error) {
  rs_host::launch(grid, block, shared,
                  [&] { rs_write_offsets_wide(m, offsets, c_rows, base, error); });
}

extern "C" void RS_HOST_FN(rs_host_write_offsets_narrow)(long long grid, long long block,
                                                         long long shared, long long m,
                                                         const long long* offsets, int* c_rows,
                                                         int base, unsigned long long* error) {
  rs_host::launch(grid, block, shared,
                  [&] { rs_write_offsets_narrow(m, offsets, c_rows, base, error); });
}

extern "C" void RS_HOST_FN(rs_host_bin_count)(long long grid, long long block, long long shared,
                                              long long m, const long long* row_size,
                                              const offset_t* a_rows, int a_base,
                                              const long long* bounds, int nb,
                                              long long* bin_size, long long* max_size) {
  rs_host::launch(grid, block, shared, [&] {
    rs_bin_count(m, row_size, a_rows, a_base, bounds, nb, bin_size, max_size);
  });
}

extern "C" void RS_HOST_FN(rs_host_bin_fill)(long long grid, long long block, long long shared,
                                             long long m, const long long* row_size,
                                             const offset_t* a_rows, int a_base,
                                             const long long* bounds, int nb,
                                             const long long* bin_offset, long long* bin_cursor,
                                             unsigned int* bins) {
  rs_host::launch(grid, block, shared, [&] {
    rs_bin_fill(m, row_size, a_rows, a_base, bounds, nb, bin_offset, bin_cursor, bins);
  });
}
