/*
 * The cuSPARSE SpGEMM sample flow (CUDALibrarySamples, spgemm and
 * spgemm_mem for ALG3), run for every value type x index types x base x
 * opA x opB, on several shapes:
 *
 *   rusparseCreate; CreateCsr A, B; CreateCsr C (rows, cols, 0, offsets-or-NULL,
 *   NULL, NULL); SpGEMM_createDescr;
 *   workEstimation(NULL) -> size1 > 0; malloc; workEstimation(buffer1);
 *   getNumProducts (checked against a count);
 *   [ALG3: estimateMemory(NULL buffer3) -> size3; estimateMemory(buffer3) -> size2]
 *   compute(NULL) -> size2 > 0; malloc; compute(buffer2);
 *   SpMatGetSize(C) -> nnz (and rusparseSpGEMM_predictNnz, exact at these sizes);
 *   malloc C's columns and values; CsrSetPointers;
 *   [beta != 0: the caller writes C's old values]; copy;
 *   check against the dense reference; destroy everything.
 *
 * Data are integer valued, so results compare exactly. A and B have
 * unsorted columns, empty rows, and A has duplicates (summed).
 */
#include "common.h"

typedef struct {
    rusparseIndexType_t ot, ct;
} index_pair_t;

typedef struct {
    rusparseDataType_t dt;
    rusparseIndexType_t ot, ct; /* A's and B's */
    rusparseIndexType_t c_ot;   /* C's row offsets (may differ from A's) */
    int base;
    rusparseOperation_t opA, opB;
    rusparseSpGEMMAlg_t alg;
    cf64_t alpha, beta;
    int c_offsets_given; /* C created with its row-offset array already allocated */
    int a_null_arrays;   /* an nnz(A) == 0 case: A created with NULL columns and values */
    int same_ab;         /* matB is the same descriptor as matA (A * A, A^T * A, ...) */
    int c_uninit;        /* with beta == 0: C's arrays left uninitialised (else NaN-filled) */
    int any_order;       /* rusparseSpGEMM_setColumnOrder(ANY): rows in any order */
} config_t;

static long products_run = 0;

/* Runs the sample flow for C = alpha op(A) op(B) + beta C on a handle.
 * a and b are the stored matrices (their shapes already fit opA, opB). */
