"""`import schedlang` and `import schedlang.cli` stay light: the heavy dependencies (torch,
llvmlite, the auto-scheduler's lightgbm/dask, CUDA's bindings) are imported by the code that
uses them, when it runs (function-local imports, each saying so). Checked in a fresh process."""
import json
import subprocess
import sys

HEAVY = ("torch", "llvmlite", "lightgbm", "dask", "numba", "cuda", "sklearn", "matplotlib", "onnxruntime",
         "schedlang.torch", "schedlang.target.llvm", "schedlang.target.cuda", "schedlang.target.c")


def test_import_schedlang_and_its_cli_loads_no_heavy_dependency():
    code = ("import json, sys; import schedlang, schedlang.cli; "
            f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
