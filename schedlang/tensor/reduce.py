"""Reductions: commutative reducers (sum, max, min, prod, custom) and the Reduce node."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple, Union

from ..dtypes import DType
from ..expr.nodes import Const, Expr, Var, as_expr, binary, const
from .axis import REDUCE, IterVar


@dataclass(frozen=True, eq=False)
class CommReducer:
    """combine(lhs, rhs) = result, with identity element; traced once, so no closures in IR."""

    name: str
    lhs: Var
    rhs: Var
    result: Expr
    identity: Expr

    __hash__ = object.__hash__

    def format(self) -> str:
        return f"{self.name}(x, y) = {self.result}, identity {self.identity}"


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(Expr):
    """combiner over axis of source, counting only points where condition holds."""

    combiner: CommReducer
    source: Expr
    axis: Tuple[IterVar, ...]
    condition: Optional[Expr] = None

    __hash__ = object.__hash__

    @property
    def dtype(self) -> DType:
        return self.source.dtype

    def format(self, fmt) -> str:
        axes = ", ".join(a.name for a in self.axis)
        axes = axes if len(self.axis) == 1 else f"[{axes}]"
        where = f", where={fmt(self.condition)}" if self.condition is not None else ""
        return f"{self.combiner.name}({fmt(self.source)}, axis={axes}{where})"


BUILTIN_REDUCERS = ("sum", "max", "min", "prod")


class Reducer:
    """A reducer as the user sees it: call it with (expr, axis=..., where=...)."""

    def __init__(self, name: str, fcombine: Callable, fidentity: Callable[[DType], object]):
        self.name = name
        self._fcombine = fcombine
        self._fidentity = fidentity

    def trace(self, dt: DType) -> CommReducer:
        lhs, rhs = Var("x", dt), Var("y", dt)
        result = as_expr(self._fcombine(lhs, rhs), dt)
        if result.dtype != dt:
            raise TypeError(f"reducer '{self.name}' combines {dt} values into {result.dtype}; it must keep the dtype")
        identity = as_expr(self._fidentity(dt), dt)
        if identity.dtype != dt:
            identity = const(identity.value, dt) if isinstance(identity, Const) else identity
        return CommReducer(self.name, lhs, rhs, result, identity)

    def __call__(self, expr, axis: Union[IterVar, Sequence[IterVar]] = None, where=None) -> Reduce:
        if axis is None:
            raise TypeError(f"{self.name}(...) as a reduction needs axis=: a reduce_axis or a list of them")
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes:
            raise ValueError(f"{self.name}: axis= is an empty list")
        for a in axes:
            if not isinstance(a, IterVar) or a.kind != REDUCE:
                raise TypeError(f"{self.name}: axis= takes reduce_axis objects, got {a!r}; "
                                "create one with sl.reduce_axis((0, K), name='k')")
        source = as_expr(expr)
        condition = None if where is None else as_expr(where)
        if condition is not None and not condition.dtype.is_bool:
            raise TypeError(f"{self.name}: where= must be a bool expression, got '{condition}'")
        return Reduce(self.trace(source.dtype), source, axes, condition)


def _min_value(dt: DType) -> Const:
    if dt.is_float:
        return Const(float("-inf"), dt)
    if dt.is_bool:
        return Const(False, dt)
    return Const(0 if dt.kind == "uint" else -(1 << (dt.bits - 1)), dt)


def _max_value(dt: DType) -> Const:
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
    """A custom commutative reducer, as TVM's te.comm_reducer(fcombine, fidentity, name)."""
    if not callable(fcombine) or not callable(fidentity):
        raise TypeError("comm_reducer(fcombine, fidentity): both must be callables; "
                        "fidentity takes the dtype and returns the identity value")
    if name in BUILTIN_REDUCERS:
        raise ValueError(f"comm_reducer name '{name}' is reserved for the builtin reducer; choose another")
    return Reducer(name, fcombine, fidentity)


min_value, max_value = _min_value, _max_value
