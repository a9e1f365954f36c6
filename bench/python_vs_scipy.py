#!/usr/bin/env python3
"""Times rusparse.spgemm(A, A) against scipy's A @ A and against rusparse's
own C ABI, in one process, interleaved, on the generated suite and the real
matrices (issue 32's targets).

    python bench/python_vs_scipy.py --threads 2 --runs 5
    python bench/python_vs_scipy.py --threads 2 --runs 5 --passes 3
    python bench/python_vs_scipy.py --no-generated /work/shared/matrices/ex31.mtx.gz

Needs the installed package (pip install ./python), target/release/
rusparse-bench (cargo build --release --bin rusparse-bench), which generates
each matrix and dumps its CSR arrays (--dump; the real files are read from
--matrices, not copied), and target/release/librusparse.so (cargo build
--release -p rusparse --lib), the C ABI timed through ctypes.

Per matrix, after one warm-up of each, scipy and the binding are run in
turn, `--runs` rounds (fewer for slow scipy products, see --budget), then
as many rounds of scipy (not counted) and the C ABI: rusparse's two pools
(the binding's context and the C handle) are never timed one right after
the other, whose threads, spinning for a while after a call, would share
the two cores with the next product (1138_bus read 1.18x against scipy
interleaved so, 1.74x not). With `--passes N`
the whole suite is walked N times (a warm-up per matrix each time) and
the medians pool the rounds of all passes, so that a noisy stretch of a
shared machine lands on a few rounds of many matrices instead of on every
round of a few (each pass's own geomean is printed too):
  scipy   A @ A, and A @ A.T for the rectangular LP matrices, as scipy's
          users write it (scipy converts the CSC view A.T to CSR inside);
  python  rusparse.spgemm(A, A, threads=T) (op_b="T" for the LP matrices);
  c_abi   the cuSPARSE flow on a CPU handle with T threads: workEstimation
          and compute (each asked for its buffer size, then run with a numpy
          buffer), C's three arrays allocated with numpy.empty, copy.
Every timing includes C's allocation. Times are medians; ratios are
scipy/python (speed-up) and python/c_abi (binding overhead), with their
geometric means. For the LP matrices a like-for-like line follows the
table: both given Aᵀ already converted to CSR (scipy A @ AT, rusparse
spgemm(A, AT)), outside the timing.
"""

import argparse
import ctypes as ct
import json
import math
import os
import statistics
import subprocess
import sys
import shutil
import tempfile
import time

import numpy as np
import scipy
import scipy.sparse as sp

