// cuda_shim.h: just enough of CUDA to run schedlang's generated CUDA C on the CPU with g++.
// Each block's threads run as real std::threads (so a missing __syncthreads() is a real
// race that ThreadSanitizer can see); __syncthreads() is a std::barrier; blocks run one
// after another, so a function-scope `static` array is exactly one block's shared memory.
#pragma once
#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <math.h>   // expf, logf, ... in the global namespace, as CUDA has them
#include <cstdint>
#include <cstring>
#include <memory>
#include <functional>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct uint3 { unsigned int x = 0, y = 0, z = 0; };
struct dim3 { unsigned int x = 1, y = 1, z = 1; };

inline thread_local uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace sl_shim {
inline thread_local std::barrier<>* block_barrier = nullptr;

// A warp of emulated threads: a shuffle is a write of each lane's value, a barrier of the
// warp's threads, a read of another lane's value, and a second barrier before the slots
// are written again.
struct Warp {
  explicit Warp(unsigned n) : bar(n) {}
  std::barrier<> bar;
  std::uint64_t slots[32];
};
inline thread_local Warp* warp = nullptr;
inline thread_local unsigned lane = 0;

// Run kernel() once per thread of the grid: blocks in order, a block's threads at once.
inline void launch(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  gridDim = grid;
  blockDim = block;
  const unsigned n = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        std::barrier<> bar(n);
        std::vector<std::unique_ptr<Warp>> warps;
        for (unsigned w = 0; w * 32 < n; ++w) warps.push_back(std::make_unique<Warp>(std::min(32u, n - w * 32)));
        std::vector<std::thread> threads;
        threads.reserve(n);
        for (unsigned t = 0; t < n; ++t)
          threads.emplace_back([&, t] {
            blockIdx = {bx, by, bz};
            threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            block_barrier = &bar;
            warp = warps[t / 32].get();
            lane = t % 32;
            kernel();
            bar.arrive_and_drop();   // a finished thread no longer holds the others back
            warp->bar.arrive_and_drop();
          });
        for (auto& th : threads) th.join();
      }
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
// recorded for the host to raise (a throw would end the process from a std::thread).
#include <atomic>
#include <cstdio>
namespace sl_shim {
inline const char* kernel_name = "";
inline std::atomic<bool> bounds_failed{false};
inline char bounds_message[512];

inline void out_of_bounds(const char* scope, const char* buffer, long long index, long long lanes,
                          long long size) {
  bool expected = false;
  if (!bounds_failed.compare_exchange_strong(expected, true)) return;
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
