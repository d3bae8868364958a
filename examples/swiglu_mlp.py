"""A SwiGLU MLP, the feed-forward block of LLaMA-style transformers: three Linears without
bias, out = down(silu(gate(x)) * up(x)).

    schedlang compile --ir examples/swiglu_mlp.py --shape 8,256 --level torch,tensor
"""
import torch

from schedlang.torch.zoo import SwiGLUMLP    # defined once, in the model zoo (hidden 256, intermediate 688)

__all__ = ["SwiGLUMLP"]


def example_inputs():
    """Eight tokens of the default hidden size."""
    return (torch.randn(8, 256),)
