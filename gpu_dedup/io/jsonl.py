"""The JSON Lines reader (``JsonlReader``): a file is read as byte blocks (``blocks``) parsed with
``pyarrow.json`` (fast path), or line by line with Python's ``json`` (the reference) whenever the fast
path's result is in any way doubtful. The rules (blank lines, line numbers, BOM, bad rows, ids, invalid
UTF-8, keep column) are in ``read``'s docstring.
"""
from __future__ import annotations

import json
import logging
import math
import re
import threading
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson
import xxhash

from .arrow import KeepValueError, empty_strings, iso_seconds
from ..errors import DataError
from .batch import Chunk, FileReader, ReadReport, Spec, StreamFailed, missing_text_field
from .check import StreamFailure, check_stream, settle_digest
from .blocks import UTF8_BOM, read_blocks, split_lines
from .discover import InputFile
from .remote import open_stream

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)


_PREVIEW_CHARS = 80
_SURROGATES = re.compile("[\ud800-\udfff]")


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


def _null_key_pattern(key: str) -> re.Pattern:
    return re.compile(re.escape(json.dumps(key, ensure_ascii=False).encode()) + rb"\s*:\s*null")


class JsonlReader(FileReader):
    def __init__(self, f: InputFile, spec: Spec, report: ReadReport, block_bytes: int) -> None:
        super().__init__(f, spec, report)
        self.block_bytes = block_bytes
        self.id_mode: bool | None = None  # does this file carry ids? decided by its first row
        self.id_mode_line = 0
        self.id_type = pa.string()
        self.keep_type = pa.float64()  # the keep column's JSON type so far: numbers, or ISO 8601 date strings
        self.keep_seen = False
        self.scope_type = pa.string()  # the scope field's JSON type so far: strings, or integers
        self.scope_seen = False  # has a row of this file had a (non-null) scope value? (a nullable field)
        self.first_keys: list[str] = []  # the first record's fields, for a missing nullable scope field
        self.text_seen = False  # has a row of this file had the text field? (else a missing one is a wrong field)
        self.slow_blocks = 0
        self.blocks = 0
        self.parsed = 0  # rows parsed so far (``rows`` counts those given)
        # Arrow reads a missing key and an explicit null alike; `"key": null` anywhere in the block (even
        # nested) sends an all-null id column to the line parser, which can tell them apart.
        self._id_null = _null_key_pattern(spec.id_field) if spec.id_field else None
        self._keep_null = _null_key_pattern(spec.keep_column) if spec.keep_column else None

    def may_fail_late(self) -> bool:
        return self.f.compression is not None  # a codec checks its data only as it decodes (check.py)

    def check_data(self, stop: threading.Event | None = None) -> StreamFailure | None | bool:
        found = check_stream(self.f, stop)
        if found is None:
            return False
        if found.failure is None and settle_digest(self.f, found.digest) is not None:
            raise self._changed()
        return found.failure

    def _changed(self) -> DataError:
        return DataError(f"{self.f.relpath}: its decompressed bytes differ from those an earlier pass of this run "
                         "read: the file changed while the run read it; rerun once it no longer changes")

    def _read_chunks(self) -> Iterator[Chunk]:
        line_base = 1
        try:
            stream = open_stream(self.f)
        except (OSError, pa.ArrowException) as e:
            raise self.fatal(f"cannot open: {e}") from e
        digest = xxhash.xxh3_64()  # of the decoded bytes: every pass of a run must read the same (check.py)
        nbytes = 0
        with stream:
            blocks = read_blocks(stream, self.block_bytes)
            first = True
            while True:
                try:
                    block = next(blocks)
                except StopIteration:
                    break
                except (OSError, pa.ArrowException, ValueError) as e:  # corrupt compressed stream, I/O error
                    raise StreamFailed(e) from e
                digest.update(block)
                nbytes += len(block)
                if first and block[:len(UTF8_BOM)] == UTF8_BOM:
                    block = block[len(UTF8_BOM):]
                if first and self.spec.scope_nullable:
                    self.first_keys = _first_keys(block)
                first = False
                chunk, newlines = self._parse_block(block, line_base)
                line_base += int(newlines)
                if chunk is not None:
                    self.parsed += len(chunk.text)
                    yield chunk
        if settle_digest(self.f, (nbytes, digest.intdigest())) is not None:
            raise self._changed()
        if self.spec.keep_column and self.parsed and not self.keep_seen:
            raise self.fatal(f"keep column {self.spec.keep_column!r} is not in any row; add it or choose "
                             f"another {self.spec.keep_label}")
        if self.spec.scope_nullable and self.parsed and not self.scope_seen:
            # JSON Lines has no schema: a field that no record carries (or only as null) is a wrong field name
            raise self.fatal(f"{self.spec.scope_flag} {self.spec.scope_field!r}: no record of the file has this "
                             f"field (or every one is null; the first record's fields: {self.first_keys[:20]}); "
                             f"choose another {self.spec.scope_flag}")
        if self.slow_blocks:
            logger.info("%s: %d of %d blocks needed the line-by-line JSON parser", self.f.relpath,
                        self.slow_blocks, self.blocks)

    def _parse_block(self, block: memoryview, line_base: int) -> tuple[Chunk | None, int]:
        """Parse one block; returns (accepted rows or None, number of newlines in the block)."""
        if len(block) == 0:
            return None, 0
        starts, ends, is_row = split_lines(block)
        newlines = len(starts) - int(ends[-1] == len(block))  # the last line may lack its newline
        rows = np.flatnonzero(is_row)
        if len(rows) == 0:
            return None, newlines
        self.blocks += 1
        r_starts, r_ends = starts[rows], ends[rows]
        spans_end = np.minimum(r_ends + 1, len(block))  # include the newline in the copied bytes
        lines = line_base + rows
        chunk = self._fast(block, r_starts, r_ends, int(lines[0]))
        if chunk is None:
            self.slow_blocks += 1
            chunk, accepted = self._slow(block, r_starts, r_ends, lines)
            r_starts, spans_end, lines = r_starts[accepted], spans_end[accepted], lines[accepted]
            if len(r_starts) == 0:
                return None, newlines
        chunk.raw, chunk.starts, chunk.ends = block, r_starts, spans_end
        if self.spec.positions:
            chunk.positions = lines
        return chunk, newlines

    def _schema(self) -> pa.Schema:
        fields = [pa.field(self.spec.text_field, pa.large_string())]
        if self.spec.id_field:
            fields.append(pa.field(self.spec.id_field, self.id_type))
        if self.spec.keep_column:
            fields.append(pa.field(self.spec.keep_column, self.keep_type))
        if self.spec.scope_field:
            fields.append(pa.field(self.spec.scope_field, self.scope_type))
        return pa.schema(fields)

    def _arrow_parse(self, block: memoryview, max_line: int) -> pa.Table | None:
        # Block size must exceed the longest line; several blocks per buffer let Arrow use its threads.
        block_size = int(min(max(1 << 22, 2 * max_line + 16), 2**31 - 1))
        for attempt in range(3):
            opts = pajson.ParseOptions(explicit_schema=self._schema(), unexpected_field_behavior="ignore",
                                       newlines_in_values=False)
            try:
                return pajson.read_json(pa.BufferReader(pa.py_buffer(block)),
                                        read_options=pajson.ReadOptions(block_size=block_size),
                                        parse_options=opts)
            except pa.ArrowException as e:  # anything Arrow rejects goes to the line parser
                msg = str(e)
                if attempt == 0 and self.spec.keep_column and f"Column(/{self.spec.keep_column})" in msg:
                    # a date column (ISO 8601 strings) or back to numbers: remember it for the next blocks
                    self.keep_type = pa.large_string() if self.keep_type == pa.float64() else pa.float64()
                    continue
                if attempt < 2 and self.spec.scope_field and f"Column(/{self.spec.scope_field})" in msg:
                    self.scope_type = pa.int64() if self.scope_type == pa.string() else pa.string()
                    continue
                id_related = self.spec.id_field and (f"Column(/{self.spec.id_field})" in msg or "int64" in msg)
                if attempt == 0 and id_related:  # integer ids: remember the type for the next blocks
                    self.id_type = pa.int64() if self.id_type == pa.string() else pa.string()
                    continue
                return None
        return None

    def _fast(self, block: memoryview, starts: np.ndarray, ends: np.ndarray, first_line: int) -> Chunk | None:
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
                if empty_strings(col).any():
                    return None  # an empty-string id is refused like a null: the line parser says where
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
            kcol_all = kcol.combine_chunks()
            if pa.types.is_floating(kcol_all.type):
                keep = kcol_all.to_numpy(zero_copy_only=False).astype(np.float64)
            else:  # ISO 8601 strings; one that does not parse: the line parser names its line
                try:
                    keep = iso_seconds(kcol_all)
                except KeepValueError:
                    return None
        scope = None
        if self.spec.scope_field:
            scol = table.column(self.spec.scope_field)
            if scol.null_count and not self.spec.scope_nullable:
                return None  # a missing or null scope value: the line parser names its line
            scope = scol.combine_chunks().cast(pa.string())
        # Accepted: only now update the per-file state, exactly as the line parser would have.
        self.text_seen = True
        if scope is not None:
            self.scope_seen |= scope.null_count < len(scope)
        if self.spec.keep_column:
            self.keep_seen |= kcol.null_count < len(kcol)
        ids = None
        if has is not None:
            if self.id_mode is None:
                self.id_mode, self.id_mode_line = has, first_line
                if not has:
                    self.ids_generated(_first_keys(block))
            ids = col.combine_chunks().cast(pa.string()) if has else None
        return Chunk(ids=ids, text=text, keep=keep, scope=scope)

    def _slow(self, block: memoryview, starts: np.ndarray, ends: np.ndarray,
              line_nos: np.ndarray) -> tuple[Chunk, np.ndarray]:
        """Reference parser: one Python ``json.loads`` per line. Returns the chunk and the accepted mask.

        Per line: the record (``_slow_record``: decoded, parsed, an object), then its text, id, keep and scope
        fields (``_slow_text``, ``_slow_id``, ``_slow_keep``, ``_slow_scope``); a bad record is reported
        (``bad``) and skipped, a bad keep or scope value stops the read (``fatal``)."""
        spec = self.spec
        accepted = np.zeros(len(starts), dtype=bool)
        texts: list[str] = []
        ids: list[str] = []
        keeps: list[float] = []
        scopes: list[str] = []
        invalid = 0
        for i, (s, e, ln) in enumerate(zip(starts.tolist(), ends.tolist(), line_nos.tolist())):
            record = self._slow_record(block[s:e], ln)
            if record is None:
                continue
            obj, bad_utf8 = record
            text = self._slow_text(obj, ln)
            if text is None:
                continue
            text, fixed = _fix_surrogates(text)
            bad_utf8 |= fixed
            id_value = None
            if spec.id_field:
                got = self._slow_id(obj, ln)
                if got is None:
                    continue
                id_value, fixed = got
                bad_utf8 |= fixed
            if spec.keep_column:
                keeps.append(self._slow_keep(obj, ln))
            if spec.scope_field:
                scope, fixed = self._slow_scope(obj, ln)
                bad_utf8 |= fixed
                scopes.append(scope)
            accepted[i] = True
            texts.append(text)
            if id_value is not None:
                ids.append(id_value)
            invalid += bad_utf8
        has_ids = bool(spec.id_field) and bool(self.id_mode)
        chunk = Chunk(ids=pa.array(ids, pa.string()) if has_ids else None,
                      text=pa.array(texts, pa.large_string()),
                      keep=np.asarray(keeps, dtype=np.float64) if spec.keep_column else None,
                      invalid_utf8=invalid, scope=pa.array(scopes, pa.string()) if spec.scope_field else None)
        return chunk, accepted

    def _slow_record(self, raw: memoryview, ln: int) -> tuple[dict, bool] | None:
        """(the line's JSON object, whether its bytes were not valid UTF-8), or None (reported: not JSON, or
        not an object). Invalid UTF-8 is replaced, not rejected (the reading rules)."""
        try:
            line, bad_utf8 = str(raw, "utf-8"), False
        except UnicodeDecodeError:
            line, bad_utf8 = str(raw, "utf-8", "replace"), True
        try:
            obj = json.loads(line, strict=False)
        except json.JSONDecodeError as err:
            self.bad(f"malformed JSON ({err.msg} at column {err.colno}): {_preview(line)}", line=ln)
            return None
        except RecursionError:
            self.bad("malformed JSON (nested too deeply)", line=ln)
            return None
        if not isinstance(obj, dict):
            self.bad(f"not a JSON object (a JSON {_json_type(obj)}): {_preview(line)}", line=ln)
            return None
        return obj, bad_utf8

    def _slow_text(self, obj: dict, ln: int) -> str | None:
        """The record's text, or None (reported: missing, or not a string)."""
        spec = self.spec
        if spec.text_field not in obj:
            if self.text_seen:  # earlier rows have it: a bad record
                self.bad(f"missing text field {spec.text_field!r} (this record's fields: {list(obj)[:10]})",
                         line=ln)
            else:  # no row so far has it: most likely the wrong field
                reason, fix = missing_text_field(spec.text_field, list(obj), f"no record of {self.f.relpath} "
                                                 f"up to this line has it", "this record's fields")
                self.bad(reason, line=ln, fix=fix)
            return None
        self.text_seen = True
        text = obj[spec.text_field]
        if not isinstance(text, str):
            what = "null" if text is None else f"a JSON {_json_type(text)} ({_preview(text)}), not a string"
            self.bad(f"text field {spec.text_field!r} is {what}", line=ln)
            return None
        return text

    def _slow_id(self, obj: dict, ln: int) -> tuple[str | None, bool] | None:
        """(the record's id, None when the file's ids are generated; whether it had lone surrogates), or None
        (reported: present in some rows only, empty, or neither a string nor an integer)."""
        spec = self.spec
        has = spec.id_field in obj
        if self.id_mode is None:
            self.id_mode, self.id_mode_line = has, ln
            if not has:
                self.ids_generated(list(obj))
        if has != self.id_mode:
            first = f"line {self.id_mode_line}"
            if self.id_mode:
                self.bad(f"id field {spec.id_field!r} is missing, but the file's first row ({first}) has "
                         f"it; every row of a file must have it, or none (then ids are generated)", line=ln)
            else:
                self.bad(f"id field {spec.id_field!r} is present, but the file's first row ({first}) "
                         f"lacks it; every row of a file must have it, or none", line=ln)
            return None
        if not has:
            return None, False
        v = obj[spec.id_field]
        if isinstance(v, str) and not v:
            self.bad(f"id field {spec.id_field!r} is an empty string; ids must be non-empty strings "
                     "or integers", line=ln)
            return None
        if isinstance(v, str):
            return _fix_surrogates(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v), False
        what = "null" if v is None else f"a JSON {_json_type(v)} ({_preview(v)})"
        self.bad(f"id field {spec.id_field!r} is {what}; ids must be strings or integers", line=ln)
        return None

    def _slow_keep(self, obj: dict, ln: int) -> float:
        """The record's keep value (NaN when absent or null); a value that is neither a number nor an ISO
        8601 date string stops the read (``fatal``)."""
        spec = self.spec
        kv = obj.get(spec.keep_column)
        self.keep_seen |= spec.keep_column in obj
        if kv is None:
            return math.nan
        if isinstance(kv, (int, float)):
            try:
                return float(kv)
            except OverflowError:
                raise self.fatal(f"keep column {spec.keep_column!r} value {_preview(kv)} does not fit "
                                 f"a float64", line=ln) from None
        if isinstance(kv, str):
            try:
                return float(iso_seconds(pa.array([kv]))[0])
            except KeepValueError as e:
                raise self.fatal(f"keep column {spec.keep_column!r}: {e}; fix the data or choose another "
                                 f"{spec.keep_label}", line=ln) from None
        raise self.fatal(f"keep column {spec.keep_column!r} is a JSON {_json_type(kv)} "
                         f"({_preview(kv)}), neither a number nor an ISO 8601 date string; fix the "
                         f"data or choose another {spec.keep_label}", line=ln)

    def _slow_scope(self, obj: dict, ln: int) -> tuple[str | None, bool]:
        """(the record's scope value as a string, whether it had lone surrogates); a missing, null or other
        value stops the read (``fatal``)."""
        spec = self.spec
        sv = obj.get(spec.scope_field)
        if sv is None and spec.scope_nullable:
            return None, False
        self.scope_seen = True
        if isinstance(sv, str):
            return _fix_surrogates(sv)
        if isinstance(sv, int) and not isinstance(sv, bool):
            return str(sv), False
        what = ("missing" if spec.scope_field not in obj else
                "null" if sv is None else f"a JSON {_json_type(sv)} ({_preview(sv)})")
        if spec.scope_nullable:
            raise self.fatal(f"{spec.scope_flag} {spec.scope_field!r} is {what}; it must be a string, an integer "
                             f"or null (fix the data or choose another {spec.scope_flag})", line=ln)
        raise self.fatal(f"scope field {spec.scope_field!r} is {what}; every document needs a string "
                         f"or integer scope value (fix the data or choose another {spec.scope_flag})", line=ln)


def _first_keys(block: memoryview) -> list[str]:
    """The field names of a block's first record (for a message; [] when it is not a JSON object)."""
    line = bytes(block[:1 << 16]).split(b"\n", 1)[0]
    try:
        obj = json.loads(line)
    except ValueError:
        return []
    return list(obj) if isinstance(obj, dict) else []
