"""Where a compiled zoo model's forward spends its time, kernel by kernel, inside the model (its
neighbours' data in the caches, the other threads, the calls between kernels as they are), at
one thread and at --threads: Linux perf samples of a process calling the model in a loop,
attributed to the functions of the library its kernels were loaded from. model_profile.py times
each kernel alone; the two disagree where a kernel's neighbours matter (ResNet-50's 1x1 512->128
at 28x28 took 1.56x its one-thread CPU time at two threads in the model, its channel tiles
outermost, each thread reading all of an input the kernel before left half in each core's
cache; alone it scaled 1.92x).

    python benchmarks/model_perf.py --model resnet50 --threads 2
    python benchmarks/model_perf.py --model bert --seconds 8 --top 12

Per kernel: CPU ms per forward at one thread and at N (summed over the threads: the median
forward's wall time x N x the kernel's share of the samples), their ratio (1.0: the kernel
scales perfectly), and the samples in the OpenMP runtime (libgomp: a thread waiting at the end
of a parallel loop) attributed to the kernel another thread was running at that moment: the
kernel's imbalance. Needs `perf` (perf_event_paranoid <= 2 lets a user sample their own
processes) and `nm`. Each thread count runs twice in fresh processes: once to build into a
private disk cache, once loading from it (a library loaded from disk is what perf can name).
"""
from __future__ import annotations

import argparse
import bisect
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WAIT = "(waiting: libgomp)"
OUTSIDE = "(outside the kernels)"


def child(model: str, size: str, threads: int, seconds: float, ready: str) -> None:
    """Compile the model, call it, then (seconds > 0) write our pid to ready and call it in a
    loop for seconds + 1 s; print the median forward in ms."""
    sys.path.insert(0, ROOT)
    import warnings
    import torch
    import schedlang as sl
    import schedlang.torch as slt
    from schedlang.torch import zoo
    torch.set_num_threads(threads)
    mod, inputs = zoo.build(model, size)
    target = sl.Target.create("llvm").with_options(num_threads=threads)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = slt.compile(mod, inputs, target=target)
        for _ in range(3):
            compiled(*inputs)
        if seconds <= 0:
            return
        with open(ready, "w") as f:
            f.write(str(os.getpid()))
        times, end = [], time.perf_counter() + seconds + 1.0
        while time.perf_counter() < end:
            start = time.perf_counter()
            compiled(*inputs)
            times.append(time.perf_counter() - start)
    print(f"{1e3 * sorted(times)[len(times) // 2]:.4f}")


def symbols(folder: str) -> dict:
    """{library file name: (sorted addresses, names)} of every library copy in folder."""
    out = {}
    for name in os.listdir(folder):
        listing = subprocess.run(["nm", "-n", "--defined-only", os.path.join(folder, name)],
                                 capture_output=True, text=True, check=True).stdout
        rows = [(int(p[0], 16), p[2]) for p in (line.split() for line in listing.splitlines()) if len(p) >= 3]
        out[name] = ([a for a, _ in rows], [n for _, n in rows])
    return out


def kernel_name(name: str) -> str:
    """A kernel's name as its Tile IR function says it (the parallel body's suffix dropped)."""
    return re.sub(r"\.par\d+\.(body|worker)$", "", name)


def samples(data: str, libs: dict):
    """{thread id: [(time, what)]}: what is a kernel's name, WAIT or OUTSIDE."""
    maps = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events"], capture_output=True, text=True).stdout
    bases = {}       # library file name -> (load address, file offset) of its code
    for m in re.finditer(r"\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+) [^\]]*\]: r-xp /memfd:(schedlang-\w+\.so)", maps):
        bases[m.group(4)] = (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16))
    text = subprocess.run(["perf", "script", "-G", "-i", data, "-F", "tid,time,ip,dso"],
                          capture_output=True, text=True).stdout
    out = collections.defaultdict(list)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        tid, stamp, ip, dso = int(parts[0]), float(parts[1].rstrip(":")), int(parts[2], 16), " ".join(parts[3:])
        what = WAIT if "libgomp" in dso else OUTSIDE
        lib = re.search(r"memfd:(schedlang-\w+\.so)", dso)
        if lib and lib.group(1) in bases and lib.group(1) in libs:
            start, _, offset = bases[lib.group(1)]
            addrs, names = libs[lib.group(1)]
            k = bisect.bisect_right(addrs, ip - start + offset) - 1
            what = kernel_name(names[k]) if k >= 0 else OUTSIDE
        out[tid].append((stamp, what))
    return out


