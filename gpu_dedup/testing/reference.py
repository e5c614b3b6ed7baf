"""Exact truth for deduplication by brute force: word n-gram shingle sets under the reference tokenization
(``text.lower().split()``), every pair above a Jaccard floor (an inverted index, no sampling), the exact
all-pairs greedy dedup that the ``representative`` policy approximates, and scores of any keep mask against it;
and the sentences of paragraph dedup's sentence rule (``sentence_spans``, a regex, not the kernel's scan).

Independent of the pipeline (numpy, pyarrow and the standard library only), so it can judge it; the corpora
with known duplicate structure come from ``gpu_dedup.testing.evalcorpus``.
"""
from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from ..errors import ConfigError
from .evalcorpus import normalize_text

log = logging.getLogger(__name__)

__all__ = ["PairDict", "shingle_sets", "exact_pairs", "greedy_reference", "evaluate", "sentence_spans"]


def _shingle_hash(s: str) -> int:
    # blake2b, not hash(): Python's str hash is salted per process (PYTHONHASHSEED).
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little")


def shingle_sets(texts: Iterable[str], n: int = 5) -> list[set[int]]:
    """Word ``n``-gram shingle sets under the reference tokenization ``text.lower().split()``.

    Each shingle is its words joined by one space, hashed to a 64-bit int (blake2b, 8 bytes; the
    same text gives the same ints in every process). Documents with fewer than ``n`` words get an
    empty set."""
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"n must be a positive int, got {n!r}")
    out = []
    for text in texts:
        w = text.lower().split()
        out.append({_shingle_hash(" ".join(w[i:i + n])) for i in range(len(w) - n + 1)})
    return out


class PairDict(dict):
    """``{(i, j): jaccard}`` for i < j, holding every pair with Jaccard >= ``min_j`` (and no other)."""

    def __init__(self, items: Iterable[tuple[tuple[int, int], float]], min_j: float) -> None:
        super().__init__(items)
        self.min_j = float(min_j)


def _flatten(sets: Sequence[set]) -> tuple[np.ndarray, np.ndarray]:
    """(doc index int64, element key uint64/int64) for every element of every set."""
    sizes = np.fromiter((len(s) for s in sets), np.int64, len(sets))
    doc = np.repeat(np.arange(len(sets), dtype=np.int64), sizes)
    total = int(sizes.sum())
    try:
        keys = np.fromiter((x for s in sets for x in s), np.uint64, total)
    except (TypeError, OverflowError, ValueError):
        # Arbitrary hashable elements (strings, negative ints...): number them in first-seen order.
        number: dict[Hashable, int] = {}
        keys = np.fromiter((number.setdefault(x, len(number)) for s in sets for x in s), np.int64, total)
    return doc, keys


