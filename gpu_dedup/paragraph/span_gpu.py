"""Paragraph hashes on the GPU with work per thread bounded by bytes (dedup.py ``span_hashes``' GPU path): the
spans are gathered into one buffer, normalized as documents by the dedup path's chunked kernels
(text/normalize.py ``normalize_chunks``: a thread per chunk with carried scan state) and hashed by a block
per span (kernels/cuda.py ``xxh64_pairs``), so a multi-MB paragraph no longer holds one thread. Same bits as
the CPU's thread per span (bloom_cpu.span_norm_sizes / span_norm_hash). Transient device memory: the
gathered spans (their bytes) plus the gather index (16 bytes per byte), then the normalized spans."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..config import NormalizeConfig
from ..device import array_module, launch, repeat_index
from ..text.normalize import device_tables, normalize_chunks
from .bloom import SEED1, SEED2


def span_hashes_gpu(data: Any, start: Any, end: Any, cfg: NormalizeConfig, seed: int = 0,
                    chunk: int | None = None) -> tuple[Any, Any, Any]:
    """span_hashes on the GPU: gather the spans, normalize them as documents by byte chunks, hash each
    normalized span with a block (the same bits as the CPU's span_norm_sizes / span_norm_hash)."""
    xp = array_module("cuda")
    u = int(start.shape[0])
    h = xp.zeros((u, 2), xp.uint64)
    if u == 0:
        return h[:, 0].copy(), h[:, 1].copy(), xp.zeros(0, xp.int64)
    lengths = (end - start).astype(xp.int64)
    goff = xp.zeros(u + 1, xp.int64)
    xp.cumsum(lengths, out=goff[1:])
    total = int(goff[-1])
    if total:
        span = repeat_index(xp, lengths)
        gathered = data[start[span] + xp.arange(total, dtype=xp.int64) - goff[span]]
    else:
        gathered = xp.zeros(1, xp.uint8)
    map_off, map_cp = device_tables(cfg, "cuda")
    norm = normalize_chunks(gathered, goff, map_off, map_cp, xp, chunk)
    launch("cuda", "xxh64_pairs", u, norm.data if norm.data.shape[0] else xp.zeros(1, xp.uint8), norm.offsets,
           np.uint64(SEED1 ^ seed), np.uint64(SEED2 ^ seed), h)
    return h[:, 0].copy(), h[:, 1].copy(), norm.offsets[1:] - norm.offsets[:-1]
