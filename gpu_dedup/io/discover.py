"""Input discovery: the files a run reads, and the names they go by.

``resolve_inputs`` turns files, directories (searched recursively; names starting with "." are
skipped, which also hides the package's own temporary files) and glob patterns into a sorted list of
``InputFile``. Supported: ``.jsonl``/``.json`` (JSON Lines, optionally ``.gz`` / ``.zst``) and
``.parquet``. ``table_input`` wraps an in-memory ``pyarrow.Table``, pandas DataFrame or Hugging Face
``datasets.Dataset``; ``source_files`` takes any source the API accepts. ``InputError``: bad input data.

Never the package's own outputs, by one rule: a directory walk (a directory input, a directory a glob
matches) skips every directory below it that holds the output of any gpu-dedup command, with everything
under it, and logs each one (INFO). A directory is output when it has all the files of one line of
``OUTPUT_SIGNATURES`` (the owned-outputs record every command that owns OUT writes first; a dedup run,
a filter run, paragraph dedup, SemDeDup, screen, an embedding cache) or a ``manifest.json`` of format
``gpu_dedup-workdir`` / ``gpu_dedup-index``; a file is when it is a JSON document of the tool's
(``{"format": "gpu_dedup-...", ...}``: a classifier's model card ``model.bin.json``). So does a glob, for
the matches under such a directory (or such a file) that a wildcard reached (``crawl/**/*.jsonl`` skips
``crawl/out/deduplicated/a.jsonl``; ``runs/*/deduplicated/*.jsonl``, which names the folder inside, reads
it). A directory input that is itself one of those is an error. Files named explicitly are always read.
A new command's output is one more line of ``OUTPUT_SIGNATURES``.

Remote inputs: a URL (``s3://``, ``gs://``, ``hf://datasets/...``, ``memory://``, ``file://``, ...) is
listed through fsspec with the same rules (``remote``); its ``InputFile`` carries the fsspec file system
(``fs``) and its URL as ``path``. ``relpath`` is relative to the common folder of all inputs; remote files
count as ``/<protocol>/<path>`` for that, so inputs on several file systems keep distinct names.
"""
from __future__ import annotations

import glob
import hashlib
import logging
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import pyarrow as pa

from ..constants import INDEX_FORMAT, WORKDIR_FORMAT
from ..errors import ConfigError, DataError, DependencyError, MissingFileError, UsageError
from .check import FileState, share_scope
from .remote import is_url, protocol_of, url_filesystem, url_of

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)

TABLE_PATH = "<table>"
TABLE_OUTPUT_NAME = "deduplicated.parquet"
# (suffix, fmt, compression); longest suffixes first so ".jsonl.gz" wins over ".gz".
_SUFFIXES: tuple[tuple[str, str, str | None], ...] = (
    (".jsonl.gz", "jsonl", "gzip"), (".json.gz", "jsonl", "gzip"),
    (".jsonl.zst", "jsonl", "zstd"), (".json.zst", "jsonl", "zstd"),
    (".jsonl", "jsonl", None), (".json", "jsonl", None), (".parquet", "parquet", None),
)
SUPPORTED_SUFFIXES = tuple(s for s, _, _ in _SUFFIXES)
# What marks a directory of the package's own outputs: (files all present, what the directory holds), one line
# per program, the most specific first (the first match names the directory in logs and errors).
OUTPUT_SIGNATURES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("decisions.parquet", "run.json"), "a gpu-dedup run (decisions.parquet + run.json)"),
    (("scores.parquet", "run.json"), "a gpu-dedup filter run (scores.parquet + run.json)"),
    (("paragraph_dedup.json",), "gpu-dedup paragraph dedup output (paragraph_dedup.json)"),
    (("semantic.json",), "gpu-dedup SemDeDup output (semantic.json)"),
    (("screen.json",), "a gpu-dedup screen run (screen.json)"),
    (("substring_dedup.json",), "gpu-dedup substring dedup output (substring_dedup.json)"),
    (("embeddings.npy", "text_hashes.npy", "meta.json"), "a gpu-dedup embedding cache (embeddings.npy + meta.json)"),
    ((".gpu-dedup-outputs.json",), "gpu-dedup outputs (.gpu-dedup-outputs.json: the files a command wrote)"),
)
RUN_MARKERS = OUTPUT_SIGNATURES[0][0]
MANIFEST_FORMATS = {WORKDIR_FORMAT: "work dir", INDEX_FORMAT: "index"}
_MANIFEST_HEAD = 1 << 16
_FORMAT_KEY = re.compile(rb'"format"\s*:\s*"([^"\\]*)"')
# A JSON file the tool wrote (a model card): an object whose first key is "format", of value "gpu_dedup-..."
_TOOL_JSON = re.compile(rb'\A\s*\{\s*"format"\s*:\s*"(gpu_dedup-[^"\\]*)"')
_TOOL_JSON_HEAD = 256


