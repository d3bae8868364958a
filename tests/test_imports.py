"""`import schedlang` and `import schedlang.cli` stay light: the heavy dependencies (torch,
llvmlite, the auto-scheduler's lightgbm/dask, CUDA's bindings) are imported by the code that
uses them, when it runs (function-local imports, each saying so). Checked in a fresh process.

A function-local import is for such a lazy load only, not to dodge an import cycle (move the
shared piece to a module both sides can import instead): test_no_new_cycle_dodging_local_import
scans schedlang/ for them against LAZY and the few cycles that remain (KEPT_CYCLES)."""
import ast
import functools
import json
import pathlib
import subprocess
import sys

HEAVY = ("torch", "llvmlite", "ml_dtypes", "lightgbm", "dask", "numba", "cuda", "sklearn", "matplotlib", "onnxruntime",
         "schedlang.torch", "schedlang.target.llvm", "schedlang.target.cuda", "schedlang.target.c")

ROOT = pathlib.Path(__file__).resolve().parent.parent / "schedlang"

# Modules a function may import when it runs: heavy optional packages, the modules that load
# llvmlite or CUDA, the CUDA emulator, and the frontend (whose modules may import torch).
LAZY = ("torch", "llvmlite", "ml_dtypes", "lightgbm", "dask", "distributed", "numba", "cuda", "matplotlib", "tqdm",
        "schedlang.torch", "schedlang.target.llvm.jit", "schedlang.target.llvm.cpus",
        "schedlang.target.llvm.cached", "schedlang.target.cuda.gpu", "schedlang.target.simt",
        "schedlang.autoschedule.dask_measure",
        "schedlang.target.cuda.intrin")     # the CUDA intrinsic library (sl.call_intrin, topi's tensor cores)
# A backend's accessors (sketch rules, measurement, features) load the auto-scheduler when asked.
LAZY_FROM_TARGETS = ("schedlang.autoschedule",)

# (file, module): the cycles that remain, each for a reason given where it is imported.
KEPT_CYCLES = {
    ("expr/nodes.py", "schedlang.expr.printer"),            # a node's __str__ and its printer
    ("loop/nodes.py", "schedlang.loop.printer"),
    ("kernel/nodes.py", "schedlang.kernel.printer"),
    ("target/target.py", "schedlang.target.registry"),      # Target.create asks the backends, which take Targets
    ("tensor/axis.py", "schedlang.tensor.op"),              # symbolic_extent rejects TensorRead, built on axes
    ("autoschedule/task.py", "schedlang.autoschedule.api"),  # SearchTask's TVM methods call the entry
    ("autoschedule/task.py", "schedlang.autoschedule.search"),      # points that take a SearchTask
    ("autoschedule/task.py", "schedlang.autoschedule.tvm_names"),
    ("autoschedule/worker.py", "schedlang.autoschedule.executor"),  # a worker's entry: see its docstring
    ("target/cuda/intrin/__init__.py", "schedlang.target.cuda.intrin.copy"),   # each registers its functions
    ("target/cuda/intrin/__init__.py", "schedlang.target.cuda.intrin.dp4a"),   # in the library on first use
    ("target/cuda/intrin/__init__.py", "schedlang.target.cuda.intrin.mma"),
}


def test_import_schedlang_and_its_cli_loads_no_heavy_dependency():
    code = ("import json, sys; import schedlang, schedlang.cli; "
            f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_bfloat16_in_a_process_that_never_imported_ml_dtypes():
    """bfloat16 works where nothing imported ml_dtypes first (schedlang loads it when a
    bfloat16 value is first needed: dtypes.numpy_bfloat16): a kernel rounding to bfloat16,
    its output allocated from sl.dtype("bfloat16").numpy, and numpy then knows the name."""
    code = """if True:
        import sys
        import numpy as np
        import schedlang as sl
        assert "ml_dtypes" not in sys.modules
        A = sl.placeholder((5,), name="A")
        B = sl.compute((5,), lambda i: A[i].astype("bfloat16"), name="B")
        f = sl.build(sl.create_schedule(B.op), [A, B], target="llvm")
        a = np.array([0.5, 1.0, 1 + 2**-9, 3.0, -2.0], dtype=np.float32)
        b = np.zeros(5, dtype=sl.dtype("bfloat16").numpy)
        f(a, b)
        print(b.astype(np.float32).tolist(), np.dtype("bfloat16").itemsize)
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[0.5,", "1.0,", "1.0,", "3.0,", "-2.0]", "2"]


def _local_imports(path: pathlib.Path):
    """(module, line) of each import below module level (an `if TYPE_CHECKING:` block at module
    level counts as module level), relative imports resolved."""
    package = ["schedlang", *path.relative_to(ROOT).parent.parts]
    tree = ast.parse(path.read_text())
    top = {id(n) for node in tree.body for n in ast.walk(node) if node is n or isinstance(node, ast.If)}
    for node in ast.walk(tree):
        if id(node) in top:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            if node.module:
                yield ".".join(base + [node.module]), node.lineno
            else:
                for alias in node.names:
                    yield ".".join(base + [alias.name]), node.lineno


@functools.cache
def _every_local_import() -> tuple:
    """(file under schedlang/, module, line) of every local import: the package scanned once a
    process (the two tests below read the same scan: about 1.8 s of CPU)."""
    return tuple((path.relative_to(ROOT).as_posix(), module, line)
                 for path in sorted(ROOT.rglob("*.py")) for module, line in _local_imports(path))


def _is_under(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_no_new_cycle_dodging_local_import():
    found = []
    for rel, module, line in _every_local_import():
        if rel.startswith("torch/"):      # the frontend: torch is its own lazy dependency throughout
            continue
        lazy = _is_under(module, LAZY) or (rel.startswith("target/") and _is_under(module, LAZY_FROM_TARGETS))
        if not lazy and (rel, module) not in KEPT_CYCLES:
            found.append(f"schedlang/{rel}:{line}: imports {module} inside a function")
    assert not found, ("function-local imports that are not lazy loads of a heavy dependency; import at module "
                       "level (move what both sides need to a module they can both import):\n" + "\n".join(found))


def test_the_scan_sees_local_imports():
    """The scan itself: it finds the imports KEPT_CYCLES names (a scan that found nothing would pass)."""
    seen = {(rel, module) for rel, module, _ in _every_local_import()}
    assert KEPT_CYCLES <= seen
