"""Loop IR: every stage as a plain loop nest over its whole domain, in dataflow order,
with inlined stages substituted: what the program computes, before any schedule."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from ..tensor.op import Tensor
from ..tile.bound import infer_regions
from ..verify import check_func
from .build import build_func, full_region
from .names import unique_loop_names
from .nodes import Func
from .plan import plain_snapshot, split_size_args
from .scan import has_scan
from .simplify import simplify_func


def lower_to_loop_ir(schedule, args: Sequence[Tensor], name: Optional[str] = None) -> Func:
    args, size_args = split_size_args(args)
    program = plain_snapshot(schedule, args, name)
    regions = {p.name: full_region(p) for p in program.plans if not p.is_input}
    if has_scan(program):      # a scan's cell computes one step's region per iteration
        regions = infer_regions(program)
    func = unique_loop_names(simplify_func(build_func(program, regions)))
    return check_func(replace(func, size_args=size_args), "Loop")
