"""The reference evaluator: computes any Tensor IR program with numpy, ignoring schedules.

It is the independent definition of what a program means. float16 values are computed
in float32 and rounded when stored or cast, as the CPU target does; bfloat16 values (ml_dtypes'
bfloat16 arrays) are computed in float32 and rounded to bfloat16 after every operation, as
torch's CPU kernels do. Reads outside a tensor are errors, except inside the branch of an
if_then_else that is not taken.
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Sequence

import numpy as np

from ..dtypes import DType, to_bfloat16
from ..expr.extent import evaluate_extent, linear_in_one
from ..expr.nodes import (Binary, Call, Cast, Compare, Const, Expr, Logical, Not, Select, Var)
from ..packed import get_global_func
from .graph import post_order
from .op import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead
from .extern import ExternBuffer, ExternOp
from .reduce import Reduce
from .scan import ScanOp

_CHUNK_ELEMENTS = 1 << 22   # bounds the memory of one broadcast evaluation


def _compute_dtype(dt: DType) -> np.dtype:
    """The dtype values of dt are held in: float16 as float32, bfloat16 as itself."""
    return np.dtype(np.float32) if dt.kind == "float" and dt.bits == 16 else dt.numpy


def _arith_dtype(dt: DType) -> np.dtype:
    """The dtype operations on dt compute in: float32 for float16 and bfloat16."""
    return np.dtype(np.float32) if dt.is_float and dt.bits == 16 else dt.numpy


def evaluate(outputs: Sequence[Tensor], feed: Mapping[Tensor, np.ndarray]) -> List[np.ndarray]:
    """Compute outputs from input arrays given per placeholder tensor. Symbolic sizes are read
    from the inputs' shapes (a dimension whose extent is a size variable), or given in the
    feed as {size_var: int} (as a module takes size variables listed among its arguments)."""
    values: Dict[Operation, np.ndarray] = {}
    sizes: Dict[Var, int] = {v: int(x) for v, x in feed.items() if isinstance(v, Var)}
    feed = {t: x for t, x in feed.items() if not isinstance(t, Var)}
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
        values.setdefault(tensor.op, [None] * tensor.op.num_outputs)[tensor.value_index] = \
            to_bfloat16(array) if tensor.dtype_obj.is_bfloat else array.astype(tensor.dtype_obj.numpy, copy=False)
    scans = [op for op in post_order([t.op for t in outputs]) if isinstance(op, ScanOp)]
    cells = {c for op in scans for c in op.cell_ops()}      # evaluated step by step by their scan
    cells |= {t.op for op in scans for t in op.state_placeholder}
    for op in post_order([t.op for t in outputs]):
        if op in values or op in cells:
            continue
        if isinstance(op, PlaceholderOp):
            raise ValueError(f"reference: no value given for input '{op.name}'")
        if isinstance(op, ScanOp):
            values[op] = _evaluate_scan(op, values, sizes)
        elif isinstance(op, ExternOp):
            values[op] = _evaluate_extern(op, values, sizes)
        else:
            values[op] = _evaluate_op(op, values, sizes)
    return [_value_of(values, t) for t in outputs]


def _value_of(values, tensor: Tensor) -> np.ndarray:
    """values holds, per operation, the list of its outputs' arrays."""
    return values[tensor.op][tensor.value_index]


def _evaluate_scan(op: ScanOp, values, sizes) -> List[np.ndarray]:
    """Rows below the scan axis from the inits, then one step at a time: every cell compute
    at row t (its first axis), in dataflow order, reading the states' rows so far."""
    states = []
    for init, state in zip(op.init, op.state_placeholder):
        array = np.zeros(_shape(state.shape, sizes), dtype=state.dtype_obj.numpy)
        array[:_shape(init.shape, sizes)[0]] = _value_of(values, init)
        values[state.op] = [array]
        states.append(array)
    cells = op.cell_ops()
    for c in cells:
        values[c] = [np.zeros(_shape(c.shape, sizes), dtype=c.output_dtype(i).numpy) for i in range(c.num_outputs)]
    for t in range(evaluate_extent(op.init_rows, sizes), _shape(op.shape, sizes)[0]):
        for c in cells:
            for out, part in zip(values[c], _evaluate_rows(c, values, t, t + 1, sizes)):
                out[t:t + 1] = part
        for update, array in zip(op.update, states):
            array[t] = _value_of(values, update)[t]
    return states


