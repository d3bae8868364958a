"""Python scalars out of a tensor's range, integer division by zero and tensors too large
for the kernels: eager's result where eager gives one, else an error that names the torch
node and op (lower.user_error), and the division-by-zero results the README documents."""
import warnings

import pytest
import torch

import schedlang.torch as slt


def _module(fn):
    class M(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)
    return M()


def _compiled(fn, *inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", slt.FallbackWarning)
        return slt.compile(_module(fn), inputs)


INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("name,fn", [
    ("add", lambda x: x + 2**40 + 300), ("sub", lambda x: x - (2**33 + 7)), ("mul", lambda x: x * (2**32 + 3)),
    ("lt", lambda x: x < 2**32 + 5), ("eq", lambda x: x == 2**16 + 300), ("rsub", lambda x: (2**63 - 1) - x),
])
def test_int_scalars_out_of_range_wrap_as_eager(dtype, name, fn):
    x = torch.tensor([0, 1, 5, 44, 100, 127], dtype=dtype)
    torch.testing.assert_close(_compiled(fn, x)(x), fn(x), rtol=0, atol=0)


@pytest.mark.parametrize("fn,node,op", [
    (lambda x: torch.full((3,), 2**40, dtype=torch.int32) + x, "full", "aten.full.default"),
    (lambda x: torch.where(x > 0, x, 2**40), "where", "aten.where"),
    (lambda x: x.clamp(max=2**40), "clamp", "aten.clamp"),
])
def test_int_scalar_eager_refuses_names_the_node(fn, node, op):
    x = torch.tensor([1, -2, 3], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="overflow"):
        fn(x)                                       # eager refuses it too
    with pytest.raises(ValueError, match=rf"^{node} = {node}\(.*the torch op {op}.*does not fit dtype int32"):
        _compiled(fn, x)


def test_float16_fill_beyond_its_range_names_the_node():
    def fn(x):
        return x + torch.full((3,), 1e6, dtype=torch.float16)
    x = torch.ones(3, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="overflow"):
        fn(x)
    with pytest.raises(ValueError, match=r"^full = full\(.*aten.full.default.*1000000.0 does not fit dtype float16"):
        _compiled(fn, x)
    # a float scalar in arithmetic is no error: computed in float32 and rounded (inf), as eager
    x = torch.tensor([1e-3, 2.0, -3.0], dtype=torch.float16)
    torch.testing.assert_close(_compiled(lambda v: v * 1e6, x)(x), x * 1e6)


def test_tensor_beyond_int32_indices_names_the_node():
    # The kernels index with 32 bits: a (65536, 65536) result is refused when built, before
    # anything is allocated. An expand that is only read (summed) is no such tensor.
    x = torch.ones(1, 65536)
    with pytest.raises(ValueError, match=r"^mul = mul\(expand, 2\) -> \(65536, 65536\) f32 \(the torch op "
                                         r"aten.mul.Tensor\): tensor 'mul' has 4294967296 elements"):
        _compiled(lambda v: v.expand(65536, 65536) * 2, x)


DIVISIONS = [
    ("floor", lambda a, b: torch.div(a, b, rounding_mode="floor")),
    ("trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc")),
    ("floordiv", lambda a, b: a // b),
    ("mod", lambda a, b: a % b),
    ("remainder", lambda a, b: torch.remainder(a, b)),
]


@pytest.mark.parametrize("name,fn", DIVISIONS, ids=[n for n, _ in DIVISIONS])
def test_integer_division_by_a_zero_element_gives_zero(name, fn):
    # Documented (README, PyTorch): eager raises ZeroDivisionError; the kernels give 0 there
    # (schedlang's defined behaviour) and eager's result everywhere else.
    a = torch.tensor([7, -7, 5, -9, 2**31 - 1, -2**31], dtype=torch.int32)
    b = torch.tensor([2, 2, 0, -4, 0, 3], dtype=torch.int32)   # not INT_MIN // -1: eager traps (SIGFPE)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, b)
    got = _compiled(fn, a, b)(a, b)
    nonzero = b != 0
    torch.testing.assert_close(got[nonzero], fn(a[nonzero], b[nonzero]), rtol=0, atol=0)
    assert (got[~nonzero] == 0).all()


def test_fmod_runs_in_torch_and_raises_as_eager():
    a = torch.tensor([7, -7], dtype=torch.int32)
    b = torch.tensor([2, 0], dtype=torch.int32)
    cm = _compiled(torch.fmod, a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        cm(a, b)


@pytest.mark.parametrize("fn,node", [(lambda a: a // 0, "floor_divide"), (lambda a: a % 0, "remainder"),
                                     (lambda a: torch.div(a, 0, rounding_mode="trunc"), "div")])
def test_integer_division_by_a_literal_zero_is_refused_naming_the_node(fn, node):
    a = torch.tensor([1, 2], dtype=torch.int32)
    with pytest.raises(ValueError, match=rf"^{node} = {node}\(\w+, 0.*integer division by the constant zero"):
        _compiled(fn, a)
