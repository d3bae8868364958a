"""The SIMT engine's per-access work compiled with numba (imported by jit.py only when the JIT
is on): the shared-memory race check's shadow updates and the profile's per-warp counts, one
pass over an access's elements instead of a dozen numpy calls. Each gives the results of the
numpy code it replaces (races.py, profile.py: the reference, tested against these); where
an access is a race, these report where and the numpy code raises its error."""
from __future__ import annotations

import numba
import numpy as np

NONE, MANY = -1, -2     # races.py's shadow values


@numba.njit(cache=True)
def shared_read(writer, reader, rstmt, addr, tid, sid):
    """A read of shared addresses by threads tid in statement sid: -1, with the readers
    recorded, or the first element another thread wrote since the last barrier (a race;
    nothing recorded)."""
    for e in range(addr.size):
        w = writer[addr[e]]
        if w != NONE and w != tid[e]:
            return e
    for e in range(addr.size):          # a second reader of an address makes it MANY
        a = addr[e]
        r = reader[a]
        reader[a] = tid[e] if r == NONE or r == tid[e] else MANY
        rstmt[a] = sid
    return -1


@numba.njit(cache=True)
def shared_write(writer, wstmt, reader, addr, tid, sid):
    """A write of shared addresses: (0, -1) done; (1, e): element e's address was written by
    another thread, (2, e): read by another thread (nothing written); (3, e): another element
    of this write wrote e's address (the writes done, as numpy's assignment leaves them)."""
    for e in range(addr.size):
        w = writer[addr[e]]
        if w != NONE and w != tid[e]:
            return 1, e
    for e in range(addr.size):
        r = reader[addr[e]]
        if r != NONE and r != tid[e]:
            return 2, e
    for e in range(addr.size):
        writer[addr[e]] = tid[e]
        wstmt[addr[e]] = sid
    for e in range(addr.size):
        if writer[addr[e]] != tid[e]:
            return 3, e
    return 0, -1


@numba.njit(cache=True)
def global_write(writer, wstmt, addr, thread, sid):
    """GlobalWrites.write's check: -1 done, else the first element whose address another
    thread wrote (before: nothing written; or in this write: the writes done)."""
    for e in range(addr.size):
        w = writer[addr[e]]
        if w != NONE and w != thread[e]:
            return e
    for e in range(addr.size):
        writer[addr[e]] = thread[e]
        wstmt[addr[e]] = sid
    for e in range(addr.size):
        if writer[addr[e]] != thread[e]:
            return e
    return -1


@numba.njit(cache=True)
def _sorted_keys(warp, unit, low):
    """(warp - lowest warp) << low | unit, sorted: each run of one warp sorted on its own when
    the warps come in order (an access's lanes do), else all at once."""
    n = warp.size
    base = warp.min()
    key = np.empty(n, np.int64)
    ordered = True
    for e in range(n):
        key[e] = ((warp[e] - base) << low) | unit[e]
        if e and warp[e] < warp[e - 1]:
            ordered = False
    if not ordered:
        key.sort()
        return key
    start = 0
    for e in range(1, n + 1):
        if e == n or warp[e] != warp[start]:
            for i in range(start + 1, e):         # insertion sort: a run is one warp's lanes
                k = key[i]
                j = i - 1
                while j >= start and key[j] > k:
                    key[j + 1] = key[j]
                    j -= 1
                key[j + 1] = k
            start = e
    return key


@numba.njit(cache=True)
def global_counts(warp, sector, low):
    """(warp requests, distinct (warp, sector) pairs) of one global access."""
    key = _sorted_keys(warp, sector, low)
    requests, sectors = 1, 1
    for e in range(1, key.size):
        if key[e] != key[e - 1]:
            sectors += 1
            if (key[e] >> low) != (key[e - 1] >> low):
                requests += 1
    return requests, sectors


@numba.njit(cache=True)
def shared_counts(warp, word, low, banks):
    """(warp requests, bank passes, ideal passes) of one shared access: per warp, the most
    distinct words in one bank, and its distinct words over the banks, rounded up."""
    key = _sorted_keys(warp, word, low)
    mask = (1 << low) - 1
    per_bank = np.zeros(banks, np.int64)
    requests = passes = ideal = 0
    start = 0
    n = key.size
    for e in range(n + 1):
        if e == n or (key[e] >> low) != (key[start] >> low):
            distinct, most = 0, 0
            for i in range(start, e):
                if i == start or key[i] != key[i - 1]:
                    b = (key[i] & mask) % banks
                    per_bank[b] += 1
                    distinct += 1
                    if per_bank[b] > most:
                        most = per_bank[b]
            per_bank[:] = 0
            requests += 1
            passes += most
            ideal += (distinct + banks - 1) // banks
            start = e
    return requests, passes, ideal
