"""Paragraph-level exact dedup (keep-first or remove-all, streaming, memory bounded by a Bloom filter or an exact set).

Units (declared policy, ``ParagraphConfig.split``)
    Lines are separated by "\\n"; a line holding only ASCII whitespace (space, tab, CR, VT, FF) is blank.
    "line" (default): every non-blank line is a unit. Extracted web text (WET files, trafilatura, jusText)
    holds one paragraph per line with few or no blank lines, so this is the unit of Dolma's and RedPajama's
    paragraph dedup; with blank-line blocks most web documents would be a single unit and nothing would
    be cut. "paragraph": a unit is a maximal run of non-blank lines, so one or more blank lines separate
    paragraphs (for text that marks paragraphs with blank lines: books, papers, Markdown). "sentence": the
    sentences of gpu_dedup/text/split.py's stated rule (never over a newline). "span3": C4's unit (seed 002
    §21.3.1): the keys are the windows of SPAN_SENTENCES = 3 consecutive sentences of a document (overlapping);
    the cut units are the sentences, a sentence being removed when any removed window holds it (its
    removed_spans row carries that window's hash); a document of fewer than three sentences is never cut. A
    unit's span is trimmed of ASCII whitespace at both ends; byte offsets are 0-based UTF-8 byte positions in
    the ORIGINAL document text.

Identity
    A unit's key is the 128-bit hash (XXH64 with two seeds, ``bloom.HASH_DESCRIPTION``) of its
    normalized text (``normalize_doc`` on the span: NFKC-lowercase per codepoint, whitespace collapsed,
    ends trimmed; a single newline inside a paragraph is whitespace).

Minimum length
    Units whose normalized text has fewer than ``min_paragraph_bytes`` bytes (default 32; 0 and 1 both mean
    "every non-empty unit") are never removed and never inserted: headings ("SYNOPSIS", "Home",
    "References", "Table of contents"), list markers and short code lines recur across documents without
    being boilerplate, and cutting them breaks the document's structure while saving few bytes.

Keep-first
    The first occurrence in input order (files in ``resolve_inputs`` order, rows in file order, units in
    document order) stays; later copies are cut from their documents. Batches go through
    ``bloom.keep_first`` (exact in-batch first occurrence by sort, then query, then insert), so the result
    does not depend on thread scheduling. In Bloom mode a false positive (rate ~ fp_rate up to the design
    item count) removes a unit that was in fact new; ``mode="exact"`` removes none. ``progress=True``
    shows a tqdm bar on stderr counting documents (off by default, like ``RunConfig.progress``).

Remove-all (``action="remove-all"``)
    Every copy of a key that occurs more than once in the input is removed, the first too (seed 002's "remove
    all copies"; ``Decider``): a first read puts the keys keep-first would remove into a second seen-set
    (``repeated``, sized as the first), the cut pass removes the eligible keys it holds. One more read of the
    input, twice the seen-set memory; a Bloom false positive of either set removes a unique unit.

Measured false positives (``fp_sample``)
    ``bloom.FpAudit`` replays the decisions on a hash-chosen sample of the keys against exact sets of the sample
    alone; paragraph_dedup.json ``fp_audit`` holds the false removals, the measured rate with a 95% Wilson
    interval and the target (compose copies it into run.json and the report's paragraph section shows it).

What is cut (reversible)
    A removed unit is cut together with ONE adjacent separator, so no blank-line runs pile up: the
    separator before it when an earlier unit of the document is kept, otherwise the separator after it
    (none when it is the document's last unit). Cut ranges are disjoint; ``removed_spans.parquet`` holds,
    per removed unit: id, byte_start, byte_end (the unit), paragraph_hash (32 hex digits: h1 then h2),
    cut_start, cut_end, cut_text (the exact bytes removed) and the global row. Re-inserting every
    cut_text at cut_start in ascending order restores the original text byte for byte.

Outputs (``output_dir``)
    removed_spans.parquet; paragraph_docs.parquet (one row per document: row, id, units, units_removed,
    bytes_before, bytes_after, flag); paragraph_deduplicated/ (the documents with the spans cut, same
    format, layout and columns as the input: untouched JSON lines are copied verbatim, changed ones are
    re-serialized by Python's json with the text replaced; Parquet keeps its schema and codec);
    paragraph_dedup.json (statistics). No document is dropped: documents left empty or with fewer than
    ``min_doc_bytes`` bytes are flagged "empty" / "short" in paragraph_docs.parquet ("cut" when changed
    otherwise, "unchanged" when not). On the Ray engine (distributed/paragraph.py) the two tables are by default
    datasets, OUT/removed_spans/ and OUT/paragraph_docs/ of one ``part-<k>.parquet`` per input file (the same
    rows, in input order, as the files; ``--table-layout file``: the files, byte for byte).

Stages (``paragraph_dedup`` composes and times them)
    count     ``count_pass`` (remove-all only): every batch's keys through ``Decider.count``
    pass      ``dedup_pass`` -> ``Pass``: every batch through ``dedup_batch`` (``batch_keys``: split units,
              hash; ``Decider.decide``; ``cut_batch``), its rows (``batch_tables``) streamed to OUT, its counts added
    stats     ``paragraph_stats``: paragraph_dedup.json, the shared run header (``run.header``) first
    write     ``cutwrite.write_cut_documents``: paragraph_deduplicated/, the input with the spans cut
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import pyarrow as pa

from .. import io
from ..config import InputConfig, NormalizeConfig, is_int, is_real
from ..runtime.compiling import compile_clock
from ..runtime.device import batch_bytes, note_compiling, simulator, to_device, to_host
from ..runtime.passes import progress
from ..errors import ConfigError
from ..io.text import arrow_text_buffers
from ..runtime.run import RowGroups, Steps, finish, header, peak_rss_bytes, resources, row_group_files
from ..text.cutwrite import apply_cuts, write_cut_documents
from ..text.spans import cut_ranges, gather_spans, hex128, span_hashes
from ..constants import SPAN_SENTENCES
from ..text.split import Units, Windows, sentence_windows, split_units
from .bloom import BloomConfig, BloomFilter, ExactSet, FpAudit, keep_first, make_seen_set

logger = logging.getLogger(__name__)

OUTPUT_DIR = "paragraph_deduplicated"  # the cut documents, in OUT
# the per-document tables' names in OUT: <name>.parquet (the local engine's), or on Ray by default <name>/ of
# per-input-file parts (distributed/paragraph.py; read either with decisions.read_table)
SPANS_TABLE, DOCS_TABLE = "removed_spans", "paragraph_docs"
SplitMode = Literal["paragraph", "line", "sentence", "span3"]
Action = Literal["keep-first", "remove-all"]
FLAGS = ("unchanged", "cut", "short", "empty")

SPANS_SCHEMA = pa.schema([
    ("id", pa.string()), ("byte_start", pa.int64()), ("byte_end", pa.int64()), ("paragraph_hash", pa.string()),
    ("cut_start", pa.int64()), ("cut_end", pa.int64()), ("cut_text", pa.large_string()), ("row", pa.int64()),
])
DOCS_SCHEMA = pa.schema([
    ("id", pa.string()), ("row", pa.int64()), ("units", pa.int64()), ("units_removed", pa.int64()),
    ("bytes_before", pa.int64()), ("bytes_after", pa.int64()), ("flag", pa.string()),
])


@dataclass(frozen=True)
class ParagraphConfig(InputConfig):
    """split: "line" (default) | "paragraph" | "sentence" | "span3" (module docstring); action: "keep-first"
    (default) | "remove-all"; fp_sample: the fraction of keys whose decisions are checked against exact sets
    (0: off; measured false-positive rate in the statistics); normalize: normalization applied before
    hashing; bloom: the seen-set (Bloom filter sizing, or mode="exact"); min_paragraph_bytes: units with
    fewer normalized bytes are left alone (never removed, never inserted); min_doc_bytes: changed documents
    left with fewer bytes are flagged "short"; progress: a tqdm bar on stderr (off in the API);
    id_field / text_field / batch_bytes / on_error: as in RunConfig."""

    split: SplitMode = "line"
    action: Action = "keep-first"
    # fraction of the keys (chosen by a hash of the key, so every copy of a chosen key is chosen) whose decisions
    # are replayed against exact sets: the measured false-positive rate of the Bloom seen-set (0: off)
    fp_sample: float = 0.0
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    bloom: BloomConfig = field(default_factory=BloomConfig)
    # A minimum in normalized UTF-8 bytes, not words: the normalizer's byte count comes for free with the
    # hash, and bytes work for every script, whereas a space-separated word count calls a whole Chinese or
    # Japanese sentence one word. 32 bytes keeps headings and short lines ("SYNOPSIS", "Home",
    # "Frequently asked questions", ~10 CJK characters, "return result;") in every document that has them,
    # while boilerplate sentences (copyright lines, cookie and newsletter notices) are longer and still cut.
    min_paragraph_bytes: int = 32
    min_doc_bytes: int = 50
    progress: bool = False  # like RunConfig.progress: off in the API unless asked for

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.split not in get_args(SplitMode):
            raise ConfigError(f"ParagraphConfig.split must be one of {get_args(SplitMode)}, got {self.split!r}")
        if self.action not in get_args(Action):
            raise ConfigError(f"ParagraphConfig.action must be one of {get_args(Action)}, got {self.action!r}")
        if not is_real(self.fp_sample) or not 0.0 <= float(self.fp_sample) <= 1.0:
            raise ConfigError(f"ParagraphConfig.fp_sample must be a fraction in [0, 1], got {self.fp_sample!r}; "
                              "e.g. 0.01 checks 1% of the paragraph keys against an exact set")
        for name in ("min_paragraph_bytes", "min_doc_bytes"):
            v = getattr(self, name)
            if not is_int(v) or v < 0:
                raise ConfigError(f"ParagraphConfig.{name} must be an int >= 0, got {v!r}")
        if not isinstance(self.progress, bool):
            raise ConfigError(f"ParagraphConfig.progress must be a bool, got {self.progress!r}")
        if not isinstance(self.normalize, NormalizeConfig):
            raise ConfigError(f"ParagraphConfig.normalize must be a NormalizeConfig, got {self.normalize!r}")
        if not isinstance(self.bloom, BloomConfig):
            raise ConfigError(f"ParagraphConfig.bloom must be a BloomConfig, got {self.bloom!r}")


@dataclass
class ParagraphResult:
    """stats: what paragraph_dedup.json holds. Without output_dir, ``spans`` (SPANS_SCHEMA) and
    ``documents`` (DOCS_SCHEMA plus ``text``, the cut text) are returned in memory (small inputs only);
    with output_dir they are None and live in OUT's tables (``decisions.read_table(out, SPANS_TABLE)``: the
    file, or a Ray run's dataset)."""

    stats: dict[str, Any]
    spans: pa.Table | None = None
    documents: pa.Table | None = None
    output_dir: str | None = None


