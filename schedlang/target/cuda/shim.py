"""Run a CUDA module on the CPU: the exact generated CUDA C, compiled by g++ (C++20) against
shim/cuda_shim.h, with a generated host driver that allocates the module's temporaries and
launches each kernel over its grid: a block's threads run concurrently as fibers of one worker
OS thread (their stacks reused for every block), the blocks shared out among one worker a core
($SL_SHIM_THREADS sets how many); a ThreadSanitizer build runs one OS thread a GPU thread.

The normal build is a shared library called through ctypes on the caller's arrays; with
sanitize="thread" it is a ThreadSanitizer executable run in a child process on copies of
the arrays (TSan cannot be loaded into a running Python), and a data race is an error; with
sanitize="undefined" it is an UndefinedBehaviorSanitizer executable (float -> integer
overflow included), and any undefined behaviour of the CUDA C is an error.
Builds are cached by a hash of everything that goes into them, in the checked per-user cache
folder (schedlang/disk.py: $SCHEDLANG_CACHE_DIR/cuda-shim, by default
~/.cache/schedlang/cuda-shim). An entry is written whole (a temporary file renamed into
place) with a checksum, and one that fails its checks or fails to load is built again.
The header is precompiled once per cache folder and kind of build (shim_pch.py).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from ...disk import cache_dir
from ...kernel.launch import launch_dims
from ...kernel.nodes import KernelModule
from ...expr.extent import evaluate_extent
from ..elf import check_library, checksum, write_library
from ..sharedlib import load_bytes
from . import shim_pch
from .codegen import compute_type, memory_type

SHIM_DIR = Path(__file__).resolve().parent / "shim"
CXXFLAGS = ["-std=c++20", "-O1", "-pthread", "-w"]
FLAGS = CXXFLAGS + ["-x", "c++", "-include", "cuda_shim.h"]
SANITIZERS = ("thread", "undefined")
BOUNDS_MARK, BOUNDS_STATUS = "sl-out-of-bounds", 67     # a sanitizer build's report of a bounds check
# sanitizer -> (g++'s flags, its options variable, its report's mark)
_SANITIZER = {"thread": (["-fsanitize=thread"], "TSAN_OPTIONS", "ThreadSanitizer"),
              "undefined": (["-fsanitize=undefined,float-cast-overflow", "-fno-sanitize-recover=all"],
                            "UBSAN_OPTIONS", "runtime error:")}


def driver_source(m: KernelModule, bounds_check: bool = False) -> str:
    """The host side: sl_run(argv) launches every kernel in order; main() (with -DSL_MAIN)
    does the same on files, for sanitizer builds. With symbolic shapes argv ends with the
    call's geometry (int64s, see geometry()): what the sizes make of temporaries, grids and
    kernel size arguments. With bounds_check, argv ends with each argument's element count,
    each kernel gets checked pointers (checked_source()) and sl_bounds_error() says what
    went out of bounds."""
    index = {b: f"(({memory_type(b.dtype)}*)argv[{i}])" for i, b in enumerate(m.params)}
    extent = {b: f"sl_extents[{i}]" for i, b in enumerate(m.params)}
    lines = ['extern "C" void sl_run(void** argv) {']
    slot = iter(range(len(m.sizes), 1 << 30))
    if m.sizes:
        lines.append(f"  const long long* sl_geometry = (const long long*)argv[{len(m.params)}];")
    if bounds_check:
        lines.append(f"  const long long* sl_extents = (const long long*)argv[{len(m.params) + bool(m.sizes)}];")
        lines.append("  sl_shim::bounds_failed = false;")
    for t in m.temps:
        size = f"sl_geometry[{next(slot)}]" if m.sizes else t.size
        lines.append(f"  {memory_type(t.dtype)}* {_temp(t)} = new {memory_type(t.dtype)}[{size}]();")
        index[t], extent[t] = _temp(t), size
    if bounds_check:
        index = {b: f'sl_shim::checked<{memory_type(b.dtype)}>{{{p}, {extent[b]}, "{b.name}"}}'
                 for b, p in index.items()}
    for k in m.kernels:
        if m.sizes:
            grid, block = ([f"(unsigned)sl_geometry[{next(slot)}]" for _ in range(3)] for _ in range(2))
        else:
            grid, block = (list(map(str, dims)) for dims in launch_dims(k))
        args = ", ".join([index[b] for b in k.params] +
                         [f"({compute_type(v.dtype)})sl_geometry[{m.sizes.index(v)}]" for v in k.sizes])
        if bounds_check:
            lines.append(f'  sl_shim::kernel_name = "{k.name}";')
        lines.append(f"  sl_shim::launch(dim3{{{', '.join(grid)}}}, dim3{{{', '.join(block)}}}, "
                     f"[&] {{ {k.name}({args}); }});")
    lines += [f"  delete[] {_temp(t)};" for t in m.temps]
    lines.append("}")
    if bounds_check:
        lines += ['extern "C" const char* sl_bounds_error() {',
                  "  return sl_shim::bounds_failed ? sl_shim::bounds_message : nullptr;", "}"]
    # main: every argument a file, read whole and written back (the geometry too, unchanged)
    lines += ["#ifdef SL_MAIN", "#include <cstdio>", "#include <cstdlib>", "#include <vector>",
              "int main(int argc, char** argv) {",
              "  const int n = argc - 1;",
              "  std::vector<void*> bufs(n + 1);",
              "  std::vector<long> sizes(n);",
              "  for (int i = 0; i < n; ++i) {",
              "    FILE* f = fopen(argv[i + 1], \"rb\");",
              "    if (!f || fseek(f, 0, SEEK_END) != 0 || (sizes[i] = ftell(f)) < 0) return 2;",
              "    rewind(f);",
              "    bufs[i] = malloc(sizes[i] + 1);",
              "    if (fread(bufs[i], 1, sizes[i], f) != (size_t)sizes[i]) return 2;",
              "    fclose(f);",
              "  }",
              "  sl_run(bufs.data());",
              *([f'  if (sl_bounds_error()) {{ fprintf(stderr, "{BOUNDS_MARK}: %s\\n", sl_bounds_error()); '
                 f"return {BOUNDS_STATUS}; }}"] if bounds_check else []),
              "  for (int i = 0; i < n; ++i) {",
              "    FILE* f = fopen(argv[i + 1], \"wb\");",
              "    if (!f || fwrite(bufs[i], 1, sizes[i], f) != (size_t)sizes[i]) return 2;",
              "    fclose(f);",
              "  }",
              "  return 0;",
              "}", "#endif"]
    return "\n".join(lines) + "\n"


def checked_source(cuda_source: str) -> str:
    """The CUDA C with each kernel's pointer parameters, shared and local arrays used through
    sl_shim::checked pointers (a checked pointer is indexed and offset as the raw one is, so
    only the signatures and the declarations change)."""
    def params(m: re.Match) -> str:
        return re.sub(r"([\w ]+?)\* __restrict__ (\w+)", r"sl_shim::checked<\1> \2", m.group(0))

    def array(m: re.Match) -> str:
        indent, shared, align, ty, name, size = m.groups()
        if ty == "return":
            return m.group(0)
        scope = "shared" if shared else "local"
        return (f"{indent}{shared or ''}{align}{ty} {name}_sl_storage[{size}]; "
                f'sl_shim::checked<{ty}> {name}{{{name}_sl_storage, {size}, "{name}", "{scope}"}};')
    text = re.sub(r'^extern "C" __global__ void .*\) \{$', params, cuda_source, flags=re.MULTILINE)
    return re.sub(r"^(\s+)(__shared__ )?((?:__align__\(\d+\) )?)([\w ]+?) (\w+)\[(\d+)\];$", array, text,
                  flags=re.MULTILINE)


def extents(arrays) -> np.ndarray:
    """The element counts of a call's arrays (argv's tail in a bounds-checked build)."""
    return np.array([int(np.prod(getattr(x, "shape", ()))) for x in arrays], np.int64)


def geometry(m: KernelModule, sizes) -> np.ndarray:
    """The int64s a call of a module with symbolic shapes passes after its arrays: the size
    variables' values, each temporary's elements, each kernel's grid and block (x, y, z)."""
    values = [sizes[v] for v in m.sizes] + [evaluate_extent(t.size, sizes) for t in m.temps]
    for k in m.kernels:
        grid, block = launch_dims(k, sizes)
        values += [*grid, *block]
    return np.array(values, np.int64)


