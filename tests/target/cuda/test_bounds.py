"""Bound inference over thread axes (TVM's NeedRelax): a stage computed inside thread-bound
loops holds the region of the whole block when it is shared, and of one thread when local."""
import re

import pytest

import schedlang as sl
from tests.target.cuda import schedules
from tests.helpers import emulate_and_check, run_both_engines

pytest.importorskip("cuda.bindings")


def allocations(s, args):
    text = str(sl.lower(s, args, level="kernel", target="cuda"))
    return dict(re.findall(r"(?:shared|local) (\S+): f32\[(\d+)\]", text))


def test_shared_stage_covers_the_block_local_stage_one_thread():
    s, args = schedules.shared_gemm(M=70, N=50, K=30, block=(8, 16), k_tile=8)
    # per block and k.outer step: 8 rows of A x 8 of k, 8 of k x 16 columns of B; one C element a thread
    assert allocations(s, args) == {"A.shared": "64", "B.shared": "128", "C.local": "1"}


def test_local_stage_read_from_a_shared_one_is_one_threads_row():
    s, args = schedules.shared_gemm(M=20, N=21, K=19, block=(4, 8), k_tile=4, local_a=True)
    # at k.outer, inside threadIdx.y/x: one thread's 4 values
    assert allocations(s, args)["A.shared.local"] == "4"
    emulate_and_check(s, args)


def test_blockidx_loops_stay_fixed_for_a_shared_stage():
    """The shared tile's start follows blockIdx (and the k step), never threadIdx."""
    s, args = schedules.shared_gemm(M=20, N=21, K=19, block=(4, 8), k_tile=4)
    src = sl.build(s, args, target="cuda").get_source()
    load = next(line for line in src.splitlines() if "A_shared[" in line and "= A[" in line)
    assert "i_outer * 76" in load and "k_outer * 4" in load


def rows_per_thread(at, scope):
    """B = A * 2 + 1 over 64x64, 8x16 tiles a block, threads 4 (y) x 16 (x), each thread two rows
    of one column; T = A * 2 computed at B's loop `at` (bj, ty, tx: blockIdx.x, threadIdx.y,
    threadIdx.x) in `scope`."""
    A = sl.placeholder((64, 64), name="A")
    T = sl.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="T")
    B = sl.compute((64, 64), lambda i, j: T[i, j] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    bi, bj, ti, tj = s[B].tile(B.op.axis[0], B.op.axis[1], 8, 16)
    ty, rows = s[B].split(ti, factor=2)
    s[B].reorder(bi, bj, ty, tj, rows)
    for ax, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ty, "threadIdx.y"), (tj, "threadIdx.x")):
        s[B].bind(ax, sl.thread_axis(tag))
    s[T].compute_at(s[B], {"bj": bj, "ty": ty, "tx": tj}[at])
    s[T].set_scope(scope)
    return s, [A, B]


@pytest.mark.parametrize("at", ["bj", "ty", "tx"])
def test_a_local_stage_outside_inner_thread_loops_holds_one_threads_elements(at):
    """Issue 15, item 8: at threadIdx.y (or blockIdx.x) with threadIdx.x inside, the local stage
    used to cover every threadIdx.x (32 floats at ty, 128 at bj); each thread needs its 2."""
    s, args = rows_per_thread(at, "local")
    assert allocations(s, args) == {"T": "2"}
    run_both_engines(s, args, sanitize="thread")


@pytest.mark.parametrize("at", ["bj", "ty", "tx"])
def test_a_shared_stage_inside_thread_loops_still_covers_the_block(at):
    s, args = rows_per_thread(at, "shared")
    assert allocations(s, args) == {"T": "128"}
    emulate_and_check(s, args, engine="simt")
