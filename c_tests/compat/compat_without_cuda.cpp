// rusparse's cusparse.h alone, with no CUDA header anywhere on the include
// path: it defines cudaDataType and cudaStream_t itself. Built as C++11
// (and the same file as C99 through compat_without_cuda.c).
#include <cusparse.h>

#include <stdio.h>

int main(void) {
  cusparseHandle_t handle = NULL;
  cudaStream_t stream = NULL;
  cudaDataType type = CUDA_C_64F;
  cusparseSpGEMMAlg_t alg = CUSPARSE_SPGEMM_CSR_ALG_NONDETERMINITIC;
  if (cusparseCreate(&handle) != CUSPARSE_STATUS_SUCCESS) return 1;
  if (cusparseSetStream(handle, stream) != CUSPARSE_STATUS_SUCCESS) return 1;
  if (cusparseGetStream(handle, &stream) != CUSPARSE_STATUS_SUCCESS || stream != NULL) return 1;
  /* A NULL handle is NOT_INITIALIZED, with cuSPARSE's number. */
  if (cusparseSetPointerMode(NULL, CUSPARSE_POINTER_MODE_HOST) != CUSPARSE_STATUS_NOT_INITIALIZED)
    return 1;
  if (cusparseDestroy(handle) != CUSPARSE_STATUS_SUCCESS) return 1;
  printf("compat_without_cuda: %s, type %d, alg %d\n",
         cusparseGetErrorName(CUSPARSE_STATUS_SUCCESS), (int)type, (int)alg);
  return 0;
}
