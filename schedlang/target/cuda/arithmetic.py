"""The CUDA C helpers of integer arithmetic and float -> integer conversion with schedlang's
defined results (README, "Defined behaviour"), identical to the llvm target's and the reference
evaluator's; which operations call them is the shared renderer's rule (target/cexpr.py).

C leaves signed overflow, x / 0, INT_MIN / -1, shifts by the bit width or more and float ->
integer conversions out of range undefined (x86 traps on the divisions: SIGFPE in the shim);
numpy defines them all and so do we. The helpers of ARITHMETIC_PRELUDE compute in the unsigned
type (where C defines wrap-around) and guard the divisors; the renderer calls them only where
a plain operator could go wrong: index arithmetic that loop ranges prove in range, and
division of a non-negative value by a positive constant, stay plain C.
"""
from __future__ import annotations

# T is the compute type, U the unsigned type C computes T in without promoting it to int
# (unsigned for 8 to 32 bits, unsigned long long for 64): unsigned arithmetic wraps in C.
ARITHMETIC_PRELUDE = """\
// Integer arithmetic as numpy defines it (C leaves these undefined): computed in the unsigned
// type U, which wraps, and converted back to T; x / 0 and x % 0 are 0, and x / -1 is -x,
// wrapping at INT_MIN (neither divisor reaches C's / or %, which trap on x86).
template <typename T, typename U> __device__ __forceinline__ T sl_add(T a, T b) { return (T)((U)a + (U)b); }
template <typename T, typename U> __device__ __forceinline__ T sl_sub(T a, T b) { return (T)((U)a - (U)b); }
template <typename T, typename U> __device__ __forceinline__ T sl_mul(T a, T b) { return (T)((U)a * (U)b); }
template <typename T, typename U> __device__ __forceinline__ T sl_truncdiv(T a, T b) {
  return b == 0 ? (T)0 : ((T)-1 < (T)0 && b == (T)-1) ? (T)((U)0 - (U)a) : (T)(a / b);
}
template <typename T, typename U> __device__ __forceinline__ T sl_truncmod(T a, T b) {
  return (b == 0 || ((T)-1 < (T)0 && b == (T)-1)) ? (T)0 : (T)(a % b);
}
template <typename T, typename U> __device__ __forceinline__ T sl_floordiv(T a, T b) {
  const T q = sl_truncdiv<T, U>(a, b);
  return (sl_truncmod<T, U>(a, b) != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <typename T, typename U> __device__ __forceinline__ T sl_floormod(T a, T b) {
  const T r = sl_truncmod<T, U>(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
// Shifts by the bit width or more (or a negative amount) give 0, or -1 for a negative x >> n.
template <typename T, typename U> __device__ __forceinline__ T sl_shl(T a, T b) {
  return (U)b < (U)(sizeof(T) * 8) ? (T)((U)a << (U)b) : (T)0;
}
template <typename T, typename U> __device__ __forceinline__ T sl_shr(T a, T b) {
  return (U)b < (U)(sizeof(T) * 8) ? (T)(a >> b) : (T)(a < 0 ? -1 : 0);
}
// Float -> integer: truncated toward zero, saturated at the integer type's limits, NaN gives 0
// (LLVM's fptosi.sat; the GPU's cvt.rzi does the same). lo is T's minimum and hi its maximum
// + 1, both exact in F; T's maximum is ~lo.
template <typename T, typename F> __device__ __forceinline__ T sl_f2i(F x, F lo, F hi) {
  return x >= lo ? (x < hi ? (T)x : (T)~(T)lo) : (x < lo ? (T)lo : (T)0);
}
// Float // and % as numpy's floor_divide and remainder (its npy_divmod): the remainder takes the
// divisor's sign, x // 0.0 is x / 0.0 and x % 0.0 is nan.
#define SL_FLOAT_DIVMOD(T, fmod_, floor_, copysign_) \\
  __device__ __forceinline__ T sl_float_floormod(T a, T b) { \\
    T mod = fmod_(a, b); \\
    if (b == 0) return mod; \\
    if (mod != 0) { if ((b < 0) != (mod < 0)) mod += b; } else mod = copysign_((T)0, b); \\
    return mod; \\
  } \\
  __device__ __forceinline__ T sl_float_floordiv(T a, T b) { \\
    T mod = fmod_(a, b); \\
    if (b == 0) return a / b; \\
    T div = (a - mod) / b; \\
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1; \\
    if (div == 0) return copysign_((T)0, a / b); \\
    T floordiv = floor_(div); \\
    return div - floordiv > (T)0.5 ? floordiv + 1 : floordiv; \\
  }
SL_FLOAT_DIVMOD(float, fmodf, floorf, copysignf)
SL_FLOAT_DIVMOD(double, fmod, floor, copysign)
"""

HELPERS = ("sl_add<", "sl_sub<", "sl_mul<", "sl_truncdiv<", "sl_truncmod<", "sl_floordiv<", "sl_floormod<",
           "sl_shl<", "sl_shr<", "sl_f2i<", "sl_float_floor")


def uses_helpers(kernel_source: str) -> bool:
    return any(h in kernel_source for h in HELPERS)
