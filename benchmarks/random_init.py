"""Random weights that exercise every part of a model: the model sweeps (timm_models.py,
hf_models.py) compare a compiled model's output with eager's, and a parameter initialised
to a constant can hide a whole branch from that comparison."""
from __future__ import annotations


def unfold_constant_init(model) -> int:
    """Spread every parameter and buffer a model starts at one constant (timm: the zero gamma
    of each residual block's last norm, 1e-5 layer scales; everywhere: zero biases, unit norm
    weights, batch norm's unit statistics) by a random 0.1: otherwise a residual branch adds 0 (or 1e-5 of itself) to
    the logits, and a wrong kernel there changes nothing the comparison sees. Returns how
    many tensors it changed."""
    import torch
    changed = 0
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if not t.is_floating_point() or t.numel() < 2 or not bool((t == t.flatten()[0]).all()):
            continue
        noise = 0.1 * torch.randn_like(t)
        t.data += noise.abs() if name.endswith("running_var") else noise
        changed += 1
    return changed
