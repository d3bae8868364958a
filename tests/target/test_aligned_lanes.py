"""A vectorized loop over a fused (or reshaped) axis split by a factor that divides the inner
extent: every vector of lanes starts at a multiple of the factor, so it lies within one row,
and the vectorizer (kernel/vectorize.py) turns `ramp // c` into one value and `ramp % c` into
a ramp: a contiguous load and store, not a gather, and the values numpy's."""
import numpy as np
import pytest

import schedlang as sl


def fused_copy(rows: int, cols: int, factor: int, skew: int):
    """out[i, j] = x[i, j + skew] * 2 over the fused axis (i, j), split by factor and vectorized
    (x has skew more columns than out, so the flat indices of the two differ per row)."""
    x = sl.placeholder((rows, cols + skew), name="x")
    out = sl.compute((rows, cols), lambda i, j: x[i, j + skew] * 2.0, name="out")
    s = sl.create_schedule(out.op)
    fused = s[out].fuse(*out.op.axis)
    _, inner = s[out].split(fused, factor=factor)
    s[out].vectorize(inner)
    return s, x, out


@pytest.mark.parametrize("rows, cols, factor, skew", [(4, 24, 8, 0), (5, 33, 11, 2), (3, 16, 4, 1)])
def test_a_fused_axis_split_within_rows_is_contiguous(rows, cols, factor, skew):
    s, x, out = fused_copy(rows, cols, factor, skew)
    mod = sl.build(s, [x, out])
    kernel = str(mod.ir["kernel"])
    assert f"// x{factor}(" not in kernel and f"% x{factor}(" not in kernel, kernel
    xs = np.arange(rows * (cols + skew), dtype="float32").reshape(rows, cols + skew)
    got = np.zeros((rows, cols), dtype="float32")
    mod(xs, got)
    np.testing.assert_array_equal(got, xs[:, skew:] * 2)


def test_a_split_across_rows_keeps_the_per_lane_index():
    """A factor that does not divide the row: a vector may span two rows, so the quotient
    stays per lane (and the values are still right)."""
    s, x, out = fused_copy(5, 12, 8, 1)
    mod = sl.build(s, [x, out])
    xs = np.arange(5 * 13, dtype="float32").reshape(5, 13)
    got = np.zeros((5, 12), dtype="float32")
    mod(xs, got)
    np.testing.assert_array_equal(got, xs[:, 1:] * 2)
