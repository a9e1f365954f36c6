/*
 * MPI AB, AtB and PtAP of MPIAIJ matrices through rusparse: one merged local
 * product per rank (PtAP: A*P and then P^T*(A*P), as on one rank), and C's
 * blocks built straight from its CSR.
 *
 * Operands.  An MPIAIJ matrix keeps a rank's rows in two SeqAIJ blocks: the
 * diagonal block (the rank's own columns, numbered from 0) and the
 * off-diagonal block (the other ranks' columns, numbered through the
 * increasing array garray). Both blocks' rows are merged into one CSR with
 * compact columns: the rank's own columns first, [0, nown), then the other
 * ranks' columns in increasing global order, nown + k (RsCols). A row of the
 * diagonal block followed by the same row of the off-diagonal block is then
 * sorted, and so is every row rusparse computes.
 *
 *   AB    Z = A_loc * B_ext. B_ext is B's own rows and, gathered from their
 *         owners, the rows of B that A's off-diagonal columns name (PETSc's
 *         P_oth). Z's rows are C's rows.
 *   AtB   Z = A_loc^T * B_loc. Z's first rows are C's own rows; the others
 *         (A's off-diagonal columns) are other ranks' rows of C, sent to
 *         their owners, who add them to their own.
 *   PtAP  Z1 = A_loc * P_ext (as AB), then Z = P_loc^T * Z1 (as AtB).
 *
 * C.  C is made once, in the symbolic phase, from Z's own rows and the rows
 * received. Row r of C's values is [row r of C's diagonal block | row r of
 * its off-diagonal block], which is row r of Z when nothing was received
 * for it. The numeric phase (also every MAT_REUSE_MATRIX):
 *   1. refreshes the merged operands' values: a copy of the blocks' values,
 *      and the gathered rows' values from their owners (one PetscSF
 *      broadcast; the structure was exchanged once). In AB and PtAP, A's
 *      rows are not copied: rusparse reads A's values from its two blocks
 *      (rusparseCsrSetSplitValues on the first operand; CPU handles);
 *   2. runs rusparse's numeric phase on the saved plan;
 *   3. sends the other ranks' rows of Z (one PetscSF reduction) and writes
 *      C's blocks' values in place: copied where a row of C is a row of Z,
 *      added at positions found in the symbolic phase where rows arrived.
 *      AB sends and receives nothing: there rusparse writes Z's rows
 *      straight into C's two blocks (rusparseCsrSetSplitValues), and Z
 *      keeps no values of its own.
 * No COO assembly and no reallocation.
 *
 * A factor whose nonzero pattern changed since the symbolic phase is refused
 * on every rank (the ranks agree through one MPI_Allreduce per numeric
 * phase); it is never multiplied on a stale structure.
 *
 * Only PETSc's public API is used here.
 */
#include "rusparse_petsc.h"

#include <petscsf.h>
#include <string.h>

/* ---- compact columns ---------------------------------------------------------- */
typedef struct {
  PetscInt  cstart, nown, N; /* own global columns [cstart, cstart + nown) of N -> [0, nown) */
  PetscInt  nghost;
  PetscInt *ghost; /* other ranks' global columns, increasing -> nown + k */
} RsCols;

static PetscInt RsColsCount(const RsCols *c)
{
  return c->nown + c->nghost;
}

static PetscInt RsColsGlobal(const RsCols *c, PetscInt k)
{
  return k < c->nown ? c->cstart + k : c->ghost[k - c->nown];
}

static PetscBool RsColsOwns(const RsCols *c, PetscInt g)
{
  return (PetscBool)(g >= c->cstart && g < c->cstart + c->nown);
}

