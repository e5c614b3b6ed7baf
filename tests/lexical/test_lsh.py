"""LSH: band keys, bucket grouping, chain edges, and the measured candidate rate vs the S-curve."""

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


def _candidate_rates(family: str, size: int, xs: list[int], pairs: int, b: int = 20, r: int = 5, K: int = 100):
    """Pairs of ``size``-item sets at J = (size-x)/(size+x), ``pairs`` per x: (J per x, the fraction of pairs with
    >= 1 equal band key per x, the S-curve 1-(1-J^r)^b per x, its binomial standard deviation per x)."""
    hashes, offsets = [], [0]
    for bi, x in enumerate(xs):
        for t in range(pairs):
            base = (bi * pairs + t) * 10_000
            hashes.append(_mix(np.arange(base, base + size)))
            hashes.append(_mix(np.arange(base + x, base + size + x)))
            offsets += [offsets[-1] + size, offsets[-1] + 2 * size]
    sig = signatures_from_hashes(np.concatenate(hashes), np.array(offsets),
                                 MinHashConfig(K, seed=3, width=32, family=family))
    keys = band_keys(sig, LSHConfig(b, r))
    cand = (keys[0::2] == keys[1::2]).any(axis=1).reshape(len(xs), pairs).mean(axis=1)
    j = np.array([(size - x) / (size + x) for x in xs])
    p = 1 - (1 - j**r) ** b
    sd = np.sqrt(np.maximum(p * (1 - p), 1e-12) / pairs)
    return j, cand, p, sd


@pytest.mark.slow
@pytest.mark.parametrize("family", ["exact", "fss"])
def test_candidate_rate_matches_s_curve_within_binomial_band(family):
    """Pairs of 200-item sets (more items than K = 100 positions) at J = (200-x)/(200+x): fraction with >= 1
    equal band key vs 1-(1-J^r)^b, each bin within 3 binomial standard deviations, for both families."""
    pairs = 400
    j, cand, p, sd = _candidate_rates(family, 200, [10, 25, 40, 55, 70, 90, 120], pairs)
    for i in range(len(j)):
        assert abs(cand[i] - p[i]) <= 3 * sd[i] + 1.0 / pairs, (family, j[i], cand[i], p[i])


@pytest.mark.slow
@pytest.mark.parametrize("family", ["exact", "fss"])
def test_candidate_rate_of_short_sets_is_never_worse_than_the_s_curve(family):
    """Sets of 30 items, fewer than K = 100 positions: most fss buckets come from the rounds' few shingles or from
    the fill. The exact family follows the S-curve within 3 binomial standard deviations. The fss family's
    positions agree with probability J as well, but they are negatively correlated (its estimator's variance is
    about half of K permutations', test_minhash.py), so its S-curve is steeper: measured 2,000 pairs per bin, +2 to
    +3 sd above the curve at J = 0.58-0.76 and -1.7 sd below at 0.43 (2026-12-04). Asserted for it: never below
    the curve (beyond 3 sd) where a duplicate must be found (J >= 0.5), never above it where a candidate is a
    wasted check (J < 0.5)."""
    pairs = 1000
    j, cand, p, sd = _candidate_rates(family, 30, [1, 2, 3, 4, 6, 8, 12, 16], pairs)
    for i in range(len(j)):
        tol = 3 * sd[i] + 1.0 / pairs
        if family == "exact":
            assert abs(cand[i] - p[i]) <= tol, (j[i], cand[i], p[i])
        elif j[i] >= 0.5:
            assert cand[i] >= p[i] - tol, (j[i], cand[i], p[i])
        else:
            assert cand[i] <= p[i] + tol, (j[i], cand[i], p[i])


@pytest.mark.parametrize("family", ["fss", "exact"])
def test_both_families_decide_as_the_exact_all_pairs_reference_on_labelled_corpora(family):
    """Issue 38 item 1: the family decides recall only (candidates are verified on the exact sets), and the
    default family's decisions equal the exact all-pairs greedy reference (gpu_dedup.testing.reference) on the
    labelled corpora: exact and near copies at every edit rate, chained template families, short documents;
    nothing removed without a kept document at J >= 0.8 and no kept pair at J >= 0.8."""
    import gpu_dedup
    from gpu_dedup.config import RunConfig
    from gpu_dedup.testing import evalcorpus, reference

    for seed in (0, 1):
        table = evalcorpus.make_corpus(800, seed, mean_words=150, template_families=4)
        texts = table.column("text").to_pylist()
        sets = reference.shingle_sets(texts)
        pairs = reference.exact_pairs(sets, 0.5)
        want = reference.greedy_reference(sets, 0.8, texts=texts, pairs=pairs)
        cfg = RunConfig(progress=False, minhash=MinHashConfig(family=family))
        dec = gpu_dedup.deduplicate(table.select(["id", "text"]), cfg).decisions
        assert dec.column("id").to_pylist() == table.column("id").to_pylist()
        keep = np.asarray(dec.column("keep").to_pylist(), bool)
        score = reference.evaluate(keep, sets, pairs, 0.8, texts=texts)
        assert (score["lost@theta"], score["residual@theta"]) == (0, 0), (family, seed, score)
        assert np.array_equal(keep, want), (family, seed, int((keep != want).sum()))
        assert 100 < score["removed"] < 200  # the corpus has duplicates to find
