"""Whole models side by side: torch eager, torch.compile (Inductor), ONNX Runtime and
schedlang (untuned default schedules; tuned from a tuning log when one is given), batch 1,
float32, the same thread count for every contender, in one run.

    python benchmarks/models.py                    # ResNet-18/50, MobileNetV2, BERT-base (seq 128), Llama
    python benchmarks/models.py --quick            # tiny models, a few rounds: proves it runs (CI)
    python benchmarks/models.py --only resnet18 --no-compile --no-onnx
    python benchmarks/models.py --tuned-log tune.jsonl   # fills the "schedlang tuned" column
    python benchmarks/models.py --tune 2000 --tune-timeout 1800   # tunes each model first (a log per model)

The models are schedlang.torch.zoo's ("full": the standard sizes; the Llama is a few
decoder layers of realistic width), in eval mode with random weights, called under
torch.no_grad(). Every contender is checked against eager before it is timed (a wrong
result is reported, not timed). Latency is the median of N calls after warm-up, the
contenders timed in interleaved rounds (harness.measure) so that load from other processes
falls on all alike. Threads: torch.set_num_threads, ONNX Runtime's intra_op_num_threads
and schedlang's num_threads (and OMP_NUM_THREADS) all get --threads.

First call: Inductor's and ONNX Runtime's are taken in this process (compile or export plus
session creation, plus the first run). schedlang's are taken in fresh processes (imports
done before the clock starts): "cold" with an empty SCHEDLANG_CACHE_DIR, then "warm disk
cache": a second fresh process with the folder the first one filled (as slow as cold where
schedlang writes no kernel cache to it); in parentheses, the part beyond torch.export (the
goal counts from there). Tables go to stdout, progress to stderr.

Work: each model's GFLOP per forward (torch.utils.flop_counter on the eager model: matmuls,
convolutions and attention, counted dense; elementwise work not counted) and the machine's
float32 FMA peak at --threads (peak.py, measured at the start), so that every latency reads
as a fraction of the peak and a goal as the fraction it would need.
"""
from __future__ import annotations

import argparse
import io
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

import numpy as np  # noqa: E402
import torch  # noqa: E402

import harness  # noqa: E402

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "bert", "llama")
QUICK = ("resnet18", "llama")      # a CNN and a transformer with token ids: every code path, in under a minute
TITLES = {"resnet18": "ResNet-18 224x224", "resnet50": "ResNet-50 224x224", "mobilenet_v2": "MobileNetV2 224x224",
          "bert": "BERT-base seq 128 (12 layers)", "llama": "Llama seq 128 (4 layers, dim 2048, hidden 5632)"}
COLUMNS = ("eager", "torch.compile", "onnxruntime", "schedlang", "schedlang tuned")
REL_TOL = 1e-3          # max |got - want| / max |want|: float32 through different kernel orders


class Entry:
    """One contender on one model: its callable, setup time (compile or export, and the first
    call), a note, and its median latency once timed; skipped says why it was not timed."""

    def __init__(self, name: str, fn=None, setup_s: float = float("nan"), note: str = "", skipped: str = ""):
        self.name, self.fn, self.setup_s, self.note, self.skipped = name, fn, setup_s, note, skipped
        self.median_s = float("nan")


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:110] if text else ''}"


def _error(got, want) -> float:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))


def _entry(name: str, make, want) -> Entry:
    """make() -> (callable, note); timed from the call of make to the end of the first call;
    the first call's result is checked against eager."""
    start = time.perf_counter()
    try:
        with torch.no_grad():
            fn, note = make()
            got = fn()
    except Exception as e:  # noqa: BLE001 (a contender that fails is a row saying so, not a failed run)
        return Entry(name, skipped=f"failed: {_first_line(e)}")
    setup = time.perf_counter() - start
    err = _error(got, want)
    if not err <= REL_TOL:
        return Entry(name, setup_s=setup, note=note, skipped=f"WRONG RESULT: relative error {err:.2e}")
    return Entry(name, fn, setup, note)


# ---------------------------------------------------------------- contenders

def eager(model, inputs):
    return (lambda: model(*inputs)), "module call"


