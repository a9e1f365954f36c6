#!/usr/bin/env bash
# Builds, on a machine without a GPU, everything the GPU machine runs (it
# has no Rust toolchain and no network), into gpu-bin/ (git-ignored):
#   librusparse.so          the library (release)
#   rusparse-demo           examples/demo.c against it (rpath $ORIGIN)
#   rusparse-bench          the benchmark, soak and kernel-resource tool
#   matrices/               ../shared/matrices/*.mtx*, when beside the checkout
#   tests/<name>            the test binaries that need a GPU or NVRTC
#                           (cuda_backend, cuda_ffi, nvrtc_kernels), release;
#                           RUSPARSE_BUNDLE_TEST_PROFILE=test takes the test
#                           profile's instead (a release build of the
#                           tests and their dev-dependencies costs 3-4 min);
#                           RUSPARSE_BUNDLE_TEST_BINARIES=FILE (what CI
#                           does) takes those a workspace `cargo test` built
#                           from FILE, its `cargo test --no-run
#                           --message-format=json` (scripts/test.sh writes
#                           target/test-binaries.json), with the benchmark
#                           RUSPARSE_BUNDLE_BENCH (CI: that build's) and the
#                           library RUSPARSE_BUNDLE_LIBRARY (CI: the
#                           CMake Release build the C tests use),
#                           building none: CI checks
#                           this script and gpu-check.sh, not a release
#                           build of the benchmark (5 minutes on 2 cores)
# all stripped and packed into gpu-bin/executables.tar.gz (gpu-check.sh
# unpacks it where it runs: stripped, the test profile's binaries CI bundles
# came to 63 MiB in session 64, about a third of that compressed), and
# prints the folder's path and size (the copy to the GPU machine carries at
# most 64 MiB with the working tree). Then, there:
#   scripts/gpu-check.sh "$OUT"        (gpu-bin/ passed in `carry`)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out="$root/gpu-bin"
limit_mib=56

export CARGO_TERM_COLOR=never
library=target/release/librusparse.so
bench=target/release/rusparse-bench
if [ -z "${RUSPARSE_BUNDLE_TEST_BINARIES:-}" ]; then
    echo "== building the library, the benchmark and the GPU test binaries (release)"
    # One invocation: built apart, the library and the benchmark unify their
    # dependencies' features differently, so each build recompiled rusparse
    # over the other's (about a minute of CI's bundle step, every time).
    cargo build -q --release -p rusparse -p rusparse-bench
fi
tests=(cuda_backend cuda_ffi nvrtc_kernels)
test_args=()
for t in "${tests[@]}"; do test_args+=(--test "$t"); done
# The test executables, from cargo's JSON messages: those of the tests
# named above, of the package rusparse (the root manifest).
pick='
import json, os, sys
root, names = sys.argv[1], sys.argv[2:]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if (m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]
            and m["target"]["name"] in names and "test" in m["target"]["kind"]
            and os.path.realpath(m["manifest_path"]) == os.path.realpath(root + "/Cargo.toml")):
        print(m["target"]["name"] + "\t" + m["executable"])
'
if [ -n "${RUSPARSE_BUNDLE_TEST_BINARIES:-}" ]; then
    # A filtered `cargo test -p rusparse --test ...` may resolve features
    # unlike the workspace `cargo test` that built them (the workspace's
    # dev-dependencies), so it could rebuild rusparse and the tests
    # (minutes on 2 cores): take the workspace build's.
    echo "== the test binaries from $RUSPARSE_BUNDLE_TEST_BINARIES (test profile, built by cargo test)"
    mapfile -t executables < <(python3 -c "$pick" "$root" "${tests[@]}" < "$RUSPARSE_BUNDLE_TEST_BINARIES")
    library=${RUSPARSE_BUNDLE_LIBRARY:?RUSPARSE_BUNDLE_TEST_BINARIES needs RUSPARSE_BUNDLE_LIBRARY, the librusparse.so to bundle}
    bench=${RUSPARSE_BUNDLE_BENCH:?RUSPARSE_BUNDLE_TEST_BINARIES needs RUSPARSE_BUNDLE_BENCH, the rusparse-bench to bundle}
else
    mapfile -t executables < <(
        cargo test -q --profile "${RUSPARSE_BUNDLE_TEST_PROFILE:-release}" -p rusparse --no-run \
            --message-format=json "${test_args[@]}" | python3 -c "$pick" "$root" "${tests[@]}")
fi
if [ ${#executables[@]} -ne ${#tests[@]} ]; then
    echo "expected ${#tests[@]} test executables, cargo reported: ${executables[*]}" >&2
    exit 1
fi

rm -rf "$out"
mkdir -p "$out/tests"
cp "$library" "$out/librusparse.so"
cp "$bench" "$out/rusparse-bench"
for e in "${executables[@]}"; do
    cp "${e#*$'\t'}" "$out/tests/${e%%$'\t'*}"
done
cc -O2 -std=c99 -Wall -Wextra -Iinclude examples/demo.c -o "$out/rusparse-demo" -ldl \
    -L"$out" -lrusparse -Wl,-rpath,'$ORIGIN'
strip --strip-unneeded "$out/librusparse.so" "$out/rusparse-bench" "$out/rusparse-demo" "$out"/tests/*
executables=(librusparse.so rusparse-bench rusparse-demo tests)
unpacked_kib=$(cd "$out" && du -sck "${executables[@]}" | tail -n 1 | cut -f1)
tar czf "$out/executables.tar.gz" -C "$out" "${executables[@]}"
(cd "$out" && rm -rf "${executables[@]}")
# The real matrices (../shared/matrices beside the checkout, where there
# is one) for the GPU selector's sweep: about 6 MiB.
shared_matrices="$root/../shared/matrices"
if [ -d "$shared_matrices" ]; then
    mkdir -p "$out/matrices"
    cp "$shared_matrices"/*.mtx* "$out/matrices/"
fi
git rev-parse HEAD > "$out/COMMIT"
git status --porcelain | head -n 20 > "$out/UNCOMMITTED"

size_kib=$(du -sk "$out" | cut -f1)
echo "== $out: $((size_kib / 1024)) MiB ($size_kib KiB; the executables $((unpacked_kib / 1024)) MiB unpacked)"
ls -l "$out" | sed 's/^/   /'
tar tvzf "$out/executables.tar.gz" | sed 's/^/   /'
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
    echo "the bundle is larger than $limit_mib MiB: it will not travel with the working tree" >&2
    exit 1
fi
