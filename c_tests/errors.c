/*
 * Every documented error status, with its message, and the small getters
 * and setters. After the errors the same handle, matrix descriptors and
 * SpGEMM descriptors must still work: the test interleaves and ends with
 * successful products on them.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <limits.h>
#include <math.h>

#define INVALID RUSPARSE_STATUS_INVALID_VALUE
#define NOT_SUPPORTED RUSPARSE_STATUS_NOT_SUPPORTED
#define SUCCESS RUSPARSE_STATUS_SUCCESS
#define N_OP RUSPARSE_OPERATION_NON_TRANSPOSE
#define T_OP RUSPARSE_OPERATION_TRANSPOSE
#define R64 RUSPARSE_R_64F
#define I32 RUSPARSE_INDEX_32I
#define I64 RUSPARSE_INDEX_64I
#define B0 RUSPARSE_INDEX_BASE_ZERO
#define ALG RUSPARSE_SPGEMM_DEFAULT

/* The shared fixture: C (3 x 2) = A (3 x 4) * B (4 x 2), R_64F, 32I, base 0. */
static tmat_t a, b;
static csr_t A, B;
static rusparseHandle_t h;
static double one = 1.0, zero = 0.0;
static int products_ok = 0;

/* A full three-phase product op(X) * op(Y) of the descriptors `X` and `Y`
 * (whose arrays hold `x` and `y`) on `h` with the SpGEMM descriptor `descr`
 * (created here when NULL), checked against the reference. */
static void product_of(rusparseSpGEMMDescr_t descr_in, rusparseSpMatDescr_t X, const tmat_t *x,
                       rusparseOperation_t opX, rusparseSpMatDescr_t Y, const tmat_t *y,
                       rusparseOperation_t opY, const char *label) {
    rusparseSpMatDescr_t C;
    rusparseSpGEMMDescr_t descr = descr_in;
    size_t s1 = 0, s2 = 0;
    void *b1, *b2, *off, *col, *val;
    int64_t r, c, nnz;
    dense_t ref = dense_product(x, opX, y, opY);

    if (descr == NULL) CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseCreateCsr(&C, ref.m, ref.n, 0, NULL, NULL, NULL, I32, I32, B0, R64));
    CHECK(rusparseSpGEMM_workEstimation(h, opX, opY, &one, X, Y, &zero, C, R64, ALG, descr, &s1, NULL));
    b1 = xmalloc(s1);
    CHECK(rusparseSpGEMM_workEstimation(h, opX, opY, &one, X, Y, &zero, C, R64, ALG, descr, &s1, b1));
    CHECK(rusparseSpGEMM_compute(h, opX, opY, &one, X, Y, &zero, C, R64, ALG, descr, &s2, NULL));
    b2 = xmalloc(s2);
    CHECK(rusparseSpGEMM_compute(h, opX, opY, &one, X, Y, &zero, C, R64, ALG, descr, &s2, b2));
    CHECK(rusparseSpMatGetSize(C, &r, &c, &nnz));
    off = xmalloc(sizeof(int32_t) * (size_t)(r + 1));
    col = xmalloc(sizeof(int32_t) * (size_t)nnz);
    val = xmalloc(sizeof(double) * (size_t)nnz);
    CHECK(rusparseCsrSetPointers(C, off, col, val));
    EXPECT_STATUS(rusparseSpGEMM_copy(h, opX, opY, &one, X, Y, &zero, C, R64, ALG, descr), SUCCESS);
    if (check_csr(label, &ref, nnz, off, I32, col, I32, val, R64, 0, cplx(1, 0), cplx(0, 0), NULL)) {
        fprintf(stderr, "product after errors failed: %s\n", label);
        test_failures++;
    }
    products_ok++;
    dense_free(&ref);
    if (descr_in == NULL) CHECK(rusparseSpGEMM_destroyDescr(descr));
    CHECK(rusparseDestroySpMat(C));
    free(b1);
    free(b2);
    free(off);
    free(col);
    free(val);
}

/* The fixture's product A * B (see product_of). */
static void product_ok(rusparseSpGEMMDescr_t descr_in, const char *label) {
    product_of(descr_in, A.d, &a, N_OP, B.d, &b, N_OP, label);
}

/* A copy of X's arrays declared with `spare` more entries than its offsets
 * use (cuSPARSE's published sample does this): the spare entries hold an
 * out-of-range column and a NaN, so reading them would fail or show. */
static csr_t with_spare_room(const tmat_t *x, int spare) {
    csr_t c;
    int64_t k;
    c.off = tmat_offsets(x, I32, 0);
    c.col = xmalloc(sizeof(int32_t) * (size_t)(x->nnz + spare));
    c.val = xmalloc(sizeof(double) * (size_t)(x->nnz + spare));
    for (k = 0; k < x->nnz + spare; k++) {
        ((int32_t *)c.col)[k] = k < x->nnz ? (int32_t)x->col[k] : 9999;
        ((double *)c.val)[k] = k < x->nnz ? x->re[k] : NAN;
    }
    CHECK(rusparseCreateCsr(&c.d, x->rows, x->cols, x->nnz + spare, c.off, c.col, c.val, I32, I32, B0, R64));
    return c;
}

/* A declared nnz above rowOffsets[rows] - base is spare room, never read:
 * the product is the one of the matrix the offsets describe, for op N and
 * T, and for a structure that changes nothing but the declared nnz. */
static void test_spare_room(void) {
    csr_t As = with_spare_room(&a, 2), Bs = with_spare_room(&b, 1);
    product_of(NULL, As.d, &a, N_OP, Bs.d, &b, N_OP, "spare room in A and B");
    product_of(NULL, As.d, &a, T_OP, As.d, &a, N_OP, "spare room, A^T * A");
    product_of(NULL, A.d, &a, N_OP, Bs.d, &b, N_OP, "spare room in B only");
    csr_free(&As);
    csr_free(&Bs);
}

/* NULL values (nnz > 0) make a structure-only matrix: the phases that read
 * no values run, the ones that do refuse naming the array; the reuse flow
 * then takes the values set later. */
static void test_structure_only(void) {
    rusparseSpMatDescr_t An, Bn, C;
    rusparseSpGEMMDescr_t descr;
    size_t s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0;
    void *buf, *off, *col, *val;
    int64_t r, c, nnz, predicted = -1;
    dense_t ref = dense_product(&a, N_OP, &b, N_OP);

    CHECK(rusparseCreateCsr(&An, a.rows, a.cols, a.nnz, A.off, A.col, NULL, I32, I32, B0, R64));
    CHECK(rusparseCreateCsr(&Bn, b.rows, b.cols, b.nnz, B.off, B.col, NULL, I32, I32, B0, R64));
    EXPECT_STATUS(rusparseSpGEMM_predictNnz(h, N_OP, N_OP, An, Bn, &predicted), SUCCESS);
    EXPECT_TRUE(predicted == dense_nnz(&ref), "predictNnz without values: %lld, expected %lld",
                (long long)predicted, (long long)dense_nnz(&ref));

    /* three phases: work estimation and compute run, copy refuses */
    CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));
    buf = xmalloc(64);
    s1 = 64;
    EXPECT_STATUS(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, An, Bn, &zero, C, R64, ALG, descr, &s1, buf),
                  SUCCESS);
    EXPECT_STATUS(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, An, Bn, &zero, C, R64, ALG, descr, &s1, buf),
                  SUCCESS);
    CHECK(rusparseSpMatGetSize(C, &r, &c, &nnz));
    EXPECT_TRUE(nnz == dense_nnz(&ref), "nnz(C) without values: %lld", (long long)nnz);
    off = xmalloc(sizeof(int32_t) * (size_t)(r + 1));
    col = xmalloc(sizeof(int32_t) * (size_t)nnz);
    val = xmalloc(sizeof(double) * (size_t)nnz);
    CHECK(rusparseCsrSetPointers(C, off, col, val));
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, An, Bn, &zero, C, R64, ALG, descr), INVALID,
                      "matA values is NULL");
    CHECK(rusparseSpGEMM_destroyDescr(descr));
    CHECK(rusparseDestroySpMat(C));

    /* the reuse flow: C's structure without any values, then the values */
    CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));
    EXPECT_STATUS(rusparseSpGEMMreuse_workEstimation(h, N_OP, N_OP, An, Bn, C, ALG, descr, &s1, buf), SUCCESS);
    s2 = s3 = s4 = 64;
    EXPECT_STATUS(rusparseSpGEMMreuse_nnz(h, N_OP, N_OP, An, Bn, C, ALG, descr, &s2, buf, &s3, buf, &s4, buf),
                  SUCCESS);
    CHECK(rusparseCsrSetPointers(C, off, col, NULL));
    s5 = 64;
    EXPECT_STATUS(rusparseSpGEMMreuse_copy(h, N_OP, N_OP, An, Bn, C, ALG, descr, &s5, buf), SUCCESS);
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, An, Bn, &zero, C, R64, ALG, descr),
                      INVALID, "values is NULL");
    CHECK(rusparseSpMatSetValues(An, A.val));
    CHECK(rusparseSpMatSetValues(Bn, B.val));
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, An, Bn, &zero, C, R64, ALG, descr),
                      INVALID, "matC values is NULL");
    CHECK(rusparseSpMatSetValues(C, val));
    EXPECT_STATUS(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, An, Bn, &zero, C, R64, ALG, descr), SUCCESS);
    if (check_csr("structure first, values later", &ref, nnz, off, I32, col, I32, val, R64, 0, cplx(1, 0),
                  cplx(0, 0), NULL)) {
        test_failures++;
    }
    CHECK(rusparseSpGEMM_destroyDescr(descr));
    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseDestroySpMat(An));
    CHECK(rusparseDestroySpMat(Bn));
    dense_free(&ref);
    free(buf);
    free(off);
    free(col);
    free(val);
}

