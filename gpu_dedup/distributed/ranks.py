"""Exact order statistics of values spread over per-file tasks, from mergeable per-file summaries: what the filter's
global selections (a rank cut's threshold, DSIR's top-k, the percentiles of run.json and of the audit) need,
without gathering a column in the driver.

The order is (value, position): ``value`` a float64 (NaN never enters a population), ``position`` an int64, unique
across the files and increasing with them (a global row: the local engine's stable sorts break ties by input order,
which this is). Values are compared as ``sortable`` keys: the float's bits as a uint64 that sorts as the float does
(-0.0 as 0.0, as NumPy's sort treats them).

A ``Selection`` finds the elements of given ranks (0-based) in populations the caller names. The first round asks
every task for a histogram of the top ``DIGIT`` bits of its keys (a sparse one: the digits present and their counts),
which also gives each population's size, from which the caller's ranks are computed. Each later round narrows every
rank to the bin of ``DIGIT`` more bits that holds it (the counts below the bin are known), until the bin holds at
most ``FETCH`` elements: a last round fetches the bin's (key, position) pairs, sorted here. A bin of one key too
large to fetch (a tie of more than ``FETCH`` equal values) is resolved by each task's count of it, then the position
of the one element sought, by its index among the tied ones in its task. At most 64 / DIGIT + 3 rounds; two on small
data. The driver holds one merged histogram per bin sought and at most ``FETCH`` pairs at a time.

    sortable, float_of       the order-preserving uint64 key of a float64, and back
    Selection                the driver's state: ``requests()`` for the next round, ``merge(answers)`` of the
                             tasks' answers in file order, ``found`` (rank -> (value, position)) once ``done``
    summarize                a task's answers to one round's requests over its populations
    percentile_points, lerp  ``numpy.percentile``'s ranks and interpolation (method "linear"), so that percentiles
                             computed from order statistics equal ``np.percentile`` of the whole column bit for bit
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from ..errors import RunError

DIGIT = 16          # bits of the key narrowed per round
FETCH = 1 << 12     # a bin of at most this many elements is fetched whole (16 bytes each: 64 KiB a rank sought;
#                     1 << 16 gave the Ray filter's driver ~10 MiB more at 1 M documents, no faster: docs/scale.md)
_SIGN = np.uint64(1 << 63)


def sortable(values: np.ndarray) -> np.ndarray:
    """uint64 (n,): keys that sort as the float64 ``values`` do (no NaN; -0.0 keyed as 0.0)."""
    v = np.asarray(values, np.float64) + 0.0  # -0.0 + 0.0 == 0.0: NumPy's sort treats them as equal
    bits = v.view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def float_of(keys: Any) -> np.ndarray:
    """float64: the values of ``sortable`` keys."""
    k = np.asarray(keys, np.uint64)
    return np.where(k & _SIGN, k & ~_SIGN, ~k).view(np.float64)


def _shift(bits: int) -> np.uint64:
    return np.uint64(64 - bits)


def _in_bin(keys: np.ndarray, prefix: int, bits: int) -> np.ndarray:
    if bits == 0:
        return np.ones(keys.shape[0], bool)
    if bits >= 64:
        return keys == np.uint64(prefix)
    return (keys >> _shift(bits)) == (np.uint64(prefix) >> _shift(bits))


def summarize(pops: dict[str, tuple[np.ndarray, np.ndarray]], requests: Iterable[tuple], task: int) -> dict:
    """One task's answers to ``requests`` (``Selection.requests``) over its populations ``pops``: name ->
    (keys uint64 (m,), positions int64 (m,), in position order); ``task``: its index (the file's). Answers:

        ("hist", pop, prefix, bits)   (digits uint64, counts int64): the next DIGIT bits of the keys in the bin
        ("fetch", pop, prefix, bits)  (keys uint64, positions int64) of the keys in the bin
        ("count", pop, key)           how many keys equal ``key``
        ("nth", pop, key, task, t)    the position of the t-th key equal to ``key`` (only task ``task`` answers)
    """
    out: dict = {}
    for req in requests:
        kind, pop = req[0], req[1]
        keys, pos = pops.get(pop, (np.zeros(0, np.uint64), np.zeros(0, np.int64)))
        if kind == "hist":
            _, _, prefix, bits = req
            d = (keys[_in_bin(keys, prefix, bits)] >> np.uint64(64 - bits - DIGIT)) & np.uint64((1 << DIGIT) - 1)
            digits, counts = np.unique(d, return_counts=True)
            out[req] = (digits.astype(np.uint64), counts.astype(np.int64))
        elif kind == "fetch":
            mask = _in_bin(keys, req[2], req[3])
            out[req] = (keys[mask], pos[mask])
        elif kind == "count":
            out[req] = int(np.count_nonzero(keys == np.uint64(req[2])))
        elif kind == "nth" and req[3] == task:
            out[req] = int(pos[keys == np.uint64(req[2])][req[4]])
    return out


@dataclass
class _Seek:
    """One rank being sought: the bin (``prefix``'s top ``bits``) that holds it and the elements below the bin."""

    pop: str
    rank: int
    prefix: int = 0
    bits: int = 0
    below: int = 0
    phase: str = "hist"   # hist -> (fetch | count -> nth) -> done
    key: int = 0
    nth: tuple | None = None


@dataclass
class Selection:
    """Elements of given ranks in named populations (module docstring). ``ranks``: population -> a function of
    its size m giving the ranks sought (each in 0..m-1). After ``done``: ``sizes`` (population -> m) and
    ``found`` ((population, rank) -> (value float64, position int))."""

    ranks: dict[str, Callable[[int], Iterable[int]]]
    sizes: dict[str, int] = field(default_factory=dict)
    found: dict[tuple[str, int], tuple[float, int]] = field(default_factory=dict)
    _seeks: list[_Seek] = field(default_factory=list)
    _first: bool = True
    rounds: int = 0

    @property
    def done(self) -> bool:
        return not self._first and all(s.phase == "done" for s in self._seeks)

    def requests(self) -> list[tuple]:
        """The next round's requests (every task answers them with ``summarize``)."""
        if self._first:
            return [("hist", pop, 0, 0) for pop in self.ranks]
        reqs = []
        for s in self._seeks:
            if s.phase in ("hist", "fetch"):
                reqs.append((s.phase, s.pop, s.prefix, s.bits))
            elif s.phase == "count":
                reqs.append(("count", s.pop, s.key))
            elif s.phase == "nth":
                reqs.append(("nth", s.pop, s.key) + s.nth)
        return list(dict.fromkeys(reqs))

    def merge(self, answers: Iterable[dict]) -> None:
        """Take one round's answers (every task's ``summarize``, in file order: a generator is fine, each is
        folded as it comes) and narrow every rank sought."""
        reqs = self.requests()
        hist: dict[tuple, dict[int, int]] = {r: {} for r in reqs if r[0] == "hist"}
        fetched: dict[tuple, list] = {r: [] for r in reqs if r[0] == "fetch"}
        counts: dict[tuple, list[int]] = {r: [] for r in reqs if r[0] == "count"}
        nth: dict[tuple, int] = {}
        for a in answers:
            for r, got in a.items():
                if r[0] == "hist":
                    h = hist[r]
                    for d, c in zip(got[0].tolist(), got[1].tolist()):
                        h[d] = h.get(d, 0) + c
                elif r[0] == "fetch":
                    fetched[r].append(got)
                elif r[0] == "count":
                    counts[r].append(got)
                else:
                    nth[r] = got
        self.rounds += 1
        if self._first:
            self._first = False
            for pop, rank_of in self.ranks.items():
                m = self.sizes[pop] = sum(hist[("hist", pop, 0, 0)].values())
                self._seeks += [_Seek(pop, int(r)) for r in dict.fromkeys(rank_of(m))]
        for s in self._seeks:
            if s.phase == "hist":
                self._narrow(s, hist[("hist", s.pop, s.prefix, s.bits)])
            elif s.phase == "fetch":
                keys = np.concatenate([k for k, _ in fetched[("fetch", s.pop, s.prefix, s.bits)]])
                pos = np.concatenate([p for _, p in fetched[("fetch", s.pop, s.prefix, s.bits)]])
                i = np.lexsort((pos, keys))[s.rank - s.below]
                self._found(s, int(keys[i]), int(pos[i]))
            elif s.phase == "count":
                c = np.cumsum(counts[("count", s.pop, s.key)])
                task = int(np.searchsorted(c, s.rank - s.below, side="right"))
                s.nth, s.phase = (task, s.rank - s.below - (int(c[task - 1]) if task else 0)), "nth"
            elif s.phase == "nth":
                self._found(s, s.key, nth[("nth", s.pop, s.key) + s.nth])

    def _narrow(self, s: _Seek, h: dict[int, int]) -> None:
        if not 0 <= s.rank < self.sizes[s.pop]:
            raise RunError(f"rank {s.rank} is outside population {s.pop!r} of {self.sizes[s.pop]}: a bug of the "
                           "selection's caller")
        digits = sorted(h)
        cum = np.cumsum([h[d] for d in digits])
        j = int(np.searchsorted(cum, s.rank - s.below, side="right"))
        s.below += int(cum[j - 1]) if j else 0
        s.prefix |= digits[j] << (64 - s.bits - DIGIT)
        s.bits += DIGIT
        in_bin = h[digits[j]]
        if in_bin <= FETCH:
            s.phase = "fetch"
        elif s.bits >= 64:
            s.key, s.phase = s.prefix, "count"

    def _found(self, s: _Seek, key: int, position: int) -> None:
        self.found[(s.pop, s.rank)] = (float(float_of(np.array([key], np.uint64))[0]), position)
        s.phase = "done"


def percentile_points(n: int, q: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower rank, upper rank, gamma) of ``np.percentile(a, q)`` (method "linear") over ``n`` values: the ranks
    (0-based, in sorted order) of the two values it interpolates, and the weight, computed as NumPy computes them."""
    quantiles = np.true_divide(np.asanyarray(q, np.float64), 100)
    virtual = (n - 1) * quantiles
    prev = np.floor(virtual)
    nxt = prev + 1
    above = virtual >= n - 1
    prev[above], nxt[above] = -1, -1  # NumPy's "the last value", whose index -1 also enters gamma
    below = virtual < 0
    prev[below], nxt[below] = 0, 0
    gamma = np.asanyarray(virtual - prev)
    lo, hi = prev.astype(np.int64), nxt.astype(np.int64)
    return np.where(lo < 0, n + lo, lo), np.where(hi < 0, n + hi, hi), gamma


def lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """NumPy's percentile interpolation of ``a`` (the lower values) and ``b`` (the upper) by ``t``, the same
    operations in the same order (so the same bits)."""
    a, b, t = (np.asarray(x, np.float64) for x in (a, b, t))
    diff = b - a
    out = np.add(a, diff * t)
    np.subtract(b, diff * (1 - t), out=out, where=t >= 0.5)
    return out
