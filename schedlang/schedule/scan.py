"""How a schedule treats scan and extern stages.

A scan's cell (the stages between its state placeholders / inputs and its updates, the
updates included) is computed inside the scan loop: each stage starts out computed at
the scan axis, and may move only to loops that are themselves inside the scan loop. The
init stages store into the scan's result; the updates' first axis is the scan axis.
"""
from __future__ import annotations

from typing import List, Optional

from ..errors import ScheduleError
from ..tensor.extern import ExternOp
from ..tensor.scan import ScanOp

SCAN_AXIS_HINT = ("the scan axis runs serially, each step reading what the step before wrote; schedule the "
                  "update stage's other axes (split/vectorize/parallel), or compute_at the cell's stages at "
                  "s[scan].op.scan_axis")


def cell_stages(schedule, scan_stage) -> List:
    """The stages computed per step of a scan (its cell, updates included), in stage order."""
    cell = [schedule[op] for op in scan_stage.op.cell_ops()]
    return [st for st in schedule.stages if any(st is c for c in cell)]


def attach_cells(schedule) -> None:
    """Put every scan's cell at its scan axis (done once, when the schedule is created)."""
    for st in schedule.scan_stages:
        if isinstance(st.op, ScanOp):
            for cell in cell_stages(schedule, st):
                cell.attach_type, cell.attach_stage, cell.attach_ivar = "at", st, st.op.scan_axis


def scan_of(stage) -> Optional[object]:
    """The scan stage whose cell holds stage (None outside any scan)."""
    for st in stage.schedule.scan_stages:
        if isinstance(st.op, ScanOp) and any(c is stage for c in cell_stages(stage.schedule, st)):
            return st
    return None


def update_index(stage) -> Optional[int]:
    """Which state stage updates (None if it is no scan's update)."""
    return _state_index(stage, "update")


def init_index(stage) -> Optional[int]:
    """Which state stage initialises (None if it is no scan's init)."""
    return _state_index(stage, "init")


def _state_index(stage, role: str) -> Optional[int]:
    for st in stage.schedule.scan_stages:
        if isinstance(st.op, ScanOp):
            for k, t in enumerate(getattr(st.op, role)):
                if stage.schedule[t.op] is stage:
                    return k
    return None


def require_loops(stage, primitive: str, axis=None) -> None:
    """Scan and extern stages have no loops a primitive could change."""
    name = getattr(axis, "name", None)
    if isinstance(stage.op, ScanOp):
        raise ScheduleError(primitive, stage.name, "is a scan: its only loop is the scan axis, which must stay a "
                            "serial loop", axis=name, hint=SCAN_AXIS_HINT)
    if isinstance(stage.op, ExternOp):
        raise ScheduleError(primitive, stage.name, "is an extern stage: a call of an opaque function, with no "
                            "loops to transform", axis=name,
                            hint="schedule the stages that read or feed it instead")


def check_scan_leaf(stage, primitive: str, ivar) -> None:
    """The first axis of a scan update is the scan axis: it cannot be transformed."""
    axes = getattr(stage.op, "axis", ())
    # the cheap test first: update_index looks through every scan of the schedule
    if axes and ivar is axes[0] and update_index(stage) is not None:
        raise ScheduleError(primitive, stage.name, "the axis is the scan axis of the update, which runs one row "
                            "per step of the scan loop", axis=ivar.name,
                            choices=[a.name for a in stage.leaf_iter_vars if a is not ivar], hint=SCAN_AXIS_HINT)


def check_placement(stage, primitive: str, parent=None, ivar=None) -> None:
    """A cell stage stays inside its scan loop; init and update stages stay where the scan puts them."""
    owner = scan_of(stage)
    if owner is None:
        if init_index(stage) is not None:
            raise ScheduleError(primitive, stage.name, "is the init of a scan and stores into the scan's result",
                                hint="schedule its loops (split/vectorize/parallel); it is computed before the scan")
        return
    if update_index(stage) is not None:
        raise ScheduleError(primitive, stage.name, f"is the update of scan '{owner.name}', computed at its scan "
                            "axis", hint=SCAN_AXIS_HINT)
    inside = parent is owner or (parent is not None and scan_of(parent) is owner)
    if primitive != "compute_at" or not inside:
        raise ScheduleError(primitive, stage.name, f"is part of the cell of scan '{owner.name}' and must be "
                            "computed inside its scan loop", axis=getattr(ivar, "name", None),
                            hint=f"compute_at it at s['{owner.name}'].op.scan_axis or at a loop of another stage "
                                 "of the cell")


def check_dataflow(primitive: str, stage, readers=()) -> None:
    """cache_read/cache_write/rfactor rewrite a stage's operation: not supported for the
    stages a scan lowers specially, nor for readers without an expression body."""
    for st in stage.schedule.scan_stages:
        if isinstance(st.op, ScanOp) and any(stage.schedule[t.op] is stage for t in st.op.state_placeholder):
            raise ScheduleError(primitive, stage.name, f"is a state placeholder of scan '{st.name}', which reads "
                                "the scan's own result", hint="cache the scan's inputs or result instead")
    owner = scan_of(stage)
    if owner is not None or init_index(stage) is not None:
        raise ScheduleError(primitive, stage.name, "is part of a scan (its init or cell); rewriting it is not "
                            "supported", hint="schedule its loops with split/vectorize/parallel/compute_at instead")
    for r in readers:
        if isinstance(r.op, (ScanOp, ExternOp)):
            kind = "a scan" if isinstance(r.op, ScanOp) else "an extern"
            raise ScheduleError(primitive, stage.name, f"reader '{r.name}' is {kind} stage, which reads "
                                "whole tensors, not a copy per element", hint="cache for compute readers only")
