"""Group normalization and batch-statistics normalization (torch/ops/group_norm.py) against
torch: group norm's three results (out, mean, rstd) for 2-d to 4-d inputs, one group, one
channel a group, without weight or bias, float16 and float64; a diffusion model's residual
block (GroupNorm, SiLU, conv) and nn.InstanceNorm1d/2d compiled whole."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)


@pytest.mark.parametrize("shape, groups, affine", [((2, 6, 5, 7), 3, True), ((3, 8, 9), 8, True),
                                                   ((4, 6), 2, False), ((1, 4, 3, 3), 1, True)])
def test_native_group_norm(shape, groups, affine):
    x = torch.randn(shape) * 3 + 1
    c = shape[1]
    w, b = (torch.randn(c), torch.randn(c)) if affine else (None, None)
    hw = 1
    for e in shape[2:]:
        hw *= e
    check_lowering(aten.native_group_norm.default, (x, w, b, shape[0], c, hw, groups, 1e-5), tol=(1e-4, 1e-4))


@pytest.mark.parametrize("dtype, tol", [(torch.float16, (2e-3, 2e-3)), (torch.float64, (1e-10, 1e-10))])
def test_dtypes(dtype, tol):
    x, w, b = torch.randn(2, 4, 6).to(dtype), torch.randn(4).to(dtype), torch.randn(4).to(dtype)
    check_lowering(aten.native_group_norm.default, (x, w, b, 2, 4, 6, 2, 1e-5), tol=tol)


class ResBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.n1, self.n2 = nn.GroupNorm(4, c), nn.GroupNorm(4, c)
        self.c1, self.c2 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return x + self.c2(F.silu(self.n2(self.c1(F.silu(self.n1(x))))))


def test_diffusion_res_block_compiles_whole():
    model, x = ResBlock().eval(), torch.randn(1, 8, 9, 9)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(model, (x,))
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_bad_groups():
    x = torch.randn(2, 6, 4)
    with pytest.raises(ValueError, match="not divisible into 4 groups"):
        check_lowering(aten.native_group_norm.default, (x, None, None, 2, 6, 4, 4, 1e-5))


@pytest.mark.parametrize("affine", [True, False])
def test_batch_statistics_norm(affine):
    """What nn.InstanceNorm becomes: batch norm with the batch's statistics, no running ones."""
    x = torch.randn(3, 5, 4, 6) * 2 + 1
    w, b = (torch.randn(5), torch.randn(5)) if affine else (None, None)
    check_lowering(aten._native_batch_norm_legit.no_stats, (x, w, b, True, 0.1, 1e-5), tol=(1e-4, 1e-4))
    check_lowering(aten._native_batch_norm_legit.no_stats, (x[:, :, 0], w, b, True, 0.1, 1e-5), tol=(1e-4, 1e-4))


def test_instance_norm_compiles_whole():
    for model, x in ((nn.InstanceNorm2d(6, affine=True), torch.randn(2, 6, 5, 5)),
                     (nn.InstanceNorm1d(4), torch.randn(3, 4, 9))):
        model.eval()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("error", st.FallbackWarning)
            compiled = st.compile(model, (x,))
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype, tol", [(torch.float16, (2e-3, 2e-3)), (torch.bfloat16, (2e-2, 2e-2)),
                                        (torch.float64, (1e-10, 1e-10))])
def test_batch_statistics_norm_dtypes(dtype, tol):
    """The saved statistics come back in x's dtype, as torch's (they were float32 for half
    inputs: an InstanceNorm2d in float16 raised an InternalError at compile)."""
    x = (torch.randn(2, 5, 4, 6) * 2 + 1).to(dtype)
    w, b = torch.randn(5).to(dtype), torch.randn(5).to(dtype)
    check_lowering(aten._native_batch_norm_legit.no_stats, (x, w, b, True, 0.1, 1e-5), tol=tol)
    model = nn.InstanceNorm2d(5, affine=True).eval().to(dtype)
    with torch.no_grad():
        got = st.compile(model, (x,))(x)
        assert got.dtype == dtype
        if dtype == torch.float64:
            torch.testing.assert_close(got, model(x), rtol=tol[0], atol=tol[1])
        else:     # against float32: ours computes the statistics in float32, eager in dtype
            torch.testing.assert_close(got.float(), model.float()(x.float()), rtol=tol[0] * 2, atol=tol[1] * 2)
