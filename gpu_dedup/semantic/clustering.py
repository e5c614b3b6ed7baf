"""Clustering: spherical k-means (``kmeans``) with two backends, FAISS (its GPU index when the installed
faiss has GPUs) and a small torch implementation; see stage 2 in the package docstring
(``gpu_dedup.semantic``).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from .config import SemanticConfig, default_n_clusters
from .model import need_module, torch_device

logger = logging.getLogger(__name__)


@dataclass
class Clusters:
    """centroids float32 (k, d) unit rows; assign int64 (n,); centroid_cos float32 (n,) = cosine of
    each row to its centroid; backend: what ran (e.g. "faiss-cpu", "torch-cuda")."""

    centroids: np.ndarray
    assign: np.ndarray
    centroid_cos: np.ndarray
    backend: str

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.assign, minlength=self.centroids.shape[0])


class _FaissLoaderLog(logging.Filter):
    """faiss's loader logs, at INFO, each CPU-specific build it tries ("Loading faiss with AVX2 support.",
    "Could not load library with AVX2 support due to: ModuleNotFoundError(...)"): with the CLI's INFO level these
    reached the user unexplained. A failed try becomes one line that says what it means; the rest is DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if msg.startswith("Could not load library with "):
            what = msg[len("Could not load library with "):].split(" support", 1)[0]
            record.msg, record.args = (f"faiss: this faiss wheel has no {what} build for this CPU, so its generic "
                                       "build is used: the same k-means algorithm, somewhat slower (harmless)"), ()
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def _import_faiss():
    """faiss, or None when it is not installed (its loader's messages explained, ``_FaissLoaderLog``)."""
    loader = logging.getLogger("faiss.loader")
    if not any(isinstance(f, _FaissLoaderLog) for f in loader.filters):
        loader.addFilter(_FaissLoaderLog())
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def _choose_backend(requested: str, device: str) -> tuple[str, bool]:
    """-> (backend "faiss"|"torch", faiss_gpu)."""
    faiss = _import_faiss()
    if requested == "faiss":
        if faiss is None:
            need_module("faiss", "kmeans_backend='faiss'")
        gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        return "faiss", device == "cuda" and gpus > 0
    if requested == "torch":
        return "torch", False
    gpus = faiss.get_num_gpus() if faiss is not None and hasattr(faiss, "get_num_gpus") else 0
    if faiss is not None and (device == "cpu" or gpus > 0):
        return "faiss", device == "cuda"
    if faiss is None:
        logger.warning("faiss is not installed; using the torch k-means (pip install faiss-cpu for FAISS)")
    else:
        logger.info("the installed faiss has no GPU support; k-means runs in torch on the GPU")
    return "torch", False


def _fit_sample(n: int, k: int, cfg: SemanticConfig) -> np.ndarray | None:
    """Rows used to fit (sorted int64), or None for all: ``sample_fraction`` first, then at most
    ``max_points_per_centroid * k`` rows (FAISS's own rule, applied here for both backends)."""
    m = n
    if cfg.sample_fraction is not None:
        m = max(k, math.ceil(float(cfg.sample_fraction) * n))
    m = min(m, cfg.max_points_per_centroid * k)
    if m >= n:
        return None
    return np.sort(np.random.default_rng(cfg.seed).choice(n, size=m, replace=False))


