"""SemDeDup on the Ray engine: embeddings per file, k-means fitted in one task on its seeded sample, rows assigned
per file, clusters compared per cluster range; semantic_decisions.parquet equals the local engine's byte for byte
(semantic/ has the stages and the decision rule; these tasks call its functions).

    embed    per file (a GPU actor with device="cuda"): the file's batches embedded exactly as the local engine
             embeds them (the same read batches: a batch never spans files, so the same forward passes), its
             tokens counted (``run.token_summary``); its ids by hash range (the uniqueness check). In ``run
             --semantic`` (``semantic_in_run``) only the documents the lexical stages kept, chosen in each read
             batch as the local engine's ``semantic_dedup(rows=...)`` chooses them
    unique   per id range: are the run's ids distinct (else the driver raises the local engine's error)
    kmeans   one task (GPU actor): ``clustering.fit`` on the rows of ``clustering.fit_rows`` (the local engine's
             seeded sample), read from the files' embeddings; the fitted index (``clustering.Fitted``) saved
    assign   per file: ``clustering.assign`` of its rows (nearest centroid, each row on its own), their keep-order
             keys (``select.order_keys``), the members sent to their cluster's range (clusters c*R//k)
    pairs    per cluster range (GPU actor): each cluster's members in keep order (cluster, keys, row), the
             pairwise step and the rule (``select.decide_clusters``), each member's result sent to its file
    write    per file: its decisions part (``select.decisions_of``); the driver streams the parts into
             semantic_decisions.parquet in the local engine's row groups (``run.write_tables``)

``semantic_dedup_ray`` runs them as the ``Semantic`` step (its own session); ``semantic_in_run`` on the cluster and
GPU actors of a dedup run (``run --semantic --engine ray``: distributed/driver.py folds its decisions in).

The embedding cache (``SemanticConfig.cache_dir``, OUT/semantic/embeddings) is the local engine's: on Ray the
embed tasks' parts in the work dir are what a resumed run reuses. The driver holds the files' row counts, the
cluster sizes (k) and the centroids (k x d); a task holds one file's rows, the fit sample, or one cluster range.
"""
from __future__ import annotations

import dataclasses
import io as _io
import logging
import os
import time
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from .perfile import offsets_of
from .shuffle import file_of, key_partition
from .tasks import (
    ProgramJob,
    merged_read,
    program_key,
    program_session,
    task,
    work_root,
)

logger = logging.getLogger(__name__)

_MODELS: dict[tuple, Any] = {}  # a worker process's loaded models (an actor's for its whole life)


def _model(path: str, device: str, seq: int | None, dtype: str):
    from ..semantic.model import load_model

    key = (path, device, seq, dtype)
    if key not in _MODELS:
        _MODELS[key] = load_model(path, device, max_seq_length=seq, dtype=dtype)
    return _MODELS[key]


def _emb_table(ids: pa.Array, emb: np.ndarray, values: np.ndarray | None) -> pa.Table:
    """A file's ids, embeddings (a large_list<float32> of d per row) and keep values (None: no keep column)."""
    n = len(ids)
    d = emb.shape[1] if emb.ndim == 2 and n else 0
    flat = pa.array(np.ascontiguousarray(emb, np.float32).reshape(-1), pa.float32())
    cols = {"id": ids, "emb": pa.LargeListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int64) * d), flat)}
    if values is not None:
        cols["value"] = pa.array(values, pa.float64())
    return pa.table(cols)


def _emb(t: pa.Table, d: int) -> np.ndarray:
    """float32 (n, d) of an embeddings column."""
    col = t["emb"].combine_chunks()
    return np.asarray(col.flatten().to_numpy(zero_copy_only=False), np.float32).reshape(len(col), d)


