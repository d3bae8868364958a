"""Default schedules for the PyTorch frontend (owned by torchsched; this is the minimum:
inline every injective intermediate stage into its consumers)."""
from __future__ import annotations

from typing import List

import schedlang as sl
from schedlang.tensor.classify import ELEMENTWISE, INDEX_MAP, classify
from schedlang.tensor.graph import post_order


def default_schedule(outputs: List[sl.Tensor], target=None) -> sl.Schedule:
    """A schedule of outputs with every non-output Elementwise/IndexMap stage inlined."""
    out_ops = [t.op for t in outputs]
    s = sl.create_schedule(out_ops)
    for op in post_order(out_ops):
        if any(op is o for o in out_ops):
            continue
        if classify(op) in (ELEMENTWISE, INDEX_MAP):
            s[op].compute_inline()
    return s
