"""Asynchronous copies (cp.async, sm_80+): 16 bytes from global to shared memory that land
later, in groups: commit_group closes the group of the copies issued since the last one, and
wait_group n waits until at most the n most recent groups are still in flight.

The shim's semantics make a missing wait observable: a copy reads its source when issued and
writes its destination only when a wait_group covers its group, so shared memory read before
that wait (even after __syncthreads()) still holds the old data. The SIMT engine does the same
(target/simt/intrin.py).

    s[AS].tensorize(lanes_axis, cp_async_intrin("float16"))   # 8 halves a thread, one cp.async

complete_async_copies (a Kernel IR pass of the cuda target) commits and waits for the copies a
thread issued before each __syncthreads() that no pipeline (schedule/pipeline.py) waits for;
ASYNC gives the N-stage pipeline its commit and wait statements.
"""
from __future__ import annotations

import schedlang as sl

from types import SimpleNamespace
from typing import List

from ....dtypes import dtype
from ....expr.nodes import Call
from ....loop.functor import StmtMutator, walk_stmts
from ....loop.nodes import Barrier, Evaluate, Seq, Stmt, seq
from ....tensor.intrin import EXTERN_PREFIX
from . import DeviceFunction, register

MAX_WAIT = 8       # wait_group takes an immediate: one function per count, up to a pipeline's stages

STATE = register(DeviceFunction("sl_cp_async_state", r"""
#if !defined(__CUDA_ARCH__)
namespace sl_shim {
// Each thread's copies in flight: its fibers share an OS thread, so the state is indexed by the
// thread's linear index in its block (and dropped when the thread's block changes).
struct AsyncCopy { unsigned char* dst; unsigned char bytes[16]; unsigned n; unsigned long group; };
struct AsyncCopies { std::vector<AsyncCopy> pending; unsigned long committed = 0; uint3 block{~0u, ~0u, ~0u}; };
inline thread_local AsyncCopies async_copies[1024];
inline AsyncCopies& async_state() {
  AsyncCopies& s = async_copies[threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)];
  if (s.block.x != blockIdx.x || s.block.y != blockIdx.y || s.block.z != blockIdx.z) {
    s.pending.clear();
    s.committed = 0;
    s.block = blockIdx;
  }
  return s;
}
inline void cp_async(void* dst, const void* src, unsigned n) {
  AsyncCopy c{static_cast<unsigned char*>(dst), {}, n, async_state().committed};
  std::memcpy(c.bytes, src, n);          // read now, written at the wait that covers its group
  async_state().pending.push_back(c);
}
inline void cp_async_wait(unsigned long n) {
  AsyncCopies& s = async_state();
  std::vector<AsyncCopy> still;
  for (const AsyncCopy& c : s.pending) {
    if (c.group + n < s.committed) std::memcpy(c.dst, c.bytes, c.n);
    else still.push_back(c);
  }
  s.pending.swap(still);
}
}  // namespace sl_shim
#endif
"""))


def _copy(kind: str) -> DeviceFunction:
    name = f"sl_cp_async_16_{kind}"
    return register(DeviceFunction(name, f"""
// cp.async.{kind}.shared.global, 16 bytes: dst (shared, 16-byte aligned) from src (global), landing at a wait_group
__device__ __forceinline__ void {name}(void* dst, const void* src) {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.{kind}.shared.global [%0], [%1], 16;"
               :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(__cvta_generic_to_global(src)) : "memory");
#elif defined(__CUDA_ARCH__)
#error "cp.async needs sm_80 or newer"
#else
  sl_shim::cp_async(dst, src, 16);
#endif
}}
""", requires=(STATE.name,), align=16))


COPIES = {kind: _copy(kind) for kind in ("ca", "cg")}

COMMIT = register(DeviceFunction("sl_cp_async_commit", """
// cp.async.commit_group: the copies issued since the last commit become a group
__device__ __forceinline__ void sl_cp_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;" ::: "memory");
#else
  ++sl_shim::async_state().committed;
#endif
}
""", requires=(STATE.name,)))


