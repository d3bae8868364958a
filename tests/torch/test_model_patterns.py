"""What transformer and CNN code writes besides the zoo's models (hand-written causal masks,
tril/triu, masked_fill, bool and padding masks, grouped-query attention, position
embeddings, nn.MultiheadAttention, every activation, unfold, torch.roll, nan guards, an
empty key/value cache), compiled whole (no op in torch, one part) and compared with eager;
a dynamic sequence length (arange to a symbolic end); the same ops on the cuda target,
emulated; an empty tensor that an op other than cat reads runs in torch."""
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st
from schedlang.torch import zoo

from .test_gather import Embed

torch.manual_seed(0)
S, D = 7, 8


@pytest.fixture(autouse=True)
def _inference():
    """The compiled modules compute no gradients: call them (and eager) as inference does."""
    with torch.no_grad():
        yield


class ManualCausal(nn.Module):
    def forward(self, q, k, v):
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        mask = torch.tril(torch.ones(S, S, dtype=torch.bool))
        return torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v


class TriuMask(nn.Module):
    def forward(self, q, k, v):
        m = torch.triu(torch.full((S, S), float("-inf")), diagonal=1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


class BoolMask(nn.Module):
    def forward(self, q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


class PaddingMask(nn.Module):
    """BERT's additive mask from a [B, S] 0/1 attention mask."""

    def forward(self, q, k, v, am):
        ext = (1.0 - am[:, None, None, :].float()) * torch.finfo(torch.float32).min
        return F.scaled_dot_product_attention(q, k, v, attn_mask=ext)


class GroupedQuery(nn.Module):
    def forward(self, q, k, v):
        k = k.repeat_interleave(2, dim=1)
        v = v[:, :, None].expand(2, 2, 2, S, D).reshape(2, 4, S, D)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class PositionEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(20, D), nn.Embedding(S, D)

    def forward(self, ids):
        return self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))[None]


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.MultiheadAttention(D, 2, batch_first=True)

    def forward(self, x):
        return self.m(x, x, x, need_weights=False)[0]


class Activations(nn.Module):
    def forward(self, x):
        return (F.hardswish(x) + F.hardsigmoid(x) + F.mish(x) + F.selu(x) + F.celu(x, 0.7) + F.elu(x)
                + F.leaky_relu(x) + F.softplus(x) + F.relu6(x) + torch.sigmoid(x) * torch.tanh(x)
                + F.logsigmoid(x) + F.softsign(x) + F.hardtanh(x, -2.0, 2.5))


class PadAndReduce(nn.Module):
    def forward(self, x):
        y = F.pad(x, (1, 2, 3, 0), value=-1.0)
        return F.relu6(y), (y > 2).any(-1), (y > -3).all()


class Unfold(nn.Module):
    """im2col: a gather with int64 indices from a padded copy that is inlined into it."""

    def forward(self, x):
        return F.unfold(x, 3, padding=1, stride=2) + F.unfold(x, (2, 3), dilation=(1, 2)).sum()


class ShiftedWindows(nn.Module):
    """Swin's cyclic shift (torch.roll: integer fmod of the indices) and window partition."""

    def forward(self, x):
        x = torch.roll(x, (-2, 3), (1, 2))
        return x.view(1, 2, 4, 2, 4, 3).permute(0, 1, 3, 2, 4, 5).reshape(-1, 16, 3)


class MergedWindows(nn.Module):
    """Swin v2's window merge: windows viewed back into an image, the cyclic shift undone
    (torch.roll) and a layer norm over channels (timm's swinv2_cr: an internal error where
    the norm's schedule followed the roll's int64 indices through the view)."""

    def forward(self, x):
        c = x.shape[-1]
        x = x.view(1, 2, 2, 7, 7, c).permute(0, 1, 3, 2, 4, 5).reshape(1, 14, 14, c)
        return F.layer_norm(torch.roll(x, (3, 3), (1, 2)), (c,))


class NanGuards(nn.Module):
    """Guards model code writes around bad values, and polar coordinates."""

    def forward(self, x, y):
        x = torch.where(torch.isnan(x) | torch.isinf(x), torch.zeros_like(x), x)
        return torch.nan_to_num(x / y), torch.atan2(x, y), torch.hypot(x, y)


class EmptyCache(nn.Module):
    """transformers' key/value cache: it starts as torch.tensor([]) (a constant of shape (0,)),
    concatenated with each step's keys and values."""

    def forward(self, q, k, v):
        cache_k, cache_v = torch.tensor([]), torch.tensor([])
        k, v = torch.cat([cache_k, k], -2), torch.cat([cache_v.clone(), v], -2)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class PartialRotary(nn.Module):
    """GPT-NeoX's rotary embedding of the first rot features, the rest concatenated back as they
    were: with rot = all features, that rest is an empty slice no one else reads."""

    def __init__(self, rot: int):
        super().__init__()
        self.rot = rot

    def forward(self, x):
        half = self.rot // 2
        angle = torch.arange(x.shape[-2], dtype=torch.float32)[:, None] / 100 ** (torch.arange(half) / half)
        a, b, rest = x[..., :half], x[..., half:self.rot], x[..., self.rot:]
        return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos(), rest], -1)


