"""Convolutions between channels-last tensors run on blocked activations (layout.py's
channels-last seeds): a stage every reader reads as [N, H * W, C] (a flatten and a transpose to a
LayerNorm or a Linear) whose own reads are channels-last too (a Linear's output viewed NCHW,
a packed weight, a bias) is kept NCHWc, so both sides are vectors of L contiguous channels
instead of gathers of one value a plane. Numerics against eager torch (bounds-checked, AVX2's
blocks of 8 and the host's), odd and non-square sizes, and where the layout is and is not
blocked."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

from ..helpers import CHECKED
from .test_layout import _checked_builds


class MixFFN(nn.Module):
    """SegFormer's Mix-FFN after a patch embedding: a strided convolution flattened to
    tokens, a LayerNorm, Linear, the tokens viewed as an h x w image for a depthwise 3 x 3,
    flattened back, GELU, Linear."""

    def __init__(self, c: int, hidden: int, h: int, w: int):
        super().__init__()
        self.h, self.w = h, w
        self.embed, self.norm = nn.Conv2d(3, c, 3, 2, 1), nn.LayerNorm(c)
        self.fc1, self.fc2 = nn.Linear(c, hidden), nn.Linear(hidden, c)
        self.dw = nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden)
        self.eval()

    def forward(self, img):
        x = self.norm(self.embed(img).flatten(2).transpose(1, 2))
        y = self.fc1(x)
        b, n, c = y.shape
        y = self.dw(y.transpose(1, 2).reshape(b, c, self.h, self.w)).flatten(2).transpose(1, 2)
        return self.fc2(F.gelu(y)) + x


def _convs(cm):
    from schedlang.tensor.graph import post_order
    ops = post_order([t.op for p in cm.program.parts for _, t in p.outputs])
    return [op for op in ops if getattr(op, "tag", "") == "conv"]


# 7 x 9 tokens (odd, not square: the view's rows and columns differ) and a column tail
@pytest.mark.parametrize("c, hidden, size", [(16, 48, (13, 17)),
                                             pytest.param(32, 64, (16, 16), marks=pytest.mark.slow)])
def test_mix_ffn_convolutions_run_on_blocked_activations(c, hidden, size):
    """The embedding (read by the LayerNorm as tokens) and the depthwise convolution (between
    two Linears) are both NCHWc: their kernels write blocks of L channels that the token-major
    readers load as vectors, and the depthwise one loads its input the same way."""
    torch.manual_seed(0)
    h, w = (size[0] + 1) // 2, (size[1] + 1) // 2
    model = MixFFN(c, hidden, h, w)
    for target, cm in _checked_builds(model, torch.randn(2, 3, *size)):
        convs = _convs(cm)
        assert len(convs) == 2 and all(len(op.shape) == 5 for op in convs), (target, convs)


class Branches(nn.Module):
    """A depthwise convolution of the NCHW input and a 1x1 of it, both read as tokens."""

    def __init__(self, c: int):
        super().__init__()
        self.dw, self.pw = nn.Conv2d(c, c, 3, 1, 1, groups=c), nn.Conv2d(c, c, 1)
        self.fc = nn.Linear(c, c)
        self.eval()

    def forward(self, x):
        tokens = lambda t: t.flatten(2).transpose(1, 2)
        return self.fc(tokens(self.dw(x))) + tokens(self.pw(x))


def test_a_convolution_of_an_nchw_input_stays_nchw():
    """Blocked, the depthwise convolution would read the NCHW input as gathers of L planes:
    it stays NCHW (rows of the plane), while the 1x1 (which reads the input at its reduction,
    not at its own channel) writes blocks for its token-major reader."""
    torch.manual_seed(0)
    for target, cm in _checked_builds(Branches(16), torch.randn(1, 16, 5, 7)):
        shapes = {len(op.shape) for op in _convs(cm)}
        assert shapes == {4, 5}, (target, [op.shape for op in _convs(cm)])


def test_channels_not_a_multiple_of_the_block_match_eager():
    """24 hidden channels (not a multiple of AVX-512's 16: the depthwise convolution stays
    NCHW there, blocked on AVX2's 8) and a single row of tokens."""
    torch.manual_seed(0)
    for _ in _checked_builds(MixFFN(8, 24, 1, 5), torch.randn(1, 3, 2, 10)):
        pass


class ReflectNorm(nn.Module):
    """A zero-padded input, a reflect-padded convolution (its input read through index maps of
    int64 positions), a LayerNorm over the channels of the permuted result (a fuzzed module
    whose index maps, followed to their source, once mixed int64 and int32 indices)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(5, 6, 5, 2, 2, 2, padding_mode="reflect")
        self.norm = nn.LayerNorm(6)
        self.eval()

    def forward(self, x):
        y = self.conv(F.pad(x, (2, 1, 0, 1)))
        return self.norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def test_a_channels_last_reader_of_a_reflect_padded_convolution_matches_eager():
    torch.manual_seed(0)
    for _ in _checked_builds(ReflectNorm(), torch.randn(2, 5, 8, 26)):
        pass


class TokenNorms(nn.Module):
    """SegFormer's patch embedding: a strided convolution read as tokens by a LayerNorm whose
    result is normalized again and added back (so the first one's sums are a reduction of
    their own over the blocked convolution's output)."""

    def __init__(self, c: int):
        super().__init__()
        self.conv, self.n1, self.n2 = nn.Conv2d(3, c, 3, 2, 1), nn.LayerNorm(c), nn.LayerNorm(c)
        self.eval()

    def forward(self, x):
        y = self.n1(self.conv(x).flatten(2).transpose(1, 2))
        return self.n2(y) + y


def test_a_layer_norm_of_blocked_tokens_sums_vectors():
    """The convolution is blocked (its readers: the LayerNorm's sums along the channels and its
    normalization, whose innermost axis is the channel), and the sums read the blocked layout
    x[.., c // L, .., c % L]: split by a vector, each block is contiguous, so every sum runs on
    vector partials (an rfactor) as over a plain row, not one channel at a time."""
    torch.manual_seed(0)
    for target, cm in _checked_builds(TokenNorms(32), torch.randn(1, 3, 13, 17)):
        sums = [line.split()[1].rstrip(":") for line in cm.ir("tile").splitlines()
                if line.strip().startswith("alloc") and "sum" in line]
        plain = {s for s in sums if not s.endswith(".rf")}
        assert len(plain) == 4 and all(s + ".rf" in sums for s in plain), (target, sums)
        assert [len(op.shape) for op in _convs(cm)] == [5], target      # its weight in tiles of blocks too


class TokensAndRows(nn.Module):
    """A convolution read as tokens by a Linear and along its rows by a mean over the width."""

    def __init__(self, c: int):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, c, 3, 1, 1), nn.Linear(c, c)
        self.eval()

    def forward(self, x):
        y = self.conv(x)
        return self.fc(y.flatten(2).transpose(1, 2)), y.mean(-1)


def test_a_convolution_also_read_along_its_rows_stays_nchw():
    """Blocked, the mean over the width would read one value a block (a gather); only a stage
    whose every reader reads channels-last is blocked for them."""
    torch.manual_seed(0)
    for target, cm in _checked_builds(TokensAndRows(16), torch.randn(1, 3, 6, 9)):
        assert [len(op.shape) for op in _convs(cm)] == [4], target


class Scaled(nn.Module):
    """A convolution times a 0-d buffer and a 0-d input, read as tokens by a Linear."""

    def __init__(self, c: int):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, c, 3, 1, 1), nn.Linear(c, c)
        self.register_buffer("scale", torch.tensor(0.5))
        self.eval()

    def forward(self, x, t):
        return self.fc((self.conv(x) * self.scale * t).flatten(2).transpose(1, 2))


def test_a_blocked_stage_reading_0d_tensors_matches_eager():
    """A 0-d tensor's read has no channel index: the same value for every lane."""
    torch.manual_seed(0)
    model, x, t = Scaled(16), torch.randn(1, 3, 6, 9), torch.tensor(2.0)
    with torch.no_grad():
        cm = st.compile(model, (x, t), target=CHECKED)
        torch.testing.assert_close(cm(x, t), model(x, t), rtol=1e-4, atol=1e-4)
    assert [len(op.shape) for op in _convs(cm)] == [5]
