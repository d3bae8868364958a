"""Scalar expression nodes shared by every IR level.

Nodes are frozen dataclasses with tuple children. Python operators build nodes, as
in TVM: ``i * 4 + 1`` is an expression and ``a == b`` builds an equality node whose
truth value is structural equality. Variables, tensors and buffers compare by
identity; every other node compares structurally (``equal``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from ..dtypes import DType, boolean, dtype as parse_dtype, float32, int32, int64, promote
from ..errors import InternalError

# The operations each node accepts. A new Binary op goes into BINARY_OPS (and into
# BITWISE_OPS too when floats may not use it); the printer and renderers must know it too.
ARITHMETIC_OPS = ["add", "sub", "mul", "div", "floordiv", "floormod", "min", "max",
                  "truncdiv", "truncmod"]     # C's / and % (integers only: tensor.intrin checks)
BITWISE_OPS = ["bitand", "bitor", "bitxor", "shl", "shr"]     # integers and bools only
BINARY_OPS = ARITHMETIC_OPS + BITWISE_OPS
_BITWISE = frozenset(BITWISE_OPS)
COMPARE_OPS = ["lt", "le", "gt", "ge", "eq", "ne"]
LOGICAL_OPS = ["and", "or"]


def _invalid(node: str, problem: str):
    """A node built with broken invariants: a compiler bug (user input is checked by the builders)."""
    raise InternalError(f"{node}: {problem}")


def _check_operand(node: str, e) -> None:
    if not isinstance(e, Expr):
        _invalid(node, f"operand {e!r} is a {type(e).__name__}, not an Expr")


# Each node kind's ops as a set: every node built checks its op (the simplifier builds
# hundreds of thousands of nodes for a model).
_OP_SETS = {"Binary": frozenset(BINARY_OPS), "Compare": frozenset(COMPARE_OPS), "Logical": frozenset(LOGICAL_OPS)}


def _check_pair(node: str, op: str, ops, a, b) -> None:
    if op not in _OP_SETS.get(node, ops):
        _invalid(node, f"unknown op {op!r}; valid ops: {', '.join(ops)}")
    if not isinstance(a, Expr):
        _check_operand(node, a)
    if not isinstance(b, Expr):
        _check_operand(node, b)
    da, db = a.dtype, b.dtype
    if da is not db and da != db:
        _invalid(node, f"'{op}' of mismatched dtypes {da} and {db}")


def _check_bool(node: str, what: str, e) -> None:
    _check_operand(node, e)
    if not e.dtype.is_bool:
        _invalid(node, f"{what} must be bool, got dtype {e.dtype}")


# Call(FAST_MATH_MARKER, (value,)) marks arithmetic that a stage's "fast_math" pragma lets the
# backend reassociate and contract; it is value itself otherwise.
FAST_MATH_MARKER = "fast_math"
# Call(NEG, (x,)) is IEEE negation of a float x: the sign bit flipped, for zeros and NaN too
# (numpy's negative, LLVM's fneg, C's -x). `0.0 - x` is not it: 0.0 - (+0.0) is +0.0.
NEG = "neg"


class ExprOps:
    """Python operator overloads that build expression nodes."""

    def __add__(self, other): return binary("add", self, other)
    def __radd__(self, other): return binary("add", other, self)
    def __sub__(self, other): return binary("sub", self, other)
    def __rsub__(self, other): return binary("sub", other, self)
    def __mul__(self, other): return binary("mul", self, other)
    def __rmul__(self, other): return binary("mul", other, self)
    def __truediv__(self, other): return binary("div", self, other)
    def __rtruediv__(self, other): return binary("div", other, self)
    def __floordiv__(self, other): return binary("floordiv", self, other)
    def __rfloordiv__(self, other): return binary("floordiv", other, self)
    def __mod__(self, other): return binary("floormod", self, other)
    def __rmod__(self, other): return binary("floormod", other, self)
    def __neg__(self): return neg(self)
    def __lt__(self, other): return compare("lt", self, other)
    def __le__(self, other): return compare("le", self, other)
    def __gt__(self, other): return compare("gt", self, other)
    def __ge__(self, other): return compare("ge", self, other)
    def __eq__(self, other):
        if not isinstance(other, (ExprOps, int, float)):
            return NotImplemented
        return compare("eq", self, other)

    def __ne__(self, other):
        if not isinstance(other, (ExprOps, int, float)):
            return NotImplemented
        return compare("ne", self, other)

    def __and__(self, other): return _bitwise_or_logic("and", "bitand", self, other)
    def __rand__(self, other): return _bitwise_or_logic("and", "bitand", other, self)
    def __or__(self, other): return _bitwise_or_logic("or", "bitor", self, other)
    def __ror__(self, other): return _bitwise_or_logic("or", "bitor", other, self)
    def __xor__(self, other): return binary("bitxor", self, other)
    def __lshift__(self, other): return binary("shl", self, other)
    def __rshift__(self, other): return binary("shr", self, other)
    def __rlshift__(self, other): return binary("shl", other, self)
    def __rrshift__(self, other): return binary("shr", other, self)
    def __invert__(self):
        e = as_expr(self)
        all_ones = -1 if e.dtype.kind == "int" else e.dtype.max_int
        return Not(e) if e.dtype.is_bool else binary("bitxor", e, const(all_ones, e.dtype.element()))

    __hash__ = object.__hash__

    def astype(self, target) -> "Expr":
        """Convert to another dtype (TVM's ``expr.astype``)."""
        return cast(target, self)

    def equal(self, other) -> "Expr":
        """self == other as an expression (TVM's ``PrimExpr.equal``)."""
        return compare("eq", self, other)

    def __bool__(self):
        raise TypeError(
            f"the truth value of the symbolic expression '{self}' is unknown at trace time; "
            "use sl.if_then_else / sl.select (or sl.all / sl.any) instead of Python's if/and/or")


class Expr(ExprOps):
    """Base class of scalar (or vector) expressions."""

    dtype: DType

    def __str__(self) -> str:
        from .printer import expr_str    # the printer imports these nodes
        return expr_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"



def cached_dtype(compute):
    """A dtype property computed from the children once and then kept: asking the children
    on every access recursed as deep as the expression (a chain of a few hundred additions
    hit Python's recursion limit while the user built it, and took quadratic time)."""
    def get(self):
        dt = self.__dict__.get("_dtype")
        if dt is None:
            dt = compute(self)
            object.__setattr__(self, "_dtype", dt)
        return dt
    get.__doc__ = compute.__doc__
    return property(get)

@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A scalar variable: a loop index, an axis, a combiner operand or a symbolic size.
    Compared by identity. nonnegative: known to be >= 0 (TVM's SizeVar)."""

    name: str
    dtype: DType = int32
    nonnegative: bool = False

    __hash__ = object.__hash__

    def __post_init__(self):
        if not isinstance(self.dtype, DType):       # sl.Var("n", "int64"), as tvm.tir.Var
            object.__setattr__(self, "dtype", parse_dtype(self.dtype))


@dataclass(frozen=True, eq=False, repr=False)
class Const(Expr):
    """A literal of a given dtype (a vector dtype means the value in every lane)."""

    value: Union[int, float, bool]
    dtype: DType = int32

    __hash__ = object.__hash__

    def __post_init__(self):
        if not isinstance(self.dtype, DType):
            _invalid("Const", f"dtype {self.dtype!r} is not a DType")
        if self.dtype.is_int and isinstance(self.value, float) and math.isfinite(self.value):
            _invalid("Const", f"float value {self.value!r} for integer dtype {self.dtype}")


@dataclass(frozen=True, eq=False, repr=False)
class Binary(Expr):
    """An arithmetic or bitwise operation on two operands of one dtype."""

    op: str
    a: Expr
    b: Expr

    __hash__ = object.__hash__

    def __post_init__(self):
        _check_pair("Binary", self.op, BINARY_OPS, self.a, self.b)
        if self.op in _BITWISE and self.a.dtype.is_float:
            _invalid("Binary", f"bitwise '{self.op}' on float dtype {self.a.dtype}")

    @cached_dtype
    def dtype(self) -> DType:
        return self.a.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Compare(Expr):
    """A comparison; the result is bool (with the operands' lanes)."""

    op: str
    a: Expr
    b: Expr

    __hash__ = object.__hash__

    def __post_init__(self):
        _check_pair("Compare", self.op, COMPARE_OPS, self.a, self.b)

    @cached_dtype
    def dtype(self) -> DType:
        return boolean.with_lanes(self.a.dtype.lanes)

    def __bool__(self):
        # Lets `a == b` answer structural equality in plain Python code, as in TVM.
        if self.op == "eq":
            return equal(self.a, self.b)
        if self.op == "ne":
            return not equal(self.a, self.b)
        return ExprOps.__bool__(self)


@dataclass(frozen=True, eq=False, repr=False)
class Logical(Expr):
    """Logical and/or of two bool expressions."""

    op: str
    a: Expr
    b: Expr

    __hash__ = object.__hash__

    def __post_init__(self):
        _check_pair("Logical", self.op, LOGICAL_OPS, self.a, self.b)
        _check_bool("Logical", "operand", self.a)

    @cached_dtype
    def dtype(self) -> DType:
        return self.a.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Not(Expr):
    a: Expr

    __hash__ = object.__hash__

    def __post_init__(self):
        _check_bool("Not", "the operand", self.a)

    @cached_dtype
    def dtype(self) -> DType:
        return self.a.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    """cond ? true_value : false_value.

    guarded=True is TVM's if_then_else: the branch not taken is never evaluated, so
    it may hold reads that would be out of bounds (padding). guarded=False is
    select: both sides may be evaluated.
    """

    cond: Expr
    true_value: Expr
    false_value: Expr
    guarded: bool = False

    __hash__ = object.__hash__

    def __post_init__(self):
        _check_bool("Select", "the condition", self.cond)
        _check_operand("Select", self.true_value)
        _check_operand("Select", self.false_value)
        t, f = self.true_value.dtype, self.false_value.dtype
        if t != f:
            _invalid("Select", f"branches of mismatched dtypes {t} and {f}")
        if self.cond.dtype.lanes not in (1, t.lanes):
            _invalid("Select", f"a condition of {self.cond.dtype.lanes} lanes selects between {t.lanes} lanes")

    @cached_dtype
    def dtype(self) -> DType:
        return self.true_value.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    dtype: DType
    value: Expr

    __hash__ = object.__hash__

    def __post_init__(self):
        _check_operand("Cast", self.value)
        if not isinstance(self.dtype, DType):
            _invalid("Cast", f"target dtype {self.dtype!r} is not a DType")
        if self.dtype.lanes != self.value.dtype.lanes:
            _invalid("Cast", f"cast of {self.value.dtype} to {self.dtype} changes the lanes")


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """A pure math intrinsic such as exp or sqrt."""

    name: str
    args: Tuple[Expr, ...]
    dtype: DType

    __hash__ = object.__hash__

    def __post_init__(self):
        if not isinstance(self.args, tuple):
            _invalid("Call", f"{self.name}: args must be a tuple, got {type(self.args).__name__}")
        for a in self.args:
            _check_operand("Call", a)
        if not isinstance(self.dtype, DType):
            _invalid("Call", f"{self.name}: dtype {self.dtype!r} is not a DType")


@dataclass(frozen=True, eq=False, repr=False)
class Ramp(Expr):
    """The vector (base, base + stride, ..., base + (lanes-1)*stride)."""

    base: Expr
    stride: Expr
    lanes: int

    __hash__ = object.__hash__

    def __post_init__(self):
        _check_operand("Ramp", self.base)
        _check_operand("Ramp", self.stride)
        if self.base.dtype != self.stride.dtype or self.base.dtype.lanes != 1:
            _invalid("Ramp", f"base and stride must be scalars of one dtype, got {self.base.dtype} "
                     f"and {self.stride.dtype}")
        if not isinstance(self.lanes, int) or self.lanes < 1:
            _invalid("Ramp", f"lanes must be a positive int, got {self.lanes!r}")

    @cached_dtype
    def dtype(self) -> DType:
        return self.base.dtype.with_lanes(self.lanes)


@dataclass(frozen=True, eq=False, repr=False)
class Broadcast(Expr):
    """A scalar repeated over lanes."""

    value: Expr
    lanes: int

    __hash__ = object.__hash__

    def __post_init__(self):
        _check_operand("Broadcast", self.value)
        if self.value.dtype.lanes != 1:
            _invalid("Broadcast", f"the value must be a scalar, got dtype {self.value.dtype}")
        if not isinstance(self.lanes, int) or self.lanes < 1:
            _invalid("Broadcast", f"lanes must be a positive int, got {self.lanes!r}")

    @cached_dtype
    def dtype(self) -> DType:
        return self.value.dtype.with_lanes(self.lanes)


@dataclass(frozen=True, eq=False, repr=False)
class Buffer:
    """A named region of memory: an argument, a temporary or a cache, with its scope.

    strides are in elements; None means dense row-major. Compared by identity.
    """

    name: str
    shape: Tuple[int, ...]
    dtype: DType
    scope: str = "global"
    strides: Optional[Tuple[int, ...]] = None

    __hash__ = object.__hash__

    @property
    def size(self) -> int:
        """Elements the allocation must hold (an expression when the shape is symbolic)."""
        if not self.shape:
            return 1
        if self.is_symbolic:
            if self.strides is None:
                total = 1
                for n in self.shape:
                    total = _mul_extent(total, n)
                return total
            total = 1
            for n, s in zip(self.shape, self.strides):
                total = binary("add", total, _mul_extent(binary("sub", n, 1), s))
            return total
        if self.strides is None:
            return math.prod(self.shape)
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides))

    @property
    def is_symbolic(self) -> bool:
        """Whether an extent (or stride) is an expression of size variables."""
        return any(isinstance(n, Expr) for n in self.shape + (self.strides or ()))

    def dense_strides(self) -> Tuple[int, ...]:
        if self.strides is not None:
            return self.strides
        out, step = [], 1
        for n in reversed(self.shape):
            out.append(step)
            step = _mul_extent(step, n)
        return tuple(reversed(out))

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, repr=False)
class Load(Expr):
    """Read buffer[indices]. In Kernel IR there is one flat index, possibly a vector;
    predicate (a bool of the same lanes) masks lanes that must not be read."""

    buffer: Buffer
    indices: Tuple[Expr, ...]
    predicate: Optional[Expr] = None

    __hash__ = object.__hash__

    def __post_init__(self):
        if not isinstance(self.indices, tuple):
            _invalid("Load", f"'{self.buffer.name}': indices must be a tuple")
        for i in self.indices:
            _check_operand("Load", i)
            if not i.dtype.is_int:
                _invalid("Load", f"'{self.buffer.name}' indexed with '{i}' of dtype {i.dtype}; indices are integers")
        if self.predicate is not None:
            _check_bool("Load", "the predicate", self.predicate)

    @property
    def dtype(self) -> DType:
        lanes = max((i.dtype.lanes for i in self.indices), default=1)
        return self.buffer.dtype.with_lanes(lanes)


