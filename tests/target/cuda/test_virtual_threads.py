"""Virtual threads (thread_axis("vthread")), TVM's InjectVirtualThread: code that does not depend on
the virtual thread runs once (the shared tile fetch and its barriers), register tiles get one slice
per virtual thread, and the per-vthread copies of the innermost statements sit side by side. Every
schedule gives the serial form's result (the reference) on both emulation engines."""

import pytest

import schedlang as sl
from schedlang.dtypes import float32
from schedlang.errors import LoweringError
from schedlang.expr.nodes import Buffer, Load, Var
from schedlang.kernel.virtual_threads import inject_virtual_threads
from schedlang.loop.functor import StmtMutator
from schedlang.loop.nodes import BOUND, SERIAL, Allocate, For, IfThen, Seq, Store, seq
from schedlang.target.cuda.backend import BACKEND
from tests import programs
from tests.helpers import assert_golden, run_both_engines
from tests.target.cuda import schedules
from tests.target.cuda.schedules import arrays_for

pytest.importorskip("cuda.bindings")

tx, v, w = Var("tx"), Var("v"), Var("w")
G = Buffer("G", (64,), float32)
O = Buffer("O", (64,), float32)
S = Buffer("S", (32,), float32, "shared")
R = Buffer("R", (2,), float32, "local")


def vthread(body, var=v, n=2):
    return For(var, n, body, BOUND, "vthread")


def threads(body):
    return For(tx, 8, body, BOUND, "threadIdx.x")


def fetch():
    return Store(S, (tx,), Load(G, (tx,)))


# -- the pass on hand-written bodies ---------------------------------------------------------------

def test_an_untouched_fetch_runs_once_and_the_touched_store_is_copied_per_vthread():
    use = Store(O, (tx * 2 + v,), Load(S, (tx,)))
    body = inject_virtual_threads(threads(vthread(Allocate(S, seq(fetch(), use)))))
    printed = str(body).splitlines()
    assert printed == ["bound[threadIdx.x] tx in 0..8:",
                       "  alloc S: f32[32] shared",
                       "  S[tx] = G[tx]",
                       "  O[tx * 2 + 0] = S[tx]",
                       "  O[tx * 2 + 1] = S[tx]"]


def test_a_vthread_of_one_is_its_body_even_for_stores_that_ignore_it():
    """A split of factor 1 bound to vthread (the auto-scheduler draws them): the loop vanishes
    instead of being refused as a store that does not depend on the virtual thread."""
    body = inject_virtual_threads(threads(vthread(Store(O, (tx + v,), Load(G, (tx,))), n=1)))
    assert str(body).splitlines() == ["bound[threadIdx.x] tx in 0..8:", "  O[tx + 0] = G[tx]"]


def test_a_register_buffer_the_vthread_writes_gets_a_slice_per_vthread():
    i = Var("i")
    fill = IfThen(tx * 2 + v < 15, For(i, 2, Store(R, (i,), Load(G, (v * 2 + i,)))))
    body = inject_virtual_threads(threads(vthread(Allocate(R, seq(fill, Store(O, (v,), Load(R, (v,))))))))
    alloc = body.body
    assert isinstance(alloc, Allocate) and alloc.buffer.shape == (4,) and alloc.buffer.scope == "local"
    loop = alloc.body.stmts[0]      # a guard over a loop: a serial loop over the virtual thread, not copies
    assert isinstance(loop, For) and loop.var is v and loop.kind == SERIAL and isinstance(loop.body, IfThen)
    assert "R[v * 2 + i] = G[v * 2 + i]" in str(loop)
    assert [str(x) for x in alloc.body.stmts[1:]] == ["O[0] = R[0 * 2 + 0]", "O[1] = R[1 * 2 + 1]"]


def test_nested_vthreads_push_down_through_untouched_loops_and_conditions():
    k = Var("k")
    inner = IfThen(tx < 6, Store(O, (v * 4 + w,), Load(G, (k,))))
    body = inject_virtual_threads(threads(vthread(vthread(Allocate(S, For(k, 3, seq(fetch(), inner))), w), v)))
    loop = body.body.body
    assert isinstance(loop, For) and loop.var is k
    assert isinstance(loop.body, Seq) and loop.body.stmts[0].buffer is S     # the fetch once
    cond = loop.body.stmts[1]
    assert isinstance(cond, IfThen) and len(cond.then_body.stmts) == 4     # 2 x 2 copies side by side


