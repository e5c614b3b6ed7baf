"""The errors gpu_dedup raises on purpose: one base, ``GpuDedupError``, so a caller can catch "anything this
tool refused or could not do" in one clause, and the command line prints it as one line.

Each class also keeps the built-in base that the same error had before it had a class of its own, so an
existing ``except ValueError`` (or ``pytest.raises(TypeError)``) still catches it:

    ConfigError       ValueError         a setting, argument or flag value is invalid (the message names it
                                         and the values it may take)
    DataError         ValueError         a file's contents are malformed or inconsistent: an input, a model,
                                         an index, a run's outputs (the message names the file and where)
    UsageError        TypeError          an argument of the wrong type
    DependencyError   ImportError        an optional package is missing (the message names the extra)
    MissingFileError  FileNotFoundError  a file or directory the run needs does not exist
    OutputExistsError FileExistsError    an output that would be overwritten
    RunError          RuntimeError       the run cannot go on: a device, a library or a worker failed, or a
                                         limit was reached (the message says what to change)
    ClusterError      ConnectionError    the Ray cluster cannot be reached or is not usable
    MissingColumnError KeyError          a table lacks a column the call needs

The errors of one module (``io.InputError``, ``outputs.ManifestError``, ``filters.lm.ARPAError``, ...)
derive from one of these. Errors of Python itself or of a library (an ``OSError`` of the file system, a
``KeyError`` of a bug) are not wrapped: they are not the tool's decision.
"""
from __future__ import annotations


class GpuDedupError(Exception):
    """Base of every error gpu_dedup raises on purpose; the message names the bad value and the fix."""


class ConfigError(GpuDedupError, ValueError):
    """A setting, argument or flag value is invalid."""


class DataError(GpuDedupError, ValueError):
    """A file's contents (input, model, index, run outputs) are malformed or inconsistent."""


class UsageError(GpuDedupError, TypeError):
    """An argument of the wrong type."""


class DependencyError(GpuDedupError, ImportError):
    """An optional package is not installed; the message names the extra that brings it."""


class MissingFileError(GpuDedupError, FileNotFoundError):
    """A file or directory the run needs does not exist."""


class OutputExistsError(GpuDedupError, FileExistsError):
    """An output that this run would overwrite."""


class RunError(GpuDedupError, RuntimeError):
    """The run cannot go on: a device, library or worker failed, or a limit was reached."""


class ClusterError(GpuDedupError, ConnectionError):
    """The Ray cluster cannot be reached or is not usable."""


class MissingColumnError(GpuDedupError, KeyError):
    """A table lacks a column the call needs (the message names it and how to compute it)."""


__all__ = ["ClusterError", "ConfigError", "DataError", "DependencyError", "GpuDedupError", "MissingColumnError",
           "MissingFileError", "OutputExistsError", "RunError", "UsageError"]
