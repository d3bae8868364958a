"""What TVM's classic te accepts, accepted here with TVM's meaning: intermediates and unused
placeholders in the argument list, free-form pragmas, fuse() of zero or one axis, rfactor
after a data-parallel split, cache_write after split/reorder with the user's reduce axes."""
import warnings

import numpy as np
import pytest

import schedlang as sl
from tests import programs
from tests.tvm_ports.check import assert_close, build_and_run, check_chain


def _chain(n=8):
    return programs.chain((n, n))


def _check_and_replay(s, A, C, seed):
    """The chain computes right, and the schedule replays from its JSON to the same loop nest."""
    check_chain(s, A, C, seed)
    again = sl.create_schedule(C.op).apply_json(s.to_json())
    assert sl.lower(again, [A, C]) == sl.lower(s, [A, C])


def _gemm(M=10, N=12, K=9):
    A, B, C = programs.gemm(M, N, K)
    rng = np.random.default_rng(0)
    a, b = rng.random((M, K), "float32"), rng.random((K, N), "float32")
    return A, B, C.op.reduce_axis[0], C, a, b


# ---- the argument list -------------------------------------------------------------------
def test_attached_intermediate_in_the_arguments_is_written_through():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    a = np.random.default_rng(1).random((8, 8), "float32")
    b, c = build_and_run(s, [A, B, C], [a], [a, a])
    assert_close(b, a * 2)
    assert_close(c, a * 2 + 1)
    assert "B[i, j] = A[i, j] * 2.0" in sl.lower(s, [A, B, C])


def test_attached_intermediate_argument_holds_only_what_its_reader_needs():
    A = sl.placeholder((8,), name="A")
    B = sl.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = sl.compute((4,), lambda i: B[i * 2], name="C")    # reads the even elements only
    s = sl.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    a = np.arange(8, dtype="float32")
    b, c = build_and_run(s, [A, B, C], [a], [a, a[:4]])
    assert_close(c, a[::2] + 1)
    assert_close(b[::2], a[::2] + 1)
    assert (b[1::2] == 7).all()          # TVM's meaning: the odd elements are never computed


def test_inlined_intermediate_in_the_arguments_warns_and_stays_unwritten():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    s[B].compute_inline()
    a = np.random.default_rng(2).random((8, 8), "float32")
    with pytest.warns(UserWarning, match="'B' is inlined .* never writes that argument"):
        b, c = build_and_run(s, [A, B, C], [a], [a, a])
    assert (b == 7).all()
    assert_close(c, a * 2 + 1)


def test_unused_placeholder_in_the_arguments():
    A, B, C = _chain()
    U = sl.placeholder((3, 5), name="U", dtype="int32")
    s = sl.create_schedule(C.op)
    text = sl.lower(s, [A, U, C])
    assert "U: i32[3, 5]" in text
    a = np.random.default_rng(3).random((8, 8), "float32")
    u = np.zeros((3, 5), "int32")
    c = np.zeros((8, 8), "float32")
    sl.build(s, [A, U, C])(a, u, c)
    assert_close(c, a * 2 + 1)
    with pytest.raises(ValueError, match="shape"):
        sl.build(s, [A, U, C])(a, np.zeros((2, 5), "int32"), c)


def test_unused_placeholder_listed_twice():
    A, B, C = _chain()
    U = sl.placeholder((3,), name="U")
    with pytest.raises(ValueError, match="listed twice"):
        sl.lower(sl.create_schedule(C.op), [A, U, U, C])


# ---- pragma ------------------------------------------------------------------------------
def test_free_form_pragma_is_kept_printed_and_ignored_by_codegen():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    s[C].pragma(C.op.axis[0], "parallel_launch_point")
    s[C].pragma(C.op.axis[1], "my_vendor_hint", 3)
    tile = sl.lower(s, [A, C])
    assert "pragma parallel_launch_point=None" in tile and "pragma my_vendor_hint=3" in tile
    assert "my_vendor_hint: 3" in sl.lower(s, [A, C], level="kernel")
    check_chain(s, A, C, seed=4)
    again = sl.create_schedule(C.op).apply_json(s.to_json())
    assert sl.lower(again, [A, C]) == tile


