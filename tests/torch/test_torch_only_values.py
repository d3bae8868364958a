"""Graphs with values only torch computes, through both compile paths: complex tensors
(torch.fft, complex parameters) flow between torch steps while the real ops around them are
compiled, and linalg's error checks (threaded on effect tokens by torch) still raise."""
import warnings

import pytest
import torch

import schedlang.torch as st
import schedlang.torch.dynamo  # noqa: F401  (registers the backend)


class Spectral(torch.nn.Module):
    """A Fourier-neural-operator layer: rfft2, a complex weight on the low modes, irfft2,
    beside a real 1x1 convolution."""

    def __init__(self, c=4, modes=3):
        super().__init__()
        self.modes = modes
        self.w = torch.nn.Parameter(torch.randn(c, c, modes, modes, dtype=torch.cfloat) * 0.1)
        self.lin = torch.nn.Conv2d(c, c, 1)

    def forward(self, x):
        f = torch.fft.rfft2(x)
        m = self.modes
        out = torch.zeros(x.shape[0], x.shape[1], x.shape[2], x.shape[3] // 2 + 1, dtype=torch.cfloat)
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", f[:, :, :m, :m], self.w)
        y = torch.fft.irfft2(out, s=x.shape[-2:])
        return torch.relu(y + self.lin(x)) * f.abs().mean()


class Inverse(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.inv(x[:3, :3] + 3 * torch.eye(3)) * 2 + 1


def both_paths(module, x):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", st.FallbackWarning)
        exported = st.compile(module, (x,))
        torch._dynamo.reset()
        dynamo = torch.compile(module, backend="schedlang")
        dynamo(x)
    return exported, dynamo


def test_complex_values_run_in_torch_and_real_ops_compile():
    torch.manual_seed(0)
    module = Spectral().eval()
    x = torch.randn(2, 4, 8, 7)
    exported, dynamo = both_paths(module, x)
    with torch.no_grad():
        want = module(x)
        for compiled in (exported, dynamo):
            torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
    text = exported.ir("torch")
    assert "w: (4, 4, 3, 3) c64" in text and "_fft_r2c" in text
    ops = exported.fallback_ops()
    assert "_fft_r2c" in ops and "_fft_c2r" in ops
    assert not {"convolution", "relu", "mul"} & set(ops), ops      # the real ops are compiled


def test_complex_input_and_output():
    class Mix(torch.nn.Module):
        def forward(self, z, x):
            return z * 2, (z.real + x).sigmoid()

    z, x = torch.randn(3, 5, dtype=torch.cfloat), torch.randn(3, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", st.FallbackWarning)
        compiled = st.compile(Mix(), (z, x))
    for got, want in zip(compiled(z, x), Mix()(z, x)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("path", ["export", "dynamo"])
def test_linalg_error_checks_are_kept(path):
    module = Inverse()
    x = torch.randn(6, 6)
    exported, dynamo = both_paths(module, x)
    compiled = exported if path == "export" else dynamo
    if path == "export":
        assert "= _linalg_check_errors(" in exported.ir("torch") and "-> none" in exported.ir("torch")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x))
        singular = torch.zeros(6, 6)
        singular[:3, :3] = -3 * torch.eye(3)
        with pytest.raises(torch.linalg.LinAlgError, match="singular"):
            compiled(singular)
