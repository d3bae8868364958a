"""One tiny program per invalid schedule, in the spirit of Halide's test/error/.

Each test checks that the misuse raises ScheduleError and that the message starts with
the primitive, names the stage and (where there is one) the axis, and lists the valid
choices or gives a hint where that helps.
"""
import numpy as np
import pytest

import schedlang as sl
from tests.programs import chain   # A -> B = A*2 -> C = B+1, all 8x8


# ---- tiny programs ---------------------------------------------------------------------
def rowsum():
    """C[i] = sum_k A[i, k]."""
    A = sl.placeholder((4, 16), name="A")
    k = sl.reduce_axis((0, 16), name="k")
    C = sl.compute((4,), lambda i: sl.sum(A[i, k], axis=k), name="C")
    return A, k, C


def diamond():
    """B and D both read A; C reads B and D."""
    A = sl.placeholder((8,), name="A")
    B = sl.compute((8,), lambda i: A[i] * 2, name="B")
    D = sl.compute((8,), lambda i: A[i] + 1, name="D")
    C = sl.compute((8,), lambda i: B[i] + D[i], name="C")
    return A, B, D, C


def three_deep():
    """A -> B -> D -> C, 1-D."""
    A = sl.placeholder((8,), name="A")
    B = sl.compute((8,), lambda i: A[i] * 2, name="B")
    D = sl.compute((8,), lambda i: B[i] + 1, name="D")
    C = sl.compute((8,), lambda i: D[i] + 1, name="C")
    return A, B, D, C


def scheduled(program):
    """The program's tensors, then a schedule of its output (the last of them)."""
    *tensors, out = program()
    return (*tensors, out, sl.create_schedule(out.op))


def raises(misuse, primitive, stage, axis=None, choices=None, hint=False, says=None):
    """misuse() raises ScheduleError, its message checked as `check` does and containing says
    (a phrase, or a tuple of them)."""
    with pytest.raises(sl.ScheduleError) as e:
        misuse()
    check(e.value, primitive, stage, axis, choices, hint)
    for phrase in (says,) if isinstance(says, str) else says or ():
        assert phrase in str(e.value), str(e.value)


def check(err, primitive, stage, axis=None, choices=None, hint=False):
    msg = str(err)
    assert msg.startswith(primitive + ":"), msg
    assert err.primitive == primitive
    if stage is not None:
        assert f"stage '{stage}'" in msg, msg
        assert err.stage == stage
    if axis is not None:
        assert f"axis '{axis}'" in msg, msg
        assert err.axis == axis
    if choices is not None:
        assert "valid choices:" in msg, msg
        assert set(choices) <= set(err.choices), (choices, err.choices)
    if hint:
        assert "hint:" in msg, msg


# ---- split -------------------------------------------------------------------------------
def test_split_of_axis_already_split():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    s[C].split(i, factor=2)
    raises(lambda: s[C].split(i, factor=2),
           "split", "C", "i", choices=["i.outer", "i.inner", "j"], hint=True, says="was split into i.outer and i.inner")


def test_split_with_both_factor_and_nparts():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].split(s[C].op.axis[0], factor=2, nparts=4), "split", "C", "i", hint=True, says="both given")


def test_split_with_neither_factor_nor_nparts():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].split(s[C].op.axis[0]), "split", "C", "i", hint=True, says="neither given")


@pytest.mark.parametrize("factor", [0, -4])
def test_split_with_non_positive_factor(factor):
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].split(s[C].op.axis[1], factor=factor),
           "split", "C", "j", says=f"factor must be a positive int, got {factor}")


@pytest.mark.parametrize("factor", [2.0, "4", True])
def test_split_with_non_int_factor(factor):
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].split(s[C].op.axis[1], factor=factor),
           "split", "C", "j", says="factor must be a positive int")


def test_split_with_non_positive_nparts():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].split(s[C].op.axis[0], nparts=0), "split", "C", "i", says="nparts must be a positive int")


def test_split_of_another_stages_axis():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].split(s[B].op.axis[0], factor=2),
           "split", "C", "i", choices=["i", "j"], hint=True, says="belongs to stage 'B'")


def test_split_of_a_non_axis():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].split(0, factor=2), "split", "C", choices=["i", "j"])


