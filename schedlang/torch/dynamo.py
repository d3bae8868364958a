"""`torch.compile(module, backend="schedlang")`: a Dynamo backend through AOT autograd.

Dynamo captures torch-level FX graphs; AOT autograd functionalizes them and decomposes
them to core ATen (keeping whole the ops schedlang lowers natively, such as silu), and
hands each ATen graph to `schedlang.torch.compile_fx`, which lowers, fuses, schedules and
builds it. Options go through torch.compile's `options=`:

    torch.compile(model, backend="schedlang")                             # the host CPU
    torch.compile(model, backend="schedlang", options={"target": "cuda"})
    torch.compile(model, backend="schedlang", options={"log": "tune.jsonl"})   # tuned kernels

The backend is meant for inference (under `torch.no_grad()` or `torch.inference_mode()`).
There, as Inductor's freezing does, the module's parameters and buffers are the compiled
graph's state, not plain inputs (freeze_state): schedlang packs weights (prepack.py) and
fuses matmul epilogues as schedlang.torch.compile does, and the linear layers AOT autograd
decomposes (t + mm / addmm, between views) are folded back (fold_linear), so both paths
lower the same ops and build the same kernels. Unlike Inductor's freezing, nothing is baked
in: Dynamo passes the parameters at every call and the compiled module reads them there
(packed copies are made again when a parameter changes: state.py), so a parameter updated
in place or replaced after compiling is never silently stale.
When gradients are needed, the forward graph is still compiled by schedlang (parameters as
plain inputs) and the backward graph runs in PyTorch.

The name "schedlang" resolves without importing anything, through the package's
`torch_dynamo_backends` entry point (pyproject.toml); importing this module registers it
too, for checkouts that are not pip-installed.
"""
from __future__ import annotations

import contextlib
import operator
import os
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

BACKEND_NAME = "schedlang"
OPTIONS = {"target": "the schedlang target: 'llvm' (default), 'cuda' or a target string",
           "log": "a tuning log (schedlang.torch.compile(..., tune=N, log=...), `schedlang tune`): each kernel "
                  "with a record there is built from its best one"}


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
    log = options.get("log")
    if log is not None and not isinstance(log, (str, bytes)) and not hasattr(log, "__fspath__"):
        raise TypeError(f"torch.compile(backend={BACKEND_NAME!r}): options['log'] is a path to a tuning log, "
                        f"got {type(log).__name__}")
    log = None if log is None else os.fsdecode(log)
    if log is not None and not os.path.isfile(log):     # only read here: a wrong path is a mistake
        raise FileNotFoundError(f"torch.compile(backend={BACKEND_NAME!r}): options['log']: no tuning log {log!r}")
    from . import compile_fx, decomposition_table

    kinds = input_kinds(gm, example_inputs) if not torch.is_grad_enabled() else None

    def forward_compiler(aten_gm: torch.fx.GraphModule, aten_inputs: Sequence) -> Callable:
        tokens = drop_effect_tokens(aten_gm)
        if tokens:
            return with_tokens(tokens, forward_compiler(aten_gm, aten_inputs[tokens:]))
        views = input_views(aten_gm)
        if views:
            return with_input_views(views, compile_graph(aten_gm, aten_inputs))
        return compile_graph(aten_gm, aten_inputs)

    def compile_graph(aten_gm: torch.fx.GraphModule, aten_inputs: Sequence) -> Callable:
        if kinds is not None and len(aten_inputs) == len(kinds):    # AOT autograd kept the inputs one to one
            return compile_frozen(aten_gm, aten_inputs, kinds, example_inputs, target, log)
        tensors = sizes_from_tensors(aten_gm, aten_inputs)
        compiled = compile_fx(aten_gm, [aten_inputs[k] for k in tensors], target=target, log=log)
        if len(tensors) == len(aten_inputs):
            return compiled if getattr(compiled, "_boxed_call", False) else make_boxed_func(compiled)
        return make_boxed_func(lambda *args: compiled(*[args[k] for k in tensors]))

    from .fastpath import decompositions
    backend = aot_autograd(fw_compiler=forward_compiler, bw_compiler=_eager_backward,
                           decompositions={**decomposition_table(), **decompositions()})
    if kinds is None:
        return backend(gm, example_inputs)
    with keeping_lowered_composites():      # AOT autograd traces (and compiles) inside the call
        return backend(gm, example_inputs)


