"""The table of ATen -> Tensor IR lowerings and the context each lowering receives.

A lowering is registered under ATen overload names ("aten.add.Tensor") or packet names
("aten.add", which covers every overload not registered on its own):

    @register_lowering("aten.silu")
    def silu(ctx, x):
        ...
        return sl.compute(x.shape, lambda *i: ..., name=ctx.name())

It is called with the node's arguments as in the ATen schema: tensors as Tensor IR
tensors (`sl.Tensor`), scalars as Python numbers, symbolic sizes as `sl.Var` expressions,
lists as lists; keyword arguments as keywords. It returns one `sl.Tensor`, or a tuple or
list of them for ops with several results (`var_mean`, `max.dim`, `split_with_sizes`).
Stage names come from `ctx.name(...)` so that Tensor IR reads like the Torch IR it came
from: the op's result is `ctx.name()`, helper stages are `ctx.name("neg")` and so on.
A lowering that cannot handle its arguments raises `Unsupported`; the op then runs in
torch (with one warning naming it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Optional

LOWERINGS: Dict[str, Callable] = {}


class Unsupported(Exception):
    """Raised by a lowering for arguments it does not handle (the op falls back to torch)."""


class NeedsStaticShape(Unsupported):
    """Raised by a lowering for an argument that is a size expression where the lowering
    needs a number (a kernel extent, a scale factor) or cannot prove two extents equal that
    torch's trace already checked: with the sizes known, the op lowers. A module whose graph
    has such an op is built per concrete shape (CompiledModule)."""


@dataclass
class LowerContext:
    """What a lowering knows besides its arguments: the Torch IR node's name (the prefix
    of every stage it creates) and the target the program is compiled for (None: any)."""

    node: str
    target: object = None
    _used: Dict[str, int] = field(default_factory=dict)
    packer: Optional[Callable] = None
    guarder: Optional[Callable] = None
    prepacker: Optional[Callable] = None
    conv_lanes: int = 0          # the program's convolution blocks where narrower than a vector (conv_lanes.py)

    def guard(self, flag, message: str, error: type = IndexError) -> None:
        """Raise error(message) at run time when flag (a 0-d bool tensor the lowering
        computes, e.g. "some index is out of range") is true: the part computes flag with
        the op's result and the compiled module checks it after the part runs. Without a
        guarder (a lowering called on its own, as in tests) the flag is not computed."""
        if self.guarder is not None:
            self.guarder(flag, message, error)

    def packed(self, tensor, width: int):
        """A placeholder of tensor's [ceil(N / width), K, width] panels (prepack.py), which the
        compiled module computes once, when tensor (2-d [N, K]) is a constant of the module (a
        parameter); None otherwise."""
        return None if self.packer is None else self.packer(tensor, width)

    def prepacked(self, kind: str, tensors, width: int = 1, params: tuple = ()):
        """A placeholder of the constant prepack.py makes of kind from tensors (the first
        one present; None for an absent optional one) once, when every tensor given is a
        constant of the module (a parameter, a buffer); None otherwise."""
        return None if self.prepacker is None else self.prepacker(kind, tuple(tensors), width, tuple(params))

    def name(self, suffix: Optional[str] = None) -> str:
        """The node's name, or `<node>_<suffix>` for a helper stage."""
        return self.node if suffix is None else f"{self.node}_{suffix}"


def register_lowering(*ops: str) -> Callable:
    """Register the decorated function as the lowering of each ATen name in ops."""
    def wrap(fn: Callable) -> Callable:
        for op in ops:
            if op in LOWERINGS:
                raise ValueError(f"a lowering for {op} is already registered")
            LOWERINGS[op] = fn
        return fn
    return wrap


def op_name(target) -> str:
    """"aten.add.Tensor" for torch.ops.aten.add.Tensor; strings are returned as they are."""
    if isinstance(target, str):
        return target
    name = getattr(target, "_name", None) or str(target)     # "aten::add.Tensor"
    name = name.replace("::", ".")
    overload = getattr(target, "_overloadname", None)
    if overload and not name.endswith("." + overload):
        name = f"{name}.{overload}"
    return name


def lookup(target) -> Optional[Callable]:
    """The lowering of an ATen op (an OpOverload or its name), or None."""
    name = op_name(target)
    if name in LOWERINGS:
        return LOWERINGS[name]
    packet = name.rsplit(".", 1)[0] if name.count(".") >= 2 else name
    return LOWERINGS.get(packet)
