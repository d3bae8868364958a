"""Every kind of reducer on both targets, so that none is missing again (issue 15, item 8):
sum, max, min, prod, a user's comm_reducer of one value and of a tuple (argmax), each plain
and with init=, reduced serially and across threads (the reduce axis bound to threadIdx.x,
one warp and two; rfactor and the factored axis across threads, as in TVM's tutorial), on
the llvm target and on the cuda target through both CPU engines with their race checks,
against the reference evaluator."""
import numpy as np
import pytest

import schedlang as sl
from tests import programs
from tests.helpers import assert_close

ROWS, COLS = 5, 75


ABSMAX = sl.comm_reducer(lambda x, y: sl.max(sl.abs(x), sl.abs(y)), lambda t: sl.const(0, t), name="absmax")
ARGMAX = programs.arg_reducer()

# name: (reduce(X, I, i, k) -> a reduction, its init= value or None)
KINDS = {
    "sum": lambda X, I, i, k, init: sl.sum(X[i, k], axis=k, init=init),
    "max": lambda X, I, i, k, init: sl.max(X[i, k], axis=k, init=init),
    "min": lambda X, I, i, k, init: sl.min(X[i, k], axis=k, init=init),
    "prod": lambda X, I, i, k, init: sl.prod(X[i, k], axis=k, init=init),
    "comm_reducer": lambda X, I, i, k, init: ABSMAX(X[i, k] - 1.0, axis=k, init=init),
    "tuple_comm_reducer": lambda X, I, i, k, init: ARGMAX((I[i, k], X[i, k]), axis=k,
                                                          init=None if init is None else (sl.const(-7), init)),
}


def program(suffix=""):
    """Every kind, plain and with init= (a value read from the input, as TVM allows), as outputs
    of one schedule, every name ending in suffix; returns (X, I, outputs as (stage tensor, its
    output tensors))."""
    X = sl.placeholder((ROWS, COLS), name=f"X{suffix}")
    I = sl.placeholder((ROWS, COLS), "int32", name=f"I{suffix}")
    stages = []
    for name, make in KINDS.items():
        for with_init in (False, True):
            k = sl.reduce_axis((0, COLS), name=f"k_{name}_{int(with_init)}{suffix}")
            out = sl.compute((ROWS,), lambda i, make=make, k=k, w=with_init: make(X, I, i, k, X[i, 0] if w else None),
                             name=f"{name}{'_init' if with_init else ''}{suffix}")
            stages.append(out if isinstance(out, (list, tuple)) else (out,))
    return X, I, stages


def schedule(*hows):
    """The program once per way of reducing in hows (its names suffixed by the way when there
    are several), all in one schedule: the kernels of one module (one build, one ThreadSanitizer
    run). Returns (s, args): each program's X, I and outputs."""
    made = [(how, program(f"_{how}" if len(hows) > 1 else "")) for how in hows]
    s = sl.create_schedule([outs[0].op for _, (_, _, stages) in made for outs in stages])
    args = []
    for how, (X, I, stages) in made:
        schedule_stages(s, how, stages)
        args += [X, I] + [t for outs in stages for t in outs]
    return s, args


def schedule_stages(s, how, stages):
    for outs in stages:
        T = outs[0]
        st = s[T]
        if how == "serial_llvm":
            continue
        if how == "rfactor_llvm":
            ko, ki = st.split(st.op.reduce_axis[0], factor=8)
            TF = s.rfactor(T, ki)[0] if len(outs) > 1 else s.rfactor(T, ki)     # a tuple: one tensor a value
            s[TF].compute_at(s[T], s[T].op.axis[0])
            continue
        if how == "serial_cuda":       # one thread a row
            st.bind(st.op.axis[0], sl.thread_axis("threadIdx.x"))
            continue
        threads = 64 if how == "two_warps_cuda" else 32
        ko, ki = st.split(st.op.reduce_axis[0], factor=threads)
        if how == "rfactor_cuda":      # TVM's tutorial: the factored axis across threads
            TF = s.rfactor(T, ki)[0] if len(outs) > 1 else s.rfactor(T, ki)
            s[T].bind(s[T].op.reduce_axis[0], sl.thread_axis("threadIdx.x"))
            s[TF].compute_at(s[T], s[T].op.reduce_axis[0])
        else:
            st.bind(ki, sl.thread_axis("threadIdx.x"))
        s[T].bind(s[T].op.axis[0], sl.thread_axis("blockIdx.x"))


def inputs():
    rng = np.random.default_rng(1)
    x = rng.uniform(0.9, 1.1, (ROWS, COLS)).astype("float32")     # distinct: argmax has no ties; prod stays near 1
    return x, np.tile(np.arange(COLS, dtype="int32"), (ROWS, 1))


def arrays_and_feed(args):
    """The arguments' arrays (each X and I from inputs(), each output filled with 7) and the
    reference evaluator's feed."""
    x, idx = inputs()
    feed = {t: (x if str(t.dtype) == "float32" else idx) for t in args if isinstance(t.op, sl.tensor.PlaceholderOp)}
    return [feed[t] if t in feed else np.full(t.shape, 7, t.dtype_obj.numpy) for t in args], feed


def check(args, arrays, feed):
    outputs = [t for t in args if t not in feed]
    for t, want in zip(outputs, sl.reference(outputs, feed)):
        assert_close(arrays[args.index(t)], want, str(t.dtype), name=t.name)


def test_every_reducer_kind_is_enumerated():
    _, _, stages = program()
    assert len(stages) == 2 * len(KINDS) and len(KINDS) == 6


@pytest.mark.parametrize("how", ["serial_llvm", "rfactor_llvm"])
def test_every_reducer_kind_on_llvm(how):
    s, args = schedule(how)
    arrays, feed = arrays_and_feed(args)
    sl.build(s, args, target="llvm")(*arrays)
    check(args, arrays, feed)


def test_every_reducer_kind_on_cuda_both_engines():
    """Every way of reducing on cuda as the kernels of one module; each output is checked by
    name (its kind, then the way: sum_init_two_warps_cuda)."""
    pytest.importorskip("cuda.bindings")
    s, args = schedule("serial_cuda", "one_warp_cuda", "two_warps_cuda", "rfactor_cuda")
    mod = sl.build(s, args, target="cuda")
    for engine, options in (("shim", {"sanitize": "thread"}), ("simt", {})):
        arrays, feed = arrays_and_feed(args)
        mod.emulate(*arrays, engine=engine, **options)
        check(args, arrays, feed)
