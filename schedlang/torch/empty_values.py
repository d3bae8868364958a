"""Tensors with no elements, taken out of a captured graph before lowering (schedlang tensors
have positive extents). transformers' key/value cache starts as `torch.tensor([])` (shape (0,)),
which the attention concatenates with each step's keys: torch.cat skips it; a partial rotary
embedding concatenates the rotated features with a slice of the rest, empty when none is
left. So here a cat's operands without elements are dropped (they add nothing to its result),
and the nodes that then compute empty values no one reads (the cache's clones, the empty
slice) are removed. An empty value something else still reads is left alone: that op runs in
torch.
"""
from __future__ import annotations

from typing import Dict, List, Set

from .ops.promote import promote_types
from .ops.registry import op_name
from .torch_ir import Ref, TorchGraph, TorchNode

CATS = ("aten.cat.default", "aten.concat.default")


def no_elements(shape) -> bool:
    """Whether a (static part of a) shape has an extent 0."""
    return any(isinstance(e, int) and e == 0 for e in shape)


def _promoted(graph: TorchGraph, operands) -> object:
    """The dtype torch.cat gives operands (their promotion), or None for a non-tensor one. An
    empty operand whose dtype the others' promotion leaves out (a float32 cache beside float16
    keys: torch gives float32) is kept, and that cat runs in torch."""
    if not all(isinstance(a, Ref) for a in operands):
        return None
    return promote_types(*(graph.value_type(a.name)[1] for a in operands))


def drop_empty_values(graph: TorchGraph) -> TorchGraph:
    """graph without empty cat operands and the nodes left computing empty values for no
    reader (graph itself when there is nothing to drop)."""
    empty: Set[str] = {i.name for i in graph.inputs if i.kind != "size" and no_elements(i.shape)}
    empty |= {n.name for n in graph.nodes if not n.multi and no_elements(n.shape)}
    if not empty:
        return graph
    nodes: List[TorchNode] = []
    changed = False
    for n in graph.nodes:
        if op_name(n.target) in CATS and n.args and isinstance(n.args[0], (list, tuple)):
            kept = [a for a in n.args[0] if not (isinstance(a, Ref) and a.name in empty)]
            if kept and len(kept) != len(n.args[0]) and _promoted(graph, kept) == n.dtype:
                n = TorchNode(n.name, n.op, n.target, (kept,) + tuple(n.args[1:]), n.kwargs, n.shape, n.dtype,
                              n.display_kwargs)
                changed = True
        nodes.append(n)
    readers: Dict[str, int] = {}
    for n in nodes:
        for r in n.refs():
            readers[r] = readers.get(r, 0) + 1
    outputs = {o.name for o in graph.outputs if isinstance(o, Ref)}
    for n in reversed(nodes):            # empty values no one reads (a slice past the end, a cache's clone)
        if n.name in empty and readers.get(n.name, 0) == 0 and n.name not in outputs:
            nodes.remove(n)
            changed = True
            for r in n.refs():
                readers[r] -= 1
    if not changed:
        return graph
    return TorchGraph(graph.inputs, nodes, graph.outputs, graph.output_kind, graph.size_vars, graph.out_spec)
