"""argmax, argmin, max.dim and min.dim over rows run on vector partials (schedules._vector_rfactor
with a tuple reducer that commutes, tensor/commutes.py): checked against eager torch,
bounds-checked, where the order of combination shows (ties in different lanes, NaNs, rows of
-inf), and a tuple reducer that keeps loop order on ties (TVM's) stays a scalar loop."""
import re
import warnings

import pytest
import torch

import schedlang as sl
import schedlang.torch as slt
from schedlang.tensor.commutes import commutes
from schedlang.torch.ops.reduce import argmax_reducer, argmin_reducer
from schedlang.torch.schedules import default_schedule
from tests import programs
from tests.helpers import assert_matches_reference
from .helpers import Lambda



def compiled_tile(fn, x, target="llvm -bounds-check"):
    m = Lambda(fn)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = slt.compile(m, [x], target=target)
        got, want = c(x), m(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
    return c.ir("tile")


def rows_with_ties(rows: int, cols: int, dtype=torch.float32) -> torch.Tensor:
    """Few distinct values (ties everywhere, in every lane), a NaN pair in one row (the first
    wins), a row of -inf, a row whose maximum repeats in a late lane before an early one."""
    torch.manual_seed(0)
    x = torch.randint(0, 4, (rows, cols)).to(dtype)
    if dtype.is_floating_point:
        x[1, cols - 3] = x[1, 37] = float("nan")
        x[2] = float("-inf")
    x[3] = 0
    x[3, 65] = x[3, 2] = 9          # lane 1 of the second vector ... and lane 2 of the first
    x[4, cols - 1] = x[4, cols - 2] = 7     # ties in the (masked) tail
    return x


FNS = {
    "argmax": lambda x: torch.argmax(x, -1),
    "argmin": lambda x: torch.argmin(x, -1),
    "max.dim": lambda x: x.max(-1),
    "min.dim": lambda x: x.min(-1),
}


@pytest.mark.parametrize("name", sorted(FNS))
@pytest.mark.parametrize("shape", [(8, 256), (5, 4096), (7, 1013)])   # 1013: a masked tail
def test_row_arg_reductions_match_eager_on_vector_partials(name, shape):
    tile = compiled_tile(FNS[name], rows_with_ties(*shape))
    assert re.search(r"vectorized r\.inner", tile), tile


@pytest.mark.parametrize("shape", [(1, 5003), (1, 32000)])
def test_one_long_row_arg_reduction(shape):
    x = rows_with_ties(5, shape[1])[3:4].clone()
    x[0, shape[1] - 1] = 9          # a tie in the last chunk
    compiled_tile(FNS["argmax"], x)
    compiled_tile(FNS["min.dim"], -x)


def test_integer_rows():
    compiled_tile(FNS["argmax"], rows_with_ties(6, 512, torch.int32))


def test_commutes_tells_index_tie_breaks_from_loop_order():
    x = sl.placeholder((4, 8), name="x")
    k = sl.reduce_axis((0, 8), name="k")
    for reducer in (argmax_reducer, argmin_reducer):
        v, _ = sl.compute((4,), lambda r: reducer((x[r, k], k.var.astype("int64")), axis=k), name="o")
        assert commutes(v.op.body.combiner)
    for kind in ("argmax", "argmin"):
        i, _ = sl.compute((4,), lambda r: programs.arg_reducer(kind)((k.var, x[r, k]), axis=k), name="o")
        assert not commutes(i.op.body.combiner)
    total = sl.compute((4,), lambda r: sl.sum(x[r, k], axis=k), name="t")
    assert commutes(total.op.body.combiner)


def test_tvm_argmax_keeps_loop_order():
    args, outs = programs_argmax(6, 256)
    s = default_schedule(outs, sl.Target.create("llvm"))
    assert_matches_reference(s, args)
    assert "vectorized" not in str(sl.lower(s, args))


def programs_argmax(rows, cols):
    reducer = programs.arg_reducer()
    x = sl.placeholder((rows, cols), name="x")
    k = sl.reduce_axis((0, cols), name="k")
    idx, val = sl.compute((rows,), lambda i: reducer((k.var, x[i, k]), axis=k), name="argmax")
    return [x, idx, val], [idx, val]
