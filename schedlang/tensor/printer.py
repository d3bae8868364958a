"""The Tensor IR printer: inputs, one line per compute with its primitive kind, outputs."""
from __future__ import annotations

from typing import List, Sequence

from ..expr.printer import expr_str
from .classify import classify
from .graph import post_order
from .op import ComputeOp, Operation, PlaceholderOp
from .extern import ExternOp
from .reduce import BUILTIN_REDUCERS, Reduce
from .scan import ScanOp


def type_str(op: Operation) -> str:
    dts = [op.output_dtype(i).short for i in range(op.num_outputs)]
    return f"({', '.join(map(str, op.shape))}) {', '.join(dts)}"


def _rhs(op: ComputeOp) -> str:
    """The right-hand side of a compute: its body, or for several outputs the tuple of
    bodies (one tuple reduction prints once, without the value index)."""
    if op.num_outputs == 1:
        return str(op.body)
    if isinstance(op.body, Reduce):
        return op.body.format(expr_str, with_index=False)
    return "(" + ", ".join(str(b) for b in op.bodies) + ")"


def _lhs(op: ComputeOp) -> str:
    index = ", ".join(a.name for a in op.axis)
    names = [op.output(i).name for i in range(op.num_outputs)]
    return ", ".join(f"{n}[{index}]" for n in names)


def print_tensor_ir(outputs: Sequence[Operation], ops: Sequence[Operation] = None) -> str:
    """Text of the program that computes outputs: ops in the given order (producers first),
    by default every operation the outputs depend on."""
    ops = post_order(outputs) if ops is None else list(ops)
    lines: List[str] = ["inputs:"]
    lines += [f"  {op.name}: {type_str(op)}" for op in ops if isinstance(op, PlaceholderOp)]
    reducers = {}
    for op in ops:
        if isinstance(op, ComputeOp) and isinstance(op.body, Reduce) and op.body.combiner.name not in BUILTIN_REDUCERS:
            reducers.setdefault(op.body.combiner.name, op.body.combiner)
    if reducers:
        lines += ["", "reducers:"] + [f"  {r.format()}" for r in reducers.values()]
    body = []
    for op in ops:
        if isinstance(op, (ScanOp, ExternOp)):
            body.append(_scan_or_extern_line(op))
            continue
        if not isinstance(op, ComputeOp):
            continue
        text = _rhs(op)
        lhs = _lhs(op)
        note = classify(op)
        if op.reduce_axis:
            note += " over " + ", ".join(f"{a.name} in {a.dom}" for a in op.reduce_axis)
        body.append((f"{lhs} = {text}", f"# {note} -> {type_str(op)}"))
    width = max((len(a) for a, _ in body), default=0)
    lines.append("")
    lines += [f"{a.ljust(width)}   {b}" for a, b in body]
    lines += ["", "outputs:"] + [f"  {op.name}: {type_str(op)}" for op in outputs]
    return "\n".join(lines)


def _scan_or_extern_line(op):
    """(text, note) of a scan (`s = scan(...)` over its axis) or an extern call."""
    lhs = ", ".join(op.output(k).name for k in range(op.num_outputs))
    if isinstance(op, ExternOp):
        return f"{lhs} = {op.body}", f"# {classify(op)} -> {type_str(op)}"
    names = lambda ts: ", ".join(t.name for t in ts)   # noqa: E731
    text = (f"{lhs} = scan(init=[{names(op.init)}], update=[{names(op.update)}], "
            f"state=[{names(op.state_placeholder)}])")
    return text, f"# {classify(op)} over {op.scan_axis.name} in {op.scan_axis.dom} -> {type_str(op)}"

