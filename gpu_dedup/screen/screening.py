"""Benchmark-contamination screening by word n-gram overlap. It reports; it never removes anything.

Policy (declared; recorded in screen.json)
    Normalization: ``normalize_doc`` with ``ScreenConfig.normalize`` (default: NFKC-lowercase per
    codepoint, punctuation and symbols -> space, whitespace collapsed; digits kept, since numbers tell
    math items apart). Words are the space-separated runs of the normalized text; an n-gram is n
    consecutive words, hashed with XXH64(seed) over its normalized UTF-8 bytes.
    Benchmark items: JSON Lines / JSON array / Parquet records: every configured field (``fields``) that
    holds a string (or a list of strings, each indexed separately) is indexed on its own, so no n-gram
    spans two fields; the item id is the ``item_id_field`` value, else "<file>:<record index>". Without an
    ``item_id_field`` (the default) each file's is the first of ``ITEM_ID_FIELDS`` its records have (HumanEval
    and MBPP name items by ``task_id``, MATH-500 by ``unique_id``, SQuAD and ARC by ``id``), said in the log
    and recorded per benchmark in counts.json (``item_id_field``, null: record positions). Plain-text
    files (any other extension): ``text_unit="line"`` -> one item per non-blank line (id "<file>:<line
    number>"), ``"file"`` -> the whole file is one item (id "<file>").
    A corpus document is flagged for an item when they share at least ``min_matches`` distinct n-grams.

Common-phrase false alarms (the stop-list / minimum-n policy)
    1. n >= ``min_ngram`` (8 by default; the default n is 13): short n-grams such as "solve this exact"
       occur in ordinary text. A smaller n needs an explicit ``min_ngram`` (e.g. the 3-gram fixture).
    2. An n-gram that occurs in more than ``max_items_per_ngram`` distinct benchmark items (over all
       benchmark files) is template / boilerplate text ("the following are multiple choice questions
       ...") and cannot identify an item: it is ignored.
    3. Every n-gram of a ``common_phrases`` entry (license headers, standard instructions; normalized the
       same way) is ignored. A phrase shorter than n words has no n-grams and removes nothing (warned).
    Items with fewer than n words have no n-grams and cannot be screened at this n: they are counted as
    ``items_too_short`` per benchmark (a 4-word question is invisible to 13-gram screening; short
    questions, paraphrases and translations evade n-gram matching altogether, so a clean report is
    evidence of screening, not proof of decontamination).

Outputs (``output_dir``): matches.parquet (one row per flagged (document, item) pair: id, benchmark,
item_id, matched_ngrams, sample_ngrams, sample_byte_start, sample_byte_end, row, source; byte offsets are
0-based UTF-8 positions in the ORIGINAL document text, spanning the first to the last word of the
n-gram), counts.json (per benchmark) and screen.json (configuration, policy, totals, timings).

The benchmark files are read by ``benchmarks.py``; ``scan``, ``match_tally`` and ``screen_stats`` are shared with
the Ray engine's screen (gpu_dedup/distributed/screen.py: one task per input file, the same outputs).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence, get_args

import numpy as np
import pyarrow as pa

from .. import io
from ..config import InputConfig, NormalizeConfig, is_int
from ..constants import MAX_NGRAM
from ..errors import ConfigError, RunError
from ..io.text import arrow_text_buffers
from ..ops import bloom as bloom_ops
from ..runtime.device import array_module, batch_bytes, note_compiling, repeat_index, to_device, to_host
from ..runtime.outputs import check_outside_inputs, input_roots
from ..runtime.passes import progress
from ..runtime.run import Steps, finish, header, resources, write_tables
from ..text.normalize import device_tables, normalize_arrays, normalize_text
from .benchmarks import ITEM_ID_FIELDS, BenchmarkItems, item_id_field, load_phrases, read_benchmarks  # noqa: F401

logger = logging.getLogger(__name__)

TextUnit = Literal["line", "file"]
DEFAULT_FIELDS = ("prompt", "question", "problem", "answer", "solution", "canonical_solution")
MATCHES_SCHEMA = pa.schema([
    ("id", pa.string()), ("benchmark", pa.string()), ("item_id", pa.string()), ("matched_ngrams", pa.int64()),
    ("sample_ngrams", pa.list_(pa.string())), ("sample_byte_start", pa.list_(pa.int64())),
    ("sample_byte_end", pa.list_(pa.int64())), ("row", pa.int64()), ("source", pa.string()),
])


@dataclass(frozen=True)
class ScreenConfig(InputConfig):
    """See the module docstring. ngram: words per n-gram; min_matches: distinct shared n-grams needed to
    flag a (document, item) pair; min_ngram: the smallest n accepted; fields: benchmark record fields to
    index; item_id_field: benchmark record id field (None: the first of ITEM_ID_FIELDS that a file's records
    have); text_unit: plain-text benchmark files, one item per
    line or per file; max_items_per_ngram: ignore n-grams in more distinct items (None: keep all);
    common_phrases: phrases whose n-grams are ignored; max_samples: matched n-grams reported per pair."""

    ngram: int = 13
    min_matches: int = 1
    min_ngram: int = 8
    fields: tuple[str, ...] = DEFAULT_FIELDS
    item_id_field: str | None = None
    text_unit: TextUnit = "line"
    max_items_per_ngram: int | None = 10
    common_phrases: tuple[str, ...] = ()
    normalize: NormalizeConfig = field(default_factory=lambda: NormalizeConfig(remove_punctuation=True))
    seed: int = 0
    max_samples: int = 5
    progress: bool = False  # a bar on stderr (documents/s, ETA): off in the API, the pipeline's setting in a step

    def __post_init__(self) -> None:
        super().__post_init__()
        def posint(name: str, lo: int = 1) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ConfigError(f"ScreenConfig.{name} must be an int >= {lo}, got {v!r}")

        posint("ngram")
        posint("min_matches")
        posint("min_ngram")
        posint("max_samples", 0)
        if self.ngram > MAX_NGRAM:
            raise ConfigError(f"ScreenConfig.ngram must be <= {MAX_NGRAM}, got {self.ngram!r}")
        if self.ngram < self.min_ngram:
            raise ConfigError(f"ScreenConfig.ngram={self.ngram} is below min_ngram={self.min_ngram}: short n-grams "
                              f"match common phrases in ordinary text; use ngram >= {self.min_ngram}, or lower "
                              f"min_ngram explicitly if you accept the false alarms")
        if self.max_items_per_ngram is not None:
            posint("max_items_per_ngram")
        if isinstance(self.fields, str) or not all(isinstance(f, str) and f for f in self.fields) \
                or not self.fields:
            raise ConfigError(f"ScreenConfig.fields must be a non-empty tuple of field names, got {self.fields!r}")
        if isinstance(self.common_phrases, str) or not all(isinstance(p, str) for p in self.common_phrases):
            raise ConfigError(f"ScreenConfig.common_phrases must be a tuple of strings, got {self.common_phrases!r}")
        if self.text_unit not in get_args(TextUnit):
            raise ConfigError(f"ScreenConfig.text_unit must be one of {get_args(TextUnit)}, got {self.text_unit!r}")
        if self.item_id_field is not None and (not isinstance(self.item_id_field, str) or not self.item_id_field):
            raise ConfigError(f"ScreenConfig.item_id_field must be a field name or None (automatic: the first of "
                              f"{list(ITEM_ID_FIELDS)} a file has), got {self.item_id_field!r}")
        if not isinstance(self.normalize, NormalizeConfig):
            raise ConfigError(f"ScreenConfig.normalize must be a NormalizeConfig, got {self.normalize!r}")
        if not is_int(self.seed) or not 0 <= self.seed < 2**64:
            raise ConfigError(f"ScreenConfig.seed must be an int in [0, 2**64), got {self.seed!r}")


@dataclass
class ScreenResult:
    """matches: MATCHES_SCHEMA, one row per flagged (document, item) pair; counts: per benchmark;
    stats: what screen.json holds; ids: every document's id, in input order."""

    matches: pa.Table
    counts: dict[str, Any]
    stats: dict[str, Any]
    output_dir: str | None = None
    ids: pa.Array | None = None  # every document's id, in input order (a pipeline's verdicts name them)

    @property
    def flagged_ids(self) -> set[str]:
        return set(self.matches.column("id").to_pylist())


