"""TVM's auto_scheduler names (issue 15, item 14): a TVM tuning script, with its import
changed, tunes, applies and prints the best schedule."""
import numpy as np
import pytest

import schedlang as sl
from tests import programs
from schedlang import auto_scheduler


@auto_scheduler.register_workload
def matmul(N, L, M, dtype):
    return list(programs.gemm(N, M, L, dtype))


def test_a_tvm_tuning_script_runs_with_its_import_changed(tmp_path):
    log = str(tmp_path / "matmul.json")
    task = auto_scheduler.SearchTask(func=matmul, args=(16, 16, 16, "float32"), target="llvm")
    options = auto_scheduler.TuningOptions(num_measure_trials=2, num_measures_per_round=2, verbose=0,
                                           runner=auto_scheduler.LocalRunner(number=1, repeat=1),
                                           measure_callbacks=[auto_scheduler.RecordToFile(log)])
    s, args = task.tune(options, search_policy=auto_scheduler.SearchPolicy(population=4, generations=0))
    assert len(auto_scheduler.load_records(log)) >= 2
    again, args = task.apply_best(log)
    assert again.to_json() == s.to_json() and [t.name for t in args] == ["A", "B", "C"]
    text = task.print_best(log)
    A, B, C = args
    ns = {"sl": sl, "A": A, "B": B, "C": C}
    exec(compile(text, "<print_best>", "exec"), ns)
    assert ns["s"].to_json() == s.to_json()
    with auto_scheduler.ApplyHistoryBest(log) as best:
        s3, args3 = best.apply_best(task)
    assert s3.to_json() == s.to_json()
    mod = sl.build(s3, args3)
    a, b = (np.random.default_rng(0).uniform(-1, 1, (16, 16)).astype("float32") for _ in range(2))
    c = np.zeros((16, 16), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kw, error, words", [
    (dict(num_measure_trials=True), TypeError, "num_measure_trials must be an integer"),
    (dict(early_stopping=10), ValueError, "timeout="),
    (dict(measure_callbacks=None), ValueError, r"\[RecordToFile\(log_file\)\]"),
    (dict(builder="rpc"), ValueError, "builder"),
    (dict(runner="rpc"), TypeError, "runner"),
])
def test_tuning_options_are_checked_when_made(tmp_path, kw, error, words):
    base = dict(num_measure_trials=1, measure_callbacks=[auto_scheduler.RecordToFile(str(tmp_path / "r.json"))])
    with pytest.raises(error, match=words):
        auto_scheduler.TuningOptions(**dict(base, **kw))


def test_apply_history_best_needs_the_log(tmp_path):
    with pytest.raises(FileNotFoundError, match="ApplyHistoryBest"):
        auto_scheduler.ApplyHistoryBest(str(tmp_path / "missing.json"))
    with pytest.raises(TypeError, match="SketchPolicy"):
        task = auto_scheduler.SearchTask(func=matmul, args=(8, 8, 8, "float32"), target="llvm")
        task.tune(auto_scheduler.TuningOptions(measure_callbacks=[auto_scheduler.RecordToFile("x")]), "sketch")
