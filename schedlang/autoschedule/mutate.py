"""Mutation and crossover of a candidate's decisions (sample.Trace).

A child is a decision dict; replaying it through sample() makes the schedule with the
public primitives, so it passes the same checks as any schedule (an illegal child is a
ScheduleError there and is pruned). Decisions the replay finds unfit are drawn again.

- tile sizes: a prime factor moves from one tiling level of a loop to another (the
  product, hence divisibility, is kept), or one level takes a size that need not divide
  the loop (a tiling with tails);
- annotations and compute locations (parallel fuse depth, vectorize, unroll step, where a
  cache or producer stage is computed): one decision is dropped and drawn afresh;
- crossover: for two candidates of one sketch, each stage's decisions come from one parent.
"""
from __future__ import annotations

import random
from typing import Any, Dict, List

from .sample import decision_stage

TILE_P = 0.6            # how often a mutation changes tile sizes (when there are any)
NON_DIVISIBLE_P = 0.2   # how often a tile mutation draws a size that need not divide


def is_tile_key(key: str) -> bool:
    return "|tile|" in key or key.endswith("|rfactor")


def prime_factors(n: int) -> List[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def mutate_tile(sizes: List[int], rng: random.Random) -> List[int]:
    """sizes (outermost level first) with a factor moved between two levels, or one inner
    level resized freely."""
    sizes = list(sizes)
    movable = [i for i, x in enumerate(sizes) if x > 1]
    if len(sizes) < 2:
        return sizes
    if not movable or rng.random() < NON_DIVISIBLE_P:
        j = rng.randrange(1, len(sizes))
        sizes[j] = rng.randint(1, max(2, 2 * sizes[j]))
        return sizes
    i = rng.choice(movable)
    p = rng.choice(prime_factors(sizes[i]))
    j = rng.choice([x for x in range(len(sizes)) if x != i])
    sizes[i] //= p
    sizes[j] *= p
    return sizes


def mutate(decisions: Dict[str, Any], rng: random.Random) -> Dict[str, Any]:
    """A child of one parent: one decision changed (tile sizes) or dropped (redrawn on replay)."""
    child = dict(decisions)
    keys = sorted(child)
    tiles = [k for k in keys if is_tile_key(k)]
    others = [k for k in keys if not is_tile_key(k)]
    if tiles and (not others or rng.random() < TILE_P):
        key = rng.choice(tiles)
        child[key] = mutate_tile(child[key], rng)
    elif others:
        del child[rng.choice(others)]
    return child


def crossover(a: Dict[str, Any], b: Dict[str, Any], rng: random.Random) -> Dict[str, Any]:
    """A child of two parents of one sketch: each stage's decisions from one of them."""
    stages = sorted({decision_stage(k) for k in list(a) + list(b)})
    pick = {st: rng.random() < 0.5 for st in stages}
    child = {k: v for k, v in a.items() if pick[decision_stage(k)]}
    child.update({k: v for k, v in b.items() if not pick[decision_stage(k)]})
    return child
