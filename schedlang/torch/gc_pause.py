"""Compiling with Python's cyclic garbage collector paused.

A compile allocates hundreds of thousands of short-lived objects (torch.export's graphs, our
IR nodes); each allocation burst lets the collector run, and a full (generation 2) pass walks
every object torch has made since it was imported. Measured on the SwiGLU MLP's first call
that was about a fifth of the time. The IR is freed by reference counting, so pausing the
collector for the compile changes nothing but when cyclic garbage is found: the next
collection after the compile, as usual.
"""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """The body runs with automatic garbage collection off (nested uses are fine)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
