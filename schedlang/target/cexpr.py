"""Kernel IR expressions and statements as C: the rules the CUDA C printer (target/cuda/codegen.py)
and the C printer (target/c/codegen.py) share.

A table-driven renderer in the style of tinygrad's CStyleLanguage: each node has one small rule,
operators and math functions come from tables, and a dialect (a subclass) names only what its
language spells differently: memory types, the bit-pattern constructors of NaN and infinity, the
helpers of defined integer arithmetic (CUDA: templates, C: one function per type), float16 and
bfloat16 conversions (computed in float, as the llvm target does), vector values (CUDA only).

Defined behaviour (README): integer +, -, * wrap and x / 0 is 0 (helpers compute in the unsigned
type), except where loop ranges prove plain C exact; float -> integer saturates; floor division
and modulo follow numpy; unary minus flips the sign bit.
"""
from __future__ import annotations

import math
import re
from typing import Dict, List, Optional, Tuple

from ..dtypes import DType, float32, float64, to_bfloat16
from ..errors import InternalError, LoweringError
from ..expr.bounds import fits_without_wrap
from ..expr.ranges import LoopRanges
from ..expr.nodes import FAST_MATH_MARKER, NEG, Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Ramp, Select, Var
from ..loop.nodes import Allocate, Evaluate, For, IfThen, Let, Seq, Stmt, Store
from ..tensor.intrin_calls import ADDRESS_OF, LLVM_PREFIX, REINTERPRET

INDENT = "  "
INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "bitand": "&", "bitor": "|", "bitxor": "^",
         "shl": "<<", "shr": ">>"}
MIN_MAX = {"min": "sl_min", "max": "sl_max"}
COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
LOGICAL = {"and": "&&", "or": "||"}
# C operator precedence (higher binds tighter); atoms, calls and parenthesised text are ATOM.
PREC = {"mul": 13, "div": 13, "add": 12, "sub": 12, "shl": 11, "shr": 11, "lt": 10, "le": 10, "gt": 10, "ge": 10,
        "eq": 9, "ne": 9, "bitand": 8, "bitxor": 7, "bitor": 6, "and": 5, "or": 4}
UNARY, SELECT, ATOM = 15, 3, 16
_INT_SUFFIX = {"int64": "ll", "uint32": "u", "uint64": "ull"}
_SPECIAL_BITS = {("nan", True): "0x7ff8000000000000ll", ("nan", False): "0x7fc00000",
                 ("inf", True): "0x7ff0000000000000ll", ("inf", False): "0x7f800000"}

# math intrinsic (tensor/intrin.py) -> the C function for float (double drops the trailing f).
MATH = {"exp": "expf", "log": "logf", "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf", "erf": "erff",
        "abs": "fabsf", "floor": "floorf", "ceil": "ceilf", "round": "rintf", "trunc": "truncf",
        "pow": "powf", "exp2": "exp2f", "log2": "log2f", "sin": "sinf", "cos": "cosf", "sigmoid": "sl_sigmoidf",
        "exp10": "exp10f", "log10": "log10f", "log1p": "log1pf", "tan": "tanf", "atan": "atanf",
        "atan2": "atan2f", "cosh": "coshf", "sinh": "sinhf", "acos": "acosf", "asin": "asinf",
        "acosh": "acoshf", "asinh": "asinhf", "atanh": "atanhf", "fmod": "fmodf", "hypot": "hypotf",
        "nextafter": "nextafterf", "copysign": "copysignf", "nearbyint": "nearbyintf", "ldexp": "ldexpf"}
# isnan/isinf/isfinite as comparisons (x - x is nan exactly for inf and nan): no library function.
FLOAT_CLASS = {"isnan": "{x} != {x}", "isinf": "{x} == {x} && {x} - {x} != {x} - {x}",
               "isfinite": "{x} - {x} == {x} - {x}"}
BIT_COUNTS = ("popcount", "clz")
_WRAPPING = ("add", "sub", "mul")
_DIVISION = ("floordiv", "floormod", "truncdiv", "truncmod")


def c_name(name: str) -> str:
    """A C identifier for an IR name ("i.outer" -> "i_outer")."""
    name = re.sub(r"\W", "_", name)
    return name if not name[0].isdigit() else "_" + name


def unsigned_type(dt: DType) -> str:
    """The unsigned C type an integer of dt is computed in without promotion to int."""
    return "unsigned long long" if dt.bits == 64 else "unsigned"


