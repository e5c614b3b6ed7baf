"""What each source of a run lost, the guard that stops a run that wipes one out, and the evidence to check it by.
Marin's audit (marin-community/marin#6854) found that unverified MinHash dedup silently removed over 95 % of 15 of
its 113 sources; no peer reports removal per source or stops on it.

    SourceGuard   ``source_field`` (``--source-field``; None: each document's input file) and ``max_removal``
                  (``--max-source-removal``; None: report only)
    labels        each document's source: its input file, or the value of the source field, read once more
                  (``source_labels``: the reader's settings, so rows agree; a null or missing value is NO_VALUE)
    Tally         per source: documents, kept, removed per step; the measured similarity of every removal
                  (Jaccard, or cosine for a semantic duplicate) in BINS bins of BIN_WIDTH; and up to PAIRS
                  removals at the boundary (theta <= value < theta + BOUNDARY_WIDTH), the ones of smallest
                  ``sample_key`` (a hash of the id): the same sample whatever the engine, batches or files. It
                  merges (the Ray engine's write tasks each tally their file) and round-trips through JSON
    stats         run.json's ``sources`` (``Tally.stats``): per source, and the sources over the limit
    check         ``SourceRemovalError`` naming each source over the limit. It keeps the outputs written so far
                  (``keep_outputs``: decisions.parquet, run.json and the report stay for inspection); the
                  programs raise it before writing their kept records (deduplicated/, filtered/) or an index

The report draws its "Sources" section from run.json alone (``report/sources.py``), reading only the texts of the
boundary pairs from the inputs.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import is_real
from ..errors import ConfigError, RunError

BIN_WIDTH = 0.05
BINS = 20                 # [0, 0.05), ..., [0.95, 1.0]: a similarity of 1.0 falls in the last bin
BOUNDARY_WIDTH = 0.05     # the boundary: theta <= value < theta + BOUNDARY_WIDTH
PAIRS = 20                # boundary pairs kept per source
NO_VALUE = "(none)"       # the source of a document whose source field is null or missing
BY_FILE = "input file"
MEASURES = ("jaccard", "cosine")
# the removals whose similarity is measured against ``matched_id`` (the pair the report shows side by side)
PAIRED = {"near_duplicate": "jaccard", "semantic_duplicate": "cosine"}


@dataclass(frozen=True)
class SourceGuard:
    """``source_field``: the column naming each document's source (None: its input file); ``max_removal``: the
    largest share of a source's documents a run may remove (a fraction in [0, 1]; None: no limit)."""

    source_field: str | None = None
    max_removal: float | None = None

    def __post_init__(self) -> None:
        if self.source_field is not None and (not isinstance(self.source_field, str) or not self.source_field):
            raise ConfigError(f"source_field must be a column name or None (each document's input file), got "
                              f"{self.source_field!r}")
        if self.max_removal is not None and not (is_real(self.max_removal) and 0 <= self.max_removal <= 1):
            raise ConfigError(f"max_source_removal={self.max_removal!r} is no fraction: pass a number in [0, 1] (0.9: "
                              "stop when a run removes more than 90% of any source's documents), or None")

    @property
    def by(self) -> str:
        return BY_FILE if self.source_field is None else f"field {self.source_field}"

    def without_limit(self) -> "SourceGuard":
        """The same sources, reported only (a pipeline's steps: the engine checks the composed decisions)."""
        return SourceGuard(self.source_field)


class SourceRemovalError(RunError):
    """A run removed more than ``max_source_removal`` of some source's documents. The outputs written before it
    was raised (the decisions, run.json, the report) are kept for inspection (``outputs.own``)."""

    keep_outputs = True


# ------------------------------------------------------------------------------------------ labels

