"""Whether a file's stored data decodes whole, and what the reads of a run found out about each file.

Why a file is checked
    A codec finds damage only as it decodes: gzip checks its CRC-32 and length at the end of each member
    (for the usual one-member file, at the very end of the file), zstd a frame's structure as it goes and its
    checksum at the frame's end, a truncated stream is known where the data stops, and a Parquet page fails
    where it is decoded. Until then the decoder gives bytes, and garbage bytes may still parse as JSON. The
    reading rule (``read``'s docstring) is that no record of a file whose data fails to decode is used, so a
    reader that may give records before the failure is known (``FileReader.chunks``) holds them until the
    whole file has decoded (with on_error="skip"), or stops the run that used some (with "raise").

    ``check_stream`` decodes a JSON Lines file to its end (nothing kept) and gives its digest or where it
    fails; ``check_parquet`` decodes every row group of a Parquet file (the columns a read decodes). A reader
    runs one when its file holds more than it may keep, then or from the start on a thread of its own
    (``Checker``) beside the read, and to say where a failure is, independently of how the read cut the file.

What the reads of a run found (``FileState``, ``ReadScope``)
    Every ``InputFile`` carries a ``FileState`` (``InputFile.state``), shared by every pass of a run over it
    (the same ``InputFile`` objects go to every pass): the failure of its data, if it failed (then every later
    pass skips or refuses the file without reading it, so all passes number rows alike); whether its data is
    known to be whole; the digest of a JSON Lines file's decoded bytes and a Parquet file's footer at its
    first complete read (a later read that differs is an error: the file changed while the run read it). The
    files of one ``resolve_inputs`` / ``table_input`` call share a ``ReadScope``: what the first complete read
    of every file found (rows, files without the id field), said once when every file has been read.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import xxhash

from .remote import file_size, open_parquet, open_stream

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)

_LOCK = threading.Lock()  # FileState / ReadScope updates (a check thread and a reader may both settle a file)
# decoded bytes per read of check_stream: a failing read gives nothing, so this bounds how far the offset and
# lines a failure reports fall short (a codec loses what it decoded in the failing step too: ~64 KiB more)
_CHECK_READ = 1 << 16
_CHECK_READ_FAST = 4 << 20  # a check that finds nothing: few reads (each a hand-over of the GIL)
_NAMES_SHOWN = 8  # files named in one message
UNREADABLE_PARQUET = "not a readable Parquet file"


@dataclass
class StreamFailure:
    """Where and how a file's stored data failed to decode.

    what: e.g. "corrupt gzip stream", "truncated zstd stream", "Parquet data that does not decode";
    detail: the codec's own message; offset / lines: decoded bytes and lines (the last one partial) before the
    failure (JSON Lines); group / row: the row group and its first row (Parquet); records: the records the
    file holds as far as known (JSON Lines: ``lines``; Parquet: its rows); stored: the file's size as stored.
    """

    what: str
    detail: str
    stored: int | None = None
    offset: int | None = None
    lines: int | None = None
    group: int | None = None
    row: int | None = None
    records: int | None = None

    def where(self) -> str:
        if self.group is not None:
            return f"in row group {self.group} (from row {self.row:,})"
        if self.offset is not None:
            return f"after {self.offset:,} decompressed bytes ({self.lines:,} lines)"
        return ""

    def reason(self) -> str:
        """The failure in one phrase: what, the codec's words, where."""
        return " ".join(x for x in (f"{self.what} ({self.detail})", self.where()) if x)

    def unit(self) -> str:
        return "lines" if self.offset is not None else "rows"

    def lost(self) -> str:
        """What of the file is not used, e.g. "1,031 lines / 412,331 bytes"."""
        parts = [f"{self.records:,} {self.unit()}" if self.records is not None else None,
                 f"{self.stored:,} bytes" if self.stored is not None else None]
        return " / ".join(p for p in parts if p) or "the whole file"

    def message(self, relpath: str) -> str:
        """The error of a run that stops on it (on_error='raise')."""
        return (f"{relpath}: {self.reason()}; the file is damaged and none of its records is used: restore or "
                f"download it again, or leave the whole file out with --on-error skip (Python: on_error='skip')")

    def entry(self, relpath: str) -> dict:
        """The file's entry in ``ReadReport.skipped`` (on_error='skip')."""
        return {"file": relpath, "line": None, "row": None, "reason": self.reason(), "level": "file",
                "what": self.what, "records": self.records, "unit": self.unit(), "bytes": self.stored,
                "not_used": self.lost()}


