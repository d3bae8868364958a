"""Vectorised float32 math functions as LLVM IR text.

The LLVM renderer pastes these definitions into its modules and calls them in
place of libm: ``math_function(name, lanes)`` gives the symbol and the
``define internal`` text of one function over ``lanes`` float32 lanes, and
``math_declarations(lanes)`` the ``declare`` lines of the LLVM intrinsics those
definitions call (the caller de-duplicates them across everything it emits).

Every function is branch-free straight-line code (selects, no calls to libm),
so it vectorises at any lane count, and each definition is self-contained:
sigmoid and tanh inline their own copy of the exp code instead of calling
``@sl.exp``, so any set of definitions can be concatenated without clashes.
Instructions carry no fast-math flags: inputs may be inf or nan and the results
must stay right for them.

Accuracy (float32, measured against float64 references by the tests):

* exp: Cephes expf; a few ulp relative error. Results that are subnormal are
  rounded once (not flushed); exp(x) = +inf above about 88.72 and 0 below
  about -103.97. exp(nan) = nan, exp(-inf) = 0, exp(inf) = inf.
* log: Cephes logf; a few ulp for positive inputs, subnormal inputs included
  (they are scaled by 2**23 first). log(+-0) = -inf, log(x < 0) = nan,
  log(inf) = inf, log(nan) = nan.
* log1p: log(u) * x / (u - 1) with u = 1 + x rounded, x itself where u is 1
  (Goldberg's correction: the rounding of u cancels), log's accuracy plus ~1 ulp;
  log1p(-1) = -inf, log1p(x < -1) = nan, log1p(inf) = inf, log1p(-0) = -0.
* tanh: Cephes tanhf (odd polynomial below 0.625, 1 - 2/(exp(2|x|) + 1)
  above); tanh(+-inf) = +-1, tanh(-0) = -0, tanh(nan) = nan.
* sigmoid: 1/(1 + exp(-x)), relative accuracy kept down to 1.2e-38 (below
  that, for x < -88.7, the result is 0); sigmoid(-inf) = 0, sigmoid(inf) = 1,
  sigmoid(nan) = nan.
* erf: Juffa's erff (an odd polynomial up to |x| = 0.93, 1 - exp(polynomial)
  above); erf(+-inf) = +-1, erf(-0) = -0, erf(nan) = nan.
"""
from __future__ import annotations

import struct
from typing import Sequence

MATH_FUNCTIONS: frozenset[str] = frozenset({"exp", "log", "log1p", "tanh", "sigmoid", "erf"})

# The intrinsics the definitions may call: name -> number of float operands.
_INTRINSICS: tuple[tuple[str, int], ...] = (
    ("fma", 3), ("roundeven", 1), ("fabs", 1), ("copysign", 2))

_INF = float("inf")
_NAN = float("nan")
_MIN_NORMAL = 2.0 ** -126

# exp: x = k*ln2 + r. k*ln2 is subtracted in two parts because one float32 ln2
# would leave an error of k*|ln2 - float32(ln2)| in r, ~3e-7 (several ulp of the
# result) for |k| ~ 150. _LN2_HI has only 9 significant bits, so k*_LN2_HI is
# exact and x - k*_LN2_HI loses nothing; _LN2_LO is the rest of ln2.
_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
# exp(r) ~= 1 + r + r*r*P(r) on |r| <= ln2/2 (Cephes expf), highest power first.
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
          4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
# Clamping to these keeps the exponent arithmetic in range: round(89*log2e) =
# 128 (overflows to inf when applied), round(-104*log2e) = -150 (underflows to
# 0). Both lie beyond the float32 limits ln(FLT_MAX) ~ 88.72, ln(2**-150) ~ -103.97.
_EXP_HI = 89.0
# Adding 1.5*2**23 rounds a float with |v| < 2**22 to an integer held in the low
# mantissa bits (round to nearest even, the default rounding mode).
_ROUND_MAGIC = 12582912.0
_ROUND_MAGIC_BITS = 0x4B400000
_EXP_LO = -104.0

