"""Records that travel (issue 18, item 3): each record says which CPU measured it and the
register file its code was built for; apply_best (and the torch frontend through it) prefers
this CPU's records, says in one line when it uses another's, and never applies a record built
for a wider ISA (AVX-512 on an AVX2 target) without re-validating it against the target's
register file. Old logs without the CPU still load."""
import json
import os
import random
import subprocess
import sys
import warnings

import pytest

import schedlang as sl
from schedlang.autoschedule import records
from schedlang.autoschedule.api import NoRecordError, OtherCPUWarning
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.search import SearchPolicy, steps_key
from schedlang.autoschedule.sketch import generate_sketches
from schedlang.autoschedule.task import SearchTask
from tests import programs

AVX2, AVX512 = "llvm -mcpu=znver3", "llvm -mcpu=znver4"
CPU_A = {"model": "Fake CPU A", "name": "fakea", "isa": ["avx", "avx2", "fma"], "vector_bits": 256, "cores": 2}
CPU_B = {"model": "Fake CPU B", "name": "fakeb", "isa": ["avx", "avx2", "avx512f", "fma"], "vector_bits": 512,
         "cores": 8}


def _gemm():
    return list(programs.gemm(64, 64, 64))


def _split_steps(task, factor):
    s = task.schedule()
    C = s[task.outputs[0]]
    C.split(C.op.axis[1], factor=factor)
    return json.loads(s.to_json())


def _rec(task, steps, median, cpu=None, register_file=None, **extra):
    if cpu is not None:
        extra.update(cpu=cpu, register_file=register_file or {"vector_bits": cpu["vector_bits"],
                                                               "vector_registers": 32 if cpu["vector_bits"] == 512
                                                               else 16})
    return records.make_record(task.workload_key, str(task.target), steps, f"h{median}", [median], None,
                               task.flops, **extra)


def _picked(s):
    return steps_key(s.to_json())


