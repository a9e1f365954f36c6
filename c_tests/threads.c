/*
 * Concurrency and determinism:
 * 1. 8 pthreads at once, each with its own handle (SetNumThreads 1, 2, or the
 *    default), each running 20 products of different random integer-valued
 *    matrices (all value types, index types, bases, ops) through the
 *    three-phase flow, checked against the dense reference. Each thread also
 *    checks that its last error message is its own (thread-local).
 * 2. The same product on handles with 1, 2 and 3 threads (and with the
 *    default pool) gives bitwise-identical C (non-integer values, so the
 *    summation order would show), for DEFAULT, DETERMINISTIC and ALG1.
 * 3. Changing a handle's thread count between the phases of one product.
 */
#include "common.h"

#include <pthread.h>

#define NUM_WORKERS 8

typedef struct {
    int id;
    int num_threads; /* 0: keep the default */
    int iterations;
    int failures;
    int products;
} worker_t;

typedef struct {
    void *off, *col, *val;
    int64_t nnz;
} result_t;

/* Runs C = alpha op(A) op(B) + beta C through the three phases into newly
 * allocated arrays. Returns 0 on success (the status is printed otherwise). */
static void three_phase(rusparseHandle_t h, rusparseOperation_t opA, rusparseOperation_t opB,
                        const void *alpha, csr_t *A, csr_t *B, const void *beta, int64_t m,
                        int64_t n, rusparseIndexType_t ot, rusparseIndexType_t ct, int base,
                        rusparseDataType_t dt, rusparseSpGEMMAlg_t alg, result_t *out) {
    rusparseSpMatDescr_t C;
    rusparseSpGEMMDescr_t descr;
    size_t s1 = 0, s2 = 0;
    void *b1, *b2;
    int64_t r, c;
    CHECK(rusparseCreateCsr(&C, m, n, 0, NULL, NULL, NULL, ot, ct, (rusparseIndexBase_t)base, dt));
    CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseSpGEMM_workEstimation(h, opA, opB, alpha, A->d, B->d, beta, C, dt, alg, descr, &s1, NULL));
    b1 = xmalloc(s1);
    CHECK(rusparseSpGEMM_workEstimation(h, opA, opB, alpha, A->d, B->d, beta, C, dt, alg, descr, &s1, b1));
    CHECK(rusparseSpGEMM_compute(h, opA, opB, alpha, A->d, B->d, beta, C, dt, alg, descr, &s2, NULL));
    b2 = xmalloc(s2);
    CHECK(rusparseSpGEMM_compute(h, opA, opB, alpha, A->d, B->d, beta, C, dt, alg, descr, &s2, b2));
    CHECK(rusparseSpMatGetSize(C, &r, &c, &out->nnz));
    out->off = xmalloc(it_size(ot) * (size_t)(m + 1));
    out->col = xmalloc(it_size(ct) * (size_t)out->nnz);
    out->val = xmalloc(dt_size(dt) * (size_t)out->nnz);
    CHECK(rusparseCsrSetPointers(C, out->off, out->col, out->val));
    CHECK(rusparseSpGEMM_copy(h, opA, opB, alpha, A->d, B->d, beta, C, dt, alg, descr));
    CHECK(rusparseSpGEMM_destroyDescr(descr));
    CHECK(rusparseDestroySpMat(C));
    free(b1);
    free(b2);
}

static void result_free(result_t *r) {
    free(r->off);
    free(r->col);
    free(r->val);
}

