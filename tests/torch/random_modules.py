"""Random small torch modules: chains of the ops real models use, on odd shapes, for
test_random_modules.py (compiled whole, compared with eager torch). Replay one:

    python -m tests.torch.random_modules SEED      # prints the module and the max difference

Two families, drawn by the seed: images (convolutions dense, grouped, depthwise and transposed,
padded by each padding mode; batch, group, instance, layer and local response norms;
activations; squeeze-and-excitation; pooling incl. adaptive, ceil_mode, dilation, power-average
and a divisor override; padding modes; resizing to a size or by a factor; pixel shuffle; slices;
residual adds and concats) and sequences (Linear, layer norm, RMS norm, softmax, SDPA causal or
not through a head split, nn.MultiheadAttention, grouped-query attention, rotary embedding of
some or all features, a hand-written causal mask, conv1d, batched products, embeddings, gathers,
top-k and sort, chunked gates, slices). Each
step is drawn for the shape the chain has reached; a step eager torch rejects is skipped.
"""
from __future__ import annotations

import random
import sys
from typing import Callable, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class Chain(nn.Module):
    """The drawn steps: ("mod", i) runs mods[i]; ("fn", f) runs f; ("save",) keeps the value;
    ("add",) / ("cat", dim) combine with the last kept one where the shapes allow;
    ("channels_last", i) runs mods[i] on the channels-last view; ("tokens", i) on the image
    flattened to [batch, positions, channels]; ("conv1d", i) runs mods[i] on
    [batch, features, positions]."""

    def __init__(self, steps: List[tuple], mods: List[nn.Module]):
        super().__init__()
        self.steps = steps
        self.mods = nn.ModuleList(mods)

    def forward(self, x):
        kept = []
        for step in self.steps:
            kind = step[0]
            if kind == "mod":
                x = self.mods[step[1]](x)
            elif kind == "fn":
                x = step[1](x)
            elif kind == "save":
                kept.append(x)
            elif kind == "add" and kept and kept[-1].shape == x.shape:
                x = x + kept[-1]
            elif kind == "cat" and kept and _cat_ok(kept[-1], x, step[1]):
                x = torch.cat([x, kept[-1]], dim=step[1])
            elif kind == "channels_last":
                x = self.mods[step[1]](x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            elif kind == "tokens":           # [N, H * W, C] (SegFormer's, ViT's), then the image again
                n, _, h, w = x.shape
                x = self.mods[step[1]](x.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(n, -1, h, w)
            elif kind == "conv1d":
                x = self.mods[step[1]](x.transpose(1, 2)).transpose(1, 2)
        return x


def _cat_ok(a, b, dim: int) -> bool:
    return a.dim() == b.dim() and all(a.shape[d] == b.shape[d] for d in range(a.dim()) if d != dim)


def _act(r: random.Random) -> nn.Module:
    return r.choice([nn.ReLU(), nn.ReLU6(), nn.GELU(), nn.GELU("tanh"), nn.SiLU(), nn.Hardswish(), nn.Sigmoid(),
                     nn.Tanh(), nn.LeakyReLU(0.1), nn.ELU(), nn.Mish(), nn.Hardsigmoid(), nn.PReLU(), nn.Softplus(),
                     nn.CELU(0.5), nn.SELU(), nn.Hardtanh(-0.3, 0.8), nn.Softsign(), nn.LogSigmoid()])


class SqueezeExcite(nn.Module):
    """MobileNetV3's channel attention: pooled, squeezed, excited, a hard sigmoid gate."""

    def __init__(self, c: int):
        super().__init__()
        self.squeeze, self.excite = nn.Conv2d(c, max(1, c // 2), 1), nn.Conv2d(max(1, c // 2), c, 1)

    def forward(self, x):
        return x * F.hardsigmoid(self.excite(F.relu(self.squeeze(F.adaptive_avg_pool2d(x, 1)))))


def _image_step(r: random.Random, shape, steps, mods) -> None:
    C, H, W = shape[1], shape[2], shape[3]

    def mod(m):
        mods.append(m)
        steps.append(("mod", len(mods) - 1))
    op = r.choice(["conv", "conv", "dw", "bn", "act", "act", "pool", "save", "add", "cat", "shuffle", "reduce",
                   "group_norm", "conv_t", "pad", "pixel", "math", "layer_norm", "slice", "resize", "se", "tokens"])
    if op in ("conv", "dw"):
        k, s, d = r.choice([1, 3, 3, 5]), r.choice([1, 1, 2]), r.choice([1, 1, 2])
        p = r.choice([0, k // 2, k // 2])
        groups = C if op == "dw" else (r.choice([1, 1, 2]) if C % 2 == 0 else 1)
        out = C * r.choice([1, 2]) if op == "dw" else r.choice([1, 4, 6, 8, 13, 16, 24])
        mode = r.choice(["zeros", "zeros", "reflect", "replicate", "circular"]) if p else "zeros"
        mod(nn.Conv2d(C, max(groups, out // groups * groups), k, s, p, d, groups=groups, bias=r.random() < 0.5,
                      padding_mode=mode))
    elif op == "bn":
        bn = nn.BatchNorm2d(C)
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
        mod(bn)
    elif op == "act":
        mod(_act(r))
    elif op == "pool":
        k, s = r.choice([2, 3]), r.choice([1, 2])
        p = r.choice([0, 1]) if k == 3 else 0
        mod(r.choice([nn.MaxPool2d(k, s, p, ceil_mode=r.random() < 0.3),
                      nn.AvgPool2d(k, s, p, ceil_mode=r.random() < 0.3, count_include_pad=r.random() < 0.5),
                      nn.AdaptiveAvgPool2d((r.randint(1, 4), r.randint(1, 4))), nn.AdaptiveMaxPool2d(r.randint(1, 3)),
                      nn.MaxPool2d(3, s, 1, dilation=2), nn.AvgPool2d(3, 1, 1, divisor_override=r.choice([2, 5])),
                      nn.LPPool2d(2, 2)]))
    elif op in ("save", "add"):
        steps.append((op,))
    elif op == "cat":
        steps.append(("cat", 1))
    elif op == "shuffle" and C % 2 == 0:
        steps.append(("fn", lambda t: t.reshape(t.shape[0], 2, t.shape[1] // 2, *t.shape[2:]).transpose(1, 2)
                      .reshape(t.shape)))
    elif op == "reduce":
        steps.append(("fn", r.choice([lambda t: t.mean((2, 3), keepdim=True), lambda t: t.amax(1, keepdim=True),
                                      lambda t: t.sum(3, keepdim=True)])))
    elif op == "group_norm":
        mod(r.choice([nn.GroupNorm(r.choice([g for g in (1, 2, 4, C) if C % g == 0]), C),
                      nn.InstanceNorm2d(C, affine=r.random() < 0.5), nn.LocalResponseNorm(r.choice([2, 3]))]))
    elif op == "conv_t":
        k, s = r.choice([2, 3, 4]), r.choice([1, 2])
        p = r.choice([0, 1]) if k > 2 else 0
        mod(nn.ConvTranspose2d(C, r.choice([2, 5, 8]), k, s, p, output_padding=r.choice([0, 1]) if s == 2 and p else 0,
                               bias=r.random() < 0.5))
    elif op == "pad":
        mode, pads = r.choice(["constant", "reflect", "replicate"]), tuple(r.choice([0, 1, 2]) for _ in range(4))
        steps.append(("fn", lambda t: F.pad(t, pads, mode=mode)))
    elif op == "pixel" and C % 4 == 0:
        mod(nn.PixelShuffle(2))
    elif op == "math":
        steps.append(("fn", r.choice([
            lambda t: t.clamp(-0.5, 0.7), lambda t: torch.where(t > 0, t, t * 0.3), lambda t: t.abs().sqrt(),
            lambda t: t.pow(2) - t, lambda t: torch.exp(-t.abs()), lambda t: t.softmax(1), lambda t: t.cumsum(-1),
            lambda t: t.var(1, keepdim=True), lambda t: t - t.amax((2, 3), keepdim=True), lambda t: t.flip(-1),
            lambda t: t.roll(1, -1), lambda t: torch.max(t, 1, keepdim=True)[0]])))
    elif op == "layer_norm":
        mods.append(nn.LayerNorm(C))
        steps.append(("channels_last", len(mods) - 1))
    elif op == "tokens":
        mods.append(r.choice([nn.Linear(C, r.choice([C, 8, 16, 32, 2 * C])), nn.LayerNorm(C)]))
        steps.append(("tokens", len(mods) - 1))
    elif op == "slice" and H > 3 and W > 3:
        steps.append(("fn", r.choice([lambda t: t[:, :, 1:, :-1], lambda t: t[:, :, ::2, 1::2],
                                      lambda t: t[:, 1:] if t.shape[1] > 1 else t])))
    elif op == "resize":
        size, mode = (r.randint(3, 17), r.randint(3, 17)), r.choice(["nearest", "bilinear", "bicubic", "area"])
        kw = {"align_corners": r.random() < 0.5} if mode in ("bilinear", "bicubic") else {}
        if r.random() < 0.3:
            kw["scale_factor"], size = r.choice([2, 0.5, 1.5]), None
            mode = "nearest-exact" if mode == "area" else mode
        steps.append(("fn", lambda t: F.interpolate(t, size=size, mode=mode, **kw)))
    elif op == "se":
        mod(SqueezeExcite(C))


def _attention(t, heads: int, causal: bool):
    B, S, E = t.shape
    q = t.reshape(B, S, heads, E // heads).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, q * 0.5, q + 1.0, is_causal=causal)
    return o.transpose(1, 2).reshape(B, S, E)


def _rotary(t, features: int):
    """The rotary position embedding of the first `features` (even) features; the rest (empty
    when features is all of them) concatenated back."""
    half = features // 2
    angle = torch.arange(t.shape[1], dtype=torch.float32)[:, None] / 100 ** (torch.arange(half) / half)
    a, b = t[..., :half], t[..., half:features]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos(), t[..., features:]], -1)


class MHA(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool):
        super().__init__()
        self.attn, self.causal = nn.MultiheadAttention(d, heads, batch_first=True), causal

    def forward(self, x):
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1) if self.causal else None
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


class GroupedQuery(nn.Module):
    """Llama's attention: fewer key/value heads than query heads, repeated to match."""

    def __init__(self, d: int, heads: int, kv_heads: int, causal: bool):
        super().__init__()
        self.heads, self.kv_heads, self.causal = heads, kv_heads, causal
        self.q, self.kv = nn.Linear(d, d, bias=False), nn.Linear(d, 2 * kv_heads * (d // heads), bias=False)

    def forward(self, x):
        B, S, D = x.shape
        q = self.q(x).view(B, S, self.heads, D // self.heads).transpose(1, 2)
        k, v = self.kv(x).view(B, S, 2 * self.kv_heads, D // self.heads).transpose(1, 2).chunk(2, 1)
        k, v = (t.repeat_interleave(self.heads // self.kv_heads, 1) for t in (k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(B, S, D)


class Embed(nn.Module):
    """A lookup by indices computed from the values (|x| * 3, clamped to the table)."""

    def __init__(self, rows: int, d: int):
        super().__init__()
        self.table = nn.Embedding(rows, d, padding_idx=0)

    def forward(self, x):
        return self.table((x[..., 0].abs() * 3).long().clamp(max=self.table.num_embeddings - 1))


def _masked_attention(t):
    S = t.shape[1]
    keep = torch.ones(S, S, dtype=torch.bool).tril()
    return (t @ t.transpose(1, 2)).masked_fill(~keep, float("-inf")).softmax(-1) @ t


def _sequence_step(r: random.Random, shape, steps, mods) -> None:
    S, D = shape[1], shape[-1]

    def mod(m):
        mods.append(m)
        steps.append(("mod", len(mods) - 1))
    op = r.choice(["linear", "linear", "layer_norm", "act", "softmax", "save", "add", "attention", "reduce",
                   "causal", "rms", "slice", "conv1d", "bmm", "gather", "math", "chunk", "rotary", "mha", "gqa",
                   "embed"])
    if op == "linear":
        mod(nn.Linear(D, r.choice([1, 5, 16, 24, 48, 64, 100]), bias=r.random() < 0.5))
    elif op == "layer_norm":
        ln = nn.LayerNorm(D)
        ln.weight.data.uniform_(0.5, 1.5)
        ln.bias.data.uniform_(-0.5, 0.5)
        mod(ln)
    elif op == "rms":
        if r.random() < 0.5:
            mod(nn.RMSNorm(D, eps=1e-5))
        else:
            steps.append(("fn", lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)))
    elif op == "act":
        mod(_act(r))
    elif op == "softmax":
        steps.append(("fn", r.choice([lambda t: t.softmax(-1), lambda t: t.log_softmax(-1), lambda t: t.softmax(1)])))
    elif op in ("save", "add"):
        steps.append((op,))
    elif op == "attention":
        heads, causal = r.choice([h for h in (1, 2, 4) if D % h == 0]), r.random() < 0.5
        steps.append(("fn", lambda t: _attention(t, heads, causal)))
    elif op == "reduce":
        steps.append(("fn", r.choice([lambda t: t - t.amax(-1, keepdim=True), lambda t: t.cumsum(1),
                                      lambda t: t / (t.abs().sum(1, keepdim=True) + 1)])))
    elif op == "causal":
        steps.append(("fn", _masked_attention))
    elif op == "slice" and S > 2:
        steps.append(("fn", r.choice([lambda t: t[:, 1:], lambda t: t[:, ::2], lambda t: t.flip(1)])))
    elif op == "conv1d":
        k = r.choice([1, 3, 4])
        mods.append(nn.Conv1d(D, r.choice([4, 8, 13]), k, padding=r.choice([0, k - 1, k // 2]),
                              groups=D if r.random() < 0.2 else 1))
        steps.append(("conv1d", len(mods) - 1))
    elif op == "bmm":
        steps.append(("fn", r.choice([lambda t: t @ t.transpose(-1, -2) @ t * 0.1,
                                      lambda t: torch.einsum("bsd,btd->bst", t, t).softmax(-1) @ t])))
    elif op == "gather":
        steps.append(("fn", r.choice([
            lambda t: t.gather(-1, t.argmax(-1, keepdim=True).expand(*t.shape[:-1], 2)),
            lambda t: t.index_select(1, torch.tensor([0, t.shape[1] - 1, 0])),
            lambda t: t.topk(min(3, t.shape[-1]), -1)[0], lambda t: t.sort(-1)[0]])))
    elif op == "math":
        steps.append(("fn", r.choice([
            lambda t: t.clamp(min=-0.2), lambda t: torch.tanh(t) * torch.sigmoid(t), lambda t: t.std(-1, keepdim=True) + t,
            lambda t: t.logsumexp(-1, keepdim=True) - t, lambda t: t.cumprod(1).clamp(-9, 9),
            lambda t: F.normalize(t, dim=-1), lambda t: t.masked_fill(t > 0.5, 0.0),
            lambda t: t.mean(1, keepdim=True).expand_as(t) - t])))
    elif op == "rotary" and D % 2 == 0:
        features = r.choice([D, D // 2 + D // 2 % 2])
        steps.append(("fn", lambda t: _rotary(t, features)))
    elif op == "mha":
        mod(MHA(D, r.choice([h for h in (1, 2, 4) if D % h == 0]), r.random() < 0.5))
    elif op == "gqa":
        heads = [(h, kv) for h in (2, 4, 8) for kv in (1, 2) if D % h == 0 and h % kv == 0 and h > kv]
        if heads:
            mod(GroupedQuery(D, *r.choice(heads), r.random() < 0.5))
    elif op == "embed":
        mod(Embed(r.choice([3, 10, 50]), r.choice([8, 16, 24])))
    elif op == "chunk" and D % 2 == 0:
        steps.append(("fn", r.choice([lambda t: t.chunk(2, -1)[0] * F.silu(t.chunk(2, -1)[1]),
                                      lambda t: torch.stack(t.chunk(2, -1), 1).sum(1), lambda t: torch.cat([t, -t], 1)])))


def random_module(seed: int) -> Tuple[nn.Module, torch.Tensor]:
    """A random Chain in eval mode and its input, the same for the same seed."""
    r = random.Random(seed)
    torch.manual_seed(seed)
    image = r.random() < 0.55
    if image:
        x = torch.randn(r.choice([1, 1, 2]), r.choice([1, 3, 4, 5, 8, 16]), r.randint(5, 29), r.randint(5, 29))
    else:
        x = torch.randn(r.choice([1, 1, 2]), r.randint(1, 37), r.choice([3, 8, 16, 24, 33, 64]))
    draw: Callable = _image_step if image else _sequence_step
    steps: List[tuple] = []
    mods: List[nn.Module] = []
    with torch.no_grad():
        y = x
        for _ in range(r.randint(2, 7)):
            n_steps, n_mods = len(steps), len(mods)
            try:                       # a step torch rejects (at this shape) is dropped
                draw(r, tuple(y.shape), steps, mods)
                y = Chain(steps, mods).eval()(x)
            except (RuntimeError, ValueError, IndexError):
                del steps[n_steps:]
                del mods[n_mods:]
        if image and r.random() < 0.5:
            steps.append(("fn", lambda t: t.flatten(1)))
            mods.append(nn.Linear(y.flatten(1).shape[1], r.choice([1, 7, 10, 33])))
            steps.append(("mod", len(mods) - 1))
    return Chain(steps, mods).eval(), x


def _main(argv) -> None:
    import schedlang.torch as slt
    seed = int(argv[0])
    module, x = random_module(seed)
    print(f"seed {seed}: input {tuple(x.shape)}")
    for step in module.steps:
        print("  ", step[0], module.mods[step[1]] if step[0] in ("mod", "channels_last", "tokens", "conv1d") else step[1:])
    with torch.no_grad():
        want = module(x)
        got = slt.compile(module, (x,))(x)
    print(f"output {tuple(want.shape)}, max |difference| {(got - want).abs().max().item():.3g}")


if __name__ == "__main__":
    _main(sys.argv[1:])
