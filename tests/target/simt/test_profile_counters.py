"""The SIMT profile's per-access counting (target/simt/profile.Counters.access) against a direct
reference (np.unique per warp, as the counters were first written) on random accesses: both
scopes, element sizes 2/4/8, masked lanes, vector accesses, broadcasts and chunks whose warps do
not start at 0. No GPU and no build needed."""
import numpy as np
import pytest

from schedlang.dtypes import dtype as dtype_of
from schedlang.expr.nodes import Buffer
from schedlang.target.simt.profile import BANK_BYTES, BANKS, SECTOR, Counters, distinct_pairs

FIELDS = ("load_requests", "load_sectors", "store_requests", "store_sectors", "shared_requests",
          "shared_wavefronts", "shared_ideal_wavefronts")


def reference(b: Buffer, warp: np.ndarray, index: np.ndarray, store: bool) -> dict:
    """The figures of one access, warp by warp: requests, sectors (global) or bank passes,
    conflict-free passes and conflicts (shared)."""
    out = dict.fromkeys(FIELDS, 0)
    out["conflicts"] = 0
    byte = index * b.dtype.bytes
    for w in np.unique(warp):
        mine = byte[warp == w]
        if b.scope == "global":
            kind = "store" if store else "load"
            out[f"{kind}_requests"] += 1
            out[f"{kind}_sectors"] += np.unique(mine // SECTOR).size
            continue
        words = np.unique(mine // BANK_BYTES)
        passes = int(np.bincount(words % BANKS, minlength=BANKS).max())
        ideal = -(-words.size // BANKS)
        out["shared_requests"] += 1
        out["shared_wavefronts"] += passes
        out["shared_ideal_wavefronts"] += ideal
        out["conflicts"] += passes - ideal
    return out


def random_access(rng, lanes: int):
    """(warp, index) of a random access of a chunk of `lanes` threads, flattened in lane order
    as Memory passes them: some lanes masked off, one to four elements a lane, the indices
    consecutive, strided, random or one shared word."""
    first_warp = int(rng.integers(0, 5))
    lane = np.arange(lanes)
    lane = lane[rng.random(lanes) < rng.choice([1.0, 0.7, 0.1])]
    if lane.size == 0:
        lane = np.array([int(rng.integers(0, lanes))])
    vector = int(rng.choice([1, 2, 4]))
    kind = rng.choice(["consecutive", "strided", "random", "broadcast"])
    base = lane[:, None] * vector + np.arange(vector)
    index = {"consecutive": base, "strided": base * int(rng.integers(2, 40)),
             "random": rng.integers(0, 4096, base.shape), "broadcast": np.full(base.shape, 7)}[kind]
    warp = np.repeat(first_warp + lane // 32, vector)
    return warp.astype(np.int64), index.reshape(-1).astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_counters_match_a_per_warp_reference(seed):
    rng = np.random.default_rng(seed)
    for case in range(60):
        scope = "global" if case % 2 else "shared"
        dtype = ["float16", "float32", "float64"][case % 3]
        b = Buffer(f"buf_{scope}", (1 << 20,), dtype_of(dtype), scope)
        warp, index = random_access(rng, int(rng.choice([32, 96, 256, 1000])))
        store = bool(case % 4 < 2)
        c = Counters()
        c.access(b, warp, index, store)
        want = reference(b, warp, index, store)
        got = {f: getattr(c, f) for f in FIELDS}
        got["conflicts"] = c.conflicts.get(b.name, [0, 0])[int(store)]
        assert got == want, (seed, case, scope, dtype)


def test_a_bank_conflict_and_a_broadcast():
    """32 lanes of one warp reading floats 32 apart: one bank, 32 words (31 extra passes); the
    same word in every lane: one pass (a broadcast)."""
    b = Buffer("tile", (2048,), dtype_of("float32"), "shared")
    warp = np.zeros(32, np.int64)
    c = Counters()
    c.access(b, warp, np.arange(32, dtype=np.int64) * 32, store=False)
    c.access(b, warp, np.full(32, 5, np.int64), store=True)
    assert (c.shared_requests, c.shared_wavefronts, c.shared_ideal_wavefronts) == (2, 33, 2)
    assert c.conflicts == {"tile": [31, 0]}


def test_distinct_pairs_counts_warps_from_the_lowest():
    w, unit = distinct_pairs(np.array([7, 7, 7, 9, 9], np.int64), np.array([3, 1, 3, 0, 0], np.int64))
    assert w.tolist() == [0, 0, 2] and unit.tolist() == [1, 3, 0]