# ----------------------------------------------------------------------------------------------------
# Per-batch steps (arrays of the device's module unless stated)
# ----------------------------------------------------------------------------------------------------

@dataclass
class BatchCut:
    """Host results of one batch (n documents, r removed units)."""

    text: pa.Array          # large_string (n,): documents with the cuts applied
    units: np.ndarray        # int64 (n,)
    units_removed: np.ndarray  # int64 (n,)
    bytes_before: np.ndarray  # int64 (n,)
    bytes_after: np.ndarray  # int64 (n,)
    flag: pa.Array          # string (n,)
    spans: pa.Table          # SPANS_SCHEMA without id/row filled from the batch (r rows)
    spans_doc: np.ndarray    # int64 (r,) document index in the batch
    eligible: int = 0        # eligible keys (units, or span3's windows)
    windows: int = 0         # span3: windows of SPAN_SENTENCES sentences hashed


@dataclass
class BatchKeys:
    """One batch's units and keys: data uint8 (T,) / offsets int64 (n+1,) host; units (device arrays); the keys
    (device): h1, h2 uint64 (k,) and eligible bool (k,), one per unit, or with split="span3" one per window of
    SPAN_SENTENCES sentences (``windows``; None otherwise)."""

    data: np.ndarray
    offsets: np.ndarray
    units: Units
    h1: Any
    h2: Any
    eligible: Any
    windows: Windows | None = None


