"""Bloom filter / exact seen-set: sizing, pinned hash + index formula against an independent reference,
measured false-positive rate, capacity policy, order-deterministic keep-first, CPU == GPU (simulator); the
false-positive audit (FpAudit) exactly against a Python set and statistically against the filter's fill."""
import logging

import numpy as np
import pytest
import xxhash

from gpu_dedup.runtime.device import simulator, to_host
from gpu_dedup.paragraph.bloom import (
    SEED1,
    SEED2,
    BloomCapacityError,
    BloomConfig,
    BloomFilter,
    ExactSet,
    FpAudit,
    bloom_size,
    first_in_batch,
    item_hashes,
    keep_first,
    make_seen_set,
    wilson_interval,
)

sim_or_gpu = pytest.mark.skipif(not simulator() and not __import__("gpu_dedup.runtime.device", fromlist=["device"]).gpu_status()[0],
                                reason="needs the CUDA simulator or a GPU")


def test_sizing_golden_values():
    # m = ceil(-n ln p / ln2^2), k = round(m/n ln 2), by hand:
    # n=1000, p=0.01: 1000 * 4.605170 / 0.480453 = 9585.06 -> 9586; 9.586 * 0.693147 = 6.64 -> 7
    assert bloom_size(1000, 0.01) == (9586, 7)
    # n=200000, p=1e-3: 200000 * 6.907755 / 0.480453 = 2875517.5 -> 2875518; 14.3776 * 0.693147 = 9.97 -> 10
    assert bloom_size(200_000, 1e-3) == (2875518, 10)
    # n=50, p=0.05: 311.76 -> 312 bits (not a power of two); 6.24 * 0.693147 = 4.33 -> 4
    assert bloom_size(50, 0.05) == (312, 4)


@pytest.mark.parametrize("kwargs", [dict(expected_items=0), dict(fp_rate=0.0), dict(fp_rate=1.0),
                                    dict(seed=-1), dict(mode="bitmap"), dict(on_overflow="ignore"),
                                    dict(expected_items=10**15, fp_rate=1e-12)])
def test_config_validation(kwargs):
    with pytest.raises(ValueError):
        BloomConfig(**kwargs)


def _reference_bits(items, m, k, seed):
    """Independent reference: python xxhash + the declared formula with Python integers."""
    bits = np.zeros((m + 31) // 32, np.uint32)
    for it in items:
        b = it.encode()
        h1 = xxhash.xxh64_intdigest(b, SEED1 ^ seed)
        h2 = xxhash.xxh64_intdigest(b, SEED2 ^ seed)
        for i in range(k):
            g = (h1 % m + i * (1 + h2 % (m - 1))) % m
            bits[g >> 5] |= np.uint32(1 << (g & 31))
    return bits


@pytest.mark.parametrize("seed", [0, 12345])
def test_bits_match_reference_and_use_modulo(seed):
    cfg = BloomConfig(expected_items=50, fp_rate=0.05, seed=seed)
    bf = BloomFilter(cfg)
    assert (bf.m, bf.k) == (312, 4)
    items = [f"paragraph {i} é" for i in range(50)]
    bf.insert(*item_hashes(items, seed))
    ref = _reference_bits(items, bf.m, bf.k, seed)
    assert np.array_equal(bf.bits, ref)
    # indexes reach [256, 312): a power-of-two mask (the anchor's bug) would never set these bits
    high = np.unpackbits(bf.bits.view(np.uint8), bitorder="little")[256:]
    assert high[:312 - 256].any() and not high[312 - 256:].any()


def test_hashes_are_pinned_xxh64():
    h1, h2 = item_hashes(["abc", ""], seed=7)
    assert int(h1[0]) == xxhash.xxh64_intdigest(b"abc", SEED1 ^ 7)
    assert int(h2[1]) == xxhash.xxh64_intdigest(b"", SEED2 ^ 7)


def test_measured_false_positive_rate_within_2x():
    # n = 200k, p = 1e-3: about 200 false positives expected (sd ~14), so [p/2, 2p] is a +-7 sd window
    n, p = 200_000, 1e-3
    bf = BloomFilter(BloomConfig(expected_items=n, fp_rate=p))
    ins = np.arange(n, dtype="<u8")
    other = np.arange(n, 2 * n, dtype="<u8")
    h_in = item_hashes(_as_items(ins))
    h_q = item_hashes(_as_items(other))
    bf.insert(*h_in)
    assert bf.query(*h_in).all()  # never a false negative
    rate = bf.query(*h_q).mean()
    assert p / 2 <= rate <= 2 * p, rate
    s = bf.stats()
    assert s["items_inserted"] == n and not s["over_design"]
    assert p / 2 <= s["estimated_fp_rate_from_fill"] <= 2 * p


def _as_items(keys):
    import pyarrow as pa

    data = keys.view(np.uint8)
    off = np.arange(0, 8 * keys.shape[0] + 1, 8, dtype=np.int64)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), keys.shape[0], [None, pa.py_buffer(off),
                                                                                pa.py_buffer(data)])