def inductor(model, inputs):
    """torch.compile under no_grad with freezing (weights as constants: oneDNN prepacking and
    post-op fusion), Inductor's recommended CPU inference setting."""
    import torch._inductor.config as cfg
    cfg.freezing = True
    compiled = torch.compile(model, dynamic=False)
    return (lambda: compiled(*inputs)), "inductor, freezing=True"


def onnxruntime_session(model, inputs, threads: int):
    """torch.onnx.export (the dynamo exporter, else the TorchScript one), then an ONNX Runtime
    CPU session with all graph optimizations on `threads` intra-op threads."""
    import onnxruntime as ort
    buf, notes = io.BytesIO(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dynamo in (True, False):
            try:
                buf = io.BytesIO()
                if dynamo:
                    torch.onnx.export(model, inputs, buf, dynamo=True, verbose=False, optimize=True)
                else:
                    torch.onnx.export(model, inputs, buf, dynamo=False, verbose=False)
                notes.append("dynamo export" if dynamo else "legacy export")
                break
            except Exception as e:  # noqa: BLE001
                notes.append(f"{'dynamo' if dynamo else 'legacy'} export failed: {_first_line(e)}")
                if not dynamo:
                    raise RuntimeError("; ".join(notes)) from None
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(buf.getvalue(), opts, providers=["CPUExecutionProvider"])
    feed = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), inputs)}
    return (lambda: sess.run(None, feed)[0]), "; ".join(notes)


def schedlang_compiled(model, inputs, threads: int, log=None, tune: int = 0, tune_timeout=None):
    """schedlang's compiled model; with tune=N, its kernels tuned first with N trials into log
    (schedlang.torch.compile(..., tune=N): the gradient task scheduler), the time noted."""
    import schedlang as sl
    import schedlang.torch as sl_torch
    target = sl.Target.create("llvm").with_options(num_threads=threads)
    options = dict(tune=tune, timeout=tune_timeout, verbose=1) if tune else {}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = sl_torch.compile(model, inputs, target=target, log=log, **options)
    fallbacks = compiled.fallback_ops()
    note = f"{len(compiled.program.parts)} part(s); in torch: " + (
        ", ".join(f"{op} x{n}" for op, n in fallbacks.items()) if fallbacks else "none")
    if tune and compiled.tuning is not None:
        t = compiled.tuning
        note += (f"; tuned {sum(t.trials)} trials over {len(t.tasks)} tasks in {time.perf_counter() - start:.0f} s "
                 f"(log {log})")
        checked = getattr(t, "in_model", None)
        if checked:             # the tuned tasks timed inside the model (torch/in_model.py)
            kept = sum(r.kept == "record" for r in checked)
            note += f"; inside the model {kept} of {len(checked)} records beat their default and were kept"
    elif log is not None:
        note += f"; records from {log}"
    fn = lambda: compiled(*inputs)  # noqa: E731
    fn.fallbacks = sum(fallbacks.values())
    fn.compiled = compiled
    return fn, note


def tuned_log_note(compiled, log: str) -> str:
    """What log holds for the compiled model's kernels (tune.extract_tasks: its tuning tasks):
    how many of them it has records of, the searched candidates among those, the span of
    their measurement time stamps (the tuning time of a log made for this model), and how many
    tasks have a record revalidated at the compile target's threads (torch/revalidate.py)."""
    import datetime
    from schedlang.autoschedule import records
    from schedlang.torch.tune import extract_tasks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        keys = {t.workload_key for t in extract_tasks(compiled.program, compiled.target)}
        recs = [r for r in records.load(log) if r["workload"] in keys]
    if not recs:
        return f"log: none of the model's {len(keys)} tuning tasks"
    searched = sum(r.get("sketch") not in ("default", "default-variant") and "final" not in r for r in recs)
    stamps = sorted(datetime.datetime.strptime(r["measured_at"], "%Y-%m-%dT%H:%M:%SZ") for r in recs
                    if isinstance(r.get("measured_at"), str))
    span = f", measured {stamps[0]:%Y-%m-%d %H:%M} to {stamps[-1]:%H:%M} UTC " \
           f"({(stamps[-1] - stamps[0]).total_seconds() / 60:.0f} min)" if stamps else ""
    threads = records.target_threads(compiled.target)
    revalidated = {r["workload"] for r in recs if (r.get("revalidated") or {}).get("threads") == threads}
    return (f"log: {len({r['workload'] for r in recs})} of the model's {len(keys)} tuning tasks, "
            f"{searched} searched candidates{span}; {len(revalidated)} task(s) revalidated at {threads} thread(s)")


