#!/usr/bin/env bash
#   scripts/test.sh            the whole suite, as CI runs it (about 30 minutes on
#                              2 cores from a clean clone; docs/testing.md,
#                              "Where the time goes")
#   scripts/test.sh --quick    the checks to run while working (under 8 minutes
#                              warm): fmt, clippy, the rusparse crate's unit,
#                              property, header, doc and integration tests, and
#                              the C/C++/Fortran tests (CMake + CTest)
# Either way, a test that could not run (no GPU, no NVRTC, no hiprtc) says
# so in a SKIPPED line and in the summary at the end; with
# RUSPARSE_REQUIRE_GPU=1 a missing GPU fails the GPU tests instead.
#
# The whole rusparse test suite, as CI runs it (.ci/run calls this script):
# formatting, clippy, the committed header, cargo tests (unit, property and
# doc tests, the GPU kernels compiled by NVRTC and run on the host
# emulator), the C/C++/Fortran tests, the same under valgrind, and the
# package: the CMake build installed into a prefix that is then moved, and
# the tests built against it as an outside project with find_package and
# with pkg-config, shared and static.
# Also a 10,000-case soak against the reference (rusparse-bench soak), the
# HIP back end's build (`--features hip`), its unit tests and every
# kernel instantiation compiled by hiprtc for gfx906 and gfx90a; valgrind
# on the Rust side (the C ABI fuzz replay, a soak); and the sanitizers:
# rusparse built with AddressSanitizer under the C tests (built with ASan +
# UBSan), the fuzz replay, the huge-request and shared-handle tests and a
# soak. Then the PETSc plug-in (petsc/): its products against PETSc's own
# on 1, 2 and 4 MPI ranks and PETSc's GAMG tutorials ex56/ex45 with aij and
# aijrusparse, and the installed plug-in from the moved prefix. And the
# Python package (python/): its clippy, the wheel pip-installed into
# target/python-venv and its pytest tests.
# Installs what it needs (cmake, a C/C++ compiler, gfortran, pkg-config,
# valgrind, Debian's ROCm 5.2 HIP runtime and hiprtc, PETSc 3.18 with
# OpenMPI and its examples, the NVRTC wheel) with apt-get / pip when
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0
case "${1:-}" in
    "") ;;
    --quick) quick=1 ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

# Each step's header says how long the run has taken so far (min:s), so the
# slow steps show when the suite nears its time budget.
step() {
    local took=$(( $(date +%s) - started ))
    printf '\n== [%d:%02d] %s\n' $((took / 60)) $((took % 60)) "$*"
}

# Tests that cannot run here (tests/support) append a line to this file;
# the summary at exit shows them where a person sees them.
mkdir -p target
export RUSPARSE_SKIP_LOG="$root/target/test-skips.log"
rm -f "$RUSPARSE_SKIP_LOG"
started=$(date +%s)
summary() {
    local status=$? took=$(( $(date +%s) - started ))
    printf '\n== summary (%s, %d min %d s)\n' "$([ $status -eq 0 ] && echo passed || echo FAILED)" \
        $((took / 60)) $((took % 60))
    if [ -s "$RUSPARSE_SKIP_LOG" ]; then
        echo "$(sort -u "$RUSPARSE_SKIP_LOG" | wc -l) tests did not run on this machine (they passed without running), by reason:"
        # "SKIPPED tests/x.rs name: reason" -> the reason, then its tests.
        sort -u "$RUSPARSE_SKIP_LOG" | awk '{
            rest = substr($0, index($0, " ") + 1); file = substr(rest, 1, index(rest, " ") - 1)
            rest = substr(rest, index(rest, " ") + 1); colon = index(rest, ": ")
            test = substr(rest, 1, colon - 1); reason = substr(rest, colon + 2)
            if (!(reason in tests)) order[++n] = reason
            tests[reason] = tests[reason] "\n    " file " " test
        } END { for (i = 1; i <= n; i++) print "  " order[i] ":" tests[order[i]] }'
    else
        echo "every test ran (none skipped)"
    fi
}
trap summary EXIT

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v gfortran >/dev/null 2>&1 || missing+=(gfortran)
if [ $quick -eq 0 ]; then
    command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
    # hiprtc (in libamdhip64 on ROCm 5) for tests/hip_kernels.rs; hipcc brings
    # the device libraries and clang it compiles with. No AMD GPU is needed.
    command -v hipcc >/dev/null 2>&1 || missing+=(hipcc libamdhip64-dev)
    # The PETSc plug-in (petsc/): PETSc 3.18 with OpenMPI, and PETSc's tutorials
    # (ex56, ex45) that its GAMG tests build unchanged.
    dpkg -s petsc-dev >/dev/null 2>&1 || missing+=(petsc-dev)
    command -v mpiexec >/dev/null 2>&1 || missing+=(openmpi-bin)
    dpkg -s libpetsc3.18-dev-examples >/dev/null 2>&1 || missing+=(libpetsc3.18-dev-examples)
