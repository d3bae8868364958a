"""Elementwise lowerings against torch, one op at a time (ops/elementwise.py)."""
import pytest
import torch

from schedlang.torch.ops import Unsupported, lookup

from .helpers import check_lowering, lower

aten = torch.ops.aten
torch.manual_seed(0)


def rnd(*shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(0 if dtype == torch.uint8 else -20, 20, shape, dtype=dtype)


@pytest.mark.parametrize("op", [aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor])
@pytest.mark.parametrize("shapes", [((3, 5), (3, 5)), ((2, 1, 7), (3, 1)), ((4,), ()), ((), ())])
def test_binary_broadcast(op, shapes):
    check_lowering(op, (rnd(*shapes[0]), rnd(*shapes[1])))


@pytest.mark.parametrize("a,b", [(torch.int32, torch.float32), (torch.int64, torch.int32),
                                 (torch.float16, torch.float32), (torch.bool, torch.int8),
                                 (torch.uint8, torch.int8)])
def test_binary_promotion(a, b):
    x, y = rnd(5, 3, dtype=a), rnd(3, dtype=b)
    check_lowering(aten.add.Tensor, (x, y))
    check_lowering(aten.mul.Tensor, (y, x))


def test_scalar_overloads_and_alpha():
    x, xi = rnd(4, 5), rnd(4, 5, dtype=torch.int32)
    check_lowering(aten.add.Tensor, (x, rnd(5)), dict(alpha=2.5))
    check_lowering(aten.sub.Tensor, (xi, rnd(5, dtype=torch.int32)), dict(alpha=3))
    check_lowering(aten.add.Tensor, (xi, 2.5))                 # int tensor + float scalar: float32
    check_lowering(aten.mul.Tensor, (xi, 3))                   # stays int32
    check_lowering(aten.div.Tensor, (xi, 2))                   # true division: float32
    check_lowering(aten.mul.Tensor, (rnd(3, dtype=torch.float16), 1.5))
    check_lowering(aten.rsub.Scalar, (x, 1.0))


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_div_rounding_mode(mode, dtype):
    a = rnd(6, 7, dtype=dtype) * 3
    b = rnd(7, dtype=dtype)
    b = torch.where(b == 0, torch.ones_like(b), b)
    check_lowering(aten.div.Tensor_mode, (a, b), dict(rounding_mode=mode))
    check_lowering(aten.div.Tensor_mode, (a, -3), dict(rounding_mode=mode))


def test_div_floor_float_edge_cases():
    a = torch.tensor([7.0, -7.0, 7.0, -7.0, 0.0, -0.0, 1.0, 5.3, -5.3])
    b = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0, 0.1, 0.1])
    check_lowering(aten.div.Tensor_mode, (a, b), dict(rounding_mode="floor"))
    check_lowering(aten.remainder.Tensor, (a[:6], b[:6]))


@pytest.mark.parametrize("op", [aten.neg.default, aten.abs.default, aten.exp.default, aten.tanh.default,
                                aten.erf.default, aten.sigmoid.default, aten.relu.default, aten.silu.default,
                                aten.reciprocal.default, aten.floor.default])
def test_unary(op):
    check_lowering(op, (rnd(3, 17),))


def test_unary_domain_and_int_inputs():
    pos = torch.rand(2, 9) + 0.1
    for op in (aten.log.default, aten.sqrt.default, aten.rsqrt.default):
        check_lowering(op, (pos,))
    check_lowering(aten.exp.default, (rnd(5, dtype=torch.int32),))      # int -> float32, as torch
    check_lowering(aten.abs.default, (rnd(5, dtype=torch.int64),))
    check_lowering(aten.relu.default, (torch.tensor([1.0, -2.0, float("nan")]),))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    check_lowering(aten.gelu.default, (rnd(4, 33),), dict(approximate=approximate))
    check_lowering(aten.gelu.default, (rnd(4, 3, dtype=torch.float16),), dict(approximate=approximate))


