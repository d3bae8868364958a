// cuda_shim.h: just enough of CUDA to run schedlang's generated CUDA C on the CPU with g++.
// Each block's threads run as real std::threads (so a missing __syncthreads() is a real
// race that ThreadSanitizer can see); __syncthreads() is a std::barrier; blocks run one
// after another, so a function-scope `static` array is exactly one block's shared memory.
#pragma once
#include <barrier>
#include <bit>
#include <cmath>
#include <math.h>   // expf, logf, ... in the global namespace, as CUDA has them
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct uint3 { unsigned int x = 0, y = 0, z = 0; };
struct dim3 { unsigned int x = 1, y = 1, z = 1; };

inline thread_local uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace sl_shim {
inline thread_local std::barrier<>* block_barrier = nullptr;

// Run kernel() once per thread of the grid: blocks in order, a block's threads at once.
inline void launch(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  gridDim = grid;
  blockDim = block;
  const unsigned n = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        std::barrier<> bar(n);
        std::vector<std::thread> threads;
        threads.reserve(n);
        for (unsigned t = 0; t < n; ++t)
          threads.emplace_back([&, t] {
            blockIdx = {bx, by, bz};
            threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            block_barrier = &bar;
            kernel();
            bar.arrive_and_drop();   // a finished thread no longer holds the others back
          });
        for (auto& th : threads) th.join();
      }
}
}  // namespace sl_shim

inline void __syncthreads() { sl_shim::block_barrier->arrive_and_wait(); }

inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
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
