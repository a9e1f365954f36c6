/*
 * The only file of the plug-in that reads PETSc's private structures
 * (petsc/private/matimpl.h: the Mat ops table, Mat->spptr and the
 * MatProduct record). Everything else uses PETSc's public API and the
 * accessors below, so a new PETSc version changes this file only.
 *
 * Written against PETSc 3.18 (Debian bookworm's petsc-dev 3.18.5); any
 * other minor version is refused here and at configure time.
 */
#include <petsc/private/matimpl.h>

#include "rusparse_petsc.h"

#if PETSC_VERSION_LT(3, 18, 0) || PETSC_VERSION_GE(3, 19, 0)
#error "rusparse's PETSc plug-in reads PETSc 3.18's private Mat structures; this PETSc is another minor version"
#endif

PetscErrorCode RsOpsGetProductSetFromOptions(Mat A, RsMatFn *fn)
{
  PetscFunctionBegin;
  *fn = A->ops->productsetfromoptions;
  PetscFunctionReturn(0);
}

PetscErrorCode RsOpsSetProductSetFromOptions(Mat A, RsMatFn fn)
{
  PetscFunctionBegin;
  A->ops->productsetfromoptions = fn;
  PetscFunctionReturn(0);
}

PetscErrorCode RsOpsGetDestroy(Mat A, RsMatFn *fn)
{
  PetscFunctionBegin;
  *fn = A->ops->destroy;
  PetscFunctionReturn(0);
}

PetscErrorCode RsOpsSetDestroy(Mat A, RsMatFn fn)
{
  PetscFunctionBegin;
  A->ops->destroy = fn;
  PetscFunctionReturn(0);
}

PetscErrorCode RsOpsSetProductPhases(Mat C, RsMatFn symbolic, RsMatFn numeric)
{
  PetscFunctionBegin;
  if (symbolic) C->ops->productsymbolic = symbolic;
  if (numeric) C->ops->productnumeric = numeric;
  PetscFunctionReturn(0);
}

PetscErrorCode RsMatGetSpptr(Mat A, void **spptr)
{
  PetscFunctionBegin;
  *spptr = A->spptr;
  PetscFunctionReturn(0);
}

PetscErrorCode RsMatSetSpptr(Mat A, void *spptr)
{
  PetscFunctionBegin;
  A->spptr = spptr;
  PetscFunctionReturn(0);
}

PetscErrorCode RsProductGetInfo(Mat C, RsProductInfo *info)
{
  Mat_Product *p = C->product;

  PetscFunctionBegin;
  PetscCheck(p, PetscObjectComm((PetscObject)C), PETSC_ERR_PLIB, "rusparse: matrix has no MatProduct record");
  info->type     = p->type;
  info->alg      = p->alg;
  info->A        = p->A;
  info->B        = p->B;
  info->fill     = p->fill;
  info->api_user = p->api_user;
  PetscFunctionReturn(0);
}

PetscErrorCode RsProductSetData(Mat C, void *data, PetscErrorCode (*destroy)(void *))
{
  Mat_Product *p = C->product;

  PetscFunctionBegin;
  PetscCheck(p, PetscObjectComm((PetscObject)C), PETSC_ERR_PLIB, "rusparse: matrix has no MatProduct record");
  PetscCheck(!p->data, PetscObjectComm((PetscObject)C), PETSC_ERR_PLIB, "rusparse: the product already holds data");
  p->data    = data;
  p->destroy = destroy;
  PetscFunctionReturn(0);
}

PetscErrorCode RsProductGetData(Mat C, void **data)
{
  PetscFunctionBegin;
  *data = C->product ? C->product->data : NULL;
  PetscFunctionReturn(0);
}

PetscErrorCode RsMatStateIncrease(Mat C)
{
  PetscFunctionBegin;
  PetscCall(PetscObjectStateIncrease((PetscObject)C));
  PetscFunctionReturn(0);
}

PetscErrorCode RsObjectStateGet(PetscObject o, PetscObjectState *state)
{
  PetscFunctionBegin;
  PetscCall(PetscObjectStateGet(o, state));
  PetscFunctionReturn(0);
}
