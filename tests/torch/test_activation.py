"""The activations of CNNs and MLPs (ops/activation.py) against torch, odd shapes, float32,
float16 and bfloat16, with NaN and inf and values on the kinks."""
import math

import pytest
import torch

from .helpers import check_lowering

aten = torch.ops.aten
torch.manual_seed(0)

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def sample(*shape, dtype=torch.float32):
    """Random values spread over [-8, 8] with the kinks (-3, 0, 3, 6) and NaN/inf in front."""
    x = torch.randn(shape) * 4
    flat = x.view(-1)
    special = torch.tensor([-3.0, 0.0, 3.0, 6.0, -0.0, math.nan, math.inf, -math.inf, 25.0, -25.0])
    n = min(flat.numel(), special.numel())
    flat[:n] = special[:n]
    return x.to(dtype)


CASES = [
    (aten.hardtanh.default, ()), (aten.hardtanh.default, (0.0, 6.0)), (aten.hardtanh.default, (-0.5, 2.5)),
    (aten.relu6.default, ()),
    (aten.hardsigmoid.default, ()), (aten.hardswish.default, ()),
    (aten.leaky_relu.default, ()), (aten.leaky_relu.default, (0.2,)),
    (aten.elu.default, ()), (aten.elu.default, (0.5, 1.0507, 2.0)),
    (aten.softplus.default, ()), (aten.softplus.default, (2.0, 5.0)),
    (aten.mish.default, ()), (aten.sign.default, ()),
    (aten.sigmoid.default, ()), (aten.tanh.default, ()), (aten.expm1.default, ()),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op,extra", CASES, ids=lambda v: str(v) if not isinstance(v, tuple) else repr(v))
def test_activation_matches_torch(op, extra, dtype):
    check_lowering(op, (sample(3, 7, 5, dtype=dtype),) + extra)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_hardtanh_and_sign_of_integers(dtype):
    x = torch.randint(0, 12, (4, 9), dtype=dtype) - (0 if dtype == torch.uint8 else 5)
    check_lowering(aten.hardtanh.default, (x, 0.0, 6.0))
    check_lowering(aten.sign.default, (x,))


@pytest.mark.parametrize("op", [aten.leaky_relu.default, aten.elu.default, aten.mish.default,
                                aten.hardswish.default])
def test_integer_input_is_a_type_error(op):
    from .helpers import lower
    with pytest.raises(TypeError, match="floating"):
        lower(op, (torch.arange(6),))


def test_expm1_is_accurate_near_zero():
    """exp(x) - 1 would lose every digit here; torch's expm1 does not, nor does ours."""
    x = torch.tensor([1e-10, -3e-8, 1e-5, -1e-3, 0.0, -0.0, 0.3, -20.0, 88.0, 89.0, -104.0])
    check_lowering(aten.expm1.default, (x,), tol=(2e-7, 0))
    check_lowering(aten.expm1.default, (torch.arange(-4, 5),))          # integers: float32


def test_elu_is_accurate_near_zero():
    x = torch.tensor([-1e-9, -2e-6, -1e-4, -0.5, 1e-9])
    check_lowering(aten.elu.default, (x, 1.0, 1.0507, 1.0), tol=(2e-7, 0))


def test_every_activation_module_compiles_whole():
    """The activation layers of CNNs and transformers, as modules export them (ReLU6 is
    hardtanh, SELU is elu, CELU is expm1 and where): no op falls back, results match eager."""
    import warnings

    import torch.nn as nn

    import schedlang.torch as st
    layers = [nn.Hardtanh(-2.0, 2.0), nn.ReLU6(), nn.Hardswish(), nn.Hardsigmoid(), nn.LeakyReLU(0.1), nn.ELU(0.7),
              nn.SELU(), nn.CELU(1.3), nn.Mish(), nn.Sigmoid(), nn.Tanh(), nn.GELU(), nn.GELU("tanh"),
              nn.Softplus(1.5, 10.0), nn.SiLU(), nn.ReLU(), nn.Softshrink(0.7), nn.Hardshrink(0.7), nn.Softsign(),
              nn.Tanhshrink(), nn.LogSigmoid(), nn.PReLU(), nn.Threshold(0.1, 20.0), nn.RReLU(0.1, 0.3).eval()]

    class Each(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(layers)

        def forward(self, x):
            return tuple(f(x) for f in self.layers)
    x = sample(3, 7, 5).clamp(-30, 30)      # eager gelu(inf) is NaN (its vector erf form): finite
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Each(), (x,))
    assert compiled.fallback_ops() == {}
    with torch.no_grad():                     # PReLU has a parameter
        results = list(zip(layers, compiled(x), Each()(x)))
    for f, got, want in results:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, msg=lambda m: f"{f}: {m}")
