/* kernels/portability.h: the only file that knows which compiler runs.
 *
 * Three branches (kernels/README.md, "portability.h"):
 *   - host emulation (RS_HOST_EMULATION): testing/host.h runs kernels on host
 *     threads, for kernels/host-tests;
 *   - HIP (hipcc / hiprtc: __HIP_PLATFORM_AMD__, __HIPCC_RTC__ or __HIP__);
 *   - CUDA (nvcc / NVRTC: __CUDACC__ or __CUDACC_RTC__).
 * The device branches include no standard header (NVRTC has none).
 *
 * Types come from -D macros: RS_VALUE (0 f32, 1 f64, 2 c32, 3 c64),
 * RS_OFFSET64, RS_INDEX64 (0 int, 1 long long) and RS_WARP (32 or 64).
 */
#ifndef RS_PORTABILITY_H
#define RS_PORTABILITY_H

#ifndef RS_VALUE
#define RS_VALUE 1
#endif
#ifndef RS_OFFSET64
#define RS_OFFSET64 0
#endif
#ifndef RS_INDEX64
#define RS_INDEX64 0
#endif
#ifndef RS_WARP
#define RS_WARP 32
#endif

#if RS_WARP != 32 && RS_WARP != 64
#error "RS_WARP must be 32 or 64"
#endif
#if RS_VALUE < 0 || RS_VALUE > 3
#error "RS_VALUE must be 0 (f32), 1 (f64), 2 (c32) or 3 (c64)"
#endif

#define RS_INT_MAX 2147483647
#define RS_LLONG_MAX 9223372036854775807LL

/* ------------------------------------------------------------------------ */
#if defined(RS_HOST_EMULATION)
/* Host C++20: one fiber per GPU thread. Everything, the kernels
 * included, lives in an unnamed namespace so that several variants (other
 * RS_* values) link into one program. */
#include "testing/host.h"
#define RS_BEGIN_NAMESPACE namespace {
#define RS_END_NAMESPACE }

/* ------------------------------------------------------------------------ */
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC_RTC__) || defined(__HIP__)
#if !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif
#define RS_BEGIN_NAMESPACE
#define RS_END_NAMESPACE

#define RS_GLOBAL extern "C" __global__
/* The most threads a block of the kernel is launched with (the launch
 * contract's KERNEL_MAX_BLOCK, checked at every launch): the compiler keeps
 * the kernel's registers within what that many threads may use. */
#define RS_LAUNCH_BOUNDS(n) __launch_bounds__(n, 1)
#define RS_DEVICE __device__
#define RS_INLINE inline __attribute__((always_inline))

/* One declaration at namespace scope: block-scope ones in extern "C"
 * kernels and in C++ functions would disagree on the language linkage. */
extern __shared__ __attribute__((aligned(16))) unsigned char rs_dynamic_shared_[];
#define RS_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(rs_dynamic_shared_)
#define RS_SHARED(type, name, count) __shared__ type name[count]

RS_DEVICE RS_INLINE int rs_tid() { return (int)threadIdx.x; }
RS_DEVICE RS_INLINE long long rs_bid() { return (long long)blockIdx.x; }
RS_DEVICE RS_INLINE int rs_bdim() { return (int)blockDim.x; }
RS_DEVICE RS_INLINE long long rs_gdim() { return (long long)gridDim.x; }
RS_DEVICE RS_INLINE int rs_lane() { return (int)threadIdx.x & (RS_WARP - 1); }
RS_DEVICE RS_INLINE void rs_sync() { __syncthreads(); }

