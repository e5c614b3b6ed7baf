"""Exact-substring dedup on the Ray engine: every chunk pair's suffix array a task (``--chunk-tokens``, or the chunks
``--memory-budget`` chooses), every file tokenized and cut by its own tasks; substring_spans and substring_docs
(the local engine's rows, as a dataset of per-file parts or, with --table-layout file, its files byte for byte) and
substring_deduplicated/ equal the local engine's (substring/ has the rule: tokens, keep order, windows, the seam
rule; these tasks call its functions).

    tokens  per file: its batches tokenized (``dedup.tokenize``, the local engine's batches): each token's
            identity and byte range, each document's id, length, keep value and token count; with a memory
            budget, the first document too long for one suffix array (``dedup.too_long_in``)
    plan    one task: the keep order of every document (``decisions.keep_rank`` -> ``spans.KeepOrder``: each
            document's first keep key, by file) and the chunks (``dedup.chunk_tokens_for``,
            ``spans.chunk_documents``): document counts only, never text
    pairs   per pair of chunks (the one chunk when there is one; a GPU actor with device="cuda"): its suffix array
            (``spans.array_earliest``); every token with an equal window there gets the smallest keep key among
            them and the token holding it, sent to the token's file
    cut     per file: the smallest key over every pair (the earliest copy, ``spans.find_matches``' rule), the
            file read again and cut batch by batch (``spans.cut_spans``, ``dedup.cut_tables``), the kept copies
            found in their files; its spans and documents parts (global rows), its substring_deduplicated/ file;
            in the dataset layout (the Ray default, ``outputs.layout_of``) the parts are OUT/substring_spans/ and
            OUT/substring_docs/ ``part-<k>.parquet`` (every file, an empty one too), in the work dir otherwise
    driver  substring_dedup.json from the tasks' counts, seams and suffix-array statistics; with --table-layout
            file the tables streamed from the work dir's parts in the local engine's row groups
            (``run.write_tables``): the only layout whose rows pass through the driver

Without ``--chunk-tokens`` (and a memory budget that fits everything) there is one chunk: one task builds the one
suffix array, as the local engine does; chunks make the pairs tasks (c(c - 1) / 2 of them).
"""
from __future__ import annotations

import logging
import os
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..substring.dedup import DOCS_TABLE, OUTPUT_DIR, SPANS_TABLE  # its names in OUT (the cut task's reuse check)
from .outputs import cut_reused, journal_parts, layout_of, table_stats, write_part
from .perfile import offsets_of
from .shuffle import file_of
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

_TOK = pa.schema([("ident", pa.uint64()), ("start", pa.int64()), ("end", pa.int64())])
_EARLIEST = pa.schema([("t", pa.int64()), ("best", pa.int64()), ("src", pa.int64())])
_TOKENIZERS: dict[str, Any] = {}  # a worker process's loaded tokenizers


def _batches(job: ProgramJob, fi: int, report: io.ReadReport | None = None):
    from ..substring.dedup import read_batch_bytes

    cfg = job.cfg
    return io.iter_batches([job.files[fi]], id_field=cfg.id_field, text_field=cfg.text_field,
                           batch_bytes=read_batch_bytes(cfg), on_error=cfg.on_error, keep_column=cfg.keep_column,
                           report=report)


def _tokenizer(path: str | None):
    from ..substring.tokens import load_tokenizer

    if path is None:
        return None
    if path not in _TOKENIZERS:
        _TOKENIZERS[path] = load_tokenizer(path)
    return _TOKENIZERS[path]


