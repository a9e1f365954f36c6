#!/usr/bin/env bash
# The second GPU run of 2026-12-04 (session 72), from the repository root
# on the GPU machine with gpu-bin/ carried:
#   bash bench/gpu-runs/2026-12-04-h200/run2.sh OUT
# 1. the global tables' batch size on the power-law products (the planner's
#    new rule against fixed sizes, 256 MiB being the rule before);
# 2. gpu-check.sh's correctness and peer steps again with the new rule;
# 3. the kernel register table with the CuPy environment's NVRTC (the
#    toolkit's 13.0 gave ptxas no report in run 1);
# 4. Nsight Compute's time per kernel of rmat at scale 20.
set -u
dest=${1:?usage: run2.sh OUT}
out=/tmp/r2
rm -rf "$out" && mkdir -p "$out"
bin=gpu-bin
tar xzf $bin/executables.tar.gz -C $bin
export XDG_CACHE_HOME=/tmp/cache
req="RUSPARSE_REQUIRE_GPU=1 RUSPARSE_REQUIRE_NVRTC=1"
b="$bin/rusparse-bench --backend cuda --no-verify --runs 3 --warmup 1"
mats="rmat:20:3 rmat:18:4 rmat:16:16"
timed() { # NAME LIMIT COMMAND
    local t0=$(date +%s)
    timeout --kill-after=5 "$2" bash -c "$3" > "$out/$1.log" 2>&1
    echo "$1 rc=$? ($(( $(date +%s) - t0 )) s)" | tee -a "$out/summary2.txt"
}
timed batch_planner 90 "$req $b --csv $out/batch_planner.csv $mats"
timed batch_sweep 150 "$req $b --gpu-global-batch-mib 256 --gpu-global-batch-mib 2048 --gpu-global-batch-mib 16384 --csv $out/batch_sweep.csv $mats"
RUSPARSE_GPU_CHECK_STEPS="preflight demo_200 test_cuda_backend test_cuda_ffi cupy_peers bench_deterministic soak_cuda" \
    scripts/gpu-check.sh "$out/gc" 4 | tee -a "$out/summary2.txt"
nv=$(ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so* 2>/dev/null | head -n 1)
timed kernels_venv_nvrtc 60 "RUSPARSE_NVRTC=$nv $bin/rusparse-bench kernels --device-arch auto"
timed ncu_rmat20 150 "ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel -k regex:rs_ $bin/rusparse-bench --backend cuda --no-verify --runs 1 --warmup 0 rmat:20:3"
# The device tool brings back 8 files: one archive and the summaries.
tar czf "$dest/r2.tgz" -C /tmp r2
cp "$out/summary2.txt" "$out/gc/summary.txt" "$dest/" 2>/dev/null
