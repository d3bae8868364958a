"""A model's repeated layers are lowered and compiled once (kernel/dedup.py, issue 17 item 6):
the compiled module has fewer LLVM kernel functions than kernels, and every layer still
computes with its own weights (checked against eager torch)."""
from __future__ import annotations

import re

import torch

import schedlang.torch as st


class Tower(torch.nn.Module):
    """A stem, `depth` identical residual blocks (each its own weights), a head of another width."""

    def __init__(self, width=48, depth=4):
        super().__init__()
        self.stem = torch.nn.Linear(24, width)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        for block in self.blocks:
            x = x + torch.relu(block(x))
        return self.head(x)


def _functions(mod) -> int:
    names = re.findall(r"^define internal void @([\w.]+)\(", mod.get_source(), re.M)
    return len([n for n in names if ".par" not in n])


def test_repeated_blocks_share_code_and_match_eager():
    torch.manual_seed(0)
    model = Tower().eval()
    x = torch.randn(7, 24)        # an odd batch: tails in every kernel
    with torch.no_grad():
        cm = st.compile(model, (x,))
        got, want = cm(x), model(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    mods = list(cm.modules.values())
    kernels = sum(len(m.ir["kernel"].split("\nkernel ")) - 1 for m in mods)
    functions = sum(_functions(m) for m in mods)
    # blocks 1-3 repeat block 1 (block 0 differs: the stem's relu is fused into its reads)
    assert kernels >= 6 and functions <= kernels - 2, (kernels, functions)
    with torch.no_grad():            # other weights in one block change only that block's output
        model.blocks[2].weight.mul_(-1.0)
        torch.testing.assert_close(cm(x), model(x), rtol=1e-4, atol=1e-4)
