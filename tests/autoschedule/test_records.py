"""Tuning logs: the tuning curve, bad lines, a cut-short log, Ctrl-C during a search."""
import time

import pytest

import schedlang as sl
from tests import programs
from schedlang.autoschedule import records
from schedlang.autoschedule.measure import Measurer
from schedlang.autoschedule.search import SearchPolicy
from schedlang.autoschedule.task import SearchTask

from . import workers

QUICK = dict(number=1, repeat=1, policy=SearchPolicy(population=8, generations=1), final=0)


def gemm(n):
    return programs.gemm(n, n, n)[-1]


def _rec(task, i, median, error=None):
    times = [] if error else [median]
    return records.make_record(task.workload_key, str(task.target), {"version": 1, "steps": []}, f"h{i}",
                               times, error, task.flops)


@pytest.fixture
def two_workload_log(tmp_path):
    """A log of two GEMM workloads: 4 and 3 trials, one failed, interleaved."""
    a, b = SearchTask.from_outputs([gemm(8)]), SearchTask.from_outputs([gemm(12)])
    log = str(tmp_path / "two.jsonl")
    records.append(log, [_rec(a, 0, 4e-6), _rec(b, 1, 9e-6), _rec(a, 2, 2e-6), _rec(a, 3, 0, "TimeoutError: x"),
                         _rec(b, 4, 12e-6), _rec(a, 5, 3e-6), _rec(b, 6, 3e-6)])
    return log, a, b


def test_tuning_curves_keep_the_best_so_far(two_workload_log):
    log, a, b = two_workload_log
    curves = sl.autoschedule.tuning_curves(log)
    ga = lambda t: a.flops / t / 1e9          # noqa: E731
    gb = lambda t: b.flops / t / 1e9          # noqa: E731
    target = str(a.target)
    assert curves[(a.workload_key, target)] == pytest.approx([ga(4e-6), ga(2e-6), ga(2e-6), ga(2e-6)])
    assert curves[(b.workload_key, target)] == pytest.approx([gb(9e-6), gb(9e-6), gb(3e-6)])
    only_b = sl.autoschedule.tuning_curves(log, b.outputs)
    assert list(only_b) == [(b.workload_key, target)]


def test_plot_tuning_writes_a_png_with_a_curve_per_workload(two_workload_log, tmp_path):
    pytest.importorskip("matplotlib")
    log, a, b = two_workload_log
    png = tmp_path / "curve.png"
    fig = sl.plot_tuning(log, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2 and sorted(len(ln.get_xdata()) for ln in lines) == [3, 4]
    assert fig.axes[0].get_ylabel() == "best GFLOP/s"
    fig = sl.plot_tuning(log, str(tmp_path / "one.png"), outputs=a.outputs)
    assert len(fig.axes[0].get_lines()) == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="no tuning records"):
        sl.plot_tuning(str(empty), str(tmp_path / "x.png"))
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        sl.plot_tuning(str(tmp_path / "missing.jsonl"), str(tmp_path / "x.png"))


def test_plot_tuning_without_matplotlib_names_the_extra(two_workload_log, tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(ImportError, match=r"schedlang\[plot\]"):
        sl.plot_tuning(two_workload_log[0], str(tmp_path / "c.png"))


def test_each_bad_line_is_one_warning_and_a_cut_log_keeps_appending(two_workload_log):
    log, a, b = two_workload_log
    with open(log, "a") as f:
        f.write('{"tool": "another tuner", "version": 7}\n')        # foreign, well-formed JSON
        f.write('{"version": 1, "workload": "')                      # killed mid-write: no line break
    records.append(log, [_rec(a, 7, 1e-6)])
    with pytest.warns(UserWarning) as caught:
        recs = records.load(log)
    assert len(caught) == 2 and all("skipped" in str(w.message) for w in caught)
    assert [r["kernel_hash"] for r in recs] == [f"h{i}" for i in range(8)]     # nothing else lost
    with pytest.warns(UserWarning):
        assert records.ranked(records.load(log, a.workload_key))[0]["kernel_hash"] == "h7"


def test_ctrl_c_in_a_future_keeps_the_measured_records(tmp_path):
    log = str(tmp_path / "int.jsonl")
    with workers.InterruptAfter(3, in_future=True) as ex, pytest.raises(KeyboardInterrupt):
        sl.auto_schedule([gemm(8)], trials=6, log=log, executor=ex, seed=1, per_round=6, verbose=0, **QUICK)
    recs = records.load(log)
    assert len(recs) == 3 and all(r["error"] is None for r in recs)
    task = SearchTask.from_outputs([gemm(8)])
    s, _ = sl.apply_best(log, task)         # what was measured is usable
    assert sl.autoschedule.check_against_reference(task, s) is None


def test_ctrl_c_kills_the_measurers_own_workers():
    """What auto_schedule does on KeyboardInterrupt while a candidate runs: the measurement
    generator is closed (the queued candidates are cancelled) and the workers are killed."""
    m = Measurer(None, run_timeout=60, worker_fn=workers.fake)
    results = m.measure("{}", "llvm", ["ok", "hang", "ok"])
    assert next(results).error is None
    time.sleep(0.5)                        # the worker is in the hanging candidate's timed run
    procs = [slot.proc for slot in m.executor._slots if slot.proc is not None]
    assert procs and all(p.is_alive() for p in procs)
    start = time.monotonic()
    results.close()
    m.close(interrupted=True)
    for p in procs:
        # join() can return on the closed sentinel a moment before waitpid sees the
        # zombie (exitcode still None), so poll until the deadline.
        while p.exitcode is None and time.monotonic() - start < 5:
            p.join(0.05)
        assert p.exitcode is not None      # killed, not left running
    assert time.monotonic() - start < 5


def test_the_latest_final_comparison_ranks_first():
    """Times taken minutes apart drift: the best candidates timed again side by side (records
    marked final) decide, the latest such comparison first; final=False ranks by time alone."""
    def rec(h, median, **extra):
        return records.make_record("k" * 64, "llvm", {"version": 1, "steps": []}, h, [median], None, 10, **extra)
    recs = [rec("stale", 1e-3), rec("a", 2e-3), rec("b", 3e-3),
            rec("a", 5e-3, final=1.0), rec("b", 4e-3, final=1.0),       # an older comparison
            rec("b", 7e-3, final=2.0), rec("a", 6e-3, final=2.0)]
    assert [(r["kernel_hash"], r.get("final")) for r in records.ranked(recs)][:3] == [
        ("a", 2.0), ("b", 2.0), ("stale", None)]
    assert records.ranked(recs, final=False)[0]["kernel_hash"] == "stale"
