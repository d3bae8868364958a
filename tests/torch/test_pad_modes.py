"""Reflection and replication padding (ops/pad_modes.py) against torch: 1-3 padded dims, pads
of 0 up to the input size less one, asymmetric, on odd sizes, built bounds-checked; F.pad
and Conv2d's padding_mode compiled whole as one op (not index gathers); pads torch refuses
run in torch and raise its error."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)


@pytest.mark.parametrize("mode", ["reflection", "replication"])
@pytest.mark.parametrize("dims,shape,pad", [
    (1, (2, 3, 9), [3, 8]),
    (1, (3, 7), [0, 2]),
    (2, (1, 2, 7, 6), [1, 5, 6, 0]),
    (2, (3, 5, 4), [2, 2, 2, 2]),
    (3, (1, 2, 4, 5, 3), [1, 2, 0, 4, 3, 1]),
])
def test_pad_matches_torch(mode, dims, shape, pad):
    op = getattr(aten, f"{mode}_pad{dims}d").default
    check_lowering(op, (torch.randn(shape), pad))
    if mode == "replication":
        check_lowering(op, (torch.randn(shape).double(), [p + 7 for p in pad]))    # past the input: clamped


class Generator(nn.Module):
    """A pix2pix / CycleGAN ResNet block: reflection pad, 3x3 conv, instance norm, ReLU; and a
    convolution padding by replication."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3)
        self.rep = nn.Conv2d(4, 4, 3, padding=2, padding_mode="replicate")

    def forward(self, x):
        y = F.relu(F.instance_norm(self.conv(F.pad(x, (1, 1, 1, 1), mode="reflect"))))
        return self.rep(x + y)


def test_generator_block_compiles_whole():
    m = Generator().eval()
    x = torch.randn(1, 4, 9, 11)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        cm = st.compile(m, (x,), target="llvm -bounds-check")
        torch.testing.assert_close(cm(x), m(x), rtol=1e-5, atol=1e-5)
    torch_ir = cm.ir("torch")
    assert "reflection_pad2d" in torch_ir and "replication_pad2d" in torch_ir and "index" not in torch_ir


def test_a_reflect_pad_torch_refuses_raises_its_error():
    class Pad(nn.Module):
        def forward(self, x):
            return F.pad(x, (4, 0), mode="reflect")
    x = torch.randn(1, 2, 4)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            st.compile(Pad(), (x,))(x)
