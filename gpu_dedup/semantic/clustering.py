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


def kmeans(x: np.ndarray, cfg: SemanticConfig, device: str = "cpu", n_clusters: int | None = None) -> Clusters:
    """Spherical k-means of unit rows; seeded, deterministic for a given backend and thread count.

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
    k = n_clusters or cfg.n_clusters or default_n_clusters(n)
    if not (n_clusters or cfg.n_clusters) and n:
        logger.info("semantic: k-means with k=%d clusters for %d documents (automatic: clusters of about "
                    "max(sqrt(n), 1000) = %d documents, which balances the pairwise step, ~n_c^2 per cluster, "
                    "against k-means; below 1000 documents per cluster fewer duplicates are lost at cluster "
                    "boundaries; set n_clusters to choose)", k, n, int(max(math.sqrt(n), 1000.0)))
    if k > n:
        logger.warning("n_clusters=%d exceeds the %d documents; using k=%d", k, n, max(n, 1))
        k = max(n, 1)
    if n == 0:
        return Clusters(np.zeros((0, d), np.float32), np.zeros(0, np.int64), np.zeros(0, np.float32), "none")
    if n / k > cfg.warn_cluster_size:
        logger.warning("n_clusters=%d gives about %d documents per cluster (> warn_cluster_size=%d): the pairwise "
                       "step costs ~n_c^2 x d per cluster; raise n_clusters", k, n // k, cfg.warn_cluster_size)
    backend, faiss_gpu = _choose_backend(cfg.kmeans_backend, device)
    sample = _fit_sample(n, k, cfg)
    fit_x = x if sample is None else x[sample]
    if k == 1:
        mean = x.astype(np.float64).sum(0)
        norm = np.linalg.norm(mean)
        centroids = (mean / norm if norm > 0 else np.eye(1, d)[0]).astype(np.float32)[None, :]
        assign = np.zeros(n, np.int64)
        backend_name = "single-cluster"
    elif backend == "faiss":
        import faiss

        km = faiss.Kmeans(d, k, niter=cfg.niter, seed=cfg.seed, spherical=True, gpu=bool(faiss_gpu), verbose=False,
                          min_points_per_centroid=1, max_points_per_centroid=cfg.max_points_per_centroid)
        km.train(np.ascontiguousarray(fit_x))
        centroids = np.asarray(km.centroids, np.float32).reshape(k, d)
        centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-30)
        _, nearest = km.index.search(x, 1)
        assign = nearest.reshape(-1).astype(np.int64)
        backend_name = "faiss-gpu" if faiss_gpu else "faiss-cpu"
    else:
        import torch

        tdev = torch_device(device)
        xt = torch.from_numpy(x).to(tdev)
        ft = xt if sample is None else xt[torch.from_numpy(sample).to(tdev)]
        ct = _kmeans_torch(ft, k, cfg.niter, cfg.seed)
        assign = _assign_torch(xt, ct)[0].cpu().numpy().astype(np.int64)
        centroids = ct.cpu().numpy().astype(np.float32)
        backend_name = f"torch-{tdev}"
    cos = np.einsum("ij,ij->i", x, centroids[assign]).astype(np.float32)
    clusters = Clusters(centroids, assign, cos, backend_name)
    largest = int(clusters.sizes.max())
    if largest > cfg.warn_cluster_size:
        logger.warning("largest semantic cluster has %d documents (> warn_cluster_size=%d): its pairwise step "
                       "costs ~%.1e flops; raise n_clusters", largest, cfg.warn_cluster_size, float(largest) ** 2 * d)
    return clusters
