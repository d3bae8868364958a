"""Capture: torch.export -> core ATen (keeping the ops we lower whole) -> Torch IR."""
from __future__ import annotations

import contextlib
import inspect
import linecache
import operator
import warnings
from typing import Any, Dict, List, Optional, Sequence

import torch

import schedlang as sl
from schedlang.expr.nodes import Expr

from . import ops as _ops  # noqa: F401  (registers every lowering)
from .dtypes import ir_dtype
from .ops.registry import lookup, op_name
from .torch_ir import Ref, TorchGraph, TorchInput, TorchNode


_TABLES: Dict[frozenset, Dict] = {}


def decomposition_table() -> Dict:
    """The core ATen decomposition table minus every op with a registered lowering, so that
    silu, gelu, softmax, layer_norm ... reach the lowering whole (read at call time, as
    lowerings register on import). A fresh dict each call; torch's table is built once per
    set of registered lowerings (it takes a tenth of a second, a good part of a small
    module's first call)."""
    from .ops.registry import LOWERINGS
    key = frozenset(LOWERINGS)
    table = _TABLES.get(key)
    if table is None:
        from torch._decomp import core_aten_decompositions
        table = core_aten_decompositions()
        for op in list(table.keys()):
            if lookup(op) is not None:
                table.pop(op)
        _TABLES.clear()
        _TABLES[key] = table
    return dict(table)


class CaptureError(RuntimeError):
    """torch.export could not trace the module (an op whose output shape depends on values,
    a quantized module's packed parameters, data-dependent control flow ...)."""

    def __init__(self, module, error: Exception):
        first = (str(error).strip().splitlines() or [""])[0][:500]
        super().__init__(
            f"torch.export could not capture {type(module).__name__}: {type(error).__name__}: {first}\n"
            "schedlang.torch.compile compiles what torch.export traces; torch.compile(model, "
            "backend=\"schedlang\") compiles the graphs Dynamo captures and runs the rest in eager torch")


def capture(module: torch.nn.Module, example_inputs: Sequence, dynamic_shapes=None) -> TorchGraph:
    """The Torch IR of module called on example_inputs (a torch.export of it, decomposed to
    core ATen). dynamic_shapes is torch.export's: a dimension marked with torch.export.Dim
    becomes a schedlang size var named after the Dim."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"capture expects a torch.nn.Module, got {type(module).__name__}")
    example_inputs = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    for k, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"example input {k} is a {type(x).__name__}; schedlang.torch takes tensors only")
    with _forgetting_fx_sources():
        try:
            ep = torch.export.export(module, example_inputs, dynamic_shapes=dynamic_shapes)
        except (TypeError, ValueError):
            raise                         # the arguments (or the module's own code) are wrong
        except Exception as e:
            raise CaptureError(module, e) from e
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)   # run_decompositions' harmless deprecation notes
            ep = ep.run_decompositions(decomposition_table())
        if ep.graph_signature.input_tokens:
            ep = _without_effect_tokens(ep)
    names = _dim_names(module, ep, example_inputs, dynamic_shapes)
    sig = ep.graph_signature
    mutated = list(sig.buffers_to_mutate.values()) + list(getattr(sig, "parameters_to_mutate", {}).values()) \
        + list(getattr(sig, "user_inputs_to_mutate", {}).values())
    if mutated:
        raise NotImplementedError(f"the module updates {', '.join(mutated)} in place; schedlang.torch "
                                  "compiles inference graphs without mutation (call module.eval() first?)")
    state = {**ep.state_dict, **getattr(ep, "constants", {})}
    kinds: Dict[str, tuple] = {}
    for ph, target in sig.inputs_to_parameters.items():
        kinds[ph] = ("parameter", target)
    for ph, target in sig.inputs_to_buffers.items():
        kinds[ph] = ("buffer", target)
    for ph, target in getattr(sig, "inputs_to_lifted_tensor_constants", {}).items():
        kinds[ph] = ("constant", target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        out_spec = ep.call_spec.out_spec
    graph = graph_from_fx(ep.graph, kinds, state, names)
    graph.out_spec = out_spec
    return graph


def _without_effect_tokens(ep):
    """ep with its effect tokens removed (torch's own pass: each with_effects call becomes
    a call of its op), so that the compiled module takes the user's inputs only."""
    from torch.export._remove_effect_tokens_pass import _remove_effect_tokens
    return _remove_effect_tokens(ep)


