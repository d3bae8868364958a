"""Operations and tensors of the algorithm language: placeholder and compute."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

from ..dtypes import DType, dtype as parse_dtype, int32
from ..expr.functor import var_set, walk
from ..expr.nodes import Const, Expr, ExprOps, Var, as_expr
from ..expr.simplify import simplify
from ..limits import check_expr_depth
from .axis import DATA_PAR, IterVar, Range
from .reduce import Reduce


def output_name(name: str, index: int, num_outputs: int) -> str:
    """The name of output index of an operation called name: the name itself for a
    single-output op, '<name>.v<index>' when it has several (TVM's rule; also the names of
    the buffers lowering makes for them)."""
    return name if num_outputs == 1 else f"{name}.v{index}"


class Operation:
    """Base of PlaceholderOp and ComputeOp; compared by identity."""

    name: str

    def output(self, index: int = 0) -> "Tensor":
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self.num_outputs:
            raise IndexError(f"operation '{self.name}' has {self.num_outputs} output(s); "
                             f"output({index!r}) does not exist")
        return Tensor(self, index)

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


# An attr of a compute op (compute(..., attrs={REALIZE_WHOLE: True})): bound inference realizes
# the stage at the root over its whole domain even where its readers need less, so its loops
# count from the domain's start. For a schedule that reads absolute coordinates from its loop
# variables (the CPU attention's causal key skipping: torch/attention_schedule.py); a region
# shrunk to what a slice reads shifts every loop by the region's start.
REALIZE_WHOLE = "realize_whole"


@dataclass(frozen=True, eq=False)
class ComputeOp(Operation):
    """out[axis] = body; body is an expression of the axes, or one top-level Reduce.

    A multi-output compute (TVM's compute whose lambda returns a tuple) has the bodies
    of its outputs 1, 2, ... in more_bodies: all computed in one loop nest, all plain
    expressions or all values of one reduction (Reduce nodes differing in value_index)."""

    name: str
    axis: Tuple[IterVar, ...]
    body: Expr
    tag: str = ""
    attrs: Tuple[Tuple[str, object], ...] = ()
    more_bodies: Tuple[Expr, ...] = ()

    __hash__ = object.__hash__

    @property
    def bodies(self) -> Tuple[Expr, ...]:
        """The body of every output, in output order."""
        return (self.body,) + self.more_bodies

    @property
    def num_outputs(self) -> int:
        return 1 + len(self.more_bodies)

    def output_dtype(self, index: int) -> DType:
        return self.bodies[index].dtype

    def with_bodies(self, bodies: Sequence[Expr], name: str = None, axis=None) -> "ComputeOp":
        """This op with other bodies (and optionally another name or axes); tag and attrs kept."""
        bodies = tuple(bodies)
        return ComputeOp(self.name if name is None else name, self.axis if axis is None else tuple(axis),
                         bodies[0], self.tag, self.attrs, bodies[1:])

    @property
    def reduce_axis(self) -> Tuple[IterVar, ...]:
        return self.body.axis if isinstance(self.body, Reduce) else ()

    def axes_read_by(self, r: IterVar) -> List[IterVar]:
        """The axes of this op that the domain (min or extent) of its reduction axis r reads:
        reduce_axis((0, j + 1)) in compute((n,), lambda j: ...), a prefix sum, reads j."""
        read = {v for bound in (r.dom.min, r.dom.extent) if isinstance(bound, Expr) for v in var_set(bound)}
        return [a for a in self.axis if a.var in read]

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
        """The tensors the bodies read (output 0 of each producer), in first-read order. Found
        once and kept (the op is immutable): the serializer and the schedule ask per use."""
        producers = self.__dict__.get("_producers")
        if producers is None:
            seen: Dict[Operation, None] = {}
            for body in self.bodies:
                for node in walk(body):
                    if isinstance(node, TensorRead):
                        seen.setdefault(node.tensor.op, None)
            producers = tuple(seen)
            object.__setattr__(self, "_producers", producers)
        return [op.output(0) for op in producers]


@dataclass(frozen=True)
class Tensor:
    """The output of an operation; index it to read: A[i, j], A(i, j) or A[i][j].

    As in TVM, dtype is a string ("float32") that numpy accepts; dtype_obj is the
    DType the compiler works with."""

    op: Operation
    value_index: int = 0

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.op.output_shape(self.value_index)

    @property
    def dtype(self) -> str:
        return str(self.dtype_obj)

    @property
    def dtype_obj(self) -> DType:
        return self.op.output_dtype(self.value_index)

    @property
    def name(self) -> str:
        """The op's name; output k of a multi-output op is '<name>.v<k>', as in TVM."""
        return output_name(self.op.name, self.value_index, self.op.num_outputs)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __call__(self, *indices) -> "TensorRead":
        return self[indices]

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) < self.ndim and not any(isinstance(i, slice) for i in indices):
            return TensorSlice(self, tuple(indices))
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


