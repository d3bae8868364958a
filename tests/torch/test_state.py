"""A compiled module reads its parameters and buffers from the module at each call, as eager
does (schedlang/torch/state.py), and computes no gradients: an input that requires grad is
refused, parameters that require grad warn once (runtime.CompiledModule._check_grad)."""
import warnings

import pytest
import torch
import torch.nn as nn

import schedlang.torch as slt
from schedlang.torch import GradientWarning


class Scaled(nn.Module):
    """A packed Linear (prepack.py), a buffer and a plain tensor attribute (a lifted constant)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(20, 33)
        self.register_buffer("scale", torch.ones(33))
        self.shift = torch.zeros(33)

    def forward(self, x):
        return self.lin(x) * self.scale + self.shift


def _updates():
    """Each way to change the state, as a function of the module."""
    def reassign_buffer(m):
        m.scale = torch.full((33,), 2.5)

    def buffer_in_place(m):
        m.scale.mul_(-3)

    def reassign_attribute(m):
        m.shift = torch.randn(33)

    def reassign_parameter(m):
        m.lin.weight = nn.Parameter(torch.randn(33, 20))

    def assign_data(m):
        m.lin.weight.data = torch.randn(33, 20)

    def copy_in_place(m):
        with torch.no_grad():
            m.lin.weight.copy_(torch.randn(33, 20))
            m.lin.bias.add_(1)

    def load_state_dict(m):
        state = {k: torch.randn_like(v) for k, v in m.state_dict().items()}
        m.load_state_dict(state)

    def reassign_submodule(m):
        m.lin = nn.Linear(20, 33)

    def buffer_becomes_plain_attribute(m):
        del m.scale
        m.scale = torch.full((33,), -1.5)       # now in the instance's __dict__, not _buffers
    return [reassign_buffer, buffer_in_place, reassign_attribute, reassign_parameter, assign_data,
            copy_in_place, load_state_dict, reassign_submodule, buffer_becomes_plain_attribute]


@pytest.mark.parametrize("update", _updates(), ids=lambda f: f.__name__)
def test_state_changed_after_compile_is_seen(update):
    torch.manual_seed(0)
    m = Scaled().eval()
    x = torch.randn(16, 20)         # rows enough that the weight is packed (ops/matmul.reads_weight_in_place)
    cm = slt.compile(m, (x,))
    assert cm.program.packs, "the weight is packed: a copy that must be made again"
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))
        update(m)
        want = m(x)
        torch.testing.assert_close(cm(x), want)
        torch.testing.assert_close(cm(x), want)         # and on the next call


def test_state_replaced_by_another_shape_or_dtype_is_refused():
    m = Scaled().eval()
    x = torch.randn(4, 20)
    cm = slt.compile(m, (x,))
    m.scale = torch.ones(34)
    with torch.no_grad(), pytest.raises(ValueError, match=r"buffer scale is now torch.float32 \(34,\).*\(33,\)"):
        cm(x)
    m.scale = torch.ones(33, dtype=torch.float64)
    with torch.no_grad(), pytest.raises(ValueError, match="buffer scale is now torch.float64"):
        cm(x)
    m.scale = None
    with torch.no_grad(), pytest.raises(TypeError, match="buffer scale is now a NoneType"):
        cm(x)


def test_input_that_requires_grad_is_refused_with_grad_on():
    m = Scaled().eval().requires_grad_(False)
    x = torch.randn(4, 20, requires_grad=True)
    cm = slt.compile(m, (x.detach(),))
    with pytest.raises(RuntimeError, match="input x requires grad.*torch.no_grad"):
        cm(x)
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            torch.testing.assert_close(cm(x), m(x))


def test_parameters_that_require_grad_warn_once_with_grad_on():
    m = Scaled().eval()
    x = torch.randn(4, 20)
    cm = slt.compile(m, (x,))
    with pytest.warns(GradientWarning, match="parameter lin.weight requires grad.*no gradients"):
        y = cm(x)
    assert not y.requires_grad and m(x).requires_grad
    with warnings.catch_warnings():
        warnings.simplefilter("error", GradientWarning)
        cm(x)                                          # once per compiled module
        for mode in (torch.no_grad, torch.inference_mode):
            with mode():
                slt.compile(m, (x,))(x)                # no grad mode: no warning


def test_emulated_cuda_module_reads_the_current_state():
    torch.manual_seed(0)
    m = Scaled().eval()
    x = torch.randn(4, 20)
    cm = slt.compile(m, (x,), target="cuda")
    with torch.no_grad():
        torch.testing.assert_close(cm.emulate(x), m(x))
        m.scale = torch.full((33,), -2.0)
        m.lin.weight.mul_(3)
        torch.testing.assert_close(cm.emulate(x), m(x))
