"""Tile IR: the schedule applied to the loop nests (bound inference, attachment, caches)."""
from .lower import lower_to_tile_ir  # noqa: F401
from .bound import infer_regions  # noqa: F401
