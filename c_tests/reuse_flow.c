/*
 * The cuSPARSE SpGEMM reuse flow (CUDALibrarySamples spgemm_reuse):
 *
 *   reuse_workEstimation(NULL) -> size1; malloc; reuse_workEstimation(buffer1);
 *   reuse_nnz(NULL x3) -> size2..4; malloc; reuse_nnz(buffers 2..4);
 *   free buffers 1 and 2 (as the sample does);
 *   SpMatGetSize(C) -> nnz; malloc C's columns and values; CsrSetPointers;
 *   reuse_copy(NULL) -> size5; malloc; reuse_copy(buffer5); free buffer 3;
 *   reuse_compute (alpha 1, beta 0)                      -> compare
 *     (every third flow with A's values changed in place before it: the
 *     values reuse_nnz summed beside C's structure are then not copied);
 *   new values of A and B in place, reuse_compute (alpha 2, beta 0) -> compare;
 *   new value arrays set with rusparseSpMatSetValues, reuse_compute
 *     (alpha, beta != 0: beta applies to the previous C)  -> compare;
 *   C's values split between two arrays, then A's (rusparseCsrSetSplitValues)
 *                                                        -> compare.
 *
 * For every value type x index types x base x opA x opB; every other flow
 * makes its second and third reuse_compute with RUSPARSE_PATTERN_CHECK_CALLER
 * (no pattern hashes), which must give the same values, and every fourth
 * sets it before work estimation (no pattern fingerprints at all: values
 * changed after reuse_nnz must still be multiplied). Then a pattern
 * change of A or B (a moved column index, a moved row boundary) before
 * reuse_compute must be INVALID_VALUE and leave C untouched; under
 * RUSPARSE_PATTERN_CHECK_CALLER the same call skips the hash (it is not
 * that error, and accesses nothing outside the arrays: valgrind runs this
 * test), and HASH again refuses it; restoring the pattern makes
 * reuse_compute work again.
 */
#include "common.h"

typedef struct {
    rusparseIndexType_t ot, ct;
} index_pair_t;

typedef struct {
    rusparseHandle_t h;
    rusparseDataType_t dt;
    rusparseIndexType_t ot, ct;
    int base;
    rusparseOperation_t opA, opB;
    rusparseSpGEMMAlg_t alg;
    tmat_t a, b;
    csr_t A, B;
    rusparseSpMatDescr_t matC;
    rusparseSpGEMMDescr_t descr;
    void *c_off, *c_col, *c_val;
    void *buffer4, *buffer5;
    int64_t m, n, c_nnz;
    /* rusparseSpGEMM_setReuseCopyValues: reuse_copy writes C's values too */
    int copy_values;
    /* RUSPARSE_PATTERN_CHECK_CALLER from before work estimation (the plan
       keeps no fingerprints of the patterns) */
    int caller_from_start;
    char label[200];
} reuse_t;

