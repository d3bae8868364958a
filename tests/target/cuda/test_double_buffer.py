"""double_buffer (TVM's InjectDoubleBuffer): a stage computed at a serial loop gets two buffers;
iteration i fetches the next step's tile into one while it computes from the other, with the
first fetch before the loop and one barrier per step. Results against the reference on both
emulation engines (the simt engine also checks for shared-memory races)."""
import pytest

import schedlang as sl
from schedlang.errors import LoweringError
from tests import programs
from tests import helpers
from tests.helpers import assert_close, assert_matches_reference
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for

pytest.importorskip("cuda.bindings")


def run_both_engines(s, args, **shim_options):
    """tests.helpers.run_both_engines, with the profile of the one kernel these programs have."""
    mod, profile = helpers.run_both_engines(s, args, **shim_options)
    return mod, profile["C_kernel"]


@pytest.mark.parametrize("shape", [(20, 21, 19, 4), (16, 16, 16, 8), (9, 10, 5, 8)])
def test_double_buffered_shared_gemm_matches_the_reference(shape):
    """K = 19: the last step is a tail; K = 16: two whole steps; K = 5: one step (nothing to fetch
    ahead: the loop of one iteration is gone before the pass, and one buffer remains)."""
    M, N, K, k_tile = shape
    block = (4, 8) if k_tile == 4 else (8, 16)
    run_both_engines(*schedules.shared_gemm(M, N, K, block=block, k_tile=k_tile, double_buffer=True))


def test_one_barrier_per_step_and_two_buffers_in_the_cuda_source():
    s, args = schedules.shared_gemm(20, 21, 30, block=(4, 8), k_tile=4, double_buffer=True)
    mod, double = run_both_engines(s, args)
    _, single = run_both_engines(*schedules.shared_gemm(20, 21, 30, block=(4, 8), k_tile=4))
    steps, blocks = 8, 5 * 3            # K = 30 in steps of 4 (a tail); a 20 x 21 C in 4 x 8 tiles
    assert single.barriers == blocks * steps * 2
    assert double.barriers == blocks * (1 + steps)       # one after the first fetch, one a step
    assert double.load_requests == single.load_requests  # the same tiles, fetched earlier
    src = mod.get_source()
    assert "__shared__ float A_shared[32];" in src and "__shared__ float B_shared[64];" in src   # 2 x 16, 2 x 32
    assert "if (k_outer + 1 < 8) {" in src
    assert "(k_outer + 1) % 2 * 16] = A[" in src, "the fetch fills the other half"
    assert "k_outer % 2 * 16] * B_shared[" in src, "the compute reads this step's half"
    kernel = mod.ir["kernel"]
    assert kernel.count("barrier(shared)") == 2 and "# double_buffer_scope: A.shared" in kernel


def gemm_with_local_a(M=13, N=9, K=11):
    """Each thread copies its A row of the step straight from global memory into registers."""
    A, B, C = programs.gemm(M, N, K)
    s = sl.create_schedule(C.op)
    AL = s.cache_read(A, "local", [C])
    CL = s.cache_write(C, "local")
    schedules.bind(s, C, *s[C].split(C.op.axis[0], factor=4), x="y")
    schedules.bind(s, C, *s[C].split(C.op.axis[1], factor=4))
    s[CL].compute_at(s[C], s[C].leaf_iter_vars[-1])
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=4)
    s[AL].compute_at(s[CL], ko)
    s[AL].double_buffer()
    return s, [A, B, C]


def test_a_double_buffered_register_stage_needs_no_barrier():
    s, args = gemm_with_local_a()
    mod, profile = run_both_engines(s, args)
    assert profile.barriers == 0
    assert "float A_local[8];" in mod.get_source()         # 2 x 4 registers


def test_the_llvm_target_ignores_double_buffer_as_tvm_does():
    def schedule(double):
        A, B, C = programs.gemm(13, 9, 11)
        s = sl.create_schedule(C.op)
        AL = s.cache_read(A, "local", [C])
        ko, _ = s[C].split(C.op.reduce_axis[0], factor=4)
        s[AL].compute_at(s[C], ko)
        if double:
            s[AL].double_buffer()
        return s, [A, B, C]
    mod = assert_matches_reference(*schedule(True))
    assert mod.ir["llvm"] == sl.build(*schedule(False)).ir["llvm"]