class InputError(DataError):
    """Bad input data; the message names the file and line/row and the offending value."""


@dataclass(frozen=True)
class InputFile:
    """One input. ``fs``: the fsspec file system of a remote input (``path`` is then its URL), else None.
    ``state``: what the reads of a run found about it (``check.FileState``), shared by every pass over this
    object (not compared, not shown)."""

    path: str
    relpath: str
    fmt: Literal["jsonl", "parquet", "table"]
    compression: Literal[None, "gzip", "zstd"]
    table: pa.Table | None = field(default=None, compare=False, repr=False)
    fs: Any = field(default=None, compare=False, repr=False)
    state: FileState = field(default_factory=FileState, compare=False, repr=False)


def _classify(path: str) -> tuple[str, str | None] | None:
    low = path.lower()
    for suffix, fmt, comp in _SUFFIXES:
        if low.endswith(suffix):
            return fmt, comp
    return None


def gpu_dedup_output(files: set[str] | Callable[[str], bool], read_head: Callable[[str], bytes]) -> str | None:
    """What gpu-dedup output a directory holds, from its file names (a set, or a test ``exists(name)``) and
    ``read_head(name)`` (the first bytes of a file): a phrase for the log, or None for ordinary data."""
    has = files.__contains__ if isinstance(files, set) else files
    for markers, kind in OUTPUT_SIGNATURES:
        if all(has(m) for m in markers):
            return kind
    if has("manifest.json"):
        try:
            m = _FORMAT_KEY.search(read_head("manifest.json"))
        except OSError:
            return None
        kind = MANIFEST_FORMATS.get(m.group(1).decode("utf-8", "replace")) if m else None
        if kind is not None:
            return f"a gpu-dedup {kind} (manifest.json of format {m.group(1).decode()!r})"
    return None


def gpu_dedup_file(name: str, read_head: Callable[[str], bytes]) -> str | None:
    """What gpu-dedup file ``name`` is (a ``.json`` one whose head is ``{"format": "gpu_dedup-...``, e.g. a
    model card), from ``read_head(name)``: a phrase for the log, or None for ordinary data."""
    if not name.lower().endswith(".json"):
        return None
    try:
        m = _TOOL_JSON.match(read_head(name)[:_TOOL_JSON_HEAD])
    except OSError:
        return None
    return f"a gpu-dedup file of format {m.group(1).decode('utf-8', 'replace')!r}" if m else None


