"""LSH: band keys, bucket grouping, chain edges, and the measured candidate rate vs the S-curve."""
import math

import numpy as np
import pytest

from gpu_dedup.config import LSHConfig, MinHashConfig
from gpu_dedup.lexical.lsh import band_keys, group_buckets
from gpu_dedup.lexical.minhash import signatures_from_hashes


def _mix(v: np.ndarray) -> np.ndarray:
    """A vectorized 64-bit finalizer (SplitMix64's) to turn item numbers into well-spread hashes."""
    with np.errstate(over="ignore"):
        z = v.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def test_group_buckets_runs_and_entries():
    keys = np.array([[1, 9], [2, 9], [1, 8], [3, 7], [1, 9]], np.uint64)
    bk = group_buckets(keys)
    # band 0: {0,2,4} share key 1; band 1: {0,1,4} share key 9
    assert bk.n_buckets == 2
    assert sorted(bk.bucket_size.tolist()) == [3, 3]
    members = {b: sorted(bk.entry_doc[bk.entry_bucket == b].tolist()) for b in range(bk.n_buckets)}
    assert sorted(members.values()) == [[0, 1, 4], [0, 2, 4]]
    assert np.diff(bk.doc_offsets).tolist() == [2, 1, 1, 0, 2]
    u, v = bk.chain_edges()
    assert sorted(zip(u.tolist(), v.tolist())) == [(0, 1), (0, 2), (1, 4), (2, 4)]


def test_giant_bucket_gives_linear_edges():
    keys = np.zeros((200_000, 2), np.uint64)
    bk = group_buckets(keys)
    u, v = bk.chain_edges()
    assert u.shape[0] == 199_999  # k-1 chain edges, deduplicated across the two bands
    assert bk.bucket_size.tolist() == [200_000, 200_000]


def test_band_keys_shape_and_equality():
    sig = np.array([[1, 2, 3, 4], [1, 2, 9, 9], [7, 2, 3, 4]], np.uint32)
    k = band_keys(sig, LSHConfig(2, 2))
    assert k.shape == (3, 2) and k.dtype == np.uint64
    assert k[0, 0] == k[1, 0] and k[0, 1] != k[1, 1] and k[0, 1] == k[2, 1] and k[0, 0] != k[2, 0]
    with pytest.raises(ValueError, match="cannot feed"):
        band_keys(sig, LSHConfig(3, 2))


@pytest.mark.slow
def test_candidate_rate_matches_s_curve_within_binomial_band():
    """Pairs of 200-item sets at J = (200-x)/(200+x): fraction with >= 1 equal band key vs
    1-(1-J^r)^b, each bin within 3 binomial standard deviations."""
    b, r, K, pairs = 20, 5, 100, 400
    xs = [10, 25, 40, 55, 70, 90, 120]
    hashes, offsets = [], [0]
    for bi, x in enumerate(xs):
        for t in range(pairs):
            base = (bi * pairs + t) * 10_000
            hashes.append(_mix(np.arange(base, base + 200)))
            hashes.append(_mix(np.arange(base + x, base + 200 + x)))
            offsets += [offsets[-1] + 200, offsets[-1] + 400]
    sig = signatures_from_hashes(np.concatenate(hashes), np.array(offsets), MinHashConfig(K, seed=3, width=32))
    keys = band_keys(sig, LSHConfig(b, r))
    cand = (keys[0::2] == keys[1::2]).any(axis=1).reshape(len(xs), pairs)
    for bi, x in enumerate(xs):
        s = (200 - x) / (200 + x)
        p = 1 - (1 - s**r) ** b
        sd = math.sqrt(max(p * (1 - p), 1e-12) / pairs)
        assert abs(cand[bi].mean() - p) <= 3 * sd + 1.0 / pairs, (s, cand[bi].mean(), p)
