/*
 * The three documented call sequences of cuSPARSE's generic SpGEMM API,
 * written from cuSPARSE's public documentation as a cuSPARSE user writes
 * them, and built here UNCHANGED against rusparse's cusparse.h (in C and,
 * copied to a .cpp, in C++11):
 *
 *   1. three phases: workEstimation, compute, copy (with the two-call
 *      buffer protocol), for every cusparseSpGEMMAlg_t value;
 *   2. memory estimation (ALG3): workEstimation, getNumProducts,
 *      estimateMemory (size of buffer 3, then the size of buffer 2 for a
 *      chunk fraction), compute, copy;
 *   3. reuse: reuse_workEstimation, reuse_nnz, reuse_copy, reuse_compute,
 *      then reuse_compute again after A's values change.
 *
 * What real programs do and cuSPARSE accepts is done here too:
 *   - B is declared with nnz = 9 while its row offsets end at 8, as in
 *     NVIDIA's published SpGEMM sample: the entry past the offsets is spare
 *     room and must never be read (it holds an out-of-range column and a
 *     NaN here, so reading it would fail or poison C);
 *   - C is created with its row-offset array (the sample's way) in some
 *     flows and with NULL (set after compute) in others;
 *   - alpha and beta on the host and, with CUSPARSE_POINTER_MODE_DEVICE,
 *     in "device" memory; computeType equal to the value type.
 *
 * Every C is compared with a product computed here from the arrays.
 */
#include <cuda_runtime_api.h>
#include <cusparse.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_CUDA(func)                                                          \
  {                                                                               \
    cudaError_t status_ = (func);                                                 \
    if (status_ != cudaSuccess) {                                                 \
      printf("CUDA API failed at line %d with error: %s (%d)\n", __LINE__,        \
             cudaGetErrorString(status_), status_);                               \
      return EXIT_FAILURE;                                                        \
    }                                                                             \
  }

#define CHECK_CUSPARSE(func)                                                      \
  {                                                                               \
    cusparseStatus_t status_ = (func);                                            \
    if (status_ != CUSPARSE_STATUS_SUCCESS) {                                     \
      printf("CUSPARSE API failed at line %d with error: %s (%d)\n", __LINE__,    \
             cusparseGetErrorString(status_), status_);                           \
      return EXIT_FAILURE;                                                        \
    }                                                                             \
  }

#define N 4 /* A, B and C are N x N */

/* A: 9 entries. */
static const int hA_offsets[N + 1] = {0, 3, 4, 7, 9};
static const int hA_columns[9] = {0, 2, 3, 1, 0, 2, 3, 1, 3};
static const float hA_values[9] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f};
/* B: declared nnz 9, offsets end at 8; entry 8 is spare room. */
#define B_NNZ_DECLARED 9
static const int hB_offsets[N + 1] = {0, 2, 4, 7, 8};
static const int hB_columns[B_NNZ_DECLARED] = {0, 3, 1, 3, 0, 1, 2, 1, 999};
static const float hB_values[B_NNZ_DECLARED] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f,
                                                6.0f, 7.0f, 8.0f, 0.0f};

/* The expected C = alpha * A * B + beta * C_old (C_old on C's pattern, in
 * `old`, or NULL), dense; `pattern[i][j]` is 1 where A * B has a product. */
static void expected_product(const float* a_values, float alpha, float beta, const float* old,
                             const int* c_offsets, const int* c_columns, float dense[N][N],
                             int pattern[N][N]) {
  memset(dense, 0, sizeof(float) * N * N);
  memset(pattern, 0, sizeof(int) * N * N);
  for (int i = 0; i < N; i++)
    for (int k = hA_offsets[i]; k < hA_offsets[i + 1]; k++) {
      int r = hA_columns[k];
      for (int l = hB_offsets[r]; l < hB_offsets[r + 1]; l++) {
        dense[i][hB_columns[l]] += alpha * a_values[k] * hB_values[l];
        pattern[i][hB_columns[l]] = 1;
      }
    }
  if (old != NULL && beta != 0.0f)
    for (int i = 0; i < N; i++)
      for (int k = c_offsets[i]; k < c_offsets[i + 1]; k++)
        dense[i][c_columns[k]] += beta * old[k];
}

