"""cumsum, cumprod, logcumsumexp, cummax and cummin (torch/ops/cumulative.py) against eager torch: every dim,
integer and bool inputs accumulating to int64, dtype=, float16, a 0-d input, a symbolic
length; cumsum and cumprod of long dims (computed in blocks, short last blocks and several
levels) and the block structure that keeps them linear; a cummax longer than MAX_EXTENT stays
in torch; the position ids transformers compute from an attention mask, compiled whole."""
import warnings

import pytest
import torch
import torch.nn as nn

import schedlang.torch as st
from schedlang.torch.ops.cumulative import BLOCK, DIRECT_EXTENT, MAX_EXTENT

from schedlang.tensor.graph import post_order

from ..helpers import CHECKED
from .helpers import check_lowering, lower

aten = torch.ops.aten
torch.manual_seed(0)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_and_cumprod_along_each_dim(dim):
    x = torch.randn(3, 5, 7)
    check_lowering(aten.cumsum.default, (x, dim))
    check_lowering(aten.cumprod.default, (x * 0.5 + 1, dim))


def test_dtypes():
    ints = torch.randint(-4, 5, (4, 9), dtype=torch.int32)
    check_lowering(aten.cumsum.default, (ints, 1))                       # -> int64
    check_lowering(aten.cumsum.default, (ints > 0, 0))                   # bool -> int64
    check_lowering(aten.cumprod.default, (ints, 1))
    check_lowering(aten.cumsum.default, (ints, 1), {"dtype": torch.float64})
    check_lowering(aten.cumsum.default, (torch.randn(2, 33).half(), 1))
    check_lowering(aten.cumsum.default, (torch.tensor(2.5), 0))          # 0-d


class PositionIds(nn.Module):
    """What transformers compute from an attention mask of left-padded rows."""

    def forward(self, x, mask):
        pos = mask.long().cumsum(-1) - 1
        pos = pos.masked_fill(mask == 0, 1)
        return x + pos[..., None].float()


def test_position_ids_compile_whole():
    x = torch.randn(2, 9, 4)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1], [1] * 9])
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        warnings.simplefilter("error", UserWarning)       # a schedule falling back to plain loops
        compiled = st.compile(PositionIds(), (x, mask))
    torch.testing.assert_close(compiled(x, mask), PositionIds()(x, mask))


class Cumsum(nn.Module):
    def forward(self, x):
        return x.cumsum(-1)


@pytest.mark.parametrize("n", [DIRECT_EXTENT + 1, 1000, BLOCK * DIRECT_EXTENT + 3])
def test_long_cumsum_and_cumprod_in_blocks(n):
    """Past DIRECT_EXTENT the prefix is computed in blocks (the last one short here; the
    largest length takes a second level of blocks), bounds-checked, along a middle dim too."""
    x = torch.randn(2, n)
    check_lowering(aten.cumsum.default, (x, 1), tol=(1e-5, 1e-4))
    check_lowering(aten.cumprod.default, (1 + x / n, -1), tol=(1e-5, 1e-5))
    check_lowering(aten.cumsum.default, (torch.randint(-9, 9, (2, n), dtype=torch.int32), 1))
    check_lowering(aten.cumsum.default, (x.reshape(2, n, 1).expand(2, n, 3).contiguous(), 1), tol=(1e-5, 1e-4))
    check_lowering(aten.cumsum.default, (x.t().contiguous(), 0), tol=(1e-5, 1e-4))
    compiled = st.compile(Cumsum(), (x,), target=CHECKED)          # the default schedules
    torch.testing.assert_close(compiled(x), x.cumsum(-1), rtol=1e-5, atol=1e-4)


def test_blocks_keep_a_long_cumsum_linear():
    """No stage of a cumsum over 100,003 elements reduces over more than DIRECT_EXTENT terms,
    and it compiles whole (it ran in torch past MAX_EXTENT before)."""
    from schedlang.tensor.op import ComputeOp
    x = torch.randn(1, 100_003)
    made, outputs = lower(aten.cumsum.default, (x, -1))
    longest = max(r.dom.extent for t in post_order([o.op for o in outputs])
                  if isinstance(t, ComputeOp) for r in t.reduce_axis)
    assert longest <= DIRECT_EXTENT
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Cumsum(), (x,))
    torch.testing.assert_close(compiled(x), x.cumsum(-1), rtol=1e-4, atol=1e-3)


class Cummax(nn.Module):
    def forward(self, x):
        return x.cummax(-1).values


def test_a_long_cummax_runs_in_torch():
    x = torch.randn(1, MAX_EXTENT + 1)
    with pytest.warns(st.FallbackWarning, match="cummax"):
        compiled = st.compile(Cummax(), (x,))
    torch.testing.assert_close(compiled(x), x.cummax(-1).values)


def test_symbolic_length():
    n = torch.export.Dim("n", min=2, max=64)
    compiled = st.compile(Cumsum(), (torch.randn(2, 6),), dynamic_shapes=({1: n},))
    for n in (3, 11):
        x = torch.randn(2, n)
        torch.testing.assert_close(compiled(x), x.cumsum(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dim", [0, -1])
def test_logcumsumexp(dim):
    x = torch.randn(4, 9) * 30                          # exp overflows float32 without the shift
    x[1, 3], x[2, :2], x[3, 5] = float("-inf"), float("-inf"), float("inf")
    check_lowering(aten.logcumsumexp.default, (x, dim))
    check_lowering(aten.logcumsumexp.default, (x.double(), dim))
    check_lowering(aten.logcumsumexp.default, (torch.randn(3, 5).half(), dim), tol=(2e-3, 2e-3))


@pytest.mark.parametrize("op", [aten.cummax.default, aten.cummin.default], ids=str)
def test_cummax_and_cummin(op):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, float("nan"), 5.0, float("nan"), 0.0],
                      [0.5, -1.0, -1.0, 4.0, 4.0, float("inf"), 2.0, float("-inf")]])
    check_lowering(op, (x, 1))                                       # ties: the last index
    check_lowering(op, (torch.randn(5, 3, 4), 0))
    check_lowering(op, (torch.randint(-3, 3, (4, 9), dtype=torch.int32), -1))
    check_lowering(op, (torch.randn(3, 6).half(), 1))
