static const char help[] = "rusparse's PETSc plug-in: AB, AtB and PtAP of aijrusparse matrices against aij.\n"
                           "Run with -dll_append /path/librusparse_petsc.so on 1, 2 or 4 ranks.\n"
                           "  -n <12>  grid points per direction of the 3-D Poisson matrix\n"
                           "  -g <3000> rows of the power-law matrix\n\n";

/*
 * Builds the same matrices as aij and as aijrusparse:
 *   A  3-D 7-point Poisson matrix with varied values (n^3 rows)
 *   P  a prolongation-like n^3 x (n/2)^3 matrix (trilinear weights)
 *   G  a power-law matrix whose rows every 250 hold 600 entries
 *   Q  a rectangular aggregation-like g x g/4 matrix
 *   H  a power-law h x h matrix (h = g/3) whose last rank owns no rows
 *   R  an aggregation-like h x h/4 matrix, rows as H's, whose first rank owns
 *      no columns (so no rows of R^T*H or R^T*H*R)
 * and checks, against plain aij (relative Frobenius error <= 1e-12):
 *   AB   A*P, G*G and H*R,  AtB  P^T*A, G^T*G and R^T*H,
 *   PtAP P^T*A*P, Q^T*G*Q and R^T*H*R,
 * each through MatMatMult / MatTransposeMatMult / MatPtAP, through the
 * MatProduct API, and (on more than one rank) through the MatProduct API
 * with PETSc's "backend" algorithm chosen, and through the MatProduct API
 * with X's values doubled between MatProductSymbolic and MatProductNumeric
 * (written into its value arrays, the blocks' on more than one rank: the
 * numeric phase must use the values it finds, whatever a symbolic phase
 * saw); then changes the values twice
 * (same pattern) and checks MAT_REUSE_MATRIX / MatProductNumeric. On more
 * than one rank the default products take the plug-in's MPI route, whose
 * AtB and PtAP send rows of C to the ranks that own them. Also: the results are of type
 * seqaijrusparse / mpiaijrusparse; the RusparseSpGEMM event count grows with
 * every product and reuse round on every rank (and not with aij products);
 * a product type the plug-in does not take over (ABt) is still right;
 * bad options and a changed pattern give PETSc errors, not crashes.
 */
#include <petscmat.h>

static PetscInt      failures;
static PetscLogEvent rs_event;

#define EXPECT(cond, ...) \
  do { \
    if (!(cond)) { \
      failures++; \
      PetscCall(PetscPrintf(PETSC_COMM_SELF, "[rank %d] FAILED %s:%d: ", rank, __FILE__, __LINE__)); \
      PetscCall(PetscPrintf(PETSC_COMM_SELF, __VA_ARGS__)); \
      PetscCall(PetscPrintf(PETSC_COMM_SELF, "\n")); \
    } \
  } while (0)

static PetscMPIInt rank, size;

/* A value that depends on the position and the round (the reuse rounds
   change values, never the pattern). */
static PetscScalar Wiggle(PetscInt i, PetscInt j, PetscInt round)
{
  return (PetscScalar)(1.0 + 0.001 * (PetscReal)((i * 7 + j * 13 + round * 17) % 101));
}

static PetscErrorCode CreateMat(MatType type, PetscInt m, PetscInt n, PetscInt per_row, Mat *M)
{
  PetscFunctionBegin;
  PetscCall(MatCreate(PETSC_COMM_WORLD, M));
  PetscCall(MatSetSizes(*M, PETSC_DECIDE, PETSC_DECIDE, m, n));
  PetscCall(MatSetType(*M, type));
  PetscCall(MatSeqAIJSetPreallocation(*M, per_row, NULL));
  PetscCall(MatMPIAIJSetPreallocation(*M, per_row, NULL, per_row, NULL));
  PetscFunctionReturn(0);
}

