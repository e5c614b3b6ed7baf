"""Report measurements: Jaccard histograms, measured LSH candidate rates, and the largest clusters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from ..lexical import params

MEMBERS_SHOWN = 3        # removed members shown per cluster, least similar first
JACCARD_BINS = 50        # bins of width 0.02 over [0, 1]: 10 bars between 0.8 and 1.0


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
    """Histogram of Jaccard values.

    In the report it is applied to the removed near-duplicates' ``jaccard`` column: how many documents were
    removed at each exact similarity to the document kept for them.

    Args:
        jaccard: any float array-like; NaN = not measured (counted in ``missing``).
        bins: the number of equal bins over [0, 1].

    Returns:
        The ``JaccardHistogram``: edges, counts, missing.

    Raises:
        ConfigError: ``bins`` < 1, or a value outside [0, 1].
    """
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
        raise ConfigError(f"bins must be a positive int, got {bins!r}; use e.g. 50 (width 0.02)")
    arr = np.asarray(jaccard, dtype=np.float64).ravel()
    nan = np.isnan(arr)
    vals = arr[~nan]
    if vals.size and (vals.min() < 0.0 or vals.max() > 1.0):
        bad = vals[(vals < 0.0) | (vals > 1.0)][0]
        raise ConfigError(f"Jaccard values must be in [0, 1] (or NaN), got {bad!r}")
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
            raise ConfigError(f"lo must be one of the lower bin edges {self.edges[:-1].round(4).tolist()}, got {lo!r}")
        total = int(self.pairs[k[0]:].sum())
        return float(self.candidates[k[0]:].sum() / total) if total else float("nan")


def candidate_rates(keys: np.ndarray, lsh: Any, left: np.ndarray, right: np.ndarray, jaccard: np.ndarray,
                    bins: int = 20) -> CandidateRates:
    """Candidate rate per Jaccard bin of labelled pairs.

    A pair is a candidate when any band key is equal: what the pipeline's buckets find.

    Args:
        keys: uint64 (n, b) band keys (``lsh.band_keys`` of the documents' signatures).
        lsh: the ``LSHConfig`` of the keys.
        left, right: int64 (m,) document indexes of each pair, rows of ``keys``.
        jaccard: float64 (m,) each pair's exact Jaccard.
        bins: the number of Jaccard bins over [0, 1].

    Returns:
        The ``CandidateRates``: per bin, pairs, candidates and the rate with its standard error.

    Raises:
        ConfigError: shapes that disagree, indexes out of range, or a NaN Jaccard.
    """
    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.shape[1] != lsh.bands:
        raise ConfigError(f"keys must have shape (n, {lsh.bands}) for {lsh.bands} bands, got {keys.shape}; "
                          "compute them with lsh.band_keys(signatures, lsh)")
    left = np.asarray(left, np.int64)
    right = np.asarray(right, np.int64)
    jac = np.asarray(jaccard, np.float64)
    if not left.shape == right.shape == jac.shape or left.ndim != 1:
        raise ConfigError(f"left, right and jaccard must be 1-D of one length, got shapes {left.shape}, "
                          f"{right.shape}, {jac.shape}")
    n = keys.shape[0]
    if left.size and (min(left.min(), right.min()) < 0 or max(left.max(), right.max()) >= n):
        raise ConfigError(f"pair indexes must be in [0, {n}) (rows of keys)")
    hist = jaccard_histogram(jac, bins)  # validates the values
    if hist.missing:
        raise ConfigError(f"jaccard has {hist.missing} NaN values; labelled pairs need an exact Jaccard each")
    idx = np.minimum((jac * bins).astype(np.int64), bins - 1)
    cand = (keys[left] == keys[right]).any(axis=1) if left.size else np.zeros(0, bool)
    p = params.candidate_probability(jac, lsh.bands, lsh.rows) if jac.size else np.zeros(0)
    pairs = np.bincount(idx, minlength=bins).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        theory = np.bincount(idx, weights=p, minlength=bins) / np.where(pairs > 0, pairs, np.nan)
    return CandidateRates(bands=int(lsh.bands), rows=int(lsh.rows), edges=hist.edges, pairs=pairs,
                          candidates=np.bincount(idx, weights=cand, minlength=bins).astype(np.int64), theory=theory)


# ----------------------------------------------------------------------------------------------- clusters
@dataclass(frozen=True)
class ClusterView:
    """One cluster: representative row, its size, and up to MEMBERS_SHOWN removed member rows."""

    rep: int
    size: int
    members: tuple[int, ...]


def largest_clusters(decisions: pa.Table, k: int, members: int = MEMBERS_SHOWN) -> list[ClusterView]:
    """The largest clusters of a run, with some of their removed members.

    Args:
        decisions: the decisions table of the run.
        k: how many clusters (size > 1; ties by representative row).
        members: the most removed members to list per cluster, least similar first (smallest Jaccard;
            unmeasured last; ties by row).

    Returns:
        A list of up to ``k`` ``ClusterView``s, largest first.
    """
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
