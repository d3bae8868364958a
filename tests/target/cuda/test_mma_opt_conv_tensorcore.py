"""TVM's "How to optimize convolution using TensorCores" (gallery/how_to/optimize_operators/
opt_conv_tensorcore.py, Siyuan Feng), ported by changing the import: the NHWCnc convolution,
its wmma intrinsics (tir.call_intrin of tvm_load_matrix_sync / tvm_fill_fragment /
tvm_mma_sync / tvm_store_matrix_sync) and its schedule, run on both emulators against numpy.

Differences: smaller sizes (batch 128, 3x3 images, 32 -> 128 channels: the schedule's tiles
need batch and out_channels / 16 to be multiples of 8; the tutorial's 256 x 14 x 14 x 256 ->
512 is 1.8 GMAC, minutes to emulate); the GPU timing at the end becomes an emulated run
checked against numpy (no GPU here); the lowered-IR prints are kept as calls."""
import numpy as np
import pytest

import schedlang as te       # the tutorial's `from tvm import te`
import schedlang as tvm      # tvm.lower / tvm.build / tvm.tir


class tir:      # the tvm.tir names the tutorial uses
    decl_buffer = staticmethod(te.decl_buffer)
    call_intrin = staticmethod(te.call_intrin)
    if_then_else = staticmethod(te.if_then_else)
    all = staticmethod(te.all)
    const = staticmethod(te.const)
    ir_builder = te.ir_builder


tvm.tir = tir

# The sizes of input and filter
batch_size = 128
height = 3
width = 3
in_channels = 32
out_channels = 128
kernel_h = 3
kernel_w = 3
pad_h = 1
pad_w = 1
stride_h = 1
stride_w = 1

# TensorCore shape
block_size = 16

assert batch_size % block_size == 0
assert in_channels % block_size == 0
assert out_channels % block_size == 0

