"""sl.scan with TVM's classic te semantics: recurrences over axis 0, built for the CPU and
checked against numpy and the reference evaluator (which runs the scan step by step)."""
import numpy as np
import pytest

import schedlang as sl
from tests.helpers import assert_matches_reference, run


def cumsum(m=10, n=37):
    X = sl.placeholder((m, n), name="X")
    s_state = sl.placeholder((m, n), name="s_state")
    s_init = sl.compute((1, n), lambda _, i: X[0, i], name="s_init")
    s_update = sl.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
    s_scan = sl.scan(s_init, s_update, s_state, inputs=[X], name="s_scan")
    return X, s_init, s_update, s_scan


def two_stage_cell(m=9, n=37):
    """The TVM scan tutorial's multi-stage scan cell: s1 reads the state, s2 reads s1."""
    X = sl.placeholder((m, n), name="X")
    s_state = sl.placeholder((m, n), name="s_state")
    s_init = sl.compute((1, n), lambda _, i: X[0, i], name="s_init")
    s1 = sl.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
    s2 = sl.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    s_scan = sl.scan(s_init, s2, s_state, inputs=[X], name="s_scan")
    return X, s1, s2, s_scan


def numpy_two_stage(x):
    want = np.zeros_like(x)
    want[0] = x[0]
    for t in range(1, len(x)):
        want[t] = want[t - 1] * 2 + x[t]
    return want


def test_cumsum_reference_and_build():
    X, _, _, s_scan = cumsum()
    x = np.random.default_rng(0).standard_normal((10, 37)).astype("float32")
    np.testing.assert_allclose(sl.reference([s_scan], {X: x})[0], np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)
    s = sl.create_schedule(s_scan.op)
    feed, [(_, out)], _ = run(s, [X, s_scan], feed={X: x})
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)


def test_cumsum_ir_shows_one_serial_scan_loop():
    X, _, _, s_scan = cumsum(6, 5)
    s = sl.create_schedule(s_scan.op)
    assert "Scan over s_scan.idx in 1..6" in sl.lower(s, [X, s_scan], level="tensor")
    for level in ("loop", "tile"):
        text = sl.lower(s, [X, s_scan], level=level)
        assert "s_scan[0, i] = X[0, i]" in text                       # the init, before the loop
        assert "for s_scan.idx in 0..5:" in text                       # the serial scan loop
        assert "s_scan[s_scan.idx + 1, i_1] = s_scan[s_scan.idx, i_1] + X[s_scan.idx + 1, i_1]" in text
    kernel = sl.lower(s, [X, s_scan], level="kernel")
    assert "for s_scan.idx in 0..5:" in kernel and "workers" not in kernel


@pytest.mark.parametrize("attach", ["default", "scan_axis", "split_loop"])
def test_multi_stage_cell(attach):
    X, s1, s2, s_scan = two_stage_cell()
    s = sl.create_schedule(s_scan.op)
    xo, xi = s[s2].split(s2.op.axis[1], factor=8)
    s[s2].vectorize(xi)
    if attach == "scan_axis":
        s[s1].compute_at(s[s_scan], s_scan.op.scan_axis)
    elif attach == "split_loop":
        s[s1].compute_at(s[s2], xo)
    tile = sl.lower(s, [X, s_scan])
    assert "alloc s1: f32[1, " in tile          # one step's row of the intermediate, inside the scan loop
    feed, [(_, out)], _ = run(s, [X, s_scan])
    np.testing.assert_allclose(out, numpy_two_stage(feed[X]), rtol=1e-4)
    assert_matches_reference(s, [X, s_scan])


def test_two_states_tvm_tutorial():
    """The TVM scan tutorial's two states of different widths, one reading the other."""
    m, n, l = 8, 12, 5
    X = sl.placeholder((m, n), name="X")
    st1 = sl.placeholder((m, n), name="st1")
    st2 = sl.placeholder((m, l), name="st2")
    i1 = sl.compute((1, n), lambda _, i: X[0, i], name="i1")
    i2 = sl.compute((1, l), lambda _, i: sl.const(0.0), name="i2")
    u1 = sl.compute((m, n), lambda t, i: st1[t - 1, i] + X[t, i], name="u1")
    u2 = sl.compute((m, l), lambda t, i: st2[t - 1, i] + st1[t - 1, 0], name="u2")
    r1, r2 = sl.scan([i1, i2], [u1, u2], [st1, st2], inputs=[X], name="sc")
    assert r1.name == "sc.v0" and r2.name == "sc.v1" and r2.shape == (m, l)
    s = sl.create_schedule(r1.op)
    feed, outs, _ = run(s, [X, r1, r2])
    x = feed[X]
    want1 = np.cumsum(x, axis=0)
    want2 = np.zeros((m, l), "float32")
    for t in range(1, m):
        want2[t] = want2[t - 1] + want1[t - 1, 0]
    np.testing.assert_allclose(outs[0][1], want1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[1][1], want2, rtol=1e-4, atol=1e-4)
    assert_matches_reference(s, [X, r1, r2])
    assert_matches_reference(sl.create_schedule(r1.op), [X, r2])     # the other state as a temporary


