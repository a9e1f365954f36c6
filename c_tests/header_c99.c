/* rusparse.h and the cuSPARSE compat header compile as strict C99
 * (-std=c99 -Wall -Wextra -Wpedantic -Werror) and link; one call each. */
#include <stdio.h>

#include "rusparse.h"
#include "rusparse/compat/cusparse.h"

int main(void) {
  rusparseHandle_t h = NULL;
  int version = 0;
  cudaDataType t = CUDA_R_64F;
  if (rusparseCreateWithBackend(&h, RUSPARSE_BACKEND_CPU) != RUSPARSE_STATUS_SUCCESS) return 1;
  if (cusparseGetVersion(h, &version) != CUSPARSE_STATUS_SUCCESS || version != RUSPARSE_VERSION)
    return 1;
  if (rusparseDestroy(h) != RUSPARSE_STATUS_SUCCESS) return 1;
  printf("header_c99: version %d, cudaDataType %d\n", version, (int)t);
  return 0;
}
