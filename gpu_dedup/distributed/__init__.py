"""The Ray engine: the whole lexical pipeline as map -> shuffle -> reduce over Arrow files in a shared work
dir, with no per-document state in the driver (it holds file lists, partition counts and per-file row counts).

    probe      every node: same gpu-dedup version and contract, the work dir visible (cluster.py)
               (the tasks: stages.py and the GPU actor; those of --against / --save-index / --keep-copies:
               options.py; what they share: rows.py)
    sign       per file: pass 1, the piece, exact rows by hash range                  (stages.py, and so on)
    exact      per hash range: exact groups
    exact_texts, exact_check   (--exact-verify) per file: the groups' normalized texts read again, each
               member's bytes compared with its leader's in the leader's file (options.py)
    bands      per file: the leaders' band rows by key range
    buckets    per key range: LSH buckets -> star edges of the candidate graph
    components rounds of large-star / small-star per file of rows until the edges stop changing;
               labels = each component's smallest row
    members    per file: candidates' keep keys, band keys, shingle sets -> their component's range
    policy     per component range: decide.py's bucket + policy stages, as the local engine
    resolve    per file: exact duplicates take their leader's representative
    sizes      per file: cluster sizes
    write      per file: the decisions part and deduplicated/; the driver streams the parts into
               decisions.parquet, one part at a time
    index_rows per file (--save-index): its kept rows; the driver streams the parent index and the parts
               into the new index's documents.parquet (index.IndexWriter), one part at a time

``--against``: the index is file 0 of every stage (options.IndexSource): rows 0..I-1, first in keep order,
pinned, with no decisions part, exactly as the local engine puts it in front of the input's rows.

Every task is idempotent (atomic writes, then a done marker): Ray retries a task whose worker died, and
``resume`` reuses every finished task of a killed run. Decisions equal the local engine's byte for byte:
each reduce sees all rows of its keys and runs the local engine's own stage functions on them.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..decisions import REASON_CODES, REASONS
from ..errors import ConfigError, RunError
from . import options, stages
from .cluster import probe, ray_cluster
from .options import IndexSource  # noqa: F401 - the handle of an --against index (lexical/dedup.py)
from .shuffle import Layout, run_key

logger = logging.getLogger(__name__)

MAX_STAR_STEPS = 200  # large-star / small-star converge in O(log^2 n) rounds (Kiveris et al. 2014)


def unsupported(cfg, device: str, *, index=None, save_index=None, semantic=None, prefilter=None) -> None:
    """Refuse, naming the limit and the local command, what the Ray engine does not distribute yet."""
    what = [name for name, on in (
        ("--semantic", semantic is not None),
        # a retention draw is seeded by the document's run row, which a sign task does not know yet
        ("a classifier's stochastic retention in the filter flags",
         prefilter is not None and any(c.retention is not None for c in prefilter.classifiers))) if on]
    if what:
        raise ConfigError(f"--engine ray does not run {', '.join(what)} yet; run it with --engine local "
                          "(the same decisions, one process)")
    if prefilter is not None:
        from ..filters.prefilter import check_in_pass1

        check_in_pass1(prefilter)


def run(files, cfg, device: str, *, work: str, out: str | None, workers: int | None, address: str | None,
        partitions: int | None, resume: bool, timings: dict[str, float], fingerprint: str, index=None,
        save_index: str | None = None, prefilter=None) -> dict[str, Any]:
    """The stages of the module doc; returns what run.json adds (counts, stage stats, read report, the
    engine) and leaves WORK/ray/decisions/ (and OUT/decisions.parquet, OUT/deduplicated/ with ``out``).
    ``index``: the --against index as an IndexSource (its path and checked manifest; the tasks read its
    rows); ``save_index``: the directory of the new index (the kept documents after the ``index``'s);
    ``prefilter``: the filter flags' FilterConfig (the sign tasks score and decide; OUT/scores.parquet
    from their parts)."""
    inputs = files
    first = 1 if index is not None else 0
    if index is not None and cfg.cluster.exact_verify:
        from ..lexical.decide import EXACT_VERIFY_AGAINST

        raise ConfigError(EXACT_VERIFY_AGAINST)
    if index is not None:
        files = [index] + list(files)
    if save_index is not None:
        from ..lexical.index import check_extends

        check_extends(save_index, cfg, index)
    lay = Layout(work)
    if resume:
        lay.makedirs()
    else:
        lay.clear()  # a fresh run: nothing of an earlier one is trusted
    with ray_cluster(workers, address) as ray:
        nodes = probe(ray, work, cfg, fingerprint)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        parts = partitions or max(1, min(64, cpus))
        # every setting that can change a task's output is in the key (the contract alone leaves out the
        # policy, the keep order, the reader's options): a marker of another config is never reused
        settings = {k: v for k, v in cfg.to_dict().items() if k not in ("progress", "threads")}
        if prefilter is not None:
            settings["prefilter"] = dataclasses.asdict(prefilter)
        # pass 1 needs no policy setting (but the scope: a scoped piece's keys are salted)
        signing = {**settings, "cluster": {"keep": cfg.cluster.keep, "scope_field": cfg.cluster.scope_field}}
        job = stages.Job(cfg, device, files, work, parts, first=first, prefilter=prefilter,
                         run_key=run_key([fingerprint, signing, device, parts, len(files), first, "sign"]))
        task = {name: ray.remote(num_cpus=1, max_retries=3)(getattr(stages, name, None) or getattr(options, name))
                for name in ("sign", "exact", "exact_texts", "exact_check", "bands", "buckets", "star", "labels", "members", "policy", "resolve",
                             "sizes", "write", "index_rows", "ranks")}
        actors = _device_workers(ray) if device == "cuda" else []
        try:

            def stage(name: str, keys, *args) -> list[dict]:
                t = time.perf_counter()
                keys = list(keys)
                if actors and name in stages.DEVICE_STAGES:  # round robin; each actor runs its tasks in turn
                    refs = [actors[i % len(actors)].run.remote(name, job, k, *args) for i, k in enumerate(keys)]
                else:
                    refs = [task[name].remote(job, k, *args) for k in keys]
                res = []
                for k, ref in zip(keys, refs):
                    try:
                        res.append(ray.get(ref))
                    except (ray.exceptions.OutOfMemoryError, ray.exceptions.WorkerCrashedError,
                            ray.exceptions.RayActorError) as exc:
                        raise RunError(_task_failure(name, k, files, exc)) from exc
                timings[f"ray_{name}"] = timings.get(f"ray_{name}", 0.0) + time.perf_counter() - t
                return res

            nf = len(files)
            signed = stage("sign", range(nf))
            rows = [r["rows"] for r in signed]
            job.offsets = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)]).tolist()
            job.run_key = run_key([fingerprint, settings, device, parts, [r["stamp"] for r in signed], rows, first])
            ex = stage("exact", range(parts))
            if any(r["duplicate_ids"] for r in ex):
                _raise_duplicate_ids(job, rows, index)
            chk = None
            if cfg.cluster.exact_verify:  # byte-compare the groups: the verified ones replace the exact tasks'
                txt = stage("exact_texts", range(nf))
                chk = stage("exact_check", range(nf))
            stage("bands", range(nf))
            bk = stage("buckets", range(parts))
            step, sources, fps = 0, [f"p{p:04d}" for p in range(parts)], []
            while True:
                res = stage("star", range(nf), step, step % 2 == 0, sources)
                fps.append([sum(r["fingerprint"][i] for r in res) % (1 << 64) for i in range(3)])
                if len(fps) >= 3 and fps[-1] == fps[-2] == fps[-3]:
                    break  # a large and a small step changed nothing: every component is a star
                if step >= MAX_STAR_STEPS:
                    raise RunError(f"connected components did not converge in {MAX_STAR_STEPS} star steps")
                step, sources = step + 1, [f"g{g:06d}" for g in range(nf)]
            lab = stage("labels", range(nf), step, sources)
            mem = stage("members", range(nf))
            pol = stage("policy", range(parts))
            stage("resolve", range(nf))
            if cfg.cluster.keep_copies > 1:
                stage("ranks", range(nf))
            sz = stage("sizes", range(nf))
            if out is not None and cfg.write_deduplicated:
                from ..io import output_path
                from ..io.write import WRITE_HOOKS

                for f in inputs:  # the output session journals what the workers will write into OUT
                    for hook in WRITE_HOOKS:
                        hook(output_path(os.path.join(out, "deduplicated"), f))
            wr = stage("write", range(first, nf), out)
            if save_index is not None:
                stage("index_rows", range(first, nf))
            reused = sum(1 for r in signed[first:] if r.get("reused"))
        finally:
            for a in actors:  # a joined cluster (or a notebook's) outlives the run: free the GPUs
                ray.kill(a)
    stats = _stats(signed[first:], ex, bk, lab, mem, pol, sz, wr, rows[first:], parts, nodes, step)
    if chk is not None:  # the groups after byte verification, as the local engine counts them
        stats["stages"]["exact"].update({k: sum(r[k] for r in chk) for k in
                                         ("groups_with_duplicates", "removed", "hash_collisions")},
                                        byte_verified=True, text_bytes_read=sum(r["text_bytes_read"] for r in txt))
    if cfg.cluster.scope_field is not None:
        stats["stages"]["scope"] = _scope_stats(cfg.cluster.scope_field, wr)
    stats["engine"].update({"workers": workers, "address": address, "sign_tasks_reused": reused,
                            "device_workers": len(actors),
                            "device_worker_processes": len({r["worker_pid"] for r in signed + ex if "worker_pid" in r}),
                            "device_array_backends": sorted({r["array_backend"] for r in signed + ex + pol
                                                             if "array_backend" in r})})
    if index is not None:
        stats["stages"]["against_index"] = {"path": index.path, "documents": rows[0],
                                            "generation": index.manifest["generation"]}
    if prefilter is not None:
        stats["prefilter"] = _prefilter_stats(prefilter, signed[first:])
        if out is not None:
            t = time.perf_counter()
            write_scores(lay, range(first, nf), job.offsets, os.path.join(out, "scores.parquet"))
            timings["write_scores"] = time.perf_counter() - t
    if save_index is not None:
        t = time.perf_counter()
        stats["stages"]["index"] = _write_index(lay, save_index, cfg, index, range(first, nf))
        timings["save_index"] = time.perf_counter() - t
    return stats


def _device_workers(ray) -> list:
    """One DeviceWorker actor per GPU of the cluster (``num_gpus=1`` each; restarted and its task retried
    when its process dies). Refuses a cluster without GPUs, naming the fix."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus < 1:
        raise RunError("--device cuda with --engine ray needs GPUs in the Ray cluster, and it has none: "
                       "start the nodes with `ray start --num-gpus N` (or run with --device cpu)")
    cls = ray.remote(num_gpus=1, num_cpus=1, max_restarts=3, max_task_retries=3)(stages.DeviceWorker)
    return [cls.remote() for _ in range(gpus)]


