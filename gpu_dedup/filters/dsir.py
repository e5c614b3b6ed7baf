"""Importance resampling (DSIR, Xie et al. 2023, arXiv 2302.03169): select the raw documents whose hashed word
n-gram distribution matches a target set.

Features. A document is normalized by the package's normalization kernel with punctuation removed
(NFKC, full lowercase, Unicode punctuation and symbols -> space, whitespace runs -> one space; policy in
gpu_dedup/text/normalize.py), so its words are the space-separated runs: DSIR's ``text.lower()`` +
word tokenization, except that punctuation tokens are dropped rather than kept as tokens of their own (DSIR's
default ``WordPunctTokenizer`` keeps them; they are frequent and carry little topic signal). Its features are
its word m-grams for m = 1..ngrams (words joined by one space), each hashed with XXH64 (seed
``kernels.features.DSIR_SEED``) mod ``buckets``; unigrams and bigrams share the bucket space, as in DSIR.
The kernels are ``kernels/features*.py``, identical on CPU and GPU.

Models. A ``BagModel`` is the smoothed distribution ``p = (counts + alpha) / (sum(counts) + alpha * buckets)``
over the buckets (DSIR adds 1e-8 to probabilities instead; a pseudo-count keeps every log finite and suits
small targets). Counts are plain sums, so a corpus too large for one batch is
fitted by summing ``fit_counts`` over batches.

Weights. ``log w(d) = sum_f count_d(f) * (log p_target(f) - log p_raw(f))``: the log-likelihood ratio of
the two bag-of-n-grams models. A document with fewer than ``min_words`` normalized words (empty,
whitespace- or punctuation-only) gets ``-inf``: it carries no evidence of resembling the target (its
likelihood ratio would be exactly 1, ranking it above every real document that looks less like the target
than like the raw corpus), so ``gumbel_topk`` never selects it; ``dsir_report`` counts such documents.

Resampling. ``gumbel_topk``: the k largest ``log w + Gumbel(0, 1)`` keys, which is sampling k documents
without replacement with probability proportional to w (the Gumbel-top-k trick; DSIR's resampler).
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..config import NormalizeConfig, is_int, is_real
from ..errors import ConfigError, DataError, UsageError
from ..kernels.features import DSIR_MAX_NGRAM, DSIR_SEED
from ..ops import features as features_ops
from ..runtime.device import array_module, to_device, to_host
from ..text.normalize import Normalized, normalize_text

logger = logging.getLogger(__name__)

MAX_BUCKETS = 2**31 - 1  # feature ids are int32
TextsLike = Sequence[str] | pa.Array | pa.ChunkedArray


@dataclass(frozen=True)
class DSIRConfig:
    """DSIR settings.

    buckets: hashed feature space (DSIR's default 10,000). ngrams: features are word m-grams for m = 1..ngrams
    (2: unigrams + bigrams, DSIR's default). alpha: Laplace pseudo-count of the bag models (> 0). seed: the
    Gumbel noise of the resampling. select: how many documents to keep, an int K >= 1 (a count; K above the
    corpus size keeps everything) or a float fraction in (0, 1] of the documents (``select_count``); note
    that ``1`` is one document and ``1.0`` is all of them. min_words: documents with fewer normalized words
    get log weight -inf (never selected; DSIR's own length filter is 100 words, ours only drops empty
    documents by default). remove_punctuation: the normalization's punctuation rule (module doc)."""

    buckets: int = 10_000
    ngrams: int = 2
    alpha: float = 1.0
    seed: int = 0
    select: int | float = 0.1
    min_words: int = 1
    remove_punctuation: bool = True

    def __post_init__(self) -> None:
        if not is_int(self.buckets) or not 1 <= self.buckets <= MAX_BUCKETS:
            raise ConfigError(f"DSIRConfig.buckets must be an int in [1, {MAX_BUCKETS}], got {self.buckets!r}; "
                              "DSIR's default is 10000")
        if not is_int(self.ngrams) or not 1 <= self.ngrams <= DSIR_MAX_NGRAM:
            raise ConfigError(f"DSIRConfig.ngrams must be an int in [1, {DSIR_MAX_NGRAM}], got {self.ngrams!r}; "
                              "2 means unigrams + bigrams")
        if not is_real(self.alpha) or self.alpha <= 0:
            raise ConfigError(f"DSIRConfig.alpha must be a finite number > 0 (the Laplace pseudo-count), got "
                              f"{self.alpha!r}; use e.g. 1.0")
        if not is_int(self.seed) or not 0 <= self.seed < 2**64:
            raise ConfigError(f"DSIRConfig.seed must be an int in [0, 2**64), got {self.seed!r}")
        check_select(self.select, "DSIRConfig.select")
        if not is_int(self.min_words) or self.min_words < 0:
            raise ConfigError(f"DSIRConfig.min_words must be an int >= 0, got {self.min_words!r}")
        if not isinstance(self.remove_punctuation, bool):
            raise ConfigError(f"DSIRConfig.remove_punctuation must be a bool, got {self.remove_punctuation!r}")

    @property
    def normalize(self) -> NormalizeConfig:
        return NormalizeConfig(remove_punctuation=self.remove_punctuation)


def check_select(select: Any, name: str = "select") -> None:
    """Raise unless ``select`` is an int >= 1 (a count) or a float in (0, 1] (a fraction)."""
    if is_int(select):
        if select < 1:
            raise ConfigError(f"{name} as a count must be >= 1, got {select!r}; use a float in (0, 1] for a fraction")
        return
    if isinstance(select, (float, np.floating)) and is_real(select):
        if not 0 < select <= 1:
            raise ConfigError(f"{name} as a fraction must be in (0, 1], got {select!r}; use an int for a count")
        return
    raise ConfigError(f"{name} must be an int count >= 1 or a float fraction in (0, 1], got {select!r}")


def select_count(n: int, select: int | float) -> int:
    """Documents to keep out of ``n``: min(K, n) for an int K; round(fraction * n) (halves up) for a float."""
    if not is_int(n) or n < 0:
        raise ConfigError(f"n must be an int >= 0, got {n!r}")
    check_select(select)
    if is_int(select):
        return min(int(select), n)
    return min(n, math.floor(float(select) * n + 0.5))


@dataclass(frozen=True)
class BagModel:
    """A normalized hashed-feature distribution: probs float64 (buckets,), every entry > 0, summing to 1."""

    probs: np.ndarray

    @classmethod
    def from_counts(cls, counts: Any, alpha: float) -> "BagModel":
        """(counts + alpha) / (sum + alpha * buckets); counts: non-negative finite (buckets,) array."""
        c = np.asarray(counts, dtype=np.float64)
        if c.ndim != 1 or c.shape[0] < 1:
            raise ConfigError(f"counts must be a 1-D array with one entry per bucket, got shape {c.shape}")
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ConfigError("counts must be finite and non-negative (sums of fit_counts)")
        if not is_real(alpha) or alpha <= 0:
            raise ConfigError(f"alpha must be a finite number > 0, got {alpha!r}")
        p = (c + alpha) / (c.sum() + alpha * c.shape[0])
        return cls(p)

    @property
    def buckets(self) -> int:
        return int(self.probs.shape[0])

    def log_probs(self) -> np.ndarray:
        return np.log(self.probs)

    def save(self, path: str | Path) -> None:
        """Write the model as .npz (probs plus the feature hash it belongs to)."""
        np.savez(path, probs=self.probs, dsir_seed=np.uint64(DSIR_SEED))

    @classmethod
    def load(cls, path: str | Path) -> "BagModel":
        with np.load(path, allow_pickle=False) as z:
            if "probs" not in z.files or int(z.get("dsir_seed", -1)) != int(DSIR_SEED):
                raise DataError(f"{path} is not a BagModel of this feature hash (DSIR_SEED {int(DSIR_SEED):#x}); "
                                "refit it with fit_counts + BagModel.from_counts")
            probs = np.array(z["probs"], dtype=np.float64)
        if probs.ndim != 1 or np.any(probs <= 0) or not math.isclose(float(probs.sum()), 1.0, rel_tol=1e-9):
            raise DataError(f"{path}: probs must be a positive 1-D distribution summing to 1")
        return cls(probs)


# ------------------------------------------------------------------------------------------- features
def text_array(texts: TextsLike) -> pa.Array:
    """An Arrow large_string array of the texts (one chunk)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.large_string())
    if isinstance(texts, pa.Array):
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            raise UsageError(f"texts must be an Arrow string array, got {texts.type}")
        return texts
    if isinstance(texts, (str, bytes)):
        raise UsageError("texts must be a sequence of strings, not one string; wrap it in a list")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise UsageError(f"texts[{bad}] is {type(texts[bad]).__name__}, not str")
    return pa.array(list(texts), pa.large_string())


def normalized(texts: TextsLike, cfg: DSIRConfig, device: str = "cpu") -> Normalized:
    """The texts under DSIR's normalization (arrays in the device's module)."""
    return normalize_text(text_array(texts), cfg.normalize, device)


def feature_ids(texts: TextsLike, cfg: DSIRConfig, device: str = "cpu", *,
                chunk: int | None = None) -> tuple[Any, Any]:
    """Every feature occurrence of every document, CSR: (offsets int64 (n+1,), ids int32 (F,)); document d's
    ids are ids[offsets[d]:offsets[d+1]] in the kernel's order (kernels/features.py), repeats included.
    Arrays in the device's array module. Memory: 4 bytes per feature (about 8 per word with bigrams).
    ``chunk``: GPU words per block (default FEATURE_CHUNK; results do not depend on it)."""
    return features_ops.feature_ids(device, normalized(texts, cfg, device), cfg.ngrams, DSIR_SEED, cfg.buckets, chunk)


@dataclass
class FeatureCSR:
    """Per-document sparse counts (host): document d has ids[offsets[d]:offsets[d+1]] (int32, increasing)
    with counts[...] (int32) occurrences."""

    offsets: np.ndarray
    ids: np.ndarray
    counts: np.ndarray


def feature_csr(texts: TextsLike, cfg: DSIRConfig, device: str = "cpu") -> FeatureCSR:
    """Distinct feature ids and their counts per document (host arrays)."""
    base, ids = (to_host(a) for a in feature_ids(texts, cfg, device))
    n = base.shape[0] - 1
    doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(base))
    keys, counts = np.unique(doc * cfg.buckets + ids.astype(np.int64), return_counts=True)
    kdoc = keys // cfg.buckets
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(kdoc, minlength=n), out=offsets[1:])
    return FeatureCSR(offsets, (keys % cfg.buckets).astype(np.int32), counts.astype(np.int32))


def fit_counts(texts: TextsLike, cfg: DSIRConfig, device: str = "cpu") -> np.ndarray:
    """Feature counts of the texts summed over documents: int64 (buckets,), host. Sum these over batches,
    then ``BagModel.from_counts(total, cfg.alpha)``."""
    xp = array_module(device)
    _, ids = feature_ids(texts, cfg, device)
    if ids.shape[0] == 0:
        return np.zeros(cfg.buckets, np.int64)
    return to_host(xp.bincount(ids, minlength=cfg.buckets)).astype(np.int64)


def _check_model(model: BagModel, cfg: DSIRConfig, what: str) -> None:
    if not isinstance(model, BagModel):
        raise UsageError(f"{what} must be a BagModel, got {type(model).__name__}")
    if model.buckets != cfg.buckets:
        raise ConfigError(f"{what} has {model.buckets} buckets but DSIRConfig.buckets is {cfg.buckets}; fit both "
                          "models with the same config")


def log_weights(texts: TextsLike, target: BagModel, raw: BagModel, cfg: DSIRConfig,
                device: str = "cpu", *, chunk: int | None = None) -> np.ndarray:
    """float64 (n,) host: log importance weight of each document (module doc), -inf below ``min_words``.
    GPU: the feature ids (``chunk`` words per block, as in ``feature_ids``), then their sums in feature
    order (kernels/features_cuda.feature_sums: the CPU's float64 order, so the same bits)."""
    _check_model(target, cfg, "target")
    _check_model(raw, cfg, "raw")
    norm = normalized(texts, cfg, device)
    if len(norm) == 0:
        return np.zeros(0, np.float64)
    logdiff = to_device(target.log_probs() - raw.log_probs(), device)
    out = features_ops.feature_log_weights(device, norm, cfg.ngrams, DSIR_SEED, cfg.buckets, logdiff, chunk)
    out = to_host(out).copy()
    out[to_host(norm.words) < cfg.min_words] = -np.inf
    return out


# ----------------------------------------------------------------------------------------- resampling
def gumbel_topk(log_w: Any, k: int, seed: int) -> np.ndarray:
    """Indices (int64, in decreasing key order) of the k documents with the largest ``log_w + G``, G i.i.d.
    Gumbel(0, 1) from ``numpy.random.default_rng(seed)`` (one draw per document, in order): deterministic
    for a seed, equal keys ordered by index. Documents with log weight -inf are never selected, so fewer
    than k come back when fewer than k are finite. NaN weights are refused."""
    w = np.asarray(log_w, dtype=np.float64)
    if w.ndim != 1:
        raise ConfigError(f"log_w must be 1-D, got shape {w.shape}")
    if np.isnan(w).any():
        raise ConfigError(f"log_w has NaN at index {int(np.flatnonzero(np.isnan(w))[0])}; weights must be numbers "
                          "(-inf for documents never to select)")
    if not is_int(k) or k < 0:
        raise ConfigError(f"k must be an int >= 0, got {k!r}")
    if not is_int(seed) or not 0 <= seed < 2**128:
        raise ConfigError(f"seed must be a non-negative int, got {seed!r}")
    n = w.shape[0]
    keys = w + np.random.default_rng(seed).gumbel(size=n)
    eligible = int(np.count_nonzero(keys > -np.inf))
    kk = min(k, eligible)
    if kk < k:
        logger.warning("gumbel_topk: %d documents asked for, only %d have a finite log weight", k, eligible)
    if kk == 0:
        return np.zeros(0, np.int64)
    kth = np.partition(keys, n - kk)[n - kk]  # the kk-th largest key (finite: kk <= eligible)
    cand = np.flatnonzero(keys >= kth)
    order = np.lexsort((cand, -keys[cand]))
    return cand[order][:kk].astype(np.int64)


def kl_divergence(p: Any, q: Any) -> float:
    """KL(p || q) = sum_i p_i log(p_i / q_i) in nats over distributions of the same shape (each normalized to
    sum 1 first); inf when q is 0 where p is not."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 1:
        raise ConfigError(f"p and q must be 1-D of the same shape, got {p.shape} and {q.shape}")
    for name, a in (("p", p), ("q", q)):
        if not np.all(np.isfinite(a)) or np.any(a < 0) or a.sum() <= 0:
            raise ConfigError(f"{name} must be finite, non-negative and not all zero")
    p = p / p.sum()
    q = q / q.sum()
    nz = p > 0
    if np.any(q[nz] == 0):
        return math.inf
    return float(np.sum(p[nz] * np.log(p[nz] / q[nz])))


def dsir_report(target_counts: Any, raw_counts: Any, selected_counts: Any, log_w: Any, cfg: DSIRConfig,
                selected: Any = None, bins: int = 20) -> dict[str, Any]:
    """The DSIR diagnostic (JSON-ready): KL(target || raw) and KL(target || selected) between the smoothed
    (alpha) hashed-feature distributions (selection should lower it), the number of documents and of those
    without features (-inf), and a histogram of the finite log weights (counts + bin edges; with
    ``selected`` indices, the selected documents' counts on the same edges): ``report_of`` its counts."""
    if not is_int(bins) or bins < 1:
        raise ConfigError(f"bins must be an int >= 1, got {bins!r}")
    w = np.asarray(log_w, dtype=np.float64)
    finite = w[np.isfinite(w)]
    edges = weight_edges(float(finite.min()) if finite.size else None, float(finite.max()) if finite.size else None,
                         bins)
    counts = np.histogram(finite, bins=edges)[0]
    sel = None
    if selected is not None:
        ws = w[np.asarray(selected, dtype=np.int64)]
        sel = (int(ws.shape[0]), np.histogram(ws[np.isfinite(ws)], bins=edges)[0])
    return report_of(target_counts, raw_counts, selected_counts, cfg, int(w.shape[0]),
                     int(np.count_nonzero(w == -np.inf)), counts, edges, sel)


def weight_edges(lo: float | None, hi: float | None, bins: int = 20) -> np.ndarray:
    """float64 (bins + 1,): ``np.histogram``'s edges for finite log weights from ``lo`` to ``hi`` (None: there is
    none: 0..1), which depend on the smallest and the largest value alone."""
    if lo is None:
        return np.linspace(0.0, 1.0, bins + 1)
    return np.histogram_bin_edges(np.array([lo, hi], np.float64), bins=bins)


def report_of(target_counts: Any, raw_counts: Any, selected_counts: Any, cfg: DSIRConfig, documents: int,
              without: int, counts: np.ndarray, edges: np.ndarray, selected: tuple | None = None) -> dict[str, Any]:
    """``dsir_report`` from its counts: the documents and those without a feature, the finite weights' histogram
    (``counts`` on ``edges``, ``weight_edges``) and ``selected``: (documents, histogram on the same edges) or None
    (the Ray engine adds these over files)."""
    t, r, s = (BagModel.from_counts(c, cfg.alpha).probs for c in (target_counts, raw_counts, selected_counts))
    kl_raw, kl_sel = kl_divergence(t, r), kl_divergence(t, s)
    report: dict[str, Any] = {
        "kl_target_raw": kl_raw,
        "kl_target_selected": kl_sel,
        "kl_reduction": kl_raw - kl_sel,
        "documents": int(documents),
        "documents_without_features": int(without),
        "weight_histogram": {"counts": np.asarray(counts).astype(int).tolist(), "edges": np.asarray(edges).tolist()},
        "buckets": cfg.buckets, "ngrams": cfg.ngrams, "alpha": cfg.alpha,
    }
    if selected is not None:
        report["selected"] = int(selected[0])
        report["weight_histogram"]["selected_counts"] = np.asarray(selected[1]).tolist()
    return report
