#!/usr/bin/env bash
#   scripts/gpu-check.sh OUT [MINUTES]
# Runs every GPU check from the bundle scripts/gpu-bundle.sh built
# (gpu-bin/), on the GPU machine, from the repository root, and writes
# everything into OUT: one log per step and summary.txt. Each step is
# independent (one failing does not stop the others) and has a time limit;
# the whole run stays inside MINUTES (default 7). Steps that need a GPU say
# "no GPU" on a machine without one, and the script still ends with its
# summary. Exit status: 0 when no step failed, 1 otherwise.
#
# Steps, most important first (a step that would not fit the time left is
# reported as "no time"):
#   preflight          nvidia-smi, driver, NVRTC found, CuPy, compute-sanitizer
#   demo_200           the demo at n = 200 with RUSPARSE_REQUIRE_GPU=1
#   test_cuda_backend  tests/cuda_backend.rs, RUSPARSE_REQUIRE_GPU=1, --nocapture
#   test_cuda_ffi      tests/cuda_ffi.rs, the same
#   test_nvrtc_kernels every kernel instantiation by this machine's NVRTC
#                      (RUSPARSE_NVRTC, when set, picks it: scripts/test.sh
#                      points it at the CUDA 13 wheel, so that this step is
#                      CI's NVRTC 13 compile of every kernel)
#   kernel_resources   registers, shared memory and spills of every kernel as a
#                      CUBIN for this GPU, checked against the planner's blocks
#   demo_1000_x3       the demo at n = 1000 (10^6 rows), three times
#   memcheck, racecheck  compute-sanitizer on a small demo (where installed)
#   cupy_peers         bench/gpu_peers.py: the same-run table against cuSPARSE
#                      (CuPy) on the generated suite at full size, C checked
#                      against the CPU, peak device memory of both (where
#                      CuPy exists); without CuPy, bench_suite instead:
#                      rusparse-bench --backend cuda on the suite, C checked
#   bench_deterministic  the suite in the deterministic mode, C checked
#                      against the CPU (and whether it is bitwise equal),
#                      with per-phase times
#   memcheck_global    memcheck on rmat:14:16, whose long rows run the global
#                      kernels
#   selector_sweep     the GPU selector's timing sweep: threads per B row
#                      2..32 and bin scales 1, 0.5 on the suite and the
#                      real matrices (gpu-bin/matrices), C not checked
#   soak_cuda          random products through the C ABI on device arrays
#   ncu_profile        Nsight Compute's per-kernel summary of the symbolic and
#                      numeric kernels on stencil3d_7pt:100, fem27_3dof:28
#                      and rmat:16:4 (where installed)
#   bench_budget       fem27_3dof and rmat at scale 20 under memory budgets of
#                      1x, 2x and 4x C's size against none (issue 30)
# RUSPARSE_GPU_CHECK_STEPS="name ...", when set, runs only the steps named
# (a second, confirming run). OUT holds more files than the device tool
# brings back (8): pack it (tar) after the run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-check.sh OUT [MINUTES]}
minutes=${2:-7}
mkdir -p "$out"
bin=gpu-bin
# The bundle's executables travel packed (gpu-bundle.sh).
if [ -f "$bin/executables.tar.gz" ]; then
    tar xzf "$bin/executables.tar.gz" -C "$bin" || echo "could not unpack $bin/executables.tar.gz" >&2
fi
start=$(date +%s)
deadline=$((start + minutes * 60))
summary="$out/summary.txt"
: > "$summary"
failed=0

# NVRTC and the CUDA libraries where a toolkit or a wheel may have put them.
extra=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && extra="$extra:$d"
done
for d in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    for sub in nvidia/cu13/lib nvidia/cuda_nvrtc/lib; do
        [ -d "$d/$sub" ] && extra="$extra:$d/$sub"
    done
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}$extra"
export RUST_BACKTRACE=1

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
    gpu=1
fi

