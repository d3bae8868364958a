"""The NCHWc convolution kernel's register tile and loop order per vector ISA
(conv_schedules.nchwc_tile, row_tile, _pointwise_blocks, _input_outweighs_weights): the
AVX2 tile pinned (it fits 16 registers with its broadcast), AVX-512's unchanged, and
numerics against eager torch for odd shapes with each choice (rows outer or channel tiles
outer, two-row tiles with a row tail, 1x1 reductions in chunks), bounds-checked, on the
AVX2 target and, where the host runs it, the AVX-512 one. Each numerics test builds one
shape in the default suite; its further shapes are marked slow (-m slow, .ci/run runs them)."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch.conv_schedules import (MAX_PLANE_PIXELS, POINTWISE_TILE, SHORT_ROW_TILE, WIDE_POINTWISE_TILE,
                                           _divisor, _short_odd_rows, _tail_tile, nchwc_tile, row_tile)
from schedlang.torch.ops import conv_winograd

from .helpers import compile_each

HOST = sl.Target.create("llvm")
AVX2 = sl.Target.create("llvm -mcpu=haswell")
AVX512 = sl.Target.create("llvm -mcpu=skylake-avx512")


def _match_eager(model, x, want, target) -> st.CompiledModule:
    """model compiled for target, bounds-checked and not, with no op left in torch, gives want;
    captured once for both builds (helpers.compile_each: torch.export is a third of a small
    model's compile). Returns the build for target (not bounds-checked), whose program the
    tests read for the kernels' choices."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for _, cm in compile_each(model, (x,), (target.with_options(bounds_check=True), target)):
            with torch.no_grad():
                torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
    return cm


@pytest.mark.parametrize("blocks, cols, tile", [
    (8, 56, (4, 2)), (32, 14, (4, 2)), (8, 112, (4, 2)),   # ResNet's 1x1 rows
    (16, 28, (2, 4)), (32, 56, (2, 4)), (64, 28, (2, 4)),   # rows of 4k columns, 16 blocks or more: 2 x 4
    (18, 8, (2, 4)), (12, 28, (4, 2)),                      # (blocks even, >= 16; 12 blocks: 4 x 2)
    (64, 7, (4, 2)), (4, 15, (4, 2)),   # odd rows: 4 x 2 tiles and a one-column tail
    (4, 1, (4, 1)),       # one column: no 4 x 2
    (2, 12, (1, 12)),     # blocks not a multiple of 4: the divisor tile of the most accumulators
    (3, 13, (1, 13)),     # a prime row, blocks not a multiple of 2
])
def test_avx2_tile_is_pinned(blocks, cols, tile):
    assert nchwc_tile(AVX2, blocks, cols, 8) == tile


@pytest.mark.parametrize("blocks", [1, 2, 3, 4, 8, 64])
@pytest.mark.parametrize("cols", [1, 5, 7, 13, 14, 15, 28, 56, 112])
def test_avx2_tile_fits_the_register_file_with_its_broadcast(blocks, cols):
    """Only the 1x1 tile POINTWISE_TILE may leave a column tail; the others divide the row."""
    vecs, wt = nchwc_tile(AVX2, blocks, cols, 8)
    assert vecs * wt + vecs + 1 <= AVX2.native_registers() == 16
    assert blocks % vecs == 0 and wt <= cols
    assert cols % wt == 0 or (vecs, wt) == POINTWISE_TILE


@pytest.mark.parametrize("blocks, cols, tile", [(4, 56, (4, 4)), (8, 7, (2, 7)), (32, 14, (2, 14)), (4, 28, (4, 4))])
def test_avx512_tile_is_unchanged(blocks, cols, tile):
    assert nchwc_tile(AVX512, blocks, cols, 16) == tile


@pytest.mark.parametrize("blocks, cols, tile", [(4, 56, (2, 14)), (8, 28, (2, 14)), (32, 7, (2, 7)),
                                                (16, 14, (2, 14)), (1, 56, (1, 28)), (3, 13, (1, 13))])
def test_sums_first_tile_takes_the_most_accumulators(blocks, cols, tile):
    """A 3x3 kernel on two 512-bit FMA pipes (conv_schedules._sums_score): the most sums, ties
    to two channel blocks; still within the register file beside its loads."""
    vecs, wt = nchwc_tile(AVX512, blocks, cols, 16, sums_first=True)
    assert (vecs, wt) == tile and vecs * wt + vecs + 1 <= 32


@pytest.mark.parametrize("cpu, sums_first", [("emeraldrapids", True), ("znver4", False)])
def test_3x3_tile_follows_the_fma_pipes(cpu, sums_first, monkeypatch):
    """A 3x3 64 -> 64 convolution at 56 x 56 into another takes 2 x 14 on an Intel Xeon
    (TWO_ZMM_FMA_CPUS), 4 x 4 on Zen 4; both match eager where the host runs them. (The last
    convolution, computed in its NCHW result's loops, keeps its own tile; the direct kernels,
    Winograd off.)"""
    monkeypatch.setattr(conv_winograd, "ENABLED", False)
    from schedlang.target.llvm.cpus import TWO_ZMM_FMA_CPUS, why_not_runnable
    from schedlang.target.llvm.jit import host_cpu
    assert (cpu in TWO_ZMM_FMA_CPUS) == sums_first
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1)).eval()
    x = torch.randn(1, 64, 56, 56)
    target = sl.Target.create(f"llvm -mcpu={cpu}")
    cm = st.compile(model, (x,), target=target)
    tile = str(cm.ir("tile"))
    assert f"alloc convolution_conv.local: f32[1, {2 if sums_first else 4}, 1, {14 if sums_first else 4}, 16]" in tile
    if why_not_runnable(target.cpu, target.features, *host_cpu()) is None:
        with torch.no_grad():
            torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)


