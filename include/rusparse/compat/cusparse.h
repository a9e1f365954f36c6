/*
 * cusparse.h for rusparse: cuSPARSE's generic SpGEMM API on top of rusparse.
 *
 * A program written for cuSPARSE's SpGEMM (cusparseCreate, cusparseCreateCsr,
 * cusparseSpGEMM_*, cusparseSpGEMMreuse_*, the CUSPARSE_* enumerators,
 * cudaDataType's CUDA_R_32F ...) compiles unchanged against this header:
 * put <prefix>/include/rusparse/compat first on the include path and link
 * rusparse instead of cuSPARSE (CMake: target_link_libraries(app
 * rusparse::cusparse_compat); pkg-config: rusparse-cusparse-compat).
 *
 * Every cusparse* function below is a static inline wrapper that converts
 * its arguments to rusparse's types and calls the rusparse function of the
 * same name; statuses, enumerator values and argument orders are
 * cuSPARSE's, so numbers pass through unchanged. What rusparse adds
 * (op(A)/op(B) = TRANSPOSE and CONJUGATE_TRANSPOSE, mixed index types, CPU
 * handles and host arrays) works through these names too.
 *
 * No CUDA header is needed. cudaDataType and cudaStream_t come from CUDA's
 * own library_types.h / driver_types.h when the compiler finds them (as the
 * real cusparse.h does), and are defined here, with CUDA's values, when it
 * does not. Only the SpGEMM part of cuSPARSE is provided: a program that
 * uses SpMV, SpMM, dense descriptors or the legacy API does not compile
 * against this header, by design.
 */
#ifndef RUSPARSE_COMPAT_CUSPARSE_H
#define RUSPARSE_COMPAT_CUSPARSE_H
/* The real cusparse.h's guard: a later #include of it is then empty. */
#ifndef CUSPARSE_H_
#define CUSPARSE_H_
#endif

#include <stddef.h>
#include <stdint.h>

#include "../../rusparse.h"

/* ---- CUDA types the API mentions ------------------------------------- */

#if defined(__has_include)
#if __has_include(<library_types.h>)
#include <library_types.h>
#endif
#if __has_include(<driver_types.h>)
#include <driver_types.h>
#endif
#endif

#ifndef __LIBRARY_TYPES_H__
#define __LIBRARY_TYPES_H__
/* CUDA's cudaDataType with CUDA's numbers (library_types.h). */
typedef enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_C_16F = 6,
  CUDA_R_16BF = 14,
  CUDA_C_16BF = 15,
  CUDA_R_32F = 0,
  CUDA_C_32F = 4,
  CUDA_R_64F = 1,
  CUDA_C_64F = 5,
  CUDA_R_8I = 3,
  CUDA_C_8I = 7,
  CUDA_R_8U = 8,
  CUDA_C_8U = 9,
  CUDA_R_32I = 10,
  CUDA_C_32I = 11,
  CUDA_R_32U = 12,
  CUDA_C_32U = 13
} cudaDataType;
#endif

#ifndef __DRIVER_TYPES_H__
#ifndef RUSPARSE_COMPAT_CUDA_STREAM
#define RUSPARSE_COMPAT_CUDA_STREAM
/* The same type CUDA's driver_types.h declares. */
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
#endif
#endif

/* ---- Types -------------------------------------------------------------- */

typedef rusparseStatus_t cusparseStatus_t;
typedef rusparseHandle_t cusparseHandle_t;
typedef rusparseSpMatDescr_t cusparseSpMatDescr_t;
typedef rusparseConstSpMatDescr_t cusparseConstSpMatDescr_t;
typedef rusparseSpGEMMDescr_t cusparseSpGEMMDescr_t;
typedef rusparseOperation_t cusparseOperation_t;
typedef rusparseIndexType_t cusparseIndexType_t;
typedef rusparseIndexBase_t cusparseIndexBase_t;
typedef rusparseSpGEMMAlg_t cusparseSpGEMMAlg_t;
typedef rusparsePointerMode_t cusparsePointerMode_t;

/* ---- Enumerators (cuSPARSE's numbers, which rusparse shares) ----------- */

