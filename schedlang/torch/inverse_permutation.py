"""The inverse of a sort's permutation, as mixture-of-experts layers write it, rewritten in Torch
IR as a sort of that permutation before lowering.

transformers' grouped experts sort the rows by expert and put them back with

    inv = torch.empty_like(perm); inv[perm] = torch.arange(n)      # perm = sort(ids).indices

an index_put whose lowering is in gather form (ops/scatter.py): each of the n outputs searches
all n index entries, n^2 compares: with 4096 tokens of top-8 routing (n = 32768) that one op
took 70 ms of a 254 ms layer. A sort's indices are a permutation of 0..n-1, every position of
`inv` written once, so `inv` is that permutation's own argsort: `sort(perm).indices`, the same
values whatever the sort's tie order (a permutation has no ties). Taken only where the index is
the indices of a sort of a 1-d tensor, the values arange(n), the written tensor n long, and n
more than the sort lowering ranks (ops/sort.MAX_EXTENT): that sort runs in torch, n log n;
a shorter one would rank in two n^2 passes where the gather form takes one.
"""
from __future__ import annotations

import operator
from typing import List, Optional

import torch

from .graph_rewrite import new_node, rewrite_nodes
from .ops.sort import MAX_EXTENT
from .torch_ir import Ref, TorchGraph, TorchNode

aten = torch.ops.aten
SORTS = (aten.sort.default, aten.sort.stable)
INTS = ("int32", "int64")


def rewrite_inverse_permutations(graph: TorchGraph) -> TorchGraph:
    """graph with each inverse permutation (module docstring) as a sort of the permutation."""
    nodes = {n.name: n for n in graph.nodes}
    return rewrite_nodes(graph, lambda g, n, taken: _rewrite(nodes, n, taken))


def _rewrite(nodes, n: TorchNode, taken: set) -> Optional[List[TorchNode]]:
    if n.target is not aten.index_put.default or n.multi or len(n.args) < 3 or n.kwargs \
            or (len(n.args) > 3 and n.args[3]):
        return None
    x, indices, values = n.args[:3]
    if not (isinstance(indices, (list, tuple)) and len(indices) == 1 and isinstance(indices[0], Ref)
            and isinstance(values, Ref)):
        return None
    perm = nodes.get(indices[0].name)
    length = _sort_indices_length(nodes, perm)
    if length is None or length <= MAX_EXTENT or list(n.shape) != [length] or n.dtype not in INTS \
            or perm.dtype != n.dtype \
            or not _arange(nodes.get(values.name), length, n.dtype):
        return None
    sort = new_node(f"{n.name}_argsort", aten.sort.default, (Ref(perm.name),), [[length], [length]],
                    [perm.dtype, perm.dtype], taken)
    return [sort, TorchNode(n.name, "getitem", operator.getitem, (Ref(sort.name), 1), {}, [length], n.dtype)]


def _sort_indices_length(nodes, perm: Optional[TorchNode]) -> Optional[int]:
    """n where perm is getitem(sort(v), 1) of a 1-d v of static length n, else None."""
    if perm is None or perm.target is not operator.getitem or perm.args[1:] != (1,):
        return None
    src = perm.args[0]
    sort = nodes.get(src.name) if isinstance(src, Ref) else None
    if sort is None or sort.target not in SORTS or not sort.multi:
        return None
    shape = sort.shape[1]
    return shape[0] if len(shape) == 1 and isinstance(shape[0], int) else None


def _arange(node: Optional[TorchNode], length: int, dtype: str) -> bool:
    """node is arange(length) (or arange(0, length[, 1])) of dtype."""
    if node is None or node.dtype != dtype:
        return False
    if node.target is aten.arange.default:
        return list(node.args) == [length]
    if node.target is aten.arange.start:
        return list(node.args) == [0, length]
    if node.target is aten.arange.start_step:
        return list(node.args) == [0, length, 1]
    return False
