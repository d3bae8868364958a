"""Tile IR: the schedule applied — split/fused/reordered loops with their kinds
(unrolled, vectorized, parallel, bound), stages computed at loops over the inferred
regions, cache stages and their buffers."""
from __future__ import annotations

from typing import Optional, Sequence

from ..loop.build import build_func
from ..loop.nodes import Func
from ..loop.plan import snapshot
from ..tensor.op import Tensor
from ..verify import check_func
from .bound import infer_regions


def lower_to_tile_ir(schedule, args: Sequence[Tensor], name: Optional[str] = None) -> Func:
    program = snapshot(schedule, args, name, plain=False)
    return check_func(build_func(program, infer_regions(program)), "Tile")
