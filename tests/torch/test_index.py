"""Index-map lowerings against torch (ops/index.py)."""
import pytest
import torch

from schedlang.tensor.classify import INDEX_MAP, classify

from .helpers import check_lowering, lower

aten = torch.ops.aten
x = torch.randn(2, 3, 4)


@pytest.mark.parametrize("shape", [[6, 4], [4, -1], [2, 1, 12], [24], [-1], [3, 8], [1, 2, 3, 4]])
def test_view(shape):
    check_lowering(aten.view.default, (x, shape))


def test_reshape_and_unsafe_view():
    check_lowering(aten.reshape.default, (torch.randn(5, 7), [7, 5]))
    check_lowering(aten._unsafe_view.default, (torch.randn(3, 5, 1), [15]))
    check_lowering(aten.view.default, (torch.randn(()), [1, 1]))


def test_layout():
    check_lowering(aten.permute.default, (x, [2, 0, 1]))
    check_lowering(aten.permute.default, (x, [-1, -3, -2]))
    check_lowering(aten.transpose.int, (x, -1, 0))
    check_lowering(aten.t.default, (torch.randn(3, 5),))
    check_lowering(aten.t.default, (torch.randn(5),))
    check_lowering(aten.expand.default, (torch.randn(3, 1), [2, 3, 5]))
    check_lowering(aten.expand.default, (torch.randn(3, 1), [-1, 4]))
    check_lowering(aten.unsqueeze.default, (x, -1))
    check_lowering(aten.unsqueeze.default, (torch.randn(()), 0))
    check_lowering(aten.squeeze.dim, (torch.randn(3, 1, 2), 1))
    check_lowering(aten.squeeze.dims, (torch.randn(1, 3, 1, 2), [0, -2]))
    check_lowering(aten.squeeze.default, (torch.randn(1, 3, 1),))


def test_repeat():
    check_lowering(aten.repeat.default, (x, [2, 1, 3]))
    check_lowering(aten.repeat.default, (x, [2, 1, 1, 2]))          # a new leading dim
    check_lowering(aten.repeat.default, (torch.randn(1, 3), [4, 2]))
    check_lowering(aten.repeat.default, (torch.tensor(1.5), [3]))
    with pytest.raises(ValueError, match="repeat"):
        check_lowering(aten.repeat.default, (x, [2, 2]))


def test_diagonal():
    a = torch.randn(4, 6, 3)
    check_lowering(aten.diagonal.default, (a,))
    check_lowering(aten.diagonal.default, (a, 2, 0, 1))
    check_lowering(aten.diagonal.default, (a, -1, 1, 0))
    check_lowering(aten.diagonal.default, (a, 1, -1, 0))
    with pytest.raises(ValueError, match="dim1 and dim2"):
        check_lowering(aten.diagonal.default, (a, 0, 1, -2))


def test_flip():
    check_lowering(aten.flip.default, (x, [0, -1]))
    check_lowering(aten.flip.default, (x, [1]))
    check_lowering(aten.flip.default, (x, []))
    check_lowering(aten.flip.default, (torch.arange(7), [0]))
    with pytest.raises(ValueError, match="twice"):
        check_lowering(aten.flip.default, (x, [1, -2]))


@pytest.mark.parametrize("args", [(-1, 1, 100), (1, -2, None, 2), (0, None, None), (2, 1, 3), (2, -3, 3)])
def test_slice(args):
    check_lowering(aten.slice.Tensor, (x, *args))


def test_split_chunk_select():
    check_lowering(aten.split_with_sizes.default, (x, [1, 3], -1))
    check_lowering(aten.split.Tensor, (x, 3, 2))
    check_lowering(aten.chunk.default, (torch.randn(5, 7), 3, 1))
    check_lowering(aten.chunk.default, (torch.randn(5, 7), 2, 0))
    check_lowering(aten.select.int, (x, 1, -1))
    check_lowering(aten.select.int, (x, 0, 1))


def test_cat():
    check_lowering(aten.cat.default, ([x, torch.randn(2, 5, 4)], 1))
    check_lowering(aten.cat.default, ([torch.randn(3), torch.randn(1), torch.randn(4)], -1))
    check_lowering(aten.cat.default, ([torch.randn(2, 2, dtype=torch.float16)] * 2,))


@pytest.mark.parametrize("dtypes,want", [
    ((torch.float32, torch.float16), torch.float32),       # a float16 slice beside float32 rotary halves
    ((torch.float16, torch.bfloat16), torch.float32),
    ((torch.int32, torch.bool), torch.int32),
    ((torch.uint8, torch.int8), torch.int16),
    ((torch.float16, torch.int64, torch.float64), torch.float64),
])
def test_cat_promotes_mixed_dtypes_as_torch(dtypes, want):
    parts = [(torch.randn(2, 3) * 5).abs().to(d) for d in dtypes]
    assert torch.cat(parts, 1).dtype == want
    check_lowering(aten.cat.default, (parts, 1))


def test_an_empty_cat_operand_that_widens_the_result_stays_in_torch():
    """torch.cat([x32, torch.empty(0, float64)]) is float64: dropping the empty operand
    (empty_values.py) would change the dtype, so that cat runs in torch, correctly."""
    import schedlang.torch as slt

    class Cat(torch.nn.Module):
        def forward(self, a, e, h):
            return torch.cat([a, e], 1), torch.cat([h, a], 1)
    args = (torch.randn(2, 3), torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.float16))
    with torch.no_grad():
        compiled = slt.compile(Cat(), args)
        for got, want in zip(compiled(*args), Cat()(*args)):
            assert got.dtype == want.dtype and torch.equal(got, want)
    assert compiled.fallback_ops() == {"cat": 1}      # the float16 empty one is dropped: float32 either way


def test_identity_maps_and_classification():
    for op in (aten.clone.default, aten.alias.default):
        check_lowering(op, (x,))
    made, outs = lower(aten.slice.Tensor, (x, 2, 1, 3))
    assert classify(outs[0].op) == INDEX_MAP
    made, outs = lower(aten.view.default, (x, [6, 4]))
    assert classify(outs[0].op) == INDEX_MAP


def test_empty_slice_is_unsupported():
    from schedlang.torch.ops import Unsupported
    with pytest.raises(Unsupported):
        lower(aten.slice.Tensor, (x, 2, 3, 1))


def test_bad_arguments():
    with pytest.raises(ValueError, match="only one dimension can be -1"):
        lower(aten.view.default, (x, [-1, -1]))
    with pytest.raises(ValueError, match="invalid"):
        lower(aten.view.default, (x, [5, 5]))
    with pytest.raises(IndexError, match="out of range"):
        lower(aten.permute.default, (x, [0, 1, 3]))
    with pytest.raises(ValueError, match="cannot expand"):
        lower(aten.expand.default, (torch.randn(3, 2), [3, 4]))


@pytest.mark.parametrize("args", [(1, 3, 2), (0, 2, 2), (-1, 4, 1), (2, 5, 3), (1, 7, 7), (1, 1, 4)], ids=repr)
def test_tensor_unfold_windows(args):
    """Tensor.unfold (aten.unfold: sliding windows as a new last dim; Dynamo's graphs keep it)."""
    check_lowering(torch.ops.aten.unfold.default, (torch.randn(2, 7, 5), *args))
