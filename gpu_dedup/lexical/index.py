"""Dedup index: the kept documents of a run, saved so later data can be deduplicated against them
without recomputing the old corpus.

Layout of an index directory (format "gpu_dedup-index", version ``INDEX_VERSION``):
  documents.parquet  id (string), exact_lo/exact_hi (uint64), short (bool), band_keys (list<uint64>, one
                     per band), shingles (list<uint64>, sorted distinct shingle hashes; only with
                     verification, null for short documents)
  manifest.json      format, version, generation (1 + parent's), contract + fingerprint, documents,
                     has_shingles, parent fingerprint and generation, created; a scoped index's ``scope``
                     (below) and version ``SCOPED_VERSION``. Written last: an index
                     without a manifest is incomplete and refused; one that is not an index manifest
                     (invalid JSON, not an object, another format, keys missing) is an error naming it.
  gpu-dedup.lock     held while a run writes the index (gpu_dedup/runtime/outputs.py): a second writer fails at once.
``check_index_target`` refuses to save an index into a directory holding anything but an index.

A scoped run (``ClusterConfig.scope_field``) saves its kept documents with the hashes and band keys it compared:
each row's scope salt mixed in (``signatures.scope_salts``), so a later run of the same scope field matches an
indexed document only within its own scope, as if each scope kept an index of its own (one index for all
snapshots, each deduplicated incrementally against its own past). Its manifest says ``scope``: the field and the
indexed documents per scope value; its version is ``SCOPED_VERSION``, which a gpu_dedup that knows no scopes
refuses (it would compare salted keys as global ones). ``index_manifest`` refuses a scoped run against a global
index, a global run against a scoped one, and another scope field: their keys would never meet.
Everything a new run compares against these arrays must match the contract, so ``load_index`` refuses
an index made with another normalization, shingling, K, seed, hash or banding. ``write_index`` saves a run's
kept documents (after the index it ran against, when given) as the next generation.
"""
from __future__ import annotations

import logging
import os
import re
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import io
from ..config import RunConfig
from ..constants import INDEX_FORMAT
from ..contract import check_contract, contract, contract_fingerprint
from ..errors import ConfigError, DataError, MissingFileError
from ..runtime.device import repeat_index, to_device, to_host
from ..runtime.outputs import LOCK, LOCK_INFO, ManifestError, check_directory, read_manifest, require_keys
from ..runtime.passes import prefetched
from ..runtime.run import created
from ..text.normalize import normalize_text
from .signatures import Documents
from .verify import ShingleSets, shingle_sets

logger = logging.getLogger(__name__)

FORMAT = INDEX_FORMAT
INDEX_VERSION = 1
SCOPED_VERSION = 2  # a scoped index (its keys salted per scope): refused by a reader of version 1 only
VERSIONS = (INDEX_VERSION, SCOPED_VERSION)


