"""Labelled documents for training a classifier (``gpu-dedup train-classifier``): reading and checking them.

Formats
    JSON Lines (``.jsonl``/``.json``, optionally ``.gz``/``.zst``) and Parquet, files or directories (found by
    ``gpu_dedup.io.resolve_inputs``): one document per record with a text field, a label field and an
    optional group field (names configurable). fastText format (``.txt``, optionally ``.gz``/``.zst``, named
    explicitly): ``__label__X text`` per line; every line is its own group.

What a document becomes (fastText trains on one line per document)
    * Line breaks (``\\n``) in the text are replaced by spaces, so that the document stays one training line
      and the text predicted on is the text trained on (fastText's ``predict`` refuses ``\\n``).
    * A text holding ``__label__`` (fastText's reserved label spelling) is refused, as the seed's procedure does
      (000:264: "reserved training label spelling in text"), naming the file and line; with
      ``label_tokens="strip"`` the whitespace-separated tokens that start with it are removed instead (in
      training fastText would take them as extra labels of the document, and at prediction it drops them, so
      removing them keeps training and prediction alike) and counted (``label_tokens_removed``).
    * Lone surrogates (from JSON escapes such as ``"\\ud800"``) become U+FFFD (they cannot be written as UTF-8).

Labels
    A string (with or without the ``__label__`` prefix), an integer, an integral float (``1.0`` -> ``"1"``)
    or a bool (``"true"``/``"false"``). Null, empty, whitespace-containing or other values are errors that
    name the file and line (JSON Lines, 1-based physical lines) or row (Parquet, 0-based).

Groups (required: the seed's procedure, 000 §7, "Train and validation groups must be disjoint before fitting")
    All documents of a group go to the same side of the train/validation/test split. With a group field,
    every document must have a non-null, non-empty group (string or integer); a group field absent from the
    input is an error, and so is fastText ``.txt`` input (it has no groups). ``group_field=None`` (CLI
    ``--no-group-field``) trains without groups: each document is its own group, near-copies can then sit on
    both sides, and the card says so.

Columns (the stratify field and the audit fields)
    Every document of a JSON Lines / Parquet input must have each requested column (string, integer or bool;
    not null): a missing one is an error naming the option, the column and the fields present.
"""
from __future__ import annotations

import difflib
import io
import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

import pyarrow as pa

from ..constants import LABEL_PREFIX
from ..errors import ConfigError, GpuDedupError, MissingFileError
from ..io.discover import InputError, file_sha256, resolve_inputs
from ..io.remote import file_size, open_parquet, open_stream

logger = logging.getLogger(__name__)

DEFAULT_GROUP_FIELD = "group"
# fastText's token separators (dictionary.cc readWord): space, \n, \r, \t, \v, \f, \0.
_SEPARATORS = re.compile(r"[ \n\r\t\v\f\x00]+")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_TXT_SUFFIXES = ((".txt.gz", "gzip"), (".txt.zst", "zstd"), (".txt", None))
_FIELDS_SHOWN = 8
LabelTokens = Literal["refuse", "strip"]


class LabelledInputError(InputError):
    """Bad labelled input; the message names the file and line/row, the value, and the fix."""


@dataclass
class LabelledFile:
    """One input file: where it is, its format, its stored size, its SHA-256 (local files) and documents read."""

    path: str
    fmt: str
    bytes: int
    sha256: str | None
    documents: int = 0


@dataclass
class LabelledData:
    """The documents of a training run, in input order, with what preparing them changed."""

    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # without the __label__ prefix
    groups: list[str] = field(default_factory=list)
    columns: dict[str, list[str]] = field(default_factory=dict)  # the stratify / audit columns, per document
    where: list[str] = field(default_factory=list)  # "file:line N" / "file row N", for messages
    files: list[LabelledFile] = field(default_factory=list)
    groups_from: str = ""
    documents_with_newlines: int = 0
    label_tokens_removed: int = 0
    empty_documents: int = 0

    def __len__(self) -> int:
        return len(self.texts)


def _txt_compression(path: str) -> tuple[bool, str | None]:
    low = path.lower()
    for suffix, comp in _TXT_SUFFIXES:
        if low.endswith(suffix):
            return True, comp
    return False, None