def batch_keys(text: pa.Array, cfg: ParagraphConfig, device: str = "cpu") -> BatchKeys:
    """Split one batch of documents into units (span3: sentences, then their windows), hash each key span."""
    data, offsets = arrow_text_buffers(text)
    dd, doff = to_device(data, device), to_device(offsets, device)
    units = split_units(dd, doff, "sentence" if cfg.split == "span3" else cfg.split, device)
    win = sentence_windows(units, SPAN_SENTENCES, device) if cfg.split == "span3" else None
    ks, ke = (win.start, win.end) if win is not None else (units.start, units.end)
    h1, h2, nsize = span_hashes(dd, ks, ke, cfg.normalize, cfg.bloom.seed, device)
    return BatchKeys(data, offsets, units, h1, h2, nsize >= max(1, cfg.min_paragraph_bytes), win)


def removed_units(keys: BatchKeys, removed_keys: Any) -> tuple[np.ndarray, np.ndarray]:
    """Host: (removed bool (u,), key int64 (u,)) per unit: whether it is cut, and the key that cuts it (its own;
    with windows, the first removed window that holds it: a sentence is cut when any window over it is)."""
    rk = to_host(removed_keys)
    if keys.windows is None:
        return rk, np.arange(rk.shape[0], dtype=np.int64)
    u = int(keys.units.start.shape[0])
    w = rk.shape[0]
    r = np.flatnonzero(rk)
    first = to_host(keys.windows.first)[r]
    best = np.full(u, w, np.int64)
    for o in range(SPAN_SENTENCES):  # one window per (first, o): no index repeats within one assignment
        best[first + o] = np.minimum(best[first + o], r)
    return best < w, best