#define CUSPARSE_STATUS_SUCCESS RUSPARSE_STATUS_SUCCESS
#define CUSPARSE_STATUS_NOT_INITIALIZED RUSPARSE_STATUS_NOT_INITIALIZED
#define CUSPARSE_STATUS_ALLOC_FAILED RUSPARSE_STATUS_ALLOC_FAILED
#define CUSPARSE_STATUS_INVALID_VALUE RUSPARSE_STATUS_INVALID_VALUE
#define CUSPARSE_STATUS_ARCH_MISMATCH RUSPARSE_STATUS_ARCH_MISMATCH
#define CUSPARSE_STATUS_MAPPING_ERROR RUSPARSE_STATUS_MAPPING_ERROR
#define CUSPARSE_STATUS_EXECUTION_FAILED RUSPARSE_STATUS_EXECUTION_FAILED
#define CUSPARSE_STATUS_INTERNAL_ERROR RUSPARSE_STATUS_INTERNAL_ERROR
#define CUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED RUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED
#define CUSPARSE_STATUS_ZERO_PIVOT RUSPARSE_STATUS_ZERO_PIVOT
#define CUSPARSE_STATUS_NOT_SUPPORTED RUSPARSE_STATUS_NOT_SUPPORTED
#define CUSPARSE_STATUS_INSUFFICIENT_RESOURCES RUSPARSE_STATUS_INSUFFICIENT_RESOURCES

#define CUSPARSE_OPERATION_NON_TRANSPOSE RUSPARSE_OPERATION_NON_TRANSPOSE
#define CUSPARSE_OPERATION_TRANSPOSE RUSPARSE_OPERATION_TRANSPOSE
#define CUSPARSE_OPERATION_CONJUGATE_TRANSPOSE RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE

#define CUSPARSE_INDEX_16U RUSPARSE_INDEX_16U
#define CUSPARSE_INDEX_32I RUSPARSE_INDEX_32I
#define CUSPARSE_INDEX_64I RUSPARSE_INDEX_64I

#define CUSPARSE_INDEX_BASE_ZERO RUSPARSE_INDEX_BASE_ZERO
#define CUSPARSE_INDEX_BASE_ONE RUSPARSE_INDEX_BASE_ONE

#define CUSPARSE_POINTER_MODE_HOST RUSPARSE_POINTER_MODE_HOST
#define CUSPARSE_POINTER_MODE_DEVICE RUSPARSE_POINTER_MODE_DEVICE

#define CUSPARSE_SPGEMM_DEFAULT RUSPARSE_SPGEMM_DEFAULT
#define CUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC
#define CUSPARSE_SPGEMM_CSR_ALG_NONDETERMINISTIC RUSPARSE_SPGEMM_CSR_ALG_NONDETERMINISTIC
/* cuSPARSE's own spelling. */
#define CUSPARSE_SPGEMM_CSR_ALG_DETERMINITIC RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC
#define CUSPARSE_SPGEMM_CSR_ALG_NONDETERMINITIC RUSPARSE_SPGEMM_CSR_ALG_NONDETERMINISTIC
#define CUSPARSE_SPGEMM_ALG1 RUSPARSE_SPGEMM_ALG1
#define CUSPARSE_SPGEMM_ALG2 RUSPARSE_SPGEMM_ALG2
#define CUSPARSE_SPGEMM_ALG3 RUSPARSE_SPGEMM_ALG3

/* cudaDataType (CUDA's numbers) to rusparse's, the same numbers. */
#define RUSPARSE_COMPAT_TYPE(t) ((rusparseDataType_t)(int)(t))

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors and the handle ---------------------------------------------- */

