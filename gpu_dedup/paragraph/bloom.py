"""Memory-bounded "seen" sets for streaming keep-first dedup: a Bloom filter, or an exact set of 128-bit
hashes for users who cannot accept false positives.

Items are 128-bit keys (h1, h2) = XXH64 of the item's bytes with the seeds ``SEED1 ^ seed`` and
``SEED2 ^ seed`` (``item_hashes``; with seed 0 these are the exact-document hash seeds of the contract).

Bloom filter (``BloomFilter``): m = ceil(-n ln p / (ln 2)^2) bits and k = round((m / n) ln 2) >= 1 hash
functions for the design item count n and false-positive rate p. Bit indexes by double hashing, reduced
modulo m (kernels/bloom.py has the exact formula). CPU: Numba kernels (the insert splits the words
between threads, so it needs no atomics); GPU: the bit array lives in device memory and is set with
``cuda.atomic.or_`` on uint32 words. The bit array is identical on both.

Order determinism (``keep_first``): a batch of items is processed as
  1. exact in-batch first occurrence by a stable sort of the 128-bit keys (later copies inside the batch
     are duplicates of an earlier item of the same batch, with no false positive possible);
  2. query the filter, as it was before the batch, with the batch's distinct items (read only);
  3. insert the distinct items that were not found (bit OR is commutative, so the final bits do not
     depend on thread order).
No step reads what another thread of the same step writes, so the result depends only on the input
order and on the batch boundaries (a false positive can only come from items of earlier batches), never
on scheduling. The exact set gives the same answers without false positives, independent of batching.

Capacity: inserting more distinct items than the design n raises the false-positive rate above p;
``on_overflow="warn"`` logs a warning once (and the statistics report the estimated rate from the
measured bit fill), ``"refuse"`` raises ``BloomCapacityError`` before inserting the batch that would
exceed n (in exact mode, where memory is what grows, "refuse" also caps the item count and "warn" only
logs at INFO level).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from ..config import is_int, is_real
from ..text.spans import SEED1, SEED2
from ..errors import ConfigError, RunError
from ..io.text import arrow_text_buffers
from ..ops import bloom as bloom_ops
from ..runtime.device import array_module, to_device

logger = logging.getLogger(__name__)

MAX_BITS = 1 << 43  # 1 TiB of bits: anything larger is a configuration mistake
HASH_DESCRIPTION = f"xxh64(item bytes, {SEED1:#X} ^ seed), xxh64(item bytes, {SEED2:#X} ^ seed)".replace("0X", "0x")
INDEX_DESCRIPTION = "g_i = (h1 mod m + i * (1 + h2 mod (m - 1))) mod m, i < k; bit g in uint32 word g >> 5"

BloomMode = Literal["bloom", "exact"]
OnOverflow = Literal["warn", "refuse"]


class BloomCapacityError(RunError):
    """More distinct items than the filter was designed for, with on_overflow='refuse'."""


@dataclass(frozen=True)
class BloomConfig:
    """expected_items: design item count n; fp_rate: target false-positive rate p at n items; seed:
    mixed into the item hash seeds; mode: "bloom" (bounded memory, false positives at rate ~p) or
    "exact" (sorted 128-bit hashes, 16 bytes per distinct item, no false positives up to a 2^-128 hash
    collision per pair); on_overflow: "warn" or "refuse" when more than n distinct items arrive."""

    expected_items: int = 100_000_000
    fp_rate: float = 1e-9
    seed: int = 0
    mode: BloomMode = "bloom"
    on_overflow: OnOverflow = "warn"

    def __post_init__(self) -> None:
        if not isinstance(self.expected_items, int) or isinstance(self.expected_items, bool) \
                or self.expected_items < 1:
            raise ConfigError(f"BloomConfig.expected_items must be a positive int, got {self.expected_items!r}; "
                              "pass the number of distinct items you expect (an overestimate is safe)")
        if not is_real(self.fp_rate) or not 0.0 < float(self.fp_rate) < 1.0:
            raise ConfigError(f"BloomConfig.fp_rate must be in (0, 1), got {self.fp_rate!r}; e.g. 1e-9")
        if not is_int(self.seed) or not 0 <= self.seed < 2**64:
            raise ConfigError(f"BloomConfig.seed must be an int in [0, 2**64), got {self.seed!r}")
        if self.mode not in get_args(BloomMode):
            raise ConfigError(f"BloomConfig.mode must be one of {get_args(BloomMode)}, got {self.mode!r}")
        if self.on_overflow not in get_args(OnOverflow):
            raise ConfigError(f"BloomConfig.on_overflow must be one of {get_args(OnOverflow)}, "
                              f"got {self.on_overflow!r}")
        if self.mode == "bloom":
            m, _ = bloom_size(self.expected_items, self.fp_rate)
            if m > MAX_BITS:
                raise ConfigError(f"a Bloom filter for n={self.expected_items} items at p={self.fp_rate} needs "
                                  f"{m / 8 / 2**30:.0f} GiB; raise fp_rate, lower expected_items or use mode='exact'")


def bloom_size(n: int, p: float) -> tuple[int, int]:
    """(m bits, k hash functions): m = ceil(-n ln p / (ln 2)^2) (at least 64), k = max(1, round(m/n ln 2))."""
    if n < 1 or not 0.0 < p < 1.0:
        raise ConfigError(f"bloom_size needs n >= 1 and 0 < p < 1, got n={n!r}, p={p!r}")
    m = max(64, math.ceil(-n * math.log(p) / math.log(2) ** 2))
    k = max(1, round(m / n * math.log(2)))
    return m, k


def expected_fp_rate(m: int, k: int, n: int) -> float:
    """Classical estimate (1 - e^{-kn/m})^k of the false-positive rate after n insertions."""
    return (1.0 - math.exp(-k * n / m)) ** k


_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], np.int64)


def _popcount(xp: Any, words: Any) -> int:
    """Number of set bits of a uint32 array (chunked, so no temporary larger than 16 Mi entries)."""
    total = 0
    step = 1 << 24
    for s in range(0, int(words.shape[0]), step):
        part = words[s:s + step]
        if hasattr(xp, "bitwise_count"):
            total += int(xp.bitwise_count(part).sum(dtype=xp.int64))
        else:
            total += int(xp.asarray(_POPCOUNT8)[part.view(xp.uint8)].sum())
    return total


# ----------------------------------------------------------------------------------------------------
# Hashing items
# ----------------------------------------------------------------------------------------------------

def hash_spans(data: Any, starts: Any, ends: Any, seed: int = 0, device: str = "cpu") -> tuple[Any, Any]:
    """128-bit keys of byte spans: data uint8 (T,), starts/ends int64 (n,) -> (h1, h2) uint64 (n,) each,
    arrays of the device's module."""
    return bloom_ops.hash128(device, data, starts, ends, SEED1 ^ seed, SEED2 ^ seed)