static void *worker(void *arg) {
    static const rusparseDataType_t dts[] = {RUSPARSE_R_32F, RUSPARSE_R_64F, RUSPARSE_C_32F,
                                             RUSPARSE_C_64F};
    static const rusparseIndexType_t its[][2] = {{RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I},
                                                 {RUSPARSE_INDEX_64I, RUSPARSE_INDEX_64I},
                                                 {RUSPARSE_INDEX_64I, RUSPARSE_INDEX_32I}};
    worker_t *w = (worker_t *)arg;
    rusparseHandle_t h;
    rng_t rng;
    int it, nt = -1;
    int version;

    rng.s = 0x7000u + (uint64_t)w->id * 7919u;
    /* the main thread's last error is not visible here */
    if (strcmp(rusparseGetLastErrorMessage(), "") != 0) {
        fprintf(stderr, "worker %d: inherited last error \"%s\"\n", w->id, rusparseGetLastErrorMessage());
        w->failures++;
    }
    CHECK(rusparseCreate(&h));
    if (w->num_threads > 0) {
        CHECK(rusparseSetNumThreads(h, w->num_threads));
        CHECK(rusparseGetNumThreads(h, &nt));
        if (nt != w->num_threads) {
            fprintf(stderr, "worker %d: GetNumThreads = %d, set %d\n", w->id, nt, w->num_threads);
            w->failures++;
        }
    }
    for (it = 0; it < w->iterations; it++) {
        rusparseDataType_t dt = dts[(it + w->id) % 4];
        rusparseIndexType_t ot = its[(it + 2 * w->id) % 3][0], ct = its[(it + 2 * w->id) % 3][1];
        int base = (int)rng_range(&rng, 0, 1);
        rusparseOperation_t opA = (rusparseOperation_t)rng_range(&rng, 0, 2);
        rusparseOperation_t opB = (rusparseOperation_t)rng_range(&rng, 0, 2);
        rusparseSpGEMMAlg_t alg = (rusparseSpGEMMAlg_t)rng_range(&rng, 0, 5);
        int cx = dt_is_complex(dt) ? TM_COMPLEX : 0;
        int64_t m = rng_range(&rng, 1, 24), k = rng_range(&rng, 1, 24), n = rng_range(&rng, 1, 24);
        tmat_t a = tmat_random(&rng, opA ? k : m, opA ? m : k, (int)rng_range(&rng, 5, 50),
                               TM_UNSORTED | TM_DUPLICATES | cx);
        tmat_t b = tmat_random(&rng, opB ? n : k, opB ? k : n, (int)rng_range(&rng, 5, 50), TM_UNSORTED | cx);
        csr_t A = csr_make(&a, ot, ct, base, dt), B = csr_make(&b, ot, ct, base, dt);
        cf64_t alpha_v = cplx((double)rng_range(&rng, -3, 3), cx ? (double)rng_range(&rng, -2, 2) : 0.0);
        scalar_t alpha = make_scalar(dt, alpha_v), beta = make_scalar(dt, cplx(0, 0));
        result_t res;
        dense_t ref;
        char label[160];

        three_phase(h, opA, opB, &alpha, &A, &B, &beta, m, n, ot, ct, base, dt, alg, &res);
        ref = dense_product(&a, opA, &b, opB);
        snprintf(label, sizeof label, "worker %d (threads %d) product %d: %s %s/%s base %d op %s%s alg %d",
                 w->id, w->num_threads, it, dt_name(dt), it_name(ot), it_name(ct), base, op_name(opA),
                 op_name(opB), (int)alg);
        w->failures += check_csr(label, &ref, res.nnz, res.off, ot, res.col, ct, res.val, dt, base, alpha_v,
                                 cplx(0, 0), NULL);
        w->products++;
        dense_free(&ref);
        result_free(&res);
        csr_free(&A);
        csr_free(&B);
        tmat_free(&a);
        tmat_free(&b);

        if (it == w->iterations / 2) {
            /* an error on this thread is seen on this thread only */
            if (rusparseGetVersion(NULL, &version) != RUSPARSE_STATUS_NOT_INITIALIZED ||
                strstr(rusparseGetLastErrorMessage(), "rusparseGetVersion") == NULL) {
                fprintf(stderr, "worker %d: no thread-local error message: \"%s\"\n", w->id,
                        rusparseGetLastErrorMessage());
                w->failures++;
            }
        }
    }
    CHECK(rusparseDestroy(h));
    return NULL;
}