static void run_case(rusparseHandle_t h, const config_t *cf, const tmat_t *a, const tmat_t *b,
                     const char *shape) {
    char label[256];
    rusparseDataType_t dt = cf->dt;
    int tra = cf->opA != RUSPARSE_OPERATION_NON_TRANSPOSE;
    int trb = cf->opB != RUSPARSE_OPERATION_NON_TRANSPOSE;
    int64_t m = tra ? a->cols : a->rows, n = trb ? b->rows : b->cols;
    scalar_t alpha = make_scalar(dt, cf->alpha), beta = make_scalar(dt, cf->beta);
    int beta_nonzero = cf->beta.re != 0.0 || cf->beta.im != 0.0;
    csr_t A, B;
    rusparseSpMatDescr_t matC = NULL;
    rusparseSpGEMMDescr_t descr = NULL;
    void *c_off = NULL, *c_col = NULL, *c_val = NULL, *buffer1, *buffer2;
    size_t size1 = 0, size2 = 0;
    int64_t c_rows = -1, c_cols = -1, c_nnz = -1, num_prods = -1, expected_prods;
    cf64_t *old = NULL;
    dense_t ref;
    int64_t p;

    snprintf(label, sizeof label, "%s %s %s/%s(C %s) base %d op %s%s alg %d alpha (%g,%g) beta (%g,%g) C-offsets %s%s",
             shape, dt_name(dt), it_name(cf->ot), it_name(cf->ct), it_name(cf->c_ot), cf->base,
             op_name(cf->opA), op_name(cf->opB), (int)cf->alg, cf->alpha.re, cf->alpha.im,
             cf->beta.re, cf->beta.im, cf->c_offsets_given ? "given" : "NULL",
             cf->any_order ? ", any column order" : "");
    if (cf->same_ab) strncat(label, " matB == matA", sizeof label - strlen(label) - 1);

    if (cf->a_null_arrays && a->nnz == 0) {
        A.off = tmat_offsets(a, cf->ot, cf->base);
        A.col = NULL;
        A.val = NULL;
        CHECK(rusparseCreateCsr(&A.d, a->rows, a->cols, 0, A.off, NULL, NULL, cf->ot, cf->ct,
                                (rusparseIndexBase_t)cf->base, dt));
    } else {
        A = csr_make(a, cf->ot, cf->ct, cf->base, dt);
    }
    if (cf->same_ab) {
        B = A;
    } else {
        B = csr_make(b, cf->ot, cf->ct, cf->base, dt);
    }

    if (cf->c_offsets_given) {
        c_off = xmalloc(it_size(cf->c_ot) * (size_t)(m + 1));
        if (!cf->c_uninit) memset(c_off, 0xA5, it_size(cf->c_ot) * (size_t)(m + 1));
    }
    CHECK(rusparseCreateCsr(&matC, m, n, 0, c_off, NULL, NULL, cf->c_ot, cf->ct,
                            (rusparseIndexBase_t)cf->base, dt));
    CHECK(rusparseSpGEMM_createDescr(&descr));

    /* phase 1: work estimation */
    CHECK(rusparseSpGEMM_workEstimation(h, cf->opA, cf->opB, &alpha, A.d, B.d, &beta, matC, dt,
                                        cf->alg, descr, &size1, NULL));
    EXPECT_TRUE(size1 > 0, "[%s] bufferSize1 = %zu", label, size1);
    buffer1 = xmalloc(size1);
    CHECK(rusparseSpGEMM_workEstimation(h, cf->opA, cf->opB, &alpha, A.d, B.d, &beta, matC, dt,
                                        cf->alg, descr, &size1, buffer1));
    CHECK(rusparseSpGEMM_getNumProducts(descr, &num_prods));
    expected_prods = count_products(a, cf->opA, b, cf->opB);
    EXPECT_TRUE(num_prods == expected_prods, "[%s] getNumProducts = %lld, expected %lld", label,
                (long long)num_prods, (long long)expected_prods);

    if (cf->alg == RUSPARSE_SPGEMM_ALG3) {
        /* spgemm_mem sample: estimateMemory twice, then compute with size2 */
        size_t size3 = 0;
        void *buffer3;
        CHECK(rusparseSpGEMM_estimateMemory(h, cf->opA, cf->opB, &alpha, A.d, B.d, &beta, matC, dt,
                                            cf->alg, descr, 0.2f, &size3, NULL, NULL));
        EXPECT_TRUE(size3 > 0, "[%s] bufferSize3 = %zu", label, size3);
        buffer3 = xmalloc(size3);
        CHECK(rusparseSpGEMM_estimateMemory(h, cf->opA, cf->opB, &alpha, A.d, B.d, &beta, matC, dt,
                                            cf->alg, descr, 0.2f, &size3, buffer3, &size2));
        EXPECT_TRUE(size2 > 0, "[%s] bufferSize2 from estimateMemory = %zu", label, size2);
        free(buffer3);
    } else {
        /* phase 2: compute, size query */
        CHECK(rusparseSpGEMM_compute(h, cf->opA, cf->opB, &alpha, A.d, B.d, &beta, matC, dt, cf->alg,
                                     descr, &size2, NULL));
        EXPECT_TRUE(size2 > 0, "[%s] bufferSize2 = %zu", label, size2);
    }
    buffer2 = xmalloc(size2);
    CHECK(rusparseSpGEMM_compute(h, cf->opA, cf->opB, &alpha, A.d, B.d, &beta, matC, dt, cf->alg,
                                 descr, &size2, buffer2));

    CHECK(rusparseSpMatGetSize(matC, &c_rows, &c_cols, &c_nnz));
    EXPECT_TRUE(c_rows == m && c_cols == n, "[%s] C is %lld x %lld, expected %lld x %lld", label,
                (long long)c_rows, (long long)c_cols, (long long)m, (long long)n);
    REQUIRE(c_nnz >= 0 && c_nnz <= m * n, "[%s] nnz(C) = %lld", label, (long long)c_nnz);
    {
        /* predictNnz counts products this small exactly */
        int64_t predicted = -1;
        CHECK(rusparseSpGEMM_predictNnz(h, cf->opA, cf->opB, A.d, B.d, &predicted));
        EXPECT_TRUE(predicted == c_nnz, "[%s] predictNnz %lld, nnz(C) %lld", label,
                    (long long)predicted, (long long)c_nnz);
    }

    if (!cf->c_offsets_given) {
        c_off = xmalloc(it_size(cf->c_ot) * (size_t)(m + 1));
        if (!cf->c_uninit) memset(c_off, 0xA5, it_size(cf->c_ot) * (size_t)(m + 1));
    }
    if (c_nnz > 0) { /* an empty C keeps NULL columns and values */
        c_col = xmalloc(it_size(cf->ct) * (size_t)c_nnz);
        c_val = xmalloc(dt_size(dt) * (size_t)c_nnz);
        if (!cf->c_uninit) {
            /* with beta == 0 the old values must not be read: NaN would show */
            memset(c_col, 0xA5, it_size(cf->ct) * (size_t)c_nnz);
            memset(c_val, 0xFF, dt_size(dt) * (size_t)c_nnz);
        } /* else: left uninitialised, so valgrind reports any read of them */
    }
    CHECK(rusparseCsrSetPointers(matC, c_off, c_col, c_val));
    if (beta_nonzero) {
        /* the caller's C values on the product's (sorted) pattern */
        old = (cf64_t *)xmalloc(sizeof(cf64_t) * (size_t)c_nnz);
        for (p = 0; p < c_nnz; p++) {
            old[p] = cplx((double)(p % 5) - 2.0, dt_is_complex(dt) ? (double)(p % 3) - 1.0 : 0.0);
            val_set(c_val, dt, p, old[p]);
        }
    }

    /* phase 3: copy (the numeric product into C's arrays); C's values
       split between two arrays are refused there (only reuse_compute
       writes them), before anything is written */
    if (cf->any_order) CHECK(rusparseSpGEMM_setColumnOrder(descr, RUSPARSE_COLUMN_ORDER_ANY));
    CHECK(rusparseCsrSetSplitValues(matC, c_off, c_val, c_off, c_val));
    EXPECT_STATUS_MSG(rusparseSpGEMM_copy(h, cf->opA, cf->opB, &alpha, A.d, B.d, &beta, matC, dt, cf->alg,
                                          descr),
                      RUSPARSE_STATUS_INVALID_VALUE, "only rusparseSpGEMMreuse_compute writes");
    CHECK(rusparseCsrSetSplitValues(matC, NULL, NULL, NULL, NULL));
    CHECK(rusparseSpGEMM_copy(h, cf->opA, cf->opB, &alpha, A.d, B.d, &beta, matC, dt, cf->alg,
                              descr));
    products_run++;

    {
        /* the plan says what ran: the CPU, one concrete CPU algorithm, the
         * products counted by work estimation and nnz(C) */
        rusparseBackend_t be = RUSPARSE_BACKEND_AUTO;
        rusparseSpGEMMAlg_t ran = RUSPARSE_SPGEMM_DEFAULT;
        int64_t prods = -1, prods2 = -2, znz = -2;
        CHECK(rusparseSpGEMM_getNumProducts(descr, &prods2));
        CHECK(rusparseSpGEMM_getPlanInfo(descr, &be, &ran, &prods, &znz));
        EXPECT_TRUE(be == RUSPARSE_BACKEND_CPU && ran >= RUSPARSE_SPGEMM_CPU_HASH &&
                        ran <= RUSPARSE_SPGEMM_CPU_DENSE && prods == prods2 && znz == c_nnz,
                    "[%s] getPlanInfo: backend %d, algorithm %d, products %lld (expected %lld), "
                    "nnz %lld (expected %lld)",
                    label, (int)be, (int)ran, (long long)prods, (long long)prods2, (long long)znz,
                    (long long)c_nnz);
        CHECK(rusparseSpGEMM_getPlanInfo(descr, NULL, NULL, NULL, NULL));
        /* the CPU back end does not bin rows */
        int32_t bins = -1;
        int64_t rows_per_bin[4] = {-1, -1, -1, -1};
        CHECK(rusparseSpGEMM_getBinCounts(descr, RUSPARSE_SPGEMM_BINS_SYMBOLIC, NULL, 0, &bins));
        EXPECT_TRUE(bins == 0, "[%s] getBinCounts (symbolic): %d bins on the CPU", label, (int)bins);
        bins = -1;
        CHECK(rusparseSpGEMM_getBinCounts(descr, RUSPARSE_SPGEMM_BINS_NUMERIC, rows_per_bin, 4,
                                          &bins));
        EXPECT_TRUE(bins == 0 && rows_per_bin[0] == -1,
                    "[%s] getBinCounts (numeric): %d bins on the CPU", label, (int)bins);
    }

    ref = dense_product(a, cf->opA, b, cf->opB);
    if (check_csr_order(label, &ref, c_nnz, c_off, cf->c_ot, c_col, cf->ct, c_val, dt, cf->base,
                        cf->alpha, cf->beta, old, !cf->any_order) != 0)
        test_failures++;
    dense_free(&ref);

    {
        /* the descriptor records what was set */
        int64_t r2, c2, z2;
        void *o2, *k2, *v2;
        rusparseIndexType_t ot2, ct2;
        rusparseIndexBase_t b2;
        rusparseDataType_t dt2;
        CHECK(rusparseCsrGet(matC, &r2, &c2, &z2, &o2, &k2, &v2, &ot2, &ct2, &b2, &dt2));
        EXPECT_TRUE(r2 == m && c2 == n && z2 == c_nnz && o2 == c_off && k2 == c_col && v2 == c_val &&
                        ot2 == cf->c_ot && ct2 == cf->ct && (int)b2 == cf->base && dt2 == dt,
                    "[%s] rusparseCsrGet(matC) does not return what was set", label);
    }

    CHECK(rusparseSpGEMM_destroyDescr(descr));
    CHECK(rusparseDestroySpMat(matC));
    csr_free(&A);
    if (!cf->same_ab) csr_free(&B);
    free(buffer1);
    free(buffer2);
    free(c_off);
    free(c_col);
    free(c_val);
    free(old);
}