static void test_error_names(void) {
    static const char *names[] = {
        "RUSPARSE_STATUS_SUCCESS",        "RUSPARSE_STATUS_NOT_INITIALIZED",
        "RUSPARSE_STATUS_ALLOC_FAILED",   "RUSPARSE_STATUS_INVALID_VALUE",
        "RUSPARSE_STATUS_ARCH_MISMATCH",  "RUSPARSE_STATUS_MAPPING_ERROR",
        "RUSPARSE_STATUS_EXECUTION_FAILED", "RUSPARSE_STATUS_INTERNAL_ERROR",
        "RUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED", "RUSPARSE_STATUS_ZERO_PIVOT",
        "RUSPARSE_STATUS_NOT_SUPPORTED",  "RUSPARSE_STATUS_INSUFFICIENT_RESOURCES"};
    /* The enumerators by name, so their numbers are checked against cuSPARSE's. */
    static const rusparseStatus_t all[] = {
        RUSPARSE_STATUS_SUCCESS,          RUSPARSE_STATUS_NOT_INITIALIZED,
        RUSPARSE_STATUS_ALLOC_FAILED,     RUSPARSE_STATUS_INVALID_VALUE,
        RUSPARSE_STATUS_ARCH_MISMATCH,    RUSPARSE_STATUS_MAPPING_ERROR,
        RUSPARSE_STATUS_EXECUTION_FAILED, RUSPARSE_STATUS_INTERNAL_ERROR,
        RUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED, RUSPARSE_STATUS_ZERO_PIVOT,
        RUSPARSE_STATUS_NOT_SUPPORTED,    RUSPARSE_STATUS_INSUFFICIENT_RESOURCES};
    static const int unknown[] = {12, 13, 99, -1, INT_MAX};
    int s;
    for (s = 0; s < 12; s++) {
        const char *name = rusparseGetErrorName((rusparseStatus_t)s);
        const char *text = rusparseGetErrorString((rusparseStatus_t)s);
        EXPECT_TRUE((int)all[s] == s, "status enumerator %d has the number %d", s, (int)all[s]);
        EXPECT_TRUE(name != NULL && strcmp(name, names[s]) == 0, "rusparseGetErrorName(%d) = %s", s,
                    name ? name : "(null)");
        EXPECT_TRUE(text != NULL && text[0] != '\0', "rusparseGetErrorString(%d) is empty", s);
    }
    for (s = 0; s < 5; s++) {
        const char *name = rusparseGetErrorName((rusparseStatus_t)unknown[s]);
        const char *text = rusparseGetErrorString((rusparseStatus_t)unknown[s]);
        EXPECT_TRUE(name != NULL && strcmp(name, "RUSPARSE_STATUS_UNKNOWN") == 0,
                    "rusparseGetErrorName(%d) = %s", unknown[s], name ? name : "(null)");
        EXPECT_TRUE(text != NULL && text[0] != '\0', "rusparseGetErrorString(%d) is empty", unknown[s]);
    }
    EXPECT_TRUE(rusparseGetLastErrorMessage() != NULL, "rusparseGetLastErrorMessage() is NULL");
}

/* A copy of the caller's value of `name` (NULL when unset), for restore_env. */
static char *save_env(const char *name) {
    const char *v = getenv(name);
    return v == NULL ? NULL : strcpy((char *)xmalloc(strlen(v) + 1), v);
}

/* Puts back (and frees) what save_env saved. */
static void restore_env(const char *name, char *saved) {
    if (saved != NULL)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}