static inline const char* cusparseGetErrorName(cusparseStatus_t status) {
  return rusparseGetErrorName(status);
}
static inline const char* cusparseGetErrorString(cusparseStatus_t status) {
  return rusparseGetErrorString(status);
}
static inline cusparseStatus_t cusparseCreate(cusparseHandle_t* handle) {
  return rusparseCreate(handle);
}
static inline cusparseStatus_t cusparseDestroy(cusparseHandle_t handle) {
  return rusparseDestroy(handle);
}
static inline cusparseStatus_t cusparseGetVersion(cusparseHandle_t handle, int* version) {
  return rusparseGetVersion(handle, version);
}
static inline cusparseStatus_t cusparseSetStream(cusparseHandle_t handle, cudaStream_t streamId) {
  return rusparseSetStream(handle, (void*)streamId);
}
static inline cusparseStatus_t cusparseGetStream(cusparseHandle_t handle, cudaStream_t* streamId) {
  void* s = NULL;
  cusparseStatus_t status = rusparseGetStream(handle, streamId ? &s : NULL);
  if (status == CUSPARSE_STATUS_SUCCESS) *streamId = (cudaStream_t)s;
  return status;
}
static inline cusparseStatus_t cusparseSetPointerMode(cusparseHandle_t handle,
                                                      cusparsePointerMode_t mode) {
  return rusparseSetPointerMode(handle, mode);
}
static inline cusparseStatus_t cusparseGetPointerMode(cusparseHandle_t handle,
                                                      cusparsePointerMode_t* mode) {
  return rusparseGetPointerMode(handle, mode);
}

/* ---- Sparse matrix descriptors ------------------------------------------ */

static inline cusparseStatus_t cusparseCreateCsr(cusparseSpMatDescr_t* spMatDescr, int64_t rows,
                                                 int64_t cols, int64_t nnz, void* csrRowOffsets,
                                                 void* csrColInd, void* csrValues,
                                                 cusparseIndexType_t csrRowOffsetsType,
                                                 cusparseIndexType_t csrColIndType,
                                                 cusparseIndexBase_t idxBase,
                                                 cudaDataType valueType) {
  return rusparseCreateCsr(spMatDescr, rows, cols, nnz, csrRowOffsets, csrColInd, csrValues,
                           csrRowOffsetsType, csrColIndType, idxBase,
                           RUSPARSE_COMPAT_TYPE(valueType));
}
static inline cusparseStatus_t cusparseCreateConstCsr(
    cusparseConstSpMatDescr_t* spMatDescr, int64_t rows, int64_t cols, int64_t nnz,
    const void* csrRowOffsets, const void* csrColInd, const void* csrValues,
    cusparseIndexType_t csrRowOffsetsType, cusparseIndexType_t csrColIndType,
    cusparseIndexBase_t idxBase, cudaDataType valueType) {
  return rusparseCreateConstCsr(spMatDescr, rows, cols, nnz, csrRowOffsets, csrColInd, csrValues,
                                csrRowOffsetsType, csrColIndType, idxBase,
                                RUSPARSE_COMPAT_TYPE(valueType));
}
static inline cusparseStatus_t cusparseDestroySpMat(cusparseConstSpMatDescr_t spMatDescr) {
  return rusparseDestroySpMat(spMatDescr);
}
static inline cusparseStatus_t cusparseSpMatGetSize(cusparseConstSpMatDescr_t spMatDescr,
                                                    int64_t* rows, int64_t* cols, int64_t* nnz) {
  return rusparseSpMatGetSize(spMatDescr, rows, cols, nnz);
}
static inline cusparseStatus_t cusparseCsrGet(cusparseSpMatDescr_t spMatDescr, int64_t* rows,
                                              int64_t* cols, int64_t* nnz, void** csrRowOffsets,
                                              void** csrColInd, void** csrValues,
                                              cusparseIndexType_t* csrRowOffsetsType,
                                              cusparseIndexType_t* csrColIndType,
                                              cusparseIndexBase_t* idxBase,
                                              cudaDataType* valueType) {
  rusparseDataType_t t = RUSPARSE_R_32F;
  cusparseStatus_t status =
      rusparseCsrGet(spMatDescr, rows, cols, nnz, csrRowOffsets, csrColInd, csrValues,
                     csrRowOffsetsType, csrColIndType, idxBase, valueType ? &t : NULL);
  if (status == CUSPARSE_STATUS_SUCCESS) *valueType = (cudaDataType)(int)t;
  return status;
}
static inline cusparseStatus_t cusparseConstCsrGet(
    cusparseConstSpMatDescr_t spMatDescr, int64_t* rows, int64_t* cols, int64_t* nnz,
    const void** csrRowOffsets, const void** csrColInd, const void** csrValues,
    cusparseIndexType_t* csrRowOffsetsType, cusparseIndexType_t* csrColIndType,
    cusparseIndexBase_t* idxBase, cudaDataType* valueType) {
  rusparseDataType_t t = RUSPARSE_R_32F;
  cusparseStatus_t status =
      rusparseConstCsrGet(spMatDescr, rows, cols, nnz, csrRowOffsets, csrColInd, csrValues,
                          csrRowOffsetsType, csrColIndType, idxBase, valueType ? &t : NULL);
  if (status == CUSPARSE_STATUS_SUCCESS) *valueType = (cudaDataType)(int)t;
  return status;
}
static inline cusparseStatus_t cusparseCsrSetPointers(cusparseSpMatDescr_t spMatDescr,
                                                      void* csrRowOffsets, void* csrColInd,
                                                      void* csrValues) {
  return rusparseCsrSetPointers(spMatDescr, csrRowOffsets, csrColInd, csrValues);
}
static inline cusparseStatus_t cusparseSpMatGetValues(cusparseSpMatDescr_t spMatDescr,
                                                      void** values) {
  return rusparseSpMatGetValues(spMatDescr, values);
}
static inline cusparseStatus_t cusparseConstSpMatGetValues(cusparseConstSpMatDescr_t spMatDescr,
                                                           const void** values) {
  return rusparseConstSpMatGetValues(spMatDescr, values);
}
static inline cusparseStatus_t cusparseSpMatSetValues(cusparseSpMatDescr_t spMatDescr,
                                                      void* values) {
  return rusparseSpMatSetValues(spMatDescr, values);
}
static inline cusparseStatus_t cusparseSpMatGetIndexBase(cusparseConstSpMatDescr_t spMatDescr,
                                                         cusparseIndexBase_t* idxBase) {
  return rusparseSpMatGetIndexBase(spMatDescr, idxBase);
}

