"""Targets: what the generated code runs on, and the renderers for each."""
from .target import Target  # noqa: F401
