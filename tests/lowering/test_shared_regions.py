"""Bound inference once per distinct nest (tile/shared_regions.py): a nest whose stages are an
earlier nest's renamed takes its regions, renamed; counted, and the regions, Tile IR and
numbers are those of inferring every nest."""
from __future__ import annotations

import numpy as np
import pytest

import schedlang as sl
from schedlang.loop.plan import scheduled_snapshot
from schedlang.tile import bound, lower_to_tile_ir
from schedlang.tile.shared_regions import SharedRegions
from tests import programs

N = 37          # not a multiple of the split factors: the tails' guards are in the regions


def _layers(factors, shift=1):
    """x -> layer -> layer ...: each layer a padded-window sum (a stage computed at the split
    outer loop of its consumer, whose region starts at that loop's value); one layer per factor."""
    x = sl.placeholder((N,), name="x")
    cur, stages = x, []
    for i, f in enumerate(factors):
        prev = cur
        pad = sl.compute((N + 2,), lambda a, p=prev: sl.if_then_else(sl.all(a >= 1, a <= N), p[a - 1] * 2.0, 0.0),
                         name=f"pad{i}")
        cur = sl.compute((N,), lambda a, p=pad: p[a] + p[a + shift] + p[a + 2], name=f"win{i}")
        stages.append((pad, cur, f))
    s = sl.create_schedule(cur.op)
    for pad, win, f in stages:
        outer, _ = s[win].split(win.op.axis[0], factor=f)
        s[pad].compute_at(s[win], outer)
    return s, [x, cur]


def _regions(s, args, share):
    b = bound._Bounds(scheduled_snapshot(s, args, None), share)
    regions = b.run()
    return {k: str(v) for k, v in regions.items()}, (b.shared.hits if share else None)


def _reference(x, layers):
    for _ in range(layers):
        p = np.pad(x * 2.0, 1)
        x = p[:-2] + p[1:-1] + p[2:]
    return x


def test_equal_nests_share_one_inference(monkeypatch):
    s, args = _layers([4, 4, 4, 4])                   # the last layer writes the output: not alike
    calls = []
    infer = bound._Bounds.infer
    monkeypatch.setattr(bound._Bounds, "infer", lambda self, plan: calls.append(plan.name) or infer(self, plan))
    shared, hits = _regions(s, args, share=True)
    assert hits == 2                                   # layers 1 and 2 take layer 0's regions
    assert sum(name.startswith("pad") for name in calls) == 2
    calls.clear()
    plain, _ = _regions(s, args, share=False)
    assert sum(name.startswith("pad") for name in calls) == 4
    assert shared == plain


def test_different_nests_are_inferred_each(monkeypatch):
    s, args = _layers([4, 8, 4, 4])                    # layers 0 and 2 alike
    shared, hits = _regions(s, args, share=True)
    assert hits == 1 and shared == _regions(s, args, share=False)[0]
    s, args = _layers([4, 8, 5, 4])                    # every split differs: nothing to share
    assert _regions(s, args, share=True)[1] == 0


def test_same_tile_ir_and_numbers(monkeypatch):
    s, args = _layers([4, 4, 8, 4])
    shared_text = sl.lower(s, args)
    monkeypatch.setattr(SharedRegions, "lookup", lambda self, plan: None)
    plain_text = sl.lower(s, args)
    assert str(shared_text) == str(plain_text)
    monkeypatch.undo()
    f = sl.build(s, args, cache=False)
    x = np.random.default_rng(0).standard_normal(N).astype("float32")
    out = np.zeros(N, dtype="float32")
    f(x, out)
    np.testing.assert_allclose(out, _reference(x, 4), rtol=1e-5, atol=1e-5)


def test_nest_read_from_outside_is_not_shared():
    # pad1 is also read by a stage at the root: inference must report it, not a shared copy
    x = sl.placeholder((N + 4,), name="x")
    pads, wins = [], []
    cur = x
    for i in range(2):
        prev = cur
        pad = sl.compute((N + 4 - 2 * i,), lambda a, p=prev: p[a] * 2.0, name=f"pad{i}")
        cur = sl.compute((N + 2 - 2 * i,), lambda a, p=pad: p[a] + p[a + 2], name=f"win{i}")
        pads.append(pad)
        wins.append(cur)
    extra = sl.compute((N,), lambda a: wins[1][a] + pads[1][a], name="extra")
    s = sl.create_schedule(extra.op)
    for pad, win in zip(pads, wins):
        outer, _ = s[win].split(win.op.axis[0], factor=4)
        s[pad].compute_at(s[win], outer)
    with pytest.raises(sl.ScheduleError, match="also reads 'pad1'"):
        sl.lower(s, [x, extra])


def _nest_hits(s, args, monkeypatch):
    """(Loop and Tile IR text, Tile IR nests taken from an equal one) of lowering s, and the text
    with sharing off."""
    from schedlang.loop import shared_nests
    hits = []
    stage_nest = shared_nests.SharedNests.stage_nest

    def counted(self, root):
        before = self.hits
        out = stage_nest(self, root)
        hits.append(self.hits - before)
        return out
    monkeypatch.setattr(shared_nests.SharedNests, "stage_nest", counted)
    lower_to_tile_ir(s, args)
    count = sum(hits)
    shared = str(sl.lower(s, args, level="loop")) + str(sl.lower(s, args))
    monkeypatch.setattr(shared_nests.SharedNests, "stage_nest", lambda self, root: self.builder.stage_nest(root))
    monkeypatch.setattr(SharedRegions, "lookup", lambda self, plan: None)
    plain = str(sl.lower(s, args, level="loop")) + str(sl.lower(s, args))
    monkeypatch.undo()
    return shared, count, plain


def test_equal_nests_built_once(monkeypatch):
    s, args = _layers([4, 4, 4, 4])
    shared, hits, plain = _nest_hits(s, args, monkeypatch)
    assert hits == 2 and shared == plain               # layers 1 and 2 renamed from layer 0
    s, args = _layers([4, 8, 5, 4])
    shared, hits, plain = _nest_hits(s, args, monkeypatch)
    assert hits == 0 and shared == plain


def test_tuple_reduction_nests_are_built_each(monkeypatch):
    # a tuple reduction's temporaries are variables named after its buffer: never renamed from another nest
    x = sl.placeholder((6, N), name="x")
    argmax = programs.arg_reducer("argmax")
    outs = []
    for i in range(3):
        k = sl.reduce_axis((0, N), name="k")
        outs.append(sl.compute((6,), lambda r, k=k: argmax((k, x[r, k]), axis=k), name=f"am{i}"))
    total = sl.compute((6,), lambda r: outs[0][1][r] + outs[1][1][r] + outs[2][1][r], name="total")
    s = sl.create_schedule(total.op)
    shared, hits, plain = _nest_hits(s, [x, total], monkeypatch)
    assert hits == 0 and shared == plain
    assert "am1" in shared
    f = sl.build(s, [x, total], cache=False)
    a = np.random.default_rng(1).standard_normal((6, N)).astype("float32")
    out = np.zeros(6, dtype="float32")
    f(a, out)
    np.testing.assert_allclose(out, 3 * a.max(axis=1), rtol=1e-6)
