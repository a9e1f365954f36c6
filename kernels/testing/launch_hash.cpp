// Host entry points for kernels/setup.cu, kernels/symbolic.cu and
// kernels/numeric.cu (see kernels/README.md, "Host emulation").
// kernels/host-tests/build.rs compiles this file once per variant, after
// portability.h and every kernels/*.cu; RS_HOST_FN appends the variant's
// suffix. Each entry point takes the launch geometry (grid, block, dynamic
// shared bytes) and then the kernel's arguments, as host pointers;
// kernels/host-tests/src/hash.rs declares them.

extern "C" void RS_HOST_FN(rs_host_setup)(long long grid, long long block, long long shared,
                                          rs_csr a, rs_csr b, long long* row_size,
                                          unsigned long long* error) {
  rs_host::launch(grid, block, shared, [&] { rs_setup(a, b, row_size, error); });
}

extern "C" void RS_HOST_FN(rs_host_validate)(long long grid, long long block, long long shared,
                                             rs_csr x, int code_offsets, int code_cols,
                                             unsigned long long* error, long long* flags) {
  rs_host::launch(grid, block, shared,
                  [&] { rs_validate(x, code_offsets, code_cols, error, flags); });
}

extern "C" void RS_HOST_FN(rs_host_symbolic_shared)(
    long long grid, long long block, long long shared, const unsigned* rows, long long count,
    rs_csr a, rs_csr b, long long* row_size, long long table_size, int team, int group,
    long long spill_limit, unsigned* spill_rows, long long* spill_count) {
  rs_host::launch(grid, block, shared, [&] {
    rs_symbolic_shared(rows, count, a, b, row_size, table_size, team, group, spill_limit,
                       spill_rows, spill_count);
  });
}

extern "C" void RS_HOST_FN(rs_host_symbolic_global)(long long grid, long long block,
                                                    long long shared, const unsigned* rows,
                                                    long long count, rs_csr a, rs_csr b,
                                                    long long* row_size,
                                                    const long long* table_offsets,
                                                    index_t* tables) {
  rs_host::launch(grid, block, shared, [&] {
    rs_symbolic_global(rows, count, a, b, row_size, table_offsets, tables);
  });
}

extern "C" void RS_HOST_FN(rs_host_numeric_shared)(
    long long grid, long long block, long long shared, const unsigned* rows, long long count,
    rs_csr a, rs_csr b, const value_t* alpha, const value_t* beta, const long long* c_offsets,
    index_t* c_cols, value_t* c_vals, int c_base, long long table_size, int team, int group,
    int deterministic) {
  rs_host::launch(grid, block, shared, [&] {
    rs_numeric_shared(rows, count, a, b, alpha, beta, c_offsets, c_cols, c_vals, c_base,
                      table_size, team, group, deterministic);
  });
}

extern "C" void RS_HOST_FN(rs_host_numeric_global)(
    long long grid, long long block, long long shared, const unsigned* rows, long long count,
    rs_csr a, rs_csr b, const value_t* alpha, const value_t* beta, const long long* c_offsets,
    index_t* c_cols, value_t* c_vals, int c_base, const long long* table_offsets,
    index_t* key_tables, value_t* val_tables, int deterministic) {
  rs_host::launch(grid, block, shared, [&] {
    rs_numeric_global(rows, count, a, b, alpha, beta, c_offsets, c_cols, c_vals, c_base,
                      table_offsets, key_tables, val_tables, deterministic);
  });
}

extern "C" void RS_HOST_FN(rs_host_numeric_single)(long long grid, long long block,
                                                   long long shared, const unsigned* rows,
                                                   long long count, rs_csr a, rs_csr b,
                                                   const value_t* alpha, const value_t* beta,
                                                   const long long* c_offsets, index_t* c_cols,
                                                   value_t* c_vals, int c_base) {
  rs_host::launch(grid, block, shared, [&] {
    rs_numeric_single(rows, count, a, b, alpha, beta, c_offsets, c_cols, c_vals, c_base);
  });
}
