"""Reductions across rows with an epilogue (x.mean(0), x.mean(1) of [B, S, D], x.var(0), a
masked mean over tokens) compute a vector of columns at a time, the reduce loop outside the
vector (schedules._columns_with_epilogue, _columns_inside): against eager torch, bounds-checked,
on odd widths (a vector tail) and single rows."""
import re
import warnings

import pytest
import torch

import schedlang.torch as slt
from .helpers import Lambda



CASES = {
    "mean0": (lambda x: x.mean(0), (37, 97)),
    "mean0_keepdim": (lambda x: x.mean(0, keepdim=True) * 2, (64, 160)),
    "mean1_tokens": (lambda x: x.mean(1), (3, 29, 72)),
    "var0": (lambda x: x.var(0), (41, 130)),
    "amax0_plus": (lambda x: x.amax(0) + 1, (33, 70)),
    "masked_mean_pool": (lambda x: (x * (x[..., :1] > 0)).sum(1) / (x[..., :1] > 0).sum(1).clamp(min=1), (4, 31, 96)),
    "one_row": (lambda x: x.mean(1), (1, 7, 48)),
}


def _compiled(fn, x, target):
    m = Lambda(fn)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = slt.compile(m, [x], target=target)
        torch.testing.assert_close(c(x), m(x), rtol=1e-5, atol=1e-5)
    return c


@pytest.mark.parametrize("name", sorted(CASES))
def test_column_reductions_match_eager(name):
    fn, shape = CASES[name]
    torch.manual_seed(0)
    x = torch.randn(shape)
    c = _compiled(fn, x, "llvm -bounds-check")
    tile = c.ir("tile")
    # some reduce loop runs outside a vectorized loop of output columns
    assert re.search(r"for r\w* in 0\.\.\d+:\n(\s*if [^\n]*\n)?\s*vectorized", tile), tile


def test_mean_over_rows_is_one_parallel_kernel():
    c = _compiled(lambda x: x.mean(0), torch.randn(256, 512), "llvm")
    tile = c.ir("tile")
    assert tile.count("parallel") == 1 and tile.count("func ") == 1, tile
