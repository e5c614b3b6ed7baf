"""What reading yields, and what every file reader shares.

``Batch`` (rows of one file holding at most ``batch_bytes`` of text) and ``ReadReport``; the reader spec
(``make_spec``: id / text / keep fields and the error policy); ``Chunk``, the accepted rows of one piece
of a file; ``FileReader``, the per-file state and error policy of the readers (``jsonl``, ``arrow``);
``generated_ids``; and the cutting of chunks into batches (``text_parts``, ``join_chunks``).
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import shlex
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, DataError, GpuDedupError
from .check import (Checker, StreamFailure, file_done, no_documents, note_missing_ids, record_failure,
                    stream_failure)
from .remote import file_size
from .discover import InputError, InputFile

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)


@dataclass
class Batch:
    """Rows ``row_start .. row_start + len - 1`` of the run, all from ``files[file_index]``.

    ids: pa.string() [n]; text: pa.large_string() [n], no nulls; keep_values: float64 [n] or None;
    scope: pa.string() [n] (the scope field's values, integers as decimal strings) or None.
    With a device reader (``gpu``) a Parquet batch may instead carry its text in device memory:
    ``text`` is None and ``device_text`` a ``gpu.DeviceText`` (clean: no nulls, valid UTF-8).
    """

    file_index: int
    row_start: int
    ids: pa.Array
    text: pa.Array | None
    keep_values: np.ndarray | None = None
    device_text: Any = None
    scope: pa.Array | None = None

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class ReadReport:
    """What a read found, filled in as it goes (``iter_batches``' ``report``); run.json records it.

    files: the files read; rows: the documents given (skipped rows not counted); bytes_text: their UTF-8
    text bytes; skipped: one ``{"file", "line", "row", "reason"}`` per row (or file) dropped with
    ``on_error="skip"`` (``line`` 1-based for JSON Lines, ``row`` 0-based physical for Parquet / tables,
    the other None); invalid_utf8_rows: rows kept with their invalid UTF-8 replaced by U+FFFD; empty_files:
    the relpaths of files with zero rows; file_rows: the documents given per file, in reading order (a pipeline
    step's rows name their input file with it); generated_ids: the relpaths of files without the id field (their
    ids were generated). A file whose stored data fails to decode is skipped whole (on_error="skip"): its one
    entry in ``skipped`` has ``level`` "file", ``what`` (e.g. "corrupt gzip stream"), ``records`` (lines or
    rows decoded / held, when known) and ``bytes`` (its size as stored), none of its rows is counted.
    """

    files: int = 0
    rows: int = 0
    bytes_text: int = 0
    skipped: list[dict] = field(default_factory=list)
    invalid_utf8_rows: int = 0
    empty_files: list[str] = field(default_factory=list)
    file_rows: list[int] = field(default_factory=list)
    generated_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The report as a JSON-ready dict (its fields by name; ``merge`` takes it back)."""
        return dataclasses.asdict(self)

    def merge(self, part: dict) -> None:
        """Add one file's read report (a ``ReadReport.to_dict()``, e.g. from a worker) into this one."""
        self.files += part["files"]
        self.rows += part["rows"]
        self.bytes_text += part["bytes_text"]
        self.skipped.extend(part["skipped"])
        self.invalid_utf8_rows += part["invalid_utf8_rows"]
        self.empty_files.extend(part["empty_files"])
        self.file_rows.extend(part.get("file_rows", ()))
        self.generated_ids.extend(part.get("generated_ids", ()))


_FILES_NAMED = 5  # skipped / empty files named in a summary line


def _named(items: list[str]) -> str:
    more = len(items) - _FILES_NAMED
    return "; ".join(items[:_FILES_NAMED]) + (f"; and {more:,} more" if more > 0 else "")


def read_summary(read: dict, where: str = "listed in run.json under read.skipped") -> list[str]:
    """The lines a command prints about its read (a ``ReadReport.to_dict()``, run.json's ``read``): the bad
    records and the files skipped, each file with what was wrong and what of it was not used, and a warning
    when the input gave no document at all.

    Args:
        read: the read report as a dict (``skipped`` entries, ``rows``, ``files``, ``empty_files``).
        where: what the skipped line ends with: where they are recorded (a command without run.json: another
            word).

    Returns:
        e.g. ["skipped 3 bad records and 1 file (part-1.jsonl.gz: corrupt gzip stream, 1,031 lines / 412,331
        bytes not used); listed in run.json under read.skipped"]; [] when there is nothing to say.
    """
    skipped = read.get("skipped") or []
    files = [s for s in skipped if s.get("level") == "file" or (s.get("line") is None and s.get("row") is None)]
    records = len(skipped) - len(files)
    lines = []
    if skipped:
        parts = [f"{records:,} bad record{'s' if records != 1 else ''}"] if records else []
        if files:
            named = [f"{s['file']}: " + (f"{s['what']}, {s['not_used']} not used" if s.get("not_used")
                                         else str(s.get("reason", "")).split(":")[0]) for s in files]
            parts.append(f"{len(files):,} file{'s' if len(files) != 1 else ''} ({_named(named)})")
        lines.append(f"skipped {' and '.join(parts)}; {where}")
    if not read.get("rows") and read.get("files"):
        empty = list(read.get("empty_files") or [])
        lines.append("warning: " + no_documents(empty, [s["file"] for s in files]))
    return lines


@dataclass(frozen=True)
class Spec:
    id_field: str | None
    text_field: str
    keep_column: str | None
    on_error: str
    positions: bool = False  # chunks carry each row's line / physical row and its id as read (``Chunk``)
    scope_field: str | None = None  # chunks carry each row's scope value (``Chunk.scope``)
    scope_nullable: bool = False  # a null / missing scope value is kept as null (filter's --url-field), not an error
    scope_flag: str = "--scope-field"  # the flag that names the scope field, for error messages
    keep_name: str | None = None  # the setting that chose the keep policy, for error messages (None: unnamed)

    @property
    def keep_label(self) -> str:
        """How errors name the keep policy: "keep policy", with the setting that chose it where known ("keep policy
        (SemanticConfig.keep)": the command line's error names that setting's flag, cli/flags.py)."""
        return "keep policy" if self.keep_name is None else f"keep policy ({self.keep_name})"

    @property
    def scope_label(self) -> str:
        """How errors name the scope field: "scope field", or the flag that gave it (``--url-field``)."""
        return "scope field" if self.scope_flag == "--scope-field" else self.scope_flag


def make_spec(id_field: str | None, text_field: str, on_error: str, keep_column: str | None,
              positions: bool = False, scope_field: str | None = None, scope_nullable: bool = False,
              scope_flag: str = "--scope-field", keep_name: str | None = None) -> Spec:
    """The reader spec: which fields to read and the error policy, checked once before any file is opened.

    Args:
        id_field: the id field or column, or None for generated ids (``generated_ids``).
        text_field: the text field or column.
        on_error: "raise" (a bad row is an ``InputError``) or "skip" (it is dropped and recorded in
            ``ReadReport.skipped``).
        keep_column: a numeric column read as float64 keep values, or None.
        positions: chunks also carry each row's line / physical row and its id as read (for error messages
            that name rows, ``ids.locate_rows``).
        scope_field: a string / integer field carried per document as ``Batch.scope``, or None.
        scope_nullable: a null or missing scope value is carried as null (else it stops the read).
        scope_flag: the flag named by the scope field's errors ("--scope-field", "--url-field").

    Returns:
        A frozen ``Spec`` holding these values.

    Raises:
        ConfigError: an ``on_error`` other than "raise" / "skip"; an empty or non-string ``text_field`` /
            ``id_field``; ``id_field`` equal to ``text_field``; a keep column or scope field that is also
            the text or id field, or an empty scope field.
    """
    if on_error not in ("raise", "skip"):
        raise ConfigError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if not isinstance(text_field, str) or not text_field:
        raise ConfigError(f"text_field must be a non-empty string, got {text_field!r}")
    if id_field is not None and (not isinstance(id_field, str) or not id_field):
        raise ConfigError(f"id_field must be a non-empty string or None, got {id_field!r}")
    if id_field == text_field:
        raise ConfigError(f"id_field and text_field are both {text_field!r}; they must name different fields")
    if keep_column is not None and keep_column in (text_field, id_field):
        raise ConfigError(f"keep column {keep_column!r} is also the text or id field; choose a numeric column")
    if scope_field is not None and (not isinstance(scope_field, str) or not scope_field
                                    or scope_field in (text_field, id_field)):
        raise ConfigError(f"scope field {scope_field!r} must be a non-empty column name other than the text and "
                          "id fields")
    return Spec(id_field=id_field, text_field=text_field, keep_column=keep_column, on_error=on_error,
                 positions=positions, scope_field=scope_field, scope_nullable=bool(scope_nullable),
                scope_flag=scope_flag, keep_name=keep_name)


_FIELDS_SHOWN = 8


def missing_text_field(text_field: str, fields: list[str], absent: str, label: str) -> tuple[str, str]:
    """(reason, fix) for a text field that the records do not have (a wrong ``text_field``): where it is
    ``absent``, the fields that exist (the first few, called ``label``), and the option to set, with the
    closest existing name when there is one."""
    shown = ", ".join(repr(f) for f in fields[:_FIELDS_SHOWN])
    if len(fields) > _FIELDS_SHOWN:
        shown += f", ... ({len(fields)} in all)"
    reason = f"missing text field {text_field!r}: {absent} ({label}: {shown or 'none'})"
    names = [f for f in fields if isinstance(f, str)]
    close = [f for f in names if f.lower() == text_field.lower()] or difflib.get_close_matches(text_field, names, 1)
    if close:
        return reason, (f"did you mean {close[0]!r}? Name the field that holds the text with --text-field "
                        f"{shlex.quote(close[0])} (Python: text_field={close[0]!r})")
    return reason, "name the field that holds the text with --text-field NAME (Python: text_field='NAME')"


_GENERATED_IDS_SAID: set[tuple[str, str]] = set()


def generated_ids_warning(f: InputFile, id_field: str, fields: list[str]) -> None:
    """Warn that ``f`` has no ``id_field`` (its rows' ``fields``) and gets generated ids: a mistyped --id-field
    must not pass unnoticed, and a file without ids needs ``id_field=None`` to say so. Said for the first such
    file of an input (``check.ReadScope``; the others are named together once every file is read:
    ``check.file_done``), once per process for a file (every later read of it is silent)."""
    key = (f.path, id_field)
    quiet = key in _GENERATED_IDS_SAID or getattr(_quiet_state, "on", False)  # a quiet re-read says nothing
    if not note_missing_ids(f, id_field, say=not quiet):
        return
    _GENERATED_IDS_SAID.add(key)
    names = [x for x in fields if isinstance(x, str)]
    close = [x for x in names if x.lower() == id_field.lower()] or difflib.get_close_matches(id_field, names, 1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    shown = ", ".join(repr(x) for x in names[:_FIELDS_SHOWN])
    scope = f.state.scope
    later = " (other files without it are named once the input is read)" if scope and scope.files > 1 else ""
    logger.warning("%s has no id field %r (fields: %s): using generated ids '%s:<row>'%s; %sname the id field "
                   "with --id-field NAME (Python: id_field='NAME'), or pass --no-id-field (id_field=None) when the "
                   "input has none", f.relpath, id_field, shown or "none", f.relpath, later, hint)


@dataclass
class Chunk:
    """Accepted rows of one piece of a file. ``ids`` None means generated ids.

    For writing: JSON Lines give ``raw`` with row byte spans ``[starts, ends)`` (line incl. newline);
    Arrow sources give the full record batch ``record`` and ``valid`` (bool [len(record)]) = accepted rows.
    With ``Spec.positions``: ``positions`` int64 [rows], each row's 1-based line (JSON Lines) or 0-based
    physical row (Arrow), and for Arrow sources with string ids ``raw_ids`` (large_binary [rows], the ids'
    bytes before any UTF-8 repair).
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
    device_text: Any = None  # gpu.DeviceText instead of text (then text is None)
    # The batches this chunk becomes, when already cut by a pool worker (see text_parts): then ``text``
    # is None and ``parts`` carries the batches' texts.
    parts: list[tuple[int, int, pa.Array, int]] | None = None
    positions: np.ndarray | None = None
    raw_ids: pa.Array | None = None
    scope: pa.Array | None = None  # pa.string() [rows] with ``Spec.scope_field``

    @property
    def rows(self) -> int:
        if self.parts is not None:
            return self.parts[-1][1] if self.parts else 0
        return len(self.device_text) if self.device_text is not None else len(self.text)


class StreamFailed(DataError):
    """Raised by a reader's ``_read_chunks`` when the file's stored data stops decoding (``cause``: the codec's
    or reader's error; ``failure``: its ``StreamFailure`` when already described). ``FileReader.chunks`` turns
    it into the file's skip or error (it is caught before any other ``GpuDedupError``); it never leaves the
    package."""

    def __init__(self, cause: BaseException | None, failure: StreamFailure | None = None) -> None:
        super().__init__(str(cause or failure))
        self.cause, self.failure = cause, failure


def _held_bytes(c: Chunk) -> int:
    """About the memory a held chunk keeps alive (its raw block, text, record batch, device text)."""
    n = len(c.raw) if c.raw is not None else 0
    n += c.text.nbytes if c.text is not None else sum(p[3] for p in c.parts or ())
    n += c.record.nbytes if c.record is not None else 0
    return n + (c.device_text.nbytes if c.device_text is not None else 0)


class FileReader:
    """Shared state for reading one file: error policy, skipped records, per-file id / keep state, and the
    rule that no record of a file whose stored data fails to decode is used (``chunks``).

    Subclasses give the file's accepted rows in ``_read_chunks`` and raise ``StreamFailed`` when its data stops
    decoding; ``may_fail_late`` and ``check_data`` say whether that can happen after rows were given, and
    decode the file to its end to find out."""

    # held chunks of a file being checked (on_error='skip'): beyond this the reader waits for the check
    hold_bytes: int = 256 << 20

    def __init__(self, f: InputFile, spec: Spec, report: ReadReport) -> None:
        self.f, self.spec, self.report = f, spec, report
        self.rows = 0  # rows given by chunks() so far
        self.unreadable = False  # the file (or its schema) could not be read at all: skipped, not "empty"

    # --------------------------------------------------------------------------- stream failures (module doc)

    def may_fail_late(self) -> bool:
        """Can this file's data fail to decode after some of its rows were read? (compressed JSON Lines,
        Parquet)"""
        return False

    def check_data(self, stop: threading.Event | None = None) -> StreamFailure | None | bool:
        """Decode what this read decodes of the file, to its end, keeping nothing: its ``StreamFailure``, None
        when it decodes, False when stopped."""
        return None

    def reads_more(self) -> bool:
        """Does this read decode more of the file than a first pass does (a Parquet writer: every column)?"""
        return False

    def describe(self, error: StreamFailed) -> StreamFailure:
        """The ``StreamFailure`` of ``error`` (raised by ``_read_chunks``): from a check of the whole file,
        which says where it fails independently of how the read cut it, or from the error itself."""
        if error.failure is not None:
            return error.failure
        found = self.check_data() if self.may_fail_late() else None
        return found if isinstance(found, StreamFailure) else stream_failure(self.f, error.cause)

    def chunks(self) -> Iterator[Chunk]:
        """The file's accepted rows, chunk by chunk, under the rule that no record of a file whose stored data
        fails to decode is used (``read``'s docstring: damaged files).

        A failure known from an earlier pass of the run skips (or refuses) the file at once. With
        on_error='skip', the first read of a file that may fail late holds its chunks until it has decoded the
        whole file; past ``hold_bytes`` of them it waits for a check (``check_data``) of the file, started
        then, or at once on a thread beside the read when the file is that large as stored. If the data
        fails, the held chunks and the rows skipped so far are dropped and the file is skipped whole
        (``ReadReport.skipped``: one file-level entry). With 'raise' the chunks go out as they come and a
        failure stops the run naming the file; so does a row error in a file whose data turns out to fail (the
        failure is the error, not the row). A failure after a pass used rows of the file is an error in
        either mode: a ``DataError`` when an earlier pass decoded the same data whole (the file changed while
        the run read it).
        """
        state = self.f.state
        if state.failure is not None:
            self._failed(state.failure)
            return
        guarded = (self.spec.on_error == "skip" and not state.intact and not state.used and self.may_fail_late())
        marks = len(self.report.skipped), len(self.report.generated_ids)
        checker = Checker(self.check_data) if guarded and self._large() else None
        held: list[Chunk] = []
        size = 0
        it = self._read_chunks()
        try:
            for chunk in it:
                if guarded:
                    held.append(chunk)
                    size += _held_bytes(chunk)
                    if not (size > self.hold_bytes or (checker is not None and checker.done())):
                        continue
                    found = checker.result() if checker is not None else self.check_data()
                    if isinstance(found, StreamFailure):
                        raise StreamFailed(None, found)
                    guarded, checker = False, None
                    state.intact = True
                else:
                    held.append(chunk)
                state.used = True
                for c in held:
                    self.rows += c.rows
                    yield c
                held = []
            if guarded and held:  # the read decoded all it reads of the file: no check needed
                state.used = True
                for c in held:
                    self.rows += c.rows
                    yield c
        except StreamFailed as e:
            held.clear()
            self._fail(self.describe(e), marks)
            return
        except GpuDedupError:
            # a row error of a file whose data fails: the failure is the error (the row is likely garbage)
            found = (checker.result() if checker is not None else
                     self.check_data() if self.may_fail_late() and not state.intact else None)
            if not isinstance(found, StreamFailure):
                raise
            held.clear()
            self._fail(found, marks)
            return
        finally:
            if checker is not None:
                checker.cancel()
            it.close()
        if not self.unreadable and self.may_fail_late():
            state.intact = True  # the read decoded all it reads of the file
        file_done(self.f, self.rows, self.unreadable)

    def _large(self) -> bool:
        """Will the read hold more than ``hold_bytes`` before it ends? (so its check starts at once): judged by
        the size as stored (a chunk holds its decoded bytes and their text: about twice)."""
        try:
            return 2 * file_size(self.f) > self.hold_bytes
        except (OSError, ValueError):
            return False

    def _fail(self, failure: StreamFailure, marks: tuple[int, int]) -> None:
        """The file's data fails (``marks``: the report's lengths before the file). Nothing of it used yet, by
        this pass or an earlier one: its error (on_error='raise') or its skip, the rows it skipped so far
        dropped from the report. Else an error in either mode: a ``DataError`` when an earlier pass decoded
        the same data whole (it changed while the run read it)."""
        state = self.f.state
        if state.intact and not self.reads_more():
            raise DataError(f"{self.f.relpath}: {failure.reason()}, but an earlier pass of this run decoded it "
                            "whole: the file changed while the run read it; rerun once it no longer changes")
        if self.spec.on_error == "skip" and (state.used or self.rows):
            more = " (this pass reads columns the first one did not)" if self.reads_more() else ""
            raise InputError(f"{self.f.relpath}: {failure.reason()}, found after rows of it were used{more}: the "
                             "file cannot be skipped now; restore it, or leave it out of the inputs")
        del self.report.skipped[marks[0]:], self.report.generated_ids[marks[1]:]
        self._failed(failure)

    def _failed(self, failure: StreamFailure) -> None:
        """A file whose data fails, none of it used: its error (on_error='raise'), else its skip."""
        new = record_failure(self.f, failure)
        if self.spec.on_error == "raise":
            raise InputError(failure.message(self.f.relpath))
        self.unreadable = True
        self.report.skipped.append(failure.entry(self.f.relpath))
        if new:  # a later pass skips it again, silently
            logger.warning("%s: skipped the whole file: %s; %s not used", self.f.relpath, failure.reason(),
                           failure.lost())
        file_done(self.f, 0, True)

    # --------------------------------------------------------------------------------------- bad rows

    def where(self, line: int | None = None, row: int | None = None) -> str:
        if line is not None:
            return f"{self.f.relpath}:{line}"
        if row is not None:
            return f"{self.f.relpath} row {row}"
        return self.f.relpath

    def bad(self, reason: str, *, line: int | None = None, row: int | None = None, fix: str | None = None) -> None:
        """A bad row (or file): raise, or record it and let the caller drop it. ``fix``: what the error
        suggests (default: fix the data or skip bad rows)."""
        if self.spec.on_error == "raise":
            raise self.bad_error(reason, line=line, row=row, fix=fix)
        self.report.skipped.append({"file": self.f.relpath, "line": line, "row": row, "reason": reason})
        logger.debug("skipped %s: %s", self.where(line, row), reason)

    def bad_error(self, reason: str, *, line: int | None = None, row: int | None = None,
                  fix: str | None = None) -> InputError:
        """The error ``bad`` raises with on_error='raise'."""
        fix = fix or "fix the data, or drop bad rows with --on-error skip (Python: on_error='skip')"
        return InputError(f"{self.where(line, row)}: {reason}; {fix}")

    def fatal(self, reason: str, *, line: int | None = None, row: int | None = None) -> InputError:
        return InputError(f"{self.where(line, row)}: {reason}")

    def ids_generated(self, fields: list[str]) -> None:
        """The file has no ``spec.id_field``: its ids are generated (``generated_ids_warning``)."""
        self.report.generated_ids.append(self.f.relpath)
        generated_ids_warning(self.f, self.spec.id_field, fields)

    def _read_chunks(self) -> Iterator[Chunk]:
        raise NotImplementedError


def scope_strings(col: pa.Array) -> pa.Array:
    """A scope column as pa.string(): strings as they are, integers as decimal strings (dictionaries
    decoded; other string types as they are, for ``arrow.as_utf8``). Nulls stay null (the caller names the row)."""
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col.cast(pa.string()) if pa.types.is_integer(col.type) else col


def generated_ids(relpath: str, first: int, n: int) -> pa.Array:
    """The ids of rows that have none: ``f"{relpath}:{row_in_file}"``.

    Args:
        relpath: the file's ``InputFile.relpath``.
        first: the 0-based row in the file (real rows only) of the first id.
        n: how many ids.

    Returns:
        pa.string() [n]: ``relpath:first`` .. ``relpath:first + n - 1``.
    """
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


def text_parts(text: pa.Array, batch_bytes: int) -> list[tuple[int, int, pa.Array, int]]:
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


def join_chunks(chunks: list[Chunk], batch_bytes: int) -> Chunk:
    """One chunk of the rows of ``chunks`` (in order), with its batches (``parts``) cut exactly as
    ``text_parts`` would cut their concatenation; each batch's text is copied once, only when it spans
    chunks or the chunk is cut (a batch inside one chunk that is not cut stays a zero-copy slice)."""
    invalid = sum(c.invalid_utf8 for c in chunks)
    full = [c for c in chunks if c.rows]
    if not full:
        return Chunk(ids=None, text=None, keep=None, invalid_utf8=invalid, parts=[])
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
    positions = raw_ids = scope = None
    if full[0].scope is not None:
        scope = full[0].scope if len(full) == 1 else pa.concat_arrays([c.scope for c in full])
    if full[0].positions is not None:
        positions = np.concatenate([c.positions for c in full])
    if full[0].raw_ids is not None:
        raw_ids = pa.concat_arrays([c.raw_ids for c in full])
    return Chunk(ids=ids, text=None, keep=keep, invalid_utf8=invalid, parts=parts, positions=positions,
                  raw_ids=raw_ids, scope=scope)


_quiet_state = threading.local()


class _QuietFilter(logging.Filter):
    """Drops the package logger's records in a thread inside ``quiet_logs()``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_quiet_state, "on", False)


logger.addFilter(_QuietFilter())


@contextmanager
def quiet_logs() -> Iterator[None]:
    """No log records from this package in this thread meanwhile: a second read of a file (counting its rows for
    the writer, locating duplicate ids) would log again what the first read said."""
    before = getattr(_quiet_state, "on", False)
    _quiet_state.on = True
    try:
        yield
    finally:
        _quiet_state.on = before
