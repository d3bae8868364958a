"""The reference evaluator: computes any Tensor IR program with numpy, ignoring schedules.

It is the independent definition of what a program means. float16 values are computed
in float32 and rounded when stored, as the CPU target does. Reads outside a tensor are
errors, except inside the branch of an if_then_else that is not taken.
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Sequence

import numpy as np

from ..dtypes import DType
from ..expr.extent import evaluate_extent, linear_in_one
from ..expr.nodes import (Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var)
from .graph import post_order
from .op import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead
from .reduce import Reduce

_CHUNK_ELEMENTS = 1 << 22   # bounds the memory of one broadcast evaluation


def _compute_dtype(dt: DType) -> np.dtype:
    return np.dtype(np.float32) if dt.is_float and dt.bits == 16 else dt.numpy


def evaluate(outputs: Sequence[Tensor], feed: Mapping[Tensor, np.ndarray]) -> List[np.ndarray]:
    """Compute outputs from input arrays given per placeholder tensor. Symbolic sizes are read
    from the inputs' shapes (a dimension whose extent is a size variable)."""
    values: Dict[Operation, np.ndarray] = {}
    sizes: Dict[Var, int] = {}
    for tensor, array in feed.items():
        for n, got in zip(tensor.shape, np.shape(array)):
            if isinstance(n, Var):
                sizes.setdefault(n, int(got))
    for tensor, array in feed.items():          # sizes given only as a * n + b
        for n, got in zip(tensor.shape, np.shape(array)):
            form = linear_in_one(n)
            if form is not None and form[0] not in sizes:
                sizes[form[0]] = (int(got) - form[2]) // form[1]
    for tensor, array in feed.items():
        array = np.asarray(array)
        want = _shape(tensor.shape, sizes)
        if tuple(array.shape) != want:
            raise ValueError(f"reference: input '{tensor.name}' expects shape {want}, got {array.shape}")
        values[tensor.op] = array.astype(tensor.dtype.numpy, copy=False)
    for op in post_order([t.op for t in outputs]):
        if op in values:
            continue
        if isinstance(op, PlaceholderOp):
            raise ValueError(f"reference: no value given for input '{op.name}'")
        values[op] = _evaluate_op(op, values, sizes)
    return [values[t.op] for t in outputs]


def _shape(shape, sizes) -> tuple:
    return tuple(evaluate_extent(n, sizes) for n in shape)


def _evaluate_op(op: ComputeOp, values, sizes) -> np.ndarray:
    shape = _shape(op.shape, sizes)
    out = np.empty(shape, dtype=op.dtype.numpy)
    rows = shape[0]
    reduce_size = math.prod(evaluate_extent(a.dom.extent, sizes) for a in op.reduce_axis) if op.reduce_axis else 1
    per_row = max(1, math.prod(shape[1:]) * reduce_size)
    step = max(1, _CHUNK_ELEMENTS // per_row)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        out[start:stop] = _evaluate_rows(op, values, start, stop, sizes)
    return out


def _evaluate_rows(op: ComputeOp, values, start: int, stop: int, sizes) -> np.ndarray:
    ndim = len(op.axis) + len(op.reduce_axis)
    env = {v: np.int64(n) for v, n in sizes.items()}
    for d, ax in enumerate(op.axis + op.reduce_axis):
        lo, n = (start, stop - start) if d == 0 else (ax.dom.min, evaluate_extent(ax.dom.extent, sizes))
        shape = [1] * ndim
        shape[d] = n
        env[ax.var] = np.arange(lo, lo + n, dtype=np.int64).reshape(shape)
    ev = _Evaluator(values, env)
    full = (stop - start,) + _shape(op.shape, sizes)[1:]
    body = op.body
    if not isinstance(body, Reduce):
        result = ev.eval(body)
        return np.broadcast_to(np.asarray(result), full).astype(op.dtype.numpy)
    source = ev.eval(body.source)
    shape = full + tuple(evaluate_extent(a.dom.extent, sizes) for a in body.axis)
    source = np.broadcast_to(np.asarray(source, dtype=_compute_dtype(body.dtype)), shape)
    identity = ev.eval(body.combiner.identity)
    if body.condition is not None:
        cond = np.broadcast_to(ev.eval(body.condition), shape)
        source = np.where(cond, source, identity)
    axes = tuple(range(len(full), len(shape)))
    name = body.combiner.name
    if name in ("sum", "prod", "max", "min"):
        fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[name]
        result = fn(source, axis=axes)
    else:
        flat = source.reshape(full + (-1,))
        result = np.broadcast_to(np.asarray(identity, dtype=flat.dtype), full).copy()
        for r in range(flat.shape[-1]):
            sub = _Evaluator(values, {body.combiner.lhs: result, body.combiner.rhs: flat[..., r]})
            result = np.asarray(sub.eval(body.combiner.result), dtype=flat.dtype)
    return np.asarray(result).astype(op.dtype.numpy)


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "floordiv": np.floor_divide, "floormod": np.mod, "min": np.minimum, "max": np.maximum,
           "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
           "shl": np.left_shift, "shr": np.right_shift}
_COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}
_erf = np.vectorize(math.erf, otypes=[np.float64])
_CALLS = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": lambda x: _erf(x).astype(x.dtype),
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc,
    "pow": np.power, "exp2": np.exp2, "log2": np.log2, "sin": np.sin, "cos": np.cos,
}


class _Evaluator:
    """Evaluates an expression over broadcast index grids."""

    def __init__(self, values, env, guarded: bool = False):
        self.values = values
        self.env = env
        self.guarded = guarded   # inside an if_then_else branch: clamp reads instead of failing
        self.memo = {}           # id(node) -> (node, value): a shared subexpression is evaluated once
        self._twin = None

    def eval(self, e: Expr):
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        method = getattr(self, "eval_" + type(e).__name__, None)
        if method is None:
            raise TypeError(f"reference: cannot evaluate {type(e).__name__} '{e}'")
        with np.errstate(all="ignore"):
            value = method(e)
        self.memo[id(e)] = (e, value)
        return value

    def eval_Var(self, e: Var):
        return self.env[e]

    def eval_Const(self, e: Const):
        return np.asarray(e.value, dtype=_compute_dtype(e.dtype))

    def eval_Binary(self, e: Binary):
        dt = _compute_dtype(e.dtype)
        a = np.asarray(self.eval(e.a)).astype(dt, copy=False)
        b = np.asarray(self.eval(e.b)).astype(dt, copy=False)
        return _BINARY[e.op](a, b).astype(dt, copy=False)

    def eval_Compare(self, e: Compare):
        return _COMPARE[e.op](self.eval(e.a), self.eval(e.b))

    def eval_Logical(self, e: Logical):
        fn = np.logical_and if e.op == "and" else np.logical_or
        return fn(self.eval(e.a), self.eval(e.b))

    def eval_Not(self, e: Not):
        return np.logical_not(self.eval(e.a))

    def eval_Select(self, e: Select):
        cond = self.eval(e.cond)
        branch = self if self.guarded or not e.guarded else self.guarded_twin()
        return np.where(cond, branch.eval(e.true_value), branch.eval(e.false_value))

    def guarded_twin(self) -> "_Evaluator":
        """The evaluator for if_then_else branches, one per evaluator (so shared values in
        branches are evaluated once too)."""
        if self._twin is None:
            self._twin = _Evaluator(self.values, self.env, guarded=True)
        return self._twin

    def eval_Cast(self, e: Cast):
        value = np.asarray(self.eval(e.value))
        target = _compute_dtype(e.dtype)
        if e.dtype.is_int and value.dtype.kind == "f":
            value = np.trunc(value)
            value = np.where(np.isfinite(value), value, 0)
        return value.astype(target)

    def eval_Call(self, e: Call):
        args = [np.asarray(self.eval(a)).astype(_compute_dtype(e.dtype), copy=False) for a in e.args]
        return np.asarray(_CALLS[e.name](*args)).astype(_compute_dtype(e.dtype), copy=False)

    def eval_TensorRead(self, e: TensorRead):
        data = self.values[e.tensor.op]
        index = []
        for d, i in enumerate(e.indices):
            i = np.asarray(self.eval(i)).astype(np.int64)
            n = data.shape[d]
            if self.guarded:
                i = np.clip(i, 0, n - 1)
            elif i.size and (i.min() < 0 or i.max() >= n):
                raise IndexError(f"reference: '{e}' reads {e.tensor.name} out of bounds in dimension {d} "
                                 f"(index range {i.min()}..{i.max()}, extent {n}); guard it with if_then_else")
            index.append(i)
        return data[tuple(index)].astype(_compute_dtype(e.tensor.dtype), copy=False)

    def eval_Reduce(self, e: Reduce):
        raise TypeError("reference: a reduction may only be the whole body of a compute")