def _wait(n: int) -> DeviceFunction:
    name = f"sl_cp_async_wait_{n}"
    return register(DeviceFunction(name, f"""
// cp.async.wait_group {n}: every group but the {n} most recent has landed
__device__ __forceinline__ void {name}() {{
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group {n};" ::: "memory");
#else
  sl_shim::cp_async_wait({n});
#endif
}}
""", requires=(STATE.name,)))


WAITS = [_wait(n) for n in range(MAX_WAIT)]


def cp_async_intrin(dtype: str = "float16", kind: str = "cg"):
    """out[i] = in[i] over 16 bytes (8 halves, 4 floats): one cp.async from global to shared
    memory; both ends 16-byte aligned (offset_factor), the copy landing at a wait_group."""
    if kind not in COPIES:
        raise ValueError(f"cp.async kind is 'ca' (through L1) or 'cg' (L2 only), not {kind!r}")
    lanes = 16 // sl.dtype(dtype).bytes
    src = sl.placeholder((lanes,), dtype, name="src")
    dst = sl.compute((lanes,), lambda i: src[i], name="dst")
    binds = {src: sl.decl_buffer((lanes,), dtype, "src", scope="global", offset_factor=lanes),
             dst: sl.decl_buffer((lanes,), dtype, "dst", scope="shared", offset_factor=lanes)}

    def body(ins, outs):
        return sl.call_extern("int32", COPIES[kind].name, outs[0].access_ptr("w"), ins[0].access_ptr("r"))
    return sl.decl_tensor_intrin(dst.op, body, name=f"cp_async_{kind}_{dtype}", binds=binds)


# ---- Kernel IR: commits and waits ------------------------------------------------------------

def _call(name: str) -> Stmt:
    return Evaluate(Call(EXTERN_PREFIX + name, (), dtype("int32")))


def commit() -> Stmt:
    return _call(COMMIT.name)


def wait(n: int) -> Stmt:
    if not 0 <= n < MAX_WAIT:
        raise ValueError(f"cp.async.wait_group {n}: this library has waits for 0..{MAX_WAIT - 1} groups")
    return _call(WAITS[n].name)


def is_copy(s: Stmt) -> bool:
    """Whether s is a cp.async call."""
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and \
        s.value.name[len(EXTERN_PREFIX):] in {f.name for f in COPIES.values()}


def is_sync(s: Stmt) -> bool:
    """Whether s commits or waits for cp.async groups."""
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and \
        s.value.name[len(EXTERN_PREFIX):] in {COMMIT.name, *(w.name for w in WAITS)}


def _unwaited(s: Stmt, pending: bool) -> bool:
    """Whether copies are in flight after s (in flight before it: pending), in program order."""
    for x in walk_stmts(s):
        if is_copy(x):
            pending = True
        elif is_sync(x) and x.value.name[len(EXTERN_PREFIX):] != COMMIT.name:
            pending = False
    return pending


def issues_copies(s: Stmt) -> bool:
    return any(is_copy(x) for x in walk_stmts(s))


# What kernel/double_buffer.py's pipelines take of these copies.
ASYNC = SimpleNamespace(issues=issues_copies, commit=commit, wait=wait)


class _Complete(StmtMutator):
    """Before each barrier of a sequence: commit and wait for the copies issued since the last
    commit or wait in that sequence (a pipeline's loop has its own)."""

    def visit_Seq(self, s: Seq) -> Stmt:
        out: List[Stmt] = []
        pending = False
        for x in s.stmts:
            x = self.visit(x)
            if isinstance(x, Barrier) and pending:
                out += [commit(), wait(0)]
                pending = False
            pending = _unwaited(x, pending)
            out.append(x)
        if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
            return s          # (kernels without copies stay as they are)
        return seq(*out)


def complete_async_copies(body: Stmt) -> Stmt:
    """The cuda target's pass: every cp.async lands before the barrier that follows it (module docstring)."""
    return _Complete().visit(body)

