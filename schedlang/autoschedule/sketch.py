"""Sketch rules: the structural choices of a schedule, from Tensor IR analysis, as Ansor's
SketchGenerationRule (`MeetCondition` / `Apply`).

A sketch names, per stage, which rule shapes it; a sample (sample.py) applies each stage's
rule, which draws the numbers (tile sizes, split factors, ...) as decisions of a Trace, then
the target's annotation (which loops are parallel, vectorized, unrolled). Each rule is a
SketchRule object: `condition(s, st)` says whether it may shape stage st of a fresh
schedule s (Condition), `apply(trace, s, st, target)` shapes it.

A target's rules are one ordered list, a SketchRules that its backend returns
(`Backend.sketch_rules()`): the CPU rules (sketch_cpu.py) for llvm, the GPU rules
(sketch_gpu.py) for cuda. The rules a stage may take are those, in list order, whose
condition is not SKIP, up to and including the first APPLY_AND_SKIP_REST; the first is the
preferred one.
The sketches of a task are every combination of its stages' rules, in a fixed order.
"""
from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass
from typing import Callable, List, Sequence, Tuple

from ..schedule import legal
from ..target.registry import get_backend
from .task import SearchTask

MAX_SKETCHES = 16


class Condition(enum.Enum):
    """What a rule says of a stage, as Ansor's SketchGenerationRule::ConditionKind."""

    SKIP = "skip"                                  # the rule does not shape this stage
    APPLY = "apply"                                # one way to shape it; later rules may add others
    APPLY_AND_SKIP_REST = "apply_and_skip_rest"    # the last way: later rules are not asked


class SketchRule:
    """One way to shape a stage. `name` is what sketches and tuning records call it; a
    subclass defines condition and apply."""

    name: str = ""
    # True: the rule shapes its stage the same way in every candidate (no decisions of its own),
    # so the search lowers the loop nests of such stages once per task (fixed_nests.py)
    fixed: bool = False

    def supports(self, target) -> bool:
        """Whether the rule applies on this target at all (e.g. an architecture with the
        instructions it uses); True unless a rule says otherwise."""
        return True

    def condition(self, s, st) -> Condition:
        """Whether the rule may shape stage st of the fresh (unscheduled) schedule s."""
        raise NotImplementedError(f"sketch rule {self.name!r} defines no condition")

    def apply(self, trace, s, st, target) -> None:
        """Shape stage st of s through the schedule primitives, each random choice a decision
        of trace (sample.Trace); a ScheduleError is an illegal draw (the search prunes it)."""
        raise NotImplementedError(f"sketch rule {self.name!r} defines no apply")

    def __repr__(self) -> str:
        return f"<sketch rule {self.name}>"


class Inline(SketchRule):
    """An intermediate elementwise stage computed inside its consumers (the rule of every
    target). With keep_costly (CPUs), a guarded copy or costly math read at several places may
    also stay a stage of its own: the condition lets later rules (plain) add that choice."""

    name = "inline"

    def __init__(self, keep_costly: bool):
        self.keep_costly = keep_costly

    def condition(self, s, st) -> Condition:
        if not legal.can_inline(st):
            return Condition.SKIP
        keep = self.keep_costly and (legal.is_guarded_copy(st) or legal.costly_to_recompute(s, st))
        return Condition.APPLY if keep else Condition.APPLY_AND_SKIP_REST

    def apply(self, trace, s, st, target) -> None:
        st.compute_inline()


@dataclass(frozen=True)
class SketchRules:
    """One target's sketch generation: its rules in order (the first preferred), and the
    random annotation that completes a sample after the rules have shaped its stages
    (Ansor's init-population rules: parallel, vectorize, unroll, compute locations on a
    CPU; nothing on a GPU, whose rules bind every loop)."""

    rules: Tuple[SketchRule, ...]
    annotate: Callable = lambda trace, s, target: None
    # declares the tensor intrinsics the rules tensorize with: a candidate's steps name them by
    # key, so replaying them (a measurement worker, a resumed log) needs them declared first
    declare_intrinsics: Callable = lambda: None
    # seeds(task, sketches): (sketch, decisions) of candidates that redo a hand schedule, which
    # the search measures first (its elites start from them)
    seeds: Callable = lambda task, sketches: []

    def stage_rules(self, s, st, target=None) -> List[SketchRule]:
        """The rules that may shape stage st of s, the first preferred (with target: those
        that support it)."""
        out = []
        for rule in self.rules:
            if target is not None and not rule.supports(target):
                continue
            cond = rule.condition(s, st)
            if cond is not Condition.SKIP:
                out.append(rule)
            if cond is Condition.APPLY_AND_SKIP_REST:
                break
        return out


@dataclass(frozen=True)
class Sketch:
    """Per stage (by name, consumers first), the rule that shapes it."""

    rules: Tuple[Tuple[str, SketchRule], ...]

    @property
    def name(self) -> str:
        """The sketch as tuning records name it ("tile:C,inline:E"; "plain" when every stage
        keeps its loops)."""
        return ",".join(f"{rule.name}:{stage}" for stage, rule in self.rules if rule.name != "plain") or "plain"

    @property
    def rule_names(self) -> Tuple[Tuple[str, str], ...]:
        """(stage, rule name) per stage."""
        return tuple((stage, rule.name) for stage, rule in self.rules)


def sketch_rules(task: SearchTask) -> SketchRules:
    """The sketch rules of the task's target (its backend's)."""
    return get_backend(task.target.kind).sketch_rules()


def generate_sketches(task: SearchTask) -> List[Sketch]:
    """Every combination of the stages' rules (at most MAX_SKETCHES), in a fixed order."""
    rules = sketch_rules(task)
    s = task.schedule()
    stages = [st for st in reversed(s.stages) if legal.is_compute(st)]
    choices: Sequence = [[(st.name, rule) for rule in rules.stage_rules(s, st, task.target)] for st in stages]
    return [Sketch(tuple(combo)) for combo in itertools.islice(itertools.product(*choices), MAX_SKETCHES)]
