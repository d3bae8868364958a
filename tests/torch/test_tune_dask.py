"""Whole-model tuning measured on a local Dask cluster (the optional `dask` extra)."""
import os

import pytest
import torch

import schedlang.torch as st
from schedlang.autoschedule import records
from schedlang.autoschedule.search import SearchPolicy

from .modules import ReluMLP

distributed = pytest.importorskip("distributed")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_compile_tunes_through_a_dask_client(tmp_path):
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = ROOT + (os.pathsep + path if path else "")     # the workers import this checkout
    try:
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                      worker_dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            torch.manual_seed(0)
            model, x = ReluMLP(16, 16, 4).eval(), torch.randn(2, 16)
            log = str(tmp_path / "dask.jsonl")
            with torch.no_grad():
                cm = st.compile(model, (x,), tune=4, log=log, executor=c, seed=0, per_round=2, number=1, repeat=1,
                                policy=SearchPolicy(population=8, generations=1), final=0, verbose=0,
                                in_model=0)      # the log holds the measurements the workers made only
                torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-5)
    finally:
        os.environ["PYTHONPATH"] = path
    recs = records.load(log)
    assert sum(cm.tuning.trials) == 4
    assert len(recs) == 4 + len(cm.tuning.tasks) and all(r["error"] is None for r in recs)
