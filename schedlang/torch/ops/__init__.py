"""ATen -> Tensor IR lowerings, one small module per family of ops.

Importing this package registers every lowering in `registry.LOWERINGS`."""
from .registry import LOWERINGS, LowerContext, lookup, register_lowering  # noqa: F401
from .registry import Unsupported  # noqa: F401,E402
from . import elementwise  # noqa: F401,E402
from . import index  # noqa: F401,E402
from . import creation  # noqa: F401,E402
from . import activation  # noqa: F401,E402
from . import matmul, norm, reduce  # noqa: F401,E402  (registers their lowerings)
from . import gather, pad_modes  # noqa: F401,E402
from . import attention  # noqa: F401,E402
from . import conv  # noqa: F401,E402
from . import pool, resize, resize_aa  # noqa: F401,E402
from . import cumulative  # noqa: F401,E402
from . import elementwise_math  # noqa: F401,E402
from . import group_norm  # noqa: F401,E402
from . import vector_norm  # noqa: F401,E402
from . import scatter_slices  # noqa: F401,E402
from . import grid_sample  # noqa: F401,E402
from . import sort, search, fold  # noqa: F401,E402
from . import scatter  # noqa: F401,E402
from . import trilinear  # noqa: F401,E402
from . import grouped_mm, histogram  # noqa: F401,E402