@contextlib.contextmanager
def _forgetting_fx_sources():
    """torch.fx keeps the Python source of every GraphModule it generates (its loader's
    eval_cache and a linecache entry, for tracebacks) as long as the process lives. The graph
    modules of a capture are dropped once its Torch IR is made: their sources are forgotten
    when the body ends (about 10 KB per compile otherwise; issue 15, item 12)."""
    from torch.fx import graph_module
    loader = getattr(graph_module, "_loader", None)
    cache = getattr(loader, "eval_cache", None)
    before = set(cache) if isinstance(cache, dict) else None
    try:
        yield
    finally:
        if before is not None:
            for key in set(cache) - before:
                cache.pop(key, None)
                linecache.cache.pop(key, None)


def _dim_names(module, ep, example_inputs, dynamic_shapes) -> Dict[str, str]:
    """sympy symbol name -> the torch.export.Dim's name, for the user's dynamic dims."""
    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, dict):
        params = list(inspect.signature(module.forward).parameters)
        specs = [dynamic_shapes.get(p) for p in params[:len(example_inputs)]]
    else:
        specs = list(dynamic_shapes)
    user = [n for n in ep.graph.nodes if n.op == "placeholder"
            and n.name in ep.graph_signature.user_inputs]
    names: Dict[str, str] = {}
    for node, spec in zip(user, specs):
        if spec is None:
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        shape = node.meta["val"].shape
        for d, dim in items:
            name = getattr(dim, "__name__", None)
            size = shape[d]
            if name and isinstance(size, torch.SymInt) and hasattr(size.node.expr, "name"):
                names.setdefault(size.node.expr.name, name)
    return names


class _Namer:
    """Unique, readable names: the op's name, then name_1, name_2 ..."""

    def __init__(self):
        self.used: Dict[str, None] = {}

    def __call__(self, base: str) -> str:
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used[name] = None
        return name


class _Sizes:
    """Torch's symbolic sizes (sympy) as schedlang expressions over named size vars."""

    def __init__(self, names: Dict[str, str]):
        self.names = names
        self.vars: Dict[str, sl.Var] = {}

    def var(self, symbol: str) -> sl.Var:
        name = self.names.get(symbol, symbol)
        if name not in self.vars:
            self.vars[name] = sl.size_var(name)
        return self.vars[name]

    def expr(self, e):
        """An int, a float, or a schedlang expression (int sizes; float64 for the floats
        Dynamo computes from sizes, such as an interpolation's scale factor)."""
        import sympy
        from torch.utils._sympy import functions as F
        if isinstance(e, (int, float)):
            return e
        if isinstance(e, (torch.SymInt, torch.SymFloat)):
            concrete = e.node.maybe_as_int() if isinstance(e, torch.SymInt) and hasattr(e.node, "maybe_as_int") else None
            return concrete if concrete is not None else self.expr(e.node.expr)
        if isinstance(e, sympy.Integer):
            return int(e)
        if isinstance(e, (sympy.Float, sympy.Rational)):
            return float(e)
        if isinstance(e, sympy.Symbol):
            return self.var(e.name)
        if isinstance(e, (F.CeilToInt, F.FloorToInt, F.TruncToInt)) and isinstance(e.args[0], F.IntTrueDiv):
            # ceil(a / b) of sizes (a >= 0, b > 0: what torch makes of math.ceil(n / 2)) in integers
            a, b = (self.expr(x) for x in e.args[0].args)
            return -sl.floordiv(-a, b) if isinstance(e, F.CeilToInt) else sl.floordiv(a, b)
        parts = [self.expr(a) for a in e.args]
        if isinstance(e, (sympy.Pow, F.PowByNatural)) and isinstance(parts[1], int) and parts[1] >= 1:
            return _fold([parts[0]] * parts[1], operator.mul)
        if isinstance(e, (sympy.Pow, F.FloatPow)):       # (a head dim ** 0.5: an attention's scale)
            return sl.pow(_as_float(parts[0]), _as_float(parts[1]))
        if isinstance(e, (F.IntTrueDiv, F.FloatTrueDiv)):
            return _as_float(parts[0]) / _as_float(parts[1])
        if isinstance(e, F.ToFloat):
            return _as_float(parts[0])
        rounding = {F.CeilToInt: sl.ceil, F.FloorToInt: sl.floor, F.TruncToInt: sl.trunc}
        if type(e) in rounding:
            return sl.cast("int32", rounding[type(e)](_as_float(parts[0])))   # sizes are int32 (sl.size_var)
        if any(isinstance(p, float) or (isinstance(p, Expr) and p.dtype.is_float) for p in parts):
            parts = [_as_float(p) for p in parts]
        if isinstance(e, sympy.Add):
            return _fold(parts, operator.add)
        if isinstance(e, sympy.Mul):
            return _fold(parts, operator.mul)
        if isinstance(e, (F.FloorDiv, F.CleanDiv)):
            return sl.floordiv(*parts)
        if isinstance(e, F.CeilDiv):
            return -sl.floordiv(-parts[0], parts[1])
        if isinstance(e, (F.Mod, F.PythonMod)):
            return sl.floormod(*parts)
        if isinstance(e, (sympy.Max, F.Max)):
            return _fold(parts, sl.max)
        if isinstance(e, (sympy.Min, F.Min)):
            return _fold(parts, sl.min)
        raise NotImplementedError(f"symbolic size {e} ({type(e).__name__}) is not supported")

    def shape(self, shape) -> tuple:
        return tuple(self.expr(s) for s in shape)


