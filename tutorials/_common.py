"""Small helpers the tutorials share: section headers and a wall-clock timer."""
import time


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
