"""Winograd F(4x4, 3x3) in the frontend (ops/conv_winograd.py): which convolutions take it
(the rule, no build), and a ResNet-like block (two 3x3 64 -> 64 with batch norms folded, ReLU,
a residual add over a 1x1 convolution) on a 13 x 14 input (16 tiles, partial ones: what
AVX-512 needs) compiled bounds-checked and for the host against eager torch, its kernels the
Winograd stages over NCHWc activations; the first convolution's epilogue, read by the second's
input tiles, a kernel of its own with the inverse's row pass Y placed inside it (fuse.py)."""
import warnings

import pytest
import torch
import torch.nn as nn

import schedlang as sl
import schedlang.torch as st
from schedlang.topi import winograd as wg
from schedlang.torch.ops.conv import check_call
from schedlang.torch.ops.conv_winograd import winograd_tile

from ..helpers import CHECKED
from .helpers import compile_each, distinct_builds
from .test_conv import compile_checked

HOST = sl.Target.create("llvm")
AVX2 = sl.Target.create("llvm -mcpu=znver1")
ZEN3 = sl.Target.create("llvm -mcpu=znver3")
AVX512 = sl.Target.create("llvm -mcpu=skylake-avx512")


class Block(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.down = nn.Conv2d(c, c, 1)
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        for bn in (self.b1, self.b2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(bn.weight, 0.5, 1.5)
            nn.init.uniform_(bn.bias, -0.5, 0.5)
        self.eval()

    def forward(self, x):
        x = self.down(x)
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


class _Ctx:
    def __init__(self, target):
        self.target = target


def _host_takes_winograd(ic: int, oc: int, h: int, w: int, pad: int) -> bool:
    """Whether the rule runs a 3x3 stride-1 ic -> oc convolution of an h x w input as Winograd on the host."""
    call = check_call(sl.placeholder((1, ic, h, w)), sl.placeholder((oc, ic, 3, 3)), None, 1, pad, 1, 1)
    return winograd_tile(_Ctx(HOST), call) is not None


def _stages(cm) -> list:
    """Every stage (operation) of the compiled module cm's parts."""
    return sl.tensor.graph.post_order([t.op for p in cm.program.parts for _, t in p.outputs])


def _stage_tags(cm) -> set:
    """The tags of every stage of the compiled module cm's parts."""
    return {op.tag for op in _stages(cm) if hasattr(op, "tag")}


@pytest.mark.parametrize("change, expected", [
    ({}, 4),
    ({"stride": 2}, None),
    ({"k": 1, "pad": 0}, None),
    ({"ic": 32}, None),             # below MIN_CHANNELS: not measured
    ({"oc": 72, "ic": 68}, None),   # 68 input channels: not vectors of 8
    ({"size": 6}, None),            # below MIN_SIZE
    ({"pad": 0}, 4),
])
def test_which_convolutions(change, expected):
    spec = dict(oc=64, ic=64, k=3, stride=1, pad=1, size=14)
    spec.update(change)
    x = sl.placeholder((1, spec["ic"], spec["size"], spec["size"]), name="x")
    w = sl.placeholder((spec["oc"], spec["ic"], spec["k"], spec["k"]), name="w")
    call = check_call(x, w, None, spec["stride"], spec["pad"], 1, 1)
    assert winograd_tile(_Ctx(AVX2), call) == expected
    assert winograd_tile(_Ctx(ZEN3), call) == expected
    # 32 registers: the same rule from 16 output tiles of 4 x 4 up (a 13 x 13 output and larger)
    assert winograd_tile(_Ctx(AVX512), call) == (expected if min(call.out_shape[2:]) >= 13 else None)


@pytest.mark.parametrize("h, w, expected", [
    (13, 14, 4), (16, 13, 4), (56, 56, 4),        # 16 tiles and more
    (12, 16, None), (7, 7, None), (14, 12, None),  # 12, 4 and 12 tiles: the direct kernel
])
def test_avx512_needs_sixteen_tiles(h, w, expected):
    x = sl.placeholder((1, 64, h, w), name="x")
    call = check_call(x, sl.placeholder((64, 64, 3, 3), name="w"), None, 1, 1, 1, 1)
    assert winograd_tile(_Ctx(AVX512), call) == expected
    assert winograd_tile(_Ctx(AVX2), call) == 4       # AVX2 from 4 tiles (7 x 7) up


def test_block_matches_eager():
    torch.manual_seed(0)
    cm = compile_checked(Block(64), torch.randn(1, 64, 13, 14))
    if _host_takes_winograd(64, 64, 13, 14, 1):
        assert set(wg.TAGS) <= _stage_tags(cm), "the host's 3x3 layers did not run as Winograd"
        d = next(op for op in _stages(cm) if getattr(op, "tag", "") == wg.TAG_D)
        assert any(len(t.shape) == 5 for t in d.input_tensors), "the input tiles do not read NCHWc activations"


# padding 1 by default; padding 0 and the wider panel with -m slow
@pytest.mark.parametrize("ic, oc, h, w, pad", [(64, 80, 13, 13, 1),
                                               pytest.param(144, 112, 20, 19, 0, marks=pytest.mark.slow)])
def test_channels_off_the_panel_match_eager(ic, oc, h, w, pad):
    """Output channels that are no multiple of the bgemm's register panel (80 and 112 against
    AVX2's 24 and AVX-512's 48 or 64), partial tiles, padding 0 and 1, a batch norm folded:
    bounds-checked and for the host against eager, as Winograd wherever the host's rule says so."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(ic, oc, 3, padding=pad), nn.BatchNorm2d(oc), nn.ReLU()).eval()
    model[1].running_mean.uniform_(-0.5, 0.5)
    model[1].running_var.uniform_(0.5, 2.0)
    cm = compile_checked(model, torch.randn(1, ic, h, w))
    assert (wg.TAG_D in _stage_tags(cm)) == _host_takes_winograd(ic, oc, h, w, pad)


@pytest.mark.parametrize("oc, h, w", [(64, 37, 35), pytest.param(80, 49, 46, marks=pytest.mark.slow)])
def test_tiles_split_between_threads_match_eager(oc, h, w):
    """More 4x4 tiles than output channels (90 and 156 against 64, and 80 padded to 128): the
    transformed input outweighs the transformed weight, so the bgemm and the inverse split the
    tiles between the threads (tiles_between_threads), over partial tiles and a tile count the
    bgemm's register rows do not divide: bounds-checked and for the host against eager."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(64, oc, 3, padding=1), nn.ReLU()).eval()
    cm = compile_checked(model, torch.randn(1, 64, h, w))
    if _host_takes_winograd(64, oc, h, w, 1):
        bgemms = [op.output(0) for op in _stages(cm) if getattr(op, "tag", "") == wg.TAG_M]
        assert bgemms and all(wg.tiles_between_threads(m) for m in bgemms)


def test_epilogue_before_winograd_is_its_own_kernel():
    """The first 3x3's epilogue (batch norm, ReLU) read by the second 3x3's input tiles is the
    anchor of a kernel (not inlined into the tiles), and every inverse row pass Y is computed
    inside the kernel reading it (no Y kernel of its own, unscheduled)."""
    from schedlang.torch.fuse import fuse
    from schedlang.torch.schedules import default_schedule
    from schedlang.torch.winograd_schedules import winograd_rows
    torch.manual_seed(0)
    model, x = Block(64), torch.randn(1, 64, 12, 12)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = st.lower_graph(st.capture(model, (x,)), ZEN3)
    (part,) = program.parts
    outs = [t for _, t in part.outputs]
    s = sl.create_schedule([t.op for t in outs])
    groups = fuse(s)
    d_inputs = [i for g in groups if getattr(g.anchor.op, "tag", "") == wg.TAG_D for i in s.inputs_of(g.anchor)]
    assert len(d_inputs) == 2
    epilogues = [i for i in d_inputs if winograd_rows(s, i) is not None]
    assert len(epilogues) == 1 and epilogues[0].attach_type != "inline"
    assert any(g.anchor is epilogues[0] for g in groups)
    s = default_schedule(outs, ZEN3)
    ys = [stage for stage in s.stages if getattr(stage.op, "tag", "") == wg.TAG_Y]
    assert len(ys) == 2 and all(y.attach_type == "at" for y in ys)


class Heads(nn.Module):
    """Winograd results no kernel computes per output tile: one read by a global average
    pool (a reduction), two summed (one stage reading two row passes)."""

    def __init__(self, c: int):
        super().__init__()
        self.a, self.b, self.c = (nn.Conv2d(c, c, 3, padding=1) for _ in range(3))
        self.eval()

    def forward(self, x):
        return torch.relu(self.a(x)).mean((2, 3)), (self.b(x) + self.c(x)).relu().mean((2, 3))


def test_rows_of_their_own_match_eager():
    from schedlang.torch.schedules import default_schedule
    torch.manual_seed(0)
    model, x = Heads(64), torch.randn(1, 64, 10, 11)
    with torch.no_grad():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for target, cm in compile_each(model, (x,), distinct_builds((CHECKED, ZEN3))):
            with torch.no_grad():
                got = cm(x)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    outs = [t for p in cm.program.parts for _, t in p.outputs]
    s = default_schedule(outs, ZEN3)
    ys = [stage for stage in s.stages if getattr(stage.op, "tag", "") == wg.TAG_Y]
    assert len(ys) == 3 and all(y.attach_type == "root" and y.all_iter_vars != y.op.axis for y in ys)


class PreActivation(nn.Module):
    """Pre-activation ResNet blocks (ResNetV2): each block's second Winograd result, through
    the residual add, is read by two kernels (the next block's batch norm and ReLU, and the
    next residual add): no one kernel can compute its row pass per output tile."""

    def __init__(self, c: int, blocks: int = 2):
        super().__init__()
        self.stem = nn.Conv2d(16, c, 1)
        self.blocks = nn.ModuleList(nn.ModuleList([nn.BatchNorm2d(c), nn.Conv2d(c, c, 3, padding=1, bias=False),
                                                   nn.BatchNorm2d(c), nn.Conv2d(c, c, 3, padding=1, bias=False)])
                                    for _ in range(blocks))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, x):
        x = self.stem(x)
        for b1, c1, b2, c2 in self.blocks:
            x = x + c2(torch.relu(b2(c1(torch.relu(b1(x))))))
        return x


def test_rows_read_by_two_kernels_match_eager():
    """A row pass two kernels read is a kernel of its own (it raised ScheduleError in compute_at:
    both readers tried to compute it inside their loops); ResNetV2 compiled again."""
    from schedlang.torch.schedules import default_schedule
    torch.manual_seed(1)
    model, x = PreActivation(64), torch.randn(1, 16, 12, 9)
    with torch.no_grad():
        want = model(x)
    for target, cm in compile_each(model, (x,), distinct_builds((CHECKED, ZEN3))):
        with torch.no_grad():
            got = cm(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    outs = [t for p in cm.program.parts for _, t in p.outputs]
    s = default_schedule(outs, ZEN3)
    ys = [stage for stage in s.stages if getattr(stage.op, "tag", "") == wg.TAG_Y]
    assert len(ys) == 4 and sum(y.attach_type == "root" for y in ys) >= 1