class TwoConvs(nn.Module):
    """conv-bn-relu, then a second conv reading the blocked activation, with a residual."""

    def __init__(self, cin: int, c: int, k: int, stride: int):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, c, 1, bias=False), nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, k, stride, k // 2, bias=True)
        self.c3 = nn.Conv2d(c, c, 1, bias=False)
        self.eval()

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        z = F.relu(self.c2(y))
        return self.c3(z) + z


# The default suite builds the AVX2 channel-tiles-outermost case and the first AVX-512 one; the
# other shapes (stride 2: test_input_channels_outside_a_row_of_tiles_match_eager's fast case) are slow.
@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize("cin, c, k, stride, hw", [
    (5, 16, 3, 1, (9, 15)),      # rows of 15: a 2 x 5 tile on AVX2; the input outweighs the weights
    pytest.param(3, 32, 1, 2, (7, 13), marks=pytest.mark.slow),      # stride 2, rows of 7 (prime)
    (4, 48, 3, 1, (3, 5)),       # the weights outweigh the input: channel tiles outermost
])
def test_nchwc_kernels_match_eager(target, cin, c, k, stride, hw):
    if target is AVX512 and HOST.native_lanes(32) < 16:
        pytest.skip("AVX-512 code needs an AVX-512 host")
    if target is AVX2 and (cin, c, k, stride, hw) == (5, 16, 3, 1, (9, 15)):
        pytest.skip("the same model, input and AVX2 builds as the first case of "
                    "test_input_channels_outside_a_row_of_tiles_match_eager, which checks them")
    torch.manual_seed(0)
    model, x = TwoConvs(cin, c, k, stride), torch.randn(1, cin, *hw)
    with torch.no_grad():
        want = model(x)
    _match_eager(model, x, want, target)


@pytest.mark.parametrize("rows, vecs, wt, want", [
    (7, 1, 7, 2),         # ResNet's 7x7 maps: 2 x 7 accumulators instead of 7
    (56, 1, 14, 1), (14, 1, 14, 1), (1, 1, 7, 1), (9, 2, 3, 2), (9, 2, 5, 1), (3, 2, 1, 3),
])
def test_avx2_row_tile_fills_the_register_file(rows, vecs, wt, want):
    rt = row_tile(AVX2, rows, vecs, wt)
    assert rt == want
    assert rt * vecs * wt + vecs + 1 <= AVX2.native_registers()


def test_avx512_row_tile_is_one_row():
    assert row_tile(AVX512, 7, 2, 7) == row_tile(AVX512, 56, 4, 4) == 1


