"""A SwiGLU MLP, the feed-forward block of LLaMA-style transformers: three Linears without
bias, out = down(silu(gate(x)) * up(x)).

    schedlang compile --ir examples/swiglu_mlp.py --shape 8,256 --level torch,tensor
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["SwiGLUMLP"]


class SwiGLUMLP(nn.Module):
    def __init__(self, hidden: int = 256, intermediate: int = 688):
        super().__init__()
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def example_inputs():
    """Eight tokens of the default hidden size."""
    return (torch.randn(8, 256),)
