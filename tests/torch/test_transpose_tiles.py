"""A pointwise kernel that writes a large input transposed runs in tiles of a cache line by a
cache line (schedules.transposed_axis, schedule_transpose_cpu): checked against eager torch,
bounds-checked, on odd shapes whose tiles have tails on both axes."""
import re
import warnings

import pytest
import torch

import schedlang.torch as slt
from schedlang.torch.schedules import TRANSPOSE_MIN_BYTES
from .helpers import Lambda



def compiled(fn, *xs, target="llvm -bounds-check"):
    m = Lambda(fn)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = slt.compile(m, list(xs), target=target)
        got, want = c(*xs), m(*xs)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert c.fallback_ops() == {}, c.fallback_ops()
    return re.sub(r"\n\s*if [^\n]*:", "", c.ir("tile"))     # (the tails' guards left out)


def tiled_across(tile: str, across: str, last: str) -> bool:
    """The nest has `across`.inner inside `last`.outer, with `last`.inner vectorized innermost."""
    return re.search(rf"for {re.escape(last)}\.outer in .*\n\s*for {re.escape(across)}\.inner in 0\.\.\d+:\n"
                     rf"\s*vectorized {re.escape(last)}\.inner", tile) is not None


CASES = {
    # (fn, shapes, dtype): every one larger than TRANSPOSE_MIN_BYTES, tails on both tile axes
    "t": (lambda x: x.t().contiguous() + 1, [(600, 515)], torch.float32),
    "nchw_to_nhwc": (lambda x: x.permute(0, 2, 3, 1).contiguous() * 2, [(1, 80, 61, 59)], torch.float32),
    "nhwc_to_nchw": (lambda x: torch.relu(x.permute(0, 3, 1, 2)).contiguous(), [(2, 47, 41, 70)], torch.float32),
    "plus_contiguous": (lambda x, y: x.t() + y, [(600, 515), (515, 600)], torch.float32),
    "float64": (lambda x: x.transpose(0, 1) - 0.5, [(400, 390)], torch.float64),
    "int32": (lambda x: x.t() * 3, [(520, 530)], torch.int32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_transposing_kernel_matches_eager_in_tiles(name):
    fn, shapes, dtype = CASES[name]
    torch.manual_seed(0)
    xs = [(torch.randn(s) * 100).to(dtype) for s in shapes]
    assert xs[0].numel() * xs[0].element_size() >= TRANSPOSE_MIN_BYTES
    tile = compiled(fn, *xs)
    assert re.search(r"vectorized \w+\.inner in 0\.\.\d+", tile), tile
    assert re.search(r"for \w+\.inner in 0\.\.\d+:\n\s*vectorized", tile), f"not tiled:\n{tile}"


def test_tile_axes_follow_the_read():
    x = torch.randn(2, 47, 41, 70)
    tile = compiled(lambda x: x.permute(0, 3, 1, 2).contiguous() + 1, x, target="llvm")
    names = re.findall(r"vectorized (\w+)\.inner", tile)
    assert len(names) == 1, tile
    across = re.findall(r"for (\w+)\.inner in 0\.\.\d+:\n\s*vectorized", tile)
    assert across, tile
    assert tiled_across(tile, across[0], names[0]), tile
    # the input's channel (read contiguously) is the output's axis 1: the tile's other side
    assert re.search(rf"{across[0]}\.outer", tile)


def test_small_or_contiguous_kernels_keep_rows():
    small = torch.randn(30, 40)
    tile = compiled(lambda x: x.t().contiguous() + 1, small, target="llvm")
    assert not re.search(r"for \w+\.inner in 0\.\.\d+:\n\s*vectorized", tile), tile
    big = torch.randn(600, 515)
    tile = compiled(lambda x: x * 2 + 1, big, target="llvm")
    assert not re.search(r"for \w+\.inner in 0\.\.\d+:\n\s*vectorized", tile), tile
