"""Small modules the frontend tests compile."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from schedlang.torch.zoo import SiluAndMul, SwiGLUMLP  # noqa: F401 (the LLM blocks, defined once in the zoo)


class ReluMLP(nn.Module):
    """Linear, ReLU, Linear: two matmul kernels (the tuning tests' smallest model)."""

    def __init__(self, d_in=16, d_hidden=24, d_out=8):
        super().__init__()
        self.a, self.b = nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class Residual(nn.Module):
    """Broadcasting against a parameter and a buffer, a residual add, a clamp and a cast."""

    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))
        self.register_buffer("scale", torch.rand(n) + 0.5)

    def forward(self, x, y):
        h = x + self.bias * y
        h = F.gelu(h, approximate="tanh") * self.scale
        return (x + torch.clamp(h, -2.0, 2.0)).transpose(0, 1), (h > 0).to(torch.float32).sum()


@torch.library.custom_op("schedlang_test::reverse", mutates_args=())
def reverse(x: torch.Tensor) -> torch.Tensor:
    """An op no compiler knows (a test's own): it always runs in torch. x reversed along its
    last dim."""
    return x.flip(-1).clone()


@reverse.register_fake
def _reverse_shape(x):
    return torch.empty_like(x)


class WithTorchStep(nn.Module):
    """reverse has no lowering: it runs in torch between two lowered parts."""

    def forward(self, x):
        y = torch.exp(x) * 0.5
        return reverse(y) + x.view(x.shape[0], -1)[:, :1]


class MaxAndIndex(nn.Module):
    """max.dim has two results (values, indices), read through getitem."""

    def forward(self, x):
        values, index = x.max(dim=1)
        return torch.relu(values) * 2, index + 1


class BatchNormTrain(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(x)


class DynamicViews(nn.Module):
    """Views and slices whose extents depend on the batch, and the batch as a scalar."""

    def forward(self, x):
        y = x.view(x.shape[0], -1)
        return y[:, 1:] * (x.shape[0] + 1), x.reshape(-1), x.view(x.shape[0], 4, 2)