/* ---- SpGEMM --------------------------------------------------------------- */

static inline cusparseStatus_t cusparseSpGEMM_createDescr(cusparseSpGEMMDescr_t* descr) {
  return rusparseSpGEMM_createDescr(descr);
}
static inline cusparseStatus_t cusparseSpGEMM_destroyDescr(cusparseSpGEMMDescr_t descr) {
  return rusparseSpGEMM_destroyDescr(descr);
}
static inline cusparseStatus_t cusparseSpGEMM_workEstimation(
    cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB, const void* alpha,
    cusparseConstSpMatDescr_t matA, cusparseConstSpMatDescr_t matB, const void* beta,
    cusparseSpMatDescr_t matC, cudaDataType computeType, cusparseSpGEMMAlg_t alg,
    cusparseSpGEMMDescr_t spgemmDescr, size_t* bufferSize1, void* externalBuffer1) {
  return rusparseSpGEMM_workEstimation(handle, opA, opB, alpha, matA, matB, beta, matC,
                                       RUSPARSE_COMPAT_TYPE(computeType), alg, spgemmDescr,
                                       bufferSize1, externalBuffer1);
}
static inline cusparseStatus_t cusparseSpGEMM_getNumProducts(cusparseSpGEMMDescr_t spgemmDescr,
                                                             int64_t* num_prods) {
  return rusparseSpGEMM_getNumProducts(spgemmDescr, num_prods);
}
static inline cusparseStatus_t cusparseSpGEMM_estimateMemory(
    cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB, const void* alpha,
    cusparseConstSpMatDescr_t matA, cusparseConstSpMatDescr_t matB, const void* beta,
    cusparseSpMatDescr_t matC, cudaDataType computeType, cusparseSpGEMMAlg_t alg,
    cusparseSpGEMMDescr_t spgemmDescr, float chunk_fraction, size_t* bufferSize3,
    void* externalBuffer3, size_t* bufferSize2) {
  return rusparseSpGEMM_estimateMemory(handle, opA, opB, alpha, matA, matB, beta, matC,
                                       RUSPARSE_COMPAT_TYPE(computeType), alg, spgemmDescr,
                                       chunk_fraction, bufferSize3, externalBuffer3, bufferSize2);
}
static inline cusparseStatus_t cusparseSpGEMM_compute(
    cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB, const void* alpha,
    cusparseConstSpMatDescr_t matA, cusparseConstSpMatDescr_t matB, const void* beta,
    cusparseSpMatDescr_t matC, cudaDataType computeType, cusparseSpGEMMAlg_t alg,
    cusparseSpGEMMDescr_t spgemmDescr, size_t* bufferSize2, void* externalBuffer2) {
  return rusparseSpGEMM_compute(handle, opA, opB, alpha, matA, matB, beta, matC,
                                RUSPARSE_COMPAT_TYPE(computeType), alg, spgemmDescr,
                                bufferSize2, externalBuffer2);
}
static inline cusparseStatus_t cusparseSpGEMM_copy(
    cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB, const void* alpha,
    cusparseConstSpMatDescr_t matA, cusparseConstSpMatDescr_t matB, const void* beta,
    cusparseSpMatDescr_t matC, cudaDataType computeType, cusparseSpGEMMAlg_t alg,
    cusparseSpGEMMDescr_t spgemmDescr) {
  return rusparseSpGEMM_copy(handle, opA, opB, alpha, matA, matB, beta, matC,
                             RUSPARSE_COMPAT_TYPE(computeType), alg, spgemmDescr);
}

