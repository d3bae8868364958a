"""Kernel IR expressions over a chunk's lanes, with the dtype's semantics: each value is a
numpy array over the lanes (or a 0-d array when uniform), in the dtype's compute type
(float16 computed as float32, as the CUDA C does); integer arithmetic wraps, and division
and modulo follow schedlang's defined behaviour (numpy's, as the reference evaluator's).
Loads read only the active lanes, so a guarded read outside its buffer is never made."""
from __future__ import annotations

import numpy as np

from ...dtypes import DType, to_bfloat16
from ...errors import InternalError
from ...expr.nodes import (Binary, Broadcast, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Ramp,
                           Select, Var)
from ...tensor.reference import BINARY, CALLS, COMPARE, extern_function, saturating_float_to_int
from .warp import shuffle


_COMPUTE = {}    # (kind, bits) -> numpy dtype (DType's own hash formats a string)


def compute_dtype(dt: DType) -> np.dtype:
    key = (dt.kind, dt.bits)
    out = _COMPUTE.get(key)
    if out is None:
        out = _COMPUTE[key] = np.dtype(np.float32) if dt.is_float and dt.bits == 16 else dt.numpy
    return out


_RULES = {}     # expression node type -> its Evaluator.eval_ rule
UNIFORM_CACHE = 1 << 16     # loop-index values a Machine keeps (Machine.uniform) before it starts over


def _index_vars(e: Expr):
    """The variables of an integer expression of Binary, Var and Const nodes only (a loop
    index's arithmetic), else None."""
    if not e.dtype.is_int:
        return None
    if type(e) is Var:
        return (e,)
    if type(e) is Const:
        return ()
    if type(e) is not Binary:
        return None
    a, b = _index_vars(e.a), _index_vars(e.b)
    return None if a is None or b is None else tuple(dict.fromkeys(a + b))