static void test_handle(void) {
    rusparseHandle_t x = (rusparseHandle_t)&x; /* garbage that must be overwritten */
    rusparseBackend_t be = (rusparseBackend_t)-1;
    rusparsePointerMode_t mode;
    void *stream = NULL;
    int version = -1, nt = -1, dummy = 0;
    size_t sz = 0;
    char *saved_env;

    EXPECT_STATUS(rusparseCreate(NULL), INVALID);
    EXPECT_STATUS(rusparseCreateWithBackend(NULL, RUSPARSE_BACKEND_CPU), INVALID);
    /* CUDA: a handle on a machine with a GPU, else NOT_SUPPORTED saying what
     * was not found (driver, device or NVRTC) -- never an abort. */
    if (rusparseCreateWithBackend(&x, RUSPARSE_BACKEND_CUDA) == RUSPARSE_STATUS_SUCCESS) {
        EXPECT_STATUS(rusparseGetBackend(x, &be), SUCCESS);
        EXPECT_TRUE(be == RUSPARSE_BACKEND_CUDA, "CUDA handle reports back end %d", (int)be);
        EXPECT_STATUS(rusparseDestroy(x), SUCCESS);
    } else {
        EXPECT_STATUS_MSG(rusparseCreateWithBackend(&x, RUSPARSE_BACKEND_CUDA), NOT_SUPPORTED, "not found");
        EXPECT_TRUE(x == NULL, "handle not NULL after a failed rusparseCreateWithBackend(CUDA)");
    }
    x = (rusparseHandle_t)&x;
    EXPECT_STATUS_MSG(rusparseCreateWithBackend(&x, RUSPARSE_BACKEND_HIP), NOT_SUPPORTED, "HIP");
    EXPECT_TRUE(x == NULL, "handle not NULL after a failed rusparseCreateWithBackend(HIP)");
    x = (rusparseHandle_t)&x;
    EXPECT_STATUS_MSG(rusparseCreateWithBackend(&x, (rusparseBackend_t)9), INVALID, "backend");
    EXPECT_TRUE(x == NULL, "handle not NULL after a failed rusparseCreateWithBackend(9)");

    /* RUSPARSE_NUM_THREADS must be a positive integer (the caller's value is restored) */
    saved_env = save_env("RUSPARSE_NUM_THREADS");
    setenv("RUSPARSE_NUM_THREADS", "two", 1);
    x = (rusparseHandle_t)&x;
    EXPECT_STATUS_MSG(rusparseCreate(&x), INVALID, "RUSPARSE_NUM_THREADS");
    EXPECT_TRUE(x == NULL, "handle not NULL after a failed rusparseCreate");
    setenv("RUSPARSE_NUM_THREADS", "2", 1);
    EXPECT_STATUS(rusparseCreate(&x), SUCCESS);
    EXPECT_STATUS(rusparseGetNumThreads(x, &nt), SUCCESS);
    EXPECT_TRUE(nt == 2, "RUSPARSE_NUM_THREADS=2 gives %d threads", nt);
    EXPECT_STATUS(rusparseDestroy(x), SUCCESS);
    restore_env("RUSPARSE_NUM_THREADS", saved_env);

    /* RUSPARSE_SCRATCH_LIMIT: a size in bytes, units allowed */
    saved_env = save_env("RUSPARSE_SCRATCH_LIMIT");
    setenv("RUSPARSE_SCRATCH_LIMIT", "lots", 1);
    x = (rusparseHandle_t)&x;
    EXPECT_STATUS_MSG(rusparseCreate(&x), INVALID, "RUSPARSE_SCRATCH_LIMIT");
    EXPECT_TRUE(x == NULL, "handle not NULL after a failed rusparseCreate");
    setenv("RUSPARSE_SCRATCH_LIMIT", "3M", 1);
    EXPECT_STATUS(rusparseCreate(&x), SUCCESS);
    EXPECT_STATUS(rusparseGetScratchSize(x, NULL, &sz), SUCCESS);
    EXPECT_TRUE(sz == ((size_t)3 << 20), "RUSPARSE_SCRATCH_LIMIT=3M gives a limit of %zu", sz);
    EXPECT_STATUS(rusparseDestroy(x), SUCCESS);
    restore_env("RUSPARSE_SCRATCH_LIMIT", saved_env);

    EXPECT_STATUS(rusparseCreateWithBackend(&x, RUSPARSE_BACKEND_CPU), SUCCESS);
    EXPECT_STATUS(rusparseGetBackend(x, &be), SUCCESS);
    EXPECT_TRUE(be == RUSPARSE_BACKEND_CPU, "GetBackend = %d, expected CPU", (int)be);
    {
        /* the description: "CPU with N threads"; cut to the capacity */
        char line[128], small[4] = {'x', 'x', 'x', 'x'};
        EXPECT_STATUS(rusparseGetBackendDescription(x, line, sizeof line), SUCCESS);
        EXPECT_TRUE(strncmp(line, "CPU with ", 9) == 0 && strstr(line, "threads") != NULL,
                    "rusparseGetBackendDescription: \"%s\"", line);
        EXPECT_STATUS(rusparseGetBackendDescription(x, small, sizeof small), SUCCESS);
        EXPECT_TRUE(strcmp(small, "CPU") == 0, "cut description \"%.4s\"", small);
        EXPECT_STATUS(rusparseGetBackendDescription(x, NULL, 0), SUCCESS);
        EXPECT_STATUS_MSG(rusparseGetBackendDescription(x, NULL, 8), INVALID, "text");
        EXPECT_STATUS(rusparseGetBackendDescription(NULL, line, sizeof line),
                      RUSPARSE_STATUS_NOT_INITIALIZED);
        EXPECT_STATUS(rusparseGetBackendDescription(h, line, sizeof line), SUCCESS);
        EXPECT_TRUE(strncmp(line, "AUTO: CPU with ", 15) == 0, "AUTO description: \"%s\"", line);
    }
    EXPECT_STATUS(rusparseDestroy(x), SUCCESS);
    EXPECT_STATUS(rusparseGetBackend(h, &be), SUCCESS);
    EXPECT_TRUE(be == RUSPARSE_BACKEND_AUTO, "GetBackend of rusparseCreate's handle = %d, expected AUTO",
                (int)be);
    EXPECT_STATUS(rusparseGetBackend(h, NULL), INVALID);

    /* destroying NULL is a no-op */
    EXPECT_STATUS(rusparseDestroy(NULL), SUCCESS);
    EXPECT_STATUS(rusparseDestroySpMat(NULL), SUCCESS);
    EXPECT_STATUS(rusparseSpGEMM_destroyDescr(NULL), SUCCESS);

    /* NULL handle: NOT_INITIALIZED */
    EXPECT_STATUS_MSG(rusparseSetStream(NULL, NULL), RUSPARSE_STATUS_NOT_INITIALIZED, "handle");
    EXPECT_STATUS(rusparseGetStream(NULL, &stream), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseSetPointerMode(NULL, RUSPARSE_POINTER_MODE_HOST), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseGetPointerMode(NULL, &mode), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseGetVersion(NULL, &version), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseGetBackend(NULL, &be), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseSetNumThreads(NULL, 1), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseGetNumThreads(NULL, &nt), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseSetScratchLimit(NULL, 0), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseGetScratchSize(NULL, &sz, NULL), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_STATUS(rusparseTrimScratch(NULL), RUSPARSE_STATUS_NOT_INITIALIZED);

    /* version */
    EXPECT_STATUS(rusparseGetVersion(h, &version), SUCCESS);
    EXPECT_TRUE(version == RUSPARSE_VERSION, "rusparseGetVersion = %d, RUSPARSE_VERSION = %d", version,
                RUSPARSE_VERSION);
    EXPECT_STATUS_MSG(rusparseGetVersion(h, NULL), INVALID, "version");

    /* pointer mode round trip */
    EXPECT_STATUS(rusparseGetPointerMode(h, &mode), SUCCESS);
    EXPECT_TRUE(mode == RUSPARSE_POINTER_MODE_HOST, "default pointer mode %d", (int)mode);
    EXPECT_STATUS(rusparseSetPointerMode(h, RUSPARSE_POINTER_MODE_DEVICE), SUCCESS);
    EXPECT_STATUS(rusparseGetPointerMode(h, &mode), SUCCESS);
    EXPECT_TRUE(mode == RUSPARSE_POINTER_MODE_DEVICE, "pointer mode %d after setting DEVICE", (int)mode);
    product_ok(NULL, "pointer mode DEVICE on a CPU handle (host scalars)");
    EXPECT_STATUS_MSG(rusparseSetPointerMode(h, (rusparsePointerMode_t)5), INVALID, "mode");
    EXPECT_STATUS(rusparseGetPointerMode(h, &mode), SUCCESS);
    EXPECT_TRUE(mode == RUSPARSE_POINTER_MODE_DEVICE, "a failed SetPointerMode changed the mode");
    EXPECT_STATUS(rusparseSetPointerMode(h, RUSPARSE_POINTER_MODE_HOST), SUCCESS);
    EXPECT_STATUS(rusparseGetPointerMode(h, &mode), SUCCESS);
    EXPECT_TRUE(mode == RUSPARSE_POINTER_MODE_HOST, "pointer mode %d after setting HOST", (int)mode);
    EXPECT_STATUS(rusparseGetPointerMode(h, NULL), INVALID);

    /* stream round trip (stored, ignored by the CPU) */
    EXPECT_STATUS(rusparseGetStream(h, &stream), SUCCESS);
    EXPECT_TRUE(stream == NULL, "default stream %p", stream);
    EXPECT_STATUS(rusparseSetStream(h, &dummy), SUCCESS);
    EXPECT_STATUS(rusparseGetStream(h, &stream), SUCCESS);
    EXPECT_TRUE(stream == (void *)&dummy, "GetStream = %p, set %p", stream, (void *)&dummy);
    product_ok(NULL, "with a stream set");
    EXPECT_STATUS(rusparseSetStream(h, NULL), SUCCESS);
    EXPECT_STATUS(rusparseGetStream(h, &stream), SUCCESS);
    EXPECT_TRUE(stream == NULL, "stream %p after setting NULL", stream);
    EXPECT_STATUS(rusparseGetStream(h, NULL), INVALID);

    /* threads */
    EXPECT_STATUS_MSG(rusparseSetNumThreads(h, -1), INVALID, "negative");
    EXPECT_STATUS_MSG(rusparseSetNumThreads(h, RUSPARSE_MAX_THREADS + 1), INVALID, "limit of 4096");
    EXPECT_STATUS(rusparseSetNumThreads(h, 3), SUCCESS);
    EXPECT_STATUS(rusparseGetNumThreads(h, &nt), SUCCESS);
    EXPECT_TRUE(nt == 3, "GetNumThreads = %d after SetNumThreads(3)", nt);
    product_ok(NULL, "3 threads");
    EXPECT_STATUS(rusparseSetNumThreads(h, 0), SUCCESS);
    EXPECT_STATUS(rusparseGetNumThreads(h, &nt), SUCCESS);
    EXPECT_TRUE(nt >= 1, "GetNumThreads = %d after SetNumThreads(0)", nt);
    EXPECT_STATUS(rusparseGetNumThreads(h, NULL), INVALID);

    /* CPU scratch kept between products: bounded, trimmed, switched off */
    {
        size_t kept = 1, limit = 0;
        EXPECT_STATUS(rusparseGetScratchSize(h, NULL, &limit), SUCCESS);
        EXPECT_TRUE(limit == ((size_t)256 << 20), "default scratch limit %zu", limit);
        product_ok(NULL, "scratch kept");
        EXPECT_STATUS(rusparseGetScratchSize(h, &kept, NULL), SUCCESS);
        EXPECT_TRUE(kept > 0 && kept <= limit, "%zu bytes kept after a product", kept);
        EXPECT_STATUS(rusparseTrimScratch(h), SUCCESS);
        EXPECT_STATUS(rusparseGetScratchSize(h, &kept, NULL), SUCCESS);
        EXPECT_TRUE(kept == 0, "%zu bytes kept after TrimScratch", kept);
        EXPECT_STATUS(rusparseSetScratchLimit(h, 0), SUCCESS);
        product_ok(NULL, "no scratch kept");
        EXPECT_STATUS(rusparseGetScratchSize(h, &kept, &limit), SUCCESS);
        EXPECT_TRUE(kept == 0 && limit == 0, "%zu bytes kept, limit %zu, after SetScratchLimit(0)", kept,
                    limit);
        EXPECT_STATUS_MSG(rusparseGetScratchSize(h, NULL, NULL), INVALID, "both NULL");
        EXPECT_STATUS(rusparseSetScratchLimit(h, (size_t)1 << 20), SUCCESS);
        EXPECT_STATUS(rusparseSetNumThreads(h, 0), SUCCESS);
        EXPECT_STATUS(rusparseGetScratchSize(h, NULL, &limit), SUCCESS);
        EXPECT_TRUE(limit == ((size_t)1 << 20), "scratch limit %zu after SetNumThreads(0)", limit);
    }

    /* memory budget: too small refused at work estimation naming the
     * smallest budget; that budget works; 0 clears it */
    {
        size_t budget = 1, peak = 0;
        int32_t chunks = 0;
        static double dummy_buffer[8];
        rusparseSpGEMMDescr_t d;
        rusparseSpMatDescr_t C;
        const char *m, *at;
        EXPECT_STATUS(rusparseGetMemoryBudget(h, &budget), SUCCESS);
        EXPECT_TRUE(budget == 0, "default memory budget %zu", budget);
        EXPECT_STATUS(rusparseSetMemoryBudget(NULL, 1), RUSPARSE_STATUS_NOT_INITIALIZED);
        EXPECT_STATUS_MSG(rusparseGetMemoryBudget(h, NULL), INVALID, "bytes");
        EXPECT_STATUS(rusparseSetMemoryBudget(h, 64), SUCCESS);
        EXPECT_STATUS(rusparseGetMemoryBudget(h, &budget), SUCCESS);
        EXPECT_TRUE(budget == 64, "memory budget %zu after setting 64", budget);
        CHECK(rusparseSpGEMM_createDescr(&d));
        CHECK(rusparseCreateCsr(&C, 3, 2, 0, NULL, NULL, NULL, I32, I32, B0, R64));
        EXPECT_STATUS(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, d,
                                                    &budget, NULL),
                      SUCCESS);
        EXPECT_TRUE(budget > 0 && budget <= 64, "bufferSize1 = %zu", budget);
        EXPECT_STATUS_MSG(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, d,
                                                        &budget, dummy_buffer),
                          RUSPARSE_STATUS_ALLOC_FAILED, "memory budget of 64 bytes");
        m = rusparseGetLastErrorMessage();
        at = strstr(m, "planning alone may take ");
        EXPECT_TRUE(at != NULL, "no planning bound in \"%s\"", m);
        if (at != NULL) {
            budget = (size_t)strtoull(at + strlen("planning alone may take "), NULL, 10);
            EXPECT_TRUE(budget > 64, "planning bound %zu", budget);
            EXPECT_STATUS(rusparseSetMemoryBudget(h, budget * 2), SUCCESS);
            product_of(d, A.d, &a, N_OP, B.d, &b, N_OP, "within a memory budget");
            EXPECT_STATUS(rusparseSpGEMM_getMemoryPlan(d, &peak, &chunks), SUCCESS);
            EXPECT_TRUE(peak > 0 && peak <= budget * 2 && chunks >= 1, "memory plan %zu bytes, %d chunks",
                        peak, (int)chunks);
        }
        EXPECT_STATUS(rusparseSetMemoryBudget(h, 0), SUCCESS);
        EXPECT_STATUS(rusparseGetMemoryBudget(h, &budget), SUCCESS);
        EXPECT_TRUE(budget == 0, "memory budget %zu after clearing it", budget);
        product_ok(NULL, "memory budget cleared");
        CHECK(rusparseDestroySpMat(C));
        CHECK(rusparseSpGEMM_destroyDescr(d));
    }

    /* the message is thread-local state that a success clears */
    EXPECT_STATUS(rusparseGetVersion(NULL, &version), RUSPARSE_STATUS_NOT_INITIALIZED);
    EXPECT_TRUE(rusparseGetLastErrorMessage()[0] != '\0', "no message after an error");
    EXPECT_STATUS(rusparseGetVersion(h, &version), SUCCESS);
    EXPECT_TRUE(strcmp(rusparseGetLastErrorMessage(), "") == 0, "message \"%s\" after a success",
                rusparseGetLastErrorMessage());
}