def dedup_batch(text: pa.Array, seen: "Decider | BloomFilter | ExactSet", cfg: ParagraphConfig,
                device: str = "cpu") -> BatchCut:
    """Split, hash, decide (keep-first against ``seen``, updated; or a ``Decider``'s rule) and cut one batch."""
    keys = batch_keys(text, cfg, device)
    if isinstance(seen, Decider):
        removed_keys = seen.decide(keys)
    else:
        removed_keys = keep_first(seen, keys.h1, keys.h2, keys.eligible)
    return cut_batch(keys, removed_keys, cfg, device)


def cut_batch(keys: BatchKeys, removed_keys: Any, cfg: ParagraphConfig, device: str = "cpu") -> BatchCut:
    """Cut the removed units of one batch (``removed_keys`` bool (k,) over ``keys``' keys)."""
    data, offsets, units = keys.data, keys.offsets, keys.units
    unit_off, start, end = to_host(units.unit_off), to_host(units.start), to_host(units.end)
    removed, key = removed_units(keys, removed_keys)
    cs, ce = cut_ranges(unit_off, start, end, removed)
    n = offsets.shape[0] - 1
    doc = np.repeat(np.arange(n), np.diff(unit_off))
    r = np.flatnonzero(removed)
    rdoc, rcs, rce = doc[r], cs[r], ce[r]
    new_text, new_len = apply_cuts(data, offsets, rdoc, rcs, rce)
    n_units = np.diff(unit_off)
    n_removed = np.bincount(rdoc, minlength=n).astype(np.int64)
    flag = np.full(n, 0, np.int8)
    changed = n_removed > 0
    flag[changed] = 1
    flag[changed & (new_len < cfg.min_doc_bytes)] = 2
    flag[changed & (n_removed == n_units)] = 3
    dstart = offsets[:-1][rdoc]
    k_dev = to_device(key[r], device)
    spans = pa.table({
        "byte_start": start[r] - dstart, "byte_end": end[r] - dstart,
        "paragraph_hash": hex128(to_host(keys.h1[k_dev]), to_host(keys.h2[k_dev])),
        "cut_start": rcs - dstart, "cut_end": rce - dstart,
        "cut_text": gather_spans(data, rcs, rce),
    })
    windows = 0 if keys.windows is None else int(keys.windows.first.shape[0])
    return BatchCut(new_text, n_units, n_removed, np.diff(offsets), new_len,
                    pa.array(np.array(FLAGS, dtype=object)[flag], pa.string()), spans, rdoc,
                    int(to_host(keys.eligible).sum()), windows)