def test_overflow_warns_once_and_refuse_mode_raises(caplog):
    items = item_hashes([f"x{i}" for i in range(30)])
    bf = BloomFilter(BloomConfig(expected_items=20, fp_rate=0.01))
    with caplog.at_level(logging.WARNING, logger="gpu_dedup.paragraph.bloom"):
        bf.insert(items[0][:15], items[1][:15])
        assert not caplog.records
        bf.insert(items[0][15:25], items[1][15:25])
        bf.insert(items[0][25:], items[1][25:])
    assert len([r for r in caplog.records if "design n=20" in r.getMessage()]) == 1
    assert bf.stats()["over_design"] and bf.items == 30
    strict = BloomFilter(BloomConfig(expected_items=20, fp_rate=0.01, on_overflow="refuse"))
    strict.insert(items[0][:20], items[1][:20])
    with pytest.raises(BloomCapacityError, match="expected_items"):
        strict.insert(items[0][20:21], items[1][20:21])
    assert strict.items == 20


def test_exact_set_handles_shared_high_words_and_many_runs():
    rng = np.random.default_rng(0)
    es = ExactSet(BloomConfig(expected_items=10_000, mode="exact"))
    seen: set[tuple[int, int]] = set()
    for b in range(12):  # several batches: runs merge
        h1 = rng.integers(0, 4, 200, dtype=np.uint64)  # tiny h1 range: equal h1, different h2
        h2 = rng.integers(0, 2**63, 200, dtype=np.uint64)
        q = es.query(h1, h2)
        assert q.tolist() == [(int(a), int(c)) in seen for a, c in zip(h1, h2)]
        new = ~q
        es.insert(h1[new], h2[new])
        seen.update(zip(h1[new].tolist(), h2[new].tolist()))
    assert es.items == len(seen) and len(es.runs) < 12 and es.nbytes == 16 * len(seen)
    for k1, k2 in es.runs:  # merged runs stay strictly increasing in (k1, k2)
        keys = list(zip(k1.tolist(), k2.tolist()))
        assert keys == sorted(set(keys))
    assert sorted(k for r in es.runs for k in zip(r[0].tolist(), r[1].tolist())) == sorted(seen)
    a1 = np.array([1, 1, 2], np.uint64)
    assert es.query(a1, np.array([2**63 + 5, 7, 9], np.uint64)).tolist() == [False, False, False]


def test_first_in_batch_marks_first_occurrences():
    h1 = np.array([5, 3, 5, 3, 9, 5], np.uint64)
    h2 = np.array([1, 1, 1, 2, 0, 1], np.uint64)
    elig = np.array([True, True, True, True, False, True])
    assert first_in_batch(np, h1, h2, elig).tolist() == [True, True, False, True, False, False]


def _keep_first_reference(stream):
    seen, out = set(), []
    for x in stream:
        out.append(x in seen)
        seen.add(x)
    return out


@pytest.mark.parametrize("mode", ["bloom", "exact"])
@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_keep_first_matches_sequential_reference(mode, batch):
    rng = np.random.default_rng(3)
    stream = [f"p{v}" for v in rng.integers(0, 150, 600)]
    h1, h2 = item_hashes(stream)
    seen = make_seen_set(BloomConfig(expected_items=1000, fp_rate=1e-12, mode=mode))
    removed = np.concatenate([keep_first(seen, h1[i:i + batch], h2[i:i + batch], np.ones(len(h1[i:i + batch]), bool))
                              for i in range(0, len(stream), batch)])
    assert removed.tolist() == _keep_first_reference(stream)
    assert seen.items == len(set(stream))


@sim_or_gpu
def test_cpu_and_gpu_bits_queries_and_keep_first_match():
    from gpu_dedup.runtime.device import to_device

    items = [f"item {i}" for i in range(300)] + [f"item {i}" for i in range(0, 300, 3)]
    hc = item_hashes(items, 1, "cpu")
    hg = item_hashes(items, 1, "cuda")
    assert all(np.array_equal(a, to_host(b)) for a, b in zip(hc, hg))
    for mode in ("bloom", "exact"):
        cfg = BloomConfig(expected_items=250, fp_rate=0.02, seed=1, mode=mode)
        sc, sg = make_seen_set(cfg, "cpu"), make_seen_set(cfg, "cuda")
        elig = np.ones(len(items), bool)
        rc = np.concatenate([keep_first(sc, hc[0][i:i + 100], hc[1][i:i + 100], elig[i:i + 100])
                             for i in range(0, len(items), 100)])
        rg = np.concatenate([to_host(keep_first(sg, hg[0][i:i + 100], hg[1][i:i + 100],
                                                to_device(elig[i:i + 100], "cuda")))
                             for i in range(0, len(items), 100)])
        assert np.array_equal(rc, rg)
        assert rc[300:].all()  # the repeats are removed
        if mode == "bloom":
            assert np.array_equal(sc.bits, to_host(sg.bits))


