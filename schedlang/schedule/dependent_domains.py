"""Reductions over a domain that reads the stage's own axes (TVM allows reduce_axis((0, j + 1))
in compute((n,), lambda j: ...): a triangle, a prefix sum): their loops must run inside
every loop the axes they read are made of."""
from __future__ import annotations

from typing import Dict, List

from ..errors import ScheduleError
from ..expr.functor import var_set
from ..tensor.axis import IterVar
from ..tensor.op import ComputeOp
from .relations import pass_up_values


def check_loop_order(st) -> None:
    """A ScheduleError where a loop of an axis that a reduction's domain reads runs inside a
    loop of that reduction (after reorder or fuse): its extent would read a variable not yet
    bound."""
    op = st.op
    if not isinstance(op, ComputeOp):
        return
    dependent: Dict[IterVar, List[IterVar]] = {r: op.axes_read_by(r) for r in op.reduce_axis}
    dependent = {r: axes for r, axes in dependent.items() if axes}
    if not dependent:
        return
    leaves = list(st.leaf_iter_vars)
    position = {leaf.var: i for i, leaf in enumerate(leaves)}
    values = pass_up_values({leaf: leaf.var for leaf in leaves}, st.relations, st.static_extents())

    def loops_of(axis: IterVar) -> List[int]:
        return sorted(position[v] for v in var_set(values[axis]) if v in position) if axis in values else []
    for r, axes in dependent.items():
        r_loops = loops_of(r)
        if not r_loops:
            continue
        for a in axes:
            late = [p for p in loops_of(a) if p > r_loops[0]]
            if late:
                raise ScheduleError(
                    "reorder", st.name, f"loop '{leaves[late[0]].name}' of axis '{a.name}' runs inside loop "
                    f"'{leaves[r_loops[0]].name}' of reduction axis '{r.name}', whose domain {r.dom} reads "
                    f"'{a.name}' (loops: {st.loops_str()})", axis=leaves[late[0]].name,
                    hint=f"keep the loops of '{a.name}' outside those of '{r.name}'")
