"""Run report: one self-contained HTML page (plots embedded as base64 PNGs) plus the PNGs, from a run's outputs.

``write_report(out_dir)`` reads ``decisions.parquet`` and ``run.json`` from ``out_dir`` and writes
``out_dir/report.html`` and ``out_dir/report/*.png``. For text excerpts and retained bytes/tokens it also
reads the run's input files: found from run.json (``input_paths`` when recorded, else ``inputs`` relative
to the working directory) or given as ``source=``. When they cannot be found, or no longer match the
decisions (ids differ), the report says so and leaves those parts out; it never fails for that. When the run
recorded the retained sizes, only the rows shown are needed: a Parquet file of which the run dropped no row
is read only in the row groups that hold them; other files are read from their start up to the last row
shown.

What the run records, and so what the report can show:

* counts per reason and stage, clusters and their members: from the decisions (one row per document);
* LSH load: buckets per band, bucket entries and the largest bucket (run.json ``stages.lsh``); the full
  bucket-size distribution is drawn only when run.json has ``stages.lsh.bucket_size_log2_counts``;
* over the S-curve: ``jaccard_histogram`` of the removed near-duplicates' exact Jaccard with the document
  kept for them (the decisions' ``jaccard`` column). That is not a candidate rate: pairs LSH never
  proposed do not appear. The candidate rate needs labelled pairs: ``candidate_rates`` computes it (see
  notebooks/03_choosing_parameters.ipynb) and ``plot_candidate_rates`` draws it over the theory.

matplotlib (the ``plot`` extra) is imported only when plots are drawn; without it the report is written
without images and says how to get them.
"""
from __future__ import annotations

import argparse
import base64
import difflib
import html
import io as _bytes_io
import json
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import params

logger = logging.getLogger(__name__)

REPORT_FILE = "report.html"
PLOTS_DIR = "report"
# The pipeline logs a giant-bucket warning from the same size: one bucket that large is usually templated
# text (cookie banners, navigation) and dominates verification work.
GIANT_BUCKET = 10_000
DIFF_WORDS = 2000        # words of each document compared in the cluster excerpts
CONTEXT_WORDS = 12       # unchanged words kept on each side of a difference; longer runs are collapsed
MIN_SKIP = 8             # ... but only when that hides at least this many words
MEMBERS_SHOWN = 3        # removed members shown per cluster, least similar first
JACCARD_BINS = 50        # bins of width 0.02 over [0, 1]: 10 bars between 0.8 and 1.0
PLOT_NAMES = ("counts", "cluster_sizes", "band_load", "bucket_sizes", "s_curve", "timings")
KEPT_REASONS = ("unique", "representative")


# ------------------------------------------------------------------------------------------ measurements
@dataclass(frozen=True)
class JaccardHistogram:
    """Jaccard values counted per bin over [0, 1].

    edges: float64 (bins + 1,) = k / bins; counts: int64 (bins,): value v falls in bin floor(v * bins)
    (the last bin also holds 1.0); missing: NaN values left out (documents without a measured Jaccard).
    """

    edges: np.ndarray
    counts: np.ndarray
    missing: int

    @property
    def total(self) -> int:
        return int(self.counts.sum())


def jaccard_histogram(jaccard: Any, bins: int = JACCARD_BINS) -> JaccardHistogram:
    """Histogram of Jaccard values (any float array-like; NaN = not measured, counted in ``missing``).

    In the report it is applied to the removed near-duplicates' ``jaccard`` column: how many documents
    were removed at each exact similarity to the document kept for them.
    """
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
        raise ValueError(f"bins must be a positive int, got {bins!r}; use e.g. 50 (width 0.02)")
    arr = np.asarray(jaccard, dtype=np.float64).ravel()
    nan = np.isnan(arr)
    vals = arr[~nan]
    if vals.size and (vals.min() < 0.0 or vals.max() > 1.0):
        bad = vals[(vals < 0.0) | (vals > 1.0)][0]
        raise ValueError(f"Jaccard values must be in [0, 1] (or NaN), got {bad!r}")
    idx = np.minimum((vals * bins).astype(np.int64), bins - 1)
    return JaccardHistogram(edges=np.arange(bins + 1, dtype=np.float64) / bins,
                            counts=np.bincount(idx, minlength=bins).astype(np.int64), missing=int(nan.sum()))


