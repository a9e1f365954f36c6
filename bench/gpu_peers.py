#!/usr/bin/env python3
"""Time rusparse's CUDA back end against cuSPARSE (through CuPy) on the same matrices.

Per matrix, interleaved:

1. ``rusparse-bench --backend cuda --runs R --warmup W --dump TMP --json ... SPEC``
   (generates the matrix, times the device pipeline incl. C's allocation, checks C
   against the CPU back end, dumps A and a check of C);
2. a fresh ``python3 gpu_peers.py --worker`` process loads the dump into a
   ``cupyx.scipy.sparse.csr_matrix`` (int32 indices) and times ``C = A @ A`` (cuSPARSE
   SpGEMM) with a device synchronize around each call, C's allocation and freeing
   included; then one more call under a CuPy memory hook gives the peak device memory;
   nnz(C) and C*x are checked against rusparse's.

Writes ``rusparse.json``, ``cusparse.json``, ``results.csv`` and ``table.md`` (a markdown
table with GFLOPS of both and the ratio, ready for docs/benchmarks.md) into ``--out``,
rewritten after every matrix. Needs only Python 3 + numpy (+ CuPy in the worker); no
pip installs. ``--self-test`` and ``--dry-run`` run without CuPy or a GPU;
``--standin`` replaces cuSPARSE by scipy and rusparse's CUDA run by its CPU run, to test
the whole script on a machine without a GPU.

Exit status: 0 all good; 1 a check failed or a tool crashed; 2 bad usage / no binary.
"""

import argparse
import csv
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
BENCH_CANDIDATES = [
    os.path.join(ROOT, "gpu-bin", "rusparse-bench"),
    os.path.join(ROOT, "target", "release", "rusparse-bench"),
]

# The eight matrices of the GPU table in DESIGN.md section 5 (generator specs of
# rusparse-bench; see bench/README.md "Matrices").
GPU_SUITE = [
    "uniform_r4:200200",
    "stencil2d_5pt:725",
    "stencil3d_7pt:100",
    "fem27_3dof:28",
    "rmat:20:3",
    "delaunay:1048576",
    "band_r120:36000",
    "stencil2d_5pt:100",
]
# Names used in the table for a few specs (the design table's).
LABELS = {"stencil2d_5pt_100": "stencil2d_small (100²)"}
MIB = 1048576.0


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def die(msg, code=2):
    log("gpu_peers.py: error: " + msg)
    sys.exit(code)


def safe_name(spec, product="aa"):
    """rusparse-bench's case name: the spec with ':' as '_' or the file stem."""
    base = os.path.basename(spec)
    for ext in (".mtx.gz", ".mtx"):
        if base.endswith(ext):
            name = base[: -len(ext)]
            break
    else:
        name = spec.replace(":", "_")
    return name + ("_aat" if product == "aat" else "")


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="rusparse (CUDA) vs cuSPARSE (CuPy) SpGEMM, C = A*A, same matrices, same run.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="default matrices: " + " ".join(GPU_SUITE),
    )
    p.add_argument("specs", nargs="*", metavar="SPEC", help="rusparse-bench matrix specs (default: the GPU suite)")
    p.add_argument("--runs", type=int, default=10, help="timed runs per tool (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up runs per tool (default 3)")
    p.add_argument("--value", choices=("f64", "f32"), default="f64", help="value type (default f64)")
    p.add_argument("--rusparse-bench", default=None, metavar="PATH",
                   help="the binary (default: gpu-bin/rusparse-bench, else target/release/rusparse-bench)")
    p.add_argument("--bench-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for rusparse-bench (repeatable), e.g. --bench-arg=--cuda-pool=release")
    p.add_argument("--out", default=None, help="output folder (default bench/results/gpu_<date>_<time>/)")
    p.add_argument("--tmp", default=None, help="folder for the per-matrix dumps (default: system temp)")
    p.add_argument("--keep-dumps", action="store_true", help="keep the dump folders")
    p.add_argument("--timeout", type=float, default=None, help="seconds per subprocess (timeouts are reported)")
    p.add_argument("--tol", type=float, default=None,
                   help="relative max-norm tolerance of the C*x check (default 1e-9 for f64, 1e-4 for f32)")
    p.add_argument("--python", default=sys.executable, help="interpreter for the cuSPARSE worker (with CuPy)")
    p.add_argument("--dry-run", action="store_true", help="print what would run; run nothing")
    p.add_argument("--self-test", action="store_true", help="test argument parsing, dump reading, tables; no GPU")
    p.add_argument("--standin", action="store_true",
                   help="no GPU: rusparse-bench --backend cpu and scipy instead of cuSPARSE (tests the script)")
    # Worker mode (internal).
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dump-dir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--expect-nnz", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.runs < 1 or a.warmup < 0:
        p.error("--runs must be >= 1 and --warmup >= 0")
    if not a.specs:
        a.specs = list(GPU_SUITE)
    if a.tol is None:
        a.tol = 1e-4 if a.value == "f32" else 1e-9
    return a