/* Everything up to and including reuse_copy. */
static void reuse_setup(reuse_t *r) {
    size_t size1 = 0, size2 = 0, size3 = 0, size4 = 0, size5 = 0;
    void *buffer1, *buffer2, *buffer3;
    int64_t rows, cols;
    int tra = r->opA != RUSPARSE_OPERATION_NON_TRANSPOSE;
    int trb = r->opB != RUSPARSE_OPERATION_NON_TRANSPOSE;

    r->m = tra ? r->a.cols : r->a.rows;
    r->n = trb ? r->b.rows : r->b.cols;
    r->A = csr_make(&r->a, r->ot, r->ct, r->base, r->dt);
    r->B = csr_make(&r->b, r->ot, r->ct, r->base, r->dt);
    CHECK(rusparseCreateCsr(&r->matC, r->m, r->n, 0, NULL, NULL, NULL, r->ot, r->ct,
                            (rusparseIndexBase_t)r->base, r->dt));
    CHECK(rusparseSpGEMM_createDescr(&r->descr));
    if (r->copy_values) CHECK(rusparseSpGEMM_setReuseCopyValues(r->descr, 1));
    if (r->caller_from_start) CHECK(rusparseSpGEMM_setPatternCheck(r->descr, RUSPARSE_PATTERN_CHECK_CALLER));

    CHECK(rusparseSpGEMMreuse_workEstimation(r->h, r->opA, r->opB, r->A.d, r->B.d, r->matC, r->alg,
                                             r->descr, &size1, NULL));
    EXPECT_TRUE(size1 > 0, "[%s] bufferSize1 = %zu", r->label, size1);
    buffer1 = xmalloc(size1);
    CHECK(rusparseSpGEMMreuse_workEstimation(r->h, r->opA, r->opB, r->A.d, r->B.d, r->matC, r->alg,
                                             r->descr, &size1, buffer1));

    CHECK(rusparseSpGEMMreuse_nnz(r->h, r->opA, r->opB, r->A.d, r->B.d, r->matC, r->alg, r->descr,
                                  &size2, NULL, &size3, NULL, &size4, NULL));
    EXPECT_TRUE(size2 > 0 && size3 > 0 && size4 > 0, "[%s] reuse_nnz sizes %zu %zu %zu", r->label,
                size2, size3, size4);
    buffer2 = xmalloc(size2);
    buffer3 = xmalloc(size3);
    r->buffer4 = xmalloc(size4);
    CHECK(rusparseSpGEMMreuse_nnz(r->h, r->opA, r->opB, r->A.d, r->B.d, r->matC, r->alg, r->descr,
                                  &size2, buffer2, &size3, buffer3, &size4, r->buffer4));
    free(buffer1);
    free(buffer2);

    CHECK(rusparseSpMatGetSize(r->matC, &rows, &cols, &r->c_nnz));
    EXPECT_TRUE(rows == r->m && cols == r->n, "[%s] C is %lld x %lld", r->label, (long long)rows,
                (long long)cols);
    r->c_off = xmalloc(it_size(r->ot) * (size_t)(r->m + 1));
    memset(r->c_off, 0xA5, it_size(r->ot) * (size_t)(r->m + 1));
    if (r->c_nnz > 0) { /* an empty C keeps NULL columns and values */
        r->c_col = xmalloc(it_size(r->ct) * (size_t)r->c_nnz);
        r->c_val = xmalloc(dt_size(r->dt) * (size_t)r->c_nnz);
        memset(r->c_col, 0xA5, it_size(r->ct) * (size_t)r->c_nnz);
        /* NaN: reuse_compute with beta == 0 must not read them */
        memset(r->c_val, 0xFF, dt_size(r->dt) * (size_t)r->c_nnz);
    }
    CHECK(rusparseCsrSetPointers(r->matC, r->c_off, r->c_col, r->c_val));

    CHECK(rusparseSpGEMMreuse_copy(r->h, r->opA, r->opB, r->A.d, r->B.d, r->matC, r->alg, r->descr,
                                   &size5, NULL));
    EXPECT_TRUE(size5 > 0, "[%s] bufferSize5 = %zu", r->label, size5);
    r->buffer5 = xmalloc(size5);
    CHECK(rusparseSpGEMMreuse_copy(r->h, r->opA, r->opB, r->A.d, r->B.d, r->matC, r->alg, r->descr,
                                   &size5, r->buffer5));
    free(buffer3);
    if (r->copy_values) {
        /* C = op(A) op(B) whole, written by reuse_copy */
        dense_t ref = dense_product(&r->a, r->opA, &r->b, r->opB);
        char label[300];
        snprintf(label, sizeof label, "%s, values written by reuse_copy", r->label);
        if (check_csr(label, &ref, r->c_nnz, r->c_off, r->ot, r->c_col, r->ct, r->c_val, r->dt, r->base,
                      cplx(1, 0), cplx(0, 0), NULL) != 0)
            test_failures++;
        dense_free(&ref);
    }
}

/* reuse_copy asked to write C's values (rusparseSpGEMM_setReuseCopyValues)
   with none set on matC is INVALID_VALUE. */
static void copy_values_need_an_array(rusparseHandle_t h) {
    rusparseSpGEMMDescr_t descr;
    rusparseSpMatDescr_t matC;
    rng_t rng = {7};
    tmat_t a = tmat_random(&rng, 5, 5, 60, 0);
    csr_t A = csr_make(&a, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, RUSPARSE_R_64F);
    rusparseOperation_t N = RUSPARSE_OPERATION_NON_TRANSPOSE;
    size_t s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0;
    void *b1, *b2, *b3, *b4, *b5;
    int64_t rows, cols, nnz;
    int32_t *off, *col;

    CHECK(rusparseCreateCsr(&matC, 5, 5, 0, NULL, NULL, NULL, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I,
                            RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
    CHECK(rusparseSpGEMM_createDescr(&descr));
    CHECK(rusparseSpGEMM_setReuseCopyValues(descr, 1));
    CHECK(rusparseSpGEMMreuse_workEstimation(h, N, N, A.d, A.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s1, NULL));
    b1 = xmalloc(s1);
    CHECK(rusparseSpGEMMreuse_workEstimation(h, N, N, A.d, A.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s1, b1));
    CHECK(rusparseSpGEMMreuse_nnz(h, N, N, A.d, A.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s2, NULL, &s3, NULL,
                                  &s4, NULL));
    b2 = xmalloc(s2);
    b3 = xmalloc(s3);
    b4 = xmalloc(s4);
    CHECK(rusparseSpGEMMreuse_nnz(h, N, N, A.d, A.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s2, b2, &s3, b3, &s4,
                                  b4));
    CHECK(rusparseSpMatGetSize(matC, &rows, &cols, &nnz));
    REQUIRE(nnz > 0, "test bug: A*A is empty");
    off = (int32_t *)xmalloc(sizeof(int32_t) * 6);
    col = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)nnz);
    CHECK(rusparseCsrSetPointers(matC, off, col, NULL));
    CHECK(rusparseSpGEMMreuse_copy(h, N, N, A.d, A.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s5, NULL));
    b5 = xmalloc(s5);
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_copy(h, N, N, A.d, A.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s5, b5),
                      RUSPARSE_STATUS_INVALID_VALUE, "matC's values are NULL");
    CHECK(rusparseSpGEMM_destroyDescr(descr));
    CHECK(rusparseDestroySpMat(matC));
    csr_free(&A);
    tmat_free(&a);
    free(off);
    free(col);
    free(b1);
    free(b2);
    free(b3);
    free(b4);
    free(b5);
}

