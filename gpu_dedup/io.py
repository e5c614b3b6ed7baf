"""Input discovery, bounded-memory batch reading, and atomic writing of the kept rows.

Inputs
    ``resolve_inputs`` turns files, directories (searched recursively; names starting with "." are
    skipped, which also hides this module's own temporary files) and glob patterns into a sorted list of
    ``InputFile``. Supported: ``.jsonl``/``.json`` (JSON Lines, optionally ``.gz`` / ``.zst``) and
    ``.parquet``. ``table_input`` wraps an in-memory ``pyarrow.Table`` or pandas DataFrame.

Reading (``iter_batches``)
    Files are read in order; every batch belongs to one file and holds at most ``batch_bytes`` of UTF-8
    text (a single larger document makes a one-row batch). Global row ids are dense over the whole run.
    JSON Lines are read as byte blocks of at most ``batch_bytes`` cut at newlines and parsed with
    ``pyarrow.json`` (fast path). When that parser rejects a block, or its result is in any way
    doubtful (row count, nulls, ids present in only some rows, invalid UTF-8), the block is re-parsed
    line by line with Python's ``json`` (``strict=False``: raw control characters inside strings are
    accepted), which is the reference: the fast path is only used when it gives the same result.

    Parquet files are read as record batches of about ``batch_bytes`` of the columns read (a record
    batch may span row groups), decoded in parallel: row groups on a pool of ``read_threads`` threads,
    each on its own file handle, with the per-row work (null checks, UTF-8 validation and repair, id
    casts, keep values) done there too, submitted in file order across files while at most
    ``read_ahead_bytes`` are ahead of the consumer. Batches, row numbers, the report and errors are those
    of a sequential read whatever the thread count or timing: the consumer takes the record batches in
    order and replays what the workers found, so the first problem in file order is the one raised. A row
    group that cannot be decoded fails every record batch holding its rows; the rows before the first of
    those are read, then the file ends ("cannot read the file after row N").

    JSON Lines rules: a line holding only spaces/tabs/CR is blank; blank lines are not rows and are
    skipped silently. Line numbers are 1-based physical lines of the decompressed file. A UTF-8 byte
    order mark at the very start of a file is ignored (and not copied by ``write_kept``). Duplicate keys
    in one object: the last one wins (Python ``json`` semantics).

    Bad rows (malformed JSON, not an object, missing / null / non-string text, null id, id that is
    neither a string nor an integer, id present in some rows of a file but not in others) raise
    ``InputError`` naming ``relpath:line`` (JSON Lines) or ``relpath row N`` (Parquet / tables; N is the
    0-based physical row) with ``on_error="raise"``; with ``on_error="skip"`` the row is dropped (it is
    not a document and gets no row id) and recorded in ``ReadReport.skipped``. File-level problems are
    handled the same way, naming just the file: a Parquet file that cannot be opened, or whose text / id
    column is missing or has the wrong type; a compressed file that fails to decompress (skip mode keeps
    the complete lines before the 1 MiB window where it failed). A file with zero rows yields no batch
    and is listed in ``ReadReport.empty_files``.

Ids
    With ``id_field`` set and present in a file, every row of that file must carry a non-null string or
    integer id (integers become their decimal string). When ``id_field`` is None, or absent from a whole
    file (Parquet schema lacks it; no JSON line of the file has it), ids are generated as
    ``f"{relpath}:{row_in_file}"`` with ``row_in_file`` the 0-based count of real rows of that file.
    For JSON Lines the file's first row decides whether the file has ids.

Invalid UTF-8 (policy)
    Bytes that are not valid UTF-8 are replaced with U+FFFD exactly as ``bytes.decode("utf-8",
    "replace")`` does, applied to the whole JSON line (JSON Lines) or to the text / id value (Parquet,
    tables); lone surrogate escapes such as ``"\\ud800"`` are replaced with one U+FFFD each. The row is
    kept and counted once in ``ReadReport.invalid_utf8_rows``; this is not an error. ``pyarrow.json``
    would silently accept such bytes, so each block is validated first and invalid blocks take the
    line-by-line path.

keep_column
    Numeric (int / float / bool / decimal) values read as float64, null or missing -> NaN. A keep column
    missing from a whole file, or a non-numeric value, always raises ``InputError`` (also with
    ``on_error="skip"``): skipping those rows would make the numbering differ from ``write_kept``, which
    does not read the keep column.

Writing
    ``write_kept`` re-reads the inputs with the same reader (so row numbering is identical by
    construction) and writes ``out_dir/<relpath>`` per input: JSON Lines copy the original line bytes of
    kept rows verbatim (same compression); Parquet keeps the original schema and codec; an in-memory
    table becomes ``out_dir/deduplicated.parquet``. Files are written in parallel (``read_threads`` at a
    time, each streamed in chunks); a file's first row number comes from the per-file row counts of the
    read (``file_rows``), or a counting pass when they are not given. Every file is written to a temporary
    name and renamed into place only after all inputs were read and every file's row count matched.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import logging
import math
import os
import re
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

logger = logging.getLogger(__name__)

TABLE_PATH = "<table>"
TABLE_OUTPUT_NAME = "deduplicated.parquet"
# (suffix, fmt, compression); longest suffixes first so ".jsonl.gz" wins over ".gz".
_SUFFIXES: tuple[tuple[str, str, str | None], ...] = (
    (".jsonl.gz", "jsonl", "gzip"), (".json.gz", "jsonl", "gzip"),
    (".jsonl.zst", "jsonl", "zstd"), (".json.zst", "jsonl", "zstd"),
    (".jsonl", "jsonl", None), (".json", "jsonl", None), (".parquet", "parquet", None),
)
SUPPORTED_SUFFIXES = tuple(s for s, _, _ in _SUFFIXES)
_UTF8_BOM = b"\xef\xbb\xbf"
_MIN_READ = 1 << 16
_READ_ALIGN = 1 << 20
_PREVIEW_CHARS = 80
_SURROGATES = re.compile("[\ud800-\udfff]")
_PARQUET_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "ZSTD": "zstd", "LZ4": "lz4",
                   "LZ4_RAW": "lz4", "UNCOMPRESSED": "none"}


class InputError(ValueError):
    """Bad input data; the message names the file and line/row and the offending value."""


# ----------------------------------------------------------------------------------------------------
# Input discovery
# ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InputFile:
    path: str
    relpath: str
    fmt: Literal["jsonl", "parquet", "table"]
    compression: Literal[None, "gzip", "zstd"]
    table: pa.Table | None = field(default=None, compare=False, repr=False)


def _classify(path: str) -> tuple[str, str | None] | None:
    low = path.lower()
    for suffix, fmt, comp in _SUFFIXES:
        if low.endswith(suffix):
            return fmt, comp
    return None


def _walk_supported(directory: str) -> list[str]:
    found = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, n) for n in names if not n.startswith(".") and _classify(n))
    return found


def _expand_one(arg: str) -> list[str]:
    if os.path.isdir(arg):
        files = _walk_supported(arg)
        if not files:
            raise ValueError(f"input directory {arg!r} contains no supported files "
                             f"({', '.join(SUPPORTED_SUFFIXES)}); point to the data files or their folder")
        return files
    if os.path.isfile(arg):
        if _classify(arg) is None:
            raise ValueError(f"input file {arg!r} has an unsupported extension; supported: "
                             f"{', '.join(SUPPORTED_SUFFIXES)} (rename it or convert it)")
        return [arg]
    if glob.has_magic(arg):
        matches = sorted(glob.glob(arg, recursive=True))
        if not matches:
            raise FileNotFoundError(f"input pattern {arg!r} matched nothing; check the path and quoting")
        files: list[str] = []
        for m in matches:
            if os.path.isdir(m):
                files.extend(_walk_supported(m))
            elif _classify(m):
                files.append(m)
        if not files:
            raise ValueError(f"input pattern {arg!r} matched {len(matches)} path(s) but no supported files "
                             f"({', '.join(SUPPORTED_SUFFIXES)})")
        return files
    raise FileNotFoundError(f"input {arg!r} does not exist (not a file, directory or glob match)")


def resolve_inputs(inputs: Sequence[str | os.PathLike]) -> list[InputFile]:
    """Expand files / directories (recursive) / glob patterns into a sorted, de-duplicated list.

    ``relpath`` is relative to the common parent directory of all files (a single file: its basename),
    with "/" separators; it names the file in ids, errors and the output layout.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if not inputs:
        raise ValueError("no inputs given; pass at least one file, directory or glob pattern")
    paths: set[str] = set()
    for arg in inputs:
        paths.update(os.path.abspath(p) for p in _expand_one(os.fspath(arg)))
    ordered = sorted(paths)
    root = os.path.commonpath([os.path.dirname(p) for p in ordered])
    result = []
    for p in ordered:
        fmt, comp = _classify(p)  # type: ignore[misc]
        rel = os.path.relpath(p, root).replace(os.sep, "/")
        result.append(InputFile(path=p, relpath=rel, fmt=fmt, compression=comp))  # type: ignore[arg-type]
    return result


def table_input(obj: Any) -> list[InputFile]:
    """Wrap a ``pyarrow.Table`` (or pandas DataFrame, converted without its index) as one input."""
    if isinstance(obj, pa.RecordBatch):
        obj = pa.Table.from_batches([obj])
    elif not isinstance(obj, pa.Table):
        if type(obj).__module__.split(".")[0] == "pandas" and type(obj).__name__ == "DataFrame":
            obj = pa.Table.from_pandas(obj, preserve_index=False)
        else:
            raise TypeError(f"table_input needs a pyarrow.Table or pandas.DataFrame, got {type(obj).__name__}")
    return [InputFile(path=TABLE_PATH, relpath=TABLE_PATH, fmt="table", compression=None, table=obj)]


# ----------------------------------------------------------------------------------------------------
# Batches and report
# ----------------------------------------------------------------------------------------------------