class Decider:
    """The seen-sets of one run and ``cfg.action``'s rule over them; with ``cfg.fp_sample``, the same rule replayed
    over the sampled keys with exact sets (``bloom.FpAudit``).

    keep-first: a key is removed when it occurred earlier (``keep_first`` against ``seen``). remove-all: a first
    pass (``count``) puts every key that occurs more than once into ``repeated`` (the keys ``keep_first`` removes
    against ``seen``); the cut pass (``decide``) removes every eligible key ``repeated`` holds, the first copy too.
    """

    def __init__(self, cfg: ParagraphConfig, device: str = "cpu") -> None:
        self.cfg = cfg
        self.seen = make_seen_set(cfg.bloom, device)
        self.repeated = make_seen_set(cfg.bloom, device) if cfg.action == "remove-all" else None
        self.audit = FpAudit(float(cfg.fp_sample), cfg.bloom, device) if cfg.fp_sample > 0 else None

    @property
    def nbytes(self) -> int:
        return self.seen.nbytes + (self.repeated.nbytes if self.repeated is not None else 0)

    def count(self, keys: BatchKeys) -> None:
        """remove-all's first pass over one batch: its repeated keys into ``repeated``."""
        rep = keep_first(self.seen, keys.h1, keys.h2, keys.eligible)
        keep_first(self.repeated, keys.h1, keys.h2, rep)
        if self.audit is not None:
            self.audit.count(keys.h1, keys.h2, keys.eligible)

    def decide(self, keys: BatchKeys) -> Any:
        """bool (k,) over the batch's keys: removed (keep-first updates ``seen``)."""
        if self.repeated is None:
            removed = keep_first(self.seen, keys.h1, keys.h2, keys.eligible)
        else:
            removed = self.repeated.query(keys.h1, keys.h2) & keys.eligible
        if self.audit is not None:
            self.audit.check(keys.h1, keys.h2, keys.eligible, removed, self.cfg.action)
        return removed

    def stats(self) -> dict[str, Any]:
        """What paragraph_dedup.json records of the sets: ``seen_set``, ``repeated_set`` and ``fp_audit``."""
        out: dict[str, Any] = {"seen_set": self.seen.stats()}
        if self.repeated is not None:
            out["repeated_set"] = self.repeated.stats()
        if self.audit is not None:
            sets = [self.seen] + ([self.repeated] if self.repeated is not None else [])
            out["fp_audit"] = self.audit.stats(self.cfg.bloom, self.cfg.action,
                                               [x.stats().get("expected_fp_rate_at_items") for x in sets])
        return out


# ----------------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------------

@dataclass
class Pass:
    """What the streaming pass leaves: the counts of paragraph_dedup.json, the seconds in the per-batch steps,
    and (without an output directory) the batches' spans and documents."""

    counts: dict[str, Any]
    report: Any
    batch_bytes: int
    seconds_in_batches: float = 0.0
    spans: list[pa.Table] = field(default_factory=list)
    docs: list[pa.Table] = field(default_factory=list)


def new_counts() -> dict[str, Any]:
    return {"documents": 0, "units": 0, "windows": 0, "units_eligible": 0, "units_removed": 0, "bytes_in": 0,
            "bytes_cut": 0,
            "unit_bytes_removed": 0, "documents_changed": 0, "flags": {f: 0 for f in FLAGS}}


def batch_tables(batch, res: BatchCut) -> tuple[pa.Table, pa.Table]:
    """(spans, documents) of one batch's cuts: SPANS_SCHEMA and DOCS_SCHEMA rows, ids and global rows added."""
    n = len(batch.text)
    rows = np.arange(batch.row_start, batch.row_start + n, dtype=np.int64)
    spans = res.spans.add_column(0, "id", batch.ids.take(pa.array(res.spans_doc))) \
        .append_column("row", pa.array(rows[res.spans_doc]))
    spans = spans.select(SPANS_SCHEMA.names).cast(SPANS_SCHEMA)
    docs = pa.table({"id": batch.ids, "row": rows, "units": res.units, "units_removed": res.units_removed,
                     "bytes_before": res.bytes_before, "bytes_after": res.bytes_after, "flag": res.flag},
                    schema=DOCS_SCHEMA)
    return spans, docs


