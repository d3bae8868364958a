"""The fused inference fast path of nn.TransformerEncoderLayer, decomposed for AOT autograd.

In eval mode without gradients, nn.TransformerEncoderLayer (and so nn.TransformerEncoder)
calls `aten._transformer_encoder_layer_fwd`, one opaque op for the whole layer, and Dynamo
records it as such (torch.export traces the layer's Python path instead). Here it is the ops
it computes, as transformer.cpp's transformer_encoder_layer_forward does: layer norms, the
fused in-projection, scaled-dot-product attention, the out-projection, the feed-forward
block with ReLU or exact GELU and both residual adds, so the Dynamo backend lowers the same
ops torch.export gives (linear, layer_norm and scaled_dot_product_attention are kept whole).
"""
from __future__ import annotations

from typing import Callable, Dict

import torch
import torch.nn.functional as F


def _additive_mask(mask: torch.Tensor, mask_type, batch: int, heads: int, length: int, dtype) -> torch.Tensor:
    """The attention mask as SDPA's float mask, broadcastable to [batch, heads, L, L]:
    mask_type 0 is [L, L], 1 a key padding mask [batch, L], 2 [batch, heads or 1, L, L]
    (MultiheadAttention.merge_masks); a bool mask's True keys are left out."""
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    else:
        mask = mask.to(dtype)
    if mask_type == 1:
        return mask.view(batch, 1, 1, length)
    if mask_type == 2:
        return mask.view(batch, -1, length, length)
    return mask.view(1, 1, length, length)


def transformer_encoder_layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                              use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                              norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
                              mask=None, mask_type=None):
    """aten._transformer_encoder_layer_fwd of a batch-first [B, L, E] src."""
    if src.dim() != 3 or src.is_nested:
        return NotImplemented

    def norm(x, w, b):
        return F.layer_norm(x, (embed_dim,), w, b, eps)

    batch, length, _ = src.shape
    head_dim = embed_dim // num_heads
    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    q, k, v = F.linear(x, qkv_weight, qkv_bias).view(batch, length, 3, num_heads, head_dim).permute(2, 0, 3, 1, 4)
    attn_mask = None if mask is None else _additive_mask(mask, mask_type, batch, num_heads, length, src.dtype)
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    x = F.linear(ctx.transpose(1, 2).reshape(batch, length, embed_dim), proj_weight, proj_bias) + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    y = norm(x, norm_weight_2, norm_bias_2) if norm_first else x
    hidden = F.linear(y, ffn_weight_1, ffn_bias_1)
    y = F.linear(F.gelu(hidden) if use_gelu else F.relu(hidden), ffn_weight_2, ffn_bias_2) + x
    return y if norm_first else norm(y, norm_weight_2, norm_bias_2)


def decompositions() -> Dict[object, Callable]:
    """op -> decomposition, for AOT autograd's table."""
    return {torch.ops.aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer}