@contextlib.contextmanager
def keeping_lowered_composites():
    """While AOT autograd traces an inference graph: keep whole the composite ops
    (CompositeImplicitAutograd: linear, matmul, layer_norm, scaled_dot_product_attention
    ...) that schedlang lowers, as torch.export's run_decompositions does when they are not
    in the table (export.decomposition_table), so that both paths hand schedlang the same
    ops. Only ops torch deems safe to keep (functional ones); with a torch whose private
    export helpers differ, nothing is kept (fold_linear still folds linear layers)."""
    try:
        from torch._export.utils import _is_preservable_cia_op, _special_op_to_preserve_cia
        from torch.export.exported_program import _override_composite_implicit_decomp
    except ImportError:
        yield
        return
    from .ops.registry import LOWERINGS
    keep = {}
    for name in LOWERINGS:
        op = _overload(name)
        if op is not None and _is_preservable_cia_op(op):
            keep[op] = _special_op_to_preserve_cia
    with _override_composite_implicit_decomp(keep):
        yield


def _overload(name: str):
    """torch.ops.aten.linear.default for "aten.linear.default" (or for "aten.linear"), or None."""
    parts = name.split(".")
    packet = getattr(getattr(torch.ops, parts[0], None), parts[1], None) if len(parts) >= 2 else None
    if packet is None:
        return None
    return getattr(packet, parts[2] if len(parts) > 2 else "default", None)


_SOURCE_STEP = re.compile(r"\._(modules|parameters|buffers)\['([^']+)'\]")
_ARGUMENT = re.compile(r"L\['(\w+)'\]")


def input_kinds(gm: torch.fx.GraphModule, example_inputs: Sequence) -> List[Tuple[str, Optional[str]]]:
    """(kind, name) of each input of a Dynamo graph, from the source Dynamo read it from:
    ("parameter" | "buffer", its dotted name in the module) for the module's state,
    ("input", the argument's name or None) for everything else."""
    out: List[Tuple[str, Optional[str]]] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, x in zip(placeholders, example_inputs):
        source = getattr(node.meta.get("grapharg"), "source", None)
        text = str(getattr(source, "name", "")) if source is not None else ""
        steps = _SOURCE_STEP.findall(text)
        if isinstance(x, torch.Tensor) and steps and steps[-1][0] in ("parameters", "buffers"):
            out.append(("parameter" if steps[-1][0] == "parameters" else "buffer", ".".join(n for _, n in steps)))
        else:
            arg = _ARGUMENT.fullmatch(text)
            out.append(("input", arg.group(1) if arg else None))
    return out


def compile_frozen(aten_gm: torch.fx.GraphModule, aten_inputs: Sequence, kinds: List[Tuple[str, Optional[str]]],
                   real_inputs: Sequence, target, log: Optional[str] = None) -> Callable:
    """The boxed callable of an inference graph whose parameters and buffers (kinds) are its
    state: they are passed by Dynamo at each call and handed to the compiled module as state
    (CompiledModule.call_with_state), the other tensors as its inputs."""
    from . import compile_fx
    tensors = sizes_from_tensors(aten_gm, aten_inputs)
    fold_linear(aten_gm)
    placeholders = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
    # every placeholder is named, so graph_from_fx keeps them in the graph's order
    named = {node.name: ("size", node.name, aten_inputs[k]) if isinstance(aten_inputs[k], torch.SymInt)
             else (kinds[k][0], kinds[k][1] or node.name, real_inputs[k]) for node, k in zip(placeholders, tensors)}
    compiled = compile_fx(aten_gm, [aten_inputs[k] for k in tensors], target=target, inputs=named, log=log)
    graph = compiled.graph
    user = [k for k in tensors if kinds[k][0] == "input"]
    given = [(i.name, k) for i, k in zip(graph.inputs, tensors) if i.kind not in ("input", "size")]

    def run(*args):
        return compiled.call_with_state([args[k] for k in user], {name: args[k] for name, k in given})
    run.compiled = compiled          # for tests and tools: the CompiledModule behind the graph
    return make_boxed_func(run)


