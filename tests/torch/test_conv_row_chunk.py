"""AVX2 1x1 kernels of long reductions compute a row of register tiles at once, the
reduction in chunks of input channel blocks outside the row's column tiles
(conv_schedules._row_chunk, NchwcChoice.row_chunk): which kernels take it (the rule pinned
on ResNet-50's shapes, AVX-512 unchanged) and numerics against eager torch for odd shapes,
bounds-checked: a chunk that is not ROW_CHUNK, a fused strided shortcut, a padded result,
an input that outweighs the weights.
One numerics case in the default suite; the others are slow (-m slow)."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch.conv_schedules import MAX_PLANE_PIXELS, ROW_CHUNK, nchwc_choice
from schedlang.torch.fuse import fuse
from schedlang.torch.schedules import static

from .helpers import compile_each

AVX2 = sl.Target.create("llvm -mcpu=haswell")
AVX512 = sl.Target.create("llvm -mcpu=skylake-avx512")


class Bottleneck(nn.Module):
    """relu(bn(1x1 wide -> c, stride)(y) + 1x1 mid -> c, stride (y0)), then a conv of kernel
    k reading the sum blocked (k = 3: the sum's kernel writes its padded copy); shortcut
    False drops the second 1x1."""

    def __init__(self, cin: int, mid: int, wide: int, c: int, stride: int, shortcut: bool = True, k: int = 1):
        super().__init__()
        self.c0, self.c1 = nn.Conv2d(cin, mid, 1), nn.Conv2d(mid, wide, 1)
        self.ca, self.ba = nn.Conv2d(wide, c, 1, stride, bias=False), nn.BatchNorm2d(c)
        self.cb = nn.Conv2d(mid, c, 1, stride, bias=False) if shortcut else None
        self.out = nn.Conv2d(c, 8, k, 1, k // 2)
        self.eval()
        with torch.no_grad():
            self.ba.running_mean.uniform_(-0.5, 0.5)
            self.ba.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        y0 = F.relu(self.c0(x))
        y = F.relu(self.c1(y0))
        s = self.ba(self.ca(y))
        return self.out(F.relu(s + self.cb(y0) if self.cb is not None else s))


def _one_by_ones(graph, target) -> list:
    """[(input channel blocks of each 1x1, pixels, the kernel's NchwcChoice)] of each NCHWc
    kernel of 1x1 convolutions of graph lowered for target."""
    program = st.lower_graph(graph, target, warn=False)
    out = []
    for part in program.parts:
        s = sl.create_schedule([t.op for _, t in part.outputs])
        for g in fuse(s):
            y = s[g.anchor].op.axis
            if not g.convs or len(y) != 5 or any(static(r.dom.extent) != 1 for c in g.convs
                                                 for r in s[c].op.reduce_axis[1:3]):
                continue
            choice = nchwc_choice(target, s, g, static(y[1].dom.extent), static(y[3].dom.extent),
                                  [static(y[2].dom.extent)], static(y[4].dom.extent), row_tiles=g.pad is None)
            out.append(([static(s[c].op.reduce_axis[0].dom.extent) for c in g.convs],
                        static(y[2].dom.extent) * static(y[3].dom.extent), choice))
    return out


def _chunks(graph, target) -> list:
    """[(input channel blocks of each 1x1, the kernel's row_chunk)] of each NCHWc 1x1 kernel."""
    return [(blocks, choice.row_chunk) for blocks, _, choice in _one_by_ones(graph, target)]


def _capture(model, x):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return st.capture(model, (x,))


def test_resnet50_shapes_take_the_rule():
    """On AVX2, in chunks of ROW_CHUNK: ResNet-50's 1x1 1024 -> 256 at 14x14 (128 blocks, its
    weights the larger), a 1024 -> 128 (its input the larger) and the strided shortcut
    kernel of its last stage (64 + 128 blocks; at 9x9 here: at ResNet-50's 7x7 it is a
    whole-plane task, test_small_planes_take_a_whole_plane_task); not a 256 -> 1024 at 14x14
    (32 blocks, its weights the larger: under ROW_CHUNK_MIN_WEIGHTS) nor a 128 -> 16 (16
    blocks: under ROW_CHUNK_MIN); AVX-512 never."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 64, 1), nn.ReLU(), nn.Conv2d(64, 1024, 1), nn.ReLU(),
                          nn.Conv2d(1024, 256, 1), nn.ReLU(), nn.Conv2d(256, 1024, 1), nn.ReLU(),
                          nn.Conv2d(1024, 128, 1), nn.ReLU(), nn.Conv2d(128, 16, 1), nn.ReLU(),
                          Bottleneck(16, 1024, 512, 2048, 2)).eval()
    graph = _capture(model, torch.randn(1, 3, 18, 18))      # (rows of 9 after the stride: more than a plane)
    got = _chunks(graph, AVX2)
    assert got.count(([128], ROW_CHUNK)) == 3 and ([64, 128], ROW_CHUNK) in got, got
    assert ([32], 1) in got and ([16], 1) in got, got
    assert all(chunk == 1 for _, chunk in _chunks(graph, AVX512))


# The first case (a shortcut summed, chunks of 8 blocks, rows of 5) in the default suite. (Planes of
# more than MAX_PLANE_PIXELS: a smaller one is a whole-plane task, test_small_planes_take_a_whole_plane_task.)
@pytest.mark.parametrize("args, hw, chunk", [
    ((3, 64, 768, 24, 1), (13, 5), 8),                   # 96 + 8 blocks, gcd 8; 3 channel blocks: a 1-block tile
    pytest.param((3, 64, 768, 48, 2), (27, 9), 8, marks=pytest.mark.slow),  # strided shortcut, rows of 5
    pytest.param((3, 16, 792, 32, 1, False, 3), (11, 7), 11,                # 99 blocks: chunks of 11; a padded
                 marks=pytest.mark.slow),                                   # result, rows of 7: a column tail
    pytest.param((3, 16, 264, 8, 1, False, 3), (11, 7), 11,                 # 33 blocks, the input the larger:
                 marks=pytest.mark.slow),                                   # chunks of 11, one channel block
])
def test_row_chunks_match_eager(args, hw, chunk):
    torch.manual_seed(0)
    model, x = Bottleneck(*args), torch.randn(1, args[0], *hw)
    with torch.no_grad():
        want = model(x)
    first = True
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for _, cm in compile_each(model, (x,), (AVX2.with_options(bounds_check=True), AVX2)):
            if first:
                assert chunk in [c for _, c in _chunks(cm.graph, AVX2)], _chunks(cm.graph, AVX2)
                first = False
            with torch.no_grad():
                torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)


def _planes(graph, target) -> list:
    """[(pixels, the kernel's NchwcChoice)] of each NCHWc 1x1 kernel."""
    return [(pixels, choice) for _, pixels, choice in _one_by_ones(graph, target)]


ONE_CORE = sl.Target.create("llvm -mcpu=haswell -num-cores=1")


def test_small_planes_take_a_whole_plane_task():
    """On AVX2, the 1x1 kernels over blocked inputs of ResNet-50's last stage (7x7: 49 pixels,
    MAX_PLANE_PIXELS or fewer) are a channel tile's whole plane a task, the input channel
    blocks outside its rows (plane, channels_outside): chunked or not, strided, with a fused
    shortcut; not at 14x14; AVX-512 never."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 64, 1), nn.ReLU(), nn.Conv2d(64, 1024, 1), nn.ReLU(),
                          nn.Conv2d(1024, 1024, 1, 2), nn.ReLU(), Bottleneck(1024, 512, 512, 2048, 1)).eval()
    got = _planes(_capture(model, torch.randn(1, 3, 14, 14)), ONE_CORE)
    # at 7x7: 1024 -> 1024 /2 and 1024 -> 512 (chunked), 512 -> 512 (not), the 512 -> 2048 + shortcut sum
    small = [c for pixels, c in got if pixels <= MAX_PLANE_PIXELS]
    assert len(small) == 4 and all(c.plane and c.channels_outside for c in small), got
    assert not any(c.plane for pixels, c in got if pixels > MAX_PLANE_PIXELS), got
    assert not any(c.plane for _, c in _planes(_capture(model, torch.randn(1, 3, 14, 14)), AVX512))


# A padded result with a fused strided shortcut and rows of 7 (a column tail) in the default suite.
@pytest.mark.parametrize("args, hw", [
    ((3, 32, 128, 64, 2, True, 3), (13, 13)),            # 16 + 4 blocks, 2 channel tiles, 7x7: a tail
    pytest.param((3, 32, 1024, 64, 1, False), (5, 9), marks=pytest.mark.slow),  # 128 blocks: chunks but for the plane
    pytest.param((3, 64, 64, 128, 1, False, 3), (3, 4), marks=pytest.mark.slow),  # 16 blocks, rows of 4: 2 x 4 tiles
])
def test_whole_plane_1x1_kernels_match_eager(args, hw):
    """AVX2 1x1 kernels whose task is a channel tile's whole plane (one core: two channel tiles
    a thread), bounds-checked, against eager torch."""
    torch.manual_seed(0)
    model, x = Bottleneck(*args), torch.randn(1, args[0], *hw)
    with torch.no_grad():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for i, (_, cm) in enumerate(compile_each(model, (x,), (ONE_CORE.with_options(bounds_check=True), ONE_CORE))):
            if i == 0:
                assert any(c.plane for _, c in _planes(cm.graph, ONE_CORE)), _planes(cm.graph, ONE_CORE)
            with torch.no_grad():
                torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
