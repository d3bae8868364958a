"""arange (ops/creation.py) and any/all (ops/reduce.py) against torch."""
import pytest
import torch

from .helpers import check_lowering, lower, run_lowered

aten = torch.ops.aten


@pytest.mark.parametrize("op,args,kwargs", [
    (aten.arange.start_step, (0, 7), {}),                                 # int64, what SDPA's causal mask uses
    (aten.arange.start_step, (0, 7), dict(dtype=torch.float32)),          # rotary positions
    (aten.arange.start_step, (3, 40, 4), {}),
    (aten.arange.start_step, (10, -5, -3), dict(dtype=torch.int32)),
    (aten.arange.start_step, (0, 4000, 3), dict(dtype=torch.float16)),   # past float16's exact integers
    (aten.arange.start_step, (0, 37), dict(dtype=torch.bfloat16)),
    (aten.arange.start, (2, 9), {}),
    (aten.arange.default, (11,), dict(dtype=torch.float32)),
    (aten.arange.default, (5.5,), {}),
])
def test_arange_matches_torch(op, args, kwargs):
    """Whole steps: exactly torch's values."""
    check_lowering(op, args, kwargs, tol=(0, 0))


@pytest.mark.parametrize("args,dtype", [((0.5, 10, 0.7), None), ((-1.0, 1.0, 0.1), torch.float64),
                                        ((-3.0, 2.0, 0.37), torch.float32)])
def test_arange_fractional_step(args, dtype):
    """A fractional step: within a few ulps of torch's (torch's vector kernel adds the step
    to a per-vector base, so its last bits depend on the CPU's vector width)."""
    want = torch.arange(*args, dtype=dtype)
    eps = torch.finfo(want.dtype).eps * float(want.abs().max())
    check_lowering(aten.arange.start_step, args, dict(dtype=dtype), tol=(0, 4 * eps))


def test_arange_with_inconsistent_step_is_a_value_error():
    with pytest.raises(ValueError, match="inconsistent with step sign"):
        lower(aten.arange.start_step, (0, 5, -1))


def _sparse(shape, dtype):
    """Mostly zeros, so that any and all both see true and false rows."""
    x = (torch.rand(shape) < 0.15) * torch.randint(1, 5, shape)
    x[0] = 1                                   # a row where all is true
    return x.to(dtype)


DTYPES = [torch.bool, torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", ["any", "all"])
def test_any_all_match_torch(name, dtype):
    x = _sparse((4, 3, 5), dtype)
    ops = getattr(aten, name)
    check_lowering(ops.dim, (x, -1, True))
    check_lowering(ops.dim, (x, 1))
    check_lowering(ops.dims, (x, [0, 2]))
    check_lowering(ops.default, (x,))


def test_any_sees_nan_as_true():
    x = torch.zeros(3, 4)
    x[1, 2] = float("nan")
    check_lowering(aten.any.dim, (x, 1))
    check_lowering(aten.all.default, (x + 1,))


def test_arange_any_in_a_causal_attention_module():
    """torch.export writes the causal mask of SDPA with arange and its safe-softmax guard
    with any: the module is compiled as one part, and matches eager."""
    import warnings

    import schedlang.torch as st

    class Causal(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    q, k, v = (torch.randn(2, 3, 9, 8) for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Causal(), (q, k, v))
    assert compiled.fallback_ops() == {} and len(compiled.program.parts) == 1
    torch.testing.assert_close(compiled(q, k, v), Causal()(q, k, v), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_safe_softmax_matches_torch(dtype):
    x = torch.randn(3, 4, 6).to(dtype)
    x[0, 1] = float("-inf")                      # a row masked entirely: zeros, not NaN
    x[1, 2, :3] = float("-inf")
    check_lowering(aten._safe_softmax.default, (x, -1))
    check_lowering(aten._safe_softmax.default, (x, 1))
    check_lowering(aten._safe_softmax.default, (x, -1), dict(dtype=torch.float32))
