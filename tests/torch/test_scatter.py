"""Writes at indexed positions (torch/ops/scatter.py) against torch: scatter_add along each
dim with an index smaller than self, index_add with alpha, index_put at a leading and an
inner dim with negative indices, broadcast values and accumulate; an index out of range
raises eager torch's error after the call (nothing written out of bounds: bounds-checked
builds); max_unpool2d compiled whole."""
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
