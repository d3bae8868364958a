"""The auto-scheduler: searches return correct schedules, logs resume and survive bad
lines, failing candidates are isolated, a seed fixes the candidates."""
import concurrent.futures as cf
import json
import random

import numpy as np
import pytest

import schedlang as sl
from schedlang.autoschedule import records
from schedlang.autoschedule.executor import LocalExecutor
from schedlang.autoschedule.measure import Measurer
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.search import Evolver, SearchPolicy, run_search
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from schedlang.schedule import legal
from schedlang.tensor.axis import REDUCE

from . import workers
from .test_search import softmax as softmax_task

FAST = dict(number=1, repeat=2)
SMALL = SearchPolicy(population=8, generations=1)      # a quick search: few candidates lowered per round
QUICK = dict(FAST, policy=SMALL, final=0)   # final: see test_gemm_search_returns_a_correct_schedule


def gemm(n=64, m=None, k=None):
    m, k = m or n, k or n
    A = sl.placeholder((n, k), name="A")
    B = sl.placeholder((k, m), name="B")
    r = sl.reduce_axis((0, k), name="k")
    C = sl.compute((n, m), lambda i, j: sl.sum(A[i, r] * B[r, j], axis=r), name="C")
    return [A, B, C]


def eltwise_reduce():
    X = sl.placeholder((12, 40), name="X")
    E = sl.compute((12, 40), lambda i, j: sl.exp(X[i, j]) * 0.5 + 1.0, name="E")
    r = sl.reduce_axis((0, 40), name="r")
    R = sl.compute((12,), lambda i: sl.sum(E[i, r], axis=r), name="R")
    return [X, R]


def run(s, args, inputs):
    mod = sl.build(s, args)
    outs = [np.zeros(t.shape, "float32") for t in args[len(inputs):]]
    mod(*inputs, *outs)
    return outs


@pytest.fixture(scope="module")
def gemm_log(tmp_path_factory):
    """One real search (spawned worker) on a 64^3 GEMM, shared by the tests that read a log."""
    log = str(tmp_path_factory.mktemp("as") / "gemm.jsonl")
    A, B, C = gemm()
    s, args = sl.auto_schedule([C], trials=4, log=log, seed=1, per_round=4, **dict(QUICK, final=4))
    return log, (A, B, C), s, args


