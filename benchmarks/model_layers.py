"""Where a zoo CNN's time goes: each convolution unit of the model (conv + batch norm + the
activation after it, + the residual add it ends) compiled by schedlang.torch on its own
and timed beside the same layers in torch eager (oneDNN), in one run, same thread count;
plus the head (adaptive average pool + linear). Prints one row per unit (its kind, shapes,
ms of each, ratio eager / schedlang), then totals per kind, the largest first.

    python benchmarks/model_layers.py [--model mobilenet_v2] [--repeat 20] [--threads 2]

Timings are the best of repeats (a shared machine). The sum of a model's units is close to,
not equal to, the whole model's time (no fusion across units is lost here: a unit is what
one kernel of the whole model computes).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import defaultdict

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

import schedlang.torch as st  # noqa: E402
from schedlang.torch import zoo  # noqa: E402

ACTIVATIONS = (nn.ReLU, nn.ReLU6)


class Unit(nn.Module):
    """conv + bn (a zoo _conv_bn Sequential), an optional activation, an optional residual input."""

    def __init__(self, conv_bn: nn.Sequential, act=None, residual: bool = False):
        super().__init__()
        self.conv_bn, self.act, self.residual = conv_bn, act, residual

    def forward(self, x, skip=None):
        y = self.conv_bn(x)
        y = self.act(y) if self.act is not None else y
        return y + skip if self.residual else y

    def kind(self) -> str:
        conv = self.conv_bn[0]
        k = "x".join(map(str, conv.kernel_size))
        kind = ("dw " if conv.groups == conv.in_channels and conv.groups > 1 else
                "grouped " if conv.groups > 1 else "") + f"{k}/{conv.stride[0]}"
        return kind + (" +res" if self.residual else "")


class Head(nn.Module):
    def __init__(self, fc: nn.Linear):
        super().__init__()
        self.fc = fc

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    def kind(self) -> str:
        return "pool+linear"


def _is_conv_bn(m) -> bool:
    return isinstance(m, nn.Sequential) and len(m) == 2 and isinstance(m[0], nn.Conv2d) \
        and isinstance(m[1], nn.BatchNorm2d)


def units_of(seq) -> list:
    """(Unit, block) of a Sequential of conv_bn, activations and blocks with a `body`
    (MobileNetV2's InvertedResidual; block: the block whose input a residual unit adds)."""
    out, children = [], list(seq)
    for i, m in enumerate(children):
        if _is_conv_bn(m):
            act = children[i + 1] if i + 1 < len(children) and isinstance(children[i + 1], ACTIVATIONS) else None
            out.append((Unit(m, act), None))
        elif hasattr(m, "body"):
            inner = units_of(m.body)
            if getattr(m, "residual", False):
                inner[-1][0].residual = True
                inner[-1] = (inner[-1][0], m)
            out += inner
    return out


def inputs_of(model, x, modules) -> dict:
    """module -> the input it was called with in one run of model on x."""
    seen, hooks = {}, []

    def keep(mod, args, out):           # returns None: the output is left as it is
        seen.setdefault(mod, args[0])
    for m in modules:
        hooks.append(m.register_forward_hook(keep))
    model(x)
    for h in hooks:
        h.remove()
    return seen


def best_ms(fns, args, repeat: int) -> list:
    """The best time of each of fns on args, in interleaved rounds (a shared machine)."""
    best = [float("inf")] * len(fns)
    for r in range(repeat + 2):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn(*args)
            if r >= 2:
                best[i] = min(best[i], time.perf_counter() - t0)
    return [1e3 * b for b in best]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--size", default="full")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--only", default="", help="units whose kind contains this")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)
    target = f"llvm -num-cores={torch.get_num_threads()}"
    model, (x,) = zoo.build(args.model, args.size)
    units = units_of(model.features) + [(Head(model.classifier), None)]
    totals = defaultdict(lambda: [0.0, 0.0, 0])
    print(f"{args.model} {args.size}, threads {torch.get_num_threads()} (best of {args.repeat}, ms)")
    with torch.no_grad():
        seen = inputs_of(model, x, [u.conv_bn if isinstance(u, Unit) else u.fc for u, _ in units]
                         + [b for _, b in units if b is not None])
        for u, block in units:
            u.eval()
            if args.only not in u.kind():
                continue
            ins = (seen[u.conv_bn],) if isinstance(u, Unit) else (model.features(x),)
            ins += (seen[block],) if block is not None else ()
            y = u(*ins)
            cm = st.compile(u, ins, target=target)
            torch.testing.assert_close(cm(*ins), y, rtol=1e-3, atol=1e-3)
            eager, ours = best_ms([u, cm], ins, args.repeat)
            t = totals[u.kind()]
            t[0], t[1], t[2] = t[0] + eager, t[1] + ours, t[2] + 1
            shape = f"{list(ins[0].shape[1:])}->{list(y.shape[1:])}"
            print(f"{u.kind():18s} {shape:28s} eager {eager:7.3f}  schedlang {ours:7.3f}  "
                  f"eager/schedlang {eager / ours:5.2f}", flush=True)
    print("\nper kind (largest schedlang total first):")
    for kind, (e, s, n) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{kind:18s} x{n:<3d} eager {e:7.3f}  schedlang {s:7.3f}  eager/schedlang {e / s:5.2f}")
    e, s = sum(t[0] for t in totals.values()), sum(t[1] for t in totals.values())
    print(f"{'total':23s} eager {e:7.3f}  schedlang {s:7.3f}  eager/schedlang {e / s:5.2f}")


if __name__ == "__main__":
    main()
