/*
 * Sequential AB, AtB and PtAP of host SeqAIJ matrices through rusparse.
 *
 * Every product uses rusparse's reuse flow (cuSPARSE's SpGEMMreuse), which
 * matches PETSc's two phases:
 *
 *   symbolic  reuse_workEstimation, reuse_nnz and reuse_copy give C's
 *             structure; C becomes a SeqAIJ matrix of A's type with it
 *             (copied in once, whole sorted rows at a time)
 *   numeric   reuse_compute writes the values straight into C's value
 *             array, for the current values of A and B (also for
 *             MAT_REUSE_MATRIX, which runs the numeric phase only)
 *
 * AtB passes op(A) = A^T to rusparse (no explicit transpose). PtAP is two
 * products, AP = A*P (kept in the product's own arrays) and C = P^T*AP.
 * The arrays of A and B are looked up again in every numeric phase: PETSc
 * may replace A or B (MatProductReplaceMats) by a matrix of the same
 * pattern, and refreshes values in place.
 *
 * Every call into rusparse runs inside the log event RusparseSpGEMM with
 * 2 * (scalar products) flops; a failing rusparse call becomes a PETSc
 * error carrying rusparse's status name and message.
 */
#include "rusparse_petsc.h"

#include <string.h>

PetscLogEvent RS_LOG_SPGEMM, RS_LOG_MPI_ROWS, RS_LOG_MPI_MAKE_C, RS_LOG_MPI_WRITE_C;
#if defined(PETSC_USE_COMPLEX)
  #if defined(PETSC_USE_REAL_SINGLE)
    #define RS_VALUE RUSPARSE_C_32F
  #elif defined(PETSC_USE_REAL_DOUBLE)
    #define RS_VALUE RUSPARSE_C_64F
  #else
    #error "rusparse supports PETSc scalars of single or double precision"
  #endif
#else
  #if defined(PETSC_USE_REAL_SINGLE)
    #define RS_VALUE RUSPARSE_R_32F
  #elif defined(PETSC_USE_REAL_DOUBLE)
    #define RS_VALUE RUSPARSE_R_64F
  #else
    #error "rusparse supports PETSc scalars of single or double precision"
  #endif
#endif

PetscErrorCode RsStatusToError(rusparseStatus_t status, const char *call)
{
  PetscErrorCode code;
  const char    *paren = strchr(call, '('); /* the function's name only */
  int            name  = paren ? (int)(paren - call) : (int)strlen(call);

  PetscFunctionBegin;
  switch (status) {
  case RUSPARSE_STATUS_ALLOC_FAILED:
    code = PETSC_ERR_MEM;
    break;
  case RUSPARSE_STATUS_NOT_SUPPORTED:
  case RUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED:
    code = PETSC_ERR_SUP;
    break;
  case RUSPARSE_STATUS_INVALID_VALUE:
    code = PETSC_ERR_ARG_WRONG;
    break;
  default:
    code = PETSC_ERR_LIB;
  }
  SETERRQ(PETSC_COMM_SELF, code, "rusparse %s in %.*s: %s", rusparseGetErrorName(status), name, call, rusparseGetLastErrorMessage());
}

/* ---- handles ---------------------------------------------------------------
 * One rusparse handle per (back end, thread count) in this process, made on
 * first use and destroyed by PetscFinalize. PETSc runs one thread per rank,
 * so products never share a handle concurrently. */
#define RS_MAX_HANDLES 8
static struct {
  rusparseBackend_t backend;
  PetscInt          threads;
  rusparseHandle_t  handle;
} rs_handles[RS_MAX_HANDLES];
static int rs_num_handles;

static PetscErrorCode RsHandlesDestroy(void)
{
  PetscFunctionBegin;
  for (int k = 0; k < rs_num_handles; k++) RsCall(rusparseDestroy(rs_handles[k].handle));
  rs_num_handles = 0;
  PetscFunctionReturn(0);
}

