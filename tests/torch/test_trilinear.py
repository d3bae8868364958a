"""aten._trilinear (torch/ops/trilinear.py) against torch: nn.Bilinear's form, a sum over one
dim, none summed, float16; nn.Bilinear with and without bias and extra batch dims compiled
whole."""
import warnings

import pytest
import torch
import torch.nn as nn

import schedlang.torch as st

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)


def test_trilinear_forms():
    a, w, b = torch.randn(2, 3), torch.randn(5, 3, 4), torch.randn(2, 4)
    check_lowering(aten._trilinear.default, (a, w, b, [1, 3], [0], [1, 2], [2, 3]))      # nn.Bilinear's
    check_lowering(aten._trilinear.default, (a.half(), w.half(), b.half(), [1, 3], [0], [1, 2], [2, 3]))
    x, y, z = torch.randn(4, 3), torch.randn(4, 3), torch.randn(3)
    check_lowering(aten._trilinear.default, (x, y, z, [], [], [0], [1]))                 # sum over one dim
    check_lowering(aten._trilinear.default, (x, y, z, [], [], [0], []))                  # none summed


@pytest.mark.parametrize("bias, lead", [(True, (2,)), (False, (3, 2))])
def test_bilinear_compiles_whole(bias, lead):
    model = nn.Bilinear(3, 4, 5, bias=bias).eval()
    a, b = torch.randn(*lead, 3), torch.randn(*lead, 4)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(model, (a, b))
        torch.testing.assert_close(compiled(a, b), model(a, b), rtol=1e-5, atol=1e-5)
