"""Kernel IR -> LLVM IR text for the host CPU.

One function per kernel (noalias buffer parameters), an entry function that allocates
the module's temporaries and runs the kernels in order, and for every parallel loop
an outlined body function started on all cores through OpenMP's GOMP_parallel (or
called directly when no OpenMP runtime is available).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple

from ...errors import InternalError, LoweringError
from ...expr.extent import ceil_div
from ...expr.functor import free_vars, walk
from ...dtypes import DType, int64
from ...expr.nodes import Buffer, Cast, Expr, Var
from ...expr.ranges import LoopRanges
from ...kernel.memory_plan import plan_arena
from ...kernel.nodes import Kernel, KernelModule, LaunchKind
from ...kernel.sizes import buffer_exprs
from ...limits import INT32_MAX
from ...loop.functor import buffers_used, stmt_exprs, walk_stmts
from ...loop.nodes import PARALLEL, PREFETCH, SERIAL, Allocate, Barrier, CallPacked, Evaluate, For, IfThen, Let, Seq, Stmt, Store
from ..library_names import is_library_name
from ..target import Target
from . import packed, temps
from .builder import FunctionText
from .emit_expr import ExprEmitter
from .forksafe import SERIAL_FLAG
from .loop_hints import wrapped_loop_vars
from .memory import OOB_GLOBALS, MemoryEmitter
from .prefetch import emit_prefetches
from .profile import KernelClock
from .streaming import SFENCE, streaming_buffers
from .status import OOB_REPORT, STATUS, emit_alloc_failed
from .types import compute_type, scalar_memory

# A function keeps at most 1 MiB of local buffers on its stack, in total; the rest live on
# the heap. Kernels run on the caller's thread or an OpenMP worker, whose stacks are the
# pthread default (RLIMIT_STACK, usually 8 MiB; often 2 MiB or less elsewhere), and the
# caller's Python frames, a kernel and a parallel body may share one: 1 MiB each leaves room.
HEAP_THRESHOLD = 1 << 20
ALIGN = 64


@dataclass
class ModuleState:
    target: Target
    parallel_runtime: bool
    declarations: Set[str] = field(default_factory=set)
    definitions: Dict[str, str] = field(default_factory=dict)   # math library, by symbol
    functions: List[str] = field(default_factory=list)
    buffer_names: List[str] = field(default_factory=list)       # bounds-check reports name buffers by id
    streaming: FrozenSet[Buffer] = frozenset()                 # stored non-temporally where aligned (streaming.py)
    loop_ids: List[Tuple[Optional[int], bool]] = field(default_factory=list)   # the !llvm.loop nodes (loop_id)

    @property
    def bounds_check(self) -> bool:
        return self.target.bounds_check

    def loop_id(self, unroll_count: Optional[int], vectorize: bool = True) -> str:
        """A loop ID node asking LLVM's unroller for unroll_count copies of a loop's body
        (the O3 pipeline unrolls only such loops: jit.optimize turns its own choice off), and,
        with vectorize False, its loop vectorizer to leave the loop alone (loop_hints.py)."""
        self.loop_ids.append((unroll_count, vectorize))
        return f"!{3 * (len(self.loop_ids) - 1)}"

    def loop_metadata(self) -> List[str]:
        lines = []
        for i, (count, vectorize) in enumerate(self.loop_ids):
            node, hints = 3 * i, []
            if count:
                hints.append((node + 1, f'!{{!"llvm.loop.unroll.count", i32 {count}}}'))
            if not vectorize:
                hints.append((node + 2, '!{!"llvm.loop.vectorize.enable", i1 false}'))
            lines.append(f"!{node} = distinct !{{!{node}{''.join(f', !{n}' for n, _ in hints)}}}")
            lines += [f"!{n} = {text}" for n, text in hints]
        return lines

    def buffer_id(self, buffer: Buffer) -> int:
        if buffer.name not in self.buffer_names:
            self.buffer_names.append(buffer.name)
        return self.buffer_names.index(buffer.name)


# The names outline_body gives the body of a parallel loop ("<kernel>.par<n>.body").
_PARALLEL_BODY = re.compile(r"\.par\d+\.body$")


def is_parallel_body(name: str) -> bool:
    """Whether an LLVM function of a rendered module is the outlined body of a parallel loop,
    which the OpenMP worker and the serial fallback both call (jit.optimize keeps it out of line)."""
    return bool(_PARALLEL_BODY.search(name))


def symbol(name: str) -> str:
    """An LLVM identifier for an IR name; one starting with a digit gets a "_" (LLVM reads
    `@1x` as a malformed numbered value, and torch names parameters "0.weight")."""
    name = re.sub(r"[^A-Za-z0-9_.]", "_", name)
    return "_" + name if name[:1].isdigit() else name


def function_symbol(name: str) -> str:
    """The symbol of a function we define (a module's entry, a kernel) for an IR name: symbol(name),
    with ".sl" after it where that may be a C library or runtime function's name
    (library_names.py), so that the library's calls (LLVM's exp for float64 lanes, memcpy)
    never land in our function (no C name has a dot)."""
    sym = symbol(name)
    return sym + ".sl" if is_library_name(sym) else sym


class FunctionEmitter(ExprEmitter, MemoryEmitter):
    def __init__(self, module: ModuleState, fn: FunctionText, env: Dict[Var, str], ptrs: Dict[Buffer, str]):
        self.module = module
        self.fn = fn
        self.env = dict(env)
        self.ptrs = dict(ptrs)
        self.outlined = 0
        self.stack_bytes = 0     # local buffers on this function's stack so far
        self._wrapped: Set[Var] = set()     # loop_hints.wrapped_loop_vars of the loop nests seen
        self._nests: Set[Var] = set()       # the loops those nests hold
        self.index_ranges = LoopRanges()
        self.streamed = False    # a non-temporal store was emitted: end with sfence

    def ret_void(self) -> None:
        """End the function; after non-temporal stores, sfence first (they are weakly ordered)."""
        if self.streamed:
            self.declare(f"declare void @{SFENCE}()")
            self.fn.do(f"call void @{SFENCE}()")
        self.fn.do("ret void")

    # -- statements --
    def stmt(self, s: Stmt) -> None:
        getattr(self, "stmt_" + type(s).__name__)(s)

    def stmt_Seq(self, s: Seq) -> None:
        for x in s.stmts:
            self.stmt(x)

    def stmt_Store(self, s: Store) -> None:
        self.store(s)

    def stmt_IfThen(self, s: IfThen) -> None:
        cond = self.expr(s.cond)
        then_l, join_l = self.fn.label("if.then"), self.fn.label("if.end")
        else_l = self.fn.label("if.else") if s.else_body is not None else join_l
        self.fn.do(f"br i1 {cond}, label %{then_l}, label %{else_l}")
        self.fn.start_block(then_l)
        self.stmt(s.then_body)
        self.fn.do(f"br label %{join_l}")
        if s.else_body is not None:
            self.fn.start_block(else_l)
            self.stmt(s.else_body)
            self.fn.do(f"br label %{join_l}")
        self.fn.start_block(join_l)

    def stmt_Let(self, s: Let) -> None:
        self.env[s.var] = self.expr(s.value)
        self.stmt(s.body)
        del self.env[s.var]

    def stmt_Barrier(self, s: Barrier) -> None:
        pass   # CPU workers share no block-level memory

    def stmt_Evaluate(self, s: Evaluate) -> None:
        self.expr(s.value)      # a call, emitted for its effect

    def stmt_CallPacked(self, s: CallPacked) -> None:
        call_id = packed.descriptor_id(s)
        n = len(s.buffers)
        argv = self.fn.alloca(f"alloca [{max(n, 1)} x ptr], align 8", "packed.args")
        for i, b in enumerate(s.buffers):
            slot = self.fn.emit(f"getelementptr inbounds [{max(n, 1)} x ptr], ptr {argv}, i64 0, i64 {i}", "slot")
            self.fn.do(f"store ptr {self.ptrs[b]}, ptr {slot}, align 8")
        self.declare(f"declare void @{packed.SYMBOL}(i64, ptr)")
        self.fn.do(f"call void @{packed.SYMBOL}(i64 {call_id}, ptr {argv})")

    def stmt_Allocate(self, s: Allocate) -> None:
        b = s.buffer
        if b.is_symbolic:                   # a size known only at run time: the heap
            self.heap_allocate(s, self.symbolic_bytes(b))
            return
        check_buffer_size(b)
        nbytes = b.size * b.dtype.bytes
        if self.stack_bytes + nbytes > HEAP_THRESHOLD:
            self.heap_allocate(s, str(ceil_div(nbytes, ALIGN) * ALIGN))
            return
        self.stack_bytes += nbytes
        self.ptrs[b] = self.fn.alloca(f"alloca [{b.size} x {scalar_memory(b.dtype)}], align {ALIGN}", b.name)
        self.stmt(s.body)
        del self.ptrs[b]

    def heap_allocate(self, s: Allocate, size: str) -> None:
        """The buffer from aligned_alloc of `size` bytes (a multiple of ALIGN: a literal or an
        i64 value) around the body; when that fails, the body is skipped and the call's status
        record says so (the call raises MemoryError)."""
        b = s.buffer
        self.declare("declare ptr @aligned_alloc(i64, i64)")
        self.declare("declare void @free(ptr)")
        ptr = self.fn.emit(f"call ptr @aligned_alloc(i64 {ALIGN}, i64 {size})", b.name)
        null = self.fn.emit(f"icmp eq ptr {ptr}, null", "nomem")
        fail_l, ok_l, end_l = self.fn.label("alloc.fail"), self.fn.label("alloc.ok"), self.fn.label("alloc.end")
        self.fn.do(f"br i1 {null}, label %{fail_l}, label %{ok_l}")
        self.fn.start_block(fail_l)
        emit_alloc_failed(self.fn, self.ptrs[STATUS], size)
        self.fn.do(f"br label %{end_l}")
        self.fn.start_block(ok_l)
        self.ptrs[b] = ptr
        self.stmt(s.body)
        self.fn.do(f"call void @free(ptr {ptr})")
        self.fn.do(f"br label %{end_l}")
        self.fn.start_block(end_l)
        del self.ptrs[b]

    def symbolic_bytes(self, b: Buffer) -> str:
        """The bytes of a buffer of symbolic size, rounded up to the alignment (an i64 value)."""
        count = self.expr(Cast(int64, b.size)) if isinstance(b.size, Expr) else str(b.size)
        nbytes = self.fn.emit(f"mul nsw i64 {count}, {b.dtype.bytes}", "bytes")
        padded = self.fn.emit(f"add nsw i64 {nbytes}, {ALIGN - 1}", "bytes")
        return self.fn.emit(f"and i64 {padded}, {-ALIGN}", "bytes")

    def stmt_For(self, s: For) -> None:
        check_trip_count(s)
        if s.kind == PARALLEL:
            self.parallel_for(s)
        elif s.kind == SERIAL and isinstance(s.extent, Expr):    # a symbolic trip count may be 0
            self.loop(s.var, "0", self.expr(s.extent), s.body, constant=False, pragmas=s.pragmas)
        elif s.kind == SERIAL:
            self.loop(s.var, "0", str(s.extent), s.body, constant=True, extent=s.extent, pragmas=s.pragmas)
        else:
            raise InternalError(f"loop kind '{s.kind}' reached the LLVM renderer; Kernel IR only has serial and parallel loops")

    def wrapped_vars(self, var: Var, body: Stmt) -> Set[Var]:
        """loop_hints.wrapped_loop_vars, found once per outermost loop: an inner loop's answer
        is in its outermost loop's."""
        if var not in self._nests:
            self._wrapped |= wrapped_loop_vars(body)
            self._nests |= {var} | {s.var for s in walk_stmts(body) if isinstance(s, For)}
        return self._wrapped

    def loop(self, var: Var, begin: str, end: str, body: Stmt, constant: bool, extent: Optional[int] = None,
             pragmas: Tuple = ()) -> None:
        """A rotated loop: for var in begin..end (a range within 0..extent when extent is given);
        an "unroll_count" pragma becomes its latch's !llvm.loop node."""
        ty = compute_type(var.dtype)
        vectorize = var not in self.wrapped_vars(var, body)     # before the body: its loops read the answer
        head, exit_l = self.fn.label(f"{var.name}.loop"), self.fn.label(f"{var.name}.exit")
        pre = self.fn.block
        if constant:
            self.fn.do(f"br label %{head}")
        else:
            nonempty = self.fn.emit(f"icmp slt {ty} {begin}, {end}", "nonempty")
            self.fn.do(f"br i1 {nonempty}, label %{head}, label %{exit_l}")
        self.fn.start_block(head)
        phi_at = len(self.fn.lines)
        value = self.fn.fresh(var.name)
        self.fn.lines.append("")     # the phi, filled in once the latch block is known
        saved = self.env.get(var)
        self.env[var] = value
        with self.index_ranges.loop(var, extent):      # no range where extent is None
            for key, ahead in pragmas:
                if key == PREFETCH:
                    emit_prefetches(self, body, var, *ahead)
            self.stmt(body)
        nxt = self.fn.emit(f"add nsw {ty} {value}, 1", var.name + ".next")
        more = self.fn.emit(f"icmp slt {ty} {nxt}, {end}", "more")
        count = dict(pragmas).get("unroll_count")
        loop_md = f", !llvm.loop {self.module.loop_id(count, vectorize)}" if count or not vectorize else ""
        self.fn.do(f"br i1 {more}, label %{head}, label %{exit_l}{loop_md}")
        self.fn.lines[phi_at] = f"  {value} = phi {ty} [ {begin}, %{pre} ], [ {nxt}, %{self.fn.block} ]"
        self.fn.start_block(exit_l)
        if saved is None:
            del self.env[var]
        else:
            self.env[var] = saved

    # -- parallel loops --
    def parallel_for(self, s: For) -> None:
        buffers = [b for b in buffers_used(s.body) if b in self.ptrs] + [STATUS]
        scalars = [v for v in _vars_in(s.body) if v in self.env and v is not s.var]
        sized = [e for b in buffers for e in buffer_exprs(b)]    # symbolic sizes, for bounds checks
        if isinstance(s.extent, Expr):    # the workers compute the symbolic trip count themselves
            sized.append(s.extent)
        for e in sized:
            scalars += [v for v in free_vars(e) if v in self.env and v not in scalars]
        self.outlined += 1
        base = f"{self.fn.name}.par{self.outlined}"
        body_name = self.outline_body(base, s, buffers, scalars)
        worker = self.outline_worker(base, body_name, s, buffers, scalars)
        slots = len(buffers) + len(scalars)
        args = [f"ptr {self.ptrs[b]}" for b in buffers] + [f"{compute_type(v.dtype)} {self.env[v]}" for v in scalars]
        end = self.expr(s.extent) if isinstance(s.extent, Expr) else s.extent
        serial_call = f"call void @{body_name}({', '.join(args + ['i32 0', f'i32 {end}'])})"
        if not self.module.parallel_runtime:
            self.fn.do(serial_call)
            return
        # In a child forked after the parent ran parallel loops, GOMP_parallel would hang (forksafe.py).
        self.declare(f"@{SERIAL_FLAG} = external global i32")
        flag = self.fn.emit(f"load i32, ptr @{SERIAL_FLAG}, align 4", "serial")
        serial = self.fn.emit(f"icmp ne i32 {flag}, 0", "serial")
        serial_l, omp_l, join_l = self.fn.label("par.serial"), self.fn.label("par.omp"), self.fn.label("par.end")
        self.fn.do(f"br i1 {serial}, label %{serial_l}, label %{omp_l}")
        self.fn.start_block(serial_l)
        self.fn.do(serial_call)
        self.fn.do(f"br label %{join_l}")
        self.fn.start_block(omp_l)
        self.launch_parallel(s, worker, buffers, scalars)
        self.fn.do(f"br label %{join_l}")
        self.fn.start_block(join_l)

    def launch_parallel(self, s: For, worker: str, buffers, scalars) -> None:
        """GOMP_parallel(worker, ctx): ctx holds the buffers and scalars the worker passes on."""
        slots = len(buffers) + len(scalars)
        ctx = self.fn.alloca(f"alloca [{max(slots, 1)} x i64], align 8", "ctx")
        for i, b in enumerate(buffers):
            slot = self.fn.emit(f"getelementptr inbounds [{slots} x i64], ptr {ctx}, i64 0, i64 {i}", "slot")
            self.fn.do(f"store ptr {self.ptrs[b]}, ptr {slot}, align 8")
        for j, v in enumerate(scalars):
            slot = self.fn.emit(f"getelementptr inbounds [{slots} x i64], ptr {ctx}, i64 0, i64 {len(buffers) + j}", "slot")
            self.fn.do(f"store {compute_type(v.dtype)} {self.env[v]}, ptr {slot}, align 8")
        self.declare("declare void @GOMP_parallel(ptr, ptr, i32, i32)")
        self.fn.do(f"call void @GOMP_parallel(ptr @{worker}, ptr {ctx}, i32 {self.module.target.num_threads}, i32 0)")

    def outline_body(self, base: str, s: For, buffers, scalars) -> str:
        name = symbol(base + ".body")
        params = [f"ptr noalias %p{i}" for i in range(len(buffers))]
        params += [f"{compute_type(v.dtype)} %s{j}" for j, v in enumerate(scalars)]
        params += ["i32 %begin", "i32 %end"]
        fn = FunctionText(name, f"void @{name}({', '.join(params)})")
        inner = FunctionEmitter(self.module, fn, {v: f"%s{j}" for j, v in enumerate(scalars)},
                                {b: f"%p{i}" for i, b in enumerate(buffers)})
        inner.loop(s.var, "%begin", "%end", s.body, constant=False, extent=s.extent)
        inner.ret_void()
        self.module.functions.append(fn.render())
        return name

    def chunk_bounds(self, fn, s: For, loaded, tid: str, nth: str):
        """(begin, end) of thread tid's chunk of the static schedule: thread t runs iterations
        [t*chunk, min((t+1)*chunk, extent)). Computed in i32 for a static extent up to
        PARALLEL_INT32_EXTENT; in i64 beyond it and for a symbolic one (may be 2**31 - 1), since
        nth + extent - 1 and tid * chunk then leave i32; both bounds are then clamped to the
        extent, so they fit i32 again."""
        if isinstance(s.extent, int) and s.extent <= PARALLEL_INT32_EXTENT:
            ty, extent, first_name = "i32", str(s.extent), "begin"
            top = fn.emit(f"add i32 {nth}, {s.extent - 1}", "top")
        else:
            ty, first_name = "i64", "first"
            if isinstance(s.extent, Expr):
                extent = FunctionEmitter(self.module, fn, loaded, {}).expr(s.extent)
                extent = fn.emit(f"sext i32 {extent} to i64", "ext")
            else:
                extent = str(s.extent)
            nth, tid = fn.emit(f"sext i32 {nth} to i64", "nth"), fn.emit(f"sext i32 {tid} to i64", "tid")
            top = fn.emit(f"add i64 {nth}, {extent}", "top")
            top = fn.emit(f"sub i64 {top}, 1", "top")
        chunk = fn.emit(f"sdiv {ty} {top}, {nth}", "chunk")
        first = fn.emit(f"mul {ty} {tid}, {chunk}", first_name)
        stop = fn.emit(f"add {ty} {first}, {chunk}", "stop")
        self.declare(f"declare {ty} @llvm.smin.{ty}({ty}, {ty})")
        if ty == "i32":     # begin needs no clamp: a chunk past the extent runs nothing
            return first, fn.emit(f"call i32 @llvm.smin.i32(i32 {stop}, i32 {extent})", "end")
        bounds = []
        for value, what in ((first, "begin"), (stop, "end")):
            value = fn.emit(f"call i64 @llvm.smin.i64(i64 {value}, i64 {extent})", what)
            bounds.append(fn.emit(f"trunc i64 {value} to i32", what))
        return bounds

    def outline_worker(self, base: str, body_name: str, s: For, buffers, scalars) -> str:
        name = symbol(base + ".worker")
        fn = FunctionText(name, f"void @{name}(ptr %ctx)")
        slots = len(buffers) + len(scalars)
        args = []
        loaded: Dict[Var, str] = {}
        for i in range(slots):
            slot = fn.emit(f"getelementptr inbounds [{slots} x i64], ptr %ctx, i64 0, i64 {i}", "slot")
            if i < len(buffers):
                args.append("ptr " + fn.emit(f"load ptr, ptr {slot}, align 8", "p"))
            else:
                v = scalars[i - len(buffers)]
                ty = compute_type(v.dtype)
                loaded[v] = fn.emit(f"load {ty}, ptr {slot}, align 8", "s")
                args.append(f"{ty} {loaded[v]}")
        self.declare("declare i32 @omp_get_thread_num()")
        self.declare("declare i32 @omp_get_num_threads()")
        tid = fn.emit("call i32 @omp_get_thread_num()", "tid")
        nth = fn.emit("call i32 @omp_get_num_threads()", "nth")
        begin, end = self.chunk_bounds(fn, s, loaded, tid, nth)
        fn.do(f"call void @{body_name}({', '.join(args + [f'i32 {begin}', f'i32 {end}'])})")
        fn.do("ret void")
        self.module.functions.append(fn.render())
        return name


