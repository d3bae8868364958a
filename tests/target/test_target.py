"""Target: frozen per-kind options that check themselves, TVM-style target strings, and
CPU names checked against LLVM (never an LLVM abort)."""
import pickle

import numpy as np
import pytest

import schedlang as sl
from schedlang.target.llvm.jit import host_cpu
from tests import programs
from tests.cpu_targets import foreign_cpu_target
from tests.helpers import call_and_compare


def host_has(*features):
    on = {f[1:] for f in host_cpu()[1].split(",") if f.startswith("+")}
    return all(f in on for f in features)


# What LLVM's haswell and skylake-avx512 may use; running their code needs all of it.
HASWELL = ("avx2", "fma", "bmi", "bmi2", "lzcnt", "movbe", "f16c", "popcnt")
SKYLAKE_AVX512 = HASWELL + ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")


def test_options_are_frozen_and_read_through_the_target():
    t = sl.Target("llvm", bounds_check=True, threading="serial")
    assert isinstance(t.options, sl.LLVMOptions)
    assert t.bounds_check is True and t.threading == "serial" and t.options.num_threads == 0
    with pytest.raises(AttributeError):
        t.options.threading = "openmp"
    with pytest.raises(AttributeError):
        t.kind = "cuda"
    with pytest.raises(AttributeError, match="the cuda target has no option 'cpu'"):
        sl.Target("cuda").cpu
    assert sl.Target("cuda").warp_size == 32 and sl.Target("cuda").arch == "sm_90"
    assert sl.Target(bounds_check=True) == sl.Target("llvm", bounds_check=True)


def test_targets_compare_hash_and_pickle_by_value():
    a = sl.Target("llvm", num_threads=2)
    b = sl.Target("llvm", sl.LLVMOptions(num_threads=2))
    assert a == b and hash(a) == hash(b) and a != sl.Target("llvm")
    assert pickle.loads(pickle.dumps(a)) == a
    host = sl.Target.create("llvm")
    assert pickle.loads(pickle.dumps(host)) == host


@pytest.mark.parametrize("make, error, message", [
    (lambda: sl.Target("llvm", threading="tbb"), ValueError, "unknown threading 'tbb'"),
    (lambda: sl.Target("llvm", vector_bits=384), ValueError, "vector_bits must be one of 128, 256, 512"),
    (lambda: sl.Target("llvm", num_threads=-1), ValueError, "num_threads must be >= 0"),
    (lambda: sl.Target("llvm", num_threads=True), TypeError, "num_threads must be int"),
    (lambda: sl.Target("llvm", bounds_check=1), TypeError, "bounds_check must be bool"),
    (lambda: sl.Target("llvm", features="avx2"), ValueError, "malformed CPU feature 'avx2'"),
    (lambda: sl.Target("llvm", warp_size=32), TypeError, "the llvm target has no option 'warp_size'"),
    (lambda: sl.Target("cuda", arch="90"), ValueError, "malformed CUDA architecture '90'"),
    (lambda: sl.Target("cuda", warp_size=24), ValueError, "warp_size must be a power of two"),
    (lambda: sl.Target("cuda", max_threads_per_block=1000), ValueError, "multiple of the warp size"),
    (lambda: sl.Target("cuda", sl.LLVMOptions()), TypeError, "the cuda target takes CUDAOptions"),
    (lambda: sl.Target("opencl"), ValueError, "unknown target 'opencl'"),
    (lambda: sl.Target.create(42), TypeError, "target must be a string"),
    (lambda: sl.Target("llvm").with_options(treads=2), TypeError, "no option 'treads'"),
])
def test_bad_options_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_target_strings_as_tvm_writes_them():
    t = sl.Target("llvm -mcpu=haswell -mattr=+avx2,-avx512f -num-cores=4")
    assert (t.cpu, t.features, t.num_threads) == ("haswell", "+avx2,-avx512f", 4)
    want = sl.LLVMOptions(bounds_check=True, threading="serial")
    assert sl.Target("llvm -bounds-check -threading=serial").options == want
    c = sl.Target("cuda -arch=sm_80 -max_shared_memory_per_block=65536")
    assert (c.arch, c.max_shared_memory_per_block, c.warp_size) == ("sm_80", 65536, 32)
    assert str(c) == "cuda -arch=sm_80" and str(sl.Target("llvm -mcpu=haswell")) == "llvm -mcpu=haswell"


@pytest.mark.parametrize("spec, message", [
    ("llvm mcpu=haswell", "malformed option 'mcpu=haswell'"),
    ("llvm -mcpu", "malformed option '-mcpu'"),
    ("llvm -num-cores=four", "malformed option '-num-cores=four'"),
    ("llvm -mtriple=aarch64-linux-gnu", "target triple .aarch64-linux-gnu. is not this machine.s"),
    ("llvm -mattr=avx2", "malformed CPU feature 'avx2'"),
    ("cuda -mcpu=haswell", "unknown option -mcpu"),
    # unknown CPUs and features: a ValueError, not an LLVM abort
    ("llvm -mcpu=notacpu", "unknown CPU 'notacpu'"),
    ("llvm -mcpu=haswel", "unknown CPU 'haswel'.*did you mean haswell"),
    ("llvm -mcpu=cortex-a72", "unknown CPU 'cortex-a72'"),
    ("llvm -mattr=+avx3", "unknown CPU feature 'avx3'"),
    ("llvm -mcpu=haswell -mattr=-64bit", "LLVM cannot generate code for -mcpu=haswell -mattr=-64bit"),
])
def test_malformed_or_unknown_target_strings_are_value_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        sl.Target.create(spec)


