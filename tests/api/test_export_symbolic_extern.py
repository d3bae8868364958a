"""export_library / load_module of modules with symbolic shapes (the size variables, the
checks of the arrays' shapes, size arguments and split factors survive) and of modules with
extern calls (the loading process calls the function registered under the same name)."""
import gc
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import schedlang as sl
from schedlang.packed import remove_global_func

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="export_library links with the system C compiler")


def _symbolic():
    """n from the arrays, m a split factor passed as an argument, a parallel outer loop and a
    stage computed at it in a buffer sized at run time."""
    n, m = sl.size_var("n"), sl.var("m")
    A = sl.placeholder((n, 6), name="A")
    B = sl.compute((n, 6), lambda i, j: A[i, j] * 2.0, name="B")
    C = sl.compute((n, 6), lambda i, j: B[i, j] + A[i, j], name="C")
    s = sl.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=m)
    s[C].parallel(io)
    s[B].compute_at(s[C], io)
    return s, [A, C, m]


def test_symbolic_module_exports_and_keeps_its_size_checks(tmp_path, monkeypatch):
    s, args = _symbolic()
    built = sl.build(s, args)
    built.export_library(str(tmp_path / "sym.so"))
    import schedlang.driver
    import schedlang.target.llvm.jit as jit

    def forbidden(*a, **k):
        raise AssertionError("the loaded module lowered or compiled again")
    for mod, name in ((schedlang.driver, "lower_all"), (jit, "optimize"), (jit, "CompiledModule")):
        monkeypatch.setattr(mod, name, forbidden)
    loaded = sl.load_module(str(tmp_path / "sym.so"))
    assert repr(loaded) == "<schedlang module C(A: float32[n, 6], C: float32[n, 6], m: int32) target=llvm>"
    rng = np.random.default_rng(0)
    for rows, factor in ((0, 1), (1, 3), (7, 2), (20, 64)):
        a = rng.standard_normal((rows, 6)).astype("float32")
        c = np.full((rows, 6), 7, "float32")
        loaded(a, c, factor)
        np.testing.assert_array_equal(c, a * np.float32(2) + a)
    a, c = np.zeros((5, 6), "float32"), np.zeros((5, 6), "float32")
    with pytest.raises(ValueError, match=r"size variable 'n' is 5 from A.shape\[0\] but 4 from C.shape\[0\]"):
        loaded(a, np.zeros((4, 6), "float32"), 2)
    with pytest.raises(ValueError, match=r"'A' must have shape \(5, 6\), got \(5, 7\)"):
        loaded(np.zeros((5, 7), "float32"), c, 2)
    with pytest.raises(ValueError, match="the split factor of C.i is 'm' = 0 with n=5, m=0; it must be at least 1"):
        loaded(a, c, 0)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A, C, m\), got 2"):
        loaded(a, c)
    with pytest.raises(ValueError, match="tensor 'B' would have 12884901882 elements with n=5, m=2147483647"):
        loaded(a, c, 2 ** 31 - 1)         # B's run-time sized buffer (m rows) is checked too


def test_solved_and_expression_extents_survive_export(tmp_path):
    n = sl.size_var("n")
    A = sl.placeholder((n * 4 + 1,), name="A")
    B = sl.compute((n * 4 + 1,), lambda i: A[i] + 1.0, name="B")
    D = sl.compute((n // 2,), lambda i: A[i * 2], name="D")
    s = sl.create_schedule([B.op, D.op])
    sl.build(s, [A, B, D]).export_library(str(tmp_path / "lin.so"))
    loaded = sl.load_module(str(tmp_path / "lin.so"))
    a = np.arange(13, dtype="float32")
    b, d = np.zeros(13, "float32"), np.zeros(1, "float32")
    loaded(a, b, d)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(d, a[:2][::2])
    with pytest.raises(ValueError, match=r"'D' has D.shape\[0\] = 2, but its extent 'n // 2' is 1 with n=3"):
        loaded(a, b, np.zeros(2, "float32"))


CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    import schedlang as sl
    mod = sl.load_module(sys.argv[1])
    a = np.arange(8, dtype="float32")
    f = np.zeros(8, "float32")
    try:
        mod(a, f)
    except ValueError as e:
        print("before registering:", e)
    sl.register_func("test.export.twice", lambda x, y, k: np.copyto(y, x * k))
    mod(a, f)
    print("result:", " ".join(str(int(x)) for x in f))
''')


def test_module_with_extern_calls_exports_and_calls_by_name_in_another_process(tmp_path):
    sl.register_func("test.export.twice", lambda x, y, k: np.copyto(y, x * k), override=True)
    try:
        A = sl.placeholder((8,), name="A")
        E = sl.extern((8,), [A], lambda ins, outs: sl.call_packed("test.export.twice", ins[0], outs[0], 3), name="E")
        F = sl.compute((8,), lambda i: E[i] + 1.0, name="F")
        mod = sl.build(sl.create_schedule(F.op), [A, F])
        path = str(tmp_path / "ext.so")
        mod.export_library(path)
        loaded = sl.load_module(path)          # in this process too
        sl.load_module(path)                   # a second load of the same library, dropped at once:
        gc.collect()                           # the hook must still point at a live callback
        f = np.zeros(8, "float32")
        loaded(np.arange(8, dtype="float32"), f)
        np.testing.assert_array_equal(f, np.arange(8) * 3 + 1)
    finally:
        remove_global_func("test.export.twice")
    done = subprocess.run([sys.executable, "-c", CHILD, path], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("before registering: no function is registered under 'test.export.twice'")
    assert lines[1] == "result: " + " ".join(str(x * 3 + 1) for x in range(8))
