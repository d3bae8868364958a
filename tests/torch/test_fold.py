"""F.fold (aten.col2im, torch/ops/fold.py) against eager torch: strides that skip pixels and
overlap, dilation, padding, a 1x1 kernel, unbatched input; nn.Fold compiles whole (torch's
decomposition of it, an index_put with two index tensors, ran in torch: timm's VOLO)."""
import warnings

import pytest
import torch
import torch.nn as nn

import schedlang.torch as st

from .helpers import check_lowering

# (output size, kernel, dilation, padding, stride)
CASES = [((6, 7), (3, 3), (1, 1), (1, 1), (1, 1)), ((6, 7), (3, 3), (1, 1), (1, 1), (2, 2)),
         ((9, 8), (2, 3), (2, 1), (1, 0), (2, 3)), ((5, 5), (1, 1), (1, 1), (0, 0), (1, 1)),
         ((7, 6), (2, 2), (1, 1), (0, 0), (2, 2))]


@pytest.mark.parametrize("out,k,d,p,s", CASES, ids=repr)
def test_col2im_matches_torch(out, k, d, p, s):
    cols = nn.Unfold(k, dilation=d, padding=p, stride=s)(torch.randn(2, 3, *out))
    check_lowering(torch.ops.aten.col2im.default, (cols, list(out), list(k), list(d), list(p), list(s)))
    check_lowering(torch.ops.aten.col2im.default, (cols[0], list(out), list(k), list(d), list(p), list(s)))


def test_fold_compiles_whole():
    fold = nn.Fold((6, 7), 3, padding=1, stride=2)
    cols = torch.randn(2, 18, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(fold, (cols,))
    torch.testing.assert_close(compiled(cols), fold(cols))


def test_blocks_that_do_not_fit_are_a_value_error():
    with pytest.raises(ValueError, match="does not hold"):
        check_lowering(torch.ops.aten.col2im.default, (torch.randn(18, 11), [6, 7], [3, 3], [1, 1], [1, 1], [2, 2]))
