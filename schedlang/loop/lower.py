"""Loop IR: every stage as a plain loop nest over its whole domain, in dataflow order,
with inlined stages substituted: what the program computes, before any schedule."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from ..tensor.op import Tensor
from ..verify import check_func
from .build import build_func, full_region
from .nodes import Func
from .plan import snapshot, split_size_args
from .scan import has_scan


def lower_to_loop_ir(schedule, args: Sequence[Tensor], name: Optional[str] = None) -> Func:
    args, size_args = split_size_args(args)
    program = snapshot(schedule, args, name, plain=True)
    regions = {p.name: full_region(p) for p in program.plans if not p.is_input}
    if has_scan(program):      # a scan's cell computes one step's region per iteration
        from ..tile.bound import infer_regions
        regions = infer_regions(program)
    return check_func(replace(build_func(program, regions), size_args=size_args), "Loop")
