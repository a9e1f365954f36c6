/*
 * Host allocator hooks (rusparseSetAllocator) on a CPU handle with 2 threads:
 * 1. Argument errors: one hook of a pair NULL is INVALID_VALUE naming the
 *    missing one and changes nothing; a NULL handle is NOT_INITIALIZED.
 * 2. C = A * A for a tridiagonal A (2 on the diagonal, -1 beside it) through
 *    the three phases with counting hooks: the hooks are called, from the
 *    calling thread and from the handle's worker threads; C is the
 *    pentadiagonal product checked entry by entry; rusparseGetAllocator
 *    returns the hooks; after the descriptors and the handle are destroyed,
 *    every hooked byte has been given back.
 * 3. Hooks that refuse every allocation of 16 KiB or more after the first k
 *    (k = 0, 1, 2, ... until the product succeeds): each refusal fails the
 *    product cleanly with ALLOC_FAILED and a message, and nothing hooked is
 *    left once everything is destroyed; the same handle then multiplies
 *    correctly once the hooks stop refusing.
 * The library under test must be built with the cargo feature
 * c-allocator-hooks (the CMake build and scripts/test.sh do).
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

#define N 5000
#define BIG 16384

/* The message of the last failing call of multiply(). */
static char failure[1024];

typedef struct {
    atomic_long calls;       /* allocations made */
    atomic_long other_calls; /* ... by a thread other than the main one */
    atomic_long frees;
    atomic_long live;        /* bytes given and not yet back */
    atomic_long big_left;    /* allocations >= BIG still granted; < 0: no limit */
    pthread_t main_thread;
} counter_t;

static void *counting_alloc(size_t bytes, void *user) {
    counter_t *c = (counter_t *)user;
    if (bytes >= BIG && atomic_load(&c->big_left) >= 0 && atomic_fetch_sub(&c->big_left, 1) <= 0) {
        return NULL;
    }
    void *p = malloc(bytes);
    if (p != NULL) {
        atomic_fetch_add(&c->calls, 1);
        if (!pthread_equal(pthread_self(), c->main_thread)) atomic_fetch_add(&c->other_calls, 1);
        atomic_fetch_add(&c->live, (long)bytes);
    }
    return p;
}

static void counting_free(void *ptr, size_t bytes, void *user) {
    counter_t *c = (counter_t *)user;
    atomic_fetch_add(&c->frees, 1);
    atomic_fetch_sub(&c->live, (long)bytes);
    free(ptr);
}

static void *never_alloc(size_t bytes, void *stream, void *user) {
    (void)bytes, (void)stream, (void)user;
    return NULL;
}

static void never_free(void *ptr, size_t bytes, void *stream, void *user) {
    (void)ptr, (void)bytes, (void)stream, (void)user;
}

/* A: N x N tridiagonal, 2 on the diagonal and -1 beside it. */
typedef struct {
    int32_t off[N + 1];
    int32_t col[3 * N];
    double val[3 * N];
} tridiag_t;

static void tridiag(tridiag_t *a) {
    int32_t k = 0;
    for (int32_t i = 0; i < N; i++) {
        a->off[i] = k;
        for (int32_t j = i - 1; j <= i + 1; j++) {
            if (j < 0 || j >= N) continue;
            a->col[k] = j;
            a->val[k] = i == j ? 2.0 : -1.0;
            k++;
        }
    }
    a->off[N] = k;
}

static double a_at(int64_t i, int64_t j) {
    if (i < 0 || j < 0 || i >= N || j >= N) return 0.0;
    return i == j ? 2.0 : (i - j == 1 || j - i == 1) ? -1.0 : 0.0;
}

/* C = A * A through the three phases; returns the status of the first
 * failing call (its message left for the caller), checks C on success. */
