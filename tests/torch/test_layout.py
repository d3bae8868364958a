"""NCHWc activations between dense convolutions (schedlang/torch/layout.py): numerics against
eager torch on odd shapes (channels that are and are not a multiple of the block, odd
spatial sizes, stride 2, padding, dilation, residual adds, pooling), bounds-checked builds,
and where the blocked layout is and is not used."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch import zoo

from ..helpers import CHECKED
from .helpers import compile_each, distinct_builds, random_batch_norm

HOST = sl.Target.create("llvm")
L = HOST.native_lanes(32)
ISAS = {"avx2": sl.Target.create("llvm -mcpu=haswell"), "avx512": sl.Target.create("llvm -mcpu=skylake-avx512")}
AVX2_CHECKED = ISAS["avx2"].with_options(bounds_check=True)   # AVX2 register tiles and blocks of 8


class Chain(nn.Module):
    """conv-bn-relu, a strided dilated conv with a residual through a 1x1/2 shortcut, a max
    pool, another conv, an average pool: every kind of consumer of a blocked activation."""

    def __init__(self, cin: int, c1: int, c2: int):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, c1, 3, 1, 1, bias=False), random_batch_norm(c1)
        self.c2, self.b2 = nn.Conv2d(c1, c2, 3, 2, 2, dilation=2, bias=True), random_batch_norm(c2)
        self.down, self.bd = nn.Conv2d(c1, c2, 1, 2, 0, bias=False), random_batch_norm(c2)
        self.c3 = nn.Conv2d(c2, c2, 3, 1, 1, bias=True)
        self.eval()

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        z = F.relu(self.b2(self.c2(y)) + self.bd(self.down(y)))
        z = F.max_pool2d(z, 3, 2, 1, ceil_mode=True)
        return F.adaptive_avg_pool2d(F.relu(self.c3(z)), 1) + z.mean((2, 3), keepdim=True)


def _compile(model, x, target):
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        warnings.simplefilter("error", UserWarning)      # a schedule falling back to plain loops
        return st.compile(model, (x,), target=target)


def _compile_each(model, x, targets):
    """(target, compiled) for each target, model captured once (helpers.compile_each), with
    the warnings _compile makes errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        warnings.simplefilter("error", UserWarning)
        yield from compile_each(model, (x,), targets)

def _checked_builds(model, x):
    """(target, compiled) of the distinct builds for the bounds-checked host, bounds-checked
    AVX2 and plain host targets, each checked against eager first (a tensor or a tuple)."""
    with torch.no_grad():
        want = model(x)
    for target, cm in _compile_each(model, x, distinct_builds((CHECKED, AVX2_CHECKED, HOST))):
        with torch.no_grad():
            got = cm(x)
        for g, w in zip(*((v,) if isinstance(v, torch.Tensor) else v for v in (got, want))):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        yield target, cm



def _blocked(cm):
    """Names of the 5-d (blocked) stages of the compiled program."""
    from schedlang.tensor.graph import post_order
    ops = post_order([t.op for p in cm.program.parts for _, t in p.outputs])
    return [op.name for op in ops if len(getattr(op, "shape", ())) == 5 and not op.name.endswith("_packed")
            and "weight" not in op.name]


def _matches_eager_in_both_builds(model, x):
    """Compiled whole (one part, no fallback) for the bounds-checked and the host target (and
    bounds-checked AVX2 code: its register tiles and blocks of 8; on an AVX2 host the first
    build is that code, helpers.distinct_builds), all agree with eager; returns the host build."""
    with torch.no_grad():
        want = model(x)
    for _, cm in _compile_each(model, x, distinct_builds((CHECKED, AVX2_CHECKED, HOST))):
        assert cm.fallback_ops() == {} and len(cm.program.parts) == 1
        with torch.no_grad():
            torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
    return cm


# The NCHW case (12 channels) in the default suite with test_resnet_blocks_match_eager_in_bounds_checked_builds
# (blocked all the way); the blocked-only and odd-block chains with -m slow.
@pytest.mark.parametrize("cin,c1,c2,hw", [
    pytest.param(3, 2 * L, 2 * L, (13, 11), marks=pytest.mark.slow),     # blocked all the way
    pytest.param(5, L, 3 * L, (9, 16), marks=pytest.mark.slow),          # an odd number of channel blocks
    (4, 12, 2 * L, (10, 7)),         # 12 channels: not a multiple of L, stays NCHW
])
def test_chain_matches_eager(cin, c1, c2, hw):
    torch.manual_seed(0)
    model = Chain(cin, c1, c2)
    x = torch.randn(1, cin, *hw)
    cm = _matches_eager_in_both_builds(model, x)
    blocked = _blocked(cm)
    assert bool(blocked) == (c1 % L == 0 or c2 % L == 0)