/* The first row of `x` with an entry and a column it does not have (-1 if
   none); that column in *free_col. */
static int64_t row_with_a_free_column(const tmat_t *x, int64_t *free_col) {
    int64_t k, c, q;
    for (k = 0; k < x->rows; k++) {
        if (x->ptr[k + 1] - x->ptr[k] == 0 || x->ptr[k + 1] - x->ptr[k] >= x->cols) continue;
        for (c = 0; c < x->cols; c++) {
            int64_t present = 0;
            for (q = x->ptr[k]; q < x->ptr[k + 1]; q++) present |= x->col[q] == c;
            if (!present) {
                *free_col = c;
                return k;
            }
        }
    }
    return -1;
}

/* reuse_nnz lists C's structure, which reuse_copy writes as listed, so it
   checks A's and B's patterns as the numeric phases do: a column of A
   moved since work estimation (same nnz) is INVALID_VALUE under
   RUSPARSE_PATTERN_CHECK_HASH, and under RUSPARSE_PATTERN_CHECK_CALLER, set
   before work estimation, not the hash's error (the caller vouched for the
   pattern: the call may succeed on the moved column or fail otherwise,
   accessing nothing outside the arrays). */
static void pattern_check_at_reuse_nnz(rusparseHandle_t h) {
    rusparseOperation_t N = RUSPARSE_OPERATION_NON_TRANSPOSE;
    int caller;

    for (caller = 0; caller < 2; caller++) {
        rusparseSpGEMMDescr_t descr;
        rusparseSpMatDescr_t matC;
        rng_t rng = {11};
        tmat_t a = tmat_random(&rng, 6, 6, 50, 0), b = tmat_random(&rng, 6, 5, 50, 0);
        csr_t A = csr_make(&a, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, RUSPARSE_R_64F);
        csr_t B = csr_make(&b, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I, 0, RUSPARSE_R_64F);
        size_t s1 = 0, s2 = 0, s3 = 0, s4 = 0;
        void *b1, *b2, *b3, *b4;
        int64_t row, e, new_c = -1, old_c;
        rusparseStatus_t st;

        CHECK(rusparseCreateCsr(&matC, 6, 5, 0, NULL, NULL, NULL, RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I,
                                RUSPARSE_INDEX_BASE_ZERO, RUSPARSE_R_64F));
        CHECK(rusparseSpGEMM_createDescr(&descr));
        if (caller) CHECK(rusparseSpGEMM_setPatternCheck(descr, RUSPARSE_PATTERN_CHECK_CALLER));
        CHECK(rusparseSpGEMMreuse_workEstimation(h, N, N, A.d, B.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s1, NULL));
        b1 = xmalloc(s1);
        CHECK(rusparseSpGEMMreuse_workEstimation(h, N, N, A.d, B.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s1, b1));
        /* move one column of A to a column its row does not have */
        row = row_with_a_free_column(&a, &new_c);
        REQUIRE(row >= 0, "test bug: no row of A to change");
        e = a.ptr[row];
        old_c = idx_get(A.col, RUSPARSE_INDEX_32I, e);
        idx_set(A.col, RUSPARSE_INDEX_32I, e, new_c);
        CHECK(rusparseSpGEMMreuse_nnz(h, N, N, A.d, B.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s2, NULL, &s3, NULL,
                                      &s4, NULL));
        b2 = xmalloc(s2);
        b3 = xmalloc(s3);
        b4 = xmalloc(s4);
        st = rusparseSpGEMMreuse_nnz(h, N, N, A.d, B.d, matC, RUSPARSE_SPGEMM_DEFAULT, descr, &s2, b2, &s3, b3, &s4,
                                     b4);
        if (caller) {
            EXPECT_TRUE(st == RUSPARSE_STATUS_SUCCESS || strstr(rusparseGetLastErrorMessage(), "changed since") == NULL,
                        "[pattern check at reuse_nnz] CALLER still hashed the patterns: %s",
                        rusparseGetLastErrorMessage());
        } else {
            EXPECT_TRUE(st == RUSPARSE_STATUS_INVALID_VALUE &&
                            strstr(rusparseGetLastErrorMessage(), "pattern of A changed since") != NULL,
                        "[pattern check at reuse_nnz] HASH: status %d, %s", (int)st, rusparseGetLastErrorMessage());
        }
        idx_set(A.col, RUSPARSE_INDEX_32I, e, old_c);
        CHECK(rusparseSpGEMM_destroyDescr(descr));
        CHECK(rusparseDestroySpMat(matC));
        csr_free(&A);
        csr_free(&B);
        tmat_free(&a);
        tmat_free(&b);
        free(b1);
        free(b2);
        free(b3);
        free(b4);
    }
}

static void reuse_teardown(reuse_t *r) {
    CHECK(rusparseSpGEMM_destroyDescr(r->descr));
    CHECK(rusparseDestroySpMat(r->matC));
    csr_free(&r->A);
    csr_free(&r->B);
    tmat_free(&r->a);
    tmat_free(&r->b);
    free(r->c_off);
    free(r->c_col);
    free(r->c_val);
    free(r->buffer4);
    free(r->buffer5);
}