PetscErrorCode RsHandleGet(const RsSettings *s, rusparseHandle_t *handle)
{
  rusparseHandle_t h = NULL;
  rusparseStatus_t status;

  PetscFunctionBegin;
  for (int k = 0; k < rs_num_handles; k++) {
    if (rs_handles[k].backend == s->backend && rs_handles[k].threads == s->threads) {
      *handle = rs_handles[k].handle;
      PetscFunctionReturn(0);
    }
  }
  PetscCheck(rs_num_handles < RS_MAX_HANDLES, PETSC_COMM_SELF, PETSC_ERR_SUP, "rusparse: more than %d different -mat_rusparse_backend / -mat_rusparse_threads settings in one run", RS_MAX_HANDLES);
  if (s->backend == RUSPARSE_BACKEND_AUTO) RsCall(rusparseCreate(&h));
  else RsCall(rusparseCreateWithBackend(&h, s->backend));
  if (s->threads != 0) {
    status = rusparseSetNumThreads(h, (int)s->threads);
    if (status != RUSPARSE_STATUS_SUCCESS) {
      PetscErrorCode code = RsStatusToError(status, "rusparseSetNumThreads");
      (void)rusparseDestroy(h);
      PetscFunctionReturn(code);
    }
  }
  if (rs_num_handles == 0) PetscCall(PetscRegisterFinalize(RsHandlesDestroy));
  rs_handles[rs_num_handles].backend = s->backend;
  rs_handles[rs_num_handles].threads = s->threads;
  rs_handles[rs_num_handles].handle  = h;
  rs_num_handles++;
  *handle = h;
  PetscFunctionReturn(0);
}

/* ---- CSR views ------------------------------------------------------------- */
PetscErrorCode RsCsrOfMat(Mat M, RsCsr *v)
{
  PetscMemType mtype;
  PetscScalar *a;

  PetscFunctionBegin;
  PetscCall(MatGetSize(M, &v->rows, &v->cols));
  PetscCall(MatSeqAIJGetCSRAndMemType(M, &v->i, &v->j, &a, &mtype));
  PetscCheck(mtype == PETSC_MEMTYPE_HOST, PETSC_COMM_SELF, PETSC_ERR_SUP, "rusparse: the plug-in multiplies matrices in host memory");
  v->a   = a;
  v->nnz = v->i[v->rows];
  PetscFunctionReturn(0);
}

/* ---- whether patterns changed ------------------------------------------------ */
static PetscErrorCode RsMatPatternState(Mat M, PetscInt64 *id, PetscObjectState *state)
{
  PetscFunctionBegin;
  PetscCall(PetscObjectGetId((PetscObject)M, id));
  PetscCall(MatGetNonzeroState(M, state));
  PetscFunctionReturn(0);
}

PetscErrorCode RsPatternStateGet(RsPatternState *s, Mat A, Mat B, Mat C)
{
  PetscFunctionBegin;
  PetscCall(RsMatPatternState(A, &s->id[0], &s->state[0]));
  PetscCall(RsMatPatternState(B, &s->id[1], &s->state[1]));
  PetscCall(RsMatPatternState(C, &s->id[2], &s->state[2]));
  PetscFunctionReturn(0);
}

PetscErrorCode RsPatternStateSame(const RsPatternState *s, Mat A, Mat B, Mat C, PetscBool *same)
{
  RsPatternState now;

  PetscFunctionBegin;
  PetscCall(RsPatternStateGet(&now, A, B, C));
  *same = PETSC_TRUE;
  for (int k = 0; k < 3; k++) *same = (PetscBool)(*same && now.id[k] == s->id[k] && now.state[k] == s->state[k]);
  PetscFunctionReturn(0);
}

