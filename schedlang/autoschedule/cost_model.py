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

A model may hold prior data besides its own task's (set_prior: transfer.py draws it from a
log's records of similar tasks and of this task on other CPUs, each row with its own target,
normalised within its own task and CPU, and a weight < 1 for less alike sources): rows of
the prior count towards MIN_TRAIN, so a search that starts with such a log is ranked by the
trees from its first round; its own measurements weigh 1 and take over as they accumulate.
"""
from __future__ import annotations

import math
import random
import warnings
from typing import Dict, List, Optional, Sequence

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
        self.prior = (np.zeros((0, 0)), np.zeros(0), np.zeros(0))    # (xs, targets, weights)

    def set_prior(self, xs: np.ndarray, ys: np.ndarray, weights: np.ndarray) -> None:
        """Rows learned elsewhere (their targets already normalised per task, their weights
        in (0, 1]) trained on beside this task's measurements from the next fit() on."""
        xs = np.asarray(xs, dtype=np.float64)
        self.prior = (xs.reshape(len(ys), -1) if len(ys) else np.zeros((0, 0)), np.asarray(ys, dtype=np.float64),
                      np.asarray(weights, dtype=np.float64))

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def update(self, xs: Sequence[np.ndarray], times: Sequence[Optional[float]]) -> None:
        self.xs.extend(np.asarray(x, dtype=np.float64) for x in xs)
        self.times.extend(times)
        self.fit()

    def revise(self, rows: Dict[int, float]) -> None:
        """Replace the times of rows (their index in the order update() added them) and refit
        (a candidate timed again counts at its faster time)."""
        if not rows:
            return
        for i, t in rows.items():
            self.times[i] = t
        self.fit()

    def fit(self) -> None:
        ok = [t for t in self.times if t is not None and t > 0]
        pxs, pys, pws = self.prior
        if len(ok) + int(np.sum(pys > FAIL_SCORE)) < self.min_train:
            return
        if len(set(ok)) < 2 and len(set(pys.tolist())) < 2:
            return
        lgb = _lightgbm()
        if lgb is None:
            return
        xs = np.stack(self.xs) if self.xs else pxs[:0]
        ys, ws = targets(self.times), None           # unweighted without a prior, as before priors
        if len(pys):
            if xs.shape[1] != pxs.shape[1]:
                raise ValueError(f"CostModel: prior rows have {pxs.shape[1]} features, this task's {xs.shape[1]}")
            xs, ys, ws = np.concatenate([xs, pxs]), np.concatenate([ys, pys]), np.concatenate([np.ones(len(xs)), pws])
        data = lgb.Dataset(xs, ys, weight=ws, params={"verbosity": -1, "min_data_in_bin": 1})
        # weighted rows with no floor on a leaf's hessian trip LightGBM's "left_count > 0" check
        params = dict(PARAMS, seed=self.seed, **({} if ws is None else {"min_sum_hessian_in_leaf": 1e-3}))
        failed = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # "no further splits" and the like on tiny data
            try:
                self.booster = lgb.train(params, data, num_boost_round=ROUNDS)
            except lgb.basic.LightGBMError as err:      # keep the last model (or the random order)
                failed = err
        if failed is not None:
            warnings.warn(f"auto_schedule: the cost model's training failed ({failed}); it ranks as before",
                          stacklevel=3)

    def predict(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        if not len(xs):
            return np.zeros(0)
        if self.booster is None:
            return np.array([self.rng.random() for _ in xs])
        return np.asarray(self.booster.predict(np.stack([np.asarray(x, dtype=np.float64) for x in xs])),
                          dtype=np.float64)
