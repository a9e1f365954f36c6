// ThreadSanitizer's defaults for the race check (kernels/README.md, "Race
// check"); kernels/host-tests/build.rs links this file into the test
// binaries with the feature `race-check` only.
//
// The test binaries are Rust, whose standard library is not instrumented:
// ThreadSanitizer cannot see how the test harness synchronises, only the
// copies it makes through intercepted memcpy, and would report those. The
// kernels copy nothing through libc, so ignoring the interceptors' accesses
// hides no kernel race.
extern "C" const char* __tsan_default_options() { return "ignore_interceptors_accesses=1"; }