def _pair_arrays(sets: Sequence[set], min_j: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrays (i int64, j int64, jaccard float64), i < j, of every pair with exact Jaccard >= min_j,
    sorted by (i, j). Inverted index: pairs are generated per shared element, counted, and the count is
    the intersection size; pairs sharing nothing have Jaccard 0 and never appear."""
    n = len(sets)
    sizes = np.fromiter((len(s) for s in sets), np.int64, n)
    doc, keys = _flatten(sets)
    order = np.argsort(keys, kind="stable")        # stable: documents ascending within an element
    keys, doc = keys[order], doc[order]
    if len(keys) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.float64)
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    counts = np.diff(np.concatenate([starts, [len(keys)]]))
    chunks = []
    for m in np.unique(counts[counts >= 2]).tolist():
        s = starts[counts == m]
        post = doc[s[:, None] + np.arange(m)]            # (groups, m) posting lists, ascending
        a, b = np.triu_indices(m, 1)
        chunks.append((post[:, a] * n + post[:, b]).ravel())
    if not chunks:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.float64)
    pair, inter = np.unique(np.concatenate(chunks), return_counts=True)
    i, j = pair // n, pair % n
    jac = inter / (sizes[i] + sizes[j] - inter)
    keep = jac >= min_j
    return i[keep], j[keep], jac[keep]


def exact_pairs(sets: Sequence[set], min_j: float) -> PairDict:
    """Every pair (i, j), i < j, with exact set Jaccard >= ``min_j`` (0 < min_j <= 1), no sampling.

    Returns a PairDict ``{(i, j): jaccard}`` (float64 Jaccard = |A & B| / |A | B|). Empty sets match
    nothing. Cost grows with the sum over shingles of (documents sharing it)^2."""
    if not isinstance(min_j, (int, float)) or not 0.0 < float(min_j) <= 1.0:
        raise ConfigError(f"min_j must be in (0, 1] (pairs with no shared shingle are not listed), got {min_j!r}")
    i, j, jac = _pair_arrays(sets, float(min_j))
    log.debug("exact_pairs: %d sets, %d pairs at Jaccard >= %s", len(sets), len(i), min_j)
    return PairDict(zip(zip(i.tolist(), j.tolist()), jac.tolist()), float(min_j))


def _pairs_from(pairs: dict, min_j: float) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) int64 arrays of the pairs of ``pairs`` with Jaccard >= min_j."""
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ij = np.array(list(pairs.keys()), np.int64).reshape(-1, 2)
    jac = np.fromiter(pairs.values(), np.float64, len(pairs))
    sel = jac >= min_j
    return ij[sel, 0], ij[sel, 1]


def _check_pairs(pairs: dict, needed: float, what: str) -> None:
    min_j = getattr(pairs, "min_j", None)
    if min_j is not None and min_j > needed:
        raise ConfigError(f"{what} needs every pair with Jaccard >= {needed}, but the pairs were computed with "
                          f"min_j={min_j}; use exact_pairs(sets, {needed})")


def _check_texts(texts: Sequence[str] | None, n: int) -> None:
    if texts is not None and len(texts) != n:
        raise ConfigError(f"texts has {len(texts)} entries but there are {n} shingle sets; pass one text per set")


def greedy_reference(sets: Sequence[set], theta: float, order: Sequence[int] | None = None, *,
                     texts: Sequence[str] | None = None, pairs: dict | None = None) -> np.ndarray:
    """Exact all-pairs greedy deduplication; returns the keep mask (bool, shape (n,)).

    Visit documents in ``order`` (a permutation of range(n); default input order). A document with
    a non-empty set is removed iff its exact Jaccard with an already KEPT document is >= theta.
    A document with an empty set (fewer words than the shingle size) is removed iff its normalized
    text equals an already kept document's (needs ``texts``; without them such documents are kept).
    ``pairs``: precomputed ``exact_pairs(sets, m)`` with m <= theta, to skip recomputing them.
    """
    n = len(sets)
    if not isinstance(theta, (int, float)) or not 0.0 < float(theta) <= 1.0:
        raise ConfigError(f"theta must be in (0, 1], got {theta!r}")
    _check_texts(texts, n)
    if order is None:
        order_arr = np.arange(n)
    else:
        order_arr = np.asarray(order, np.int64)
        if order_arr.shape != (n,) or not np.array_equal(np.sort(order_arr), np.arange(n)):
            raise ConfigError(f"order must be a permutation of range({n}), got {order!r:.80}")
    if pairs is None:
        i, j, _ = _pair_arrays(sets, float(theta))
    else:
        _check_pairs(pairs, float(theta), "greedy_reference")
        i, j = _pairs_from(pairs, float(theta))
    # Symmetric adjacency in CSR form.
    src = np.concatenate([i, j])
    dst = np.concatenate([j, i])
    by = np.argsort(src, kind="stable")
    nbr = dst[by]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    keep = np.zeros(n, bool)
    kept_short: set[str] = set()
    for d in order_arr.tolist():
        if not sets[d]:
            if texts is None:
                keep[d] = True
                continue
            norm = normalize_text(texts[d])
            if norm not in kept_short:
                kept_short.add(norm)
                keep[d] = True
            continue
        # keep[] is True only for documents already visited and kept.
        keep[d] = not keep[nbr[ptr[d]:ptr[d + 1]]].any()
    return keep


def evaluate(decisions_keep: np.ndarray, sets: Sequence[set], pairs_at: dict, theta: float, *,
             texts: Sequence[str] | None = None) -> dict[str, int | float]:
    """Score a keep mask (bool, shape (n,)) against the exact truth.

    ``pairs_at`` must hold every pair with Jaccard >= min(theta, 0.5), e.g. ``exact_pairs(sets, 0.5)``.
    Returns counts: ``docs``, ``kept``, ``removed``; ``lost@theta`` = removed documents with no KEPT
    document at Jaccard >= theta (identical sets count as Jaccard 1; a removed empty-set document is
    not lost when a kept document has the same normalized text, which needs ``texts``; without them it
    counts as lost); ``lost@0.5`` likewise at 0.5; ``residual@theta`` = pairs of kept documents at
    Jaccard >= theta, plus pairs of kept empty-set documents with equal normalized text; and ``theta``.
    """
    keep = np.asarray(decisions_keep)
    n = len(sets)
    if keep.dtype != np.bool_ or keep.shape != (n,):
        raise ConfigError(f"decisions_keep must be a bool array of shape ({n},), got dtype {keep.dtype} "
                          f"shape {keep.shape}")
    if not isinstance(theta, (int, float)) or not 0.0 < float(theta) <= 1.0:
        raise ConfigError(f"theta must be in (0, 1], got {theta!r}")
    _check_texts(texts, n)
    _check_pairs(pairs_at, min(float(theta), 0.5), "evaluate")
    removed = ~keep

    # Empty-set documents: covered by a kept document with the same normalized text.
    empty = np.fromiter((not s for s in sets), bool, n)
    short_covered = np.zeros(n, bool)
    short_residual = 0
    if texts is not None and empty.any():
        kept_norm: dict[str, int] = {}
        for d in np.flatnonzero(empty & keep).tolist():
            norm = normalize_text(texts[d])
            kept_norm[norm] = kept_norm.get(norm, 0) + 1
        short_residual = sum(c * (c - 1) // 2 for c in kept_norm.values())
        for d in np.flatnonzero(empty & removed).tolist():
            short_covered[d] = normalize_text(texts[d]) in kept_norm

    out: dict[str, int | float] = {"docs": n, "kept": int(keep.sum()), "removed": int(removed.sum())}
    for name, t in (("theta", float(theta)), ("0.5", 0.5)):
        i, j = _pairs_from(pairs_at, t)
        covered = short_covered.copy()
        covered[i[keep[j]]] = True
        covered[j[keep[i]]] = True
        out[f"lost@{name}"] = int((removed & ~covered).sum())
        if name == "theta":
            out["residual@theta"] = int((keep[i] & keep[j]).sum()) + short_residual
    out["theta"] = float(theta)
    return out


# -- sentences (gpu_dedup/text/split.py's rule) ------------------------------------------------------------

_WIDE = (b"\xe3\x80\x82", b"\xef\xbc\x81", b"\xef\xbc\x9f")  # 。 ！ ？
_TERM = re.compile(rb"(?:[.!?]|" + b"|".join(map(re.escape, _WIDE)) + rb")(?:[.!?\"')\]]|"
                   + b"|".join(map(re.escape, _WIDE)) + rb")*")
_BLANK = b" \t\r\x0b\x0c"


def sentence_spans(b: bytes) -> list[tuple[int, int]]:
    """The sentences of gpu_dedup/text/split.py's rule, by brute force: a regex over each line's bytes (not the
    kernel's scan). Every line is cut after each terminal run that holds a wide terminal, ends the line, or is
    followed by ASCII blanks and a byte other than a-z; the pieces are trimmed of ASCII blanks, empty ones dropped.

    Args:
        b: one document's UTF-8 bytes.

    Returns:
        The (start, end) byte spans of its sentences, in order.
    """
    out, pos = [], 0
    for line in b.split(b"\n"):
        cuts = [0]
        for m in _TERM.finditer(line):
            j, rest = m.end(), line[m.end():]
            if any(w in m.group() for w in _WIDE) or not rest:
                cuts.append(j)
            elif rest[0] in _BLANK:
                nxt = rest.lstrip(_BLANK)
                if not nxt or not 0x61 <= nxt[0] <= 0x7A:
                    cuts.append(j)
        cuts.append(len(line))
        for a, c in zip(cuts, cuts[1:]):
            piece = line[a:c]
            core = piece.strip(_BLANK)
            if core:
                s = pos + a + len(piece) - len(piece.lstrip(_BLANK))
                out.append((s, s + len(core)))
        pos += len(line) + 1
    return out