# ----------------------------------------------------------------------------------------------------
# N-gram hashing (device kernels)
# ----------------------------------------------------------------------------------------------------

def ngram_hashes(norm: Any, n: int, seed: int = 0, device: str = "cpu",
                 chunk: int | None = None) -> tuple[Any, Any]:
    """Word n-gram hashes of every normalized document, in order: (hashes uint64 (S,), base int64
    (docs+1,)); n-gram j of document d (words j..j+n-1) is hashes[base[d] + j].

    ``ops.bloom.ngram_hashes``: one scan per document on the CPU; on a GPU work per thread bounded by bytes
    (a block per ``chunk`` n-grams, default kernels/bloom_cuda.NGRAM_CHUNK; tests cut at every n-gram). The same
    array either way."""
    return bloom_ops.ngram_hashes(device, norm, n, seed, chunk)


def word_spans(data: Any, starts: Any, ends: Any, words: Any, cfg: NormalizeConfig,
               device: str = "cpu", chunk: int | None = None) -> tuple[Any, Any, Any]:
    """Original byte spans (absolute) of the normalized words of documents data[starts[d]:ends[d]];
    ``words`` int64 (docs,) = their normalized word counts (from normalize_text). Returns (wbase int64
    (docs+1,), word_start, word_end int64 (W,)). ``ops.bloom.word_spans``: one scan per document on the CPU; on a
    GPU work per thread bounded by bytes (chunks of about ``chunk`` bytes, default kernels/bloom_cuda.WORD_SPAN_CHUNK;
    tests cut at every few bytes). The same spans either way.

    Raises:
        RunError: if the word counts disagree with normalization (a bug)."""
    xp = array_module(device)
    map_off, map_cp = device_tables(cfg, device)
    wbase, ws, we, counts = bloom_ops.word_spans(device, data, starts, ends, map_off, map_cp, words, chunk)
    if not bool(to_host(xp.all(counts == words))):
        raise RunError("word spans disagree with the normalizer's word count; this is a bug, please report it")
    return wbase, ws, we


