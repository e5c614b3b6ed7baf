"""JSON Lines bytes: a (decompressed) stream read as blocks cut at newlines (``read_blocks``), and the
physical lines of a block (``split_lines``). Used by the JSON Lines reader (``jsonl``) and by
``write_kept``'s row count (``write``).
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pyarrow as pa

UTF8_BOM = b"\xef\xbb\xbf"
_MIN_READ = 1 << 16


def _last_newline(arr: np.ndarray, limit: int) -> int:
    """Index of the last b"\\n" in arr[:limit], or -1; scans backwards in 1 MiB windows."""
    hi = min(limit, len(arr))
    while hi > 0:
        lo = max(0, hi - (1 << 20))
        idx = np.flatnonzero(arr[lo:hi] == 10)
        if len(idx):
            return lo + int(idx[-1])
        hi = lo
    return -1


def _first_newline(arr: np.ndarray, start: int) -> int:
    lo = start
    while lo < len(arr):
        hi = min(len(arr), lo + (1 << 20))
        idx = np.flatnonzero(arr[lo:hi] == 10)
        if len(idx):
            return lo + int(idx[0])
        lo = hi
    return -1


def read_blocks(stream: Any, target: int) -> Iterator[memoryview]:
    """Blocks of at most ``target`` bytes ending at a newline (the last one at EOF), except that a line
    longer than ``target`` becomes a block of its own.

    Blocks are read-only views of Arrow buffers (pooled memory: no zero-fill; the stream reads straight
    into them), valid while the caller holds them. Only the unconsumed tail (less than ``target`` bytes,
    or one long partial line) is copied when the next buffer is filled; a long line's buffer doubles.

    A read error (corrupt or truncated compressed data, an I/O error) is raised when it happens, after the
    blocks before it; nothing read after them is given (no record of a file whose data fails is used:
    ``FileReader.chunks``).
    """
    data = memoryview(b"")
    eof = False
    while True:
        arr = np.frombuffer(data, dtype=np.uint8)
        cut = -1
        if len(data) >= target or eof:
            cut = _last_newline(arr, target)
            if cut < 0:
                cut = _first_newline(arr, 0)
        if cut < 0 and not eof:
            want = max(target - len(data), len(data), _MIN_READ)
            buf = memoryview(pa.allocate_buffer(len(data) + want)).cast("B")
            buf[:len(data)] = data
            filled = len(data)
            while filled < len(buf):
                n = stream.readinto(buf[filled:])
                if not n:
                    eof = True
                    break
                filled += n
            data = buf[:filled].toreadonly()
            del buf
            continue
        if len(data) == 0:
            return
        if cut < 0:  # EOF without a final newline
            cut = len(data) - 1
        yield data[:cut + 1]
        data = data[cut + 1:]


def split_lines(block: memoryview | bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Physical lines of a block: (starts, content_ends, is_row) as int64/int64/bool arrays [n_lines].

    A block ends with a newline (or at EOF), so the empty piece after the final newline is not a line.
    """
    arr = np.frombuffer(block, dtype=np.uint8)
    nl = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], nl + 1)).astype(np.int64)
    ends = np.concatenate((nl, [len(arr)])).astype(np.int64)
    if starts[-1] == len(arr):
        starts, ends = starts[:-1], ends[:-1]
    is_row = ends > starts
    # A line whose first byte is above ' ' is a row; the rare others are blank only if they hold nothing
    # but spaces/tabs/CR (other control bytes are left for the JSON parser to reject).
    maybe_blank = np.flatnonzero(is_row)
    maybe_blank = maybe_blank[arr[starts[maybe_blank]] <= 32]
    for i in maybe_blank.tolist():
        is_row[i] = bool(bytes(block[starts[i]:ends[i]]).strip(b" \t\r"))
    return starts, ends, is_row