@dataclass
class Batch:
    """Rows ``row_start .. row_start + len - 1`` of the run, all from ``files[file_index]``.

    ids: pa.string() [n]; text: pa.large_string() [n], no nulls; keep_values: float64 [n] or None.
    With a device reader (``gpu_io``) a Parquet batch may instead carry its text in device memory:
    ``text`` is None and ``device_text`` a ``gpu_io.DeviceText`` (clean: no nulls, valid UTF-8).
    """

    file_index: int
    row_start: int
    ids: pa.Array
    text: pa.Array | None
    keep_values: np.ndarray | None = None
    device_text: Any = None

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class ReadReport:
    files: int = 0
    rows: int = 0
    bytes_text: int = 0
    skipped: list[dict] = field(default_factory=list)
    invalid_utf8_rows: int = 0
    empty_files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class _Spec:
    id_field: str | None
    text_field: str
    keep_column: str | None
    on_error: str


@dataclass
class _Chunk:
    """Accepted rows of one piece of a file. ``ids`` None means generated ids.

    For writing: JSON Lines give ``raw`` with row byte spans ``[starts, ends)`` (line incl. newline);
    Arrow sources give the full record batch ``record`` and ``valid`` (bool [len(record)]) = accepted rows.
    """

    ids: pa.Array | None
    text: pa.Array
    keep: np.ndarray | None
    invalid_utf8: int = 0
    raw: memoryview | None = None
    starts: np.ndarray | None = None
    ends: np.ndarray | None = None
    record: pa.RecordBatch | None = None
    valid: np.ndarray | None = None
    device_text: Any = None  # gpu_io.DeviceText instead of text (then text is None)
    # The batches this chunk becomes, when already cut by a pool worker (see _text_parts): then ``text``
    # is None and ``parts`` carries the batches' texts.
    parts: list[tuple[int, int, pa.Array, int]] | None = None

    @property
    def rows(self) -> int:
        if self.parts is not None:
            return self.parts[-1][1] if self.parts else 0
        return len(self.device_text) if self.device_text is not None else len(self.text)


class _FileReader:
    """Shared state for reading one file: error policy, skipped records, per-file id / keep state."""

    def __init__(self, f: InputFile, spec: _Spec, report: ReadReport) -> None:
        self.f, self.spec, self.report = f, spec, report
        self.rows = 0
        self.unreadable = False  # the file (or its schema) could not be read at all: skipped, not "empty"

    def where(self, line: int | None = None, row: int | None = None) -> str:
        if line is not None:
            return f"{self.f.relpath}:{line}"
        if row is not None:
            return f"{self.f.relpath} row {row}"
        return self.f.relpath

    def bad(self, reason: str, *, line: int | None = None, row: int | None = None) -> None:
        """A bad row (or file): raise, or record it and let the caller drop it."""
        if self.spec.on_error == "raise":
            raise self.bad_error(reason, line=line, row=row)
        self.report.skipped.append({"file": self.f.relpath, "line": line, "row": row, "reason": reason})
        logger.debug("skipped %s: %s", self.where(line, row), reason)

    def bad_error(self, reason: str, *, line: int | None = None, row: int | None = None) -> InputError:
        """The error ``bad`` raises with on_error='raise'."""
        return InputError(f"{self.where(line, row)}: {reason}; fix the data or use on_error='skip' to drop bad rows")

    def fatal(self, reason: str, *, line: int | None = None, row: int | None = None) -> InputError:
        return InputError(f"{self.where(line, row)}: {reason}")


def _preview(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= _PREVIEW_CHARS else r[:_PREVIEW_CHARS] + "...(truncated)"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _fix_surrogates(s: str) -> tuple[str, bool]:
    """Replace lone surrogates (from JSON escapes) with U+FFFD, one per surrogate code unit."""
    if _SURROGATES.search(s) is None:
        return s, False
    return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), True


def _utf8_valid(buf: memoryview) -> bool:
    """Strict UTF-8 check in Arrow, without building a Python str."""
    arr = pa.Array.from_buffers(pa.large_binary(), 1, [None, pa.py_buffer(np.array([0, len(buf)], np.int64)),
                                                        pa.py_buffer(buf)])
    try:
        arr.view(pa.large_string()).validate(full=True)
        return True
    except pa.ArrowInvalid:
        return False


def _generated_ids(relpath: str, first: int, n: int) -> pa.Array:
    nums = pa.array(np.arange(first, first + n, dtype=np.int64)).cast(pa.string())
    return pc.binary_join_element_wise(f"{relpath}:", nums, "")


def _text_lengths(text: pa.Array) -> np.ndarray:
    return pc.binary_length(text).to_numpy(zero_copy_only=False).astype(np.int64)


def _split_cum(cum: np.ndarray, batch_bytes: int) -> list[tuple[int, int]]:
    """[start, end) row ranges holding at most batch_bytes of text each (at least one row), from the
    cumulative text lengths ``cum`` of the rows."""
    n = len(cum)
    if n == 0:
        return []
    if cum[-1] <= batch_bytes:
        return [(0, n)]
    out, start = [], 0
    while start < n:
        base = int(cum[start - 1]) if start else 0
        end = max(int(np.searchsorted(cum, base + batch_bytes, side="right")), start + 1)
        out.append((start, end))
        start = end
    return out


def _text_parts(text: pa.Array, batch_bytes: int) -> list[tuple[int, int, pa.Array, int]]:
    """The batches of one chunk: (start, end, text, text bytes) per row range of at most batch_bytes."""
    cum = np.cumsum(_text_lengths(text))
    ranges = _split_cum(cum, batch_bytes)
    parts = []
    for a, b in ranges:
        piece = text.slice(a, b - a)
        if len(ranges) > 1:  # own, compact buffers: consumers may ship the whole data buffer
            piece = pa.concat_arrays([piece])
        parts.append((a, b, piece, int(cum[b - 1] - (cum[a - 1] if a else 0))))
    return parts


# ----------------------------------------------------------------------------------------------------
# JSON Lines
# ----------------------------------------------------------------------------------------------------

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


