"""constant_pad_nd, embedding and index_select (ops/gather.py) against torch; indices out of
range never read out of bounds and raise IndexError as eager torch does."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import schedlang.torch as st

from ..helpers import CHECKED
from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _inference():
    """The compiled modules compute no gradients: call them (and eager) as inference does."""
    with torch.no_grad():
        yield


@pytest.mark.parametrize("shape,pad", [
    ((3, 5), [1, 2]), ((3, 5), [2, 0, 0, 3]), ((2, 3, 4, 5), [1, 1, 2, 2]),   # conv-style spatial pads
    ((4, 7), [-2, 1]), ((4, 7), [3, -3, -1, 0]), ((6,), [0, 0]), ((2, 3, 5), [1, 0, 0, 0, 2, 1]),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_constant_pad_nd_matches_torch(shape, pad, dtype):
    x = torch.randn(shape).to(dtype) if dtype != torch.bool else torch.rand(shape) > 0.5
    value = 1 if dtype == torch.bool else 0 if dtype == torch.int32 else -1.5
    check_lowering(aten.constant_pad_nd.default, (x, pad, value))
    check_lowering(aten.constant_pad_nd.default, (x, pad))


def test_constant_pad_nd_rejects_odd_pad():
    from .helpers import lower
    with pytest.raises(ValueError, match="even length"):
        lower(aten.constant_pad_nd.default, (torch.randn(3, 4), [1, 2, 3]))


@pytest.mark.parametrize("wdtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("idtype", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("ishape", [(7,), (2, 5), (3, 1, 4)])
def test_embedding_matches_torch(wdtype, idtype, ishape):
    weight = torch.randn(11, 6).to(wdtype)
    indices = torch.randint(0, 11, ishape, dtype=idtype)
    indices.view(-1)[0] = 10                                 # the last row too
    check_lowering(aten.embedding.default, (weight, indices), tol=(0, 0))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select_matches_torch(dim):
    x = torch.randn(5, 6, 7)
    index = torch.tensor([4, 0, 0, 3])
    check_lowering(aten.index_select.default, (x, dim, index), tol=(0, 0))
    check_lowering(aten.index_select.default, (x, dim, torch.tensor(2)), tol=(0, 0))


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(13, 8)

    def forward(self, ids):
        return self.embed(ids) * 2.0


@pytest.mark.parametrize("bad", [13, -1, 10**12])
def test_embedding_out_of_range_raises_index_error_without_reading_out_of_bounds(bad):
    """The compiled module (a bounds-checked build: an access outside a buffer raises
    another IndexError) clamps the read, then raises eager torch's error for the index."""
    module = Embed().eval()
    ids = torch.randint(0, 13, (2, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, (ids,), target=CHECKED)
    torch.testing.assert_close(compiled(ids), module(ids), rtol=0, atol=0)
    wrong = ids.clone()
    wrong[1, 3] = bad
    with pytest.raises(IndexError):
        module(wrong)
    with pytest.raises(IndexError, match=r"embedding: index out of range \(the table has 13 rows"):
        compiled(wrong)
    torch.testing.assert_close(compiled(ids), module(ids), rtol=0, atol=0)   # still usable


def test_pad_in_a_module():
    class Pad(torch.nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 2, 0, 1), value=0.25).relu()
    x = torch.randn(2, 3, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Pad(), (x,))
    torch.testing.assert_close(compiled(x), Pad()(x))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_gather_matches_torch(dim, dtype):
    x = (torch.randn(4, 5, 6) * 10).to(dtype)
    shape = [3, 4, 5]
    index = torch.randint(0, x.shape[dim], shape)
    check_lowering(aten.gather.default, (x, dim, index), tol=(0, 0))


@pytest.mark.parametrize("indices", [
    [torch.tensor([3, -1, 0])],                                   # x[idx], negative from the end
    [None, torch.tensor([[0, 4], [-5, 2]])],                      # x[:, idx2d]
    [None, torch.tensor([0, 1]), None, torch.tensor([1, 2])],     # apart: broadcast dims first
    [None, torch.tensor([0, 2]), torch.tensor([[1], [3]])],       # adjacent: in place, broadcast
    [torch.tensor(2), None, torch.tensor([0, 1, 2], dtype=torch.int32)],
])
def test_index_tensor_matches_torch(indices):
    x = torch.randn(4, 5, 6, 7)
    check_lowering(aten.index.Tensor, (x, indices), tol=(0, 0))


class Gathers(torch.nn.Module):
    def forward(self, x, rows, cols):
        return x[rows] * 2, torch.gather(x, 1, cols[:, None].expand(-1, 3))


def test_gather_and_index_out_of_range_raise_torchs_errors():
    module = Gathers().eval()
    x, rows, cols = torch.randn(6, 5), torch.tensor([0, 5, -6]), torch.tensor([1, 4, 0])
    compiled = st.compile(module, (x, rows, cols), target=CHECKED)
    assert compiled.fallback_ops() == {}
    for g, w in zip(compiled(x, rows, cols), module(x, rows, cols)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 6"):
        compiled(x, torch.tensor([0, 6, 1]), cols)
    with pytest.raises(RuntimeError, match="gather: index out of bounds for dimension 1 with size 5"):
        compiled(x, rows, torch.tensor([1, 5, 0]))
