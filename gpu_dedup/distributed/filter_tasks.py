"""The Ray engine's filter tasks (``filter.py`` runs them): one function per pass over an input file, each reading and
writing only that file's parts (``shuffle.Layout``, named ``f<file>``), so that the driver holds file lists, per-file
counts and the tasks' small results only.

    score      per file (a GPU actor with --device cuda): pass 1, the local engine's scorers over its batches (rows
               numbered in the file) -> its columns (fcols), paragraphs (fparas), DSIR's raw feature counts, its ids
               by hash range (fids)
    unique     per hash range: whether the ids of every file that fall in it are distinct
    populate   per file: the units each rank selection ranks (``CollectRanks`` running the local decision) -> the
               selections' populations (pop_rank) and the units per language the run.json statistics count
    round      per file: one round of an exact order statistic (``ranks.summarize``) over a stage's populations
    weigh      per file (a GPU actor with --device cuda; DSIR): its documents' log importance weights (the text read
               again) and its pool's Gumbel-perturbed keys: the noise of the local engine's one stream, from the
               pool's first position in the run -> fw, the DSIR population (pop_dsir)
    final      per file: the decisions at every cut (``CutRanks``) and DSIR's -> its scores.parquet part (fscores,
               rows numbered in the run), the run.json counts of its rows, the statistics' populations (pop_stats)
    retain     per file: its documents a single threshold keeps, at each threshold of run.json's retention table
    write_file per file: filtered/ (and its paragraph / line cut logs: parts of OUT's one file each), the texts of
               the audit's documents, DSIR's selected feature counts

``file_columns`` loads a file's columns with its rows numbered in the run and the stochastic retention's uniforms
drawn again (a draw depends on the run's row).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import io
from ..filters.selection import Ranks
from .perfile import FileJob, stamp_of, unchanged
from .ranks import sortable, summarize
from .rows import run_once
from .shuffle import key_partition

_SCORERS: dict[tuple, Any] = {}  # the models, loaded once per worker process and config


@dataclass
class FilterJob(FileJob):
    """A per-file job of the filter: besides ``FileJob``'s, the files' first paragraphs in the run
    (``para_offsets``, after pass 1) and the rank selections' cuts (``cuts``: ``CutRanks``', once found)."""

    para_offsets: list[int] | None = None
    cuts: dict[str, Any] = field(default_factory=dict)


def scorers_of(job: FileJob) -> Any:
    from ..filters.scorers import Scorers

    key = (repr(job.cfg), job.device)
    if key not in _SCORERS:
        _SCORERS.clear()  # one run's models at a time
        _SCORERS[key] = Scorers.load(job.cfg, job.device)
    return _SCORERS[key]


def name(fi: int) -> str:
    return f"f{fi:06d}"


# ------------------------------------------------------------------------------------------ columns
def _table(cols: dict[str, Any]) -> pa.Table:
    """A file's columns as a table (object columns as strings, nulls kept; NaN stays NaN)."""
    return pa.table({k: v if isinstance(v, (pa.Array, pa.ChunkedArray)) else
                     pa.array(v.tolist(), pa.string()) if v.dtype == object else pa.array(v)
                     for k, v in cols.items()})


def _columns(t: pa.Table) -> dict[str, Any]:
    """``_table``'s columns back: the ids an Arrow array, strings object arrays, the rest NumPy's."""
    out: dict[str, Any] = {}
    for k in t.column_names:
        c = t[k].combine_chunks()
        if k == "id":
            out[k] = c
        elif pa.types.is_string(c.type):
            out[k] = np.asarray(c.to_numpy(zero_copy_only=False), dtype=object)
        else:
            out[k] = c.to_numpy(zero_copy_only=False)
    return out


def _paras_table(ps: Any) -> pa.Table:
    import dataclasses

    return _table({f.name: getattr(ps, f.name) for f in dataclasses.fields(ps)})


