"""x86 tensor intrinsics and the int8 dense that uses them (TVM's topi/x86/tensor_intrin.py
and dense_vnni): a u8 x s8 dot product of 4-element groups accumulated into int32 lanes.

    dot_int8_intrin(target)       VNNI (vpdpbusd) when the target's features have avx512vnni
                                  (16 lanes) or avxvnni (8 lanes); otherwise the same compute in
                                  plain code (int32 products summed), lanes from the vector width
    dense_int8(A, B, lanes)       C[i, j] = sum_k A[i, k] * B[j, k] (A uint8 [M, K], B int8 [N, K]),
                                  B packed [N/lanes, K/4, lanes, 4], both padded with zeros to whole
                                  groups, so odd M, N, K compute with the intrinsic on whole tiles
    schedule_dense_int8(s, C, intrin)   tiles j by lanes and k by 4, tensorizes, parallel rows
    dot_bf16_intrin(lanes)        c[lanes] (+)= a[2] . b[lanes, 2], bfloat16 pairs into float32
                                  lanes (vdpbf16ps, avx512bf16): what a bfloat16 Linear's register
                                  tile runs where bf16_dot_lanes(target) says the target has it
"""
from __future__ import annotations

import schedlang as sl

GROUP = 4     # bytes a VNNI lane sums
PAIR = 2      # bfloat16 values a vdpbf16ps lane sums
DPBF16PS = "llvm.x86.avx512bf16.dpbf16ps.512"
DPBF16PS_256 = "llvm.x86.avx512bf16.dpbf16ps.256"      # ymm: avx512bf16 with avx512vl


def _switched(target, sign: str = "+") -> set:
    """The features the target's switches turn on ("+") or off ("-")."""
    target = sl.Target.create(target)
    return {f[1:] for f in (getattr(target, "features", "") or "").split(",") if f.startswith(sign)}


def vnni_lanes(target) -> int:
    """int32 lanes of the target's VNNI dot product: 16 (avx512vnni), 8 (avxvnni), 0 (none).
    Read from the target's feature switches: a named CPU without -mattr says none."""
    on = _switched(target)
    if "avx512vnni" in on and "avx512f" in on:
        return 16
    if "avxvnni" in on:
        return 8
    return 0


def _declared(lanes: int):
    a = sl.placeholder((GROUP,), "uint8", name="a")
    b = sl.placeholder((lanes, GROUP), "int8", name="b")
    k = sl.reduce_axis((0, GROUP), name="k")
    c = sl.compute((lanes,), lambda j: sl.sum(a[k].astype("int32") * b[j, k].astype("int32"), axis=k), name="c")
    return a, b, c


def dot_u8s8s32_vnni(lanes: int = 16):
    """c[lanes] (+)= a[4] . b[lanes, 4] with llvm.x86.avx512.vpdpbusd.{512,256} (avx512vnni; the
    256-bit form is AVX-VNNI's too)."""
    name = {16: "llvm.x86.avx512.vpdpbusd.512", 8: "llvm.x86.avx512.vpdpbusd.256"}[lanes]
    a, b, c = _declared(lanes)
    acc = f"int32x{lanes}"

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def step(accumulate: bool):
            quad = sl.broadcast(sl.reinterpret("int32", aa.vload([0], "uint8x4")), lanes)
            vec_b = sl.reinterpret(acc, bb.vload([0, 0], f"int8x{lanes * GROUP}"))
            start = cc.vload([0], acc) if accumulate else sl.broadcast(sl.const(0, "int32"), lanes)
            return cc.vstore([0], sl.call_llvm_pure_intrin(acc, name, start, quad, vec_b))
        reset = cc.vstore([0], sl.broadcast(sl.const(0, "int32"), lanes))
        return step(False), reset, step(True)
    return sl.decl_tensor_intrin(c.op, intrin_func, name=f"dot_{lanes}x4_u8s8s32_vnni")


def dot_u8s8s32_plain(lanes: int):
    """The same compute in plain expressions (scalar int32 multiply-adds), for any target."""
    a, b, c = _declared(lanes)

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def dot(j):
            total = None
            for k in range(GROUP):
                term = aa[k].astype("int32") * bb[j, k].astype("int32")
                total = term if total is None else total + term
            return total

        def stmts(accumulate: bool):
            return [cc.vstore([j], cc[j] + dot(j) if accumulate else dot(j)) for j in range(lanes)]
        reset = [cc.vstore([j], sl.const(0, "int32")) for j in range(lanes)]
        return stmts(False), reset, stmts(True)
    return sl.decl_tensor_intrin(c.op, intrin_func, name=f"dot_{lanes}x4_u8s8s32_plain")


