/*
 * rusparse demo: C = A * A for the 2-D 5-point Laplacian on an n x n grid,
 * through exactly the call sequence a cuSPARSE SpGEMM program uses.
 * Prints where it ran, nnz(C), the time of each phase, and a check of every
 * entry of C against a simple dense-accumulator reference.
 *
 * With an NVIDIA GPU and driver present (libcuda.so.1 loads and finds a
 * device) the matrices are put in device memory and the product runs on the
 * GPU on a CUDA handle; otherwise, or with --cpu, on the CPU. The driver is
 * opened with dlopen, so the demo builds and runs on machines without CUDA.
 * With RUSPARSE_REQUIRE_GPU=1 in the environment a missing GPU is an error
 * (exit 1, with the reason) instead of a fallback to the CPU.
 *
 *   rusparse-demo [--cpu] [n] [threads]      (defaults: n = 1000, all cores)
 */
#define _POSIX_C_SOURCE 200809L
#include "rusparse.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                              \
    do {                                                                         \
        rusparseStatus_t s_ = (call);                                            \
        if (s_ != RUSPARSE_STATUS_SUCCESS) {                                     \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__,   \
                    #call, rusparseGetErrorName(s_), rusparseGetLastErrorMessage()); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* ---- Where the arrays live: host memory, or a GPU through libcuda ---- */

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct {
    void *lib;
    void *ctx;
    int device;
    CUresult (*init)(unsigned);
    CUresult (*device_count)(int *);
    CUresult (*device_get)(int *, int);
    CUresult (*device_name)(char *, int, int);
    CUresult (*ctx_retain)(void **, int);
    CUresult (*ctx_set_current)(void *);
    CUresult (*ctx_synchronize)(void);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
} Gpu;

static int gpu_symbol(Gpu *g, const char *name, void *fn) {
    void *p = dlsym(g->lib, name);
    if (!p) return 0;
    memcpy(fn, &p, sizeof p); /* object to function pointer, as POSIX allows */
    return 1;
}

/* Opens the first GPU; on failure says why in `why` and returns 0. */
static int gpu_open(Gpu *g, char *why, size_t why_size) {
    memset(g, 0, sizeof *g);
    g->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!g->lib) {
        snprintf(why, why_size, "no NVIDIA driver (libcuda.so.1 not found)");
        return 0;
    }
    int count = 0;
    if (!gpu_symbol(g, "cuInit", &g->init) || !gpu_symbol(g, "cuDeviceGetCount", &g->device_count) ||
        !gpu_symbol(g, "cuDeviceGet", &g->device_get) ||
        !gpu_symbol(g, "cuDeviceGetName", &g->device_name) ||
        !gpu_symbol(g, "cuDevicePrimaryCtxRetain", &g->ctx_retain) ||
        !gpu_symbol(g, "cuCtxSetCurrent", &g->ctx_set_current) ||
        !gpu_symbol(g, "cuCtxSynchronize", &g->ctx_synchronize) ||
        !gpu_symbol(g, "cuMemAlloc_v2", &g->mem_alloc) ||
        !gpu_symbol(g, "cuMemFree_v2", &g->mem_free) ||
        !gpu_symbol(g, "cuMemcpyHtoD_v2", &g->htod) ||
        !gpu_symbol(g, "cuMemcpyDtoH_v2", &g->dtoh)) {
        snprintf(why, why_size, "libcuda.so.1 lacks a driver API function");
    } else if (g->init(0) != 0 || g->device_count(&count) != 0 || count < 1) {
        snprintf(why, why_size, "the NVIDIA driver found no GPU");
    } else if (g->device_get(&g->device, 0) != 0 || g->ctx_retain(&g->ctx, g->device) != 0 ||
               g->ctx_set_current(g->ctx) != 0) {
        snprintf(why, why_size, "could not open GPU 0");
    } else {
        return 1;
    }
    dlclose(g->lib);
    g->lib = NULL;
    return 0;
}

/* Copies `bytes` of host data to a new device array (host: a new copy). */
static void *upload(const Gpu *g, const void *src, size_t bytes) {
    if (!g) {
        void *p = xmalloc(bytes);
        if (bytes) memcpy(p, src, bytes);
        return p;
    }
    CUdeviceptr d = 0;
    if (g->mem_alloc(&d, bytes ? bytes : 1) != 0 || (bytes && g->htod(d, src, bytes) != 0)) {
        fprintf(stderr, "GPU allocation or copy of %zu bytes failed\n", bytes);
        exit(1);
    }
    return (void *)(uintptr_t)d;
}

/* A new uninitialised array of `bytes` where the product runs. */
static void *allocate(const Gpu *g, size_t bytes) {
    if (!g) return xmalloc(bytes);
    CUdeviceptr d = 0;
    if (g->mem_alloc(&d, bytes ? bytes : 1) != 0) {
        fprintf(stderr, "GPU allocation of %zu bytes failed\n", bytes);
        exit(1);
    }
    return (void *)(uintptr_t)d;
}

/* A host copy of an array made by `upload` / `allocate`. */
static void *download(const Gpu *g, void *src, size_t bytes) {
    void *h = xmalloc(bytes);
    if (!g) {
        if (bytes) memcpy(h, src, bytes);
    } else if (bytes && g->dtoh(h, (CUdeviceptr)(uintptr_t)src, bytes) != 0) {
        fprintf(stderr, "copying %zu bytes back from the GPU failed\n", bytes);
        exit(1);
    }
    return h;
}

static void release(const Gpu *g, void *p) {
    if (g)
        g->mem_free((CUdeviceptr)(uintptr_t)p);
    else
        free(p);
}

/* 5-point Laplacian: 4 on the diagonal, -1 for each grid neighbour. */
static int64_t laplacian(int n, int **offsets, int **cols, double **vals) {
    int64_t rows = (int64_t)n * n, k = 0;
    *offsets = xmalloc(sizeof(int) * (size_t)(rows + 1));
    *cols = xmalloc(sizeof(int) * (size_t)(5 * rows));
    *vals = xmalloc(sizeof(double) * (size_t)(5 * rows));
    for (int64_t r = 0; r < rows; r++) {
        int i = (int)(r / n), j = (int)(r % n);
        (*offsets)[r] = (int)k;
        if (i > 0) { (*cols)[k] = (int)(r - n); (*vals)[k++] = -1.0; }
        if (j > 0) { (*cols)[k] = (int)(r - 1); (*vals)[k++] = -1.0; }
        (*cols)[k] = (int)r; (*vals)[k++] = 4.0;
        if (j < n - 1) { (*cols)[k] = (int)(r + 1); (*vals)[k++] = -1.0; }
        if (i < n - 1) { (*cols)[k] = (int)(r + n); (*vals)[k++] = -1.0; }
    }
    (*offsets)[rows] = (int)k;
    return k;
}

/* Checks every row of C against a dense-accumulator product; returns the
 * number of wrong rows. */
static int64_t check(int64_t rows, const int *ao, const int *ac, const double *av,
                     const int *co, const int *cc, const double *cv) {
    double *acc = calloc((size_t)rows, sizeof(double));
    char *seen = calloc((size_t)rows, 1);
    int *list = xmalloc(sizeof(int) * (size_t)rows);
    int64_t bad = 0;
    if (!acc || !seen) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int64_t r = 0; r < rows; r++) {
        int len = 0, ok = 1;
        for (int p = ao[r]; p < ao[r + 1]; p++)
            for (int q = ao[ac[p]]; q < ao[ac[p] + 1]; q++) {
                int c = ac[q];
                if (!seen[c]) { seen[c] = 1; list[len++] = c; acc[c] = 0.0; }
                acc[c] += av[p] * av[q];
            }
        if (co[r + 1] - co[r] != len) ok = 0;
        for (int p = co[r]; ok && p < co[r + 1]; p++) {
            if (!seen[cc[p]] || cv[p] != acc[cc[p]]) ok = 0;
            if (p > co[r] && cc[p] <= cc[p - 1]) ok = 0; /* sorted, no duplicates */
        }
        for (int t = 0; t < len; t++) seen[list[t]] = 0;
        bad += !ok;
    }
    free(acc); free(seen); free(list);
    return bad;
}

