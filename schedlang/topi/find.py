"""How the schedules find an algorithm's stages: through `op.input_tensors`, as TVM's topi
schedules do, with a ValueError naming the schedule when the tensor is not what it expects."""
from __future__ import annotations

from typing import List

from ..tensor.op import ComputeOp, PlaceholderOp


def require(ok: bool, who: str, problem: str) -> None:
    if not ok:
        raise ValueError(f"{who}: {problem}")


def compute_inputs(t, ndim: int, who: str, what: str) -> List:
    """The computed (not placeholder) inputs of t with ndim dimensions; exactly one expected."""
    return _inputs(t, ComputeOp, ndim, who, what)


def placeholder_inputs(t, ndim: int, who: str, what: str) -> List:
    """The placeholder inputs of t with ndim dimensions; exactly one expected."""
    return _inputs(t, PlaceholderOp, ndim, who, what)


def operands(C, who: str) -> List:
    """The two tensors a matmul's output reads (A, B), in the order it reads them."""
    found = list(C.op.input_tensors) if isinstance(C.op, ComputeOp) else []
    require(len(found) == 2 and bool(C.op.reduce_axis), who, f"{C.name} is not a matmul's output (two inputs, a reduction)")
    return found


def upstream_computes(out) -> List:
    """Every compute stage that `out` reads, directly or not, producers first."""
    order, seen = [], set()

    def visit(t):
        for x in t.op.input_tensors:
            if isinstance(x.op, ComputeOp) and x.op not in seen:
                seen.add(x.op)
                visit(x)
                order.append(x)
    visit(out)
    return order


def _inputs(t, kind, ndim: int, who: str, what: str) -> List:
    found = [x for x in t.op.input_tensors if isinstance(x.op, kind) and x.ndim == ndim] \
        if isinstance(t.op, ComputeOp) else []
    require(len(found) == 1, who, f"cannot find {what} among the inputs of {t.name}")
    return found
