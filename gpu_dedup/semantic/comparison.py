"""Lexical vs semantic deduplication on the same corpus: who removes what, and why.

``compare(OUT)`` reads a run directory holding both ``decisions.parquet`` (lexical stages, with the
exact ``jaccard`` of each near duplicate) and ``semantic_decisions.parquet`` + ``semantic.json`` (the
semantic stage run beside the lexical stages on every document: ``run --semantic --semantic-order beside``),
and reports:

* counts removed by each method and the overlap (both / lexical only / semantic only / neither); a
  document is *lexically removed* when its reason is exact_duplicate, short_exact_duplicate or
  near_duplicate, and *semantically removed* when the semantic stage marks it semantic_duplicate;
* candidate pairs with both measures: every lexical pair (document, matched_id) gets its cosine from
  the stored embeddings; every semantic pair (document, nearest earlier cluster member) gets its exact
  word-shingle Jaccard, computed with the lexical run's own normalization and shingles
  (``gpu_dedup.lexical.verify``), so it is the same quantity as the ``jaccard`` column. Pairs are sampled
  (seeded) down to ``max_pairs``;
* example pairs from each region with their Jaccard, cosine and text;
* ``compare.md`` (tables) and ``compare.png`` (hexbin of all candidate pairs + scatter by kind, with
  the Jaccard threshold and 1 - eps marked) written into OUT.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import RunConfig
from ..decisions import LEXICAL_REMOVALS
from ..errors import ConfigError, DataError, DependencyError, MissingFileError, RunError
from ..io import atomic_path, read_json_record
from ..text.normalize import normalize_text
from ..lexical.verify import jaccard, shingle_sets

logger = logging.getLogger(__name__)

REGIONS = ("both", "lexical_only", "semantic_only")
PAIR_KINDS = ("lexical", "semantic_duplicate", "semantic_nearest_kept")
_PREVIEW = 90


@dataclass
class CompareResult:
    """counts: documents per method and region; pairs: candidate pairs (row, matched_row, kind, jaccard,
    cosine, same_cluster); examples: example pairs per region with texts; markdown: the report;
    markdown_path / png_path: files written (None when not written)."""

    counts: dict[str, int]
    pairs: pa.Table
    examples: pa.Table
    markdown: str
    markdown_path: str | None = None
    png_path: str | None = None

    def __str__(self) -> str:
        return self.markdown


def _load(out_dir: str) -> tuple[pa.Table, pa.Table, dict, dict]:
    from ..decisions import read_table, table_path

    try:  # either layout: one file, or a Ray run's per-file parts read as one table
        lex_path = table_path(out_dir, "decisions")
    except MissingFileError as e:
        raise MissingFileError(f"{e}: compare needs a lexical run in {out_dir!r} (gpu-dedup run INPUT -o OUT "
                               "--semantic, without --no-lexical)") from None
    try:
        sem_path = table_path(out_dir, "semantic_decisions")
        if not os.path.isfile(os.path.join(out_dir, "semantic.json")):
            raise MissingFileError(f"{os.path.join(out_dir, 'semantic.json')!r} is missing")
    except MissingFileError as e:
        raise MissingFileError(f"{e}: compare needs the semantic stage's results in {out_dir!r} (gpu-dedup run "
                               "INPUT -o OUT --semantic)") from None
    lex = read_table(out_dir, "decisions")
    sem = read_table(out_dir, "semantic_decisions")
    if "jaccard" not in lex.column_names:
        raise DataError(f"{lex_path!r} has no jaccard column; it is not a lexical decisions table")
    if sem.num_rows < lex.num_rows and "semantic_cluster" in lex.column_names:
        raise DataError(f"the semantic stage of the run in {out_dir!r} saw only the {sem.num_rows:,} of "
                        f"{lex.num_rows:,} documents the lexical stages kept (--semantic-order after, the default); "
                        "compare needs it beside them, over every document: rerun with --semantic-order beside")
    if lex.num_rows != sem.num_rows or not lex["id"].equals(sem["id"]):
        raise DataError(f"{lex_path!r} ({lex.num_rows} rows) and {sem_path!r} ({sem.num_rows} rows) do not list the "
                        "same ids in the same order; rerun both stages on the same input into one OUT")
    run_path = os.path.join(out_dir, "run.json")
    run = read_json_record(run_path) if os.path.isfile(run_path) else {}
    if ((run.get("config") or {}).get("cluster") or {}).get("near") is False:
        # its decisions hold exact duplicates only: every near duplicate would count as semantic-only, under a
        # heading that names the shingles and threshold no stage used
        raise DataError(f"the run in {out_dir!r} skipped MinHash/LSH (--no-lexical or --exact-only): compare "
                        "needs the lexical near-duplicate decisions beside the semantic ones; rerun without "
                        "--no-lexical / --exact-only, with --semantic --semantic-order beside")
    return lex, sem, run, read_json_record(os.path.join(out_dir, "semantic.json"))


def _rows_of(values: pa.ChunkedArray | pa.Array, ids: pa.Array) -> np.ndarray:
    """Row of each id in ``values`` (int64, -1 for null)."""
    idx = pc.index_in(values, value_set=ids)
    return np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), np.int64)


def _cosines(emb: np.ndarray, left: np.ndarray, right: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
    out = np.empty(left.shape[0], np.float64)
    for s in range(0, left.shape[0], chunk):
        li, ri = left[s:s + chunk], right[s:s + chunk]
        out[s:s + chunk] = np.einsum("ij,ij->i", np.asarray(emb[li], np.float32), np.asarray(emb[ri], np.float32))
    return out


def _sample(idx: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    return idx if idx.shape[0] <= k else np.sort(rng.choice(idx, size=k, replace=False))


def _texts_for(rows: np.ndarray, source: Any, sem_stats: dict) -> dict[int, str]:
    """Raw texts of the given rows (sorted int64), re-read with the semantic run's reader settings."""
    from .. import io

    if source is None:
        paths = sem_stats.get("input_paths") or []
        if not paths or io.TABLE_PATH in paths:
            raise ConfigError("the run read an in-memory table; pass source= (the same table) to compare")
        source = paths
    files = io.source_files(source)
    rel = [f.relpath for f in files]
    if rel != sem_stats.get("inputs", rel):
        raise DataError(f"source resolves to {rel[:3]}... but the run read {sem_stats.get('inputs', [])[:3]}...; "
                        "pass the run's inputs")
    opts = sem_stats.get("io", {})
    out: dict[int, str] = {}
    for sel, text in io.iter_rows(files, rows, id_field=opts.get("id_field", "id"),
                                  text_field=opts.get("text_field", "text"), batch_bytes=64 << 20,
                                  on_error=opts.get("on_error", "raise")):
        out.update(zip(sel.tolist(), text.to_pylist()))
    if len(out) != rows.shape[0]:
        raise RunError(f"re-read {len(out)} of {rows.shape[0]} needed documents: the input changed since the run")
    return out


