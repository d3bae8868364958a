"""Compile C source into a shared library with the system C compiler, once per source and flags.

Libraries are cached by a hash of the source, the flags and the compiler's path in the checked
per-user cache folder (schedlang/disk.py: $SCHEDLANG_CACHE_DIR/c, by default ~/.cache/schedlang/c).
An entry is written whole with a checksum (target/elf.py); one that fails its checks is built
again. What is loaded is the checked bytes (target/sharedlib.py), never the path.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ...disk import cache_dir
from ..elf import check_library, checksum, write_library
from ..target import Target

BASE_FLAGS = ["-std=c99", "-O3", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno", "-w"]


def find_compiler() -> Optional[str]:
    """The C compiler: $CC, else cc, gcc or clang on PATH; None when there is none."""
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compiler() -> str:
    cc = find_compiler()
    if cc is None:
        raise RuntimeError("the c target compiles with the system C compiler, but none was found "
                           "(install cc/gcc, or set CC)")
    return cc


def flags(target: Target) -> List[str]:
    """The compiler flags of a target: -march from its cpu (native by default), OpenMP when
    parallel loops run on threads. (-ffp-contract=off: no fused multiply-add the source does
    not ask for, so float results are the llvm target's.)"""
    out = BASE_FLAGS + [f"-march={target.cpu or 'native'}"]
    if target.threading == "openmp":
        out.append("-fopenmp")
    return out + ["-lm"]


def build_library(source: str, target: Target, extra_flags: Sequence[str] = ()) -> Tuple[Path, bytes]:
    """(path, bytes) of the library compiled from source, from the cache when it holds it;
    extra_flags go to the compiler after the target's (a sanitizer build, in the tests)."""
    cc = compiler()
    cmd_flags = flags(target) + list(extra_flags)
    key = hashlib.sha256("\0".join([source, cc, " ".join(cmd_flags)]).encode()).hexdigest()[:32]
    folder = cache_dir("c")
    out = folder / f"{key}.so"
    data = _usable(out)
    if data is not None:
        return out, data
    fd, src = tempfile.mkstemp(dir=folder, prefix=f"{key}.", suffix=".c")   # a new file of its own name
    with os.fdopen(fd, "w") as f:
        f.write(source)

    def compile_to(tmp: str) -> None:
        cmd = [cc, src, "-o", tmp, *cmd_flags]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"the C compiler failed on the generated C ({' '.join(cmd)}):\n{run.stderr[-4000:]}")
    try:
        write_library(out, compile_to)
    finally:
        os.unlink(src)
    data = _usable(out)
    if data is None:
        raise RuntimeError(f"the c target's library {out} fails its checks right after it was written")
    return out, data


def _usable(entry: Path) -> Optional[bytes]:
    """The bytes of a cache entry that is whole (its checksum holds) and a library for this
    machine; None otherwise."""
    try:
        data = entry.read_bytes()
    except OSError:
        return None
    if checksum(data) is not True:
        return None
    try:
        check_library(data, str(entry))
    except ValueError:
        return None
    return data
