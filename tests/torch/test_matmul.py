"""mm, bmm, addmm, linear, matmul, mv and dot lowerings (schedlang/torch/ops/matmul.py)
against torch: odd sizes, float16 (float32 accumulation), 1-d operands, broadcast batches."""
import pytest
import torch

from schedlang.torch.ops.registry import Unsupported

from .helpers import check_lowering, lower, requires_bfloat16

aten = torch.ops.aten
torch.manual_seed(0)


def r(*shape, dtype=torch.float32):
    return torch.randn(shape, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_mm(dtype):
    check_lowering(aten.mm.default, [r(7, 13, dtype=dtype), r(13, 5, dtype=dtype)])


def test_mm_vectors_and_one_by_one():
    check_lowering(aten.mm.default, [r(1, 13), r(13, 1)])
    check_lowering(aten.mm.default, [r(7, 1), r(1, 9)])


def test_bmm():
    check_lowering(aten.bmm.default, [r(3, 7, 13), r(3, 13, 5)])
    check_lowering(aten.bmm.default, [r(2, 5, 8, dtype=torch.float16), r(2, 8, 5, dtype=torch.float16)])


@pytest.mark.parametrize("bias,kwargs", [
    (r(5), {}), (r(7, 5), {"beta": 0.5, "alpha": 2}), (r(7, 1), {"alpha": -1}), (r(1, 5), {}),
    (torch.full((7, 5), float("nan")), {"beta": 0}),     # beta = 0 ignores the input, NaN too
])
def test_addmm(bias, kwargs):
    check_lowering(aten.addmm.default, [bias, r(7, 13), r(13, 5)], kwargs)


def test_addmm_half():
    h = torch.float16
    check_lowering(aten.addmm.default, [r(5, dtype=h), r(7, 13, dtype=h), r(13, 5, dtype=h)])


@pytest.mark.parametrize("x,bias", [
    (r(2, 3, 13), True), (r(7, 13), False), (r(13), True), (r(2, 3, 13, dtype=torch.float16), True),
])
def test_linear(x, bias):
    w = r(5, 13, dtype=x.dtype)
    check_lowering(aten.linear.default, [x, w, r(5, dtype=x.dtype) if bias else None])


@pytest.mark.parametrize("a,b", [
    (r(7, 13), r(13, 5)), (r(2, 4, 7, 13), r(2, 4, 13, 5)),   # attention-scores shapes
    (r(2, 1, 7, 13), r(3, 13, 5)),                             # batch dims broadcast
    (r(7, 13), r(3, 13, 5)), (r(2, 7, 13), r(13, 5)),
    (r(13), r(13)), (r(7, 13), r(13)), (r(13), r(13, 5)), (r(13), r(2, 13, 5)), (r(2, 3, 7, 13), r(13)),
    (r(2, 7, 13, dtype=torch.float16), r(2, 13, 5, dtype=torch.float16)),
])
def test_matmul(a, b):
    check_lowering(aten.matmul.default, [a, b])


def test_mv_dot():
    check_lowering(aten.mv.default, [r(7, 13), r(13)])
    check_lowering(aten.dot.default, [r(13), r(13)])


@pytest.mark.parametrize("op,args", [
    (aten.mm.default, [torch.ones(2, 3, dtype=torch.int32), torch.ones(3, 2, dtype=torch.int32)]),
    (aten.mm.default, [r(2, 3), r(3, 2, dtype=torch.float16)]),
    (aten.addmm.default, [r(2), r(2, 3), r(3, 2)]),
])
def test_unsupported(op, args):
    kwargs = {"beta": torch.tensor(1.0)} if op is aten.addmm.default else {}
    with pytest.raises(Unsupported):
        lower(op, args, kwargs)


def test_shape_errors():
    with pytest.raises(ValueError, match="contracted"):
        lower(aten.mm.default, [r(2, 3), r(4, 2)])
    with pytest.raises(ValueError, match="broadcast"):
        lower(aten.matmul.default, [r(2, 2, 3), r(3, 3, 2)])


def test_stage_names_with_bias():
    _, (out,) = lower(aten.linear.default, [r(7, 13), r(5, 13), r(5)], node="linear")
    assert out.name == "linear"
    assert "linear_mm" in {t.name for t in out.op.input_tensors}


@requires_bfloat16
def test_bfloat16():
    bf = torch.bfloat16
    check_lowering(aten.mm.default, [r(7, 13, dtype=bf), r(13, 5, dtype=bf)])
    check_lowering(aten.addmm.default, [r(5, dtype=bf), r(7, 13, dtype=bf), r(13, 5, dtype=bf)])
    check_lowering(aten.linear.default, [r(3, 7, 13, dtype=bf), r(5, 13, dtype=bf), r(5, dtype=bf)])
    check_lowering(aten.matmul.default, [r(3, 7, 13, dtype=bf), r(13, 5, dtype=bf)])