/* reuse_compute with (alpha, beta) and a comparison with the reference. */
static void reuse_compute_and_check(reuse_t *r, cf64_t alpha_v, cf64_t beta_v, const char *step) {
    scalar_t alpha = make_scalar(r->dt, alpha_v), beta = make_scalar(r->dt, beta_v);
    int beta_nonzero = beta_v.re != 0.0 || beta_v.im != 0.0;
    cf64_t *old = NULL;
    dense_t ref;
    char label[300];
    int64_t p;

    if (beta_nonzero) {
        old = (cf64_t *)xmalloc(sizeof(cf64_t) * (size_t)r->c_nnz);
        for (p = 0; p < r->c_nnz; p++) old[p] = val_get(r->c_val, r->dt, p);
    }
    CHECK(rusparseSpGEMMreuse_compute(r->h, r->opA, r->opB, &alpha, r->A.d, r->B.d, &beta, r->matC,
                                      r->dt, r->alg, r->descr));
    snprintf(label, sizeof label, "%s, %s", r->label, step);
    ref = dense_product(&r->a, r->opA, &r->b, r->opB);
    if (check_csr(label, &ref, r->c_nnz, r->c_off, r->ot, r->c_col, r->ct, r->c_val, r->dt, r->base,
                  alpha_v, beta_v, old) != 0)
        test_failures++;
    dense_free(&ref);
    free(old);
}

/* Offsets (r's offset type and base) that split each of the m rows of a
   CSR matrix with row offsets `off` in two, row i at (i * mul + add) modulo
   its length + 1: the first blocks' offsets in fo, the rest's in so, and
   the two blocks' sizes in *nf and *ns. */
static void split_rows(const void *off, const reuse_t *r, int64_t m, int64_t mul, int64_t add, void *fo,
                       void *so, int64_t *nf, int64_t *ns) {
    int64_t i;
    *nf = *ns = 0;
    for (i = 0; i <= m; i++) {
        int64_t len = i < m ? idx_get(off, r->ot, i + 1) - idx_get(off, r->ot, i) : 0;
        int64_t cut = i < m ? (i * mul + add) % (len + 1) : 0;
        idx_set(fo, r->ot, i, *nf + r->base);
        idx_set(so, r->ot, i, *ns + r->base);
        *nf += cut;
        *ns += len - cut;
    }
}

/* reuse_compute into C's values split between two arrays
   (rusparseCsrSetSplitValues), each row at its own point, as an MPI rank's
   diagonal and off-diagonal blocks: the rows joined again must be the
   product; a split that does not fit C's rows, and the phases that do not
   write split values, are refused without writing; clearing the split
   sends the values to csrValues again. */