def _evaluate_extern(op: ExternOp, values, sizes) -> List[np.ndarray]:
    """Call the registered function on copies of the inputs and fresh outputs."""
    outs = [np.zeros(_shape(op.output_shape(k), sizes), dtype=op.output_dtype(k).numpy)
            for k in range(op.num_outputs)]
    args = []
    for a in op.body.args:
        if isinstance(a, ExternBuffer):
            args.append(outs[a.index] if a.role == "out" else np.array(_value_of(values, op.inputs[a.index])))
        else:
            args.append(a)
    get_global_func(op.body.func)(*args)
    return outs


def _shape(shape, sizes) -> tuple:
    return tuple(evaluate_extent(n, sizes) for n in shape)


def _evaluate_op(op: ComputeOp, values, sizes) -> List[np.ndarray]:
    """The arrays of every output of op."""
    shape = _shape(op.shape, sizes)
    outs = [np.empty(shape, dtype=op.output_dtype(i).numpy) for i in range(op.num_outputs)]
    rows = shape[0] if shape else 1
    reduce_size = math.prod(_largest_extent(op, a, sizes) for a in op.reduce_axis) if op.reduce_axis else 1
    per_row = max(1, math.prod(shape[1:]) * reduce_size)
    step = max(1, _CHUNK_ELEMENTS // per_row)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        for out, part in zip(outs, _evaluate_rows(op, values, start, stop, sizes)):
            if shape:
                out[start:stop] = part
            else:
                out[()] = part
    return outs


def _largest_extent(op: ComputeOp, ax, sizes) -> int:
    """The extent of reduction axis ax, the largest over op's output points where it reads
    them (sum over reduce_axis((0, j + 1)): a triangle)."""
    if not (isinstance(ax.dom.extent, Expr) and op.axes_read_by(ax)):
        return evaluate_extent(ax.dom.extent, sizes)
    env = {v: np.int64(n) for v, n in sizes.items()}
    for d, a in enumerate(op.axis):
        shape = [1] * len(op.axis)
        shape[d] = evaluate_extent(a.dom.extent, sizes)
        env[a.var] = np.arange(a.dom.min, a.dom.min + shape[d], dtype=np.int64).reshape(shape)
    extents = np.asarray(_Evaluator({}, env).eval(ax.dom.extent))
    return max(0, int(extents.max())) if extents.size else 0


def _evaluate_rows(op: ComputeOp, values, start: int, stop: int, sizes) -> List[np.ndarray]:
    ndim = len(op.axis) + len(op.reduce_axis)
    env = {v: np.int64(n) for v, n in sizes.items()}
    inside = []      # for reduction domains that read the output axes: where a point is in its domain
    for d, ax in enumerate(op.axis + op.reduce_axis):
        shape = [1] * ndim
        if d == 0 and op.axis:
            lo, n = start, stop - start
        elif d < len(op.axis) or not op.axes_read_by(ax):
            lo, n = ax.dom.min, evaluate_extent(ax.dom.extent, sizes)
        else:
            # the widest domain over these rows; each point counts the steps inside its own
            own = _Evaluator(values, env)
            lo, extent = (np.asarray(own.eval(b) if isinstance(b, Expr) else b, dtype=np.int64)
                          for b in (ax.dom.min, ax.dom.extent))
            n = max(0, int(extent.max())) if extent.size else 0
            shape[d] = n
            step = np.arange(n, dtype=np.int64).reshape(shape)
            env[ax.var] = lo + step
            inside.append(step < extent)
            continue
        shape[d] = n
        env[ax.var] = np.arange(lo, lo + n, dtype=np.int64).reshape(shape)
    # a point outside its own domain is masked out below, and may read anywhere (x[i, j - r])
    ev = _Evaluator(values, env, guarded=bool(inside), exact_vars=frozenset(env))
    shape_now = _shape(op.shape, sizes)
    full = ((stop - start,) + shape_now[1:]) if shape_now else ()
    dtypes = [op.output_dtype(i).numpy for i in range(op.num_outputs)]
    body = op.body
    if not isinstance(body, Reduce):
        if op.axis:
            ev.own_rows = (tuple(ax.var for ax in op.axis), start, stop, full)
        return [np.broadcast_to(np.asarray(ev.eval(b)), full).astype(dt, copy=False)
                for b, dt in zip(op.bodies, dtypes)]
    steps = tuple(int(np.shape(env[ax.var])[len(op.axis) + k]) for k, ax in enumerate(op.reduce_axis))
    return [np.asarray(r).astype(dt) for r, dt in zip(_reduce(body, ev, values, full, steps, inside), dtypes)]


def _reduce(body: Reduce, ev: "_Evaluator", values, full, steps, inside=()) -> List[np.ndarray]:
    """Every value of the reduction body (one array per source) over the output rows full;
    steps: each reduction axis's extent (the widest where it varies, with `inside` marking
    the points within each output point's own domain)."""
    comb = body.combiner
    shape = full + tuple(steps)
    flat_shape = full + (-1,)
    sources, identities, inits = [], [], []
    for i, src in enumerate(body.source):
        dt = _compute_dtype(src.dtype)
        sources.append(np.broadcast_to(np.asarray(ev.eval(src), dtype=dt), shape))
        identities.append(np.asarray(ev.eval(comb.identity[i]), dtype=dt))
        if body.init:
            # init reads only output axes: evaluate with the reduction axes dropped.
            value = np.broadcast_to(np.asarray(ev.eval(body.init[i]), dtype=dt), shape)
            inits.append(value[(Ellipsis,) + (0,) * len(body.axis)])
    conditions = [np.broadcast_to(m, shape) for m in inside]
    if body.condition is not None:
        conditions.append(np.broadcast_to(ev.eval(body.condition), shape))
    if conditions:
        cond = np.logical_and.reduce(conditions) if len(conditions) > 1 else conditions[0]
        sources = [np.where(cond, s, ident) for s, ident in zip(sources, identities)]
    axes = tuple(range(len(full), len(shape)))
    builtin = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}.get(comb.name)
    if comb.name in ("sum", "prod") and body.source[0].dtype.is_bfloat:
        builtin = None     # each step rounds to bfloat16: accumulate in order, as the loop does
    if builtin is not None and comb.arity == 1:
        result = builtin(sources[0], axis=axes)
        if inits:
            start = np.broadcast_to(inits[0], full)
            result = _combine(comb, values, [start], [np.asarray(result, dtype=sources[0].dtype)])[0]
        return [result]
    flats = [s.reshape(flat_shape) for s in sources]
    start = inits if inits else identities
    acc = [np.broadcast_to(np.asarray(x, dtype=f.dtype), full).copy() for x, f in zip(start, flats)]
    for r in range(flats[0].shape[-1]):
        acc = _combine(comb, values, acc, [f[..., r] for f in flats])
    return acc


