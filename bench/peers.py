#!/usr/bin/env python3
"""Time rusparse's CPU peers -- scipy, Intel MKL (sparse_dot_mkl + the `mkl`
wheel) and SuiteSparse:GraphBLAS (python-graphblas) -- on exactly the matrices
rusparse-bench multiplies, with the same thread count, in the same run, check
their products against rusparse's, and print a markdown ratio table.

    python3 bench/peers.py                      # generated suite, 2 threads
    python3 bench/peers.py --real --threads 2   # + the real matrices
    python3 bench/peers.py --no-generated --real --runs 3
    python3 bench/peers.py stencil2d_5pt:300 /path/to/m.mtx.gz
    python3 bench/peers.py --standin stencil2d_5pt:300 /work/shared/matrices/bcsstk15.mtx.gz

On its first run the script makes its own virtual environment (bench/.venv,
see --venv), pip-installs bench/requirements-peers.txt into it and re-executes
itself there; nothing goes into the system Python.  See bench/PEERS.md for the
method (what each peer's timing contains, how memory is measured, limits).

Per matrix it runs `rusparse-bench --dump TMP --json ... SPEC` (one matrix per
invocation, so rusparse's and the peers' timings are interleaved), then each
peer in a fresh subprocess (`peers.py --worker PEER ...`) that loads the
dumped CSR arrays, times the product, checks C*x against rusparse's check_y
and measures its peak memory.  Only the standard library is imported at the
top, so `--help` works before the venv exists.
"""
import argparse
import datetime
import gc
import glob
import hashlib
import gzip
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_BENCH = os.path.join(ROOT, "target", "release", "rusparse-bench")
DEFAULT_VENV = os.path.join(HERE, ".venv")
REQUIREMENTS = os.path.join(HERE, "requirements-peers.txt")
ENV_MARK = "RUSPARSE_PEERS_VENV"

GENERATED = [
    "uniform_r4:200000",
    "stencil2d_5pt:725",
    "stencil3d_7pt:100",
    "fem27_3dof:28",
    "band_r120:36000",
    "delaunay:1048576",
    "rmat:18:4",
]
# (file stem in the matrices folder, product).  qc324 is complex: it is run as
# complex128 by every tool (scipy, MKL's z-routines, GraphBLAS FC64).
REAL = [
    ("bcsstk15", "aa"),        # structural FEM
    ("ex31", "aa"),            # CFD (explicit zeros)
    ("memplus", "aa"),         # circuit (explicit zeros)
    ("luxembourg_osm", "aa"),  # road network
    ("ego-Facebook", "aa"),    # social
    ("ca-CondMat", "aa"),      # social / collaboration
    ("wiki-Vote", "aa"),
    ("as20000102", "aa"),
    ("HEP-th-new", "aa"),
    ("orani678", "aa"),        # economics
    ("qc324", "aa"),           # complex
    ("lp_maros_r7", "aat"),    # rectangular
    ("lp_fit2p", "aat"),       # rectangular, C dense 3000 x 3000
]
# Each peer as its users run it (its default mode) and, beside it, the
# like-for-like variant that returns what rusparse returns (sorted rows):
#   mkl               mkl_sparse_spmm, C's rows unsorted (sparse_dot_mkl's default)
#   mkl_sorted        the same + mkl_sparse_order (reorder_output=True), timed
#   graphblas         GrB_mxm, C left as GraphBLAS leaves it (possibly jumbled)
#   graphblas_sorted  the same + C.wait(), which finishes pending work and sorts
# Every one runs in its own process, so no tool's spinning threads slow the next.
PEERS = ("scipy", "mkl", "mkl_sorted", "graphblas", "graphblas_sorted")
PEER_LABEL = {"scipy": "scipy", "mkl": "MKL", "mkl_sorted": "MKL sorted", "graphblas": "GraphBLAS",
              "graphblas_sorted": "GraphBLAS wait"}
INT32_MAX = 2**31 - 1

