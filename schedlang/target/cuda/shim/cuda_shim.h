// cuda_shim.h: just enough of CUDA to run schedlang's generated CUDA C on the CPU with g++.
// A block's threads run concurrently, so __syncthreads() and warp shuffles behave as on a GPU:
//  - normally as fibers (ucontext) of one OS thread, the fibers' stacks reused for every block:
//    a barrier is a count, and a thread waiting at one yields to the next fiber; the blocks
//    are shared out among a few worker OS threads (one a core), each with its own fibers;
//  - in a ThreadSanitizer build (which must see the threads to see their races) as real
//    OS threads (pthreads), one a GPU thread (the same ones for every block of a launch),
//    __syncthreads() a mutex barrier, blocks one after another.
// __shared__ is function-scope static storage of the worker OS thread (thread_local), so a
// worker's block has its own shared memory; a block's fibers all run on that one thread.
// Only light headers (C's, <bit>, <vector>): most of a build's time was parsing <thread>,
// <barrier>, <functional>, <atomic>...; threads are pthreads, atomics GCC's builtins, and the
// ThreadSanitizer build's barrier a mutex and a condition variable (which TSan sees, as it
// saw std::barrier's atomics).
#pragma once
#include <bit>
#include <cmath>
#include <math.h>   // expf, logf, ... in the global namespace, as CUDA has them
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <pthread.h>
#if !defined(__SANITIZE_THREAD__)
#define SL_SHIM_FIBERS 1
#include <sys/mman.h>
#include <unistd.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
#endif

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#ifdef SL_SHIM_FIBERS
#define __shared__ static thread_local
#else
#define __shared__ static
#endif
#define __align__(n) __attribute__((aligned(n)))

struct uint3 { unsigned int x = 0, y = 0, z = 0; };
struct dim3 { unsigned int x = 1, y = 1, z = 1; };

inline thread_local uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace sl_shim {
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a < b ? b : a; }

// The kernel launch() runs: a reference to the caller's lambda (what std::function would
// hold, without its header).
struct KernelRef {
  void* object;
  void (*call)(void*);
  void operator()() const { call(object); }
};

#ifdef SL_SHIM_FIBERS
// A barrier of cooperating fibers: the last of `expected` to arrive opens it (a new
// generation); the others yield until it is open. A finished thread drops out.
struct Barrier {
  explicit Barrier(unsigned n = 0) : expected(n) {}
  unsigned expected, arrived = 0;
  unsigned long generation = 0;
  void arrive_and_wait();
  void arrive_and_drop() {
    --expected;
    if (arrived > 0 && arrived == expected) open();
  }
  void open() { arrived = 0; ++generation; }
};
#else
// A barrier of OS threads (std::barrier's arrive_and_wait and arrive_and_drop): the last of
// `expected` to arrive opens it (a new generation) and wakes the others.
struct Barrier {
  explicit Barrier(unsigned n = 0) : expected(n) {}
  ~Barrier() { pthread_cond_destroy(&cond); pthread_mutex_destroy(&mutex); }
  Barrier(const Barrier&) = delete;
  Barrier& operator=(const Barrier&) = delete;
  unsigned expected, arrived = 0;
  unsigned long generation = 0;
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  void arrive_and_wait() {
    pthread_mutex_lock(&mutex);
    if (++arrived == expected) {
      open();
    } else {
      const unsigned long g = generation;
      while (generation == g) pthread_cond_wait(&cond, &mutex);
    }
    pthread_mutex_unlock(&mutex);
  }
  void arrive_and_drop() {
    pthread_mutex_lock(&mutex);
    --expected;
    if (arrived > 0 && arrived == expected) open();
    pthread_mutex_unlock(&mutex);
  }
  void open() { arrived = 0; ++generation; pthread_cond_broadcast(&cond); }
};
#endif

// A warp of emulated threads: a shuffle is a write of each lane's value, a barrier of the
// warp's threads, a read of another lane's value, and a second barrier before the slots
// are written again.
struct Warp {
  explicit Warp(unsigned n) : bar(n) {}
  Barrier bar;
  std::uint64_t slots[32];
  alignas(16) unsigned char scratch[32][64];   // gather()'s per-lane records (warp-collective intrinsics)
};
inline thread_local Barrier* block_barrier = nullptr;
inline thread_local Warp* warp = nullptr;
inline thread_local unsigned lane = 0;

