"""rusparse.spgemm / predict_nnz / Plan against scipy's own product.

Values are small integers (real and imaginary parts), so every product is
exact in every dtype and results compare with ``==``.
"""

import threading

import numpy as np
import pytest
import scipy.sparse as sp

import rusparse

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
INDEX = [np.int32, np.int64]
OPS = ["N", "T", "C"]


def random_csr(m, n, density, dtype, index=np.int32, seed=0, kind="array"):
    rng = np.random.default_rng(seed)
    nnz = int(round(m * n * density))
    rows = rng.integers(0, max(m, 1), nnz)
    cols = rng.integers(0, max(n, 1), nnz)
    vals = rng.integers(1, 4, nnz) * rng.choice([-1, 1], nnz)
    if np.dtype(dtype).kind == "c":
        vals = vals + 1j * rng.integers(-2, 3, nnz)
    cls = sp.coo_array if kind == "array" else sp.coo_matrix
    A = cls((vals.astype(dtype), (rows, cols)), shape=(m, n)).tocsr()
    A.sum_duplicates()
    A.eliminate_zeros()  # duplicates that cancelled
    A.indptr = A.indptr.astype(index)
    A.indices = A.indices.astype(index)
    return A


def op(X, o):
    return {"N": X, "T": X.T, "C": X.conj().T}[o]


def expected(A, B, op_a="N", op_b="N", alpha=1.0):
    return (alpha * (op(A, op_a) @ op(B, op_b))).toarray()


def check_canonical(C):
    """C is CSR with sorted columns and no duplicates in every row."""
    assert C.format == "csr"
    for i in range(C.shape[0]):
        row = C.indices[C.indptr[i] : C.indptr[i + 1]]
        assert np.all(np.diff(row) > 0), f"row {i} of C is not sorted and unique: {row}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", INDEX)
@pytest.mark.parametrize("op_a", OPS)
@pytest.mark.parametrize("op_b", OPS)
def test_types_and_ops(dtype, index, op_a, op_b):
    # op(A) is 13x9 and op(B) 9x11 whatever the ops.
    A = random_csr(*((13, 9) if op_a == "N" else (9, 13)), 0.3, dtype, index, seed=1)
    B = random_csr(*((9, 11) if op_b == "N" else (11, 9)), 0.3, dtype, index, seed=2)
    C = rusparse.spgemm(A, B, op_a=op_a, op_b=op_b)
    assert isinstance(C, sp.csr_array)
    assert C.dtype == np.dtype(dtype)
    assert C.indptr.dtype == np.dtype(index) and C.indices.dtype == np.dtype(index)
    assert C.shape == (13, 11)
    np.testing.assert_array_equal(C.toarray(), expected(A, B, op_a, op_b))
    check_canonical(C)


@pytest.mark.parametrize("fmt_a", ["csr", "csc", "coo"])
@pytest.mark.parametrize("fmt_b", ["csr", "csc", "coo"])
@pytest.mark.parametrize("op_a", OPS)
def test_formats(fmt_a, fmt_b, op_a):
    A = random_csr(10, 10, 0.3, np.complex128, seed=3).asformat(fmt_a)
    B = random_csr(10, 7, 0.3, np.complex128, seed=4).asformat(fmt_b)
    C = rusparse.spgemm(A, B, op_a=op_a, alpha=2 - 1j)
    assert C.format == "csr"
    np.testing.assert_array_equal(C.toarray(), expected(A, B, op_a, "N", 2 - 1j))


@pytest.mark.parametrize("kind", ["array", "matrix"])
def test_result_kind(kind):
    A = random_csr(8, 8, 0.4, np.float64, seed=5, kind=kind)
    C = rusparse.spgemm(A, A)
    assert isinstance(C, sp.csr_array if kind == "array" else sp.csr_matrix)
    np.testing.assert_array_equal(C.toarray(), (A @ A).toarray())


@pytest.mark.parametrize(
    "m,k,n",
    [(0, 0, 0), (0, 5, 3), (4, 0, 3), (4, 5, 0), (1, 1, 1), (3, 40, 2), (40, 3, 50)],
)
@pytest.mark.parametrize("index", INDEX)
def test_shapes(m, k, n, index):
    A = random_csr(m, k, 0.3, np.float64, index, seed=6)
    B = random_csr(k, n, 0.3, np.float64, index, seed=7)
    C = rusparse.spgemm(A, B)
    assert C.shape == (m, n)
    assert C.indptr.dtype == np.dtype(index)
    np.testing.assert_array_equal(C.toarray(), expected(A, B))


def test_empty_operands():
    A = sp.csr_array((6, 4), dtype=np.float32)
    B = random_csr(4, 5, 0.5, np.float32, seed=8)
    C = rusparse.spgemm(A, B)
    assert C.nnz == 0 and C.shape == (6, 5) and C.dtype == np.float32
    assert len(C.indptr) == 7 and not C.indptr.any()