@run_once("fscore", valid=unchanged)
def score(job: FileJob, fi: int, with_dsir: bool, partitions: int) -> dict[str, Any]:
    """Pass 1 of file ``fi`` (module doc): its columns, paragraphs and ids by hash range as parts; its row and
    paragraph counts, read report, input stamp, DSIR's raw feature counts (exact integers) and its scorers as run.json
    describes them."""
    from ..filters.decide import concat_columns, described
    from ..filters.dsir import DSIRConfig, fit_counts
    from ..filters.paragraphs import ParagraphScores
    from ..filters.scorers import field_values, url_reading
    from ..runtime.device import batch_bytes
    from .stages import id_hashes

    cfg, f, lay = job.cfg, job.files[fi], job.layout
    stamp = stamp_of(f)
    scorers = scorers_of(job)
    report = io.ReadReport()
    parts, paras, counts = [], [], None
    dcfg = DSIRConfig(buckets=cfg.dsir_buckets, seed=cfg.seed, select=cfg.select) if with_dsir else None
    for batch in io.iter_batches([f], id_field=cfg.id_field, text_field=cfg.text_field,
                                 batch_bytes=batch_bytes(cfg.batch_bytes, job.device), on_error=cfg.on_error,
                                 report=report, **url_reading(cfg)):
        parts.append(scorers.columns(batch.text, batch.ids, batch.row_start, urls=batch.scope))
        if "paragraph_scores" in parts[-1]:
            paras.append(parts[-1].pop("paragraph_scores").shift(batch.row_start))
        if dcfg is not None:
            c = fit_counts(batch.text, dcfg, job.device)
            counts = c if counts is None else counts + c
    cols = concat_columns(parts or [scorers.no_rows()])
    n = len(cols["id"])
    if cfg.domain_field:  # one more read: the reader carries one field besides the text
        cols["domain_label"] = field_values([f], cfg, cfg.domain_field)
    lay.write(_table(cols), "fcols", name(fi))
    ps = ParagraphScores.concat(paras)
    if cfg.paragraph_action == "remove":
        lay.write(_paras_table(ps), "fparas", name(fi))
    ids = pa.table({"id": cols["id"]})
    lay.write_split(ids, key_partition(id_hashes(cols["id"]), partitions), partitions, "fids",
                    lambda p: f"{name(fi)}-p{p:04d}")
    return {"rows": n, "paragraphs": int(len(ps.row)), "report": report.to_dict(), "stamp": stamp(),
            "described": described(scorers), "columns": list(cols) if n else None,
            "dsir_counts": None if dcfg is None else
            (counts if counts is not None else np.zeros(dcfg.buckets, np.int64)).astype(np.int64).tolist()}


def unique(job: FileJob, p: int) -> dict[str, Any]:
    """Whether the ids of hash range ``p`` (every file's) are distinct."""
    ids = job.layout.read("fids", [f"{name(fi)}-p{p:04d}" for fi in range(job.nfiles)],
                          pa.schema([("id", pa.string())]))["id"]
    return {"unique": len(ids) == 0 or pc.count_distinct(ids, mode="all").as_py() == len(ids)}


def file_columns(job: FileJob, fi: int) -> dict[str, Any]:
    """File ``fi``'s columns, its rows numbered in the run (``job.offsets``), the stochastic retention's draws
    made again with those rows, and its paragraphs under "paragraph_scores" (their documents' positions in
    ``cols``: rows of the file)."""
    from ..filters.paragraphs import ParagraphScores
    from ..filters.selection import uniform_draws

    lay, off = job.layout, int(job.offsets[fi])
    cols = _columns(lay.read_one("fcols", name(fi)))
    cols["row"] = cols["row"] + off
    for c in job.cfg.classifiers:
        if c.retention is not None:
            cols[f"{c.name}_draw"] = uniform_draws(job.cfg.seed, c.name, cols["row"])
    if job.cfg.paragraph_action == "remove":
        p = _columns(lay.read_one("fparas", name(fi)))
        cols["paragraph_scores"] = ParagraphScores(**{k: p[k] for k in p})  # rows: the file's (indexes of cols)
    return cols


# ------------------------------------------------------------------------------------------ rank selections
def below(values: np.ndarray, positions: np.ndarray, cut: tuple[float, int] | None) -> np.ndarray:
    """bool: the units before ``cut`` (value, position) in the (value, position) order (None: every one)."""
    if cut is None:
        return np.ones(len(values), bool)
    v, p = cut
    with np.errstate(invalid="ignore"):
        return (values < v) | ((values == v) & (positions < p))


def _groups(groups: np.ndarray | None, n: int) -> list[tuple[str, np.ndarray]]:
    if groups is None:
        return [("", np.ones(n, bool))]
    return [(g, groups == g) for g in sorted(set(groups.tolist()))]


