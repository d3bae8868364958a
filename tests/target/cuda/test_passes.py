"""The GPU Kernel IR passes one at a time, on small hand-written bodies (no compiler involved):
barrier insertion, guard sinking (virtual threads: test_virtual_threads.py)."""
import schedlang as sl
from schedlang.dtypes import float32, int32
from schedlang.expr.nodes import Buffer, Call, Load, Var
from schedlang.kernel.thread_guards import sink_thread_guards
from schedlang.kernel.thread_sync import insert_barriers
from schedlang.loop.nodes import BOUND, SERIAL, Barrier, Evaluate, For, IfThen, Seq, Store, seq
from schedlang.tensor.intrin_calls import address_of

tx, k = Var("tx"), Var("k")
G = Buffer("G", (64,), float32)
S = Buffer("S", (32,), float32, "shared")
L = Buffer("L", (1,), float32, "local")


def fetch(i=tx):
    return Store(S, (i,), Load(G, (i,)))


def use(i=tx):
    return Store(G, (i,), Load(S, ((i + 1) % 32,)))


def threads(body, tag="threadIdx.x", var=tx):
    return For(var, 32, body, BOUND, tag)


def kinds(s):
    return [type(x).__name__ for x in s.stmts] if isinstance(s, Seq) else [type(s).__name__]


def test_a_barrier_between_a_shared_write_and_a_read_by_other_threads():
    body = insert_barriers(threads(seq(fetch(), use())))
    assert kinds(body.body) == ["Store", "Barrier", "Store"]


def test_no_barrier_without_a_shared_exchange():
    for body in (seq(fetch(), fetch()), seq(use(), use()), seq(Store(G, (tx,), Load(G, (tx,))), use())):
        assert kinds(insert_barriers(threads(body)).body) == kinds(body)


def test_a_loop_that_refills_the_tile_it_reads_syncs_at_the_end_of_each_step():
    body = insert_barriers(threads(For(k, 4, seq(fetch(), use()))))
    assert kinds(body.body.body) == ["Store", "Barrier", "Store", "Barrier"]
    once = insert_barriers(threads(For(k, 1, seq(fetch(), use()))))     # one step: nothing is refilled
    assert kinds(once.body.body) == ["Store", "Barrier", "Store"]


def library_write(dst, src):
    """A library call writing shared memory through its first argument (cp.async, a fragment store)."""
    return Evaluate(Call("sl_copy", (address_of(dst), address_of(src)), int32))


def test_a_call_writing_through_its_first_argument_does_not_read_what_it_writes():
    # a cooperative fetch looped over its chunks (cp.async: barriers, and so waits for every
    # copy in flight, after each chunk undid the pipeline), and fragment stores to one tile
    chunks = For(k, 4, library_write(Load(S, (tx + k * 8 % 32,)), Load(G, (tx + k * 8,))))
    body = insert_barriers(threads(seq(chunks, use())))
    assert kinds(body.body) == ["For", "Barrier", "Store"]
    assert kinds(body.body.stmts[0].body) == ["Evaluate"]
    stores = seq(library_write(Load(S, (tx,)), Load(L, (sl.const(0),))), library_write(Load(S, (tx + 1,)), Load(L, (sl.const(0),))))
    assert kinds(insert_barriers(threads(seq(stores, use()))).body) == ["Evaluate", "Evaluate", "Barrier", "Store"]
    # what it reads through its other arguments still counts
    read = seq(fetch(), Evaluate(Call("sl_copy", (address_of(Load(L, (sl.const(0),))), address_of(Load(S, (tx,)))), int32)))
    assert kinds(insert_barriers(threads(read)).body) == ["Store", "Barrier", "Evaluate"]


def test_a_barrier_inside_a_statement_counts_for_what_follows():
    inner = seq(fetch(), Barrier(), use())
    body = insert_barriers(threads(seq(inner, Store(G, (tx,), Load(S, (tx,))))))
    assert [type(x).__name__ for x in body.body.stmts].count("Barrier") == 1


def test_a_thread_guard_moves_off_a_barrier():
    guarded = IfThen(tx < 20, seq(use(), Barrier(), use()))
    body = sink_thread_guards(threads(guarded))
    assert kinds(body.body) == ["IfThen", "Barrier", "IfThen"]


def test_a_cooperative_fetch_and_register_stores_stay_unguarded_the_rest_keeps_the_guard():
    ty = Var("ty")
    coop = threads(fetch(ty), var=ty)       # threadIdx.x bound again inside: every thread copies its part
    zero = sl.const(0)
    register = Store(L, (zero,), Load(L, (zero,)) * 2.0)
    body = sink_thread_guards(threads(IfThen(tx < 20, seq(coop, Barrier(), register, use()))))
    assert kinds(body.body) == ["For", "Barrier", "Store", "IfThen"]
    assert body.body.stmts[0] is coop


def test_a_guard_on_blocks_only_stays_where_it_is():
    b = Var("b")
    guarded = IfThen(b < 3, seq(use(), Barrier(), use()))
    body = sink_thread_guards(For(b, 4, threads(guarded), BOUND, "blockIdx.x"))
    assert body.body.body is guarded
