"""Complex values rewritten in Torch IR as pairs of real ones before lowering.

Rotary position embeddings are often written with complex numbers (Meta's Llama reference
code, transformers' Llama 4): `view_as_complex(x.reshape(..., -1, 2)) * freqs_cis`, then
`view_as_real(...).flatten(-2)`, freqs_cis made by `torch.polar` or kept as a complex buffer.
No kernel computes a complex dtype, so each of those ops ran in torch and split the model into
parts around them. Here every complex value becomes two real nodes, its real and imaginary
parts (of complex64's float32, complex128's float64), made of ops the lowering has:

    view_as_complex(t)     re = t[..., 0], im = t[..., 1]
    polar(r, theta)        r * cos(theta), r * sin(theta)
    complex(a, b)          a, b
    a complex input z      view_as_real(z)[..., 0], [..., 1] (a buffer's: folded, const_fold.py)
    z * w, z + w, z - w    (ar wr - ai wi, ar wi + ai wr), parts added / subtracted (rsub too)
    z * s, z + s (s real)  (zr s, zi s), (zr + s, zi)
    -z, conj(z)            (-zr, -zi), (zr, -zi)
    view ops of z          the same view of each part (view, reshape, unsqueeze, permute, ...)
    view_as_real(z)        cat of zr, zi unsqueezed at -1;  real(z), imag(z): a part;  abs(z): hypot

The rewrite is all or nothing: a graph with a complex value some other op reads, or a complex
output, is left as it is (those ops then run in torch, as before).
"""
from __future__ import annotations

import numbers
from typing import Dict, List, Tuple

import torch

from .graph_rewrite import new_node
from .ops.registry import op_name
from .torch_ir import Ref, TorchGraph, TorchNode

aten = torch.ops.aten
PART = {"complex64": "float32", "complex128": "float64"}

# ops applied to each part with the same further arguments (shapes and dims are a complex
# value's own: its parts have its shape)
SAME_ARGS = frozenset((aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.unsqueeze.default,
                       aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.permute.default,
                       aten.transpose.int, aten.expand.default, aten.slice.Tensor, aten.select.int,
                       aten.clone.default, aten.alias.default, aten.t.default, aten.flatten.using_ints,
                       aten.repeat.default, aten.contiguous.default, aten.detach.default))
ARITH = frozenset((aten.mul.Tensor, aten.mul.Scalar, aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor,
                   aten.sub.Scalar, aten.rsub.Scalar, aten.rsub.Tensor))
MAKE = frozenset((aten.view_as_complex.default, aten.polar.default, aten.complex.default))
READ = frozenset((aten.view_as_real.default, aten.real.default, aten.imag.default, aten.abs.default))
UNARY = frozenset((aten.neg.default, aten.conj.default, aten._conj.default, aten.resolve_conj.default,
                   aten.conj_physical.default))


def rewrite_complex(graph: TorchGraph) -> TorchGraph:
    """graph with its complex values as real pairs (module docstring), or graph itself."""
    complex_names = {i.name for i in graph.inputs if str(i.dtype) in PART}
    complex_names |= {n.name for n in graph.nodes if not n.multi and str(n.dtype) in PART}
    if not complex_names or not _rewritable(graph, complex_names):
        return graph
    return _Rewrite(graph, complex_names).run()


def _refs(value) -> List[str]:
    if isinstance(value, Ref):
        return [value.name]
    if isinstance(value, (list, tuple)):
        return [r for v in value for r in _refs(v)]
    return []


def _rewritable(graph: TorchGraph, complex_names: set) -> bool:
    """Every node reading or making a complex value is one the rewrite takes, and no output is
    complex."""
    if any(r in complex_names for o in graph.outputs for r in _refs(o)):
        return False
    for n in graph.nodes:
        reads = [r for r in n.refs() if r in complex_names]
        makes = n.name in complex_names
        if not reads and not makes:
            continue
        if n.multi or n.kwargs and n.target not in (aten.clone.default,):
            return False
        t = n.target
        if makes and t in MAKE:
            continue
        if makes and (t in SAME_ARGS or t in UNARY) and _refs(n.args[:1]) and n.args[0].name in complex_names:
            continue
        if makes and t in ARITH and _arith_ok(n):
            continue
        if not makes and t in READ and len(n.args) == 1:
            continue
        return False
    return True


def _arith_ok(n: TorchNode) -> bool:
    """mul/add/sub of complex values and real tensors or real numbers (add/sub without alpha)."""
    if len(n.args) != 2 or n.kwargs:
        return False
    return all(isinstance(a, Ref) or (isinstance(a, numbers.Real) and not isinstance(a, bool)) for a in n.args)


