"""Which tokens are cut: later copies of repeated windows of ``min_tokens`` tokens, found with suffix arrays.

Rule
    A window is k = min_tokens consecutive tokens of one document. It is a LATER COPY when an equal window
    (the same k ids) starts at an earlier position in keep order: position (rank of its document in keep
    order, token offset), so inside one document the earlier offset comes first. A token is cut when a later
    copy covers it; the covered tokens of a document form runs (overlapping and touching repeats merge), and
    each run is one cut span. Every maximal span of >= k tokens that occurs more than once is thus cut from
    all its occurrences but the first in keep order; text shorter than k tokens is never cut. Like Lee et
    al.'s, the rule cuts a periodic run inside one document (the same window repeated at an offset) down to
    its first period plus less than k tokens.
Finding them
    Two windows are equal exactly when their suffixes share an LCP >= k, i.e. when they are in one run of
    consecutive suffix-array entries linked by lcp >= k. Per run, the smallest keep key is the earliest
    copy; each window records the smallest over every suffix array that holds it (``earliest``). On a GPU the
    grouping runs on the device too (a sort by group and key instead of NumPy's reduceat); only the tokens in
    groups of two or more come back to the host.
Chunks
    With ``chunk_tokens`` the documents are cut (in input order, whole documents) into chunks of at most that
    many positions (tokens plus one separator per document; a longer document alone), and a suffix array is
    built over each PAIR of chunks (or the one chunk): every two windows are in some pair's array, so the
    earliest copy of each window, and therefore every cut, equals one suffix array over everything (tested).
    Cost: c(c - 1) / 2 arrays of two chunks each. Memory: one pair's arrays (SUBSTRING_BYTES_PER_POSITION per
    position, measured) plus the earliest copies (8 B per corpus token: a Column, on disk with a budget).
    Why pairs and not one array per chunk and a merge: equal windows of two chunks are found only by
    comparing their tokens, so a merge of the chunks' sorted suffixes must compare up to k tokens of two
    chunks at random places per step (both chunks' tokens resident, or a disk seek per comparison), and
    hashing the windows instead (datatrove's sorted-bucket merge) is no longer an exact suffix-array result.
    Pairs keep every comparison inside one exact, library-built array, at c / 2 times the work of one array;
    with a memory budget c is what the budget forces, and pairs are independent (Ray tasks, later).
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..runtime.device import module_of, to_device, to_host
from ..runtime.heartbeat import Heartbeat
from .suffix import corpus_text, suffix_and_lcp
from .tokens import Column, Tokens, TokenStore

logger = logging.getLogger(__name__)

NONE = np.iinfo(np.int64).max


@dataclass
class KeepOrder:
    """Keep order of n documents, per document (8 B each, not per token): order int64 (n,): the documents in
    keep order; first int64 (n,): the keep key of each document's first token (its tokens' keys follow on),
    a token's keep key being its position when documents are laid out in keep order (a permutation of
    0..N-1); doc_off int64 (n+1,)."""

    order: np.ndarray
    first: np.ndarray
    doc_off: np.ndarray

    @classmethod
    def of(cls, doc_off: np.ndarray, rank: np.ndarray) -> "KeepOrder":
        counts = np.diff(doc_off)
        order = np.argsort(rank, kind="stable")
        first = np.zeros(counts.shape[0], np.int64)
        if counts.shape[0]:
            first[order] = np.concatenate(([0], np.cumsum(counts[order])[:-1]))
        return cls(order.astype(np.int64), first, doc_off)

    def keys(self, lo: int, hi: int) -> np.ndarray:
        """int64: the keep keys of documents [lo, hi)'s tokens, in token order."""
        counts = np.diff(self.doc_off[lo:hi + 1])
        doc = np.repeat(np.arange(lo, hi, dtype=np.int64), counts)
        within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(self.doc_off[lo:hi] - self.doc_off[lo],
                                                                          counts)
        return self.first[doc] + within

    def token_of(self, keys: np.ndarray) -> np.ndarray:
        """int64: the global token index of each keep key."""
        firsts = self.first[self.order]
        doc = self.order[np.searchsorted(firsts, keys, side="right") - 1]
        return self.doc_off[doc] + keys - self.first[doc]


def chunk_documents(doc_off: np.ndarray, chunk_tokens: int | None) -> list[tuple[int, int]]:
    """Document ranges [lo, hi) of the chunks: consecutive documents holding at most ``chunk_tokens``
    positions (tokens + 1 separator each; a longer document alone); one chunk when chunk_tokens is None."""
    n = doc_off.shape[0] - 1
    if chunk_tokens is None or n == 0:
        return [(0, n)]
    chunks, first, used = [], 0, 0
    counts = np.diff(doc_off)
    for d in range(n):
        c = int(counts[d]) + 1
        if used and used + c > chunk_tokens:
            chunks.append((first, d))
            first, used = d, 0
        used += c
    chunks.append((first, n))
    return chunks


