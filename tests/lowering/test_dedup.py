"""A stage nest that repeats an earlier one on other buffers is lowered and compiled once
(kernel/dedup.py; issue 17 item 6): its kernel calls the first one's LLVM function, and
every kernel still computes its own outputs. What differs in anything but names is kept
apart: constants (signs of zero included), shapes, dtypes, a buffer read twice vs two buffers."""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

import schedlang as sl
from schedlang.errors import InternalError
from schedlang.kernel.dedup import alpha_key, rename, renaming
from schedlang.loop.functor import walk_stmts
from schedlang.loop.nodes import StageNest


def _layers(n, shapes, value=1.0, dtype="float32"):
    """x -> relu(x * w_i + value) n times (each layer a root stage with its own weight), then
    the tensors in call order."""
    x = sl.placeholder(shapes[0], name="x", dtype=dtype)
    args, cur = [x], x
    for i in range(n):
        shape = shapes[min(i, len(shapes) - 1)]
        w = sl.placeholder(shape, name=f"w{i}", dtype=dtype)
        prev = cur
        cur = sl.compute(shape, lambda a, b, p=prev, w=w: sl.max(p[a % p.shape[0], b % p.shape[1]] * w[a, b]
                                                               + sl.const(value, dtype), sl.const(0.0, dtype)),
                         name=f"layer{i}")
        args.append(w)
    s = sl.create_schedule(cur.op)
    for t in list(s.stages):
        if t.op.name.startswith("layer") and int(t.op.output(0).shape[1]) % 8 == 0:
            s[t.op].vectorize(t.op.axis[1])
    return s, args + [cur]


def _defined_kernels(mod) -> int:
    """Kernel functions in the module's LLVM IR (not the outlined bodies of parallel loops)."""
    names = re.findall(r"^define internal void @([\w.]+)\(", mod.get_source(), re.M)
    return len([n for n in names if ".par" not in n])


def _reference(arrays, n, value):
    cur = arrays[0]
    for i in range(n):
        w = arrays[1 + i]
        rows = np.arange(w.shape[0]) % cur.shape[0]
        cols = np.arange(w.shape[1]) % cur.shape[1]
        cur = np.maximum(cur[rows][:, cols] * w + np.float32(value), 0)
    return cur


@pytest.mark.parametrize("shapes, distinct", [([(4, 16)], 1), ([(4, 16), (4, 24)], 3), ([(5, 7)], 1), ([(4, 16), (4, 16), (2, 8)], 3)])
def test_repeated_layers_share_one_function_and_compute_their_own(shapes, distinct):
    n = 4
    s, args = _layers(n, shapes)
    mod = sl.build(s, args, cache=False)
    assert _defined_kernels(mod) == distinct
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(tuple(int(e) for e in a.shape)).astype("float32") for a in args]
    mod(*arrays)
    np.testing.assert_allclose(arrays[-1], _reference(arrays, n, 1.0), rtol=1e-5, atol=1e-6)


def test_bounds_checked_builds_keep_one_function_per_kernel():
    s, args = _layers(3, [(4, 16)])
    mod = sl.build(s, args, target=sl.Target.create("llvm").with_options(bounds_check=True), cache=False)
    assert _defined_kernels(mod) == 3          # reports name each kernel's own buffers


def _nests(s, args):
    """The root stage nests of the scheduled program's Tile IR."""
    tile = sl.lower(s, args, level="tile").ir["tile"]
    return [x for x in walk_stmts(tile.body) if isinstance(x, StageNest)]


def _one_stage(expr_of, shape=(8,), dtype="float32", prefix=""):
    a = sl.placeholder(shape, name=prefix + "a", dtype=dtype)
    b = sl.placeholder(shape, name=prefix + "b", dtype=dtype)
    out = sl.compute(shape, lambda i: expr_of(a, b, i), name=prefix + "out")
    (nest,) = _nests(sl.create_schedule(out.op), [a, b, out])
    return nest


_TABLE: dict = {}


def _key_in_one_table(stmt, **kw):
    """alpha_key with one table for the whole file: keys are compared only within a table."""
    return alpha_key(stmt, table=_TABLE, **kw)


def test_keys_tell_apart_what_is_not_a_renaming():
    def key(*a, **k):
        return _key_in_one_table(_one_stage(*a, **k).body)[0]

    base = key(lambda a, b, i: a[i] + b[i])
    assert key(lambda a, b, i: a[i] + b[i], prefix="other_") == base      # other names, the same code
    assert key(lambda a, b, i: a[i] + a[i]) != base                        # one buffer read twice
    assert key(lambda a, b, i: b[i] + a[i]) == key(lambda a, b, i: a[i] + b[i], prefix="x")   # positional
    assert key(lambda a, b, i: a[i] + b[i], shape=(9,)) != base
    assert key(lambda a, b, i: a[i] + b[i], dtype="float64") != base
    assert key(lambda a, b, i: a[i] * sl.const(0.0, "float32")) != key(lambda a, b, i: a[i] * sl.const(-0.0, "float32"))
    assert key(lambda a, b, i: a[i] + sl.const(1, "float32")) != key(lambda a, b, i: a[i] + sl.const(2, "float32"))