@dataclass
class Index:
    """Indexed documents: ids (pa string array, I), exact (I, 2) uint64, short (I,) bool,
    band_keys (I, B) uint64; shingles are read on demand for the rows that become candidates."""

    path: str
    manifest: dict[str, Any]
    ids: pa.Array
    exact: np.ndarray
    short: np.ndarray
    band_keys: np.ndarray

    def __len__(self) -> int:
        return int(self.exact.shape[0])

    def check_new_ids(self, ids: pa.Array, files, file_rows, **reader: Any) -> None:
        """Raise ``io.InputError`` when an id of the run (``ids``, row order) is already an indexed document's:
        a decision names a document by its id, so one id cannot mean an old and a new document. Names up to
        5 reused ids with where they are in the input (read again only then) and the index's file. ``reader``:
        id_field, text_field and on_error of the run (to find the positions, as ``io.check_unique_ids``)."""
        ids = ids.cast(pa.string())
        reused = np.asarray(pa.compute.is_in(ids, value_set=self.ids).to_numpy(zero_copy_only=False), bool)
        if not reused.any():
            return
        rows = np.flatnonzero(reused)
        shown = rows[:5]
        where: dict[int, str] = {}
        try:
            where = {r: p.where for r, p in io.locate_rows(files, shown, file_rows, **reader).items()}
        except Exception as e:  # noqa: BLE001 - the reuse is the error to raise; positions are a help
            logger.debug("could not locate the reused ids in the inputs: %r", e)
        names = ", ".join(f"{ids[int(r)].as_py()!r} ({where.get(int(r), f'row {int(r)}')})" for r in shown)
        more = f" and {len(rows) - len(shown)} more" if len(rows) > len(shown) else ""
        raise io.InputError(f"{len(rows)} id(s) of the input are already ids of indexed documents in "
                            f"{os.path.join(self.path, 'documents.parquet')}: {names}{more}; an id names one "
                            "document, so give the new documents ids of their own (--id-field), or run without "
                            "--against")

    def shingle_sets(self, rows: np.ndarray):
        """ShingleSets (host arrays) for index rows ``rows`` (int64, sorted)."""
        if not self.manifest["has_shingles"]:
            raise DataError(f"index {self.path!r} holds no shingle sets (it was saved by a run without "
                            "verification); rerun with --policy components --no-verify or rebuild the index")
        col = pq.read_table(os.path.join(self.path, "documents.parquet"), columns=["shingles"])["shingles"]
        lists = col.combine_chunks().take(pa.array(rows, pa.int64()))
        values = np.asarray(lists.flatten().to_numpy(zero_copy_only=False), np.uint64)
        sizes = np.asarray(pa.compute.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        offsets = np.zeros(sizes.shape[0], np.int64)
        if sizes.shape[0] > 1:
            np.cumsum(sizes[:-1], out=offsets[1:])
        return ShingleSets(values, offsets, sizes)


_KEYS = ("format", "version", "generation", "contract", "documents", "has_shingles")
_INDEX_FILES = {"documents.parquet", "manifest.json"}


def load_index(path: str, expected_contract: dict[str, Any], scope_field: str | None = None) -> Index:
    """The index at ``path`` (``index_manifest``'s checks), its documents' ids, hashes and band keys in memory."""
    manifest = index_manifest(path, expected_contract, scope_field)
    t = pq.read_table(os.path.join(path, "documents.parquet"), columns=["id", "exact_lo", "exact_hi", "short",
                                                                        "band_keys"])
    bands = manifest["contract"]["lsh"]["bands"]
    keys = np.asarray(t["band_keys"].combine_chunks().flatten().to_numpy(zero_copy_only=False), np.uint64)
    exact = np.stack([np.asarray(t["exact_lo"].to_numpy(), np.uint64), np.asarray(t["exact_hi"].to_numpy(), np.uint64)],
                     axis=1) if t.num_rows else np.zeros((0, 2), np.uint64)
    logger.info("index %s: %d documents (generation %d)", path, t.num_rows, manifest["generation"])
    return Index(path, manifest, t["id"].combine_chunks().cast(pa.string()), exact,
                 np.asarray(t["short"].to_numpy(zero_copy_only=False), bool), keys.reshape(t.num_rows, bands))


def index_manifest(path: str, expected_contract: dict[str, Any], scope_field: str | None = None) -> dict[str, Any]:
    """The manifest of the index at ``path``, checked (format, version, keys, the run's contract and scope
    field, the documents' row count from documents.parquet's metadata) without reading a document (the Ray
    engine's driver: its tasks read the rows).

    Args:
        path: the index directory.
        expected_contract: the run's contract (contract.contract(cfg)).
        scope_field: the run's ``ClusterConfig.scope_field`` (None: a global run); the index's must be the same.

    Returns:
        The manifest (a dict).

    Raises:
        MissingFileError: no manifest.json. DataError / ManifestError: another format or version, a
        damaged manifest or documents.parquet; the contract check's error when the contracts differ.
    """
    manifest_path = os.path.join(path, "manifest.json")
    if not os.path.isfile(manifest_path):
        raise MissingFileError(f"{path!r} is not a complete gpu_dedup index (no manifest.json); "
                               "save one with `gpu-dedup run ... --save-index DIR`")
    manifest = read_manifest(manifest_path, FORMAT, "index")
    if manifest.get("version") not in VERSIONS:
        raise DataError(f"{path!r} has format {manifest.get('format')!r} version {manifest.get('version')!r}; "
                        f"this gpu_dedup reads {FORMAT!r} versions {', '.join(map(str, VERSIONS))}")
    require_keys(manifest, _KEYS, manifest_path, "index")
    check_scope(path, manifest, scope_field)
    if not isinstance(manifest["contract"], dict) or not isinstance(manifest["contract"].get("lsh"), dict):
        raise ManifestError(f"index manifest {manifest_path!r}: \"contract\" is not a contract object; the "
                            "index is damaged, rebuild it")
    check_contract(expected_contract, manifest["contract"], f"index {path!r}")
    try:
        rows = pq.ParquetFile(os.path.join(path, "documents.parquet")).metadata.num_rows
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"index {path!r}: documents.parquet cannot be read ({exc}); the index is damaged, "
                        "rebuild it") from exc
    if rows != manifest["documents"]:
        raise DataError(f"index {path!r}: documents.parquet has {rows} rows, the manifest says "
                        f"{manifest['documents']}; the index is damaged, rebuild it")
    return manifest


