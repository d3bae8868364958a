"""Cross-thread reductions: a reduce axis bound to threadIdx.x, combined with warp shuffles
(and shared memory across warps), run on the CPU by the shim (a warp's emulated threads
shuffle through a warp barrier) against the reference evaluator."""
import pytest

import schedlang as sl
from tests.target.cuda import schedules
from tests.helpers import emulate_and_check

pytest.importorskip("cuda.bindings")


def test_row_sum_over_one_warp():
    mod = emulate_and_check(*schedules.row_reduce(rows=5, cols=100, threads=32))
    src = mod.get_source()
    assert src.count("__shfl_down_sync(0xffffffffu, Y_red[0]") == 5 and "__syncthreads" not in src
    assert "if (k_inner == 0) {\n    Y[i] = Y_red[0];" in src, "one thread stores the row's result"


def test_row_max_over_two_warps_two_rows_a_block_with_a_store_predicate_race_free():
    """64 threads a row: each warp reduces itself, the warps' values meet in shared memory;
    rows on threadIdx.y with a tail (5 rows, 2 a block); the last thread stores."""
    mod = emulate_and_check(*schedules.row_reduce(rows=5, cols=150, threads=64, reducer="max", rows_per_block=2,
                                                  store_predicate=True), sanitize="thread")
    src = mod.get_source()
    assert "__shared__ float Y_red_warps[4];" in src and "if (k_inner == 63) {" in src
    assert src.count("__syncthreads();") == 2


def test_row_min_over_eight_threads_in_a_partial_warp():
    """8 threads a row, 2 rows a block: 16 threads, so the shuffles' mask is the 16 lanes there are."""
    mod = emulate_and_check(*schedules.row_reduce(rows=5, cols=19, threads=8, reducer="min", rows_per_block=2))
    assert "__shfl_down_sync(0x0000ffffu, Y_red[0], 4, 8)" in mod.get_source()


def test_softmax_fused_into_one_kernel():
    """Row max and row sum computed at the output's row loop: every thread keeps the broadcast result."""
    mod = emulate_and_check(*schedules.softmax(rows=6, cols=70, threads=32))
    assert mod.kernels == ["Y_kernel"]
    assert "float maxval[1];" in mod.get_source() and "maxval[0] = maxval_red[0];" in mod.get_source()


def test_softmax_three_kernels_over_two_warps():
    mod = emulate_and_check(*schedules.softmax(rows=5, cols=150, threads=64, fused=False))
    assert len(mod.kernels) == 3


def test_a_thread_count_that_is_not_whole_warps():
    s, args = schedules.row_reduce(rows=3, cols=100, threads=48)
    with pytest.raises(sl.LoweringError, match="reduces over 48 threads of threadIdx.x(.|\n)*multiple of 32"):
        sl.build(s, args, target="cuda")


def test_a_reduce_axis_bound_to_threadidx_y_or_to_blocks():
    s, (X, Y) = schedules.row_sum()
    ko, ki = s[Y].split(Y.op.reduce_axis[0], factor=4)
    s[Y].bind(ki, sl.thread_axis("threadIdx.y"))
    with pytest.raises(sl.ScheduleError, match="bound to threadIdx.y; a cross-thread reduction runs over threadIdx.x"):
        sl.build(s, [X, Y], target="cuda")
    with pytest.raises(sl.ScheduleError, match="bound to blockIdx.y would split one output element's reduction"):
        s[Y].bind(ko, sl.thread_axis("blockIdx.y"))


def test_a_store_predicate_must_be_a_condition():
    s, (X, Y) = schedules.row_sum()
    with pytest.raises(sl.ScheduleError, match="set_store_predicate.*must be a condition"):
        s[Y].set_store_predicate(sl.thread_axis("threadIdx.x").var + 1)


def test_a_store_predicate_is_part_of_the_schedule():
    """Two schedules that differ only in their store predicate are different builds (the
    predicate is no step: such a schedule is built uncached)."""
    one = sl.build(*schedules.row_reduce(rows=3, cols=40, threads=32), target="cuda")
    last = sl.build(*schedules.row_reduce(rows=3, cols=40, threads=32, store_predicate=True), target="cuda")
    assert "if (k_inner == 0) {" in one.get_source() and "if (k_inner == 31) {" in last.get_source()
