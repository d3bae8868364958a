"""CompiledModule(..., out=): the kernels write into the caller's tensors (runtime.py)."""
import warnings

import pytest
import torch

import schedlang.torch as st

from .modules import MaxAndIndex, Residual, SiluAndMul, WithTorchStep

torch.manual_seed(0)


def test_out_is_written_in_place_and_returned():
    x = torch.randn(6, 10)
    cm = st.compile(SiluAndMul(), (x,))
    out = torch.full((6, 5), float("nan"))
    got = cm(x, out=out)
    assert got is out
    torch.testing.assert_close(out, SiluAndMul()(x))
    x2 = torch.randn(6, 10)
    ptr = out.data_ptr()
    cm(x2, out=out)                                # the same buffer, reused
    assert out.data_ptr() == ptr
    torch.testing.assert_close(out, SiluAndMul()(x2))


@pytest.mark.filterwarnings("ignore::schedlang.torch.lower.FallbackWarning")
@pytest.mark.parametrize("module,inputs", [
    (Residual(6), (torch.randn(4, 6), torch.randn(4, 6))),       # a transposed view and a scalar: copied
    (WithTorchStep(), (torch.randn(3, 8),)),                       # computed by a torch step: copied
    (MaxAndIndex(), (torch.randn(5, 7),)),                      # two outputs, one int64
])
def test_several_outputs_and_outputs_not_made_by_a_kernel(module, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = st.compile(module.eval(), inputs)
    want = module(*inputs)
    many = isinstance(want, tuple)
    outs = tuple(torch.empty_like(w, memory_format=torch.contiguous_format) for w in (want if many else (want,)))
    got = cm(*inputs, out=outs if many else outs[0])
    for g, o, w in zip(got if many else (got,), outs, want if many else (want,)):
        assert g is o
        torch.testing.assert_close(o, w, rtol=1e-5, atol=1e-5)


def test_bad_out_arguments():
    x = torch.randn(4, 8)
    cm = st.compile(SiluAndMul(), (x,))
    with pytest.raises(TypeError, match="out: expected a torch.Tensor, got list"):
        cm(x, out=[torch.empty(4, 4)])
    with pytest.raises(TypeError, match="dtype torch.float64"):
        cm(x, out=torch.empty(4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"shape \(4, 5\), the output's is \(4, 4\)"):
        cm(x, out=torch.empty(4, 5))
    with pytest.raises(ValueError, match="not contiguous"):
        cm(x, out=torch.empty(4, 4).t())
    with pytest.raises(ValueError, match="shares memory"):
        cm(x, out=x.view(8, 4)[:4])               # contiguous, but x's own memory
    with pytest.raises(ValueError, match="is on meta"):
        cm(x, out=torch.empty(4, 4, device="meta"))
    cm2 = st.compile(MaxAndIndex(), (torch.randn(5, 7),))
    with pytest.raises(TypeError, match="a tuple of 2 tensors"):
        cm2(torch.randn(5, 7), out=torch.empty(5))
    with pytest.raises(TypeError, match=r"out\[1\]: expected a torch.Tensor"):
        cm2(torch.randn(5, 7), out=(torch.empty(5), None))
