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
from ..expr.nodes import (Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var)
from .graph import post_order
from .op import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead
from .extern import ExternBuffer, ExternOp
from .reduce import Reduce
from .scan import ScanOp

_CHUNK_ELEMENTS = 1 << 22   # bounds the memory of one broadcast evaluation


def _compute_dtype(dt: DType) -> np.dtype:
    return np.dtype(np.float32) if dt.is_float and dt.bits == 16 else dt.numpy


def evaluate(outputs: Sequence[Tensor], feed: Mapping[Tensor, np.ndarray]) -> List[np.ndarray]:
    """Compute outputs from input arrays given per placeholder tensor."""
    values: Dict[Operation, np.ndarray] = {}
    for tensor, array in feed.items():
        array = np.asarray(array)
        if tuple(array.shape) != tuple(tensor.shape):
            raise ValueError(f"reference: input '{tensor.name}' expects shape {tensor.shape}, got {array.shape}")
        values[tensor.op] = array.astype(tensor.dtype.numpy, copy=False)
    scans = [op for op in post_order([t.op for t in outputs]) if isinstance(op, ScanOp)]
    cells = {c for op in scans for c in op.cell_ops()}      # evaluated step by step by their scan
    cells |= {t.op for op in scans for t in op.state_placeholder}
    for op in post_order([t.op for t in outputs]):
        if op in values or op in cells:
            continue
        if isinstance(op, PlaceholderOp):
            raise ValueError(f"reference: no value given for input '{op.name}'")
        if isinstance(op, ScanOp):
            values[op] = _evaluate_scan(op, values)
        elif isinstance(op, ExternOp):
            values[op] = _evaluate_extern(op, values)
        else:
            values[op] = _evaluate_op(op, values)
    return [_value_of(values, t) for t in outputs]


def _value_of(values, tensor: Tensor) -> np.ndarray:
    data = values[tensor.op]
    return data[tensor.value_index] if isinstance(data, tuple) else data


def _evaluate_scan(op: ScanOp, values) -> tuple:
    """Rows below the scan axis from the inits, then one step at a time: every cell compute
    at row t (its first axis), in dataflow order, reading the states' rows so far."""
    states = []
    for init, state in zip(op.init, op.state_placeholder):
        array = np.zeros(state.shape, dtype=state.dtype.numpy)
        array[:init.shape[0]] = values[init.op]
        values[state.op] = array
        states.append(array)
    cells = op.cell_ops()
    for c in cells:
        values[c] = np.zeros(c.shape, dtype=c.dtype.numpy)
    for t in range(op.init_rows, op.shape[0]):
        for c in cells:
            values[c][t:t + 1] = _evaluate_rows(c, values, t, t + 1)
        for update, array in zip(op.update, states):
            array[t] = values[update.op][t]
    return tuple(states)


def _evaluate_extern(op: ExternOp, values):
    """Call the registered function on copies of the inputs and fresh outputs."""
    from ..packed import get_global_func
    outs = [np.zeros(op.output_shape(k), dtype=op.output_dtype(k).numpy) for k in range(op.num_outputs)]
    args = []
    for a in op.body.args:
        if isinstance(a, ExternBuffer):
            args.append(outs[a.index] if a.role == "out" else np.array(_value_of(values, op.inputs[a.index])))
        else:
            args.append(a)
    get_global_func(op.body.func)(*args)
    return outs[0] if op.num_outputs == 1 else tuple(outs)


def _evaluate_op(op: ComputeOp, values) -> np.ndarray:
    out = np.empty(op.shape, dtype=op.dtype.numpy)
    rows = op.shape[0]
    reduce_size = math.prod(a.dom.extent for a in op.reduce_axis) if op.reduce_axis else 1
    per_row = max(1, math.prod(op.shape[1:]) * reduce_size)
    step = max(1, _CHUNK_ELEMENTS // per_row)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        out[start:stop] = _evaluate_rows(op, values, start, stop)
    return out


def _evaluate_rows(op: ComputeOp, values, start: int, stop: int) -> np.ndarray:
    ndim = len(op.axis) + len(op.reduce_axis)
    env = {}
    for d, ax in enumerate(op.axis + op.reduce_axis):
        lo, n = (start, stop - start) if d == 0 else (ax.dom.min, ax.dom.extent)
        shape = [1] * ndim
        shape[d] = n
        env[ax.var] = np.arange(lo, lo + n, dtype=np.int64).reshape(shape)
    ev = _Evaluator(values, env)
    full = (stop - start,) + op.shape[1:]
    body = op.body
    if not isinstance(body, Reduce):
        result = ev.eval(body)
        return np.broadcast_to(np.asarray(result), full).astype(op.dtype.numpy)
    source = ev.eval(body.source)
    shape = full + tuple(a.dom.extent for a in body.axis)
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

    def eval(self, e: Expr):
        method = getattr(self, "eval_" + type(e).__name__, None)
        if method is None:
            raise TypeError(f"reference: cannot evaluate {type(e).__name__} '{e}'")
        with np.errstate(all="ignore"):
            return method(e)

    def eval_Var(self, e: Var):
        return self.env[e]

    def eval_Const(self, e: Const):
        return np.asarray(e.value, dtype=_compute_dtype(e.dtype))

    def eval_Binary(self, e: Binary):
        dt = _compute_dtype(e.dtype)
        a = np.asarray(self.eval(e.a)).astype(dt, copy=False)
        b = np.asarray(self.eval(e.b)).astype(dt, copy=False)
        if e.op in ("floordiv", "floormod"):
            b = np.where(b == 0, 1, b)   # the compiled code's result is undefined there too
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
        branch = _Evaluator(self.values, self.env, self.guarded or e.guarded)
        return np.where(cond, branch.eval(e.true_value), branch.eval(e.false_value))

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
        data = _value_of(self.values, e.tensor)
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
