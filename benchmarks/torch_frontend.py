"""The PyTorch frontend end to end: nn.Modules through schedlang.torch.compile beside torch
eager and torch.compile (Inductor), with the first call's compile time.

    python benchmarks/torch_frontend.py               # SiluAndMul x 8192x8192, SwiGLU MLP 2048x1024x2816
    python benchmarks/torch_frontend.py --quick       # small shapes, short rounds: proves it runs
    python benchmarks/torch_frontend.py --no-compile  # without torch.compile (Inductor)

Every contender is the module called as a user calls it: it allocates its output on every
call (so do all three; the allocation, and the page faults of touching fresh memory, are part
of what is measured). schedlang also runs with `out=` (one output buffer, reused: no
allocation), and SiluAndMul has two copy baselines beside it, each copying a tensor the size
of the output (GB/s of their own bytes read + written): torch.clone (allocates its result, as
the module calls do) and copy_ into a preallocated tensor (as the out= call). Each is
checked against eager PyTorch before it is timed. The first-call table runs each compiler in a fresh child
process (Inductor with an empty cache directory): compile plus the first call, as a user
waits for it, with the compilers' Python imports done before the clock starts. Tables go
to stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
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

import torch  # noqa: E402

import schedlang as sl  # noqa: E402
from schedlang.torch.zoo import SiluAndMul, SwiGLUMLP  # noqa: E402
import harness  # noqa: E402
from harness import Contender, expect_close, skipped  # noqa: E402

FULL = {"silu": (8192, 8192), "mlp": (2048, 1024, 2816)}
QUICK = {"silu": (512, 1024), "mlp": (64, 128, 344)}
TOL = dict(rtol=1e-4, atol=1e-4)


def workload(kind: str, shape: tuple):
    """(title, unit, shape text, work per call, module, inputs) of one workload."""
    torch.manual_seed(0)
    if kind == "silu":
        rows, cols = shape
        x = torch.randn(rows, cols)
        nbytes = x.numel() * 4 + rows * (cols // 2) * 4          # read x once, write out once
        return (f"SiluAndMul float32, x {rows}x{cols} -> {rows}x{cols // 2}", "GB/s",
                f"{rows}x{cols}", float(nbytes), SiluAndMul().eval(), (x,))
    tokens, hidden, inter = shape
    x = torch.randn(tokens, hidden)
    model = SwiGLUMLP(hidden, inter).eval()
    flops = 2.0 * tokens * hidden * inter * 3                       # three matmuls
    return (f"SwiGLU MLP float32, down(silu(gate(x)) * up(x)), x {tokens}x{hidden}, intermediate {inter}",
            "GFLOP/s", f"{tokens}x{hidden}x{inter}", flops, model, (x,))


def contenders(model, inputs, use_compile: bool):
    """schedlang.torch.compile (allocating, and with out=), torch eager, torch.compile; each
    checked against eager."""
    with torch.no_grad():
        want = model(*inputs)

    def checked(name, fn):
        def check():
            with torch.no_grad():
                expect_close(name, fn().numpy(), want.numpy(), **TOL)
        return check

    import schedlang.torch as sl_torch
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", sl_torch.FallbackWarning)
        compiled = sl_torch.compile(model, inputs)
    note = "default schedules; allocates its output"
    fallbacks = [str(w.message).split(": ")[-1] for w in caught if issubclass(w.category, sl_torch.FallbackWarning)]
    if fallbacks:
        note += "; run by torch: " + ", ".join(fallbacks)
    ours = lambda: compiled(*inputs)  # noqa: E731
    buf = torch.empty_like(want)
    ours_out = lambda: compiled(*inputs, out=buf)  # noqa: E731
    eager = lambda: model(*inputs)  # noqa: E731
    rows = [Contender("schedlang.torch.compile", ours, note, checked("schedlang", ours), is_schedlang=True),
            Contender("schedlang.torch.compile (out=)", ours_out, "default schedules; out= one buffer, reused",
                      checked("schedlang out=", ours_out), is_schedlang=True),
            Contender("torch eager", eager, "module call; allocates", checked("torch eager", eager))]
    if not use_compile:
        rows.append(skipped("torch.compile", "disabled (--no-compile)"))
        return rows
    try:
        inductor = torch.compile(model, dynamic=False)
        with torch.no_grad():
            inductor(*inputs)
        fn = lambda: inductor(*inputs)  # noqa: E731
        rows.append(Contender("torch.compile", fn, "inductor, default mode; allocates", checked("torch.compile", fn)))
    except Exception as e:  # noqa: BLE001 (a peer that fails to compile is a skipped row, not a failed run)
        rows.append(skipped("torch.compile", f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"))
    return rows


def copy_baselines(like: torch.Tensor):
    """Copies of a tensor the size of the output: (contenders, bytes each moves per call)."""
    src = torch.randn(like.shape)
    dst = torch.empty_like(src)
    clone = lambda: src.clone()  # noqa: E731
    copy = lambda: dst.copy_(src)  # noqa: E731

    def check(fn):
        return lambda: expect_close("copy", fn().numpy(), src.numpy(), rtol=0, atol=0)
    shape = "x".join(map(str, like.shape))
    rows = [Contender("copy: torch.clone", clone, f"baseline: a {shape} copy, allocates its result", check(clone)),
            Contender("copy: copy_ into preallocated", copy, f"baseline: a {shape} copy, no allocation", check(copy))]
    return rows, 2.0 * src.numel() * src.element_size()


def copy_summary(rows) -> str:
    """schedlang's GB/s as a share of the copy baselines' (allocating with clone, out= with copy_)."""
    by = {r.name: r.rate for r in rows if not r.skipped}
    pairs = [("schedlang.torch.compile", "copy: torch.clone"),
             ("schedlang.torch.compile (out=)", "copy: copy_ into preallocated")]
    parts = [f"{a} {100 * by[a] / by[b]:.0f}% of {b}" for a, b in pairs if a in by and b in by]
    return "-> of copy bandwidth: " + "; ".join(parts) if parts else ""


# ---------------------------------------------------------------- first call, in a child process

def first_call_child(compiler: str, kind: str, shape: tuple) -> float:
    """Seconds from the compile call to the end of the first call, in this (fresh) process;
    the compiler's Python modules are imported before the clock starts."""
    _, _, _, _, model, inputs = workload(kind, shape)
    import schedlang.target.llvm.backend  # noqa: F401  (imported by the first compile for the CPU)
    import schedlang.torch as sl_torch
    import torch._inductor.compile_fx  # noqa: F401
    warnings.simplefilter("ignore")
    with torch.no_grad():
        start = time.perf_counter()
        if compiler == "schedlang":
            sl_torch.compile(model, inputs)(*inputs)
        else:
            torch.compile(model, dynamic=False)(*inputs)
        return time.perf_counter() - start


