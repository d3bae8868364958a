"""Writes at indexed positions (torch/ops/scatter.py) against torch: scatter_add along each
dim with an index smaller than self, scatter (last write), index_add with alpha, index_put at a leading and an
inner dim with negative indices, broadcast values and accumulate; an index out of range
raises eager torch's error after the call (nothing written out of bounds: bounds-checked
builds); max_unpool2d compiled whole; the new kernels of this kind on the cuda target,
emulated."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)
x = torch.randn(4, 6)


def test_scatter_add():
    check_lowering(aten.scatter_add.default, (x, 1, torch.randint(0, 6, (3, 4)), torch.randn(4, 5)))
    check_lowering(aten.scatter_add.default, (x, 0, torch.randint(0, 4, (5, 6)), torch.randn(5, 6)))
    check_lowering(aten.scatter_add.default, (x.int(), -1, torch.randint(0, 6, (4, 2)), torch.randint(0, 9, (4, 2),
                                                                                                   dtype=torch.int32)))


def test_scatter():
    """Duplicate indices keep the last write (torch's CPU order); an index and src smaller than
    self; a scalar value (Phi-MoE masks its chosen experts' scores with -inf so)."""
    idx = torch.tensor([[0, 5, 0, 2], [1, 1, 3, 3], [5, 4, 5, 0]])
    check_lowering(aten.scatter.src, (x, 1, idx, torch.randn(4, 5)))
    check_lowering(aten.scatter.src, (x, 0, torch.randint(0, 4, (3, 6)), torch.randn(5, 6)))
    check_lowering(aten.scatter.value, (x, -1, torch.tensor([[1], [0], [5], [2]]), float("-inf")))
    check_lowering(aten.scatter.value, (x.int(), 1, idx, 7))


def test_a_scatter_too_large_for_the_gather_form_runs_in_torch():
    from schedlang.torch.ops.registry import Unsupported
    from .helpers import lower
    with pytest.raises(Unsupported, match="gather form"):
        lower(aten.scatter.src, (torch.zeros(1 << 14, 8), 0, torch.zeros(1 << 13, 8, dtype=torch.int64),
                                 torch.zeros(1 << 13, 8)))


def test_index_add():
    check_lowering(aten.index_add.default, (x, 0, torch.tensor([0, 2, 0, 3]), torch.randn(4, 6)))
    check_lowering(aten.index_add.default, (x, 1, torch.tensor([5, 1]), torch.randn(4, 2)), {"alpha": 2.5})


def test_index_put():
    check_lowering(aten.index_put.default, (x, [None, torch.tensor([-1, 2, 0])], torch.randn(4, 3)))
    check_lowering(aten.index_put.default, (x, [torch.tensor([1, 3])], torch.randn(6)))       # broadcast
    check_lowering(aten.index_put.default, (x, [torch.tensor([1, 3, 1])], torch.randn(3, 6), True))
    check_lowering(aten.index_put.default, (x, [None, torch.tensor([4])], torch.tensor(2.0)))


class ScatterModule(nn.Module):
    def forward(self, a, i):
        return torch.zeros(3, 5).scatter_add(1, i, a)


def test_an_index_out_of_range_raises_as_torch():
    a, i = torch.randn(3, 2), torch.tensor([[0, 4], [1, 1], [2, 5]])
    compiled = st.compile(ScatterModule(), (a, torch.zeros(3, 2, dtype=torch.int64)))
    with pytest.raises(RuntimeError, match="out of bounds"):
        compiled(a, i)
    i[2, 1] = 3
    torch.testing.assert_close(compiled(a, i), ScatterModule()(a, i))


class Unpool(nn.Module):
    def forward(self, x):
        return F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2)


def test_max_unpool_compiles_whole():
    x = torch.randn(1, 2, 6, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Unpool(), (x,))
    torch.testing.assert_close(compiled(x), Unpool()(x))


class _MoreNewOps(nn.Module):
    """This file's scatter and the other new kernels of its kind (sort, topk, grid_sample, 3-d
    and transposed convolutions, nn.Bilinear) in one module: one NVRTC build."""

    def __init__(self):
        super().__init__()
        self.c3, self.up, self.bil = nn.Conv3d(2, 2, 3, padding=1), nn.ConvTranspose2d(2, 2, 2, 2), nn.Bilinear(4, 4, 3)

    def forward(self, x, g, i):
        flat = x.flatten(1)
        top, where = torch.topk(flat, 3)
        return (top, where, torch.sort(flat, -1, descending=True).values, F.grid_sample(x, g, align_corners=False),
                torch.zeros(2, 32).scatter_add(1, i, flat[:, :5]), self.up(x),
                self.c3(x[:, :, None].repeat(1, 1, 2, 1, 1)), self.bil(x[:, 0], x[:, 1]))


def test_cuda_target_emulated():
    pytest.importorskip("cuda.bindings")
    from .test_cuda_emulate import check_emulated, compile_cuda
    x, g, i = torch.randn(2, 2, 4, 4), torch.rand(2, 3, 3, 2) * 2 - 1, torch.randint(0, 32, (2, 5))
    module = _MoreNewOps().eval()
    with torch.no_grad():
        check_emulated(compile_cuda(module, (x, g, i)), module, (x, g, i), engines=("shim", "simt"), tol=1e-4)