/* A (2 x 3) * B (3 x ncols) with 64-bit column indices near ncols, which is
 * huge (2^40 .. INT64_MAX): the CPU product must not allocate O(ncols). */
static void test_huge_columns(rusparseHandle_t h) {
    static const int64_t ncols_list[] = {(int64_t)1 << 40, INT64_MAX};
    int t;
    for (t = 0; t < 2; t++) {
        int64_t N = ncols_list[t], big = ((int64_t)1 << 33) + 7;
        int64_t ao[3] = {0, 2, 3}, ac[3] = {2, 0, 1};
        double av[3] = {2, 1, 3};
        int64_t bo[4] = {0, 2, 3, 4}, bc[4] = {N - 1, 5, big, N - 1};
        double bv[4] = {1, 2, 3, 4};
        /* row 0: 1 * B(0,:) + 2 * B(2,:) = {5: 2, N-1: 1 + 8}; row 1: 3 * B(1,:) = {big: 9} */
        const int64_t want_off[3] = {0, 2, 3}, want_col[3] = {5, N - 1, big};
        const double want_val[3] = {2, 9, 9};
        int64_t co[3], cc[3], r, c, nnz;
        double cv[3], one = 1, zero = 0;
        rusparseSpMatDescr_t A, B, C;
        rusparseSpGEMMDescr_t d;
        size_t s1 = 0, s2 = 0;
        void *b1, *b2;
        const rusparseOperation_t op = RUSPARSE_OPERATION_NON_TRANSPOSE;
        CHECK(rusparseCreateCsr(&A, 2, 3, 3, ao, ac, av, RUSPARSE_INDEX_64I, RUSPARSE_INDEX_64I,
                                RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
        CHECK(rusparseCreateCsr(&B, 3, N, 4, bo, bc, bv, RUSPARSE_INDEX_64I, RUSPARSE_INDEX_64I,
                                RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
        CHECK(rusparseCreateCsr(&C, 2, N, 0, NULL, NULL, NULL, RUSPARSE_INDEX_64I, RUSPARSE_INDEX_64I,
                                RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
        CHECK(rusparseSpGEMM_createDescr(&d));
        CHECK(rusparseSpGEMM_workEstimation(h, op, op, &one, A, B, &zero, C, RUSPARSE_R_64F,
                                            RUSPARSE_SPGEMM_DEFAULT, d, &s1, NULL));
        b1 = xmalloc(s1);
        CHECK(rusparseSpGEMM_workEstimation(h, op, op, &one, A, B, &zero, C, RUSPARSE_R_64F,
                                            RUSPARSE_SPGEMM_DEFAULT, d, &s1, b1));
        CHECK(rusparseSpGEMM_compute(h, op, op, &one, A, B, &zero, C, RUSPARSE_R_64F, RUSPARSE_SPGEMM_DEFAULT,
                                     d, &s2, NULL));
        b2 = xmalloc(s2);
        CHECK(rusparseSpGEMM_compute(h, op, op, &one, A, B, &zero, C, RUSPARSE_R_64F, RUSPARSE_SPGEMM_DEFAULT,
                                     d, &s2, b2));
        CHECK(rusparseSpMatGetSize(C, &r, &c, &nnz));
        REQUIRE(nnz == 3, "huge columns: nnz(C) = %lld, expected 3", (long long)nnz);
        CHECK(rusparseCsrSetPointers(C, co, cc, cv));
        CHECK(rusparseSpGEMM_copy(h, op, op, &one, A, B, &zero, C, RUSPARSE_R_64F, RUSPARSE_SPGEMM_DEFAULT, d));
        EXPECT_TRUE(memcmp(co, want_off, sizeof co) == 0 && memcmp(cc, want_col, sizeof cc) == 0 &&
                        memcmp(cv, want_val, sizeof cv) == 0,
                    "huge columns (%lld): C = {%lld %lld %lld} {%lld: %g, %lld: %g, %lld: %g}", (long long)N,
                    (long long)co[0], (long long)co[1], (long long)co[2], (long long)cc[0], cv[0],
                    (long long)cc[1], cv[1], (long long)cc[2], cv[2]);
        products_run++;
        CHECK(rusparseSpGEMM_destroyDescr(d));
        CHECK(rusparseDestroySpMat(A));
        CHECK(rusparseDestroySpMat(B));
        CHECK(rusparseDestroySpMat(C));
        free(b1);
        free(b2);
    }
}

/* One matC and one SpGEMM descriptor used for two different products in a
 * row (new arrays set with CsrSetPointers), and copy called twice: with
 * BRMerge-Upper the first copy gives its temporary C to the handle's scratch,
 * so the second computes the values again. */
static void test_descriptor_reuse(rusparseHandle_t h, rusparseSpGEMMAlg_t alg) {
    rng_t rng = {777};
    tmat_t a1 = tmat_random(&rng, 5, 4, 30, 0), b1 = tmat_random(&rng, 4, 6, 30, 0);
    tmat_t a2 = tmat_random(&rng, 5, 3, 90, TM_UNSORTED), b2 = tmat_random(&rng, 3, 6, 90, 0);
    tmat_t *as[2], *bs[2];
    rusparseSpMatDescr_t C;
    rusparseSpGEMMDescr_t d;
    double one = 1, zero = 0;
    const rusparseOperation_t op = RUSPARSE_OPERATION_NON_TRANSPOSE;
    const rusparseDataType_t dt = RUSPARSE_R_64F;
    int round;
    as[0] = &a1; as[1] = &a2; bs[0] = &b1; bs[1] = &b2;
    CHECK(rusparseCreateCsr(&C, 5, 6, 0, NULL, NULL, NULL, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_BASE_ZERO, dt));
    CHECK(rusparseSpGEMM_createDescr(&d));
    for (round = 0; round < 2; round++) {
        csr_t A = csr_make(as[round], RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, dt);
        csr_t B = csr_make(bs[round], RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, dt);
        size_t s1 = 0, s2 = 0;
        void *buf1, *buf2, *off, *col, *val;
        int64_t r, c, nnz;
        dense_t ref = dense_product(as[round], op, bs[round], op);
        char label[64];
        CHECK(rusparseSpGEMM_workEstimation(h, op, op, &one, A.d, B.d, &zero, C, dt, alg, d,
                                            &s1, NULL));
        buf1 = xmalloc(s1);
        CHECK(rusparseSpGEMM_workEstimation(h, op, op, &one, A.d, B.d, &zero, C, dt, alg, d,
                                            &s1, buf1));
        CHECK(rusparseSpGEMM_compute(h, op, op, &one, A.d, B.d, &zero, C, dt, alg, d, &s2, NULL));
        buf2 = xmalloc(s2);
        CHECK(rusparseSpGEMM_compute(h, op, op, &one, A.d, B.d, &zero, C, dt, alg, d, &s2, buf2));
        CHECK(rusparseSpMatGetSize(C, &r, &c, &nnz));
        off = xmalloc(sizeof(int32_t) * 6);
        col = xmalloc(sizeof(int32_t) * (size_t)nnz);
        val = xmalloc(sizeof(double) * (size_t)nnz);
        CHECK(rusparseCsrSetPointers(C, off, col, val));
        CHECK(rusparseSpGEMM_copy(h, op, op, &one, A.d, B.d, &zero, C, dt, alg, d));
        snprintf(label, sizeof label, "matC reused, alg %d, product %d", (int)alg, round + 1);
        if (check_csr(label, &ref, nnz, off, RUSPARSE_INDEX_32I, col, RUSPARSE_INDEX_32I, val, dt, 0, cplx(1, 0),
                      cplx(0, 0), NULL))
            test_failures++;
        /* copy again: same C */
        memset(val, 0xFF, sizeof(double) * (size_t)nnz);
        CHECK(rusparseSpGEMM_copy(h, op, op, &one, A.d, B.d, &zero, C, dt, alg, d));
        snprintf(label, sizeof label, "matC reused, alg %d, product %d, second copy", (int)alg, round + 1);
        if (check_csr(label, &ref, nnz, off, RUSPARSE_INDEX_32I, col, RUSPARSE_INDEX_32I, val, dt, 0, cplx(1, 0),
                      cplx(0, 0), NULL))
            test_failures++;
        products_run += 2;
        dense_free(&ref);
        csr_free(&A);
        csr_free(&B);
        free(buf1);
        free(buf2);
        free(off);
        free(col);
        free(val);
    }
    CHECK(rusparseSpGEMM_destroyDescr(d));
    CHECK(rusparseDestroySpMat(C));
    tmat_free(&a1);
    tmat_free(&b1);
    tmat_free(&a2);
    tmat_free(&b2);
}

int main(int argc, char **argv) {
    static const rusparseDataType_t dts[] = {RUSPARSE_R_32F, RUSPARSE_R_64F, RUSPARSE_C_32F,
                                             RUSPARSE_C_64F};
    static const index_pair_t idx[] = {{RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I},
                                       {RUSPARSE_INDEX_64I, RUSPARSE_INDEX_64I},
                                       {RUSPARSE_INDEX_64I, RUSPARSE_INDEX_32I},
                                       {RUSPARSE_INDEX_32I, RUSPARSE_INDEX_64I}};
    static const rusparseOperation_t ops[] = {RUSPARSE_OPERATION_NON_TRANSPOSE,
                                              RUSPARSE_OPERATION_TRANSPOSE,
                                              RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE};
    static const rusparseSpGEMMAlg_t algs[] = {
        RUSPARSE_SPGEMM_DEFAULT, RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC,
        RUSPARSE_SPGEMM_CSR_ALG_NONDETERMINISTIC, RUSPARSE_SPGEMM_ALG1, RUSPARSE_SPGEMM_ALG2,
        RUSPARSE_SPGEMM_ALG3, RUSPARSE_SPGEMM_CPU_HASH, RUSPARSE_SPGEMM_CPU_BRMERGE_PRECISE,
        RUSPARSE_SPGEMM_CPU_BRMERGE_UPPER, RUSPARSE_SPGEMM_CPU_DENSE};
    enum { NUM_ALGS = sizeof algs / sizeof algs[0] };
    /* (alpha, beta) pairs; for real types only the real parts are used */
    static const cf64_t alphas[] = {{1, 0}, {2, 0}, {1, 0}, {-2, 1}, {0, 0}};
    static const cf64_t betas[] = {{0, 0}, {0, 0}, {1, 0}, {3, -2}};
    int quick = quick_mode(argc, argv);
    rusparseHandle_t h = NULL;
    int di, ii, base, oa, ob, combo = 0;

    CHECK(rusparseCreate(&h));
    for (di = 0; di < 4; di++)
        for (ii = 0; ii < 4; ii++)
            for (base = 0; base <= 1; base++)
                for (oa = 0; oa < 3; oa++)
                    for (ob = 0; ob < 3; ob++, combo++) {
                        rusparseDataType_t dt = dts[di];
                        int cplx_flag = dt_is_complex(dt) ? TM_COMPLEX : 0;
                        config_t cf;
                        rng_t rng;
                        int tra = oa != 0, trb = ob != 0, edge;
                        int64_t m, k, n;
                        tmat_t a, b;
                        /* the product's shape op(A): m x k, op(B): k x n */
                        int64_t em, ek, en;
                        int eflags;
                        const char *ename;

                        rng.s = 0x5eed0000u + (uint64_t)combo;
                        cf.dt = dt;
                        cf.ot = idx[ii].ot;
                        cf.ct = idx[ii].ct;
                        cf.c_ot = (combo % 5 == 4) ? (cf.ot == RUSPARSE_INDEX_32I ? RUSPARSE_INDEX_64I
                                                                                 : RUSPARSE_INDEX_32I)
                                                   : cf.ot;
                        cf.base = base;
                        cf.opA = ops[oa];
                        cf.opB = ops[ob];
                        cf.alg = algs[combo % NUM_ALGS];
                        cf.alpha = alphas[combo % 5];
                        cf.beta = betas[(combo / 5) % 4];
                        cf.c_offsets_given = combo % 2;
                        cf.a_null_arrays = 0;
                        cf.same_ab = 0;
                        cf.c_uninit = (combo / 2) % 2;
                        cf.any_order = (combo / 7) % 2;
                        if (!dt_is_complex(dt)) {
                            cf.alpha.im = 0;
                            cf.beta.im = 0;
                        }

                        /* 1. rectangular, unsorted columns, empty rows, duplicates in A */
                        m = 7 + combo % 3;
                        k = 6;
                        n = 5 + combo % 2;
                        if (quick && combo % 3 != 0) { m = 4; n = 3; k = 3; }
                        a = tmat_random(&rng, tra ? k : m, tra ? m : k, 45,
                                        TM_UNSORTED | TM_DUPLICATES | TM_EMPTY_ROWS | cplx_flag);
                        b = tmat_random(&rng, trb ? n : k, trb ? k : n, 40,
                                        TM_UNSORTED | TM_EMPTY_ROWS | cplx_flag);
                        run_case(h, &cf, &a, &b, "rect");
                        tmat_free(&a);
                        tmat_free(&b);

                        /* 2. one edge case per combination */
                        edge = combo % 5;
                        switch (edge) {
                        case 0: em = 0; ek = 4; en = 3; eflags = 0; ename = "0-rows"; break;
                        case 1: em = 3; ek = 4; en = 5; eflags = 1; ename = "nnzA=0"; break;
                        case 2: em = 3; ek = 0; en = 2; eflags = 0; ename = "k=0"; break;
                        case 3: em = 1; ek = 1; en = 1; eflags = 0; ename = "1x1"; break;
                        default: em = 4; ek = 5; en = 0; eflags = 0; ename = "0-cols"; break;
                        }
                        a = tmat_random(&rng, tra ? ek : em, tra ? em : ek, eflags ? 0 : 60,
                                        TM_DUPLICATES | cplx_flag);
                        b = tmat_random(&rng, trb ? en : ek, trb ? ek : en, 60, cplx_flag);
                        if (edge == 3 && a.nnz == 0) { /* make the 1x1 case non-trivial */
                            tmat_free(&a);
                            a = tmat_random(&rng, 1, 1, 100, cplx_flag);
                        }
                        cf.a_null_arrays = (combo / 5) % 2;
                        run_case(h, &cf, &a, &b, ename);
                        tmat_free(&a);
                        tmat_free(&b);
                    }

    {
        /* An AUTO handle reports where its last product ran: host arrays,
         * so the CPU. */
        rusparseBackend_t be = RUSPARSE_BACKEND_AUTO;
        CHECK(rusparseGetBackend(h, &be));
        EXPECT_TRUE(be == RUSPARSE_BACKEND_CPU, "AUTO handle after host products reports %d, expected CPU",
                    (int)be);
    }

    {
        /* conjugation really conjugates: 1x1 complex (1 + 2i), op C on A and B:
         * conj(1+2i) * conj(3-1i) = (1-2i)(3+1i) = 5 - 5i */
        tmat_t a, b;
        rng_t rng = {42};
        config_t cf;
        int z;
        for (z = 0; z < 2; z++) {
            a = tmat_random(&rng, 1, 1, 100, 0);
            b = tmat_random(&rng, 1, 1, 100, 0);
            a.re[0] = 1; a.im[0] = 2;
            b.re[0] = 3; b.im[0] = -1;
            memset(&cf, 0, sizeof cf);
            cf.dt = z ? RUSPARSE_C_64F : RUSPARSE_C_32F;
            cf.ot = cf.ct = cf.c_ot = RUSPARSE_INDEX_32I;
            cf.opA = cf.opB = RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE;
            cf.alg = RUSPARSE_SPGEMM_DEFAULT;
            cf.alpha = cplx(1, 0);
            run_case(h, &cf, &a, &b, "conj-1x1");
            {
                dense_t ref = dense_product(&a, cf.opA, &b, cf.opB);
                EXPECT_TRUE(ref.v[0].re == 5 && ref.v[0].im == -5, "reference conjugation is wrong");
                dense_free(&ref);
            }
            tmat_free(&a);
            tmat_free(&b);
        }
    }
    {
        /* matB is the same descriptor as matA: A * A, A^T * A, A^H * A, A * A^H */
        static const rusparseOperation_t pairs[4][2] = {
            {RUSPARSE_OPERATION_NON_TRANSPOSE, RUSPARSE_OPERATION_NON_TRANSPOSE},
            {RUSPARSE_OPERATION_TRANSPOSE, RUSPARSE_OPERATION_NON_TRANSPOSE},
            {RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE, RUSPARSE_OPERATION_NON_TRANSPOSE},
            {RUSPARSE_OPERATION_NON_TRANSPOSE, RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE}};
        rng_t rng = {4242};
        int z, p;
        for (z = 0; z < 4; z++)
            for (p = 0; p < 4; p++) {
                config_t cf;
                tmat_t a = tmat_random(&rng, 6, 6, 40,
                                       TM_UNSORTED | TM_DUPLICATES | (dt_is_complex(dts[z]) ? TM_COMPLEX : 0));
                memset(&cf, 0, sizeof cf);
                cf.dt = dts[z];
                cf.ot = cf.c_ot = RUSPARSE_INDEX_64I;
                cf.ct = RUSPARSE_INDEX_32I;
                cf.base = p % 2;
                cf.opA = pairs[p][0];
                cf.opB = pairs[p][1];
                cf.alg = RUSPARSE_SPGEMM_DEFAULT;
                cf.alpha = cplx(1, 0);
                cf.same_ab = 1;
                run_case(h, &cf, &a, &a, "A*A");
                tmat_free(&a);
            }
    }
    test_huge_columns(h);
    test_descriptor_reuse(h, RUSPARSE_SPGEMM_DEFAULT);
    test_descriptor_reuse(h, RUSPARSE_SPGEMM_CPU_BRMERGE_UPPER);
    CHECK(rusparseDestroy(h));
    printf("sample_flow: %d combinations, %ld products\n", combo, products_run);
    return test_summary("sample_flow");
}
