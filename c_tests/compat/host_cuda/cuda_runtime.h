/* Test-only stand-in for CUDA's cuda_runtime.h (see README.md here). */
#include "cuda_runtime_api.h"