# Fallback pins if bench/requirements-peers.txt is missing.
FALLBACK_PINS = [
    "numpy==2.4.6", "scipy==1.17.1", "sparse_dot_mkl==0.9.10", "mkl==2026.2.0",
    "python-graphblas==2025.2.0", "suitesparse-graphblas==9.4.5.0",
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def die(msg, code=2):
    log("peers.py: error: " + msg)
    sys.exit(code)


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Time scipy, Intel MKL and SuiteSparse:GraphBLAS on rusparse-bench's "
                    "matrices, check them against rusparse, print a ratio table.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="SPEC: a rusparse-bench generated family (uniform_r4:200000, stencil2d_5pt:725, "
               "stencil3d_7pt:100, fem27_3dof:28, band_r120:36000, delaunay:1048576, rmat:18:4) "
               "or a .mtx/.mtx.gz path. With no SPEC the generated suite runs (unless --no-generated).")
    p.add_argument("specs", nargs="*", metavar="SPEC",
                   help="matrices to run instead of the default generated suite")
    p.add_argument("--threads", type=int, default=2, help="threads for rusparse, MKL, GraphBLAS (default 2)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per tool (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up runs per tool (default 1)")
    p.add_argument("--real", action="store_true", help="add the chosen real matrices (see REAL in the script)")
    p.add_argument("--no-generated", action="store_true", help="leave out the default generated suite")
    p.add_argument("--only-peers", action="store_true",
                   help="call rusparse-bench only for the dump (--runs 1 --warmup 0); report no rusparse timing")
    p.add_argument("--peers", default=",".join(PEERS),
                   help="comma-separated subset of scipy,mkl,graphblas (default all)")
    p.add_argument("--product", choices=("aa", "ab", "aat"), default=None,
                   help="--product passed to rusparse-bench for positional SPECs (default: the bench's own)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds allowed for each subprocess (rusparse-bench, each peer) per matrix")
    p.add_argument("--rusparse-bench", default=DEFAULT_BENCH, metavar="PATH",
                   help="rusparse-bench binary (default: <repo>/target/release/rusparse-bench)")
    p.add_argument("--standin", action="store_true",
                   help="do not call rusparse-bench: make the dump with scipy (stencil2d_5pt:N, uniform_rK:N, "
                        ".mtx) and time scipy in rusparse's column -- for testing this script only")
    p.add_argument("--matrices-dir", default=None, help="folder of the real .mtx.gz files")
    p.add_argument("--out", default=None, help="output folder (default bench/results/<date>/)")
    p.add_argument("--tmp", default=None, help="folder for the per-matrix dumps (default: system temp)")
    p.add_argument("--keep-dumps", action="store_true", help="keep the dump folders")
    p.add_argument("--rusparse-any-order", action="store_true",
                   help="also time rusparse with unsorted rows (--column-order any), as its own column")
    p.add_argument("--tol", type=float, default=1e-9, help="relative max-norm tolerance of the C*x check")
    p.add_argument("--venv", default=DEFAULT_VENV, help="virtual environment to create/use (default bench/.venv)")
    p.add_argument("--no-venv", action="store_true", help="use the current interpreter as it is")
    # Internal: worker mode, one peer on one dump, in a fresh process.
    p.add_argument("--worker", choices=PEERS, help=argparse.SUPPRESS)
    p.add_argument("--dump-dir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--expect-nnz", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.threads < 1 or a.runs < 1 or a.warmup < 0:
        p.error("--threads and --runs must be >= 1, --warmup >= 0")
    a.peer_list = [x.strip() for x in a.peers.split(",") if x.strip()]
    bad = [x for x in a.peer_list if x not in PEERS]
    if bad:
        p.error("unknown peer(s): " + ", ".join(bad))
    return a


# --------------------------------------------------------------------------
# Virtual environment and re-exec
# --------------------------------------------------------------------------

def find_mkl_rt(prefix):
    """pip's `mkl` wheel puts libmkl_rt.so.N into <prefix>/lib, where
    sparse_dot_mkl's ctypes.util.find_library does not look."""
    cands = glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*"))

    def key(path):
        m = re.search(r"\.so\.(\d+)$", path)
        return int(m.group(1)) if m else -1

    cands.sort(key=key, reverse=True)
    return cands[0] if cands else None


def requirements_lines():
    if os.path.exists(REQUIREMENTS):
        with open(REQUIREMENTS) as f:
            return [ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()]
    return list(FALLBACK_PINS)


def ensure_venv(venv):
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        if sys.version_info[:2] != (3, 11):
            log(f"peers.py: note: the pins were verified with Python 3.11; this is {platform.python_version()}")
        log(f"peers.py: creating virtual environment {venv}")
        subprocess.check_call([sys.executable, "-m", "venv", venv])
    reqs = requirements_lines()
    digest = hashlib.sha256("\n".join(reqs).encode()).hexdigest()
    stamp = os.path.join(venv, ".peers-requirements.sha256")
    have = open(stamp).read().strip() if os.path.exists(stamp) else ""
    if have != digest:
        log("peers.py: installing " + " ".join(r for r in reqs[:6]) + " ... into " + venv)
        subprocess.check_call([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", *reqs])
        with open(stamp, "w") as f:
            f.write(digest + "\n")
    return py


def thread_env(threads):
    return {
        "MKL_NUM_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "MKL_DYNAMIC": "FALSE",   # else MKL may decide to use fewer threads
        "OMP_DYNAMIC": "FALSE",
        "OPENBLAS_NUM_THREADS": "1",  # numpy's BLAS is not used by any SpGEMM
    }


def bootstrap(a):
    """Make sure we run inside the venv with MKL_RT and the thread variables set
    before anything imports MKL or an OpenMP runtime; re-exec if not."""
    if a.no_venv:
        os.environ.update(thread_env(a.threads))
        rt = find_mkl_rt(sys.prefix)
        if rt and "MKL_RT" not in os.environ:
            os.environ["MKL_RT"] = rt
        return
    venv = os.path.abspath(a.venv)
    inside = os.path.realpath(sys.prefix) == os.path.realpath(venv)
    if inside and os.environ.get(ENV_MARK) == venv:
        return
    if os.environ.get(ENV_MARK) and not inside:
        die(f"re-exec into {venv} did not land in it (sys.prefix={sys.prefix})")
    py = ensure_venv(venv)
    env = {ENV_MARK: venv, **thread_env(a.threads)}
    rt = find_mkl_rt(venv)
    if rt:
        env["MKL_RT"] = rt
    else:
        log(f"peers.py: warning: no libmkl_rt.so* under {venv}/lib; MKL will not load")
    os.environ.update(env)
    os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])


# --------------------------------------------------------------------------
# Worker: one peer, one dumped matrix, a fresh process
# --------------------------------------------------------------------------

def proc_status_kb():
    out = {}
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith(("VmRSS:", "VmHWM:")):
                out[ln.split(":")[0]] = int(ln.split()[1])
    return out


def reset_hwm():
    """Reset VmHWM to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def thread_cpu_ticks():
    """CPU ticks (utime + stime) of each thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[tid] = int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return out


def loaded_libs(words):
    libs = set()
    with open("/proc/self/maps") as f:
        for ln in f:
            path = ln.split()[-1] if len(ln.split()) >= 6 else ""
            if any(w in os.path.basename(path) for w in words):
                libs.add(os.path.basename(path))
    return sorted(libs)


def pkg_version(name):
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def load_dump(d):
    import numpy as np
    import scipy.sparse as sp

    with open(os.path.join(d, "shape.json")) as f:
        shape = json.load(f)
    x = np.load(os.path.join(d, "check_x.npy"))
    y = np.load(os.path.join(d, "check_y.npy"))

    def csr(prefix, nrows, ncols):
        indptr = np.load(os.path.join(d, prefix + "_indptr.npy"))
        indices = np.load(os.path.join(d, prefix + "_indices.npy"))
        data = np.load(os.path.join(d, prefix + "_data.npy"))
        if ncols is None:  # B's columns = C's columns = len(check_x)
            ncols = len(x)
        fits = max(len(indices), nrows, ncols) <= INT32_MAX
        it = np.int32 if fits else np.int64
        # The peers prefer 32-bit indices (MKL LP64 needs them: sparse_dot_mkl
        # would otherwise convert in place on the first call).
        m = sp.csr_matrix((data, indices.astype(it), indptr.astype(it)), shape=(nrows, ncols), copy=False)
        return m

    rows, cols = int(shape["rows"]), int(shape["cols"])
    product = shape.get("product", "aa")
    A = csr("A", rows, cols)
    B = None
    if product == "ab":
        B = csr("B", int(shape.get("b_rows", cols)), shape.get("b_cols"))
    return shape, product, A, B, x, y


def worker_main(a):
    import numpy as np
    import scipy.sparse as sp

    peer = a.worker
    res = {"tool": peer, "ok": False, "notes": []}
    try:
        shape, product, A, B, x, y = load_dump(a.dump_dir)
        res.update(product=product, value="c64" if np.iscomplexobj(A.data) else "f64",
                   index="i32" if A.indices.dtype == np.int32 else "i64")
        explicit_zeros = int(np.count_nonzero(A.data == 0)) + (int(np.count_nonzero(B.data == 0)) if B is not None else 0)
        sorted_in = bool(A.has_sorted_indices) and (B is None or bool(B.has_sorted_indices))
        res["explicit_zeros_in_input"] = explicit_zeros
        T = a.threads

        if peer.startswith("graphblas"):
            rhs_csr = None  # GraphBLAS gets its own copies below
        elif product == "aat":
            # scipy/MKL: A^T as CSR, computed here, outside the timing.
            rhs_csr = A.T.tocsr()
            rhs_csr.sort_indices()
        elif product == "ab":
            rhs_csr = B
        else:
            rhs_csr = A
        tiny = sp.identity(4, dtype=A.dtype, format="csr")
        tiny.indices = tiny.indices.astype(A.indices.dtype)
        tiny.indptr = tiny.indptr.astype(A.indptr.dtype)

        versions = {}
        if peer == "scipy":
            import scipy
            versions = {"numpy": np.__version__, "scipy": scipy.__version__}
            res["threads"] = 1
            res["algorithm"] = "csr_matmat (SMMP), 1 thread"

            def run():
                return A @ rhs_csr

            def c_bytes(C):
                return C.data.nbytes + C.indices.nbytes + C.indptr.nbytes

            def to_csr(C):
                return C

            def nnz_of(C):
                return int(C.nnz)

            _ = tiny @ tiny
        elif peer in ("mkl", "mkl_sorted"):
            import sparse_dot_mkl as sdm
            sdm.mkl_set_num_threads(T)
            versions = {
                "sparse_dot_mkl": pkg_version("sparse_dot_mkl"),
                "mkl": pkg_version("mkl"),
                "mkl_version_string": sdm.mkl_get_version_string(),
                "mkl_get_max_threads": int(sdm.mkl_get_max_threads()),
                "mkl_interface_integer": str(np.dtype(sdm.mkl_interface_integer_dtype())),
                "MKL_RT": os.environ.get("MKL_RT"),
            }
            if np.dtype(sdm.mkl_interface_integer_dtype()) != A.indices.dtype:
                die("MKL interface integer type differs from the index type; "
                    "set MKL_INTERFACE_LAYER=ILP64 for matrices beyond 2^31 entries")
            res["threads"] = int(sdm.mkl_get_max_threads())
            sort = peer == "mkl_sorted"
            res["algorithm"] = "mkl_sparse_spmm" + (" + mkl_sparse_order" if sort else "") + " + export copy"

            def run():
                # cast=False: no dtype conversion; indices are already MKL_INT.
                # sparse_dot_mkl makes MKL handles (no copy), calls
                # mkl_sparse_spmm, then copies C's data and indices out of
                # MKL into numpy arrays (np.array(..., copy=True)).
                return sdm.dot_product_mkl(A, rhs_csr, cast=False, reorder_output=sort)

            def c_bytes(C):
                return C.data.nbytes + C.indices.nbytes + C.indptr.nbytes

            def to_csr(C):
                return C

            def nnz_of(C):
                return int(C.nnz)

            _ = sdm.dot_product_mkl(tiny, tiny, cast=False)
            versions["libs"] = loaded_libs(("mkl", "iomp", "gomp", "tbb"))
        else:
            import graphblas as gb
            gb.ss.config["nthreads"] = T
            settle = peer == "graphblas_sorted"
            about = gb.ss.about
            versions = {
                "python-graphblas": gb.__version__,
                "suitesparse-graphblas": pkg_version("suitesparse-graphblas"),
                "SuiteSparse:GraphBLAS": ".".join(str(v) for v in about["library_version"]),
                "nthreads": int(gb.ss.config["nthreads"]),
                "openmp": bool(about["openmp"]),
                "mode": about["mode"],
            }
            res["threads"] = int(gb.ss.config["nthreads"])

            def to_gb(M):
                G = gb.Matrix.ss.import_csr(
                    nrows=M.shape[0], ncols=M.shape[1], indptr=M.indptr, col_indices=M.indices,
                    values=M.data, sorted_cols=bool(M.has_sorted_indices), take_ownership=False)
                G.wait()  # any format conversion of the input happens here, untimed
                return G

            GA = to_gb(A)
            if product == "aat":
                grhs = GA.T          # GraphBLAS handles the transpose itself, inside the timing
            elif product == "ab":
                grhs = to_gb(B)
            else:
                grhs = GA
            semiring = gb.semiring.plus_times
            res["algorithm"] = ("GrB_mxm plus_times (auto method)" + (" + wait" if settle else "")
                                + (", A.T inline" if product == "aat" else ""))
            versions["A_format"] = GA.ss.format

            def run():
                C = GA.mxm(grhs, semiring).new()
                if settle:
                    C.wait()  # materialize: pending work (e.g. unjumbling) is included
                return C

            def c_bytes(C):
                return int(C.ss.nbytes)

            def to_csr(C):
                return gb.io.to_scipy_sparse(C, format="csr")

            def nnz_of(C):
                return int(C.nvals)

            Gt = gb.io.from_scipy_sparse(tiny)
            _ = Gt.mxm(Gt, semiring).new().wait()
            versions["libs"] = loaded_libs(("graphblas", "gomp", "iomp"))
            A = B = None  # GraphBLAS holds its own copies; drop the scipy ones from the RSS baseline
        res["versions"] = versions

        # ---- timing, with peak memory per call -------------------------
        gc.collect()
        base = proc_status_kb()
        res["rss_inputs_bytes"] = base["VmRSS"] * 1024
        times, peaks = [], []
        cpu = wall = 0.0
        can_reset = True
        C = None
        for i in range(a.warmup + a.runs):
            C = None
            gc.collect()
            if i == a.warmup:
                ticks0 = thread_cpu_ticks()
            can_reset = reset_hwm() and can_reset
            rss0 = proc_status_kb()["VmRSS"]
            c0 = time.process_time()
            t0 = time.perf_counter()
            C = run()
            t1 = time.perf_counter()
            c1 = time.process_time()
            if i == 0:
                # The first product on this matrix (the library itself was
                # warmed up on a 4 x 4 product above): what a one-off
                # product, an AMG setup's say, pays.
                first_call = t1 - t0
            if can_reset:
                peaks.append((proc_status_kb()["VmHWM"] - rss0) * 1024)
            if i >= a.warmup:
                times.append(t1 - t0)
                cpu += c1 - c0
                wall += t1 - t0
        res["times_s"] = times
        res["first_call_s"] = first_call
        res["median_s"] = statistics.median(times)
        res["min_s"] = min(times)
        res["max_s"] = max(times)
        res["cpu_util"] = cpu / wall if wall > 0 else None
        # Threads that did a share of the work in the timed runs (tick = 1/CLK_TCK s,
        # so this is meaningful only when the timed runs take well over 0.1 s in all).
        ticks1 = thread_cpu_ticks()
        deltas = sorted((ticks1.get(t, 0) - ticks0.get(t, 0) for t in ticks1), reverse=True)
        total = sum(deltas)
        res["threads_busy"] = sum(1 for d in deltas if total > 0 and d >= 0.1 * total)
        res["thread_ticks"] = [d for d in deltas if d > 0]
        cb = c_bytes(C)
        res["c_bytes"] = cb
        if peaks:
            res["peak_rss_delta_bytes"] = max(peaks)
            res["peak_extra_bytes"] = max(0, max(peaks) - cb)
        else:
            res["peak_extra_bytes"] = None
            res["notes"].append("no /proc/self/clear_refs: peak memory not measured")
        if peer.startswith("graphblas"):
            res["versions"]["C_format"] = C.ss.format
            res["versions"]["nthreads_after"] = int(gb.ss.config["nthreads"])
        if peer.startswith("mkl"):
            res["versions"]["mkl_get_max_threads_after"] = int(sdm.mkl_get_max_threads())

        # ---- checks -------------------------------------------------------
        nnz = nnz_of(C)
        Cs = to_csr(C)
        del C
        res["nnz_c"] = nnz
        ok = True
        if Cs.shape != (len(y), len(x)):
            res["notes"].append(f"C has shape {Cs.shape}, expected {(len(y), len(x))}")
            ok = False
        else:
            yp = Cs @ x
            den = float(np.max(np.abs(y))) if len(y) else 0.0
            err = float(np.max(np.abs(yp - y))) if len(y) else 0.0
            rel = err / den if den > 0 else err
            res["check_rel_err"] = rel
            if not rel <= a.tol:
                ok = False
                res["notes"].append(f"C*x differs from rusparse's check_y: relative max-norm error {rel:.3e} > {a.tol:g}")
        exp = a.expect_nnz
        res["nnz_status"] = "unchecked"
        if exp is not None:
            if nnz == exp:
                res["nnz_status"] = "ok"
            else:
                zeros_in_c = int(np.count_nonzero(Cs.data == 0))
                # Structural nnz: the product of the patterns with all-ones
                # values (no cancellation possible).  Only computed on mismatch.
                if A is None:
                    _, _, A, B, _, _ = load_dump(a.dump_dir)
                P = A.copy()
                P.data = np.ones(len(P.data))
                if product == "aat":
                    Q = P.T.tocsr()
                elif product == "ab":
                    Q = B.copy()
                    Q.data = np.ones(len(Q.data))
                else:
                    Q = P
                struct = int((P @ Q).nnz)
                res["nnz_structural"] = struct
                if peer == "scipy" and nnz < exp and exp == struct:
                    res["nnz_status"] = "note"
                    res["notes"].append(
                        f"scipy nnz(C)={nnz} < rusparse {exp}: scipy drops the {exp - nnz} numerically-zero "
                        f"results (rusparse's count is the structural one)")
                elif peer != "scipy" and (explicit_zeros > 0 or zeros_in_c > 0) and exp in (struct, nnz - zeros_in_c):
                    res["nnz_status"] = "note"
                    res["notes"].append(
                        f"nnz(C)={nnz} vs rusparse {exp}: differs only by numerically-zero entries "
                        f"(input explicit zeros {explicit_zeros}, zeros in C {zeros_in_c}, structural {struct})")
                else:
                    res["nnz_status"] = "fail"
                    ok = False
                    res["notes"].append(f"nnz(C)={nnz} but rusparse has {exp} (structural {struct})")
        res["ok"] = ok
        res["input_sorted"] = sorted_in
    except SystemExit:
        raise
    except BaseException as e:  # report, then fail
        res["error"] = f"{type(e).__name__}: {e}"
        res["traceback"] = traceback.format_exc()
    with open(a.result, "w") as f:
        json.dump(res, f, indent=1)
    return 0 if res.get("ok") else 1


# --------------------------------------------------------------------------
# rusparse-bench, or the scipy stand-in
# --------------------------------------------------------------------------

class BenchError(Exception):
    pass


def mm_is_complex(spec):
    """True when SPEC is a Matrix Market file whose banner says complex."""
    if not (spec.endswith(".mtx") or spec.endswith(".mtx.gz")) or not os.path.exists(spec):
        return False
    opener = gzip.open if spec.endswith(".gz") else open
    with opener(spec, "rt") as f:
        return "complex" in f.readline().lower()


def run_rusparse(a, spec, product, tmp, runs, warmup, extra=()):
    """Run rusparse-bench on one SPEC; return (json meta, rusparse rows)."""
    jpath = os.path.join(tmp, "rusparse_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(spec)) + ".json")
    cmd = [a.rusparse_bench, "--threads", str(a.threads), "--runs", str(runs), "--warmup", str(warmup),
           "--dump", tmp, "--json", jpath, "--quiet", *extra]
    if product:
        cmd += ["--product", product]
    if mm_is_complex(spec):
        cmd += ["--value", "c64"]  # complex files run as complex128 everywhere
    cmd.append(spec)
    log("  $ " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"rusparse-bench timed out after {a.timeout} s")
    if p.returncode != 0:
        tail = (p.stderr or p.stdout or "").strip().splitlines()[-15:]
        raise BenchError(f"rusparse-bench exited {p.returncode}:\n    " + "\n    ".join(tail))
    try:
        with open(jpath) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise BenchError(f"rusparse-bench wrote no readable --json file: {e}")
    rows = [r for r in data.get("rows", []) if r.get("tool", "rusparse") == "rusparse"]
    if not rows:
        raise BenchError("rusparse-bench's JSON has no rusparse row")
    meta = {k: v for k, v in data.items() if k != "rows"}
    return meta, rows


def standin_matrix(spec):
    """scipy versions of a few specs, for testing this script without the binary."""
    import numpy as np
    import scipy.io
    import scipy.sparse as sp

    m = re.fullmatch(r"stencil2d_5pt:(\d+)", spec)
    if m:
        n = int(m.group(1))
        eye = sp.identity(n, format="csr")
        t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), format="csr")
        return f"stencil2d_5pt_{n}", (sp.kron(eye, t) + sp.kron(t, eye)).tocsr()
    m = re.fullmatch(r"uniform_r(\d+):(\d+)", spec)
    if m:
        k, n = int(m.group(1)), int(m.group(2))
        rng = np.random.default_rng(12345)
        r = np.repeat(np.arange(n), k)
        c = rng.integers(0, n, k * n)
        A = sp.csr_matrix((rng.uniform(0.5, 1.5, k * n), (r, c)), shape=(n, n))
        A.sum_duplicates()
        return f"uniform_r{k}_{n}", A
    if spec.endswith((".mtx", ".mtx.gz")) and os.path.exists(spec):
        name = re.sub(r"\.mtx(\.gz)?$", "", os.path.basename(spec))
        A = sp.csr_matrix(scipy.io.mmread(spec))
        A.sum_duplicates()
        return name, A
    raise BenchError(f"--standin cannot make {spec!r} (it knows stencil2d_5pt:N, uniform_rK:N and .mtx paths)")


def standin_rusparse(a, spec, product, tmp, runs, warmup):
    """Write the dump rusparse-bench would write, using scipy, and time scipy
    single-threaded in rusparse's place.  Clearly labelled as a stand-in."""
    import numpy as np

    name, A = standin_matrix(spec)
    A.sort_indices()
    product = product or "aa"
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "A_indptr.npy"), A.indptr.astype(np.int64))
    np.save(os.path.join(d, "A_indices.npy"), A.indices.astype(np.int64))
    np.save(os.path.join(d, "A_data.npy"), A.data.astype(np.complex128 if np.iscomplexobj(A.data) else np.float64))
    with open(os.path.join(d, "shape.json"), "w") as f:
        json.dump({"rows": A.shape[0], "cols": A.shape[1], "product": product}, f)
    if product == "aat":
        Bm = A.T.tocsr()
    elif product == "ab":
        raise BenchError("--standin does not do --product ab")
    else:
        Bm = A
    times = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        C = A @ Bm
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    P = A.copy()
    P.data = np.ones(len(P.data))
    nnz_struct = (P @ (P.T.tocsr() if product == "aat" else P)).nnz
    x = 1.0 + (np.arange(C.shape[1]) % 7) / 8.0
    np.save(os.path.join(d, "check_x.npy"), x)
    np.save(os.path.join(d, "check_y.npy"), C @ x)
    nprod = int(np.diff(Bm.indptr)[A.indices].sum())
    med = statistics.median(times)
    row = {"tool": "rusparse", "matrix": name, "rows": A.shape[0], "cols": A.shape[1], "nnz_a": int(A.nnz),
           "nprod": nprod, "nnz_c": int(nnz_struct), "median_s": med, "min_s": min(times), "max_s": max(times),
           "gflops": 2 * nprod / med / 1e9, "peak_extra_bytes": None, "algorithm": "STAND-IN(scipy)",
           "threads": 1, "value": "c64" if np.iscomplexobj(A.data) else "f64", "index": "i64"}
    meta = {"machine": "stand-in (scipy)", "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "threads": 1}
    return meta, [row]


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def matrices_dir(a):
    if a.matrices_dir:
        return a.matrices_dir
    for c in (os.path.join(ROOT, "shared", "matrices"), os.path.join(os.path.dirname(ROOT), "shared", "matrices"),
              "/work/shared/matrices"):
        if os.path.isdir(c):
            return c
    die("cannot find the real matrices folder; pass --matrices-dir")


def build_worklist(a):
    items = []  # (spec, product or None, group)
    if a.specs:
        items += [(s, a.product, "generated" if not s.endswith((".mtx", ".mtx.gz")) else "real") for s in a.specs]
    elif not a.no_generated:
        items += [(s, None, "generated") for s in GENERATED]
    if a.real:
        md = matrices_dir(a)
        for stem, prod in REAL:
            path = None
            for ext in (".mtx.gz", ".mtx"):
                if os.path.exists(os.path.join(md, stem + ext)):
                    path = os.path.join(md, stem + ext)
                    break
            if path is None:
                log(f"peers.py: warning: {stem} not found in {md}; skipped")
                continue
            items.append((path, prod, "real"))
    if not items:
        die("nothing to run (no SPEC, --no-generated without --real)")
    return items


def run_worker(a, peer, dump_dir, expect_nnz, mkl_ilp64):
    fd, rpath = tempfile.mkstemp(prefix=f"peer-{peer}-", suffix=".json", dir=os.path.dirname(dump_dir))
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", peer, "--dump-dir", dump_dir, "--result", rpath,
           "--threads", str(a.threads), "--runs", str(a.runs), "--warmup", str(a.warmup), "--tol", repr(a.tol)]
    if expect_nnz is not None:
        cmd += ["--expect-nnz", str(expect_nnz)]
    if a.no_venv:
        cmd.append("--no-venv")
    env = os.environ.copy()
    env.update(thread_env(a.threads))
    if mkl_ilp64:
        env["MKL_INTERFACE_LAYER"] = "ILP64"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"tool": peer, "ok": False, "timeout": True, "notes": [f"timed out after {a.timeout} s"]}
    try:
        with open(rpath) as f:
            res = json.load(f)
    except (OSError, ValueError):
        tail = (p.stderr or p.stdout or "").strip().splitlines()[-12:]
        res = {"tool": peer, "ok": False,
               "error": f"worker exited {p.returncode} without a result:\n      " + "\n      ".join(tail)}
    finally:
        try:
            os.remove(rpath)
        except OSError:
            pass
    if res.get("error") and p.stderr:
        res.setdefault("stderr_tail", p.stderr.strip().splitlines()[-12:])
    return res


