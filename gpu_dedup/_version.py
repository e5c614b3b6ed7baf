"""The package version: its one source (pyproject.toml reads it; imports nothing, so any module may use it)."""
__version__ = "0.1.0"