def _as_float(value):
    """A size (int or int expression) as a float64 value."""
    if isinstance(value, (int, float)):
        return float(value)
    return value if value.dtype.is_float else sl.cast("float64", value)


def _fold(parts, fn):
    out = parts[0]
    for p in parts[1:]:
        out = fn(out, p)
    return out


_VIEWS = ("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.view_copy.default")
_SPLITS = ("aten.split_with_sizes.default", "aten.split.Tensor", "aten.chunk.default")


def graph_from_fx(graph: torch.fx.Graph, kinds: Dict[str, tuple], state: Dict[str, torch.Tensor],
                  dim_names: Optional[Dict[str, str]] = None,
                  attrs: Optional[Dict[str, torch.Tensor]] = None) -> TorchGraph:
    """Torch IR of an ATen-level FX graph whose nodes carry meta["val"]. kinds maps a
    placeholder's name to (kind, state name) for parameters/buffers/constants; state holds
    their tensors; attrs the tensors get_attr nodes read (AOT autograd's graphs keep tensor
    constants as attributes of their module), which become constant inputs. A split
    followed by getitems becomes one slice per piece."""
    sizes = _Sizes(dim_names or {})
    namer = _Namer()
    renamed: Dict[str, Any] = {}          # fx node name -> Ref or a concrete value
    splits: Dict[str, tuple] = {}          # fx node name -> (input Ref, dim, [(start, size)], base name)
    inputs: List[TorchInput] = []
    nodes: List[TorchNode] = []
    outputs: List[Any] = []

    def arg(value):
        if isinstance(value, torch.fx.Node):
            if value.name in renamed:
                return renamed[value.name]
            val = value.meta.get("val")
            if isinstance(val, (torch.SymInt, torch.SymFloat, int, float)) and not isinstance(val, bool):
                return sizes.expr(val)
            raise NotImplementedError(f"value {value.name} is used before it is defined")
        if isinstance(value, (list, tuple)):
            return type(value)(arg(v) for v in value)
        if isinstance(value, (torch.SymInt, torch.SymFloat)):
            return sizes.expr(value)
        return value

    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    order = [n for n in placeholders if n.name not in kinds] + [n for n in placeholders if n.name in kinds]
    for n in order:
        val = n.meta.get("val")
        is_size = kinds.get(n.name, ("size",))[0] == "size"      # unnamed, or named a size (dynamo.py)
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool) and is_size:
            # A size Dynamo passes as an argument (dynamic shapes): the graph reads it as an expression.
            name = namer(n.name)
            renamed[n.name] = sizes.expr(val)
            inputs.append(TorchInput(name, (), "int64", "size", None, None, renamed[n.name]))
            continue
        if not isinstance(val, torch.Tensor):
            raise NotImplementedError(f"input {n.name} is a {type(val).__name__}; schedlang.torch takes tensors "
                                      "and sizes only")
        kind, target = kinds.get(n.name, ("input", None))
        pretty = target.replace(".", "_") if target else n.name
        # "0.weight" of an nn.Sequential is no identifier: keep torch's p_0_weight then.
        name = namer(pretty if pretty.isidentifier() else n.name)
        value = state.get(target) if target else None
        inputs.append(TorchInput(name, sizes.shape(val.shape), ir_dtype(val.dtype), kind, target, value))
        renamed[n.name] = Ref(name)

    for n in graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            result = n.args[0]
            flat = list(result) if isinstance(result, (list, tuple)) else [result]
            outputs = [arg(o) for o in flat]
            kind = "tuple" if isinstance(result, tuple) else "list" if isinstance(result, list) else "single"
            break
        if n.op == "call_module" and not n.users:
            continue                          # e.g. the _guards_fn of an unlifted export
        if n.op == "get_attr" and isinstance((attrs or {}).get(n.target), torch.Tensor):
            value = attrs[n.target]
            pretty = n.target.replace(".", "_")
            name = namer(pretty if pretty.isidentifier() else n.name)
            inputs.append(TorchInput(name, sizes.shape(value.shape), ir_dtype(value.dtype), "constant", n.target,
                                     value))
            renamed[n.name] = Ref(name)
            continue
        if n.op != "call_function":
            raise NotImplementedError(f"FX node {n.name} ({n.op}) is not supported; expected an ATen graph")
        val = n.meta.get("val")
        if val is None and _is_check(n):
            name = namer(op_name(n.target).split(".")[1])
            nodes.append(TorchNode(name, name, n.target, arg(tuple(n.args)),
                                   {k: arg(v) for k, v in n.kwargs.items()}, [], []))
            continue
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)) or val is None:
            continue                          # a size computation: its users read it as an expression
        name_of = op_name(n.target) if not isinstance(n.target, type(operator.getitem)) else "getitem"
        if name_of in _SPLITS and _static_split(n):
            splits[n.name] = _split_pieces(n, arg)
            continue
        if n.target is operator.getitem and isinstance(n.args[0], torch.fx.Node) and n.args[0].name in splits:
            src, dim, pieces, base = splits[n.args[0].name]
            start, size = pieces[n.args[1]]
            name = namer(f"{base}_{n.args[1]}")
            nodes.append(TorchNode(name, "slice", torch.ops.aten.slice.Tensor, (src, dim, start, start + size), {},
                                   sizes.shape(val.shape), ir_dtype(val.dtype),
                                   display_kwargs={"dim": dim, "start": start}))
            renamed[n.name] = Ref(name)
            continue
        base = "getitem" if n.target is operator.getitem else name_of.split(".")[1] if "." in name_of else name_of
        name = namer(base)
        if isinstance(val, (list, tuple)):
            shape = [sizes.shape(v.shape) for v in val]
            dtype = [ir_dtype(v.dtype) for v in val]
        else:
            shape, dtype = sizes.shape(val.shape), ir_dtype(val.dtype)
        args = arg(tuple(n.args))
        if name_of in _VIEWS and len(args) == 2:
            args = (args[0], list(shape))     # torch's resolved shape: no -1, sizes as torch simplified them
        nodes.append(TorchNode(name, base, n.target, args, {k: arg(v) for k, v in n.kwargs.items()},
                               shape, dtype))
        renamed[n.name] = Ref(name)
    g = TorchGraph(inputs, nodes, outputs, kind, dict(sizes.vars))
    return g


