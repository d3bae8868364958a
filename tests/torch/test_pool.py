"""Pooling lowerings (ops/pool.py) against torch: odd shapes, padding, strides, dilation,
ceil_mode, count_include_pad, divisor_override, adaptive windows that do not divide the
input, NaN and -inf, float and integer dtypes. check_lowering builds each program
bounds-checked too, so a window tap read outside the input fails the test."""
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import schedlang.torch as st
from schedlang.torch.lower import lower_graph

from .helpers import check_lowering, has_dtype, lower

aten = torch.ops.aten
FLOATS = [torch.float32, torch.float64, torch.float16] + ([torch.bfloat16] if has_dtype(torch.bfloat16) else [])


def sample(*shape, dtype=torch.float32, seed=0):
    """Random values with NaN, inf and -inf at a few places (max pooling must keep them)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    if dtype.is_floating_point:
        flat = x.view(-1)
        flat[3], flat[17], flat[-2] = math.nan, -math.inf, math.inf
        return x.to(dtype)
    return (x * 20).to(dtype)


# kernel, stride, padding, dilation, ceil_mode
MAX_CASES = [([3, 3], [2, 2], [1, 1], [1, 1], False),      # the ResNet stem
             ([2, 2], [], [0, 0], [1, 1], False),           # stride defaults to the kernel
             ([3, 2], [2, 3], [1, 0], [1, 1], True),
             ([3, 3], [2, 2], [1, 1], [2, 2], True),
             ([1, 4], [1, 3], [0, 2], [1, 1], True),
             ([5, 5], [1, 1], [2, 2], [1, 1], False)]


# The first case in these dtypes runs by default (a narrow float, an integer); in float64, bfloat16
# and uint8 (the same widen/narrow and integer paths) with -m slow.
FAST_DTYPES = (torch.float16, torch.int64)


def pairs(cases, dtypes):
    """Every case in float32, the first in every other dtype (each build takes a while; the
    dtypes beyond FAST_DTYPES marked slow)."""
    return [(c, torch.float32) for c in cases] + [
        pytest.param(cases[0], d, marks=[] if d in FAST_DTYPES else [pytest.mark.slow]) for d in dtypes
        if d != torch.float32]


@pytest.mark.parametrize("case,dtype", pairs(MAX_CASES, FLOATS + [torch.int64, torch.uint8]), ids=repr)
def test_max_pool2d_values_and_indices(case, dtype):
    x = sample(2, 3, 13, 10, dtype=dtype)
    check_lowering(aten.max_pool2d_with_indices.default, (x, *case))


def test_max_pool_unbatched_3d_and_1d():
    check_lowering(aten.max_pool2d_with_indices.default, (sample(3, 9, 7), [3, 3], [2, 2], [1, 1]))
    check_lowering(aten.max_pool3d_with_indices.default,
                   (sample(1, 2, 5, 7, 6), [2, 3, 2], [2, 2, 1], [1, 1, 0], [1, 1, 2], True))
    check_lowering(aten.max_pool1d.default, (sample(2, 3, 11), [3], [2], [1], [1], True))


def test_max_pool_of_all_minus_inf_windows_returns_the_first_index():
    x = torch.full((1, 1, 4, 5), -math.inf)
    x[0, 0, 3, 4] = math.nan
    check_lowering(aten.max_pool2d_with_indices.default, (x, [3, 3], [2, 2], [1, 1], [1, 1], True))


AVG_CASES = [([3, 3], [2, 2], [1, 1], False, True, None),
             ([3, 3], [2, 2], [1, 1], False, False, None),
             ([3, 2], [2, 3], [1, 1], True, True, None),
             ([3, 2], [2, 3], [1, 1], True, False, None),
             ([2, 3], [], [0, 1], True, False, 5),
             ([4, 4], [3, 3], [2, 1], True, True, None)]


@pytest.mark.parametrize("case,dtype", pairs(AVG_CASES, FLOATS), ids=repr)
def test_avg_pool2d(case, dtype):
    check_lowering(aten.avg_pool2d.default, (sample(2, 3, 13, 10, dtype=dtype).nan_to_num(0, 0, 0), *case))


def test_avg_pool_1d_3d():
    check_lowering(aten.avg_pool3d.default, (sample(1, 2, 5, 7, 6).nan_to_num(0, 0, 0), [2, 3, 2], [1, 2, 2],
                                            [1, 1, 0], True, False, None))
    check_lowering(aten.avg_pool1d.default, (sample(2, 3, 11).nan_to_num(0, 0, 0), [3], [2], [1], True, False))


@pytest.mark.parametrize("out,dtype", pairs([[3, 4], [1, 1], [5, 5], [13, 10], [7, 3], [2, 10]], FLOATS),
                         ids=repr)
def test_adaptive_pools(out, dtype):
    x = sample(2, 3, 13, 10, dtype=dtype)
    check_lowering(aten._adaptive_avg_pool2d.default, (x.nan_to_num(0, 0, 0), out))
    check_lowering(aten.adaptive_max_pool2d.default, (x, out))


def test_adaptive_pools_1d_3d():
    x = sample(1, 2, 5, 7, 6)
    check_lowering(aten._adaptive_avg_pool3d.default, (x.nan_to_num(0, 0, 0), [2, 3, 4]))
    check_lowering(aten.adaptive_max_pool3d.default, (x, [3, 3, 4]))
    check_lowering(aten.adaptive_max_pool1d.default, (sample(2, 3, 11), [4]))
    check_lowering(aten.adaptive_avg_pool1d.default, (sample(2, 3, 11).nan_to_num(0, 0, 0), [4]))


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="half of the kernel"):
        lower(aten.max_pool2d_with_indices.default, (torch.randn(1, 1, 8, 8), [2, 2], [2, 2], [2, 2]))
    with pytest.raises(ValueError, match="empty"):
        lower(aten.avg_pool2d.default, (torch.randn(1, 1, 2, 2), [3, 3]))
    with pytest.raises(ValueError, match="4-d"):
        lower(aten.avg_pool2d.default, (torch.randn(2, 2, 1, 8, 8), [3, 3]))


class Pools(nn.Module):
    """The pools of CNNs through nn modules: what F.* and the layers export to."""

    def forward(self, x):
        a = F.max_pool2d(x, 3, 2, 1)
        b = F.avg_pool2d(x, 3, 2, 1, count_include_pad=False, ceil_mode=True)
        c = F.adaptive_avg_pool2d(x, (3, 5)) + F.adaptive_max_pool2d(x, (3, 5))
        d = F.max_pool1d(x.flatten(2), 4, 3, 1, ceil_mode=True)
        return a, b, c, d, torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


def test_pools_in_a_module_compile_whole_and_skip_unread_indices():
    x = torch.randn(2, 4, 11, 9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", st.FallbackWarning)
        compiled = st.compile(Pools(), (x,))
    assert compiled.fallback_ops() == {}
    for got, want in zip(compiled(x), Pools()(x)):
        torch.testing.assert_close(got, want)
    program = lower_graph(st.capture(Pools(), (x,)), warn=False)
    names = [n for p in program.parts for n in str(p).split() if "indices" in n]
    assert not names, f"the unread max-pool indices are computed: {names}"


# ---- default schedules: parallel rows, the window loops outside vector lanes

def _default(outputs):
    from schedlang.torch.schedules import default_schedule
    return default_schedule(outputs, "llvm")


@pytest.mark.parametrize("op,args", [
    (aten.max_pool2d_with_indices.default, ([3, 3], [2, 2], [1, 1], [1, 1], True)),
    (aten.avg_pool2d.default, ([3, 2], [2, 1], [1, 1], True, False)),
    (aten.avg_pool2d.default, ([2, 2],)),
    (aten._adaptive_avg_pool2d.default, ([5, 7],)),
    (aten.adaptive_max_pool2d.default, ([4, 9],)),
], ids=lambda v: str(v)[:40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_default_schedule_of_pools(op, args, dtype):
    check_lowering(op, (sample(2, 3, 13, 19, dtype=dtype).nan_to_num(0, 0, 0), *args), schedule=_default)


def test_pool_kernel_is_parallel_over_rows_and_vectorized_along_them():
    import schedlang as sl
    made, outs = lower(aten.max_pool2d_with_indices.default, (torch.randn(1, 8, 30, 40), [3, 3], [2, 2], [1, 1]))
    text = str(sl.lower(_default(outs[:1]), [t for t, _ in made] + outs[:1]))
    assert "parallel" in text and "vectorized" in text
    lines = text.splitlines()
    r1 = next(k for k, line in enumerate(lines) if "unrolled r1 in" in line)   # 9 taps: unrolled
    assert any("vectorized" in line for line in lines[r1:]), text      # the lanes inside the window loops
    made, outs = lower(aten.avg_pool2d.default, (torch.randn(1, 8, 30, 40), [2, 2]))
    text = str(sl.lower(_default(outs), [t for t, _ in made] + outs))
    assert "/ 4.0" in text, text                                     # whole windows: a constant divisor


def test_pools_and_resizes_on_cuda_in_emulation():
    pytest.importorskip("cuda.bindings")
    from .test_cuda_emulate import check_emulated, compile_cuda

    class Net(nn.Module):
        def forward(self, x):
            y = F.max_pool2d(F.relu(x), 3, 2, 1, ceil_mode=True)
            z = F.avg_pool2d(x, 2, count_include_pad=False, padding=1)
            return y, z + 1, F.adaptive_avg_pool2d(x, (3, 2)), F.interpolate(x, scale_factor=1.5, mode="bilinear")
    x = torch.randn(1, 3, 9, 7)
    check_emulated(compile_cuda(Net(), (x,)), Net(), (x,))


def test_only_windows_take_the_window_schedule():
    import schedlang as sl
    from schedlang.torch.fuse import fuse
    from schedlang.torch.window_schedules import is_window_group

    def kinds(op, args):
        _, outs = lower(op, args)
        return [is_window_group(g) for g in fuse(sl.create_schedule([outs[0].op]))]
    assert kinds(aten.max_pool2d_with_indices.default, (torch.randn(1, 2, 9, 9), [3, 3], [1, 1])) == [True]
    assert kinds(aten._adaptive_avg_pool2d.default, (torch.randn(1, 2, 9, 9), [4, 5])) == [True]
    assert kinds(aten.sum.dim_IntList, (torch.randn(4, 6, 8), [-1])) == [False]      # a row sum
    assert kinds(aten.sum.dim_IntList, (torch.randn(4, 8, 6), [1])) == [False]       # a column sum
