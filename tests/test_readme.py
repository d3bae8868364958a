"""Every ```python block of README.md runs as written, in a fresh interpreter.

A block is self-contained unless its first line is a comment that says `continues`
(`# continues the block above`): it then runs after the blocks it continues, in the same
interpreter, and such a chain of blocks runs once. A block whose first line says
`needs a GPU` (and every block continuing it) runs only where a GPU is found. Blocks that
import torch or build for `target="cuda"` (NVRTC, no GPU) skip when those optional packages
are missing, as the rest of the suite does."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _first_line(code: str) -> str:
    return code.lstrip().splitlines()[0] if code.strip() else ""


def readme_chains():
    """The python blocks of README.md as chains [(line number, source, needs a GPU), ...]:
    a block that says it continues joins the chain before it."""
    text = README.read_text()
    chains = []
    for match in FENCE.finditer(text):
        code = match.group(1)
        line = text.count("\n", 0, match.start()) + 2
        first = _first_line(code)
        gpu = first.startswith("#") and "needs a GPU" in first
        if first.startswith("#") and "continues" in first:
            assert chains, f"README.md line {line}: the first python block cannot continue another"
            chains[-1].append((line, code, gpu or chains[-1][-1][2]))
        else:
            chains.append([(line, code, gpu)])
    return chains


CHAINS = readme_chains()
# One test per chain, for its blocks up to the first that needs a GPU ...
CPU_PROGRAMS = [[b for b in chain if not b[2]] for chain in CHAINS if not chain[0][2]]
# ... and one per block that needs a GPU, with everything it continues.
GPU_PROGRAMS = [chain[:i + 1] for chain in CHAINS for i, b in enumerate(chain) if b[2]]


def test_readme_has_python_blocks():
    assert len(CPU_PROGRAMS) >= 4, "README.md lost its python blocks (or the fence changed)"


def _missing_package(code):
    if "import torch" in code and importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    if '"cuda"' in code and importlib.util.find_spec("cuda") is None:
        return "cuda-python (NVRTC) is not installed"
    return None


def run_blocks(blocks):
    code = "\n".join(c for _, c, _ in blocks)
    reason = _missing_package(code)
    if reason:
        pytest.skip(reason)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    tail = "\n".join(proc.stdout.splitlines()[-30:])
    lines = ", ".join(str(line) for line, _, _ in blocks)
    assert proc.returncode == 0, f"the python blocks at README.md lines {lines} failed; the output ends:\n{tail}"


@pytest.mark.parametrize("blocks", CPU_PROGRAMS, ids=[f"line{p[0][0]}" for p in CPU_PROGRAMS])
def test_readme_blocks_run(blocks):
    run_blocks(blocks)


@pytest.mark.gpu
@pytest.mark.parametrize("blocks", GPU_PROGRAMS, ids=[f"line{p[-1][0]}" for p in GPU_PROGRAMS])
def test_readme_gpu_blocks_run(blocks):
    from schedlang.target.cuda.gpu import gpu_problem
    if gpu_problem() is not None:
        pytest.skip(f"no GPU: {gpu_problem()}")
    run_blocks(blocks)


@pytest.mark.parametrize("doc", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_docs_python_blocks_are_valid_python(doc):
    """The docs' python blocks (a tuning run is too long to execute here) at least parse."""
    for match in FENCE.finditer(doc.read_text()):
        compile(match.group(1), f"{doc.name} block", "exec")
