"""The CUDA shim's build cache (schedlang/disk.py): a checked per-user folder, never one that
someone else planted (in the shared temp folder or anywhere); entries written whole and
rebuilt when they fail their checks."""
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import warnings

import numpy as np
import pytest

import schedlang as sl
from schedlang import disk
from schedlang.target.cuda import shim, shim_pch
from schedlang.target.elf import checksum, with_checksum
from tests.target.cuda import schedules

pytest.importorskip("cuda.bindings")


@pytest.fixture
def module():
    """A small CUDA module and a check that emulating it gives exp(A) * 2."""
    s, args = schedules.elementwise(200, 32)
    mod = sl.build(s, args, target="cuda")

    def run_and_check():
        a = np.linspace(-1, 1, 200, dtype="float32")
        b = np.zeros(200, "float32")
        mod.emulate(a, b)
        np.testing.assert_allclose(b, np.exp(a) * 2, rtol=1e-6)
    return mod, run_and_check


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder of this test's (SCHEDLANG_CACHE_DIR), forgotten by the shim after."""
    root = tmp_path / "cache"
    monkeypatch.setenv(disk.ENV, str(root))
    monkeypatch.setattr(shim, "_CHECKED", {})
    return root / "cuda-shim"


def _entry(mod) -> str:
    """The name the module's library has in the cache."""
    return shim.build(mod.ir["cuda"], shim.driver_source(mod.kernel_ir), None).name


def test_the_cache_folder_is_per_user_and_never_the_shared_temp_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(disk.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert disk.cache_dir("cuda-shim") == tmp_path / "xdg" / "schedlang" / "cuda-shim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert disk.cache_dir("cuda-shim") == tmp_path / "home" / ".cache" / "schedlang" / "cuda-shim"
    assert stat.S_IMODE(os.stat(tmp_path / "home" / ".cache" / "schedlang" / "cuda-shim").st_mode) == 0o700
    monkeypatch.setenv(disk.ENV, str(tmp_path / "mine"))
    assert disk.cache_dir("cuda-shim") == tmp_path / "mine" / "cuda-shim"


def _planted_library(path, marker) -> None:
    """A library that, when run, writes marker (whatever the arguments); with a valid checksum,
    so only the folder check keeps it from running."""
    src = path.with_suffix(".c")
    src.write_text(f'#include <stdio.h>\nvoid sl_run(void** argv) {{ fclose(fopen("{marker}", "w")); }}\n')
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(path), str(src)], check=True)
    path.write_bytes(with_checksum(path.read_bytes()))


def test_a_library_planted_in_a_shared_folder_is_never_run(tmp_path, monkeypatch, module, cache):
    mod, run_and_check = module
    name = _entry(mod)                     # built once in a safe folder, to learn the entry's name
    marker = tmp_path / "planted-code-ran"
    shared = tmp_path / "shared-tmp"       # a world-writable folder, as /tmp is
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o1777)
    planted = []
    for folder in (shared / f"schedlang-cuda-shim-{os.getuid()}", shared / "schedlang" / "cuda-shim"):
        folder.mkdir(parents=True)
        os.chmod(folder, 0o777)
        _planted_library(folder / name, marker)
        planted.append(folder)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))     # the shared temp folder is this one
    monkeypatch.setenv(disk.ENV, str(shared / "schedlang"))   # and the cache is pointed into it
    monkeypatch.setattr(shim, "_CHECKED", {})
    with pytest.warns(RuntimeWarning, match=r"not using the cache folder .*others may write in it"):
        run_and_check()
    assert not marker.exists()
    used = shim._cache_dir()
    assert used not in planted and stat.S_IMODE(os.stat(used).st_mode) == 0o700


def test_a_folder_of_another_user_is_not_used(cache, monkeypatch):
    cache.mkdir(parents=True, mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(cache).st_uid + 1)
    with pytest.warns(RuntimeWarning, match="belongs to user id"):
        used = disk.cache_dir("cuda-shim")
    assert used != cache and os.stat(used).st_uid == os.stat(cache).st_uid


