"""The float identities of the simplifier return the operand itself (an Expr has no truth
value, so the rewrite must test for None rather than use `or`)."""
import schedlang as sl
from schedlang.expr.nodes import Binary, Const, Var
from schedlang.expr.simplify import simplify


def test_float_identity_returns_the_operand():
    x = Var("x", sl.dtype("float32"))
    assert simplify(Binary("add", x, Const(-0.0, x.dtype))) is x
    kept = Binary("add", x, Const(0.0, x.dtype))      # -0.0 + 0.0 is +0.0: not an identity
    assert isinstance(simplify(kept), Binary)
    assert simplify(Binary("mul", Const(1.0, x.dtype), x)) is x


def test_program_with_a_folded_float_zero_builds():
    A = sl.placeholder((8,), name="A")
    C = sl.compute((8,), lambda i: A[i] + (i >= 0).astype("float32") * (i % 1).astype("float32"), name="C")
    s = sl.create_schedule(C.op)
    from tests.helpers import assert_matches_reference
    assert_matches_reference(s, [A, C])
