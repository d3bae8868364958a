"""Measure functions for the isolation tests (importable by spawned workers)."""
import os
import time
import zlib

from schedlang.autoschedule.executor import phase
from schedlang.autoschedule.measure import run_candidate


def fake(program_json, steps_json, target, number, repeat):
    """Behaves as steps_json says: ok, crash (the process exits), hang (in the timed run), raise."""
    if steps_json == "crash":
        os._exit(3)
    if steps_json == "hang":
        phase("run")
        time.sleep(60)
    if steps_json == "raise":
        raise ValueError("a failing candidate")
    phase("run")
    return {"times": [1e-3, 2e-3, 3e-3], "build_s": 0.0, "load": list(os.getloadavg())}


def flaky(program_json, steps_json, target, number, repeat):
    """The real measurement, except that some candidates (a hash of their steps: 1 in 4 each) crash
    the worker or hang in their timed run."""
    kind = zlib.crc32(steps_json.encode()) % 4
    if kind == 0:
        os._exit(5)
    if kind == 1:
        phase("run")
        time.sleep(60)
    return run_candidate(program_json, steps_json, target, number, repeat)