/* Fills the rows this rank owns (the same pattern every round). */
static PetscErrorCode FillPoisson(Mat A, PetscInt n, PetscInt round)
{
  PetscInt start, end;

  PetscFunctionBegin;
  PetscCall(MatGetOwnershipRange(A, &start, &end));
  for (PetscInt row = start; row < end; row++) {
    PetscInt    x = row % n, y = (row / n) % n, z = row / (n * n), cols[7], k = 0;
    PetscScalar vals[7];
    const PetscInt d[6][3] = {
      {-1, 0, 0},
      {1,  0, 0},
      {0, -1, 0},
      {0, 1,  0},
      {0, 0, -1},
      {0, 0, 1 }
    };
    cols[k]   = row;
    vals[k++] = 6.0 * Wiggle(row, row, round);
    for (int e = 0; e < 6; e++) {
      PetscInt xx = x + d[e][0], yy = y + d[e][1], zz = z + d[e][2];
      if (xx < 0 || yy < 0 || zz < 0 || xx >= n || yy >= n || zz >= n) continue;
      cols[k] = xx + n * (yy + n * zz);
      vals[k] = -Wiggle(row, cols[k], round);
      k++;
    }
    PetscCall(MatSetValues(A, 1, &row, k, cols, vals, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

/* Trilinear interpolation from the (n/2)^3 coarse grid (n even). */
static PetscErrorCode FillProlongation(Mat P, PetscInt n, PetscInt round)
{
  PetscInt start, end, nc = n / 2;

  PetscFunctionBegin;
  PetscCall(MatGetOwnershipRange(P, &start, &end));
  for (PetscInt row = start; row < end; row++) {
    PetscInt    f[3] = {row % n, (row / n) % n, row / (n * n)}, lo[3], cnt[3], cols[8], k = 0;
    PetscScalar vals[8];
    for (int a = 0; a < 3; a++) {
      lo[a]  = f[a] / 2;
      cnt[a] = (f[a] % 2 == 1 && lo[a] + 1 < nc) ? 2 : 1;
    }
    for (PetscInt i = 0; i < cnt[0]; i++)
      for (PetscInt j = 0; j < cnt[1]; j++)
        for (PetscInt l = 0; l < cnt[2]; l++) {
          cols[k]   = (lo[0] + i) + nc * ((lo[1] + j) + nc * (lo[2] + l));
          vals[k]   = Wiggle(row, cols[k], round) / (PetscReal)(cnt[0] * cnt[1] * cnt[2]);
          k++;
        }
    PetscCall(MatSetValues(P, 1, &row, k, cols, vals, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(P, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(P, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

#define LONG_ROW 600

/* Power-law rows: every 250th row holds LONG_ROW entries, the others 2-10
   at pseudo-random columns (duplicates are inserted once). */
static PetscErrorCode FillPowerLaw(Mat G, PetscInt g, PetscInt round)
{
  PetscInt     start, end, cols[LONG_ROW];
  PetscScalar  vals[LONG_ROW];

  PetscFunctionBegin;
  PetscCall(MatGetOwnershipRange(G, &start, &end));
  for (PetscInt row = start; row < end; row++) {
    PetscInt len = row % 250 == 0 ? LONG_ROW : 2 + (row * 31) % 9;
    for (PetscInt k = 0; k < len; k++) {
      cols[k] = (PetscInt)(((unsigned long long)(row + 1) * 2654435761ULL + (unsigned long long)k * 40503ULL) % (unsigned long long)g);
      vals[k] = Wiggle(row, cols[k], round) * (k % 2 ? -1.0 : 1.0);
    }
    PetscCall(MatSetValues(G, 1, &row, len, cols, vals, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(G, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(G, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

/* Local sizes that leave rank `empty` without any (when there are several
   ranks); the others share `total`. */
static PetscInt SharedSize(PetscInt total, PetscMPIInt empty)
{
  PetscMPIInt others = size > 1 ? size - 1 : 1, me;
  if (size > 1 && rank == empty) return 0;
  me = size > 1 && rank > empty ? rank - 1 : rank;
  return total / others + (me < total % others ? 1 : 0);
}

/* Aggregation-like: row r goes to aggregate r/4, every third row also to the next one. */
static PetscErrorCode FillAggregation(Mat Q, PetscInt g, PetscInt round)
{
  PetscInt start, end, nc = g / 4;

  PetscFunctionBegin;
  PetscCall(MatGetOwnershipRange(Q, &start, &end));
  for (PetscInt row = start; row < end; row++) {
    PetscInt    cols[2] = {PetscMin(row / 4, nc - 1), PetscMin(row / 4 + 1, nc - 1)};
    PetscScalar vals[2] = {Wiggle(row, cols[0], round), 0.5 * Wiggle(row, cols[1], round)};
    PetscCall(MatSetValues(Q, 1, &row, (row % 3 == 0 && cols[1] != cols[0]) ? 2 : 1, cols, vals, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(Q, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(Q, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

typedef struct {
  PetscInt n, g, h;
  Mat      A, P, G, Q, H, R; /* one type */
} Inputs;

static PetscErrorCode BuildInputs(MatType type, PetscInt n, PetscInt g, Inputs *in)
{
  PetscFunctionBegin;
  in->n = n;
  in->g = g;
  PetscCall(CreateMat(type, n * n * n, n * n * n, 7, &in->A));
  PetscCall(CreateMat(type, n * n * n, (n / 2) * (n / 2) * (n / 2), 8, &in->P));
  PetscCall(CreateMat(type, g, g, LONG_ROW, &in->G));
  PetscCall(CreateMat(type, g, g / 4, 2, &in->Q));
  PetscCall(MatSetOption(in->G, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_FALSE));
  /* H and R: uneven layouts, with a rank owning no rows or no columns. */
  in->h = g / 3;
  PetscCall(MatCreate(PETSC_COMM_WORLD, &in->H));
  PetscCall(MatSetSizes(in->H, SharedSize(in->h, size - 1), SharedSize(in->h, size - 1), in->h, in->h));
  PetscCall(MatSetType(in->H, type));
  PetscCall(MatSeqAIJSetPreallocation(in->H, LONG_ROW, NULL));
  PetscCall(MatMPIAIJSetPreallocation(in->H, LONG_ROW, NULL, LONG_ROW, NULL));
  PetscCall(MatCreate(PETSC_COMM_WORLD, &in->R));
  PetscCall(MatSetSizes(in->R, SharedSize(in->h, size - 1), SharedSize(in->h / 4, 0), in->h, in->h / 4));
  PetscCall(MatSetType(in->R, type));
  PetscCall(MatSeqAIJSetPreallocation(in->R, 2, NULL));
  PetscCall(MatMPIAIJSetPreallocation(in->R, 2, NULL, 2, NULL));
  PetscFunctionReturn(0);
}

static PetscErrorCode FillInputs(Inputs *in, PetscInt round)
{
  PetscFunctionBegin;
  PetscCall(FillPoisson(in->A, in->n, round));
  PetscCall(FillProlongation(in->P, in->n, round));
  PetscCall(FillPowerLaw(in->G, in->g, round));
  PetscCall(FillAggregation(in->Q, in->g, round));
  PetscCall(FillPowerLaw(in->H, in->h, round));
  PetscCall(FillAggregation(in->R, in->h, round));
  PetscFunctionReturn(0);
}

static PetscErrorCode DestroyInputs(Inputs *in)
{
  PetscFunctionBegin;
  PetscCall(MatDestroy(&in->A));
  PetscCall(MatDestroy(&in->P));
  PetscCall(MatDestroy(&in->G));
  PetscCall(MatDestroy(&in->Q));
  PetscCall(MatDestroy(&in->H));
  PetscCall(MatDestroy(&in->R));
  PetscFunctionReturn(0);
}

/* The products checked: C = X*Y (AB), X^T*Y (AtB) or Y^T*X*Y (PtAP). */
typedef struct {
  const char    *name;
  MatProductType type;
  int            x, y; /* 0 A, 1 P, 2 G, 3 Q, 4 H, 5 R */
} Case;

static const Case cases[] = {
  {"A*P",      MATPRODUCT_AB,   0, 1},
  {"G*G",      MATPRODUCT_AB,   2, 2},
  {"P^T*A",    MATPRODUCT_AtB,  1, 0},
  {"G^T*G",    MATPRODUCT_AtB,  2, 2},
  {"P^T*A*P",  MATPRODUCT_PtAP, 0, 1},
  {"Q^T*G*Q",  MATPRODUCT_PtAP, 2, 3},
  {"H*R",      MATPRODUCT_AB,   4, 5},
  {"R^T*H",    MATPRODUCT_AtB,  5, 4},
  {"R^T*H*R",  MATPRODUCT_PtAP, 4, 5},
};
#define NUM_CASES ((int)(sizeof(cases) / sizeof(cases[0])))

static Mat Pick(const Inputs *in, int k)
{
  Mat all[6] = {in->A, in->P, in->G, in->Q, in->H, in->R};
  return all[k];
}

/* api 0: MatMatMult / MatTransposeMatMult / MatPtAP; api 1: MatProduct;
   api 2: MatProduct with PETSc's "backend" algorithm chosen when `backend`
   (else as api 1: the reference of plain aij); api 3: MatProduct with X's
   values doubled between the symbolic and the numeric phase (and halved
   back after it: exact); api 4: the same with Y's values doubled on the last
   rank alone (the rows other ranks gather from it change, theirs do not),
   the reference's before its symbolic phase (see Multiply). */
#define NUM_APIS 5
static const char *const api_names[NUM_APIS] = {"MatMatMult", "MatProduct", "backend", "changed", "changed Y"};

/* X's values times s, written into its value arrays (its blocks' on more
   than one rank), as a code that fills matrices in place does; on the last
   rank alone when `last_rank_only`. */
static PetscErrorCode ScaleInPlace(Mat X, PetscScalar s, PetscBool last_rank_only)
{
  Mat          blocks[2] = {X, NULL};
  PetscBool    mpi;
  PetscScalar *v;
  PetscInt     nnz;
  MatInfo      info;

  PetscFunctionBegin;
  if (last_rank_only && rank != size - 1) PetscFunctionReturn(0);
  PetscCall(PetscObjectBaseTypeCompare((PetscObject)X, MATMPIAIJ, &mpi));
  if (mpi) PetscCall(MatMPIAIJGetSeqAIJ(X, &blocks[0], &blocks[1], NULL));
  for (int k = 0; k < 2; k++) {
    if (!blocks[k]) continue;
    PetscCall(MatGetInfo(blocks[k], MAT_LOCAL, &info));
    nnz = (PetscInt)info.nz_used;
    PetscCall(MatSeqAIJGetArray(blocks[k], &v));
    for (PetscInt e = 0; e < nnz; e++) v[e] *= s;
    PetscCall(MatSeqAIJRestoreArray(blocks[k], &v));
  }
  PetscFunctionReturn(0);
}

static PetscErrorCode Multiply(const Inputs *in, const Case *c, int api, PetscBool backend, MatReuse reuse, Mat *C)
{
  Mat X = Pick(in, c->x), Y = Pick(in, c->y);

  PetscFunctionBegin;
  if (api == 0) {
    switch (c->type) {
    case MATPRODUCT_AB:
      PetscCall(MatMatMult(X, Y, reuse, PETSC_DEFAULT, C));
      break;
    case MATPRODUCT_AtB:
      PetscCall(MatTransposeMatMult(X, Y, reuse, PETSC_DEFAULT, C));
      break;
    default:
      PetscCall(MatPtAP(X, Y, reuse, PETSC_DEFAULT, C));
    }
  } else if (reuse == MAT_INITIAL_MATRIX) {
    /* The reference (plain aij) sees api 4's new values of Y from its
       symbolic phase on: PETSc 3.18's own MPIAIJ PtAP keeps P's values from
       its symbolic phase when they change through the blocks' arrays (its
       numeric phase then gives a stale product; AB is right). */
    if (api == 4 && !backend) PetscCall(ScaleInPlace(Y, 2.0, PETSC_TRUE));
    PetscCall(MatProductCreate(X, Y, NULL, C));
    PetscCall(MatProductSetType(*C, c->type));
    if (api == 2 && backend) PetscCall(MatProductSetAlgorithm(*C, "backend"));
    PetscCall(MatProductSetFromOptions(*C));
    PetscCall(MatProductSymbolic(*C));
    if (api == 3) PetscCall(ScaleInPlace(X, 2.0, PETSC_FALSE));
    if (api == 4 && backend) PetscCall(ScaleInPlace(Y, 2.0, PETSC_TRUE));
    PetscCall(MatProductNumeric(*C));
    if (api == 3) PetscCall(ScaleInPlace(X, 0.5, PETSC_FALSE));
    if (api == 4) PetscCall(ScaleInPlace(Y, 0.5, PETSC_TRUE));
  } else {
    PetscCall(MatProductNumeric(*C));
  }
  PetscFunctionReturn(0);
}

static PetscErrorCode EventCount(PetscInt *count)
{
  PetscEventPerfInfo info;

  PetscFunctionBegin;
  PetscCall(PetscLogEventGetPerfInfo(0, rs_event, &info));
  *count = info.count;
  PetscFunctionReturn(0);
}

/* ||C - ref||_F / ||ref||_F, and C's type. */
static PetscErrorCode Compare(Mat ref, Mat C, const char *what, PetscInt round, int api)
{
  Mat       D;
  PetscReal err, norm;
  MatType   type;
  PetscBool type_ok;

  PetscFunctionBegin;
  PetscCall(MatGetType(C, &type));
  PetscCall(PetscStrcmp(type, size == 1 ? "seqaijrusparse" : "mpiaijrusparse", &type_ok));
  EXPECT(type_ok, "%s (round %" PetscInt_FMT ", api %d): C is of type %s", what, round, api, type);
  PetscCall(MatConvert(C, MATAIJ, MAT_INITIAL_MATRIX, &D));
  PetscCall(MatAXPY(D, -1.0, ref, DIFFERENT_NONZERO_PATTERN));
  PetscCall(MatNorm(D, NORM_FROBENIUS, &err));
  PetscCall(MatNorm(ref, NORM_FROBENIUS, &norm));
  PetscCall(MatDestroy(&D));
  EXPECT(norm > 0 && err <= 1e-12 * norm, "%s (round %" PetscInt_FMT ", api %d): relative Frobenius error %g", what, round, api, (double)(err / norm));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  %-8s round %" PetscInt_FMT " %-10s relative error %.2e\n", what, round, api_names[api], (double)(err / norm)));
  PetscFunctionReturn(0);
}

/* Every rank's event count grew by at least one. */
static PetscErrorCode ExpectGrew(PetscInt before, const char *what)
{
  PetscInt after = 0;

  PetscFunctionBegin;
  PetscCall(EventCount(&after));
  EXPECT(after > before, "%s: RusparseSpGEMM count %" PetscInt_FMT " -> %" PetscInt_FMT " (no rusparse product ran on this rank)", what, before, after);
  PetscFunctionReturn(0);
}

/* A 4 x 4 seqaijrusparse matrix on this rank with entries (i, (i + shift) % 4),
   and (0, 3) too when `extra`. */
static PetscErrorCode SmallSeq(PetscInt shift, PetscBool extra, Mat *M)
{
  PetscFunctionBegin;
  PetscCall(MatCreate(PETSC_COMM_SELF, M));
  PetscCall(MatSetSizes(*M, 4, 4, 4, 4));
  PetscCall(MatSetType(*M, "seqaijrusparse"));
  PetscCall(MatSeqAIJSetPreallocation(*M, 2, NULL));
  for (PetscInt i = 0; i < 4; i++) PetscCall(MatSetValue(*M, i, (i + shift) % 4, 2.0, INSERT_VALUES));
  if (extra) PetscCall(MatSetValue(*M, 0, 3, 1.0, INSERT_VALUES));
  PetscCall(MatAssemblyBegin(*M, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(*M, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

/* A failed call's error code and PETSc's message for it (the message the
   plug-in gave SETERRQ). */
static PetscErrorCode ExpectError(PetscErrorCode code, PetscErrorCode expected, const char *part, const char *what)
{
  char *message = NULL;

  PetscFunctionBegin;
  EXPECT(code == expected, "%s: error %d, expected %d", what, (int)code, (int)expected);
  if (code) PetscCall(PetscErrorMessage(code, NULL, &message));
  EXPECT(message && strstr(message, part), "%s: message \"%s\" lacks \"%s\"", what, message ? message : "(none)", part);
  PetscFunctionReturn(0);
}

/* The symbolic phase of X*Y with one option set; returns its error code. */
static PetscErrorCode SymbolicWithOption(Mat X, Mat Y, const char *option, const char *value, PetscErrorCode *code)
{
  Mat C;

  PetscFunctionBegin;
  PetscCall(PetscOptionsSetValue(NULL, option, value));
  PetscCall(MatProductCreate(X, Y, NULL, &C));
  PetscCall(MatProductSetType(C, MATPRODUCT_AB));
  PetscCall(MatProductSetFromOptions(C));
  PetscCall(PetscPushErrorHandler(PetscReturnErrorHandler, NULL));
  *code = MatProductSymbolic(C);
  PetscCall(PetscPopErrorHandler());
  PetscCall(MatDestroy(&C));
  PetscCall(PetscOptionsClearValue(NULL, option));
  PetscFunctionReturn(0);
}

/* Errors come back as PETSc error codes, with nothing leaked (-malloc_dump
   reports what is left at PetscFinalize). On this rank's own matrices. */
static PetscErrorCode CheckErrors(void)
{
  Mat            X, Y, C, bad;
  PetscErrorCode code;

  PetscFunctionBegin;
  PetscCall(SmallSeq(0, PETSC_FALSE, &X));
  PetscCall(SmallSeq(1, PETSC_FALSE, &Y));

  /* rusparse refuses more than RUSPARSE_MAX_THREADS threads: its
     INVALID_VALUE becomes PETSC_ERR_ARG_WRONG. */
  PetscCall(SymbolicWithOption(X, Y, "-mat_rusparse_threads", "100000", &code));
  PetscCall(ExpectError(code, PETSC_ERR_ARG_WRONG, "INVALID_VALUE in rusparseSetNumThreads", "-mat_rusparse_threads 100000"));
  /* A GPU back end on a rank without that GPU: rusparse's NOT_SUPPORTED
     from creating the handle, with its reason, as PETSC_ERR_SUP. (With a
     GPU the product runs there: rusparse stages the host matrices.) */
  {
    const char *gpu_backends[] = {"cuda", "hip"};
    for (int k = 0; k < 2; k++) {
      PetscCall(SymbolicWithOption(X, Y, "-mat_rusparse_backend", gpu_backends[k], &code));
      if (code != 0) PetscCall(ExpectError(code, PETSC_ERR_SUP, "NOT_SUPPORTED in rusparseCreateWithBackend", gpu_backends[k]));
    }
  }

  /* MAT_REUSE_MATRIX with a factor of another pattern (same type and sizes). */
  PetscCall(MatMatMult(X, Y, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &C));
  PetscCall(SmallSeq(0, PETSC_TRUE, &bad)); /* one more entry */
  PetscCall(PetscPushErrorHandler(PetscReturnErrorHandler, NULL));
  code = MatMatMult(bad, Y, MAT_REUSE_MATRIX, PETSC_DEFAULT, &C);
  PetscCall(PetscPopErrorHandler());
  PetscCall(ExpectError(code, PETSC_ERR_ARG_INCOMP, "changed its size or number of nonzeros since the symbolic phase", "MAT_REUSE_MATRIX with one more entry"));
  PetscCall(MatDestroy(&bad));
  PetscCall(SmallSeq(2, PETSC_FALSE, &bad)); /* as many entries, other columns */
  PetscCall(PetscPushErrorHandler(PetscReturnErrorHandler, NULL));
  code = MatMatMult(bad, Y, MAT_REUSE_MATRIX, PETSC_DEFAULT, &C);
  PetscCall(PetscPopErrorHandler());
  PetscCall(ExpectError(code, PETSC_ERR_ARG_WRONG, "INVALID_VALUE in rusparseSpGEMMreuse_compute", "MAT_REUSE_MATRIX with moved entries"));
  /* And the right factor again works. */
  PetscCall(MatMatMult(X, Y, MAT_REUSE_MATRIX, PETSC_DEFAULT, &C));
  PetscCall(MatDestroy(&bad));
  PetscCall(MatDestroy(&C));
  PetscCall(MatDestroy(&X));
  PetscCall(MatDestroy(&Y));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  errors: a bad thread count, a GPU back end and changed patterns were reported\n"));
  PetscFunctionReturn(0);
}

/* An h x h matrix laid out as `like`, with entries (r, r) and
   (r, (r + 1 + shift) % h): the same counts, other columns, per shift. */
static PetscErrorCode CreateBand(Mat like, PetscInt h, PetscInt shift, Mat *M)
{
  PetscInt m, n, start, end;

  PetscFunctionBegin;
  PetscCall(MatGetLocalSize(like, &m, &n));
  PetscCall(MatCreate(PETSC_COMM_WORLD, M));
  PetscCall(MatSetSizes(*M, m, n, h, h));
  PetscCall(MatSetType(*M, "aijrusparse"));
  PetscCall(MatSeqAIJSetPreallocation(*M, 2, NULL));
  PetscCall(MatMPIAIJSetPreallocation(*M, 2, NULL, 2, NULL));
  PetscCall(MatGetOwnershipRange(*M, &start, &end));
  for (PetscInt r = start; r < end; r++) {
    PetscInt    cols[2] = {r, (r + 1 + shift) % h};
    PetscScalar vals[2] = {2.0, -1.0};
    PetscCall(MatSetValues(*M, 1, &r, 2, cols, vals, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(*M, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(*M, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

/* The MPI route under MAT_REUSE_MATRIX with a factor of another pattern:
   every rank reports it (none hangs), and the right factor then works. */
static PetscErrorCode CheckMpiReuseErrors(const Inputs *rs)
{
  Mat            X, bad, C;
  PetscErrorCode code;
  PetscInt       shifts[2] = {1, 2};
  const char    *what[2]   = {"MPI route: MAT_REUSE_MATRIX with moved entries", "MPI route: MAT_REUSE_MATRIX with entries moved further"};

  PetscFunctionBegin;
  PetscCall(CreateBand(rs->H, rs->h, 0, &X));
  PetscCall(MatMatMult(X, rs->R, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &C));
  for (int k = 0; k < 2; k++) {
    PetscCall(CreateBand(rs->H, rs->h, shifts[k], &bad));
    PetscCall(PetscPushErrorHandler(PetscReturnErrorHandler, NULL));
    code = MatMatMult(bad, rs->R, MAT_REUSE_MATRIX, PETSC_DEFAULT, &C);
    PetscCall(PetscPopErrorHandler());
    PetscCall(ExpectError(code, PETSC_ERR_ARG_INCOMP, "nonzero pattern changed since the symbolic phase", what[k]));
    PetscCall(MatDestroy(&bad));
  }
  PetscCall(MatMatMult(X, rs->R, MAT_REUSE_MATRIX, PETSC_DEFAULT, &C));
  PetscCall(MatDestroy(&C));
  PetscCall(MatDestroy(&X));

  /* A*B whose A's columns and B's rows are split differently over the
     ranks (H's layout against an even one): refused on every rank. */
  {
    Mat Y;
    PetscCall(CreateMat("aijrusparse", rs->h, rs->h, 2, &Y));
    PetscCall(MatAssemblyBegin(Y, MAT_FINAL_ASSEMBLY));
    PetscCall(MatAssemblyEnd(Y, MAT_FINAL_ASSEMBLY));
    PetscCall(MatProductCreate(rs->H, Y, NULL, &C));
    PetscCall(MatProductSetType(C, MATPRODUCT_AB));
    PetscCall(MatProductSetFromOptions(C));
    PetscCall(PetscPushErrorHandler(PetscReturnErrorHandler, NULL));
    code = MatProductSymbolic(C);
    PetscCall(PetscPopErrorHandler());
    PetscCall(ExpectError(code, PETSC_ERR_ARG_SIZ, "A's columns and B's rows are not distributed alike", "MPI route: layouts that differ"));
    PetscCall(MatDestroy(&C));
    PetscCall(MatDestroy(&Y));
  }
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "  errors: the MPI route refused factors of another pattern or layout on every rank\n"));
  PetscFunctionReturn(0);
}

int main(int argc, char **argv)
{
  Inputs   plain, rs;
  PetscInt n = 12, g = 3000, before = 0, after = 0, total_failures = 0;
  Mat      ref[NUM_CASES][NUM_APIS] = {{NULL}}, out[NUM_CASES][NUM_APIS] = {{NULL}};

  PetscCall(PetscInitialize(&argc, &argv, NULL, help));
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-n", &n, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-g", &g, NULL));
  PetscCheck(n >= 2 && n % 2 == 0 && g >= 24 * size, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-n must be even and >= 2, -g >= 24 per rank");
  PetscCall(PetscLogDefaultBegin());
  PetscCall(PetscLogEventGetId("RusparseSpGEMM", &rs_event));
  PetscCheck(rs_event > 0, PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONGSTATE, "the RusparseSpGEMM event is not registered: load the plug-in with -dll_append");

  PetscCall(BuildInputs(MATAIJ, n, g, &plain));
  PetscCall(BuildInputs("aijrusparse", n, g, &rs));
  for (PetscInt round = 0; round < 3; round++) {
    MatReuse reuse = round == 0 ? MAT_INITIAL_MATRIX : MAT_REUSE_MATRIX;
    PetscCall(FillInputs(&plain, round));
    PetscCall(FillInputs(&rs, round));
    for (int c = 0; c < NUM_CASES; c++) {
      for (int api = 0; api < NUM_APIS; api++) {
        if (api == 2 && size == 1) continue; /* "backend" is an MPIAIJ algorithm */
        PetscCall(EventCount(&before));
        PetscCall(Multiply(&plain, &cases[c], api, PETSC_FALSE, reuse, &ref[c][api]));
        PetscCall(EventCount(&after));
        EXPECT(after == before, "%s on aij matrices ran through rusparse", cases[c].name);
        PetscCall(Multiply(&rs, &cases[c], api, PETSC_TRUE, reuse, &out[c][api]));
        PetscCall(ExpectGrew(before, cases[c].name));
        PetscCall(Compare(ref[c][api], out[c][api], cases[c].name, round, api));
      }
    }
  }
  for (int c = 0; c < NUM_CASES; c++)
    for (int api = 0; api < NUM_APIS; api++) {
      PetscCall(MatDestroy(&ref[c][api]));
      PetscCall(MatDestroy(&out[c][api]));
    }

  /* A product the plug-in leaves to PETSc (ABt) is still right. */
  {
    Mat R, C;
    PetscCall(MatMatTransposeMult(plain.G, plain.G, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &R));
    PetscCall(MatMatTransposeMult(rs.G, rs.G, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &C));
    PetscCall(Compare(R, C, "G*G^T", 0, 0));
    PetscCall(MatDestroy(&R));
    PetscCall(MatDestroy(&C));
  }
  PetscCall(CheckErrors());
  if (size > 1) PetscCall(CheckMpiReuseErrors(&rs));

  PetscCall(DestroyInputs(&plain));
  PetscCall(DestroyInputs(&rs));
  PetscCall(MPIU_Allreduce(&failures, &total_failures, 1, MPIU_INT, MPI_SUM, PETSC_COMM_WORLD));
  PetscCall(EventCount(&after));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%s: %" PetscInt_FMT " failures on %d ranks (rank 0 ran %" PetscInt_FMT " rusparse products)\n", total_failures ? "FAILED" : "OK", total_failures, size, after));
  PetscCall(PetscFinalize());
  return total_failures ? 1 : 0;
}
