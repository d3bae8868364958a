"""The reduction lowerings (schedlang/torch/ops/reduce.py), each checked against torch at odd
shapes, negative dims, keepdim, 1-d and 0-d inputs, float16 and integer dtypes."""
import pytest
import torch

import schedlang as sl
from schedlang.torch.ops import LowerContext, lookup
from schedlang.torch.ops.registry import Unsupported

from .helpers import check_lowering, lower, requires_bfloat16

aten = torch.ops.aten
torch.manual_seed(0)
X = torch.randn(7, 13)
X3 = torch.randn(3, 5, 7)


def ties(*shape):
    """Small integers as floats: many equal values, so ties decide indices."""
    return torch.randint(0, 3, shape).float()


@pytest.mark.parametrize("args,kwargs", [
    ([X, [-1]], {}),
    ([X, [0, 1], True], {}),
    ([X, None], {}),
    ([X3, [0, -1]], {}),
    ([X3, [1], True], {}),
    ([torch.randn(13), [0]], {}),
    ([X.half(), [1]], {}),
    ([X, [1]], {"dtype": torch.float64}),
    ([X > 0, [0]], {}),                                   # bool -> int64
    ([torch.randint(-9, 9, (7, 13), dtype=torch.int32), [1]], {}),
])
def test_sum(args, kwargs):
    check_lowering(aten.sum.dim_IntList, args, kwargs)


def test_sum_all_and_0d():
    check_lowering(aten.sum.default, [X3])
    check_lowering(aten.sum.dim_IntList, [torch.tensor(2.5), [0]])


def test_prod():
    check_lowering(aten.prod.dim_int, [1 + 0.1 * X, -1, True])
    check_lowering(aten.prod.default, [torch.randint(1, 3, (3, 4), dtype=torch.int32)])


@pytest.mark.parametrize("args,kwargs", [
    ([X, [0]], {}),
    ([X3, [-1, 0], True], {}),
    ([X.half(), [1]], {}),
    ([X.half(), [1]], {"dtype": torch.float32}),
])
def test_mean(args, kwargs):
    check_lowering(aten.mean.dim, args, kwargs)


def test_mean_all():
    check_lowering(aten.mean.default, [X3])


@pytest.mark.parametrize("op", [aten.amax.default, aten.amin.default])
@pytest.mark.parametrize("args", [
    [X, [1]], [X3, [0, 2], True], [X, []], [X.half(), [-1]],
    [torch.randint(-9, 9, (7, 13), dtype=torch.int32), [0]],
])
def test_amax_amin(op, args):
    check_lowering(op, args)


def test_max_min_all_propagate_nan():
    x = X.clone()
    x[3, 4] = float("nan")
    check_lowering(aten.max.default, [x])
    check_lowering(aten.min.default, [X3])
    check_lowering(aten.amax.default, [x, [1]])


@pytest.mark.parametrize("args,kwargs", [
    ([X, [1]], {"correction": 1}),
    ([X3, [0, 2]], {"correction": 0, "keepdim": True}),
    ([X, None], {}),
    ([X, [-1]], {"correction": 2.5}),
    ([X.half(), [1]], {"correction": 1}),
])
def test_var_and_var_mean(args, kwargs):
    check_lowering(aten.var.correction, args, kwargs)
    check_lowering(aten.var_mean.correction, args, kwargs)


def test_var_more_correction_than_elements_is_inf_as_torch():
    check_lowering(aten.var.correction, [X, [0]], {"correction": 9})
    check_lowering(aten.var.dim, [X, [0], False, True])
    check_lowering(aten.var_mean.dim, [X3, [1]])


@pytest.mark.parametrize("op", [aten.argmax.default, aten.argmin.default])
@pytest.mark.parametrize("args", [
    [X, -1], [X3, 0, True], [X3], [X3, None, True], [torch.randn(13), 0],
    [ties(7, 13), 1], [ties(3, 5, 7)],
    [X.half(), 0], [torch.randint(-3, 3, (7, 13), dtype=torch.int32), 1],
])
def test_argmax_argmin(op, args):
    check_lowering(op, args)


def test_argmax_nan_and_all_minus_inf_as_torch():
    x = ties(5, 7)
    x[1, 3] = x[1, 5] = x[4, 0] = float("nan")
    x[2] = float("-inf")
    check_lowering(aten.argmax.default, [x, 1])
    check_lowering(aten.argmin.default, [x, 1])
    check_lowering(aten.max.dim, [x, 1])
    check_lowering(aten.min.dim, [-x, 1])


@pytest.mark.parametrize("op", [aten.max.dim, aten.min.dim])
@pytest.mark.parametrize("args", [[X, -1], [X3, 1, True], [ties(7, 13), 0], [X.half(), 1]])
def test_max_min_dim(op, args):
    check_lowering(op, args)


def test_symbolic_rows():
    """A symbolic extent: the count a mean divides by is read at run time."""
    n = sl.size_var("n")
    x = sl.placeholder((n, 13), name="x")
    out = lookup(aten.var_mean.correction)(LowerContext("out"), x, [0], correction=1)
    f = sl.build(sl.create_schedule([t.op for t in out]), [x, *out])
    t = torch.randn(6, 13)
    var, mean = torch.empty(13), torch.empty(13)
    f(t, var, mean)
    torch.testing.assert_close(var, t.var(0))
    torch.testing.assert_close(mean, t.mean(0))


def test_stage_names_follow_the_node():
    _, (var, mean) = lower(aten.var_mean.correction, [X.half(), [1]], node="var_mean")
    assert (var.name, mean.name) == ("var_mean", "var_mean_mean")
    assert var.op.input_tensors[0].name == "var_mean_sqsum"


@pytest.mark.parametrize("op,args", [
    (aten.mean.dim, [torch.arange(6).reshape(2, 3), [1]]),     # torch needs a float result
    (aten.argmax.default, [X > 0, 1]),
    (aten.var.correction, [torch.arange(6).reshape(2, 3), [1]]),
    (aten.sum.dim_IntList, [X, [1]]),                          # dtype=complex has no schedlang dtype
])
def test_unsupported(op, args):
    kwargs = {"dtype": torch.complex64} if op is aten.sum.dim_IntList else {}
    with pytest.raises(Unsupported):
        lower(op, args, kwargs)


def test_repeated_dim_is_an_error():
    with pytest.raises(ValueError, match="twice"):
        lower(aten.sum.dim_IntList, [X, [1, -1]])


@requires_bfloat16
@pytest.mark.parametrize("op,args,kwargs", [
    (aten.sum.dim_IntList, [X, [1]], {}), (aten.mean.dim, [X3, [-1], True], {}), (aten.amax.default, [X, [0]], {}),
    (aten.var_mean.correction, [X, [1]], {"correction": 1}), (aten.argmax.default, [X, 1], {}),
    (aten.max.dim, [X, 0], {}),
])
def test_bfloat16(op, args, kwargs):
    """Computed in float32, rounded once (the lowering needs only promote.COMPUTE_DTYPE's entry)."""
    args = [a.to(torch.bfloat16) if isinstance(a, torch.Tensor) else a for a in args]
    check_lowering(op, args, kwargs)
