"""Tensor cores: ldmatrix (x1/x2/x4, .trans) and mma.sync.aligned.m16n8k16.row.col (f16 and bf16
in, f32 accumulate; f16 accumulate), as device functions whose GPU body is inline PTX and whose
shim body is the hardware's semantics with the real per-lane fragment layouts (PTX ISA,
"Matrix Fragments for mma.m16n8k16"), and the tensor intrinsics that bind them.

Fragments live in scope "warp": a warp-scope buffer of N elements is the warp's tile, of which
each lane holds N/32 (the renderer allocates N/32; only these intrinsics touch it). A fragment
buffer is a grid of tiles (A 16x16, B 16x8 as [k, n] or 8x16 as [n, k], C 16x8) and tile t
starts at element t * (tile elements / 32) of each lane's part, so a tile's per-lane address is
computed from the handle's elem_offset and leading stride (fragment_address).

Lane 4g + t (g = lane / 4, t = lane % 4) holds, the first of each pair in a register's low half:
    A (16x16): a0,a1 (g, 2t+i)  a2,a3 (g+8, 2t+i)  a4,a5 (g, 2t+8+i)  a6,a7 (g+8, 2t+8+i)
    B (k x n 16x8): b0,b1 (2t+i, g)  b2,b3 (2t+8+i, g)
    C, D (16x8): c0,c1 (g, 2t+i)  c2,c3 (g+8, 2t+i)
ldmatrix .m8n8.b16: lane 8m + r gives the address of row r of matrix m; register m of lane 4g + t
holds row g, columns 2t and 2t+1 of matrix m (.trans: rows 2t and 2t+1 of column g).

    s[A_frag].tensorize(ii, load_a_intrin("float16"))          # A_frag = cache_read(A_shared, "warp")
    s[C_frag].tensorize(ii, mma_intrin("float16", "float32"))  # C_frag = cache_write(C, "warp")
    s[C].tensorize(ii, store_c_intrin("float32"))
"""
from __future__ import annotations

import schedlang as sl

from ....expr.functor import free_vars
from ....expr.nodes import Load, Var
from ....tensor.intrin_calls import address_of
from . import FUNCTIONS, DeviceFunction, register

# element dtype -> (suffix of the functions, CUDA C type, PTX type)
ELEMENTS = {"float16": ("f16", "__half", "f16"), "bfloat16": ("bf16", "__nv_bfloat16", "bf16")}
ACCUMULATORS = {"float32": ("f32", "float"), "float16": ("f16", "__half")}
WARP = "warp"           # the fragments' memory scope

COMMON = register(DeviceFunction("sl_lane_id", r"""
// The thread's lane in its warp; the shim's semantics of the warp-collective tensor-core calls.
__device__ __forceinline__ unsigned sl_lane_id() {
#if defined(__CUDA_ARCH__)
  unsigned l;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
#else
  return sl_shim::lane;
#endif
}
#if !defined(__CUDA_ARCH__)
namespace sl_shim {
inline float to_float(__half h) { return __half2float(h); }
inline float to_float(__nv_bfloat16 h) { return __bfloat162float(h); }
inline float to_float(float f) { return f; }
inline void from_float(float f, float* out) { *out = f; }
inline void from_float(float f, __half* out) { *out = __float2half(f); }
// ldmatrix .m8n8 .b16 (see mma.py's docstring): n matrices, registers stored to r in order.
inline void ldmatrix(void* r, const void* row, int n, bool trans) {
  const void* rows[32];
  gather(rows, &row, sizeof row);
  const unsigned g = lane / 4, t = lane % 4;
  for (int m = 0; m < n; ++m)
    for (int i = 0; i < 2; ++i) {
      const auto* p = static_cast<const unsigned char*>(rows[8 * m + (trans ? 2 * t + i : g)]);
      std::memcpy(static_cast<unsigned char*>(r) + 4 * m + 2 * i, p + 2 * (trans ? g : 2 * t + i), 2);
    }
}
// mma.m16n8k16.row.col: d = a (16x16) * b (16x8) + d over the warp's fragments (mma.py's layouts).
template <class T, class Acc> inline void mma_m16n8k16(Acc* d, const T* a, const T* b) {
  struct Lane { float a[8], b[4]; } mine, all[32];
  for (int i = 0; i < 8; ++i) mine.a[i] = to_float(a[i]);
  for (int i = 0; i < 4; ++i) mine.b[i] = to_float(b[i]);
  gather(all, &mine, sizeof mine);
  const unsigned g = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float acc = to_float(d[i]);
    for (unsigned k = 0; k < 16; ++k)
      acc += all[4 * (row % 8) + (k % 8) / 2].a[k % 2 + 2 * (row / 8) + 4 * (k / 8)] *
             all[4 * col + (k % 8) / 2].b[k % 2 + 2 * (k / 8)];
    from_float(acc, &d[i]);
  }
}
}  // namespace sl_shim
#endif
"""))


