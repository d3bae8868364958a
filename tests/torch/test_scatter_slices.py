"""In-place writes to slices as torch.export functionalizes them (torch/ops/scatter_slices.py):
copy, slice_scatter and select_scatter against torch (steps, negative and clipped bounds, a
cast, broadcasting); modules writing into slices and F.pad's circular mode (empty, then
copies into slices) compiled whole."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)
x = torch.randn(5, 7)


def test_copy_broadcasts_and_casts():
    check_lowering(aten.copy.default, (x, torch.randn(7)))
    check_lowering(aten.copy.default, (x, torch.randint(0, 9, (5, 1))))
    check_lowering(aten.copy.default, (torch.zeros(3, 2, dtype=torch.int32), torch.randn(3, 2) * 5))


@pytest.mark.parametrize("dim, start, end, step", [(1, 1, 3, 1), (1, None, None, 2), (0, -3, None, 1),
                                                   (1, 2, 100, 3), (-1, 0, 7, 7)])
def test_slice_scatter(dim, start, end, step):
    want_shape = list(x.shape)
    want_shape[dim] = len(range(*slice(start, end, step).indices(x.shape[dim])))
    check_lowering(aten.slice_scatter.default, (x, torch.randn(want_shape), dim, start, end, step))


def test_select_scatter():
    check_lowering(aten.select_scatter.default, (x, torch.randn(7), 0, 2))
    check_lowering(aten.select_scatter.default, (x, torch.randn(5), 1, -1))
    with pytest.raises(IndexError, match="out of range"):
        check_lowering(aten.select_scatter.default, (x, torch.randn(5), 1, 7))


class Writes(nn.Module):
    def forward(self, x, y):
        x = x.clone()
        x[:, 1:3] = y
        x[0] = 0.5
        x[::2, -1] = 7.0
        return x * 2


class Circular(nn.Module):
    def forward(self, x):
        return F.pad(x, (2, 1, 1, 0), mode="circular")


@pytest.mark.parametrize("module, inputs", [(Writes(), (torch.randn(3, 4), torch.randn(3, 2))),
                                            (Circular(), (torch.randn(1, 2, 4, 5),))],
                         ids=["slice_writes", "circular_pad"])
def test_compiled_whole(module, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, inputs)
    torch.testing.assert_close(compiled(*inputs), module(*inputs))
