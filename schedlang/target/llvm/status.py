"""The per-call status record: how generated code reports errors to the call that ran it.

Every call passes its own record (four int64s, zeroed) as the last entry of the argument
vector; the entry function hands it to every kernel and every parallel loop body. Kept
per call rather than in module globals, so that one module called from many threads at
once reports each error to the call that made it.

  [OOB_COUNT]   out-of-bounds accesses (bounds-checked builds)
  [OOB_BUFFER]  buffer id and [OOB_INDEX] element index of the first one
  [ALLOC_FAILED] bytes of a temporary whose allocation returned NULL (the kernel that
                 needed it is skipped, the entry function returns 1, the call raises MemoryError)
"""
from __future__ import annotations

import ctypes

from ...dtypes import int64
from ...expr.nodes import Buffer

OOB_COUNT, OOB_BUFFER, OOB_INDEX, ALLOC_FAILED = range(4)
SLOTS = 4

# Stands for the record in the emitters' buffer-pointer maps, so that it is passed on to
# outlined parallel bodies like any buffer they use.
STATUS = Buffer("sl.status", (SLOTS,), int64)

StatusRecord = ctypes.c_int64 * SLOTS

OOB_REPORT = """define void @sl.oob.report(ptr %status, i64 %buffer, i64 %index) {
entry:
  %old = atomicrmw add ptr %status, i64 1 monotonic
  %first = icmp eq i64 %old, 0
  br i1 %first, label %record, label %done
record:
  %where = getelementptr inbounds i64, ptr %status, i64 1
  store i64 %buffer, ptr %where, align 8
  %slot = getelementptr inbounds i64, ptr %status, i64 2
  store i64 %index, ptr %slot, align 8
  br label %done
done:
  ret void
}
"""


def emit_alloc_failed(fn, status: str, nbytes: str) -> None:
    """Record in the status record that an allocation of nbytes (an i64 value) failed."""
    slot = fn.emit(f"getelementptr inbounds i64, ptr {status}, i64 {ALLOC_FAILED}", "allocfail")
    fn.do(f"atomicrmw max ptr {slot}, i64 {nbytes} monotonic")


def raise_for_status(name: str, record, buffer_names) -> None:
    """MemoryError or IndexError for what a call's record says went wrong."""
    if record[ALLOC_FAILED]:
        raise MemoryError(f"{name}: could not allocate {record[ALLOC_FAILED]} bytes for a temporary buffer")
    if record[OOB_COUNT]:
        n, buffer, index = record[OOB_COUNT], buffer_names[record[OOB_BUFFER]], record[OOB_INDEX]
        raise IndexError(f"{name}: {n} out-of-bounds access(es); the first touched {buffer}[{index}] "
                         "(a bug in schedlang's lowering if the program reads only inside its tensors)")
