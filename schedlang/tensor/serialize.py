"""Tensor IR <-> canonical JSON, and the workload key of a program.

The JSON names nothing by id(): variables, iteration axes, reducers and operations are
numbered in the order a deterministic walk from the given tensors first meets them, so
two programs built separately from the same definition serialise to the same text.
Format (version 1, keys sorted, no spaces):

    {"version": 1,
     "vars":      [{"name": "i", "dtype": "int32"}, ...],
     "iter_vars": [{"var": 0, "min": 0, "extent": 16, "kind": "data_par", "thread_tag": ""}, ...],
     "reducers":  [{"name": "sum", "lhs": [3], "rhs": [4], "result": [EXPR], "identity": [EXPR]}, ...],
                  # one entry per value a (tuple) reducer carries
     "ops":       [{"kind": "placeholder", ...}, {"kind": "compute", ...}, ...],  # producers first
     "shared":    [EXPR, ...],     # subexpressions used more than once
     "outputs":   [[op, value_index], ...]}

An expression is {"kind": KIND, field: value, ...}; a variable is {"kind": "var", "id": n}.
An expression object used in several places (a DAG, e.g. `e = e + e` thirty times) is
written once in "shared" and referenced as {"kind": "shared", "id": n}, so the text and
the time to write and read it grow with the number of distinct nodes, not of paths.

Names (of tensors, axes and reducers) are kept, and the workload key includes them: a
schedule's steps name stages and axes, so a tuning record replays only on a program with
the same names. Renaming a tensor therefore changes the key, as it changes Ansor's
(which hashes the printed DAG); so does any change of shape, dtype or expression.

Adding a node kind is one ``register_expr`` / ``register_op`` call listing its fields and
their codecs; a node kind without an entry is an error on both sides, never skipped.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any, Callable, Dict, List, Sequence, Tuple, Type

from ..dtypes import dtype as parse_dtype
from ..expr.nodes import Binary, Broadcast, Call, Cast, Compare, Const, Expr, Logical, Not, Ramp, Select, Var
from .axis import IterVar, Range
from .extern import ExternBuffer, ExternOp, PackedCall
from .op import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead
from .scan import ScanOp
from .reduce import CommReducer, Reduce

VERSION = 1

# A codec turns one field value into JSON data and back; it gets the walker for references.
Codec = Tuple[Callable[["_Encoder", Any], Any], Callable[["_Decoder", Any], Any]]
Fields = Tuple[Tuple[str, str], ...]

_EXPR_KINDS: Dict[Type, Tuple[str, Fields]] = {}
_EXPR_BY_KIND: Dict[str, Tuple[Type, Fields]] = {}
_OP_KINDS: Dict[Type, Tuple[str, Fields]] = {}
_OP_BY_KIND: Dict[str, Tuple[Type, Fields]] = {}
_COVERED: Dict[Type, None] = {}      # classes whose entry lists every dataclass field


def register_expr(cls: Type, kind: str, fields: Fields) -> None:
    """Serialise expression class cls as {"kind": kind, ...}; fields are (attribute, codec) pairs
    and must be the keyword arguments of cls's constructor."""
    _EXPR_KINDS[cls] = (kind, fields)
    _EXPR_BY_KIND[kind] = (cls, fields)
    _COVERED.pop(cls, None)


def register_op(cls: Type, kind: str, fields: Fields) -> None:
    """Serialise operation class cls as {"kind": kind, ...}, like register_expr."""
    _OP_KINDS[cls] = (kind, fields)
    _OP_BY_KIND[kind] = (cls, fields)
    _COVERED.pop(cls, None)


def _float_value(v: float):
    # JSON has no inf/nan: spell them as strings (the dtype says it is a float).
    return v if math.isfinite(v) else repr(v)


def _encode_value(_, v):
    if isinstance(v, bool) or isinstance(v, int):
        return v
    return _float_value(float(v))


def _decode_value(_, v):
    if isinstance(v, str):
        if v not in ("inf", "-inf", "nan"):
            raise ValueError(f"Tensor IR JSON: bad constant {v!r}; only inf, -inf and nan are spelled as strings")
        return float(v)
    return v


