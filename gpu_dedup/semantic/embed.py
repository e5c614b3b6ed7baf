"""Embedding: ``embed_texts`` (texts -> L2-normalised float32 rows), ``text_hashes`` (the cache key of a
text) and ``EmbeddingCache`` (embeddings of one run, reusable by text hash in the next).

See stage 1 in the package docstring (``gpu_dedup.semantic``) for the character cut, the batching and the
precision.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence, get_args

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, DataError
from ..io import atomic_path, write_json_atomic
from ..io.text import arrow_text_buffers
from ..ops import core
from .config import CACHE_FORMAT, LongText
from .model import need_module, torch_device

logger = logging.getLogger(__name__)


COUNT_BATCH = 1024  # texts per tokenizer call when counting tokens or cutting windows


@dataclass
class FirstBatch:
    """What the first forward pass of an ``embed_documents`` call measured, and the whole call's estimate."""

    seconds: float
    texts: int
    tokens: int  # real tokens (attention mask), special tokens included
    padded_tokens: int  # batch rows x padded length: what the model computed
    estimated_seconds: float  # the whole call, extrapolated by padded tokens


@dataclass
class Embedded:
    """``embed_documents``'s result. embeddings: float32 (n, d), rows L2-normalised; tokens: int64 (n,), the
    tokenizer's count, special tokens included (mean: of the whole text; truncate: as ``count_tokens`` gives
    it); truncated: bool (n,), the model saw only part of the text; windows: texts run through the model (n for
    truncate, the number of windows for mean)."""

    embeddings: np.ndarray
    tokens: np.ndarray
    truncated: np.ndarray
    windows: int


def _limit(model) -> int | None:
    seq = getattr(model, "max_seq_length", None)
    return int(seq) if seq else None


class _Counter:
    """The model's tokenizer, copied: no truncation, no padding, safe to run next to the embedding's own
    tokenization threads (a shared Hugging Face tokenizer switches its truncation state per call)."""

    def __init__(self, model) -> None:
        tok = getattr(model, "tokenizer", None)
        if tok is None:
            raise ConfigError("the embedding model has no tokenizer (model.tokenizer); token counts and "
                              "long_text='mean' need a text model with a Hugging Face tokenizer")
        try:
            self.specials = int(tok.num_special_tokens_to_add(pair=False))
        except Exception:  # noqa: BLE001 - a tokenizer without the method: count no special tokens
            self.specials = 0
        backend = getattr(tok, "backend_tokenizer", None)
        self.fast = backend is not None
        if self.fast:
            tokenizers = need_module("tokenizers", "counting tokens")
            self._tok = tokenizers.Tokenizer.from_str(backend.to_str())
            self._tok.no_truncation()
            self._tok.no_padding()
        else:
            import copy

            self._tok = copy.deepcopy(tok)

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """Content tokens (special tokens not included) of each text."""
        if self.fast:
            return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]
        return [len(x) for x in self._tok(list(texts), add_special_tokens=False, return_attention_mask=False,
                                          verbose=False)["input_ids"]]

    def encode(self, texts: Sequence[str]) -> list:
        """``tokenizers.Encoding`` of each text (ids, offsets, word_ids); fast tokenizers only."""
        if not self.fast:
            raise ConfigError("long_text='mean' needs a fast tokenizer (the offsets of every token)")
        return self._tok.encode_batch(list(texts), add_special_tokens=False)


_COUNTERS: "weakref.WeakKeyDictionary[Any, _Counter]" = weakref.WeakKeyDictionary()


def _counter(model) -> _Counter:
    if model not in _COUNTERS:
        _COUNTERS[model] = _Counter(model)
    return _COUNTERS[model]