/* ---- whether values changed ------------------------------------------------ */
PetscErrorCode RsValueStateGet(RsValueState *s, Mat A, Mat B)
{
  PetscFunctionBegin;
  PetscCall(PetscObjectGetId((PetscObject)A, &s->id[0]));
  PetscCall(PetscObjectGetId((PetscObject)B, &s->id[1]));
  PetscCall(RsObjectStateGet((PetscObject)A, &s->state[0]));
  PetscCall(RsObjectStateGet((PetscObject)B, &s->state[1]));
  s->valid = PETSC_TRUE;
  PetscFunctionReturn(0);
}

PetscErrorCode RsValueStateTake(RsValueState *s, Mat A, Mat B, PetscBool *current)
{
  RsValueState now;

  PetscFunctionBegin;
  *current = PETSC_FALSE;
  if (!s->valid) PetscFunctionReturn(0);
  s->valid = PETSC_FALSE;
  PetscCall(RsValueStateGet(&now, A, B));
  *current = (PetscBool)(now.id[0] == s->id[0] && now.id[1] == s->id[1] && now.state[0] == s->state[0] && now.state[1] == s->state[1]);
  PetscFunctionReturn(0);
}

/* ---- one rusparse product Z = op(X) * Y -------------------------------------- */
PetscErrorCode RsStageDestroy(RsStage *st)
{
  PetscFunctionBegin;
  RsCall(rusparseSpGEMM_destroyDescr(st->spgemm));
  RsCall(rusparseDestroySpMat(st->X));
  RsCall(rusparseDestroySpMat(st->Y));
  RsCall(rusparseDestroySpMat(st->Z));
  for (int k = 0; k < 5; k++) PetscCall(PetscFree(st->buffer[k]));
  PetscFunctionReturn(0);
}

static PetscErrorCode RsDescr(const RsCsr *m, rusparseSpMatDescr_t *d)
{
  PetscFunctionBegin;
  RsCall(rusparseCreateCsr(d, m->rows, m->cols, m->nnz, (void *)m->i, (void *)m->j, (void *)m->a, RS_INDEX, RS_INDEX, RUSPARSE_INDEX_BASE_ZERO, RS_VALUE));
  PetscFunctionReturn(0);
}

static PetscErrorCode RsBuffer(size_t size, void **buffer)
{
  PetscFunctionBegin;
  PetscCall(PetscMalloc(size ? size : 1, buffer));
  PetscFunctionReturn(0);
}

