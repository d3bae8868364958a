"""The C99 helpers every module of the c target starts with: what the CUDA prelude's templates do
(target/cuda/arithmetic.py, math_calls.py), written once per type by macros, plus float16 and
bfloat16 conversions computed exactly as the llvm target computes them (target/llvm/half.py,
bfloat.py). Unused helpers are static inline functions and cost nothing.
"""
from __future__ import annotations

# (name suffix, C type, the unsigned type C computes it in without promotion to int, bits)
INT_TYPES = (("i8", "int8_t", "unsigned", 8), ("i16", "int16_t", "unsigned", 16), ("i32", "int32_t", "unsigned", 32),
             ("i64", "int64_t", "uint64_t", 64), ("u8", "uint8_t", "unsigned", 8), ("u16", "uint16_t", "unsigned", 16),
             ("u32", "uint32_t", "unsigned", 32), ("u64", "uint64_t", "uint64_t", 64))
_UINT_OF_BITS = {8: "uint8_t", 16: "uint16_t", 32: "uint32_t", 64: "uint64_t"}

HEAD = """\
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline float sl_bits_to_f32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline double sl_bits_to_f64(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }
static inline uint32_t sl_f32_to_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* min/max propagate NaN, like numpy's minimum/maximum (fminf/fmaxf would drop it). */
#define SL_MIN_MAX(S, T) \\
  static inline T sl_min_##S(T a, T b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); } \\
  static inline T sl_max_##S(T a, T b) { return a != a ? a : (b != b ? b : (b > a ? b : a)); }

/* Integer arithmetic as numpy defines it (C leaves these undefined): computed in the unsigned
   type U, which wraps, and converted back to T; x / 0 and x % 0 are 0, and x / -1 is -x,
   wrapping at INT_MIN (neither divisor reaches C's / or %, which trap on x86). Shifts by the
   bit width or more (or a negative amount) give 0, or -1 for a negative x >> n. */
#define SL_INT(S, T, U) \\
  static inline T sl_add_##S(T a, T b) { return (T)((U)a + (U)b); } \\
  static inline T sl_sub_##S(T a, T b) { return (T)((U)a - (U)b); } \\
  static inline T sl_mul_##S(T a, T b) { return (T)((U)a * (U)b); } \\
  static inline T sl_truncdiv_##S(T a, T b) { \\
    return b == 0 ? (T)0 : ((T)-1 < (T)0 && b == (T)-1) ? (T)((U)0 - (U)a) : (T)(a / b); \\
  } \\
  static inline T sl_truncmod_##S(T a, T b) { \\
    return (b == 0 || ((T)-1 < (T)0 && b == (T)-1)) ? (T)0 : (T)(a % b); \\
  } \\
  static inline T sl_floordiv_##S(T a, T b) { \\
    const T q = sl_truncdiv_##S(a, b); \\
    return (sl_truncmod_##S(a, b) != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q; \\
  } \\
  static inline T sl_floormod_##S(T a, T b) { \\
    const T r = sl_truncmod_##S(a, b); \\
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r; \\
  } \\
  static inline T sl_shl_##S(T a, T b) { return (U)b < (U)(sizeof(T) * 8) ? (T)((U)a << (U)b) : (T)0; } \\
  static inline T sl_shr_##S(T a, T b) { return (U)b < (U)(sizeof(T) * 8) ? (T)(a >> b) : (T)(a < 0 ? -1 : 0); }

/* Float -> integer: truncated toward zero, saturated at the integer type's limits, NaN gives 0
   (LLVM's fptosi.sat). lo is T's minimum and hi its maximum + 1, both exact in F; T's maximum is ~lo. */
#define SL_F2I(S, T, FS, F) \\
  static inline T sl_f2i_##S##_##FS(F x, F lo, F hi) { \\
    return x >= lo ? (x < hi ? (T)x : (T)~(T)lo) : (x < lo ? (T)lo : (T)0); \\
  }

/* Bit counts of the bits of x only: an int8 -1 has 8 set bits, an int16 1 has 15 leading zeros. */
#define SL_BITS(S, T, UT, BITS) \\
  static inline T sl_popcount_##S(T x) { \\
    UT v = (UT)x; T n = 0; \\
    while (v) { n = (T)(n + (v & 1u)); v = (UT)(v >> 1); } \\
    return n; \\
  } \\
  static inline T sl_clz_##S(T x) { \\
    UT v = (UT)x; T n = 0; int i; \\
    for (i = BITS - 1; i >= 0 && !((v >> i) & 1u); --i) n = (T)(n + 1); \\
    return n; \\
  }

/* Float // and % as numpy's floor_divide and remainder (its npy_divmod): the remainder takes the
   divisor's sign, x // 0.0 is x / 0.0 and x % 0.0 is nan. */
#define SL_FLOAT_DIVMOD(FS, T, fmod_, floor_, copysign_) \\
  static inline T sl_float_floormod_##FS(T a, T b) { \\
    T mod = fmod_(a, b); \\
    if (b == 0) return mod; \\
    if (mod != 0) { if ((b < 0) != (mod < 0)) mod += b; } else mod = copysign_((T)0, b); \\
    return mod; \\
  } \\
  static inline T sl_float_floordiv_##FS(T a, T b) { \\
    T mod = fmod_(a, b), div, floordiv; \\
    if (b == 0) return a / b; \\
    div = (a - mod) / b; \\
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1; \\
    if (div == 0) return copysign_((T)0, a / b); \\
    floordiv = floor_(div); \\
    return div - floordiv > (T)0.5 ? floordiv + 1 : floordiv; \\
  }
SL_FLOAT_DIVMOD(f32, float, fmodf, floorf, copysignf)
SL_FLOAT_DIVMOD(f64, double, fmod, floor, copysign)
SL_MIN_MAX(f32, float) SL_MIN_MAX(f64, double) SL_MIN_MAX(b, bool)

static inline float sl_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline double sl_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline float sl_rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double sl_rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float sl_exp10f(float x) { return powf(10.0f, x); }
static inline double sl_exp10(double x) { return pow(10.0, x); }

/* float16 is stored as its 16 bits and computed as float. Widening is exact; narrowing rounds to
   nearest even (subnormals kept, overflow to inf, NaN to the quiet NaN of its sign), as the llvm
   target's half.py. A double is first rounded to float to odd, so that it is rounded once. */
static inline float sl_h2f(uint16_t h) {
  const uint32_t u = h, sign = (u & 0x8000u) << 16, body = (u & 0x7fffu) << 13, exp = body & 0x0f800000u;
  const uint32_t normal = body + (112u << 23);
  uint32_t out = normal;
  if (exp == 0x0f800000u) out = normal + (112u << 23);
  else if (exp == 0) out = sl_f32_to_bits(sl_bits_to_f32(normal + (1u << 23)) - sl_bits_to_f32(113u << 23));
  return sl_bits_to_f32(out | sign);
}
static inline uint16_t sl_f2h(float v) {
  const uint32_t f = sl_f32_to_bits(v), sign = f & 0x80000000u, mag = f ^ sign;
  uint32_t out;
  if (mag >= (143u << 23)) out = mag > 0x7f800000u ? 0x7e00u : 0x7c00u;
  else if (mag < (113u << 23)) out = sl_f32_to_bits(sl_bits_to_f32(mag) + 0.5f) - 0x3f000000u;
  else out = (mag - (112u << 23) + 0xfffu + ((mag >> 13) & 1u)) >> 13;
  return (uint16_t)(out | (sign >> 16));
}
static inline uint16_t sl_d2h(double v) {
  const float near = (float)v;
  const double back = (double)near;
  const uint32_t away = fabs(back) > fabs(v), inexact = back < v || back > v;
  return sl_f2h(sl_bits_to_f32((sl_f32_to_bits(near) - away) | inexact));
}

/* bfloat16 is stored as the upper half of a float and computed as float, each result rounded to
   nearest even (overflow to inf, NaN to the quiet NaN of its sign), as the llvm target's bfloat.py. */
static inline float sl_bf16_round(float v) {
  const uint32_t bits = sl_f32_to_bits(v);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  return sl_bits_to_f32(v != v ? ((bits & 0x80000000u) | 0x7fc00000u) : rounded);
}
static inline float sl_bf2f(uint16_t b) { return sl_bits_to_f32((uint32_t)b << 16); }
static inline uint16_t sl_f2bf(float v) { return (uint16_t)(sl_f32_to_bits(v) >> 16); }

/* A heap allocation that failed: the largest such size is reported to the caller (MemoryError). */
static void sl_alloc_failed(int64_t* failed, int64_t bytes) {
#pragma omp critical(sl_alloc_failed)
  if (bytes > *failed) *failed = bytes;
}
"""


def prelude() -> str:
    """The helpers, instantiated for every integer type."""
    lines = [HEAD]
    for suffix, ctype, unsigned, bits in INT_TYPES:
        lines.append(f"SL_INT({suffix}, {ctype}, {unsigned}) SL_MIN_MAX({suffix}, {ctype}) "
                     f"SL_BITS({suffix}, {ctype}, {_UINT_OF_BITS[bits]}, {bits})")
        lines.append(f"SL_F2I({suffix}, {ctype}, f32, float) SL_F2I({suffix}, {ctype}, f64, double)")
    return "\n".join(lines) + "\n"
