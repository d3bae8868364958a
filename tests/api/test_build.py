"""The public API: build(), the module's argument checks, lower() levels and IR text."""
import numpy as np
import pytest

import schedlang as sl
from tests import programs


@pytest.fixture(scope="module")
def gemm_module():
    A, B, C = programs.gemm(8, 12, 4)
    s = sl.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    return sl.build(s, [A, B, C]), (A, B, C)


def arrays():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((8, 4)).astype("float32"), rng.standard_normal((4, 12)).astype("float32"),
            np.zeros((8, 12), "float32"))


def test_module_runs_and_keeps_every_level(gemm_module):
    mod, _ = gemm_module
    a, b, c = arrays()
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert set(mod.ir) == {"tensor", "loop", "tile", "kernel", "llvm", "llvm.opt"}
    assert mod.ir["llvm.opt"] == mod.get_source("ll.opt")
    assert mod.ir["llvm"] == mod.get_source() and "define i32 @C(ptr" in mod.get_source()
    assert "vfmadd" in mod.get_source("asm") or "fma" in mod.get_source("ll.opt")
    with pytest.raises(ValueError, match="unknown source format"):
        mod.get_source("ptx")


def test_torch_tensors_without_copies(gemm_module):
    torch = pytest.importorskip("torch")
    mod, _ = gemm_module
    a, b, _ = arrays()
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    tc = torch.zeros(8, 12)
    mod(ta, tb, tc)
    torch.testing.assert_close(tc, ta @ tb, rtol=1e-5, atol=1e-5)


def test_wrong_number_of_arguments(gemm_module):
    mod, _ = gemm_module
    a, b, c = arrays()
    with pytest.raises(TypeError, match="takes 3 arrays"):
        mod(a, b)


def test_wrong_dtype(gemm_module):
    mod, _ = gemm_module
    a, b, c = arrays()
    with pytest.raises(TypeError, match="'A' must have dtype float32, got float64"):
        mod(a.astype("float64"), b, c)


def test_wrong_shape(gemm_module):
    mod, _ = gemm_module
    a, b, c = arrays()
    with pytest.raises(ValueError, match=r"'B' must have shape \(4, 12\), got \(12, 4\)"):
        mod(a, b.T.copy(), c)


def test_not_contiguous(gemm_module):
    mod, _ = gemm_module
    a, b, c = arrays()
    wide = np.zeros((8, 24), "float32")
    with pytest.raises(ValueError, match="not C-contiguous"):
        mod(a, b, wide[:, ::2])


def test_not_an_array(gemm_module):
    mod, _ = gemm_module
    a, b, c = arrays()
    with pytest.raises(TypeError, match="numpy array or a CPU torch tensor"):
        mod(a.tolist(), b, c)


def test_read_only_output(gemm_module):
    mod, _ = gemm_module
    a, b, c = arrays()
    c.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        mod(a, b, c)


def test_output_overlapping_input():
    A = sl.placeholder((16,), name="A")
    B = sl.compute((16,), lambda i: A[i] + 1.0, name="B")
    mod = sl.build(sl.create_schedule(B.op), [A, B])
    buf = np.zeros(20, "float32")
    with pytest.raises(ValueError, match="overlap"):
        mod(buf[:16], buf[4:])


def test_overlap_checked_for_outputs_only():
    """Inputs may share memory; an output overlapping any input, before or after it in the
    argument order, is refused, the two named in argument order."""
    A = sl.placeholder((16,), name="A")
    B = sl.placeholder((16,), name="B")
    C = sl.compute((16,), lambda i: A[i] + B[i], name="C")
    D = sl.compute((16,), lambda i: A[i] * B[i], name="D")
    mod = sl.build(sl.create_schedule([C.op, D.op]), [A, B, C, D])
    x = np.arange(16, dtype="float32")
    c, d = np.zeros(16, "float32"), np.zeros(16, "float32")
    mod(x, x, c, d)                                  # one array as both inputs
    np.testing.assert_allclose(c, 2 * x)
    np.testing.assert_allclose(d, x * x)
    buf = np.zeros(24, "float32")
    with pytest.raises(ValueError, match="'B' and 'C' overlap"):
        mod(x, buf[:16], buf[8:], d)
    with pytest.raises(ValueError, match="'C' and 'D' overlap"):
        mod(x, x, buf[:16], buf[8:])


