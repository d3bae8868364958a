"""ATen -> Tensor IR lowerings, one small module per family of ops.

Importing this package registers every lowering in `registry.LOWERINGS`."""
from .registry import LOWERINGS, LowerContext, lookup, register_lowering  # noqa: F401