def find_bench(a):
    if a.rusparse_bench:
        return a.rusparse_bench
    for c in BENCH_CANDIDATES:
        if os.path.exists(c):
            return c
    return BENCH_CANDIDATES[0]


# --------------------------------------------------------------------------
# Dumps
# --------------------------------------------------------------------------

def load_dump(d):
    """(shape dict, A as scipy CSR with int32 indices, x, y) of a rusparse-bench dump."""
    import numpy as np
    import scipy.sparse as sp

    with open(os.path.join(d, "shape.json")) as f:
        shape = json.load(f)
    if shape.get("product", "aa") != "aa":
        raise ValueError(f"{d}: only C = A*A dumps are supported (product {shape.get('product')})")
    x = np.load(os.path.join(d, "check_x.npy"))
    y = np.load(os.path.join(d, "check_y.npy"))
    indptr = np.load(os.path.join(d, "A_indptr.npy"))
    indices = np.load(os.path.join(d, "A_indices.npy"))
    data = np.load(os.path.join(d, "A_data.npy"))
    rows, cols = int(shape["rows"]), int(shape["cols"])
    if max(len(indices), rows, cols) > 2**31 - 1:
        raise ValueError(f"{d}: too large for int32 indices (CuPy's sparse matrices need them)")
    if shape.get("value") == "f32":
        data = data.astype(np.float32)
    A = sp.csr_matrix((data, indices.astype(np.int32), indptr.astype(np.int32)), shape=(rows, cols))
    return shape, A, x, y


# --------------------------------------------------------------------------
# Worker: one tool's timing of C = A*A in a fresh process
# --------------------------------------------------------------------------