class TensorSlice(ExprOps):
    """A tensor indexed in its leading dimensions only, as TVM's TensorSlice: A[i] of a
    2-d A, which A[i][j] indexes further. It is not a value until every dimension is
    indexed."""

    def __init__(self, tensor: Tensor, indices: Tuple):
        self.tensor = tensor
        self.indices = indices

    def __getitem__(self, more) -> "TensorRead":
        more = more if isinstance(more, tuple) else (more,)
        return self.tensor[self.indices + more]

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def asobject(self) -> "TensorRead":
        """The read, once every dimension is indexed (TVM's TensorSlice.asobject)."""
        return self.as_expr()

    def as_expr(self) -> Expr:
        if len(self.indices) == self.tensor.ndim:
            return self.tensor[self.indices]
        t = self.tensor
        raise IndexError(f"tensor '{t.name}' has {t.ndim} dimensions {t.shape}, indexed with "
                         f"{len(self.indices)}: {', '.join(map(str, self.indices))}; index every dimension")

    def __str__(self) -> str:
        return f"{self.tensor.name}[{', '.join(map(str, self.indices))}]"

    __repr__ = __str__


@dataclass(frozen=True, eq=False, repr=False)
class TensorRead(Expr):
    """tensor[indices] inside a compute body."""

    tensor: Tensor
    indices: Tuple[Expr, ...]

    __hash__ = object.__hash__

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype_obj

    def format(self, fmt) -> str:
        return f"{self.tensor.name}[{', '.join(fmt(i) for i in self.indices)}]"


def _check_shape(shape, what: str) -> Tuple[int, ...]:
    if isinstance(shape, (int, float)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{what}: shape must be a tuple of ints, got {shape!r}")
    out = []
    for n in shape:
        n = _integral_extent(n, shape, what)
        if isinstance(n, Expr) or hasattr(n, "as_expr"):
            out.append(symbolic_extent(n, f"{what}: shape {tuple(map(str, shape))}"))
            continue
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"{what}: shape {tuple(shape)} holds {n!r}; extents are ints or integer "
                            "expressions of sl.var / sl.size_var")
        if n <= 0:
            raise ValueError(f"{what}: shape {tuple(shape)} has a non-positive extent {n}")
        out.append(n)
    return tuple(out)


def symbolic_extent(n, what: str):
    """An extent given as an expression: a scalar int32 expression of size variables (a
    constant one becomes an int)."""
    e = as_expr(n)
    if not e.dtype.is_int or e.dtype.lanes != 1 or e.dtype.bits > 32:
        raise TypeError(f"{what}: extent '{e}' has dtype {e.dtype}; symbolic extents are int32 expressions "
                        "(sl.var / sl.size_var are int32 by default)")
    for node in walk(e):
        if isinstance(node, TensorRead):
            raise TypeError(f"{what}: extent '{e}' reads a tensor; extents are expressions of size variables")
    e = simplify(e)
    if isinstance(e, Const):
        if e.value <= 0:
            raise ValueError(f"{what}: extent '{n}' is {e.value}, not positive")
        return int(e.value)
    return e


def _integral_extent(n, shape, what: str):
    """An extent that is an integral float (N / bn in TVM's GEMM tutorial, 32.0) or an
    integer-like object (numpy ints, constant expressions) as an int, as TVM accepts them."""
    if isinstance(n, Const) and n.dtype.is_int:
        return int(n.value)
    if isinstance(n, float) or (isinstance(n, Const) and n.dtype.is_float):
        value = n.value if isinstance(n, Const) else n
        if not float(value).is_integer():
            raise ValueError(f"{what}: shape {tuple(shape)} has the extent {value!r}, which is not a whole "
                             "number; use // for integer division")
        return int(value)
    if not isinstance(n, (bool, int)) and hasattr(n, "__index__"):
        return n.__index__()
    return n


def placeholder(shape, dtype="float32", name: str = "placeholder") -> Tensor:
    """An input tensor, as TVM's te.placeholder; extents are ints or expressions of
    sl.var / sl.size_var (read from the arrays a built module is called with)."""
    return PlaceholderOp(name, _check_shape(shape, f"placeholder '{name}'"), parse_dtype(dtype)).output(0)


