"""Attention on tensor cores (torch/attention_tensorcore.py): float16/bfloat16
scaled_dot_product_attention (and the decomposed softmax(q @ k^T) @ v) on an sm_80+ cuda target
computes Q.K^T and P.V with mma.sync (the generated CUDA C calls it, so a silent fallback
fails) and, run on the CPU by the SIMT engine, matches eager torch in float32 on the same
rounded inputs: causal and not, several key chunks, batch and heads, a value head dim other
than the query's. Shapes the fragments do not fit (odd sequence lengths) and GPUs without
mma.sync m16n8k16 keep the CUDA-core schedule, still right. ptxas takes the kernel for sm_80
and sm_90 without spills."""
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st
from schedlang.torch import attention_tensorcore

pytest.importorskip("cuda.bindings")      # NVRTC compiles the CUDA C

TOL = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=2e-2, atol=3e-2)}


class Sdpa(nn.Module):
    def __init__(self, causal=False):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


class Decomposed(nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _inputs(L, S, E, Ev, dt, batch=(1, 2)):
    torch.manual_seed(0)
    return (torch.randn(*batch, L, E, dtype=dt), torch.randn(*batch, S, E, dtype=dt),
            torch.randn(*batch, S, Ev, dtype=dt))


def compile_and_check(module, inputs, engine="simt", target="cuda"):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, inputs, target=target)
        want = module(*[x.float() for x in inputs])
        got = compiled.emulate(*inputs, engine=engine)
    dt = inputs[0].dtype
    assert got.dtype == dt and got.shape == want.shape
    torch.testing.assert_close(got.float(), want, **TOL[dt])
    return compiled


def _on_tensor_cores(cuda: str) -> bool:
    return "mma.sync.aligned.m16n8k16" in cuda and "sl_mma_m16n8k16_f32_" in cuda


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_sdpa_on_tensor_cores_matches_eager(causal):
    """Three chunks of 16 keys (48 % 32 != 0), two query blocks, two heads."""
    compiled = compile_and_check(Sdpa(causal), _inputs(32, 48, 16, 16, torch.float16))
    assert _on_tensor_cores(compiled.ir("target"))


def test_bfloat16_with_a_value_head_dim_of_its_own():
    compiled = compile_and_check(Sdpa(True), _inputs(16, 32, 32, 8, torch.bfloat16, batch=(2,)))
    assert _on_tensor_cores(compiled.ir("target")) and "sl_mma_m16n8k16_f32_bf16" in compiled.ir("target")


def test_the_decomposed_pattern_takes_tensor_cores_too():
    compiled = compile_and_check(Decomposed(), _inputs(16, 32, 16, 16, torch.float16, batch=(1,)))
    assert _on_tensor_cores(compiled.ir("target"))


@pytest.mark.parametrize("L,S,target", [pytest.param(15, 32, "cuda", marks=pytest.mark.slow), (16, 20, "cuda"),
                                         (16, 32, "cuda -arch=sm_75")],
                         ids=["odd-queries", "odd-keys", "sm_75"])
def test_what_the_fragments_do_not_fit_keeps_the_cuda_core_schedule(L, S, target):
    compiled = compile_and_check(Sdpa(True), _inputs(L, S, 16, 16, torch.float16, batch=(1,)), target=target)
    assert "sl_mma_m16n8k16" not in compiled.ir("target")


@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])
def test_ptxas_takes_it_without_spills(arch):
    """A head dim of 64 (key chunks of 64: 45 KB of shared memory)."""
    compiled = st.compile(Sdpa(True), _inputs(64, 128, 64, 64, torch.float16), target=f"cuda -arch={arch}")
    (mod,) = compiled.modules.values()
    if mod.ptxas_info is None:
        pytest.skip("no ptxas on PATH")
    (info,) = mod.ptxas_info.values()
    assert info.spill_bytes == 0 and info.shared_bytes == attention_tensorcore.shared_bytes(64, 64, 64)
    assert _on_tensor_cores(compiled.ir("target"))


def test_key_chunks_fit_the_shared_memory_of_a_block():
    for E, Ev in ((64, 64), (128, 128), (256, 128), (16, 8)):
        chunk = attention_tensorcore._chunk(1024, E, Ev, 48 * 1024)
        assert attention_tensorcore.shared_bytes(E, Ev, chunk) <= 48 * 1024, (E, Ev, chunk)
    assert attention_tensorcore._chunk(1024, 64, 64, 48 * 1024) == 64
    assert attention_tensorcore._chunk(48, 64, 64, 48 * 1024) == 16
