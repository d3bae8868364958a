"""emulate(engine="shim") checks every access of an argument or global temporary (on by
default): an out-of-bounds gather raises the IndexError engine="simt" raises, instead of
reading or writing the interpreter's memory (today: a segfault that ends the process)."""
import numpy as np
import pytest

import schedlang as sl
from tests.safety.child import run_child

pytest.importorskip("cuda.bindings")

GATHER = """
import numpy as np
import schedlang as sl

def gather(n=64, m=16, lanes=1):
    A = sl.placeholder((m,), name="A")
    I = sl.placeholder((n // lanes,), "int32", name="I")
    B = sl.compute((n,), lambda i: A[I[i // lanes] * lanes + i % lanes] * 2.0, name="B")
    s = sl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(xo, sl.thread_axis("blockIdx.x"))
    s[B].bind(xi, sl.thread_axis("threadIdx.x"))
    return sl.build(s, [A, I, B], target="cuda")
"""


def _gather(**kw):
    scope: dict = {}
    exec(GATHER, scope)
    return scope["gather"](**kw)


def _error(mod, *arrays, **options) -> str:
    with pytest.raises(IndexError) as info:
        mod.emulate(*arrays, **options)
    return str(info.value)


def test_an_out_of_bounds_gather_raises_the_simt_engines_error_instead_of_crashing():
    out = run_child(GATHER + """
mod = gather()
a = np.arange(16, dtype="float32")
idx = (np.arange(64) % 16).astype("int32")
idx[37] = 100_000_000          # far outside A: the unchecked shim writes a segfault
for engine in ("simt", "shim"):
    try:
        mod.emulate(a, idx, np.zeros(64, "float32"), engine=engine)
        print(engine, "no error")
    except IndexError as e:
        print(engine, str(e).split("accesses ", 1)[1])
""", timeout=300)
    simt, shim = (line.split(" ", 1)[1] for line in out.splitlines())
    assert shim == simt == ("global buffer 'A' at index 100000000, outside its 16 elements, "
                            "in thread (5, 0, 0) of block (1, 0, 0)")


def test_the_first_access_outside_is_reported_and_memory_is_untouched():
    mod = _gather()
    a = np.arange(16, dtype="float32")
    for bad in (-1, 16):
        idx = (np.arange(64) % 16).astype("int32")
        idx[3] = bad
        b = np.zeros(64, "float32")
        message = _error(mod, a, idx, b)
        assert message.startswith("kernel B_kernel: accesses global buffer 'A'")
        assert f"at index {bad}, outside its 16 elements, in thread (3, 0, 0) of block (0, 0, 0)" in message
    idx = (np.arange(64) % 16).astype("int32")
    b = np.zeros(64, "float32")
    mod.emulate(a, idx, b)                       # a good call after a bad one: no error left over
    np.testing.assert_array_equal(b, a[idx] * 2)


def test_an_unchecked_build_is_still_available():
    mod = _gather()
    a, idx, b = np.arange(16, dtype="float32"), (np.arange(64) % 16).astype("int32"), np.zeros(64, "float32")
    mod.emulate(a, idx, b, bounds_check=False)
    np.testing.assert_array_equal(b, a[idx] * 2)
    assert "checked" not in mod.get_source("cuda")        # the CUDA C for NVRTC is unchanged
    with pytest.raises(TypeError, match="bounds_check must be True or False"):
        mod.emulate(a, idx, b, bounds_check="yes")


def test_a_vector_access_past_the_end_is_caught():
    """A float4 load that starts inside the array and ends outside it."""
    n = 64
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = sl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    to, ti = s[B].split(xo, factor=16)
    s[B].bind(to, sl.thread_axis("blockIdx.x"))
    s[B].bind(ti, sl.thread_axis("threadIdx.x"))
    s[B].vectorize(xi)
    mod = sl.build(s, [A, B], target="cuda")
    assert "*(const float4*)(A + " in mod.get_source("cuda")
    a = np.arange(n, dtype="float32")
    b = np.zeros(n, "float32")
    mod.emulate(a, b)
    np.testing.assert_array_equal(b, a + 1)
    # emulate() checks shapes before any kernel runs, so call the checked library directly and
    # tell it that A has 62 elements: the last thread's float4 load then ends outside A.
    from schedlang.target.cuda import shim
    library = shim.build(shim.checked_source(mod.ir["cuda"]), shim.driver_source(mod.kernel_ir, True), None)
    extents = np.array([n - 2, n], np.int64)      # A is told to have 62 elements
    with pytest.raises(IndexError, match=r"global buffer 'A' at index 60 \(a 4-element vector access\), "
                                         r"outside its 62 elements"):
        shim.run_in_process(library, [a.ctypes.data, b.ctypes.data, extents.ctypes.data])


def test_shared_and_local_arrays_are_checked_too():
    """A shared tile written one row too far (the CUDA C edited to go wrong: a correct
    schedule never does) is reported with its scope, as engine="simt" reports it."""
    from schedlang.target.cuda import shim
    from tests.target.cuda import schedules
    from tests.target.cuda.schedules import arrays_for
    s, args = schedules.shared_gemm(M=20, N=21, K=19, block=(4, 8), k_tile=4, local_a=True)
    mod = sl.build(s, args, target="cuda")
    source = shim.checked_source(mod.ir["cuda"])
    assert 'sl_shim::checked<float> A_shared{A_shared_sl_storage, 16, "A_shared", "shared"};' in source
    assert 'sl_shim::checked<float> C_local{C_local_sl_storage, 1, "C_local", "local"};' in source
    wrong = source.replace("A_shared[i_inner * 8 + j_inner] =", "A_shared[i_inner * 8 + j_inner + 9] =")
    assert wrong != source
    library = shim.build(wrong, shim.driver_source(mod.kernel_ir, True), None)
    arrays, _ = arrays_for(s, args)
    extents = shim.extents(arrays)      # (kept alive through the call)
    with pytest.raises(IndexError, match=r"kernel C_kernel: accesses shared buffer 'A_shared' at index (1[6-9]|2[0-4]), "
                                         r"outside its 16 elements, in thread \(\d, [01], 0\) of block"):
        shim.run_in_process(library, [x.ctypes.data for x in arrays] + [extents.ctypes.data])


def test_the_sanitizer_builds_check_bounds_too():
    mod = _gather()
    a = np.arange(16, dtype="float32")
    idx = (np.arange(64) % 16).astype("int32")
    idx[40] = 1 << 20
    message = _error(mod, a, idx, np.zeros(64, "float32"), sanitize="undefined")
    assert "global buffer 'A' at index 1048576, outside its 16 elements, in thread (8, 0, 0) of block (1, 0, 0)" \
        in message
