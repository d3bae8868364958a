"""3-d convolutions (torch/ops/conv3d.py) against torch: stride, padding, dilation, groups,
with and without bias, float64; a video block (Conv3d, BatchNorm3d, ReLU, a residual add)
compiled whole, bounds-checked and for the host."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from .helpers import check_lowering
from .test_conv import compile_checked

aten = torch.ops.aten
torch.manual_seed(0)


@pytest.mark.parametrize("xs, ws, stride, pad, dil, groups, bias", [
    ((1, 3, 5, 6, 7), (4, 3, 3, 3, 3), 1, 1, 1, 1, True),
    ((2, 4, 6, 5, 5), (6, 2, 2, 3, 1), (2, 1, 2), (0, 1, 0), 1, 2, False),
    ((1, 2, 7, 7, 4), (2, 2, 3, 3, 3), 1, 2, 2, 1, True),
])
def test_conv3d_matches_eager(xs, ws, stride, pad, dil, groups, bias):
    rep = (lambda v: [v] * 3 if isinstance(v, int) else list(v))
    x, w = torch.randn(xs), torch.randn(ws)
    b = torch.randn(ws[0]) if bias else None
    check_lowering(aten.convolution.default, (x, w, b, rep(stride), rep(pad), rep(dil), False, [0, 0, 0], groups),
                   tol=(1e-4, 1e-4))


def test_float64():
    x, w = torch.randn(1, 2, 4, 4, 4, dtype=torch.float64), torch.randn(3, 2, 3, 3, 3, dtype=torch.float64)
    check_lowering(aten.convolution.default, (x, w, None, [1, 1, 1], [1, 1, 1], [1, 1, 1], False, [0, 0, 0], 1))


class VideoBlock(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv, self.bn = nn.Conv3d(c, c, 3, padding=1, bias=False), nn.BatchNorm3d(c)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        return F.relu(x + self.bn(self.conv(x)))


def test_video_block_compiles_whole():
    compile_checked(VideoBlock().eval(), torch.randn(1, 4, 3, 6, 5))
