"""Transposed convolutions (torch/ops/conv_transpose.py) against eager torch: 1-d to 3-d,
strides that leave outputs no tap reaches (kernel < stride), padding, output_padding,
dilation, groups (depthwise too), with and without bias, float64 and float16, built
bounds-checked and for the host; a UNet-style decoder compiled whole; bad arguments."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from .helpers import check_lowering
from .test_conv import compile_checked

aten = torch.ops.aten
torch.manual_seed(0)

# (input shape, weight shape, stride, padding, output_padding, dilation, groups, bias)
CASES = {
    "2d_stride2": ((1, 4, 5, 6), (4, 3, 2, 2), 2, 0, 0, 1, 1, True),
    "2d_k3_s2_p1_op1": ((2, 3, 5, 4), (3, 5, 3, 3), 2, 1, 1, 1, 1, False),
    "2d_kernel_under_stride": ((1, 2, 4, 3), (2, 3, 2, 1), (3, 2), (0, 0), (2, 1), 1, 1, True),
    "2d_dilated_groups": ((1, 6, 5, 5), (6, 2, 3, 3), 1, 2, 0, 2, 3, True),
    "2d_depthwise": ((1, 5, 6, 7), (5, 1, 4, 4), 2, 1, 0, 1, 5, False),
    "1d": ((2, 3, 9), (3, 4, 5), 3, 2, 1, 1, 1, True),
    "3d": ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), (2, 1, 2), (0, 1, 0), (1, 0, 0), 1, 1, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_transposed_convolution_matches_eager(name):
    xs, ws, stride, pad, extra, dil, groups, has_bias = CASES[name]
    nsp = len(xs) - 2
    rep = (lambda v: [v] * nsp if isinstance(v, int) else list(v))
    x, w = torch.randn(xs), torch.randn(ws)
    bias = torch.randn(ws[1] * groups) if has_bias else None
    check_lowering(aten.convolution.default, (x, w, bias, rep(stride), rep(pad), rep(dil), True, rep(extra), groups))


def test_float64_and_float16():
    x, w, b = torch.randn(1, 3, 5, 5, dtype=torch.float64), torch.randn(3, 2, 3, 3, dtype=torch.float64), None
    check_lowering(aten.convolution.default, (x, w, b, [2, 2], [1, 1], [1, 1], True, [0, 0], 1))
    x, w, b = (t.half() for t in (torch.randn(1, 3, 4, 4), torch.randn(3, 2, 2, 2), torch.randn(2)))
    check_lowering(aten.convolution.default, (x, w, b, [2, 2], [0, 0], [1, 1], True, [0, 0], 1))


class Decoder(nn.Module):
    """A UNet decoder step: upsample by a transposed convolution, concatenate the skip, conv, ReLU."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.conv = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        low, skip = x[:, :8, ::2, ::2], x[:, 8:12]
        return F.relu(self.conv(torch.cat((self.up(low), skip), 1)))


def test_decoder_compiles_whole():
    compile_checked(Decoder().eval(), torch.randn(1, 12, 10, 10))


def test_bad_arguments_name_the_op():
    x, w = torch.randn(1, 4, 5, 5), torch.randn(3, 2, 2, 2)     # 4 input channels, a weight for 3
    with pytest.raises(Exception, match="transposed convolution"):
        check_lowering(aten.convolution.default, (x, w, None, [2, 2], [0, 0], [1, 1], True, [0, 0], 1))


def test_an_empty_result_is_torchs():
    """A transposed convolution whose output has a 0 extent (padding eats it all) runs in torch,
    which returns the empty tensor, instead of raising (found by fuzzing)."""
    import warnings
    import schedlang.torch as st
    m = nn.ConvTranspose2d(6, 4, (3, 2), (1, 2), (4, 0), output_padding=(0, 1), groups=2, dilation=(2, 1)).eval()
    x = torch.randn(2, 6, 4, 5)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = st.compile(m, (x,))(x)
    assert got.shape == m(x).shape == (2, 4, 0, 11)