class CollectRanks(Ranks):
    """The population pass: every unit a rank selection ranks, per group, under "keep:<unit>:<group>" and
    "bucket:<unit>:<group>" (values and positions in the run: ``bases``, each unit's first position in this
    file); every ranked unit is kept meanwhile (no later test reads a rank's verdict before the cut)."""

    def __init__(self, bases: dict[str, int]):
        self.bases = bases
        self.pops: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _collect(self, kind: str, unit: str, values: np.ndarray, groups: np.ndarray | None) -> None:
        pos = self.bases[unit] + np.arange(len(values), dtype=np.int64)
        ok = ~np.isnan(values)
        for g, mine in _groups(groups, len(values)):
            self.pops[f"{kind}:{unit}:{g}"] = (values[ok & mine], pos[ok & mine])

    def keep_lowest(self, unit, values, fraction, groups=None):
        self._collect("keep", unit, values, groups)
        return ~np.isnan(values)

    def buckets(self, unit, values, cuts, groups=None):
        self._collect("bucket", unit, values, groups)
        return np.full(len(values), None, dtype=object)


class CutRanks(Ranks):
    """The rank selections at thresholds found over every file (``cuts``: population -> the first unit not kept,
    or None: all of them; a bucket population -> [head's end, middle's end])."""

    def __init__(self, bases: dict[str, int], cuts: dict[str, Any]):
        self.bases, self.cuts = bases, cuts

    def keep_lowest(self, unit, values, fraction, groups=None):
        pos = self.bases[unit] + np.arange(len(values), dtype=np.int64)
        out = np.zeros(len(values), bool)
        ok = ~np.isnan(values)
        for g, mine in _groups(groups, len(values)):
            m = ok & mine
            out[m] = below(values[m], pos[m], self.cuts.get(f"keep:{unit}:{g}"))
        return out

    def buckets(self, unit, values, cuts, groups=None):
        from ..filters.selection import BUCKETS

        pos = self.bases[unit] + np.arange(len(values), dtype=np.int64)
        out = np.full(len(values), None, dtype=object)
        ok = ~np.isnan(values)
        for g, mine in _groups(groups, len(values)):
            m = np.flatnonzero(ok & mine)
            head, middle = self.cuts.get(f"bucket:{unit}:{g}", (None, None))
            at = 2 - below(values[m], pos[m], head).astype(np.int64) - below(values[m], pos[m], middle)
            out[m] = np.array(BUCKETS, dtype=object)[at]
        return out


