"""vectorize on the CUDA target: a vectorized loop becomes float4/float2 (float32), __half2
(float16) or __nv_bfloat162 (bfloat16) loads and stores, with the arithmetic done on float2/
float4 values by our own small helpers (codegen_vector.py).

A loop is vectorized in groups of the vector width (4 floats, or 2 halves/bfloat16s; a float32
loop of 2 or 6 iterations uses float2); other extents, integer or double stores, masked
accesses and values with no vector form (comparisons, selects, narrowing casts) keep the loop
scalar, saying why in Kernel IR. Inside a vectorized loop a contiguous access whose first
element is provably a multiple of the width is one vector access (global arguments are 256-byte
aligned, and the renderer aligns the shared and local buffers it accesses so); every other
access (strided, unaligned, a gather) is per-lane scalar code: never a gather or masked load.
The guard hoisting and lane rewriting are the CPU's (kernel/vectorize.py), given CUDA_LANES.
"""
from __future__ import annotations

from ...expr.functor import children
from ...expr.nodes import Binary, Broadcast, Call, Cast, Const, Expr, Load, Ramp
from ...expr.linear import is_multiple
from ...kernel.vectorize import LanePolicy, Scalarize, Vectorizer
from ...loop.functor import stmt_exprs, walk_stmts
from ...loop.nodes import For, Let, Stmt, Store

# element type of the stored values -> vector widths, widest first
WIDTHS = {"float32": (4, 2), "float16": (2,), "bfloat16": (2,)}
VECTOR_OPS = ("add", "sub", "mul", "div", "min", "max")
# math functions with a float2/float4 form in the vector prelude (codegen_vector.py)
VECTOR_MATH = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "abs", "floor", "ceil", "round", "trunc", "exp2",
               "log2", "sin", "cos", "sigmoid", "pow", "neg")


def vector_access(index: Expr, lanes: int) -> bool:
    """Whether an access at a (vector) index is one aligned vector access: a contiguous ramp
    starting at a multiple of the lanes."""
    return (isinstance(index, Ramp) and isinstance(index.stride, Const) and index.stride.value == 1
            and index.lanes == lanes and is_multiple(index.base, lanes))


def _check_value(e: Expr, seen: set) -> None:
    """Raise Scalarize unless every vector node of a stored value has a CUDA vector form (the
    indices of loads are addressing, rendered lane by lane where they are not one vector access)."""
    if id(e) in seen or e.dtype.lanes == 1:
        return
    seen.add(id(e))
    if isinstance(e, Load):
        if e.predicate is not None:
            raise Scalarize(f"a masked load of {e.buffer.name} (CUDA C has no masked vector loads)")
        if str(e.buffer.dtype) not in WIDTHS:
            raise Scalarize(f"it loads {e.buffer.dtype} values, which have no CUDA vector type here")
        return
    if isinstance(e, Broadcast):
        return
    if not e.dtype.is_float:
        raise Scalarize(f"'{type(e).__name__}' on {e.dtype} vectors has no CUDA vector form")
    if isinstance(e, Cast) and not (e.value.dtype.is_float and e.dtype.bits >= 32 and e.value.dtype.bits <= 32):
        raise Scalarize(f"the cast to {e.dtype} on vectors has no CUDA vector form here")
    if isinstance(e, Binary) and e.op not in VECTOR_OPS or isinstance(e, Call) and e.name not in VECTOR_MATH \
            or not isinstance(e, (Binary, Call, Cast)):
        raise Scalarize(f"'{type(e).__name__}' ({getattr(e, 'op', getattr(e, 'name', ''))}) on vectors has "
                        "no CUDA vector form here")
    for c in children(e):
        _check_value(c, seen)


def check_vector_body(s: Stmt) -> None:
    """Raise Scalarize unless the vectorized body renders as CUDA vector code."""
    for x in walk_stmts(s):
        if isinstance(x, Let) and x.var.dtype.lanes > 1:
            raise Scalarize("a vector-valued let (tuple reduction) has no CUDA vector form")
        if isinstance(x, Store) and x.value.dtype.lanes > 1:
            if x.predicate is not None:
                raise Scalarize(f"a masked store to {x.buffer.name} (CUDA C has no masked vector stores)")
            if str(x.buffer.dtype) not in WIDTHS:
                raise Scalarize(f"it stores {x.buffer.dtype} values, which have no CUDA vector type here")
            _check_value(x.value, set())
        for e in stmt_exprs(x):
            if e.dtype.lanes > 1 and not isinstance(x, Store):
                raise Scalarize("a condition that differs between lanes")


def lanes(loop: For) -> int:
    """CUDA's vector width for a vectorized loop: 4 or 2 floats, 2 halves or bfloat16s; the loop
    runs in groups of it (LanePolicy.lanes)."""
    if not isinstance(loop.extent, int):
        raise Scalarize("its extent is symbolic (a CUDA vector has 2 or 4 lanes)")
    stored = {str(x.buffer.dtype) for x in walk_stmts(loop.body) if isinstance(x, Store)}
    if len(stored) != 1 or next(iter(stored)) not in WIDTHS:
        raise Scalarize(f"it stores {', '.join(sorted(stored)) or 'nothing'}; CUDA vector types here are "
                        "float4/float2, __half2 and __nv_bfloat162")
    widths = [w for w in WIDTHS[stored.pop()] if loop.extent % w == 0]
    if not widths:
        raise Scalarize(f"its extent {loop.extent} is not a multiple of a CUDA vector width")
    return widths[0]


# CUDA's lane policy: its widths, its vector forms, and aligned ramps folded (the index arithmetic
# of a fused or split axis under a vectorized loop, see LaneRewriter.aligned_block)
CUDA_LANES = LanePolicy(lanes, check_vector_body, aligned_blocks=True)


def cuda_vectorize_loops(body: Stmt) -> Stmt:
    return Vectorizer(CUDA_LANES).visit(body)