def _combine(comb, values, lhs, rhs) -> List[np.ndarray]:
    env = dict(zip(comb.lhs, lhs))
    env.update(zip(comb.rhs, rhs))
    sub = _Evaluator(values, env)
    return [np.asarray(sub.eval(res), dtype=_compute_dtype(res.dtype)) for res in comb.result]


def saturating_float_to_int(value: np.ndarray, target: np.dtype) -> np.ndarray:
    """Float to integer as schedlang defines it (LLVM's fptosi.sat, Rust, Java): truncate
    toward zero, clamp to the integer dtype's range, NaN to 0."""
    info = np.iinfo(target)
    v = np.trunc(value.astype(np.float64))          # exact for float16/32/64
    low, high = float(info.min), float(info.max) + 1.0   # powers of two: exact in float64
    inside = (v >= low) & (v < high)
    out = np.where(inside, v, 0).astype(target)
    out = np.where(v >= high, np.array(info.max, target), out)
    out = np.where(v < low, np.array(info.min, target), out)          # -inf included; NaN fails every comparison: 0
    return out.astype(target)


def _truncdiv(a, b):
    q = np.floor_divide(a, b)
    return np.where((q < 0) & (q * b != a), q + 1, q).astype(a.dtype, copy=False)


def _truncmod(a, b):
    """C's %, and 0 where b is 0 (as x % 0 and the compiled code)."""
    return np.where(b == 0, 0, a - _truncdiv(a, b) * b).astype(a.dtype, copy=False)


