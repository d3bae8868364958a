"""Complex values as real pairs (torch/complex_pairs.py): complex rotary embeddings as Meta's
Llama reference code and transformers' Llama 4 write them compile whole, bounds-checked and for
the host, against eager torch; every op the rewrite takes; a graph it cannot take (a complex
output, an op it has no pair form for) is left to torch and still right."""
import warnings

import pytest
import torch
import torch.nn as nn

import schedlang.torch as st
from schedlang.torch.complex_pairs import rewrite_complex
from schedlang.torch.export import capture

from ..helpers import CHECKED
from .helpers import compile_each, distinct_builds
from .test_conv import HOST

torch.manual_seed(0)


class MetaRope(nn.Module):
    """Meta's llama model.py: freqs_cis a complex buffer, made by torch.polar."""

    def __init__(self, dim=16, seq=12, dtype=torch.float32):
        super().__init__()
        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).to(dtype) / dim))
        angles = torch.outer(torch.arange(seq).to(dtype), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def forward(self, xq, xk):
        q = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
        k = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2))
        f = self.freqs_cis.view(1, q.shape[1], 1, q.shape[-1])
        return torch.view_as_real(q * f).flatten(3), torch.view_as_real(k * f).flatten(3)


class EveryOp(nn.Module):
    """polar in the forward, complex x complex, x real tensor, x / + / - a number (both
    sides), conj, neg, views of complex values, and real, imag, abs read back."""

    def forward(self, x, theta):
        f = torch.polar(torch.ones_like(theta) * 0.5, theta)
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        w = (z * f * 2.0 + 1.0 - z.conj()) * theta.sin()
        w = (3.0 - w).neg() + (z - 0.5) + (0.25 + z) - torch.complex(theta, theta.cos())
        w = w.transpose(0, 1).unsqueeze(0).squeeze(0).transpose(0, 1)
        return torch.view_as_real(w).flatten(-2), w.abs() + w.real * w.imag


def _compiled(model, inputs, tol=1e-5):
    with torch.no_grad():
        want = model(*inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        for _, cm in compile_each(model, inputs, distinct_builds((CHECKED, HOST))):
            with torch.no_grad():
                got = cm(*inputs)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=tol, atol=tol)
    assert len(cm.program.parts) == 1
    return cm


def test_meta_llama_rotary_compiles_whole():
    cm = _compiled(MetaRope(), (torch.randn(1, 12, 4, 16), torch.randn(1, 12, 2, 16)))
    ir = cm.ir("tensor")
    assert "_re: (1, 12, 1, 8) f32" in ir and "c64" not in ir     # the buffer: a folded pair of real constants


def test_float64_rotary():
    x = torch.randn(2, 12, 3, 16, dtype=torch.float64)
    _compiled(MetaRope(dtype=torch.float64), (x, x * 2), tol=1e-12)


def test_every_op_of_the_rewrite():
    _compiled(EveryOp(), (torch.randn(3, 5, 8), torch.randn(5, 4)))


class ComplexOut(nn.Module):
    def forward(self, x):
        return torch.view_as_complex(x.reshape(4, 3, 2)) * 2.0


class Divides(nn.Module):
    def forward(self, x):
        z = torch.view_as_complex(x.reshape(4, 3, 2))
        return torch.view_as_real(z / (z + 1.0))


@pytest.mark.parametrize("model", [ComplexOut(), Divides()], ids=["complex_output", "complex_division"])
def test_graphs_it_cannot_take_are_left_to_torch(model):
    x = torch.randn(4, 6)
    graph = capture(model, (x,))
    assert rewrite_complex(graph) is graph
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = st.compile(model, (x,))
        got = cm(x)
    torch.testing.assert_close(got, model(x))


def test_through_torch_compile():
    import schedlang.torch.dynamo  # noqa: F401  (registers the backend)
    torch._dynamo.reset()
    model, q, k = MetaRope(), torch.randn(1, 12, 4, 16), torch.randn(1, 12, 2, 16)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", st.FallbackWarning)
        got = torch.compile(model, backend="schedlang")(q, k)
    for g, w in zip(got, model(q, k)):
        torch.testing.assert_close(g, w)
