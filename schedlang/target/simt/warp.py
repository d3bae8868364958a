"""Warp shuffles (__shfl_down_sync, __shfl_sync) over a chunk's lanes: each lane reads the
value of another lane of its warp, within segments of `width` lanes."""
from __future__ import annotations

import numpy as np

from ...errors import LoweringError


def shuffle(chunk, kind: str, member_mask: int, value: np.ndarray, arg: np.ndarray, width: int,
            active: np.ndarray, stmt) -> np.ndarray:
    """kind "shfl_down_sync": lane + arg within the lane's segment, else the lane's own value;
    "shfl_sync": lane arg of the segment. Every lane named in member_mask that takes part must
    be active: a shuffle with an absent member is undefined in CUDA."""
    value = np.broadcast_to(value, (chunk.lanes,) + value.shape[1:] if value.ndim else (chunk.lanes,))
    arg = np.broadcast_to(arg, (chunk.lanes,))
    lane = chunk.lane_in_warp
    seg = lane % width
    if kind == "shfl_down_sync":
        src_seg = seg + arg
        src_seg = np.where(src_seg < width, src_seg, seg)
    else:
        src_seg = arg % width
    src = np.arange(chunk.lanes) - seg + src_seg       # source lane in the chunk
    src_lane_in_warp = lane - seg + src_seg
    in_block = chunk.tid - lane + src_lane_in_warp < chunk.geometry.threads
    named = ((member_mask >> lane) & 1).astype(bool)
    absent = active & named & (~in_block | ~active[np.where(in_block, src, 0)])
    if absent.any():
        k = int(np.argmax(absent))
        text = str(stmt).strip().splitlines()[0]
        raise LoweringError("simt warp shuffle", f"kernel {chunk.geometry.kernel.name}: `{text}` in {chunk.where(k)}"
                            f" shuffles with a lane that is not active or not in the block; "
                            "every lane of the member mask must take part in a warp shuffle")
    return value[np.where(in_block, src, np.arange(chunk.lanes))].copy()