// The block's threads as warps of 32 (the last one partial).
struct Warps {
  explicit Warps(unsigned n) {
    for (unsigned w = 0; w * 32 < n; ++w) all.push_back(new Warp(umin(32u, n - w * 32)));
  }
  ~Warps() { for (Warp* w : all) delete w; }
  Warps(const Warps&) = delete;
  Warps& operator=(const Warps&) = delete;
  Warp* operator[](unsigned w) const { return all[w]; }
  unsigned size() const { return all.size(); }
  std::vector<Warp*> all;
};

inline uint3 thread_index(unsigned t, dim3 block) {
  return {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
}

#ifdef SL_SHIM_FIBERS
constexpr std::size_t STACK_BYTES = 256 * 1024;   // a fiber's stack (pages touched only as used)

#if defined(__x86_64__)
// A fiber switch: push the callee-saved registers (System V) and the floating-point control
// words, save the stack pointer in *from, load `to`, pop. glibc's swapcontext would also
// save the signal mask, a system call each time: most of a barrier's cost.
extern "C" void sl_shim_switch(void** from, void* to);
asm(R"(
  .text
  .globl sl_shim_switch
  .hidden sl_shim_switch
  .type sl_shim_switch, @function
sl_shim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size sl_shim_switch, .-sl_shim_switch
)");
struct Context {
  void* sp = nullptr;
  // A fresh context on [stack, stack + bytes) that starts in entry() (which must not return):
  // the frame sl_shim_switch pops, below a zero return address for entry.
  void make(char* stack, std::size_t bytes, void (*entry)()) {
    auto* top = reinterpret_cast<std::uint64_t*>(stack + bytes);   // 16-byte aligned
    top[-1] = 0;
    top[-2] = reinterpret_cast<std::uint64_t>(entry);
    for (int r = 3; r <= 8; ++r) top[-r] = 0;                      // rbp rbx r12 r13 r14 r15
    top[-9] = 0x1f80ull | (0x037full << 32);                        // default mxcsr, x87 control word
    sp = top - 9;
  }
};
inline void switch_context(Context& from, Context& to) { sl_shim_switch(&from.sp, to.sp); }
#else
struct Context {
  ucontext_t uc;
  void make(char* stack, std::size_t bytes, void (*entry)()) {
    getcontext(&uc);
    uc.uc_stack.ss_sp = stack;
    uc.uc_stack.ss_size = bytes;
    uc.uc_link = nullptr;
    makecontext(&uc, entry, 0);
  }
};
inline void switch_context(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

// One worker OS thread's fibers: one per thread of a block, run round-robin. A fiber runs
// until it waits at a barrier (it yields) or its kernel returns.
struct Fibers {
  struct Fiber { Context context; uint3 index; unsigned lane; Warp* warp; bool done; };
  Fibers(unsigned n, dim3 block, KernelRef kernel)
      : fibers(n), warps(n), bar(n), kernel(kernel) {
    page = (std::size_t)sysconf(_SC_PAGESIZE);
    void* p = mmap(nullptr, n * (STACK_BYTES + page), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) { std::perror("cuda_shim: fiber stacks"); std::abort(); }
    stacks = (char*)p;
    for (unsigned t = 0; t < n; ++t) {
      mprotect(stack(t) - page, page, PROT_NONE);   // a guard page below each stack
      fibers[t].index = thread_index(t, block);
      fibers[t].lane = t % 32;
      fibers[t].warp = warps[t / 32];
    }
  }
  ~Fibers() { munmap(stacks, fibers.size() * (STACK_BYTES + page)); }
  char* stack(unsigned t) { return stacks + t * (STACK_BYTES + page) + page; }

  void run_block() {
    const unsigned n = fibers.size();
    bar = Barrier(n);
    for (unsigned w = 0; w < warps.size(); ++w) warps[w]->bar = Barrier(umin(32u, n - w * 32));
    for (unsigned t = 0; t < n; ++t) {
      fibers[t].context.make(stack(t), STACK_BYTES, &Fibers::entry);
      fibers[t].done = false;
    }
    block_barrier = &bar;
    unsigned alive = n;
    while (alive > 0) {
      const unsigned long before = progress;
      for (unsigned t = 0; t < n; ++t) {
        Fiber& f = fibers[t];
        if (f.done) continue;
        current = &f;
        threadIdx = f.index;
        lane = f.lane;
        warp = f.warp;
        switch_context(scheduler, f.context);
        alive -= f.done;
      }
      if (progress == before) {
        std::fprintf(stderr, "cuda_shim: the threads of block (%u, %u, %u) wait for each other at different "
                     "barriers (__syncthreads() and a warp shuffle in divergent code): a deadlock on a GPU\n",
                     blockIdx.x, blockIdx.y, blockIdx.z);
        std::abort();
      }
    }
  }

  // Back to the scheduler; it resumes this fiber in its next round.
  static void yield() { switch_context(current->context, self->scheduler); }

  static void entry() {
    self->kernel();
    current->done = true;
    ++self->progress;
    self->bar.arrive_and_drop();   // a finished thread no longer holds the others back
    current->warp->bar.arrive_and_drop();
    switch_context(current->context, self->scheduler);   // never resumed
    std::abort();
  }

  std::vector<Fiber> fibers;
  Warps warps;
  Barrier bar;
  KernelRef kernel;
  char* stacks;
  std::size_t page;
  Context scheduler;
  unsigned long progress = 0;         // arrivals and finished threads: a round without any is a deadlock
  static inline thread_local Fibers* self = nullptr;
  static inline thread_local Fiber* current = nullptr;
};

inline void Barrier::arrive_and_wait() {
  ++Fibers::self->progress;
  if (++arrived == expected) { open(); return; }
  const unsigned long g = generation;
  while (generation == g) Fibers::yield();
}

// Worker OS threads for a grid: at most one a core ($SL_SHIM_THREADS overrides), and one
// when the grid has a single block.
inline unsigned workers(unsigned blocks) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned w = cores > 0 ? (unsigned)cores : 1u;
  if (const char* env = std::getenv("SL_SHIM_THREADS")) {
    const int e = std::atoi(env);
    w = e > 1 ? (unsigned)e : 1u;
  }
  return umin(w, umax(1u, blocks));
}

// Run kernel() once per thread of the grid: each worker takes the next block, and runs its
// threads as fibers.
struct Grid {
  dim3 grid, block;
  unsigned n;
  unsigned long long blocks, next;
  KernelRef kernel;
  void work() {
    Fibers fibers(n, block, kernel);
    Fibers::self = &fibers;
    for (unsigned long long b; (b = __atomic_fetch_add(&next, 1ull, __ATOMIC_RELAXED)) < blocks;) {
      blockIdx = {unsigned(b % grid.x), unsigned((b / grid.x) % grid.y), unsigned(b / ((unsigned long long)grid.x * grid.y))};
      fibers.run_block();
    }
    Fibers::self = nullptr;
  }
  static void* worker(void* self) { static_cast<Grid*>(self)->work(); return nullptr; }
};

inline void launch_ref(dim3 grid, dim3 block, KernelRef kernel) {
  gridDim = grid;
  blockDim = block;
  Grid g{grid, block, block.x * block.y * block.z, (unsigned long long)grid.x * grid.y * grid.z, 0, kernel};
  const unsigned w = workers(g.blocks > 0xffffffffull ? 0xffffffffu : (unsigned)g.blocks);
  std::vector<pthread_t> threads;
  for (unsigned i = 1; i < w; ++i) {
    pthread_t t;
    if (pthread_create(&t, nullptr, &Grid::worker, &g) != 0) break;   // fewer workers: still every block
    threads.push_back(t);
  }
  g.work();
  for (pthread_t t : threads) pthread_join(t, nullptr);
}
#else
// Run kernel() once per thread of the grid: blocks in order, a block's threads at once, on
// one OS thread a thread of the block, the same threads for every block of the launch
// (creating a thread costs much more under ThreadSanitizer: new threads for every block were
// most of the system time of tests/target/test_reducers.py). Each worker is handed its blocks
// through its own `start` and reports them finished through its own `finish`: a lock that
// one thread of a block releases after its work and another acquires before its own would
// order the two for TSan and hide their races (so the launching thread, which waits on every
// `finish`, never touches a `start` again until the whole block is done). Between blocks the
// launching thread orders them, as creating and joining the threads did.
struct Signal {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  unsigned long count = 0;
  bool quit = false;
  Signal() = default;
  Signal(const Signal&) = delete;
  Signal& operator=(const Signal&) = delete;
  ~Signal() { pthread_cond_destroy(&cond); pthread_mutex_destroy(&mutex); }
  void post(bool last = false) {
    pthread_mutex_lock(&mutex);
    ++count;
    quit = last;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mutex);
  }
  bool wait(unsigned long n) {   // until count reaches n; false when told to quit instead
    pthread_mutex_lock(&mutex);
    while (count < n) pthread_cond_wait(&cond, &mutex);
    const bool go = !quit;
    pthread_mutex_unlock(&mutex);
    return go;
  }
};