def dot_int8_intrin(target):
    """VNNI where the target has it, plain code otherwise (lanes: the target's int32 lanes)."""
    lanes = vnni_lanes(target)
    if lanes:
        return dot_u8s8s32_vnni(lanes)
    target = sl.Target.create(target)
    bits = getattr(target, "vector_bits", None) or 256
    return dot_u8s8s32_plain(max(4, min(16, bits // 32)))


def _ceil(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def dense_int8(A, B, lanes: int, name: str = "C"):
    """C[M, N] int32 = A[M, K] (uint8) x B[N, K] (int8)^T, through padded packed stages."""
    M, K = A.shape
    N, K2 = B.shape
    if K != K2:
        raise ValueError(f"dense_int8: A is [{M}, {K}] and B [{N}, {K2}]; the K extents differ")
    Kp, Np = _ceil(K, GROUP), _ceil(N, lanes)
    zero_u8, zero_i8 = sl.const(0, "uint8"), sl.const(0, "int8")
    A_pad = A if Kp == K else sl.compute((M, Kp), lambda i, k: sl.if_then_else(k < K, A[i, k], zero_u8), name="A_pad")
    B_packed = sl.compute((Np // lanes, Kp // GROUP, lanes, GROUP), lambda no, ko, ni, ki: sl.if_then_else(
        sl.all(no * lanes + ni < N, ko * GROUP + ki < K), B[no * lanes + ni, ko * GROUP + ki], zero_i8),
        name="B_packed")
    k = sl.reduce_axis((0, Kp), name="k")
    C_pad = sl.compute((M, Np), lambda i, j: sl.sum(
        A_pad[i, k].astype("int32") * B_packed[j // lanes, k // GROUP, j % lanes, k % GROUP].astype("int32"), axis=k),
        name=f"{name}_pad")
    if Np == N:
        return C_pad
    return sl.compute((M, N), lambda i, j: C_pad[i, j], name=name)


def schedule_dense_int8(s, C, intrin, lanes: int):
    """Tensorize the padded product with intrin (j by lanes, k by 4, the reduction's outer
    part in loops: the intrinsic's reset and update), rows in parallel."""
    C_pad = C if C.op.name.endswith("_pad") else C.op.input_tensors[0]
    for t in C_pad.op.input_tensors:
        if t.op.name in ("A_pad", "B_packed"):
            s[t].parallel(s[t].op.axis[0])
    if C_pad is not C:       # computed per row of C, whose split over whole tiles covers the padding
        ci, cj = s[C].op.axis
        s[C].split(cj, factor=lanes)
        s[C_pad].compute_at(s[C], ci)
        s[C].parallel(ci)
    i, j = s[C_pad].op.axis
    (k,) = s[C_pad].op.reduce_axis
    jo, ji = s[C_pad].split(j, factor=lanes)
    ko, ki = s[C_pad].split(k, factor=GROUP)
    s[C_pad].reorder(i, jo, ko, ji, ki)
    s[C_pad].tensorize(ji, intrin)
    if C_pad is C:
        s[C_pad].parallel(i)
    return s


def bf16_dot_lanes(target) -> int:
    """float32 lanes of the target's bfloat16 pair dot product (vdpbf16ps on zmm): 16 with
    avx512bf16 (which implies AVX-512 in LLVM, unless avx512f is switched off), else 0. Read
    from the target's feature switches, as vnni_lanes."""
    return 16 if "avx512bf16" in _switched(target) and "avx512f" not in _switched(target, "-") else 0


def bf16_dot_widths(lanes: int) -> tuple:
    """The float32 lanes of vdpbf16ps's forms on a target whose widest has lanes
    (bf16_dot_lanes): the zmm vector and the ymm one (avx512bf16 comes with avx512vl), or
    none where lanes is 0."""
    return (lanes, lanes // 2) if lanes else ()


def dot_bf16_intrin(lanes: int = 16):
    """c[lanes] (+)= a[2] . b[lanes, 2] in float32 from bfloat16 pairs, with
    llvm.x86.avx512bf16.dpbf16ps.512 (lanes 16; .256, its ymm form, for 8): a's pair
    broadcast as one 32-bit value to every lane, b's lanes x 2 values one vector (B packed [N / nr, K / 2, nr, 2]: prepack.py's
    "pair_panels"). Each lane adds the odd product, then the even one, to its sum (both
    products exact in float32; the instruction flushes subnormals to zero and rounds to
    nearest even)."""
    if lanes not in (16, 8):
        raise ValueError(f"dot_bf16_intrin: vdpbf16ps has 16 (zmm) or 8 (ymm) float32 lanes, not {lanes}")
    a = sl.placeholder((PAIR,), "bfloat16", name="a")
    b = sl.placeholder((lanes, PAIR), "bfloat16", name="b")
    k = sl.reduce_axis((0, PAIR), name="k")
    c = sl.compute((lanes,), lambda j: sl.sum(a[k].astype("float32") * b[j, k].astype("float32"), axis=k),
                   name="c")
    acc = f"float32x{lanes}"

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]
        zero = sl.broadcast(sl.const(0, "float32"), lanes)

        def step(accumulate: bool):
            pair = sl.broadcast(sl.reinterpret("int32", aa.vload([0], f"bfloat16x{PAIR}")), lanes)
            vec_a = sl.reinterpret(f"bfloat16x{lanes * PAIR}", pair)
            vec_b = bb.vload([0, 0], f"bfloat16x{lanes * PAIR}")
            start = cc.vload([0], acc) if accumulate else zero
            return cc.vstore([0], sl.call_llvm_pure_intrin(acc, DPBF16PS if lanes == 16 else DPBF16PS_256,
                                                           start, vec_a, vec_b))
        return step(False), cc.vstore([0], zero), step(True)
    return sl.decl_tensor_intrin(c.op, intrin_func, name=f"dot_{lanes}x2_bf16f32_avx512")
