"""The cuda target's part of a candidate's features (the cuda backend's search_features()).

After features.tile_features come the launch figures of the Tile IR's bound loops
(GPU_FEATURES: blocks, threads a block, virtual threads, shared and local bytes, and the
warp-wide tensor-core instructions: mma.sync m16n8k16, a wmma mma_sync counting two) and the SIMT
interpreter's profile figures (gpu_estimate.PROFILE_FEATURES: global requests and sectors,
bank-conflict degree, barriers, registers, occupancy) when the candidate has been measured
without a GPU; before that they are NaN, which LightGBM reads as missing.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..loop.nodes import BOUND, Allocate, Evaluate, For, Func, IfThen, Let, Seq, StageNest, Stmt, Store
from .features import TargetFeatures
from .gpu_estimate import PROFILE_FEATURES

GPU_FEATURES = ("gpu_nests", "blocks", "max_threads_per_block", "min_threads_per_block", "vthreads",
                "shared_bytes", "local_bytes", "mma")
MMA_CALLS = {"mma_m16n8k16": 1, "wmma_mma": 2}     # a library function's name part -> its mma.sync count


def _launches(s: Stmt, tags: Dict[str, int], out: List[Dict[str, int]], allocs: Dict[str, int]) -> None:
    """The thread tags bound around each store (out) and their extents; the bytes of the
    shared and local allocations (allocs)."""
    if isinstance(s, For):
        if s.kind == BOUND and isinstance(s.extent, int):
            tags = dict(tags)
            key = s.thread_tag if s.thread_tag != "vthread" else f"vthread.{len(tags)}"
            tags[key] = max(tags.get(key, 1), s.extent)
        _launches(s.body, tags, out, allocs)
    elif isinstance(s, Seq):
        for x in s.stmts:
            _launches(x, tags, out, allocs)
    elif isinstance(s, IfThen):
        _launches(s.then_body, tags, out, allocs)
        if s.else_body is not None:
            _launches(s.else_body, tags, out, allocs)
    elif isinstance(s, Allocate):
        size = s.buffer.size
        if isinstance(size, int) and s.buffer.scope in ("shared", "local"):
            allocs[s.buffer.scope] += size * s.buffer.dtype.bytes
        _launches(s.body, tags, out, allocs)
    elif isinstance(s, (Let, StageNest)):
        _launches(s.body, tags, out, allocs)
    elif isinstance(s, (Store, Evaluate)) and tags:     # (a tensorized store is a call)
        out.append(tags)


def _mma(s: Stmt) -> float:
    """Warp-wide mma.sync executed by s: each tensor-core call (MMA_CALLS) times the trip counts
    of the loops around it, bound loops included but for threadIdx.x (a warp-scope stage has no
    loop over its lanes: the lowering adds them; a lane loop around a call is the same warp's)."""
    if isinstance(s, For):
        trips = s.extent if isinstance(s.extent, int) and s.thread_tag != "threadIdx.x" else 1
        return trips * _mma(s.body)
    if isinstance(s, Seq):
        return sum(_mma(x) for x in s.stmts)
    if isinstance(s, IfThen):
        return _mma(s.then_body) + (_mma(s.else_body) if s.else_body is not None else 0.0)
    if isinstance(s, (Allocate, Let, StageNest)):
        return _mma(s.body)
    if isinstance(s, Evaluate):
        name = getattr(s.value, "name", "")
        return float(sum(n for part, n in MMA_CALLS.items() if part in name))
    return 0.0


def gpu_features(func: Func) -> List[float]:
    """GPU_FEATURES of a Tile IR function (raw values): the bound loops around each store
    grouped by their block loops (one kernel per group), pooled."""
    stores: List[Dict[str, int]] = []
    allocs = {"shared": 0, "local": 0}
    _launches(func.body, {}, stores, allocs)
    kernels: Dict[Tuple, Dict[str, int]] = {}
    for tags in stores:
        key = tuple(sorted((k, v) for k, v in tags.items() if k.startswith("blockIdx")))
        merged = kernels.setdefault(key, {})
        for k, v in tags.items():
            merged[k] = max(merged.get(k, 1), v)
    threads = [math.prod(v for k, v in t.items() if k.startswith("threadIdx")) for t in kernels.values()] or [1]
    blocks = sum(math.prod(v for k, v in t.items() if k.startswith("blockIdx")) for t in kernels.values())
    vthreads = max((math.prod(v for k, v in t.items() if k.startswith("vthread")) for t in kernels.values()),
                   default=1)
    return [float(len(kernels)), float(blocks), float(max(threads)), float(min(threads)), float(vthreads),
            float(allocs["shared"]), float(allocs["local"]), _mma(func.body)]


def _log_profile(profile: Optional[Dict[str, float]]) -> List[float]:
    return [np.log2(1.0 + max(0.0, float(profile[n]))) if profile and n in profile else np.nan
            for n in PROFILE_FEATURES]


class GPUFeatures(TargetFeatures):
    """GPU_FEATURES, then the profile's (named profile_<figure>)."""

    names: Tuple[str, ...] = GPU_FEATURES + tuple(f"profile_{n}" for n in PROFILE_FEATURES)

    def vector(self, func: Func, profile: Optional[Dict[str, float]]) -> np.ndarray:
        gpu = np.log2(1.0 + np.asarray(gpu_features(func), dtype=np.float64))
        return np.concatenate([gpu, np.array(_log_profile(profile), dtype=np.float64)])

    def with_profile(self, vec: np.ndarray, profile: Dict[str, float]) -> np.ndarray:
        out = np.array(vec, dtype=np.float64)
        out[-len(PROFILE_FEATURES):] = _log_profile(profile)
        return out


GPU_TARGET_FEATURES = GPUFeatures()
