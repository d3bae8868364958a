"""The per-level IR verifiers: they accept what lowering produces (the whole suite runs them
after every pass) and name the broken invariant and the pass that broke it."""
import dataclasses

import pytest

import schedlang as sl
import schedlang.verify
from schedlang.dtypes import dtype
from schedlang.driver import lower_all
from schedlang.errors import InternalError
from schedlang.expr.nodes import Broadcast, Buffer, Const, Load, Ramp, Var
from schedlang.kernel.lower import lower_to_kernel_ir
from schedlang.kernel.nodes import Kernel, KernelModule, LaunchAxis, LaunchKind
from schedlang.kernel.verify import verify_kernel_module
from schedlang.loop.functor import StmtMutator
from schedlang.loop.nodes import Allocate, For, IfThen, Let, Store
from schedlang.loop.verify import verify_func, verify_stmt
from tests import programs

F32, I32 = dtype("float32"), dtype("int32")
A = Buffer("A", (4, 8), F32)
flat = Buffer("F", (32,), F32)
i, j = Var("i"), Var("j")


def test_the_suite_verifies_after_every_pass():
    assert schedlang.verify.ENABLED


def test_lowered_levels_verify():
    X, Wt, padded, out = programs.conv2d(1, 2, 5, 6, 3, 3)
    s = sl.create_schedule(out.op)
    s[padded].compute_at(s[out], out.op.axis[2])
    levels = lower_all(s, [X, Wt, out], sl.Target.create("llvm"))
    verify_func(levels["loop"], "Loop")
    verify_func(levels["tile"], "Tile")
    verify_kernel_module(levels["kernel"])


@pytest.mark.parametrize("body,match", [
    (For(i, 4, Store(A, (i, j), Const(0.0, F32))), "variable 'j' is used outside any loop or let"),
    (For(i, 4, For(i, 8, Store(A, (i, i), Const(0.0, F32)))), "variable 'i' is bound again"),
    (For(i, 4, Store(Buffer("B", (4,), F32), (i,), Const(0.0, F32))),
     "buffer 'B' is accessed but is neither a parameter nor allocated"),
    (For(i, 4, Store(A, (i,), Const(0.0, F32))), "accessed with 1 indices; expected 2"),
    (For(i, 4, Store(A, (i, i), Const(0, I32))), "dtype int32 is stored into buffer 'A' of dtype float32"),
    (For(i, 4, IfThen(i, Store(A, (i, i), Const(0.0, F32)))), "if-condition 'i' has dtype int32"),
    (Let(j, Const(1.0, F32), Store(A, (j, j), Const(0.0, F32))),
     "let 'j' of dtype int32 is given a value of dtype float32"),
    (For(i, 0, Store(A, (i, i), Const(0.0, F32))), "loop 'i' has extent 0"),
    (Allocate(A, Store(A, (Const(0), Const(0)), Const(0.0, F32))), "buffer 'A' is allocated again"),
])
def test_broken_statements_are_named(body, match):
    with pytest.raises(InternalError, match=match):
        verify_stmt(body, [A], where="test")


def test_flat_accesses_and_vector_lanes():
    vec = Store(flat, (Ramp(Const(0), Const(1), 8),), Broadcast(Const(1.0, F32), 8))
    verify_stmt(vec, [flat], flat=True)
    with pytest.raises(InternalError, match="a value of 4 lanes is stored at an index of 8 lanes"):
        verify_stmt(Store(flat, (Ramp(Const(0), Const(1), 8),), Broadcast(Const(1.0, F32), 4)), [flat], flat=True)
    with pytest.raises(InternalError, match=r"accessed with 2 indices; expected 1 \(flat\)"):
        verify_stmt(Store(flat, (Const(0), Const(0)), Const(1.0, F32)), [flat], flat=True)
    load = Store(flat, (Const(0),), Load(Buffer("G", (4,), F32), (Const(0),)))
    with pytest.raises(InternalError, match="buffer 'G' is accessed"):
        verify_stmt(load, [flat], flat=True)


def _module():
    body = For(i, 32, Store(flat, (i,), Const(0.0, F32)))
    return KernelModule("m", (flat,), (), (Kernel("m_k", (flat,), (), body),))


