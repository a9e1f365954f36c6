#!/usr/bin/env bash
# The fourth GPU run of 2026-12-04 (session 72): the kernels with the
# whole-team pass over long B rows (rsh_team_long_rows), checked and timed
# as in run 2. From the repository root, gpu-bin/ carried:
#   bash bench/gpu-runs/2026-12-04-h200/run4.sh OUT
set -u
dest=${1:?usage: run4.sh OUT}
out=/tmp/r4
rm -rf "$out" && mkdir -p "$out"
bin=gpu-bin
tar xzf $bin/executables.tar.gz -C $bin
export XDG_CACHE_HOME=/tmp/cache
req="RUSPARSE_REQUIRE_GPU=1 RUSPARSE_REQUIRE_NVRTC=1"
timed() { # NAME LIMIT COMMAND
    local t0=$(date +%s)
    timeout --kill-after=5 "$2" bash -c "$3" > "$out/$1.log" 2>&1
    echo "$1 rc=$? ($(( $(date +%s) - t0 )) s)" | tee -a "$out/summary4.txt"
}
RUSPARSE_GPU_CHECK_STEPS="preflight demo_200 test_cuda_backend test_cuda_ffi cupy_peers bench_deterministic soak_cuda" \
    scripts/gpu-check.sh "$out/gc" 4 | tee -a "$out/summary4.txt"
timed batch_planner 60 "$req $bin/rusparse-bench --backend cuda --no-verify --runs 3 --warmup 1 --csv $out/batch_planner.csv rmat:18:4 rmat:16:16"
tar czf "$dest/r4.tgz" -C /tmp r4
cp "$out/summary4.txt" "$dest/"