def index_scope(manifest: dict[str, Any]) -> str | None:
    """The scope field of an index (None: a global one)."""
    scope = manifest.get("scope")
    return scope.get("field") if isinstance(scope, dict) else None


def check_scope(path: str, manifest: dict[str, Any], scope_field: str | None) -> None:
    """Refuse an index whose scope field is not the run's (module docstring): a scoped index's keys carry
    their scope's salt, a global one's none, so the two would never match and every document would be kept.

    Raises:
        ConfigError: naming both fields and the fix.
    """
    has = index_scope(manifest)
    if manifest.get("version") == SCOPED_VERSION and has is None:
        raise ManifestError(f"index {path!r}: version {SCOPED_VERSION} but no scope field in its manifest; the index "
                            "is damaged, rebuild it")
    if has == scope_field:
        return
    if has is None:
        raise ConfigError(f"index {path!r} was saved by a global run (no --scope-field): its keys carry no scope, so "
                          f"a run with --scope-field {scope_field} would match none of them; run without "
                          f"--scope-field against it, or save a scoped index (a run with --scope-field "
                          f"{scope_field} --save-index DIR)")
    if scope_field is None:
        raise ConfigError(f"index {path!r} was saved by a run with --scope-field {has}: its documents match only "
                          f"documents of their own {has}; pass --scope-field {has}, or run without --against")
    raise ConfigError(f"index {path!r} was saved with --scope-field {has}, this run uses --scope-field "
                      f"{scope_field}: pass --scope-field {has} (the scope values must mean the same)")


def check_index_target(path: str, against: str | None = None) -> None:
    """Refuse to write an index into ``path`` unless it is new, empty, or an index (replaced, as before):
    never over a manifest.json or other files that are not an index's, nor over ``against``."""
    if against is not None and os.path.realpath(path) == os.path.realpath(against):
        raise ConfigError(f"--save-index {path!r} is the index being read; indexes are versioned: write the "
                          "next generation to a new directory")
    check_directory(path, "index directory")
    if not os.path.isdir(path):
        return
    manifest = os.path.join(path, "manifest.json")
    if os.path.exists(manifest):
        read_manifest(manifest, FORMAT, "index")
    tmp = re.compile(r"\.documents\.parquet\.([0-9a-f]{12}\.)?tmp$")  # an index write that was killed
    other = sorted(n for n in os.listdir(path) if n not in _INDEX_FILES and n not in (LOCK, LOCK_INFO)
                   and not tmp.match(n))
    if other:
        raise DataError(f"index directory {path!r} holds files that are not a gpu_dedup index's "
                        f"({', '.join(other[:3])}{', ...' if len(other) > 3 else ''}); save the index into a new "
                        "or empty directory")


DOCUMENTS_SCHEMA = pa.schema([("id", pa.string()), ("exact_lo", pa.uint64()), ("exact_hi", pa.uint64()),
                              ("short", pa.bool_()), ("band_keys", pa.list_(pa.uint64())),
                              ("shingles", pa.list_(pa.uint64()))])


