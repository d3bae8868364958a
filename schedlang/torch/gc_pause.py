"""Compiling with Python's cyclic garbage collector paused.

A compile allocates hundreds of thousands of short-lived objects (torch.export's graphs, our
IR nodes); each allocation burst lets the collector run, and a full (generation 2) pass walks
every object torch has made since it was imported. Measured on the SwiGLU MLP's first call
that was about a fifth of the time. The IR is freed by reference counting, so pausing the
collector for the compile changes nothing but when cyclic garbage is found: the next
collection after the compile, as usual.

The first compile of a process is different: torch.export imports much of torch on its
first use, and what the pause leaves is mostly those modules' functions, tuples, cells and
dicts (BERT: ~330,000 objects, of which ~54,000 garbage), which live as long as the
process. The young collection after the pause walked them all, and a middle-generation one
walked the survivors again before they reached the oldest generation (0.12-0.2 s of CPU of
a warm first call, 2-core Zen 3). After that first pause they are moved to the oldest
generation at once (gc.freeze then gc.unfreeze: no pass), where the next full collection
finds them, and the garbage among them, as it would have. Not done where the program froze
objects itself (gc.get_freeze_count(): unfreezing would release its objects too).
"""
from __future__ import annotations

import contextlib
import gc

_promoted = False


@contextlib.contextmanager
def gc_paused():
    """The body runs with automatic garbage collection off (nested uses are fine)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            _promote_once()
            gc.enable()


def _promote_once() -> None:
    """The first time in a process: every tracked object into the oldest generation, unwalked."""
    global _promoted
    if _promoted or gc.get_freeze_count():
        return
    _promoted = True
    gc.freeze()
    gc.unfreeze()