def test_kernel_module_invariants():
    verify_kernel_module(_module())
    m = _module()
    stranger = Buffer("S", (4,), F32)
    bad = dataclasses.replace(m, kernels=(dataclasses.replace(m.kernels[0], params=(flat, stranger)),))
    with pytest.raises(InternalError, match="takes buffer 'S', which is neither an argument nor a temporary"):
        verify_kernel_module(bad)
    w = Var("w")
    two = (LaunchAxis("worker", w, 4, LaunchKind.CPU_WORKER), LaunchAxis("worker", Var("v"), 4, LaunchKind.CPU_WORKER))
    bad = dataclasses.replace(m, kernels=(dataclasses.replace(m.kernels[0], launch=two),))
    with pytest.raises(InternalError, match="repeated axes"):
        verify_kernel_module(bad)
    rebinding = dataclasses.replace(m.kernels[0], launch=(LaunchAxis("worker", i, 4, LaunchKind.CPU_WORKER),))
    with pytest.raises(InternalError, match="variable 'i' is bound again"):
        verify_kernel_module(dataclasses.replace(m, kernels=(rebinding,)))
    twice = dataclasses.replace(m, kernels=(m.kernels[0], m.kernels[0]))
    with pytest.raises(InternalError, match="kernel names repeat"):
        verify_kernel_module(twice)


class _ForgetLoops(StmtMutator):
    """A broken pass: drops every loop but keeps its body (its variable is left unbound)."""

    def visit_For(self, s):
        return self.visit(s.body)


def forget_loops(body):
    return _ForgetLoops().visit(body)


def test_run_passes_names_the_pass_that_broke_the_ir(monkeypatch):
    A_, B_, C_ = programs.gemm(4, 4, 4)
    s = sl.create_schedule(C_.op)
    tile = lower_all(s, [A_, B_, C_], sl.Target.create("llvm"), upto="tile")["tile"]
    seen = []
    out = schedlang.verify.run_passes(tile.body, [forget_loops], lambda b, after: seen.append(after))
    assert seen == ["forget_loops"] and out is not tile.body
    with pytest.raises(InternalError, match="after forget_loops: variable '.*' is used outside"):
        schedlang.verify.run_passes(tile.body, [forget_loops],
                                    lambda b, after: verify_stmt(b, tile.params, where=f"after {after}"))
    monkeypatch.setattr(schedlang.verify, "ENABLED", False)
    assert schedlang.verify.run_passes(tile.body, [forget_loops], lambda b, after: seen.append(after)) is not None
    assert seen == ["forget_loops"]                 # disabled: no verifier calls


def test_kernel_pipeline_is_verified(monkeypatch):
    """A Kernel IR pass that breaks an invariant fails in lowering, naming the pass."""
    import schedlang.target.llvm.backend as llvm_backend
    monkeypatch.setattr(llvm_backend, "unroll_loops", forget_loops)     # kernel_passes reads it at call time
    A_, B_, C_ = programs.gemm(4, 4, 4)
    s = sl.create_schedule(C_.op)
    tile = lower_all(s, [A_, B_, C_], sl.Target.create("llvm"), upto="tile")["tile"]
    with pytest.raises(InternalError, match="Kernel IR of 'C' after unroll_loops"):
        lower_to_kernel_ir(tile, llvm_backend.BACKEND.kernel_passes(sl.Target.create("llvm")))


def test_loop_kinds_of_each_level():
    from schedlang.loop.nodes import Func, VECTORIZED
    body = For(i, 4, For(j, 8, Store(A, (i, j), Const(0.0, F32)), VECTORIZED))
    verify_func(Func("f", (A,), body), "Tile")
    with pytest.raises(InternalError, match="loop 'j' is vectorized; loops here are serial"):
        verify_func(Func("f", (A,), body), "Loop")
    m = _module()
    vec = dataclasses.replace(m.kernels[0], body=For(i, 32, Store(flat, (i,), Const(0.0, F32)), VECTORIZED))
    with pytest.raises(InternalError, match="loop 'i' is vectorized; loops here are serial or parallel"):
        verify_kernel_module(dataclasses.replace(m, kernels=(vec,)))