static rusparseStatus_t multiply(rusparseHandle_t h, const tridiag_t *a) {
    const double alpha = 1.0, beta = 0.0;
    const rusparseOperation_t op = RUSPARSE_OPERATION_NON_TRANSPOSE;
    const rusparseSpGEMMAlg_t alg = RUSPARSE_SPGEMM_DEFAULT;
    rusparseSpMatDescr_t A, C;
    rusparseSpGEMMDescr_t d;
    size_t s1 = 0, s2 = 0;
    void *b1 = NULL, *b2 = NULL;
    int32_t *off = NULL, *col = NULL;
    double *val = NULL;
    int64_t rows, cols, nnz = 0;
    rusparseStatus_t s;
    CHECK(rusparseCreateCsr(&A, N, N, a->off[N], (void *)a->off, (void *)a->col, (void *)a->val,
                            RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_BASE_ZERO,
                            RUSPARSE_R_64F));
    CHECK(rusparseCreateCsr(&C, N, N, 0, NULL, NULL, NULL, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    CHECK(rusparseSpGEMM_createDescr(&d));
#define STEP(call)                                     \
    if ((s = (call)) != RUSPARSE_STATUS_SUCCESS) goto out
    STEP(rusparseSpGEMM_workEstimation(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d, &s1, NULL));
    b1 = xmalloc(s1);
    STEP(rusparseSpGEMM_workEstimation(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d, &s1, b1));
    STEP(rusparseSpGEMM_compute(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d, &s2, NULL));
    b2 = xmalloc(s2);
    STEP(rusparseSpGEMM_compute(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d, &s2, b2));
    CHECK(rusparseSpMatGetSize(C, &rows, &cols, &nnz));
    off = xmalloc(sizeof(int32_t) * (N + 1));
    col = xmalloc(sizeof(int32_t) * (size_t)nnz);
    val = xmalloc(sizeof(double) * (size_t)nnz);
    CHECK(rusparseCsrSetPointers(C, off, col, val));
    STEP(rusparseSpGEMM_copy(h, op, op, &alpha, A, A, &beta, C, RUSPARSE_R_64F, alg, d));
#undef STEP
    /* C is pentadiagonal: (i, j) for |i - j| <= 2, sorted, each the sum of
     * A(i, k) A(k, j). */
    EXPECT_TRUE(nnz == 5 * (int64_t)N - 6, "nnz(C) = %lld", (long long)nnz);
    for (int64_t i = 0, k = 0; i < N && nnz == 5 * (int64_t)N - 6; i++) {
        EXPECT_TRUE(off[i] == k, "off[%lld] = %d, expected %lld", (long long)i, off[i], (long long)k);
        for (int64_t j = i - 2; j <= i + 2; j++) {
            if (j < 0 || j >= N) continue;
            double want = 0.0;
            for (int64_t m = i - 1; m <= i + 1; m++) want += a_at(i, m) * a_at(m, j);
            if (col[k] != j || val[k] != want) {
                EXPECT_TRUE(0, "C(%lld, %lld): got column %d value %g, expected value %g",
                            (long long)i, (long long)j, col[k], val[k], want);
                i = N;
                break;
            }
            k++;
        }
    }
out:
    if (s != RUSPARSE_STATUS_SUCCESS) {
        snprintf(failure, sizeof failure, "%s", rusparseGetLastErrorMessage());
    }
    CHECK(rusparseSpGEMM_destroyDescr(d));
    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseDestroySpMat(A));
    free(b1), free(b2), free(off), free(col), free(val);
    return s;
}

static rusparseHandle_t hooked_handle(counter_t *c) {
    rusparseHandle_t h;
    CHECK(rusparseCreateWithBackend(&h, RUSPARSE_BACKEND_CPU));
    CHECK(rusparseSetNumThreads(h, 2));
    CHECK(rusparseSetAllocator(h, counting_alloc, counting_free, NULL, NULL, c));
    return h;
}

int main(void) {
    static tridiag_t a;
    static counter_t c;
    rusparseHandle_t h;
    tridiag(&a);
    c.main_thread = pthread_self();
    atomic_store(&c.big_left, -1);

    /* 1. Argument errors. */
    CHECK(rusparseCreateWithBackend(&h, RUSPARSE_BACKEND_CPU));
    EXPECT_STATUS_MSG(rusparseSetAllocator(h, counting_alloc, NULL, NULL, NULL, &c),
                      RUSPARSE_STATUS_INVALID_VALUE, "hostFree is NULL");
    EXPECT_STATUS_MSG(rusparseSetAllocator(h, NULL, counting_free, NULL, NULL, &c),
                      RUSPARSE_STATUS_INVALID_VALUE, "hostAlloc is NULL");
    EXPECT_STATUS_MSG(rusparseSetAllocator(h, NULL, NULL, never_alloc, NULL, &c),
                      RUSPARSE_STATUS_INVALID_VALUE, "deviceFree is NULL");
    EXPECT_STATUS_MSG(rusparseSetAllocator(h, counting_alloc, counting_free, NULL, never_free, &c),
                      RUSPARSE_STATUS_INVALID_VALUE, "deviceAlloc is NULL");
    EXPECT_STATUS(rusparseSetAllocator(NULL, NULL, NULL, NULL, NULL, NULL),
                  RUSPARSE_STATUS_NOT_INITIALIZED);
    {
        rusparseHostAlloc_t ha = counting_alloc;
        rusparseDeviceFree_t df = never_free;
        void *user = &c;
        CHECK(rusparseGetAllocator(h, &ha, NULL, NULL, &df, &user));
        EXPECT_TRUE(ha == NULL && df == NULL && user == NULL, "refused hooks were kept");
    }
    EXPECT_TRUE(atomic_load(&c.calls) == 0, "%ld hooked allocations", atomic_load(&c.calls));
    CHECK(rusparseDestroy(h));

    /* 2. A product through counting hooks. */
    h = hooked_handle(&c);
    {
        rusparseHostAlloc_t ha = NULL;
        rusparseHostFree_t hf = NULL;
        rusparseDeviceAlloc_t da = never_alloc;
        void *user = NULL;
        CHECK(rusparseGetAllocator(h, &ha, &hf, &da, NULL, &user));
        EXPECT_TRUE(ha == counting_alloc && hf == counting_free && da == NULL && user == &c,
                    "rusparseGetAllocator returned other hooks");
    }
    CHECK(multiply(h, &a));
    EXPECT_TRUE(atomic_load(&c.calls) > 10, "%ld hooked allocations", atomic_load(&c.calls));
    EXPECT_TRUE(atomic_load(&c.other_calls) > 0,
                "no hooked allocation on the handle's worker threads (%ld in all)",
                atomic_load(&c.calls));
    CHECK(multiply(h, &a)); /* again, with the scratch kept from the first */
    CHECK(rusparseDestroy(h));
    EXPECT_TRUE(atomic_load(&c.live) == 0 && atomic_load(&c.frees) == atomic_load(&c.calls),
                "%ld hooked bytes left, %ld frees for %ld allocations", atomic_load(&c.live),
                atomic_load(&c.frees), atomic_load(&c.calls));
    printf("allocator_hooks: %ld hooked allocations (%ld on worker threads)\n",
           atomic_load(&c.calls), atomic_load(&c.other_calls));

    /* 3. Refusals, one large allocation later each time. */
    {
        int k;
        for (k = 0; k < 200; k++) {
            rusparseStatus_t s;
            h = hooked_handle(&c);
            atomic_store(&c.big_left, k);
            s = multiply(h, &a);
            atomic_store(&c.big_left, -1);
            if (s == RUSPARSE_STATUS_SUCCESS) {
                CHECK(rusparseDestroy(h));
                break;
            }
            EXPECT_TRUE(s == RUSPARSE_STATUS_ALLOC_FAILED && strncmp(failure, "rusparse", 8) == 0,
                        "refusal %d: %s: \"%s\"", k, rusparseGetErrorName(s), failure);
            /* The same handle works once the hooks grant again. */
            CHECK(multiply(h, &a));
            CHECK(rusparseDestroy(h));
            EXPECT_TRUE(atomic_load(&c.live) == 0, "refusal %d: %ld hooked bytes left", k,
                        atomic_load(&c.live));
        }
        EXPECT_TRUE(k > 0 && k < 200, "%d refusals", k);
        printf("allocator_hooks: %d large allocations refused in turn\n", k);
    }
    EXPECT_TRUE(atomic_load(&c.live) == 0, "%ld hooked bytes left", atomic_load(&c.live));
    return test_summary("allocator_hooks");
}
