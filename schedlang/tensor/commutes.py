"""Whether a reducer's combine gives the same result in either order of its operands.

A reduction split into lanes or chunks (rfactor) combines its elements in another order than
the loop over the reduce axis did. For a one-value builtin (sum, max, min, prod) that is the
reassociation every compiler allows. A tuple reducer is order-free only if it breaks ties
itself: torch's argmax keeps the smaller index of equal values (ops/reduce.py), but TVM's
tutorial argmax, `select(x[1] >= y[1], x[0], y[0])`, keeps whichever came first, so the
reduction split into lanes would return another index of a repeated maximum than the loop.
`commutes` runs the combiner on pairs that tell them apart (equal values with different
indices, NaNs, infinities, both orders) with the reference evaluator.
"""
from __future__ import annotations

import itertools
from typing import Dict

import numpy as np

from ..expr.functor import substitute
from .op import compute, placeholder
from .reduce import BUILTIN_REDUCERS, CommReducer
from .reference import evaluate

_FLOATS = (0.0, 1.0, -1.0, 1.0, float("nan"), float("inf"), -float("inf"))
_INTS = (0, 1, -1, 3, 1)


def _samples(dtype) -> tuple:
    return _FLOATS if dtype.is_float else tuple(v for v in _INTS if v >= 0 or dtype.kind != "uint")


def commutes(combiner: CommReducer) -> bool:
    """combine(a, b) == combine(b, a) (NaN equal to NaN) on every pair of sample tuples: each
    field 0, +-1, +-inf and NaN (floats) or small integers, equal values with different other
    fields among them. A builtin one-value reducer commutes by definition. Remembered by the
    combiner's text and dtypes (each reduction traces a combiner object of its own; running
    one takes ~2 ms)."""
    if combiner.arity == 1:
        return combiner.name in BUILTIN_REDUCERS
    key = combiner.format() + repr([str(v.dtype) for v in combiner.lhs + combiner.rhs])
    if key not in _KNOWN:
        _KNOWN[key] = _run(combiner)
    return _KNOWN[key]


_KNOWN: Dict[str, bool] = {}       # combiner text and dtypes -> commutes


def _run(combiner: CommReducer) -> bool:
    """The check of commutes on the sample pairs, by the reference evaluator."""
    tuples = list(itertools.product(*(_samples(v.dtype) for v in combiner.lhs)))
    pairs = list(itertools.product(tuples, tuples))
    n = len(pairs)
    a = [placeholder((n,), v.dtype, name=f"a{k}") for k, v in enumerate(combiner.lhs)]
    b = [placeholder((n,), v.dtype, name=f"b{k}") for k, v in enumerate(combiner.lhs)]

    def combined(first, second, tag):
        def field(j):
            return compute((n,), lambda i: substitute(combiner.result[j], {
                **{v: t[i] for v, t in zip(combiner.lhs, first)},
                **{v: t[i] for v, t in zip(combiner.rhs, second)}}), name=f"{tag}{j}")
        return [field(j) for j in range(combiner.arity)]
    ab, ba = combined(a, b, "ab"), combined(b, a, "ba")
    feed = {}
    for k, v in enumerate(combiner.lhs):
        dt = v.dtype.numpy
        feed[a[k]] = np.array([p[0][k] for p in pairs]).astype(dt)
        feed[b[k]] = np.array([p[1][k] for p in pairs]).astype(dt)
    try:
        out = evaluate(ab + ba, feed)
    except Exception:       # a combiner the evaluator cannot run: not known to commute
        return False
    return all(np.array_equal(x, y, equal_nan=np.asarray(x).dtype.kind == "f")
               for x, y in zip(out[:combiner.arity], out[combiner.arity:]))