def _axis_names(fcompute: Callable, ndim: int, name: str) -> List[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if params and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        return [f"i{d}" for d in range(ndim)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(positional) != ndim and len(required) == ndim:
        positional = required   # lambda i, f=f: ... binds f, as Python loops need
    if len(positional) != ndim:
        raise TypeError(f"compute '{name}': the shape has {ndim} dimensions but the lambda takes "
                        f"{len(positional)} index arguments ({', '.join(p.name for p in positional)})")
    return [p.name for p in positional]


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "", attrs=None):
    """out[i, j, ...] = fcompute(i, j, ...), as TVM's te.compute. When fcompute returns a
    tuple, the compute has one output per element, all computed in one loop nest, and
    the result is the tuple of its output tensors (as TVM)."""
    shape = _check_shape(shape, f"compute '{name}'")
    axes = tuple(IterVar(Var(n, int32), Range(0, ext), DATA_PAR)
                 for n, ext in zip(_axis_names(fcompute, len(shape), name), shape))
    result = fcompute(*axes)
    many = isinstance(result, (tuple, list))
    bodies = tuple(as_expr(b) for b in (result if many else (result,)))
    if not bodies:
        raise ValueError(f"compute '{name}': the lambda returned an empty tuple; return at least one expression")
    for body in bodies:
        if body.dtype.lanes != 1:
            raise TypeError(f"compute '{name}': the body '{body}' has the vector dtype {body.dtype}; "
                            "tensor elements are scalars (vectorize a loop in the schedule instead)")
        check_expr_depth(f"compute '{name}'", body)
        _check_body(name, body, axes)
    _check_outputs(name, bodies)
    op = ComputeOp(name, axes, bodies[0], tag, tuple(sorted((attrs or {}).items())), bodies[1:])
    outputs = tuple(op.output(i) for i in range(op.num_outputs))
    return outputs if len(outputs) > 1 else outputs[0]   # TVM: one output is a tensor, not a tuple


def _check_outputs(name: str, bodies: Sequence[Expr]) -> None:
    """The outputs of one compute share its loop nest: all are plain expressions, or all
    are the values of one reduction, in order."""
    reduces = [b for b in bodies if isinstance(b, Reduce)]
    if not reduces:
        return
    if len(reduces) != len(bodies):
        raise ValueError(f"compute '{name}': some outputs are reductions and some are not; a compute with "
                         "several outputs computes them in one loop nest, so split it into two computes")
    first = reduces[0]
    arity = first.combiner.arity
    for i, r in enumerate(reduces):
        if not r.same_reduction(first):
            raise ValueError(f"compute '{name}': output {i} is another reduction than output 0; the outputs "
                             "of one compute must be the values of one (tuple) reduction")
        if r.value_index != i:
            raise ValueError(f"compute '{name}': output {i} is value {r.value_index} of the reduction "
                             f"'{first.combiner.name}'; return its values in order")
    if len(reduces) != arity:
        raise ValueError(f"compute '{name}': the reducer '{first.combiner.name}' gives {arity} values but the "
                         f"compute returns {len(reduces)}; return all of them, e.g. T0, T1 = sl.compute(...)")


def _check_body(name: str, body: Expr, axes: Sequence[IterVar]) -> None:
    top_reduce = body if isinstance(body, Reduce) else None
    allowed = {a.var: a for a in axes}
    if top_reduce is not None:
        allowed.update({a.var: a for a in top_reduce.axis})
        for init in top_reduce.init:
            used = [v.name for v in walk(init) if isinstance(v, Var) and any(v is a.var for a in top_reduce.axis)]
            if used:
                raise ValueError(f"compute '{name}': init= of '{top_reduce.combiner.name}' uses the reduction "
                                 f"axis '{used[0]}'; init is one value per output element")
    sizes = _size_vars(body, axes)
    for node in walk(body):
        if isinstance(node, Var) and (node.nonnegative or node in sizes):
            continue     # a symbolic size: the body may use it (A[n - 1 - i])
        if isinstance(node, Reduce) and node is not top_reduce:
            raise ValueError(f"compute '{name}': a reduction may only be the whole body of a compute "
                             f"(found '{node}' inside '{body}'); split it into two computes")
        if isinstance(node, Var) and node not in allowed:
            if node.name in {v.name for v in allowed}:
                problem = f"uses a different variable named '{node.name}' than its own axes"
            else:
                problem = f"uses variable '{node.name}', which is not one of its axes ({', '.join(v.name for v in allowed)})"
            raise ValueError(f"compute '{name}': {problem}; a reduce_axis must appear in the axis= of a sum/max/min")


def _size_vars(body: Expr, axes: Sequence[IterVar]) -> Dict[Var, None]:
    """The variables in the extents of the compute's axes and of the tensors it reads."""
    extents = [a.dom.extent for a in axes]
    for node in walk(body):
        if isinstance(node, TensorRead):
            extents += list(node.tensor.shape)
        if isinstance(node, Reduce):
            extents += [a.dom.extent for a in node.axis]
    out: Dict[Var, None] = {}
    for n in extents:
        if isinstance(n, Expr):
            out.update({v: None for v in walk(n) if isinstance(v, Var)})
    return out
