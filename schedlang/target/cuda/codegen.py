"""Kernel IR -> CUDA C, one `extern "C" __global__` function per kernel.

A table-driven C renderer in the style of tinygrad's CStyleLanguage: each expression
node has one small rule, operators and math functions come from tables. float16 is
stored as __half and computed in float (as the llvm target does); bfloat16 is stored as
__nv_bfloat16, computed in float and rounded to bfloat16 after every operation (as the
llvm target does); bool is stored as one byte. Launch axes become `const int i = blockIdx.x;` at the top of the kernel:
the lifter guarantees each tag has one extent, so the launch covers the loop exactly.
"""
from __future__ import annotations

import math
import re
from typing import Dict, List

import numpy as np

from ...dtypes import DType, to_bfloat16
from ...errors import InternalError, LoweringError
from ...expr.bounds import fits_without_wrap
from ...expr.nodes import (NEG, Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not,
                           Ramp, Select, Var)
from ...kernel.launch import threads_per_block
from ...kernel.nodes import Kernel, KernelModule, LaunchKind
from ...loop.nodes import Allocate, Barrier, For, IfThen, Let, Seq, Stmt, Store
from . import arithmetic, codegen_vector, math_calls

INDENT = "  "

# Memory types; float16 is computed as float.
_MEMORY = {"float16": "__half", "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double", "int8": "signed char",
           "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
           "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long", "bool": "bool"}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "bitand": "&", "bitor": "|", "bitxor": "^",
          "shl": "<<", "shr": ">>"}
_HELPER = {"min": "sl_min", "max": "sl_max"}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_LOGICAL = {"and": "&&", "or": "||"}
# warp shuffles of cross-thread reductions (kernel/thread_allreduce.py)
_SHUFFLE = {"shfl_down_sync": "__shfl_down_sync", "shfl_sync": "__shfl_sync"}
# C operator precedence (higher binds tighter); atoms, calls and parenthesised text are ATOM.
_PREC = {"mul": 13, "div": 13, "add": 12, "sub": 12, "shl": 11, "shr": 11, "lt": 10, "le": 10, "gt": 10, "ge": 10,
         "eq": 9, "ne": 9, "bitand": 8, "bitxor": 7, "bitor": 6, "and": 5, "or": 4}
UNARY, SELECT, ATOM = 15, 3, 16
_INT_SUFFIX = {"int64": "ll", "uint32": "u", "uint64": "ull"}

# Helpers every kernel may use; plain C++ that NVRTC and g++ (with the shim) both compile.
PRELUDE = """\
// min/max propagate NaN, like numpy's minimum/maximum (fminf/fmaxf would drop it).
template <typename T> __device__ __forceinline__ T sl_min(T a, T b) {
  return a != a ? a : (b != b ? b : (b < a ? b : a));
}
template <typename T> __device__ __forceinline__ T sl_max(T a, T b) {
  return a != a ? a : (b != b ? b : (b > a ? b : a));
}
__device__ __forceinline__ float sl_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double sl_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
"""


def memory_type(dt: DType) -> str:
    return _MEMORY[str(dt)]


def compute_type(dt: DType) -> str:
    return "float" if dt.is_float and dt.bits == 16 else memory_type(dt)


def c_name(name: str) -> str:
    """A C identifier for an IR name ("i.outer" -> "i_outer")."""
    name = re.sub(r"\W", "_", name)
    return name if not name[0].isdigit() else "_" + name


def literal(value, dt: DType) -> str:
    if dt.is_bool:
        return "true" if value else "false"
    if dt.is_float:
        v = float(to_bfloat16(value)) if dt.is_bfloat else float(value)
        double = dt.bits == 64
        negative = math.copysign(1.0, v) < 0      # -0.0 and a NaN with its sign bit set too
        if math.isnan(v) or math.isinf(v):
            bits = {("nan", True): "0x7ff8000000000000ll", ("nan", False): "0x7fc00000",
                    ("inf", True): "0x7ff0000000000000ll", ("inf", False): "0x7f800000"}
            key = ("nan" if math.isnan(v) else "inf", double)
            text = f"__longlong_as_double({bits[key]})" if double else f"__int_as_float({bits[key]})"
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


