"""float16/bfloat16 2-d convolutions on an sm_80+ cuda target run as an implicit GEMM on tensor
cores (torch/ops/conv_tensorcore.py: im2col in the shared-memory fetch, mma.sync): the CUDA C
calls mma.sync (a silent fallback fails) and, run on the CPU by the SIMT engine, the result
matches eager torch in float32 on the same rounded inputs for odd spatial sizes, stride 2,
a batch, a bias and a folded batch norm with ReLU. Channels the fragments do not fit (a
3-channel stem: K = 27) keep the CUDA-core convolution, still right. ptxas takes a ResNet
layer's kernel for sm_80 and sm_90 without spills."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn

import schedlang.torch as st

pytest.importorskip("cuda.bindings")      # NVRTC compiles the CUDA C

TOL = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=2e-2, atol=5e-2)}


class ConvBnRelu(nn.Module):
    def __init__(self, c, oc, stride):
        super().__init__()
        self.conv = nn.Conv2d(c, oc, 3, stride=stride, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(oc)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def _case(name, dt):
    torch.manual_seed(0)
    cases = {"odd_7x9": lambda: (nn.Conv2d(16, 16, 3, padding=1), (1, 16, 7, 9)),
             "stride2_batch2_bn_relu": lambda: (ConvBnRelu(16, 32, 2), (2, 16, 9, 11)),
             "1x1": lambda: (nn.Conv2d(32, 16, 1), (1, 32, 5, 5)),
             "stem_3_channels": lambda: (nn.Conv2d(3, 16, 3, padding=1), (1, 3, 8, 8))}
    module, shape = cases[name]()
    module = module.eval()
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    return module.to(dt).requires_grad_(False), torch.randn(*shape, dtype=dt)


def compile_and_check(name, dt=torch.float16, target="cuda"):
    module, x = _case(name, dt)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, (x,), target=target)
        want = copy.deepcopy(module).float()(x.float())
        got = compiled.emulate(x, engine="simt")
    assert got.dtype == dt and got.shape == want.shape
    torch.testing.assert_close(got.float(), want, **TOL[dt])
    return compiled.ir("target")


@pytest.mark.parametrize("name", ["odd_7x9", "stride2_batch2_bn_relu", pytest.param("1x1", marks=pytest.mark.slow)])
def test_conv_on_tensor_cores_matches_eager(name):
    cuda = compile_and_check(name)
    assert "mma.sync.aligned.m16n8k16" in cuda and "sl_mma_m16n8k16_f32_f16" in cuda


def test_bfloat16():
    assert "sl_mma_m16n8k16_f32_bf16" in compile_and_check("odd_7x9", torch.bfloat16)


@pytest.mark.parametrize("name,target", [("stem_3_channels", "cuda"), ("odd_7x9", "cuda -arch=sm_75")],
                         ids=["K=27", "sm_75"])
def test_what_the_fragments_do_not_fit_keeps_the_cuda_core_convolution(name, target):
    assert "sl_mma_m16n8k16" not in compile_and_check(name, target=target)


@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])
def test_ptxas_takes_a_resnet_layer_without_spills(arch):
    module = nn.Conv2d(64, 64, 3, padding=1, bias=False).half().requires_grad_(False)
    compiled = st.compile(module, (torch.zeros(1, 64, 56, 56, dtype=torch.float16),), target=f"cuda -arch={arch}")
    (mod,) = compiled.modules.values()
    if mod.ptxas_info is None:
        pytest.skip("no ptxas on PATH")
    assert all(info.spill_bytes == 0 for info in mod.ptxas_info.values())
    assert "sl_mma_m16n8k16_f32_f16" in compiled.ir("target")
