"""3-d convolutions of a module compiled whole as one 2-d convolution over depth windows
(torch/conv3d_slices.py): against eager torch, bounds-checked and for the host, with depth
stride and padding, (h, w) stride, padding and dilation, groups and depthwise, kernel depth 1,
a batch of two, float64; the 2-d weight is a folded constant; a depth dilation keeps
ops/conv3d.py's plain reduction."""
import pytest
import torch
import torch.nn as nn

from .test_conv import compile_checked

torch.manual_seed(0)

# (in, out, kernel, stride, padding, dilation, groups, bias), input shape
CASES = {
    "k3_p1": ((4, 6, 3, 1, 1, 1, 1, True), (1, 4, 5, 7, 6)),
    "stem_like": ((3, 8, (3, 5, 5), (1, 2, 2), (1, 2, 2), 1, 1, False), (1, 3, 6, 11, 9)),
    "depth_stride2": ((4, 4, (3, 3, 1), (2, 1, 1), (1, 1, 0), 1, 1, True), (2, 4, 7, 5, 6)),
    "temporal_only": ((6, 6, (3, 1, 1), 1, (1, 0, 0), 1, 1, True), (1, 6, 5, 4, 7)),
    "kd1_hw_dilated": ((4, 5, (1, 3, 3), 1, (0, 2, 2), (1, 2, 2), 1, True), (1, 4, 3, 9, 8)),
    "groups2": ((4, 6, 3, (1, 2, 2), 1, 1, 2, True), (1, 4, 4, 8, 7)),
    "depthwise": ((5, 5, 3, 1, 1, 1, 5, False), (1, 5, 4, 6, 6)),
}


def _model(spec, dtype=torch.float32):
    cin, cout, k, s, p, d, g, bias = spec
    return nn.Conv3d(cin, cout, k, s, p, d, groups=g, bias=bias).to(dtype).eval()


def _sliced(cm) -> bool:
    return "_depth_unfold" in cm.ir("tensor") or "_planes_" in cm.ir("tensor")


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv3d_as_2d_slices_matches_eager(name):
    spec, shape = CASES[name]
    cm = compile_checked(_model(spec), torch.randn(shape))
    assert _sliced(cm), cm.ir("tensor")
    inputs = cm.ir("tensor").split("\n\n")[0]
    assert "_w2d_view" in inputs, inputs      # the viewed weight a folded constant (packed where dense)


def test_a_symbolic_batch_is_sliced_too():
    from .test_subpixel import _dynamic_batch
    cm = _dynamic_batch(nn.Conv3d(4, 5, 3, padding=1).eval(), (2, 4, 3, 6, 5))
    assert _sliced(cm)


def test_float64():
    cm = compile_checked(_model((3, 4, 3, 1, 1, 1, 1, True), torch.float64),
                         torch.randn(1, 3, 4, 5, 6, dtype=torch.float64), tol=1e-10)
    assert _sliced(cm)


class VideoBlock(nn.Module):
    """An R(2+1)D block: spatial (1, 3, 3), temporal (3, 1, 1), batch norm, ReLU, residual."""

    def __init__(self):
        super().__init__()
        self.spatial = nn.Conv3d(6, 8, (1, 3, 3), padding=(0, 1, 1), bias=False)
        self.temporal = nn.Conv3d(8, 6, (3, 1, 1), padding=(1, 0, 0), bias=False)
        self.bn = nn.BatchNorm3d(6)

    def forward(self, x):
        return torch.relu(x + self.bn(self.temporal(torch.relu(self.spatial(x)))))


def test_video_block():
    m = VideoBlock().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    compile_checked(m, torch.randn(1, 6, 5, 7, 8))


def test_depth_dilation_keeps_the_plain_reduction():
    cm = compile_checked(_model((3, 4, 3, 1, 2, (2, 1, 1), 1, True)), torch.randn(1, 3, 7, 5, 5))
    assert not _sliced(cm)
