"""The model-level disk cache: a process compiling a model some process compiled before
(same captured graph, target and versions) skips lowering, fusion and scheduling and loads
each part's module straight from the kernel cache.

An entry (folder "models" of the cache, disk.py: atomic whole-file writes, full key text
stored and compared, size cap shared with the kernel cache) is keyed by:
- the canonical content of the captured Torch IR graph (graph_json: every input's name,
  shape, dtype, kind and state name; every node's op, ATen overload, arguments, shapes and
  dtypes; the outputs), never object ids or tensor values: the weights are read from the
  module at each call (state.py) and packed from them (prepack.py), as without the cache;
- the resolved target with every option (CPU name and features), the versions that affect
  code (kernel_cache.versions(): schedlang's version and source hash, llvmlite, LLVM) and
  torch's version;
- the content hash of the tuning log when one is given.
It holds the call plan (plan_json: each part's inputs and outputs by name with their static
shapes and dtypes, aliases and guard checks; the packed-weight specs, a folded value's by the
name of the node it folds, made again from the graph on load) and, per part, the key
text of its module's kernel-cache entry. Any piece missing (an evicted kernel entry) makes
it a miss, and the model is compiled as before.

Only programs that are whole parts are stored: static shapes, no step left to torch (a
graph with fallback ops or dynamic sizes is compiled each time, its kernels still found in
the kernel cache), nor while a lowering registered from outside schedlang is in the table.
The switches of the kernel cache turn it off too (SCHEDLANG_KERNEL_CACHE=0,
kernel_cache.ENABLED, build_cache.ENABLED).
"""
from __future__ import annotations

import builtins
import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

import schedlang as sl
from schedlang import build_cache, errors, kernel_cache
from schedlang.disk import write_entry

from .const_fold import fold_plan
from .lower import LoweredProgram, Part, TorchStep
from .ops import conv_winograd
from .prepack import PackSpec
from .torch_ir import Ref, TorchGraph

FOLDER = "models"


@dataclass
class ModelStats:
    """Counters of this process: loads (models answered from disk), stores, misses (keyed,
    not found or incomplete)."""

    loads: int = 0
    stores: int = 0
    misses: int = 0


stats = ModelStats()


class _NotKeyable(Exception):
    pass


# ---------------------------------------------------------------- the key
def _canon(value) -> Any:
    """A JSON form of a node argument that says exactly what it is (raises _NotKeyable for
    anything else: such a graph is not cached)."""
    import torch
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": value.hex()}             # -0.0, nan and inf kept exactly
    if isinstance(value, Ref):
        return {"ref": value.name}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [_canon(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[k, _canon(v)] for k, v in value.items()]}
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return {type(value).__name__: str(value)}
    if isinstance(value, sl.Expr):
        raise _NotKeyable("a size expression")
    if isinstance(value, torch._ops.OpOverload):
        return {"op": str(value)}
    if isinstance(value, type(len)) and value.__module__ in ("_operator", "operator", "builtins"):
        return {"builtin": f"{value.__module__}.{value.__name__}"}
    raise _NotKeyable(type(value).__name__)


def _shape(shape) -> List[int]:
    if not all(isinstance(e, int) for e in shape):
        raise _NotKeyable("a symbolic shape")
    return list(shape)


def graph_json(graph: TorchGraph) -> list:
    """The graph's content, canonical: equal for equal graphs in any process."""
    if graph.size_vars:
        raise _NotKeyable("size variables")
    inputs = [[i.name, _shape(i.shape), i.dtype, i.kind, i.target] for i in graph.inputs]
    nodes = []
    for n in graph.nodes:
        shape = [_shape(s) for s in n.shape] if n.multi else _shape(n.shape)
        nodes.append([n.name, n.op, _canon(n.target), _canon(n.args), _canon(n.kwargs), shape, n.dtype,
                      _canon(n.display_kwargs)])
    return [inputs, nodes, _canon(list(graph.outputs)), graph.output_kind]


def _outside_lowerings() -> bool:
    """Whether a lowering registered from outside schedlang is in the table: what it makes of
    a graph is in no version the key holds (the kernel cache, keyed by the program, still
    serves such models)."""
    from .ops.registry import LOWERINGS
    return any(not getattr(fn, "__module__", "").startswith("schedlang.") for fn in LOWERINGS.values())


def key_text(graph: TorchGraph, target, log: Optional[str]) -> Optional[str]:
    """The full key text of graph compiled for target (with the tuning log's content), or
    None when it is not cached (not keyable, or the cache is off for target)."""
    if not (build_cache.ENABLED and kernel_cache.cacheable(target)) or _outside_lowerings():
        return None
    import torch
    from dataclasses import asdict
    try:
        content = graph_json(graph)
    except _NotKeyable:
        return None
    log_hash = None
    if log is not None:
        try:
            with open(log, "rb") as f:
                log_hash = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            return None                   # the build will say what is wrong with it
    # A switch that changes what the lowerings make of the graph is in the key: a process that
    # turns Winograd off (conv_layer_ab.py's A/B, tests of the direct kernels) must not be
    # served a plan built with it.
    switches = {"winograd": bool(conv_winograd.ENABLED)}
    return json.dumps({"versions": kernel_cache.versions(), "torch": torch.__version__, "graph": content,
                       "target": {"kind": target.kind, "options": asdict(target.options)}, "log": log_hash,
                       "switches": switches},
                      sort_keys=True, default=str)


# ---------------------------------------------------------------- the plan
@dataclass
class _Type:
    """What a call needs of a part's value: its shape and dtype."""

    shape: Tuple[int, ...]
    dtype: str


