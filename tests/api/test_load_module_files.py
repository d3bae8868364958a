"""sl.load_module runs exactly the file's current contents, and refuses, with a clear error
and without loading anything, a file that is not a whole schedlang library for this machine."""
import hashlib
import os
import shutil
import subprocess

import numpy as np
import pytest

import schedlang as sl
from schedlang.target.elf import checksum, write_library
from schedlang.target.sharedlib import _HANDLES
from tests.safety.child import run_child

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="export_library links with the system C compiler")


def _adds(c: float):
    A = sl.placeholder((8,), name="A")
    B = sl.compute((8,), lambda i: A[i] * 2.0 + c, name="B")
    return sl.build(sl.create_schedule(B.op), [A, B])


def _run(mod) -> np.ndarray:
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    mod(a, b)
    return b


def test_a_file_exported_again_to_the_same_path_runs_its_new_code(tmp_path):
    path = str(tmp_path / "m.so")
    first, second = _adds(1.0), _adds(5.0)
    first.export_library(path)
    old = sl.load_module(path)
    second.export_library(path)
    new = sl.load_module(path)
    np.testing.assert_array_equal(_run(new), _run(second))
    np.testing.assert_array_equal(_run(old), _run(first))     # the old module keeps its own code
    assert not np.array_equal(_run(first), _run(second))


def test_loading_the_same_contents_again_shares_one_library(tmp_path):
    path = str(tmp_path / "m.so")
    _adds(3.0).export_library(path)
    a = sl.load_module(path)
    held = len(_HANDLES)
    shutil.copy(path, tmp_path / "copy.so")
    b, c = sl.load_module(path), sl.load_module(str(tmp_path / "copy.so"))
    assert len(_HANDLES) == held
    assert a._compiled.lib._handle == b._compiled.lib._handle == c._compiled.lib._handle
    np.testing.assert_array_equal(_run(c), np.arange(8) * 2.0 + 3.0)


def test_library_dir_keeps_a_copy_of_each_library_loaded_under_its_memory_file_name(tmp_path, monkeypatch):
    path = str(tmp_path / "m.so")
    _adds(7.25).export_library(path)     # contents no other test loads: a first load
    monkeypatch.setenv("SCHEDLANG_LIBRARY_DIR", str(tmp_path / "libs"))
    mod = sl.load_module(path)
    data = open(path, "rb").read()
    (kept,) = os.listdir(tmp_path / "libs")
    assert kept == f"schedlang-{hashlib.sha256(data).hexdigest()[:16]}.so"
    assert (tmp_path / "libs" / kept).read_bytes() == data
    np.testing.assert_array_equal(_run(mod), np.arange(8) * 2.0 + 7.25)


def _bad_files(folder) -> dict:
    """name -> path of files that load_module must refuse."""
    good = folder / "good.so"
    _adds(2.0).export_library(str(good))
    data = good.read_bytes()
    rng = np.random.default_rng(0)
    files = {
        "truncated_half": data[:len(data) // 2],
        "truncated_end": data[:-200],                   # every header inside, the checksum cut off
        "zeroed": bytes(len(data)),
        "random": rng.integers(0, 256, len(data), dtype=np.uint8).tobytes(),
        "flipped": data[:len(data) // 3] + bytes([data[len(data) // 3] ^ 0xFF]) + data[len(data) // 3 + 1:],
        "header_only": data[:64],
        "text": b"not a library\n" * 10,
        "empty": b"",
    }
    paths = {}
    for name, contents in files.items():
        paths[name] = folder / f"{name}.so"
        paths[name].write_bytes(contents)
    src = folder / "foreign.c"
    src.write_text("int answer = 42;\n")
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(folder / "foreign.so"), str(src)], check=True)
    paths["foreign"] = folder / "foreign.so"
    paths["directory"] = folder / "dir.so"
    paths["directory"].mkdir()
    return paths


def test_bad_files_raise_a_clear_error_and_never_reach_the_loader(tmp_path):
    """In a child process: on today's loader a truncated library kills the process (SIGBUS)."""
    paths = _bad_files(tmp_path)
    code = f"""
        import schedlang as sl
        for name, path in {[(n, str(p)) for n, p in paths.items()]!r} + [("missing", {str(tmp_path / "no.so")!r})]:
            try:
                sl.load_module(path)
                print(name, "LOADED")
            except (ValueError, FileNotFoundError) as e:
                print(name, type(e).__name__, str(e).replace(chr(10), " "))
    """
    lines = dict(line.split(" ", 1) for line in run_child(code).splitlines())
    assert lines["missing"].startswith("FileNotFoundError no module file")
    expected = {"truncated_half": "truncated or corrupt", "truncated_end": "truncated or corrupt",
                "zeroed": "not an ELF shared library", "random": "not an ELF shared library",
                "flipped": "checksum does not match", "header_only": "truncated or corrupt",
                "text": "not an ELF shared library", "empty": "not an ELF shared library",
                "foreign": "is not a schedlang module", "directory": "is a directory"}
    for name, words in expected.items():
        assert lines[name].startswith("ValueError ") and words in lines[name], (name, lines[name])


def test_libc_is_refused_without_being_loaded_again():
    libc = next((line.split()[-1] for line in open("/proc/self/maps") if "/libc.so" in line or "/libc-" in line), None)
    if libc is None:
        pytest.skip("no libc mapped from a file")
    with pytest.raises(ValueError, match="is not a schedlang module"):
        sl.load_module(libc)


def test_a_library_for_another_machine_is_refused(tmp_path):
    good = tmp_path / "good.so"
    _adds(2.0).export_library(str(good))
    data = good.read_bytes()
    assert checksum(data) is True
    data = bytearray(data[:data.rindex(b"\nschedlang-sha256:")])      # without the checksum: an older library
    data[18:20] = (40).to_bytes(2, "little" if data[5] == 1 else "big")      # EM_ARM
    (tmp_path / "arm.so").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="another processor"):
        sl.load_module(str(tmp_path / "arm.so"))


def test_a_linked_library_is_written_whole_with_its_checksum_and_no_temporary_is_left(tmp_path):
    def link(out):
        with open(out, "wb") as f:
            f.write(b"library bytes")
    write_library(tmp_path / "m.so", link)
    assert checksum((tmp_path / "m.so").read_bytes()) is True
    assert (tmp_path / "m.so").read_bytes().startswith(b"library bytes")

    def fail(out):
        raise RuntimeError("link failed")
    with pytest.raises(RuntimeError, match="link failed"):
        write_library(tmp_path / "n.so", fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.so"]
