"""The compiled module: built parts and torch steps run in order on torch tensors."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import torch

import schedlang as sl
from schedlang.expr.functor import substitute
from schedlang.expr.nodes import Const, Expr
from schedlang.expr.simplify import simplify

from .dtypes import to_torch
from .lower import LoweredProgram, Part, lower_graph
from .torch_ir import Ref, TorchGraph, map_refs

LEVELS = ("torch", "tensor", "loop", "tile", "kernel", "target")


def _target(target) -> sl.Target:
    return sl.Target.create(target)


class CompiledModule:
    """A module compiled by schedlang.torch.compile: call it on tensors like the module
    (user inputs only; parameters and buffers were taken from the module)."""

    def __init__(self, graph: TorchGraph, target="llvm", program: Optional[LoweredProgram] = None,
                 log: Optional[str] = None):
        self.graph = graph
        self.log = log            # tuning records: a part's best record replaces its default schedule
        self.target = _target(target)
        self.program = program if program is not None else lower_graph(graph, self.target)
        self._modules: Dict[int, Any] = {}
        self._device = "cuda" if self.target.kind == "cuda" else "cpu"
        self._state = {i.name: i.value.detach() for i in graph.state_inputs}
        for part in self.program.parts:
            self._module(part)

    # ------------------------------------------------------------ building
    def _module(self, part: Part):
        """The built module of part (sl.build's cache makes a repeated workload free)."""
        mod = self._modules.get(part.index)
        if mod is None:
            from .schedules import default_schedule
            outs = [t for _, t in part.outputs]
            s = default_schedule(outs, self.target, log=self.log)
            mod = sl.build(s, [t for _, t in part.inputs] + outs, target=self.target)
            self._modules[part.index] = mod
        return mod

    def ir(self, level: str = "all") -> str:
        """The text of one level ("torch", "tensor", "loop", "tile", "kernel", "target") or of "all"."""
        if level == "all":
            return "\n\n".join(f"==== {lv} ====\n{self.ir(lv)}" for lv in LEVELS)
        if level not in LEVELS:
            raise ValueError(f"unknown IR level {level!r}; choose one of {', '.join(LEVELS + ('all',))}")
        if level == "torch":
            return str(self.graph)
        if level == "tensor":
            return str(self.program)
        texts = []
        for part in self.program.parts:
            ir = self._module(part).ir
            if level == "target":
                key = next(k for k in ir if k not in ("tensor", "loop", "tile", "kernel"))
                texts.append(ir[key])
            else:
                texts.append(str(ir[level]))
        return "\n\n".join(texts)

    # ------------------------------------------------------------ calling
    def _check_inputs(self, args: Sequence) -> Dict[str, int]:
        """Check count, dtypes, devices and shapes of the user inputs; the size vars' values."""
        want = self.graph.user_inputs
        if len(args) != len(want):
            raise TypeError(f"the compiled module takes {len(want)} input(s) "
                            f"({', '.join(i.name for i in want)}), got {len(args)}")
        sizes: Dict[str, int] = {}
        for spec, x in zip(want, args):
            if spec.kind == "size":
                if isinstance(x, bool) or not isinstance(x, int):
                    raise TypeError(f"input {spec.name}: expected an int (a size), got {type(x).__name__}")
                continue
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"input {spec.name}: expected a torch.Tensor, got {type(x).__name__}")
            if x.dtype != to_torch(spec.dtype):
                raise TypeError(f"input {spec.name}: dtype {x.dtype}, the module was compiled for {to_torch(spec.dtype)}")
            if x.device.type != self._device:
                raise ValueError(f"input {spec.name} is on {x.device}; the module was compiled for target "
                                 f"{self.target.kind!r}, which takes {self._device} tensors")
            if x.dim() != len(spec.shape):
                raise ValueError(f"input {spec.name}: {x.dim()} dimensions {tuple(x.shape)}, expected "
                                 f"{len(spec.shape)} {tuple(map(str, spec.shape))}")
            for d, (want_e, got) in enumerate(zip(spec.shape, x.shape)):
                if isinstance(want_e, int):
                    if want_e != got:
                        raise ValueError(f"input {spec.name}: shape {tuple(x.shape)}, expected "
                                         f"{tuple(map(str, spec.shape))} (dimension {d})")
                elif isinstance(want_e, sl.Var):
                    if sizes.setdefault(want_e.name, got) != got:
                        raise ValueError(f"input {spec.name}: dimension {d} is {got}, but {want_e.name} is "
                                         f"{sizes[want_e.name]} from another input")
        for spec, x in zip(want, args):       # derived extents (2 * batch) once all are known
            if spec.kind == "size":
                continue
            for d, (want_e, got) in enumerate(zip(spec.shape, x.shape)):
                if isinstance(want_e, Expr) and not isinstance(want_e, sl.Var) and self._eval(want_e, sizes) != got:
                    raise ValueError(f"input {spec.name}: dimension {d} is {got}, expected {want_e}")
        return sizes

    def _eval(self, e, sizes: Dict[str, int]) -> int:
        if isinstance(e, int):
            return e
        mapping = {v: sl.const(sizes[v.name], v.dtype) for n, v in self.graph.size_vars.items() if n in sizes}
        out = simplify(substitute(e, mapping))
        if not isinstance(out, Const):
            raise ValueError(f"the extent {e} is not known from the inputs' shapes")
        return int(out.value)

    def __call__(self, *args):
        if self._device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("this module was compiled for target 'cuda', but no CUDA GPU is available "
                               "(compile with target='llvm' to run on the CPU)")
        sizes = self._check_inputs(args)
        values: Dict[str, Any] = {i.name: x for i, x in zip(self.graph.user_inputs, args)}
        for i, x in zip(self.graph.user_inputs, args):   # sizes Dynamo passes bind their variables
            if i.kind == "size" and isinstance(i.size, sl.Var):
                sizes.setdefault(i.size.name, x)
        if any(v.device.type != self._device for v in self._state.values()):
            self._state = {k: v.to(self._device) for k, v in self._state.items()}   # once
        values.update(self._state)
        for step in self.program.steps:
            if isinstance(step, Part):
                self._run_part(step, values, sizes)
            else:
                node = step.node
                concrete = lambda r: values[r.name]          # noqa: E731
                a = map_refs(node.args, concrete)
                kw = map_refs(node.kwargs, concrete)
                a, kw = self._concrete_sizes(a, sizes), self._concrete_sizes(kw, sizes)
                values[node.name] = node.target(*a, **kw)
        outs = [values[o.name] if isinstance(o, Ref) else o for o in self.graph.outputs]
        spec = getattr(self.graph, "out_spec", None)
        if spec is not None:
            from torch.utils._pytree import tree_unflatten
            return tree_unflatten(outs, spec)
        kind = self.graph.output_kind
        return outs[0] if kind == "single" else tuple(outs) if kind == "tuple" else list(outs)

    def _concrete_sizes(self, value, sizes):
        if isinstance(value, Expr):
            return self._eval(value, sizes)
        if isinstance(value, (list, tuple)):
            return type(value)(self._concrete_sizes(v, sizes) for v in value)
        if isinstance(value, dict):
            return {k: self._concrete_sizes(v, sizes) for k, v in value.items()}
        return value

    def _run_part(self, part: Part, values: Dict[str, Any], sizes: Dict[str, int]) -> None:
        arrays = []
        for name, _ in part.inputs:
            v = values[name]
            arrays.append(v if v.is_contiguous() else v.contiguous())
        results = []
        for name, t in part.outputs:
            shape = tuple(self._eval(e, sizes) for e in t.shape)
            out = torch.empty(shape, dtype=to_torch(t.dtype), device=self._device)
            results.append(out)
            values[name] = out
        self._module(part)(*arrays, *results)
        for name, src in part.aliases.items():
            values[name] = values[src]