def test_split_of_a_placeholder():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[A].split(s[B].op.axis[0], factor=2), "split", "A", hint=True, says="placeholder")


def test_split_of_an_annotated_axis():
    A, B, C, s = scheduled(chain)
    j = s[C].op.axis[1]
    s[C].vectorize(j)
    raises(lambda: s[C].split(j, factor=2), "split", "C", "j", hint=True, says="already marked vectorize")


# ---- tile --------------------------------------------------------------------------------
def test_tile_with_the_same_axis_twice():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    raises(lambda: s[C].tile(i, i, 2, 2), "tile", "C", "i", choices=["i", "j"])


def test_tile_with_non_positive_factor():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    raises(lambda: s[C].tile(i, j, 2, 0), "tile", "C", "j", says="y_factor")


# ---- fuse --------------------------------------------------------------------------------
def test_fuse_of_non_adjacent_axes():
    A = sl.placeholder((2, 3, 4), name="A")
    C = sl.compute((2, 3, 4), lambda i, j, l: A[i, j, l] + 1, name="C")
    s = sl.create_schedule(C.op)
    i, j, l = s[C].op.axis
    raises(lambda: s[C].fuse(i, l), "fuse", "C", "i", choices=["i", "j", "l"], hint=True, says="not adjacent")


@pytest.mark.parametrize("first, second, says", [(1, 0, "wrong order"), (0, 0, "listed twice")])
def test_fuse_in_the_wrong_order_or_with_a_repeated_axis(first, second, says):
    A, B, C, s = scheduled(chain)
    axes = s[C].op.axis
    raises(lambda: s[C].fuse(axes[first], axes[second]), "fuse", "C", "ij"[first], choices=["i", "j"], hint=True,
           says=says)


def test_fuse_of_a_reduce_axis_with_a_data_axis():
    A, k, C, s = scheduled(rowsum)
    raises(lambda: s[C].fuse(s[C].op.axis[0], k), "fuse", "C", "k", hint=True, says="reduction")


def test_fuse_of_an_annotated_axis():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    s[C].parallel(i)
    raises(lambda: s[C].fuse(i, j), "fuse", "C", "i", hint=True)


# ---- reorder -----------------------------------------------------------------------------
def test_reorder_with_a_repeated_axis():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    raises(lambda: s[C].reorder(j, j), "reorder", "C", "j", choices=["i", "j"], hint=True)


def test_reorder_of_a_non_leaf_axis():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    s[C].split(i, factor=2)
    raises(lambda: s[C].reorder(j, i), "reorder", "C", "i", choices=["i.outer", "i.inner", "j"], hint=True)


def test_reorder_of_another_stages_axis():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].reorder(s[C].op.axis[1], s[B].op.axis[0]),
           "reorder", "C", "i", choices=["i", "j"], hint=True, says="belongs to stage 'B'")


# ---- unroll / vectorize / parallel -------------------------------------------------------
def test_vectorize_a_reduction_axis():
    A, k, C, s = scheduled(rowsum)
    raises(lambda: s[C].vectorize(k), "vectorize", "C", "k", choices=["i"], hint=True)


def test_parallel_a_reduction_axis():
    A, k, C, s = scheduled(rowsum)
    raises(lambda: s[C].parallel(k), "parallel", "C", "k", choices=["i"], hint=True)


def test_annotate_an_axis_twice_vectorize_then_parallel():
    A, B, C, s = scheduled(chain)
    j = s[C].op.axis[1]
    s[C].vectorize(j)
    raises(lambda: s[C].parallel(j), "parallel", "C", "j", hint=True, says="already marked vectorize")


def test_unroll_a_loop_of_more_than_1024_iterations():
    A = sl.placeholder((2048,), name="A")
    C = sl.compute((2048,), lambda i: A[i] + 1, name="C")
    s = sl.create_schedule(C.op)
    raises(lambda: s[C].unroll(s[C].op.axis[0]), "unroll", "C", "i", hint=True, says="2048 iterations")


def test_parallel_two_loops_of_one_stage():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    s[C].parallel(i)
    raises(lambda: s[C].parallel(j), "parallel", "C", "j", hint=True, says=("'i'", "nested"))


