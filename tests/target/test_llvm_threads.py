"""LLVM on threads of their own (target/llvm/private.py, orc.py): a thread in an LLVM context
of its own runs without llvmlite's lock while every other thread still takes it, and a split
module optimised and compiled on two such threads, its objects linked by ORC, is the module
built on one thread."""
import re
import threading

import numpy as np
import pytest
import llvmlite.binding as llvm
from llvmlite.binding import ffi

import schedlang as sl
from schedlang.target.host import host_cpu
from schedlang.target.llvm import private, split
from schedlang.target.llvm.orc import LinkedObjects

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
        thread, out = _run(private.compile_to_object, TEXT, cpu, features)
        thread.join(60)
        assert not thread.is_alive(), "the own-context thread waited for llvmlite's lock"
    bitcode, code = out["result"]
    assert code[:4] == b"\x7fELF"
    assert "define void @scale" in str(private.in_global_context([bitcode]))


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
    compile_one = private.compile_to_object
    monkeypatch.setattr(private, "compile_to_object", lambda *a: calls.append(1) or compile_one(*a))
    n, stages = 1003, 9
    s, args = _chain(n, stages)
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", "1")         # one worker, global context
    together = sl.build(s, args, cache=False)
    assert not calls
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", "2")         # two workers, contexts of their own
    apart = sl.build(s, args, cache=False)
    assert len(calls) == apart.ir["llvm"].count(split.MODULE_BREAK) + 1 == 6
    assert isinstance(apart._compiled, LinkedObjects) and len(apart._compiled.objects) == 6
    assert apart.ir["llvm"] == together.ir["llvm"]
    # the optimised modules linked into one, as the one-worker build links them (the use-list
    # order comments and intrinsics' attributes aside: bitcode keeps neither)
    assert _code_lines(apart.ir["llvm.opt"]) == _code_lines(together.ir["llvm.opt"])
    asm, functions = apart.get_source("asm"), _functions(together.get_source("asm"))
    assert functions and all(f"{k}:" in asm for k in functions)
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    got, want = np.zeros(n, np.float32), np.zeros(n, np.float32)
    apart(a, got)
    together(a, want)
    np.testing.assert_array_equal(got, want)


def test_split_module_optimised_apart_calls_python(monkeypatch):
    """An extern call (call_packed) in a split module built apart: the objects linked by ORC
    reach the process's trampoline (orc.process_symbols)."""
    monkeypatch.setattr(split, "MIN_KERNELS", 4)
    monkeypatch.setattr(split, "KERNELS_PER_MODULE", 2)
    monkeypatch.setenv("SCHEDLANG_BUILD_THREADS", "2")
    seen = []

    @sl.register_func("test.llvm_threads.add_one", override=True)
    def add_one(x, y):
        seen.append(1)
        y[:] = x + 1

    n = 257
    s, (A, last) = _chain(n, 5)
    ext = sl.extern(last.shape, [last], lambda ins, outs: sl.call_packed("test.llvm_threads.add_one", ins[0], outs[0]),
                    name="E")
    out = sl.compute((n,), lambda i: ext[i] * 2.0, name="F")
    s = sl.create_schedule(out.op)
    mod = sl.build(s, [A, out], cache=False)
    assert isinstance(mod._compiled, LinkedObjects)
    a = np.random.default_rng(2).random(n, dtype=np.float32)
    got = np.zeros(n, np.float32)
    mod(a, got)
    t = a.astype(np.float64)
    for k in range(5):
        t = np.exp(t * 0.01) + k if k % 2 else t * (1.0 + 0.001 * k)
    np.testing.assert_allclose(got, (t + 1) * 2, rtol=1e-5)
    assert seen == [1]


def _code_lines(text: str):
    """The lines of an LLVM IR text without comments and attribute groups (numbered in the
    order a module meets them)."""
    return [re.sub(r" #\d+", "", line.split(";")[0].rstrip()) for line in text.splitlines()
            if not line.startswith((";", "attributes #"))]


def _functions(asm: str):
    return [line[:-1] for line in asm.splitlines() if line.endswith(":") and not line.startswith((".", "\t", " "))]


@pytest.mark.parametrize("bad", ["define void @f( {", "define i32 @f() {\n  ret float 0.0\n}"])
def test_private_context_reports_bad_text(bad):
    cpu, features = host_cpu()
    with pytest.raises(RuntimeError):
        private.compile_to_object(bad, cpu, features)