# log(1 + f) ~= f - f*f/2 + f*f*f*P(f) on sqrt(1/2) - 1 <= f < sqrt(2) - 1
# (Cephes logf), highest power first.
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
          -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
          2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
_SQRT_HALF = 0.707106781186547524

# tanh(a) ~= a + a*z*P(z), z = a*a, on |a| < 0.625 (Cephes tanhf). Above 0.625
# 1 - 2/(exp(2a) + 1) no longer loses accuracy to cancellation.
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
           1.33314422036e-1, -3.33332819422e-1)
_TANH_SMALL = 0.625

# erf by Norbert Juffa's faithfully rounded erff (stackoverflow.com/a/35148199),
# highest power first. |x| <= 475/512: erf(x) ~= x + x*P(x*x). Above:
# erf(|x|) ~= 1 - exp(|x|*Q(|x|) - |x|); |x| is capped at 4, where erf rounds to 1.
_ERF_P = (-5.96761703e-4, 4.99119423e-3, -2.67681349e-2, 1.12819925e-1,
          -3.76125336e-1, 1.28379166e-1)
_ERF_Q = (-1.72853470e-5, 3.83197126e-4, -3.88396438e-3, 2.42546219e-2,
          -1.06777877e-1, -6.34846687e-1, -1.28717512e-1)
_ERF_SMALL = 0.927734375
_ERF_CAP = 4.0


def _f32_hex(value: float) -> str:
    """LLVM's text for a float constant: the float32-rounded value as a hex double.

    LLVM IR spells float constants as doubles and rejects decimal ones that are
    not exact in float32, so round first and print the exact bits.
    """
    rounded = struct.unpack("<f", struct.pack("<f", value))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", rounded))[0]


class _Body:
    """Straight-line SSA code for one function over ``lanes`` float32 lanes."""

    def __init__(self, lanes: int, scalef: bool = False):
        self.lanes = lanes
        self.scalef = scalef
        vec = (lambda t: t) if lanes == 1 else (lambda t: f"<{lanes} x {t}>")
        self.fty, self.ity, self.bty = vec("float"), vec("i32"), vec("i1")
        self.suffix = "f32" if lanes == 1 else f"v{lanes}f32"
        self.lines: list[str] = []

    def _splat(self, ty: str, scalar: str) -> str:
        return scalar if self.lanes == 1 else f"splat ({ty} {scalar})"

    def f(self, value: float) -> str:
        """A float constant, splatted across the lanes."""
        return self._splat("float", _f32_hex(value))

    def i(self, value: int) -> str:
        """An i32 constant, splatted across the lanes."""
        return self._splat("i32", str(value))

    def emit(self, rhs: str) -> str:
        name = f"%t{len(self.lines)}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def fop(self, op: str, a: str, b: str) -> str:
        return self.emit(f"{op} {self.fty} {a}, {b}")

    def iop(self, op: str, a: str, b: str) -> str:
        return self.emit(f"{op} {self.ity} {a}, {b}")

    def fcmp(self, pred: str, a: str, b: str) -> str:
        return self.emit(f"fcmp {pred} {self.fty} {a}, {b}")

    def select(self, cond: str, a: str, b: str, ty: str = "") -> str:
        ty = ty or self.fty
        return self.emit(f"select {self.bty} {cond}, {ty} {a}, {ty} {b}")

    def cast(self, op: str, value: str, src: str, dst: str) -> str:
        return self.emit(f"{op} {src} {value} to {dst}")

    def call(self, intrinsic: str, *args: str) -> str:
        operands = ", ".join(f"{self.fty} {a}" for a in args)
        return self.emit(f"call {self.fty} @llvm.{intrinsic}.{self.suffix}({operands})")

    def horner(self, x: str, coeffs: Sequence[float]) -> str:
        """coeffs[0]*x**(n-1) + ... + coeffs[-1], by fused multiply-adds."""
        acc = self.f(coeffs[0])
        for c in coeffs[1:]:
            acc = self.call("fma", acc, x, self.f(c))
        return acc