PetscErrorCode RsStageSymbolic(rusparseHandle_t h, rusparseSpGEMMAlg_t alg, RsStage *st, rusparseOperation_t op, const RsCsr *x, const RsCsr *y, PetscInt **zi, PetscInt **zj, PetscScalar **za, PetscInt *znnz)
{
  const rusparseOperation_t N = RUSPARSE_OPERATION_NON_TRANSPOSE;
  PetscInt                  zrows = op == N ? x->rows : x->cols;
  size_t                    size[5] = {0, 0, 0, 0, 0};
  int64_t                   rows, cols, nnz, nprod;

  PetscFunctionBegin;
  st->op     = op;
  st->x_rows = x->rows;
  st->x_cols = x->cols;
  st->x_nnz  = x->nnz;
  st->y_rows = y->rows;
  st->y_cols = y->cols;
  st->y_nnz  = y->nnz;
  PetscCall(RsDescr(x, &st->X));
  PetscCall(RsDescr(y, &st->Y));
  RsCall(rusparseCreateCsr(&st->Z, zrows, y->cols, 0, NULL, NULL, NULL, RS_INDEX, RS_INDEX, RUSPARSE_INDEX_BASE_ZERO, RS_VALUE));
  RsCall(rusparseSpGEMM_createDescr(&st->spgemm));
  /* Inside this call X's and Y's patterns and values stay as they are: no
     hashes of them (nor their fingerprints, so a later numeric phase with
     changed nonzero states counts Z's products column by column: a changed
     pattern gives its exact product or an error), and reuse_copy writes Z's
     values, summed by reuse_nnz as it listed Z's structure, with that
     structure. */
  RsCall(rusparseSpGEMM_setPatternCheck(st->spgemm, RUSPARSE_PATTERN_CHECK_CALLER));
  RsCall(rusparseSpGEMM_setReuseCopyValues(st->spgemm, 1));

  RsCall(rusparseSpGEMMreuse_workEstimation(h, op, N, st->X, st->Y, st->Z, alg, st->spgemm, &size[0], NULL));
  PetscCall(RsBuffer(size[0], &st->buffer[0]));
  RsCall(rusparseSpGEMMreuse_workEstimation(h, op, N, st->X, st->Y, st->Z, alg, st->spgemm, &size[0], st->buffer[0]));
  RsCall(rusparseSpGEMMreuse_nnz(h, op, N, st->X, st->Y, st->Z, alg, st->spgemm, &size[1], NULL, &size[2], NULL, &size[3], NULL));
  PetscCall(RsBuffer(size[1], &st->buffer[1]));
  PetscCall(RsBuffer(size[2], &st->buffer[2]));
  PetscCall(RsBuffer(size[3], &st->buffer[3]));
  RsCall(rusparseSpGEMMreuse_nnz(h, op, N, st->X, st->Y, st->Z, alg, st->spgemm, &size[1], st->buffer[1], &size[2], st->buffer[2], &size[3], st->buffer[3]));
  PetscCall(PetscFree(st->buffer[0]));
  PetscCall(PetscFree(st->buffer[1]));

  RsCall(rusparseSpMatGetSize(st->Z, &rows, &cols, &nnz));
  PetscCheck(nnz <= PETSC_MAX_INT, PETSC_COMM_SELF, PETSC_ERR_SUP, "rusparse: the product has %" PRId64 " nonzeros, more than PetscInt holds", nnz);
  *znnz = (PetscInt)nnz;
  PetscCall(PetscMalloc1(zrows + 1, zi));
  PetscCall(PetscMalloc1(*znnz, zj));
  PetscCall(PetscMalloc1(*znnz, za));
  RsCall(rusparseCsrSetPointers(st->Z, *zi, *zj, *za));
  RsCall(rusparseSpGEMMreuse_copy(h, op, N, st->X, st->Y, st->Z, alg, st->spgemm, &size[4], NULL));
  PetscCall(RsBuffer(size[4], &st->buffer[4]));
  RsCall(rusparseSpGEMMreuse_copy(h, op, N, st->X, st->Y, st->Z, alg, st->spgemm, &size[4], st->buffer[4]));
  PetscCall(PetscFree(st->buffer[2]));

  RsCall(rusparseSpGEMM_getNumProducts(st->spgemm, &nprod));
  st->flops = 2.0 * (PetscLogDouble)nprod;
  PetscFunctionReturn(0);
}

PetscErrorCode RsStageNumeric(rusparseHandle_t h, rusparseSpGEMMAlg_t alg, RsStage *st, const RsCsr *x, const RsCsr *y, PetscInt *zi, PetscInt *zj, PetscScalar *za, PetscBool unchanged)
{
  const PetscScalar one = 1.0, zero = 0.0;

  PetscFunctionBegin;
  /* rusparse checks the patterns when they are not `unchanged` (every
     product against Z's structure, as the plan keeps no fingerprints of
     them); the sizes must be checked here, as the descriptors keep the
     planned nnz. */
  PetscCheck(x->rows == st->x_rows && x->cols == st->x_cols && x->nnz == st->x_nnz && y->rows == st->y_rows && y->cols == st->y_cols && y->nnz == st->y_nnz, PETSC_COMM_SELF, PETSC_ERR_ARG_INCOMP,
             "rusparse: a factor changed its size or number of nonzeros since the symbolic phase (MAT_REUSE_MATRIX needs the same nonzero pattern)");
  RsCall(rusparseCsrSetPointers(st->X, (void *)x->i, (void *)x->j, (void *)x->a));
  RsCall(rusparseCsrSetPointers(st->Y, (void *)y->i, (void *)y->j, (void *)y->a));
  RsCall(rusparseCsrSetPointers(st->Z, zi, zj, za));
  RsCall(rusparseSpGEMM_setPatternCheck(st->spgemm, unchanged ? RUSPARSE_PATTERN_CHECK_CALLER : RUSPARSE_PATTERN_CHECK_HASH));
  RsCall(rusparseSpGEMMreuse_compute(h, st->op, RUSPARSE_OPERATION_NON_TRANSPOSE, &one, st->X, st->Y, &zero, st->Z, RS_VALUE, alg, st->spgemm));
  PetscCall(PetscLogFlops(st->flops));
  PetscFunctionReturn(0);
}

