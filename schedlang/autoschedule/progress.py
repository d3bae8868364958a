"""What a search tells its user as it runs (auto_schedule's verbose=1), on stderr.

On a terminal: a tqdm bar over the trials with the best GFLOP/s. Elsewhere (a notebook's
captured stderr, a CI log, `| tee`), where a bar would be noise or nothing: one plain line
per round, "auto_schedule: 24/64 trials, best 51.2 GFLOP/s (10.2 us), 38 s". Either way
the final side-by-side comparison is announced, and a warning says when the machine's
load average during the timed runs exceeded its core count (the times are then noisy).
"""
from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Optional


def _best_text(best_gflops: Optional[float], best_s: Optional[float]) -> str:
    if best_s is None:
        return "no candidate has run yet"
    gf = f"{best_gflops:.3g} GFLOP/s " if best_gflops else ""
    return f"best {gf}({format_seconds(best_s)})"


def format_seconds(s: float) -> str:
    """1.23 ms, 45.6 us, 2.5 s: a time in a readable unit."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


class Progress:
    """Follows a search: update() per measured record, round() after each round."""

    def __init__(self, trials: int, verbose: int, check_load: bool = True, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.trials, self.done, self.start = trials, 0, time.monotonic()
        self.best_gflops = self.best_s = None
        self.load_warned = not check_load
        self.bar = _tqdm_bar(trials, self.stream) if verbose and _isatty(self.stream) else None
        self.plain = bool(verbose) and self.bar is None

    def update(self, rec) -> None:
        self.done += 1
        t = rec.get("median_s")
        if rec.get("error") is None and t and (self.best_s is None or t < self.best_s):
            self.best_s, self.best_gflops = t, rec.get("gflops")
            if self.bar is not None:
                self.bar.set_postfix_str(_best_text(self.best_gflops, self.best_s))
        if self.bar is not None:
            self.bar.update(1)
        self._check_load(rec.get("load"))

    def round(self) -> None:
        if self.plain:
            self.say(f"{self.done}/{self.trials} trials, {_best_text(self.best_gflops, self.best_s)}, "
                     f"{time.monotonic() - self.start:.0f} s")

    def say(self, text: str) -> None:
        """One line (above the bar on a terminal)."""
        if self.bar is not None:
            self.bar.write(f"auto_schedule: {text}", file=self.stream)
        elif self.plain:
            print(f"auto_schedule: {text}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
            self.plain = True       # what follows (the final comparison) in plain lines

    def _check_load(self, load) -> None:
        cores = os.cpu_count() or 1
        if self.load_warned or not load or load[0] <= cores:
            return
        self.load_warned = True
        warnings.warn(f"auto_schedule: the load average was {load[0]:.1f} on {cores} cores while candidates "
                      "were timed: other processes shared the cores, so the times are noisy (the final "
                      "side-by-side comparison of the best candidates corrects part of it)", stacklevel=5)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):       # no isatty, or a closed stream
        return False


def _tqdm_bar(trials: int, stream):
    try:
        from tqdm import tqdm
    except ImportError:       # pragma: no cover - depends on the environment
        return None
    return tqdm(total=trials, desc="auto_schedule", unit="trial", file=stream)
