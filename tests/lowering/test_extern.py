"""sl.extern + sl.call_packed + sl.register_func: stages computed by registered Python
functions, called from the generated code with numpy views of the buffers."""
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_matches_reference, run


@pytest.fixture
def registered():
    """Register test functions under fresh names; unregister them afterwards."""
    names = []

    def register(name, f):
        sl.register_func(name, f, override=True)
        names.append(name)
        return name

    yield register
    for n in names:
        sl.remove_global_func(n)


def matmul_extern(register, n=16, l=12, m=20):
    calls = []

    def matmul(a, b, c, trans_a, trans_b):
        calls.append((type(a), a.shape, b.shape, c.shape, trans_a, trans_b))
        np.matmul(a.T if trans_a else a, b.T if trans_b else b, out=c)

    register("test.extern.matmul", matmul)
    A = sl.placeholder((n, l), name="A")
    B = sl.placeholder((l, m), name="B")
    C = sl.extern((n, m), [A, B], lambda ins, outs: sl.call_packed("test.extern.matmul", ins[0], ins[1], outs[0],
                                                                     False, False), name="C")
    return A, B, C, calls


def test_matmul_with_a_scheduled_consumer(registered):
    A, B, C, calls = matmul_extern(registered)
    D = sl.compute(C.shape, lambda i, j: C[i, j] * 2 + 1, name="D")
    s = sl.create_schedule(D.op)
    jo, ji = s[D].split(D.op.axis[1], factor=8)
    s[D].vectorize(ji)
    s[D].parallel(D.op.axis[0])
    text = sl.lower(s, [A, B, D], level="all")
    assert "C = call_packed('test.extern.matmul', A, B, C, False, False)   # Extern" in text
    assert "call_packed('test.extern.matmul', A, B, C, False, False)" in sl.lower(s, [A, B, D], level="kernel")
    feed, [(_, d)], _ = run(s, [A, B, D])
    np.testing.assert_allclose(d, (feed[A] @ feed[B]) * 2 + 1, rtol=1e-4)
    assert calls[-1] == (np.ndarray, (16, 12), (12, 20), (16, 20), False, False)
    assert_matches_reference(s, [A, B, D])


def test_extern_output_is_an_argument(registered):
    A, B, C, _ = matmul_extern(registered, 5, 7, 3)
    s = sl.create_schedule(C.op)
    feed, [(_, c)], _ = run(s, [A, B, C])
    np.testing.assert_allclose(c, feed[A] @ feed[B], rtol=1e-5)


def test_extern_in_the_middle_of_a_pipeline(registered):
    """compute -> extern -> compute, with the producer scheduled and the consumer split."""
    registered("test.extern.cumsum", lambda x, y: np.cumsum(x, axis=1, out=y))
    A = sl.placeholder((6, 33), name="A")
    P = sl.compute((6, 33), lambda i, j: A[i, j] * A[i, j], name="P")
    E = sl.extern(P.shape, [P], lambda ins, outs: sl.call_packed("test.extern.cumsum", ins[0], outs[0]), name="E")
    Q = sl.compute((6, 33), lambda i, j: E[i, j] - P[i, j], name="Q")
    s = sl.create_schedule(Q.op)
    po, pi = s[P].split(P.op.axis[1], factor=8)
    s[P].vectorize(pi)
    s[Q].parallel(Q.op.axis[0])
    feed, [(_, q)], _ = run(s, [A, Q])
    a2 = feed[A] ** 2
    np.testing.assert_allclose(q, np.cumsum(a2, axis=1) - a2, rtol=1e-4, atol=1e-4)
    assert_matches_reference(s, [A, Q])


def test_exception_in_the_callback_propagates(registered):
    def fail(x, y):
        raise KeyError("boom from the callback")

    registered("test.extern.fail", fail)
    A = sl.placeholder((4,), name="A")
    B = sl.extern(A.shape, [A], lambda ins, outs: sl.call_packed("test.extern.fail", ins[0], outs[0]), name="B")
    f = sl.build(sl.create_schedule(B.op), [A, B])
    a, b = np.ones(4, "float32"), np.zeros(4, "float32")
    with pytest.raises(KeyError, match="boom from the callback"):
        f(a, b)
    registered("test.extern.fail", lambda x, y: np.add(x, 1, out=y))   # looked up at call time
    f(a, b)                                                             # no stale error left behind
    np.testing.assert_array_equal(b, a + 1)


def test_unregistered_function_raises_at_call():
    A = sl.placeholder((4,), name="A")
    B = sl.extern(A.shape, [A], lambda ins, outs: sl.call_packed("test.extern.missing", ins[0], outs[0]), name="B")
    f = sl.build(sl.create_schedule(B.op), [A, B])
    with pytest.raises(ValueError, match="no function is registered under 'test.extern.missing'"):
        f(np.ones(4, "float32"), np.zeros(4, "float32"))


def test_register_func_forms():
    try:
        @sl.register_func("test.extern.deco")
        def f1(x):
            return 1

        @sl.register_func
        def test_extern_plain(x):
            return 2

        assert sl.get_global_func("test.extern.deco") is f1
        assert sl.get_global_func("test_extern_plain") is test_extern_plain
        with pytest.raises(ValueError, match="already registered"):
            sl.register_func("test.extern.deco", lambda x: 3)
        sl.register_func("test.extern.deco", lambda x: 3, override=True)
        assert sl.get_global_func("test.extern.deco")(0) == 3
        assert sl.get_global_func("test.extern.nothing", allow_missing=True) is None
    finally:
        sl.remove_global_func("test.extern.deco")
        sl.remove_global_func("test_extern_plain")


