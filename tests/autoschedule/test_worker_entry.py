"""Measurement workers never import the user's main script (issue 15, item 16): a search
script written as TVM's tutorials are, without `if __name__ == "__main__":`, runs once."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from schedlang.autoschedule.executor import LocalExecutor, WorkerError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import schedlang as sl
    print("body ran", flush=True)
    A = sl.placeholder((16, 16), name="A")
    B = sl.placeholder((16, 16), name="B")
    k = sl.reduce_axis((0, 16), name="k")
    C = sl.compute((16, 16), lambda i, j: sl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s, args = sl.auto_schedule([C], trials=2, per_round=2, log=LOG, seed=0, number=1, repeat=1, final=0,
                               policy=sl.autoschedule.SearchPolicy(population=4, generations=0))
    print("searched", len(s.steps), flush=True)
""")


def test_a_script_without_a_main_guard_searches_once(tmp_path):
    log = tmp_path / "r.jsonl"
    script = tmp_path / "tune_gemm.py"
    script.write_text(f"LOG = {str(log)!r}\n" + SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("body ran") == 1, out.stdout
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(recs) == 2, recs
    assert any(r["error"] is None and r["median_s"] > 0 for r in recs), [r["error"] for r in recs]
    assert "no candidate ran" not in out.stderr


def _in_main():
    return 1


def test_a_function_of_the_main_script_is_refused_with_a_hint():
    _in_main.__module__ = "__main__"          # as if defined in the script run as __main__
    ex = LocalExecutor(1)
    try:
        with pytest.raises(WorkerError, match="define functions .* in a module"):
            ex.submit(_in_main).result(timeout=60)
    finally:
        ex.shutdown()
