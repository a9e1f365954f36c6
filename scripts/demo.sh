#!/usr/bin/env bash
# Builds rusparse (release) and runs the C demo: C = A * A for a 2-D 5-point
# Laplacian through the cuSPARSE-style C API, timed and checked.
#   scripts/demo.sh [--cpu] [n] [threads]   (defaults: 1000 x 1000 grid, all cores)
# With RUSPARSE_REQUIRE_GPU=1 it fails (exit 1, saying why) instead of
# falling back to the CPU when no GPU can run it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cc >/dev/null 2>&1; then
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
    $sudo_cmd apt-get update -qq && $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc
fi
cargo build --release -p rusparse --lib --features c-allocator-hooks
cc -O2 -std=c99 -Wall -Wextra -Wpedantic -Iinclude examples/demo.c -o target/release/rusparse-demo -ldl \
    -Ltarget/release -lrusparse -Wl,-rpath,"$PWD/target/release"
target/release/rusparse-demo "$@"
