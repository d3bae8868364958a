"""The SIMT engine (mod.emulate(..., engine="simt")): the GPU programs the CUDA tests run through
the shim, interpreted from Kernel IR against the reference evaluator; access and race checks."""
import dataclasses

import numpy as np
import pytest

import schedlang as sl
from schedlang.expr.nodes import Binary, Broadcast, Buffer, Call, Cast, Compare, Const, Load, Ramp, Var
from schedlang.kernel.nodes import Kernel, KernelModule, LaunchAxis, LaunchKind
from schedlang.loop.nodes import Barrier, IfThen, Let, Seq, Store
from schedlang.target.simt import GlobalMemoryRace, SharedMemoryRace, run_module
from tests.helpers import emulate_and_check
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for

pytest.importorskip("cuda.bindings")


PROGRAMS = {
    "elementwise_tail": lambda: schedules.elementwise(1000, 64),
    "silu_and_mul": lambda: schedules.silu_and_mul(),
    "tiled_gemm": lambda: schedules.tiled_gemm(),
    "row_sum": lambda: schedules.row_sum(),
    "shared_gemm": lambda: schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4),
    "shared_gemm_odd": lambda: schedules.shared_gemm(70, 50, 30),
    "shared_gemm_local_a": lambda: schedules.shared_gemm(33, 18, 21, local_a=True),
    "vthread_gemm": lambda: schedules.vthread_gemm(37, 35, 13),
    "row_sum_cross_thread": lambda: schedules.row_reduce(rows=5, cols=100, threads=32),
    "row_max_cross_thread_2d": lambda: schedules.row_reduce(rows=7, cols=300, threads=128, reducer="max",
                                                            rows_per_block=2),
    "row_min_8_threads": lambda: schedules.row_reduce(rows=9, cols=37, threads=8, reducer="min"),
    "store_predicate": lambda: schedules.row_reduce(rows=5, cols=70, threads=64, store_predicate=True),
    "softmax_fused": lambda: schedules.softmax(rows=6, cols=70),
    "softmax_unfused": lambda: schedules.softmax(rows=5, cols=45, fused=False),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gpu_programs_against_the_reference(name):
    emulate_and_check(*PROGRAMS[name](), engine="simt")


def test_float16_int_and_double_arithmetic():
    """half computed in float and rounded when stored; floordiv/floormod on negative ints; int8 wraps."""
    emulate_and_check(*schedules.mixed_dtypes(), engine="simt")


def test_two_kernels_through_a_global_temporary():
    mod = emulate_and_check(*schedules.two_kernels(), engine="simt")
    assert mod.kernels == ["C_B", "C_kernel"]


def test_same_results_as_the_shim_bit_for_bit_on_float32_gemm():
    """Both engines compute in float32 in the same order, so their outputs are identical."""
    s, args = schedules.shared_gemm(33, 18, 21)
    mod = sl.build(s, args, target="cuda")
    a, _ = arrays_for(s, args)
    b, _ = arrays_for(s, args)
    mod.emulate(*a, engine="simt")
    mod.emulate(*b, engine="shim")
    np.testing.assert_array_equal(a[2], b[2])


def test_missing_barrier_is_a_race(monkeypatch):
    """The shared GEMM built without the barrier pass: lockstep execution alone would give the right
    result, the race check names the buffer and the statement."""
    from schedlang.target.cuda.backend import BACKEND
    passes = BACKEND.kernel_passes
    monkeypatch.setattr(BACKEND, "kernel_passes", lambda target: [p for p in passes(target) if p[0] != "insert_barriers"])
    s, args = schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4)
    mod = sl.build(s, args, target="cuda", cache=False)
    assert "__syncthreads" not in mod.get_source()
    arrays, _ = arrays_for(s, args)
    with pytest.raises(SharedMemoryRace, match=r"race on '[AB]\.shared' .*C\.local\[0\] = C\.local\[0\] \+ "
                       r".*with no barrier between them"):
        mod.emulate(*arrays, engine="simt")