def _encode_index(enc, v):
    return v if isinstance(v, int) else {"expr": enc.expr(v)}


def _decode_index(dec, v):
    return dec.expr(v["expr"]) if isinstance(v, dict) else v


def _encode_packed_arg(enc, a):
    if isinstance(a, ExternBuffer):
        return {"buffer": [a.role, a.index, a.name, CODECS["shape"][0](enc, a.shape), str(a.dtype)]}
    return {"scalar": _encode_value(enc, a), "type": type(a).__name__}


def _decode_packed_arg(dec, d):
    if "buffer" in d:
        role, index, name, shape, dt = d["buffer"]
        return ExternBuffer(role, index, name, CODECS["shape"][1](dec, shape), parse_dtype(dt))
    kinds = {"bool": bool, "int": int, "float": float}
    if d.get("type") not in kinds:
        raise ValueError(f"Tensor IR JSON: bad call_packed argument {d!r}")
    return kinds[d["type"]](_decode_value(dec, d["scalar"]))


def _encode_packed(enc, call: PackedCall):
    return {"func": call.func, "args": [_encode_packed_arg(enc, a) for a in call.args]}


def _decode_packed(dec, d):
    return PackedCall(d["func"], tuple(_decode_packed_arg(dec, a) for a in d["args"]))


def _encode_attrs(_, attrs):
    out = []
    for key, value in attrs:
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise TypeError(f"compute attribute {key!r} = {value!r} is not JSON data, so the program "
                            "cannot be serialised") from None
        out.append([key, value])
    return out


def _decode_attrs(_, data):
    return tuple((key, tuple(v) if isinstance(v, list) else v) for key, v in data)


CODECS: Dict[str, Codec] = {
    "str": (lambda enc, v: v, lambda dec, v: v),
    "int": (lambda enc, v: v, lambda dec, v: v),
    "bool": (lambda enc, v: v, lambda dec, v: v),
    "value": (_encode_value, _decode_value),
    "dtype": (lambda enc, v: str(v), lambda dec, v: parse_dtype(v)),
    "expr": (lambda enc, v: enc.expr(v), lambda dec, v: dec.expr(v)),
    "opt_expr": (lambda enc, v: None if v is None else enc.expr(v),
                 lambda dec, v: None if v is None else dec.expr(v)),
    "exprs": (lambda enc, v: [enc.expr(x) for x in v], lambda dec, v: tuple(dec.expr(x) for x in v)),
    "index": (_encode_index, _decode_index),
    "shape": (lambda enc, v: [_encode_index(enc, x) for x in v],
              lambda dec, v: tuple(_decode_index(dec, x) for x in v)),
    "var": (lambda enc, v: enc.var(v), lambda dec, v: dec.ref(dec.vars, v, "var")),
    "vars": (lambda enc, v: [enc.var(x) for x in v], lambda dec, v: tuple(dec.ref(dec.vars, x, "var") for x in v)),
    "iter_vars": (lambda enc, v: [enc.iter_var(x) for x in v],
                  lambda dec, v: tuple(dec.ref(dec.iter_vars, x, "iter_var") for x in v)),
    "reducer": (lambda enc, v: enc.reducer(v), lambda dec, v: dec.ref(dec.reducers, v, "reducer")),
    "tensor": (lambda enc, v: enc.tensor(v), lambda dec, v: dec.tensor(v)),
    "attrs": (_encode_attrs, _decode_attrs),
    "iter_var": (lambda enc, v: enc.iter_var(v), lambda dec, v: dec.ref(dec.iter_vars, v, "iter_var")),
    "tensors": (lambda enc, v: [enc.tensor(t) for t in v], lambda dec, v: tuple(dec.tensor(t) for t in v)),
    "shapes": (lambda enc, v: [CODECS["shape"][0](enc, s) for s in v],
               lambda dec, v: tuple(CODECS["shape"][1](dec, s) for s in v)),
    "dtypes": (lambda enc, v: [str(d) for d in v], lambda dec, v: tuple(parse_dtype(d) for d in v)),
    "packed_call": (_encode_packed, _decode_packed),
}

