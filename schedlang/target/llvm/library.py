"""export_library: a built CPU module as a shared library, with what a loader needs to
check arguments stored inside it.

The library links the module's code, which is the object the JIT compiled (several objects
for a split module: orc.py; position-independent: jit.target_machine), so exporting generates
no code again; and a small object of what only the library has: one constant,
`schedlang_module_info`, a NUL-terminated JSON record of the entry symbol, the parameters
(name, shape, dtype, output or not), the target options, the buffer names that bounds-check
reports refer to, the size variables and checks of symbolic shapes, and the extern calls (by
registered name) the code makes; the library's own fork flag; the hook of extern calls. The objects are linked
into a shared library with the system C compiler; a module with parallel loops links
the same libgomp the JIT uses. The file ends with a checksum that load_module verifies
before loading, and it is replaced atomically (a reader sees the old file or the new one).
"""
from __future__ import annotations

import dataclasses
import json
import re
import os
import shutil
import subprocess
import tempfile

from ...expr.extent import extent_to_json
from ..elf import write_library
from .codegen import function_symbol
from .forksafe import SERIAL_FLAG
from .jit import emit_shared_object_code
from .packed import SYMBOL, descriptor

INFO_SYMBOL = "schedlang_module_info"
PACKED_HOOK = "schedlang_packed_hook"     # the loader's callback for extern calls
FORMAT = "schedlang-llvm-module"
VERSION = 3      # 3: the file ends with a checksum (target/elf.py); 2: symbolic shapes; 1 and 2 are read too


def module_info(mod) -> dict:
    """The record a loader needs to call the module as the built one is called. With
    symbolic shapes, extents are JSON expressions over numbered size variables, and
    "sizes" holds what the call's size binding and checks need (target/shapes.py)."""
    var_ids: dict = {}
    sizes = mod._sizes.to_json(var_ids) if mod._sizes is not None else None
    params = [{"name": b.name, "shape": [extent_to_json(n, var_ids) for n in b.shape], "dtype": str(b.dtype),
               "output": out} for b, out in zip(mod.params, mod._is_output)]
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": mod.name,
        "entry": function_symbol(mod.name),
        "params": params,
        "options": dataclasses.asdict(mod.target.options),
        "buffer_names": list(mod._buffer_names),
        "openmp": mod.parallel_runtime is not None,
        "size_vars": [{"name": v.name, "dtype": str(v.dtype), "nonnegative": v.nonnegative} for v in var_ids],
        "sizes": sizes,
        **({"kernels": list(mod.kernel_names)} if mod.target.profile else {}),
    }


def _packed_calls(mod, text: str):
    """Extern calls (sl.extern / call_packed) reach a Python function registered by name.
    In the library, sl_call_packed calls through the pointer PACKED_HOOK, which the loader
    sets to a callback of its process; the call ids of this process are saved with the
    function name and argument layout each stands for, so that the loading process looks
    the function up by name (sl.register_func there) when the call happens. None when the
    code (text: its optimised LLVM IR) calls no extern function."""
    if not re.search(rf"^declare void @{SYMBOL}\(i64, ptr\)", text, re.MULTILINE):
        return None
    calls = {}
    for call_id in sorted({int(m) for m in re.findall(rf"@{SYMBOL}\(i64 (\d+),", mod.ir["llvm"])}):
        func, specs = descriptor(call_id)
        if any(spec[0] == "buffer" and not all(isinstance(n, int) for n in spec[1]) for spec in specs):
            raise ValueError(f"{mod.name} passes a buffer of symbolic shape to the registered function '{func}'; "
                             "export_library saves extern calls on static shapes only")
        calls[str(call_id)] = [func, [list(spec) for spec in specs]]
    return calls


def _library_globals(text: str, info: dict, packed_calls) -> str:
    """LLVM IR of what the library defines beside the module's code (text: its optimised
    LLVM IR, whose triple and data layout it takes): the module record, the fork flag
    (forksafe.py: the process's is not there at load time) and the extern-call hook."""
    head = [line for line in text.splitlines()[:8] if line.startswith(("target triple", "target datalayout"))]
    out = head + [_llvm_string_constant(INFO_SYMBOL, json.dumps(info))]
    if re.search(rf"^@{re.escape(SERIAL_FLAG)} = external ", text, re.MULTILINE):
        out.append(f"@{SERIAL_FLAG} = global i32 0")
    if packed_calls is not None:
        out += [f"@{PACKED_HOOK} = global ptr null",
                f"define void @{SYMBOL}(i64 %id, ptr %argv) {{",
                f"  %f = load ptr, ptr @{PACKED_HOOK}",
                "  call void %f(i64 %id, ptr %argv)",
                "  ret void\n}"]
    return "\n".join(out) + "\n"


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
    text = mod.ir["llvm.opt"]
    info = module_info(mod)
    packed_calls = _packed_calls(mod, text)
    if packed_calls:
        info["packed"] = packed_calls
    cpu, features = mod.target.cpu, mod.target.features
    codes = list(getattr(mod._compiled, "objects", None) or [mod._compiled.object])   # several: orc.py
    if None in codes:            # llvmlite kept the JIT's object to itself: compile the text again
        codes = [emit_shared_object_code(text, cpu, features)]
    objects = {f"module{i}.o": code for i, code in enumerate(codes)}
    objects["globals.o"] = emit_shared_object_code(_library_globals(text, info, packed_calls), cpu, features)
    with tempfile.TemporaryDirectory(prefix="schedlang-export-") as tmp:
        paths = []
        for name, data in objects.items():
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "wb") as f:
                f.write(data)

        def link(linked: str) -> None:
            # -Bsymbolic: the module's own calls (bounds-check reports) bind inside the library.
            cmd = [_compiler(), "-shared", "-o", linked, *paths, "-Wl,-Bsymbolic"]
            cmd += _link_openmp(mod.parallel_runtime)
            cmd += ["-lm"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"linking {path} failed ({' '.join(cmd)}):\n{done.stderr.strip()}")
        write_library(path, link)
