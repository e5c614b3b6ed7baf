"""Exact-substring dedup (Lee et al. 2022): named stages in data-flow order, composed and timed by
``substring_dedup``.

    read      every document of the source batch by batch (ids, byte lengths, the keep column), tokenized
              (tokens.py: word units or a tokenizer.json; identities and byte ranges in the original text)
              into a TokenStore; the text is dropped after its batch
    rank      keep order of the documents (first | longest | min-id | max:<column> | min:<column>, as dedup)
    match     earliest copy of every window of min_tokens tokens: suffix array + LCP per chunk pair (spans.py),
              the chunks chosen by memory_budget (plan_chunks) or chunk_tokens
    cut       the input READ AGAIN batch by batch: runs of tokens covered by later copies, the seam rule's byte
              ranges (spans.byte_cuts), the documents with the spans removed, per-document counts and flags,
              a seam sample; spans and documents streamed to the parquet files
    write     substring_deduplicated/ (the input read a third time), substring_dedup.json

Outputs (``output_dir``)
    substring_spans.parquet, one row per cut span: id, row, byte_start / byte_end (the span's tokens),
    token_start / token_end (token offsets in the document), span_hash (16 hex digits: BLAKE2b-64 of the
    tokens' identities, equal for equal token sequences), kept_id / kept_row / kept_token / kept_byte (where
    the kept copy of the span's first window starts), cut_start / cut_end / cut_text (the exact bytes
    removed). Re-inserting every cut_text at cut_start in ascending order restores the original byte for byte.
    substring_docs.parquet, one row per input document: id, row, tokens, tokens_cut, spans_cut, bytes_before,
    bytes_after, flag ("unchanged", "cut", "short": changed and under min_doc_bytes, "empty": every token
    cut); no document is dropped. substring_deduplicated/: the documents with the spans cut, in the input's
    format (paragraph dedup's writer: untouched JSON lines verbatim). substring_dedup.json: the statistics,
    with the policy, the seam rule and a sample of seams (the text on both sides of a cut as it reads after it);
    substring_report.html shows them (report/substring.py). On the Ray engine (distributed/substring.py) the two
    tables are by default datasets, OUT/substring_spans/ and OUT/substring_docs/ of one ``part-<k>.parquet`` per
    input file (the same rows, in input order; ``--table-layout file``: the files, byte for byte); read either
    with ``decisions.read_table(out, SPANS_TABLE)``.
Invalid UTF-8
    As everywhere (io.read): replaced with U+FFFD and counted; byte offsets then refer to the repaired text,
    which is what a changed row of substring_deduplicated/ holds.
Devices
    With device="cuda" the word units are found and hashed on the GPU (tokens.word_tokens: array operations
    and the paragraph stage's span kernels), and the suffix arrays, LCP arrays and the window grouping run
    there (suffix.py, spans.earliest_in); a tokenizer.json (Hugging Face tokenizers, a CPU library) and the
    cuts run on the host, the same code as the CPU path. Read batches stay the CPU's size on a GPU.
Memory (host; measured with benchmarks/substring_bench.py, README)
    Per document: id, byte length, token offset and keep order (about 40 B plus the id). Per token, without
    a budget: identity, start, end and earliest copy (32 B, in memory) plus one suffix array over everything
    (SUBSTRING_BYTES_PER_POSITION: 93 B per position measured on the CPU for pair arrays); measured peak growth 122 B per
    token end to end, one read batch included. With ``memory_budget`` the per-token columns are files in a
    work directory (32 B per token on disk, removed at the end), read back per chunk pair and per cut batch,
    and the budget chooses the chunks (one pair's arrays fit it) and caps the read batch (budget /
    SUBSTRING_READ_BYTES_PER_BYTE of text); what is held then grows with the documents, not the tokens. A
    document longer than a budget allows is refused before any suffix array, naming it and the budget it
    needs. Without an output directory the cut documents and spans are returned in memory (the caller
    asked for them).
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .. import constants as C
from .. import io
from ..decisions import keep_rank
from ..runtime.device import batch_bytes, note_compiling
from ..runtime.heartbeat import Heartbeat, phase
from ..errors import DataError, RunError
from ..io.text import arrow_text_buffers
from ..text.cutwrite import apply_cuts, write_cut_documents
from ..text.spans import gather_spans
from ..runtime.outputs import input_roots
from ..runtime.passes import progress
from ..runtime.run import Steps, finish, header, owned, peak_rss_bytes, resources, row_group_files
from .config import SubstringConfig
from .spans import CutSpans, KeepOrder, Matches, byte_cuts, cut_spans, find_matches
from .suffix import require_library
from .tokens import Tokens, TokenStore, load_tokenizer, tokenizer_tokens, word_tokens

logger = logging.getLogger(__name__)

OUTPUT_DIR = "substring_deduplicated"
SPANS_TABLE, DOCS_TABLE = "substring_spans", "substring_docs"  # OUT/<name>.parquet, or a Ray run's OUT/<name>/
SPANS_FILE = f"{SPANS_TABLE}.parquet"
DOCS_FILE = f"{DOCS_TABLE}.parquet"
STATS_FILE = "substring_dedup.json"
OUTPUT_FILES = (SPANS_FILE, DOCS_FILE, OUTPUT_DIR + "/", STATS_FILE, "substring_report.html")
FLAGS = ("unchanged", "cut", "short", "empty")
SEAM_RULE = ("a span followed by a kept token is cut from its first token's start to the next token's start "
             "(the whitespace before the span stays and runs into the next token); a span that ends the "
             "document's tokens is cut from the previous token's end to its last token's end (trailing "
             "whitespace stays)")

SPANS_SCHEMA = pa.schema([
    ("id", pa.string()), ("row", pa.int64()), ("byte_start", pa.int64()), ("byte_end", pa.int64()),
    ("token_start", pa.int64()), ("token_end", pa.int64()), ("span_hash", pa.string()),
    ("kept_id", pa.string()), ("kept_row", pa.int64()), ("kept_token", pa.int64()), ("kept_byte", pa.int64()),
    ("cut_start", pa.int64()), ("cut_end", pa.int64()), ("cut_text", pa.large_string()),
])
DOCS_SCHEMA = pa.schema([
    ("id", pa.string()), ("row", pa.int64()), ("tokens", pa.int64()), ("tokens_cut", pa.int64()),
    ("spans_cut", pa.int64()), ("bytes_before", pa.int64()), ("bytes_after", pa.int64()), ("flag", pa.string()),
])


@dataclass
class SubstringResult:
    """stats: substring_dedup.json. Without output_dir, ``spans`` (SPANS_SCHEMA) and ``documents``
    (DOCS_SCHEMA plus ``text``, the cut text) are returned in memory; with output_dir they are in OUT's tables
    (the files, or a Ray run's datasets: ``decisions.read_table``)."""

    stats: dict[str, Any]
    spans: pa.Table | None = None
    documents: pa.Table | None = None
    output_dir: str | None = None


@dataclass
class Corpus:
    """What is held per accepted row (never its text): ids string (n,), text_bytes int64 (n,), keep_values
    float64 (n,) or None; tokens: the TokenStore (in memory or spilled to the work directory)."""

    files: list
    ids: pa.Array
    text_bytes: np.ndarray
    keep_values: np.ndarray | None
    read: dict[str, Any]
    tokens: TokenStore


@dataclass
class Cut:
    """spans: SPANS_SCHEMA; documents: DOCS_SCHEMA plus text (both None when streamed to the output
    directory); counts and the seam sample for the stats."""

    spans: pa.Table | None
    documents: pa.Table | None
    counts: dict[str, Any]
    seams: list[dict[str, Any]]


def read_batch_bytes(cfg: SubstringConfig) -> int:
    """Text bytes per read batch: the configured or CPU default; with a memory budget (and no batch_bytes
    given) at most budget / SUBSTRING_READ_BYTES_PER_BYTE, what tokenizing a batch holds per text byte."""
    bb = batch_bytes(cfg.batch_bytes, "cpu")
    if cfg.memory_budget is not None and cfg.batch_bytes is None:
        bb = max(1 << 16, min(bb, cfg.memory_budget // C.SUBSTRING_READ_BYTES_PER_BYTE))
    return bb


def _batches(files: list, cfg: SubstringConfig, report: io.ReadReport | None = None):
    return io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                           batch_bytes=read_batch_bytes(cfg), on_error=cfg.on_error,
                           keep_column=cfg.keep_column, report=report)


def read_corpus(source: Any, cfg: SubstringConfig, work_dir: str | None = None, device: str = "cpu") -> Corpus:
    """Read and tokenize, one batch at a time: the tokens go to a TokenStore (files under ``work_dir`` when
    given), the text is dropped after its batch."""
    files = io.source_files(source)
    report = io.ReadReport()
    ids, lengths, values = [], [], []
    store = TokenStore(work_dir)
    tok = load_tokenizer(cfg.tokenizer) if cfg.tokenizer is not None else None
    report_rows = 0
    with progress(cfg, "substring: tokens", files=files) as bar, \
            Heartbeat(logger, "substring: reading and tokenizing the input") as beat:
        for batch in _batches(files, cfg, report):
            text = batch.text.cast(pa.large_string())
            ids.append(batch.ids)
            data, offsets = arrow_text_buffers(text)
            lengths.append(np.diff(offsets))
            if cfg.keep_column:
                values.append(np.asarray(batch.keep_values, np.float64))
            toks = tokenize(data, offsets, text, cfg, tok, device)
            over = too_long_in(toks, cfg)
            if over is not None:  # longer than one whole array: refused now, not after the reading
                store.close()
                raise too_long(report_rows + over, batch.ids[over].as_py(), int(np.diff(toks.doc_off)[over]), cfg)
            report_rows += len(text)
            store.append(toks)
            bar.update(len(text), batch.file_index)
            beat.update(len(text))
    if not ids:
        store.close()
        raise empty_input_error(files, report.to_dict())
    return Corpus(files, pa.concat_arrays(ids), np.concatenate(lengths), np.concatenate(values) if values else None,
                  report.to_dict(), store.finish())


def too_long_in(toks: Tokens, cfg: SubstringConfig) -> int | None:
    """With a memory budget, the document of one batch's tokens (its longest, the first of equals) too long for
    one whole suffix array (``too_long`` names it); None: none (or no budget)."""
    if cfg.memory_budget is None:
        return None
    counts = np.diff(toks.doc_off)
    big = int(np.argmax(counts)) if counts.shape[0] else 0
    if counts.shape[0] and int(counts[big]) + 1 > cfg.memory_budget // C.SUBSTRING_BYTES_PER_POSITION:
        return big
    return None


def empty_input_error(files, read: dict[str, Any]) -> DataError:
    """The error of an input without a single document (both engines): io's one line naming its files."""
    from ..io.check import no_documents

    table = bool(files) and all(getattr(f, "fmt", None) == "table" for f in files)
    whole = [s["file"] for s in read["skipped"] if s.get("level") == "file"]
    return DataError(f"substring dedup needs at least one document: {no_documents(read['empty_files'], whole, table)}")


def tokenize(data: np.ndarray, offsets: np.ndarray, text: pa.Array, cfg: SubstringConfig, tok: Any,
             device: str = "cpu") -> Tokens:
    """One batch's tokens (tokens.py): word units (on ``device``), or the tokenizer ``tok`` (on the host, in
    slices of 4096 documents)."""
    if tok is None:
        return word_tokens(data, offsets, cfg.normalize, device)
    parts, step = [], 4096
    for a in range(0, len(text), step):
        b = min(a + step, len(text))
        parts.append(tokenizer_tokens(data, offsets[a:b + 1], text.slice(a, b - a).to_pylist(), tok))
    doc_off = np.zeros(len(text) + 1, np.int64)
    np.cumsum(np.concatenate([np.diff(p.doc_off) for p in parts]), out=doc_off[1:])
    return Tokens(doc_off, *(np.concatenate([getattr(p, f) for p in parts]) for f in ("start", "end", "ident")))


def rank_documents(corpus: Corpus, cfg: SubstringConfig) -> KeepOrder:
    rank = keep_rank(cfg.keep, n=len(corpus.ids), text_bytes=corpus.text_bytes, ids=corpus.ids,
                     values=corpus.keep_values)
    return KeepOrder.of(corpus.tokens.doc_off, rank)


def plan_chunks(corpus: Corpus, cfg: SubstringConfig) -> int | None:
    """chunk_tokens: the configured one; with memory_budget, None when one suffix array over everything fits
    the budget (SUBSTRING_BYTES_PER_POSITION per position), else the largest chunk whose pairs fit. A document
    too long for the budget is refused here, before any suffix array, naming it and the budget it needs."""
    return chunk_tokens_for(corpus.tokens.doc_off, corpus.ids, cfg)


def chunk_tokens_for(doc_off: np.ndarray, ids: pa.Array, cfg: SubstringConfig) -> int | None:
    """``plan_chunks`` over the documents' token offsets (int64 (n+1,)) and ids (both engines)."""
    if cfg.memory_budget is None:
        return cfg.chunk_tokens
    limit = cfg.memory_budget // C.SUBSTRING_BYTES_PER_POSITION  # positions one suffix array may hold
    counts = np.diff(doc_off)
    if int(doc_off[-1]) + counts.shape[0] <= limit:
        return None
    big = int(np.argmax(counts))
    if int(counts[big]) + 1 > limit // 2:
        raise too_long(big, ids[big].as_py(), int(counts[big]), cfg)
    return limit // 2


def too_long(row: int, doc_id: Any, tokens: int, cfg: SubstringConfig) -> ValueError:
    """The error for a document whose pairs cannot fit memory_budget: it names the row, the limit and the knob."""
    per = C.SUBSTRING_BYTES_PER_POSITION
    return DataError(f"document row {row} (id {doc_id!r}) has {tokens:,} tokens: a suffix array over it and another "
                     f"chunk needs more than --memory-budget {cfg.memory_budget:,} bytes ({per} B per position); "
                     f"raise --memory-budget to at least {2 * (tokens + 1) * per:,} or split the document")


def span_hash(ident: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(ident, "<u8").tobytes(), digest_size=8).hexdigest()


class _Sinks:
    """substring_spans.parquet and substring_docs.parquet written batch by batch (atomic: both appear when
    the pass completes) in fixed row groups (``run.RowGroups``: the bytes depend on the rows alone, so that the
    Ray engine's per-file parts give the same files); without an output directory the parts are kept and
    concatenated."""

    def __init__(self, out: str | None) -> None:
        self.out, self.parts = out, ([], [])

    def __enter__(self) -> "_Sinks":
        if self.out is not None:
            self._files = row_group_files(self.out, ((SPANS_FILE, SPANS_SCHEMA), (DOCS_FILE, DOCS_SCHEMA)))
            self.groups = self._files.__enter__()
        return self

    def write(self, spans: pa.Table, docs: pa.Table) -> None:
        if self.out is not None:
            self.groups[0].add(spans)
            self.groups[1].add(docs.drop_columns(["text"]))
        else:
            self.parts[0].append(spans)
            self.parts[1].append(docs)

    def __exit__(self, *exc: Any) -> Any:
        return self._files.__exit__(*exc) if self.out is not None else None


@dataclass
class Kept:
    """Where the kept copy of each cut span's first window starts: kept_id string (r,), kept_row, kept_token (its
    token offset in that document) and kept_byte (the token's byte offset) int64 (r,)."""

    kept_id: pa.Array
    kept_row: np.ndarray
    kept_token: np.ndarray
    kept_byte: np.ndarray


def cut_batch(data: np.ndarray, offsets: np.ndarray, r0: int, corpus: Corpus, keep: KeepOrder, matches: Matches,
              cfg: SubstringConfig) -> tuple[pa.Table, pa.Table, dict[str, Any], tuple]:
    """The cuts of documents r0 .. r0 + n of one re-read batch (text data/offsets): its spans and documents
    tables (DOCS_SCHEMA plus the cut text), counts, and (new_text, doc, cut_start, cut_end) for the seams."""
    n = offsets.shape[0] - 1
    store = corpus.tokens
    tokens = store.docs(r0, r0 + n)
    t0 = int(store.doc_off[r0])
    spans = cut_spans(tokens, matches.earliest.read(t0, t0 + len(tokens)), keep.keys(r0, r0 + n), cfg.min_tokens)
    source = keep.token_of(spans.source)  # global tokens
    src_doc = np.searchsorted(store.doc_off, source, side="right").astype(np.int64) - 1
    kept = Kept(corpus.ids.take(pa.array(src_doc)), src_doc, source - store.doc_off[src_doc], store.start.take(source))
    return cut_tables(data, offsets, r0, corpus.ids.slice(r0, n), tokens, spans, kept, cfg)


def cut_tables(data: np.ndarray, offsets: np.ndarray, r0: int, ids: pa.Array, tokens: Tokens, spans: CutSpans,
               kept: Kept, cfg: SubstringConfig) -> tuple[pa.Table, pa.Table, dict[str, Any], tuple]:
    """``cut_batch``'s tables from the batch's documents (rows r0.., their ids and tokens), their cut spans and
    the spans' kept copies (both engines: the Ray engine's cut tasks find the kept copies in other files)."""
    n = offsets.shape[0] - 1
    cs, ce = byte_cuts(tokens, spans)
    base = offsets[:-1][spans.doc]
    new_text, new_len = apply_cuts(data, offsets, spans.doc, cs + base, ce + base)
    first = tokens.doc_off[:-1]
    row = spans.doc + r0
    table = pa.table({
        "id": ids.take(pa.array(spans.doc)), "row": row,
        "byte_start": tokens.start[spans.tok_start], "byte_end": tokens.end[spans.tok_end - 1],
        "token_start": spans.tok_start - first[spans.doc], "token_end": spans.tok_end - first[spans.doc],
        "span_hash": pa.array([span_hash(tokens.ident[a:b]) for a, b in zip(spans.tok_start.tolist(),
                                                                            spans.tok_end.tolist())], pa.string()),
        "kept_id": kept.kept_id, "kept_row": kept.kept_row, "kept_token": kept.kept_token,
        "kept_byte": kept.kept_byte,
        "cut_start": cs, "cut_end": ce, "cut_text": gather_spans(data, cs + base, ce + base),
    }, schema=SPANS_SCHEMA)
    n_tok = np.diff(tokens.doc_off)
    tok_cut = np.bincount(spans.doc, weights=spans.tok_end - spans.tok_start, minlength=n).astype(np.int64)
    n_spans = np.bincount(spans.doc, minlength=n).astype(np.int64)
    flag = np.zeros(n, np.int8)
    changed = n_spans > 0
    flag[changed] = 1
    flag[changed & (new_len < cfg.min_doc_bytes)] = 2
    flag[changed & (tok_cut == n_tok)] = 3
    flags = np.array(FLAGS, dtype=object)[flag]
    before = np.diff(offsets)
    docs = pa.table({"id": ids, "row": np.arange(r0, r0 + n, dtype=np.int64), "tokens": n_tok,
                     "tokens_cut": tok_cut, "spans_cut": n_spans, "bytes_before": before, "bytes_after": new_len,
                     "flag": pa.array(flags, pa.string())}, schema=DOCS_SCHEMA).append_column("text", new_text)
    counts = {"documents": n, "tokens": len(tokens), "tokens_cut": int(tok_cut.sum()), "spans_cut": int(n_spans.sum()),
              "documents_changed": int(changed.sum()), "bytes_in": int(before.sum()),
              "bytes_cut": int((ce - cs).sum()), "flags": {f: int((flag == i).sum()) for i, f in enumerate(FLAGS)}}
    return table, docs, counts, (new_text, spans.doc, cs, ce)


def cut_documents(corpus: Corpus, keep: KeepOrder, matches: Matches, cfg: SubstringConfig, out: str | None) -> Cut:
    """The cut stage over the input read AGAIN batch by batch (the text is not held between stages): the
    spans and documents streamed to ``out`` (or kept in memory without it), counts, the seam sample."""
    counts: dict[str, Any] = {}
    seams: list[dict[str, Any]] = []
    r0 = 0
    with _Sinks(out) as sinks, Heartbeat(logger, "substring: cutting the spans (the input read again)",
                                         total=len(corpus.ids)) as beat:
        for batch in _batches(corpus.files, cfg):
            data, offsets = arrow_text_buffers(batch.text.cast(pa.large_string()))
            n = offsets.shape[0] - 1
            if r0 + n > len(corpus.ids):
                raise RunError(f"the input changed while substring dedup ran: more than {len(corpus.ids)} rows "
                               "on the second read")
            spans, docs, c, (new_text, doc, cs, ce) = cut_batch(data, offsets, r0, corpus, keep, matches, cfg)
            sinks.write(spans, docs)
            for key, v in c.items():
                counts[key] = ({f: counts.get(key, {}).get(f, 0) + x for f, x in v.items()} if isinstance(v, dict)
                               else counts.get(key, 0) + v)
            if len(seams) < cfg.seam_sample:
                for s in seam_sample(new_text, doc, cs, ce, cfg.seam_sample - len(seams)):
                    seams.append({**s, "row": s["row"] + r0})
            r0 += n
            beat.update(n)
        if r0 != len(corpus.ids):
            raise RunError(f"the input changed while substring dedup ran: {r0} rows on the second read, "
                           f"{len(corpus.ids)} on the first")
    if out is not None:
        return Cut(None, None, counts, seams)
    return Cut(pa.concat_tables(sinks.parts[0]).combine_chunks(), pa.concat_tables(sinks.parts[1]).combine_chunks(),
               counts, seams)


def seam_sample(new_text: pa.Array, doc: np.ndarray, cs: np.ndarray, ce: np.ndarray, count: int,
                context: int | None = None) -> list[dict[str, Any]]:
    """The first ``count`` cuts: the text on both sides of each as it reads after the cut (``context``
    characters each side, constants.SEAM_CONTEXT)."""
    from ..constants import SEAM_CONTEXT

    context = context or SEAM_CONTEXT
    out = []
    shift = 0
    for i in range(min(count, doc.shape[0])):
        if i == 0 or doc[i] != doc[i - 1]:
            shift = 0
        pos = int(cs[i]) - shift  # where the cut is in the cut document
        shift += int(ce[i] - cs[i])
        raw = new_text[int(doc[i])].as_py().encode("utf-8")
        out.append({"row": int(doc[i]), "cut_start": int(cs[i]), "cut_bytes": int(ce[i] - cs[i]),
                    "before": raw[:pos].decode("utf-8")[-context:], "after": raw[pos:].decode("utf-8")[:context]})
    return out


def write_outputs(out: str, corpus: Corpus, cfg: SubstringConfig) -> dict[str, Any]:
    phase(logger, "substring: writing %s/ (the input read a third time)", OUTPUT_DIR)
    return write_cut_documents(corpus.files, os.path.join(out, SPANS_FILE), os.path.join(out, OUTPUT_DIR), cfg,
                               min(8 << 20, read_batch_bytes(cfg)))


def substring_stats(cfg: SubstringConfig, device: str, threads: int, files, read: dict[str, Any],
                    counts: dict[str, Any], times: dict[str, float], suffix_arrays: dict[str, Any],
                    seams: list[dict[str, Any]]) -> dict[str, Any]:
    """substring_dedup.json (both engines): the shared run header (``run.header``), the policy, the suffix
    arrays' statistics and the seam sample."""
    stats = header("substring_dedup", device=device, threads=threads, config=dataclasses.asdict(cfg),
                   files=files, read=read, counts=counts, timings=times)
    stats.update({
        "stage": "substring_dedup",
        "policy": {"tokens": "tokenizer " + os.path.basename(cfg.tokenizer) if cfg.tokenizer else
                   "word units (non-whitespace runs; each CJK character a unit of its own: tokens.CJK_RANGES) "
                   "identified by their normalized text's hash",
                   "min_tokens": cfg.min_tokens, "keep": cfg.keep,
                   "cut": "every token covered by a window of min_tokens tokens that has an equal window earlier "
                          "in keep order; covered runs merge into one span", "seam": SEAM_RULE,
                   "short_documents": f"changed documents under {cfg.min_doc_bytes} bytes are flagged 'short', "
                                      "all tokens cut 'empty'; none is dropped"},
        "suffix_arrays": suffix_arrays, "seams": seams,
    })
    return stats


def throughput_stats(stats: dict[str, Any], times: dict[str, float], counts: dict[str, Any], *, spilled: bool) -> None:
    """The run's total time, throughput and memory into ``stats``, and its summary line."""
    n_tokens = counts["tokens"]
    cfg = stats["config"]
    times["total"] = sum(times.values())
    busy = times["total"] - times.get("compile", 0.0)  # a first run's kernel compiling is not throughput
    stats["throughput"] = {"tokens_per_s": n_tokens / busy if busy > 0 else None,
                           "mb_per_s": counts["bytes_in"] / 1e6 / busy if busy > 0 else None}
    stats["memory"] = {"peak_rss_bytes": peak_rss_bytes(), "tokens": n_tokens, "memory_budget": cfg["memory_budget"],
                       "spilled_to_disk": spilled}
    logger.info("substring dedup: %d spans (%d of %d tokens) cut from %d documents", counts["spans_cut"],
                counts["tokens_cut"], n_tokens, counts["documents_changed"])


def substring_dedup(source: Any, cfg: SubstringConfig | None = None, output_dir: str | os.PathLike | None = None,
                    device: str = "cpu", *, overwrite: bool = True, resume: bool = False) -> SubstringResult:
    """Exact-substring dedup of ``source``: the stages of the module docstring, timed. ``output_dir`` is owned
    while the stage runs (``run.owned``, command "substring": outside the inputs, locked, an earlier run's files
    replaced, this run's removed again if it fails); inside ``run_dedup``'s own block it joins that one. The Ray
    engine's run is the ``Substring`` step's with ``Env(engine="ray")`` (distributed/substring.py: a task per
    chunk pair's suffix array, per-file tokens and cuts).

    Args:
        source: path(s), glob(s) or a directory of input files, a pyarrow Table or a pandas DataFrame.
        cfg: the ``SubstringConfig`` (None: its defaults).
        output_dir: where the spans, documents, cut records and substring_dedup.json go (None: in memory).
        device: "cpu", "cuda" or "auto".
        overwrite: replace an earlier finished run in ``output_dir`` (False: refuse it).
        resume: a pipeline's resumed step (its record lost with a kill after its outputs were written): replace
            them as ``overwrite`` does.

    Returns:
        A ``SubstringResult``: the statistics, and the spans and cut documents in memory when ``output_dir``
        is None.

    Raises:
        GpuDedupError: a bad setting, no documents, a document too long for one suffix array
            (``DataError``), an input that changed while the stage ran (``RunError``), an ``output_dir`` inside
            the inputs (``ConfigError``) or holding a finished run without ``overwrite`` (``OutputExistsError``).
    """
    with owned(output_dir, roots=input_roots(source), command="substring", overwrite=overwrite, resume=resume):
        return _substring_dedup(source, cfg, output_dir, device)


def _substring_dedup(source: Any, cfg: SubstringConfig | None, output_dir: str | os.PathLike | None,
                     device: str) -> SubstringResult:
    cfg = cfg or SubstringConfig()
    device, threads = resources(device)
    require_library(device)  # a missing extra is one line now, not a traceback after the whole read
    note_compiling(device, ("substring",))  # a first run compiles the Kasai and span-hash kernels: said first
    steps = Steps()
    times = steps.timings

    def timed(name: str, fn, *args):
        with steps(name):
            return fn(*args)

    out = os.fspath(output_dir) if output_dir is not None else None
    work = None
    if cfg.memory_budget is not None:  # tokens and earliest copies spilled to files there, removed at the end
        import tempfile

        work = tempfile.mkdtemp(prefix="substring-work-", dir=cfg.work_dir)
    try:
        corpus = timed("read", read_corpus, source, cfg, work, device)
        try:
            keep = timed("rank", rank_documents, corpus, cfg)
            chunk_tokens = plan_chunks(corpus, cfg)
            matches: Matches = timed("match", find_matches, corpus.tokens, keep, cfg.min_tokens, chunk_tokens,
                                     device, work)
            cut = timed("cut", cut_documents, corpus, keep, matches, cfg, out)
            matches.earliest.close()
        finally:
            corpus.tokens.close()
    finally:
        if work is not None:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    stats = substring_stats(cfg, device, threads, corpus.files, corpus.read, cut.counts, times, matches.stats,
                            cut.seams)
    if out is not None:
        stats["written"] = timed("write", write_outputs, out, corpus, cfg)
    throughput_stats(stats, times, cut.counts, spilled=work is not None)
    if out is not None:
        def report() -> str:
            from ..report.substring import write_substring_report

            return write_substring_report(out, stats)

        finish(out, stats, name=STATS_FILE, report=report, what="substring")
        return SubstringResult(stats, None, None, out)
    return SubstringResult(stats, cut.spans, cut.documents, None)