def test_scheduled_update_split_vectorize_parallel():
    X, s_init, s_update, s_scan = cumsum(7, 45)
    s = sl.create_schedule(s_scan.op)
    xo, xi = s[s_update].split(s_update.op.axis[1], factor=8)
    s[s_update].vectorize(xi)
    s[s_update].parallel(xo)
    io, ii = s[s_init].split(s_init.op.axis[1], factor=16)
    s[s_init].parallel(io)
    tile = sl.lower(s, [X, s_scan])
    assert "parallel i.outer" in tile and "vectorized i.inner" in tile
    assert_matches_reference(s, [X, s_scan])


def test_fibonacci_two_init_rows():
    m = 12
    X = sl.placeholder((m, 3), name="X", dtype="int64")
    st = sl.placeholder((m, 3), name="st", dtype="int64")
    init = sl.compute((2, 3), lambda r, i: X[r, i], name="init")
    upd = sl.compute((m, 3), lambda t, i: st[t - 1, i] + st[t - 2, i], name="upd")
    fib = sl.scan(init, upd, st, name="fib")
    assert fib.op.scan_axis.dom.min == 2
    s = sl.create_schedule(fib.op)
    x = np.ones((m, 3), "int64")
    _, [(_, out)], _ = run(s, [X, fib], feed={X: x})
    want = [1, 1]
    for _ in range(m - 2):
        want.append(want[-1] + want[-2])
    np.testing.assert_array_equal(out[:, 0], want)


def test_rnn_like_reduction_in_the_update():
    """h[t] = tanh(sum_k W[i, k] * h[t-1, k] + X[t, i]): a reduction inside the cell."""
    m, n = 6, 16
    X = sl.placeholder((m, n), name="X")
    W = sl.placeholder((n, n), name="W")
    h = sl.placeholder((m, n), name="h")
    init = sl.compute((1, n), lambda _, i: X[0, i], name="h0")
    k = sl.reduce_axis((0, n), name="k")
    mv = sl.compute((m, n), lambda t, i: sl.sum(W[i, k] * h[t - 1, k], axis=k), name="mv")
    upd = sl.compute((m, n), lambda t, i: sl.tanh(mv[t, i] + X[t, i]), name="upd")
    rnn = sl.scan(init, upd, h, inputs=[X, W], name="rnn")
    s = sl.create_schedule(rnn.op)
    feed, [(_, out)], _ = run(s, [X, W, rnn])
    x, w = feed[X], feed[W]
    want = np.zeros_like(x)
    want[0] = x[0]
    for t in range(1, m):
        want[t] = np.tanh(w @ want[t - 1] + x[t])
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_scan_in_a_pipeline():
    """A compute feeds the scan (outside the cell, via inputs=) and another reads its result,
    which is a temporary."""
    m, n = 8, 20
    A = sl.placeholder((m, n), name="A")
    X = sl.compute((m, n), lambda t, i: A[t, i] * 3, name="X")
    st = sl.placeholder((m, n), name="st")
    init = sl.compute((1, n), lambda _, i: X[0, i], name="init")
    upd = sl.compute((m, n), lambda t, i: sl.max(st[t - 1, i], X[t, i]), name="upd")
    run_max = sl.scan(init, upd, st, inputs=[X], name="run_max")
    out = sl.compute((m, n), lambda t, i: run_max[t, i] - X[t, i], name="out")
    s = sl.create_schedule(out.op)
    io, ii = s[out].split(out.op.axis[1], factor=4)
    s[out].vectorize(ii)
    tile = sl.lower(s, [A, out])
    assert "alloc run_max: f32[8, 20] global" in tile
    feed, [(_, got)], _ = run(s, [A, out])
    x = feed[A] * 3
    np.testing.assert_allclose(got, np.maximum.accumulate(x, axis=0) - x, rtol=1e-5)


# ---- schedule errors ---------------------------------------------------------------------
@pytest.mark.parametrize("primitive", ["parallel", "vectorize", "unroll", "split"])
def test_scan_axis_cannot_be_scheduled(primitive):
    X, _, s_update, s_scan = cumsum()
    s = sl.create_schedule(s_scan.op)
    ax = s_scan.op.scan_axis
    args = (ax, 2) if primitive == "split" else (ax,)
    with pytest.raises(sl.ScheduleError) as e:
        getattr(s[s_scan], primitive)(*args)
    assert str(e.value).startswith(primitive + ":") and "scan" in str(e.value) and "hint:" in str(e.value)
    args = (s_update.op.axis[0], 2) if primitive == "split" else (s_update.op.axis[0],)
    with pytest.raises(sl.ScheduleError) as e:     # the update's first axis is the scan axis
        getattr(s[s_update], primitive)(*args)
    assert e.value.stage == "s_update" and e.value.axis == "t" and "i" in e.value.choices


def test_scan_axis_cannot_be_bound():
    X, _, s_update, s_scan = cumsum()
    s = sl.create_schedule(s_scan.op)
    with pytest.raises(sl.ScheduleError, match="serial"):
        s[s_scan].bind(s_scan.op.scan_axis, sl.thread_axis("blockIdx.x"))


