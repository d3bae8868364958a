"""Torch IR: the captured framework ops with their shapes and dtypes, and its printer.

    inputs:
      x: (1, 32, 4096) f32

    chunk_0 = slice(x, dim=2, start=0)     -> (1, 32, 2048) f32
    chunk_1 = slice(x, dim=2, start=2048)  -> (1, 32, 2048) f32
    silu    = silu(chunk_0)                -> (1, 32, 2048) f32
    mul     = mul(silu, chunk_1)           -> (1, 32, 2048) f32

    outputs:
      mul: (1, 32, 2048) f32

A node keeps its ATen op (`target`, what torch runs when the op is not lowered) and its
arguments as in the ATen schema, with other values referred to by `Ref(name)`.
Extents are ints or schedlang size expressions (a dynamic dimension is a size var).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

import schedlang as sl
from .dtypes import ir_dtype, short_name

Shape = Tuple[Any, ...]


@dataclass(frozen=True)
class Ref:
    """A reference to the value of an input or a node, by name."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass
class TorchInput:
    """A graph input: a user input, a size (an int Dynamo passes with dynamic shapes), or a
    parameter/buffer/constant of the module (`target` is then its name in the module's
    state, `value` its tensor)."""

    name: str
    shape: Shape
    dtype: str
    kind: str = "input"          # input | parameter | buffer | constant
    target: Optional[str] = None
    value: Any = None
    size: Any = None             # kind "size": the size expression it stands for


@dataclass
class TorchNode:
    """One op: `name = op(args, kwargs) -> type`. `target` is the callable torch runs
    (an ATen OpOverload); `shape`/`dtype` are lists for ops with several results."""

    name: str
    op: str
    target: Callable
    args: tuple
    kwargs: Dict[str, Any]
    shape: Union[Shape, List[Shape]]
    dtype: Union[str, List[str]]
    display_kwargs: Optional[Dict[str, Any]] = None   # how the printer shows the arguments

    @property
    def multi(self) -> bool:
        return isinstance(self.dtype, list)

    def refs(self) -> List[str]:
        """Names of the values this node reads, in argument order."""
        out: List[str] = []
        _collect_refs(self.args, out)
        _collect_refs(tuple(self.kwargs.values()), out)
        return out


def _collect_refs(value, out: List[str]) -> None:
    if isinstance(value, Ref):
        if value.name not in out:
            out.append(value.name)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_refs(v, out)


def map_refs(value, fn: Callable[[Ref], Any]):
    """value with every Ref replaced by fn(ref) (lists and tuples rebuilt)."""
    if isinstance(value, Ref):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(map_refs(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: map_refs(v, fn) for k, v in value.items()}
    return value


@dataclass
class TorchGraph:
    """A captured module: inputs (user inputs first, then the module's state), nodes in
    execution order, outputs (Refs, or constants), and how outputs are packed
    ("single", "tuple" or "list")."""

    inputs: List[TorchInput]
    nodes: List[TorchNode]
    outputs: List[Any]
    output_kind: str = "single"
    size_vars: Dict[str, sl.Var] = field(default_factory=dict)
    out_spec: Any = None         # torch.export's output tree (when captured by export)

    @property
    def user_inputs(self) -> List[TorchInput]:
        """What a call passes, in order: tensors, and sizes where Dynamo passes them."""
        return [i for i in self.inputs if i.kind in ("input", "size")]

    @property
    def state_inputs(self) -> List[TorchInput]:
        return [i for i in self.inputs if i.kind not in ("input", "size")]

    def node(self, name: str) -> TorchNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def value_type(self, name: str):
        """(shape, dtype) of an input or a single-result node."""
        for i in self.inputs:
            if i.name == name:
                return i.shape, i.dtype
        n = self.node(name)
        return n.shape, n.dtype

    def __str__(self) -> str:
        return print_torch_ir(self)


def dtype_short(dtype) -> str:
    return short_name(dtype) or sl.dtype(str(dtype)).short


def type_str(shape, dtype) -> str:
    if isinstance(dtype, list):
        return ", ".join(type_str(s, d) for s, d in zip(shape, dtype)) or "none"     # a check: no result
    return f"({', '.join(str(e) for e in shape)}{',' if len(shape) == 1 else ''}) {dtype_short(dtype)}"


def _arg_str(value) -> str:
    if isinstance(value, torch.dtype):
        try:
            return dtype_short(ir_dtype(value))
        except TypeError:
            return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_arg_str(v) for v in value) + "]"
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return str(value)
    return str(value)


# Keyword arguments that do not change the values computed: not printed.
_QUIET = ("layout", "device", "pin_memory", "memory_format", "non_blocking")


def node_call_str(node: TorchNode) -> str:
    """`op(arg, ..., key=value)` of a node."""
    if node.display_kwargs is not None:
        parts = [_arg_str(a) for a in node.args[:1]]
        parts += [f"{k}={_arg_str(v)}" for k, v in node.display_kwargs.items()]
    else:
        parts = [_arg_str(a) for a in node.args]
        parts += [f"{k}={_arg_str(v)}" for k, v in node.kwargs.items() if k not in _QUIET]
    return f"{node.op}({', '.join(parts)})"


def print_torch_ir(g: TorchGraph) -> str:
    lines = ["inputs:"]
    for i in g.inputs:
        note = "" if i.kind == "input" else "   # size" if i.kind == "size" else f"   # {i.kind} {i.target}"
        lines.append(f"  {i.name}: {type_str(i.shape, i.dtype)}{note}")
    lines.append("")
    rows = [(n.name, node_call_str(n), type_str(n.shape, n.dtype)) for n in g.nodes]
    wn = max((len(r[0]) for r in rows), default=0)
    wc = max((len(r[1]) for r in rows), default=0)
    lines += [f"{a.ljust(wn)} = {b.ljust(wc)}  -> {c}" for a, b, c in rows]
    lines += ["", "outputs:"]
    for o in g.outputs:
        if isinstance(o, Ref):
            shape, dtype = g.value_type(o.name)
            lines.append(f"  {o.name}: {type_str(shape, dtype)}")
        else:
            lines.append(f"  {o!r}")
    return "\n".join(lines)
