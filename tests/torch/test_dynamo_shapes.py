"""torch.compile(backend="schedlang") called with a second input size: Dynamo recompiles the
function with symbolic sizes (its default, dynamic=None). Sizes schedlang's lowerings need as
numbers (a convolution's image size, a scale factor made from sizes, extents torch proved
equal that do not simplify to one, a size an op in torch carries) make the module build per
concrete shape, never fail or leave the op in torch; the rest keep one module for all sizes.
Every result is checked against eager PyTorch at three sizes."""
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as sl_torch
from schedlang.torch import FallbackWarning, dynamo  # noqa: F401  (registers the backend)

from .helpers import spy_compile_fx
from .modules import reverse
from tests.target.test_kept_temps import kept_blocks


@pytest.fixture
def compiled(monkeypatch):
    """The CompiledModules schedlang.torch.compile_fx made, in order."""
    made = []
    spy_compile_fx(monkeypatch, after=made.append)
    yield made
    torch._dynamo.reset()


def run_sizes(model, inputs_of, sizes, rtol=1e-4, atol=1e-5):
    """Compile model with the backend, call it at each size: equal to eager, nothing in torch."""
    fn = torch.compile(model, backend="schedlang")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        for size in sizes:
            xs = inputs_of(size)
            torch.testing.assert_close(fn(*xs), model(*xs), rtol=rtol, atol=atol, msg=f"size {size}")


class SmallCNN(nn.Module):
    """conv + batch norm + relu, max pool, a strided conv, adaptive average pool, linear: the
    convolutions and pools need static image sizes."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2, ceil_mode=True)
        y = F.adaptive_avg_pool2d(F.relu(self.conv2(y)), 1).flatten(1)
        return self.fc(y)


def test_a_cnn_at_three_image_sizes_builds_per_shape(compiled):
    torch.manual_seed(0)
    model = SmallCNN().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    run_sizes(model, lambda r: (torch.randn(1, 3, r, r + 3),), (17, 24, 13))
    assert len(compiled) == 2, "static first, then one graph with symbolic sizes"
    dynamic = compiled[-1]
    assert dynamic.graph.size_vars and dynamic._per_shape
    assert len(dynamic._variants) == 2, "the second and third sizes, one build each"
    # the variants stay built, but only the shape called last keeps its temporaries (temps.py)
    first, last = (list(modules.values()) for _, modules in dynamic._variants.values())
    assert any(any(kept_blocks(m)) for m in last)
    assert not any(any(kept_blocks(m)) for m in first)


def test_a_text_model_keeps_one_module_for_all_lengths(compiled):
    """What lowers with symbolic sizes is not built per shape (no rebuild per length)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    run_sizes(layer, lambda s: (torch.randn(1, s, 32),), (12, 9, 7), atol=2e-5)
    dynamic = compiled[-1]
    assert dynamic.graph.size_vars and not dynamic._per_shape


class SliceThenAdd(nn.Module):
    """T5's position bias: x[:, :5] has extent min(5, s), which torch proved is 5 (its trace
    broadcast it against a 5); schedlang's simplifier cannot."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(1, 5, 16))

    def forward(self, x):
        return x[:, :5] + self.bias


def test_extents_torch_proved_equal(compiled):
    torch.manual_seed(0)
    run_sizes(SliceThenAdd().eval(), lambda s: (torch.randn(1, s, 16),), (8, 11, 6))


class ScaleFromSizes(nn.Module):
    """DINOv2's position embedding: interpolated by a factor computed from the input's size
    (a SymFloat in the graph), then added."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, 8, 4, 4))

    def forward(self, x):
        h, w = x.shape[-2] // 4, x.shape[-1] // 4
        pos = F.interpolate(self.pos, scale_factor=(h / 4, w / 4), mode="bilinear", align_corners=False)
        return F.avg_pool2d(x, 4) + pos


def test_a_scale_factor_made_from_sizes(compiled):
    torch.manual_seed(0)
    run_sizes(ScaleFromSizes().eval(), lambda r: (torch.randn(1, 8, r, r + 8),), (16, 24, 32))


