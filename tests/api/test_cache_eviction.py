"""The size cap of the on-disk caches (disk.evict, $SCHEDLANG_CACHE_MAX_BYTES): a store
removes the least recently used entries of all cache folders beyond the cap, a read marks
an entry used, the entry just written is never removed, and `schedlang cache info` shows
the sizes and the cap."""
import os
import time

import pytest

import schedlang as sl
from schedlang import build_cache, disk, kernel_cache
from schedlang.cli import main as cli_main
from schedlang.target.llvm.cached import CachedModule

from .test_kernel_cache import cache, program  # noqa: F401  (the fixture: a fresh cache folder)


def _write(folder, key, size, age_s):
    """An entry of about size bytes whose last use was age_s seconds ago."""
    disk.write_entry(folder, key, {}, b"x" * size)
    path = disk.entry_path(folder, key)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_the_least_recently_used_entries_go_first(cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv(disk.MAX_BYTES_ENV, "0")          # no cap while filling
    old = _write("kernels", "old", 10_000, 300)
    used = _write("kernels", "used", 10_000, 200)
    other = _write("nvrtc", "other folder", 10_000, 100)
    assert disk.read_entry("kernels", "used")[0] is not None     # a read marks it used now
    size = old.stat().st_size
    monkeypatch.setenv(disk.MAX_BYTES_ENV, str(3 * size + size // 2))
    new = disk.entry_path("kernels", "new")
    disk.write_entry("kernels", "new", {}, b"x" * 10_000)       # 4 entries > 3.5: one goes
    assert not old.exists()
    assert used.exists() and other.exists() and new.exists()
    monkeypatch.setenv(disk.MAX_BYTES_ENV, str(size + size // 2))
    disk.write_entry("kernels", "newest", {}, b"x" * 10_000)
    left = {p for p, _, _ in disk.all_entries()}
    assert left == {disk.entry_path("kernels", "newest")}, "all but the entry just written"
    assert disk.read_entry("kernels", "newest")[0][1] == b"x" * 10_000


def test_an_entry_larger_than_the_cap_is_kept_until_the_next_store(cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv(disk.MAX_BYTES_ENV, "1K")
    disk.write_entry("kernels", "big", {}, os.urandom(50_000))
    assert disk.read_entry("kernels", "big")[0] is not None
    disk.write_entry("kernels", "next", {}, os.urandom(50_000))
    assert disk.read_entry("kernels", "big")[0] is None
    assert disk.read_entry("kernels", "next")[0] is not None


@pytest.mark.parametrize("text,want", [("", disk.DEFAULT_MAX_BYTES), ("12345", 12345), ("500M", 500 << 20),
                                       ("4g", 4 << 30), ("8K", 8192), ("0", 0)])
def test_the_cap_setting(monkeypatch, text, want):
    monkeypatch.setenv(disk.MAX_BYTES_ENV, text)
    assert disk.max_bytes() == want


def test_a_bad_cap_setting_warns_and_keeps_the_entry(cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv(disk.MAX_BYTES_ENV, "lots")
    with pytest.raises(ValueError, match="SCHEDLANG_CACHE_MAX_BYTES"):
        disk.max_bytes()
    with pytest.warns(RuntimeWarning, match="not trimmed"):
        disk.write_entry("kernels", "k", {}, b"data")
    assert disk.read_entry("kernels", "k")[0] is not None
    assert cli_main(["cache", "info"]) == 2


def test_stale_temporary_files_are_removed(cache, monkeypatch):  # noqa: F811
    folder = disk.cache_dir("kernels")
    stale, fresh = folder / "a.entry.1.tmp", folder / "b.entry.2.tmp"
    for p in (stale, fresh):
        p.write_bytes(b"partial")
    then = time.time() - 2 * disk.STALE_TMP_S
    os.utime(stale, (then, then))
    disk.write_entry("kernels", "k", {}, b"data")
    assert not stale.exists() and fresh.exists(), "a temporary file being written is left alone"


def test_built_modules_are_evicted_and_rebuilt(cache, monkeypatch, capsys):  # noqa: F811
    """Through sl.build: with a cap of about one module, the older module's entry goes; the
    next build of it compiles again and stores it."""
    sl.build(*program())
    size = kernel_cache.info()[kernel_cache.FOLDER]["bytes"]
    monkeypatch.setenv(disk.MAX_BYTES_ENV, str(size + size // 2))
    sl.build(*program(n=41))
    assert kernel_cache.info()[kernel_cache.FOLDER]["entries"] == 1
    build_cache.clear()
    assert not isinstance(sl.build(*program()), CachedModule), "the first module's entry was evicted"
    assert kernel_cache.stats.stores == 3
    build_cache.clear()
    assert isinstance(sl.build(*program()), CachedModule)
    assert cli_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "kernels: 1 entries" in out and "size cap" in out and f"{(size + size // 2) / 1e6:.1f} MB" in out
