"""export_library: a built CPU module as a shared library, with what a loader needs to
check arguments stored inside it.

The optimised LLVM IR (stage "llvm.opt") is compiled again as position-independent
object code, plus one constant, `schedlang_module_info`: a NUL-terminated JSON record
of the entry symbol, the parameters (name, shape, dtype, output or not), the target
options and the buffer names that bounds-check reports refer to. The object is linked
into a shared library with the system C compiler; a module with parallel loops links
the same libgomp the JIT uses.
"""
from __future__ import annotations

import dataclasses
import json
import re
import os
import shutil
import subprocess
import tempfile

from .codegen import symbol
from .forksafe import SERIAL_FLAG
from .jit import emit_shared_object_code

INFO_SYMBOL = "schedlang_module_info"
FORMAT = "schedlang-llvm-module"
VERSION = 1


def module_info(mod) -> dict:
    """The record a loader needs to call the module as the built one is called."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": mod.name,
        "entry": symbol(mod.name),
        "params": [{"name": b.name, "shape": list(b.shape), "dtype": str(b.dtype), "output": out}
                   for b, out in zip(mod.params, mod._is_output)],
        "options": dataclasses.asdict(mod.target.options),
        "buffer_names": list(mod._buffer_names),
        "openmp": mod.parallel_runtime is not None,
    }


def _llvm_string_constant(name: str, text: str) -> str:
    data = text.encode("utf-8") + b"\0"
    body = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}" for c in data)
    return f'@{name} = constant [{len(data)} x i8] c"{body}", align 1\n'


def _compiler() -> str:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise RuntimeError("export_library links with the system C compiler, but none was found (set CC, or install cc)")


def _link_openmp(runtime) -> list:
    """Linker arguments for the libgomp the JIT loaded: a path (with an rpath to find it
    again), or a name the dynamic loader found on its own search path."""
    if runtime is None:
        return []
    if os.path.isabs(runtime):
        return [runtime, f"-Wl,-rpath,{os.path.dirname(runtime)}"]
    return [f"-l:{runtime}"]


def export_library(mod, path: str) -> None:
    """Write `mod` (an LLVMModule) as the shared library `path` (e.g. "f.so")."""
    if mod._sizes is not None:
        raise ValueError(f"{mod.name} has symbolic shapes; export_library writes modules of static shapes only "
                         "for now (build with concrete extents to export)")
    from .packed import SYMBOL as PACKED_SYMBOL
    if f"@{PACKED_SYMBOL}" in mod.ir["llvm.opt"]:
        # the callee is a Python function registered in this process, reached by a ctypes callback
        raise ValueError(f"{mod.name} calls registered Python functions (sl.extern / call_packed); export_library "
                         "cannot save those, so such modules are not exportable for now")
    # The library defines its own fork flag (forksafe.py): the process's is not there at load time.
    text = re.sub(rf"@{re.escape(SERIAL_FLAG)} = external (local_unnamed_addr )?global i32",
                  f"@{SERIAL_FLAG} = global i32 0", mod.ir["llvm.opt"])
    text += _llvm_string_constant(INFO_SYMBOL, json.dumps(module_info(mod)))
    obj = emit_shared_object_code(text, mod.target.cpu, mod.target.features)
    with tempfile.TemporaryDirectory(prefix="schedlang-export-") as tmp:
        obj_path = os.path.join(tmp, "module.o")
        with open(obj_path, "wb") as f:
            f.write(obj)
        # -Bsymbolic: the module's own calls (bounds-check reports) bind inside the library.
        cmd = [_compiler(), "-shared", "-o", os.path.abspath(path), obj_path, "-Wl,-Bsymbolic"]
        cmd += _link_openmp(mod.parallel_runtime)
        cmd += ["-lm"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"linking {path} failed ({' '.join(cmd)}):\n{done.stderr.strip()}")