# A parallel loop's chunks are computed in i32 up to this static extent (nth + extent - 1 and
# tid * chunk stay below 2**31 for fewer than 2**30 threads), in i64 beyond it and when symbolic.
PARALLEL_INT32_EXTENT = 2**30


def check_trip_count(s: For) -> None:
    """Loop variables and flat buffer indices are int32: a longer loop would wrap around."""
    if isinstance(s.extent, int) and s.extent > INT32_MAX:     # symbolic ones are checked at call time
        raise LoweringError("llvm codegen", f"loop '{s.var.name}' runs {s.extent} iterations, more than int32 "
                            f"indices reach ({INT32_MAX}); split the computation into smaller stages")


def check_buffer_size(b: Buffer) -> None:
    if b.size > INT32_MAX:
        raise LoweringError("llvm codegen", f"buffer '{b.name}' of shape {b.shape} holds {b.size} elements, more "
                            f"than int32 indices reach ({INT32_MAX})")


def _vars_in(s: Stmt) -> List[Var]:
    seen: Dict[Var, None] = {}
    walked: set = set()          # nodes shared between statements are walked once
    for x in walk_stmts(s):
        exprs = list(stmt_exprs(x))
        if isinstance(x, For) and isinstance(x.extent, Expr):    # symbolic extents and sizes
            exprs.append(x.extent)
        elif isinstance(x, Allocate):
            exprs += list(buffer_exprs(x.buffer))
        for e in exprs:
            for v in walk(e, walked):
                if isinstance(v, Var):
                    seen.setdefault(v, None)
    return list(seen)