struct Worker {
  pthread_t id;
  unsigned t;
  Signal start, finish;   // blocks handed to it, blocks it finished
  struct Launch* launch;
  static void* run(void* self);
};

// What a worker reads of its block (written by the launching thread before it hands the block over).
struct Launch {
  dim3 block;
  uint3 block_index;
  Barrier* bar;
  Warps* warps;
  KernelRef kernel;
};

inline void* Worker::run(void* self) {
  Worker& me = *static_cast<Worker*>(self);
  for (unsigned long next = 1; me.start.wait(next); ++next) {
    const Launch& job = *me.launch;
    blockIdx = job.block_index;
    threadIdx = thread_index(me.t, job.block);
    block_barrier = job.bar;
    warp = (*job.warps)[me.t / 32];
    lane = me.t % 32;
    job.kernel();
    job.bar->arrive_and_drop();   // a finished thread no longer holds the others back
    warp->bar.arrive_and_drop();
    me.finish.post();
  }
  return nullptr;
}

inline void launch_ref(dim3 grid, dim3 block, KernelRef kernel) {
  gridDim = grid;
  blockDim = block;
  const unsigned n = block.x * block.y * block.z;
  Launch launch{block, {}, nullptr, nullptr, kernel};
  std::vector<Worker> workers(n);
  for (unsigned t = 0; t < n; ++t) {
    workers[t].t = t;
    workers[t].launch = &launch;
    if (pthread_create(&workers[t].id, nullptr, &Worker::run, &workers[t]) != 0) {
      std::perror("cuda_shim: a thread of the block");
      std::abort();
    }
  }
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Barrier bar(n);
        Warps warps(n);
        launch.block_index = {bx, by, bz};
        launch.bar = &bar;
        launch.warps = &warps;
        for (Worker& w : workers) w.start.post();
        for (Worker& w : workers) w.finish.wait(w.start.count);
      }
  for (Worker& w : workers) w.start.post(true);
  for (Worker& w : workers) pthread_join(w.id, nullptr);
}
#endif

