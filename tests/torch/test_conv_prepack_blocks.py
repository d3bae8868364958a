"""A convolution weight packed with the channel blocks of a register tile side by side
(prepack.py "conv_tiles", conv_schedules.weight_blocks, ops/conv.py packed_weight): the
layout against a numpy reference, where the lowering asks for it (every kernel with taps
and whole blocks of input and output channels: AVX2 3x3s of 4-block tiles, one block
otherwise and on AVX-512; never a 1x1), and numerics against eager torch, bounds-checked:
odd channel counts, odd and even rows, stride 2, padded kernels, a folded batch norm."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch.conv_schedules import SHORT_ROW_TILE, weight_blocks
from schedlang.torch.prepack import PackSpec, make, pack_conv_tiles, shape_of

from .helpers import compile_each

AVX2 = sl.Target.create("llvm -mcpu=haswell")
AVX512 = sl.Target.create("llvm -mcpu=skylake-avx512")
HOST = sl.Target.create("llvm")


@pytest.mark.parametrize("oc, ic, blocks, width", [(64, 16, 4, 8), (40, 8, 4, 8), (32, 32, 2, 16)])
def test_conv_tiles_layout(oc, ic, blocks, width):
    """out[t, c, kh, kw, i, b, l] = w[(t * blocks + b) * width + l, c * width + i, kh, kw], zero past OC."""
    w = torch.randn(oc, ic, 3, 2)
    got = pack_conv_tiles(w, width, blocks).numpy()
    tiles, cb = -(-oc // (blocks * width)), ic // width
    assert got.shape == (tiles, cb, 3, 2, width, blocks, width) \
        == shape_of("conv_tiles", [tuple(w.shape)], width, (blocks,))
    padded = np.zeros((tiles * blocks * width, ic, 3, 2), np.float32)
    padded[:oc] = w.numpy()
    for t, c, kh, kw, i, b, lane in [(0, 0, 0, 0, 0, 0, 0), (tiles - 1, cb - 1, 2, 1, width - 1, blocks - 1, 3),
                                     (0, cb - 1, 1, 0, 2, 1, width - 1)]:
        assert got[t, c, kh, kw, i, b, lane] == padded[(t * blocks + b) * width + lane, c * width + i, kh, kw]
    want = padded.reshape(tiles, blocks, width, cb, width, 3, 2).transpose(0, 3, 5, 6, 4, 1, 2)
    np.testing.assert_array_equal(got, want)


def test_conv_tiles_need_input_channels_in_blocks():
    with pytest.raises(ValueError, match="12 input channels are not blocks of 8"):
        pack_conv_tiles(torch.randn(32, 12, 3, 3), 8, 4)


def test_conv_tiles_fold_a_batch_norm_as_conv_blocks_do():
    w, gamma, mean, var = torch.randn(64, 16, 3, 3), torch.rand(64) + 0.5, torch.randn(64), torch.rand(64) + 0.1
    folded = make(PackSpec("w", 8, "conv", ("g", "m", "v"), (1e-5,)), (w, gamma, mean, var))   # [8, 16, 3, 3, 8]
    tiles = make(PackSpec("w", 8, "conv_tiles", ("g", "m", "v"), (4, 1e-5)), (w, gamma, mean, var))
    # the same values: the blocks four at a time side by side, the input channels blocked by 8
    want = folded.reshape(2, 4, 2, 8, 3, 3, 8).permute(0, 2, 4, 5, 3, 1, 6)
    torch.testing.assert_close(tiles, want, rtol=0, atol=0)


@pytest.mark.parametrize("shape, cols, target, want", [
    ((512, 512, 3, 3), 7, AVX2, SHORT_ROW_TILE[0]),    # ResNet's 7x7 maps: 4 x 3 tiles, blocks outer
    ((64, 32, 3, 3), 5, AVX2, SHORT_ROW_TILE[0]),
    ((512, 512, 3, 3), 14, AVX2, 4),                   # even rows: 4 x 2 tiles
    ((64, 64, 3, 3), 56, AVX2, 4),
    ((16, 8, 3, 3), 56, AVX2, 1),                      # 2 blocks: 2-block tiles (not measured)
    ((512, 512, 1, 1), 7, AVX2, 0),                    # 1x1: no taps ("conv")
    ((48, 32, 3, 3), 7, AVX2, 1),                      # 6 blocks: not a multiple of 4
    ((64, 12, 3, 3), 7, AVX2, 0),                      # input channels not blocked
    ((60, 32, 3, 3), 7, AVX2, 0),                      # output channels not blocked
    ((512, 512, 3, 3), 7, AVX512, 1),                  # 32 registers: tiles unchanged, one stream
    ((512, 512, 1, 1), 7, AVX512, 0),
    ((64, 3, 7, 7), 112, AVX512, 0),                   # a stem: 3 input channels
])
def test_weight_blocks(shape, cols, target, want):
    width = 16 if target is AVX512 else 8
    assert weight_blocks(target, shape, cols, width) == want


class TwoConvs(nn.Module):
    """conv-bn-relu (the 3x3 reads a blocked input), a 3x3 with bias, then a 3x3 with a folded
    batch norm writing its ReLU as the padded input of a last 3x3."""

    def __init__(self, cin: int, c: int, stride: int):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, c, 1, bias=False), nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, stride, 1, bias=True)
        self.c3, self.b3 = nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)
        self.c4 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        for b in (self.b1, self.b3):
            b.running_mean.normal_()
            b.running_var.uniform_(0.5, 1.5)
        self.eval()

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        z = F.relu(self.c2(y))
        return self.c4(F.relu(self.b3(self.c3(z)))) + z


def _packs(cm) -> dict:
    return {name: spec.kind for name, spec in cm.program.packs.items()}


def _tiles(cm) -> list:
    """The blocks of each "conv_tiles" constant of cm (sorted), and how many "conv" ones it has."""
    packs = cm.program.packs.values()
    return sorted(sp.params[0] for sp in packs if sp.kind == "conv_tiles"), \
        sum(sp.kind == "conv" for sp in packs)


# The first case in the default suite (test_weight_blocks pins the other layouts' choice without a
# build); the further shapes are slow.
@pytest.mark.parametrize("cin, c, stride, hw", [
    (3, 32, 1, (7, 7)),       # rows of 7: 4 x 3 tiles and a one-column tail, one channel tile
    pytest.param(5, 64, 1, (5, 5), marks=pytest.mark.slow),      # two channel tiles: whole-plane tasks
    pytest.param(3, 64, 2, (13, 9), marks=pytest.mark.slow),     # stride 2 to 7 x 5
    pytest.param(4, 32, 1, (11, 3), marks=pytest.mark.slow),     # rows of 3, 11 rows
    pytest.param(3, 40, 1, (7, 7), marks=pytest.mark.slow),      # 5 blocks: single blocks (no 4-block tile)
    pytest.param(3, 32, 1, (9, 8), marks=pytest.mark.slow),      # rows of 8: 4 x 2 tiles
    pytest.param(5, 32, 2, (11, 13), marks=pytest.mark.slow),    # stride 2 to 6 x 7
])
def test_tiles_of_blocks_match_eager(cin, c, stride, hw):
    torch.manual_seed(0)
    model, x = TwoConvs(cin, c, stride), torch.randn(1, cin, *hw)
    with torch.no_grad():
        want = model(x)
    packs = None
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for _, cm in compile_each(model, (x,), (AVX2.with_options(bounds_check=True), AVX2)):
            with torch.no_grad():
                torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
            tiles = _tiles(cm)
    # the three 3x3s in tiles of 4 blocks (of one where c is not a multiple of 32), the 1x1 "conv"
    assert tiles == ([4, 4, 4] if c % 32 == 0 else [1, 1, 1], 1), _packs(cm)


def test_avx512_packs_single_blocks_in_reduction_order():
    """AVX-512: the 3x3s "conv_tiles" of one block (their reduction's order), the 1x1 "conv"."""
    torch.manual_seed(0)
    model, x = TwoConvs(3, 64, 1), torch.randn(1, 3, 7, 7)
    cm = st.compile(model, (x,), target=AVX512)
    assert _tiles(cm) == ([1, 1, 1], 1), _packs(cm)
    if HOST.native_lanes(32) >= 16:
        with torch.no_grad():
            torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)


def test_tiles_of_blocks_over_an_nchw_input_match_eager():
    """A 3x3 over the program's input (never blocked: the NCHW kernel reads rc // 8, rc % 8)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 1, 1)).eval()
    x = torch.randn(1, 8, 7, 7)
    with torch.no_grad():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for _, cm in compile_each(model, (x,), (AVX2.with_options(bounds_check=True), AVX2)):
            with torch.no_grad():
                torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
            assert list(_packs(cm).values()) == ["conv_tiles", "conv_tiles"]
