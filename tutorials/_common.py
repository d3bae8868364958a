"""Small helpers the tutorials share: the command line (with quick mode), section headers
and a wall-clock timer."""
import argparse
import os
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
        print("(quick mode: small shapes and few timing repeats; the numbers are still checked)")
    return args


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
