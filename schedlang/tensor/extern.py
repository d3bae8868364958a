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
from .op import Operation, Tensor, _check_shape


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
    """out = the result of a packed call on whole input buffers; it has no loops to schedule."""

    name: str
    inputs: Tuple[Tensor, ...]
    shape: Tuple[int, ...]
    dtype: DType
    body: PackedCall
    tag: str = ""
    attrs: Tuple[Tuple[str, object], ...] = ()

    __hash__ = object.__hash__

    @property
    def input_tensors(self) -> List[Tensor]:
        return list(self.inputs)

    def replace_inputs(self, mapping, name: str) -> "ExternOp":
        ins = tuple(mapping[t.op].op.output(t.value_index) if t.op in mapping else t for t in self.inputs)
        return ExternOp(name, ins, self.shape, self.dtype, self.body, self.tag, self.attrs)


def extern(shape, inputs, fcompute, name: str = "extern", dtype=None, tag: str = "", attrs=None) -> Tensor:
    """A tensor computed by fcompute(ins, outs) -> call_packed(...), as TVM's te.extern
    (one output)."""
    if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple)):
        if len(shape) != 1:
            raise NotImplementedError(f"extern '{name}': only one output is supported, got {len(shape)} shapes")
        shape = shape[0]
    shape = _check_shape(shape, f"extern '{name}'")
    inputs = list(inputs)
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"extern '{name}': inputs must be tensors, got {t!r}")
    if isinstance(dtype, (list, tuple)):
        dtype = dtype[0]
    out_dtype = parse_dtype(dtype) if dtype is not None else (inputs[0].dtype if inputs else parse_dtype("float32"))
    ins = [ExternBuffer("in", k, t.name, tuple(t.shape), t.dtype) for k, t in enumerate(inputs)]
    outs = [ExternBuffer("out", 0, name, shape, out_dtype)]
    body = fcompute(ins, outs)
    if not isinstance(body, PackedCall):
        raise TypeError(f"extern '{name}': fcompute must return sl.call_packed(...), got {body!r}")
    return ExternOp(name, tuple(inputs), shape, out_dtype, body, tag, tuple(sorted((attrs or {}).items()))).output(0)