def test_nested_parallel_loops_across_stages_at_lower():
    A, B, C, s = scheduled(chain)
    s[B].compute_at(s[C], s[C].op.axis[0])
    s[C].parallel(s[C].op.axis[0])
    s[B].parallel(s[B].op.axis[0])
    raises(lambda: sl.lower(s, [A, C]), "parallel", "B", "i", hint=True, says="of stage 'C'")


# ---- bind --------------------------------------------------------------------------------
def test_bind_with_a_non_thread_axis():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    raises(lambda: s[C].bind(i, j), "bind", "C", "i", hint=True, says="thread_axis")


def test_bind_the_same_thread_tag_twice():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    s[C].bind(i, sl.thread_axis("threadIdx.x"))
    raises(lambda: s[C].bind(j, sl.thread_axis("threadIdx.x")),
           "bind", "C", "j", hint=True, says="already bound to axis 'i'")


def test_bind_a_reduce_axis_to_blocks():
    """threadIdx.x is a cross-thread reduction (tests/target/cuda/test_cross_thread.py); blocks are not."""
    A, k, C, s = scheduled(rowsum)
    raises(lambda: s[C].bind(k, sl.thread_axis("blockIdx.x")), "bind", "C", "k", hint=True)


def test_bind_on_the_llvm_target_at_build():
    A, B, C, s = scheduled(chain)
    s[C].bind(s[C].op.axis[0], sl.thread_axis("blockIdx.x"))
    raises(lambda: sl.build(s, [A, C], target="llvm"), "bind", "C", "i", hint=True, says="blockIdx.x")


# ---- compute_at --------------------------------------------------------------------------
def test_compute_at_a_loop_that_does_not_enclose_the_consumer():
    A, B, D, C, s = scheduled(diamond)
    raises(lambda: s[B].compute_at(s[D], s[D].op.axis[0]),
           "compute_at", "B", "i", choices=["C"], hint=True, says="'D' does not read 'B'")


def test_compute_at_an_axis_that_is_not_a_loop_of_the_target():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[B].compute_at(s[C], s[B].op.axis[0]),
           "compute_at", "B", "i", choices=["i", "j"], hint=True, says="target stage 'C'")


def test_compute_at_a_split_away_loop_of_the_target():
    A, B, C, s = scheduled(chain)
    i = s[C].op.axis[0]
    s[C].split(i, factor=2)
    raises(lambda: s[B].compute_at(s[C], i), "compute_at", "B", "i", choices=["i.outer", "i.inner", "j"], hint=True)


def test_compute_at_into_itself():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[B].compute_at(s[B], s[B].op.axis[0]), "compute_at", "B", "i", choices=["C"], hint=True)


def test_compute_at_making_a_cycle():
    A, B, D, C, s = scheduled(three_deep)
    s[D].compute_at(s[C], s[C].op.axis[0])
    s[B].compute_at(s[D], s[D].op.axis[0])
    raises(lambda: s[D].compute_at(s[B], s[B].op.axis[0]), "compute_at", "D", "i", hint=True, says="cycle")


def test_compute_at_a_vectorized_axis():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    s[C].vectorize(j)
    raises(lambda: s[B].compute_at(s[C], j), "compute_at", "B", "j", choices=["i"], hint=True)


def test_compute_at_into_a_placeholder():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[B].compute_at(s[A], s[B].op.axis[0]),
           "compute_at", "B", "i", choices=["C"], hint=True, says="'A' is an input placeholder")


def test_compute_at_of_an_output():
    A, B, C = chain()
    D = sl.compute((8, 8), lambda i, j: C[i, j] * 3, name="D")
    s = sl.create_schedule([C.op, D.op])
    raises(lambda: s[C].compute_at(s[D], s[D].op.axis[0]), "compute_at", "C", "i", hint=True, says="output")


def test_compute_at_with_another_consumer_outside_the_loop_at_lower():
    A = sl.placeholder((8,), name="A")
    B = sl.compute((8,), lambda i: A[i] * 2, name="B")
    D = sl.compute((8,), lambda i: B[i] + 1, name="D")
    C = sl.compute((8,), lambda i: D[i] + B[i], name="C")
    s = sl.create_schedule(C.op)
    s[B].compute_at(s[D], s[D].op.axis[0])
    raises(lambda: sl.lower(s, [A, C]), "compute_at", "B", "i", hint=True, says="'C' also reads 'B'")


