"""F.grid_sample (torch/ops/grid_sample.py) against torch: bilinear and nearest, zeros and
border padding, both align_corners, grid points outside the input and huge coordinates, a
NaN one (nothing read out of bounds: bounds-checked builds), float64; a spatial transformer
(affine_grid, then grid_sample) compiled whole; what stays in torch."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)
x = torch.randn(2, 3, 5, 7)
grid = torch.rand(2, 4, 6, 2) * 2.6 - 1.3                # some points outside [-1, 1]
grid[0, 0, 1] = torch.tensor([1e30, -1e30])
grid[1, 1, 1] = torch.tensor([-1.0, 1.0])                # the corners exactly
grid[1, 1, 2] = torch.tensor([1.0, -1.0])


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("padding", [0, 1])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sampler_2d(mode, padding, align):
    check_lowering(aten.grid_sampler_2d.default, (x, grid, mode, padding, align), tol=(1e-5, 1e-5))


def test_a_nan_coordinate_reads_nothing_out_of_bounds():
    """torch's own result there is undefined (its float-to-int conversion of NaN); ours reads
    no memory outside the input (the checked build raises if it did) and leaves the other
    points as torch computes them."""
    from .helpers import lower, run_lowered
    bad = grid.clone()
    bad[0, 0, 0] = torch.tensor([float("nan"), 0.5])
    for mode in (0, 1):
        made, outputs = lower(aten.grid_sampler_2d.default, (x, bad, mode, 0, False))
        (got,) = run_lowered(made, outputs, None)
        want = aten.grid_sampler_2d.default(x, bad, mode, 0, False)
        torch.testing.assert_close(got[:, :, 1:], want[:, :, 1:], rtol=1e-5, atol=1e-5)


def test_float64():
    check_lowering(aten.grid_sampler_2d.default, (x.double(), grid.double(), 0, 0, False))


class Transformer(nn.Module):
    """A spatial transformer's sampling: an affine grid from theta, then bilinear sampling."""

    def forward(self, img, theta):
        g = F.affine_grid(theta, list(img.shape), align_corners=False)
        return F.grid_sample(img, g, align_corners=False)


def test_spatial_transformer_compiles_whole():
    img, theta = torch.randn(2, 3, 6, 5), torch.tensor([[[0.9, 0.2, 0.1], [-0.1, 1.1, 0.0]]] * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Transformer(), (img, theta))
    torch.testing.assert_close(compiled(img, theta), Transformer()(img, theta), rtol=1e-5, atol=1e-5)


def test_reflection_and_bicubic_stay_in_torch():
    class Reflect(nn.Module):
        def forward(self, a, g):
            return F.grid_sample(a, g, padding_mode="reflection", align_corners=False)
    with pytest.warns(st.FallbackWarning, match="grid_sampler_2d"):
        compiled = st.compile(Reflect(), (x, grid))
    torch.testing.assert_close(compiled(x, grid), Reflect()(x, grid))
