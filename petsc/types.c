/*
 * The matrix types of rusparse's PETSc plug-in.
 *
 *   seqaijrusparse  a SeqAIJ matrix whose AB, AtB and PtAP run through
 *                   rusparse (products.c)
 *   mpiaijrusparse  an MPIAIJ matrix whose AB, AtB and PtAP run through
 *                   rusparse with one merged local product per rank
 *                   (mpi_products.c); its diagonal and off-diagonal blocks
 *                   are seqaijrusparse, so PETSc's "backend" algorithm, when
 *                   chosen, multiplies them through rusparse too
 *   aijrusparse     either, by communicator size (as aij)
 *
 * Everything else is inherited from SeqAIJ / MPIAIJ: the types only change
 * the type name, the product set-up and (MPI) the type of the blocks.
 *
 * Options (read with the matrix's options prefix when a product is set up):
 *   -mat_rusparse_backend cpu|auto|cuda|hip  the rusparse handle's back end
 *                                         (cuda, hip: the products run on the
 *                                         rank's GPU, rusparse copying the
 *                                         host matrices there and C back)
 *   -mat_rusparse_alg <name>              rusparse's algorithm
 *   -mat_rusparse_threads <n>             CPU threads (0: rusparse's default)
 */
#include "rusparse_petsc.h"

#include <limits.h>

/* Functions of plain SeqAIJ / MPIAIJ that the types override, saved from
   freshly made matrices at registration (PETSc does not export them). */
static RsMatFn                 rs_seqaij_product_setup;
static RsMatFn                 rs_mpiaij_product_setup;
static PetscErrorCode (*rs_mpiaij_preallocation)(Mat, PetscInt, const PetscInt[], PetscInt, const PetscInt[]);

PetscErrorCode RsSeqAIJProductSetFromOptions(Mat C)
{
  PetscFunctionBegin;
  PetscCall((*rs_seqaij_product_setup)(C));
  PetscFunctionReturn(0);
}

/* ---- options ---------------------------------------------------------------- */
static const char *const rs_backend_names[] = {"auto", "cpu", "cuda", "hip"};
static const char *const rs_alg_names[]     = {"default", "deterministic", "nondeterministic", "alg1", "alg2", "alg3", "cpu_hash", "cpu_brmerge_precise", "cpu_brmerge_upper", "cpu_dense"};
static const rusparseSpGEMMAlg_t rs_algs[]  = {RUSPARSE_SPGEMM_DEFAULT, RUSPARSE_SPGEMM_CSR_ALG_DETERMINISTIC, RUSPARSE_SPGEMM_CSR_ALG_NONDETERMINISTIC, RUSPARSE_SPGEMM_ALG1, RUSPARSE_SPGEMM_ALG2, RUSPARSE_SPGEMM_ALG3, RUSPARSE_SPGEMM_CPU_HASH, RUSPARSE_SPGEMM_CPU_BRMERGE_PRECISE, RUSPARSE_SPGEMM_CPU_BRMERGE_UPPER, RUSPARSE_SPGEMM_CPU_DENSE};

PetscErrorCode RsSettingsFromOptions(Mat A, RsSettings *s)
{
  PetscOptions options;
  const char  *prefix;
  PetscInt     backend = 1, alg = 0, threads = 0;
  PetscBool    set;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetOptions((PetscObject)A, &options));
  PetscCall(PetscObjectGetOptionsPrefix((PetscObject)A, &prefix));
  PetscCall(PetscOptionsGetEList(options, prefix, "-mat_rusparse_backend", rs_backend_names, 4, &backend, &set));
  PetscCall(PetscOptionsGetEList(options, prefix, "-mat_rusparse_alg", rs_alg_names, (PetscInt)(sizeof(rs_algs) / sizeof(rs_algs[0])), &alg, &set));
  PetscCall(PetscOptionsGetInt(options, prefix, "-mat_rusparse_threads", &threads, &set));
  /* rusparseSetNumThreads checks the range (0 to RUSPARSE_MAX_THREADS). */
  PetscCheck(threads >= INT_MIN && threads <= INT_MAX, PETSC_COMM_SELF, PETSC_ERR_ARG_OUTOFRANGE, "-mat_rusparse_threads %" PetscInt_FMT ": give 0 (rusparse's default) to %d", threads, RUSPARSE_MAX_THREADS);
  /* PETSc's matrices live in host memory: on a CUDA or HIP handle rusparse
     stages them (copies A and B to the GPU and C back at each phase). A
     machine without that GPU gets NOT_SUPPORTED from rusparseCreateWithBackend,
     with rusparse's reason, when the first product is set up. */
  {
    const rusparseBackend_t backends[] = {RUSPARSE_BACKEND_AUTO, RUSPARSE_BACKEND_CPU, RUSPARSE_BACKEND_CUDA, RUSPARSE_BACKEND_HIP};
    s->backend = backends[backend];
  }
  s->alg     = rs_algs[alg];
  s->threads = threads;
  PetscFunctionReturn(0);
}

