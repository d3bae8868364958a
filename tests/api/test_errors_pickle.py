"""The three error channels survive pickling, so a process pool or a cluster measurer can
hand them back: every field and the message come back unchanged."""
import concurrent.futures
import multiprocessing
import pickle

import pytest

import schedlang as sl
from schedlang.errors import InternalError, LoweringError, ScheduleError


def _schedule_error():
    return ScheduleError("vectorize", "C.local", "cannot vectorize a reduction axis", axis="k.outer",
                         choices=["i.c", "j.c"], hint="rfactor the reduction first")


FIELDS = {
    ScheduleError: ("primitive", "stage", "axis", "problem", "choices", "hint"),
    LoweringError: ("stage", "problem"),
    InternalError: ("problem",),
}


def _errors():
    return [_schedule_error(), ScheduleError("split", None, "no stage"),
            ScheduleError("fuse", "C", "no choices", choices=[]),
            LoweringError("bound inference", "region of 'B' is unbounded"),
            InternalError("Binary of mismatched dtypes")]


def _same(a, b):
    assert type(a) is type(b)
    assert str(a) == str(b)
    assert a.args == b.args
    for field in FIELDS[type(a)]:
        assert getattr(a, field) == getattr(b, field), field


@pytest.mark.parametrize("err", _errors(), ids=lambda e: type(e).__name__)
def test_round_trip_keeps_fields_and_message(err):
    _same(err, pickle.loads(pickle.dumps(err)))


def test_real_schedule_error_round_trips():
    A = sl.placeholder((8,), name="A")
    B = sl.compute((8,), lambda i: A[i] + 1, name="B")
    s = sl.create_schedule(B.op)
    with pytest.raises(sl.ScheduleError) as info:
        s[B].split(s[B].op.axis[0], factor=0)
    _same(info.value, pickle.loads(pickle.dumps(info.value)))


def _raise(index):
    raise _errors()[index]


def test_errors_cross_a_spawned_process_pool():
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        futures = [pool.submit(_raise, i) for i in range(len(_errors()))]
        for expected, fut in zip(_errors(), futures):
            err = fut.exception(timeout=120)
            _same(expected, err)