class CUDARenderer:
    """Renders one kernel; names are made unique per kernel so nested scopes never clash."""

    def __init__(self):
        self.names: Dict[object, str] = {}
        self.taken: set = set()
        self.lines: List[str] = []
        self.counters: set = set()      # ids of loop and launch variables: never negative
        self.alignments: Dict[object, int] = {}    # buffer -> bytes its vector accesses need
        self.ranges: Dict[Var, tuple] = {}         # loop and launch variable -> (0, extent - 1)
        self.no_wrap_memo: tuple = ({}, {})        # fits_without_wrap's, for the ranges in force
        self.calls: Dict[int, Expr] = {}           # id -> operation rendered as a helper call (an atom)

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
        inner = _PREC["div"] if self.plain_division(e) else ATOM if id(e) in self.calls else precedence(e)
        mixed = prec == _PREC["or"] and inner == _PREC["and"]      # (a && b) || c, as compilers advise
        return f"({text})" if inner < prec or (right and inner == prec) or mixed else text

    def infix(self, op: str, symbol: str, a: Expr, b: Expr) -> str:
        return f"{self.operand(a, _PREC[op])} {symbol} {self.operand(b, _PREC[op], right=True)}"

    def expr(self, e: Expr) -> str:
        rule = getattr(self, "expr_" + type(e).__name__, None)
        if rule is None:
            raise InternalError(f"the CUDA renderer has no rule for {type(e).__name__} '{e}'")
        if e.dtype.is_bfloat and e.dtype.lanes > 1 and isinstance(e, (Binary, Call)):
            return f"sl_round_bf16({rule(e)})"
        if e.dtype.is_bfloat and isinstance(e, (Binary, Call)):    # computed in float: round each result
            return f"__bfloat162float(__float2bfloat16_rn({rule(e)}))"
        return rule(e)

    def expr_Var(self, e: Var) -> str:
        if e not in self.names:
            raise InternalError(f"variable '{e.name}' is used outside the loop that defines it")
        return self.names[e]

    def expr_Const(self, e: Const) -> str:
        return literal(e.value, e.dtype)

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
        positive constant divisor (the common index arithmetic of GPU kernels)."""
        return (isinstance(e, Binary) and e.op in ("floordiv", "floormod") and e.dtype.is_int and e.dtype.bits >= 32
                and isinstance(e.b, Const) and e.b.value > 0 and self.nonnegative(e.a))

    def enter_range(self, var: Var, extent) -> None:
        """var runs over [0, extent) from here (until leave_range): index arithmetic on it may
        stay plain C where the ranges prove it cannot wrap."""
        if isinstance(extent, int):
            self.ranges[var] = (0, extent - 1)
            self.no_wrap_memo = ({}, {})

    def leave_range(self, var: Var) -> None:
        if self.ranges.pop(var, None) is not None:
            self.no_wrap_memo = ({}, {})

    def fits(self, e: Expr) -> bool:
        return fits_without_wrap(e, self.ranges, self.no_wrap_memo)

    def expr_Binary(self, e: Binary) -> str:
        if self.plain_division(e):
            return self.infix("div", "/" if e.op == "floordiv" else "%", e.a, e.b)
        defined = arithmetic.render_binary(self, e, self.fits)
        if defined is not None:
            self.calls[id(e)] = e
            return defined
        if e.op in _INFIX:
            text = self.infix(e.op, _INFIX[e.op], e.a, e.b)
            if e.dtype.is_int and e.dtype.bits < 32:     # C computes in int: wrap back to the narrow type
                return f"({memory_type(e.dtype)})({text})"
            return text
        if e.op in _HELPER or e.dtype.lanes > 1 and e.op in ("min", "max"):
            return f"{_HELPER[e.op]}({self.expr(e.a)}, {self.expr(e.b)})"
        raise InternalError(f"no CUDA rule for '{e.op}' on {e.dtype}")

    def expr_Compare(self, e: Compare) -> str:
        return self.infix(e.op, _COMPARE[e.op], e.a, e.b)

    def expr_Logical(self, e: Logical) -> str:
        return self.infix(e.op, _LOGICAL[e.op], e.a, e.b)

    def expr_Not(self, e: Not) -> str:
        return f"!{self.operand(e.a, UNARY)}"

    def expr_Select(self, e: Select) -> str:
        # C's ?: evaluates only the chosen side, as if_then_else requires.
        parts = [self.operand(x, SELECT + 1) for x in (e.cond, e.true_value, e.false_value)]
        return f"{parts[0]} ? {parts[1]} : {parts[2]}"

    def expr_Cast(self, e: Cast) -> str:
        src, dst, v = e.value.dtype, e.dtype, self.operand(e.value, UNARY)
        if dst.is_bool:
            return f"{self.operand(e.value, _PREC['ne'])} != 0"
        if dst.is_bfloat:
            return f"__bfloat162float(__float2bfloat16_rn((float){v}))"
        if dst.is_float and dst.bits == 16:          # round to half, compute on as float
            return f"__half2float(__float2half((float){v}))"
        if src.is_float and dst.is_int:            # C leaves it undefined out of range: saturate
            return arithmetic.render_float_to_int(self, e.value, dst)
        if compute_type(src) == compute_type(dst):
            return v
        return f"({compute_type(dst)}){v}"

    def expr_Call(self, e: Call) -> str:
        if e.name in _SHUFFLE:      # (mask, value, lane or offset, width)
            mask, *rest = e.args
            return f"{_SHUFFLE[e.name]}({mask.value:#010x}u, {', '.join(self.expr(a) for a in rest)})"
        return math_calls.render_call(self, e, UNARY, ATOM)

    def expr_Load(self, e: Load) -> str:
        if e.dtype.lanes > 1:
            return codegen_vector.render_load(self, e)
        text = f"{self.names[e.buffer]}[{self.expr(e.indices[0])}]"
        if e.buffer.dtype.is_bfloat:
            text = f"__bfloat162float({text})"
        elif e.buffer.dtype.is_float and e.buffer.dtype.bits == 16:
            text = f"__half2float({text})"
        if e.predicate is not None:
            text = f"{self.operand(e.predicate, SELECT + 1)} ? {text} : {literal(0, e.dtype)}"
        return text

    def expr_Ramp(self, e: Ramp) -> str:
        raise InternalError(f"vector index '{e}' outside a load or store: the cuda vectorizer keeps such loops scalar")

    def expr_Broadcast(self, e) -> str:
        return codegen_vector.render_broadcast(self, e)

    # -- statements --
    def stmt(self, s: Stmt, depth: int) -> None:
        rule = getattr(self, "stmt_" + type(s).__name__, None)
        if rule is None:
            raise InternalError(f"the CUDA renderer has no rule for {type(s).__name__}")
        rule(s, depth)

    def stmt_Seq(self, s: Seq, depth: int) -> None:
        for x in s.stmts:
            self.stmt(x, depth)

    def stmt_For(self, s: For, depth: int) -> None:
        v = self.define(s.var, s.var.name)
        self.counters.add(id(s.var))
        ty = compute_type(s.var.dtype)
        extent = self.expr(s.extent) if isinstance(s.extent, Expr) else literal(s.extent, s.var.dtype)
        self.emit(depth, f"for ({ty} {v} = 0; {v} < {extent}; ++{v}) {{")
        self.enter_range(s.var, s.extent)
        self.stmt(s.body, depth + 1)
        self.leave_range(s.var)
        self.emit(depth, "}")

    def stmt_Store(self, s: Store, depth: int) -> None:
        if s.value.dtype.lanes > 1:
            codegen_vector.render_store(self, s, depth)
            return
        value = self.expr(s.value)
        if s.buffer.dtype.is_bfloat:
            value = f"__float2bfloat16_rn({value})"
        elif s.buffer.dtype.is_float and s.buffer.dtype.bits == 16:
            value = f"__float2half({value})"
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
        qualifier = "__shared__ " if b.scope == "shared" else ""
        if b in self.alignments:     # its vector accesses need it
            qualifier += f"__align__({self.alignments[b]}) "
        self.emit(depth, f"{qualifier}{memory_type(b.dtype)} {name}[{b.size}];")
        self.stmt(s.body, depth)

    def stmt_Let(self, s: Let, depth: int) -> None:
        value = self.expr(s.value)
        name = self.define(s.var, s.var.name)
        self.emit(depth, f"const {compute_type(s.var.dtype)} {name} = {value};")
        self.stmt(s.body, depth)

    def stmt_Barrier(self, s: Barrier, depth: int) -> None:
        self.emit(depth, "__syncthreads();")


def precedence(e: Expr) -> int:
    """The C precedence of e's rendering (see _PREC)."""
    if isinstance(e, Binary) and e.dtype.is_int and e.dtype.bits < 32 and e.op in _INFIX:
        return UNARY     # rendered as a cast
    if isinstance(e, (Binary, Compare, Logical)) and e.op in _PREC:
        return _PREC[e.op]
    if isinstance(e, Not) or (isinstance(e, Cast) and not e.dtype.is_bool and not
                              (e.dtype.is_float and e.dtype.bits == 16)):
        return UNARY
    if isinstance(e, Call) and e.name == NEG and e.dtype.lanes == 1:     # -x (vectors: sl_neg(x))
        return UNARY
    if isinstance(e, Cast) and e.dtype.is_bool:
        return _PREC["ne"]
    if isinstance(e, Select) or (isinstance(e, Load) and e.predicate is not None):
        return SELECT
    return ATOM


