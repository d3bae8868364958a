"""Call arguments that have no plain memory behind them, and bad mod.time() arguments, on every CPU target."""
import numpy as np
import pytest
import torch

import schedlang as sl
from tests.cpu_targets import CPU_TARGETS


@pytest.fixture(scope="module", params=CPU_TARGETS)
def double(request):
    A = sl.placeholder((8,), name="A")
    B = sl.compute((8,), lambda i: A[i] * 2.0, name="B")
    return sl.build(sl.create_schedule(B.op), [A, B], target=request.param)


def _neg_view(values):
    """A float32 tensor with torch's lazy negation bit: the imaginary part of a conjugate."""
    z = torch.complex(torch.zeros(8), torch.tensor(values, dtype=torch.float32))
    t = z.conj().imag
    assert t.is_neg()
    return t


def test_input_with_lazy_negation_is_resolved(double):
    x = _neg_view(np.arange(8.0))
    out = torch.zeros(8)
    double(x, out)
    assert torch.equal(out, -2 * torch.arange(8.0))


def test_output_with_lazy_negation_is_refused(double):
    with pytest.raises(ValueError, match="output 'B' has a lazy negation bit"):
        double(torch.ones(8), _neg_view(np.zeros(8)))


def test_output_with_lazy_conjugation_is_refused():
    A = sl.placeholder((8,), name="A")
    B = sl.compute((8,), lambda i: A[i] * 2.0, name="B")
    mod = sl.build(sl.create_schedule(B.op), [A, B])
    out = torch.zeros(8, dtype=torch.complex64).conj()
    assert out.is_conj()
    with pytest.raises(ValueError, match="output 'B' has a lazy conjugation bit"):
        mod(torch.ones(8), out)


@pytest.mark.parametrize("make", [lambda: torch.ones(8).to_sparse(), lambda: torch.ones(8, device="meta")],
                         ids=["sparse", "meta"])
def test_storage_less_tensors_are_type_errors(double, make):
    with pytest.raises(TypeError, match="argument 'A' is a .* tensor on .*, which has no strided memory"):
        double(make(), torch.zeros(8))


@pytest.mark.parametrize("kwargs", [{"number": 0}, {"repeat": 0}, {"number": -1}, {"repeat": -3},
                                    {"number": 2.5}, {"repeat": True}])
def test_time_needs_positive_counts(double, kwargs):
    with pytest.raises(ValueError, match="time\\(\\): (number|repeat) must be a positive integer"):
        double.time(np.ones(8, "float32"), np.zeros(8, "float32"), **kwargs)