class _Rewrite:
    def __init__(self, graph: TorchGraph, complex_names: set):
        self.graph = graph
        self.complex = complex_names
        self.parts: Dict[str, Tuple[Ref, Ref]] = {}
        self.taken = {i.name for i in graph.inputs} | {n.name for n in graph.nodes}
        self.nodes: List[TorchNode] = []

    def run(self) -> TorchGraph:
        for i in self.graph.inputs:
            if i.name in self.complex:
                self._input(i.name, list(i.shape), PART[str(i.dtype)])
        for n in self.graph.nodes:
            if n.name in self.complex:
                self.parts[n.name] = self._make(n)
            elif any(r in self.complex for r in n.refs()):
                self._read(n)
            else:
                self.nodes.append(n)
        g = self.graph
        return TorchGraph(g.inputs, self.nodes, g.outputs, g.output_kind, g.size_vars, g.out_spec)

    # ---- nodes
    def _node(self, name: str, target, args, shape, dtype: str, kwargs=None) -> Ref:
        made = new_node(name, target, args, list(shape), dtype, self.taken, kwargs)
        self.nodes.append(made)
        return Ref(made.name)

    def _input(self, name: str, shape: list, part: str) -> None:
        pairs = self._node(f"{name}_as_real", aten.view_as_real.default, (Ref(name),), shape + [2], part)
        self.parts[name] = tuple(self._node(f"{name}_{s}", aten.select.int, (pairs, -1, k), shape, part)
                                 for k, s in enumerate(("re", "im")))

    def _make(self, n: TorchNode) -> Tuple[Ref, Ref]:
        t, shape, part = n.target, list(n.shape), PART[str(n.dtype)]
        re_name, im_name = f"{n.name}_re", f"{n.name}_im"
        if t is aten.view_as_complex.default:
            src = n.args[0]
            return tuple(self._node(nm, aten.select.int, (src, -1, k), shape, part)
                         for k, nm in enumerate((re_name, im_name)))
        if t is aten.polar.default:
            r, theta = n.args
            cos = self._node(f"{n.name}_cos", aten.cos.default, (theta,), shape, part)
            sin = self._node(f"{n.name}_sin", aten.sin.default, (theta,), shape, part)
            return (self._node(re_name, aten.mul.Tensor, (r, cos), shape, part),
                    self._node(im_name, aten.mul.Tensor, (r, sin), shape, part))
        if t is aten.complex.default:
            return tuple(n.args)
        if t in SAME_ARGS:
            zr, zi = self.parts[n.args[0].name]
            rest = n.args[1:]
            return (self._node(re_name, t, (zr,) + rest, shape, part, n.kwargs),
                    self._node(im_name, t, (zi,) + rest, shape, part, n.kwargs))
        if t in UNARY:
            zr, zi = self.parts[n.args[0].name]
            if t is aten.neg.default:
                zr = self._node(re_name, aten.neg.default, (zr,), shape, part)
            if t is not aten.resolve_conj.default:
                zi = self._node(im_name, aten.neg.default, (zi,), shape, part)
            return zr, zi
        return self._arith(n, shape, part)

    def _arith(self, n: TorchNode, shape: list, part: str) -> Tuple[Ref, Ref]:
        a, b = n.args
        kind = op_name(n.target).split(".")[1]          # mul, add, sub or rsub (b - a)
        if kind == "rsub":
            a, b, kind = b, a, "sub"
        za = self.parts.get(a.name) if isinstance(a, Ref) else None
        zb = self.parts.get(b.name) if isinstance(b, Ref) else None
        op = {"mul": aten.mul.Tensor, "add": aten.add.Tensor, "sub": aten.sub.Tensor}[kind]

        def node(suffix, target, x, y):
            return self._node(f"{n.name}_{suffix}", target, (x, y), shape, part)
        if za is not None and zb is not None:
            if kind != "mul":
                return node("re", op, za[0], zb[0]), node("im", op, za[1], zb[1])
            rr, ii = node("rr", op, za[0], zb[0]), node("ii", op, za[1], zb[1])
            ri, ir = node("ri", op, za[0], zb[1]), node("ir", op, za[1], zb[0])
            return node("re", aten.sub.Tensor, rr, ii), node("im", aten.add.Tensor, ri, ir)
        if kind == "mul":                     # a real factor scales both parts
            (zr, zi), s = (za, b) if za is not None else (zb, a)
            return (node("re", op, zr, s) if za is not None else node("re", op, s, zr),
                    node("im", op, zi, s) if za is not None else node("im", op, s, zi))
        if za is not None:                    # z + s, z - s: the real part moves
            return node("re", op, za[0], b), za[1]
        im = zb[1] if kind == "add" else self._node(f"{n.name}_im", aten.neg.default, (zb[1],), shape, part)
        return node("re", op, a, zb[0]), im   # s + z, s - z

    def _read(self, n: TorchNode) -> None:
        """A node making a real value from a complex one, under its own name."""
        zr, zi = self.parts[n.args[0].name]
        shape, dtype = list(n.shape), str(n.dtype)
        if n.target is aten.view_as_real.default:
            pair = [self._node(f"{n.name}_{s}", aten.unsqueeze.default, (z, -1), shape[:-1] + [1], dtype)
                    for s, z in (("re", zr), ("im", zi))]
            self.nodes.append(TorchNode(n.name, "cat", aten.cat.default, (pair, -1), {}, shape, dtype))
        elif n.target is aten.abs.default:
            self.nodes.append(TorchNode(n.name, "hypot", aten.hypot.default, (zr, zi), {}, shape, dtype))
        else:
            part = zr if n.target is aten.real.default else zi
            self.nodes.append(TorchNode(n.name, "alias", aten.alias.default, (part,), {}, shape, dtype))