def test_lower_levels():
    A, B, C = programs.gemm(4, 4, 4)
    s = sl.create_schedule(C.op)
    assert sl.lower(s, [A, B, C]).startswith("func C(")
    assert "Reduction" in sl.lower(s, [A, B, C], level="tensor")
    assert sl.lower(s, [A, B, C], level="kernel").startswith("module C(")
    everything = sl.lower(s, [A, B, C], level="all")
    for name in ("tensor", "loop", "tile", "kernel"):
        assert f"# ---- {name} IR ----" in everything
    with pytest.raises(ValueError, match="unknown IR level"):
        sl.lower(s, [A, B, C], level="asm")


def test_build_argument_errors():
    A, B, C = programs.gemm(4, 4, 4)
    s = sl.create_schedule(C.op)
    with pytest.raises(ValueError, match="input 'B' is read by the program but missing"):
        sl.build(s, [A, C])
    with pytest.raises(ValueError, match="output 'C' is not in the argument list"):
        sl.build(s, [A, B])
    with pytest.raises(ValueError, match="listed twice"):
        sl.build(s, [A, B, C, A])
    with pytest.raises(TypeError, match="expected a schedule"):
        sl.build(C, [A, B, C])
    with pytest.raises(ValueError, match="unknown target"):
        sl.build(s, [A, B, C], target="opencl")


def test_bind_is_rejected_on_llvm():
    A, B, C = programs.gemm(8, 8, 8)
    s = sl.create_schedule(C.op)
    s[C].bind(C.op.axis[0], sl.thread_axis("blockIdx.x"))
    with pytest.raises(sl.ScheduleError, match="bind: stage 'C', axis 'i'.*llvm"):
        sl.build(s, [A, B, C])
    # ... but the Kernel IR for a GPU shows the launch geometry.
    kernel = sl.lower(s, [A, B, C], level="kernel", target="cuda")
    assert "launch(blockIdx.x(i: 8))" in kernel


def test_duplicate_names_are_made_unique():
    A = sl.placeholder((4,), name="A")
    T1 = sl.compute((4,), lambda i: A[i] + 1.0)
    T2 = sl.compute((4,), lambda i: T1[i] * 2.0)
    s = sl.create_schedule(T2.op)
    assert [st.name for st in s.stages] == ["A", "compute", "compute_1"]
    mod = sl.build(s, [A, T2])
    a, out = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, (a + 1) * 2)


@pytest.mark.parametrize("options", [{"threading": "serial"}, {"num_threads": 1}, {"num_threads": 2}])
def test_parallel_runtime_options(options):
    A = sl.placeholder((64, 33), name="A")
    B = sl.compute((64, 33), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = sl.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    target = sl.Target.create("llvm").with_options(**options)
    mod = sl.build(s, [A, B], target=target)
    assert ("GOMP_parallel" in mod.get_source()) == (options.get("threading") != "serial" and mod.parallel_runtime is not None)
    a, b = np.arange(64 * 33, dtype="float32").reshape(64, 33), np.zeros((64, 33), "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


def test_target_checks_its_fields():
    with pytest.raises(ValueError, match="unknown threading"):
        sl.Target("llvm", threading="tbb")
    host = sl.Target.create("llvm")     # tests/target/test_target.py checks the host target itself
    assert host.cpu and host.vector_bits is not None


def test_tensors_beyond_32_bit_indices_are_refused():
    A = sl.placeholder((1 << 16, 1 << 15), name="A")
    B = sl.compute(A.shape, lambda i, j: A[i, j] + 1.0, name="B")
    with pytest.raises(ValueError, match="2\\*\\*31 - 1 elements"):
        sl.build(sl.create_schedule(B.op), [A, B])


def test_names_that_are_not_identifiers_build():
    """Stage and buffer names are free text ("0.weight" from nn.Sequential, spaces): the
    LLVM code gets identifiers of its own (a leading digit is prefixed), and computes."""
    A = sl.placeholder((8,), name="0.weight")
    B = sl.compute((8,), lambda i: A[i] * 2, name="1 out-put")
    s = sl.create_schedule(B.op)
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    sl.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, a * 2)