def _chosen(job: ProgramJob, fi: int) -> np.ndarray | None:
    """bool per document of file ``fi``: the documents the semantic stage of ``run --semantic`` sees (the
    lexical stages' keep column, of the dedup plan's decisions part; ``extra["select"]``: its work dir, table
    and the file's position there), or None: every document."""
    sel = job.extra.get("select")
    if sel is None:
        return None
    from .shuffle import Layout

    work, table, first = sel
    keep = Layout(work).read_one(table, f"f{fi + first:06d}", ["keep"])["keep"]
    return np.asarray(keep.to_numpy(zero_copy_only=False), bool)


@task("semantic_embed")
def semantic_embed(job: ProgramJob, fi: int) -> dict[str, Any]:
    """File ``fi``'s embeddings, ids and keep values (the local engine's embed pass over this file alone)."""
    from ..runtime.device import batch_bytes
    from ..semantic.config import semantic_keep_column
    from ..semantic.embed import embed_documents
    from ..semantic.run import selected_rows, token_summary

    cfg, run, lay = job.cfg, job.extra["run"], job.layout
    kc = semantic_keep_column(cfg.keep)
    report = io.ReadReport()
    ids, parts, values, tokens = [], [], [], []
    model, windows = None, 0
    tm = {"read": 0.0, "load_model": 0.0, "embed": 0.0}
    chosen = _chosen(job, fi)
    t = time.perf_counter()
    for batch in io.iter_batches([job.files[fi]], id_field=run.id_field, text_field=run.text_field,
                                 batch_bytes=batch_bytes(run.batch_bytes, "cpu"), on_error=run.on_error,
                                 keep_column=kc, report=report):
        t0 = time.perf_counter()
        tm["read"] += t0 - t
        batch, _ = selected_rows(batch, chosen)  # the local engine's selection of the same read batch
        if not len(batch):
            t = time.perf_counter()
            continue
        if model is None:
            model = _model(job.extra["model"], job.device, cfg.max_seq_length, job.extra["dtype"])
            tm["load_model"] += time.perf_counter() - t0
        res = embed_documents(model, batch.text.to_pylist(), batch_size=cfg.batch_size, device=job.device,
                              chars_per_token=cfg.chars_per_token, long_text=cfg.long_text,
                              window_overlap=cfg.window_overlap)
        ids.append(batch.ids)
        parts.append(res.embeddings)
        tokens.append(np.stack([res.tokens, res.truncated], axis=1))
        windows += res.windows
        if kc:
            values.append(np.asarray(batch.keep_values, np.float64))
        t = time.perf_counter()
        tm["embed"] += t - t0
    if chosen is not None and chosen.shape[0] != report.rows:
        from ..errors import RunError

        raise RunError(f"semantic: {job.files[fi].relpath} has {report.rows} documents but the lexical decisions "
                       f"list {chosen.shape[0]}: the file changed during the run")
    all_ids = pa.chunked_array(ids, pa.string()).combine_chunks() if ids else pa.array([], pa.string())
    emb = np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
    lay.write(_emb_table(all_ids, emb, np.concatenate(values) if kc and values else
                         (np.zeros(0) if kc else None)), "emb", f"f{fi:06d}")
    from .stages import id_hashes

    lay.write_split(pa.table({"id": all_ids}), key_partition(id_hashes(all_ids), job.partitions), job.partitions,
                    "ids", lambda p: f"f{fi:06d}-p{p:04d}")
    seq = (int(model.max_seq_length) if model is not None and model.max_seq_length else cfg.max_seq_length)
    return {"rows": len(all_ids), "report": report.to_dict(), "dim": int(emb.shape[1]) if emb.ndim == 2 else 0,
            "seq": seq, "windows": windows, "timings": tm,
            "tokens": token_summary(np.concatenate(tokens) if tokens else np.zeros((0, 2), np.int64), seq)}


@task("semantic_unique", per="range")
def semantic_unique(job: ProgramJob, p: int) -> dict[str, Any]:
    """Are the ids of hash range ``p`` distinct."""
    import pyarrow.compute as pc

    ids = job.layout.read("ids", [f"f{fi:06d}-p{p:04d}" for fi in range(job.nfiles)])["id"] \
        if job.nfiles else pa.array([], pa.string())
    return {"unique": len(ids) == 0 or pc.count_distinct(ids, mode="all").as_py() == len(ids)}