# ---- compute_inline ----------------------------------------------------------------------
def test_compute_inline_of_a_reduction():
    A, k, C = rowsum()
    D = sl.compute((4,), lambda i: C[i] + 1, name="D")
    s = sl.create_schedule(D.op)
    raises(lambda: s[C].compute_inline(), "compute_inline", "C", hint=True, says="reduction")


def test_compute_inline_of_an_output():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].compute_inline(), "compute_inline", "C", hint=True, says="output")


def test_compute_inline_of_a_placeholder():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[A].compute_inline(), "compute_inline", "A", hint=True, says="placeholder")


def test_compute_inline_of_a_stage_with_loop_transforms():
    A, B, C, s = scheduled(chain)
    s[B].split(s[B].op.axis[0], factor=2)
    raises(lambda: s[B].compute_inline(), "compute_inline", "B", hint=True, says="i.outer, i.inner, j")


def test_compute_inline_of_a_stage_that_others_are_computed_at():
    A, B, D, C, s = scheduled(three_deep)
    s[B].compute_at(s[D], s[D].op.axis[0])
    raises(lambda: s[D].compute_inline(), "compute_inline", "D", hint=True, says="B")


def test_split_after_compute_inline():
    A, B, C, s = scheduled(chain)
    s[B].compute_inline()
    raises(lambda: s[B].split(s[B].op.axis[0], factor=2), "split", "B", hint=True, says="inlined")


# ---- cache_read / cache_write ------------------------------------------------------------
def test_cache_read_with_a_reader_that_does_not_read_the_tensor():
    A, B, C, s = scheduled(chain)
    raises(lambda: s.cache_read(A, "shared", [C]),
           "cache_read", "A", choices=["B"], hint=True, says="'C' does not read 'A'")


def test_cache_read_with_no_readers():
    A, B, C, s = scheduled(chain)
    raises(lambda: s.cache_read(A, "shared", []), "cache_read", "A", choices=["B"])


def test_cache_read_with_an_unknown_scope():
    A, B, C, s = scheduled(chain)
    raises(lambda: s.cache_read(A, "l1", [B]), "cache_read", "A", choices=["global", "shared", "local"], says="'l1'")


def test_cache_write_with_an_unknown_scope():
    A, B, C, s = scheduled(chain)
    raises(lambda: s.cache_write(C, "texture"), "cache_write", "C", choices=["global", "shared", "local"])


def test_cache_write_after_splitting_a_reduction_axis():
    A, k, C, s = scheduled(rowsum)
    s[C].split(k, factor=2)
    raises(lambda: s.cache_write(C, "local"), "cache_write", "C", "k.outer", hint=True, says="data-parallel")


def test_cache_write_of_a_placeholder():
    A, B, C, s = scheduled(chain)
    raises(lambda: s.cache_write(A, "local"), "cache_write", "A", hint=True)


def test_cache_read_of_a_tensor_not_in_the_schedule():
    A, B, C = chain()
    X = sl.placeholder((8, 8), name="X")
    s = sl.create_schedule(C.op)
    raises(lambda: s.cache_read(X, "local", [B]), "cache_read", None, choices=["A", "B", "C"], hint=True, says="'X'")


# ---- rfactor -----------------------------------------------------------------------------
def test_rfactor_of_a_non_reduction():
    A, B, C, s = scheduled(chain)
    raises(lambda: s.rfactor(C, s[C].op.axis[0]), "rfactor", "C", "i", hint=True, says="not a reduction")


def test_rfactor_of_a_data_parallel_axis():
    A, k, C, s = scheduled(rowsum)
    raises(lambda: s.rfactor(C, s[C].op.axis[0]), "rfactor", "C", "i", choices=["k"])


@pytest.mark.parametrize("factor_axis", [2, -3, 0.5])
def test_rfactor_with_a_bad_factor_axis(factor_axis):
    A, k, C, s = scheduled(rowsum)
    ko, ki = s[C].split(k, factor=4)
    raises(lambda: s.rfactor(C, ki, factor_axis=factor_axis), "rfactor", "C", "k.inner", hint=True, says="[0, 1]")


def test_rfactor_of_an_annotated_reduction_loop():
    A, k, C, s = scheduled(rowsum)
    ko, ki = s[C].split(k, factor=2)
    s[C].unroll(ki)
    raises(lambda: s.rfactor(C, ko), "rfactor", "C", "k.outer", hint=True)


