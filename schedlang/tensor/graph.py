"""The dataflow graph of operations: topological order and consumers."""
from __future__ import annotations

from typing import Dict, List, Sequence

from .op import Operation


def post_order(outputs: Sequence[Operation]) -> List[Operation]:
    """All operations the outputs depend on, producers before consumers (deterministic)."""
    order: List[Operation] = []
    seen: Dict[Operation, None] = {}
    # Iterative: a model of a few hundred layers chains thousands of ops, deeper than
    # Python's recursion limit. Each entry is an op and an iterator over its inputs.
    for root in outputs:
        if root in seen:
            continue
        seen[root] = None
        stack = [(root, iter(root.input_tensors))]
        while stack:
            op, pending = stack[-1]
            for t in pending:
                if t.op not in seen:
                    seen[t.op] = None
                    stack.append((t.op, iter(t.op.input_tensors)))
                    break
            else:
                stack.pop()
                order.append(op)
    return order


def consumers(ops: Sequence[Operation]) -> Dict[Operation, List[Operation]]:
    """For each operation, the operations in ops that read it."""
    readers: Dict[Operation, List[Operation]] = {op: [] for op in ops}
    for op in ops:
        for t in op.input_tensors:
            if t.op in readers and op not in readers[t.op]:
                readers[t.op].append(op)
    return readers