@task("substring_tokens")
def substring_tokens(job: ProgramJob, fi: int) -> dict[str, Any]:
    """File ``fi`` tokenized: its tokens and its documents (module doc)."""
    from ..io.text import arrow_text_buffers
    from ..substring.dedup import tokenize, too_long_in

    cfg, lay = job.cfg, job.layout
    report = io.ReadReport()
    tok = _tokenizer(cfg.tokenizer)
    ids, lengths, values, counts, parts = [], [], [], [], []
    over = None
    for batch in _batches(job, fi, report):
        text = batch.text.cast(pa.large_string())
        data, offsets = arrow_text_buffers(text)
        toks = tokenize(data, offsets, text, cfg, tok, job.device)
        big = too_long_in(toks, cfg)
        if big is not None and over is None:  # the driver raises the first, in input order
            over = [batch.row_start + big, batch.ids[big].as_py(), int(np.diff(toks.doc_off)[big])]
        ids.append(batch.ids)
        lengths.append(np.diff(offsets))
        counts.append(np.diff(toks.doc_off))
        if cfg.keep_column:
            values.append(np.asarray(batch.keep_values, np.float64))
        parts.append(pa.table({"ident": toks.ident, "start": toks.start, "end": toks.end}, schema=_TOK))
    docs = {"id": pa.chunked_array(ids, pa.string()).combine_chunks() if ids else pa.array([], pa.string()),
            "text_bytes": pa.array(np.concatenate(lengths) if lengths else np.zeros(0, np.int64), pa.int64()),
            "ntok": pa.array(np.concatenate(counts) if counts else np.zeros(0, np.int64), pa.int64())}
    if cfg.keep_column:
        docs["value"] = pa.array(np.concatenate(values) if values else np.zeros(0), pa.float64())
    t = pa.concat_tables(parts) if parts else _TOK.empty_table()
    lay.write(t, "tok", f"f{fi:06d}")
    lay.write(pa.table(docs), "docs", f"f{fi:06d}")
    return {"rows": len(docs["id"]), "tokens": t.num_rows, "report": report.to_dict(), "too_long": over}


@task("substring_plan", per="task")
def substring_plan(job: ProgramJob, key: int) -> dict[str, Any]:
    """The keep order of every document (each one's first keep key, by file) and the chunks."""
    from ..decisions import keep_rank
    from ..substring.dedup import chunk_tokens_for
    from ..substring.spans import KeepOrder, chunk_documents

    cfg, lay = job.cfg, job.layout
    cols = ["id", "text_bytes", "ntok"] + (["value"] if cfg.keep_column else [])
    d = pa.concat_tables([lay.read_one("docs", f"f{fi:06d}", cols) for fi in range(job.nfiles)]).combine_chunks()
    n = d.num_rows
    doc_off = np.concatenate([[0], np.cumsum(d["ntok"].to_numpy())]).astype(np.int64)
    ids = d["id"].combine_chunks()
    chunk_tokens = chunk_tokens_for(doc_off, ids, cfg)
    rank = keep_rank(cfg.keep, n=n, text_bytes=d["text_bytes"].to_numpy(), ids=ids,
                     values=d["value"].to_numpy() if cfg.keep_column else None)
    first = KeepOrder.of(doc_off, rank).first
    offs = job.offs()
    for fi in range(job.nfiles):
        lay.write(pa.table({"first": pa.array(first[offs[fi]:offs[fi + 1]], pa.int64())}), "first", f"f{fi:06d}")
    return {"chunks": [list(c) for c in chunk_documents(doc_off, chunk_tokens)], "chunk_tokens": chunk_tokens}


def _keys(first: np.ndarray, ntok: np.ndarray) -> np.ndarray:
    """int64: the keep keys of some documents' tokens (each document's first key, then consecutive)."""
    within = np.arange(int(ntok.sum()), dtype=np.int64) - np.repeat(np.cumsum(ntok) - ntok, ntok)
    return np.repeat(first, ntok) + within


@task("substring_pairs", per="pair")
def substring_pairs(job: ProgramJob, q: int) -> dict[str, Any]:
    """Pair ``q`` of chunks: one suffix array over their documents (``spans.array_earliest``); each token with an
    equal window gets the smallest keep key and the token holding it, sent to its file."""
    from ..substring.spans import array_earliest

    lay, offs, tok_offs = job.layout, job.offs(), np.asarray(job.extra["token_offsets"], np.int64)
    a, b = job.extra["pairs"][q]
    parts = [job.extra["chunks"][a]] if a == b else [job.extra["chunks"][a], job.extra["chunks"][b]]
    ident, token, key, ntok = [], [], [], []
    for lo, hi in parts:  # documents [lo, hi) of the run, file by file
        for g in range(int(file_of(np.array([lo]), offs)[0]) if hi > lo else 0, job.nfiles):
            if offs[g] >= hi:
                break
            d0, d1 = max(lo, int(offs[g])) - int(offs[g]), min(hi, int(offs[g + 1])) - int(offs[g])
            if d1 <= d0:
                continue
            counts = lay.read_one("docs", f"f{g:06d}", ["ntok"])["ntok"].to_numpy()
            starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            t0, t1 = int(starts[d0]), int(starts[d1])
            ident.append(lay.read_one("tok", f"f{g:06d}", ["ident"])["ident"].to_numpy()[t0:t1])
            token.append(np.arange(t0, t1, dtype=np.int64) + tok_offs[g])
            key.append(_keys(lay.read_one("first", f"f{g:06d}")["first"].to_numpy()[d0:d1], counts[d0:d1]))
            ntok.append(counts[d0:d1])
    counts = np.concatenate(ntok) if ntok else np.zeros(0, np.int64)
    doc_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    token_a, key_a = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (token, key))
    ident_a = np.concatenate(ident) if ident else np.zeros(0, np.uint64)
    t, best, st = array_earliest(doc_off, ident_a, token_a, key_a, job.cfg.min_tokens, job.device)
    by_key = np.argsort(key_a, kind="stable")  # keep keys are distinct: each best names one token
    src = token_a[by_key[np.searchsorted(key_a[by_key], best)]] if best.shape[0] else np.zeros(0, np.int64)
    out = pa.table({"t": pa.array(t, pa.int64()), "best": pa.array(best, pa.int64()), "src": pa.array(src, pa.int64())},
                   schema=_EARLIEST)
    lay.write_split(out, file_of(t, tok_offs), job.nfiles, "earliest", lambda g: f"q{q:06d}-f{g:06d}")
    return {**st, "grouped": int(t.shape[0])}