def _fields_hint(name: str, fields: list[str], option: str) -> str:
    shown = ", ".join(repr(f) for f in fields[:_FIELDS_SHOWN])
    if len(fields) > _FIELDS_SHOWN:
        shown += f", ... ({len(fields)} in all)"
    close = [f for f in fields if f.lower() == name.lower()] or difflib.get_close_matches(name, fields, 1)
    fix = f"did you mean {close[0]!r}? " if close else ""
    return f"fields present: {shown or 'none'}; {fix}name the field with {option}=NAME"


def label_name(value: Any, where: str, field_name: str) -> str:
    """The label ``value`` of the document at ``where`` as a bare fastText label name (no prefix)."""
    if isinstance(value, bool):
        name = "true" if value else "false"
    elif isinstance(value, int):
        name = str(value)
    elif isinstance(value, float) and math.isfinite(value) and value == int(value):
        name = str(int(value))
    elif isinstance(value, str):
        name = value.strip()
        if name.startswith(LABEL_PREFIX):
            name = name[len(LABEL_PREFIX):]
    else:
        raise LabelledInputError(
            f"{where}: label field {field_name!r} is {json.dumps(value, default=repr)[:80]} "
            f"({type(value).__name__}); labels must be non-empty strings or integers: fix the record "
            "or drop it")
    if not name:
        raise LabelledInputError(f"{where}: label field {field_name!r} is {value!r} (empty); give every "
                                 "document a non-empty label, or drop the unlabelled documents")
    if _SEPARATORS.search(name) or LABEL_PREFIX in name:
        raise LabelledInputError(f"{where}: label {value!r} contains whitespace or '{LABEL_PREFIX}' "
                                 "(fastText labels are single tokens); rename it, e.g. "
                                 f"{_SEPARATORS.sub('_', name.replace(LABEL_PREFIX, ''))!r}")
    return name


