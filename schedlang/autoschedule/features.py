"""Features of a candidate for the cost model, from its Tile IR (no LLVM build).

Per store (each `Store` with the loops around it): arithmetic counts by kind, loop
structure (extents, vector lanes, unrolling, parallel extent against the cores), and per
buffer access the bytes and cache lines touched inside each loop level, the innermost
stride and a reuse-distance estimate; then, per store, estimated traffic through L1 and
L2 (the footprint of the outermost loop level that fits, times the iterations around it).
A candidate's vector pools the stores (sum and max of each feature) and adds its
allocations. Every value goes through log2(1 + x), so pooled counts stay comparable.

A target may add features after these (TargetFeatures, its backend's search_features()): for
cuda the launch figures and the SIMT profile's (features_gpu.py).
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..expr.bounds import const_bounds
from ..expr.functor import walk
from ..expr.nodes import NEG, Binary, Call, Cast, Compare, Expr, Load, Logical, Not, Select, Var
from ..expr.linear import linear_form
from ..loop.nodes import (PARALLEL, UNROLLED, VECTORIZED, Allocate, For, Func, IfThen, Let, Seq, StageNest, Stmt,
                          Store)
from ..driver import check_before_lowering
from ..target.registry import get_backend
from ..target.target import CACHE_LINE_BYTES
from ..tile import lower_to_tile_ir

LEVELS = 5                 # bytes touched inside the 1st..5th innermost loops (then the whole nest)
ACCESSES = 4               # the store's buffer and its three biggest loads
OUTER = 3                  # extents of the three outermost loops
CACHES = (32 * 1024, 1024 * 1024)     # L1 and L2 sizes of a typical core (estimates, not the host's)
UNROLL_PRAGMA = "auto_unroll_max_step"
SYMBOLIC_EXTENT = 1024     # what a loop over a size variable counts as

ARITH = ("f_add", "f_mul", "f_fma", "f_div", "f_cmp", "f_math", "i_ops", "casts", "loads", "guards")
LOOP = (["n_loops", "iterations", "innermost_extent", "innermost_vectorized", "vector_lanes",
         "unrolled", "unroll_pragma", "parallel_extent", "parallel_fraction", "parallel_waste",
         "iterations_per_thread"] + [f"outer_extent_{i}" for i in range(OUTER)])
ACCESS = (["write", "local"] + [f"bytes_l{i}" for i in range(LEVELS)] + ["bytes_all"]
          + [f"lines_l{i}" for i in range(LEVELS)] + ["lines_all", "stride", "reuse_iters", "reuse_bytes",
                                                      "reuse_count"])
TRAFFIC = ("footprint_l0", "footprint_all", "traffic_l1", "traffic_l2", "lines_l1", "lines_l2")
STORE_FEATURES = list(ARITH) + list(LOOP) + [f"a{k}_{n}" for k in range(ACCESSES) for n in ACCESS] + list(TRAFFIC)
PROGRAM_FEATURES = ("n_stores", "alloc_count", "alloc_bytes", "alloc_max_bytes")
FEATURE_NAMES = ([f"sum_{n}" for n in STORE_FEATURES] + [f"max_{n}" for n in STORE_FEATURES]
                 + list(PROGRAM_FEATURES))
N_FEATURES = len(FEATURE_NAMES)


def _cores() -> int:
    return os.cpu_count() or 1


# ---- arithmetic ------------------------------------------------------------------------

def _arith_counts(value: Expr, indices: Sequence[Expr]) -> Dict[str, int]:
    """Operations of one execution of a store, by kind; distinct nodes once (the IR is a DAG
    and LLVM keeps a shared subexpression once). A float add of a float mul counts as an fma."""
    counts = dict.fromkeys(ARITH, 0)
    fused = set()
    for node in walk(value):
        if isinstance(node, Binary) and node.dtype.is_float:
            if node.op in ("add", "sub"):
                mul = next((x for x in (node.a, node.b) if isinstance(x, Binary) and x.op == "mul"
                            and id(x) not in fused), None)
                if mul is not None:
                    fused.add(id(mul))
                    counts["f_fma"] += 1
                else:
                    counts["f_add"] += 1
            elif node.op == "mul":
                counts["f_mul"] += 1
            elif node.op in ("div", "floordiv", "floormod"):
                counts["f_div"] += 1
            else:
                counts["f_cmp"] += 1
        elif isinstance(node, Binary):
            counts["i_ops"] += 1
        elif isinstance(node, Call) and node.name == NEG:
            counts["f_add"] += 1      # a negation costs what the 0.0 - x it replaced did
        elif isinstance(node, Call):
            counts["f_math" if node.dtype.is_float else "i_ops"] += 1
        elif isinstance(node, (Compare, Select, Logical, Not)):
            counts["f_cmp" if getattr(node, "a", node).dtype.is_float else "i_ops"] += 1
        elif isinstance(node, Cast):
            counts["casts"] += 1
        elif isinstance(node, Load):
            counts["loads"] += 1
    counts["f_mul"] -= len(fused)
    for idx in indices:
        counts["i_ops"] += sum(isinstance(n, Binary) for n in walk(idx))
    return counts


# ---- memory access -----------------------------------------------------------------------

class _Access:
    """One buffer access of a store: its per-dimension linear forms over the enclosing loops."""

    def __init__(self, buffer, indices, write: bool, loops: List[For]):
        self.buffer, self.write = buffer, write
        self.dims = [linear_form(i) for i in indices]
        pos = {id(f.var): p for p, f in enumerate(loops)}
        self.loops = loops
        # per dimension: (coeff, atom, positions of the loops the atom depends on)
        self.terms = [[(c, a, sorted({pos[id(v)] for v in walk(a) if isinstance(v, Var) and id(v) in pos}))
                       for a, c in terms] for terms, _ in self.dims]

    def shape(self) -> List[int]:
        return [int(n) if isinstance(n, int) else 1 << 20 for n in self.buffer.shape]

    def spans(self, level: int) -> List[int]:
        """Per dimension, how many distinct index values the loops at positions >= level cover."""
        ranges = {f.var: (0, f.extent - 1 if p >= level else 0) for p, f in enumerate(self.loops)}
        out = []
        for d, terms in enumerate(self.terms):
            span = 0
            for coeff, atom, deps in terms:
                if not deps or max(deps) < level:
                    continue
                if isinstance(atom, Var):
                    span += abs(coeff) * (self.loops[deps[0]].extent - 1)
                else:
                    lo, hi = const_bounds(atom, ranges)
                    span += abs(coeff) * ((hi - lo) if lo is not None and hi is not None else 1 << 20)
            out.append(span + 1)
        return [min(s, n) for s, n in zip(out, self.shape())]

    def touched(self, level: int) -> Tuple[float, float]:
        """(bytes, cache lines) touched by the loops at positions >= level."""
        spans = self.spans(level)
        size = self.buffer.dtype.bytes
        if not spans:
            return float(size), 1.0
        inner = math.ceil(spans[-1] * size / CACHE_LINE_BYTES)
        return float(math.prod(spans) * size), float(math.prod(spans[:-1]) * inner)

    def stride(self) -> float:
        """Elements between the accesses of two successive innermost iterations (0: the same one)."""
        if not self.loops:
            return 0.0
        inner = self.loops[-1].var
        strides = self.buffer.dense_strides() if not self.buffer.is_symbolic else [1] * len(self.dims)
        total = 0
        for (terms, _), st in zip(self.dims, strides):
            for atom, coeff in terms:
                if atom is inner:
                    total += coeff * (st if isinstance(st, int) else 1)
                elif any(v is inner for v in walk(atom)):
                    total += st if isinstance(st, int) else 1
        return float(abs(total))


def _reuse(acc: _Access, footprints: List[float]) -> Tuple[float, float, float]:
    """(iterations, bytes, count) of the innermost loop the access does not depend on: the
    same element comes back after the iterations inside it, with that many bytes touched in
    between, as often as the loop runs. No such loop: no reuse (distance of the whole nest)."""
    used = {p for terms in acc.terms for _, _, deps in terms for p in deps}
    loops = acc.loops
    for p in range(len(loops) - 1, -1, -1):
        if p not in used and loops[p].extent > 1:
            inside = math.prod(f.extent for f in loops[p + 1:])
            return float(inside), footprints[p + 1] if p + 1 < len(footprints) else 0.0, float(loops[p].extent)
    return float(math.prod(f.extent for f in loops)), footprints[0] if footprints else 0.0, 0.0


# ---- one store ---------------------------------------------------------------------------

def _loads(value: Expr, indices, predicate) -> List[Load]:
    seen: Dict[int, Load] = {}
    for root in [value, *indices] + ([predicate] if predicate is not None else []):
        for n in walk(root):
            if isinstance(n, Load) and id(n) not in seen:
                seen[id(n)] = n
    return list(seen.values())


def store_features(store: Store, loops: List[For], guards: int, cores: int) -> List[float]:
    """The raw (not log-scaled) feature values of one store inside `loops` (outermost first)."""
    iters = math.prod(f.extent for f in loops)
    counts = _arith_counts(store.value, store.indices)
    counts["guards"] = guards
    row: List[float] = [float(counts[k]) * iters for k in ARITH]

    vec = math.prod(f.extent for f in loops if f.kind == VECTORIZED)
    unrolled = math.prod(f.extent for f in loops if f.kind == UNROLLED)
    pragma = max((int(v) for f in loops for k, v in f.pragmas if k == UNROLL_PRAGMA), default=0)
    par = math.prod(f.extent for f in loops if f.kind == PARALLEL)
    has_par = any(f.kind == PARALLEL for f in loops)
    used = min(par, cores) if has_par else 1
    waste = (math.ceil(par / cores) * cores / par) if has_par else float(cores)
    inner = loops[-1] if loops else None
    outer = [float(f.extent) for f in loops[:OUTER]] + [1.0] * (OUTER - min(OUTER, len(loops)))
    row += [len(loops), iters, inner.extent if inner else 1, float(bool(inner) and inner.kind == VECTORIZED),
            vec, unrolled, pragma, par if has_par else 0, used / cores, waste, iters / used] + outer

    accesses = [_Access(store.buffer, store.indices, True, loops)]
    accesses += [_Access(ld.buffer, ld.indices, False, loops) for ld in _loads(store.value, store.indices,
                                                                               store.predicate)]
    depth = len(loops)
    # touched[a][p]: (bytes, lines) of access a inside the loops at positions >= p (p = depth: one point)
    touched = [[acc.touched(p) for p in range(depth + 1)] for acc in accesses]
    footprints = [sum(t[p][0] for t in touched) for p in range(depth + 1)]
    line_prints = [sum(t[p][1] for t in touched) for p in range(depth + 1)]
    order = sorted(range(1, len(accesses)), key=lambda a: (-touched[a][0][0], accesses[a].buffer.name))
    for slot, a in enumerate(([0] + order)[:ACCESSES]):
        acc, t = accesses[a], touched[a]
        levels = [t[max(0, depth - 1 - i)] for i in range(LEVELS)]     # innermost loop first
        row += [float(acc.write), float(acc.buffer.scope != "global")]
        row += [b for b, _ in levels] + [t[0][0]] + [n for _, n in levels] + [t[0][1]]
        row += [acc.stride(), *_reuse(acc, footprints)]
    row += [0.0] * (len(ACCESS) * (ACCESSES - min(ACCESSES, len(accesses))))

    traffic = []
    for cache in CACHES:
        # the outermost level whose footprint fits: its data is loaded once per iteration around it
        p = next((p for p in range(depth + 1) if footprints[p] <= cache), depth)
        around = math.prod(f.extent for f in loops[:p])
        traffic.append((footprints[p] * around, line_prints[p] * around))
    row += [footprints[depth - 1] if depth else footprints[0], footprints[0],
            traffic[0][0], traffic[1][0], traffic[0][1], traffic[1][1]]
    return row


# ---- the candidate -----------------------------------------------------------------------

def _walk(s: Stmt, loops: List[For], guards: int, cores: int, rows: List[List[float]], allocs: List[int]) -> None:
    if isinstance(s, For):
        loop = s if isinstance(s.extent, int) else dataclasses.replace(s, extent=SYMBOLIC_EXTENT)
        _walk(s.body, loops + [loop], guards, cores, rows, allocs)
    elif isinstance(s, Store):
        rows.append(store_features(s, loops, guards, cores))
    elif isinstance(s, IfThen):
        _walk(s.then_body, loops, guards + 1, cores, rows, allocs)
        if s.else_body is not None:
            _walk(s.else_body, loops, guards + 1, cores, rows, allocs)
    elif isinstance(s, Seq):
        for x in s.stmts:
            _walk(x, loops, guards, cores, rows, allocs)
    elif isinstance(s, Allocate):
        allocs.append(alloc_bytes(s.buffer))
        _walk(s.body, loops, guards, cores, rows, allocs)
    elif isinstance(s, (Let, StageNest)):
        _walk(s.body, loops, guards, cores, rows, allocs)


def stmt_rows(stmt: Stmt, cores: Optional[int] = None) -> Tuple[List[List[float]], List[int]]:
    """(the raw feature row of each store of stmt, the bytes of each of its allocations), in
    program order: what tile_features pools (fixed_nests.py pools them per loop nest)."""
    rows: List[List[float]] = []
    allocs: List[int] = []
    _walk(stmt, [], 0, cores or _cores(), rows, allocs)
    return rows, allocs


def alloc_bytes(buffer) -> int:
    """What an allocation of buffer counts as in the features: its bytes (0 when symbolic)."""
    size = buffer.size
    return int(size) * buffer.dtype.bytes if isinstance(size, int) else 0


def tile_features(func: Func, cores: Optional[int] = None) -> np.ndarray:
    """The candidate's feature vector (FEATURE_NAMES, log2(1 + x) of each value)."""
    return pooled_features(*stmt_rows(func.body, cores))