def test_extern_dtype_and_scalars(registered):
    got = []
    registered("test.extern.scale", lambda x, y, k, flag: (got.append((k, flag)), np.multiply(x, k, out=y)))
    A = sl.placeholder((3, 5), name="A", dtype="int32")
    B = sl.extern((3, 5), [A], lambda ins, outs: sl.call_packed("test.extern.scale", ins[0], outs[0], 3, True),
                  name="B", dtype="int64")
    assert str(B.dtype) == "int64"
    s = sl.create_schedule(B.op)
    feed, [(_, b)], _ = run(s, [A, B])
    np.testing.assert_array_equal(b, feed[A].astype("int64") * 3)
    assert got[-1] == (3, True) and type(got[-1][0]) is int


# ---- errors ------------------------------------------------------------------------------
def test_extern_stage_cannot_be_scheduled(registered):
    A, B, C, _ = matmul_extern(registered)
    D = sl.compute(C.shape, lambda i, j: C[i, j] + 1, name="D")
    s = sl.create_schedule(D.op)
    for primitive, call in [("split", lambda: s[C].split(D.op.axis[0], factor=2)),
                            ("fuse", lambda: s[C].fuse()),
                            ("compute_inline", lambda: s[C].compute_inline()),
                            ("compute_at", lambda: s[C].compute_at(s[D], D.op.axis[0]))]:
        with pytest.raises(sl.ScheduleError) as e:
            call()
        assert str(e.value).startswith(primitive + ":") and "extern stage" in str(e.value)


def test_cache_read_for_an_extern_reader_is_refused(registered):
    A, B, C, _ = matmul_extern(registered)
    s = sl.create_schedule(C.op)
    with pytest.raises(sl.ScheduleError, match="reader 'C' is an extern stage"):
        s.cache_read(A, "local", [C])


def test_extern_input_must_be_whole(registered):
    registered("test.extern.copy", lambda x, y: np.copyto(y, x))
    A = sl.placeholder((8,), name="A")
    P = sl.compute((8,), lambda i: A[i] + 1, name="P")
    E = sl.extern((8,), [P], lambda ins, outs: sl.call_packed("test.extern.copy", ins[0], outs[0]), name="E")
    Q = sl.compute((8,), lambda i: E[i] + P[i], name="Q")
    s = sl.create_schedule(Q.op)
    s[P].compute_inline()
    with pytest.raises(sl.ScheduleError, match="needs the whole tensor"):
        sl.lower(s, [A, Q])
    s = sl.create_schedule(Q.op)
    s[P].compute_at(s[Q], Q.op.axis[0])
    with pytest.raises(sl.ScheduleError, match="stage 'E' also reads 'P'"):
        sl.lower(s, [A, Q])


def test_call_packed_argument_checks():
    A = sl.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="buffer handles"):
        sl.extern((4,), [A], lambda ins, outs: sl.call_packed("f", A, outs[0]))
    with pytest.raises(TypeError, match="must return sl.call_packed"):
        sl.extern((4,), [A], lambda ins, outs: None)
    with pytest.raises(TypeError, match="constant int/float/bool"):
        sl.extern((4,), [A], lambda ins, outs: sl.call_packed("f", ins[0], "text"))


def test_multi_output_extern_tvm_style(registered):
    """TVM's test_extern_multi_out: two outputs, handles passed as .data, a scalar."""
    m = 10
    registered("test.extern.myadd", lambda a, b, out0, out1, n: (np.add(a, b, out=out0),
                                                                  np.subtract(a, b, out=out1)))
    A = sl.placeholder((m,), name="A")
    B = sl.compute((m,), lambda i: A[i] * 10, name="B")
    res = sl.extern([A.shape, A.shape], [A, B], lambda ins, outs: sl.call_packed(
        "test.extern.myadd", ins[0].data, ins[1].data, outs[0].data, outs[1].data, m), name="E")
    assert len(res) == 2 and res[1].value_index == 1 and res[1].name == "E.v1"
    C = sl.compute((m,), lambda i: res[0][i] * res[1][i], name="C")
    s = sl.create_schedule(C.op)
    feed, [(_, c)], _ = run(s, [A, C])
    a = feed[A]
    np.testing.assert_allclose(c, (a + 10 * a) * (a - 10 * a), rtol=1e-5)
    assert_matches_reference(s, [A, C])
    feed, outs, _ = run(sl.create_schedule(res[0].op), [A, res[0], res[1]])
    np.testing.assert_allclose(outs[1][1], feed[A] - 10 * feed[A], rtol=1e-5)


def test_callback_errors_stay_with_the_calling_thread(registered):
    import threading

    def maybe_fail(x, y):
        if x[0] < 0:
            raise ValueError("negative input")
        np.copyto(y, x)

    registered("test.extern.maybe_fail", maybe_fail)
    A = sl.placeholder((4,), name="A")
    B = sl.extern(A.shape, [A], lambda ins, outs: sl.call_packed("test.extern.maybe_fail", ins[0], outs[0]), name="B")
    f = sl.build(sl.create_schedule(B.op), [A, B])
    results = {}

    def call(key, value):
        a, b = np.full(4, value, "float32"), np.zeros(4, "float32")
        try:
            for _ in range(20):
                f(a, b)
            results[key] = b.copy()
        except ValueError as e:
            results[key] = e

    threads = [threading.Thread(target=call, args=(k, v)) for k, v in (("bad", -1.0), ("good", 2.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert isinstance(results["bad"], ValueError)
    np.testing.assert_array_equal(results["good"], np.full(4, 2.0, "float32"))


# export_library of a module with packed calls: tests/api/test_export_symbolic_extern.py
