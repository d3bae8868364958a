"""Register tiles of the blocked (NCHWc) convolution kernels per register file
(conv_schedules.nchwc_tile, depthwise_schedules.row_tile): on AVX2's 16 registers every live
vector fits (accumulators, weight vectors, the broadcast), rows of any length get a tile that
divides them, AVX-512 keeps its tiles but where their weights would leave L2; MobileNetV2-like
blocks with 24 and 144 channels (3 and 18 blocks of 8) and odd widths against eager torch
(one block in the default suite, the others with -m slow)."""
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import schedlang as sl
import schedlang.torch as st
from schedlang.torch.conv_schedules import POINTWISE_TILE, nchwc_tile
from schedlang.torch.depthwise_schedules import row_tile
from schedlang.torch.ops import conv_winograd

from ..cpu_targets import runs_here
from .test_conv import ConvBN, compile_checked

HASWELL = sl.Target.create("llvm -mcpu=haswell")
AVX512 = sl.Target.create("llvm -mcpu=skylake-avx512")


@pytest.mark.parametrize("blocks", [1, 2, 3, 4, 6, 9, 12, 18, 32, 72, 120])
@pytest.mark.parametrize("cols", [1, 2, 3, 7, 13, 14, 28, 56, 112])
def test_avx2_tiles_fit_the_register_file_and_divide_the_row(blocks, cols):
    """Every tile divides the row but the 1x1 tile POINTWISE_TILE (4 x 2), which may end a row
    in a one-column tile (WIDE_POINTWISE_TILE divides it)."""
    vecs, wt = nchwc_tile(HASWELL, blocks, cols, 8)
    assert blocks % vecs == 0 and wt <= cols
    assert cols % wt == 0 or (vecs, wt) == POINTWISE_TILE
    assert vecs * wt + vecs + 1 <= HASWELL.native_registers()      # accumulators, weights, broadcast
    if any(cols % w == 0 for w in range(4, 15)):
        assert wt >= 4 or (vecs, wt) == POINTWISE_TILE              # weights reused over >= 4 columns


@pytest.mark.parametrize("blocks, cols, want", [
    (8, 56, (4, 2)), (16, 28, (2, 4)), (32, 14, (4, 2)), (64, 7, (4, 2)),        # ResNet-18's layers
    (12, 112, (4, 2)), (18, 56, (2, 4)), (72, 14, (4, 2)), (120, 7, (4, 2)),    # MobileNetV2's
])
def test_avx2_tiles_of_resnet_and_mobilenet_layers(blocks, cols, want):
    assert nchwc_tile(HASWELL, blocks, cols, 8) == want


@pytest.mark.parametrize("blocks, cols, want", [
    (4, 56, (4, 4)), (8, 28, (4, 4)), (16, 14, (2, 14)), (32, 7, (2, 7)), (6, 112, (2, 14)), (9, 56, (1, 28)),
])
def test_avx512_tiles_are_unchanged(blocks, cols, want):
    assert nchwc_tile(AVX512, blocks, cols, 16) == want


@pytest.mark.parametrize("cols, avx2, avx512", [(112, 14, 28), (56, 14, 28), (14, 14, 14), (7, 7, 7),
                                                (13, 13, 13), (17, 1, 17), (31, 1, 1)])
def test_depthwise_row_tiles(cols, avx2, avx512):
    assert row_tile(HASWELL, cols) == avx2 and row_tile(AVX512, cols) == avx512
    assert row_tile(HASWELL, None) == 1


class Block(nn.Module):
    """1x1 expansion (ReLU6), depthwise 3x3 (ReLU6), 1x1 projection, as MobileNetV2's."""

    def __init__(self, cin, hidden, cout, stride):
        super().__init__()
        self.body = nn.Sequential(ConvBN(nn.Conv2d(cin, hidden, 1, bias=False), act=F.relu6),
                                  ConvBN(nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                                         act=F.relu6),
                                  ConvBN(nn.Conv2d(hidden, cout, 1, bias=False), act=None))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


BLOCKS = {   # (in, hidden, out, stride), input shape
    "24_to_144_residual_odd": ((24, 144, 24, 1), (1, 24, 9, 13)),
    "16_to_96_to_24_stride2": ((16, 96, 24, 2), (1, 16, 15, 12)),
    "24_to_144_to_32_stride2_batch2": ((24, 144, 32, 2), (2, 24, 11, 17)),
    "24_wide_row": ((24, 48, 24, 1), (1, 24, 3, 56)),
}


# 16_to_96_to_24_stride2 in the default suite; the other blocks (144 channels, batch 2, a wide row) are slow.
@pytest.mark.parametrize("name", [n if n == "16_to_96_to_24_stride2" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(BLOCKS)])
@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_small_channel_blocks_match_eager(name, cpu):
    (cin, hidden, cout, stride), shape = BLOCKS[name]
    target = sl.Target.create(f"llvm -mcpu={cpu}")
    if not runs_here(target):
        pytest.skip(f"this CPU cannot run {cpu}'s instructions")
    torch.manual_seed(0)
    model = Block(cin, hidden, cout, stride).eval()
    compile_checked(model, torch.randn(*shape), targets=(target.with_options(bounds_check=True), target))


@pytest.mark.parametrize("channels, hw, blocks, cpu", [(512, 7, 1, "skylake-avx512"), (256, 14, 2, "skylake-avx512"),
                                                     (512, 7, 2, "emeraldrapids")])
def test_avx512_tiles_keep_their_weights_in_l2(channels, hw, blocks, cpu, monkeypatch):
    """A 3x3 kernel's register tile takes no more channel blocks than keep their weights in
    half the CPU's L2 (_l2_blocks): 512 channels at 7x7 one block on a 1 MB L2 (2 would be
    590 KB), two on Emerald Rapids' 2 MB; 256 at 14x14 two (295 KB); its sums' local tile
    shows it. Against eager where the CPU's code runs. (The direct kernel's: 14 x 14 would run
    as Winograd.)"""
    monkeypatch.setattr(conv_winograd, "ENABLED", False)
    target = sl.Target.create(f"llvm -mcpu={cpu}")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(channels, channels, 1), nn.ReLU(),     # the 3x3 reads and writes NCHWc
                          ConvBN(nn.Conv2d(channels, channels, 3, padding=1)), nn.Conv2d(channels, 16, 1)).eval()
    x = torch.randn(1, channels, hw, hw)
    targets = (target,) if runs_here(target) else ()
    cm = compile_checked(model, x, targets=targets) if targets else st.compile(model, (x,), target=target)
    sums = re.findall(r"alloc _native_batch_norm\w+_conv\.local: f32\[1, (\d+), 1, (\d+), 16\]", cm.ir("tile"))
    assert sums == [(str(blocks), str(hw))]
