"""``filter --engine ray``: the filter as per-file tasks (``filter_tasks.py``) whose outputs equal the local engine's
byte for byte, the global selections found from mergeable per-file summaries. The driver holds file lists, per-file
counts and the tasks' small results (a merged histogram of one order statistic's bin at a time); the tasks write
every per-document table as per-file parts, streamed into OUT's one file per table at the end.

    score      per file: pass 1 (a GPU actor each with --device cuda), then the ids' check per hash range (the local
               engine's error, word for word, on a repeated id)
    rank       (perplexity keep=F, buckets) the populations the rank selections rank, then the unit of each cut
               (``ranks.Selection``: a histogram round, then the one bin holding the cut fetched): every file's
               decisions cut there (``filter_tasks.CutRanks``), the units per language of run.json's statistics
    dsir       the raw corpus's features (added from pass 1's counts), each file's pool, then its weights and keys
               (the Gumbel noise of the run's one stream from the file's first pool position), the k-th key
    final      every file's decisions, scores.parquet part and run.json counts; the sources' tally (over the limit:
               no kept records, as locally)
    stats      run.json's order statistics (the retention table's percentiles, the audit's picks), the documents a
               threshold keeps
    write      filtered/ and the cut logs' parts per file, the audit's texts, DSIR's selected features; OUT's
               scores.parquet, paragraphs.parquet, removed_*.parquet streamed from the parts; run.json, report.html

Resume: pass 1 and every task that writes outputs leave done markers (``rows.run_once``) keyed by the settings and
every earlier pass's results; a killed worker's task runs again over its idempotent writes.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..errors import ConfigError, RunError
from ..filters.decide import FilterResult
from . import filter_tasks as ft
from .outputs import part_path
from .perfile import offsets_of, session, shifted_parts, task_paths
from .ranks import Selection, lerp, percentile_points
from .shuffle import run_key

logger = logging.getLogger(__name__)


def filter_files(source: Any, cfg: Any, out: str | None, guard: Any, *, work: str, workers: int | None,
                 address: str | None, resume: bool, dataset: bool = True) -> Any:
    """``filters.stage.filter_corpus`` on the Ray engine (module doc) into ``out`` (owned by the caller; None: in
    memory), the tasks' parts in ``work``; with ``dataset`` OUT/scores/ as the tasks' per-file parts (outputs.py),
    else OUT/scores.parquet streamed from them. Returns its ``FilterResult``, whose scores are read when asked
    for.

    Raises:
        ConfigError: paragraph or line cuts with a URL work dir (their logs' parts are local files).
        GpuDedupError: what the local engine raises (a task's error is raised as it is).
    """
    from ..filters.dsir_step import DsirStep
    from ..runtime.run import Steps, resources

    if io.is_url(work) and (cfg.paragraph_action == "remove" or cfg.c4_remove_lines):
        raise ConfigError(f"--work-dir {work!r} is a URL: paragraph and line cuts on the Ray engine log their parts "
                          "in a local work dir; pass a shared path")
    steps = Steps()
    with steps("score"):
        device, threads = resources(cfg.device, cfg.threads)
        files = io.source_files(source)
        dsir = DsirStep(cfg, device) if cfg.dsir_target else None  # the target's model, fitted here
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("progress", "threads")}
    job = ft.FilterJob(dataclasses.replace(cfg, progress=False), device, files, task_paths(work),
                       run_key([settings, device, [f.relpath for f in files], "filter"]), threads=cfg.threads)
    run = _Run(cfg, out, guard, steps, device, threads, files, dsir, dataset=dataset and out is not None)
    with session(work, device, workers=workers, address=address, resume=resume, progress=cfg.progress) as s:
        run.session = s
        job = _score(run, job)
        job = _rank(run, job)
        dsir_param = _dsir(run, job) if dsir is not None else None
        with steps("final"):
            run.final = s.map(ft.final, job.keyed(dsir_param, guard.source_field), run.live, dsir_param,
                              guard.source_field)
        job = job.keyed(dsir_param)
        _statistics(run, job)
        _write(run, job)
    return _finish(run, job)


@dataclasses.dataclass
class _Run:
    """One run's driver state: the settings, the steps' timings, and the tasks' results it keeps (per file:
    counts; the order statistics found)."""

    cfg: Any
    out: str | None
    guard: Any
    steps: Any
    device: str
    threads: int
    files: list
    dsir: Any
    session: Any = None
    scored: list = dataclasses.field(default_factory=list)
    live: list = dataclasses.field(default_factory=list)  # the files with rows
    final: list = dataclasses.field(default_factory=list)
    written: list = dataclasses.field(default_factory=list)
    stats: dict = dataclasses.field(default_factory=dict)
    rank_stats: Any = None
    rounds: int = 0
    pct: list = dataclasses.field(default_factory=list)
    dsir_stats: dict | None = None
    dsir_edges: list | None = None
    dataset: bool = False  # OUT/scores/ as per-file parts (outputs.py)


def _score(run: _Run, job: ft.FilterJob) -> ft.FilterJob:
    """Pass 1 and the ids' check; the job with the files' row and paragraph offsets."""
    from .shuffle import key_ranges

    s = run.session
    parts = key_ranges(None, int(s.ray.cluster_resources().get("CPU", 1)), run.files)
    with run.steps("score"):
        run.scored = s.map(ft.score, job.keyed(parts), range(len(run.files)), run.dsir is not None, parts,
                           device=True)
    rows = [r["rows"] for r in run.scored]
    job = dataclasses.replace(job, offsets=offsets_of(rows),
                              para_offsets=offsets_of([r["paragraphs"] for r in run.scored]))
    job = job.keyed([r["stamp"] for r in run.scored], rows)
    if not all(u["unique"] for u in s.map(ft.unique, job, range(parts))):
        _raise_duplicate_ids(run, job, rows)
    # the files with rows; with none, the first (its tasks decide and write a table of no rows, as the local
    # engine's of an input without a document)
    run.live = [fi for fi, n in enumerate(rows) if n] or [0]
    return job


def _raise_duplicate_ids(run: _Run, job: ft.FilterJob, rows: list[int]) -> None:
    """The local engine's error (io.check_unique_ids: the ids, counts, files and lines), from every file's ids:
    per-document state in the driver on this error path only."""
    ids = [job.layout.read_one("fcols", ft.name(fi), ["id"])["id"] for fi in range(len(run.files))]
    ids = pa.chunked_array([c for t in ids for c in t.chunks], pa.string())
    cfg = run.cfg
    io.check_unique_ids(ids, run.files, rows, id_field=cfg.id_field, text_field=cfg.text_field, on_error=cfg.on_error)
    raise RunError("an id check task found a repeated id that the check of all ids did not")  # pragma: no cover


def _select(run: _Run, job: ft.FilterJob, stage: str, ranks: dict) -> Selection:
    """The order statistics ``ranks`` (population -> ranks of its size) over the files' ``stage`` populations."""
    sel = Selection(ranks)
    while not sel.done:
        sel.merge(run.session.stream(ft.round_, job, run.live, stage, sel.requests()))
    run.rounds += sel.rounds
    return sel


def _rank(run: _Run, job: ft.FilterJob) -> ft.FilterJob:
    """The rank selections' cuts (perplexity keep=F, buckets) and run.json's ``perplexity_rank`` (module doc)."""
    from ..filters.dsir import select_count
    from ..filters.selection import rank_summary

    cfg = run.cfg
    if cfg.perplexity_keep is None and not cfg.perplexity_buckets:
        return job
    with run.steps("rank"):
        got = run.session.map(ft.populate, job.keyed("populate"), run.live)
        pops = sorted({p for g in got for p in g["pops"]})
        keep = (lambda m: select_count(m, float(cfg.perplexity_keep))) if cfg.perplexity_keep is not None else None
        bucket = [lambda m, c=c: select_count(m, float(c)) for c in cfg.perplexity_buckets]

        def ranks_of(pop: str):
            kind = pop.split(":", 1)[0]
            if kind == "keep":
                return lambda m: [r for r in (keep(m), keep(m) - 1) if 0 <= r < m]
            if kind == "bucket":
                return lambda m: [r for b in bucket for r in (b(m),) if 0 <= r < m]
            return lambda m: [r for b in bucket for r in (b(m) - 1,) if 0 <= r < m]  # rstat: the bucket bounds

        sel = _select(run, job, "pop_rank", {p: ranks_of(p) for p in pops})
    at = (lambda pop, r: sel.found.get((pop, r)))
    cuts: dict[str, Any] = {}
    for pop in pops:
        m = sel.sizes[pop]
        if pop.startswith("keep:"):
            k = keep(m)
            cuts[pop] = list(at(pop, k)) if k < m else None
        elif pop.startswith("bucket:"):
            cuts[pop] = [list(at(pop, b(m))) if b(m) < m else None for b in bucket]
    unit = next((p.split(":")[1] for p in pops if p.startswith("keep:")), "document")
    units: dict[str, int] = {}
    for g in got:
        for k, v in g["units"].items():
            units[k] = units.get(k, 0) + v

    def summary(group: str) -> dict[str, Any]:
        kp, rs = f"keep:{unit}:{group}", f"rstat:{group}"
        return rank_summary(cfg, units.get(group, 0), sel.sizes.get(kp, 0), sel.sizes.get(rs, 0),
                            lambda r: at(kp, r)[0], lambda r: at(rs, r)[0])

    run.rank_stats = summary("") if not cfg.perplexity_lang else \
        {"by_language": {code: summary(code) for code, _ in cfg.perplexity_lang}}
    return dataclasses.replace(job, cuts=cuts).keyed(cuts)


def _dsir(run: _Run, job: ft.FilterJob) -> dict[str, Any]:
    """DSIR's selection (module doc): what every file's final task selects, and run.json's ``dsir`` but the
    selected documents' features (the write tasks count them)."""
    from ..config import is_int
    from ..filters.dsir import BagModel, select_count, weight_edges

    cfg, d, s = run.cfg, run.dsir, run.session
    with run.steps("dsir"):
        for r in run.scored:
            d.raw_counts += np.asarray(r["dsir_counts"], np.float64)  # whole numbers: exact in any order
        models = (BagModel.from_counts(d.target_counts, d.cfg.alpha), BagModel.from_counts(d.raw_counts, d.cfg.alpha))
        pools = [p["pool"] for p in s.map(_pool, job, run.live)]
        starts = offsets_of(pools)
        weighed = s.map(ft.weigh, job.keyed("weigh", starts), run.live, s.ray.put(models), device=True,
                        args_of=lambda fi: (starts[run.live.index(fi)],))
        if any(w["extra_draws"] for w in weighed):
            raise RunError("a Gumbel draw of DSIR's noise was rejected by NumPy (once in 2**53 draws): the Ray "
                           "engine's per-file streams would no longer be the local engine's; run this filter with "
                           "--engine local")
        pool, eligible = sum(pools), sum(w["eligible"] for w in weighed)
        k = select_count(pool, cfg.select) if pool else 0
        warning = None
        if is_int(cfg.select) and cfg.select > pool:
            warning = (f"asked to select {cfg.select:,} documents, but only {pool:,} passed every other test; all "
                       f"{pool:,} are kept (DSIR removes none)")
            logger.warning("DSIR: %s", warning)
        kk = min(k, eligible)
        if 0 < kk < k:
            logger.warning("gumbel_topk: %d documents asked for, only %d have a finite log weight", k, eligible)
        param: dict[str, Any] = {"select": "none" if kk == 0 else "all" if kk >= eligible else "cut"}
        if param["select"] == "cut":
            param["cut"] = list(_select(run, job, "pop_dsir", {"dsir": lambda m: [kk]}).found[("dsir", kk)])
        lo = [w["min"] for w in weighed if w["min"] is not None]
        hi = [w["max"] for w in weighed if w["max"] is not None]
        param["edges"] = run.dsir_edges = weight_edges(min(lo) if lo else None, max(hi) if hi else None).tolist()
    run.dsir_stats = {"target": list(cfg.dsir_target), "target_documents": d.target_docs, "target_screen": d.screen,
                      "pool": int(pool), "requested": cfg.select, "selected": int(kk),
                      **({"warning": warning} if warning else {}), "order": "among the documents every other test kept"}
    return param


def _pool(job: ft.FilterJob, fi: int) -> dict[str, Any]:
    """File ``fi``'s DSIR pool: its documents every other test keeps."""
    return {"pool": int(ft.decided(job, fi)[1].sum())}


def _statistics(run: _Run, job: ft.FilterJob) -> None:
    """run.json's counts, retention table and order statistics, and the audit's percentile picks, from the final
    tasks' results (module doc)."""
    from ..filters.decide import directions
    from ..filters.selection import AUDIT_PERCENTILES, RETENTION_POINTS

    fin = run.final
    ranges: dict[str, list] = {}
    for f in fin:
        for c, (cnt, lo, hi) in f["ranges"].items():
            r = ranges.setdefault(c, [0, None, None])
            r[0] += cnt
            r[1] = lo if r[1] is None else (r[1] if lo is None else min(r[1], lo))
            r[2] = hi if r[2] is None else (r[2] if hi is None else max(r[2], hi))
    q = np.linspace(0, 100, RETENTION_POINTS)

    def ranks_of(pop: str):
        kind, col = pop.split(":", 1)
        if kind == "pct":
            return lambda m: [int(np.floor(p / 100 * (m - 1) + 0.5)) for p in AUDIT_PERCENTILES] if m else []
        cnt, lo, hi = ranges[col]
        if not cnt or (lo >= 0.0 and hi <= 1.0):
            return lambda m: []
        return lambda m: sorted(set(np.concatenate(percentile_points(m, q)[:2]).tolist()))

    pops = sorted({p for f in fin for p in f["pops"]})
    with run.steps("stats"):
        sel = _select(run, job, "pop_stats", {p: ranks_of(p) for p in pops})
        columns = fin[0]["columns"] if fin else []
        for c in columns:  # scores.parquet's order, as selection.percentile_picks
            m = sel.sizes.get(f"pct:{c}", 0)
            for p, r in zip(AUDIT_PERCENTILES, ranks_of(f"pct:{c}")(m)):
                run.pct.append((c, int(p), sel.found[(f"pct:{c}", r)][1]))
        grid: dict[str, tuple[str, list[float]]] = {}
        for c, d in directions(run.scored[0]["described"]).items():
            if c not in ranges or not ranges[c][0]:
                continue
            cnt, lo, hi = ranges[c]
            if lo >= 0.0 and hi <= 1.0:
                ts = np.linspace(0.0, 1.0, RETENTION_POINTS)
            else:
                a, b, t = percentile_points(cnt, q)
                ts = np.unique(lerp([sel.found[(f"ret:{c}", int(i))][0] for i in a],
                                    [sel.found[(f"ret:{c}", int(i))][0] for i in b], t))
            grid[c] = (d, [float(x) for x in ts])
        kept = {c: np.zeros(len(ts), np.int64) for c, (_, ts) in grid.items()}
        if grid:
            for part in run.session.stream(ft.retain, job, run.live, grid):
                for c in kept:
                    kept[c] += np.asarray(part[c], np.int64)
    n = sum(f["counts"]["input"] for f in fin)
    run.stats["retention"] = {c: [{"threshold": float(t), "retention": float(k) / n}
                                  for t, k in zip(grid[c][1], kept[c])] if c in grid else []
                              for c in directions(run.scored[0]["described"]) if c in (columns or [])}


def _write(run: _Run, job: ft.FilterJob) -> None:
    """The sources' verdict, then every file's outputs and audit texts (module doc)."""
    from ..filters.decide import audit_pools
    from ..io.write import WRITE_HOOKS
    from ..runtime.sources import Tally

    cfg, out = run.cfg, run.out
    tally = Tally()
    for f in run.final:
        tally.merge(Tally.from_dict(f["sources"]))
    run.stats["sources"] = tally.stats(run.guard)
    stopped = bool(run.stats["sources"]["over_limit"])
    documents = out is not None and not stopped
    if documents and cfg.write_filtered:  # the output session journals what the tasks will write
        for f in run.files:
            for hook in WRITE_HOOKS:
                hook(io.output_path(os.path.join(out, "filtered"), f))
    if run.dataset:
        for k in run.live:
            for hook in WRITE_HOOKS:
                hook(part_path(out, "scores", k))
    picks: dict[int, dict[str, list[int]]] = {fi: {"kept": [], "rejected": [], "rows": []} for fi in run.live}
    if out is not None and cfg.audit:
        sides = np.array([f["sides"] for f in run.final], np.int64).reshape(-1, 2)
        for side, drawn in zip(("kept", "rejected"), audit_pools(cfg, int(sides[:, 0].sum()), int(sides[:, 1].sum()))):
            firsts = offsets_of(sides[:, 0 if side == "kept" else 1].tolist())
            at = np.searchsorted(firsts, drawn, side="right") - 1
            for i, p in zip(at.tolist(), drawn.tolist()):
                picks[run.live[i]][side].append(p - firsts[i])
        for _, _, row in run.pct:
            fi = int(np.searchsorted(job.offsets, row, side="right")) - 1
            picks[fi]["rows"].append(row - job.offsets[fi])
    with run.steps("write"):
        from ..filters.decide import writing_note

        writing_note(cfg, sum(f["counts"]["kept"] for f in run.final))
        none = {"kept": [], "rejected": [], "rows": []}
        run.written = run.session.map(ft.write_file, job.keyed(picks, documents, run.dataset), range(len(run.files)),
                                      out if out is None else os.path.abspath(out), documents, run.dsir is not None,
                                      run.dataset, args_of=lambda fi: (picks.get(fi, none),))


def _merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Run.json entries of several files (their numbers added, the rest the first file's)."""
    out: dict[str, Any] = {}
    for p in parts:
        for k, v in p.items():
            if isinstance(v, dict):
                out[k] = _merged([out.get(k, {}), v])
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and k in out:
                out[k] += v
            else:
                out.setdefault(k, v)
    return out


def _finish(run: _Run, job: ft.FilterJob) -> Any:
    """run.json (the local engine's entries, in its order, from the tasks' counts), OUT's one-file tables streamed
    from the parts, the audit's files, report.html; the result."""
    from ..decisions import scores_schema
    from ..filters.decide import audit_stats, filter_stats, finish_filter, lid_prob_note
    from ..filters.dsir import report_of
    from ..filters.paragraphs import describe as describe_paragraphs
    from ..filters.selection import merge_token_counts, retained_tokens, retention_curves, selections

    cfg, out, fin, steps = run.cfg, run.out, run.final, run.steps
    report = io.ReadReport()
    for r in run.scored:
        report.merge(r["report"])
    described = run.scored[0]["described"]
    by: dict[str, int] = {}
    for f in fin:  # in order of first appearance, file after file
        for k, v in f["counts"]["by_reason"].items():
            by[k] = by.get(k, 0) + v
    n, kept = sum(f["counts"]["input"] for f in fin), sum(f["counts"]["kept"] for f in fin)
    if "lid" in described["models"] and not cfg.lang:
        lid_prob_note(cfg, sum(f["lid_prob"] for f in fin))
    stats = filter_stats(cfg, run.device, run.threads, run.files, report, described,
                         {"input": n, "kept": kept, "removed": n - kept, "by_reason": by}, run.stats["retention"],
                         steps.timings)
    if run.dsir_stats is not None:
        d = run.dsir
        selected = np.sum([np.asarray(w["dsir_selected"], np.float64) for w in run.written], axis=0)
        stats["dsir"] = {**run.dsir_stats, "report": report_of(
            d.target_counts, d.raw_counts, selected, d.cfg, sum(f["dsir"]["documents"] for f in fin),
            sum(f["dsir"]["without_features"] for f in fin), np.sum([f["dsir"]["hist"] for f in fin], axis=0),
            np.asarray(run.dsir_edges), (sum(f["dsir"]["selected"] for f in fin),
                                            np.sum([f["dsir"]["hist_selected"] for f in fin], axis=0)))}
    specs = [SimpleNamespace(spec=c, draw_column=f"{c.name}_draw") for c in cfg.classifiers]
    if any(c.retention is not None for c in cfg.classifiers):
        counts: dict[str, list] = {}
        for f in fin:
            for c, v in f["retention"].items():
                counts[c] = [a + b for a, b in zip(counts.get(c, [0, 0, 0.0]), v)]
        stats["stochastic_retention"] = retention_curves(None, SimpleNamespace(classifiers=specs), counts=counts)
    if run.rank_stats is not None:
        stats["perplexity_rank"] = run.rank_stats
    stats["selections"] = selections(cfg, sum(f["ranked"] for f in fin), cfg.paragraph_action == "remove",
                                     run.dsir_stats)
    stats["retained_tokens"] = retained_tokens(None, cfg, None, counts=merge_token_counts([f["tokens"] for f in fin]))
    if cfg.unit == "paragraph":
        stats["paragraph_rules"] = describe_paragraphs(cfg)
    if cfg.perplexity_lang:
        langs = _merged([f["languages"] for f in fin])
        stats["perplexity_by_language"] = {**{lang: langs.get(lang, 0) for lang, _ in cfg.perplexity_lang},
                                           "(no model)": langs.get("", 0)}
    s = run.session
    stats["engine"] = {"name": "ray", "workers": s.workers, "address": s.address, "tasks": len(run.files),
                       "nodes": s.nodes, "rank_rounds": run.rounds,
                       "tasks_reused": sum(1 for r in run.scored if r.get("reused")),
                       "device_workers": len(s.actors),
                       "device_array_backends": sorted({r["array_backend"] for r in run.scored
                                                        if "array_backend" in r})}
    stats["sources"] = run.stats["sources"]
    lay = job.layout
    if out is not None:
        with steps("write"):
            if not run.dataset:  # (a dataset's parts: the write tasks')
                from ..runtime.run import write_tables

                schema = scores_schema(fin[0]["columns"] if fin else ["id", "row", "empty", "keep", "reason"])
                write_tables(shifted_parts(lay, "fscores", job.offsets, shift=False), schema,
                             os.path.join(out, "scores.parquet"))
            written = [w["documents"] for w in run.written if "documents" in w]
            if written and (cfg.paragraph_action == "remove" or cfg.c4_remove_lines):
                _logs(run, job)
            stats.update(_merged(written))
    if out is not None and cfg.audit:
        with steps("audit"):
            audit, percentiles = _audit(run, job)
            io.write_parquet_atomic(audit, os.path.join(out, "audit.parquet"))
            io.write_parquet_atomic(percentiles, os.path.join(out, "audit_percentiles.parquet"))
            stats["audit"] = audit_stats(audit, percentiles)
    steps.total()
    stats["throughput_docs_per_s"] = n / steps.timings["score"] if steps.timings["score"] > 0 else None
    stats["scores"] = {"path": "scores", "layout": "dataset", "parts": len(run.live)} if run.dataset else \
        {"path": "scores.parquet", "layout": "file"}
    finish_filter(out, stats)
    return FilterParts(stats, out, lay, job.offsets)


def _logs(run: _Run, job: ft.FilterJob) -> None:
    """OUT's paragraphs.parquet, removed_paragraphs.parquet or removed_lines.parquet from the write tasks' parts
    (their rows numbered in the file: shifted here), in the local engine's row groups."""
    from ..filters.paragraphs import PARAGRAPHS_FILE, REMOVED_FILE, REMOVED_LINES_FILE, REMOVED_SCHEMA
    from ..runtime.run import write_tables

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    names = [PARAGRAPHS_FILE, REMOVED_FILE] if run.cfg.paragraph_action == "remove" else [REMOVED_LINES_FILE]
    for logname in names:
        paths = [os.path.join(ft.logs_dir(job, fi), logname) for fi in range(len(run.files))]

        def parts(paths=paths):
            for fi, p in enumerate(paths):
                if os.path.exists(p):
                    t = pq.read_table(p)
                    i = t.schema.get_field_index("row")
                    yield t.set_column(i, "row", pc.add(t["row"], pa.scalar(int(job.offsets[fi]), pa.int64())))

        first = next((pq.read_schema(p) for p in paths if os.path.exists(p)), None)
        schema = REMOVED_SCHEMA if logname != PARAGRAPHS_FILE or first is None else first
        write_tables(parts(), schema, os.path.join(run.out, logname))


def _audit(run: _Run, job: ft.FilterJob) -> tuple[pa.Table, pa.Table]:
    """audit.parquet and audit_percentiles.parquet: the sampled and picked rows of scores.parquet (each file's part
    read for its rows) with the write tasks' texts."""
    from ..filters.decide import audit_tables

    offs = job.offsets
    texts = {int(offs[fi]) + int(r): t for fi, w in enumerate(run.written) for r, t in w["texts"].items()}
    sample = [int(offs[fi]) + r for fi, w in enumerate(run.written) for r in w["audit"]]
    prow = [r for _, _, r in run.pct]
    return audit_tables(_rows(run, job, sample), [texts[r] for r in sample], run.pct, _rows(run, job, prow),
                        [texts[r] for r in prow])


def _rows(run: _Run, job: ft.FilterJob, rows: list[int]) -> pa.Table:
    """scores.parquet's rows ``rows`` (in that order), from the parts of the files holding them."""
    from ..decisions import scores_schema

    want = np.unique(np.asarray(rows, np.int64))
    files = np.searchsorted(job.offsets, want, side="right") - 1
    parts = [job.layout.read_one("fscores", ft.name(fi)).take(pa.array(want[files == fi] - job.offsets[fi]))
             for fi in np.unique(files).tolist()]
    if not parts:
        return scores_schema(run.final[0]["columns"] if run.final else ["id", "row"]).empty_table()
    return pa.concat_tables(parts).combine_chunks().take(pa.array(np.searchsorted(want, rows), pa.int64()))


class FilterParts(FilterResult):
    """A Ray run's ``FilterResult``: its scores read from OUT/scores.parquet (or the tasks' parts) the first time
    they are asked for (a pipeline's verdicts name every document; the command line never asks)."""

    def __init__(self, stats: dict, out: str | None, layout: Any, offsets: list[int]):
        self.stats, self.output_dir = stats, out
        self._layout, self._offsets, self._table = layout, offsets, None

    @property
    def scores(self) -> pa.Table:  # type: ignore[override]
        if self._table is None:
            self._table = self._read(None)
        return self._table

    def columns(self, names: list[str]) -> pa.Table:
        """The columns ``names`` alone, read (a pipeline's verdicts need 3 of the ~20 columns)."""
        return self._table.select(names) if self._table is not None else self._read(names)

    def _read(self, names: list[str] | None) -> pa.Table:
        import pyarrow.parquet as pq

        if self.output_dir is not None:
            return pq.read_table(os.path.join(self.output_dir, self.stats["scores"]["path"]), columns=names)
        return pa.concat_tables(list(shifted_parts(self._layout, "fscores", self._offsets, columns=names,
                                                   shift=False))).combine_chunks()