def _ldmatrix(count: int, trans: bool) -> DeviceFunction:
    name = f"sl_ldmatrix_x{count}" + ("_trans" if trans else "")
    regs = ", ".join(f"%{i}" for i in range(count))
    outs = ", ".join(f'"=r"(r[{i}])' for i in range(count))
    return register(DeviceFunction(name, f"""
// ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16: this lane's row address in,
// its {count} register(s) out
__device__ __forceinline__ void {name}(void* out, const void* row) {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  unsigned* r = static_cast<unsigned*>(out);
  asm volatile("ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 {{{regs}}}, [%{count}];"
               : {outs} : "r"((unsigned)__cvta_generic_to_shared(row)) : "memory");
#elif defined(__CUDA_ARCH__)
#error "ldmatrix needs sm_75 or newer"
#else
  sl_shim::ldmatrix(out, row, {count}, {'true' if trans else 'false'});
#endif
}}
""", requires=(COMMON.name,), align=16, collective=True))


LDMATRIX = {(n, trans): _ldmatrix(n, trans) for n in (1, 2, 4) for trans in (False, True)}


def _mma(element: str, acc: str) -> DeviceFunction:
    e, ctype, ptx = ELEMENTS[element]
    a, actype = ACCUMULATORS[acc]
    name = f"sl_mma_m16n8k16_{a}_{e}"
    if acc == "float32":
        dregs, dops = "{%0, %1, %2, %3}", ", ".join(f'"+f"(d[{i}])' for i in range(4))
        first = 4
    else:     # f16 accumulate: two registers of two halves
        dregs, dops = "{%0, %1}", '"+r"(D[0]), "+r"(D[1])'
        first = 2
    aregs = ", ".join(f"%{first + i}" for i in range(4))
    bregs = f"%{first + 4}, %{first + 5}"
    return register(DeviceFunction(name, f"""
// mma.sync.aligned.m16n8k16.row.col.{a}.{ptx}.{ptx}.{a}: d (16x8) += a (16x16) * b (16x8), this lane's fragments.
__device__ __forceinline__ void {name}({actype}* d, const {ctype}* a, const {ctype}* b) {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned* A = reinterpret_cast<const unsigned*>(a);
  const unsigned* B = reinterpret_cast<const unsigned*>(b);
  {'' if acc == 'float32' else 'unsigned* D = reinterpret_cast<unsigned*>(d);'}
  asm volatile("mma.sync.aligned.m16n8k16.row.col.{a}.{ptx}.{ptx}.{a} {dregs}, {{{aregs}}}, {{{bregs}}}, {dregs};"
               : {dops} : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));
#elif defined(__CUDA_ARCH__)
#error "mma.sync m16n8k16 needs sm_80 or newer"
#else
  sl_shim::mma_m16n8k16(d, a, b);
#endif
}}
""", requires=(COMMON.name,), collective=True))


MMA = {(e, acc): _mma(e, acc) for e in ELEMENTS for acc in ACCUMULATORS}