/* ---- seqaijrusparse ------------------------------------------------------------ */
static PetscErrorCode RsConvertSeqToPlain(Mat, MatType, MatReuse, Mat *);

/* PETSc asks the matching ops first, then these composed functions of
   either factor, for products of different types. */
static const char *const rs_seq_mixed[] = {"MatProductSetFromOptions_seqaijrusparse_seqaij_C", "MatProductSetFromOptions_seqaij_seqaijrusparse_C"};
static const char *const rs_mpi_mixed[] = {"MatProductSetFromOptions_mpiaijrusparse_mpiaij_C", "MatProductSetFromOptions_mpiaij_mpiaijrusparse_C"};

/* Installs `setup` as B's product set-up, and composes `mixed` (NULL:
   removes) under the mixed-type names. */
static PetscErrorCode RsSetProductSetup(Mat B, RsMatFn setup, const char *const names[2], RsMatFn mixed)
{
  PetscFunctionBegin;
  PetscCall(RsOpsSetProductSetFromOptions(B, setup));
  for (int k = 0; k < 2; k++) PetscCall(PetscObjectComposeFunction((PetscObject)B, names[k], mixed));
  PetscFunctionReturn(0);
}

/* Turns a SeqAIJ matrix into a seqaijrusparse one in place. */
static PetscErrorCode RsMakeSeq(Mat B)
{
  PetscFunctionBegin;
  PetscCall(RsSetProductSetup(B, RsSeqProductSetFromOptions, rs_seq_mixed, RsSeqProductSetFromOptions));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_seqaijrusparse_seqaij_C", RsConvertSeqToPlain));
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATSEQAIJRUSPARSE));
  PetscFunctionReturn(0);
}

/* Back to plain SeqAIJ in place (the data is SeqAIJ's all along). */
static PetscErrorCode RsMakeSeqPlain(Mat B)
{
  PetscFunctionBegin;
  PetscCall(RsSetProductSetup(B, rs_seqaij_product_setup, rs_seq_mixed, NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_seqaijrusparse_seqaij_C", NULL));
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATSEQAIJ));
  PetscFunctionReturn(0);
}

/* MatConvert between seqaij and seqaijrusparse: the same data, so a copy
   (MAT_INITIAL_MATRIX), values into an existing matrix (MAT_REUSE_MATRIX)
   or nothing (MAT_INPLACE_MATRIX), then the type switch. */
static PetscErrorCode RsConvertInPlaceOrCopy(Mat A, MatReuse reuse, Mat *newmat, PetscErrorCode (*make)(Mat))
{
  Mat B = A;

  PetscFunctionBegin;
  if (reuse == MAT_INITIAL_MATRIX) {
    PetscCall(MatDuplicate(A, MAT_COPY_VALUES, &B));
  } else if (reuse == MAT_REUSE_MATRIX) {
    PetscCall(MatCopy(A, *newmat, SAME_NONZERO_PATTERN));
    B = *newmat;
  }
  PetscCall((*make)(B));
  *newmat = B;
  PetscFunctionReturn(0);
}

/* The MatConvert functions between the plain and the rusparse types. */
#define RS_CONVERTER(name, make) \
  static PetscErrorCode name(Mat A, MatType type, MatReuse reuse, Mat *newmat) \
  { \
    PetscFunctionBegin; \
    (void)type; \
    PetscCall(RsConvertInPlaceOrCopy(A, reuse, newmat, make)); \
    PetscFunctionReturn(0); \
  }
RS_CONVERTER(RsConvertSeqToRusparse, RsMakeSeq)
RS_CONVERTER(RsConvertSeqToPlain, RsMakeSeqPlain)

/* A new matrix of a rusparse type: the plain type's, made ours, with the
   converter MatConvert(plain -> ours) looks for on a matrix of the target
   type (MatSetType on an assembled plain matrix converts), under the type's
   name and under the root name. */