def test_cell_stays_inside_the_scan_loop():
    X, s1, s2, s_scan = two_stage_cell()
    s = sl.create_schedule(s_scan.op)
    with pytest.raises(sl.ScheduleError, match="cell of scan 's_scan'") as e:
        s[s1].compute_root()
    assert "scan_axis" in e.value.hint
    with pytest.raises(sl.ScheduleError, match="update of scan"):
        s[s2].compute_at(s[s_scan], s_scan.op.scan_axis)


def test_init_placement_is_fixed():
    X, s_init, _, s_scan = cumsum()
    s = sl.create_schedule(s_scan.op)
    with pytest.raises(sl.ScheduleError, match="init of a scan"):
        s[s_init].compute_inline()


def test_scan_argument_errors():
    X, s_init, s_update, _ = cumsum()
    st = sl.placeholder((10, 37), name="st")
    with pytest.raises(ValueError, match="same number"):
        sl.scan([s_init], [s_update, s_update], [st])
    with pytest.raises(ValueError, match="fewer rows"):
        sl.scan(sl.compute((1, 3), lambda _, i: X[0, i]), s_update, st)
    with pytest.raises(TypeError, match="must be a placeholder"):
        sl.scan(s_init, s_update, s_update)


def test_schedule_steps_round_trip():
    X, s1, s2, s_scan = two_stage_cell()
    s = sl.create_schedule(s_scan.op)
    xo, xi = s[s2].split(s2.op.axis[1], factor=8)
    s[s1].compute_at(s[s_scan], s_scan.op.scan_axis)
    fresh = sl.create_schedule(s_scan.op).apply_json(s.to_json())
    assert sl.lower(fresh, [X, s_scan]) == sl.lower(s, [X, s_scan])
    replayed = sl.create_schedule(s_scan.op)
    exec(str(s), {"s": replayed})            # the schedule printed as Python rebuilds it
    assert sl.lower(replayed, [X, s_scan]) == sl.lower(s, [X, s_scan])


def test_extern_cannot_be_part_of_a_cell():
    m, n = 4, 3
    st = sl.placeholder((m, n), name="st")
    E = sl.extern((m, n), [st], lambda ins, outs: sl.call_packed("f", ins[0], outs[0]), name="E")
    init = sl.compute((1, n), lambda _, i: sl.const(0.0), name="init")
    upd = sl.compute((m, n), lambda t, i: E[t - 1, i] + 1, name="upd")
    with pytest.raises(ValueError, match="stage 'E' \\(ExternOp\\) reads the scan's state"):
        sl.scan(init, upd, st)


def test_inlined_cell_stage():
    X, s1, s2, s_scan = two_stage_cell()
    s = sl.create_schedule(s_scan.op)
    s[s1].compute_inline()
    assert "alloc s1" not in sl.lower(s, [X, s_scan])
    feed, [(_, out)], _ = run(s, [X, s_scan])
    np.testing.assert_allclose(out, numpy_two_stage(feed[X]), rtol=1e-4)


def test_dataflow_primitives_on_scan_stages_are_refused():
    X, s1, s2, s_scan = two_stage_cell()
    s = sl.create_schedule(s_scan.op)
    state = s_scan.op.state_placeholder[0]
    with pytest.raises(sl.ScheduleError, match="state placeholder of scan"):
        s.cache_read(state, "local", [s1])
    with pytest.raises(sl.ScheduleError, match="part of a scan"):
        s.cache_write(s2, "local")
    with pytest.raises(sl.ScheduleError, match="part of a scan"):
        s.cache_read(s2, "local", [s_scan])


def test_state_placeholder_is_not_an_argument():
    X, _, s_update, s_scan = cumsum()
    s = sl.create_schedule(s_scan.op)
    with pytest.raises(ValueError, match="pass the scan's result instead"):
        sl.lower(s, [X, s_scan.op.state_placeholder[0], s_scan])


def test_tvm_schedule_ops_scan_without_inputs():
    """TVM's test_te_schedule_ops.test_schedule_scan: a compute that does not depend on the
    state (nor on listed inputs) is outside the cell and computed once, before the scan."""
    m, n = 5, 6
    x = sl.compute((m, n), lambda i, j: sl.const(1, "float32"), name="x")
    s_state = sl.placeholder((m, n))
    s_init = sl.compute((1, n), lambda _, i: x[0, i])
    s_update = sl.compute((m, n), lambda t, i: s_state[t - 1, i] + x[t, i])
    res = sl.scan(s_init, s_update, s_state)
    assert tuple(res.shape) == (m, n)
    assert res.op.scan_axis.dom.min == 1
    assert res.op.cell_ops() == [s_update.op]
    s = sl.create_schedule(res.op)
    assert s[x].attach_type == "root" and s[s_update].attach_type == "at"
    _, [(_, out)], _ = run(s, [res])
    np.testing.assert_allclose(out, np.cumsum(np.ones((m, n), "float32"), axis=0))


def test_cell_is_what_lies_between_the_state_and_the_update():
    X, s1, s2, s_scan = two_stage_cell()
    assert s_scan.op.cell_ops() == [s1.op, s2.op]