_PER_FILE = ("sign", "exact_texts", "exact_check", "bands", "star", "labels", "members", "resolve", "sizes", "write")


def _task_failure(stage: str, key: int, files, exc) -> str:
    """The error of a task that failed for memory (or whose worker kept dying): the task, its file, the knob."""
    what = f"file {files[key].relpath}" if stage in _PER_FILE else f"key range {key}"
    return (f"Ray task {stage}[{key}] ({what}) failed after its retries: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}. Each task holds one file or one key range: give "
            "workers more memory (fewer --workers per node), split large input files, raise --partitions, "
            "or bound the grouping with --memory-budget; --resume reuses the finished tasks")


def _raise_duplicate_ids(job, rows, index=None) -> None:
    """The local engine's errors (io.check_unique_ids: the ids, counts, files and lines; then an id already
    in the --against index: Index.check_new_ids), built from the pieces' ids: per-document state in the
    driver on this error path only."""
    from .. import io

    ids = [job.layout.read_one("pieces", f"f{fi:06d}", ["id"])["id"]
           for fi in range(job.first, job.nfiles)]
    cfg = job.cfg
    ids = pa.chunked_array([c for t in ids for c in t.chunks], pa.string())
    reader = {"id_field": cfg.id_field, "text_field": cfg.text_field, "on_error": cfg.on_error}
    inputs, file_rows = job.files[job.first:], rows[job.first:]
    io.check_unique_ids(ids, inputs, file_rows, **reader)
    if index is not None:  # the index's ids, read on this error path only
        from ..contract import contract
        from ..lexical.index import load_index

        load_index(index.path, contract(cfg)).check_new_ids(ids.combine_chunks(), inputs, file_rows, **reader)
    raise RunError("an exact task found a duplicated id that the check of all ids did not")  # pragma: no cover