def render_literal(value, dt: DType, memory_type, float_bits: Tuple[str, str]) -> str:
    """A C constant of dtype dt; NaN and infinity through float_bits (the float and double
    constructors from integer bits), narrow integers cast to memory_type(dt)."""
    if dt.is_bool:
        return "true" if value else "false"
    if dt.is_float:
        v = float(to_bfloat16(value)) if dt.is_bfloat else float(value)
        double = dt.bits == 64
        negative = math.copysign(1.0, v) < 0      # -0.0 and a NaN with its sign bit set too
        if math.isnan(v) or math.isinf(v):
            key = ("nan" if math.isnan(v) else "inf", double)
            text = f"{float_bits[double]}({_SPECIAL_BITS[key]})"
            return f"(-{text})" if negative else text
        text = repr(v) + ("" if double else "f")
        return f"({text})" if negative else text
    v = int(value)
    suffix = _INT_SUFFIX.get(str(dt), "")
    if dt.bits == 64 and dt.kind == "int" and v == -2 ** 63:
        return "(-9223372036854775807ll - 1)"
    if dt.bits == 32 and dt.kind == "int" and v == -2 ** 31:
        return "(-2147483647 - 1)"
    text = f"{v}{suffix}"
    if dt.bits < 32:      # keep the narrow type: (signed char)5
        text = f"(({memory_type(dt)}){v})"
    return f"({text})" if v < 0 else text


def precedence(e: Expr) -> int:
    """The C precedence of e's rendering (see PREC)."""
    if isinstance(e, Binary) and e.dtype.is_int and e.dtype.bits < 32 and e.op in INFIX:
        return UNARY     # rendered as a cast
    if isinstance(e, (Binary, Compare, Logical)) and e.op in PREC:
        return PREC[e.op]
    if isinstance(e, Not) or (isinstance(e, Cast) and not e.dtype.is_bool and not
                              (e.dtype.is_float and e.dtype.bits == 16)):
        return UNARY
    if isinstance(e, Call) and e.name == NEG and e.dtype.lanes == 1:     # -x (vectors: sl_neg(x))
        return UNARY
    if isinstance(e, Cast) and e.dtype.is_bool:
        return PREC["ne"]
    if isinstance(e, Select) or (isinstance(e, Load) and e.predicate is not None):
        return SELECT
    return ATOM