def _is_check(n: torch.fx.Node) -> bool:
    """Whether n is an op with no result that checks tensors and raises (aten._assert_async,
    _linalg_check_errors once effect tokens are removed): it is kept, to run in torch. Checks
    of sizes only (_assert_scalar, torch's metadata asserts) are not: shapes are checked
    when a compiled module is called."""
    return (isinstance(n.target, torch._ops.OpOverload) and not n.target._schema.returns
            and "metadata" not in n.target.__name__
            and any(isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)
                    for a in n.args))


def _static_split(n: torch.fx.Node) -> bool:
    vals = n.meta.get("val")
    x = n.args[0]
    return isinstance(vals, (list, tuple)) and isinstance(x, torch.fx.Node) and all(
        isinstance(s, int) for v in vals for s in [v.shape[_dim_of(n)]])


def _dim_of(n: torch.fx.Node) -> int:
    dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0)
    ndim = len(n.args[0].meta["val"].shape)
    return dim % max(ndim, 1)


def _split_pieces(n: torch.fx.Node, arg):
    """(input, dim, [(start, size)], base name) of a static split."""
    dim = _dim_of(n)
    pieces, start = [], 0
    for v in n.meta["val"]:
        size = int(v.shape[dim])
        pieces.append((start, size))
        start += size
    # the torch function the split came from: torch.export records it as torch_fn, Dynamo's
    # graphs as the last source_fn_stack entry; both paths name the pieces alike (so they build
    # equal programs and share cached kernels)
    fn = (n.meta.get("torch_fn") or ("", ""))[1]
    stack = n.meta.get("source_fn_stack") or []
    if stack:
        fn += " " + str(getattr(stack[-1][1], "__name__", stack[-1][1]))
    base = "chunk" if any(f.endswith("chunk") for f in fn.split()) else "split"
    return arg(n.args[0]), dim, pieces, base


__all__ = ["capture", "graph_from_fx", "decomposition_table"]
