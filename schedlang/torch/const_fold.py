"""Values computed from the module's state alone, folded into constants (as Inductor's
freezing and TVM's FoldConstant do).

A model may compute a tensor from its parameters and buffers only: NF-Nets' and BiT's
standardized convolution weights (a batch norm in training mode over each filter), weight
normalization (g * v / |v|), Swin's relative position bias gathered from its table. Lowered,
such a convolution reads a computed weight: it cannot be packed (prepack.py), so it runs on
the slow rows of a weight that is not a constant, and the weight is computed again at every
call. Folded, the value is a constant of the compiled module (prepack.py kind "fold"): torch
computes it from the state tensors with the graph's own ops, at the first call and again
when a source changes (as a packed weight is made again), and a convolution packs it as it
packs a parameter.

`fold_plan` finds the folded values of a graph: the nodes every input of which is a state
input or another such node (never a user input or a size), of static shape, deterministic,
that a node outside them reads; a value folded only where the nodes computing it do more
than view the state (a transposed or reshaped weight stays a view the lowerings see through)
or a convolution reads it as its weight, and is at most MAX_ELEMENTS large.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Set, Tuple

from .dtypes import torch_only
from .torch_ir import Ref, TorchGraph, TorchNode, map_refs

# Ops that only view or copy their input (Torch IR's short op names): a value made of them
# alone is not folded.
VIEW_OPS = frozenset(("view", "_unsafe_view", "reshape", "permute", "t", "transpose", "expand", "unsqueeze",
                      "squeeze", "slice", "select", "alias", "detach", "clone", "contiguous", "lift_fresh_copy",
                      "_to_copy", "to", "getitem", "view_as", "reshape_as", "flatten", "unflatten"))
RANDOM_WORDS = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "poisson", "exponential",
                "cauchy", "geometric", "log_normal", "empty")
MAX_ELEMENTS = 1 << 26     # a larger folded value is computed by the kernels (memory: one copy kept)


@dataclass(eq=False)
class FoldGraph:
    """The nodes computing one folded value from state inputs (sources, in order), run in torch."""

    sources: Tuple[str, ...]
    nodes: List[TorchNode]
    output: str
    shape: Tuple[int, ...]
    dtype: str

    def run(self, tensors):
        """The folded value from the source tensors (in sources' order), a fresh contiguous tensor."""
        import torch
        env = dict(zip(self.sources, tensors))
        with torch.no_grad():
            for n in self.nodes:
                args = map_refs(n.args, lambda r: env[r.name])
                kwargs = map_refs(n.kwargs, lambda r: env[r.name])
                env[n.name] = n.target(*args, **kwargs)
        # one copy, never a view of a state tensor
        return env[self.output].detach().clone(memory_format=torch.contiguous_format)

    def __repr__(self) -> str:
        return f"FoldGraph({self.output} from {', '.join(self.sources)}: {' -> '.join(n.op for n in self.nodes)})"


@dataclass
class FoldPlan:
    """roots: node name -> its FoldGraph; skipped: constant nodes only folded values read."""

    roots: Dict[str, FoldGraph]
    skipped: Set[str]


def fold_plan(graph: TorchGraph) -> FoldPlan:
    """The values of graph to fold into constants and the nodes folding makes unused."""
    state = {i.name for i in graph.state_inputs}
    if not state:
        return FoldPlan({}, set())
    nodes = {n.name: n for n in graph.nodes}
    constant: Set[str] = set()
    for n in graph.nodes:           # (a node of no inputs, arange: constant too, folded only beside state)
        if all(r in state or r in constant for r in n.refs()) and _foldable_op(n) and _static(n):
            constant.add(n.name)
    readers: Dict[str, List[str]] = {}
    for n in graph.nodes:
        for r in n.refs():
            readers.setdefault(r, []).append(n.name)
    outputs = {o.name for o in graph.outputs if isinstance(o, Ref)}
    roots: Dict[str, FoldGraph] = {}
    for name in constant:
        n = nodes[name]
        if n.multi or torch_only(n.dtype) or not any(r not in constant for r in readers.get(name, ())):
            continue
        if not 0 < math.prod(n.shape) <= MAX_ELEMENTS:
            continue
        members = _ancestors(name, nodes, constant)
        if all(nodes[m].op in VIEW_OPS for m in members) and not _conv_weight(name, readers, nodes):
            continue
        order = [m.name for m in graph.nodes if m.name in members]
        sources = []
        for m in order:
            for r in nodes[m].refs():
                if r in state and r not in sources:
                    sources.append(r)
        if not sources:
            continue                  # (sizes alone: the kernels compute it)
        roots[name] = FoldGraph(tuple(sources), [nodes[m] for m in order], name, tuple(n.shape), str(n.dtype))
    inside = set().union(*(set(_ancestors(r, nodes, constant)) for r in roots)) if roots else set()
    skipped: Set[str] = set()
    for n in reversed(graph.nodes):       # readers before what they read
        name = n.name
        if name in inside and name not in roots and name not in outputs \
                and all(r in roots or r in skipped for r in readers.get(name, ())):
            skipped.add(name)
    return FoldPlan(roots, skipped)


def _conv_weight(name: str, readers: Dict[str, List[str]], nodes: Dict[str, TorchNode]) -> bool:
    """A convolution reads value name as its weight: folded even where it only views the state
    (a 3-d weight viewed 2-d, conv3d_slices.py), since a convolution packs a constant alone."""
    for r in readers.get(name, ()):
        n = nodes.get(r)
        if n is not None and n.op == "convolution" and len(n.args) > 1 and isinstance(n.args[1], Ref) \
                and n.args[1].name == name:
            return True
    return False


def _foldable_op(n: TorchNode) -> bool:
    """A deterministic op that torch can run again on the same state (no random numbers, no
    uninitialized memory, no in-place write)."""
    op = n.op.lower()
    return not any(w in op for w in RANDOM_WORDS) and not (op.endswith("_") and not op.endswith("__"))


def _static(n: TorchNode) -> bool:
    """Every result of n has a static shape."""
    shapes = n.shape if n.multi else [n.shape]
    return all(isinstance(sh, (tuple, list)) and all(isinstance(e, int) for e in sh) for sh in shapes)


def _ancestors(name: str, nodes: Dict[str, TorchNode], constant: Set[str]) -> Set[str]:
    """name and the constant nodes it reads, transitively."""
    found, work = set(), [name]
    while work:
        m = work.pop()
        if m in found:
            continue
        found.add(m)
        work.extend(r for r in nodes[m].refs() if r in constant)
    return found
