"""schedlang.topi: every algorithm against numpy, every CPU schedule on odd shapes (bounds-checked
builds, tails in every split), the GPU schedules through the CUDA emulator, and the errors for
tensors a schedule does not fit."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.topi import cpu, cuda, nn
from tests.helpers import assert_close, emulate_and_check, run


def ph(shape, name, dtype="float32"):
    return sl.placeholder(shape, dtype, name=name)


def np_conv2d(x, w, pad):
    """NCHW conv2d, stride 1, from shifted slices (float64)."""
    n, c, h, wd = x.shape
    f, _, r, q = w.shape
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - r + 1, wd + 2 * pad - q + 1
    out = np.zeros((n, f, oh, ow))
    for dy in range(r):
        for dx in range(q):
            out += np.einsum("nchw,fc->nfhw", p[:, :, dy:dy + oh, dx:dx + ow], w[:, :, dy, dx])
    return out


def np_softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_silu_and_mul(x):
    d = x.shape[1] // 2
    a = x[:, :d].astype(np.float64)
    return a / (1 + np.exp(-a)) * x[:, d:]


def check(s, args, want_fn):
    """Build s (bounds-checked and not: tests/helpers.run), compare its one output with numpy."""
    feed, outputs, mod = run(s, args)
    (t, got), = outputs
    want = want_fn(*(feed[a] for a in args if a in feed))
    assert_close(got, np.asarray(want, t.dtype_obj.numpy), str(t.dtype), rtol=1e-4, name=t.name)
    return mod


# -- the algorithms, default schedule ---------------------------------------------------------

def matmul_case():
    A, B = ph((9, 7), "A"), ph((7, 5), "B")
    return [A, B, nn.matmul(A, B)], lambda a, b: a.astype(np.float64) @ b


def packed_case():
    A, B = ph((9, 7), "A"), ph((7, 12), "B")
    return [A, B, nn.matmul_packed(A, B, 4)], lambda a, b: a.astype(np.float64) @ b


def batch_case():
    A, B = ph((3, 5, 7), "A"), ph((3, 7, 6), "B")
    return [A, B, nn.batch_matmul(A, B)], lambda a, b: a.astype(np.float64) @ b


def conv_case():
    X, W = ph((2, 3, 6, 7), "X"), ph((4, 3, 3, 2), "W")          # a non-square kernel
    return [X, W, nn.conv2d_nchw(X, W, pad=2)], lambda x, w: np_conv2d(x, w, 2)


def conv_nchwc_case():
    ic, oc = 2, 4
    X, W = ph((1, 3, 5, 6, ic), "X"), ph((2, 3, 3, 3, ic, oc), "W")

    def want(x, w):     # back to NCHW / FCRS, numpy's conv, blocked again
        xn = x.transpose(0, 1, 4, 2, 3).reshape(1, 3 * ic, 5, 6)
        wn = w.transpose(0, 5, 1, 4, 2, 3).reshape(2 * oc, 3 * ic, 3, 3)
        return np_conv2d(xn, wn, 1).reshape(1, 2, oc, 5, 6).transpose(0, 1, 3, 4, 2)
    return [X, W, nn.conv2d_nchwc(X, W, pad=1)], want


def softmax_case():
    X = ph((5, 11), "X")
    return [X, nn.softmax(X)], np_softmax


def silu_case():
    x = ph((3, 14), "x")
    return [x, nn.silu_and_mul(x)], np_silu_and_mul


def reduce_case(reducer):
    def case():
        X = ph((4, 9), "X")
        return [X, nn.row_reduce(X, reducer)], lambda x: getattr(np, reducer)(x.astype(np.float64), axis=1)
    return case


ALGORITHMS = {"matmul": matmul_case, "matmul_packed": packed_case, "batch_matmul": batch_case,
              "conv2d_nchw": conv_case, "conv2d_nchwc": conv_nchwc_case, "softmax": softmax_case,
              "silu_and_mul": silu_case, "row_sum": reduce_case("sum"), "row_max": reduce_case("max"),
              "row_min": reduce_case("min")}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_algorithm_matches_numpy(name):
    args, want = ALGORITHMS[name]()
    check(sl.create_schedule(args[-1].op), args, want)


def test_matmul_out_dtype_accumulates_float16_in_float32():
    A, B = ph((6, 8), "A", "float16"), ph((8, 5), "B", "float16")
    C = nn.matmul(A, B, out_dtype="float32")
    assert C.dtype == "float32"
    check(sl.create_schedule(C.op), [A, B, C], lambda a, b: a.astype(np.float64) @ b.astype(np.float64))


# -- CPU schedules, odd shapes -------------------------------------------------------------------

def packed_program(M, N, K, bn):
    A, B = ph((M, K), "A"), ph((K, N), "B")
    return A, B, nn.matmul_packed(A, B, bn)


@pytest.mark.parametrize("parallel", [True, False])
def test_cpu_matmul_packed_odd_rows_and_k(parallel):
    A, B, C = packed_program(37, 24, 13, 8)
    s = cpu.schedule_matmul_packed(sl.create_schedule(C.op), C, parallel=parallel)
    mod = check(s, [A, B, C], lambda a, b: a.astype(np.float64) @ b)
    assert ("workers" in mod.ir["kernel"]) == parallel


def test_cpu_matmul_register_tiled_odd_rows():
    A, B, C = packed_program(37, 32, 13, 16)
    s = cpu.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, mr=4)
    check(s, [A, B, C], lambda a, b: a.astype(np.float64) @ b)


@pytest.mark.parametrize("lanes", [0, 8])
def test_cpu_conv2d_nchw_tails_in_filters_and_columns(lanes):
    X, W = ph((1, 3, 7, 9), "X"), ph((6, 3, 3, 3), "W")
    out = nn.conv2d_nchw(X, W)
    s = cpu.schedule_conv2d_nchw(sl.create_schedule(out.op), out, filters=4, lanes=lanes)
    check(s, [X, W, out], lambda x, w: np_conv2d(x, w, 1))


@pytest.mark.parametrize("wt, vecs, lanes, inline_pad", [(4, 2, 0, False), (7, 1, 8, True), (3, 3, 4, True)])
def test_cpu_conv2d_nchwc_tails(wt, vecs, lanes, inline_pad):
    X, W = ph((1, 5, 9, 11), "X"), ph((20, 5, 3, 3), "W")
    out = nn.conv2d_nchw(X, W)
    s = cpu.schedule_conv2d_nchwc(sl.create_schedule(out.op), out, wt=wt, vecs=vecs, lanes=lanes, inline_pad=inline_pad)
    check(s, [X, W, out], lambda x, w: np_conv2d(x, w, 1))


@pytest.mark.parametrize("wt, inline_pad", [(4, True), (3, False)])
def test_cpu_conv2d_nchwc_on_the_blocked_algorithm(wt, inline_pad):
    args, want = conv_nchwc_case()                  # 6 output columns: a tail of the wt split
    X, W, out = args
    s = cpu.schedule_conv2d_nchwc(sl.create_schedule(out.op), out, wt=wt, inline_pad=inline_pad)
    mod = check(s, args, want)
    # per step: an input value broadcast to the block's 4 channels, times a vector of weights
    assert "conv.local[ramp(0, 1, 4)] = conv.local[ramp(0, 1, 4)] + x4(" in mod.ir["kernel"]


@pytest.mark.parametrize("vector_reductions, exp_at_row", [(False, False), (True, False), (True, True)])
def test_cpu_softmax_odd_rows(vector_reductions, exp_at_row):
    X = ph((5, 37), "X")
    out = nn.softmax(X)
    s = cpu.schedule_softmax(sl.create_schedule(out.op), out, factor=8, vector_reductions=vector_reductions,
                             exp_at_row=exp_at_row)
    check(s, [X, out], np_softmax)


def test_cpu_silu_and_mul_and_injective_chain():
    x = ph((5, 38), "x")
    out = nn.silu_and_mul(x)
    check(cpu.schedule_silu_and_mul(sl.create_schedule(out.op), out), [x, out], np_silu_and_mul)
    A = ph((3, 4, 21), "A")                               # a 3-d chain of three stages, all inlined
    e = sl.compute(A.shape, lambda i, j, k: sl.exp(A[i, j, k]), name="e")
    t = sl.compute(A.shape, lambda i, j, k: e[i, j, k] * 2.0, name="t")
    y = sl.compute(A.shape, lambda i, j, k: t[i, j, k] + A[i, j, k], name="y")
    s = cpu.schedule_injective(sl.create_schedule(y.op), y, factor=8)
    assert s[e].attach_type == s[t].attach_type == "inline"
    check(s, [A, y], lambda a: np.exp(a.astype(np.float64)) * 2 + a)


def test_cpu_row_reduce_rfactor():
    X = ph((7, 29), "X")
    Y = nn.row_reduce(X)
    mod = check(cpu.schedule_row_reduce(sl.create_schedule(Y.op), Y, factor=8), [X, Y],
                lambda x: x.astype(np.float64).sum(axis=1))
    assert "Y.rf" in mod.ir["tile"]


@pytest.mark.parametrize("cpu_name, lanes", [("haswell", 8), ("skylake-avx512", 16)])
def test_cpu_vector_width_comes_from_the_target(cpu_name, lanes):
    target = sl.Target.create(f"llvm -mcpu={cpu_name}")
    assert cpu.native_lanes(target) == lanes and cpu.native_lanes(target, "float64") == lanes // 2
    x = ph((4, 64), "x")
    out = nn.silu_and_mul(x)
    ll = sl.build(cpu.schedule_silu_and_mul(sl.create_schedule(out.op), out, target), [x, out],
                  target=target).get_source("ll")
    assert f"<{lanes} x float>" in ll and f"<{2 * lanes} x float>" not in ll


# -- GPU schedules through the emulator -------------------------------------------------------

def gemm(M, N, K):
    A, B = ph((M, K), "A"), ph((K, N), "B")
    return A, B, nn.matmul(A, B)


def gpu_cases():
    def shared():
        A, B, C = gemm(21, 19, 13)
        return cuda.schedule_matmul_shared(sl.create_schedule(C.op), C, (4, 8), 4, local_a=True), [A, B, C]

    def register_tiled():
        A, B, C = gemm(37, 35, 13)
        s = cuda.schedule_matmul_register_tiled(sl.create_schedule(C.op), C, tile=16, threads=4, vthreads=2, k_tile=4,
                                                fetch_vector=2, unroll_k=True)
        return s, [A, B, C]

    def batch():
        A, B = ph((2, 9, 7), "A"), ph((2, 7, 10), "B")
        C = nn.batch_matmul(A, B)
        return cuda.schedule_batch_matmul(sl.create_schedule(C.op), C, (4, 8), 4), [A, B, C]

    def conv():
        X, W = ph((1, 3, 7, 9), "X"), ph((5, 3, 3, 3), "W")
        out = nn.conv2d_nchw(X, W)
        return cuda.schedule_conv2d_nchw(sl.create_schedule(out.op), out), [X, W, out]

    def row_reduce():
        X = ph((5, 70), "X")
        Y = nn.row_reduce(X, "max")
        return cuda.schedule_row_reduce(sl.create_schedule(Y.op), Y, threads=32, rows_per_block=2), [X, Y]

    def softmax():
        X = ph((3, 45), "X")
        Y = nn.softmax(X)
        return cuda.schedule_softmax(sl.create_schedule(Y.op), Y, threads=32), [X, Y]

    def silu():
        x = ph((3, 2 * 37), "x")
        out = nn.silu_and_mul(x)
        return cuda.schedule_silu_and_mul(sl.create_schedule(out.op), out, threads=8, lanes=4), [x, out]
    return {"matmul_shared": shared, "matmul_register_tiled": register_tiled, "batch_matmul": batch,
            "conv2d_nchw": conv, "row_reduce": row_reduce, "softmax": softmax, "silu_and_mul": silu}


GPU = gpu_cases()


@pytest.mark.parametrize("name", sorted(GPU))
def test_gpu_schedule_matches_the_reference_on_odd_shapes(name):
    pytest.importorskip("cuda.bindings")
    emulate_and_check(*GPU[name]())


# -- errors --------------------------------------------------------------------------------------

def test_algorithms_refuse_mismatched_shapes():
    with pytest.raises(ValueError, match="matmul: A's columns and B's rows differ: 7 and 6"):
        nn.matmul(ph((3, 7), "A"), ph((6, 2), "B"))
    with pytest.raises(ValueError, match=r"B's columns \(10\) must be a constant multiple of the panel width bn=4"):
        nn.matmul_packed(ph((3, 7), "A"), ph((7, 10), "B"), 4)
    with pytest.raises(ValueError, match=r"softmax: X \(x\) must have 2 dimensions, got shape \(3, 7, 2\)"):
        nn.softmax(ph((3, 7, 2), "x"), name="s")
    with pytest.raises(ValueError, match="x's last extent must be an even constant, got 7"):
        nn.silu_and_mul(ph((3, 7), "x"))
    with pytest.raises(ValueError, match="unknown reducer 'mean'"):
        nn.row_reduce(ph((3, 7), "X"), "mean")
    with pytest.raises(ValueError, match="pad must be an int >= 0"):
        nn.conv2d_nchw(ph((1, 2, 5, 5), "X"), ph((3, 2, 3, 3), "W"), pad=-1)
    with pytest.raises(TypeError, match="matmul: A must be a Tensor"):
        nn.matmul(np.zeros((2, 2)), ph((2, 2), "B"))


def test_schedules_refuse_other_algorithms():
    A, B, C = gemm(8, 8, 8)
    s = sl.create_schedule(C.op)
    with pytest.raises(ValueError, match="schedule_matmul_packed: cannot find matmul_packed's packedB among the inputs of C"):
        cpu.schedule_matmul_packed(s, C)
    with pytest.raises(ValueError, match="schedule_softmax: C is not the output of nn.softmax"):
        cpu.schedule_softmax(s, C)
    with pytest.raises(ValueError, match="schedule_injective: the stages must be elementwise"):
        cpu.schedule_injective(s, C)
    with pytest.raises(ValueError, match=r"tile \(16\) must be a multiple of threads \* vthreads \(3 \* 2\)"):
        cuda.schedule_matmul_register_tiled(s, C, tile=16, threads=3)
    X = ph((4, 8), "X")
    with pytest.raises(ValueError, match="schedule_matmul_shared: X is not a matmul's output"):
        cuda.schedule_matmul_shared(sl.create_schedule(X.op), X)


def test_a_block_over_the_thread_limit_is_refused_at_build():
    A, B, C = gemm(64, 64, 8)
    s = cuda.schedule_matmul_shared(sl.create_schedule(C.op), C, block=(64, 32))     # 2048 threads a block
    with pytest.raises((sl.ScheduleError, sl.LoweringError), match="1024"):
        sl.build(s, [A, B, C], target="cuda")
