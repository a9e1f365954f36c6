/* Test-only stand-in for CUDA's cuda_runtime_api.h: "device" memory is host
 * memory (see README.md here). */
#ifndef RUSPARSE_TEST_HOST_CUDA_RUNTIME_API_H
#define RUSPARSE_TEST_HOST_CUDA_RUNTIME_API_H

#include <stdlib.h>
#include <string.h>

#include "driver_types.h"
#include "library_types.h"

static inline cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (ptr == NULL) return cudaErrorInvalidValue;
  *ptr = malloc(size ? size : 1);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void* ptr) {
  free(ptr);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t count,
                                     enum cudaMemcpyKind kind) {
  (void)kind;
  if (count > 0 && (dst == NULL || src == NULL)) return cudaErrorInvalidValue;
  if (count > 0) memcpy(dst, src, count);
  return cudaSuccess;
}
static inline cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  if (count > 0 && ptr == NULL) return cudaErrorInvalidValue;
  if (count > 0) memset(ptr, value, count);
  return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  if (stream == NULL) return cudaErrorInvalidValue;
  *stream = NULL;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}
static inline const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
  }
  return "unknown error";
}

#endif