class _Sources:
    """The kept copies' documents, looked up in the files that hold them (each file read once per cut task)."""

    def __init__(self, job: ProgramJob) -> None:
        self.job, self.files = job, {}

    def _file(self, g: int):
        if g not in self.files:
            lay = self.job.layout
            d = lay.read_one("docs", f"f{g:06d}", ["id", "ntok"])
            starts = np.concatenate([[0], np.cumsum(d["ntok"].to_numpy())]).astype(np.int64)
            self.files[g] = (d["id"].combine_chunks(), starts, lay.read_one("tok", f"f{g:06d}", ["start"])["start"])
        return self.files[g]

    def kept(self, src: np.ndarray):
        """``dedup.Kept`` of global source tokens ``src``."""
        from ..substring.dedup import Kept

        job = self.job
        offs, tok_offs = job.offs(), np.asarray(job.extra["token_offsets"], np.int64)
        r = src.shape[0]
        row, tok, byte = np.zeros(r, np.int64), np.zeros(r, np.int64), np.zeros(r, np.int64)
        ids: list[Any] = [None] * r
        g_of = file_of(src, tok_offs)
        for g in np.unique(g_of).tolist():
            sel = np.flatnonzero(g_of == g)
            gids, starts, start_col = self._file(g)
            local = src[sel] - tok_offs[g]
            doc = np.searchsorted(starts, local, side="right").astype(np.int64) - 1
            row[sel] = doc + offs[g]
            tok[sel] = local - starts[doc]
            byte[sel] = start_col.take(pa.array(local)).to_numpy()
            for i, v in zip(sel.tolist(), gids.take(pa.array(doc)).to_pylist()):
                ids[i] = v
        return Kept(pa.array(ids, pa.string()), row, tok, byte)