@pytest.mark.parametrize("n, most, want", [(18, 16, 9), (17, 16, 1), (64, 16, 16), (5, 16, 5), (3, 8, 3)])
def test_divisor(n, most, want):
    assert _divisor(n, most) == want


class PointwiseBlock(nn.Module):
    """A bottleneck's end on blocked activations: relu(1x1(y) + 1x1 shortcut(y0)), the main
    1x1's reduction long enough for chunks (144 channels: 18 blocks of 8), the shortcut's
    one chunk, then a 1x1 that keeps the sum blocked (its own kernel reads it)."""

    def __init__(self, cin: int, mid: int, wide: int, c: int, stride: int):
        super().__init__()
        self.c0, self.c1 = nn.Conv2d(cin, mid, 1), nn.Conv2d(mid, wide, 1)
        self.ca, self.ba = nn.Conv2d(wide, c, 1, stride, bias=False), nn.BatchNorm2d(c)
        self.cb = nn.Conv2d(mid, c, 1, stride, bias=False)
        self.out = nn.Conv2d(c, 8, 1)
        self.eval()

    def forward(self, x):
        y0 = F.relu(self.c0(x))
        y = F.relu(self.c1(y0))
        return self.out(F.relu(self.ba(self.ca(y)) + self.cb(y0)))


# The first case (chunks, 3 channel tiles) in the default suite; the others are slow (two-row
# tiles: test_two_row_tiles_of_3x3_match_eager's fast case).
@pytest.mark.parametrize("cin, mid, wide, c, stride, hw", [
    (3, 40, 144, 24, 1, (5, 9)),      # chunks of 9 blocks (main) and 5 (shortcut, whole); 3 channel tiles
    pytest.param(3, 16, 136, 16, 2, (9, 11), marks=pytest.mark.slow),   # stride 2, 17 blocks: chunks of 1 block
    pytest.param(3, 16, 160, 16, 1, (7, 7), marks=pytest.mark.slow),    # rows of 7: two-row tiles, a row tail, no chunks
])
def test_pointwise_and_row_tiles_match_eager(cin, mid, wide, c, stride, hw):
    torch.manual_seed(0)
    model, x = PointwiseBlock(cin, mid, wide, c, stride), torch.randn(1, cin, *hw)
    with torch.no_grad():
        model.ba.running_mean.uniform_(-0.5, 0.5)
        model.ba.running_var.uniform_(0.5, 2.0)
        want = model(x)
    _match_eager(model, x, want, AVX2)


# (5, 7), two-row tiles and a row tail, in the default suite; (7, 7) is slow.
@pytest.mark.parametrize("c, hw", [pytest.param(32, (7, 7), marks=pytest.mark.slow), (24, (5, 7))])
def test_two_row_tiles_of_3x3_match_eager(c, hw):
    """3x3 convolutions over rows of 7 (two-row tiles; 5 rows: a tail), on the AVX2 target."""
    torch.manual_seed(0)
    model, x = TwoConvs(4, c, 3, 1), torch.randn(1, 4, *hw)
    with torch.no_grad():
        want = model(x)
    _match_eager(model, x, want, AVX2)


@pytest.mark.parametrize("blocks, cols, tile", [
    (8, 56, (4, 2)), (16, 28, (4, 2)), (32, 14, (4, 2)),    # ResNet's 3x3 rows: 8 FMAs per 6 loads
    (64, 7, (1, 7)),      # rows of 7: no 4 x 7 or 2 x 7 fits; row_tile makes it 2 x 7 accumulators
    (4, 15, (2, 5)), (2, 12, (2, 6)),                       # 2 x 5, 2 x 6: 10 of 7, 12 of 8 loads
    (3, 13, (1, 13)),     # a prime row, blocks not a multiple of 2
])
def test_avx2_tile_of_convolutions_with_taps_is_pinned(blocks, cols, tile):
    """nchwc_tile(taps=True): the most FMAs per value loaded within 16 registers."""
    vecs, wt = nchwc_tile(AVX2, blocks, cols, 8, taps=True)
    assert (vecs, wt) == tile
    assert vecs * wt + vecs + 1 <= AVX2.native_registers()


