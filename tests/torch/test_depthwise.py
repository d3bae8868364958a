"""Depthwise and grouped convolutions (torch/depthwise_schedules.py) against eager torch:
channels not a multiple of the vector width, odd spatial sizes, stride 2, padding 1 and 2,
dilation 2, channel multiplier > 1, groups of several channels, 1-d, batch 2, planes fewer
than the tasks the threads want (row tasks) and more (plane tasks), other dtypes; built
bounds-checked and for the host; the padded input plane made inside the conv's kernel
(no guarded read left in the convolution); CUDA's default schedules in emulation."""
import re
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.expr.functor import uses_var, walk
from schedlang.tensor.graph import post_order
from schedlang.tensor.op import TensorRead
from schedlang.torch.fuse import CONV_PAD_TAG, fuse
from schedlang.torch.schedules import default_schedule

from ..helpers import CHECKED
from ..cpu_targets import runs_here
from .test_conv import ConvBN, compile_cases_checked, compile_checked

TWO_THREADS = sl.Target.create("llvm -num-cores=2")

CASES = {   # (in, out, kernel, stride, padding, dilation, groups), input shape
    "dw_odd_channels": ((13, 13, 3, 1, 1, 1, 13), (1, 13, 9, 11)),
    "dw_stride2_odd": ((21, 21, 3, 2, 1, 1, 21), (2, 21, 15, 13)),
    "dw_dilation2": ((10, 10, 3, 1, 2, 2, 10), (1, 10, 11, 12)),
    "dw_multiplier2": ((5, 10, 3, 1, 1, 1, 5), (1, 5, 8, 7)),
    "dw_5x5_pad2_stride2": ((9, 9, 5, 2, 2, 1, 9), (1, 9, 13, 17)),
    "dw_no_padding": ((6, 6, 3, 1, 0, 1, 6), (1, 6, 7, 9)),
    "dw_few_planes_rows": ((3, 3, 3, 1, 1, 1, 3), (1, 3, 10, 19)),
    "dw_wide_row": ((4, 4, 3, 2, 1, 1, 4), (1, 4, 5, 150)),
    "grouped_4_per_group": ((8, 12, 3, 1, 1, 1, 2), (1, 8, 9, 10)),
    "dw_one_column": ((8, 8, 3, 1, 1, 1, 8), (1, 8, 6, 1)),          # short rows: guarded reads, no plane
    "dw_7x7_rows": ((40, 40, 3, 1, 1, 1, 40), (1, 40, 7, 7)),
}


_EACH_CASE: list = []


def _each_case():
    """test_conv.compile_cases_checked of every case's conv + bn + relu6 (sorted by name),
    bounds-checked, for the host and for two threads: made once for the tests of each case."""
    if not _EACH_CASE:
        torch.manual_seed(0)
        models = [ConvBN(nn.Conv2d(*CASES[name][0], bias=True), act=F.relu6) for name in sorted(CASES)]
        _EACH_CASE.append(compile_cases_checked(models, [torch.randn(*CASES[name][1]) for name in sorted(CASES)],
                                                targets=(CHECKED, sl.Target.create("llvm"), TWO_THREADS)))
    return _EACH_CASE[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_convs_with_bn_relu6_match_eager(name):
    """Each case's conv in the module of all the cases (_each_case)."""
    i = sorted(CASES).index(name)
    want, *builds = _each_case()
    for got in builds:
        torch.testing.assert_close(got[i], want[i], rtol=1e-4, atol=1e-4)


def test_a_depthwise_residual_block_and_a_1d_depthwise_conv_match_eager():
    torch.manual_seed(0)
    compile_checked(ConvBN(nn.Conv2d(16, 16, 3, 1, 1, groups=16), residual=True), torch.randn(1, 16, 7, 7))
    compile_checked(ConvBN(nn.Conv1d(6, 6, 3, 2, 1, groups=6), act=F.relu6), torch.randn(2, 6, 19))


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-9), (torch.float16, 1e-2), (torch.bfloat16, 5e-2)])
def test_depthwise_in_other_dtypes_matches_eager(dtype, tol):
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(7, 7, 3, 2, 1, groups=7), bn=False, act=F.relu6).to(dtype)
    compile_checked(model, torch.randn(1, 7, 9, 10, dtype=dtype), tol=tol)


