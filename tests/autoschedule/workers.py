"""Measure functions for the isolation tests (importable by spawned workers), and an executor
that interrupts a search."""
import concurrent.futures as cf
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


def _stores(stmt, loops, out):
    """(loops, store) of every store in a Tile IR statement."""
    from schedlang.loop.nodes import For, Store
    if isinstance(stmt, For):
        _stores(stmt.body, loops + [stmt], out)
    elif isinstance(stmt, Store):
        out.append((loops, stmt))
    else:
        for name in ("body", "then_body", "else_body"):
            if getattr(stmt, name, None) is not None:
                _stores(getattr(stmt, name), loops, out)
        for x in getattr(stmt, "stmts", ()):
            _stores(x, loops, out)
    return out


def formula_cost(task, s) -> float:
    """A synthetic time (seconds) with a known optimum of 1 ms: the store with the most iterations
    wants 16 vector lanes, 8 parallel iterations and 4 iterations in the loop just outside the
    vectorized one; each factor of two away from one of these doubles the time."""
    import math
    from schedlang.autoschedule.features import tile_ir
    from schedlang.loop.nodes import PARALLEL, VECTORIZED
    loops, _ = max(_stores(tile_ir(s, task.args).body, [], []), key=lambda ls: math.prod(f.extent for f in ls[0]))
    vec = math.prod(f.extent for f in loops if f.kind == VECTORIZED)
    par = math.prod(f.extent for f in loops if f.kind == PARALLEL)
    outer = [f.extent for f in loops if f.kind != VECTORIZED]
    t = outer[-1] if outer and loops[-1].kind == VECTORIZED else 1
    return 1e-3 * 2.0 ** (abs(math.log2(vec) - 4) + abs(math.log2(par) - 3) + abs(math.log2(t) - 2))


def formula(program_json, steps_json, target, number, repeat):
    """A measure function that builds nothing: the time is formula_cost of the candidate."""
    from schedlang.autoschedule.task import SearchTask
    task = SearchTask.from_json(program_json, target)
    s = task.schedule()
    s.apply_json(steps_json)
    return {"times": [formula_cost(task, s)], "build_s": 0.0, "load": [0.0, 0.0, 0.0]}


class InterruptAfter(cf.ThreadPoolExecutor):
    """Runs the first n calls; then Ctrl-C: submit raises KeyboardInterrupt, or with in_future
    the next future raises it from result() (Ctrl-C while waiting)."""

    def __init__(self, n, in_future=False):
        super().__init__(1)
        self.left, self.in_future = n, in_future

    def submit(self, fn, *args, **kwargs):
        if self.left == 0:
            if not self.in_future:
                raise KeyboardInterrupt
            f = cf.Future()
            f.set_exception(KeyboardInterrupt())
            return f
        self.left -= 1
        return super().submit(fn, *args, **kwargs)


def register_tile_cost(task, s) -> float:
    """A synthetic time (seconds) that only the register tile and the parallel loop decide,
    modelled on a 2-core AVX2 CPU (16 ymm, 8 float32 lanes, 2 FMA and 2 load ports, FMA latency 4):
    the store with the most iterations runs its innermost unrolled/vectorized loops as a register
    block of accumulators (the product of the unrolled extents times the vectors of the vectorized
    one); per reduction step it issues one FMA per accumulator (two a cycle) and, for each operand
    read, one load per value of the block loops its index uses (two a cycle): a GEMM block of
    rows x vecs loads rows broadcasts of A and vecs vectors of B, a conv2d NCHWc block of columns x
    vecs loads columns broadcasts of the input and vecs vectors of weights; no accumulator takes a
    step in less than the FMA latency; a block that needs more than 16 registers (accumulators, the
    operand reused across the block, a broadcast) spills and runs at half speed. 1 ms at full speed
    on both cores (GEMM: the hand schedule's 4 x 2 vectors; conv2d: 2 vectors x 4 columns), longer
    as the block wastes cycles (the hand conv tile 1 x 14: 15 loads for 14 FMAs, 1.07 ms)."""
    import math
    from schedlang.autoschedule.features import tile_ir
    from schedlang.expr.functor import uses_var, walk
    from schedlang.expr.nodes import Load
    from schedlang.loop.nodes import PARALLEL, UNROLLED, VECTORIZED
    loops, store = max(_stores(tile_ir(s, task.args).body, [], []), key=lambda ls: math.prod(f.extent for f in ls[0]))
    block = []
    for f in reversed(loops):
        if f.kind not in (UNROLLED, VECTORIZED) and f.extent != 1:
            break
        block.append(f)
    lanes = math.prod(f.extent for f in block if f.kind == VECTORIZED)
    vecs = math.ceil(lanes / 8)
    acc = math.prod(f.extent for f in block if f.kind == UNROLLED) * vecs
    loads = []
    for load in {n for n in walk(store.value) if isinstance(n, Load) and n.buffer is not store.buffer}:
        used = [f for f in block if any(uses_var(i, f.var) for i in load.indices)]
        loads.append(math.prod(f.extent if f.kind == UNROLLED else vecs for f in used))
    cycles = max(acc / 2, 4.0, sum(loads) / 2)
    eff = (acc / 2) / cycles * min(lanes, 8) / 8
    if acc + sum(loads) - max(loads, default=0) + 1 > 16:
        eff /= 2
    par = math.prod(f.extent for f in loops if f.kind == PARALLEL)
    eff *= par / (math.ceil(par / 2) * 2)
    return 1e-3 / eff


def register_tile(program_json, steps_json, target, number, repeat):
    """A measure function that builds nothing: the time is register_tile_cost of the candidate."""
    from schedlang.autoschedule.task import SearchTask
    task = SearchTask.from_json(program_json, target)
    s = task.schedule()
    s.apply_json(steps_json)
    return {"times": [register_tile_cost(task, s)], "build_s": 0.0, "load": [0.0, 0.0, 0.0]}