def test_non_canonical_input_is_summed():
    # Row 0 has columns [2, 0, 2] (unsorted, 2 twice); row 1 [1, 1].
    indptr = np.array([0, 3, 5], dtype=np.int32)
    indices = np.array([2, 0, 2, 1, 1], dtype=np.int32)
    data = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    A = sp.csr_array((data, indices, indptr), shape=(2, 3))
    assert not A.has_canonical_format
    B = random_csr(3, 4, 0.6, np.float64, seed=9)
    C = rusparse.spgemm(A, B)
    dense = np.zeros((2, 3))
    np.add.at(dense, (np.array([0, 0, 0, 1, 1]), indices), data)
    np.testing.assert_array_equal(C.toarray(), dense @ B.toarray())
    check_canonical(C)


def test_spare_room_after_the_last_row():
    # scipy allows indices/data longer than indptr[-1].
    A = sp.csr_array(
        (np.array([1.0, 2.0, 9.0]), np.array([0, 1, 5], dtype=np.int32),
         np.array([0, 1, 2], dtype=np.int32)),
        shape=(2, 2),
    )
    C = rusparse.spgemm(A, A)
    np.testing.assert_array_equal(C.toarray(), [[1.0, 0.0], [0.0, 4.0]])


def test_mixed_dtypes_and_complex_alpha():
    A = random_csr(7, 7, 0.4, np.float32, seed=10)
    B = random_csr(7, 7, 0.4, np.complex128, seed=11)
    C = rusparse.spgemm(A, B)
    assert C.dtype == np.complex128
    np.testing.assert_array_equal(C.toarray(), expected(A, B))
    C = rusparse.spgemm(A, A, alpha=1j)
    assert C.dtype == np.complex64
    np.testing.assert_array_equal(C.toarray(), expected(A, A, alpha=1j))


def test_mixed_index_widths_give_int64():
    A = random_csr(9, 9, 0.3, np.float64, np.int32, seed=12)
    B = random_csr(9, 9, 0.3, np.float64, np.int64, seed=13)
    C = rusparse.spgemm(A, B)
    assert C.indices.dtype == np.int64
    np.testing.assert_array_equal(C.toarray(), expected(A, B))


@pytest.mark.parametrize("algorithm", rusparse.ALGORITHMS)
@pytest.mark.parametrize("threads", [None, 1, 2])
def test_algorithms_and_threads(algorithm, threads):
    A = random_csr(60, 60, 0.08, np.float64, seed=14)
    C = rusparse.spgemm(A, A, algorithm=algorithm, threads=threads)
    np.testing.assert_array_equal(C.toarray(), expected(A, A))
    check_canonical(C)


def test_unsorted_output_has_the_same_entries():
    A = random_csr(50, 50, 0.2, np.float64, seed=15)
    C = rusparse.spgemm(A, A, sorted=False)
    np.testing.assert_array_equal(C.toarray(), expected(A, A))
    C.sort_indices()
    check_canonical(C)


def test_no_copy_of_inputs_or_output():
    A = random_csr(30, 30, 0.2, np.float64, np.int64, seed=16)
    o = rusparse._Operand(A, "N", "A")
    arrays = o.cast(np.dtype(np.float64), np.dtype(np.int64))
    assert arrays[2] is A.indptr and arrays[3] is A.indices and arrays[4] is A.data
    # C's arrays are the ones rusparse wrote (numpy arrays it filled in
    # place), and the scipy result is built around them: scipy neither
    # copies them nor narrows the int64 indices to int32.
    out = rusparse._rusparse.spgemm(arrays, arrays, "N", "N", (1.0, 0.0), None, True, "auto")
    C = rusparse._result(A, A.shape, out, True)
    for mine, theirs in zip((C.indptr, C.indices, C.data), out):
        # The same memory (scipy's prune keeps a full-length view).
        assert mine.ctypes.data == theirs.ctypes.data and len(mine) == len(theirs)
    assert C.indices.dtype == np.int64
    for arr in out:
        assert arr.flags.owndata and arr.flags.writeable
    np.testing.assert_array_equal(C.toarray(), expected(A, A))
    assert rusparse.spgemm(A, A).indices.dtype == np.int64


def test_predict_nnz():
    A = random_csr(40, 30, 0.1, np.float64, seed=17)
    B = random_csr(30, 20, 0.1, np.float64, seed=18)
    p = rusparse.predict_nnz(A, B)
    assert p.exact  # small products are counted exactly
    # nnz(C) is structural: scipy drops entries that cancel to 0, rusparse
    # keeps them (|A| @ |B| has no cancellation).
    assert p.nnz == rusparse.spgemm(A, B).nnz == (abs(A) @ abs(B)).nnz
    assert p.nprod == sum(
        B.indptr[j + 1] - B.indptr[j] for j in A.indices
    )
    pt = rusparse.predict_nnz(A, A, op_a="T")
    assert pt.nnz == (abs(A).T @ abs(A)).nnz