static void test_create_csr(void) {
    rusparseSpMatDescr_t d = (rusparseSpMatDescr_t)&d;
    rusparseConstSpMatDescr_t cd = (rusparseConstSpMatDescr_t)&cd;
    int32_t off32[4] = {0, 0, 0, 0};
    int64_t off64[4] = {0, 0, 0, 0};
    int32_t col32[1] = {0};
    double val[1] = {0};

    EXPECT_STATUS_MSG(rusparseCreateCsr(NULL, 3, 3, 0, off32, NULL, NULL, I32, I32, B0, R64), INVALID,
                      "spMatDescr");
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, -1, 3, 0, off32, NULL, NULL, I32, I32, B0, R64), INVALID, "rows");
    EXPECT_TRUE(d == NULL, "descriptor not NULL after a failed rusparseCreateCsr");
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, -2, 0, off32, NULL, NULL, I32, I32, B0, R64), INVALID, "cols");
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, -5, off32, col32, val, I32, I32, B0, R64), INVALID, "nnz");
    EXPECT_STATUS_MSG(rusparseCreateConstCsr(NULL, 3, 3, 0, off32, NULL, NULL, I32, I32, B0, R64), INVALID,
                      "spMatDescr");
    EXPECT_STATUS_MSG(rusparseCreateConstCsr(&cd, -1, 3, 0, off32, NULL, NULL, I32, I32, B0, R64), INVALID,
                      "rows");
    EXPECT_TRUE(cd == NULL, "descriptor not NULL after a failed rusparseCreateConstCsr");

    /* nnz > INT32_MAX does not fit 32-bit row offsets (the arrays are not read) */
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, (int64_t)INT32_MAX + 1, off32, col32, val, I32, I32, B0, R64),
                      INVALID, "nnz");
    /* with base 1, nnz = INT32_MAX makes rowOffsets[rows] = INT32_MAX + 1 */
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, (int64_t)INT32_MAX, off32, col32, val, I32, I32,
                                        RUSPARSE_INDEX_BASE_ONE, R64),
                      INVALID, "nnz");
    /* ... but 64-bit row offsets with 32-bit columns are fine */
    EXPECT_STATUS(rusparseCreateCsr(&d, 3, 3, (int64_t)INT32_MAX + 1, off64, col32, val, I64, I32, B0, R64),
                  SUCCESS);
    EXPECT_STATUS(rusparseDestroySpMat(d), SUCCESS);
    /* more columns than 32-bit column indices can name */
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, (int64_t)INT32_MAX + 2, 0, off32, NULL, NULL, I32, I32, B0, R64),
                      INVALID, "cols");

    /* 16-bit index and value types: NOT_SUPPORTED */
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, 0, off32, NULL, NULL, RUSPARSE_INDEX_16U, I32, B0, R64),
                      NOT_SUPPORTED, "16U");
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, 0, off32, NULL, NULL, I32, RUSPARSE_INDEX_16U, B0, R64),
                      NOT_SUPPORTED, "16U");
    EXPECT_STATUS(rusparseCreateCsr(&d, 3, 3, 0, off32, NULL, NULL, I32, I32, B0, RUSPARSE_R_16F), NOT_SUPPORTED);
    EXPECT_STATUS(rusparseCreateCsr(&d, 3, 3, 0, off32, NULL, NULL, I32, I32, B0, RUSPARSE_R_16BF), NOT_SUPPORTED);
    EXPECT_STATUS(rusparseCreateConstCsr(&cd, 3, 3, 0, off32, NULL, NULL, I32, I32, B0, RUSPARSE_R_16F),
                  NOT_SUPPORTED);
    EXPECT_STATUS(rusparseCreateConstCsr(&cd, 3, 3, 0, off32, NULL, NULL, RUSPARSE_INDEX_16U, I32, B0, R64),
                  NOT_SUPPORTED);

    /* numbers that are no enumerator: INVALID_VALUE */
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, 0, off32, NULL, NULL, (rusparseIndexType_t)7, I32, B0, R64),
                      INVALID, "csrRowOffsetsType");
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, 0, off32, NULL, NULL, I32, (rusparseIndexType_t)0, B0, R64),
                      INVALID, "csrColIndType");
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, 0, off32, NULL, NULL, I32, I32, (rusparseIndexBase_t)5, R64),
                      INVALID, "idxBase");
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, 0, off32, NULL, NULL, I32, I32, B0, (rusparseDataType_t)99),
                      INVALID, "valueType");

    /* NULL column indices with nnz > 0 */
    EXPECT_STATUS_MSG(rusparseCreateCsr(&d, 3, 3, 1, off32, NULL, val, I32, I32, B0, R64), INVALID, "csrColInd");
    /* NULL values with nnz > 0: a structure-only matrix (test_structure_only) */
    EXPECT_STATUS(rusparseCreateCsr(&d, 3, 3, 1, off32, col32, NULL, I32, I32, B0, R64), SUCCESS);
    EXPECT_STATUS(rusparseDestroySpMat(d), SUCCESS);
    /* ... allowed with nnz == 0, and NULL row offsets for a C */
    EXPECT_STATUS(rusparseCreateCsr(&d, 3, 3, 0, NULL, NULL, NULL, I32, I32, B0, R64), SUCCESS);
    EXPECT_STATUS(rusparseDestroySpMat(d), SUCCESS);
}

static void test_descriptor_getters(void) {
    int64_t rows, cols, nnz;
    void *off, *col, *val, *v2;
    const void *coff, *ccol, *cval;
    rusparseIndexType_t ot, ct;
    rusparseIndexBase_t base;
    rusparseDataType_t dt;
    rusparseConstSpMatDescr_t cA;
    double other[4] = {9, 9, 9, 9};
    int32_t o32[4], c32[4];

    EXPECT_STATUS(rusparseCsrGet(A.d, &rows, &cols, &nnz, &off, &col, &val, &ot, &ct, &base, &dt), SUCCESS);
    EXPECT_TRUE(rows == a.rows && cols == a.cols && nnz == a.nnz && off == A.off && col == A.col &&
                    val == A.val && ot == I32 && ct == I32 && base == B0 && dt == R64,
                "rusparseCsrGet does not return what rusparseCreateCsr got");
    EXPECT_STATUS(rusparseCsrGet(A.d, &rows, &cols, &nnz, &off, &col, &val, &ot, &ct, NULL, &dt), INVALID);
    EXPECT_STATUS(rusparseCsrGet(NULL, &rows, &cols, &nnz, &off, &col, &val, &ot, &ct, &base, &dt), INVALID);
    EXPECT_STATUS(rusparseSpMatGetSize(A.d, &rows, &cols, &nnz), SUCCESS);
    EXPECT_TRUE(rows == a.rows && cols == a.cols && nnz == a.nnz, "rusparseSpMatGetSize");
    EXPECT_STATUS(rusparseSpMatGetSize(A.d, &rows, NULL, &nnz), INVALID);
    EXPECT_STATUS(rusparseSpMatGetSize(NULL, &rows, &cols, &nnz), INVALID);
    base = (rusparseIndexBase_t)7;
    EXPECT_STATUS(rusparseSpMatGetIndexBase(A.d, &base), SUCCESS);
    EXPECT_TRUE(base == B0, "rusparseSpMatGetIndexBase = %d", (int)base);
    EXPECT_STATUS(rusparseSpMatGetIndexBase(A.d, NULL), INVALID);

    EXPECT_STATUS(rusparseSpMatGetValues(A.d, &v2), SUCCESS);
    EXPECT_TRUE(v2 == A.val, "rusparseSpMatGetValues");
    EXPECT_STATUS(rusparseSpMatSetValues(A.d, other), SUCCESS);
    EXPECT_STATUS(rusparseSpMatGetValues(A.d, &v2), SUCCESS);
    EXPECT_TRUE(v2 == (void *)other, "rusparseSpMatGetValues after SetValues");
    /* NULL values make a structure-only matrix (the numeric phases refuse it) */
    EXPECT_STATUS(rusparseSpMatSetValues(A.d, NULL), SUCCESS);
    EXPECT_STATUS(rusparseSpMatGetValues(A.d, &v2), SUCCESS);
    EXPECT_TRUE(v2 == NULL, "rusparseSpMatGetValues after SetValues(NULL)");
    EXPECT_STATUS(rusparseSpMatSetValues(A.d, A.val), SUCCESS);
    EXPECT_STATUS(rusparseSpMatGetValues(A.d, NULL), INVALID);

    /* a read-only descriptor: readable, never writable */
    memcpy(o32, A.off, sizeof o32);
    memcpy(c32, A.col, sizeof c32);
    EXPECT_STATUS(rusparseCreateConstCsr(&cA, a.rows, a.cols, a.nnz, A.off, A.col, A.val, I32, I32, B0, R64),
                  SUCCESS);
    EXPECT_STATUS(rusparseConstCsrGet(cA, &rows, &cols, &nnz, &coff, &ccol, &cval, &ot, &ct, &base, &dt), SUCCESS);
    EXPECT_TRUE(coff == A.off && ccol == A.col && cval == A.val && nnz == a.nnz, "rusparseConstCsrGet");
    EXPECT_STATUS(rusparseConstSpMatGetValues(cA, &cval), SUCCESS);
    EXPECT_TRUE(cval == A.val, "rusparseConstSpMatGetValues");
    EXPECT_STATUS_MSG(rusparseCsrSetPointers((rusparseSpMatDescr_t)cA, o32, c32, other), INVALID, "read-only");
    EXPECT_STATUS_MSG(rusparseCsrSetSplitValues((rusparseSpMatDescr_t)cA, o32, other, o32, other), INVALID,
                      "read-only");
    EXPECT_STATUS_MSG(rusparseSpMatSetValues((rusparseSpMatDescr_t)cA, other), INVALID, "read-only");
    EXPECT_STATUS(rusparseConstCsrGet(cA, &rows, &cols, &nnz, &coff, &ccol, &cval, &ot, &ct, &base, &dt), SUCCESS);
    EXPECT_TRUE(coff == A.off && ccol == A.col && cval == A.val, "a failed CsrSetPointers changed the const descriptor");

    {
        /* the const descriptor works as A; as C it is INVALID_VALUE */
        rusparseSpMatDescr_t C;
        rusparseSpGEMMDescr_t descr;
        size_t s1 = 0;
        void *buf;
        CHECK(rusparseSpGEMM_createDescr(&descr));
        CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));
        EXPECT_STATUS(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, cA, B.d, &zero, C, R64, ALG, descr, &s1,
                                                    NULL), SUCCESS);
        buf = xmalloc(s1);
        EXPECT_STATUS(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, cA, B.d, &zero, C, R64, ALG, descr, &s1,
                                                    buf), SUCCESS);
        /* B^T (2 x 4) * A^T (4 x 3) = 2 x 3: matC = the const A^T-shaped descriptor */
        {
            rusparseConstSpMatDescr_t cC;
            CHECK(rusparseCreateConstCsr(&cC, b.cols, a.rows, 0, NULL, NULL, NULL, I32, I32, B0, R64));
            EXPECT_STATUS_MSG(rusparseSpGEMM_workEstimation(h, T_OP, T_OP, &one, B.d, cA, &zero,
                                                            (rusparseSpMatDescr_t)cC, R64, ALG, descr, &s1, buf),
                              INVALID, "matC");
            CHECK(rusparseDestroySpMat(cC));
        }
        free(buf);
        CHECK(rusparseDestroySpMat(C));
        CHECK(rusparseSpGEMM_destroyDescr(descr));
    }
    EXPECT_STATUS(rusparseDestroySpMat(cA), SUCCESS);

    /* CsrSetPointers checks */
    {
        rusparseSpMatDescr_t C;
        CHECK(rusparseCreateCsr(&C, 3, 3, 2, o32, c32, other, I32, I32, B0, R64));
        EXPECT_STATUS_MSG(rusparseCsrSetPointers(C, NULL, c32, other), INVALID, "csrRowOffsets");
        EXPECT_STATUS_MSG(rusparseCsrSetPointers(C, o32, NULL, other), INVALID, "NULL");
        EXPECT_STATUS_MSG(rusparseCsrSetPointers(NULL, o32, c32, other), INVALID, "descriptor");
        EXPECT_STATUS(rusparseCsrSetPointers(C, o32, c32, other), SUCCESS);
        EXPECT_STATUS_MSG(rusparseCsrSetSplitValues(NULL, o32, other, o32, other), INVALID, "descriptor");
        EXPECT_STATUS_MSG(rusparseCsrSetSplitValues(C, o32, other, NULL, other), INVALID,
                          "secondRowOffsets is NULL");
        EXPECT_STATUS_MSG(rusparseCsrSetSplitValues(C, NULL, other, o32, other), INVALID,
                          "firstRowOffsets is NULL");
        EXPECT_STATUS(rusparseCsrSetSplitValues(C, o32, NULL, o32, other), SUCCESS);
        EXPECT_STATUS(rusparseCsrSetSplitValues(C, NULL, NULL, NULL, NULL), SUCCESS);
        CHECK(rusparseDestroySpMat(C));
    }
}

