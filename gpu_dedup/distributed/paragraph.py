"""Paragraph dedup on the Ray engine: the keys shuffled by key range, each range decided exactly, every file cut by
its own task; removed_spans and paragraph_docs (the local engine's rows, as a dataset of per-file parts or, with
--table-layout file, its files byte for byte) and paragraph_deduplicated/ equal the local engine's exact mode
(paragraph/dedup.py has the policy: units, keys, keep-first, remove-all, the cut).

    keys    per file: every unit's key (span3: every window's), numbered in the file's key order (units in
            document order, documents in file order), the eligible ones by key range (h1's top bits)
    first   per key range: the keys sorted by (key, file, number), i.e. in input order within each key:
            keep-first removes every occurrence but the first, remove-all every occurrence of a key seen more
            than once -> the removed numbers, by file
    cut     per file: the file read again, each batch's keys removed where the ranges said (``dedup.cut_batch``,
            the local engine's cut), its spans and documents parts (global rows) and its paragraph_deduplicated/
            file (``cutwrite.write_cut_documents``, the local engine's writer, over the file alone); in the
            dataset layout (the Ray default, ``outputs.layout_of``) the parts are OUT/removed_spans/ and
            OUT/paragraph_docs/ ``part-<k>.parquet`` (every file, an empty one too), in the work dir otherwise
    driver  paragraph_dedup.json from the tasks' counts; with --table-layout file, removed_spans.parquet and
            paragraph_docs.parquet streamed from the work dir's parts in the local engine's row groups
            (``run.write_tables``): the only layout whose rows pass through the driver

Bloom mode on a cluster (``BloomConfig.mode="bloom"``, the default): every key range is decided exactly, by a sort
of its keys: a cluster holds no filter to size, and no false positive can occur. A Bloom run on Ray therefore
equals the exact mode (local or Ray), and differs from a local Bloom run only by that run's false positives (at
most ``fp_rate`` of the kept units); a log line says so, and paragraph_dedup.json's ``seen_set`` records
``mode="exact"`` with the mode asked for. ``fp_sample`` measures nothing on Ray (no false positive is possible):
``fp_audit`` records that. Memory: a key-range task holds its range's keys (28 B each), the cut task one batch.
"""
from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..runtime.device import batch_bytes, to_device, to_host
from ..paragraph.dedup import DOCS_TABLE, OUTPUT_DIR, SPANS_TABLE  # its names in OUT (the cut task's reuse check)
from .outputs import cut_reused, journal_parts, layout_of, table_stats, write_part
from .perfile import offsets_of
from .shuffle import key_partition
from .tasks import (
    ProgramJob,
    journal_files,
    merged_read,
    program_key,
    program_session,
    sum_counts,
    task,
    work_root,
)

logger = logging.getLogger(__name__)

_KEYS = pa.schema([("h1", pa.uint64()), ("h2", pa.uint64()), ("file", pa.int32()), ("key", pa.int64())])
_REMOVED = pa.schema([("key", pa.int64())])
BLOOM_ON_RAY = ("paragraph dedup on Ray decides every key range exactly (a sort of its keys, no false positive): "
                "mode='bloom' gives the exact mode's result here, which a local Bloom run's equals up to its false "
                "positives (at most fp_rate of the kept units)")


def _batches(job: ProgramJob, fi: int, report: io.ReadReport | None = None):
    cfg = job.cfg
    return io.iter_batches([job.files[fi]], id_field=cfg.id_field, text_field=cfg.text_field,
                           batch_bytes=batch_bytes(cfg.batch_bytes, job.device), on_error=cfg.on_error,
                           report=report)


@task("paragraph_keys")
def paragraph_keys(job: ProgramJob, fi: int) -> dict[str, Any]:
    """File ``fi``'s eligible keys, numbered in its key order, by key range (module doc)."""
    from ..paragraph.dedup import batch_keys

    cfg, lay = job.cfg, job.layout
    report = io.ReadReport()
    parts, k0 = [], 0
    for batch in _batches(job, fi, report):
        ks = batch_keys(batch.text, cfg, job.device)
        h1, h2, ok = to_host(ks.h1), to_host(ks.h2), np.asarray(to_host(ks.eligible), bool)
        at = np.flatnonzero(ok)
        parts.append(pa.table({"h1": pa.array(h1[at], pa.uint64()), "h2": pa.array(h2[at], pa.uint64()),
                               "file": pa.array(np.full(at.shape[0], fi, np.int32)),
                               "key": pa.array(at + k0, pa.int64())}, schema=_KEYS))
        k0 += int(h1.shape[0])
    t = pa.concat_tables(parts).combine_chunks() if parts else _KEYS.empty_table()
    lay.write_split(t, key_partition(t["h1"].to_numpy(), job.partitions), job.partitions, "keys",
                    lambda p: f"f{fi:06d}-p{p:04d}")
    return {"rows": report.rows, "report": report.to_dict(), "keys": k0, "eligible": t.num_rows}