static PetscErrorCode RsCreate(Mat B, MatType plain, PetscErrorCode (*make)(Mat), const char *const names[2], PetscErrorCode (*convert)(Mat, MatType, MatReuse, Mat *))
{
  PetscFunctionBegin;
  PetscCall(MatSetType(B, plain));
  PetscCall((*make)(B));
  for (int k = 0; k < 2; k++) PetscCall(PetscObjectComposeFunction((PetscObject)B, names[k], convert));
  PetscFunctionReturn(0);
}

static PetscErrorCode MatCreate_SeqAIJRusparse(Mat B)
{
  const char *const names[2] = {"MatConvert_seqaij_seqaijrusparse_C", "MatConvert_seqaij_aijrusparse_C"};

  PetscFunctionBegin;
  PetscCall(RsCreate(B, MATSEQAIJ, RsMakeSeq, names, RsConvertSeqToRusparse));
  PetscFunctionReturn(0);
}

/* ---- mpiaijrusparse ------------------------------------------------------------ */
/* The diagonal and off-diagonal blocks become seqaijrusparse (in place),
   so the "backend" algorithm's local products on them run through rusparse. */
static PetscErrorCode RsMakeBlocks(Mat A)
{
  Mat             blocks[2];
  const PetscInt *garray;
  PetscBool       plain;

  PetscFunctionBegin;
  PetscCall(MatMPIAIJGetSeqAIJ(A, &blocks[0], &blocks[1], &garray));
  for (int k = 0; k < 2; k++) {
    if (!blocks[k]) continue;
    PetscCall(PetscObjectTypeCompare((PetscObject)blocks[k], MATSEQAIJ, &plain));
    if (plain) PetscCall(RsMakeSeq(blocks[k]));
  }
  PetscFunctionReturn(0);
}

static PetscErrorCode RsMPIAIJSetPreallocation(Mat B, PetscInt d_nz, const PetscInt d_nnz[], PetscInt o_nz, const PetscInt o_nnz[])
{
  PetscFunctionBegin;
  PetscCall((*rs_mpiaij_preallocation)(B, d_nz, d_nnz, o_nz, o_nnz));
  PetscCall(RsMakeBlocks(B));
  PetscFunctionReturn(0);
}

/* The product set-up of mpiaijrusparse: AB, AtB and PtAP of two MPIAIJ
   matrices take the plug-in's MPI route (mpi_products.c: one merged local
   product per rank) unless the user chose a PETSc algorithm. Choosing
   "backend" keeps PETSc's route through the blocks, whose local products
   run through rusparse too. */
static PetscErrorCode RsMpiProductSetFromOptions(Mat C)
{
  RsProductInfo info;
  PetscBool     both_aij, chose = PETSC_FALSE, backend = PETSC_FALSE;
  char          alg[256] = "";
  MatType       a_type, b_type;

  PetscFunctionBegin;
  PetscCall(RsProductFactors(C, MATMPIAIJ, MATMPIAIJRUSPARSE, &info, &a_type, &b_type, &both_aij));
  if ((info.type == MATPRODUCT_AB || info.type == MATPRODUCT_AtB || info.type == MATPRODUCT_PtAP) && both_aij) {
    PetscCall(RsUserAlgorithm(C, &info, alg, sizeof(alg), &chose));
    if (!chose) {
      PetscCall(PetscInfo(C, "rusparse runs %s of %s and %s (one merged local product per rank)\n", MatProductTypes[info.type], a_type, b_type));
      PetscCall(RsMpiProductUseRoute(C));
      PetscFunctionReturn(0);
    }
    PetscCall(PetscStrcmp(alg, "backend", &backend));
  }
  if (backend) {
    PetscCall(RsMakeBlocks(info.A));
    PetscCall(RsMakeBlocks(info.B));
    PetscCall(MatProductSetAlgorithm(C, "backend"));
    PetscCall(PetscInfo(C, "rusparse: %s of %s and %s takes MPIAIJ's backend algorithm, as chosen (local products on the blocks through rusparse)\n", MatProductTypes[info.type], a_type, b_type));
  } else {
    PetscCall(PetscInfo(C, "rusparse does not run %s of %s and %s (%s): PETSc's MPIAIJ implementation does\n", MatProductTypes[info.type], a_type, b_type, chose ? alg : "not AB, AtB or PtAP of MPIAIJ matrices"));
  }
  PetscCall((*rs_mpiaij_product_setup)(C));
  PetscFunctionReturn(0);
}

