"""torch.linalg.vector_norm (torch/ops/vector_norm.py) against torch: every ord kind (2, 1, 0,
inf, -inf, 3, 0.5), dims (none, one, several, negative) with and without keepdim, dtype=,
float16; F.normalize in a module compiled whole (CLIP's embedding head); torch.cdist for the
same orders, broadcast batch dims."""
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)
x = torch.randn(3, 4, 5)
x[0, 0, 0] = 0.0


@pytest.mark.parametrize("ord", [2, 1, 0, math.inf, -math.inf, 3, 0.5])
@pytest.mark.parametrize("dim, keepdim", [(None, False), ([-1], True), ([0, 2], False)])
def test_vector_norm(ord, dim, keepdim):
    check_lowering(aten.linalg_vector_norm.default, (x, ord, dim, keepdim), tol=(1e-5, 1e-5))


def test_dtypes():
    check_lowering(aten.linalg_vector_norm.default, (x.half(), 2, [1]))
    check_lowering(aten.linalg_vector_norm.default, (x, 2, [1], False), {"dtype": torch.float64})
    with pytest.raises(TypeError, match="floating-point"):
        check_lowering(aten.linalg_vector_norm.default, (torch.tensor([1, 2]), 2))


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 4)

    def forward(self, a, b):
        a, b = F.normalize(self.proj(a), dim=-1), F.normalize(self.proj(b), dim=-1)
        return a @ b.t(), torch.norm(a - b, dim=-1), (a - b).norm(p=1)


def test_normalize_compiles_whole():
    a, b = torch.randn(5, 6), torch.randn(5, 6)
    model = Embed().eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(model, (a, b))
        for got, want in zip(compiled(a, b), model(a, b)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, math.inf, 3.0])
def test_cdist(p):
    a, b = torch.randn(2, 30, 5), torch.randn(1, 27, 5)      # over 25 rows: torch's p = 2 takes a matmul
    b[0, 0] = a[0, 0]                                          # a zero distance
    # compute_mode 2 (never the matmul) for torch's reference: its default matmul path loses up
    # to ~1e-3 at a zero distance (sqrt of a cancelled |a|^2 + |b|^2 - 2ab, BLAS-dependent);
    # the lowering, which ignores the mode, takes each difference as this reference does
    check_lowering(aten._cdist_forward.default, (a, b, p, 2), tol=(1e-4, 1e-4))
    check_lowering(aten._cdist_forward.default, (a, b, p, None), tol=(1e-4, 5e-3))
    check_lowering(aten._cdist_forward.default, (a[0, :4], b[0, :3], p, None), tol=(1e-5, 1e-5))
