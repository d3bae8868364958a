"""The module's temporaries placed in one arena (kernel/memory_plan.py): temporaries live in a
common kernel call never overlap, disjoint lifetimes share bytes, results unchanged."""
import numpy as np

import schedlang as sl
from schedlang.expr.nodes import Buffer
from schedlang.kernel.memory_plan import plan_arena


def _bufs(*sizes):
    return [Buffer(f"t{i}", (n,), sl.dtype("float32")) for i, n in enumerate(sizes)]


def test_disjoint_lifetimes_share_and_live_ones_never_overlap():
    t = _bufs(100, 50, 100, 30)
    calls = [[t[0]], [t[0], t[1]], [t[1], t[2]], [t[2], t[3]]]
    arena, off = plan_arena(t, calls, lambda b: 4 * b.size, 64)
    live = {b: [i for i, c in enumerate(calls) if b in c] for b in t}
    size = {b: -(-4 * b.size // 64) * 64 for b in t}
    for a in t:
        assert off[a] % 64 == 0 and off[a] + size[a] <= arena
        for b in t:
            if a is not b and set(live[a]) & set(live[b]):
                assert off[a] + size[a] <= off[b] or off[b] + size[b] <= off[a]
    assert arena < sum(size.values())          # t0 and t2 (never live together) share
    assert off[t[0]] == off[t[2]]


def test_unused_temporary_is_live_throughout():
    t = _bufs(10, 10)
    arena, off = plan_arena(t, [[t[0]], [t[0]]], lambda b: 4 * b.size, 64)
    assert arena == 128 and off[t[0]] != off[t[1]]


def _chain(shape, links):
    A = sl.placeholder(shape, name="A")
    ts = [A]
    for k in range(links):
        prev = ts[-1]
        ts.append(sl.compute(shape, (lambda p, k: lambda i, j: p[i, j] * 2.0 + float(k))(prev, k), name=f"T{k}"))
    D = sl.compute(shape, lambda i, j: ts[-1][i, j] + ts[2][i, j], name="D")    # T1 live to the end
    return A, D


def test_chain_of_kernels_shares_an_arena_and_matches_the_reference():
    A, D = _chain((37, 53), 5)
    mod = sl.build(sl.create_schedule(D.op), [A, D])
    src = mod.get_source()
    assert src.count("call ptr @aligned_alloc") == 1 and "temps.arena" in src
    a = np.random.default_rng(0).random((37, 53)).astype("float32")
    d = np.zeros_like(a)
    mod(a, d)
    np.testing.assert_allclose(d, sl.reference([D], {A: a})[0], rtol=1e-6)


def test_nothing_to_share_keeps_one_allocation_per_temporary():
    A, D = _chain((5, 7), 2)     # T0 and T1 both live in D's call
    src = sl.build(sl.create_schedule(D.op), [A, D]).get_source()
    assert "temps.arena" not in src and src.count("call ptr @sl.temps.take") == 2    # a kept block each