class Evaluator:
    """Evaluates the expressions of one statement under one mask; a shared subexpression is
    evaluated once (memo by node id, keeping the node alive)."""

    def __init__(self, machine, mask: np.ndarray, stmt):
        self.machine = machine
        self.env = machine.env
        self.mask = mask
        self.stmt = stmt
        self.memo = {}
        self._full = None

    @property
    def full(self) -> bool:
        """Whether every lane of the mask is active (asked once a statement, not once a load)."""
        if self._full is None:
            last = self.machine.last_mask      # (the statements of a loop body share their mask)
            if last[0] is not self.mask:
                last = self.machine.last_mask = (self.mask, bool(self.mask.all()))
            self._full = last[1]
        return self._full

    def eval(self, e: Expr):
        kind = type(e)
        if kind is Var:           # leaves: a lookup costs less than the memo's
            value = self.env.get(e)
            return self.eval_Var(e) if value is None else value
        if kind is Const:
            return self.eval_Const(e)
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        if kind is Binary:
            key = self._uniform_key(e)
            if key is not None:         # loop-index arithmetic: the same in every lane, kept per loop values
                uniform = self.machine.uniform
                hit = uniform.get(key)
                if hit is None:
                    if len(uniform) > UNIFORM_CACHE:
                        uniform.clear()
                    hit = uniform[key] = self._apply(e)
                    hit.setflags(write=False)
                return hit
        value = self._apply(e)
        self.memo[id(e)] = (e, value)
        return value

    def _uniform_key(self, e: Binary):
        """(id(e), the values of its loop variables) when e is integer arithmetic of loop
        variables and constants, all of them bound by loops now; else None."""
        known = self.machine.index_vars
        hit = known.get(id(e))
        if hit is None:
            hit = known[id(e)] = (e, _index_vars(e))
        names = hit[1]
        if names is None:
            return None
        loops = self.machine.loop_ints
        try:
            return (id(e),) + tuple([loops[v] for v in names])
        except KeyError:        # (a variable bound by a Let, or a launch axis: not per loop)
            return None

    def _apply(self, e: Expr):
        rule = _RULES.get(type(e))
        if rule is None:
            rule = _RULES[type(e)] = getattr(Evaluator, "eval_" + type(e).__name__, None)
            if rule is None:
                raise InternalError(f"the SIMT engine has no rule for {type(e).__name__} '{e}'")
        return rule(self, e)

    def under(self, mask: np.ndarray) -> "Evaluator":
        return Evaluator(self.machine, mask, self.stmt)

    def eval_Var(self, e: Var):
        if e not in self.env:
            raise InternalError(f"variable '{e.name}' is used outside the loop or let that defines it")
        return self.env[e]

    def eval_Const(self, e: Const):
        consts = self.machine.consts          # (the same constants in every iteration of a loop)
        hit = consts.get(id(e))
        if hit is not None:
            return hit[1]
        if e.dtype.is_bfloat:                   # rounded to bfloat16, as the CUDA C literal is
            value = to_bfloat16(e.value).astype(np.float32)
        else:
            value = np.asarray(e.value, dtype=compute_dtype(e.dtype))
        value.setflags(write=False)           # shared by every evaluation: nobody writes into it
        consts[id(e)] = (e, value)
        return value

    def eval_Binary(self, e: Binary):
        dt = compute_dtype(e.dtype)
        a, b = np.asarray(self.eval(e.a)), np.asarray(self.eval(e.b))
        if a.dtype != dt:
            a = a.astype(dt)
        if b.dtype != dt:
            b = b.astype(dt)
        out = BINARY[e.op](a, b)
        return out if type(out) is np.ndarray and out.dtype == dt else np.asarray(out).astype(dt, copy=False)

    def eval_Compare(self, e: Compare):
        return np.asarray(COMPARE[e.op](self.eval(e.a), self.eval(e.b)))

    def eval_Logical(self, e: Logical):
        fn = np.logical_and if e.op == "and" else np.logical_or
        return np.asarray(fn(self.eval(e.a), self.eval(e.b)))

    def eval_Not(self, e: Not):
        return np.asarray(np.logical_not(self.eval(e.a)))

    def eval_Select(self, e: Select):
        cond = self.eval(e.cond)
        if not e.guarded:      # both sides may be evaluated: both must be valid for every active lane
            return np.asarray(np.where(cond, self.eval(e.true_value), self.eval(e.false_value)))
        c = np.broadcast_to(cond, self.mask.shape) if np.ndim(cond) == 0 else cond
        t = self.under(self.mask & c if c.ndim == 1 else self.mask).eval(e.true_value)
        f = self.under(self.mask & ~c if c.ndim == 1 else self.mask).eval(e.false_value)
        return np.asarray(np.where(cond, t, f))

    def eval_Cast(self, e: Cast):
        value = np.asarray(self.eval(e.value))
        target = compute_dtype(e.dtype)
        if e.dtype.is_bfloat:                           # rounded to bfloat16, computed on as float
            return to_bfloat16(value).astype(np.float32)
        if e.dtype.is_float and e.dtype.bits == 16:     # rounded to half, computed on as float
            return value.astype(np.float16).astype(np.float32)
        if e.dtype.is_int and e.value.dtype.is_float:     # saturating, NaN to 0, as the CUDA C's sl_f2i
            return saturating_float_to_int(value, target)
        return value.astype(target)

    def eval_Call(self, e: Call):
        if e.name in ("shfl_down_sync", "shfl_sync"):
            mask, value, arg, width = e.args
            return shuffle(self.machine.chunk, e.name, int(mask.value), np.asarray(self.eval(value)),
                           np.asarray(self.eval(arg)), int(width.value), self.mask, self.stmt)
        args = [np.asarray(self.eval(a)).astype(compute_dtype(a.dtype), copy=False) for a in e.args]
        if e.name.startswith("extern:"):
            fn = extern_function(e.name[len("extern:"):])
            args = [a.astype(compute_dtype(e.dtype), copy=False) for a in args]
        elif e.name in CALLS:
            fn = CALLS[e.name]
        else:
            raise InternalError(f"the SIMT engine has no rule for the call '{e.name}'")
        return np.asarray(fn(*args)).astype(compute_dtype(e.dtype), copy=False)

    def eval_Load(self, e: Load):
        dt = self.machine.load_dtypes.get(e)      # (Load.dtype is computed on each access)
        if dt is None:
            dt = self.machine.load_dtypes[e] = compute_dtype(e.dtype)
        mask = self.mask
        if e.predicate is None:
            return self.machine.memory.load(e.buffer, self.eval(e.indices[0]), mask, self.stmt, dt, self.full)
        p = np.asarray(self.eval(e.predicate))
        if p.ndim <= 1:      # one predicate a thread: C's `p ? load : 0`
            mask = mask & np.broadcast_to(p, mask.shape)
            return self.machine.memory.load(e.buffer, self.eval(e.indices[0]), mask, self.stmt, dt)
        p = np.broadcast_to(p, (mask.size,) + p.shape[1:])      # one a vector lane
        return self.machine.memory.load(e.buffer, self.eval(e.indices[0]), mask[:, None] & p, self.stmt, dt)

    def eval_Ramp(self, e: Ramp):
        base = np.broadcast_to(np.asarray(self.eval(e.base)), self.mask.shape)
        stride = np.asarray(self.eval(e.stride))
        steps = np.arange(e.lanes, dtype=base.dtype)
        return base[..., None] + stride[..., None] * steps

    def eval_Broadcast(self, e: Broadcast):
        v = np.broadcast_to(np.asarray(self.eval(e.value)), self.mask.shape)
        return np.repeat(v[..., None], e.lanes, axis=-1)
