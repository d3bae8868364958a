"""The reductions, norms and matmuls inside real modules, compiled whole with
schedlang.torch.compile and compared with eager torch on random inputs: every op is
lowered (no fallback warning) and stays whole in Torch IR (linear, layer_norm, softmax)."""
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st
from schedlang.torch.zoo import SwiGLUMLP

torch.manual_seed(0)


class GeluMLP(nn.Module):
    def __init__(self, d=16, h=40, approximate="none"):
        super().__init__()
        self.fc1, self.fc2, self.approximate = nn.Linear(d, h), nn.Linear(h, d), approximate

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))


class AttentionScores(nn.Module):
    def forward(self, q, k):
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)


class ArgMax(nn.Module):
    def forward(self, x):
        return torch.argmax(x, dim=-1)


class Statistics(nn.Module):
    def forward(self, x):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True)
        values, indices = x.max(dim=1)
        return (x - mean) / var, values, indices, F.log_softmax(x, dim=0), x.sum((0, 2))


def compile_and_compare(module, inputs, ops=(), rtol=1e-5, atol=1e-5):
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, inputs)
        got = compiled(*inputs)
    want = module(*inputs)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol)
    torch_ir = compiled.ir("torch")
    for op in ops:
        assert f"= {op}(" in torch_ir, torch_ir
    return compiled


@pytest.mark.parametrize("module,inputs,ops", [
    (nn.LayerNorm(16), (torch.randn(2, 3, 16),), ["layer_norm"]),
    (nn.LayerNorm([5, 7], elementwise_affine=False), (torch.randn(3, 5, 7),), ["layer_norm"]),
    (nn.RMSNorm(16), (torch.randn(2, 3, 16),), ["rms_norm"]),
    (SwiGLUMLP(16, 40), (torch.randn(2, 3, 16),), ["linear"]),
    (GeluMLP(), (torch.randn(2, 3, 16),), ["linear"]),
    (GeluMLP(approximate="tanh"), (torch.randn(7, 16),), ["linear"]),
    (AttentionScores(), (torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)), ["matmul", "softmax"]),
    (ArgMax(), (torch.randint(0, 4, (3, 7)).float(),), ["argmax"]),
    (Statistics(), (torch.randn(3, 5, 7),), ["var_mean", "max", "log_softmax", "sum"]),
])
def test_module_matches_eager(module, inputs, ops):
    compile_and_compare(module.eval(), inputs, ops)


def test_half_layer_norm_and_linear():
    module = nn.Sequential(nn.Linear(16, 24), nn.LayerNorm(24)).half()
    compile_and_compare(module, (torch.randn(5, 16).half(),), ["linear", "layer_norm"], rtol=2e-3, atol=2e-3)


def test_dynamic_batch():
    module = nn.Sequential(nn.Linear(16, 24), nn.RMSNorm(24), nn.Softmax(-1))
    batch = torch.export.Dim("batch", min=2, max=64)
    compiled = st.compile(module, (torch.randn(4, 16),), dynamic_shapes=({0: batch},))
    for n in (3, 9):
        x = torch.randn(n, 16)
        torch.testing.assert_close(compiled(x), module(x), rtol=1e-5, atol=1e-5)