def shares(per_thread: dict):
    """({what: share of all samples}, {kernel: share of the samples some thread waited while
    another ran it})."""
    total = collections.Counter(w for rows in per_thread.values() for _, w in rows)
    count = sum(total.values()) or 1
    waits = collections.Counter()
    tids = list(per_thread)
    for tid in tids:
        others = sorted((t, w) for o in tids if o != tid for t, w in per_thread[o])
        stamps = [t for t, _ in others]
        for stamp, what in per_thread[tid]:
            if what != WAIT or not others:
                continue
            k = bisect.bisect_left(stamps, stamp)
            near = min((others[j] for j in (k - 1, k) if 0 <= j < len(others)), key=lambda o: abs(o[0] - stamp))
            waits[near[1]] += 1
    return ({w: c / count for w, c in total.items()}, {w: c / count for w, c in waits.items()})


def measure(args, threads: int, work: str):
    """(median forward ms, shares) of the model at threads, from a perf recording."""
    env = dict(os.environ, SCHEDLANG_CACHE_DIR=os.path.join(work, "cache"),
               SCHEDLANG_LIBRARY_DIR=os.path.join(work, f"libs{threads}"), OMP_NUM_THREADS=str(threads))
    me = [sys.executable, os.path.abspath(__file__), "--child", args.model, args.size, str(threads)]
    subprocess.run(me + ["0", "-"], env=dict(env, SCHEDLANG_LIBRARY_DIR=""), check=True)       # build, fill the cache
    shutil.rmtree(env["SCHEDLANG_LIBRARY_DIR"], ignore_errors=True)
    ready, data = os.path.join(work, f"ready{threads}"), os.path.join(work, f"perf{threads}.data")
    proc = subprocess.Popen(me + [str(args.seconds), ready], env=env, stdout=subprocess.PIPE, text=True)
    while not os.path.exists(ready) and proc.poll() is None:
        time.sleep(0.2)
    if proc.poll() is not None:
        raise SystemExit(f"the model's process at {threads} thread(s) ended before it was ready")
    time.sleep(0.2)              # (the file is written whole by then)
    with open(ready) as f:
        pid = f.read().strip()
    subprocess.run(["perf", "record", "-q", "-F", str(args.frequency), "-p", pid, "-o", data, "--",
                    "sleep", str(args.seconds)], check=True, capture_output=True)
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"the model's process at {threads} thread(s) failed")
    return float(out.strip().splitlines()[-1]), shares(samples(data, symbols(env["SCHEDLANG_LIBRARY_DIR"])))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--size", default="full")
    p.add_argument("--threads", type=int, default=2, help="the thread count compared with one thread")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds of samples per thread count")
    p.add_argument("--frequency", type=int, default=2000, help="samples per second per thread")
    p.add_argument("--top", type=int, default=20, help="rows, by the CPU time lost at --threads")
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        model, size, threads, seconds, ready = args.child
        return child(model, size, int(threads), float(seconds), ready)
    for tool in ("perf", "nm"):
        if shutil.which(tool) is None:
            raise SystemExit(f"model_perf.py needs `{tool}` on the PATH")
    work = tempfile.mkdtemp(prefix="schedlang-model-perf-")
    try:
        (ms1, (one, _)), (msn, (many, waits)) = (measure(args, t, work) for t in (1, args.threads))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = args.threads
    print(f"# {args.model} ({args.size}): median forward {ms1:.2f} ms at 1 thread, {msn:.2f} ms at {n} "
          f"({ms1 / msn:.2f}x); CPU ms per forward from perf samples ({args.seconds:g} s each)")
    rows = []
    for what in set(one) | set(many):
        c1, cn = one.get(what, 0.0) * ms1, many.get(what, 0.0) * msn * n
        rows.append((cn - c1, what, c1, cn))
    rows.sort(reverse=True)
    print(f"  {'kernel':56s} {'1 thread':>9s} {f'{n} threads':>10s} {'ratio':>6s} {'others wait':>12s}")
    for lost, what, c1, cn in rows[:args.top]:
        ratio = f"{cn / c1:6.2f}" if c1 > 0 else "     -"
        wait = waits.get(what, 0.0) * msn * n
        print(f"  {what[:56]:56s} {c1:9.3f} {cn:10.3f} {ratio} {wait:12.3f}")
    print(f"  {'all':56s} {ms1:9.3f} {msn * n:10.3f} {msn * n / ms1:6.2f}")


if __name__ == "__main__":
    main()
