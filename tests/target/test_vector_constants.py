"""Constants of a vector dtype render as vector constants (splats) in LLVM IR.

A Const whose dtype has lanes > 1 (or a shift/mask amount of a vector floordiv/floormod)
used to render as a scalar literal, which LLVM rejects where a vector operand is expected."""
import dataclasses

import llvmlite.binding as llvm
import numpy as np
import pytest

import schedlang as sl
from schedlang.dtypes import dtype
from schedlang.driver import lower_all
from schedlang.expr.functor import ExprMutator
from schedlang.expr.nodes import Binary, Broadcast, Call, Cast, Compare, Const, Not, Select, Var
from schedlang.loop.functor import StmtMutator
from schedlang.target.llvm.builder import FunctionText
from schedlang.target.llvm.codegen import FunctionEmitter, ModuleState
from schedlang.target.registry import get_backend
from schedlang.target.llvm.types import compute_type

from tests.helpers import assert_matches_reference

F32X4, I32X4, BX4 = dtype("float32x4"), dtype("int32x4"), dtype("boolx4")


def _emit_function(build_expr, arg_dtype, result_dtype) -> str:
    """Render `define <ret> @f(<arg> %x) { ret <expr of x> }` through the expression emitter."""
    x = Var("x", arg_dtype)
    ret_ty, arg_ty = compute_type(result_dtype), compute_type(arg_dtype)
    module = ModuleState(sl.Target.create("llvm"), parallel_runtime=False)
    fn = FunctionText("f", f"{ret_ty} @f({arg_ty} %x)", attrs="")
    emitter = FunctionEmitter(module, fn, {x: "%x"}, {})
    value = emitter.expr(build_expr(x))
    fn.do(f"ret {ret_ty} {value}")
    text = fn.render().replace("define internal", "define")
    return "\n".join(sorted(module.declarations)) + "\n" + "\n".join(module.definitions.values()) + "\n" + text


CASES = {
    "float add": (lambda x: Binary("add", x, Const(2.0, F32X4)), F32X4, F32X4),
    "int mul": (lambda x: Binary("mul", Const(3, I32X4), x), I32X4, I32X4),
    "int floordiv by 8": (lambda x: Binary("floordiv", x, Const(8, I32X4)), I32X4, I32X4),
    "int floormod by 8": (lambda x: Binary("floormod", x, Const(8, I32X4)), I32X4, I32X4),
    "int floordiv by 3": (lambda x: Binary("floordiv", x, Const(3, I32X4)), I32X4, I32X4),
    "compare": (lambda x: Compare("lt", x, Const(0.5, F32X4)), F32X4, BX4),
    "bool select": (lambda x: Select(Const(True, BX4), x, Const(0.0, F32X4)), F32X4, F32X4),
    "not": (lambda x: Not(Const(False, BX4)), F32X4, BX4),
    "cast of a constant": (lambda x: Binary("add", x, Cast(F32X4, Const(7, I32X4))), F32X4, F32X4),
    "math call": (lambda x: Binary("mul", x, Call("sqrt", (Const(4.0, F32X4),), F32X4)), F32X4, F32X4),
    "broadcast": (lambda x: Binary("add", x, Broadcast(Const(1.5, dtype("float32")), 4)), F32X4, F32X4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_emitter_renders_vector_constants_as_splats(case):
    build_expr, arg_dt, ret_dt = CASES[case]
    text = _emit_function(build_expr, arg_dt, ret_dt)
    assert "splat (" in text
    llvm.parse_assembly(text).verify()     # a scalar literal for a vector operand fails here


def test_scalar_constants_stay_scalar():
    text = _emit_function(lambda x: Binary("add", x, Const(2.0, dtype("float32"))), dtype("float32"), dtype("float32"))
    assert "splat" not in text
    llvm.parse_assembly(text).verify()


class _VectorConsts(ExprMutator):
    """Turn every Broadcast of a constant into a Const of the vector dtype."""

    def visit_Broadcast(self, e):
        if isinstance(e.value, Const):
            return Const(e.value.value, e.dtype)
        return Broadcast(self.visit(e.value), e.lanes)


class _InStmts(StmtMutator):
    def visit_expr(self, e):
        return _VectorConsts().visit(e)


def _vectorized(f, dtype_="float32", n=37):
    A = sl.placeholder((n,), dtype_, name="A")
    C = sl.compute((n,), lambda i: f(A, i), name="C")
    s = sl.create_schedule(C.op)
    _, ii = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(ii)
    return s, [A, C]


PROGRAMS = {
    "affine": lambda A, i: A[i] * 2.0 + 1.0,
    "if_then_else with a constant branch": lambda A, i: sl.if_then_else(A[i] > 0, A[i], 0.5),
    "constant condition and branches": lambda A, i: A[i] + sl.select(i % 2 == 0, 1.0, -1.0),
    "cast of a constant": lambda A, i: A[i] + sl.const(3, "int32").astype("float32") + (i * 0 + 2).astype("float32"),
    "bool constants in a select": lambda A, i: sl.select(sl.all(A[i] > 0, True), A[i], sl.const(0.0)),
    "integer div and mod by constants": lambda A, i: A[i] // 4 + A[i] % 8 + A[i] // 3,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vectorized_programs_with_constants_match_reference(name):
    dt = "int32" if "integer" in name else "float32"
    s, args = _vectorized(PROGRAMS[name], dt)
    assert_matches_reference(s, args)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_kernel_ir_with_vector_consts_builds_and_runs(name):
    """The same programs, with every broadcast constant of the Kernel IR turned into a vector
    Const before rendering: the LLVM module must still compile and compute the same."""
    dt = "int32" if "integer" in name else "float32"
    s, args = _vectorized(PROGRAMS[name], dt)
    target = sl.Target.create("llvm")
    kernel_ir = lower_all(s, args, target)["kernel"]
    kernels = tuple(dataclasses.replace(k, body=_InStmts().visit(k.body)) for k in kernel_ir.kernels)
    rewritten = dataclasses.replace(kernel_ir, kernels=kernels)
    mod = get_backend("llvm").build(rewritten, target, [False, True], {})
    a = (np.random.default_rng(0).standard_normal(37) * 20).astype(dt)
    got = np.zeros(37, dt)
    mod(a, got)
    want = sl.reference([args[1]], {args[0]: a})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5)