RS_DEVICE RS_INLINE int rs_atomic_cas(int* p, int c, int v) { return atomicCAS(p, c, v); }
RS_DEVICE RS_INLINE unsigned rs_atomic_cas(unsigned* p, unsigned c, unsigned v) {
  return atomicCAS(p, c, v);
}
RS_DEVICE RS_INLINE unsigned long long rs_atomic_cas(unsigned long long* p, unsigned long long c,
                                                     unsigned long long v) {
  return atomicCAS(p, c, v);
}
RS_DEVICE RS_INLINE long long rs_atomic_cas(long long* p, long long c, long long v) {
  return (long long)atomicCAS((unsigned long long*)p, (unsigned long long)c,
                              (unsigned long long)v);
}
RS_DEVICE RS_INLINE int rs_atomic_add(int* p, int v) { return atomicAdd(p, v); }
RS_DEVICE RS_INLINE unsigned rs_atomic_add(unsigned* p, unsigned v) { return atomicAdd(p, v); }
RS_DEVICE RS_INLINE unsigned rs_atomic_or(unsigned* p, unsigned v) { return atomicOr(p, v); }
RS_DEVICE RS_INLINE unsigned long long rs_atomic_add(unsigned long long* p,
                                                     unsigned long long v) {
  return atomicAdd(p, v);
}
RS_DEVICE RS_INLINE long long rs_atomic_add(long long* p, long long v) {
  return (long long)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
RS_DEVICE RS_INLINE float rs_atomic_add(float* p, float v) { return atomicAdd(p, v); }
RS_DEVICE RS_INLINE double rs_atomic_add(double* p, double v) { return atomicAdd(p, v); }
RS_DEVICE RS_INLINE unsigned long long rs_atomic_min(unsigned long long* p,
                                                     unsigned long long v) {
  return atomicMin(p, v);
}
/* A CAS loop: atomicMax on long long is missing from older HIP releases. */
RS_DEVICE RS_INLINE long long rs_atomic_max(long long* p, long long v) {
  long long old = *(volatile long long*)p;
  while (old < v) {
    const long long seen = rs_atomic_cas(p, old, v);
    if (seen == old) break;
    old = seen;
  }
  return old;
}
/* A load that may meet other threads' atomics on the same word (an
 * early-exit check of a shared count): volatile, so it is not cached. */
RS_DEVICE RS_INLINE long long rs_atomic_load(const long long* p) {
  return *(const volatile long long*)p;
}

/* Warp operations (all RS_WARP lanes active). */
template <class T>
RS_DEVICE RS_INLINE T rs_shfl(T v, int src_lane) {
  return __shfl(v, src_lane, RS_WARP);
}
template <class T>
RS_DEVICE RS_INLINE T rs_shfl_down(T v, unsigned delta) {
  return __shfl_down(v, delta, RS_WARP);
}
template <class T>
RS_DEVICE RS_INLINE T rs_shfl_xor(T v, int mask) {
  return __shfl_xor(v, mask, RS_WARP);
}
RS_DEVICE RS_INLINE unsigned long long rs_ballot(bool pred) {
  return (unsigned long long)__ballot(pred ? 1 : 0);
}
/* Orders the lanes' memory accesses around it (a warp op orders execution
 * only): AMD wavefronts run in lockstep and keep LDS accesses in order, so
 * this only stops the compiler from moving accesses across. */
RS_DEVICE RS_INLINE void rs_syncwarp() { __builtin_amdgcn_wave_barrier(); }
RS_DEVICE RS_INLINE int rs_popcll(unsigned long long x) { return (int)__popcll(x); }

/* ------------------------------------------------------------------------ */
#elif defined(__CUDACC__) || defined(__CUDACC_RTC__)
#if RS_WARP != 32
#error "CUDA warps have 32 lanes: compile with RS_WARP=32"
#endif
#define RS_BEGIN_NAMESPACE
#define RS_END_NAMESPACE

#define RS_GLOBAL extern "C" __global__
/* See the HIP branch. */
#define RS_LAUNCH_BOUNDS(n) __launch_bounds__(n, 1)
#define RS_DEVICE __device__
#define RS_INLINE __forceinline__

/* One declaration at namespace scope: block-scope ones in extern "C"
 * kernels and in C++ functions would disagree on the language linkage. */
extern __shared__ __align__(16) unsigned char rs_dynamic_shared_[];
#define RS_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(rs_dynamic_shared_)
#define RS_SHARED(type, name, count) __shared__ type name[count]

RS_DEVICE RS_INLINE int rs_tid() { return (int)threadIdx.x; }
RS_DEVICE RS_INLINE long long rs_bid() { return (long long)blockIdx.x; }
RS_DEVICE RS_INLINE int rs_bdim() { return (int)blockDim.x; }
RS_DEVICE RS_INLINE long long rs_gdim() { return (long long)gridDim.x; }
RS_DEVICE RS_INLINE int rs_lane() { return (int)threadIdx.x & (RS_WARP - 1); }
RS_DEVICE RS_INLINE void rs_sync() { __syncthreads(); }

RS_DEVICE RS_INLINE int rs_atomic_cas(int* p, int c, int v) { return atomicCAS(p, c, v); }
RS_DEVICE RS_INLINE unsigned rs_atomic_cas(unsigned* p, unsigned c, unsigned v) {
  return atomicCAS(p, c, v);
}
RS_DEVICE RS_INLINE unsigned long long rs_atomic_cas(unsigned long long* p, unsigned long long c,
                                                     unsigned long long v) {
  return atomicCAS(p, c, v);
}
RS_DEVICE RS_INLINE long long rs_atomic_cas(long long* p, long long c, long long v) {
  return (long long)atomicCAS((unsigned long long*)p, (unsigned long long)c,
                              (unsigned long long)v);
}
RS_DEVICE RS_INLINE int rs_atomic_add(int* p, int v) { return atomicAdd(p, v); }
RS_DEVICE RS_INLINE unsigned rs_atomic_add(unsigned* p, unsigned v) { return atomicAdd(p, v); }
RS_DEVICE RS_INLINE unsigned rs_atomic_or(unsigned* p, unsigned v) { return atomicOr(p, v); }
RS_DEVICE RS_INLINE unsigned long long rs_atomic_add(unsigned long long* p,
                                                     unsigned long long v) {
  return atomicAdd(p, v);
}
RS_DEVICE RS_INLINE long long rs_atomic_add(long long* p, long long v) {
  return (long long)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
RS_DEVICE RS_INLINE float rs_atomic_add(float* p, float v) { return atomicAdd(p, v); }
RS_DEVICE RS_INLINE double rs_atomic_add(double* p, double v) { return atomicAdd(p, v); }
RS_DEVICE RS_INLINE unsigned long long rs_atomic_min(unsigned long long* p,
                                                     unsigned long long v) {
  return atomicMin(p, v);
}
RS_DEVICE RS_INLINE long long rs_atomic_max(long long* p, long long v) { return atomicMax(p, v); }
/* A load that may meet other threads' atomics on the same word (an
 * early-exit check of a shared count): volatile, so it is not cached. */
RS_DEVICE RS_INLINE long long rs_atomic_load(const long long* p) {
  return *(const volatile long long*)p;
}

/* Warp operations (all 32 lanes active). */
template <class T>
RS_DEVICE RS_INLINE T rs_shfl(T v, int src_lane) {
  return __shfl_sync(0xffffffffu, v, src_lane);
}
template <class T>
RS_DEVICE RS_INLINE T rs_shfl_down(T v, unsigned delta) {
  return __shfl_down_sync(0xffffffffu, v, delta);
}
template <class T>
RS_DEVICE RS_INLINE T rs_shfl_xor(T v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
RS_DEVICE RS_INLINE unsigned long long rs_ballot(bool pred) {
  return (unsigned long long)__ballot_sync(0xffffffffu, pred);
}
/* Orders the lanes' memory accesses around it: __ballot_sync and the
 * shuffles order execution, not memory (independent thread scheduling), so
 * a lane's write after a warp op may overtake another lane's read before
 * it. Every lane of the warp calls it. */
RS_DEVICE RS_INLINE void rs_syncwarp() { __syncwarp(0xffffffffu); }
RS_DEVICE RS_INLINE int rs_popcll(unsigned long long x) { return __popcll(x); }

/* ------------------------------------------------------------------------ */
#else
#error "portability.h: compile with NVRTC/nvcc, hiprtc/hipcc, or define RS_HOST_EMULATION"
#endif

/* ======================================================================== */
/* Common to every branch: types from the -D macros, complex numbers.       */
RS_BEGIN_NAMESPACE

#if RS_OFFSET64
typedef long long offset_t;
#else
typedef int offset_t;
#endif
#if RS_INDEX64
typedef long long index_t;
#else
typedef int index_t;
#endif

/* Largest value of offset_t / index_t: rs_limits<T>::max(). */
template <class T>
struct rs_limits;
template <>
struct rs_limits<int> {
  static RS_DEVICE RS_INLINE int max() { return RS_INT_MAX; }
};
template <>
struct rs_limits<long long> {
  static RS_DEVICE RS_INLINE long long max() { return RS_LLONG_MAX; }
};

/* {re, im}: the layout of num_complex::Complex and cuComplex. */
template <class F>
struct rs_complex {
  F re, im;
};
template <class F>
RS_DEVICE RS_INLINE rs_complex<F> operator+(rs_complex<F> a, rs_complex<F> b) {
  rs_complex<F> r;
  r.re = a.re + b.re;
  r.im = a.im + b.im;
  return r;
}
template <class F>
RS_DEVICE RS_INLINE rs_complex<F> operator*(rs_complex<F> a, rs_complex<F> b) {
  rs_complex<F> r;
  r.re = a.re * b.re - a.im * b.im;
  r.im = a.re * b.im + a.im * b.re;
  return r;
}
template <class F>
RS_DEVICE RS_INLINE rs_complex<F>& operator+=(rs_complex<F>& a, rs_complex<F> b) {
  a.re += b.re;
  a.im += b.im;
  return a;
}

#if RS_VALUE == 0
typedef float value_t;
#elif RS_VALUE == 1
typedef double value_t;
#elif RS_VALUE == 2
typedef rs_complex<float> value_t;
#else
typedef rs_complex<double> value_t;
#endif

template <class T>
struct rs_zero_of {
  static RS_DEVICE RS_INLINE T get() { return T(0); }
};
template <class F>
struct rs_zero_of<rs_complex<F> > {
  static RS_DEVICE RS_INLINE rs_complex<F> get() {
    rs_complex<F> z;
    z.re = F(0);
    z.im = F(0);
    return z;
  }
};
/* rs_zero<value_t>(): 0 or {0, 0}. */
template <class T>
RS_DEVICE RS_INLINE T rs_zero() {
  return rs_zero_of<T>::get();
}

RS_DEVICE RS_INLINE bool rs_is_zero(float v) { return v == 0.0f; }
RS_DEVICE RS_INLINE bool rs_is_zero(double v) { return v == 0.0; }
template <class F>
RS_DEVICE RS_INLINE bool rs_is_zero(rs_complex<F> v) {
  return v.re == F(0) && v.im == F(0);
}

/* Atomic += on a value: complex values take two independent adds. */
RS_DEVICE RS_INLINE void rs_atomic_add_value(float* p, float v) { rs_atomic_add(p, v); }
RS_DEVICE RS_INLINE void rs_atomic_add_value(double* p, double v) { rs_atomic_add(p, v); }
template <class F>
RS_DEVICE RS_INLINE void rs_atomic_add_value(rs_complex<F>* p, rs_complex<F> v) {
  rs_atomic_add(&p->re, v.re);
  rs_atomic_add(&p->im, v.im);
}

/* op(X) in CSR, passed to kernels by value; #[repr(C)] KernelCsr in Rust. */
struct rs_csr {
  const offset_t* rows; /* nrows + 1 */
  const index_t* cols;  /* nnz */
  const value_t* vals;  /* nnz, may be NULL in symbolic kernels */
  long long nrows, ncols, nnz;
  int base; /* 0 or 1 */
  int pad_;
};

RS_END_NAMESPACE

#endif /* RS_PORTABILITY_H */