def test_blocked_only_between_convolutions():
    """A conv whose result is the program's output keeps NCHW; the activation a second conv
    reads is blocked, and so is the first conv's sum it is computed from."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, L, 3, padding=1), nn.ReLU(), nn.Conv2d(L, L, 3, padding=1)).eval()
    x = torch.randn(1, 3, 6, 5)
    cm = _compile(model, x, HOST)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)
    part = cm.program.parts[0]
    (out,) = [t for _, t in part.outputs]
    assert len(out.shape) == 4
    assert len(_blocked(cm)) >= 2
    alone = _compile(nn.Conv2d(3, L, 3, padding=1).eval(), x, HOST)
    assert _blocked(alone) == []


def test_resnet_blocks_match_eager_in_bounds_checked_builds():
    torch.manual_seed(0)
    model = zoo.resnet18(width=L, layers=(1, 1, 1, 1), num_classes=10).eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(1, 3, 37, 29)
    cm = _matches_eager_in_both_builds(model, x)
    assert _blocked(cm)


def test_a_narrow_convolution_reads_a_blocked_activation():
    """y is blocked for the conv of L output channels; the conv of 12 (its weight packed 12
    wide, its result NCHW) reads the same y by blocks of input channels."""
    torch.manual_seed(0)

    class Branches(nn.Module):
        def __init__(self):
            super().__init__()
            self.c0, self.a, self.b = nn.Conv2d(3, L, 3, padding=1), nn.Conv2d(L, L, 3, padding=1), \
                nn.Conv2d(L, 12, 3, stride=2, padding=1)

        def forward(self, x):
            y = F.relu(self.c0(x))
            return F.relu(self.a(y)).sum((2, 3)), self.b(y)

    model = Branches().eval()
    x = torch.randn(1, 3, 11, 6)
    with torch.no_grad():
        want = model(x)
    for _, cm in _compile_each(model, x, (CHECKED, HOST)):
        with torch.no_grad():
            torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
    assert _blocked(cm)


class WideExpand(nn.Module):
    """ResNet-50's last stage in small: 1x1 expansions to 2048 channels on rows of 7 (256
    blocks of 8 with AVX2, where the register tile's unroll once exceeded MAX_UNROLL and the
    kernel fell back to plain loops, 30x slower), summed with a shortcut, then a 3x3 conv."""

    def __init__(self):
        super().__init__()
        self.stem, self.expand, self.bn = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 2048, 1, bias=False), random_batch_norm(2048)
        self.short, self.head = nn.Conv2d(32, 2048, 1), nn.Conv2d(2048, 8, 3, padding=1)
        self.eval()

    def forward(self, x):
        y = F.relu(self.stem(x))
        return self.head(F.relu(self.bn(self.expand(y)) + self.short(y)))


@pytest.mark.parametrize("isa", list(ISAS))
def test_wide_convolutions_keep_their_register_tiles(isa):
    if isa == "avx512" and HOST.native_lanes(32) < 16:
        pytest.skip("AVX-512 code needs an AVX-512 host")
    torch.manual_seed(0)
    model, x = WideExpand(), torch.randn(1, 3, 5, 7)
    with torch.no_grad():
        want = model(x)
    for _, cm in _compile_each(model, x, (ISAS[isa].with_options(bounds_check=True), ISAS[isa])):
        with torch.no_grad():             # (a plain-loop fallback warns: an error here)
            torch.testing.assert_close(cm(x), want, rtol=1e-4, atol=1e-4)
    assert _blocked(cm)


class Concat(nn.Module):
    """Inception's and DenseNet's pattern: branch convolutions and their input concatenated
    along channels (parts of 32, 16, 32 and 16 channels: whole blocks of 16 or 8; odd: the
    last of 4, and the concatenation not of whole blocks), a channel slice of the result,
    the whole read by a 1x1."""

    def __init__(self, odd: bool):
        super().__init__()
        self.stem = nn.Conv2d(5, 32, 3, padding=1)
        self.b1, self.b2 = nn.Conv2d(32, 32, 1), nn.Conv2d(32, 16, 3, padding=1)
        self.b3 = nn.Conv2d(32, 4 if odd else 16, 1)
        self.out = nn.Conv2d(80 + (4 if odd else 16), 16, 1)
        self.side = nn.Conv2d(16, 16, 3, padding=1)
        self.eval()

    def forward(self, x):
        y = F.relu(self.stem(x))
        c = torch.cat([F.relu(self.b1(y)), F.relu(self.b2(y)), y, F.relu(self.b3(y))], 1)
        return self.out(c), self.side(c[:, 32:48])


@pytest.mark.parametrize("odd", [False, True])
def test_concatenated_convolutions_stay_blocked(odd):
    """Each part of a blocked concatenation at an offset of whole blocks is blocked, read by
    the concatenation as its blocks shifted by whole blocks (layout._channel_shift; a slice
    of channels too); a concatenation not of whole blocks stays NCHW with its parts.
    Bounds-checked, AVX2's blocks of 8 too."""
    torch.manual_seed(0)
    _, cm = list(_checked_builds(Concat(odd), torch.randn(1, 5, 9, 7)))[-1]    # the host build's program
    from schedlang.tensor.graph import post_order
    ops = post_order([t.op for p in cm.program.parts for _, t in p.outputs])
    convs = {op.name: len(op.shape) for op in ops if getattr(op, "tag", "") == "conv"}
    blocked = [n for n, rank in convs.items() if rank == 5]
    assert len(blocked) == (1 if odd else 4), convs       # stem (b1, b2, b3); out and side: outputs
    cat = [op for op in ops if op.name.startswith("cat")]
    assert len(cat) == 1 and len(cat[0].shape) == (4 if odd else 5)


