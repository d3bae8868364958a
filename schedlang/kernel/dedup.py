"""The same computation on other buffers, found so that it is lowered and compiled once.

A model repeats its layers: ResNet-50's 53 kernels are 29 distinct computations, the
others differ only in the buffers they read and write and in the names of their loop
variables. alpha_key gives two statements the same key when one is the other with its
variables and buffers renamed one to one (names ignored; dtypes, shapes, scopes, strides,
loop kinds, pragmas and every constant compared); the renaming is positional, by first
appearance. rename applies such a renaming to a statement, so that the result of lowering
one copy serves the others (kernel/lower.py), and a backend can emit one function for
kernels with equal keys (target/llvm/codegen.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..expr.equality import hashable
from ..expr.functor import field_names
from ..expr.nodes import Buffer, Const, Expr, Var
from ..loop.nodes import Stmt


class Unkeyable(Exception):
    """A field this module cannot compare by value (then nothing is shared)."""


class AlphaKey:
    """Keys of statements up to a renaming of variables and buffers, numbered in order of
    first appearance (seed them with `bind` to fix the numbering, e.g. a kernel's parameters)."""

    def __init__(self, table: Optional[Dict[tuple, int]] = None):
        # A node's key is its entry in `table` (keys of equal nodes are equal numbers), not
        # the nested tuple: hashing or comparing a nested tuple walks it as a tree, which is
        # exponential in the depth of shared subexpressions. Statements compared with each
        # other are keyed with one table.
        self._table: Dict[tuple, int] = {} if table is None else table
        self.vars: List[Var] = []
        self.buffers: List[Buffer] = []
        self._var_ids: Dict[int, int] = {}
        self._buf_ids: Dict[int, int] = {}
        self._memo: Dict[int, tuple] = {}     # id -> (node, key): shared subexpressions keyed once

    def bind(self, items: Sequence[object]) -> tuple:
        """Number these variables/buffers first; returns their keys."""
        return tuple(self.key(x) for x in items)

    def key(self, x: Any) -> Any:
        if isinstance(x, Var):
            n = self._var_ids.get(id(x))
            if n is None:
                n = self._var_ids[id(x)] = len(self.vars)
                self.vars.append(x)
                return ("var", n, x.dtype, x.nonnegative)
            return ("var", n)
        if isinstance(x, Buffer):
            n = self._buf_ids.get(id(x))
            if n is None:
                n = self._buf_ids[id(x)] = len(self.buffers)
                self.buffers.append(x)
                return ("buf", n, self.key(x.shape), x.dtype, x.scope, self.key(x.strides))
            return ("buf", n)
        if isinstance(x, Const):
            return ("const", self.key(x.value), x.dtype)
        if isinstance(x, (Expr, Stmt)):
            hit = self._memo.get(id(x))
            if hit is None:
                k = (type(x).__name__,) + tuple(self.key(getattr(x, n)) for n in field_names(x)
                                                if not (n == "stage" and isinstance(x, Stmt)))
                hit = self._memo[id(x)] = (x, ("node", self._table.setdefault(k, len(self._table))))
            return hit[1]
        if isinstance(x, (tuple, list)):
            return (type(x).__name__,) + tuple(self.key(v) for v in x)
        if isinstance(x, float):       # -0.0 is not 0.0 here
            return ("float", x.hex())
        if x is None or isinstance(x, (str, int, bool)):
            return (type(x).__name__, x)
        params = getattr(x, "__dataclass_params__", None)
        if (params is not None and not (params.frozen and params.eq)) or not hashable(x):
            raise Unkeyable(type(x).__name__)
        return x         # a DType, an enum member: compared by value


def alpha_key(stmt: Stmt, bound: Sequence[object] = (), table: Optional[Dict[tuple, int]] = None
              ) -> Optional[Tuple[tuple, AlphaKey]]:
    """(key, keyer) of stmt, its variables and buffers numbered after `bound`; keyer.vars and
    keyer.buffers list them in numbering order. None when stmt holds something that cannot be
    compared by value (an extern function object, a combiner): such statements are never shared.
    Keys are comparable only when made with the same `table` (give one to every alpha_key
    whose keys are compared; by default each call has its own)."""
    keyer = AlphaKey(table)
    try:
        k = (keyer.bind(bound), keyer.key(stmt))
    except Unkeyable:
        return None
    return k, keyer


def renaming(source: AlphaKey, target: AlphaKey) -> Tuple[Dict[Var, Var], Dict[Buffer, Buffer]]:
    """The variables and buffers of one keyed statement mapped to those of another with the same key."""
    return dict(zip(source.vars, target.vars)), dict(zip(source.buffers, target.buffers))


class Unmapped(Exception):
    """rename(strict=True) met a variable or buffer that the maps do not name."""


def rename(stmt: Stmt, var_map: Mapping[Var, Var], buf_map: Mapping[Buffer, Buffer], strict: bool = False) -> Stmt:
    """stmt with its variables and buffers replaced as mapped. Those not in the maps (made by
    the passes that ran on stmt) are replaced by fresh copies, so that no two kernels share one;
    with strict, they raise Unmapped instead (a fresh copy would keep the other one's name)."""
    return _Renamer(dict(var_map), dict(buf_map), strict).go(stmt)


def _same_types(var_map: Mapping[Var, Var], buf_map: Mapping[Buffer, Buffer]) -> bool:
    """Whether every mapped variable and buffer keeps its dtype (as between alpha-equal statements)."""
    return (all(type(b) is Var and a.dtype == b.dtype for a, b in var_map.items())
            and all(type(b) is Buffer and a.dtype == b.dtype for a, b in buf_map.items()))


def _rebuilt(x: Any, names: Sequence[str], values: Sequence[Any]) -> Any:
    """A node of x's type with these field values, made without its __post_init__ checks: a
    renaming that keeps every dtype cannot make a valid node invalid, and the checks were a
    third of a model's renaming (ResNet-50: 24 kernels renamed per build). The node's
    cached dtype carries over: renaming keeps it."""
    new = object.__new__(type(x))
    fields = new.__dict__
    fields.update(zip(names, values))
    dtype = x.__dict__.get("_dtype")
    if dtype is not None:
        fields["_dtype"] = dtype
    return new


class _Renamer:
    def __init__(self, var_map: Dict[Var, Var], buf_map: Dict[Buffer, Buffer], strict: bool = False):
        self.var_map = var_map
        self.buf_map = buf_map
        self.strict = strict
        self.memo: Dict[int, tuple] = {}
        # Fresh copies (not strict) keep their dtypes too; a map that changes one is checked
        # node by node (the dataclasses' own constructors).
        self.make = _rebuilt if _same_types(var_map, buf_map) else (lambda x, names, values: type(x)(*values))

    def go(self, x: Any) -> Any:
        if isinstance(x, Var):
            new = self.var_map.get(x)
            if new is None:
                if self.strict:
                    raise Unmapped(x.name)
                new = self.var_map[x] = Var(x.name, x.dtype, x.nonnegative)
            return new
        if isinstance(x, Buffer):
            new = self.buf_map.get(x)
            if new is None:
                if self.strict:
                    raise Unmapped(x.name)
                new = self.buf_map[x] = replace(x, shape=self.go(x.shape), strides=self.go(x.strides))
            return new
        if isinstance(x, Const):
            return x
        if isinstance(x, (Expr, Stmt)):
            hit = self.memo.get(id(x))
            if hit is None:
                names = field_names(x)
                old = [getattr(x, n) for n in names]
                values = [self.go(v) for v in old]
                same = all(a is b for a, b in zip(values, old))
                hit = self.memo[id(x)] = (x, x if same else self.make(x, names, values))
            return hit[1]
        if isinstance(x, tuple):
            new = tuple(self.go(v) for v in x)
            return x if all(a is b for a, b in zip(new, x)) else new
        return x
