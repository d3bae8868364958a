"""Torch's type promotion (ops/promote.py) against torch.result_type."""
import pytest
import torch

import schedlang as sl
from schedlang.torch.dtypes import to_sl, to_torch
from schedlang.torch.ops.promote import compute_dtype, float_result, result_type

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.float32,
          torch.float64]


def _operand(kind, dtype):
    if kind == "dim":
        return sl.placeholder((3,), to_sl(dtype)), torch.zeros(3, dtype=dtype)
    return sl.placeholder((), to_sl(dtype)), torch.zeros((), dtype=dtype)


@pytest.mark.parametrize("ka", ["dim", "zero"])
@pytest.mark.parametrize("kb", ["dim", "zero"])
def test_tensor_tensor(ka, kb):
    for da in DTYPES:
        for db in DTYPES:
            (a, ta), (b, tb) = _operand(ka, da), _operand(kb, db)
            assert to_torch(result_type(a, b)) == torch.result_type(ta, tb), (ka, da, kb, db)


@pytest.mark.parametrize("scalar", [True, 2, 2.5, -3])
@pytest.mark.parametrize("kind", ["dim", "zero"])
def test_tensor_scalar(scalar, kind):
    for d in DTYPES:
        a, ta = _operand(kind, d)
        assert to_torch(result_type(a, scalar)) == torch.result_type(ta, scalar), (d, scalar)
        assert to_torch(result_type(scalar, a)) == torch.result_type(scalar, ta), (d, scalar)


def test_three_operands_and_helpers():
    x = sl.placeholder((3,), "int32")
    z = sl.placeholder((), "float64")
    assert result_type(x, z, 1) == "float64"          # a 0-d float tensor lifts an int tensor
    assert result_type(x, sl.placeholder((), "int64")) == "int32"   # same category: the dim tensor wins
    assert float_result("int64") == "float32" and float_result("float16") == "float16"
    assert compute_dtype("float16") == "float32" and compute_dtype("int8") == "int8"
    with pytest.raises(TypeError):
        result_type()