def item_hashes(items: Any, seed: int = 0, device: str = "cpu") -> tuple[Any, Any]:
    """128-bit keys of the UTF-8 bytes of each item of an Arrow string/binary array (or a list of str)."""
    import pyarrow as pa

    if not isinstance(items, pa.Array):
        items = pa.array(items, pa.large_string())
    if pa.types.is_binary(items.type) or pa.types.is_large_binary(items.type):
        items = items.cast(pa.large_string()) if pa.types.is_binary(items.type) else items.view(pa.large_string())
    data, offsets = arrow_text_buffers(items)
    return hash_spans(to_device(data, device), to_device(offsets[:-1].copy(), device),
                      to_device(offsets[1:].copy(), device), seed, device)


# ----------------------------------------------------------------------------------------------------
# Seen sets
# ----------------------------------------------------------------------------------------------------

def _overflow(seen: Any, error: str, level: int, message: str, *args: Any) -> None:
    """More distinct items than expected_items reached a seen-set: with on_overflow="refuse" raise
    BloomCapacityError(error), else log ``message`` once (at ``level``)."""
    if seen.cfg.on_overflow == "refuse":
        raise BloomCapacityError(error)
    if not seen._warned:
        seen._warned = True
        logger.log(level, message, *args)


class BloomFilter:
    """Bloom filter over 128-bit keys. ``bits``: uint32 (ceil(m/32),) in the device's array module."""

    def __init__(self, cfg: BloomConfig, device: str = "cpu", threads: int | None = None) -> None:
        self.cfg, self.device = cfg, device
        self.xp = array_module(device)
        self.m, self.k = bloom_size(cfg.expected_items, cfg.fp_rate)
        self.bits = self.xp.zeros((self.m + 31) // 32, self.xp.uint32)
        self.items = 0  # distinct items inserted
        self._warned = False
        self._threads = threads

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes)

    def query(self, h1: Any, h2: Any) -> Any:
        """bool (n,): True when the item may have been inserted (false positives at rate ~p)."""
        return bloom_ops.bloom_query(self.device, self.bits, self.m, self.k, h1, h2).astype(bool)

    def insert(self, h1: Any, h2: Any) -> None:
        """Set the bits of n items (the caller passes distinct items that were not found, so ``items``
        counts distinct insertions)."""
        n = int(h1.shape[0])
        self._check_capacity(n)
        bloom_ops.bloom_insert(self.device, self.bits, self.m, self.k, h1, h2, self._threads)
        self.items += n

    def _check_capacity(self, n: int) -> None:
        design = self.cfg.expected_items
        if self.items + n <= design:
            return
        _overflow(self, f"the Bloom filter holds {self.items:,} items and this batch adds {n:,}, over its design "
                        f"n={design:,} (at which its false-positive rate is {self.cfg.fp_rate:g}); rerun with a larger "
                        f"expected_items (--expected-paragraphs), or on_overflow='warn', or mode='exact'",
                  logging.WARNING, "Bloom filter: %d distinct items inserted, more than its design n=%d; the false-"
                  "positive rate now exceeds %g (see the run statistics for the estimate); set expected_items "
                  "higher next time", self.items + n, design, self.cfg.fp_rate)

    def stats(self) -> dict[str, Any]:
        ones = _popcount(self.xp, self.bits)
        fill = ones / self.m
        return {"mode": "bloom", "m_bits": self.m, "k": self.k, "bytes": self.nbytes,
                "design_items": self.cfg.expected_items, "items_inserted": self.items,
                "over_design": self.items > self.cfg.expected_items, "target_fp_rate": self.cfg.fp_rate,
                "bits_set_fraction": fill, "estimated_fp_rate_from_fill": fill ** self.k,
                "expected_fp_rate_at_items": expected_fp_rate(self.m, self.k, self.items),
                "hash": HASH_DESCRIPTION, "seed": self.cfg.seed, "index": INDEX_DESCRIPTION,
                "exact_mode_bytes_for_same_items": 16 * self.items}


