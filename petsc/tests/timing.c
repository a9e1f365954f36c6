static const char help[] = "Times MatMatMult(A, P) and MatPtAP(A, P) with aij and with aijrusparse, in the same run.\n"
                           "A is the 7-point (or 27-point) 3-D Poisson matrix on an n^3 grid, P the first prolongator GAMG builds for it\n"
                           "(GAMG's options processed, as in PETSc's tutorials; -prol_pc_gamg_... change them).\n"
                           "  -n <64>       grid points per direction\n"
                           "  -stencil <7>  7 or 27 points\n"
                           "  -rusparse_only  time aijrusparse alone (for profiles; -log_view shows each product and type as a stage)\n"
                           "  -repeat <5>   timed repetitions (the median is printed)\n"
                           "  -all_times    also print every repetition's time\n"
                           "  -products <both>  ap, ptap or both (profile one product alone)\n"
                           "  -dump <prefix>  also write A and P to <prefix>A.mtx and <prefix>P.mtx (Matrix Market), for\n"
                           "                  profiling the products outside PETSc (phases_vs_gustavson)\n"
                           "Load the plug-in with -dll_append /path/librusparse_petsc.so.\n\n";

/*
 * For each type (aij and aijrusparse, on the same matrices converted; the
 * types take turns, a repetition each, which goes first alternating):
 *   initial  MatMatMult / MatPtAP with MAT_INITIAL_MATRIX (symbolic + numeric)
 *   reuse    the same with MAT_REUSE_MATRIX (numeric only), after new values of
 *            A (MatScale(A, -1), not timed): GAMG's case when it keeps its
 *            prolongator for a new operator (P's values unchanged); the
 *            first reuse of each C, and the third (a program that
 *            recomputes its coarse operators every step, as time
 *            stepping with -pc_gamg_reuse_interpolation does)
 * The median over -repeat runs of the slowest rank's time (MPI_MAX) is
 * printed, with the ratio aij / aijrusparse (> 1: rusparse is faster).
 */
#include <petscksp.h>

