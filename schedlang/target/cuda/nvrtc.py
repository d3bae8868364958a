"""CUDA C -> PTX with NVRTC (through cuda-python; no GPU or driver needed), and per-kernel
register, spill and shared-memory figures from `ptxas -v`.

Results are cached in memory by (source, architecture), and NVRTC's PTX on disk too
(disk.py entries in $SCHEDLANG_CACHE_DIR/nvrtc, keyed by the source, the options and NVRTC's
version; off with SCHEDLANG_KERNEL_CACHE=0).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ...disk import code_cache_enabled, read_entry, write_entry
from ...errors import LoweringError


@dataclass(frozen=True)
class PtxasInfo:
    """What ptxas reports for one kernel."""

    registers: int
    spill_bytes: int       # spill stores + spill loads
    shared_bytes: int      # static shared memory


def _check(result, what: str):
    err = result[0]
    if int(err) != 0:
        raise LoweringError("nvrtc", f"{what} failed: {err}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


_FOUND_INCLUDE_DIRS: Optional[Tuple[str, ...]] = None


def _include_dirs() -> Tuple[str, ...]:
    """The CUDA headers (cuda_fp16.h) NVRTC needs for __half, when they can be found. A
    search that found them is kept; one that did not is tried again at the next compile
    (once, under heavy load, a failed search was cached and every later float16 build of
    the process failed)."""
    global _FOUND_INCLUDE_DIRS
    if _FOUND_INCLUDE_DIRS is None:
        try:
            from cuda.pathfinder import find_nvidia_header_directory  # optional (CUDA's wheels), loaded when compiling
            found = find_nvidia_header_directory("cudart")
        except Exception:      # noqa: BLE001 - any failure means: no headers (this time)
            found = None
        if not found:
            return ()
        _FOUND_INCLUDE_DIRS = (found,)
    return _FOUND_INCLUDE_DIRS


def _nvrtc():
    try:
        from cuda.bindings import nvrtc    # optional, loaded when compiling
    except ImportError as e:
        raise LoweringError("nvrtc", "compiling CUDA C needs cuda-python with NVRTC "
                            "(pip install 'schedlang[cuda]', i.e. cuda-python and nvidia-cuda-nvrtc)") from e
    return nvrtc


def _log(nvrtc, prog) -> str:
    size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    buf = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return buf.rstrip(b"\0 ").decode(errors="replace")


def _with_source_lines(log: str, source: str) -> str:
    """Append the source line each error points at ("prog.cu(12): error: ...")."""
    lines = source.splitlines()
    out = [log]
    for n in sorted({int(m) for m in re.findall(r"\((\d+)\): (?:catastrophic )?error", log)}):
        if 0 < n <= len(lines):
            out.append(f"  line {n}: {lines[n - 1].strip()}")
    return "\n".join(out)


_PTX: Dict[Tuple[str, str], str] = {}


def compile_ptx(source: str, arch: str, name: str = "module") -> str:
    """PTX for `arch` ("sm_90") from CUDA C; a compile error raises LoweringError with NVRTC's
    log and the offending source lines."""
    key = (hashlib.sha256(source.encode()).hexdigest(), arch)
    if key in _PTX:
        return _PTX[key]
    nvrtc = _nvrtc()
    options = [f"--gpu-architecture=compute_{arch[3:]}".encode(), b"-std=c++17"]
    options += [f"-I{d}".encode() for d in _include_dirs()]
    disk_key = _disk_key(nvrtc, source, options) if code_cache_enabled() else None
    entry = read_entry(DISK_FOLDER, disk_key)[0] if disk_key is not None else None
    if entry is not None:
        _PTX[key] = entry[1].decode()
        return _PTX[key]
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        result = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        if int(result[0]) != 0:
            raise LoweringError("nvrtc", f"NVRTC could not compile the generated CUDA C of {name}:\n"
                                + _with_source_lines(_log(nvrtc, prog), source))
        size = _check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
        buf = b" " * size
        _check(nvrtc.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    ptx = buf.rstrip(b"\0").decode()
    _PTX[key] = ptx
    if disk_key is not None:
        try:
            write_entry(DISK_FOLDER, disk_key, {}, ptx.encode())
        except OSError:          # a full or read-only disk: the PTX is still this process's
            pass
    return ptx


DISK_FOLDER = "nvrtc"


def _disk_key(nvrtc, source: str, options) -> str:
    """The full key text of a PTX entry: NVRTC's version, the options, the source."""
    version = _check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    return json.dumps({"nvrtc": list(version), "options": [o.decode() for o in options], "source": source})


_INFO: Dict[Tuple[str, str], Dict[str, PtxasInfo]] = {}


def ptxas_info(ptx: str, arch: str) -> Optional[Dict[str, PtxasInfo]]:
    """Registers, spills and shared memory of each kernel from `ptxas -v`; None when no
    ptxas is on PATH (the figures are informative only)."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return None
    key = (hashlib.sha256(ptx.encode()).hexdigest(), arch)
    if key not in _INFO:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "module.ptx")
            with open(path, "w") as f:
                f.write(ptx)
            run = subprocess.run([ptxas, f"-arch={arch}", "-v", path, "-o", os.devnull],
                                 capture_output=True, text=True)
        if run.returncode != 0:
            raise LoweringError("ptxas", f"ptxas rejected the PTX for {arch}:\n{run.stderr.strip()}")
        _INFO[key] = parse_ptxas(run.stderr + run.stdout)
    return _INFO[key]


def parse_ptxas(text: str) -> Dict[str, PtxasInfo]:
    """Per-kernel figures from ptxas -v output."""
    out: Dict[str, PtxasInfo] = {}
    kernel, spills = None, 0
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line) or re.search(r"Function properties for (\w+)", line)
        if m:
            kernel = m.group(1)
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and kernel:
            spills = int(m.group(1)) + int(m.group(2))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and kernel:
            smem = re.search(r"(\d+) bytes smem", line)
            out[kernel] = PtxasInfo(int(m.group(1)), spills, int(smem.group(1)) if smem else 0)
            spills = 0
    return out
