"""Where a warm-cache first call goes: schedlang.torch.compile(model)(*inputs) in a fresh
process whose SCHEDLANG_CACHE_DIR a first process filled, split into torch.export, the
model cache's key, disk reads, library loads, weight packing, the first forward and the
rest; beside one steady-state forward (the best of a few later calls).

    python benchmarks/first_call_parts.py                        # every model of models.py, 1 and 2 threads
    python benchmarks/first_call_parts.py --only llama --threads 1

Each figure is CPU time of the whole process (time.process_time: every thread) and wall
time, in seconds. "beyond export" is the goal's figure (issue 17: <= 0.5 s); "beyond a
forward" subtracts one steady-state forward from it (what no cache can remove).
The parts are timed by wrapping the functions that do them (a part called inside another
counts in the outer one): model_cache.key_text (key: the graph's canonical text and the
source hash), kernel_cache.read (disk: the model's entry and its kernels'), CachedModule
construction (load: the library's checks, dlopen, symbol binding), PackCache.values
(pack: packing, or mapping what the filling process packed, schedlang/torch/pack_disk.py;
its key and byte comparison included), the first call less pack (first fwd: kernels, fresh buffers' page faults,
per-call Python), the cyclic garbage collector's passes outside all of these (gc: after
torch.export, the first full pass walks what export left), and the rest (other).
"""
from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (HERE, ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "bert", "llama")
PARTS = ("export", "key", "disk", "load", "pack", "first fwd", "gc", "other")


class Clock:
    """CPU and wall seconds spent inside wrapped functions, per part (outermost wrap only)."""

    def __init__(self):
        self.cpu = dict.fromkeys(PARTS, 0.0)
        self.wall = dict.fromkeys(PARTS, 0.0)
        self._depth = 0

    def wrap(self, owner, name: str, part: str):
        fn = getattr(owner, name)
        clock = self

        def timed(*args, **kwargs):
            if clock._depth:
                return fn(*args, **kwargs)
            clock._depth += 1
            c, w = time.process_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                clock.cpu[part] += time.process_time() - c
                clock.wall[part] += time.perf_counter() - w
                clock._depth -= 1
        setattr(owner, name, timed)


def child(name: str, threads: int, in_place: bool = False, fill: bool = False) -> str:
    """One line: total, then each part, then one forward, each as cpu/wall. in_place: every
    Linear reads its weight in place (ops/matmul.reads_weight_in_place forced; the model
    cache's key does not hold that choice: give such runs a cache folder of their own);
    fill: the run that fills the cache (not checked to be answered by it)."""
    import torch
    import schedlang as sl
    import schedlang.target.llvm.backend  # noqa: F401  (the first CPU compile imports it)
    import schedlang.torch as sl_torch
    from schedlang import kernel_cache
    from schedlang.target.llvm import cached
    from schedlang.torch import model_cache, prepack, zoo
    from schedlang.torch.ops import matmul
    warnings.simplefilter("ignore")
    if in_place:
        matmul.reads_weight_in_place = lambda *a, **k: True
    torch.set_num_threads(threads)
    model, inputs = zoo.build(name, "full")
    target = sl.Target.create("llvm").with_options(num_threads=threads)
    clock = Clock()
    clock.wrap(sl_torch, "capture", "export")
    clock.wrap(model_cache, "key_text", "key")
    clock.wrap(kernel_cache, "read", "disk")
    clock.wrap(prepack.PackCache, "values", "pack")
    init = cached.CachedModule.__init__

    def load(self, *args, **kwargs):      # the library's checks and load (its bytes were read before)
        c, w = time.process_time(), time.perf_counter()
        init(self, *args, **kwargs)
        clock.cpu["load"] += time.process_time() - c
        clock.wall["load"] += time.perf_counter() - w
    cached.CachedModule.__init__ = load
    gc_start, calling = [], []

    def collecting(phase, info):          # the cyclic collector's passes outside the other parts
        if clock._depth or calling:
            return
        if phase == "start":
            gc_start[:] = [time.process_time(), time.perf_counter()]
        elif gc_start:
            clock.cpu["gc"] += time.process_time() - gc_start[0]
            clock.wall["gc"] += time.perf_counter() - gc_start[1]
    gc.callbacks.append(collecting)
    with torch.no_grad():
        c0, w0 = time.process_time(), time.perf_counter()
        compiled = sl_torch.compile(model, inputs, target=target)
        c1, w1 = time.process_time(), time.perf_counter()
        calling.append(True)              # a pass in the call is the first forward's
        got = compiled(*inputs)
        c2, w2 = time.process_time(), time.perf_counter()
        if model_cache.stats.loads != 1 and not fill:
            raise SystemExit(f"{name}: not answered by the model cache ({model_cache.stats})")
        want = model(*inputs)
        err = float((got - want).abs().max() / want.abs().max().clamp(min=1))
        if err > 1e-3:
            raise SystemExit(f"{name}: relative error {err:.2e}")
        fwd = []
        for _ in range(3):
            c, w = time.process_time(), time.perf_counter()
            compiled(*inputs)
            fwd.append((time.process_time() - c, time.perf_counter() - w))
    gc.callbacks.remove(collecting)
    clock.cpu["first fwd"] = (c2 - c1) - clock.cpu["pack"]
    clock.wall["first fwd"] = (w2 - w1) - clock.wall["pack"]
    named = [p for p in PARTS if p not in ("other",)]
    clock.cpu["other"] = (c2 - c0) - sum(clock.cpu[p] for p in named)
    clock.wall["other"] = (w2 - w0) - sum(clock.wall[p] for p in named)
    best = min(fwd)
    cells = [(c2 - c0, w2 - w0)] + [(clock.cpu[p], clock.wall[p]) for p in PARTS] + [best]
    return " ".join(f"{c:.3f}/{w:.3f}" for c, w in cells)


