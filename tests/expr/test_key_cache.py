"""expr.equality.key keeps a compound node's key on the node: asked again, the same key;
equal for a structurally equal node over the same variables; and never carried over by a
pickled or deep-copied node, whose variables are other objects (its key names them by id)."""
import copy
import pickle

import schedlang as sl
from schedlang.expr.equality import equal, key


def test_kept_and_structural():
    x, y = sl.Var("x"), sl.Var("y")
    e = (x + 1) * 3 // 7
    k = key(e)
    assert key(e) is k
    assert key((x + 1) * 3 // 7) == k
    assert key((y + 1) * 3 // 7) != k and key((x + 2) * 3 // 7) != k


def test_copies_get_their_own_keys():
    x = sl.Var("x")
    e = (x + 1) * 3
    k = key(e)
    for again in (pickle.loads(pickle.dumps(e)), copy.deepcopy(e)):
        assert not equal(again, e)              # another x
        assert key(again) != k
        assert key(again) == key((again.a.a + 1) * 3)   # over its own x