for _cls in (Binary, Compare, Logical):
    register_expr(_cls, _cls.__name__.lower(), (("op", "str"), ("a", "expr"), ("b", "expr")))
register_expr(Const, "const", (("value", "value"), ("dtype", "dtype")))
register_expr(Not, "not", (("a", "expr"),))
register_expr(Select, "select", (("cond", "expr"), ("true_value", "expr"), ("false_value", "expr"),
                                 ("guarded", "bool")))
register_expr(Cast, "cast", (("dtype", "dtype"), ("value", "expr")))
register_expr(Call, "call", (("name", "str"), ("args", "exprs"), ("dtype", "dtype")))
register_expr(Ramp, "ramp", (("base", "expr"), ("stride", "expr"), ("lanes", "int")))
register_expr(Broadcast, "broadcast", (("value", "expr"), ("lanes", "int")))
register_expr(TensorRead, "read", (("tensor", "tensor"), ("indices", "exprs")))
register_expr(Reduce, "reduce", (("combiner", "reducer"), ("source", "exprs"), ("axis", "iter_vars"),
                                 ("condition", "opt_expr"), ("value_index", "int"), ("init", "exprs")))
register_op(PlaceholderOp, "placeholder", (("name", "str"), ("shape", "shape"), ("dtype", "dtype")))
register_op(ComputeOp, "compute", (("name", "str"), ("axis", "iter_vars"), ("body", "expr"), ("tag", "str"),
                                   ("attrs", "attrs"), ("more_bodies", "exprs")))
register_op(ScanOp, "scan", (("name", "str"), ("scan_axis", "iter_var"), ("init", "tensors"), ("update", "tensors"),
                             ("state_placeholder", "tensors"), ("inputs", "tensors"), ("tag", "str"),
                             ("attrs", "attrs")))
register_op(ExternOp, "extern", (("name", "str"), ("inputs", "tensors"), ("shapes", "shapes"), ("dtypes", "dtypes"),
                                 ("body", "packed_call"), ("tag", "str"), ("attrs", "attrs")))


def _check_covered(cls: Type, fields: Fields) -> None:
    """A dataclass field that the kind's entry does not list would be dropped silently: refuse."""
    if cls in _COVERED or not dataclasses.is_dataclass(cls):
        return
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in {name for name, _ in fields}]
    if missing:
        raise TypeError(f"{cls.__name__} has fields {missing} that its entry in tensor/serialize.py does not "
                        "list; add them (with a codec) so the JSON keeps them")
    _COVERED[cls] = None


def _fields_to_json(enc: "_Encoder", node, kind: str, fields: Fields) -> Dict[str, Any]:
    _check_covered(type(node), fields)
    data: Dict[str, Any] = {"kind": kind}
    for name, codec in fields:
        data[name] = CODECS[codec][0](enc, getattr(node, name))
    return data