@pytest.mark.parametrize("case", ["shared", "outer_local", "untouched_global", "symbolic"])
def test_forms_we_do_not_handle_are_refused(case):
    if case == "shared":
        body = threads(vthread(Store(S, (tx + v,), Load(G, (tx,)))))
        match = "shared buffer 'S' is written by code that depends on the virtual thread"
    elif case == "outer_local":
        body = Allocate(R, threads(vthread(Store(R, (Var("i") * 0,), Load(G, (v,))))))
        match = "local buffer 'R' .* allocated outside its loop"
    elif case == "untouched_global":
        P = Buffer("P", (2,), float32)
        body = threads(vthread(seq(Store(O, (tx,), Load(G, (tx,))), Store(P, (v,), Load(G, (tx,))))))
        match = "'O' is stored by code inside the vthread loop"
    else:
        body = threads(For(v, Var("n"), Store(G, (v,), Load(G, (tx,))), BOUND, "vthread"))
        match = "symbolic extent"
    with pytest.raises(LoweringError, match=match):
        inject_virtual_threads(body)


# -- TVM's GEMM schedule, end to end ---------------------------------------------------------------

class _SerialVirtualThreads(StmtMutator):
    """The plain form: every vthread loop a serial loop in place (the shared fetch per vthread)."""

    def visit_For(self, s):
        body = self.visit(s.body)
        if s.kind == BOUND and s.thread_tag == "vthread":
            return For(s.var, s.extent, body, SERIAL)
        return s.with_body(body)


@pytest.mark.parametrize("shape", [(37, 35, 13, 4), (21, 50, 11, 3)])
def test_vthread_gemm_matches_the_reference_on_both_engines(shape):
    *mnk, k_tile = shape
    run_both_engines(*schedules.vthread_gemm(*mnk, k_tile=k_tile))


def test_the_shared_tile_is_fetched_once_per_block_step_not_per_vthread(monkeypatch):
    s, args = schedules.vthread_gemm(37, 35, 13)
    _, injected = run_both_engines(s, args)
    passes = BACKEND.kernel_passes
    monkeypatch.setattr(BACKEND, "kernel_passes", lambda target: [
        (n, _SerialVirtualThreads().visit if n == "inject_virtual_threads" else p) for n, p in passes(target)])
    serial = sl.build(s, args, target="cuda", cache=False)
    arrays, _ = arrays_for(s, args)
    plain = serial.emulate(*arrays, engine="simt", profile=True)
    new, old = injected["C_kernel"], plain["C_kernel"]
    # 9 blocks x 4 steps of k.outer x 2 barriers (after the fetch, before the next one); 4 vthreads x that before
    assert new.barriers == 9 * 4 * 2 and old.barriers == 4 * new.barriers
    assert new.load_requests < old.load_requests and new.shared_requests < old.shared_requests
    assert new.store_requests == old.store_requests         # the same C elements written


def test_kernel_ir_has_the_fetch_outside_the_vthread_copies(update_golden):
    mod = sl.build(*schedules.vthread_gemm(37, 35, 13), target="cuda")
    text = mod.ir["kernel"]
    lines = text.splitlines()
    fetch_at = [i for i, line in enumerate(lines) if "A.shared[" in line and "= A[" in line]
    assert len(fetch_at) == 1, "one fetch statement, not one per virtual thread"
    depth = len(lines[fetch_at[0]]) - len(lines[fetch_at[0]].lstrip())
    enclosing = []
    for line in reversed(lines[:fetch_at[0]]):
        indent = len(line) - len(line.lstrip())
        if indent < depth:
            enclosing.append(line.strip())
            depth = indent
    assert not any("i.inner.outer" in x or "j.inner.outer" in x for x in enclosing), enclosing
    assert "local C.local: f32[16]" in text and "local A.shared.local: f32[4]" in text
    assert text.count("barrier(shared)") == 2
    assert_golden(text, "cuda_vthread_gemm.kernel.txt", update_golden)


def test_a_shared_stage_computed_at_the_vthread_loop_is_fetched_once():
    """The tile at the vthread loop covers every virtual thread (bound inference relaxes vthread):
    it does not depend on the virtual thread, so it is fetched once, before the copies."""
    A, B, C = programs.gemm(20, 20, 8)
    s = sl.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    CC = s.cache_write(C, "local")
    by, yi = s[C].split(C.op.axis[0], factor=8)
    vy, yi = s[C].split(yi, nparts=2)
    ty, yi = s[C].split(yi, nparts=4)
    s[C].reorder(by, vy, ty, yi, C.op.axis[1])
    s[C].bind(by, sl.thread_axis("blockIdx.x"))
    s[C].bind(vy, sl.thread_axis((0, 2), "vthread", name="vy"))
    s[C].bind(ty, sl.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], ty)
    s[AA].compute_at(s[C], vy)
    _, fetch_x = s[AA].split(s[AA].fuse(*s[AA].op.axis), factor=4)
    s[AA].bind(fetch_x, sl.thread_axis("threadIdx.x"))
    mod, profile = run_both_engines(s, [A, B, C])
    assert profile["C_kernel"].barriers == 3          # one a block, after the fetch
    s[AA].compute_at(s[CC], CC.op.reduce_axis[0])     # each thread's row: depends on the virtual thread
    with pytest.raises(LoweringError, match="shared buffer 'A.shared' is written by code that depends"):
        sl.build(s, [A, B, C], target="cuda")