def stream_failure(f: Any, error: BaseException, what: str | None = None, **where: Any) -> StreamFailure:
    """The ``StreamFailure`` of ``error`` raised while decoding input ``f`` (``what``: the phrase, else told from
    the file's kind and the error; ``where``: the other fields)."""
    detail = " ".join(str(error).split()) or type(error).__name__  # one line (Parquet's messages hold newlines)
    cut = "truncat" in detail.lower()
    if what is None and f.fmt == "parquet":
        what = "truncated Parquet file" if cut else "Parquet data that does not decode"
    elif what is None:
        what = f"{'truncated' if cut else 'corrupt'} {f.compression} stream" if f.compression else "read error"
    try:
        stored = file_size(f)
    except (OSError, ValueError):
        stored = None
    return StreamFailure(what=what, detail=detail, stored=stored, **where)


@dataclass
class StreamCheck:
    """``check_stream``'s answer: the failure, or the decoded bytes' digest ``(bytes, xxh3_64)``; ``lines``
    decoded (a precise check only; the last one may lack its newline)."""

    failure: StreamFailure | None = None
    digest: tuple[int, int] | None = None
    lines: int = 0


def check_stream(f: Any, stop: threading.Event | None = None, precise: bool = False) -> StreamCheck | None:
    """Decode a JSON Lines input to its end, keeping nothing.

    Args:
        f: a JSON Lines ``InputFile`` (plain, gzip or zstd; local or remote).
        stop: when set, the check ends at its next read and returns None.
        precise: read 64 KiB at a time and count lines, so that a failure's offset and lines fall short by
            little (a failing read gives nothing); else 4 MiB at a time, and a failure is decoded again
            precisely to say where it is.

    Returns:
        A ``StreamCheck``: the digest of the decoded bytes (the one ``JsonlReader`` computes), or the failure
        with the decoded bytes and lines before it; None when stopped. Memory: one buffer (4 MiB).
    """
    buf = bytearray(_CHECK_READ if precise else _CHECK_READ_FAST)
    view = memoryview(buf)
    h = xxhash.xxh3_64()
    n = lines = 0
    last = 10
    try:
        with open_stream(f) as stream:
            while True:
                if stop is not None and stop.is_set():
                    return None
                k = stream.readinto(view)
                if not k:
                    break
                h.update(view[:k])
                n += k
                if precise:
                    lines += buf.count(b"\n", 0, k)
                    last = buf[k - 1]
    except (OSError, pa.ArrowException, ValueError) as e:
        if not precise:
            return check_stream(f, stop, precise=True)
        lines += n > 0 and last != 10
        return StreamCheck(failure=stream_failure(f, e, offset=n, lines=lines, records=lines), lines=lines)
    return StreamCheck(digest=(n, h.intdigest()), lines=lines + (n > 0 and last != 10))


def check_parquet(f: Any, stop: threading.Event | None = None,
                  columns: Callable[[pa.Schema], list[str]] | None = None) -> StreamFailure | None | bool:
    """Decode every row group of a Parquet input, keeping nothing.

    Args:
        f: a Parquet ``InputFile`` (local or remote).
        stop: when set, the check ends before its next row group and returns False.
        columns: the columns to decode, from the file's schema (those it lacks are left out: a missing column is
            the reader's to report); None: every column.

    Returns:
        None when every row group decodes, else the ``StreamFailure`` of the first that does not, or of a file
        that cannot be opened ("not a readable Parquet file"); False when stopped. Memory: one row group.
    """
    try:
        pf = open_parquet(f)
    except (OSError, pa.ArrowException) as e:
        return stream_failure(f, e, what=UNREADABLE_PARQUET)
    with pf:
        md = pf.metadata
        names = None if columns is None else [c for c in columns(pf.schema_arrow) if c in pf.schema_arrow.names]
        first = 0
        for g in range(md.num_row_groups):
            if stop is not None and stop.is_set():
                return False
            rows = md.row_group(g).num_rows
            try:
                got = pf.read_row_group(g, columns=names, use_threads=False).num_rows
            except (OSError, pa.ArrowException) as e:
                return stream_failure(f, e, group=g, row=first, records=md.num_rows)
            if got != rows and names != []:
                error = pa.ArrowInvalid(f"row group {g} has {got} rows, its metadata says {rows}")
                return stream_failure(f, error, group=g, row=first, records=md.num_rows)
            first += rows
    return None


class Checker:
    """``fn(stop)`` on a thread of its own (a check beside the reader): ``done()``, ``result()`` (waits; raises
    what ``fn`` raised) and ``cancel()`` (asks it to stop at its next read; does not wait)."""

    def __init__(self, fn: Callable[[threading.Event], Any]) -> None:
        self.stop = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name="gpu_dedup-check", daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[threading.Event], Any]) -> None:
        try:
            self._result = fn(self.stop)
        except BaseException as e:  # noqa: BLE001 - handed to the reader by result()
            self._error = e

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self) -> None:
        self.stop.set()


