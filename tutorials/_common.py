"""Small helpers the tutorials share: the command line (with quick mode), section headers,
a wall-clock timer, the way times are printed, and a fresh tuning log."""
import argparse
import contextlib
import os
import shutil
import tempfile
import time

QUICK_ENV = "SCHEDLANG_TUTORIAL_QUICK"


def parse_args(doc: str, parser: argparse.ArgumentParser = None) -> argparse.Namespace:
    """The tutorial's command line, with `--quick` added: small shapes and one or two timing
    repeats, so CI can run every tutorial in seconds and check its numbers. The environment
    variable SCHEDLANG_TUTORIAL_QUICK=1 turns quick mode on as well. `args.quick` says which."""
    if parser is None:
        parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"small shapes, few timing repeats (also: {QUICK_ENV}=1); what CI runs")
    args = parser.parse_args()
    args.quick = args.quick or os.environ.get(QUICK_ENV, "") not in ("", "0")
    if args.quick:
        print("(quick mode: small shapes and few timing repeats; the results are still checked, "
              "but the times printed are no measure of speed)")
    return args


def parse_tuning_args(doc: str, trials_help: str, out_help: str) -> argparse.Namespace:
    """parse_args with the tuning tutorials' --trials (an int, default None) and --out (a folder)."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--trials", type=int, default=None, help=trials_help)
    parser.add_argument("--out", default=None, help=out_help)
    return parse_args(doc, parser)


def header(title: str) -> None:
    print("\n" + "=" * 78 + "\n" + title + "\n" + "=" * 78)


def best_time(fn, repeat: int = 10) -> float:
    """Seconds of the fastest of `repeat` calls of fn(), after a warm-up call. On a
    machine that other programs share, the minimum is the most repeatable number;
    schedlang's mod.time(..., number=1, repeat=N) measures the same way."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def format_seconds(seconds: float) -> str:
    """A duration in the unit that reads best, to three significant digits:
    '850 ns', '12.3 us', '4.56 ms', '1.20 s'."""
    if not 0 < seconds < float("inf"):
        return f"{seconds} s"
    if seconds < 100:
        seconds = float(f"{seconds:.3g}")    # round first, so 999.96 ms is printed as 1.00 s
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            value = seconds / scale
            digits = 0 if value >= 100 else 1 if value >= 10 else 2
            return f"{value:.{digits}f} {unit}"


def timing_note(quick: bool) -> None:
    """Say, before a quick run's timings, that they are no measure of speed: the shapes are
    tiny and each time is one or two calls, so fixed overheads (a parallel loop's thread
    start-up, a Python call) dominate and any ratio between contenders means nothing."""
    if quick:
        print("(quick mode: tiny shapes and one or two calls, so these times are no measure of speed; "
              "run without --quick for that)")


@contextlib.contextmanager
def fresh_log(out: str, name: str, prefix: str = "schedlang_tune_", keep: bool = False):
    """Yields (folder, log path): the log `name` in the folder `out` (created if needed; a new
    temporary folder when out is None, removed at the end unless keep), deleted first so that
    each run of a tutorial starts a fresh log."""
    folder = out or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(folder, exist_ok=True)
    log = os.path.join(folder, name)
    if os.path.exists(log):
        os.remove(log)
    try:
        yield folder, log
    finally:
        if out is None and not keep:
            shutil.rmtree(folder, ignore_errors=True)