static void test_concurrent(int quick) {
    pthread_t tids[NUM_WORKERS];
    worker_t ws[NUM_WORKERS];
    int i, version;
    /* leave an error on the main thread: workers must not see it */
    (void)rusparseGetVersion(NULL, &version);
    for (i = 0; i < NUM_WORKERS; i++) {
        ws[i].id = i;
        ws[i].num_threads = i % 3 == 0 ? 1 : i % 3 == 1 ? 2 : 0;
        ws[i].iterations = quick ? 8 : 20;
        ws[i].failures = 0;
        ws[i].products = 0;
        REQUIRE(pthread_create(&tids[i], NULL, worker, &ws[i]) == 0, "pthread_create");
    }
    for (i = 0; i < NUM_WORKERS; i++) REQUIRE(pthread_join(tids[i], NULL) == 0, "pthread_join");
    for (i = 0; i < NUM_WORKERS; i++) {
        EXPECT_TRUE(ws[i].failures == 0, "worker %d had %d failures", i, ws[i].failures);
        EXPECT_TRUE(ws[i].products == ws[i].iterations, "worker %d ran %d products", i, ws[i].products);
    }
    EXPECT_TRUE(strstr(rusparseGetLastErrorMessage(), "rusparseGetVersion") != NULL,
                "the main thread's last error changed: \"%s\"", rusparseGetLastErrorMessage());
}

static void test_bitwise_identical(int quick) {
    static const rusparseSpGEMMAlg_t algs[] = {RUSPARSE_SPGEMM_DEFAULT, RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC,
                                               RUSPARSE_SPGEMM_ALG1};
    static const rusparseDataType_t dts[] = {RUSPARSE_R_64F, RUSPARSE_C_32F};
    static const int threads[] = {1, 2, 3, 0};
    int64_t n = quick ? 120 : 400;
    rng_t rng = {31337};
    int ai, di, ti;
    for (di = 0; di < 2; di++) {
        rusparseDataType_t dt = dts[di];
        int cx = dt_is_complex(dt) ? TM_COMPLEX : 0;
        /* ~ 6 % density, unsorted with duplicates: many products per row */
        tmat_t a = tmat_random(&rng, n, n, 6, TM_FRACTIONAL | TM_UNSORTED | TM_DUPLICATES | cx);
        tmat_t b = tmat_random(&rng, n, n, 6, TM_FRACTIONAL | TM_UNSORTED | cx);
        csr_t A = csr_make(&a, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, dt);
        csr_t B = csr_make(&b, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, dt);
        scalar_t alpha = make_scalar(dt, cplx(0.37, cx ? 1.1 : 0)), beta = make_scalar(dt, cplx(0, 0));
        for (ai = 0; ai < 3; ai++) {
            result_t first;
            memset(&first, 0, sizeof first);
            for (ti = 0; ti < 4; ti++) {
                rusparseHandle_t h;
                result_t res;
                CHECK(rusparseCreate(&h));
                if (threads[ti] > 0) CHECK(rusparseSetNumThreads(h, threads[ti]));
                three_phase(h, RUSPARSE_OPERATION_NON_TRANSPOSE, RUSPARSE_OPERATION_TRANSPOSE, &alpha, &A, &B,
                            &beta, n, n, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, dt, algs[ai], &res);
                CHECK(rusparseDestroy(h));
                if (ti == 0) {
                    first = res;
                    continue;
                }
                EXPECT_TRUE(res.nnz == first.nnz &&
                                memcmp(res.off, first.off, sizeof(int32_t) * (size_t)(n + 1)) == 0 &&
                                memcmp(res.col, first.col, sizeof(int32_t) * (size_t)res.nnz) == 0 &&
                                memcmp(res.val, first.val, dt_size(dt) * (size_t)res.nnz) == 0,
                            "%s alg %d: C with %d threads differs bitwise from C with 1 thread", dt_name(dt),
                            (int)algs[ai], threads[ti]);
                result_free(&res);
            }
            result_free(&first);
        }
        csr_free(&A);
        csr_free(&B);
        tmat_free(&a);
        tmat_free(&b);
    }
}