@task("substring_cut", valid=cut_reused(OUTPUT_DIR, (SPANS_TABLE, DOCS_TABLE)))
def substring_cut(job: ProgramJob, fi: int, out: str, dataset: bool) -> dict[str, Any]:
    """File ``fi``: the earliest copy of each of its windows over every pair, the file read again and cut; its
    spans and documents parts (``dataset``: OUT's, else the work dir's) and its substring_deduplicated/ file."""
    from ..errors import RunError
    from ..io.text import arrow_text_buffers
    from ..substring.dedup import (
        DOCS_SCHEMA,
        SPANS_SCHEMA,
        cut_tables,
        read_batch_bytes,
        seam_sample,
    )
    from ..substring.spans import NONE, cut_spans
    from ..substring.tokens import Tokens
    from ..text.cutwrite import write_cut_documents

    cfg, lay = job.cfg, job.layout
    row0, tok0 = int(job.offsets[fi]), int(job.extra["token_offsets"][fi])
    n_rows = int(job.offsets[fi + 1]) - row0
    toks = lay.read_one("tok", f"f{fi:06d}")
    ntok = lay.read_one("docs", f"f{fi:06d}", ["ntok"])["ntok"].to_numpy()
    doc_off = np.concatenate([[0], np.cumsum(ntok)]).astype(np.int64)
    keys = _keys(lay.read_one("first", f"f{fi:06d}")["first"].to_numpy(), ntok)
    e = lay.read("earliest", [f"q{q:06d}-f{fi:06d}" for q in range(len(job.extra["pairs"]))], _EARLIEST)
    earliest = np.full(toks.num_rows, NONE, np.int64)
    src = np.zeros(toks.num_rows, np.int64)
    if e.num_rows:  # the smallest key over every pair holding the window (a key names one token)
        t, best, s = e["t"].to_numpy() - tok0, e["best"].to_numpy(), e["src"].to_numpy()
        order = np.lexsort((best, t))
        head = np.r_[True, t[order][1:] != t[order][:-1]]
        pick = order[head]
        earliest[t[pick]], src[t[pick]] = best[pick], s[pick]
    ident, start, end = (toks[c].to_numpy() for c in ("ident", "start", "end"))
    sources = _Sources(job)
    counts: dict[str, Any] = {}
    spans_parts, docs_parts, seams = [], [], []
    r = 0
    for batch in _batches(job, fi):
        data, offsets = arrow_text_buffers(batch.text.cast(pa.large_string()))
        n = offsets.shape[0] - 1
        if r + n > n_rows:
            raise RunError(f"the input changed while substring dedup ran: more than {n_rows} rows of "
                           f"{job.files[fi].relpath} on the second read")
        a, b = int(doc_off[r]), int(doc_off[r + n])
        bt = Tokens(doc_off[r:r + n + 1] - a, start[a:b], end[a:b], ident[a:b])
        spans = cut_spans(bt, earliest[a:b], keys[a:b], cfg.min_tokens)
        kept = sources.kept(src[a:b][spans.tok_start])
        sp, docs, c, (new_text, doc, cs, ce) = cut_tables(data, offsets, row0 + r, batch.ids, bt, spans, kept, cfg)
        spans_parts.append(sp)
        docs_parts.append(docs.drop_columns(["text"]))
        sum_counts(counts, c)
        if len(seams) < cfg.seam_sample:
            for s in seam_sample(new_text, doc, cs, ce, cfg.seam_sample - len(seams)):
                seams.append({**s, "row": s["row"] + row0 + r})
        r += n
    if r != n_rows:
        raise RunError(f"the input changed while substring dedup ran: {r} rows of {job.files[fi].relpath} on the "
                       f"second read, {n_rows} on the first")
    sp = pa.concat_tables(spans_parts) if spans_parts else SPANS_SCHEMA.empty_table()
    with tempfile.TemporaryDirectory(prefix="gpu-dedup-substring-") as tmp:  # the writer reads file rows
        local = os.path.join(tmp, "spans.parquet")
        i = sp.schema.get_field_index("row")
        io.write_parquet_atomic(sp.set_column(i, "row", pa.array(sp["row"].to_numpy() - row0, pa.int64())), local)
        written = write_cut_documents([job.files[fi]], local, os.path.join(out, OUTPUT_DIR), cfg,
                                      min(8 << 20, read_batch_bytes(cfg)))
    if dataset:  # OUT's parts: no row of them passes through the driver
        write_part(sp, SPANS_SCHEMA, out, SPANS_TABLE, fi)
        write_part(pa.concat_tables(docs_parts) if docs_parts else DOCS_SCHEMA.empty_table(), DOCS_SCHEMA, out,
                   DOCS_TABLE, fi)
    else:  # the driver streams the work dir's parts into OUT's one file
        lay.write(sp, "spans", f"f{fi:06d}")
        if docs_parts:
            lay.write(pa.concat_tables(docs_parts), "docs_cut", f"f{fi:06d}")
    return {"out": out, "dataset": dataset, "counts": counts, "seams": seams, "written": written,
            "has_docs": bool(docs_parts)}


def substring_dedup_ray(source: Any, cfg, out: str | None, env):
    """``substring.dedup.substring_dedup`` of ``source`` on the Ray engine (module doc), as the ``Substring`` step
    runs it with ``env.engine == "ray"``: OUT owned as the local run owns it (command "substring"), ``env``'s
    device, cluster, work dir (default OUT/work; its ``substring/`` folder) and ``resume``. Returns the
    ``SubstringResult`` (its tables in ``out``, required: OUT/substring_spans/ and OUT/substring_docs/, or with
    ``env.table_layout`` "file" their .parquet files)."""
    from ..runtime.outputs import input_roots
    from ..runtime.run import owned, ray_dirs, resources
    from ..substring.suffix import require_library

    dataset = layout_of(env.table_layout, "ray") == "dataset"
    out, work = ray_dirs(out, env.work_dir, "substring dedup")
    with owned(out, roots=input_roots(source), command="substring", overwrite=env.overwrite, resume=env.resume):
        device, threads = resources(env.device)
        require_library(device)
        return _substring_ray(source, io.source_files(source), cfg, out, device, threads=threads, work=work,
                              workers=env.workers, address=env.address, resume=env.resume, dataset=dataset)


