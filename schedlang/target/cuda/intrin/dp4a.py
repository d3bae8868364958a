"""sl_dot4_s8s8 (int32 += the dot product of 4 int8 pairs: __dp4a on sm_61+) and the tensor
intrinsic that calls it: c[0] (+)= sum_k a[k] * b[k] over k < 4, a and b 4-byte aligned."""
from __future__ import annotations

import schedlang as sl

from . import DeviceFunction, register

DOT4 = register(DeviceFunction("sl_dot4_s8s8", """\
__device__ __forceinline__ int sl_dot4_s8s8(int* c, const signed char* a, const signed char* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
  *c = __dp4a(*reinterpret_cast<const int*>(a), *reinterpret_cast<const int*>(b), *c);
#else
  *c += int(a[0]) * b[0] + int(a[1]) * b[1] + int(a[2]) * b[2] + int(a[3]) * b[3];
#endif
  return 0;
}
"""))


def dot4_s8s8_intrin():
    """A tensor intrinsic for c[1] = sum(a[4] * b[4]) in int32 (int8 inputs), its reduction
    split as reset (c = 0) and update (one sl_dot4_s8s8); a and b start at multiples of 4."""
    a = sl.placeholder((4,), "int8", name="a")
    b = sl.placeholder((4,), "int8", name="b")
    k = sl.reduce_axis((0, 4), name="k")
    c = sl.compute((1,), lambda i: sl.sum(a[k].astype("int32") * b[k].astype("int32"), axis=k), name="c")
    binds = {t: sl.decl_buffer((4,), "int8", t.op.name, offset_factor=4) for t in (a, b)}

    def intrin_func(ins, outs):
        update = sl.call_extern("int32", DOT4.name, outs[0].access_ptr("w"), ins[0].access_ptr("r"),
                                ins[1].access_ptr("r"))
        reset = outs[0].vstore([0], sl.const(0, "int32"))
        return [reset, update], reset, update
    return sl.decl_tensor_intrin(c.op, intrin_func, name="dot4_s8s8_dp4a", binds=binds)