def test_gemm_search_returns_a_correct_schedule(gemm_log):
    log, (A, B, C), s, args = gemm_log
    assert [t.name for t in args] == ["A", "B", "C"]
    assert s.steps, "the best schedule has steps"
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (64, 64)).astype("float32") for _ in range(2))
    (c,) = run(s, args, [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    recs = records.load(log)
    searched = [r for r in recs if "final" not in r]
    assert len(searched) == 4 and len({r["kernel_hash"] for r in searched}) == 4
    ok = [r for r in searched if r["error"] is None]
    assert ok, [r["error"] for r in recs]
    for r in ok:      # repeat=2 timings, or one for a call slower than measure.SLOW_CALL_S
        assert len(r["times"]) in (1, 2) and r["median_s"] > 0 and r["gflops"] > 0 and len(r["load"]) == 3
        assert r["workload"] == SearchTask.from_outputs([C]).workload_key
    # the best candidates timed again side by side (three rounds), one final record each
    final = [r for r in recs if "final" in r]
    fastest = sorted(ok, key=lambda r: r["median_s"])[:len(final)]
    assert {r["kernel_hash"] for r in final} == {r["kernel_hash"] for r in fastest} and len(final) >= 2
    assert all(len(r["times"]) in (3, 6) for r in final if r["error"] is None)
    best = records.ranked(recs)[0]
    assert "final" in best and json.loads(s.to_json()) == best["steps"]


def test_print_best_prints_replayable_python(gemm_log, capsys):
    log, (A, B, C), s, _ = gemm_log
    text = sl.print_best(log, [C])
    assert text in capsys.readouterr().out
    ns = {"sl": sl, "A": A, "B": B, "C": C}
    exec(compile(text, "<print_best>", "exec"), ns)
    assert ns["s"].to_json() == s.to_json()
    again, args = sl.apply_best(log, [C])
    assert again.to_json() == s.to_json() and [t.name for t in args] == ["A", "B", "C"]


def test_corrupt_and_foreign_lines_are_skipped_with_a_warning(gemm_log, tmp_path):
    log, (A, B, C), s, _ = gemm_log
    lines = open(log).read().splitlines()
    other = json.loads(lines[0])
    other["workload"] = "0" * 64
    other["median_s"] = 1e-12            # faster, but another program's
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], "{not json", '{"foo": 1}', "[1, 2]", json.dumps(other),
                              *lines[1:], lines[-1][: len(lines[-1]) // 2]]) + "\n")
    with pytest.warns(UserWarning) as caught:
        recs = records.load(str(bad), SearchTask.from_outputs([C]).workload_key)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 4 and all("skipped" in m for m in messages), messages
    assert any(":2:" in m for m in messages) and any(":4:" in m for m in messages)
    assert [r["kernel_hash"] for r in recs] == [json.loads(x)["kernel_hash"] for x in lines]
    with pytest.warns(UserWarning):
        again, _ = sl.apply_best(str(bad), [C])
    assert again.to_json() == s.to_json()
    unreplayable = json.loads(lines[0])            # well-formed, but names an axis C does not have
    unreplayable.update(median_s=1e-12, kernel_hash="x",        # the fastest of the final comparison
                        final=max(r.get("final", 0) for r in recs))
    unreplayable["steps"]["steps"] = [{"primitive": "split", "stage": "C", "axis": "nope", "factor": 2,
                                       "nparts": None}]
    with open(bad, "a") as f:
        f.write(json.dumps(unreplayable) + "\n")
    with pytest.warns(UserWarning) as caught:
        again, _ = sl.apply_best(str(bad), [C])
    assert any("do not replay" in str(w.message) for w in caught)
    assert again.to_json() == s.to_json()


def test_records_round_trip(tmp_path):
    log = str(tmp_path / "r.jsonl")
    rec = records.make_record("k" * 64, "llvm", {"version": 1, "steps": []}, "h", [3e-3, 1e-3, 2e-3], None,
                              2_000_000, (0.5, 0.25, 0.125), sketch="plain")
    records.append(log, [rec, dict(rec, kernel_hash="h2", times=[], median_s=None, gflops=None,
                                   error="TimeoutError: x")])
    got = records.load(log)
    assert got[0] == json.loads(json.dumps(rec)) and got[0]["median_s"] == 2e-3
    assert got[0]["gflops"] == pytest.approx(1.0)
    assert got[1]["error"] == "TimeoutError: x"
    assert [r["kernel_hash"] for r in records.ranked(got)] == ["h"]
    with pytest.raises(ValueError, match="no successful record"):
        sl.apply_best(log, gemm(8)[-1:])


def test_elementwise_reduction_through_any_executor(tmp_path):
    X, R = eltwise_reduce()
    with cf.ThreadPoolExecutor(1) as ex:
        s, args = sl.auto_schedule([R], trials=3, log=str(tmp_path / "er.jsonl"), executor=ex, seed=3,
                                   per_round=3, **QUICK)
    x = np.random.default_rng(1).uniform(-1, 1, (12, 40)).astype("float32")
    (got,) = run(s, args, [x])
    np.testing.assert_allclose(got, (np.exp(x) * 0.5 + 1.0).sum(axis=1), rtol=1e-4)
    assert any(st.primitive == "compute_inline" for st in s.steps)


def test_resume_measures_nothing_twice(tmp_path):
    log = str(tmp_path / "resume.jsonl")
    C = gemm(16)[-1]
    with cf.ThreadPoolExecutor(1) as ex:
        sl.auto_schedule([C], trials=3, log=log, executor=ex, seed=5, per_round=3, **QUICK)
        first = [r["kernel_hash"] for r in records.load(log)]
        sl.auto_schedule([C], trials=3, log=log, executor=ex, seed=5, per_round=3, **QUICK)
    hashes = [r["kernel_hash"] for r in records.load(log)]
    assert len(first) == 3 and hashes[:3] == first
    assert len(hashes) == 6 and len(set(hashes)) == 6     # the same seed redraws the first three: skipped


def test_a_timeout_ends_the_search_after_the_running_round(tmp_path):
    log = str(tmp_path / "timeout.jsonl")
    C = gemm(16)[-1]
    with cf.ThreadPoolExecutor(1) as ex, pytest.warns(UserWarning, match="default schedule"):
        s, args = sl.auto_schedule([C], trials=50, log=log, executor=ex, seed=5, per_round=2,
                                   timeout=1e-6, **QUICK)
    assert len(records.load(log)) == 0          # the deadline passed before the first round
    a, b = (np.random.default_rng(i).uniform(-1, 1, (16, 16)).astype("float32") for i in (0, 1))
    np.testing.assert_allclose(run(s, args, [a, b])[0], a @ b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="timeout"):
        sl.auto_schedule([C], trials=1, log=log, timeout=0)


def test_slow_candidates_are_timed_once_and_fast_ones_repeatedly(monkeypatch):
    from schedlang.autoschedule import measure
    task = SearchTask.from_outputs(gemm(16)[-1:])
    steps = task.schedule().to_json()
    fast = measure.run_candidate(task.program_json, steps, "llvm", number=3, repeat=4)
    assert len(fast["times"]) == 4 and all(t > 0 for t in fast["times"])
    monkeypatch.setattr(measure, "SLOW_CALL_S", 0.0)       # every call counts as slow now
    slow = measure.run_candidate(task.program_json, steps, "llvm", number=3, repeat=4)
    assert len(slow["times"]) == 1 and slow["times"][0] > 0


def test_a_seed_fixes_the_candidates_and_their_order(tmp_path):
    task = SearchTask.from_outputs(gemm(24, 20, 12)[-1:])
    policy = SearchPolicy(population=8, generations=1)
    draw = lambda seed: [c.steps_json for c in Evolver(task, random.Random(seed), policy=policy).propose(6)]
    first = draw(7)          # drawn once for both comparisons (each draw lowers 16 candidates)
    assert first == draw(7) and first != draw(8)
    logs = []
    for name in ("a", "b"):
        log = str(tmp_path / f"{name}.jsonl")
        with cf.ThreadPoolExecutor(1) as ex:
            sl.auto_schedule(task, trials=3, log=log, executor=ex, seed=11, per_round=3, **QUICK)
        logs.append([r["steps"] for r in records.load(log)])
    assert logs[0] == logs[1] and len(logs[0]) == 3


def test_crashing_and_hanging_calls_are_isolated():
    ex = LocalExecutor(1, build_timeout=30, run_timeout=1.0)
    m = Measurer(ex, worker_fn=workers.fake)
    try:
        got = list(m.measure("{}", "llvm", ["ok", "crash", "raise", "hang", "ok"]))
    finally:
        ex.shutdown()
    assert [r.error is None for r in got] == [True, False, False, False, True]
    assert got[0].median == 2e-3 and got[4].median == 2e-3
    assert "WorkerError" in got[1].error and "exit code 3" in got[1].error
    assert got[2].error == "ValueError: a failing candidate"
    assert "TimeoutError" in got[3].error and "run" in got[3].error
    assert ex.replaced == 2


def test_search_goes_on_past_crashing_and_hanging_candidates(tmp_path):
    log = str(tmp_path / "flaky.jsonl")
    task = SearchTask.from_outputs(gemm(16)[-1:])
    m = Measurer(LocalExecutor(1, build_timeout=30, run_timeout=1.0), worker_fn=workers.flaky, **FAST)
    try:
        # seed 6 draws candidates that workers.flaky crashes on, hangs on and measures (by the
        # hash of their steps); a change to the sampling may need another seed
        assert run_search(task, 6, log, m, seed=6, per_round=6, policy=SMALL) == 6
    finally:
        m.close()
    errors = [r["error"] for r in records.load(log)]
    assert len(errors) == 6
    assert any(e and "WorkerError" in e for e in errors) and any(e and "TimeoutError" in e for e in errors)
    assert any(e is None for e in errors), errors
    s, _ = sl.apply_best(log, task)
    assert sl.autoschedule.check_against_reference(task, s) is None


def test_ctrl_c_keeps_what_was_measured(tmp_path):
    log = str(tmp_path / "int.jsonl")
    with workers.InterruptAfter(2) as ex, pytest.raises(KeyboardInterrupt):
        sl.auto_schedule(gemm(16)[-1:], trials=5, log=log, executor=ex, seed=0, per_round=5, **QUICK)
    assert len(records.load(log)) == 2


def test_flops_count_arithmetic_not_addressing():
    X = sl.placeholder((1, 3, 10, 10), name="X")
    W = sl.placeholder((4, 3, 3, 3), name="W")
    rc, rh, rw = (sl.reduce_axis((0, 3), name=n) for n in ("rc", "rh", "rw"))
    out = sl.compute((1, 4, 8, 8), lambda n, f, h, w: sl.sum(X[n, rc, h + rh, w + rw] * W[f, rc, rh, rw],
                                                            axis=[rc, rh, rw]), name="conv")
    assert SearchTask.from_outputs([out]).flops == 2 * 4 * 8 * 8 * 3 * 3 * 3     # h + rh is not a FLOP


def test_search_task_from_a_workload_function():
    task = sl.SearchTask(gemm, (8, 6, 4), "llvm")
    assert [t.name for t in task.args] == ["A", "B", "C"] and [t.name for t in task.outputs] == ["C"]
    assert task.flops == 8 * 6 * 4 * 2
    assert task.workload_key == sl.SearchTask(gemm, (8, 6, 4), "llvm").workload_key
    assert task.workload_key != sl.SearchTask(gemm, (8, 6, 5), "llvm").workload_key
    with pytest.raises(TypeError, match="callable"):
        sl.SearchTask(None, (), "llvm")


def test_sketch_rules_follow_the_tensor_ir():
    C = sl.SearchTask(gemm, (8, 8, 8)).outputs[0]
    s = sl.create_schedule(C.op)
    assert legal.has_data_reuse(s[C])
    assert [t.name for t in legal.packable_inputs(s[C])] == ["B"]          # C[i, j] reads B[k, j]
    assert [sk.name for sk in generate_sketches(SearchTask.from_outputs([C]))] == [
        "tile:C", "tile_cache_write:C", "tile_pack:C"]
    X, R = eltwise_reduce()
    s = sl.create_schedule(R.op)
    assert not legal.has_data_reuse(s[R]) and legal.can_inline(s["E"])
    assert [sk.name for sk in generate_sketches(SearchTask.from_outputs([R]))] == ["inline:E", "rfactor:R,inline:E"]


def test_every_sampled_candidate_is_legal_and_correct():
    """Candidates of all sketches build and match the reference (pruned draws aside)."""
    for outs in (gemm(13, 7, 9)[-1:], eltwise_reduce()[-1:]):
        task = SearchTask.from_outputs(outs)
        prop = Evolver(task, random.Random(0), policy=SearchPolicy(population=8, generations=0))
        cands = prop.propose(9)
        assert len({c.sketch for c in cands}) == len(generate_sketches(task))
        for c in cands:
            s = task.schedule().apply_json(c.steps_json)
            assert sl.autoschedule.check_against_reference(task, s) is None, s.to_python()


def test_costly_math_read_twice_may_stay_a_stage():
    """softmax's exp, read by the row sum and the normalize, may be computed once (a sketch
    keeps it a stage); an exp read once, or a cheap stage read twice, is always inlined."""
    task = softmax_task(12, 40)
    s = task.schedule()
    assert legal.costly_to_recompute(s, s["expval"])
    assert "plain" in [sk.name for sk in generate_sketches(task)]
    _, R = eltwise_reduce()                     # E = exp(X) * 0.5 + 1, read once by R
    assert not legal.costly_to_recompute(sl.create_schedule(R.op), sl.create_schedule(R.op)["E"])
    Y = sl.placeholder((8, 8), name="Y")
    D = sl.compute((8, 8), lambda i, j: Y[i, j] * 2.0, name="D")
    T = sl.compute((8, 8), lambda i, j: D[i, j] + D[j, i], name="T")
    s = sl.create_schedule(T.op)
    assert not legal.costly_to_recompute(s, s["D"])


def test_a_producer_may_join_its_consumers_where_they_are_computed():
    """With the row sum (total) computed at the normalize's row loop, the exp it shares with the
    normalize may be computed there too, once per row; those candidates are correct, and a
    long innermost loop is split by a vector width and vectorized."""
    task = softmax_task(12, 100)
    s = task.schedule()
    s["total"].compute_at(s["softmax"], s["softmax"].leaf_iter_vars[0])
    points = legal.attach_points(s, s["expval"], 2)
    assert [(st.name, a.var.name) for st, a in points] == [("softmax", "i")]
    plain = next(sk for sk in generate_sketches(task) if sk.name == "plain")
    found = split = 0
    rng = random.Random(0)
    for _ in range(40):
        try:
            s, made = sample(task, plain, rng)
        except sl.ScheduleError:
            continue
        if s["expval"].attach_type == "at" and s["expval"].attach_stage is s["softmax"]:
            found += 1
            assert sl.autoschedule.check_against_reference(task, s) is None, s.to_python()
        split += bool(made.get("expval|vsplit") or made.get("softmax|vsplit"))
    assert found and split


def test_a_parallel_loop_has_work_for_every_thread():
    """A drawn parallel loop is fused from enough outer loops to give each thread several
    iterations (a draw that parallelises a loop of one iteration runs on one core), or up to
    a loop another stage is computed at: fused with the loops inside it, that stage would be
    computed once per iteration of all of them (tile_pack's B panel copy at its panel loop,
    4 panels here: sketch_cpu._fuse_limit)."""
    from schedlang.autoschedule.sketch_cpu import PAR_PER_THREAD
    task = SearchTask.from_outputs(gemm(256)[-1:], target="llvm -num-cores=2")
    cands = Evolver(task, random.Random(1), policy=SearchPolicy(population=24, generations=0)).propose(24)
    parallel = 0
    for c in cands:
        s = task.schedule().apply_json(c.steps_json)
        for st in s.stages:
            ext = st.static_extents()
            leaves = list(st.leaf_iter_vars)
            for i, a in enumerate(leaves):
                if legal.is_parallel(st, a):     # enough iterations, every spatial loop outside k fused,
                    parallel += 1                # or the fuse stopped at an attach loop
                    attach = any(c.attach_ivar is a for c in s.stages if c.attach_stage is st)
                    assert ext[a] >= PAR_PER_THREAD * 2 or leaves[i + 1].kind == REDUCE or attach, s.to_python()
    assert parallel >= len(cands) // 2


def test_bad_arguments_are_clear_errors(tmp_path):
    C = gemm(8)[-1]
    with pytest.raises(ValueError, match="trials"):
        sl.auto_schedule([C], trials=-1, log=str(tmp_path / "x.jsonl"))
    with pytest.raises(ValueError, match="spawn"):
        LocalExecutor(context="fork")
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        sl.apply_best(str(tmp_path / "missing.jsonl"), [C])
    with pytest.raises(TypeError, match="tensors"):
        sl.auto_schedule(["C"], trials=1, log=str(tmp_path / "x.jsonl"))


def test_workers_are_retired_after_max_calls():
    """Each build keeps ~90 KB inside LLVM, so a worker is replaced after a bounded number of
    calls; the calls themselves are unaffected."""
    import os
    ex = LocalExecutor(1, max_calls_per_worker=2)
    try:
        pids = [ex.submit(os.getpid).result(timeout=60) for _ in range(5)]
    finally:
        ex.shutdown()
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4] and len(set(pids)) == 3
    assert ex.retired == 2 and ex.replaced == 0
    with pytest.raises(ValueError, match="max_calls_per_worker"):
        LocalExecutor(1, max_calls_per_worker=0)


def test_bfloat16_candidates_get_float_inputs_and_a_rounding_tolerance():
    """bfloat16's numpy kind is "V": the measurer still feeds it floats in [-1, 1), and the
    check against the reference allows a reordered reduction its rounding."""
    from schedlang.autoschedule.api import check_against_reference
    from schedlang.autoschedule.measure import random_inputs
    A = sl.placeholder((16, 64), "bfloat16", name="A")
    k = sl.reduce_axis((0, 64), name="k")
    B = sl.compute((16,), lambda i: sl.sum(A[i, k], axis=k), name="B")
    task = sl.SearchTask(tensors=[A, B])
    (a,) = random_inputs(task.inputs, seed=3)
    values = a.astype(np.float32)
    assert values.min() >= -1 and values.max() <= 1 and len(np.unique(values)) > 100
    s = sl.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki)
    assert check_against_reference(task, s, seed=3) is None