def _keys(lo, hi):
    return item_hashes(_as_items(np.arange(lo, hi, dtype="<u8")))


def test_fp_audit_counts_exactly_what_a_python_set_says():
    """Every key sampled (fraction 1): the audit's false removals are the first occurrences the filter removed,
    its kept units the first occurrences, by a Python set over the same stream."""
    rng = np.random.default_rng(11)
    stream = rng.integers(0, 3000, 6000).astype("<u8")
    h1, h2 = item_hashes(_as_items(stream))
    cfg = BloomConfig(expected_items=500, fp_rate=0.05)  # far too small: many false positives
    bf, audit = BloomFilter(cfg), FpAudit(1.0, cfg)
    seen, false, firsts = set(), 0, 0
    for i in range(0, stream.shape[0], 250):
        a, b = h1[i:i + 250], h2[i:i + 250]
        elig = np.ones(a.shape[0], bool)
        removed = keep_first(bf, a, b, elig)
        audit.check(a, b, elig, removed, "keep-first")
        for x, r in zip(stream[i:i + 250].tolist(), removed.tolist()):
            if x not in seen:
                firsts += 1
                false += r
            seen.add(x)
    st = audit.stats(cfg, "keep-first", [None])
    assert st["sampled_units"] == 6000 and st["units_kept_by_exact_rule"] == firsts == len(seen)
    assert st["false_removals"] == false > 100 and st["missed_removals"] == 0
    assert st["exceeds_target"]  # the measured rate is far over the 5% target: the filter is overfull


def test_fp_audit_sample_is_a_fraction_of_the_keys_and_every_copy_of_one():
    h1, h2 = _keys(0, 40_000)
    audit = FpAudit(0.25, BloomConfig())
    s = audit.sampled(h1, h2)
    # binomial(40000, 0.25): sd = 86.6; 5 sd
    assert abs(int(s.sum()) - 10_000) <= 5 * 86.6
    assert np.array_equal(audit.sampled(h1[::-1].copy(), h2[::-1].copy()), s[::-1])
    assert FpAudit(1.0, BloomConfig()).sampled(h1, h2).all()
    with pytest.raises(ValueError, match="fraction"):
        FpAudit(0.0, BloomConfig())


def test_fp_audit_measures_the_filters_rate_within_a_stated_tolerance():
    """Keys streamed in batches into a filter designed for them (n = 20,000 at p = 1%): a new key is a false
    positive with probability fill^k (the filter's measured bit fill before its batch, k = 7), so the count
    the audit measures is a sum of Bernoulli trials with a known mean and variance. Tolerance: 4 sd of that sum
    (normal approximation; about 44 expected, sd about 6.6). Then 20,000 fresh keys against the full filter:
    within 4 sd of fill^k, and the 95% interval holds the design target p."""
    n, p, batch = 20_000, 0.01, 500
    cfg = BloomConfig(expected_items=n, fp_rate=p)
    bf, audit = BloomFilter(cfg), FpAudit(1.0, cfg)
    h1, h2 = _keys(0, n)
    mean = var = 0.0
    for i in range(0, n, batch):
        q = bf.stats()["bits_set_fraction"] ** bf.k
        mean, var = mean + batch * q, var + batch * q * (1 - q)
        a, b = h1[i:i + batch], h2[i:i + batch]
        audit.check(a, b, np.ones(batch, bool), keep_first(bf, a, b, np.ones(batch, bool)), "keep-first")
    st = audit.stats(cfg, "keep-first", [bf.stats()["expected_fp_rate_at_items"]])
    assert st["units_kept_by_exact_rule"] == n and mean > 30
    assert abs(st["false_removals"] - mean) <= 4 * var ** 0.5, (st["false_removals"], mean, var ** 0.5)
    q = bf.stats()["bits_set_fraction"] ** bf.k
    fresh = FpAudit(1.0, cfg)
    f1, f2 = _keys(n, 2 * n)
    fresh.check(f1, f2, np.ones(n, bool), bf.query(f1, f2), "keep-first")
    st = fresh.stats(cfg, "keep-first", [None])
    assert abs(st["false_removals"] - n * q) <= 4 * (n * q * (1 - q)) ** 0.5
    lo, hi = st["ci95"]
    assert lo <= p <= hi and not st["exceeds_target"]


def test_wilson_interval_golden():
    # Wilson 95% for 10 of 100: (0.0552, 0.1744) (textbook value); 0 of n starts at 0; n = 0 is uninformative
    lo, hi = wilson_interval(10, 100)
    assert round(lo, 4) == 0.0552 and round(hi, 4) == 0.1744
    assert wilson_interval(0, 50)[0] == 0.0 and wilson_interval(0, 0) == (0.0, 1.0)
