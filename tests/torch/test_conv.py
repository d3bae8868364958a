"""Convolutions (torch/ops/conv.py) and eval-mode batch norm (ops/norm.py) against eager torch:
odd shapes (tails of the register tile in width and channels, stride, dilation, groups,
depthwise, 1x1, ResNet's 7x7/2 stem), their default schedules (conv_schedules.py) built
bounds-checked, the batch norm folded into a constant convolution's packed weights
(prepack.py) with conv + bias + batch norm + ReLU + residual add in one kernel, and the
CUDA schedule in emulation."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang as sl
import schedlang.torch as st
from schedlang.torch import zoo
from schedlang.torch.fuse import fuse
from schedlang.torch.prepack import pack_conv

from ..helpers import CHECKED
from .helpers import check_lowering, compile_cases, compile_each, distinct_builds, requires_bfloat16

HOST = sl.Target.create("llvm")
aten = torch.ops.aten


class ConvBN(nn.Module):
    """conv (+ batch norm with random statistics) + an activation (+ the input: a residual)."""

    def __init__(self, conv, bn=True, act=F.relu, residual=False):
        super().__init__()
        self.conv, self.act, self.residual = conv, act, residual
        self.bn = (nn.BatchNorm1d if isinstance(conv, nn.Conv1d) else nn.BatchNorm2d)(conv.out_channels) if bn else None
        if bn:
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(self.bn.weight, 0.5, 1.5)
            nn.init.uniform_(self.bn.bias, -0.5, 0.5)
        self.eval()

    def forward(self, x):
        y = self.conv(x)
        y = self.bn(y) if self.bn is not None else y
        y = y + x if self.residual else y
        return self.act(y) if self.act is not None else y


def compile_checked(model, x, tol=1e-4, targets=(CHECKED, HOST)):
    """Compiled bounds-checked and for the host, with no op in torch: eager's result. A target
    that builds on this host what an earlier one builds is left out, and the model is captured
    once (helpers.distinct_builds, compile_each)."""
    with torch.no_grad():
        want = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        warnings.simplefilter("error", UserWarning)       # a schedule falling back to plain loops
        for _, cm in compile_each(model, (x,), distinct_builds(targets)):
            with torch.no_grad():
                got = cm(x)
            torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    return cm


def kernels(cm):
    """The fuse.Groups (kernels) of each compiled part."""
    return [fuse(sl.create_schedule([t.op for _, t in p.outputs])) for p in cm.program.parts]


CONV2D = {   # (in, out, kernel, stride, padding, dilation, groups, bias), input shape
    "tails": ((3, 20, 3, 1, 1, 1, 1, True), (2, 3, 9, 11)),
    "stride2_groups2": ((4, 6, 3, 2, 1, 1, 2, True), (1, 4, 10, 7)),
    "dilation2": ((5, 8, 3, 1, 2, 2, 1, False), (1, 5, 9, 13)),
    "depthwise_stride2": ((6, 6, 3, 2, 1, 1, 6, False), (2, 6, 10, 7)),
    "depthwise_multiplier": ((4, 8, 3, 1, 1, 1, 4, True), (1, 4, 6, 9)),
    "pointwise": ((8, 40, 1, 1, 0, 1, 1, False), (1, 8, 5, 6)),
    "stem_7x7_stride2": ((3, 8, 7, 2, 3, 1, 1, False), (1, 3, 19, 16)),
    "rect_kernel_no_pad": ((4, 12, (1, 3), (2, 1), 0, 1, 1, True), (1, 4, 7, 9)),
}


def compile_cases_checked(models, inputs, targets=(CHECKED, HOST)):
    """[eager's result, then each distinct build's results] of the models compiled as one
    module (helpers.compile_cases) with compile_checked's targets and warnings: the cases of
    a test built once, each case's result i checked by its own test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        warnings.simplefilter("error", UserWarning)       # a schedule falling back to plain loops
        want, builds = compile_cases(models, inputs, distinct_builds(targets))
    return [want] + [got for _, _, got in builds]