# The operator tables, public for the other interpreters of the IR (target/simt/evaluate.py):
# the numpy function of each Binary op, Compare op and Call name.
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "truncdiv": _truncdiv, "truncmod": _truncmod,
          "floordiv": np.floor_divide, "floormod": np.mod, "min": np.minimum, "max": np.maximum,
          "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
          "shl": np.left_shift, "shr": np.right_shift}
COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}
_erf = np.vectorize(math.erf, otypes=[np.float64])
CALLS = {
    "neg": np.negative,      # expr.nodes.NEG: flips the sign bit, of zeros and NaN too
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": lambda x: _erf(x).astype(x.dtype),
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc,
    "pow": np.power, "exp2": np.exp2, "log2": np.log2, "sin": np.sin, "cos": np.cos,
    "exp10": lambda x: np.power(x.dtype.type(10), x), "log10": np.log10, "log1p": np.log1p, "tan": np.tan,
    "atan": np.arctan, "atan2": np.arctan2, "cosh": np.cosh, "sinh": np.sinh, "acos": np.arccos,
    "asin": np.arcsin, "acosh": np.arccosh, "asinh": np.arcsinh, "atanh": np.arctanh, "fmod": np.fmod,
    "hypot": np.hypot, "nextafter": np.nextafter, "copysign": np.copysign, "nearbyint": np.rint,
    "ldexp": lambda x, e: np.ldexp(x, e.astype(np.int32)),
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "popcount": lambda x: _popcount(x), "clz": lambda x: _clz(x),
}


def _round_half_away(x: np.ndarray) -> np.ndarray:
    whole = np.trunc(x)   # x - trunc(x) is exact, so the comparison is too
    return whole + np.where(np.abs(x - whole) >= 0.5, np.sign(x), 0).astype(x.dtype)


def _unsigned_view(x: np.ndarray) -> np.ndarray:
    return x.astype(x.dtype.newbyteorder("=")).view(f"u{x.dtype.itemsize}")


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(_unsigned_view(np.asarray(x))).astype(x.dtype)


def _clz(x: np.ndarray) -> np.ndarray:
    u = _unsigned_view(np.asarray(x)).astype(np.uint64)
    bits = 8 * np.asarray(x).dtype.itemsize
    length = np.zeros(u.shape, np.int64)
    for shift in range(bits):   # bit_length, one bit at a time (values are at most 64 bits)
        length = np.where(u >> np.uint64(shift) != 0, shift + 1, length)
    return (bits - length).astype(np.asarray(x).dtype)


# The libm functions call_pure_extern may name, as numpy functions: "expf" and "exp"
# are exp in float32 and float64 (the evaluator computes in the call's dtype).
_LIBM = {name: CALLS[name] for name in (
    "exp", "log", "sqrt", "tanh", "floor", "ceil", "trunc", "exp2", "log2", "sin", "cos", "exp10",
    "log10", "log1p", "tan", "atan", "atan2", "cosh", "sinh", "acos", "asin", "acosh", "asinh", "atanh",
    "fmod", "hypot", "nextafter", "copysign", "nearbyint", "ldexp")}
_LIBM.update({"pow": np.power, "fabs": np.abs, "rint": np.rint, "erf": CALLS["erf"], "expm1": np.expm1,
              "cbrt": np.cbrt, "fmin": np.fmin, "fmax": np.fmax, "round": _round_half_away})


def extern_function(symbol: str):
    """The numpy function for the libm symbol (expf, exp, powf, ...), or a ValueError."""
    base = symbol[:-1] if symbol.endswith("f") and symbol[:-1] in _LIBM else symbol
    if base not in _LIBM:
        raise ValueError(f"reference: call_pure_extern of '{symbol}', which the reference evaluator does not know; "
                         f"it knows the libm functions {', '.join(sorted(_LIBM))} (and their float versions "
                         "with an 'f' suffix)")
    return _LIBM[base]


