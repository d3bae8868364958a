"""sort and topk (torch/ops/sort.py) against torch: values and indices along each dim,
ascending and descending, NaN, -0.0 and ties (a stable sort's indices are torch's), integers,
topk's largest and smallest; a mixture-of-experts router (softmax, top-2 experts, their
weights renormalized) compiled whole; what stays in torch."""
import math
import warnings

import pytest
import torch
import torch.nn as nn

import schedlang.torch as st
from schedlang.torch.ops.sort import MAX_EXTENT

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)
x = torch.randn(4, 9)


@pytest.mark.parametrize("dim, descending", [(-1, False), (-1, True), (0, False), (0, True)])
def test_sort(dim, descending):
    check_lowering(aten.sort.default, (x, dim, descending))


def test_sort_special_values_and_ties_stably():
    v = torch.tensor([[1.0, math.nan, -0.0, 0.0, 2.0, 1.0, -math.inf, math.nan, 0.0, 1.0]])
    for descending in (False, True):
        check_lowering(aten.sort.stable, (v,), {"stable": True, "descending": descending})
    ints = torch.randint(-3, 4, (3, 11), dtype=torch.int32)
    check_lowering(aten.sort.stable, (ints,), {"stable": True, "dim": 1})


@pytest.mark.parametrize("k, dim, largest", [(3, -1, True), (1, -1, False), (4, 0, True), (9, 1, False)])
def test_topk(k, dim, largest):
    check_lowering(aten.topk.default, (x, k, dim, largest))


class Router(nn.Module):
    """Mixtral's router: the top 2 of 8 experts per token, their softmax weights renormalized."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 8, bias=False)

    def forward(self, h):
        p = torch.softmax(self.gate(h), -1)
        w, experts = torch.topk(p, 2, -1)
        return w / w.sum(-1, keepdim=True), experts


def test_moe_router_compiles_whole():
    h, model = torch.randn(5, 16), Router().eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(model, (h,))
        (gw, ge), (ww, we) = compiled(h), model(h)
    torch.testing.assert_close(gw, ww)
    assert torch.equal(ge, we)


def test_long_dims_and_unsorted_topk_stay_in_torch():
    class Long(nn.Module):
        def forward(self, a):
            return torch.sort(a, -1).values
    a = torch.randn(1, MAX_EXTENT + 1)
    with pytest.warns(st.FallbackWarning, match="sort"):
        compiled = st.compile(Long(), (a,))
    torch.testing.assert_close(compiled(a), torch.sort(a, -1).values)

    class Unsorted(nn.Module):
        def forward(self, a):
            return torch.topk(a, 2, sorted=False).values.sum(-1)
    with pytest.warns(st.FallbackWarning, match="topk"):
        st.compile(Unsorted(), (x,))
