"""The one validating reader of tuning logs (issue 15, item 10): a malformed line, whatever
is wrong with it, is skipped with one warning naming its line, and no reader (apply_best,
print_best, a resumed search, the tuning curves) fails on what the reader lets through."""
import copy
import json
import random
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlang as sl
from tests import programs
from schedlang.autoschedule import records
from schedlang.autoschedule.plot import tuning_curves
from schedlang.autoschedule.sample import sample
from schedlang.autoschedule.search import Evolver, SearchPolicy
from schedlang.autoschedule.task import SearchTask


def _task():
    return SearchTask.from_outputs([programs.gemm(8, 8, 8)[-1]])


TASK = _task()


def _good(seed=0, median=1e-3):
    ev = Evolver(TASK, random.Random(seed))
    sketch = ev.sketches[-1]
    s, decisions = sample(TASK, sketch, random.Random(seed))
    return records.make_record(TASK.workload_key, str(TASK.target), json.loads(s.to_json()), f"h{seed}",
                               [median], None, TASK.flops, (0.1, 0.1, 0.1), sketch=sketch.name,
                               decisions=decisions)


GOOD = _good()
STEP = GOOD["steps"]["steps"][0]


def _mutated(**change):
    rec = copy.deepcopy(GOOD)
    rec.update(change)
    return rec


def _without(name):
    rec = copy.deepcopy(GOOD)
    del rec[name]
    return rec


def _with_steps(*steps):
    return _mutated(steps={"version": 1, "steps": list(steps)})


BAD_LINES = {
    "not an object": "[1, 2]",
    "a string": '"hello"',
    "NaN median": json.dumps(_mutated(median_s=float("nan"))),
    "Infinity time": json.dumps(_mutated(times=[float("inf")])),
    "huge int median": json.dumps(_mutated(median_s=10 ** 400)),
    "digits beyond int parsing": '{"median_s": ' + "9" * 5000 + "}",
    "deeply nested": "[" * 100_000 + "]" * 100_000,
    "deeply nested field": '{"decisions": ' + "[" * 50_000 + "]" * 50_000 + "}",
    "missing key": json.dumps(_without("kernel_hash")),
    "hash a list": json.dumps(_mutated(kernel_hash=["h"])),
    "median a string": json.dumps(_mutated(median_s="fast")),
    "negative median": json.dumps(_mutated(median_s=-1.0)),
    "gflops a string": json.dumps(_mutated(gflops="many")),
    "times a bool": json.dumps(_mutated(times=True)),
    "error a number": json.dumps(_mutated(error=3)),
    "garbage decisions": json.dumps(_mutated(decisions={"C|tile|i": "big"})),
    "decisions a list": json.dumps(_mutated(decisions=[1, 2])),
    "huge tile decision": json.dumps(_mutated(decisions={"C|tile|i": [0, 10 ** 18, 3]})),
    "sketch a list": json.dumps(_mutated(sketch=["x"])),
    "final a string": json.dumps(_mutated(final="late")),
    "profile garbage": json.dumps(_mutated(profile={"k": [1]})),
    "empty primitive": json.dumps(_with_steps(dict(STEP, primitive=""))),
    "garbage step": json.dumps(_with_steps("split")),
    "step field of a wrong type": json.dumps(_with_steps({"primitive": "split", "stage": "C", "axis": ["i"],
                                                           "factor": "2"})),
    "steps without version": json.dumps(_mutated(steps={"steps": []})),
}


def _read_all(log, evolve=True):
    """Every reader of a log, as a user or a resumed search calls it; returns load's records.
    evolve=False leaves out the resumed search, which sees only load's records (the same
    records for every log whose last line load skips)."""
    recs = records.load(log, TASK.workload_key, str(TASK.target))
    records.ranked(recs)
    s, _ = sl.apply_best(log, TASK)
    text = sl.print_best(log, TASK, file=open("/dev/null", "w"))
    assert text.startswith("# best of")
    tuning_curves(log)
    if evolve:
        # a small round (each candidate is a lowering, verified after every pass): the elites'
        # children are what mutate the resumed decisions
        policy = SearchPolicy(population=2, generations=1, elites=4, local_breadth=1)
        ev = Evolver(TASK, random.Random(0), policy=policy)
        ev.resume(recs)
        ev.propose(2)
    return recs, s


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_a_bad_line_is_skipped_with_one_warning_by_every_reader(tmp_path, name):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(GOOD) + "\n" + BAD_LINES[name] + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs = records.load(str(log))
    assert [r["kernel_hash"] for r in recs] == ["h0"]
    assert len(caught) == 1 and f"{log}:2: skipped" in str(caught[0].message), [str(w.message) for w in caught]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs, s = _read_all(str(log), evolve=False)     # the search sees [GOOD]: the test below
    assert json.loads(s.to_json()) == GOOD["steps"]


def test_a_resumed_search_evolves_what_the_reader_kept(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(GOOD) + "\n" + BAD_LINES["missing key"] + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs, s = _read_all(str(log))
    assert [r["kernel_hash"] for r in recs] == ["h0"] and json.loads(s.to_json()) == GOOD["steps"]


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
PATHS = [(k,) for k in GOOD] + [("steps", "version"), ("steps", "steps"), ("steps", "steps", 0),
                                ("steps", "steps", 0, "primitive"), ("steps", "steps", 0, "stage")] + \
        [("decisions", k) for k in GOOD["decisions"]]


def _set(rec, path, value, delete):
    obj = rec
    for p in path[:-1]:
        obj = obj[p]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations=st.lists(st.tuples(st.sampled_from(PATHS), JSON, st.booleans()), min_size=1, max_size=3),
       cut=st.none() | st.integers(1, 400), faster=st.booleans())
def test_fuzzed_records_never_break_a_reader(tmp_path, mutations, cut, faster):
    rec = _mutated(kernel_hash="fuzz", median_s=1e-6 if faster else 1.0)
    for path, value, delete in mutations:
        try:
            _set(rec, path, value, delete)
        except (KeyError, IndexError, TypeError):       # an earlier mutation removed the path
            pass
    line = json.dumps(rec)
    line = line if cut is None else line[:cut]
    log = tmp_path / "fuzz.jsonl"
    log.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs = records.load(str(log))
        assert recs[0] == GOOD and len(recs) + len(caught) == 2, [str(w.message) for w in caught]
        assert all(":2: skipped" in str(w.message) for w in caught)
        _read_all(str(log), evolve=len(recs) == 2)    # a skipped line leaves the search GOOD alone
