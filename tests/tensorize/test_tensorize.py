"""tensorize with decl_tensor_intrin: plain-expression intrinsics on the CPU and emulated CUDA,
the errors of a nest that does not match, and buffer binding (strides, offset_factor)."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.errors import ScheduleError


def axpy_intrin(n, scale=2.0, dtype="float32", strides=None, offset_factor=1, transposed=False):
    """c[i] = a[i] * scale + b[i] (or b read as the intrinsic declares), one vector store."""
    a = sl.placeholder((n,), dtype, name="a")
    b = sl.placeholder((n,), dtype, name="b")
    c = sl.compute((n,), lambda i: a[i] * scale + b[i], name="c")

    def body(ins, outs):
        aa, bb = ins
        vec = f"{dtype}x{n}"
        return outs[0].vstore([0], aa.vload([0], vec) * sl.const(scale, dtype) + bb.vload([0], vec))
    binds = {a: sl.decl_buffer((n,), dtype, "a", strides=strides, offset_factor=offset_factor)}
    return sl.decl_tensor_intrin(c.op, body, name="axpy", binds=binds)


def axpy_program(M=6, N=32, dtype="float32", scale=2.0):
    A = sl.placeholder((M, N), dtype, name="A")
    B = sl.placeholder((M, N), dtype, name="B")
    C = sl.compute((M, N), lambda i, j: A[i, j] * scale + B[i, j], name="C")
    return A, B, C


def run_axpy(s, A, B, C, target="llvm"):
    f = sl.build(s, [A, B, C], target=target)
    a = np.random.rand(*A.shape).astype("float32")
    b = np.random.rand(*B.shape).astype("float32")
    c = np.zeros(C.shape, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)
    return f


def test_plain_expression_intrinsic_replaces_the_inner_loop():
    A, B, C = axpy_program()
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ji, axpy_intrin(8))
    text = str(sl.lower(s, [A, B, C]))
    assert "j.inner" not in text and "ramp(" in text
    f = run_axpy(s, A, B, C)
    assert "<8 x float>" in f.ir["llvm"]          # the body's vector access, not a gather


def test_a_tail_runs_the_stage_loops_and_whole_tiles_the_intrinsic():
    A, B, C = axpy_program(M=5, N=30)
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ji, axpy_intrin(8))
    text = str(sl.lower(s, [A, B, C]))
    assert "if j.outer * 8 + 7 < 30:" in text and "else:" in text and "ramp(" in text
    run_axpy(s, A, B, C)


def test_symbolic_extent_tail():
    n = sl.var("n")
    A = sl.placeholder((3, n), name="A")
    B = sl.placeholder((3, n), name="B")
    C = sl.compute((3, n), lambda i, j: A[i, j] * 2.0 + B[i, j], name="C")
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ji, axpy_intrin(8))
    f = sl.build(s, [A, B, C])
    for cols in (8, 21):
        a, b = np.random.rand(3, cols).astype("float32"), np.random.rand(3, cols).astype("float32")
        c = np.zeros((3, cols), "float32")
        f(a, b, c)
        np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)


def test_the_step_is_recorded_and_prints():
    A, B, C = axpy_program()
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ji, axpy_intrin(8))
    assert "tensorize(" in s.to_python()
    with pytest.raises(ScheduleError, match="already tensorized"):
        s[C].tensorize(ji, axpy_intrin(8))


def _lower_with(intrin, factor=8, M=6, N=32, scale=2.0, reorder=False):
    A, B, C = axpy_program(M, N, scale=scale)
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=factor)
    if reorder:
        s[C].reorder(jo, i, ji)
    s[C].tensorize(ji, intrin)
    return sl.lower(s, [A, B, C])


@pytest.mark.parametrize("make, match", [
    (lambda: _lower_with(axpy_intrin(8), factor=4), r"extent: axis 'j' has 4 iterations in the region; the "
                                                    r"intrinsic's axis 'i' has 8"),
    (lambda: _lower_with(axpy_intrin(8, scale=3.0)), r"op: the stage has the constant 2\.0 where the intrinsic "
                                                     r"has 3\.0"),
])
def test_mismatches_name_what_differs(make, match):
    with pytest.raises(ScheduleError, match=match):
        make()


def test_dtype_mismatch():
    A = sl.placeholder((4, 16), "float64", name="A")
    B = sl.placeholder((4, 16), "float64", name="B")
    C = sl.compute((4, 16), lambda i, j: A[i, j] * 2.0 + B[i, j], name="C")
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ji, axpy_intrin(8))
    with pytest.raises(ScheduleError, match=r"dtype: the stage computes .* as float64, the intrinsic .* as float32"):
        sl.lower(s, [A, B, C])


def test_index_pattern_mismatch():
    """The stage reads B transposed; the intrinsic reads its b contiguously along its axis."""
    A = sl.placeholder((8, 8), name="A")
    B = sl.placeholder((8, 8), name="B")
    C = sl.compute((8, 8), lambda i, j: A[i, j] * 2.0 + B[j, i], name="C")
    s = sl.create_schedule(C.op)
    s[C].tensorize(C.op.axis[1], axpy_intrin(8))
    with pytest.raises(ScheduleError, match=r"index pattern: in the region the stage reads B\[i, 0\] .*"
                                            r"the intrinsic reads b\[i\]"):
        sl.lower(s, [A, B, C])


def test_reduction_axis_mismatch():
    A = sl.placeholder((8, 8), name="A")
    B = sl.placeholder((8,), name="B")
    k = sl.reduce_axis((0, 8), name="k")
    C = sl.compute((8,), lambda i: sl.sum(A[i, k] * B[k], axis=k), name="C")
    s = sl.create_schedule(C.op)
    s[C].tensorize(C.op.axis[0], axpy_intrin(8))
    with pytest.raises(ScheduleError, match="reduction axis"):
        sl.lower(s, [A, B, C])


def tile_copy_intrin(rows, cols, strides=None):
    """c[r, q] = a[r, q] * 2 + b[r, q] on a rows x cols tile, one vector access per row."""
    a = sl.placeholder((rows, cols), name="a")
    b = sl.placeholder((rows, cols), name="b")
    c = sl.compute((rows, cols), lambda r, q: a[r, q] * 2.0 + b[r, q], name="c")

    def body(ins, outs):
        vec = f"float32x{cols}"
        return [outs[0].vstore([r, 0], ins[0].vload([r, 0], vec) * sl.const(2.0) + ins[1].vload([r, 0], vec))
                for r in range(rows)]
    binds = {t: sl.decl_buffer((rows, cols), "float32", t.op.name, strides=strides) for t in (a, b, c)}
    return sl.decl_tensor_intrin(c.op, body, name="tile", binds=binds)


def test_strides_dense_handle_refuses_a_strided_tile_and_stride_vars_bind_it():
    def lowered(intrin):
        A, B, C = axpy_program(M=6, N=32)
        s = sl.create_schedule(C.op)
        io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 2, 4)
        s[C].tensorize(ii, intrin)
        return s, A, B, C
    with pytest.raises(ScheduleError, match=r"buffer 'a' has dense strides \('4', '1'\), but the region of 'A' "
                                            r"it binds lies in 'A' with strides \('32', '1'\)"):
        sl.lower(*(lambda s, *args: (s, list(args)))(*lowered(tile_copy_intrin(2, 4))))
    s, A, B, C = lowered(tile_copy_intrin(2, 4, strides=[sl.var("rs"), 1]))
    run_axpy(s, A, B, C)


def test_declared_strides_and_offset_factor():
    # a stride variable binds whatever the layout is; the int must agree
    assert "j.inner" not in str(_lower_with(axpy_intrin(8, strides=[sl.var("s")])))
    with pytest.raises(ScheduleError, match="strides"):
        _lower_with(axpy_intrin(8, strides=[2]))
    # tiles start at multiples of 8 elements: offset_factor=8 holds
    A, B, C = axpy_program(M=3, N=32)
    s = sl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ji, axpy_intrin(8, offset_factor=8))
    run_axpy(s, A, B, C)


def test_offset_factor_refuses_a_known_misaligned_start():
    A = sl.placeholder((9,), name="A")
    B = sl.placeholder((8,), name="B")
    C = sl.compute((8,), lambda j: A[j + 1] * 2.0 + B[j], name="C")
    s = sl.create_schedule(C.op)
    s[C].tensorize(C.op.axis[0], axpy_intrin(8, offset_factor=4))
    with pytest.raises(ScheduleError, match=r"buffer 'a' needs its start to be a multiple of offset_factor=4 "
                                            r"elements; the region of 'A' starts at 1"):
        sl.lower(s, [A, B, C])


def test_not_an_intrinsic():
    A, B, C = axpy_program()
    s = sl.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="tensor intrinsic"):
        s[C].tensorize(C.op.axis[1], "dot")


def test_decl_tensor_intrin_checks_its_buffers():
    a = sl.placeholder((4,), name="a")
    c = sl.compute((4,), lambda i: a[i] + 1.0, name="c")
    with pytest.raises(ValueError, match="bound to 'a'"):
        sl.decl_tensor_intrin(c.op, lambda ins, outs: outs[0].vstore([0], ins[0].vload([0], "float32x4")),
                              binds={a: sl.decl_buffer((8,), "float32", "a")})


def test_cuda_plain_intrinsic_renders_and_runs_emulated():
    """On the cuda target a plain-expression intrinsic is ordinary CUDA C (here scalar stores)."""
    n = 4
    a = sl.placeholder((n,), name="a")
    b = sl.placeholder((n,), name="b")
    c = sl.compute((n,), lambda i: a[i] * 2.0 + b[i], name="c")

    def body(ins, outs):
        return [outs[0].vstore([i], ins[0][i] * sl.const(2.0) + ins[1][i]) for i in range(n)]
    intrin = sl.decl_tensor_intrin(c.op, body, name="axpy4")
    A, B, C = axpy_program(M=5, N=64)
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=n)
    s[C].bind(i, sl.thread_axis("blockIdx.x"))
    s[C].bind(jo, sl.thread_axis("threadIdx.x"))
    s[C].tensorize(ji, intrin)
    mod = sl.build(s, [A, B, C], target="cuda")
    assert "j.inner" not in mod.ir["cuda"]
    a_np = np.random.rand(5, 64).astype("float32")
    b_np = np.random.rand(5, 64).astype("float32")
    for engine in ("simt", "shim"):
        c_np = np.zeros((5, 64), "float32")
        mod.emulate(a_np, b_np, c_np, engine=engine)
        np.testing.assert_allclose(c_np, a_np * 2 + b_np, rtol=1e-6)


def test_cuda_intrinsic_library_device_function():
    """An intrinsic of the cuda library (target/cuda/intrin/dp4a.py): the kernel calls the device
    function, whose definition NVRTC compiles to dp4a and the shim runs as plain C++."""
    from schedlang.target.cuda.intrin.dp4a import dot4_s8s8_intrin
    M, N, K = 5, 33, 12
    A = sl.placeholder((M, K), "int8", name="A")
    B = sl.placeholder((N, K), "int8", name="B")
    k = sl.reduce_axis((0, K), name="k")
    C = sl.compute((M, N), lambda i, j: sl.sum(A[i, k].astype("int32") * B[j, k].astype("int32"), axis=k), name="C")
    s = sl.create_schedule(C.op)
    i, j = C.op.axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(i, j, ko, ki)
    s[C].bind(i, sl.thread_axis("blockIdx.x"))
    s[C].bind(j, sl.thread_axis("threadIdx.x"))
    s[C].tensorize(ki, dot4_s8s8_intrin())
    mod = sl.build(s, [A, B, C], target="cuda")
    assert "sl_dot4_s8s8(" in mod.ir["cuda"] and "dp4a.s32.s32" in mod.ir["ptx"]
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (M, K)).astype("int8")
    b = rng.integers(-128, 128, (N, K)).astype("int8")
    c = np.zeros((M, N), "int32")
    mod.emulate(a, b, c, engine="shim")
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32").T)
    with pytest.raises(sl.LoweringError, match="engine='shim'"):
        mod.emulate(a, b, c, engine="simt")


def test_buffer_scope_binds_a_cache_stage_and_refuses_global_memory():
    a = sl.placeholder((8,), name="a")
    b = sl.placeholder((8,), name="b")
    c = sl.compute((8,), lambda i: a[i] * 2.0 + b[i], name="c")

    def body(ins, outs):
        return outs[0].vstore([0], ins[0].vload([0], "float32x8") * sl.const(2.0) + ins[1].vload([0], "float32x8"))
    intrin = sl.decl_tensor_intrin(c.op, body, name="axpy_local", binds={a: sl.decl_buffer((8,), "float32", "a",
                                                                                            scope="local")})

    def schedule(stage_a_locally):
        A, B, C = axpy_program(M=5, N=30)
        s = sl.create_schedule(C.op)
        jo, ji = s[C].split(C.op.axis[1], factor=8)
        if stage_a_locally:
            s[s.cache_read(A, "local", [C])].compute_at(s[C], jo)
        s[C].tensorize(ji, intrin)
        return s, A, B, C
    s, A, B, C = schedule(False)
    with pytest.raises(ScheduleError, match="buffer 'a' must be in 'local' memory; 'A' is global"):
        sl.lower(s, [A, B, C])
    run_axpy(*schedule(True))
