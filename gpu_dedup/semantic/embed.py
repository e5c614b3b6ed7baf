"""Embedding: ``embed_texts`` (texts -> L2-normalised float32 rows), ``text_hashes`` (the cache key of a
text) and ``EmbeddingCache`` (embeddings of one run, reusable by text hash in the next).

See stage 1 in the package docstring (``gpu_dedup.semantic``) for the character cut, the batching and the
precision.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..device import launch
from ..io import atomic_path, write_json_atomic
from ..lexical.normalize import arrow_text_buffers
from .config import CACHE_FORMAT
from .model import _need, torch_device

logger = logging.getLogger(__name__)


def embed_texts(model, texts: Sequence[str], *, batch_size: int = 256, device: str = "cpu",
                chars_per_token: int = 10) -> np.ndarray:
    """Embeddings of ``texts``: float32 (n, d), rows L2-normalised (a zero row stays zero).

    Texts are cut to ``chars_per_token x max_seq_length`` characters (0: not cut), processed longest
    first in batches of ``batch_size`` (equal lengths pad little), tokenized two batches ahead in worker
    threads, and the rows are put back in input order. Memory: n x d floats on ``device`` + 3 batches."""
    from concurrent.futures import ThreadPoolExecutor

    torch = _need("torch", "embed_texts")
    tdev = torch_device(device)
    n = len(texts)
    cap = chars_per_token * int(model.max_seq_length) if getattr(model, "max_seq_length", None) else 0
    if cap:
        texts = [t[:cap] for t in texts]
    lengths = np.fromiter((len(t) for t in texts), np.int64, n)
    order = np.argsort(-lengths, kind="stable")
    batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    prep = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers >= 6 / older

    def features(idx: np.ndarray) -> dict:
        return prep([texts[i] for i in idx])

    out = None
    ahead = 2
    with torch.inference_mode(), ThreadPoolExecutor(ahead, thread_name_prefix="gpu_dedup-tokenize") as pool:
        pending = [pool.submit(features, b) for b in batches[:ahead]]
        for k, idx in enumerate(batches):
            feats = pending.pop(0).result()
            if k + ahead < len(batches):
                pending.append(pool.submit(features, batches[k + ahead]))
            feats = {key: v.to(tdev, non_blocking=True) if isinstance(v, torch.Tensor) else v
                     for key, v in feats.items()}
            emb = model(feats)["sentence_embedding"].float()
            emb = torch.nn.functional.normalize(emb, dim=1)
            if out is None:
                out = torch.empty((n, emb.shape[1]), dtype=torch.float32, device=emb.device)
            out[torch.as_tensor(idx, device=emb.device)] = emb
    if out is None:
        return np.zeros((0, 0), np.float32)
    return out.cpu().numpy()


def text_hashes(text: pa.Array) -> np.ndarray:
    """uint64 (n, 2): two XXH64 (fixed seeds) of each raw UTF-8 text: the embedding cache key."""
    data, offsets = arrow_text_buffers(text)
    out = np.empty((len(text), 2), np.uint64)
    if len(text):
        launch("cpu", "exact_hashes", len(text), data, offsets, out)
    return out


_H128 = np.dtype([("a", "<u8"), ("b", "<u8")])


def _as_keys(h: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(h, dtype=np.uint64).view(_H128).reshape(-1)


class EmbeddingCache:
    """Embeddings of one run, reusable by text hash in the next.

    Layout: ``directory/<key>/{embeddings.npy (n, d) float32, text_hashes.npy (n, 2) uint64, meta.json}``,
    rows in the order of the run that wrote them. ``key`` = sha256 of the model fingerprint and every
    setting that changes embeddings (max_seq_length, dtype, chars_per_token, format); another model or
    setting uses another sub-directory, so switching back and forth reuses both. Not part of the key:
    library versions (sentence-transformers, transformers, torch) and the device; clear the directory
    after upgrading them if bit-identical embeddings matter."""

    def __init__(self, directory: str, key: str, meta: dict[str, Any]) -> None:
        self.path = os.path.join(os.fspath(directory), key)
        self.key = key
        self.meta = meta
        self._keys_sorted = None
        self._order = None
        self._emb = None
        emb_path = os.path.join(self.path, "embeddings.npy")
        meta_path = os.path.join(self.path, "meta.json")
        if os.path.isfile(emb_path) and os.path.isfile(meta_path):
            try:
                with open(meta_path, encoding="utf-8") as fh:
                    found = json.load(fh)
                emb = np.load(emb_path, mmap_mode="r")
                hashes = np.load(os.path.join(self.path, "text_hashes.npy"))
                if found.get("key") != key or emb.shape[0] != hashes.shape[0]:
                    raise ValueError("key or row count mismatch")
            except Exception as exc:  # a damaged cache is rebuilt, never trusted
                logger.warning("ignoring embedding cache %s (%s); it will be rewritten", self.path, exc)
            else:
                keys = _as_keys(hashes)
                self._order = np.argsort(keys, kind="stable")
                self._keys_sorted = keys[self._order]
                self._emb = emb

    @staticmethod
    def key_for(fingerprint: str, max_seq_length: int | None, dtype: str,
                chars_per_token: int) -> tuple[str, dict[str, Any]]:
        meta = {"format": CACHE_FORMAT, "model_fingerprint": fingerprint, "max_seq_length": max_seq_length,
                "dtype": dtype, "chars_per_token": chars_per_token, "normalized": "l2"}
        key = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]
        return key, {**meta, "key": key}

    @property
    def rows(self) -> int:
        return 0 if self._emb is None else int(self._emb.shape[0])

    @property
    def dim(self) -> int | None:
        return None if self._emb is None else int(self._emb.shape[1])

    def lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found bool (m,), cached embeddings float32 (found.sum(), d)) for hashes uint64 (m, 2)."""
        m = hashes.shape[0]
        if self._emb is None or m == 0 or self._keys_sorted.shape[0] == 0:
            return np.zeros(m, bool), np.zeros((0, self.dim or 0), np.float32)
        q = _as_keys(hashes)
        pos = np.minimum(np.searchsorted(self._keys_sorted, q), self._keys_sorted.shape[0] - 1)
        found = self._keys_sorted[pos] == q
        return found, np.asarray(self._emb[self._order[pos[found]]], np.float32)

    def write(self, hashes: np.ndarray, embeddings: np.ndarray) -> str:
        """Replace the stored rows with this run's (atomic per file; meta.json last)."""
        os.makedirs(self.path, exist_ok=True)
        for name, arr in (("text_hashes.npy", hashes), ("embeddings.npy", embeddings)):
            with atomic_path(os.path.join(self.path, name)) as tmp, open(tmp, "wb") as fh:
                np.save(fh, np.ascontiguousarray(arr))
        write_json_atomic({**self.meta, "rows": int(hashes.shape[0]),
                           "dim": int(embeddings.shape[1]) if embeddings.ndim == 2 else 0},
                          os.path.join(self.path, "meta.json"))
        return os.path.join(self.path, "embeddings.npy")
