"""rusparse: sparse matrix-matrix products (SpGEMM) for scipy.sparse and CuPy.

>>> import scipy.sparse as sp, rusparse
>>> A = sp.random_array((1000, 1000), density=0.01, format="csr")
>>> C = rusparse.spgemm(A, A)          # == A @ A, on all cores

``spgemm(A, B)`` computes ``C = alpha * op(A) @ op(B)`` and returns C in
CSR, of the kind of A (``csr_array`` or ``csr_matrix``). Operands on a GPU
(``cupyx.scipy.sparse``) run on that GPU through rusparse's CUDA back end
and give a CuPy CSR matrix. See docs/python.md in the rusparse repository.
"""

from __future__ import annotations

from typing import Any, NoReturn, Optional, Tuple, Union

import numpy as np

from . import _rusparse

__all__ = [
    "spgemm",
    "predict_nnz",
    "Plan",
    "NnzPrediction",
    "RusparseError",
    "ALGORITHMS",
    "__version__",
]

__version__: str = _rusparse.VERSION

#: The names ``algorithm=`` accepts ("auto" lets rusparse's selector choose).
ALGORITHMS: Tuple[str, ...] = (
    "auto",
    "deterministic",
    "nondeterministic",
    "alg1",
    "alg2",
    "alg3",
    "hash",
    "dense",
    "brmerge-precise",
    "brmerge-upper",
)

_VALUE_DTYPES = tuple(
    np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)
)


class RusparseError(RuntimeError):
    """rusparse refused or failed a product.

    ``str(e)`` is rusparse's message (it names the argument and the reason);
    ``e.status`` the cuSPARSE status name (e.g. ``"INVALID_VALUE"``) and
    ``e.code`` its number.
    """

    def __init__(self, message: str, status: str = "INTERNAL_ERROR", code: int = 7):
        super().__init__(message)
        self.status = status
        self.code = code


def _raise(e: BaseException) -> NoReturn:
    status, code, message = e.args
    raise RusparseError(message, status, code) from None


def _call(fn, *args):
    try:
        return fn(*args)
    except _rusparse.Error as e:
        _raise(e)


class NnzPrediction(tuple):
    """``predict_nnz``'s answer: ``(nnz, nprod, exact)``.

    ``nnz`` is the predicted nnz(C) (exact when ``exact``), ``nprod`` the
    number of scalar products of the whole product (exact).
    """

    __slots__ = ()

    def __new__(cls, nnz: int, nprod: int, exact: bool) -> "NnzPrediction":
        return tuple.__new__(cls, (nnz, nprod, exact))

    @property
    def nnz(self) -> int:
        return self[0]

    @property
    def nprod(self) -> int:
        return self[1]

    @property
    def exact(self) -> bool:
        return self[2]

    def __repr__(self) -> str:
        return f"NnzPrediction(nnz={self.nnz}, nprod={self.nprod}, exact={self.exact})"


# ---------------------------------------------------------------------------
# Operands


def _is_cupy_sparse(x: Any) -> bool:
    return type(x).__module__.startswith("cupyx.scipy.sparse")


def _check_op(op: str, name: str) -> str:
    if not isinstance(op, str) or op.upper() not in ("N", "T", "C", "H"):
        raise ValueError(f"{name} must be 'N', 'T' or 'C' (conjugate transpose), not {op!r}")
    return "C" if op.upper() == "H" else op.upper()


def _check_algorithm(algorithm: str) -> str:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    return algorithm


def _check_threads(threads: Optional[int]) -> Optional[int]:
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be None or a positive int, not {threads!r}")
    return int(threads)


def _value_dtype(a_dtype: np.dtype, b_dtype: np.dtype, alpha: complex) -> np.dtype:
    dtype = np.result_type(a_dtype, b_dtype)
    if dtype not in _VALUE_DTYPES:
        raise TypeError(
            f"rusparse multiplies float32, float64, complex64 and complex128 values, "
            f"not {a_dtype} and {b_dtype}; convert with .astype(numpy.float64)"
        )
    if complex(alpha).imag != 0 and dtype.kind == "f":
        dtype = np.result_type(dtype, np.complex64)
    return dtype