def add_counts(counts: dict[str, Any], res: BatchCut, spans: pa.Table, n: int) -> None:
    """Add one batch's cuts to the run's counts."""
    counts["documents"] += n
    counts["units"] += int(res.units.sum())
    counts["units_eligible"] += res.eligible
    counts["windows"] += res.windows
    counts["units_removed"] += int(res.units_removed.sum())
    counts["bytes_in"] += int(res.bytes_before.sum())
    counts["bytes_cut"] += int((res.bytes_before - res.bytes_after).sum())
    counts["unit_bytes_removed"] += int(np.sum(spans.column("byte_end").to_numpy()
                                               - spans.column("byte_start").to_numpy()))
    counts["documents_changed"] += int((res.units_removed > 0).sum())
    for f, c in zip(*np.unique(res.flag.to_numpy(zero_copy_only=False), return_counts=True)):
        counts["flags"][str(f)] += int(c)


def count_pass(files, cfg: ParagraphConfig, device: str, decider: Decider) -> None:
    """remove-all's first read: every batch's keys through ``Decider.count`` (which keys occur more than once)."""
    for batch in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                                 batch_bytes=batch_bytes(cfg.batch_bytes, device), on_error=cfg.on_error,
                                 report=io.ReadReport()):
        decider.count(batch_keys(batch.text, cfg, device))


def dedup_pass(files, cfg: ParagraphConfig, device: str, seen: "Decider | BloomFilter | ExactSet",
               out: str | None) -> Pass:
    """The cut pass: every batch through ``dedup_batch`` in input order, its spans and documents streamed to OUT's
    two tables (or kept, in memory), its counts added up."""
    p = Pass(new_counts(), io.ReadReport(), batch_bytes(cfg.batch_bytes, device))
    note_compiling(device, ("paragraph",))  # before the bar: a first run compiles the Bloom kernels
    with _Sinks(out) as sinks, progress(cfg, "paragraph dedup", files=files) as bar:
        for batch in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                                     batch_bytes=p.batch_bytes, on_error=cfg.on_error, report=p.report):
            tb, cb = time.perf_counter(), compile_clock()
            res = dedup_batch(batch.text, seen, cfg, device)
            p.seconds_in_batches += time.perf_counter() - tb - (compile_clock() - cb)  # compiling: timings' own
            spans, docs = batch_tables(batch, res)
            if out is None:
                p.spans.append(spans)
                p.docs.append(docs.append_column("text", res.text))
            else:
                sinks.write(spans, docs)
            add_counts(p.counts, res, spans, len(batch.text))
            bar.update(len(batch.text), batch.file_index)
    return p


UNITS = {"paragraph": "trimmed runs of non-blank lines", "line": "trimmed non-blank lines",
         "sentence": "trimmed sentences (text/split.py's rule: terminal runs before a blank and a non-lowercase "
                     "byte, wide terminals, line ends)",
         "span3": f"windows of {SPAN_SENTENCES} consecutive sentences (overlapping; a sentence is cut when any "
                  "removed window holds it)"}
KEEP = {"keep-first": "first occurrence in input order",
        "remove-all": "none: every copy of a key that occurs more than once is removed, the first too"}


def paragraph_stats(cfg: ParagraphConfig, device: str, threads: int, files, p: Pass,
                    seen: "Decider | BloomFilter | ExactSet",
                    timings: dict[str, float]) -> dict[str, Any]:
    """paragraph_dedup.json: the shared run header (``run.header``), then the policy, seen-set(s), the measured
    false-positive rate (``fp_audit``, with ``fp_sample``) and memory."""
    stats = header("paragraph_dedup", device=device, threads=threads, config=_cfg_dict(cfg), files=files,
                   read=p.report, counts=p.counts, timings=timings)
    sets = seen.stats() if isinstance(seen, Decider) else {"seen_set": seen.stats()}
    stats.update({
        "stage": "paragraph_dedup",
        "policy": {"split": cfg.split, "units": UNITS[cfg.split], "action": cfg.action,
                   "min_paragraph_bytes": max(1, cfg.min_paragraph_bytes),
                   "short_units": "units with fewer normalized bytes are never removed nor inserted",
                   "keep": KEEP[cfg.action],
                   "cut": "unit plus one adjacent separator (before it if an earlier unit is kept, else after)"},
        **sets,
        "memory": {"seen_set_bytes": seen.nbytes, "peak_rss_bytes": peak_rss_bytes(),
                   "batch_bytes": p.batch_bytes, **_gpu_memory(device)},
    })
    return stats