class _Walk:
    """One input's discovery on one file system (``fs`` None: the local one); ``skipped``: (directory,
    what it holds) of the directories left out, shared by all inputs of a call."""

    def __init__(self, fs: Any, skipped: list[tuple[str, str]]) -> None:
        self.fs, self.skipped = fs, skipped
        self._kinds: dict[str, str | None] = {}
        self._skip_seen: set[tuple[str, str]] = set()

    def _head(self, d: str, name: str, size: int = _MANIFEST_HEAD) -> bytes:
        p = self.join(d, name)
        if self.fs is None:
            with open(p, "rb") as fh:
                return fh.read(size)
        with self.fs.open(p, "rb") as fh:
            return fh.read(size)

    def join(self, d: str, name: str) -> str:
        return os.path.join(d, name) if self.fs is None else posixpath.join(d, name)

    def name(self, d: str) -> str:
        return d if self.fs is None else url_of(self.fs, d)

    def kind(self, d: str, names: set[str] | None = None) -> str | None:
        """What gpu-dedup output directory ``d`` holds (``names``: its files, when already listed)."""
        if d not in self._kinds:
            if names is not None:
                has: Any = names
            elif self.fs is None:
                has = lambda n: os.path.isfile(os.path.join(d, n))  # noqa: E731
            else:
                has = lambda n: self.fs.isfile(posixpath.join(d, n))  # noqa: E731
            self._kinds[d] = gpu_dedup_output(has, lambda n: self._head(d, n))
        return self._kinds[d]

    def skip(self, d: str, kind: str) -> None:
        self.skipped.append((self.name(d), kind))

    def walk(self, top: str, top_is_input: bool) -> list[str]:
        """Supported files below ``top``. ``top`` itself holding gpu-dedup output: an error when it is an
        input (``top_is_input``), else skipped like the directories below it."""
        found: list[str] = []
        for root, dirs, names in self._listing(top):
            kind = self.kind(root, set(names))
            if kind is not None:
                dirs[:] = []
                if root == top and top_is_input:
                    kept = {"a gpu-dedup run": "deduplicated", "a gpu-dedup filter run": "filtered"}
                    sub = next((v for k, v in kept.items() if kind.startswith(k + " ")), None)
                    hint = (f"; to read its kept records pass {self.name(self.join(root, sub))!r}"
                            if sub else "")
                    raise ConfigError(f"input directory {self.name(top)!r} holds {kind}, not input data{hint}")
                self.skip(root, kind)
                continue
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(self.join(root, n) for n in names if not n.startswith(".") and _classify(n)
                         and not self.tool_file(root, n))
        return found

    def tool_file(self, d: str, name: str) -> bool:
        """Is file ``name`` of directory ``d`` one the tool wrote (``gpu_dedup_file``)? Recorded in ``skipped``."""
        kind = gpu_dedup_file(name, lambda n: self._head(d, n, _TOOL_JSON_HEAD))
        if kind is not None:
            self.skip(self.join(d, name), kind)
        return kind is not None

    def _listing(self, top: str):
        """(directory, subdirectory names, file names), top-down; pruning the names prunes the walk."""
        if self.fs is None:
            yield from os.walk(top)
            return
        stack = [top]
        while stack:
            d = stack.pop()
            dirs, names = [], []
            for e in self.fs.ls(d, detail=True):
                n = e["name"].rstrip("/")
                if n == d.rstrip("/"):
                    continue  # some stores list the directory itself
                (dirs if e.get("type") == "directory" else names).append(posixpath.basename(n))
            yield d, dirs, names
            stack.extend(posixpath.join(d, s) for s in reversed(dirs))

    def under_output(self, base: str, path: str, named: set[str]) -> bool:
        """Is glob match ``path`` inside a directory below ``base`` (not ``base`` itself) that holds gpu-dedup
        output, where the pattern went on with a wildcard rather than a name in ``named`` (the pattern's
        literal components: ``runs/*/deduplicated/*.jsonl`` reads a run's output on purpose)? Such a
        directory is recorded in ``skipped`` once."""
        mod, sep = (os.path, os.sep) if self.fs is None else (posixpath, "/")
        d = mod.dirname(path)
        chain = []
        while d and len(d) > len(base) and d != mod.dirname(d):
            chain.append(d)
            d = mod.dirname(d)
        for d in reversed(chain):
            kind = self.kind(d)
            if kind is not None and path[len(d):].lstrip(sep).split(sep)[0] not in named:
                if (d, kind) not in self._skip_seen:
                    self._skip_seen.add((d, kind))
                    self.skip(d, kind)
                return True
        return False