def _kmeans_torch(x, k: int, niter: int, seed: int):
    """Spherical Lloyd iterations in torch on x's device. x: float32 (m, d) unit rows. Returns unit
    centroids (k, d). Init: k distinct seeded rows; an empty cluster keeps its previous centroid."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    c = x[torch.randperm(x.shape[0], generator=g)[:k].to(x.device)].clone()
    for _ in range(niter):
        a = _assign_torch(x, c)[0]
        sums = torch.zeros_like(c).index_add_(0, a, x)
        counts = torch.bincount(a, minlength=k)
        new = torch.nn.functional.normalize(sums, dim=1)
        c = torch.where((counts > 0)[:, None], new, c)
    return c


def _assign_torch(x, c, rows_per_chunk: int | None = None):
    """(assignment int64 (n,), best inner product float32 (n,)); chunks bound memory to ~256 MB."""
    import torch

    chunk = rows_per_chunk or max(1, (1 << 26) // max(1, c.shape[0]))
    idx, best = [], []
    for s in range(0, x.shape[0], chunk):
        sims = x[s:s + chunk] @ c.T
        v, i = sims.max(dim=1)
        idx.append(i)
        best.append(v)
    if not idx:
        return torch.zeros(0, dtype=torch.int64, device=x.device), torch.zeros(0, device=x.device)
    return torch.cat(idx), torch.cat(best)


def n_clusters_for(n: int, cfg: SemanticConfig, n_clusters: int | None = None) -> int:
    """k for ``n`` rows: ``n_clusters``, else ``cfg.n_clusters``, else ``default_n_clusters(n)``; capped at n (a
    warning says so); the automatic choice is logged."""
    k = n_clusters or cfg.n_clusters or default_n_clusters(n)
    if not (n_clusters or cfg.n_clusters) and n:
        logger.info("semantic: k-means with k=%d clusters for %d documents (automatic: clusters of about "
                    "max(sqrt(n), 1000) = %d documents, which balances the pairwise step, ~n_c^2 per cluster, "
                    "against k-means; below 1000 documents per cluster fewer duplicates are lost at cluster "
                    "boundaries; set n_clusters to choose)", k, n, int(max(math.sqrt(n), 1000.0)))
    if k > n:
        logger.warning("n_clusters=%d exceeds the %d documents; using k=%d", k, n, max(n, 1))
        k = max(n, 1)
    if n and n / k > cfg.warn_cluster_size:
        logger.warning("n_clusters=%d gives about %d documents per cluster (> warn_cluster_size=%d): the pairwise "
                       "step costs ~n_c^2 x d per cluster; raise n_clusters", k, n // k, cfg.warn_cluster_size)
    return k


def fit_rows(n: int, k: int, cfg: SemanticConfig) -> np.ndarray | None:
    """The rows k-means is fitted on (sorted int64; None: every row): ``_fit_sample``'s seeded sample, or every
    row when k == 1 (the single centroid is the mean of all rows)."""
    return None if k == 1 else _fit_sample(n, k, cfg)


@dataclass
class Fitted:
    """What k-means fitted, all the assignment of any rows needs (picklable: a Ray task's result): centroids
    float32 (k, d) unit rows; backend (e.g. "faiss-cpu"); index: the trained faiss index, serialized (uint8),
    searched on its GPUs when ``gpu``; raw: the torch backend's centroids as fitted (float32 (k, d)), on
    ``torch_device``. A single cluster has neither."""

    centroids: np.ndarray
    backend: str
    index: np.ndarray | None = None
    gpu: bool = False
    raw: np.ndarray | None = None
    torch_device: str = "cpu"


def fit(x: np.ndarray, k: int, cfg: SemanticConfig, device: str = "cpu") -> Fitted:
    """Spherical k-means of ``x`` (float32 (m, d) unit rows: the rows of ``fit_rows``), seeded; k >= 1."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    d = x.shape[1]
    if k == 1:
        mean = x.astype(np.float64).sum(0)
        norm = np.linalg.norm(mean)
        centroids = (mean / norm if norm > 0 else np.eye(1, d)[0]).astype(np.float32)[None, :]
        return Fitted(centroids, "single-cluster")
    backend, faiss_gpu = _choose_backend(cfg.kmeans_backend, device)
    if backend == "faiss":
        import faiss

        km = faiss.Kmeans(d, k, niter=cfg.niter, seed=cfg.seed, spherical=True, gpu=bool(faiss_gpu), verbose=False,
                          min_points_per_centroid=1, max_points_per_centroid=cfg.max_points_per_centroid)
        km.train(x)
        centroids = np.asarray(km.centroids, np.float32).reshape(k, d)
        centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-30)
        index = faiss.index_gpu_to_cpu(km.index) if faiss_gpu else km.index
        return Fitted(centroids, "faiss-gpu" if faiss_gpu else "faiss-cpu", index=faiss.serialize_index(index),
                      gpu=bool(faiss_gpu))
    import torch

    tdev = torch_device(device)
    ct = _kmeans_torch(torch.from_numpy(x).to(tdev), k, cfg.niter, cfg.seed)
    raw = ct.cpu().numpy().astype(np.float32)
    return Fitted(raw.copy(), f"torch-{tdev}", raw=raw, torch_device=tdev)


