/*
 * Helpers shared by the rusparse C tests.
 *
 * - CHECK(call): the call must return RUSPARSE_STATUS_SUCCESS, otherwise
 *   print file:line, the status name and the last error message, and exit(1).
 * - EXPECT_STATUS(call, expected) / EXPECT_STATUS_MSG(call, expected, substr):
 *   the call must return `expected`; for an error the last error message must
 *   be non-empty, start with the function name ("rusparse...") and, when
 *   `substr` is not NULL, contain it; for a success it must be "". A failure
 *   is printed and counted (test_failures), the test goes on; main returns
 *   test_summary().
 * - A tiny test matrix type (tmat_t: zero-based CSR in int64 + double re/im,
 *   possibly with unsorted columns and duplicates), converters to any
 *   rusparse index/value type and base, and a dense reference product
 *   op(A) * op(B) that also tracks the structural pattern.
 *
 * Everything is static inline so each test is one translation unit.
 */
#ifndef RUSPARSE_C_TESTS_COMMON_H
#define RUSPARSE_C_TESTS_COMMON_H

#include "rusparse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float re, im;
} cf32_t;
typedef struct {
    double re, im;
} cf64_t;

/* ------------------------------------------------------------------ */
/* Status checks                                                       */
/* ------------------------------------------------------------------ */

static int test_failures = 0;

#define CHECK(call)                                                                 \
    do {                                                                            \
        rusparseStatus_t check_status_ = (call);                                    \
        if (check_status_ != RUSPARSE_STATUS_SUCCESS) {                             \
            fprintf(stderr, "%s:%d: %s\n  returned %s (%d): \"%s\"\n", __FILE__,    \
                    __LINE__, #call, rusparseGetErrorName(check_status_),           \
                    (int)check_status_, rusparseGetLastErrorMessage());             \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

/* A plain condition; prints the formatted reason and counts a failure. */
#define EXPECT_TRUE(cond, ...)                                                      \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: expectation failed: %s\n  ", __FILE__, __LINE__, \
                    #cond);                                                         \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            test_failures++;                                                        \
        }                                                                           \
    } while (0)

/* Like EXPECT_TRUE but fatal. */
#define REQUIRE(cond, ...)                                                          \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: requirement failed: %s\n  ", __FILE__, __LINE__, \
                    #cond);                                                         \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static inline int expect_status_impl(rusparseStatus_t got, rusparseStatus_t expected,
                                     const char *substr, const char *call,
                                     const char *file, int line) {
    const char *msg = rusparseGetLastErrorMessage();
    int ok = 1;
    if (msg == NULL) {
        fprintf(stderr, "%s:%d: %s\n  rusparseGetLastErrorMessage() returned NULL\n", file,
                line, call);
        test_failures++;
        return 0;
    }
    if (got != expected) {
        fprintf(stderr, "%s:%d: %s\n  returned %s (%d), expected %s (%d): \"%s\"\n", file,
                line, call, rusparseGetErrorName(got), (int)got,
                rusparseGetErrorName(expected), (int)expected, msg);
        ok = 0;
    } else if (expected == RUSPARSE_STATUS_SUCCESS) {
        if (msg[0] != '\0') {
            fprintf(stderr, "%s:%d: %s\n  succeeded but the last error message is \"%s\"\n",
                    file, line, call, msg);
            ok = 0;
        }
    } else {
        if (msg[0] == '\0') {
            fprintf(stderr, "%s:%d: %s\n  returned %s but the last error message is empty\n",
                    file, line, call, rusparseGetErrorName(got));
            ok = 0;
        } else if (strncmp(msg, "rusparse", 8) != 0) {
            fprintf(stderr,
                    "%s:%d: %s\n  the message does not start with the function name: \"%s\"\n",
                    file, line, call, msg);
            ok = 0;
        } else if (substr != NULL && strstr(msg, substr) == NULL) {
            fprintf(stderr, "%s:%d: %s\n  message \"%s\" does not contain \"%s\"\n", file,
                    line, call, msg, substr);
            ok = 0;
        }
    }
    if (!ok) test_failures++;
    return ok;
}