/* ---- the product record ------------------------------------------------------ */
typedef struct {
  RsSettings       settings;
  rusparseHandle_t handle;
  MatProductType   type;
  RsStage          stage[2]; /* PtAP: AP = A*P, then C = P^T*AP */
  PetscInt         num_stages;
  RsCsr            ap; /* PtAP's A*P, in ap_i, ap_j, ap_a */
  PetscInt        *ap_i, *ap_j;
  PetscScalar     *ap_a;
  RsPatternState   state;  /* A's, B's and C's patterns after the symbolic phase */
  RsValueState     values; /* A's and B's values C was computed from in the symbolic phase */
} RsProduct;

static PetscErrorCode RsProductDestroy(void *data)
{
  RsProduct *p = (RsProduct *)data;

  PetscFunctionBegin;
  for (int k = 0; k < 2; k++) PetscCall(RsStageDestroy(&p->stage[k]));
  PetscCall(PetscFree(p->ap_i));
  PetscCall(PetscFree(p->ap_j));
  PetscCall(PetscFree(p->ap_a));
  PetscCall(PetscFree(p));
  PetscFunctionReturn(0);
}

/* C's values for A's and B's (`a`, `b`) current values, written into C's
   value array: PtAP's A*P first, into the record's
   own arrays. `unchanged`: A's, B's and C's patterns are the symbolic
   phase's (rusparse then skips hashing them). */
static PetscErrorCode RsProductCompute(Mat C, const RsProductInfo *info, RsProduct *p, const RsCsr *a, const RsCsr *b, PetscBool unchanged)
{
  const PetscInt *ci, *cj;
  PetscScalar    *ca;
  PetscMemType    mtype;
  RsStage        *last = &p->stage[p->num_stages - 1];

  PetscFunctionBegin;
  PetscCall(MatSeqAIJGetCSRAndMemType(C, &ci, &cj, NULL, &mtype));
  PetscCall(MatSeqAIJGetArrayWrite(C, &ca));
  PetscCall(PetscLogEventBegin(RS_LOG_SPGEMM, info->A, info->B, C, 0));
  if (p->type == MATPRODUCT_PtAP) {
    /* Both stages read A's or P's pattern, so both trust it only when
       unchanged (A*P itself lands in the record's own arrays). */
    PetscCall(RsStageNumeric(p->handle, p->settings.alg, &p->stage[0], a, b, p->ap_i, p->ap_j, p->ap_a, unchanged));
    PetscCall(RsStageNumeric(p->handle, p->settings.alg, last, b, &p->ap, (PetscInt *)ci, (PetscInt *)cj, ca, unchanged));
  } else {
    PetscCall(RsStageNumeric(p->handle, p->settings.alg, last, a, b, (PetscInt *)ci, (PetscInt *)cj, ca, unchanged));
  }
  PetscCall(PetscLogEventEnd(RS_LOG_SPGEMM, info->A, info->B, C, 0));
  PetscCall(MatSeqAIJRestoreArrayWrite(C, &ca));
  PetscFunctionReturn(0);
}

