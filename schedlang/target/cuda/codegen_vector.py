"""CUDA C for the vector code of vectorized loops (target/cuda/vectorize.py).

Values of n lanes are computed as floatn (float16 and bfloat16 too, as scalars are computed
in float); an aligned contiguous access is one float4/float2/__half2/__nv_bfloat162 load or
store, any other access is written lane by lane with scalar loads and stores. CUDA has the
vector types but no arithmetic on them: VECTOR_PRELUDE adds it, lane by lane.
"""
from __future__ import annotations

from typing import Dict, Tuple

from ...expr.functor import walk
from ...expr.nodes import (Binary, Broadcast, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Ramp,
                           Select, Var, binary)
from ...expr.simplify import simplify
from ...loop.functor import stmt_exprs, walk_stmts
from ...loop.nodes import Store
from .vectorize import vector_access

LANE_FIELDS = "xyzw"
# element type -> (the memory vector type of 2 or 4 lanes, load conversion, store conversion)
_MEMORY_VECTOR = {("float32", 4): ("float4", "", ""), ("float32", 2): ("float2", "", ""),
                  ("float16", 2): ("__half2", "__half22float2", "__float22half2_rn"),
                  ("bfloat16", 2): ("__nv_bfloat162", "__bfloat1622float2", "__float22bfloat162_rn")}

VECTOR_PRELUDE = """\
// float2/float4 arithmetic lane by lane: CUDA has the vector types but no operators on them.
#define SL_VECTOR_OP(op) \\
  __device__ __forceinline__ float2 operator op(float2 a, float2 b) { return make_float2(a.x op b.x, a.y op b.y); } \\
  __device__ __forceinline__ float4 operator op(float4 a, float4 b) { \\
    return make_float4(a.x op b.x, a.y op b.y, a.z op b.z, a.w op b.w); \\
  }
SL_VECTOR_OP(+) SL_VECTOR_OP(-) SL_VECTOR_OP(*) SL_VECTOR_OP(/)
#define SL_VECTOR_FN1(fn) \\
  __device__ __forceinline__ float2 fn(float2 a) { return make_float2(fn(a.x), fn(a.y)); } \\
  __device__ __forceinline__ float4 fn(float4 a) { return make_float4(fn(a.x), fn(a.y), fn(a.z), fn(a.w)); }
#define SL_VECTOR_FN2(fn) \\
  __device__ __forceinline__ float2 fn(float2 a, float2 b) { return make_float2(fn(a.x, b.x), fn(a.y, b.y)); } \\
  __device__ __forceinline__ float4 fn(float4 a, float4 b) { \\
    return make_float4(fn(a.x, b.x), fn(a.y, b.y), fn(a.z, b.z), fn(a.w, b.w)); \\
  }
SL_VECTOR_FN1(expf) SL_VECTOR_FN1(logf) SL_VECTOR_FN1(sqrtf) SL_VECTOR_FN1(rsqrtf) SL_VECTOR_FN1(tanhf)
SL_VECTOR_FN1(erff) SL_VECTOR_FN1(fabsf) SL_VECTOR_FN1(floorf) SL_VECTOR_FN1(ceilf) SL_VECTOR_FN1(rintf)
SL_VECTOR_FN1(truncf) SL_VECTOR_FN1(exp2f) SL_VECTOR_FN1(log2f) SL_VECTOR_FN1(sinf) SL_VECTOR_FN1(cosf)
SL_VECTOR_FN1(sl_sigmoidf)
SL_VECTOR_FN2(powf) SL_VECTOR_FN2(sl_min) SL_VECTOR_FN2(sl_max)
__device__ __forceinline__ float2 sl_broadcast2(float v) { return make_float2(v, v); }
__device__ __forceinline__ float4 sl_broadcast4(float v) { return make_float4(v, v, v, v); }
"""

# bfloat16 vectors round to bfloat16 after every operation, as scalars do.
BFLOAT16_VECTOR_PRELUDE = """\
__device__ __forceinline__ float2 sl_round_bf16(float2 v) { return __bfloat1622float2(__float22bfloat162_rn(v)); }
"""


