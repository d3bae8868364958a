"""Torch IR -> Tensor IR through the lowering registry.

Every node whose op has a lowering becomes Tensor IR stages; a node without one (or whose
lowering raises Unsupported) runs in torch. The program is then a sequence of steps:
lowered parts (each one Tensor IR program, built as one module) and torch nodes, in an
order that respects their dependences. A value crossing from one step to another is an
output of the part that computes it and a placeholder of the part that reads it.
"""
from __future__ import annotations

import functools
import operator
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Tuple, Union

import torch

import schedlang as sl
from schedlang.tensor.graph import post_order
from schedlang.tensor.op import PlaceholderOp
from schedlang.tensor.printer import print_tensor_ir

from .dtypes import to_torch, torch_only
from .attention_match import match_attention
from .const_fold import VIEW_OPS, fold_plan
from .complex_pairs import rewrite_complex
from .conv3d_slices import rewrite_conv3d
from .conv_lanes import conv_lanes
from .empty_values import drop_empty_values, no_elements
from .inverse_permutation import rewrite_inverse_permutations
from .layout import block_activations
from .pad_fusion import share_padded
from .ops.registry import LowerContext, NeedsStaticShape, Unsupported, lookup
from .prepack import PackSpec, dtype_of, shape_of
from .subpixel import rewrite_transposed_convolutions
from .torch_ir import Ref, TorchGraph, TorchNode, map_refs, node_call_str, type_str


class FallbackWarning(UserWarning):
    """Some ops of a module run in torch, not in schedlang's kernels."""


@dataclass
class Part:
    """One Tensor IR program: inputs (value name, placeholder) and outputs (value name, tensor)."""

    index: int
    inputs: List[Tuple[str, sl.Tensor]] = field(default_factory=list)
    outputs: List[Tuple[str, sl.Tensor]] = field(default_factory=list)
    aliases: Dict[str, str] = field(default_factory=dict)   # output name -> the input it is
    checks: Dict[str, Tuple[type, str]] = field(default_factory=dict)   # guard output -> (error, message)

    def __str__(self) -> str:
        return print_tensor_ir([t.op for _, t in self.outputs])


@dataclass
class TorchStep:
    """A node that runs in torch, and why; static_only: it would lower with its sizes known
    (its lowering raised NeedsStaticShape)."""

    node: TorchNode
    reason: str
    static_only: bool = False


@dataclass
class LoweredProgram:
    """Steps in execution order; `fallbacks` names the ops that run in torch; `packs` the
    inputs that are packed constants (prepack.py), computed by the compiled module."""

    graph: TorchGraph
    steps: List[Union[Part, TorchStep]]
    fallbacks: List[str]
    packs: Dict[str, PackSpec] = field(default_factory=dict)

    @property
    def parts(self) -> List[Part]:
        return [s for s in self.steps if isinstance(s, Part)]

    def fallback_counts(self, include_static_only: bool = True) -> Dict[str, int]:
        """op -> how many of its nodes run in torch, in graph order (getitems of a torch
        result are not counted: they follow their op); include_static_only=False leaves out
        the ops that lower once their sizes are known (a module built per shape lowers them)."""
        counts: Dict[str, int] = {}
        for s in self.steps:
            if isinstance(s, TorchStep) and s.node.op != "getitem" and (include_static_only or not s.static_only):
                counts[s.node.op] = counts.get(s.node.op, 0) + 1
        return counts

    def needs_static_shapes(self) -> bool:
        """Whether an op runs in torch only because its sizes are symbolic here."""
        return any(isinstance(s, TorchStep) and s.static_only for s in self.steps)

    def warn_fallbacks(self, stacklevel: int = 2) -> None:
        """A FallbackWarning naming the ops that run in torch and why (none if none do)."""
        reasons: Dict[str, str] = {}
        for s in self.steps:
            if isinstance(s, TorchStep) and s.node.op != "getitem":
                reasons.setdefault(s.node.op, s.reason)
        if reasons:
            ops = ", ".join(op if r == "no lowering" else f"{op} ({r})" for op, r in reasons.items())
            warnings.warn(f"schedlang: {len(reasons)} op(s) run in torch, not in schedlang kernels: {ops}",
                          FallbackWarning, stacklevel=stacklevel + 1)

    def __str__(self) -> str:
        if len(self.steps) == 1 and isinstance(self.steps[0], Part):
            return str(self.steps[0])
        chunks = []
        for s in self.steps:
            if isinstance(s, Part):
                chunks.append(f"# part {s.index}\n{s}")
            else:
                n = s.node
                chunks.append(f"# in torch ({s.reason}):\n{n.name} = {node_call_str(n)}  -> {type_str(n.shape, n.dtype)}")
        return "\n\n".join(chunks)


