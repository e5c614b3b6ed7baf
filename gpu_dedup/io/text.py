"""Arrow text as flat byte arrays, and the UTF-8 check a device reader needs.

``arrow_text_buffers`` gives zero-copy views of an Arrow string array (the layout every kernel that reads
documents takes: data uint8 (T,), offsets int64 (n+1,)); ``invalid_utf8_rows`` finds the rows of such
arrays that are not valid UTF-8, on the CPU or the GPU (``ops.core.utf8_invalid``). Both are I/O: they know the Arrow layout and the
encoding, nothing of any stage.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import DataError, UsageError
from ..ops import core


def arrow_text_buffers(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Zero-copy views of an Arrow string array: the layout every kernel that reads documents takes.

    Args:
        text: pa.string() or pa.large_string() [n], no nulls (a slice is fine).

    Returns:
        (data uint8 (T,), offsets int64 (n+1,)). Offsets are absolute positions into data (they need not
        start at 0); row i is ``data[offsets[i]:offsets[i+1]]``. Data is a view; offsets too for
        large_string (string's int32 offsets are widened, a copy of n+1 values).

    Raises:
        DataError: ``text`` has nulls (the reader must reject or skip them), or offsets beyond its data
            buffer (a corrupt array).
        UsageError: ``text`` is not a string / large_string array.
    """
    if text.null_count:
        raise DataError(f"text array has {text.null_count} null values; the reader must reject or skip them")
    if pa.types.is_string(text.type):
        off_dtype = np.int32
    elif pa.types.is_large_string(text.type):
        off_dtype = np.int64
    else:
        raise UsageError(f"text must be an Arrow string or large_string array, got {text.type}")
    bufs = text.buffers()
    n = len(text)
    offsets = np.frombuffer(bufs[1], dtype=off_dtype)[text.offset:text.offset + n + 1].astype(np.int64, copy=False)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    if n and offsets[-1] > data.shape[0]:
        raise DataError("corrupt Arrow string array: offsets exceed the data buffer")
    return data, offsets


def invalid_utf8_rows(data, offsets, device: str = "cpu"):
    """The rows that are not valid UTF-8. The pyarrow reader validates on the host; a reader that puts the
    text straight on the device (cudf) checks here and sends the few batches with invalid rows through the
    host repair instead.

    Args:
        data: uint8 (T,), the text bytes (NumPy, or CuPy with device="cuda").
        offsets: int64 (n+1,), absolute positions into data.
        device: "cpu" or "cuda" (``ops.core.utf8_invalid``).

    Returns:
        bool (n,) in the device's array module: True where ``data[offsets[i]:offsets[i+1]]`` is not valid UTF-8.
    """
    return core.utf8_invalid(device, data, offsets)