def first_call(compiler: str, kind: str, shape: tuple, timeout_s: float, threads: int) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = cache                   # a cold cache, as on a first run
        cmd = [sys.executable, os.path.abspath(__file__), "--first-call-child", compiler, kind,
               ",".join(map(str, shape)), "--threads", str(threads)]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"over {timeout_s:.0f} s"
    if proc.returncode != 0:
        return "failed: " + ((proc.stderr.strip().splitlines() or ["no message"])[-1][:100])
    return f"{float(proc.stdout.split()[-1]):.2f} s"


# ---------------------------------------------------------------- the run

def header(target, cores: int, timing: harness.Timing) -> str:
    return "\n".join([
        "schedlang PyTorch frontend, end to end: schedlang.torch.compile beside torch eager and torch.compile",
        f"machine : {harness.cpu_model()}, {harness.core_count()} cores; schedlang target: cpu={target.cpu}, "
        f"vector_bits={target.vector_bits} ({harness.vector_isa(target)})",
        f"threads : {cores} for everyone (torch.set_num_threads({cores}), schedlang num_threads={cores})",
        f"timing  : warm-up, then {timing.repeat} interleaved rounds of >= {timing.min_round_s * 1e3:.0f} ms per "
        "contender; 'best' = best round's mean per call",
        f"software: python {sys.version.split()[0]}, schedlang {sl.__version__}, torch {torch.__version__}",
        f"load avg: {harness.load_average()} at start",
    ])


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small shapes (SiluAndMul 512x1024, MLP 64x128x344) and short rounds: checks that it runs")
    p.add_argument("--only", choices=tuple(FULL), action="append", help="one workload (repeatable)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (Inductor)")
    p.add_argument("--no-first-call", action="store_true", help="skip the first-call (compile time) table")
    p.add_argument("--first-call-timeout", type=float, default=300.0, help="seconds per first-call child")
    p.add_argument("--threads", type=int, default=0, help="threads for everyone (default: all cores)")
    p.add_argument("--first-call-child", nargs=3, metavar=("COMPILER", "KIND", "SHAPE"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    cores = args.threads or harness.core_count()
    torch.set_num_threads(cores)
    if args.first_call_child:
        compiler, kind, shape = args.first_call_child
        print(first_call_child(compiler, kind, tuple(int(v) for v in shape.split(","))))
        return 0
    shapes = QUICK if args.quick else FULL
    timing = harness.Timing.quick() if args.quick else harness.Timing()
    target = sl.Target.create("llvm").with_options(num_threads=cores)
    only = args.only or list(FULL)
    print(header(target, cores, timing))
    if "silu" in only:
        bw = harness.copy_bandwidth(256 * 2 ** (20 if not args.quick else 16), timing)
        print("peak ref: STREAM-like copy (GB/s = bytes read + written / time): "
              + ", ".join(f"{k} {v:.1f} GB/s" for k, v in bw.items()))
    first_rows = []
    for kind in only:
        title, unit, shape_text, work, model, inputs = workload(kind, shapes[kind])
        log(f"{title}:")
        entries = contenders(model, inputs, not args.no_compile)
        with torch.no_grad():
            copies, copy_bytes = copy_baselines(model(*inputs)) if kind == "silu" else ([], 0.0)
        mon = harness.ForeignLoad().start()
        rows = harness.run_workload(shape_text, entries + copies, work, timing, log)
        foreign = mon.stop()
        for r in rows[len(entries):]:               # the copies' GB/s count their own bytes
            r.rate = copy_bytes / r.best_s / 1e9
        print()
        print(harness.format_table(title, unit, rows))
        if copies:
            print(copy_summary(rows))
        print(f"   other processes kept {foreign:.2f} of {harness.core_count()} cores busy while this table was "
              "measured" + (" -- NOISY: rerun on a quiet machine" if foreign > 0.25 else ""))
        sys.stdout.flush()
        if not args.no_first_call:
            compilers = ["schedlang"] + ([] if args.no_compile else ["inductor"])
            for c in compilers:
                log(f"  first call of {c} in a fresh process ...")
                first_rows.append((title.split(",")[0], c, first_call(c, kind, shapes[kind],
                                                                      args.first_call_timeout, cores)))
    if first_rows:
        print("\nFirst call: compile + first run, in a fresh process (imports done before the clock starts; "
              "Inductor with an empty cache directory)")
        width = max(len(r[0]) for r in first_rows)
        for workload_name, compiler, result in first_rows:
            print(f"  {workload_name.ljust(width)}  {compiler:<10} {result}")
    print(f"\nload avg: {harness.load_average()} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