def user_error(e: Exception, node: TorchNode) -> Exception:
    """e (a ValueError or TypeError of a lowering or a build: a literal out of its dtype's range,
    a division by a literal zero, a tensor too large) with the torch-level cause in front:
    the node, its op and arguments, as Torch IR prints them. Other exceptions are left alone."""
    if type(e) not in (ValueError, TypeError):
        return e
    return type(e)(f"{node.name} = {node_call_str(node)} -> {type_str(node.shape, node.dtype)} "
                   f"(the torch op {node.target}): {e}")


def lower_graph(graph: TorchGraph, target=None, warn: bool = True) -> LoweredProgram:
    """The Tensor IR of graph, split into lowered parts and torch steps (complex values first
    replaced by real pairs, complex_pairs.py; a sort's permutation inverted by index_put by a
    sort of it, inverse_permutation.py; hand-written attention by the fused attention
    node, attention_match.py; transposed
    convolutions by a convolution and a depth-to-space, subpixel.py; 3-d convolutions by a 2-d
    one over depth windows, conv3d_slices.py)."""
    graph = match_attention(rewrite_inverse_permutations(rewrite_complex(drop_empty_values(graph))))
    if _folds_state(target):          # (the rewritten weight is a folded constant: const_fold.py)
        graph = rewrite_conv3d(rewrite_transposed_convolutions(graph))
    return _Lowering(graph, target).run(warn)


