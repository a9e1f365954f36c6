// kernels/testing/host.h: a GPU emulator for host C++20, included by
// portability.h when RS_HOST_EMULATION is defined (kernels/README.md,
// "Host emulation").
//
// rs_host::launch(grid, block, dynamic_shared_bytes, [&] { kernel(args...); })
// runs `block` GPU threads, and the blocks one after another with those
// threads (a block barrier between blocks). The GPU threads are fibers on
// the launching host thread (one stack each, reused across launches; a
// switch swaps stack pointers on x86-64, elsewhere it is swapcontext): a barrier or warp operation switches to the next fiber, so a
// block of 1024 threads costs 1024 context switches per barrier, not 1024
// futex wake-ups on a few cores.
// Each GPU thread sees its own rs_tid()/rs_bid(); shared memory is one arena per
// launch, refilled with a garbage pattern at every block start, so a kernel
// that reads shared memory it did not write fails its tests. Warp operations
// go through a per-warp exchange buffer and a per-warp barrier; lanes are
// not in lockstep, so warp-synchronous code without warp operations fails
// here as it may on a GPU.
//
// Race check. Compiled with -fsanitize=thread (kernels/host-tests' feature
// `race-check`), each fiber is a ThreadSanitizer fiber (its own thread to
// ThreadSanitizer; switches between fibers order nothing, only the first
// start and the end of each fiber in a launch do), and the emulator keeps
// the GPU's memory model, not the host's:
// only rs_sync, rs_syncwarp, the end of a block and the launch order memory
// between threads; shuffles and ballots order execution only (their barrier
// is invisible to ThreadSanitizer), and atomics are relaxed, as on a GPU. A
// lane's write that may overtake another lane's read or write of the same
// shared or global address (a missing rs_syncwarp after a ballot, say) is
// then a data race that ThreadSanitizer reports, whatever order the threads
// happened to run in: what compute-sanitizer's racecheck finds on a GPU.
//
// Misuse aborts with a message: a block size that is not a multiple of
// RS_WARP (or above 1024), a grid of 0 blocks, threads of a block meeting at
// different barriers (an rs_sync inside a divergent branch, an early return
// before an rs_sync), lanes of a warp at different warp operations (or some
// at an rs_sync), static shared memory beyond 48 KiB, and writes just past
// the dynamic or static shared memory.
//
// Everything is in an unnamed namespace: each translation unit is one
// variant (RS_VALUE, RS_OFFSET64, RS_INDEX64, RS_WARP) and several link into
// one test binary.
#ifndef RS_TESTING_HOST_H
#define RS_TESTING_HOST_H

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <source_location>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

#ifndef RS_WARP
#define RS_WARP 32
#endif

// Host entry points carry the variant's suffix (set by build.rs), e.g.
// RS_HOST_FN(rs_host_scan_blocks) -> rs_host_scan_blocks_f64_i32_i32_w32.
#define RS_HOST_CAT2_(a, b) a##_##b
#define RS_HOST_CAT_(a, b) RS_HOST_CAT2_(a, b)
#define RS_HOST_FN(name) RS_HOST_CAT_(name, RS_HOST_SUFFIX)

// Kernels are internal to their translation unit (the launch files wrap the
// .cu files in an unnamed namespace); unused ones are not worth a warning.
#define RS_GLOBAL [[maybe_unused]]
// Launch bounds are the device compilers' business; the launch contract's
// KERNEL_MAX_BLOCK is checked at every launch on the host too.
#define RS_LAUNCH_BOUNDS(n)
#define RS_DEVICE
#define RS_INLINE inline

// The block's dynamic shared memory (the launch's dynamic_shared_bytes).
#define RS_DYNAMIC_SHARED(type, name) \
  type* name = reinterpret_cast<type*>(::rs_host::dynamic_shared())