def test_the_padded_plane_is_made_inside_the_kernel_and_the_conv_reads_it_unguarded():
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(32, 32, 3, 2, 1, groups=32, bias=False), act=F.relu6)
    cm = compile_checked(model, torch.randn(1, 32, 20, 20), targets=(TWO_THREADS,))
    (part,) = cm.program.parts
    outs = [t for _, t in part.outputs]
    s = default_schedule(outs, TWO_THREADS)
    pad = next(st_ for st_ in s.stages if getattr(st_.op, "tag", "") == CONV_PAD_TAG)
    assert pad.attach_type == "at"
    conv = next(g.convs[0] for g in fuse(sl.create_schedule([t.op for t in outs])) if g.convs)
    assert "if_then_else" not in str(conv.op.body)
    tile = cm.ir("tile")
    assert re.search(r"alloc \w+_pad: f32\[1, 1, 21, 21\] local", tile), tile       # one padded plane per task
    assert tile.count("parallel") == 1 and "masked.gather" not in cm.ir("target")


def test_cuda_default_schedules_run_depthwise_convs_in_emulation():
    """The padded input is a kernel of its own on CUDA, the convolution one output per thread."""
    pytest.importorskip("cuda.bindings")
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(6, 12, 3, 2, 1, groups=6), act=F.relu6)
    x = torch.randn(1, 6, 9, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        warnings.simplefilter("error", UserWarning)
        cm = st.compile(model, (x,), target="cuda")
    with torch.no_grad():
        want = model(x)
        for engine in ("shim", "simt"):
            torch.testing.assert_close(cm.emulate(x, engine=engine), want, rtol=1e-5, atol=1e-5)


def test_a_1x1_conv_with_24_channels_packs_blocks_dividing_them():
    """MobileNetV2's 24-channel projections: blocks of 8 (a half vector on AVX-512), so the
    sum has no guarded channel tail (a masked multiply-add per step: 6x slower)."""
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(40, 24, 1, bias=False), act=None)
    cm = compile_checked(model, torch.randn(1, 40, 5, 11))
    (width,) = [spec.width for spec in cm.program.packs.values() if spec.kind == "conv"]
    assert 24 % width == 0 and width == min(8, sl.Target.create("llvm").native_lanes(32))
    assert "< 24" not in cm.ir("tile")