def _exp(b: _Body, x: str) -> str:
    """exp(x): x = k*ln2 + r, exp(x) = 2**k * exp(r) with a polynomial for exp(r)."""
    # Below _EXP_LO (-inf: a masked score) the result is 0, chosen at the end; such a lane
    # is computed on 0 meanwhile, not on _EXP_LO, whose result would underflow: x86 takes a
    # microcode assist (~150 cycles) for every instruction with an underflowing or subnormal
    # result, which cost an attention whose padded keys score -inf 30 % of its time. The
    # comparisons are written so that nan passes through (x86 max/min return their second
    # operand then: one instruction each, no nan fix-up).
    below = b.fcmp("olt", x, b.f(_EXP_LO))
    xc = b.select(below, b.f(0.0), x)
    xc = b.select(b.fcmp("ogt", xc, b.f(_EXP_HI)), b.f(_EXP_HI), xc)
    # k = round(x*log2e) by adding 1.5*2**23: the sum's low mantissa bits are k, both
    # as a float (after subtracting again) and as an int (no fptosi, which would make
    # poison from nan; nan gives harmless garbage bits that multiply a nan below).
    shifted = b.call("fma", xc, b.f(_LOG2E), b.f(_ROUND_MAGIC))
    k = b.fop("fsub", shifted, b.f(_ROUND_MAGIC))
    ki = b.iop("sub", b.cast("bitcast", shifted, b.fty, b.ity), b.i(_ROUND_MAGIC_BITS))
    r = b.call("fma", k, b.f(-_LN2_HI), xc)
    r = b.call("fma", k, b.f(-_LN2_LO), r)
    p = b.horner(r, _EXP_P)
    y = b.fop("fadd", b.call("fma", p, b.fop("fmul", r, r), r), b.f(1.0))
    if b.scalef:    # AVX-512's vscalefps: y * 2**k in one instruction, rounded once
        return b.select(below, b.f(0.0), _scalef(b, y, k, ki))
    # 2**k by writing k + 127 into the exponent field. k spans [-150, 128], more
    # than one float32 exponent holds, so scale by 2**(k//2) and then by
    # 2**(k - k//2): the first product is exact and the second rounds once,
    # giving correctly scaled subnormals and a clean overflow to inf.
    k1 = b.iop("ashr", ki, b.i(1))
    k2 = b.iop("sub", ki, k1)
    for part in (k1, k2):
        bits = b.iop("shl", b.iop("add", part, b.i(127)), b.i(23))
        y = b.fop("fmul", y, b.cast("bitcast", bits, b.ity, b.fty))
    return b.select(below, b.f(0.0), y)