# ----------------------------------------------------------------------------------------------------
# The benchmark index
# ----------------------------------------------------------------------------------------------------

@dataclass
class BenchmarkIndex:
    """hashes: sorted distinct n-gram hashes kept by the policy, uint64 (H,) (device module);
    item_off int64 (H+1,), item int64 (E,): the items holding each hash (host); plus the items."""

    hashes: Any
    bitmap: Any  # uint32 prefilter: bit (h >> shift) set for every indexed hash (device module)
    shift: int
    item_off: np.ndarray
    item: np.ndarray
    items: BenchmarkItems
    counts: dict[str, dict[str, Any]]
    policy: dict[str, Any]


def build_index(items: BenchmarkItems, cfg: ScreenConfig, device: str = "cpu") -> BenchmarkIndex:
    """Hash every piece's n-grams; drop the n-grams of the common-phrase policy (module docstring)."""
    n_items = len(items.item_ids)
    hashes, piece = _piece_ngrams(items.piece_text, cfg, device)
    item = np.asarray(items.piece_item, np.int64)[piece] if piece.shape[0] else np.zeros(0, np.int64)
    order = np.lexsort((item, hashes))
    hashes, item = hashes[order], item[order]
    first = np.ones(hashes.shape[0], bool)
    first[1:] = (hashes[1:] != hashes[:-1]) | (item[1:] != item[:-1])
    hashes, item = hashes[first], item[first]  # distinct (hash, item) pairs
    screenable_before = np.zeros(n_items, bool)
    screenable_before[item] = True

    head = np.ones(hashes.shape[0], bool)
    head[1:] = hashes[1:] != hashes[:-1]
    gid = np.cumsum(head) - 1
    per_hash = np.bincount(gid)
    drop_freq = np.zeros(hashes.shape[0], bool)
    if cfg.max_items_per_ngram is not None:
        drop_freq = per_hash[gid] > cfg.max_items_per_ngram
    common = np.zeros(0, np.uint64)
    short_phrases = 0
    if cfg.common_phrases:
        common, cpiece = _piece_ngrams(list(cfg.common_phrases), cfg, device)
        short_phrases = len(cfg.common_phrases) - np.unique(cpiece).shape[0]
        if short_phrases:
            logger.warning("%d common phrase(s) have fewer than n=%d words and ignore nothing", short_phrases,
                           cfg.ngram)
        common = np.unique(common)
    drop_common = np.isin(hashes, common) & ~drop_freq
    keep = ~(drop_freq | drop_common)

    counts: dict[str, dict[str, Any]] = {}
    kept_items = np.zeros(n_items, bool)
    kept_items[item[keep]] = True
    for b, name in enumerate(items.names):
        mine = items.item_bench == b
        in_b = mine[item] if item.shape[0] else np.zeros(0, bool)
        counts[name] = {
            "items": int(mine.sum()),
            "records_without_fields": int(items.no_field.get(name, 0)),
            "item_id_field": items.id_field.get(name),
            "items_too_short": int((mine & ~screenable_before).sum()),
            "items_screened": int((mine & kept_items).sum()),
            "items_only_common_ngrams": int((mine & screenable_before & ~kept_items).sum()),
            "ngrams": int(in_b.sum()),
            "ngrams_ignored_frequent": int((in_b & drop_freq).sum()),
            "ngrams_ignored_common_phrase": int((in_b & drop_common).sum()),
            "documents_flagged": 0, "items_matched": 0, "match_rows": 0,
        }
        if counts[name]["items_too_short"]:
            logger.warning("benchmark %s: %d item(s) have fewer than n=%d words and cannot be screened at this n",
                           name, counts[name]["items_too_short"], cfg.ngram)
    hashes, item = hashes[keep], item[keep]
    head = np.ones(hashes.shape[0], bool)
    head[1:] = hashes[1:] != hashes[:-1]
    starts = np.flatnonzero(head)
    item_off = np.append(starts, hashes.shape[0]).astype(np.int64)
    policy = {"ngram": cfg.ngram, "min_ngram": cfg.min_ngram, "min_matches": cfg.min_matches,
              "max_items_per_ngram": cfg.max_items_per_ngram, "common_phrases": len(cfg.common_phrases),
              "common_phrases_shorter_than_n": int(short_phrases),
              "normalize": {**cfg.normalize.__dict__}, "fields": list(cfg.fields), "text_unit": cfg.text_unit,
              "hash": f"xxh64(seed={cfg.seed}) of the n-gram's normalized UTF-8 bytes",
              "distinct_ngrams_indexed": int(starts.shape[0])}
    keys = hashes[starts].copy()
    bitmap, shift = _prefilter(keys)
    return BenchmarkIndex(to_device(keys, device), to_device(bitmap, device), shift, item_off, item, items, counts,
                          policy)