static void split_compute_and_check(reuse_t *r) {
    size_t is = it_size(r->ot), vs = dt_size(r->dt);
    int64_t m = r->m, i, t, k = 0, nf = 0, ns = 0;
    void *fo = xmalloc(is * (size_t)(m + 1)), *so = xmalloc(is * (size_t)(m + 1));
    void *fv, *sv, *joined = xmalloc(vs * (size_t)(r->c_nnz + 1));
    scalar_t one = make_scalar(r->dt, cplx(1, 0)), zero = make_scalar(r->dt, cplx(0, 0));
    dense_t ref;
    char label[300];
    size_t size5 = 0;

    split_rows(r->c_off, r, m, 3, 1, fo, so, &nf, &ns);
    fv = xmalloc(vs * (size_t)(nf + 1));
    sv = xmalloc(vs * (size_t)(ns + 1));
    memset(fv, 0xFF, vs * (size_t)(nf + 1));
    memset(sv, 0xFF, vs * (size_t)(ns + 1));
    CHECK(rusparseCsrSetSplitValues(r->matC, fo, fv, so, sv));
    CHECK(rusparseSpGEMMreuse_compute(r->h, r->opA, r->opB, &one, r->A.d, r->B.d, &zero, r->matC, r->dt,
                                      r->alg, r->descr));
    for (i = 0; i < m; i++) {
        int64_t f = idx_get(fo, r->ot, i) - r->base, f1 = idx_get(fo, r->ot, i + 1) - r->base;
        int64_t g = idx_get(so, r->ot, i) - r->base, g1 = idx_get(so, r->ot, i + 1) - r->base;
        for (t = f; t < f1; t++) val_set(joined, r->dt, k++, val_get(fv, r->dt, t));
        for (t = g; t < g1; t++) val_set(joined, r->dt, k++, val_get(sv, r->dt, t));
    }
    snprintf(label, sizeof label, "%s, split values", r->label);
    ref = dense_product(&r->a, r->opA, &r->b, r->opB);
    if (check_csr(label, &ref, r->c_nnz, r->c_off, r->ot, r->c_col, r->ct, joined, r->dt, r->base,
                  cplx(1, 0), cplx(0, 0), NULL) != 0)
        test_failures++;
    dense_free(&ref);

    /* Refused, nothing written: a row split one entry off (when a row has a
       first part), a half-given split. reuse_copy writes no values, */
    memset(fv, 0x5A, vs * (size_t)(nf + 1));
    memset(sv, 0x5A, vs * (size_t)(ns + 1));
    memcpy(joined, fv, vs);
    for (i = 0; i < m && idx_get(fo, r->ot, i + 1) == idx_get(fo, r->ot, i); i++) {
    }
    if (i < m) { /* row i's first part one entry shorter, row i + 1's longer */
        void *moved = xmalloc(is * (size_t)(m + 1));
        memcpy(moved, fo, is * (size_t)(m + 1));
        idx_set(moved, r->ot, i + 1, idx_get(fo, r->ot, i + 1) - 1);
        CHECK(rusparseCsrSetSplitValues(r->matC, moved, fv, so, sv));
        EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(r->h, r->opA, r->opB, &one, r->A.d, r->B.d, &zero,
                                                      r->matC, r->dt, r->alg, r->descr),
                          RUSPARSE_STATUS_INVALID_VALUE, "blocks hold");
        free(moved);
        CHECK(rusparseCsrSetSplitValues(r->matC, fo, fv, so, sv));
    }
    CHECK(rusparseSpGEMMreuse_copy(r->h, r->opA, r->opB, r->A.d, r->B.d, r->matC, r->alg, r->descr, &size5,
                                   NULL));
    CHECK(rusparseSpGEMMreuse_copy(r->h, r->opA, r->opB, r->A.d, r->B.d, r->matC, r->alg, r->descr, &size5,
                                   r->buffer5));
    if (r->copy_values) {
        /* unless told to (rusparseSpGEMM_setReuseCopyValues): then the
           product, into the split arrays */
        for (i = 0, k = 0; i < m; i++) {
            int64_t f = idx_get(fo, r->ot, i) - r->base, f1 = idx_get(fo, r->ot, i + 1) - r->base;
            int64_t g = idx_get(so, r->ot, i) - r->base, g1 = idx_get(so, r->ot, i + 1) - r->base;
            for (t = f; t < f1; t++) val_set(joined, r->dt, k++, val_get(fv, r->dt, t));
            for (t = g; t < g1; t++) val_set(joined, r->dt, k++, val_get(sv, r->dt, t));
        }
        snprintf(label, sizeof label, "%s, split values written by reuse_copy", r->label);
        ref = dense_product(&r->a, r->opA, &r->b, r->opB);
        if (check_csr(label, &ref, r->c_nnz, r->c_off, r->ot, r->c_col, r->ct, joined, r->dt, r->base,
                      cplx(1, 0), cplx(0, 0), NULL) != 0)
            test_failures++;
        dense_free(&ref);
        memset(fv, 0x5A, vs * (size_t)(nf + 1));
        memset(sv, 0x5A, vs * (size_t)(ns + 1));
        memcpy(joined, fv, vs);
    }
    EXPECT_STATUS_MSG(rusparseCsrSetSplitValues(r->matC, NULL, fv, so, sv), RUSPARSE_STATUS_INVALID_VALUE,
                      "firstRowOffsets is NULL");
    EXPECT_TRUE(memcmp(joined, fv, vs) == 0 && ((unsigned char *)sv)[0] == 0x5A,
                "[%s] a refused split wrote C's values", r->label);
    CHECK(rusparseCsrSetSplitValues(r->matC, NULL, NULL, NULL, NULL));
    free(fo);
    free(so);
    free(fv);
    free(sv);
    free(joined);
}

/* reuse_compute reading A's values from two arrays (rusparseCsrSetSplitValues
   on matA), each stored row of A split at its own point, with A's csrValues
   NULL, so the values can come from nowhere else: the product must be
   A's. A split that does not fit A's rows and a split on matB are refused
   without writing C; clearing A's split and giving csrValues back restores
   the ordinary read. */
