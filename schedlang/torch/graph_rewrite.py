"""Helpers of the Torch IR rewrites that replace one node by several ATen nodes before
lowering (subpixel.py, conv3d_slices.py): walking a graph's nodes, and making the new nodes
with names of their own, the last one taking the replaced node's name so that its readers
read it."""
from __future__ import annotations

from typing import Callable, List, Optional

from .ops.registry import op_name
from .torch_ir import Ref, TorchGraph, TorchNode

FLOATS = ("float32", "float64")      # the dtypes the rewrites take


def static_ints(values) -> bool:
    """Every value is a Python int (a static extent, stride or padding)."""
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def rewrite_nodes(graph: TorchGraph, rewrite: Callable[[TorchGraph, TorchNode, set], Optional[List[TorchNode]]]) \
        -> TorchGraph:
    """graph with each node that rewrite(graph, node, taken names) replaces by a list of nodes
    replaced (the graph itself when none is)."""
    taken = {i.name for i in graph.inputs} | {n.name for n in graph.nodes}
    nodes: List[TorchNode] = []
    changed = False
    for n in graph.nodes:
        new = rewrite(graph, n, taken)
        nodes.extend([n] if new is None else new)
        changed = changed or new is not None
    if not changed:
        return graph
    return TorchGraph(graph.inputs, nodes, graph.outputs, graph.output_kind, graph.size_vars, graph.out_spec)


def new_node(name: str, target, args, shape, dtype, taken: set, kwargs=None) -> TorchNode:
    """A node of target named name (with "_" added until it is not in taken; then taken),
    its short op name the ATen packet's ("sort" for aten.sort.default)."""
    while name in taken:
        name += "_"
    taken.add(name)
    return TorchNode(name, op_name(target).split(".")[1], target, tuple(args), dict(kwargs or {}), shape, dtype)


class NodeMaker:
    """The nodes replacing `replaced`, all of its dtype: node() adds one named
    `<replaced>_<suffix>` (made unique), done() returns them with the last renamed to
    `replaced`'s name."""

    def __init__(self, replaced: TorchNode, taken: set):
        self.replaced, self.taken, self.made = replaced, taken, []

    def node(self, suffix: str, target, args, shape, kwargs=None) -> Ref:
        made = new_node(f"{self.replaced.name}_{suffix}", target, args, list(shape), self.replaced.dtype,
                        self.taken, kwargs)
        self.made.append(made)
        return Ref(made.name)

    def done(self) -> List[TorchNode]:
        last = self.made[-1]
        self.made[-1] = TorchNode(self.replaced.name, last.op, last.target, last.args, last.kwargs, last.shape,
                                  last.dtype)
        return self.made
