"""Transposed convolutions rewritten in Torch IR as a convolution and a depth-to-space (the
sub-pixel convolution), before lowering.

A transposed convolution of stride s and kernel K writes output o from the input rows i and
taps r with o + pad = i * s + r. The outputs of one phase ph = (o + pad) % s read only the taps
r = ph + s * t, so each phase is a plain convolution of the input with T = ceil(K / s) taps:

    y[n, (oc * s + ph), q] = sum over ic, t' of x[n, ic, q + t' - (T - 1)] * w2[oc * s + ph, ic, t']
    w2[oc * s + ph, ic, t'] = w[ic, oc, ph + s * (T - 1 - t')]     (0 where that tap is past K)
    out[n, oc, o]          = y[n, oc * s + (o + pad) % s, (o + pad) // s]

All phases are one convolution of s ** dims times the output channels (stride 1, padding
T - 1 or more), and the output is y's channels moved into space (pixel_shuffle's order) and
cropped; per spatial dim alike (1-d to 3-d), with groups. The rewrite is made of ATen ops the lowering
already has: the weight's (constant_pad_nd, view, flip, permute, clone, view) depend on the
module's state alone, so const_fold.py folds them into a constant that the convolution packs
like a parameter (NCHWc blocks); the output's (view, permute, clone, view, slice, add) are index
maps fused behind the convolution.

Why: ops/conv_transpose.py computes the gather form, every output visiting every tap and
skipping the other phases' with a guarded read, in plain loops; ConvTranspose2d 64 -> 32, 4 x 4,
stride 2 of a 56 x 56 image took 199 ms where torch takes 2.4 (2 threads, Zen 5).
A 3-d one becomes a 3-d convolution, which conv3d_slices.py rewrites in turn. Left to the
gather form: dilation other than 1, symbolic channels or spatial sizes (a symbolic batch is
taken), non-float dtypes.
"""
from __future__ import annotations

import math
from typing import List, Optional

import torch

from .graph_rewrite import FLOATS, NodeMaker, rewrite_nodes, static_ints
from .torch_ir import Ref, TorchGraph, TorchNode

aten = torch.ops.aten


def _args(n: TorchNode) -> Optional[tuple]:
    """(x, w, b, stride, padding, dilation, output_padding, groups) of a transposed
    aten.convolution node, or None where the node is not one."""
    if n.target is not aten.convolution.default or len(n.args) < 9 or n.kwargs:
        return None
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = n.args[:9]
    if not transposed:
        return None
    return x, w, b, stride, padding, dilation, output_padding, groups


def rewrite_transposed_convolutions(graph: TorchGraph) -> TorchGraph:
    """graph with each transposed convolution it can take (module docstring) rewritten."""
    return rewrite_nodes(graph, _rewrite)


def _rewrite(graph: TorchGraph, n: TorchNode, taken: set) -> Optional[List[TorchNode]]:
    call = _args(n)
    if call is None or n.multi or n.dtype not in FLOATS:
        return None
    x, w, b, stride, padding, dilation, extra, groups = call
    if not (isinstance(x, Ref) and isinstance(w, Ref) and (b is None or isinstance(b, Ref))):
        return None
    xs, xt = graph.value_type(x.name)
    ws, wt = graph.value_type(w.name)
    nsp = len(xs) - 2
    if nsp not in (1, 2, 3) or len(ws) != nsp + 2 or xt != n.dtype or wt != n.dtype:
        return None
    stride, padding, dilation, extra = (list(v) * (nsp if len(v) == 1 else 1) for v in (stride, padding, dilation, extra))
    if not (static_ints(xs[1:]) and static_ints(ws) and static_ints(n.shape[1:]) and static_ints(stride + padding + dilation + extra)
            and isinstance(groups, int) and all(d == 1 for d in dilation) and all(s >= 1 for s in stride)
            and all(p >= 0 for p in padding)):
        return None
    if b is not None and graph.value_type(b.name)[1] != n.dtype:
        return None
    N, IC, *size = xs
    _, OCg, *kernel = ws
    G = groups
    OC, ICg = OCg * G, IC // G
    out = list(n.shape[2:])
    if min(out) < 1:
        return None                   # (an empty result: torch's, ops/conv_transpose.py says so)
    taps = [math.ceil(k / s) for k, s in zip(kernel, stride)]
    rows = [(o - 1 + p) // s + 1 for o, p, s in zip(out, padding, stride)]        # q of the last output
    pads = [max(t - 1, q - L) for t, q, L in zip(taps, rows, size)]
    offs = [P - (t - 1) for P, t in zip(pads, taps)]
    ys = [L + 2 * P - t + 1 for L, P, t in zip(size, pads, taps)]
    phases = math.prod(stride)

    made = NodeMaker(n, taken)
    node = made.node

    # w2 [OC * phases, ICg, *T]: w [IC, OCg, *K] padded to T * s taps, each tap split (t, phase),
    # t reversed, then (group, oc, phases..., ic, t...)
    grown = [t * s for t, s in zip(taps, stride)]
    pad_list = []
    for k, g in reversed(list(zip(kernel, grown))):
        pad_list += [0, g - k]
    wp = node("w_pad", aten.constant_pad_nd.default, (w, pad_list, 0.0), [IC, OCg, *grown])
    split = [G, ICg, OCg] + [d for t, s in zip(taps, stride) for d in (t, s)]
    wv = node("w_split", aten.view.default, (wp, split), split)
    flipped = node("w_flip", aten.flip.default, (wv, [3 + 2 * d for d in range(nsp)]), split)
    order = [0, 2] + [4 + 2 * d for d in range(nsp)] + [1] + [3 + 2 * d for d in range(nsp)]
    permuted_shape = [split[i] for i in order]
    wperm = node("w_perm", aten.permute.default, (flipped, order), permuted_shape)
    wc = node("w_clone", aten.clone.default, (wperm,), permuted_shape, {"memory_format": torch.contiguous_format})
    w2 = node("w_sub", aten.view.default, (wc, [OC * phases, ICg, *taps]), [OC * phases, ICg, *taps])

    y = node("conv", aten.convolution.default,
             (x, w2, None, [1] * nsp, pads, [1] * nsp, False, [0] * nsp, G), [N, OC * phases, *ys])
    # y [N, OC * phases, *Y] -> [N, OC, Y0, s0, (Y1, s1)] -> [N, OC, Y0 * s0, ...], cropped
    yv_shape = [N, OC, *stride, *ys]
    yv = node("y_split", aten.view.default, (y, yv_shape), yv_shape)
    order = [0, 1] + [d for i in range(nsp) for d in (2 + nsp + i, 2 + i)]
    yp_shape = [yv_shape[i] for i in order]
    yp = node("y_perm", aten.permute.default, (yv, order), yp_shape)
    yc = node("y_clone", aten.clone.default, (yp,), yp_shape, {"memory_format": torch.contiguous_format})
    flat = [N, OC] + [Y * s for Y, s in zip(ys, stride)]
    z = node("y_space", aten.view.default, (yc, flat), flat)
    shape = list(flat)
    for d in range(nsp):
        start = padding[d] + offs[d] * stride[d]
        shape[2 + d] = out[d]
        z = node(f"y_crop{d}_slice", aten.slice.Tensor, (z, 2 + d, start, start + out[d]), shape)
    if b is not None:
        bv = node("bias_view", aten.view.default, (b, [1, OC] + [1] * nsp), [1, OC] + [1] * nsp)
        z = node("bias_add", aten.add.Tensor, (z, bv), shape)
    return made.done()
