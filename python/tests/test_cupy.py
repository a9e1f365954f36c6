"""The CuPy path of rusparse.spgemm.

Duck-typed stand-ins for ``cupy`` and ``cupyx.scipy.sparse`` test the
dispatch everywhere: their "device" arrays are numpy arrays, which a CUDA
handle accepts as host arrays it stages, so on a machine with a GPU the
product runs and is checked; without one the CUDA handle cannot be made and
the call must raise RusparseError (NOT_SUPPORTED), never crash. The real
CuPy test runs where CuPy finds a GPU and otherwise skips visibly (fails
under RUSPARSE_REQUIRE_GPU=1).
"""

import sys
import types

import numpy as np
import pytest
import scipy.sparse as sp

import rusparse
from conftest import skip_or_fail
from test_spgemm import expected, random_csr


class FakeDeviceArray:
    """A 1-D array with CuPy's __cuda_array_interface__ over numpy memory."""

    def __init__(self, a):
        self.a = np.ascontiguousarray(a)

    dtype = property(lambda self: self.a.dtype)
    size = property(lambda self: self.a.size)
    shape = property(lambda self: self.a.shape)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.a.shape, "typestr": self.a.dtype.str,
                "data": (self.a.ctypes.data, False), "strides": None, "version": 3}

    def astype(self, dtype, copy=True):
        return FakeDeviceArray(self.a.astype(dtype, copy=copy))

    def conj(self):
        return FakeDeviceArray(self.a.conj())

    def copy(self):
        return FakeDeviceArray(self.a.copy())

    def __len__(self):
        return len(self.a)

    def get(self):
        return self.a


def fake_modules():
    cupy = types.ModuleType("cupy")
    cupy.empty = lambda n, dtype: FakeDeviceArray(np.empty(n, dtype))
    stream = types.SimpleNamespace(ptr=0)
    cupy.cuda = types.SimpleNamespace(get_current_stream=lambda: stream)

    sparse = types.ModuleType("cupyx.scipy.sparse")

    class _Compressed:
        def __init__(self, arg, shape):
            data, indices, indptr = arg
            self.data, self.indices, self.indptr = data, indices, indptr
            self.shape, self.dtype = tuple(shape), data.dtype
            self.has_canonical_format = False

        def get(self):
            cls = sp.csr_matrix if self.format == "csr" else sp.csc_matrix
            return cls((self.data.get(), self.indices.get(), self.indptr.get()), shape=self.shape)

    class csr_matrix(_Compressed):
        format = "csr"

    class csc_matrix(_Compressed):
        format = "csc"

    for cls in (csr_matrix, csc_matrix):
        cls.__module__ = "cupyx.scipy.sparse._compressed"
    sparse.csr_matrix, sparse.csc_matrix = csr_matrix, csc_matrix
    sparse.issparse = lambda x: isinstance(x, _Compressed)
    cupyx = types.ModuleType("cupyx")
    scipy_ = types.ModuleType("cupyx.scipy")
    cupyx.scipy, scipy_.sparse = scipy_, sparse
    return {"cupy": cupy, "cupyx": cupyx, "cupyx.scipy": scipy_, "cupyx.scipy.sparse": sparse}


@pytest.fixture
def fake(monkeypatch):
    mods = fake_modules()
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    sparse = mods["cupyx.scipy.sparse"]

    def to_device(X):
        cls = sparse.csr_matrix if X.format == "csr" else sparse.csc_matrix
        return cls((FakeDeviceArray(X.data), FakeDeviceArray(X.indices),
                    FakeDeviceArray(X.indptr)), shape=X.shape)

    return to_device


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("fmt_a,op_a", [("csr", "N"), ("csc", "N"), ("csc", "C"), ("csr", "T")])
def test_fake_cupy_runs_on_the_gpu_or_says_why_not(fake, dtype, fmt_a, op_a):
    A = random_csr(12, 12, 0.3, dtype, seed=40).asformat(fmt_a)
    B = random_csr(12, 9, 0.3, dtype, np.int64, seed=41)
    dA, dB = fake(A), fake(B)
    try:
        C = rusparse.spgemm(dA, dB, op_a=op_a, alpha=2.0)
    except rusparse.RusparseError as e:
        # No GPU (or no CUDA driver) here: a clear error, not a crash.
        assert e.status == "NOT_SUPPORTED", (e.status, str(e))
        assert "rusparseCreateWithBackend" in str(e) or "CUDA" in str(e), str(e)
        return
    assert type(C).__module__.startswith("cupyx.scipy.sparse") and C.format == "csr"
    assert C.has_canonical_format
    assert C.indices.dtype == np.int64  # B's index width
    np.testing.assert_array_equal(C.get().toarray(), expected(A, B, op_a, "N", 2.0))


def test_fake_cupy_argument_errors_come_before_the_gpu(fake):
    A = random_csr(5, 4, 0.5, np.float64, seed=42)
    with pytest.raises(ValueError, match="dimension mismatch"):
        rusparse.spgemm(fake(A), fake(A))
    with pytest.raises(TypeError, match="both operands must be on the GPU"):
        rusparse.spgemm(fake(A), A.T.tocsr())
    I = sp.csr_array(np.eye(4, dtype=np.int32))
    with pytest.raises(TypeError, match="float32, float64"):
        rusparse.spgemm(fake(I), fake(I))
    with pytest.raises(ValueError, match="op_b"):
        rusparse.spgemm(fake(A), fake(A), op_b="Q")
    with pytest.raises(TypeError, match="CuPy"):
        rusparse.Plan(fake(A), fake(A.T.tocsr()))


def test_real_cupy(request):
    try:
        import cupy
        import cupyx.scipy.sparse as csp

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as e:  # ImportError, CUDA errors
        skip_or_fail(request, "CuPy with a CUDA GPU", f"{type(e).__name__}: {e}")
        return
    for dtype in (np.float32, np.float64, np.complex64, np.complex128):
        for index in (np.int32, np.int64):
            A = random_csr(300, 200, 0.03, dtype, index, seed=43)
            B = random_csr(200, 250, 0.03, dtype, index, seed=44)
            dA = csp.csr_matrix(A)
            dB = csp.csr_matrix(B)
            stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                C = rusparse.spgemm(dA, dB, alpha=3.0)
                Ct = rusparse.spgemm(csp.csc_matrix(A), dB)  # CSC: the transposed view
            stream.synchronize()
            assert isinstance(C, csp.csr_matrix) and C.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(C.get().toarray(), expected(A, B, alpha=3.0))
            np.testing.assert_array_equal(Ct.get().toarray(), expected(A, B))
    # Shape errors and empty products on the device.
    with pytest.raises(ValueError):
        rusparse.spgemm(dA, dA)
    Z = rusparse.spgemm(csp.csr_matrix((0, 200), dtype=np.float64), csp.csr_matrix(B.astype(np.float64)))
    assert Z.shape == (0, 250) and Z.nnz == 0
