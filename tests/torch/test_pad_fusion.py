"""A convolution's zero-padded input written by the kernel producing it (schedlang/torch/
pad_fusion.py, fuse.Group.pad, pad_schedules.py): no pad kernel of its own between blocked
convolutions, dense and depthwise readers, stride 1 and 2, a residual add reading the padded
tensor's interior, odd sizes; the register tile and 1x1 reduction chunks of the unpadded
kernels (conv_schedules.nchwc_choice); numerics against
eager torch in bounds-checked AVX2 builds."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch.conv_schedules import nchwc_choice
from schedlang.torch.fuse import fuse
from schedlang.torch.pad_fusion import CONV_PAD_TAG
from schedlang.torch.schedules import default_schedule

from .helpers import compile_each, random_batch_norm

AVX2 = sl.Target.create("llvm -mcpu=haswell")              # blocks of 8 channels
AVX2_CHECKED = AVX2.with_options(bounds_check=True)


class Dense(nn.Module):
    """1x1 conv-bn-relu (its input unpadded), a padded 3x3 of the given stride, a residual block
    whose add reads the padded activation's interior through a strided 1x1 shortcut, and a
    last padded 3x3 with a bias only (its result not a ReLU)."""

    def __init__(self, cin: int, c: int, stride: int):
        super().__init__()
        self.c0, self.b0 = nn.Conv2d(cin, c, 1, bias=False), random_batch_norm(c)
        self.c1, self.b1 = nn.Conv2d(c, c, 3, stride, 1, bias=False), random_batch_norm(c)
        self.c2, self.b2 = nn.Conv2d(c, 2 * c, 3, 2, 1, bias=False), random_batch_norm(2 * c)
        self.down = nn.Conv2d(c, 2 * c, 1, 2, bias=True)
        self.c3 = nn.Conv2d(2 * c, 2 * c, 3, 1, 1, bias=True)
        self.c4 = nn.Conv2d(2 * c, 8, 3, 1, 1, bias=True)
        self.eval()

    def forward(self, x):
        y = F.relu(self.b0(self.c0(x)))
        y = F.relu(self.b1(self.c1(y)))
        z = F.relu(self.b2(self.c2(y)) + self.down(y))
        return self.c4(self.c3(z))


class Inverted(nn.Module):
    """MobileNetV2's inverted residuals: 1x1 expand-bn-relu6, a padded depthwise 3x3 (rows of
    8 or more: it reads a padded plane) of the given stride, 1x1 project, twice, the second
    with the residual add."""

    def __init__(self, c: int, stride: int):
        super().__init__()
        e = 2 * c
        self.e1, self.d1, self.p1 = nn.Conv2d(c, e, 1), nn.Conv2d(e, e, 3, stride, 1, groups=e), nn.Conv2d(e, c, 1)
        self.be, self.bd = random_batch_norm(e), random_batch_norm(e)
        self.e2, self.d2, self.p2 = nn.Conv2d(c, e, 1), nn.Conv2d(e, e, 3, 1, 1, groups=e), nn.Conv2d(e, c, 1)
        self.eval()

    def forward(self, x):
        y = self.p1(F.relu6(self.bd(self.d1(F.relu6(self.be(self.e1(x)))))))
        return y + self.p2(F.relu6(self.d2(F.relu6(self.e2(y)))))


def _compile(model, x, target):
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        warnings.simplefilter("error", UserWarning)      # a schedule falling back to plain loops
        return st.compile(model, (x,), target=target)


def _pad_kernels(cm, target) -> int:
    """Kernels of the compiled model that only make a padded input copy: a fuse.Group of its
    own whose anchor is tagged CONV_PAD_TAG and that the default schedule keeps at the root
    (not computed inside its reader's kernel)."""
    n = 0
    for part in cm.program.parts:
        outs = [t for _, t in part.outputs]
        pads = [g.anchor.op for g in fuse(sl.create_schedule([t.op for t in outs]))
                if getattr(g.anchor.op, "tag", "") == CONV_PAD_TAG]
        s = default_schedule(outs, target)
        n += sum(1 for op in pads if s[op].attach_type == "root")
    return n


def _check(model, x, target=AVX2_CHECKED, tol=1e-4):
    with torch.no_grad():
        want = model(x)
        cm = _compile(model, x, target)
        torch.testing.assert_close(cm(x), want, rtol=tol, atol=tol)
    return cm


# Stride 1 in the default suite (its c2 and shortcut are stride 2 whatever the parameter); 2 with -m slow.
@pytest.mark.parametrize("stride", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_dense_chain_writes_padded_inputs_in_bounds(stride):
    torch.manual_seed(stride)
    cm = _check(Dense(3, 8, stride), torch.randn(1, 3, 11, 9))
    assert _pad_kernels(cm, AVX2_CHECKED) == 0
    merged = [g for p in cm.program.parts for g in fuse(sl.create_schedule([t.op for _, t in p.outputs]))
              if g.pad is not None]
    assert len(merged) == 4          # c0, c1, the residual add and c3 each write the next padded input


# Stride 2 in the default suite (its second depthwise is stride 1 whatever the parameter); 1 with -m slow.
@pytest.mark.parametrize("stride", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_depthwise_reads_a_padded_tensor_its_producer_wrote(stride):
    torch.manual_seed(10 + stride)
    cm = _check(Inverted(8, stride), torch.randn(1, 8, 13, 10))
    assert _pad_kernels(cm, AVX2_CHECKED) == 0


def test_input_padding_stays_a_kernel_of_its_own():
    """A padded program input has no producing kernel: its copy is still a kernel."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1)).eval()
    cm = _check(model, torch.randn(1, 8, 7, 9))
    assert _pad_kernels(cm, AVX2_CHECKED) == 1


def test_an_output_that_is_also_padded_keeps_its_own_buffer():
    """The source of a pad that the program returns stays written as it is; the pad is then
    made from it (the values of both right)."""
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 3, padding=1)
            self.eval()

        def forward(self, x):
            y = F.relu(self.a(x))
            return y, self.b(y)
    torch.manual_seed(4)
    model, x = Two(), torch.randn(1, 8, 9, 9)
    with torch.no_grad():
        want = model(x)
        got = _compile(model, x, AVX2_CHECKED)(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_host_build_matches_eager():
    torch.manual_seed(5)
    _check(Dense(3, 16, 1), torch.randn(1, 3, 14, 14), target=sl.Target.create("llvm"))


class PaddedTiles(nn.Module):
    """A 1x1 of a long reduction (144 channels: 18 blocks, chunks of 9) and a 3x3 each writing the
    next 3x3's padded input, the last 3x3 with a residual add reading the padded interior."""

    def __init__(self, cin: int, wide: int, c: int):
        super().__init__()
        self.c0 = nn.Conv2d(cin, wide, 1)
        self.c1, self.b1 = nn.Conv2d(wide, c, 1, bias=False), random_batch_norm(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, 1, 1, bias=False), random_batch_norm(c)
        self.c3 = nn.Conv2d(c, c, 3, 1, 1)
        self.eval()

    def forward(self, x):
        y = F.relu(self.b1(self.c1(F.relu(self.c0(x)))))
        z = F.relu(self.b2(self.c2(y)))
        return self.c3(z) + z


def _padded_choices(cm, target):
    """nchwc_choice of each kernel of cm that writes a padded result (fuse.Group.pad)."""
    out = []
    for part in cm.program.parts:
        s = sl.create_schedule([t.op for _, t in part.outputs])
        for g in fuse(s):
            if g.pad is not None and g.convs:
                yn, ycb, yh, yw, ylane = s[g.anchor].op.axis
                out.append(nchwc_choice(target, s, g, ycb.dom.extent, yw.dom.extent, [yh.dom.extent],
                                        ylane.dom.extent, row_tiles=False))
    return out


# (5, 9) in the default suite; the square and the narrow plane with -m slow.
@pytest.mark.parametrize("hw", [pytest.param((7, 7), marks=pytest.mark.slow), (5, 9),
                                pytest.param((7, 3), marks=pytest.mark.slow)])
def test_padded_kernels_take_the_unpadded_tiles(hw):
    """One row a tile (a tile of two would straddle the border: guards inside the reduction),
    the 1x1 (one convolution) in one pass over its reduction, no chunks (conv_schedules.
    _pointwise_blocks), the 3x3 a row of tiles at once; odd heights and widths."""
    torch.manual_seed(sum(hw))
    model, x = PaddedTiles(3, 144, 16), torch.randn(1, 3, *hw)
    with torch.no_grad():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        warnings.simplefilter("error", UserWarning)      # (as _compile)
        builds = dict(compile_each(model, (x,), (AVX2_CHECKED, AVX2)))      # one capture for both
    for cm in builds.values():
        with torch.no_grad():
            torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
    choices = _padded_choices(builds[AVX2_CHECKED], AVX2_CHECKED)
    assert len(choices) == 2
    assert all(c.pointwise is None for c in choices)
    # the 3x3's input channel blocks outside a row of tiles (conv_schedules._input_channels_outside;
    # the 1x1's too where its plane is a task: conv_schedules._pointwise_blocked)
    assert any(c.channels_outside for c in choices)


def test_padded_pointwise_in_chunks_computes_the_default():
    """The padded 1x1 kernel with its reduction in chunks (a choice the default now makes only for
    kernels summing two 1x1s; tuning variants may take it), bounds-checked on random inputs:
    equal to the default's kernel (144 channels: 2 chunks of 9 blocks; odd height and width)."""
    import numpy as np
    from schedlang.torch.conv_variants import program_variants, variant_schedule
    from schedlang.torch.tune import extract_tasks
    torch.manual_seed(1)
    model, x = PaddedTiles(3, 144, 16), torch.randn(1, 3, 5, 9)
    program = st.lower_graph(st.capture(model, (x,)), AVX2)
    rng = np.random.default_rng(0)
    chunked = 0
    for kt in extract_tasks(program, AVX2):
        args, outs = kt.task.args, kt.task.outputs
        if kt.kind != "conv" or not any(len(t.shape) == 5 and t.shape[1] == 18 for t in args[:-len(outs)]):
            continue                          # the 1x1 reading the 144 channels (18 blocks) only
        choices = program_variants(outs, AVX2)
        assert choices[0].pointwise is None
        arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in args]
        scheds = [variant_schedule(outs, AVX2, c) for c in (choices[0], choices[0]._replace(pointwise=(1, [9]), channels_outside=False, plane=False))]
        assert scheds[0].to_json() != scheds[1].to_json()
        results = []
        for sched in scheds:
            a = [v.copy() for v in arrays]
            sl.build(sched, args, target=AVX2_CHECKED)(*a)
            results.append(a[-len(outs):])
        for got, want in zip(*results):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        chunked += 1
    assert chunked == 1