static void split_input_and_check(reuse_t *r) {
    size_t is = it_size(r->ot), vs = dt_size(r->dt);
    int64_t m = r->a.rows, i, t, nf = 0, ns = 0, k = 0;
    void *fo = xmalloc(is * (size_t)(m + 1)), *so = xmalloc(is * (size_t)(m + 1));
    void *fv, *sv, *saved_c = xmalloc(vs * (size_t)(r->c_nnz + 1));
    scalar_t one = make_scalar(r->dt, cplx(1, 0)), zero = make_scalar(r->dt, cplx(0, 0));

    split_rows(r->A.off, r, m, 5, 2, fo, so, &nf, &ns);
    fv = xmalloc(vs * (size_t)(nf + 1));
    sv = xmalloc(vs * (size_t)(ns + 1));
    for (i = 0; i < m; i++) {
        int64_t f = idx_get(fo, r->ot, i) - r->base, f1 = idx_get(fo, r->ot, i + 1) - r->base;
        int64_t g = idx_get(so, r->ot, i) - r->base, g1 = idx_get(so, r->ot, i + 1) - r->base;
        for (t = f; t < f1; t++) val_set(fv, r->dt, t, val_get(r->A.val, r->dt, k++));
        for (t = g; t < g1; t++) val_set(sv, r->dt, t, val_get(r->A.val, r->dt, k++));
    }
    CHECK(rusparseCsrSetPointers(r->A.d, r->A.off, r->A.col, NULL));
    CHECK(rusparseCsrSetSplitValues(r->A.d, fo, fv, so, sv));
    reuse_compute_and_check(r, cplx(1, 0), cplx(0, 0), "A's values split between two arrays");

    /* Refused, C untouched: A's row i split one entry off (when a row has a
       first part), and any split on matB. */
    if (r->c_nnz > 0) memcpy(saved_c, r->c_val, vs * (size_t)r->c_nnz);
    for (i = 0; i < m && idx_get(fo, r->ot, i + 1) == idx_get(fo, r->ot, i); i++) {
    }
    if (i < m) {
        void *moved = xmalloc(is * (size_t)(m + 1));
        memcpy(moved, fo, is * (size_t)(m + 1));
        idx_set(moved, r->ot, i + 1, idx_get(fo, r->ot, i + 1) - 1);
        CHECK(rusparseCsrSetSplitValues(r->A.d, moved, fv, so, sv));
        EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(r->h, r->opA, r->opB, &one, r->A.d, r->B.d, &zero,
                                                      r->matC, r->dt, r->alg, r->descr),
                          RUSPARSE_STATUS_INVALID_VALUE, "of A has");
        free(moved);
    }
    CHECK(rusparseCsrSetSplitValues(r->A.d, NULL, NULL, NULL, NULL));
    CHECK(rusparseCsrSetPointers(r->A.d, r->A.off, r->A.col, r->A.val));
    CHECK(rusparseCsrSetSplitValues(r->B.d, r->B.off, r->B.val, r->B.off, r->B.val));
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(r->h, r->opA, r->opB, &one, r->A.d, r->B.d, &zero, r->matC,
                                                  r->dt, r->alg, r->descr),
                      RUSPARSE_STATUS_INVALID_VALUE, "matB's values are split");
    CHECK(rusparseCsrSetSplitValues(r->B.d, NULL, NULL, NULL, NULL));
    EXPECT_TRUE(r->c_nnz == 0 || memcmp(saved_c, r->c_val, vs * (size_t)r->c_nnz) == 0,
                "[%s] a refused split input wrote C's values", r->label);
    free(fo);
    free(so);
    free(fv);
    free(sv);
    free(saved_c);
}

static void run_flow(rusparseHandle_t h, rusparseDataType_t dt, index_pair_t ix, int base,
                     rusparseOperation_t opA, rusparseOperation_t opB, rusparseSpGEMMAlg_t alg,
                     uint64_t seed, int64_t m, int64_t k, int64_t n, int percent_a, int caller) {
    reuse_t r;
    rng_t rng;
    int cx = dt_is_complex(dt);
    int fl = cx ? TM_COMPLEX : 0;
    void *new_a, *new_b;
    cf64_t alpha3 = cplx(-1, cx ? 2 : 0), beta3 = cplx(2, cx ? -1 : 0);

    memset(&r, 0, sizeof r);
    rng.s = seed;
    r.h = h;
    r.dt = dt;
    r.ot = ix.ot;
    r.ct = ix.ct;
    r.base = base;
    r.opA = opA;
    r.opB = opB;
    r.alg = alg;
    /* Every other flow: reuse_copy writes C's values (checked there). */
    r.copy_values = (seed >> 1) % 2 == 0;
    r.caller_from_start = caller == 2;
    snprintf(r.label, sizeof r.label, "reuse %lldx%lldx%lld %s %s/%s base %d op %s%s alg %d%s%s", (long long)m,
             (long long)k, (long long)n, dt_name(dt), it_name(ix.ot), it_name(ix.ct), base, op_name(opA),
             op_name(opB), (int)alg, r.copy_values ? " copy values" : "",
             r.caller_from_start ? " CALLER from the start" : "");
    r.a = tmat_random(&rng, opA ? k : m, opA ? m : k, percent_a, TM_UNSORTED | TM_DUPLICATES | TM_EMPTY_ROWS | fl);
    r.b = tmat_random(&rng, opB ? n : k, opB ? k : n, 40, TM_UNSORTED | fl);
    reuse_setup(&r);

    /* Every third flow: new values of A in place between reuse_nnz (which
       sums C's values as it lists C's structure, for the first reuse_compute
       to copy) and the first reuse_compute, which must multiply them. */
    if (seed % 3 == 2) {
        tmat_revalue(&rng, &r.a, cx);
        tmat_store_values(&r.a, dt, r.A.val);
        reuse_compute_and_check(&r, cplx(1, 0), cplx(0, 0), "first compute (A's values changed after reuse_nnz)");
    } else {
        reuse_compute_and_check(&r, cplx(1, 0), cplx(0, 0), "first compute");
    }
    /* The patterns are unchanged from here on: the caller may vouch for them. */
    if (caller) CHECK(rusparseSpGEMM_setPatternCheck(r.descr, RUSPARSE_PATTERN_CHECK_CALLER));

    /* new values, same arrays */
    tmat_revalue(&rng, &r.a, cx);
    tmat_revalue(&rng, &r.b, cx);
    tmat_store_values(&r.a, dt, r.A.val);
    tmat_store_values(&r.b, dt, r.B.val);
    reuse_compute_and_check(&r, cplx(2, 0), cplx(0, 0), "second compute (values changed in place)");

    /* new value arrays through rusparseSpMatSetValues; beta applies to the last C */
    tmat_revalue(&rng, &r.a, cx);
    tmat_revalue(&rng, &r.b, cx);
    new_a = tmat_values(&r.a, dt);
    new_b = tmat_values(&r.b, dt);
    CHECK(rusparseSpMatSetValues(r.A.d, new_a));
    CHECK(rusparseSpMatSetValues(r.B.d, new_b));
    free(r.A.val);
    free(r.B.val);
    r.A.val = new_a;
    r.B.val = new_b;
    reuse_compute_and_check(&r, alpha3, beta3, "third compute (SpMatSetValues, beta != 0)");

    split_compute_and_check(&r);
    reuse_compute_and_check(&r, cplx(1, 0), cplx(0, 0), "fourth compute (the split cleared)");
    split_input_and_check(&r);
    reuse_compute_and_check(&r, cplx(1, 0), cplx(0, 0), "fifth compute (A's split cleared)");

    reuse_teardown(&r);
}

