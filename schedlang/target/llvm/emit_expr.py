"""Expressions of Kernel IR as LLVM IR instructions (scalar and vector)."""
from __future__ import annotations

from typing import Dict

from ...dtypes import DType, dtype as parse_dtype, float32
from ...errors import InternalError
from ...expr.nodes import (Binary, Broadcast, Buffer, Call, Cast, Compare, Const, Expr, Load, Logical, Not,
                           Ramp, Select, Var)
from ...tensor.intrin import EXTERN_PREFIX
from ...tensor.intrin_calls import ADDRESS_OF, LLVM_PREFIX, REINTERPRET
from .bfloat import BFloatEmitter
from .division import DivisionEmitter
from .half import HalfEmitter
from .externs import check_symbol
from .mathlib import MATH_FUNCTIONS, math_declarations, math_function
from ...expr.bounds import fits_without_wrap
from ...expr.equality import equal
from ...expr.ranges import LoopRanges
from ...expr.nodes import FAST_MATH_MARKER, NEG
from .types import compute_type, constant, literal, memory_type, scalar_compute, signed, suffix, vec

# Floating point is IEEE by default: no flags on the user's arithmetic. FAST_MATH is what
# Target(fast_math=True) or a stage's "fast_math" pragma allow; ACCUMULATE is for the update of
# a declared reduction, whose order the program leaves open (the same freedom rfactor and
# vectorized reductions take): reassociating its adds lets LLVM vectorize a scalar reduction
# loop, and contracting its a*b + acc into an fma is a reassociation of the same sum.
FAST_MATH = "reassoc contract nsz"
ACCUMULATE = "reassoc nsz contract"
_FLOAT_OPS = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
_INT_OPS = {"add": "add", "sub": "sub", "mul": "mul", "bitand": "and", "bitor": "or", "bitxor": "xor"}
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_ICMP_S = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_ICMP_U = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}
# Results that are bfloat16 values whenever the operands are (no rounding needed).
_EXACT_BINARY = frozenset({"min", "max"})
_EXACT_CALLS = frozenset({NEG, "abs", "floor", "ceil", "round", "trunc", "nearbyint", "copysign", FAST_MATH_MARKER})
_LLVM_UNARY = {"sqrt": "sqrt", "abs": "fabs", "floor": "floor", "ceil": "ceil", "round": "roundeven",
               "trunc": "trunc", "exp2": "exp2", "log2": "log2", "sin": "sin", "cos": "cos",
               "exp": "exp", "log": "log", "tanh": "tanh"}


# Computed by calling libm per lane: tanf for float32 (and float16), tan for float64.
LIBM_FUNCTIONS = frozenset({"exp10", "log10", "log1p", "tan", "atan", "atan2", "cosh", "sinh", "acos", "asin",
                            "acosh", "asinh", "atanh", "fmod", "hypot", "nextafter"})


def _c_dtype(ty: str) -> DType:
    return parse_dtype({"float": "float32", "double": "float64"}.get(ty, f"int{ty[1:]}"))


