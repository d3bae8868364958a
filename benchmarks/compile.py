"""Compile latency: the warm build of the tutorial GEMM and the cold compile of each zoo model.

    python benchmarks/compile.py                    # GEMM 1024^3 + every model at "full" size
    python benchmarks/compile.py --quick            # GEMM 128^3 + every model at "tiny" size (CI)
    python benchmarks/compile.py --only gemm        # gemm, models
    python benchmarks/compile.py --models bert,gpt2 --threads 1,2
    python benchmarks/compile.py --baseline /work/main    # another checkout, side by side
    python benchmarks/compile.py --only models --models resnet50 --repeat 3 --baseline /work/main

GEMM: the final schedule of tutorials/01_gemm_cpu.py (the README's): B packed into 32-wide
panels, a write cache per 32 x 32 tile, k split by 4 and unrolled, columns vectorized, rows
and packing parallel. Each round is a fresh process that builds once (warm-up: imports, LLVM
initialisation) and then --builds more times with sl.build(..., cache=False); the table gives
the median wall and CPU time of those builds and, from schedlang.trace.Trace(text=False), the
median time of every pass and build stage. With --baseline, rounds of this checkout and of the
other one (its schedlang imported through PYTHONPATH) alternate, so both see the same machine.

Models: each model of schedlang.torch.zoo in a fresh process (an empty SCHEDLANG_CACHE_DIR, an
empty in-memory build cache): torch's capture (torch.export), lowering to Tensor IR, and the
build of every kernel, each timed; the compiled model's output is checked against eager torch.
The CPU time of each phase (default schedule, Loop/Tile/Kernel IR, LLVM text, LLVM's
optimizer, the JIT, the disk cache's store and its write, which runs behind the compile)
is measured by wrapping the function that does it; the build CPU time includes the forked
child's that lowers half of a many-nest part's Kernel IR (kernel/forked.py), which is also
shown as a phase of its own ("kernel IR" is this process's share).
--threads builds the kernels with each number of threads (SCHEDLANG_BUILD_THREADS); with
--baseline, each model is compiled by both checkouts, one right after the other (--repeat
times, alternating; medians), and the ratio of their build CPU times is printed.

CPU time (this process's) counts what the builds themselves used; on a machine that others
share, wall time also counts the time slices they take: compare rows of one run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import harness  # noqa: E402

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "bert", "gpt2", "llama"]


# ---------------------------------------------------------------- children (fresh processes)

def gemm_child(size: int, builds: int) -> dict:
    """Build the tutorial GEMM once, then `builds` times; times in seconds."""
    import schedlang as sl
    from sl_kernels import gemm_schedule_tutorial
    s, args = gemm_schedule_tutorial(size, size, size)
    sl.build(s, args, cache=False)
    walls, cpus, stages = [], [], {}
    timed = _stage_timing_supported()
    for _ in range(builds):
        wall, cpu = time.perf_counter(), time.thread_time()
        sl.build(s, args, cache=False)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.thread_time() - cpu)
    for _ in range(builds if timed else 0):
        trace = sl.trace.Trace(text=False)
        sl.build(s, args, cache=False, trace=trace)
        for i, (name, seconds) in enumerate(trace.times):
            stages.setdefault(f"{i:02d} {name}", []).append(seconds)
    return {"wall": walls, "cpu": cpus, "stages": stages}


def _stage_timing_supported() -> bool:
    import inspect
    import schedlang.trace
    return "text" in inspect.signature(schedlang.trace.Trace).parameters


# The phases of a model's build, timed by wrapping the function that does each one
# (module, attribute, label); the CPU time of every thread that runs one is counted.
PHASES = [("schedlang.torch.schedules", "default_schedule", "schedule"),
          ("schedlang.driver", "lower_to_loop_ir", "loop IR"),
          ("schedlang.driver", "lower_to_tile_ir", "tile IR"),
          ("schedlang.driver", "lower_tile_to_kernel", "kernel IR"),
          ("schedlang.target.llvm.backend", "render_llvm", "llvm text"),
          ("schedlang.target.llvm.backend", "render_llvm_split", "llvm text"),   # a many-kernel module (split.py)
          ("schedlang.target.llvm.backend", "optimize", "llvm opt"),
          ("schedlang.target.llvm.private", "compile_to_object", "llvm opt + code, two threads"),   # private.py
          ("schedlang.target.llvm.backend", "LinkedObjects", "jit"),          # the objects of those linked (orc.py)
          ("schedlang.target.llvm.backend", "link_modules", "llvm link"),     # a many-kernel module's parts
          ("schedlang.target.llvm.backend", "CompiledModule", "jit"),
          ("schedlang.kernel_cache", "store", "disk store"),
          ("schedlang.kernel_cache", "_write_module", "disk write (behind the compile)")]
# Phases that run in child processes, timed by the CPU time of the children they waited for:
# the Kernel IR passes of a many-nest part's other half (kernel/forked.py).
CHILD_PHASES = [("schedlang.kernel.lower", "map_forked", "kernel IR, forked child")]


def _time_phases() -> dict:
    """Wrap each phase's function (where this checkout has it); returns label -> CPU seconds,
    filled in as the phases run."""
    import functools
    import importlib
    import threading
    import resource
    spent: dict = {}
    lock = threading.Lock()

    def thread_cpu() -> float:
        return time.thread_time()

    def children_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    for module, attr, label, clock in ([p + (thread_cpu,) for p in PHASES]
                                       + [p + (children_cpu,) for p in CHILD_PHASES]):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        fn = getattr(mod, attr, None)
        if fn is None:
            continue

        def timed(*a, _fn=fn, _label=label, _clock=clock, **k):
            start = _clock()
            try:
                return _fn(*a, **k)
            finally:
                with lock:
                    spent[_label] = spent.get(_label, 0.0) + _clock() - start
        setattr(mod, attr, functools.wraps(fn)(timed) if callable(fn) and not isinstance(fn, type) else timed)
    return spent


def model_child(name: str, size: str) -> dict:
    """Cold compile of one zoo model in this (fresh) process, step by step; checked against eager."""
    start = time.perf_counter()
    import torch
    import schedlang as sl
    from schedlang.torch import capture, zoo
    from schedlang.torch.lower import lower_graph
    from schedlang.torch.runtime import CompiledModule
    target = sl.Target.create("llvm")       # LLVM's initialisation: counted with the imports
    phases = _time_phases()
    imported = time.perf_counter()
    module, inputs = zoo.build(name, size)
    # schedlang.torch.compile pauses the garbage collector for the compile (torch/gc_pause.py);
    # so do these steps: with it running, MobileNetV2's build took ~10.4 s of CPU instead of ~8.4
    # (full collections walking torch's objects), which no user's compile pays
    from schedlang.torch.gc_pause import gc_paused
    with torch.no_grad(), gc_paused():
        t0 = time.perf_counter()
        graph = capture(module, inputs)
        t1 = time.perf_counter()
        program = lower_graph(graph, target, warn=False)
        t2 = time.perf_counter()
        cpu = time.process_time()
        compiled = CompiledModule(graph, target, program, module=module)
        build_cpu = time.process_time() - cpu + phases.get("kernel IR, forked child", 0.0)
        t3 = time.perf_counter()
        got, want = compiled(*inputs), module(*inputs)
    flush = getattr(sys.modules["schedlang.kernel_cache"], "flush", None)
    if flush is not None:                  # entries written behind the compile: their phase complete
        flush()
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=2e-3, atol=2e-3)
    return {"import": imported - start, "capture": t1 - t0, "lower": t2 - t1, "build": t3 - t2,
            "build_cpu": build_cpu, "phases": phases, "parts": len(program.parts),
            "kernels": sum(len(mod.ir["kernel"].split("\nkernel ")) - 1 for mod in compiled.modules.values()
                           if "kernel" in getattr(mod, "ir", {})),
            "fallbacks": sum(program.fallback_counts().values())}


def _run_child(args, pythonpath: str, env_extra=None) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath, **(env_extra or {}))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(args)],
                          capture_output=True, text=True, env=env, cwd=HERE, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- parent

def _ms(values) -> str:
    return f"{statistics.median(values) * 1e3:8.1f}"


def run_gemm(size: int, rounds: int, builds: int, baseline: str) -> None:
    trees = [("this checkout", ROOT)] + ([("baseline " + baseline, baseline)] if baseline else [])
    got = {label: {"wall": [], "cpu": [], "stages": {}} for label, _ in trees}
    load = harness.ForeignLoad().start()
    for _ in range(rounds):
        for label, path in trees:      # alternating: every tree sees the same machine
            r = _run_child(["gemm", size, builds], path)
            acc = got[label]
            acc["wall"] += r["wall"]
            acc["cpu"] += r["cpu"]
            for stage, values in r["stages"].items():
                acc["stages"].setdefault(stage, []).extend(values)
    foreign = load.stop()
    print(f"\nWarm build of the tutorial GEMM ({size}^3, final schedule): {rounds} processes x {builds} builds, "
          f"median (other processes used {foreign:.1f} cores on average)")
    print(f"{'tree':40s} {'wall ms':>8s} {'cpu ms':>8s}")
    for label, _ in trees:
        print(f"{label:40s} {_ms(got[label]['wall'])} {_ms(got[label]['cpu'])}")
    for label, _ in trees:
        stages = got[label]["stages"]
        if not stages:
            continue
        print(f"\nper pass and stage, {label} (wall ms, median; 'tensor' includes the schedule checks, "
              "'llvm' the IR texts kept in mod.ir):")
        for stage in sorted(stages):
            print(f"  {stage[3:]:20s} {_ms(stages[stage])}")


def run_models(models, size: str, threads, baseline: str, repeat: int = 1) -> None:
    trees = [("", ROOT)] + ([("baseline", baseline)] if baseline else [])
    print(f"\nCold compile of each zoo model ({size}; a fresh process each, empty caches; seconds, "
          f"median of {repeat})")
    print(f"{'model':14s} {'tree':>8s} {'threads':>7s} {'import':>7s} {'capture':>8s} {'lower':>7s} {'build':>7s} "
          f"{'build cpu':>9s} {'kernels':>7s} {'fallback ops':>12s} {'schedlang':>9s}")
    for name in models:
        for n in threads:
            runs = {label: [] for label, _ in trees}
            for _ in range(repeat):
                for label, path in trees:      # alternating, per model: the same machine for both
                    with tempfile.TemporaryDirectory() as cache:
                        runs[label].append(_run_child(["model", name, size], path,
                                                      {"SCHEDLANG_CACHE_DIR": cache, "SCHEDLANG_BUILD_THREADS": str(n)}))
            for label, _ in trees:
                rs = runs[label]

                def med(field, rs=rs):
                    return statistics.median(r[field] for r in rs)
                ours = statistics.median(r["lower"] + r["build"] for r in rs)
                kernels = rs[0].get("kernels", rs[0].get("parts", 0))
                print(f"{name:14s} {label:>8s} {n:7d} {med('import'):7.2f} {med('capture'):8.2f} {med('lower'):7.2f} "
                      f"{med('build'):7.2f} {med('build_cpu'):9.2f} {kernels:7d} {rs[0]['fallbacks']:12d} {ours:9.2f}",
                      flush=True)
                phases = [(label_, statistics.median(r.get("phases", {}).get(label_, 0.0) for r in rs))
                          for label_ in dict.fromkeys(label for _, _, label in PHASES + CHILD_PHASES)]
                print(f"{'':14s} {'':>8s} cpu s: " + ", ".join(f"{p} {t:.2f}" for p, t in phases), flush=True)
            if baseline:
                mine, base = runs[""], runs["baseline"]
                ratio = (statistics.median(r["build_cpu"] for r in mine)
                         / max(1e-9, statistics.median(r["build_cpu"] for r in base)))
                print(f"{name:14s} {'ratio':>8s} build cpu this/baseline = {ratio:.2f}", flush=True)
    print("(schedlang = lower + build: what follows torch's capture; fallback ops run in torch; a baseline "
          "ignores SCHEDLANG_BUILD_THREADS unless it has build_pool.py; cpu s: CPU seconds of each phase, "
          "all threads; 'kernels': kernels of the model's parts)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="GEMM 128^3, tiny models, fewer rounds (CI)")
    p.add_argument("--only", choices=["gemm", "models"], action="append")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo models")
    p.add_argument("--threads", default="", help="comma-separated build thread counts (default: the default)")
    p.add_argument("--baseline", default="", help="another checkout, measured side by side")
    p.add_argument("--repeat", type=int, default=1, help="cold compiles of each model per tree (median)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        kind, *rest = json.loads(args.child)
        result = gemm_child(*rest) if kind == "gemm" else model_child(*rest)
        print(json.dumps(result))
        return
    import schedlang as sl
    target = sl.Target.create("llvm")
    print(f"machine: {harness.cpu_model()} ({target.cpu}, {harness.vector_isa(target)}), "
          f"{harness.core_count()} cores, load average {harness.load_average()}")
    only = args.only or ["gemm", "models"]
    if "gemm" in only:
        run_gemm(128 if args.quick else 1024, 2 if args.quick else 5, 3 if args.quick else 7, args.baseline)
    if "models" in only:
        models = [m for m in args.models.split(",") if m]
        unknown = [m for m in models if m not in MODELS]
        if unknown:
            p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
        threads = [int(t) for t in args.threads.split(",") if t] or [_default_threads()]
        run_models(models, "tiny" if args.quick else "full", threads, args.baseline, args.repeat)


def _default_threads() -> int:
    from schedlang.build_pool import default_workers
    return default_workers()


if __name__ == "__main__":
    main()
