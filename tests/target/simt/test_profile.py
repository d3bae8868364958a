"""mod.emulate(..., engine="simt", profile=True): the figures move the way the GPU's would."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.simt.occupancy import occupancy
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for, cooperative_fetch

pytest.importorskip("cuda.bindings")


def profile_of(s, args):
    mod = sl.build(s, args, target="cuda")
    arrays, _ = arrays_for(s, args)
    report = mod.emulate(*arrays, engine="simt", profile=True)
    return arrays, report


def copy(n=4096, stride=1):
    """B[i] = A[i * stride], 128 threads a block: a warp reads 32 consecutive floats (4 sectors)
    or 32 floats 128 bytes apart (32 sectors), and writes 32 consecutive floats."""
    A = sl.placeholder((n * stride,), name="A")
    B = sl.compute((n,), lambda i: A[i * stride], name="B")
    s = sl.create_schedule(B.op)
    schedules.bind(s, B, *s[B].split(B.op.axis[0], factor=128))
    return s, [A, B]


def test_coalesced_and_strided_copies():
    arrays, report = profile_of(*copy(4096, 1))
    p = report["B_kernel"]
    assert np.array_equal(arrays[1], arrays[0])
    assert p.load_requests == p.store_requests == 4096 // 32
    assert p.sectors_per_load == 4.0 and p.sectors_per_store == 4.0
    _, report = profile_of(*copy(4096, 32))
    p = report["B_kernel"]
    assert p.sectors_per_load == 32.0 and p.sectors_per_store == 4.0
    assert p.shared_requests == 0 and p.barriers == 0 and p.blocks == 32 and p.threads_per_block == 128


def transpose(n=64, pad=False):
    """B = A.T through a 32x32 shared tile: fetched by rows (conflict-free), read by columns,
    which hits one bank 32 times unless storage_align pads each row by one float."""
    A = sl.placeholder((n, n), name="A")
    B = sl.compute((n, n), lambda i, j: A[j, i], name="B")
    s = sl.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bi, bj, ti, tj = s[B].tile(B.op.axis[0], B.op.axis[1], 32, 32)
    ti, tii = s[B].split(ti, nparts=8)
    s[B].reorder(bi, bj, ti, tj, tii)
    s[B].bind(bi, sl.thread_axis("blockIdx.y"))
    s[B].bind(bj, sl.thread_axis("blockIdx.x"))
    s[B].bind(ti, sl.thread_axis("threadIdx.y"))
    s[B].bind(tj, sl.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], bj)
    cooperative_fetch(s, AS, 8, 32)
    if pad:
        s[AS].storage_align(AS.op.axis[0], 32, 1)
    return s, [A, B]


def test_a_padded_shared_tile_has_no_bank_conflicts():
    arrays, report = profile_of(*transpose(64, pad=False))
    plain = report["B_kernel"]
    assert np.array_equal(arrays[1], arrays[0].T)
    # 4 blocks x 8 warps x 4 column reads, each 32-way: 31 extra passes; the row writes are conflict-free
    assert plain.shared_requests == 2 * 4 * 8 * 4 and plain.bank_conflicts == 4 * 8 * 4 * 31
    assert plain.conflicts_by_buffer == {"A.shared": (4 * 8 * 4 * 31, 0)}       # the column reads
    arrays, report = profile_of(*transpose(64, pad=True))
    padded = report["B_kernel"]
    assert np.array_equal(arrays[1], arrays[0].T)
    assert padded.bank_conflicts == 0 and padded.conflict_degree == 1.0
    assert padded.conflicts_by_buffer == {"A.shared": (0, 0)}
    assert padded.shared_bytes == 1055 * 4 > plain.shared_bytes == 1024 * 4
    assert padded.barriers == plain.barriers == 4      # one a block


def test_barriers_counted_per_block_and_step():
    _, report = profile_of(*schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4))
    p = report["C_kernel"]
    assert p.blocks == 5 * 3 and p.barriers == 15 * 5 * 2     # two a step of k.outer (5 steps)
    assert "barriers" in str(p) and "occupancy" in str(p)


def test_occupancy_limits():
    assert occupancy("sm_80", 256, 0, 32).occupancy == 1.0
    small = occupancy("sm_80", 256, 0, 128)           # 128 registers: 16 warps of 64 a SM
    assert small.limit == "registers" and small.warps_per_sm == 16 and small.occupancy == 0.25
    shared = occupancy("sm_80", 128, 48 * 1024, 32)   # 48 KB a block + 1 KB reserved: 3 blocks in 164 KB
    assert shared.limit == "shared memory" and shared.blocks_per_sm == 3
    assert occupancy("sm_86", 1024, 0, None).occupancy == 1024 / 1536
    assert occupancy("sm_80", 32, 0, None).limit == "blocks"



def staged_copy(n=2048, threads=128):
    """B = A through a shared tile of 512 floats a block: fetched with one float4 access a thread,
    read back one float a thread in four coalesced steps."""
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i], name="B")
    s = sl.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bo, bi = s[B].split(B.op.axis[0], factor=4 * threads)
    _, t = s[B].split(bi, factor=threads)
    schedules.bind(s, B, bo, t)
    s[AS].compute_at(s[B], bo)
    t, v = s[AS].split(AS.op.axis[0], factor=4)
    s[AS].bind(t, sl.thread_axis("threadIdx.x"))
    s[AS].vectorize(v)
    return s, [A, B]


def test_float4_shared_accesses_need_four_passes_without_a_conflict():
    arrays, report = profile_of(*staged_copy())
    p = report["B_kernel"]
    assert np.array_equal(arrays[1], arrays[0])
    # 4 blocks of 4 warps; a warp stores one float4 a thread (128 words: 4 passes) and reads 4 floats (1 pass each)
    assert p.shared_requests == 16 * (1 + 4) and p.shared_wavefronts == 16 * (4 + 4)
    assert p.shared_ideal_wavefronts == p.shared_wavefronts and p.bank_conflicts == 0
    assert p.conflict_degree == 1.0 and p.passes_per_request == 8 / 5
    assert p.sectors_per_load == 16.0          # a warp's float4 loads: 512 contiguous bytes