def _rows_of(job: ProgramJob, rows: np.ndarray | None) -> np.ndarray:
    """float32 embeddings of the run's ``rows`` (global, ascending; None: every row), read file by file."""
    offs, lay, got = job.offs(), job.layout, []
    for fi in range(job.nfiles):
        lo, hi = int(offs[fi]), int(offs[fi + 1])
        if lo == hi:
            continue
        if rows is None:
            got.append(_emb(lay.read_one("emb", f"f{fi:06d}", ["emb"]), job.extra["dim"]))
            continue
        a, b = np.searchsorted(rows, [lo, hi])
        if a < b:
            got.append(_emb(lay.read_one("emb", f"f{fi:06d}", ["emb"]), job.extra["dim"])[rows[a:b] - lo])
    return np.concatenate(got) if got else np.zeros((0, job.extra["dim"]), np.float32)


def _blob(a: np.ndarray | None) -> bytes | None:
    if a is None:
        return None
    buf = _io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _unblob(b: bytes | None) -> np.ndarray | None:
    return None if b is None else np.load(_io.BytesIO(b), allow_pickle=False)


_FIT = pa.schema([("centroids", pa.binary()), ("index", pa.binary()), ("raw", pa.binary()), ("backend", pa.string()),
                  ("gpu", pa.bool_()), ("torch_device", pa.string())])


def _load_fitted(job: ProgramJob):
    from ..semantic.clustering import Fitted

    r = job.layout.read_one("fit", "fit").to_pylist()[0]
    return Fitted(_unblob(r["centroids"]), r["backend"], _unblob(r["index"]), r["gpu"], _unblob(r["raw"]),
                  r["torch_device"])


@task("semantic_kmeans", per="task")
def semantic_kmeans(job: ProgramJob, key: int, n: int, k: int) -> dict[str, Any]:
    """``clustering.fit`` on the local engine's fit rows (``fit_rows``), read from the files' embeddings."""
    from ..semantic.clustering import fit, fit_rows

    rows = fit_rows(n, k, job.cfg)
    f = fit(_rows_of(job, rows), k, job.cfg, job.device)
    job.layout.write(pa.table({"centroids": [_blob(f.centroids)], "index": [_blob(f.index)], "raw": [_blob(f.raw)],
                               "backend": [f.backend], "gpu": [f.gpu], "torch_device": [f.torch_device]},
                              schema=_FIT), "fit", "fit")
    return {"fit_rows": n if rows is None else int(rows.shape[0]), "backend": f.backend}


_ASSIGNED = pa.schema([("cluster", pa.int64()), ("cos", pa.float32())])


