"""The on-disk kernel cache (schedlang/kernel_cache.py): a second process loads a build with
no lowering or LLVM code generation and gets the same results; concurrent writers leave a
valid cache; a corrupt, truncated or foreign entry is ignored and rebuilt; another target or
CPU feature set misses; clear() and `schedlang cache` work."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import schedlang as sl
from schedlang import build_cache, disk, kernel_cache
from schedlang.cli import main as cli_main
from schedlang.target.llvm.cached import CachedModule
from schedlang.target.llvm.module import LLVMModule
from tests.helpers import forbid_builds

ROOT = Path(__file__).resolve().parents[2]

# Builds a tail-heavy GEMM + ReLU (odd sizes: vector tails) and prints the result's digest
# and the cache's counters. With FORBID_CODEGEN set, the llvm backend's build raises: the
# module must come from disk (no lowering either: the driver's lowering raises too).
SCRIPT = forbid_builds("schedlang.driver.lower_all") + r"""
import json, os, sys
import numpy as np
import schedlang as sl
from schedlang import kernel_cache
sys.path.insert(0, os.environ["TESTS_ROOT"])
from tests.api.test_kernel_cache import program, inputs
s, args = program()
mod = sl.build(s, args)
a, b, out = inputs()
mod(a, b, out)
print(json.dumps({"digest": out.tobytes().hex(), "type": type(mod).__name__,
                  "loads": kernel_cache.stats.loads, "stores": kernel_cache.stats.stores}))
