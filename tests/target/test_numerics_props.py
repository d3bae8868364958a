"""Random integer and float expressions built into a compute, scalar and vectorized, give
numpy's results bit for bit (wrap-around integers, x // 0 == x % 0 == 0, IEEE floats, float
floor division and modulo). Math functions (our polynomial exp, log ...) are left out: they
have their own accuracy tests (test_mathlib.py). Float min/max are left out too: with equal
zeros of both signs LLVM's minimum/maximum may return either (numpy returns the first).

The integer cases divide by zero and INT_MIN by -1, which kill a process through SIGFPE on
a build without the guards: they run in a child process."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlang as sl
from schedlang.expr.functor import map_children
from schedlang.expr.nodes import Binary, Load

from ..expr.exprgen import Vars, evaluate, same_value, trees

N = 16          # elements: two vectors of 8 lanes when vectorized
BUILDS = settings(max_examples=25, derandomize=True, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def no_float_min_max(e) -> bool:
    if isinstance(e, Binary) and e.dtype.is_float and e.op in ("min", "max"):
        return False
    return all(no_float_min_max(c) for c in _children(e))


def _children(e):
    out = []
    map_children(e, lambda c: out.append(c) or c)
    return out


def build_compute(e, atoms: Vars, vectorize: bool):
    """C[i] = e with the tree's loads d0, d1 read from inputs A[i], B[i]."""
    A = sl.placeholder((N,), name="A", dtype=str(atoms.dt))
    B = sl.placeholder((N,), name="B", dtype=str(atoms.dt))

    def body(i):
        reads = {atoms.data[0].buffer: A[i], atoms.data[1].buffer: B[i]}

        def swap(node):
            if isinstance(node, Load):
                return reads[node.buffer]
            return map_children(node, swap)
        return swap(e)

    C = sl.compute((N,), body, name="C")
    s = sl.create_schedule(C.op)
    if vectorize:
        _, inner = s[C].split(C.op.axis[0], factor=8)
        s[C].vectorize(inner)
    used = [t for t, d in zip((A, B), atoms.data) if any(x.buffer is d.buffer for x in _loads(e))]
    return sl.build(s, used + [C]), used, C


def _loads(e):
    if isinstance(e, Load):
        yield e
    for c in _children(e):
        yield from _loads(c)


def inputs(atoms: Vars, data):
    dt = atoms.dt
    if dt.is_int:
        edges = [dt.min_int, dt.max_int, 0, -1, 1, 2, 7]
        values = st.one_of(st.sampled_from([v for v in edges if dt.min_int <= v <= dt.max_int]),
                           st.integers(dt.min_int, dt.max_int))
    else:
        values = st.one_of(st.floats(width=dt.bits),
                           st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, float("inf"), float("nan"), 3.0]))
    return [np.array(data.draw(st.lists(values, min_size=N, max_size=N), label=name), dtype=dt.numpy)
            for name in ("a", "b")]


CHILD = "SCHEDLANG_NUMERICS_CHILD"


def test_integer_computes_match_numpy_in_a_child_process():
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, **{CHILD: "1", "PYTHONPATH": str(root)})
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "ignore",
                           f"{__file__}::test_integer_compute_matches_numpy"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "3 passed" in done.stdout


@pytest.mark.skipif(not os.environ.get(CHILD), reason="runs in the child process of the test above")
@pytest.mark.parametrize("dt", ["int32", "int8", "uint16"])
@BUILDS
@given(data=st.data())
def test_integer_compute_matches_numpy(dt, data):
    check_compute(dt, data)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@BUILDS
@given(data=st.data())
def test_float_compute_matches_numpy_bit_for_bit(dt, data):
    check_compute(dt, data)


@functools.lru_cache(maxsize=None)
def atoms_and_trees(dt: str):
    """One Vars and one tree strategy per dtype for every example: hypothesis validates a
    (recursive) strategy once per strategy object, which a new one per example paid each
    time (tests/expr/test_simplify_props.py does the same). The draws are the same."""
    atoms = Vars(dt)
    atoms.loops = []                   # data only: the compute's own index is not part of the tree
    return atoms, trees(atoms, max_leaves=6).filter(no_float_min_max)


def check_compute(dt, data):
    atoms, tree = atoms_and_trees(dt)
    e = data.draw(tree, label="expr")
    if not list(_loads(e)):
        return                         # a constant: nothing to compute per element
    a, b = inputs(atoms, data)
    want = np.array([evaluate(e, {atoms.data[0].buffer: a[k], atoms.data[1].buffer: b[k]}) for k in range(N)])
    for vectorize in (False, True):
        mod, used, C = build_compute(e, atoms, vectorize)
        out = np.zeros(N, C.dtype_obj.numpy)
        feed = {"A": a, "B": b}
        mod(*[feed[t.name] for t in used], out)
        bad = [k for k in range(N) if not same_value(out[k], want[k].astype(C.dtype_obj.numpy))]
        assert not bad, (f"{'vectorized' if vectorize else 'scalar'} {C.op.body}: at {bad[:4]} got "
                         f"{out[bad[:4]]} want {want[bad[:4]]} for a={a[bad[:4]]} b={b[bad[:4]]}")