def _temp(b) -> str:
    return "sl_temp_" + "".join(c if c.isalnum() else "_" for c in b.name)


def _cache_dir() -> Path:
    return cache_dir("cuda-shim")


def _compiler() -> str:
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        raise RuntimeError("emulate(engine='shim') needs a C++20 compiler (g++ on PATH, or $CXX)")
    return cxx


def build(cuda_source: str, driver: str, sanitize: Optional[str]) -> Path:
    """The shared library (or, with a sanitizer, the executable) for a module; cached."""
    extra = ["-shared", "-fPIC"] if sanitize is None else \
        ["-g", *_SANITIZER[sanitize][0], "-DSL_MAIN"]
    text = cuda_source + "\n// ---- host driver ----\n" + driver
    header = (SHIM_DIR / "cuda_shim.h").read_text()
    key = hashlib.sha256("\0".join([text, header, " ".join(FLAGS + extra)]).encode()).hexdigest()[:24]
    folder = _cache_dir()
    out = folder / (key + (".so" if sanitize is None else ".exe"))
    if _usable(out):
        return out
    # Every file of the build is new and of its own name; the entry appears whole, by a rename.
    fd, src = tempfile.mkstemp(dir=folder, prefix=f"{key}.", suffix=".cu")
    with os.fdopen(fd, "w") as f:
        f.write(text)

    def compile_to(tmp: str) -> None:
        cxx = _compiler()
        pch = shim_pch.include_flags(cxx, CXXFLAGS + extra, SHIM_DIR, folder)

        def gxx(include: List[str]) -> subprocess.CompletedProcess:
            return subprocess.run([cxx, *FLAGS, *include, f"-I{SHIM_DIR}", *extra, src, "-o", tmp],
                                  capture_output=True, text=True)
        run = gxx(pch)
        if run.returncode != 0 and pch:      # the precompiled header's fault when the plain build passes
            run = gxx([])
            if run.returncode == 0:
                shim_pch.discard(pch)
        if run.returncode != 0:
            raise RuntimeError(f"g++ could not compile the CUDA C with the CPU shim ({src}):\n{run.stderr[-4000:]}")
    write_library(out, compile_to)
    os.unlink(src)
    if not _usable(out):
        raise RuntimeError(f"the CUDA shim's build {out} fails its checks (its checksum, or loading it) "
                           "right after it was written")
    return out


