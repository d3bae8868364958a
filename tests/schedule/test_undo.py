"""Undo points (Schedule.snapshot / restore / release / all_or_nothing): primitives that fail
midway leave the schedule as it was. The snapshot is a journal (a stage saves its state the
first time it changes), so these tests change stages every way the primitives do: new stages
(cache_write, cache_read, rfactor), other stages moved by a split (compute_at's loop retargeted),
in-place edits of a stage's lists and dicts, attributes a primitive adds."""
import warnings

import pytest

import schedlang as sl
from schedlang.errors import InternalError
from schedlang.topi import cpu
from schedlang.torch import schedules
from schedlang.torch.fuse import fuse
from tests import programs


def state(s):
    """Everything a schedule and its stages hold, as comparable values (containers as tuples)."""
    def plain(v):
        if isinstance(v, list):
            return ("list", tuple(plain(x) for x in v))
        if isinstance(v, dict):
            return ("dict", tuple((k, plain(x)) for k, x in v.items()))
        return v
    stages = tuple((st, tuple((k, plain(v)) for k, v in sorted(vars(st).items()) if k != "schedule"))
                   for st in s.stages)
    return plain(s.stages), plain(s.steps), plain(s._size_vars), stages, len(s.stage_map)


def gemm_and_rows():
    """A packed GEMM and a row sum, in one schedule."""
    A, B, packed, C = programs.packed_gemm(32, 32, 32, bn=8)
    X = sl.placeholder((8, 64), name="X")
    k = sl.reduce_axis((0, 64), name="k")
    R = sl.compute((8,), lambda i: sl.sum(X[i, k], axis=k), name="R")
    return [A, B, C, X, R], [C.op, R.op], C, R, X


def every_kind_of_change(s, C, R, X):
    """The TVM GEMM tutorial's schedule (cache_write, tile, compute_at, split, reorder, unroll,
    vectorize, parallel), then more primitives on the row sum and on stages placed before."""
    cpu.schedule_matmul_packed(s, C)
    ko, ki = s[R].split(R.op.reduce_axis[0], factor=8)
    RF = s.rfactor(R, ki)
    s[RF].pragma(s[RF].op.axis[0], "auto_unroll_max_step", 16)
    s[RF].storage_align(s[RF].op.axis[0], 8, 1)
    XC = s.cache_read(X, "global", [RF])
    s[XC].compute_at(s[RF], s[RF].op.axis[0])
    s[RF].split(s[RF].op.axis[0], factor=2)          # retargets XC's attachment (another stage)
    s[RF].set_scope("global")
    s[R].fuse()                                      # a singleton loop


def test_a_failing_block_leaves_the_schedule_as_it_was():
    args, outs, C, R, X = gemm_and_rows()
    s = sl.create_schedule(outs)
    before, text = state(s), sl.lower(s, args, level="tile")
    with pytest.raises(ZeroDivisionError):
        with s.all_or_nothing():
            every_kind_of_change(s, C, R, X)
            assert len(s.stages) > len(before[3]) and state(s) != before
            1 / 0
    assert state(s) == before
    assert sl.lower(s, args, level="tile") == text
    every_kind_of_change(s, C, R, X)                 # the restored schedule takes the same primitives
    fresh = sl.create_schedule(outs)
    fresh.apply_steps(s.steps)
    assert sl.lower(fresh, args, level="tile") == sl.lower(s, args, level="tile")


def test_a_block_that_succeeds_keeps_its_primitives_and_nests():
    args, outs, C, R, X = gemm_and_rows()
    s, plain = sl.create_schedule(outs), sl.create_schedule(outs)
    every_kind_of_change(plain, C, R, X)
    start, outer = state(s), s.snapshot()
    with s.all_or_nothing():
        cpu.schedule_matmul_packed(s, C)
    middle = state(s)
    inner = s.snapshot()
    s[R].split(R.op.reduce_axis[0], factor=8)
    s[C].pragma(s[C].leaf_iter_vars[-1], "unroll_explicit", False)  # a stage the released block changed
    s.restore(inner)
    assert state(s) == middle
    with pytest.raises(InternalError):
        s.restore(inner)                              # closed: restoring it again is an error
    s.restore(outer)                                  # undoes the released block too
    assert state(s) == start
    every_kind_of_change(s, C, R, X)
    assert s.steps == plain.steps and s._undo == []


def test_apply_steps_is_all_or_nothing():
    args, outs, C, R, X = gemm_and_rows()
    donor = sl.create_schedule(outs)
    every_kind_of_change(donor, C, R, X)
    s = sl.create_schedule(outs)
    before = state(s)
    bad = list(donor.steps) + [donor.steps[0]]        # the GEMM's cache_write again: refused
    with pytest.raises(sl.ScheduleError):
        s.apply_steps(bad)
    assert state(s) == before


def test_default_schedule_keeps_plain_loops_of_a_kernel_whose_rules_fail_midway(monkeypatch):
    """The frontend's seam: each kernel's rules run all or nothing."""
    args, outs, C, R, X = gemm_and_rows()
    real = schedules.schedule_group

    def fails_after_its_primitives(s, group, target):
        real(s, group, target)
        raise sl.ScheduleError("test", group.anchor.name, "fails after its primitives")
    monkeypatch.setattr(schedules, "schedule_group", fails_after_its_primitives)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = schedules.default_schedule([C, R])
    assert sum("keeps its plain loops" in str(w.message) for w in caught) == 2
    plain = sl.create_schedule(outs)
    fuse(plain)
    assert [st.name for st in s.stages] == [st.name for st in plain.stages] and s.steps == plain.steps
    assert sl.lower(s, args, level="tile") == sl.lower(plain, args, level="tile")