def _basename(path: str, sep: str) -> str:
    return path.rsplit(sep, 1)[-1]


def _dirname(path: str, sep: str) -> str:
    return path.rsplit(sep, 1)[0] if sep in path else ""


def _glob_base(pattern: str, sep: str) -> str:
    """The leading components of ``pattern`` without wildcards."""
    parts = pattern.split(sep)
    keep = []
    for p in parts:
        if glob.has_magic(p):
            break
        keep.append(p)
    return sep.join(keep)


def _expand_one(arg: str, skipped: list[tuple[str, str]]) -> list[tuple[Any, str]]:
    """(file system or None, path) of the supported files of one input argument."""
    if is_url(arg):
        return _expand_remote(arg, skipped)
    walk = _Walk(None, skipped)
    if os.path.isdir(arg):
        files = walk.walk(arg, top_is_input=True)
        if not files:
            raise ConfigError(f"input directory {arg!r} contains no supported files "
                              f"({', '.join(SUPPORTED_SUFFIXES)}){_skipped_note(skipped)}; point to the data files "
                              f"or their folder")
        return [(None, p) for p in files]
    if os.path.isfile(arg):
        if _classify(arg) is None:
            raise ConfigError(f"input file {arg!r} has an unsupported extension; supported: "
                              f"{', '.join(SUPPORTED_SUFFIXES)} (rename it or convert it)")
        return [(None, arg)]
    if glob.has_magic(arg):
        matches = sorted(glob.glob(arg, recursive=True))
        if not matches:
            raise MissingFileError(f"input pattern {arg!r} matched nothing; check the path and quoting")
        return [(None, p) for p in _glob_files(arg, matches, walk, os.path.isdir, os.sep)]
    raise MissingFileError(f"input {arg!r} does not exist (not a file, directory or glob match)")


def _glob_files(arg: str, matches: list[str], walk: _Walk, isdir: Callable[[str], bool], sep: str) -> list[str]:
    """The supported files of a glob's matches: directories walked, files kept, except the matches under
    a directory of gpu-dedup output that a wildcard reached (``Walk.under_output``)."""
    base = _glob_base(arg, sep)
    named = {p for p in arg.split(sep) if p and not glob.has_magic(p)}
    files: list[str] = []
    for m in matches:
        if walk.under_output(base, m, named):
            continue
        if isdir(m):
            files.extend(walk.walk(m, top_is_input=False))
        elif _classify(m) and (_basename(m, sep) in named or not walk.tool_file(_dirname(m, sep), _basename(m, sep))):
            files.append(m)
    if not files:
        raise ConfigError(f"input pattern {arg!r} matched {len(matches)} path(s) but no supported files "
                          f"({', '.join(SUPPORTED_SUFFIXES)}){_skipped_note(walk.skipped)}")
    return files


def _expand_remote(arg: str, skipped: list[tuple[str, str]]) -> list[tuple[Any, str]]:
    fs, path = url_filesystem(arg)
    walk = _Walk(fs, skipped)
    if glob.has_magic(path):
        info = fs.glob(path, detail=True)
        if not info:
            raise MissingFileError(f"input pattern {arg!r} matched nothing; check the URL and quoting")
        matches = sorted(info)
        files = _glob_files(path, matches, walk, lambda m: info[m].get("type") == "directory", "/")
        return [(fs, p) for p in files]
    if fs.isdir(path):
        files = walk.walk(path, top_is_input=True)
        if not files:
            raise ConfigError(f"input directory {arg!r} contains no supported files "
                              f"({', '.join(SUPPORTED_SUFFIXES)}){_skipped_note(skipped)}")
        return [(fs, p) for p in files]
    if fs.isfile(path):
        if _classify(path) is None:
            raise ConfigError(f"input file {arg!r} has an unsupported extension; supported: "
                              f"{', '.join(SUPPORTED_SUFFIXES)}")
        return [(fs, path)]
    raise MissingFileError(f"input {arg!r} does not exist (not a file, directory or glob match on "
                           f"{protocol_of(arg)}://)")


