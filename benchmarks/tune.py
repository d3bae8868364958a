"""Auto-scheduler benchmark: tune each workload for a fixed time, then time the best found
schedule beside the best hand schedule, torch and numpy, in one process.

    python benchmarks/tune.py --minutes 5            # the real run (the issue's table; ~25 min)
    python benchmarks/tune.py --quick                # a smoke run: tiny sizes, a few trials
    python benchmarks/tune.py --only gemm1024 --minutes 2 --log-dir runs/
    python benchmarks/tune.py --only gemm1024-64 --gemm-size 512 \
        --target "llvm -mcpu=znver3" --target "llvm -mcpu=znver4"    # both ISAs, one run

--target (repeatable) picks the ISA the code is tuned and built for ("llvm" is the host; a
named -mcpu such as znver3 is AVX2 only, 16 ymm registers): each workload is tuned and
timed for each target in turn, the hand schedules built for the same target. AVX2 code
runs on an AVX-512 host, so two targets give both ISAs side by side on one machine (the
FMA peak column is the host's, measured with its widest vectors).

Workloads: GEMM 1024^3 (--minutes of tuning), the same GEMM after only 64 trials, conv2d
64->64 channels 56x56 3x3 (pad 1; its weights packed ahead of time, as the torch frontend
packs them: nn.conv2d_nchw_prepacked), the same layer as Winograd F(4x4, 3x3) (the algorithm
chosen, as the frontend chooses it; topi.winograd.conv2d_winograd_nchwc, its weight transformed
ahead of time; the search schedules its bgemm, the transforms take their hand schedules: the
CPU sketch rule "transform"), row softmax 4096^2, SiluAndMul 8192^2. Every tuning log
is kept (one JSON-lines file per workload in --log-dir, resumed by a second run) with its
tuning curve as a PNG beside it. Throughput is GFLOP/s with the fraction of the measured FMA
peak (benchmarks/peak.py) for GEMM and conv2d, GB/s (bytes read + written) with the fraction
of the measured copy bandwidth for softmax and SiluAndMul; Apache TVM's fast-exp schedules
(benchmarks/tvm_peers.py) join those two tables where `import tvm` works. Times are the best mean of
`--repeat` rounds after a warm-up, one contender after another (wall time; with --cpu-time, one
thread's CPU time: run it as `OMP_NUM_THREADS=1 taskset -c 1 ... --cpu-time --target "llvm -num-cores=1"`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import schedlang as sl  # noqa: E402
from schedlang.topi import nn  # noqa: E402
import harness  # noqa: E402
import peak  # noqa: E402
import tvm_peers  # noqa: E402
import sl_kernels  # noqa: E402

WORKLOADS = ["gemm1024", "gemm1024-64", "conv2d", "conv2d-winograd", "softmax", "silu"]


def conv2d_program(n: int, c: int, h: int, w: int, f: int, width: int, r: int = 3, pad: int = 1):
    """[X, Wp, conv]: the weights packed ahead of time in blocks of width output channels
    (nn.conv2d_nchw_prepacked), as the torch frontend does; the packing is not timed."""
    X = sl.placeholder((n, c, h, w), name="X")
    Wp = sl.placeholder((-(-f // width), c, r, r, width), name="Wp")
    return [X, Wp, nn.conv2d_nchw_prepacked(X, Wp, f, pad)]


# --cpu-time sets this to time.process_time: one thread's CPU time, which the other processes of a
# loaded machine do not inflate as they do wall time
CLOCK = {"now": time.perf_counter}


def best_time(fn, repeat: int, min_round_s: float = 0.05) -> float:
    """Best mean seconds per call over `repeat` rounds of at least min_round_s, after a warm-up."""
    clock = CLOCK["now"]
    fn()
    best = float("inf")
    for _ in range(repeat):
        n, start = 0, clock()
        while True:
            fn()
            n += 1
            elapsed = clock() - start
            if elapsed >= min_round_s:
                break
        best = min(best, elapsed / n)
    return best


class Table:
    """Rows of one workload: name, ms, throughput, fraction of the reference peak."""

    def __init__(self, title: str, work: float, unit: str, peak_value: float, peak_name: str):
        self.title, self.work, self.unit, self.peak, self.peak_name = title, work, unit, peak_value, peak_name
        self.rows = []
        self.notes = []

    def add(self, name: str, fn, repeat: int, note: str = "") -> float:
        load = harness.ForeignLoad().start()
        sec = best_time(fn, repeat)
        busy = load.stop()
        rate = self.work / sec / 1e9
        self.rows.append((name, sec, rate, note + (f" [others busy {busy:.2f} cores]" if busy > 0.2 else "")))
        return rate

    def print(self) -> None:
        print(f"\n{self.title}")
        print(f"  {'':<30} {'ms':>10} {self.unit:>9} {'% ' + self.peak_name:>14}  notes")
        for name, sec, rate, note in self.rows:
            print(f"  {name:<30} {sec * 1e3:10.3f} {rate:9.2f} {100 * rate / self.peak:13.0f}%  {note}")
        for note in self.notes:
            print(f"  {note}")
        sys.stdout.flush()


def target_tag(target: str) -> str:
    """A file-name part for a target string ("" for the host's plain "llvm")."""
    return "" if target == "llvm" else "-" + "".join(c if c.isalnum() else "_" for c in target.split(None, 1)[-1])


def tune(name: str, tensors, args, trials: int, timeout):
    log = os.path.join(args.log_dir, f"{name}{target_tag(args.target)}.jsonl")
    start = time.perf_counter()
    s, sargs = sl.auto_schedule(tensors[-1:], target=args.target, trials=trials, log=log, seed=args.seed,
                                verbose=1, timeout=timeout)
    took = time.perf_counter() - start
    recs = sl.autoschedule.records.load(log)
    png = os.path.join(args.log_dir, f"{name}{target_tag(args.target)}.png")
    try:
        sl.plot_tuning(log, png)
    except ImportError:
        png = "(no matplotlib)"
    searched = [r for r in recs if "final" not in r]
    info = (f"{len(searched)} candidates measured in {took:.0f} s this run (the best {len(recs) - len(searched)} "
            f"timed again side by side at the end); log {log}, curve {png}")
    return sl.build(s, sargs, target=args.target), info


def gemm(args, peaks, trials: int, timeout, name: str) -> None:
    n = 64 if args.quick else args.gemm_size
    name = name.replace("1024", str(n))            # the log's name says the size tuned
    A, B, C = sl_kernels.gemm_program(n)
    mod, info = tune(name, [A, B, C], args, trials, timeout)
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (n, n)).astype("float32") for _ in range(2))
    c = np.zeros((n, n), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3 * n)
    t = Table(f"GEMM float32 {n}^3, {name}, target {args.target}: {info}", 2.0 * n ** 3, "GFLOP/s",
              peaks["fma"], "FMA peak")
    t.add("schedlang auto_schedule", lambda: mod(a, b, c), args.repeat)
    rt = sl_kernels.gemm_register_tiled(args.target, n, n, n)
    t.add("schedlang hand (reg-tiled)", lambda: rt(a, b, c), args.repeat, "best hand schedule in benchmarks/")
    tut = sl_kernels.gemm(args.target, n, n, n)
    c2 = np.zeros_like(c)
    tut(a, b, c2)
    np.testing.assert_allclose(c2, a @ b, rtol=1e-3, atol=1e-3 * n)
    t.add("schedlang hand (tutorial)", lambda: tut(a, b, c2), args.repeat,
          "tutorials/01_gemm_cpu.py, B packed per call")
    t.add("numpy matmul", lambda: np.matmul(a, b, out=c), args.repeat, "OpenBLAS")
    import torch
    ta, tb, tc = (torch.from_numpy(v) for v in (a, b, c))
    t.add("torch.mm(out=)", lambda: torch.mm(ta, tb, out=tc), args.repeat)
    t.print()