def lane(e: Expr, k: int, memo: Dict[Tuple[int, int], Expr]) -> Expr:
    """The scalar expression of lane k of a vector expression (a scalar is the same in every lane)."""
    if e.dtype.lanes == 1:
        return e
    hit = memo.get((id(e), k))
    if hit is not None:
        return hit
    if isinstance(e, Ramp):
        out = simplify(binary("add", e.base, binary("mul", e.stride, Const(k, e.stride.dtype))))
    elif isinstance(e, Broadcast):
        out = e.value
    elif isinstance(e, Binary):
        out = Binary(e.op, lane(e.a, k, memo), lane(e.b, k, memo))
    elif isinstance(e, Compare):
        out = Compare(e.op, lane(e.a, k, memo), lane(e.b, k, memo))
    elif isinstance(e, Logical):
        out = Logical(e.op, lane(e.a, k, memo), lane(e.b, k, memo))
    elif isinstance(e, Not):
        out = Not(lane(e.a, k, memo))
    elif isinstance(e, Cast):
        out = Cast(e.dtype.element(), lane(e.value, k, memo))
    elif isinstance(e, Call):
        out = Call(e.name, tuple(lane(a, k, memo) for a in e.args), e.dtype.element())
    elif isinstance(e, Select):
        out = Select(lane(e.cond, k, memo), lane(e.true_value, k, memo), lane(e.false_value, k, memo), e.guarded)
    elif isinstance(e, Load):
        pred = None if e.predicate is None else lane(e.predicate, k, memo)
        out = Load(e.buffer, (lane(e.indices[0], k, memo),), pred)
    else:
        raise TypeError(f"no lane of {type(e).__name__}")
    memo[(id(e), k)] = out
    return out


def vector_alignments(body) -> Dict[object, int]:
    """buffer -> the byte alignment its vector accesses need (the renderer aligns allocations so)."""
    out: Dict[object, int] = {}

    def note(buffer, index):
        if vector_access(index, index.dtype.lanes):
            out[buffer] = max(out.get(buffer, 1), index.dtype.lanes * buffer.dtype.bytes)

    for s in walk_stmts(body):
        if isinstance(s, Store) and s.indices[0].dtype.lanes > 1:
            note(s.buffer, s.indices[0])
        for e in stmt_exprs(s):
            for n in walk(e):
                if isinstance(n, Load) and n.indices[0].dtype.lanes > 1:
                    note(n.buffer, n.indices[0])
    return out


def render_load(r, e: Load) -> str:
    """A vector load: one vector access where aligned and contiguous, else scalar loads per lane."""
    lanes, index = e.dtype.lanes, e.indices[0]
    if vector_access(index, lanes):
        vtype, load, _ = _MEMORY_VECTOR[(str(e.buffer.dtype), lanes)]
        text = f"*(const {vtype}*)({r.names[e.buffer]} + {r.expr(index.base)})"
        return f"{load}({text})" if load else text
    memo: Dict[Tuple[int, int], Expr] = {}
    return f"make_float{lanes}({', '.join(r.expr(lane(e, k, memo)) for k in range(lanes))})"


def render_broadcast(r, e: Broadcast) -> str:
    value = r.expr(e.value)
    if isinstance(e.value, (Const, Var)):
        return f"make_float{e.lanes}({', '.join([value] * e.lanes)})"
    return f"sl_broadcast{e.lanes}({value})"


def render_store(r, s: Store, depth: int) -> None:
    """A vector store: one vector access where aligned and contiguous, else scalar stores per lane."""
    lanes, index = s.value.dtype.lanes, s.indices[0]
    value = r.expr(s.value)
    if vector_access(index, lanes):
        vtype, _, store = _MEMORY_VECTOR[(str(s.buffer.dtype), lanes)]
        r.emit(depth, f"*({vtype}*)({r.names[s.buffer]} + {r.expr(index.base)}) = "
                      f"{f'{store}({value})' if store else value};")
        return
    name = r.define(object(), "lanes")
    r.emit(depth, "{")
    r.emit(depth + 1, f"const float{lanes} {name} = {value};")
    memo: Dict[Tuple[int, int], Expr] = {}
    for k in range(lanes):
        element = f"{name}.{LANE_FIELDS[k]}"
        if s.buffer.dtype.is_bfloat:
            element = f"__float2bfloat16_rn({element})"
        elif s.buffer.dtype.is_float and s.buffer.dtype.bits == 16:
            element = f"__float2half({element})"
        r.emit(depth + 1, f"{r.names[s.buffer]}[{r.expr(lane(index, k, memo))}] = {element};")
    r.emit(depth, "}")
