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


# The prepared call (runtime._run_prepared): a call whose state is unchanged since the last runs
# the last call's bound kernels with new inputs and outputs; each test below changes the state
# in a way one of ModuleState.same_as_last's checks alone sees, between two calls that both
# follow a first one (so that the second runs prepared if that check is missing).

def _compiled_twice(m, x):
    cm = slt.compile(m, (x,))
    with torch.no_grad():
        cm(x)
        torch.testing.assert_close(cm(x), m(x))
    assert cm._prepared is not None, "the second call ran prepared"
    return cm


class TwoLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(20, 20)
        self.b = nn.Linear(20, 20)
        self.register_buffer("s", torch.randn(20, 2)[:, 0])     # not contiguous: copied for the kernel

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) * self.s


def _updates_between_calls():
    def swap_parameters(m):                     # each one still the same object, at the same address
        m.a.weight, m.b.weight = m.b.weight, m.a.weight

    def swap_submodules(m):
        m.a, m.b = m.b, m.a

    def write_in_place(m):
        m.b.bias.add_(1)

    def write_packed_in_place(m):
        m.a.weight.mul_(-1)

    def replace_data(m):                        # same object, same _version, new storage
        m.b.weight.data = torch.randn(20, 20)

    def transpose_data(m):                      # same object, storage, _version and shape: other strides
        m.a.weight.data = m.a.weight.data.t()

    def write_copied_buffer_through_data(m):    # no new _version, but copied again at each call
        m.s.data.mul_(-2)
    return [swap_parameters, swap_submodules, write_in_place, write_packed_in_place, replace_data,
            transpose_data, write_copied_buffer_through_data]


@pytest.mark.parametrize("update", _updates_between_calls(), ids=lambda f: f.__name__)
def test_state_changed_between_prepared_calls_is_seen(update):
    torch.manual_seed(0)
    m = TwoLinears().eval()
    x = torch.randn(16, 20)
    cm = _compiled_twice(m, x)
    with torch.no_grad():
        update(m)
        want = m(x)
        torch.testing.assert_close(cm(x), want)
        torch.testing.assert_close(cm(x), want)


def test_same_address_views_of_another_shape_or_dtype_are_refused():
    torch.manual_seed(0)
    m = Scaled().eval()
    x = torch.randn(16, 20)
    cm = _compiled_twice(m, x)
    whole = m.scale.data
    m.scale.data = whole[:32]                   # same storage, address and _version
    with torch.no_grad(), pytest.raises(ValueError, match=r"buffer scale is now torch.float32 \(32,\)"):
        cm(x)
    m.scale.data = whole
    cm = _compiled_twice(m, x)
    m.scale.data = whole.view(torch.int32)
    with torch.no_grad(), pytest.raises(ValueError, match="buffer scale is now torch.int32"):
        cm(x)


def test_attribute_that_appears_after_the_prepared_call_is_read():
    torch.manual_seed(0)
    m = Scaled().eval()
    x = torch.randn(16, 20)
    cm = slt.compile(m, (x,))
    del m.shift                                 # missing: the value captured at compile time
    with torch.no_grad():
        want = m.lin(x) * m.scale
        cm(x)
        torch.testing.assert_close(cm(x), want)
        m.shift = torch.full((33,), 4.0)
        torch.testing.assert_close(cm(x), want + 4)


def test_given_state_replaced_between_prepared_calls_is_seen():
    torch.manual_seed(0)
    m = Scaled().eval()
    x = torch.randn(16, 20)
    cm = slt.compile(m, (x,))
    name = next(i.name for i in cm.graph.state_inputs if i.target == "scale")
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(cm.call_with_state((x,), {name: torch.full((33,), 2.0)}), m.lin(x) * 2)
        torch.testing.assert_close(cm.call_with_state((x,), {name: torch.full((33,), -1.0)}), -m.lin(x))
        torch.testing.assert_close(cm(x), m(x))        # and the module's own again


def test_prepared_call_packs_nothing_and_makes_fresh_outputs(monkeypatch):
    torch.manual_seed(0)
    m = Scaled().eval()
    x = torch.randn(16, 20)
    cm = _compiled_twice(m, x)
    monkeypatch.setattr(type(cm._packs), "values", lambda *a: pytest.fail("a prepared call packs"))
    with torch.no_grad():
        first = cm(x)
        kept = first.clone()
        second = cm(2 * x)
        assert first.data_ptr() != second.data_ptr()
        torch.testing.assert_close(first, kept)
        torch.testing.assert_close(second, m(2 * x))


def test_prepared_call_checks_its_inputs():
    torch.manual_seed(0)
    m = Scaled().eval()
    x = torch.randn(16, 20)
    cm = _compiled_twice(m, x)
    with torch.no_grad():
        with pytest.raises(TypeError, match="input x: dtype torch.float64"):
            cm(x.double())
        with pytest.raises(ValueError, match="input x: shape"):
            cm(torch.randn(16, 21))
        for odd in (torch.randn(20, 16).t(), torch.randn(16 * 20 + 1)[1:].view(16, 20), torch._neg_view(x)):
            torch.testing.assert_close(cm(odd), m(odd))      # transposed, misaligned, lazily negated