@dataclass(frozen=True)
class CandidateRates:
    """Measured LSH candidate rate per Jaccard bin for labelled pairs, next to the S-curve's prediction.

    edges: float64 (k + 1,); pairs, candidates: int64 (k,) (pairs in the bin; of those, pairs sharing at
    least one band key); theory: float64 (k,) mean of 1 - (1 - J^r)^b over the bin's pairs (NaN if empty).
    """

    bands: int
    rows: int
    edges: np.ndarray
    pairs: np.ndarray
    candidates: np.ndarray
    theory: np.ndarray

    @property
    def rate(self) -> np.ndarray:
        """candidates / pairs per bin, float64 (k,); NaN where a bin has no pairs."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.pairs > 0, self.candidates / np.maximum(self.pairs, 1), np.nan)

    @property
    def stderr(self) -> np.ndarray:
        """Binomial standard error sqrt(rate (1 - rate) / pairs) per bin (NaN where empty)."""
        r = self.rate
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(r * (1.0 - r) / np.where(self.pairs > 0, self.pairs, np.nan))

    def recall_above(self, lo: float) -> float:
        """Share of the pairs with Jaccard >= ``lo`` that became candidates; ``lo`` must be a bin edge."""
        k = np.flatnonzero(np.isclose(self.edges, lo, rtol=0.0, atol=1e-9))
        if k.size == 0 or k[0] >= len(self.pairs):
            raise ValueError(f"lo must be one of the lower bin edges {self.edges[:-1].round(4).tolist()}, got {lo!r}")
        total = int(self.pairs[k[0]:].sum())
        return float(self.candidates[k[0]:].sum() / total) if total else float("nan")


def candidate_rates(keys: np.ndarray, lsh: Any, left: np.ndarray, right: np.ndarray, jaccard: np.ndarray,
                    bins: int = 20) -> CandidateRates:
    """Candidate rate per Jaccard bin of labelled pairs.

    keys: (n, b) uint64 band keys (``lsh.band_keys`` of the documents' signatures with ``lsh``, an
    ``LSHConfig``); left, right: int64 (m,) document indexes of each pair; jaccard: float64 (m,) the pair's
    exact Jaccard. A pair is a candidate when any band key is equal -- what the pipeline's buckets find.
    """
    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.shape[1] != lsh.bands:
        raise ValueError(f"keys must have shape (n, {lsh.bands}) for {lsh.bands} bands, got {keys.shape}; "
                         "compute them with lsh.band_keys(signatures, lsh)")
    left = np.asarray(left, np.int64)
    right = np.asarray(right, np.int64)
    jac = np.asarray(jaccard, np.float64)
    if not left.shape == right.shape == jac.shape or left.ndim != 1:
        raise ValueError(f"left, right and jaccard must be 1-D of one length, got shapes {left.shape}, "
                         f"{right.shape}, {jac.shape}")
    n = keys.shape[0]
    if left.size and (min(left.min(), right.min()) < 0 or max(left.max(), right.max()) >= n):
        raise ValueError(f"pair indexes must be in [0, {n}) (rows of keys)")
    hist = jaccard_histogram(jac, bins)  # validates the values
    if hist.missing:
        raise ValueError(f"jaccard has {hist.missing} NaN values; labelled pairs need an exact Jaccard each")
    idx = np.minimum((jac * bins).astype(np.int64), bins - 1)
    cand = (keys[left] == keys[right]).any(axis=1) if left.size else np.zeros(0, bool)
    p = params.candidate_probability(jac, lsh.bands, lsh.rows) if jac.size else np.zeros(0)
    pairs = np.bincount(idx, minlength=bins).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        theory = np.bincount(idx, weights=p, minlength=bins) / np.where(pairs > 0, pairs, np.nan)
    return CandidateRates(bands=int(lsh.bands), rows=int(lsh.rows), edges=hist.edges, pairs=pairs,
                          candidates=np.bincount(idx, weights=cand, minlength=bins).astype(np.int64), theory=theory)


# ------------------------------------------------------------------------------------------------ diffs
def _words_html(words: Sequence[str]) -> str:
    return html.escape(" ".join(words))


def _skip(n: int) -> str:
    return f"<span class=\"skip\">[… {n:,} identical words …]</span>"


def _equal_run(words: Sequence[str], first: bool, last: bool, context: int | None) -> str:
    """An unchanged run of words, its middle collapsed when that hides at least MIN_SKIP words."""
    n = len(words)
    keep = 2 * context if context is not None and (first and last or not (first or last)) else context
    if context is None or n - keep < MIN_SKIP:
        return _words_html(words)
    if first and last:  # no change at all: show the start only
        return f"{_words_html(words[:keep])} {_skip(n - keep)}"
    if first:
        return f"{_skip(n - context)} {_words_html(words[n - context:])}"
    if last:
        return f"{_words_html(words[:context])} {_skip(n - context)}"
    return f"{_words_html(words[:context])} {_skip(n - 2 * context)} {_words_html(words[n - context:])}"


def diff_words(a: str, b: str, max_words: int = DIFF_WORDS, context: int | None = CONTEXT_WORDS) -> tuple[str, str]:
    """Word-level diff of the first ``max_words`` words of ``a`` and ``b`` as two escaped HTML strings.

    Words only in ``a`` are wrapped in ``<del>``, words only in ``b`` in ``<mark>``; whitespace is
    collapsed to single spaces. Unchanged runs keep ``context`` words next to each change and collapse
    the rest to "[… N identical words …]" (``context=None``: show everything). A truncated text ends
    with "… (N more words, not compared)".
    """
    if not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"max_words must be a positive int, got {max_words!r}")
    if context is not None and (not isinstance(context, int) or context < 0):
        raise ValueError(f"context must be an int >= 0 or None, got {context!r}")
    wa_all, wb_all = a.split(), b.split()
    wa, wb = wa_all[:max_words], wb_all[:max_words]
    out_a: list[str] = []
    out_b: list[str] = []
    # autojunk off: in web text the frequent words ("the", "and") are exactly the ones that must align
    ops = difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes()
    for k, (op, i1, i2, j1, j2) in enumerate(ops):
        if op == "equal":
            first, last = k == 0, k == len(ops) - 1
            out_a.append(_equal_run(wa[i1:i2], first, last, context))
            out_b.append(_equal_run(wb[j1:j2], first, last, context))
            continue
        if i2 > i1:
            out_a.append(f"<del>{_words_html(wa[i1:i2])}</del>")
        if j2 > j1:
            out_b.append(f"<mark>{_words_html(wb[j1:j2])}</mark>")

    def tail(total: int) -> str:
        if total <= max_words:
            return ""
        return f" <span class=\"skip\">… ({total - max_words:,} more words, not compared)</span>"

    return " ".join(out_a) + tail(len(wa_all)), " ".join(out_b) + tail(len(wb_all))


# ------------------------------------------------------------------------------------------- run inputs
class _Mismatch(Exception):
    """The inputs read now are not the ones the decisions describe."""


@dataclass
class _Scan:
    texts: dict[int, str]
    bytes_input: int | None = None
    bytes_kept: int | None = None
    words_input: int | None = None
    words_kept: int | None = None


def _files_from_source(source: Any) -> list:
    from . import io

    if isinstance(source, (list, tuple)) and source and all(isinstance(f, io.InputFile) for f in source):
        return list(source)
    if isinstance(source, (pa.Table, pa.RecordBatch)) or type(source).__name__ == "DataFrame":
        return io.table_input(source)
    if isinstance(source, (str, os.PathLike)):
        return io.resolve_inputs([source])
    if isinstance(source, (list, tuple)):
        return io.resolve_inputs(list(source))
    raise TypeError(f"source must be path(s)/glob(s), a pyarrow Table, a pandas DataFrame or the run's "
                    f"InputFile list, got {type(source).__name__}")


def _locate_inputs(stats: dict, source: Any) -> tuple[list | None, str | None]:
    """(files in the run's order, None) or (None, why the texts are not shown)."""
    from . import io

    recorded = list(stats.get("inputs") or [])
    if source is not None:
        files = _files_from_source(source)
        if len(files) != len(recorded):
            return None, (f"source= gives {len(files)} input file(s) but the run read {len(recorded)} "
                          f"({', '.join(recorded[:3])}{', …' if len(recorded) > 3 else ''}); pass the run's inputs")
        return files, None
    if recorded == [io.TABLE_PATH]:
        return None, ("the run read an in-memory table; pass it again as write_report(out_dir, source=table) "
                      "to show text excerpts and retained sizes")
    tries = []
    if stats.get("input_paths"):
        tries.append(list(stats["input_paths"]))
    tries.append([os.path.join(os.getcwd(), r) for r in recorded])
    for paths in tries:
        if paths and all(os.path.isfile(p) for p in paths):
            files = io.resolve_inputs(paths)
            if len(files) == len(recorded):
                return files, None
    shown = ", ".join(recorded[:3]) + (", …" if len(recorded) > 3 else "")
    return None, (f"the input files ({shown}) were not found: run.json names them relative to their common "
                  f"folder. Run gpu-dedup report OUT --source INPUT… (Python: write_report(out_dir, source=…)) "
                  "to show text excerpts and retained sizes")


def _file_rows(decisions: pa.Table, recorded: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(start, count) int64 (files,) of each input file's rows in the decisions (rows are in file order)."""
    enc = pc.dictionary_encode(decisions["source"]).combine_chunks()
    names = enc.dictionary.to_pylist()
    pos = {name: i for i, name in enumerate(recorded)}
    missing = [n for n in names if n not in pos]
    if missing:
        raise _Mismatch(f"decisions name input {missing[0]!r}, which run.json does not list")
    mapping = np.array([pos[n] for n in names], np.int64)
    file_of_row = mapping[enc.indices.to_numpy(zero_copy_only=False)]
    if file_of_row.size and (np.diff(file_of_row) < 0).any():
        raise _Mismatch("decisions rows are not in input-file order")
    counts = np.bincount(file_of_row, minlength=len(recorded)).astype(np.int64)
    return np.cumsum(counts) - counts, counts


def _files_without_skips(stats: dict, recorded: list[str]) -> set[int]:
    """Indexes of the input files of which the run dropped no row, so that its row numbering of the file is
    the file's physical one. run.json's ``read.skipped`` lists every dropped row and skipped file by name
    (``file``: the name in ``inputs``); a run with on_error='raise' drops nothing (a bad row ends it). When
    neither tells, no file qualifies."""
    read = stats.get("read")
    skipped = read.get("skipped") if isinstance(read, dict) else None
    if isinstance(skipped, list) and all(isinstance(s, dict) and "file" in s for s in skipped):
        bad = {s["file"] for s in skipped}
        return {i for i, name in enumerate(recorded) if name not in bad}
    if stats.get("config", {}).get("on_error", "raise") == "raise":
        return set(range(len(recorded)))
    return set()


def _check_ids(got: pa.Array, expected: pa.Array, row: int, relpath: str) -> None:
    """Raise _Mismatch at the first position where ``got`` (ids read now) differs from ``expected`` (the
    decisions' ids of the same rows, the first being run row ``row``)."""
    same = pc.fill_null(pc.equal(got.cast(pa.string()), expected.cast(pa.string())), False)
    if not pc.all(same).as_py():
        k = int(np.flatnonzero(~same.to_numpy(zero_copy_only=False))[0])
        raise _Mismatch(f"row {row + k:,} of the run has id {expected[k].as_py()!r} but the input now "
                        f"has {got[k].as_py()!r} ({relpath})")


def _parquet_texts(f: Any, text_field: str, id_field: str | None, ids: pa.Array, lo: int, hi: int,
                   here: np.ndarray) -> dict[int, str] | None:
    """Texts of the run rows ``here`` (sorted, in [lo, hi): the run's rows of Parquet file ``f``), reading
    only the row groups that hold them; only valid when the run dropped no row of the file (run row
    lo + k is physical row k). Every row of the row groups read has its id checked. Ids and texts are
    converted exactly as the reader converts them (integer ids as decimal strings, generated ids
    '<relpath>:<row>', invalid UTF-8 replaced by U+FFFD). None when the file's columns are not what the
    reader accepts: the sequential read then raises or reports what the run's reader would."""
    import pyarrow.parquet as pq

    from . import io

    with pq.ParquetFile(f.path) as pf:
        md = pf.metadata
        schema = pf.schema_arrow
        if text_field not in schema.names or not io._is_stringish(schema.field(text_field).type):
            return None
        has_ids = bool(id_field) and id_field in schema.names
        if has_ids:
            t = schema.field(id_field).type
            base = t.value_type if pa.types.is_dictionary(t) else t
            if not (io._is_stringish(t) or pa.types.is_integer(base)):
                return None
        if md.num_rows != hi - lo:
            raise _Mismatch(f"{f.relpath} now has {md.num_rows:,} rows but the run read {hi - lo:,}")
        sizes = np.array([md.row_group(g).num_rows for g in range(md.num_row_groups)], np.int64)
        ends = np.cumsum(sizes)
        phys = here - lo
        group_of = np.searchsorted(ends, phys, side="right")  # empty row groups hold no wanted row
        columns = [text_field] + ([id_field] if has_ids else [])
        texts: dict[int, str] = {}
        for g in np.unique(group_of).tolist():
            first, n = int(ends[g] - sizes[g]), int(sizes[g])
            table = pf.read_row_group(g, columns=columns)
            if table.num_rows != n:
                raise _Mismatch(f"{f.relpath} row group {g} now has {table.num_rows:,} rows, its metadata {n:,}")
            if has_ids:
                got, _ = io._as_utf8(table.column(id_field).combine_chunks(), pa.string())
            else:
                got = io._generated_ids(f.relpath, first, n)
            _check_ids(got, ids.slice(lo + first, n), lo + first, f.relpath)
            rows = phys[group_of == g]
            text_col = table.column(text_field).combine_chunks().take(pa.array(rows - first, pa.int64()))
            text, _ = io._as_utf8(text_col, pa.large_string())
            for r, value in zip((rows + lo).tolist(), text.to_pylist()):
                if value is None:  # the run read a text there (it dropped no row of this file)
                    raise _Mismatch(f"row {r:,} of the run ({ids[r].as_py()!r}) now has a null text ({f.relpath})")
                texts[r] = value
    return texts


def _scan_inputs(files: list, stats: dict, decisions: pa.Table, want: np.ndarray, need_sizes: bool) -> _Scan:
    """Read the texts of rows ``want`` (sorted int64) and, with ``need_sizes``, every document's bytes and
    whitespace words. Batches are numbered as in the run (same reader settings), and each batch's ids are
    checked against the decisions.

    Without ``need_sizes``, a Parquet file of which the run dropped no row (``_files_without_skips``) is
    read only in the row groups holding wanted rows (``_parquet_texts``). Other files (JSON Lines, tables,
    Parquet files with skipped rows, whose run numbering is not the physical one) are read from their
    start up to their last wanted row."""
    from . import io
    from .config import keep_column

    cfg = stats.get("config", {})
    recorded = list(stats.get("inputs") or [])
    starts, counts = _file_rows(decisions, recorded)
    clean = _files_without_skips(stats, recorded)
    ids = decisions["id"].combine_chunks()
    keep = decisions["keep"].to_numpy(zero_copy_only=False)
    kc = keep_column(cfg.get("cluster", {}).get("keep", "first"))
    id_field, text_field = cfg.get("id_field", "id"), cfg.get("text_field", "text")
    scan = _Scan(texts={})
    sums = np.zeros(4, np.int64)  # bytes in, bytes kept, words in, words kept
    for i, f in enumerate(files):
        lo, hi = int(starts[i]), int(starts[i] + counts[i])
        here = want[(want >= lo) & (want < hi)]
        if not need_sizes and here.size == 0:
            continue
        if not need_sizes and f.fmt == "parquet" and i in clean:
            texts = _parquet_texts(f, text_field, id_field, ids, lo, hi, here)
            if texts is not None:
                scan.texts.update(texts)
                continue
        row = lo
        for batch in io.iter_batches([f], id_field=id_field, text_field=text_field,
                                     batch_bytes=int(cfg.get("batch_bytes") or 64 << 20),
                                     on_error=cfg.get("on_error", "raise"), keep_column=kc):
            n = len(batch)
            if row + n > hi:
                raise _Mismatch(f"{f.relpath} now has more rows than the run read ({hi - lo:,})")
            _check_ids(batch.ids, ids.slice(row, n), row, f.relpath)
            if need_sizes:
                nbytes = pc.binary_length(batch.text).to_numpy(zero_copy_only=False).astype(np.int64)
                # runs of non-whitespace: a model-free stand-in for tokens
                words = pc.count_substring_regex(batch.text, pattern=r"\S+").to_numpy(zero_copy_only=False)
                k = keep[row:row + n]
                sums += [nbytes.sum(), nbytes[k].sum(), words.sum(), words[k].sum()]
            for r in here[(here >= row) & (here < row + n)].tolist():
                scan.texts[r] = batch.text[r - row].as_py()
            row += n
            if not need_sizes and (here.size == 0 or row > here[-1]):
                break
        if need_sizes and row != hi:
            raise _Mismatch(f"{f.relpath} now has {row - lo:,} rows but the run read {hi - lo:,}")
    lost = [r for r in want.tolist() if r not in scan.texts]
    if lost:
        raise _Mismatch(f"row {lost[0]:,} of the run ({ids[lost[0]].as_py()!r}) is no longer in the inputs")
    if need_sizes:
        scan.bytes_input, scan.bytes_kept, scan.words_input, scan.words_kept = (int(x) for x in sums)
    return scan


# ----------------------------------------------------------------------------------------------- clusters
@dataclass(frozen=True)
class ClusterView:
    """One cluster: representative row, its size, and up to MEMBERS_SHOWN removed member rows."""

    rep: int
    size: int
    members: tuple[int, ...]


def largest_clusters(decisions: pa.Table, k: int, members: int = MEMBERS_SHOWN) -> list[ClusterView]:
    """The ``k`` largest clusters (size > 1; ties by representative row), each with up to ``members``
    removed members, least similar first (smallest Jaccard; unmeasured last; ties by row)."""
    if k <= 0:
        return []
    keep = decisions["keep"].to_numpy(zero_copy_only=False)
    size = decisions["cluster_size"].to_numpy()
    cid = decisions["cluster_id"].to_numpy()
    jac = decisions["jaccard"].to_numpy(zero_copy_only=False).astype(np.float64)
    reps = np.flatnonzero(keep & (size > 1))
    reps = reps[np.lexsort((reps, -size[reps]))][:k]
    removed = np.flatnonzero(~keep)
    sel = removed[np.isin(cid[removed], reps)]
    j = jac[sel]
    sel = sel[np.lexsort((sel, np.where(np.isnan(j), np.inf, j), cid[sel]))]
    out = []
    for r in reps.tolist():
        lo, hi = np.searchsorted(cid[sel], [r, r + 1])  # sel is sorted by cluster id first
        out.append(ClusterView(rep=r, size=int(size[r]), members=tuple(sel[lo:hi][:members].tolist())))
    return out


# ------------------------------------------------------------------------------------------------- plots
def _matplotlib_ok() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(width: float = 8.0, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)  # the Agg canvas directly: pyplot's global backend is left alone
    return fig, fig.add_subplot(1, 1, 1)


def _png(fig) -> bytes:
    buf = _bytes_io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _plot_counts(by_reason: dict[str, int]) -> bytes:
    names = list(by_reason)
    vals = [by_reason[n] for n in names]
    fig, ax = _figure(8.0, 0.45 * len(names) + 1.2)
    colors = ["tab:green" if n in KEPT_REASONS else "tab:red" for n in names]
    bars = ax.barh(names[::-1], vals[::-1], color=colors[::-1])
    ax.bar_label(bars, labels=[f"{v:,}" for v in vals[::-1]], padding=3)
    ax.set_xlabel("documents (green: kept, red: removed)")
    ax.set_xlim(0, max(vals + [1]) * 1.15)
    ax.set_title("Documents per decision reason")
    return _png(fig)


def _plain_log_ticks(ax, xs: np.ndarray) -> None:
    """Log axes labelled 1, 2, 10, 100 instead of 2x10^0; the sizes themselves when there are few."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())
    if len(xs) <= 12:
        ax.set_xticks(xs)


def _plot_cluster_sizes(sizes: np.ndarray) -> bytes:
    s, c = np.unique(sizes, return_counts=True)
    fig, ax = _figure()
    ax.loglog(s, c, "o", label="clusters of this size")
    ax.loglog(s, s * c, "s", markerfacecolor="none", label="documents in clusters of this size")
    _plain_log_ticks(ax, s)
    ax.set_xlabel("cluster size (documents, incl. the kept one)")
    ax.set_ylabel("count")
    ax.set_title("Cluster-size distribution (log-log; size 1 = no duplicate)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _png(fig)


def _plot_band_load(per_band: Sequence[int]) -> bytes:
    fig, ax = _figure()
    ax.bar(np.arange(len(per_band)), per_band, color="tab:blue")
    ax.axhline(float(np.mean(per_band)), color="black", linestyle="--", linewidth=1,
               label=f"mean {np.mean(per_band):,.1f}")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("band")
    ax.set_ylabel("buckets with ≥ 2 documents")
    ax.set_title("Candidate buckets per LSH band")
    ax.legend()
    return _png(fig)


def _plot_bucket_sizes(log2_counts: Sequence[int]) -> bytes:
    k = np.arange(len(log2_counts))
    fig, ax = _figure()
    ax.bar(k, log2_counts, color="tab:purple")
    ax.set_yscale("log")
    labels = [f"{2**i:,}" if i == 0 else f"{2**i:,}–{2**(i + 1) - 1:,}" for i in k]
    ax.set_xticks(k, labels, rotation=45, ha="right")
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.set_xlabel("bucket size (documents)")
    ax.set_ylabel("buckets")
    ax.set_title("Bucket-size distribution")
    return _png(fig)


def _draw_s_curve(ax, bands: int, rows: int, color: str | None = None, label: str | None = None):
    s, p = params.s_curve(bands, rows, n=401)
    line, = ax.plot(s, p, color=color, label=label or f"{bands}×{rows} theory (p50 = {params.p50(bands, rows):.3f})")
    return line


def _plot_s_curve(bands: int, rows: int, theta: float, hist: JaccardHistogram | None) -> bytes:
    fig, ax = _figure(8.0, 4.2)
    _draw_s_curve(ax, bands, rows, color="tab:blue")
    params.style_s_curve_axes(ax, theta)
    handles, labels = ax.get_legend_handles_labels()
    if hist is not None and hist.total:
        ax2 = ax.twinx()
        bars = ax2.bar(hist.edges[:-1], hist.counts, width=np.diff(hist.edges), align="edge", alpha=0.45,
                       color="tab:orange", edgecolor="tab:orange")
        from matplotlib.ticker import MaxNLocator

        ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.set_ylabel("removed near-duplicates per bin")
        ax2.set_ylim(0, max(1, int(hist.counts.max())) * 1.1)
        handles.append(bars)
        labels.append("removed near-duplicates: exact J to the kept document (right axis)")
    ax.legend(handles, labels, loc="upper left", fontsize=8)
    ax.set_title(f"S-curve of {bands} bands × {rows} rows")
    return _png(fig)


def _plot_timings(timings: dict[str, float]) -> bytes:
    names = list(timings)
    vals = [timings[n] for n in names]
    fig, ax = _figure(8.0, 0.4 * len(names) + 1.2)
    bars = ax.barh(names[::-1], vals[::-1], color="tab:gray")
    ax.bar_label(bars, labels=[f"{v:.3g} s" for v in vals[::-1]], padding=3)
    ax.set_xlabel("seconds")
    ax.set_xlim(0, max(vals + [1e-9]) * 1.2)
    ax.set_title("Time per stage")
    return _png(fig)


def plot_candidate_rates(rates: Sequence[CandidateRates], theta: float, path: str) -> None:
    """Write measured candidate rates (points with ±1 standard error) over each choice's S-curve.

    ``path`` ends in .png or .svg. Needs matplotlib (the ``plot`` extra).
    """
    if not rates:
        raise ValueError("plot_candidate_rates needs at least one CandidateRates, got none")
    suffix = os.path.splitext(str(path))[1].lower()
    if suffix not in (".png", ".svg"):
        raise ValueError(f"path must end in .png or .svg, got {str(path)!r}")
    if not _matplotlib_ok():
        raise ImportError("plotting needs matplotlib: pip install 'gpu-dedup[plot]'")
    fig, ax = _figure(8.0, 4.5)
    for i, cr in enumerate(rates):
        color = f"C{i}"
        _draw_s_curve(ax, cr.bands, cr.rows, color=color)
        mid = 0.5 * (cr.edges[:-1] + cr.edges[1:])
        ok = cr.pairs > 0
        ax.errorbar(mid[ok], cr.rate[ok], yerr=cr.stderr[ok], fmt="o", color=color, markersize=4, capsize=2,
                    label=f"{cr.bands}×{cr.rows} measured ({int(cr.pairs.sum()):,} labelled pairs)")
    ax.axvline(theta, color="black", linestyle="--", linewidth=1, label=f"θ = {theta:g}")
    ax.set_xlabel("exact Jaccard similarity of the pair")
    ax.set_ylabel("share of pairs that became candidates")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(-0.02, 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format=suffix[1:])
    logger.info("wrote candidate-rate plot of %d choices to %s", len(rates), path)


# -------------------------------------------------------------------------------------------------- html
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;max-width:1200px;
margin:0 auto;padding:1em 2em 3em;color:#222;line-height:1.45}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{margin:1.4em 0 .4em;font-size:1.05em}
nav{margin:.6em 0 1em;font-size:.95em} nav a{margin-right:1.1em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.93em}
td,th{border:1px solid #ddd;padding:.25em .65em;text-align:right;vertical-align:top}
th{background:#f4f4f4} .l{text-align:left} .kv th{font-weight:normal;background:#f8f8f8}
img{max-width:100%;height:auto;display:block;margin:.5em 0}
.warn{background:#fff3cd;border:1px solid #e0b800;padding:.5em 1em;border-radius:4px}
.note{color:#555;font-size:.92em}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em;margin:.3em 0 1em}
.head{font-size:.85em;color:#444;margin-bottom:.2em}
.doc{border:1px solid #ccc;border-radius:4px;padding:.5em .7em;max-height:15em;overflow:auto;font-size:.88em;
overflow-wrap:anywhere;background:#fcfcfc}
mark{background:#ffe58a} del{background:#ffd6d6;color:#8a0000}
.skip{color:#888;font-style:italic;font-size:.92em}
pre{background:#f6f6f6;padding:.7em;overflow:auto;border-radius:4px;margin:.3em 0;
font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:1em} .cols h3{margin-top:.6em}
code{font-size:.92em}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


_LEFT = ' class="l"'


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    """HTML table; cells are escaped; the first ``left`` columns are left-aligned."""
    def cells(tag: str, values: Sequence[Any]) -> str:
        return "".join(f"<{tag}{_LEFT if i < left else ''}>{_e(v)}</{tag}>" for i, v in enumerate(values))

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><tr>{cells('th', header)}</tr>{body}</table>"


def _kv(rows: Sequence[Sequence[Any]]) -> str:
    """Two-column key/value table without a header row; cells are escaped."""
    body = "".join(f"<tr><th class=\"l\">{_e(k)}</th><td class=\"l\">{_e(v)}</td></tr>" for k, v in rows)
    return f"<table class=\"kv\">{body}</table>"


def _json(obj: Any, indent: int = 0) -> str:
    """JSON with one key per line but lists of scalars on one line (per-band counts stay readable)."""
    pad = "  " * (indent + 1)
    if isinstance(obj, dict) and obj:
        items = [f"{pad}{json.dumps(str(k))}: {_json(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(obj, list) and obj and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(pad + _json(v, indent + 1) for v in obj) + "\n" + "  " * indent + "]"
    return json.dumps(obj, ensure_ascii=False)


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "–"


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000.0
    return f"{n:,.2f} TB"  # pragma: no cover


class _Page:
    """Collects sections and images; images go to out_dir/report/NAME.png and into the page as base64."""

    def __init__(self, plot_dir: str, plots: bool) -> None:
        self.plot_dir = plot_dir
        self.plots = plots
        self.sections: list[tuple[str, str, str]] = []
        self.written: list[str] = []

    def img(self, name: str, draw, alt: str) -> str:
        if not self.plots:
            return ""
        try:
            png = draw()
        except Exception as exc:  # one bad plot must not cost the whole report
            logger.warning("report plot %s failed: %s", name, exc, exc_info=True)
            return f"<p class=\"warn\">Plot {_e(name)} failed: {_e(exc)}</p>"
        from . import io

        path = os.path.join(self.plot_dir, f"{name}.png")
        with io.atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                fh.write(png)
        self.written.append(path)
        b64 = base64.b64encode(png).decode("ascii")
        return f"<img src=\"data:image/png;base64,{b64}\" alt=\"{_e(alt)}\">"

    def add(self, anchor: str, title: str, body: str) -> None:
        self.sections.append((anchor, title, body))

    def render(self, title: str, intro: str) -> str:
        nav = " ".join(f"<a href=\"#{a}\">{_e(t)}</a>" for a, t, _ in self.sections)
        secs = "\n".join(f"<section id=\"{a}\"><h2>{_e(t)}</h2>\n{b}\n</section>" for a, t, b in self.sections)
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n<h1>{_e(title)}</h1>\n{intro}\n"
                f"<nav>{nav}</nav>\n{secs}\n</body></html>\n")


# -------------------------------------------------------------------------------------------- sections
def _by_reason(decisions: pa.Table) -> dict[str, int]:
    from .pipeline import REASONS

    vc = pc.value_counts(decisions["reason"].combine_chunks()).to_pylist() if decisions.num_rows else []
    found = {d["values"]: int(d["counts"]) for d in vc}
    ordered = {r: found.pop(r, 0) for r in REASONS}
    ordered.update(sorted(found.items()))  # reasons of later stages (e.g. semantic), by name
    return ordered


def _stage_rows(n: int, by: dict[str, int]) -> list[list[Any]]:
    exact = by.get("exact_duplicate", 0) + by.get("short_exact_duplicate", 0)
    near = by.get("near_duplicate", 0)
    semantic = sum(v for k, v in by.items() if k.startswith("semantic"))
    known = set(KEPT_REASONS) | {"exact_duplicate", "short_exact_duplicate", "near_duplicate"}
    other = {k: v for k, v in by.items() if k not in known and not k.startswith("semantic")}
    rows: list[list[Any]] = [["input", "", f"{n:,}", ""]]
    left = n
    stages = [("exact", exact), ("near (MinHash/LSH)", near)]
    if semantic or any(k.startswith("semantic") for k in by):
        stages.append(("semantic", semantic))
    stages += [(k, v) for k, v in other.items()]
    for name, removed in stages:
        left -= removed
        rows.append([name, f"{removed:,}", f"{left:,}", _pct(removed, n)])
    kept = sum(by.get(k, 0) for k in KEPT_REASONS)
    rows.append(["kept", "", f"{kept:,}", _pct(kept, n)])
    return rows


def _summary(stats: dict, n: int, by: dict[str, int], scan: _Scan | None, sizes_note: str | None,
             recorded_sizes: dict | None) -> str:
    kept = sum(by.get(k, 0) for k in KEPT_REASONS)
    t = stats.get("timings_s", {})
    rows = [["documents in", f"{n:,}"], ["kept", f"{kept:,} ({_pct(kept, n)})"],
            ["removed", f"{n - kept:,} ({_pct(n - kept, n)})"]]
    bin_ = (recorded_sizes or {}).get("text_bytes") or (
        {"input": scan.bytes_input, "kept": scan.bytes_kept} if scan and scan.bytes_input is not None else None)
    win = (recorded_sizes or {}).get("words") or (
        {"input": scan.words_input, "kept": scan.words_kept} if scan and scan.words_input is not None else None)
    read_bytes = stats.get("read", {}).get("bytes_text")
    if bin_:
        rows.append(["text bytes kept", f"{_fmt_bytes(bin_['kept'])} of {_fmt_bytes(bin_['input'])} "
                     f"({_pct(bin_['kept'], bin_['input'])})"])
    elif read_bytes is not None:
        rows.append(["text bytes in", _fmt_bytes(read_bytes)])
    if win:
        rows.append(["≈ tokens kept (whitespace words)", f"{win['kept']:,} of {win['input']:,} "
                     f"({_pct(win['kept'], win['input'])})"])
    rows.append(["device", f"{stats.get('device', '?')} ({stats.get('threads', '?')} threads)"])
    if "total" in t:
        tp = stats.get("throughput_docs_per_s")
        rows.append(["wall time", f"{t['total']:.2f} s" + (f" ({tp:,.0f} documents/s)" if tp else "")])
    cfg = stats.get("config", {})
    lsh, cl = cfg.get("lsh", {}), cfg.get("cluster", {})
    rows.append(["settings", f"preset {cfg.get('preset_name', '?')}, {cfg.get('shingle', {}).get('kind', '?')} "
                 f"{cfg.get('shingle', {}).get('n', '?')}-grams, {lsh.get('bands', '?')}×{lsh.get('rows', '?')} "
                 f"bands×rows, θ = {cl.get('threshold', '?')}, policy {cl.get('policy', '?')}"
                 f"{'' if cl.get('verify', True) else ' (unverified)'}"])
    rows.append(["created", f"{stats.get('created', '?')} by gpu_dedup {stats.get('gpu_dedup_version', '?')}"])
    out = _kv(rows)
    notes = ["Tokens are approximated by whitespace-separated words (runs of non-whitespace characters); "
             "a subword tokenizer gives more tokens, so use the figure as a ratio, not a token count."]
    if sizes_note:
        notes.append(f"Retained bytes and tokens are not shown: {sizes_note}")
    return out + "".join(f"<p class=\"note\">{_e(x)}</p>" for x in notes)


def _counts_section(page: _Page, n: int, by: dict[str, int], decisions: pa.Table, stats: dict) -> str:
    rows = _stage_rows(n, by)
    # a run --against an index removes documents in favour of indexed ones: their cluster_id is -1 - position
    n_index = int(pc.sum(pc.less(decisions["cluster_id"], 0)).as_py() or 0) if n else 0
    against = ""
    if n_index:
        idx = (stats.get("stages") or {}).get("against_index") or {}
        against = (f"<p class=\"note\">{n_index:,} of the removed documents duplicate a document of the index "
                   f"<code>{_e(idx.get('path', '?'))}</code> (not part of this input); their clusters are not shown "
                   "below.</p>")
    reasons = [[k, f"{v:,}", _pct(v, n), "kept" if k in KEPT_REASONS else "removed"] for k, v in by.items()]
    return ("<h3>Per stage</h3>" + _table(["stage", "removed", "documents left", "% of input"], rows)
            + "<h3>Per reason</h3>" + _table(["reason", "documents", "% of input", ""], reasons, left=1)
            + page.img("counts", lambda: _plot_counts(by), "documents per decision reason")
            + "<p class=\"note\">exact = identical normalized text (short_exact_duplicate: documents with fewer "
              "words than the shingle size, which only the exact stage can remove); near = removed for a kept "
              "document at (verified) Jaccard ≥ θ; representative = kept document with duplicates.</p>" + against)


def _clusters_section(page: _Page, decisions: pa.Table) -> str:
    keep = decisions["keep"].to_numpy(zero_copy_only=False)
    sizes = decisions["cluster_size"].to_numpy()[keep]
    if sizes.size == 0:
        return "<p>No documents.</p>"
    dup = sizes[sizes > 1]
    rows = [["clusters (kept documents)", f"{sizes.size:,}"], ["clusters with duplicates", f"{dup.size:,}"],
            ["largest cluster", f"{int(sizes.max()):,}"],
            ["mean size of clusters with duplicates", f"{dup.mean():.2f}" if dup.size else "–"]]
    return (_kv(rows)
            + page.img("cluster_sizes", lambda: _plot_cluster_sizes(sizes), "cluster-size distribution, log-log"))


def _excerpts_section(decisions: pa.Table, views: list[ClusterView], texts: dict[int, str] | None,
                      why_missing: str | None) -> str:
    if not views:
        return "<p>No clusters with duplicates.</p>"
    ids = decisions["id"]
    reason = decisions["reason"]
    jac = decisions["jaccard"]
    if texts is None:
        parts = [f"<p class=\"warn\">Text excerpts are not shown: {_e(why_missing)}.</p>"]
    else:
        parts = ["<p class=\"note\">Each removed member (right) next to the document kept for it (left), first "
                 f"{DIFF_WORDS:,} words compared, whitespace collapsed, unchanged stretches shortened. "
                 "<del>Struck</del> words appear only in the kept document, <mark>highlighted</mark> words only "
                 "in the member. Members shown: the least similar first.</p>"]
    for v in views:
        rid = ids[v.rep].as_py()
        parts.append(f"<h3>Cluster of {v.size:,} documents, kept: <code>{_e(rid)}</code></h3>")
        if texts is None:
            members = ", ".join(f"<code>{_e(ids[m].as_py())}</code> ({_e(reason[m].as_py())}"
                                + (f", J = {jac[m].as_py():.3f}" if jac[m].is_valid else "") + ")"
                                for m in v.members)
            parts.append(f"<p>members: {members}{' …' if v.size - 1 > len(v.members) else ''}</p>")
            continue
        for m in v.members:
            left, right = diff_words(texts[v.rep], texts[m])
            j = jac[m].as_py()
            jtxt = f"J = {j:.3f}" if j is not None else "J not measured"
            parts.append(
                "<div class=\"pair\">"
                f"<div><div class=\"head\">kept <code>{_e(rid)}</code></div><div class=\"doc\">{left}</div></div>"
                f"<div><div class=\"head\">{_e(reason[m].as_py())} <code>{_e(ids[m].as_py())}</code> · {jtxt}</div>"
                f"<div class=\"doc\">{right}</div></div></div>")
        if v.size - 1 > len(v.members):
            parts.append(f"<p class=\"note\">… and {v.size - 1 - len(v.members):,} more removed members.</p>")
    return "".join(parts)


def _lsh_section(page: _Page, stats: dict) -> str:
    lsh = stats.get("stages", {}).get("lsh")
    if not lsh:
        return "<p>The run recorded no LSH statistics.</p>"
    docs, buckets, entries = lsh.get("documents", 0), lsh.get("buckets", 0), lsh.get("bucket_entries", 0)
    largest = lsh.get("largest_bucket", 0)
    per_band = lsh.get("buckets_per_band") or []
    rows = [["documents hashed into bands (not exact duplicates, not short)", f"{docs:,}"],
            ["candidate documents (in any bucket of ≥ 2)", f"{lsh.get('candidate_documents', 0):,}"],
            ["buckets with ≥ 2 documents", f"{buckets:,}"], ["bucket entries (document × band)", f"{entries:,}"],
            ["mean bucket size", f"{entries / buckets:.2f}" if buckets else "–"],
            ["largest bucket", f"{largest:,}"]]
    pol = stats.get("stages", {}).get("policy", {})
    for key, label in (("verified_pairs", "verified pairs (exact Jaccard computed)"),
                       ("edges", "candidate edges"), ("edges_verified", "edges passing verification"),
                       ("capped_buckets", "buckets capped at max_representatives_per_bucket"),
                       ("largest_candidate_component", "largest candidate component"),
                       ("largest_component", "largest component")):
        if key in pol:
            rows.append([label, f"{pol[key]:,}"])
    out = ""
    if largest >= GIANT_BUCKET:
        out += (f"<p class=\"warn\">Giant bucket: {largest:,} documents share one band key "
                f"({_pct(largest, docs)} of the hashed documents). This is usually templated text (boilerplate, "
                "navigation, cookie notices); its documents dominate verification work. Check the Largest clusters "
                "section, and consider removing the template or raising rows per band.</p>")
    out += _kv(rows)
    if per_band:
        out += page.img("band_load", lambda: _plot_band_load(per_band), "candidate buckets per band")
        out += ("<p class=\"note\">Each band is an independent chance to become candidates; a band with far "
                "more buckets than the others points at a hash or data problem.</p>")
    log2 = lsh.get("bucket_size_log2_counts")
    if log2:
        out += page.img("bucket_sizes", lambda: _plot_bucket_sizes(log2), "bucket-size distribution")
    else:
        out += ("<p class=\"note\">The full bucket-size distribution is not recorded by this run (only the "
                "largest bucket and the mean).</p>")
    return out


def _s_curve_section(page: _Page, stats: dict, decisions: pa.Table) -> str:
    cfg = stats.get("config", {})
    b, r = int(cfg.get("lsh", {}).get("bands", 0)), int(cfg.get("lsh", {}).get("rows", 0))
    theta = float(cfg.get("cluster", {}).get("threshold", 0.8))
    verify = bool(cfg.get("cluster", {}).get("verify", True))
    if b < 1 or r < 1:
        return "<p>The run's config has no LSH bands/rows.</p>"
    theta_plot = min(max(theta, 1e-9), 1 - 1e-9)  # θ = 1 is allowed by the config; the curve math needs < 1
    rows = [["bands × rows", f"{b} × {r} = {b * r} hashes"],
            ["rule-of-thumb threshold (1/b)^(1/r)", f"{params.threshold_approx(b, r):.4f}"],
            ["50% point (1 − 2^(−1/b))^(1/r)", f"{params.p50(b, r):.4f}"],
            [f"P(candidate) at θ = {theta:g}", f"{params.candidate_probability(theta, b, r):.4f}"]]
    for s in (theta - 0.1, theta + 0.05):
        if 0.0 < s < 1.0:
            rows.append([f"P(candidate) at J = {s:.2f}", f"{params.candidate_probability(s, b, r):.4f}"])
    hist = None
    note = ""
    if verify:
        near = pc.equal(decisions["reason"], "near_duplicate")
        jac = decisions["jaccard"].filter(near).to_numpy(zero_copy_only=False).astype(np.float64)
        hist = jaccard_histogram(jac)
        note = (f"<p class=\"note\">Bars: the {hist.total:,} removed near-duplicates counted by their exact "
                f"Jaccard with the document kept for them (decisions' <code>jaccard</code>, bins of "
                f"{1 / JACCARD_BINS:g}). This shows where removals happened, not a candidate rate: pairs that LSH "
                "never proposed are missing from it. To measure the candidate rate per Jaccard bin, use labelled "
                "pairs (notebooks/03_choosing_parameters.ipynb, <code>report.candidate_rates</code>).</p>")
        if not hist.total:
            note = "<p class=\"note\">No near-duplicates were removed, so there are no measured Jaccard values.</p>"
    else:
        note = ("<p class=\"note\">Verification was off, so the run measured no exact Jaccard values; only the "
                "theoretical curve is drawn.</p>")
    return (_kv(rows)
            + page.img("s_curve", lambda: _plot_s_curve(b, r, theta_plot, hist), "S-curve of the chosen bands and rows")
            + note)


def _timings_section(page: _Page, stats: dict, n: int) -> str:
    t = {k: float(v) for k, v in (stats.get("timings_s") or {}).items() if k != "total" and v is not None}
    total = (stats.get("timings_s") or {}).get("total")
    if not t:
        return "<p>The run recorded no timings.</p>"
    text_bytes = stats.get("read", {}).get("bytes_text") or 0
    rows = []
    for k, v in t.items():
        rows.append([k, f"{v:.3f}", _pct(v, total) if total else "–", f"{n / v:,.0f}" if v > 0 else "–",
                     f"{text_bytes / v / 1e6:,.1f}" if v > 0 and text_bytes else "–"])
    if total:
        rows.append(["total", f"{total:.3f}", "100%", f"{n / total:,.0f}" if total > 0 else "–",
                     f"{text_bytes / total / 1e6:,.1f}" if text_bytes and total > 0 else "–"])
    return (_table(["stage", "seconds", "% of total", "input docs / s", "input text MB / s"], rows)
            + "<p class=\"note\">Throughput columns divide the whole input (documents, text bytes) by each "
              "stage's time, so stages that touch only candidates (shingle_sets, policy) look faster than "
              "their per-document rate. Stages overlap with reading (prefetch), so the stage times need not sum "
              "to the total.</p>"
            + page.img("timings", lambda: _plot_timings(t), "time per stage"))


def _environment_section(stats: dict) -> str:
    rows = [["device", stats.get("device", "?")], ["threads", stats.get("threads", "?")],
            ["gpu_dedup", stats.get("gpu_dedup_version", "?")]]
    rows += [[k, v] for k, v in (stats.get("versions") or {}).items()]
    rows.append(["contract fingerprint", stats.get("contract_fingerprint", "?")])
    read = stats.get("read") or {}
    rrows = [["files", f"{read.get('files', 0):,}"], ["rows", f"{read.get('rows', 0):,}"],
             ["text bytes", _fmt_bytes(read.get("bytes_text", 0) or 0)],
             ["skipped records", f"{len(read.get('skipped') or []):,}"],
             ["rows with invalid UTF-8 (repaired)", f"{read.get('invalid_utf8_rows', 0):,}"],
             ["empty files", f"{len(read.get('empty_files') or []):,}"]]
    skipped = read.get("skipped") or []
    extra = ""
    if skipped:
        extra = ("<p class=\"note\">First skipped records:</p><pre>"
                 + _e(_json(skipped[:5])) + "</pre>")
    inputs = stats.get("inputs") or []
    shown = inputs[:20]
    inp = "<pre>" + _e("\n".join(shown) + (f"\n… ({len(inputs) - 20:,} more)" if len(inputs) > 20 else "")) + "</pre>"
    return (_kv(rows) + "<h3>Input</h3>" + _kv(rrows) + extra + inp
            + "<div class=\"cols\"><div><h3>Config</h3><pre>" + _e(_json(stats.get("config", {}))) + "</pre></div>"
            + "<div><h3>Contract</h3><pre>" + _e(_json(stats.get("contract", {}))) + "</pre>"
            + "<p class=\"note\">The contract: what must match for signatures or band keys of two runs to be "
              "comparable.</p></div></div>"
            + "<h3>Stage statistics (run.json)</h3><pre>" + _e(_json(stats.get("stages", {}))) + "</pre>")


# ---------------------------------------------------------------------------------------------- entry
def _load(out_dir: str) -> tuple[dict, pa.Table]:
    import pyarrow.parquet as pq

    run_json = os.path.join(out_dir, "run.json")
    dec_path = os.path.join(out_dir, "decisions.parquet")
    for p in (run_json, dec_path):
        if not os.path.isfile(p):
            raise FileNotFoundError(f"{p!r} does not exist; point to the output directory of a finished run "
                                    "(gpu-dedup run INPUT -o OUT writes decisions.parquet and run.json)")
    with open(run_json, encoding="utf-8") as fh:
        stats = json.load(fh)
    decisions = pq.read_table(dec_path)
    missing = {"id", "keep", "reason", "cluster_id", "jaccard", "cluster_size", "source"} - set(decisions.column_names)
    if missing:
        raise ValueError(f"{dec_path!r} lacks columns {sorted(missing)}; it was not written by gpu_dedup's run")
    n = stats.get("counts", {}).get("input")
    if n is not None and n != decisions.num_rows:
        raise ValueError(f"run.json counts {n:,} input documents but decisions.parquet has {decisions.num_rows:,} "
                         "rows; the two files come from different runs")
    return stats, decisions


def write_report(out_dir: str | os.PathLike, *, max_clusters: int = 10, source: Any = None,
                 read_inputs: bool = True) -> str:
    """Write ``out_dir/report.html`` (self-contained) and ``out_dir/report/*.png``; return the HTML path.

    max_clusters: how many of the largest clusters to show with text excerpts (0: none).
    source: the run's inputs (paths/globs, a pyarrow Table / pandas DataFrame, or the run's InputFile list)
    when run.json's paths do not lead to them. read_inputs=False skips reading the inputs (no excerpts, no
    retained bytes/tokens unless the run recorded them): use it for very large runs.
    """
    if not isinstance(max_clusters, int) or isinstance(max_clusters, bool) or max_clusters < 0:
        raise ValueError(f"max_clusters must be an int >= 0, got {max_clusters!r}")
    out = os.fspath(out_dir)
    stats, decisions = _load(out)
    n = decisions.num_rows
    by = _by_reason(decisions)
    views = largest_clusters(decisions, max_clusters)

    recorded = {k: v for k, v in (stats.get("counts") or {}).items() if k in ("text_bytes", "words")}
    need_sizes = not ("text_bytes" in recorded and "words" in recorded)
    want = np.unique(np.array([r for v in views for r in (v.rep, *v.members)], np.int64))
    scan: _Scan | None = None
    why: str | None = None
    if not read_inputs:
        why = "the inputs were not read (read_inputs=False / --no-inputs)"
    elif want.size or need_sizes:
        files, why = _locate_inputs(stats, source)
        if files is not None:
            try:
                scan = _scan_inputs(files, stats, decisions, want, need_sizes)
            except _Mismatch as exc:
                why = f"the inputs found do not match this run's decisions: {exc}"
            except Exception as exc:  # unreadable inputs must not cost the report
                logger.warning("reading the inputs for the report failed: %s", exc, exc_info=True)
                why = f"reading the inputs failed: {exc}"
    if why:
        logger.info("report without input texts: %s", why)

    plots = _matplotlib_ok()
    plot_dir = os.path.join(out, PLOTS_DIR)
    page = _Page(plot_dir, plots)
    page.add("summary", "Summary", _summary(stats, n, by, scan, None if scan else why, recorded or None))
    page.add("counts", "Documents per stage and reason", _counts_section(page, n, by, decisions, stats))
    page.add("clusters", "Cluster sizes", _clusters_section(page, decisions))
    page.add("largest", "Largest clusters", _excerpts_section(decisions, views, scan.texts if scan else None, why))
    page.add("lsh", "LSH bands and buckets", _lsh_section(page, stats))
    page.add("s-curve", "S-curve and measured similarities", _s_curve_section(page, stats, decisions))
    page.add("timings", "Timings and throughput", _timings_section(page, stats, n))
    page.add("environment", "Device, config and contract", _environment_section(stats))

    intro = f"<p class=\"note\">Output directory <code>{_e(os.path.abspath(out))}</code></p>"
    if not plots:
        intro += "<p class=\"warn\">Plots need matplotlib: pip install 'gpu-dedup[plot]'.</p>"
    text = page.render("gpu_dedup run report", intro)

    from . import io

    for name in PLOT_NAMES:  # drop a previous report's plots that this run did not draw
        stale = os.path.join(plot_dir, f"{name}.png")
        if stale not in page.written and os.path.exists(stale):
            os.remove(stale)
    path = os.path.join(out, REPORT_FILE)
    with io.atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
    logger.info("wrote run report %s (%d plots)", path, len(page.written))
    return path


# ------------------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the ``report`` command (dests: output, max_clusters, source, no_inputs)."""
    parser.add_argument("output", metavar="OUT", help="a run's output directory (decisions.parquet, run.json)")
    parser.add_argument("--max-clusters", type=int, default=10, help="largest clusters shown with excerpts")
    parser.add_argument("--source", nargs="+", metavar="INPUT", default=None,
                        help="the run's inputs, when they are not where run.json says (for excerpts)")
    parser.add_argument("--no-inputs", action="store_true",
                        help="do not read the inputs: no text excerpts or retained sizes (fast on huge runs)")


def run(args: argparse.Namespace) -> int:
    """Write the report; print its path. Bad values raise ValueError naming them."""
    path = write_report(args.output, max_clusters=args.max_clusters, source=args.source,
                        read_inputs=not args.no_inputs)
    sys.stdout.write(f"wrote {path}\n")
    return 0


__all__ = ["CandidateRates", "ClusterView", "JaccardHistogram", "add_arguments", "candidate_rates", "diff_words",
           "jaccard_histogram", "largest_clusters", "plot_candidate_rates", "run", "write_report"]