# ---- fuse --------------------------------------------------------------------------------
def test_fuse_of_no_axes_adds_an_outer_unit_loop():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    one = s[C].fuse()
    assert one.dom.extent == 1 and s[C].leaf_iter_vars[0] is one
    s[B].compute_at(s[C], one)
    assert "singleton = s['C'].fuse()" in str(s).replace("C_singleton", "singleton")
    _check_and_replay(s, A, C, seed=5)


def test_fuse_of_one_axis_returns_it():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    i = C.op.axis[0]
    assert s[C].fuse(i) is i and s[C].fuse([i]) is i
    assert s.steps == []


# ---- rfactor -----------------------------------------------------------------------------
def test_rfactor_after_a_data_parallel_split_discards_it_with_a_warning():
    A, B, k, C, a, b = _gemm()
    s = sl.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=3)
    s[C].vectorize(C.op.axis[1])
    ko, ki = s[C].split(k, factor=4)
    with pytest.warns(UserWarning, match="discarded, as in TVM"):
        CF = s.rfactor(C, ki)
    assert [a.name for a in s[C].leaf_iter_vars] == ["i", "j", "k.inner"]
    assert CF.shape == (4, 10, 12)
    s[CF].compute_at(s[C], s[C].op.axis[0])
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.empty((10, 12), "float32")])
    assert_close(c, a @ b)


def test_rfactor_of_the_outer_part_of_a_split_reduce_axis_with_negative_factor_axis():
    A, B, k, C, a, b = _gemm()
    s = sl.create_schedule(C.op)
    ko, ki = s[C].split(k, nparts=2)
    CF = s.rfactor(C, ko, factor_axis=-1)
    assert CF.shape == (10, 12, 2)
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.empty((10, 12), "float32")])
    assert_close(c, a @ b)


# ---- cache_write -------------------------------------------------------------------------
def test_cache_write_reuses_the_users_reduce_axis():
    A, B, k, C, a, b = _gemm()
    s = sl.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    assert CC.op.reduce_axis[0] is k
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, *s[CC].op.axis, ki)
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.empty((10, 12), "float32")])
    assert_close(c, a @ b)


def test_cache_write_after_tile_relays_the_cache_out():
    A, B, k, C, a, b = _gemm()
    s = sl.create_schedule(C.op)
    s[C].tile(C.op.axis[0], C.op.axis[1], 4, 5)          # 10 and 12 leave tails
    CC = s.cache_write(C, "local")
    assert CC.shape == (3, 3, 4, 5)
    assert [ax.name for ax in CC.op.axis] == ["i.outer.c", "j.outer.c", "i.inner.c", "j.inner.c"]
    assert "C.local[i // 4, j // 5, i % 4, j % 5]" in sl.lower(s, [A, B, C])
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.empty((10, 12), "float32")])
    assert_close(c, a @ b)


def test_cache_write_after_reorder_transposes_the_cache_and_drops_annotations():
    A, B, k, C, a, b = _gemm()
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(j, i)
    s[C].unroll(i)
    with pytest.warns(UserWarning, match="annotations of stage 'C'"):
        CC = s.cache_write(C, "local")
    assert CC.shape == (12, 10)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 4)
    s[CC].compute_at(s[C], jo)
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.empty((10, 12), "float32")])
    assert_close(c, a @ b)


def test_cache_write_of_an_elementwise_stage_after_a_non_dividing_split():
    A, B, C = _chain(10)
    s = sl.create_schedule(C.op)
    s[C].split(C.op.axis[1], factor=4)
    CC = s.cache_write(C, "global")
    assert CC.shape == (10, 3, 4)
    check_chain(s, A, C, seed=6)


def test_cache_write_after_fuse():
    A, B, C = _chain(6)
    s = sl.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    s[C].split(f, factor=5)
    CC = s.cache_write(C, "local")
    assert CC.shape == (8, 5)
    _check_and_replay(s, A, C, seed=7)


