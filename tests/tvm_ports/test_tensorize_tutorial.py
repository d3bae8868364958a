"""TVM's "Use Tensorize to Leverage Hardware Intrinsics" tutorial (tutorials/language/tensorize.py):
a GEMV intrinsic that calls an extern C function, then reset/update for a split reduction,
ported by changing the import.

Differences: TVM compiles the C code to LLVM IR with clang and links it through
`pragma(x, "import_llvm", ...)`; here it is compiled with the system C compiler into a shared
library loaded into the process (the JIT resolves gemv_update there), so the pragma is left out;
the C source is C, not C++ (no extern "C"); numpy arrays instead of tvm.nd arrays.
"""
import numpy as np
import pytest
import llvmlite.binding as llvm

import schedlang as te    # the tutorial's `from tvm import te`
import schedlang as tvm   # tvm.lower / tvm.build
from schedlang.target.c.compile import build_library, find_compiler
from schedlang.target.target import Target

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="the extern C functions need a C compiler")


class tir:   # tvm.tir's names the tutorial uses
    decl_buffer = staticmethod(te.decl_buffer)
    call_extern = staticmethod(te.call_extern)
    ir_builder = te.ir_builder


GEMV_C = """
int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < l; ++j) {
      cc[i] += aa[j] * bb[i * stride + j];
    }
  }
  return 0;
}
int gemv_reset(float *cc, int m) {
  for (int i = 0; i < m; ++i) {
    cc[i] = 0.0;
  }
  return 0;
}
"""


def gemv_impl():
    """The tutorial's gemv_update and gemv_reset, linked into the process (TVM: clang -> import_llvm)."""
    path, _ = build_library(GEMV_C, Target.create("c"))
    llvm.load_library_permanently(str(path))


N, M, L = 1024, 512, 64


def algorithm():
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def intrin_gemv(m, l, reduce_update=False):
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    Ab = tir.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
    Bb = tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[te.var("s1"), 1])
    Cb = tir.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def _body():
            ib = tir.ir_builder.create()
            ib.emit(tir.call_extern("int32", "gemv_update", cc.access_ptr("w"), aa.access_ptr("r"),
                                    bb.access_ptr("r"), m, l, bb.strides[0]))
            return ib.get()

        def _reduce_reset():
            ib = tir.ir_builder.create()
            ib.emit(tir.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m))
            return ib.get()

        if not reduce_update:
            return _body()
        return _body(), _reduce_reset(), _body()

    return te.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})


def run(s, A, B, C):
    func = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    a = np.random.uniform(size=(N, L)).astype(A.dtype)
    b = np.random.uniform(size=(M, L)).astype(B.dtype)
    c = np.zeros((N, M), dtype=C.dtype)
    func(a, b, c)
    np.testing.assert_allclose(c, np.dot(a, b.T), rtol=1e-3)


def split_rows(factor):
    """Both tensorize steps of the tutorial start the same way: C's rows y split by factor."""
    A, B, C = algorithm()
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    return A, B, C, s, x, yo, yi, z


def test_tensorize_gemv_extern_call():
    A, B, C, s, x, yo, yi, z = split_rows(factor := 16)
    s[C].reorder(x, yo, yi, z)
    gemv = intrin_gemv(factor, L)
    s[C].tensorize(yi, gemv)
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    # the loops under yi became one call; B's stride s1 bound to L, offsets from the real layout
    assert "call_pure_extern(\"int32\", \"gemv_update\"" in text and f", 16, {L}, {L})" in text, text
    assert "for k" not in text
    gemv_impl()
    run(s, A, B, C)


def test_tensorize_gemv_reduce_update():
    A, B, C, s, x, yo, yi, z = split_rows(factor := 16)
    zo, zi = s[C].split(z, factor=factor)
    s[C].reorder(x, yo, zo, yi, zi)
    gemv = intrin_gemv(factor, factor, reduce_update=True)
    s[C].tensorize(yi, gemv)
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    assert text.index("gemv_reset") < text.index("for k.outer") < text.index("gemv_update"), text
    gemv_impl()
    run(s, A, B, C)
