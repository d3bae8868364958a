"""cuda_shim.h precompiled for the CUDA shim's g++ builds (shim.py). Parsing the header (with
the C++20 standard headers it includes) is most of a small kernel's build: 0.86 -> 0.37 s
CPU for a library, 1.03 -> 0.57 s for a ThreadSanitizer build, measured on a Zen 3 with
g++ 12; making the header costs about 1.2 s once.

One precompiled header per compiler (its file: path, size, time), header text and flags, in the
shim's checked cache folder: cuda-shim/pch-KEY/cuda_shim.h.gch. A build passes -I of that
folder ahead of the shim's own: g++ looks for NAME.gch in each include folder before NAME,
and passes over a .gch it cannot use (made with other flags or by another compiler), so a
stale one costs the parse and nothing else. The header is made at a process's second build
of a kind in a folder, not its first: a folder that sees one build (a test's fresh cache)
would pay 1.2 s and gain nothing. It is written under a temporary name and renamed into
place, so concurrent processes see it whole or not at all.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from ...disk import unsafe_reason

NAME = "cuda_shim.h"
_builds: Dict[Tuple[str, Tuple[str, ...]], int] = {}     # (folder, flags) -> builds asked for here
_failed: set = set()                                      # precompiled headers g++ could not make


def include_flags(compiler: str, flags: Sequence[str], shim_dir: Path, folder: Path) -> List[str]:
    """["-I<folder of the precompiled header>"] for a build with these flags (to go before
    -I<shim_dir>), making the header when this is the process's second build of the kind in
    folder; [] when there is none to use."""
    where = pch_folder(compiler, flags, shim_dir, folder)
    if (where / (NAME + ".gch")).is_file():
        return [f"-I{where}"] if unsafe_reason(where) is None else []
    seen = (str(folder), tuple(flags))
    _builds[seen] = _builds.get(seen, 0) + 1
    if _builds[seen] < 2 or str(where) in _failed or not _make(compiler, flags, shim_dir, where):
        return []
    return [f"-I{where}"]


def pch_folder(compiler: str, flags: Sequence[str], shim_dir: Path, folder: Path) -> Path:
    """Where the precompiled header for this compiler, header text and flags lives (g++ checks
    a .gch's compiler and flags itself when it reads one; the key keeps the kinds apart)."""
    real = os.path.realpath(compiler)
    st = os.stat(real)
    header = hashlib.sha256((shim_dir / NAME).read_bytes()).hexdigest()
    text = "\0".join([real, str(st.st_size), str(st.st_mtime_ns), header, " ".join(flags)])
    return folder / ("pch-" + hashlib.sha256(text.encode()).hexdigest()[:24])


def discard(include: Sequence[str]) -> None:
    """Remove the precompiled header of include_flags()'s answer (a build failed with it and
    passed without it); the next second build makes it again."""
    for flag in include:
        try:
            os.unlink(Path(flag[2:]) / (NAME + ".gch"))
        except OSError:
            pass
        _failed.add(flag[2:])


def _make(compiler: str, flags: Sequence[str], shim_dir: Path, where: Path) -> bool:
    """Precompile the header into where/NAME.gch; whether it is there now."""
    try:
        where.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        pass
    if unsafe_reason(where) is not None:
        _failed.add(str(where))
        return False
    # In the cache folder itself, so that disk.evict removes it if this process dies first.
    fd, tmp = tempfile.mkstemp(dir=where.parent, prefix=NAME + ".", suffix=".gch.tmp")
    os.close(fd)
    try:
        run = subprocess.run([compiler, *flags, "-x", "c++-header", f"-I{shim_dir}", str(shim_dir / NAME),
                              "-o", tmp], capture_output=True, text=True)
        if run.returncode != 0:
            _failed.add(str(where))
            return False
        os.replace(tmp, where / (NAME + ".gch"))
        return True
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
