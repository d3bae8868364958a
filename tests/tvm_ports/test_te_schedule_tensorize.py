"""Ported from apache/tvm tests/python/te/test_te_schedule_tensorize.py: `from tvm import te`
became `import schedlang as sl`. TVM's test lowers each program and compares its internal
tensorize regions; here each one is built and run against numpy, with the intrinsics' functions
(call_packed there, never defined) written in C and loaded into the process, as in
test_tensorize_tutorial.py, and called with call_extern.

Left out: the cache_write case whose intrinsic body reads the stage's outer loop variable for a
tail (`select(xo * n + i < m, ...)`): an intrinsic is a compute of its own here, which reads only
its axes and size variables (a ValueError says so; test_an_intrinsic_reading_an_outer_loop_is_refused);
and test_tensorize_tensor_compute_op (TensorComputeOp, TVM's tensor-intrinsic call inside a compute,
has no counterpart).
"""
import llvmlite.binding as llvm
import numpy as np
import pytest

import schedlang as sl
from schedlang.target.c.compile import build_library, find_compiler
from schedlang.target.target import Target

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="the intrinsics' C functions need a C compiler")

C_SOURCE = """
int tz_vadd16(float *x, float *y, float *z) { for (int i = 0; i < 16; ++i) z[i] = x[i] + y[i]; return 0; }
int tz_vadd32(float *x, float *y, float *z) { for (int i = 0; i < 32; ++i) z[i] = x[i] + y[i]; return 0; }
int tz_gemv(float *w, float *x, float *z, int n, int ldw) {
  for (int i = 0; i < 16; ++i) { float acc = 0; for (int k = 0; k < n; ++k) acc += w[i * ldw + k] * x[k]; z[i] = acc; }
  return 0;
}
int tz_gemv_add(float *w, float *x, float *z, int n, int ldw) {
  for (int i = 0; i < 16; ++i) for (int k = 0; k < n; ++k) z[i] += w[i * ldw + k] * x[k];
  return 0;
}
int tz_fill_zero(float *z, int n) { for (int i = 0; i < n; ++i) z[i] = 0; return 0; }
int tz_op(float *a, float *out) {
  for (int i = 0; i < 9; ++i) for (int j = 0; j < 9; ++j) out[i * 9 + j] = a[(j / 3 + i % 3) * 5 + j % 3 + i / 3];
  return 0;
}
"""
_LOADED = []


@pytest.fixture(scope="module", autouse=True)
def functions():
    if not _LOADED:
        path, _ = build_library(C_SOURCE, Target.create("c"))
        llvm.load_library_permanently(str(path))
        _LOADED.append(path)


def intrin_vadd(n):
    x, y = sl.placeholder((n,), name="vx"), sl.placeholder((n,), name="vy")
    z = sl.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def intrin_func(ins, outs):
        return sl.call_extern("int32", f"tz_vadd{n}", ins[0].access_ptr("r"), ins[1].access_ptr("r"),
                              outs[0].access_ptr("w"))
    return sl.decl_tensor_intrin(z.op, intrin_func, default_buffer_params={"offset_factor": 16})


def intrin_gemv(m, n, reset=True):
    w, x = sl.placeholder((m, n), name="w"), sl.placeholder((n,), name="x")
    k = sl.reduce_axis((0, n), name="k")
    z = sl.compute((m,), lambda i: sl.sum(w[i, k] * x[k], axis=k), name="z")
    Wb = sl.decl_buffer(w.shape, w.dtype, name="W", offset_factor=16, strides=[sl.var("ldw"), 1])

    def intrin_func(ins, outs):
        ww, xx = ins
        zz = outs[0]
        args = (ww.access_ptr("r"), xx.access_ptr("r"), zz.access_ptr("w"), n, ww.strides[0])
        body = sl.call_extern("int32", "tz_gemv", *args)
        update = sl.call_extern("int32", "tz_gemv_add", *args)
        return body, sl.call_extern("int32", "tz_fill_zero", zz.access_ptr("w"), m) if reset else None, update
    return sl.decl_tensor_intrin(z.op, intrin_func, binds={w: Wb},
                                 default_buffer_params={"offset_factor": 16, "data_alignment": 16})


def _run(s, args, inputs, out_shape):
    out = np.full(out_shape, 7.0, "float32")
    sl.build(s.normalize(), args)(*inputs, out)
    return out


