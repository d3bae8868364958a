"""topi.winograd: the transform matrices reproduce a 1-d correlation exactly, and F(m x m, 3 x 3)
kernels (CPU schedule, bounds-checked builds) match a float64 numpy convolution on odd shapes:
H and W not multiples of m (partial last tiles), tile counts padded to the register tile,
padding 0 and 1, channel blocks of 1, batch 2, bias and ReLU."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.topi import winograd as wg
from tests.helpers import run

# Winograd's float32 error grows with m (the transforms' coefficients reach 8 at m = 4 and the
# sums cancel); measured |error| / (sum |w| * max |x|) is about 2e-7 at m = 4.
ERR = 2e-5


@pytest.mark.parametrize("m", [2, 4, 6])
def test_transform_matrices_give_the_correlation(m):
    at, g, bt = wg.transform_matrices(m)
    rng = np.random.default_rng(m)
    d, w = rng.standard_normal(m + 2), rng.standard_normal(3)
    want = [sum(w[k] * d[i + k] for k in range(3)) for i in range(m)]
    np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)), want, rtol=0, atol=1e-12)


def test_tile_too_large_raises():
    with pytest.raises(ValueError, match="interpolation points"):
        wg.transform_matrices(7)


def check(n, ic, oc, h, w, m, pad, cb=1, mr=6, bias=True, relu=True):
    """Build the kernel bounds-checked and not (tests/helpers.run) and compare with numpy."""
    rng = np.random.default_rng(ic * h + w)
    x = rng.standard_normal((n, ic, h, w)).astype(np.float32)
    wt = rng.standard_normal((oc, ic, 3, 3)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    u = wg.transform_weight(wt, m, 16)
    X = sl.placeholder((n, ic // cb, h, w, cb), name="X")
    U = sl.placeholder(u.shape, name="U")
    B = sl.placeholder((oc,), name="B")
    out = wg.conv2d_winograd_nchwc(X, U, oc, m, pad, mr=mr, bias=B if bias else None, relu=relu)
    s = wg.schedule_conv2d_winograd(sl.create_schedule(out.op), out, mr=mr)
    xb = np.ascontiguousarray(x.reshape(n, ic // cb, cb, h, w).transpose(0, 1, 3, 4, 2))
    args = [X, U, B, out] if bias else [X, U, out]
    _, ((_, got),), _ = run(s, args, feed={X: xb, U: u, B: b})
    got = got.transpose(0, 1, 4, 2, 3).reshape(n, oc, got.shape[2], got.shape[3])
    want = wg.reference(x, wt, pad, b if bias else None, relu)
    scale = np.abs(wt).sum(axis=(1, 2, 3)).max() * np.abs(x).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=ERR * scale)


def test_winograd_odd_shape():
    """F(4x4): 9 x 10 (partial tiles in both dims), 9 tiles padded to 12, 3 -> 5 channels."""
    check(1, 3, 5, 9, 10, 4, 1)


@pytest.mark.slow
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("n, ic, oc, h, w, pad, cb, bias, relu", [
    (2, 3, 5, 7, 6, 0, 1, True, False),       # padding 0, batch 2
    (1, 16, 24, 11, 5, 1, 8, True, True),     # channel blocks of 8, more output panels than blocks
    (1, 8, 8, 4, 4, 1, 8, False, False),      # one tile (fewer tiles than the register tile's rows)
    (1, 5, 3, 3, 13, 0, 1, True, True),       # one output row
])
def test_winograd_shapes(m, n, ic, oc, h, w, pad, cb, bias, relu):
    check(n, ic, oc, h, w, m, pad, cb, bias=bias, relu=relu)


def test_mismatched_weight_raises():
    X = sl.placeholder((1, 2, 8, 8, 8), name="X")
    U = sl.placeholder((16, 1, 16, 16), name="U")      # F(2)'s 16 positions, asked for F(4)
    with pytest.raises(ValueError, match="does not fit"):
        wg.conv2d_winograd_nchwc(X, U, 16, 4)
