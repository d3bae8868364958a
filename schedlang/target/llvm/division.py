"""Division, modulo and shifts as LLVM IR, with numpy's results for every operand.

LLVM's sdiv/udiv/srem/urem are undefined for a zero divisor (x86 traps: SIGFPE) and for
INT_MIN / -1; shl/lshr/ashr are poison for an amount of the bit width or more. numpy
defines them all (x // 0 == x % 0 == 0, INT_MIN // -1 == INT_MIN, 1 << 40 == 0), and so do
we: the guards cost a compare and a select, and only where the divisor or the amount is
not a constant known to be safe (index arithmetic divides by positive constants).
Float floor division and modulo follow numpy's npy_divmod, signed zeros and inf included.
"""
from __future__ import annotations

from typing import Callable

from ...dtypes import DType
from ...expr.nodes import Binary, Broadcast, Const, Expr
from .types import constant, scalar_compute, signed, vec


class DivisionEmitter:
    """Mixin of ExprEmitter: needs self.fn and self.intrinsic."""

    def shift(self, e: Binary, a: str, b: str, ty: str) -> str:
        """Shifts with numpy's results for every amount: LLVM's shl/lshr/ashr are poison for an
        amount >= the bit width (or negative); numpy gives 0, or -1 for a negative x >> n."""
        dt = e.dtype
        op = "shl" if e.op == "shl" else "ashr" if signed(dt) else "lshr"
        c = _const_value(e.b)
        if c is not None and 0 <= c < dt.bits:
            return self.fn.emit(f"{op} {ty} {a}, {b}", e.op)
        bty = vec("i1", dt.lanes)
        too_far = self.fn.emit(f"icmp uge {ty} {b}, {constant(dt.bits, dt)}", "toofar")
        if op == "ashr":        # shifting by bits - 1 gives the sign fill that numpy gives
            amount = self.fn.emit(f"select {bty} {too_far}, {ty} {constant(dt.bits - 1, dt)}, {ty} {b}", "amt")
            return self.fn.emit(f"ashr {ty} {a}, {amount}", e.op)
        shifted = self.fn.emit(f"{op} {ty} {a}, {b}", e.op)
        return self.fn.emit(f"select {bty} {too_far}, {ty} {constant(0, dt)}, {ty} {shifted}", e.op)

    def floor_div_mod(self, e: Binary, a: str, b: str, ty: str) -> str:
        """Floor division and modulo with numpy's results everywhere: x // 0 and x % 0 are 0, and
        INT_MIN // -1 wraps to INT_MIN. A constant divisor other than 0 and -1 needs no guard."""
        dt = e.dtype
        c = _const_value(e.b)
        if c is not None and c > 0:
            if not signed(dt):
                return self.fn.emit(f"{'udiv' if e.op == 'floordiv' else 'urem'} {ty} {a}, {b}", e.op)
            if c & (c - 1) == 0:     # powers of two: exact shifts and masks
                if e.op == "floordiv":
                    return self.fn.emit(f"ashr {ty} {a}, {constant(c.bit_length() - 1, dt)}", "div")
                return self.fn.emit(f"and {ty} {a}, {constant(c - 1, dt)}", "mod")
            return self.signed_floor(e.op, a, b, ty, dt)
        if c is not None and c < -1 and signed(dt):
            return self.signed_floor(e.op, a, b, ty, dt)
        if signed(dt):
            return self.guarded_division(e, a, b, ty, lambda d: self.signed_floor(e.op, a, d, ty, dt))
        op = "udiv" if e.op == "floordiv" else "urem"
        return self.guarded_division(e, a, b, ty, lambda d: self.fn.emit(f"{op} {ty} {a}, {d}", e.op))

    def trunc_div_mod(self, e: Binary, a: str, b: str, ty: str) -> str:
        """C's / and % (truncdiv, truncmod) with the same defined results as floor division:
        x / 0 and x % 0 are 0, INT_MIN / -1 wraps to INT_MIN."""
        dt = e.dtype
        div, rem = ("sdiv", "srem") if signed(dt) else ("udiv", "urem")
        op = div if e.op == "truncdiv" else rem
        c = _const_value(e.b)
        if c is not None and c != 0 and (c != -1 or not signed(dt)):
            return self.fn.emit(f"{op} {ty} {a}, {b}", e.op)
        return self.guarded_division(e, a, b, ty, lambda d: self.fn.emit(f"{op} {ty} {a}, {d}", e.op))

    def guarded_division(self, e: Binary, a: str, b: str, ty: str, divide: Callable[[str], str]) -> str:
        """divide(divisor) with a divisor that may be 0 (or -1: INT_MIN / -1 traps on x86)
        replaced by 1, then the quotient patched: x / 0 is 0 and x / -1 is -x (wrapping). The
        remainder by 1 is 0, which is the defined answer for both."""
        dt = e.dtype
        bty = vec("i1", dt.lanes)
        zero, one, minus_one = constant(0, dt), constant(1, dt), constant(-1, dt)
        is_zero = self.fn.emit(f"icmp eq {ty} {b}, {zero}", "bzero")
        is_m1 = None
        special = is_zero
        if signed(dt):
            is_m1 = self.fn.emit(f"icmp eq {ty} {b}, {minus_one}", "bm1")
            special = self.fn.emit(f"or {bty} {is_zero}, {is_m1}", "special")
        safe = self.fn.emit(f"select {bty} {special}, {ty} {one}, {ty} {b}", "safe")
        out = divide(safe)
        if e.op in ("floormod", "truncmod"):
            return out
        if is_m1 is not None:
            neg = self.fn.emit(f"sub {ty} {zero}, {a}", "neg")
            out = self.fn.emit(f"select {bty} {is_m1}, {ty} {neg}, {ty} {out}", "quot")
        return self.fn.emit(f"select {bty} {is_zero}, {ty} {zero}, {ty} {out}", "quot")

    def signed_floor(self, op: str, a: str, b: str, ty: str, dt: DType) -> str:
        """Floor division or modulo from LLVM's truncating sdiv/srem (b is neither 0 nor -1)."""
        q = self.fn.emit(f"sdiv {ty} {a}, {b}", "q")
        r = self.fn.emit(f"srem {ty} {a}, {b}", "r")
        zero = "zeroinitializer" if dt.lanes > 1 else "0"
        nonzero = self.fn.emit(f"icmp ne {ty} {r}, {zero}", "nz")
        sign = self.fn.emit(f"xor {ty} {r}, {b}", "sg")
        negative = self.fn.emit(f"icmp slt {ty} {sign}, {zero}", "neg")
        fix = self.fn.emit(f"and {vec('i1', dt.lanes)} {nonzero}, {negative}", "fix")
        if op == "floordiv":
            one = self.fn.emit(f"sext {vec('i1', dt.lanes)} {fix} to {ty}", "m1")     # -1 where a fix is due
            return self.fn.emit(f"add {ty} {q}, {one}", "fdiv")
        adjusted = self.fn.emit(f"add {ty} {r}, {b}", "radj")
        return self.fn.emit(f"select {vec('i1', dt.lanes)} {fix}, {ty} {adjusted}, {ty} {r}", "fmod")

    def float_floor_div_mod(self, e: Binary, a: str, b: str, ty: str) -> str:
        """numpy's floor_divide / remainder on floats (its npy_divmod), lane by lane:
        mod = fmod(a, b), moved to b's sign; div = (a - mod) / b, snapped to an integer;
        b == 0 gives a / b (inf or nan) and nan; zero results take numpy's signs."""
        dt = e.dtype
        bty = vec("i1", dt.lanes)
        fz = constant(0.0, dt)
        mod = self.fn.emit(f"frem {ty} {a}, {b}", "fmod")
        mod_nz = self.fn.emit(f"fcmp une {ty} {mod}, {fz}", "modnz")
        b_neg = self.fn.emit(f"fcmp olt {ty} {b}, {fz}", "bneg")
        mod_neg = self.fn.emit(f"fcmp olt {ty} {mod}, {fz}", "modneg")
        differ = self.fn.emit(f"xor {bty} {b_neg}, {mod_neg}", "differ")
        fix = self.fn.emit(f"and {bty} {mod_nz}, {differ}", "fix")
        if e.op == "floormod":
            moved = self.fn.emit(f"fadd {ty} {mod}, {b}", "moved")
            mod = self.fn.emit(f"select {bty} {fix}, {ty} {moved}, {ty} {mod}", "mod")
            signed_zero = self.intrinsic("copysign", ty, [fz, b], "zero")
            return self.fn.emit(f"select {bty} {mod_nz}, {ty} {mod}, {ty} {signed_zero}", "floormod")
        quotient = self.fn.emit(f"fdiv {ty} {a}, {b}", "quot")
        diff = self.fn.emit(f"fsub {ty} {a}, {mod}", "diff")
        div = self.fn.emit(f"fdiv {ty} {diff}, {b}", "div")
        lowered = self.fn.emit(f"fsub {ty} {div}, {constant(1.0, dt)}", "lowered")
        div = self.fn.emit(f"select {bty} {fix}, {ty} {lowered}, {ty} {div}", "div")
        floor = self.intrinsic("floor", ty, [div], "floor")
        frac = self.fn.emit(f"fsub {ty} {div}, {floor}", "frac")
        up = self.fn.emit(f"fcmp ogt {ty} {frac}, {constant(0.5, dt)}", "up")
        raised = self.fn.emit(f"fadd {ty} {floor}, {constant(1.0, dt)}", "raised")
        snapped = self.fn.emit(f"select {bty} {up}, {ty} {raised}, {ty} {floor}", "snapped")
        div_nz = self.fn.emit(f"fcmp une {ty} {div}, {fz}", "divnz")
        signed_zero = self.intrinsic("copysign", ty, [fz, quotient], "zero")
        out = self.fn.emit(f"select {bty} {div_nz}, {ty} {snapped}, {ty} {signed_zero}", "floordiv")
        b_zero = self.fn.emit(f"fcmp oeq {ty} {b}, {fz}", "bzero")
        return self.fn.emit(f"select {bty} {b_zero}, {ty} {quotient}, {ty} {out}", "floordiv")


def _const_value(e: Expr):
    """The integer value of a constant divisor (scalar or broadcast), else None."""
    if isinstance(e, Broadcast):
        e = e.value
    return int(e.value) if isinstance(e, Const) else None