class _Reader:
    """Accumulates documents from all inputs into one ``LabelledData``."""

    def __init__(self, text_field: str, label_field: str, group_field: str | None,
                 columns: dict[str, str] | None = None, label_tokens: LabelTokens = "refuse") -> None:
        self.text_field, self.label_field, self.group_field = text_field, label_field, group_field
        self.label_tokens = label_tokens
        self.columns = dict(columns or {})  # column -> the option that asked for it (for messages)
        self.data = LabelledData(columns={c: [] for c in self.columns})
        self.n_missing_group = 0  # documents of JSON Lines / Parquet inputs without a group
        self.first_missing: str | None = None  # the first of those in the current file
        self.first_fields: list[str] = []  # the fields of the first record read, for did-you-mean hints

    def add(self, text: str, label: str, group: str | None, where: str) -> None:
        d = self.data
        if "\n" in text:
            d.documents_with_newlines += 1
            text = text.replace("\n", " ")
        if LABEL_PREFIX in text and self.label_tokens == "refuse":
            at = text.index(LABEL_PREFIX)
            raise LabelledInputError(
                f"{where}: the text holds {text[max(0, at - 20):at + 30]!r}: '{LABEL_PREFIX}' is fastText's reserved "
                "label spelling (it would read the token as another label), refused as the seed's procedure does; "
                "fix the text, or strip such tokens (--strip-label-tokens; Python: label_tokens='strip')")
        if LABEL_PREFIX in text:
            tokens = _SEPARATORS.split(text)
            kept = [t for t in tokens if not t.startswith(LABEL_PREFIX)]
            d.label_tokens_removed += len(tokens) - len(kept)
            text = " ".join(kept)
        if _SURROGATE.search(text):
            text = _SURROGATE.sub("\ufffd", text)
        if not text.strip():
            d.empty_documents += 1
        if group is None:
            self.n_missing_group += 1
            self.first_missing = self.first_missing or where
        d.texts.append(text)
        d.labels.append(label)
        d.groups.append(group if group is not None else "\x00doc:" + where)
        d.where.append(where)

    def record(self, rec: dict, where: str, fields: list[str]) -> None:
        self.first_fields = self.first_fields or fields
        text = rec.get(self.text_field)
        if self.text_field not in rec:
            raise LabelledInputError(f"{where}: no text field {self.text_field!r}; "
                                     + _fields_hint(self.text_field, fields, "text_field"))
        if not isinstance(text, str):
            raise LabelledInputError(f"{where}: text field {self.text_field!r} is "
                                     f"{'null' if text is None else type(text).__name__}, not a string; fix "
                                     "the record or drop it")
        if self.label_field not in rec:
            raise LabelledInputError(f"{where}: no label field {self.label_field!r}; "
                                     + _fields_hint(self.label_field, fields, "label_field"))
        if rec[self.label_field] is None:
            raise LabelledInputError(f"{where}: label field {self.label_field!r} is null; give every document "
                                     "a label, or drop the unlabelled documents")
        label = label_name(rec[self.label_field], where, self.label_field)
        group = None
        if self.group_field is not None and rec.get(self.group_field) is not None:
            value = rec[self.group_field]
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise LabelledInputError(f"{where}: group field {self.group_field!r} is {value!r} "
                                         f"({type(value).__name__}); groups must be strings or integers")
            group = str(value) or None
        for col, option in self.columns.items():
            if col not in rec:
                raise LabelledInputError(f"{where}: no column {col!r} ({option}); " + _fields_hint(col, fields, option))
            value = rec[col]
            if value is None or not isinstance(value, (str, int, bool)):
                raise LabelledInputError(f"{where}: column {col!r} ({option}) is "
                                         f"{'null' if value is None else type(value).__name__}; give every "
                                         "document a string or integer value, or drop the document")
            self.data.columns[col].append(str(value))
        self.add(text, label, group, where)

    def jsonl(self, f: Any) -> int:
        n = 0
        stream = open_stream(f)
        with io.TextIOWrapper(io.BufferedReader(stream), encoding="utf-8", errors="replace", newline="\n") as fh:
            for lineno, line in enumerate(fh, 1):
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                if not line.strip(" \t\r\n"):
                    continue
                where = f"{f.path}:{lineno}"
                try:
                    rec = json.loads(line, strict=False)
                except json.JSONDecodeError as e:
                    raise LabelledInputError(f"{where}: not valid JSON ({e.msg} at column {e.colno}); fix or "
                                             "remove the line") from None
                if not isinstance(rec, dict):
                    raise LabelledInputError(f"{where}: a JSON {type(rec).__name__}, not an object; each line "
                                             "must be one JSON object with the text and the label")
                self.record(rec, where, [k for k in rec])
                n += 1
        return n

    def parquet(self, f: Any) -> int:
        pf = open_parquet(f)
        names = list(pf.schema_arrow.names)
        for name, option in ((self.text_field, "text_field"), (self.label_field, "label_field"),
                             *self.columns.items()):
            if name not in names:
                raise LabelledInputError(f"{f.path}: no column {name!r}" + (f" ({option})" if name in self.columns
                                                                            else "") + "; "
                                         + _fields_hint(name, names, option))
        cols = [self.text_field, self.label_field]
        if self.group_field is not None and self.group_field in names and self.group_field not in cols:
            cols.append(self.group_field)
        cols += [c for c in self.columns if c not in cols]
        n = 0
        for batch in pf.iter_batches(columns=cols, batch_size=65536):
            rows = pa.Table.from_batches([batch]).to_pylist()
            for rec in rows:
                self.record(rec, f"{f.path} row {n}", names)
                n += 1
        return n

    def txt(self, path: str, compression: str | None) -> int:
        if self.group_field is not None:
            raise LabelledInputError(f"{path}: fastText .txt input has no groups, and training needs them (train, "
                                     "validation and test groups disjoint): give JSON Lines / Parquet with a group "
                                     "field, or set group_field=None to train without groups (each line its own "
                                     "group; the card records it)")
        if self.columns:
            col, option = next(iter(self.columns.items()))
            raise LabelledInputError(f"{path}: fastText .txt input has no columns, so no {col!r} ({option}); give "
                                     "JSON Lines / Parquet with that column, or leave the option out")
        n = 0
        stream = pa.input_stream(path, compression=compression)
        with io.TextIOWrapper(io.BufferedReader(stream), encoding="utf-8", errors="replace", newline="\n") as fh:
            for lineno, line in enumerate(fh, 1):
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                tokens = [t for t in _SEPARATORS.split(line) if t]
                if not tokens:
                    continue
                where = f"{path}:{lineno}"
                labels = [t for t in tokens if t.startswith(LABEL_PREFIX)]
                if len(labels) != 1:
                    what = "no label" if not labels else f"{len(labels)} labels ({', '.join(labels[:4])})"
                    fix = ("start the line with __label__NAME" if not labels else
                           "multi-label training is not supported: keep one label per line")
                    raise LabelledInputError(f"{where}: {what}; fastText format is '__label__NAME text' per "
                                             f"line: {fix}")
                label = label_name(labels[0], where, "__label__")
                text = " ".join(t for t in tokens if not t.startswith(LABEL_PREFIX))
                self.add(text, label, "\x00txt:" + where, where)
                n += 1
        return n


