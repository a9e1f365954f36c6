/*
 * A cuSPARSE generic-API SpGEMM program, written as one is written for
 * cuSPARSE (cudaMalloc, cudaMemcpy, the three phases with the two-call
 * buffer protocol), and built here UNCHANGED against rusparse's cusparse.h.
 *
 *   C = alpha * A * B,  A 5 x 4 (8 nnz, one empty row), B 4 x 6 (8 nnz),
 *   f32, zero-based, alpha = 2, beta = 0, CUSPARSE_SPGEMM_DEFAULT.
 *
 * In CI the CUDA runtime calls go to a host stand-in (host_cuda/), so the
 * product runs on rusparse's CPU back end; on a GPU machine the same source
 * builds against the CUDA toolkit and runs on the GPU.
 */
#include <cuda_runtime_api.h>
#include <cusparse.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_CUDA(func)                                                          \
  {                                                                               \
    cudaError_t status = (func);                                                  \
    if (status != cudaSuccess) {                                                  \
      printf("CUDA API failed at line %d with error: %s (%d)\n", __LINE__,        \
             cudaGetErrorString(status), status);                                 \
      return EXIT_FAILURE;                                                        \
    }                                                                             \
  }

#define CHECK_CUSPARSE(func)                                                      \
  {                                                                               \
    cusparseStatus_t status = (func);                                             \
    if (status != CUSPARSE_STATUS_SUCCESS) {                                      \
      printf("CUSPARSE API failed at line %d with error: %s (%d)\n", __LINE__,    \
             cusparseGetErrorString(status), status);                             \
      return EXIT_FAILURE;                                                        \
    }                                                                             \
  }

