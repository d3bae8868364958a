"""Reductions: commutative reducers (sum, max, min, prod, custom, tuple-valued such as
argmax) and the Reduce node."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple, Union

from ..dtypes import DType, dtype as parse_dtype
from ..expr.equality import equal
from ..expr.nodes import Const, Expr, Var, as_expr, binary, cast, const
from .axis import REDUCE, IterVar


@dataclass(frozen=True, eq=False)
class CommReducer:
    """combine(lhs, rhs) = result, with identity elements; traced once, so no closures in IR.

    Every field is a tuple with one entry per value the reducer carries: one for sum or
    max, two for argmax's (index, value) pairs, as TVM's CommReducer."""

    name: str
    lhs: Tuple[Var, ...]
    rhs: Tuple[Var, ...]
    result: Tuple[Expr, ...]
    identity: Tuple[Expr, ...]

    __hash__ = object.__hash__

    @property
    def arity(self) -> int:
        return len(self.result)

    def format(self) -> str:
        if self.arity == 1:
            return f"{self.name}(x, y) = {self.result[0]}, identity {self.identity[0]}"

        def group(items):
            return "(" + ", ".join(str(x) for x in items) + ")"
        return (f"{self.name}({group(v.name for v in self.lhs)}, {group(v.name for v in self.rhs)}) = "
                f"{group(self.result)}, identity {group(self.identity)}")


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(Expr):
    """combiner over axis of source, counting only points where condition holds.

    source holds one expression per value of the combiner; this node is value
    value_index of the reduction (a tuple reducer's compute has one Reduce per
    output, all alike but for value_index). init, when given, is where the
    reduction starts instead of the identity (TVM's init=), one per value."""

    combiner: CommReducer
    source: Tuple[Expr, ...]
    axis: Tuple[IterVar, ...]
    condition: Optional[Expr] = None
    value_index: int = 0
    init: Tuple[Expr, ...] = ()

    __hash__ = object.__hash__

    @property
    def dtype(self) -> DType:
        return self.source[self.value_index].dtype

    def same_reduction(self, other: "Reduce") -> bool:
        """Whether other is another value of the same reduction (same combiner, sources,
        axes, condition and init)."""
        same = (self.combiner is other.combiner and len(self.source) == len(other.source)
                and all(equal(a, b) for a, b in zip(self.source, other.source))
                and len(self.axis) == len(other.axis) and all(a is b for a, b in zip(self.axis, other.axis))
                and len(self.init) == len(other.init) and all(equal(a, b) for a, b in zip(self.init, other.init)))
        if not same or (self.condition is None) != (other.condition is None):
            return False
        return self.condition is None or equal(self.condition, other.condition)

    def format(self, fmt, with_index: bool = True) -> str:
        """The reduction as text; a tuple reduction ends with [value_index] unless with_index
        is False (the Tensor IR printer shows all its values at once)."""
        axes = ", ".join(a.name for a in self.axis)
        axes = axes if len(self.axis) == 1 else f"[{axes}]"
        where = f", where={fmt(self.condition)}" if self.condition is not None else ""
        if self.init:
            init = self.init[0] if len(self.init) == 1 else self.init
            init = fmt(init) if isinstance(init, Expr) else "(" + ", ".join(fmt(x) for x in init) + ")"
            where += f", init={init}"
        if len(self.source) == 1:
            return f"{self.combiner.name}({fmt(self.source[0])}, axis={axes}{where})"
        source = ", ".join(fmt(s) for s in self.source)
        index = f"[{self.value_index}]" if with_index else ""
        return f"{self.combiner.name}(({source}), axis={axes}{where}){index}"


BUILTIN_REDUCERS = ("sum", "max", "min", "prod")


def _as_tuple(value) -> Tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class Reducer:
    """A reducer as the user sees it: call it with (expr, axis=..., where=..., init=...).
    With a tuple of expressions (a tuple reducer such as argmax) it returns a tuple of
    Reduce expressions, one per value, for a multi-output compute."""

    def __init__(self, name: str, fcombine: Callable, fidentity: Callable):
        self.name = name
        self._fcombine = fcombine
        self._fidentity = fidentity

    def trace(self, dts: Sequence[DType]) -> CommReducer:
        """The combiner over values of dtypes dts. fcombine gets (x, y), each a tuple when the
        reducer carries several values; fidentity gets the dtype strings, as in TVM."""
        dts = tuple(dts)
        many = len(dts) > 1
        if many:
            lhs = tuple(Var(f"x{i}", dt) for i, dt in enumerate(dts))
            rhs = tuple(Var(f"y{i}", dt) for i, dt in enumerate(dts))
            result = _as_tuple(self._fcombine(lhs, rhs))
        else:
            lhs, rhs = (Var("x", dts[0]),), (Var("y", dts[0]),)
            result = _as_tuple(self._fcombine(lhs[0], rhs[0]))
        identity = _as_tuple(self._fidentity(*(str(dt) for dt in dts)))
        for what, values in (("combines values into", result), ("has identity", identity)):
            if len(values) != len(dts):
                raise TypeError(f"reducer '{self.name}' {what} {len(values)} value(s) but reduces {len(dts)} "
                                f"({', '.join(map(str, dts))}); fcombine and fidentity must return one value "
                                "per source")
        result = tuple(as_expr(r, dt) for r, dt in zip(result, dts))
        for r, dt in zip(result, dts):
            if r.dtype != dt:
                raise TypeError(f"reducer '{self.name}' combines {dt} values into {r.dtype}; it must keep the dtype")
        identity = tuple(_identity_of(as_expr(x, dt), dt) for x, dt in zip(identity, dts))
        return CommReducer(self.name, lhs, rhs, result, identity)

    def __call__(self, expr, axis: Union[IterVar, Sequence[IterVar]] = None, where=None, init=None):
        if axis is None:
            raise TypeError(f"{self.name}(...) as a reduction needs axis=: a reduce_axis or a list of them")
        if not _is_axes(axis):
            if where is not None or init is not None:
                raise TypeError(f"{self.name}(a, b) combines two values and takes no where= or init=")
            return self._fcombine(expr, axis)   # TVM: a reducer called on two values combines them
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes:
            raise ValueError(f"{self.name}: axis= is an empty list")
        for a in axes:
            if not isinstance(a, IterVar) or a.kind != REDUCE:
                raise TypeError(f"{self.name}: axis= takes reduce_axis objects, got {a!r}; "
                                "create one with sl.reduce_axis((0, K), name='k')")
        many = isinstance(expr, (tuple, list))
        sources = tuple(as_expr(e) for e in _as_tuple(expr))
        if not sources:
            raise ValueError(f"{self.name}: the tuple of expressions to reduce is empty")
        condition = None if where is None else as_expr(where)
        if condition is not None and not condition.dtype.is_bool:
            raise TypeError(f"{self.name}: where= must be a bool expression, got '{condition}'")
        inits = () if init is None else _as_tuple(init)
        if init is not None and len(inits) != len(sources):
            raise ValueError(f"{self.name}: init= gives {len(inits)} value(s) for {len(sources)} reduced value(s)")
        inits = tuple(_cast_to(as_expr(x, s.dtype), s.dtype) for x, s in zip(inits, sources))
        combiner = self.trace([s.dtype for s in sources])
        nodes = tuple(Reduce(combiner, sources, axes, condition, i, inits) for i in range(len(sources)))
        return nodes if many else nodes[0]


def _is_axes(axis) -> bool:
    if isinstance(axis, IterVar):
        return True
    return isinstance(axis, (list, tuple)) and (not axis or isinstance(axis[0], IterVar))


def map_reduce(r: Reduce, fn: Callable[[Expr], Expr], axis: Optional[Tuple[IterVar, ...]] = None) -> Reduce:
    """r with fn applied to its sources, condition and init (and other reduction axes)."""
    cond = None if r.condition is None else fn(r.condition)
    return Reduce(r.combiner, tuple(fn(x) for x in r.source), r.axis if axis is None else tuple(axis), cond,
                  r.value_index, tuple(fn(x) for x in r.init))


def _cast_to(e: Expr, dt: DType) -> Expr:
    return e if e.dtype == dt else cast(dt, e)


def _identity_of(identity: Expr, dt: DType) -> Expr:
    if identity.dtype != dt and isinstance(identity, Const):
        return const(identity.value, dt)
    return identity


def _min_value(dt) -> Const:
    dt = parse_dtype(dt)
    if dt.is_float:
        return Const(float("-inf"), dt)
    if dt.is_bool:
        return Const(False, dt)
    return Const(0 if dt.kind == "uint" else -(1 << (dt.bits - 1)), dt)


def _max_value(dt) -> Const:
    dt = parse_dtype(dt)
    if dt.is_float:
        return Const(float("inf"), dt)
    if dt.is_bool:
        return Const(True, dt)
    return Const((1 << dt.bits) - 1 if dt.kind == "uint" else (1 << (dt.bits - 1)) - 1, dt)


sum_reducer = Reducer("sum", lambda x, y: x + y, lambda dt: const(0, dt))
prod_reducer = Reducer("prod", lambda x, y: x * y, lambda dt: const(1, dt))
max_reducer = Reducer("max", lambda x, y: binary("max", x, y), _min_value)
min_reducer = Reducer("min", lambda x, y: binary("min", x, y), _max_value)


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> Reducer:
    """A custom commutative reducer, as TVM's te.comm_reducer(fcombine, fidentity, name).

    For one value, fcombine(x, y) returns the combination and fidentity(dtype) the
    identity. For a tuple of values (argmax), fcombine(x, y) gets two tuples and returns
    a tuple, and fidentity(dtype0, dtype1, ...) returns a tuple of identities."""
    if not callable(fcombine) or not callable(fidentity):
        raise TypeError("comm_reducer(fcombine, fidentity): both must be callables; "
                        "fidentity takes the dtype and returns the identity value")
    if name in BUILTIN_REDUCERS:
        # the lowering knows the builtins by name (the reference evaluator, fusion, tensor cores): a
        # custom reducer named like one (TVM allows it) gets a name of its own
        name = f"{name}_custom"
    return Reducer(name, fcombine, fidentity)


min_value, max_value = _min_value, _max_value