def test_host_target_and_derived_vector_width():
    host = sl.Target.create("llvm")
    assert (host.cpu, host.features) == host_cpu()
    assert host.vector_bits == (512 if host_has("avx512f") else 256 if host_has("avx") else 128)
    assert sl.Target.create(host) == host                       # resolving is idempotent
    assert sl.Target.create("llvm -mcpu=haswell").vector_bits == 256
    assert sl.Target.create("llvm -mcpu=skylake-avx512").vector_bits == 512
    assert sl.Target.create("llvm -mcpu=skylake-avx512 -mattr=-avx512f").vector_bits == 256
    assert sl.Target.create("llvm -mcpu=x86-64").vector_bits == 128
    no512 = sl.Target.create("llvm -mattr=-avx512f")            # the host, without AVX-512
    assert no512.cpu == host.cpu and "-avx512f" in no512.features.split(",") and no512.vector_bits <= 256
    assert sl.Target.create(sl.Target("llvm", vector_bits=256)).vector_bits == 256   # an explicit width stays


def _vector_add(n=1024):
    A = sl.placeholder((n,), name="A")
    B = sl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = sl.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=64)
    s[B].vectorize(i)
    return s, [A, B]


def _check_runs(mod, n=1024):
    a = np.random.default_rng(0).standard_normal(n).astype("float32")
    b = np.zeros(n, "float32")
    mod(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_mcpu_haswell_compiles_for_avx2():
    s, args = _vector_add()
    mod = sl.build(s, args, target="llvm -mcpu=haswell")
    asm = mod.get_source("asm")
    assert "ymm" in asm and "zmm" not in asm
    assert '"target-cpu"="haswell"' in mod.get_source("ll")
    assert "# f32x16" in mod.ir["kernel"]     # strip-mined to 8-float registers, two at a time
    if host_has(*HASWELL):
        _check_runs(mod)


def test_mcpu_skylake_avx512_compiles_for_avx512():
    s, args = _vector_add()
    mod = sl.build(s, args, target="llvm -mcpu=skylake-avx512")
    assert "zmm" in mod.get_source("asm")
    assert "# f32x64" in mod.ir["kernel"]     # 4 registers of 16 floats: the 64-wide loop stays whole
    if host_has(*SKYLAKE_AVX512):
        _check_runs(mod)


def test_mattr_can_take_avx512_away():
    s, args = _vector_add()
    mod = sl.build(s, args, target="llvm -mcpu=skylake-avx512 -mattr=-avx512f")
    asm = mod.get_source("asm")
    assert "ymm" in asm and "zmm" not in asm


def test_gemm_for_a_named_cpu_matches_numpy_when_the_host_can_run_it():
    if not host_has(*HASWELL):
        pytest.skip("the host lacks haswell's features")
    A, B, C = programs.gemm(37, 45, 29)
    s = sl.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    s[C].vectorize(ji)
    s[C].parallel(io)
    mod = sl.build(s, [A, B, C], target=sl.Target("llvm -mcpu=haswell", bounds_check=True))
    call_and_compare(mod, s, [A, B, C], seed=1)


def test_a_module_for_a_cpu_this_machine_is_not_can_be_read_but_not_called():
    target, lacking = foreign_cpu_target()
    s, args = _vector_add()
    mod = sl.build(s, args, target=target)
    assert "define i32 @B(ptr" in mod.get_source() and mod.get_source("asm")
    with pytest.raises(RuntimeError, match=f"B cannot run here: code for CPU 'x86-64' uses what this machine "
                                           f".* lacks: {lacking}"):
        _check_runs(mod)
    if not host_has("avx512f"):
        with pytest.raises(RuntimeError, match="lacks: 512-bit vectors"):
            _check_runs(sl.build(s, args, target="llvm -mcpu=skylake-avx512"))


def test_why_not_runnable_on_a_pretend_avx2_host():
    from schedlang.target.llvm.cpus import why_not_runnable
    avx2_host = ("znver3", "+64bit,+avx,+avx2,+fma,-avx512f,-avx512bw")
    assert why_not_runnable(*avx2_host, *avx2_host) is None
    assert why_not_runnable("haswell", "", *avx2_host) is None
    assert why_not_runnable("skylake-avx512", "", *avx2_host).endswith("lacks: 512-bit vectors")
    assert why_not_runnable("skylake-avx512", "-avx512f", *avx2_host) is None
    assert "lacks: avx512bw, avx512f" in why_not_runnable("znver3", "+avx512f,+avx512bw", *avx2_host)