def _kernel_function(module: ModuleState, k: Kernel) -> str:
    for axis in k.launch:
        if axis.kind is not LaunchKind.CPU_WORKER:
            raise LoweringError("llvm codegen", f"kernel {k.name} is launched over {axis.tag}, a GPU thread axis; "
                                "the llvm target runs CPU workers only (use parallel() instead of bind())")
    name = function_symbol(k.name)
    ptrs = {b: f"%arg{i}.{symbol(b.name)}" for i, b in enumerate(k.params)}
    sizes = {v: f"%size.{symbol(v.name)}" for v in k.sizes}
    params = ([f"ptr noalias {p}" for p in ptrs.values()] + [f"{compute_type(v.dtype)} {n}" for v, n in sizes.items()]
              + ["ptr %status"])
    ptrs[STATUS] = "%status"
    fn = FunctionText(name, f"void @{name}({', '.join(params)})")
    em = FunctionEmitter(module, fn, sizes, ptrs)
    body = k.body
    if k.workers is not None:
        body = For(k.workers.var, k.workers.extent, body, PARALLEL)
    em.stmt(body)
    em.ret_void()
    module.functions.append(fn.render())
    return name


def _kernel_functions(module: ModuleState, m: KernelModule,
                      rendered: Optional[Callable[[], None]] = None) -> List[Tuple[str, Tuple[Buffer, ...], Tuple[Var, ...]]]:
    """The function of each kernel and the buffers and sizes to call it with. A kernel that
    repeats an earlier one on other buffers (m.copies: a model's repeated layer) calls that
    one's function: LLVM optimizes and compiles it once. Not with bounds checks, whose reports
    name the buffers, nor where streaming stores differ. rendered() is called after each
    kernel function is added to module.functions (it is the last one there)."""
    calls: List[Tuple[str, Tuple[Buffer, ...], Tuple[Var, ...]]] = []
    for j, k in enumerate(m.kernels):
        copy = m.copies[j] if j < len(m.copies) and not module.bounds_check else None
        if copy is not None:
            name, params, _ = calls[copy.of]
            if [b in module.streaming for b in copy.params] == [b in module.streaming for b in params]:
                calls.append((name, copy.params, copy.sizes))
                continue
        calls.append((_kernel_function(module, k), k.params, k.sizes))
        if rendered is not None:
            rendered()
    return calls