@task("paragraph_first", per="range")
def paragraph_first(job: ProgramJob, p: int) -> dict[str, Any]:
    """Key range ``p``: the keys in input order within each key; the removed ones (keep-first: all but the
    first occurrence; remove-all: every occurrence of a repeated key), by file."""
    lay = job.layout
    t = lay.read("keys", [f"f{fi:06d}-p{p:04d}" for fi in range(job.nfiles)], _KEYS)
    h1, h2 = t["h1"].to_numpy(), t["h2"].to_numpy()
    fil, key = t["file"].to_numpy(), t["key"].to_numpy()
    order = np.lexsort((key, fil, h2, h1))
    h1, h2, fil, key = h1[order], h2[order], fil[order], key[order]
    n = h1.shape[0]
    head = np.ones(n, bool)
    if n:
        head[1:] = (h1[1:] != h1[:-1]) | (h2[1:] != h2[:-1])
    if job.cfg.action == "keep-first":
        removed = ~head
    else:
        run = np.cumsum(head) - 1
        removed = (np.bincount(run)[run] > 1) if n else head
    out = pa.table({"key": pa.array(key[removed], pa.int64())}, schema=_REMOVED)
    lay.write_split(out, fil[removed].astype(np.int64), job.nfiles, "removed", lambda g: f"p{p:04d}-f{g:06d}")
    return {"keys": int(n), "distinct": int(head.sum()), "removed": int(removed.sum())}


