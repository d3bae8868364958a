"""Classify a compute as Elementwise, Reduction or IndexMap (the three Tensor IR primitives)."""
from __future__ import annotations

from ..expr.nodes import Const, Select
from .op import ComputeOp, Operation, PlaceholderOp, TensorRead
from .extern import ExternOp
from .reduce import Reduce
from .scan import ScanOp

ELEMENTWISE, REDUCTION, INDEX_MAP, INPUT = "Elementwise", "Reduction", "IndexMap", "Input"
SCAN, EXTERN = "Scan", "Extern"


def classify(op: Operation) -> str:
    """Reduction: the body is a reduction. IndexMap: the body only moves data (a read of
    another tensor at mapped coordinates, or padding: a guarded choice of reads and
    constants). Elementwise: everything else."""
    if isinstance(op, PlaceholderOp):
        return INPUT
    if isinstance(op, ScanOp):
        return SCAN
    if isinstance(op, ExternOp):
        return EXTERN
    assert isinstance(op, ComputeOp)
    if isinstance(op.body, Reduce):
        return REDUCTION
    if _is_data_movement(op.body):
        return INDEX_MAP
    return ELEMENTWISE


def _is_data_movement(e) -> bool:
    if isinstance(e, TensorRead):
        return True
    if isinstance(e, Select):
        parts = (e.true_value, e.false_value)
        return all(isinstance(p, (TensorRead, Const)) or _is_data_movement(p) for p in parts) \
            and any(not isinstance(p, Const) for p in parts)
    return False
