"""How a stage's loops derive from its root axes: split and fuse relations, and the
static extents and root-index expressions they imply."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

from ..expr.extent import Extent, ceil_div
from ..expr.nodes import Const, Expr, binary
from ..expr.simplify import simplify
from ..tensor.axis import REDUCE, IterVar


@dataclass(frozen=True, eq=False)
class SplitRel:
    """parent = outer * inner_extent + inner."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: Optional[int]
    nparts: Optional[int]


@dataclass(frozen=True, eq=False)
class FuseRel:
    """fused enumerates the axes row-major: axes[0] outermost."""

    axes: Tuple[IterVar, ...]
    fused: IterVar


def mul_extents(a: Extent, b: Extent) -> Extent:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return simplify(binary("mul", a, b))


@dataclass(frozen=True, eq=False)
class SingletonRel:
    """A loop of one iteration that no root axis derives from (TVM's fuse() of no axes)."""

    ivar: IterVar


def split_extents(parent_extent: Extent, factor: Optional[int], nparts: Optional[int]) -> Tuple[Extent, Extent]:
    """(outer, inner) extents of a split of an axis of parent_extent iterations."""
    if factor is not None:
        return ceil_div(parent_extent, factor), factor
    inner = ceil_div(parent_extent, nparts)
    return nparts, inner


def split_overshoots(rel: SplitRel, ext: Mapping[IterVar, Extent]) -> bool:
    """Whether the split's loops run past its parent's extent (a tail that needs a guard)."""
    outer, inner, parent = ext[rel.outer], ext[rel.inner], ext[rel.parent]
    if isinstance(outer, int) and isinstance(inner, int) and isinstance(parent, int):
        return outer * inner > parent
    diff = simplify(binary("sub", binary("mul", outer, inner), parent))
    return not (isinstance(diff, Const) and diff.value <= 0)


def pass_down_extents(root_extents: Mapping[IterVar, Extent], relations: Sequence) -> Dict[IterVar, Extent]:
    """Extents of every axis, given the extents of the root axes."""
    ext: Dict[IterVar, Extent] = dict(root_extents)
    for rel in relations:
        if isinstance(rel, SplitRel):
            ext[rel.outer], ext[rel.inner] = split_extents(ext[rel.parent], rel.factor, rel.nparts)
        elif isinstance(rel, SingletonRel):
            ext[rel.ivar] = 1
        elif all(isinstance(ext[a], int) for a in rel.axes):
            ext[rel.fused] = math.prod(ext[a] for a in rel.axes)
        else:
            total = ext[rel.axes[0]]
            for a in rel.axes[1:]:
                total = mul_extents(total, ext[a])
            ext[rel.fused] = total
    return ext


def pass_up_values(leaf_values: Mapping[IterVar, Expr], relations: Sequence,
                   extents: Mapping[IterVar, int], stop=frozenset()) -> Dict[IterVar, Expr]:
    """The value of every axis (down to the roots, 0-based) in terms of the leaf loop values.
    Axes in stop keep the value given for them in leaf_values."""
    value: Dict[IterVar, Expr] = dict(leaf_values)
    for rel in reversed(relations):
        if isinstance(rel, SingletonRel) or (isinstance(rel, SplitRel) and rel.parent in stop):
            continue
        if isinstance(rel, SplitRel):
            inner_ext = extents[rel.inner]
            value[rel.parent] = binary("add", binary("mul", value[rel.outer], _extent_expr(inner_ext, value[rel.outer])),
                                       value[rel.inner])
        else:
            fused = value[rel.fused]
            stride = 1
            for a in reversed(rel.axes):
                part = fused if _is_one(stride) else binary("floordiv", fused, _extent_expr(stride, fused))
                if a is not rel.axes[0]:
                    part = binary("floormod", part, _extent_expr(extents[a], fused))
                value[a] = part
                stride = mul_extents(stride, extents[a])
    return value


def _extent_expr(extent: Extent, like: Expr) -> Expr:
    return Const(extent, like.dtype) if isinstance(extent, int) else extent


def _is_one(extent: Extent) -> bool:
    return isinstance(extent, int) and extent == 1
def pass_down_values(root_values: Mapping[IterVar, Expr], relations: Sequence,
                     extents: Mapping[IterVar, int]) -> Dict[IterVar, Expr]:
    """The value of every derived axis in terms of the root axes' values (TVM's
    PassDownIndex): a split's outer is parent // inner_extent and its inner parent %
    inner_extent; a fused axis enumerates its axes row-major; a singleton is 0."""
    value: Dict[IterVar, Expr] = dict(root_values)
    for rel in relations:
        if isinstance(rel, SplitRel):
            f = _extent_expr(extents[rel.inner], value[rel.parent])
            value[rel.outer] = binary("floordiv", value[rel.parent], f)
            value[rel.inner] = binary("floormod", value[rel.parent], f)
        elif isinstance(rel, FuseRel):
            fused = value[rel.axes[0]]
            for a in rel.axes[1:]:
                fused = binary("add", binary("mul", fused, _extent_expr(extents[a], fused)), value[a])
            value[rel.fused] = fused
        else:
            value[rel.ivar] = Const(0)
    return value


def is_reduce_relation(rel) -> bool:
    """Whether a split/fuse relation derives reduction loops (fuse never mixes kinds)."""
    if isinstance(rel, SplitRel):
        return rel.parent.kind == REDUCE
    if isinstance(rel, FuseRel):
        return rel.fused.kind == REDUCE
    return False