int main(void) {
  /* The problem and the expected C, on the host. */
  const int A_num_rows = 5, A_num_cols = 4, A_nnz = 8;
  const int B_num_rows = 4, B_num_cols = 6, B_nnz = 8;
  int hA_csrOffsets[] = {0, 2, 3, 5, 5, 8};
  int hA_columns[] = {0, 2, 1, 0, 3, 1, 2, 3};
  float hA_values[] = {2.0f, -1.0f, 3.0f, 1.0f, 4.0f, 5.0f, 2.0f, -3.0f};
  int hB_csrOffsets[] = {0, 2, 4, 6, 8};
  int hB_columns[] = {0, 3, 1, 4, 2, 5, 0, 5};
  float hB_values[] = {1.0f, 2.0f, -2.0f, 1.0f, 3.0f, 1.0f, 4.0f, -1.0f};
  int hC_csrOffsets[] = {0, 4, 6, 9, 9, 14};
  int hC_columns[] = {0, 2, 3, 5, 1, 4, 0, 3, 5, 0, 1, 2, 4, 5};
  float hC_values[] = {4.0f,  -6.0f,  8.0f,  -2.0f, -12.0f, 6.0f,  34.0f,
                       4.0f,  -8.0f,  -24.0f, -20.0f, 12.0f, 10.0f, 10.0f};
  const int C_nnz = 14;
  float alpha = 2.0f;
  float beta = 0.0f;
  cusparseOperation_t opA = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseOperation_t opB = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cudaDataType computeType = CUDA_R_32F;

  /* A and B in "device" memory; C's row offsets allocated up front. */
  int *dA_csrOffsets, *dA_columns, *dB_csrOffsets, *dB_columns, *dC_csrOffsets, *dC_columns;
  float *dA_values, *dB_values, *dC_values;
  CHECK_CUDA(cudaMalloc((void**)&dA_csrOffsets, (A_num_rows + 1) * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&dA_columns, A_nnz * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&dA_values, A_nnz * sizeof(float)))
  CHECK_CUDA(cudaMalloc((void**)&dB_csrOffsets, (B_num_rows + 1) * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&dB_columns, B_nnz * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&dB_values, B_nnz * sizeof(float)))
  CHECK_CUDA(cudaMalloc((void**)&dC_csrOffsets, (A_num_rows + 1) * sizeof(int)))
  CHECK_CUDA(cudaMemcpy(dA_csrOffsets, hA_csrOffsets, (A_num_rows + 1) * sizeof(int),
                        cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(dA_columns, hA_columns, A_nnz * sizeof(int), cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(dA_values, hA_values, A_nnz * sizeof(float), cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(dB_csrOffsets, hB_csrOffsets, (B_num_rows + 1) * sizeof(int),
                        cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(dB_columns, hB_columns, B_nnz * sizeof(int), cudaMemcpyHostToDevice))
  CHECK_CUDA(cudaMemcpy(dB_values, hB_values, B_nnz * sizeof(float), cudaMemcpyHostToDevice))

  /* Descriptors: C starts with nnz 0 and no column or value array. */
  cusparseHandle_t handle = NULL;
  cusparseSpMatDescr_t matA, matB, matC;
  void *dBuffer1 = NULL, *dBuffer2 = NULL;
  size_t bufferSize1 = 0, bufferSize2 = 0;
  CHECK_CUSPARSE(cusparseCreate(&handle))
  CHECK_CUSPARSE(cusparseCreateCsr(&matA, A_num_rows, A_num_cols, A_nnz, dA_csrOffsets,
                                   dA_columns, dA_values, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F))
  CHECK_CUSPARSE(cusparseCreateCsr(&matB, B_num_rows, B_num_cols, B_nnz, dB_csrOffsets,
                                   dB_columns, dB_values, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F))
  CHECK_CUSPARSE(cusparseCreateCsr(&matC, A_num_rows, B_num_cols, 0, dC_csrOffsets, NULL, NULL,
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F))

  cusparseSpGEMMDescr_t spgemmDesc;
  CHECK_CUSPARSE(cusparseSpGEMM_createDescr(&spgemmDesc))

  /* Work estimation: size query, then the call with the buffer. */
  CHECK_CUSPARSE(cusparseSpGEMM_workEstimation(handle, opA, opB, &alpha, matA, matB, &beta, matC,
                                               computeType, CUSPARSE_SPGEMM_DEFAULT, spgemmDesc,
                                               &bufferSize1, NULL))
  CHECK_CUDA(cudaMalloc((void**)&dBuffer1, bufferSize1))
  CHECK_CUSPARSE(cusparseSpGEMM_workEstimation(handle, opA, opB, &alpha, matA, matB, &beta, matC,
                                               computeType, CUSPARSE_SPGEMM_DEFAULT, spgemmDesc,
                                               &bufferSize1, dBuffer1))

  /* Compute (C's structure): size query, then the call with the buffer. */
  CHECK_CUSPARSE(cusparseSpGEMM_compute(handle, opA, opB, &alpha, matA, matB, &beta, matC,
                                        computeType, CUSPARSE_SPGEMM_DEFAULT, spgemmDesc,
                                        &bufferSize2, NULL))
  CHECK_CUDA(cudaMalloc((void**)&dBuffer2, bufferSize2))
  CHECK_CUSPARSE(cusparseSpGEMM_compute(handle, opA, opB, &alpha, matA, matB, &beta, matC,
                                        computeType, CUSPARSE_SPGEMM_DEFAULT, spgemmDesc,
                                        &bufferSize2, dBuffer2))

  /* nnz(C) is now in matC. */
  int64_t C_num_rows1, C_num_cols1, C_nnz1;
  CHECK_CUSPARSE(cusparseSpMatGetSize(matC, &C_num_rows1, &C_num_cols1, &C_nnz1))
  if (C_num_rows1 != A_num_rows || C_num_cols1 != B_num_cols || C_nnz1 != C_nnz) {
    printf("spgemm_example: C is %lld x %lld with %lld entries, expected %d x %d with %d\n",
           (long long)C_num_rows1, (long long)C_num_cols1, (long long)C_nnz1, A_num_rows,
           B_num_cols, C_nnz);
    return EXIT_FAILURE;
  }
  /* C's arrays, handed to matC. */
  CHECK_CUDA(cudaMalloc((void**)&dC_columns, C_nnz1 * sizeof(int)))
  CHECK_CUDA(cudaMalloc((void**)&dC_values, C_nnz1 * sizeof(float)))
  CHECK_CUSPARSE(cusparseCsrSetPointers(matC, dC_csrOffsets, dC_columns, dC_values))

  /* Copy: the values, straight into C's arrays. */
  CHECK_CUSPARSE(cusparseSpGEMM_copy(handle, opA, opB, &alpha, matA, matB, &beta, matC,
                                     computeType, CUSPARSE_SPGEMM_DEFAULT, spgemmDesc))

  /* Descriptors and handle are released before C is read back. */
  CHECK_CUSPARSE(cusparseSpGEMM_destroyDescr(spgemmDesc))
  CHECK_CUSPARSE(cusparseDestroySpMat(matA))
  CHECK_CUSPARSE(cusparseDestroySpMat(matB))
  CHECK_CUSPARSE(cusparseDestroySpMat(matC))
  CHECK_CUSPARSE(cusparseDestroy(handle))

  /* Read C back and compare with the expected arrays. */
  int hC_csrOffsets_tmp[6];
  int hC_columns_tmp[14];
  float hC_values_tmp[14];
  CHECK_CUDA(cudaMemcpy(hC_csrOffsets_tmp, dC_csrOffsets, (A_num_rows + 1) * sizeof(int),
                        cudaMemcpyDeviceToHost))
  CHECK_CUDA(cudaMemcpy(hC_columns_tmp, dC_columns, C_nnz * sizeof(int), cudaMemcpyDeviceToHost))
  CHECK_CUDA(cudaMemcpy(hC_values_tmp, dC_values, C_nnz * sizeof(float), cudaMemcpyDeviceToHost))
  int correct = 1;
  for (int i = 0; i < A_num_rows + 1; i++) {
    if (hC_csrOffsets_tmp[i] != hC_csrOffsets[i]) {
      correct = 0;
      break;
    }
  }
  for (int i = 0; i < C_nnz; i++) {
    if (hC_columns_tmp[i] != hC_columns[i] || hC_values_tmp[i] != hC_values[i]) {
      correct = 0;
      break;
    }
  }
  if (correct)
    printf("spgemm_example test PASSED\n");
  else {
    printf("spgemm_example test FAILED: wrong result\n");
    return EXIT_FAILURE;
  }

  /* Release the "device" memory. */
  CHECK_CUDA(cudaFree(dBuffer1))
  CHECK_CUDA(cudaFree(dBuffer2))
  CHECK_CUDA(cudaFree(dA_csrOffsets))
  CHECK_CUDA(cudaFree(dA_columns))
  CHECK_CUDA(cudaFree(dA_values))
  CHECK_CUDA(cudaFree(dB_csrOffsets))
  CHECK_CUDA(cudaFree(dB_columns))
  CHECK_CUDA(cudaFree(dB_values))
  CHECK_CUDA(cudaFree(dC_csrOffsets))
  CHECK_CUDA(cudaFree(dC_columns))
  CHECK_CUDA(cudaFree(dC_values))
  return EXIT_SUCCESS;
}