def _entry_function(module: ModuleState, m: KernelModule, calls: List[Tuple[str, Tuple[Buffer, ...], Tuple[Var, ...]]]) -> str:
    """i32 @name(ptr args): args holds the parameters' pointers, the size variables' values,
    then the call's status record.
    Allocates the temporaries, runs the kernels (each timed, with the target's profile
    option: profile.py), frees; returns 1 (and runs nothing) when a temporary cannot be
    allocated, 0 otherwise."""
    name = function_symbol(m.name)
    fn = FunctionText(name, f"i32 @{name}(ptr %args)")
    ptrs: Dict[Buffer, str] = {}
    slots = list(enumerate(m.params)) + [(len(m.params) + len(m.sizes), STATUS)]    # sizes sit between
    for i, b in slots:
        slot = fn.emit(f"getelementptr inbounds ptr, ptr %args, i64 {i}", "arg")
        ptrs[b] = fn.emit(f"load ptr, ptr {slot}, align 8", symbol(b.name))
    failed = "0"     # bytes of the last temporary that could not be allocated
    sizes = _entry_sizes(fn, m)
    fixed = [b for b in m.temps if not b.is_symbolic]
    arena, offsets = plan_arena(fixed, [params for _, params, _ in calls], _temp_bytes, ALIGN)
    if arena >= sum(_temp_bytes(b) for b in fixed):
        offsets = {}                 # nothing shared: each temporary its own allocation
    heap = [b for b in m.temps if b not in offsets] + ([ARENA] if offsets else [])
    kept = temps.kept_slots(name, [b for b in heap if not b.is_symbolic])    # from call to call (temps.py)
    for b in heap:
        if b.is_symbolic:
            size = FunctionEmitter(module, fn, sizes, {}).symbolic_bytes(b)
            ptrs[b] = fn.emit(f"call ptr @aligned_alloc(i64 {ALIGN}, i64 {size})", symbol(b.name))
        else:
            size = arena if b is ARENA else _temp_bytes(b)
            ptrs[b] = temps.take(fn, kept[b], size, symbol(b.name))
        module.declarations.update({"declare ptr @aligned_alloc(i64, i64)", "declare void @free(ptr)"})
        null = fn.emit(f"icmp eq ptr {ptrs[b]}, null", "nomem")
        failed = fn.emit(f"select i1 {null}, i64 {size}, i64 {failed}", "failed")
    for b, offset in offsets.items():
        ptrs[b] = fn.emit(f"getelementptr inbounds i8, ptr {ptrs[ARENA]}, i64 {offset}", symbol(b.name))
    if heap:
        bad = fn.emit(f"icmp ne i64 {failed}, 0", "nomem")
        fail_l, run_l = fn.label("alloc.fail"), fn.label("run")
        fn.do(f"br i1 {bad}, label %{fail_l}, label %{run_l}")
        fn.start_block(fail_l)
        emit_alloc_failed(fn, ptrs[STATUS], failed)
        _give_back(fn, heap, ptrs, kept)     # free(NULL) does nothing
        fn.do("ret i32 1")
        fn.start_block(run_l)
    clock = KernelClock(fn, module.declarations, len(calls)) if module.target.profile else None
    for j, (kname, params, size_vars) in enumerate(calls):
        args = ([f"ptr {ptrs[b]}" for b in params] + [f"{compute_type(v.dtype)} {sizes[v]}" for v in size_vars]
                + [f"ptr {ptrs[STATUS]}"])
        call = f"call void @{kname}({', '.join(args)})"
        if clock is None:
            fn.do(call)
        else:
            clock.time_call(j, call)
    if clock is not None:
        clock.count_call()
    _give_back(fn, heap, ptrs, kept)
    fn.do("ret i32 0")
    text = fn.render().replace("define internal", "define", 1)
    return text if not kept else temps.definitions(name, list(kept.values()), ALIGN) + "\n" + text


