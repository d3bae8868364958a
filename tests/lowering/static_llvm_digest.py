"""Digests of the LLVM IR text of static programs, to show that symbolic-shape support leaves
static code byte-identical. Run it on two trees and diff the output:

    (cd /work/main && PYTHONPATH=$PWD python <this file>) > main.txt
    (cd <branch>  && PYTHONPATH=$PWD python <this file>) > branch.txt && diff main.txt branch.txt
"""
import hashlib, sys
import schedlang as sl
from schedlang.topi import cpu
from tests import programs as P

def cases():
    A, B, C = P.gemm(64, 48, 32)
    s = sl.create_schedule(C.op); yield "gemm_plain", s, [A, B, C]
    A, B, packed, C = P.packed_gemm(128, 128, 64, 32)
    s = cpu.schedule_matmul_packed(sl.create_schedule(C.op), C); yield "tvm_gemm", s, [A, B, C]
    X, Wt, pad, out = P.conv2d(1, 3, 10, 10, 4, 3)
    s = sl.create_schedule(out.op); s[pad].compute_inline(); yield "conv", s, [X, Wt, out]
    X, Wt, pad, out = P.conv2d(1, 3, 10, 10, 4, 3)
    s = sl.create_schedule(out.op); s[pad].compute_at(s[out], out.op.axis[2]); yield "conv_at", s, [X, Wt, out]
    X, mx, ex, tot, out = P.softmax(8, 37)
    s = sl.create_schedule(out.op); s[ex].compute_inline(); s[out].vectorize(out.op.axis[1]); yield "softmax", s, [X, out]
    A, Bs = P.row_sum(33, 17)
    s = sl.create_schedule(Bs.op); ko, ki = s[Bs].split(Bs.op.reduce_axis[0], factor=4)
    Rf = s.rfactor(Bs, ki); yield "rfactor", s, [A, Bs]
    x, out = P.silu_and_mul(8, 100)
    s = sl.create_schedule(out.op); o, i = s[out].split(out.op.axis[1], factor=16); s[out].vectorize(i)
    s[out].parallel(out.op.axis[0]); yield "silu", s, [x, out]
    A, B, C = P.gemm(30, 70, 20)
    s = sl.create_schedule(C.op); CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16); s[CC].compute_at(s[C], jo)
    AA = s.cache_read(A, "local", [CC]); s[AA].compute_at(s[CC], s[CC].op.reduce_axis[0])
    s[C].vectorize(ji); s[C].parallel(io); yield "gemm_cache", s, [A, B, C]
    A, B, C = P.gemm(30, 70, 20)
    s = sl.create_schedule(C.op); f = s[C].fuse(*C.op.axis); o, i = s[C].split(f, nparts=7); s[C].parallel(o)
    yield "fuse_nparts", s, [A, B, C]

def random_cases(per_program=3):
    """The first random schedules of every schedule-invariance program."""
    from tests.lowering.random_schedules import Generator, all_programs, case_seed
    for name, program in all_programs().items():
        for index in range(per_program):
            s = Generator(program, case_seed(name, index)).run()
            yield f"{name}-{index}", s, program.args


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


for tgt in ("llvm", sl.Target.create("llvm").with_options(bounds_check=True)):
    for name, s, args in cases():
        text = sl.build(s, args, target=tgt).get_source("ll")
        print(name, getattr(tgt, "bounds_check", False), digest(text), len(text))
for name, s, args in random_cases():
    mod = sl.build(s, args)
    print(name, digest(mod.get_source("ll")), digest(mod.ir["kernel"]), digest(mod.ir["tile"]))
