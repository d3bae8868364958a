"""extern: a stage computed by an opaque function called through the packed-function
registry (TVM's te.extern + tir.call_packed).

    C = extern((n, m), [A, B], lambda ins, outs: call_packed("my.matmul", ins[0], ins[1], outs[0]))

fcompute receives buffer handles for the inputs and outputs and returns the call; the
registered function (sl.register_func) receives numpy views of the buffers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple, Union

from ..dtypes import DType, dtype as parse_dtype
from .op import Operation, Tensor, _check_shape, output_name


@dataclass(frozen=True)
class ExternBuffer:
    """A handle for one buffer of an extern call: input `index` or output `index`."""

    role: str            # "in" or "out"
    index: int
    name: str
    shape: Tuple[int, ...]
    dtype: DType

    def __str__(self) -> str:
        return self.name

    @property
    def data(self) -> "ExternBuffer":
        """TVM's buffer.data (the data pointer): the callback receives the same numpy view."""
        return self


Scalar = Union[bool, int, float]


@dataclass(frozen=True)
class PackedCall:
    """call_packed(func, *args): a call of a registered function; args are buffer handles
    or constant scalars."""

    func: str
    args: Tuple[Union[ExternBuffer, Scalar], ...]

    def __str__(self) -> str:
        return f"call_packed({self.func!r}, {', '.join(map(str, self.args))})"


def call_packed(func: str, *args) -> PackedCall:
    """A call of the function registered under func (sl.register_func), as tvm.tir.call_packed."""
    if not isinstance(func, str):
        raise TypeError(f"call_packed: the first argument is the registered function's name, got {func!r}")
    for a in args:
        if isinstance(a, Tensor):
            raise TypeError(f"call_packed('{func}'): pass buffer handles (ins[i], outs[i]) rather than tensor '{a.name}'")
        if not isinstance(a, (ExternBuffer, bool, int, float)):
            raise TypeError(f"call_packed('{func}'): arguments are buffer handles or constant int/float/bool "
                            f"scalars, got {a!r}")
    return PackedCall(func, tuple(args))


@dataclass(frozen=True, eq=False)
class ExternOp(Operation):
    """outputs = the results of a packed call on whole input buffers; no loops to schedule."""

    name: str
    inputs: Tuple[Tensor, ...]
    shapes: Tuple[Tuple[int, ...], ...]
    dtypes: Tuple[DType, ...]
    body: PackedCall
    tag: str = ""
    attrs: Tuple[Tuple[str, object], ...] = ()

    __hash__ = object.__hash__

    @property
    def num_outputs(self) -> int:
        return len(self.shapes)

    def output(self, index: int = 0) -> Tensor:
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"extern '{self.name}' has {self.num_outputs} output(s); output({index}) does not exist")
        return Tensor(self, index)

    def output_shape(self, index: int) -> Tuple[int, ...]:
        return self.shapes[index]

    def output_dtype(self, index: int) -> DType:
        return self.dtypes[index]

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.shapes[0]

    @property
    def dtype(self) -> DType:
        return self.dtypes[0]

    @property
    def input_tensors(self) -> List[Tensor]:
        return list(self.inputs)

    def replace_inputs(self, mapping, name: str) -> "ExternOp":
        ins = tuple(mapping[t.op].output(t.value_index) if t.op in mapping else t for t in self.inputs)
        return ExternOp(name, ins, self.shapes, self.dtypes, self.body, self.tag, self.attrs)


def extern(shape, inputs, fcompute, name: str = "extern", dtype=None, tag: str = "", attrs=None):
    """Tensors computed by fcompute(ins, outs) -> call_packed(...), as TVM's te.extern: one
    shape gives one tensor, a list of shapes a list of tensors (one dtype, or one each)."""
    many = isinstance(shape, (list, tuple)) and bool(shape) and isinstance(shape[0], (list, tuple))
    shapes = [_check_shape(s, f"extern '{name}'") for s in (shape if many else [shape])]
    inputs = list(inputs)
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"extern '{name}': inputs must be tensors, got {t!r}")
    if dtype is None:
        dtype = inputs[0].dtype if inputs else "float32"
    dtypes = [parse_dtype(d) for d in dtype] if isinstance(dtype, (list, tuple)) else [parse_dtype(dtype)] * len(shapes)
    if len(dtypes) != len(shapes):
        raise ValueError(f"extern '{name}': {len(shapes)} output shapes but {len(dtypes)} dtypes")
    ins = [ExternBuffer("in", k, t.name, tuple(t.shape), t.dtype_obj) for k, t in enumerate(inputs)]
    outs = [ExternBuffer("out", k, output_name(name, k, len(shapes)), s, d)
            for k, (s, d) in enumerate(zip(shapes, dtypes))]
    body = fcompute(ins, outs)
    if not isinstance(body, PackedCall):
        raise TypeError(f"extern '{name}': fcompute must return sl.call_packed(...), got {body!r}")
    op = ExternOp(name, tuple(inputs), tuple(shapes), tuple(dtypes), body, tag, tuple(sorted((attrs or {}).items())))
    results = [op.output(k) for k in range(op.num_outputs)]
    return results if len(results) > 1 else results[0]