q = torch.randn(2, 4, S, D)
kv = torch.randn(2, 2, S, D)
CASES = {
    "manual_causal": (ManualCausal, (q, q, q)),
    "triu_mask": (TriuMask, (q, q, q)),
    "bool_mask": (BoolMask, (q, q, q, (torch.rand(S, S) > 0.3) & (torch.arange(S) != 2)[:, None])),  # row 2: none
    "padding_mask": (PaddingMask, (q, q, q, torch.tensor([[1] * S, [1] * 4 + [0] * 3]))),
    "grouped_query": (GroupedQuery, (q, kv, kv)),
    "position_embedding": (PositionEmbedding, (torch.randint(0, 20, (2, S)),)),
    "multihead_attention": (MHA, (torch.randn(2, S, D),)),
    "activations": (Activations, (torch.randn(3, 9) * 3,)),
    "pad_and_reduce": (PadAndReduce, (torch.randn(2, 3, 5) * 3,)),
    "unfold": (Unfold, (torch.randn(1, 2, 5, 6),)),
    "shifted_windows": (ShiftedWindows, (torch.randn(1, 8, 8, 3),)),
    "merged_windows": (MergedWindows, (torch.randn(4, 7, 7, 64),)),
    "empty_cache": (EmptyCache, (q, q, q)),
    "rotary_whole": (lambda: PartialRotary(D), (q,)),          # an empty rest
    "rotary_partial": (lambda: PartialRotary(D // 2), (q,)),
    "nan_guards": (NanGuards, (torch.tensor([[1.0, float("nan"), float("inf"), -2.0]]),
                               torch.tensor([0.0, 1.0, -1.0, 0.0]))),
}


def _flat(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


@pytest.mark.parametrize("name", sorted(CASES))
def test_pattern_compiles_whole_and_matches_eager(name):
    make, inputs = CASES[name]
    module = make().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, inputs)
    assert compiled.fallback_ops() == {} and len(compiled.program.parts) == 1
    with torch.no_grad():
        want = module(*inputs)
    for g, w in zip(_flat(compiled(*inputs)), _flat(want)):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_llama_with_a_dynamic_sequence_length():
    """The rotary positions and the causal mask are aranges to the symbolic length."""
    module, (ids,) = zoo.build("llama")
    seq = torch.export.Dim("seq", min=2, max=64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(module, (ids,), dynamic_shapes=({1: seq},))
    for s in (3, 13):
        x = torch.randint(0, 50, (2, s))
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), module(x), rtol=1e-4, atol=1e-4)


class _Together(nn.Module):
    """Several CASES side by side: their inputs in order, their outputs as one flat tuple (one
    capture and one CUDA build for all of them, the graphs independent so each keeps its kernels)."""

    def __init__(self, cases):
        super().__init__()
        self.parts = nn.ModuleList(make() for make, _ in cases)
        self.arity = [len(inputs) for _, inputs in cases]

    def forward(self, *inputs):
        outs, start = [], 0
        for part, n in zip(self.parts, self.arity):
            out = part(*inputs[start:start + n])
            outs += list(out) if isinstance(out, tuple) else [out]
            start += n
        return tuple(outs)


def test_cuda_target_emulated():
    """The cuda default schedules of the new ops; the simt engine checks every access, so an
    out-of-range index is clamped in the kernel and raised by the guard."""
    pytest.importorskip("cuda.bindings")
    from .test_cuda_emulate import check_emulated, compile_cuda
    module = _Together([CASES[name] for name in ("activations", "pad_and_reduce", "bool_mask")]).eval()
    inputs = tuple(x for _, case_inputs in (CASES["activations"], CASES["pad_and_reduce"], CASES["bool_mask"])
                   for x in case_inputs)
    check_emulated(compile_cuda(module, inputs), module, inputs, engines=("shim",))
    module, ids = Embed().eval(), torch.randint(0, 13, (2, 5))
    compiled = compile_cuda(module, (ids,))
    check_emulated(compiled, module, (ids,))
    ids[1, 2] = 13
    for engine in ("shim", "simt"):
        with pytest.raises(IndexError, match="embedding: index out of range"):
            compiled.emulate(ids, engine=engine)


def test_an_empty_value_read_by_another_op_runs_in_torch():
    """Not a cat: the op reading a tensor of no elements runs in torch (no crash). (An empty
    constant's sum is a value of the state alone: folded, const_fold.py.)"""
    class ReadsEmpty(nn.Module):
        def forward(self, x):
            return x * 2, x[:, :0].sum() + x.sum()
    x = torch.randn(3, 4)
    with pytest.warns(st.FallbackWarning):
        compiled = st.compile(ReadsEmpty(), (x,))
    for got, want in zip(compiled(x), ReadsEmpty()(x)):
        torch.testing.assert_close(got, want)


def test_cosine_embedding_loss_compiles_whole():
    """Its decomposition allocates with empty_permuted (values unspecified, then written)."""
    loss = nn.CosineEmbeddingLoss(margin=0.2)
    a, b, y = torch.randn(5, 8), torch.randn(5, 8), torch.tensor([1, -1, 1, 1, -1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(loss, (a, b, y))
    torch.testing.assert_close(compiled(a, b, y), loss(a, b, y))