# Input feature map: (N, H, W, IC, n, ic)
data_shape = (batch_size // block_size, height, width, in_channels // block_size, block_size, block_size)
# Kernel: (H, W, IC, OC, ic, oc)
kernel_shape = (kernel_h, kernel_w, in_channels // block_size, out_channels // block_size, block_size, block_size)
# Output feature map: (N, H, W, OC, n, oc)
output_shape = (batch_size // block_size, height, width, out_channels // block_size, block_size, block_size)


def algorithm():
    kh = te.reduce_axis((0, kernel_h), name="kh")
    kw = te.reduce_axis((0, kernel_w), name="kw")
    ic = te.reduce_axis((0, in_channels // block_size), name="ic")
    ii = te.reduce_axis((0, block_size), name="ii")

    # Algorithm
    A = te.placeholder(data_shape, name="A", dtype="float16")
    W = te.placeholder(kernel_shape, name="W", dtype="float16")
    Apad = te.compute(
        (batch_size // block_size, height + 2 * pad_h, width + 2 * pad_w, in_channels // block_size, block_size,
         block_size),
        lambda n, h, w, i, nn, ii: tvm.tir.if_then_else(
            tvm.tir.all(h >= pad_h, h - pad_h < height, w >= pad_w, w - pad_w < width),
            A[n, h - pad_h, w - pad_w, i, nn, ii],
            tvm.tir.const(0.0, "float16"),
        ),
        name="Apad",
    )
    Conv = te.compute(
        output_shape,
        lambda n, h, w, o, nn, oo: te.sum(
            Apad[n, h * stride_h + kh, w * stride_w + kw, ic, nn, ii].astype("float32")
            * W[kh, kw, ic, o, ii, oo].astype("float32"),
            axis=[ic, kh, kw, ii],
        ),
        name="Conv",
    )
    return A, W, Apad, Conv, (kh, kw, ic, ii)


def intrin_wmma_load_matrix(scope):
    n = 16
    A = te.placeholder((n, n), name="A", dtype="float16")
    BA = tvm.tir.decl_buffer(A.shape, A.dtype, scope="shared", data_alignment=32, offset_factor=256)
    C = te.compute((n, n), lambda i, j: A[i, j], name="C")
    BC = tvm.tir.decl_buffer(C.shape, C.dtype, scope=scope, data_alignment=32, offset_factor=256)

    def intrin_func(ins, outs):
        ib = tvm.tir.ir_builder.create()

        BA = ins[0]
        BC = outs[0]
        ib.emit(tvm.tir.call_intrin("handle", "tir.tvm_load_matrix_sync", BC.data, n, n, n, BC.elem_offset // 256,
                                    BA.access_ptr("r"), n, "row_major"))
        return ib.get()

    return te.decl_tensor_intrin(C.op, intrin_func, binds={A: BA, C: BC})


def intrin_wmma_gemm():
    n = 16
    A = te.placeholder((n, n), name="A", dtype="float16")
    B = te.placeholder((n, n), name="B", dtype="float16")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda ii, jj: te.sum(A[ii, k].astype("float") * B[k, jj].astype("float"), axis=k),
                   name="C")
    BA = tvm.tir.decl_buffer(A.shape, A.dtype, name="BA", scope="wmma.matrix_a", data_alignment=32,
                             offset_factor=256)
    BB = tvm.tir.decl_buffer(B.shape, B.dtype, name="BB", scope="wmma.matrix_b", data_alignment=32,
                             offset_factor=256)
    BC = tvm.tir.decl_buffer(C.shape, C.dtype, name="BC", scope="wmma.accumulator", data_alignment=32,
                             offset_factor=256)

    def intrin_func(ins, outs):
        BA, BB = ins
        (BC,) = outs

        def init():
            ib = tvm.tir.ir_builder.create()
            ib.emit(tvm.tir.call_intrin("handle", "tir.tvm_fill_fragment", BC.data, n, n, n, BC.elem_offset // 256,
                                        0.0))
            return ib.get()

        def update():
            ib = tvm.tir.ir_builder.create()
            ib.emit(tvm.tir.call_intrin("handle", "tir.tvm_mma_sync", BC.data, BC.elem_offset // 256, BA.data,
                                        BA.elem_offset // 256, BB.data, BB.elem_offset // 256, BC.data,
                                        BC.elem_offset // 256))
            return ib.get()

        return update(), init(), update()

    return te.decl_tensor_intrin(C.op, intrin_func, binds={A: BA, B: BB, C: BC})


def intrin_wmma_store_matrix():
    n = 16
    A = te.placeholder((n, n), name="A", dtype="float32")
    BA = tvm.tir.decl_buffer(A.shape, A.dtype, scope="wmma.accumulator", data_alignment=32, offset_factor=256)
    C = te.compute((n, n), lambda i, j: A[i, j], name="C")
    BC = tvm.tir.decl_buffer(C.shape, C.dtype, scope="global", data_alignment=32, offset_factor=256)

    def intrin_func(ins, outs):
        ib = tvm.tir.ir_builder.create()
        BA = ins[0]
        BC = outs[0]
        ib.emit(tvm.tir.call_intrin("handle", "tir.tvm_store_matrix_sync", BA.data, n, n, n, BA.elem_offset // 256,
                                    BC.access_ptr("w"), n, "row_major"))
        return ib.get()

    return te.decl_tensor_intrin(C.op, intrin_func, binds={A: BA, C: BC})


def schedule():
    A, W, Apad, Conv, (kh, kw, ic, ii) = algorithm()
    s = te.create_schedule(Conv.op)
    s[Apad].compute_inline()

    # Memory Scope
    AS = s.cache_read(Apad, "shared", [Conv])
    WS = s.cache_read(W, "shared", [Conv])
    AF = s.cache_read(AS, "wmma.matrix_a", [Conv])
    WF = s.cache_read(WS, "wmma.matrix_b", [Conv])
    ConvF = s.cache_write(Conv, "wmma.accumulator")

    # Scheduling the Computation
    block_row_warps = 4
    block_col_warps = 2
    warp_row_tiles = 2
    warp_col_tiles = 4
    warp_size = 32
    chunk = 2

    block_x = te.thread_axis("blockIdx.x")
    block_y = te.thread_axis("blockIdx.y")
    block_z = te.thread_axis("blockIdx.z")
    thread_x = te.thread_axis("threadIdx.x")
    thread_y = te.thread_axis("threadIdx.y")
    thread_z = te.thread_axis("threadIdx.z")

    nc, hc, wc, oc, nnc, ooc = Conv.op.axis
    block_k = s[Conv].fuse(hc, wc)
    s[Conv].bind(block_k, block_z)
    nc, nci = s[Conv].split(nc, factor=warp_row_tiles)
    block_i, nc = s[Conv].split(nc, factor=block_row_warps)
    oc, oci = s[Conv].split(oc, factor=warp_col_tiles)
    block_j, oc = s[Conv].split(oc, factor=block_col_warps)
    s[Conv].reorder(block_k, block_i, block_j, nc, oc, nci, oci, nnc, ooc)
    s[Conv].bind(block_i, block_x)
    s[Conv].bind(block_j, block_y)
    s[Conv].bind(nc, thread_y)
    s[Conv].bind(oc, thread_z)

    # Schedule local computation
    s[ConvF].compute_at(s[Conv], oc)
    n, h, w, o, nnf, oof = ConvF.op.axis
    ko, ki = s[ConvF].split(ic, factor=chunk)
    s[ConvF].reorder(ko, kh, ki, kw, n, o, nnf, oof, ii)

    # Move intermediate computation into each output compute tile
    s[AF].compute_at(s[ConvF], kw)
    s[WF].compute_at(s[ConvF], kw)

    # Schedule for A's share memory
    s[AS].compute_at(s[ConvF], kh)
    n, h, w, i, nn, ii = AS.op.axis
    tx, xo = s[AS].split(n, nparts=block_row_warps)
    ty, yo = s[AS].split(xo, nparts=block_col_warps)
    t = s[AS].fuse(nn, ii)
    to, ti = s[AS].split(t, factor=warp_size)
    s[AS].bind(tx, thread_y)
    s[AS].bind(ty, thread_z)
    s[AS].bind(ti, thread_x)

    # Schedule for W's share memory
    s[WS].compute_at(s[ConvF], kh)
    kh, kw, ic, o, ii, oo = WS.op.axis
    tx, xo = s[WS].split(o, nparts=block_row_warps)
    ty, yo = s[WS].split(xo, nparts=block_col_warps)
    t = s[WS].fuse(ii, oo)
    to, ti = s[WS].split(t, nparts=warp_size)
    s[WS].bind(tx, thread_y)
    s[WS].bind(ty, thread_z)
    s[WS].bind(to, thread_x)
    s[WS].vectorize(ti)
    print(tvm.lower(s, [A, W, Conv], simple_mode=True))

    # Lowering Computation to Intrinsics
    s[AF].tensorize(AF.op.axis[-2], intrin_wmma_load_matrix("wmma.matrix_a"))
    s[WF].tensorize(WF.op.axis[-2], intrin_wmma_load_matrix("wmma.matrix_b"))
    s[Conv].tensorize(nnc, intrin_wmma_store_matrix())
    s[ConvF].tensorize(nnf, intrin_wmma_gemm())
    print(tvm.lower(s, [A, W, Conv], simple_mode=True))
    return s, [A, W, Conv]


def reference(a, w):
    """The convolution in numpy, in the blocked layouts."""
    N, H, Wd, IC, n, ic = a.shape
    pad = np.zeros((N, H + 2 * pad_h, Wd + 2 * pad_w, IC, n, ic))
    pad[:, pad_h:pad_h + H, pad_w:pad_w + Wd] = a
    out = np.zeros(output_shape)
    for y in range(kernel_h):
        for x in range(kernel_w):
            out += np.einsum("nhwcab,cobd->nhwoad", pad[:, y:y + H, x:x + Wd], w[y, x].astype("float64"))
    return out


@pytest.mark.parametrize("engine", ["shim", "simt"])
def test_opt_conv_tensorcore_ports_by_changing_the_import(engine):
    s, args = schedule()
    func = tvm.build(s, args, "cuda")
    assert "sl_wmma_mma_f32_f16(" in func.get_source("cuda")
    rng = np.random.default_rng(0)
    a_np = rng.uniform(size=data_shape).astype("float16")
    w_np = rng.uniform(size=kernel_shape).astype("float16")
    c = np.zeros(output_shape, dtype="float32")
    func.emulate(a_np, w_np, c, engine=engine)
    np.testing.assert_allclose(c, reference(a_np, w_np), rtol=1e-4, atol=1e-3)
    if func.ptxas_info is not None:
        assert func.ptxas_info["Conv_kernel"].spill_bytes == 0
