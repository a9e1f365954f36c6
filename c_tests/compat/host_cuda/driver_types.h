/* Test-only stand-in for CUDA's driver_types.h (see README.md here). */
#ifndef __DRIVER_TYPES_H__
#define __DRIVER_TYPES_H__

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

#endif
