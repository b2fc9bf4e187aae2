"""The package version: the one place it is written (pyproject.toml reads it, the engine metadata and the cache key
record it)."""
__version__ = "0.1.0"
