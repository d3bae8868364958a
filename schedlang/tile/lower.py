"""Tile IR: the schedule applied — split/fused/reordered loops with their kinds
(unrolled, vectorized, parallel, bound), stages computed at loops over the inferred
regions, cache stages and their buffers.

The Tile IR passes are the same for every target (tile_passes); each takes the IR so far
and the program (the stage plans snapshotted from the schedule)."""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Optional, Sequence, Tuple

from ..expr.nodes import Var
from ..loop.build import build_func
from ..loop.names import unique_loop_names
from ..loop.nodes import Func
from ..loop.plan import scheduled_snapshot, split_size_args
from ..loop.printer import print_func
from ..loop.simplify import simplify_func
from ..schedule.relations import SplitRel
from ..tensor.op import Tensor
from ..verify import check_func, run_passes
from .bound import infer_regions


def tile_passes():
    """The Tile IR passes, in order."""
    return [
        ("infer_regions", lambda ir, program: infer_regions(program)),   # the region each stage computes
        ("build_loop_nests", lambda regions, program: build_func(program, regions)),   # stages at their loops
        ("simplify", lambda func, program: simplify_func(func)),
        ("unique_loop_names", lambda func, program: unique_loop_names(func)),   # no two loops print alike
    ]


def lower_to_tile_ir(schedule, args: Sequence[Tensor], name: Optional[str] = None, trace=None) -> Func:
    """The Tile IR function of a schedule; with a trace, the IR after each pass is recorded."""
    args, size_args = split_size_args(args)
    program = scheduled_snapshot(schedule, args, name)
    passes = [(step, partial(run, program=program)) for step, run in tile_passes()]
    func = run_passes(None, passes, trace=trace, show=_show)
    return check_func(replace(func, size_args=size_args, size_checks=symbolic_split_sizes(program)), "Tile")


def _show(ir) -> str:
    if isinstance(ir, Func):
        return print_func(ir)
    return "\n".join(f"{stage}: " + " x ".join(f"[{lo}, {lo} + {n})" for lo, n in region)   # infer_regions
                     for stage, region in ir.items())


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