def fold_linear(gm: torch.fx.GraphModule) -> int:
    """Fold the linear layers AOT autograd decomposed back into aten.linear, the op
    torch.export keeps whole (so schedlang packs the weight and fuses the epilogue as the
    export path does): mm(x, t(w)) -> linear(x, w); addmm(b, x, t(w)) -> linear(x, w, b)
    (b 1-d, beta = alpha = 1); then view(linear(view(x, [M, K]), ...), lead + [N]) ->
    linear(x, ...) when x is lead + [K]. Returns the number of linears made."""
    aten = torch.ops.aten
    views = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
    graph, made = gm.graph, 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.kwargs:
            continue
        if node.target is aten.mm.default:
            (x, wt), bias = node.args, None
        elif node.target is aten.addmm.default and len(node.args) == 3:
            bias, x, wt = node.args
            if not isinstance(bias, torch.fx.Node) or bias.meta["val"].dim() != 1:
                continue
        else:
            continue
        if not (isinstance(wt, torch.fx.Node) and wt.target is aten.t.default and wt.meta["val"].dim() == 2):
            continue
        with graph.inserting_after(node):
            linear = graph.call_function(aten.linear.default, (x, wt.args[0]) + ((bias,) if bias is not None else ()))
        linear.meta = dict(node.meta)
        node.replace_all_uses_with(linear)
        graph.erase_node(node)
        made += 1
        users = list(linear.users)
        if x.target in views and len(users) == 1 and users[0].target in views:
            inner, outer = x.args[0], users[0]
            lead_in, lead_out = inner.meta["val"].shape[:-1], outer.meta["val"].shape[:-1]
            if len(lead_in) == len(lead_out) and all(str(a) == str(b) for a, b in zip(lead_in, lead_out)):
                linear.args = (inner,) + linear.args[1:]
                linear.meta = dict(outer.meta)
                outer.replace_all_uses_with(linear)
                graph.erase_node(outer)
    if made:
        graph.eliminate_dead_code()
        gm.recompile()
    return made


def drop_effect_tokens(gm: torch.fx.GraphModule) -> int:
    """AOT autograd threads a token through the ops it runs for their side effects (linalg's
    error checks: `with_effects(token, aten._linalg_check_errors, info, ...)`); the tokens are
    the graph's first inputs and outputs, and None at run time. Make each with_effects a call
    of its op (kept by graph_from_fx, run in torch) and remove the tokens from the graph's
    inputs and outputs; returns how many there were (0: gm is unchanged)."""
    with_effects = getattr(torch.ops.higher_order, "with_effects", None)
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is with_effects]
    if not calls:
        return 0
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for call in calls:
        token, op, *args = call.args
        with gm.graph.inserting_before(call):
            effect = gm.graph.call_function(op, tuple(args), dict(call.kwargs))
        effect.meta["val"] = None
        for user in list(call.users):
            if user.target is not operator.getitem or user.args[1] != 0:
                raise NotImplementedError(f"schedlang: {op} has side effects and results; only effects "
                                          "without results (checks) are supported")
            user.replace_all_uses_with(token)
            gm.graph.erase_node(user)
        gm.graph.erase_node(call)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(output.args[0])
    count = 0
    while count < len(placeholders) and count < len(outs) and outs[count] is placeholders[count]:
        count += 1
    if any(placeholders[k].users.keys() - {output} for k in range(count)):
        raise NotImplementedError("schedlang: an effect token of the graph is read by a tensor op")
    output.args = (type(output.args[0])(outs[count:]),)
    for node in placeholders[:count]:
        gm.graph.erase_node(node)
    gm.recompile()
    return count


