"""Every placement of a stage inside a GPU kernel either runs race-free and right, or is refused
at build (issue 15, item 5). A stage whose buffer the block's threads share (shared memory, or an
argument computed at a block loop) has its loops spread over the threads that its own loops do
not bind (the cooperative fetch a TVM schedule writes by hand); a stage in a thread's own (local)
memory is computed by each thread for itself. Each correct placement runs on both CPU engines
with their race checks: the shim under ThreadSanitizer and the SIMT interpreter."""
import re
from functools import partial

import pytest

import schedlang as sl
from schedlang.loop import cooperative
from schedlang.topi import cuda
from tests import programs
from tests.target.cuda import schedules
from tests.tvm_ports.test_reduction_cuda import tutorial_schedule
from tests.target.cuda.schedules import arrays_for
from tests.helpers import run_both_engines

pytest.importorskip("cuda.bindings")


def transpose(at="bj", scope="shared", bind=(), name=""):
    """B = A.T through an 8x8 tile of A, threads 8x8; the tile computed at block loop bj or at
    thread loop ti/tj of B, its loops bound to the thread axes in bind. Returns B and the function
    that schedules it in a schedule s and returns its arguments."""
    A = sl.placeholder((20, 18), name=f"A{name}")
    B = sl.compute((18, 20), lambda i, j: A[j, i], name=f"B{name}")

    def schedule(s):
        AS = s.cache_read(A, scope, [B])
        bi, bj, ti, tj = schedules.bind_tile(s, B, B.op.axis[0], B.op.axis[1], (8, 8))
        s[AS].compute_at(s[B], {"bj": bj, "ti": ti, "tj": tj}[at])
        for ax, tag in zip(s[AS].op.axis, ("threadIdx.y", "threadIdx.x")):
            if tag in bind:
                s[AS].bind(ax, sl.thread_axis(tag))
        return [A, B]
    return B, schedule


def producer_consumer(scope=None, at="outer", arg=False, reduce=False, name="", n=100):
    """B[i] = T[i] + 1 with T[i] = 2 A[i] (or T[i] = sum of A[i, :], with reduce) computed at B's
    block loop (outer) or thread loop (inner); with arg, T is an argument of the module."""
    A = sl.placeholder((n, 5) if reduce else (n,), name=f"A{name}")
    if reduce:
        k = sl.reduce_axis((0, 5), name="k")
        T = sl.compute((n,), lambda i: sl.sum(A[i, k], axis=k), name=f"T{name}")
    else:
        T = sl.compute((n,), lambda i: A[i] * 2.0, name=f"T{name}")
    B = sl.compute((n,), lambda i: T[i] + 1.0, name=f"B{name}")

    def schedule(s):
        outer, inner = s[B].split(B.op.axis[0], factor=32)
        schedules.bind(s, B, outer, inner)
        s[T].compute_at(s[B], {"outer": outer, "inner": inner}[at])
        if scope:
            s[T].set_scope(scope)
        return [A, T, B] if arg else [A, B]
    return B, schedule


def one(make, *args, **options):
    """One placement: (s, args)."""
    return together({"": partial(make, *args, **options)})


def together(placements):
    """Placements {name: make(name) -> (output, schedule)} as the kernels of one module (one
    compile of the shim for all), each one's tensors suffixed by its name; returns (s, args)."""
    made = [make(name=f"_{name}" if name else "") for name, make in placements.items()]
    s = sl.create_schedule([out.op for out, _ in made])
    return s, [t for _, schedule in made for t in schedule(s)]