@pytest.mark.parametrize("blocks, cols", [(4, 56), (8, 7), (32, 14), (4, 28), (3, 13)])
def test_avx512_tile_does_not_depend_on_taps(blocks, cols):
    assert nchwc_tile(AVX512, blocks, cols, 16, taps=True) == nchwc_tile(AVX512, blocks, cols, 16)


def _nchwc_choices(cm, target) -> list:
    """(kernel extents of the convolutions, nchwc_choice) of each NCHWc convolution kernel of
    cm's graph lowered for target: cm's own program where it was compiled for target, else the
    graph lowered for target (what st.compile for target would hold, without building it)."""
    from schedlang.torch.conv_schedules import nchwc_choice
    from schedlang.torch.fuse import fuse
    from schedlang.torch.schedules import static
    program = cm.program if cm.target == target else st.lower_graph(cm.graph, target, warn=False)
    out = []
    for part in program.parts:
        s = sl.create_schedule([t.op for _, t in part.outputs])
        for g in fuse(s):
            y = s[g.anchor].op.axis
            if not g.convs or len(y) != 5:
                continue
            taps = sorted({static(r.dom.extent) for c in g.convs for r in s[c].op.reduce_axis[1:3]})
            choice = nchwc_choice(target, s, g, static(y[1].dom.extent), static(y[3].dom.extent),
                                  [static(y[2].dom.extent)], static(y[4].dom.extent), row_tiles=g.pad is None)
            out.append((taps[-1], g.pad is not None, choice))
    return out


# Channels not a multiple of 8, stride 2 and odd rows in the default suite; the other shapes are slow.
@pytest.mark.parametrize("cin, c, k, stride, hw", [
    pytest.param(5, 16, 3, 1, (9, 15), marks=pytest.mark.slow),      # rows of 15: 2 x 5 tiles
    (3, 12, 3, 2, (11, 9)),      # channels not a multiple of 8, stride 2, odd rows
    pytest.param(4, 16, 7, 1, (9, 7), marks=pytest.mark.slow),       # 7x7 kernels, rows of 7: two-row tiles, a row tail
    pytest.param(3, 32, 3, 1, (6, 8), marks=pytest.mark.slow),       # 4 x 2 tiles
])
def test_input_channels_outside_a_row_of_tiles_match_eager(cin, c, k, stride, hw):
    """Kernels of convolutions with taps on AVX2 compute a row of tiles at once, each block
    of input channels outside the row's column tiles (_input_channels_outside; padded and
    unpadded kernels); 1x1 kernels and AVX-512 do not. Numerics against eager torch,
    bounds-checked."""
    torch.manual_seed(0)
    model, x = TwoConvs(cin, c, k, stride), torch.randn(1, cin, *hw)
    with torch.no_grad():
        want = model(x)
    cm = _match_eager(model, x, want, AVX2)
    choices = _nchwc_choices(cm, AVX2)
    assert any(k > 1 for k, _, _ in choices) and any(k == 1 for k, _, _ in choices)
    for taps, padded, choice in choices:       # (or a 1x1's small plane: conv_schedules._pointwise_blocked)
        assert choice.channels_outside == (taps > 1 or choice.plane), (taps, padded, choice)
    assert not any(choice.channels_outside for _, _, choice in _nchwc_choices(cm, AVX512))


