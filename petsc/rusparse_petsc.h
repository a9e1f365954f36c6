/*
 * Internal header of rusparse's PETSc plug-in (librusparse_petsc.so).
 *
 *   types.c           the matrix types seqaijrusparse / mpiaijrusparse /
 *                     aijrusparse, their options, and the registration
 *                     function PETSc calls when it loads the plug-in
 *   products.c        sequential AB, AtB and PtAP through rusparse (the
 *                     symbolic and numeric phases, the log event, errors)
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
extern PetscLogEvent RS_LOG_SPGEMM;

PetscErrorCode RsProductsInitialize(void);
/* The product set-up of seqaijrusparse: AB, AtB and PtAP of two host
   SeqAIJ matrices run through rusparse; anything else falls back to SeqAIJ. */
PetscErrorCode RsSeqProductSetFromOptions(Mat C);

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