def _give_back(fn: FunctionText, heap: List[Buffer], ptrs: Dict[Buffer, str], kept: Dict[Buffer, str]) -> None:
    """The end of the entry's temporaries: kept ones back to their slots, the rest freed."""
    for b in heap:
        if b in kept:
            temps.keep(fn, kept[b], ptrs[b])
        else:
            fn.do(f"call void @free(ptr {ptrs[b]})")


# The one allocation of the temporaries that share memory (kernel/memory_plan.py).
ARENA = Buffer("temps.arena", (1,), DType("uint", 8))


def _temp_bytes(b: Buffer) -> int:
    return ceil_div(b.size * b.dtype.bytes, ALIGN) * ALIGN


def _entry_sizes(fn: FunctionText, m: KernelModule) -> Dict[Var, str]:
    """The size variables, passed after the buffer pointers as 64-bit slots of the argument array."""
    sizes: Dict[Var, str] = {}
    for j, v in enumerate(m.sizes):
        slot = fn.emit(f"getelementptr inbounds ptr, ptr %args, i64 {len(m.params) + j}", "arg")
        wide = fn.emit(f"load i64, ptr {slot}, align 8", symbol(v.name))
        ty = compute_type(v.dtype)
        sizes[v] = wide if ty == "i64" else fn.emit(f"trunc i64 {wide} to {ty}", symbol(v.name))
    return sizes