class _Operand:
    """op(X) of one scipy operand as zero-based CSR arrays plus the op to
    apply to them: a CSR matrix as it is (no copy), a CSC matrix as the
    CSR of its transpose with the op swapped (no copy; for op "C" on
    complex values the values are conjugated, a copy of them), anything
    else through ``tocsr()`` (a copy, which also sums duplicates)."""

    __slots__ = ("rows", "cols", "indptr", "indices", "data", "op")

    def __init__(self, x: Any, op: str, name: str):
        fmt = getattr(x, "format", None)
        if fmt not in ("csr", "csc"):
            x = x.tocsr()
            fmt = "csr"
        if x.ndim != 2:
            raise ValueError(f"{name} must be two-dimensional, not of shape {x.shape}")
        data = x.data
        if fmt == "csc":
            # CSC(X) is CSR(X^T): op(X) = op'(X^T).
            if op == "N":
                op = "T"
            elif op == "T":
                op = "N"
            else:  # conj(X)^T = conj(X^T)
                op = "N"
                if np.iscomplexobj(data):
                    data = np.conj(data)
            self.rows, self.cols = x.shape[1], x.shape[0]
        else:
            self.rows, self.cols = x.shape
        self.indptr, self.indices, self.data, self.op = x.indptr, x.indices, data, op

    def out_shape(self) -> Tuple[int, int]:
        return (self.rows, self.cols) if self.op == "N" else (self.cols, self.rows)

    def cast(self, dtype: np.dtype, index: np.dtype) -> tuple:
        """The operand as `_rusparse` takes it; arrays already of `dtype`
        and `index` (and contiguous) are passed as they are."""
        n = self.indptr[-1] if len(self.indptr) else 0
        indices, data = self.indices, self.data
        if len(indices) > n:  # spare room after the last row (scipy allows it)
            indices, data = indices[:n], data[:n]
        return (
            self.rows,
            self.cols,
            np.ascontiguousarray(self.indptr, dtype=index),
            np.ascontiguousarray(indices, dtype=index),
            np.ascontiguousarray(data, dtype=dtype),
        )


def _index_dtype(*ops: _Operand) -> np.dtype:
    wide = False
    for o in ops:
        for arr in (o.indptr, o.indices):
            if arr.dtype.kind not in "iu":
                raise TypeError(f"index arrays must be integers, not {arr.dtype}")
            if arr.dtype.itemsize > 4 or arr.dtype == np.uint32:
                wide = True
    return np.dtype(np.int64 if wide else np.int32)


def _out_shape(oa: Any, ob: Any, A: Any, B: Any, op_a: str, op_b: str) -> Tuple[int, int]:
    """C's shape from op(A)'s and op(B)'s (``out_shape()`` of each operand);
    ``ValueError`` when their inner dimensions differ."""
    (m, ka), (kb, n) = oa.out_shape(), ob.out_shape()
    if ka != kb:
        raise ValueError(
            f"dimension mismatch: op(A) is {m}x{ka} and op(B) is {kb}x{n} "
            f"(A {A.shape}, op_a={op_a!r}; B {B.shape}, op_b={op_b!r})"
        )
    return m, n


def _operands(A: Any, B: Any, op_a: str, op_b: str, alpha: complex):
    import scipy.sparse as sp

    for x, name in ((A, "A"), (B, "B")):
        if not sp.issparse(x):
            raise TypeError(
                f"{name} must be a scipy.sparse or cupyx.scipy.sparse array or matrix, "
                f"not {type(x).__name__}"
            )
    oa = _Operand(A, _check_op(op_a, "op_a"), "A")
    ob = _Operand(B, _check_op(op_b, "op_b"), "B")
    m, n = _out_shape(oa, ob, A, B, op_a, op_b)
    dtype = _value_dtype(A.dtype, B.dtype, alpha)
    return oa, ob, dtype, _index_dtype(oa, ob), (m, n)


