"""The on-disk kernel cache: a module built once is loaded by later processes with no
lowering and no LLVM code generation.

sl.build (through build_cache.cached_build) looks a build up here when the in-memory
cache misses, and stores what it compiled. An entry is one file in
$SCHEDLANG_CACHE_DIR/kernels (disk.py: per user, private, else ~/.cache/schedlang):
a disk.py entry whose header holds the full key text and the library's size, and whose
payload is the shared library mod.export_library writes followed by the text of every level
the build kept (mod.ir; zlib-compressed JSON, decompressed only when mod.ir is read), with a
checksum trailer over the whole,
and is written whole (disk.write_atomically), so concurrent processes see an entry
complete or not at all (of two writers of one key, the last one's stays). Its file name is a
hash of the key text, and the full key text is stored and compared on load, so an entry
is used only for exactly its key. A corrupt, truncated, foreign or outdated entry is
ignored (and replaced by the rebuild).

The key is known before lowering, so a hit skips the Python lowering too: the program (its
canonical JSON, tensor/serialize.py), the schedule's steps (schedule/steps.py JSON), the
stage of each argument, the module name, the resolved target with every option (CPU name
and feature string included) and the versions that affect code: schedlang's version, a
hash of the package's source files, llvmlite's and LLVM's versions (versions()).

Only modules of the llvm target that run on this machine are stored (CUDA's NVRTC output
has its own cache by source hash: target/cuda/nvrtc.py). Turn the cache off with
SCHEDLANG_KERNEL_CACHE=0 (the test suite does, except in its own tests) or
schedlang.kernel_cache.ENABLED = False; empty it with clear() or `schedlang cache clear`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, Optional

from .build_key import build_key
from .tensor.serialize import to_json
from .version import __version__
from .disk import (MAX_BYTES_ENV, DiskStats, clear_folder, code_cache_enabled, entry_path, folder_info, max_bytes,
                   read_entry, write_entry)

ENABLED = True         # and unless SCHEDLANG_KERNEL_CACHE=0 (disk.code_cache_enabled)
FOLDER = "kernels"
FORMAT = 2         # 2: the levels' texts after the library in the payload, read on demand


stats = DiskStats()        # loads: builds answered from disk


# ---------------------------------------------------------------- the key
@lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 of every source file of the schedlang package (path and contents): any change
    of the code that lowers, schedules or generates code changes it."""
    # os.walk and plain strings, not pathlib: a fresh process pays this once per compile, and
    # pathlib's globbing and sorting were most of its ~70 ms of CPU (2-core Zen 3); the files,
    # their order (by path components, as sorted Paths compare) and the hash are the same
    root = os.path.dirname(os.path.realpath(__file__))
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(folder, root)
        for name in names:
            if os.path.splitext(name)[1] in (".py", ".h", ".c", ".cpp"):
                files.append(tuple(p for p in rel.split(os.sep) if p != ".") + (name,))
    h = hashlib.sha256()
    for parts in sorted(files):
        path = os.path.join(root, *parts)
        if not os.path.isfile(path):
            continue
        h.update("/".join(parts).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(f.read() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def versions() -> Dict[str, str]:
    """The versions an entry was compiled with; an entry of other versions is never used."""
    import llvmlite                     # loads only when an entry is read or written
    import llvmlite.binding as llvm
    return {"format": str(FORMAT), "schedlang": __version__, "source": source_hash(),
            "llvmlite": llvmlite.__version__, "llvm": ".".join(map(str, llvm.llvm_version_info))}


def key_text(key, target) -> str:
    """The full text of a build_cache key (program, steps, store predicates, argument stages,
    target, name) for the resolved target, with versions(): what an entry stores and is
    compared with."""
    program, steps, predicates, arg_stages, _, name = key
    return json.dumps({"versions": versions(), "program": program, "steps": steps, "predicates": predicates,
                       "args": [list(a) for a in arg_stages], "name": name,
                       "target": {"kind": target.kind, "options": asdict(target.options)}},
                      sort_keys=True, default=str)


def read(folder: str, text: str):
    """(header, payload) of the entry of a key text in a cache folder, or None (an unusable
    file is counted in stats.rejected)."""
    wait_for(folder, text)
    entry, rejected = read_entry(folder, text)
    stats.rejected += rejected
    return entry


# ---------------------------------------------------------------- built modules
def cacheable(target) -> bool:
    """Whether builds for target are stored: llvm modules that run on this machine."""
    if not (ENABLED and code_cache_enabled()) or getattr(target, "kind", None) != "llvm":
        return False
    from .target.llvm.cpus import why_not_runnable    # llvmlite loads only for an llvm build
    from .target.llvm.jit import host_cpu
    return why_not_runnable(target.cpu, target.features, *host_cpu()) is None


def load(key, target):
    """The module stored for a build_cache key, or None."""
    if not cacheable(target):
        return None
    return load_text(key_text(key, target), target)


def load_text(text: str, target):
    """The module stored under a full key text (key_text's), or None. The module's
    disk_key is that text (the model cache refers to it)."""
    entry = read(FOLDER, text)
    if entry is None:
        return None
    header, payload = entry
    from .target.llvm.cached import CachedModule     # (llvmlite, as cacheable)
    try:
        size = header["library_size"]
        library, texts = payload[:size], payload[size:]        # texts: decompressed when mod.ir is read
        module = CachedModule(str(entry_path(FOLDER, text)), library, target, texts)
    except (ValueError, OSError, KeyError, TypeError):     # a library that does not check or load
        stats.rejected += 1
        return None
    stats.loads += 1
    module.disk_key = text
    return module


def store(key, target, module) -> None:
    """Store a module just built for key (a failure to write is counted, never raised: the
    build itself succeeded). Inside deferred(), the library is made and written by the
    writer thread; module.disk_key is set at once either way."""
    if not cacheable(target):
        return
    text = key_text(key, target)
    try:
        module.disk_key = text           # what the model cache refers to
    except AttributeError:               # a registered backend's module without attributes
        pass
    later(lambda: _write_module(text, module), FOLDER, text)


def _write_module(text: str, module) -> None:
    try:
        with tempfile.TemporaryDirectory(prefix="schedlang-kernel-") as tmp:
            path = os.path.join(tmp, "module.so")
            module.export_library(path)
            with open(path, "rb") as f:
                library = f.read()
        texts = zlib.compress(json.dumps(dict(module.ir)).encode(), 1)
        write_entry(FOLDER, text, {"library_size": len(library)}, library + texts)
    except (OSError, ValueError, RuntimeError):    # no C compiler, a full disk, an extern call it cannot save
        stats.failed += 1
        return
    stats.stores += 1


# ---------------------------------------------------------------- writing off the critical path
# A model's compile (torch/runtime.py) returns before its entries are on disk: writing one
# makes the library again (LLVM's object code, the system linker) and compresses the texts,
# ~0.4 s of CPU for ResNet-50, which the first call need not wait for. One writer thread,
# in order (a model entry after its kernels' entries); flush() waits for it, and so do
# os.fork() (a child must not inherit a writer inside LLVM's lock) and the interpreter's exit.
_deferring = 0
_writer = None
_pending: list = []
_pending_keys: set = set()          # (folder, key text) of the entries not yet written
_writer_lock = threading.Lock()


@contextlib.contextmanager
def deferred():
    """Entries stored while the body runs (from any thread) are written by the writer thread."""
    global _deferring
    with _writer_lock:
        _deferring += 1
    try:
        yield
    finally:
        with _writer_lock:
            _deferring -= 1


def later(write: Callable[[], None], folder: str, text: str) -> None:
    """write() (the entry of text in folder) now, or by the writer thread inside deferred()."""
    global _writer
    with _writer_lock:
        if _deferring:
            if _writer is None:
                _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sl-cache-write")
            _pending_keys.add((folder, text))
            _pending[:] = [f for f in _pending if not f.done()]
            _pending.append(_writer.submit(_written, write, folder, text))
            return
    write()


def _written(write: Callable[[], None], folder: str, text: str) -> None:
    try:
        write()
    finally:
        with _writer_lock:
            _pending_keys.discard((folder, text))


def wait_for(folder: str, text: str) -> None:
    """Return once the entry of text in folder, if this process stored it, is written."""
    if (folder, text) in _pending_keys:     # stored earlier in this process, not yet written
        flush()


def flush() -> None:
    """Wait until every entry stored so far is written (at once on the writer thread itself)."""
    if threading.current_thread().name.startswith("sl-cache-write"):
        return
    with _writer_lock:
        pending = list(_pending)
        _pending.clear()
    for future in pending:
        future.result()


os.register_at_fork(before=flush)


# ---------------------------------------------------------------- default-scheduled programs
def build_default(inputs, outputs, target, schedule: Callable[[], object], build: Callable[[object], object]):
    """build(schedule()) for a program whose schedule is made from the program and target
    alone (a default schedule): a process that finds the module on disk skips making the
    schedule too. A small alias entry maps the program (canonical JSON), the argument order,
    the target and versions() to the key of the build it made (whose entry holds the module)."""
    alias = _alias_text(inputs, outputs, target) if cacheable(target) else None
    if alias is not None:
        entry = read(FOLDER, alias)
        built = entry[0].get("build_key") if entry is not None else None
        module = load_text(built, target) if isinstance(built, str) else None
        if module is not None:
            return module
    s = schedule()
    module = build(s)
    if alias is not None:
        key = build_key(s, list(inputs) + list(outputs), target, None)
        if key is not None:
            try:
                write_entry(FOLDER, alias, {"build_key": key_text(key, target)}, b"")
            except OSError:
                stats.failed += 1
    return module


def _alias_text(inputs, outputs, target) -> Optional[str]:
    try:
        program = to_json(list(outputs))
    except (TypeError, ValueError):           # a compute attr that is not JSON: not keyed
        return None
    return json.dumps({"versions": versions(), "default_schedule_of": program, "name": None,
                       "args": [[t.op.name, t.value_index] for t in list(inputs) + list(outputs)],
                       "target": {"kind": target.kind, "options": asdict(target.options)}},
                      sort_keys=True, default=str)


# ---------------------------------------------------------------- the folders
FOLDERS = (FOLDER, "models", "nvrtc", "packed")   # every folder of compiled code this module answers for
                                                  # (models: torch/model_cache.py; packed: torch/pack_disk.py)


def info() -> Dict[str, Dict[str, object]]:
    """folder -> {"path", "entries", "bytes"} of each cache of compiled code."""
    return {name: folder_info(name) for name in FOLDERS}


def clear() -> int:
    """Remove every entry of the caches of compiled code; the number removed. Running
    processes keep the modules they loaded."""
    return sum(clear_folder(name) for name in FOLDERS)


def run_command(action: str) -> int:
    """`schedlang cache info|clear`: print what the caches hold (entries and sizes per folder,
    the total against the size cap), or empty them; exit status."""
    if action == "clear":
        print(f"removed {clear()} entries")
        return 0
    facts = info()
    for name, f in facts.items():
        print(f"{name}: {f['entries']} entries, {f['bytes'] / 1e6:.1f} MB in {f['path']}")
    total = sum(f["bytes"] for f in facts.values())
    try:
        limit = max_bytes()
    except ValueError as e:
        print(f"schedlang: error: {e}")
        return 2
    cap = f"{limit / 1e6:.1f} MB" if limit else "none"
    print(f"total: {total / 1e6:.1f} MB; size cap (${MAX_BYTES_ENV}): {cap}, least recently used entries "
          "removed beyond it")
    print(f"versions: {', '.join(f'{k} {v[:12]}' for k, v in versions().items())}")
    return 0
