"""The match of a tensorized region with an intrinsic's declared compute (TVM's
MatchTensorizeBody): extents, operations, dtypes, reduction axes and index patterns.

Axes are aligned from the innermost (TVM's rule): the stage's trailing output axes are the
intrinsic's axes, the leading ones must have one iteration in the region; the same for
reduction axes. Each stage axis becomes base + the intrinsic's axis; a read's indices,
taken relative to their value where every intrinsic axis is 0 (the read's base), must be
the intrinsic's indices (tail-aligned, the leading ones 0). Inputs are matched in order of
reading: the same intrinsic input always stands for the same stage tensor.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Dict, List, Optional, Sequence, Tuple

from ..expr.equality import equal
from ..expr.functor import substitute
from ..expr.nodes import Const, Expr, Var, binary
from ..expr.simplify import simplify
from ..tensor.op import Tensor, TensorRead
from ..tensor.reduce import Reduce


@dataclass
class Match:
    intrin_vars: List[Var]                                   # the intrinsic's axes, reductions too
    input_bases: List[Optional[Tuple[Tensor, Tuple[Expr, ...]]]]   # per intrinsic input: stage tensor, base


def match_compute(plan, intrin, parts, ranges, fail) -> Match:
    """Match the stage's compute in the region (parts: root -> (loop, base, extent)) with the
    intrinsic's, or raise fail(problem) naming the first difference."""
    op, iop = plan.op, intrin.op
    sub: Dict[Var, Expr] = {}
    all_ranges = dict(ranges)
    _align("axis", list(op.axis), list(iop.axis), parts, sub, all_ranges, fail)
    s_red = list(op.body.axis) if isinstance(op.body, Reduce) else []
    i_red = list(iop.body.axis) if isinstance(iop.body, Reduce) else []
    if bool(s_red) != bool(i_red):
        which = ("the stage is a reduction and the intrinsic is not" if s_red
                 else "the intrinsic is a reduction and the stage is not")
        raise fail(f"reduction axis: {which}")
    _align("reduction axis", s_red, i_red, parts, sub, all_ranges, fail)
    m = Match([a.var for a in list(iop.axis) + i_red], [None] * len(intrin.inputs))
    cmp = _Comparer(intrin, sub, all_ranges, m, fail)
    if isinstance(op.body, Reduce):
        a, b = op.body, iop.body
        if a.combiner.name != b.combiner.name or len(a.source) != len(b.source):
            raise fail(f"op: the stage reduces with {a.combiner.name}, the intrinsic with {b.combiner.name}")
        if (a.condition is None) != (b.condition is None) or a.init or b.init:
            raise fail("op: the reductions' where= conditions or init values differ")
        for x, y in zip(a.source, b.source):
            cmp.expr(x, y)
        if a.condition is not None:
            cmp.expr(a.condition, b.condition)
    else:
        cmp.expr(op.body, iop.body)
    missing = [t.op.name for t, got in zip(intrin.inputs, m.input_bases) if got is None]
    if missing:
        raise fail(f"input: the intrinsic reads {', '.join(missing)}, which the stage's computation does not match")
    return m


def _align(what: str, s_axes: Sequence, i_axes: Sequence, parts, sub, all_ranges, fail) -> None:
    lead = len(s_axes) - len(i_axes)
    if lead < 0:
        raise fail(f"{what}: the intrinsic has {len(i_axes)} {what}s, the stage only {len(s_axes)}")
    for d, s in enumerate(s_axes):
        _, base, extent = parts[s]
        if d < lead:
            if extent != 1:
                raise fail(f"extent: {what} '{s.name}' has {extent} iterations in the region, but the intrinsic's "
                           f"{len(i_axes)} {what}(s) are matched with the innermost ones",
                           hint=f"split '{s.name}' and keep only its inner part, of the intrinsic's extent, "
                                "under the axis")
            sub[s.var] = base
            continue
        i = i_axes[d - lead]
        if extent != i.dom.extent:
            raise fail(f"extent: {what} '{s.name}' has {extent} iterations in the region; the intrinsic's {what} "
                       f"'{i.name}' has {i.dom.extent}",
                       hint=f"split '{s.name}' by factor={i.dom.extent} and tensorize above its inner loop")
        sub[s.var] = simplify(binary("add", base, i.var))
        all_ranges[i.var] = (0, i.dom.extent - 1)