# path -> (file identity, its library or None for an executable): entries checked already
_CHECKED: Dict[str, tuple] = {}


def _usable(entry: Path) -> bool:
    """Whether a cache entry is whole (checksum) and, for a library, loads; a library is
    loaded from the bytes checked (target/sharedlib.py), never again from the path."""
    try:
        st = os.stat(entry)
    except OSError:
        return False
    ident = (st.st_ino, st.st_mtime_ns, st.st_size)
    if _CHECKED.get(str(entry), (None,))[0] == ident:
        return True
    try:
        data = entry.read_bytes()
        if checksum(data) is not True:
            return False
        lib = None
        if entry.suffix == ".so":
            check_library(data, str(entry))
            lib = load_bytes(data)
            lib.sl_run.argtypes = [ctypes.c_void_p]
            lib.sl_run.restype = None
    except (OSError, ValueError, AttributeError):
        return False
    _CHECKED[str(entry)] = (ident, lib)
    return True


def run_in_process(library: Path, pointers: List[int]) -> None:
    """Call the library's sl_run; IndexError when its bounds check found an access outside an array."""
    lib = _CHECKED[str(library)][1]          # build() checked and loaded it
    argv = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
    lib.sl_run(argv)
    check = getattr(lib, "sl_bounds_error", None)
    if check is not None:
        check.restype = ctypes.c_char_p
        message = check()
        if message:
            raise IndexError(message.decode(errors="replace"))


def run_sanitized(executable: Path, name: str, arrays: Sequence, is_output: Sequence[bool],
                  sanitize: str = "thread") -> None:
    """Run the sanitizer build on copies of the arrays; copy the outputs back; raise on a report."""
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, x in enumerate(arrays):
            p = os.path.join(d, f"arg{i}.bin")
            _as_numpy(x).tofile(p)
            paths.append(p)
        _, variable, mark = _SANITIZER[sanitize]
        env = dict(os.environ, **{variable: "halt_on_error=1 exitcode=66 report_signal_unsafe=0"})
        # Newer kernels randomise mmap more than TSan allows; setarch -R turns that off for the child.
        prefix = ["setarch", os.uname().machine, "-R"] if shutil.which("setarch") else []
        run = subprocess.run(prefix + [str(executable), *paths], capture_output=True, text=True, env=env)
        if run.returncode == BOUNDS_STATUS and BOUNDS_MARK in run.stderr:
            raise IndexError(run.stderr.split(BOUNDS_MARK + ": ", 1)[1].splitlines()[0])
        if sanitize == "undefined" and mark in run.stderr:
            raise RuntimeError(f"{name}: UndefinedBehaviorSanitizer found undefined behaviour in the CUDA C:\n"
                               f"{run.stderr.strip()[:6000]}")
        if mark in run.stderr:
            report = run.stderr.strip()
            kind = "a data race" if "data race" in report else "a ThreadSanitizer error"
            raise RuntimeError(f"{name}: ThreadSanitizer found {kind} between GPU threads of one block "
                               f"(a missing __syncthreads() or threads writing the same memory):\n{report[:6000]}")
        if run.returncode != 0:
            raise RuntimeError(f"{name}: the sanitizer build exited with status {run.returncode}:\n"
                               f"{run.stderr[-4000:]}")
        for i, (x, out) in enumerate(zip(arrays, is_output)):
            if out:
                data = np.fromfile(paths[i], dtype=_as_numpy(x).dtype).reshape(x.shape)
                _write_back(x, data)


def _as_numpy(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    import torch    # torch is optional: only torch arguments need it
    if x.dtype == torch.bfloat16:      # numpy has no bfloat16: pass its bits
        x = x.view(torch.int16)
    return x.detach().numpy()


def _write_back(x, data: np.ndarray) -> None:
    if isinstance(x, np.ndarray):
        x[...] = data
    else:
        import torch    # (as _as_numpy)
        x.copy_(torch.from_numpy(data).view(x.dtype))
