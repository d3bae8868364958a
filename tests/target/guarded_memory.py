"""Arrays that sit right against inaccessible pages, so a kernel that reads or writes one
element past either end of a buffer faults instead of silently touching other memory."""
from __future__ import annotations

import ctypes
import mmap

import numpy as np

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None)
_keep = []     # the mappings must outlive the arrays that view them


def guarded_array(shape, dtype, at_end: bool) -> np.ndarray:
    """A zeroed array whose last byte (at_end) or first byte (not at_end) touches a
    PROT_NONE page."""
    count = int(np.prod(shape))
    nbytes = count * np.dtype(dtype).itemsize
    pages = max(1, -(-nbytes // PAGE))
    region = mmap.mmap(-1, (pages + 2) * PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    for page in (0, pages + 1):
        if _libc.mprotect(ctypes.c_void_p(base + page * PAGE), PAGE, 0) != 0:
            raise OSError("mprotect failed")
    offset = (pages + 1) * PAGE - nbytes if at_end else PAGE
    _keep.append(region)
    return np.frombuffer(region, dtype=dtype, count=count, offset=offset).reshape(shape)