def render_llvm(m: KernelModule, target: Target, triple: str, datalayout: str, parallel_runtime: bool):
    """The LLVM IR module for a Kernel IR module (its entry is `i32 @<name>(ptr args)`), and
    the buffer names that bounds-check reports refer to by id."""
    module = module_state(m, target, triple, parallel_runtime)
    entry = _entry_function(module, m, _kernel_functions(module, m))
    return module_text(module, m.name, triple, datalayout, module.functions + [entry]), list(module.buffer_names)


def module_state(m: KernelModule, target: Target, triple: str, parallel_runtime: bool) -> ModuleState:
    """The state of rendering m: what its functions declare and define as they are rendered."""
    module = ModuleState(target, parallel_runtime)
    if target.streaming_stores:
        module.streaming = streaming_buffers(m.params, m.kernels, triple, target.bounds_check)
    return module


def module_text(module: ModuleState, name: str, triple: str, datalayout: str, functions: List[str]) -> str:
    """One LLVM module: the header, the declarations and definitions rendered so far, functions."""
    target = module.target
    attrs = [f'"target-cpu"="{target.cpu}"', f'"target-features"="{target.features}"']
    if target.vector_bits >= 512:
        attrs.append('"prefer-vector-width"="512"')
    parts = [f'; schedlang module {name}', f'target triple = "{triple}"', f'target datalayout = "{datalayout}"', ""]
    parts += sorted(module.declarations) + [""]
    if target.bounds_check:
        parts += list(OOB_GLOBALS) + ["", OOB_REPORT]
    parts += list(module.definitions.values())
    parts += functions
    parts.append(f"attributes #0 = {{ nounwind {' '.join(attrs)} }}")
    parts += module.loop_metadata()
    return "\n".join(parts) + "\n"