fi
if [ ${#missing[@]} -gt 0 ]; then
    step "installing ${missing[*]}"
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
    $sudo_cmd apt-get update -qq
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$component"
    fi
done

# NVRTC from PyPI (no GPU needed): tests/nvrtc_kernels.rs compiles every
# kernel instantiation with it (the whole suite: for compute_70 only, see
# below; --quick: compute_70/80/90). The CUDA 12 wheel is used because it
# still accepts compute_70 (the CUDA 13 one starts at 75).
# --quick leaves the kernel compiles out (the test says SKIPPED) unless the
# wheel is already there.
nvrtc_dir="$root/target/nvrtc-cu12"
nvrtc_lib="$nvrtc_dir/nvidia/cuda_nvrtc/lib"
if [ $quick -eq 0 ] && [ ! -e "$nvrtc_lib/libnvrtc.so.12" ]; then
    step "installing NVRTC (pip: nvidia-cuda-nvrtc-cu12) into target/nvrtc-cu12"
    if ! python3 -m pip --version >/dev/null 2>&1; then
        sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
        $sudo_cmd apt-get update -qq
        $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip
    fi
    python3 -m pip install -q --no-deps --target "$nvrtc_dir" "nvidia-cuda-nvrtc-cu12==12.9.86"
fi
export LD_LIBRARY_PATH="$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Without NVRTC the kernel compile test would skip; here it must run.
[ $quick -eq 1 ] || export RUSPARSE_REQUIRE_NVRTC=1

export CARGO_TERM_COLOR=never

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

# The C, C++ and Fortran tests (CMake + CTest) against the C library at $lib,
# built with the feature c-allocator-hooks as CMake builds it; warnings are
# errors (a developer check; users' builds never get -Werror).
c_tests() {
    step "C tests (CMake + CTest) against ${1#"$root"/}"
    lib="$1"
    cmake -S c_tests -B target/c_tests -DRUSPARSE_LIBRARY="$lib" -DRUSPARSE_WERROR=ON >/dev/null
    cmake --build target/c_tests -j2
    ctest --test-dir target/c_tests --output-on-failure
}

if [ $quick -eq 1 ]; then
    step "cargo test -p rusparse (the library's unit, property, header, doc and integration tests)"
    cargo test -p rusparse
    # A debug build of the C library, copied to target/c-abi/ so that later
    # cargo runs without the feature do not replace it.
    step "the C library, a debug build (--features c-allocator-hooks)"
    cargo build -p rusparse --lib --features c-allocator-hooks
    mkdir -p "$root/target/c-abi"
    cp "$root/target/debug/librusparse.so" "$root/target/c-abi/librusparse.so"
    c_tests "$root/target/c-abi/librusparse.so"
    step "quick checks passed; left out: the emulated-GPU tests (kernels/host-tests), soaks, valgrind, sanitizers, the HIP build, the Release package and PETSc: run scripts/test.sh before pushing"
    exit 0
fi

# The whole suite's Rust build: every feature but c-allocator-hooks (which
# no test binary may have), so that the HIP back end's unit tests, its
# hiprtc kernel compile (tests/hip_kernels.rs), the allocation-failure test
# and the benchmark's emulated GPUs come out of this one build; the steps
# below run its binaries instead of building rusparse again in other
# feature sets (each such build cost 2-3 minutes on 2 cores). What only a
# build without `hip` compiles is checked by clippy above and by the C
# tests (errors.c asks for a HIP handle of a library built without it).
features=hip,failure-injection,rusparse-bench/emulated-gpu
export RUSPARSE_REQUIRE_HIPRTC=1
# NVRTC 12 compiles every kernel for compute_70, the target NVRTC 13 lacks;
# NVRTC 13 compiles them for compute_75, 80 and 90 in gpu-check.sh below.
step "cargo test --features $features (unit, property, header, doc and integration tests; hiprtc compiles every kernel for gfx906 and gfx90a, NVRTC 12 for compute_70)"
RUSPARSE_NVRTC_TARGETS=70 cargo test --features "$features"

# Later steps run some of the test binaries that `cargo test` built, directly:
# a `cargo test --test NAME` there may resolve features differently (the
# workspace's dev-dependencies), and the feature builds between
# (c-allocator-hooks, hip, ...) overwrite the cdylib, so cargo would rebuild
# rusparse, minutes each time on 2 cores. Their paths, listed now:
cargo test --features "$features" --no-run --message-format=json 2>/dev/null > target/test-binaries.json
# The path of the integration test binary NAME in that list (KIND test), or
# of the program NAME that the build made for the tests (KIND bin).
test_binary() {
    python3 -c '
import json, sys
name, kind = sys.argv[1], sys.argv[2]
paths = [m["executable"] for m in map(json.loads, open("target/test-binaries.json"))
         if m.get("reason") == "compiler-artifact" and m.get("executable")
         and m["target"]["name"] == name and kind in m["target"]["kind"]
         and m["profile"]["test"] == (kind == "test")]
if len(paths) != 1:
    sys.exit(f"test_binary: {len(paths)} {kind} binaries named {name}")
print(paths[0])' "$1" "${2:-test}"
}
# The benchmark (soak) from that build, copied (cargo's path for it is
# shared by every build of it); a `cargo run -p rusparse-bench` would
# resolve features differently and rebuild rusparse.
mkdir -p target/suite-bin
cp "$(test_binary rusparse-bench bin)" target/suite-bin/rusparse-bench
bench="$root/target/suite-bin/rusparse-bench"


# NVRTC 13 (the CUDA 13 wheel, found through RUSPARSE_NVRTC, as on the GPU
# machines with a CUDA 13 driver): it has no compute_70, so the targets move
# to compute_75. `cargo test` above compiled every kernel instantiation with
# NVRTC 12 for compute_70; the NVRTC 13 compile of them for compute_75, 80
# and 90 is gpu-check.sh's step test_nvrtc_kernels at the end (the same test
# binary, from the bundle), so that each target is compiled once.
nvrtc13_dir="$root/target/nvrtc-cu13"
if [ ! -e "$nvrtc13_dir/nvidia/cu13/lib/libnvrtc.so.13" ]; then
    step "installing NVRTC 13 (pip: nvidia-cuda-nvrtc 13) into target/nvrtc-cu13"
    python3 -m pip install -q --no-deps --target "$nvrtc13_dir" "nvidia-cuda-nvrtc==13.5.37"
fi

step "soak: 10,000 random products of every type, base, op and algorithm against the reference"
"$bench" soak --cases 10000 --seed 1

step "race check: the kernel tests on the emulated GPU under ThreadSanitizer with the GPU's memory model (a missing rs_syncwarp or rs_sync is a reported race; kernels/README.md, \"Race check\")"
# --workspace keeps the dependencies' features those of the build above, so
# only the kernels and the tests are rebuilt.
cargo test --workspace --features "$features,rusparse-kernel-host-tests/race-check" \
    --test emulator --test hash_kernels --test transpose --test scan_binning

step "soak on two emulated GPUs (kernels/host-tests): 100 random products through the C ABI on device arrays (three phases incl. ALG3, reuse with new values and beta, scalars in device memory) against the reference"
"$bench" soak --cases 100 --seed 1 --gpu emulated --gpu-share 100

valgrind_cmd="valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --suppressions=$root/c_tests/valgrind.supp"
step "allocation failure: every fallible allocation of the sample flows (Rust API and C ABI) failed in turn (--features failure-injection), under valgrind (the small problems)"
# The small problems only (the same allocation points): `cargo test` above
# ran both sizes, with the test's own leak check.
RUSPARSE_ALLOC_FAILURE_SIZES=small $valgrind_cmd "$(test_binary alloc_failure)" --nocapture

step "clippy with --features $features (the HIP back end, allocation-failure injection, the bench's emulated GPUs)"
cargo clippy --all-targets --features "$features" -- -D warnings

# The lib alone: no test binary may get this global allocator
# (tests/memory_budget.rs and the bench have their own).
step "clippy of the C library with its dispatching global allocator (--features c-allocator-hooks)"
cargo clippy -p rusparse --lib --features c-allocator-hooks -- -D warnings

# The C library built as users build it (CMake, Release), with warnings as
# errors as our own check; the C tests, valgrind's and the GPU bundle use
# it (a separate debug build of it took 4 minutes of CI's time). The
# library's debug assertions and overflow checks still run under the C
# tests in the sanitizer step below (its ASan build is a debug build).
step "package: CMake build in Release (cargo release, with the PETSc plug-in)"
cmake -S . -B target/cmake-build -DCMAKE_BUILD_TYPE=Release -DRUSPARSE_PETSC=ON -DRUSPARSE_WERROR=ON \
    -DCMAKE_INSTALL_PREFIX="$root/target/install-staging" >/dev/null
cmake --build target/cmake-build -j2

c_tests "$root/target/cmake-build/lib/librusparse.so"

step "RUSPARSE_REQUIRE_GPU=1: without a GPU the GPU tests and the demo fail, saying why; with one they run"
cc -O1 -std=c99 -Wall -Wextra -Wpedantic -Werror -Iinclude examples/demo.c -o target/suite-bin/rusparse-demo \
    -ldl -L"$(dirname "$lib")" -lrusparse -Wl,-rpath,"$(dirname "$lib")"
for what in "$(test_binary cuda_ffi)" "target/suite-bin/rusparse-demo 40"; do
    log="$root/target/require-gpu.log"
    if RUSPARSE_REQUIRE_GPU=1 RUSPARSE_SKIP_LOG=/dev/null $what >"$log" 2>&1; then
        grep -q "SKIPPED" "$log" && { cat "$log"; echo "$what skipped under RUSPARSE_REQUIRE_GPU=1"; exit 1; }
        echo "$what: ran on a GPU"
    else
        grep -q "RUSPARSE_REQUIRE_GPU=1 but" "$log" || { cat "$log"; echo "$what failed for another reason"; exit 1; }
        echo "$what: no GPU here, so it failed as it must: $(grep -m1 -o 'RUSPARSE_REQUIRE_GPU=1 but.*' "$log")"
    fi
done

step "C tests under valgrind"
cmake -S c_tests -B target/c_tests_valgrind -DRUSPARSE_LIBRARY="$lib" -DRUSPARSE_VALGRIND=ON \
    -DRUSPARSE_WERROR=ON >/dev/null
cmake --build target/c_tests_valgrind -j2
ctest --test-dir target/c_tests_valgrind --output-on-failure

step "valgrind on the Rust side: the C ABI fuzz replay and random programs, and a 2,000-case soak"
$valgrind_cmd "$(test_binary fuzz_c_abi)"
$valgrind_cmd "$bench" soak --cases 2000 --seed 7 >/dev/null

# AddressSanitizer for Rust code needs -Zsanitizer, which the stable
# toolchain accepts with RUSTC_BOOTSTRAP=1 (its rust-std ships the ASan
# runtime); the build goes to its own target directory.
host=$(rustc -vV | sed -n 's/^host: //p')
asan=(env RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR="$root/target/asan")
step "sanitizers: the C/C++/Fortran tests built with ASan + UBSan, against librusparse.so built with ASan"
"${asan[@]}" cargo build -q -p rusparse --lib --features c-allocator-hooks --target "$host"
cmake -S c_tests -B target/c_tests_asan -DRUSPARSE_SANITIZE=ON -DRUSPARSE_WERROR=ON \
    -DRUSPARSE_LIBRARY="$root/target/asan/$host/debug/librusparse.so" >/dev/null
cmake --build target/c_tests_asan -j2
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir target/c_tests_asan --output-on-failure

step "sanitizers: C ABI fuzz replay and random programs, huge requests and shared handles, with rusparse under ASan"
# A 10^12-entry C asks for terabytes: ASan must return NULL (ALLOC_FAILED), not abort.
# With c-allocator-hooks, as the library of the step above: these tests
# define no global allocator of their own, so they link the ASan rusparse
# that step built instead of compiling it again (minutes on 2 cores), and
# their allocations go through the library's dispatching allocator too.
asan_run=("${asan[@]}" ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1)
"${asan_run[@]}" cargo test -p rusparse --features c-allocator-hooks --target "$host" \
    --test fuzz_c_abi --test huge_requests --test shared_handle
# The soak under ASan is scripts/asan-soak.sh, a documented heavy run (its
# ASan build of the benchmark took 2 of CI's minutes); the soaks above run
# plainly and under valgrind.

# The Python package (python/, its own cargo workspace): clippy, then the
# wheel built by maturin (one release build of the extension) and installed
# with pip into a venv under target/, as a user installs it, and its pytest
# tests run against the installed package (from target/, so that python/'s
# sources are not imported instead). The real-CuPy test skips without a
# GPU and must fail, saying why, under RUSPARSE_REQUIRE_GPU=1.
step "Python package: fmt and clippy of python/ (-D warnings), pip install ./python (maturin) into target/python-venv, pytest"
venv="$root/target/python-venv"
if [ ! -x "$venv/bin/python" ]; then
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        rm -rf "$venv"
        sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
        $sudo_cmd apt-get update -qq
        $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
        python3 -m venv "$venv"
    fi
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check maturin scipy numpy pytest
cargo fmt --manifest-path python/Cargo.toml -- --check
PYO3_PYTHON="$venv/bin/python" cargo clippy --manifest-path python/Cargo.toml --all-targets -- -D warnings
# --no-build-isolation: the maturin just installed builds it (its PEP 517
# hook runs `maturin` from PATH). The wheel is maturin's release build with
# cheaper settings (opt-level 1, no LTO, 16 codegen units; cargo reads them
# from the environment): 2.4 instead of 5.6 minutes on 2 cores, and the
# tests check the binding, not its speed. The release profile's own
# settings are built by CMake's Release build above.
PATH="$venv/bin:$PATH" CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_LTO=off \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    --no-build-isolation --force-reinstall --no-deps ./python
(cd "$root/target" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests")
log="$root/target/require-gpu-python.log"
if (cd "$root/target" && RUSPARSE_REQUIRE_GPU=1 RUSPARSE_SKIP_LOG=/dev/null "$venv/bin/python" -m pytest -q \
        -p no:cacheprovider "$root/python/tests/test_cupy.py" -k test_real_cupy) >"$log" 2>&1; then
    grep -q "SKIPPED" "$log" && { cat "$log"; echo "test_real_cupy skipped under RUSPARSE_REQUIRE_GPU=1"; exit 1; }
    echo "python/tests/test_cupy.py test_real_cupy: ran on a GPU"
else
    grep -q "RUSPARSE_REQUIRE_GPU=1 but" "$log" || { cat "$log"; echo "test_real_cupy failed for another reason"; exit 1; }
    echo "python/tests/test_cupy.py test_real_cupy: no GPU here, so it failed as it must: $(grep -m1 -o 'RUSPARSE_REQUIRE_GPU=1 but[^"]*' "$log" | head -n 1)"
fi

step "PETSc plug-in: products of aijrusparse against aij on 1, 2 and 4 MPI ranks, and PETSc's GAMG tutorials ex56 and ex45 with aij and aijrusparse"
ctest --test-dir target/cmake-build --output-on-failure
rm -rf target/install-staging target/install-moved
cmake --install target/cmake-build >/dev/null
# Relocatable: the tests below use the prefix after it was moved.
mv target/install-staging target/install-moved
prefix="$root/target/install-moved"

step "package: version checks of find_package"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
rm -rf target/package_version
cmake -S c_tests/package_version -B target/package_version \
    -DCMAKE_PREFIX_PATH="$prefix" -DEXPECTED="$version"

for consume in package pkg-config; do
    for static in OFF ON; do
        step "package: tests against the moved prefix ($consume, static=$static)"
        dir="target/c_tests_${consume}_static_${static}"
        PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cmake -S c_tests -B "$dir" \
            -DCMAKE_BUILD_TYPE=Release -DRUSPARSE_WERROR=ON \
            -DRUSPARSE_CONSUME="$consume" -DRUSPARSE_STATIC="$static" \
            -DCMAKE_PREFIX_PATH="$prefix" -DRUSPARSE_TEST_ARGS=--quick >/dev/null
        cmake --build "$dir" -j2
        ctest --test-dir "$dir" --output-on-failure
    done
done

for static in OFF ON; do
    step "package: a Fortran-only project against the moved prefix (static=$static)"
    dir="target/fortran_consumer_static_${static}"
    cmake -S fortran/tests -B "$dir" -DCMAKE_BUILD_TYPE=Release -DRUSPARSE_WERROR=ON \
        -DCMAKE_PREFIX_PATH="$prefix" -DRUSPARSE_STATIC="$static" >/dev/null
    cmake --build "$dir"
    ctest --test-dir "$dir" --output-on-failure
done

step "PETSc plug-in: the installed librusparse_petsc.so from the moved prefix (finds librusparse beside it)"
mpiexec_flags=(--oversubscribe); [ "$(id -u)" -eq 0 ] && mpiexec_flags+=(--allow-run-as-root)
mpiexec "${mpiexec_flags[@]}" -n 2 target/cmake-build/petsc/tests/petsc_products \
    -dll_append "$prefix/lib/librusparse_petsc.so" -n 6 -g 400 | tail -n 1

step "the GPU check as far as no GPU allows: scripts/gpu-bundle.sh builds the bundle (under its size limit), scripts/gpu-check.sh runs to its summary with 'no GPU' for every GPU step; its test_nvrtc_kernels is the NVRTC 13 compile of every kernel instantiation (RUSPARSE_NVRTC=target/nvrtc-cu13/...)"
# The test binaries and the benchmark of the bundle are those `cargo test`
# built above (test profile), taken from target/test-binaries.json (a
# release build of them would take 5 minutes, and CI has no GPU to run them
# on), and the library the C tests' (CMake's Release build). A GPU machine
# gets release ones from a plain run.
RUSPARSE_BUNDLE_TEST_BINARIES="$root/target/test-binaries.json" RUSPARSE_BUNDLE_LIBRARY="$lib" \
    RUSPARSE_BUNDLE_BENCH="$bench" ./scripts/gpu-bundle.sh | tail -n 1
rm -rf target/gpu-check
# 6 minutes: an upper bound; without a GPU only the NVRTC 13 compile (about
# a minute) and kernel_resources take time.
if RUSPARSE_NVRTC="$nvrtc13_dir/nvidia/cu13/lib" ./scripts/gpu-check.sh target/gpu-check 6; then
    # The NVRTC 13 compile must have run and passed (not "no time"), with NVRTC 13.
    grep -q "^test_nvrtc_kernels  *ok" target/gpu-check/summary.txt &&
        grep -q "^NVRTC 13\." target/gpu-check/test_nvrtc_kernels.log ||
        { cat target/gpu-check/test_nvrtc_kernels.log; echo "gpu-check: test_nvrtc_kernels did not pass with NVRTC 13"; exit 1; }
    grep "^test_nvrtc_kernels\|^kernel_resources" target/gpu-check/summary.txt
    if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" = 0 ]; then
        for s in demo_200 test_cuda_backend test_cuda_ffi bench_deterministic selector_sweep soak_cuda; do
            grep -q "^$s  *no GPU" target/gpu-check/summary.txt ||
                { echo "gpu-check: $s should say 'no GPU'"; exit 1; }
        done
    fi
else
    cat target/gpu-check/*.log
    exit 1
fi

step "the GPU selector: bench/fit_gpu_selector.py on the committed H200 sweep still fits the planner's rule (4 entries of a read B row per thread, gpu_bins::threads_per_b_row) and its leave-one-out evaluation is within 5 % of the best"
python3 bench/fit_gpu_selector.py > target/fit_gpu_selector.txt ||
    { cat target/fit_gpu_selector.txt; echo "fit_gpu_selector: the held-out evaluation missed 1.05"; exit 1; }
grep "^leave one out\|^fitted on all" target/fit_gpu_selector.txt
grep -q "const ENTRIES_PER_THREAD: u64 = $(sed -n 's/^fitted on all .* d = \([0-9]*\)$/\1/p' target/fit_gpu_selector.txt);" src/plan/gpu_bins.rs ||
    { echo "fit_gpu_selector: the sweep fits another divisor than gpu_bins::threads_per_b_row's"; exit 1; }

step "all tests passed"
