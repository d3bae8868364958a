"""Every tutorial script runs in quick mode (small shapes, few timing repeats) and checks its
own numbers: a wrong result, or a tutorial that no longer matches the API, fails here (06 to
10, the heaviest, with `-m slow`).

They run in this process, as `python tutorials/X.py --quick` would run them (runpy, with the
tutorials folder on sys.path and that command line in sys.argv): a process of its own for each
would spend seconds per tutorial importing torch and schedlang again (torch._dynamo alone is
5 s of CPU), and what is tested is the script, not the interpreter's start.
test_quick_mode_from_environment and 08's own second process start interpreters."""
import collections
import contextlib
import io
import os
import runpy
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from schedlang import build_cache

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9]*.py"))

# 08 teaches the on-disk kernel cache of a process: it counts the kernels it built and stored
# in its own new cache folder, and its second process must find them all there. It runs with
# an empty in-memory build cache (this process's is put back afterwards): modules that earlier
# tests built would answer its builds, and nothing would be stored.
COLD_BUILD_CACHE = {"08_models"}

# The five heaviest quick runs (a zoo of models compiled cold twice; a whole model tuned; a GEMM
# searched; CUDA GEMMs and tensor-core kernels compiled by NVRTC and emulated: 15-35 s of CPU each)
# run with `-m slow` (.ci/run's second pass). Their code paths keep fast tests in the default suite:
# tests/torch/test_zoo.py, test_model_cache.py and test_tune.py (08, 09),
# tests/autoschedule/test_autoschedule.py (06), tests/target/cuda/ (07), test_mma.py and
# tests/torch/test_attention_tensorcore.py (10); tutorials 01-05 run there as scripts.
SLOW = {"06_autoschedule", "07_cuda_gemm", "08_models", "09_tune_model", "10_tensor_cores"}


def test_tutorials_found():
    assert TUTORIALS, "no tutorials/[0-9]*.py scripts found"
    assert COLD_BUILD_CACHE | SLOW <= {p.stem for p in TUTORIALS}


def _run_here(script, monkeypatch):
    """(exit status, output) of the script run in this process as __main__ with `--quick`; the
    environment, sys.path, the build cache and the tutorials' shared module are restored afterwards."""
    monkeypatch.delenv("SCHEDLANG_TUTORIAL_QUICK", raising=False)     # the --quick flag alone must do it
    if script.stem in COLD_BUILD_CACHE:
        monkeypatch.setattr(build_cache, "_modules", collections.OrderedDict())
        monkeypatch.setattr(build_cache, "_alive", weakref.WeakValueDictionary())
    monkeypatch.setattr(sys, "argv", [str(script), "--quick"])
    monkeypatch.syspath_prepend(str(script.parent))                    # as python puts a script's folder first
    monkeypatch.chdir(ROOT)
    monkeypatch.delitem(sys.modules, "_common", raising=False)
    out, status, environ = io.StringIO(), 0, dict(os.environ)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
    except Exception as e:        # an assertion of the tutorial: its output, then the traceback
        raise AssertionError(f"{script.name} --quick failed; its output ends:\n"
                             + "\n".join(out.getvalue().splitlines()[-40:])) from e
    finally:
        sys.modules.pop("_common", None)
        os.environ.clear()                 # a script's own settings stay with it
        os.environ.update(environ)
    return status, out.getvalue()


@pytest.mark.parametrize("script", [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in SLOW else [])
                                    for p in TUTORIALS])
def test_tutorial_runs_in_quick_mode(script, monkeypatch):
    status, output = _run_here(script, monkeypatch)
    tail = "\n".join(output.splitlines()[-40:])
    assert status == 0, f"{script.name} --quick exited with {status}; its output ends:\n{tail}"
    assert "quick mode" in output, f"{script.name} did not switch to quick mode:\n{tail}"


def test_quick_mode_from_environment():
    """SCHEDLANG_TUTORIAL_QUICK=1 turns quick mode on without the flag."""
    env = dict(os.environ, SCHEDLANG_TUTORIAL_QUICK="1")
    code = "import sys; sys.argv = ['x']; from _common import parse_args; print(parse_args('doc').quick)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "tutorials", env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "True"