# ---------------------------------------------------------------- first call in a fresh process

def first_call_child(name: str, size: str, threads: int) -> str:
    """Seconds from schedlang.torch.compile's call to the end of the first call, in this fresh
    process (imports done before the clock starts), and of them the seconds in torch.export
    (capture): "total export"."""
    import schedlang as sl
    import schedlang.target.llvm.backend  # noqa: F401  (the first CPU compile imports it)
    import schedlang.torch as sl_torch
    from schedlang.torch import zoo
    warnings.simplefilter("ignore")
    model, inputs = zoo.build(name, size)
    target = sl.Target.create("llvm").with_options(num_threads=threads)
    capture, spent = sl_torch.capture, []

    def timed_capture(*args, **kwargs):
        start = time.perf_counter()
        try:
            return capture(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)
    sl_torch.capture = timed_capture          # compile() calls it by this name
    with torch.no_grad():
        start = time.perf_counter()
        sl_torch.compile(model, inputs, target=target)(*inputs)
        return f"{time.perf_counter() - start} {sum(spent)}"


def first_call(name: str, size: str, threads: int, cache_dir: str, timeout_s: float) -> str:
    env = dict(os.environ, SCHEDLANG_CACHE_DIR=cache_dir, OMP_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, os.path.abspath(__file__), "--first-call-child", name, size, "--threads", str(threads)]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"over {timeout_s:.0f} s"
    if proc.returncode != 0:
        return "failed: " + ((proc.stderr.strip().splitlines() or ["no message"])[-1][:80])
    total, export = map(float, proc.stdout.split()[-2:])
    return f"{total:.2f} s ({total - export:.2f})"


# ---------------------------------------------------------------- the run

def cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "?"
    shown = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile")
             if f in flags]
    return " ".join(shown) or "none of avx2/avx512"


