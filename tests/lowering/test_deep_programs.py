"""Programs as deep as real models make them: thousands of ops in a chain, hundreds of
intermediate buffers in one function, residual chains read by several reductions per layer.
Each is walked in loops rather than by recursion (Python stops at 1,000 frames), and the
frontend's fusion keeps what inlining builds bounded (timm's EfficientViT, XCiT, CaiT, CoaT,
gMLP ... failed to lower on the Allocate nesting; a 300-layer chain on the graph walks)."""
import numpy as np
import pytest

import schedlang as sl
from schedlang.expr.nodes import Buffer
from schedlang.loop.functor import substitute_stmt, walk_stmts
from schedlang.loop.nodes import Allocate, Evaluate
from schedlang.tensor.graph import post_order
from schedlang.tensor.op import ComputeOp, TensorRead
from schedlang.tensor.serialize import from_json, to_json
from schedlang.torch.fuse import fuse
from schedlang.expr.functor import children
from schedlang.dtypes import float32


def _chain(n, m=4):
    x = sl.placeholder((m,), name="x")
    y = x
    for k in range(n):
        y = sl.compute((m,), lambda i, y=y: y[i] * 0.5 + 1.0, name=f"y{k}")
    return x, y


def test_a_chain_of_thousands_of_ops_is_walked_and_serialised():
    x, y = _chain(3000)
    order = post_order([y.op])
    assert len(order) == 3001 and order[0] is x.op and order[-1] is y.op
    assert all(order.index(t.op) < k for k, op in enumerate(order) for t in op.input_tensors)
    text = to_json([x, y])
    again = from_json(text)
    assert to_json(list(again)) == text


def test_a_nest_of_thousands_of_allocates_is_walked():
    inner = Evaluate(sl.const(0, "int32"))
    s = inner
    for k in range(5000):
        s = Allocate(Buffer(f"b{k}", (4,), float32), s)
    assert sum(isinstance(t, Allocate) for t in walk_stmts(s)) == 5000
    same = substitute_stmt(s, {})
    assert same is s


def _inlined_size(s, stage):
    """Nodes of stage's body with every inlined stage substituted (counted per read)."""
    memo = {}

    def size(st):
        if st not in memo:
            total = 0
            for body in st.op.bodies:
                for node in _tree(body):
                    total += 1
                    if isinstance(node, TensorRead):
                        src = s[node.tensor.op]
                        if isinstance(src.op, ComputeOp) and src.attach_type == "inline":
                            total += size(src)
            memo[st] = total
        return memo[st]
    return size(stage)


def _tree(e):
    """Every node of e as a tree (a node reached twice is counted twice)."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def test_residual_chain_read_by_reductions_stays_bounded():
    """y = x + max_j x[i, j] per layer: inlining every add into the next layer's max and add
    doubles the expression per layer (2**40 nodes); fusion keeps some adds as buffers."""
    n, rows, cols = 40, 3, 9
    x = sl.placeholder((rows, cols), name="x")
    y = x
    for k in range(n):
        j = sl.reduce_axis((0, cols), name=f"j{k}")
        mx = sl.compute((rows,), lambda i, y=y, j=j: sl.max(y[i, j], axis=j), name=f"mx{k}")
        y = sl.compute((rows, cols), lambda i, c, y=y, mx=mx: y[i, c] * 0.5 + mx[i], name=f"add{k}")
    s = sl.create_schedule(y.op)
    fuse(s)
    assert max(_inlined_size(s, st) for st in s.stages if isinstance(st.op, ComputeOp)) < 10 ** 4
    assert any(st.attach_type != "inline" for st in s.stages if st.name.startswith("add") and st.op is not y.op)
    mod = sl.build(s, [x, y])
    a = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    want = a.astype(np.float64)
    for _ in range(n):
        want = want * 0.5 + want.max(axis=1, keepdims=True)
    out = np.zeros((rows, cols), np.float32)
    mod(a, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_a_long_elementwise_chain_is_cut_below_the_depth_bound():
    x, y = _chain(400, m=5)
    s = sl.create_schedule(y.op)
    groups = fuse(s)
    assert 2 <= len(groups) <= 20
    mod = sl.build(s, [x, y])
    a = np.arange(5, dtype=np.float32)
    want = a.astype(np.float64)
    for _ in range(400):
        want = want * 0.5 + 1.0
    out = np.zeros(5, np.float32)
    mod(a, out)
    np.testing.assert_allclose(out, want, rtol=1e-6)


@pytest.mark.slow
def test_a_300_layer_model_compiles():
    torch = pytest.importorskip("torch")
    import schedlang.torch as st

    class Deep(torch.nn.Module):
        def forward(self, x):
            for _ in range(300):
                x = torch.softmax(x * 1.5, dim=-1) + x
            return x

    x = torch.randn(4, 33)
    compiled = st.compile(Deep(), (x,))
    torch.testing.assert_close(compiled(x), Deep()(x), rtol=1e-5, atol=1e-4)