/* With a changed pattern of A or B: RUSPARSE_PATTERN_CHECK_CALLER computes
   without the hash, so the call does not fail with the hash's error (it may
   succeed with values of the changed pattern, or fail otherwise), and
   RUSPARSE_PATTERN_CHECK_HASH refuses it again. */
static void caller_skips_hash(reuse_t *r, const scalar_t *alpha, const scalar_t *beta) {
    rusparseStatus_t st;
    CHECK(rusparseSpGEMM_setPatternCheck(r->descr, RUSPARSE_PATTERN_CHECK_CALLER));
    st = rusparseSpGEMMreuse_compute(r->h, r->opA, r->opB, alpha, r->A.d, r->B.d, beta, r->matC, r->dt,
                                     r->alg, r->descr);
    EXPECT_TRUE(st == RUSPARSE_STATUS_SUCCESS || strstr(rusparseGetLastErrorMessage(), "changed since") == NULL,
                "[%s] CALLER still hashed the patterns: %s", r->label, rusparseGetLastErrorMessage());
    CHECK(rusparseSpGEMM_setPatternCheck(r->descr, RUSPARSE_PATTERN_CHECK_HASH));
    EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(r->h, r->opA, r->opB, alpha, r->A.d, r->B.d, beta, r->matC,
                                                  r->dt, r->alg, r->descr),
                      RUSPARSE_STATUS_INVALID_VALUE, "pattern");
}

/* A pattern change before reuse_compute is INVALID_VALUE and leaves C as it was. */
static void pattern_change(rusparseHandle_t h, rusparseDataType_t dt, rusparseOperation_t opA,
                           int which, uint64_t seed) {
    reuse_t r;
    rng_t rng;
    scalar_t alpha = make_scalar(dt, cplx(1, 0)), beta = make_scalar(dt, cplx(0, 0));
    void *saved;
    size_t cbytes;
    tmat_t *x;
    csr_t *X;
    int64_t row, new_c = -1;
    static const char *what[] = {"column of A", "column of B", "row boundary of A"};

    memset(&r, 0, sizeof r);
    rng.s = seed;
    r.h = h;
    r.dt = dt;
    r.ot = r.ct = RUSPARSE_INDEX_32I;
    r.opA = opA;
    r.opB = RUSPARSE_OPERATION_NON_TRANSPOSE;
    r.alg = RUSPARSE_SPGEMM_DEFAULT;
    snprintf(r.label, sizeof r.label, "pattern change (%s) %s op %s", what[which], dt_name(dt),
             op_name(opA));
    r.a = tmat_random(&rng, 6, 6, 50, 0);
    r.b = tmat_random(&rng, 6, 5, 50, 0);
    reuse_setup(&r);
    reuse_compute_and_check(&r, cplx(1, 0), cplx(0, 0), "before the change");

    cbytes = dt_size(dt) * (size_t)r.c_nnz;
    REQUIRE(cbytes > 0, "test bug: empty C in the pattern-change case");
    saved = xmalloc(cbytes);
    memcpy(saved, r.c_val, cbytes);

    x = which == 1 ? &r.b : &r.a;
    X = which == 1 ? &r.B : &r.A;
    /* a row with an entry whose column can move to a column not in the row */
    row = row_with_a_free_column(x, &new_c);
    REQUIRE(row >= 0, "test bug: no row to change");
    if (which == 2) {
        /* move the first entry of row `row` into the previous row (or the last
         * entry into the next row): offsets change, nnz stays */
        int64_t at = row > 0 ? row : row + 1;
        int64_t old_off = idx_get(X->off, r.ot, at);
        int64_t new_off = row > 0 ? old_off + 1 : old_off - 1;
        idx_set(X->off, r.ot, at, new_off);
        EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(h, r.opA, r.opB, &alpha, r.A.d, r.B.d, &beta,
                                                      r.matC, dt, r.alg, r.descr),
                          RUSPARSE_STATUS_INVALID_VALUE, "pattern");
        EXPECT_TRUE(memcmp(saved, r.c_val, cbytes) == 0, "[%s] C's values changed by a failed call",
                    r.label);
        caller_skips_hash(&r, &alpha, &beta);
        idx_set(X->off, r.ot, at, old_off);
    } else {
        /* move one column index to a column the row does not have */
        int64_t e = x->ptr[row], old_c = idx_get(X->col, r.ct, e);
        idx_set(X->col, r.ct, e, new_c + r.base);
        EXPECT_STATUS_MSG(rusparseSpGEMMreuse_compute(h, r.opA, r.opB, &alpha, r.A.d, r.B.d, &beta,
                                                      r.matC, dt, r.alg, r.descr),
                          RUSPARSE_STATUS_INVALID_VALUE, "pattern");
        EXPECT_TRUE(memcmp(saved, r.c_val, cbytes) == 0, "[%s] C's values changed by a failed call",
                    r.label);
        caller_skips_hash(&r, &alpha, &beta);
        idx_set(X->col, r.ct, e, old_c);
    }
    /* pattern restored: works again, with new values */
    tmat_revalue(&rng, &r.a, 0);
    tmat_store_values(&r.a, dt, r.A.val);
    reuse_compute_and_check(&r, cplx(3, 0), cplx(0, 0), "after restoring the pattern");
    free(saved);
    reuse_teardown(&r);
}