def paragraph_dedup(source: Any, cfg: ParagraphConfig | None = None, output_dir: str | os.PathLike | None = None,
                    device: str = "cpu") -> ParagraphResult:
    """Paragraph-level exact dedup of ``source`` (path(s)/glob(s)/directory, a pyarrow Table or a pandas
    DataFrame), keep-first or remove-all. Streams the input in batches; holds only the seen-set(s) (Bloom bits
    or 16 bytes per distinct unit in exact mode; remove-all holds two and reads the input once more) and one
    batch. See the module docstring for the policy and the outputs. Steps, timed into paragraph_dedup.json's
    ``timings_s``: ``count_pass`` (count, remove-all only), ``dedup_pass`` (pass1, of it kernels_and_cuts),
    ``write_cut_documents`` (write_documents), ``paragraph_stats``. The Ray engine's run is the ``Paragraph``
    step's with ``Env(engine="ray")`` (distributed/paragraph.py)."""
    cfg = cfg or ParagraphConfig()
    device, threads = resources(device)
    files = io.source_files(source)
    decider = Decider(cfg, device)
    out = os.fspath(output_dir) if output_dir is not None else None
    steps = Steps()
    if cfg.action == "remove-all":
        with steps("count"):
            count_pass(files, cfg, device, decider)
    with steps("pass1"):
        p = dedup_pass(files, cfg, device, decider, out)
    steps.timings["kernels_and_cuts"] = p.seconds_in_batches
    stats = paragraph_stats(cfg, device, threads, files, p, decider, steps.timings)  # the pass's peak memory
    if out is not None:
        with steps("write_documents"):
            stats["written"] = write_cut_documents(files, os.path.join(out, f"{SPANS_TABLE}.parquet"),
                                                   os.path.join(out, OUTPUT_DIR), cfg)
    t_pass1 = steps.timings["pass1"]
    steps.total()
    counts = p.counts
    stats["throughput"] = {"docs_per_s": counts["documents"] / t_pass1 if t_pass1 > 0 else None,
                           "mb_per_s": counts["bytes_in"] / 1e6 / t_pass1 if t_pass1 > 0 else None}
    if out is not None:
        finish(out, stats, name="paragraph_dedup.json")
        return ParagraphResult(stats, None, None, out)
    spans_t = pa.concat_tables(p.spans) if p.spans else SPANS_SCHEMA.empty_table()
    docs_t = pa.concat_tables(p.docs) if p.docs else \
        DOCS_SCHEMA.append(pa.field("text", pa.large_string())).empty_table()
    logger.info("paragraph dedup: %d of %d units removed from %d documents", counts["units_removed"],
                counts["units"], counts["documents_changed"])
    return ParagraphResult(stats, spans_t, docs_t, None)


def _cfg_dict(cfg: ParagraphConfig) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(cfg)


def _gpu_memory(device: str) -> dict[str, Any]:
    if device != "cuda" or simulator():
        return {}
    import cupy

    pool = cupy.get_default_memory_pool()
    return {"gpu_pool_used_bytes": int(pool.used_bytes()), "gpu_pool_total_bytes": int(pool.total_bytes())}


class _Sinks:
    """Streaming parquet writers for removed_spans.parquet and paragraph_docs.parquet (atomic: both
    appear only when the pass completes), in fixed row groups (``run.RowGroups``: the bytes depend on the rows
    alone, so that the Ray engine's per-file parts give the same files)."""

    def __init__(self, out: str | None) -> None:
        self.out = out
        self._groups: list[RowGroups] = []

    def __enter__(self) -> "_Sinks":
        if self.out is not None:
            self._files = row_group_files(self.out, ((f"{SPANS_TABLE}.parquet", SPANS_SCHEMA),
                                                     (f"{DOCS_TABLE}.parquet", DOCS_SCHEMA)))
            self._groups = self._files.__enter__()
        return self

    def write(self, spans: pa.Table, docs: pa.Table) -> None:
        self._groups[0].add(spans)
        self._groups[1].add(docs)

    def __exit__(self, *exc: Any) -> None:
        if self.out is not None:
            self._files.__exit__(*exc)
