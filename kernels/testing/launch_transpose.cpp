// Host entry points for kernels/transpose.cu (see kernels/README.md, "Host
// emulation"): the launch geometry (grid, block, dynamic shared bytes), then
// the kernel's arguments, as host pointers.

extern "C" void RS_HOST_FN(rs_host_transpose_count)(long long grid, long long block,
                                                    long long shared, rs_csr x,
                                                    long long* counts) {
  rs_host::launch(grid, block, shared, [&] { rs_transpose_count(x, counts); });
}

extern "C" void RS_HOST_FN(rs_host_transpose_scatter)(long long grid, long long block,
                                                      long long shared, rs_csr x,
                                                      long long* cursor, index_t* t_cols,
                                                      offset_t* perm) {
  rs_host::launch(grid, block, shared, [&] { rs_transpose_scatter(x, cursor, t_cols, perm); });
}

extern "C" void RS_HOST_FN(rs_host_transpose_sort_rows)(long long grid, long long block,
                                                        long long shared, long long nrows,
                                                        const offset_t* rows, int base,
                                                        offset_t* perm, index_t* cols,
                                                        int long_rows) {
  rs_host::launch(grid, block, shared,
                  [&] { rs_transpose_sort_rows(nrows, rows, base, perm, cols, long_rows); });
}

extern "C" void RS_HOST_FN(rs_host_transpose_gather)(long long grid, long long block,
                                                     long long shared, long long nnz,
                                                     const offset_t* perm, const value_t* src,
                                                     value_t* dst, int conjugate) {
  rs_host::launch(grid, block, shared,
                  [&] { rs_transpose_gather(nnz, perm, src, dst, conjugate); });
}