class _Comparer:
    """Walks the stage's expression and the intrinsic's together; the first difference fails."""

    def __init__(self, intrin, sub, ranges, match: Match, fail):
        self.intrin, self.sub, self.ranges, self.m, self.fail = intrin, sub, ranges, match, fail
        self.zero = {v: Const(0, v.dtype) for v in match.intrin_vars}
        self.input_ops = [t.op for t in intrin.inputs]

    def norm(self, e: Expr) -> Expr:
        return simplify(substitute(e, self.sub), self.ranges)

    def expr(self, a, b) -> None:
        if isinstance(a, TensorRead) and isinstance(b, TensorRead):
            return self.read(a, b)
        if type(a) is not type(b):
            raise self.fail(f"op: the stage computes {a} where the intrinsic computes {b}")
        if a.dtype != b.dtype:
            raise self.fail(f"dtype: the stage computes {a} as {a.dtype}, the intrinsic {b} as {b.dtype}")
        if isinstance(a, Const):
            if a.value != b.value:
                raise self.fail(f"op: the stage has the constant {a} where the intrinsic has {b}")
            return
        if isinstance(a, Var):
            if not equal(self.norm(a), simplify(b, self.ranges)):
                raise self.fail(f"op: the stage uses '{a}' where the intrinsic uses '{b}'")
            return
        for f in fields(a):
            if f.name == "dtype":
                continue
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, Expr) and isinstance(y, Expr):
                self.expr(x, y)
            elif isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y) and all(
                    isinstance(v, Expr) for v in x + y):
                for v, w in zip(x, y):
                    self.expr(v, w)
            elif x != y:
                raise self.fail(f"op: the stage computes {a} where the intrinsic computes {b} ({f.name} "
                                f"{x!r} vs {y!r})")

    def read(self, a: TensorRead, b: TensorRead) -> None:
        if b.tensor.op not in self.input_ops:
            raise self.fail(f"input: the intrinsic reads '{b.tensor.name}', which is not one of its inputs")
        j = self.input_ops.index(b.tensor.op)
        if a.dtype != b.dtype:
            raise self.fail(f"dtype: the stage reads '{a.tensor.name}' of {a.dtype} where the intrinsic reads "
                            f"'{b.tensor.name}' of {b.dtype}")
        idx = [self.norm(i) for i in a.indices]
        base = tuple(simplify(substitute(i, self.zero), self.ranges) for i in idx)
        rel = [simplify(binary("sub", i, s), self.ranges) for i, s in zip(idx, base)]
        want = [simplify(i, self.ranges) for i in b.indices]
        lead = len(rel) - len(want)
        ok = lead >= 0 and all(isinstance(r, Const) and r.value == 0 for r in rel[:lead]) and all(
            equal(r, w) for r, w in zip(rel[lead:], want))
        if not ok:
            raise self.fail(f"index pattern: in the region the stage reads {a.tensor.name}[{', '.join(map(str, rel))}] "
                            f"(relative to the tile's start, in the intrinsic's axes), the intrinsic reads "
                            f"{b.tensor.name}[{', '.join(map(str, want))}]",
                            hint="reorder or pack the data so the tile is read as the intrinsic declares")
        got = self.m.input_bases[j]
        if got is None:
            self.m.input_bases[j] = (a.tensor, base)
        elif got[0].op is not a.tensor.op or got[0].value_index != a.tensor.value_index or not equal(got[1], base):
            raise self.fail(f"input: the intrinsic's input '{b.tensor.name}' stands for '{got[0].name}' and also "
                            f"for '{a.tensor.name}' (or another tile of it)")
