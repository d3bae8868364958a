"""The shim runs a block's threads as fibers of one worker OS thread and shares the blocks out
among workers (SL_SHIM_THREADS of them): many blocks, full-size blocks, barriers, shared memory
(one copy a worker) and warp shuffles, each against the reference evaluator, with one worker
and with several."""
import pytest

from tests.target.cuda import schedules
from tests.helpers import emulate_and_check

pytest.importorskip("cuda.bindings")


@pytest.fixture(params=["1", "3"])
def workers(request, monkeypatch):
    monkeypatch.setenv("SL_SHIM_THREADS", request.param)     # read by the shim's launch (getenv)
    return int(request.param)


def test_many_blocks_of_256_threads(workers):
    """The issue's case, 2**18 elements in blocks of 256, with a tail: 1024 blocks."""
    emulate_and_check(*schedules.elementwise(n=(1 << 18) - 5, factor=256))


def test_shared_memory_gemm_over_many_blocks(workers):
    """Barriers and shared tiles; each worker's block has its own shared memory."""
    emulate_and_check(*schedules.shared_gemm(130, 150, 37, block=(16, 16), k_tile=8))


def test_a_block_of_1024_threads_with_barriers(workers):
    emulate_and_check(*schedules.shared_gemm(70, 64, 20, block=(32, 32), k_tile=4, double_buffer=True))


def test_register_tiles_with_virtual_threads(workers):
    emulate_and_check(*schedules.vthread_gemm(67, 45, 33))


def test_warp_shuffles_and_shared_memory_across_warps_in_many_blocks(workers):
    emulate_and_check(*schedules.row_reduce(rows=41, cols=300, threads=128, reducer="max", rows_per_block=2))
    emulate_and_check(*schedules.softmax(rows=37, cols=70, threads=64, fused=True))