def _loads(element: str):
    e, ctype, _ = ELEMENTS[element]
    # (name, ldmatrix used, this lane's row address in the tile, what it loads)
    specs = [(f"sl_mma_load_a_{e}", LDMATRIX[4, False], "tile + (l % 16) * ld + (l / 16) * 8",
              "the A fragment of a 16x16 row-major tile"),
             (f"sl_mma_load_b_kn_{e}", LDMATRIX[2, True], "tile + (l % 16) * ld",
              "the B fragment of a 16x8 tile stored [k][n] (transposed on the way)"),
             (f"sl_mma_load_b_nk_{e}", LDMATRIX[2, False], "tile + (l % 8) * ld + (l / 8 % 2) * 8",
              "the B fragment of a tile stored [n][k] (8x16)"),
             # two n8 fragments in one ldmatrix.x4: half the instructions for a warp tile's B
             (f"sl_mma_load_b_kn_x4_{e}", LDMATRIX[4, True], "tile + (l % 16) * ld + (l / 16) * 8",
              "the B fragments of a 16x16 tile stored [k][n] (columns 0-7, then 8-15)"),
             (f"sl_mma_load_b_nk_x4_{e}", LDMATRIX[4, False], "tile + (l % 8 + l / 16 * 8) * ld + (l / 8 % 2) * 8",
              "the B fragments of a 16x16 tile stored [n][k] (rows 0-7, then 8-15)")]
    out = {}
    for name, ld, address, what in specs:
        out[name] = register(DeviceFunction(name, f"""
// {what}, from shared memory with leading stride ld (a multiple of 8)
__device__ __forceinline__ void {name}({ctype}* frag, const {ctype}* tile, int ld) {{
  const unsigned l = sl_lane_id();
  {ld.name}(frag, {address});
}}
""", requires=(ld.name,), align=16))
    return out


LOADS = {e: _loads(e) for e in ELEMENTS}


def _accumulator_functions(acc: str):
    a, ctype = ACCUMULATORS[acc]
    store = register(DeviceFunction(f"sl_mma_store_c_{a}", f"""
// this lane's four elements of a 16x8 accumulator tile into dst (leading stride ld)
__device__ __forceinline__ void sl_mma_store_c_{a}({ctype}* dst, int ld, const {ctype}* frag) {{
  const unsigned l = sl_lane_id(), g = l / 4, t = l % 4;
  for (int i = 0; i < 4; ++i) dst[(g + 8 * (i / 2)) * ld + 2 * t + i % 2] = frag[i];
}}
""", requires=(COMMON.name,), collective=True))
    fill = register(DeviceFunction(f"sl_mma_fill_c_{a}", f"""
// this lane's four elements of a 16x8 accumulator tile set to v
__device__ __forceinline__ void sl_mma_fill_c_{a}({ctype}* frag, {ctype} v) {{
  for (int i = 0; i < 4; ++i) frag[i] = v;
}}
"""))
    return store, fill


ACC_FUNCTIONS = {acc: _accumulator_functions(acc) for acc in ACCUMULATORS}


def supported(target) -> bool:
    """Whether the target's GPU runs mma.sync m16n8k16 with bfloat16 and cp.async: sm_80 or newer."""
    arch = getattr(target, "arch", "")
    digits = arch[3:].rstrip("af")
    return arch.startswith("sm_") and digits.isdigit() and int(digits) >= 80


# ---- tensor intrinsics ----------------------------------------------------------------------