def _substring_ray(source: Any, files, cfg, out: str, device: str, *, threads: int, work: str,
                   workers: int | None, address: str | None, resume: bool, dataset: bool):
    from ..runtime.run import Steps, finish, write_tables
    from ..substring.dedup import (
        DOCS_FILE,
        DOCS_SCHEMA,
        SPANS_FILE,
        SPANS_SCHEMA,
        STATS_FILE,
        SubstringResult,
        empty_input_error,
        substring_stats,
        throughput_stats,
        too_long,
    )

    out = os.path.abspath(out)
    steps = Steps()
    times = steps.timings
    job = ProgramJob(cfg, device, files, work_root(work, "substring"))
    with program_session(job, workers=workers, address=address, resume=resume, device_stages=True) as r:
        job.run_key = program_key("substring", cfg, device, 1, files)
        with steps("read"):
            tk = r.stage(substring_tokens, range(job.nfiles), device=True)
        job.offsets = offsets_of([t["rows"] for t in tk])
        job.extra["token_offsets"] = offsets_of([t["tokens"] for t in tk])
        read = merged_read(tk)
        if not job.offsets[-1]:
            raise empty_input_error(files, read.to_dict())
        over = next((t["too_long"] for t in tk if t["too_long"] is not None), None)
        if over is not None:
            fi = next(i for i, t in enumerate(tk) if t["too_long"] is not None)
            raise too_long(job.offsets[fi] + over[0], over[1], over[2], cfg)
        with steps("rank"):
            pl = r.stage(substring_plan, [0])[0]
        chunks = pl["chunks"]
        job.extra["chunks"] = chunks
        job.extra["pairs"] = [(0, 0)] if len(chunks) == 1 else \
            [(a, b) for a in range(len(chunks)) for b in range(a + 1, len(chunks))]
        with steps("match"):
            pr = r.stage(substring_pairs, range(len(job.extra["pairs"])), device=True)
        journal_files(out, files, OUTPUT_DIR)
        if dataset:
            journal_parts(out, (SPANS_TABLE, DOCS_TABLE), job.nfiles)
        with steps("cut"):
            cs = r.stage(substring_cut, range(job.nfiles), out, dataset)
        engine = r.engine_stats(workers, address, [tk, [pl], pr, cs])
    lay = job.layout
    if not dataset:
        with steps("write_tables"):
            write_tables((lay.read_one("spans", f"f{fi:06d}") for fi in range(job.nfiles)), SPANS_SCHEMA,
                         os.path.join(out, SPANS_FILE))
            write_tables((lay.read_one("docs_cut", f"f{fi:06d}") for fi in range(job.nfiles)
                          if cs[fi]["has_docs"]), DOCS_SCHEMA, os.path.join(out, DOCS_FILE))
    counts: dict[str, Any] = {}
    written = {"files": 0, "rows_written": 0, "rows_changed": 0}
    seams: list[dict] = []
    for c in cs:
        sum_counts(counts, c["counts"])
        sum_counts(written, c["written"])
        seams += c["seams"][:max(0, cfg.seam_sample - len(seams))]
    suffix = {"chunks": len(chunks), "chunk_tokens": pl["chunk_tokens"], "suffix_arrays": len(pr),
              "positions": sum(p["positions"] for p in pr), "largest_array": max(p["positions"] for p in pr),
              "positions_in_repeats": sum(p["grouped"] for p in pr),
              "seconds_suffix_lcp": sum(p["seconds_suffix_lcp"] for p in pr),
              "seconds_grouping": sum(p["seconds_grouping"] for p in pr)}
    stats = substring_stats(cfg, device, threads, files, read.to_dict(), counts, times, suffix, seams)
    stats["written"] = written
    stats["engine"] = engine
    stats["tables"] = table_stats((SPANS_TABLE, DOCS_TABLE), dataset, job.nfiles)
    throughput_stats(stats, times, counts, spilled=False)

    def report() -> str:
        from ..report.substring import write_substring_report

        return write_substring_report(out, stats)

    finish(out, stats, name=STATS_FILE, report=report, what="substring")
    return SubstringResult(stats, None, None, out)
