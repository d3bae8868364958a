"""SiluAndMul, the gated activation of LLaMA-style MLPs and the example of DESIGN.md:
the last dimension of x is split in two halves, out = silu(left) * right.

    schedlang compile --ir examples/silu_and_mul.py --shape 1,32,4096
    schedlang compile --ir examples/silu_and_mul.py                   # the same: example_inputs()
"""
import torch

from schedlang.torch.zoo import SiluAndMul    # defined once, in the model zoo

__all__ = ["SiluAndMul"]


def example_inputs():
    """One token batch of hidden size 2 x 2048, as in the design document."""
    return (torch.randn(1, 32, 4096),)