def _skipped_note(skipped: list[tuple[str, str]]) -> str:
    if not skipped:
        return ""
    return " (left out, as gpu-dedup output: " + ", ".join(f"{d!r}" for d, _ in skipped[:5]) + ")"


def _name_key(path: str, fs: Any) -> str:
    """Where a file sits for its relpath: a local absolute path, or /<protocol>/<path> of a remote one."""
    if fs is None:
        return path.replace(os.sep, "/")
    return "/" + protocol_of(path) + "/" + fs._strip_protocol(path).lstrip("/")


def resolve_inputs(inputs: Sequence[str | os.PathLike]) -> list[InputFile]:
    """Expand files / directories (recursive) / glob patterns / URLs into a sorted, de-duplicated list.

    The discovery rules (hidden names, the package's own outputs left out, remote inputs) are in the module
    docstring; each directory left out is logged (INFO).

    Args:
        inputs: one path, glob or URL, or a sequence of them. A directory is searched recursively; a file
            named explicitly is always read.

    Returns:
        The ``InputFile`` of every supported file, sorted by path, each once. ``relpath`` is relative to the
        common parent directory of all files (a single file: its basename), with "/" separators; it names
        the file in ids, errors and the output layout.

    Raises:
        ConfigError: no inputs; a directory with no supported files, or one that holds gpu-dedup output;
            a file with an unsupported extension; a glob whose matches hold no supported file; a URL of an
            unknown protocol.
        MissingFileError: an input that does not exist, or a glob that matches nothing.
        DependencyError: a URL whose fsspec package (extra ``remote``, ``s3``, ``gcs``, ``hf``) is missing.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if not inputs:
        raise ConfigError("no inputs given; pass at least one file, directory or glob pattern")
    found: dict[str, Any] = {}
    skipped: list[tuple[str, str]] = []
    for arg in inputs:
        for fs, p in _expand_one(os.fspath(arg), skipped):
            found.setdefault(os.path.abspath(p) if fs is None else url_of(fs, p), fs)
    for d, kind in dict(skipped).items():
        logger.info("input discovery: left out %s, which holds %s (name its files explicitly to read them)", d, kind)
    ordered = sorted(found)
    result = []
    if all(fs is None for fs in found.values()):
        root = os.path.commonpath([os.path.dirname(p) for p in ordered])
        rels = [os.path.relpath(p, root).replace(os.sep, "/") for p in ordered]
    else:
        keys = [_name_key(p, found[p]) for p in ordered]
        root = posixpath.commonpath([posixpath.dirname(k) for k in keys])
        rels = [posixpath.relpath(k, root) for k in keys]
    for p, rel in zip(ordered, rels):
        fmt, comp = _classify(p)  # type: ignore[misc]
        result.append(InputFile(path=p, relpath=rel, fmt=fmt, compression=comp, fs=found[p]))  # type: ignore[arg-type]
    return share_scope(result)


def _is_dataframe(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "pandas" and type(obj).__name__ == "DataFrame"


def _is_hf_dataset(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "datasets"


def dataset_table(ds: Any) -> pa.Table:
    """The Arrow table of a Hugging Face ``datasets.Dataset``: no Python objects are built.

    Args:
        ds: a ``datasets.Dataset`` (one split).

    Returns:
        A ``pyarrow.Table``, rows in the dataset's order (its indices mapping applied, after select /
        shuffle / filter), columns as stored. Without an indices mapping it is the dataset's own table
        (zero-copy).

    Raises:
        DependencyError: the ``datasets`` package is not installed (extra ``datasets``).
        UsageError: a ``DatasetDict`` (pass one split), an ``IterableDataset`` (load it without
            ``streaming=True``, or write it to files), or another type.
    """
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - an object of the package implies the package
        raise DependencyError('a datasets.Dataset source needs the datasets package: pip install "gpu-dedup[datasets]"'
                              ) from e
    if isinstance(ds, datasets.DatasetDict):
        raise UsageError(f"got a DatasetDict with splits {sorted(ds)}; pass one split, e.g. ds[{sorted(ds)[0]!r}]")
    if isinstance(ds, getattr(datasets, "IterableDataset", ())):
        raise UsageError("an IterableDataset cannot be read as a table; load it without streaming=True, or write "
                         "it to Parquet / JSON Lines and pass the files")
    if not isinstance(ds, datasets.Dataset):
        raise UsageError(f"expected a datasets.Dataset, got {type(ds).__name__}")
    if getattr(ds, "_indices", None) is None:
        return ds.data.table  # zero-copy: the table the dataset is
    table = ds.with_format("arrow")[:]  # the indices mapping applied by Arrow's take
    return table if isinstance(table, pa.Table) else pa.Table.from_batches([table])


def table_input(obj: Any) -> list[InputFile]:
    """Wrap an in-memory table as one input.

    Args:
        obj: a ``pyarrow.Table`` / ``RecordBatch``, a pandas DataFrame (converted without its index) or a
            ``datasets.Dataset`` (its Arrow table, ``dataset_table``).

    Returns:
        A list of one ``InputFile`` of fmt "table", path and relpath ``TABLE_PATH``, holding the table.

    Raises:
        UsageError: ``obj`` is none of these types (or a ``DatasetDict`` / ``IterableDataset``).
        DependencyError: a ``datasets.Dataset`` without the ``datasets`` package.
    """
    if isinstance(obj, pa.RecordBatch):
        obj = pa.Table.from_batches([obj])
    elif not isinstance(obj, pa.Table):
        if _is_dataframe(obj):
            obj = pa.Table.from_pandas(obj, preserve_index=False)
        elif _is_hf_dataset(obj):
            obj = dataset_table(obj)
        else:
            raise UsageError(f"table_input needs a pyarrow.Table, a pandas.DataFrame or a datasets.Dataset, got "
                             f"{type(obj).__name__}")
    return share_scope([InputFile(path=TABLE_PATH, relpath=TABLE_PATH, fmt="table", compression=None, table=obj)])


def source_files(source) -> list[InputFile]:
    """The InputFiles of any source the API accepts.

    Args:
        source: a path or URL, a list (or tuple) of paths / URLs / globs / directories, a pyarrow Table or
            RecordBatch, a pandas DataFrame or a Hugging Face ``datasets.Dataset``.

    Returns:
        A list of ``InputFile``: ``resolve_inputs`` of the paths, or ``table_input`` of the table.

    Raises:
        UsageError: ``source`` is of another type.
        ConfigError: see ``resolve_inputs`` (no inputs, no supported files, ...).
        MissingFileError: a path that does not exist, or a glob that matches nothing.
        DependencyError: a URL or a dataset whose optional package is missing.
    """
    if isinstance(source, (pa.Table, pa.RecordBatch)) or _is_dataframe(source) or _is_hf_dataset(source):
        return table_input(source)
    if isinstance(source, (str, os.PathLike)):
        return resolve_inputs([source])
    if isinstance(source, (list, tuple)):
        return resolve_inputs(list(source))
    raise UsageError(f"source must be a path or URL, a list of paths/URLs/globs, a pyarrow Table, a pandas DataFrame "
                     f"or a datasets.Dataset; got {type(source).__name__}")


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a local file's bytes, read in 4 MiB blocks: what run files record to identify a model or
    an input (work-dir pieces, model cards).

    Args:
        path: a local file.

    Returns:
        The digest as 64 lower-case hex characters.

    Raises:
        OSError: the file cannot be opened or read (the file system's error, not wrapped).
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()