def _write_index(lay: Layout, path: str, cfg, index, file_range) -> dict[str, Any]:
    """The new index: the parent's rows (--against), then every file's index_rows part, one at a time."""
    from ..contract import contract
    from ..lexical.index import IndexWriter

    writer = IndexWriter(path, contract(cfg), has_shingles=cfg.cluster.verify, parent=index)
    try:
        writer.copy_parent()
        for fi in file_range:
            writer.write_table(lay.read_one("index_rows", f"f{fi:06d}"))
    except BaseException:
        writer.abort()
        raise
    manifest = writer.close()
    logger.info("saved index %s: %d documents (generation %d)", path, manifest["documents"], manifest["generation"])
    return {"path": path, "documents": manifest["documents"], "generation": manifest["generation"]}


def _prefilter_stats(prefilter, signed: list[dict]) -> dict[str, Any]:
    """run.json's ``prefilter`` (the local engine's: the step's description, the config, rows per reason
    in name order) from the sign tasks' results."""
    by: dict[str, int] = {}
    for s in signed:
        for r, k in s["prefilter"]["by_reason"].items():
            by[r] = by.get(r, 0) + k
    described = next((s["prefilter"]["describe"] for s in signed if s["prefilter"]["scored"]),
                     signed[0]["prefilter"]["describe"] if signed else {})
    return {**described, "config": dataclasses.asdict(prefilter), "by_reason": dict(sorted(by.items()))}


