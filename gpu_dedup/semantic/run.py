"""The semantic stage end to end: named stages over the streamed input, composed and timed by ``semantic_dedup``.

    source    the model (path, fingerprint, dtype) and the embedding cache, or the caller's rows (``Source``)
    embed     one pass over the input: hash every text, take cached embeddings, embed the rest, count tokens
              (``_embed_pass`` -> ``EmbedPass``)
    long_text the effective max_seq_length and the documents longer than it (a warning when truncated)
    decide    k-means, order within clusters, max similarity to a kept one, decisions (``select.decide_embeddings``)
    cache     this run's rows into the embedding cache, unless all were reused in order
    stats     semantic.json: the shared run header (``run.header``), model, cache, decisions' stats
    write     semantic_decisions.parquet (``SEMANTIC_SCHEMA``), semantic/centroids.npy, semantic.json
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..config import RunConfig
from ..errors import ConfigError
from ..runtime.device import batch_bytes, set_threads
from ..runtime.heartbeat import Heartbeat, duration, phase
from ..runtime.run import RunResult, Steps, finish, header, write_table
from .config import CACHE_FORMAT, SEMANTIC_SCHEMA, SemanticConfig, semantic_keep_column
from .embed import EmbeddingCache, count_tokens, embed_documents, text_hashes
from .model import embedding_dtype, load_model, model_fingerprint, resolve_model_path, resolve_torch_device
from .select import decide_embeddings

logger = logging.getLogger(__name__)
# the software semantic.json names beside run.versions' (distribution names; those installed are listed)
SEMANTIC_PACKAGES = ("torch", "sentence-transformers", "transformers", "faiss-cpu", "faiss-gpu-cu12")


@dataclass
class SemanticResult(RunResult):
    """decisions: ``SEMANTIC_SCHEMA`` table in input order; stats: what semantic.json holds; embeddings:
    float32 (n, d); centroids: float32 (k, d); output_dir: where files went (None in memory). ``filter(data)``,
    ``keep_mask``, ``kept``, ``to_pandas()``: ``run.RunResult``'s, the surface every program's result shares."""

    TABLE = "decisions"
    decisions: pa.Table
    stats: dict[str, Any]
    embeddings: np.ndarray
    centroids: np.ndarray
    output_dir: str | None = None

    @property
    def removed(self) -> int:
        return int(self.stats["counts"]["removed"])

    def summary(self) -> str:
        c = self.stats["counts"]
        return (f"{c['input']:,} documents: {c['removed']:,} semantic duplicates at eps={self.stats['eps']} "
                f"({self.stats['clusters']['k']} clusters; counted over every document, before the lexical "
                f"decisions: a document both stages remove counts in both)")


@dataclass
class EmbedPass:
    ids: pa.Array
    hashes: np.ndarray
    embeddings: np.ndarray
    keep_values: np.ndarray | None
    reused: int = 0
    embedded: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    tokens: np.ndarray | None = None  # int64 (n, 2): token count, truncated 0/1; -1 where not counted
    windows: int = 0
    estimate: dict[str, Any] | None = None


ESTIMATE_LOG_S = 60.0  # an estimated CPU embedding time above this is logged before the long run


def _estimated_documents(files, batch) -> int:
    """Documents in the whole input: exact for Parquet and tables; JSON Lines from the file sizes and the text
    bytes per document of ``batch`` (compressed files: assumed 4x smaller than their text)."""
    import pyarrow.compute as pc

    per_doc = max(int(pc.sum(pc.binary_length(batch.text)).as_py() or 0), 1) / max(len(batch), 1)
    total = 0
    for f in files:
        try:
            if f.fmt == "table":
                total += f.table.num_rows
            elif f.fmt == "parquet":
                total += io.open_parquet(f).metadata.num_rows
            else:
                total += int(io.file_size(f) * (4 if f.compression else 1) / per_doc)
        except Exception:  # noqa: BLE001 - an estimate only; the reader reports bad files
            continue
    return total


def _estimator(files, batch, to_embed: int, emb: "EmbedPass", device: str):
    """The ``on_first_batch`` callback of the first embedding call: extrapolate the first forward pass to the
    rest of the input (this batch's cache-hit rate assumed), record it, log it when it is long."""
    def on_first(fb) -> None:
        left = max(_estimated_documents(files, batch) - batch.row_start, len(batch))
        seconds = fb.estimated_seconds / max(to_embed, 1) * left * to_embed / max(len(batch), 1)
        emb.estimate = {"seconds": seconds, "documents_left": left, "first_batch_texts": fb.texts,
                        "first_batch_seconds": fb.seconds, "tokens_per_s": fb.padded_tokens / max(fb.seconds, 1e-9)}
        if seconds > ESTIMATE_LOG_S:
            logger.warning("semantic: embedding about %s documents on the %s will take about %s (%.0f tokens/s "
                           "measured on the first batch of %d texts); a GPU, a smaller model or the embedding "
                           "cache of an earlier run shorten it", f"{left:,}", device.upper(), duration(seconds),
                           emb.estimate["tokens_per_s"], fb.texts)
    return on_first


def _embed_pass(files, cfg: SemanticConfig, run: RunConfig, device: str, cache: EmbeddingCache | None,
                report, given: np.ndarray | None = None,
                rows: np.ndarray | None = None) -> tuple[EmbedPass, Any]:
    """Stream the input once: hash every text, take cached rows, embed the rest (model loaded lazily,
    only if something is missing), count tokens. With ``given`` (precomputed embeddings, one row per input
    document), take its rows. With ``rows`` (bool, one per input document), only those documents: the others
    are read past, never embedded."""
    from tqdm.auto import tqdm

    dtype = embedding_dtype(cfg, device)
    kc = semantic_keep_column(cfg.keep)
    ids, hashes, parts, values, tokens = [], [], [], [], []
    model = None
    out = EmbedPass(pa.array([], pa.string()), np.zeros((0, 2), np.uint64), np.zeros((0, 0), np.float32), None)
    t_read = t_embed = t_model = 0.0
    t = time.perf_counter()
    # the bar and a line every HEARTBEAT_S move with each forward pass, not once per input batch (one batch of
    # a small corpus is the whole of a long embedding)
    beat = Heartbeat(logger, "semantic: embedding", unit="documents", start=False)
    with tqdm(desc="semantic: embed", unit="doc", unit_scale=True, disable=not run.progress, leave=False) as bar, \
            beat:
        moved = [0.0]  # documents the bar moved by during this input batch

        def advance(k: float) -> None:
            moved[0] += k
            bar.update(k)
            beat.update(k)

        for batch in io.iter_batches(files, id_field=run.id_field, text_field=run.text_field,
                                     batch_bytes=batch_bytes(run.batch_bytes, "cpu"), on_error=run.on_error,
                                     keep_column=kc, keep_name="SemanticConfig.keep", report=report):
            t0 = time.perf_counter()
            t_read += t0 - t
            seen = len(batch)
            if beat.total is None:
                beat.total = _estimated_documents(files, batch)
            moved[0] = 0.0
            batch, at = selected_rows(batch, rows)
            if not len(batch):
                advance(seen)
                t = time.perf_counter()
                continue
            h = text_hashes(batch.text)
            tok = cache.lookup_tokens(h) if cache is not None else np.full((len(h), 2), -1, np.int64)
            if given is not None:
                emb = given[batch.row_start:batch.row_start + seen]
                if emb.shape[0] != seen:
                    raise ConfigError(f"embeddings has {given.shape[0]} rows but the input has more documents; "
                                      "pass one row per input document, in input order")
                emb = emb if at is None else emb[at]
            else:
                found, cached = cache.lookup(h) if cache is not None else (np.zeros(len(h), bool), None)
                missing = np.flatnonzero(~found)
                recount = np.flatnonzero(found & (tok[:, 0] < 0))  # cached by a run that did not count
                if (missing.shape[0] or recount.shape[0]) and model is None:
                    t_load = time.perf_counter()
                    phase(logger, "semantic: loading the model %s on the %s", cfg.model, device.upper())
                    model = load_model(cfg.model, device, max_seq_length=cfg.max_seq_length, dtype=dtype)
                    t_model = time.perf_counter() - t_load
                new = None
                if missing.shape[0]:
                    texts = batch.text.take(pa.array(missing, pa.int64())).to_pylist()
                    first = _estimator(files, batch, len(missing), out, device) \
                        if device == "cpu" and out.estimate is None else None
                    if out.embedded == 0:
                        phase(logger, "semantic: embedding the documents (about %s in the input)",
                              f"{beat.total:,}")
                    res = embed_documents(model, texts, batch_size=cfg.batch_size, device=device,
                                          chars_per_token=cfg.chars_per_token, long_text=cfg.long_text,
                                          window_overlap=cfg.window_overlap, on_first_batch=first,
                                          on_progress=advance)
                    new = res.embeddings
                    tok[missing] = np.stack([res.tokens, res.truncated], axis=1)
                    out.windows += res.windows
                if recount.shape[0]:
                    mean = cfg.long_text == "mean"
                    n_tok, trunc = count_tokens(model, batch.text.take(pa.array(recount, pa.int64())).to_pylist(),
                                                chars_per_token=0 if mean else cfg.chars_per_token)
                    tok[recount] = np.stack([n_tok, trunc & (not mean)], axis=1)
                d = new.shape[1] if new is not None else cached.shape[1]
                emb = np.empty((len(h), d), np.float32)
                if found.any():
                    emb[found] = cached
                if new is not None:
                    emb[missing] = new
                out.reused += int(found.sum())
                out.embedded += int(missing.shape[0])
            ids.append(batch.ids)
            hashes.append(h)
            parts.append(emb)
            tokens.append(tok)
            if kc:
                values.append(np.asarray(batch.keep_values, np.float64))
            advance(seen - moved[0])  # the cached and unselected documents, and any rounding of "mean"
            t = time.perf_counter()
            t_embed += t - t0
    all_ids = pa.chunked_array(ids, pa.string()).combine_chunks() if ids else pa.array([], pa.string())
    io.check_unique_ids(all_ids, files, id_field=run.id_field, text_field=run.text_field, on_error=run.on_error)
    n = len(all_ids) if rows is None else int(rows.shape[0])
    if rows is not None and report.rows != n:
        raise ConfigError(f"rows has {n} flags but the input has {report.rows} documents; pass one per input "
                          "document, in input order")
    if given is not None and given.shape[0] != n:
        raise ConfigError(f"embeddings has {given.shape[0]} rows but the input has {n} documents; pass one row per "
                          "input document, in input order")
    d = parts[0].shape[1] if parts else (given.shape[1] if given is not None else 0)
    out.ids = all_ids
    out.hashes = np.concatenate(hashes) if hashes else np.zeros((0, 2), np.uint64)
    out.embeddings = np.concatenate(parts) if parts else np.zeros((0, d), np.float32)
    out.keep_values = np.concatenate(values) if kc and values else (np.zeros(0) if kc else None)
    out.tokens = np.concatenate(tokens) if tokens else np.zeros((0, 2), np.int64)
    out.timings = {"read": t_read, "load_model": t_model, "embed": t_embed - t_model}
    return out, model


def selected_rows(batch, rows: np.ndarray | None) -> tuple[Any, np.ndarray | None]:
    """(the batch's documents that ``rows`` selects, their positions in the batch; None: all of them)."""
    if rows is None:
        return batch, None
    at = np.flatnonzero(rows[batch.row_start:batch.row_start + len(batch)])
    if at.shape[0] == len(batch):
        return batch, None
    take = pa.array(at, pa.int64())
    return dataclasses.replace(batch, ids=batch.ids.take(take), text=batch.text.take(take),
                               keep_values=None if batch.keep_values is None else batch.keep_values[at],
                               scope=None if batch.scope is None else batch.scope.take(take)), at


def token_summary(tokens: np.ndarray | None, seq: int | None) -> dict[str, int]:
    """The token counts of some documents (int64 (n, 2): count, truncated 0/1; -1 where not counted) as sums
    that merge by addition (``max_tokens`` by maximum): documents counted, over ``seq`` tokens, truncated."""
    known = tokens[:, 0] >= 0 if tokens is not None else np.zeros(0, bool)
    counts, trunc = (tokens[known, 0], tokens[known, 1] > 0) if tokens is not None else (known, known)
    return {"documents": int(known.sum()), "over": int((counts > seq).sum()) if seq else 0,
            "truncated": int(trunc.sum()), "max_tokens": int(counts.max()) if counts.shape[0] else 0}


def long_text_stats(cfg: SemanticConfig, summary: dict[str, int], seq: int | None,
                    windows: int) -> dict[str, Any] | None:
    """semantic.json's ``long_text`` from a ``token_summary`` (None: no document counted)."""
    n = summary["documents"]
    if not n:
        return None
    cut = cfg.long_text == "truncate" and cfg.chars_per_token > 0 and seq
    return {"policy": cfg.long_text, "max_seq_length": seq,
            "window_overlap": cfg.window_overlap if cfg.long_text == "mean" else None,
            "documents": n, "over_max_seq_length": summary["over"], "over_fraction": summary["over"] / n,
            "truncated": summary["truncated"], "truncated_fraction": summary["truncated"] / n,
            "max_tokens": summary["max_tokens"],
            "tokens_counted_on": (f"the first chars_per_token x max_seq_length = {cfg.chars_per_token * seq:,} "
                                  "characters; a longer text's count is scaled by its length (an estimate)")
            if cut else "the whole text",
            "windows_embedded": windows if cfg.long_text == "mean" else None}


def _long_text_stats(cfg: SemanticConfig, emb: EmbedPass, seq: int | None) -> dict[str, Any] | None:
    """semantic.json's ``long_text``: the policy, and the documents longer than max_seq_length tokens."""
    return long_text_stats(cfg, token_summary(emb.tokens, seq), seq, emb.windows)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """float32 copy of x (n, d) with L2-normalised rows (zero rows stay zero)."""
    x = np.array(x, dtype=np.float32, copy=True)
    if x.ndim != 2:
        raise ConfigError(f"embeddings must be a 2-d (n, d) array, got shape {x.shape}")
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    x /= np.where(norms > 0, norms, 1.0)[:, None].astype(np.float32)
    return x


@dataclass
class Source:
    """Where the embeddings come from: a model (``path``, its ``fingerprint``, the ``dtype`` it runs in) or the
    caller's rows (``given``, L2-normalised); the embedding cache's ``key`` / ``meta`` and the cache itself."""

    given: np.ndarray | None
    path: str | None
    fingerprint: str | None
    dtype: str
    key: str
    meta: dict[str, Any]
    cache: EmbeddingCache | None


def source_stage(cfg: SemanticConfig, device: str, output_dir: str | None,
                 embeddings: np.ndarray | None) -> Source:
    """The model's path and fingerprint (failing fast, before reading anything) and the cache, or the
    precomputed rows."""
    given = _unit_rows(embeddings) if embeddings is not None else None
    if given is None:
        path = resolve_model_path(cfg.model)
        fingerprint = model_fingerprint(path)
        dtype = embedding_dtype(cfg, device)
        key, meta = EmbeddingCache.key_for(fingerprint, cfg.max_seq_length, dtype, cfg.chars_per_token,
                                           cfg.long_text, cfg.window_overlap)
    else:
        path = fingerprint = None
        dtype = "float32"
        key, meta = "precomputed", {"format": CACHE_FORMAT, "key": "precomputed", "model_fingerprint": None}
    cache_dir = cfg.cache_dir or (os.path.join(output_dir, "semantic", "embeddings") if output_dir is not None
                                  else None)
    cache = EmbeddingCache(cache_dir, key, meta) if cache_dir else None
    return Source(given, path, fingerprint, dtype, key, meta, cache)


def long_text_stage(cfg: SemanticConfig, src: Source, emb: EmbedPass, model: Any) -> tuple[int | None, dict | None]:
    """(the effective max_seq_length, semantic.json's ``long_text``); warns when documents were truncated."""
    cache = src.cache
    seq = int(model.max_seq_length) if model is not None and model.max_seq_length else (
        (cache.found_meta.get("effective_max_seq_length") if cache is not None else None) or cfg.max_seq_length)
    long_text = _long_text_stats(cfg, emb, seq)
    if long_text and long_text["truncated"]:
        warn_truncated(long_text, seq)
    return seq, long_text


def warn_truncated(long_text: dict[str, Any], seq: int | None) -> None:
    """The warning of a run whose model embedded only the beginning of some documents (``long_text``)."""
    logger.warning("semantic: %s of %s documents (%.1f%%) are longer than max_seq_length = %s tokens (up to %s "
                   "counted): the model embedded only their beginning; long_text='mean' (--long-text mean) "
                   "embeds whole texts", f"{long_text['truncated']:,}", f"{long_text['documents']:,}",
                   100 * long_text["truncated_fraction"], seq, f"{long_text['max_tokens']:,}")


def cache_stage(src: Source, emb: EmbedPass, seq: int | None) -> str | None:
    """Write this run's rows to the embedding cache (unless every row was reused in the same order); returns
    the embeddings' path (None without a cache)."""
    cache = src.cache
    if cache is None:
        return None
    n = len(emb.ids)
    if (emb.embedded or src.given is not None or cache.rows != n or n == 0 or not cache.has_tokens
            or not np.array_equal(np.load(os.path.join(cache.path, "text_hashes.npy")), emb.hashes)):
        return cache.write(emb.hashes, emb.embeddings, emb.tokens if src.given is None else None,
                           effective_max_seq_length=seq if src.given is None else None)
    return os.path.join(cache.path, "embeddings.npy")


def semantic_stats(cfg: SemanticConfig, run: RunConfig, device: str, files, report, src: Source, emb: EmbedPass,
                   seq: int | None, long_text: dict | None, emb_path: str | None, decided: dict[str, Any],
                   timings: dict[str, float]) -> dict[str, Any]:
    """semantic.json: the shared header (``run.header``), then the model, the cache and the decisions' stats."""
    decided = dict(decided)
    stats = header("semantic", device=device, threads=set_threads(None), config=cfg.to_dict(), files=files,
                   read=report, counts=decided.pop("counts"), timings=timings, packages=SEMANTIC_PACKAGES)
    stats.update({
        "model": {"name": cfg.model if src.given is None else "precomputed", "path": src.path,
                  "fingerprint": src.fingerprint, "dtype": src.dtype, "max_seq_length": seq,
                  "dim": int(emb.embeddings.shape[1]) if emb.embeddings.ndim == 2 else 0},
        "input_paths": [f.path for f in files],
        "io": {"id_field": run.id_field, "text_field": run.text_field, "on_error": run.on_error},
        "embedding_cache": {"dir": src.cache.path if src.cache else None, "key": src.key, "reused": emb.reused,
                            "embedded": emb.embedded, "embeddings_path": emb_path},
        "long_text": long_text,
        "embed_estimate": emb.estimate,
        **decided,
        "embed_docs_per_s": emb.embedded / timings["embed"] if emb.embedded and timings["embed"] > 0 else None,
    })
    return stats


def write_stage(out: str, table: pa.Table, centroids: np.ndarray, stats: dict[str, Any]) -> None:
    """semantic_decisions.parquet (``SEMANTIC_SCHEMA``), semantic/centroids.npy and semantic.json."""
    write_table(table, SEMANTIC_SCHEMA, os.path.join(out, "semantic_decisions.parquet"))
    write_centroids(out, centroids)
    write_semantic_json(out, stats)


def write_centroids(out: str, centroids: np.ndarray) -> None:
    """OUT/semantic/centroids.npy."""
    with io.atomic_path(os.path.join(out, "semantic", "centroids.npy")) as tmp, open(tmp, "wb") as fh:
        np.save(fh, centroids)


def write_semantic_json(out: str, stats: dict[str, Any]) -> None:
    """OUT/semantic.json (written last: ``run.finish``)."""
    finish(out, stats, name="semantic.json")


def semantic_dedup(source: Any, cfg: SemanticConfig | None = None, output_dir: str | os.PathLike | None = None,
                   device: str = "cpu", *, run: RunConfig | None = None,
                   embeddings: np.ndarray | None = None, rows: np.ndarray | None = None) -> SemanticResult:
    """Semantic deduplication of ``source`` (path(s)/glob(s)/directory, pyarrow Table or pandas DataFrame): the
    stages of the module docstring, timed into semantic.json's ``timings_s``.

    The input is streamed with ``io.iter_batches``. The embeddings of all rows are held in memory
    (n x d x 4 bytes). With ``output_dir`` it writes semantic_decisions.parquet, semantic.json,
    semantic/centroids.npy and the embedding cache (default OUT/semantic/embeddings/<key>/, this run's rows in
    input order). The Ray engine's run is the ``Semantic`` step's with ``Env(engine="ray")``
    (distributed/semantic.py: embeddings per file, k-means in one task, clusters compared per range).

    Args:
        source: path(s), glob(s) or a directory, a pyarrow Table or a pandas DataFrame.
        cfg: the ``SemanticConfig`` (None: its defaults).
        output_dir: where the outputs go (None: in memory).
        device: "cpu", "cuda" or "auto".
        run: its id_field / text_field / on_error / batch_bytes read the input (default: ``RunConfig()``).
        embeddings: precomputed float32 (n, d), one row per input document in input order (L2-normalised
            here); then no model is loaded and ``cfg.model`` is ignored.
        rows: bool, one per input document: only these documents are embedded and decided (a composed run's
            survivors of the earlier steps: ``pipeline.deduplicate``); the decisions list them alone.

    Returns:
        The ``SemanticResult``: the decisions, the statistics (semantic.json), the embeddings and centroids.

    Raises:
        ConfigError: ``embeddings`` or ``rows`` with another number of rows than the input has documents, or
            ``embeddings`` not 2-d.
        GpuDedupError: a model, input or device that cannot be used (the message names it).
    """
    cfg = cfg or SemanticConfig()
    run = run or RunConfig()
    device = resolve_torch_device(device)
    steps = Steps()
    out = os.fspath(output_dir) if output_dir is not None else None
    files = io.source_files(source)
    src = source_stage(cfg, device, out, embeddings)
    report = io.ReadReport()
    emb, model = _embed_pass(files, cfg, run, device, src.cache if src.given is None else None, report, src.given,
                             None if rows is None else np.asarray(rows, bool))
    logger.info("semantic: %d documents embedded, %d reused from the cache", emb.embedded, emb.reused)
    seq, long_text = long_text_stage(cfg, src, emb, model)
    table, decided, clusters = decide_embeddings(emb.ids, emb.embeddings, cfg, device, emb.keep_values)
    steps.timings.update({**emb.timings, **decided.pop("timings_s")})
    emb_path = None
    if src.cache is not None:
        with steps("cache_write"):
            emb_path = cache_stage(src, emb, seq)
    steps.total()
    stats = semantic_stats(cfg, run, device, files, report, src, emb, seq, long_text, emb_path, decided,
                           steps.timings)
    if out is not None:
        write_stage(out, table, clusters.centroids, stats)
    result = SemanticResult(table, stats, emb.embeddings, clusters.centroids, out)
    logger.info("%s in %.2f s", result.summary(), steps.timings["total"])
    return result