def earliest_in(text_token: Any, sa: Any, lcp: Any, key: Any, k: int) -> tuple[Any, Any]:
    """One suffix array's equal windows, in the arrays' module (numpy, or CuPy on a GPU): text_token int64
    (m,) global token per position (-1 at separators), sa int64 (m,), lcp int32 (m,), key int64 (m,) keep key
    per position (NONE at separators). Returns (t, best) int64: for every token t whose window has an equal
    one in this array, the smallest keep key among them."""
    xp = module_of(sa)
    m = int(sa.shape[0])
    if m == 0:
        z = xp.zeros(0, xp.int64)
        return z, z
    head = xp.ones(m, xp.bool_)
    head[1:] = lcp[:-1] < k  # sa[r] and sa[r + 1] start equal windows when lcp[r] >= k
    starts = xp.flatnonzero(head)
    gid = xp.cumsum(head.astype(xp.int64)) - 1
    ks = key[sa]
    if xp is np:
        gmin = np.minimum.reduceat(ks, starts)
    else:  # CuPy has no reduceat: sort by (group, key); a group keeps its place, its first entry is its minimum
        gmin = ks[xp.lexsort(xp.stack([ks, gid]))[starts]]
    sizes = xp.diff(xp.concatenate((starts, xp.full(1, m, xp.int64))))
    multi = sizes[gid] > 1
    return text_token[sa][multi], gmin[gid][multi]


@dataclass
class Matches:
    """earliest: a Column of int64 (N,): the smallest keep key of a window equal to token t's (NONE when t
    starts no window of k tokens with a copy); stats: suffix arrays built, positions, seconds."""

    earliest: Column
    stats: dict[str, Any] = field(default_factory=dict)


def find_matches(store: TokenStore, keep: KeepOrder, k: int, chunk_tokens: int | None, device: str,
                 work_dir: str | None = None) -> Matches:
    """Earliest copies of every window (module docstring), one suffix array or one per pair of chunks;
    the earliest copies in memory, or in ``work_dir``."""
    earliest = Column(np.int64, os.path.join(work_dir, "earliest.bin") if work_dir else None)
    step = 1 << 20
    for a in range(0, len(store), step):
        earliest.append(np.full(min(step, len(store) - a), NONE, np.int64))
    earliest.finish()
    chunks = chunk_documents(store.doc_off, chunk_tokens)
    pairs = [(0, 0)] if len(chunks) == 1 else [(a, b) for a in range(len(chunks)) for b in range(a + 1, len(chunks))]
    t_sa = t_group = 0.0
    positions = grouped = largest = 0
    beat = Heartbeat(logger, f"substring: suffix arrays over {len(store):,} tokens", total=len(pairs),
                     unit="suffix arrays")
    for a, b in beat.each(pairs):
        parts = [chunks[a]] if a == b else [chunks[a], chunks[b]]
        spans_t = [(int(store.doc_off[lo]), int(store.doc_off[hi])) for lo, hi in parts]
        ident = np.concatenate([store.ident.read(a_t, b_t) for a_t, b_t in spans_t])  # only the identities
        token = np.concatenate([np.arange(a_t, b_t, dtype=np.int64) for a_t, b_t in spans_t])
        doc_off = np.concatenate([store.doc_off[parts[0][0]:parts[0][1] + 1] - spans_t[0][0]] +
                                 [store.doc_off[lo + 1:hi + 1] - a_t + spans_t[0][1] - spans_t[0][0]
                                  for (lo, hi), (a_t, _) in zip(parts[1:], spans_t[1:])])
        key = np.concatenate([keep.keys(lo, hi) for lo, hi in parts])
        t, best, st = array_earliest(doc_off, ident, token, key, k, device)
        del ident, token, key
        for lo, hi in parts:  # t holds each token once; update each chunk's range of earliest copies
            lo_t, hi_t = int(store.doc_off[lo]), int(store.doc_off[hi])
            sel = (t >= lo_t) & (t < hi_t)
            if sel.any():
                cur = earliest.read(lo_t, hi_t)
                np.minimum.at(cur, t[sel] - lo_t, best[sel])
                earliest.write(lo_t, cur)
        grouped += int(t.shape[0])
        t_group += st["seconds_grouping"]
        t_sa += st["seconds_suffix_lcp"]
        positions += st["positions"]
        largest = max(largest, st["positions"])
    return Matches(earliest, {"chunks": len(chunks), "chunk_tokens": chunk_tokens, "suffix_arrays": len(pairs),
                              "positions": positions, "largest_array": largest, "positions_in_repeats": grouped,
                              "seconds_suffix_lcp": t_sa, "seconds_grouping": t_group})