template <typename F> inline void launch(dim3 grid, dim3 block, const F& kernel) {
  launch_ref(grid, block, KernelRef{(void*)&kernel, [](void* k) { (*static_cast<const F*>(k))(); }});
}

// Lane src's value of v (its own where src is outside the warp's threads).
template <typename T> inline T shuffle(T v, int src) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t), "a shuffled value is at most 8 bytes");
  std::memcpy(&warp->slots[lane], &v, sizeof(T));
  warp->bar.arrive_and_wait();
  T out = v;
  if (src >= 0 && src < 32) std::memcpy(&out, &warp->slots[src], sizeof(T));
  warp->bar.arrive_and_wait();
  return out;
}

// A warp-collective exchange (the intrinsic library's ldmatrix and mma): each lane's `bytes`
// (at most 64) from mine, and every lane's record into all[lane * bytes]; the whole warp takes part.
inline void gather(void* all, const void* mine, unsigned bytes) {
  std::memcpy(warp->scratch[lane], mine, bytes);
  warp->bar.arrive_and_wait();
  for (unsigned l = 0; l < 32; ++l) std::memcpy(static_cast<char*>(all) + l * bytes, warp->scratch[l], bytes);
  warp->bar.arrive_and_wait();
}
}  // namespace sl_shim

inline void __syncthreads() { sl_shim::block_barrier->arrive_and_wait(); }