def count_tokens(model, texts: Sequence[str], *, chars_per_token: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Token counts of ``texts`` by (a copy of) the model's tokenizer, special tokens included.

    Texts go in batches of ``COUNT_BATCH``. Only the first ``chars_per_token x max_seq_length`` characters are
    tokenized (what ``embed_texts`` gives the model). A longer text's count is that prefix's, scaled by the
    text's length: an estimate, since tokenizing megabyte texts could cost more than embedding them.

    Args:
        model: the loaded sentence-transformers model.
        texts: the documents.
        chars_per_token: the character cut per token of max_seq_length (0: whole texts).

    Returns:
        (tokens int64 (n,), truncated bool (n,)): truncated means the model sees only part of the text (more
        tokens than max_seq_length, or cut by characters).

    Raises:
        ConfigError: the model has no tokenizer.
    """
    seq = _limit(model)
    counter = _counter(model)
    cap = chars_per_token * seq if seq else 0
    n = len(texts)
    tokens = np.zeros(n, np.int64)
    for i in range(0, n, COUNT_BATCH):
        part = [t[:cap] for t in texts[i:i + COUNT_BATCH]] if cap else texts[i:i + COUNT_BATCH]
        tokens[i:i + len(part)] = counter.lengths(part)
    lengths = np.fromiter((len(t) for t in texts), np.int64, n)
    cut = lengths > cap if cap else np.zeros(n, bool)
    tokens[cut] = np.ceil(tokens[cut] * (lengths[cut] / cap)).astype(np.int64)
    tokens += counter.specials
    truncated = ((tokens > seq) | cut) if seq else np.zeros(n, bool)
    return tokens, truncated


def _spans(m: int, width: int, overlap: int, word_ids: Sequence[int | None]) -> list[tuple[int, int]]:
    """Token windows [start, end) of at most ``width`` tokens covering 0..m, consecutive windows sharing about
    ``overlap`` tokens; a window ends (and the next starts) at a word start unless one word fills the window."""
    def word_start(k: int, lo: int) -> int:
        j = k
        while j > lo and word_ids[j] is not None and word_ids[j] == word_ids[j - 1]:
            j -= 1
        return j if j > lo else k

    out, start = [], 0
    while True:
        end = min(start + width, m)
        if end < m:
            end = word_start(end, start)
        out.append((start, end))
        if end >= m:
            return out
        start = word_start(max(end - overlap, start + 1), start)


def _windows(model, texts: Sequence[str], overlap: int) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Whole-text token counts (n,) and the windows: their texts (substrings of the documents, cut at token
    offsets), owning document (int64) and content tokens (float32, the weights of the mean)."""
    seq = _limit(model)
    counter = _counter(model)
    sp = counter.specials
    width = max((seq or 0) - sp, 1)
    overlap = min(max(overlap, 0), width - 1)
    n = len(texts)
    tokens = np.zeros(n, np.int64)
    chunks: list[str] = []
    owner: list[int] = []
    weight: list[int] = []
    for i in range(0, n, COUNT_BATCH):
        part = list(texts[i:i + COUNT_BATCH])
        for j, (text, enc) in enumerate(zip(part, counter.encode(part))):
            m = len(enc.ids)
            tokens[i + j] = m + sp
            if not seq or m <= width:
                spans = [(text, max(m, 1))]
            else:
                off = enc.offsets
                spans = [(text[off[a][0]:off[b - 1][1]], b - a) for a, b in _spans(m, width, overlap, enc.word_ids)]
            chunks += [c for c, _ in spans]
            owner += [i + j] * len(spans)
            weight += [w for _, w in spans]
    return tokens, chunks, np.asarray(owner, np.int64), np.asarray(weight, np.float32)


def _forward(model, texts: Sequence[str], batch_size: int, device: str, on_first_batch=None, on_batch=None):
    """Embeddings of ``texts`` (already cut) as a float32 torch tensor (n, d) on the stage's torch device, rows
    L2-normalised; None for no texts. Longest first in batches, tokenized two batches ahead in threads.
    ``on_batch``: called with the number of texts of each forward pass once it is done."""
    torch = need_module("torch", "embed_texts")
    tdev = torch_device(device)
    n = len(texts)
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
            t0 = time.perf_counter()
            feats = {key: v.to(tdev, non_blocking=True) if isinstance(v, torch.Tensor) else v
                     for key, v in feats.items()}
            emb = model(feats)["sentence_embedding"].float()
            emb = torch.nn.functional.normalize(emb, dim=1)
            if out is None:
                out = torch.empty((n, emb.shape[1]), dtype=torch.float32, device=emb.device)
            out[torch.as_tensor(idx, device=emb.device)] = emb
            if k == 0 and on_first_batch is not None and "attention_mask" in feats:
                if emb.is_cuda:
                    torch.cuda.synchronize()
                on_first_batch(_first_batch(time.perf_counter() - t0, feats["attention_mask"], lengths, batches,
                                            _limit(model)))
            if on_batch is not None:
                on_batch(len(idx))
    return out


def _first_batch(seconds: float, mask, lengths: np.ndarray, batches: list[np.ndarray], seq: int | None) -> FirstBatch:
    """The first batch's measurements and the call's time by padded tokens: each later batch is estimated at
    its longest text's characters / (the first batch's characters per token), capped at max_seq_length."""
    rows, padded = (int(x) for x in mask.shape)
    real = int(mask.sum())
    chars = int(lengths[batches[0]].sum())
    per_token = chars / max(real, 1)
    est = sum(len(b) * min(max(1, math.ceil(int(lengths[b[0]]) / max(per_token, 1e-9))), seq or 1 << 62)
              for b in batches[1:])
    rate = rows * padded / max(seconds, 1e-9)
    return FirstBatch(seconds, rows, real, rows * padded, seconds + est / rate)


def embed_documents(model, texts: Sequence[str], *, batch_size: int = 256, device: str = "cpu",
                    chars_per_token: int = 10, long_text: LongText = "truncate", window_overlap: int = 0,
                    on_first_batch=None, on_progress=None) -> Embedded:
    """Embeddings of ``texts`` with their token counts (see ``Embedded``).

    ``long_text="truncate"``: the model reads each text cut to ``chars_per_token x max_seq_length`` characters
    and truncates it to max_seq_length tokens (sentence-transformers' behaviour). ``"mean"``: a text longer
    than max_seq_length tokens is split into windows of max_seq_length tokens (special tokens included, cut at
    word starts). Each window is embedded; the text's embedding is the L2-normalised mean of its windows'
    embeddings, weighted by their tokens. A text that fits is embedded whole, as under "truncate" without the
    character cut. Memory: (n or windows) x d floats on ``device`` + 3 batches.

    Args:
        model: the loaded sentence-transformers model.
        texts: the documents.
        batch_size: texts (or windows) per forward pass.
        device: "cpu" or "cuda".
        chars_per_token: the character cut per token of max_seq_length (0: not cut).
        long_text: "truncate" or "mean".
        window_overlap: tokens shared by neighbouring windows ("mean").
        on_first_batch: called with a ``FirstBatch`` after the first forward pass (timing estimates).
        on_progress: called after each forward pass with the texts it finished (a float under "mean": its
            windows' share of the texts), so that a long call shows progress; the calls add up to ``len(texts)``.

    Returns:
        The ``Embedded``: float32 (n, d) unit rows, token counts, truncation flags, windows run.

    Raises:
        ConfigError: an unknown ``long_text``, or "mean" without a fast tokenizer.
    """
    if long_text not in get_args(LongText):
        raise ConfigError(f"long_text must be one of {get_args(LongText)}, got {long_text!r}")
    torch = need_module("torch", "embed_texts")
    n = len(texts)
    _counter(model)  # made here, before any tokenization thread runs
    if long_text == "mean":
        tokens, chunks, owner, weight = _windows(model, texts, window_overlap)
        share = n / max(len(chunks), 1)  # texts per window, for on_progress
        emb = _forward(model, chunks, batch_size, device, on_first_batch,
                       None if on_progress is None else (lambda k: on_progress(k * share)))
        if emb is not None:
            acc = torch.zeros((n, emb.shape[1]), dtype=torch.float32, device=emb.device)
            w = torch.as_tensor(weight, device=emb.device)[:, None]
            acc.index_add_(0, torch.as_tensor(owner, device=emb.device), emb * w)
            emb = torch.nn.functional.normalize(acc, dim=1)
        truncated, windows = np.zeros(n, bool), len(chunks)
    else:
        seq = _limit(model)
        cap = chars_per_token * seq if seq else 0
        cut = [t[:cap] for t in texts] if cap else list(texts)
        with ThreadPoolExecutor(1, thread_name_prefix="gpu_dedup-count") as pool:  # (Rust tokenizers drop the GIL)
            counted = pool.submit(count_tokens, model, texts, chars_per_token=chars_per_token)
            emb = _forward(model, cut, batch_size, device, on_first_batch, on_progress)
            tokens, truncated = counted.result()
        windows = n
    arr = np.zeros((0, 0), np.float32) if emb is None else emb.cpu().numpy()
    return Embedded(arr, tokens, truncated, windows)


def embed_texts(model, texts: Sequence[str], *, batch_size: int = 256, device: str = "cpu",
                chars_per_token: int = 10, long_text: LongText = "truncate", window_overlap: int = 0) -> np.ndarray:
    """Embeddings of ``texts``, rows L2-normalised (a zero row stays zero).

    Texts are cut to ``chars_per_token x max_seq_length`` characters, processed longest first in batches of
    ``batch_size`` (equal lengths pad little), tokenized two batches ahead in worker threads, and put back in
    input order. Memory: n x d floats on ``device`` + 3 batches.

    Args:
        model: the loaded sentence-transformers model.
        texts: the documents.
        batch_size: texts per forward pass.
        device: "cpu" or "cuda".
        chars_per_token: the character cut per token of max_seq_length (0: not cut).
        long_text: "truncate", or "mean": whole texts as the mean of their windows (``embed_documents``).
        window_overlap: tokens shared by neighbouring windows ("mean").

    Returns:
        float32 (n, d), in input order.
    """
    if long_text != "truncate":
        return embed_documents(model, texts, batch_size=batch_size, device=device, chars_per_token=chars_per_token,
                               long_text=long_text, window_overlap=window_overlap).embeddings
    seq = _limit(model)
    cap = chars_per_token * seq if seq else 0
    emb = _forward(model, [t[:cap] for t in texts] if cap else list(texts), batch_size, device)
    return np.zeros((0, 0), np.float32) if emb is None else emb.cpu().numpy()


def text_hashes(text: pa.Array) -> np.ndarray:
    """The embedding cache key of each text: two XXH64 (fixed seeds) of its raw UTF-8 bytes.

    Args:
        text: pa.string / large_string (n,).

    Returns:
        uint64 (n, 2).
    """
    data, offsets = arrow_text_buffers(text)
    return core.exact_hashes("cpu", data, offsets)


_H128 = np.dtype([("a", "<u8"), ("b", "<u8")])


def _as_keys(h: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(h, dtype=np.uint64).view(_H128).reshape(-1)


class EmbeddingCache:
    """Embeddings of one run, reusable by text hash in the next.

    Layout: ``directory/<key>/{embeddings.npy (n, d) float32, text_hashes.npy (n, 2) uint64, meta.json}``
    and ``tokens.npy`` (n, 2) int64 (token count, truncated 0/1; absent in older caches: those rows are counted
    again), rows in the order of the run that wrote them. ``key`` = sha256 of the model fingerprint and every
    setting that changes embeddings (max_seq_length, dtype, chars_per_token, long_text unless "truncate",
    format); another model or
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
        self._tokens = None
        self.found_meta: dict[str, Any] = {}
        emb_path = os.path.join(self.path, "embeddings.npy")
        meta_path = os.path.join(self.path, "meta.json")
        if os.path.isfile(emb_path) and os.path.isfile(meta_path):
            try:
                with open(meta_path, encoding="utf-8") as fh:
                    found = json.load(fh)
                emb = np.load(emb_path, mmap_mode="r")
                hashes = np.load(os.path.join(self.path, "text_hashes.npy"))
                if found.get("key") != key or emb.shape[0] != hashes.shape[0]:
                    raise DataError("key or row count mismatch")
            except Exception as exc:  # a damaged cache is rebuilt, never trusted
                logger.warning("ignoring embedding cache %s (%s); it will be rewritten", self.path, exc)
            else:
                keys = _as_keys(hashes)
                self._order = np.argsort(keys, kind="stable")
                self._keys_sorted = keys[self._order]
                self._emb = emb
                self.found_meta = found
                self._tokens = self._load_tokens(emb.shape[0])

    def _load_tokens(self, rows: int) -> np.ndarray | None:
        path = os.path.join(self.path, "tokens.npy")
        try:
            tok = np.load(path) if os.path.isfile(path) else None
        except Exception as exc:  # noqa: BLE001 - token counts are recounted, never trusted when damaged
            logger.warning("ignoring %s (%s); the token counts will be recounted", path, exc)
            return None
        return tok if tok is not None and tok.shape == (rows, 2) else None

    @staticmethod
    def key_for(fingerprint: str, max_seq_length: int | None, dtype: str, chars_per_token: int,
                long_text: str = "truncate", window_overlap: int = 0) -> tuple[str, dict[str, Any]]:
        meta = {"format": CACHE_FORMAT, "model_fingerprint": fingerprint, "max_seq_length": max_seq_length,
                "dtype": dtype, "chars_per_token": chars_per_token, "normalized": "l2"}
        if long_text != "truncate":  # (truncate: the keys of caches written before the policy existed)
            meta.update(long_text=long_text, window_overlap=window_overlap)
        key = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]
        return key, {**meta, "key": key}

    @property
    def rows(self) -> int:
        return 0 if self._emb is None else int(self._emb.shape[0])

    @property
    def has_tokens(self) -> bool:
        return self._tokens is not None

    @property
    def dim(self) -> int | None:
        return None if self._emb is None else int(self._emb.shape[1])

    def _rows(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = hashes.shape[0]
        if self._emb is None or m == 0 or self._keys_sorted.shape[0] == 0:
            return np.zeros(m, bool), np.zeros(0, np.int64)
        q = _as_keys(hashes)
        pos = np.minimum(np.searchsorted(self._keys_sorted, q), self._keys_sorted.shape[0] - 1)
        found = self._keys_sorted[pos] == q
        return found, self._order[pos[found]]

    def lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found bool (m,), cached embeddings float32 (found.sum(), d)) for hashes uint64 (m, 2)."""
        found, rows = self._rows(hashes)
        if not found.any():
            return found, np.zeros((0, self.dim or 0), np.float32)
        return found, np.asarray(self._emb[rows], np.float32)

    def lookup_tokens(self, hashes: np.ndarray) -> np.ndarray:
        """int64 (m, 2): (token count, truncated 0/1) of each cached text; -1 where not known."""
        out = np.full((hashes.shape[0], 2), -1, np.int64)
        found, rows = self._rows(hashes)
        if self._tokens is not None and found.any():
            out[found] = self._tokens[rows]
        return out

    def write(self, hashes: np.ndarray, embeddings: np.ndarray, tokens: np.ndarray | None = None,
              **meta: Any) -> str:
        """Replace the stored rows with this run's (atomic per file; meta.json last). tokens: int64 (n, 2) as
        ``lookup_tokens`` returns them (-1: unknown); ``meta``: more entries for meta.json."""
        os.makedirs(self.path, exist_ok=True)
        arrays = [("text_hashes.npy", hashes), ("embeddings.npy", embeddings)]
        if tokens is not None:
            arrays.append(("tokens.npy", np.asarray(tokens, np.int64)))
        elif os.path.exists(os.path.join(self.path, "tokens.npy")):
            os.remove(os.path.join(self.path, "tokens.npy"))
        for name, arr in arrays:
            with atomic_path(os.path.join(self.path, name)) as tmp, open(tmp, "wb") as fh:
                np.save(fh, np.ascontiguousarray(arr))
        write_json_atomic({**self.meta, **meta, "rows": int(hashes.shape[0]),
                           "dim": int(embeddings.shape[1]) if embeddings.ndim == 2 else 0},
                          os.path.join(self.path, "meta.json"))
        return os.path.join(self.path, "embeddings.npy")