def test_rfactor_with_a_stage_computed_at_a_split_data_loop():
    A = sl.placeholder((4, 8), name="A")
    P = sl.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="P")
    k = sl.reduce_axis((0, 8), name="k")
    C = sl.compute((4,), lambda i: sl.sum(P[i, k], axis=k), name="C")
    s = sl.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=2)
    s[P].compute_at(s[C], ii)
    raises(lambda: s.rfactor(C, k), "rfactor", "C", "k", hint=True)


# ---- storage_align / pragma --------------------------------------------------------------
def test_storage_align_of_the_innermost_dimension():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[B].storage_align(s[B].op.axis[1], 16, 1), "storage_align", "B", "j", choices=["i"], hint=True)


@pytest.mark.parametrize("offset", [16, -1, 1.5])
def test_storage_align_with_a_bad_offset(offset):
    A, B, C, s = scheduled(chain)
    raises(lambda: s[B].storage_align(s[B].op.axis[0], 16, offset),
           "storage_align", "B", "i", hint=True, says="[0, 16)")


def test_storage_align_of_a_loop_that_is_not_a_dimension():
    A, B, C, s = scheduled(chain)
    io, ii = s[B].split(s[B].op.axis[0], factor=2)
    raises(lambda: s[B].storage_align(io, 16, 1), "storage_align", "B", "i.outer", choices=["i", "j"], hint=True)


def test_storage_align_of_an_output():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].storage_align(s[C].op.axis[0], 16, 1), "storage_align", "C", "i", hint=True, says="output")


def test_storage_align_of_a_function_argument_at_lower():
    A, B, C, s = scheduled(chain)
    s[B].storage_align(s[B].op.axis[0], 16, 1)
    raises(lambda: sl.lower(s, [A, B, C]), "storage_align", "B", says="function argument")


def test_compute_inline_after_storage_align():
    A, B, C, s = scheduled(chain)
    s[B].storage_align(s[B].op.axis[0], 16, 1)
    raises(lambda: s[B].compute_inline(), "compute_inline", "B", hint=True, says="storage_align")


def test_pragma_with_a_key_that_is_not_a_string():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].pragma(s[C].op.axis[0], 3), "pragma", "C", "i", hint=True)


def test_pragma_with_a_value_that_does_not_serialise():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].pragma(s[C].op.axis[0], "my_key", object()), "pragma", "C", "i", hint=True)


def test_pragma_auto_unroll_max_step_without_a_positive_value():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].pragma(s[C].op.axis[0], "auto_unroll_max_step", 0), "pragma", "C", "i")


def test_pragma_unroll_count_not_a_positive_int_or_too_many_copies():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].pragma(s[C].op.axis[0], "unroll_count", 0), "pragma", "C", "i")
    raises(lambda: s[C].pragma(s[C].op.axis[0], "unroll_count", 2.5), "pragma", "C", "i")
    raises(lambda: s[C].pragma(s[C].op.axis[0], "unroll_count", 4096), "pragma", "C", "i", says="MAX_UNROLL")


def test_prefetch_of_a_tensor_the_stage_does_not_read_or_a_bad_offset():
    A, B, C, s = scheduled(chain)
    i, j = s[C].op.axis
    raises(lambda: s[C].prefetch(A, i, 4), "prefetch", "C", "i", choices=["B"], hint=True,
           says="not a tensor the stage reads")
    raises(lambda: s[C].prefetch("D", i, 4), "prefetch", "C", "i", choices=["B"])
    raises(lambda: s[C].prefetch(B, i, 0), "prefetch", "C", "i", says="offset")
    raises(lambda: s[C].prefetch(B, i, 1.5), "prefetch", "C", "i", says="offset")
    s[C].split(i, factor=2)
    raises(lambda: s[C].prefetch(B, i, 2), "prefetch", "C", "i", says="was split")
    raises(lambda: s[C].pragma(j, "prefetch", "B"), "pragma", "C", "j", hint=True, says="Stage.prefetch")