static PetscErrorCode RsColsCompact(const RsCols *c, PetscInt g, PetscInt *k)
{
  PetscInt at;

  PetscFunctionBegin;
  if (RsColsOwns(c, g)) {
    *k = g - c->cstart;
    PetscFunctionReturn(0);
  }
  PetscCall(PetscFindInt(g, c->nghost, c->ghost, &at));
  PetscCheck(at >= 0, PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: global column %" PetscInt_FMT " is not among this rank's columns", g);
  *k = c->nown + at;
  PetscFunctionReturn(0);
}

/* A sort key that puts own columns first, then the others, each increasing. */
static PetscInt RsColsKey(const RsCols *c, PetscInt g)
{
  return RsColsOwns(c, g) ? g - c->N : g;
}

static PetscInt RsColsUnkey(const RsCols *c, PetscInt key)
{
  return key < 0 ? key + c->N : key;
}

/* ---- an MPIAIJ matrix's blocks ---------------------------------------------------- */
typedef struct {
  PetscInt        m, ngarray; /* local rows; the off-diagonal block's columns */
  RsCsr           d, o;       /* the diagonal and off-diagonal blocks */
  const PetscInt *garray;
} RsBlocks;

static PetscErrorCode RsBlocksOf(Mat M, RsBlocks *b)
{
  Mat d, o;

  PetscFunctionBegin;
  PetscCall(MatMPIAIJGetSeqAIJ(M, &d, &o, &b->garray));
  PetscCheck(d && o, PetscObjectComm((PetscObject)M), PETSC_ERR_ARG_WRONGSTATE, "rusparse: the MPIAIJ matrix has no blocks (not assembled?)");
  PetscCall(RsCsrOfMat(d, &b->d));
  PetscCall(RsCsrOfMat(o, &b->o));
  b->m       = b->d.rows;
  b->ngarray = b->o.cols;
  PetscFunctionReturn(0);
}

/* ---- copies between merged rows and an MPIAIJ matrix's two blocks ----------------- */
/* The value copies between a merged CSR array, whose row r is [block 0's row
   r | block 1's row r], and the two blocks' arrays, as runs: a run copies
   `len` values between offset `boff` of block `block` and offset `moff` of
   the merged array. Consecutive rows coalesce into one run where both sides
   are contiguous: where block 1's rows are empty, as in most rows when the
   other ranks' columns are few, block 0's rows follow each other on both
   sides. So a refresh costs one memcpy a run instead of two a row. */
typedef struct {
  PetscInt  n;
  PetscInt *run; /* 4 n: block, boff, moff, len */
} RsRuns;

/* The runs of rows [0, m): block k's row r at bi[k][r], of length
   bi[k][r + 1] - bi[k][r]; the merged row at mi[r]. Rows with
   skip[r + 1] > skip[r] are left out (skip NULL: none). */
static PetscErrorCode RsRunsBuild(PetscInt m, const PetscInt *b0i, const PetscInt *b1i, const PetscInt *mi, const PetscInt *skip, RsRuns *runs)
{
  PetscInt *all, n = 0;

  PetscFunctionBegin;
  PetscCall(PetscMalloc1(4 * (2 * m + 1), &all));
  for (PetscInt r = 0; r < m; r++) {
    const PetscInt *bi[2] = {b0i, b1i};
    PetscInt        moff  = mi[r];
    if (skip && skip[r + 1] > skip[r]) continue;
    for (PetscInt k = 0; k < 2; k++) {
      PetscInt boff = bi[k][r], len = bi[k][r + 1] - boff, *last = all + 4 * (n - 1);
      if (!len) continue;
      if (n && last[0] == k && last[1] + last[3] == boff && last[2] + last[3] == moff) last[3] += len;
      else {
        PetscInt *run = all + 4 * n++;
        run[0] = k;
        run[1] = boff;
        run[2] = moff;
        run[3] = len;
      }
      moff += len;
    }
  }
  runs->n = n;
  PetscCall(PetscMalloc1(4 * n, &runs->run));
  PetscCall(PetscArraycpy(runs->run, all, 4 * n));
  PetscCall(PetscFree(all));
  PetscFunctionReturn(0);
}

/* The merged values from the blocks' values b0, b1. */
static PetscErrorCode RsRunsMerge(const RsRuns *runs, const PetscScalar *b0, const PetscScalar *b1, PetscScalar *merged)
{
  PetscFunctionBegin;
  for (PetscInt s = 0; s < runs->n; s++) {
    const PetscInt *run = runs->run + 4 * s;
    PetscCall(PetscArraycpy(merged + run[2], (run[0] ? b1 : b0) + run[1], run[3]));
  }
  PetscFunctionReturn(0);
}

/* The blocks' values b0, b1 from the merged values. */
static PetscErrorCode RsRunsSplit(const RsRuns *runs, const PetscScalar *merged, PetscScalar *b0, PetscScalar *b1)
{
  PetscFunctionBegin;
  for (PetscInt s = 0; s < runs->n; s++) {
    const PetscInt *run = runs->run + 4 * s;
    PetscCall(PetscArraycpy((run[0] ? b1 : b0) + run[1], merged + run[2], run[3]));
  }
  PetscFunctionReturn(0);
}

/* ---- merged rows: a rank's own rows, and rows gathered from other ranks ------------ */
/* What a matrix's values were when its own rows' values were copied: the
   states of the matrix and of its two blocks (values written through a
   block's arrays raise the block's state alone), and the blocks' ids (a
   block made anew starts its state afresh). Equal states mean equal values,
   so the copy is skipped: in the numeric phase right after the symbolic
   phase, and in MAT_REUSE_MATRIX for a factor that did not change (GAMG's
   P when only A's values are new). */
typedef struct {
  PetscInt64       id[2];
  PetscObjectState state[3];
} RsValues;

static PetscErrorCode RsValuesOf(Mat M, RsValues *v)
{
  Mat d, o;

  PetscFunctionBegin;
  PetscCall(MatMPIAIJGetSeqAIJ(M, &d, &o, NULL));
  PetscCall(RsObjectStateGet((PetscObject)M, &v->state[0]));
  PetscCall(RsObjectStateGet((PetscObject)d, &v->state[1]));
  PetscCall(RsObjectStateGet((PetscObject)o, &v->state[2]));
  PetscCall(PetscObjectGetId((PetscObject)d, &v->id[0]));
  PetscCall(PetscObjectGetId((PetscObject)o, &v->id[1]));
  PetscFunctionReturn(0);
}

typedef struct {
  PetscInt     own_rows, rows; /* own rows, then the gathered ones */
  PetscInt     d_nnz, o_nnz, own_nnz, nnz;
  PetscInt    *i, *j; /* compact columns (cols) */
  PetscScalar *a;     /* NULL: rusparse reads the own rows' values from the blocks (RsRowsCreate's in_blocks) */
  RsCols       cols;
  PetscInt     ngarray;
  PetscInt    *garray;         /* the off-diagonal block's garray at the symbolic phase */
  PetscInt    *garray_compact; /* garray[k]'s compact column */
  PetscSF      gathered;       /* gathered entries <- their owners' own entries; NULL: none */
  RsRuns       own;            /* the own rows' values from the blocks' */
  PetscInt64       id;         /* the matrix whose pattern the rows were last checked against, */
  PetscObjectState nonzerostate; /* and its nonzero state then */
  RsValues         values;       /* the own rows' values were copied from these */
} RsRows;

static PetscErrorCode RsRowsDestroy(RsRows *r)
{
  PetscFunctionBegin;
  PetscCall(PetscFree(r->i));
  PetscCall(PetscFree(r->j));
  PetscCall(PetscFree(r->a));
  PetscCall(PetscFree(r->cols.ghost));
  PetscCall(PetscFree(r->garray));
  PetscCall(PetscFree(r->garray_compact));
  PetscCall(PetscSFDestroy(&r->gathered));
  PetscCall(PetscFree(r->own.run));
  PetscFunctionReturn(0);
}

/* The rows' values from M's blocks; *changed when M's pattern is not the one
   the rows were made from (then nothing is copied); *copied (when given)
   when the values were copied (they had changed since the last copy). */
static PetscErrorCode RsRowsRefreshOwn(Mat M, RsRows *r, PetscBool *changed, PetscBool *copied)
{
  RsBlocks         b;
  PetscInt64       id;
  PetscObjectState state;
  PetscBool        same;
  RsValues         now;

  PetscFunctionBegin;
  PetscCall(RsBlocksOf(M, &b));
  /* The same matrix with no new nonzero locations since its pattern was
     last checked: only the values are copied. Otherwise every row's
     columns are checked first. */
  PetscCall(PetscObjectGetId((PetscObject)M, &id));
  PetscCall(MatGetNonzeroState(M, &state));
  same = (PetscBool)(id == r->id && state == r->nonzerostate);
  if (b.m != r->own_rows || b.d.i[b.m] != r->d_nnz || b.o.i[b.m] != r->o_nnz || b.ngarray != r->ngarray || (b.ngarray && memcmp(b.garray, r->garray, (size_t)b.ngarray * sizeof(PetscInt)))) {
    *changed = PETSC_TRUE;
    PetscFunctionReturn(0);
  }
  for (PetscInt row = 0; row < b.m && !same; row++) {
    PetscInt        p = r->i[row], dl = b.d.i[row + 1] - b.d.i[row], ol = b.o.i[row + 1] - b.o.i[row];
    const PetscInt *dj = b.d.j + b.d.i[row], *oj = b.o.j + b.o.i[row], *j = r->j + p;
    PetscBool       bad = (PetscBool)(dl + ol != r->i[row + 1] - p);

    for (PetscInt k = 0; k < dl && !bad; k++) bad = (PetscBool)(dj[k] != j[k]);
    for (PetscInt k = 0; k < ol && !bad; k++) bad = (PetscBool)(r->garray_compact[oj[k]] != j[dl + k]);
    if (bad) {
      *changed = PETSC_TRUE;
      PetscFunctionReturn(0);
    }
  }
  r->id           = id;
  r->nonzerostate = state;
  /* Each row's columns are the merged row's, so the blocks' rows are where
     the runs were made for (own columns below nown, the others above, split
     each row alike): copy by runs, unless the values are those copied last. */
  if (!r->a) PetscFunctionReturn(0); /* read from the blocks themselves */
  PetscCall(RsValuesOf(M, &now));
  if (!memcmp(&now, &r->values, sizeof(now))) PetscFunctionReturn(0);
  PetscCall(RsRunsMerge(&r->own, b.d.a, b.o.a, r->a));
  r->values = now;
  if (copied) *copied = PETSC_TRUE;
  PetscFunctionReturn(0);
}

/* The gathered rows' values from their owners' rows (collective). */
static PetscErrorCode RsRowsRefreshGathered(RsRows *r)
{
  PetscFunctionBegin;
  if (!r->gathered) PetscFunctionReturn(0);
  PetscCall(PetscSFBcastBegin(r->gathered, MPIU_SCALAR, r->a, r->a + r->own_nnz, MPI_REPLACE));
  PetscCall(PetscSFBcastEnd(r->gathered, MPIU_SCALAR, r->a, r->a + r->own_nnz, MPI_REPLACE));
  PetscFunctionReturn(0);
}

/* Every own row's columns from M's blocks: the diagonal block's shifted by
   `dshift`, the off-diagonal block's through `omap` (garray: global
   columns; garray_compact: compact ones). */
static void RsRowsOwnColumns(RsRows *r, const RsBlocks *b, PetscInt dshift, const PetscInt *omap)
{
  for (PetscInt row = 0; row < b->m; row++) {
    PetscInt  d0 = b->d.i[row], dl = b->d.i[row + 1] - d0, o0 = b->o.i[row], ol = b->o.i[row + 1] - o0;
    PetscInt *j = r->j + r->i[row];
    for (PetscInt t = 0; t < dl; t++) j[t] = dshift + b->d.j[d0 + t];
    for (PetscInt t = 0; t < ol; t++) j[dl + t] = omap[b->o.j[o0 + t]];
  }
}

/* M's own rows merged, with the global rows gather[0..ngather) of M
   appended from their owners when `gather` is given (collective then: every
   rank passes a gather array, possibly empty). `in_blocks` (no gathering):
   the merged rows keep no values, rusparse reads them from M's blocks
   (RsStageNumericSplit). */
static PetscErrorCode RsRowsCreate(Mat M, PetscInt ngather, const PetscInt gather[], PetscBool gathering, PetscBool in_blocks, RsRows *r)
{
  MPI_Comm  comm;
  RsBlocks  b;
  PetscInt  cend, ntmp = 0, *tmp;
  RsCols   *c = &r->cols;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetComm((PetscObject)M, &comm));
  PetscCall(RsBlocksOf(M, &b));
  for (PetscInt k = 1; k < b.ngarray; k++) PetscCheck(b.garray[k - 1] < b.garray[k], PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: the off-diagonal block's columns (garray) are not increasing");
  r->own_rows = b.m;
  r->rows     = b.m + ngather;
  r->d_nnz    = b.d.i[b.m];
  r->o_nnz    = b.o.i[b.m];
  r->own_nnz  = r->d_nnz + r->o_nnz;
  r->nnz      = r->own_nnz;
  r->ngarray  = b.ngarray;
  PetscCall(PetscObjectGetId((PetscObject)M, &r->id));
  PetscCall(MatGetNonzeroState(M, &r->nonzerostate));
  PetscCall(MatGetOwnershipRangeColumn(M, &c->cstart, &cend));
  PetscCall(MatGetSize(M, NULL, &c->N));
  c->nown = cend - c->cstart;
  PetscCall(PetscMalloc1(b.ngarray, &r->garray));
  PetscCall(PetscArraycpy(r->garray, b.garray, b.ngarray));

  PetscCall(PetscMalloc1(r->rows + 1, &r->i));
  r->i[0] = 0;
  for (PetscInt row = 0; row < b.m; row++) r->i[row + 1] = r->i[row] + (b.d.i[row + 1] - b.d.i[row]) + (b.o.i[row + 1] - b.o.i[row]);

  /* The gathered rows' lengths and starts, from their owners. */
  if (gathering) {
    PetscSF            rowsf;
    PetscLayout        rmap;
    PetscInt          *root, *leaf, e = 0;
    const PetscSFNode *owner;
    PetscSFNode       *remote;

    PetscCall(MatGetLayouts(M, &rmap, NULL));
    PetscCall(PetscSFCreate(comm, &rowsf));
    PetscCall(PetscSFSetGraphLayout(rowsf, rmap, ngather, NULL, PETSC_OWN_POINTER, gather));
    PetscCall(PetscMalloc2(2 * b.m, &root, 2 * ngather, &leaf));
    for (PetscInt row = 0; row < b.m; row++) {
      root[2 * row]     = r->i[row];
      root[2 * row + 1] = r->i[row + 1] - r->i[row];
    }
    PetscCall(PetscSFBcastBegin(rowsf, MPIU_2INT, root, leaf, MPI_REPLACE));
    PetscCall(PetscSFBcastEnd(rowsf, MPIU_2INT, root, leaf, MPI_REPLACE));
    for (PetscInt k = 0; k < ngather; k++) r->i[b.m + k + 1] = r->i[b.m + k] + leaf[2 * k + 1];
    r->nnz = r->i[r->rows];
    PetscCall(PetscSFGetGraph(rowsf, NULL, NULL, NULL, &owner));
    PetscCall(PetscMalloc1(r->nnz - r->own_nnz, &remote));
    for (PetscInt k = 0; k < ngather; k++)
      for (PetscInt t = 0; t < leaf[2 * k + 1]; t++, e++) {
        remote[e].rank  = owner[k].rank;
        remote[e].index = leaf[2 * k] + t;
      }
    PetscCall(PetscSFCreate(comm, &r->gathered));
    PetscCall(PetscSFSetGraph(r->gathered, r->own_nnz, r->nnz - r->own_nnz, NULL, PETSC_OWN_POINTER, remote, PETSC_OWN_POINTER));
    PetscCall(PetscSFSetUp(r->gathered));
    PetscCall(PetscFree2(root, leaf));
    PetscCall(PetscSFDestroy(&rowsf));
  }

  /* Own rows' values; their global columns only when other ranks gather
     them (the roots of the broadcast), then the gathered rows' columns and
     values. */
  PetscCheck(!(in_blocks && gathering), PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: gathered rows need merged values");
  PetscCall(PetscMalloc1(r->nnz, &r->j));
  if (!in_blocks) {
    PetscCall(PetscMalloc1(r->nnz, &r->a));
    PetscCall(RsRunsBuild(b.m, b.d.i, b.o.i, r->i, NULL, &r->own));
    PetscCall(RsRunsMerge(&r->own, b.d.a, b.o.a, r->a));
    PetscCall(RsValuesOf(M, &r->values));
  }
  if (gathering) RsRowsOwnColumns(r, &b, c->cstart, b.garray);
  if (r->gathered) {
    PetscCall(PetscSFBcastBegin(r->gathered, MPIU_INT, r->j, r->j + r->own_nnz, MPI_REPLACE));
    PetscCall(PetscSFBcastEnd(r->gathered, MPIU_INT, r->j, r->j + r->own_nnz, MPI_REPLACE));
    PetscCall(RsRowsRefreshGathered(r));
  }

  /* The other ranks' columns: garray's and the gathered rows'. */
  PetscCall(PetscMalloc1(b.ngarray + r->nnz - r->own_nnz, &tmp));
  for (PetscInt k = 0; k < b.ngarray; k++) tmp[ntmp++] = b.garray[k];
  for (PetscInt e = r->own_nnz; e < r->nnz; e++)
    if (!RsColsOwns(c, r->j[e])) tmp[ntmp++] = r->j[e];
  PetscCall(PetscSortRemoveDupsInt(&ntmp, tmp));
  c->nghost = ntmp;
  c->ghost  = tmp;
  /* garray's compact columns: both lists increase, so one merge. */
  PetscCall(PetscMalloc1(b.ngarray, &r->garray_compact));
  for (PetscInt k = 0, g = 0; k < b.ngarray; k++) {
    while (g < c->nghost && c->ghost[g] < b.garray[k]) g++;
    PetscCheck(g < c->nghost && c->ghost[g] == b.garray[k], PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: garray's column %" PetscInt_FMT " is not among the other ranks' columns", b.garray[k]);
    r->garray_compact[k] = c->nown + g;
  }
  /* Compact columns: an own row's straight from its blocks (the diagonal
     block's columns are the compact own columns), a gathered row's by
     search among the other ranks' columns. */
  RsRowsOwnColumns(r, &b, 0, r->garray_compact);
  for (PetscInt e = r->own_nnz; e < r->nnz; e++) PetscCall(RsColsCompact(c, r->j[e], &r->j[e]));
  PetscFunctionReturn(0);
}

/* The view rusparse multiplies: the first `rows` rows. */
static RsCsr RsRowsView(const RsRows *r, PetscInt rows)
{
  RsCsr v;

  v.rows = rows;
  v.cols = RsColsCount(&r->cols);
  v.nnz  = r->i[rows];
  v.i    = r->i;
  v.j    = r->j;
  v.a    = r->a;
  return v;
}

/* Own rows r read from M's blocks (RsRowsCreate's in_blocks): their values
   merged into a new array *merged, for the symbolic phase. */
static PetscErrorCode RsRowsMergedValues(Mat M, const RsRows *r, PetscScalar **merged)
{
  RsBlocks b;
  RsRuns   runs = {0, NULL};

  PetscFunctionBegin;
  PetscCall(RsBlocksOf(M, &b));
  PetscCall(RsRunsBuild(b.m, b.d.i, b.o.i, r->i, NULL, &runs));
  PetscCall(PetscMalloc1(r->own_nnz, merged));
  PetscCall(RsRunsMerge(&runs, b.d.a, b.o.a, *merged));
  PetscCall(PetscFree(runs.run));
  PetscFunctionReturn(0);
}

/* ---- C from Z ---------------------------------------------------------------------- */
typedef struct {
  PetscInt     own_rows; /* C's local rows: Z's first rows */
  PetscSF      sent;     /* Z's entries past its own rows -> the owners' received buffer; NULL: none sent (AB) */
  PetscInt     recv_nnz;
  PetscInt    *recv_i;   /* own row r's received entries: [recv_i[r], recv_i[r + 1]) */
  PetscScalar *recv;
  PetscInt    *pos;      /* position in its C row of each entry of a row that received any: Z's own entries, then the received */
  PetscScalar *row;      /* one row of C */
  RsRuns       copied;   /* the rows that received nothing: C's blocks' values from Z's rows */
} RsOut;

static PetscErrorCode RsOutDestroy(RsOut *out)
{
  PetscFunctionBegin;
  PetscCall(PetscSFDestroy(&out->sent));
  PetscCall(PetscFree(out->recv_i));
  PetscCall(PetscFree(out->recv));
  PetscCall(PetscFree(out->pos));
  PetscCall(PetscFree(out->row));
  PetscCall(PetscFree(out->copied.run));
  PetscFunctionReturn(0);
}

/* Sends Z's rows own_rows.. (the global rows send[k] of C, owned by other
   ranks whose layout is `crows`) to their owners: the exchange's structure,
   out->recv_i and the received entries' global columns (*recv_cols,
   allocated). Collective. */
static PetscErrorCode RsOutExchange(MPI_Comm comm, PetscLayout crows, const RsCols *cols, PetscInt own_rows, PetscInt z_rows, const PetscInt *zi, const PetscInt *zj, const PetscInt send[], RsOut *out, PetscInt **recv_cols)
{
  PetscSF            rowsf;
  const PetscInt    *degree;
  const PetscSFNode *owner;
  PetscSFNode       *remote;
  PetscInt           nsend = z_rows - own_rows, zown = zi[own_rows], nsent = zi[z_rows] - zown, nmulti = 0, total = 0, s = 0, e = 0;
  PetscInt          *mlen, *moff, *len, *off, *sent_cols;

  PetscFunctionBegin;
  PetscCall(PetscSFCreate(comm, &rowsf));
  PetscCall(PetscSFSetGraphLayout(rowsf, crows, nsend, NULL, PETSC_OWN_POINTER, send));
  PetscCall(PetscSFComputeDegreeBegin(rowsf, &degree));
  PetscCall(PetscSFComputeDegreeEnd(rowsf, &degree));
  for (PetscInt r = 0; r < own_rows; r++) nmulti += degree[r];
  PetscCall(PetscMalloc4(nmulti, &mlen, nmulti, &moff, nsend, &len, nsend, &off));
  for (PetscInt k = 0; k < nsend; k++) len[k] = zi[own_rows + k + 1] - zi[own_rows + k];
  PetscCall(PetscSFGatherBegin(rowsf, MPIU_INT, len, mlen));
  PetscCall(PetscSFGatherEnd(rowsf, MPIU_INT, len, mlen));
  /* The received buffer holds own row 0's incoming rows, then row 1's, ... */
  for (PetscInt r = 0; r < own_rows; r++) {
    out->recv_i[r] = total;
    for (PetscInt d = 0; d < degree[r]; d++, s++) {
      moff[s] = total;
      total += mlen[s];
    }
  }
  out->recv_i[own_rows] = total;
  out->recv_nnz         = total;
  PetscCall(PetscSFScatterBegin(rowsf, MPIU_INT, moff, off));
  PetscCall(PetscSFScatterEnd(rowsf, MPIU_INT, moff, off));
  PetscCall(PetscSFGetGraph(rowsf, NULL, NULL, NULL, &owner));
  PetscCall(PetscMalloc1(nsent, &remote));
  for (PetscInt k = 0; k < nsend; k++)
    for (PetscInt t = 0; t < len[k]; t++, e++) {
      remote[e].rank  = owner[k].rank;
      remote[e].index = off[k] + t;
    }
  PetscCall(PetscSFCreate(comm, &out->sent));
  PetscCall(PetscSFSetGraph(out->sent, total, nsent, NULL, PETSC_OWN_POINTER, remote, PETSC_OWN_POINTER));
  PetscCall(PetscSFSetUp(out->sent));
  PetscCall(PetscFree4(mlen, moff, len, off));
  PetscCall(PetscSFDestroy(&rowsf));

  PetscCall(PetscMalloc1(nsent, &sent_cols));
  PetscCall(PetscMalloc1(total, recv_cols));
  for (PetscInt k = 0; k < nsent; k++) sent_cols[k] = RsColsGlobal(cols, zj[zown + k]);
  PetscCall(PetscSFReduceBegin(out->sent, MPIU_INT, sent_cols, *recv_cols, MPI_REPLACE));
  PetscCall(PetscSFReduceEnd(out->sent, MPIU_INT, sent_cols, *recv_cols, MPI_REPLACE));
  PetscCall(PetscFree(sent_cols));
  PetscCall(PetscMalloc1(total, &out->recv));
  PetscFunctionReturn(0);
}

/* The rows [*run, end) of Z, each as long as its row of C's diagonal
   block and all of it (checked), into that block's columns cdj at once;
   *run then -1 (none pending). Nothing where *run is -1. */
static PetscErrorCode RsCopyInteriorRun(const PetscInt *cdj, const PetscInt *cdi, const PetscInt *zj, const PetscInt *zi, PetscInt *run, PetscInt end)
{
  PetscFunctionBegin;
  if (*run >= 0) PetscCall(PetscArraycpy((PetscInt *)cdj + cdi[*run], zj + zi[*run], zi[end] - zi[*run]));
  *run = -1;
  PetscFunctionReturn(0);
}

/* C's structure: Z's rows [0, own_rows) (compact columns `cols`, whose own
   columns are C's), plus, when `exchange` (collective: AtB and PtAP), the
   rows Z's rows own_rows..z_rows-1 make on other ranks (global rows send[k]
   of C, row layout `crows`). C has its type and sizes; it is preallocated
   and assembled here. Its values are left unset: the caller's numeric
   phase, right after, writes every one of them. */
static PetscErrorCode RsOutSymbolic(Mat C, PetscLayout crows, const RsCols *cols, PetscInt own_rows, PetscInt z_rows, const PetscInt *zi, const PetscInt *zj, PetscBool exchange, const PetscInt send[], RsOut *out)
{
  MPI_Comm        comm;
  PetscInt       *recv_cols = NULL, zown = zi[own_rows], *mj = NULL, *d_nnz, *o_nnz, *key = NULL, *src = NULL, nkey = 0, nm = 0, longest = 0;
  PetscInt        nown = cols->nown;
  Mat             Cd, Co;
  const PetscInt *cdi, *coi, *cdj, *coj;
  PetscScalar    *unused;
  PetscMemType    mtype;
  RsBlocks        cb;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetComm((PetscObject)C, &comm));
  out->own_rows = own_rows;
  PetscCall(PetscCalloc1(own_rows + 1, &out->recv_i));
  if (exchange) PetscCall(RsOutExchange(comm, crows, cols, own_rows, z_rows, zi, zj, send, out, &recv_cols));
  if (out->recv_nnz) PetscCall(PetscMalloc1(zown + out->recv_nnz, &out->pos));

  /* Each row's length in C's blocks. A row of Z is sorted with the own
     columns first, so it splits where they end. A row that received
     entries from other ranks is merged with them here (its columns, sorted
     and without repeats, kept in mj: the diagonal block's, local, then the
     off-diagonal block's, global), the place in C's row of each of its
     entries in out->pos. */
  PetscCall(PetscMalloc2(own_rows, &d_nnz, own_rows, &o_nnz));
  for (PetscInt r = 0; r < own_rows; r++) {
    PetscInt        z0 = zi[r], zl = zi[r + 1] - z0, r0 = out->recv_i[r], rl = out->recv_i[r + 1] - r0, u = 0, ud = 0;
    const PetscInt *zr = zj + z0;
    if (!rl) {
      while (ud < zl && zr[ud] < nown) ud++;
      u = zl;
    } else {
      PetscInt n = zl + rl, *row;
      if (n > nkey) {
        PetscCall(PetscFree2(key, src));
        nkey = PetscMax(n, 2 * nkey);
        PetscCall(PetscMalloc2(nkey, &key, nkey, &src));
      }
      if (!mj) PetscCall(PetscMalloc1(out->recv_nnz + zown, &mj));
      row = mj + nm;
      for (PetscInt e = 0; e < zl; e++) key[e] = RsColsKey(cols, RsColsGlobal(cols, zr[e]));
      for (PetscInt t = 0; t < rl; t++) key[zl + t] = RsColsKey(cols, recv_cols[r0 + t]);
      for (PetscInt t = 0; t < n; t++) src[t] = t;
      PetscCall(PetscSortIntWithArray(n, key, src));
      for (PetscInt t = 0; t < n; t++) {
        if (t == 0 || key[t] != key[t - 1]) {
          PetscInt g = RsColsUnkey(cols, key[t]);
          if (RsColsOwns(cols, g)) {
            row[u] = g - cols->cstart;
            ud++;
          } else row[u] = g;
          u++;
        }
        if (src[t] < zl) out->pos[z0 + src[t]] = u - 1;
        else out->pos[zown + r0 + src[t] - zl] = u - 1;
      }
      nm += u;
    }
    d_nnz[r] = ud;
    o_nnz[r] = u - ud;
    longest  = PetscMax(longest, u);
  }
  PetscCall(PetscFree2(key, src));
  PetscCall(PetscFree(recv_cols));

  /* C: preallocated exactly; its columns written straight into its blocks'
     own column arrays (no insertion row by row, no temporary), which
     MatSeqAIJSetColumnIndices then takes as they are (it copies them onto
     themselves and marks every row full); assembled, which numbers the
     off-diagonal block's columns. */
  PetscCall(MatMPIAIJSetPreallocation(C, 0, d_nnz, 0, o_nnz));
  PetscCall(MatSetOption(C, MAT_NO_OFF_PROC_ENTRIES, PETSC_TRUE));
  PetscCall(MatMPIAIJGetSeqAIJ(C, &Cd, &Co, NULL));
  PetscCall(MatSeqAIJGetCSRAndMemType(Cd, &cdi, &cdj, &unused, &mtype));
  PetscCall(MatSeqAIJGetCSRAndMemType(Co, &coi, &coj, &unused, &mtype));
  PetscCheck(mtype == PETSC_MEMTYPE_HOST, PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: C's blocks are not in host memory");
  /* Rows with only own columns and nothing received (a rank's interior)
     are C's diagonal block's rows as they lie in Z: a run of them is
     copied at once where it ends (a copy a row of 3 or 4 columns took 1.3
     ms of the 7-point A·P_tent's 18 a rank on two ranks). `run` is the
     first row of the run pending, -1 for none. */
  nm = 0;
  PetscInt run = -1;
  for (PetscInt r = 0; r < own_rows; r++) {
    PetscInt  z0 = zi[r], zl = zi[r + 1] - z0, dl = d_nnz[r], ol = o_nnz[r];
    PetscInt *dj = (PetscInt *)cdj + cdi[r], *oj = (PetscInt *)coj + coi[r];
    PetscCheck(cdi[r + 1] - cdi[r] == dl && coi[r + 1] - coi[r] == ol, PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: row %" PetscInt_FMT " of C's preallocated blocks does not hold the product's pattern", r);
    if (!ol && out->recv_i[r + 1] == out->recv_i[r]) {
      if (run < 0) run = r;
      continue;
    }
    PetscCall(RsCopyInteriorRun(cdj, cdi, zj, zi, &run, r));
    if (out->recv_i[r + 1] == out->recv_i[r]) {
      const PetscInt *zr = zj + z0;
      PetscCall(PetscArraycpy(dj, zr, dl));
      for (PetscInt e = dl; e < zl; e++) oj[e - dl] = cols->ghost[zr[e] - nown];
    } else {
      PetscCall(PetscArraycpy(dj, mj + nm, dl));
      PetscCall(PetscArraycpy(oj, mj + nm + dl, ol));
      nm += dl + ol;
    }
  }
  PetscCall(RsCopyInteriorRun(cdj, cdi, zj, zi, &run, own_rows));
  PetscCall(PetscFree(mj));
  PetscCall(MatSeqAIJSetColumnIndices(Cd, (PetscInt *)cdj));
  PetscCall(MatSeqAIJSetColumnIndices(Co, (PetscInt *)coj));
  PetscCall(MatAssemblyBegin(C, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(C, MAT_FINAL_ASSEMBLY));
  PetscCall(MatSetOption(C, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_TRUE));

  /* The numeric phase writes row r of Z (or of the sums) as [row r of C's
     diagonal block | row r of its off-diagonal block]: check the blocks. */
  PetscCall(RsBlocksOf(C, &cb));
  PetscCheck(cb.m == own_rows, PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: C has %" PetscInt_FMT " local rows, expected %" PetscInt_FMT, cb.m, own_rows);
  for (PetscInt r = 0; r < own_rows; r++)
    PetscCheck(cb.d.i[r + 1] - cb.d.i[r] == d_nnz[r] && cb.o.i[r + 1] - cb.o.i[r] == o_nnz[r], PETSC_COMM_SELF, PETSC_ERR_PLIB, "rusparse: row %" PetscInt_FMT " of C's blocks does not hold the product's pattern", r);
  PetscCall(RsRunsBuild(own_rows, cb.d.i, cb.o.i, zi, out->recv_i, &out->copied));
  PetscCall(PetscMalloc1(longest, &out->row));
  PetscCall(PetscFree2(d_nnz, o_nnz));
  PetscFunctionReturn(0);
}

/* C's two blocks opened for writing their values: the blocks, their row
   offsets and their value arrays. */
typedef struct {
  Mat             d, o;
  const PetscInt *di, *oi;
  PetscScalar    *da, *oa;
} RsOutBlocks;

static PetscErrorCode RsOutBlocksGet(Mat C, RsOutBlocks *c)
{
  const PetscInt *j;
  PetscScalar    *unused;
  PetscMemType    mtype;

  PetscFunctionBegin;
  PetscCall(MatMPIAIJGetSeqAIJ(C, &c->d, &c->o, NULL));
  PetscCall(MatSeqAIJGetCSRAndMemType(c->d, &c->di, &j, &unused, &mtype));
  PetscCall(MatSeqAIJGetCSRAndMemType(c->o, &c->oi, &j, &unused, &mtype));
  PetscCall(MatSeqAIJGetArrayWrite(c->d, &c->da));
  PetscCall(MatSeqAIJGetArrayWrite(c->o, &c->oa));
  PetscFunctionReturn(0);
}

/* Gives the blocks' values back; C's values changed. */
static PetscErrorCode RsOutBlocksRestore(Mat C, RsOutBlocks *c)
{
  PetscFunctionBegin;
  PetscCall(MatSeqAIJRestoreArrayWrite(c->d, &c->da));
  PetscCall(MatSeqAIJRestoreArrayWrite(c->o, &c->oa));
  PetscCall(RsMatStateIncrease(C));
  PetscFunctionReturn(0);
}

/* C's values from Z's (and, sent to their owners, Z's other ranks' rows). Collective. */
static PetscErrorCode RsOutNumeric(Mat C, RsOut *out, const PetscInt *zi, const PetscScalar *za)
{
  RsOutBlocks c;
  PetscInt    own = out->own_rows, zown = zi[own];

  PetscFunctionBegin;
  if (out->sent) PetscCall(PetscSFReduceBegin(out->sent, MPIU_SCALAR, za + zown, out->recv, MPI_REPLACE));
  PetscCall(RsOutBlocksGet(C, &c));
  PetscCall(RsRunsSplit(&out->copied, za, c.da, c.oa));
  if (out->sent) PetscCall(PetscSFReduceEnd(out->sent, MPIU_SCALAR, za + zown, out->recv, MPI_REPLACE));
  if (out->recv_nnz) {
    for (PetscInt r = 0; r < own; r++) {
      PetscInt dl = c.di[r + 1] - c.di[r], ol = c.oi[r + 1] - c.oi[r];
      if (out->recv_i[r + 1] == out->recv_i[r]) continue;
      PetscCall(PetscArrayzero(out->row, dl + ol));
      for (PetscInt e = zi[r]; e < zi[r + 1]; e++) out->row[out->pos[e]] += za[e];
      for (PetscInt t = out->recv_i[r]; t < out->recv_i[r + 1]; t++) out->row[out->pos[zown + t]] += out->recv[t];
      PetscCall(PetscArraycpy(c.da + c.di[r], out->row, dl));
      PetscCall(PetscArraycpy(c.oa + c.oi[r], out->row + dl, ol));
    }
  }
  PetscCall(RsOutBlocksRestore(C, &c));
  PetscFunctionReturn(0);
}

/* The numeric phase of stage st with its operands' values where PETSc keeps
   them (rusparseCsrSetSplitValues): X's read from A's blocks when A is
   given (RsMpiProductReadsBlocks), Z's written into C's blocks when C is
   (RsMpiProductInPlace). The splits are cleared whether or not the product
   succeeded, so the stage's descriptors never keep pointers into PETSc's
   arrays. */
static PetscErrorCode RsStageNumericSplit(Mat A, Mat C, rusparseHandle_t h, rusparseSpGEMMAlg_t alg, RsStage *st, const RsCsr *x, const RsCsr *y, PetscInt *zi, PetscInt *zj, PetscScalar *za)
{
  RsBlocks         a;
  RsOutBlocks      c;
  PetscErrorCode   numeric;
  rusparseStatus_t set = RUSPARSE_STATUS_SUCCESS, cleared[2] = {RUSPARSE_STATUS_SUCCESS, RUSPARSE_STATUS_SUCCESS};

  PetscFunctionBegin;
  if (A) PetscCall(RsBlocksOf(A, &a));
  if (C) PetscCall(RsOutBlocksGet(C, &c));
  if (A) set = rusparseCsrSetSplitValues(st->X, (void *)a.d.i, (void *)a.d.a, (void *)a.o.i, (void *)a.o.a);
  if (C && set == RUSPARSE_STATUS_SUCCESS) set = rusparseCsrSetSplitValues(st->Z, (void *)c.di, c.da, (void *)c.oi, c.oa);
  numeric = set == RUSPARSE_STATUS_SUCCESS ? RsStageNumeric(h, alg, st, x, y, zi, zj, za, PETSC_TRUE) : 0;
  if (A) cleared[0] = rusparseCsrSetSplitValues(st->X, NULL, NULL, NULL, NULL);
  if (C) cleared[1] = rusparseCsrSetSplitValues(st->Z, NULL, NULL, NULL, NULL);
  RsCall(set);
  PetscCall(numeric);
  RsCall(cleared[0]);
  RsCall(cleared[1]);
  if (C) PetscCall(RsOutBlocksRestore(C, &c));
  PetscFunctionReturn(0);
}

/* ---- the product record ------------------------------------------------------------- */
typedef struct {
  RsSettings       settings;
  rusparseHandle_t handle;
  MatProductType   type;
  RsRows           x; /* A's rows */
  RsRows           y; /* AB: B's own and gathered rows; AtB: B's own rows; PtAP: P's own and gathered rows */
  RsStage          stage[2];
  PetscInt        *ap_i, *ap_j; /* PtAP: A_loc * P_ext */
  PetscScalar     *ap_a;
  PetscInt         ap_nnz;
  PetscInt        *z_i, *z_j; /* the last stage's product */
  PetscScalar     *z_a;
  PetscInt         z_nnz;
  RsOut            out;
  RsValues         a_values, b_values; /* C was computed from these in the symbolic phase */
  PetscBool        computed;           /* and no numeric phase ran since */
} RsMpiProduct;

static PetscErrorCode RsMpiProductDestroy(void *data)
{
  RsMpiProduct *p = (RsMpiProduct *)data;

  PetscFunctionBegin;
  for (int k = 0; k < 2; k++) PetscCall(RsStageDestroy(&p->stage[k]));
  PetscCall(RsRowsDestroy(&p->x));
  PetscCall(RsRowsDestroy(&p->y));
  PetscCall(RsOutDestroy(&p->out));
  PetscCall(PetscFree(p->ap_i));
  PetscCall(PetscFree(p->ap_j));
  PetscCall(PetscFree(p->ap_a));
  PetscCall(PetscFree(p->z_i));
  PetscCall(PetscFree(p->z_j));
  PetscCall(PetscFree(p->z_a));
  PetscCall(PetscFree(p));
  PetscFunctionReturn(0);
}

/* Whether rusparse writes Z's values straight into C's blocks: in AB, where
   nothing is sent or received, every row of C is the same row of Z, and
   Z's row r is [C's diagonal block's row r | its off-diagonal block's row
   r], so the blocks' row offsets split Z's rows exactly
   (rusparseCsrSetSplitValues, RsStageNumericSplit) and RsOutNumeric's copy
   of C's values is not needed; Z then keeps no values of its own. A CPU
   handle's (a GPU handle stages C in one array). */
static PetscBool RsMpiProductInPlace(const RsMpiProduct *p)
{
  return (PetscBool)(p->settings.backend == RUSPARSE_BACKEND_CPU && p->type == MATPRODUCT_AB && !p->out.sent && !p->out.recv_nnz);
}

/* Whether rusparse reads A's values from A's blocks: in AB and PtAP, whose
   first product multiplies A's merged rows as they are, and row r of those
   is [A's diagonal block's row r | its off-diagonal block's row r], so the
   blocks' row offsets split it exactly (rusparseCsrSetSplitValues on X).
   A's merged rows then keep no values, and the numeric phase copies none.
   AtB multiplies A's rows transposed, which rusparse would copy into one
   array anyway; the split is a CPU handle's (a GPU handle stages one
   array). */
static PetscBool RsMpiProductReadsBlocks(const RsMpiProduct *p)
{
  return (PetscBool)(p->settings.backend == RUSPARSE_BACKEND_CPU && p->type != MATPRODUCT_AtB);
}

/* PtAP's A_loc * P_ext, the right operand of its second product. */
static RsCsr RsMpiProductAp(const RsMpiProduct *p)
{
  RsCsr ap;

  ap.rows = p->x.own_rows;
  ap.cols = RsColsCount(&p->y.cols);
  ap.nnz  = p->ap_nnz;
  ap.i    = p->ap_i;
  ap.j    = p->ap_j;
  ap.a    = p->ap_a;
  return ap;
}

/* The product's values for its factors' current values: the local
   products (PtAP's A_loc * P_ext first), then C's values
   from Z's, exchanged (AtB, PtAP), or written by rusparse straight into C's
   blocks (RsMpiProductInPlace). X is A's own rows `x`, whose values rusparse
   reads from A's blocks when `a_blocks` (RsMpiProductReadsBlocks), else
   from x->a. Collective. */
static PetscErrorCode RsMpiProductCompute(Mat C, const RsProductInfo *info, RsMpiProduct *p, const RsCsr *x, PetscBool a_blocks)
{
  RsCsr y, ap;
  Mat   A = a_blocks ? info->A : NULL;

  PetscFunctionBegin;
  PetscCall(PetscLogEventBegin(RS_LOG_SPGEMM, info->A, info->B, C, 0));
  switch (p->type) {
  case MATPRODUCT_AB:
    y = RsRowsView(&p->y, p->y.rows);
    PetscCall(RsStageNumericSplit(A, RsMpiProductInPlace(p) ? C : NULL, p->handle, p->settings.alg, &p->stage[0], x, &y, p->z_i, p->z_j, p->z_a));
    break;
  case MATPRODUCT_AtB:
    y = RsRowsView(&p->y, p->y.own_rows);
    PetscCall(RsStageNumeric(p->handle, p->settings.alg, &p->stage[0], x, &y, p->z_i, p->z_j, p->z_a, PETSC_TRUE));
    break;
  default: /* PtAP */
    y  = RsRowsView(&p->y, p->y.rows);
    ap = RsMpiProductAp(p);
    PetscCall(RsStageNumericSplit(A, NULL, p->handle, p->settings.alg, &p->stage[0], x, &y, p->ap_i, p->ap_j, p->ap_a));
    y = RsRowsView(&p->y, p->y.own_rows);
    PetscCall(RsStageNumeric(p->handle, p->settings.alg, &p->stage[1], &y, &ap, p->z_i, p->z_j, p->z_a, PETSC_TRUE));
  }
  PetscCall(PetscLogEventEnd(RS_LOG_SPGEMM, info->A, info->B, C, 0));
  if (RsMpiProductInPlace(p)) PetscFunctionReturn(0); /* C written in place */

  PetscCall(PetscLogEventBegin(RS_LOG_MPI_WRITE_C, info->A, info->B, C, 0));
  PetscCall(RsOutNumeric(C, &p->out, p->z_i, p->z_a));
  PetscCall(PetscLogEventEnd(RS_LOG_MPI_WRITE_C, info->A, info->B, C, 0));
  PetscFunctionReturn(0);
}

static PetscErrorCode RsMpiProductNumeric(Mat C)
{
  RsProductInfo info;
  RsMpiProduct *p;
  PetscBool     changed = PETSC_FALSE, y_copied = PETSC_FALSE, any[2];
  MPI_Comm      comm;
  RsCsr         x;

  PetscFunctionBegin;
  PetscCall(PetscObjectGetComm((PetscObject)C, &comm));
  PetscCall(RsProductGetInfo(C, &info));
  PetscCall(RsProductGetData(C, (void **)&p));
  PetscCheck(p, comm, PETSC_ERR_ORDER, "rusparse: the numeric phase ran before the symbolic phase");
  /* Right after the symbolic phase, which computed C: nothing to do unless
     some rank's A or B changed values since (the rows gathered from other
     ranks are theirs). */
  if (p->computed) {
    RsValues  a_now, b_now;
    PetscBool stale;

    p->computed = PETSC_FALSE;
    PetscCall(RsValuesOf(info.A, &a_now));
    PetscCall(RsValuesOf(info.B, &b_now));
    stale = (PetscBool)(memcmp(&a_now, &p->a_values, sizeof(a_now)) || memcmp(&b_now, &p->b_values, sizeof(b_now)));
    PetscCall(MPIU_Allreduce(MPI_IN_PLACE, &stale, 1, MPIU_BOOL, MPI_LOR, comm));
    if (!stale) PetscFunctionReturn(0);
  }

  PetscCall(PetscLogEventBegin(RS_LOG_MPI_ROWS, info.A, info.B, C, 0));
  PetscCall(RsRowsRefreshOwn(info.A, &p->x, &changed, NULL));
  PetscCall(RsRowsRefreshOwn(info.B, &p->y, &changed, &y_copied));
  /* Whether any rank's pattern changed, and whether any rank copied new
     values of B: the gathered rows are other ranks' own rows of B, so they
     are broadcast again only then. */
  any[0] = changed;
  any[1] = y_copied;
  PetscCall(MPIU_Allreduce(MPI_IN_PLACE, any, 2, MPIU_BOOL, MPI_LOR, comm));
  if (!any[0] && any[1]) PetscCall(RsRowsRefreshGathered(&p->y));
  PetscCall(PetscLogEventEnd(RS_LOG_MPI_ROWS, info.A, info.B, C, 0));
  PetscCheck(!any[0], comm, PETSC_ERR_ARG_INCOMP, "rusparse: a factor's nonzero pattern changed since the symbolic phase (MAT_REUSE_MATRIX needs the same nonzero pattern)");

  /* The merged operands and Z are this record's own arrays, made in the
     symbolic phase and never changed since, and the factors' patterns were
     just checked against them: rusparse need not hash them again. */
  x = RsRowsView(&p->x, p->x.own_rows);
  PetscCall(RsMpiProductCompute(C, &info, p, &x, RsMpiProductReadsBlocks(p)));
  PetscFunctionReturn(0);
}

/* Whether two layouts split the same rows among the ranks alike. */
static PetscErrorCode RsCheckCongruent(Mat C, PetscLayout a, PetscLayout b, const char *what)
{
  PetscBool same;

  PetscFunctionBegin;
  PetscCall(PetscLayoutCompare(a, b, &same));
  PetscCheck(same, PetscObjectComm((PetscObject)C), PETSC_ERR_ARG_SIZ, "rusparse: %s are not distributed alike over the ranks", what);
  PetscFunctionReturn(0);
}

static PetscErrorCode RsMpiProductSymbolic(Mat C)
{
  const rusparseOperation_t N = RUSPARSE_OPERATION_NON_TRANSPOSE, T = RUSPARSE_OPERATION_TRANSPOSE;
  RsProductInfo             info;
  RsMpiProduct             *p;
  PetscLayout               arow, acol, brow, bcol, crow;
  PetscInt                  m, n, M, Nc, z_rows;
  const PetscInt           *send = NULL;
  RsCsr                     x, y, ap;
  PetscScalar              *xa = NULL;
  MatType                   type;

  PetscFunctionBegin;
  PetscCall(RsProductGetInfo(C, &info));
  PetscCall(MatGetLayouts(info.A, &arow, &acol));
  PetscCall(MatGetLayouts(info.B, &brow, &bcol));
  switch (info.type) {
  case MATPRODUCT_AB:
    PetscCall(RsCheckCongruent(C, acol, brow, "A's columns and B's rows"));
    break;
  case MATPRODUCT_AtB:
    PetscCall(RsCheckCongruent(C, arow, brow, "A's rows and B's rows"));
    break;
  case MATPRODUCT_PtAP:
    PetscCall(RsCheckCongruent(C, acol, brow, "A's columns and P's rows"));
    PetscCall(RsCheckCongruent(C, arow, brow, "A's rows and P's rows"));
    break;
  default:
    SETERRQ(PetscObjectComm((PetscObject)C), PETSC_ERR_PLIB, "rusparse: product type %s reached the MPI route", MatProductTypes[info.type]);
  }
  PetscCall(PetscNew(&p));
  PetscCall(RsProductSetData(C, p, RsMpiProductDestroy));
  p->type = info.type;
  PetscCall(RsSettingsFromOptions(info.A, &p->settings));
  PetscCall(RsHandleGet(&p->settings, &p->handle));

  /* The merged operands: A's rows; B's (P's) own rows, and for AB and PtAP
     the rows A's off-diagonal columns name. */
  PetscCall(PetscLogEventBegin(RS_LOG_MPI_ROWS, info.A, info.B, C, 0));
  PetscCall(RsRowsCreate(info.A, 0, NULL, PETSC_FALSE, RsMpiProductReadsBlocks(p), &p->x));
  if (info.type == MATPRODUCT_AtB) PetscCall(RsRowsCreate(info.B, 0, NULL, PETSC_FALSE, PETSC_FALSE, &p->y));
  else PetscCall(RsRowsCreate(info.B, p->x.cols.nghost, p->x.cols.ghost, PETSC_TRUE, PETSC_FALSE, &p->y));
  PetscCall(PetscLogEventEnd(RS_LOG_MPI_ROWS, info.A, info.B, C, 0));

  /* The local products. rusparse sums their values as it lists their
     structure, and the numeric phases run here copy them: so A's rows need
     values here even where the numeric phases read them from A's blocks. */
  x = RsRowsView(&p->x, p->x.own_rows);
  if (!x.a) PetscCall(RsRowsMergedValues(info.A, &p->x, &xa));
  if (xa) x.a = xa;
  PetscCall(PetscLogEventBegin(RS_LOG_SPGEMM, info.A, info.B, C, 0));
  switch (info.type) {
  case MATPRODUCT_AB:
    y = RsRowsView(&p->y, p->y.rows);
    PetscCall(RsStageSymbolic(p->handle, p->settings.alg, &p->stage[0], N, &x, &y, &p->z_i, &p->z_j, &p->z_a, &p->z_nnz));
    z_rows = p->x.own_rows;
    break;
  case MATPRODUCT_AtB:
    y = RsRowsView(&p->y, p->y.own_rows);
    PetscCall(RsStageSymbolic(p->handle, p->settings.alg, &p->stage[0], T, &x, &y, &p->z_i, &p->z_j, &p->z_a, &p->z_nnz));
    z_rows = RsColsCount(&p->x.cols);
    send   = p->x.cols.ghost;
    break;
  default: /* PtAP */
    y = RsRowsView(&p->y, p->y.rows);
    /* A_loc * P_ext with its values, which the second stage reads as it
       lists C. */
    PetscCall(RsStageSymbolic(p->handle, p->settings.alg, &p->stage[0], N, &x, &y, &p->ap_i, &p->ap_j, &p->ap_a, &p->ap_nnz));
    ap = RsMpiProductAp(p);
    y  = RsRowsView(&p->y, p->y.own_rows);
    PetscCall(RsStageSymbolic(p->handle, p->settings.alg, &p->stage[1], T, &y, &ap, &p->z_i, &p->z_j, &p->z_a, &p->z_nnz));
    z_rows = RsColsCount(&p->y.cols);
    send   = p->y.cols.ghost;
  }
  PetscCall(PetscLogEventEnd(RS_LOG_SPGEMM, info.A, info.B, C, 0));

  /* C: A's type; rows as A's (AB) or as A's (P's) columns, columns as B's (P's). */
  crow = info.type == MATPRODUCT_AB ? arow : bcol;
  if (info.type == MATPRODUCT_AtB) crow = acol;
  PetscCall(PetscLayoutGetLocalSize(crow, &m));
  PetscCall(PetscLayoutGetSize(crow, &M));
  PetscCall(PetscLayoutGetLocalSize(bcol, &n));
  PetscCall(PetscLayoutGetSize(bcol, &Nc));
  PetscCall(MatSetSizes(C, m, n, M, Nc));
  PetscCall(MatGetType(info.A, &type));
  PetscCall(MatSetType(C, type));
  PetscCall(PetscLogEventBegin(RS_LOG_MPI_MAKE_C, info.A, info.B, C, 0));
  PetscCall(RsOutSymbolic(C, crow, &p->y.cols, m, z_rows, p->z_i, p->z_j, (PetscBool)(info.type != MATPRODUCT_AB), send, &p->out));
  PetscCall(PetscLogEventEnd(RS_LOG_MPI_MAKE_C, info.A, info.B, C, 0));
  /* C's values: Z's, which rusparse summed as it listed Z's structure. */
  PetscCall(PetscLogEventBegin(RS_LOG_MPI_WRITE_C, info.A, info.B, C, 0));
  PetscCall(RsOutNumeric(C, &p->out, p->z_i, p->z_a));
  PetscCall(PetscLogEventEnd(RS_LOG_MPI_WRITE_C, info.A, info.B, C, 0));
  for (PetscInt k = 0; k < (info.type == MATPRODUCT_PtAP ? 2 : 1); k++) PetscCall(PetscLogFlops(p->stage[k].flops));
  /* Z needs its structure alone, nnz(C) scalars less per rank. */
  if (RsMpiProductInPlace(p)) PetscCall(PetscFree(p->z_a));
  PetscCall(PetscFree(xa));
  PetscCall(RsValuesOf(info.A, &p->a_values));
  PetscCall(RsValuesOf(info.B, &p->b_values));
  p->computed = PETSC_TRUE;
  /* MatSetType reset C's ops: the numeric phase is installed after it. */
  PetscCall(RsOpsSetProductPhases(C, NULL, RsMpiProductNumeric));
  PetscFunctionReturn(0);
}

PetscErrorCode RsMpiProductUseRoute(Mat C)
{
  PetscFunctionBegin;
  PetscCall(RsOpsSetProductPhases(C, RsMpiProductSymbolic, NULL));
  PetscFunctionReturn(0);
}