/* The SpGEMM calls with one bad argument each. */
static void test_spgemm_arguments(void) {
    rusparseSpMatDescr_t C, Cbad, Af, A2;
    rusparseSpGEMMDescr_t descr;
    size_t s1 = 0;
    void *buf = xmalloc(4096);
    float onef = 1.0f;
    int64_t np;

    CHECK(rusparseSpGEMM_createDescr(&descr));
    EXPECT_STATUS_MSG(rusparseSpGEMM_createDescr(NULL), INVALID, "descr");
    CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));

#define WE(handle, opa, opb, al, ma, mb, be, mc, ct, alg, d, sz, bf) \
    rusparseSpGEMM_workEstimation(handle, opa, opb, al, ma, mb, be, mc, ct, alg, d, sz, bf)

    EXPECT_STATUS_MSG(WE(NULL, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, NULL),
                      RUSPARSE_STATUS_NOT_INITIALIZED, "handle");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, NULL, &s1, NULL), INVALID,
                      "spgemmDescr");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, NULL, NULL), INVALID,
                      "bufferSize1");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, NULL, A.d, B.d, &zero, C, R64, ALG, descr, &s1, NULL), INVALID, "alpha");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, NULL, C, R64, ALG, descr, &s1, NULL), INVALID, "beta");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, NULL, B.d, &zero, C, R64, ALG, descr, &s1, NULL), INVALID, "matA");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, NULL, &zero, C, R64, ALG, descr, &s1, NULL), INVALID, "matB");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, NULL, R64, ALG, descr, &s1, NULL), INVALID, "matC");
    EXPECT_STATUS_MSG(WE(h, (rusparseOperation_t)7, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, NULL),
                      INVALID, "opA");
    EXPECT_STATUS_MSG(WE(h, N_OP, (rusparseOperation_t)3, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, NULL),
                      INVALID, "opB");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, (rusparseSpGEMMAlg_t)99, descr, &s1, NULL),
                      INVALID, "alg");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, RUSPARSE_R_32F, ALG, descr, &s1, NULL),
                      NOT_SUPPORTED, "computeType");
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, RUSPARSE_C_64F, ALG, descr, &s1, NULL),
                      NOT_SUPPORTED, "computeType");
    EXPECT_STATUS(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, RUSPARSE_R_16F, ALG, descr, &s1, NULL), NOT_SUPPORTED);
    EXPECT_STATUS(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, RUSPARSE_R_16BF, ALG, descr, &s1, NULL), NOT_SUPPORTED);
    EXPECT_STATUS(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, (rusparseDataType_t)99, ALG, descr, &s1, NULL),
                  INVALID);
    /* the errors above come before any work, with or without a buffer */
    EXPECT_STATUS_MSG(WE(h, (rusparseOperation_t)7, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, buf),
                      INVALID, "opA");

    /* A of another value type */
    CHECK(rusparseCreateCsr(&Af, a.rows, a.cols, a.nnz, A.off, A.col, A.val, I32, I32, B0, RUSPARSE_R_32F));
    EXPECT_STATUS(WE(h, N_OP, N_OP, &onef, Af, B.d, &zero, C, RUSPARSE_R_32F, ALG, descr, &s1, NULL), NOT_SUPPORTED);
    CHECK(rusparseDestroySpMat(Af));

    /* inner dimensions: A is 3 x 4; B^T is 2 x 4 */
    EXPECT_STATUS_MSG(WE(h, N_OP, T_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, NULL), INVALID, "inner");
    /* A (3 x 4) times A: 4 != 3 */
    CHECK(rusparseCreateCsr(&A2, a.rows, a.cols, a.nnz, A.off, A.col, A.val, I32, I32, B0, R64));
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, A2, &zero, C, R64, ALG, descr, &s1, NULL), INVALID, "inner");
    CHECK(rusparseDestroySpMat(A2));
    /* matC with the wrong shape (3 x 3 instead of 3 x 2), and 2 x 3 (transposed) */
    CHECK(rusparseCreateCsr(&Cbad, a.rows, a.rows, 0, NULL, NULL, NULL, I32, I32, B0, R64));
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, Cbad, R64, ALG, descr, &s1, NULL), INVALID, "matC");
    CHECK(rusparseDestroySpMat(Cbad));
    CHECK(rusparseCreateCsr(&Cbad, b.cols, a.rows, 0, NULL, NULL, NULL, I32, I32, B0, R64));
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, Cbad, R64, ALG, descr, &s1, NULL), INVALID, "matC");
    CHECK(rusparseDestroySpMat(Cbad));
    /* matC must not be matA */
    EXPECT_STATUS_MSG(WE(h, N_OP, N_OP, &one, A.d, B.d, &zero, A.d, R64, ALG, descr, &s1, NULL), INVALID, "matC");

    /* getNumProducts needs a work estimation; its pointers are required */
    EXPECT_STATUS_MSG(rusparseSpGEMM_getNumProducts(descr, &np), INVALID, "workEstimation");
    EXPECT_STATUS(rusparseSpGEMM_getNumProducts(NULL, &np), INVALID);
    /* so does getPlanInfo */
    EXPECT_STATUS_MSG(rusparseSpGEMM_getPlanInfo(descr, NULL, NULL, &np, NULL), INVALID, "workEstimation");
    EXPECT_STATUS_MSG(rusparseSpGEMM_getPlanInfo(NULL, NULL, NULL, &np, NULL), INVALID, "spgemmDescr is NULL");
    /* setColumnOrder (a rusparse extension) checks its descriptor and order */
    EXPECT_STATUS_MSG(rusparseSpGEMM_setColumnOrder(NULL, RUSPARSE_COLUMN_ORDER_ANY), INVALID,
                      "spgemmDescr is NULL");
    EXPECT_STATUS_MSG(rusparseSpGEMM_setColumnOrder(descr, (rusparseColumnOrder_t)2), INVALID,
                      "rusparseColumnOrder_t");
    EXPECT_STATUS(rusparseSpGEMM_setColumnOrder(descr, RUSPARSE_COLUMN_ORDER_SORTED), SUCCESS);
    /* so does setPatternCheck (a rusparse extension) */
    EXPECT_STATUS_MSG(rusparseSpGEMM_setPatternCheck(NULL, RUSPARSE_PATTERN_CHECK_CALLER), INVALID,
                      "spgemmDescr is NULL");
    EXPECT_STATUS_MSG(rusparseSpGEMM_setPatternCheck(descr, (rusparsePatternCheck_t)2), INVALID,
                      "rusparsePatternCheck_t");
    EXPECT_STATUS_MSG(rusparseSpGEMM_setPatternCheck(descr, (rusparsePatternCheck_t)-1), INVALID,
                      "rusparsePatternCheck_t");
    EXPECT_STATUS(rusparseSpGEMM_setPatternCheck(descr, RUSPARSE_PATTERN_CHECK_HASH), SUCCESS);
    /* and setReuseCopyValues (a rusparse extension) */
    EXPECT_STATUS_MSG(rusparseSpGEMM_setReuseCopyValues(NULL, 1), INVALID, "spgemmDescr is NULL");
    EXPECT_STATUS(rusparseSpGEMM_setReuseCopyValues(descr, 0), SUCCESS);
    /* and getBinCounts, which also checks its arguments */
    {
        int32_t bins = -1;
        int64_t rows_per_bin[2];
        EXPECT_STATUS_MSG(rusparseSpGEMM_getBinCounts(descr, RUSPARSE_SPGEMM_BINS_NUMERIC, NULL, 0, &bins),
                          INVALID, "workEstimation");
        EXPECT_STATUS_MSG(rusparseSpGEMM_getBinCounts(NULL, RUSPARSE_SPGEMM_BINS_NUMERIC, NULL, 0, &bins),
                          INVALID, "spgemmDescr is NULL");
        EXPECT_STATUS_MSG(rusparseSpGEMM_getBinCounts(descr, (rusparseSpGEMMBins_t)7, NULL, 0, &bins),
                          INVALID, "rusparseSpGEMMBins_t");
        EXPECT_STATUS_MSG(rusparseSpGEMM_getBinCounts(descr, RUSPARSE_SPGEMM_BINS_SYMBOLIC, rows_per_bin, -1,
                                                      &bins),
                          INVALID, "negative");
        EXPECT_STATUS_MSG(rusparseSpGEMM_getBinCounts(descr, RUSPARSE_SPGEMM_BINS_SYMBOLIC, rows_per_bin, 2,
                                                      NULL),
                          INVALID, "numBins is NULL");
        EXPECT_STATUS_MSG(rusparseSpGEMM_getBinCounts(descr, RUSPARSE_SPGEMM_BINS_SYMBOLIC, NULL, 2, &bins),
                          INVALID, "rowsPerBin is NULL");
    }

    /* the descriptors still work */
    product_ok(descr, "after argument errors (same SpGEMM descriptor)");
    EXPECT_STATUS(rusparseSpGEMM_getNumProducts(descr, &np), SUCCESS);
    EXPECT_TRUE(np == count_products(&a, N_OP, &b, N_OP), "getNumProducts = %lld", (long long)np);
    EXPECT_STATUS(rusparseSpGEMM_getNumProducts(descr, NULL), INVALID);