static PetscErrorCode RsConvertMpiToPlain(Mat, MatType, MatReuse, Mat *);

static PetscErrorCode RsMakeMpi(Mat B)
{
  PetscFunctionBegin;
  PetscCall(RsSetProductSetup(B, RsMpiProductSetFromOptions, rs_mpi_mixed, RsMpiProductSetFromOptions));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatMPIAIJSetPreallocation_C", RsMPIAIJSetPreallocation));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_mpiaijrusparse_mpiaij_C", RsConvertMpiToPlain));
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATMPIAIJRUSPARSE));
  PetscCall(RsMakeBlocks(B));
  PetscFunctionReturn(0);
}

static PetscErrorCode RsMakeMpiPlain(Mat B)
{
  Mat             blocks[2];
  const PetscInt *garray;

  PetscFunctionBegin;
  PetscCall(RsSetProductSetup(B, rs_mpiaij_product_setup, rs_mpi_mixed, NULL));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatMPIAIJSetPreallocation_C", rs_mpiaij_preallocation));
  PetscCall(PetscObjectComposeFunction((PetscObject)B, "MatConvert_mpiaijrusparse_mpiaij_C", NULL));
  PetscCall(PetscObjectChangeTypeName((PetscObject)B, MATMPIAIJ));
  PetscCall(MatMPIAIJGetSeqAIJ(B, &blocks[0], &blocks[1], &garray));
  for (int k = 0; k < 2; k++)
    if (blocks[k]) PetscCall(RsMakeSeqPlain(blocks[k]));
  PetscFunctionReturn(0);
}

RS_CONVERTER(RsConvertMpiToRusparse, RsMakeMpi)
RS_CONVERTER(RsConvertMpiToPlain, RsMakeMpiPlain)

static PetscErrorCode MatCreate_MPIAIJRusparse(Mat B)
{
  const char *const names[2] = {"MatConvert_mpiaij_mpiaijrusparse_C", "MatConvert_mpiaij_aijrusparse_C"};

  PetscFunctionBegin;
  PetscCall(RsCreate(B, MATMPIAIJ, RsMakeMpi, names, RsConvertMpiToRusparse));
  PetscFunctionReturn(0);
}

/* ---- registration ------------------------------------------------------------ */
static PetscErrorCode RsSaveOriginals(void)
{
  Mat A;

  PetscFunctionBegin;
  PetscCall(MatCreate(PETSC_COMM_SELF, &A));
  PetscCall(MatSetType(A, MATSEQAIJ));
  PetscCall(RsOpsGetProductSetFromOptions(A, &rs_seqaij_product_setup));
  PetscCall(MatDestroy(&A));
  PetscCall(MatCreate(PETSC_COMM_SELF, &A));
  PetscCall(MatSetType(A, MATMPIAIJ));
  PetscCall(RsOpsGetProductSetFromOptions(A, &rs_mpiaij_product_setup));
  PetscCall(PetscObjectQueryFunction((PetscObject)A, "MatMPIAIJSetPreallocation_C", &rs_mpiaij_preallocation));
  PetscCall(MatDestroy(&A));
  PetscCheck(rs_seqaij_product_setup && rs_mpiaij_product_setup && rs_mpiaij_preallocation, PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: this PETSc's SeqAIJ/MPIAIJ lack a function the plug-in overrides");
  PetscFunctionReturn(0);
}

/* Called by PETSc when it loads librusparse_petsc.so (-dll_append); the
   name is derived from the file name. */
PETSC_EXTERN PetscErrorCode PetscDLLibraryRegister_rusparse_petsc(void)
{
  static PetscBool registered = PETSC_FALSE;

  PetscFunctionBegin;
  if (registered) PetscFunctionReturn(0);
  registered = PETSC_TRUE;
  PetscCall(RsSaveOriginals());
  PetscCall(RsProductsInitialize());
  PetscCall(MatRegister(MATSEQAIJRUSPARSE, MatCreate_SeqAIJRusparse));
  PetscCall(MatRegister(MATMPIAIJRUSPARSE, MatCreate_MPIAIJRusparse));
  PetscCall(MatRegisterRootName(MATAIJRUSPARSE, MATSEQAIJRUSPARSE, MATMPIAIJRUSPARSE));
  PetscFunctionReturn(0);
}