class _Encoder:
    """Walks the program once, numbering every shared object on first sight."""

    def __init__(self):
        self.tables: Dict[str, List[Any]] = {"vars": [], "iter_vars": [], "reducers": [], "ops": [],
                                             "shared": []}
        self.ids: Dict[str, Dict[int, int]] = {name: {} for name in self.tables}
        self.keep: List[Any] = []    # holds every numbered object so no id() is reused
        self.seen: Dict[int, Dict[str, Any]] = {}    # id(expression) -> the JSON made for it

    def _number(self, table: str, obj, make: Callable[[], Any]) -> int:
        ids = self.ids[table]
        if id(obj) not in ids:
            self.keep.append(obj)
            ids[id(obj)] = len(ids)
            self.tables[table].append(None)      # reserve the slot before walking children
            self.tables[table][ids[id(obj)]] = make()
        return ids[id(obj)]

    def var(self, v: Var) -> int:
        return self._number("vars", v, lambda: {"name": v.name, "dtype": str(v.dtype)})

    def iter_var(self, iv: IterVar) -> int:
        if not isinstance(iv, IterVar):
            raise TypeError(f"cannot serialise {iv!r} as an iteration axis")
        return self._number("iter_vars", iv, lambda: {
            "var": self.var(iv.var), "min": _encode_index(self, iv.dom.min),
            "extent": _encode_index(self, iv.dom.extent), "kind": iv.kind, "thread_tag": iv.thread_tag})

    def reducer(self, r: CommReducer) -> int:
        return self._number("reducers", r, lambda: {
            "name": r.name, "lhs": CODECS["vars"][0](self, r.lhs), "rhs": CODECS["vars"][0](self, r.rhs),
            "result": CODECS["exprs"][0](self, r.result), "identity": CODECS["exprs"][0](self, r.identity)})

    def op(self, op: Operation) -> int:
        known = self.ids["ops"]
        if id(op) in known:              # its producers were numbered before it: not walked again
            return known[id(op)]
        # Producers first, depth first in input order, in a loop: a deep model chains more
        # ops than Python's recursion limit. An op numbered before ends the walk there.
        stack = [(op, iter(op.input_tensors))]
        while stack:
            top, pending = stack[-1]
            for t in pending:
                if id(t.op) not in known:      # (on the stack: impossible in a DAG)
                    stack.append((t.op, iter(t.op.input_tensors)))
                    break
            else:
                stack.pop()
                if id(top) not in known:
                    self._number_op(top)
        return known[id(op)]

    def _number_op(self, op: Operation) -> int:
        entry = _OP_KINDS.get(type(op))
        if entry is None:
            raise TypeError(f"cannot serialise operation kind {type(op).__name__} ('{op.name}'); "
                            f"serialisable kinds: {', '.join(sorted(_OP_BY_KIND))}")
        return self._number("ops", op, lambda: _fields_to_json(self, op, *entry))

    def tensor(self, t: Tensor) -> List[int]:
        return [self.op(t.op), t.value_index]

    def expr(self, e: Expr) -> Dict[str, Any]:
        if isinstance(e, Var):
            return {"kind": "var", "id": self.var(e)}
        seen = self.seen.get(id(e))
        if seen is not None:       # a shared subexpression (a DAG): written once, referenced after
            if seen["kind"] != "shared" and not isinstance(e, Const):
                body = dict(seen)  # the first occurrence's dict becomes the reference, in place
                seen.clear()
                seen.update({"kind": "shared", "id": len(self.tables["shared"])})
                self.tables["shared"].append(body)
            return seen
        entry = _EXPR_KINDS.get(type(e))
        if entry is None:
            raise TypeError(f"cannot serialise expression kind {type(e).__name__} ('{e}'): it is not part of "
                            f"Tensor IR's JSON form; known kinds: {', '.join(sorted(_EXPR_BY_KIND) + ['var'])}")
        data = _fields_to_json(self, e, *entry)
        self.keep.append(e)
        self.seen[id(e)] = data
        return data