def block_total(rows=37, cols=6, name=""):
    """Y[i, j] = X[i, j] / S[i // 8] with S the block's sum of its 8 rows: one element of shared
    memory, which only thread 0 of the block computes. Returns Y and its schedule (as transpose)."""
    X = sl.placeholder((rows, cols), name=f"X{name}")
    r = sl.reduce_axis((0, 8), name="r")
    c = sl.reduce_axis((0, cols), name="c")
    blocks = -(-rows // 8)
    S = sl.compute((blocks,), lambda b: sl.sum(sl.if_then_else(b * 8 + r < rows, X[sl.min(b * 8 + r, rows - 1), c], 0.0),
                                               axis=[r, c]), name=f"S{name}")
    Y = sl.compute((rows, cols), lambda i, j: X[i, j] / S[i // 8], name=f"Y{name}")

    def schedule(s):
        bo, bi = s[Y].split(Y.op.axis[0], factor=8)
        s[Y].bind(bo, sl.thread_axis("blockIdx.x"))
        s[Y].bind(bi, sl.thread_axis("threadIdx.y"))
        s[Y].bind(Y.op.axis[1], sl.thread_axis("threadIdx.x"))
        s[S].compute_at(s[Y], bo)
        s[S].set_scope("shared")
        return [X, Y]
    return Y, schedule


def vthread_gemm_unbound(at="ko", name=""):
    """TVM's GEMM with 2x2 vthreads of 4x4 threads and the shared A tile's loops left unbound,
    computed at the outer reduction loop (ko, inside the vthread and thread loops) or at the
    vthread loop vy of the output. Returns C and its schedule (as transpose)."""
    A, B, C = programs.gemm(37, 35, 13, suffix=name)

    def schedule(s):
        AA = s.cache_read(A, "shared", [C])
        CC = s.cache_write(C, "local")
        by, yi = s[C].split(C.op.axis[0], factor=16)
        bx, xi = s[C].split(C.op.axis[1], factor=16)
        vy, yi = s[C].split(yi, nparts=2)
        ty, yi = s[C].split(yi, nparts=4)
        vx, xi = s[C].split(xi, nparts=2)
        tx, xi = s[C].split(xi, nparts=4)
        s[C].reorder(by, bx, vy, vx, ty, tx, yi, xi)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            s[C].bind(ax, sl.thread_axis(tag))
        s[C].bind(vy, sl.thread_axis((0, 2), "vthread", name="vy"))
        s[C].bind(vx, sl.thread_axis((0, 2), "vthread", name="vx"))
        s[CC].compute_at(s[C], tx)
        ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=4)
        s[CC].reorder(ko, ki, *CC.op.axis)
        s[AA].compute_at(*((s[CC], ko) if at == "ko" else (s[C], vy)))
        return [A, B, C]
    return C, schedule


def rfactor_at_block_loop(scope, name=""):
    """TVM's reduction tutorial (rows over blockIdx.x / threadIdx.y, the factored axis across
    threadIdx.x) with the rfactor stage computed at the block loop, in scope."""
    A, B = programs.row_sum(37, 70, suffix=name)

    def schedule(s):
        _, BF, xo, _ = tutorial_schedule(B, s)
        s[BF].compute_at(s[B], xo)
        s[BF].set_scope(scope)
        return [A, B]
    return B, schedule


def gemm_tiles_at_the_thread_loops(double_buffer=False, name=""):
    """TVM's shared GEMM with the A and B tiles' loops unbound, computed inside threadIdx.y/x."""
    A, B, C = programs.gemm(20, 21, 19, suffix=name)

    def schedule(s):
        cuda.schedule_matmul_shared(s, C, (4, 8), 4, fetch=False, double_buffer=double_buffer)
        return [A, B, C]
    return C, schedule


def gemm_tile_at_k(name=""):
    """schedules.tiled_gemm with A read through shared memory at the reduction's outer loop."""
    A, B, C = programs.gemm(20, 20, 12, suffix=name)

    def schedule(s):
        schedules.schedule_tiled_gemm(s, A, C, cache_shared=True)
        return [A, B, C]
    return C, schedule


# Placements of the small programs, built together as one module (one shim compile).
TOGETHER = {
    "shared_at_block_loop_unbound": partial(transpose, "bj"),
    "shared_at_block_loop_x_bound": partial(transpose, "bj", bind=("threadIdx.x",)),
    "shared_at_block_loop_y_bound": partial(transpose, "bj", bind=("threadIdx.y",)),
    "shared_at_block_loop_bound": partial(transpose, "bj", bind=("threadIdx.y", "threadIdx.x")),
    "shared_under_threadidx_y": partial(transpose, "ti"),
    "shared_under_threadidx_x": partial(transpose, "tj"),
    "shared_compute_stage_at_block_loop": partial(producer_consumer, "shared", "outer"),
    "shared_compute_stage_under_threadidx": partial(producer_consumer, "shared", "inner"),
    "shared_reduction_at_block_loop": partial(producer_consumer, "shared", "outer", reduce=True),
    "argument_at_block_loop": partial(producer_consumer, at="outer", arg=True),
    "argument_under_threadidx": partial(producer_consumer, at="inner", arg=True),
    "local_at_block_loop": partial(transpose, "bj", scope="local"),
    "local_under_threadidx": partial(transpose, "tj", scope="local"),
    "local_reduction_at_block_loop": partial(producer_consumer, None, "outer", reduce=True),
}

# Placements in larger programs (GEMMs, TVM's reduction tutorial), also built as one module.
CORRECT = {
    "shared_under_thread_loops_gemm": gemm_tiles_at_the_thread_loops,
    "shared_under_thread_loops_double_buffered": partial(gemm_tiles_at_the_thread_loops, True),
    "shared_under_thread_loops_at_k": gemm_tile_at_k,
    "shared_under_vthread_and_thread_loops": partial(vthread_gemm_unbound, "ko"),
    "shared_at_a_vthread_loop": partial(vthread_gemm_unbound, "vy"),
    "shared_single_element_at_block_loop": block_total,
    "rfactor_shared_at_block_loop": partial(rfactor_at_block_loop, "shared"),
    "rfactor_local_at_block_loop": partial(rfactor_at_block_loop, "local"),
}


def test_the_placements_in_gemms_and_reductions_are_race_free_and_right_on_both_engines():
    """Each output (C_<placement>, Y_..., B_...) is checked against the reference by name."""
    s, args = together(CORRECT)
    run_both_engines(s, args, sanitize="thread")        # the SIMT engine raises SharedMemoryRace / GlobalMemoryRace


def test_the_placements_of_small_programs_are_race_free_and_right_on_both_engines():
    """Each output (B_<placement>) is checked against the reference by name."""
    s, args = together(TOGETHER)
    run_both_engines(s, args, sanitize="thread")


def tile_text(s, args):
    return str(sl.lower(s, args, level="tile", target="cuda"))


def test_an_unbound_shared_tile_at_the_block_loop_is_spread_over_the_block():
    """Each of the 8x8 threads copies one element: the tile's two loops become threadIdx.y/x."""
    text = tile_text(*one(transpose, "bj"))
    assert "bound[threadIdx.y] ax0.ax1.fused.ty in 0..8:" in text
    assert "bound[threadIdx.x] ax0.ax1.fused.tx in 0..8:" in text
    assert not re.search(r"for ax[01] in", text), "no thread runs a loop over the whole tile"


def test_a_tile_bound_to_threadidx_x_only_is_spread_over_threadidx_y():
    text = tile_text(*one(transpose, "bj", bind=("threadIdx.x",)))
    assert "bound[threadIdx.y] ax0.fused.ty in 0..8:" in text and "bound[threadIdx.x] ax1 in 0..8:" in text


def test_more_elements_than_threads_take_a_serial_loop_with_a_tail_guard():
    """The 4x4 A tile of the GEMM at k.outer (16 elements) over 4x8 threads: half the threads copy one."""
    text = tile_text(*one(gemm_tiles_at_the_thread_loops))
    assert "if ax0.ax1.fused.ty * 8 + ax0.ax1.fused.tx < 16:" in text


def test_a_single_element_is_computed_by_thread_zero():
    text = tile_text(*one(block_total))
    assert "if b.fused.ty * 6 + b.fused.tx < 1:" in text


def test_a_user_bound_cooperative_fetch_is_left_as_written():
    """TVM's tutorial schedules bind every thread axis of the block already: nothing to spread."""
    s, args = schedules.shared_gemm(20, 21, 19, block=(4, 8), k_tile=4)
    assert ".fused.t" not in tile_text(s, args)


@pytest.mark.parametrize("engine", ["shim", "simt"])
def test_without_the_spreading_both_engines_report_the_race(monkeypatch, engine):
    """What the build did before: every thread of the block writes the whole shared tile."""
    monkeypatch.setattr(cooperative, "distribute_over_threads", lambda nest, idle, name: nest)
    s, args = one(transpose, "tj")
    mod = sl.build(s, args, target="cuda", cache=False)
    arrays, _ = arrays_for(s, args)
    if engine == "shim":
        with pytest.raises(RuntimeError, match="ThreadSanitizer found a data race"):
            mod.emulate(*arrays, sanitize="thread")
    else:
        with pytest.raises(sl.LoweringError, match=r"race on 'A\.shared'.*in the same statement"):
            mod.emulate(*arrays, engine="simt")


def test_a_local_stage_with_a_loop_bound_to_threadidx_is_refused():
    """A local buffer is one thread's: bound, each thread would fill one element of its own copy."""
    s, args = one(transpose, "bj", scope="local", bind=("threadIdx.y", "threadIdx.x"))
    with pytest.raises(sl.ScheduleError, match=r"bind: stage 'A.local', axis 'ax0': is stored in local memory"
                       r"(.|\n)*hint: store it in shared memory"):
        sl.build(s, args, target="cuda")


@pytest.mark.parametrize("at", ["outer", "inner"])
def test_a_global_temporary_inside_a_kernel_is_refused(at):
    s, args = one(producer_consumer, "global", at)
    with pytest.raises(sl.ScheduleError, match=r"compute_at: stage 'T': is stored in global memory but computed "
                       r"inside kernel B_kernel(.|\n)*set_scope\('shared'\)"):
        sl.build(s, args, target="cuda")
