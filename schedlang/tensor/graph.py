"""The dataflow graph of operations: topological order and consumers."""
from __future__ import annotations

from typing import Dict, List, Sequence

from .op import Operation


def post_order(outputs: Sequence[Operation]) -> List[Operation]:
    """All operations the outputs depend on, producers before consumers (deterministic)."""
    order: List[Operation] = []
    seen: Dict[Operation, None] = {}

    def visit(op: Operation):
        if op in seen:
            return
        seen[op] = None
        # Iterative for deep graphs would be nicer; real programs are a few hundred ops at most.
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for op in outputs:
        visit(op)
    return order


def consumers(ops: Sequence[Operation]) -> Dict[Operation, List[Operation]]:
    """For each operation, the operations in ops that read it."""
    readers: Dict[Operation, List[Operation]] = {op: [] for op in ops}
    for op in ops:
        for t in op.input_tensors:
            if t.op in readers and op not in readers[t.op]:
                readers[t.op].append(op)
    return readers