/* ---- SpGEMM with reuse ---------------------------------------------------- */

static inline cusparseStatus_t cusparseSpGEMMreuse_workEstimation(
    cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB,
    cusparseConstSpMatDescr_t matA, cusparseConstSpMatDescr_t matB, cusparseSpMatDescr_t matC,
    cusparseSpGEMMAlg_t alg, cusparseSpGEMMDescr_t spgemmDescr, size_t* bufferSize1,
    void* externalBuffer1) {
  return rusparseSpGEMMreuse_workEstimation(handle, opA, opB, matA, matB, matC, alg, spgemmDescr,
                                            bufferSize1, externalBuffer1);
}
static inline cusparseStatus_t cusparseSpGEMMreuse_nnz(
    cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB,
    cusparseConstSpMatDescr_t matA, cusparseConstSpMatDescr_t matB, cusparseSpMatDescr_t matC,
    cusparseSpGEMMAlg_t alg, cusparseSpGEMMDescr_t spgemmDescr, size_t* bufferSize2,
    void* externalBuffer2, size_t* bufferSize3, void* externalBuffer3, size_t* bufferSize4,
    void* externalBuffer4) {
  return rusparseSpGEMMreuse_nnz(handle, opA, opB, matA, matB, matC, alg, spgemmDescr,
                                 bufferSize2, externalBuffer2, bufferSize3, externalBuffer3,
                                 bufferSize4, externalBuffer4);
}
static inline cusparseStatus_t cusparseSpGEMMreuse_copy(
    cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB,
    cusparseConstSpMatDescr_t matA, cusparseConstSpMatDescr_t matB, cusparseSpMatDescr_t matC,
    cusparseSpGEMMAlg_t alg, cusparseSpGEMMDescr_t spgemmDescr, size_t* bufferSize5,
    void* externalBuffer5) {
  return rusparseSpGEMMreuse_copy(handle, opA, opB, matA, matB, matC, alg, spgemmDescr,
                                  bufferSize5, externalBuffer5);
}
static inline cusparseStatus_t cusparseSpGEMMreuse_compute(
    cusparseHandle_t handle, cusparseOperation_t opA, cusparseOperation_t opB, const void* alpha,
    cusparseConstSpMatDescr_t matA, cusparseConstSpMatDescr_t matB, const void* beta,
    cusparseSpMatDescr_t matC, cudaDataType computeType, cusparseSpGEMMAlg_t alg,
    cusparseSpGEMMDescr_t spgemmDescr) {
  return rusparseSpGEMMreuse_compute(handle, opA, opB, alpha, matA, matB, beta, matC,
                                     RUSPARSE_COMPAT_TYPE(computeType), alg, spgemmDescr);
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RUSPARSE_COMPAT_CUSPARSE_H */