# CUDA's grid limits: x up to 2**31 - 1 blocks, y and z up to 65535.
MAX_GRID = {"blockIdx.x": 2 ** 31 - 1, "blockIdx.y": 65535, "blockIdx.z": 65535}


def check_grid(k, grid, sizes) -> None:
    """A call's grid (evaluated from the size variables) within CUDA's limits."""
    for c, n in zip("xyz", grid):
        tag = f"blockIdx.{c}"
        if n > MAX_GRID[tag]:
            given = ", ".join(f"{v.name}={value}" for v, value in sizes.items())
            raise ValueError(f"kernel {k.name} would launch {n} blocks along {tag} with {given}; CUDA allows at "
                             f"most {MAX_GRID[tag]}")


def render_kernel(k: Kernel) -> str:
    r = CUDARenderer()
    r.alignments = codegen_vector.vector_alignments(k.body)
    params = [f"{memory_type(b.dtype)}* __restrict__ {r.define(b, b.name)}" for b in k.params]
    params = ", ".join(params + [f"{compute_type(v.dtype)} {r.define(v, v.name)}" for v in k.sizes])
    r.emit(0, f'extern "C" __global__ void __launch_bounds__({threads_per_block(k)}) {k.name}({params}) {{')
    for a in k.launch:
        if a.kind is LaunchKind.VTHREAD:
            raise LoweringError("cuda codegen", f"kernel {k.name} binds '{a.var.name}' to vthread; virtual "
                                "threads are not supported by the cuda target yet (they come later): bind the "
                                "loop to threadIdx, or leave it serial")
        if a.kind not in (LaunchKind.BLOCK, LaunchKind.THREAD):
            raise LoweringError("cuda codegen", f"kernel {k.name} has a {a.kind.value} launch axis, "
                                "which the cuda target cannot run")
        r.emit(1, f"const int {r.define(a.var, a.var.name)} = {a.tag};")
        r.counters.add(id(a.var))
        r.enter_range(a.var, a.extent)
    r.stmt(k.body, 1)
    r.emit(0, "}")
    return "\n".join(r.lines)


def render_cuda(m: KernelModule) -> str:
    """The CUDA C source of a module: the prelude, then one kernel function per kernel."""
    kernels = [render_kernel(k) for k in m.kernels]
    head = [f"// schedlang module {m.name}: {len(kernels)} kernel(s)"]
    if any("__half" in k for k in kernels):
        head.append("#include <cuda_fp16.h>")
    if any("__nv_bfloat16" in k for k in kernels):
        head.append("#include <cuda_bf16.h>")
    prelude = PRELUDE
    if any(arithmetic.uses_helpers(k) for k in kernels):
        prelude += arithmetic.ARITHMETIC_PRELUDE
    prelude += math_calls.prelude(kernels)
    if any("float2" in k or "float4" in k for k in kernels):
        prelude += codegen_vector.VECTOR_PRELUDE
        if "#include <cuda_bf16.h>" in head:
            prelude += codegen_vector.BFLOAT16_VECTOR_PRELUDE
    return "\n".join(head) + "\n" + prelude + "\n" + "\n\n".join(kernels) + "\n"
