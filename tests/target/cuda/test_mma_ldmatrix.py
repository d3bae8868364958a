"""ldmatrix x1/x2/x4, with and without .trans (target/cuda/intrin/mma.py), called directly from
a hand-written kernel: the shim's registers are the PTX ISA's thread -> row mapping (lane
8m + r addresses row r of matrix m; register m of lane 4g + t holds row g, columns 2t and
2t + 1, or with .trans rows 2t and 2t + 1 of column g), and NVRTC + ptxas take every variant."""

import numpy as np
import pytest

from schedlang.target.cuda import intrin, nvrtc, shim

VARIANTS = [(n, trans) for n in (1, 2, 4) for trans in (False, True)]


def kernel(n: int, trans: bool) -> str:
    name = f"sl_ldmatrix_x{n}" + ("_trans" if trans else "")
    return f"""
extern "C" __global__ void probe(const __half* __restrict__ in, __half* __restrict__ out) {{
  __shared__ __align__(16) __half tile[32 * 8];
  const int lane = threadIdx.x;
  for (int i = 0; i < 8; ++i) tile[lane * 8 + i] = in[lane * 8 + i];
  __syncthreads();
  __align__(16) __half regs[8];
  {name}(regs, &tile[(lane * 5 % 32) * 8]);     // lane l addresses row 5l mod 32 of the tile
  for (int i = 0; i < {2 * n}; ++i) out[lane * 8 + i] = regs[i];
}}
"""


def source(n: int, trans: bool) -> str:
    body = kernel(n, trans)
    return "#include <cuda_fp16.h>\n" + intrin.prelude([body]) + body


def expected(tile: np.ndarray, n: int, trans: bool) -> np.ndarray:
    """The PTX ISA's mapping, written independently of the shim's code."""
    rows = tile[(np.arange(32) * 5) % 32]          # the row lane l addressed
    out = np.zeros((32, 8), tile.dtype)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for m in range(n):
            for i in range(2):
                out[lane, 2 * m + i] = rows[8 * m + 2 * t + i, g] if trans else rows[8 * m + g, 2 * t + i]
    return out


@pytest.mark.parametrize("n, trans", VARIANTS)
def test_the_shim_gives_each_lane_the_ptx_isa_elements(n, trans):
    driver = ('extern "C" void sl_run(void** argv) { sl_shim::launch(dim3{1, 1, 1}, dim3{32, 1, 1}, '
              '[&] { probe((const __half*)argv[0], (__half*)argv[1]); }); }\n')
    library = shim.build(source(n, trans), driver, None)
    tile = np.arange(256, dtype=np.float16).reshape(32, 8)
    out = np.zeros((32, 8), np.float16)
    shim.run_in_process(library, [tile.ctypes.data, out.ctypes.data])
    np.testing.assert_array_equal(out, expected(tile, n, trans))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_and_ptxas_take_every_variant(arch):
    for n, trans in VARIANTS:
        ptx = nvrtc.compile_ptx(source(n, trans), arch, "probe")
        assert f"ldmatrix.sync.aligned.m8n8.x{n}{'.trans' if trans else ''}.shared.b16" in ptx
        info = nvrtc.ptxas_info(ptx, arch)
        if info is not None:
            assert info["probe"].spill_bytes == 0