/* SetNumThreads between the phases of one product on one handle. */
static void test_threads_between_phases(void) {
    rng_t rng = {99};
    tmat_t a = tmat_random(&rng, 30, 20, 20, TM_UNSORTED), b = tmat_random(&rng, 20, 25, 20, 0);
    csr_t A = csr_make(&a, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, RUSPARSE_R_64F);
    csr_t B = csr_make(&b, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, RUSPARSE_R_64F);
    rusparseHandle_t h;
    rusparseSpMatDescr_t C;
    rusparseSpGEMMDescr_t descr;
    double one = 1, zero = 0;
    size_t s1 = 0, s2 = 0;
    void *b1, *b2, *off, *col, *val;
    int64_t r, c, nnz;
    dense_t ref = dense_product(&a, RUSPARSE_OPERATION_NON_TRANSPOSE, &b, RUSPARSE_OPERATION_NON_TRANSPOSE);
    const rusparseOperation_t N = RUSPARSE_OPERATION_NON_TRANSPOSE;
    const rusparseSpGEMMAlg_t alg = RUSPARSE_SPGEMM_DEFAULT;

    CHECK(rusparseCreate(&h));
    CHECK(rusparseSetNumThreads(h, 2));
    CHECK(rusparseCreateCsr(&C, 30, 25, 0, NULL, NULL, NULL, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseSpGEMM_workEstimation(h, N, N, &one, A.d, B.d, &zero, C, RUSPARSE_R_64F, alg, descr, &s1, NULL));
    b1 = xmalloc(s1);
    CHECK(rusparseSpGEMM_workEstimation(h, N, N, &one, A.d, B.d, &zero, C, RUSPARSE_R_64F, alg, descr, &s1, b1));
    CHECK(rusparseSetNumThreads(h, 1));
    CHECK(rusparseSpGEMM_compute(h, N, N, &one, A.d, B.d, &zero, C, RUSPARSE_R_64F, alg, descr, &s2, NULL));
    b2 = xmalloc(s2);
    CHECK(rusparseSpGEMM_compute(h, N, N, &one, A.d, B.d, &zero, C, RUSPARSE_R_64F, alg, descr, &s2, b2));
    CHECK(rusparseSetNumThreads(h, 0));
    CHECK(rusparseSpMatGetSize(C, &r, &c, &nnz));
    off = xmalloc(sizeof(int32_t) * 31);
    col = xmalloc(sizeof(int32_t) * (size_t)nnz);
    val = xmalloc(sizeof(double) * (size_t)nnz);
    CHECK(rusparseCsrSetPointers(C, off, col, val));
    CHECK(rusparseSpGEMM_copy(h, N, N, &one, A.d, B.d, &zero, C, RUSPARSE_R_64F, alg, descr));
    if (check_csr("SetNumThreads between phases", &ref, nnz, off, RUSPARSE_INDEX_32I, col, RUSPARSE_INDEX_32I, val,
                  RUSPARSE_R_64F, 0, cplx(1, 0), cplx(0, 0), NULL))
        test_failures++;
    CHECK(rusparseSpGEMM_destroyDescr(descr));
    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseDestroy(h));
    dense_free(&ref);
    csr_free(&A);
    csr_free(&B);
    tmat_free(&a);
    tmat_free(&b);
    free(b1);
    free(b2);
    free(off);
    free(col);
    free(val);
}

int main(int argc, char **argv) {
    int quick = quick_mode(argc, argv);
    test_concurrent(quick);
    test_bitwise_identical(quick);
    test_threads_between_phases();
    printf("threads: %d workers x %d products, bitwise determinism over 1/2/3/default threads\n", NUM_WORKERS,
           quick ? 8 : 20);
    return test_summary("threads");
}
