"""Hand-written attention, found in Torch IR and sent to the fused attention kernel.

    scores = q @ k.transpose(-1, -2)           matmul(q, transpose(k, -1, -2))
    scores = scores / math.sqrt(d) [+ mask]    a chain of elementwise ops (div, mul, add,
                                               sub, where/masked_fill) of the scores
    out = softmax(scores, -1) @ v              softmax (or _safe_softmax), matmul

(each matmul also as AOT autograd writes it: expand, view, bmm, view) becomes one node
`attention(q, k, v, ...)` whose lowering (ops/attention.py:
lower_pattern) lowers the chain on the kernel's dot products, so the score function
computes exactly what the hand-written ops compute. The intermediates must have no other
reader; float32/float64 only (in half precision eager rounds the scores, which the fused
kernel would not). The node's target replays the original ops in torch, should its
lowering ever refuse.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch

from .ops.attention import Operand
from .ops.registry import op_name
from .torch_ir import Ref, TorchGraph, TorchNode

MATMULS = ("aten.matmul.default", "aten.bmm.default")
RESHAPES = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")
SOFTMAX = {"aten._softmax.default": False, "aten.softmax.int": False, "aten._safe_softmax.default": True}
CHAIN_OPS = ("aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar", "aten.mul.Tensor",
             "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar", "aten.where.self", "aten.where.ScalarSelf",
             "aten.where.ScalarOther", "aten.masked_fill.Scalar")
FLOATS = ("float32", "float64")


class AttentionPattern:
    """The target of a matched node: runs the hand-written ops in torch (its fallback)."""

    def __str__(self) -> str:
        return "schedlang::attention"          # registry.op_name: the lowering "schedlang.attention"

    def __call__(self, q, k, v, extras, chain, safe):
        value = torch.matmul(q, k.transpose(-1, -2))
        for target, args, kwargs in chain:
            fill = lambda a: value if isinstance(a, Operand) and a.index is None else (  # noqa: E731
                extras[a.index] if isinstance(a, Operand) else a)
            value = target(*(fill(a) for a in args), **{n: fill(a) for n, a in kwargs.items()})
        p = torch.ops.aten._safe_softmax.default(value, -1) if safe else torch.softmax(value, -1)
        return torch.matmul(p, v)


def match_attention(graph: TorchGraph) -> TorchGraph:
    """graph with each hand-written attention replaced by one `attention` node (graph itself
    when there is none)."""
    users: Dict[str, int] = {}
    for n in graph.nodes:
        for r in n.refs():
            users[r] = users.get(r, 0) + 1
    for o in graph.outputs:
        if isinstance(o, Ref):
            users[o.name] = users.get(o.name, 0) + 2     # an output is never an inner value
    by_name = {n.name: n for n in graph.nodes}
    replaced: Dict[str, TorchNode] = {}
    dropped = set()
    for n in graph.nodes:
        found = _match(n, _Graph(graph, by_name, users))
        if found is not None:
            node, gone = found
            replaced[n.name] = node
            dropped.update(gone)
    if not replaced:
        return graph
    nodes = [replaced.get(n.name, n) for n in graph.nodes if n.name not in dropped]
    return TorchGraph(graph.inputs, nodes, graph.outputs, graph.output_kind, graph.size_vars, graph.out_spec)


@dataclass
class _Graph:
    graph: TorchGraph
    by_name: Dict[str, TorchNode]
    users: Dict[str, int]


@dataclass
class _Product:
    """node computes matmul(a, b) (a, b: value names); absorbed: the nodes in between (views,
    expands, the bmm) that the fused node replaces."""

    node: TorchNode
    a: str
    b: str
    absorbed: List[str]


def _as_matmul(n: Optional[TorchNode], g: "_Graph") -> Optional[_Product]:
    """n as a matmul of two values: matmul or bmm, or what AOT autograd makes of a batched
    matmul (both operands expanded to the result's batch dims and flattened, a bmm, the
    result viewed back to the batch dims)."""
    if n is None or n.multi or n.kwargs:
        return None
    op = op_name(n.target)
    if op in MATMULS and len(n.args) == 2 and _ref(n.args[0]) and _ref(n.args[1]):
        return _Product(n, _ref(n.args[0]), _ref(n.args[1]), [])
    if op not in RESHAPES or len(n.shape) < 3:
        return None
    bmm = _single(_ref(n.args[0]), g.by_name, g.users, ("aten.bmm.default",))
    batch = tuple(n.shape[:-2])
    if bmm is None or tuple(bmm.shape[1:]) != tuple(n.shape[-2:]) or bmm.shape[0] != _prod(batch):
        return None
    operands, absorbed = [], [bmm.name]
    for arg in bmm.args[:2]:
        view = _single(_ref(arg), g.by_name, g.users, RESHAPES)
        if view is None:
            return None
        absorbed.append(view.name)
        src = _ref(view.args[0])
        inner = _single(src, g.by_name, g.users, ("aten.expand.default",))
        if inner is not None and tuple(inner.shape) == batch + tuple(view.shape[1:]) and _ref(inner.args[0]) \
                and tuple(g.graph.value_type(_ref(inner.args[0]))[0][-2:]) == tuple(view.shape[1:]):
            absorbed.append(inner.name)         # expanded along the batch dims only
            src = _ref(inner.args[0])
        elif src is None or tuple(g.graph.value_type(src)[0]) != batch + tuple(view.shape[1:]):
            return None
        operands.append(src)
    return _Product(n, operands[0], operands[1], absorbed)


def _prod(extents):
    out = 1
    for e in extents:
        out = out * e
    return out


def _single(name, by_name, users, ops) -> Optional[TorchNode]:
    """The node computing name when it is one of ops and read by one node only."""
    n = by_name.get(name)
    if n is None or users.get(name, 0) != 1 or op_name(n.target) not in ops or n.multi:
        return None
    return n


def _ref(value) -> Optional[str]:
    return value.name if isinstance(value, Ref) else None


def _is_last_two_swap(n: TorchNode) -> bool:
    name = op_name(n.target)
    if name == "aten.transpose.int" and not n.kwargs:
        nd = len(n.shape)
        return nd >= 2 and sorted(d % nd for d in n.args[1:3]) == [nd - 2, nd - 1]
    if name == "aten.permute.default" and not n.kwargs:
        dims = [d % len(n.shape) for d in n.args[1]]
        nd = len(dims)
        return nd >= 2 and dims == list(range(nd - 2)) + [nd - 1, nd - 2]
    return False


def _match(n: TorchNode, g: _Graph) -> Optional[Tuple[TorchNode, List[str]]]:
    """(the attention node replacing n, the names of the nodes it absorbs), or None."""
    by_name, users = g.by_name, g.users
    final = _as_matmul(n, g) if n.dtype in FLOATS else None
    if final is None:
        return None
    sm = _single(final.a, by_name, users, SOFTMAX)
    v = final.b
    if sm is None or len(sm.shape) < 2 or sm.dtype != n.dtype:
        return None
    if sm.args[1] % len(sm.shape) != len(sm.shape) - 1 or any(a not in (None, False) for a in sm.args[2:]) \
            or any(a is not None for a in sm.kwargs.values()):
        return None
    found = _scores_path(_ref(sm.args[0]), sm, g)
    if found is None:
        return None
    chain, product = found              # chain: the steps from the softmax's input back
    mm = product.node
    q, kt_name = product.a, product.b
    kt = by_name.get(kt_name)
    if kt is None or not _is_last_two_swap(kt) or _ref(kt.args[0]) is None:
        return None
    k = _ref(kt.args[0])
    gone = [mm.name, *product.absorbed, *(c.name for c in chain), sm.name, *final.absorbed]
    if users.get(kt_name, 0) == 1:
        gone.append(kt_name)
    extras: List[Ref] = []
    steps = []
    for c in reversed(chain):           # in the order they run
        prev = _chain_input(c, chain, mm)

        def mark(a, prev=prev):
            if not isinstance(a, Ref):
                return a
            if a.name == prev:
                return Operand()
            if a not in extras:
                extras.append(a)
            return Operand(extras.index(a))
        steps.append((c.target, tuple(mark(a) for a in c.args), {name: mark(a) for name, a in c.kwargs.items()}))
    safe = SOFTMAX[op_name(sm.target)]
    desc = " -> ".join(f"{op_name(c.target).split('.')[1]}" for c in reversed(chain)) or "none"
    node = TorchNode(n.name, "attention", AttentionPattern(), (Ref(q), Ref(k), Ref(v), extras),
                     {"chain": tuple(steps), "safe": safe}, n.shape, n.dtype,
                     display_kwargs={"key": Ref(k), "value": Ref(v), "extras": extras, "scores": desc,
                                     "safe": safe})
    return node, gone


def _scores_path(name, sm: TorchNode, g: _Graph, depth: int = 0):
    """(chain, product): the single-reader elementwise steps from value name back to the
    scores matmul (each reading the running value once), or None."""
    by_name, users = g.by_name, g.users
    if name is None or depth > 16:
        return None
    product = _as_matmul(_single(name, by_name, users, MATMULS + RESHAPES), g)
    if product is not None:
        ok = product.node.shape == sm.shape and product.node.dtype == sm.dtype
        return ([], product) if ok else None
    step = _single(name, by_name, users, CHAIN_OPS)
    if step is None or step.shape != sm.shape or step.dtype != sm.dtype:
        return None
    values = list(step.args) + list(step.kwargs.values())
    for r in step.refs():
        if sum(1 for a in values if _ref(a) == r) != 1:
            continue                    # the running value read twice (x * x): not a chain step
        found = _scores_path(r, sm, g, depth + 1)
        if found is not None:
            return [step] + found[0], found[1]
    return None


def _chain_input(c: TorchNode, chain: List[TorchNode], mm: TorchNode) -> str:
    """The name of the running scores value step c reads: the previous step's or the matmul's."""
    k = chain.index(c)
    return chain[k + 1].name if k + 1 < len(chain) else mm.name
