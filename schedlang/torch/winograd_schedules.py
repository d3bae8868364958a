"""The default CPU schedule of a Winograd convolution's kernels (ops/conv_winograd.py): the
input transform (V, with its input tiles and row pass inside), the bgemm (M) and the kernel
reading the inverse transform's row pass Y (the result with its fused epilogue, NCHW or
NCHWc), each by topi/winograd.py's schedule of that stage. fuse.py keeps the tagged stages
(never inlined); D, T and Y are placed inside the kernel that reads them."""
from __future__ import annotations

from typing import Optional

from ..topi import winograd as wg
from ..tensor.reduce import Reduce


def winograd_rows(s, st) -> Optional[object]:
    """The Y stage (inverse transform's row pass) that stage st reads, directly or through
    inlined stages (the convolution's result with its bias, inlined into a ReLU), or None."""
    found = _rows_read(s, st)
    return found[0] if len(found) == 1 else None


def _rows_read(s, st) -> list:
    """The Y stages st reads, directly or through inlined stages."""
    found, stack, seen = [], [st], set()
    while stack:
        for i in s.inputs_of(stack.pop()):
            if getattr(i.op, "tag", "") == wg.TAG_Y and i not in found:
                found.append(i)
            elif i.attach_type == "inline" and i not in seen:
                seen.add(i)
                stack.append(i)
    return found


def is_winograd_kernel(s, group) -> bool:
    """The kernel is a Winograd stage's or reads a Winograd result at its own pixels (its
    epilogue: places_rows)."""
    return getattr(group.anchor.op, "tag", "") in wg.TAGS or places_rows(s, group.anchor)


def places_rows(s, st) -> bool:
    """st reads one Winograd row pass Y (winograd_rows) and computes it inside its loops: an
    element-wise stage of 4 or 5 axes (NCHW, NCHWc) read by the output tile (schedule_inverse),
    Y's only reader. A reduction reading a result (a pooling of the last layer), a stage
    reading two (the sum of two Winograd convolutions), or a Y two kernels read (a
    pre-activation ResNet's residual stream: the next block's batch norm and ReLU, and the
    residual add after it) leaves Y a kernel of its own (schedule_rows)."""
    if isinstance(st.op.body, Reduce) or len(st.op.axis) not in (4, 5):
        return False
    y = winograd_rows(s, st)
    return y is not None and all(other is st for other in s.stages if other.attach_type != "inline"
                                 and hasattr(other.op, "body") and y in _rows_read(s, other))


def _placed(s, y) -> bool:
    """Some kernel computes Y inside its loops (places_rows)."""
    return any(st.attach_type != "inline" and places_rows(s, st) and winograd_rows(s, st) is y for st in s.stages
               if getattr(st.op, "tag", "") not in wg.TAGS and hasattr(st.op, "body"))


def placed_stage(group) -> bool:
    """The kernel is a Winograd stage its reader's schedule computes inside it (D, T, Y): not a
    kernel of its own (nor a tuning task: kernel_tasks.py)."""
    return getattr(group.anchor.op, "tag", "") in (wg.TAG_D, wg.TAG_T, wg.TAG_Y)


def placed_inside(s, group) -> list:
    """The Winograd stages the kernel's schedule computes inside it (placed_stage): the input
    tiles D and row pass T of an input transform V, the inverse's row pass Y of the kernel
    reading it; so they are part of its tuning task (kernel_tasks._members)."""
    tag = getattr(group.anchor.op, "tag", "")
    if tag == wg.TAG_V:
        (t,) = [i for i in s.inputs_of(group.anchor) if getattr(i.op, "tag", "") == wg.TAG_T]
        return [t] + [i for i in s.inputs_of(t) if getattr(i.op, "tag", "") == wg.TAG_D]
    y = winograd_rows(s, group.anchor) if tag not in wg.TAGS and places_rows(s, group.anchor) else None
    return [y] if y is not None else []


def schedule_winograd_group(s, group, target, schedule_group) -> None:
    """Schedule the kernel (is_winograd_kernel); schedule_group (schedules.py) schedules what
    is not Winograd's: reductions fusion attached to the epilogue (a 1x1 shortcut of a residual
    add) become kernels of their own. A Y no kernel places (places_rows: read by a reduction,
    or beside another Y) is a kernel of its own (topi.winograd.schedule_rows)."""
    from .ops.conv_winograd import bgemm_tile
    from .schedules import lanes
    anchor = group.anchor
    tag = getattr(anchor.op, "tag", "")
    if tag == wg.TAG_V:
        return wg.schedule_input_transform(s, anchor.op.output(0), lanes(target, anchor))
    if tag == wg.TAG_M:
        return wg.schedule_bgemm(s, anchor.op.output(0), bgemm_tile(target)[0])
    if tag == wg.TAG_Y and not _placed(s, anchor):
        return wg.schedule_rows(s, anchor.op.output(0), lanes(target, anchor))
    if tag in wg.TAGS:
        return None                      # D, T, Y: placed by their reader's schedule
    y = winograd_rows(s, anchor)
    for st in group.attached:
        schedule_group(s, type(group)(st), target)
    wg.schedule_inverse(s, anchor.op.output(0), y.op.output(0))
