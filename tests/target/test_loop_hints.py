"""LLVM's loop vectorizer is kept off the serial loops whose memory indices wrap their own
variable (target/llvm/loop_hints.py): LLVM 22.1 miscompiled them (a random schedule found it)."""
import re

import numpy as np
import pytest

import schedlang as sl
from schedlang.topi import nn

HINT = '!{!"llvm.loop.vectorize.enable", i1 false}'


def _fused_rows_outside_k(M, N, K, dtype):
    """C = A @ B with C's two axes fused into one loop inside the reduction loop: the inner loop
    reads A[f // N, k] and B[k, f % N] (what `fuse` and `reorder(k, f)` leave)."""
    A = sl.placeholder((M, K), name="A", dtype=dtype)
    B = sl.placeholder((K, N), name="B", dtype=dtype)
    C = nn.matmul(A, B)
    s = sl.create_schedule(C.op)
    fused = s[C].fuse(*s[C].op.axis)
    s[C].reorder(s[C].op.reduce_axis[0], fused)
    return s, [A, B, C]


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("shape", [(7, 16, 5), (7, 16, 33), (5, 32, 3), (9, 8, 4)])
def test_fused_loop_inside_reduction_matches_numpy(shape, dtype):
    M, N, K = shape
    s, args = _fused_rows_outside_k(M, N, K, dtype)
    mod = sl.build(s, args, target="llvm", cache=False)
    rng = np.random.default_rng(1)
    a = rng.integers(-9, 10, (M, K)).astype(dtype)
    b = rng.integers(-9, 10, (K, N)).astype(dtype)
    c = np.full((M, N), 12345, dtype)
    mod(a, b, c)
    # small integers: every product and sum is exact in float32 too
    np.testing.assert_array_equal(c, a @ b)


def test_the_wrapping_loop_carries_the_hint_and_only_it():
    s, args = _fused_rows_outside_k(7, 16, 5, "float32")
    text = sl.build(s, args, target="llvm", cache=False).get_source("ll")
    hinted = re.findall(r"br i1 %\S+, label %(\S+?)\.loop\.\d+, label %\S+, !llvm\.loop (!\d+)", text)
    nodes = dict(re.findall(r"^(!\d+) = (.*)$", text, re.M))
    with_hint = {loop for loop, node in hinted
                 if any(nodes.get(m) == HINT for m in re.findall(r"!\d+", nodes[node])[1:])}
    # two loops over the fused axis (the zeroing and the product), only the product's reads wrap
    assert with_hint == {"i.j.fused"}
    assert text.count(HINT) == 1


def test_plain_loops_get_no_hint():
    A = sl.placeholder((7, 5), name="A")
    B = sl.placeholder((5, 16), name="B")
    C = nn.matmul(A, B)
    s = sl.create_schedule(C.op)
    assert "llvm.loop.vectorize.enable" not in sl.build(s, [A, B, C], target="llvm", cache=False).get_source("ll")


def test_hint_and_unroll_count_share_one_loop_node():
    A = sl.placeholder((6, 8), name="A")
    B = sl.placeholder((8, 32), name="B")
    C = nn.matmul(A, B)
    s = sl.create_schedule(C.op)
    fused = s[C].fuse(*s[C].op.axis)
    s[C].reorder(s[C].op.reduce_axis[0], fused)
    s[C].pragma(fused, "unroll_count", 4)
    mod = sl.build(s, [A, B, C], target="llvm", cache=False)
    text = mod.get_source("ll")
    node = re.search(r"^(!\d+) = distinct !\{(!\d+), (!\d+), (!\d+)\}$", text, re.M)
    assert node is not None and node.group(1) == node.group(2), text[-600:]
    hints = {re.search(rf"^{m} = (.*)$", text, re.M).group(1) for m in node.group(3, 4)}
    assert hints == {'!{!"llvm.loop.unroll.count", i32 4}', HINT}
    a = np.arange(48, dtype="float32").reshape(6, 8) % 7
    b = np.arange(256, dtype="float32").reshape(8, 32) % 5
    c = np.zeros((6, 32), "float32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a @ b)
