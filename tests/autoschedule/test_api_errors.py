"""The auto-scheduler refuses bad arguments at the call, before any work (issue 15, item 11),
reports its progress where stderr is not a terminal and explains its times (item 13)."""
import json
import os
import warnings

import pytest

import schedlang as sl
from tests import programs
from schedlang.autoschedule import records
from schedlang.autoschedule.progress import Progress
from schedlang.autoschedule.search import SearchPolicy
from schedlang.autoschedule.task import SearchTask


def gemm(n=8):
    return programs.gemm(n, n, n)[-1]


@pytest.mark.parametrize("kw, error, words", [
    (dict(trials=True), TypeError, "trials must be an integer, got True"),
    (dict(trials=2.0), TypeError, "trials must be an integer"),
    (dict(trials="8"), TypeError, "trials must be an integer"),
    (dict(trials=-1), ValueError, "trials must be an integer >= 0"),
    (dict(per_round=0), ValueError, "per_round"),
    (dict(repeat=False), TypeError, "repeat"),
    (dict(final="all"), TypeError, "final"),
    (dict(timeout=True), ValueError, "timeout"),
    (dict(target="cuda"), ValueError, "contradicts the SearchTask's target"),
    (dict(executor="local"), TypeError, "executor must be"),
    (dict(policy={"population": 4}), TypeError, "policy must be a SearchPolicy"),
])
def test_bad_arguments_are_refused_at_the_call(tmp_path, kw, error, words):
    task = SearchTask.from_outputs([gemm()])
    log = tmp_path / "r.jsonl"
    with pytest.raises(error, match=words):
        sl.auto_schedule(task, **dict(dict(trials=1, log=str(log)), **kw))
    assert not log.exists()


def test_an_unwritable_log_is_refused_before_any_work(tmp_path):
    C = gemm()
    with pytest.raises(FileNotFoundError, match="no directory"):
        sl.auto_schedule([C], trials=1, log=str(tmp_path / "nope" / "r.jsonl"))
    with pytest.raises(IsADirectoryError, match="is a directory"):
        sl.auto_schedule([C], trials=1, log=str(tmp_path))
    if os.geteuid() != 0:          # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(PermissionError, match="permission denied"):
            sl.auto_schedule([C], trials=1, log=str(locked / "r.jsonl"))


def test_a_missing_log_is_file_not_found_and_a_contradicting_target_an_error(tmp_path):
    task = SearchTask.from_outputs([gemm()])
    missing = str(tmp_path / "missing.jsonl")
    for read in (sl.apply_best, sl.print_best):
        with pytest.raises(FileNotFoundError, match="missing.jsonl"):
            read(missing, task)
        with pytest.raises(ValueError, match="contradicts"):
            read(missing, task, target="cuda")
    with pytest.raises(FileNotFoundError):
        sl.autoschedule.tuning_curves(missing)


def test_trials_0_reads_the_log_without_warning(tmp_path):
    C = gemm()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s, args = sl.auto_schedule([C], trials=0, log=str(tmp_path / "r.jsonl"))
    assert s.steps == [] and [t.name for t in args] == ["A", "B", "C"]


def _rec(task, hash_, median, **extra):
    return records.make_record(task.workload_key, str(task.target), {"version": 1, "steps": []}, hash_,
                               [median], None, task.flops, **extra)


def test_print_best_explains_a_final_comparison_that_differs(tmp_path):
    task = SearchTask.from_outputs([gemm()])
    log = str(tmp_path / "r.jsonl")
    records.append(log, [_rec(task, "a", 5e-6), _rec(task, "b", 2e-6),
                         _rec(task, "a", 3e-6, final=1.0), _rec(task, "b", 4e-6, final=1.0)])
    text = sl.print_best(log, task, file=open(os.devnull, "w"))
    assert "3 us per call" in text
    assert "the search first measured it at 5 us" in text
    assert "fastest first measurement (2 us) was another candidate's" in text
    only_search = str(tmp_path / "plain.jsonl")
    records.append(only_search, [_rec(task, "a", 5e-6), _rec(task, "b", 2e-6)])
    assert "first measured" not in sl.print_best(only_search, task, file=open(os.devnull, "w"))


class _Pipe:
    """A stream that is not a terminal (a notebook, CI log or `| tee`)."""

    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass

    def isatty(self):
        return False


