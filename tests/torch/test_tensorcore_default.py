"""The cuda target's default schedules put float16/bfloat16 matmul, linear (with its bias and
activation fused) and batch matmul on tensor cores (torch/tensorcore_schedules.py): the
generated CUDA calls mma.sync (so a silent fallback fails), and the module, run on the CPU by
the emulation engines, matches eager torch in float32 on the same rounded inputs. Shapes the
fragments do not fit and GPUs without mma.sync m16n8k16 keep the CUDA-core schedule, still right."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

pytest.importorskip("cuda.bindings")      # NVRTC compiles the CUDA C the shim runs

TOL = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=1.6e-2, atol=3e-2)}


class MatMul(nn.Module):
    def forward(self, a, b):
        return a @ b


class ScoresBmm(nn.Module):
    def forward(self, q, k):
        return q @ k.transpose(-1, -2)


class LinearGelu(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc = nn.Linear(d, h)

    def forward(self, x):
        return F.gelu(self.fc(x))


def _case(name, dt):
    torch.manual_seed(0)
    r = lambda *shape: torch.randn(*shape, dtype=dt)      # noqa: E731
    return {"linear": lambda: (nn.Linear(64, 32).to(dt), (r(16, 64),)),
            "linear_gelu_3d": lambda: (LinearGelu(64, 48).to(dt), (r(2, 16, 64),)),
            "matmul": lambda: (MatMul(), (r(32, 64), r(64, 48))),
            "bmm_transposed": lambda: (ScoresBmm(), (r(2, 32, 32), r(2, 16, 32))),
            "linear_odd_rows": lambda: (nn.Linear(64, 32).to(dt), (r(15, 64),))}[name]()


def compile_and_check(name, dt, engine="simt", target="cuda"):
    module, inputs = _case(name, dt)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, inputs, target=target)
        want = copy.deepcopy(module).float()(*[x.float() for x in inputs])
        got = compiled.emulate(*inputs, engine=engine)
    assert got.dtype == dt and got.shape == want.shape
    torch.testing.assert_close(got.float(), want, **TOL[dt])
    return compiled.ir("target")


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["linear", "linear_gelu_3d", "matmul", "bmm_transposed"])
def test_tensor_cores_by_default_match_eager(name, dt):
    cuda = compile_and_check(name, dt)
    assert "mma.sync.aligned.m16n8k16" in cuda and "sl_mma_m16n8k16_f32_" in cuda
    assert "sl_mma_store_c_f32" in cuda       # the accumulators go through the shared tile to the epilogue


def test_the_shim_runs_the_cuda_c_of_a_fused_linear():
    """The generated CUDA C itself (g++ with the shim): cp.async pipeline, ldmatrix, mma, epilogue."""
    cuda = compile_and_check("linear_gelu_3d", torch.float16, engine="shim")
    assert "sl_cp_async_16" in cuda and "erf" in cuda


def test_an_odd_shape_keeps_the_cuda_core_schedule():
    cuda = compile_and_check("linear_odd_rows", torch.float16)
    assert "sl_mma_m16n8k16" not in cuda


def test_a_gpu_without_mma_keeps_the_cuda_core_schedule():
    cuda = compile_and_check("linear", torch.float16, target="cuda -arch=sm_75")
    assert "sl_mma_m16n8k16" not in cuda


def test_a_dsl_matmul_with_a_float32_output_takes_tensor_cores():
    """default_schedule on a DSL program whose output is the matmul itself (no epilogue): the
    accumulators go through a shared write cache of the block's tile."""
    import numpy as np

    import schedlang as sl
    from schedlang.topi import cuda_tensorcore as tc
    from schedlang.torch.schedules import default_schedule
    A, B, C = tc.program(64, 32, 48, "float16", "float32", "nk")
    mod = sl.build(default_schedule([C], "cuda"), [A, B, C], target="cuda")
    assert "sl_mma_m16n8k16_f32_f16(" in mod.get_source("cuda")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 48)).astype("float16"), rng.standard_normal((32, 48)).astype("float16")
    c = np.zeros((64, 32), "float32")
    mod.emulate(a, b, c, engine="simt")
    np.testing.assert_allclose(c, a.astype("float64") @ b.astype("float64").T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("limit_kb, tile", [(48, "linear_mm[4096]"), (227, "linear_mm[16384]")])
def test_a_target_with_more_shared_memory_gets_128_by_128_blocks(limit_kb, tile):
    """Where the shapes are whole 128 x 128 blocks and the target lets a block take ~104 KB of
    shared memory (sm_80+ opt in), the Linear's block is 128 x 128 (four 64 x 64 warps, its
    float32 tile in shared memory for the epilogue); at the default 48 KB, 64 x 64. Both match
    eager torch on the emulation."""
    import schedlang as sl
    target = sl.Target("cuda", sl.CUDAOptions(max_shared_memory_per_block=limit_kb * 1024))
    torch.manual_seed(0)
    lin, x = nn.Linear(64, 256).half().requires_grad_(False), torch.randn(128, 64, dtype=torch.float16)
    with torch.no_grad():
        compiled = st.compile(lin, (x,), target=target)
        got = compiled.emulate(x, engine="shim")
    src = compiled.ir("target")
    assert f"__shared__ float {tile};" in src and "sl_mma_m16n8k16_f32_f16(" in src
    want = F.linear(x.float(), lin.weight.float(), lin.bias.float())
    torch.testing.assert_close(got.float(), want, **TOL[torch.float16])