def test_rename_gives_the_other_nest():
    first = _one_stage(lambda a, b, i: a[i] * b[i] + 1.0, prefix="p_")
    second = _one_stage(lambda a, b, i: a[i] * b[i] + 1.0, prefix="q_")
    (k1, keyer1), (k2, keyer2) = _key_in_one_table(first.body), _key_in_one_table(second.body)
    assert k1 == k2
    renamed = rename(first.body, *renaming(keyer1, keyer2))
    k3, keyer3 = _key_in_one_table(renamed)
    assert k3 == k2
    assert [id(b) for b in keyer3.buffers] == [id(b) for b in keyer2.buffers]
    assert [id(v) for v in keyer3.vars] == [id(v) for v in keyer2.vars]
    # what the map leaves out (made by a pass) is copied, not shared between kernels
    fresh = rename(first.body, {}, {})
    assert _key_in_one_table(fresh)[0] == k1
    assert not set(map(id, _key_in_one_table(fresh)[1].buffers)) & set(map(id, keyer1.buffers))


def test_renamed_nodes_are_those_the_constructors_make():
    """rename builds the nodes of a dtype-keeping renaming without their checks; what it makes
    prints, keys and types as the checked constructors' nodes do, and a map that changes a
    dtype is checked node by node (the renamed body would be ill-typed)."""
    first = _one_stage(lambda a, b, i: sl.max(a[i] * b[i] + 1.0, a[i]), prefix="p_")
    second = _one_stage(lambda a, b, i: sl.max(a[i] * b[i] + 1.0, a[i]), prefix="q_")
    (_, keyer1), (k2, keyer2) = _key_in_one_table(first.body), _key_in_one_table(second.body)
    renamed = rename(first.body, *renaming(keyer1, keyer2))
    assert str(renamed) == str(second.body)
    assert _key_in_one_table(renamed)[0] == k2
    loads = [e for s in walk_stmts(renamed) for e in _exprs(s) if type(e).__name__ == "Load"]
    assert loads and {b.name for b in (e.buffer for e in loads)} == {"q_a", "q_b"}
    assert all(e.dtype == sl.expr.nodes.Load(e.buffer, e.indices, e.predicate).dtype for e in loads)
    a_buf = keyer1.buffers[[b.name for b in keyer1.buffers].index("p_a")]
    with pytest.raises(InternalError, match="dtype"):
        rename(first.body, {}, {a_buf: replace(a_buf, dtype=sl.dtypes.int32)})


def _exprs(s):
    from schedlang.expr.functor import walk
    from schedlang.loop.functor import stmt_exprs
    return [n for e in stmt_exprs(s) for n in walk(e)]


def test_each_copy_is_its_kernel_renamed():
    s, args = _layers(5, [(4, 16), (4, 16), (3, 8)])
    km = sl.lower(s, args, level="kernel").ir["kernel"]
    assert len(km.copies) == len(km.kernels)
    copies = [(j, c) for j, c in enumerate(km.copies) if c is not None]
    assert len(copies) == 2          # layer1 repeats layer0; layer4 repeats layer3 (layer2 changes shape)
    for j, c in copies:
        first, again = km.kernels[c.of], km.kernels[j]
        assert c.of < j
        assert _key_in_one_table(first.body, bound=first.params + first.sizes)[0] == \
            _key_in_one_table(again.body, bound=c.params + c.sizes)[0]


def test_copies_over_other_size_variables_get_their_own_sizes():
    n, m = sl.var("n"), sl.var("m")
    A = sl.placeholder((n,), name="A")
    C = sl.placeholder((m,), name="C")
    B = sl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    D = sl.compute((m,), lambda i: C[i] * 2.0 + 1.0, name="D")
    s = sl.create_schedule([B.op, D.op])
    for t in (B, D):
        outer, inner = s[t].split(t.op.axis[0], factor=8)
        s[t].vectorize(inner)
    mod = sl.build(s, [A, C, B, D], cache=False)
    assert _defined_kernels(mod) == 1
    rng = np.random.default_rng(1)
    for sizes in ((37, 70), (70, 37), (8, 1)):
        a, c = (rng.standard_normal(k).astype("float32") for k in sizes)
        b, d = np.zeros(sizes[0], "float32"), np.zeros(sizes[1], "float32")
        mod(a, c, b, d)
        np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(d, c * 2 + 1, rtol=1e-6)