class SplitConcat(nn.Module):
    """MixNet's grouped 1x1 (a MixedConv2d): the input split in two, a convolution of each
    half, concatenated (parts of 48 channels: whole blocks), then a batch norm and a ReLU
    read by two convolutions (materialized: the concatenation's kernel writes it)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(5, 32, 3, padding=1)
        self.a, self.b = nn.Conv2d(16, 48, 1, bias=False), nn.Conv2d(16, 48, 1, bias=False)
        self.bn = random_batch_norm(96)
        self.out, self.side = nn.Conv2d(96, 16, 1), nn.Conv2d(96, 16, 3, padding=1)
        self.eval()

    def forward(self, x):
        y0, y1 = F.relu(self.stem(x)).split(16, 1)
        z = F.relu(self.bn(torch.cat([self.a(y0), self.b(y1)], 1)))
        return self.out(z), self.side(z)


def test_a_concatenations_parts_are_convolution_kernels():
    """Each convolution of a materialized concatenation is a convolution kernel of its own (a
    group's convs), never computed element by element inside the concatenation's kernel: the
    first part, read at the concatenation's own coordinates, was (MixNet-S ran 2.6x slower
    so). Bounds-checked, AVX2's blocks of 8 too."""
    from schedlang.schedule import create_schedule
    from schedlang.torch.fuse import fuse, is_conv
    torch.manual_seed(0)
    for target, cm in _checked_builds(SplitConcat(), torch.randn(1, 5, 9, 7)):
        kernels, attached = [], []
        for part in cm.program.parts:
            for g in fuse(create_schedule([t.op for _, t in part.outputs])):
                kernels += [c.op.name for c in g.convs]
                attached += [a.op.name for a in g.attached if is_conv(a)]
        assert len(kernels) == 5 and set(attached) <= set(kernels), (target, kernels, attached)


class Separable(nn.Module):
    """Xception's separable convolution: BN + ReLU, a depthwise 3x3 read directly by a 1x1
    (no epilogue between them), over rows of `cols` columns."""

    def __init__(self, c: int):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.bn = random_batch_norm(c)
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.pw = nn.Conv2d(c, c, 1, bias=False)
        self.eval()

    def forward(self, x):
        y = F.relu(self.stem(x))
        return self.pw(self.dw(F.relu(self.bn(y)))) + y


# 150 columns (the case that once unrolled too far) by default; 9 with -m slow
@pytest.mark.parametrize("cols", [pytest.param(9, marks=pytest.mark.slow), 150])
def test_a_depthwise_convolution_read_by_a_1x1_is_blocked(cols):
    """The depthwise result is the 1x1's blocked input (a seed of its own: no injective stage
    between them), and its kernel is scheduled for any row: 150 columns unrolled whole
    counted 9 x 150 copies against MAX_UNROLL, which left plain loops (a warning: an error
    here). Bounds-checked, AVX2's blocks of 8 too."""
    torch.manual_seed(0)
    for target, cm in _checked_builds(Separable(16), torch.randn(1, 3, 2, cols)):
        from schedlang.tensor.graph import post_order
        ops = post_order([t.op for p in cm.program.parts for _, t in p.outputs])
        convs = [op for op in ops if getattr(op, "tag", "") == "conv"]
        assert len(convs) == 3 and all(len(op.shape) == 5 for op in convs[:2]), (target, convs)



class PoolShortcut(nn.Module):
    """Legacy Xception's block end: a max pool of the main branch plus the strided 1x1
    shortcut with its batch norm (a convolution and another reduction under one add), the sum
    read by a 1x1 (so blocked)."""

    def __init__(self, c: int):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.main = nn.Conv2d(c, 2 * c, 1)
        self.skip, self.bn = nn.Conv2d(c, 2 * c, 1, 2, bias=False), random_batch_norm(2 * c)
        self.out = nn.Conv2d(2 * c, c, 1)
        self.eval()

    def forward(self, x):
        y = F.relu(self.stem(x))
        return self.out(F.max_pool2d(self.main(y), 3, 2, 1) + self.bn(self.skip(y)))


def test_a_pool_beside_a_convolution_is_a_kernel_of_its_own():
    """The add's kernel computes the shortcut convolution as a convolution kernel (its
    epilogue reads the pool), the max pool a kernel of its own: computed together they made a
    kernel of rows with the convolution element by element (legacy Xception 2.3x slower)."""
    from schedlang.schedule import create_schedule
    from schedlang.torch.fuse import fuse
    torch.manual_seed(0)
    for target, cm in _checked_builds(PoolShortcut(16), torch.randn(1, 3, 9, 11)):
        groups = [g for p in cm.program.parts for g in fuse(create_schedule([t.op for _, t in p.outputs]))]
        convs = sum(len(g.convs) for g in groups)
        assert convs == 4 and all(not g.attached or g.convs for g in groups), (target, groups)