def _mul_extent(a, b):
    """a * b for extents (ints, or expressions of size variables), without 1 * n."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    return binary("mul", a, b)


def as_expr(value: Any, hint: Optional[DType] = None) -> Expr:
    """Turn a Python number, an IterVar or an Expr into an Expr."""
    if isinstance(value, Expr):
        return value
    to_expr = getattr(value, "as_expr", None)
    if to_expr is not None:
        return to_expr()
    if isinstance(value, bool):
        return Const(value, boolean)
    if isinstance(value, int):
        if hint is not None and not hint.is_bool:
            return const(value, hint.element())
        return Const(value, int32 if -2**31 <= value < 2**31 else int64)
    if isinstance(value, float):
        if hint is not None and hint.is_float:
            return const(value, hint.element())
        return Const(value, float32)
    raise TypeError(f"cannot use {value!r} (a {type(value).__name__}) as an expression")


def const(value: Union[int, float, bool], dt: Union[str, DType] = None) -> Const:
    """A constant of dtype dt (default: int32 for ints, float32 for floats)."""
    if dt is None:
        return as_expr(value)
    dt = parse_dtype(dt)
    if dt.is_float:
        return Const(float(value), dt)
    if dt.is_bool:
        return Const(bool(value), dt)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"constant {value} does not fit integer dtype {dt}")
    if not dt.min_int <= int(value) <= dt.max_int:
        raise ValueError(f"constant {value} does not fit dtype {dt} (range {dt.min_int}..{dt.max_int}); "
                         "cast the expression to a wider dtype first")
    return Const(int(value), dt)


def neg(value) -> Expr:
    """-value: the IEEE negation Call(NEG) for floats (a constant is folded), 0 - value for
    integers (where the two agree and wrap alike)."""
    e = as_expr(value)
    if e.dtype.is_bool:
        raise TypeError(f"negation of the bool expression '{e}'; use `not` / logical_not")
    if not e.dtype.is_float:
        return binary("sub", zero_like(e), e)
    if isinstance(e, Const):
        return Const(-e.value, e.dtype)
    return Call(NEG, (e,), e.dtype)


def zero_like(e) -> Const:
    return const(0, as_expr(e).dtype.element())


def _coerce_pair(a, b) -> Tuple[Expr, Expr]:
    """Convert operands to expressions and to one common dtype (Python literals adapt)."""
    a_lit, b_lit = not isinstance(a, ExprOps), not isinstance(b, ExprOps)
    if a_lit and not b_lit:
        b = as_expr(b)
        a = as_expr(a, b.dtype)
    elif b_lit and not a_lit:
        a = as_expr(a)
        b = as_expr(b, a.dtype)
    else:
        a, b = as_expr(a), as_expr(b)
    if a.dtype != b.dtype:
        common = promote(a.dtype, b.dtype)
        a, b = cast(common, a), cast(common, b)
    return a, b


_INT_DIVISIONS = {"floordiv": "{} // {}", "floormod": "{} % {}", "truncdiv": "truncdiv({}, {})",
                  "truncmod": "truncmod({}, {})"}


def binary(op: str, a, b) -> Expr:
    a, b = _coerce_pair(a, b)
    if a.dtype.is_bool and op in ("add", "sub", "mul", "div", "floordiv", "floormod"):
        raise TypeError(f"arithmetic '{op}' on bool expressions '{a}' and '{b}'; cast them first")
    if a.dtype.is_float and op in BITWISE_OPS:
        raise TypeError(f"bitwise '{op}' on float expressions '{a}' and '{b}' of dtype {a.dtype}; "
                        "bitwise operations need integers")
    if op == "div" and not a.dtype.is_float:
        op = "floordiv"   # Halide semantics: integer division rounds toward -inf
    if op in _INT_DIVISIONS and not a.dtype.is_float and isinstance(b, Const) and b.value == 0:
        raise ValueError(f"integer division by the constant zero in '{_INT_DIVISIONS[op].format(a, b)}'")
    return Binary(op, a, b)


def compare(op: str, a, b) -> Compare:
    a, b = _coerce_pair(a, b)
    return Compare(op, a, b)


def _bitwise_or_logic(logic_op: str, bit_op: str, a, b) -> Expr:
    a, b = _coerce_pair(a, b)
    if a.dtype.is_bool:
        return Logical(logic_op, a, b)
    return binary(bit_op, a, b)


def logical(op: str, a, b) -> Expr:
    a, b = as_expr(a), as_expr(b)
    for side in (a, b):
        if not side.dtype.is_bool:
            raise TypeError(f"'{op}' needs bool operands, got '{side}' of dtype {side.dtype}")
    return Logical(op, a, b)


def cast(target, value) -> Expr:
    target = parse_dtype(target)
    value = as_expr(value)
    target = target.with_lanes(value.dtype.lanes) if target.lanes == 1 else target
    if value.dtype == target:
        return value
    if isinstance(value, Const) and target.lanes == 1:
        if target.is_int and isinstance(value.value, float) and not math.isfinite(value.value):
            raise ValueError(f"cannot cast the constant {value.value} to {target}: it has no integer value")
        return const(value.value if not target.is_int else int(value.value), target)
    if target.lanes != value.dtype.lanes:
        if value.dtype.lanes != 1:
            raise TypeError(f"cannot cast '{value}' of dtype {value.dtype} to {target}: the lanes differ")
        return Broadcast(cast(target.element(), value), target.lanes)   # as TVM: a scalar fills every lane
    return Cast(target, value)


def select(cond, true_value, false_value, guarded: bool = False) -> Select:
    cond = as_expr(cond)
    if not cond.dtype.is_bool:
        raise TypeError(f"the condition of select/if_then_else must be bool, got '{cond}' of dtype {cond.dtype}")
    t, f = _coerce_pair(true_value, false_value)
    return Select(cond, t, f, guarded)


from .equality import equal  # noqa: E402  (here for Compare.__bool__; equality imports nodes)