class ExactSet:
    """Exact set of 128-bit keys kept as sorted runs (k1, k2) of geometrically growing sizes (a small
    log-structured merge: a new run is merged with the previous one while that one is not more than twice
    as large), so each insertion costs amortized O(log N) and a query searches O(log N) runs.
    Memory: 16 bytes per distinct item (plus a transient copy of the runs being merged)."""

    def __init__(self, cfg: BloomConfig, device: str = "cpu") -> None:
        self.cfg, self.device = cfg, device
        self.xp = array_module(device)
        self.runs: list[tuple[Any, Any]] = []
        self.items = 0
        self._warned = False

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes + b.nbytes for a, b in self.runs))

    def query(self, h1: Any, h2: Any) -> Any:
        xp = self.xp
        n = int(h1.shape[0])
        found = xp.zeros(n, xp.uint8)
        if n == 0:
            return found.astype(bool)
        for k1, k2 in self.runs:
            found |= bloom_ops.contains128(self.device, k1, k2, h1, h2)
        return found.astype(bool)

    def insert(self, h1: Any, h2: Any) -> None:
        """Add distinct keys that are not in the set yet."""
        xp = self.xp
        n = int(h1.shape[0])
        if self.items + n > self.cfg.expected_items:
            # no false positives to protect here: memory grows, so only inform
            _overflow(self, f"the exact seen-set holds {self.items:,} items and this batch adds {n:,}, over "
                            f"expected_items={self.cfg.expected_items:,} (16 bytes each); raise expected_items or "
                            f"use on_overflow='warn'",
                      logging.INFO, "exact seen-set: %d items, above expected_items=%d (16 bytes each)",
                      self.items + n, self.cfg.expected_items)
        if n == 0:
            return
        order = xp.lexsort(xp.stack([h2, h1]))
        run = (h1[order], h2[order])
        while self.runs and int(self.runs[-1][0].shape[0]) <= 2 * int(run[0].shape[0]):
            run = self._merge(self.runs.pop(), run)
        self.runs.append(run)
        self.items += n

    def _merge(self, a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
        """Merge two sorted runs of distinct keys in O(len) plus a binary search per key of the smaller
        one: b[j] lands at (keys of a below it) + j, a fills the remaining slots in order."""
        xp = self.xp
        if int(a[0].shape[0]) < int(b[0].shape[0]):
            a, b = b, a
        na, nb = int(a[0].shape[0]), int(b[0].shape[0])
        pos = bloom_ops.lower_bound128(self.device, a[0], a[1], b[0], b[1])
        pos += xp.arange(nb, dtype=xp.int64)
        slot_a = xp.ones(na + nb, dtype=bool)
        slot_a[pos] = False
        out = []
        for x, y in zip(a, b):
            m = xp.empty(na + nb, xp.uint64)
            m[pos] = y
            m[slot_a] = x
            out.append(m)
        return out[0], out[1]

    def stats(self) -> dict[str, Any]:
        m, k = bloom_size(self.cfg.expected_items, self.cfg.fp_rate)
        return {"mode": "exact", "bytes": self.nbytes, "runs": len(self.runs), "items_inserted": self.items,
                "design_items": self.cfg.expected_items, "hash": HASH_DESCRIPTION, "seed": self.cfg.seed,
                "bloom_bytes_for_design": (m + 31) // 32 * 4, "bloom_k_for_design": k}


SeenSet = BloomFilter | ExactSet


def make_seen_set(cfg: BloomConfig, device: str = "cpu") -> BloomFilter | ExactSet:
    return ExactSet(cfg, device) if cfg.mode == "exact" else BloomFilter(cfg, device)


# ----------------------------------------------------------------------------------------------------
# Keep-first over a stream of batches
# ----------------------------------------------------------------------------------------------------

def first_in_batch(xp: Any, h1: Any, h2: Any, eligible: Any) -> Any:
    """bool (n,): True at the first occurrence (in index order) of each distinct eligible key (h1, h2).
    A stable sort by key keeps equal keys in index order; the head of each run is the first occurrence."""
    n = int(h1.shape[0])
    first = xp.zeros(n, dtype=bool)
    idx = xp.flatnonzero(eligible)
    if idx.shape[0] == 0:
        return first
    a1, a2 = h1[idx], h2[idx]
    order = xp.lexsort(xp.stack([a2, a1]))  # stable: ties stay in index order
    s1, s2 = a1[order], a2[order]
    head = xp.ones(idx.shape[0], dtype=bool)
    head[1:] = (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])
    first[idx[order[head]]] = True
    return first


def keep_first(seen: BloomFilter | ExactSet, h1: Any, h2: Any, eligible: Any) -> Any:
    """One batch of keep-first dedup in index order. Returns bool (n,) ``removed``: an eligible item is
    removed when an equal key occurs earlier in the batch or the seen set (as it was before the batch)
    reports it; the batch's new distinct keys are then inserted. Ineligible items are never removed and
    never inserted. See the module docstring for why the result does not depend on scheduling."""
    xp = seen.xp
    first = first_in_batch(xp, h1, h2, eligible)
    fidx = xp.flatnonzero(first)
    f1, f2 = xp.ascontiguousarray(h1[fidx]), xp.ascontiguousarray(h2[fidx])
    present = seen.query(f1, f2)          # step 2: read only
    new = xp.flatnonzero(~present)
    seen.insert(xp.ascontiguousarray(f1[new]), xp.ascontiguousarray(f2[new]))  # step 3: write only
    removed = xp.asarray(eligible, dtype=bool).copy()
    removed[fidx[new]] = False
    return removed


# ----------------------------------------------------------------------------------------------------
# Measured false positives (seed 002 §21.3.1: "run a random sample of discarded items through an exact
# hash-set lookup")
# ----------------------------------------------------------------------------------------------------

_MIX = np.uint64(0x9E3779B97F4A7C15)  # splitmix64's odd constant: the sample is a hash of the key, not h1 or h2


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of a binomial rate k / n (95% by default); (0, 1) when n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (0.0 if k == 0 else max(0.0, c - h)), (1.0 if k == n else min(1.0, c + h))


class FpAudit:
    """The decisions of a sample of keys replayed against exact sets, to measure the Bloom seen-set's false
    positives where they happen: in the units it removes.

    A key (h1, h2) is sampled when z <= fraction * 2^64, z = splitmix-style mix of h1 ^ h2 (every copy of a key
    is sampled alike, so the exact sets see each sampled key's whole history and hold only the sample: 16 bytes
    per sampled distinct key). ``check`` compares the run's removals with the exact rule's over the sampled
    eligible units: a *false removal* is a unit the run removed and the exact rule keeps (keep-first: a first
    occurrence the filter reported seen; remove-all: a unit whose key occurs once, reported repeated by either
    filter). The measured rate is false removals / the sampled units the exact rule keeps, with a 95% Wilson
    interval; ``missed`` (removed by the exact rule, kept by the run) is 0 for a Bloom filter (no false
    negatives) and is recorded as a check."""

    def __init__(self, fraction: float, cfg: BloomConfig, device: str = "cpu") -> None:
        if not 0.0 < fraction <= 1.0:
            raise ConfigError(f"FpAudit needs a sample fraction in (0, 1], got {fraction!r}")
        import dataclasses

        exact = dataclasses.replace(cfg, mode="exact", on_overflow="warn")
        self.fraction, self.device = fraction, device
        self.xp = array_module(device)
        self.threshold = np.uint64(min(int(fraction * 2.0 ** 64), 2 ** 64 - 1))
        self.seen, self.repeated = ExactSet(exact, device), ExactSet(exact, device)
        self.sampled_units = self.kept_units = self.false_removals = self.missed = 0

    def sampled(self, h1: Any, h2: Any) -> Any:
        """bool (n,): the keys of the sample."""
        z = (h1 ^ h2) * _MIX
        z = z ^ (z >> np.uint64(29))
        return z <= self.threshold

    def count(self, h1: Any, h2: Any, eligible: Any) -> None:
        """remove-all's first pass, exactly, over the sampled keys: which occur more than once."""
        s = self.xp.asarray(eligible, dtype=bool) & self.sampled(h1, h2)
        rep = keep_first(self.seen, h1, h2, s)
        keep_first(self.repeated, h1, h2, rep)

    def check(self, h1: Any, h2: Any, eligible: Any, removed: Any, action: str) -> None:
        """Compare one batch's ``removed`` (bool (n,)) with the exact rule over the sampled eligible keys."""
        xp = self.xp
        s = xp.asarray(eligible, dtype=bool) & self.sampled(h1, h2)
        if action == "keep-first":
            truth = keep_first(self.seen, h1, h2, s)
        else:
            truth = self.repeated.query(h1, h2) & s
        kept = s & ~truth
        self.sampled_units += int(s.sum())
        self.kept_units += int(kept.sum())
        self.false_removals += int((kept & removed).sum())
        self.missed += int((truth & ~removed).sum())

    def stats(self, cfg: BloomConfig, action: str, expected: list[float | None]) -> dict[str, Any]:
        """The measurement next to its target: keep-first's target is the filter's fp_rate; remove-all's is
        1 - (1 - p)^2 (two filters, either can report a unique key repeated). ``expected``: the filters'
        classical rates at their final item counts (an upper bound on the stream's average rate)."""
        target = cfg.fp_rate if action == "keep-first" else 1.0 - (1.0 - cfg.fp_rate) ** 2
        lo, hi = wilson_interval(self.false_removals, self.kept_units)
        rate = self.false_removals / self.kept_units if self.kept_units else None
        return {"sample_fraction": self.fraction, "sampling": "keys with mix(h1 ^ h2) <= fraction * 2^64",
                "mode": cfg.mode, "sampled_units": self.sampled_units, "units_kept_by_exact_rule": self.kept_units,
                "false_removals": self.false_removals, "missed_removals": self.missed,
                "measured_fp_rate": rate, "ci95": [lo, hi], "target_fp_rate": target,
                "expected_fp_rate_at_items": expected, "exceeds_target": lo > target,
                "exact_sample_bytes": self.seen.nbytes + self.repeated.nbytes}
