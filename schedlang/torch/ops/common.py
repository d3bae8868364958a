"""Helpers shared by the lowerings: computes with readable axis names, torch broadcasting,
dims and symbolic extents."""
from __future__ import annotations

import inspect
from typing import Callable, List, Sequence

import schedlang as sl
from schedlang.expr.equality import equal
from schedlang.expr.nodes import Expr
from schedlang.expr.simplify import simplify

from .registry import NeedsStaticShape, Unsupported

_NAMES = "ijklmn"


# Ops lowered in gather form (each output element searching an index: histc, scatter)
# compare at most this many pairs; past it they run in torch, whose loop is one pass
GATHER_MAX_COMPARES = 1 << 26


def axis_names(ndim: int) -> List[str]:
    """i, j, k ... as the seed's Tensor IR; i0, i1 ... past six dimensions."""
    return list(_NAMES[:ndim]) if ndim <= len(_NAMES) else [f"i{d}" for d in range(ndim)]


def compute(shape: Sequence, fcompute: Callable, name: str, tag: str = "", attrs=None) -> sl.Tensor:
    """sl.compute(shape, fcompute, name, tag, attrs) where fcompute takes the axes as one list."""
    names = axis_names(len(shape))

    def body(*axes):
        return fcompute(list(axes))
    body.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    return sl.compute(tuple(shape), body, name=name, tag=tag, attrs=attrs)


def cpu_layouts(target) -> bool:
    """Whether target is one whose backend lays data out for the CPU's default schedules
    (prepacks_weights: packed Linear panels, blocked convolutions, padded products)."""
    return isinstance(target, sl.Target) and sl.get_backend(target.kind).prepacks_weights


def same_extent(a, b) -> bool:
    """Whether two extents (ints or symbolic expressions) are known to be equal."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int) or isinstance(b, int):
        a, b = sl.const(a) if isinstance(a, int) else a, sl.const(b) if isinstance(b, int) else b
    return a is b or equal(simplify(a - b), sl.const(0, (a - b).dtype))


def mismatch(extents: Sequence, message: str) -> Exception:
    """The error for extents that must be equal and are not known to be: a ValueError when
    they are numbers; NeedsStaticShape when one is a size expression (torch's trace checked
    them, so with the sizes known they agree; equal expressions may not simplify to one)."""
    if all(isinstance(e, int) for e in extents):
        return ValueError(message)
    return NeedsStaticShape(f"{message}: not provably equal with symbolic sizes")


def is_one(extent) -> bool:
    return isinstance(extent, int) and extent == 1


def broadcast_shape(*shapes: Sequence) -> tuple:
    """torch's broadcast of shapes (aligned on the right; extent 1 stretches)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        extents = [s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0]
        chosen = 1
        for e in extents:
            if is_one(e):
                continue
            if is_one(chosen):
                chosen = e
            elif not same_extent(chosen, e):
                raise mismatch((chosen, e), f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast "
                               f"(dimension {d}: {chosen} vs {e})")
        out.append(chosen)
    return tuple(out)


def read_broadcast(t: sl.Tensor, shape: Sequence, index: Sequence) -> Expr:
    """t read at the index of a tensor of the broadcast shape (extent-1 dims read 0)."""
    if len(t.shape) == 0:
        return t[()]
    lead = len(shape) - len(t.shape)
    idx = [sl.const(0) if is_one(e) and not is_one(shape[lead + d]) else index[lead + d]
           for d, e in enumerate(t.shape)]
    return t[tuple(idx)]


def replaced(index: Sequence, dim: int, value) -> tuple:
    """index with its entry at dim replaced by value (a read along one dim of the same tensor)."""
    out = list(index)
    out[dim] = value
    return tuple(out)


def norm_dim(dim: int, ndim: int, what: str = "dim") -> int:
    """A dimension index in 0..ndim-1 from torch's possibly negative one."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{what} {dim} is out of range for a tensor of {ndim} dimensions")
    return dim % n


def static(value, what: str) -> int:
    """An int argument that must be known at compile time (Unsupported otherwise)."""
    if isinstance(value, int):
        return value
    if isinstance(value, Expr):
        v = simplify(value)
        if isinstance(v, sl.expr.nodes.Const):
            return int(v.value)
    raise NeedsStaticShape(f"{what} must be a static integer, got {value}")


def numel(shape: Sequence):
    n = 1
    for e in shape:
        n = n * e
    return n