# ---- looking stages and axes up ----------------------------------------------------------
def test_index_the_schedule_with_a_tensor_not_in_it():
    A, B, C = chain()
    X = sl.placeholder((8,), name="X")
    s = sl.create_schedule(C.op)
    raises(lambda: s[X], "s[...]", None, choices=["A", "B", "C"], hint=True, says="'X'")


def test_axis_lookup_of_an_unknown_name():
    A, B, C, s = scheduled(chain)
    raises(lambda: s[C].axis("k"), "axis", "C", choices=["i", "j"], hint=True)


def test_schedule_a_reduce_axis_named_like_a_data_axis():
    A = sl.placeholder((8, 8), name="A")
    k = sl.reduce_axis((0, 8), name="i")
    C = sl.compute((8,), lambda i: sl.sum(A[i, k], axis=k), name="C")
    s = sl.create_schedule(C.op)
    raises(lambda: s[C].split(k, factor=4), "split", "C", "i", hint=True, says="replayed")


# ---- a failed primitive changes nothing --------------------------------------------------
def _scheduled_chain():
    A, B, C, s = scheduled(chain)
    io, ii = s[C].split(s[C].op.axis[0], factor=2)
    s[C].vectorize(s[C].op.axis[1])
    return A, B, C, s, io, ii


FAILING = {
    "split_again": lambda A, B, C, s, io, ii: s[C].split(s[C].op.axis[0], factor=2),
    "tile_bad_factor": lambda A, B, C, s, io, ii: s[C].tile(io, ii, 2, -1),
    "fuse_wrong_order": lambda A, B, C, s, io, ii: s[C].fuse(ii, io),
    "reorder_twice": lambda A, B, C, s, io, ii: s[C].reorder(ii, ii),
    "parallel_vectorized": lambda A, B, C, s, io, ii: s[C].parallel(s[C].op.axis[1]),
    "compute_at_vectorized": lambda A, B, C, s, io, ii: s[B].compute_at(s[C], s[C].op.axis[1]),
    "inline_output": lambda A, B, C, s, io, ii: s[C].compute_inline(),
    "cache_read_bad_scope": lambda A, B, C, s, io, ii: s.cache_read(A, "l2", [B]),
    "cache_write_input": lambda A, B, C, s, io, ii: s.cache_write(A, "local"),
    "rfactor_no_reduction": lambda A, B, C, s, io, ii: s.rfactor(C, io),
    "storage_align_inner": lambda A, B, C, s, io, ii: s[B].storage_align(s[B].op.axis[1], 4, 0),
    "pragma_bad_key": lambda A, B, C, s, io, ii: s[C].pragma(io, None),
}


@pytest.mark.parametrize("name", sorted(FAILING))
def test_failed_primitive_leaves_the_schedule_unchanged(name):
    A, B, C, s, io, ii = _scheduled_chain()
    before_steps = list(s.steps)
    before_text = sl.lower(s, [A, C])
    before_stages = [st.name for st in s.stages]
    with pytest.raises(sl.ScheduleError):
        FAILING[name](A, B, C, s, io, ii)
    assert s.steps == before_steps
    assert [st.name for st in s.stages] == before_stages
    assert sl.lower(s, [A, C]) == before_text


def test_schedule_still_builds_after_a_failed_primitive():
    A, B, C, s, io, ii = _scheduled_chain()
    with pytest.raises(sl.ScheduleError):
        s[C].fuse(ii, io)
    f = sl.build(s, [A, C])
    a = np.arange(64, dtype="float32").reshape(8, 8)
    c = np.zeros((8, 8), "float32")
    f(a, c)
    np.testing.assert_allclose(c, a * 2 + 1)


def test_cache_write_after_a_producer_was_computed_at_the_stage():
    A, P, C, s = scheduled(lambda: chain(middle="P"))
    s[P].compute_at(s[C], C.op.axis[0])
    with pytest.raises(sl.ScheduleError, match=r"cache_write: stage 'C': stages P are computed at its loops"):
        s.cache_write(C, "local")
    assert sl.lower(s, [A, C])


def test_cache_read_of_a_stage_computed_at_a_loop():
    A, P, C, s = scheduled(lambda: chain(middle="P"))
    s[P].compute_at(s[C], C.op.axis[0])
    with pytest.raises(sl.ScheduleError, match=r"cache_read: stage 'P': is computed at loop 'i' of 'C'"):
        s.cache_read(P, "local", [C])