class _Lowering:
    def __init__(self, graph: TorchGraph, target):
        self.graph = graph
        self.target = target
        self.where: Dict[str, Tuple[str, int]] = {}   # name -> ("input"|"part"|"torch", level)
        self.values: Dict[str, Any] = {}              # lowered name -> sl.Tensor or list of them
        self.placeholders: Dict[Tuple[int, str], sl.Tensor] = {}
        # views of inputs alone (a transposed weight, a reshaped input): lowered again in each part
        # reading them, not passed as a copy, so that a lowering there still sees the parameter
        # through the view (and packs it)
        self.input_views: Dict[str, TorchNode] = {}
        self.views_in: Dict[Tuple[int, str], sl.Tensor] = {}
        self.inputs: Dict[str, sl.Tensor] = {}
        self.needed: Dict[str, None] = {}             # lowered values some later step reads
        self.torch_steps: List[Tuple[int, TorchStep]] = []
        self.members: Dict[int, List[str]] = {}
        self.packs: Dict[str, PackSpec] = {}
        self.empties: Dict[str, TorchNode] = {}      # getitems of a lowered op's empty results
        self.checks: Dict[str, Tuple[type, str]] = {}  # guard flag name -> (error, message): LowerContext.guard
        self.complex = {v.name for v in graph.inputs + graph.nodes        # values only torch computes
                        if any(torch_only(d) for d in (v.dtype if isinstance(v.dtype, list) else [v.dtype]))}
        self.folds = fold_plan(graph) if _folds_state(target) else None   # values of the state alone
        self.conv_lanes = conv_lanes(graph, target)                       # (0: native vectors)

    def run(self, warn: bool) -> LoweredProgram:
        for i in self.graph.inputs:
            if i.kind == "size":
                continue                  # read as size expressions, not as a tensor
            if no_elements(i.shape) or torch_only(i.dtype):
                self.where[i.name] = ("torch", -1)     # only an op in torch reads it
                continue
            self.inputs[i.name] = sl.placeholder(i.shape, i.dtype, name=i.name)
            self.where[i.name] = ("input", 0)
        for node in self.graph.nodes:
            self.lower_node(node)
        for o in self.graph.outputs:
            if isinstance(o, Ref):
                self.need(o.name)
        steps = self.steps()
        fallbacks = list({s.node.op: None for _, s in self.torch_steps if s.node.op != "getitem"})
        used = {name for p in steps if isinstance(p, Part) for name, _ in p.inputs}
        used |= {src for n in used if n in self.packs for src in self.packs[n].sources}   # folded values packed
        program = LoweredProgram(self.graph, steps, fallbacks, {n: s for n, s in self.packs.items() if n in used})
        if warn:
            program.warn_fallbacks(stacklevel=5)
        return program

    def packed(self, tensor, width: int):
        """The placeholder of a constant [N, K] input's panels (LowerContext.packed), or None."""
        if len(tensor.shape) != 2:
            return None
        return self.prepacked("panels", (tensor,), width, ())

    def prepacked(self, kind: str, tensors, width: int, params: tuple):
        """The placeholder of prepack.py's constant of kind made from tensors, which must all
        be constant inputs of static shape (LowerContext.prepacked), or None."""
        state = {i.name for i in self.graph.state_inputs} | {n for n, sp in self.packs.items() if sp.kind == "fold"}
        names = []
        for t in tensors:
            name = None if t is None else next((n for n, p in self.inputs.items() if p.op is t.op and n in state), None)
            if t is not None and (name is None or not all(isinstance(e, int) for e in t.shape)):
                return None
            names.append(name)
        spec = PackSpec(names[0], width, kind, tuple(names[1:]), params)
        pname = next((n for n, sp in self.packs.items() if sp == spec), None)
        if pname is None:
            folded = "_bn" if kind in ("conv", "conv_tiles", "conv_pairs", "winograd") and any(n is not None for n in names[1:]) else ""
            pname = f"{names[0]}_packed{width}" if kind == "panels" else f"{names[0]}_{kind}{width}{folded}"
            while pname in self.inputs:      # another spec of the same source
                pname += "_"
            shape = shape_of(kind, [None if t is None else tuple(t.shape) for t in tensors], width, params)
            self.inputs[pname] = sl.placeholder(shape, dtype_of(kind, tensors[0].dtype), name=pname)
            self.where[pname] = ("input", 0)
            self.packs[pname] = spec
        return self.inputs[pname]

    def level(self, name: str) -> int:
        """The first part that may read name."""
        kind, k = self.where[name]
        return k + 1 if kind == "torch" else k

    def need(self, name: str) -> None:
        kind, k = self.where[name]
        if kind == "empty":              # an empty result of a lowered op, read after all
            node = self.empties[name]
            make = functools.partial(torch.empty, tuple(node.shape), dtype=to_torch(node.dtype))
            self.where[name] = ("torch", k)
            self.torch_steps.append((k, TorchStep(replace(node, target=make, args=(), kwargs={}),
                                                  "an empty result of a lowered op")))
        elif kind == "part":
            self.needed[name] = None

    def value_in(self, part: int, name: str):
        """name as seen from part: its tensor if computed there, else a placeholder."""
        if self.where[name][0] == "empty":
            self.need(name)
        kind, k = self.where[name]
        if kind == "input":
            return self.inputs[name]
        if kind == "part" and k == part:
            return self.values[name]
        key = (part, name)
        if kind == "part" and name in self.input_views:
            if key not in self.views_in:
                node = self.input_views[name]
                args = map_refs(node.args, lambda r: self.value_in(part, r.name))
                kwargs = map_refs(node.kwargs, lambda r: self.value_in(part, r.name))
                self.views_in[key] = lookup(node.target)(LowerContext(node.name, self.target), *args, **kwargs)
            return self.views_in[key]
        if key not in self.placeholders:
            if kind == "part":
                t = self.values[name]
                shape, dtype = t.shape, t.dtype
            else:
                shape, dtype = self.graph.value_type(name)
                if no_elements(shape):
                    raise Unsupported(f"{name} is empty (schedlang tensors have positive extents)")
            self.placeholders[key] = sl.placeholder(shape, dtype, name=name)
        return self.placeholders[key]

    def lower_node(self, node: TorchNode) -> None:
        if self.folds is not None and node.name in self.folds.skipped:
            return                        # read only by folded values (const_fold.py)
        if self.folds is not None and node.name in self.folds.roots:
            fold = self.folds.roots[node.name]
            self.inputs[node.name] = sl.placeholder(fold.shape, fold.dtype, name=node.name)
            self.where[node.name] = ("input", 0)
            self.packs[node.name] = PackSpec(fold.sources[0], 1, "fold", fold.sources[1:], (fold,))
            return
        refs = node.refs()
        if node.target is operator.getitem:
            src = refs[0]
            kind, k = self.where[src]
            if kind == "part" and self.values[src][node.args[1]] is None:
                self.where[node.name] = ("empty", k)      # made in torch only if read (need)
                self.empties[node.name] = node
            elif kind == "part":
                self.values[node.name] = self.values[src][node.args[1]]
                self.where[node.name] = ("part", k)
                self.members.setdefault(k, []).append(node.name)
            else:
                self.to_torch(node, refs, "getitem of a torch result")
            return
        part = max((self.level(r) for r in refs), default=0)
        fn = lookup(node.target)
        if fn is None:
            self.to_torch(node, refs, "no lowering")
            return
        if node.name in self.complex or any(r in self.complex for r in refs):
            self.to_torch(node, refs, "complex values are computed in torch")
            return
        guards: List[Tuple[Any, str, type]] = []
        try:
            args = map_refs(node.args, lambda r: self.value_in(part, r.name))
            kwargs = map_refs(node.kwargs, lambda r: self.value_in(part, r.name))
            ctx = LowerContext(node.name, self.target, packer=self.packed, prepacker=self.prepacked,
                               conv_lanes=self.conv_lanes,
                               guarder=lambda flag, message, error: guards.append((flag, message, error)))
            result = fn(ctx, *args, **kwargs)
        except Unsupported as e:
            self.to_torch(node, refs, f"unsupported: {e}", static_only=isinstance(e, NeedsStaticShape))
            return
        except (ValueError, TypeError) as e:
            raise user_error(e, node) from None
        self.check_result(node, result)
        self.values[node.name] = list(result) if isinstance(result, (list, tuple)) else result
        self.where[node.name] = ("part", part)
        if node.op in VIEW_OPS and not node.multi and not guards and refs \
                and all(self.where[r][0] == "input" or r in self.input_views for r in refs):
            self.input_views[node.name] = node
        self.members.setdefault(part, []).append(node.name)
        for k, (flag, message, error) in enumerate(guards):
            # an output of the part, always computed (eager raises even if the result is unused)
            name = f"{node.name}__guard{k}"
            self.values[name], self.where[name] = flag, ("part", part)
            self.members[part].append(name)
            self.checks[name] = (error, message)
            self.needed[name] = None

    def check_result(self, node: TorchNode, result) -> None:
        """The lowering's result has the node's shapes and dtypes (else a lowering bug)."""
        got = list(result) if isinstance(result, (list, tuple)) else [result]
        dtypes = node.dtype if node.multi else [node.dtype]
        shapes = node.shape if node.multi else [node.shape]
        # None stands for an empty result (batch norm's saved statistics in eval mode)
        empty = [t is None and no_elements(want) for t, want in zip(got, shapes)]
        got, dtypes, shapes = ([x for x, e in zip(seq, empty) if not e] for seq in (got, dtypes, shapes))
        if len(got) != len(dtypes) or any(t is None or str(t.dtype) != str(d) for t, d in zip(got, dtypes)):
            raise sl.InternalError(f"the lowering of {node.op} for node {node.name} gives "
                                   f"{[str(getattr(t, 'dtype', None)) for t in got]}, torch gives {dtypes}")
        shapes = node.shape if node.multi else [node.shape]
        for t, want in zip(got, shapes):
            if len(t.shape) != len(want) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                                for a, b in zip(t.shape, want)):
                raise sl.InternalError(f"the lowering of {node.op} for node {node.name} gives shape "
                                       f"{tuple(map(str, t.shape))}, torch gives {tuple(map(str, want))}")

    def to_torch(self, node: TorchNode, refs: List[str], reason: str, static_only: bool = False) -> None:
        for r in refs:
            self.need(r)
        level = max((self.where[r][1] for r in refs), default=0)
        self.where[node.name] = ("torch", level)
        self.torch_steps.append((level, TorchStep(node, reason, static_only)))

    def steps(self) -> List[Union[Part, TorchStep]]:
        for (part, name) in self.placeholders:
            self.need(name)
        parts: Dict[int, Part] = {}
        for name in self.needed:
            k = self.where[name][1]
            value = self.values[name]
            part = parts.setdefault(k, Part(k))
            if isinstance(value.op, PlaceholderOp):     # the lowering returned one of its inputs
                part.aliases[name] = value.op.name
            else:
                part.outputs.append((name, value))
        for part in parts.values():
            by_op = {id(t.op): name for (k, name), t in self.placeholders.items() if k == part.index}
            by_op.update({id(t.op): name for name, t in self.inputs.items()})
            part.aliases = {n: by_op[id(self.values[n].op)] for n in part.aliases}
            part.checks = {n: m for n, m in self.checks.items() if self.where[n][1] == part.index}
            part.outputs.sort(key=lambda o: self.members[part.index].index(o[0]))
            part.outputs = block_activations(part.outputs)     # NCHWc between convolutions (layout.py)
            part.outputs = share_padded(part.outputs)          # padded inputs written by their producers
            for op in post_order([t.op for _, t in part.outputs]):
                if isinstance(op, PlaceholderOp):
                    part.inputs.append((by_op[id(op)], op.output(0)))
        levels = sorted(set(parts) | {lv for lv, _ in self.torch_steps})
        out: List[Union[Part, TorchStep]] = []
        for lv in levels:
            if lv in parts:
                out.append(parts[lv])
            out += [s for level, s in self.torch_steps if level == lv]
        return out


def _folds_state(target) -> bool:
    """Whether values of the state alone are folded into constants (const_fold.py): where
    weights are packed (the CPU), the targets whose kernels would read a folded weight faster."""
    return isinstance(target, sl.Target) and sl.get_backend(target.kind).prepacks_weights
