/*
 * rusparse demo: C = A * A for the 2-D 5-point Laplacian on an n x n grid,
 * through exactly the call sequence a cuSPARSE SpGEMM program uses.
 * Prints nnz(C), the time of each phase, and a check of every entry of C
 * against a simple dense-accumulator reference.
 *
 *   rusparse-demo [n] [threads]      (defaults: n = 1000, all cores)
 */
#define _POSIX_C_SOURCE 199309L
#include "rusparse.h"

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
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    if (n < 1) { fprintf(stderr, "usage: %s [n >= 1] [threads]\n", argv[0]); return 2; }

    int *ao, *ac; double *av;
    int64_t rows = (int64_t)n * n, nnz = laplacian(n, &ao, &ac, &av);

    rusparseHandle_t h;
    CHECK(rusparseCreate(&h));
    if (threads > 0) CHECK(rusparseSetNumThreads(h, threads));
    int used = 0, version = 0;
    CHECK(rusparseGetNumThreads(h, &used));
    CHECK(rusparseGetVersion(h, &version));
    printf("rusparse %d.%d.%d on the CPU with %d threads\n", version / 1000, version % 1000 / 100,
           version % 100, used);
    printf("A: 5-point Laplacian on a %d x %d grid: %lld rows, %lld nonzeros\n", n, n,
           (long long)rows, (long long)nnz);

    rusparseSpMatDescr_t A, C;
    CHECK(rusparseCreateCsr(&A, rows, rows, nnz, ao, ac, av, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    CHECK(rusparseCreateCsr(&C, rows, rows, 0, NULL, NULL, NULL, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_32I, RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    rusparseSpGEMMDescr_t d;
    CHECK(rusparseSpGEMM_createDescr(&d));
    double alpha = 1.0, beta = 0.0;
    rusparseOperation_t op = RUSPARSE_OPERATION_NON_TRANSPOSE;
    rusparseSpGEMMAlg_t alg = RUSPARSE_SPGEMM_DEFAULT;
    size_t size1 = 0, size2 = 0;
    void *buf1, *buf2;

    double t0 = now();
    CHECK(rusparseSpGEMM_workEstimation(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d,
                                        &size1, NULL));
    buf1 = xmalloc(size1);
    CHECK(rusparseSpGEMM_workEstimation(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d,
                                        &size1, buf1));
    double t1 = now();
    CHECK(rusparseSpGEMM_compute(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d, &size2,
                                 NULL));
    buf2 = xmalloc(size2);
    CHECK(rusparseSpGEMM_compute(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d, &size2,
                                 buf2));
    int64_t crows, ccols, cnnz, nprod;
    CHECK(rusparseSpMatGetSize(C, &crows, &ccols, &cnnz));
    CHECK(rusparseSpGEMM_getNumProducts(d, &nprod));
    double t2 = now();
    int *co = xmalloc(sizeof(int) * (size_t)(crows + 1));
    int *cc = xmalloc(sizeof(int) * (size_t)cnnz);
    double *cv = xmalloc(sizeof(double) * (size_t)cnnz);
    CHECK(rusparseCsrSetPointers(C, co, cc, cv));
    CHECK(rusparseSpGEMM_copy(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d));
    double t3 = now();

    printf("C = A * A: nnz(C) = %lld, products = %lld\n", (long long)cnnz, (long long)nprod);
    printf("time: work estimation %.2f ms, compute (symbolic) %.2f ms, copy (numeric) %.2f ms,"
           " total %.2f ms = %.2f GFLOPS\n",
           1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2), 1e3 * (t3 - t0),
           2.0 * (double)nprod / (t3 - t0) * 1e-9);
    int64_t bad = check(rows, ao, ac, av, co, cc, cv);
    printf("check against the reference: %s (%lld wrong rows of %lld)\n", bad ? "FAILED" : "OK",
           (long long)bad, (long long)rows);

    CHECK(rusparseSpGEMM_destroyDescr(d));
    CHECK(rusparseDestroySpMat(A));
    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseDestroy(h));
    free(buf1); free(buf2); free(co); free(cc); free(cv); free(ao); free(ac); free(av);
    return bad ? 1 : 0;
}