class _Evaluator:
    """Evaluates an expression over broadcast index grids."""

    def __init__(self, values, env, guarded: bool = False, exact_vars=frozenset()):
        self.values = values
        self.env = env
        # Integer arithmetic of these variables (axes, sizes) and constants is exact, as the
        # targets make it (kernel/widen.py): no wrap before a comparison, division or cast.
        self.exact_vars = exact_vars
        self.exact_memo = {}
        self.guarded = guarded   # inside an if_then_else branch: clamp reads instead of failing
        self.memo = {}           # id(node) -> (node, value): a shared subexpression is evaluated once
        self._twin = None
        # (axes, start, stop, shape) of an elementwise op evaluated for rows start:stop: a
        # read of a tensor of that shape at exactly its axes is a slice (no gather: masks of
        # millions of elements, ops/causal_mask.py)
        self.own_rows = None

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
        if e.dtype.is_bfloat:
            return to_bfloat16(e.value)
        return np.asarray(e.value, dtype=_compute_dtype(e.dtype))

    def is_exact(self, e: Expr) -> bool:
        """Whether e is signed integer arithmetic narrower than 64 bits of axes, sizes and
        constants only (no data): computed exactly in int64 (add/sub/mul results unwrapped)."""
        return e.dtype.kind == "int" and e.dtype.bits < 64 and self.data_free(e)

    def data_free(self, e: Expr) -> bool:
        hit = self.exact_memo.get(id(e))
        if hit is None:
            if isinstance(e, Var):
                free = e in self.exact_vars
            elif isinstance(e, Binary):
                free = self.data_free(e.a) and self.data_free(e.b)
            else:
                free = isinstance(e, Const) or (isinstance(e, Cast) and self.data_free(e.value))
            hit = self.exact_memo[id(e)] = (e, free)
        return hit[1]

    def operand(self, e: Expr):
        """e's value as an operand: exact in int64, or in its arithmetic dtype."""
        dt = np.int64 if self.is_exact(e) else _arith_dtype(e.dtype)
        return np.asarray(self.eval(e)).astype(dt, copy=False)

    def eval_Binary(self, e: Binary):
        if self.is_exact(e):
            value = BINARY[e.op](self.operand(e.a), self.operand(e.b))
            modular = e.op in ("add", "sub", "mul", "bitand", "bitor", "bitxor", "shl")
            return value if modular else value.astype(_arith_dtype(e.dtype)).astype(np.int64)
        dt = _arith_dtype(e.dtype)
        a = np.asarray(self.eval(e.a)).astype(dt, copy=False)
        b = np.asarray(self.eval(e.b)).astype(dt, copy=False)
        return BINARY[e.op](a, b).astype(dt, copy=False).astype(_compute_dtype(e.dtype), copy=False)

    def eval_Compare(self, e: Compare):
        return COMPARE[e.op](self.operand(e.a), self.operand(e.b))

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
            self._twin = _Evaluator(self.values, self.env, guarded=True, exact_vars=self.exact_vars)
        return self._twin

    def eval_Cast(self, e: Cast):
        value = self.operand(e.value)
        target = _compute_dtype(e.dtype)
        if e.dtype.kind == "float" and e.dtype.bits == 16:    # rounded to half at the cast, as the targets do
            return value.astype(np.float16).astype(target)
        if e.dtype.is_int and value.dtype.kind == "f":
            return saturating_float_to_int(value, target)
        if e.dtype.is_bfloat:                                   # through float32, as torch
            return to_bfloat16(value)
        return value.astype(target)

    def eval_Call(self, e: Call):
        args = [np.asarray(self.eval(a)).astype(_arith_dtype(a.dtype), copy=False) for a in e.args]
        if e.name.startswith("extern:"):
            fn = extern_function(e.name[len("extern:"):])
            args = [a.astype(_arith_dtype(e.dtype), copy=False) for a in args]
        else:
            fn = CALLS[e.name]
        result = np.asarray(fn(*args)).astype(_arith_dtype(e.dtype), copy=False)
        return result.astype(_compute_dtype(e.dtype), copy=False)

    def eval_TensorRead(self, e: TensorRead):
        data = _value_of(self.values, e.tensor)
        rows = self.own_rows
        if rows is not None and len(e.indices) == len(rows[0]) and all(i is v for i, v in zip(e.indices, rows[0])) \
                and data.shape[1:] == rows[3][1:] and data.shape[0] >= rows[2]:
            return data[rows[1]:rows[2]].astype(_compute_dtype(e.tensor.dtype_obj), copy=False)
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
        return data[tuple(index)].astype(_compute_dtype(e.tensor.dtype_obj), copy=False)

    def eval_Reduce(self, e: Reduce):
        raise TypeError("reference: a reduction may only be the whole body of a compute")