def _no_warning(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error", OtherCPUWarning)
        return fn()


def test_apply_best_picks_the_record_of_this_cpu(tmp_path, monkeypatch):
    task = SearchTask(tensors=_gemm(), target="llvm")
    a, b = _split_steps(task, 4), _split_steps(task, 8)
    log = str(tmp_path / "two_cpus.jsonl")
    records.append(log, [_rec(task, a, 1e-6, CPU_A), _rec(task, b, 2e-6, CPU_B)])   # A's is faster
    monkeypatch.setattr(records, "this_cpu", lambda: CPU_B)
    s, _ = _no_warning(lambda: sl.apply_best(log, task))
    assert _picked(s) == steps_key(b)
    monkeypatch.setattr(records, "this_cpu", lambda: CPU_A)
    s, _ = _no_warning(lambda: sl.apply_best(log, task))
    assert _picked(s) == steps_key(a)


def test_a_record_of_another_cpu_is_used_with_a_one_line_warning(tmp_path, monkeypatch):
    task = SearchTask(tensors=_gemm(), target="llvm")
    a = _split_steps(task, 4)
    log = str(tmp_path / "elsewhere.jsonl")
    records.append(log, [_rec(task, a, 1e-6, CPU_A)])
    monkeypatch.setattr(records, "this_cpu", lambda: CPU_B)
    with pytest.warns(OtherCPUWarning) as got:
        s, _ = sl.apply_best(log, task)
    assert _picked(s) == steps_key(a)
    text = str(got[0].message)
    assert "\n" not in text
    assert text == ("apply_best: using a record measured on Fake CPU A (fakea, 256-bit vectors, 2 cores), not on "
                    "this machine (Fake CPU B (fakeb, 512-bit vectors, 8 cores)); tune here for this CPU's best schedule")


def test_records_of_another_target_string_travel_too(tmp_path, monkeypatch):
    """A log tuned for "llvm -mcpu=znver3" serves a "llvm -mcpu=znver4" target (the code is
    rebuilt for it), with the warning; a cuda record never serves an llvm target."""
    avx2 = SearchTask(tensors=_gemm(), target=AVX2)
    a = _split_steps(avx2, 4)
    log = str(tmp_path / "znver3.jsonl")
    records.append(log, [_rec(avx2, a, 1e-6, CPU_A)])
    monkeypatch.setattr(records, "this_cpu", lambda: CPU_A)
    with pytest.warns(OtherCPUWarning, match="tuned on this CPU for target 'llvm -mcpu=znver3'"):
        s, _ = sl.apply_best(log, _gemm()[-1:], target=AVX512)
    assert _picked(s) == steps_key(a)


def _sampled_record(task, sketch_name, rows, cols, cpu, median):
    """A record of the sketch with an rows x cols register block (C's innermost tile sizes)."""
    sketch = next(sk for sk in generate_sketches(task) if sk.name == sketch_name)
    s, made = sample(task, sketch, random.Random(0), {"C|tile|i": [0, 4, rows], "C|tile|j": [0, 64 // cols, cols],
                                                      "C|par": 1})
    assert made["C|tile|i"][-1] == rows and made["C|tile|j"][-1] == cols
    return _rec(task, json.loads(s.to_json()), median, cpu, records.register_file(task.target),
                sketch=sketch.name, decisions=made)


def test_an_avx512_record_is_revalidated_or_skipped_on_an_avx2_target(tmp_path, monkeypatch):
    avx512 = SearchTask(tensors=_gemm(), target=AVX512)
    big = _sampled_record(avx512, "tile_cache_write:C", 16, 16, CPU_B, 1e-6)    # 16 x 2 ymm: beyond AVX2's 16
    log = str(tmp_path / "avx512.jsonl")
    records.append(log, [big])
    monkeypatch.setattr(records, "this_cpu", lambda: CPU_A)
    with pytest.warns(OtherCPUWarning, match=r"skipped 1 record\(s\) built for a wider ISA \(512-bit vectors, 32 "
                                             r"registers, measured on Fake CPU B .*do not fit target 'llvm -mcpu="
                                             r"znver3' \(256-bit vectors, 16 registers\)"):
        with pytest.raises(NoRecordError, match="no successful record"):
            sl.apply_best(log, _gemm()[-1:], target=AVX2)
    with pytest.warns(OtherCPUWarning, match="measured on Fake CPU B"):    # the wider target itself may use it
        s, _ = sl.apply_best(log, _gemm()[-1:], target=AVX512)
    assert _picked(s) == steps_key(big["steps"])

    small = _sampled_record(avx512, "tile_cache_write:C", 4, 16, CPU_B, 2e-6)   # 4 x 2 ymm: fits AVX2
    bare = dict(_sampled_record(avx512, "tile_pack:C", 2, 8, CPU_B, 0.5e-6), sketch=None, decisions=None)
    records.append(log, [small, bare])         # bare: no decisions, cannot be re-validated
    with pytest.warns(OtherCPUWarning) as got:
        s, _ = sl.apply_best(log, _gemm()[-1:], target=AVX2)
    assert _picked(s) == steps_key(small["steps"])
    texts = [str(w.message) for w in got]
    assert any("skipped 2 record(s)" in t for t in texts)
    assert any("using a record measured on Fake CPU B" in t for t in texts)


def test_old_logs_without_the_cpu_still_load_and_apply(tmp_path, monkeypatch):
    task = SearchTask(tensors=_gemm(), target="llvm")
    a = _split_steps(task, 4)
    log = str(tmp_path / "old.jsonl")
    rec = _rec(task, a, 1e-6)
    assert "cpu" not in rec
    records.append(log, [rec])
    assert len(records.load(log)) == 1
    monkeypatch.setattr(records, "this_cpu", lambda: CPU_B)
    s, _ = _no_warning(lambda: sl.apply_best(log, task))
    assert _picked(s) == steps_key(a)


def test_a_bad_cpu_field_is_a_skipped_line(tmp_path):
    task = SearchTask(tensors=_gemm(), target="llvm")
    log = str(tmp_path / "bad.jsonl")
    records.append(log, [dict(_rec(task, _split_steps(task, 4), 1e-6, CPU_A), cpu={"model": 3})])
    with pytest.warns(UserWarning, match="cpu must be an object"):
        assert records.load(log) == []


def test_a_record_timed_under_an_affinity_of_one_core_is_this_machines(tmp_path, monkeypatch):
    """The CPU's "cores" are the machine's, its "affinity" the timing process's (1 under
    taskset -c 1): a record tuned under taskset is applied on the same machine without a
    warning; a machine of other cores is another CPU."""
    here = dict(CPU_A, cores=2, affinity=2)
    pinned = dict(CPU_A, cores=2, affinity=1)
    assert records.same_cpu(pinned, here) and records.same_cpu(here, pinned)
    assert not records.same_cpu(dict(CPU_A, cores=8, affinity=1), here)       # a bigger machine of that model
    task = SearchTask(tensors=_gemm(), target="llvm -num-cores=1")
    a, b = _split_steps(task, 4), _split_steps(task, 8)
    log = str(tmp_path / "taskset.jsonl")
    records.append(log, [_rec(task, a, 1e-6, pinned, threads=1), _rec(task, b, 2e-6, CPU_B, threads=1)])
    monkeypatch.setattr(records, "this_cpu", lambda: here)
    assert [name for name, _ in records.choose(records.load(log), task.target, here)][0] == records.SAME
    s, _ = _no_warning(lambda: sl.apply_best(log, task))
    assert _picked(s) == steps_key(a)


def test_older_records_stored_the_affinity_as_cores():
    """Before "affinity", "cores" was the timing process's affinity, at most the machine's: such
    a record matches a machine of that model with at least as many cores, and two such records
    match whatever their affinities (neither says its machine's cores)."""
    here = dict(CPU_A, cores=2, affinity=2)
    assert "affinity" not in CPU_A
    assert records.same_cpu(dict(CPU_A, cores=1), here) and records.same_cpu(here, dict(CPU_A, cores=1))
    assert records.same_cpu(dict(CPU_A, cores=2), here)
    assert not records.same_cpu(dict(CPU_A, cores=4), here)       # more cores than this machine has
    assert records.same_cpu(dict(CPU_A, cores=1), dict(CPU_A, cores=2))
    assert not records.same_cpu(dict(CPU_A, cores=1), dict(CPU_A, cores=1, isa=["avx"]))


def test_this_cpu_under_an_affinity_of_one_core(tmp_path):
    """this_cpu() in a process pinned to one core (as taskset -c does) says the machine's cores
    and an affinity of 1, and is the same CPU as an unpinned process's."""
    code = ("import json, os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from schedlang.autoschedule import records; print(json.dumps(records.this_cpu()))")
    pinned = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))).stdout)
    here = records.this_cpu()
    assert pinned["affinity"] == 1 and pinned["cores"] == here["cores"] == os.cpu_count()
    assert here["affinity"] == len(os.sched_getaffinity(0))
    assert records.same_cpu(pinned, here)
    task = SearchTask(tensors=_gemm(), target="llvm")
    rec = _rec(task, _split_steps(task, 4), 1e-6, pinned)
    assert records.problem(rec) is None
    assert "affinity" in records.problem(dict(rec, cpu=dict(pinned, affinity=0)))


