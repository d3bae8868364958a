"""softmax, log_softmax, layer_norm and rms_norm lowerings (schedlang/torch/ops/norm.py)
against torch: any dim, large inputs (numerical stability), float16, weight/bias or none."""
import pytest
import torch

from schedlang.torch.ops.registry import Unsupported

from .helpers import check_lowering, lower, requires_bfloat16, run_lowered

aten = torch.ops.aten
torch.manual_seed(0)
X3 = torch.randn(3, 7, 13)


@pytest.mark.parametrize("op", [aten._softmax.default, aten._log_softmax.default])
@pytest.mark.parametrize("x,dim", [
    (X3, -1), (X3, 0), (X3, 1), (torch.randn(13), 0), (X3.half(), -1),
    (100 * X3, 2),                      # exp would overflow without subtracting the max
])
def test_softmax_log_softmax(op, x, dim):
    check_lowering(op, [x, dim, False])


@pytest.mark.parametrize("dtype, gap", [(torch.float32, 95.0), (torch.float64, 720.0)])
def test_softmax_flushes_subnormal_exps(dtype, gap):
    """A score whose exp would be subnormal (x86 takes a microcode assist for each) counts as
    0: the same softmax and log_softmax within the dtype's smallest normal, the subnormal
    probability torch gives exactly 0 here; a larger one is kept."""
    x = torch.tensor([[0.0, -gap, -1.0, -80.0 if dtype == torch.float32 else -700.0]], dtype=dtype)
    made, outputs = lower(torch.ops.aten._softmax.default, (x, -1, False))
    (got,) = run_lowered(made, outputs)
    want = torch.softmax(x, -1)
    assert want[0, 1] > 0 and got[0, 1] == 0 and got[0, 3] > 0
    torch.testing.assert_close(got, want, rtol=1e-6, atol=torch.finfo(dtype).tiny)
    check_lowering(torch.ops.aten._log_softmax.default, (x, -1, False))


def test_softmax_half_to_float():
    """torch's CPU kernel refuses half_to_float; the result must equal float32 softmax."""
    x = X3.half()
    for op in (aten._softmax.default, aten._log_softmax.default):
        made, outs = lower(op, [x, -1, True])
        got, = run_lowered(made, outs)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, op(x.float(), -1, False), rtol=1e-5, atol=1e-5)


def test_softmax_int_with_dtype():
    check_lowering(aten.softmax.int, [X3.half(), 1], {"dtype": torch.float32})
    check_lowering(aten.log_softmax.int, [X3, -1])


@pytest.mark.parametrize("x,shape,affine", [
    (X3, [13], True), (X3, [7, 13], False), (torch.randn(5, 9), [9], True), (X3.half(), [13], True),
    (3 + 10 * X3, [13], True),
])
def test_native_layer_norm(x, shape, affine):
    w = torch.randn(shape, dtype=x.dtype) if affine else None
    b = torch.randn(shape, dtype=x.dtype) if affine else None
    check_lowering(aten.native_layer_norm.default, [x, shape, w, b, 1e-5])


def test_layer_norm_weight_only_and_eps():
    check_lowering(aten.layer_norm.default, [X3, [13], torch.randn(13), None, 0.5])


@pytest.mark.parametrize("x,shape,weight,eps", [
    (X3, [13], True, None), (X3, [7, 13], False, 1e-3), (X3.half(), [13], True, None),
    (torch.randn(13), [13], True, 1e-6),
])
def test_rms_norm(x, shape, weight, eps):
    w = torch.randn(shape, dtype=x.dtype) if weight else None
    check_lowering(aten.rms_norm.default, [x, shape, w, eps])


@pytest.mark.parametrize("x_dtype,w_dtype", [(torch.float32, torch.float16), (torch.float16, torch.float32),
                                              (torch.float32, torch.float64)])
def test_rms_norm_weight_of_another_float_dtype(x_dtype, w_dtype):
    """A half model whose rotary tables are float32 normalizes a float32 input with a float16
    weight: torch gives x's dtype; so does the lowering (it ran in torch)."""
    (got,) = check_lowering(aten.rms_norm.default, [X3.to(x_dtype), [13], torch.randn(13, dtype=w_dtype), 1e-5])
    assert got.dtype == x_dtype


def test_rms_norm_default_eps_is_float32_epsilon_for_half():
    """A row of 1e-4: mean(x^2) = 1e-8 is far below float16's epsilon (1e-3), so the
    result (0.28 with float32's epsilon, 0.003 with float16's) shows which eps was used."""
    x = torch.full((2, 4), 1e-4, dtype=torch.float16)
    got = check_lowering(aten.rms_norm.default, [x, [4], None, None])[0]
    assert got.float().min() > 0.2


def test_stage_names():
    _, (out,) = lower(aten._softmax.default, [X3, -1, False], node="softmax")
    names = {t.name for t in out.op.input_tensors}
    assert out.name == "softmax" and names == {"softmax_exp", "softmax_sum"}


@pytest.mark.parametrize("op,args", [
    (aten._softmax.default, [torch.arange(6).reshape(2, 3), 1, False]),
    (aten.native_layer_norm.default, [X3, [13], torch.randn(13).half(), None, 1e-5]),
    (aten.rms_norm.default, [X3, [13], torch.randint(0, 3, (13,)), None]),     # an integer weight
])
def test_unsupported(op, args):
    with pytest.raises(Unsupported):
        lower(op, args)


def test_bad_normalized_shape():
    with pytest.raises(ValueError, match="normalized_shape"):
        lower(aten.native_layer_norm.default, [X3, [7], None, None, 1e-5])


@requires_bfloat16
def test_bfloat16():
    x, w, b = X3.to(torch.bfloat16), torch.randn(13).to(torch.bfloat16), torch.randn(13).to(torch.bfloat16)
    check_lowering(aten._softmax.default, [x, -1, False])
    check_lowering(aten._log_softmax.default, [x, 1, False])
    check_lowering(aten.native_layer_norm.default, [x, [13], w, b, 1e-5])
    check_lowering(aten.rms_norm.default, [x, [13], w, None])
