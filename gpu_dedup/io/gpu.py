"""Reading on the GPU: Parquet text decoded by libcudf straight into device memory.

Pass 1 of a GPU run reads the text column with cudf (through pylibcudf, its stable column API) when it
is importable (``reader="auto"``) or asked for (``reader="cudf"``); otherwise pyarrow reads on the host
and the text buffers are copied to the device through pinned memory. Measured on a 16-core H200 machine
(2026-12): host Parquet decoding gives 2.0 GB/s of text, i.e. about 0.68 M docs/s at that
sample's 2.96 KB per document (500k docs, 1.48 GB), below the 1 M docs/s the MinHash stage is meant to take;
libcudf decodes on the device.

Only the text column goes through cudf. Ids and the keep column are small, so pyarrow reads them for the
same row groups, and everything that gives an error message or a row number stays the pyarrow reader's
(``arrow.ArrowReader``). A batch whose text has nulls or invalid UTF-8, or whose ids have nulls, is read
again by the pyarrow reader, which skips, reports or repairs exactly as on the CPU path; so decisions
are identical to ``reader="pyarrow"`` (tests/io/test_gpu_io.py checks this under the CUDA simulator with a
host stand-in for libcudf; the buffer adapter is checked against the pylibcudf Column protocol).
JSON Lines and in-memory tables always go through pyarrow: their per-line error reporting is the point.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Sequence, get_args

import numpy as np

from ..config import Reader
from ..errors import ConfigError, DataError, RunError, UsageError
from .text import invalid_utf8_rows

logger = logging.getLogger(__name__)

READERS = get_args(Reader)


@dataclass
class DeviceText:
    """One batch of text in device memory. data: uint8 (T,); offsets: int64 (n+1,), absolute positions
    into data (need not start at 0). null_count: rows that are null (their offsets mean nothing);
    invalid_rows: rows that are not valid UTF-8 (counted only when there are no nulls). ``owner`` keeps
    the memory the arrays view alive (a pylibcudf column)."""

    data: Any
    offsets: Any
    null_count: int
    invalid_rows: int
    owner: Any = None

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @property
    def nbytes(self) -> int:
        return int(self.offsets[-1] - self.offsets[0]) if len(self) else 0

    @property
    def clean(self) -> bool:
        """True when the batch can be used as read: no nulls, valid UTF-8 everywhere."""
        return self.null_count == 0 and self.invalid_rows == 0


def device_text(data, offsets, null_count: int, device: str, owner: Any = None) -> DeviceText:
    """Wrap device buffers as a ``DeviceText``, counting the rows that are not valid UTF-8.

    Args:
        data: uint8 (T,) in device memory (host arrays with device="cpu").
        offsets: int64 (n+1,), absolute positions into data.
        null_count: rows that are null; then the UTF-8 check is skipped (such a batch goes to the host
            reader anyway).
        device: "cuda" or "cpu", where the UTF-8 check runs (``invalid_utf8_rows``).
        owner: what keeps the memory the arrays view alive (a pylibcudf column), or None.

    Returns:
        A ``DeviceText`` with ``invalid_rows`` counted (0 when there are nulls).
    """
    invalid = 0 if null_count else int(invalid_utf8_rows(data, offsets, device).sum())
    return DeviceText(data, offsets, int(null_count), invalid, owner)


@functools.lru_cache(maxsize=1)
def cudf_status() -> tuple[bool, str]:
    """Can cudf read Parquet text here? Needs pylibcudf with the options-builder Parquet API (cudf >= 25.02).
    Probed once per process.

    Returns:
        (usable, reason): whether it is, and why, naming the pylibcudf version or what is missing.
    """
    try:
        import pylibcudf as plc
    except Exception as exc:
        return False, f"pylibcudf (cudf) is not importable ({type(exc).__name__}: {exc})"
    version = getattr(plc, "__version__", "?")
    try:
        plc.io.parquet.ParquetReaderOptions.builder  # noqa: B018 - probing the API
        plc.io.parquet.read_parquet  # noqa: B018
        plc.io.SourceInfo  # noqa: B018
        plc.TypeId.STRING  # noqa: B018
    except AttributeError as exc:
        return False, f"pylibcudf {version} lacks the Parquet options API ({exc}); cudf >= 25.02 is needed"
    return True, f"pylibcudf {version}"


def resolve_reader(reader: str, device: str) -> "CudfTextReader | None":
    """The device reader pass 1 uses, or None for pyarrow.

    Args:
        reader: "auto" (cudf on a real GPU when it is usable; the choice is logged once), "cudf" or "pyarrow".
        device: the run's resolved device, "cpu" or "cuda".

    Returns:
        A ``CudfTextReader``, or None: read with pyarrow (reader="pyarrow"; "auto" on the CPU, under the CUDA
        simulator, or without a usable cudf).

    Raises:
        ConfigError: an unknown ``reader``, or "cudf" without device="cuda" on a real GPU.
        RunError: "cudf" asked for but pylibcudf is not usable (``cudf_status`` says why).
    """
    from ..runtime.device import simulator

    if reader not in READERS:
        raise ConfigError(f"reader must be one of {READERS}, got {reader!r}")
    if reader == "pyarrow":
        return None
    real_gpu = device == "cuda" and not simulator()
    if reader == "cudf":
        if not real_gpu:
            raise ConfigError(f"reader='cudf' decodes Parquet into GPU memory, so it needs device='cuda' on a real "
                              f"GPU (this run has device={device!r}"
                              f"{', under the CUDA simulator' if simulator() else ''}); use reader='pyarrow' or 'auto'")
        usable, reason = cudf_status()
        if not usable:
            raise RunError(f"reader='cudf' was requested but {reason}. Install RAPIDS cudf for this CUDA "
                           "version, or run with reader='pyarrow' (or 'auto').")
        return CudfTextReader()
    if not real_gpu:
        return None
    return CudfTextReader() if _auto_choice() else None


@functools.lru_cache(maxsize=1)
def _auto_choice() -> bool:
    usable, reason = cudf_status()
    logger.info("reader=auto chose %s for Parquet text (%s)", "cudf" if usable else "pyarrow", reason)
    return usable


class CudfTextReader:
    """Reads one Parquet text column, for some row groups, into device memory with libcudf."""

    name = "cudf"

    def read(self, path: str, row_groups: Sequence[int], text_field: str) -> DeviceText:
        """Read the text column of some row groups of a local Parquet file into device memory.

        Args:
            path: the Parquet file.
            row_groups: the row groups to read, in order.
            text_field: the text column.

        Returns:
            A ``DeviceText`` of their rows (nulls and invalid UTF-8 counted, for the host reader to handle).

        Raises:
            UsageError: cudf read the column as another type than STRING (``string_buffers``).
        """
        import cupy
        import pylibcudf as plc

        opts = plc.io.parquet.ParquetReaderOptions.builder(plc.io.SourceInfo([path])).build()
        # cudf renamed set_columns to set_column_names (25.x); either selects top-level columns by name
        select = getattr(opts, "set_column_names", None) or getattr(opts, "set_columns")
        select([text_field])
        opts.set_row_groups([list(row_groups)])
        table = plc.io.parquet.read_parquet(opts)
        col = table.columns[0]
        data, offsets = string_buffers(col, cupy, plc.TypeId)
        return device_text(data, offsets, col.null_count(), "cuda", owner=(table, col))


def string_buffers(col: Any, xp: Any, type_id: Any) -> tuple[Any, Any]:
    """The flat buffers of a pylibcudf strings column: offsets are child 0 (INT32, or INT64 for large
    columns), the characters are the column's data buffer (cudf >= 24.02).

    Args:
        col: a pylibcudf strings ``Column``.
        xp: the array module (cupy).
        type_id: ``pylibcudf.TypeId``.

    Returns:
        (data uint8 (T,), offsets int64 (n+1,)), absolute positions into data. Data views the column's
        memory (keep the column alive while it is used); offsets are a widened copy.

    Raises:
        UsageError: the column is not STRING, or its offsets are not INT32 / INT64 (read with
            reader='pyarrow').
        DataError: the offsets exceed the column's character bytes.
    """
    tid = col.type().id()
    if tid != type_id.STRING:
        raise UsageError(f"cudf read the text column as {tid}, not STRING; use reader='pyarrow' for this file")
    n = col.size()
    if n == 0:
        return xp.zeros(0, xp.uint8), xp.zeros(1, xp.int64)
    child = col.child(0)
    width = {type_id.INT32: np.int32, type_id.INT64: np.int64}.get(child.type().id())
    if width is None:
        raise UsageError(f"unexpected strings offsets type {child.type().id()} (expected INT32 or INT64)")
    first = child.offset() + col.offset()
    offsets = _as_bytes(child.data(), xp).view(width)[first:first + n + 1].astype(xp.int64)
    buf = col.data()
    data = _as_bytes(buf, xp) if buf is not None else xp.zeros(0, xp.uint8)
    if int(offsets[-1]) > data.shape[0] or int(offsets[0]) < 0:
        raise DataError(f"cudf strings column offsets [{int(offsets[0])}, {int(offsets[-1])}] exceed its "
                        f"{data.shape[0]} character bytes")
    return data, offsets


def _as_bytes(buf: Any, xp: Any):
    """A flat uint8 view of a buffer exposing __cuda_array_interface__ (or __array_interface__)."""
    return xp.asarray(buf).reshape(-1).view(xp.uint8)