def onnxruntime_version() -> str:
    """ONNX Runtime's version, or None when it is not installed (the bench extra installs it)."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime.__version__


def model_gflop(model, inputs) -> float:
    """GFLOP of one forward of model (eager, torch.utils.flop_counter), the CPU's SDPA op
    counted as the CUDA ones are (flop_counter knows only those)."""
    from torch.utils import flop_counter as fc
    cpu_sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    if cpu_sdpa not in fc.flop_registry:
        fc.register_flop_formula(cpu_sdpa, get_raw=True)(fc.sdpa_flop)     # sdpa_flop is wrapped already
    with torch.no_grad(), fc.FlopCounterMode(display=False) as counter:
        model(*inputs)
    return counter.get_total_flops() / 1e9


def header(args, timing) -> str:
    import schedlang as sl
    return "\n".join([
        "Whole models, batch 1, float32: torch eager, torch.compile (Inductor), ONNX Runtime, schedlang",
        f"machine : {harness.cpu_model()}, {harness.core_count()} cores; ISA flags: {cpu_flags()}",
        f"threads : {args.threads} for every contender (torch.set_num_threads, ORT intra_op_num_threads, "
        "schedlang num_threads and OMP_NUM_THREADS)",
        f"timing  : warm-up, then the median of {timing.repeat} calls per contender, in interleaved rounds",
        f"software: python {sys.version.split()[0]}, torch {torch.__version__}, onnxruntime {onnxruntime_version() or 'not installed'}, "
        f"schedlang {sl.__version__}",
        f"load avg: {harness.load_average()} at start",
        f"FMA peak: {args.peak:.1f} GFLOP/s float32 at {args.threads} threads (peak.py, measured now)",
    ])


def run_model(name: str, args, timing, first_rows: list) -> list:
    from schedlang.torch import zoo
    size = "tiny" if args.quick else "full"
    model, inputs = zoo.build(name, size)
    with torch.no_grad():
        want = model(*inputs)
    gflop = model_gflop(model, inputs)
    harness_log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    harness_log(f"{name} ({size}):")
    makers = {"eager": lambda: eager(model, inputs)}
    if not args.no_compile:
        makers["torch.compile"] = lambda: inductor(model, inputs)
    if not args.no_onnx and onnxruntime_version() is not None:
        makers["onnxruntime"] = lambda: onnxruntime_session(model, inputs, args.threads)
    makers["schedlang"] = lambda: schedlang_compiled(model, inputs, args.threads)
    if args.tune:
        log = args.tuned_log or os.path.join(args.tune_dir, f"tune-{name}-{size}.jsonl")
        os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
        makers["schedlang tuned"] = lambda: schedlang_compiled(model, inputs, args.threads, log, args.tune,
                                                               args.tune_timeout)
    elif args.tuned_log:
        makers["schedlang tuned"] = lambda: schedlang_compiled(model, inputs, args.threads, args.tuned_log)
    entries = []
    for col in COLUMNS:
        if col not in makers:
            why = {"torch.compile": "--no-compile",
                   "onnxruntime": "--no-onnx" if args.no_onnx else "not installed: pip install -e '.[bench]'",
                   "schedlang tuned": "no --tune N or --tuned-log"}[col]
            entries.append(Entry(col, skipped=f"not run ({why})"))
            continue
        harness_log(f"  {col}: setting up and checking ...")
        entries.append(_entry(col, makers[col], want))
        if col == "schedlang tuned" and args.tuned_log and not args.tune and entries[-1].fn is not None:
            entries[-1].note += "; " + tuned_log_note(entries[-1].fn.compiled, args.tuned_log)
        harness_log(f"    {entries[-1].setup_s:.2f} s; {entries[-1].skipped or entries[-1].note}")
    live = [e for e in entries if not e.skipped]
    harness_log(f"  timing {len(live)} contenders ...")
    mon = harness.ForeignLoad().start()
    with torch.no_grad():
        for e, (_, med) in zip(live, harness.measure([e.fn for e in live], timing)):
            e.median_s = med
    foreign = mon.stop()
    harness_log("  median ms: " + ", ".join(f"{e.name} {e.median_s * 1e3:.2f}" for e in live))
    ours = next((e for e in entries if e.name == "schedlang" and e.fn is not None), None)
    if not args.no_first_call and (not args.quick or name == QUICK[0]):
        with tempfile.TemporaryDirectory(prefix="slcache-cold-") as cold:
            harness_log("  schedlang first call in fresh processes (cold, then warm disk cache) ...")
            first_rows.append((name, first_call(name, size, args.threads, cold, args.first_call_timeout),
                               first_call(name, size, args.threads, cold, args.first_call_timeout)))
    del model
    torch._dynamo.reset()
    return [name, entries, foreign, getattr(ours.fn, "fallbacks", None) if ours else None, gflop]


def _title(name: str, args) -> str:
    return TITLES[name] if not args.quick else f"{name} (tiny)"


def _table(head: list, rows: list) -> list:
    """head and rows as lines of right-aligned columns (the first left-aligned)."""
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    return ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in [head] + rows]


def format_results(results, first_rows, args) -> str:
    lines = ["", "Latency, ms (median; lower is better). '-' = not timed, see the notes below."]
    head = ["model"] + list(COLUMNS) + ["fallback ops", "busy cores"]
    rows = []
    for name, entries, foreign, fallbacks, _ in results:
        cells = [_title(name, args)]
        cells += ["-" if e.skipped else f"{e.median_s * 1e3:.2f}" for e in entries]
        cells += ["?" if fallbacks is None else str(fallbacks), f"{foreign:.2f}"]
        rows.append(cells)
    lines += _table(head, rows)
    lines.append("")
    lines.append(f"Work: GFLOP per forward; floor = GFLOP / FMA peak ({args.peak:.1f} GFLOP/s at {args.threads} "
                 "threads); each contender's GFLOP/s as % of that peak:")
    head = ["model", "GFLOP", "floor ms"] + list(COLUMNS)
    rows = []
    for name, entries, _, _, gflop in results:
        cells = [_title(name, args), f"{gflop:.3g}", f"{gflop / args.peak * 1e3:.3g}"]
        cells += ["-" if e.skipped else f"{gflop / e.median_s / args.peak * 100:.0f} %" for e in entries]
        rows.append(cells)
    lines += _table(head, rows)
    lines.append("")
    lines.append("Setup + first call in this process (s), and notes:")
    for name, entries, _, _, _ in results:
        lines.append(f"  {name}:")
        for e in entries:
            setup = "" if e.setup_s != e.setup_s else f"{e.setup_s:.2f} s; "
            lines.append(f"    {e.name:16s} {setup}{e.skipped or e.note}")
    if first_rows:
        lines.append("")
        lines.append("schedlang first call in a fresh process (compile + first run; imports before the clock; "
                     "in parentheses: beyond torch.export):")
        lines.append(f"  {'model':14s} {'cold cache':>18s} {'warm disk cache':>18s}")
        for name, cold, warm in first_rows:
            lines.append(f"  {name:14s} {cold:>18s} {warm:>18s}")
    lines.append(f"\nbusy cores: how many cores other processes kept busy while the model was timed "
                 f"(of {harness.core_count()}).\nload avg: {harness.load_average()} at end")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny ResNet-18 and Llama, 3 rounds, no torch.compile, first call of one: checks that it runs")
    p.add_argument("--only", choices=MODELS, action="append", help="one model (repeatable)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (Inductor)")
    p.add_argument("--compile", action="store_true", help="with --quick: run torch.compile too")
    p.add_argument("--no-onnx", action="store_true", help="skip ONNX Runtime")
    p.add_argument("--no-first-call", action="store_true", help="skip schedlang's fresh-process first calls")
    p.add_argument("--first-call-timeout", type=float, default=900.0, help="seconds per fresh process")
    p.add_argument("--tuned-log", help="a tuning-record file: the 'schedlang tuned' column compiles with it "
                                       "(with --tune: the one log every model's tuning appends to)")
    p.add_argument("--tune", type=int, default=0, metavar="N",
                   help="tune each model first with N trials (the gradient task scheduler), a log per model in "
                        "--tune-dir; the 'schedlang tuned' column is built from it, its tuning time noted")
    p.add_argument("--tune-timeout", type=float, default=None, metavar="S", help="seconds of tuning per model, at most")
    p.add_argument("--tune-dir", default="tune-logs", metavar="DIR", help="where --tune writes its logs")
    p.add_argument("--repeat", type=int, default=0, help="timed calls per contender (default 10; 3 with --quick)")
    p.add_argument("--threads", type=int, default=0, help="threads for everyone (default: all cores)")
    p.add_argument("--first-call-child", nargs=2, metavar=("MODEL", "SIZE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.threads = args.threads or harness.core_count()
    if args.quick and not args.compile:
        args.no_compile = True
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    if args.first_call_child:
        print(first_call_child(*args.first_call_child, args.threads))
        return 0
    repeat = args.repeat or (3 if args.quick else 10)
    timing = harness.Timing(repeat=repeat, min_round_s=0.0, warmup_s=0.05 if args.quick else 1.0)
    import peak
    args.peak = peak.fma_peak(args.threads)["all"]
    print(header(args, timing), flush=True)
    results, first_rows = [], []
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as inductor_cache:
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", inductor_cache)      # Inductor starts cold
        for name in args.only or (QUICK if args.quick else MODELS):
            results.append(run_model(name, args, timing, first_rows))
    print(format_results(results, first_rows, args))
    wrong = [f"{name}: {e.name}" for name, entries, _, _, _ in results for e in entries
             if e.name.startswith("schedlang") and e.skipped.startswith(("WRONG", "failed"))]
    if wrong:
        print("schedlang failed or gave wrong results on " + ", ".join(wrong), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