# step NAME SECONDS NEEDS_GPU COMMAND...: runs COMMAND (a shell string) with
# its output in OUT/NAME.log, records the status line.
step() {
    local name=$1 limit=$2 needs_gpu=$3 cmd=$4
    local now left status t0
    now=$(date +%s)
    left=$((deadline - now - 5))
    if [ -n "${RUSPARSE_GPU_CHECK_STEPS:-}" ] && [[ " $RUSPARSE_GPU_CHECK_STEPS " != *" $name "* ]]; then
        status="skipped (not in RUSPARSE_GPU_CHECK_STEPS)"
    elif [ "$needs_gpu" = 1 ] && [ $gpu = 0 ]; then
        status="no GPU"
    elif [ ! -d "$bin" ]; then
        status="no bundle ($bin/ missing: run scripts/gpu-bundle.sh and carry it)"
        failed=1
    elif [ $left -lt 15 ]; then
        status="no time"
    else
        [ "$limit" -gt "$left" ] && limit=$left
        t0=$(date +%s)
        printf '== %s (limit %d s): %s\n' "$name" "$limit" "$cmd" > "$out/$name.log"
        timeout --kill-after=5 "$limit" bash -c "$cmd" >> "$out/$name.log" 2>&1
        local rc=$?
        local took=$(($(date +%s) - t0))
        case $rc in
            0) status="ok (${took} s)" ;;
            124|137) status="TIMEOUT after ${took} s"; failed=1 ;;
            *) status="FAILED rc=$rc (${took} s)"; failed=1 ;;
        esac
    fi
    printf '%-20s %s\n' "$name" "$status" | tee -a "$summary"
}

req="RUSPARSE_REQUIRE_GPU=1 RUSPARSE_REQUIRE_NVRTC=1"
step preflight 60 0 "
    echo commit: \$(cat $bin/COMMIT 2>/dev/null); cat $bin/UNCOMMITTED 2>/dev/null
    nvidia-smi || echo 'nvidia-smi: not found or failed'
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || true
    command -v nvcc >/dev/null && nvcc --version | tail -n 2
    echo LD_LIBRARY_PATH=\$LD_LIBRARY_PATH
    ldconfig -p | grep -E 'libcuda.so|libnvrtc.so' || true
    for d in \$(echo \$LD_LIBRARY_PATH | tr : ' '); do ls \$d/libnvrtc.so* 2>/dev/null; done
    python3 -c 'import cupy; print(\"CuPy\", cupy.__version__)' || echo 'no CuPy'
    command -v compute-sanitizer || echo 'no compute-sanitizer'
    $bin/rusparse-demo --cpu 20 | head -n 1"
step demo_200 60 1 "$req $bin/rusparse-demo 200"
step test_cuda_backend 180 1 "$req $bin/tests/cuda_backend --nocapture"
step test_cuda_ffi 120 1 "$req $bin/tests/cuda_ffi --nocapture"
step demo_1000_x3 120 1 "for i in 1 2 3; do $req $bin/rusparse-demo 1000 || exit 1; done"
if command -v compute-sanitizer >/dev/null 2>&1; then
    step memcheck 60 1 "compute-sanitizer --tool memcheck --error-exitcode 9 $bin/rusparse-demo 40"
    step racecheck 60 1 "compute-sanitizer --tool racecheck --error-exitcode 9 $bin/rusparse-demo 40"
else
    printf '%-20s %s\n' memcheck "not here (no compute-sanitizer)" | tee -a "$summary"
    printf '%-20s %s\n' racecheck "not here (no compute-sanitizer)" | tee -a "$summary"
fi
suite="uniform_r4:200200 stencil2d_5pt:725 stencil3d_7pt:100 fem27_3dof:28 rmat:20:3 delaunay:1048576 band_r120:36000 stencil2d_5pt:100"
if python3 -c 'import cupy' >/dev/null 2>&1; then
    step cupy_peers 280 1 "python3 bench/gpu_peers.py --rusparse-bench $bin/rusparse-bench --runs 5 --warmup 2 --timeout 150 --out $out/cupy_peers"
