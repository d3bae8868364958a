"""Every tutorial script runs in quick mode (small shapes, few timing repeats) and checks its
own numbers: a wrong result, or a tutorial that no longer matches the API, fails here.

Most run in this process, as `python tutorials/X.py --quick` would run them (runpy, with the
tutorials folder on sys.path and that command line in sys.argv): a process of its own for each
would spend seconds per tutorial importing torch and schedlang again, and what is tested is the
script, not the interpreter's start. The tutorials in FRESH_PROCESS run as a command, as before."""
import contextlib
import io
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9]*.py"))

# 08 teaches the on-disk kernel cache of a process: it counts the kernels this process built
# and stored (a build cache warmed by earlier tests would answer them instead), and sets
# SCHEDLANG_CACHE_DIR and SCHEDLANG_KERNEL_CACHE for the rest of the process.
FRESH_PROCESS = {"08_models"}


def test_tutorials_found():
    assert TUTORIALS, "no tutorials/[0-9]*.py scripts found"
    assert FRESH_PROCESS <= {p.stem for p in TUTORIALS}


def _run_as_command(script):
    """(exit status, output) of `python tutorials/X.py --quick` in a new process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("SCHEDLANG_TUTORIAL_QUICK", None)            # the --quick flag alone must do it
    proc = subprocess.run([sys.executable, str(script.relative_to(ROOT)), "--quick"], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)   # a hang guard: ~20 s alone, several times that on a loaded machine
    return proc.returncode, proc.stdout


def _run_here(script, monkeypatch):
    """(exit status, output) of the script run in this process as __main__ with `--quick`; the
    environment, sys.path and the tutorials' shared module are restored afterwards."""
    monkeypatch.delenv("SCHEDLANG_TUTORIAL_QUICK", raising=False)     # the --quick flag alone must do it
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


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_in_quick_mode(script, monkeypatch):
    if script.stem in FRESH_PROCESS:
        status, output = _run_as_command(script)
    else:
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
