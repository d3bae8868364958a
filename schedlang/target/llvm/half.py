"""float16 <-> float conversions; for x86 CPUs without F16C, with integer instructions.

With F16C, LLVM turns `fpext half` / `fptrunc ... to half` into vcvtph2ps / vcvtps2ph.
Without it (a target such as `llvm -mcpu=x86-64` or `-mattr=-f16c`) it calls
__extendhfsf2 / __truncsfhf2 once per lane: functions the JIT may not find (the call
then jumps to address 0) and slow where it does. These forms are exact (widening) and
round to nearest even (narrowing: subnormals kept, overflow to inf, NaN stays NaN), are
branch-free, and vectorise; the algorithms are the well-known ones of F. Giesen's
"half <-> float" notes, written for LLVM vectors.
"""
from __future__ import annotations

import platform
from functools import lru_cache, partial

from .types import int_constant, vec

_X86 = ("x86_64", "amd64", "i386", "i686")


@lru_cache(maxsize=16)
def needs_soft_half(features: str) -> bool:
    """Whether half conversions must be written out for an x86 target with these features."""
    return platform.machine().lower() in _X86 and "+f16c" not in features.split(",")


class HalfEmitter:
    """Mixin for the expression renderer: needs self.fn (FunctionText), self.module (its
    target) and self.declare."""

    def half_to_float(self, h: str, lanes: int) -> str:
        """The float of a half value (exact)."""
        hty = vec("half", lanes)
        if not needs_soft_half(self.module.target.features):
            return self.fn.emit(f"fpext {hty} {h} to {vec('float', lanes)}", "h2f")
        bits = self.fn.emit(f"bitcast {hty} {h} to {vec('i16', lanes)}", "h.bits")
        return self.soft_half_to_float(bits, lanes)

    def float_to_half(self, v: str, lanes: int) -> str:
        """The half of a float value, rounded to nearest even."""
        hty = vec("half", lanes)
        if not needs_soft_half(self.module.target.features):
            return self.fn.emit(f"fptrunc {vec('float', lanes)} {v} to {hty}", "f2h")
        bits = self.soft_float_to_half(v, lanes)
        return self.fn.emit(f"bitcast {vec('i16', lanes)} {bits} to {hty}", "f16")

    def soft_half_to_float(self, bits16: str, lanes: int) -> str:
        """The float of i16 float16 bits (exact)."""
        ity, fty, bty = vec("i32", lanes), vec("float", lanes), vec("i1", lanes)
        c = partial(int_constant, lanes=lanes)
        emit = self.fn.emit
        u = emit(f"zext {vec('i16', lanes)} {bits16} to {ity}", "h.u")
        sign = emit(f"and {ity} {u}, {c(0x8000)}", "h.sign")
        sign = emit(f"shl {ity} {sign}, {c(16)}", "h.sign")
        body = emit(f"and {ity} {u}, {c(0x7FFF)}", "h.em")
        body = emit(f"shl {ity} {body}, {c(13)}", "h.em")
        exp = emit(f"and {ity} {body}, {c(0x0F800000)}", "h.exp")
        normal = emit(f"add {ity} {body}, {c(112 << 23)}", "h.norm")               # rebias the exponent
        special = emit(f"add {ity} {normal}, {c(112 << 23)}", "h.inf")             # inf and nan: exponent 255
        tiny = emit(f"add {ity} {normal}, {c(1 << 23)}", "h.sub")                  # subnormal: 2**-14 * (1 + m)
        tiny = emit(f"bitcast {ity} {tiny} to {fty}", "h.sub")
        magic = "0x3F10000000000000"                                                # 2**-14
        magic = magic if lanes == 1 else f"splat (float {magic})"
        tiny = emit(f"fsub {fty} {tiny}, {magic}", "h.sub")                          # ... minus 2**-14: exact
        tiny = emit(f"bitcast {fty} {tiny} to {ity}", "h.sub")
        is_special = emit(f"icmp eq {ity} {exp}, {c(0x0F800000)}", "h.isinf")
        is_tiny = emit(f"icmp eq {ity} {exp}, {c(0)}", "h.istiny")
        out = emit(f"select {bty} {is_tiny}, {ity} {tiny}, {ity} {normal}", "h.sel")
        out = emit(f"select {bty} {is_special}, {ity} {special}, {ity} {out}", "h.sel")
        out = emit(f"or {ity} {out}, {sign}", "h.bits")
        return emit(f"bitcast {ity} {out} to {fty}", "h2f")

    def soft_float_to_half(self, v: str, lanes: int) -> str:
        """The i16 float16 bits of a float, rounded to nearest even."""
        ity, fty, bty = vec("i32", lanes), vec("float", lanes), vec("i1", lanes)
        c = partial(int_constant, lanes=lanes)
        emit = self.fn.emit
        f = emit(f"bitcast {fty} {v} to {ity}", "f.bits")
        sign = emit(f"and {ity} {f}, {c(-0x80000000)}", "f.sign")
        mag = emit(f"xor {ity} {f}, {sign}", "f.mag")
        # |v| >= 65536 (or inf, nan): inf, or a quiet nan
        is_nan = emit(f"icmp ugt {ity} {mag}, {c(0x7F800000)}", "f.isnan")
        big = emit(f"select {bty} {is_nan}, {ity} {c(0x7E00)}, {ity} {c(0x7C00)}", "f.big")
        # |v| < 2**-14: a float16 subnormal (or zero); adding 0.5 rounds to a multiple of 2**-24
        tiny = emit(f"bitcast {ity} {mag} to {fty}", "f.tiny")
        half = "0x3FE0000000000000" if lanes == 1 else "splat (float 0x3FE0000000000000)"
        tiny = emit(f"fadd {fty} {tiny}, {half}", "f.tiny")
        tiny = emit(f"bitcast {fty} {tiny} to {ity}", "f.tiny")
        tiny = emit(f"sub {ity} {tiny}, {c(0x3F000000)}", "f.tiny")
        # normal: rebias the exponent, round the 13 dropped bits to nearest even
        odd = emit(f"lshr {ity} {mag}, {c(13)}", "f.odd")
        odd = emit(f"and {ity} {odd}, {c(1)}", "f.odd")
        normal = emit(f"add {ity} {mag}, {c(((15 - 127) << 23) + 0xFFF)}", "f.norm")
        normal = emit(f"add {ity} {normal}, {odd}", "f.norm")
        normal = emit(f"lshr {ity} {normal}, {c(13)}", "f.norm")
        is_big = emit(f"icmp uge {ity} {mag}, {c(143 << 23)}", "f.isbig")
        is_tiny = emit(f"icmp ult {ity} {mag}, {c(113 << 23)}", "f.istiny")
        out = emit(f"select {bty} {is_tiny}, {ity} {tiny}, {ity} {normal}", "f.sel")
        out = emit(f"select {bty} {is_big}, {ity} {big}, {ity} {out}", "f.sel")
        sign16 = emit(f"lshr {ity} {sign}, {c(16)}", "f.sign")
        out = emit(f"or {ity} {out}, {sign16}", "f.bits")
        return emit(f"trunc {ity} {out} to {vec('i16', lanes)}", "f2h")

    def double_to_float_odd(self, v: str, lanes: int) -> str:
        """The double v as a float rounded to odd (toward zero, then the last bit set when
        inexact): rounding that float to float16 is then the double's own rounding, with no
        double-rounding error (float keeps 13 more bits than float16)."""
        dty, fty, ity, bty = vec("double", lanes), vec("float", lanes), vec("i32", lanes), vec("i1", lanes)
        emit = self.fn.emit
        near = emit(f"fptrunc {dty} {v} to {fty}", "d.f32")
        back = emit(f"fpext {fty} {near} to {dty}", "d.back")
        fabs = f"llvm.fabs.{'f64' if lanes == 1 else f'v{lanes}f64'}"
        self.declare(f"declare {dty} @{fabs}({dty})")
        mag = emit(f"call {dty} @{fabs}({dty} {v})", "d.abs")
        back_mag = emit(f"call {dty} @{fabs}({dty} {back})", "d.abs")
        away = emit(f"fcmp ogt {dty} {back_mag}, {mag}", "d.away")        # rounded up in magnitude
        inexact = emit(f"fcmp one {dty} {back}, {v}", "d.inexact")
        near_bits = emit(f"bitcast {fty} {near} to {ity}", "d.bits")
        step = emit(f"zext {bty} {away} to {ity}", "d.step")
        toward_zero = emit(f"sub {ity} {near_bits}, {step}", "d.trunc")
        sticky = emit(f"zext {bty} {inexact} to {ity}", "d.sticky")
        odd = emit(f"or {ity} {toward_zero}, {sticky}", "d.odd")
        return emit(f"bitcast {ity} {odd} to {fty}", "d2f")