def cluster_range(cluster: np.ndarray, k: int, ranges: int) -> np.ndarray:
    """int64 range of each cluster: ``ranges`` contiguous runs of the k clusters (cluster c -> c * ranges // k)."""
    return (np.asarray(cluster, np.int64) * ranges // max(k, 1)).astype(np.int64)


@task("semantic_assign")
def semantic_assign(job: ProgramJob, fi: int, n: int, k: int) -> dict[str, Any]:
    """File ``fi``'s rows assigned to their nearest centroids, with their keep-order keys, sent to their clusters'
    ranges; its (cluster, cosine) kept for its write task."""
    from ..semantic.clustering import assign as nearest
    from ..semantic.select import order_keys

    lay, row0 = job.layout, int(job.offsets[fi])
    t = lay.read_one("emb", f"f{fi:06d}")
    x = _emb(t, job.extra["dim"])
    cluster, cos = nearest(x, _load_fitted(job))
    rows = np.arange(row0, row0 + t.num_rows, dtype=np.int64)
    k1, k2 = order_keys(job.cfg.keep, cos, rows, n, seed=job.cfg.seed,
                        values=t["value"].to_numpy() if "value" in t.column_names else None)
    lay.write(pa.table({"cluster": pa.array(cluster), "cos": pa.array(cos)}, schema=_ASSIGNED), "assigned",
              f"f{fi:06d}")
    members = pa.table({"row": pa.array(rows), "id": t["id"], "cluster": pa.array(cluster),
                        "k1": pa.array(k1), "k2": pa.array(k2), "emb": t["emb"]})
    r = job.extra["ranges"]
    lay.write_split(members, cluster_range(cluster, k, r), r, "members", lambda g: f"f{fi:06d}-r{g:04d}")
    return {"rows": t.num_rows}


_DECIDED = pa.schema([("row", pa.int64()), ("removed", pa.bool_()), ("max_sim", pa.float32()),
                      ("nearest_id", pa.string())])


@task("semantic_pairs", per="range")
def semantic_pairs(job: ProgramJob, r: int, k: int) -> dict[str, Any]:
    """Cluster range ``r``: each cluster's members in keep order, the pairwise step and the decision rule
    (``select.decide_clusters``); each member's result sent to its file."""
    from ..semantic.select import decide_clusters

    lay, cfg = job.layout, job.cfg
    t = lay.read("members", [f"f{fi:06d}-r{r:04d}" for fi in range(job.nfiles)]) if job.nfiles else None
    ranges = job.extra["ranges"]
    lo, hi = -(-r * k // ranges), -(-(r + 1) * k // ranges)  # the clusters c with c * R // k == r
    timings: dict[str, float] = {}
    if t is None or t.num_rows == 0:
        sizes = np.zeros(hi - lo, np.int64)
        lay.write_split(_DECIDED.empty_table(), np.zeros(0, np.int64), job.nfiles, "decided",
                        lambda g: f"r{r:04d}-f{g:06d}")
        return {"sizes": sizes.tolist(), "sweep": [0] * len(cfg.eps_sweep), "timings": timings}
    cluster, row = t["cluster"].to_numpy(), t["row"].to_numpy()
    order = np.lexsort((row, t["k2"].to_numpy(), t["k1"].to_numpy(), cluster))
    sizes = np.bincount(cluster - lo, minlength=hi - lo).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    max_sim, nearest, removed, sweep = decide_clusters(_emb(t, job.extra["dim"]), order, offsets, cfg, job.device, timings)
    has = nearest >= 0
    nearest_id = t["id"].combine_chunks().take(pa.array(np.maximum(nearest, 0), pa.int64(), mask=~has))
    out = pa.table({"row": pa.array(row), "removed": pa.array(removed), "max_sim": pa.array(max_sim, pa.float32()),
                    "nearest_id": nearest_id}, schema=_DECIDED)
    lay.write_split(out, file_of(row, job.offs()), job.nfiles, "decided", lambda g: f"r{r:04d}-f{g:06d}")
    return {"sizes": sizes.tolist(), "sweep": [s["removed"] for s in sweep], "timings": timings}


@task("semantic_write")
def semantic_write(job: ProgramJob, fi: int) -> dict[str, Any]:
    """File ``fi``'s decisions part (``select.decisions_of``: its rows in input order)."""
    from ..semantic.select import decisions_of

    lay = job.layout
    ids = lay.read_one("emb", f"f{fi:06d}", ["id"])["id"].combine_chunks()
    a = lay.read_one("assigned", f"f{fi:06d}")
    d = lay.read("decided", [f"r{r:04d}-f{fi:06d}" for r in range(job.extra["ranges"])], _DECIDED)
    d = d.take(pa.array(np.argsort(d["row"].to_numpy(), kind="stable")))
    removed = np.asarray(d["removed"].to_numpy(zero_copy_only=False), bool)
    t = decisions_of(ids, removed, d["max_sim"].to_numpy(), d["nearest_id"].combine_chunks(),
                     a["cluster"].to_numpy(), a["cos"].to_numpy())
    lay.write(t, "decisions", f"f{fi:06d}")
    return {"rows": t.num_rows, "removed": int(removed.sum())}


def _raise_duplicate_ids(job: ProgramJob, file_rows: list[int]) -> None:
    """The local engine's error (io.check_unique_ids: the ids, counts, files and lines), from the files' ids:
    per-document state in the driver on this error path only."""
    run = job.extra["run"]
    ids = pa.chunked_array([c for fi in range(job.nfiles)
                            for c in job.layout.read_one("emb", f"f{fi:06d}", ["id"])["id"].chunks], pa.string())
    io.check_unique_ids(ids.combine_chunks(), job.files, file_rows, id_field=run.id_field, text_field=run.text_field,
                        on_error=run.on_error)
    from ..errors import RunError

    raise RunError("a unique task found a duplicated id that the check of all ids did not")  # pragma: no cover


@dataclasses.dataclass
class _Stages:
    """One semantic run's stage results (``_run_stages``), in the order they ran."""

    em: list
    km: list
    asg: list
    pr: list
    wr: list


def _prepare(cfg, device: str, files, work: str, run, select=None):
    """(the model's ``Source``, the run's ``ProgramJob``): the model resolved here, before any task (a missing
    one fails fast); ``select``: the embed tasks' selection (``_chosen``)."""
    from ..semantic.run import source_stage

    if cfg.cache_dir is not None:
        logger.info("semantic on Ray: the embedding cache %s is the local engine's; the Ray tasks keep their "
                    "embeddings in the work dir (--resume reuses them)", cfg.cache_dir)
    src = source_stage(dataclasses.replace(cfg, cache_dir=None), device, None, None)
    job = ProgramJob(cfg, device, files, work_root(work, "semantic"),
                     extra={"run": run, "model": src.path, "dtype": src.dtype, "select": select})
    return src, job


def _run_stages(r, job: ProgramJob, src, partitions: int | None, *key: Any) -> _Stages:
    """The stages of the module doc on the Runner ``r``; ``key``: more of what the tasks' outputs depend on (the
    selection's origin)."""
    from ..semantic.clustering import n_clusters_for
    from .shuffle import key_ranges

    cfg, run, files = job.cfg, job.extra["run"], job.files
    job.partitions = key_ranges(partitions, int(r.ray.cluster_resources().get("CPU", 1)), files)
    job.run_key = program_key("semantic", cfg, job.device, job.partitions, files, src.fingerprint,
                              {k: getattr(run, k) for k in ("id_field", "text_field", "on_error", "batch_bytes")},
                              *key)
    em = r.stage(semantic_embed, range(job.nfiles), device=True)
    rows = [e["rows"] for e in em]
    job.offsets = offsets_of(rows)
    job.extra["dim"] = max([e["dim"] for e in em] or [0])
    n = int(job.offsets[-1])
    if not all(u["unique"] for u in r.stage(semantic_unique, range(job.partitions))):
        _raise_duplicate_ids(job, rows)
    k = n_clusters_for(n, cfg)
    job.extra["ranges"] = max(1, min(job.partitions, k))  # cluster ranges: no more than clusters
    km: list[dict] = []
    asg: list[dict] = []
    pr: list[dict] = []
    wr: list[dict] = []
    if n:
        km = r.stage(semantic_kmeans, [0], n, k, device=True)
        asg = r.stage(semantic_assign, range(job.nfiles), n, k, device=True)
        pr = r.stage(semantic_pairs, range(job.extra["ranges"]), k, device=True)
        wr = r.stage(semantic_write, range(job.nfiles))
    return _Stages(em, km, asg, pr, wr)


def _outputs(job: ProgramJob, src, st: _Stages, steps, engine: dict, out: str | None, dataset: bool = False):
    """semantic.json's stats from the tasks' results; with ``out``: semantic_decisions.parquet (the parts, in the
    local engine's row groups; with ``dataset`` none: the publish tasks of ``run`` write OUT/semantic_decisions/,
    one part per input file, outputs.publish), semantic/centroids.npy, semantic.json. Returns the
    ``_FileSemantic``."""
    from ..runtime.run import write_tables
    from ..semantic.clustering import warn_largest
    from ..semantic.config import SEMANTIC_SCHEMA
    from ..semantic.run import (
        EmbedPass,
        long_text_stats,
        semantic_stats,
        warn_truncated,
        write_centroids,
        write_semantic_json,
    )
    from ..semantic.select import decided_stats

    cfg, run, device, files, timings = job.cfg, job.extra["run"], job.device, job.files, steps.timings
    em, km, pr, wr = st.em, st.km, st.pr, st.wr
    n, d = int(job.offsets[-1]), job.extra["dim"]
    sizes = np.concatenate([np.asarray(p["sizes"], np.int64) for p in pr]) if pr else np.zeros(0, np.int64)
    warn_largest(sizes, cfg, d)
    swept = np.sum([p["sweep"] for p in pr], axis=0).tolist() if pr else [0] * len(cfg.eps_sweep)
    sweep = [{"eps": float(e), "removed": int(c), "fraction": int(c) / n if n else 0.0}
             for e, c in zip(cfg.eps_sweep, swept)]
    for e in em:  # the embed tasks' seconds, summed: work, not wall time (the stages' wall: ray_semantic_*)
        for key, v in e["timings"].items():
            timings[key] = timings.get(key, 0.0) + v
    dec_t = {"kmeans": sum(x["seconds"] for x in km)}
    for p in pr:
        for key, v in p["timings"].items():
            dec_t[key] = dec_t.get(key, 0.0) + v
    decided = decided_stats(cfg, device, n, sum(w["removed"] for w in wr), sweep, sizes,
                            km[0]["backend"] if km else "none", d, dec_t)
    timings.update(decided.pop("timings_s"))
    seq = max([e["seq"] or 0 for e in em] or [0]) or cfg.max_seq_length
    summary = {"documents": 0, "over": 0, "truncated": 0, "max_tokens": 0}
    for e in em:
        for key in ("documents", "over", "truncated"):
            summary[key] += e["tokens"][key]
        summary["max_tokens"] = max(summary["max_tokens"], e["tokens"]["max_tokens"])
    long_text = long_text_stats(cfg, summary, seq, sum(e["windows"] for e in em))
    if long_text and long_text["truncated"]:
        warn_truncated(long_text, seq)
    emb = EmbedPass(pa.array([], pa.string()), np.zeros((0, 2), np.uint64), np.zeros((0, d), np.float32), None,
                    embedded=n)
    centroids = _load_fitted(job).centroids if n else np.zeros((0, d), np.float32)
    if out is not None:
        with steps("write"):
            if not dataset:
                write_tables(_parts(job), SEMANTIC_SCHEMA, os.path.join(out, "semantic_decisions.parquet"))
            write_centroids(out, centroids)
    steps.total()
    stats = semantic_stats(cfg, run, device, files, merged_read(em), src, emb, seq, long_text, None, decided,
                           timings)
    stats["engine"] = engine
    if out is not None:
        write_semantic_json(out, stats)
    table = "semantic_decisions" if dataset else "semantic_decisions.parquet"
    result = _FileSemantic(os.path.join(out, table) if out is not None else None, stats,
                           centroids, out, job)
    logger.info("%s in %.2f s", result.summary(), timings["total"])
    return result


def _parts(job: ProgramJob):
    """The write tasks' decisions parts, in file order (a file without a semantic row: none)."""
    lay, offs = job.layout, job.offsets
    return (lay.read_one("decisions", f"f{fi:06d}") for fi in range(job.nfiles) if offs[fi + 1] > offs[fi])


def semantic_dedup_ray(source: Any, cfg, out: str | None, env, run, partitions: int | None = None):
    """``semantic.run.semantic_dedup`` of ``source`` on the Ray engine (module doc), as the ``Semantic`` step runs
    it with ``env.engine == "ray"``: ``env``'s device, cluster, work dir (default OUT/work; its ``semantic/``
    folder) and ``resume``; ``run`` the RunConfig whose reading settings apply; ``partitions`` id and cluster
    ranges (default: the cluster's CPUs). Returns a ``SemanticResult`` whose decisions and embeddings are read
    from the files when asked for (``out`` is required)."""
    from ..runtime.run import Steps, ray_dirs
    from ..semantic.model import resolve_torch_device

    device = resolve_torch_device(env.device)
    files = io.source_files(source)
    out, work = ray_dirs(out, env.work_dir, "semantic dedup")
    src, job = _prepare(cfg, device, files, work, run)  # the model: fails fast, here
    out = os.path.abspath(out)
    steps = Steps()
    workers, address = env.workers, env.address
    with program_session(job, workers=workers, address=address, resume=env.resume, device_stages=True) as r:
        st = _run_stages(r, job, src, partitions)
        engine = r.engine_stats(workers, address, [st.em, st.km, st.asg, st.pr, st.wr])
    return _outputs(job, src, st, steps, engine, out)


def semantic_in_run(ray, actors: list, nodes: int, files, cfg, device: str, work: str, run, *, resume: bool,
                    partitions: int | None, select, key: Any, out: str | None, dataset: bool = False):
    """The semantic stage of ``run --semantic`` on the Ray engine (distributed/driver.py): these stages on the
    dedup run's cluster and GPU actors, over ``files`` (the run's inputs), the embed tasks seeing the documents
    ``select`` chooses (``_chosen``; None: every one) and reading the same batches as the local engine's
    ``semantic_dedup(rows=...)``; ``key``: the dedup plan's run key (the selection's origin). Its work dir is
    WORK/semantic; with ``out`` it writes semantic_decisions.parquet (``dataset``: none, the run's publish tasks
    write OUT/semantic_decisions/), semantic.json and semantic/centroids.npy there. Returns the ``_FileSemantic``."""
    from ..runtime.run import Steps
    from ..semantic.model import resolve_torch_device
    from .shuffle import WorkFiles
    from .tasks import Runner

    device = resolve_torch_device(device)
    src, job = _prepare(cfg, device, files, work, run, select)
    steps = Steps()
    WorkFiles.prepare(job.work, resume)
    r = Runner(ray, job, {}, actors, nodes)
    st = _run_stages(r, job, src, partitions, key)
    engine = r.engine_stats(None, None, [st.em, st.km, st.asg, st.pr, st.wr])
    return _outputs(job, src, st, steps, engine, out, dataset)


def _file_semantic_base():
    from ..semantic.run import SemanticResult

    return SemanticResult


class _FileSemantic(_file_semantic_base()):  # type: ignore[misc]
    """A Ray run's ``SemanticResult``: the decisions read from semantic_decisions.parquet, the embeddings from the
    work dir's parts, only when asked for (the driver holds no per-document state unless the caller wants it)."""

    def __init__(self, path: str | None, stats: dict[str, Any], centroids: np.ndarray, output_dir: str | None,
                 job: ProgramJob) -> None:
        self._path, self.stats, self.centroids, self.output_dir, self._job = path, stats, centroids, output_dir, job
        self._table = None

    @property
    def decisions(self) -> pa.Table:  # type: ignore[override]
        """semantic_decisions.parquet, or without an OUT the write tasks' parts (SEMANTIC_SCHEMA)."""
        if self._table is None and self._path is not None:
            import pyarrow.parquet as pq

            self._table = pq.read_table(self._path)
        elif self._table is None:
            from ..semantic.config import SEMANTIC_SCHEMA

            parts = list(_parts(self._job))
            self._table = pa.concat_tables(parts) if parts else SEMANTIC_SCHEMA.empty_table()
        return self._table

    @property
    def parts(self) -> tuple[str, int]:
        """(the work dir of its write tasks' decisions parts, one per input file; how many documents it saw: none
        written when 0)."""
        return self._job.work, int(self._job.offsets[-1]) if self._job.offsets is not None else 0

    @property
    def run_key(self) -> str:
        """The run key of its tasks' markers (every setting and input its decisions depend on)."""
        return self._job.run_key

    @property
    def embeddings(self) -> np.ndarray:  # type: ignore[override]
        """float32 (n, d), read from the work dir's parts (gone when the work dir was removed)."""
        return _rows_of(self._job, None)
