"""Iteration axes: the loops of an algorithm (data-parallel, reduction) and GPU thread axes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..dtypes import int32
from ..expr.nodes import Expr, ExprOps, Var

DATA_PAR = "data_par"
REDUCE = "reduce"
THREAD = "thread"

THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z", "vthread")


@dataclass(frozen=True)
class Range:
    """The half-open interval [min, min + extent)."""

    min: Union[int, Expr]
    extent: Union[int, Expr]

    def __str__(self) -> str:
        end = self.min + self.extent if isinstance(self.min, int) and isinstance(self.extent, int) else None
        if end is None and isinstance(self.min, int) and self.min == 0:
            return f"0..{self.extent}"
        return f"{self.min}..{end}" if end is not None else f"{self.min}..{self.min}+{self.extent}"


@dataclass(frozen=True, eq=False)
class IterVar(ExprOps):
    """An axis: a variable, its domain and its kind. Used directly inside expressions."""

    var: Var
    dom: Range
    kind: str = DATA_PAR
    thread_tag: str = ""

    __hash__ = object.__hash__

    @property
    def name(self) -> str:
        return self.var.name

    def as_expr(self) -> Var:
        return self.var

    def __str__(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom}, {self.kind})"


def axis_index(axes, ivar) -> int:
    """The position of ivar in the list of IterVars axes, as axes.index(ivar) finds it (two axes
    are equal when their variables are the same object; ValueError when it is not there).
    Without building an equality expression per axis, which made `in` and index() the most
    costly part of replaying a schedule."""
    var = getattr(ivar, "var", ivar)
    for i, a in enumerate(axes):
        if a is ivar or a.var is var:
            return i
    raise ValueError(f"{ivar} is not among the axes")


def has_axis(axes, ivar) -> bool:
    """Whether ivar is in the list of IterVars axes, as `ivar in axes` answers it (axis_index)."""
    var = getattr(ivar, "var", ivar)
    return any(a is ivar or a.var is var for a in axes)


def _integral(x):
    """An integral float bound (N / bn = 32.0) as an int, as TVM accepts it."""
    if isinstance(x, float):
        if not x.is_integer():
            raise ValueError(f"axis range bound {x!r} is not a whole number; use // for integer division")
        return int(x)
    return x


def _range_of(dom) -> Range:
    if isinstance(dom, Range):
        return dom
    if isinstance(dom, int):
        return Range(0, dom)
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        dom = tuple(_integral(x) for x in dom)
    if isinstance(dom, (tuple, list)) and len(dom) == 2 and all(isinstance(x, int) for x in dom):
        lo, hi = dom
        if hi < lo:
            raise ValueError(f"axis range ({lo}, {hi}) is empty: the end must not be below the start")
        return Range(lo, hi - lo)
    if isinstance(dom, (tuple, list)) and len(dom) == 2 and isinstance(dom[0], int) and not isinstance(dom[0], bool):
        from .op import symbolic_extent     # a symbolic end: (0, n); op.py builds on these axes
        lo, hi = dom
        extent = symbolic_extent(hi - lo if lo else hi, f"axis range ({lo}, {hi})")
        if isinstance(extent, int):
            return _range_of((lo, lo + extent))
        return Range(lo, extent)
    if isinstance(dom, ExprOps):
        return _range_of((0, dom))
    raise TypeError(f"an axis range is (begin, end) of two ints (the end may be an expression of "
                    f"sl.var / sl.size_var), got {dom!r}")


def reduce_axis(dom, name: str = "k") -> IterVar:
    """A reduction axis over dom = (begin, end), as TVM's te.reduce_axis."""
    r = _range_of(dom)
    if isinstance(r.extent, int) and r.extent <= 0:
        raise ValueError(f"reduce_axis '{name}' has an empty range {dom!r}")
    if isinstance(r.min, int) and isinstance(r.extent, int) and not -2**31 <= r.min <= r.min + r.extent - 1 < 2**31:
        raise ValueError(f"reduce_axis '{name}' over {dom!r} ({r.extent} iterations) leaves the int32 range of "
                         "loop variables; split the reduction into stages of at most 2**31 - 1 iterations")
    return IterVar(Var(name, int32), r, REDUCE)


def thread_axis(dom=None, tag: str = "", name: str = "") -> IterVar:
    """A GPU thread axis such as thread_axis("blockIdx.x"), for bind(). As in TVM, a domain may
    come first: thread_axis((0, 2), "vthread", name="vx") (the bound loop's extent is what counts)."""
    if isinstance(dom, str):            # thread_axis("threadIdx.x"[, name])
        dom, tag, name = None, dom, name or tag
    if tag not in THREAD_TAGS:
        raise ValueError(f"unknown thread tag {tag!r}; use one of {', '.join(THREAD_TAGS)}")
    if dom is not None and not (isinstance(dom, Range) or (isinstance(dom, (tuple, list)) and len(dom) == 2)):
        raise ValueError(f"thread_axis domain {dom!r} must be a (min, extent) pair")
    return IterVar(Var(name or tag, int32), Range(0, 0), THREAD, tag)