def _expand(inputs: list[str]) -> Iterator[tuple[str, Any]]:
    """("txt", (path, compression)) for fastText files named explicitly, ("table", InputFile) for the rest."""
    others = []
    for arg in inputs:
        p = os.fspath(arg)
        is_txt, comp = _txt_compression(p)
        if is_txt:
            if not os.path.isfile(p):
                raise MissingFileError(f"labelled input {p!r} does not exist")
            yield "txt", (os.path.abspath(p), comp)
        else:
            others.append(p)
    if others:
        try:
            files = resolve_inputs(others)
        except (FileNotFoundError, ValueError) as e:
            raise type(e)(f"{e} (labelled input: JSON Lines, Parquet, or fastText .txt files named explicitly)") \
                from None
        for f in files:
            yield "table", f


def _decoded(path: str, read: Any, *args: Any) -> int:
    """``read(*args)``, a file's read; a file whose stored data fails to decode (a truncated or corrupt gzip / zstd
    stream, a damaged Parquet file) is an error naming it: the codec's own message names no file."""
    try:
        return read(*args)
    except GpuDedupError:  # ours name the file already (MissingFileError is an OSError too)
        raise
    except (OSError, EOFError, pa.ArrowException) as e:
        detail = " ".join(str(e).split()) or type(e).__name__
        raise LabelledInputError(f"{path}: the file cannot be read whole ({detail}); it is damaged or not in the "
                                 "format its name says: restore or download it again, or leave it out") from None


