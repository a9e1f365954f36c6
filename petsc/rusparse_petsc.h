/*
 * Internal header of rusparse's PETSc plug-in (librusparse_petsc.so).
 *
 *   types.c           the matrix types seqaijrusparse / mpiaijrusparse /
 *                     aijrusparse, their options, and the registration
 *                     function PETSc calls when it loads the plug-in
 *   products.c        sequential AB, AtB and PtAP through rusparse (the
 *                     symbolic and numeric phases, the log event, errors),
 *                     and the one-product stage both routes share
 *   mpi_products.c    MPI AB, AtB and PtAP: one merged local product per
 *                     rank, C's blocks built from its CSR
 *   private_access.c  the one file that reads PETSc's private structures
 */
#ifndef RUSPARSE_PETSC_H
#define RUSPARSE_PETSC_H

#include <petscmat.h>
#include <rusparse.h>

#define MATSEQAIJRUSPARSE "seqaijrusparse"
#define MATMPIAIJRUSPARSE "mpiaijrusparse"
#define MATAIJRUSPARSE    "aijrusparse"

/* ---- private_access.c ---------------------------------------------------- */
typedef PetscErrorCode (*RsMatFn)(Mat);

typedef struct {
  MatProductType type;
  const char    *alg;
  Mat            A, B;
  PetscReal      fill;
  PetscBool      api_user;
} RsProductInfo;

PetscErrorCode RsOpsGetProductSetFromOptions(Mat, RsMatFn *);
PetscErrorCode RsOpsSetProductSetFromOptions(Mat, RsMatFn);
PetscErrorCode RsOpsGetDestroy(Mat, RsMatFn *);
PetscErrorCode RsOpsSetDestroy(Mat, RsMatFn);
PetscErrorCode RsOpsSetProductPhases(Mat C, RsMatFn symbolic, RsMatFn numeric);
PetscErrorCode RsMatGetSpptr(Mat, void **);
PetscErrorCode RsMatSetSpptr(Mat, void *);
PetscErrorCode RsProductGetInfo(Mat C, RsProductInfo *);
PetscErrorCode RsProductSetData(Mat C, void *data, PetscErrorCode (*destroy)(void *));
PetscErrorCode RsProductGetData(Mat C, void **data);
/* Marks C's values as changed (its blocks were written directly). */
PetscErrorCode RsMatStateIncrease(Mat C);
/* An object's state: it increases with every change of the object (a
   matrix's values, also through its arrays' Get/Restore). */
PetscErrorCode RsObjectStateGet(PetscObject, PetscObjectState *);

/* ---- types.c --------------------------------------------------------------- */
/* What -mat_rusparse_backend / _alg / _threads chose for a matrix. */
typedef struct {
  rusparseBackend_t   backend;
  rusparseSpGEMMAlg_t alg;
  PetscInt            threads; /* 0: rusparse's default */
} RsSettings;

PetscErrorCode RsSettingsFromOptions(Mat, RsSettings *);
/* The product set-up of plain SeqAIJ, saved before the type overrides it. */
PetscErrorCode RsSeqAIJProductSetFromOptions(Mat C);

/* ---- products.c ------------------------------------------------------------ */
/* RusparseSpGEMM: every rusparse call. The MPI route's own work:
   RusparseMPIRows (the merged operands, gathered rows), RusparseMPIMakeC
   (C's structure), RusparseMPIWriteC (C's values, sent rows). */
extern PetscLogEvent RS_LOG_SPGEMM, RS_LOG_MPI_ROWS, RS_LOG_MPI_MAKE_C, RS_LOG_MPI_WRITE_C;

#if defined(PETSC_USE_64BIT_INDICES)
  #define RS_INDEX RUSPARSE_INDEX_64I
#else
  #define RS_INDEX RUSPARSE_INDEX_32I
#endif

PetscErrorCode RsProductsInitialize(void);
/* The product set-up of seqaijrusparse: AB, AtB and PtAP of two host
   SeqAIJ matrices run through rusparse; anything else falls back to SeqAIJ. */
PetscErrorCode RsSeqProductSetFromOptions(Mat C);

/* The rusparse handle for these settings (one per back end and thread
   count in the process, destroyed by PetscFinalize). */
PetscErrorCode RsHandleGet(const RsSettings *, rusparseHandle_t *);

/* A read-only CSR view (zero-based, PetscInt indices). */
typedef struct {
  PetscInt           rows, cols, nnz;
  const PetscInt    *i, *j;
  const PetscScalar *a;
} RsCsr;

/* The host CSR arrays of an assembled SeqAIJ matrix (read only; a matrix
   in device memory is PETSC_ERR_SUP). */