class CupyBackend:
    name = "cusparse"

    def __init__(self):
        import cupy
        import cupyx.scipy.sparse as csp
        self.cp, self.csp = cupy, csp

    def versions(self):
        cp = self.cp
        v = {"cupy": cp.__version__}
        for key, fn in (("cuda_runtime", lambda: cp.cuda.runtime.runtimeGetVersion()),
                        ("cuda_driver", lambda: cp.cuda.runtime.driverGetVersion()),
                        ("device", lambda: cp.cuda.runtime.getDeviceProperties(0)["name"].decode()),
                        ("cusparse", lambda: cp.cuda.cusparse.getVersion(cp.cuda.device.get_cusparse_handle()))):
            try:
                v[key] = fn()
            except Exception as e:  # noqa: BLE001 - informative only
                v[key] = f"? ({type(e).__name__})"
        return v

    def upload(self, A):
        cp = self.cp
        d = self.csp.csr_matrix((cp.asarray(A.data), cp.asarray(A.indices), cp.asarray(A.indptr)), shape=A.shape)
        d.sum_duplicates()  # sets has_canonical_format (A is canonical already), outside the timing
        self.sync()
        return d

    def matmul(self, A, B):
        return A @ B

    def sync(self):
        self.cp.cuda.Device().synchronize()

    def matvec(self, C, x):
        return self.cp.asnumpy(C @ self.cp.asarray(x))

    def nbytes(self, C):
        return int(C.data.nbytes + C.indices.nbytes + C.indptr.nbytes)

    def free_cache(self):
        self.cp.get_default_memory_pool().free_all_blocks()

    def peak_of(self, fn):
        """Peak bytes handed out by CuPy's pool during fn() (live at the end included)."""
        cp = self.cp
        try:
            from cupy.cuda import memory_hook
        except ImportError:
            memory_hook = None
        if memory_hook is not None and hasattr(memory_hook, "MemoryHook"):
            class Peak(memory_hook.MemoryHook):
                name = "rusparse_peak"

                def __init__(self):
                    self.live, self.now, self.high = {}, 0, 0

                def malloc_postprocess(self, **kw):
                    if kw.get("mem_ptr"):
                        self.live[kw["mem_ptr"]] = kw["mem_size"]
                        self.now += kw["mem_size"]
                        self.high = max(self.high, self.now)

                def free_postprocess(self, **kw):
                    self.now -= self.live.pop(kw.get("mem_ptr"), 0)

            hook = Peak()
            with hook:
                out = fn()
            return out, hook.high, "CuPy memory hook (bytes handed out by the pool)"
        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()
        before = pool.total_bytes()
        out = fn()
        return out, pool.total_bytes() - before, "CuPy pool growth after free_all_blocks"


class ScipyStandin:
    """scipy in place of CuPy, to test the script without a GPU."""
    name = "cusparse"

    def versions(self):
        import scipy
        return {"standin": "scipy " + scipy.__version__, "device": "none (standin)"}

    def upload(self, A):
        return A.copy()

    def matmul(self, A, B):
        return A @ B

    def sync(self):
        pass

    def matvec(self, C, x):
        return C @ x

    def nbytes(self, C):
        return int(C.data.nbytes + C.indices.nbytes + C.indptr.nbytes)

    def free_cache(self):
        pass

    def peak_of(self, fn):
        return fn(), None, "not measured (standin)"


def rel_err(got, want):
    import numpy as np
    scale = float(np.max(np.abs(want))) if len(want) else 0.0
    diff = float(np.max(np.abs(got - want))) if len(want) else 0.0
    return diff / scale if scale > 0 else diff


def worker_main(a):
    res = {"tool": "cusparse", "ok": False}
    try:
        be = ScipyStandin() if a.standin else CupyBackend()
        res["versions"] = be.versions()
        shape, A_host, x, y = load_dump(a.dump_dir)
        # Library start-up (handle, pool) out of the way: one tiny product.
        import scipy.sparse as sp
        tiny = be.upload(sp.random(8, 8, density=0.3, format="csr", random_state=1, dtype=A_host.dtype))
        del tiny
        A = be.upload(A_host)
        del A_host

        def one():
            t0 = time.perf_counter()
            C = be.matmul(A, A)
            be.sync()
            t = time.perf_counter() - t0
            return C, t

        for _ in range(a.warmup):
            C, _ = one()
            del C
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            C = be.matmul(A, A)
            be.sync()
            del C  # freeing C counts, as in rusparse-bench's runs
            times.append(time.perf_counter() - t0)
        be.free_cache()
        C, peak, how = be.peak_of(lambda: one()[0])
        c_bytes = be.nbytes(C)
        nnz = int(C.nnz)
        err = rel_err(be.matvec(C, x), y)
        del C
        res.update({
            "ok": True,
            "times_s": times,
            "median_s": statistics.median(times),
            "min_s": min(times),
            "max_s": max(times),
            "nnz_c": nnz,
            "c_bytes": c_bytes,
            "peak_device_bytes": peak,
            "peak_extra_bytes": None if peak is None else max(0, peak - c_bytes),
            "peak_method": how,
            "check_rel_err": err,
            "check_ok": err <= a.tol and (a.expect_nnz is None or nnz == a.expect_nnz),
            "nnz_status": "ok" if a.expect_nnz is None or nnz == a.expect_nnz
            else f"nnz(C) {nnz} != rusparse's {a.expect_nnz}",
        })
    except Exception as e:  # noqa: BLE001 - reported to the driver
        msg = f"{type(e).__name__}: {e}"
        res["error"] = msg
        res["oom"] = "OutOfMemory" in type(e).__name__ or "out of memory" in str(e).lower()
        res["traceback"] = traceback.format_exc()
    with open(a.result, "w") as f:
        json.dump(res, f, indent=1)
    return 0


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def bench_cmd(a, bench, spec, tmp, jpath):
    cmd = [bench, "--backend", "cpu" if a.standin else "cuda", "--runs", str(a.runs),
           "--warmup", str(a.warmup), "--value", a.value, "--index", "i32",
           "--dump", tmp, "--json", jpath, "--quiet"]
    cmd += a.bench_arg
    cmd.append(spec)
    return cmd


