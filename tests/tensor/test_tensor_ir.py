"""The algorithm language: construction checks, classification, printing, reference."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.tensor import classify, print_tensor_ir
from tests import programs


def test_classification():
    X, mx, ex, total, out = programs.softmax(4, 8)
    A = sl.placeholder((4, 8), name="A")
    T = sl.compute((8, 4), lambda i, j: A[j, i], name="T")
    P = sl.compute((4, 10), lambda i, j: sl.if_then_else(j >= 1, sl.if_then_else(j < 9, A[i, j - 1], 0.0), 0.0), name="P")
    assert classify(mx.op) == "Reduction"
    assert classify(ex.op) == "Elementwise"
    assert classify(T.op) == "IndexMap"
    assert classify(P.op) == "IndexMap"
    assert classify(X.op) == "Input"


def test_printer_shape_of_lines():
    A, B, C = programs.gemm(16, 8, 4)
    text = print_tensor_ir([C.op])
    assert "inputs:\n  A: (16, 4) f32\n  B: (4, 8) f32" in text
    assert "C[i, j] = sum(A[i, k] * B[k, j], axis=k)   # Reduction over k in 0..4 -> (16, 8) f32" in text
    assert text.endswith("outputs:\n  C: (16, 8) f32")


def test_slice_as_index_map_prints_coordinates():
    x = sl.placeholder((1, 32, 4096), name="x")
    chunk_1 = sl.compute((1, 32, 2048), lambda i, j, k: x[i, j, k + 2048], name="chunk_1")
    assert "chunk_1[i, j, k] = x[i, j, k + 2048]" in print_tensor_ir([chunk_1.op])


def test_compute_errors():
    A = sl.placeholder((4, 4), name="A")
    k = sl.reduce_axis((0, 4), name="k")
    with pytest.raises(TypeError, match="2 dimensions but the lambda takes 1"):
        sl.compute((4, 4), lambda i: A[i, 0])
    with pytest.raises(ValueError, match="a reduction may only be the whole body"):
        sl.compute((4,), lambda i: sl.sum(A[i, k], axis=k) + 1.0)
    with pytest.raises(ValueError, match="uses variable 'k'"):
        sl.compute((4,), lambda i: A[i, k])
    with pytest.raises(IndexError, match="has 2 dimensions"):
        sl.compute((4,), lambda i: A[i])
    with pytest.raises(ValueError, match="non-positive extent"):
        sl.placeholder((4, 0))
    with pytest.raises(TypeError, match="needs axis="):
        sl.sum(A[0, 0])
    with pytest.raises(ValueError, match="unsupported dtype"):
        sl.placeholder((4,), "float8")
    with pytest.raises(TypeError, match="truth value"):
        sl.compute((4,), lambda i: A[i, 0] if i > 2 else 0.0)


def test_elementwise_max_min_vs_reduction():
    A = sl.placeholder((3, 5), name="A")
    k = sl.reduce_axis((0, 5), name="k")
    R = sl.compute((3,), lambda i: sl.max(A[i, k], axis=k), name="R")
    E = sl.compute((3, 5), lambda i, j: sl.max(A[i, j], 0.0), name="E")
    a = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    r, e = sl.reference([R, E], {A: a})
    np.testing.assert_array_equal(r, a.max(axis=1))
    np.testing.assert_array_equal(e, np.maximum(a, 0))


def test_reference_reports_out_of_bounds_reads():
    A = sl.placeholder((4,), name="A")
    B = sl.compute((4,), lambda i: A[i + 1], name="B")
    with pytest.raises(IndexError, match="out of bounds"):
        sl.reference([B], {A: np.zeros(4, "float32")})
    G = sl.compute((4,), lambda i: sl.if_then_else(i < 3, A[i + 1], 0.0), name="G")
    np.testing.assert_array_equal(sl.reference([G], {A: np.arange(4, dtype="float32")})[0], [1, 2, 3, 0])


def test_reference_evaluates_gemm_in_chunks():
    A, B, C = programs.gemm(300, 70, 500)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((300, 500)).astype("float32"), rng.standard_normal((500, 70)).astype("float32")
    np.testing.assert_allclose(sl.reference([C], {A: a, B: b})[0], a @ b, rtol=1e-4, atol=1e-4)


def test_expression_building_and_printing():
    i, j = sl.var("i"), sl.var("j")
    assert str((i + 1) * (j - 2) // 4 % 3) == "(i + 1) * (j - 2) // 4 % 3"
    assert str(sl.if_then_else(sl.all(i > 0, j < 3), i, j)) == "if_then_else(i > 0 and j < 3, i, j)"
    assert str((i * 2.0).dtype) == "float32"
    assert (i + 1) == (i + 1)            # structural equality in Python's ==
    assert not ((i + 1) == (i + 2))