// A static shared array: the same slice of the block's arena in every thread
// and at every pass, keyed by the address of a static local (one per
// declaration and template instantiation). `name` is a reference to an
// array, so sizeof(name) works as on a device.
#define RS_SHARED(type, name, count)                                             \
  static char rs_shared_key_##name;                                              \
  type(&name)[count] = *reinterpret_cast<type(*)[count]>(::rs_host::shared_static( \
      &rs_shared_key_##name, sizeof(type) * (count), alignof(type)))

namespace {
namespace rs_host {

constexpr int kWarp = RS_WARP;
#if defined(__SANITIZE_THREAD__)
constexpr bool kRaceCheck = true;
#else
constexpr bool kRaceCheck = false;
#endif
// GPU atomics are relaxed: they order nothing but themselves.
constexpr int kAtomicOrder = __ATOMIC_RELAXED;
constexpr int kMaxBlock = 1024;
// CUDA's limit for static __shared__ arrays.
constexpr std::size_t kStaticShared = 48 * 1024;
constexpr std::size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xC3;
// Shared memory at block start: as f64 a NaN, as f32 a NaN and -0.467, as
// i32 neither 0 nor -1 (the empty key of hash tables).
constexpr std::uint64_t kGarbage = 0xFFF4DEADBEEF5A5Aull;

struct Launch;
struct Warp;

struct ThreadState {
  Launch* launch = nullptr;
  Warp* warp = nullptr;
  int tid = 0;
  int lane = 0;
  long long bid = 0;
  unsigned parity = 0;  // which half of the warp's exchange buffer is next
  std::vector<std::pair<const void*, std::size_t>> shared_cache;
};
// The running GPU thread: the scheduler points it at the fiber it resumes
// (atomic, so that the race check sees no race on it between fibers).
thread_local std::atomic<ThreadState*> running{nullptr};

[[noreturn]] [[gnu::format(printf, 1, 2)]] inline void fail(const char* fmt, ...) {
  std::fprintf(stderr, "rs_host emulator: ");
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

inline ThreadState& self() {
  ThreadState* t = running.load(std::memory_order_relaxed);
  if (t == nullptr) fail("a kernel primitive was called outside rs_host::launch");
  return *t;
}

// A fiber's saved context, switch_context() and start_context(). On x86-64
// a switch saves the callee-saved registers, MXCSR and the x87 control word
// on the stack and swaps stack pointers (a few nanoseconds); elsewhere it is
// glibc's swapcontext (which also makes a sigprocmask system call).
#if defined(__x86_64__)
struct Context {
  void* sp = nullptr;
};

// switch_stacks(&save, load): pushes the callee-saved state, stores the
// stack pointer in *save, loads `load` and pops the state saved there.
[[gnu::naked, gnu::noinline]] void switch_stacks(void** /*save*/, void* /*load*/) {
  asm volatile(
      "pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "subq $8, %rsp\n\t"
      "stmxcsr (%rsp)\n\t"
      "fnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\t"
      "fldcw 4(%rsp)\n\t"
      "addq $8, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}

// A new context's first switch returns here: the entry in r13 is called
// with the argument in r12, on a 16-byte aligned stack. The entry never
// returns (it switches away for good).
[[gnu::naked, gnu::noinline]] void context_trampoline() {
  asm volatile(
      "movq %r12, %rdi\n\t"
      "callq *%r13\n\t"
      "ud2\n\t");
}

inline void switch_context(Context& save, Context& load) { switch_stacks(&save.sp, load.sp); }

inline void start_context(Context& c, unsigned char* stack, std::size_t size, void (*entry)(long),
                          long arg) {
  // From the top (16-byte aligned), downwards: 16 bytes of room, the
  // trampoline as the return address, rbp, rbx, r12 = arg, r13 = entry, r14,
  // r15, then MXCSR and the control word as this thread has them.
  auto* top = reinterpret_cast<std::uint64_t*>(
      (reinterpret_cast<std::uintptr_t>(stack + size) & ~std::uintptr_t(15)) - 16);
  std::uint64_t* sp = top - 8;
  std::uint32_t mxcsr = 0;
  std::uint16_t fcw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  sp[0] = std::uint64_t(mxcsr) | (std::uint64_t(fcw) << 32);
  sp[1] = 0;                                                   // r15
  sp[2] = 0;                                                   // r14
  sp[3] = reinterpret_cast<std::uint64_t>(entry);              // r13
  sp[4] = std::uint64_t(arg);                                  // r12
  sp[5] = 0;                                                   // rbx
  sp[6] = 0;                                                   // rbp
  sp[7] = reinterpret_cast<std::uint64_t>(&context_trampoline);  // return address
  c.sp = sp;
}
#else
struct Context {
  ucontext_t uc;
};

inline void switch_context(Context& save, Context& load) {
  if (swapcontext(&save.uc, &load.uc) != 0) fail("swapcontext failed");
}

// Apart, because getcontext may return twice and would make the caller's
// locals suspect. makecontext passes int arguments only.
[[gnu::noinline]] inline void start_context(Context& c, unsigned char* stack, std::size_t size,
                                            void (*entry)(long), long arg) {
  if (getcontext(&c.uc) != 0) fail("getcontext failed");
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;  // the entry never returns
  makecontext(&c.uc, reinterpret_cast<void (*)()>(entry), 1, int(arg));
}
#endif

// Fibers: the scheduler of the launch on this host thread. A fiber that
// waits at a barrier switches back to it (yield); it resumes the fibers
// round robin and counts progress, so that fibers all waiting for each
// other are reported, not spun on forever. What the scheduler and the
// fibers both touch is atomic (relaxed): the race check must see no race in
// the emulator's own bookkeeping.
struct FiberRun {
  Context scheduler;
  std::vector<Context> fibers;
  std::unique_ptr<std::atomic<bool>[]> done;
  // Arrivals at barriers and finished fibers: a round without any is a
  // deadlock.
  std::atomic<std::uint64_t> progress{0};
  void (*run)(void*, int) = nullptr;
  void* run_arg = nullptr;
#if defined(__SANITIZE_THREAD__)
  void* scheduler_tsan = nullptr;
#endif
};
thread_local FiberRun* fiber_run = nullptr;

// Fiber stacks (and in the race check ThreadSanitizer's fibers), kept per
// host thread for the next launch: mapped without reserving swap (only the
// pages a fiber touches cost memory), with an inaccessible guard page below
// each, so an overflow faults.
struct FiberStacks {
  static constexpr std::size_t kPage = 4096;
  static constexpr std::size_t kSize = 256 * 1024;
  std::vector<unsigned char*> stacks;
#if defined(__SANITIZE_THREAD__)
  std::vector<void*> tsan;
#endif
  FiberStacks() = default;
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;
  ~FiberStacks() {
    for (unsigned char* s : stacks) munmap(s - kPage, kSize + kPage);
#if defined(__SANITIZE_THREAD__)
    for (void* f : tsan) __tsan_destroy_fiber(f);
#endif
  }
  void reserve(std::size_t n) {
    while (stacks.size() < n) {
      void* p = mmap(nullptr, kSize + kPage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
      if (p == MAP_FAILED) fail("could not map a fiber stack of %zu bytes", kSize);
      if (mprotect(p, kPage, PROT_NONE) != 0) fail("could not protect a fiber stack's guard page");
      stacks.push_back(static_cast<unsigned char*>(p) + kPage);
#if defined(__SANITIZE_THREAD__)
      tsan.push_back(__tsan_create_fiber(0));
#endif
    }
  }
};
thread_local FiberStacks fiber_stacks;

// tsan_switch's fiber index for the scheduler.
constexpr std::size_t kToScheduler = std::size_t(-1);

// In the race check, tells ThreadSanitizer which fiber runs next; `sync`:
// whether the switch orders memory (only a fiber's first start in a launch,
// from the scheduler, and its end, back to it). Always inlined: a function
// of its own would enter on one fiber's shadow stack and leave on the
// other's.
[[maybe_unused]] [[gnu::always_inline]] inline void tsan_switch([[maybe_unused]] std::size_t to_fiber,
                                         [[maybe_unused]] bool sync) {
#if defined(__SANITIZE_THREAD__)
  void* to = to_fiber == kToScheduler ? fiber_run->scheduler_tsan : fiber_stacks.tsan[to_fiber];
  __tsan_switch_to_fiber(to, sync ? 0u : unsigned(__tsan_switch_to_fiber_no_sync));
#endif
}

inline void fiber_yield() {
  FiberRun& r = *fiber_run;
  const std::size_t t = std::size_t(self().tid);
  tsan_switch(kToScheduler, false);
  switch_context(r.fibers[t], r.scheduler);
}

inline void fiber_progress() { fiber_run->progress.fetch_add(1, std::memory_order_relaxed); }

// A fiber's entry: GPU thread t (the rest is in fiber_run), then back to the
// scheduler for good. Not instrumented by the race check: it never returns,
// and it switches ThreadSanitizer to the scheduler before it leaves.
#if defined(__SANITIZE_THREAD__)
[[gnu::no_sanitize_thread]]
#endif
[[noreturn]] inline void fiber_main(long t) {
  FiberRun& r = *fiber_run;
  r.run(r.run_arg, int(t));
  r.done[std::size_t(t)].store(true, std::memory_order_relaxed);
  fiber_progress();
  tsan_switch(kToScheduler, true);
  switch_context(r.fibers[std::size_t(t)], r.scheduler);
  fail("a finished fiber was resumed");
}

// What a thread is doing when it arrives at a barrier, and where: the kind
// in the high 32 bits, the source line in the low ones.
enum Kind : std::uint32_t {
  kSync = 1,
  kBlockEnd,
  kShfl,
  kShflDown,
  kShflXor,
  kBallot,
  kSyncWarp,
};

inline const char* kind_name(std::uint64_t tag) {
  switch (tag >> 32) {
    case kSync:
      return "rs_sync";
    case kBlockEnd:
      return "the end of the kernel";
    case kShfl:
      return "rs_shfl";
    case kShflDown:
      return "rs_shfl_down";
    case kShflXor:
      return "rs_shfl_xor";
    case kSyncWarp:
      return "rs_syncwarp";
    case kBallot:
      return "rs_ballot";
    default:
      return "?";
  }
}

inline std::uint64_t make_tag(Kind kind, const std::source_location& loc) {
  return (std::uint64_t(kind) << 32) | std::uint64_t(loc.line());
}

[[noreturn]] inline void mismatch(const char* scope, std::uint64_t first, std::uint64_t mine) {
  fail("block %lld thread %d (lane %d): %s at line %u met %s at line %u in the same %s "
       "barrier (divergent barrier or warp operation)",
       self().bid, self().tid, self().lane, kind_name(mine), unsigned(mine & 0xffffffffu),
       kind_name(first), unsigned(first & 0xffffffffu), scope);
}

// Does a barrier order memory (rs_sync, rs_syncwarp, the end of a block) or
// only execution (shuffles and ballots)? The difference is seen only by the
// race check: elsewhere every barrier orders memory.
enum class Orders { kMemory, kExecution };

// A central barrier for n threads that checks that every thread of a phase
// arrives with the same tag (same operation at the same line).
//
// A thread waits by switching to the next fiber (fiber_yield) until the
// last one arrives. In the race check, an execution-only barrier uses
// relaxed atomics and fences, which ThreadSanitizer does not model, so it
// sees no happens-before edge through it; a memory barrier's acquire and
// release are its edges.
class alignas(64) Barrier {
 public:
  Barrier(unsigned n, const char* scope) : n_(n), scope_(scope) {}

  // Arrives and waits until all n threads arrived; the last one runs
  // `last()` before releasing the others.
  template <class Last>
  void arrive_and_wait(std::uint64_t tag, Orders orders, Last&& last) {
    const bool memory = !kRaceCheck || orders == Orders::kMemory;
    const std::memory_order load = memory ? std::memory_order_acquire : std::memory_order_relaxed;
    const std::uint32_t gen = gen_.load(load);
    if (!memory) std::atomic_thread_fence(std::memory_order_release);
    if (!arrive(tag, memory ? std::memory_order_acq_rel : std::memory_order_relaxed, last))
      while (gen_.load(load) == gen) fiber_yield();
    if (!memory) std::atomic_thread_fence(std::memory_order_acquire);
  }

  // Arrives without waiting (marks a phase in which the thread does no
  // exchange, so that lanes still inside a warp operation are reported).
  void arrive_only(std::uint64_t tag) { arrive(tag, std::memory_order_relaxed, [] {}); }

 private:
  template <class Last>
  bool arrive(std::uint64_t tag, std::memory_order order, Last&& last) {
    std::uint64_t first = 0;
    if (!tag_.compare_exchange_strong(first, tag, order) && first != tag)
      mismatch(scope_, first, tag);
    fiber_progress();
    if (count_.fetch_add(1, order) + 1 != n_) return false;
    if (order == std::memory_order_relaxed) std::atomic_thread_fence(std::memory_order_acquire);
    count_.store(0, std::memory_order_relaxed);
    tag_.store(0, std::memory_order_relaxed);
    last();
    if (order == std::memory_order_relaxed) std::atomic_thread_fence(std::memory_order_release);
    gen_.fetch_add(1, order);
    return true;
  }

  std::atomic<std::uint32_t> count_{0};
  std::atomic<std::uint32_t> gen_{0};
  std::atomic<std::uint64_t> tag_{0};
  const unsigned n_;
  const char* scope_;
};

struct alignas(64) Warp {
  Warp() : bar(kWarp, "warp") {}
  Barrier bar;
  // Double-buffered by the lanes' parity: one barrier per operation is
  // enough, because a lane can only overwrite a half after every lane has
  // passed the next operation's barrier, hence finished reading it.
  std::uint64_t slot[2][kWarp];
};

struct Launch {
  Launch(long long grid_, int block_, std::size_t dyn_)
      : grid(grid_), block(block_), dyn(dyn_), block_bar(unsigned(block_), "block") {
    dyn_padded = (dyn + 15) / 16 * 16;
    size = dyn_padded + kGuard + kStaticShared + kGuard;
    arena.reset(new (std::align_val_t(64)) unsigned char[size]);
    dynamic = arena.get();
    statics = arena.get() + dyn_padded + kGuard;
    warps.reset(new Warp[std::size_t(block / kWarp)]);
    fill();
  }

  struct ArenaDelete {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };

  void fill() {
    for (std::size_t i = 0; i + 8 <= size; i += 8) std::memcpy(arena.get() + i, &kGarbage, 8);
    std::memset(dynamic + dyn, kGuardByte, dyn_padded + kGuard - dyn);
    std::memset(statics + kStaticShared, kGuardByte, kGuard);
  }

  void check_guards(long long bid) const {
    for (std::size_t i = dyn; i < dyn_padded + kGuard; ++i)
      if (dynamic[i] != kGuardByte)
        fail("block %lld wrote byte %zu of dynamic shared memory, which has %zu bytes", bid, i,
             dyn);
    for (std::size_t i = 0; i < kGuard; ++i)
      if (statics[kStaticShared + i] != kGuardByte)
        fail("block %lld wrote past the %zu bytes of static shared memory", bid, kStaticShared);
  }

  const long long grid;
  const int block;
  const std::size_t dyn;
  std::size_t dyn_padded = 0;
  std::size_t size = 0;
  std::unique_ptr<unsigned char[], ArenaDelete> arena;
  unsigned char* dynamic = nullptr;
  unsigned char* statics = nullptr;
  Barrier block_bar;
  std::unique_ptr<Warp[]> warps;
  // Static shared arrays: declaration key -> offset in `statics`, the same
  // for all threads and blocks of the launch.
  std::mutex shared_mutex;
  std::vector<std::pair<const void*, std::size_t>> shared_map;
  std::size_t shared_used = 0;
};

inline Launch& current() {
  ThreadState* t = running.load(std::memory_order_relaxed);
  Launch* l = t == nullptr ? nullptr : t->launch;
  if (l == nullptr) fail("a kernel primitive was called outside rs_host::launch");
  return *l;
}

inline void* dynamic_shared() { return current().dynamic; }

inline void* shared_static(const void* key, std::size_t bytes, std::size_t align) {
  Launch& l = current();
  ThreadState& me = self();
  for (const auto& e : me.shared_cache)
    if (e.first == key) return l.statics + e.second;
  std::size_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(l.shared_mutex);
    bool found = false;
    for (const auto& e : l.shared_map)
      if (e.first == key) {
        offset = e.second;
        found = true;
      }
    if (!found) {
      const std::size_t a = align < 16 ? 16 : align;
      offset = (l.shared_used + a - 1) / a * a;
      if (offset + bytes > kStaticShared)
        fail("static shared memory (RS_SHARED) exceeds %zu bytes", kStaticShared);
      l.shared_map.emplace_back(key, offset);
      l.shared_used = offset + bytes;
    }
  }
  me.shared_cache.emplace_back(key, offset);
  return l.statics + offset;
}

inline void end_block() {
  ThreadState& me = self();
  Launch& l = *me.launch;
  const std::uint64_t tag = std::uint64_t(kBlockEnd) << 32;
  me.warp->bar.arrive_only(tag);
  const long long bid = me.bid;
  l.block_bar.arrive_and_wait(tag, Orders::kMemory, [&l, bid] {
    l.check_guards(bid);
    l.fill();
  });
}

// Runs one fiber per GPU thread (states[t]) until all finished, round robin.
[[gnu::noinline]] inline void run_fibers(FiberRun& r, std::vector<ThreadState>& states) {
  const std::size_t n = states.size();
  fiber_stacks.reserve(n);
  r.fibers.resize(n);
  r.done.reset(new std::atomic<bool>[n]);
  for (std::size_t t = 0; t < n; ++t) r.done[t].store(false, std::memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
  r.scheduler_tsan = __tsan_get_current_fiber();
#endif
  fiber_run = &r;
  for (std::size_t t = 0; t < n; ++t)
    start_context(r.fibers[t], fiber_stacks.stacks[t], FiberStacks::kSize, &fiber_main, long(t));
  std::vector<unsigned char> done(n, 0);
  bool first = true;
  for (std::size_t live = n; live > 0; first = false) {
    const std::uint64_t before = r.progress.load(std::memory_order_relaxed);
    for (std::size_t t = 0; t < n; ++t) {
      if (done[t]) continue;
      running.store(&states[t], std::memory_order_relaxed);
      tsan_switch(t, first);
      switch_context(r.scheduler, r.fibers[t]);
      if (r.done[t].load(std::memory_order_relaxed)) {
        done[t] = 1;
        --live;
      }
    }
    if (live > 0 && r.progress.load(std::memory_order_relaxed) == before)
      fail("every running GPU thread waits at a barrier that can never be reached");
  }
  running.store(nullptr, std::memory_order_relaxed);
  fiber_run = nullptr;
}

// Runs `body` (which calls one kernel) on a grid of `grid` blocks of `block`
// threads with `dynamic_shared_bytes` of dynamic shared memory; returns when
// every block finished.
template <class Body>
void launch(long long grid, long long block, long long dynamic_shared_bytes, Body&& body) {
  if (grid < 1) fail("launch with a grid of %lld blocks (CUDA rejects grids below 1)", grid);
  if (block < kWarp || block > kMaxBlock || block % kWarp != 0)
    fail("launch with a block of %lld threads: it must be a multiple of RS_WARP = %d, at most %d",
         block, kWarp, kMaxBlock);
  if (dynamic_shared_bytes < 0)
    fail("launch with %lld bytes of dynamic shared memory", dynamic_shared_bytes);
  if (running.load(std::memory_order_relaxed) != nullptr)
    fail("rs_host::launch called from inside a kernel");
  Launch l(grid, int(block), std::size_t(dynamic_shared_bytes));
  std::vector<ThreadState> states(static_cast<std::size_t>(block));
  // GPU thread t: every block of the grid in turn.
  auto gpu_thread = [&l, &body, &states](int t) {
    ThreadState& me = states[std::size_t(t)];
    me.launch = &l;
    me.tid = t;
    me.lane = t % kWarp;
    me.warp = &l.warps[std::size_t(t / kWarp)];
    for (long long b = 0; b < l.grid; ++b) {
      me.bid = b;
      body();
      end_block();
    }
    me.launch = nullptr;
  };
  FiberRun r;
  r.run = [](void* arg, int t) { (*static_cast<decltype(gpu_thread)*>(arg))(t); };
  r.run_arg = &gpu_thread;
  run_fibers(r, states);
}

// One warp exchange: every lane publishes `v`, then reads lane `pick(lane)`.
template <class T, class Pick>
T exchange(T v, Kind kind, const std::source_location& loc, Pick pick) {
  static_assert(std::is_same_v<T, int> || std::is_same_v<T, unsigned> ||
                    std::is_same_v<T, long long> || std::is_same_v<T, unsigned long long> ||
                    std::is_same_v<T, float> || std::is_same_v<T, double>,
                "warp shuffles take int, unsigned, long long, unsigned long long, float, double");
  ThreadState& t = self();
  Warp& w = *t.warp;
  std::uint64_t* slot = w.slot[t.parity];
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  __atomic_store_n(&slot[t.lane], bits, __ATOMIC_RELAXED);
  w.bar.arrive_and_wait(make_tag(kind, loc), Orders::kExecution, [] {});
  t.parity ^= 1u;
  bits = __atomic_load_n(&slot[pick(t.lane)], __ATOMIC_RELAXED);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// Generic atomics through GCC's builtins (lock-free for 4 and 8 bytes).
template <class T>
T cas(T* p, T cmp, T val) {
  __atomic_compare_exchange(p, &cmp, &val, false, kAtomicOrder, kAtomicOrder);
  return cmp;  // the old value, whether or not it was replaced
}
template <class T, class F>
T update(T* p, F f) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  for (;;) {
    T val = f(old);
    if (__atomic_compare_exchange(p, &old, &val, true, kAtomicOrder, __ATOMIC_RELAXED))
      return old;
  }
}

}  // namespace rs_host

// ---- the portability.h API ----------------------------------------------

inline int rs_tid() { return rs_host::self().tid; }
inline long long rs_bid() { return rs_host::self().bid; }
inline int rs_bdim() { return rs_host::current().block; }
inline long long rs_gdim() { return rs_host::current().grid; }
inline int rs_lane() { return rs_host::self().lane; }

inline void rs_sync(std::source_location loc = std::source_location::current()) {
  const std::uint64_t tag = rs_host::make_tag(rs_host::kSync, loc);
  rs_host::self().warp->bar.arrive_only(tag);
  rs_host::current().block_bar.arrive_and_wait(tag, rs_host::Orders::kMemory, [] {});
}

inline int rs_atomic_cas(int* p, int c, int v) { return rs_host::cas(p, c, v); }
inline unsigned rs_atomic_cas(unsigned* p, unsigned c, unsigned v) {
  return rs_host::cas(p, c, v);
}
inline unsigned long long rs_atomic_cas(unsigned long long* p, unsigned long long c,
                                        unsigned long long v) {
  return rs_host::cas(p, c, v);
}
inline long long rs_atomic_cas(long long* p, long long c, long long v) {
  return rs_host::cas(p, c, v);
}

inline int rs_atomic_add(int* p, int v) {
  // Wrapping, as on a GPU (signed overflow in an atomic is defined here).
  return int(__atomic_fetch_add(reinterpret_cast<unsigned*>(p), unsigned(v), rs_host::kAtomicOrder));
}
inline unsigned rs_atomic_add(unsigned* p, unsigned v) {
  return __atomic_fetch_add(p, v, rs_host::kAtomicOrder);
}
inline unsigned rs_atomic_or(unsigned* p, unsigned v) {
  return __atomic_fetch_or(p, v, rs_host::kAtomicOrder);
}
inline unsigned long long rs_atomic_add(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, rs_host::kAtomicOrder);
}
inline long long rs_atomic_add(long long* p, long long v) {
  return (long long)__atomic_fetch_add(reinterpret_cast<unsigned long long*>(p),
                                       (unsigned long long)v, rs_host::kAtomicOrder);
}
inline float rs_atomic_add(float* p, float v) {
  return rs_host::update(p, [v](float old) { return old + v; });
}
inline double rs_atomic_add(double* p, double v) {
  return rs_host::update(p, [v](double old) { return old + v; });
}
inline unsigned long long rs_atomic_min(unsigned long long* p, unsigned long long v) {
  return rs_host::update(p, [v](unsigned long long old) { return old < v ? old : v; });
}
inline long long rs_atomic_max(long long* p, long long v) {
  return rs_host::update(p, [v](long long old) { return old > v ? old : v; });
}
// A GPU's volatile load: a relaxed atomic one (not a data race with atomics).
inline long long rs_atomic_load(const long long* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

// Shuffles as on CUDA: rs_shfl takes the source lane modulo RS_WARP;
// rs_shfl_down and rs_shfl_xor return the caller's own value when the
// source lane is outside the warp.
template <class T>
T rs_shfl(T v, int src_lane, std::source_location loc = std::source_location::current()) {
  return rs_host::exchange(v, rs_host::kShfl, loc,
                           [src_lane](int) { return src_lane & (rs_host::kWarp - 1); });
}
template <class T>
T rs_shfl_down(T v, unsigned delta, std::source_location loc = std::source_location::current()) {
  return rs_host::exchange(v, rs_host::kShflDown, loc, [delta](int lane) {
    return delta < unsigned(rs_host::kWarp - lane) ? lane + int(delta) : lane;
  });
}
template <class T>
T rs_shfl_xor(T v, int mask, std::source_location loc = std::source_location::current()) {
  return rs_host::exchange(v, rs_host::kShflXor, loc, [mask](int lane) {
    const int src = lane ^ mask;
    return src >= 0 && src < rs_host::kWarp ? src : lane;
  });
}

inline unsigned long long rs_ballot(bool pred,
                                    std::source_location loc = std::source_location::current()) {
  rs_host::ThreadState& t = rs_host::self();
  rs_host::Warp& w = *t.warp;
  std::uint64_t* slot = w.slot[t.parity];
  __atomic_store_n(&slot[t.lane], std::uint64_t(pred ? 1 : 0), __ATOMIC_RELAXED);
  w.bar.arrive_and_wait(rs_host::make_tag(rs_host::kBallot, loc), rs_host::Orders::kExecution,
                        [] {});
  t.parity ^= 1u;
  unsigned long long mask = 0;
  for (int l = 0; l < rs_host::kWarp; ++l)
    mask |= (unsigned long long)(__atomic_load_n(&slot[l], __ATOMIC_RELAXED) & 1u) << l;
  return mask;
}

// A warp barrier: every lane must reach the same one (a sync in a divergent
// branch aborts, as the other warp operations do).
inline void rs_syncwarp(std::source_location loc = std::source_location::current()) {
  rs_host::ThreadState& t = rs_host::self();
  t.warp->bar.arrive_and_wait(rs_host::make_tag(rs_host::kSyncWarp, loc), rs_host::Orders::kMemory,
                              [] {});
}

inline int rs_popcll(unsigned long long x) { return __builtin_popcountll(x); }

}  // namespace

#endif  // RS_TESTING_HOST_H
