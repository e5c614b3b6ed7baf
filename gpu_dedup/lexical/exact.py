"""Exact-duplicate stage: 128-bit hash of the normalized text, grouped by sort.

The hash is two XXH64 with fixed seeds (pinned in the contract). Two different texts share it with
probability 2^-128 per pair, i.e. about N^2 / 2^129 for N documents (1.5e-21 for a billion documents).
"""
from __future__ import annotations

import logging

import numpy as np

from .. import io
from ..ops import core
from ..runtime.device import lexsort_radix
from ..text.normalize import Normalized, normalize_text

logger = logging.getLogger(__name__)


def exact_hashes(norm: Normalized, device: str = "cpu"):
    """(n, 2) uint64 hash of each normalized document (array of the device's module)."""
    return core.exact_hashes(device, norm.data, norm.offsets)


def exact_groups(h, rank, xp=np):
    """h: (n, 2) uint64 exact hashes, rank: (n,) int64 keep rank. Returns leader int64 (n,): the first
    row in keep order with the same hash (a row is its own leader when it is the first)."""
    n = h.shape[0]
    leader = xp.arange(n, dtype=xp.int64)
    if n == 0:
        return leader
    order = lexsort_radix(xp, [rank, h[:, 1], h[:, 0]], [None, 1 << 64, 1 << 64])  # 3 radix sorts
    hs = h[order]
    start = xp.ones(n, dtype=bool)
    start[1:] = (hs[1:, 0] != hs[:-1, 0]) | (hs[1:, 1] != hs[:-1, 1])
    group_first = order[xp.flatnonzero(start)]
    group_of = xp.cumsum(start) - 1
    leader[order] = group_first[group_of]
    return leader


def verify_groups(files, cfg, leader: np.ndarray) -> tuple[np.ndarray, int]:
    """Byte-compare the normalized text of every exact-group member with its leader's (two reads of
    the batches holding group rows: leaders, then members). A member whose bytes differ (a hash
    collision) becomes its own leader. Returns (leader, collisions)."""
    rows = np.arange(leader.shape[0], dtype=np.int64)
    members = np.flatnonzero(leader != rows)
    if members.shape[0] == 0:
        return leader, 0
    leaders = np.unique(leader[members])

    def texts_of(wanted: np.ndarray):
        for sel, text in io.iter_rows(files, wanted, **{**cfg.reader_options(), "keep_column": None}):
            norm = normalize_text(text, cfg.normalize)
            data = bytes(norm.data)
            for j, row in enumerate(sel.tolist()):
                yield row, data[norm.offsets[j]:norm.offsets[j + 1]]

    leader_text = dict(texts_of(leaders))
    leader = leader.copy()
    collisions = 0
    for row, text in texts_of(members):
        if text != leader_text[int(leader[row])]:
            logger.warning("exact-hash collision: row %d differs from its group's first row %d; kept apart",
                           row, int(leader[row]))
            leader[row] = row
            collisions += 1
    return leader, collisions