PetscErrorCode RsCsrOfMat(Mat, RsCsr *);

/* The identities and nonzero states of a product's A, B and C: PETSc raises
   a matrix's nonzero state whenever its nonzero pattern changes, so equal
   states mean the patterns the symbolic phase saw (PETSc's own reuse of a
   preconditioner relies on the same). */
typedef struct {
  PetscInt64       id[3];
  PetscObjectState state[3];
} RsPatternState;

PetscErrorCode RsPatternStateGet(RsPatternState *, Mat A, Mat B, Mat C);
PetscErrorCode RsPatternStateSame(const RsPatternState *, Mat A, Mat B, Mat C, PetscBool *same);

/* The values of a product's A and B that its C was computed from in the
   symbolic phase: their identities and object states (PETSc raises a
   matrix's state whenever its values may have changed: MatSetValues and
   assembly, MatScale, an array got for writing). The symbolic phase
   computes C's values too (rusparse sums them as it lists C's structure),
   and the numeric phase right after it (MatProductNumeric of the first
   product) finds C current when the states are still these. */
typedef struct {
  PetscBool        valid; /* C holds the product of these values */
  PetscInt64       id[2];
  PetscObjectState state[2];
} RsValueState;

PetscErrorCode RsValueStateGet(RsValueState *, Mat A, Mat B);
/* Whether C still holds the product of A's and B's values (*current); the
   state is spent either way (one numeric phase at most skips its work). */
PetscErrorCode RsValueStateTake(RsValueState *, Mat A, Mat B, PetscBool *current);

/* One rusparse product Z = op(X) * Y through the reuse flow. */
typedef struct {
  rusparseOperation_t   op;
  PetscInt              x_rows, x_cols, x_nnz, y_rows, y_cols, y_nnz;
  rusparseSpMatDescr_t  X, Y, Z;
  rusparseSpGEMMDescr_t spgemm;
  void                 *buffer[5]; /* 0..2 freed after their phase; 3 and 4 kept for reuse_compute */
  PetscLogDouble        flops;     /* 2 * scalar products */
} RsStage;

/* The symbolic phase: Z's sorted structure in *zi, *zj (and a value array
   *za), allocated with PetscMalloc; the caller owns them. */
PetscErrorCode RsStageSymbolic(rusparseHandle_t, rusparseSpGEMMAlg_t, RsStage *, rusparseOperation_t, const RsCsr *x, const RsCsr *y, PetscInt **zi, PetscInt **zj, PetscScalar **za, PetscInt *znnz);
/* The numeric phase: Z's values for the current values of X and Y.
   `unchanged`: the caller knows that X's, Y's and Z's patterns are those of
   the symbolic phase (arrays it owns, or PETSc's nonzero states unchanged),
   so rusparse skips hashing them (RUSPARSE_PATTERN_CHECK_CALLER). */
PetscErrorCode RsStageNumeric(rusparseHandle_t, rusparseSpGEMMAlg_t, RsStage *, const RsCsr *x, const RsCsr *y, PetscInt *zi, PetscInt *zj, PetscScalar *za, PetscBool unchanged);
PetscErrorCode RsStageDestroy(RsStage *);

/* The PETSc algorithm a user chose for this product (MatProductSetAlgorithm,
   -mat_product_algorithm, or -matmatmult_via and its siblings), in `name`
   (*chose false when none, or when it names rusparse: "default",
   "rusparse"). */
PetscErrorCode RsUserAlgorithm(Mat C, const RsProductInfo *info, char name[], size_t len, PetscBool *chose);

/* ---- mpi_products.c --------------------------------------------------------- */
/* Installs the MPI route's symbolic phase on C (AB, AtB or PtAP of two
   MPIAIJ matrices). */
PetscErrorCode RsMpiProductUseRoute(Mat C);

/* The product's record, its factors' type names, and whether both factors
   are of the plain type or ours (e.g. MATSEQAIJ, MATSEQAIJRUSPARSE). */
PetscErrorCode RsProductFactors(Mat C, MatType plain, MatType ours, RsProductInfo *info, MatType *a_type, MatType *b_type, PetscBool *both_aij);

/* A rusparse status as a PETSc error, with rusparse's own message. */
PetscErrorCode RsStatusToError(rusparseStatus_t, const char *call);
#define RsCall(call) \
  do { \
    rusparseStatus_t rs_status_ = (call); \
    if (PetscUnlikely(rs_status_ != RUSPARSE_STATUS_SUCCESS)) PetscCall(RsStatusToError(rs_status_, #call)); \
  } while (0)

#endif