def fragment_address(handle, rows: int, cols: int):
    """The address of this lane's part of the rows x cols tile a warp-scope handle is bound to:
    tile t of the fragment buffer (tiles numbered row-major over its [rows, cols] grid, the
    buffer's leading stride a multiple of cols) starts at t * rows * cols / 32."""
    ld, off = handle.strides[0], handle.elem_offset
    tile = (off // ld) // rows * (ld // cols) + (off % ld) // cols
    return address_of(Load(handle.data, (tile * (rows * cols // 32) - off,)))


def _check(element: str, acc: str = None) -> None:
    if element not in ELEMENTS:
        raise ValueError(f"tensor-core fragments hold {' or '.join(ELEMENTS)}, not {element!r}")
    if acc is not None and acc not in ACCUMULATORS:
        raise ValueError(f"mma.m16n8k16 accumulates in {' or '.join(ACCUMULATORS)}, not {acc!r}")


def _handle(shape, dtype, name, scope, offset_factor=1):
    return sl.decl_buffer(shape, dtype, name, scope=scope, strides=[Var(f"{name}.ld"), 1],
                          offset_factor=offset_factor)


def load_a_intrin(element: str = "float16"):
    """A_frag[i, k] = A_shared[i, k] on a 16x16 tile: one ldmatrix.x4 (A_frag in scope "warp")."""
    _check(element)
    src = sl.placeholder((16, 16), element, name="a_shared")
    frag = sl.compute((16, 16), lambda i, k: src[i, k], name="a_frag")
    binds = {src: _handle((16, 16), element, "a_shared", "shared", 8),
             frag: _handle((16, 16), element, "a_frag", WARP)}
    fn = LOADS[element][f"sl_mma_load_a_{ELEMENTS[element][0]}"]

    def body(ins, outs):
        return sl.call_extern("int32", fn.name, fragment_address(outs[0], 16, 16), ins[0].access_ptr("r"),
                              ins[0].strides[0])
    return sl.decl_tensor_intrin(frag.op, body, name=f"mma_load_a_{element}", binds=binds)


def load_b_intrin(element: str = "float16", layout: str = "kn", n: int = 8):
    """B_frag = B_shared on B tiles of the mma: stored [k][n] (16 x n, ldmatrix.trans) or [n][k]
    (n x 16); n = 8 loads one fragment (ldmatrix.x2), n = 16 two (ldmatrix.x4, the fragment of
    n 0-7 first). The fragment keeps the shared tile's layout; "nk" with n = 16 needs a fragment
    buffer 16 wide (schedule_matmul's), where the second 8 x 16 tile follows the first."""
    _check(element)
    if layout not in ("kn", "nk"):
        raise ValueError(f"load_b_intrin: layout is 'kn' (B[k, n]) or 'nk' (B[n, k]), not {layout!r}")
    if n not in (8, 16):
        raise ValueError(f"load_b_intrin: n is 8 (one fragment) or 16 (two), not {n!r}")
    shape = (16, n) if layout == "kn" else (n, 16)
    src = sl.placeholder(shape, element, name="b_shared")
    frag = sl.compute(shape, lambda r, c: src[r, c], name="b_frag")
    binds = {src: _handle(shape, element, "b_shared", "shared", 8), frag: _handle(shape, element, "b_frag", WARP)}
    x4 = "_x4" if n == 16 else ""
    fn = LOADS[element][f"sl_mma_load_b_{layout}{x4}_{ELEMENTS[element][0]}"]

    def body(ins, outs):
        # (the address of the first fragment: the second is the next tile either way)
        first = (16, 8) if layout == "kn" else (8, 16)
        return sl.call_extern("int32", fn.name, fragment_address(outs[0], *first), ins[0].access_ptr("r"),
                              ins[0].strides[0])
    return sl.decl_tensor_intrin(frag.op, body, name=f"mma_load_b_{layout}{x4}_{element}", binds=binds)


def mma_intrin(element: str = "float16", acc: str = "float32", layout: str = "kn"):
    """c[i, j] += sum_k a[i, k] * b[k, j] (b[j, k] with layout "nk") on one m16n8k16 tile, the
    products in acc: all three in scope "warp"; reset fills c with zeros."""
    _check(element, acc)
    a = sl.placeholder((16, 16), element, name="a")
    b = sl.placeholder((16, 8) if layout == "kn" else (8, 16), element, name="b")
    k = sl.reduce_axis((0, 16), name="k")
    if layout == "kn":
        c = sl.compute((16, 8), lambda i, j: sl.sum(a[i, k].astype(acc) * b[k, j].astype(acc), axis=k), name="c")
    else:
        c = sl.compute((16, 8), lambda i, j: sl.sum(a[i, k].astype(acc) * b[j, k].astype(acc), axis=k), name="c")
    binds = {t: _handle(t.shape, t.dtype, t.op.name, WARP) for t in (a, b, c)}
    mma = MMA[element, acc]
    fill = ACC_FUNCTIONS[acc][1]

    def body(ins, outs):
        fa, fb = ins
        update = sl.call_extern("int32", mma.name, fragment_address(outs[0], 16, 8),
                                fragment_address(fa, 16, 16), fragment_address(fb, *b.shape))
        reset = sl.call_extern("int32", fill.name, fragment_address(outs[0], 16, 8), sl.const(0, acc))
        return [reset, update], reset, update
    return sl.decl_tensor_intrin(c.op, body, name=f"mma_m16n8k16_{layout}_{element}_{acc}", binds=binds)


def store_c_intrin(acc: str = "float32", scope: str = "global"):
    """C[i, j] = C_frag[i, j] on a 16x8 accumulator tile, each lane its four elements."""
    _check("float16", acc)
    frag = sl.placeholder((16, 8), acc, name="c_frag")
    out = sl.compute((16, 8), lambda i, j: frag[i, j], name="c_out")
    binds = {frag: _handle((16, 8), acc, "c_frag", WARP), out: _handle((16, 8), acc, "c_out", scope)}
    store = ACC_FUNCTIONS[acc][0]

    def body(ins, outs):
        return sl.call_extern("int32", store.name, outs[0].access_ptr("w"), outs[0].strides[0],
                              fragment_address(ins[0], 16, 8))
    return sl.decl_tensor_intrin(out.op, body, name=f"mma_store_c_{acc}_{scope}", binds=binds)


# ---- wmma 16x16x16 (TVM's classic tensor-core tutorials) -----------------------------------
# Fragments in scopes "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator" (each lane 1/32, 8
# elements a 16x16 tile), the tiles of a fragment buffer contiguous (offset_factor 256: the
# blocked layouts of TVM's opt_conv_tensorcore), tile t at t * 8 of each lane's part. A lane
# holds the m16n8k16 layouts: A as mma's A; B (k x n) and C as two 16x8 tiles (n 0-7, 8-15),
# so a wmma mma is two mma.sync. Loads and stores are per-lane accesses of any memory.
WMMA_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
_WMMA_INDEX = {   # element i of a lane's 8: (row, column) in the 16x16 tile, g = lane / 4, t = lane % 4
    "a": ("g + 8 * (i / 2 % 2)", "2 * t + i % 2 + 8 * (i / 4)"),
    "b": ("2 * t + i % 2 + 8 * (i / 2 % 2)", "g + 8 * (i / 4)"),
    "c": ("g + 8 * (i / 2 % 2)", "2 * t + i % 2 + 8 * (i / 4)"),
}


def _wmma_functions(element: str):
    e, ctype, _ = ELEMENTS[element]
    out = {}
    for kind, (row, col) in _WMMA_INDEX.items():
        ty = "float" if kind == "c" else ctype
        name = f"sl_wmma_load_{kind}_{'f32' if kind == 'c' else e}"
        if name not in FUNCTIONS:
            out[name] = register(DeviceFunction(name, f"""
// wmma load_matrix_sync of a 16x16 row-major {kind} tile (leading stride ldm): this lane's 8 elements
__device__ __forceinline__ void {name}({ty}* frag, const {ty}* p, int ldm) {{
  const unsigned l = sl_lane_id(), g = l / 4, t = l % 4;
  for (unsigned i = 0; i < 8; ++i) frag[i] = p[({row}) * ldm + {col}];
}}
""", requires=(COMMON.name,), collective=True))
    name = f"sl_wmma_mma_f32_{e}"
    out[name] = register(DeviceFunction(name, f"""
// wmma mma_sync 16x16x16: d += a * b, as two mma.sync m16n8k16 (the columns 0-7 and 8-15)
__device__ __forceinline__ void {name}(float* d, const {ctype}* a, const {ctype}* b) {{
  {MMA[element, "float32"].name}(d, a, b);
  {MMA[element, "float32"].name}(d + 4, a, b + 4);
}}
""", requires=(MMA[element, "float32"].name,)))
    return out


WMMA = {e: _wmma_functions(e) for e in ELEMENTS}
WMMA_STORE = register(DeviceFunction("sl_wmma_store_f32", f"""
// wmma store_matrix_sync of a 16x16 float accumulator tile, row-major with leading stride ldm
__device__ __forceinline__ void sl_wmma_store_f32(float* p, int ldm, const float* frag) {{
  const unsigned l = sl_lane_id(), g = l / 4, t = l % 4;
  for (unsigned i = 0; i < 8; ++i) p[({_WMMA_INDEX['c'][0]}) * ldm + {_WMMA_INDEX['c'][1]}] = frag[i];
}}
""", requires=(COMMON.name,), collective=True))
WMMA_FILL = register(DeviceFunction("sl_wmma_fill_f32", """
// wmma fill_fragment of a 16x16 float accumulator tile
__device__ __forceinline__ void sl_wmma_fill_f32(float* frag, float v) {
  for (int i = 0; i < 8; ++i) frag[i] = v;
}
"""))


def wmma_tile_address(handle):
    """This lane's part of the 16x16 tile a wmma fragment handle is bound to (tile elem_offset / 256)."""
    return address_of(Load(handle.data, (handle.elem_offset // 256 * 8 - handle.elem_offset,)))


def wmma_load_intrin(scope: str, element: str = "float16", src_scope: str = "shared"):
    """C = A on a 16x16 tile into a wmma fragment (TVM's intrin_wmma_load_matrix(scope))."""
    _check(element)
    if scope not in WMMA_SCOPES[:2]:
        raise ValueError(f"wmma loads into {' or '.join(WMMA_SCOPES[:2])}, not {scope!r}")
    src = sl.placeholder((16, 16), element, name="A")
    frag = sl.compute((16, 16), lambda i, j: src[i, j], name="C")
    binds = {src: _handle((16, 16), element, "A", src_scope),
             frag: sl.decl_buffer((16, 16), element, "C", scope=scope, offset_factor=256)}
    fn = WMMA[element][f"sl_wmma_load_{'a' if scope.endswith('_a') else 'b'}_{ELEMENTS[element][0]}"]

    def body(ins, outs):
        return sl.call_extern("int32", fn.name, wmma_tile_address(outs[0]), ins[0].access_ptr("r"), ins[0].strides[0])
    return sl.decl_tensor_intrin(frag.op, body, name=f"wmma_load_{scope}_{element}_{src_scope}", binds=binds)


def wmma_gemm_intrin(element: str = "float16"):
    """C[i, j] += sum_k A[i, k] * B[k, j] in float32 on 16x16x16 wmma fragments (intrin_wmma_gemm)."""
    _check(element)
    a = sl.placeholder((16, 16), element, name="A")
    b = sl.placeholder((16, 16), element, name="B")
    k = sl.reduce_axis((0, 16), name="k")
    c = sl.compute((16, 16), lambda i, j: sl.sum(a[i, k].astype("float32") * b[k, j].astype("float32"), axis=k),
                   name="C")
    binds = {t: sl.decl_buffer((16, 16), t.dtype, t.op.name, scope=scope, offset_factor=256)
             for t, scope in zip((a, b, c), WMMA_SCOPES)}
    mma = WMMA[element][f"sl_wmma_mma_f32_{ELEMENTS[element][0]}"]

    def body(ins, outs):
        update = sl.call_extern("int32", mma.name, wmma_tile_address(outs[0]), wmma_tile_address(ins[0]),
                                wmma_tile_address(ins[1]))
        reset = sl.call_extern("int32", WMMA_FILL.name, wmma_tile_address(outs[0]), sl.const(0, "float32"))
        return [reset, update], reset, update
    return sl.decl_tensor_intrin(c.op, body, name=f"wmma_gemm_{element}", binds=binds)


def wmma_store_intrin(scope: str = "global"):
    """C = the float32 accumulator tile, stored row-major (intrin_wmma_store_matrix)."""
    frag = sl.placeholder((16, 16), "float32", name="A")
    out = sl.compute((16, 16), lambda i, j: frag[i, j], name="C")
    binds = {frag: sl.decl_buffer((16, 16), "float32", "A", scope="wmma.accumulator", offset_factor=256),
             out: _handle((16, 16), "float32", "C", scope)}

    def body(ins, outs):
        return sl.call_extern("int32", WMMA_STORE.name, outs[0].access_ptr("w"), outs[0].strides[0],
                              wmma_tile_address(ins[0]))
    return sl.decl_tensor_intrin(out.op, body, name=f"wmma_store_{scope}", binds=binds)


def call_intrin(dtype, name: str, *args):
    """TVM's tir.call_intrin for the wmma calls its tensor-core tutorials emit (tvm_load_matrix_sync,
    tvm_fill_fragment, tvm_mma_sync, tvm_store_matrix_sync: 16x16x16, row_major, a fragment
    named by its handle's data and the tile index elem_offset // 256), as calls of this library."""
    op = name[4:] if name.startswith("tir.") else name
    if op in ("tvm_load_matrix_sync", "tvm_store_matrix_sync"):
        data, m, n, k, index, ptr, ldm, layout = args
        _wmma_call_checks(op, (m, n, k), layout)
        if op == "tvm_store_matrix_sync":
            return sl.call_extern("int32", WMMA_STORE.name, ptr, ldm, _tile(data, index))
        kind = {"wmma.matrix_a": "a", "wmma.matrix_b": "b", "wmma.accumulator": "c"}.get(data.scope)
        suffix = "f32" if kind == "c" else ELEMENTS.get(str(data.dtype), ("?",))[0]
        fn = FUNCTIONS.get(f"sl_wmma_load_{kind}_{suffix}")
        if fn is None:
            raise ValueError(f"{name}: no wmma load into a {data.dtype} fragment in scope {data.scope!r}")
        return sl.call_extern("int32", fn.name, _tile(data, index), ptr, ldm)
    if op == "tvm_fill_fragment":
        data, m, n, k, index, value = args
        _wmma_call_checks(op, (m, n, k), "row_major")
        return sl.call_extern("int32", WMMA_FILL.name, _tile(data, index), sl.const(value, "float32"))
    if op == "tvm_mma_sync":
        d, di, a, ai, b, bi, c, ci = args
        if c is not d or str(ci) != str(di):
            raise ValueError(f"{name}: this library's mma_sync accumulates in place (C and D the same fragment)")
        fn = WMMA.get(str(a.dtype), {}).get(f"sl_wmma_mma_f32_{ELEMENTS.get(str(a.dtype), ('?',))[0]}")
        if fn is None:
            raise ValueError(f"{name}: wmma multiplies {' or '.join(ELEMENTS)} fragments, not {a.dtype}")
        return sl.call_extern("int32", fn.name, _tile(d, di), _tile(a, ai), _tile(b, bi))
    raise ValueError(f"call_intrin: {name!r} is not one of the wmma calls this library maps (tir.tvm_load_matrix_sync, "
                     "tir.tvm_fill_fragment, tir.tvm_mma_sync, tir.tvm_store_matrix_sync)")


def _wmma_call_checks(name: str, shape, layout: str) -> None:
    if tuple(int(x) for x in shape) != (16, 16, 16) or layout != "row_major":
        raise ValueError(f"{name}: this library's wmma is 16x16x16 row_major, not {tuple(shape)} {layout}")


def _tile(data, index):
    """This lane's part of tile `index` (elem_offset // 256) of the fragment handle whose data is data."""
    offset = [v for v in free_vars(index) if v.name == f"{data.name}.elem_offset"]
    if not offset:
        raise ValueError(f"a wmma fragment's tile index is its handle's elem_offset // 256, got {index}")
    return address_of(Load(data, (index * 8 - offset[0],)))
