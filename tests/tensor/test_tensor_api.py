"""The Tensor-level language as TVM spells it: dtype strings, shapes, call and chained
indexing, integral float extents."""
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_matches_reference


def test_dtype_is_a_string_numpy_accepts():
    A = sl.placeholder((4, 3), dtype="int8", name="A")
    B = sl.compute(A.shape, lambda i, j: A[i, j].astype("float32") * 2, name="B")
    assert A.dtype == "int8" and isinstance(A.dtype, str)
    assert B.dtype == "float32"
    assert np.zeros(A.shape, dtype=A.dtype).dtype == np.int8
    assert np.zeros(B.shape, dtype=B.dtype).dtype == np.float32
    assert sl.placeholder((2,), dtype="bool").dtype == "bool"
    assert sl.placeholder((2,), dtype=np.uint8).dtype == "uint8"
    # expression dtypes compare equal to their TVM spelling too
    assert B[0][1].astype("float16").dtype == "float16"


def test_shape_converts_with_int():
    A = sl.placeholder((4, 3), name="A")
    assert tuple(int(n) for n in A.shape) == (4, 3)
    assert A.shape[1] == 3


def test_call_syntax_chained_indexing_and_rank_zero():
    A = sl.placeholder((5, 3), name="A")
    s0 = sl.placeholder((), name="s")
    k = sl.reduce_axis((0, 3), name="k")
    B = sl.compute((5,), lambda i: sl.sum(A(i, k) * s0(), axis=k), name="B")
    C = sl.compute((5, 3), lambda i, j: A[i][j] + B[i], name="C")
    T = sl.compute((), lambda: sl.sum(B[k] * 2.0, axis=k), name="T")
    assert str(C.op.body) == "A[i, j] + B[i]"
    assert tuple(T.shape) == ()
    s = sl.create_schedule([C.op, T.op])
    assert_matches_reference(s, [A, s0, C, T])


def test_partial_index_is_not_a_value():
    A = sl.placeholder((5, 3), name="A")
    row = A[2]
    assert row.dtype == "float32" and str(row[1]) == "A[2, 1]"
    with pytest.raises(IndexError, match="index every dimension"):
        sl.compute((5,), lambda i: A[i] + 1)


def test_integral_float_extent_as_in_tvm_gemm_tutorial():
    N, K, bn = 64, 8, 16
    B = sl.placeholder((K, N), name="B")
    packedB = sl.compute((N / bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    assert tuple(packedB.shape) == (4, 8, 16)
    assert sl.placeholder(N / bn, name="v").shape == (4,)
    s = sl.create_schedule(packedB.op)
    b = np.random.rand(K, N).astype("float32")
    out = np.zeros(packedB.shape, dtype=packedB.dtype)
    sl.build(s, [B, packedB])(b, out)
    np.testing.assert_array_equal(out, b.reshape(K, N // bn, bn).transpose(1, 0, 2))


def test_non_integral_float_extent_is_named():
    with pytest.raises(ValueError, match="2.5"):
        sl.placeholder((5 / 2, 3), name="A")
    with pytest.raises(ValueError, match="not a whole number"):
        sl.compute((7 / 2,), lambda i: i, name="B")


def test_comm_reducer_on_two_values_combines_them():
    mysum = sl.comm_reducer(lambda x, y: x + y, lambda t: sl.const(0, dtype=t), name="mysum")
    m, n = sl.var("m"), sl.var("n")
    assert str(mysum(m, n)) == "m + n"


def test_compute_of_a_tuple_returns_a_tuple_of_tensors():
    A = sl.placeholder((4,), name="A")
    B0, B1 = sl.compute((4,), lambda i: (A[i] + 1, A[i] * 2), name="B")
    assert isinstance(sl.compute((4,), lambda i: (A[i], A[i]), name="C"), tuple)
    single = sl.compute((4,), lambda i: (A[i] + 1,), name="D")   # as TVM: one output is a tensor
    assert isinstance(single, sl.Tensor) and single.name == "D"


def test_float_reduce_axis_bound_and_tir_arithmetic_helpers():
    N, bn = 12, 4
    A = sl.placeholder((N,), dtype="int32", name="A")
    k = sl.reduce_axis((0, N / bn), name="k")
    assert k.dom.extent == 3
    with pytest.raises(ValueError, match="1.5"):
        sl.reduce_axis((0, 1.5))
    B = sl.compute((N,), lambda i: sl.div(A[i], -5) + sl.bitwise_xor(A[i], 3) + sl.bitwise_not(A[i])
                   + sl.multiply(sl.subtract(A[i], 1), sl.add(A[i], 2)), name="B")
    a = np.arange(-6, 6, dtype="int32")
    out = np.zeros(N, "int32")
    sl.build(sl.create_schedule(B.op), [A, B])(a, out)
    np.testing.assert_array_equal(out, np.trunc(a / -5).astype("int32") + (a ^ 3) + ~a + (a - 1) * (a + 2))
    assert str(sl.div(sl.const(1.0), 2.0)) == "1.0 / 2.0"
