#!/usr/bin/env bash
#   scripts/asan-soak.sh [CASES] [SEED]
# A soak (rusparse-bench soak: random products of every type, base, op,
# algorithm and flow, the C ABI's included, checked exactly against the
# reference) with rusparse and the benchmark built with AddressSanitizer
# and LeakSanitizer. 3,000 cases from seed 5 by default; 5-7 minutes of
# building on 2 cores the first time (2 after scripts/test.sh's ASan
# steps), then about 10 s per 3,000 cases.
#
# Not part of scripts/test.sh (CI keeps its time for the checks that find
# the most): there the fuzz replay, the huge-request and shared-handle
# tests run under ASan, and soaks run plainly (10,000 cases) and under
# valgrind (2,000). Run this after changing a kernel, the planner's
# memory handling or the C ABI; docs/reliability.md lists what it found.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cases=${1:-3000}
seed=${2:-5}
host=$(rustc -vV | sed -n 's/^host: //p')
# -Zsanitizer needs RUSTC_BOOTSTRAP=1 on the stable toolchain (its rust-std
# ships the ASan runtime); the build has its own target directory, shared
# with scripts/test.sh's ASan steps. The test profile, as those steps build
# rusparse; the benchmark without its default feature `plot` (plotters and
# its image and font crates would be built under ASan too).
asan=(env RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR="$root/target/asan")
"${asan[@]}" cargo build -q --profile test -p rusparse-bench --no-default-features --target "$host"
# allocator_may_return_null: a product too large for memory must come back
# as ALLOC_FAILED, not an ASan abort.
ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
    "$root/target/asan/$host/debug/rusparse-bench" soak --cases "$cases" --seed "$seed"