def pooled_features(rows: List[List[float]], allocs: List[int]) -> np.ndarray:
    """The candidate's feature vector from its stores' raw rows and its allocations' bytes
    (stmt_rows): the sum and the max of each store feature, then the program's counts."""
    per_store = np.asarray(rows, dtype=np.float64).reshape(-1, len(STORE_FEATURES))
    pooled = [per_store.sum(axis=0), per_store.max(axis=0, initial=0.0)]
    program = np.array([len(rows), len(allocs), sum(allocs), max(allocs, default=0)], dtype=np.float64)
    return np.log2(1.0 + np.maximum(np.concatenate(pooled + [program]), 0.0))


# ---- the target's part -------------------------------------------------------------------

class TargetFeatures:
    """The features a target adds after tile_features (its backend's search_features()):
    none for a CPU; features_gpu.GPUFeatures for cuda."""

    names: Tuple[str, ...] = ()

    def vector(self, func: Func, profile: Optional[Dict[str, float]]) -> np.ndarray:
        """The added features of a Tile IR function (log2(1 + x) of each value); profile: the
        pooled figures of a measurement that profiled the candidate (None before one)."""
        return np.zeros(0)

    def with_profile(self, vec: np.ndarray, profile: Dict[str, float]) -> np.ndarray:
        """vec (a whole candidate vector) with what profile tells filled in."""
        return vec