def test_a_damaged_entry_is_built_again(module, cache):
    mod, run_and_check = module
    run_and_check()
    (entry,) = cache.glob("*.so")
    for damage in ("truncate", "flip"):     # on today's main, loading the truncated one is a SIGBUS
        data = entry.read_bytes()
        damaged = data[:len(data) // 2] if damage == "truncate" else \
            data[:100] + bytes([data[100] ^ 0xFF]) + data[101:]
        entry.write_bytes(damaged)
        shim._CHECKED.clear()                 # as a new process finds it
        run_and_check()
        rebuilt = entry.read_bytes()
        assert rebuilt != damaged and checksum(rebuilt) is True, damage


def test_concurrent_builders_never_see_part_of_an_entry(module, cache, monkeypatch):
    mod, _ = module
    real_run = subprocess.run
    targets = []

    def compile_elsewhere(cmd, **kwargs):
        out = cmd[cmd.index("-o") + 1]
        targets.append(out)
        assert os.path.dirname(out) == str(cache) and not out.endswith(".so"), "g++ writes a temporary file"
        return real_run(cmd, **kwargs)
    monkeypatch.setattr(shim.subprocess, "run", compile_elsewhere)
    results, errors = [], []

    def build():
        try:
            results.append(_entry(mod))
        except Exception as e:            # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1 and targets
    left = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
    assert [p for p in left if not p.startswith("pch-")] == [results[0]], "no temporary file is left"
    assert all(p.endswith("/cuda_shim.h.gch") for p in left if p.startswith("pch-")), "(nor a header's)"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert checksum((cache / results[0]).read_bytes()) is True


def _build(n: int, sanitize=None, runs=None):
    """Build elementwise(n) for the shim (each n a new entry); with runs, g++ runs with -H
    (it lists the headers read, a precompiled one marked "!") and its answers go into runs."""
    s, args = schedules.elementwise(n, 32)
    mod = sl.build(s, args, target="cuda")
    real_run = subprocess.run

    def listing_headers(cmd, **kwargs):
        runs.append(real_run([*cmd, "-H"], **kwargs))
        return runs[-1]
    with pytest.MonkeyPatch.context() as m:
        if runs is not None:
            m.setattr(shim.subprocess, "run", listing_headers)
        return shim.build(mod.ir["cuda"], shim.driver_source(mod.kernel_ir), sanitize)


@pytest.mark.parametrize("sanitize", [None, "thread"])
def test_the_header_is_precompiled_at_the_second_build_and_g_plus_plus_uses_it(cache, sanitize):
    _build(200, sanitize)
    assert not list(cache.glob("pch-*")), "a folder's first build makes no header (it may be its only one)"
    _build(201, sanitize)
    (gch,) = cache.glob("pch-*/cuda_shim.h.gch")
    runs = []
    _build(202, sanitize, runs)
    (run,) = runs
    assert run.returncode == 0 and f"-I{gch.parent}" in run.args
    assert f"! {gch}" in run.stderr, run.stderr[:2000]

@pytest.mark.parametrize("damage", ["garbage", "another header"])
def test_a_precompiled_header_that_fails_is_passed_over(cache, module, tmp_path, damage):
    mod, run_and_check = module
    cache.mkdir(parents=True, mode=0o700)
    where = shim_pch.pch_folder(shim._compiler(), shim.CXXFLAGS + ["-shared", "-fPIC"], shim.SHIM_DIR, cache)
    where.mkdir(mode=0o700)
    gch = where / "cuda_shim.h.gch"
    if damage == "garbage":
        gch.write_bytes(b"gpch" + bytes(range(256)) * 64)
    else:                 # a header g++ takes, whose __global__ breaks every kernel
        (tmp_path / "cuda_shim.h").write_text('#include "' + str(shim.SHIM_DIR / "cuda_shim.h") + '"\n'
                                              "#undef __global__\n#define __global__ not_cuda\n")
        subprocess.run([shim._compiler(), *shim.CXXFLAGS, "-shared", "-fPIC", "-x", "c++-header",
                        str(tmp_path / "cuda_shim.h"), "-o", str(gch)], check=True)
    run_and_check()
    assert gch.exists() == (damage == "garbage"), "one that broke the build is removed"
