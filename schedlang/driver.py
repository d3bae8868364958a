"""lower() and build(): the pipeline from a schedule to a callable module, as a list of
named steps, keeping the text of every level."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

from .errors import ScheduleError
from .kernel import lower_to_kernel_ir
from .loop import lower_to_loop_ir, print_func
from .loop.nodes import PARALLEL, For, Func
from .loop.functor import walk_stmts
from .schedule import Schedule
from .schedule.stage import BIND
from .target.target import Target
from .tensor.op import PlaceholderOp, Tensor
from .tensor.printer import print_tensor_ir

LEVELS = ("tensor", "loop", "tile", "kernel")


def _check_schedule(s) -> None:
    if not isinstance(s, Schedule):
        raise TypeError(f"expected a schedule from sl.create_schedule(...), got {type(s).__name__}")


def _check_parallel_nesting(func: Func, s: Schedule) -> None:
    def owner(var) -> str:
        for st in s.stages:
            if any(a.var is var for a in st.all_iter_vars):
                return st.name
        return "?"

    for x in walk_stmts(func.body):
        if isinstance(x, For) and x.kind == PARALLEL:
            for y in walk_stmts(x.body):
                if isinstance(y, For) and y.kind == PARALLEL:
                    raise ScheduleError("parallel", owner(y.var), f"loop '{y.var.name}' is parallel inside the parallel "
                                        f"loop '{x.var.name}' of stage '{owner(x.var)}'", axis=y.var.name,
                                        hint="parallelize one level only (fuse the loops first to get more parallelism)")


def _check_target(s: Schedule, target: Target) -> None:
    if target.kind != "llvm":
        return
    for st in s.stages:
        for ivar, ann in st.annotations.items():
            if ann.kind == BIND:
                raise ScheduleError("bind", st.name, f"the axis is bound to {ann.thread_tag}, a GPU thread axis, "
                                    "which the llvm (CPU) target cannot run", axis=ivar.name,
                                    hint="use parallel()/vectorize() for the CPU, or build with target='cuda'")


def lower_all(s: Schedule, args: Sequence[Tensor], target: Target, name: Optional[str] = None) -> Dict[str, object]:
    """Every level of the pipeline, in order: Tensor IR text, Loop IR, Tile IR, Kernel IR."""
    _check_schedule(s)
    loop_ir = lower_to_loop_ir(s, args, name)                  # what each stage computes
    from .tile import lower_to_tile_ir
    tile_ir = lower_to_tile_ir(s, args, name)                  # the schedule applied
    _check_parallel_nesting(tile_ir, s)
    _check_target(s, target)
    kernel_ir = lower_to_kernel_ir(tile_ir, target)            # kernels, launch geometry, vectors
    return {"tensor": print_tensor_ir(s.outputs), "loop": loop_ir, "tile": tile_ir, "kernel": kernel_ir}


def lower(s: Schedule, args: Sequence[Tensor], name: Optional[str] = None, level: str = "tile",
          target="llvm") -> str:
    """Readable text of a lowered schedule: level is one of tensor, loop, tile (default,
    the scheduled loop nest, like tvm.lower), kernel, or all."""
    if level not in LEVELS + ("all",):
        raise ValueError(f"unknown IR level {level!r}; choose one of {', '.join(LEVELS + ('all',))}")
    levels = lower_all(s, args, Target.create(target), name)
    texts = {k: _text(v) for k, v in levels.items()}
    if level == "all":
        return "\n\n".join(f"# ---- {k} IR ----\n{t}" for k, t in texts.items())
    return texts[level]


def _text(ir) -> str:
    if isinstance(ir, str):
        return ir
    if isinstance(ir, Func):
        return print_func(ir)
    return str(ir)


def build(s: Schedule, args: Sequence[Tensor], target="llvm", name: Optional[str] = None):
    """Compile a schedule into a callable module: mod(*arrays) with arrays in args order."""
    target = Target.create(target)
    levels = lower_all(s, args, target, name)
    if target.kind == "cuda":
        raise NotImplementedError("the cuda target is not available yet; build with target='llvm'")
    from .target.llvm.module import LLVMModule
    is_output = [not isinstance(s[a].op, PlaceholderOp) for a in args]
    return LLVMModule(levels["kernel"], is_output, target, {k: _text(v) for k, v in levels.items()})