def assign(x: np.ndarray, fitted: Fitted) -> tuple[np.ndarray, np.ndarray]:
    """(cluster int64 (n,), cosine to its centroid float32 (n,)) of unit rows ``x``: the fitted index's nearest
    centroid by inner product (every row on its own: the same answer for a row in any batch of rows)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not x.flags.writeable:  # read from a file (a Ray task's part): torch wants memory it may write
        x = x.copy()
    n = x.shape[0]
    if fitted.index is not None and n:
        import faiss

        index = faiss.deserialize_index(fitted.index)
        if fitted.gpu:
            index = faiss.index_cpu_to_all_gpus(index)
        _, nearest = index.search(x, 1)
        cluster = nearest.reshape(-1).astype(np.int64)
    elif fitted.raw is not None and n:
        import torch

        ct = torch.from_numpy(fitted.raw).to(fitted.torch_device)
        cluster = _assign_torch(torch.from_numpy(x).to(fitted.torch_device), ct)[0].cpu().numpy().astype(np.int64)
    else:
        cluster = np.zeros(n, np.int64)
    cos = np.einsum("ij,ij->i", x, fitted.centroids[cluster]).astype(np.float32)
    return cluster, cos


def warn_largest(sizes: np.ndarray, cfg: SemanticConfig, d: int) -> None:
    """A warning when the largest cluster is over ``warn_cluster_size`` (its pairwise step's cost)."""
    largest = int(sizes.max()) if sizes.shape[0] else 0
    if largest > cfg.warn_cluster_size:
        logger.warning("largest semantic cluster has %d documents (> warn_cluster_size=%d): its pairwise step "
                       "costs ~%.1e flops; raise n_clusters", largest, cfg.warn_cluster_size, float(largest) ** 2 * d)


def kmeans(x: np.ndarray, cfg: SemanticConfig, device: str = "cpu", n_clusters: int | None = None) -> Clusters:
    """Spherical k-means of unit rows; seeded, deterministic for a given backend and thread count: ``fit`` on
    the rows of ``fit_rows``, then ``assign`` every row (the Ray engine runs the same two functions, the fit in
    one task and the assignment per file: distributed/semantic.py).

    Args:
        x: float32 (n, d) unit rows.
        cfg: the ``SemanticConfig`` (iterations, seed, sample size).
        device: "cpu" or "cuda".
        n_clusters: k; default ``cfg.n_clusters`` or ``default_n_clusters(n)``. Capped at n.

    Returns:
        The ``Clusters``: centroids float32 (k, d), assign int64 (n,), centroid_cos float32 (n,), backend.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    n, d = x.shape
    k = n_clusters_for(n, cfg, n_clusters)
    if n == 0:
        return Clusters(np.zeros((0, d), np.float32), np.zeros(0, np.int64), np.zeros(0, np.float32), "none")
    sample = fit_rows(n, k, cfg)
    fitted = fit(x if sample is None else x[sample], k, cfg, device)
    cluster, cos = assign(x, fitted)
    clusters = Clusters(fitted.centroids, cluster, cos, fitted.backend)
    warn_largest(clusters.sizes, cfg, d)
    return clusters