def array_earliest(doc_off: np.ndarray, ident: np.ndarray, token: np.ndarray, key: np.ndarray, k: int,
                   device: str) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """One suffix array over some documents (a chunk, or a pair of chunks): doc_off int64 (n+1,) from 0, their
    tokens' identities uint64 (N,), global token indexes int64 (N,) and keep keys int64 (N,). Returns host
    arrays (t, best) int64: every token whose window has an equal one here, with the smallest keep key among
    them (``earliest_in``), and the array's statistics (positions, seconds in the suffix/LCP arrays and in the
    grouping). The Ray engine runs it per pair of chunks as a task (distributed/substring.py)."""
    text, text_token = corpus_text(doc_off, ident, token)
    pos_key = np.full(text.shape[0], NONE, np.int64)
    pos_key[text_token >= 0] = key
    t0 = time.perf_counter()
    text_d, token_d, key_d = (to_device(x, device) for x in (text, text_token, pos_key))
    sa, lcp = suffix_and_lcp(text_d, device)
    t1 = time.perf_counter()
    t, best = (to_host(x) for x in earliest_in(token_d, sa, lcp, key_d, k))
    del sa, lcp, text_d, token_d, key_d
    return t, best, {"positions": int(text.shape[0]), "seconds_suffix_lcp": t1 - t0,
                     "seconds_grouping": time.perf_counter() - t1}


@dataclass
class CutSpans:
    """r cut spans, ascending by token: doc int64 (r,), tok_start / tok_end (global token indexes, end
    exclusive), source int64 (r,): where the kept copy of the span's first window starts (cut_spans: its keep
    key)."""

    doc: np.ndarray
    tok_start: np.ndarray
    tok_end: np.ndarray
    source: np.ndarray


def cut_spans(tokens: Tokens, earliest: np.ndarray, keys: np.ndarray, k: int) -> CutSpans:
    """Runs of tokens covered by later copies, split at document boundaries (module docstring), over the
    in-memory ``tokens`` of some documents: earliest and keys int64 (N,) theirs. Token indexes (tok_start,
    tok_end) are local to ``tokens``; ``source`` holds the kept copy's KEEP KEY (KeepOrder.token_of maps it)."""
    n_tok = len(tokens)
    starts = np.flatnonzero(earliest < keys)
    # a window lies inside its document, so starts + k <= n_tok
    diff = np.bincount(starts, minlength=n_tok + 1) - np.bincount(starts + k, minlength=n_tok + 1)
    covered = np.cumsum(diff[:-1]) > 0
    first_of_doc = np.zeros(n_tok + 1, bool)
    first_of_doc[tokens.doc_off[:-1]] = True
    prev = np.concatenate(([False], covered[:-1]))
    nxt = np.concatenate((covered[1:], [False]))
    run_start = np.flatnonzero(covered & (~prev | first_of_doc[:-1]))
    run_end = np.flatnonzero(covered & (~nxt | first_of_doc[1:])) + 1
    doc = np.searchsorted(tokens.doc_off, run_start, side="right").astype(np.int64) - 1
    return CutSpans(doc, run_start.astype(np.int64), run_end.astype(np.int64), earliest[run_start].astype(np.int64))


def byte_cuts(tokens: Tokens, spans: CutSpans) -> tuple[np.ndarray, np.ndarray]:
    """Seam rule: the byte range [cut_start, cut_end) (in the document) removed for each span. A span
    followed by a kept token loses its tokens and the whitespace after them: [start of its first token, start
    of the next token), so the text before the cut (with its whitespace) runs into the next token. A span
    that ends the document's tokens loses the whitespace before it instead: [end of the previous token, end
    of its last token), and the document's trailing whitespace stays; when it is all the document's tokens,
    [start of the first, end of the last)."""
    last_tok = tokens.doc_off[1:][spans.doc]
    first_tok = tokens.doc_off[:-1][spans.doc]
    a, b = spans.tok_start, spans.tok_end
    tail = b >= last_tok
    nxt = np.minimum(b, len(tokens) - 1)
    prv = np.maximum(a - 1, 0)
    cs = np.where(tail & (a > first_tok), tokens.end[prv], tokens.start[a])
    ce = np.where(tail, tokens.end[b - 1], tokens.start[nxt])
    return cs.astype(np.int64), ce.astype(np.int64)
