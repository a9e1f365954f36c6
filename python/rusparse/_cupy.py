"""The CuPy path of :func:`rusparse.spgemm`: ``cupyx.scipy.sparse`` operands
multiplied on their GPU by rusparse's CUDA back end, through its C ABI
(device pointers, CuPy's current stream, cuSPARSE's three phases), with C
and the work buffers allocated from CuPy's memory pool.

Only ``cupy`` and ``cupyx.scipy.sparse`` are used, and only the parts that
CuPy shares with numpy/scipy (``empty``, ``astype``, ``conj``,
``__cuda_array_interface__``, ``cuda.get_current_stream``, ``csr_matrix``),
so the dispatch is tested with duck-typed stand-ins where CuPy cannot run.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from . import _rusparse

_VALUE_TYPES = {  # rusparseDataType_t
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.complex64): 4,
    np.dtype(np.complex128): 5,
}


def _address(arr: Any) -> int:
    return int(arr.__cuda_array_interface__["data"][0])


def _contiguous(arr: Any, dtype: np.dtype) -> Any:
    arr = arr.astype(dtype, copy=False)
    strides = arr.__cuda_array_interface__.get("strides")
    if strides is not None and tuple(strides) != (arr.dtype.itemsize,) and arr.size > 1:
        arr = arr.copy()
    return arr


class _DeviceOperand:
    """op(X) of one CuPy operand as zero-based CSR arrays and an op (as
    for scipy: CSR as it is, CSC as the CSR of its transpose with the op
    swapped, where op "C" of complex values conjugates them, a copy;
    other formats through ``tocsr()``)."""

    def __init__(self, x: Any, op: str, name: str):
        fmt = getattr(x, "format", None)
        if fmt not in ("csr", "csc"):
            x = x.tocsr()
            fmt = "csr"
        if len(x.shape) != 2:
            raise ValueError(f"{name} must be two-dimensional, not of shape {x.shape}")
        data = x.data
        if fmt == "csc":
            if op == "C" and np.dtype(data.dtype).kind == "c":
                data = data.conj()
            op = {"N": "T", "T": "N"}.get(op, "N")
            self.rows, self.cols = x.shape[1], x.shape[0]
        else:
            self.rows, self.cols = x.shape
        self.x, self.data, self.op = x, data, op

    def out_shape(self) -> Tuple[int, int]:
        return (self.rows, self.cols) if self.op == "N" else (self.cols, self.rows)


def spgemm(A: Any, B: Any, *, alpha, op_a: str, op_b: str, sorted: bool, algorithm: str) -> Any:
    """:func:`rusparse.spgemm` for CuPy operands (see there)."""
    import cupy
    import cupyx.scipy.sparse as csp

    from . import _alpha, _check_op, _out_shape, _raise, _value_dtype

    for x, name in ((A, "A"), (B, "B")):
        if not csp.issparse(x):
            raise TypeError(
                f"{name} is not a cupyx.scipy.sparse matrix ({type(x).__name__}); "
                "both operands must be on the GPU, or both scipy.sparse"
            )
    alpha_pair = _alpha(alpha)
    oa = _DeviceOperand(A, _check_op(op_a, "op_a"), "A")
    ob = _DeviceOperand(B, _check_op(op_b, "op_b"), "B")
    m, n = _out_shape(oa, ob, A, B, op_a, op_b)
    dtype = _value_dtype(np.dtype(A.dtype), np.dtype(B.dtype), complex(*alpha_pair))
    wide = any(
        np.dtype(arr.dtype).itemsize > 4 for o in (oa, ob) for arr in (o.x.indptr, o.x.indices)
    )
    index = np.dtype(np.int64 if wide else np.int32)

    keep = []  # the cast arrays must live until the product has run

    def device(o: _DeviceOperand) -> tuple:
        indptr = _contiguous(o.x.indptr, index)
        indices = _contiguous(o.x.indices, index)
        data = _contiguous(o.data, dtype)
        keep.extend((indptr, indices, data))
        return (o.rows, o.cols, int(indices.size), _address(indptr), _address(indices), _address(data))

    def alloc(kind: str, count: int):
        arr = cupy.empty(int(count), dtype={"index": index, "value": dtype}.get(kind, np.uint8))
        return (_address(arr) if arr.size else 0, arr)

    stream = cupy.cuda.get_current_stream().ptr
    try:
        _, (indptr, indices, data) = _rusparse.device_spgemm(
            device(oa), device(ob), _VALUE_TYPES[dtype], 3 if wide else 2, oa.op, ob.op,
            alpha_pair, int(stream), sorted, algorithm, alloc,
        )
    except _rusparse.Error as e:
        _raise(e)
    # CuPy's constructor takes the arrays as they are (its indices are
    # int32, which C has unless an operand had int64 ones).
    C = csp.csr_matrix((data, indices, indptr), shape=(m, n))
    if sorted:
        try:
            C.has_canonical_format = True
        except AttributeError:  # a CuPy without the setter: it checks lazily
            pass
    return C