@dataclass
class ReadScope:
    """The files of one ``resolve_inputs`` / ``table_input`` call: what the first complete read of each found.

    files: how many; done: the positions read to their end (or skipped) once; rows: their rows; empty /
    failed: relpaths of files with no row / skipped whole; missing_ids: id field -> relpaths of files without
    it (ids generated), in the order read; ids_said: the id fields whose warning was said; said: the summary
    was logged (``file_done``)."""

    files: int
    done: set = field(default_factory=set)
    rows: int = 0
    empty: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    missing_ids: dict = field(default_factory=dict)
    ids_said: set = field(default_factory=set)
    said: bool = False


@dataclass
class FileState:
    """What the reads of a run found about one input (``InputFile.state``; module docstring).

    scope / position: the file's ``ReadScope`` and its place in it; failure: its data does not decode (every
    pass skips or refuses it); intact: the data a first pass reads is known to decode whole (JSON Lines: its
    stream; Parquet: the columns read); used: a pass gave rows of it (a failure found later cannot be a skip);
    digest: ``(bytes, xxh3_64)`` of a JSON Lines file's decoded bytes; footer: a Parquet file's
    ``FileMetaData``; skip_said: a pass warned that the file is skipped for its schema (the later ones do not)."""

    scope: ReadScope | None = None
    position: int = 0
    failure: StreamFailure | None = None
    intact: bool = False
    used: bool = False
    digest: tuple[int, int] | None = None
    footer: Any = None
    skip_said: bool = False


def share_scope(files: list) -> list:
    """Give ``files`` (new ``InputFile`` objects) one ``ReadScope``; returns them."""
    scope = ReadScope(files=len(files))
    for k, f in enumerate(files):
        f.state.scope, f.state.position = scope, k
    return files


def record_failure(f: Any, failure: StreamFailure) -> bool:
    """Record that input ``f``'s data fails: every later pass of the run skips or refuses it unread. True
    when it was not known before."""
    with _LOCK:
        new, f.state.failure = f.state.failure is None, failure
    return new


def settle_digest(f: Any, digest: tuple[int, int]) -> tuple[int, int] | None:
    """Record the digest of a complete decode of JSON Lines input ``f``; returns the different digest an
    earlier read recorded, else None (then the file is known to be intact)."""
    state = f.state
    with _LOCK:
        if state.digest is None:
            state.digest = digest
        elif state.digest != digest:
            return state.digest
        state.intact = True
    return None


def settle_footer(f: Any, footer: Any) -> bool:
    """Record a Parquet input's footer at its first read; False when a later read finds another."""
    state = f.state
    with _LOCK:
        if state.footer is None:
            state.footer = footer
            return True
        return state.footer.equals(footer)


def note_missing_ids(f: Any, id_field: str, say: bool) -> bool:
    """Record that ``f`` has no ``id_field``; True when the warning is to be said now: ``say`` (the caller may
    log) and not yet said for the field in the file's scope."""
    scope = f.state.scope
    if scope is None:
        return say
    with _LOCK:
        names = scope.missing_ids.setdefault(id_field, [])
        if f.relpath not in names:
            names.append(f.relpath)
        if not say or id_field in scope.ids_said:
            return False
        scope.ids_said.add(id_field)
    return True


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" and {len(names) - _NAMES_SHOWN:,} more" if len(names) > _NAMES_SHOWN else "")


def file_done(f: Any, rows: int, skipped: bool) -> None:
    """The first complete read of ``f`` (or its skip) gave ``rows`` rows. When every file of its scope is
    done, say once what concerns the whole input: several files without the id field (the first one's
    warning said what to do), no documents at all."""
    scope = f.state.scope
    if scope is None:
        return
    with _LOCK:
        if f.state.position in scope.done:
            return
        scope.done.add(f.state.position)
        scope.rows += rows
        if skipped:
            scope.failed.append(f.relpath)
        elif rows == 0:
            scope.empty.append(f.relpath)
        if len(scope.done) < scope.files or scope.said:
            return
        scope.said = True
        missing = {k: [n for n in v if n not in scope.failed] for k, v in scope.missing_ids.items()}
        total, rows_all, empty, failed = scope.files, scope.rows, list(scope.empty), list(scope.failed)
    for id_field, names in missing.items():
        if len(names) > 1:
            of = "all" if len(names) == total else f"{len(names):,} of the {total:,}"
            logger.warning("id field %r is missing from %s input files (%s): their ids were generated "
                           "'<relpath>:<row>' (see the first file's warning for the fix)", id_field, of,
                           _names(names))
    if rows_all == 0 and total:
        logger.warning(no_documents(empty, failed, table=getattr(f, "fmt", None) == "table"))


def no_documents(empty: list[str], failed: list[str], table: bool = False) -> str:
    """The warning of an input without a single document, naming its files."""
    if table:
        return "the input holds no documents: the table has no rows"
    parts = []
    if empty:
        parts.append(f"{len(empty):,} file(s) without a single document: {_names(empty)}")
    if failed:
        parts.append(f"{len(failed):,} file(s) skipped whole: {_names(failed)}")
    return ("the input holds no documents (" + "; ".join(parts) + "); check the input paths, the file contents "
            "and --text-field")