def test_the_search_records_the_cpu_and_register_file(tmp_path):
    log = str(tmp_path / "search.jsonl")
    task = SearchTask(tensors=list(programs.gemm(16, 16, 16)), target=AVX2)
    sl.auto_schedule(task, trials=2, log=log, seed=0, verbose=0, number=1, repeat=1,
                     policy=SearchPolicy(population=8, generations=1), final=0)
    recs = [r for r in records.load(log) if r["error"] is None]
    assert recs
    here = records.this_cpu()
    for r in recs:
        # the worker process times it: under --host-lacks it still sees the real host's ISA
        assert {k: r["cpu"][k] for k in ("model", "name", "cores")} == {k: here[k] for k in ("model", "name", "cores")}
        assert 1 <= r["cpu"]["affinity"] <= r["cpu"]["cores"]
        assert "sse2" in r["cpu"]["isa"] and r["cpu"]["vector_bits"] >= 128
        assert r["register_file"] == {"vector_bits": 256, "vector_registers": 16}


def test_the_torch_frontend_prefers_this_cpu(tmp_path, monkeypatch):
    from schedlang.torch.schedules import tuned_schedule
    task = SearchTask(tensors=_gemm(), target="llvm")
    a, b = _split_steps(task, 4), _split_steps(task, 8)
    log = str(tmp_path / "frontend.jsonl")
    assert tuned_schedule(task.outputs, task.target, log) is None          # no log: the default schedules
    records.append(log, [_rec(task, a, 1e-6, CPU_A), _rec(task, b, 2e-6, CPU_B)])
    monkeypatch.setattr(records, "this_cpu", lambda: CPU_B)
    assert _picked(_no_warning(lambda: tuned_schedule(task.outputs, task.target, log))) == steps_key(b)
    other = SearchTask(tensors=list(programs.gemm(32, 32, 32)), target="llvm")
    assert tuned_schedule(other.outputs, other.target, log) is None       # no record of this workload
