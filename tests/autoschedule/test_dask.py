"""Measurement on a local Dask cluster (the optional `dask` extra)."""
import concurrent.futures as cf
import os

import numpy as np
import pytest

import schedlang as sl
from tests import programs
from schedlang.autoschedule import records
from schedlang.autoschedule.measure import Measurer
from schedlang.autoschedule.search import SearchPolicy

distributed = pytest.importorskip("distributed")

QUICK = dict(number=1, repeat=2, policy=SearchPolicy(population=8, generations=1), final=0)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def client():
    """A one-process, one-thread local cluster whose workers import this checkout."""
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = ROOT + (os.pathsep + path if path else "")
    try:
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                      worker_dashboard_address=None) as cluster, \
                distributed.Client(cluster) as c:
            yield c
    finally:
        os.environ["PYTHONPATH"] = path


def gemm(n=16):
    return programs.gemm(n, n, n)


def test_search_through_a_dask_client(client, tmp_path):
    log = str(tmp_path / "dask.jsonl")
    A, B, C = gemm()
    s, args = sl.auto_schedule([C], trials=3, log=log, executor=client, seed=4, per_round=3, **QUICK)
    recs = records.load(log)
    assert len(recs) == 3 and all(r["error"] is None and r["times"] for r in recs), recs
    a, b = (np.random.default_rng(i).uniform(-1, 1, (16, 16)).astype("float32") for i in range(2))
    c = np.zeros((16, 16), "float32")
    sl.build(s, args)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


def _timed_where(program_json, steps_json, target, number, repeat):
    """A measure function that reports whether it ran in a Dask worker holding the timing lock."""
    import socket

    from distributed import Lock, get_worker

    from schedlang.autoschedule.dask_measure import LOCK_PREFIX
    from schedlang.autoschedule.executor import phase
    phase("run")
    locked = Lock(LOCK_PREFIX + socket.gethostname()).locked()
    worker = get_worker()
    worker.schedlang_test_calls = getattr(worker, "schedlang_test_calls", 0) + 1   # counts real runs
    return {"times": [1e-3 * worker.schedlang_test_calls], "worker": worker.address, "locked": locked}


def test_the_executor_wrapper_runs_each_candidate_under_the_timing_lock(client):
    ex = client.get_executor()
    assert isinstance(ex, cf.Executor)
    m = Measurer(ex, worker_fn=_timed_where)
    got = list(m.measure("{}", "llvm", ["a", "a", "b"]))
    assert [r.error for r in got] == [None, None, None]
    first = round(got[0].median / 1e-3)
    # impure: the repeated candidate ran again (Dask did not answer it from its cache)
    assert [round(r.median / 1e-3) for r in got] == [first, first + 1, first + 2]
    from schedlang.autoschedule.dask_measure import call_with_timing_lock
    out = client.submit(call_with_timing_lock, _timed_where, "{}", "a", "llvm", 1, 1, pure=False).result()
    assert out["locked"] is True and out["worker"] in client.scheduler_info()["workers"]
    # the lock is released after each candidate: a plain task sees it free
    assert client.submit(lambda: distributed.Lock(
        "schedlang-timing-" + __import__("socket").gethostname()).locked(), pure=False).result() is False