#define EXPECT_STATUS_MSG(call, expected, substr) \
    ((void)expect_status_impl((call), (expected), (substr), #call, __FILE__, __LINE__))
#define EXPECT_STATUS(call, expected) \
    ((void)expect_status_impl((call), (expected), NULL, #call, __FILE__, __LINE__))

static inline int test_summary(const char *name) {
    if (test_failures != 0) {
        fprintf(stderr, "%s: %d FAILURE(S)\n", name, test_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* "--quick" on the command line (used under valgrind): fewer iterations. */
static inline int quick_mode(int argc, char **argv) {
    int i;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0) return 1;
    return 0;
}

static inline void *xmalloc(size_t n) {
    void *p = malloc(n == 0 ? 1 : n);
    REQUIRE(p != NULL, "out of memory (%zu bytes)", n);
    return p;
}

/* ------------------------------------------------------------------ */
/* Names                                                               */
/* ------------------------------------------------------------------ */

static inline const char *dt_name(rusparseDataType_t t) {
    switch (t) {
    case RUSPARSE_R_32F: return "R_32F";
    case RUSPARSE_R_64F: return "R_64F";
    case RUSPARSE_C_32F: return "C_32F";
    case RUSPARSE_C_64F: return "C_64F";
    default: return "?";
    }
}
static inline const char *it_name(rusparseIndexType_t t) {
    return t == RUSPARSE_INDEX_32I ? "32I" : t == RUSPARSE_INDEX_64I ? "64I" : "?";
}
static inline const char *op_name(rusparseOperation_t o) {
    return o == RUSPARSE_OPERATION_NON_TRANSPOSE ? "N"
           : o == RUSPARSE_OPERATION_TRANSPOSE   ? "T"
           : o == RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE ? "C"
                                                          : "?";
}
static inline int dt_is_complex(rusparseDataType_t t) {
    return t == RUSPARSE_C_32F || t == RUSPARSE_C_64F;
}

/* ------------------------------------------------------------------ */
/* Typed element access                                                */
/* ------------------------------------------------------------------ */

static inline size_t dt_size(rusparseDataType_t t) {
    switch (t) {
    case RUSPARSE_R_32F: return sizeof(float);
    case RUSPARSE_R_64F: return sizeof(double);
    case RUSPARSE_C_32F: return sizeof(cf32_t);
    case RUSPARSE_C_64F: return sizeof(cf64_t);
    default: return 0;
    }
}
static inline size_t it_size(rusparseIndexType_t t) {
    return t == RUSPARSE_INDEX_32I ? sizeof(int32_t) : sizeof(int64_t);
}

static inline int64_t idx_get(const void *a, rusparseIndexType_t t, int64_t k) {
    return t == RUSPARSE_INDEX_32I ? (int64_t)((const int32_t *)a)[k] : ((const int64_t *)a)[k];
}
static inline void idx_set(void *a, rusparseIndexType_t t, int64_t k, int64_t v) {
    if (t == RUSPARSE_INDEX_32I)
        ((int32_t *)a)[k] = (int32_t)v;
    else
        ((int64_t *)a)[k] = v;
}

static inline cf64_t val_get(const void *a, rusparseDataType_t t, int64_t k) {
    cf64_t v = {0.0, 0.0};
    switch (t) {
    case RUSPARSE_R_32F: v.re = ((const float *)a)[k]; break;
    case RUSPARSE_R_64F: v.re = ((const double *)a)[k]; break;
    case RUSPARSE_C_32F:
        v.re = ((const cf32_t *)a)[k].re;
        v.im = ((const cf32_t *)a)[k].im;
        break;
    case RUSPARSE_C_64F: v = ((const cf64_t *)a)[k]; break;
    default: break;
    }
    return v;
}
static inline void val_set(void *a, rusparseDataType_t t, int64_t k, cf64_t v) {
    switch (t) {
    case RUSPARSE_R_32F: ((float *)a)[k] = (float)v.re; break;
    case RUSPARSE_R_64F: ((double *)a)[k] = v.re; break;
    case RUSPARSE_C_32F:
        ((cf32_t *)a)[k].re = (float)v.re;
        ((cf32_t *)a)[k].im = (float)v.im;
        break;
    case RUSPARSE_C_64F: ((cf64_t *)a)[k] = v; break;
    default: break;
    }
}

/* One scalar (alpha or beta) in the compute type. */
typedef union {
    float s;
    double d;
    cf32_t c;
    cf64_t z;
} scalar_t;

static inline scalar_t make_scalar(rusparseDataType_t t, cf64_t v) {
    scalar_t s;
    memset(&s, 0, sizeof s);
    val_set(&s, t, 0, v);
    return s;
}

static inline cf64_t cmul(cf64_t a, cf64_t b) {
    cf64_t r;
    r.re = a.re * b.re - a.im * b.im;
    r.im = a.re * b.im + a.im * b.re;
    return r;
}
static inline cf64_t cadd(cf64_t a, cf64_t b) {
    cf64_t r;
    r.re = a.re + b.re;
    r.im = a.im + b.im;
    return r;
}
static inline cf64_t cplx(double re, double im) {
    cf64_t r;
    r.re = re;
    r.im = im;
    return r;
}

/* ------------------------------------------------------------------ */
/* Random numbers (splitmix64; explicit state, so thread-safe)         */
/* ------------------------------------------------------------------ */

typedef struct {
    uint64_t s;
} rng_t;

static inline uint64_t rng_next(rng_t *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [lo, hi]. */
static inline int64_t rng_range(rng_t *r, int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* ------------------------------------------------------------------ */
/* Test matrices                                                       */
/* ------------------------------------------------------------------ */

/* Zero-based CSR with int64 indices and double values, in storage order:
 * columns may be unsorted and repeated (duplicates are summed). */
typedef struct {
    int64_t rows, cols, nnz;
    int64_t *ptr; /* rows + 1 */
    int64_t *col; /* nnz */
    double *re;   /* nnz */
    double *im;   /* nnz (all 0 for real matrices) */
} tmat_t;

enum {
    TM_UNSORTED = 1,   /* shuffle the columns of every row */
    TM_DUPLICATES = 2, /* split some entries into two stored entries */
    TM_EMPTY_ROWS = 4, /* rows 1, 4, 7, ... are empty */
    TM_COMPLEX = 8,    /* non-zero imaginary parts */
    TM_FRACTIONAL = 16 /* non-integer values (for bitwise comparisons) */
};

/* A random rows x cols matrix, each entry present with `percent` % chance,
 * integer values in [-3, 3] (zeros included: they are structural). */
static inline tmat_t tmat_random(rng_t *r, int64_t rows, int64_t cols, int percent, int flags) {
    tmat_t m;
    int64_t cap = 2 * rows * cols + 1, i, j, k;
    m.rows = rows;
    m.cols = cols;
    m.nnz = 0;
    m.ptr = (int64_t *)xmalloc(sizeof(int64_t) * (size_t)(rows + 1));
    m.col = (int64_t *)xmalloc(sizeof(int64_t) * (size_t)cap);
    m.re = (double *)xmalloc(sizeof(double) * (size_t)cap);
    m.im = (double *)xmalloc(sizeof(double) * (size_t)cap);
    m.ptr[0] = 0;
    for (i = 0; i < rows; i++) {
        int64_t start = m.nnz;
        if (!((flags & TM_EMPTY_ROWS) && i % 3 == 1)) {
            for (j = 0; j < cols; j++) {
                double re, im = 0.0;
                if (rng_range(r, 0, 99) >= percent) continue;
                if (flags & TM_FRACTIONAL) {
                    re = (double)rng_range(r, -1000000, 1000000) / 7919.0;
                    if (flags & TM_COMPLEX) im = (double)rng_range(r, -1000000, 1000000) / 104729.0;
                } else {
                    re = (double)rng_range(r, -3, 3);
                    if (flags & TM_COMPLEX) im = (double)rng_range(r, -3, 3);
                }
                if ((flags & TM_DUPLICATES) && rng_range(r, 0, 3) == 0) {
                    /* two stored entries that sum to (re, im) */
                    double dre = (double)rng_range(r, -2, 2);
                    double dim = (flags & TM_COMPLEX) ? (double)rng_range(r, -2, 2) : 0.0;
                    m.col[m.nnz] = j;
                    m.re[m.nnz] = dre;
                    m.im[m.nnz] = dim;
                    m.nnz++;
                    re -= dre;
                    im -= dim;
                }
                m.col[m.nnz] = j;
                m.re[m.nnz] = re;
                m.im[m.nnz] = im;
                m.nnz++;
            }
        }
        if (flags & TM_UNSORTED) {
            /* Fisher-Yates on the row's entries (duplicates then are not adjacent) */
            for (k = m.nnz - 1; k > start; k--) {
                int64_t s = rng_range(r, start, k), tc;
                double tr, ti;
                tc = m.col[k]; m.col[k] = m.col[s]; m.col[s] = tc;
                tr = m.re[k]; m.re[k] = m.re[s]; m.re[s] = tr;
                ti = m.im[k]; m.im[k] = m.im[s]; m.im[s] = ti;
            }
        }
        m.ptr[i + 1] = m.nnz;
    }
    return m;
}

static inline void tmat_free(tmat_t *m) {
    free(m->ptr);
    free(m->col);
    free(m->re);
    free(m->im);
    memset(m, 0, sizeof *m);
}

/* Fresh random values (same pattern). */
static inline void tmat_revalue(rng_t *r, tmat_t *m, int complex_values) {
    int64_t k;
    for (k = 0; k < m->nnz; k++) {
        m->re[k] = (double)rng_range(r, -3, 3);
        m->im[k] = complex_values ? (double)rng_range(r, -3, 3) : 0.0;
    }
}

/* The arrays in rusparse types (malloc'ed, free with free()). */
static inline void *tmat_offsets(const tmat_t *m, rusparseIndexType_t t, int base) {
    void *a = xmalloc(it_size(t) * (size_t)(m->rows + 1));
    int64_t i;
    for (i = 0; i <= m->rows; i++) idx_set(a, t, i, m->ptr[i] + base);
    return a;
}
static inline void *tmat_colind(const tmat_t *m, rusparseIndexType_t t, int base) {
    void *a = xmalloc(it_size(t) * (size_t)m->nnz);
    int64_t k;
    for (k = 0; k < m->nnz; k++) idx_set(a, t, k, m->col[k] + base);
    return a;
}
static inline void *tmat_values(const tmat_t *m, rusparseDataType_t t) {
    void *a = xmalloc(dt_size(t) * (size_t)m->nnz);
    int64_t k;
    for (k = 0; k < m->nnz; k++) val_set(a, t, k, cplx(m->re[k], m->im[k]));
    return a;
}
static inline void tmat_store_values(const tmat_t *m, rusparseDataType_t t, void *a) {
    int64_t k;
    for (k = 0; k < m->nnz; k++) val_set(a, t, k, cplx(m->re[k], m->im[k]));
}

/* A tmat_t converted to rusparse arrays, with its descriptor. */
typedef struct {
    void *off, *col, *val;
    rusparseSpMatDescr_t d;
} csr_t;

static inline csr_t csr_make(const tmat_t *m, rusparseIndexType_t ot, rusparseIndexType_t ct,
                             int base, rusparseDataType_t dt) {
    csr_t c;
    c.off = tmat_offsets(m, ot, base);
    c.col = tmat_colind(m, ct, base);
    c.val = tmat_values(m, dt);
    CHECK(rusparseCreateCsr(&c.d, m->rows, m->cols, m->nnz, c.off, c.col, c.val, ot, ct,
                            (rusparseIndexBase_t)base, dt));
    return c;
}
static inline void csr_free(csr_t *c) {
    CHECK(rusparseDestroySpMat(c->d));
    free(c->off);
    free(c->col);
    free(c->val);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------ */
/* Dense reference                                                     */
/* ------------------------------------------------------------------ */

typedef struct {
    int64_t m, n;
    cf64_t *v;          /* m * n, row-major */
    unsigned char *pat; /* structural pattern */
} dense_t;

static inline dense_t dense_zero(int64_t m, int64_t n) {
    dense_t d;
    d.m = m;
    d.n = n;
    d.v = (cf64_t *)calloc((size_t)(m * n + 1), sizeof(cf64_t));
    d.pat = (unsigned char *)calloc((size_t)(m * n + 1), 1);
    REQUIRE(d.v != NULL && d.pat != NULL, "out of memory");
    return d;
}
static inline void dense_free(dense_t *d) {
    free(d->v);
    free(d->pat);
}

/* op(X) as a dense matrix (duplicates summed, conjugated for CONJUGATE_TRANSPOSE). */
static inline dense_t dense_of(const tmat_t *x, rusparseOperation_t op) {
    int tr = op != RUSPARSE_OPERATION_NON_TRANSPOSE;
    dense_t d = dense_zero(tr ? x->cols : x->rows, tr ? x->rows : x->cols);
    int64_t i, k;
    for (i = 0; i < x->rows; i++) {
        for (k = x->ptr[i]; k < x->ptr[i + 1]; k++) {
            int64_t r = tr ? x->col[k] : i, c = tr ? i : x->col[k];
            cf64_t v = cplx(x->re[k], x->im[k]);
            if (op == RUSPARSE_OPERATION_CONJUGATE_TRANSPOSE) v.im = -v.im;
            d.v[r * d.n + c] = cadd(d.v[r * d.n + c], v);
            d.pat[r * d.n + c] = 1;
        }
    }
    return d;
}

/* op(A) * op(B) with its structural pattern. */
static inline dense_t dense_product(const tmat_t *a, rusparseOperation_t opA, const tmat_t *b,
                                    rusparseOperation_t opB) {
    dense_t da = dense_of(a, opA), db = dense_of(b, opB);
    dense_t c;
    int64_t i, j, k;
    REQUIRE(da.n == db.m, "test bug: inner dimensions %lld != %lld", (long long)da.n,
            (long long)db.m);
    c = dense_zero(da.m, db.n);
    for (i = 0; i < da.m; i++)
        for (k = 0; k < da.n; k++) {
            if (!da.pat[i * da.n + k]) continue;
            for (j = 0; j < db.n; j++) {
                if (!db.pat[k * db.n + j]) continue;
                c.v[i * c.n + j] = cadd(c.v[i * c.n + j], cmul(da.v[i * da.n + k], db.v[k * db.n + j]));
                c.pat[i * c.n + j] = 1;
            }
        }
    dense_free(&da);
    dense_free(&db);
    return c;
}

static inline int64_t dense_nnz(const dense_t *d) {
    int64_t k, n = 0;
    for (k = 0; k < d->m * d->n; k++) n += d->pat[k];
    return n;
}

/* Number of scalar products of op(A) * op(B) counting every stored entry
 * (duplicates included), as rusparseSpGEMM_getNumProducts reports. */
static inline int64_t count_products(const tmat_t *a, rusparseOperation_t opA, const tmat_t *b,
                                     rusparseOperation_t opB) {
    int64_t kdim = opB == RUSPARSE_OPERATION_NON_TRANSPOSE ? b->rows : b->cols;
    int64_t *rowcnt = (int64_t *)calloc((size_t)kdim + 1, sizeof(int64_t));
    int64_t i, k, total = 0;
    REQUIRE(rowcnt != NULL, "out of memory");
    for (i = 0; i < b->rows; i++)
        for (k = b->ptr[i]; k < b->ptr[i + 1]; k++)
            rowcnt[opB == RUSPARSE_OPERATION_NON_TRANSPOSE ? i : b->col[k]]++;
    for (i = 0; i < a->rows; i++)
        for (k = a->ptr[i]; k < a->ptr[i + 1]; k++)
            total += rowcnt[opA == RUSPARSE_OPERATION_NON_TRANSPOSE ? a->col[k] : i];
    free(rowcnt);
    return total;
}

/* Checks a CSR C (rusparse arrays) against alpha * ref + beta * old, where
 * old[p] is the value the caller put at position p before the product
 * (ignored when old is NULL). Returns the number of problems (printed). */
static inline int check_csr_order(const char *label, const dense_t *ref, int64_t nnz,
                                  const void *off, rusparseIndexType_t ot, const void *col,
                                  rusparseIndexType_t ct, const void *val, rusparseDataType_t dt,
                                  int base, cf64_t alpha, cf64_t beta, const cf64_t *old,
                                  int sorted) {
    int64_t i, p, expected_nnz = dense_nnz(ref);
    int bad = 0;
#define CSR_FAIL(...)                                                 \
    do {                                                              \
        fprintf(stderr, "[%s] ", label);                              \
        fprintf(stderr, __VA_ARGS__);                                 \
        fprintf(stderr, "\n");                                        \
        if (++bad >= 5) goto done;                                    \
    } while (0)
    if (nnz != expected_nnz) CSR_FAIL("nnz(C) = %lld, expected %lld", (long long)nnz, (long long)expected_nnz);
    if (idx_get(off, ot, 0) != base)
        CSR_FAIL("rowOffsets[0] = %lld, expected the base %d", (long long)idx_get(off, ot, 0), base);
    if (idx_get(off, ot, ref->m) - base != nnz)
        CSR_FAIL("rowOffsets[%lld] - base = %lld, expected nnz %lld", (long long)ref->m,
                 (long long)(idx_get(off, ot, ref->m) - base), (long long)nnz);
    if (bad) goto done;
    for (i = 0; i < ref->m; i++) {
        int64_t lo = idx_get(off, ot, i) - base, hi = idx_get(off, ot, i + 1) - base, row_nnz = 0, j;
        if (lo > hi || lo < 0 || hi > nnz) {
            CSR_FAIL("row %lld: bad offsets %lld..%lld", (long long)i, (long long)lo, (long long)hi);
            continue;
        }
        for (j = 0; j < ref->n; j++) row_nnz += ref->pat[i * ref->n + j];
        if (hi - lo != row_nnz)
            CSR_FAIL("row %lld has %lld entries, expected %lld", (long long)i, (long long)(hi - lo),
                     (long long)row_nnz);
        for (p = lo; p < hi; p++) {
            int64_t c = idx_get(col, ct, p) - base;
            cf64_t got, want;
            if (c < 0 || c >= ref->n) {
                CSR_FAIL("colInd[%lld] = %lld out of range", (long long)p, (long long)(c + base));
                continue;
            }
            if (sorted && p > lo && idx_get(col, ct, p - 1) - base >= c)
                CSR_FAIL("row %lld: columns not strictly increasing at position %lld (%lld after %lld)",
                         (long long)i, (long long)p, (long long)c,
                         (long long)(idx_get(col, ct, p - 1) - base));
            if (!sorted) {
                /* any order, but each column once: with the row's count
                 * right and every column in the pattern, the same set */
                int64_t q;
                for (q = lo; q < p; q++)
                    if (idx_get(col, ct, q) - base == c)
                        CSR_FAIL("row %lld: column %lld at positions %lld and %lld", (long long)i,
                                 (long long)c, (long long)q, (long long)p);
            }
            if (!ref->pat[i * ref->n + c])
                CSR_FAIL("C(%lld, %lld) is not in the product's pattern", (long long)i, (long long)c);
            want = cmul(alpha, ref->v[i * ref->n + c]);
            if (old != NULL) want = cadd(want, cmul(beta, old[p]));
            if (!dt_is_complex(dt)) want.im = 0.0;
            got = val_get(val, dt, p);
            if (got.re != want.re || got.im != want.im)
                CSR_FAIL("C(%lld, %lld) = (%g, %g), expected (%g, %g)", (long long)i, (long long)c,
                         got.re, got.im, want.re, want.im);
        }
    }
done:
#undef CSR_FAIL
    return bad;
}

/* check_csr_order with sorted rows (cuSPARSE's and rusparse's default). */
static inline int check_csr(const char *label, const dense_t *ref, int64_t nnz, const void *off,
                            rusparseIndexType_t ot, const void *col, rusparseIndexType_t ct,
                            const void *val, rusparseDataType_t dt, int base, cf64_t alpha,
                            cf64_t beta, const cf64_t *old) {
    return check_csr_order(label, ref, nnz, off, ot, col, ct, val, dt, base, alpha, beta, old, 1);
}

#endif /* RUSPARSE_C_TESTS_COMMON_H */