_CONV2D_BUILT: list = []


def _conv2d_cases():
    """compile_cases_checked of every CONV2D case's conv (sorted by name), made once."""
    if not _CONV2D_BUILT:
        torch.manual_seed(0)
        models = [ConvBN(nn.Conv2d(*CONV2D[name][0]), bn=False, act=None) for name in sorted(CONV2D)]
        _CONV2D_BUILT.append(compile_cases_checked(models, [torch.randn(*CONV2D[name][1]) for name in sorted(CONV2D)]))
    return _CONV2D_BUILT[0]


@pytest.mark.parametrize("name", sorted(CONV2D))
def test_conv2d_modules_match_eager(name):
    """Each case's conv in the module of all the cases (_conv2d_cases)."""
    i = sorted(CONV2D).index(name)
    want, *builds = _conv2d_cases()
    for got in builds:
        torch.testing.assert_close(got[i], want[i], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("args, shape", [
    ((3, 10, 3, 1, 1, 1, 1, True), (2, 3, 17)),
    ((4, 4, 5, 2, 2, 2, 4, False), (1, 4, 23)),          # depthwise, stride and dilation 2
])
def test_conv1d_with_batch_norm_matches_eager(args, shape):
    torch.manual_seed(0)
    compile_checked(ConvBN(nn.Conv1d(*args)), torch.randn(*shape))


def test_conv_with_an_input_weight_and_other_dtypes_match_torch():
    """The lowering alone (weight a placeholder, not packed; the unscheduled loops), in float64
    and float16 (accumulated in float32) as well."""
    x, w, b = torch.randn(2, 4, 9, 7), torch.randn(6, 2, 3, 3), torch.randn(6)
    check_lowering(aten.convolution.default, (x, w, b, [2, 1], [1, 2], [1, 2], False, [0, 0], 2), tol=(1e-4, 1e-4))
    w1 = torch.randn(6, 4, 3, 3, dtype=torch.float64)
    check_lowering(aten.convolution.default, (x.double(), w1, b.double(), [1, 1], [1, 1], [1, 1], False, [0, 0], 1))
    check_lowering(aten.convolution.default, (x.half(), w.half(), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 2),
                   tol=(2e-3, 2e-3))
    with pytest.raises(ValueError, match="groups"):
        check_lowering(aten.convolution.default, (x, w, b, [1, 1], [0, 0], [1, 1], False, [0, 0], 3))


@requires_bfloat16
def test_bfloat16_conv_matches_torch():
    x, w = torch.randn(1, 3, 6, 5).bfloat16(), torch.randn(5, 3, 3, 3).bfloat16()
    check_lowering(aten.convolution.default, (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
                   tol=(1.6e-2, 5e-2))


class BatchNormStatistics(nn.Module):
    """Returns all three results of the eval batch norm op: the saved statistics are empty."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3).eval()

    def forward(self, x):
        bn = self.bn
        return torch.ops.aten._native_batch_norm_legit_no_training(x, bn.weight, bn.bias, bn.running_mean,
                                                                    bn.running_var, 0.1, 1e-5)


def test_the_empty_statistics_of_a_batch_norm_are_made_when_read():
    model, x = BatchNormStatistics(), torch.randn(2, 3, 4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        cm = st.compile(model, (x,))
    with torch.no_grad():
        got, want = cm(x), model(x)
    assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in want] == [(2, 3, 4, 4), (0,), (0,)]
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_float64_conv_bn_relu_matches_eager():
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(5, 19, 3, 1, 1)).double()
    compile_checked(model, torch.randn(1, 5, 6, 10, dtype=torch.float64), tol=1e-10)


def test_conv_bn_relu_residual_is_one_kernel_with_the_batch_norm_folded():
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(16, 16, 3, 1, 1, bias=True), residual=True)
    cm = compile_checked(model, torch.randn(1, 16, 10, 12))
    (groups,) = kernels(cm)
    conv = [g for g in groups if g.convs]       # and the padded copy of the input (ops/conv.py)
    assert len(conv) == 1 and len(conv[0].convs) == 1 and len(groups) == 2
    packs = cm.program.packs
    # a 3x3 over whole blocks of input channels: its weight in the reduction's order (conv_schedules.weight_blocks)
    assert sorted(spec.kind for spec in packs.values()) == ["bn_shift", "conv_tiles"]
    conv_pack = next(spec for spec in packs.values() if spec.kind == "conv_tiles")
    assert conv_pack.width == HOST.native_lanes(32) and conv_pack.more[-1] is not None   # folded: reads var
    assert "rsqrt" not in str(cm.program), "the batch norm is folded, not computed"


def _random_bn(c: int) -> nn.BatchNorm2d:
    """A batch norm far from the identity (timm starts them at unit statistics, where folding
    one twice changed 1e-5 of the result)."""
    bn = nn.BatchNorm2d(c).eval()
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5), bn.bias.normal_(), bn.running_mean.normal_(), bn.running_var.uniform_(0.5, 1.5)
    return bn


class GhostModule(nn.Module):
    """timm's RepGhost module in eval mode: a batch norm of a batch norm's output, beside a
    depthwise convolution of it: relu(bn(dw(bn(conv(x)))) + bn(bn(conv(x))))."""

    def __init__(self, cin: int, cout: int, k: int = 1):
        super().__init__()
        self.conv, self.bn1 = nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), _random_bn(cout)
        self.dw, self.bn2 = nn.Conv2d(cout, cout, 3, padding=1, groups=cout, bias=False), _random_bn(cout)
        self.fusion_bn = _random_bn(cout)

    def forward(self, x):
        x1 = self.bn1(self.conv(x))
        return F.relu(self.bn2(self.dw(x1)) + self.fusion_bn(x1)) + self.fusion_bn(self.bn2(x1))


@pytest.mark.parametrize("isa", ["host", "avx2"])
def test_a_batch_norm_after_a_folded_one(isa):
    """The second batch norm of bn(bn(conv(x))) is applied to the folded convolution's result;
    it was folded into the convolution's weights in place of the first one (RepGhostNet: 0.47
    off). On AVX2 the 3x3 of 64 channels is a Winograd convolution, folded the same way."""
    torch.manual_seed(0)
    if isa == "host":
        compile_checked(GhostModule(6, 10), torch.randn(1, 6, 7, 9))
    else:
        target = sl.Target.create(ISAS["avx2"])
        compile_checked(GhostModule(64, 64, k=3), torch.randn(1, 64, 8, 8), targets=(target,))


# The 3x3 in the default suite; the 7x7 stem (built by default in test_conv2d_modules_match_eager) with -m slow.
@pytest.mark.parametrize("k", [pytest.param(7, marks=pytest.mark.slow), 3])
def test_padded_convs_read_a_padded_copy(k):
    """A guarded read per tap and output costs more than a padded copy of the input (a 3x3
    ResNet layer ran 2x slower with guards in its inner loop)."""
    torch.manual_seed(0)
    cm = compile_checked(ConvBN(nn.Conv2d(3, 8, k, 2, k // 2, bias=False)), torch.randn(1, 3, 19, 16))
    (groups,) = kernels(cm)
    assert sorted(g.anchor.op.tag for g in groups) == ["", "conv_pad"]
    assert "if_then_else" not in str(next(g.convs[0] for g in groups if g.convs).op.body)


def test_dynamic_batch():
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(4, 20, 3, 2, 1))
    cm = st.compile(model, (torch.randn(2, 4, 9, 7),), dynamic_shapes={"x": {0: torch.export.Dim("batch", max=64)}})
    with torch.no_grad():
        for batch in (1, 3):
            x = torch.randn(batch, 4, 9, 7)
            torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)


def test_relu6_after_depthwise_is_fused_and_a_lone_batch_norm_is_an_affine():
    torch.manual_seed(0)
    dw = ConvBN(nn.Conv2d(8, 8, 3, 2, 1, groups=8, bias=False), act=F.relu6)
    cm = compile_checked(dw, torch.randn(1, 8, 9, 9))
    assert [len(g) for g in kernels(cm)] == [1]
    bn = nn.BatchNorm2d(5).eval()
    bn.running_var.uniform_(0.5, 2.0)
    cm = compile_checked(bn, torch.randn(2, 5, 3, 4), tol=1e-5)
    assert sorted(spec.kind for spec in cm.program.packs.values()) == ["bn_scale", "bn_shift"]


def test_folded_weights_follow_a_changed_batch_norm():
    """The folded copy is made again when a source (here a running statistic) is written."""
    torch.manual_seed(0)
    model = ConvBN(nn.Conv2d(3, 8, 3, 1, 1))
    x = torch.randn(1, 3, 5, 5)
    cm = st.compile(model, (x,))
    with torch.no_grad():
        model.bn.running_var.mul_(3.0)
        model.bn.weight.add_(0.25)
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)


def test_pack_conv_layout_and_fold():
    w = torch.randn(11, 3, 2, 2)
    p = pack_conv(w, 4)
    assert p.shape == (3, 3, 2, 2, 4) and p.is_contiguous()
    oc = torch.arange(11)
    assert torch.equal(p[oc // 4, :, :, :, oc % 4], w) and not p[2, ..., 3:].any()
    gamma, mean, var = torch.rand(11) + 0.5, torch.randn(11), torch.rand(11) + 0.5
    folded = pack_conv(w, 4, gamma, mean, var, 1e-5)
    want = w * (gamma / torch.sqrt(var + 1e-5)).reshape(11, 1, 1, 1)
    torch.testing.assert_close(folded[oc // 4, :, :, :, oc % 4], want)


def test_cuda_conv_kernels_in_emulation():
    """A ResNet block with a strided downsampling shortcut: a conv + bn + relu kernel and one
    summing two convolutions (+ relu), one output per thread."""
    pytest.importorskip("cuda.bindings")
    torch.manual_seed(0)
    block = zoo.BasicBlock(4, 8, 2).eval()
    for m in block.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(1, 4, 9, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        cm = st.compile(block, (x,), target="cuda")
    assert sorted(len(g.convs) for g in kernels(cm)[0]) == [1, 2]
    with torch.no_grad():
        want = block(x)
        for engine in ("shim", "simt"):
            torch.testing.assert_close(cm.emulate(x, engine=engine), want, rtol=1e-5, atol=1e-5)


ISAS = {"avx2": "llvm -mcpu=haswell", "avx512": "llvm -mcpu=skylake-avx512"}


@pytest.mark.parametrize("isa", sorted(ISAS))
# A 3x3 with a column tail and a 1x1 in blocks of 4 in the default suite; the other three with -m slow.
@pytest.mark.parametrize("cin, cout, k, hw", [
    (13, 40, 3, (5, 17)),    # rows of 17 and 29 (prime): a column tail
    pytest.param(24, 40, 3, (3, 29), marks=pytest.mark.slow),
    (16, 20, 1, (4, 13)),    # 20 channels: blocks of 4
    pytest.param(32, 48, 1, (3, 56), marks=pytest.mark.slow),
    pytest.param(8, 64, 3, (4, 7), marks=pytest.mark.slow),
])
def test_register_tiles_of_each_isa_match_eager(isa, cin, cout, k, hw):
    """The blocked NCHW kernel's register tile (a conv whose result is NCHW) for AVX2 and
    AVX-512 code on odd rows (tails) and channels, bounds-checked."""
    if isa == "avx512" and HOST.native_lanes(32) < 16:
        pytest.skip("AVX-512 code needs an AVX-512 host")
    torch.manual_seed(0)
    target = sl.Target.create(ISAS[isa])
    conv = nn.Conv2d(cin, cout, k, 1, k // 2, bias=False)
    compile_checked(ConvBN(conv), torch.randn(1, cin, *hw), targets=(target.with_options(bounds_check=True), target))
