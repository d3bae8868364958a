"""Convolution layers of ResNet and MobileNetV2 (and a ResNeXt-like grouped one), and
MobileNetV2's inverted residual blocks, compiled by schedlang.torch (default schedules,
batch norm folded, ReLU fused) beside torch eager (oneDNN), in one run, same
thread count, interleaved. Prints milliseconds (the best of repeats: on a shared machine a
median mostly measures the other processes) and the ratio eager / schedlang (above 1: schedlang is faster).

    python benchmarks/conv_layers.py [--repeat 50] [--threads N] [--only NAME]
"""
from __future__ import annotations

import argparse
import time
import warnings

import torch
import torch.nn as nn

import schedlang.torch as st

# name -> (in channels, out channels, kernel, stride, groups, spatial size)
LAYERS = {
    "resnet 3x3 64->64 56x56": (64, 64, 3, 1, 1, 56),
    "resnet 1x1 256->64 56x56": (256, 64, 1, 1, 1, 56),
    "resnet 3x3/2 128->256 28x28": (128, 256, 3, 2, 1, 28),
    "resnet stem 7x7/2 3->64 224x224": (3, 64, 7, 2, 1, 224),
    "mobilenet dw 3x3 144 56x56": (144, 144, 3, 1, 144, 56),
    "mobilenet dw 3x3 32 112x112": (32, 32, 3, 1, 32, 112),
    "mobilenet dw 3x3/2 96 112x112": (96, 96, 3, 2, 96, 112),
    "mobilenet dw 3x3/2 144 56x56": (144, 144, 3, 2, 144, 56),
    "mobilenet dw 3x3 384 14x14": (384, 384, 3, 1, 384, 14),
    "mobilenet dw 3x3 960 7x7": (960, 960, 3, 1, 960, 7),
    "mobilenet 1x1 96->24 56x56": (96, 24, 1, 1, 1, 56),
    "grouped 3x3 4 per group 128 28x28": (128, 128, 3, 1, 32, 28),
}

# MobileNetV2's inverted residual blocks (1x1 expansion, depthwise 3x3, 1x1 projection, batch
# norm, ReLU6): inside a block the depthwise conv runs on NCHWc activations (layout.py), as in
# the whole model, which a single layer's NCHW input and output never show.
# name -> (in, hidden, out, stride, spatial size)
BLOCKS = {
    "mobilenet block 16->96->24 /2 112x112": (16, 96, 24, 2, 112),
    "mobilenet block 32->192->32 28x28": (32, 192, 32, 1, 28),
    "mobilenet block 96->576->96 14x14": (96, 576, 96, 1, 14),
    "mobilenet block 160->960->160 7x7": (160, 960, 160, 1, 7),
}


class InvertedResidual(nn.Module):
    def __init__(self, cin, hidden, cout, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


def layer(cin, cout, k, stride, groups, bn_relu: bool) -> nn.Module:
    conv = nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False)
    return (nn.Sequential(conv, nn.BatchNorm2d(cout), nn.ReLU()) if bn_relu else conv).eval()


def best_ms(fns, x, repeat: int) -> list:
    """The best time of each of fns on x, in interleaved rounds (load from other processes
    falls on all alike)."""
    best = [float("inf")] * len(fns)
    for r in range(repeat + 3):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn(x)
            if r >= 3:
                best[i] = min(best[i], time.perf_counter() - t0)
    return [1e3 * b for b in best]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--only", default="", help="run the layers whose name contains this")
    ap.add_argument("--threads", type=int, default=0, help="threads of both (0: torch's default)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)
    target = f"llvm -num-cores={torch.get_num_threads()}"
    print(f"threads {torch.get_num_threads()}")
    with torch.no_grad():
        for name, (cin, cout, k, stride, groups, hw) in LAYERS.items():
            if args.only not in name:
                continue
            for bn_relu in (False, True):
                torch.manual_seed(0)
                m = layer(cin, cout, k, stride, groups, bn_relu)
                x = torch.randn(1, cin, hw, hw)
                cm = st.compile(m, (x,), target=target)
                torch.testing.assert_close(cm(x), m(x), rtol=1e-3, atol=1e-3)
                eager, ours = best_ms([m, cm], x, args.repeat)
                label = name + (" +bn+relu" if bn_relu else "")
                print(f"{label:44s} eager {eager:7.3f} ms  schedlang {ours:7.3f} ms  "
                      f"eager/schedlang {eager / ours:5.2f}")
        for name, (cin, hidden, cout, stride, hw) in BLOCKS.items():
            if args.only not in name:
                continue
            torch.manual_seed(0)
            m = InvertedResidual(cin, hidden, cout, stride).eval()
            x = torch.randn(1, cin, hw, hw)
            cm = st.compile(m, (x,), target=target)
            torch.testing.assert_close(cm(x), m(x), rtol=1e-3, atol=1e-3)
            eager, ours = best_ms([m, cm], x, args.repeat)
            print(f"{name:44s} eager {eager:7.3f} ms  schedlang {ours:7.3f} ms  eager/schedlang {eager / ours:5.2f}")


if __name__ == "__main__":
    main()
