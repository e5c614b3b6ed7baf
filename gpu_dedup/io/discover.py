"""Input discovery: the files a run reads, and the names they go by.

``resolve_inputs`` turns files, directories (searched recursively; names starting with "." are
skipped, which also hides the package's own temporary files) and glob patterns into a sorted list of
``InputFile``. Supported: ``.jsonl``/``.json`` (JSON Lines, optionally ``.gz`` / ``.zst``) and
``.parquet``. ``table_input`` wraps an in-memory ``pyarrow.Table`` or pandas DataFrame; ``source_files``
takes any source the API accepts. ``InputError``: bad input data.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import pyarrow as pa

TABLE_PATH = "<table>"
TABLE_OUTPUT_NAME = "deduplicated.parquet"
# (suffix, fmt, compression); longest suffixes first so ".jsonl.gz" wins over ".gz".
_SUFFIXES: tuple[tuple[str, str, str | None], ...] = (
    (".jsonl.gz", "jsonl", "gzip"), (".json.gz", "jsonl", "gzip"),
    (".jsonl.zst", "jsonl", "zstd"), (".json.zst", "jsonl", "zstd"),
    (".jsonl", "jsonl", None), (".json", "jsonl", None), (".parquet", "parquet", None),
)
SUPPORTED_SUFFIXES = tuple(s for s, _, _ in _SUFFIXES)


class InputError(ValueError):
    """Bad input data; the message names the file and line/row and the offending value."""


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
