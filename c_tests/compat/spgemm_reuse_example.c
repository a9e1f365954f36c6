/*
 * A cuSPARSE reuse-API SpGEMM program (cusparseSpGEMMreuse_*), as one is
 * written for cuSPARSE, built UNCHANGED against rusparse's cusparse.h.
 *
 *   C = alpha * A * B + beta * C, A 5 x 4, B 4 x 6, f64, one-based indices,
 *   CUSPARSE_SPGEMM_CSR_ALG_DETERMINITIC (cuSPARSE's spelling).
 *
 * The structure of C is computed once; reuse_compute then runs three
 * times: with A's first values, after A's values change on the same
 * pattern, and with beta = 0.5 (C's previous values folded in). C keeps
 * the two entries that cancel to 0.0, as cuSPARSE does.
 */
#include <cuda_runtime.h>
#include <cusparse.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(call)                                                              \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,         \
              cudaGetErrorString(e_));                                             \
      return EXIT_FAILURE;                                                         \
    }                                                                              \
  } while (0)

#define SPARSE_OK(call)                                                            \
  do {                                                                             \
    cusparseStatus_t s_ = (call);                                                  \
    if (s_ != CUSPARSE_STATUS_SUCCESS) {                                           \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,    \
              cusparseGetErrorName(s_), cusparseGetErrorString(s_));               \
      return EXIT_FAILURE;                                                         \
    }                                                                              \
  } while (0)

enum { M = 5, K = 4, N = 6, A_NNZ = 8, B_NNZ = 8, C_NNZ = 14 };

static const int a_rows[M + 1] = {1, 3, 4, 6, 6, 9};
static const int a_cols[A_NNZ] = {1, 3, 2, 1, 4, 2, 3, 4};
static const double a_vals1[A_NNZ] = {2, -1, 3, 1, 4, 5, 2, -3};
/* The same pattern, every value plus one. */
static const double a_vals2[A_NNZ] = {3, 0, 4, 2, 5, 6, 3, -2};
static const int b_rows[K + 1] = {1, 3, 5, 7, 9};
static const int b_cols[B_NNZ] = {1, 4, 2, 5, 3, 6, 1, 6};
static const double b_vals[B_NNZ] = {1, 2, -2, 1, 3, 1, 4, -1};

static const int c_rows[M + 1] = {1, 5, 7, 10, 10, 15};
static const int c_cols[C_NNZ] = {1, 3, 4, 6, 2, 5, 1, 4, 6, 1, 2, 3, 5, 6};
/* A1 * B, A2 * B, then A2 * B + 0.5 * (A2 * B). */
static const double c_vals[3][C_NNZ] = {
    {2, -3, 4, -1, -6, 3, 17, 2, -4, -12, -10, 6, 5, 5},
    {3, 0, 6, 0, -8, 4, 22, 4, -5, -8, -12, 9, 6, 5},
    {4.5, 0, 9, 0, -12, 6, 33, 6, -7.5, -12, -18, 13.5, 9, 7.5}};

static int same_structure(const int* rows, const int* cols) {
  for (int i = 0; i <= M; i++)
    if (rows[i] != c_rows[i]) return 0;
  for (int k = 0; k < C_NNZ; k++)
    if (cols[k] != c_cols[k]) return 0;
  return 1;
}