def test_a_depthwise_conv_with_a_dynamic_batch_runs_row_tasks():
    """Planes unknown at compile time: one task per output row, its padded rows made in it."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 8, 3, 2, 1, groups=8), nn.ReLU6()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        cm = st.compile(model, (torch.randn(2, 8, 9, 7),),
                        dynamic_shapes={"input": {0: torch.export.Dim("batch", max=64)}})
    with torch.no_grad():
        for batch in (1, 3):
            x = torch.randn(batch, 8, 9, 7)
            torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)


def test_a_depthwise_conv_alone_also_makes_its_padded_plane_in_the_kernel():
    """No epilogue: the sum runs in a cache of the result, and it is the cache that reads the
    padded input (one kernel, one parallel loop, the plane local)."""
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), bn=False, act=None)
    cm = compile_checked(model, torch.randn(1, 16, 9, 10), targets=(TWO_THREADS,))
    tile = cm.ir("tile")
    assert re.search(r"alloc \w+_pad: f32\[1, 1, 11, 12\] local", tile) and tile.count("parallel") == 1, tile


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion, depthwise 3x3, 1x1 projection, each with batch norm
    (ReLU6 after the first two), the input added when the shapes allow."""

    def __init__(self, cin, hidden, cout, stride, k=3):
        super().__init__()
        self.expand = ConvBN(nn.Conv2d(cin, hidden, 1, bias=False), act=F.relu6)
        self.dw = ConvBN(nn.Conv2d(hidden, hidden, k, stride, k // 2, groups=hidden, bias=False), act=F.relu6)
        self.project = ConvBN(nn.Conv2d(hidden, cout, 1, bias=False), act=None)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.dw(self.expand(x)))
        return x + y if self.residual else y


BLOCKS = {   # (in, hidden, out, stride), input shape: hidden a multiple of 16 (AVX-512's vector)
    "stride1_residual_odd": ((16, 48, 16, 1), (1, 16, 9, 11)),
    "stride2_odd": ((16, 96, 24, 2), (1, 16, 13, 11)),     # (24 out: blocks of 8 on AVX-512, conv_lanes.py)
    "stride2_even_one_column_tail": ((32, 64, 32, 2), (2, 32, 10, 17)),
    "stride1_7x7_guarded": ((32, 64, 32, 1), (1, 32, 7, 7)),
}


def _compiled_for(cpu: str, model, x):
    """(model compiled for cpu bounds-checked, with two threads and plain, each matching
    eager: the last build; its channel block: the vector lanes of float32 there, or half of
    them where conv_lanes.py takes that), skipped where cpu cannot run."""
    from schedlang.torch.conv_lanes import conv_lanes
    target = sl.Target.create(f"llvm -mcpu={cpu}")
    if not runs_here(target):
        pytest.skip(f"this CPU cannot run {cpu}'s instructions")
    cm = compile_checked(model, x, targets=(target.with_options(bounds_check=True),
                                            sl.Target.create(f"llvm -mcpu={cpu} -num-cores=2"), target))
    return cm, conv_lanes(cm.graph, target) or min(target.native_lanes(32), 16)


def _convs_of_kernel(cm, kernel: tuple):
    """The convolutions of the compiled program whose weight is [.., ICg, KH, KW, ..] = kernel."""
    return [op for p in cm.program.parts for op in post_order([t.op for _, t in p.outputs])
            if getattr(op, "tag", "") == "conv" and any(tuple(t.shape[1:4]) == kernel for t in op.input_tensors)]


# stride2_even_one_column_tail (stride 2, batch 2, a column tail) in the default suite; the other
# blocks (a residual: test_a_depthwise_residual_block_and_a_1d_depthwise_conv_match_eager) are slow.
@pytest.mark.parametrize("name", [n if n == "stride2_even_one_column_tail" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(BLOCKS)])
@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_depthwise_between_1x1_convs_runs_on_blocked_activations(name, cpu):
    (cin, hidden, cout, stride), shape = BLOCKS[name]
    torch.manual_seed(0)
    model = InvertedResidual(cin, hidden, cout, stride).eval()
    x = torch.randn(*shape)
    cm, lanes = _compiled_for(cpu, model, x)
    dw = _convs_of_kernel(cm, (1, 3, 3))
    assert len(dw) == 1 and dw[0].shape == (shape[0], hidden // lanes, *dw[0].shape[2:4], lanes)  # NCHWc


@pytest.mark.parametrize("k, stride, shape", [(7, 1, (1, 16, 9, 13)), (5, 2, (1, 16, 11, 10))])
def test_large_depthwise_kernels_on_blocked_activations(k, stride, shape):
    """A 5 x 5 and a 7 x 7 (FastViT's) depthwise convolution between 1x1 ones: their register
    tile unrolls one row of taps at a time (depthwise_schedules.MAX_TILE_TAPS), bounds-checked,
    odd rows and a column tail."""
    torch.manual_seed(0)
    compile_checked(InvertedResidual(16, 48, 16, stride, k=k).eval(), torch.randn(*shape))


class GroupedBlock(nn.Module):
    """RegNetY's block: 1x1, a grouped 3x3 of `width` channels a group, squeeze-excitation,
    1x1, each with batch norm, the input (or a strided 1x1 of it) added."""

    def __init__(self, cin, hidden, cout, stride, width):
        super().__init__()
        self.expand = ConvBN(nn.Conv2d(cin, hidden, 1, bias=False))
        self.grouped = ConvBN(nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden // width, bias=False))
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(hidden, 8, 1), nn.ReLU(), nn.Conv2d(8, hidden, 1),
                                nn.Sigmoid())
        self.project = ConvBN(nn.Conv2d(hidden, cout, 1, bias=False), act=None)
        self.down = ConvBN(nn.Conv2d(cin, cout, 1, stride, bias=False), act=None) if stride > 1 else None

    def forward(self, x):
        y = self.grouped(self.expand(x))
        y = self.project(y * self.se(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


GROUPED_BLOCKS = {   # (in, hidden, out, stride, channels a group), input shape
    "groups_of_16_stride2_odd": ((16, 64, 32, 2, 16), (1, 16, 13, 11)),
    "groups_of_48_stride1_batch2": ((16, 96, 16, 1, 48), (2, 16, 9, 10)),
}


# each case on one ISA by default (groups of 16 on AVX2's blocks of 8, of 48 on AVX-512's 16); the
# crossed pairs with -m slow
@pytest.mark.parametrize("name, cpu", [
    pytest.param(name, cpu, id=f"{cpu}-{name}",
                 marks=[] if (cpu == "haswell") == (name == "groups_of_16_stride2_odd") else [pytest.mark.slow])
    for cpu in ("haswell", "skylake-avx512") for name in sorted(GROUPED_BLOCKS)])
def test_grouped_convs_of_whole_blocks_run_on_blocked_activations(name, cpu):
    """A grouped convolution whose channels per group are whole vectors is computed by the
    NCHWc kernel over blocked activations (layout.py), bounds-checked: each output block reads
    its group's input blocks as broadcasts (a group of 48 is 3 blocks of 16 or 6 of 8: the
    block index cb // 3 is the same for every lane), and the register tile stays within a group."""
    (cin, hidden, cout, stride, width), shape = GROUPED_BLOCKS[name]
    torch.manual_seed(0)
    model = GroupedBlock(cin, hidden, cout, stride, width).eval()
    x = torch.randn(*shape)
    cm, lanes = _compiled_for(cpu, model, x)
    grouped = _convs_of_kernel(cm, (width, 3, 3))
    assert len(grouped) == 1 and grouped[0].shape == (shape[0], hidden // lanes, *grouped[0].shape[2:4], lanes)
    lane = grouped[0].axis[4].var
    reads = [r for r in walk(grouped[0].body.source[0]) if isinstance(r, TensorRead) and len(r.indices) == 5
             and getattr(r.tensor.op, "tag", "") == CONV_PAD_TAG]
    assert reads and not any(uses_var(i, lane) for r in reads for i in r.indices), reads   # broadcasts


class SplitAttention(nn.Module):
    """ResNeSt's split attention (radix 2): a grouped 3x3 of 2 groups whose output is viewed
    [N, radix, C, H, W] and summed over the radix, weighted by a softmax over it."""

    def __init__(self, cin, c):
        super().__init__()
        self.c = c
        self.expand = ConvBN(nn.Conv2d(cin, c, 1, bias=False))
        self.radix = ConvBN(nn.Conv2d(c, 2 * c, 3, 1, 1, groups=2, bias=False))
        self.fc1, self.fc2 = nn.Conv2d(c, 16, 1), nn.Conv2d(16, 2 * c, 1)

    def forward(self, x):
        y = self.radix(self.expand(x))
        n, _, h, w = y.shape
        y = y.view(n, 2, self.c, h, w)
        gap = F.relu(self.fc1(y.sum(1).mean((2, 3), keepdim=True)))
        attn = self.fc2(gap).view(n, 2, self.c).softmax(1).view(n, 2, self.c, 1, 1)
        return (y * attn).sum(1)


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_a_grouped_conv_of_whole_blocks_with_nchw_output(cpu):
    """A grouped convolution of packed blocks whose output stays NCHW (viewed 5-d) keeps an
    NCHW input and runs the blocked NCHW kernel of dense ones (conv_schedules._packed_grouped):
    with a blocked input and NCHW rows it read its input through gathers (ResNeSt-14 ran 14x
    Inductor's time), on NCHW rows without packed weights 4x."""
    torch.manual_seed(0)
    model = SplitAttention(16, 32).eval()
    x = torch.randn(1, 16, 9, 10)
    cm, lanes = _compiled_for(cpu, model, x)
    grouped = _convs_of_kernel(cm, (16, 3, 3))
    assert len(grouped) == 1 and len(grouped[0].shape) == 4
    assert all(len(t.shape) == 4 for t in grouped[0].input_tensors if t.shape[0] == 1)      # its input NCHW
    name = grouped[0].name
    assert re.search(rf"alloc {name}.local: f32\[1, \d+, 1, \d+, {lanes}\] local", cm.ir("tile"))   # [.., wt, L] tiles


class PositionalConv(nn.Module):
    """wav2vec2's positional convolution: a grouped 1-d convolution of a long kernel (groups of
    whole vectors), its last position dropped, GELU, added to its input."""

    def __init__(self, c, kernel, groups):
        super().__init__()
        self.conv = nn.Conv1d(c, c, kernel, padding=kernel // 2, groups=groups)

    def forward(self, x):
        return x + F.gelu(self.conv(x)[..., :x.shape[-1]])


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_a_grouped_1d_conv_of_whole_blocks_runs_the_blocked_kernel(cpu):
    """A grouped conv1d whose groups are whole channel blocks runs the blocked kernel of dense
    ones (conv_schedules._packed_grouped), vectors of output channels over a tile of columns:
    it took the rows path, one output channel a task, copying its group's padded input for each
    (wav2vec2-base's 768 channels, 16 groups, 128 taps, 49 frames: 76 ms against torch's 5-7;
    2.8 ms after). Odd lengths, bounds-checked, against eager."""
    torch.manual_seed(0)
    for length in (9, 23):
        model = PositionalConv(64, 12, 2).eval()
        cm, lanes = _compiled_for(cpu, model, torch.randn(1, 64, length))
        (conv,) = [op for p in cm.program.parts for op in post_order([t.op for _, t in p.outputs])
                   if getattr(op, "tag", "") == "conv"]
        assert re.search(rf"alloc {conv.name}.local: f32\[1, \d+, \d+, {lanes}\] local", cm.ir("tile")), \
            "a register tile of columns by a vector of output channels"
