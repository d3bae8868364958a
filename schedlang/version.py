"""The version of schedlang (one place: the package, the CLI and the cache keys read it)."""
__version__ = "0.1.0"
