"""Schedule invariance with symbolic shapes: a random schedule drawn for a static program
(random_schedules.Generator) is replayed on the same program with size variables for its
extents, built once, and run at the original sizes and at other ones against sl.reference.
An unroll of a loop whose extent became symbolic is refused with a ScheduleError, as it
should be, and left out of the replay."""
from __future__ import annotations

import numpy as np
import pytest

import schedlang as sl
from schedlang.expr.extent import evaluate_extent

from . import random_schedules as rs
from .random_schedules import Generator, all_programs, case_seed, checked_target, compare

PROGRAMS = all_programs()

# static program name -> (builder, its static arguments, which of them become size variables)
TWINS = {
    "gemm_13x7x33": (rs.gemm, (13, 7, 33), (0, 1, 2)),
    "gemm_1x33x13": (rs.gemm, (1, 33, 13), (0, 1, 2)),
    "softmax_7x33": (rs.softmax, (7, 33), (0, 1)),
    "eltwise_13x7": (rs.eltwise_chain, (13, 7), (0, 1)),
    "rowsum_13x33": (rs.row_reduce, (13, 33), (0, 1)),
    "blur_13x7": (rs.blur, (13, 7), (0, 1)),
    "masked_9x13": (rs.masked_reductions, (9, 13), (0, 1)),
    "conv2d_3x7x7_co4_k33_p1": (rs.conv2d, (3, 7, 7, 4, 3, 3, 1), (0, 1, 2, 3)),
}
CASES = 3
DEFAULT_CASES = 2       # the last case of each program runs in the slow set (-m slow); the default run keeps two
OTHER_SIZES = ((1, 1, 1, 1), (5, 2, 9, 3), (17, 31, 4, 6))    # per size variable, in order


def _symbolic_twin(name):
    builder, static, symbolic = TWINS[name]
    sizes = {}
    args = list(static)
    for i in symbolic:
        sizes[i] = sl.size_var(f"d{i}")
        args[i] = sizes[i]
    return builder(*args), [sizes[i] for i in symbolic], [static[i] for i in symbolic]


def _cases():
    for name in TWINS:
        for index in range(CASES):
            yield pytest.param(name, index, id=f"{name}-{index}",
                               marks=[pytest.mark.slow] if index >= DEFAULT_CASES else [])


@pytest.mark.parametrize("name,index", list(_cases()))
def test_random_schedule_replayed_on_symbolic_shapes(name, index):
    seed = case_seed(name, index)
    static_schedule = Generator(PROGRAMS[name], seed).run()
    program, size_vars, original = _symbolic_twin(name)
    s = program.schedule()
    for step in static_schedule.steps:
        try:
            step.apply(s)
        except sl.ScheduleError as e:    # only unroll may refuse: its loop's extent became symbolic
            assert step.primitive == "unroll" and "symbolic" in str(e), str(e)
    where = f"{name} case {index} (seed {seed}), schedule:\n{s.to_python()}"
    mods = [sl.build(s, program.args, target=checked_target()), sl.build(s, program.args)]
    rng = np.random.default_rng(seed)
    for values in [tuple(original)] + [o[:len(size_vars)] for o in OTHER_SIZES]:
        env = dict(zip(size_vars, values))
        inputs = [rng.uniform(-1, 1, size=tuple(evaluate_extent(n, env) for n in t.shape)).astype(t.dtype_obj.numpy)
                  for t in program.inputs]
        want = sl.reference(program.outputs, dict(zip(program.inputs, inputs)))
        for mod in mods:
            outs = [np.full(tuple(evaluate_extent(n, env) for n in o.shape), 7, o.dtype_obj.numpy) for o in program.outputs]
            mod(*inputs, *outs)
            for o, got, exp in zip(program.outputs, outs, want):
                problems = compare(got, exp, program.rtol, program.atol, o.name)
                assert not problems, f"sizes {values}: {problems}\n{where}"
