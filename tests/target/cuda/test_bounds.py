"""Bound inference over thread axes (TVM's NeedRelax): a stage computed inside thread-bound
loops holds the region of the whole block when it is shared, and of one thread when local."""
import re

import pytest

import schedlang as sl
from tests.target.cuda import schedules
from tests.target.cuda.test_emulate import emulate_and_check

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