/* Compares C's arrays (host copies) with the expected product; prints the
 * first difference. Returns 1 when they agree. */
static int matches(const char* flow, const int* offsets, const int* columns, const float* values,
                   const float* a_values, float alpha, float beta, const float* old) {
  float dense[N][N];
  int pattern[N][N];
  expected_product(a_values, alpha, beta, old, offsets, columns, dense, pattern);
  int k = 0;
  if (offsets[0] != 0) {
    printf("%s: C's row offsets start at %d\n", flow, offsets[0]);
    return 0;
  }
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < N; j++) {
      if (!pattern[i][j]) continue;
      if (k >= offsets[i + 1] || columns[k] != j) {
        printf("%s: C(%d, %d) missing (entry %d, row end %d)\n", flow, i, j, k, offsets[i + 1]);
        return 0;
      }
      if (fabsf(values[k] - dense[i][j]) > 1e-5f * (1.0f + fabsf(dense[i][j]))) {
        printf("%s: C(%d, %d) = %g, expected %g\n", flow, i, j, values[k], dense[i][j]);
        return 0;
      }
      k++;
    }
    if (offsets[i + 1] != k) {
      printf("%s: row %d of C ends at %d, expected %d\n", flow, i, offsets[i + 1], k);
      return 0;
    }
  }
  return 1;
}

/* "Device" copies of A and B (B with its spare entry) and the handle. */
typedef struct {
  cusparseHandle_t handle;
  int *dA_offsets, *dA_columns, *dB_offsets, *dB_columns;
  float *dA_values, *dB_values;
  cusparseSpMatDescr_t matA, matB;
} Problem;

