"""Inputs on remote and hub file systems, through fsspec (optional: ``pip install "gpu-dedup[remote]"``).

An input that is a URL (``s3://``, ``gs://``, ``hf://datasets/...``, ``memory://``, ``file://``, any
protocol fsspec knows, chained ones such as ``simplecache::s3://`` included) is listed and read through
fsspec: directories and glob patterns list their files with the file system's ``ls`` / ``glob``; JSON Lines
are read from fsspec file objects (``.gz`` / ``.zst`` decompressed by Arrow, as local files); Parquet through
``pyarrow.fs.PyFileSystem(FSSpecHandler(fs))``, so row groups are fetched as ranges of the remote object.
A protocol whose package is missing is an ``ImportError`` naming the extra to install (``REMOTE_EXTRAS``);
an unknown protocol a ``ValueError`` listing the supported ones. Local paths never come here: they are
opened exactly as before (``open_stream``, ``open_parquet``, ``file_size`` take either kind of input).
"""
from __future__ import annotations

import os
import re
import threading
import weakref
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from ..errors import ConfigError, DependencyError

# protocol -> (package fsspec needs for it, extra of gpu-dedup that installs it)
REMOTE_EXTRAS: dict[str, tuple[str, str]] = {
    "s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"),
    "hf": ("huggingface_hub", "hf"),
}
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(::[A-Za-z][A-Za-z0-9+.\-]*)*://")
_SUPPORTED = ("s3:// (extra 's3'), gs:// (extra 'gcs'), hf://datasets/... (extra 'hf'), and with the extra "
              "'remote' alone file:// and memory:// (and any other protocol fsspec knows)")


def is_url(path: str) -> bool:
    """Is ``path`` a URL with a protocol, not a local path?

    Args:
        path: an input as given (anything; only a ``str`` can be a URL).

    Returns:
        True for ``<protocol>://...`` (``s3://...``, ``memory://...``, chained ones such as
        ``simplecache::s3://...``), False otherwise.
    """
    return isinstance(path, str) and _URL.match(path) is not None


def protocol_of(url: str) -> str:
    """The protocol of the file system that holds the data (the last one of a chain), lower case."""
    return url.split("://", 1)[0].split("::")[-1].lower()


def _fsspec():
    try:
        import fsspec
    except ImportError as e:
        raise DependencyError('reading remote inputs needs fsspec: pip install "gpu-dedup[remote]"') from e
    return fsspec


def url_filesystem(url: str) -> tuple[Any, str]:
    """(fsspec file system, its path) of ``url``; a clear error naming the extra when it cannot be had."""
    fsspec = _fsspec()
    proto = protocol_of(url)
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as e:  # fsspec knows the protocol, its package is missing
        pkg, extra = REMOTE_EXTRAS.get(proto, (None, None))
        if extra is not None:
            raise DependencyError(f"reading {url!r} needs {pkg}: pip install \"gpu-dedup[{extra}]\" ({e})") from e
        raise DependencyError(f"reading {url!r} needs the package that implements fsspec's {proto!r} protocol ({e}); "
                              f"supported: {_SUPPORTED}") from e
    except ValueError as e:  # fsspec does not know the protocol
        if "protocol" not in str(e).lower():
            raise
        raise ConfigError(f"unsupported input URL scheme {proto + '://'!r} in {url!r}; supported: {_SUPPORTED}") from e


def fs_path(f: Any) -> str:
    """The path of remote input ``f`` inside its file system (``f.path`` is the full URL)."""
    return f.fs._strip_protocol(f.path)


def url_of(fs: Any, path: str) -> str:
    """The canonical URL of ``path`` on ``fs`` (the ``path`` of its InputFile)."""
    return fs.unstrip_protocol(path)


_pa_filesystems: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_pa_lock = threading.Lock()


def pyarrow_filesystem(fs: Any) -> Any:
    """``pyarrow.fs.PyFileSystem(FSSpecHandler(fs))``, one per fsspec file system."""
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    with _pa_lock:
        pafs = _pa_filesystems.get(fs)
        if pafs is None:
            pafs = _pa_filesystems[fs] = PyFileSystem(FSSpecHandler(fs))
        return pafs


def open_stream(f: Any) -> Any:
    """A readable stream of an input file's bytes, decompressed.

    Args:
        f: a JSON Lines ``InputFile`` (``f.compression``: None, "gzip" or "zstd"); remote when ``f.fs`` is set.

    Returns:
        A ``pyarrow.NativeFile`` input stream of the decompressed bytes: of the local path, or of an fsspec
        file object for a remote input (closed with the stream). The caller closes it.
    """
    if getattr(f, "fs", None) is None:
        return pa.input_stream(f.path, compression=f.compression)
    handle = f.fs.open(fs_path(f), "rb")
    try:
        return pa.input_stream(handle, compression=f.compression)
    except BaseException:
        handle.close()
        raise


def open_parquet(f: Any, **kwargs: Any) -> pq.ParquetFile:
    """Open a Parquet input, local or remote.

    Args:
        f: a Parquet ``InputFile``; remote when ``f.fs`` is set.
        **kwargs: passed to ``pq.ParquetFile`` (e.g. ``metadata=``).

    Returns:
        A ``pq.ParquetFile``. A remote one goes through the pyarrow wrapper of its fsspec file system,
        which reads the row groups asked for as byte ranges.
    """
    if getattr(f, "fs", None) is None:
        return pq.ParquetFile(f.path, **kwargs)
    return pq.ParquetFile(fs_path(f), filesystem=pyarrow_filesystem(f.fs), **kwargs)


def file_size(f: Any) -> int:
    """The size of an input file as stored.

    Args:
        f: an ``InputFile``, local or remote (``f.fs`` set).

    Returns:
        Its size in bytes, compressed as stored.
    """
    if getattr(f, "fs", None) is None:
        return os.path.getsize(f.path)
    return int(f.fs.size(fs_path(f)))
