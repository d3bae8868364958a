"""lower() and build(): the pipeline from a schedule to a callable module, as a list of
named steps, keeping the text of every level."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

from .errors import ScheduleError
from .kernel import lower_to_kernel_ir
from .loop import lower_to_loop_ir, print_func
from .loop.nodes import Func
from .schedule import Schedule
from .schedule.annotate import BIND, PARALLEL as PARALLEL_ANNOTATION
from .target.target import Target
from .tile import lower_to_tile_ir
from .tensor.op import PlaceholderOp, Tensor
from .tensor.printer import print_tensor_ir

LEVELS = ("tensor", "loop", "tile", "kernel")


def _check_schedule(s) -> None:
    if not isinstance(s, Schedule):
        raise TypeError(f"expected a schedule from sl.create_schedule(...), got {type(s).__name__}")


def _enclosing_loops(stage) -> list:
    """(stage, axis) of every loop around the point where stage is computed, outermost first."""
    if stage.attach_type != "at":
        return []
    parent = stage.attach_stage
    pos = parent.leaf_iter_vars.index(stage.attach_ivar)
    return _enclosing_loops(parent) + [(parent, a) for a in parent.leaf_iter_vars[:pos + 1]]


def _check_parallel_nesting(s: Schedule) -> None:
    """A parallel loop inside another parallel loop (of the same stage, or of a stage it is
    computed in) would start threads from threads."""
    for st in s.stages:
        loops = _enclosing_loops(st) + [(st, a) for a in st.leaf_iter_vars]
        parallel = [(owner, a) for owner, a in loops if owner.annotations.get(a) is not None
                    and owner.annotations[a].kind == PARALLEL_ANNOTATION]
        if len(parallel) > 1:
            (outer_stage, outer), (inner_stage, inner) = parallel[0], parallel[1]
            raise ScheduleError("parallel", inner_stage.name, f"loop '{inner.name}' is parallel inside the parallel "
                                f"loop '{outer.name}' of stage '{outer_stage.name}'", axis=inner.name,
                                hint="parallelize one level only (fuse loops first to get more parallel work)")


def _check_target(s: Schedule, target: Target) -> None:
    if target.kind != "llvm":
        return
    for st in s.stages:
        for ivar, ann in st.annotations.items():
            if ann.kind == BIND:
                raise ScheduleError("bind", st.name, f"the axis is bound to {ann.thread_tag}, a GPU thread axis, "
                                    "which the llvm (CPU) target cannot run", axis=ivar.name,
                                    hint="use parallel()/vectorize() for the CPU, or build with target='cuda'")


def lower_all(s: Schedule, args: Sequence[Tensor], target: Target, name: Optional[str] = None,
              upto: str = "kernel") -> Dict[str, object]:
    """The levels of the pipeline in order, up to and including `upto`: Tensor IR text,
    Loop IR, Tile IR, Kernel IR. Only Kernel IR depends on the target."""
    _check_schedule(s)
    _check_parallel_nesting(s)
    levels: Dict[str, object] = {"tensor": print_tensor_ir(s.outputs, _stage_ops(s, args))}
    if upto == "tensor":
        return levels
    levels["loop"] = lower_to_loop_ir(s, args, name)              # what each stage computes
    if upto == "loop":
        return levels
    levels["tile"] = lower_to_tile_ir(s, args, name)              # the schedule applied
    if upto == "tile":
        return levels
    _check_target(s, target)
    levels["kernel"] = lower_to_kernel_ir(levels["tile"], target)  # kernels, launch geometry, vectors
    return levels


def _stage_ops(s: Schedule, args):
    """The operations of the scheduled program in stage order, including the stages the
    schedule added (cache_read/cache_write copies, rfactor partials)."""
    from .loop.plan import reachable_stages
    in_schedule = [a for a in args if isinstance(a, Tensor) and a.op in s._by_op]   # not unused placeholders
    reachable = reachable_stages(s, [s[o] for o in s.outputs] + [s[a] for a in in_schedule])
    return [st.op for st in s.stages if id(st) in reachable]


def lower(s: Schedule, args: Sequence[Tensor], name: Optional[str] = None, level: str = "tile",
          target="llvm", simple_mode: bool = False) -> str:
    """Readable text of a lowered schedule: level is one of tensor, loop, tile (default,
    the scheduled loop nest, like tvm.lower), kernel, or all. simple_mode is accepted for
    TVM compatibility: the text is always the simple form."""
    if level not in LEVELS + ("all",):
        raise ValueError(f"unknown IR level {level!r}; choose one of {', '.join(LEVELS + ('all',))}")
    levels = lower_all(s, args, Target.create(target), name, upto="kernel" if level == "all" else level)
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
    for b in levels["kernel"].params + levels["kernel"].temps:
        if b.size >= 2 ** 31:
            raise ValueError(f"tensor '{b.name}' has {b.size} elements; indices are 32-bit, so tensors are "
                             "limited to 2**31 - 1 elements for now")
    from .target.llvm.module import LLVMModule
    is_output = [not isinstance(a.op, PlaceholderOp) for a in args]
    return LLVMModule(levels["kernel"], is_output, target, {k: _text(v) for k, v in levels.items()})