int main(void) {
  int *d_a_rows, *d_a_cols, *d_b_rows, *d_b_cols, *d_c_rows, *d_c_cols;
  double *d_a_vals, *d_b_vals, *d_c_vals;
  CUDA_OK(cudaMalloc((void**)&d_a_rows, sizeof a_rows));
  CUDA_OK(cudaMalloc((void**)&d_a_cols, sizeof a_cols));
  CUDA_OK(cudaMalloc((void**)&d_a_vals, sizeof a_vals1));
  CUDA_OK(cudaMalloc((void**)&d_b_rows, sizeof b_rows));
  CUDA_OK(cudaMalloc((void**)&d_b_cols, sizeof b_cols));
  CUDA_OK(cudaMalloc((void**)&d_b_vals, sizeof b_vals));
  CUDA_OK(cudaMemcpy(d_a_rows, a_rows, sizeof a_rows, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_a_cols, a_cols, sizeof a_cols, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_a_vals, a_vals1, sizeof a_vals1, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_b_rows, b_rows, sizeof b_rows, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_b_cols, b_cols, sizeof b_cols, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_b_vals, b_vals, sizeof b_vals, cudaMemcpyHostToDevice));

  cusparseHandle_t handle;
  cusparseSpMatDescr_t A, B, C;
  cusparseSpGEMMDescr_t desc;
  const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  const cusparseSpGEMMAlg_t alg = CUSPARSE_SPGEMM_CSR_ALG_DETERMINITIC;
  SPARSE_OK(cusparseCreate(&handle));
  SPARSE_OK(cusparseCreateCsr(&A, M, K, A_NNZ, d_a_rows, d_a_cols, d_a_vals, CUSPARSE_INDEX_32I,
                              CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ONE, CUDA_R_64F));
  SPARSE_OK(cusparseCreateCsr(&B, K, N, B_NNZ, d_b_rows, d_b_cols, d_b_vals, CUSPARSE_INDEX_32I,
                              CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ONE, CUDA_R_64F));
  SPARSE_OK(cusparseCreateCsr(&C, M, N, 0, NULL, NULL, NULL, CUSPARSE_INDEX_32I,
                              CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ONE, CUDA_R_64F));
  SPARSE_OK(cusparseSpGEMM_createDescr(&desc));

  /* Each phase: a size query with NULL buffers, then the real call. */
  size_t size1 = 0, size2 = 0, size3 = 0, size4 = 0, size5 = 0;
  void *buf1 = NULL, *buf2 = NULL, *buf3 = NULL, *buf4 = NULL, *buf5 = NULL;
  SPARSE_OK(cusparseSpGEMMreuse_workEstimation(handle, op, op, A, B, C, alg, desc, &size1, NULL));
  CUDA_OK(cudaMalloc(&buf1, size1));
  SPARSE_OK(cusparseSpGEMMreuse_workEstimation(handle, op, op, A, B, C, alg, desc, &size1, buf1));
  SPARSE_OK(cusparseSpGEMMreuse_nnz(handle, op, op, A, B, C, alg, desc, &size2, NULL, &size3,
                                    NULL, &size4, NULL));
  CUDA_OK(cudaMalloc(&buf2, size2));
  CUDA_OK(cudaMalloc(&buf3, size3));
  CUDA_OK(cudaMalloc(&buf4, size4));
  SPARSE_OK(cusparseSpGEMMreuse_nnz(handle, op, op, A, B, C, alg, desc, &size2, buf2, &size3,
                                    buf3, &size4, buf4));
  /* buffer 1 and 2 are no longer needed after reuse_nnz, as with cuSPARSE */
  CUDA_OK(cudaFree(buf1));
  CUDA_OK(cudaFree(buf2));

  int64_t rows, cols, nnz;
  SPARSE_OK(cusparseSpMatGetSize(C, &rows, &cols, &nnz));
  if (rows != M || cols != N || nnz != C_NNZ) {
    fprintf(stderr, "C is %lld x %lld with %lld entries, expected %d x %d with %d\n",
            (long long)rows, (long long)cols, (long long)nnz, M, N, C_NNZ);
    return EXIT_FAILURE;
  }
  CUDA_OK(cudaMalloc((void**)&d_c_rows, (M + 1) * sizeof(int)));
  CUDA_OK(cudaMalloc((void**)&d_c_cols, C_NNZ * sizeof(int)));
  CUDA_OK(cudaMalloc((void**)&d_c_vals, C_NNZ * sizeof(double)));
  CUDA_OK(cudaMemset(d_c_vals, 0, C_NNZ * sizeof(double)));
  SPARSE_OK(cusparseCsrSetPointers(C, d_c_rows, d_c_cols, d_c_vals));

  SPARSE_OK(cusparseSpGEMMreuse_copy(handle, op, op, A, B, C, alg, desc, &size5, NULL));
  CUDA_OK(cudaMalloc(&buf5, size5));
  SPARSE_OK(cusparseSpGEMMreuse_copy(handle, op, op, A, B, C, alg, desc, &size5, buf5));
  CUDA_OK(cudaFree(buf3));

  int h_rows[M + 1], h_cols[C_NNZ];
  CUDA_OK(cudaMemcpy(h_rows, d_c_rows, sizeof h_rows, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(h_cols, d_c_cols, sizeof h_cols, cudaMemcpyDeviceToHost));
  if (!same_structure(h_rows, h_cols)) {
    fprintf(stderr, "spgemm_reuse_example: C's structure differs from the expected one\n");
    return EXIT_FAILURE;
  }

  const double one = 1.0, zero = 0.0, half = 0.5;
  const double* betas[3] = {&zero, &zero, &half};
  for (int run = 0; run < 3; run++) {
    if (run == 1)
      CUDA_OK(cudaMemcpy(d_a_vals, a_vals2, sizeof a_vals2, cudaMemcpyHostToDevice));
    SPARSE_OK(cusparseSpGEMMreuse_compute(handle, op, op, &one, A, B, betas[run], C, CUDA_R_64F,
                                          alg, desc));
    double h_vals[C_NNZ];
    CUDA_OK(cudaMemcpy(h_vals, d_c_vals, sizeof h_vals, cudaMemcpyDeviceToHost));
    for (int k = 0; k < C_NNZ; k++) {
      if (h_vals[k] != c_vals[run][k]) {
        fprintf(stderr, "spgemm_reuse_example: run %d: C value %d is %g, expected %g\n", run, k,
                h_vals[k], c_vals[run][k]);
        return EXIT_FAILURE;
      }
    }
  }

  SPARSE_OK(cusparseSpGEMM_destroyDescr(desc));
  SPARSE_OK(cusparseDestroySpMat(A));
  SPARSE_OK(cusparseDestroySpMat(B));
  SPARSE_OK(cusparseDestroySpMat(C));
  SPARSE_OK(cusparseDestroy(handle));
  CUDA_OK(cudaFree(buf4));
  CUDA_OK(cudaFree(buf5));
  void* arrays[] = {d_a_rows, d_a_cols, d_a_vals, d_b_rows, d_b_cols,
                    d_b_vals, d_c_rows, d_c_cols, d_c_vals};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) CUDA_OK(cudaFree(arrays[i]));
  printf("spgemm_reuse_example test PASSED\n");
  return EXIT_SUCCESS;
}
