"""Peer timing for the demo's product: scipy's C = A @ A for the 5-point
Laplacian on an n x n grid (the matrix examples/demo.c builds), median of
several runs. scipy is single-threaded and leaves C's columns unsorted.

    python3 bench/scipy_laplacian.py [n] [runs]
"""
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 7
eye = sp.identity(n, format="csr", dtype=np.float64)
t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), format="csr", dtype=np.float64)
a = (sp.kron(eye, t) + sp.kron(t, eye)).tocsr()
a.sort_indices()
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    c = a @ a
    times.append(time.perf_counter() - t0)
print(
    f"scipy {sp.__name__}: n={n} rows={a.shape[0]} nnz(A)={a.nnz} nnz(C)={c.nnz} "
    f"median {1e3 * statistics.median(times):.1f} ms (min {1e3 * min(times):.1f}, max {1e3 * max(times):.1f})"
)
