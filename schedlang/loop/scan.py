"""Lowering of scan and extern stages into loop nests.

A scan owns the buffers of its results. Its init stages and update stages store into
them and reads of its state placeholders load from them (StagePlan.buffer_key); the
scan stage itself is one serial loop over the scan axis, with its cell's stages (the
update last) computed at that loop. An extern stage lowers to one CallPacked statement
over whole buffers.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List

from ..errors import ScheduleError
from ..expr.nodes import Buffer
from ..schedule import scan as scan_rules
from ..tensor.extern import ExternBuffer, ExternOp
from ..tensor.op import output_name
from ..tensor.scan import ScanOp
from .nodes import CallPacked


class ScanRoles:
    """What each stage of a schedule is to its scans, found once per lowering: the scan
    whose loop computes it (its cell), and the scan result buffer it shares."""

    def __init__(self, schedule):
        self.cell_of: Dict[int, object] = {}
        self.roles: Dict[int, dict] = {}
        for st in schedule.stages:
            op = st.op
            if not isinstance(op, ScanOp):
                continue
            for cell in scan_rules.cell_stages(schedule, st):
                self.cell_of[id(cell)] = st
            for k in range(op.num_outputs):
                key = output_key(st.name, k, op.num_outputs)
                self.roles[id(schedule[op.update[k].op])] = dict(buffer_key=key, scan_update=st.name)
                for t in (op.init[k], op.state_placeholder[k]):
                    self.roles[id(schedule[t.op])] = dict(buffer_key=key)

    def scan_attach(self, stage):
        """The scan stage whose loop computes stage (part of its cell), or None."""
        return self.cell_of.get(id(stage))

    def with_roles(self, stage, plan):
        """plan, with the buffer it shares with a scan's result and its update role."""
        role = self.roles.get(id(stage))
        return replace(plan, **role) if role else plan


def output_key(stage: str, index: int, num_outputs: int) -> str:
    """The buffer name of output index of a stage (Tensor.name's rule: '<name>.v<index>'
    when the op has several outputs)."""
    return output_name(stage, index, num_outputs)


def has_scan(program) -> bool:
    return any(isinstance(p.op, ScanOp) for p in program.plans)


def extern_call(plan, program, buffers: Dict[str, Buffer]) -> CallPacked:
    """The statement of an extern stage: its call with buffer handles resolved to buffers."""
    op: ExternOp = plan.op
    args: List[object] = []
    for a in op.body.args:
        if not isinstance(a, ExternBuffer):
            args.append(a)
            continue
        if a.role == "out":
            args.append(buffers[output_key(plan.name, a.index, op.num_outputs)])
            continue
        tensor = op.inputs[a.index]
        src = program.plan_of_op.get(tensor.op)
        if src is None or src.attach_type != "root" and not src.is_input:
            raise ScheduleError("extern", plan.name, f"input '{tensor.name}' is inlined or computed at a loop, but "
                                "the extern call needs the whole tensor in a buffer",
                                hint=f"compute_root() '{tensor.name}'")
        args.append(buffers[src.buffer_key or output_key(src.name, tensor.value_index, src.op.num_outputs)])
    return CallPacked(op.body.func, tuple(args))