# The first case (padded, a column tail) in the default suite; strided, chunked and stem kernels are slow.
@pytest.mark.parametrize("model_args, hw", [
    (("two", 3, 32, 3, 1), (7, 9)),         # a padded 1x1 (P) and a 1x1 + residual, rows of 9: a tail
    pytest.param(("two", 5, 32, 1, 2), (9, 13), marks=pytest.mark.slow),       # stride 2, rows of 7 after it
    pytest.param(("block", 3, 32, 160, 32, 1), (7, 7), marks=pytest.mark.slow),   # 20 blocks: chunks beside a second 1x1
    pytest.param(("block", 3, 32, 288, 32, 2), (11, 9), marks=pytest.mark.slow),  # 36 blocks in chunks of 12, strided
    pytest.param(("stem", 3), (15, 13), marks=pytest.mark.slow),               # a 7x7 stride-2 stem, rows of 7
])
def test_avx2_pointwise_tile_with_a_column_tail_matches_eager(model_args, hw):
    """AVX2 1x1 kernels (and a stem over the NCHW input) of channels in multiples of 4 blocks
    take POINTWISE_TILE, a row of an odd width ending in a one-column tile; padded, strided and
    chunked kernels, bounds-checked, against eager torch."""
    torch.manual_seed(0)
    kind, *args = model_args
    if kind == "stem":              # (no taps outside on an unblocked input: the 1x1 tile)
        model = nn.Sequential(nn.Conv2d(args[0], 32, 7, 2, 3), nn.ReLU(), nn.Conv2d(32, 32, 1)).eval()
    else:
        model = TwoConvs(*args) if kind == "two" else PointwiseBlock(*args)
    x = torch.randn(1, args[0], *hw)
    with torch.no_grad():
        want = model(x)
    cm = _match_eager(model, x, want, AVX2)
    choices = [c for k, _, c in _nchwc_choices(cm, AVX2) if k in (1, 7)]
    assert any((c.vecs, c.wt) == POINTWISE_TILE for c in choices), choices


# 2 x 4 tiles over rows of 8 in the default suite; with row chunks (112 blocks) slow.
@pytest.mark.parametrize("cin, mid, wide, c, stride, hw, chunk", [
    (3, 16, 144, 128, 1, (9, 8), 1),
    pytest.param(3, 128, 768, 128, 1, (11, 8), 8, marks=pytest.mark.slow),    # 112 blocks: chunks of 8
])
def test_avx2_wide_pointwise_tile_matches_eager(cin, mid, wide, c, stride, hw, chunk):
    """AVX2 1x1 kernels of 16 channel blocks or more over rows of a multiple of 4 columns take
    WIDE_POINTWISE_TILE (with row chunks too), bounds-checked, against eager torch."""
    torch.manual_seed(0)
    model, x = PointwiseBlock(cin, mid, wide, c, stride), torch.randn(1, cin, *hw)
    with torch.no_grad():
        want = model(x)
    cm = _match_eager(model, x, want, AVX2)
    wide_tiles = [ch for k, _, ch in _nchwc_choices(cm, AVX2) if k == 1 and (ch.vecs, ch.wt) == WIDE_POINTWISE_TILE]
    assert wide_tiles and any(ch.row_chunk == chunk for ch in wide_tiles), wide_tiles


