"""How a stage's loops derive from its root axes: split and fuse relations, and the
static extents and root-index expressions they imply."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

from ..expr.nodes import Const, Expr, binary
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


@dataclass(frozen=True, eq=False)
class SingletonRel:
    """A loop of one iteration that no root axis derives from (TVM's fuse() of no axes)."""

    ivar: IterVar


def split_extents(parent_extent: int, factor: Optional[int], nparts: Optional[int]) -> Tuple[int, int]:
    """(outer, inner) extents of a split of an axis of parent_extent iterations."""
    if factor is not None:
        return -(-parent_extent // factor), factor
    inner = -(-parent_extent // nparts)
    return nparts, inner


def pass_down_extents(root_extents: Mapping[IterVar, int], relations: Sequence) -> Dict[IterVar, int]:
    """Extents of every axis, given the extents of the root axes."""
    ext: Dict[IterVar, int] = dict(root_extents)
    for rel in relations:
        if isinstance(rel, SplitRel):
            ext[rel.outer], ext[rel.inner] = split_extents(ext[rel.parent], rel.factor, rel.nparts)
        elif isinstance(rel, SingletonRel):
            ext[rel.ivar] = 1
        else:
            ext[rel.fused] = math.prod(ext[a] for a in rel.axes)
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
            value[rel.parent] = binary("add", binary("mul", value[rel.outer], Const(inner_ext, value[rel.outer].dtype)),
                                       value[rel.inner])
        else:
            fused = value[rel.fused]
            stride = 1
            for a in reversed(rel.axes):
                part = fused if stride == 1 else binary("floordiv", fused, Const(stride, fused.dtype))
                if a is not rel.axes[0]:
                    part = binary("floormod", part, Const(extents[a], fused.dtype))
                value[a] = part
                stride *= extents[a]
    return value


def pass_down_values(root_values: Mapping[IterVar, Expr], relations: Sequence,
                     extents: Mapping[IterVar, int]) -> Dict[IterVar, Expr]:
    """The value of every derived axis in terms of the root axes' values (TVM's
    PassDownIndex): a split's outer is parent // inner_extent and its inner parent %
    inner_extent; a fused axis enumerates its axes row-major; a singleton is 0."""
    value: Dict[IterVar, Expr] = dict(root_values)
    for rel in relations:
        if isinstance(rel, SplitRel):
            f = Const(extents[rel.inner], value[rel.parent].dtype)
            value[rel.outer] = binary("floordiv", value[rel.parent], f)
            value[rel.inner] = binary("floormod", value[rel.parent], f)
        elif isinstance(rel, FuseRel):
            fused = value[rel.axes[0]]
            for a in rel.axes[1:]:
                fused = binary("add", binary("mul", fused, Const(extents[a], fused.dtype)), value[a])
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
