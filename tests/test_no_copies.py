"""The algorithms of schedlang.topi are written once: a scan of the tests, benchmarks, tutorials
and examples for the bodies of the GEMM, the softmax and SiluAndMul (and of TVM's argmax
reducer, kept in tests/programs.py) finds them only where a copy is the point (TVM ports by
changing the import, tutorial 1's first lesson, a worker script that must not import the
tests) or where other names are part of what is tested."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BODIES = {
    "gemm": re.compile(r"\w\[\w, k\] \* \w\[k, \w\], axis=k\)"),
    "softmax": re.compile(r"sl\.exp\(X\[i, j\] - \w+\[i\]\)"),
    "silu_and_mul": re.compile(r"sl\.sigmoid\(x\[i, j\]\) \* x\[i, j \+"),
}
# written once in tests/programs.py (not a compute line: a comm_reducer's combiner)
PROGRAM_BODIES = {"arg_reducer": re.compile(r"sl\.select\(\(?\w\[1\] [<>]= \w\[1\]\)?, \w\[0\], \w\[0\]\)"
                                             r"|^\s*\w+ = \w\[1\] [<>]= \w\[1\]$")}
ALLOWED = {
    "tests/tvm_ports/": "TVM's tests and tutorials, ported by changing the import",
    "tutorials/01_gemm_cpu.py": "the first lesson: writing a compute",
    "tests/autoschedule/test_worker_entry.py": "a script run in a fresh process",
    "tests/lowering/random_schedules.py": "its programs' names seed the schedule-invariance digests",
    "tests/tensor/test_serialize.py": "a softmax prefix whose names the test varies",
}


def copies(root=ROOT):
    for folder in ("tests", "benchmarks", "tutorials", "examples"):
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if any(rel.startswith(a) for a in ALLOWED) or rel == "tests/test_no_copies.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                for name, body in BODIES.items():
                    if "compute(" in line and body.search(line):
                        yield f"{rel}:{n}: a copy of topi.nn's {name}"
                for name, body in PROGRAM_BODIES.items():
                    if body.search(line):
                        yield f"{rel}:{n}: a copy of tests/programs.py's {name}"


def test_no_algorithm_is_written_twice():
    assert list(copies()) == []


def test_the_scan_finds_a_copy(tmp_path):
    """The scan is not vacuous: a GEMM written out in a test file is reported."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "C = sl.compute((8, 8), lambda i, j: sl.sum(A[i, k] * B[k, j], axis=k))\n")
    assert list(copies(tmp_path)) == ["tests/test_x.py:1: a copy of topi.nn's gemm"]
    (tmp_path / "tests" / "test_x.py").write_text("        lhs = sl.select((x[1] >= y[1]), x[0], y[0])\n")
    assert list(copies(tmp_path)) == ["tests/test_x.py:1: a copy of tests/programs.py's arg_reducer"]
