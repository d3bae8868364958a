"""Causal masks written out (a tril or triu mask, an arange comparison), recognized by
evaluating them, so the attention kernel skips the masked keys as it does for is_causal.

A score function (ops/attention.py: the scale and masks applied to the dot products) hides
the keys after each query's row when, whatever the dot products are, it gives them a score
at or below MASKED (-inf, or a large negative number such as finfo.min), and leaves every row
at least one key at or before it. Then the exp of a hidden key is exactly 0 and the row's
max is a kept key's: skipping the hidden keys changes no result. torch.export writes tril
and triu as arange comparisons, so such a mask depends on sizes only; the score function is
evaluated (the Tensor IR reference evaluator: what the kernel computes) on a probe of one
[L, S] score matrix filled with a few constants. A mask read from an input or a buffer is
not evaluated (its values may change between calls).
"""
from __future__ import annotations

import json
import math
from typing import Callable, Dict

import numpy as np

import schedlang as sl
from schedlang.tensor.graph import post_order
from schedlang.tensor.op import ComputeOp
from schedlang.tensor.reference import evaluate
from schedlang.tensor.serialize import to_json

MASKED = -1e30           # exp(x - max) is 0 in float32 and float64 when x is this far below a kept score
PROBES = (0.0, 1e4, -1e4)   # dot products the probe is filled with: the mask must not depend on them
MAX_ELEMENTS = 1 << 24   # a larger score matrix is not evaluated (memory and time at compile time)


def hides_later_keys(score: Callable, batch_rank: int, L, S, dtype: str) -> bool:
    """Whether score (a function of the [..., L, S] dot products, ops/attention.py) masks
    every key j > i of query row i, whatever the dot products, and keeps a key j <= i in
    every row (sizes must be static)."""
    if not (isinstance(L, int) and isinstance(S, int)) or L * S > MAX_ELEMENTS:
        return False
    probe = sl.placeholder((1,) * batch_rank + (L, S), dtype, name="probe")
    x = score(probe)
    ops = post_order([x.op])
    if len(ops) <= 2:                    # the probe and x: a scale, no mask
        return False
    for op in ops:
        if not (op is probe.op or isinstance(op, ComputeOp) and not op.reduce_axis):
            return False                 # an input (its values may change), a reduction
        if any(e != 1 for e in op.shape[:-2]):
            return False                 # a mask per batch or head: read by the probe at index 0 only
        if any(not isinstance(e, int) for e in op.shape) or math.prod(op.shape) > MAX_ELEMENTS:
            return False
    key = _shape_of_program(x)           # the layers of a model repeat one mask: evaluated once
    if key not in _KNOWN:
        if len(_KNOWN) >= 64:
            _KNOWN.clear()
        _KNOWN[key] = _evaluates_causal(x, probe, ops, L, S, dtype)
    return _KNOWN[key]


_KNOWN: Dict[str, bool] = {}


def _shape_of_program(x) -> str:
    """x's program as canonical JSON without the names of its stages and variables."""
    data = json.loads(to_json([x]))
    for entry in data["ops"] + data["vars"]:
        entry["name"] = ""
    return json.dumps(data, sort_keys=True)


def _evaluates_causal(x, probe, ops, L: int, S: int, dtype: str) -> bool:
    """hides_later_keys by evaluating x (ops: its program) for each probe value."""
    # the stages that do not read the probe (the mask) evaluated once, for every probe
    reads_probe = {probe.op}
    for op in ops:
        if any(t.op in reads_probe for t in op.input_tensors):
            reads_probe.add(op)
    fixed = [op.output(0) for op in ops if op not in reads_probe]
    feed = dict(zip(fixed, evaluate(fixed, {})))
    later = np.triu(np.ones((L, S), dtype=bool), 1)
    for c in PROBES:
        value = evaluate([x], {**feed, probe: np.full(probe.shape, c, dtype=np.dtype(dtype))})[0]
        if not (value[..., later] <= MASKED).all():
            return False
        if not ((value > MASKED) & ~later).any(axis=-1).all():
            return False                 # a row with no key kept
    return True