"""


def program(n=37, m=53, k=29):
    A = sl.placeholder((n, k), name="A")
    B = sl.placeholder((k, m), name="B")
    r = sl.reduce_axis((0, k), name="r")
    C = sl.compute((n, m), lambda i, j: sl.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = sl.compute((n, m), lambda i, j: sl.max(C[i, j], sl.const(0.0, "float32")), name="D")
    s = sl.create_schedule(D.op)
    _, ji = s[D].split(D.op.axis[1], factor=16)
    s[D].vectorize(ji)
    s[C].compute_at(s[D], D.op.axis[0])
    s[D].parallel(D.op.axis[0])
    return s, [A, B, D]


def inputs(n=37, m=53, k=29):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((n, k)).astype("float32"), rng.standard_normal((k, m)).astype("float32"),
            np.zeros((n, m), "float32"))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder of this test, the disk cache on, the in-memory cache empty."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(disk.ENV, str(folder))
    monkeypatch.setenv(disk.CODE_CACHE_ENV, "1")
    monkeypatch.setattr(kernel_cache, "stats", kernel_cache.DiskStats())
    build_cache.clear()
    yield folder
    build_cache.clear()


def _run_child(folder: Path, forbid: bool = False) -> dict:
    env = {**os.environ, disk.ENV: str(folder), disk.CODE_CACHE_ENV: "1", "TESTS_ROOT": str(ROOT),
           "PYTHONPATH": str(ROOT)}
    if forbid:
        env["FORBID_CODEGEN"] = "1"
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _expected() -> np.ndarray:
    a, b, _ = inputs()
    return np.maximum(a @ b, 0)


def _entries(folder: Path):
    return sorted((folder / kernel_cache.FOLDER).glob("*" + disk.ENTRY_SUFFIX))


def test_concurrent_writers_leave_a_valid_cache_that_a_second_process_loads(cache):
    """Two processes build and store the same module at once; a third one, where lowering and
    LLVM refuse to run, loads it and computes the same bytes (numpy's result, to rounding).
    (The first process's own module, built and stored: test_a_loaded_module_answers_like_the_built_one.)"""
    env = {**os.environ, disk.ENV: str(cache), disk.CODE_CACHE_ENV: "1", "TESTS_ROOT": str(ROOT),
           "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    assert len(_entries(cache)) == 1
    assert not list((cache / kernel_cache.FOLDER).glob("*.tmp")), "a temporary file was left behind"
    second = _run_child(cache, forbid=True)          # lowering and LLVM refuse to run there
    assert (second["type"], second["stores"], second["loads"]) == ("CachedModule", 0, 1)
    assert {json.loads(o[0].strip().splitlines()[-1])["digest"] for o in outs} == {second["digest"]}
    got = np.frombuffer(bytes.fromhex(second["digest"]), "float32").reshape(37, 53)
    np.testing.assert_allclose(got, _expected(), rtol=1e-4, atol=1e-4)


def test_a_loaded_module_answers_like_the_built_one(cache, tmp_path):
    s, args = program()
    built = sl.build(s, args)
    assert type(built) is LLVMModule and kernel_cache.stats.stores == 1
    build_cache.clear()
    loaded = sl.build(*program())
    assert isinstance(loaded, CachedModule) and kernel_cache.stats.loads == 1
    assert loaded.ir == built.ir
    assert loaded.get_source("ll") == built.get_source("ll")
    assert loaded.get_source("ll.opt") == built.get_source("ll.opt")
    assert "ret" in loaded.get_source("asm")
    assert [b.name for b in loaded.params] == [b.name for b in built.params]
    a, b, out = inputs()
    loaded(a, b, out)
    np.testing.assert_allclose(out, _expected(), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="must|shape|argument"):
        loaded(a[:3], b, out)                        # the same argument checks
    path = str(tmp_path / "again.so")
    loaded.export_library(path)
    again = sl.load_module(path)
    out[:] = 0
    again(a, b, out)
    np.testing.assert_allclose(out, _expected(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_a_damaged_entry_is_ignored_and_rebuilt(cache, damage):
    sl.build(*program())
    (entry,) = _entries(cache)
    data = entry.read_bytes()
    if damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "flip":
        data = bytearray(data)
        data[len(data) // 2] ^= 0xFF
        data = bytes(data)
    elif damage == "empty":
        data = b""
    else:
        data = os.urandom(4096)
    entry.write_bytes(data)
    build_cache.clear()
    mod = sl.build(*program())
    assert type(mod) is LLVMModule, "a damaged entry must not be loaded"
    assert kernel_cache.stats.rejected == 1 and kernel_cache.stats.stores == 2
    a, b, out = inputs()
    mod(a, b, out)
    np.testing.assert_allclose(out, _expected(), rtol=1e-4, atol=1e-4)
    build_cache.clear()
    assert isinstance(sl.build(*program()), CachedModule), "the rebuild replaced the entry"


def test_an_entry_of_another_key_is_never_used(cache):
    """An entry stores its full key text: one found under the name of this key but written
    for another (a hash collision, a file copied over) is not loaded."""
    s, args = program()
    mod = sl.build(s, args)
    (entry,) = _entries(cache)
    key = build_cache.build_key(s, args, mod.target, None)
    text = kernel_cache.key_text(key, mod.target)
    header, payload = disk.unpack_entry(entry.read_bytes(), text)
    del header["key"]
    entry.write_bytes(disk.pack_entry(text.replace('"D"', '"E"'), header, payload))
    build_cache.clear()
    assert type(sl.build(*program())) is LLVMModule
    assert kernel_cache.stats.rejected == 1


def test_another_target_or_cpu_features_miss(cache):
    s, args = program()
    host = sl.Target.create("llvm")
    narrow = sl.Target.create("llvm -mattr=-avx512f")      # runs here, different features
    key = build_cache.build_key(s, args, host, None)
    assert kernel_cache.key_text(key, host) != kernel_cache.key_text(key, narrow)
    assert kernel_cache.key_text(key, host) != kernel_cache.key_text(key, host.with_options(bounds_check=True))
    sl.build(s, args, target=host)
    sl.build(*program(), target=narrow)
    assert kernel_cache.stats.loads == 0 and kernel_cache.stats.stores == 2
    assert len(_entries(cache)) == 2


def test_versions_are_part_of_the_key(cache, monkeypatch):
    s, args = program()
    target = sl.Target.create("llvm")
    key = build_cache.build_key(s, args, target, None)
    before = kernel_cache.key_text(key, target)
    assert all(v in before for v in kernel_cache.versions().values())
    monkeypatch.setattr(kernel_cache, "versions", lambda: {"schedlang": "another"})
    assert kernel_cache.key_text(key, target) != before


def test_off_switches(cache, monkeypatch):
    monkeypatch.setenv(disk.CODE_CACHE_ENV, "0")
    sl.build(*program())
    assert kernel_cache.stats.stores == 0 and not _entries(cache)
    monkeypatch.setenv(disk.CODE_CACHE_ENV, "1")
    monkeypatch.setattr(kernel_cache, "ENABLED", False)
    build_cache.clear()
    sl.build(*program())
    assert kernel_cache.stats.stores == 0


def test_clear_and_info(cache, capsys):
    sl.build(*program())
    facts = kernel_cache.info()[kernel_cache.FOLDER]
    assert facts["entries"] == 1 and facts["bytes"] > 0 and facts["path"].startswith(str(cache))
    assert cli_main(["cache", "info"]) == 0
    assert "kernels: 1 entries" in capsys.readouterr().out
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert not _entries(cache) and kernel_cache.info()[kernel_cache.FOLDER]["entries"] == 0
    build_cache.clear()
    assert type(sl.build(*program())) is LLVMModule


def test_nvrtc_ptx_is_cached_by_source(cache, monkeypatch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from schedlang.target.cuda import nvrtc
    source = 'extern "C" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }\n'
    monkeypatch.setattr(nvrtc, "_PTX", {})
    ptx = nvrtc.compile_ptx(source, "sm_80", "add_one")
    assert disk.folder_info(nvrtc.DISK_FOLDER)["entries"] == 1
    monkeypatch.setattr(nvrtc, "_PTX", {})          # a new process: only the disk remembers
    from cuda.bindings import nvrtc as bindings

    def refuse(*a, **k):
        raise AssertionError("NVRTC ran")
    monkeypatch.setattr(bindings, "nvrtcCompileProgram", refuse)
    assert nvrtc.compile_ptx(source, "sm_80", "add_one") == ptx
    assert ".entry add_one" in ptx


def test_a_default_scheduled_part_skips_making_its_schedule_on_a_hit(cache, monkeypatch):
    """The torch frontend keys a part by its program (no schedule yet): with its module on
    disk, neither the default schedule nor the lowering is made again."""
    import torch
    import schedlang.torch as st
    from schedlang.torch import schedules
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.GELU(), torch.nn.Linear(40, 8)).eval()
    x = torch.randn(3, 5, 24)
    with torch.no_grad():
        want = st.compile(model, (x,))(x)
    kernel_cache.flush()                              # written behind the compile
    assert kernel_cache.stats.stores == 1
    build_cache.clear()

    def refuse(*args, **kwargs):
        raise AssertionError("the default schedule was made again")
    monkeypatch.setattr(schedules, "default_schedule", refuse)
    with torch.no_grad():
        again = st.compile(model, (x,))
        got = again(x)
    assert kernel_cache.stats.loads == 1 and isinstance(again.modules[0], CachedModule)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert "kernel " in again.ir("kernel")            # the levels' text came back with it
