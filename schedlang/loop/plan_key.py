"""PlanKey: keys of a nest's stage plans up to a renaming (kernel/dedup.py's AlphaKey, extended
to plans), so that equal nests of a program (a model's repeated layers) are lowered once:
their regions (tile/shared_regions.py) and their loop nests (loop/shared_nests.py)."""
from __future__ import annotations

import dataclasses
from typing import Dict, List

from ..expr.nodes import Buffer, Expr
from ..kernel.dedup import AlphaKey
from ..tensor.axis import IterVar
from ..tensor.op import Operation, Tensor
from ..tensor.reduce import CommReducer
from .nodes import Stmt


class PlanKey(AlphaKey):
    """AlphaKey over stage plans: axes numbered like variables, the nest's own operations by
    their place in it, other operations (what the nest reads) numbered by first appearance, with their shapes
    and dtypes."""

    def __init__(self, table: Dict[tuple, int], place: Dict[int, int], plan_of_op):
        super().__init__(table)
        self._place = place              # id(plan) -> its place in the nest
        self._plan_of_op = plan_of_op
        self._axes: Dict[int, int] = {}
        self._ops: Dict[int, int] = {}
        self.ops: list = []              # the other operations, in numbering order

    def key(self, x):
        if isinstance(x, (Expr, Stmt)) or x is None or isinstance(x, (int, str, tuple)):
            return super().key(x)        # most of what a plan holds
        if isinstance(x, IterVar):
            n = self._axes.get(id(x))
            if n is None:
                n = self._axes[id(x)] = len(self._axes)
                return ("axis", n, self.key(x.var), self.key(x.dom.min), self.key(x.dom.extent), x.kind, x.thread_tag)
            return ("axis", n)
        if isinstance(x, Tensor):
            return ("tensor", self.key(x.op), x.value_index)
        if isinstance(x, Operation):
            return self._op(x)
        if isinstance(x, CommReducer):
            return ("reducer", x.name, self.key(x.lhs), self.key(x.rhs), self.key(x.result), self.key(x.identity))
        if (dataclasses.is_dataclass(x) and not isinstance(x, (type, Buffer))
                and not getattr(x, "__dataclass_params__").eq):
            # relations (split, fuse): compared field by field, their axes numbered
            return (type(x).__name__,) + tuple(self.key(getattr(x, f.name)) for f in dataclasses.fields(x))
        return super().key(x)

    def _op(self, op: Operation):
        plan = self._plan_of_op.get(op)
        if plan is not None and id(plan) in self._place:
            return ("member", self._place[id(plan)])
        n = self._ops.get(id(op))
        if n is not None:
            return ("op", n)
        n = self._ops[id(op)] = len(self._ops)
        self.ops.append(op)
        return ("op", n) + tuple(
            (self.key(tuple(op.output_shape(i))), op.output_dtype(i)) for i in range(op.num_outputs))


def plan_key(keyer: PlanKey, plan, place_of_name: Dict[str, int]) -> tuple:
    """The key of one stage plan of a nest (its name left out; its attach stage by place)."""
    op = plan.op
    return (keyer.key(op.axis), keyer.key(op.bodies), op.tag, keyer.key(op.attrs),
            keyer.key(plan.leaves), keyer.key(plan.relations), keyer.key(plan.annotations),
            keyer.key(plan.pragmas), plan.attach_type, place_of_name.get(plan.attach_stage),
            keyer.key(plan.attach_ivar), plan.scope, keyer.key(plan.storage_aligns), plan.is_arg,
            keyer.key(plan.store_predicate), plan.double_buffer, plan.pipeline_stages)


def nests(program) -> Dict[str, List]:
    """Root stage name -> the plans of its nest: it and the stages computed at its loops, at
    any depth, in plan order (inputs and inlined stages are in none)."""
    by_name = program.by_name
    out: Dict[str, List] = {}
    for plan in program.plans:
        if plan.is_input:
            continue
        root = plan
        for _ in range(len(by_name)):
            if root is None or root.attach_type != "at":
                break
            root = by_name.get(root.attach_stage)
        if root is not None and root.attach_type == "root":
            out.setdefault(root.name, []).append(plan)
    return out