def test_an_out_of_bounds_access_names_buffer_index_and_thread():
    """The elementwise kernel with its tail guard taken away: the last block's threads 36..63 read past
    A, an IndexError naming the buffer, the index, the thread and the block."""
    s, args = schedules.elementwise(100, 64)
    mod = sl.build(s, args, target="cuda")
    m = mod.kernel_ir
    k = m.kernels[0]
    assert isinstance(k.body, IfThen)
    unguarded = dataclasses.replace(m, kernels=(Kernel(k.name, k.params, k.launch, k.body.then_body),))
    a, b = arrays_for(s, args)[0]
    with pytest.raises(IndexError, match=r"global buffer 'A' at index 100, outside its 100 elements, in "
                       r"thread \(36, 0, 0\) of block \(1, 0, 0\)"):
        run_module(unguarded, [a, b])


def test_a_barrier_reached_by_part_of_a_block_is_an_error():
    s, args = schedules.elementwise(100, 64)
    m = sl.build(s, args, target="cuda").kernel_ir
    k = m.kernels[0]
    guard = k.body
    divergent = IfThen(guard.cond, Seq((guard.then_body, Barrier())))
    bad = dataclasses.replace(m, kernels=(Kernel(k.name, k.params, k.launch, divergent),))
    a, b = arrays_for(s, args)[0]
    with pytest.raises(sl.LoweringError, match=r"a barrier is reached by 36 of the 64 threads of a block "
                       r"\(thread \(36, 0, 0\) of block \(1, 0, 0\) does not reach it\)"):
        run_module(bad, [a, b])


def test_torch_cpu_tensors_and_bad_options():
    torch = pytest.importorskip("torch")
    s, args = schedules.elementwise(300, 64)
    mod = sl.build(s, args, target="cuda")
    a = torch.randn(300)
    b = torch.zeros(300)
    mod.emulate(a, b, engine="simt")
    np.testing.assert_allclose(b.numpy(), np.exp(a.numpy()) * 2, rtol=1e-6)
    with pytest.raises(ValueError, match="profile=True needs engine='simt'"):
        mod.emulate(a, b, profile=True)
    with pytest.raises(ValueError, match="always checks shared-memory races"):
        mod.emulate(a, b, engine="simt", sanitize="thread")


def test_vector_loads_and_stores_with_a_lane_predicate():
    """Kernel IR written by hand (the CUDA renderer has no float4 yet): each thread loads 4 floats as a
    Ramp, masked past element 250, and stores twice them; a warp's float4 access touches 16 sectors."""
    f32, i32 = sl.dtypes.DType("float", 32), sl.dtypes.DType("int", 32)
    A, B = Buffer("A", (256,), f32), Buffer("B", (256,), f32)
    bx, tx = Var("bx", i32), Var("tx", i32)
    launch = (LaunchAxis("blockIdx.x", bx, 2, LaunchKind.BLOCK), LaunchAxis("threadIdx.x", tx, 32, LaunchKind.THREAD))
    index = Ramp((bx * 32 + tx) * 4, Const(1), 4)
    keep = Compare("lt", index, Broadcast(Const(250), 4))
    value = Binary("mul", Load(A, (index,), keep), Broadcast(Const(2.0, f32), 4))
    module = KernelModule("vec", (A, B), (), (Kernel("vec", (A, B), launch, Store(B, (index,), value)),))
    a = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    b = np.full(256, 7, np.float32)
    report = run_module(module, [a, b], profile=True)
    np.testing.assert_array_equal(b, np.where(np.arange(256) < 250, a * 2, 0).astype(np.float32))
    p = report["vec"]
    assert p.load_requests == p.store_requests == 2 and p.sectors_per_store == 16.0
    assert p.load_sectors == 16 + 16      # the masked-off floats 250..255 still share sectors 248..255


