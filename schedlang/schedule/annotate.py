"""Loop annotations of a stage: unroll, vectorize, parallel, bind, pragma."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ScheduleError
from ..expr.nodes import as_expr
from ..loop.nodes import PREFETCH
from ..tensor.axis import DATA_PAR, REDUCE, THREAD, IterVar
from . import steps

UNROLL, VECTORIZE, PARALLEL, BIND = "unroll", "vectorize", "parallel", "bind"
# The pragmas lowering acts on; any other key is kept on the loop, printed in Tile and
# Kernel IR and otherwise ignored, as TVM's codegen ignores the pragmas it does not know.
PRAGMAS = {"auto_unroll_max_step": "unroll loops nested inside this one whose total trip count is at most the value",
           "unroll_explicit": "accepted for TVM compatibility; unrolling is always explicit here",
           "unroll_count": "the CPU backend asks LLVM's loop unroller for this many copies of the loop's body "
                           "(llvm.loop.unroll.count): cheaper to build than unroll() of a split, which copies "
                           "the body in schedlang's own IR",
           "fast_math": "True lets the stage's float arithmetic be reassociated and contracted (fma), "
                         "as Target(fast_math=True) does for a whole build"}
# The most copies of a loop body that unrolling may make, counting nested unrolled loops
# (their trip counts multiply, also across compute_at): every copy is emitted as LLVM IR,
# and LLVM's compile time grows faster than linearly with function size (a random conv2d
# schedule of ~9,000 LLVM lines took 1.9 s in the O3 pipeline). Beyond ~1024 copies a loop
# is faster kept as a loop anyway.
PRAGMA_VALUE_TYPES = (type(None), bool, int, float, str)
MAX_UNROLL = 1024


@dataclass(frozen=True)
class Annotation:
    """What a loop becomes: unrolled, vectorized, parallel, or bound to a GPU thread axis."""

    kind: str
    thread_tag: str = ""

    def __str__(self) -> str:
        return f"bind({self.thread_tag})" if self.kind == BIND else self.kind



def _check_unroll_product(primitive: str, stage: str, axis: str, loops) -> None:
    """loops: (name, trip count) of nested unrolled loops; their product is the number of body copies."""
    total = 1
    for _, ext in loops:
        total *= ext
    if total > MAX_UNROLL:
        product = " * ".join(f"{n}({e})" for n, e in loops)
        raise ScheduleError(primitive, stage, f"nested unrolled loops would make {product} = {total} copies of "
                            f"the body, more than the limit of {MAX_UNROLL} (MAX_UNROLL)", axis=axis,
                            hint="unroll fewer or shorter loops (split and unroll only the inner part)")


def check_unroll_products(schedule, enclosing_loops) -> None:
    """Refuse a schedule whose unrolled loops, nested through compute_at, multiply past
    MAX_UNROLL. enclosing_loops(stage) gives the (stage, axis) loops around its attach point."""
    for st in schedule.stages:
        loops = enclosing_loops(st) + [(st, a) for a in st.leaf_iter_vars]
        unrolled = [(owner, a) for owner, a in loops if owner.annotations.get(a) is not None
                    and owner.annotations[a].kind == UNROLL]
        if len(unrolled) > 1:
            named = [(a.name, owner.static_extents()[a]) for owner, a in unrolled]
            _check_unroll_product("unroll", st.name, unrolled[-1][1].name, named)


class AnnotationPrimitives:
    """Mixin of Stage: the primitives that say how a loop runs."""

    def _annotate(self, primitive: str, ivar: IterVar, ann: Annotation) -> None:
        self._require_schedulable(primitive)
        self._require_leaf(primitive, ivar)
        self._require_unannotated(primitive, ivar)
        self._touch()
        self.annotations[ivar] = ann

    def unroll(self, ivar: IterVar) -> None:
        """Replace the loop by copies of its body, one per iteration."""
        self._require_schedulable("unroll")
        self._require_leaf("unroll", ivar)
        extents = self.static_extents()
        ext = extents[ivar]
        if not isinstance(ext, int):
            raise ScheduleError("unroll", self.name, f"the loop's extent '{ext}' is symbolic; unrolling needs a "
                                "constant trip count", axis=ivar.name,
                                hint="split the axis by a constant factor and unroll the inner part")
        if ext > MAX_UNROLL:
            raise ScheduleError("unroll", self.name, f"the loop has {ext} iterations; unrolling more than "
                                f"{MAX_UNROLL} would bloat the code", axis=ivar.name,
                                hint="split the axis and unroll the inner part")
        others = [a for a, ann in self.annotations.items() if ann.kind == UNROLL and a is not ivar]
        _check_unroll_product("unroll", self.name, ivar.name, [(a.name, extents[a]) for a in others] + [(ivar.name, ext)])
        self._annotate("unroll", ivar, Annotation(UNROLL))
        self._record(steps.Unroll(self.name, ivar.name))

    def vectorize(self, ivar: IterVar) -> None:
        """Run the loop's iterations as the lanes of vector instructions (a tail is guarded)."""
        self._require_schedulable("vectorize")
        self._require_leaf("vectorize", ivar)
        if ivar.kind == REDUCE:
            raise ScheduleError("vectorize", self.name, "cannot vectorize a reduction axis: its iterations "
                                "update the same output element", axis=ivar.name,
                                choices=[a.name for a in self.leaf_iter_vars if a.kind == DATA_PAR],
                                hint="vectorize a data-parallel axis, or rfactor the reduction first")
        self._annotate("vectorize", ivar, Annotation(VECTORIZE))
        self._record(steps.Vectorize(self.name, ivar.name))

    def parallel(self, ivar: IterVar) -> None:
        """Run the loop's iterations on all CPU cores."""
        self._require_schedulable("parallel")
        self._require_leaf("parallel", ivar)
        if ivar.kind == REDUCE:
            raise ScheduleError("parallel", self.name, "cannot parallelize a reduction axis: threads would "
                                "race on the same output element", axis=ivar.name,
                                choices=[a.name for a in self.leaf_iter_vars if a.kind == DATA_PAR],
                                hint="parallelize a data-parallel axis, or rfactor the reduction first")
        outer = [a.name for a, ann in self.annotations.items() if ann.kind == PARALLEL and a is not ivar]
        if outer:
            raise ScheduleError("parallel", self.name, f"loop '{outer[0]}' of the stage is already parallel; "
                                "nested parallel loops are not supported", axis=ivar.name,
                                hint="parallelize one loop per stage (fuse loops first for more parallelism)")
        self._annotate("parallel", ivar, Annotation(PARALLEL))
        self._record(steps.Parallel(self.name, ivar.name))

    def bind(self, ivar: IterVar, thread_ivar: IterVar) -> None:
        """Map the loop to a GPU thread axis (thread_axis("blockIdx.x") ...)."""
        self._require_schedulable("bind")
        self._require_leaf("bind", ivar)
        if not isinstance(thread_ivar, IterVar) or thread_ivar.kind != THREAD:
            raise ScheduleError("bind", self.name, f"the second argument must be a thread axis, got {thread_ivar!r}",
                                axis=ivar.name, hint="create one with sl.thread_axis('threadIdx.x')")
        if ivar.kind == REDUCE and not thread_ivar.thread_tag.startswith("threadIdx."):
            raise ScheduleError("bind", self.name, f"a reduction axis bound to {thread_ivar.thread_tag} would "
                                "split one output element's reduction over blocks (or virtual threads)",
                                axis=ivar.name, hint="bind the reduce axis to threadIdx.x (a cross-thread "
                                "reduction), or rfactor the reduction and bind the factored axis")
        for other, ann in self.annotations.items():
            if ann.kind == BIND and ann.thread_tag == thread_ivar.thread_tag and thread_ivar.thread_tag != "vthread":
                raise ScheduleError("bind", self.name, f"{thread_ivar.thread_tag} is already bound to axis '{other.name}'",
                                    axis=ivar.name, hint="each thread axis binds one loop of a stage; fuse the loops first")
        self._annotate("bind", ivar, Annotation(BIND, thread_ivar.thread_tag))
        self._record(steps.Bind(self.name, ivar.name, thread_ivar.thread_tag))

    def set_store_predicate(self, predicate) -> None:
        """Store the stage's result only where predicate holds (TVM's Stage.set_store_predicate):
        in a cross-thread reduction, which threads write the combined value (default: the one
        with the reduce axis's thread index 0). A thread_axis("threadIdx.x") variable in the
        predicate means the loop of this stage bound to it. It is not recorded as a step, so
        it is not in to_json()/to_python() or tuning records."""
        self._require_schedulable("set_store_predicate")
        predicate = as_expr(predicate)
        if not predicate.dtype.is_bool:
            raise ScheduleError("set_store_predicate", self.name, f"the predicate '{predicate}' has dtype "
                                f"{predicate.dtype}; it must be a condition",
                                hint="compare, e.g. s[B].set_store_predicate(tx.var == 0)")
        self._touch()                        # undone with the rest (Schedule.all_or_nothing, undo)
        self.store_predicate = predicate     # not a step: an expression has no JSON form (see build_key)

    def prefetch(self, tensor, ivar: IterVar, offset: int) -> None:
        """Prefetch, at the top of each iteration of ivar's loop, what the iteration offset
        iterations later reads from tensor (one of the stage's inputs, or its name), as TVM's
        Stage.prefetch. The CPU backend emits a prefetch into L1 (x86's prefetcht0) per cache
        line of each contiguous read of the tensor whose address is known at the top of the
        loop's body (target/llvm/prefetch.py); other backends ignore it. A prefetch is a hint
        that never faults: the last offset iterations prefetch past what the loop reads."""
        self._require_schedulable("prefetch")
        self._require_leaf("prefetch", ivar)
        names = [t.name for t in self.op.input_tensors]
        name = tensor if isinstance(tensor, str) else getattr(tensor, "name", None)
        if name not in names:
            raise ScheduleError("prefetch", self.name, f"{tensor!r} is not a tensor the stage reads",
                                axis=ivar.name, choices=names,
                                hint="prefetch one of the stage's inputs (after cache_read, the cache stage)")
        offset = self._require_positive("prefetch", "offset", offset, ivar)
        self._touch()
        self.pragmas.setdefault(ivar, []).append((PREFETCH, (name, offset)))
        self._record(steps.Prefetch(self.name, ivar.name, name, offset))

    def pragma(self, ivar: IterVar, key: str, value=None) -> None:
        """Attach a pragma `key` (with an optional value) to a loop, as TVM's Stage.pragma.

        The keys in PRAGMAS are honoured; "unroll" and "vectorize" are unroll()/vectorize(),
        as in TVM; any other key is kept on the loop and printed in Tile and Kernel IR, and
        code generation ignores it."""
        self._require_schedulable("pragma")
        self._require_leaf("pragma", ivar)
        if key == "unroll":
            return self.unroll(ivar)
        if key == "vectorize":
            return self.vectorize(ivar)
        if key == PREFETCH:       # what prefetch() leaves on a loop (moved with it by a fuse)
            if isinstance(value, tuple) and len(value) == 2:
                return self.prefetch(value[0], ivar, value[1])
            raise ScheduleError("pragma", self.name, f"the pragma {PREFETCH!r} is made by Stage.prefetch",
                                axis=ivar.name, hint=f"s[{self.name}].prefetch(tensor, axis, offset)")
        if not isinstance(key, str) or not key:
            raise ScheduleError("pragma", self.name, f"the pragma key must be a non-empty string, got {key!r}",
                                axis=ivar.name, hint=f"known keys: {', '.join(sorted(PRAGMAS))}")
        if not isinstance(value, PRAGMA_VALUE_TYPES):
            raise ScheduleError("pragma", self.name, f"the value of pragma {key!r} must be None, a bool, an int, "
                                f"a float or a str, got {value!r}", axis=ivar.name,
                                hint="pragma values are recorded in the schedule's steps, which serialise to JSON")
        if key == "auto_unroll_max_step":
            # any size: unroll_loops bounds the copies whatever the value
            value = self._require_positive("pragma", "auto_unroll_max_step", value, ivar, maximum=None)
        if key == "unroll_count":
            value = self._require_positive("pragma", "unroll_count", value, ivar, maximum=None)
            if value > MAX_UNROLL:
                raise ScheduleError("pragma", self.name, f"unroll_count is {value}, more than the limit of "
                                    f"{MAX_UNROLL} copies (MAX_UNROLL)", axis=ivar.name)
        self._touch()
        self.pragmas.setdefault(ivar, []).append((key, value))
        self._record(steps.Pragma(self.name, ivar.name, key, value))
