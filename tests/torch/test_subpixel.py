"""Transposed convolutions of a module compiled whole as a convolution and a depth-to-space
(torch/subpixel.py): against eager torch, bounds-checked and for the host, on strides that
leave phases without taps (kernel < stride, kernel not a multiple of the stride), padding,
output_padding, groups (depthwise too), 1-d to 3-d, with and without bias, float64; the
rewritten weight is a folded constant; dilated ones keep the gather form."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from .test_conv import compile_checked

torch.manual_seed(0)

# (in, out, kernel, stride, padding, output_padding, groups, bias), input shape
CASES = {
    "k4_s2_p1": ((8, 5, 4, 2, 1, 0, 1, True), (1, 8, 9, 7)),
    "k2_s2_unet": ((6, 4, 2, 2, 0, 0, 1, True), (2, 6, 5, 6)),
    "k3_s2_p1_op1": ((5, 7, 3, 2, 1, 1, 1, False), (1, 5, 6, 5)),
    "k1_s2_no_tap_phase": ((4, 3, 1, 2, 0, 1, 1, True), (1, 4, 5, 5)),
    "k5_s3_p2_op2": ((3, 4, 5, 3, 2, 2, 1, True), (1, 3, 4, 6)),
    "rect": ((4, 6, (3, 4), (1, 2), (1, 0), (0, 1), 1, True), (1, 4, 7, 5)),
    "stride1_k3_p1": ((6, 6, 3, 1, 1, 0, 1, True), (1, 6, 8, 9)),
    "big_padding": ((4, 4, 5, 2, 3, 0, 1, False), (1, 4, 6, 6)),
    "groups2": ((6, 4, 4, 2, 1, 0, 2, True), (1, 6, 5, 4)),
    "depthwise": ((5, 5, 4, 2, 1, 0, 5, False), (1, 5, 6, 7)),
}


def _model(spec, nd=2, dtype=torch.float32):
    cin, cout, k, s, p, op, g, bias = spec
    cls = nn.ConvTranspose2d if nd == 2 else nn.ConvTranspose1d
    return cls(cin, cout, k, s, p, output_padding=op, groups=g, bias=bias).to(dtype).eval()


def _rewritten(cm) -> bool:
    return "_w_sub" in cm.ir("tensor")


@pytest.mark.parametrize("name", sorted(CASES))
def test_transposed_convolution_as_subpixel_matches_eager(name):
    spec, shape = CASES[name]
    cm = compile_checked(_model(spec), torch.randn(shape))
    assert _rewritten(cm), cm.ir("tensor")


@pytest.mark.parametrize("spec", [(3, 4, 5, 3, 2, 1, 1, True), (4, 6, 4, 2, 1, 0, 2, False), (2, 3, 2, 2, 0, 0, 1, True)])
def test_1d(spec):
    cm = compile_checked(_model(spec, nd=1), torch.randn(2, spec[0], 11))
    assert _rewritten(cm)


def test_3d_through_a_3d_convolution():
    """A ConvTranspose3d becomes a 3-d convolution (then 2-d slices: conv3d_slices.py)."""
    m = nn.ConvTranspose3d(4, 3, 3, 2, 1, output_padding=(1, 0, 1)).eval()
    compile_checked(m, torch.randn(1, 4, 3, 5, 4))
    m = nn.ConvTranspose3d(6, 4, 2, 2, groups=2).eval()
    cm = compile_checked(m, torch.randn(2, 6, 3, 4, 3))
    assert "_depth_unfold" in cm.ir("tensor")


def _dynamic_batch(m, shape):
    """Compiled bounds-checked with a symbolic batch, called at two batch sizes: eager's result."""
    import warnings
    import schedlang.torch as st
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = st.compile(m, [torch.randn(shape)], target="llvm -bounds-check",
                        dynamic_shapes={"input": {0: torch.export.Dim("batch")}})
        for n in (2, 3):
            x = torch.randn(n, *shape[1:])
            torch.testing.assert_close(cm(x), m(x), rtol=1e-4, atol=1e-4)
    return cm


def test_a_symbolic_batch_is_rewritten_too():
    cm = _dynamic_batch(nn.ConvTranspose2d(6, 4, 4, 2, 1).eval(), (2, 6, 5, 7))
    assert _rewritten(cm)


def test_float64():
    cm = compile_checked(_model((3, 4, 3, 2, 1, 1, 1, True), dtype=torch.float64),
                         torch.randn(1, 3, 5, 6, dtype=torch.float64), tol=1e-10)
    assert _rewritten(cm)


def test_the_subpixel_weight_is_a_folded_constant():
    """The weight's rewrite (pad, split, flip, permute) is computed once from the parameter and
    packed as a convolution weight; a new weight is seen at the next call."""
    m = _model((8, 5, 4, 2, 1, 0, 1, True))
    x = torch.randn(1, 8, 9, 7)
    cm = compile_checked(m, x)
    inputs = cm.ir("tensor").split("\n\n")[0]
    assert "_w_sub_conv" in inputs, inputs          # a packed input, not a compute of the weight
    with torch.no_grad():
        m.weight.mul_(-0.5)
        torch.testing.assert_close(cm(x), m(x), rtol=1e-4, atol=1e-4)


class GeneratorBlock(nn.Module):
    """A DCGAN generator step: transposed convolution, batch norm, ReLU; and a weight that is
    an input, not a parameter (still the sub-pixel form, its weight computed at each call)."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(8, 6, 4, 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x):
        y = F.relu(self.bn(self.up(x)))
        w = y[:, :6, :4, :4].reshape(6, 1, 4, 4).contiguous()
        return F.conv_transpose2d(y, w, stride=2, padding=1, groups=6)


def test_generator_block():
    m = GeneratorBlock().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    compile_checked(m, torch.randn(1, 8, 5, 6), tol=2e-4)


def test_dilated_keeps_the_gather_form():
    m = nn.ConvTranspose2d(4, 3, 3, 2, 1, dilation=2).eval()
    cm = compile_checked(m, torch.randn(1, 4, 5, 5))
    assert not _rewritten(cm)
