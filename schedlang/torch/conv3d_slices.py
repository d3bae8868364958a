"""3-d convolutions rewritten in Torch IR as one 2-d convolution over depth windows, before
lowering.

An output plane od of a 3-d convolution reads the kd input planes od * sd + rd (rd < kd) of
every input channel: those planes, side by side as kd times the channels, are the input of a
2-d convolution whose weight is the 3-d one viewed [OC, ICg * kd, kh, kw] (channel c * kd + rd
is w[:, c, rd]). With each output plane a batch entry:

    xw  = unfold(pad_depth(x), 2, kd, sd)          [N, C, OD, H, W, kd]
    x2  = xw.permute(0, 2, 1, 5, 3, 4)             [N * OD, C * kd, H, W]   (clone, view)
    y   = conv2d(x2, w.view(OC, ICg * kd, kh, kw), bias, the (h, w) stride, padding,
                 dilation, groups)                 [N * OD, OC, OH, OW]
    out = y.view(N, OD, OC, OH, OW).permute(0, 2, 1, 3, 4)

so a 3-d convolution takes the 2-d convolution's NCHWc register tiles and packed weights, at
the cost of reading each input plane kd / sd times through the window copy (which the 2-d
convolution's padded input copy absorbs). Taken where the channels and spatial sizes are
static (the batch may be symbolic) and the depth dilation is 1; ops/conv3d.py's plain
reduction keeps the rest.

Why: that plain reduction ran Conv3d 8 -> 16, 3 x 3 x 3 over 16 x 32 x 32 in 35.8 ms where
torch takes 2.6 (2 threads, Zen 5).
"""
from __future__ import annotations

from typing import List, Optional

import torch

from .graph_rewrite import FLOATS, NodeMaker, rewrite_nodes, static_ints
from .torch_ir import Ref, TorchGraph, TorchNode

aten = torch.ops.aten


def rewrite_conv3d(graph: TorchGraph) -> TorchGraph:
    """graph with each 3-d convolution it can take (module docstring) rewritten."""
    return rewrite_nodes(graph, _rewrite)


def _rewrite(graph: TorchGraph, n: TorchNode, taken: set) -> Optional[List[TorchNode]]:
    if n.target is not aten.convolution.default or len(n.args) < 9 or n.kwargs or n.multi or n.dtype not in FLOATS:
        return None
    x, w, b, stride, padding, dilation, transposed, _, groups = n.args[:9]
    if transposed or not (isinstance(x, Ref) and isinstance(w, Ref) and (b is None or isinstance(b, Ref))):
        return None
    xs, xt = graph.value_type(x.name)
    ws, wt = graph.value_type(w.name)
    if len(xs) != 5 or len(ws) != 5 or xt != n.dtype or wt != n.dtype:
        return None
    stride, padding, dilation = (list(v) * (3 if len(v) == 1 else 1) for v in (stride, padding, dilation))
    if not (static_ints(xs[1:]) and static_ints(ws) and static_ints(n.shape[1:]) and static_ints(stride + padding + dilation)
            and isinstance(groups, int) and dilation[0] == 1 and padding[0] >= 0):
        return None
    N, C, D, H, W = xs
    OC, ICg, kd, kh, kw = ws
    _, _, OD, OH, OW = n.shape
    sd, pd = stride[0], padding[0]
    if (D + 2 * pd - kd) // sd + 1 != OD or min(n.shape[1:]) < 1:
        return None
    made = NodeMaker(n, taken)
    node = made.node

    src = x
    if pd:
        src = node("depth_pad", aten.constant_pad_nd.default, (x, [0, 0, 0, 0, pd, pd], 0.0), [N, C, D + 2 * pd, H, W])
    win = node("depth_unfold", aten.unfold.default, (src, 2, kd, sd), [N, C, OD, H, W, kd])
    perm_shape = [N, OD, C, kd, H, W]
    perm = node("planes_permute", aten.permute.default, (win, [0, 2, 1, 5, 3, 4]), perm_shape)
    dense = node("planes_clone", aten.clone.default, (perm,), perm_shape, {"memory_format": torch.contiguous_format})
    x2 = node("planes_view", aten.view.default, (dense, [N * OD, C * kd, H, W]), [N * OD, C * kd, H, W])
    w2 = node("w2d_view", aten.view.default, (w, [OC, ICg * kd, kh, kw]), [OC, ICg * kd, kh, kw])
    y = node("conv2d", aten.convolution.default,
             (x2, w2, b, stride[1:], padding[1:], dilation[1:], False, [0, 0], groups), [N * OD, OC, OH, OW])
    yv = node("out_view", aten.view.default, (y, [N, OD, OC, OH, OW]), [N, OD, OC, OH, OW])
    node("out_permute", aten.permute.default, (yv, [0, 2, 1, 3, 4]), [N, OC, OD, OH, OW])
    return made.done()