def input_views(gm: torch.fx.GraphModule) -> Optional[Tuple[List[int], torch.fx.GraphModule]]:
    """The positions of gm's outputs that are views of its inputs (they share an input's storage
    in the traced values), and a graph module computing just those, by gm's own view ops; None
    when no output is one. Eager returns such a view, and torch relies on it after the graph:
    AOT autograd rebuilds an output that aliases an input from that input, and where it cannot
    replay the views (symbolic sizes: a graph compiled for a second shape) by as_strided with
    the size, strides and offset of what the compiled module returned, so a contiguous copy of a
    permuted view read the wrong elements (timm's Sequencer, whose LSTMs read such views)."""
    from torch.multiprocessing.reductions import StorageWeakRef
    storages = {StorageWeakRef(n.meta["val"].untyped_storage()) for n in gm.graph.nodes
                if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)}
    outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    picked = [j for j, out in enumerate(outs) if isinstance(out, torch.fx.Node)
              and isinstance(out.meta.get("val"), torch.Tensor)
              and StorageWeakRef(out.meta["val"].untyped_storage()) in storages]
    if not picked:
        return None
    graph = torch.fx.Graph()
    copied = graph.graph_copy(gm.graph, {})
    graph.output(tuple(copied[j] for j in picked))
    graph.eliminate_dead_code()          # what is left: the inputs and the view ops
    return picked, torch.fx.GraphModule(gm, graph)


def with_input_views(views, compiled: Callable) -> Callable:
    """The boxed callable that returns, at the positions of views (input_views), the views of
    the inputs eager returns in place of the compiled module's tensors of the same values."""
    picked, view_gm = views

    def run(args):
        given = list(args)                   # (a boxed callee may clear args)
        outs = list(compiled(args))
        for j, view in zip(picked, view_gm(*given)):
            outs[j] = view
        return outs
    run._boxed_call = True
    run.compiled = getattr(compiled, "compiled", None)
    return run


def with_tokens(count: int, compiled: Callable) -> Callable:
    """The boxed callable AOT autograd calls with `count` effect tokens (None) before the
    inputs of compiled, and that returns them before its outputs."""
    def run(args):
        outs = compiled(list(args[count:]))
        return [None] * count + list(outs)
    run._boxed_call = True
    run.compiled = getattr(compiled, "compiled", None)
    return run


def sizes_from_tensors(gm: torch.fx.GraphModule, example_inputs: Sequence) -> List[int]:
    """With dynamic shapes, AOT autograd passes each symbolic size as an input of its own
    (a SymInt placeholder) beside the tensors that have it. Read each such size from a
    tensor's shape instead (aten.sym_size.int), which schedlang knows from the tensor,
    and remove it from the graph's inputs; one the graph does not read (the symbolic strides
    of a strided view handed over a graph break) is removed too. A size no tensor has (an
    int argument of the function, made symbolic when it changed between calls) stays an
    input: the compiled module's size input. Returns the positions of the remaining inputs."""
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
    kept = []
    for k, (node, x) in enumerate(zip(placeholders, example_inputs)):
        if not isinstance(x, torch.SymInt):
            continue
        if x.node.expr not in where and not node.users:
            gm.graph.erase_node(node)                # a stride of a strided input, say: unused
            continue
        if x.node.expr not in where:
            kept.append(k)                           # an int argument of the function (x[:, :n]):
            continue                                 # a size input of the compiled module
        tensor, dim = where[x.node.expr]
        with gm.graph.inserting_after(last):
            size = gm.graph.call_function(torch.ops.aten.sym_size.int, (tensor, dim))
        size.meta["val"] = x
        node.replace_all_uses_with(size)
        gm.graph.erase_node(node)
    gm.recompile()
    return sorted(tensors + kept)


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
