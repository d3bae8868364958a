"""Mutation and crossover of a candidate's decisions (sample.Trace).

A child is a decision dict; replaying it through sample() makes the schedule with the
public primitives, so it passes the same checks as any schedule (an illegal child is a
ScheduleError there and is pruned). Decisions the replay finds unfit are drawn again.

- tile sizes: a prime factor moves from one tiling level of a loop to another (the
  product, hence divisibility, is kept), or one level takes a size that need not divide
  the loop (a tiling with tails);
- register block: a prime factor moves from the innermost tile of one loop of a stage to
  the innermost tile of another (8 x 1 vectors -> 4 x 2), each loop's next level taking the
  change back, so the block keeps its accumulators and the cache tile its size;
- annotations and compute locations (parallel fuse depth, vectorize, unroll step, where a
  cache or producer stage is computed): one decision is dropped and drawn afresh;
- crossover: for two candidates of one sketch, each stage's decisions come from one parent.
"""
from __future__ import annotations

import random
from typing import Any, Dict, List, Tuple

from .sample import decision_stage

TILE_P = 0.6            # how often a mutation changes tile sizes (when there are any)
NON_DIVISIBLE_P = 0.2   # how often a tile mutation draws a size that need not divide
BLOCK_P = 0.25          # how often a tile mutation reshapes a register block (search.py)


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


def block_pairs(decisions: Dict[str, Any]) -> List[Tuple[str, str]]:
    """(a, b) of the tile decisions of one stage with the same number of levels (two or more):
    the loops whose innermost tiles make one register block (a stage's reduction loop is tiled
    in fewer levels, or in its cache stage)."""
    tiles = [k for k in sorted(decisions) if "|tile|" in k and isinstance(decisions[k], list)
             and len(decisions[k]) >= 2]
    return [(a, b) for a in tiles for b in tiles if a != b and decision_stage(a) == decision_stage(b)
            and len(decisions[a]) == len(decisions[b])]


def mutate_block(a: List[int], b: List[int], rng: random.Random) -> Tuple[List[int], List[int]]:
    """Loop a's and b's sizes (outermost first) with a prime factor p of a's innermost tile
    moved to b's innermost; a's next level grows by p and b's next level divisible by p shrinks
    by it (else b's outermost, recomputed on replay, takes it). Why: a block's shape is a pair of
    sizes that must move together within the register budget; one-size mutations cannot turn
    GEMM's 8 x 1 blocks (AVX2, 8 rows x one ymm) into the hand schedule's 4 x 2 without passing
    through 4 x 1 or 8 x 2 (too few accumulators, or too many), and a search settled on 8 x 1."""
    a, b = list(a), list(b)
    if a[-1] < 2:
        return a, b
    p = rng.choice(prime_factors(a[-1]))
    a[-1] //= p
    a[-2] *= p
    b[-1] *= p
    for level in range(len(b) - 2, 0, -1):
        if b[level] % p == 0:
            b[level] //= p
            break
    return a, b


def mutate(decisions: Dict[str, Any], rng: random.Random, block_p: float = 0.0) -> Dict[str, Any]:
    """A child of one parent: one decision changed (tile sizes, or with probability block_p of a
    tile mutation two loops' register block tiles) or dropped (redrawn on replay)."""
    child = dict(decisions)
    keys = sorted(child)
    tiles = [k for k in keys if is_tile_key(k)]
    others = [k for k in keys if not is_tile_key(k)]
    if tiles and (not others or rng.random() < TILE_P):
        pairs = block_pairs(child)
        if block_p and pairs and rng.random() < block_p:
            a, b = rng.choice(pairs)
            child[a], child[b] = mutate_block(child[a], child[b], rng)
            return child
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
