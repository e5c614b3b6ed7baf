"""Input discovery, bounded-memory batch reading, and atomic writing of the kept rows.

One step per module; each imports only the ones listed above it (``text`` none of them, ``gpu`` only ``text``);
no module here imports a program (lexical, filters, paragraph, semantic, screen, substring, pipeline):

    remote     URLs through fsspec (optional extras): ``is_url``, ``open_stream``, ``open_parquet``,
               ``file_size`` (local or remote input), ``REMOTE_EXTRAS``
    check      whether a file's stored data decodes whole (``check_stream``, ``check_parquet``,
               ``StreamFailure``) and what the reads of a run found about each file (``FileState``,
               ``ReadScope``; why, in its docstring)
    discover   the input files: ``resolve_inputs``, ``table_input``, ``source_files``, ``dataset_table``,
               ``InputFile``, ``InputError``, ``file_sha256`` (the discovery rules, and what is never read, in
               its docstring)
    batch      ``Batch``, ``ReadReport`` (``read_summary``: its lines for a command's summary) and what
               every file reader shares: the spec (``make_spec``), the chunks a reader gives, the base reader,
               its error policy and the damaged-file rule, ``generated_ids``, and the cutting of chunks into
               batches
    blocks     JSON Lines bytes: a stream read as blocks cut at newlines, and the lines of a block
    jsonl      the JSON Lines reader
    arrow      the reader of Parquet files and in-memory tables; ``is_stringish``, ``as_utf8``
    parquet    parallel Parquet decoding: the row-group pool of one read
    read       ``open_readers``, ``iter_batches``, ``iter_rows`` (the reading rules: ids, bad rows, invalid
               UTF-8, keep column, are in its docstring)
    ids        ``check_unique_ids`` (duplicated ids with their positions), ``locate_rows``
    write      ``atomic_path``, ``write_parquet_atomic``, ``write_json_atomic`` (``read_json_record``),
               ``parquet_codec``,
               ``output_path`` and ``write_kept`` (the output layout is in its docstring)
    text       Arrow text as flat arrays: ``arrow_text_buffers``; ``invalid_utf8_rows`` (CPU or GPU)
    gpu        Parquet text read into device memory by cudf: ``resolve_reader``, ``DeviceText``, ...

The public names of all of them are importable from here (``from gpu_dedup import io; io.iter_batches``).
The package logs as ``gpu_dedup.io`` (``gpu``: ``gpu_dedup.io.gpu``).
"""
from __future__ import annotations

from .arrow import as_utf8, is_stringish
from .batch import Batch, ReadReport, generated_ids, make_spec, read_summary
from .check import StreamFailure, check_parquet, check_stream
from .discover import (
    SUPPORTED_SUFFIXES,
    TABLE_OUTPUT_NAME,
    TABLE_PATH,
    InputError,
    InputFile,
    dataset_table,
    file_sha256,
    resolve_inputs,
    source_files,
    table_input,
)
from .gpu import READERS, CudfTextReader, DeviceText, Reader, cudf_status, device_text, resolve_reader, string_buffers
from .ids import check_unique_ids, locate_rows
from .read import iter_batches, iter_rows, open_readers
from .remote import REMOTE_EXTRAS, file_size, is_url, open_parquet, open_stream
from .text import arrow_text_buffers, invalid_utf8_rows
from .write import (atomic_path, output_path, parquet_codec, read_json_record, write_json_atomic, write_kept,
                    write_parquet_atomic)

__all__ = [
    # discover
    "SUPPORTED_SUFFIXES", "TABLE_OUTPUT_NAME", "TABLE_PATH", "InputError", "InputFile", "dataset_table",
    "file_sha256", "resolve_inputs", "source_files", "table_input",
    # remote
    "REMOTE_EXTRAS", "file_size", "is_url", "open_parquet", "open_stream",
    # check
    "StreamFailure", "check_parquet", "check_stream",
    # batch
    "Batch", "ReadReport", "generated_ids", "make_spec", "read_summary",
    # arrow
    "as_utf8", "is_stringish",
    # read, ids
    "iter_batches", "iter_rows", "open_readers", "check_unique_ids", "locate_rows",
    # write
    "atomic_path", "output_path", "parquet_codec", "read_json_record", "write_json_atomic", "write_kept",
    "write_parquet_atomic",
    # text
    "arrow_text_buffers", "invalid_utf8_rows",
    # gpu
    "READERS", "CudfTextReader", "DeviceText", "Reader", "cudf_status", "device_text", "resolve_reader",
    "string_buffers",
]
