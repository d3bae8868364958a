"""Opt-in checking of the IR after every pass (the test suite turns it on).

ENABLED starts from the environment variable SCHEDLANG_VERIFY=1 (tests/conftest.py sets it
for the whole suite); code may also set schedlang.verify.ENABLED. When on, run_passes runs
a verifier after each pass and the Loop IR and Tile IR builders verify their functions, so
a pass that breaks an invariant is named at once instead of crashing a later stage.
"""
from __future__ import annotations

import functools
import os
from typing import Callable, Optional, Sequence

from .loop.verify import verify_func

ENABLED = os.environ.get("SCHEDLANG_VERIFY", "") not in ("", "0")


def pass_name(p: Callable) -> str:
    """A pass's name, seeing through functools.partial."""
    while isinstance(p, functools.partial):
        p = p.func
    return getattr(p, "__name__", repr(p))


def run_passes(body, passes: Sequence, verify: Optional[Callable[[object, str], None]] = None,
               trace=None, show: Callable[[object], str] = str):
    """body = p(body) for each pass in order; when ENABLED, verify(body, name) after each.
    A pass is a callable or a (name, callable) pair, as backends list them. With a trace
    (schedlang.trace.Trace), show(body) is recorded after each pass under its name."""
    for entry in passes:
        name, p = entry if isinstance(entry, tuple) else (pass_name(entry), entry)
        body = p(body)
        if ENABLED and verify is not None:
            verify(body, name)
        if trace is not None:
            trace.record(name, lambda: show(body))
    return body


def check_func(func, level: str):
    """Verify a Loop IR or Tile IR function when ENABLED; returns it."""
    if ENABLED:
        verify_func(func, level, where=f"{level} IR of '{func.name}'")
    return func