int main(int argc, char **argv) {
    int force_cpu = argc > 1 && strcmp(argv[1], "--cpu") == 0;
    if (force_cpu) { argc--; argv++; }
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    if (n < 1) { fprintf(stderr, "usage: rusparse-demo [--cpu] [n >= 1] [threads]\n"); return 2; }

    int *ao, *ac; double *av;
    int64_t rows = (int64_t)n * n, nnz = laplacian(n, &ao, &ac, &av);

    /* The GPU when there is one (and the CUDA back end can use it). */
    Gpu gpu_state;
    const Gpu *gpu = NULL;
    char why[160] = "--cpu given";
    rusparseHandle_t h = NULL;
    if (!force_cpu && gpu_open(&gpu_state, why, sizeof why)) {
        rusparseStatus_t s = rusparseCreateWithBackend(&h, RUSPARSE_BACKEND_CUDA);
        if (s == RUSPARSE_STATUS_SUCCESS) {
            gpu = &gpu_state;
        } else {
            snprintf(why, sizeof why, "%s", rusparseGetLastErrorMessage());
            h = NULL;
        }
    }
    const char *require = getenv("RUSPARSE_REQUIRE_GPU");
    if (!gpu && !force_cpu && require && strcmp(require, "1") == 0) {
        fprintf(stderr, "RUSPARSE_REQUIRE_GPU=1 but the GPU cannot run the demo: %s\n", why);
        return 1;
    }
    if (!gpu) CHECK(rusparseCreateWithBackend(&h, RUSPARSE_BACKEND_CPU));
    if (threads > 0 && !gpu) CHECK(rusparseSetNumThreads(h, threads));
    int used = 0, version = 0;
    CHECK(rusparseGetVersion(h, &version));
    printf("rusparse %d.%d.%d ", version / 1000, version % 1000 / 100, version % 100);
    if (gpu) {
        /* the device, its driver and the NVRTC that compiles the kernels */
        char line[512] = "?";
        CHECK(rusparseGetBackendDescription(h, line, sizeof line));
        printf("on the GPU: %s\n", line);
    } else {
        CHECK(rusparseGetNumThreads(h, &used));
        printf("on the CPU with %d threads (GPU not used: %s)\n", used, why);
    }
    printf("A: 5-point Laplacian on a %d x %d grid: %lld rows, %lld nonzeros\n", n, n,
           (long long)rows, (long long)nnz);

    /* A where the product runs (on the CPU a copy, as a GPU needs one). */
    void *dao = upload(gpu, ao, sizeof(int) * (size_t)(rows + 1));
    void *dac = upload(gpu, ac, sizeof(int) * (size_t)nnz);
    void *dav = upload(gpu, av, sizeof(double) * (size_t)nnz);
    rusparseSpMatDescr_t A, C;
    CHECK(rusparseCreateCsr(&A, rows, rows, nnz, dao, dac, dav, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_32I, RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    CHECK(rusparseCreateCsr(&C, rows, rows, 0, NULL, NULL, NULL, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_32I, RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    rusparseSpGEMMDescr_t d;
    CHECK(rusparseSpGEMM_createDescr(&d));
    double alpha = 1.0, beta = 0.0;
    rusparseOperation_t op = RUSPARSE_OPERATION_NON_TRANSPOSE;
    rusparseSpGEMMAlg_t alg = RUSPARSE_SPGEMM_DEFAULT;
    size_t size1 = 0, size2 = 0;
    void *buf1, *buf2;

    /* (On a GPU the first work estimation also compiles the kernels, or
     * reads them from the disk cache.) */
    double t0 = now();
    CHECK(rusparseSpGEMM_workEstimation(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d,
                                        &size1, NULL));
    buf1 = allocate(gpu, size1);
    CHECK(rusparseSpGEMM_workEstimation(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d,
                                        &size1, buf1));
    double t1 = now();
    CHECK(rusparseSpGEMM_compute(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d, &size2,
                                 NULL));
    buf2 = allocate(gpu, size2);
    CHECK(rusparseSpGEMM_compute(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d, &size2,
                                 buf2));
    int64_t crows, ccols, cnnz, nprod;
    CHECK(rusparseSpMatGetSize(C, &crows, &ccols, &cnnz));
    CHECK(rusparseSpGEMM_getNumProducts(d, &nprod));
    double t2 = now();
    void *dco = allocate(gpu, sizeof(int) * (size_t)(crows + 1));
    void *dcc = allocate(gpu, sizeof(int) * (size_t)cnnz);
    void *dcv = allocate(gpu, sizeof(double) * (size_t)cnnz);
    CHECK(rusparseCsrSetPointers(C, dco, dcc, dcv));
    CHECK(rusparseSpGEMM_copy(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d));
    if (gpu && gpu->ctx_synchronize() != 0) {
        fprintf(stderr, "the GPU reported an error while computing C\n");
        return 1;
    }
    double t3 = now();

    printf("C = A * A: nnz(C) = %lld, products = %lld\n", (long long)cnnz, (long long)nprod);
    printf("time: work estimation %.2f ms, compute (symbolic) %.2f ms, copy (numeric) %.2f ms,"
           " total %.2f ms = %.2f GFLOPS\n",
           1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2), 1e3 * (t3 - t0),
           2.0 * (double)nprod / (t3 - t0) * 1e-9);
    int *co = download(gpu, dco, sizeof(int) * (size_t)(crows + 1));
    int *cc = download(gpu, dcc, sizeof(int) * (size_t)cnnz);
    double *cv = download(gpu, dcv, sizeof(double) * (size_t)cnnz);
    int64_t bad = check(rows, ao, ac, av, co, cc, cv);
    printf("check against the reference: %s (%lld wrong rows of %lld)\n", bad ? "FAILED" : "OK",
           (long long)bad, (long long)rows);

    CHECK(rusparseSpGEMM_destroyDescr(d));
    CHECK(rusparseDestroySpMat(A));
    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseDestroy(h));
    void *device_arrays[] = {dao, dac, dav, buf1, buf2, dco, dcc, dcv};
    for (size_t i = 0; i < sizeof device_arrays / sizeof device_arrays[0]; i++)
        release(gpu, device_arrays[i]);
    free(co); free(cc); free(cv); free(ao); free(ac); free(av);
    return bad ? 1 : 0;
}
