"""The CUDA C helpers of the math intrinsics of tensor/intrin.py (the rules and the table of C
functions are the shared renderer's, target/cexpr.py): bit counts are helpers of MATH_PRELUDE,
which a module includes only when a kernel calls one. They compute what the llvm target and
the reference evaluator compute (numpy's value), and g++ compiles them with the shim.
"""
from __future__ import annotations

HELPERS = ("sl_popcount<", "sl_clz<")

MATH_PRELUDE = """\
// Bit counts of an integer of any width (CUDA has them for 32 and 64 bits): the bits of x
// only, so an int8 -1 has 8 set bits and an int16 1 has 15 leading zeros, as numpy counts.
template <typename T> __device__ __forceinline__ T sl_popcount(T x) {
  if constexpr (sizeof(T) == 8) return (T)__popcll((unsigned long long)x);
  else return (T)__popc((unsigned)x & (0xffffffffu >> (32 - 8 * sizeof(T))));
}
template <typename T> __device__ __forceinline__ T sl_clz(T x) {
  if constexpr (sizeof(T) == 8) return (T)__clzll((long long)x);
  else return (T)(__clz((int)((unsigned)x & (0xffffffffu >> (32 - 8 * sizeof(T))))) - (32 - 8 * (int)sizeof(T)));
}
"""
# Negation of float2/float4 values (vectorized loops, codegen_vector.py), lane by lane.
VECTOR_NEG_PRELUDE = """\
__device__ __forceinline__ float2 sl_neg(float2 a) { return make_float2(-a.x, -a.y); }
__device__ __forceinline__ float4 sl_neg(float4 a) { return make_float4(-a.x, -a.y, -a.z, -a.w); }
"""


def prelude(kernels) -> str:
    """The helpers the kernels' source texts call."""
    text = MATH_PRELUDE if any(h in k for k in kernels for h in HELPERS) else ""
    return text + (VECTOR_NEG_PRELUDE if any("sl_neg(" in k for k in kernels) else "")