def test_silu_stages_as_the_seed():
    made, outs = lower(aten.silu.default, (rnd(2, 3),), node="silu")
    from schedlang.tensor.graph import post_order
    names = [op.name for op in post_order([outs[0].op])]
    assert names == ["arg0", "silu_neg", "silu_exp", "silu_denom", "silu_sigmoid", "silu"]
    check_lowering(aten.silu.default, (rnd(3, 5, dtype=torch.float16),))


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -1, -0.5, 1.7, 0])
def test_pow_tensor_scalar(exponent):
    check_lowering(aten.pow.Tensor_Scalar, (torch.rand(3, 4) + 0.5, exponent))


def test_pow_other_overloads():
    check_lowering(aten.pow.Tensor_Scalar, (rnd(5, dtype=torch.int32), 3))
    check_lowering(aten.pow.Tensor_Tensor, (torch.rand(3, 4) + 0.5, rnd(4)))
    check_lowering(aten.pow.Scalar, (2.0, rnd(3, 4)))
    with pytest.raises(Unsupported):
        lower(aten.pow.Tensor_Tensor, (rnd(3, dtype=torch.int32), rnd(3, dtype=torch.int32)))


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op):
    a = rnd(4, 6, dtype=torch.int32).float()
    b = rnd(6, dtype=torch.int32)
    check_lowering(getattr(aten, op).Tensor, (a, b))
    check_lowering(getattr(aten, op).Scalar, (b, 2.5))


def test_logical_and_where():
    a, b = rnd(3, 4, dtype=torch.bool), rnd(4, dtype=torch.int32)
    check_lowering(aten.logical_and.default, (a, b))
    check_lowering(aten.logical_or.default, (b, a))
    check_lowering(aten.logical_xor.default, (a, rnd(3, 4)))
    check_lowering(aten.logical_not.default, (b,))
    check_lowering(aten.where.self, (a, rnd(3, 4), rnd(4, dtype=torch.float64)))
    check_lowering(aten.where.self, (a, rnd(4, dtype=torch.int32), rnd(3, 1, dtype=torch.int64)))


def test_clamp():
    x = rnd(5, 6)
    check_lowering(aten.clamp.default, (x, -0.5, 0.5))
    check_lowering(aten.clamp.default, (x, None, 0.1))
    check_lowering(aten.clamp.default, (rnd(5, dtype=torch.int32), -3, 4))
    check_lowering(aten.clamp.Tensor, (x, rnd(6), None))
    check_lowering(aten.clamp_min.default, (x, 0.0))
    check_lowering(aten.clamp_max.default, (x, 0.0))
    check_lowering(aten.clamp.default, (torch.tensor([float("nan"), 3.0]), 0.0, 1.0))
    check_lowering(aten.maximum.default, (torch.tensor([float("nan"), 3.0, 1.0]), torch.tensor([0.0, float("nan"), 2.0])))


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.int32), (torch.float32, torch.float16),
                                     (torch.int64, torch.float32), (torch.float32, torch.bool),
                                     (torch.bool, torch.float32), (torch.int32, torch.int8)])
def test_casts(src, dst):
    x = (rnd(4, 5) * 10).to(src) if src.is_floating_point else rnd(4, 5, dtype=src)
    check_lowering(aten._to_copy.default, (x,), dict(dtype=dst))
    check_lowering(torch.ops.prims.convert_element_type.default, (x, dst))


def test_every_listed_op_is_registered():
    for name in ("aten.add.Scalar", "aten.div.Scalar_mode", "aten.to.dtype", "aten.clamp_min.Tensor",
                 "aten.where.ScalarOther"):
        assert lookup(name) is not None, name


def test_creation():
    check_lowering(aten.full.default, ([3, 4], 1.5), dict(dtype=torch.float32))
    check_lowering(aten.full.default, ([2], 7))                       # an int fill: int64
    check_lowering(aten.full.default, ([], True))
    check_lowering(aten.full_like.default, (rnd(2, 3), 0))
    check_lowering(aten.full_like.default, (rnd(2, 3), 2.7), dict(dtype=torch.int32))
    check_lowering(aten.scalar_tensor.default, (3.5,), dict(dtype=torch.float64))