def _prefilter(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """A bitmap of 2^b bits (b: at least 64 bits per key, 2^10 to 2^30) addressed by the top b bits of a
    hash: an n-gram whose bit is clear is not indexed (one cache-friendly read instead of a binary search);
    about 1/64 of absent n-grams pass to the search."""
    b = int(min(30, max(10, np.ceil(np.log2(max(keys.shape[0], 1))) + 6)))
    shift = 64 - b
    bitmap = np.zeros(1 << (b - 5), np.uint32)
    top = keys >> np.uint64(shift)
    np.bitwise_or.at(bitmap, (top >> np.uint64(5)).astype(np.int64),
                     (np.uint32(1) << (top & np.uint64(31)).astype(np.uint32)))
    return bitmap, shift


def _piece_ngrams(texts: list[str], cfg: ScreenConfig, device: str) -> tuple[np.ndarray, np.ndarray]:
    """Host (hashes uint64, piece index int64) of the n-grams of each text."""
    if not texts:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    norm = normalize_text(pa.array(texts, pa.large_string()), cfg.normalize, device)
    h, base = ngram_hashes(norm, cfg.ngram, cfg.seed, device)
    piece = repeat_index(array_module(device), base[1:] - base[:-1])
    return to_host(h), to_host(piece)


# ----------------------------------------------------------------------------------------------------
# Scanning
# ----------------------------------------------------------------------------------------------------

def screen_batch(text: pa.Array, index: BenchmarkIndex, cfg: ScreenConfig, device: str = "cpu") -> list[dict]:
    """Flagged (document, item) pairs of one batch: dicts with doc (batch index), item, matched_ngrams,
    sample_ngrams, sample_byte_start, sample_byte_end (relative to the document)."""
    xp = array_module(device)
    data, offsets = arrow_text_buffers(text)
    dd, doff = to_device(data, device), to_device(offsets, device)
    norm = normalize_arrays(dd, doff, cfg.normalize, device)
    h, base = ngram_hashes(norm, cfg.ngram, cfg.seed, device)
    if int(index.hashes.shape[0]) == 0 or h.shape[0] == 0:
        return []
    pos = bloom_ops.member_sorted(device, index.hashes, index.bitmap, index.shift, h)
    hit_idx = xp.flatnonzero(pos >= 0)
    if hit_idx.shape[0] == 0:
        return []
    hit_idx_h = to_host(hit_idx)
    base_h = to_host(base)
    doc = np.searchsorted(base_h[1:], hit_idx_h, side="right")
    j = hit_idx_h - base_h[doc]
    hsh = to_host(h[hit_idx])
    hpos = to_host(pos[hit_idx])
    # expand each hit to the items holding its n-gram
    cnt = index.item_off[hpos + 1] - index.item_off[hpos]
    rep = np.repeat(np.arange(hpos.shape[0]), cnt)
    within = np.arange(rep.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    item = index.item[index.item_off[hpos][rep] + within]
    doc, j, hsh = doc[rep], j[rep], hsh[rep]
    # distinct n-grams per (doc, item): first occurrence of each hash
    order = np.lexsort((j, hsh, item, doc))
    doc, item, hsh, j = doc[order], item[order], hsh[order], j[order]
    first = np.ones(doc.shape[0], bool)
    first[1:] = (doc[1:] != doc[:-1]) | (item[1:] != item[:-1]) | (hsh[1:] != hsh[:-1])
    doc, item, j = doc[first], item[first], j[first]
    order = np.lexsort((j, item, doc))
    doc, item, j = doc[order], item[order], j[order]
    grp = np.ones(doc.shape[0], bool)
    grp[1:] = (doc[1:] != doc[:-1]) | (item[1:] != item[:-1])
    gstart = np.flatnonzero(grp)
    gsize = np.diff(np.append(gstart, doc.shape[0]))
    ok = gsize >= cfg.min_matches
    if not ok.any():
        return []
    gstart, gsize = gstart[ok], gsize[ok]
    flagged_docs = np.unique(doc[gstart])
    # original byte spans of the words of the flagged documents only
    words = to_host(norm.words)[flagged_docs]
    wbase, ws, we = word_spans(dd, doff[to_device(flagged_docs, device)], doff[to_device(flagged_docs + 1, device)],
                               to_device(words, device), cfg.normalize, device)
    wbase, ws, we = to_host(wbase), to_host(ws), to_host(we)
    slot = {int(d): k for k, d in enumerate(flagged_docs.tolist())}
    n = cfg.ngram
    out = []
    for g0, gs in zip(gstart.tolist(), gsize.tolist()):
        d = int(doc[g0])
        k = slot[d]
        js = j[g0:g0 + min(gs, cfg.max_samples)]
        s_abs = ws[wbase[k] + js]
        e_abs = we[wbase[k] + js + n - 1]
        samples = [bytes(data[s:e]).decode("utf-8", "replace") for s, e in zip(s_abs.tolist(), e_abs.tolist())]
        d0 = int(offsets[d])
        out.append({"doc": d, "item": int(item[g0]), "matched_ngrams": gs, "sample_ngrams": samples,
                    "sample_byte_start": (s_abs - d0).tolist(), "sample_byte_end": (e_abs - d0).tolist()})
    return out


def screen(corpus_source: Any, benchmark_files: Sequence[str | os.PathLike] | str | os.PathLike,
           cfg: ScreenConfig | None = None, output_dir: str | os.PathLike | None = None,
           device: str = "cpu") -> ScreenResult:
    """Flag corpus documents sharing >= cfg.min_matches word n-grams with a benchmark item (policy in the
    module docstring). Streams the corpus in batches; the benchmark index is held in memory (8 bytes per
    distinct n-gram on the device, 16 per (n-gram, item) pair on the host). Never modifies the corpus.

    Args:
        corpus_source: path(s), glob(s) or a directory of the corpus, a pyarrow Table or a pandas DataFrame.
        benchmark_files: the benchmark file(s): jsonl / parquet (``cfg.fields``) or plain text.
        cfg: the ``ScreenConfig`` (None: its defaults).
        output_dir: where matches.parquet, counts.json and screen.json go (None: in memory).
        device: "cpu", "cuda" or "auto".

    Returns:
        A ``ScreenResult``: the (document, item) matches, the flagged ids, the counts.

    Raises:
        ConfigError: ``output_dir`` at or under an input (corpus or benchmark), refused before anything is read.
        GpuDedupError: a benchmark or corpus that cannot be read (the message names the file).
    """
    cfg = cfg or ScreenConfig()
    if output_dir is not None:
        check_outside_inputs({"output_dir": output_dir}, input_roots(corpus_source) + input_roots(benchmark_files))
    device, threads = resources(device)
    note_compiling(device, ("screen",))  # before any bar: a first run compiles the n-gram hash kernels
    steps = Steps()
    with steps("index"):
        index = build_index(read_benchmarks(benchmark_files, cfg), cfg, device)
    files = io.source_files(corpus_source)
    report = io.ReadReport()
    with steps("scan"), progress(cfg, "screen", files=files) as bar:  # a first run's compiling: timings["compile"]
        matches, all_ids = scan(files, index, cfg, device, report, bar)
    ids = pa.chunked_array(all_ids, pa.string()).combine_chunks() if all_ids else pa.array([], pa.string())
    stats = screen_stats(index, cfg, device, threads, files, report, steps,
                         match_tally(matches, sum(len(i) for i in all_ids)))
    out = None if output_dir is None else write_screen(output_dir, [matches], index, stats)
    return ScreenResult(matches, index.counts, stats, out, ids)


def scan(files, index: BenchmarkIndex, cfg: ScreenConfig, device: str = "cpu", report: Any = None,
         bar: Any = None) -> tuple[pa.Table, list[pa.Array]]:
    """(matches: MATCHES_SCHEMA, the rows numbered from 0 at the first of ``files``; the documents' ids, one
    array per batch) of ``files`` against ``index``; ``report``: the reader's ``io.ReadReport``; ``bar``: a
    progress bar to update."""
    rows: dict[str, list] = {name: [] for name in MATCHES_SCHEMA.names}
    all_ids: list[pa.Array] = []
    items = index.items
    for batch in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                                 batch_bytes=batch_bytes(cfg.batch_bytes, device), on_error=cfg.on_error,
                                 report=report):
        found = screen_batch(batch.text, index, cfg, device)
        if bar is not None:
            bar.update(len(batch.text), batch.file_index)
        all_ids.append(batch.ids)
        source = files[batch.file_index].relpath
        for m in found:
            rows["id"].append(batch.ids[m["doc"]].as_py())
            rows["benchmark"].append(items.names[int(items.item_bench[m["item"]])])
            rows["item_id"].append(items.item_ids[m["item"]])
            for key in ("matched_ngrams", "sample_ngrams", "sample_byte_start", "sample_byte_end"):
                rows[key].append(m[key])
            rows["row"].append(batch.row_start + m["doc"])
            rows["source"].append(source)
    return pa.table(rows, schema=MATCHES_SCHEMA), all_ids


def match_tally(matches: pa.Table, documents: int | None = None) -> dict[str, Any]:
    """What counts.json and the totals need of ``matches`` (rows of one file, or all), mergeable over files
    (``merge_tallies``: their rows are disjoint): per benchmark its match rows, flagged documents and matched
    item ids (sorted); the documents flagged; the documents scanned (``documents``)."""
    t = matches.to_pydict() if matches.num_rows else {k: [] for k in ("benchmark", "row", "item_id")}
    per: dict[str, list] = {}
    for b, r, item in zip(t["benchmark"], t["row"], t["item_id"]):
        p = per.setdefault(b, [0, set(), set()])
        p[0] += 1
        p[1].add(r)
        p[2].add(item)
    return {"benchmarks": {b: [p[0], len(p[1]), sorted(p[2])] for b, p in per.items()},
            "documents_flagged": len(set(t["row"])), "match_rows": len(t["row"]), "documents": documents}


def merge_tallies(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One tally of the files' ``match_tally`` parts (their documents and flagged rows add; item ids unite)."""
    per: dict[str, list] = {}
    for t in parts:
        for b, (rows, docs, items) in t["benchmarks"].items():
            p = per.setdefault(b, [0, 0, set()])
            p[0] += rows
            p[1] += docs
            p[2].update(items)
    return {"benchmarks": {b: [p[0], p[1], sorted(p[2])] for b, p in per.items()},
            "documents_flagged": sum(t["documents_flagged"] for t in parts),
            "match_rows": sum(t["match_rows"] for t in parts), "documents": sum(t["documents"] or 0 for t in parts)}


def screen_stats(index: BenchmarkIndex, cfg: ScreenConfig, device: str, threads: int, files, report: Any,
                 steps: Steps, tally: dict[str, Any]) -> dict[str, Any]:
    """screen.json, and counts.json's per-benchmark match counts set in ``index.counts``, from the run's
    ``tally`` (``match_tally``, or the merged tallies of a Ray run's files)."""
    counts = index.counts
    for name in index.items.names:
        rows, docs, items = tally["benchmarks"].get(name, (0, 0, ()))
        counts[name].update(match_rows=rows, documents_flagged=docs, items_matched=len(items))
    rd = report.to_dict() if hasattr(report, "to_dict") else report
    docs_scanned = tally["documents"] if tally["documents"] is not None else int(rd["rows"])
    bytes_scanned = int(rd["bytes_text"])
    t_scan = steps.timings["scan"]
    totals = {"documents": docs_scanned, "bytes": bytes_scanned, "documents_flagged": tally["documents_flagged"],
              "match_rows": tally["match_rows"]}
    stats = header("screen", device=device, threads=threads, config=dataclasses.asdict(cfg), files=files,
                   read=report, counts=totals, timings=steps.timings)
    stats.update({
        "stage": "screen", "policy": index.policy, "benchmarks": index.items.names,
        "totals": totals,  # = counts (the shared header's name), kept under its earlier name
        "throughput": {"docs_per_s": docs_scanned / t_scan if t_scan > 0 else None,
                       "mb_per_s": bytes_scanned / 1e6 / t_scan if t_scan > 0 else None},
        "note": "n-gram overlap is a bounded contamination signal: it reports, never removes; short items, "
                "paraphrases and translations can evade it",
    })
    steps.total()
    logger.info("screen: %d of %d documents flagged", totals["documents_flagged"], docs_scanned)
    return stats


def write_screen(output_dir: str | os.PathLike, matches: Any, index: BenchmarkIndex, stats: dict[str, Any]) -> str:
    """matches.parquet (from ``matches``: its parts, in row order), counts.json and screen.json (written last)
    in ``output_dir``; returns its path."""
    out = os.fspath(output_dir)
    os.makedirs(out, exist_ok=True)
    write_tables(matches, MATCHES_SCHEMA, os.path.join(out, "matches.parquet"))
    io.write_json_atomic(index.counts, os.path.join(out, "counts.json"))
    finish(out, stats, name="screen.json")
    return out


__all__ = ["ScreenConfig", "ScreenResult", "screen", "load_phrases", "read_benchmarks", "build_index",
           "screen_batch", "ngram_hashes", "word_spans", "MATCHES_SCHEMA"]
