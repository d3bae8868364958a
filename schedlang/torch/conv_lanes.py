"""The channel block of a program's convolutions on the CPU: a native vector, or half of one
where that blocks far more of their work.

ops/conv.block_width packs a convolution's weight in blocks of L output channels, and
layout.py keeps activations blocked ([N, C / L, H, W, L]) only where channel counts are
multiples of L: with AVX-512's 16 lanes, a model whose channels are multiples of 8 but not
of 16 (24, 40, 120, 728, 888) or whose groups are 24 channels wide runs those layers on
NCHW rows, or its grouped convolutions on their slow path. `conv_lanes` compares the
convolution work each width blocks (as layout.py and block_width would: output channels,
input channels, a group's channels in whole blocks) and takes half a vector where a whole
one blocks less than HALF_BLOCK_SHARE of what half of one blocks.

Measured one thread, Zen 4 (AVX-512; 16 -> 8 lanes; the share in parentheses): RegNetY-1.6GF
100 -> 37 ms (0.49), NF-RegNet-B0 26.5 -> 12.7 (0.01), RepGhostNet-1.0 9.7 -> 6.5 (0.72),
GhostNet-1.0 10.9 -> 8.1 (0.65), MnasNet-1.0 9.0 -> 7.1 (0.79), MobileNetV3-L 7.9 -> 7.6
(0.66), Xception-41p 329 -> 303 (0.29), MixNet-S 51 -> 49 (0.25); slower: EdgeNeXt-XXS
13.7 -> 15.7 (0.14: convolutions are a small part of it), RegNetZ-005 30.2 -> 31.6 (0.52),
SelecSLS-42 63.9 -> 65.1 (0.78); kept at 16, where 8 was slower: EfficientNet-B0 17.0 ->
18.5 (0.83), MobileNetV2 7.2 -> 7.8 (0.87). Zen 4 runs a 512-bit FMA as two 256-bit ones;
on a CPU with two 512-bit FMA units, half vectors halve the peak of the layers already
blocked, so the rule takes them only where most of the work gains.
"""
from __future__ import annotations

import math

from .torch_ir import Ref, TorchGraph

HALF_BLOCK_SHARE = 0.8
IMAGE_CHANNELS = 4        # a convolution of at most this many input channels reads an image (never blocked)


def conv_lanes(graph: TorchGraph, target) -> int:
    """The lanes of graph's convolution blocks on target: half a native float32 vector
    (8 on AVX-512) where the module docstring's rule takes it, else 0 (no limit: a native
    vector). Half vectors narrower than 8 lanes are never taken."""
    import schedlang as sl
    if not isinstance(target, sl.Target) or not sl.get_backend(target.kind).prepacks_weights:
        return 0
    lanes = target.native_lanes(32)
    half = lanes // 2
    if half < 8:
        return 0
    work = {lanes: 0, half: 0}
    for node in graph.nodes:
        if node.op != "convolution" or len(node.args) < 9 or node.args[6]:
            continue
        x, w = node.args[0], node.args[1]
        if not (isinstance(x, Ref) and isinstance(w, Ref)):
            continue
        x_shape, w_shape = graph.value_type(x.name)[0], graph.value_type(w.name)[0]
        if len(x_shape) != 4 or not all(isinstance(d, int) for d in (*w_shape, x_shape[1])):
            continue
        flops = math.prod(d for d in node.shape if isinstance(d, int)) * math.prod(w_shape[1:])
        for width in work:
            if _blocked(x_shape[1], w_shape[0], w_shape[1], node.args[8], width):
                work[width] += flops
    return half if work[half] and work[lanes] < HALF_BLOCK_SHARE * work[half] else 0


def _blocked(ic: int, oc: int, icg: int, groups: int, width: int) -> bool:
    """Whether a convolution of ic -> oc channels in groups runs blocked by width: a dense one
    whose output channels and input channels (or an image) are whole blocks, a depthwise one
    of whole blocks, a grouped one whose groups are whole blocks."""
    if groups == 1:
        return oc % width == 0 and (ic % width == 0 or ic <= IMAGE_CHANNELS)
    if groups == oc == ic:
        return oc % width == 0
    return icg % width == 0 and (oc // groups) % width == 0
