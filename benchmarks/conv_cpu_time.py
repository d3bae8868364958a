"""tune.py's conv2d (64 -> 64 channels, 56 x 56, 3 x 3, pad 1, weights packed ahead of time) at
one thread, CPU time: auto-scheduler schedules beside F.conv2d (oneDNN) of the same tensors,
timed in one process in interleaved rounds (cpu_time.cpu_time_call, the best round), each as a
ratio to it.

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/conv_cpu_time.py --log LOG   # a search's best
    ... --seeds 8                          # random tile_relayout samples, every decision drawn
    ... --search 300 --log LOG                 # tune 5 minutes first, then time its best
    ... --given '[{"conv|vecs": 1, ...}]'  # samples with these decisions (the padding at the root,
                                           # the rest drawn, seed 0)

On a loaded machine wall-clock time measures the neighbours; one thread's CPU time does not
(up to cache and frequency effects), and F.conv2d beside it shows how far the host drifted.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.append(HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import schedlang as sl  # noqa: E402
from schedlang.autoschedule.sample import sample  # noqa: E402
from schedlang.autoschedule.sketch import generate_sketches  # noqa: E402
from schedlang.autoschedule.task import SearchTask  # noqa: E402
from schedlang.topi import nn  # noqa: E402
from cpu_time import cpu_time_call  # noqa: E402
from tune import conv2d_program  # noqa: E402

TARGET = "llvm -mcpu=znver3 -num-cores=1"


def schedules(args, task):
    """(label, schedule) pairs to time."""
    if args.log:
        yield "best of " + os.path.basename(args.log), sl.apply_best(args.log, task)[0]
    sketches = [sk for sk in generate_sketches(task) if "relayout" in sk.name]
    root_pad = next(sk for sk in sketches if sk.name == "tile_relayout:conv")
    given = json.loads(args.given) if args.given else []
    draws = [(0, root_pad, d) for d in (given if isinstance(given, list) else [given])]
    draws += [(seed, sk, None) for seed in range(args.seeds) for sk in sketches]
    keys = ("conv|vecs", "conv|reg|w", "conv|reg|h", "conv|vec_outer_last", "conv|rows_outer",
            "conv|writeback_v", "conv|rsplit", "pad|par", "conv|par", "conv.local|unroll", "conv|unroll")
    for seed, sk, decisions in draws:
        try:
            s, made = sample(task, sk, random.Random(seed), decisions)
        except Exception as e:          # noqa: BLE001 - an illegal draw: say so, go on
            print(f"seed {seed} {sk.name}: {type(e).__name__}: {e}")
            continue
        yield f"{sk.name} seed {seed} " + " ".join(f"{k.split('|', 1)[1]}={made.get(k)}" for k in keys
                                                      if k in made), s


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", help="a tuning log of this workload: time its best record")
    p.add_argument("--search", type=float, default=0,
                   help="first tune for this many seconds (sl.auto_schedule, 1 core, seed 0) into --log")
    p.add_argument("--seeds", type=int, default=0, help="time random samples of seeds 0..N-1")
    p.add_argument("--given", help="JSON decisions of a sample, or a list of them")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--target", default=TARGET, help="a one-thread CPU target (default %(default)s)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    target = sl.Target.create(args.target)
    width = target.native_lanes(32)
    n, c, hw, f = 1, 64, 56, 64
    task = SearchTask(tensors=conv2d_program(n, c, hw, hw, f, width), target=args.target)
    if args.search:
        start = time.perf_counter()
        sl.auto_schedule(task, trials=100000, log=args.log, seed=0, timeout=args.search, verbose=1)
        recs = [r for r in sl.autoschedule.records.load(args.log) if "final" not in r]
        print(f"search: {len(recs)} candidates in {time.perf_counter() - start:.0f} s (wall, load {os.getloadavg()})")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, c, hw, hw), dtype=np.float32)
    w = rng.standard_normal((f, c, 3, 3), dtype=np.float32)
    wp = nn.pack_conv_weights(w, width)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    want = F.conv2d(tx, tw, padding=1).numpy()
    gflop = 2.0 * n * f * hw * hw * c * 9 / 1e9
    mods = []
    for label, s in schedules(args, task):
        mod = sl.build(s, task.args, target=target)
        o = np.zeros_like(want)
        mod(x, wp, o)
        np.testing.assert_allclose(o, want, rtol=1e-3, atol=1e-3 * c)
        mods.append((label, lambda mod=mod, o=o: mod(x, wp, o)))
    # oneDNN as Inductor with freezing runs it: the weight reordered once, a channels-last input
    conv_args = ([1, 1], [1, 1], [1, 1], 1)
    twp = torch.ops.mkldnn._reorder_convolution_weight(tw, *conv_args, list(tx.shape))
    txc = tx.contiguous(memory_format=torch.channels_last)
    prepacked = lambda: torch.ops.mkldnn._convolution_pointwise(  # noqa: E731
        txc, twp, None, *conv_args, "none", [], "")
    np.testing.assert_allclose(prepacked().numpy(), want, rtol=1e-3, atol=1e-3 * c)
    with torch.no_grad():
        times = cpu_time_call(lambda: F.conv2d(tx, tw, padding=1), prepacked, *[fn for _, fn in mods],
                              rounds=args.rounds, best=True)
    ref = times[0]
    print(f"CPU time at 1 thread, best of {args.rounds} interleaved rounds, target {args.target}")
    print(f"  {'torch F.conv2d (oneDNN)':60s} {ref * 1e3:7.3f} ms {gflop / ref:6.1f} GFLOP/s  1.00x")
    print(f"  {'oneDNN prepacked (weight reordered once, channels-last)':60s} {times[1] * 1e3:7.3f} ms "
          f"{gflop / times[1]:6.1f} GFLOP/s  {ref / times[1]:.2f}x")
    times = times[:1] + times[2:]
    for (label, _), t in zip(mods, times[1:]):
        print(f"  {label:60s} {t * 1e3:7.3f} ms {gflop / t:6.1f} GFLOP/s  {ref / t:.2f}x")


if __name__ == "__main__":
    main()
