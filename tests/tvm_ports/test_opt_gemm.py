# Ported from apache/tvm v0.18 gallery/how_to/optimize_operators/opt_gemm.py ("How to
# optimize GEMM on CPU"): `from tvm import te` became `import schedlang as sl`, every step
# of the tutorial (baseline, blocking, vectorization, loop permutation, array packing,
# write cache, parallel) is built and checked against numpy. The tutorial's 1024^3 becomes
# 128^3 to keep the suite fast, and its timing is left out (timing lives in benchmarks/).
# The algorithms are the tutorial's own code; the steps that repeat the blocking share
# `blocked`, and the final schedule is schedlang.topi's, not a copy of it.
import numpy as np
import pytest

import schedlang as sl
from schedlang import topi
from tests.tvm_ports.check import assert_close, build_and_run

M = K = N = 128
bn, kfactor = 32, 4
dtype = "float32"
rng = np.random.default_rng(0)
a = rng.random((M, K)).astype(dtype)
b = rng.random((K, N)).astype(dtype)
answer = np.dot(a, b)


def algorithm():
    k = sl.reduce_axis((0, K), "k")
    A = sl.placeholder((M, K), name="A")
    B = sl.placeholder((K, N), name="B")
    C = sl.compute((M, N), lambda m, n: sl.sum(A[m, k] * B[k, n], axis=k), name="C")
    return A, B, C


def packed_algorithm():
    k = sl.reduce_axis((0, K), "k")
    A = sl.placeholder((M, K), name="A")
    B = sl.placeholder((K, N), name="B")
    packedB = sl.compute((N // bn, K, bn), lambda bigN, k, littleN: B[k, bigN * bn + littleN], name="packedB")
    C = sl.compute((M, N), lambda m, n: sl.sum(A[m, k] * packedB[n // bn, k, sl.floormod(n, bn)], axis=k),
                   name="C")
    return A, B, packedB, C


def check(s, A, B, C):
    assert sl.lower(s, [A, B, C])                  # print(tvm.lower(s, [A, B, C], simple_mode=True))
    (c,) = build_and_run(s, [A, B, C], [a, b], [np.zeros((M, N), dtype)], name="mmult")
    assert_close(c, answer, rtol=1e-5)


def test_baseline():
    A, B, C = algorithm()
    s = sl.create_schedule(C.op)
    check(s, A, B, C)


def blocked(C, permute=False, vectorize=True):
    """The blocking every later step of the tutorial starts from: 32 x 32 tiles, k split by
    kfactor and moved outside the block (with permute, ki inside the block's rows), the
    block's columns vectorized."""
    s = sl.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=kfactor)
    s[C].reorder(mo, no, ko, *((mi, ki) if permute else (ki, mi)), ni)
    if vectorize:
        s[C].vectorize(ni)
    return s


def test_blocking():
    A, B, C = algorithm()
    check(blocked(C, vectorize=False), A, B, C)


def test_vectorization():
    A, B, C = algorithm()
    check(blocked(C), A, B, C)


def test_loop_permutation():
    A, B, C = algorithm()
    check(blocked(C, permute=True), A, B, C)


def test_array_packing():
    A, B, packedB, C = packed_algorithm()
    s = blocked(C, permute=True)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    check(s, A, B, C)


def _write_cache_schedule(parallel):
    """The tutorial's last two steps are schedlang.topi.cpu.schedule_matmul_packed (its one copy:
    cache_write, compute_at the block, ko/mc/ki/nc with ki unrolled and nc vectorized, the
    packing vectorized); the tutorial's write-cache step already runs the packing in parallel."""
    A, B, packedB, C = packed_algorithm()
    s = topi.cpu.schedule_matmul_packed(sl.create_schedule(C.op), C, parallel=parallel, k_factor=kfactor)
    if not parallel:
        s[packedB].parallel(s[packedB].op.axis[0])
    return s, A, B, C


def test_write_cache_for_blocks():
    s, A, B, C = _write_cache_schedule(parallel=False)
    assert "alloc C.global: f32[32, 32]" in sl.lower(s, [A, B, C])    # one block, reused
    check(s, A, B, C)


def test_parallel():
    s, A, B, C = _write_cache_schedule(parallel=True)
    assert "workers(m.outer: 4)" in sl.lower(s, [A, B, C], level="kernel")
    check(s, A, B, C)


# ---- as the tutorial writes it -------------------------------------------------------------
def test_array_packing_with_the_tutorials_float_shape():
    B = sl.placeholder((K, N), name="B")
    packedB = sl.compute((N / bn, K, bn), lambda bigN, k, littleN: B[k, bigN * bn + littleN], name="packedB")
    assert tuple(packedB.shape) == (N // bn, K, bn)


def test_inputs_made_with_the_tensors_dtype():
    A, B, C = algorithm()
    s = sl.create_schedule(C.op)
    f = sl.build(s, [A, B, C], name="mmult")
    x = np.random.rand(M, K).astype(A.dtype)
    y = np.random.rand(K, N).astype(B.dtype)
    z = np.zeros((M, N), dtype=C.dtype)
    f(x, y, z)
    assert_close(z, x @ y, rtol=1e-5)
