"""Upsampling lowerings (ops/resize.py) against torch: nearest, nearest-exact and linear in
1-3 dims, bicubic in 2, by output size and by scale factor (torch then uses 1 / factor, not in / out),
align_corners both ways, up and down, odd sizes. Built bounds-checked as well."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

from .helpers import check_lowering, has_dtype

aten = torch.ops.aten
X = torch.randn(2, 3, 11, 10, generator=torch.Generator().manual_seed(0))
# (output_size, scale_factors): by size, by factor (integer, fractional, shrinking), identity
SIZES = [(None, [2.0, 2.0]), ([13, 7], None), (None, [1.5, 0.7]), ([22, 20], None), ([11, 10], None),
         (None, [1.0, 3.0]), ([1, 4], None)]


@pytest.mark.parametrize("size,factors", SIZES, ids=repr)
def test_upsample_2d(size, factors):
    check_lowering(aten.upsample_nearest2d.vec, (X, size, factors))
    check_lowering(aten._upsample_nearest_exact2d.vec, (X, size, factors))
    for align_corners in (False, True):
        if factors is None or not align_corners:
            check_lowering(aten.upsample_bilinear2d.vec, (X, size, align_corners, factors))


@pytest.mark.parametrize("size,factors", SIZES, ids=repr)
def test_upsample_bicubic(size, factors):
    """Every output reads the four inputs around its source (clamped at the edges) with
    torch's weights, up and down, align_corners both ways; .default as torch.export leaves it."""
    for align_corners in (False, True):
        if factors is None or not align_corners:
            check_lowering(aten.upsample_bicubic2d.vec, (X * 3, size, align_corners, factors))
    if size is not None:
        check_lowering(aten.upsample_bicubic2d.default, (X.double(), size, True))


def test_bicubic_module_is_one_lowered_op():
    """interpolate(mode="bicubic") stays one op through torch.export (not sixteen gathers)."""
    class Up(nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=2, mode="bicubic") + 1

    x = torch.randn(1, 3, 17, 9)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        cm = st.compile(Up(), (x,), target="llvm -bounds-check")
        torch.testing.assert_close(cm(x), Up()(x), rtol=1e-5, atol=1e-5)
    assert "upsample_bicubic2d" in cm.ir("torch") and "index" not in cm.ir("torch")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16]
                         + ([torch.bfloat16] if has_dtype(torch.bfloat16) else []), ids=str)
def test_upsample_dtypes(dtype):
    x = X.to(dtype)
    check_lowering(aten.upsample_nearest2d.vec, (x, [13, 7], None))
    # torch rounds the weights to a half-precision dtype first: allow that rounding
    tol = None if dtype == torch.float64 else (2e-2, 2e-2)
    check_lowering(aten.upsample_bilinear2d.vec, (x, None, False, [1.5, 1.3]), tol=tol)


def test_upsample_nearest_of_integers():
    check_lowering(aten.upsample_nearest2d.vec, ((X * 50).to(torch.uint8), [17, 5], None))


def test_upsample_1d_3d_and_default_overloads():
    x1 = torch.randn(2, 3, 9)
    check_lowering(aten.upsample_linear1d.vec, (x1, None, False, [1.7]))
    check_lowering(aten.upsample_linear1d.vec, (x1, [4], True, None))
    check_lowering(aten.upsample_nearest1d.vec, (x1, [20], None))
    x3 = torch.randn(1, 2, 3, 5, 4)
    check_lowering(aten.upsample_trilinear3d.vec, (x3, [4, 7, 9], True, None))
    check_lowering(aten.upsample_trilinear3d.vec, (x3, None, False, [2.0, 1.5, 1.3]))
    check_lowering(aten.upsample_nearest3d.vec, (x3, [4, 7, 9], None))
    check_lowering(aten.upsample_bilinear2d.default, (X, [13, 7], False, 1.3, 0.8))
    check_lowering(aten.upsample_nearest2d.default, (X, [13, 7]))


class Resizes(nn.Module):
    def forward(self, x):
        return (F.interpolate(x, scale_factor=2, mode="nearest"),
                F.interpolate(x, size=(13, 7), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=1.5, mode="bilinear"),
                F.interpolate(x, size=(5, 6), mode="nearest-exact"),
                F.interpolate(x.flatten(2), scale_factor=0.5, mode="linear"),
                # timm's position-embedding resampling
                F.interpolate(x, size=(4, 12), mode="bicubic", antialias=True),
                F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True))


def test_interpolate_in_a_module_compiles_whole():
    x = torch.randn(1, 2, 7, 9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Resizes(), (x,))
    for got, want in zip(compiled(x), Resizes()(x)):
        torch.testing.assert_close(got, want)


class Bilinear(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="bilinear")


def test_bilinear_interpolates_each_input_row_once_then_between_rows():
    """A rows kernel [.., in_h, out_w] (two taps along the row, unrolled), then the output
    reads two of its rows: half the data-dependent reads of four corners per output."""
    x = torch.randn(1, 3, 7, 9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        compiled = st.compile(Bilinear(), (x,))
    torch.testing.assert_close(compiled(x), Bilinear()(x))
    tile = compiled.ir("tile")
    assert "upsample_bilinear2d_rows: f32[1, 3, 7, 18]" in tile and "unrolled tap" in tile, tile
    assert tile.count("parallel") == 2


# Antialiased resampling (ops/resize_aa.py): shrinking (the filter stretched over several
# inputs), growing, one dim unchanged, a scale factor, align_corners, a single output row.
AA_SIZES = [([5, 4], None), ([3, 17], None), ([11, 6], None), (None, [0.37, 2.5]), ([1, 10], None), ([23, 21], None)]


@pytest.mark.parametrize("size,factors", AA_SIZES, ids=repr)
@pytest.mark.parametrize("kind", ["bilinear", "bicubic"])
def test_antialiased_resampling(kind, size, factors):
    op = getattr(aten, f"_upsample_{kind}2d_aa").vec
    for align_corners in (False, True):
        check_lowering(op, (X * 3, size, align_corners, factors))
    default = getattr(aten, f"_upsample_{kind}2d_aa").default
    if size is not None:
        check_lowering(default, (X.double(), size, False))


def test_antialiased_resampling_keeps_infinities_where_torch_does():
    """A tap outside an output's window reads no input (a select, not a weight of 0 times inf)."""
    x = X.clone()
    x[0, 1, 4, 5] = float("inf")
    for kind in ("bilinear", "bicubic"):
        got, = check_lowering(getattr(aten, f"_upsample_{kind}2d_aa").vec, (x, [5, 17], False, None))
        assert got.isinf().any()


def test_antialiased_resampling_on_the_cuda_target_emulated():
    from .test_cuda_emulate import check_emulated, compile_cuda

    class Resample(nn.Module):
        def forward(self, x):
            return F.interpolate(x, size=(5, 12), mode="bicubic", antialias=True) * 2

    x = torch.randn(1, 2, 11, 9)
    check_emulated(compile_cuda(Resample(), (x,)), Resample(), (x,))
