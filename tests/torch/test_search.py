"""searchsorted and bucketize (torch/ops/search.py) against eager torch: left and right, a 1-d
sequence and one per row, a sorter, int32 results, integers, scalars, and the values and
sequences where a binary search is not a count (NaN values, NaNs in the sequence, an unsorted
one), bounds-checked."""
import warnings

import pytest
import torch

import schedlang.torch as st

from .helpers import check_lowering

aten = torch.ops.aten
g = torch.Generator().manual_seed(0)
NAN, INF = float("nan"), float("inf")
VALUES = torch.cat([torch.randn(20, generator=g) * 2, torch.tensor([NAN, INF, -INF, -1.0, 0.0, 0.0, 1.0])])
SEQUENCES = {
    "sorted": torch.tensor([-1.0, 0.0, 0.0, 0.5, 1.0, 2.5]),
    "one": torch.tensor([0.0]),
    "nan_last": torch.tensor([-1.0, 0.0, NAN]),
    "unsorted": torch.tensor([3.0, -1.0, 2.0, 0.0, 1.0, -2.0, 0.5]),
    "long": torch.sort(torch.randn(37, generator=g)).values,
}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize_match_torch(name, right):
    seq = SEQUENCES[name]
    check_lowering(aten.searchsorted.Tensor, (seq, VALUES.view(3, 9)), {"right": right})
    check_lowering(aten.bucketize.Tensor, (VALUES, seq), {"right": right, "out_int32": True})
    check_lowering(aten.searchsorted.Scalar, (seq, 0.0), {"side": "right" if right else "left"})


def test_per_row_sequences_a_sorter_and_integers():
    rows = torch.sort(torch.randn(4, 9, generator=g), dim=1).values
    check_lowering(aten.searchsorted.Tensor, (rows, torch.randn(4, 5, generator=g)))
    unsorted = torch.randn(11, generator=g)
    check_lowering(aten.searchsorted.Tensor, (unsorted, VALUES), {"sorter": torch.argsort(unsorted)})
    ints = torch.tensor([-3, 0, 2, 2, 7], dtype=torch.int64)
    check_lowering(aten.bucketize.Tensor, (torch.randint(-5, 9, (6, 4), generator=g), ints), {"right": True})


def test_position_buckets_compile_whole():
    class Buckets(torch.nn.Module):
        def forward(self, x, boundaries):
            return torch.bucketize(x, boundaries) * 2 + torch.searchsorted(boundaries, x, side="right")

    x, b = torch.randn(3, 8), torch.linspace(-1, 1, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Buckets(), (x, b))
    torch.testing.assert_close(compiled(x, b), Buckets()(x, b))