/* The pattern check of flow `flow`: hashed (0), vouched for after the first
   reuse_compute (1, every other flow), or from before work estimation (2),
   each with and without A's values changed after reuse_nnz (seed % 3). */
static int caller_of(int flow) {
    return flow % 2 ? 1 : (flow / 2) % 2 ? 2 : 0;
}

int main(int argc, char **argv) {
    static const rusparseDataType_t dts[] = {RUSPARSE_R_32F, RUSPARSE_R_64F, RUSPARSE_C_32F,
                                             RUSPARSE_C_64F};
    static const index_pair_t idx[] = {{RUSPARSE_INDEX_32I, RUSPARSE_INDEX_32I},
                                       {RUSPARSE_INDEX_64I, RUSPARSE_INDEX_64I},
                                       {RUSPARSE_INDEX_64I, RUSPARSE_INDEX_32I}};
    static const rusparseOperation_t ops[] = {RUSPARSE_OPERATION_NON_TRANSPOSE,
                                              RUSPARSE_OPERATION_TRANSPOSE,
                                              RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE};
    static const rusparseSpGEMMAlg_t algs[] = {
        RUSPARSE_SPGEMM_DEFAULT,          RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC,
        RUSPARSE_SPGEMM_CPU_HASH,         RUSPARSE_SPGEMM_CSR_ALG_NONDETERMINISTIC,
        RUSPARSE_SPGEMM_CPU_BRMERGE_UPPER, RUSPARSE_SPGEMM_CPU_BRMERGE_PRECISE,
        RUSPARSE_SPGEMM_CPU_DENSE};
    enum { NUM_ALGS = sizeof algs / sizeof algs[0] };
    int quick = quick_mode(argc, argv);
    rusparseHandle_t h = NULL;
    int di, ii, base, oa, ob, flows = 0, which;

    CHECK(rusparseCreate(&h));
    for (di = 0; di < 4; di++)
        for (ii = 0; ii < 3; ii++)
            for (base = 0; base <= 1; base++)
                for (oa = 0; oa < 3; oa++)
                    for (ob = 0; ob < 3; ob++, flows++)
                        if (quick && flows % 4 != 0)
                            run_flow(h, dts[di], idx[ii], base, ops[oa], ops[ob], algs[flows % NUM_ALGS],
                                     0xabc000u + (uint64_t)flows, 4, 3, 3, 45, caller_of(flows));
                        else
                            run_flow(h, dts[di], idx[ii], base, ops[oa], ops[ob], algs[flows % NUM_ALGS],
                                     0xabc000u + (uint64_t)flows, 8, 6, 7, 45, caller_of(flows));

    /* empty shapes: 0 rows, inner dimension 0, 0 columns, nnz(A) == 0 */
    for (di = 0; di < 4; di++)
        for (oa = 0; oa < 3; oa++, flows += 4) {
            run_flow(h, dts[di], idx[di % 3], oa % 2, ops[oa], ops[(oa + di) % 3], RUSPARSE_SPGEMM_DEFAULT,
                     0xe000u + (uint64_t)flows, 0, 4, 3, 50, oa % 2);
            run_flow(h, dts[di], idx[di % 3], oa % 2, ops[oa], ops[(oa + di) % 3], RUSPARSE_SPGEMM_DEFAULT,
                     0xe100u + (uint64_t)flows, 3, 0, 2, 50, oa % 2);
            run_flow(h, dts[di], idx[di % 3], oa % 2, ops[oa], ops[(oa + di) % 3], RUSPARSE_SPGEMM_DEFAULT,
                     0xe200u + (uint64_t)flows, 4, 3, 0, 50, oa % 2);
            run_flow(h, dts[di], idx[di % 3], oa % 2, ops[oa], ops[(oa + di) % 3], RUSPARSE_SPGEMM_DEFAULT,
                     0xe300u + (uint64_t)flows, 4, 3, 5, 0, oa % 2);
        }

    for (di = 0; di < 4; di++)
        for (which = 0; which < 3; which++) {
            pattern_change(h, dts[di], RUSPARSE_OPERATION_NON_TRANSPOSE, which, 77u + (uint64_t)which);
            pattern_change(h, dts[di], RUSPARSE_OPERATION_TRANSPOSE, which, 99u + (uint64_t)which);
        }
    copy_values_need_an_array(h);
    pattern_check_at_reuse_nnz(h);
    CHECK(rusparseDestroy(h));
    printf("reuse_flow: %d flows (4 reuse_compute each, one into split values) + 24 pattern changes\n", flows);
    return test_summary("reuse_flow");
}