@task("paragraph_cut", valid=cut_reused(OUTPUT_DIR, (SPANS_TABLE, DOCS_TABLE)))
def paragraph_cut(job: ProgramJob, fi: int, out: str, dataset: bool) -> dict[str, Any]:
    """File ``fi`` read again and cut: its spans and documents parts (``dataset``: OUT's, else the work dir's)
    and its paragraph_deduplicated/ file."""
    from ..paragraph.dedup import (
        DOCS_SCHEMA,
        SPANS_SCHEMA,
        batch_keys,
        batch_tables,
        cut_batch,
        new_counts,
    )
    from ..paragraph.dedup import add_counts as add_batch
    from ..text.cutwrite import write_cut_documents

    cfg, lay, row0 = job.cfg, job.layout, int(job.offsets[fi])
    removed = np.sort(lay.read("removed", [f"p{p:04d}-f{fi:06d}" for p in range(job.partitions)],
                               _REMOVED)["key"].to_numpy())
    counts, spans_parts, docs_parts, k0 = new_counts(), [], [], 0
    for batch in _batches(job, fi):
        ks = batch_keys(batch.text, cfg, job.device)
        k = int(ks.h1.shape[0])
        lo, hi = np.searchsorted(removed, [k0, k0 + k])
        gone = np.zeros(k, bool)
        gone[removed[lo:hi] - k0] = True
        res = cut_batch(ks, to_device(gone, job.device), cfg, job.device)
        spans, docs = batch_tables(batch, res)  # the file's own rows
        add_batch(counts, res, spans, len(batch.text))
        spans_parts.append(spans)
        docs_parts.append(docs)
        k0 += k
    spans = pa.concat_tables(spans_parts) if spans_parts else SPANS_SCHEMA.empty_table()
    with tempfile.TemporaryDirectory(prefix="gpu-dedup-paragraph-") as tmp:  # the writer reads file rows
        local = os.path.join(tmp, "spans.parquet")
        io.write_parquet_atomic(spans, local)
        written = write_cut_documents([job.files[fi]], local, os.path.join(out, OUTPUT_DIR), cfg)

    def global_rows(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index("row")
        return t.set_column(i, "row", pa.array(t["row"].to_numpy() + row0, pa.int64()))

    docs = pa.concat_tables(docs_parts) if docs_parts else None
    if dataset:  # OUT's parts: no row of them passes through the driver
        write_part(global_rows(spans), SPANS_SCHEMA, out, SPANS_TABLE, fi)
        write_part(global_rows(docs) if docs is not None else DOCS_SCHEMA.empty_table(), DOCS_SCHEMA, out,
                   DOCS_TABLE, fi)
    else:  # the driver streams the work dir's parts into OUT's one file
        lay.write(global_rows(spans), "spans", f"f{fi:06d}")
        if docs is not None:
            lay.write(global_rows(docs), "docs", f"f{fi:06d}")
    return {"out": out, "dataset": dataset, "counts": counts, "written": written, "has_docs": docs is not None}


@dataclass
class _Seen:
    """The seen-set paragraph_dedup.json describes on Ray: the key ranges' exact decisions (``paragraph_stats``
    reads ``stats()`` and ``nbytes``)."""

    cfg: Any
    first: list[dict]
    nbytes: int = 0

    def stats(self) -> dict[str, Any]:
        from ..paragraph.bloom import HASH_DESCRIPTION

        b = self.cfg.bloom
        return {"mode": "exact", "mode_asked": b.mode, "engine": "ray: every key range sorted and decided exactly",
                "key_ranges": len(self.first), "items_inserted": sum(r["distinct"] for r in self.first),
                "design_items": b.expected_items, "hash": HASH_DESCRIPTION, "seed": b.seed}

    def fp_audit(self) -> dict[str, Any]:
        """paragraph_dedup.json's ``fp_audit`` with ``fp_sample``: nothing to measure (module doc)."""
        b = self.cfg.bloom
        target = b.fp_rate if self.cfg.action == "keep-first" else 1.0 - (1.0 - b.fp_rate) ** 2
        return {"sample_fraction": self.cfg.fp_sample, "mode": "exact", "measured": False, "false_removals": 0,
                "target_fp_rate": target, "exceeds_target": False,
                "note": "the Ray engine decides every key exactly: no false positive can occur, so there is none "
                        "to measure"}


def paragraph_dedup_ray(source: Any, cfg, out: str | None, env, partitions: int | None = None) -> Any:
    """``paragraph.dedup.paragraph_dedup`` of ``source`` on the Ray engine (module doc), as the ``Paragraph`` step
    runs it with ``env.engine == "ray"``: ``env``'s device, cluster (``workers`` / ``address``), work dir
    (default OUT/work; its ``paragraph/`` folder) and ``resume``; ``partitions`` key ranges (default: the
    cluster's CPUs); ``env.table_layout`` (``outputs.layout_of``: the dataset by default). Returns the
    ``ParagraphResult`` (its tables in ``out``, required: OUT/removed_spans/ and OUT/paragraph_docs/, or with
    the file layout their .parquet files)."""
    from ..paragraph.dedup import (
        DOCS_SCHEMA,
        SPANS_SCHEMA,
        ParagraphResult,
        Pass,
        new_counts,
        paragraph_stats,
    )
    from ..runtime.run import Steps, finish, ray_dirs, resources, write_tables
    from .shuffle import key_ranges

    dataset = layout_of(env.table_layout, "ray") == "dataset"
    device, threads = resources(env.device)
    files = io.source_files(source)
    out, work = ray_dirs(out, env.work_dir, "paragraph dedup")
    workers, address, resume = env.workers, env.address, env.resume
    if cfg.bloom.mode == "bloom":
        logger.info(BLOOM_ON_RAY)
    out = os.path.abspath(out)
    steps = Steps()
    timings = steps.timings
    job = ProgramJob(cfg, device, files, work_root(work, "paragraph"))
    with program_session(job, workers=workers, address=address, resume=resume) as r:
        job.partitions = key_ranges(partitions, int(r.ray.cluster_resources().get("CPU", 1)), files)
        job.run_key = program_key("paragraph", cfg, device, job.partitions, files)
        with steps("keys"):
            ks = r.stage(paragraph_keys, range(job.nfiles))
        job.offsets = offsets_of([k["rows"] for k in ks])
        with steps("first"):
            fs = r.stage(paragraph_first, range(job.partitions))
        journal_files(out, files, OUTPUT_DIR)
        if dataset:
            journal_parts(out, (SPANS_TABLE, DOCS_TABLE), job.nfiles)
        with steps("cut"):
            cs = r.stage(paragraph_cut, range(job.nfiles), out, dataset)
        engine = r.engine_stats(workers, address, [ks, fs, cs])
    lay = job.layout
    if not dataset:
        with steps("write_tables"):
            write_tables((lay.read_one("spans", f"f{fi:06d}") for fi in range(job.nfiles)), SPANS_SCHEMA,
                         os.path.join(out, f"{SPANS_TABLE}.parquet"))
            write_tables((lay.read_one("docs", f"f{fi:06d}") for fi in range(job.nfiles) if cs[fi]["has_docs"]),
                         DOCS_SCHEMA, os.path.join(out, f"{DOCS_TABLE}.parquet"))
    counts = new_counts()
    written = {"files": 0, "rows_written": 0, "rows_changed": 0}
    for c in cs:
        sum_counts(counts, c["counts"])
        sum_counts(written, c["written"])
    seen = _Seen(cfg, fs)
    stats = paragraph_stats(cfg, device, threads, files, Pass(counts, merged_read(ks), batch_bytes(cfg.batch_bytes,
                                                                                               device)),
                            seen, timings)
    if cfg.fp_sample > 0:
        stats["fp_audit"] = seen.fp_audit()
    stats["engine"] = engine
    stats["written"] = written
    stats["tables"] = table_stats((SPANS_TABLE, DOCS_TABLE), dataset, job.nfiles)
    busy = sum(timings.get(k, 0.0) for k in ("keys", "first", "cut"))
    steps.total()
    stats["throughput"] = {"docs_per_s": counts["documents"] / busy if busy > 0 else None,
                           "mb_per_s": counts["bytes_in"] / 1e6 / busy if busy > 0 else None}
    finish(out, stats, name="paragraph_dedup.json")
    logger.info("paragraph dedup (ray): %d of %d units removed from %d documents", counts["units_removed"],
                counts["units"], counts["documents_changed"])
    return ParagraphResult(stats, None, None, out)
