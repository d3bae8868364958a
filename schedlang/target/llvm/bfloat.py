"""bfloat16 in LLVM IR: stored as i16, computed as float, rounded with integer instructions.

A bfloat16 value is the upper half of a float32, so widening is a shift and a bitcast,
and narrowing is a round to nearest even of the lower 16 bits. The rounding is written
out with integer instructions instead of LLVM's `fptrunc float to bfloat`: without
AVX-512 BF16 that becomes one libcall (__truncsfbf2) per lane, and with it
`vcvtneps2bf16` flushes subnormal inputs to zero, where torch and ml_dtypes round them.

Every bfloat16 value the renderer holds in a register is kept exactly representable in
bfloat16 (each operation's result is rounded), so a store only drops the lower half.
"""
from __future__ import annotations

from functools import partial

from .types import int_constant, vec

_LOW_HALF_CLEAR = -65536          # 0xffff0000 as i32
_SIGN = -0x80000000               # 0x80000000 as i32
_QUIET_NAN = 0x7FC00000           # bfloat16's default quiet NaN 0x7fc0, in the upper half


class BFloatEmitter:
    """Mixin for the expression renderer: needs self.fn (FunctionText)."""

    def round_bfloat(self, v: str, lanes: int) -> str:
        """The float v rounded to the nearest bfloat16 (ties to even), still as a float:
        overflow gives inf, a NaN becomes the quiet NaN of its sign (0x7fc0 or 0xffc0, as in
        ml_dtypes and vcvtneps2bf16)."""
        fty, ity = vec("float", lanes), vec("i32", lanes)
        c = partial(int_constant, lanes=lanes)
        bits = self.fn.emit(f"bitcast {fty} {v} to {ity}", "bf.bits")
        odd = self.fn.emit(f"lshr {ity} {bits}, {c(16)}", "bf.lsb")
        odd = self.fn.emit(f"and {ity} {odd}, {c(1)}", "bf.lsb")
        bias = self.fn.emit(f"add {ity} {odd}, {c(0x7FFF)}", "bf.bias")
        up = self.fn.emit(f"add {ity} {bits}, {bias}", "bf.up")
        rounded = self.fn.emit(f"and {ity} {up}, {c(_LOW_HALF_CLEAR)}", "bf.rne")
        quiet = self.fn.emit(f"and {ity} {bits}, {c(_SIGN)}", "bf.qnan")
        quiet = self.fn.emit(f"or {ity} {quiet}, {c(_QUIET_NAN)}", "bf.qnan")
        nan = self.fn.emit(f"fcmp uno {fty} {v}, {v}", "bf.isnan")
        bty = vec("i1", lanes)
        chosen = self.fn.emit(f"select {bty} {nan}, {ity} {quiet}, {ity} {rounded}", "bf.sel")
        return self.fn.emit(f"bitcast {ity} {chosen} to {fty}", "bf")

    def bfloat_to_float(self, raw: str, lanes: int) -> str:
        """The float of i16 bfloat16 bits (exact)."""
        sty, ity, fty = vec("i16", lanes), vec("i32", lanes), vec("float", lanes)
        wide = self.fn.emit(f"zext {sty} {raw} to {ity}", "bf.wide")
        bits = self.fn.emit(f"shl {ity} {wide}, {int_constant(16, lanes)}", "bf.bits")
        return self.fn.emit(f"bitcast {ity} {bits} to {fty}", "bf2f")

    def float_to_bfloat_bits(self, v: str, lanes: int) -> str:
        """The i16 bits of a float that is a bfloat16 value already (its lower half is zero)."""
        sty, ity, fty = vec("i16", lanes), vec("i32", lanes), vec("float", lanes)
        bits = self.fn.emit(f"bitcast {fty} {v} to {ity}", "bf.bits")
        upper = self.fn.emit(f"lshr {ity} {bits}, {int_constant(16, lanes)}", "bf.upper")
        return self.fn.emit(f"trunc {ity} {upper} to {sty}", "f2bf")