def fmt_s(t):
    if t is None:
        return "–"
    if t >= 100:
        return f"{t:.0f}"
    if t >= 1:
        return f"{t:.3f}"
    if t >= 1e-3:
        return f"{t * 1e3:.2f}m"
    return f"{t * 1e6:.0f}µ"


def fmt_x(v):
    return "–" if v is None else f"{v:.2f}×"


def fmt_mib(b):
    return "–" if b is None else f"{b / 2**20:.1f}"


def geomean(vals):
    vals = [v for v in vals if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def peer_time(res):
    if not res or res.get("error") or res.get("timeout") or res.get("median_s") is None:
        return None
    return res["median_s"]


def build_report(a, records, meta, versions, started):
    L = []
    L.append("# rusparse vs CPU peers (SpGEMM)")
    L.append("")
    rs_machine = meta.get("machine")
    L.append(f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs"
             + (f" (rusparse-bench: {rs_machine})" if rs_machine else ""))
    L.append(f"- threads: {a.threads} for rusparse, MKL and GraphBLAS; scipy is single-threaded")
    L.append(f"- date: {started}; runs {a.runs}, warm-up {a.warmup}; times are medians in seconds "
             "(m = milliseconds, µ = microseconds), each including C's allocation")
    vs = versions
    parts = []
    if "scipy" in vs:
        parts.append(f"scipy {vs['scipy'].get('scipy')} (numpy {vs['scipy'].get('numpy')})")
    if "mkl" in vs:
        parts.append(f"sparse_dot_mkl {vs['mkl'].get('sparse_dot_mkl')} + mkl wheel {vs['mkl'].get('mkl')} "
                     f"({vs['mkl'].get('mkl_version_string')})")
    if "graphblas" in vs:
        parts.append(f"python-graphblas {vs['graphblas'].get('python-graphblas')} "
                     f"(SuiteSparse:GraphBLAS {vs['graphblas'].get('SuiteSparse:GraphBLAS')})")
    L.append("- peers: " + "; ".join(parts))
    chk = []
    utils = {p: [r["peers"][p].get("cpu_util") for r in records if p in r["peers"] and r["peers"][p].get("cpu_util")]
             for p in PEERS}
    if "mkl" in vs:
        chk.append(f"MKL mkl_get_max_threads() = {vs['mkl'].get('mkl_get_max_threads')}"
                   f" (layer: {', '.join(x for x in vs['mkl'].get('libs', []) if 'thread' in x or 'omp' in x)})")
    if "graphblas" in vs:
        chk.append(f"GraphBLAS gb.ss.config['nthreads'] = {vs['graphblas'].get('nthreads')} "
                   f"(openmp={vs['graphblas'].get('openmp')})")
    for p in PEERS:
        if utils[p]:
            busy = [r["peers"][p].get("threads_busy") for r in records
                    if p in r["peers"] and sum(r["peers"][p].get("thread_ticks") or []) >= 20]
            chk.append(f"{PEER_LABEL[p]} CPU/wall max {max(utils[p]):.2f}, median {statistics.median(utils[p]):.2f}"
                       + (f", busy threads max {max(busy)}" if busy else ""))
    if chk:
        L.append("- thread check: " + "; ".join(chk))
    L.append("- speedup = peer's median / rusparse's median (> 1: rusparse is faster), same run; the headline "
             "columns are each peer in its default mode (as its users run it), the like-for-like sorted variants "
             "beside them; best peer = fastest of everything run; first/steady = the first product on the matrix "
             "(after a warm-up of the library on a 4 x 4 product) over the steady-state median; first call vs "
             "best peer's first call = the shortest first call of the peers over rusparse's; peak extra = "
             "memory beyond the inputs and C (rusparse: its own report; peers: VmHWM per call, see bench/PEERS.md)")
    L.append("- C's rows: rusparse sorted; MKL unsorted (reorder_output=False), MKL sorted adds mkl_sparse_order "
             "(timed); GraphBLAS as GrB_mxm leaves it (may be jumbled), GraphBLAS wait adds C.wait() (timed, "
             "sorts); scipy unsorted; A·Aᵀ: scipy/MKL get Aᵀ as CSR precomputed outside the timing, GraphBLAS "
             "gets A.T inside mxm")
    if any(r["rs"] and r["rs"].get("algorithm") == "STAND-IN(scipy)" for r in records):
        L.append("- **STAND-IN: the rusparse column is scipy (1 thread), not rusparse; for testing this script only**")
    L.append("")
    run_peers = [p for p in PEERS if any(p in r["peers"] for r in records)]
    ratio_peers = [p for p in ("mkl", "mkl_sorted", "graphblas", "graphblas_sorted") if p in run_peers]
    first_peers = [p for p in ("mkl", "graphblas") if p in run_peers]
    any_order = any(r.get("rs_any") for r in records)
    hdr = (["matrix", "product", "nprod", "nnz(C)", "rusparse s (algorithm)"]
           + (["rusparse any order s"] if any_order else [])
           + [f"{PEER_LABEL[p]} s" for p in run_peers]
           + [f"vs {PEER_LABEL[p]}" for p in ratio_peers] + ["vs best peer"]
           + (["any order vs MKL", "any order vs best peer"] if any_order else [])
           + ["first/steady " + "/".join(["rs"] + [PEER_LABEL[p] for p in first_peers])]
           + ["first call vs best peer's first call"]
           + ["peak extra MiB " + "/".join(["rs"] + [PEER_LABEL[p] for p in run_peers])])
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + "|".join(["---", "---"] + ["--:"] * (len(hdr) - 2)) + "|")
    groups = {"generated": [], "real": []}

    def first_ratio(res):
        if not res or not res.get("first_call_s") or not res.get("median_s"):
            return None
        return res["first_call_s"] / res["median_s"]

    for r in records:
        rs = r["rs"] or {}
        rt = None if a.only_peers else rs.get("median_s")
        cells = [r["name"], r["product"] or "aa", f"{rs.get('nprod', 0):,}" if rs.get("nprod") is not None else "–",
                 f"{rs.get('nnz_c', 0):,}" if rs.get("nnz_c") is not None else "–"]
        if r.get("error"):
            cells.append("ERROR")
        else:
            cells.append(f"{fmt_s(rt)} ({rs.get('algorithm', '?')})" if rt is not None else "–")
        ra = (r.get("rs_any") or {}).get("median_s")
        if any_order:
            cells.append(fmt_s(ra))
        tp = {}
        for p in run_peers:
            res = r["peers"].get(p)
            t = peer_time(res)
            tp[p] = t if (res and res.get("ok")) else None  # a failed check gives no speedup
            if res is None:
                cells.append("–")
            elif res.get("timeout"):
                cells.append("timeout")
            elif res.get("error"):
                cells.append("ERROR")
            else:
                flag = "" if res.get("ok") else " ✗FAIL"
                if res.get("ok") and res.get("nnz_status") == "note":
                    flag = " ⁿ"
                cells.append(fmt_s(t) + flag)
        speedups = {p: (tp[p] / rt if (rt and tp.get(p)) else None) for p in ratio_peers}
        peer_ts = [t for t in tp.values() if t]
        speedups["best"] = min(peer_ts) / rt if (rt and peer_ts) else None
        speedups["any_mkl"] = tp["mkl"] / ra if (ra and tp.get("mkl")) else None
        speedups["any_best"] = min(peer_ts) / ra if (ra and peer_ts) else None
        firsts = {"rusparse": None if a.only_peers else first_ratio(rs)}
        firsts.update({p: first_ratio(r["peers"].get(p)) for p in first_peers})
        # What a one-off product (an AMG setup) pays: the best peer's first
        # call over rusparse's first call (> 1: rusparse's is shorter).
        peer_firsts = [(r["peers"].get(p) or {}).get("first_call_s") for p in run_peers
                       if (r["peers"].get(p) or {}).get("ok")]
        peer_firsts = [t for t in peer_firsts if t]
        rs_first = None if a.only_peers else rs.get("first_call_s")
        speedups["first_best"] = min(peer_firsts) / rs_first if (rs_first and peer_firsts) else None
        r["speedups"] = speedups
        r["firsts"] = firsts
        groups.setdefault(r["group"], []).append(r)
        failed_peers = [p for p in run_peers if r["peers"].get(p) and not r["peers"][p].get("ok")]
        cells += [fmt_x(speedups[p]) if p not in failed_peers else "✗" for p in ratio_peers]
        cells.append(fmt_x(speedups["best"]) + (" (✗ excl.)" if failed_peers and speedups["best"] else ""))
        if any_order:
            cells += [fmt_x(speedups["any_mkl"]), fmt_x(speedups["any_best"])]
        cells.append("/".join(fmt_x(firsts[k]) for k in ["rusparse"] + first_peers))
        cells.append(fmt_x(speedups["first_best"]))
        mem = [fmt_mib(None if a.only_peers else rs.get("peak_extra_bytes"))] + [
            fmt_mib((r["peers"].get(p) or {}).get("peak_extra_bytes")) for p in run_peers]
        cells.append("/".join(mem))
        L.append("| " + " | ".join(cells) + " |")
    for g in ("generated", "real", "all"):
        rows = records if g == "all" else (groups.get(g) or [])
        if not rows or (g == "all" and len([k for k in groups if groups[k]]) < 2):
            continue
        gm = {k: geomean([r["speedups"].get(k) for r in rows]) for k in ratio_peers + ["best", "any_mkl", "any_best"]}
        n = sum(1 for r in rows if r["speedups"]["best"])
        if n == 0:
            continue
        fr = "/".join(fmt_x(geomean([r["firsts"].get(k) for r in rows])) for k in ["rusparse"] + first_peers)
        cells = [f"**geomean, {g} ({n})**", "", "", "", ""] + [""] * (len(run_peers) + int(any_order))
        cells += [f"**{fmt_x(gm[k])}**" for k in ratio_peers] + [f"**{fmt_x(gm['best'])}**"]
        if any_order:
            cells += [f"**{fmt_x(gm['any_mkl'])}**", f"**{fmt_x(gm['any_best'])}**"]
        cells += [fr, f"**{fmt_x(geomean([r['speedups'].get('first_best') for r in rows]))}**", ""]
        L.append("| " + " | ".join(cells) + " |")
    worst = None
    for r in records:
        s = r.get("speedups", {}).get("best")
        if s is not None and (worst is None or s < worst[1]):
            worst = (r["name"], s)
    L.append("")
    if worst:
        L.append(f"Worst matrix (lowest speedup vs best peer): **{worst[0]}** at {worst[1]:.2f}×")
    notes = []
    for r in records:
        if r.get("error"):
            notes.append(f"- {r['name']}: rusparse-bench: {r['error']}")
        for p in PEERS:
            res = r["peers"].get(p)
            if not res:
                continue
            for n in res.get("notes", []):
                notes.append(f"- {r['name']} / {PEER_LABEL[p]}: {n}")
            if res.get("error"):
                notes.append(f"- {r['name']} / {PEER_LABEL[p]}: ERROR {res['error']}")
    if notes:
        L.append("")
        L.append("Notes (ⁿ: nnz differs only by numerically-zero entries; ✗FAIL: check failed):")
        L.append("")
        L += notes
    return "\n".join(L) + "\n"


