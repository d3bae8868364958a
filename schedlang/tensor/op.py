"""Operations and tensors of the algorithm language: placeholder and compute."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

from ..dtypes import DType, dtype as parse_dtype, int32
from ..expr.functor import walk
from ..expr.nodes import Expr, Var, as_expr
from .axis import DATA_PAR, IterVar, Range
from .reduce import Reduce


class Operation:
    """Base of PlaceholderOp and ComputeOp; compared by identity."""

    name: str

    def output(self, index: int = 0) -> "Tensor":
        if index != 0:
            raise IndexError(f"operation '{self.name}' has a single output; output({index}) does not exist")
        return Tensor(self, 0)

    @property
    def num_outputs(self) -> int:
        return 1

    root_axes: Tuple[IterVar, ...] = ()    # the axes a stage of this operation starts with

    def output_shape(self, index: int) -> Tuple[int, ...]:
        return self.shape

    def output_dtype(self, index: int) -> DType:
        return self.dtype


@dataclass(frozen=True, eq=False)
class PlaceholderOp(Operation):
    """An input tensor."""

    name: str
    shape: Tuple[int, ...]
    dtype: DType

    __hash__ = object.__hash__

    @property
    def input_tensors(self) -> List["Tensor"]:
        return []


@dataclass(frozen=True, eq=False)
class ComputeOp(Operation):
    """out[axis] = body; body is an expression of the axes, or one top-level Reduce."""

    name: str
    axis: Tuple[IterVar, ...]
    body: Expr
    tag: str = ""
    attrs: Tuple[Tuple[str, object], ...] = ()

    __hash__ = object.__hash__

    @property
    def reduce_axis(self) -> Tuple[IterVar, ...]:
        return self.body.axis if isinstance(self.body, Reduce) else ()

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(a.dom.extent for a in self.axis)

    @property
    def root_axes(self) -> Tuple[IterVar, ...]:
        return tuple(self.axis) + tuple(self.reduce_axis)

    @property
    def dtype(self) -> DType:
        return self.body.dtype

    @property
    def input_tensors(self) -> List["Tensor"]:
        seen: Dict[Operation, None] = {}
        for node in walk(self.body):
            if isinstance(node, TensorRead):
                seen.setdefault(node.tensor.op, None)
        return [op.output(0) for op in seen]


@dataclass(frozen=True)
class Tensor:
    """The output of an operation; index it to read: A[i, j]."""

    op: Operation
    value_index: int = 0

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.op.output_shape(self.value_index)

    @property
    def dtype(self) -> DType:
        return self.op.output_dtype(self.value_index)

    @property
    def name(self) -> str:
        return self.op.name if self.value_index == 0 else f"{self.op.name}.v{self.value_index}"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> "TensorRead":
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexError(f"tensor '{self.name}' has {self.ndim} dimensions {self.shape}, "
                             f"indexed with {len(indices)}: {', '.join(map(str, indices))}")
        converted = []
        for i in indices:
            if isinstance(i, slice):
                raise TypeError(f"tensor '{self.name}': slices are not supported inside compute; index with expressions")
            e = as_expr(i)
            if not e.dtype.is_int or e.dtype.lanes != 1:
                raise TypeError(f"tensor '{self.name}' indexed with '{e}' of dtype {e.dtype}; indices must be integers")
            converted.append(e)
        return TensorRead(self, tuple(converted))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype})"


@dataclass(frozen=True, eq=False, repr=False)
class TensorRead(Expr):
    """tensor[indices] inside a compute body."""

    tensor: Tensor
    indices: Tuple[Expr, ...]

    __hash__ = object.__hash__

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype

    def format(self, fmt) -> str:
        return f"{self.tensor.name}[{', '.join(fmt(i) for i in self.indices)}]"


def _check_shape(shape, what: str) -> Tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{what}: shape must be a tuple of ints, got {shape!r}")
    out = []
    for n in shape:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"{what}: shape {tuple(shape)} holds {n!r}; only static int extents are supported")
        if n <= 0:
            raise ValueError(f"{what}: shape {tuple(shape)} has a non-positive extent {n}")
        out.append(n)
    return tuple(out)


def placeholder(shape, dtype="float32", name: str = "placeholder") -> Tensor:
    """An input tensor of a static shape, as TVM's te.placeholder."""
    return PlaceholderOp(name, _check_shape(shape, f"placeholder '{name}'"), parse_dtype(dtype)).output(0)


def _axis_names(fcompute: Callable, ndim: int, name: str) -> List[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if params and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        return [f"i{d}" for d in range(ndim)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != ndim:
        raise TypeError(f"compute '{name}': the shape has {ndim} dimensions but the lambda takes "
                        f"{len(positional)} index arguments ({', '.join(p.name for p in positional)})")
    return [p.name for p in positional]


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "", attrs=None) -> Tensor:
    """out[i, j, ...] = fcompute(i, j, ...), as TVM's te.compute."""
    shape = _check_shape(shape, f"compute '{name}'")
    axes = tuple(IterVar(Var(n, int32), Range(0, ext), DATA_PAR)
                 for n, ext in zip(_axis_names(fcompute, len(shape), name), shape))
    body = fcompute(*axes)
    if isinstance(body, (tuple, list)):
        raise TypeError(f"compute '{name}': multiple outputs are not supported; return one expression")
    body = as_expr(body)
    _check_body(name, body, axes)
    return ComputeOp(name, axes, body, tag, tuple(sorted((attrs or {}).items()))).output(0)


def _check_body(name: str, body: Expr, axes: Sequence[IterVar]) -> None:
    top_reduce = body if isinstance(body, Reduce) else None
    allowed = {a.var: a for a in axes}
    if top_reduce is not None:
        allowed.update({a.var: a for a in top_reduce.axis})
    for node in walk(body):
        if isinstance(node, Reduce) and node is not top_reduce:
            raise ValueError(f"compute '{name}': a reduction may only be the whole body of a compute "
                             f"(found '{node}' inside '{body}'); split it into two computes")
        if isinstance(node, Var) and node not in allowed:
            if node.name in {v.name for v in allowed}:
                problem = f"uses a different variable named '{node.name}' than its own axes"
            else:
                problem = f"uses variable '{node.name}', which is not one of its axes ({', '.join(v.name for v in allowed)})"
            raise ValueError(f"compute '{name}': {problem}; a reduce_axis must appear in the axis= of a sum/max/min")
