"""`torch.compile(module, backend="schedlang")`: a Dynamo backend through AOT autograd.

Dynamo captures torch-level FX graphs; AOT autograd functionalizes them and decomposes
them to core ATen (keeping whole the ops schedlang lowers natively, such as silu), and
hands each ATen graph to `schedlang.torch.compile_fx`, which lowers, fuses, schedules and
builds it. Options go through torch.compile's `options=`:

    torch.compile(model, backend="schedlang")                             # the host CPU
    torch.compile(model, backend="schedlang", options={"target": "cuda"})

The backend is meant for inference (under `torch.no_grad()` or `torch.inference_mode()`).
When gradients are needed, the forward graph is still compiled by schedlang and the
backward graph runs in PyTorch.

The name "schedlang" resolves without importing anything, through the package's
`torch_dynamo_backends` entry point (pyproject.toml); importing this module registers it
too, for checkouts that are not pip-installed.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

BACKEND_NAME = "schedlang"
OPTIONS = {"target": "the schedlang target: 'llvm' (default), 'cuda' or a target string"}


def _eager_backward(gm: torch.fx.GraphModule, example_inputs: Sequence) -> Callable:
    """The backward graph, run by PyTorch (schedlang compiles inference graphs)."""
    return make_boxed_func(gm.forward)


def schedlang_backend(gm: torch.fx.GraphModule, example_inputs: Sequence,
                      options: Optional[Dict[str, object]] = None, mode: Optional[str] = None) -> Callable:
    """The Dynamo backend: compile gm's ATen forward graph with schedlang.torch.compile_fx."""
    if mode is not None:
        raise ValueError(f"torch.compile(backend={BACKEND_NAME!r}) has no modes (got mode={mode!r}); "
                         f"choose the target with options={{'target': ...}}")
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"torch.compile(backend={BACKEND_NAME!r}) has no option {unknown[0]!r}; its options are: "
                         + "; ".join(f"{k}: {v}" for k, v in OPTIONS.items()))
    target = options.get("target", "llvm")
    from . import compile_fx, decomposition_table

    def forward_compiler(aten_gm: torch.fx.GraphModule, aten_inputs: Sequence) -> Callable:
        tensors = sizes_from_tensors(aten_gm, aten_inputs)
        compiled = compile_fx(aten_gm, [aten_inputs[k] for k in tensors], target=target)
        if len(tensors) == len(aten_inputs):
            return compiled if getattr(compiled, "_boxed_call", False) else make_boxed_func(compiled)
        return make_boxed_func(lambda *args: compiled(*[args[k] for k in tensors]))

    backend = aot_autograd(fw_compiler=forward_compiler, bw_compiler=_eager_backward,
                           decompositions=dict(decomposition_table().items()))
    return backend(gm, example_inputs)


def sizes_from_tensors(gm: torch.fx.GraphModule, example_inputs: Sequence) -> List[int]:
    """With dynamic shapes, AOT autograd passes each symbolic size as an input of its own
    (a SymInt placeholder) beside the tensors that have it. Read each such size from a
    tensor's shape instead (aten.sym_size.int), which schedlang knows from the tensor,
    and remove it from the graph's inputs. Returns the positions of the remaining inputs."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tensors = [k for k, x in enumerate(example_inputs) if not isinstance(x, torch.SymInt)]
    if len(tensors) == len(placeholders):
        return tensors
    where = {}                                       # sympy expression -> (tensor node, dim)
    for k in tensors:
        x = example_inputs[k]
        for d, size in enumerate(getattr(x, "shape", ())):
            if isinstance(size, torch.SymInt):
                where.setdefault(size.node.expr, (placeholders[k], d))
    last = placeholders[-1]
    for node, x in zip(placeholders, example_inputs):
        if not isinstance(x, torch.SymInt):
            continue
        if x.node.expr not in where:
            raise NotImplementedError(
                f"schedlang: the graph input {node.name} is the size {x.node.expr}, which is no dimension of an "
                f"input tensor; compile with torch.compile(..., dynamic=False)")
        tensor, dim = where[x.node.expr]
        with gm.graph.inserting_after(last):
            size = gm.graph.call_function(torch.ops.aten.sym_size.int, (tensor, dim))
        size.meta["val"] = x
        node.replace_all_uses_with(size)
        gm.graph.erase_node(node)
    gm.recompile()
    return tensors


def register() -> None:
    """Make backend="schedlang" known to torch.compile, unless the installed package's entry
    point already does (registering both would make torch refuse the duplicate name)."""
    from torch._dynamo.backends import registry
    try:
        registry._discover_entrypoint_backends()          # fills _BACKENDS from entry points, once
        known = BACKEND_NAME in registry._BACKENDS or BACKEND_NAME in registry._COMPILER_FNS
    except AttributeError:                                # a torch whose private registry differs
        known = BACKEND_NAME in torch._dynamo.list_backends(exclude_tags=())
    if not known:
        registry.register_backend(compiler_fn=schedlang_backend, name=BACKEND_NAME)


register()