class ExprEmitter(DivisionEmitter, BFloatEmitter, HalfEmitter):
    """Mixin: needs self.fn (FunctionText), self.env (Var -> value), self.ptrs (Buffer -> ptr),
    self.module (ModuleState)."""

    env: Dict[Var, str]
    ptrs: Dict[Buffer, str]
    fast_region = False                  # inside a fast_math(...) marker (the stage's pragma)
    index_ranges = LoopRanges()          # loop variable -> (0, extent - 1), for nsw proofs (none here)
    in_index = False                     # emitting a buffer index (index arithmetic, not user data)

    def float_flags(self) -> str:
        return FAST_MATH if self.fast_region or self.module.target.fast_math else ""

    # -- helpers --
    def declare(self, text: str) -> None:
        self.module.declarations.add(text)

    def intrinsic(self, name: str, ty: str, args, hint: str = "call", flags: str = "") -> str:
        fname = f"llvm.{name}.{suffix(ty)}"
        self.declare(f"declare {ty} @{fname}({', '.join([ty] * len(args))})")
        call = f"call {flags} " if flags else "call "
        return self.fn.emit(f"{call}{ty} @{fname}({', '.join(f'{ty} {a}' for a in args)})", hint)

    def splat(self, scalar_value: str, scalar_ty: str, lanes: int, is_const: bool) -> str:
        if is_const:
            return f"splat ({scalar_ty} {scalar_value})"
        ins = self.fn.emit(f"insertelement <{lanes} x {scalar_ty}> poison, {scalar_ty} {scalar_value}, i64 0", "ins")
        return self.fn.emit(f"shufflevector <{lanes} x {scalar_ty}> {ins}, <{lanes} x {scalar_ty}> poison, "
                            f"<{lanes} x i32> zeroinitializer", "splat")

    # -- dispatch --
    _values = None     # node id -> (node, SSA value), within one top-level expr() call

    def expr(self, e: Expr) -> str:
        """The SSA value of e. A node shared by several parents is emitted once per top-level
        call (so a DAG of shared subexpressions costs its size, not its tree size)."""
        values = self._values
        if values is None:
            self._values = {}
            try:
                return self.expr(e)
            finally:
                self._values = None
        hit = values.get(id(e))
        if hit is not None:
            return hit[1]
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            raise InternalError(f"the LLVM renderer has no rule for {type(e).__name__} '{e}'")
        value = method(e)
        if e.dtype.is_bfloat and _rounds(e):     # computed in float: round to bfloat16 after each operation
            value = self.round_bfloat(value, e.dtype.lanes)
        self._values[id(e)] = (e, value)
        return value

    def expr_Var(self, e: Var) -> str:
        if e not in self.env:
            raise InternalError(f"variable '{e.name}' is used outside the loop that defines it")
        return self.env[e]

    def expr_Const(self, e: Const) -> str:
        return constant(e.value, e.dtype)

    def expr_Broadcast(self, e: Broadcast) -> str:
        value = self.expr(e.value)
        return self.splat(value, scalar_compute(e.value.dtype), e.lanes, isinstance(e.value, Const))

    def expr_Ramp(self, e: Ramp) -> str:
        elem = scalar_compute(e.base.dtype)
        base = self.splat(self.expr(e.base), elem, e.lanes, isinstance(e.base, Const))
        if isinstance(e.stride, Const):
            offsets = "<" + ", ".join(f"{elem} {int(e.stride.value) * i}" for i in range(e.lanes)) + ">"
        else:
            stride = self.splat(self.expr(e.stride), elem, e.lanes, False)
            lanes = "<" + ", ".join(f"{elem} {i}" for i in range(e.lanes)) + ">"
            offsets = self.fn.emit(f"mul <{e.lanes} x {elem}> {stride}, {lanes}", "stride")
        return self.fn.emit(f"add <{e.lanes} x {elem}> {base}, {offsets}", "ramp")

    def expr_Binary(self, e: Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        dt, ty = e.dtype, compute_type(e.dtype)
        if dt.is_float:
            if e.op in _FLOAT_OPS:
                return self.float_op(e.op, ty, a, b, self.float_flags())
            if e.op in ("min", "max"):   # NaN-propagating, like numpy's minimum/maximum
                return self.intrinsic("minimum" if e.op == "min" else "maximum", ty, [a, b], e.op, flags="nsz")
            if e.op in ("floordiv", "floormod"):
                return self.float_floor_div_mod(e, a, b, ty)
        else:
            if e.op in ("shl", "shr"):
                return self.shift(e, a, b, ty)
            if e.op in _INT_OPS:
                # Integers wrap around (as numpy's do): no nsw on user arithmetic, so LLVM may not
                # assume `x + 1 > x`. Index arithmetic keeps nsw where loop ranges prove it.
                flags = " nsw" if self.in_index and e.op in ("add", "sub", "mul") and self.proven_no_wrap(e) else ""
                return self.fn.emit(f"{_INT_OPS[e.op]}{flags} {ty} {a}, {b}", e.op)
            if e.op in ("min", "max"):
                name = ("s" if signed(dt) else "u") + e.op
                return self.intrinsic(name, ty, [a, b], e.op)
            if e.op in ("floordiv", "floormod"):
                return self.floor_div_mod(e, a, b, ty)
            if e.op in ("truncdiv", "truncmod"):   # C's / and %, defined for 0 and -1 divisors
                return self.trunc_div_mod(e, a, b, ty)
        raise InternalError(f"no LLVM rule for '{e.op}' on {dt}")

    def float_op(self, op: str, ty: str, a: str, b: str, flags: str) -> str:
        flags = f" {flags}" if flags else ""
        return self.fn.emit(f"{_FLOAT_OPS[op]}{flags} {ty} {a}, {b}", op)

    def proven_no_wrap(self, e: Binary) -> bool:
        """Whether loop ranges prove that e and every operation under it stay in range."""
        return fits_without_wrap(e, self.index_ranges, self.index_ranges.proof_memo())

    def expr_Compare(self, e: Compare) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        ty = compute_type(e.a.dtype)
        if e.a.dtype.is_float:
            return self.fn.emit(f"fcmp {_FCMP[e.op]} {ty} {a}, {b}", "cmp")
        if e.a.dtype.is_bool:
            table = _ICMP_U
        else:
            table = _ICMP_S if signed(e.a.dtype) else _ICMP_U
        return self.fn.emit(f"icmp {table[e.op]} {ty} {a}, {b}", "cmp")

    def expr_Logical(self, e: Logical) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        return self.fn.emit(f"{e.op} {compute_type(e.dtype)} {a}, {b}", e.op)

    def expr_Not(self, e: Not) -> str:
        a = self.expr(e.a)
        ones = "true" if e.dtype.lanes == 1 else "splat (i1 true)"
        return self.fn.emit(f"xor {compute_type(e.dtype)} {a}, {ones}", "not")

    def expr_Select(self, e: Select) -> str:
        ty = compute_type(e.dtype)
        if e.guarded and e.cond.dtype.lanes == 1:
            return self.guarded_select(e, ty)
        c, t, f = self.expr(e.cond), self.expr(e.true_value), self.expr(e.false_value)
        return self.fn.emit(f"select {compute_type(e.cond.dtype)} {c}, {ty} {t}, {ty} {f}", "sel")

    def guarded_select(self, e: Select, ty: str) -> str:
        # if_then_else: only the chosen branch may run (it may read out of bounds otherwise).
        c = self.expr(e.cond)
        then_l, else_l, join_l = self.fn.label("then"), self.fn.label("else"), self.fn.label("join")
        self.fn.do(f"br i1 {c}, label %{then_l}, label %{else_l}")
        outer = self._values     # values made in a branch do not dominate the join: forget them there
        self._values = dict(outer)
        self.fn.start_block(then_l)
        t = self.expr(e.true_value)
        t_end = self.fn.block
        self.fn.do(f"br label %{join_l}")
        self._values = dict(outer)
        self.fn.start_block(else_l)
        f = self.expr(e.false_value)
        f_end = self.fn.block
        self.fn.do(f"br label %{join_l}")
        self._values = outer
        self.fn.start_block(join_l)
        return self.fn.emit(f"phi {ty} [ {t}, %{t_end} ], [ {f}, %{f_end} ]", "ite")

    def expr_Cast(self, e: Cast) -> str:
        return self.convert(self.expr(e.value), e.value.dtype, e.dtype)

    def convert(self, v: str, src: DType, dst: DType) -> str:
        if src.is_bfloat != dst.is_bfloat and not src.is_bool and not dst.is_bool:
            # through float32, which holds every bfloat16 value (float64 and int64 values
            # round twice, as in torch; see dtypes.to_bfloat16)
            f32 = float32.with_lanes(dst.lanes)
            if src.is_bfloat:
                return self.convert(v, f32, dst)
            return self.round_bfloat(self.convert(v, src, f32), dst.lanes)
        s_ty, d_ty = compute_type(src), compute_type(dst)
        lanes = dst.lanes
        if dst.kind == "float" and dst.bits == 16 and not src.is_bool:     # round to half once, compute on as float
            if src.is_float:
                mid = v if src.bits != 64 else self.double_to_float_odd(v, lanes)
            else:      # an int beyond float's 24 bits is beyond float16's range: inf either way
                mid = self.convert(v, src, float32.with_lanes(lanes))
            return self.half_to_float(self.float_to_half(mid, lanes), lanes)
        if src.is_float and dst.is_float:
            if s_ty == d_ty:
                return v
            op = "fpext" if d_ty.endswith("double") or d_ty.endswith("double>") else "fptrunc"
            return self.fn.emit(f"{op} {s_ty} {v} to {d_ty}", "fcvt")
        if dst.is_bool:
            zero = "zeroinitializer" if lanes > 1 else ("0.0" if src.is_float else "0")
            cmp = "fcmp une" if src.is_float else "icmp ne"
            return self.fn.emit(f"{cmp} {s_ty} {v}, {zero}", "tobool")
        if src.is_bool:
            op = "uitofp" if dst.is_float else "zext"
            return self.fn.emit(f"{op} {s_ty} {v} to {d_ty}", "frombool")
        if src.is_float:
            # Saturating (README, "Defined behaviour"): out of range clamps to the dtype's
            # limits and NaN gives 0, as Rust and Java define it; plain fptosi gives poison.
            name = f"llvm.fpto{'si' if signed(dst) else 'ui'}.sat.{suffix(d_ty)}.{suffix(s_ty)}"
            self.declare(f"declare {d_ty} @{name}({s_ty})")
            return self.fn.emit(f"call {d_ty} @{name}({s_ty} {v})", "ftoi")
        if dst.is_float:
            return self.fn.emit(f"{'sitofp' if signed(src) else 'uitofp'} {s_ty} {v} to {d_ty}", "itof")
        if src.bits == dst.bits:
            return v
        if src.bits > dst.bits:
            return self.fn.emit(f"trunc {s_ty} {v} to {d_ty}", "trunc")
        return self.fn.emit(f"{'sext' if signed(src) else 'zext'} {s_ty} {v} to {d_ty}", "ext")

    def stored_value(self, s) -> str:
        """The value a Store writes. The update of a declared float reduction, acc = acc + x
        (or acc * x), keeps the reduction's freedom of order: its accumulate op carries
        ACCUMULATE, and a product feeding a sum may be contracted into an fma with it."""
        value, fast = s.value, False
        if isinstance(value, Call) and value.name == FAST_MATH_MARKER:
            value, fast = value.args[0], True
        if not (value.dtype.is_float and not value.dtype.is_bfloat and isinstance(value, Binary)
                and value.op in ("add", "mul") and _updates(s, value)):
            return self.expr(s.value)
        saved, self.fast_region = self.fast_region, self.fast_region or fast
        try:
            operands = []
            for side in (value.a, value.b):
                if value.op == "add" and isinstance(side, Binary) and side.op == "mul" and side.dtype.is_float:
                    x, y = self.expr(side.a), self.expr(side.b)
                    flags = self.float_flags() or "contract"
                    operands.append(self.float_op("mul", compute_type(side.dtype), x, y, flags))
                else:
                    operands.append(self.expr(side))
            flags = self.float_flags() or ACCUMULATE
            return self.float_op(value.op, compute_type(value.dtype), *operands, flags)
        finally:
            self.fast_region = saved

    def expr_Call(self, e: Call) -> str:
        if e.name == ADDRESS_OF:       # an element's address, not its value
            load = e.args[0]
            ptr, _ = self.pointer(load.buffer, load.indices[0])
            return self.fn.emit(f"ptrtoint ptr {ptr} to i64", "addr")
        if e.name == FAST_MATH_MARKER:     # the stage's fast_math pragma: flags for what is inside
            saved, self.fast_region = self.fast_region, True
            try:
                return self.expr(e.args[0])
            finally:
                self.fast_region = saved
        args = [self.expr(a) for a in e.args]
        ty = compute_type(e.dtype)
        if e.name == NEG:      # flips the sign bit (fsub from 0.0 would give +0.0 for +0.0)
            return self.fn.emit(f"fneg {ty} {args[0]}", "neg")
        is_f32 = scalar_compute(e.dtype) == "float"
        if e.name in MATH_FUNCTIONS and is_f32:
            scalef = (self.module.target.vector_bits or 0) >= 512     # AVX-512: vscalefps
            symbol, definition = math_function(e.name, e.dtype.lanes, scalef)
            self.module.definitions.setdefault(symbol, definition)
            for d in math_declarations(e.dtype.lanes, scalef):
                self.declare(d)
            return self.fn.emit(f"call {ty} {symbol}({ty} {args[0]})", e.name)
        if e.name == "sigmoid":   # double precision: 1 / (1 + exp(-x))
            neg = self.fn.emit(f"fneg {ty} {args[0]}", "neg")
            ex = self.intrinsic("exp", ty, [neg], "exp")
            one = constant(1.0, e.dtype)
            den = self.float_op("add", ty, one, ex, self.float_flags())
            return self.float_op("div", ty, one, den, self.float_flags())
        if e.name == "rsqrt":
            root = self.intrinsic("sqrt", ty, args, "sqrt")
            one = constant(1.0, e.dtype)
            return self.float_op("div", ty, one, root, self.float_flags())
        if e.name == "pow":
            return self.intrinsic("pow", ty, args, "pow")
        if e.name == "erf":
            return self.scalar_libm("erf", e, args)
        if e.name in _LLVM_UNARY:
            return self.intrinsic(_LLVM_UNARY[e.name], ty, args, e.name)
        return self.more_calls(e, args, ty)

    def more_calls(self, e: Call, args, ty: str) -> str:
        """Bit counts, float predicates, libm functions, call_pure_extern and the calls of
        tensor intrinsics' bodies (tensor/intrin_calls.py)."""
        if e.name.startswith(EXTERN_PREFIX):
            return self.extern_call(e, args)
        if e.name.startswith(LLVM_PREFIX):
            return self.llvm_intrinsic_call(e, args, ty)
        if e.name == REINTERPRET:
            return self.reinterpret(e.args[0].dtype, args[0], e.dtype)
        if e.name in ("copysign", "nearbyint"):
            return self.intrinsic(e.name, ty, args, e.name)
        if e.name == "popcount":
            return self.intrinsic("ctpop", ty, args, e.name)
        if e.name == "clz":   # ctlz(0) is the bit width when the flag says zero is allowed
            fname = f"llvm.ctlz.{suffix(ty)}"
            self.declare(f"declare {ty} @{fname}({ty}, i1)")
            return self.fn.emit(f"call {ty} @{fname}({ty} {args[0]}, i1 false)", "clz")
        if e.name in ("isnan", "isinf", "isfinite"):
            return self.float_predicate(e, args[0])
        if e.name == "ldexp":
            return self.lanewise(e, args, "ldexp", ["double", "i32"], "double")
        if e.name in LIBM_FUNCTIONS:
            elem = scalar_compute(e.dtype)
            name = e.name + ("f" if elem == "float" else "")   # tanf for float, tan for double
            return self.lanewise(e, args, name, [elem] * len(args), elem)
        raise InternalError(f"no LLVM rule for math function '{e.name}' on {e.dtype}")

    def llvm_intrinsic_call(self, e: Call, args, ty: str) -> str:
        """A call of the LLVM intrinsic e.name. bfloat16 arguments and results are LLVM's
        bfloat vectors there (llvm.x86.avx512bf16.dpbf16ps.512 takes <32 x bfloat>), which the
        renderer otherwise holds as floats: converted through their bits on the way in and out."""
        arg_types, values = [], []
        for a, v in zip(e.args, args):
            if a.dtype.is_bfloat:
                v = self.fn.emit(f"bitcast {vec('i16', a.dtype.lanes)} {self.float_to_bfloat_bits(v, a.dtype.lanes)} "
                                 f"to {vec('bfloat', a.dtype.lanes)}", "bf.arg")
                arg_types.append(vec("bfloat", a.dtype.lanes))
            else:
                arg_types.append(compute_type(a.dtype))
            values.append(v)
        ret = vec("bfloat", e.dtype.lanes) if e.dtype.is_bfloat else ty
        self.declare(f"declare {ret} @{e.name}({', '.join(arg_types)})")
        result = self.fn.emit(f"call {ret} @{e.name}({', '.join(f'{t} {a}' for t, a in zip(arg_types, values))})",
                              "intrin")
        if e.dtype.is_bfloat:
            bits = self.fn.emit(f"bitcast {ret} {result} to {vec('i16', e.dtype.lanes)}", "bf.ret")
            result = self.bfloat_to_float(bits, e.dtype.lanes)
        return result

    def reinterpret(self, src, value: str, dst) -> str:
        """The bits of value (of dtype src) as dtype dst; a bfloat16 side goes through its i16
        bits (held as floats, bfloat16 values are not their storage's width)."""
        if src.is_bfloat:
            value = self.float_to_bfloat_bits(value, src.lanes)
            src_ty = vec("i16", src.lanes)
        else:
            src_ty = compute_type(src)
        if dst.is_bfloat:
            bits = self.fn.emit(f"bitcast {src_ty} {value} to {vec('i16', dst.lanes)}", "cast")
            return self.bfloat_to_float(bits, dst.lanes)
        return self.fn.emit(f"bitcast {src_ty} {value} to {compute_type(dst)}", "cast")

    def float_predicate(self, e: Call, x: str) -> str:
        src = e.args[0].dtype
        ty = compute_type(src)
        if e.name == "isnan":
            return self.fn.emit(f"fcmp uno {ty} {x}, {x}", "isnan")
        mag = self.intrinsic("fabs", ty, [x], "abs")
        inf = literal(float("inf"), src.element())
        inf = inf if src.lanes == 1 else f"splat ({scalar_compute(src)} {inf})"
        pred = "oeq" if e.name == "isinf" else "one"    # one: ordered (not nan) and not inf
        return self.fn.emit(f"fcmp {pred} {ty} {mag}, {inf}", e.name)

    def extern_call(self, e: Call, args) -> str:
        symbol = e.name[len(EXTERN_PREFIX):]
        check_symbol(symbol)
        arg_types = [scalar_compute(a.dtype) for a in e.args]
        return self.lanewise(e, args, symbol, arg_types, scalar_compute(e.dtype), convert=False)

    def lanewise(self, e: Call, args, symbol: str, arg_types, ret_type: str, convert: bool = True) -> str:
        """Call the C function symbol once per lane. With convert, each argument (and the
        result) is converted between its compute type and the C type (fpext/fptrunc/fptosi.sat)."""
        self.declare(f"declare {ret_type} @{symbol}({', '.join(arg_types)})")
        lanes = e.dtype.lanes
        elem = scalar_compute(e.dtype)
        out = "poison"
        for lane in range(lanes):
            call_args = []
            for a, v, cty in zip(e.args, args, arg_types):
                x = v if a.dtype.lanes == 1 else self.fn.emit(
                    f"extractelement {compute_type(a.dtype)} {v}, i64 {lane}", "lane")
                if convert:
                    x = self.convert(x, a.dtype.element(), _c_dtype(cty))
                call_args.append(f"{cty} {x}")
            r = self.fn.emit(f"call {ret_type} @{symbol}({', '.join(call_args)})", symbol)
            if convert:
                r = self.convert(r, _c_dtype(ret_type), e.dtype.element())
            if lanes == 1:
                return r
            out = self.fn.emit(f"insertelement {compute_type(e.dtype)} {out}, {elem} {r}, i64 {lane}", "ins")
        return out

    def scalar_libm(self, name: str, e: Call, args) -> str:
        # libm has only scalar double erf: call it per lane.
        elem = scalar_compute(e.dtype)
        self.declare(f"declare double @{name}(double)")
        lanes = e.dtype.lanes
        out = "poison"
        for lane in range(lanes):
            x = args[0] if lanes == 1 else self.fn.emit(f"extractelement {compute_type(e.dtype)} {args[0]}, i64 {lane}", "lane")
            xd = x if elem == "double" else self.fn.emit(f"fpext {elem} {x} to double", "xd")
            r = self.fn.emit(f"call double @{name}(double {xd})", name)
            r = r if elem == "double" else self.fn.emit(f"fptrunc double {r} to {elem}", "r")
            if lanes == 1:
                return r
            out = self.fn.emit(f"insertelement {compute_type(e.dtype)} {out}, {elem} {r}, i64 {lane}", "ins")
        return out

    def expr_Load(self, e: Load) -> str:
        return self.load(e)

    def from_memory(self, raw: str, dt: DType) -> str:
        if dt.is_bfloat:
            return self.bfloat_to_float(raw, dt.lanes)
        mty, cty = memory_type(dt), compute_type(dt)
        if mty == cty:
            return raw
        if dt.is_bool:
            zero = "zeroinitializer" if dt.lanes > 1 else "0"
            return self.fn.emit(f"icmp ne {mty} {raw}, {zero}", "b")
        return self.half_to_float(raw, dt.lanes)

    def to_memory(self, value: str, dt: DType) -> str:
        if dt.is_bfloat:
            return self.float_to_bfloat_bits(value, dt.lanes)
        mty, cty = memory_type(dt), compute_type(dt)
        if mty == cty:
            return value
        if dt.is_bool:
            return self.fn.emit(f"zext {cty} {value} to {mty}", "b8")
        return self.float_to_half(value, dt.lanes)


def _rounds(e: Expr) -> bool:
    """Whether e is an operation whose float result needs rounding to bfloat16 (casts round
    in convert; loads, constants and selects are bfloat16 values already, and so are the bits
    a reinterpret or an LLVM intrinsic gives as bfloat16)."""
    if isinstance(e, Binary):
        return e.op not in _EXACT_BINARY
    return isinstance(e, Call) and e.name not in _EXACT_CALLS and e.name != REINTERPRET \
        and not e.name.startswith(LLVM_PREFIX)


def _updates(s, value: Binary) -> bool:
    """Whether value reads the element s stores to: the update of a reduction (a compute never
    reads its own output otherwise)."""
    index = s.indices[0]
    return any(isinstance(side, Load) and side.buffer is s.buffer and equal(side.indices[0], index)
               for side in (value.a, value.b))
