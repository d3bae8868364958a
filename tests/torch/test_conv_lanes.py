"""The channel block of a program's convolutions (conv_lanes.py): half an AVX-512 vector
where whole ones would leave most of the convolution work unblocked (channels of 24, groups
of 24), a whole one otherwise, never narrower than 8 lanes (AVX2) nor on targets without
packed weights; and a model built with half blocks matches eager, bounds-checked."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch.conv_lanes import conv_lanes
from schedlang.torch.export import capture

from .helpers import compile_each

AVX2 = sl.Target.create("llvm -mcpu=haswell")
AVX512 = sl.Target.create("llvm -mcpu=skylake-avx512")
HOST = sl.Target.create("llvm")


class Stage(nn.Module):
    """A RegNet-like stage: 1x1 to c, a grouped 3x3 of groups of g channels, 1x1 back to c, a
    residual; the stem writes c channels from an image."""

    def __init__(self, c: int, g: int):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, 2, 1)
        self.a = nn.Conv2d(c, c, 1)
        self.b = nn.Conv2d(c, c, 3, 1, 1, groups=c // g)
        self.bn = nn.BatchNorm2d(c)
        self.c = nn.Conv2d(c, c, 1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, x):
        y = F.relu(self.stem(x))
        return F.relu(self.c(F.relu(self.bn(self.b(F.relu(self.a(y)))))) + y)


def _lanes(model, target, hw=(9, 11)) -> int:
    return conv_lanes(capture(model, (torch.randn(1, 3, *hw),)), target)


@pytest.mark.parametrize("c, g, want", [
    (48, 24, 8),     # groups of 24: whole blocks of 8, not of 16
    (24, 24, 8),     # 24 channels: nothing blocks by 16
    (48, 16, 0),     # groups of 16: 16 blocks it all
    (64, 64, 0),
    (40, 4, 8),      # groups of 4 block at neither width, the 1x1s of 40 channels at 8
    (36, 4, 0),      # nothing blocks at either width
])
def test_half_vectors_where_whole_ones_block_little(c, g, want):
    torch.manual_seed(0)
    assert _lanes(Stage(c, g), AVX512) == want


def test_no_half_vectors_below_8_lanes_or_without_packed_weights():
    model = Stage(24, 24)
    assert _lanes(model, AVX2) == 0                       # 8 lanes native: 4 is never taken
    assert _lanes(model, sl.Target.create("cuda")) == 0


def test_a_model_of_half_blocks_matches_eager():
    """Groups of 24 on AVX-512: weights packed in blocks of 8, activations blocked by 8."""
    torch.manual_seed(0)
    model, x = Stage(48, 24), torch.randn(1, 3, 13, 10)
    with torch.no_grad():
        want = model(x)
    targets = (AVX512.with_options(bounds_check=True), AVX512)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for _, cm in compile_each(model, (x,), targets):
            widths = {sp.width for sp in cm.program.packs.values() if sp.kind.startswith("conv")}
            assert widths == {8}, cm.program.packs
            assert "-> (1, 6, 7, 5, 8) f32" in str(cm.program), "activations blocked by 8"
            if HOST.native_lanes(32) >= 16:
                with torch.no_grad():
                    torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
