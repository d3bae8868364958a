"""bfloat16 2-d convolutions on the bfloat16 dot product: where the target has avx512bf16, a
dense one of whole blocks of input channels packs its weight in pairs of input channels
(prepack.py "conv_pairs") and its NCHWc register tile, over blocked activations (layout.py),
runs vdpbf16ps on each pair of a block's channels (conv_schedules._pair_dot; blocks of 8
channels its ymm form); one that reads the program's input unpadded reads a copy of it in
pairs. Checked against the float32 model
(as close as eager bfloat16) on a host with the instruction; the layout and the instruction
in the code for any host (built for a named CPU, not run)."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import schedlang.torch as slt

from .test_bf16_pairs import INTRINSIC, _as_close_as_eager, _dot_kernels, _kinds, host_has_dot

INTRINSIC_YMM = "llvm.x86.avx512bf16.dpbf16ps.256"


def _batch_norm(c: int) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
    return bn


class _Bottleneck(nn.Module):
    """ResNet's bottleneck with a strided 3x3 and a 1x1 shortcut, after a 1x1 stem of the
    program's input: five convolutions of pairs, the stem's input a copy in pairs."""

    def __init__(self, c: int = 32, mid: int = 16, out: int = 48):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), _batch_norm(c), nn.ReLU())
        self.a = nn.Sequential(nn.Conv2d(c, mid, 1, bias=False), _batch_norm(mid), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(mid, mid, 3, stride=2, padding=1, bias=False), _batch_norm(mid), nn.ReLU())
        self.c = nn.Sequential(nn.Conv2d(mid, out, 1, bias=False), _batch_norm(out))
        self.skip = nn.Sequential(nn.Conv2d(c, out, 1, stride=2, bias=False), _batch_norm(out))

    def forward(self, x):
        y = self.stem(x)
        return torch.relu(self.c(self.b(self.a(y))) + self.skip(y))


def _case(kind: str):
    """(a bfloat16 model of 2-d convolutions, its input)."""
    torch.manual_seed(21)
    if kind == "bottleneck_odd_plane":
        return _Bottleneck().eval().bfloat16(), torch.randn(1, 32, 13, 11).bfloat16()
    if kind == "dilated_5x5_bias_batch2":
        model = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.GELU(),
                              nn.Conv2d(32, 16, 5, padding=4, dilation=2), nn.ReLU())
        return model.eval().bfloat16(), torch.randn(2, 16, 9, 15).bfloat16()
    if kind == "input_also_an_output":
        return _Tapped().eval().bfloat16(), torch.randn(1, 32, 7, 10).bfloat16()
    if kind == "concatenation":
        return _Concatenated().eval().bfloat16(), torch.randn(1, 16, 9, 12).bfloat16()
    if kind == "blocks_of_8":     # channels multiples of 8, not 16: conv_lanes.py's 8-channel blocks
        model = nn.Sequential(nn.Conv2d(24, 40, 1, bias=False), _batch_norm(40), nn.ReLU(),
                              nn.Conv2d(40, 24, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(24, 56, 1), nn.ReLU())
        return model.eval().bfloat16(), torch.randn(1, 24, 15, 14).bfloat16()
    raise AssertionError(kind)


class _Concatenated(nn.Module):
    """A concatenation read by a 1x1 convolution (DenseNet's, VoVNet's, CSPNet's): fusion inlines
    it into the convolution, whose input read then selects between two tensors, no pair of one
    tensor's channels: it keeps float32 blocks; a padded 3x3 reads a padded copy of it, pairs."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, bias=False), _batch_norm(32), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(16, 16, 1, bias=False), _batch_norm(16), nn.ReLU())
        self.pointwise = nn.Conv2d(48, 32, 1)
        self.spatial = nn.Conv2d(48, 16, 3, padding=1)

    def forward(self, x):
        y = torch.cat([self.a(x), self.b(x)], dim=1)
        return torch.relu(self.pointwise(y)), torch.relu(self.spatial(y))


class _Tapped(nn.Module):
    """A 1x1 convolution whose input is also a program output: that activation stays NCHW
    (program outputs keep their layout), so the convolution's input channels are not pairs
    side by side and its tile is not tensorized: the same sums in plain loops."""

    def __init__(self):
        super().__init__()
        self.first = nn.Conv2d(32, 32, 3, padding=1)
        self.second = nn.Conv2d(32, 16, 1)

    def forward(self, x):
        y = torch.relu(self.first(x))
        return y, self.second(y)


@host_has_dot
@pytest.mark.parametrize("kind", ["bottleneck_odd_plane", "dilated_5x5_bias_batch2", "input_also_an_output",
                                  "concatenation", "blocks_of_8"])
def test_conv2d_pairs_as_close_as_eager(kind):
    """Every dense convolution of whole blocks takes pair blocks, and each blocked one's tile
    runs vdpbf16ps; the model is as close to its float32 self as eager bfloat16 (roundings
    between the kernels make exact sums no reference), at odd planes, a batch of 2, dilation,
    stride 2, a padded copy written by the kernel before it, a residual shortcut."""
    model, x = _case(kind)
    with torch.no_grad():
        compiled = slt.compile(model, (x,))
        out, eager = compiled(x), model(x)
        ref = copy.deepcopy(model).float()(x.float())
    packs = [spec.kind for spec in compiled.program.packs.values()]
    if kind == "bottleneck_odd_plane":
        assert packs.count("conv_pairs") == 5
        assert _dot_kernels(compiled) >= 4
    elif kind == "dilated_5x5_bias_batch2":
        assert packs.count("conv_pairs") == 2 and _dot_kernels(compiled) >= 1
    elif kind == "blocks_of_8":        # vdpbf16ps on ymm: 8 output channels a vector
        assert packs.count("conv_pairs") == 3 and INTRINSIC_YMM in compiled.ir("target")
        assert sum(INTRINSIC_YMM + "(" in f for f in compiled.ir("target").split("\ndefine ")[1:]) >= 2
    elif kind == "concatenation":      # a and spatial in pairs, pointwise float32 blocks; b: 16 channels
        assert packs.count("conv_pairs") == 3 and len(packs) - packs.count("bn_shift") == 4
        assert _dot_kernels(compiled) >= 2
    else:
        assert "conv_pairs" in packs
    for o, e, r in zip(*((t,) if isinstance(t, torch.Tensor) else t for t in (out, eager, ref))):
        _as_close_as_eager(o, e, r)


@pytest.mark.parametrize("target, pairs", [("llvm -mcpu=znver4 -mattr=+avx512f,+avx512bf16", True),
                                           ("llvm -mcpu=znver3", False)])
def test_conv2d_pair_layout_follows_the_target(target, pairs):
    """Built (not run) for a target: pair blocks and vdpbf16ps in the blocked kernels where it
    has avx512bf16; float32 blocks (and no instruction) where not."""
    model, x = _case("bottleneck_odd_plane")
    with torch.no_grad():
        compiled = slt.compile(model, (x,), target=target)
    assert ("conv_pairs" in _kinds(compiled)) == pairs
    assert (INTRINSIC in compiled.ir("target")) == pairs
    if pairs:
        assert _dot_kernels(compiled) >= 4


def test_conv2d_pairs_without_the_instruction(monkeypatch):
    """Pair blocks whose tiles are not tensorized keep their plain loops and the same sums
    (forced on any host: the lowering told the target has the instruction, the schedule told
    it has not)."""
    from schedlang.torch import conv_schedules
    from schedlang.torch.ops import conv
    monkeypatch.setattr(conv, "bf16_dot_lanes", lambda target: target.native_lanes(32))   # (8 on AVX2)
    monkeypatch.setattr(conv_schedules, "bf16_dot_lanes", lambda target: 0)
    model, x = _case("bottleneck_odd_plane")
    with torch.no_grad():
        compiled = slt.compile(model, (x,))
        out, eager = compiled(x), model(x)
        ref = copy.deepcopy(model).float()(x.float())
    assert "conv_pairs" in _kinds(compiled)
    assert INTRINSIC not in compiled.ir("target")
    _as_close_as_eager(out, eager, ref)