# ---- set_scope, split(disable_predication=), lower(simple_mode=) ---------------------------
def test_set_scope_of_an_attached_stage_replays_and_computes():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    s[B].set_scope("shared")
    s[B].compute_at(s[C], C.op.axis[0])
    text = sl.lower(s, [A, C])
    assert "alloc B: f32[1, 8] shared" in text
    assert "s['B'].set_scope('shared')" in str(s)
    assert sl.lower(sl.create_schedule(C.op).apply_json(s.to_json()), [A, C]) == text
    check_chain(s, A, C, seed=8)


def test_set_scope_errors():
    A, B, C = _chain()
    s = sl.create_schedule(C.op)
    with pytest.raises(sl.ScheduleError, match="unknown memory scope 'texture'"):
        s[B].set_scope("texture")
    with pytest.raises(sl.ScheduleError, match="output"):
        s[C].set_scope("local")


def test_split_accepts_disable_predication_and_keeps_the_guard():
    A, B, C = _chain(10)
    s = sl.create_schedule(C.op)
    s[C].split(C.op.axis[1], factor=4, disable_predication=True)
    assert "if " in sl.lower(s, [A, C], simple_mode=True)
    check_chain(s, A, C, seed=9)


# ---- property: cache_write after random data-parallel loop transformations ----------------
from hypothesis import given, settings, strategies as st   # noqa: E402


@settings(max_examples=12, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["split", "fuse", "reorder"]), st.integers(0, 5), st.integers(1, 5)),
                max_size=3),
       st.booleans(), st.integers(0, 3))
def test_cache_write_after_random_loop_transformations(ops, reduction, attach):
    """Whatever split/fuse/reorder came before cache_write, the re-laid-out cache computes
    the same result (also when the cache is then computed at a loop of the copy)."""
    if reduction:
        A, B, k, C, a, b = _gemm(7, 6, 5)
        args, inputs, want = [A, B, C], [a, b], a @ b
    else:
        A, B, C = _chain(7)
        a = np.random.default_rng(10).random((7, 7), "float32")
        args, inputs, want = [A, C], [a], a * 2 + 1
    s = sl.create_schedule(C.op)
    for op, pick, factor in ops:
        data = [x for x in s[C].leaf_iter_vars if x.kind != "reduce"]
        if op == "split":
            s[C].split(data[pick % len(data)], factor=factor)
        elif op == "fuse" and len(data) > 1:
            i = pick % (len(data) - 1)
            pos = [s[C].leaf_iter_vars.index(x) for x in data[i:i + 2]]
            if pos[1] == pos[0] + 1:
                s[C].fuse(*data[i:i + 2])
        elif op == "reorder":
            s[C].reorder(*data[pick % len(data):] + data[:pick % len(data)])
    CC = s.cache_write(C, "local")
    if attach:
        outer, _ = s[C].split(C.op.axis[attach % 2], factor=attach + 1)
        s[CC].compute_at(s[C], outer)
    (out,) = build_and_run(s, args, inputs, [np.empty(want.shape, "float32")])
    assert_close(out, want)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.booleans(), st.integers(-3, 2), st.booleans())
def test_rfactor_after_random_data_parallel_schedules(data_factor, red_factor, outer, factor_axis, attach):
    """rfactor of either part of a split reduction, after the data-parallel axes were split
    and fused, with any factor_axis: the result is the product's."""
    A, B, k, C, a, b = _gemm(5, 6, 7)
    s = sl.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=data_factor)
    s[C].fuse(ii, C.op.axis[1])
    ko, ki = s[C].split(k, factor=red_factor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the data-parallel schedule is discarded, as in TVM
        CF = s.rfactor(C, ko if outer else ki, factor_axis=factor_axis)
    if attach:
        s[CF].compute_at(s[C], s[C].op.axis[0])
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.empty((5, 6), "float32")])
    assert_close(c, a @ b)