def worker_cmd(a, dump_dir, result, expect_nnz):
    cmd = [a.python, os.path.abspath(__file__), "--worker", "--dump-dir", dump_dir, "--result", result,
           "--runs", str(a.runs), "--warmup", str(a.warmup), "--value", a.value, "--tol", repr(a.tol)]
    if expect_nnz is not None:
        cmd += ["--expect-nnz", str(expect_nnz)]
    if a.standin:
        cmd.append("--standin")
    return cmd


def run_proc(cmd, timeout):
    log("  $ " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    return p, None


def run_rusparse(a, bench, spec, tmp):
    jpath = os.path.join(tmp, "rusparse_" + safe_name(spec) + ".json")
    p, err = run_proc(bench_cmd(a, bench, spec, tmp, jpath), a.timeout)
    if err:
        return None, err
    if p.returncode != 0:
        tail = (p.stderr or p.stdout or "").strip().splitlines()[-15:]
        return None, f"rusparse-bench exited {p.returncode}:\n    " + "\n    ".join(tail)
    with open(jpath) as f:
        data = json.load(f)
    rows = [r for r in data.get("rows", []) if r.get("tool") == "rusparse"]
    if not rows:
        return None, "rusparse-bench's JSON has no rusparse row"
    return rows[0], None


def run_cusparse(a, dump_dir, expect_nnz, tmp):
    result = os.path.join(tmp, "cusparse_result.json")
    if os.path.exists(result):
        os.remove(result)
    p, err = run_proc(worker_cmd(a, dump_dir, result, expect_nnz), a.timeout)
    if err:
        return {"ok": False, "error": err}
    if not os.path.exists(result):
        tail = (p.stderr or p.stdout or "").strip().splitlines()[-15:]
        return {"ok": False, "error": f"worker exited {p.returncode} without a result:\n    " + "\n    ".join(tail)}
    with open(result) as f:
        return json.load(f)


def gflops(nprod, seconds):
    return 2.0 * nprod / seconds / 1e9 if nprod and seconds else 0.0


def fmt_mib(b):
    return "-" if b is None else f"{b / MIB:,.1f}"


def fmt_g(v):
    return "-" if not v else (f"{v:.2f}" if v < 100 else f"{v:.1f}")


def fmt_count(n):
    if n is None:
        return "-"
    return f"{n / 1e6:.2f}M" if n >= 1e4 else str(n)


def geomean(vals):
    vals = [v for v in vals if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def record_row(spec, rs, cu, rs_err):
    """One matrix: what the table and the CSV need."""
    name = safe_name(spec)
    rec = {"matrix": name, "spec": spec, "label": LABELS.get(name, name)}
    if rs is not None:
        rec.update({
            "nnz_a": rs.get("nnz_a"), "nprod": rs.get("nprod"), "nnz_c": rs.get("nnz_c"),
            "rusparse_median_s": rs.get("median_s"), "rusparse_gflops": rs.get("gflops"),
            "rusparse_first_call_s": rs.get("first_call_s"),
            "rusparse_peak_bytes": rs.get("peak_device_bytes"), "c_bytes": rs.get("c_bytes"),
            "device": rs.get("device"), "backend": rs.get("backend"),
        })
    rec["rusparse_error"] = rs_err
    cu = cu or {}
    rec["cusparse_error"] = None if cu.get("ok") else cu.get("error", "not run")
    rec["cusparse_oom"] = bool(cu.get("oom"))
    if cu.get("ok"):
        rec.update({
            "cusparse_median_s": cu["median_s"],
            "cusparse_gflops": gflops(rec.get("nprod"), cu["median_s"]),
            "cusparse_peak_bytes": cu.get("peak_device_bytes"),
            "cusparse_c_bytes": cu.get("c_bytes"),
            "cusparse_nnz_c": cu.get("nnz_c"),
            "check_rel_err": cu.get("check_rel_err"),
            "check_ok": cu.get("check_ok"),
            "nnz_status": cu.get("nnz_status"),
        })
    rg, cg = rec.get("rusparse_gflops"), rec.get("cusparse_gflops")
    rec["ratio"] = rg / cg if rg and cg else None
    return rec


def failed(rec):
    return bool(rec.get("rusparse_error")) or rec.get("check_ok") is False or (
        rec.get("cusparse_error") and not rec.get("cusparse_oom"))


def markdown(records, meta):
    lines = [
        f"rusparse (CUDA) vs cuSPARSE (CuPy `csr @ csr`), C = A², {meta.get('value', 'f64')}/i32, "
        f"{meta.get('date', '')}; device: {meta.get('device', '?')}; {meta.get('versions', '')}; "
        f"median of {meta.get('runs')} runs after {meta.get('warmup')} warm-ups, each incl. C's "
        "allocation and freeing; GFLOPS = 2·nprod / time. Peak = device memory one product holds "
        "beyond the inputs, C included (C's own in parentheses).",
        "",
        "| matrix | nnz(A) | nprod | nnz(C) | rusparse GFLOPS | cuSPARSE GFLOPS | rusparse / cuSPARSE "
        "| rusparse peak MiB (C's own) | cuSPARSE peak MiB (C's own) | rusparse first call s | check |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in records:
        if r.get("rusparse_error"):
            check = "✗ rusparse failed"
        elif r.get("cusparse_oom"):
            check = "cuSPARSE out of memory"
        elif r.get("cusparse_error"):
            check = "✗ cuSPARSE failed"
        elif r.get("check_ok"):
            check = f"✓ ({r['check_rel_err']:.1e})"
        else:
            check = f"✗FAIL ({r.get('nnz_status')}, C·x err {r.get('check_rel_err', float('nan')):.1e})"
        c_mib = fmt_mib(r.get("c_bytes"))
        ratio = r.get("ratio")
        first = r.get("rusparse_first_call_s")
        lines.append("| " + " | ".join([
            r["label"], fmt_count(r.get("nnz_a")), fmt_count(r.get("nprod")), fmt_count(r.get("nnz_c")),
            fmt_g(r.get("rusparse_gflops")), fmt_g(r.get("cusparse_gflops")),
            "-" if ratio is None else f"{ratio:.2f}×",
            f"{fmt_mib(r.get('rusparse_peak_bytes'))} ({c_mib})",
            f"{fmt_mib(r.get('cusparse_peak_bytes'))} ({fmt_mib(r.get('cusparse_c_bytes'))})",
            "-" if first is None else f"{first:.3f}",
            check,
        ]) + " |")
    g = geomean([r.get("ratio") for r in records if not failed(r)])
    lines.append("")
    lines.append(f"Geometric mean of rusparse / cuSPARSE GFLOPS: {'-' if g is None else f'{g:.2f}×'} "
                 f"over {sum(1 for r in records if r.get('ratio') and not failed(r))} matrices.")
    return "\n".join(lines) + "\n"


CSV_FIELDS = ["matrix", "spec", "nnz_a", "nprod", "nnz_c", "rusparse_median_s", "rusparse_gflops",
              "cusparse_median_s", "cusparse_gflops", "ratio", "rusparse_peak_bytes", "cusparse_peak_bytes",
              "c_bytes", "cusparse_c_bytes", "rusparse_first_call_s", "check_ok", "check_rel_err",
              "nnz_status", "rusparse_error", "cusparse_error", "device"]


def write_outputs(out, records, meta, rs_rows, cu_rows):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(markdown(records, meta))
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in records:
            w.writerow(r)
    with open(os.path.join(out, "rusparse.json"), "w") as f:
        json.dump({**meta, "rows": rs_rows}, f, indent=1)
    with open(os.path.join(out, "cusparse.json"), "w") as f:
        json.dump({**meta, "rows": cu_rows}, f, indent=1)


def cusparse_row(rs, cu, value):
    """cuSPARSE's row in rusparse-bench's JSON schema (for --peers / --plot)."""
    return {"tool": "cusparse", "matrix": rs["matrix"], "rows": rs.get("rows"), "cols": rs.get("cols"),
            "nnz_a": rs.get("nnz_a"), "nprod": rs.get("nprod"), "nnz_c": cu.get("nnz_c"),
            "median_s": cu["median_s"], "min_s": cu["min_s"], "max_s": cu["max_s"],
            "gflops": gflops(rs.get("nprod"), cu["median_s"]),
            "peak_extra_bytes": cu.get("peak_extra_bytes"), "peak_device_bytes": cu.get("peak_device_bytes"),
            "c_bytes": cu.get("c_bytes"), "algorithm": "cusparse-spgemm", "threads": 0, "value": value,
            "index": "i32", "backend": "cuda", "times_s": cu.get("times_s"), "check_ok": cu.get("check_ok"),
            "check_rel_err": cu.get("check_rel_err"), "nnz_status": cu.get("nnz_status"),
            "peak_method": cu.get("peak_method")}


def driver_main(a):
    bench = find_bench(a)
    stamp = time.strftime("%Y%m%d_%H%M%S")
    out = a.out or os.path.join(HERE, "results", "gpu_" + stamp)
    if a.dry_run:
        print(f"binary: {bench} ({'found' if os.path.exists(bench) else 'MISSING'})")
        print(f"output: {out}")
        for spec in a.specs:
            d = os.path.join(a.tmp or "<tmp>", safe_name(spec))
            print(" ".join(bench_cmd(a, bench, spec, a.tmp or "<tmp>", os.path.join(a.tmp or "<tmp>", "r.json"))))
            print(" ".join(worker_cmd(a, d, "<tmp>/cusparse_result.json", "<nnz(C)>")))
        return 0
    if not os.path.exists(bench):
        die(f"{bench} not found: build it with `cargo build --release -p rusparse-bench` "
            "(or pass --rusparse-bench PATH)")
    tmp_root = a.tmp or tempfile.mkdtemp(prefix="gpu_peers_")
    os.makedirs(tmp_root, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": a.runs, "warmup": a.warmup,
            "value": a.value, "host": platform.node(), "standin": a.standin, "bench_args": a.bench_arg}
    records, rs_rows, cu_rows = [], [], []
    for k, spec in enumerate(a.specs):
        log(f"[{k + 1}/{len(a.specs)}] {spec}")
        tmp = os.path.join(tmp_root, safe_name(spec) + "_case")
        os.makedirs(tmp, exist_ok=True)
        rs, rs_err = run_rusparse(a, bench, spec, tmp)
        cu, rs_fallback = None, None
        if rs is not None:
            rs_rows.append(rs)
            meta.setdefault("device", rs.get("device") or "?")
            log(f"  rusparse: {rs['median_s']:.6f} s, {rs['gflops']:.2f} GFLOPS, nnz(C) {rs['nnz_c']}")
            cu = run_cusparse(a, os.path.join(tmp, rs["matrix"]), rs.get("nnz_c"), tmp)
            if cu.get("versions"):
                meta["versions"] = ", ".join(f"{k2} {v}" for k2, v in cu["versions"].items() if k2 != "device")
                if meta.get("device") in (None, "", "?"):
                    meta["device"] = cu["versions"].get("device")
            if cu.get("ok"):
                cu_rows.append(cusparse_row(rs, cu, a.value))
                log(f"  cuSPARSE: {cu['median_s']:.6f} s, nnz(C) {cu['nnz_c']}, C·x err {cu['check_rel_err']:.1e}")
            else:
                log(f"  cuSPARSE failed: {cu.get('error')}")
        else:
            log(f"  !!!!!! rusparse-bench failed: {rs_err}")
            # Still time cuSPARSE: the dump from one CPU run.
            jpath = os.path.join(tmp, "cpu_dump.json")
            cmd = [bench, "--backend", "cpu", "--runs", "1", "--warmup", "0", "--value", a.value,
                   "--index", "i32", "--dump", tmp, "--json", jpath, "--quiet", spec]
            p, err = run_proc(cmd, a.timeout)
            if p is not None and p.returncode == 0:
                with open(jpath) as f:
                    cpu_row = json.load(f)["rows"][0]
                cu = run_cusparse(a, os.path.join(tmp, cpu_row["matrix"]), cpu_row.get("nnz_c"), tmp)
                if cu.get("ok"):
                    cu_rows.append(cusparse_row(cpu_row, cu, a.value))
                rs_fallback = cpu_row
        rec = record_row(spec, rs, cu, rs_err)
        if rs is None and rs_fallback is not None:
            for key in ("nnz_a", "nprod", "nnz_c"):
                rec[key] = rs_fallback.get(key)
            if cu and cu.get("ok"):
                rec["cusparse_gflops"] = gflops(rec["nprod"], cu["median_s"])
        if rec.get("check_ok") is False:
            log(f"  !!!!!! CHECK FAILED: {rec.get('nnz_status')}, C·x relative error {rec.get('check_rel_err')}")
        records.append(rec)
        write_outputs(out, records, meta, rs_rows, cu_rows)
        if not a.keep_dumps:
            shutil.rmtree(tmp, ignore_errors=True)
    if not a.keep_dumps and not a.tmp:
        shutil.rmtree(tmp_root, ignore_errors=True)
    table = markdown(records, meta)
    print(table)
    log(f"wrote {out}/table.md, results.csv, rusparse.json, cusparse.json")
    return 1 if any(failed(r) for r in records) else 0


# --------------------------------------------------------------------------
# Self-test (no GPU, no CuPy)
# --------------------------------------------------------------------------

def self_test(a):
    import io  # noqa: F401
    ok = True

    def check(cond, what):
        nonlocal ok
        print(("ok   " if cond else "FAIL ") + what)
        ok = ok and cond

    t = parse_args([])
    check(t.specs == GPU_SUITE and t.runs == 10 and t.tol == 1e-9, "defaults: the eight matrices, 10 runs")
    t = parse_args(["--value", "f32", "--runs", "3", "stencil2d_5pt:10"])
    check(t.specs == ["stencil2d_5pt:10"] and t.tol == 1e-4, "f32 tolerance, positional specs")
    check(safe_name("rmat:20:4") == "rmat_20_4" and safe_name("/x/bcsstk15.mtx.gz") == "bcsstk15",
          "case names as rusparse-bench's")
    rs = {"tool": "rusparse", "matrix": "stencil2d_5pt_100", "rows": 10000, "cols": 10000, "nnz_a": 49600,
          "nprod": 246016, "nnz_c": 129208, "median_s": 1e-4, "gflops": gflops(246016, 1e-4),
          "first_call_s": 0.5, "peak_device_bytes": 3 << 20, "c_bytes": 2 << 20, "device": "NVIDIA H100"}
    cu = {"ok": True, "median_s": 4e-4, "min_s": 3e-4, "max_s": 5e-4, "nnz_c": 129208, "c_bytes": 2 << 20,
          "peak_device_bytes": 10 << 20, "peak_extra_bytes": 8 << 20, "check_rel_err": 1e-16,
          "check_ok": True, "nnz_status": "ok", "times_s": [4e-4]}
    rec = record_row("stencil2d_5pt:100", rs, cu, None)
    check(abs(rec["ratio"] - 4.0) < 1e-9, "ratio = rusparse GFLOPS / cuSPARSE GFLOPS")
    bad = record_row("uniform_r4:10", dict(rs, matrix="uniform_r4_10"), dict(cu, check_ok=False,
                     nnz_status="nnz(C) 1 != rusparse's 2"), None)
    oom = record_row("rmat:20:4", dict(rs, matrix="rmat_20_4"), {"ok": False, "error": "OutOfMemoryError", "oom": True},
                     None)
    md = markdown([rec, bad, oom], {"runs": 10, "warmup": 3, "device": "NVIDIA H100", "value": "f64"})
    lines = md.splitlines()
    row = [x for x in lines if x.startswith("| stencil2d_small")]
    check(len(row) == 1 and "| 4.00× |" in row[0] and "| 3.0 (2.0) |" in row[0] and "✓" in row[0],
          "markdown row: label, ratio, peak (C's own), check")
    check(all(x.count("|") == lines[2].count("|") for x in lines if x.startswith("|")),
          "markdown rows have the header's column count")
    check(any("✗FAIL" in x for x in lines) and any("out of memory" in x for x in lines),
          "failed checks and OOM are marked")
    check("4.00× over 1 matrices" in md, "geometric mean leaves failures and OOM out")
    check(failed(bad) and not failed(oom) and not failed(rec), "exit status: check failures count, OOM does not")
    cr = cusparse_row(rs, cu, "f64")
    check(cr["tool"] == "cusparse" and cr["matrix"] == rs["matrix"] and cr["gflops"] > 0,
          "cuSPARSE rows in rusparse-bench's schema")
    with tempfile.TemporaryDirectory() as d:
        write_outputs(d, [rec, bad, oom], {"runs": 10}, [rs], [cr])
        with open(os.path.join(d, "results.csv")) as f:
            rows = list(csv.DictReader(f))
        check(len(rows) == 3 and rows[0]["matrix"] == "stencil2d_5pt_100", "CSV: one line per matrix")
        # Reading a real dump of rusparse-bench (CPU back end), when the binary and numpy are here.
        bench = find_bench(a)
        try:
            import numpy as np  # noqa: F401
            have_np = True
        except ImportError:
            have_np = False
        if os.path.exists(bench) and have_np:
            p = subprocess.run([bench, "--backend", "cpu", "--runs", "1", "--warmup", "0", "--quiet", "--dump", d,
                                "--json", os.path.join(d, "r.json"), "stencil2d_5pt:6"],
                               capture_output=True, text=True)
            check(p.returncode == 0, "rusparse-bench --dump ran")
            shape, A, x, y = load_dump(os.path.join(d, "stencil2d_5pt_6"))
            C = A @ A
            check(A.shape == (36, 36) and A.indices.dtype == np.int32 and C.nnz == shape["nnz_c"],
                  "dump read: int32 CSR, nnz(A·A) = rusparse's")
            check(rel_err(C @ x, y) < 1e-12, "dump read: C·x = rusparse's check_y")
        else:
            print(f"skip dump reading (binary {'found' if os.path.exists(bench) else 'missing'}, "
                  f"numpy {'found' if have_np else 'missing'})")
    print("self-test " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    a = parse_args(sys.argv[1:])
    if a.worker:
        return worker_main(a)
    if a.self_test:
        return self_test(a)
    return driver_main(a)


if __name__ == "__main__":
    sys.exit(main())