def run_child(name: str, threads: int, cache_dir: str, in_place: bool, fill: bool = False) -> str:
    env = dict(os.environ, SCHEDLANG_CACHE_DIR=cache_dir, OMP_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--threads", str(threads)]
    proc = subprocess.run(cmd + ["--in-place"] * in_place + ["--fill"] * fill, env=env, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: " + (proc.stderr.strip().splitlines() or ["failed"])[-1])
    return proc.stdout.split("\n")[-2]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=MODELS, action="append")
    ap.add_argument("--threads", type=int, action="append")
    ap.add_argument("--cache-dir", help="a cache folder to fill and reuse (default: a fresh temporary one per run)")
    ap.add_argument("--runs", type=int, default=2, help="warm processes per model (the best total shown)")
    ap.add_argument("--in-place", action="store_true",
                    help="every Linear reads its weight in place (no packed panels): what the first call would cost")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(child(args.child, (args.threads or [1])[0], args.in_place, args.fill))
        return
    import harness
    print(f"# {harness.cpu_model()}; load {harness.load_average()}; cpu/wall seconds (CPU: time.process_time, "
          "all threads); warm disk cache, fresh process")
    print(f"# {'model':13s} thr {'total':>11s} " + " ".join(f"{p:>11s}" for p in PARTS)
          + f" {'1 forward':>11s} {'>export':>7s} {'>fwd':>6s}")
    with tempfile.TemporaryDirectory(prefix="slcache-parts-") as tmp:
        cache = args.cache_dir or tmp
        for name in args.only or MODELS:
            for threads in args.threads or (1, 2):
                run_child(name, threads, cache, args.in_place, fill=True)     # a first process fills the cache
                lines = [run_child(name, threads, cache, args.in_place) for _ in range(args.runs)]
                best = min(lines, key=lambda line: float(line.split()[0].split("/")[0]))
                cells = best.split()
                cpu = [float(c.split("/")[0]) for c in cells]
                beyond = cpu[0] - cpu[1]
                print(f"  {name:13s} {threads:3d} " + " ".join(f"{c:>11s}" for c in cells)
                      + f" {beyond:7.2f} {beyond - cpu[-1]:6.2f}", flush=True)


if __name__ == "__main__":
    main()
