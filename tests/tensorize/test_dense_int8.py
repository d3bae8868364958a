"""The int8 dense of topi/x86_intrin.py: a u8 x s8 -> i32 dot product of 4-byte groups,
tensorized with VNNI where the target's features have it and with plain code otherwise,
against numpy on odd shapes (padding to whole tiles). Run with --host-lacks=avx512,avxvnni,gfni
the host target has no VNNI and the plain path is what "llvm" builds."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.topi import x86_intrin as xi
from tests.cpu_targets import needs_cc

SHAPES = [(7, 37, 19), (1, 16, 4), (13, 5, 33)]     # M, N, K: tails in every dimension


def build_dense(target, intrin, lanes, M, N, K):
    A = sl.placeholder((M, K), "uint8", name="A")
    B = sl.placeholder((N, K), "int8", name="B")
    C = xi.dense_int8(A, B, lanes)
    s = sl.create_schedule(C.op)
    xi.schedule_dense_int8(s, C, intrin, lanes)
    return sl.build(s, [A, B, C], target=target)


def check(f, M, N, K):
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    a = rng.integers(0, 256, (M, K)).astype("uint8")      # the extremes too: VNNI's u8 x s8 products
    b = rng.integers(-128, 128, (N, K)).astype("int8")
    a[0, 0], b[0, 0] = 255, -128
    c = np.zeros((M, N), "int32")
    f(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32").T)


@pytest.mark.parametrize("M, N, K", SHAPES)
def test_dense_int8_host(M, N, K):
    """The host target's choice: VNNI if its features say so, plain code otherwise."""
    target = sl.Target.create("llvm")
    lanes = xi.vnni_lanes(target)
    intrin = xi.dot_int8_intrin(target)
    n = intrin.op.axis[0].dom.extent
    f = build_dense(target, intrin, n, M, N, K)
    assert ("vpdpbusd" in f.ir["llvm"]) == bool(lanes)
    check(f, M, N, K)


@pytest.mark.parametrize("M, N, K", SHAPES[:2])
def test_dense_int8_plain_fallback(M, N, K):
    """A target whose features lack VNNI gets the plain intrinsic (no vpdpbusd)."""
    target = sl.Target.create("llvm -mattr=-avx512vnni,-avxvnni")
    assert xi.vnni_lanes(target) == 0
    intrin = xi.dot_int8_intrin(target)
    assert "plain" in intrin.name
    lanes = intrin.op.axis[0].dom.extent
    f = build_dense(target, intrin, lanes, M, N, K)
    assert "vpdpbusd" not in f.ir["llvm"]
    check(f, M, N, K)


@pytest.mark.parametrize("lanes, lacks", [(16, ""), (8, "-avx512vnni")])
def test_dense_int8_vnni_widths(lanes, lacks):
    """avx512vnni: 512-bit vpdpbusd, 16 lanes; avxvnni alone: the 256-bit form, 8 lanes."""
    target = sl.Target.create("llvm" + (f" -mattr={lacks}" if lacks else ""))
    if xi.vnni_lanes(target) != lanes:
        pytest.skip(f"the host has no {'avx512vnni' if lanes == 16 else 'avxvnni'}")
    intrin = xi.dot_int8_intrin(target)
    f = build_dense(target, intrin, lanes, 7, 37, 19)
    assert f"vpdpbusd.{lanes * 32}" in f.ir["llvm"]
    check(f, 7, 37, 19)


def test_vnni_lanes_reads_feature_switches_only():
    assert xi.vnni_lanes(sl.Target.create("llvm -mcpu=haswell")) == 0     # a named CPU: no switch, no VNNI


@pytest.mark.parametrize("M, N, K", SHAPES)
def test_tails_run_without_padding(M, N, K):
    """C computed straight from A (not padded): whole tiles take the intrinsic, the N and K
    tails the stage's own guarded loops (B is still packed, padded, for the intrinsic's layout)."""
    target = sl.Target.create("llvm")
    intrin = xi.dot_int8_intrin(target)
    lanes = intrin.op.axis[0].dom.extent
    Np, Kp = -(-N // lanes) * lanes, -(-K // 4) * 4
    A = sl.placeholder((M, K), "uint8", name="A")
    B = sl.placeholder((N, K), "int8", name="B")
    Bp = sl.compute((Np // lanes, Kp // 4, lanes, 4), lambda no, ko, ni, ki: sl.if_then_else(
        sl.all(no * lanes + ni < N, ko * 4 + ki < K), B[no * lanes + ni, ko * 4 + ki], sl.const(0, "int8")),
        name="B_packed")
    k = sl.reduce_axis((0, K), name="k")
    C = sl.compute((M, N), lambda i, j: sl.sum(
        A[i, k].astype("int32") * Bp[j // lanes, k // 4, j % lanes, k % 4].astype("int32"), axis=k), name="C")
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=lanes)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(i, jo, ko, ji, ki)
    s[C].tensorize(ji, intrin)
    check(sl.build(s, [A, B, C], target=target), M, N, K)


@needs_cc
def test_plain_intrinsic_on_the_c_target():
    """The plain intrinsic is scalar statements: the c target (C99 through cc) builds it too."""
    intrin = xi.dot_u8s8s32_plain(8)
    check(build_dense("c", intrin, 8, 7, 37, 19), 7, 37, 19)