/* The 7-point (stencil 7) or 27-point (stencil 27) Laplacian on an n^3 grid. */
static PetscErrorCode Poisson(PetscInt n, PetscInt stencil, Mat *A)
{
  PetscInt start, end;

  PetscFunctionBegin;
  PetscCheck(stencil == 7 || stencil == 27, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-stencil 7 or 27");
  PetscCall(MatCreate(PETSC_COMM_WORLD, A));
  PetscCall(MatSetSizes(*A, PETSC_DECIDE, PETSC_DECIDE, n * n * n, n * n * n));
  PetscCall(MatSetType(*A, MATAIJ));
  PetscCall(MatSeqAIJSetPreallocation(*A, stencil, NULL));
  PetscCall(MatMPIAIJSetPreallocation(*A, stencil, NULL, stencil, NULL));
  PetscCall(MatGetOwnershipRange(*A, &start, &end));
  for (PetscInt row = start; row < end; row++) {
    PetscInt    x = row % n, y = (row / n) % n, z = row / (n * n), cols[27], k = 0;
    PetscScalar vals[27];
    for (PetscInt dz = -1; dz <= 1; dz++)
      for (PetscInt dy = -1; dy <= 1; dy++)
        for (PetscInt dx = -1; dx <= 1; dx++) {
          PetscInt far = PetscAbsInt(dx) + PetscAbsInt(dy) + PetscAbsInt(dz);
          if (stencil == 7 && far > 1) continue;
          if (x + dx < 0 || x + dx >= n || y + dy < 0 || y + dy >= n || z + dz < 0 || z + dz >= n) continue;
          cols[k]   = row + dx + n * (dy + n * dz);
          vals[k++] = far == 0 ? (PetscScalar)(stencil - 1) : -1.0;
        }
    PetscCall(MatSetValues(*A, 1, &row, k, cols, vals, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(*A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(*A, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

/* The finest prolongator of a GAMG hierarchy for A (smoothed aggregation). */
static PetscErrorCode GamgProlongator(Mat A, Mat *P)
{
  KSP      ksp;
  PC       pc;
  PetscInt levels;
  Mat      interp;

  PetscFunctionBegin;
  PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
  PetscCall(KSPSetOperators(ksp, A, A));
  PetscCall(KSPGetPC(ksp, &pc));
  PetscCall(PCSetType(pc, PCGAMG));
  /* GAMG's options processed, as every PETSc program's KSPSetFromOptions
     does (ex45's hierarchy: the graph squared on the first level, 64^3 ->
     ~28,000 coarse points, not ~82,000 without this call); prefixed, so
     -prol_pc_gamg_... options change only this prolongator. */
  PetscCall(KSPSetOptionsPrefix(ksp, "prol_"));
  PetscCall(KSPSetFromOptions(ksp));
  PetscCall(PCSetUp(pc));
  PetscCall(PCMGGetLevels(pc, &levels));
  PetscCheck(levels >= 2, PETSC_COMM_WORLD, PETSC_ERR_ARG_SIZ, "GAMG made %" PetscInt_FMT " level(s); use a larger -n", levels);
  PetscCall(PCMGGetInterpolation(pc, levels - 1, &interp));
  PetscCall(MatDuplicate(interp, MAT_COPY_VALUES, P));
  PetscCall(KSPDestroy(&ksp));
  PetscFunctionReturn(0);
}

static int CompareDoubles(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Writes M to <prefix><name> in Matrix Market format. */
static PetscErrorCode Dump(Mat M, const char *prefix, const char *name)
{
  char        path[PETSC_MAX_PATH_LEN];
  PetscViewer v;

  PetscFunctionBegin;
  PetscCall(PetscSNPrintf(path, sizeof(path), "%s%s", prefix, name));
  PetscCall(PetscViewerASCIIOpen(PetscObjectComm((PetscObject)M), path, &v));
  PetscCall(PetscViewerPushFormat(v, PETSC_VIEWER_ASCII_MATRIXMARKET));
  PetscCall(MatView(M, v));
  PetscCall(PetscViewerPopFormat(v));
  PetscCall(PetscViewerDestroy(&v));
  PetscFunctionReturn(0);
}

/* The phases timed: initial, then three reuses of the same C. */
#define PHASES 4

/* One repetition of the phases with one type: each phase's slowest rank's
   seconds into t[phase][r]. */
static PetscErrorCode TimeOnce(Mat A, Mat P, PetscBool ptap, PetscInt r, PetscLogStage stage, double t[PHASES][64])
{
  Mat C;

  PetscFunctionBegin;
  PetscCall(PetscLogStagePush(stage));
  for (int phase = 0; phase < PHASES; phase++) {
    MatReuse how = phase == 0 ? MAT_INITIAL_MATRIX : MAT_REUSE_MATRIX;
    double   local, slowest;
    if (how == MAT_REUSE_MATRIX) PetscCall(MatScale(A, -1.0));
    PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
    local = MPI_Wtime();
    if (ptap) PetscCall(MatPtAP(A, P, how, PETSC_DEFAULT, &C));
    else PetscCall(MatMatMult(A, P, how, PETSC_DEFAULT, &C));
    local = MPI_Wtime() - local;
    PetscCallMPI(MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
    t[phase][r] = slowest;
  }
  PetscCall(MatDestroy(&C));
  PetscCall(PetscLogStagePop());
  PetscFunctionReturn(0);
}

/* Median over `repeat` repetitions of the slowest rank's seconds, for aij
   (A, P; skipped when A is NULL) into plain and aijrusparse (Ars, Prs) into
   rs. The two types take turns, one repetition each, and which goes first
   alternates: a machine that slows down or speeds up during the run (a
   shared VM) moves both alike, where timing every repetition of one type
   and then the other's gave one type the quieter minutes. */
static PetscErrorCode Time(Mat A, Mat P, Mat Ars, Mat Prs, PetscBool ptap, PetscInt repeat, PetscBool all_times, const PetscLogStage stage[2], double plain[PHASES], double rs[PHASES])
{
  double t[2][PHASES][64];

  PetscFunctionBegin;
  PetscCheck(repeat >= 1 && repeat <= 64, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-repeat 1..64");
  for (PetscInt r = 0; r < repeat; r++) {
    for (int turn = 0; turn < 2; turn++) {
      int type = (int)((r + turn) % 2);
      if (type == 0 && A) PetscCall(TimeOnce(A, P, ptap, r, stage[0], t[0]));
      if (type == 1) PetscCall(TimeOnce(Ars, Prs, ptap, r, stage[1], t[1]));
    }
  }
  /* -all_times: every repetition's time, in the order they ran, to tell a
     type that is slow in some repetitions from one slow in all. */
  for (int phase = 0; all_times && phase < PHASES; phase++) {
    for (int type = A ? 0 : 1; type < 2; type++) {
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%s %s phase %d:", ptap ? "PtAP" : "AP", type ? "aijrusparse" : "aij", phase));
      for (PetscInt r = 0; r < repeat; r++) PetscCall(PetscPrintf(PETSC_COMM_WORLD, " %.4f", t[type][phase][r]));
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "\n"));
    }
  }
  for (int phase = 0; phase < PHASES; phase++) {
    /* aij's times exist only when it was timed. */
    for (int type = A ? 0 : 1; type < 2; type++) qsort(t[type][phase], (size_t)repeat, sizeof(double), CompareDoubles);
    plain[phase] = A ? t[0][phase][repeat / 2] : 0;
    rs[phase]    = t[1][phase][repeat / 2];
  }
  PetscFunctionReturn(0);
}

int main(int argc, char **argv)
{
  PetscInt    n = 64, repeat = 5, stencil = 7, nnz[3];
  PetscBool   rusparse_only = PETSC_FALSE, all_times = PETSC_FALSE;
  char        products[8] = "both", dump[PETSC_MAX_PATH_LEN] = "";
  Mat         A, P, Ars, Prs, C;
  PetscMPIInt size;
  MatInfo     info;
  const char *names[2] = {"MatMatMult(A,P)", "MatPtAP(A,P)"};

  PetscCall(PetscInitialize(&argc, &argv, NULL, help));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-n", &n, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-repeat", &repeat, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-stencil", &stencil, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-rusparse_only", &rusparse_only, NULL));
  PetscCall(PetscOptionsGetBool(NULL, NULL, "-all_times", &all_times, NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-products", products, sizeof(products), NULL));
  PetscCall(PetscOptionsGetString(NULL, NULL, "-dump", dump, sizeof(dump), NULL));
  PetscCheck(!strcmp(products, "ap") || !strcmp(products, "ptap") || !strcmp(products, "both"), PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE, "-products ap, ptap or both");
  PetscCall(Poisson(n, stencil, &A));
  PetscCall(GamgProlongator(A, &P));
  if (dump[0]) {
    PetscCall(Dump(A, dump, "A.mtx"));
    PetscCall(Dump(P, dump, "P.mtx"));
  }
  PetscCall(MatConvert(A, "aijrusparse", MAT_INITIAL_MATRIX, &Ars));
  PetscCall(MatConvert(P, "aijrusparse", MAT_INITIAL_MATRIX, &Prs));
  PetscCall(MatGetInfo(A, MAT_GLOBAL_SUM, &info));
  nnz[0] = (PetscInt)info.nz_used;
  PetscCall(MatGetInfo(P, MAT_GLOBAL_SUM, &info));
  nnz[1] = (PetscInt)info.nz_used;
  PetscCall(MatPtAP(A, P, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &C));
  PetscCall(MatGetInfo(C, MAT_GLOBAL_SUM, &info));
  nnz[2] = (PetscInt)info.nz_used;
  PetscCall(MatDestroy(&C));
  {
    PetscInt m, k;
    PetscCall(MatGetSize(P, &m, &k));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "%d rank(s); A: %" PetscInt_FMT "^3 %" PetscInt_FMT "-point Poisson, %" PetscInt_FMT " rows, %" PetscInt_FMT " nonzeros; P: %" PetscInt_FMT " x %" PetscInt_FMT ", %" PetscInt_FMT " nonzeros; PtAP: %" PetscInt_FMT " nonzeros; median of %" PetscInt_FMT "\n", size, n, stencil, m, nnz[0], m, k, nnz[1], nnz[2], repeat));
  }
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "| product | phase | aij (s) | aijrusparse (s) | aij / aijrusparse |\n|---|---|---:|---:|---:|\n"));
  for (int ptap = 0; ptap < 2; ptap++) {
    double plain[PHASES] = {0}, rs[PHASES] = {0};
    const char *phases[PHASES] = {"initial (symbolic + numeric)", "reuse (numeric)", "second reuse", "third reuse"};
    PetscLogStage stage[2];
    char          name[64];

    if (strcmp(products, "both") && strcmp(products, ptap ? "ptap" : "ap")) continue;
    PetscCall(PetscSNPrintf(name, sizeof(name), "%s aij", ptap ? "PtAP" : "AP"));
    PetscCall(PetscLogStageRegister(name, &stage[0]));
    PetscCall(PetscSNPrintf(name, sizeof(name), "%s aijrusparse", ptap ? "PtAP" : "AP"));
    PetscCall(PetscLogStageRegister(name, &stage[1]));
    PetscCall(Time(rusparse_only ? NULL : A, P, Ars, Prs, (PetscBool)ptap, repeat, all_times, stage, plain, rs));
    for (int phase = 0; phase < PHASES; phase++) {
      if (phase == 2) continue; /* the third reuse stands for the later ones */
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "| %s | %s | %.4f | %.4f | %.2f |\n", names[ptap], phases[phase], plain[phase], rs[phase], plain[phase] / rs[phase]));
    }
  }
  PetscCall(MatDestroy(&A));
  PetscCall(MatDestroy(&P));
  PetscCall(MatDestroy(&Ars));
  PetscCall(MatDestroy(&Prs));
  PetscCall(PetscFinalize());
  return 0;
}
