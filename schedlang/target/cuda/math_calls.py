"""CUDA C for the math intrinsics of tensor/intrin.py (and IEEE negation, expr.nodes.NEG).

One table names the C function of each float intrinsic (the float32 name; float64 drops the
trailing f, float16 and bfloat16 compute as float); float predicates are plain comparisons,
bit counts are helpers of MATH_PRELUDE, which a module includes only when a kernel calls
one. Every rule computes what the llvm target and the reference evaluator
compute (numpy's value), and g++ compiles the same text with the shim (shim/cuda_shim.h).
"""
from __future__ import annotations

from ...errors import InternalError
from ...expr.nodes import NEG, Call
from . import codegen     # (a cycle, as in arithmetic.py: codegen calls render_call)

# math intrinsic -> CUDA function for float (double drops the trailing f).
MATH = {"exp": "expf", "log": "logf", "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf", "erf": "erff",
        "abs": "fabsf", "floor": "floorf", "ceil": "ceilf", "round": "rintf", "trunc": "truncf",
        "pow": "powf", "exp2": "exp2f", "log2": "log2f", "sin": "sinf", "cos": "cosf", "sigmoid": "sl_sigmoidf",
        "exp10": "exp10f", "log10": "log10f", "log1p": "log1pf", "tan": "tanf", "atan": "atanf",
        "atan2": "atan2f", "cosh": "coshf", "sinh": "sinhf", "acos": "acosf", "asin": "asinf",
        "acosh": "acoshf", "asinh": "asinhf", "atanh": "atanhf", "fmod": "fmodf", "hypot": "hypotf",
        "nextafter": "nextafterf", "copysign": "copysignf", "nearbyint": "nearbyintf", "ldexp": "ldexpf"}
# isnan/isinf/isfinite as comparisons (x - x is nan exactly for inf and nan).
FLOAT_CLASS = {"isnan": "{x} != {x}", "isinf": "{x} == {x} && {x} - {x} != {x} - {x}",
               "isfinite": "{x} - {x} == {x} - {x}"}
BIT_COUNTS = {"popcount": "sl_popcount", "clz": "sl_clz"}
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


def render_call(r, e: Call, unary: int, atom: int) -> str:
    """CUDA C of the math call e; r is the CUDARenderer, unary and atom its precedences."""
    if e.name == NEG and e.dtype.lanes > 1:
        return f"sl_neg({r.expr(e.args[0])})"
    if e.name == NEG:      # C's unary minus flips the sign bit (0.0f - x would give +0.0 for +0.0)
        x = r.operand(e.args[0], unary)
        return f"-({x})" if x.startswith("-") else f"-{x}"      # never `--x`, C's decrement
    if e.name in FLOAT_CLASS:      # plain comparisons: no library function, same in g++ (the shim)
        x = r.operand(e.args[0], atom)
        return f"({FLOAT_CLASS[e.name].format(x=x)})"
    args = ", ".join(r.expr(a) for a in e.args)
    if e.name in BIT_COUNTS:
        return f"{BIT_COUNTS[e.name]}<{codegen.compute_type(e.dtype)}>({args})"
    if e.name not in MATH:
        raise InternalError(f"no CUDA rule for math function '{e.name}'")
    fn = MATH[e.name]
    if e.dtype.bits == 64 and e.dtype.lanes == 1:
        fn = fn[:-1]
    return f"{fn}({args})"
