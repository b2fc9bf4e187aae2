"""The package version, in a module of its own so modules below the package root can read it without importing it."""
__version__ = "0.1.0"
