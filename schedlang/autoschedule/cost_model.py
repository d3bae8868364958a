"""The learned cost model: gradient-boosted trees (LightGBM) on Tile IR features, trained
online from the measurements of the search.

Target: regression on log2 throughput normalised per task, log2(best time / time), so
the fastest candidate measured scores 0 and one twice as slow -1; failed candidates
(crash, timeout, wrong result) get the floor, FAIL_SCORE. Why this and not a ranking
objective: the search needs the order of candidates, and speed ratios are what order
them; in log space a factor of two costs the same loss at the top and at the bottom of
the range, where a linear target would let the many slow candidates look alike and the
few fast ones dominate. Normalising by the task's best makes one model's data from
different tasks (or a resumed log) comparable. LightGBM's lambdarank needs integer
relevance grades and many candidates per query group; with one group of a few dozen
measurements, plain regression on the ratio is the steadier fit. The floor keeps a few
pathological candidates (100x slower) from dominating the squared loss.

Before MIN_TRAIN successful measurements the model ranks at random (seeded), as does a
model whose training fails or when LightGBM is not installed (warned once): a random
order is the honest prior, and the search's exploration covers it.
"""
from __future__ import annotations

import math
import random
import warnings
from typing import List, Optional, Sequence

import numpy as np

MIN_TRAIN = 8          # successful measurements before the trees are trusted
FAIL_SCORE = -8.0      # log2 ratio given to failed candidates, and the floor of every target
ROUNDS = 64           # boosting rounds
PARAMS = dict(objective="regression", learning_rate=0.15, num_leaves=15, min_data_in_leaf=2,
              min_data_in_bin=1, min_sum_hessian_in_leaf=0.0, lambda_l2=1e-3,
              num_threads=1, deterministic=True, force_row_wise=True, verbosity=-1)

_warned = False


def _lightgbm():
    global _warned
    try:
        import lightgbm
    except ImportError:
        if not _warned:
            warnings.warn("auto_schedule: LightGBM is not installed (pip install 'schedlang[tune]'); "
                          "candidates are ranked at random", stacklevel=3)
            _warned = True
        return None
    return lightgbm


def targets(times: Sequence[Optional[float]]) -> np.ndarray:
    """log2(best / time) per candidate, FAIL_SCORE for failures (time None) and the floor."""
    ok = [t for t in times if t is not None and t > 0]
    best = min(ok) if ok else 1.0
    return np.array([max(FAIL_SCORE, math.log2(best / t)) if t is not None and t > 0 else FAIL_SCORE
                     for t in times], dtype=np.float64)


class CostModel:
    """predict(features) -> scores, higher is faster; update(features, times) adds measurements
    (time None: failed) and refits. Deterministic for a seed."""

    def __init__(self, seed: Optional[int] = None, min_train: int = MIN_TRAIN):
        self.seed = 0 if seed is None else seed
        self.min_train = min_train
        self.rng = random.Random(self.seed)
        self.xs: List[np.ndarray] = []
        self.times: List[Optional[float]] = []
        self.booster = None

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def update(self, xs: Sequence[np.ndarray], times: Sequence[Optional[float]]) -> None:
        self.xs.extend(np.asarray(x, dtype=np.float64) for x in xs)
        self.times.extend(times)
        self.fit()

    def fit(self) -> None:
        ok = [t for t in self.times if t is not None and t > 0]
        if len(ok) < self.min_train or len(set(ok)) < 2:
            return
        lgb = _lightgbm()
        if lgb is None:
            return
        data = lgb.Dataset(np.stack(self.xs), targets(self.times), params={"verbosity": -1, "min_data_in_bin": 1})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # "no further splits" and the like on tiny data
            self.booster = lgb.train(dict(PARAMS, seed=self.seed), data, num_boost_round=ROUNDS)

    def predict(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        if not len(xs):
            return np.zeros(0)
        if self.booster is None:
            return np.array([self.rng.random() for _ in xs])
        return np.asarray(self.booster.predict(np.stack([np.asarray(x, dtype=np.float64) for x in xs])),
                          dtype=np.float64)