#undef WE
    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseSpGEMM_destroyDescr(descr));
    free(buf);
}

/* Bad arrays, found by the work estimation (with a buffer). */
static void expect_bad_data(csr_t *X, const char *which, const char *substr1, const char *substr2,
                            const char *what) {
    rusparseSpMatDescr_t C;
    rusparseSpGEMMDescr_t descr;
    size_t s1 = 0;
    void *buf;
    char label[200];
    const char *msg;
    rusparseStatus_t st;
    (void)X;

    CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));
    CHECK(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, NULL));
    buf = xmalloc(s1);
    snprintf(label, sizeof label, "%s: %s", which, what);
    st = rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, buf);
    msg = rusparseGetLastErrorMessage();
    if (st != INVALID || strstr(msg, which) == NULL || strstr(msg, substr1) == NULL ||
        (substr2 != NULL && strstr(msg, substr2) == NULL)) {
        fprintf(stderr, "%s:%d: [%s] workEstimation returned %s: \"%s\", expected INVALID_VALUE naming %s, "
                        "\"%s\"%s%s%s\n",
                __FILE__, __LINE__, label, rusparseGetErrorName(st), msg, which, substr1,
                substr2 ? " and \"" : "", substr2 ? substr2 : "", substr2 ? "\"" : "");
        test_failures++;
    }
    /* nothing planned: compute must refuse */
    EXPECT_STATUS(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, NULL),
                  INVALID);
    free(buf);
    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseSpGEMM_destroyDescr(descr));
}

static void test_bad_data(void) {
    int32_t *ao = (int32_t *)A.off, *ac = (int32_t *)A.col;
    int32_t *bo = (int32_t *)B.off, *bc = (int32_t *)B.col;
    int32_t save;
    /* rowOffsets[0] != base */
    save = ao[0];
    ao[0] = 1;
    expect_bad_data(&A, "matA", "rowOffsets[0]", NULL, "rowOffsets[0] = 1 with base 0");
    ao[0] = save;
    /* decreasing offsets (row 1 ends before it starts) */
    save = ao[2];
    ao[2] = ao[1] - 1;
    expect_bad_data(&A, "matA", "decrease", NULL, "decreasing offsets");
    ao[2] = save;
    /* rowOffsets[rows] - base > nnz: the offsets need more entries than the
     * arrays were declared to hold (fewer is spare room: test_spare_room) */
    save = ao[a.rows];
    ao[a.rows] = save + 1;
    expect_bad_data(&A, "matA", "nnz", NULL, "rowOffsets[rows] > nnz");
    ao[a.rows] = save;
    /* column index out of range, too big and negative */
    save = ac[1];
    ac[1] = (int32_t)a.cols;
    expect_bad_data(&A, "matA", "colInd[1]", "out of range", "colInd = cols");
    ac[1] = -1;
    expect_bad_data(&A, "matA", "colInd[1]", "out of range", "colInd = -1");
    ac[1] = save;
    /* the same in B */
    save = bo[0];
    bo[0] = -1;
    expect_bad_data(&B, "matB", "rowOffsets[0]", NULL, "B rowOffsets[0] = -1");
    bo[0] = save;
    save = bc[b.nnz - 1];
    bc[b.nnz - 1] = (int32_t)b.cols + 5;
    expect_bad_data(&B, "matB", "colInd[", "out of range", "B colInd too big");
    bc[b.nnz - 1] = save;
    save = bo[1];
    bo[1] = bo[2] + 1;
    expect_bad_data(&B, "matB", "decrease", NULL, "B decreasing offsets");
    bo[1] = save;

    product_ok(NULL, "after bad data (arrays restored)");

    {
        /* base 1: column 0 is out of range, column `cols` is fine */
        tmat_t x = a;
        csr_t X1 = csr_make(&x, I32, I32, 1, R64);
        csr_t Y1 = csr_make(&b, I32, I32, 1, R64);
        rusparseSpMatDescr_t C;
        rusparseSpGEMMDescr_t descr;
        size_t s1 = 0;
        void *buf;
        int32_t *xc = (int32_t *)X1.col;
        int32_t *xo = (int32_t *)X1.off;
        CHECK(rusparseSpGEMM_createDescr(&descr));
        CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, RUSPARSE_INDEX_BASE_ONE, R64));
        CHECK(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, X1.d, Y1.d, &zero, C, R64, ALG, descr, &s1, NULL));
        buf = xmalloc(s1);
        save = xc[0];
        xc[0] = 0;
        EXPECT_STATUS_MSG(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, X1.d, Y1.d, &zero, C, R64, ALG, descr,
                                                        &s1, buf),
                          INVALID, "colInd[0]");
        xc[0] = save;
        save = xo[0];
        xo[0] = 0;
        EXPECT_STATUS_MSG(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, X1.d, Y1.d, &zero, C, R64, ALG, descr,
                                                        &s1, buf),
                          INVALID, "rowOffsets[0]");
        xo[0] = save;
        EXPECT_STATUS(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, X1.d, Y1.d, &zero, C, R64, ALG, descr, &s1,
                                                    buf),
                      SUCCESS);
        free(buf);
        CHECK(rusparseDestroySpMat(C));
        CHECK(rusparseSpGEMM_destroyDescr(descr));
        csr_free(&X1);
        csr_free(&Y1);
    }
    {
        /* NULL row offsets in A (allowed at creation, not in a product) */
        rusparseSpMatDescr_t An, C;
        rusparseSpGEMMDescr_t descr;
        size_t s1 = 64;
        void *buf = xmalloc(s1);
        CHECK(rusparseCreateCsr(&An, a.rows, a.cols, a.nnz, NULL, A.col, A.val, I32, I32, B0, R64));
        CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));
        CHECK(rusparseSpGEMM_createDescr(&descr));
        CHECK(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, An, B.d, &zero, C, R64, ALG, descr, &s1, NULL));
        free(buf);
        buf = xmalloc(s1);
        EXPECT_STATUS_MSG(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, An, B.d, &zero, C, R64, ALG, descr, &s1,
                                                        buf),
                          INVALID, "rowOffsets");
        free(buf);
        CHECK(rusparseDestroySpMat(An));
        CHECK(rusparseDestroySpMat(C));
        CHECK(rusparseSpGEMM_destroyDescr(descr));
    }
}

/* Misaligned arrays; an allocation that cannot succeed. */
/* rusparseSpGEMM_predictNnz: exact on the fixture (a tiny product), op T,
 * and the mistakes: NULL handle, descriptors and out pointer, bad enums,
 * shapes that do not multiply, malformed data. */