static PetscErrorCode RsProductNumeric(Mat C)
{
  RsProductInfo info;
  RsProduct    *p;
  RsCsr         a, b;
  PetscBool     same = PETSC_FALSE;

  PetscFunctionBegin;
  PetscCall(RsProductGetInfo(C, &info));
  PetscCall(RsProductGetData(C, (void **)&p));
  PetscCheck(p, PetscObjectComm((PetscObject)C), PETSC_ERR_ORDER, "rusparse: the numeric phase ran before the symbolic phase");
  /* Right after the symbolic phase, which computed C: nothing to do unless
     A's or B's values changed since. */
  PetscCall(RsValueStateTake(&p->values, info.A, info.B, &same));
  if (same) PetscFunctionReturn(0);
  PetscCall(RsCsrOfMat(info.A, &a));
  PetscCall(RsCsrOfMat(info.B, &b));
  PetscCall(RsPatternStateSame(&p->state, info.A, info.B, C, &same));
  PetscCall(RsProductCompute(C, &info, p, &a, &b, same));
  PetscFunctionReturn(0);
}

/* Gives the SeqAIJ matrix C the structure (ci, cj) and the values ca:
   preallocated exactly, its column indices given whole (one copy, no
   insertion row by row), assembled. */
static PetscErrorCode RsSetStructure(Mat C, PetscInt m, const PetscInt *ci, const PetscInt *cj, const PetscScalar *ca)
{
  PetscInt    *row_nnz;
  PetscScalar *values;

  PetscFunctionBegin;
  PetscCall(PetscMalloc1(m, &row_nnz));
  for (PetscInt i = 0; i < m; i++) row_nnz[i] = ci[i + 1] - ci[i];
  PetscCall(MatSeqAIJSetPreallocation(C, 0, row_nnz));
  PetscCall(PetscFree(row_nnz));
  PetscCall(MatSeqAIJSetColumnIndices(C, (PetscInt *)cj));
  PetscCall(MatAssemblyBegin(C, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(C, MAT_FINAL_ASSEMBLY));
  PetscCall(MatSetOption(C, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_TRUE));
  PetscCall(MatSeqAIJGetArrayWrite(C, &values));
  PetscCall(PetscArraycpy(values, ca, ci[m]));
  PetscCall(MatSeqAIJRestoreArrayWrite(C, &values));
  PetscFunctionReturn(0);
}

static PetscErrorCode RsProductSymbolic(Mat C)
{
  const rusparseOperation_t N = RUSPARSE_OPERATION_NON_TRANSPOSE, T = RUSPARSE_OPERATION_TRANSPOSE;
  RsProductInfo             info;
  RsProduct                *p;
  RsCsr                     a, b;
  PetscInt                 *ci = NULL, *cj = NULL, nnz, m, n;
  PetscScalar              *ca = NULL;
  MatType                   type;

  PetscFunctionBegin;
  PetscCall(RsProductGetInfo(C, &info));
  PetscCall(PetscNew(&p));
  PetscCall(RsProductSetData(C, p, RsProductDestroy));
  p->type = info.type;
  PetscCall(RsSettingsFromOptions(info.A, &p->settings));
  PetscCall(RsHandleGet(&p->settings, &p->handle));
  PetscCall(RsCsrOfMat(info.A, &a));
  PetscCall(RsCsrOfMat(info.B, &b));

  PetscCall(PetscLogEventBegin(RS_LOG_SPGEMM, info.A, info.B, C, 0));
  switch (p->type) {
  case MATPRODUCT_AB:
  case MATPRODUCT_AtB:
    p->num_stages = 1;
    PetscCall(RsStageSymbolic(p->handle, p->settings.alg, &p->stage[0], p->type == MATPRODUCT_AB ? N : T, &a, &b, &ci, &cj, &ca, &nnz));
    break;
  case MATPRODUCT_PtAP:
    p->num_stages = 2;
    /* A*P with its values, which the second stage reads as it lists C. */
    PetscCall(RsStageSymbolic(p->handle, p->settings.alg, &p->stage[0], N, &a, &b, &p->ap_i, &p->ap_j, &p->ap_a, &p->ap.nnz));
    p->ap.rows = a.rows;
    p->ap.cols = b.cols;
    p->ap.i    = p->ap_i;
    p->ap.j    = p->ap_j;
    p->ap.a    = p->ap_a;
    PetscCall(RsStageSymbolic(p->handle, p->settings.alg, &p->stage[1], T, &b, &p->ap, &ci, &cj, &ca, &nnz));
    break;
  default:
    SETERRQ(PetscObjectComm((PetscObject)C), PETSC_ERR_PLIB, "rusparse: product type %s reached the rusparse symbolic phase", MatProductTypes[p->type]);
  }
  PetscCall(PetscLogEventEnd(RS_LOG_SPGEMM, info.A, info.B, C, 0));

  /* C: a matrix of A's type with the structure rusparse found. */
  m = p->type == MATPRODUCT_AB ? a.rows : a.cols;
  n = b.cols;
  if (p->type == MATPRODUCT_PtAP) m = b.cols;
  PetscCall(MatSetSizes(C, m, n, m, n));
  PetscCall(MatGetType(info.A, &type));
  PetscCall(MatSetType(C, type));
  /* C's values are those rusparse summed as it listed C's structure: the
     numeric phase right after finds C current. */
  PetscCall(RsSetStructure(C, m, ci, cj, ca));
  PetscCall(RsPatternStateGet(&p->state, info.A, info.B, C));
  for (PetscInt k = 0; k < p->num_stages; k++) PetscCall(PetscLogFlops(p->stage[k].flops));
  PetscCall(RsValueStateGet(&p->values, info.A, info.B));
  PetscCall(PetscFree(ci));
  PetscCall(PetscFree(cj));
  PetscCall(PetscFree(ca));
  /* MatSetType reset C's ops: the numeric phase is installed after it. */
  PetscCall(RsOpsSetProductPhases(C, NULL, RsProductNumeric));
  PetscFunctionReturn(0);
}

/* Whether `alg` names rusparse rather than a PETSc algorithm. */
static PetscErrorCode RsAlgorithmIsOurs(const char *alg, PetscBool *ours)
{
  PetscBool dflt, rs;

  PetscFunctionBegin;
  PetscCall(PetscStrcmp(alg, MATPRODUCTALGORITHMDEFAULT, &dflt));
  PetscCall(PetscStrcmp(alg, "rusparse", &rs));
  *ours = (PetscBool)(dflt || rs);
  PetscFunctionReturn(0);
}

PetscErrorCode RsUserAlgorithm(Mat C, const RsProductInfo *info, char name[], size_t len, PetscBool *chose)
{
  const char *legacy[] = {"-matmatmult_via", "-mattransposematmult_via", "-matptap_via"};
  const char *names[2] = {"-mat_product_algorithm", NULL};
  char         value[256];
  PetscBool    set, ours;
  const char  *prefix;
  PetscOptions options;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)C, &prefix));
  PetscCall(PetscObjectGetOptions((PetscObject)C, &options));
  *chose = PETSC_FALSE;
  if (info->alg) {
    PetscCall(RsAlgorithmIsOurs(info->alg, &ours));
    if (!ours) {
      PetscCall(PetscStrncpy(name, info->alg, len));
      *chose = PETSC_TRUE;
      PetscFunctionReturn(0);
    }
  }
  if (info->api_user) names[1] = legacy[info->type == MATPRODUCT_AB ? 0 : info->type == MATPRODUCT_AtB ? 1 : 2];
  for (int k = 0; k < 2 && names[k]; k++) {
    PetscCall(PetscOptionsGetString(options, prefix, names[k], value, sizeof(value), &set));
    if (!set) continue;
    PetscCall(RsAlgorithmIsOurs(value, &ours));
    if (!ours) {
      PetscCall(PetscStrncpy(name, value, len));
      *chose = PETSC_TRUE;
    }
  }
  PetscFunctionReturn(0);
}

