"""MinHash: exactness against a Python big-int reference, parameters, and the estimator's statistics."""
import math

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from gpu_dedup.config import MinHashConfig, NormalizeConfig, ShingleConfig
from gpu_dedup.lexical.minhash import compute_signatures, permutation_params, signatures_from_hashes, splitmix64
from gpu_dedup.text.normalize import normalize_text

P = (1 << 61) - 1


def reference_signature(shingles: set[bytes], a, b, seed: int, width: int) -> list[int]:
    hs = [xxhash.xxh64_intdigest(s, seed=seed) for s in shingles]
    mask = (1 << width) - 1 if width == 32 else (1 << 64) - 1
    return [min((int(ak) * h + int(bk)) % P for h in hs) & mask for ak, bk in zip(a, b)]


def test_splitmix64_known_values():
    # SplitMix64 from state 0: first outputs (public reference values)
    state, x = splitmix64(0)
    assert x == 0xE220A8397B1DCDAF
    state, x = splitmix64(state)
    assert x == 0x6E789E6AA1B965F4


def test_params_are_in_range_prefix_stable_and_seeded():
    a, b = permutation_params(MinHashConfig(num_perm=64, seed=7))
    assert ((a >= 1) & (a < P)).all() and (b < P).all()
    a2, b2 = permutation_params(MinHashConfig(num_perm=128, seed=7))
    assert (a2[:64] == a).all() and (b2[:64] == b).all()
    a3, _ = permutation_params(MinHashConfig(num_perm=64, seed=8))
    assert not (a3 == a).any()


@pytest.mark.parametrize("kind,n,width", [("word", 5, 32), ("word", 3, 64), ("char", 4, 32), ("char", 24, 64)])
def test_signatures_equal_big_int_reference(kind, n, width):
    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "délta", "εψιλον", "日本", "z", "quite-long-word", "x1"]
    texts = [" ".join(rng.choice(words, rng.integers(n, 60))) for _ in range(40)]
    norm = normalize_text(pa.array(texts, pa.large_string()), NormalizeConfig())
    mh = MinHashConfig(num_perm=16, seed=11, width=width)
    sh = ShingleConfig(kind, n, seed=99)
    sig = compute_signatures(norm, sh, mh)
    a, b = permutation_params(mh)
    for i in range(len(texts)):
        t = norm.text(i)
        if kind == "word":
            w = t.split(" ")
            shingles = {" ".join(w[j:j + n]).encode() for j in range(len(w) - n + 1)}
        else:
            shingles = {t[j:j + n].encode() for j in range(len(t) - n + 1)}
        assert sig.nshingles[i] == (len(t.split(" ")) if kind == "word" else len(t)) - n + 1
        assert sig.values[i].tolist() == reference_signature(shingles, a, b, 99, width)


def test_short_documents_have_no_shingles_and_are_flagged():
    norm = normalize_text(pa.array(["one two", "", "a b c d e"], pa.large_string()), NormalizeConfig())
    sig = compute_signatures(norm, ShingleConfig("word", 5), MinHashConfig(8))
    assert sig.nshingles.tolist() == [0, 0, 1]


def test_word_order_matters():
    norm = normalize_text(pa.array(["a b c d e", "e d c b a"], pa.large_string()), NormalizeConfig())
    sig = compute_signatures(norm, ShingleConfig("word", 5), MinHashConfig(32))
    assert not (sig.values[0] == sig.values[1]).all()


def _set_pair(x: int, base: int) -> tuple[np.ndarray, np.ndarray]:
    """Sets of 100 items with x replaced: J = (100 - x) / (100 + x)."""
    a = np.arange(base, base + 100, dtype=np.uint64)
    b = np.arange(base + x, base + 100 + x, dtype=np.uint64)
    mix = lambda v: np.array([xxhash.xxh64_intdigest(int(t).to_bytes(8, "little")) for t in v], np.uint64)
    return mix(a), mix(b)


@pytest.mark.parametrize("x", [10, 25, 50])
def test_estimator_mean_and_spread_match_theory(x):
    """Over T independent trials the matching fraction has mean J (within 3 SE of the mean) and a
    standard deviation within 15% of sqrt(J(1-J)/K)."""
    J = (100 - x) / (100 + x)
    K, T = 64, 400
    hashes, offsets = [], [0]
    for t in range(T):
        ha, hb = _set_pair(x, base=t * 1000)
        hashes += [ha, hb]
        offsets += [offsets[-1] + 100, offsets[-1] + 200]
    sig = signatures_from_hashes(np.concatenate(hashes), np.array(offsets), MinHashConfig(K, seed=5, width=64))
    frac = (sig[0::2] == sig[1::2]).mean(axis=1)
    se_trial = math.sqrt(J * (1 - J) / K)
    assert abs(frac.mean() - J) < 3 * se_trial / math.sqrt(T)
    assert abs(frac.std(ddof=1) / se_trial - 1) < 0.15