static void test_predict_nnz(void) {
    rusparseSpMatDescr_t Af;
    int64_t nnz = -7, exact = 0, k;
    int32_t *ac = (int32_t *)A.col, save;
    csr_t A_i64;
    dense_t ref = dense_product(&a, N_OP, &b, N_OP);

    for (k = 0; k < ref.m * ref.n; k++) exact += ref.pat[k];
    dense_free(&ref);
    EXPECT_STATUS(rusparseSpGEMM_predictNnz(h, N_OP, N_OP, A.d, B.d, &nnz), SUCCESS);
    EXPECT_TRUE(nnz == exact, "predictNnz gave %lld, nnz(C) is %lld", (long long)nnz, (long long)exact);
    /* 64-bit one-based indices, op T */
    A_i64 = csr_make(&a, I64, I64, 1, R64);
    nnz = -7;
    EXPECT_STATUS(rusparseSpGEMM_predictNnz(h, T_OP, N_OP, A_i64.d, A_i64.d, &nnz), SUCCESS);
    EXPECT_TRUE(nnz >= 0 && nnz <= a.cols * a.cols, "A^T A predicted %lld", (long long)nnz);

    EXPECT_STATUS_MSG(rusparseSpGEMM_predictNnz(NULL, N_OP, N_OP, A.d, B.d, &nnz),
                      RUSPARSE_STATUS_NOT_INITIALIZED, "handle");
    EXPECT_STATUS_MSG(rusparseSpGEMM_predictNnz(h, N_OP, N_OP, NULL, B.d, &nnz), INVALID, "matA");
    EXPECT_STATUS_MSG(rusparseSpGEMM_predictNnz(h, N_OP, N_OP, A.d, NULL, &nnz), INVALID, "matB");
    EXPECT_STATUS_MSG(rusparseSpGEMM_predictNnz(h, N_OP, N_OP, A.d, B.d, NULL), INVALID, "nnz");
    EXPECT_STATUS_MSG(rusparseSpGEMM_predictNnz(h, (rusparseOperation_t)5, N_OP, A.d, B.d, &nnz), INVALID,
                      "opA");
    /* A is 3 x 4: A * A does not multiply, A^T * A does */
    EXPECT_STATUS_MSG(rusparseSpGEMM_predictNnz(h, N_OP, N_OP, A.d, A.d, &nnz), INVALID,
                      "inner dimensions");
    EXPECT_STATUS(rusparseSpGEMM_predictNnz(h, T_OP, N_OP, A.d, A.d, &nnz), SUCCESS);
    /* value types differ */
    CHECK(rusparseCreateCsr(&Af, a.rows, a.cols, a.nnz, A.off, A.col, A.val, I32, I32, B0, RUSPARSE_R_32F));
    EXPECT_STATUS_MSG(rusparseSpGEMM_predictNnz(h, N_OP, N_OP, Af, B.d, &nnz), NOT_SUPPORTED, "value type");
    /* a column out of range is found, as by work estimation */
    save = ac[1];
    ac[1] = (int32_t)a.cols;
    EXPECT_STATUS_MSG(rusparseSpGEMM_predictNnz(h, N_OP, N_OP, A.d, B.d, &nnz), INVALID, "colInd[1]");
    ac[1] = save;

    CHECK(rusparseDestroySpMat(Af));
    csr_free(&A_i64);
}

static void test_alignment_and_alloc(void) {
    rusparseSpMatDescr_t Am, C;
    rusparseSpGEMMDescr_t descr;
    size_t s1 = 0;
    void *buf;
    unsigned char *raw = (unsigned char *)xmalloc(sizeof(double) * (size_t)(a.nnz + 1));
    double *misaligned = (double *)(void *)(raw + 1);

    CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));
    memcpy(raw + 1, A.val, sizeof(double) * (size_t)a.nnz);
    CHECK(rusparseCreateCsr(&Am, a.rows, a.cols, a.nnz, A.off, A.col, misaligned, I32, I32, B0, R64));
    CHECK(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, Am, B.d, &zero, C, R64, ALG, descr, &s1, NULL));
    buf = xmalloc(s1);
    EXPECT_STATUS_MSG(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, Am, B.d, &zero, C, R64, ALG, descr, &s1,
                                                    buf),
                      INVALID, "aligned");
    CHECK(rusparseDestroySpMat(Am));
    free(raw);

    {
        /* X and Y are 2 x 2^40 with two entries each. op(A) = X^T has 2^40 rows, whose
         * planning arrays (16 TiB) exceed any memory here: ALLOC_FAILED at work estimation, nothing
         * leaked, the descriptor left without a plan, the handle fine. */
        int64_t big = (int64_t)1 << 40;
        int64_t xo[3] = {0, 1, 2}, xc[2] = {7, big - 1}, yo[3] = {0, 1, 2}, yc[2] = {big - 1, 7};
        int64_t wo[3] = {0, 1, 2}, wc[2] = {0, 1}, zo[3], zc[2];
        double xv[2] = {1, 2}, yv[2] = {3, 4}, wv[2] = {1, 1}, zv[2];
        int64_t r, c, nnz;
        void *b2;
        rusparseSpMatDescr_t X, Y, W, Z, T;
        CHECK(rusparseCreateCsr(&X, 2, big, 2, xo, xc, xv, I64, I64, B0, R64));
        CHECK(rusparseCreateCsr(&Y, 2, big, 2, yo, yc, yv, I64, I64, B0, R64));
        CHECK(rusparseCreateCsr(&W, 2, 2, 2, wo, wc, wv, I64, I64, B0, R64));
        CHECK(rusparseCreateCsr(&T, big, 2, 0, NULL, NULL, NULL, I64, I64, B0, R64));
        EXPECT_STATUS(rusparseSpGEMM_workEstimation(h, T_OP, N_OP, &one, X, W, &zero, T, R64, ALG, descr, &s1, NULL),
                      SUCCESS);
        EXPECT_STATUS_MSG(rusparseSpGEMM_workEstimation(h, T_OP, N_OP, &one, X, W, &zero, T, R64, ALG, descr, &s1,
                                                        buf),
                          RUSPARSE_STATUS_ALLOC_FAILED, "memory");
        EXPECT_STATUS(rusparseSpGEMM_compute(h, T_OP, N_OP, &one, X, W, &zero, T, R64, ALG, descr, &s1, NULL), INVALID);

        /* X * Y^T has an inner dimension of 2^40 but four entries: only the inner
         * indices Y uses become rows of op(B), so it runs in O(nnz) and C is
         * [[0, 4], [6, 0]]. */
        CHECK(rusparseCreateCsr(&Z, 2, 2, 0, NULL, NULL, NULL, I64, I64, B0, R64));
        CHECK(rusparseSpGEMM_workEstimation(h, N_OP, T_OP, &one, X, Y, &zero, Z, R64, ALG, descr, &s1, NULL));
        CHECK(rusparseSpGEMM_workEstimation(h, N_OP, T_OP, &one, X, Y, &zero, Z, R64, ALG, descr, &s1, buf));
        CHECK(rusparseSpGEMM_compute(h, N_OP, T_OP, &one, X, Y, &zero, Z, R64, ALG, descr, &s1, NULL));
        b2 = xmalloc(s1);
        CHECK(rusparseSpGEMM_compute(h, N_OP, T_OP, &one, X, Y, &zero, Z, R64, ALG, descr, &s1, b2));
        CHECK(rusparseSpMatGetSize(Z, &r, &c, &nnz));
        EXPECT_TRUE(r == 2 && c == 2 && nnz == 2, "X * Y^T is 2 x 2 with 2 entries");
        CHECK(rusparseCsrSetPointers(Z, zo, zc, zv));
        CHECK(rusparseSpGEMM_copy(h, N_OP, T_OP, &one, X, Y, &zero, Z, R64, ALG, descr));
        EXPECT_TRUE(zo[0] == 0 && zo[1] == 1 && zo[2] == 2 && zc[0] == 1 && zc[1] == 0 && zv[0] == 4 && zv[1] == 6,
               "X * Y^T = [[0, 4], [6, 0]]");
        free(b2);
        CHECK(rusparseDestroySpMat(X));
        CHECK(rusparseDestroySpMat(Y));
        CHECK(rusparseDestroySpMat(W));
        CHECK(rusparseDestroySpMat(T));
        CHECK(rusparseDestroySpMat(Z));
    }
    free(buf);
    product_ok(descr, "after ALLOC_FAILED (same SpGEMM descriptor)");
    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseSpGEMM_destroyDescr(descr));
}

