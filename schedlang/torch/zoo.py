"""The standard model zoo, written here (torchvision does not import beside the CPU torch):
ResNet-18/50, MobileNetV2, a BERT encoder, a GPT-2 stack and a Llama decoder, each with
width and depth parameters so that tests can build them tiny and benchmarks full size; and
the LLM feed-forward blocks SiluAndMul and SwiGLUMLP that the examples, tutorials, tests and
benchmarks share.

    module, inputs = zoo.build("resnet18", size="tiny")    # eval mode, float32, seeded
    module(*inputs)

The definitions follow the reference architectures (torchvision's ResNet and MobileNetV2,
Hugging Face's BERT, GPT-2 and Llama) without dropout; attention is written with linear
q/k/v and F.scaled_dot_product_attention, as current model code is.
"""
from __future__ import annotations

from typing import Callable, Dict, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import capture
from .lower import lower_graph

# ---------------------------------------------------------------- ResNet


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        self.conv1 = _conv_bn(cin, width, 3, stride)
        self.conv2 = _conv_bn(width, width, 3)
        out = width * self.expansion
        self.down = _conv_bn(cin, out, 1, stride) if stride != 1 or cin != out else None

    def forward(self, x):
        y = self.conv2(F.relu(self.conv1(x)))
        return F.relu(y + (x if self.down is None else self.down(x)))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        out = width * self.expansion
        self.conv1 = _conv_bn(cin, width, 1)
        self.conv2 = _conv_bn(width, width, 3, stride)      # stride on the 3x3, as torchvision v1.5
        self.conv3 = _conv_bn(width, out, 1)
        self.down = _conv_bn(cin, out, 1, stride) if stride != 1 or cin != out else None

    def forward(self, x):
        y = self.conv3(F.relu(self.conv2(F.relu(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """ResNet: a 7x7/2 stem and 3x3/2 max pool, four stages of blocks (the first of stages
    2-4 strides by 2), global average pool, a linear classifier. width is the first
    stage's channels (64 in the standard models)."""

    def __init__(self, block, layers: Sequence[int] = (2, 2, 2, 2), width: int = 64, num_classes: int = 1000):
        super().__init__()
        self.stem = _conv_bn(3, width, 7, 2)
        self.pool = nn.MaxPool2d(3, 2, 1)
        blocks, cin = [], width
        for stage, n in enumerate(layers):
            w = width * 2 ** stage
            for k in range(n):
                blocks.append(block(cin, w, 2 if k == 0 and stage > 0 else 1))
                cin = w * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.blocks(self.pool(F.relu(self.stem(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet18(width: int = 64, layers: Sequence[int] = (2, 2, 2, 2), num_classes: int = 1000) -> ResNet:
    return ResNet(BasicBlock, layers, width, num_classes)


def resnet50(width: int = 64, layers: Sequence[int] = (3, 4, 6, 3), num_classes: int = 1000) -> ResNet:
    return ResNet(Bottleneck, layers, width, num_classes)


# ---------------------------------------------------------------- MobileNetV2

class InvertedResidual(nn.Module):
    """1x1 expansion (ReLU6), 3x3 depthwise (ReLU6), 1x1 linear projection; a residual
    when the shape is kept."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [_conv_bn(cin, hidden, 1), nn.ReLU6()]
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(), _conv_bn(hidden, cout, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


# (expansion t, channels c, repeats n, stride s) of the standard MobileNetV2
MOBILENET_V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                         (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def _divisible(v: float, d: int = 8) -> int:
    """Channels rounded to a multiple of d, never below 90 % of v (torchvision's rule)."""
    out = max(d, int(v + d / 2) // d * d)
    return out + d if out < 0.9 * v else out


class MobileNetV2(nn.Module):
    def __init__(self, width_mult: float = 1.0, settings=MOBILENET_V2_SETTINGS, last: int = 1280,
                 num_classes: int = 1000):
        super().__init__()
        cin = _divisible(32 * width_mult)
        layers = [_conv_bn(3, cin, 3, 2), nn.ReLU6()]
        for t, c, n, s in settings:
            cout = _divisible(c * width_mult)
            for k in range(n):
                layers.append(InvertedResidual(cin, cout, s if k == 0 else 1, t))
                cin = cout
        last = _divisible(last * max(1.0, width_mult))
        layers += [_conv_bn(cin, last, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(last, num_classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2(width_mult: float = 1.0, settings=MOBILENET_V2_SETTINGS, last: int = 1280,
                 num_classes: int = 1000) -> MobileNetV2:
    return MobileNetV2(width_mult, settings, last, num_classes)


# ---------------------------------------------------------------- transformers

def _heads(x: torch.Tensor, n: int) -> torch.Tensor:
    """[B, S, H*D] -> [B, H, S, D]."""
    b, s, _ = x.shape
    return x.view(b, s, n, -1).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    """[B, H, S, D] -> [B, S, H*D]."""
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


class BertLayer(nn.Module):
    """A BERT encoder layer (post-norm): self-attention, residual, LayerNorm; a GELU MLP,
    residual, LayerNorm."""

    def __init__(self, dim: int = 768, heads: int = 12, hidden: int = 3072, eps: float = 1e-12):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=eps), nn.LayerNorm(dim, eps=eps)
        self.up, self.down = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        q, k, v = (_heads(f(x), self.heads) for f in (self.q, self.k, self.v))
        x = self.ln1(x + self.o(_merge(F.scaled_dot_product_attention(q, k, v))))
        return self.ln2(x + self.down(F.gelu(self.up(x))))


class BertEncoder(nn.Module):
    def __init__(self, dim: int = 768, heads: int = 12, hidden: int = 3072, layers: int = 12):
        super().__init__()
        self.layers = nn.Sequential(*(BertLayer(dim, heads, hidden) for _ in range(layers)))

    def forward(self, x):
        return self.layers(x)


class GPT2Block(nn.Module):
    """A GPT-2 block (pre-norm): LayerNorm, causal self-attention from one fused qkv
    linear, residual; LayerNorm, a tanh-GELU MLP, residual."""

    def __init__(self, dim: int = 768, heads: int = 12, eps: float = 1e-5):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=eps), nn.LayerNorm(dim, eps=eps)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        q, k, v = (_heads(t, self.heads) for t in self.qkv(self.ln1(x)).chunk(3, dim=-1))
        x = x + self.proj(_merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, dim: int = 768, heads: int = 12, layers: int = 12):
        super().__init__()
        self.blocks = nn.Sequential(*(GPT2Block(dim, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return self.ln(self.blocks(x))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaLayer(nn.Module):
    """A Llama decoder layer: RMSNorm, causal self-attention with rotary position
    embedding (positions from arange), residual; RMSNorm, a SwiGLU MLP, residual."""

    def __init__(self, dim: int = 4096, heads: int = 32, hidden: int = 11008, eps: float = 1e-5,
                 theta: float = 10000.0):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.norm1, self.norm2 = nn.RMSNorm(dim, eps=eps), nn.RMSNorm(dim, eps=eps)
        head_dim = dim // heads
        self.register_buffer("inv_freq", theta ** -(torch.arange(0, head_dim, 2).float() / head_dim),
                             persistent=False)

    def rotary(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)
        freqs = pos[:, None] * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        return x * angles.cos() + _rotate_half(x) * angles.sin()

    def forward(self, x):
        h = self.norm1(x)
        q, k, v = (_heads(f(h), self.heads) for f in (self.q, self.k, self.v))
        attn = F.scaled_dot_product_attention(self.rotary(q), self.rotary(k), v, is_causal=True)
        x = x + self.o(_merge(attn))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """Token ids [B, S] -> hidden states: embedding, decoder layers, a final RMSNorm."""

    def __init__(self, vocab: int = 32000, dim: int = 4096, heads: int = 32, hidden: int = 11008,
                 layers: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.Sequential(*(LlamaLayer(dim, heads, hidden) for _ in range(layers)))
        self.norm = nn.RMSNorm(dim, eps=1e-5)

    def forward(self, tokens):
        return self.norm(self.layers(self.embed(tokens)))


# ---------------------------------------------------------------- LLM feed-forward blocks


class SiluAndMul(nn.Module):
    """The gated activation of LLaMA-style MLPs: the last dimension of x split in halves,
    out = silu(left) * right."""

    def forward(self, x):
        left, right = x.chunk(2, dim=-1)
        return F.silu(left) * right


class SwiGLUMLP(nn.Module):
    """The feed-forward block of LLaMA-style transformers: three Linears without bias,
    out = down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden: int = 256, intermediate: int = 688):
        super().__init__()
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


# ---------------------------------------------------------------- the catalogue

def _image(batch: int, hw: int) -> Callable[[], Tuple[torch.Tensor, ...]]:
    return lambda: (torch.randn(batch, 3, hw, hw),)


def _tokens(batch: int, seq: int, dim: int) -> Callable[[], Tuple[torch.Tensor, ...]]:
    return lambda: (torch.randn(batch, seq, dim),)


def _ids(batch: int, seq: int, vocab: int) -> Callable[[], Tuple[torch.Tensor, ...]]:
    return lambda: (torch.randint(0, vocab, (batch, seq)),)


# name -> size -> (constructor, inputs). "tiny" compiles in seconds (tests), "full" is the
# standard model at batch 1 (benchmarks; the Llama is a few layers of realistic width).
MODELS: Dict[str, Dict[str, Tuple[Callable[[], nn.Module], Callable[[], tuple]]]] = {
    "resnet18": {
        "tiny": (lambda: resnet18(width=8, layers=(1, 1, 1, 1), num_classes=10), _image(1, 32)),
        "full": (lambda: resnet18(), _image(1, 224)),
    },
    "resnet50": {
        "tiny": (lambda: resnet50(width=4, layers=(1, 1, 1, 1), num_classes=10), _image(1, 32)),
        "full": (lambda: resnet50(), _image(1, 224)),
    },
    "mobilenet_v2": {
        "tiny": (lambda: mobilenet_v2(0.25, ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 1, 2)), last=64,
                                      num_classes=10), _image(1, 32)),
        "full": (lambda: mobilenet_v2(), _image(1, 224)),
    },
    "bert": {
        "tiny": (lambda: BertEncoder(32, 4, 64, 1), _tokens(2, 7, 32)),
        "full": (lambda: BertEncoder(768, 12, 3072, 12), _tokens(1, 128, 768)),
    },
    "gpt2": {
        "tiny": (lambda: GPT2(32, 4, 1), _tokens(2, 7, 32)),
        "full": (lambda: GPT2(768, 12, 12), _tokens(1, 128, 768)),
    },
    "llama": {
        "tiny": (lambda: Llama(vocab=50, dim=32, heads=4, hidden=88, layers=1), _ids(2, 7, 50)),
        "full": (lambda: Llama(vocab=32000, dim=2048, heads=16, hidden=5632, layers=4), _ids(1, 128, 32000)),
    },
}


def build(name: str, size: str = "tiny", seed: int = 0) -> Tuple[nn.Module, tuple]:
    """(model in eval mode with random float32 weights, example inputs), both from seed.
    Batch norms get random running statistics, so that they are not identities."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    if size not in MODELS[name]:
        raise ValueError(f"unknown size {size!r} for {name}; choose one of {', '.join(MODELS[name])}")
    make, inputs = MODELS[name][size]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = make()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                nn.init.uniform_(m.weight, 0.5, 1.5)
                nn.init.uniform_(m.bias, -0.5, 0.5)
        model = model.eval()
        return model, inputs()


def coverage(module: nn.Module, example_inputs: Sequence) -> Dict[str, int]:
    """The ops of module's graph that would run in torch, not in schedlang kernels: op ->
    number of nodes (captured and lowered, not built: cheap). Empty when all are lowered."""
    return lower_graph(capture(module, example_inputs), warn=False).fallback_counts()


if __name__ == "__main__":      # python -m schedlang.torch.zoo [size]: each model's fallbacks
    import sys
    import warnings
    warnings.simplefilter("ignore")
    size = sys.argv[1] if len(sys.argv) > 1 else "tiny"
    for model_name in MODELS:
        m, xs = build(model_name, size)
        counts = coverage(m, xs)
        print(f"{model_name:13s} {sum(counts.values()):3d} node(s) in torch: "
              + (", ".join(f"{op} x{n}" for op, n in counts.items()) or "none"))