def write_scores(lay: Layout, file_range, offsets: list[int], path: str) -> None:
    """OUT/scores.parquet from the sign tasks' parts (their rows numbered in their file: the file's offset
    added here), one part in memory at a time; the local engine's rows, columns and schema."""
    from ..decisions import scores_schema
    from ..io.write import atomic_path

    with atomic_path(path) as tmp:
        writer = None
        for fi in file_range:
            name = lay.path("scores", f"f{fi:06d}")
            if not os.path.exists(name):
                continue  # an empty file: no scored batch
            t = pq.read_table(name)
            i = t.schema.get_field_index("row")
            t = t.set_column(i, "row", pc.add(t["row"], pa.scalar(int(offsets[fi]), pa.int64())))
            if writer is None:
                writer = pq.ParquetWriter(tmp, t.schema)
            writer.write_table(t)
        if writer is None:
            writer = pq.ParquetWriter(tmp, scores_schema(["id", "row"]))
        writer.close()


def write_decisions(work: str, nfiles: int, path: str, first: int = 0) -> None:
    """OUT/decisions.parquet from the per-file parts (files ``first``.. : not an --against index), one part
    in memory at a time."""
    from ..io.write import atomic_path

    lay = Layout(work)
    with atomic_path(path) as tmp:
        writer = None
        for fi in range(first, nfiles):
            t = lay.read_one("decisions", f"f{fi:06d}")
            if writer is None:
                writer = pq.ParquetWriter(tmp, t.schema)
            writer.write_table(t)
        if writer is None:
            from ..decisions import DECISIONS_SCHEMA

            writer = pq.ParquetWriter(tmp, DECISIONS_SCHEMA)
        writer.close()