def driver_main(a):
    if a.only_peers and a.standin:
        die("--only-peers and --standin do not go together")
    if not a.standin:
        a.rusparse_bench = os.path.abspath(a.rusparse_bench)
        if not (os.path.isfile(a.rusparse_bench) and os.access(a.rusparse_bench, os.X_OK)):
            die(f"rusparse-bench not found at {a.rusparse_bench}\n"
                "  build it first:   cargo build --release -p rusparse-bench\n"
                "  or point to it:   --rusparse-bench PATH\n"
                "  (or test this script alone with --standin, which makes the dumps with scipy)")
    started = datetime.datetime.now()
    stamp = started.strftime("%Y-%m-%d_%H%M%S")
    out = os.path.abspath(a.out or os.path.join(HERE, "results", stamp))
    os.makedirs(out, exist_ok=True)
    work = build_worklist(a)
    log(f"peers.py: {len(work)} matrices, threads {a.threads}, runs {a.runs}, warm-up {a.warmup}, "
        f"peers {','.join(a.peer_list)} -> {out}")

    records, versions, meta = [], {}, {}
    rs_rows, peer_rows = [], []
    failed = False
    for spec, product, group in work:
        tmp = tempfile.mkdtemp(prefix="rusparse-peers-", dir=a.tmp)
        rec = {"spec": spec, "product": product, "group": group, "name": spec, "rs": None, "peers": {}}
        records.append(rec)
        log(f"== {spec}" + (f" ({product})" if product else ""))
        try:
            runs, warmup = (1, 0) if a.only_peers else (a.runs, a.warmup)
            fn = standin_rusparse if a.standin else run_rusparse
            m, rows = fn(a, spec, product, tmp, runs, warmup)
            meta = meta or m
            if len(rows) > 1:
                log(f"  note: {len(rows)} rusparse rows; using the fastest")
            rs = min(rows, key=lambda r: r.get("median_s") or float("inf"))
            rec["rs"] = rs
            rec["name"] = rs["matrix"]
            if not a.only_peers:
                rs_rows.append(rs)
            dump = os.path.join(tmp, rs["matrix"])
            if not os.path.isdir(dump):
                raise BenchError(f"no dump folder {dump} (the --dump layout is DIR/<matrix>/)")
            with open(os.path.join(dump, "shape.json")) as f:
                rec["product"] = json.load(f).get("product", product or "aa")
            log(f"  rusparse: {rs['matrix']} median {fmt_s(rs.get('median_s'))} s, nnz(C) {rs.get('nnz_c')}, "
                f"{rs.get('algorithm')}")
            big = max(int(rs.get("nnz_a") or 0), int(rs.get("nnz_c") or 0), int(rs.get("rows") or 0),
                      int(rs.get("cols") or 0)) > INT32_MAX
            flops = None
            if rs.get("gflops") and rs.get("median_s"):
                flops = rs["gflops"] * 1e9 * rs["median_s"]
            elif rs.get("nprod"):
                flops = 2.0 * rs["nprod"]
            for p in a.peer_list:
                res = run_worker(a, p, dump, rs.get("nnz_c"), big and p.startswith("mkl"))
                rec["peers"][p] = res
                if res.get("versions"):
                    versions.setdefault(p, res["versions"])
                if res.get("error") or (not res.get("ok") and not res.get("timeout")):
                    failed = True
                    log(f"  !!!!!! {PEER_LABEL[p]} FAILED on {rec['name']}: "
                        + (res.get("error") or "; ".join(res.get("notes", []))))
                    if res.get("traceback"):
                        log(res["traceback"])
                elif res.get("timeout"):
                    log(f"  {PEER_LABEL[p]:9s}: TIMEOUT after {a.timeout} s (not counted as a failure)")
                else:
                    log(f"  {PEER_LABEL[p]:9s}: median {fmt_s(peer_time(res))} s, nnz(C) {res.get('nnz_c')}, "
                        f"err {res.get('check_rel_err', float('nan')):.1e}, cpu/wall {res.get('cpu_util') or 0:.2f}, "
                        f"busy threads {res.get('threads_busy')} {res.get('thread_ticks')}, "
                        f"extra {fmt_mib(res.get('peak_extra_bytes'))} MiB")
                if peer_time(res) is not None:
                    peer_rows.append({
                        "tool": p, "matrix": rec["name"], "rows": rs.get("rows"), "cols": rs.get("cols"),
                        "nnz_a": rs.get("nnz_a"), "nprod": rs.get("nprod"), "nnz_c": res.get("nnz_c"),
                        "median_s": res["median_s"], "min_s": res["min_s"], "max_s": res["max_s"],
                        "gflops": (flops / res["median_s"] / 1e9) if flops else None,
                        "peak_extra_bytes": res.get("peak_extra_bytes"), "algorithm": res.get("algorithm"),
                        "threads": res.get("threads"), "value": res.get("value"), "index": res.get("index"),
                        "check_ok": bool(res.get("ok")), "check_rel_err": res.get("check_rel_err"),
                        "nnz_status": res.get("nnz_status"), "cpu_util": res.get("cpu_util"),
                        "times_s": res.get("times_s"), "threads_busy": res.get("threads_busy"),
                        "notes": res.get("notes", []),
                    })
            if a.rusparse_any_order and not a.only_peers and not a.standin:
                tmp_any = tempfile.mkdtemp(prefix="rusparse-peers-any-", dir=a.tmp)
                try:
                    _, rows_any = run_rusparse(a, spec, product, tmp_any, runs, warmup,
                                               ("--column-order", "any"))
                finally:
                    shutil.rmtree(tmp_any, ignore_errors=True)
                rec["rs_any"] = min(rows_any, key=lambda r: r.get("median_s") or float("inf"))
                log(f"  rusparse (any order): median {fmt_s(rec['rs_any'].get('median_s'))} s")
        except BenchError as e:
            rec["error"] = str(e)
            failed = True
            log(f"  !!!!!! {spec}: {e}")
        finally:
            if a.keep_dumps:
                log(f"  dump kept in {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        # Write after every matrix, so an interrupted run keeps what it had.
        common = {"machine": meta.get("machine") or f"{cpu_model()}, {os.cpu_count()} CPUs",
                  "date": started.isoformat(timespec="seconds"), "threads": a.threads}
        with open(os.path.join(out, "rusparse.json"), "w") as f:
            json.dump({**common, "rows": rs_rows}, f, indent=1)
        with open(os.path.join(out, "peers.json"), "w") as f:
            json.dump({**common, "peer_versions": versions, "rows": peer_rows}, f, indent=1)

    report = build_report(a, records, meta, versions, started.isoformat(timespec="seconds"))
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(report)
    print(report)

    if not a.standin and not a.only_peers and rs_rows:
        cmd = [a.rusparse_bench, "--plot", os.path.join(out, "gflops.png"), "--from",
               os.path.join(out, "rusparse.json"), "--peers", os.path.join(out, "peers.json")]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                log(f"peers.py: warning: plot skipped, rusparse-bench --plot exited {p.returncode}: "
                    + (p.stderr.strip().splitlines() or [""])[-1])
        except (OSError, subprocess.TimeoutExpired) as e:
            log(f"peers.py: warning: plot skipped: {e}")
    log(f"peers.py: results in {out}")
    if failed:
        log("peers.py: !!!!!! SOME CHECKS OR RUNS FAILED (see ✗FAIL / ERROR above)")
        return 1
    return 0


def main():
    a = parse_args(sys.argv[1:])
    bootstrap(a)
    if a.worker:
        if not a.dump_dir or not a.result:
            die("--worker needs --dump-dir and --result")
        return worker_main(a)
    return driver_main(a)


if __name__ == "__main__":
    sys.exit(main())