def source_labels(files: Any, field: str | None, reading: Any, file_sources: pa.Array | None = None) -> pa.Array:
    """string (n,): each document's source, in run order. ``field`` None: ``file_sources`` (the input file of
    each row, e.g. decisions.parquet's ``source``). Else the field's values, read once more with ``reading``'s
    settings (an ``InputConfig``: the same rows as the run; strings, integers as decimal text; null or missing:
    NO_VALUE); errors name --source-field."""
    if field is None:
        if file_sources is None:
            raise RunError("source_labels: the input file of each row is needed when no source field is given")
        return file_sources.cast(pa.string())
    from .. import io
    from .device import batch_bytes

    if not (isinstance(files, (list, tuple)) and all(isinstance(f, io.InputFile) for f in files)):
        files = io.source_files(files)
    parts = [b.scope.cast(pa.string()) for b in io.iter_batches(
        list(files), id_field=reading.id_field, text_field=reading.text_field,
        batch_bytes=batch_bytes(reading.batch_bytes, "cpu"), on_error=reading.on_error, scope_field=field,
        scope_nullable=True, scope_flag="--source-field")]
    labels = pa.chunked_array(parts, pa.string()).combine_chunks() if parts else pa.array([], pa.string())
    return pc.fill_null(labels, NO_VALUE)


def sample_key(ids: Iterable[str]) -> list[int]:
    """The boundary sample's key of each id: the first 8 bytes of its BLAKE2b (a function of the id alone)."""
    return [int.from_bytes(hashlib.blake2b(i.encode("utf-8"), digest_size=8, person=b"gpu_dedup.src").digest(),
                           "little") for i in ids]


def bin_of(values: np.ndarray) -> np.ndarray:
    """int (n,): the histogram bin of each similarity (clipped to [0, 1]; 1.0 in the last bin)."""
    v = np.clip(np.nan_to_num(values, nan=0.0), 0.0, 1.0)
    return np.minimum((v / BIN_WIDTH).astype(np.int64), BINS - 1)


# ------------------------------------------------------------------------------------------ the tally

def thresholds(cfg: Any, semantic: Any = None) -> dict[str, float]:
    """The boundary of a ``Tally`` per measure: a dedup run's Jaccard threshold (``cfg``, a ``RunConfig``; when
    verified) and, with ``semantic`` (a ``SemanticConfig``), SemDeDup's 1 - eps."""
    out = {"jaccard": cfg.cluster.threshold} if cfg.cluster.verify else {}
    if semantic is not None:
        out["cosine"] = 1.0 - semantic.eps
    return out


def _arr(x: Any) -> Any:
    """An Arrow array of ``x`` (a chunked array combined, a list or numpy array converted; None stays None)."""
    if x is None or isinstance(x, pa.Array):
        return x
    if isinstance(x, pa.ChunkedArray):
        return x.combine_chunks()
    return pa.array(x, from_pandas=True)


def _new() -> dict[str, Any]:
    return {"input": 0, "kept": 0, "removed": {}, "similarity": {}, "unmeasured": {}, "boundary": []}


