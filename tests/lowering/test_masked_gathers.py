"""A vectorized if_then_else, guard or store predicate never reads for the lanes it leaves out,
also where the read's index itself is read from memory (a gather through an index tensor:
t[idx[i - 1]] under i >= 1). The vectorizer once masked the gather but not the read of its
index, so lane 0 read idx[-1] (found by a random module: a sort, then a padded conv1d).
Bounds-checked builds turn any such read into an IndexError."""
import numpy as np
import pytest
import torch
import torch.nn as nn

import schedlang as sl
import schedlang.torch as slt
from tests.helpers import CHECKED


def _shifted_gather(n: int, m: int):
    """out[i] = data[idx[i - 1]] for i >= 1, else 0: idx[i - 1] exists only where i >= 1."""
    data = sl.placeholder((m,), name="data")
    idx = sl.placeholder((n,), name="idx", dtype="int32")
    out = sl.compute((n + 1,), lambda i: sl.if_then_else(i >= 1, data[idx[i - 1]], sl.const(0.0, "float32")),
                     name="out")
    return data, idx, out


@pytest.mark.parametrize("n", [7, 16, 37])
def test_gather_index_is_read_only_where_the_branch_is_taken(n):
    data, idx, out = _shifted_gather(n, 11)
    s = sl.create_schedule(out.op)
    o, i = s[out].split(out.op.axis[0], factor=8)
    s[out].vectorize(i)
    mod = sl.build(s, [data, idx, out], target=CHECKED, cache=False)
    rng = np.random.default_rng(0)
    d = rng.standard_normal(11).astype("float32")
    ix = rng.integers(0, 11, n).astype("int32")
    got = np.full(n + 1, 7.0, "float32")
    mod(d, ix, got)
    want = np.concatenate([[0.0], d[ix]]).astype("float32")
    np.testing.assert_array_equal(got, want)


def test_gather_through_a_shifted_index_under_a_vector_condition():
    """out[i] = src[idx[i - 1] + 1] for i >= 1, else src[0], the whole row one vector."""
    n = 16
    idx = sl.placeholder((n,), name="idx", dtype="int32")
    src = sl.placeholder((n + 1,), name="src")
    out = sl.compute((n + 1,), lambda i: sl.if_then_else(i >= 1, src[idx[i - 1] + 1], src[0]), name="out")
    s = sl.create_schedule(out.op)
    s[out].vectorize(out.op.axis[0])
    mod = sl.build(s, [idx, src, out], target=CHECKED, cache=False)
    ix = (np.arange(n)[::-1] % n).astype("int32")
    sv = np.arange(n + 1, dtype="float32")
    got = np.zeros(n + 1, "float32")
    mod(ix, sv, got)
    np.testing.assert_array_equal(got, np.concatenate([[sv[0]], sv[ix + 1]]).astype("float32"))


@pytest.mark.parametrize("shape", [(1, 5, 8), pytest.param((1, 28, 24), marks=pytest.mark.slow),
                                   pytest.param((2, 9, 16), marks=pytest.mark.slow)])
def test_sorted_rows_through_a_padded_conv1d(shape):
    """The module the bug was found in: the padded input of the convolution reads the sorted
    values t[..., sort_index[...]] through an if_then_else over the padding."""
    class SortConv(nn.Module):
        def __init__(self, features: int):
            super().__init__()
            self.conv = nn.Conv1d(features, 4, 3, padding=1)

        def forward(self, t):
            return self.conv(t.sort(-1)[0].transpose(1, 2)).transpose(1, 2)
    torch.manual_seed(0)
    module, x = SortConv(shape[-1]).eval(), torch.randn(*shape)
    with torch.no_grad():
        got = slt.compile(module, (x,), target=CHECKED)(x)
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)