def read_labelled(inputs: list[str], *, text_field: str = "text", label_field: str = "label",
                  group_field: str | None = DEFAULT_GROUP_FIELD, columns: dict[str, str] | None = None,
                  label_tokens: LabelTokens = "refuse") -> LabelledData:
    """Read and check every document of ``inputs`` (see the module docstring for the rules); ``columns``: the
    extra columns to read (column -> the option that asked for it, named in errors); ``label_tokens``: a text
    holding ``__label__`` is refused, or the tokens are stripped."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if not inputs:
        raise ConfigError("no labelled input given; pass at least one JSON Lines, Parquet or fastText .txt file")
    reader = _Reader(text_field, label_field, group_field, columns, label_tokens)
    has_table = False
    for kind, item in _expand(list(inputs)):
        if kind == "txt":
            path, comp = item
            n = _decoded(path, reader.txt, path, comp)
            reader.data.files.append(LabelledFile(path, "fasttext", os.path.getsize(path), file_sha256(path), n))
            continue
        has_table = True
        before, reader.first_missing = reader.n_missing_group, None
        n = _decoded(item.path, reader.jsonl if item.fmt == "jsonl" else reader.parquet, item)
        local = item.fs is None
        reader.data.files.append(LabelledFile(item.path, item.fmt, file_size(item),
                                              file_sha256(item.path) if local else None, n))
        if n == 0:
            logger.warning("labelled input %s holds no documents", item.path)
        elif group_field is not None and 0 < reader.n_missing_group - before < n:
            raise LabelledInputError(
                f"{reader.first_missing}: no group (field {group_field!r} "
                f"missing, null or empty) in {reader.n_missing_group - before} of the {n} documents of "
                f"{item.path}; give every document a group, or set group_field=None "
                "to make each document its own group")
    data = reader.data
    if not data.texts:
        raise LabelledInputError(f"no labelled documents in {', '.join(map(str, inputs))}; every file is empty")
    _settle_groups(data, reader, group_field, has_table)
    return data


def _settle_groups(data: LabelledData, reader: _Reader, group_field: str | None, has_table: bool) -> None:
    table_docs = sum(f.documents for f in data.files if f.fmt != "fasttext")
    table_missing = reader.n_missing_group
    if group_field is None or not has_table:
        data.groups_from = "each document is its own group" + (" (group_field=None)" if has_table else
                                                               " (fastText .txt input)")
    elif table_missing == 0:
        data.groups_from = f"field {group_field!r}"
    elif table_missing == table_docs:
        raise LabelledInputError(f"no document has the group field {group_field!r} (e.g. {data.where[0]}), and "
                                 "training needs groups (train, validation and test groups disjoint, so that "
                                 "near-copies of one source cannot sit on both sides); "
                                 + _fields_hint(group_field, reader.first_fields, "group_field")
                                 + ", or set group_field=None to train without groups (each document its own "
                                 "group; the card records it)")
    else:  # some files have the field and others lack it entirely
        first = next(w for w, g in zip(data.where, data.groups) if g.startswith("\x00doc:"))
        raise LabelledInputError(
            f"{first}: no group (field {group_field!r}) while other inputs have one; give "
            "every document a group, or set group_field=None to make each document its own group")
    if data.documents_with_newlines:
        logger.info("%d documents had line breaks, replaced by spaces (fastText trains on one line per document)",
                    data.documents_with_newlines)
    if data.label_tokens_removed:
        logger.warning("removed %d '%s...' tokens from document texts (fastText would read them as labels)",
                       data.label_tokens_removed, LABEL_PREFIX)


BUCKET_MAX = 2_000_000  # fastText's default: the most rows bucket_from_data chooses
BUCKET_MIN = 1 << 10


def choose_bucket(texts: list[str], cfg: Any) -> tuple[int, dict[str, Any]]:
    """(bucket, the card's ``bucket_from_data`` entry) for the training side's ``texts`` (``bucket_from_data``),
    said in the log with the size of fastText's input matrix."""
    bucket, distinct = bucket_from_data(texts, cfg)
    vocab = len({w for t in texts for w in t.split()})
    logger.info("bucket %d from the data (%d distinct word/char n-grams on the training side); the input matrix is "
                "about (%d words + %d) x dim %d x 4 bytes = %.1f MB (set bucket / --bucket to choose, --quantize to "
                "shrink it)", bucket, distinct, vocab, bucket, cfg.dim, (vocab + bucket) * cfg.dim * 4 / 1e6)
    return bucket, {"distinct_ngrams": distinct, "rule": "the next power of two >= twice the distinct word and char "
                    f"n-grams of the training side, within [{BUCKET_MIN}, {BUCKET_MAX}] (labelled.bucket_from_data)"}


def bucket_from_data(texts: list[str], cfg: Any) -> tuple[int, int]:
    """(bucket, distinct hashed n-grams): the rows for the word n-grams (2..word_ngrams, of whitespace tokens, as
    fastText splits) and char n-grams (minn..maxn of "<word>") of ``texts``: the next power of two >= twice the
    distinct ones (a load of at most 1/2: most n-grams get a row of their own), within BUCKET_MIN..BUCKET_MAX;
    0 when the config hashes no n-gram. Counting stops at BUCKET_MAX / 2 distinct (then BUCKET_MAX)."""
    if cfg.word_ngrams <= 1 and cfg.maxn == 0:
        return 0, 0
    cap = BUCKET_MAX // 2
    seen: set[int] = set()
    words: set[str] = set()
    for t in texts:
        toks = t.split()
        if cfg.maxn:
            words.update(toks)
        for n in range(2, cfg.word_ngrams + 1):
            seen.update(hash(tuple(toks[i:i + n])) for i in range(len(toks) - n + 1))
        if len(seen) > cap:
            return BUCKET_MAX, len(seen)
    for w in words:
        u = f"<{w}>"
        for n in range(max(cfg.minn, 1), cfg.maxn + 1):
            seen.update(hash(u[i:i + n]) for i in range(len(u) - n + 1))
        if len(seen) > cap:
            return BUCKET_MAX, len(seen)
    rows = 1 << max(0, (2 * len(seen) - 1).bit_length())
    return min(BUCKET_MAX, max(BUCKET_MIN, rows)), len(seen)