class Tally:
    """Per source (in order of first appearance): documents, kept, removals per step, the similarity histogram
    of the removals per step and measure, the removals without a measured similarity per step, and the boundary
    sample (module docstring). ``thresholds``: measure -> theta (the run's Jaccard threshold; 1 - eps for
    SemDeDup's cosine)."""

    def __init__(self, thresholds: Mapping[str, float] | None = None) -> None:
        self.thresholds = {k: float(v) for k, v in (thresholds or {}).items() if v is not None}
        self.sources: dict[str, dict[str, Any]] = {}

    def add(self, labels: pa.Array, keep: np.ndarray, *, step: str | pa.Array, reason: pa.Array | None = None,
            jaccard: Any = None, cosine: Any = None, ids: pa.Array | None = None,
            matched: pa.Array | None = None) -> None:
        """Count rows: ``labels`` (string (m,)), ``keep`` (bool (m,)), ``step`` (the step that removed each row:
        one name, or string (m,), null where kept), ``reason`` (string (m,)), ``jaccard`` / ``cosine`` (float
        (m,), null where not measured), ``ids`` / ``matched`` (string (m,): each row and the document its
        similarity was measured against; the boundary sample needs them)."""
        labels, reason, jaccard, cosine, ids, matched = map(_arr, (labels, reason, jaccard, cosine, ids, matched))
        if not isinstance(step, str):
            step = _arr(step)
        m = len(labels)
        keep = np.asarray(keep, bool)
        if m == 0:
            return
        enc = labels.cast(pa.string()).dictionary_encode()
        names = enc.dictionary.to_pylist()
        codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64)
        k = len(names)
        docs = np.bincount(codes, minlength=k)
        kept = np.bincount(codes[keep], minlength=k)
        for j, name in enumerate(names):
            s = self.sources.setdefault(name, _new())
            s["input"] += int(docs[j])
            s["kept"] += int(kept[j])
        removed = ~keep
        if not removed.any():
            return
        if isinstance(step, str):
            step_names, step_of = [step], np.zeros(m, np.int64)
        else:  # the pipeline's step column: null where kept
            se = step.cast(pa.string()).fill_null("").dictionary_encode()
            step_names = se.dictionary.to_pylist()
            step_of = np.asarray(se.indices.to_numpy(zero_copy_only=False), np.int64)
        reason = reason.cast(pa.string()) if reason is not None else pa.nulls(m, pa.string())

        def is_reason(name: str) -> np.ndarray:
            return np.asarray(pc.fill_null(pc.equal(reason, name), False).to_numpy(zero_copy_only=False), bool)

        semantic = is_reason("semantic_duplicate")
        # each removal's similarity and its measure (0: none, 1: Jaccard, 2: cosine for a semantic duplicate)
        value = np.full(m, np.nan)
        measure = np.zeros(m, np.int64)
        for code, col in ((1, jaccard), (2, cosine)):
            if col is None:
                continue
            v = np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), np.float64)
            take = ~np.isnan(v) & (np.isnan(value) if code == 1 else semantic)
            value[take], measure[take] = v[take], code
        rows = np.flatnonzero(removed)
        group = (codes[rows] * len(step_names) + step_of[rows]) * 3 + measure[rows]
        ug, inv = np.unique(group, return_inverse=True)
        counts = np.zeros((ug.shape[0], BINS), np.int64)
        np.add.at(counts, (inv, bin_of(value[rows])), 1)
        totals = np.bincount(inv, minlength=ug.shape[0])
        for g, key in enumerate(ug.tolist()):
            c, st, ms = key // 3 // len(step_names), str(step_names[key // 3 % len(step_names)]), key % 3
            src = self.sources[names[c]]
            src["removed"][st] = src["removed"].get(st, 0) + int(totals[g])
            if ms:
                h = src["similarity"].setdefault(st, {}).setdefault(MEASURES[ms - 1], [0] * BINS)
                for b in np.flatnonzero(counts[g]).tolist():
                    h[b] += int(counts[g, b])
            else:
                src["unmeasured"][st] = src["unmeasured"].get(st, 0) + int(totals[g])
        if ids is None or matched is None or not self.thresholds:
            return
        names_m = np.array(["", *MEASURES], dtype=object)[measure]
        theta = np.array([self.thresholds.get(ms, np.inf) for ms in ("", *MEASURES)], np.float64)[measure]
        paired = np.zeros(m, bool)
        for name, ms in PAIRED.items():
            paired |= is_reason(name) & (measure == 1 + MEASURES.index(ms))
        at = removed & paired & (value >= theta) & (value < theta + BOUNDARY_WIDTH)
        rows = np.flatnonzero(at)
        if rows.shape[0] == 0:
            return
        rid = ids.cast(pa.string()).take(pa.array(rows)).to_pylist()
        mid = matched.cast(pa.string()).take(pa.array(rows)).to_pylist()
        for key, r, i, mt in zip(sample_key(rid), rows.tolist(), rid, mid):
            if mt is not None:
                self._offer(names[int(codes[r])], [key, step_names[step_of[r]], str(names_m[r]), float(value[r]), i, mt])

    def _offer(self, source: str, pair: list) -> None:
        b = self.sources[source]["boundary"]
        if len(b) >= PAIRS and pair[0] >= b[-1][0]:
            return
        b.append(pair)
        b.sort(key=lambda p: (p[0], p[4]))
        del b[PAIRS:]

    def merge(self, other: "Tally") -> "Tally":
        """Add ``other``'s counts (its sources after this one's, in its order); returns self."""
        for k, v in other.thresholds.items():
            self.thresholds.setdefault(k, v)
        for name, o in other.sources.items():
            s = self.sources.setdefault(name, _new())
            s["input"] += o["input"]
            s["kept"] += o["kept"]
            for st, n in o["removed"].items():
                s["removed"][st] = s["removed"].get(st, 0) + n
            for st, n in o["unmeasured"].items():
                s["unmeasured"][st] = s["unmeasured"].get(st, 0) + n
            for st, by in o["similarity"].items():
                for ms, h in by.items():
                    mine = s["similarity"].setdefault(st, {}).setdefault(ms, [0] * BINS)
                    for b, n in enumerate(h):
                        mine[b] += n
            for p in o["boundary"]:
                self._offer(name, list(p))
        return self

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form (a Ray task's result)."""
        return {"thresholds": self.thresholds, "sources": self.sources}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Tally":
        t = cls(d.get("thresholds"))
        t.sources = {k: {**v, "boundary": [list(p) for p in v["boundary"]]} for k, v in d["sources"].items()}
        return t

    def stats(self, guard: SourceGuard) -> dict[str, Any]:
        """run.json's ``sources``: how sources are named, the limit, the sources over it (largest share first),
        and per source its counts, removals per step, similarity histograms (``bins``: their lower edges) and
        boundary pairs."""
        out: dict[str, Any] = {}
        for name, s in self.sources.items():
            removed = sum(s["removed"].values())
            share = removed / s["input"] if s["input"] else 0.0
            out[name] = {"input": s["input"], "kept": s["kept"], "removed": removed, "removed_share": share,
                         "by_step": dict(s["removed"]), "similarity": s["similarity"],
                         "unmeasured": dict(s["unmeasured"]),
                         "boundary_pairs": [{"step": p[1], "measure": p[2], "value": p[3], "id": p[4],
                                             "matched_id": p[5]} for p in s["boundary"]]}
        over = [] if guard.max_removal is None else sorted(
            (k for k, v in out.items() if v["removed_share"] > guard.max_removal),
            key=lambda k: (-out[k]["removed_share"], k))
        return {"by": guard.by, "field": guard.source_field, "max_removal": guard.max_removal, "over_limit": over,
                "count": len(out), "bins": [round(i * BIN_WIDTH, 10) for i in range(BINS)], "bin_width": BIN_WIDTH,
                "boundary": {"thresholds": dict(self.thresholds), "width": BOUNDARY_WIDTH, "pairs": PAIRS},
                "sources": out}


def check(stats: Mapping[str, Any], what: str = "deduplicated/") -> None:
    """Raise ``SourceRemovalError`` when run.json's ``sources`` (``Tally.stats``) lists a source over the limit:
    each such source with its share, the files kept for inspection, and the fixes. ``what``: the kept records
    the run did not write."""
    over = stats.get("over_limit") or []
    if not over:
        return
    src = stats["sources"]
    shown = ", ".join(f"{k} {src[k]['removed_share']:.1%} ({src[k]['removed']:,} of {src[k]['input']:,})"
                      for k in over[:10])
    more = f" and {len(over) - 10} more" if len(over) > 10 else ""
    raise SourceRemovalError(
        f"max_source_removal={stats['max_removal']:g}: the run removed more than {stats['max_removal']:.0%} of the "
        f"documents of {len(over)} source(s) (by {stats['by']}): {shown}{more}. The decisions, run.json and the "
        f"report are written for inspection (run.json sources, the report's Sources section with the pairs at the "
        f"similarity threshold); {what} is not. Check those removals, then raise max_source_removal, change the "
        "threshold, or leave the source out")


def share_line(stats: Mapping[str, Any], top: int = 3) -> str:
    """One summary line: the sources that lost the largest shares (None-safe for a run without sources)."""
    src = stats.get("sources") or {}
    if not src:
        return ""
    worst = sorted(src.items(), key=lambda kv: (-kv[1]["removed_share"], kv[0]))[:top]
    over = stats.get("over_limit") or []
    head = f"{len(src):,} source(s) (by {stats['by']})"
    return head + ", largest removal shares: " + ", ".join(
        f"{k} {v['removed_share']:.1%}" + (" OVER LIMIT" if k in over else "") for k, v in worst)
