"""Fusion decisions (schedlang/torch/fuse.py): which stages are inlined, which reductions are
computed inside which kernel, at how many leading axes."""
import time

import schedlang as sl
from schedlang.torch.fuse import MAX_INLINE_DEPTH, MAX_SHARED_LOADS, fuse
from tests.torch import frontend_like as P


def groups_of(program, *a, **kw):
    args, outs = program(*a, **kw)
    s = sl.create_schedule([t.op for t in outs])
    groups = fuse(s)
    return s, {g.anchor.name: {st.name: g.prefix[st] for st in g.attached} for g in groups}, groups


def inlined(s):
    return {st.name for st in s.stages if st.attach_type == "inline"}


def test_silu_and_mul_is_one_kernel_with_everything_inlined():
    s, groups, _ = groups_of(P.silu_and_mul)
    assert groups == {"mul": {}}
    assert inlined(s) == {"chunk_0", "chunk_1", "silu_neg", "silu_exp", "silu_add", "silu_reciprocal", "silu"}


def test_scalar_math_read_broadcast_is_computed_once():
    """cos/sin (a libm call per lane) of [S, D] read by [H, S, D]: kernels of their own, not
    recomputed per head; read element for element, cos is inlined as any elementwise op."""
    s, groups, _ = groups_of(P.rotary)
    assert {"cos", "sin"} <= set(groups) and "cos" not in inlined(s) and "sin" not in inlined(s)
    assert "full_cos" in inlined(s)


def test_rotary_tables_match_the_reference():
    from schedlang.torch.schedules import default_schedule
    from tests.helpers import assert_matches_reference
    args, outs = P.rotary(H=2, S=5, D=6)
    assert_matches_reference(default_schedule(outs), args)


def test_softmax_reductions_at_the_row_of_the_output():
    s, groups, _ = groups_of(P.softmax, (2, 5, 64))
    assert groups == {"softmax": {"softmax_amax": 2, "softmax_sum": 2}}
    assert inlined(s) == {"softmax_sub", "softmax_exp"}


def test_layer_norm_is_one_kernel():
    _, groups, _ = groups_of(P.layer_norm)
    assert groups == {"layer_norm": {"ln_sum": 1, "ln_sum_1": 1}}


def test_linear_epilogue_takes_the_matmul_and_the_transpose_is_inlined():
    s, groups, found = groups_of(P.linear, act="gelu")
    assert groups == {"gelu": {"mm": 2}}
    assert [st.name for st in found[0].matmuls] == ["mm"]
    assert {"permute", "addmm", "gelu_mul", "gelu_erf"} <= inlined(s)


def test_swiglu_materializes_the_matmul_input_and_fuses_gate_and_up():
    s, groups, _ = groups_of(P.swiglu)
    assert groups == {"down": {}, "mul": {"gate": 2, "up": 2}}
    assert "mul" not in inlined(s), "an elementwise stage feeding a matmul would be recomputed per column"
    assert "silu" in inlined(s)


def test_a_transposed_read_keeps_the_reduction_a_kernel_of_its_own():
    x = sl.placeholder((8, 8), name="x")
    k = sl.reduce_axis((0, 8), name="k")
    r = sl.compute((8,), lambda i: sl.sum(x[i, k], axis=k), name="r")
    out = sl.compute((8, 8), lambda i, j: x[i, j] / r[j], name="out")     # reads r by column
    s = sl.create_schedule(out.op)
    assert {g.anchor.name: g.attached for g in fuse(s)} == {"out": [], "r": []}


def test_a_reduction_read_by_two_kernels_stays_a_kernel():
    args, (mm,) = P.matmul_nn(8, 8, 8)
    a = sl.compute(mm.shape, lambda i, j: mm[i, j] + 1.0, name="a")
    b = sl.compute(mm.shape, lambda i, j: mm[i, j] * 2.0, name="b")
    s = sl.create_schedule([a.op, b.op])
    assert sorted(g.anchor.name for g in fuse(s)) == ["a", "b", "mm"]


def test_fusion_of_a_shared_dag_is_linear():
    """Each stage read twice by the next: walking paths would take 2**200 steps."""
    x = sl.placeholder((4, 16), name="x")
    k = sl.reduce_axis((0, 16), name="k")
    r = sl.compute((4,), lambda i: sl.max(x[i, k], axis=k), name="r")
    t = sl.compute((4, 16), lambda i, j: x[i, j] - r[i], name="t0")
    for n in range(200):
        prev = t
        t = sl.compute((4, 16), lambda i, j: prev[i, j] * prev[i, j] + 1.0, name=f"t{n + 1}")
    s = sl.create_schedule(t.op)
    start = time.perf_counter()
    groups = fuse(s)
    assert time.perf_counter() - start < 60     # milliseconds when linear; a loaded machine must not fail it
    # every t inlined into t200 would nest 600 levels deep, past what lowering walks: the chain
    # is cut into kernels of at most MAX_INLINE_DEPTH levels, a few dozen t's each
    assert groups[0].anchor.name == "t200"
    assert 600 // MAX_INLINE_DEPTH < len(groups) <= 200 // 8
    assert [st.name for g in groups for st in g.attached] == ["r"]


def test_a_shared_residual_stream_is_kept_where_it_loads_many_buffers():
    """A residual stream x_n = x_(n-1) + y_n * w_n read by the next block's reduction and by the
    next add: inlined, each block's reduction would load every earlier block's y and w again
    (HF ConvNeXt). A stage of two readers loading more than MAX_SHARED_LOADS elements stays a
    buffer, so no kernel loads more than about that many; a stage of one reader is inlined
    whatever it loads."""
    x = sl.placeholder((4, 16), name="x")
    k = sl.reduce_axis((0, 16), name="k")
    outs, blocks = [], 2 * MAX_SHARED_LOADS
    for n in range(blocks):
        y, w = sl.placeholder((4, 16), name=f"y{n}"), sl.placeholder((16,), name=f"w{n}")
        prev = x
        x = sl.compute((4, 16), lambda i, j: prev[i, j] + y[i, j] * w[j], name=f"x{n}")
        outs.append(sl.compute((4,), lambda i: sl.sum(x[i, k], axis=k), name=f"sum{n}"))
    s = sl.create_schedule([t.op for t in outs] + [x.op])
    fuse(s)
    kept = sorted(int(st.name[1:]) for st in s.stages if st.name.startswith("x") and st.attach_type != "inline"
                  and st.name != "x")
    assert kept and kept[-1] == blocks - 1              # (an output)
    assert all(b - a <= MAX_SHARED_LOADS // 2 for a, b in zip([-1] + kept, kept)), kept
    one = sl.placeholder((4, 16), name="one")
    chain = one
    for n in range(blocks):
        y, prev = sl.placeholder((4, 16), name=f"z{n}"), chain
        chain = sl.compute((4, 16), lambda i, j: prev[i, j] + y[i, j], name=f"c{n}")
    s = sl.create_schedule(chain.op)
    fuse(s)
    assert all(st.attach_type == "inline" for st in s.stages if st.name.startswith("c") and st.name != f"c{blocks - 1}")