def test_double_buffer_is_a_replayable_step():
    s, args = schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4, double_buffer=True)
    assert "s['A.shared'].double_buffer()" in s.to_python()
    replayed = sl.create_schedule(args[-1].op).apply_json(s.to_json())
    want = sl.build(s, args, target="cuda").get_source()
    assert sl.build(replayed, args, target="cuda").get_source() == want


@pytest.mark.parametrize("case", ["root", "bound", "global", "output"])
def test_schedules_double_buffer_cannot_serve_are_refused(case):
    s, (A, B, C) = schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4)
    AA = next(st for st in s.stages if st.name == "A.shared")
    if case == "output":
        with pytest.raises(sl.ScheduleError, match="double_buffer: stage 'C': is an output"):
            s[C].double_buffer()
        return
    if case == "root":
        AA.compute_root()
        AA.set_scope("global")
        match = "is computed at the root"
    elif case == "bound":
        AA.compute_at(s[C], s[C].leaf_iter_vars[1])      # blockIdx.x
        match = r"which is bind\(blockIdx.x\)"
    else:
        AA.set_scope("global")
        match = "is stored in global memory"
    AA.double_buffer()
    with pytest.raises(sl.ScheduleError, match=match):
        sl.build(s, [A, B, C], target="cuda")


def test_a_stage_filled_from_this_steps_shared_tile_is_refused():
    """The register row is copied from the shared tile of the same step, after its barrier: fetching
    it a step ahead would read a tile not fetched yet. A LoweringError, never a wrong result."""
    s, args = schedules.shared_gemm(33, 18, 21, local_a=True)
    next(st for st in s.stages if st.name == "A.shared.local").double_buffer()
    with pytest.raises(LoweringError, match="'A.shared.local' is not filled at the start of the loop body"):
        sl.build(s, args, target="cuda")


def test_with_virtual_threads_the_tutorial_gemm_fetches_ahead_once_per_step():
    """TVM's GEMM tutorial schedule in full: vthreads, register tiles and double-buffered shared tiles."""
    s, args = schedules.vthread_gemm(37, 35, 13)
    for st in s.stages:
        if st.name in ("A.shared", "B.shared"):
            st.double_buffer()
    mod = sl.build(s, args, target="cuda")
    arrays, feed = arrays_for(s, args)
    profile = mod.emulate(*arrays, engine="simt", profile=True)["C_kernel"]
    assert_close(arrays[2], sl.reference([args[2]], feed)[0], "float32", name="C")
    assert profile.barriers == 9 * (1 + 4)         # 9 blocks, K = 13 in 4 steps of 4
    assert "__shared__ float A_shared[128];" in mod.get_source()


def test_a_buffer_allocated_by_each_unrolled_copy_is_hoisted_once():
    """An unrolled loop inside the double-buffered loop allocates its register stage in each
    copy (the same buffer, in turn): the pass hoists that allocation once (a second Allocate
    of it inside the first is malformed IR; the tensor-core GEMM with its k slices unrolled
    met it), and the copies keep their order."""
    from schedlang.dtypes import dtype
    from schedlang.expr.nodes import Buffer, Const, Load, Var
    from schedlang.kernel.double_buffer import double_buffer_loop
    from schedlang.loop.nodes import Allocate, Barrier, For, Store, seq
    from schedlang.loop.verify import verify_stmt
    f32, i32 = dtype("float32"), dtype("int32")
    A, out = Buffer("A", (64,), f32), Buffer("out", (8,), f32)
    S, R = Buffer("S", (4,), f32, "shared"), Buffer("R", (1,), f32, "local")
    ko = Var("ko", i32)
    fetch = seq(*(Store(S, (Const(t),), Load(A, (ko * 4 + t,))) for t in range(4)))
    copies = [Allocate(R, seq(Store(R, (Const(0),), Load(S, (Const(u),))),
                              Store(out, (ko,), Load(out, (ko,)) + Load(R, (Const(0),)))))
              for u in range(2)]
    loop = For(ko, 8, Allocate(S, seq(fetch, Barrier("shared"), *copies, Barrier("shared"))),
               pragmas=(("double_buffer_scope", "S"),))
    body = double_buffer_loop(loop, ["S"])
    verify_stmt(body, [A, out], flat=True)
    text = str(body)
    assert text.count("alloc R") == 1 and text.count("alloc S") == 1