class CRenderer:
    """Renders the expressions and statements of one kernel; names are made unique per kernel
    so nested scopes never clash. A dialect sets the class attributes and overrides the hooks
    below the "dialect" line."""

    LANGUAGE = "C"
    MEMORY: Dict[str, str] = {}
    FLOAT_BITS: Tuple[str, str] = ("", "")       # float and double from their bits
    HALF: Tuple[str, str] = ("", "")             # float16: (to float, from float) functions
    BFLOAT: Tuple[str, str] = ("", "")           # bfloat16: (to float, from a float already rounded)

    def __init__(self):
        self.names: Dict[object, str] = {}
        self.taken: set = set()
        self.lines: List[str] = []
        self.counters: set = set()      # ids of loop and launch variables: never negative
        self.ranges = LoopRanges(constant_only=True)   # loop and launch variable -> (0, extent - 1)
        self.calls: Dict[int, Expr] = {}           # id -> operation rendered as a helper call (an atom)

    # -- types and names --
    def memory_type(self, dt: DType) -> str:
        return self.MEMORY[str(dt)]

    def compute_type(self, dt: DType) -> str:
        return "float" if dt.is_float and dt.bits == 16 else self.memory_type(dt)

    def literal(self, value, dt: DType) -> str:
        return render_literal(value, dt, self.memory_type, self.FLOAT_BITS)

    def define(self, key, name: str) -> str:
        base = c_name(name)
        text, n = base, 1
        while text in self.taken:
            n += 1
            text = f"{base}_{n}"
        self.taken.add(text)
        self.names[key] = text
        return text

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    # -- expressions --
    def operand(self, e: Expr, prec: int, right: bool = False) -> str:
        """e as an operand of an operator of precedence prec: parenthesised only where C needs it
        (and on the right of an equal precedence: a - (b - c))."""
        text = self.expr(e)
        inner = PREC["div"] if self.plain_division(e) else ATOM if id(e) in self.calls else precedence(e)
        mixed = prec == PREC["or"] and inner == PREC["and"]      # (a && b) || c, as compilers advise
        return f"({text})" if inner < prec or (right and inner == prec) or mixed else text

    def infix(self, op: str, symbol: str, a: Expr, b: Expr) -> str:
        return f"{self.operand(a, PREC[op])} {symbol} {self.operand(b, PREC[op], right=True)}"

    def expr(self, e: Expr) -> str:
        rule = getattr(self, "expr_" + type(e).__name__, None)
        if rule is None:
            raise InternalError(f"the {self.LANGUAGE} renderer has no rule for {type(e).__name__} '{e}'")
        if e.dtype.is_bfloat and isinstance(e, (Binary, Call)):    # computed in float: round each result
            return self.round_bfloat(rule(e), e.dtype.lanes)
        return rule(e)

    def expr_Var(self, e: Var) -> str:
        if e not in self.names:
            raise InternalError(f"variable '{e.name}' is used outside the loop that defines it")
        return self.names[e]

    def expr_Const(self, e: Const) -> str:
        return self.literal(e.value, e.dtype)

    def nonnegative(self, e: Expr) -> bool:
        """Whether e is provably >= 0: counters, non-negative constants, and their sums,
        products and quotients."""
        if isinstance(e, Const):
            return e.dtype.is_int and e.value >= 0
        if isinstance(e, Var):
            return id(e) in self.counters or e.nonnegative
        return isinstance(e, Binary) and e.op in ("add", "mul", "floordiv", "floormod") and \
            self.nonnegative(e.a) and self.nonnegative(e.b)

    def plain_division(self, e: Expr) -> bool:
        """floordiv/floormod that C's / and % compute exactly: a non-negative dividend and a
        positive constant divisor (the common index arithmetic)."""
        return (isinstance(e, Binary) and e.op in ("floordiv", "floormod") and e.dtype.is_int and e.dtype.bits >= 32
                and isinstance(e.b, Const) and e.b.value > 0 and self.nonnegative(e.a))

    def fits(self, e: Expr) -> bool:
        """Whether the ranges of the loops (and launch axes) around prove that e cannot wrap:
        then its index arithmetic stays plain C."""
        return fits_without_wrap(e, self.ranges, self.ranges.proof_memo())

    def expr_Binary(self, e: Binary) -> str:
        if self.plain_division(e):
            return self.infix("div", "/" if e.op == "floordiv" else "%", e.a, e.b)
        defined = self.defined_binary(e)
        if defined is not None:
            self.calls[id(e)] = e
            return defined
        if e.op in INFIX:
            text = self.infix(e.op, INFIX[e.op], e.a, e.b)
            if e.dtype.is_int and e.dtype.bits < 32:     # C computes in int: wrap back to the narrow type
                return f"({self.memory_type(e.dtype)})({text})"
            return text
        if e.op in MIN_MAX:
            return f"{self.min_max(e.op, e.dtype)}({self.expr(e.a)}, {self.expr(e.b)})"
        raise InternalError(f"no {self.LANGUAGE} rule for '{e.op}' on {e.dtype}")

    def defined_binary(self, e: Binary) -> Optional[str]:
        """The helper call for an integer or float operation C leaves undefined for some operands,
        or None where the plain operator is exact (fits: loop ranges prove e does not wrap)."""
        dt = e.dtype
        if dt.lanes > 1 or not (dt.is_int or (dt.is_float and e.op in ("floordiv", "floormod"))):
            return None
        args = f"({self.expr(e.a)}, {self.expr(e.b)})"
        if dt.is_float:
            return f"{self.float_helper(e.op, dt)}{args}"
        if e.op in _DIVISION:
            return f"{self.int_helper(e.op, dt)}{args}"
        if e.op in _WRAPPING:
            # int8/16 and uint8 values promote to int, where +, - and * cannot overflow: the renderer
            # casts the result back; uint16 * uint16 can (65535 * 65535 > INT_MAX).
            uint16_mul = dt.kind == "uint" and dt.bits == 16 and e.op == "mul"
            if (dt.bits < 32 and not uint16_mul) or (dt.kind == "uint" and dt.bits >= 32) or self.fits(e):
                return None
            return f"{self.int_helper(e.op, dt)}{args}"
        if e.op in ("shl", "shr"):
            amount = e.b.value if isinstance(e.b, Const) else None
            if amount is not None and 0 <= amount < dt.bits and (e.op == "shr" or dt.kind == "uint"):
                return None
            return f"{self.int_helper(e.op, dt)}{args}"
        return None

    def expr_Compare(self, e: Compare) -> str:
        return self.infix(e.op, COMPARE[e.op], e.a, e.b)

    def expr_Logical(self, e: Logical) -> str:
        return self.infix(e.op, LOGICAL[e.op], e.a, e.b)

    def expr_Not(self, e: Not) -> str:
        return f"!{self.operand(e.a, UNARY)}"

    def expr_Select(self, e: Select) -> str:
        # C's ?: evaluates only the chosen side, as if_then_else requires.
        parts = [self.operand(x, SELECT + 1) for x in (e.cond, e.true_value, e.false_value)]
        return f"{parts[0]} ? {parts[1]} : {parts[2]}"

    def expr_Cast(self, e: Cast) -> str:
        src, dst, v = e.value.dtype, e.dtype, self.operand(e.value, UNARY)
        if dst.is_bool:
            return f"{self.operand(e.value, PREC['ne'])} != 0"
        if dst.is_bfloat:
            return self.round_bfloat(f"(float){v}", 1)
        if dst.is_float and dst.bits == 16:          # round to half, compute on as float
            return self.cast_half(v, src)
        if src.is_float and dst.is_int:            # C leaves it undefined out of range: saturate
            return self.float_to_int(e.value, dst)
        if self.compute_type(src) == self.compute_type(dst):
            return v
        return f"({self.compute_type(dst)}){v}"

    def float_to_int(self, value: Expr, dst: DType) -> str:
        """A float (computed as float or double) converted to an integer dtype, saturating: truncated
        toward zero, clamped to [lo, hi - 1], NaN gives 0 (LLVM's fptosi.sat)."""
        ftype = float64 if value.dtype.bits == 64 else float32
        lo, hi = dst.min_int, dst.max_int + 1
        return (f"{self.f2i_helper(dst, ftype)}({self.expr(value)}, "
                f"{self.literal(float(lo), ftype)}, {self.literal(float(hi), ftype)})")

    def expr_Call(self, e: Call) -> str:
        if e.name == FAST_MATH_MARKER:     # a stage's fast_math pragma: C is compiled IEEE-exact anyway
            return f"({self.expr(e.args[0])})"
        if e.name == NEG and e.dtype.lanes > 1:
            return f"sl_neg({self.expr(e.args[0])})"
        if e.name == NEG:      # C's unary minus flips the sign bit (0.0f - x would give +0.0 for +0.0)
            x = self.operand(e.args[0], UNARY)
            return f"-({x})" if x.startswith("-") else f"-{x}"      # never `--x`, C's decrement
        if e.name in FLOAT_CLASS:
            x = self.operand(e.args[0], ATOM)
            return f"({FLOAT_CLASS[e.name].format(x=x)})"
        if e.name == ADDRESS_OF:
            return f"(&{self.names[e.args[0].buffer]}[{self.expr(e.args[0].indices[0])}])"
        if e.name.startswith(LLVM_PREFIX) or e.name == REINTERPRET:
            raise LoweringError(self.LANGUAGE, f"'{e.name}' in a tensor intrinsic's body is for the llvm target; "
                                "tensorize with an intrinsic of plain expressions (or this target's own)")
        args = ", ".join(self.expr(a) for a in e.args)
        if e.name in BIT_COUNTS:
            return f"{self.bit_count_helper(e.name, e.dtype)}({args})"
        if e.name not in MATH:
            raise InternalError(f"no {self.LANGUAGE} rule for math function '{e.name}'")
        return f"{self.math_function(e.name, e.dtype)}({args})"

    def expr_Load(self, e: Load) -> str:
        if e.dtype.lanes > 1:
            return self.vector_load(e)
        text = f"{self.names[e.buffer]}[{self.expr(e.indices[0])}]"
        if e.buffer.dtype.is_bfloat:
            text = f"{self.BFLOAT[0]}({text})"
        elif e.buffer.dtype.is_float and e.buffer.dtype.bits == 16:
            text = f"{self.HALF[0]}({text})"
        if e.predicate is not None:
            text = f"{self.operand(e.predicate, SELECT + 1)} ? {text} : {self.literal(0, e.dtype)}"
        return text

    def expr_Ramp(self, e: Ramp) -> str:
        raise InternalError(f"vector index '{e}' outside a load or store: the {self.LANGUAGE} printer keeps "
                            "such loops scalar")

    # -- statements --
    def stmt(self, s: Stmt, depth: int) -> None:
        rule = getattr(self, "stmt_" + type(s).__name__, None)
        if rule is None:
            raise InternalError(f"the {self.LANGUAGE} renderer has no rule for {type(s).__name__}")
        rule(s, depth)

    def stmt_Seq(self, s: Seq, depth: int) -> None:
        for x in s.stmts:
            self.stmt(x, depth)

    def stmt_For(self, s: For, depth: int) -> None:
        v = self.define(s.var, s.var.name)
        self.counters.add(id(s.var))
        ty = self.compute_type(s.var.dtype)
        extent = self.expr(s.extent) if isinstance(s.extent, Expr) else self.literal(s.extent, s.var.dtype)
        self.emit(depth, f"for ({ty} {v} = 0; {v} < {extent}; ++{v}) {{")
        with self.ranges.loop(s.var, s.extent):
            self.stmt(s.body, depth + 1)
        self.emit(depth, "}")

    def stmt_Store(self, s: Store, depth: int) -> None:
        if s.value.dtype.lanes > 1:
            self.vector_store(s, depth)
            return
        value = self.expr(s.value)
        if s.buffer.dtype.is_bfloat:
            value = f"{self.BFLOAT[1]}({value})"
        elif s.buffer.dtype.is_float and s.buffer.dtype.bits == 16:
            value = f"{self.HALF[1]}({value})"
        text = f"{self.names[s.buffer]}[{self.expr(s.indices[0])}] = {value};"
        if s.predicate is not None:
            text = f"if ({self.expr(s.predicate)}) {text}"
        self.emit(depth, text)

    def stmt_IfThen(self, s: IfThen, depth: int) -> None:
        self.emit(depth, f"if ({self.expr(s.cond)}) {{")
        self.stmt(s.then_body, depth + 1)
        if s.else_body is not None:
            self.emit(depth, "} else {")
            self.stmt(s.else_body, depth + 1)
        self.emit(depth, "}")

    def stmt_Allocate(self, s: Allocate, depth: int) -> None:
        b = s.buffer
        name = self.define(b, b.name)
        self.emit(depth, f"{self.allocation_qualifier(b)}{self.memory_type(b.dtype)} {name}[{b.size}];")
        self.stmt(s.body, depth)

    def stmt_Evaluate(self, s: Evaluate, depth: int) -> None:
        self.emit(depth, f"{self.expr(s.value)};")      # a call of a tensor intrinsic's body

    def stmt_Let(self, s: Let, depth: int) -> None:
        value = self.expr(s.value)
        name = self.define(s.var, s.var.name)
        self.emit(depth, f"const {self.compute_type(s.var.dtype)} {name} = {value};")
        self.stmt(s.body, depth)

    # -- dialect --
    def round_bfloat(self, text: str, lanes: int) -> str:
        """A float value (text) rounded to bfloat16, still a float."""
        raise NotImplementedError

    def cast_half(self, v: str, src: DType) -> str:
        """A value of dtype src (an operand) rounded to float16, still a float."""
        return f"{self.HALF[0]}({self.HALF[1]}((float){v}))"

    def int_helper(self, op: str, dt: DType) -> str:
        """The function computing integer op (add, truncdiv, shl, ...) on dt as defined."""
        raise NotImplementedError

    def float_helper(self, op: str, dt: DType) -> str:
        """The function computing float floordiv/floormod on dt as numpy does."""
        raise NotImplementedError

    def f2i_helper(self, dst: DType, ftype: DType) -> str:
        """The function converting ftype (float32 or float64) to dst, saturating."""
        raise NotImplementedError

    def bit_count_helper(self, name: str, dt: DType) -> str:
        raise NotImplementedError

    def math_function(self, name: str, dt: DType) -> str:
        """The C function of math intrinsic name on dt (float64 drops the trailing f)."""
        fn = MATH[name]
        return fn[:-1] if dt.bits == 64 and dt.lanes == 1 else fn

    def min_max(self, op: str, dt: DType) -> str:
        return MIN_MAX[op]

    def allocation_qualifier(self, b) -> str:
        return ""

    def vector_load(self, e: Load) -> str:
        raise InternalError(f"the {self.LANGUAGE} printer has no vector values ({e})")

    def vector_store(self, s: Store, depth: int) -> None:
        raise InternalError(f"the {self.LANGUAGE} printer has no vector values (a store to {s.buffer.name})")