def documents_table(ids: pa.Array, exact: np.ndarray, short: np.ndarray, band_keys: np.ndarray,
                    shingles: pa.Array | None) -> pa.Table:
    """Rows of documents.parquet (DOCUMENTS_SCHEMA): ids (n,), exact uint64 (n, 2), short bool (n,),
    band_keys uint64 (n, bands), shingles list<uint64> (n,) or None (no verification: nulls)."""
    n = len(ids)
    bands = band_keys.shape[1]
    keys = pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * bands, bands, dtype=np.int32)),
                                    pa.array(np.ascontiguousarray(band_keys).reshape(-1), pa.uint64()))
    if shingles is None:
        shingles = pa.nulls(n, pa.list_(pa.uint64()))
    return pa.table([ids.cast(pa.string()), pa.array(exact[:, 0], pa.uint64()), pa.array(exact[:, 1], pa.uint64()),
                     pa.array(short), keys, shingles.cast(pa.list_(pa.uint64()))], schema=DOCUMENTS_SCHEMA)


class IndexWriter:
    """Streams index rows into documents.parquet; ``close`` writes the manifest (atomically, last)."""

    def __init__(self, path: str, contract: dict[str, Any], has_shingles: bool, parent: Index | None = None,
                 scope_field: str | None = None):
        os.makedirs(path, exist_ok=True)
        if os.path.exists(os.path.join(path, "manifest.json")):
            os.remove(os.path.join(path, "manifest.json"))  # incomplete until the new manifest lands
        self.path, self.contract, self.has_shingles, self.parent = path, contract, has_shingles, parent
        self.scope_field = scope_field
        # a scoped index's documents per scope value (the parent's first): its manifest's ``scope``
        self.scopes: dict[str, int] = dict(((parent.manifest.get("scope") or {}).get("documents") or {})
                                           if parent is not None else {})
        self.rows = 0
        self._stack = ExitStack()  # documents.parquet's temporary: renamed into place by close, else removed
        self._tmp = self._stack.enter_context(io.atomic_path(os.path.join(path, "documents.parquet")))
        self._writer = pq.ParquetWriter(self._tmp, DOCUMENTS_SCHEMA)
        self.schema = DOCUMENTS_SCHEMA

    def write(self, ids: pa.Array, exact: np.ndarray, short: np.ndarray, band_keys: np.ndarray,
              shingles: pa.Array | None) -> None:
        if len(ids):
            self._writer.write_table(documents_table(ids, exact, short, band_keys, shingles))
            self.rows += len(ids)

    def add_scopes(self, counts: dict[str, int]) -> None:
        """Count more indexed documents per scope value (a scoped index's manifest)."""
        for value, k in counts.items():
            self.scopes[value] = self.scopes.get(value, 0) + int(k)

    def write_table(self, table: pa.Table) -> None:
        """Append rows already in the index schema (a Ray task's part of the new index)."""
        self._writer.write_table(table.cast(self.schema))
        self.rows += table.num_rows

    def copy_parent(self) -> None:
        """Append every row of the parent index (documents already deduplicated)."""
        if self.parent is None:
            return
        pf = pq.ParquetFile(os.path.join(self.parent.path, "documents.parquet"))
        for batch in pf.iter_batches():
            self._writer.write_table(pa.Table.from_batches([batch]).cast(self.schema))
            self.rows += batch.num_rows

    def abort(self) -> None:
        """Drop the rows written so far (the directory keeps no manifest: an incomplete index is refused)."""
        try:
            self._writer.close()
        finally:
            self._stack.__exit__(RuntimeError, RuntimeError("index write aborted"), None)

    def close(self) -> dict[str, Any]:
        self._writer.close()
        self._stack.close()  # fsync + rename onto documents.parquet
        manifest = {
            "format": FORMAT, "version": INDEX_VERSION if self.scope_field is None else SCOPED_VERSION,
            "generation": 1 + (self.parent.manifest["generation"] if self.parent else 0),
            "contract": self.contract, "contract_fingerprint": contract_fingerprint(self.contract),
            "documents": self.rows, "has_shingles": self.has_shingles,
            "parent": ({"path": self.parent.path, "generation": self.parent.manifest["generation"],
                        "documents": len(self.parent)} if self.parent else None),
            "created": created(),
        }
        if self.scope_field is not None:
            manifest["scope"] = {"field": self.scope_field, "documents": self.scopes}
        io.write_json_atomic(manifest, os.path.join(self.path, "manifest.json"))
        return manifest