def _scalef(b: _Body, y: str, k: str, ki: str) -> str:
    """y * 2**k by vscalefps: on the float k directly in whole zmm registers (16 lanes each,
    no conversion) for 16, 32, 64 ... lanes, else through LLVM's ldexp on the integer k."""
    if b.lanes % 16 or b.lanes & (b.lanes - 1):
        return b.emit(f"call {b.fty} @llvm.ldexp.{b.suffix}.{_int_suffix(b)}({b.fty} {y}, {b.ity} {ki})")
    parts = []
    for start in range(0, b.lanes, 16):
        lanes = ", ".join(f"i32 {start + j}" for j in range(16))
        yp, kp = (b.emit(f"shufflevector {b.fty} {v}, {b.fty} poison, <16 x i32> <{lanes}>") if b.lanes > 16 else v
                  for v in (y, k))
        parts.append(b.emit(f"call <16 x float> @{_SCALEF}(<16 x float> {yp}, <16 x float> {kp}, "
                            "<16 x float> poison, i16 -1, i32 4)"))
    while len(parts) > 1:        # concatenate pairwise: 16 + 16 -> 32 lanes, ...
        width = 32 * (b.lanes // (16 * len(parts)))
        idx = ", ".join(f"i32 {j}" for j in range(width))
        half = width // 2
        parts = [b.emit(f"shufflevector <{half} x float> {parts[j]}, <{half} x float> {parts[j + 1]}, <{width} x i32> <{idx}>")
                 for j in range(0, len(parts), 2)]
    return parts[0]


_SCALEF = "llvm.x86.avx512.mask.scalef.ps.512"


def _int_suffix(b: _Body) -> str:
    return "i32" if b.lanes == 1 else f"v{b.lanes}i32"


def _log(b: _Body, x: str) -> str:
    """log(x) = e*ln2 + log(1 + f) after splitting x = 2**e * (1 + f) by bit ops."""
    # Subnormals have no implicit leading 1: scale them into the normal range.
    tiny = b.fcmp("olt", x, b.f(_MIN_NORMAL))
    xs = b.select(tiny, b.fop("fmul", x, b.f(2.0 ** 23)), x)
    bias = b.select(tiny, b.i(126 + 23), b.i(126), b.ity)
    # frexp: m in [0.5, 1) and x = m * 2**e (sign bit ignored: x < 0 is nan below).
    bits = b.cast("bitcast", xs, b.fty, b.ity)
    e = b.cast("sitofp", b.iop("sub", b.iop("lshr", bits, b.i(23)), bias), b.ity, b.fty)
    mbits = b.iop("or", b.iop("and", bits, b.i(0x007FFFFF)), b.i(0x3F000000))
    m = b.cast("bitcast", mbits, b.ity, b.fty)
    # Keep f = m' - 1 within [sqrt(1/2) - 1, sqrt(2) - 1), where the polynomial
    # is accurate, by using m' = 2m and e - 1 when m < sqrt(1/2). 2m - 1 is exact.
    low = b.fcmp("olt", m, b.f(_SQRT_HALF))
    e = b.select(low, b.fop("fsub", e, b.f(1.0)), e)
    f = b.fop("fsub", b.select(low, b.fop("fadd", m, m), m), b.f(1.0))
    z = b.fop("fmul", f, f)
    y = b.fop("fmul", b.fop("fmul", b.horner(f, _LOG_P), f), z)
    # e*ln2 added in two parts (see _LN2_HI) with the large terms last.
    y = b.call("fma", e, b.f(_LN2_LO), y)
    y = b.call("fma", z, b.f(-0.5), y)
    y = b.call("fma", e, b.f(_LN2_HI), b.fop("fadd", f, y))
    y = b.select(b.fcmp("oeq", x, b.f(_INF)), b.f(_INF), y)
    y = b.select(b.fcmp("ult", x, b.f(0.0)), b.f(_NAN), y)  # x < 0 or nan
    return b.select(b.fcmp("oeq", x, b.f(0.0)), b.f(-_INF), y)  # +0 and -0


def _log1p(b: _Body, x: str) -> str:
    """log(1 + x) = log(u) * x / (u - 1), u = 1 + x in float32 (Goldberg): u - 1 is the x that
    u's rounding kept, so the quotient puts back what it lost; x itself where u is 1 (|x| below
    half an ulp of 1: log1p(x) rounds to x there, -0 included)."""
    u = b.fop("fadd", x, b.f(1.0))
    scaled = b.fop("fmul", _log(b, u), b.fop("fdiv", x, b.fop("fsub", u, b.f(1.0))))
    y = b.select(b.fcmp("oeq", x, b.f(_INF)), b.f(_INF), scaled)      # (inf / inf in the quotient)
    return b.select(b.fcmp("oeq", u, b.f(1.0)), x, y)


def _tanh(b: _Body, x: str) -> str:
    """tanh(x), computed on |x| and given x's sign back (so tanh(-0) = -0)."""
    a = b.call("fabs", x)
    z = b.fop("fmul", a, a)
    small = b.call("fma", b.fop("fmul", b.horner(z, _TANH_P), z), a, a)
    # exp(2a) = inf for large a gives 2/inf = 0 and exactly 1; nan stays nan.
    d = b.fop("fadd", _exp(b, b.fop("fadd", a, a)), b.f(1.0))
    large = b.fop("fsub", b.f(1.0), b.fop("fdiv", b.f(2.0), d))
    t = b.select(b.fcmp("olt", a, b.f(_TANH_SMALL)), small, large)
    return b.call("copysign", t, x)


def _sigmoid(b: _Body, x: str) -> str:
    """1/(1 + exp(-x)). For x < -88.7 exp(-x) is inf and the result 0 (the true value
    is below 1.2e-38); nan stays nan."""
    e = _exp(b, b.emit(f"fneg {b.fty} {x}"))
    return b.fop("fdiv", b.f(1.0), b.fop("fadd", e, b.f(1.0)))


def _erf(b: _Body, x: str) -> str:
    """erf(x): a polynomial near 0, 1 - exp(polynomial) further out, x's sign."""
    small = b.call("fma", b.horner(b.fop("fmul", x, x), _ERF_P), x, x)
    a = b.call("fabs", x)
    t = b.select(b.fcmp("ogt", a, b.f(_ERF_CAP)), b.f(_ERF_CAP), a)  # nan stays nan
    q = b.call("fma", b.horner(t, _ERF_Q), t, b.emit(f"fneg {b.fty} {t}"))
    large = b.call("copysign", b.fop("fsub", b.f(1.0), _exp(b, q)), x)
    return b.select(b.fcmp("ogt", a, b.f(_ERF_SMALL)), large, small)  # nan: small, nan


_EMITTERS = {"exp": _exp, "log": _log, "log1p": _log1p, "tanh": _tanh, "sigmoid": _sigmoid, "erf": _erf}


def _check_lanes(lanes: int) -> None:
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
        raise ValueError(f"math functions need a positive lane count, not {lanes!r}")


def math_function(name: str, lanes: int, scalef: bool = False) -> tuple[str, str]:
    """Return (symbol, definition) for float32 ``name`` over ``lanes`` lanes.

    scalef: the target has AVX-512 (vscalefps), which scales exp's result by 2**k in one
    instruction (LLVM's ldexp) where the portable code takes eight.

    The symbol is e.g. ``@sl.exp.v16f32``, or ``@sl.exp.f32`` for one lane; it
    takes and returns ``float`` for one lane and ``<lanes x float>`` otherwise.
    The definition is a complete ``define internal ... alwaysinline nounwind``
    function with no attribute groups and no calls except to the intrinsics of
    ``math_declarations(lanes)``, which the module must also contain.
    """
    if name not in _EMITTERS:
        raise ValueError(f"unknown math function {name!r}; "
                         f"choose from {', '.join(sorted(MATH_FUNCTIONS))}")
    _check_lanes(lanes)
    body = _Body(lanes, scalef)
    result = _EMITTERS[name](body, "%x")
    symbol = f"@sl.{name}.{body.suffix}"
    text = "\n".join([
        f"define internal {body.fty} {symbol}({body.fty} %x) alwaysinline nounwind {{",
        "entry:", *body.lines, f"  ret {body.fty} {result}", "}", ""])
    return symbol, text


def math_declarations(lanes: int, scalef: bool = False) -> list[str]:
    """The ``declare`` lines of the LLVM intrinsics the definitions for ``lanes`` use."""
    _check_lanes(lanes)
    body = _Body(lanes)
    out = [f"declare {body.fty} @llvm.{name}.{body.suffix}({', '.join([body.fty] * arity)})"
           for name, arity in _INTRINSICS]
    if scalef:
        out.append(f"declare {body.fty} @llvm.ldexp.{body.suffix}.{_int_suffix(body)}({body.fty}, {body.ity})")
        out.append(f"declare <16 x float> @{_SCALEF}(<16 x float>, <16 x float>, <16 x float>, i16, i32)")
    return out
