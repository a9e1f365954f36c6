#!/usr/bin/env bash
# The third GPU run of 2026-12-04 (session 72): Nsight Compute's stall
# reasons, memory and occupancy of the shared- and global-memory kernels
# where rusparse is slowest against cuSPARSE (rmat, delaunay), for the
# next session's kernel work. From the repository root, gpu-bin/ carried:
#   bash bench/gpu-runs/2026-12-04-h200/run3.sh OUT
set -u
dest=${1:?usage: run3.sh OUT}
out=/tmp/r3
rm -rf "$out" && mkdir -p "$out"
bin=gpu-bin
tar xzf $bin/executables.tar.gz -C $bin
export XDG_CACHE_HOME=/tmp/cache
b="$bin/rusparse-bench --backend cuda --no-verify --runs 1 --warmup 0"
sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters --section LaunchStats"
k="-k 'regex:rs_(numeric|symbolic)_(shared|global)'"
timed() { # NAME LIMIT COMMAND
    local t0=$(date +%s)
    timeout --kill-after=5 "$2" bash -c "$3" > "$out/$1.log" 2>&1
    echo "$1 rc=$? ($(( $(date +%s) - t0 )) s)" | tee -a "$out/summary3.txt"
}
# rmat at scale 18: one product's symbolic and numeric kernels (the first 20).
timed ncu_rmat18 120 "ncu --clock-control none $sections $k -c 20 $b rmat:18:4"
timed ncu_delaunay 90 "ncu --clock-control none $sections $k -c 8 $b delaunay:1048576"
timed ncu_stencil3d 60 "ncu --clock-control none $sections $k -c 4 $b stencil3d_7pt:100"
tar czf "$dest/r3.tgz" -C /tmp r3
cp "$out/summary3.txt" "$dest/"