@dataclass
class CachedPlan:
    """What CompiledModule runs, from the cache: the steps (parts whose values carry only
    shape and dtype) and the packed-weight specs. No Tensor IR: CompiledModule.program
    lowers the graph again when asked."""

    steps: List[Part]
    packs: Dict[str, PackSpec]
    fallbacks: List[str] = field(default_factory=list)

    @property
    def parts(self) -> List[Part]:
        return list(self.steps)

    def fallback_counts(self, include_static_only: bool = True) -> Dict[str, int]:
        return {}

    def needs_static_shapes(self) -> bool:
        return False


def _error_name(error: type) -> str:
    if getattr(builtins, error.__name__, None) is error or getattr(errors, error.__name__, None) is error:
        return error.__name__
    raise _NotKeyable(f"the error {error!r}")


def _error(name: str) -> type:
    error = getattr(builtins, name, None) or getattr(errors, name, None)
    if not (isinstance(error, type) and issubclass(error, Exception)):
        raise ValueError(name)
    return error


def plan_json(program: LoweredProgram, modules: Dict[int, Any]) -> Optional[dict]:
    """The call plan of a lowered program and the kernel-cache key text of each part's
    module, as JSON, or None when it cannot be stored (a torch step, a symbolic shape, a
    module not in the kernel cache)."""
    try:
        if any(isinstance(s, TorchStep) for s in program.steps):
            raise _NotKeyable("a torch step")
        parts = []
        for p in program.steps:
            kernel = getattr(modules.get(p.index), "disk_key", None)
            if not isinstance(kernel, str):
                raise _NotKeyable("a module not on disk")
            parts.append({"index": p.index, "kernel": kernel, "aliases": dict(p.aliases),
                          "inputs": [[n, _shape(t.shape), str(t.dtype)] for n, t in p.inputs],
                          "outputs": [[n, _shape(t.shape), str(t.dtype)] for n, t in p.outputs],
                          "checks": {n: [_error_name(e), m] for n, (e, m) in p.checks.items()}})
        packs = {n: [s.source, s.width, s.kind, list(s.more), _pack_params(s)] for n, s in program.packs.items()}
    except _NotKeyable:
        return None
    return {"parts": parts, "packs": packs}


def _pack_params(spec: PackSpec):
    """A pack spec's params as JSON. A folded value's (kind "fold": a FoldGraph of the graph's
    own nodes, const_fold.py) by the name of the node it folds: the graph, which the key holds
    whole, gives it again (_plan). Stored whole, its nodes were not keyable, so a model with a
    folded value (Llama's rotary tables) was never stored."""
    if spec.kind == "fold":
        return {"fold": spec.params[0].output}
    return _canon(list(spec.params))


def _unpack_params(value, folds):
    if isinstance(value, dict) and set(value) == {"fold"}:
        return (folds().roots[value["fold"]],)
    return tuple(_uncanon(value))


def _uncanon(value):
    if isinstance(value, dict):
        (kind, v), = value.items()
        if kind == "float":
            return float.fromhex(v)
        if kind in ("list", "tuple"):
            return [_uncanon(x) for x in v] if kind == "list" else tuple(_uncanon(x) for x in v)
        raise ValueError(kind)
    return value


def _plan(data: dict, graph: TorchGraph) -> CachedPlan:
    steps = []
    for p in data["parts"]:
        steps.append(Part(int(p["index"]), [(n, _Type(tuple(s), d)) for n, s, d in p["inputs"]],
                          [(n, _Type(tuple(s), d)) for n, s, d in p["outputs"]], dict(p["aliases"]),
                          {n: (_error(e), m) for n, (e, m) in p["checks"].items()}))
    folds = lru_cache(maxsize=1)(lambda: fold_plan(graph))      # made only where a plan has a fold
    packs = {n: PackSpec(src, int(width), kind, tuple(more), _unpack_params(params, folds))
             for n, (src, width, kind, more, params) in data["packs"].items()}
    return CachedPlan(steps, packs)


# ---------------------------------------------------------------- load and store
def load(text: Optional[str], target, graph: TorchGraph) -> Optional[Tuple[CachedPlan, Dict[int, Any]]]:
    """(plan, part index -> module) stored for graph's key text, or None."""
    if text is None:
        return None
    entry = kernel_cache.read(FOLDER, text)
    if entry is None:
        stats.misses += 1
        return None
    data = entry[0].get("plan")
    try:
        plan = _plan(data, graph)
        keys = {p["index"]: p["kernel"] for p in data["parts"]}
    except (TypeError, ValueError, KeyError, AttributeError):     # an entry of another layout
        kernel_cache.stats.rejected += 1
        return None
    modules = {}
    for index, kernel in keys.items():
        module = kernel_cache.load_text(kernel, target)
        if module is None:                 # evicted: compile as before (and store again)
            stats.misses += 1
            return None
        modules[index] = module
    stats.loads += 1
    return plan, modules


def store(text: Optional[str], program: LoweredProgram, modules: Dict[int, Any]) -> None:
    """Store the plan of program built into modules under a key text (when it can be)."""
    if text is None:
        return
    data = plan_json(program, modules)
    if data is None:
        return
    def write():
        try:
            write_entry(FOLDER, text, {"plan": data}, b"")
        except OSError:
            kernel_cache.stats.failed += 1
            return
        stats.stores += 1
    kernel_cache.later(write, FOLDER, text)      # after its kernels' entries (kernel_cache.deferred)

