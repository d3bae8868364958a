"""mod.export_library(path) and sl.load_module(path): a shared library that a fresh process
loads and calls like the built module (same argument checks), without lowering or LLVM."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import schedlang as sl
from schedlang.topi import cpu
from tests import programs
from tests.cpu_targets import foreign_cpu_target

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="export_library links with the system C compiler")


def _elementwise():
    A = sl.placeholder((3, 1001), name="A")
    B = sl.placeholder((3, 1001), name="B", dtype="float64")
    C = sl.compute((3, 1001), lambda i, j: sl.exp(A[i, j]).astype("float64") * B[i, j] + 1.0, name="C")
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=16)
    s[C].vectorize(ji)
    return s, [A, B, C]


def _gemm():
    """The tutorial's parallel, vectorized GEMM with a write cache, on odd sizes."""
    A, B, C = programs.gemm(67, 91, 45)
    return cpu.schedule_matmul_cached(sl.create_schedule(C.op), C, (16, 32), k_factor=4, vectorize_tile=True), [A, B, C]


# The child loads the libraries with lowering and LLVM code generation disabled, runs them
# on the inputs the parent saved, and saves the outputs; then it checks the argument errors.
CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    import schedlang as sl
    import schedlang.driver, schedlang.target.llvm.jit as jit

    def forbidden(*args, **kwargs):
        raise AssertionError("the loaded module lowered or compiled again")
    schedlang.driver.lower_all = jit.optimize = jit.CompiledModule = jit.emit_shared_object_code = forbidden

    folder = sys.argv[1]
    for name in sys.argv[2:]:
        mod = sl.load_module(f"{folder}/{name}.so")
        data = np.load(f"{folder}/{name}.npz")
        arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
        mod(*arrays)
        np.savez(f"{folder}/{name}.out.npz", *arrays)
        print(name, repr(mod), mod.parallel_runtime is not None)
        try:
            mod(*arrays[:-1])
        except TypeError as e:
            print("error:", e)
        try:
            mod(*[a.astype("float16") if i == 0 else a for i, a in enumerate(arrays)])
        except TypeError as e:
            print("error:", e)
''')


def _inputs(args, s, rng):
    out = []
    for t in args:
        if isinstance(s[t].op, sl.tensor.PlaceholderOp):
            out.append(rng.standard_normal(t.shape).astype(t.dtype_obj.numpy))
        else:
            out.append(np.zeros(t.shape, t.dtype_obj.numpy))
    return out


def test_export_then_load_in_a_fresh_process(tmp_path):
    rng = np.random.default_rng(0)
    cases = {"elementwise": _elementwise(), "gemm": _gemm()}
    built = {}
    for name, (s, args) in cases.items():
        mod = sl.build(s, args)
        mod.export_library(str(tmp_path / f"{name}.so"))
        arrays = _inputs(args, s, rng)
        np.savez(tmp_path / f"{name}.npz", *arrays)
        built[name] = (mod, arrays)
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), *cases], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert ("gemm <schedlang module C(A: float32[67, 45], B: float32[45, 91], C: float32[67, 91]) target=llvm> True"
            in lines)
    assert "error: C takes 3 arrays (A, B, C), got 2" in lines
    assert "error: argument 'A' must have dtype float32, got float16" in lines
    a, b, _ = built["elementwise"][1]
    c = np.load(tmp_path / "elementwise.out.npz")["arr_2"]
    np.testing.assert_allclose(c, np.exp(a).astype("float64") * b + 1.0, rtol=1e-6, atol=1e-6)   # float32 exp
    a, b, _ = built["gemm"][1]
    np.testing.assert_allclose(np.load(tmp_path / "gemm.out.npz")["arr_2"], a @ b, rtol=1e-4, atol=1e-4)
    for name, (mod, arrays) in built.items():      # the built module computes exactly what the loaded one did
        mod(*arrays)
        np.testing.assert_array_equal(arrays[2], np.load(tmp_path / f"{name}.out.npz")["arr_2"])


def test_loaded_module_in_this_process_checks_arguments_like_the_built_one(tmp_path):
    s, args = _elementwise()
    built = sl.build(s, args, target=sl.Target("llvm", bounds_check=True))
    path = str(tmp_path / "checked.so")
    built.export_library(path)
    mod = sl.load_module(path)
    assert mod.target.bounds_check and mod.target.cpu == built.target.cpu
    assert [b.name for b in mod.params] == ["A", "B", "C"] and mod._is_output == [False, False, True]
    a, b, c = _inputs(args, s, np.random.default_rng(1))
    mod(a, b, c)                              # bounds-checked: the out-of-bounds counter is found and zero
    np.testing.assert_allclose(c, np.exp(a).astype("float64") * b + 1.0, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"'B' must have shape \(3, 1001\), got \(1001, 3\)"):
        mod(a, b.T.copy(), c)
    with pytest.raises(ValueError, match="read-only"):
        c.setflags(write=False)
        mod(a, b, c)
    with pytest.raises(ValueError, match="keeps no source"):
        mod.get_source("asm")


def test_load_module_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no module file"):
        sl.load_module(str(tmp_path / "missing.so"))
    src = tmp_path / "other.c"
    src.write_text("int answer = 42;\n")
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "other.so"), str(src)], check=True)
    with pytest.raises(ValueError, match="not a schedlang module"):
        sl.load_module(str(tmp_path / "other.so"))


def test_module_info_is_stored_in_the_library(tmp_path):
    s, args = _gemm()
    mod = sl.build(s, args)
    path = tmp_path / "g.so"
    mod.export_library(str(path))
    raw = path.read_bytes()
    start = raw.index(b'{"format": "schedlang-llvm-module"')
    info = json.loads(raw[start:raw.index(b"\0", start)])
    assert info["entry"] == "C" and info["openmp"] == (mod.parallel_runtime is not None)
    assert info["params"][2] == {"name": "C", "shape": [67, 91], "dtype": "float32", "output": True}


def test_the_library_links_the_object_the_jit_compiled(tmp_path, monkeypatch):
    """export_library links the object the JIT made (position-independent) and generates no
    code for the module again: it compiles only the small module of the library's own globals."""
    from schedlang.target.llvm import jit, library
    s, args = _gemm()
    mod = sl.build(s, args, cache=False)
    assert mod._compiled.object.startswith(b"\x7fELF")
    compiled = []

    def emit(text, cpu, features):
        compiled.append(text)
        return jit.emit_shared_object_code(text, cpu, features)
    monkeypatch.setattr(library, "emit_shared_object_code", emit)
    mod.export_library(str(tmp_path / "g.so"))
    assert len(compiled) == 1 and "define " not in compiled[0] and library.INFO_SYMBOL in compiled[0]
    loaded = sl.load_module(str(tmp_path / "g.so"))
    a, b, c = _inputs(args, s, np.random.default_rng(2))
    loaded(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_a_library_for_features_this_machine_lacks_is_refused(tmp_path):
    target, lacking = foreign_cpu_target()
    s, args = _elementwise()
    mod = sl.build(s, args, target=target)
    mod.export_library(str(tmp_path / "foreign.so"))
    with pytest.raises(ValueError, match=f"foreign.so cannot run here: code for CPU 'x86-64' uses what this "
                                         f"machine .* lacks: {lacking}"):
        sl.load_module(str(tmp_path / "foreign.so"))