class CeilAndSquare(nn.Module):
    """Sizes torch writes with CeilToInt(IntTrueDiv) and Pow: MobileViT's ceil(n / 2) patches,
    BEiT's (h * w + 1) ** 2 relative positions, and a scalar made from a size."""

    def forward(self, x):
        n = x.shape[-1]
        half = math.ceil(n / 2)
        y = F.pad(x, (0, 2 * half - n)).view(x.shape[0], half, 2).sum(-1)
        table = x.new_ones((n // 4 + 1) ** 2).view(n // 4 + 1, n // 4 + 1).sum()
        return y * table + torch.scalar_tensor(n)


def test_ceil_pow_and_scalar_sizes(compiled):
    torch.manual_seed(0)
    run_sizes(CeilAndSquare(), lambda n: (torch.randn(3, n),), (9, 12, 15))


class SizeBehindATorchOp(nn.Module):
    """reverse runs in torch; the part after it reads a tensor of extent (s + 1) // 2, from
    which the size s it also needs cannot be read back."""

    def forward(self, x):
        y = reverse(x[..., ::2] * 2.0)
        return y + x[..., : y.shape[-1]].exp()


def test_a_size_only_a_torch_step_carries():
    torch._dynamo.reset()
    fn = torch.compile(SizeBehindATorchOp(), backend="schedlang")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)      # reverse runs in torch by design
        for n in (9, 12, 15):
            x = torch.randn(2, n)
            torch.testing.assert_close(fn(x), SizeBehindATorchOp()(x), rtol=1e-5, atol=1e-6)
    torch._dynamo.reset()


def test_a_shape_torch_rejects_is_still_an_error():
    """Specializing per shape does not hide a real mismatch: eager's error, at the call."""
    torch._dynamo.reset()
    fn = torch.compile(SliceThenAdd().eval(), backend="schedlang")
    with torch.no_grad():
        fn(torch.randn(1, 8, 16))
        with pytest.raises(Exception, match="size|shape|match"):
            fn(torch.randn(1, 3, 16))             # x[:, :5] has 3 rows: does not broadcast with 5
    torch._dynamo.reset()


def test_export_path_with_a_dynamic_image_size():
    """schedlang.torch.compile with dynamic_shapes: the same per-shape build, no op in torch."""
    torch.manual_seed(0)
    model = SmallCNN().eval()
    h = w = torch.export.Dim.DYNAMIC           # (ceil_mode's guards rule out one plain range)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        compiled = sl_torch.compile(model, (torch.randn(1, 3, 16, 20),), dynamic_shapes={"x": {2: h, 3: w}})
        with torch.no_grad():
            for size in ((16, 20), (9, 31), (16, 20)):
                x = torch.randn(1, 3, *size)
                torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert compiled.fallback_ops() == {} and len(compiled._variants) == 2


class ScaleBySize(nn.Module):
    """GPT-2's attention scale, x / full([], head_dim ** 0.5): with dynamic=True the size is
    symbolic from the first call, and the division is aten.true_divide."""

    def forward(self, x):
        return x / torch.full([], x.size(-1) ** 0.5, dtype=x.dtype)


def test_dynamic_from_the_first_call(compiled):
    fn = torch.compile(ScaleBySize(), backend="schedlang", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        for n in (6, 9, 16):
            x = torch.randn(2, n)
            torch.testing.assert_close(fn(x), ScaleBySize()(x))
    assert len(compiled) == 1 and compiled[0].graph.size_vars


def _rows_view(x):
    b, h, w, c = x.shape
    return x.permute(0, 2, 1, 3).reshape(-1, h, c)    # a view of x while b == 1


def test_a_permuted_view_of_an_input_at_a_second_size(compiled):
    """The graph returns a view of its input with symbolic sizes; AOT autograd then rebuilds
    it from the input by as_strided with the strides of what the compiled module returned
    (no view replay with symbolic sizes), so a contiguous copy there read the wrong elements
    (3.0 off at the second size; timm's Sequencer, 6e-2 in its logits)."""
    fn = torch.compile(_rows_view, backend="schedlang")
    for size in (6, 3, 5):
        x = torch.randn(1, size, size + 1, 4)
        got = fn(x)
        assert got.stride() == _rows_view(x).stride() and got.data_ptr() == x.data_ptr()
        torch.testing.assert_close(got, _rows_view(x), rtol=0, atol=0, msg=f"size {size}")


def _strided_across_a_break(x):
    y = x[:, ::2, ::2, :]
    torch._dynamo.graph_break()
    return y * 2 + y.sum()


def test_a_strided_view_handed_over_a_graph_break():
    """The second graph's input is a strided view: Dynamo passes its symbolic strides as inputs
    the graph never reads (they were refused as sizes no tensor has)."""
    run_sizes(_strided_across_a_break, lambda s: (torch.randn(1, s, s, 8),), (6, 10, 7))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_a_fixed_scale_factor_at_new_sizes(compiled, mode):
    """interpolate(scale_factor=1.5) at a symbolic size: the output's extent trunc(1.5 * s)
    is float arithmetic on a size, computed at each call (it was refused at the second size:
    'the extent ... is not known from the inputs' shapes')."""
    run_sizes(nn.Upsample(scale_factor=1.5, mode=mode), lambda s: (torch.randn(1, 2, 5, s),), (7, 9, 10))


class IntArgument(nn.Module):
    """forward takes an int beside the tensor; Dynamo makes it a symbolic size once it changes,
    a graph input no tensor's shape gives (it was refused: 'no dimension of an input tensor')."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 6)

    def forward(self, x, n: int):
        return self.lin(F.pad(x, (0, n))[:, n:n + 10]).relu() * n + x[:, :n].sum(-1, keepdim=True)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_an_int_argument_that_changes(compiled, grad):
    torch.manual_seed(0)
    model = IntArgument().eval()
    fn = torch.compile(model, backend="schedlang")
    x = torch.randn(4, 10)
    with torch.set_grad_enabled(grad), warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        for n in (3, 5, 8, 2):
            torch.testing.assert_close(fn(x, n), model(x, n), rtol=1e-4, atol=1e-5, msg=f"n = {n}")
    assert len(compiled) == 2          # n = 3, then one module for every later n
    assert [i.kind for i in compiled[-1].graph.user_inputs].count("size") == 1