class _Decoder:
    def __init__(self, data: Dict[str, Any]):
        self.data = data
        self.shared_data = data.get("shared", [])
        self.shared: Dict[int, Expr] = {}       # decoded shared subexpressions, so a DAG stays a DAG
        self.vars = [Var(v["name"], parse_dtype(v["dtype"])) for v in data["vars"]]
        self.iter_vars: List[IterVar] = []
        for d in data["iter_vars"]:
            dom = Range(_decode_index(self, d["min"]), _decode_index(self, d["extent"]))
            self.iter_vars.append(IterVar(self.ref(self.vars, d["var"], "var"), dom, d["kind"], d["thread_tag"]))
        self.reducers = [CommReducer(r["name"], CODECS["vars"][1](self, r["lhs"]), CODECS["vars"][1](self, r["rhs"]),
                                     CODECS["exprs"][1](self, r["result"]), CODECS["exprs"][1](self, r["identity"]))
                         for r in data["reducers"]]
        self.ops: List[Operation] = []
        for d in data["ops"]:
            cls, fields = self._kind(_OP_BY_KIND, d, "operation")
            self.ops.append(cls(**{name: CODECS[codec][1](self, d[name]) for name, codec in fields}))

    @staticmethod
    def ref(table: List[Any], index, what: str):
        if not isinstance(index, int) or not 0 <= index < len(table):
            raise ValueError(f"Tensor IR JSON: {what} reference {index!r} is out of range (there are {len(table)})")
        return table[index]

    @staticmethod
    def _kind(by_kind, d, what: str):
        kind = d.get("kind") if isinstance(d, dict) else None
        if kind not in by_kind:
            raise ValueError(f"Tensor IR JSON: unknown {what} kind {kind!r}; known kinds: "
                             f"{', '.join(sorted(by_kind) + (['var'] if what == 'expression' else []))}")
        cls, fields = by_kind[kind]
        missing = [name for name, _ in fields if name not in d]
        if missing:
            raise ValueError(f"Tensor IR JSON: {what} {kind!r} is missing fields {missing}")
        return cls, fields

    def tensor(self, ref) -> Tensor:
        op = self.ref(self.ops, ref[0], "operation")
        return op.output(ref[1])

    def expr(self, d) -> Expr:
        if isinstance(d, dict) and d.get("kind") == "var":
            return self.ref(self.vars, d.get("id"), "var")
        if isinstance(d, dict) and d.get("kind") == "shared":
            k = d.get("id")
            if k not in self.shared:
                self.shared[k] = self.expr(self.ref(self.shared_data, k, "shared expression"))
            return self.shared[k]
        cls, fields = self._kind(_EXPR_BY_KIND, d, "expression")
        return cls(**{name: CODECS[codec][1](self, d[name]) for name, codec in fields})


def as_tensor_list(tensors, what: str = "to_json") -> List[Tensor]:
    """A tensor, an operation (its first output) or a sequence of them, as a list of tensors;
    anything else is a TypeError naming `what` was called."""
    items = [tensors] if isinstance(tensors, (Tensor, Operation)) else list(tensors)
    out = []
    for t in items:
        if isinstance(t, Operation):
            t = t.output(0)
        if not isinstance(t, Tensor):
            raise TypeError(f"{what} takes tensors (or operations), got {t!r}")
        out.append(t)
    return out


def to_data(outputs) -> Dict[str, Any]:
    """The JSON data (dicts and lists) of the program computing outputs (tensors or ops)."""
    enc = _Encoder()
    refs = [enc.tensor(t) for t in as_tensor_list(outputs)]
    return {"version": VERSION, **enc.tables, "outputs": refs}


def to_json(outputs) -> str:
    """Canonical JSON text of the program computing outputs (tensors or ops, in order)."""
    return json.dumps(to_data(outputs), sort_keys=True, separators=(",", ":"))


def from_json(text: str) -> List[Tensor]:
    """Rebuild the program of to_json; returns its output tensors, in the order given."""
    data = json.loads(text) if isinstance(text, (str, bytes)) else text
    if not isinstance(data, dict) or "version" not in data:
        raise ValueError("Tensor IR JSON: expected an object with a \"version\" field")
    if data["version"] != VERSION:
        raise ValueError(f"Tensor IR JSON: version {data['version']!r} is not supported (this schedlang reads "
                         f"version {VERSION})")
    missing = [k for k in ("vars", "iter_vars", "reducers", "ops", "outputs") if k not in data]
    if missing:
        raise ValueError(f"Tensor IR JSON: missing fields {missing}")
    try:
        dec = _Decoder(data)
        return [dec.tensor(ref) for ref in data["outputs"]]
    except (KeyError, TypeError, IndexError) as err:     # a field of the wrong shape or missing
        raise ValueError(f"Tensor IR JSON is malformed: {type(err).__name__}: {err}") from err


def workload_key(outputs: Sequence[Tensor]) -> str:
    """A stable key of the program (sha256 hex of its canonical JSON): equal for programs
    built separately from one definition, different when a name, shape, dtype or
    expression differs."""
    return hashlib.sha256(to_json(outputs).encode()).hexdigest()
