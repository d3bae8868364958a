"""The Tensor IR printer: inputs, one line per compute with its primitive kind, outputs."""
from __future__ import annotations

from typing import List, Sequence

from .classify import classify
from .graph import post_order
from .op import ComputeOp, Operation, PlaceholderOp
from .reduce import BUILTIN_REDUCERS, Reduce


def type_str(op: Operation) -> str:
    return f"({', '.join(map(str, op.shape))}) {op.dtype.short}"


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
        if not isinstance(op, ComputeOp):
            continue
        text = str(op.body)
        lhs = f"{op.name}[{', '.join(a.name for a in op.axis)}]"
        note = classify(op)
        if op.reduce_axis:
            note += " over " + ", ".join(f"{a.name} in {a.dom}" for a in op.reduce_axis)
        body.append((f"{lhs} = {text}", f"# {note} -> {type_str(op)}"))
    width = max((len(a) for a, _ in body), default=0)
    lines.append("")
    lines += [f"{a.ljust(width)}   {b}" for a, b in body]
    lines += ["", "outputs:"] + [f"  {op.name}: {type_str(op)}" for op in outputs]
    return "\n".join(lines)

