"""Every tutorial script runs in quick mode (small shapes, few timing repeats) and checks its
own numbers: a wrong result, or a tutorial that no longer matches the API, fails here."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9]*.py"))


def test_tutorials_found():
    assert TUTORIALS, "no tutorials/[0-9]*.py scripts found"


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_in_quick_mode(script):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("SCHEDLANG_TUTORIAL_QUICK", None)            # the --quick flag alone must do it
    proc = subprocess.run([sys.executable, str(script.relative_to(ROOT)), "--quick"], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)   # a hang guard: ~20 s alone, several times that on a loaded machine
    tail = "\n".join(proc.stdout.splitlines()[-40:])
    assert proc.returncode == 0, f"{script.name} --quick exited with {proc.returncode}; its output ends:\n{tail}"
    assert "quick mode" in proc.stdout, f"{script.name} did not switch to quick mode:\n{tail}"


def test_quick_mode_from_environment():
    """SCHEDLANG_TUTORIAL_QUICK=1 turns quick mode on without the flag."""
    env = dict(os.environ, SCHEDLANG_TUTORIAL_QUICK="1")
    code = "import sys; sys.argv = ['x']; from _common import parse_args; print(parse_args('doc').quick)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "tutorials", env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "True"
