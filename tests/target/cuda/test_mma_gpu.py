"""Tensor-core kernels on a real GPU (skipped where cuInit finds no GPU, or the GPU is older
than sm_80): the mma.sync / ldmatrix / cp.async GEMMs and the wmma convolution give the
emulators' results (the emulation's summation order is the shim's; the GPU's may differ in
the last bits, hence a tolerance)."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.topi import cuda_tensorcore as tc
from tests.target.cuda.test_mma import TOL, operands

pytest.importorskip("cuda.bindings")
torch = pytest.importorskip("torch")
from schedlang.target.cuda.gpu import gpu_problem  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(gpu_problem() is not None, reason=f"no GPU: {gpu_problem()}")]


@pytest.fixture(autouse=True)
def _sm80():
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("mma.sync m16n8k16 and cp.async need sm_80 or newer")


@pytest.mark.parametrize("element, acc, tiles", [
    ("float16", "float32", {}),
    ("bfloat16", "float32", dict(async_copy=True, stages=3)),
    ("float16", "float16", dict(BM=128, BN=128, WM=64, WN=32, async_copy=True, stages=2, pad=8)),
    # 74 KB of shared memory: dynamic shared memory, the launch opting in
    ("float16", "float32", dict(BM=128, BN=128, BK=32, WM=64, WN=64, async_copy=True, stages=4, pad=8)),
    # the fragments double-buffered, nk: B's two fragments an ldmatrix.x4 (non-transposed)
    ("bfloat16", "float32", dict(BM=128, BN=64, BK=64, WM=64, WN=32, async_copy=True, stages=3, pad=8,
                                 prefetch_fragments=True, layout="nk"))])
def test_tensor_core_gemm_on_the_gpu_matches_the_emulation(element, acc, tiles):
    M, N, K = 256, 128, 192
    tiles = dict(tiles)
    layout = tiles.pop("layout", "kn")
    s, args = tc.gemm(M, N, K, element, acc, layout, **tiles)
    mod = sl.build(s, args, target=sl.Target("cuda", sl.CUDAOptions(max_shared_memory_per_block=160 * 1024)))
    (a, b), ref = operands(M, N, K, element, layout)
    emulated = np.zeros((M, N), acc)
    mod.emulate(a, b, emulated, engine="shim")
    dtype = getattr(torch, element)
    ga = torch.from_numpy(a.astype("float32")).to(dtype).cuda()
    gb = torch.from_numpy(b.astype("float32")).to(dtype).cuda()
    gc = torch.zeros((M, N), dtype=getattr(torch, acc), device="cuda")
    mod(ga, gb, gc)
    torch.cuda.synchronize()
    np.testing.assert_allclose(gc.cpu().numpy(), emulated, **TOL[acc])
    np.testing.assert_allclose(gc.cpu().numpy(), ref, **TOL[acc])