def _result(A: Any, shape: Tuple[int, int], arrays: tuple, sorted_: bool):
    """A scipy CSR of A's kind over C's arrays, without scipy copying or
    narrowing them (its (data, indices, indptr) constructor narrows int64
    indices that fit int32, a copy and a scan)."""
    import scipy.sparse as sp

    indptr, indices, data = arrays
    cls = sp.csr_array if isinstance(A, sp.sparray) else sp.csr_matrix
    if indices.dtype == np.int32:
        # Nothing to narrow: the constructor keeps the arrays (half the
        # time of the route below, which makes and checks an empty C first).
        C = cls((data, indices, indptr), shape=shape, copy=False)
    else:
        C = cls(shape, dtype=data.dtype)
        C.indptr, C.indices, C.data = indptr, indices, data
        C.check_format(full_check=False)
    if sorted_:
        C.has_canonical_format = True
    return C


def _alpha(alpha: Union[complex, float, int]) -> Tuple[float, float]:
    try:
        a = complex(alpha)
    except (TypeError, ValueError):
        raise TypeError(f"alpha must be a number, not {type(alpha).__name__}") from None
    return (a.real, a.imag)


def _widen_on_overflow(run, dtype, index, *ops):
    """Runs the product with `index` arrays; when nnz(C) does not fit
    int32 it reruns it with int64 ones (as scipy does), a copy of the
    operands' index arrays."""
    try:
        return run(*(o.cast(dtype, index) for o in ops))
    except _rusparse.Error as e:
        status, _, message = e.args
        if index == np.int32 and status == "INVALID_VALUE" and "use 64-bit row offsets" in message:
            try:
                return run(*(o.cast(dtype, np.dtype(np.int64)) for o in ops))
            except _rusparse.Error as e2:
                _raise(e2)
        _raise(e)


# ---------------------------------------------------------------------------
# The API


def spgemm(
    A: Any,
    B: Any,
    *,
    alpha: Union[float, complex] = 1.0,
    op_a: str = "N",
    op_b: str = "N",
    threads: Optional[int] = None,
    sorted: bool = True,
    algorithm: str = "auto",
) -> Any:
    """``C = alpha * op(A) @ op(B)`` in CSR.

    Parameters
    ----------
    A, B : scipy.sparse arrays or matrices (CSR as they are, CSC without a
        copy, COO and other formats through ``tocsr()``), or
        ``cupyx.scipy.sparse`` matrices (both on the same GPU; the product
        runs there, on the current CuPy stream).
    alpha : scale of the product.
    op_a, op_b : "N" (as is), "T" (transposed) or "C" (conjugate transposed).
    threads : CPU threads (default: ``RUSPARSE_NUM_THREADS`` or all cores).
    sorted : C's columns sorted within each row (the default); ``False``
        lets rusparse leave them in any order, which can be faster.
    algorithm : "auto" (rusparse's selector) or one of ``ALGORITHMS``.

    Returns
    -------
    C as ``csr_array`` when A is a sparse array, ``csr_matrix`` when A is a
    sparse matrix (a ``cupyx.scipy.sparse.csr_matrix`` for CuPy operands),
    with the common value dtype of A, B (and a complex alpha), and int32
    indices unless an operand has int64 ones or nnz(C) needs them. C's
    arrays are the ones rusparse wrote (not copied). Duplicates and
    unsorted columns in A or B are accepted (duplicates are summed); C has
    none.

    Raises
    ------
    TypeError : an operand is not sparse, or its values are not float32,
        float64, complex64 or complex128.
    ValueError : the shapes of op(A) and op(B) do not fit, or a bad op,
        algorithm or thread count.
    RusparseError : rusparse refused the input or failed (its message).

    The GIL is released while the product runs.
    """
    if _is_cupy_sparse(A) or _is_cupy_sparse(B):
        from . import _cupy

        return _cupy.spgemm(A, B, alpha=alpha, op_a=op_a, op_b=op_b, sorted=sorted,
                            algorithm=_check_algorithm(algorithm))
    alpha_pair = _alpha(alpha)
    oa, ob, dtype, index, shape = _operands(A, B, op_a, op_b, complex(*alpha_pair))
    threads = _check_threads(threads)
    algorithm = _check_algorithm(algorithm)

    def run(a, b):
        return _rusparse.spgemm(a, b, oa.op, ob.op, alpha_pair, threads, sorted, algorithm)

    arrays = _widen_on_overflow(run, dtype, index, oa, ob)
    return _result(A, shape, arrays, sorted)