// CUDA's shuffles within width-wide segments of the warp (the mask is the lanes taking part:
// all of the warp's threads, as the generated code passes it).
template <typename T> inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int seg = sl_shim::lane % width;
  return sl_shim::shuffle(v, seg + (int)delta < width ? (int)(sl_shim::lane + delta) : (int)sl_shim::lane);
}
template <typename T> inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
  return sl_shim::shuffle(v, (int)(sl_shim::lane - sl_shim::lane % width) + src % width);
}

inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// CUDA's bit counts of 32 and 64 bits (__clz(0) is 32, as CUDA defines it).
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero((unsigned)x); }
inline int __clzll(long long x) { return std::countl_zero((unsigned long long)x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

typedef _Float16 __half;
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __half __float2half(float f) { return static_cast<__half>(f); }

// bfloat16: the upper half of a float; narrowing rounds to nearest even, a nan becomes the
// quiet nan of its sign (integer arithmetic: no dependence on the host's rounding modes).
struct __nv_bfloat16 { std::uint16_t x; };
inline float __bfloat162float(__nv_bfloat16 h) { return std::bit_cast<float>(std::uint32_t(h.x) << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (f != f) return {std::uint16_t(((u >> 16) & 0x8000u) | 0x7fc0u)};
  return {std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

// CUDA's vector types (aligned like CUDA's, so a misaligned vector access is as wrong here).
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct alignas(4) __half2 { __half x, y; };
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
inline __half2 __float22half2_rn(float2 f) { return {__float2half(f.x), __float2half(f.y)}; }
struct alignas(4) __nv_bfloat162 { __nv_bfloat16 x, y; };
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.x), __bfloat162float(h.y)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return {__float2bfloat16_rn(f.x), __float2bfloat16_rn(f.y)}; }

// The bounds-checked build (emulate(..., bounds_check=True)): every pointer parameter and
// every shared or local array of a kernel is used through a sl_shim::checked<T>, which knows
// its buffer's name, scope and element count. An
// access outside it touches a zeroed scratch element instead of memory, and the first one is
// recorded for the host to raise (a throw would end the process from a thread).
namespace sl_shim {
inline const char* kernel_name = "";
inline bool bounds_failed = false;      // set once, atomically (GCC's builtins: no <atomic>)
inline char bounds_message[512];

inline void out_of_bounds(const char* scope, const char* buffer, long long index, long long lanes,
                          long long size) {
  bool expected = false;
  if (!__atomic_compare_exchange_n(&bounds_failed, &expected, true, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    return;
  char vector[64] = "";
  if (lanes > 1) std::snprintf(vector, sizeof vector, " (a %lld-element vector access)", lanes);
  std::snprintf(bounds_message, sizeof bounds_message,
                "kernel %s: accesses %s buffer '%s' at index %lld%s, outside its %lld elements, in "
                "thread (%u, %u, %u) of block (%u, %u, %u)", kernel_name, scope, buffer, index, vector, size,
                threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z);
}

template <typename T> struct checked {
  T* data;
  long long size;
  const char* name;
  const char* scope = "global";
  long long offset = 0;

  T& operator[](long long i) const {
    if (offset + i < 0 || offset + i >= size) {
      out_of_bounds(scope, name, offset + i, 1, size);
      static thread_local T scratch;
      scratch = T{};
      return scratch;
    }
    return data[offset + i];
  }
  checked operator+(long long i) const { return {data, size, name, scope, offset + i}; }
  checked operator-(long long i) const { return {data, size, name, scope, offset - i}; }   // (A + i - j: a reversed read)
  // (const float4*)(A + i): a vector access of the elements from A + i on
  template <typename U> explicit operator U*() const {
    constexpr long long lanes = (sizeof(U) + sizeof(T) - 1) / sizeof(T);
    if (offset < 0 || offset + lanes > size) {
      out_of_bounds(scope, name, offset, lanes, size);
      alignas(64) static thread_local unsigned char scratch[64];
      std::memset(scratch, 0, sizeof scratch);
      return reinterpret_cast<U*>(scratch);
    }
    return reinterpret_cast<U*>(data + offset);
  }
};
}  // namespace sl_shim
