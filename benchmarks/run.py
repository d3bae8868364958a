"""schedlang side by side with numpy, PyTorch eager, torch.compile, numba and Apache TVM.

    python benchmarks/run.py                 # everything: 2.5 min on a quiet 2-core machine
    python benchmarks/run.py --quick         # fewer, shorter rounds
    python benchmarks/run.py --only silu     # one workload: gemm, silu or softmax

Same shapes, same machine, one run; outputs preallocated unless a note says otherwise.
Each contender is checked against an independent reference before it is timed; a wrong
result stops the run. See benchmarks/README.md for how to read the tables.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _threads_option(argv) -> int:
    """--threads N, read before numpy is imported: OpenBLAS sizes its pool at import."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 0


if _threads_option(sys.argv[1:]) > 0:
    os.environ["OPENBLAS_NUM_THREADS"] = str(_threads_option(sys.argv[1:]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import schedlang as sl  # noqa: E402

import harness  # noqa: E402
import torch_peers  # noqa: E402
import tvm_peers  # noqa: E402
import workloads  # noqa: E402

WORKLOADS = ("gemm", "silu", "softmax")
GEMM_SIZES = (1024, 512)
SILU_SHAPE = (8192, 8192)
SOFTMAX_SHAPE = (4096, 4096)
CLOCKS = {"wall": "time.perf_counter (wall clock)", "cpu": "time.process_time (CPU time of this process)"}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="5 short rounds instead of 10 (noisier)")
    p.add_argument("--only", choices=WORKLOADS, action="append",
                   help="run only this workload (repeatable); default: all")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--no-numba", action="store_true", help="skip numba")
    p.add_argument("--no-tvm", action="store_true", help="skip Apache TVM even if it is installed")
    p.add_argument("--compile-timeout", type=float, default=240.0,
                   help="seconds allowed for compiling all torch.compile kernels (default 240)")
    p.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                   help="before each table, wait up to SECONDS for other processes to leave the CPUs idle")
    p.add_argument("--threads", type=int, default=0,
                   help="threads for every contender (default: all cores); e.g. 1 to compare single-core code")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: time.perf_counter (default); cpu: process CPU time, which other processes "
                        "cannot inflate -- use it with --threads 1 on a busy machine")
    p.add_argument("--repeat", type=int, default=None, help="timed rounds per contender (default 10, quick 5)")
    return p.parse_args(argv)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def versions(tvm_info: str) -> str:
    parts = [f"python {sys.version.split()[0]}", f"schedlang {sl.__version__}", f"numpy {np.__version__}",
             f"torch {torch.__version__}"]
    try:
        import llvmlite
        parts.append(f"llvmlite {llvmlite.__version__}")
    except ImportError:
        pass
    try:
        import numba
        parts.append(f"numba {numba.__version__}")
    except ImportError:
        parts.append("numba: not installed")
    parts.append(f"tvm {tvm_info}")
    return ", ".join(parts)


def _parallel_runtime(target) -> str:
    """What runs schedlang's parallel loops: the OpenMP library a tiny module loads, or 'serial'."""
    x = sl.placeholder((2,), name="x")
    y = sl.compute((2,), lambda i: x[i] + 1.0, name="y")
    s = sl.create_schedule(y.op)
    s[y].parallel(y.op.axis[0])
    rt = getattr(sl.build(s, [x, y], target=target), "parallel_runtime", "?")
    return rt or "NOTHING: parallel loops run SERIALLY (libgomp not found)"


def header(target, cores: int, timing: harness.Timing, tvm_info: str) -> str:
    isa = harness.vector_isa(target)
    return "\n".join([
        "schedlang benchmarks: side by side, one run, same shapes, float32, outputs preallocated unless noted",
        f"machine : {harness.cpu_model()}, {harness.core_count()} cores; schedlang target: cpu={target.cpu}, "
        f"vector_bits={target.vector_bits} ({isa})",
        f"threads : {cores} for everyone (machine has {harness.core_count()} cores): "
        f"torch.set_num_threads({cores}), numba {cores}, TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS', cores)}, "
        f"schedlang Target(num_threads={target.num_threads}, threading={target.threading}) via "
        f"{_parallel_runtime(target)}, OpenBLAS {os.environ.get('OPENBLAS_NUM_THREADS', 'all cores')}; "
        "numpy ufuncs are single-threaded",
        f"timing  : {CLOCKS[timing.clock]}; warm-up, then {timing.repeat} interleaved rounds of >= "
        f"{timing.min_round_s * 1e3:.0f} ms per contender; 'best' = best round's mean per call",
        f"software: {versions(tvm_info)}",
        f"load avg: {harness.load_average()} at start (1/5/15 min; each table says how busy others kept the CPUs)",
    ])