/* Phases out of order, buffers too small, arguments changed between phases. */
static void test_phases(void) {
    rusparseSpMatDescr_t C, C2;
    rusparseSpGEMMDescr_t descr;
    size_t s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s3b = 0;
    void *b1, *b2, *b3, *b4, *b5;
    int64_t r, c, nnz;
    void *off, *col, *val;
    int32_t save;

    CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseCreateCsr(&C, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));
    CHECK(rusparseCreateCsr(&C2, a.rows, b.cols, 0, NULL, NULL, NULL, I32, I32, B0, R64));

    /* compute / copy / estimateMemory before workEstimation */
    EXPECT_STATUS_MSG(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s2, NULL),
                      INVALID, "workEstimation");
    s2 = 1 << 20;
    b2 = xmalloc(s2);
    EXPECT_STATUS_MSG(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s2, b2),
                      INVALID, "workEstimation");
    free(b2);
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr), INVALID,
                      "order");
    EXPECT_STATUS(rusparseSpGEMM_estimateMemory(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, RUSPARSE_SPGEMM_ALG3,
                                                descr, 0.5f, &s3, NULL, NULL),
                  INVALID);
    EXPECT_STATUS(rusparseSpGEMMreuse_nnz(h, N_OP, N_OP, A.d, B.d, C, ALG, descr, &s2, NULL, &s3, NULL, &s4, NULL),
                  INVALID);
    EXPECT_STATUS(rusparseSpGEMMreuse_copy(h, N_OP, N_OP, A.d, B.d, C, ALG, descr, &s5, NULL), INVALID);
    EXPECT_STATUS(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr), INVALID);

    /* buffer smaller than asked */
    CHECK(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, NULL));
    REQUIRE(s1 > 0, "bufferSize1 = 0");
    b1 = xmalloc(s1);
    s1 -= 1;
    EXPECT_STATUS_MSG(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, b1),
                      INVALID, "bufferSize1");
    s1 += 1;
    /* copy before compute (nothing planned yet, then planned but not computed) */
    EXPECT_STATUS(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr), INVALID);
    CHECK(rusparseSpGEMM_workEstimation(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s1, b1));
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr), INVALID,
                      "rusparseSpGEMM_compute");
    /* the reuse phases do not continue a non-reuse plan */
    EXPECT_STATUS(rusparseSpGEMMreuse_nnz(h, N_OP, N_OP, A.d, B.d, C, ALG, descr, &s2, NULL, &s3, NULL, &s4, NULL),
                  INVALID);
    /* estimateMemory: chunk_fraction in (0, 1], sizes */
    EXPECT_STATUS_MSG(rusparseSpGEMM_estimateMemory(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64,
                                                    RUSPARSE_SPGEMM_ALG3, descr, 0.0f, &s3, NULL, NULL),
                      INVALID, "chunk_fraction");
    EXPECT_STATUS_MSG(rusparseSpGEMM_estimateMemory(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64,
                                                    RUSPARSE_SPGEMM_ALG3, descr, 1.5f, &s3, NULL, NULL),
                      INVALID, "chunk_fraction");
    /* arguments differing from the work estimation's */
    EXPECT_STATUS_MSG(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C2, R64, ALG, descr, &s2, NULL),
                      INVALID, "same");
    EXPECT_STATUS_MSG(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64,
                                             RUSPARSE_SPGEMM_ALG1, descr, &s2, NULL),
                      INVALID, "same");

    /* compute: size query, buffer too small */
    CHECK(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s2, NULL));
    REQUIRE(s2 > 0, "bufferSize2 = 0");
    b2 = xmalloc(s2);
    s2 -= 1;
    EXPECT_STATUS_MSG(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s2, b2),
                      INVALID, "bufferSize2");
    s2 += 1;
    CHECK(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr, &s2, b2));

    CHECK(rusparseSpMatGetSize(C, &r, &c, &nnz));
    REQUIRE(nnz > 0, "nnz(C) = 0 in the fixture");
    /* copy before CsrSetPointers: C's arrays are NULL */
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr), INVALID,
                      "NULL");
    off = xmalloc(sizeof(int32_t) * (size_t)(r + 1));
    col = xmalloc(sizeof(int32_t) * (size_t)nnz);
    val = xmalloc(sizeof(double) * (size_t)nnz);
    EXPECT_STATUS_MSG(rusparseCsrSetPointers(C, off, NULL, NULL), INVALID, "csrColInd");
    /* C without values: copy writes values, so it refuses */
    CHECK(rusparseCsrSetPointers(C, off, col, NULL));
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr), INVALID,
                      "matC values is NULL");
    CHECK(rusparseCsrSetPointers(C, off, col, val));
    /* copy: NULL alpha / beta */
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, N_OP, N_OP, NULL, A.d, B.d, &zero, C, R64, ALG, descr), INVALID, "alpha");
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, NULL, C, R64, ALG, descr), INVALID, "beta");
    /* A's pattern changed since work estimation (compute checks shapes and nnz;
       copy, which writes C, checks the pattern) */
    save = ((int32_t *)A.col)[0];
    ((int32_t *)A.col)[0] = save == 1 ? 3 : 1;
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr), INVALID,
                      "pattern of A changed");
    ((int32_t *)A.col)[0] = save;
    EXPECT_STATUS(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, &zero, C, R64, ALG, descr), SUCCESS);
    {
        dense_t ref = dense_product(&a, N_OP, &b, N_OP);
        if (check_csr("copy after phase errors", &ref, nnz, off, I32, col, I32, val, R64, 0, cplx(1, 0), cplx(0, 0),
                      NULL))
            test_failures++;
        dense_free(&ref);
    }
    free(b1);
    free(b2);

    /* the reuse flow, with its own order errors */
    CHECK(rusparseSpGEMMreuse_workEstimation(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s1, NULL));
    b1 = xmalloc(s1);
    s1 -= 1;
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_workEstimation(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s1, b1), INVALID,
                      "bufferSize1");
    s1 += 1;
    CHECK(rusparseSpGEMMreuse_workEstimation(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s1, b1));
    /* copy of the compute flow does not continue a reuse plan */
    EXPECT_STATUS(rusparseSpGEMM_copy(h, N_OP, N_OP, &one, A.d, B.d, &zero, C2, R64, ALG, descr), INVALID);
    EXPECT_STATUS(rusparseSpGEMM_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C2, R64, ALG, descr, &s2, NULL),
                  INVALID);
    /* reuse_copy / reuse_compute before reuse_nnz */
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_copy(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s5, NULL), INVALID,
                      "reuse_nnz");
    EXPECT_STATUS(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C2, R64, ALG, descr), INVALID);
    CHECK(rusparseSpGEMMreuse_nnz(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s2, NULL, &s3, NULL, &s4, NULL));
    b2 = xmalloc(s2);
    b3 = xmalloc(s3);
    b4 = xmalloc(s4);
    /* a mix of NULL and given buffers */
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_nnz(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s2, b2, &s3, NULL, &s4, b4),
                      INVALID, "externalBuffer");
    /* buffer 3 too small */
    s3b = s3 - 1;
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_nnz(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s2, b2, &s3b, b3, &s4, b4),
                      INVALID, "bufferSize3");
    CHECK(rusparseSpGEMMreuse_nnz(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s2, b2, &s3, b3, &s4, b4));
    CHECK(rusparseSpMatGetSize(C2, &r, &c, &nnz));
    free(off);
    free(col);
    free(val);
    off = xmalloc(sizeof(int32_t) * (size_t)(r + 1));
    col = xmalloc(sizeof(int32_t) * (size_t)nnz);
    val = xmalloc(sizeof(double) * (size_t)nnz);
    CHECK(rusparseCsrSetPointers(C2, off, col, val));
    /* reuse_compute before reuse_copy */
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C2, R64, ALG, descr),
                      INVALID, "reuse_copy");
    CHECK(rusparseSpGEMMreuse_copy(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s5, NULL));
    b5 = xmalloc(s5);
    s5 -= 1;
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_copy(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s5, b5), INVALID,
                      "bufferSize5");
    s5 += 1;
    CHECK(rusparseSpGEMMreuse_copy(h, N_OP, N_OP, A.d, B.d, C2, ALG, descr, &s5, b5));
    /* reuse_compute with another computeType, NULL alpha */
    EXPECT_STATUS(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C2, RUSPARSE_R_32F, ALG, descr),
                  NOT_SUPPORTED);
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, NULL, A.d, B.d, &zero, C2, R64, ALG, descr), INVALID,
                      "alpha");
    /* C's structure written by reuse_copy must not change */
    save = ((int32_t *)col)[0];
    ((int32_t *)col)[0] = save + 1;
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C2, R64, ALG, descr),
                      INVALID, "matC");
    ((int32_t *)col)[0] = save;
    EXPECT_STATUS(rusparseSpGEMMreuse_compute(h, N_OP, N_OP, &one, A.d, B.d, &zero, C2, R64, ALG, descr), SUCCESS);
    {
        dense_t ref = dense_product(&a, N_OP, &b, N_OP);
        if (check_csr("reuse after phase errors", &ref, nnz, off, I32, col, I32, val, R64, 0, cplx(1, 0), cplx(0, 0),
                      NULL))
            test_failures++;
        dense_free(&ref);
    }
    free(b1);
    free(b2);
    free(b3);
    free(b4);
    free(b5);
    free(off);
    free(col);
    free(val);

    /* the same SpGEMM descriptor, after all that, runs a normal product */
    product_ok(descr, "same descriptor after phase errors");

    CHECK(rusparseDestroySpMat(C));
    CHECK(rusparseDestroySpMat(C2));
    CHECK(rusparseSpGEMM_destroyDescr(descr));
}

int main(void) {
    rng_t rng = {2024};
    int64_t k;
    CHECK(rusparseCreate(&h));
    /* fixture, sorted and without duplicates so that index k is predictable;
     * every row of A and B has an entry */
    do {
        tmat_free(&a);
        a = tmat_random(&rng, 3, 4, 50, 0);
        for (k = 0; k < a.rows; k++)
            if (a.ptr[k + 1] - a.ptr[k] < 2) break;
    } while (k < a.rows || a.nnz < 6);
    do {
        tmat_free(&b);
        b = tmat_random(&rng, 4, 2, 60, 0);
        for (k = 0; k < b.rows; k++)
            if (b.ptr[k + 1] == b.ptr[k]) break;
    } while (k < b.rows);
    A = csr_make(&a, I32, I32, 0, R64);
    B = csr_make(&b, I32, I32, 0, R64);

    test_error_names();
    test_handle();
    test_create_csr();
    test_descriptor_getters();
    test_spgemm_arguments();
    test_bad_data();
    test_spare_room();
    test_structure_only();
    test_predict_nnz();
    test_alignment_and_alloc();
    test_phases();
    product_ok(NULL, "final product on the same handle");

    csr_free(&A);
    csr_free(&B);
    tmat_free(&a);
    tmat_free(&b);
    CHECK(rusparseDestroy(h));
    printf("errors: %d products after errors\n", products_ok);
    return test_summary("errors");
}
