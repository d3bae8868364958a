"""Tile IR: the schedule applied — split/fused/reordered loops with their kinds
(unrolled, vectorized, parallel, bound), stages computed at loops over the inferred
regions, cache stages and their buffers."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence, Tuple

from ..expr.nodes import Var
from ..loop.build import build_func
from ..loop.nodes import Func
from ..loop.plan import snapshot, split_size_args
from ..schedule.relations import SplitRel
from ..tensor.op import Tensor
from ..verify import check_func
from .bound import infer_regions


def lower_to_tile_ir(schedule, args: Sequence[Tensor], name: Optional[str] = None) -> Func:
    args, size_args = split_size_args(args)
    program = snapshot(schedule, args, name, plain=False)
    func = build_func(program, infer_regions(program))
    return check_func(replace(func, size_args=size_args, size_checks=symbolic_split_sizes(program)), "Tile")


def symbolic_split_sizes(program) -> Tuple[Tuple[Var, str], ...]:
    """(size variable, what it is) of every split by a symbolic factor or nparts: a call
    must give them a value of at least 1 (a split by 0 would silently compute nothing)."""
    found = []
    for plan in program.plans:
        for rel in plan.relations:
            if isinstance(rel, SplitRel):
                for what, v in (("factor", rel.factor), ("nparts", rel.nparts)):
                    if isinstance(v, Var):
                        found.append((v, f"the split {what} of {plan.name}.{rel.parent.name}"))
    return tuple(found)
