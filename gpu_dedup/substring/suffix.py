"""Suffix arrays and LCP arrays over integer texts, on the CPU and on the GPU (the same arrays bit for bit).

Text
    ``corpus_text``: the tokens of the chosen documents, each document followed by its own separator:
    separator of the d-th document = d, a token = n_docs + the dense rank of its identity among these
    documents' (int32). Separators are unique, so no common
    prefix of two suffixes contains one: no match crosses a document boundary. Suffixes compare
    lexicographically, a proper prefix first; the suffix array is therefore unique.
CPU: ``pydivsufsort`` (libdivsufsort, a well-kept C library with wheels, released 2026-02; ~5n bytes plus the
    input for n <= 2^31; its integer path sorts the big-endian bytes of the minimized dtype, 2 or 4 bytes per
    token, and keeps the aligned suffixes) and its Kasai LCP. Alternatives on PyPI: pysais (SA-IS with integer
    alphabets, last release 2023; not measured here), divsufsort (older bindings of the same library, 2021),
    pysuffixarray (pure Python, 2018); none is better kept.
GPU: prefix doubling (Manber-Myers with radix sorts): ranks of h-prefixes become ranks of 2h-prefixes by
    sorting the packed pairs (rank[i] << 32 | rank[i + h] + 1) as uint64 with CuPy's radix sort and
    numbering the distinct keys; log2(longest LCP) rounds (the separators bound it by the longest document).
    LCP: Kasai's algorithm in ranges of KASAI_RANGE positions, one GPU thread each (kernels/substring.py).
Memory per position: text 4 B, suffix array 8 B, rank 8 B, LCP 4 B (CPU: pydivsufsort's SA is int32 for
    n < 2^31, 4 B, plus its byte view of the text); the GPU's doubling round holds key 8 B, order 8 B and
    the sorted keys 8 B besides.
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..errors import ConfigError, DependencyError
from ..ops import substring as substring_ops
from ..runtime.device import argsort_stable, array_module, gpu_status

logger = logging.getLogger(__name__)

MAX_POSITIONS = (1 << 32) - 2  # the doubling's packed pair holds a rank + 1 in 32 bits


def corpus_text(doc_off: np.ndarray, ident: np.ndarray, token: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host. (text int32 (m,), text_token int64 (m,)): the text of one suffix array over n documents (doc_off
    int64 (n+1,) from 0, ident uint64 (N,) their tokens' identities, token int64 (N,) each token's global
    index) and, per position, the global token index (-1 at a separator). The identities are ranked densely
    here (0..V-1 over these documents), so the alphabet is n + V <= m whatever the corpus' vocabulary."""
    n = doc_off.shape[0] - 1
    lens = np.diff(doc_off)
    uniq, inv = np.unique(ident, return_inverse=True)
    if n + uniq.shape[0] >= 1 << 31:
        raise ConfigError(f"{n} documents with {uniq.shape[0]} distinct tokens exceed the int32 alphabet of one "
                          "suffix array; set SubstringConfig.chunk_tokens or SubstringConfig.memory_budget")
    m = int(doc_off[-1]) + n
    pos = np.arange(int(doc_off[-1]), dtype=np.int64) + np.repeat(np.arange(n, dtype=np.int64), lens)
    text = np.empty(m, np.int32)
    text_token = np.full(m, -1, np.int64)
    sep = doc_off[1:] + np.arange(n, dtype=np.int64)  # position after document d's tokens
    text[sep] = np.arange(n, dtype=np.int32)
    text[pos] = (inv.reshape(-1) + n).astype(np.int32)
    text_token[pos] = token
    return text, text_token


def divsufsort() -> Any:
    """The ``pydivsufsort`` module (the CPU's suffix arrays and LCP arrays), or a DependencyError naming the
    extra that brings it."""
    try:
        import pydivsufsort
    except ImportError as exc:
        raise DependencyError("exact-substring dedup on the CPU needs pydivsufsort: "
                              "pip install 'gpu-dedup[substring]'") from exc
    return pydivsufsort


def require_library(device: str) -> None:
    """Fail before any input is read when ``device`` ("cpu", or "auto" without a usable GPU) would build its
    suffix arrays with pydivsufsort and that package is missing (a DependencyError naming the extra)."""
    if device == "cpu" or (device == "auto" and not gpu_status()[0]):
        divsufsort()


def suffix_array(text: Any, device: str = "cpu") -> Any:
    """int64 (n,): the suffix array of ``text`` (int32 (n,)). CPU: pydivsufsort; cuda: prefix doubling
    (``suffix_array_doubling``) on the device arrays."""
    if device == "cuda":
        return suffix_array_doubling(text, array_module(device))
    pydivsufsort = divsufsort()
    if text.shape[0] == 0:
        return np.zeros(0, np.int64)
    return np.asarray(pydivsufsort.divsufsort(np.ascontiguousarray(text, np.int32)), np.int64)


def suffix_array_doubling(text: Any, xp: Any = np) -> Any:
    """Prefix doubling over radix sorts of packed rank pairs (module docstring); int64 (n,) in ``xp``.
    Transient memory: about 40 B per position."""
    n = int(text.shape[0])
    if n > MAX_POSITIONS:
        raise ConfigError(f"{n} positions exceed the {MAX_POSITIONS} of one GPU suffix array; set "
                          "SubstringConfig.chunk_tokens")
    if n == 0:
        return xp.zeros(0, xp.int64)
    order = argsort_stable(xp, text.astype(xp.int64))
    rank, top = _ranks(text.astype(xp.int64)[order], order, xp)
    h = 1
    while top < n - 1 and h < n:
        second = xp.zeros(n, xp.uint64)
        second[:n - h] = rank[h:].astype(xp.uint64) + 1
        key = (rank.astype(xp.uint64) << 32) | second
        order = xp.argsort(key)  # ties share a rank, so any order of them serves
        rank, top = _ranks(key[order], order, xp)
        h *= 2
    return order.astype(xp.int64)


def _ranks(sorted_keys: Any, order: Any, xp: Any) -> tuple[Any, int]:
    """rank[order[i]] = number of distinct keys before sorted_keys[i]; and the largest rank."""
    n = int(sorted_keys.shape[0])
    new = xp.zeros(n, xp.int64)
    new[1:] = (sorted_keys[1:] != sorted_keys[:-1]).astype(xp.int64)
    r = xp.cumsum(new)
    rank = xp.empty(n, xp.int64)
    rank[order] = r
    return rank, int(r[-1])


def lcp_array(text: Any, sa: Any, device: str = "cpu", kernel: bool | None = None) -> Any:
    """int32 (n,): lcp[r] = LCP(suffix sa[r], suffix sa[r + 1]), lcp[n - 1] = 0. CPU: pydivsufsort's Kasai
    (kernel=True: our Kasai kernel's CPU twin instead, for tests); cuda: the Kasai kernel on the device."""
    n = int(text.shape[0])
    use_kernel = device == "cuda" if kernel is None else kernel
    if not use_kernel:
        pydivsufsort = divsufsort()
        if n == 0:
            return np.zeros(0, np.int32)
        return np.asarray(pydivsufsort.kasai(np.ascontiguousarray(text, np.int32), np.asarray(sa)), np.int32)
    return substring_ops.lcp_kasai(device, text, sa)


def suffix_and_lcp(text: Any, device: str = "cpu") -> tuple[Any, Any]:
    """(sa int64, lcp int32) of ``text`` (int32, in the device's module: a device array on a GPU), built on
    ``device``; the results stay there."""
    sa = suffix_array(text, device)
    return sa, lcp_array(text, sa, device)