def test_progress_is_a_line_per_round_where_stderr_is_no_terminal():
    out = _Pipe()
    p = Progress(4, verbose=1, stream=out)
    for i, t in enumerate((3e-6, 1e-6)):
        p.update({"error": None, "median_s": t, "gflops": 10.0 * (i + 1), "load": [0.0, 0, 0]})
    p.round()
    p.update({"error": "TimeoutError: x", "median_s": None, "gflops": None, "load": None})
    p.round()
    lines = out.text.splitlines()
    assert lines[0].startswith("auto_schedule: 2/4 trials, best 20 GFLOP/s (1 us), ")
    assert lines[1].startswith("auto_schedule: 3/4 trials, best 20 GFLOP/s (1 us), ")
    quiet = _Pipe()
    Progress(4, verbose=0, stream=quiet).round()
    assert quiet.text == ""


def test_a_load_above_the_core_count_warns_once():
    p = Progress(4, verbose=1, stream=_Pipe())
    with pytest.warns(UserWarning, match="load average was .* cores") as caught:
        for _ in range(3):
            p.update({"error": None, "median_s": 1e-6, "gflops": 1.0, "load": [os.cpu_count() + 5.0, 0, 0]})
    assert len(caught) == 1


def test_a_search_reports_its_rounds_and_the_final_comparison(tmp_path, capsys):
    C = gemm(16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # a loaded test machine
        sl.auto_schedule([C], trials=2, per_round=1, log=str(tmp_path / "r.jsonl"), seed=0, number=1, repeat=1,
                         final=2, policy=SearchPolicy(population=4, generations=0))
    err = capsys.readouterr().err
    assert "auto_schedule: 1/2 trials" in err and "auto_schedule: 2/2 trials" in err, err
    assert "timing the 2 fastest candidates again side by side" in err, err
    assert "final comparison: the winner takes" in err, err


def test_a_log_that_is_not_a_path_is_a_type_error_naming_the_caller(tmp_path):
    task = SearchTask.from_outputs([gemm()])
    with pytest.raises(TypeError, match="auto_schedule: log must be a file path, got 3"):
        sl.auto_schedule(task, trials=1, log=3)
    for read, caller in ((sl.apply_best, "apply_best"), (sl.print_best, "print_best")):
        with pytest.raises(TypeError, match=f"{caller}: log must be a file path, got None"):
            read(None, task)
    with pytest.raises(TypeError, match="RecordToFile: filename must be a file path"):
        sl.auto_scheduler.RecordToFile(b"r.json")
    with pytest.raises(TypeError, match="load_records: log must be a file path"):
        sl.auto_scheduler.load_records(3)
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):      # a PathLike is a path
        sl.apply_best(tmp_path / "missing.jsonl", task)


class _SideBySide:
    """A measurer that times each candidate by its steps (the JSON text): `speeds` maps a
    candidate's first step's stage name to its time taken side by side."""

    def __init__(self, speeds):
        self.speeds, self.timed = speeds, []

    def measure(self, program_json, target, steps_jsons):
        from schedlang.autoschedule.measure import MeasureResult
        for steps in steps_jsons:
            name = json.loads(steps)["steps"][0]["stage"]
            self.timed.append(name)
            yield MeasureResult(times=[self.speeds[name]], load=[0.0, 0.0, 0.0])


def test_a_model_tasks_final_comparison_times_its_default_whatever_its_first_time(tmp_path):
    """The default's first time was taken under another load (10 us): the two fastest search
    records are timed again beside it, and side by side the default wins (1 us), so it ranks
    first; without with_default, the default is not timed again."""
    task = SearchTask.from_outputs([gemm()])
    log = str(tmp_path / "r.jsonl")

    def rec(stage, hash_, median, **extra):
        steps = {"version": 1, "steps": [{"primitive": "parallel", "stage": stage, "axis": "i"}]}
        return records.make_record(task.workload_key, str(task.target), steps, hash_, [median], None,
                                   task.flops, **extra)
    records.append(log, [rec("dflt", "d", 10e-6, sketch="default"), rec("a", "a", 2e-6),
                         rec("b", "b", 3e-6), rec("c", "c", 4e-6)])
    from schedlang.autoschedule.api import final_comparison
    speeds = {"dflt": 1e-6, "a": 2e-6, "b": 3e-6, "c": 4e-6}
    plain = _SideBySide(speeds)
    final_comparison(task, log, plain, 2, rounds=1)
    assert sorted(plain.timed) == ["a", "b"]
    with_default = _SideBySide(speeds)
    final_comparison(task, log, with_default, 2, rounds=1, with_default=True)
    assert sorted(with_default.timed) == ["a", "b", "dflt"]
    best = records.ranked(records.load(log, task.workload_key, str(task.target)))[0]
    assert best["sketch"] == "default" and best["kernel_hash"] == "d"