def write_pops(job: FileJob, stage: str, fi: int, pops: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """A file's populations (name -> (values, positions), in position order) as its part of ``stage``."""
    names = [k for k, (v, _) in pops.items() for _ in range(len(v))]
    keys = np.concatenate([sortable(v) for v, _ in pops.values()]) if pops else np.zeros(0, np.uint64)
    pos = np.concatenate([p for _, p in pops.values()]) if pops else np.zeros(0, np.int64)
    job.layout.write(pa.table({"pop": pa.array(names, pa.string()).dictionary_encode(),
                               "key": pa.array(keys, pa.uint64()), "position": pa.array(pos, pa.int64())}),
                     stage, name(fi))


def round_(job: FileJob, fi: int, stage: str, requests: list) -> dict:
    """One round of a ``ranks.Selection`` over file ``fi``'s populations of ``stage`` (``write_pops``)."""
    lay = job.layout
    if not lay.exists(stage, name(fi)):
        return summarize({}, requests, fi)
    t = lay.read_one(stage, name(fi))
    enc = t["pop"].combine_chunks()
    codes = enc.indices.to_numpy(zero_copy_only=False)
    keys, pos = t["key"].to_numpy(), t["position"].to_numpy()
    pops = {n: (keys[codes == i], pos[codes == i]) for i, n in enumerate(enc.dictionary.to_pylist())}
    return summarize(pops, requests, fi)


def bases(job: FileJob, fi: int) -> dict[str, int]:
    return {"document": int(job.offsets[fi]), "paragraph": int(job.para_offsets[fi])}


def rank_units(cols: dict[str, Any], para: Any, cfg: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, language or None) of the units run.json's ``perplexity_rank`` counts: the documents' perplexities,
    or with paragraph removal the paragraphs' (``selection.rank_stats``)."""
    if para is not None:
        return para.used, cols["perplexity_lang"][para.scores.row] if cfg.perplexity_lang else None
    return cols["perplexity"], cols.get("perplexity_lang")


@run_once("fpopulate")
def populate(job: FileJob, fi: int) -> dict[str, Any]:
    """The populations of the rank selections (module doc) of file ``fi``, and per language the units and those
    with a perplexity of run.json's ``perplexity_rank``."""
    from ..filters.decide import decide_columns

    cols = file_columns(job, fi)
    ranks = CollectRanks(bases(job, fi))
    _, _, para = decide_columns(cols, job.cfg, scorers_of(job), ranks)
    values, lang = rank_units(cols, para, job.cfg)
    pos = bases(job, fi)["paragraph" if para is not None else "document"] + np.arange(len(values), dtype=np.int64)
    units = {}
    for g, mine in _groups(lang, len(values)) if job.cfg.perplexity_lang else [("", np.ones(len(values), bool))]:
        ok = mine & ~np.isnan(values)
        ranks.pops[f"rstat:{g}"] = (values[ok], pos[ok])  # positions: any order-keeping numbering
        units[g] = int(mine.sum())
    write_pops(job, "pop_rank", fi, ranks.pops)
    return {"pops": sorted(ranks.pops), "units": units}


def decided(job: FilterJob, fi: int) -> tuple[dict[str, Any], np.ndarray, Any, Any]:
    """(columns, keep, reason, the paragraphs' decision) of file ``fi`` at the run's cuts, DSIR aside."""
    from ..filters.decide import decide_columns

    cols = file_columns(job, fi)
    keep, reason, para = decide_columns(cols, job.cfg, scorers_of(job), CutRanks(bases(job, fi), job.cuts))
    return cols, keep, reason, para


def dsir_config(cfg: Any) -> Any:
    from ..filters.dsir import DSIRConfig

    return DSIRConfig(buckets=cfg.dsir_buckets, seed=cfg.seed, select=cfg.select)


@run_once("fweigh")
def weigh(job: FilterJob, fi: int, models: tuple, start: int) -> dict[str, Any]:
    """DSIR over file ``fi`` (module doc): every document's log importance weight (``models``: the target's and the
    raw corpus's ``BagModel``), and the keys of its pool (the documents every other test keeps): weight + Gumbel
    noise drawn from the run's one stream (``numpy.random.default_rng(seed)``) from position ``start``, the pool's
    documents before this file's. Returns the pool and the keys that can be selected (finite), the weights'
    finite range and how many have no feature, and whether the noise took more draws than documents (a draw
    NumPy rejects: once in 2**53)."""
    from ..filters.dsir import log_weights
    from ..runtime.device import batch_bytes

    cfg, f = job.cfg, job.files[fi]
    _, keep, _, _ = decided(job, fi)
    dcfg = dsir_config(cfg)
    w = [np.asarray(log_weights(b.text, models[0], models[1], dcfg, job.device), np.float64)
         for b in io.iter_batches([f], id_field=cfg.id_field, text_field=cfg.text_field,
                                  batch_bytes=batch_bytes(cfg.batch_bytes, job.device), on_error=cfg.on_error)]
    w = np.concatenate(w) if w else np.zeros(0)
    pool = np.flatnonzero(keep)
    rng = np.random.default_rng(cfg.seed)
    rng.bit_generator.advance(start)
    keys = w[pool] + rng.gumbel(size=len(pool))
    end = np.random.default_rng(cfg.seed)
    end.bit_generator.advance(start + len(pool))
    eligible = keys > -np.inf
    key = np.full(len(w), np.nan)
    key[pool] = keys
    job.layout.write(pa.table({"w": pa.array(w), "key": pa.array(key)}), "fw", name(fi))
    write_pops(job, "pop_dsir", fi, {"dsir": (-keys[eligible], int(job.offsets[fi]) + pool[eligible])})
    finite = w[np.isfinite(w)]
    return {"pool": int(len(pool)), "eligible": int(eligible.sum()),
            "extra_draws": rng.bit_generator.state != end.bit_generator.state,
            "min": float(finite.min()) if len(finite) else None, "max": float(finite.max()) if len(finite) else None}


def pick_populations(table: pa.Table, scorers: Any) -> tuple[dict, dict]:
    """(populations, ranges) of run.json's order statistics over a file's scores.parquet rows: "pct:<column>" the
    values with a score of each column the audit picks percentiles of; "ret:<column>" the finite values of each
    column of the retention table, whose (count, min, max) are ``ranges``."""
    from ..filters.decide import directions
    from ..filters.selection import pick_columns

    rows = table["row"].to_numpy()
    pops, ranges = {}, {}
    for c in pick_columns(table.schema):
        v = table[c].to_numpy(zero_copy_only=False).astype(np.float64)
        ok = ~np.isnan(v)
        pops[f"pct:{c}"] = (v[ok], rows[ok])
    for c in directions(scorers):
        if c in table.column_names:
            v = np.asarray(table[c].to_numpy(zero_copy_only=False), np.float64)
            fin = np.isfinite(v)
            pops[f"ret:{c}"] = (v[fin], rows[fin])
            ranges[c] = [int(fin.sum()), float(v[fin].min()) if fin.any() else None,
                         float(v[fin].max()) if fin.any() else None]
    return pops, ranges


@run_once("ffinal")
def final(job: FilterJob, fi: int, dsir: dict | None, source_field: str | None) -> dict[str, Any]:
    """File ``fi``'s decisions (module doc) and its scores.parquet part; what run.json counts of its rows (each
    entry adds over files: ``filter.py`` merges them); the statistics' populations. ``dsir``: "select" ("none",
    "all" the finite keys, or "cut" below "cut") and the weight histogram's "edges"; None without DSIR."""
    from ..filters.decide import decision_counts, scores_table, source_stats
    from ..filters.selection import retention_counts, token_counts
    from ..runtime.sources import SourceGuard
    from ..decisions import reason_array

    cfg = job.cfg
    scorers = scorers_of(job)
    cols, keep, reason, para = decided(job, fi)
    out: dict[str, Any] = {}
    if dsir is not None:
        fw = job.layout.read_one("fw", name(fi))
        w, keys = fw["w"].to_numpy(), fw["key"].to_numpy()
        cols["dsir_weight"] = w
        with np.errstate(invalid="ignore"):
            selected = keep & (keys > -np.inf)
        if dsir["select"] == "none":
            selected[:] = False
        elif dsir["select"] == "cut":
            selected &= below(-keys, cols["row"], tuple(dsir["cut"]))
        vocab = reason.dictionary.to_pylist()
        codes = reason.indices.to_numpy(zero_copy_only=False).copy()
        codes[keep & ~selected] = vocab.index("dsir_weight")
        reason, keep = reason_array(codes, vocab), keep & selected
        fin = np.isfinite(w)
        out["dsir"] = {"selected": int(selected.sum()), "without_features": int(np.count_nonzero(w == -np.inf)),
                       "documents": int(len(w)),
                       "hist": np.histogram(w[fin], bins=np.asarray(dsir["edges"]))[0].tolist(),
                       "hist_selected": np.histogram(w[selected & fin], bins=np.asarray(dsir["edges"]))[0].tolist()}
    cols["keep"], cols["reason"] = keep, reason
    table = scores_table(cols)
    job.layout.write(table, "fscores", name(fi))
    pops, ranges = pick_populations(table, scorers)
    write_pops(job, "pop_stats", fi, pops)
    ranked = para.ranked if para is not None else cols.get("perplexity_ranked")
    lid_prob = "lid_prob" in reason.dictionary.to_pylist()
    out.update(counts=decision_counts(table), tokens=token_counts(cols, cfg, scorers),
               retention=retention_counts(cols, scorers), ranges=ranges, pops=sorted(pops),
               columns=table.column_names, ranked=int(np.sum(ranked)) if ranked is not None else 0,
               lid_prob=int(np.sum(~keep & (reason.indices.to_numpy(zero_copy_only=False) ==
                                            reason.dictionary.to_pylist().index("lid_prob")))) if lid_prob else 0,
               languages={lang: int((cols["perplexity_lang"] == lang).sum()) for lang in
                          [code for code, _ in cfg.perplexity_lang] + [""]} if cfg.perplexity_lang else {},
               sides=[int(keep.sum()), int((~keep).sum())],
               sources=source_stats([job.files[fi]], cfg, SourceGuard(source_field=source_field), table,
                                    [table.num_rows]).to_dict())
    return out


def retain(job: FilterJob, fi: int, grid: dict[str, tuple[str, list[float]]]) -> dict[str, list[int]]:
    """File ``fi``'s documents a single threshold keeps (``grid``: column -> (direction, thresholds)): a finite
    score at or above a "min" threshold, at or below a "max" one (``selection.retention``)."""
    t = job.layout.read_one("fscores", name(fi), list(grid))
    out = {}
    for c, (direction, ts) in grid.items():
        v = np.asarray(t[c].to_numpy(zero_copy_only=False), np.float64)
        s = np.sort(v[np.isfinite(v)])
        out[c] = [int(len(s) - np.searchsorted(s, x, "left")) if direction == "min" else
                  int(np.searchsorted(s, x, "right")) for x in ts]
    return out


def logs_dir(job: FilterJob, fi: int) -> str:
    """Where file ``fi``'s part of the cut logs goes (paragraphs.parquet, removed_*.parquet: its rows numbered in
    the file), under the work dir."""
    return os.path.join(job.layout.root, "flogs", name(fi))


def _wrote(job: FilterJob, fi: int, result: dict, out: str | None, *_: Any) -> bool:
    """A stored write result is reused only for the same OUT, its filtered/ file still there (a run resumed
    into another -o, or an OUT emptied since, writes its own)."""
    if result.get("out") != out or (result.get("part") and not os.path.exists(result["part"])):
        return False
    wrote = ((result.get("documents") or {}).get("filtered") or {}).get("files", 0)
    return not wrote or os.path.exists(io.output_path(os.path.join(out, "filtered"), job.files[fi]))


@run_once("fwrite", valid=_wrote)
def write_file(job: FilterJob, fi: int, out: str | None, documents: bool, selected: bool, dataset: bool,
               picks: dict[str, list[int]]) -> dict[str, Any]:
    """File ``fi``'s outputs: with ``dataset`` its part of OUT/scores/ (outputs.py); with ``documents`` its
    filtered/ file in ``out`` (and its part of the cut logs, ``logs_dir``); the audit's documents of the file
    (``picks``: "kept" / "rejected", positions among its kept / rejected documents; "rows": its rows of the
    percentile picks), their rows ("audit") and the texts of all of them; with ``selected`` DSIR's feature counts
    of its kept documents (the selected ones)."""
    from ..filters.decide import read_texts
    from ..filters.paragraphs import write_documents

    cfg, f = job.cfg, job.files[fi]
    off = int(job.offsets[fi])
    n = int(job.offsets[fi + 1]) - off
    keep = np.asarray(job.layout.read_one("fscores", name(fi), ["keep"])["keep"].to_numpy(zero_copy_only=False),
                      bool) if n else np.zeros(0, bool)
    res: dict[str, Any] = {"out": out}
    # the files with rows are decided; with none in the whole input, file 0 (``filter._score``): its part of
    # OUT/scores/ and its logs are then tables of no rows, of the run's schema, as the local engine's (decided
    # from the offsets, never from the work dir, where a resumed run over other files may find another's parts)
    decided_here = bool(n) or (fi == 0 and int(job.offsets[-1]) == 0)
    if dataset and out is not None and decided_here:
        from ..decisions import scores_schema
        from ..runtime.run import write_tables
        from .outputs import part_path

        t = job.layout.read_one("fscores", name(fi))
        res["part"] = part_path(out, "scores", fi)
        write_tables([t], scores_schema(t.column_names), res["part"])
    if documents and out is not None:
        para, ids = None, pa.array([], pa.string())
        if decided_here and (cfg.paragraph_action == "remove" or cfg.c4_remove_lines):
            cols, _, _, para = decided(job, fi)  # the logs' rows are the file's: the driver numbers them
            ids = cols["id"]
        os.makedirs(logs_dir(job, fi), exist_ok=True)
        res["documents"] = write_documents([f], cfg, ids, para, keep, out, [n], logs=logs_dir(job, fi))
    kept, rejected = np.flatnonzero(keep), np.flatnonzero(~keep)
    audit = np.sort(np.concatenate([kept[np.asarray(picks["kept"], np.int64)],
                                    rejected[np.asarray(picks["rejected"], np.int64)]])).astype(np.int64)
    texts = read_texts([f], cfg, np.unique(np.concatenate([audit, np.asarray(picks["rows"], np.int64)])))
    res["audit"] = audit.tolist()
    res["texts"] = {str(r): t for r, t in texts.items()}
    if selected:
        from ..filters.dsir import fit_counts

        got = read_texts([f], cfg, kept)
        counts = fit_counts(pa.array([got[int(r)] for r in kept], pa.large_string()), dsir_config(cfg), job.device) \
            if len(kept) else np.zeros(cfg.dsir_buckets, np.int64)
        res["dsir_selected"] = np.asarray(counts, np.int64).tolist()
    return res
