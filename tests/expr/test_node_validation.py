"""Nodes check themselves when built: a broken invariant is an InternalError naming the node
and the problem (a compiler bug), while the user-facing builders and operators give
TypeError/ValueError for a user's mistake."""
import pytest

import schedlang as sl
from schedlang.dtypes import dtype
from schedlang.errors import InternalError
from schedlang.expr.nodes import (Binary, Broadcast, Buffer, Call, Cast, Compare, Const, Load, Logical, Not, Ramp,
                                  Select, Var)

F32, I32, B = dtype("float32"), dtype("int32"), dtype("bool")
x, n, p = Var("x", F32), Var("n", I32), Var("p", B)


@pytest.mark.parametrize("build,match", [
    (lambda: Binary("addd", x, x), r"Binary: unknown op 'addd'; valid ops: add, sub, mul"),
    (lambda: Binary("add", Const(1.0, F32), n), r"Binary: 'add' of mismatched dtypes float32 and int32"),
    (lambda: Binary("shl", x, x), r"bitwise 'shl' on float dtype float32"),
    (lambda: Binary("add", x, 1.0), r"operand 1.0 is a float, not an Expr"),
    (lambda: Compare("less", n, n), r"Compare: unknown op 'less'"),
    (lambda: Compare("lt", n, x), r"Compare: 'lt' of mismatched dtypes"),
    (lambda: Logical("and", n, n), r"Logical: operand must be bool, got dtype int32"),
    (lambda: Logical("xor", p, p), r"Logical: unknown op 'xor'; valid ops: and, or"),
    (lambda: Not(x), r"Not: the operand must be bool"),
    (lambda: Select(n, x, x), r"Select: the condition must be bool, got dtype int32"),
    (lambda: Select(p, x, n), r"Select: branches of mismatched dtypes float32 and int32"),
    (lambda: Select(Broadcast(p, 4), Broadcast(x, 8), Broadcast(x, 8)), r"condition of 4 lanes selects between 8"),
    (lambda: Cast(dtype("float32x4"), n), r"Cast: cast of int32 to float32x4 changes the lanes"),
    (lambda: Cast("float32", n), r"Cast: target dtype 'float32' is not a DType"),
    (lambda: Call("exp", [x], F32), r"Call: exp: args must be a tuple"),
    (lambda: Ramp(n, x, 4), r"Ramp: base and stride must be scalars of one dtype"),
    (lambda: Ramp(n, n, 0), r"Ramp: lanes must be a positive int"),
    (lambda: Broadcast(Broadcast(x, 4), 4), r"Broadcast: the value must be a scalar"),
    (lambda: Load(Buffer("A", (4,), F32), (x,)), r"Load: 'A' indexed with 'x' of dtype float32"),
    (lambda: Load(Buffer("A", (4,), F32), (n,), n), r"Load: the predicate must be bool"),
    (lambda: Const(1.5, I32), r"Const: float value 1.5 for integer dtype int32"),
])
def test_broken_nodes_raise_internal_error(build, match):
    with pytest.raises(InternalError, match=match) as info:
        build()
    assert "a bug in schedlang" in str(info.value)


def test_valid_nodes_build():
    Binary("add", x, Const(1.0, F32))
    Binary("bitxor", p, p)                 # bool xor is bitwise on i1
    Select(p, Broadcast(x, 4), Broadcast(x, 4))   # a scalar condition picks whole vectors
    Select(Broadcast(p, 4), Broadcast(x, 4), Broadcast(x, 4))
    Cast(dtype("float32x4"), Ramp(n, Const(1), 4))
    Const(float("inf"), I32)               # kept as a Cast operand by the simplifier, never folded


def test_user_mistakes_stay_type_and_value_errors():
    A = sl.placeholder((4,), name="A")
    k = sl.placeholder((4,), "int32", name="K")
    with pytest.raises(TypeError, match="bitwise 'shl' on float"):
        sl.compute((4,), lambda i: A[i] << 1)
    with pytest.raises(TypeError, match="bitwise 'bitxor' on float"):
        sl.compute((4,), lambda i: ~A[i])
    with pytest.raises(TypeError, match="arithmetic 'add' on bool"):
        sl.compute((4,), lambda i: (A[i] > 0) + (A[i] < 1))
    with pytest.raises(TypeError, match="condition of select/if_then_else must be bool"):
        sl.compute((4,), lambda i: sl.if_then_else(A[i], 1.0, 0.0))
    with pytest.raises(TypeError, match="needs bool operands"):
        sl.compute((4,), lambda i: sl.all(A[i], A[i] > 0))
    with pytest.raises(TypeError, match="indices must be integers"):
        sl.compute((4,), lambda i: A[A[i]])
    with pytest.raises(TypeError, match="cannot use"):
        sl.compute((4,), lambda i: A[i] + "one")
    with pytest.raises(TypeError, match="pow takes 2 argument"):
        sl.tensor.intrin.call("pow", A[0])
    with pytest.raises(TypeError, match="lanes differ"):
        sl.cast("float32x4", Broadcast(n, 8))
    C = sl.compute((4,), lambda i: (k[i] << 1) ^ ~k[i], name="C")      # integers are fine
    assert C.dtype == I32


def test_var_takes_a_dtype_string_as_tvm():
    assert sl.Var("n", "int64").dtype == dtype("int64")
    with pytest.raises(ValueError, match="unsupported dtype 'int7'"):
        sl.Var("n", "int7")


def test_cast_of_a_scalar_to_a_vector_broadcasts():
    e = sl.cast("float32x4", n)
    assert isinstance(e, Broadcast) and e.dtype == dtype("float32x4") and isinstance(e.value, Cast)


def test_a_compute_of_vector_dtype_is_a_type_error():
    A = sl.placeholder((16,), name="A")
    with pytest.raises(TypeError, match="compute 'C': the body .* has the vector dtype float32x8"):
        sl.compute((16,), lambda i: sl.const(1.0, "float32x8") + A[i], name="C")