def _read_blocks(stream: Any, target: int) -> Iterator[memoryview]:
    """Blocks of at most ``target`` bytes ending at a newline (the last one at EOF), except that a line
    longer than ``target`` becomes a block of its own.

    Blocks are read-only views of Arrow buffers (pooled memory: no zero-fill; the stream reads straight
    into them), valid while the caller holds them. Only the unconsumed tail (less than ``target`` bytes,
    or one long partial line) is copied when the next buffer is filled; a long line's buffer doubles.

    A read error (corrupt or truncated compressed data) ends the data at the last newline before the
    _READ_ALIGN window (of the decompressed stream) in which it happened; those complete lines are
    yielded, then the error is raised. Every fill ends on a window boundary, so what is salvaged does not
    depend on ``target`` (``write_kept`` must number rows exactly as ``iter_batches`` did).
    """
    data = memoryview(b"")
    eof = False
    error: BaseException | None = None
    pos = 0  # offset in the (decompressed) stream
    while True:
        arr = np.frombuffer(data, dtype=np.uint8)
        cut = -1
        if len(data) >= target or eof:
            cut = _last_newline(arr, target)
            if cut < 0:
                cut = _first_newline(arr, 0)
        if cut < 0 and not eof:
            want = max(target - len(data), len(data), _MIN_READ)
            end = -(-(pos + want) // _READ_ALIGN) * _READ_ALIGN  # pos is on a boundary: fills end on one
            buf = memoryview(pa.allocate_buffer(len(data) + end - pos)).cast("B")
            buf[:len(data)] = data
            filled = len(data)
            while pos < end:
                try:
                    # one window at most per call: a failing call loses only its own window
                    n = stream.readinto(buf[filled:filled + _READ_ALIGN - pos % _READ_ALIGN])
                except (OSError, pa.ArrowException, ValueError) as e:
                    error, eof = e, True
                    filled -= pos % _READ_ALIGN  # drop the partly read window
                    filled = _last_newline(np.frombuffer(buf, dtype=np.uint8, count=filled), filled) + 1
                    break
                if not n:
                    eof = True
                    break
                filled += n
                pos += n
            data = buf[:filled].toreadonly()
            del buf
            continue
        if len(data) == 0:
            if error is not None:
                raise error
            return
        if cut < 0:  # EOF without a final newline
            cut = len(data) - 1
        yield data[:cut + 1]
        data = data[cut + 1:]


def _split_lines(block: memoryview | bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _null_key_pattern(key: str) -> re.Pattern:
    return re.compile(re.escape(json.dumps(key, ensure_ascii=False).encode()) + rb"\s*:\s*null")


class _JsonlReader(_FileReader):
    def __init__(self, f: InputFile, spec: _Spec, report: ReadReport, block_bytes: int) -> None:
        super().__init__(f, spec, report)
        self.block_bytes = block_bytes
        self.id_mode: bool | None = None  # does this file carry ids? decided by its first row
        self.id_mode_line = 0
        self.id_type = pa.string()
        self.keep_seen = False
        self.slow_blocks = 0
        self.blocks = 0
        # Arrow reads a missing key and an explicit null alike; `"key": null` anywhere in the block (even
        # nested) sends an all-null id column to the line parser, which can tell them apart.
        self._id_null = _null_key_pattern(spec.id_field) if spec.id_field else None
        self._keep_null = _null_key_pattern(spec.keep_column) if spec.keep_column else None

    def chunks(self) -> Iterator[_Chunk]:
        line_base = 1
        try:
            stream = pa.input_stream(self.f.path, compression=self.f.compression)
        except (OSError, pa.ArrowException) as e:
            raise self.fatal(f"cannot open: {e}") from e
        with stream:
            blocks = _read_blocks(stream, self.block_bytes)
            first = True
            while True:
                try:
                    block = next(blocks)
                except StopIteration:
                    break
                except (OSError, pa.ArrowException) as e:  # corrupt compressed stream, I/O error
                    self.unreadable = self.rows == 0
                    self.bad(f"cannot read/decompress the file after line {line_base - 1} (the lines before "
                             f"it were read): {e}", line=line_base)
                    break
                if first and block[:len(_UTF8_BOM)] == _UTF8_BOM:
                    block = block[len(_UTF8_BOM):]
                first = False
                chunk, newlines = self._parse_block(block, line_base)
                line_base += int(newlines)
                if chunk is not None:
                    self.rows += len(chunk.text)
                    yield chunk
        if self.spec.keep_column and self.rows and not self.keep_seen:
            raise self.fatal(f"keep column {self.spec.keep_column!r} is not in any row; add it or choose "
                             f"another keep policy")
        if self.slow_blocks:
            logger.info("%s: %d of %d blocks needed the line-by-line JSON parser", self.f.relpath,
                        self.slow_blocks, self.blocks)

    def _parse_block(self, block: memoryview, line_base: int) -> tuple[_Chunk | None, int]:
        """Parse one block; returns (accepted rows or None, number of newlines in the block)."""
        if len(block) == 0:
            return None, 0
        starts, ends, is_row = _split_lines(block)
        newlines = len(starts) - int(ends[-1] == len(block))  # the last line may lack its newline
        rows = np.flatnonzero(is_row)
        if len(rows) == 0:
            return None, newlines
        self.blocks += 1
        r_starts, r_ends = starts[rows], ends[rows]
        spans_end = np.minimum(r_ends + 1, len(block))  # include the newline in the copied bytes
        chunk = self._fast(block, r_starts, r_ends, line_base + int(rows[0]))
        if chunk is None:
            self.slow_blocks += 1
            chunk, accepted = self._slow(block, r_starts, r_ends, line_base + rows)
            r_starts, spans_end = r_starts[accepted], spans_end[accepted]
            if len(r_starts) == 0:
                return None, newlines
        chunk.raw, chunk.starts, chunk.ends = block, r_starts, spans_end
        return chunk, newlines

    def _schema(self) -> pa.Schema:
        fields = [pa.field(self.spec.text_field, pa.large_string())]
        if self.spec.id_field:
            fields.append(pa.field(self.spec.id_field, self.id_type))
        if self.spec.keep_column:
            fields.append(pa.field(self.spec.keep_column, pa.float64()))
        return pa.schema(fields)

    def _arrow_parse(self, block: memoryview, max_line: int) -> pa.Table | None:
        # Block size must exceed the longest line; several blocks per buffer let Arrow use its threads.
        block_size = int(min(max(1 << 22, 2 * max_line + 16), 2**31 - 1))
        for attempt in range(2):
            opts = pajson.ParseOptions(explicit_schema=self._schema(), unexpected_field_behavior="ignore",
                                       newlines_in_values=False)
            try:
                return pajson.read_json(pa.BufferReader(pa.py_buffer(block)),
                                        read_options=pajson.ReadOptions(block_size=block_size),
                                        parse_options=opts)
            except pa.ArrowException as e:  # anything Arrow rejects goes to the line parser
                msg = str(e)
                id_related = self.spec.id_field and (f"Column(/{self.spec.id_field})" in msg or "int64" in msg)
                if attempt == 0 and id_related:  # integer ids: remember the type for the next blocks
                    self.id_type = pa.int64() if self.id_type == pa.string() else pa.string()
                    continue
                return None
        return None

    def _fast(self, block: memoryview, starts: np.ndarray, ends: np.ndarray, first_line: int) -> _Chunk | None:
        """pyarrow.json on the whole block; None whenever the result might differ from ``_slow``."""
        if not _utf8_valid(block):
            return None
        table = self._arrow_parse(block, int((ends - starts).max()))
        if table is None or table.num_rows != len(starts):
            return None
        text = table.column(self.spec.text_field).combine_chunks()
        if text.null_count:
            return None
        has = None
        if self.spec.id_field:
            col = table.column(self.spec.id_field)
            if col.null_count == 0:
                has = True
            elif col.null_count == len(col) and self._id_null.search(block) is None:
                has = False
            else:
                return None  # some rows lack the id or have null: let the line parser say which
            if self.id_mode is not None and has != self.id_mode:
                return None
        keep = None
        if self.spec.keep_column:
            kcol = table.column(self.spec.keep_column)
            if kcol.null_count == len(kcol) and self._keep_null.search(block) is not None:
                return None  # missing vs null matters (a file must have the column): ask the line parser
            keep = kcol.combine_chunks().to_numpy(zero_copy_only=False).astype(np.float64)
        # Accepted: only now update the per-file state, exactly as the line parser would have.
        if self.spec.keep_column:
            self.keep_seen |= kcol.null_count < len(kcol)
        ids = None
        if has is not None:
            if self.id_mode is None:
                self.id_mode, self.id_mode_line = has, first_line
            ids = col.combine_chunks().cast(pa.string()) if has else None
        return _Chunk(ids=ids, text=text, keep=keep)

    def _slow(self, block: memoryview, starts: np.ndarray, ends: np.ndarray,
              line_nos: np.ndarray) -> tuple[_Chunk, np.ndarray]:
        """Reference parser: one Python ``json.loads`` per line. Returns the chunk and the accepted mask."""
        spec = self.spec
        accepted = np.zeros(len(starts), dtype=bool)
        texts: list[str] = []
        ids: list[str] = []
        keeps: list[float] = []
        invalid = 0
        for i, (s, e, ln) in enumerate(zip(starts.tolist(), ends.tolist(), line_nos.tolist())):
            raw = block[s:e]
            try:
                line, bad_utf8 = str(raw, "utf-8"), False
            except UnicodeDecodeError:
                line, bad_utf8 = str(raw, "utf-8", "replace"), True
            try:
                obj = json.loads(line, strict=False)
            except json.JSONDecodeError as err:
                self.bad(f"malformed JSON ({err.msg} at column {err.colno}): {_preview(line)}", line=ln)
                continue
            except RecursionError:
                self.bad("malformed JSON (nested too deeply)", line=ln)
                continue
            if not isinstance(obj, dict):
                self.bad(f"not a JSON object (a JSON {_json_type(obj)}): {_preview(line)}", line=ln)
                continue
            if spec.text_field not in obj:
                keys = list(obj)[:10]
                self.bad(f"missing text field {spec.text_field!r} (keys: {keys}); set text_field to the right "
                         f"key", line=ln)
                continue
            text = obj[spec.text_field]
            if not isinstance(text, str):
                what = "null" if text is None else f"a JSON {_json_type(text)} ({_preview(text)}), not a string"
                self.bad(f"text field {spec.text_field!r} is {what}", line=ln)
                continue
            text, fixed = _fix_surrogates(text)
            bad_utf8 |= fixed
            id_value = None
            if spec.id_field:
                has = spec.id_field in obj
                if self.id_mode is None:
                    self.id_mode, self.id_mode_line = has, ln
                if has != self.id_mode:
                    first = f"line {self.id_mode_line}"
                    if self.id_mode:
                        self.bad(f"id field {spec.id_field!r} is missing, but the file's first row ({first}) has "
                                 f"it; every row of a file must have it, or none (then ids are generated)", line=ln)
                    else:
                        self.bad(f"id field {spec.id_field!r} is present, but the file's first row ({first}) "
                                 f"lacks it; every row of a file must have it, or none", line=ln)
                    continue
                if has:
                    v = obj[spec.id_field]
                    if isinstance(v, str):
                        id_value, fixed = _fix_surrogates(v)
                        bad_utf8 |= fixed
                    elif isinstance(v, int) and not isinstance(v, bool):
                        id_value = str(v)
                    else:
                        what = "null" if v is None else f"a JSON {_json_type(v)} ({_preview(v)})"
                        self.bad(f"id field {spec.id_field!r} is {what}; ids must be strings or integers", line=ln)
                        continue
            if spec.keep_column:
                kv = obj.get(spec.keep_column)
                self.keep_seen |= spec.keep_column in obj
                if kv is None:
                    keeps.append(math.nan)
                elif isinstance(kv, (int, float)):
                    try:
                        keeps.append(float(kv))
                    except OverflowError:
                        raise self.fatal(f"keep column {spec.keep_column!r} value {_preview(kv)} does not fit "
                                         f"a float64", line=ln) from None
                else:
                    raise self.fatal(f"keep column {spec.keep_column!r} is a JSON {_json_type(kv)} "
                                     f"({_preview(kv)}), not a number; fix the data or choose another keep "
                                     f"policy", line=ln)
            accepted[i] = True
            texts.append(text)
            if id_value is not None:
                ids.append(id_value)
            invalid += bad_utf8
        has_ids = bool(spec.id_field) and bool(self.id_mode)
        chunk = _Chunk(ids=pa.array(ids, pa.string()) if has_ids else None,
                       text=pa.array(texts, pa.large_string()),
                       keep=np.asarray(keeps, dtype=np.float64) if spec.keep_column else None,
                       invalid_utf8=invalid)
        return chunk, accepted


# ----------------------------------------------------------------------------------------------------
# Parquet files and in-memory tables
# ----------------------------------------------------------------------------------------------------

def _is_stringish(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_null(t))


def _is_numeric(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_decimal(t) or pa.types.is_null(t))


def _as_utf8(arr: pa.Array, out_type: pa.DataType) -> tuple[pa.Array, np.ndarray | None]:
    """Cast a string/binary/integer array to ``out_type``, replacing invalid UTF-8 like
    ``bytes.decode("utf-8", "replace")``. Returns (array, bool mask of fixed rows or None)."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_integer(arr.type):
        return arr.cast(out_type), None
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), out_type), None
    big = pa.large_binary() if out_type == pa.large_string() else pa.binary()
    as_bin = arr.cast(big)
    as_text = as_bin.view(out_type)
    try:
        as_text.validate(full=True)
        return as_text, None
    except pa.ArrowInvalid:
        pass
    values = as_bin.to_pylist()
    fixed = np.zeros(len(values), dtype=bool)
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(v.decode("utf-8"))
        except UnicodeDecodeError:
            out.append(v.decode("utf-8", "replace"))
            fixed[i] = True
    return pa.array(out, out_type), fixed


def _keep_values(col: pa.Array) -> np.ndarray:
    """A numeric keep column as float64 (null -> NaN)."""
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)


class _ArrowReader(_FileReader):
    """Parquet files and in-memory tables: columns are typed, so type errors are file-level.

    Parquet files are planned and decoded by the run's ``_ParquetPool`` (``pool``, ``index``: this file's
    position in the run), row group by row group; in-memory tables are read here, record batch by record
    batch."""

    def __init__(self, f: InputFile, spec: _Spec, report: ReadReport, batch_bytes: int, all_columns: bool,
                 device_reader: Any = None, pool: _ParquetPool | None = None, index: int = 0):
        super().__init__(f, spec, report)
        self.batch_bytes = batch_bytes
        self.all_columns = all_columns
        self.device_reader = device_reader
        self.pool, self.index = pool, index
        self.schema: pa.Schema | None = None  # set once the file is open (None: unreadable)

    def _record_batches(self, table: pa.Table, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        """Record batches of an in-memory table, about batch_bytes (all selected columns) each."""
        table = table if columns is None else table.select(columns)
        per_row = max(1, table.nbytes // max(1, table.num_rows))
        yield from table.to_batches(max_chunksize=max(1, self.batch_bytes // per_row))

    def _schema_problem(self, schema: pa.Schema) -> tuple[bool, str] | None:
        """(fatal, reason) of the file-level problem of ``schema``, or None. Fatal problems raise even with
        on_error='skip'; the others skip the file. Pure, so the pool can plan files ahead of the reader."""
        spec = self.spec
        names = schema.names
        if spec.keep_column and spec.keep_column not in names:
            return True, (f"keep column {spec.keep_column!r} is not in the file (columns: {names[:20]}); "
                          f"choose another keep policy")
        if spec.keep_column and not _is_numeric(schema.field(spec.keep_column).type):
            return True, (f"keep column {spec.keep_column!r} has type {schema.field(spec.keep_column).type}, "
                          f"not numeric; choose a numeric column")
        if spec.text_field not in names:
            return False, (f"missing text field {spec.text_field!r} (columns: {names[:20]}); set text_field to "
                           f"the right column")
        t = schema.field(spec.text_field).type
        if not _is_stringish(t):
            return False, f"text field {spec.text_field!r} has type {t}, not a string"
        if spec.id_field and spec.id_field in names:
            t = schema.field(spec.id_field).type
            base = t.value_type if pa.types.is_dictionary(t) else t
            if not (_is_stringish(t) or pa.types.is_integer(base)):
                return False, f"id field {spec.id_field!r} has type {t}; ids must be strings or integers"
        return None

    def _check_schema(self, schema: pa.Schema) -> bool:
        """File-level checks; returns False when the file must be skipped."""
        problem = self._schema_problem(schema)
        if problem is None:
            return True
        fatal, reason = problem
        if fatal:
            raise self.fatal(reason)
        self.bad(reason)
        return False

    def _wanted(self, schema: pa.Schema) -> tuple[list[str], bool]:
        """(columns to read, whether the file has ids)."""
        spec = self.spec
        has_ids = bool(spec.id_field) and spec.id_field in schema.names
        wanted = [spec.text_field] + ([spec.id_field] if has_ids else [])
        if spec.keep_column and spec.keep_column not in wanted:
            wanted.append(spec.keep_column)
        return wanted, has_ids

    def _on_device(self, schema: pa.Schema) -> bool:
        """Does the device reader decode this file's text?"""
        return (self.device_reader is not None and self.f.fmt == "parquet" and not self.all_columns
                and schema.field(self.spec.text_field).type in (pa.string(), pa.large_string()))

    def _start(self, schema: pa.Schema) -> tuple[list[str], bool] | None:
        """Check ``schema`` (raising or recording problems); None when the file is skipped."""
        self.schema = schema
        if not self._check_schema(schema):
            self.unreadable = True
            return None
        wanted, has_ids = self._wanted(schema)
        if self.spec.id_field and not has_ids:
            logger.info("%s has no id field %r: using generated ids '%s:<row>'", self.f.relpath,
                        self.spec.id_field, self.f.relpath)
        return wanted, has_ids

    def chunks(self) -> Iterator[_Chunk]:
        if self.f.fmt == "parquet":
            yield from self._parquet_chunks()
            return
        started = self._start(self.f.table.schema)
        if started is None:
            return
        wanted, has_ids = started
        physical = 0
        for rb in self._record_batches(self.f.table, None if self.all_columns else wanted):
            chunk = self._convert(rb, physical, has_ids)
            physical += rb.num_rows
            self.rows += chunk.rows
            yield chunk

    def _parquet_chunks(self) -> Iterator[_Chunk]:
        """The file's chunks in order, from the pool's decoded ranges. Problems found by the workers are
        raised / recorded here, in file order, so the first one in the file wins as in a sequential read."""
        pool = self.pool
        plan = pool.plan(self.index)
        try:
            if plan.open_error is not None:
                self.unreadable = True
                self.bad(f"not a readable Parquet file ({plan.open_error})")
                return
            started = self._start(plan.schema)
            if started is None:
                return
            wanted, has_ids = started
            if self._on_device(plan.schema):
                yield from self._device_chunks(plan.pf, wanted, has_ids)
                return
            for k, rng in enumerate(plan.ranges):
                result = pool.take(plan, k)
                for reason, row in result.skipped:
                    self.bad(reason, row=row)
                if result.error is not None:
                    raise result.error
                for chunk in result.chunks:
                    self.rows += chunk.rows
                    yield chunk
                if result.read_error is not None:
                    row = result.read_error_row
                    self.unreadable = self.rows == 0
                    self.bad(f"cannot read the file after row {row}: {result.read_error}", row=row)
                    break
        finally:
            pool.done(plan)

    def _row_group_batches(self, pf: Any) -> list[tuple[list[int], int]]:
        """(row groups, rows) of consecutive row groups holding about batch_bytes of (uncompressed) text
        each; a row group is never split, so one larger than batch_bytes is a batch of its own."""
        md = pf.metadata
        groups: list[list[int]] = []
        rows: list[int] = []
        size = 0
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            if rg.num_rows == 0:
                continue
            nbytes = sum(rg.column(c).total_uncompressed_size for c in range(rg.num_columns)
                         if rg.column(c).path_in_schema.split(".")[0] == self.spec.text_field)
            if groups and size + nbytes <= self.batch_bytes:
                groups[-1].append(g)
                rows[-1] += rg.num_rows
                size += nbytes
            else:
                groups.append([g])
                rows.append(rg.num_rows)
                size = nbytes
        return list(zip(groups, rows))

    def _device_chunks(self, pf: Any, wanted: list[str], has_ids: bool) -> Iterator[_Chunk]:
        """Text by the device reader, ids / keep values by pyarrow, for the same row groups. A batch that
        is not clean (null text or ids, invalid UTF-8) is read again by pyarrow and goes through
        ``_convert``, so skipping, reporting and repair are exactly the host reader's."""
        spec = self.spec
        side = [c for c in wanted if c != spec.text_field]
        physical = 0
        for rgs, n in self._row_group_batches(pf):
            try:
                dev = self.device_reader.read(self.f.path, rgs, spec.text_field)
                side_table = pf.read_row_groups(rgs, columns=side, use_threads=True) if side else None
            except (OSError, RuntimeError, pa.ArrowException) as e:  # libcudf reports corrupt data as RuntimeError
                self.unreadable = self.rows == 0
                self.bad(f"cannot read the file after row {physical}: {e}", row=physical)
                return
            if len(dev) != n:
                raise RuntimeError(f"{self.f.relpath}: the {self.device_reader.name} reader returned {len(dev)} rows "
                                   f"for row groups {rgs}, the file's metadata says {n}; use reader='pyarrow'")
            ids = id_col = None
            if has_ids:
                id_col = side_table.column(spec.id_field).combine_chunks()
            if dev.clean and (id_col is None or id_col.null_count == 0):
                fixed = None
                if id_col is not None:
                    ids, fixed = _as_utf8(id_col, pa.string())
                keep = (_keep_values(side_table.column(spec.keep_column).combine_chunks())
                        if spec.keep_column else None)
                physical += n
                self.rows += n
                yield _Chunk(ids=ids, text=None, keep=keep, invalid_utf8=int(fixed.sum()) if fixed is not None else 0,
                             device_text=dev)
                continue
            del dev  # free its device memory before the host re-read
            table = pf.read_row_groups(rgs, columns=wanted, use_threads=True)
            for rb in table.to_batches():
                chunk = self._convert(rb, physical, has_ids)
                physical += rb.num_rows
                if chunk is not None:
                    self.rows += chunk.rows
                    yield chunk

    def _convert(self, rb: pa.RecordBatch, physical: int, has_ids: bool, bad: Any = None) -> _Chunk:
        """Accepted rows of ``rb`` (physical rows ``physical ..``). ``bad``: where bad rows go (default
        ``self.bad``; pool workers pass a ``_Deferred``'s, since only the consumer may touch the report)."""
        spec = self.spec
        bad = bad if bad is not None else self.bad
        text_col = rb.column(rb.schema.get_field_index(spec.text_field))
        valid = np.asarray(text_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        id_col = rb.column(rb.schema.get_field_index(spec.id_field)) if has_ids else None
        id_valid = (np.asarray(id_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                    if id_col is not None else np.ones(rb.num_rows, dtype=bool))
        for i in np.flatnonzero(~(valid & id_valid)).tolist():
            if not valid[i]:
                bad(f"text field {spec.text_field!r} is null", row=physical + i)
            else:
                bad(f"id field {spec.id_field!r} is null", row=physical + i)
        valid &= id_valid
        if not valid.any():
            return _Chunk(ids=None, text=pa.array([], pa.large_string()), keep=None, record=rb, valid=valid)
        sel = pa.array(valid)
        all_valid = bool(valid.all())
        text, fixed = _as_utf8(text_col if all_valid else text_col.filter(sel), pa.large_string())
        bad_rows = fixed if fixed is not None else np.zeros(len(text), dtype=bool)
        ids = None
        if id_col is not None:
            ids, fixed_ids = _as_utf8(id_col if all_valid else id_col.filter(sel), pa.string())
            if fixed_ids is not None:
                bad_rows = bad_rows | fixed_ids
        keep = None
        if spec.keep_column:
            kcol = rb.column(rb.schema.get_field_index(spec.keep_column))
            keep = _keep_values(kcol if all_valid else kcol.filter(sel))
        return _Chunk(ids=ids, text=text, keep=keep, invalid_utf8=int(bad_rows.sum()), record=rb, valid=valid)


# ----------------------------------------------------------------------------------------------------
# Parallel Parquet decoding
# ----------------------------------------------------------------------------------------------------
#
# A file's rows are cut into *ranges* of rows_per_batch physical rows (the record batches a sequential
# ``ParquetFile.iter_batches`` would give; a range may span row groups). Workers decode whole *row
# groups* (each on its own file handle: pyarrow releases the GIL while decoding) and convert every range
# piece inside their row group (null checks, UTF-8 validation / repair, casts, keep values); the worker
# that completes a range's last piece joins the pieces and cuts the range into batches. The consumer
# takes ranges strictly in file order and replays what the workers found (skipped rows, errors) into the
# report, so rows, batches, row numbers, report and errors are those of a sequential read, whatever the
# thread count or timing. Submission is in file order too (across files), bounded by read-ahead bytes.

_READ_AHEAD_MIN = 256 << 20


def _read_threads(threads: int | None) -> int:
    if threads is None:
        return max(1, pa.cpu_count())
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"read_threads must be a positive int or None (pyarrow's CPU count), got {threads!r}")
    return threads


def _read_ahead(ahead: int | None, batch_bytes: int) -> int:
    if ahead is None:
        return max(2 * batch_bytes, _READ_AHEAD_MIN)
    if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0:
        raise ValueError(f"read_ahead_bytes must be an int >= 0 or None (automatic), got {ahead!r}")
    return ahead


@dataclass(eq=False)
class _Group:
    """One non-empty row group of a planned file: physical rows [start, start + rows)."""

    g: int
    start: int
    rows: int
    nbytes: int  # uncompressed bytes of the columns read (Parquet metadata): its read-ahead charge
    first: int = -1  # ranges first..last have rows in it
    last: int = -1
    task: Future | None = None
    charged: bool = False


@dataclass(eq=False)
class _Range:
    """Physical rows [start, end) of a planned file, held by row groups first..last."""

    start: int
    end: int
    first: int
    last: int
    waiting: int  # row groups not converted yet
    pieces: dict = field(default_factory=dict)  # group index -> _Piece | _ReadFailed
    future: Future = field(default_factory=Future)  # -> _RangeResult


@dataclass
class _Piece:
    """A range's rows inside one row group, converted by a worker: chunks, the bad rows it skipped
    ((reason, row), on_error='skip') and the exception that stopped the conversion, if any."""

    chunks: list[_Chunk]
    skipped: list[tuple[str, int]]
    error: BaseException | None = None


@dataclass
class _ReadFailed:
    """A row group that could not be decoded; ``start``: its first physical row."""

    error: BaseException
    start: int


@dataclass
class _RangeResult:
    """A range for the consumer: a read failure, or the bad rows skipped in it (in row order), then the
    exception that stopped it or its chunks."""

    read_error: BaseException | None = None
    read_error_row: int = 0  # the first row not read (the unreadable row group's, or the range's start)
    skipped: list[tuple[str, int]] = field(default_factory=list)
    error: BaseException | None = None
    chunks: list[_Chunk] = field(default_factory=list)


class _Deferred:
    """``bad`` for a pool worker: with on_error='raise' it raises the reader's error (the worker stores
    it); with 'skip' it keeps the row for the consumer to record in file order."""

    def __init__(self, reader: _FileReader) -> None:
        self.reader = reader
        self.skipped: list[tuple[str, int]] = []

    def bad(self, reason: str, *, row: int) -> None:
        if self.reader.spec.on_error == "raise":
            raise self.reader.bad_error(reason, row=row)
        self.skipped.append((reason, row))


@dataclass(eq=False)
class _ParquetPlan:
    """One Parquet file of a read: its reader, open handle (or the open error), schema and row
    groups / ranges to decode (none when the schema is rejected or the device reader reads it)."""

    index: int
    reader: _ArrowReader
    pf: Any = None
    open_error: BaseException | None = None
    schema: pa.Schema | None = None
    metadata: Any = None
    has_ids: bool = False
    columns: list[str] | None = None
    groups: list[_Group] = field(default_factory=list)
    ranges: list[_Range] = field(default_factory=list)
    finished: bool = False


class _ParquetPool:
    """Decodes the Parquet inputs of one read on ``threads`` worker threads (``threads`` 1, or a device
    reader: no threads, each range decoded when the consumer asks for it). Row groups are submitted in
    file order, across files, while the ones submitted and not yet handed to the consumer hold at most
    ``ahead`` bytes (uncompressed sizes from the Parquet metadata of the columns read); the row groups of
    the range the consumer waits for are always submitted, and one row group when none is in flight, so
    at any time ``in_flight <= max(ahead, largest row group, row groups of one range)``. ``peak``
    records the most that was in flight. Used from one consumer thread; workers touch only ranges."""

    def __init__(self, files: list[InputFile], spec: _Spec, report: ReadReport, batch_bytes: int,
                 all_columns: bool, device_reader: Any, threads: int, ahead: int) -> None:
        self.files, self.spec, self.report = files, spec, report
        self.batch_bytes, self.all_columns, self.device_reader = batch_bytes, all_columns, device_reader
        # With a device reader the host decodes only files (or batches) the device cannot: sequentially,
        # and never ahead (that would decode text the device is about to read).
        inline = threads == 1 or device_reader is not None
        self.ahead = 0 if inline else ahead
        self.executor = None if inline else ThreadPoolExecutor(threads, thread_name_prefix="gpu_dedup-parquet")
        self.plans: dict[int, _ParquetPlan] = {}
        self.finished: set[int] = set()
        self.cursor = (0, 0)  # the next (file index, group index) to submit
        self.in_flight = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.closed = False
        logger.debug("parquet pool: %s, read-ahead %d bytes", f"{threads} threads" if self.executor else "inline",
                     self.ahead)

    # ----------------------------------------------------------------------------------- consumer side

    def reader(self, index: int) -> _ArrowReader:
        return self.plan(index).reader

    def plan(self, index: int) -> _ParquetPlan:
        """The plan of file ``index``, opening the file on first use (errors are kept for the reader)."""
        plan = self.plans.get(index)
        if plan is not None:
            return plan
        if index in self.finished:
            raise RuntimeError(f"file {index} was already read; a pool reads each file once")
        f = self.files[index]
        reader = _ArrowReader(f, self.spec, self.report, self.batch_bytes, self.all_columns, self.device_reader,
                              pool=self, index=index)
        plan = self.plans[index] = _ParquetPlan(index=index, reader=reader)
        try:
            plan.pf = pq.ParquetFile(f.path)
        except (OSError, pa.ArrowException) as e:
            plan.open_error = e
            return plan
        plan.schema, plan.metadata = plan.pf.schema_arrow, plan.pf.metadata
        if reader._schema_problem(plan.schema) is not None or reader._on_device(plan.schema):
            return plan  # nothing for the pool: the reader reports the problem / the device reads it
        wanted, plan.has_ids = reader._wanted(plan.schema)
        plan.columns = None if self.all_columns else wanted
        self._cut(plan)
        return plan

    def _cut(self, plan: _ParquetPlan) -> None:
        """Row groups and ranges of a file. Ranges hold rows_per_batch rows: about batch_bytes of the
        columns read, from the average row size in the metadata (as ``iter_batches(batch_size=)``)."""
        md = plan.metadata
        total, start = 0, 0
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            nbytes = sum(rg.column(c).total_uncompressed_size for c in range(rg.num_columns)
                         if plan.columns is None or rg.column(c).path_in_schema.split(".")[0] in plan.columns)
            total += nbytes
            if rg.num_rows:
                plan.groups.append(_Group(g=g, start=start, rows=rg.num_rows, nbytes=nbytes))
                start += rg.num_rows
        rows_per_batch = int(max(1, min(1 << 20, self.batch_bytes // max(1, total // max(1, md.num_rows)))))
        j = 0
        for s in range(0, start, rows_per_batch):
            e = min(s + rows_per_batch, start)
            while plan.groups[j].start + plan.groups[j].rows <= s:
                j += 1
            last = j
            while plan.groups[last].start + plan.groups[last].rows < e:
                last += 1
            k = len(plan.ranges)
            plan.ranges.append(_Range(start=s, end=e, first=j, last=last, waiting=last - j + 1))
            for grp in plan.groups[j:last + 1]:
                grp.first = k if grp.first < 0 else grp.first
                grp.last = k

    def _next(self) -> tuple[_ParquetPlan, int] | None:
        """The row group at the cursor (planning files as it reaches them), or None at the end."""
        i, j = self.cursor
        while i < len(self.files):
            if self.files[i].fmt == "parquet" and i not in self.finished:
                plan = self.plan(i)
                if j < len(plan.groups):
                    self.cursor = (i, j)
                    return plan, j
            i, j = i + 1, 0
        self.cursor = (i, 0)
        return None

    def _fill(self, upto: tuple[int, int] | None = None) -> None:
        """Submit row groups in file order: every one up to ``upto`` (file, group), then more while the
        read-ahead allows."""
        while not self.closed:
            nxt = self._next()
            if nxt is None:
                return
            plan, j = nxt
            grp = plan.groups[j]
            forced = upto is not None and (plan.index, j) <= upto
            if not forced and (self.ahead == 0 or (self.in_flight and self.in_flight + grp.nbytes > self.ahead)):
                return
            self.cursor = (plan.index, j + 1)
            grp.charged = True
            self.in_flight += grp.nbytes
            self.peak = max(self.peak, self.in_flight)
            if self.executor is None:
                self._work(plan, j)
            else:
                grp.task = self.executor.submit(self._work, plan, j)

    def take(self, plan: _ParquetPlan, k: int) -> _RangeResult:
        """Range ``k`` of ``plan``, waiting for it; releases its row groups' read-ahead when they hold no
        later range."""
        rng = plan.ranges[k]
        self._fill(upto=(plan.index, rng.last))
        result = rng.future.result()
        rng.future = None  # the consumer owns the result now
        for grp in plan.groups[rng.first:rng.last + 1]:
            if grp.last == k:
                self._release(grp)
        self._fill()
        return result

    def _release(self, grp: _Group) -> None:
        if grp.charged:
            grp.charged = False
            self.in_flight -= grp.nbytes
        grp.task = None

    def done(self, plan: _ParquetPlan) -> None:
        """The reader is done with the file (at its end, after a read error, or abandoned): drop what
        is still queued or held for it and never submit more of it."""
        plan.finished = True
        for grp in plan.groups:
            if grp.task is not None:
                grp.task.cancel()
            self._release(grp)
        if self.cursor[0] <= plan.index:
            self.cursor = (plan.index + 1, 0)
        self.plans.pop(plan.index, None)
        self.finished.add(plan.index)
        if plan.pf is not None:
            plan.pf.close()

    def close(self) -> None:
        self.closed = True
        for plan in list(self.plans.values()):
            self.done(plan)
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------------------------- worker side

    def _work(self, plan: _ParquetPlan, j: int) -> None:
        """Decode row group j of ``plan`` and convert each range's rows in it (runs in a worker)."""
        if self.closed or plan.finished:
            return
        grp = plan.groups[j]
        table, failed = None, None
        try:
            with pq.ParquetFile(plan.reader.f.path, metadata=plan.metadata) as pf:  # own handle per task
                table = pf.read_row_groups([grp.g], columns=plan.columns, use_threads=True)
            if table.num_rows != grp.rows:
                raise pa.ArrowInvalid(f"row group {grp.g} has {table.num_rows} rows, its metadata says {grp.rows}")
        except (OSError, pa.ArrowException) as e:  # unreadable: ends the file (reported by the consumer)
            failed = _ReadFailed(e, grp.start)
        except BaseException as e:  # noqa: BLE001 - anything else reaches the consumer unchanged
            failed = _Piece([], [], e)
        try:
            for k in range(grp.first, grp.last + 1):
                self._deposit(plan, k, j,
                              failed if failed is not None else self._piece(plan, table, grp, plan.ranges[k]))
        except BaseException as e:  # noqa: BLE001 - a bug here must not leave the consumer waiting forever
            for rng in plan.ranges[grp.first:grp.last + 1]:
                future = rng.future
                if future is not None and not future.done():
                    future.set_exception(e)

    def _piece(self, plan: _ParquetPlan, table: pa.Table, grp: _Group, rng: _Range) -> _Piece:
        a = max(rng.start, grp.start) - grp.start
        b = min(rng.end, grp.start + grp.rows) - grp.start
        deferred = _Deferred(plan.reader)
        chunks: list[_Chunk] = []
        physical = grp.start + a
        try:
            for rb in table.slice(a, b - a).to_batches():
                if rb.num_rows:
                    chunks.append(plan.reader._convert(rb, physical, plan.has_ids, bad=deferred.bad))
                    physical += rb.num_rows
        except Exception as e:  # noqa: BLE001 - the first bad row (on_error='raise') or a failure: raised in order
            return _Piece(chunks, deferred.skipped, e)
        return _Piece(chunks, deferred.skipped)

    def _deposit(self, plan: _ParquetPlan, k: int, j: int, piece: _Piece | _ReadFailed) -> None:
        rng = plan.ranges[k]
        with self.lock:
            rng.pieces[j] = piece
            rng.waiting -= 1
            complete = rng.waiting == 0
        if not complete:
            return
        future = rng.future
        try:
            result = self._finish(rng)
        except BaseException as e:  # noqa: BLE001 - raised by the consumer's take()
            future.set_exception(e)
        else:
            future.set_result(result)

    def _finish(self, rng: _Range) -> _RangeResult:
        """Join a range's pieces in row order: its chunks, joined and cut into batches unless all columns are
        read (``write_kept`` takes the pieces' own record batches), and the bad rows skipped. A row group that
        cannot be decoded ends the file at its first row: the rows of the row groups before it are kept, so
        the rows read do not depend on how the file is cut into batches (pass 1 and ``write_kept`` cut it
        differently and must agree)."""
        pieces = [rng.pieces.pop(j) for j in range(rng.first, rng.last + 1)]
        skipped: list[tuple[str, int]] = []
        chunks: list[_Chunk] = []
        result = _RangeResult()
        for p in pieces:
            if isinstance(p, _ReadFailed):
                result = _RangeResult(read_error=p.error, read_error_row=max(rng.start, p.start))
                break
            skipped += p.skipped
            if p.error is not None:
                return _RangeResult(skipped=skipped, error=p.error)
            chunks += p.chunks
        if not self.all_columns and (chunks or result.read_error is None):  # the pieces are not kept: batches
            chunks = [_join_chunks(chunks, self.batch_bytes)]
        result.skipped, result.chunks = skipped, chunks
        return result


def _join_chunks(chunks: list[_Chunk], batch_bytes: int) -> _Chunk:
    """One chunk of the rows of ``chunks`` (in order), with its batches (``parts``) cut exactly as
    ``_text_parts`` would cut their concatenation; each batch's text is copied once, only when it spans
    chunks or the chunk is cut (a batch inside one chunk that is not cut stays a zero-copy slice)."""
    invalid = sum(c.invalid_utf8 for c in chunks)
    full = [c for c in chunks if c.rows]
    if not full:
        return _Chunk(ids=None, text=None, keep=None, invalid_utf8=invalid, parts=[])
    cum = np.cumsum(np.concatenate([_text_lengths(c.text) for c in full]))
    starts = np.cumsum([0] + [c.rows for c in full])
    ranges = _split_cum(cum, batch_bytes)
    parts = []
    for a, b in ranges:
        slices = [c.text.slice(max(a, s) - s, min(b, s + c.rows) - max(a, s))
                  for c, s in zip(full, starts[:-1].tolist()) if max(a, s) < min(b, s + c.rows)]
        text = slices[0] if len(slices) == 1 and len(ranges) == 1 else pa.concat_arrays(slices)
        parts.append((a, b, text, int(cum[b - 1] - (cum[a - 1] if a else 0))))
    ids = None
    if full[0].ids is not None:
        ids = full[0].ids if len(full) == 1 else pa.concat_arrays([c.ids for c in full])
    keep = None
    if full[0].keep is not None:
        keep = full[0].keep if len(full) == 1 else np.concatenate([c.keep for c in full])
    return _Chunk(ids=ids, text=None, keep=keep, invalid_utf8=invalid, parts=parts)


# ----------------------------------------------------------------------------------------------------
# Public reading API
# ----------------------------------------------------------------------------------------------------

def _make_spec(id_field: str | None, text_field: str, on_error: str, keep_column: str | None) -> _Spec:
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if not isinstance(text_field, str) or not text_field:
        raise ValueError(f"text_field must be a non-empty string, got {text_field!r}")
    if id_field is not None and (not isinstance(id_field, str) or not id_field):
        raise ValueError(f"id_field must be a non-empty string or None, got {id_field!r}")
    if id_field == text_field:
        raise ValueError(f"id_field and text_field are both {text_field!r}; they must name different fields")
    if keep_column is not None and keep_column in (text_field, id_field):
        raise ValueError(f"keep column {keep_column!r} is also the text or id field; choose a numeric column")
    return _Spec(id_field=id_field, text_field=text_field, keep_column=keep_column, on_error=on_error)


def _readers(files: list[InputFile], spec: _Spec, report: ReadReport, batch_bytes: int,
             all_columns: bool, device_reader: Any = None, threads: int | None = None,
             read_ahead: int | None = None) -> Iterator[tuple[int, _FileReader]]:
    """A reader per file, in order. Parquet files share one ``_ParquetPool`` (``threads`` workers,
    ``read_ahead`` bytes ahead; None: defaults), closed when this generator ends or is closed."""
    pool: _ParquetPool | None = None
    try:
        for index, f in enumerate(files):
            if f.fmt == "jsonl":
                yield index, _JsonlReader(f, spec, report, batch_bytes)
            elif f.fmt == "parquet":
                if pool is None:
                    pool = _ParquetPool(files, spec, report, batch_bytes, all_columns, device_reader,
                                        _read_threads(threads), _read_ahead(read_ahead, batch_bytes))
                yield index, pool.reader(index)
            elif f.fmt == "table":
                if f.table is None:
                    raise ValueError(f"input {index} has fmt='table' but no table; build it with table_input()")
                yield index, _ArrowReader(f, spec, report, batch_bytes, all_columns, device_reader)
            else:
                raise ValueError(f"unknown input format {f.fmt!r} for {f.path!r}; build inputs with resolve_inputs()")
    finally:
        if pool is not None:
            pool.close()


def iter_batches(files: list[InputFile], *, id_field: str | None, text_field: str, batch_bytes: int,
                 on_error: Literal["raise", "skip"], keep_column: str | None = None,
                 report: ReadReport | None = None, device_reader: Any = None, read_threads: int | None = None,
                 read_ahead_bytes: int | None = None) -> Iterator[Batch]:
    """Yield batches of (ids, text[, keep values]) in file order; see the module docstring for the rules.

    Memory: JSON Lines: one block (<= batch_bytes of raw JSON, or one longer line) at a time, plus what
    pyarrow's JSON parser needs for it (several times the block). Parquet: row groups are decoded by
    ``read_threads`` threads (None: ``pyarrow.cpu_count()``; 1: sequentially, no thread) at most
    ``read_ahead_bytes`` ahead (uncompressed column bytes from the file metadata; None: max(2 x
    batch_bytes, 256 MiB); more when one row group, or the row groups of one record batch, are larger).
    Neither changes the batches, row numbers, report or errors.
    ``device_reader`` (``gpu_io.resolve_reader``): Parquet text is read into device memory by it, one
    batch per run of row groups holding about batch_bytes of text; same rows, ids and errors.
    """
    if not isinstance(batch_bytes, int) or batch_bytes < 1:
        raise ValueError(f"batch_bytes must be a positive int, got {batch_bytes!r}")
    spec = _make_spec(id_field, text_field, on_error, keep_column)
    _read_threads(read_threads)  # bad knobs fail here, before anything is read
    _read_ahead(read_ahead_bytes, batch_bytes)
    report = report if report is not None else ReadReport()
    readers = _readers(files, spec, report, batch_bytes, all_columns=False, device_reader=device_reader,
                       threads=read_threads, read_ahead=read_ahead_bytes)
    # closed explicitly (not when garbage collected) so an error or an abandoned read stops the pool now
    with closing(readers):
        yield from _batches(readers, report, batch_bytes)


def _batches(readers: Iterator[tuple[int, _FileReader]], report: ReadReport, batch_bytes: int) -> Iterator[Batch]:
    row = 0
    for index, reader in readers:
        report.files += 1
        skipped_before = len(report.skipped)
        for chunk in reader.chunks():
            report.invalid_utf8_rows += chunk.invalid_utf8
            first_in_file = reader.rows - chunk.rows
            dev = chunk.device_text
            if chunk.parts is not None:  # cut by a Parquet pool worker
                parts = chunk.parts
            elif dev is not None:
                parts = [(0, chunk.rows, None, dev.nbytes)]
            else:
                parts = _text_parts(chunk.text, batch_bytes)
            for a, b, text, nbytes in parts:
                ids = (chunk.ids.slice(a, b - a) if chunk.ids is not None
                       else _generated_ids(reader.f.relpath, first_in_file + a, b - a))
                keep = chunk.keep[a:b] if chunk.keep is not None else None
                report.rows += b - a
                report.bytes_text += nbytes
                yield Batch(file_index=index, row_start=row, ids=ids, text=text, keep_values=keep, device_text=dev)
                row += b - a
        if reader.rows == 0 and not reader.unreadable:
            report.empty_files.append(reader.f.relpath)
        skipped_here = len(report.skipped) - skipped_before
        if skipped_here:
            logger.warning("%s: skipped %d bad row(s) (see the read report)", reader.f.relpath, skipped_here)


def check_unique_ids(ids: Sequence[pa.Array] | pa.ChunkedArray | pa.Array) -> None:
    """Raise InputError naming up to 5 duplicated ids with their counts. Vectorised (Arrow hash)."""
    if isinstance(ids, pa.Array):
        ids = pa.chunked_array([ids])
    elif not isinstance(ids, pa.ChunkedArray):
        ids = pa.chunked_array(list(ids), type=pa.string()) if len(ids) else pa.chunked_array([], pa.string())
    if len(ids) == 0 or pc.count_distinct(ids, mode="all").as_py() == len(ids):
        return
    counts = pc.value_counts(ids)
    values, freq = counts.field("values"), counts.field("counts")
    dup = pc.greater(freq, 1)
    values, freq = values.filter(dup), freq.filter(dup)
    order = pc.sort_indices(pa.table({"c": freq, "v": values}), sort_keys=[("c", "descending"), ("v", "ascending")])
    top = order[:5].to_pylist()
    shown = ", ".join(f"{values[i].as_py()!r} ({freq[i].as_py()} times)" for i in top)
    more = f" and {len(values) - len(top)} more duplicated id(s)" if len(values) > len(top) else ""
    raise InputError(f"ids must be unique; duplicated: {shown}{more}. Pass --id-field with a unique field (or "
                     f"no id field, for generated '<file>:<row>' ids), or fix the data")


# ----------------------------------------------------------------------------------------------------
# Atomic writing
# ----------------------------------------------------------------------------------------------------

def _fsync_path(path: str, directory: bool = False) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    except OSError:
        if directory:
            return  # some platforms/filesystems cannot open directories; the rename is still atomic
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path next to ``path``; on success fsync it and rename it onto ``path``;
    on an exception delete it and re-raise. Readers never see a partial ``path``."""
    final = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(final)
    os.makedirs(directory, exist_ok=True)
    # Leading dot: directory scans (resolve_inputs) skip it; unique suffix: concurrent writers never clash.
    tmp = os.path.join(directory, f".{os.path.basename(final)}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        yield tmp
        _fsync_path(tmp)
        os.replace(tmp, final)
        _fsync_path(directory, directory=True)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_parquet_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _json_safe(obj: Any) -> Any:
    """Non-finite floats -> None; numpy scalars/arrays -> Python values (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json_atomic(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` as indented JSON (NaN/inf -> null, key order kept), atomically."""
    text = json.dumps(_json_safe(obj), indent=2, sort_keys=False, allow_nan=False)
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")


def _parquet_codec(pf_path: str) -> str:
    md = pq.ParquetFile(pf_path).metadata
    if md.num_row_groups and md.num_columns:
        return _PARQUET_CODECS.get(md.row_group(0).column(0).compression, "snappy")
    return "snappy"


def _output_path(out_dir: str, f: InputFile) -> str:
    rel = TABLE_OUTPUT_NAME if f.fmt == "table" else f.relpath
    return os.path.join(out_dir, *rel.split("/"))


_WRITE_CHUNK = 8 << 20  # bytes of input per chunk read by write_kept (raw JSON block / Parquet record batch)


def write_kept(files: list[InputFile], keep: np.ndarray, out_dir: str | os.PathLike, *, id_field: str | None,
               text_field: str, on_error: Literal["raise", "skip"], file_rows: Sequence[int] | None = None,
               read_threads: int | None = None) -> dict:
    """Write the rows with ``keep[global_row]`` True to ``out_dir`` (layout in the module docstring).

    keep: bool [total rows], numbered as ``iter_batches`` with the same files/id_field/text_field/on_error.
    ``file_rows``: the rows ``iter_batches`` gave per file (the run's pass 1 knows them), which place each
    file's rows in ``keep``; None: counted here first, exactly as ``iter_batches`` numbers them (with
    on_error='raise' cheaply: Parquet metadata, non-blank JSON lines; with 'skip' by reading the files once
    more, as they are read for writing). Every file is checked to hold the rows it was given.

    Files are written in parallel, ``read_threads`` at a time (None: ``pyarrow.cpu_count()``, as the
    reader's default; 1: one after the other on this thread, no thread started), each streamed in chunks
    of about 8 MiB of input (``_WRITE_CHUNK``; a JSON block, or the decoded record batches of a Parquet
    range), never a whole file. With fewer files than threads, a Parquet file's row groups are also
    decoded ahead on the spare threads (``read_threads // files`` per file), up to 2 chunks per spare
    thread, while its current chunk is filtered and encoded. Memory: about ``read_threads x 8 MiB`` of
    input in flight, never more than ``2 x read_threads x 8 MiB`` (plus what the JSON parser / Parquet
    decoder and encoder need per chunk, and any single line or row group larger than a chunk). The
    outputs are byte for byte those of a sequential write.

    All outputs become visible together at the end, only if every file was written and the row count
    matched; an error in any file removes every output and raises the first error in file order.
    Returns ``{"files": n_files_written, "rows_written": m}``.
    """
    keep = np.asarray(keep)
    if keep.ndim != 1 or keep.dtype != np.bool_:
        raise ValueError(f"keep must be a 1-D bool array indexed by global row id, got dtype {keep.dtype} "
                         f"shape {keep.shape}")
    if sum(f.fmt == "table" for f in files) > 1:
        raise ValueError("write_kept writes one in-memory table to deduplicated.parquet; got several tables, "
                         "concatenate them first")
    out_dir = os.path.abspath(os.fspath(out_dir))
    inputs = {os.path.abspath(f.path) for f in files if f.fmt != "table"}
    for f in files:
        target = _output_path(out_dir, f)
        if target in inputs:
            raise ValueError(f"output {target!r} would overwrite an input; choose another output directory")
    spec = _make_spec(id_field, text_field, on_error, None)
    threads = _read_threads(read_threads)
    if file_rows is None:
        counts = _ordered(lambda i: _count_rows(files[i], spec), len(files), min(threads, len(files)), "count")
    else:
        counts = [int(n) for n in file_rows]
        if len(counts) != len(files) or any(n < 0 for n in counts):
            raise ValueError(f"file_rows must hold one row count >= 0 per input file ({len(files)}), got "
                             f"{len(counts)} value(s)")
    total = sum(counts)
    if total != len(keep):
        raise ValueError(f"keep has {len(keep)} entries but the inputs have {total} rows; pass the same files, "
                         f"id_field, text_field and on_error as to iter_batches")
    firsts = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)[:-1])).tolist() if files else []
    workers = max(1, min(threads, len(files)))
    decode = threads // workers  # a file's Parquet decoding threads: > 1 only with fewer files than threads
    stop = _Stop()

    def job(i: int) -> _Written:
        try:
            return _write_file(files[i], spec, keep[firsts[i]:firsts[i] + counts[i]], len(keep), out_dir, decode,
                               lambda: stop.after(i))
        except BaseException:
            stop.failed(i)  # later files stop at their next chunk; earlier ones go on (their error would win)
            raise

    totals = {"files": 0, "rows": 0}
    with ExitStack() as stack:  # every file's temporary output: renamed together at the end, or removed

        def take(done: _Written) -> None:  # in file order
            stack.enter_context(done.outputs)
            if done.unreadable:
                logger.warning("%s could not be read; no output written for it", done.relpath)
            totals["files"] += done.files
            totals["rows"] += done.rows

        _ordered(job, len(files), workers, "write", take=take,
                 discard=lambda done: stack.enter_context(done.outputs), abort=lambda: stop.failed(-1))
    return {"files": totals["files"], "rows_written": totals["rows"]}


@dataclass
class _Written:
    """One file written by ``_write_file``: its temporary output (renamed onto the output path when
    ``outputs`` exits without an exception, removed with one), files written (0 or 1), rows kept."""

    relpath: str
    outputs: ExitStack
    files: int
    rows: int
    unreadable: bool = False


class _Aborted(Exception):
    """A file's write stopped because an earlier file failed (never reaches the caller)."""


class _Stop:
    """The lowest index of a failed file: files after it stop, the ones before it go on."""

    def __init__(self) -> None:
        self.first: float = math.inf
        self.lock = threading.Lock()

    def failed(self, i: int) -> None:
        with self.lock:
            self.first = min(self.first, i)

    def after(self, i: int) -> bool:
        return i > self.first


def _ordered(fn: Callable[[int], Any], n: int, workers: int, name: str, *,
             take: Callable[[Any], None] | None = None, discard: Callable[[Any], None] | None = None,
             abort: Callable[[], None] | None = None) -> list:
    """``[fn(0), .., fn(n - 1)]``, computed ``workers`` at a time (1: on this thread, in order), each result
    passed to ``take`` in index order as soon as it and the ones before it are done. The first exception in
    index order is raised, after ``abort()`` and once every started call has ended; results that came after
    it go to ``discard``."""
    results: list = []
    if workers <= 1 or n <= 1:
        for i in range(n):
            res = fn(i)
            if take is not None:
                take(res)
            results.append(res)
        return results
    executor = ThreadPoolExecutor(workers, thread_name_prefix=f"gpu_dedup-{name}")
    futures = [executor.submit(fn, i) for i in range(n)]
    try:
        for fut in futures:
            res = fut.result()
            if take is not None:
                take(res)
            results.append(res)
        return results
    except BaseException:
        if abort is not None:
            abort()
        for fut in futures:  # the ones not started never will
            fut.cancel()
        for fut in futures[len(results):]:  # wait for the running ones (the first error is the one raised)
            if not fut.cancelled() and fut.exception() is None and discard is not None:
                discard(fut.result())
        raise
    finally:
        executor.shutdown(wait=True)


def _write_file(f: InputFile, spec: _Spec, keep: np.ndarray, keep_len: int, out_dir: str, decode_threads: int,
                stopped: Any) -> _Written:
    """Write the rows of ``f`` with ``keep[row_in_file]`` True to its temporary output, streaming chunks of
    ``_WRITE_CHUNK`` bytes (Parquet: decoded on ``decode_threads`` threads, up to ``2 x (decode_threads -
    1)`` chunks ahead of the one being written). Raises when the file does not hold exactly ``len(keep)`` rows, or
    ``_Aborted`` when ``stopped()`` turns True."""
    report = ReadReport()  # write_kept's own; iter_batches already reported the problems
    target = _output_path(out_dir, f)
    row, written = 0, 0

    def take(n: int) -> np.ndarray:
        nonlocal row
        if stopped():
            raise _Aborted(f.relpath)
        if row + n > len(keep):
            raise ValueError(f"keep has {keep_len} entries but the inputs have more rows ({f.relpath}: more than "
                             f"{len(keep)}); pass the same files, id_field, text_field and on_error as to "
                             f"iter_batches")
        part = keep[row:row + n]
        row += n
        return part

    ahead = 2 * (decode_threads - 1) * _WRITE_CHUNK  # 2 chunks per spare thread: 1 leaves it idle at times
    outputs = ExitStack()
    with outputs, closing(_readers([f], spec, report, _WRITE_CHUNK, all_columns=True, threads=decode_threads,
                                   read_ahead=ahead)) as readers:
        _, reader = next(readers)
        unreadable = False
        if isinstance(reader, _JsonlReader):
            tmp = outputs.enter_context(atomic_path(target))
            with pa.output_stream(tmp, compression=f.compression) as out:
                for chunk in reader.chunks():
                    mask = take(len(chunk.text))
                    written += int(mask.sum())
                    _write_spans(out, chunk.raw, chunk.starts[mask], chunk.ends[mask])
        else:
            writer = None
            try:
                for chunk in reader.chunks():
                    if writer is None:
                        writer = _open_parquet_writer(outputs, target, reader)
                    mask = take(len(chunk.text))
                    full = np.zeros(len(chunk.valid), dtype=bool)
                    full[np.flatnonzero(chunk.valid)] = mask
                    written += int(mask.sum())
                    if full.any():
                        writer.write_batch(chunk.record.filter(pa.array(full)))
                if writer is None and reader.schema is not None:  # no rows at all: still write the schema
                    writer = _open_parquet_writer(outputs, target, reader)
                unreadable = writer is None
            finally:
                if writer is not None:
                    writer.close()
        if row != len(keep):
            raise ValueError(f"keep has {keep_len} entries but the inputs have a different number of rows "
                             f"({f.relpath}: {row}, not {len(keep)}); pass the same files, id_field, text_field "
                             f"and on_error as to iter_batches")
        return _Written(f.relpath, outputs.pop_all(), 0 if unreadable else 1, written, unreadable)


def _count_rows(f: InputFile, spec: _Spec) -> int:
    """The rows ``iter_batches`` gives for ``f`` alone (row numbers restart at every file), as the write
    will read them. With on_error='raise' every physical row / non-blank line is one (or the read raises,
    and so will the write): Parquet metadata, tables' length, a newline scan of JSON Lines. Otherwise, or
    when that fails, the file is read exactly as ``_write_file`` reads it (every line parsed; Parquet: all
    columns in the same record batches, so that a row group that cannot be decoded ends the file at the
    same row), which raises its error."""
    if spec.on_error == "raise":
        try:
            if f.fmt == "parquet":
                with pq.ParquetFile(f.path) as pf:
                    return pf.metadata.num_rows
            if f.fmt == "table" and f.table is not None:
                return f.table.num_rows
            if f.fmt == "jsonl":
                return _count_lines(f)
        except (OSError, pa.ArrowException, ValueError):
            pass  # the reader raises the error it would raise for this file
    report = ReadReport()
    # the write logs what the reader finds (files without ids, skipped rows...): not twice
    with _quiet(), closing(_readers([f], spec, report, _WRITE_CHUNK, all_columns=True, threads=1)) as readers:
        _, reader = next(readers)
        for _ in reader.chunks():
            pass
        return reader.rows


def _count_lines(f: InputFile) -> int:
    """Non-blank lines of a JSON Lines file, split as ``_JsonlReader`` splits them (leading BOM ignored)."""
    n = 0
    with pa.input_stream(f.path, compression=f.compression) as stream:
        for k, block in enumerate(_read_blocks(stream, _WRITE_CHUNK)):
            if k == 0 and block[:len(_UTF8_BOM)] == _UTF8_BOM:
                block = block[len(_UTF8_BOM):]
            if len(block):
                n += int(_split_lines(block)[2].sum())
    return n


_quiet_state = threading.local()


class _QuietFilter(logging.Filter):
    """Drops this module's records in a thread inside ``_quiet()``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_quiet_state, "on", False)


logger.addFilter(_QuietFilter())


@contextmanager
def _quiet() -> Iterator[None]:
    """No log records from this module in this thread meanwhile."""
    before = getattr(_quiet_state, "on", False)
    _quiet_state.on = True
    try:
        yield
    finally:
        _quiet_state.on = before


def _open_parquet_writer(stack: ExitStack, target: str, reader: _ArrowReader) -> pq.ParquetWriter:
    tmp = stack.enter_context(atomic_path(target))
    codec = _parquet_codec(reader.f.path) if reader.f.fmt == "parquet" else "snappy"
    return pq.ParquetWriter(tmp, reader.schema, compression=codec)


_GATHER_RUNS = 16  # more runs of adjacent spans than this: gathered by Arrow, written at once


def _write_spans(out: Any, raw: memoryview, starts: np.ndarray, ends: np.ndarray) -> None:
    """Write raw[starts[i]:ends[i]] for all i (increasing, not overlapping), merging adjacent spans. Many
    runs are gathered into one buffer by Arrow's ``take`` (no Python per run, without the GIL, so that
    parallel writers do not wait on each other) and written with one call; the bytes are the same."""
    if len(starts) == 0:
        return
    breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    run_starts = starts[np.concatenate(([0], breaks))]
    run_ends = ends[np.concatenate((breaks - 1, [len(ends) - 1]))]
    view = memoryview(raw)
    if len(run_starts) <= _GATHER_RUNS:
        for s, e in zip(run_starts.tolist(), run_ends.tolist()):
            out.write(view[s:e])
        return
    # the block as binary values: the runs (even values) and the gaps between them (odd values)
    bounds = np.empty(2 * len(run_starts), np.int64)
    bounds[0::2], bounds[1::2] = run_starts, run_ends
    values = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(bounds) - 1,
                                              [None, pa.py_buffer(bounds), pa.py_buffer(view)])
    runs = values.take(pa.array(np.arange(0, len(bounds), 2, dtype=np.int64)))
    offsets = np.frombuffer(runs.buffers()[1], np.int64)
    out.write(runs.buffers()[2].slice(int(offsets[0]), int(offsets[len(runs)] - offsets[0])))


def source_files(source) -> list[InputFile]:
    """The InputFiles of any source the API accepts: a path, a list of paths/globs/directories, a
    pyarrow Table or a pandas DataFrame."""
    if isinstance(source, pa.Table) or (type(source).__module__.startswith("pandas")
                                        and type(source).__name__ == "DataFrame"):
        return table_input(source)
    if isinstance(source, (str, os.PathLike)):
        return resolve_inputs([source])
    if isinstance(source, (list, tuple)):
        return resolve_inputs(list(source))
    raise TypeError(f"source must be a path, a list of paths/globs, a pyarrow Table or a pandas DataFrame; "
                    f"got {type(source).__name__}")


def iter_rows(files: list[InputFile], rows: np.ndarray, **reader) -> Iterator[tuple[np.ndarray, pa.Array]]:
    """(global row ids, their texts) for the sorted global row ids ``rows``, one pair per batch that
    holds any of them (other batches are read but yield nothing); take() packs the selected texts into
    one contiguous Arrow array. ``reader``: the keyword arguments of ``iter_batches``."""
    rows = np.asarray(rows, np.int64)
    for batch in iter_batches(files, **reader):
        lo, hi = np.searchsorted(rows, [batch.row_start, batch.row_start + len(batch)])
        if lo < hi:
            sel = rows[lo:hi]
            yield sel, batch.text.take(pa.array(sel - batch.row_start, pa.int64()))