PetscErrorCode RsProductFactors(Mat C, MatType plain, MatType ours, RsProductInfo *info, MatType *a_type, MatType *b_type, PetscBool *both_aij)
{
  PetscBool a_aij, b_aij;

  PetscFunctionBegin;
  PetscCall(RsProductGetInfo(C, info));
  PetscCall(MatGetType(info->A, a_type));
  PetscCall(MatGetType(info->B, b_type));
  PetscCall(PetscObjectTypeCompareAny((PetscObject)info->A, &a_aij, plain, ours, ""));
  PetscCall(PetscObjectTypeCompareAny((PetscObject)info->B, &b_aij, plain, ours, ""));
  *both_aij = (PetscBool)(a_aij && b_aij);
  PetscFunctionReturn(0);
}

PetscErrorCode RsSeqProductSetFromOptions(Mat C)
{
  RsProductInfo info;
  PetscBool     both_aij, user_alg = PETSC_FALSE;
  const char   *why = NULL;
  MatType       a_type, b_type;

  PetscFunctionBegin;
  PetscCall(RsProductFactors(C, MATSEQAIJ, MATSEQAIJRUSPARSE, &info, &a_type, &b_type, &both_aij));
  if (info.type != MATPRODUCT_AB && info.type != MATPRODUCT_AtB && info.type != MATPRODUCT_PtAP) why = "the product type is not AB, AtB or PtAP";
  else if (!both_aij) why = "a factor is not a SeqAIJ matrix";
  else {
    char      alg[256] = "";
    PetscBool backend;
    PetscCall(RsUserAlgorithm(C, &info, alg, sizeof(alg), &user_alg));
    /* MPIAIJ's "backend" route multiplies its blocks here: ours too. */
    PetscCall(PetscStrcmp(alg, "backend", &backend));
    if (user_alg && !backend) why = "a PETSc algorithm was chosen for it";
  }
  if (!why) {
    PetscInt am, an, bm, bn, inner;
    PetscCall(MatGetSize(info.A, &am, &an));
    PetscCall(MatGetSize(info.B, &bm, &bn));
    inner = info.type == MATPRODUCT_AB ? an : am;
    PetscCheck(inner == bm, PetscObjectComm((PetscObject)C), PETSC_ERR_ARG_SIZ, "rusparse: %s of a %" PetscInt_FMT " x %" PetscInt_FMT " and a %" PetscInt_FMT " x %" PetscInt_FMT " matrix: inner dimensions differ", MatProductTypes[info.type], am, an, bm, bn);
    PetscCheck(info.type != MATPRODUCT_PtAP || am == an, PetscObjectComm((PetscObject)C), PETSC_ERR_ARG_SIZ, "rusparse: PtAP needs a square A (got %" PetscInt_FMT " x %" PetscInt_FMT ")", am, an);
    PetscCall(PetscInfo(C, "rusparse runs %s of %s and %s\n", MatProductTypes[info.type], a_type, b_type));
    PetscCall(RsOpsSetProductPhases(C, RsProductSymbolic, NULL));
  } else {
    PetscCall(PetscInfo(C, "rusparse does not run %s of %s and %s (%s): PETSc's SeqAIJ implementation does\n", MatProductTypes[info.type], a_type, b_type, why));
    PetscCall(RsSeqAIJProductSetFromOptions(C));
  }
  PetscFunctionReturn(0);
}

PetscErrorCode RsProductsInitialize(void)
{
  PetscFunctionBegin;
  PetscCall(PetscLogEventRegister("RusparseSpGEMM", MAT_CLASSID, &RS_LOG_SPGEMM));
  PetscCall(PetscLogEventRegister("RusparseMPIRows", MAT_CLASSID, &RS_LOG_MPI_ROWS));
  PetscCall(PetscLogEventRegister("RusparseMPIMakeC", MAT_CLASSID, &RS_LOG_MPI_MAKE_C));
  PetscCall(PetscLogEventRegister("RusparseMPIWriteC", MAT_CLASSID, &RS_LOG_MPI_WRITE_C));
  PetscFunctionReturn(0);
}