CPU_FEATURES = TargetFeatures()


def target_features(target) -> TargetFeatures:
    """The target's part of the vector (target None: a CPU)."""
    return CPU_FEATURES if target is None else get_backend(target.kind).search_features()


def feature_names(target=None) -> List[str]:
    """The names of a candidate's features for target (default: a CPU)."""
    return FEATURE_NAMES + list(target_features(target).names)


def candidate_features(func: Func, target=None, profile: Optional[Dict[str, float]] = None) -> np.ndarray:
    """The cost model's vector of a candidate for target: tile_features, and the target's part
    (for cuda the GPU launch figures and the SIMT profile's, NaN without a profile)."""
    base = tile_features(func)
    extra = target_features(target)
    if not extra.names:
        return base
    return np.concatenate([base, extra.vector(func, profile)])


def with_profile(vec: np.ndarray, target, profile: Optional[Dict[str, float]]) -> np.ndarray:
    """vec (a candidate's features) with its profile slots filled from profile (a target
    without any keeps vec)."""
    if target is None or not profile:
        return vec
    return target_features(target).with_profile(vec, profile)


def features(task, schedule) -> np.ndarray:
    """Feature vector of a schedule of the task (lowers it to Tile IR; raises ScheduleError or
    LoweringError as lower() does); with the target's part (feature_names)."""
    return candidate_features(tile_ir(schedule, task.args), task.target)


def tile_ir(schedule, args) -> Func:
    """Tile IR of the schedule after the checks lower() makes first (parallel nesting, unroll
    products), without the Loop IR and text that lower() also makes."""
    check_before_lowering(schedule)
    return lower_to_tile_ir(schedule, args)


def feature_dict(vec: np.ndarray, target=None) -> Dict[str, float]:
    """The vector by feature name (for reading and tests); target: the candidate's (None: a CPU)."""
    names = feature_names(target)
    if len(vec) != len(names):
        raise ValueError(f"feature_dict: a vector of {len(vec)} features is not one of target "
                         f"{str(target) if target is not None else 'llvm'} ({len(names)}): pass the candidate's target")
    return dict(zip(names, (float(x) for x in vec)))
