"""LoopRanges (expr/ranges.py): the ranges of the loops around a point, as a walk enters and leaves them."""
import pytest

from schedlang.errors import InternalError
from schedlang.expr.nodes import Var
from schedlang.expr.ranges import LoopRanges
from schedlang.expr.simplify import simplify


def test_scopes_nest_and_restore_a_shadowed_range():
    i, n = Var("i"), Var("n")
    r = LoopRanges({n: (1, 100)})
    with r.loop(i, 8):
        assert r[i] == (0, 7)
        assert simplify(i // 8, r).value == 0          # a reader sees the range while in force
        r.bind(n, 4, 4)                                # a let shadows the outer range
        assert r[n] == (4, 4)
        r.leave(n)
        assert r[n] == (1, 100)
    assert i not in r and r[n] == (1, 100)


def test_version_and_proof_memo_change_with_the_ranges():
    i = Var("i")
    r = LoopRanges()
    memo, version = r.proof_memo(), r.version
    assert r.proof_memo() is memo
    r.enter(i, 4)
    assert r.version != version and r.proof_memo() is not memo
    r.leave(i)


def test_symbolic_ends_and_constant_only():
    i, n = Var("i"), Var("n")
    r = LoopRanges()
    r.enter(i, n)
    assert r.symbolic and r[i][0] == 0
    r.leave(i)
    assert not r.symbolic
    c = LoopRanges(constant_only=True)
    with c.loop(i, n):
        assert i not in c                 # a symbolic extent gives no range here
    with c.loop(i, None):
        assert i not in c


def test_leave_outside_its_scope_is_an_internal_error():
    i, j = Var("i"), Var("j")
    r = LoopRanges()
    r.enter(i, 3)
    with pytest.raises(InternalError, match="leave"):
        r.leave(j)