def predict_nnz(
    A: Any, B: Any, *, op_a: str = "N", op_b: str = "N", threads: Optional[int] = None
) -> NnzPrediction:
    """Predicts nnz(C) of ``op(A) @ op(B)`` without computing C.

    rusparse's sampling predictor: one pass over A plus about 1/256 of the
    products (small products are counted exactly). Returns
    ``NnzPrediction(nnz, nprod, exact)``. Raises as :func:`spgemm`.
    """
    oa, ob, dtype, index, _ = _operands(A, B, op_a, op_b, 1.0)
    threads = _check_threads(threads)
    nnz, nprod, exact = _call(
        _rusparse.predict_nnz, oa.cast(dtype, index), ob.cast(dtype, index), oa.op, ob.op, threads
    )
    return NnzPrediction(nnz, nprod, exact)


class Plan:
    """A product planned once and run again on new values of the same
    patterns (rusparse's reuse flow, cuSPARSE's ``SpGEMMreuse``).

    >>> plan = rusparse.Plan(A, B)       # symbolic phase: C's pattern
    >>> C1 = plan.multiply(A, B)
    >>> A.data *= 2                      # same pattern, new values
    >>> C2 = plan.multiply(A, B)         # numeric phase only

    ``multiply`` refuses operands whose shape, format or pattern (indptr and
    indices) differs from the planned ones (``ValueError``); it keeps a copy
    of both patterns to check that. Values may change dtype between calls.
    C's columns are always sorted.
    """

    def __init__(
        self,
        A: Any,
        B: Any,
        *,
        op_a: str = "N",
        op_b: str = "N",
        threads: Optional[int] = None,
        algorithm: str = "auto",
    ):
        if _is_cupy_sparse(A) or _is_cupy_sparse(B):
            raise TypeError("rusparse.Plan takes scipy.sparse operands; "
                            "use rusparse.spgemm for CuPy ones")
        oa, ob, dtype, index, shape = _operands(A, B, op_a, op_b, 1.0)
        self._ops = (op_a, op_b)
        self._shape = shape
        self._index = index
        self._formats = (A.format, B.format)
        self._shapes = (A.shape, B.shape)
        a, b = oa.cast(dtype, index), ob.cast(dtype, index)
        self._patterns = tuple(np.array(x[k]) for x in (a, b) for k in (2, 3))
        self._plan = _call(
            _rusparse.Plan, a, b, oa.op, ob.op, _check_threads(threads), _check_algorithm(algorithm)
        )

    @property
    def shape(self) -> Tuple[int, int]:
        """C's shape."""
        return self._shape

    @property
    def nnz(self) -> int:
        """nnz(C)."""
        return self._plan.nnz

    @property
    def algorithm(self) -> str:
        """The algorithm rusparse's planner chose."""
        return self._plan.algorithm

    def multiply(self, A: Any, B: Any, *, alpha: Union[float, complex] = 1.0) -> Any:
        """``alpha * op(A) @ op(B)`` for A and B with the planned patterns
        (new values); returns C as :func:`spgemm` does."""
        alpha_pair = _alpha(alpha)
        oa, ob, dtype, index, _ = _operands(A, B, *self._ops, complex(*alpha_pair))
        if (A.format, B.format) != self._formats or (A.shape, B.shape) != self._shapes:
            raise ValueError("A and B must have the planned formats and shapes")
        a, b = oa.cast(dtype, self._index), ob.cast(dtype, self._index)
        for old, new in zip(self._patterns, (a[2], a[3], b[2], b[3])):
            if not np.array_equal(old, new):
                raise ValueError("the pattern of A or B differs from the planned one")
        arrays = _call(self._plan.execute, a, b, alpha_pair)
        return _result(A, self._shape, arrays, True)

    __call__ = multiply

    def __repr__(self) -> str:
        return f"rusparse.Plan(shape={self._shape}, nnz={self.nnz}, algorithm={self.algorithm!r})"
