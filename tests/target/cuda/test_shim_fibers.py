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


PROGRAM = r"""
#include <cstdio>
int out[4 * 64];
// Threads 40..63 return before the barrier: the others must not wait for them.
__global__ void early(int* o) {
  __shared__ int s[64];
  const unsigned t = threadIdx.x;
  if (t >= 40) return;
  s[t] = t + 100 * blockIdx.x;
  __syncthreads();
  o[blockIdx.x * 64 + t] = s[39 - t];
}
// Lanes 0..15 shuffle (waiting for lanes 16..31), lanes 16..31 wait at __syncthreads: a deadlock.
__global__ void stuck() {
  if (threadIdx.x < 16) (void)__shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
  else __syncthreads();
}
int main(int argc, char**) {
  sl_shim::launch(dim3{4, 1, 1}, dim3{64, 1, 1}, [&] { early(out); });
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t < 40; ++t)
      if (out[b * 64 + t] != 39 - t + 100 * b) { std::printf("wrong %d %d\n", b, t); return 1; }
  std::printf("early ok\n");
  std::fflush(stdout);
  if (argc > 1) sl_shim::launch(dim3{1, 1, 1}, dim3{32, 1, 1}, [&] { stuck(); });
  return 0;
}
"""


def test_threads_leaving_early_and_a_deadlock_on_the_header_itself(tmp_path):
    """The header alone, compiled with the shim's flags: threads that return before a barrier
    drop out of it; threads waiting at different barriers end the process with a message
    instead of hanging."""
    import subprocess
    from schedlang.target.cuda import shim
    src, exe = tmp_path / "p.cu", tmp_path / "p"
    src.write_text(PROGRAM)
    subprocess.run([shim._compiler(), *shim.FLAGS, f"-I{shim.SHIM_DIR}", str(src), "-o", str(exe)], check=True)
    ok = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout == "early ok\n", ok.stdout + ok.stderr
    stuck = subprocess.run([str(exe), "stuck"], capture_output=True, text=True, timeout=60)
    assert stuck.returncode != 0 and "wait for each other at different barriers" in stuck.stderr
