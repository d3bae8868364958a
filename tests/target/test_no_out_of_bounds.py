"""Generated code stays inside its buffers: tails, non-divisible splits, padding reads and
odd shapes run with every array pressed against an inaccessible page (a child process
runs them, so a fault fails the test instead of killing pytest)."""
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import numpy as np
    import schedlang as sl
    from tests.target.guarded_memory import guarded_array
    from schedlang.topi import cpu
    from tests import programs

    def check(s, args):
        mod = sl.build(s, args)
        for at_end in (True, False):
            rng = np.random.default_rng(0)
            arrays, feed = [], {}
            for t in args:
                a = guarded_array(t.shape, np.dtype(t.dtype), at_end)
                if isinstance(s[t].op, sl.tensor.PlaceholderOp):
                    a[...] = rng.standard_normal(t.shape)
                    feed[t] = a
                arrays.append(a)
            mod(*arrays)
            outs = [a for t, a in zip(args, arrays) if t not in feed]
            for got, want in zip(outs, sl.reference([t for t in args if t not in feed], feed)):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    # vector tails and a non-divisible split of a split
    A = sl.placeholder((3, 1023), name="A")
    B = sl.compute((3, 1023), lambda i, j: sl.exp(A[i, j]) + A[i, j], name="B")
    s = sl.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=40)
    jio, jii = s[B].split(ji, factor=16)
    s[B].vectorize(jii)
    s[B].parallel(B.op.axis[0])
    check(s, [A, B])

    # GEMM with tails everywhere and a write cache
    A, Bm, C = programs.gemm(33, 47, 29)
    s = cpu.schedule_matmul_cached(sl.create_schedule(C.op), C, (8, 16), k_factor=7, vectorize_tile=True,
                                   parallel=False)
    check(s, [A, Bm, C])

    # padding through if_then_else, inlined and vectorized (reads guarded per lane)
    X, Wt, padded, out = programs.conv2d(1, 2, 7, 9, 3, 3)
    s = sl.create_schedule(out.op)
    s[padded].compute_inline()
    s[out].vectorize(out.op.axis[3])
    check(s, [X, Wt, out])

    # softmax with a stencil-like compute_at and fused rows
    X, mx, ex, total, sm = programs.softmax(5, 37)
    check(cpu.schedule_softmax(sl.create_schedule(sm.op), sm, factor=8), [X, sm])
    print("all inside")
''')


def test_kernels_never_touch_memory_outside_their_buffers():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"child failed (rc={done.returncode}; -11 is a fault):\n{done.stdout}\n{done.stderr}"
    assert "all inside" in done.stdout
