"""The elementwise ops of torch/ops/elementwise_math.py against torch: special values (nan,
+-inf, -0.0), integer and bool inputs, float16, broadcasting and Python scalars; integer fmod
by a tensor stays in torch (its zero divisor raises there), by a nonzero number it does not;
the new ops of this round on the cuda target, emulated."""
import math

import pytest
import torch
import torch.nn.functional as F

from .helpers import check_lowering, lower

aten = torch.ops.aten
torch.manual_seed(0)
SPECIAL = torch.tensor([0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e30, -1e-30, 0.75])


@pytest.mark.parametrize("op", ["asin", "acos", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "tan",
                                "log2", "log10", "exp2"])
def test_unary_float_ops(op):
    fn = getattr(aten, op).default
    inside = torch.rand(5, 7) * 1.8 - 0.9                   # in every domain but acosh's
    check_lowering(fn, (inside + 1.2 if op == "acosh" else inside,), tol=(1e-5, 1e-5))
    check_lowering(fn, (torch.tensor([0, 1, 2], dtype=torch.int32),), tol=(1e-5, 1e-5))   # -> float32
    check_lowering(fn, (inside.double(),))


@pytest.mark.parametrize("op", ["atan2", "hypot", "copysign", "logaddexp"])
def test_binary_float_ops(op):
    fn = aten.copysign.Tensor if op == "copysign" else getattr(aten, op).default
    a = torch.randn(4, 1, 6) * 3
    b = torch.randn(5, 6)
    check_lowering(fn, (a, b), tol=(1e-5, 1e-5))
    s = SPECIAL[:, None]
    check_lowering(fn, (s, SPECIAL[None, :]), tol=(1e-5, 1e-5))
    check_lowering(fn, (a.half(), b.half()))


def test_fmod_floats_and_integers():
    check_lowering(aten.fmod.Tensor, (torch.randn(6, 5) * 7, torch.randn(5) * 2 + 0.1))
    check_lowering(aten.fmod.Scalar, (torch.randn(6, 5) * 7, -1.5))
    check_lowering(aten.fmod.Tensor, (SPECIAL, SPECIAL.flip(0)))
    check_lowering(aten.fmod.Scalar, (torch.arange(-7, 8), 3))       # what torch.roll's indices use
    check_lowering(aten.fmod.Scalar, (torch.arange(-7, 8, dtype=torch.int32), -4))
    with pytest.raises(Exception, match="fmod"):
        lower(aten.fmod.Tensor, (torch.tensor([7, -7]), torch.tensor([2, 0])))


@pytest.mark.parametrize("op", ["isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit"])
def test_classifications(op):
    fn = getattr(aten, op).default
    check_lowering(fn, (SPECIAL,))
    check_lowering(fn, (SPECIAL.half(),))
    check_lowering(fn, (torch.tensor([-3, 0, 5], dtype=torch.int64),))
    check_lowering(fn, (torch.tensor([True, False]),))


def test_nan_to_num():
    check_lowering(aten.nan_to_num.default, (SPECIAL,))
    check_lowering(aten.nan_to_num.default, (SPECIAL, 2.0, 100.0, -100.0))
    check_lowering(aten.nan_to_num.default, (SPECIAL.half(),))
    check_lowering(aten.nan_to_num.default, (torch.tensor([1, 2]),))


@pytest.mark.parametrize("op", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise(op):
    fn = getattr(aten, op)
    a = torch.randint(-100, 100, (4, 5), dtype=torch.int32)
    check_lowering(fn.Tensor, (a, torch.randint(-100, 100, (5,), dtype=torch.int32)))
    check_lowering(fn.Scalar, (a, 6))
    check_lowering(fn.Tensor, (torch.rand(3, 4) > 0.5, torch.rand(4) > 0.5))
    with pytest.raises(TypeError, match=op):
        lower(fn.Tensor, (torch.randn(3), torch.randn(3)))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("op", ["bitwise_left_shift", "bitwise_right_shift"])
def test_shifts(op, dtype):
    """Amounts past the bit width and negative ones give torch's results (0; the sign fill of a
    negative value shifted right), the scalar forms and the `<<`/`>>` operators too."""
    fn = getattr(aten, op)
    bits = torch.iinfo(dtype).bits
    low = 0 if dtype == torch.uint8 else -100
    a = torch.randint(low, 100, (6, 9), dtype=dtype)
    amounts = torch.tensor([0, 1, 3, bits - 1, bits, bits + 3, 2 * bits - 1, -1 if low else 2 * bits, 5], dtype=dtype)
    check_lowering(fn.Tensor, (a, amounts))
    check_lowering(fn.Tensor_Scalar, (a, 2))
    check_lowering(fn.Scalar_Tensor, (3, amounts))
    dunder = aten.__lshift__ if op == "bitwise_left_shift" else aten.__rshift__
    check_lowering(dunder.Tensor, (a, amounts))
    check_lowering(dunder.Scalar, (a, 1))
    with pytest.raises(TypeError, match=op):
        lower(fn.Tensor, (torch.randn(3), torch.randn(3)))


@pytest.mark.parametrize("decimals", [0, 1, 3, -1, -2])
def test_round_to_decimals(decimals):
    x = torch.tensor([0.125, 0.135, -2.55, 1234.5678, 0.5, 1.5, -0.05, 15.0, 25.0, math.nan])
    check_lowering(aten.round.decimals, (torch.cat([x, torch.randn(20) * 100]),), {"decimals": decimals})


class _NewOps(torch.nn.Module):
    """This file's ops and the other newly lowered ones (group norm, normalize, flip, repeat,
    cumsum, cdist) in one module: one NVRTC build."""

    def forward(self, x, y, i):
        inside = x.clamp(-0.9, 0.9)
        a = torch.asin(inside) + torch.acos(inside) + torch.atan(x) + torch.sinh(x) + torch.cosh(x) + torch.tan(x * 0.3)
        b = torch.asinh(x) + torch.atanh(inside) + torch.acosh(x.abs() + 1) + torch.log2(x.abs() + 1) + torch.exp2(x)
        c = torch.atan2(x, y) + torch.hypot(x, y) + torch.copysign(x, y) + torch.logaddexp(x, y) + torch.fmod(x, 0.7)
        d = torch.nan_to_num(x / y) + torch.isnan(x).float() + torch.signbit(y).float() + x.round(decimals=1)
        e = (i & 6) + (i | 1) + (i ^ 3) + torch.fmod(i, 4) + (i << (i & 7)) + (i >> 2)
        g = F.group_norm(x[None, :, :, None], 2)[0, :, :, 0] + F.normalize(x, dim=-1)
        return a + b + c + d + g + torch.flip(x, (0,)) + x.repeat(1, 1), e, torch.cumsum(x, -1), torch.cdist(x, y)


def test_cuda_target_emulated():
    pytest.importorskip("cuda.bindings")
    from .test_cuda_emulate import check_emulated, compile_cuda
    x, y, i = torch.randn(4, 6), torch.randn(4, 6), torch.randint(-9, 9, (4, 6))
    module = _NewOps().eval()
    check_emulated(compile_cuda(module, (x, y, i)), module, (x, y, i), engines=("shim", "simt"), tol=1e-4)