@pytest.mark.parametrize("blocks, cols, want", [
    (128, 14, (2, 5)), (64, 7, (2, 4)),           # ResNet-50's rows of 14 (5 + 5 + 4) and 7 (4 + 3)
    (16, 9, (2, 5)), (32, 13, (2, 5)), (16, 5, (2, 5)), (16, 6, (2, 6)), (18, 19, (2, 5)),
    (32, 28, None), (16, 4, None), (16, 3, None),   # rows of 4k columns (2 x 4 whole), short rows
    (8, 14, None), (17, 14, None),                 # under WIDE_TILE_MIN_BLOCKS, odd blocks
])
def test_avx2_tail_tile(blocks, cols, want):
    """_tail_tile: 2 blocks by the fewest columns covering the row in as few tiles as 2 x 6."""
    assert _tail_tile(16, blocks, cols) == want
    if want is not None:
        vecs, wt = want
        assert vecs * wt + vecs + 1 <= 16 and -(-cols // wt) == -(-cols // 6)


class OneByOne(nn.Module):
    """y = ReLU(1x1 cin -> wide), then a bottleneck's end: ReLU(1x1 mid -> wide (ReLU(1x1
    wide -> mid (y))) + y) (a kernel of one 1x1 over a blocked input with its residual:
    _tail_tile's), then a conv of kernel k that reads the sum blocked (k = 3: the sum's kernel
    writes its padded copy)."""

    def __init__(self, cin: int, mid: int, wide: int, k: int = 1):
        super().__init__()
        self.c0, self.ca, self.c1 = nn.Conv2d(cin, wide, 1), nn.Conv2d(wide, mid, 1), nn.Conv2d(mid, wide, 1)
        self.out = nn.Conv2d(wide, 8, k, 1, k // 2)
        self.eval()

    def forward(self, x):
        y = F.relu(self.c0(x))
        return self.out(F.relu(self.c1(F.relu(self.ca(y))) + y))


# Rows of 14 (a task a row: 5 + 5 + 4) in the default suite; a padded result and a whole 7 x 7
# plane (4 + 3) slow.
@pytest.mark.parametrize("mid, wide, hw, plane, k", [
    (32, 128, (5, 14), False, 1),
    pytest.param(32, 128, (5, 14), False, 3, marks=pytest.mark.slow),
    pytest.param(64, 256, (7, 7), True, 1, marks=pytest.mark.slow),
])
def test_avx2_tail_tile_matches_eager(mid, wide, hw, plane, k):
    """AVX2 kernels of one 1x1 over a blocked input of 16 output blocks or more, rows not a
    multiple of 4 columns, take _tail_tile's tile (the last column tile guarded), a task a
    row or a channel tile's whole plane, writing a padded result or not; bounds-checked,
    against eager torch."""
    torch.manual_seed(0)
    model, x = OneByOne(3, mid, wide, k), torch.randn(1, 3, *hw)
    with torch.no_grad():
        want = model(x)
    cm = _match_eager(model, x, want, AVX2)
    tail = _tail_tile(16, wide // 8, hw[1])
    tiles = [ch for taps, _, ch in _nchwc_choices(cm, AVX2) if taps == 1 and (ch.vecs, ch.wt) == tail]
    assert tiles and all(ch.plane == plane and ch.row_chunk == 1 for ch in tiles), _nchwc_choices(cm, AVX2)


@pytest.mark.parametrize("blocks, cols, want", [
    (64, 7, True), (4, 5, True), (8, 3, True),     # ResNet's 7x7 maps; shorter odd rows
    (64, 14, False), (64, 9, False), (64, 1, False), (6, 7, False),   # even, long, one column, 6 blocks
])
def test_short_odd_rows(blocks, cols, want):
    assert _short_odd_rows(blocks, cols) == want


# The whole-plane case in the default suite; the other shapes (a task a row: test_conv_prepack_blocks's
# fast case) are slow.
@pytest.mark.parametrize("cin, c, stride, hw", [
    (4, 64, 1, (7, 7)),       # rows of 7: 4 x 3 tiles and a one-column tail, a whole-plane task
    pytest.param(4, 32, 1, (7, 7), marks=pytest.mark.slow),    # one channel tile: a task a row, for the thread's sake
    pytest.param(3, 64, 2, (13, 9), marks=pytest.mark.slow),   # stride 2 to 7 x 5, two channel tiles
    pytest.param(5, 32, 1, (11, 3), marks=pytest.mark.slow),   # rows of 3 (no tail), 11 rows
    pytest.param(3, 32, 1, (20, 7), marks=pytest.mark.slow),   # 140 pixels: more than MAX_PLANE_PIXELS, a task a row
])
def test_short_odd_rows_of_3x3_match_eager(cin, c, stride, hw, monkeypatch):
    """AVX2 kernels of 3x3 convolutions over short odd rows (_short_odd_rows) take
    SHORT_ROW_TILE with the tile's blocks outside its columns, a task a plane where it is
    small and there are two channel tiles a thread; padded (the first 3x3 writes the second's
    padded input) and unpadded. Bounds-checked, against eager torch. (Direct kernels: the 3x3
    stride-1 ones of 64 channels would otherwise run as Winograd, ops/conv_winograd.py.)"""
    from schedlang.torch.ops import conv_winograd
    monkeypatch.setattr(conv_winograd, "ENABLED", False)
    AVX2 = sl.Target.create("llvm -mcpu=haswell -num-cores=1")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(cin, c, 1), nn.ReLU(), nn.Conv2d(c, c, 3, stride, 1), nn.ReLU(),
                          nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(), nn.Conv2d(c, 8, 1)).eval()
    x = torch.randn(1, cin, *hw)
    with torch.no_grad():
        want = model(x)
    cm = _match_eager(model, x, want, AVX2)
    short = [(padded, ch) for k, padded, ch in _nchwc_choices(cm, AVX2)
             if k == 3 and (ch.vecs, ch.wt) == SHORT_ROW_TILE]
    assert {padded for padded, _ in short} == {True, False}, short
    pixels = ((hw[0] - 1) // stride + 1) * ((hw[1] - 1) // stride + 1)
    for padded, ch in short:
        assert ch.blocks_outer and ch.channels_outside and ch.rt == 1
        assert ch.plane == (pixels <= MAX_PLANE_PIXELS and c // 8 // SHORT_ROW_TILE[0] >= 2)
    assert not any(ch.plane or ch.blocks_outer for _, _, ch in _nchwc_choices(cm, AVX512))


def test_avx512_rows_of_prime_columns_take_a_guarded_tile():
    """91 channel blocks by rows of 37 (legacy Xception's): no divisor tile beyond 1 x 1, so
    the fewest columns covering the row in two tiles (19 + 18), the last one guarded."""
    assert nchwc_tile(AVX512, 91, 37, 8) == (1, 19)
    assert nchwc_tile(AVX512, 7, 37, 16) == (1, 19)
    assert nchwc_tile(AVX512, 8, 37, 16) == (4, 6)      # not 4 x 1: 4 x 6 tiles, the seventh guarded
    assert nchwc_tile(AVX512, 8, 38, 16) == (4, 2)      # 8 sums of divisors: unchanged


class Pointwise(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, c, 1), nn.Conv2d(c, c, 1)
        self.eval()

    def forward(self, x):
        return self.c2(F.relu(self.c1(x))) + 1.0


def test_a_guarded_tile_over_rows_of_prime_columns_matches_eager():
    """7 blocks of 16 by rows of 37 on AVX-512: tiles of 19 columns, the second one guarded."""
    if HOST.native_lanes(32) < 16:
        pytest.skip("AVX-512 code needs an AVX-512 host")
    torch.manual_seed(0)
    model, x = Pointwise(112), torch.randn(1, 3, 3, 37)
    with torch.no_grad():
        want = model(x)
    _match_eager(model, x, want, AVX512)


class OneBlockOut(nn.Module):
    """HGNetV2's stem: a 3x3 to c channels (blocked), padded on the right and bottom, a 2x2
    to `narrow` channels (fewer than a vector: packed as one block of that many, its output
    NCHW), then a 2x2 back up."""

    def __init__(self, c: int, narrow: int):
        super().__init__()
        self.stem, self.a = nn.Conv2d(3, c, 3, 2, 1), nn.Conv2d(c, narrow, 2)
        self.b, self.out = nn.Conv2d(narrow, c, 2), nn.Conv2d(c, c, 3, padding=1)   # (most of the work: vectors)
        self.eval()

    def forward(self, x):
        y = F.relu(self.stem(x))
        z = F.relu(self.b(F.pad(F.relu(self.a(F.pad(y, (0, 1, 0, 1)))), (0, 1, 0, 1))))
        return self.out(z + y)


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_a_convolution_of_one_block_of_channels_runs_its_blocked_kernel(target):
    """OC == L (half a vector): the weight read w[0, .., oc] (simplify drops oc // L and oc % L) is still
    packed blocks (conv_schedules.block_width), so the kernel is the blocked one, not rows
    of columns gathered from a blocked input (HGNetV2-B0's stem 2x2: 4.5 -> 0.3 ms)."""
    from schedlang.schedule import create_schedule
    from schedlang.torch.conv_schedules import block_width
    from schedlang.torch.fuse import fuse
    if target is AVX512 and HOST.native_lanes(32) < 16:
        pytest.skip("AVX-512 code needs an AVX-512 host")
    lanes = target.native_lanes(32)
    torch.manual_seed(0)
    model, x = OneBlockOut(4 * lanes, lanes // 2), torch.randn(1, 3, 13, 17)
    with torch.no_grad():
        want = model(x)
    cm = _match_eager(model, x, want, target)
    widths = []
    for part in cm.program.parts:
        s = create_schedule([t.op for _, t in part.outputs])
        widths += [block_width(s[c]) for g in fuse(s) for c in g.convs if c.op.shape[1:2] == (lanes // 2,)
                   and len(c.op.shape) == 4]
    assert widths == [lanes // 2], widths
