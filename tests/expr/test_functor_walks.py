"""The traversals that skip work: var_set (a node's variables, kept on the node), substitute
(returns a subtree that mentions none of the mapping's variables as it is) and walk with a
shared set of walked nodes."""
import copy
import pickle

import schedlang as sl
from schedlang.expr.functor import free_vars, substitute, var_set, walk
from schedlang.expr.nodes import Const


def test_var_set_is_the_free_variables():
    x, y, n = sl.Var("x"), sl.Var("y"), sl.Var("n")
    e = (x * 4 + y) // 3 + (x - n) * 2
    assert var_set(e) == frozenset(free_vars(e)) == {x, y, n}
    assert var_set(Const(3)) == frozenset()
    assert var_set(e) is var_set(e)           # kept on the node


def test_copies_have_their_own_variables():
    x = sl.Var("x")
    e = (x + 1) * 3
    var_set(e)
    for again in (pickle.loads(pickle.dumps(e)), copy.deepcopy(e)):
        (other,) = free_vars(again)
        assert other is not x
        assert var_set(again) == {other}
        assert substitute(again, {other: Const(2)}).a.a.value == 2


def test_substitute_keeps_untouched_subtrees_and_replaces_the_rest():
    i, j = sl.Var("i"), sl.Var("j")
    untouched = (j * 7 + 1) // 2
    e = untouched + i * 3
    got = substitute(e, {i: Const(5)})
    assert got.a is untouched
    assert str(got) == str(untouched + Const(5) * 3)
    # a mapping far larger than the node's variables, and the other way round
    many = {sl.Var(f"v{k}"): Const(k) for k in range(200)}
    assert substitute(e, many) is e
    many[j] = Const(1)
    assert str(substitute(e, many)) == str((Const(1) * 7 + 1) // 2 + i * 3)


def test_walks_sharing_their_seen_set_visit_each_node_once():
    x, y = sl.Var("x"), sl.Var("y")
    shared = x * 3 + 1
    first, second = shared + y, shared - 2
    seen = set()
    one = list(walk(first, seen))
    two = list(walk(second, seen))
    assert {id(n) for n in one} == {id(n) for n in walk(first)}
    assert not {id(n) for n in two} & {id(n) for n in one}      # shared and below: walked once
    assert {id(n) for n in one + two} == {id(n) for n in walk(first)} | {id(n) for n in walk(second)}


def _made_in_expr(obj) -> bool:
    """obj is a function of schedlang/expr, a closure cell holding one, or a frame running one."""
    import types
    if isinstance(obj, types.CellType):
        try:
            obj = obj.cell_contents
        except ValueError:          # an empty cell
            return False
    code = getattr(obj, "__code__", None) or getattr(obj, "f_code", None)
    return code is not None and "schedlang/expr/" in code.co_filename.replace("\\", "/")


def test_the_rewriting_helpers_leave_no_reference_cycles():
    """substitute, rewrite_post_order and linear_form leave nothing for the cyclic collector (a
    recursive closure refers to itself: a compile of ResNet-50 left a million such objects,
    whose collection took over a second); and linear_form keeps its atoms' first-seen order."""
    import gc
    from schedlang.expr.functor import rewrite_post_order
    from schedlang.expr.linear import linear_form
    x, y, n = sl.Var("x"), sl.Var("y"), sl.Var("n")
    e = (x * 4 + y - 3) * 2 + (n - x) + 7 * y
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)      # what the collector finds is kept in gc.garbage, to be read
    try:
        terms, constant = linear_form(e)
        moved = substitute(e, {x: y + 1})
        same = rewrite_post_order(e, lambda node: node)
        gc.collect()
        # only the helpers' own garbage counts: a thread an earlier test of the worker left
        # running (a kernel cache writer, a tuning executor) may drop cycles of its own meanwhile
        # (the suite once found 314 objects here)
        assert [o for o in gc.garbage if _made_in_expr(o)] == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert [(str(a), c) for a, c in terms] == [("x", 7), ("y", 9), ("n", 1)] and constant == -6
    assert x not in var_set(moved) and same is e