static int setup(Problem* p) {
  CHECK_CUDA(cudaMalloc((void**)&p->dA_offsets, (N + 1) * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&p->dA_columns, 9 * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&p->dA_values, 9 * sizeof(float)))
  CHECK_CUDA(cudaMalloc((void**)&p->dB_offsets, (N + 1) * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&p->dB_columns, B_NNZ_DECLARED * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&p->dB_values, B_NNZ_DECLARED * sizeof(float)))
  CHECK_CUDA(cudaMemcpy(p->dA_offsets, hA_offsets, sizeof hA_offsets, cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(p->dA_columns, hA_columns, sizeof hA_columns, cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(p->dA_values, hA_values, sizeof hA_values, cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(p->dB_offsets, hB_offsets, sizeof hB_offsets, cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(p->dB_columns, hB_columns, sizeof hB_columns, cudaMemcpyHostToDevice))
  {
    /* The spare value is a NaN: a product that read it would show it. */
    float values[B_NNZ_DECLARED];
    memcpy(values, hB_values, sizeof values);
    values[B_NNZ_DECLARED - 1] = nanf("");
    CHECK_CUDA(cudaMemcpy(p->dB_values, values, sizeof values, cudaMemcpyHostToDevice))
  }
  CHECK_CUSPARSE(cusparseCreate(&p->handle))
  CHECK_CUSPARSE(cusparseCreateCsr(&p->matA, N, N, 9, p->dA_offsets, p->dA_columns, p->dA_values,
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F))
  CHECK_CUSPARSE(cusparseCreateCsr(&p->matB, N, N, B_NNZ_DECLARED, p->dB_offsets, p->dB_columns,
                                   p->dB_values, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F))
  return EXIT_SUCCESS;
}

static int teardown(Problem* p) {
  CHECK_CUSPARSE(cusparseDestroySpMat(p->matA))
  CHECK_CUSPARSE(cusparseDestroySpMat(p->matB))
  CHECK_CUSPARSE(cusparseDestroy(p->handle))
  CHECK_CUDA(cudaFree(p->dA_offsets))
  CHECK_CUDA(cudaFree(p->dA_columns))
  CHECK_CUDA(cudaFree(p->dA_values))
  CHECK_CUDA(cudaFree(p->dB_offsets))
  CHECK_CUDA(cudaFree(p->dB_columns))
  CHECK_CUDA(cudaFree(p->dB_values))
  return EXIT_SUCCESS;
}

/* C's arrays read back to the host. */
typedef struct {
  int offsets[N + 1];
  int columns[N * N];
  float values[N * N];
} HostC;

static int read_back(HostC* h, const int* d_offsets, const int* d_columns, const float* d_values,
                     int64_t nnz) {
  CHECK_CUDA(cudaMemcpy(h->offsets, d_offsets, sizeof h->offsets, cudaMemcpyDeviceToHost))
  CHECK_CUDA(cudaMemcpy(h->columns, d_columns, (size_t)nnz * sizeof(int), cudaMemcpyDeviceToHost))
  CHECK_CUDA(cudaMemcpy(h->values, d_values, (size_t)nnz * sizeof(float), cudaMemcpyDeviceToHost))
  return EXIT_SUCCESS;
}

/* 1. workEstimation, compute, copy. `c_offsets_first`: C is created with
 * its row-offset array (else NULL, set after compute). `device_scalars`:
 * alpha and beta live in device memory (CUSPARSE_POINTER_MODE_DEVICE).
 * 2. With `chunk_fraction` > 0 (ALG3), the memory estimate between work
 * estimation and compute: getNumProducts, estimateMemory for the size of
 * buffer 3, then with buffer 3 for the size of buffer 2, which compute
 * then gets without a size query of its own. */
static int three_phases(cusparseSpGEMMAlg_t alg, int c_offsets_first, int device_scalars,
                        float chunk_fraction) {
  char flow[128];
  snprintf(flow, sizeof flow, "three phases, alg %d%s%s", (int)alg,
           c_offsets_first ? ", C's offsets first" : "", device_scalars ? ", device scalars" : "");
  if (chunk_fraction > 0.0f)
    snprintf(flow, sizeof flow, "ALG3 memory estimate, chunk_fraction %.2f", chunk_fraction);
  Problem p;
  if (setup(&p) != EXIT_SUCCESS) return EXIT_FAILURE;
  cusparseOperation_t opA = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseOperation_t opB = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cudaDataType computeType = CUDA_R_32F;
  float alpha = 1.5f, beta = 0.0f;
  const void *pAlpha = &alpha, *pBeta = &beta;
  float* dScalars = NULL;
  if (device_scalars) {
    float host[2] = {alpha, beta};
    CHECK_CUDA(cudaMalloc((void**)&dScalars, sizeof host))
    CHECK_CUDA(cudaMemcpy(dScalars, host, sizeof host, cudaMemcpyHostToDevice))
    CHECK_CUSPARSE(cusparseSetPointerMode(p.handle, CUSPARSE_POINTER_MODE_DEVICE))
    pAlpha = dScalars;
    pBeta = dScalars + 1;
  }
  int *dC_offsets = NULL, *dC_columns = NULL;
  float* dC_values = NULL;
  CHECK_CUDA(cudaMalloc((void**)&dC_offsets, (N + 1) * sizeof(int)))
  cusparseSpMatDescr_t matC;
  CHECK_CUSPARSE(cusparseCreateCsr(&matC, N, N, 0, c_offsets_first ? dC_offsets : NULL, NULL, NULL,
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F))
  cusparseSpGEMMDescr_t spgemmDesc;
  CHECK_CUSPARSE(cusparseSpGEMM_createDescr(&spgemmDesc))
  void *dBuffer1 = NULL, *dBuffer2 = NULL;
  size_t bufferSize1 = 0, bufferSize2 = 0;
  CHECK_CUSPARSE(cusparseSpGEMM_workEstimation(p.handle, opA, opB, pAlpha, p.matA, p.matB, pBeta,
                                               matC, computeType, alg, spgemmDesc, &bufferSize1,
                                               NULL))
  CHECK_CUDA(cudaMalloc(&dBuffer1, bufferSize1))
  CHECK_CUSPARSE(cusparseSpGEMM_workEstimation(p.handle, opA, opB, pAlpha, p.matA, p.matB, pBeta,
                                               matC, computeType, alg, spgemmDesc, &bufferSize1,
                                               dBuffer1))
  if (chunk_fraction > 0.0f) {
    void* dBuffer3 = NULL;
    size_t bufferSize3 = 0;
    int64_t num_prods = 0, want_prods = 0;
    CHECK_CUSPARSE(cusparseSpGEMM_getNumProducts(spgemmDesc, &num_prods))
    /* Each entry (i, r) of A meets row r of B. */
    for (int k = 0; k < 9; k++)
      want_prods += hB_offsets[hA_columns[k] + 1] - hB_offsets[hA_columns[k]];
    if (num_prods != want_prods) {
      printf("%s: %lld products, expected %lld\n", flow, (long long)num_prods,
             (long long)want_prods);
      return EXIT_FAILURE;
    }
    CHECK_CUSPARSE(cusparseSpGEMM_estimateMemory(p.handle, opA, opB, pAlpha, p.matA, p.matB, pBeta,
                                                 matC, computeType, alg, spgemmDesc,
                                                 chunk_fraction, &bufferSize3, NULL, NULL))
    CHECK_CUDA(cudaMalloc(&dBuffer3, bufferSize3))
    CHECK_CUSPARSE(cusparseSpGEMM_estimateMemory(p.handle, opA, opB, pAlpha, p.matA, p.matB, pBeta,
                                                 matC, computeType, alg, spgemmDesc,
                                                 chunk_fraction, &bufferSize3, dBuffer3,
                                                 &bufferSize2))
    CHECK_CUDA(cudaFree(dBuffer3))
  } else {
    CHECK_CUSPARSE(cusparseSpGEMM_compute(p.handle, opA, opB, pAlpha, p.matA, p.matB, pBeta, matC,
                                          computeType, alg, spgemmDesc, &bufferSize2, NULL))
  }
  CHECK_CUDA(cudaMalloc(&dBuffer2, bufferSize2))
  CHECK_CUSPARSE(cusparseSpGEMM_compute(p.handle, opA, opB, pAlpha, p.matA, p.matB, pBeta, matC,
                                        computeType, alg, spgemmDesc, &bufferSize2, dBuffer2))
  int64_t rows, cols, nnz;
  CHECK_CUSPARSE(cusparseSpMatGetSize(matC, &rows, &cols, &nnz))
  if (rows != N || cols != N || nnz <= 0 || nnz > N * N) {
    printf("%s: C is %lld x %lld with %lld entries\n", flow, (long long)rows, (long long)cols,
           (long long)nnz);
    return EXIT_FAILURE;
  }
  CHECK_CUDA(cudaMalloc((void**)&dC_columns, (size_t)nnz * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&dC_values, (size_t)nnz * sizeof(float)))
  CHECK_CUSPARSE(cusparseCsrSetPointers(matC, dC_offsets, dC_columns, dC_values))
  CHECK_CUSPARSE(cusparseSpGEMM_copy(p.handle, opA, opB, pAlpha, p.matA, p.matB, pBeta, matC,
                                     computeType, alg, spgemmDesc))
  CHECK_CUSPARSE(cusparseSpGEMM_destroyDescr(spgemmDesc))
  CHECK_CUSPARSE(cusparseDestroySpMat(matC))
  HostC h;
  if (read_back(&h, dC_offsets, dC_columns, dC_values, nnz) != EXIT_SUCCESS) return EXIT_FAILURE;
  int ok = matches(flow, h.offsets, h.columns, h.values, hA_values, alpha, beta, NULL);
  CHECK_CUDA(cudaFree(dBuffer1))
  CHECK_CUDA(cudaFree(dBuffer2))
  CHECK_CUDA(cudaFree(dC_offsets))
  CHECK_CUDA(cudaFree(dC_columns))
  CHECK_CUDA(cudaFree(dC_values))
  CHECK_CUDA(cudaFree(dScalars))
  if (teardown(&p) != EXIT_SUCCESS || !ok) return EXIT_FAILURE;
  printf("%s: PASSED\n", flow);
  return EXIT_SUCCESS;
}

/* 3. The reuse API: structure once, values twice (A's values change). */
static int reuse(cusparseSpGEMMAlg_t alg) {
  char flow[64];
  snprintf(flow, sizeof flow, "reuse, alg %d", (int)alg);
  Problem p;
  if (setup(&p) != EXIT_SUCCESS) return EXIT_FAILURE;
  cusparseOperation_t opA = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseOperation_t opB = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cudaDataType computeType = CUDA_R_32F;
  float alpha = 1.0f, beta = 0.0f;
  int* dC_offsets;
  CHECK_CUDA(cudaMalloc((void**)&dC_offsets, (N + 1) * sizeof(int)))
  cusparseSpMatDescr_t matC;
  CHECK_CUSPARSE(cusparseCreateCsr(&matC, N, N, 0, dC_offsets, NULL, NULL, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F))
  cusparseSpGEMMDescr_t spgemmDesc;
  CHECK_CUSPARSE(cusparseSpGEMM_createDescr(&spgemmDesc))
  void *dBuffer1 = NULL, *dBuffer2 = NULL, *dBuffer3 = NULL, *dBuffer4 = NULL, *dBuffer5 = NULL;
  size_t bufferSize1 = 0, bufferSize2 = 0, bufferSize3 = 0, bufferSize4 = 0, bufferSize5 = 0;
  CHECK_CUSPARSE(cusparseSpGEMMreuse_workEstimation(p.handle, opA, opB, p.matA, p.matB, matC, alg,
                                                    spgemmDesc, &bufferSize1, NULL))
  CHECK_CUDA(cudaMalloc(&dBuffer1, bufferSize1))
  CHECK_CUSPARSE(cusparseSpGEMMreuse_workEstimation(p.handle, opA, opB, p.matA, p.matB, matC, alg,
                                                    spgemmDesc, &bufferSize1, dBuffer1))
  CHECK_CUSPARSE(cusparseSpGEMMreuse_nnz(p.handle, opA, opB, p.matA, p.matB, matC, alg, spgemmDesc,
                                         &bufferSize2, NULL, &bufferSize3, NULL, &bufferSize4,
                                         NULL))
  CHECK_CUDA(cudaMalloc(&dBuffer2, bufferSize2))
  CHECK_CUDA(cudaMalloc(&dBuffer3, bufferSize3))
  CHECK_CUDA(cudaMalloc(&dBuffer4, bufferSize4))
  CHECK_CUSPARSE(cusparseSpGEMMreuse_nnz(p.handle, opA, opB, p.matA, p.matB, matC, alg, spgemmDesc,
                                         &bufferSize2, dBuffer2, &bufferSize3, dBuffer3,
                                         &bufferSize4, dBuffer4))
  CHECK_CUDA(cudaFree(dBuffer1))
  CHECK_CUDA(cudaFree(dBuffer2))
  int64_t rows, cols, nnz;
  CHECK_CUSPARSE(cusparseSpMatGetSize(matC, &rows, &cols, &nnz))
  int* dC_columns;
  float* dC_values;
  CHECK_CUDA(cudaMalloc((void**)&dC_columns, (size_t)nnz * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&dC_values, (size_t)nnz * sizeof(float)))
  CHECK_CUSPARSE(cusparseCsrSetPointers(matC, dC_offsets, dC_columns, dC_values))
  CHECK_CUSPARSE(cusparseSpGEMMreuse_copy(p.handle, opA, opB, p.matA, p.matB, matC, alg,
                                          spgemmDesc, &bufferSize5, NULL))
  CHECK_CUDA(cudaMalloc(&dBuffer5, bufferSize5))
  CHECK_CUSPARSE(cusparseSpGEMMreuse_copy(p.handle, opA, opB, p.matA, p.matB, matC, alg,
                                          spgemmDesc, &bufferSize5, dBuffer5))
  CHECK_CUDA(cudaFree(dBuffer3))
  CHECK_CUSPARSE(cusparseSpGEMMreuse_compute(p.handle, opA, opB, &alpha, p.matA, p.matB, &beta,
                                             matC, computeType, alg, spgemmDesc))
  HostC h;
  if (read_back(&h, dC_offsets, dC_columns, dC_values, nnz) != EXIT_SUCCESS) return EXIT_FAILURE;
  int ok = matches(flow, h.offsets, h.columns, h.values, hA_values, alpha, beta, NULL);
  /* New values of A (same pattern), alpha 2 and beta 1: C gets the new
   * product plus what it held. */
  float newA[9];
  for (int k = 0; k < 9; k++) newA[k] = (float)(k % 4) - 1.5f;
  CHECK_CUDA(cudaMemcpy(p.dA_values, newA, sizeof newA, cudaMemcpyHostToDevice))
  float old[N * N];
  memcpy(old, h.values, sizeof old);
  alpha = 2.0f;
  beta = 1.0f;
  CHECK_CUSPARSE(cusparseSpGEMMreuse_compute(p.handle, opA, opB, &alpha, p.matA, p.matB, &beta,
                                             matC, computeType, alg, spgemmDesc))
  if (read_back(&h, dC_offsets, dC_columns, dC_values, nnz) != EXIT_SUCCESS) return EXIT_FAILURE;
  ok = ok && matches(flow, h.offsets, h.columns, h.values, newA, alpha, beta, old);
  CHECK_CUSPARSE(cusparseSpGEMM_destroyDescr(spgemmDesc))
  CHECK_CUSPARSE(cusparseDestroySpMat(matC))
  CHECK_CUDA(cudaFree(dBuffer4))
  CHECK_CUDA(cudaFree(dBuffer5))
  CHECK_CUDA(cudaFree(dC_offsets))
  CHECK_CUDA(cudaFree(dC_columns))
  CHECK_CUDA(cudaFree(dC_values))
  if (teardown(&p) != EXIT_SUCCESS || !ok) return EXIT_FAILURE;
  printf("%s: PASSED\n", flow);
  return EXIT_SUCCESS;
}

int main(void) {
  const cusparseSpGEMMAlg_t algs[] = {
      CUSPARSE_SPGEMM_DEFAULT, CUSPARSE_SPGEMM_CSR_ALG_DETERMINITIC,
      CUSPARSE_SPGEMM_CSR_ALG_NONDETERMINITIC, CUSPARSE_SPGEMM_ALG1, CUSPARSE_SPGEMM_ALG2,
      CUSPARSE_SPGEMM_ALG3};
  int failed = 0;
  for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
    failed |= three_phases(algs[i], (int)(i % 2), 0, 0.0f) != EXIT_SUCCESS;
  }
  failed |= three_phases(CUSPARSE_SPGEMM_DEFAULT, 1, 1, 0.0f) != EXIT_SUCCESS;
  failed |= three_phases(CUSPARSE_SPGEMM_ALG3, 0, 0, 0.2f) != EXIT_SUCCESS;
  failed |= three_phases(CUSPARSE_SPGEMM_ALG3, 1, 1, 1.0f) != EXIT_SUCCESS;
  failed |= reuse(CUSPARSE_SPGEMM_DEFAULT) != EXIT_SUCCESS;
  failed |= reuse(CUSPARSE_SPGEMM_CSR_ALG_DETERMINITIC) != EXIT_SUCCESS;
  if (failed) {
    printf("spgemm_documented_flows test FAILED\n");
    return EXIT_FAILURE;
  }
  printf("spgemm_documented_flows test PASSED\n");
  return EXIT_SUCCESS;
}