@pytest.mark.parametrize("index", INDEX)
def test_plan_reuse(index):
    A = random_csr(25, 20, 0.2, np.float64, index, seed=19)
    B = random_csr(20, 15, 0.2, np.float64, index, seed=20)
    plan = rusparse.Plan(A, B)
    assert plan.shape == (25, 15) and plan.nnz == (abs(A) @ abs(B)).nnz
    np.testing.assert_array_equal(plan.multiply(A, B).toarray(), expected(A, B))
    A2, B2 = A.copy(), B.copy()
    A2.data = A2.data * 3 - 1
    B2.data = -B2.data
    C2 = plan.multiply(A2, B2, alpha=2.0)
    np.testing.assert_array_equal(C2.toarray(), expected(A2, B2, alpha=2.0))
    # New values of another dtype on the same patterns.
    C3 = plan(A2.astype(np.complex64), B2.astype(np.complex64), alpha=1j)
    assert C3.dtype == np.complex64
    np.testing.assert_array_equal(C3.toarray(), expected(A2, B2, alpha=1j))


def test_plan_refuses_another_pattern():
    A = random_csr(12, 12, 0.3, np.float64, seed=21)
    plan = rusparse.Plan(A, A)
    A2 = A.copy()
    A2.indices = A2.indices.copy()
    row = next(i for i in range(12) if A2.indptr[i + 1] > A2.indptr[i])
    k = A2.indptr[row]
    A2.indices[k] = (A2.indices[k] + 1) % 12  # same nnz, another column
    with pytest.raises(ValueError, match="pattern"):
        plan.multiply(A2, A)
    with pytest.raises(ValueError, match="shapes"):
        plan.multiply(random_csr(13, 12, 0.3, np.float64, seed=22), A)


def test_dimension_mismatch():
    A = random_csr(4, 5, 0.5, np.float64)
    with pytest.raises(ValueError, match="dimension mismatch"):
        rusparse.spgemm(A, A)
    with pytest.raises(ValueError, match="dimension mismatch"):
        rusparse.spgemm(A, A, op_a="T", op_b="T")
    with pytest.raises(ValueError, match="dimension mismatch"):
        rusparse.predict_nnz(A, A)
    assert rusparse.spgemm(A, A, op_b="T").shape == (4, 4)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.bool_])
def test_bad_value_dtypes(dtype):
    A = sp.csr_array(np.eye(3, dtype=dtype))
    with pytest.raises(TypeError, match="float32, float64, complex64 and complex128"):
        rusparse.spgemm(A, A)


def test_bad_arguments():
    A = random_csr(4, 4, 0.5, np.float64)
    with pytest.raises(TypeError, match="scipy.sparse"):
        rusparse.spgemm(A.toarray(), A)
    with pytest.raises(TypeError, match="scipy.sparse"):
        rusparse.spgemm(A, [[1.0]])
    with pytest.raises(ValueError, match="op_a"):
        rusparse.spgemm(A, A, op_a="X")
    with pytest.raises(ValueError, match="algorithm"):
        rusparse.spgemm(A, A, algorithm="fastest")
    with pytest.raises(ValueError, match="threads"):
        rusparse.spgemm(A, A, threads=0)
    with pytest.raises(TypeError, match="alpha"):
        rusparse.spgemm(A, A, alpha="two")


def test_rusparse_errors_carry_its_message():
    # A malformed CSR (a column out of range), built without scipy's checks.
    A = sp.csr_array((3, 3))
    A.indptr = np.array([0, 1, 1, 1], dtype=np.int32)
    A.indices = np.array([7], dtype=np.int32)
    A.data = np.array([1.0])
    with pytest.raises(rusparse.RusparseError) as e:
        rusparse.spgemm(A, A)
    assert e.value.status == "INVALID_VALUE" and e.value.code == 3
    assert "7" in str(e.value) and "out of range" in str(e.value)
    # Decreasing row offsets.
    A.indptr = np.array([0, 1, 0, 1], dtype=np.int32)
    A.indices = np.array([0], dtype=np.int32)
    with pytest.raises(rusparse.RusparseError, match="rowOffsets decrease"):
        rusparse.predict_nnz(A, A)


def test_concurrent_products_from_threads():
    # The GIL is released during the product: products on several Python
    # threads run concurrently and each gets its own right answer.
    mats = [random_csr(120, 120, 0.05, np.float64, seed=30 + i) for i in range(4)]
    out = [None] * 4

    def work(i):
        out[i] = rusparse.spgemm(mats[i], mats[i], threads=1)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for M, C in zip(mats, out):
        np.testing.assert_array_equal(C.toarray(), expected(M, M))


def test_thread_counts_mixed_on_each_python_thread():
    # Each Python thread's context for a thread count computes on that
    # thread (its pool includes it); a thread belongs to one such pool, so
    # its other counts, and the default, get pools of their own. Every
    # combination, on the main thread and on others at once, is right.
    mats = [random_csr(300, 300, 0.02, np.float64, seed=40 + i) for i in range(3)]
    errors = []

    def work(k):
        try:
            for threads in (2, None, 1, 3, 2):
                for M in mats:
                    C = rusparse.spgemm(M, M, threads=threads)
                    np.testing.assert_array_equal(C.toarray(), expected(M, M))
        except Exception as e:  # reported below, on the main thread
            errors.append((k, e))

    work(-1)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