else
    printf '%-20s %s\n' cupy_peers "not here (no CuPy): bench_suite instead" | tee -a "$summary"
    step bench_suite 240 1 "$req $bin/rusparse-bench --backend cuda --runs 5 --warmup 2 --json $out/bench_suite.json --csv $out/bench_suite.csv $suite"
fi
step bench_deterministic 150 1 "$req $bin/rusparse-bench --backend cuda --deterministic --runs 3 --warmup 1 --json $out/bench_deterministic.json --csv $out/bench_deterministic.csv $suite"
# Rows long enough for the global kernels (rank bitmap, spills), under
# memcheck: after the measurements, which matter more than its minute.
if command -v compute-sanitizer >/dev/null 2>&1; then
    step memcheck_global 90 1 "compute-sanitizer --tool memcheck --error-exitcode 9 $bin/rusparse-bench --backend cuda --runs 1 --warmup 0 --no-verify rmat:14:16"
else
    printf '%-20s %s\n' memcheck_global "not here (no compute-sanitizer)" | tee -a "$summary"
fi
# The square real matrices (A·A; the LP ones are rectangular, qc324 complex).
real=$(ls $bin/matrices/*.mtx* 2>/dev/null | grep -v -e /lp_ -e /qc324 | tr '\n' ' ')
sweep="--gpu-threads-per-b-row 2 --gpu-threads-per-b-row 4 --gpu-threads-per-b-row 8 --gpu-threads-per-b-row 16 --gpu-threads-per-b-row 32 --gpu-bin-scale 1 --gpu-bin-scale 0.5"
step selector_sweep 150 1 "$req $bin/rusparse-bench --backend cuda --no-verify --runs 3 --warmup 1 $sweep --json $out/selector_sweep.json --csv $out/selector_sweep.csv ${suite/rmat:20:3/rmat:18:4} $real"
step soak_cuda 90 1 "$req $bin/rusparse-bench soak --cases 200 --seed 3 --gpu cuda --gpu-share 100"
step test_nvrtc_kernels 120 0 "RUSPARSE_REQUIRE_NVRTC=1 $bin/tests/nvrtc_kernels --nocapture"
# The architecture named first (no CUDA context in the process), then
# auto (the device's): run 1 on an H200 found no ptxas report with auto.
# Without a GPU, auto would compile the same again. Each run compiles 16
# instantiations one after the other: 40-45 s with NVRTC 13.5 on the
# 2-core VM (2026-12-02), hence the limit.
resources="$bin/rusparse-bench kernels --device-arch ${RUSPARSE_GPU_ARCH:-90}"
[ $gpu = 1 ] && resources="$resources && $bin/rusparse-bench kernels --device-arch auto"
step kernel_resources 200 0 "$resources"
# Per-kernel times (Nsight Compute's summary) of the symbolic and numeric
# kernels of a 3-D stencil, an FEM matrix and a power-law graph (the
# largest gaps to the research codes), where installed.
if command -v ncu >/dev/null 2>&1; then
    step ncu_profile 120 1 "ncu --clock-control none --print-summary per-kernel --section SpeedOfLight -k regex:'rs_(symbolic|numeric)' $bin/rusparse-bench --backend cuda --runs 1 --warmup 0 --no-verify stencil3d_7pt:100 fem27_3dof:28 rmat:16:4"
else
    printf '%-20s %s\n' ncu_profile "not here (no ncu)" | tee -a "$summary"
fi
budgets="--memory-budget none --memory-budget 1c --memory-budget 2c --memory-budget 4c"
step bench_budget 120 1 "$req $bin/rusparse-bench --backend cuda --runs 3 --warmup 1 --no-verify $budgets --json $out/bench_budget.json --csv $out/bench_budget.csv fem27_3dof:28 rmat:20:3"

took=$(($(date +%s) - start))
{
    echo
    echo "gpu-check: $([ $gpu = 1 ] && echo 'GPU found' || echo 'no GPU'), $((took / 60)) min $((took % 60)) s, $([ $failed = 0 ] && echo 'no step failed' || echo 'SOME STEPS FAILED')"
} | tee -a "$summary"
exit $failed