def main(argv=None) -> int:
    args = parse_args(argv)
    only = args.only or list(WORKLOADS)
    timing = harness.Timing.quick(args.clock) if args.quick else harness.Timing(clock=args.clock)
    if args.repeat:
        timing = harness.Timing(args.repeat, timing.min_round_s, timing.warmup_s, args.clock)
    cores = args.threads or harness.core_count()
    if args.clock == "cpu" and cores > 1:
        log("warning: --clock cpu with more than one thread counts every thread's CPU time, spinning "
            "included; use --threads 1")
    torch.set_num_threads(cores)
    target = sl.Target.create("llvm").with_options(num_threads=cores)
    t_start = time.perf_counter()

    tvm, tvm_info = (None, "disabled (--no-tvm)") if args.no_tvm else tvm_peers.load(cores)
    compile_keys = []
    if "gemm" in only:
        compile_keys += [f"gemm:{n}" for n in GEMM_SIZES]
    if "silu" in only:
        compile_keys.append("silu:{}x{}".format(*SILU_SHAPE))
    if "softmax" in only:
        compile_keys.append("softmax:{}x{}".format(*SOFTMAX_SHAPE))
    compile_failed = {}
    if not args.no_compile:
        log(f"compiling {len(compile_keys)} torch.compile kernels in a child process "
            f"(limit {args.compile_timeout:.0f} s; cached after the first run) ...")
        t0 = time.perf_counter()
        compile_failed = torch_peers.warm_compile_cache(compile_keys, args.compile_timeout, cores)
        log(f"  done in {time.perf_counter() - t0:.1f} s" + (f"; failed: {compile_failed}" if compile_failed else ""))
    ctx = workloads.Context(cores, target.cpu, target.vector_bits, target, timing, tvm, tvm_info, compile_failed,
                            use_compile=not args.no_compile, use_numba=not args.no_numba)

    print(header(target, cores, timing, tvm_info))
    log("measuring copy bandwidth ...")
    if args.wait_idle > 0:
        harness.wait_until_idle(args.wait_idle, cores, log)
    mon = harness.ForeignLoad().start()
    bw = harness.copy_bandwidth(256 * 2 ** 20, timing)
    bw_foreign = mon.stop()
    print("peak ref: STREAM-like copy of a 256 MiB float32 array (GB/s = bytes read + written / time): " +
          ", ".join(f"{k} {v:.1f} GB/s" for k, v in bw.items()) +
          f"  [others busy: {bw_foreign:.2f} cores]")
    print("          ('* ' marks schedlang rows; '% best peer' compares with the fastest non-schedlang row)")
    sys.stdout.flush()

    plans = []
    if "gemm" in only:
        plans += [lambda n=n: workloads.gemm(ctx, n) for n in GEMM_SIZES]
    if "silu" in only:
        plans.append(lambda: workloads.silu_and_mul(ctx, *SILU_SHAPE))
    if "softmax" in only:
        plans.append(lambda: workloads.softmax(ctx, *SOFTMAX_SHAPE))
    for plan in plans:
        w = plan()
        log(f"{w.title}:")
        if args.wait_idle > 0:
            harness.wait_until_idle(args.wait_idle, cores, log)
        mon = harness.ForeignLoad().start()
        rows = harness.run_workload(w.shape, w.contenders, w.work, timing, log)
        foreign = mon.stop()
        print()
        print(harness.format_table(w.title, w.unit, rows))
        print(summary(rows, w.unit))
        print(f"   other processes kept {foreign:.2f} of {harness.core_count()} cores busy while this table "
              "was measured"
              + (" -- NOISY: rerun on a quiet machine" if foreign > 0.25 else ""))
        sys.stdout.flush()
        del w, rows
        gc.collect()
    print()
    print(f"load avg: {harness.load_average()} at end; total {time.perf_counter() - t_start:.0f} s")
    return 0


def summary(rows, unit: str) -> str:
    """One line: the best schedlang row against the best peer."""
    ours = [r for r in rows if r.is_schedlang and not r.skipped]
    peers = [r for r in rows if not r.is_schedlang and not r.skipped]
    if not ours or not peers:
        return ""
    a = max(ours, key=lambda r: r.rate)
    b = max(peers, key=lambda r: r.rate)
    return (f"-> schedlang best: {a.rate:.1f} {unit} = {100 * a.rate / b.rate:.0f}% of the best peer "
            f"({b.name}, {b.rate:.1f})")


if __name__ == "__main__":
    sys.exit(main())