def _scope_stats(field: str, wr: list[dict]) -> dict[str, Any]:
    """run.json's ``stages.scope`` (decide.scope_counts' shape) from the write tasks' per-file counts,
    merged in file order: the scopes in order of first appearance in the run, as the local engine's."""
    scopes: dict[str, dict[str, int]] = {}
    for w in wr:
        for value, docs, kept in w["scopes"]:
            c = scopes.setdefault(value, {"input": 0, "kept": 0, "removed": 0})
            c["input"] += docs
            c["kept"] += kept
            c["removed"] += docs - kept
    return {"field": field, "scopes": scopes}


def _stats(signed, ex, bk, lab, mem, pol, sz, wr, rows, parts, nodes, step) -> dict[str, Any]:
    n = sum(rows)
    by = {r: sum(w["by_reason"][r] for w in wr) for r in REASONS}
    by.update({r: k for r in REASON_CODES if r not in by and (k := sum(w["by_reason"].get(r, 0) for w in wr))})
    kept = sum(w["kept"] for w in wr)
    counts = {"input": n, "kept": kept, "removed": n - kept, "by_reason": by,
              "text_bytes": {"input": sum(w["text_bytes"][0] for w in wr), "kept": sum(w["text_bytes"][1] for w in wr)},
              "words": {"input": sum(w["words"][0] for w in wr), "kept": sum(w["words"][1] for w in wr),
                        "note": "words of the normalized text (space-separated runs)"}}

    def total(rs, k):
        return sum(r.get(k, 0) for r in rs)

    stages_ = {
        "exact": {"groups_with_duplicates": total(ex, "groups_with_duplicates"), "removed": total(ex, "removed"),
                  "short_documents": total(ex, "short_documents"), "byte_verified": False, "hash_collisions": None},
        "lsh": {"buckets": total(bk, "buckets"), "bucket_entries": total(bk, "bucket_entries"),
                "largest_bucket": max([r["largest_bucket"] for r in bk] or [0]), "star_edges": total(bk, "edges"),
                "candidate_documents": total(lab, "candidates"), "key_range_partitions": parts},
        "components": {"star_steps": step, "candidates": total(lab, "candidates")},
        "verify": {"documents": total(mem, "candidates"), "text": "re-read from the input (per file, on the workers)",
                   "text_bytes_read": total(mem, "text_bytes_read")},
        "policy": {"removed": total(pol, "removed"), "verified_pairs": total(pol, "verified_pairs")},
        "clusters": {"with_duplicates": sum(w["clusters_with_duplicates"] for w in wr),
                     "largest": max([w["largest_cluster"] for w in wr] or [0])},
    }
    read = {"files": 0, "rows": 0, "bytes_text": 0, "skipped": [], "invalid_utf8_rows": 0, "empty_files": []}
    timings = {}
    for s in signed:
        r = s["report"]
        for k in ("files", "rows", "bytes_text", "invalid_utf8_rows"):
            read[k] += r[k]
        read["skipped"] += r["skipped"]
        read["empty_files"] += r["empty_files"]
        for k, v in s["timings"].items():
            timings[k] = timings.get(k, 0.0) + v
    dedup = {"files": total([w["deduplicated"] for w in wr], "files"),
             "rows_written": total([w["deduplicated"] for w in wr], "rows_written")}
    return {"counts": counts, "stages": stages_, "read": read, "pass1_task_seconds": timings, "deduplicated": dedup,
            "engine": {"name": "ray", "nodes": nodes, "partitions": parts,
                       "worker_peak_rss_bytes": max(r.get("peak_rss_bytes", 0) for rs in
                                                    (signed, ex, bk, lab, mem, pol, sz, wr) for r in rs)}}