def shingles_as_lists(sets) -> pa.Array:
    """ShingleSets (host) -> list<uint64> array, one list per set."""
    offsets = np.zeros(len(sets) + 1, np.int64)
    np.cumsum(sets.sizes, out=offsets[1:])
    owner = repeat_index(np, sets.sizes)
    gather = sets.offsets[owner] + (np.arange(owner.shape[0]) - offsets[:-1][owner])
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(sets.hashes[gather],
                                                                     pa.uint64())).cast(pa.list_(pa.uint64()))


def write_index(path: str, cfg: RunConfig, device: str, files, docs: Documents, keep_mask: np.ndarray,
                index: Index | None = None) -> dict[str, Any]:
    """Save the kept documents (after the ``against`` index's, when given) as a new index. With
    verification the kept documents' shingle sets are hashed again in one streaming pass."""
    check_extends(path, cfg, index)
    return save_index(path, cfg, index, lambda writer: _write_rows(writer, cfg, device, files, docs, keep_mask))


def save_index(path: str, cfg: RunConfig, parent: Any, fill: Callable[[IndexWriter], None]) -> dict[str, Any]:
    """A new index at ``path`` (after ``parent``'s rows, when given) of the rows ``fill(writer)`` writes:
    aborted on any error, else closed and logged; run.json's ``stages.index`` (both engines)."""
    writer = IndexWriter(path, contract(cfg), has_shingles=cfg.cluster.verify, parent=parent,
                         scope_field=cfg.cluster.scope_field)
    try:
        fill(writer)
    except BaseException:
        writer.abort()
        raise
    manifest = writer.close()
    logger.info("saved index %s: %d documents (generation %d)", path, manifest["documents"], manifest["generation"])
    out = {"path": path, "documents": manifest["documents"], "generation": manifest["generation"]}
    if "scope" in manifest:
        out["scope"] = manifest["scope"]
    return out


def check_extends(path: str, cfg: RunConfig, index: Index | None) -> None:
    """Refuse a new index that would overwrite the ``against`` one, or add shingle sets to one without."""
    if index is not None and os.path.abspath(path) == os.path.abspath(index.path):
        raise ConfigError(f"--save-index {path!r} is the index being read; indexes are versioned: write the "
                          "next generation to a new directory")
    if index is not None and cfg.cluster.verify and not index.manifest["has_shingles"]:
        raise DataError(f"index {index.path!r} has no shingle sets, so an index with them cannot extend it")


def _write_rows(writer: IndexWriter, cfg: RunConfig, device: str, files, docs: Documents,
                keep_mask: np.ndarray) -> None:
    writer.copy_parent()
    kept = np.flatnonzero(keep_mask)
    if docs.scope_codes is not None:  # the keys below carry their scope's salt (BandKeys' mix, docs.exact)
        counts = np.bincount(docs.scope_codes[kept], minlength=len(docs.scope_values))
        writer.add_scopes({v: int(k) for v, k in zip(docs.scope_values, counts) if k})
    band = docs.keys.rows(to_device(kept, device))  # (kept, bands): row j belongs to kept[j]
    for part in kept_rows(cfg, files, kept, docs.ids, to_host(docs.exact), to_host(docs.nshingles) == 0, band):
        writer.write(*part)


def kept_rows(cfg: RunConfig, files, kept: np.ndarray, ids: pa.Array, exact: np.ndarray, short: np.ndarray,
              band: np.ndarray):
    """``IndexWriter.write``'s arguments for the rows ``kept`` (int64, sorted) of ``files``: ids, exact and
    short over all the files' rows, band (len(kept), bands) the kept rows' keys. With verification the
    shingle sets are hashed again from a read of those rows (the local and the Ray engine share this)."""
    if not cfg.cluster.verify:
        yield ids.take(pa.array(kept)), exact[kept], short[kept], band, None
        return
    lo = 0
    # the text only: a keep column that pass 1 computed (a prefilter's score) is not in the input
    for rows, text in prefetched(io.iter_rows(files, kept, **{**cfg.reader_options(), "keep_column": None})):
        hi = lo + rows.shape[0]
        norm = normalize_text(text, cfg.normalize)
        lists = shingles_as_lists(shingle_sets(norm, np.arange(rows.shape[0]), cfg.shingle))
        lists = pa.compute.if_else(pa.array(short[rows]), pa.nulls(len(rows), lists.type), lists)
        yield ids.take(pa.array(rows)), exact[rows], short[rows], band[lo:hi], lists
        lo = hi