def conv2d(args, peaks) -> None:
    import torch
    import torch.nn.functional as F
    n, ch, hw, f = (1, 8, 12, 8) if args.quick else (1, 64, 56, 64)
    width = sl.Target.create(args.target).native_lanes(32)
    X, Wp, out = conv2d_program(n, ch, hw, hw, f, width)
    mod, info = tune("conv2d", [X, Wp, out], args, args.trials, args.timeout)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, ch, hw, hw), dtype=np.float32)
    w = rng.standard_normal((f, ch, 3, 3), dtype=np.float32)
    wp = nn.pack_conv_weights(w, width)
    o = np.zeros((n, f, hw, hw), "float32")
    mod(x, wp, o)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    want = F.conv2d(tx, tw, padding=1).numpy()
    np.testing.assert_allclose(o, want, rtol=1e-3, atol=1e-3 * ch)
    flops = 2.0 * n * f * hw * hw * ch * 9
    t = Table(f"conv2d float32 NCHW {n}x{ch}x{hw}x{hw}, {f} filters 3x3, pad 1, target {args.target}: {info}",
              flops, "GFLOP/s", peaks["fma"], "FMA peak")
    t.add("schedlang auto_schedule", lambda: mod(x, wp, o), args.repeat, "weights packed ahead of time")
    hand = sl_kernels.conv2d_nchwc(args.target, n, ch, hw, hw, f)
    o2 = np.zeros_like(o)
    hand(x, w, o2)
    np.testing.assert_allclose(o2, want, rtol=1e-3, atol=1e-3 * ch)
    t.add("schedlang hand (NCHWc 8x16)", lambda: hand(x, w, o2), args.repeat, "best hand schedule in benchmarks/")
    to = torch.from_numpy(o)
    with torch.no_grad():
        t.add("torch F.conv2d (oneDNN)", lambda: F.conv2d(tx, tw, padding=1), args.repeat, "allocates its output")
        t.add("torch convolution(out=)", lambda: torch.ops.aten.convolution.out(
            tx, tw, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, out=to), args.repeat)
        # what Inductor with freezing runs: the weight reordered once, a channels-last input
        conv_args = ([1, 1], [1, 1], [1, 1], 1)
        twp = torch.ops.mkldnn._reorder_convolution_weight(tw, *conv_args, list(tx.shape))
        txc = tx.contiguous(memory_format=torch.channels_last)
        got = torch.ops.mkldnn._convolution_pointwise(txc, twp, None, *conv_args, "none", [], "")
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-3, atol=1e-3 * ch)
        t.add("oneDNN prepacked", lambda: torch.ops.mkldnn._convolution_pointwise(
            txc, twp, None, *conv_args, "none", [], ""), args.repeat, "weight reordered once, channels-last input")
    t.print()