@pytest.mark.parametrize("whole", [False, True], ids=["split", "compute_reuse"])
def test_tensorize_vadd(whole):
    m = 32 if whole else 128
    x, y = sl.placeholder((m,), name="x"), sl.placeholder((m,), name="y")
    z = sl.compute(x.shape, lambda i: x[i] + y[i], name="z")
    s = sl.create_schedule(z.op)
    if whole:           # the intrinsic is the stage's own op (TVM's check_compute_reuse)
        def f(ins, outs):
            return sl.call_extern("int32", "tz_vadd32", ins[0].access_ptr("r"), ins[1].access_ptr("r"),
                                  outs[0].access_ptr("w"))
        s[z].tensorize(z.op.axis[0], sl.decl_tensor_intrin(z.op, f))
    else:
        xo, xi = s[z].split(z.op.axis[0], factor=16)
        s[z].tensorize(xi, intrin_vadd(16))
    assert "tz_vadd" in str(sl.lower(s, [x, y, z]))
    a, b = np.random.rand(m).astype("float32"), np.random.rand(m).astype("float32")
    np.testing.assert_allclose(_run(s, [x, y, z], [a, b], (m,)), a + b, rtol=1e-6)


def test_an_intrinsic_reading_an_outer_loop_is_refused():
    """TVM's check_cache_write: the intrinsic's body selects by the stage's outer loop for the
    tail of 129 = 8 * 16 + 1."""
    x, y = sl.placeholder((129,), name="x"), sl.placeholder((129,), name="y")
    z = sl.compute(x.shape, lambda i: x[i] + y[i], name="z")
    s = sl.create_schedule(z.op)
    s[z].split(z.op.axis[0], factor=16)
    xo, _ = s.cache_write(z, "global").op.axis
    vx, vy = sl.placeholder((16,), name="vx"), sl.placeholder((16,), name="vy")
    with pytest.raises(ValueError, match="not one of its axes"):
        sl.compute((16,), lambda i: sl.select(xo * 16 + i < 129, vx[i] + vy[i], sl.const(0, "float32")))


N = L = 64


@pytest.mark.parametrize("kind", ["whole_reduction", "rfactor", "rfactor_no_reset", "rfactor_no_reset_multi_reduction"])
def test_tensorize_matmul(kind):
    A, B = sl.placeholder((N, L), name="A"), sl.placeholder((N, L), name="B")
    k = sl.reduce_axis((0, L), name="k")
    C = sl.compute((N, N), lambda i, j: sl.sum(B[j, k] * A[i, k], axis=k), name="C")
    s = sl.create_schedule(C.op)
    x, y = C.op.axis
    yo, yi = s[C].split(y, factor=16)
    if kind == "whole_reduction":
        s[C].tensorize(yi, intrin_gemv(16, L))
    else:
        ro, ri = s[C].split(C.op.reduce_axis[0], factor=16)
        if kind == "rfactor_no_reset_multi_reduction":
            roo, roi = s[C].split(ro, factor=2)
            s[C].reorder(yo, roo, roi, yi, ri)
        else:
            s[C].reorder(yo, ro, yi, ri)
        s[C].tensorize(yi, intrin_gemv(16, 16, reset=kind == "rfactor"))
    text = str(sl.lower(s, [A, B, C]))
    assert ("tz_gemv_add" in text) == (kind != "whole_reduction")
    assert ("tz_fill_zero" in text) == (kind == "rfactor")
    a, b = np.random.rand(N, L).astype("float32"), np.random.rand(N, L).astype("float32")
    np.testing.assert_allclose(_run(s, [A, B, C], [a, b], (N, N)), a @ b.T, rtol=1e-5)


def test_tensorize_op():
    """The algorithm's and the intrinsic's index expressions (divisions and remainders by 3)
    are matched after simplification (TVM issue #696)."""
    def body(X):
        return lambda i, j: X[sl.indexdiv(j, 3) + sl.indexmod(i, 3), sl.indexmod(j, 3) + sl.indexdiv(i, 3)]
    x = sl.placeholder((5, 5), name="A")
    y = sl.compute((9, 9), body(x))
    intrin = sl.decl_tensor_intrin(y.op, lambda ins, outs: sl.call_extern(
        "int32", "tz_op", ins[0].access_ptr("r"), outs[0].access_ptr("w")), default_buffer_params={"offset_factor": 2})
    A = sl.placeholder((5, 5), name="A")
    B = sl.compute((9, 9), body(A))
    s = sl.create_schedule(B.op)
    s[B].tensorize(B.op.axis[0], intrin)
    a = np.random.rand(5, 5).astype("float32")
    i, j = np.meshgrid(np.arange(9), np.arange(9), indexing="ij")
    np.testing.assert_array_equal(_run(s, [A, B], [a], (9, 9)), a[j // 3 + i % 3, j % 3 + i // 3])