def _jaccards(texts: dict[int, str], left: np.ndarray, right: np.ndarray, run_stats: dict) -> np.ndarray:
    """Exact shingle-set Jaccard under the lexical run's normalize/shingle settings; NaN (undefined: the
    Jaccard kernel's convention for two empty sets) when both documents are too short to have a shingle."""
    cfg = RunConfig.from_dict(run_stats["config"]) if "config" in run_stats else RunConfig()
    if left.shape[0] == 0:
        return np.zeros(0)
    rows = np.unique(np.concatenate([left, right]))
    norm = normalize_text(pa.array([texts[int(r)] for r in rows], pa.large_string()), cfg.normalize, "cpu")
    sets = shingle_sets(norm, np.arange(rows.shape[0], dtype=np.int64), cfg.shingle, "cpu")
    li, ri = np.searchsorted(rows, left), np.searchsorted(rows, right)
    return np.asarray(jaccard(sets, li, ri, "cpu"), np.float64)


def compare(out_dir: str | os.PathLike, source: Any = None, *, n_examples: int = 5, max_pairs: int = 20_000,
            seed: int = 0, write: bool = True) -> CompareResult:
    """Compare the lexical and semantic decisions of the run in ``out_dir`` (see the module docstring).

    Args:
        out_dir: a run directory with decisions.parquet and semantic_decisions.parquet.
        source: the run's input (paths or the in-memory table) when semantic.json's input paths are not
            usable; needed only to re-read texts.
        n_examples: example pairs shown per kind.
        max_pairs: the most candidate pairs scored and plotted (>= 3).
        seed: the sample of pairs.
        write: write OUT/compare.md and OUT/compare.png.

    Returns:
        The ``CompareResult``: counts per method and region, the pairs, the examples, the markdown, and the
        paths written.

    Raises:
        MissingFileError: a decisions table or the embeddings of the run are missing.
        DataError: the two tables do not list the same documents.
        RunError: the input changed since the run.
        ConfigError: a bad ``n_examples`` / ``max_pairs``, or a ``source`` that is not the run's.
        DependencyError: ``write`` without matplotlib (the ``plot`` extra).
    """
    if not isinstance(n_examples, int) or n_examples < 0:
        raise ConfigError(f"n_examples must be a non-negative int, got {n_examples!r}")
    if not isinstance(max_pairs, int) or max_pairs < 3:
        raise ConfigError(f"max_pairs must be an int >= 3, got {max_pairs!r}")
    out_dir = os.fspath(out_dir)
    lex, sem, run_stats, sem_stats = _load(out_dir)
    n = lex.num_rows
    ids = lex["id"].combine_chunks()
    reasons = lex["reason"].to_numpy(zero_copy_only=False)
    lex_removed = np.isin(reasons, LEXICAL_REMOVALS)
    sem_removed = ~sem["keep"].to_numpy(zero_copy_only=False).astype(bool)
    regions = {"both": lex_removed & sem_removed, "lexical_only": lex_removed & ~sem_removed,
               "semantic_only": ~lex_removed & sem_removed}  # the documents of each of REGIONS
    counts = {"input": n, "lexical_removed": int(lex_removed.sum()), "semantic_removed": int(sem_removed.sum()),
              **{r: int(regions[r].sum()) for r in REGIONS}, "neither": int((~lex_removed & ~sem_removed).sum())}

    emb_path = (sem_stats.get("embedding_cache") or {}).get("embeddings_path")
    if not emb_path or not os.path.isfile(emb_path):
        raise MissingFileError(f"the semantic run's embeddings ({emb_path!r}) are gone; rerun the semantic stage "
                               "with an output directory (it rewrites them, reusing nothing else)")
    emb = np.load(emb_path, mmap_mode="r")
    if emb.shape[0] != n:
        raise DataError(f"{emb_path!r} holds {emb.shape[0]} rows but the run has {n}: the embedding cache was "
                        "overwritten by another run; rerun the semantic stage into this OUT")

    rng = np.random.default_rng(seed)
    rows = np.arange(n, dtype=np.int64)
    lex_match = _rows_of(lex["matched_id"], ids)
    sem_near = _rows_of(sem["nearest_id"], ids)
    cluster = sem["semantic_cluster"].to_numpy()
    lex_jac = lex["jaccard"].to_numpy(zero_copy_only=False).astype(np.float64)

    budget = max_pairs // 3
    lex_rows = _sample(rows[lex_removed & (lex_match >= 0)], budget, rng)
    semdup_rows = _sample(rows[sem_removed & (sem_near >= 0)], budget, rng)
    near_rows = _sample(rows[~sem_removed & (sem_near >= 0)], max_pairs - lex_rows.shape[0] - semdup_rows.shape[0], rng)
    # examples: make sure the chosen documents' pairs are measured even when sampling left them out
    ex_rows = {r: _sample(np.flatnonzero(regions[r]).astype(np.int64), n_examples, rng) for r in REGIONS}
    ex_lex = np.concatenate([ex_rows["both"], ex_rows["lexical_only"]])
    lex_rows = np.union1d(lex_rows, ex_lex[lex_match[ex_lex] >= 0])
    semdup_rows = np.union1d(semdup_rows, ex_rows["semantic_only"][sem_near[ex_rows["semantic_only"]] >= 0])

    left = np.concatenate([lex_rows, semdup_rows, near_rows])
    right = np.concatenate([lex_match[lex_rows], sem_near[semdup_rows], sem_near[near_rows]])
    kind = np.repeat(np.array(PAIR_KINDS), [lex_rows.shape[0], semdup_rows.shape[0], near_rows.shape[0]])
    jac = np.concatenate([lex_jac[lex_rows], np.full(semdup_rows.shape[0] + near_rows.shape[0], np.nan)])
    # every pair's cosine from the embeddings (the semantic table clips negative maxima to 0)
    cos = _cosines(emb, left, right)
    need_j = np.isnan(jac)
    text_rows = np.unique(np.concatenate([left[need_j], right[need_j]] + [
        np.concatenate([v, lex_match[v], sem_near[v]]) for v in ex_rows.values()]))
    text_rows = text_rows[text_rows >= 0]
    texts = _texts_for(text_rows, source, sem_stats) if text_rows.shape[0] else {}
    jac[need_j] = _jaccards(texts, left[need_j], right[need_j], run_stats)
    pairs = pa.table({"row": left, "matched_row": right, "id": ids.take(pa.array(left)),
                      "matched_id": ids.take(pa.array(right)), "kind": pa.array(kind.tolist(), pa.string()),
                      "jaccard": pa.array(jac, pa.float64(), from_pandas=True), "cosine": cos,
                      "same_cluster": cluster[left] == cluster[right]})

    examples = _examples_table(ex_rows, pairs, texts)
    theta = ((run_stats.get("config") or {}).get("cluster") or {}).get("threshold")
    eps = sem_stats.get("eps")
    md = _markdown(out_dir, counts, pairs, examples, run_stats, sem_stats)
    result = CompareResult(counts, pairs, examples, md)
    if write:
        result.markdown_path = os.path.join(out_dir, "compare.md")
        with atomic_path(result.markdown_path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            fh.write(md)
        result.png_path = os.path.join(out_dir, "compare.png")
        plot_pairs(pairs, result.png_path, theta=theta, eps=eps)
    return result


def _examples_table(ex_rows: dict[str, np.ndarray], pairs: pa.Table, texts: dict[int, str]) -> pa.Table:
    """One pair per example document: its lexical pair for both / lexical_only, its semantic pair for
    semantic_only. Lexical-only examples are listed by ascending cosine, semantic-only by ascending
    Jaccard (the largest disagreements first)."""
    row = pairs["row"].to_numpy()
    kind = pairs["kind"].to_numpy(zero_copy_only=False)
    records = []
    for region in REGIONS:
        want = "lexical" if region != "semantic_only" else "semantic_duplicate"
        found = [int(np.flatnonzero((row == r) & (kind == want))[0]) for r in ex_rows[region]
                 if ((row == r) & (kind == want)).any()]
        sub = pairs.take(pa.array(found, pa.int64())).to_pylist()
        key = {"lexical_only": "cosine", "semantic_only": "jaccard"}.get(region)
        if key:
            sub.sort(key=lambda p: (np.inf if p[key] is None or np.isnan(p[key]) else p[key]))
        for p in sub:
            records.append({"region": region, "id": p["id"], "matched_id": p["matched_id"], "pair": p["kind"],
                            "jaccard": p["jaccard"], "cosine": p["cosine"], "same_cluster": p["same_cluster"],
                            "text": texts.get(p["row"], ""), "matched_text": texts.get(p["matched_row"], "")})
    schema = pa.schema([("region", pa.string()), ("id", pa.string()), ("matched_id", pa.string()),
                        ("pair", pa.string()), ("jaccard", pa.float64()), ("cosine", pa.float64()),
                        ("same_cluster", pa.bool_()), ("text", pa.string()), ("matched_text", pa.string())])
    return pa.Table.from_pylist(records, schema=schema)


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _cell(text: str) -> str:
    t = " ".join((text or "").split())
    t = t if len(t) <= _PREVIEW else t[:_PREVIEW - 1] + "…"
    return t.replace("|", "\\|")


def _markdown(out_dir: str, counts: dict, pairs: pa.Table, examples: pa.Table, run_stats: dict,
              sem_stats: dict) -> str:
    n = max(counts["input"], 1)
    cfg = run_stats.get("config") or {}
    cl, sh = cfg.get("cluster") or {}, cfg.get("shingle") or {}
    model = (sem_stats.get("model") or {}).get("name")
    lines = [f"# Lexical vs semantic deduplication: {out_dir}", "",
             f"- lexical: {sh.get('kind', '?')} {sh.get('n', '?')}-grams, "
             f"Jaccard threshold {cl.get('threshold', '?')}, policy {cl.get('policy', '?')}",
             f"- semantic: model {model}, eps {sem_stats.get('eps')} "
             f"(cosine >= {1 - float(sem_stats.get('eps', 0)):.4g}), "
             f"{(sem_stats.get('clusters') or {}).get('k', '?')} clusters, chain {sem_stats.get('chain')}, "
             f"keep {sem_stats.get('keep')}", "",
             "Semantic-only removals are what lexical dedup cannot see by construction: the "
             "Tokyo pair (\"The president visited Tokyo on Tuesday to discuss trade.\" / \"On Tuesday, the "
             "president visited Tokyo to discuss trade issues.\") shares no word 5-gram, so its Jaccard is 0 and no "
             "lexical threshold removes it (tests/lexical/test_cluster.py pins this).", "",
             "| documents | count | fraction |", "|---|---:|---:|"]
    labels = {"input": "input", "lexical_removed": "removed by lexical", "semantic_removed": "removed by semantic",
              "both": "removed by both", "lexical_only": "lexical only", "semantic_only": "semantic only",
              "neither": "kept by both"}
    lines += [f"| {labels[k]} | {v:,} | {v / n:.2%} |" for k, v in counts.items()]
    lines += ["", f"## Candidate pairs ({pairs.num_rows:,}, plotted in compare.png)", "",
              "| pair kind | pairs | median Jaccard | median cosine | same semantic cluster |",
              "|---|---:|---:|---:|---:|"]
    kind = pairs["kind"].to_numpy(zero_copy_only=False)
    jac = pc.fill_null(pairs["jaccard"], np.nan).to_numpy(zero_copy_only=False)
    cos = pairs["cosine"].to_numpy()
    same = pairs["same_cluster"].to_numpy(zero_copy_only=False)
    for k in PAIR_KINDS:
        m = kind == k
        if m.any():
            mj = np.nanmedian(jac[m]) if np.isfinite(jac[m]).any() else float("nan")
            lines.append(f"| {k} | {int(m.sum()):,} | {_fmt(float(mj))} | {_fmt(float(np.median(cos[m])))} "
                         f"| {same[m].mean():.1%} |")
    lines += ["", "## Example pairs", ""]
    for region in REGIONS:
        ex = examples.filter(pc.equal(examples["region"], region)).to_pylist()
        lines += [f"### {region.replace('_', ' ')} ({counts[region]:,} documents)", ""]
        if not ex:
            lines += ["(none)", ""]
            continue
        lines += ["| id | matched | pair | Jaccard | cosine | same cluster | text | matched text |",
                  "|---|---|---|---:|---:|---|---|---|"]
        lines += [f"| {_cell(e['id'])} | {_cell(e['matched_id'])} | {e['pair']} | {_fmt(e['jaccard'])} | "
                  f"{_fmt(e['cosine'])} | {'yes' if e['same_cluster'] else 'no'} | {_cell(e['text'])} | "
                  f"{_cell(e['matched_text'])} |" for e in ex]
        lines.append("")
    return "\n".join(lines)


def plot_pairs(pairs: pa.Table, path: str, *, theta: float | None = None, eps: float | None = None) -> str:
    """Plot Jaccard (x) vs cosine (y) of candidate pairs, written atomically as PNG.

    A hexbin of all pairs (log counts) and a scatter by pair kind, with the lexical threshold and 1 - eps
    marked.

    Args:
        pairs: the candidate pairs (columns jaccard, cosine, kind).
        path: the PNG to write.
        theta: the lexical Jaccard threshold, marked when given.
        eps: the semantic eps, marked as 1 - eps when given.

    Returns:
        ``path``.

    Raises:
        DependencyError: matplotlib (the ``plot`` extra) is missing.
    """
    try:
        import matplotlib
    except ImportError as exc:  # optional: the plot extra
        raise DependencyError(f"compare.png needs matplotlib ({exc}): pip install 'gpu-dedup[plot]'") from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jac = pc.fill_null(pairs["jaccard"], np.nan).to_numpy(zero_copy_only=False)
    cos = pairs["cosine"].to_numpy()
    kind = pairs["kind"].to_numpy(zero_copy_only=False)
    ok = np.isfinite(jac) & np.isfinite(cos)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
    if ok.any():
        hb = axes[0].hexbin(jac[ok], cos[ok], gridsize=40, bins="log", mincnt=1, cmap="viridis",
                            extent=(0, 1, min(0.0, float(cos[ok].min())), 1))
        fig.colorbar(hb, ax=axes[0], label="pairs (log)")
    colors = {"lexical": "tab:blue", "semantic_duplicate": "tab:red", "semantic_nearest_kept": "tab:gray"}
    for k in PAIR_KINDS[::-1]:
        m = ok & (kind == k)
        if m.any():
            axes[1].scatter(jac[m], cos[m], s=6, alpha=0.5, color=colors[k], label=f"{k} ({int(m.sum())})",
                            edgecolors="none")
    for ax in axes:
        if theta is not None:
            ax.axvline(float(theta), color="k", ls="--", lw=1)
        if eps is not None:
            ax.axhline(1 - float(eps), color="k", ls=":", lw=1)
        ax.set_xlabel("exact Jaccard (word shingles)")
        ax.set_ylabel("cosine (embeddings)")
        ax.set_xlim(-0.02, 1.02)
    axes[0].set_title("all candidate pairs")
    axes[1].set_title("by pair kind (dashed: Jaccard threshold, dotted: 1 - eps)")
    if ok.any():
        axes[1].legend(loc="lower right", fontsize=8)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path