def conv2d_winograd(args, peaks) -> None:
    """The conv2d layer as F(4x4, 3x3) in NCHWc (input [N, C/8, H, W, 8]; its relayout not timed),
    U = G w G^T transformed ahead of time: the searched schedule beside topi.winograd's hand
    schedule, the direct NCHWc hand kernel and oneDNN (FLOPs: the direct convolution's)."""
    import torch
    import torch.nn.functional as F
    from schedlang.topi import winograd as wg
    n, ch, hw, f = (1, 16, 12, 16) if args.quick else (1, 64, 56, 64)
    lanes = sl.Target.create(args.target).native_lanes(32)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, ch, hw, hw), dtype=np.float32)
    w = rng.standard_normal((f, ch, 3, 3), dtype=np.float32)
    u = wg.transform_weight(w, 4, 16)
    X = sl.placeholder((n, ch // lanes, hw, hw, lanes), name="X")
    U = sl.placeholder(u.shape, name="U")
    out = wg.conv2d_winograd_nchwc(X, U, f, 4, 1)
    mod, info = tune("conv2d-winograd", [X, U, out], args, args.trials, args.timeout)
    xb = np.ascontiguousarray(x.reshape(n, ch // lanes, lanes, hw, hw).transpose(0, 1, 3, 4, 2))
    o = np.zeros([int(e) for e in out.shape], "float32")
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    want = F.conv2d(tx, tw, padding=1).numpy()
    # Winograd's float32 error: tests/topi/test_winograd.py's bound, |error| <= 2e-5 sum |w| |x|max
    scale = 2e-5 * np.abs(w).sum(axis=(1, 2, 3)).max() * np.abs(x).max()

    def check(mod_, o_):
        mod_(xb, u, o_)
        got = o_.transpose(0, 1, 4, 2, 3).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=0, atol=scale)
    check(mod, o)
    flops = 2.0 * n * f * hw * hw * ch * 9
    t = Table(f"conv2d 3x3 as Winograd F(4x4) NCHWc {n}x{ch}x{hw}x{hw}, {f} filters, pad 1, target {args.target}: "
              f"{info}", flops, "GFLOP/s", peaks["fma"], "FMA peak")
    t.add("schedlang auto_schedule (F4)", lambda: mod(xb, u, o), args.repeat, "the bgemm searched, U ahead of time")
    s = wg.schedule_conv2d_winograd(sl.create_schedule(out.op), out, args.target)
    hand = sl.build(s, [X, U, out], target=args.target)
    o2 = np.zeros_like(o)
    check(hand, o2)
    t.add("schedlang hand Winograd (F4)", lambda: hand(xb, u, o2), args.repeat, "topi.winograd's schedule")
    direct = sl_kernels.conv2d_nchwc(args.target, n, ch, hw, hw, f)
    o3 = np.zeros((n, f, hw, hw), "float32")
    t.add("schedlang hand direct (NCHWc)", lambda: direct(x, w, o3), args.repeat,
          "best hand direct schedule in benchmarks/")
    with torch.no_grad():
        t.add("torch F.conv2d (oneDNN)", lambda: F.conv2d(tx, tw, padding=1), args.repeat, "allocates its output")
        conv_args = ([1, 1], [1, 1], [1, 1], 1)
        twp = torch.ops.mkldnn._reorder_convolution_weight(tw, *conv_args, list(tx.shape))
        txc = tx.contiguous(memory_format=torch.channels_last)
        t.add("oneDNN prepacked", lambda: torch.ops.mkldnn._convolution_pointwise(
            txc, twp, None, *conv_args, "none", [], ""), args.repeat, "weight reordered once, channels-last input")
    t.print()


def softmax(args, peaks) -> None:
    rows = cols = 64 if args.quick else 4096
    X, *_, out = sl_kernels.softmax_stages(rows, cols)
    mod, info = tune("softmax", [X, out], args, args.trials, args.timeout)
    x = np.random.default_rng(2).standard_normal((rows, cols), dtype=np.float32)
    o = np.zeros((rows, cols), "float32")
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    mod(x, o)
    np.testing.assert_allclose(o, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-7)
    t = Table(f"Row softmax float32 {rows}x{cols}, target {args.target}: {info}", 2.0 * x.nbytes, "GB/s", peaks["copy"], "copy BW")
    t.add("schedlang auto_schedule", lambda: mod(x, o), args.repeat)
    hand = sl_kernels.softmax(args.target, rows, cols, 32, True, exp_at_row=True)
    t.add("schedlang hand", lambda: hand(x, o), args.repeat, "rfactor'd vector max/sum, exp once per row, vec 32")
    import torch
    tx, to = torch.from_numpy(x), torch.from_numpy(o)
    t.add("torch _softmax.out", lambda: torch.ops.aten._softmax.out(tx, 1, False, out=to), args.repeat)
    _copy_row(t, x.nbytes, args.repeat)
    builds = {f"vec {v}{', exp at row' if at_row else ''}":
              (lambda v=v, at_row=at_row: tvm_peers.softmax(rows, cols, v, True, True, peaks["cpu"], peaks["cores"],
                                                            exp_at_row=at_row))
              for v in (8, 16, 32) for at_row in (False, True)}
    _tvm_rows(t, args, peaks, builds, x, o.shape, lambda: e / e.sum(axis=1, keepdims=True),
              "topi.fast_exp, rfactor'd vector max/sum, exp inlined or at the row loop")
    t.print()


def silu(args, peaks) -> None:
    rows = cols = 64 if args.quick else 8192
    x_t, out_t = sl_kernels.silu_program(rows, cols)
    mod, info = tune("silu", [x_t, out_t], args, args.trials, args.timeout)
    x = np.random.default_rng(3).standard_normal((rows, cols), dtype=np.float32)
    half = cols // 2
    o = np.zeros((rows, half), "float32")
    x64 = x[:, :half].astype(np.float64)
    mod(x, o)
    np.testing.assert_allclose(o, x64 / (1 + np.exp(-x64)) * x[:, half:], rtol=1e-5, atol=1e-6)
    t = Table(f"SiluAndMul float32 x {rows}x{cols}, target {args.target}: {info}", x.nbytes + o.nbytes, "GB/s", peaks["copy"], "copy BW")
    t.add("schedlang auto_schedule", lambda: mod(x, o), args.repeat)
    hand = sl_kernels.silu_and_mul(args.target, rows, cols, 32)
    t.add("schedlang hand (vec 32)", lambda: hand(x, o), args.repeat)
    import torch
    tx, to, tmp = torch.from_numpy(x), torch.from_numpy(o), torch.empty(rows, half)

    def eager():
        torch.ops.aten.silu.out(tx[:, :half], out=tmp)
        torch.mul(tmp, tx[:, half:], out=to)
    t.add("torch eager (out=)", eager, args.repeat)
    _copy_row(t, t.work / 2, args.repeat)
    builds = {f"vec {v}": (lambda v=v: tvm_peers.silu_and_mul(rows, cols, v, True, peaks["cpu"], peaks["cores"]))
              for v in (8, 16, 32)}
    _tvm_rows(t, args, peaks, builds, x, o.shape, lambda: x64 / (1 + np.exp(-x64)) * x[:, half:],
              "topi.fast_exp: x/(1+fast_exp(-x))*y, parallel rows, vectorized split")
    t.print()


def _tvm_rows(t: Table, args, peaks, builds, x: np.ndarray, out_shape, want, note: str) -> None:
    """A row for Apache TVM's schedule (tvm_peers) at its best variant (builds: a label -> a
    function building it), each checked against want() first; a note instead where TVM is not
    importable."""
    tvm, info = (None, "disabled (--no-tvm)") if args.no_tvm else tvm_peers.load(peaks["cores"])
    if tvm is None:
        t.notes.append(f"Apache TVM: not measured, {info}")
        return
    tx, ref, best = tvm_peers.tensor(x), want(), None
    for label, build in builds.items():
        f, regs = build()
        to = tvm_peers.tensor(np.zeros(out_shape, np.float32))
        fn = lambda f=f, to=to: f(tx, to)  # noqa: E731
        tvm_peers.checker(f"TVM {label}", fn, to, ref, rtol=1e-4, atol=1e-6)()
        sec = best_time(fn, max(1, args.repeat // 2))
        if best is None or sec < best[0]:
            best = (sec, label, fn, regs)
    _, label, fn, regs = best
    t.add(f"TVM {info}", fn, args.repeat, f"{note}; best of {len(builds)}: {label}, {regs}")


def _copy_row(t: Table, nbytes: float, repeat: int) -> None:
    """A row for torch's copy_ of as many bytes as the workload reads and writes."""
    import torch
    src, dst = torch.ones(int(nbytes) // 4), torch.empty(int(nbytes) // 4)
    t.add("torch copy_ (same bytes)", lambda: dst.copy_(src), repeat, "the memory-bound limit")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=5.0, help="tuning time per workload")
    p.add_argument("--trials", type=int, default=100000, help="at most this many candidates per workload")
    p.add_argument("--only", action="append", choices=WORKLOADS, help="run only these workloads (repeatable)")
    p.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, 6 trials each")
    p.add_argument("--log-dir", default="tune-logs", help="where the tuning logs go (resumed when present)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=5, help="timed rounds per contender")
    p.add_argument("--no-tvm", action="store_true", help="skip Apache TVM's rows even if it is installed")
    p.add_argument("--target", action="append", dest="targets", metavar="TARGET",
                   help='tune and build for this target (repeatable; default "llvm", the host), e.g. '
                        '"llvm -mcpu=znver3" for AVX2 code')
    p.add_argument("--cpu-time", action="store_true",
                   help="time the contenders by CPU time (time.process_time) at one thread, torch and numpy "
                        "included: for a loaded machine (give a one-thread target, e.g. \"llvm -num-cores=1\")")
    p.add_argument("--gemm-size", type=int, default=1024, help="M = N = K of the GEMM workloads")
    args = p.parse_args(argv)
    args.targets = args.targets or ["llvm"]
    for spec in args.targets:
        sl.Target.create(spec)            # a bad target string fails here, before any tuning
    args.timeout = None if args.quick else args.minutes * 60
    if args.cpu_time:
        import torch
        torch.set_num_threads(1)
        CLOCK["now"] = time.process_time
    if args.quick:
        args.trials, args.repeat = 6, 2
    os.makedirs(args.log_dir, exist_ok=True)
    cores = harness.core_count()
    fma = peak.fma_peak(cores)
    timing = harness.Timing.quick() if args.quick else harness.Timing()
    copy = max(harness.copy_bandwidth(256 << 20 if not args.quick else 4 << 20, timing).values())
    peaks = {"fma": fma["all"], "copy": copy, "cpu": fma["cpu"], "cores": cores}
    print(f"machine : {harness.cpu_model()} ({fma['cpu']}), {cores} cores, {fma['lanes']} float32 lanes")
    print(f"peaks   : FMA {fma['all']:.1f} GFLOP/s (measured, all cores); copy {copy:.1f} GB/s (256 MiB, best of "
          f"numpy/torch); load average {harness.load_average()}")
    print(f"tuning  : {'quick' if args.quick else f'{args.minutes:g} min per workload'}, seed {args.seed}")
    if args.cpu_time:
        print("timing  : CPU time at one thread (time.process_time), torch.set_num_threads(1); "
              "the FMA peak above is wall time on all cores: ignore its % column")
    for spec in args.targets:
        t = sl.Target.create(spec)
        print(f"target  : {spec} -> {t}, {t.vector_bits}-bit vectors, {t.native_registers()} vector registers")
    only = args.only or WORKLOADS
    for spec in args.targets:
        args.target = spec
        run_workloads(args, peaks, only)


def run_workloads(args, peaks, only) -> None:
    """Every workload of `only` for args.target."""
    if "gemm1024" in only:
        gemm(args, peaks, args.trials, args.timeout, "gemm1024")
    if "gemm1024-64" in only:
        gemm(args, peaks, min(args.trials, 64), None, "gemm1024-64")
    if "conv2d" in only:
        conv2d(args, peaks)
    if "conv2d-winograd" in only:
        conv2d_winograd(args, peaks)
    if "softmax" in only:
        softmax(args, peaks)
    if "silu" in only:
        silu(args, peaks)


if __name__ == "__main__":
    main()