import peers  # bench/peers.py: the suite, the matrices folder and the dump loader
import rusparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The suite of bench/peers.py, and the 14 real matrices (peers.py leaves out
# the tiny 1138_bus; issue 32's target counts all 14).
GENERATED = peers.GENERATED
REAL = peers.REAL + [("1138_bus", "aa")]


def load(bench, spec, product, tmp, threads):
    """Generates/reads SPEC with rusparse-bench, which dumps its CSR arrays
    and C·x check vectors, and loads them with peers.py's loader (the same
    matrices the peers are timed on)."""
    cmd = [bench, "--threads", str(threads), "--runs", "1", "--warmup", "0", "--quiet",
           "--dump", tmp, "--product", product]
    if peers.mm_is_complex(spec):
        cmd += ["--value", "c64"]
    subprocess.run(cmd + [spec], check=True, capture_output=True)
    (d,) = [os.path.join(tmp, x) for x in os.listdir(tmp)]
    _, _, A, _, x, y = peers.load_dump(d)
    shutil.rmtree(d)
    return os.path.basename(d), sp.csr_array(A), x, y


class CAbi:
    """The C ABI (librusparse.so) on a CPU handle, through ctypes."""

    def __init__(self, path, threads):
        L = self.L = ct.CDLL(path)
        L.rusparseGetLastErrorMessage.restype = ct.c_char_p
        self.h = ct.c_void_p()
        self.ok(L.rusparseCreateWithBackend(ct.byref(self.h), 1))
        self.ok(L.rusparseSetNumThreads(self.h, threads))

    def ok(self, status):
        if status != 0:
            raise RuntimeError(self.L.rusparseGetLastErrorMessage().decode())

    def spgemm(self, A, op_b):
        L, h, ok, P = self.L, self.h, self.ok, ct.c_void_p
        vt = {np.dtype(np.float64): 1, np.dtype(np.complex128): 5}[A.dtype]
        one = np.ones(1, A.dtype)
        zero = np.zeros(1, A.dtype)
        mA, mC, d = P(), P(), P()
        i64 = ct.c_int64
        ok(L.rusparseCreateConstCsr(ct.byref(mA), i64(A.shape[0]), i64(A.shape[1]), i64(A.nnz),
                                    P(A.indptr.ctypes.data), P(A.indices.ctypes.data),
                                    P(A.data.ctypes.data), 2, 2, 0, vt))
        m = A.shape[0]
        n = A.shape[0] if op_b else A.shape[1]
        ok(L.rusparseCreateCsr(ct.byref(mC), i64(m), i64(n), i64(0), None, None, None, 2, 2, 0, vt))
        ok(L.rusparseSpGEMM_createDescr(ct.byref(d)))
        args = (h, 0, op_b, P(one.ctypes.data), mA, mA, P(zero.ctypes.data), mC, vt, 0, d)
        bufs = []
        for phase in (L.rusparseSpGEMM_workEstimation, L.rusparseSpGEMM_compute):
            size = ct.c_size_t(0)
            ok(phase(*args, ct.byref(size), None))
            buf = np.empty(size.value, np.uint8)
            bufs.append(buf)
            ok(phase(*args, ct.byref(size), P(buf.ctypes.data)))
        r, c, nnz = i64(), i64(), i64()
        ok(L.rusparseSpMatGetSize(mC, ct.byref(r), ct.byref(c), ct.byref(nnz)))
        indptr = np.empty(m + 1, np.int32)
        indices = np.empty(nnz.value, np.int32)
        data = np.empty(nnz.value, A.dtype)
        ok(L.rusparseCsrSetPointers(mC, P(indptr.ctypes.data), P(indices.ctypes.data),
                                    P(data.ctypes.data)))
        ok(L.rusparseSpGEMM_copy(*args))
        L.rusparseSpGEMM_destroyDescr(d)
        L.rusparseDestroySpMat(mC)
        L.rusparseDestroySpMat(mA)
        return sp.csr_array((data, indices, indptr), shape=(m, n))


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", help="generator specs or .mtx files (default: the suite)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--passes", type=int, default=1,
                    help="walks of the whole suite; medians pool the rounds of all of them")
    ap.add_argument("--budget", type=float, default=20.0,
                    help="seconds of scipy per matrix at most (fewer runs when slower; at least 1)")
    ap.add_argument("--no-generated", action="store_true")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--matrices", help="the real matrices' folder (default: as bench/peers.py finds it)")
    ap.add_argument("--bench", default=os.path.join(ROOT, "target", "release", "rusparse-bench"))
    ap.add_argument("--lib", default=os.path.join(ROOT, "target", "release", "librusparse.so"))
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()

    # (spec, product): A·Aᵀ where the suite says so (the rectangular LP
    # matrices), A·A otherwise.
    specs = [(s, "aat" if os.path.basename(s).startswith("lp_") else "aa") for s in a.specs]
    if not specs:
        if not a.no_generated:
            specs += [(s, "aa") for s in GENERATED]
        if not a.no_real:
            folder = peers.matrices_dir(argparse.Namespace(matrices_dir=a.matrices))
            for stem, product in REAL:
                p = os.path.join(folder, stem + ".mtx.gz")
                specs.append((p if os.path.exists(p) else os.path.join(folder, stem + ".mtx"), product))
    cabi = CAbi(a.lib, a.threads)
    rows, notes = [], []
    print(f"# rusparse {rusparse.__version__}, {a.threads} threads, scipy {scipy.__version__}, "
          f"numpy {np.__version__}, load average {os.getloadavg()[0]:.1f}", flush=True)
    print("| matrix | nnz(A) | nnz(C) | scipy s | rusparse.spgemm s | C ABI s | scipy / python | python / C ABI | runs |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
    # Every matrix is loaded (and checked) once; each pass then walks the
    # whole suite, `--runs` rounds a matrix, and the medians pool the rounds
    # of all passes, so that a noisy minute of the machine falls on a few
    # rounds of many matrices rather than on all rounds of a few.
    loaded = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec, product in specs:
            name, A, x, y = load(a.bench, spec, product, tmp, a.threads)
            loaded.append((name, A, x, y, 1 if product == "aat" else 0))
    ts = {m[0]: {"scipy": [], "python": [], "c_abi": [], "pre_scipy": [], "pre_python": []}
          for m in loaded}
    info = {}
    for p in range(a.passes):
        pass_ratios = []
        for name, A, x, y, op_b in loaded:
            AT = A.T.tocsr() if op_b else A
            AT.sort_indices()
            f_scipy = (lambda: A @ A.T) if op_b else (lambda: A @ A)
            f_py = lambda: rusparse.spgemm(A, A, op_b="T" if op_b else "N", threads=a.threads)
            f_c = lambda: cabi.spgemm(A, op_b)
            # Warm-up, and (first pass) the check of both rusparse results
            # against rusparse-bench's C·x.
            t0, _ = timed(f_scipy)
            for f in (f_py, f_c):
                C = f()
                if p == 0:
                    err = np.abs(C @ x - y).max() / max(1.0, np.abs(y).max())
                    assert err < 1e-9, (name, err)
            runs = max(1, min(a.runs, int(a.budget / max(t0, 1e-9))))
            info[name] = (int(A.nnz), int(C.nnz), runs * (p + 1), op_b)
            t = ts[name]
            this = {"scipy": [], "python": []}
            for _ in range(runs):
                for k, f in (("scipy", f_scipy), ("python", f_py)):
                    dt = timed(f)[0]
                    t[k].append(dt)
                    this[k].append(dt)
            # The C ABI in rounds of its own, each after the same scipy
            # product as the binding's (not counted): its handle's pool
            # threads, still spinning after a call, would otherwise share
            # the two cores with the binding's next product.
            for _ in range(runs):
                timed(f_scipy)
                t["c_abi"].append(timed(f_c)[0])
            if op_b:
                for _ in range(runs):
                    t["pre_scipy"].append(timed(lambda: A @ AT)[0])
                    t["pre_python"].append(
                        timed(lambda: rusparse.spgemm(A, AT, threads=a.threads))[0])
            pass_ratios.append(statistics.median(this["scipy"]) / statistics.median(this["python"]))
        if a.passes > 1:
            print(f"# pass {p + 1}: geomean scipy / rusparse.spgemm {g(pass_ratios):.2f}x", flush=True)
    for name, _, _, _, _ in loaded:
        t = ts[name]
        nnz_a, nnz_c, runs, op_b = info[name]
        med = {k: statistics.median(t[k]) for k in ("scipy", "python", "c_abi")}
        row = {"matrix": name, "nnz_a": nnz_a, "nnz_c": nnz_c, "runs": runs,
               **{f"{k}_s": v for k, v in med.items()},
               "speedup": med["scipy"] / med["python"], "overhead": med["python"] / med["c_abi"]}
        if op_b:
            pm = {k: statistics.median(t["pre_" + k]) for k in ("scipy", "python")}
            row["aat_given"] = {f"{k}_s": v for k, v in pm.items()}
            notes.append(f"{name}, Aᵀ given to both as CSR: scipy {pm['scipy']:.4f} s, "
                         f"rusparse.spgemm {pm['python']:.4f} s, {pm['scipy'] / pm['python']:.2f}x")
        rows.append(row)
        print(f"| {name} | {nnz_a:,} | {nnz_c:,} | {med['scipy']:.4f} | {med['python']:.4f} | "
              f"{med['c_abi']:.4f} | {row['speedup']:.2f} | {row['overhead']:.3f} | {runs} |", flush=True)
    for n in notes:
        print(f"\nlike-for-like: {n}")
    big = [r["overhead"] for r in rows if r["c_abi_s"] > 0.010]
    print(f"\ngeomean scipy / rusparse.spgemm over {len(rows)} matrices: {g([r['speedup'] for r in rows]):.2f}x")
    print(f"geomean rusparse.spgemm / C ABI over all: {g([r['overhead'] for r in rows]):.3f}; "
          f"over the {len(big)} products above 10 ms: {g(big):.3f} (max {max(big, default=float('nan')):.3f})")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