def test_a_shuffle_with_an_inactive_member_is_an_error():
    """Lanes 0..15 shuffle down by 16 inside `if tx < 16`: their sources never reach the shuffle."""
    f32, i32 = sl.dtypes.DType("float", 32), sl.dtypes.DType("int", 32)
    Y = Buffer("Y", (32,), f32)
    tx, v = Var("tx", i32), Var("v", f32)
    shuffled = Call("shfl_down_sync", (Const(0xFFFFFFFF, sl.dtypes.DType("uint", 32)), Cast(f32, tx), Const(16),
                                       Const(32)), f32)
    body = IfThen(Compare("lt", tx, Const(16)), Let(v, shuffled, Store(Y, (tx,), v)))
    launch = (LaunchAxis("threadIdx.x", tx, 32, LaunchKind.THREAD),)
    module = KernelModule("shfl", (Y,), (), (Kernel("shfl", (Y,), launch, body),))
    with pytest.raises(sl.LoweringError, match=r"thread \(0, 0, 0\) of block \(0, 0, 0\) shuffles with a lane "
                       "that is not active"):
        run_module(module, [np.zeros(32, np.float32)])
    full = KernelModule("shfl", (Y,), (), (Kernel("shfl", (Y,), launch, Let(v, shuffled, Store(Y, (tx,), v))),))
    y = np.zeros(32, np.float32)
    run_module(full, [y])
    np.testing.assert_array_equal(y, np.where(np.arange(32) < 16, np.arange(32) + 16, np.arange(32)))


def test_integer_division_by_zero_and_minus_one_is_defined():
    """schedlang defines x // 0 == x % 0 == 0 and INT_MIN // -1 == INT_MIN (README, Defined behaviour)."""
    n = 6
    I = sl.placeholder((n,), "int32", name="I")
    J = sl.placeholder((n,), "int32", name="J")
    q = sl.compute((n,), lambda i: sl.floordiv(I[i], J[i]) * 1000 + sl.floormod(I[i], J[i]), name="q")
    s = sl.create_schedule(q.op)
    schedules.bind(s, q, *s[q].split(q.op.axis[0], factor=4))
    mod = sl.build(s, [I, J, q], target="cuda")
    i = np.array([7, -7, 5, -2 ** 31, 9, -9], np.int32)
    j = np.array([2, 2, 0, -1, -4, 0], np.int32)
    out = np.zeros(n, np.int32)
    mod.emulate(i, j, out, engine="simt")
    np.testing.assert_array_equal(out, sl.reference([q], {I: i, J: j})[0])
    assert list(out[[2, 5]]) == [0, 0]


def test_two_threads_writing_one_global_address_is_a_race():
    """Y[tx // 2] = tx over 2 blocks of 4 threads: threads 0 and 1 of both blocks write Y[0] in one
    statement (the last lane's write lands, and the first lane is told whose)."""
    f32, i32 = sl.dtypes.DType("float", 32), sl.dtypes.DType("int", 32)
    Y = Buffer("Y", (8,), f32)
    bx, tx = Var("bx", i32), Var("tx", i32)
    launch = (LaunchAxis("blockIdx.x", bx, 2, LaunchKind.BLOCK), LaunchAxis("threadIdx.x", tx, 4, LaunchKind.THREAD))

    def run(index):
        body = Store(Y, (index,), Cast(f32, tx), Compare("eq", tx, Const(3)) if index is bx else None)
        run_module(KernelModule("w", (Y,), (), (Kernel("w", (Y,), launch, body),)), [np.zeros(8, np.float32)])

    with pytest.raises(GlobalMemoryRace, match=r"thread \(0, 0, 0\) of block \(0, 0, 0\) writes global buffer 'Y' "
                       r"at index 0 in `Y\[tx // 2\] = float32\(tx\)`, which thread \(1, 0, 0\) of block "
                       r"\(1, 0, 0\) also writes in the same statement"):
        run(Binary("floordiv", tx, Const(2)))
    run(bx * 4 + tx)      # one writer an element
    run(bx)               # only thread 3 of each block writes (a store predicate): fine
