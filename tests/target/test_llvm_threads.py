"""The O3 pipeline on threads of their own (target/llvm/private.py): a thread in an LLVM
context of its own runs without llvmlite's lock while every other thread still takes it,
and a split module optimised on two such threads is the module optimised on one."""
import threading

import numpy as np
import pytest
import llvmlite.binding as llvm
from llvmlite.binding import ffi

import schedlang as sl
from schedlang.target.host import host_cpu
from schedlang.target.llvm import private, split

TEXT = """
define void @scale(ptr noalias %a, i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %x = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %a, i64 %x
  %v = load float, ptr %p
  %w = fmul float %v, 2.0
  store float %w, ptr %p
  %next = add nsw i32 %i, 1
  %more = icmp slt i32 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


def _run(target, *args):
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("result", target(*args)), daemon=True)
    thread.start()
    return thread, out


def test_private_context_runs_while_llvmlite_lock_is_held():
    assert private.supported()
    cpu, features = host_cpu()
    with ffi.lib._lock:                   # another thread inside LLVM's global context
        thread, out = _run(private.optimize_to_bitcode, TEXT, cpu, features)
        thread.join(60)
        assert not thread.is_alive(), "the own-context thread waited for llvmlite's lock"
    mod = private.read_bitcode(out["result"])
    assert mod.get_function("scale").name == "scale"


def test_other_threads_still_take_llvmlite_lock():
    assert private.supported()
    with ffi.lib._lock:
        thread, out = _run(lambda: str(llvm.parse_assembly(TEXT)))
        thread.join(0.5)
        assert thread.is_alive(), "a thread in the global context went by llvmlite's lock"
    thread.join(60)
    assert "define void @scale" in out["result"]


def _chain(n: int, stages: int):
    A = sl.placeholder((n,), name="A")
    t, odd = A, []
    for k in range(stages):
        if k % 2:
            t = sl.compute((n,), lambda i, p=t, k=k: sl.exp(p[i] * 0.01) + float(k), name=f"S{k}")
            odd.append(t)
        else:
            t = sl.compute((n,), lambda i, p=t, k=k: p[i] * (1.0 + 0.001 * k), name=f"S{k}")
    s = sl.create_schedule(t.op)
    for st in odd:                      # parallel and vectorized: outlined bodies, math calls
        xo, xi = s[st].split(st.op.axis[0], 64)
        s[st].parallel(xo)
        s[st].vectorize(xi)
    return s, [A, t]


def test_split_module_optimised_apart_is_the_same_code(monkeypatch):
    monkeypatch.setattr(split, "MIN_KERNELS", 4)
    monkeypatch.setattr(split, "KERNELS_PER_MODULE", 2)
    calls = []
    optimize = private.optimize_to_bitcode
    monkeypatch.setattr(private, "optimize_to_bitcode", lambda *a: calls.append(1) or optimize(*a))
    n, stages = 1003, 9
    s, args = _chain(n, stages)
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", "1")         # one worker, global context
    together = sl.build(s, args, cache=False)
    assert not calls
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", "2")         # two workers, contexts of their own
    apart = sl.build(s, args, cache=False)
    assert len(calls) == apart.ir["llvm"].count(split.MODULE_BREAK) + 1 == 6
    assert apart.ir["llvm"] == together.ir["llvm"]
    assert apart.get_source("asm") == together.get_source("asm")
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    got, want = np.zeros(n, np.float32), np.zeros(n, np.float32)
    apart(a, got)
    together(a, want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", ["define void @f( {", "define i32 @f() {\n  ret float 0.0\n}"])
def test_private_context_reports_bad_text(bad):
    cpu, features = host_cpu()
    with pytest.raises(RuntimeError):
        private.optimize_to_bitcode(bad, cpu, features)
