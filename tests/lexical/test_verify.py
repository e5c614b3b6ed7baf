"""verify.shingle_sets against Python: the sorted distinct XXH64 hashes of each document's shingles."""
import numpy as np
import pyarrow as pa
import pytest
import xxhash

from gpu_dedup.config import NormalizeConfig, ShingleConfig
from gpu_dedup.kernels.core_cpu import RADIX_MIN, SKETCH_GROUP
from gpu_dedup.lexical.verify import shingle_sets
from gpu_dedup.text.normalize import normalize_text


def _shingles(t: str, kind: str, n: int) -> set[bytes]:
    if kind == "word":
        w = t.split(" ") if t else []
        return {" ".join(w[j:j + n]).encode() for j in range(len(w) - n + 1)}
    return {t[j:j + n].encode() for j in range(len(t) - n + 1)}


@pytest.mark.parametrize("kind,n", [("word", 5), ("word", 1), ("char", 7)])
def test_sets_are_the_sorted_distinct_hashes(kind, n):
    rng = np.random.default_rng(4)
    vocab = ["alpha", "beta", "gamma", "δέλτα", "日本語", "x", "ﬁne", "z9"]
    texts = ["", "one two", "a b c d e " * 40, "x " * 500]  # empty, short, repeated shingles
    texts += [" ".join(rng.choice(vocab, int(k))) for k in rng.integers(0, 3 * RADIX_MIN, 2 * SKETCH_GROUP + 7)]
    texts += [" ".join(rng.choice(vocab + [str(i) for i in range(3000)], 2500))]
    norm = normalize_text(pa.array(texts, pa.large_string()), NormalizeConfig(), "cpu")
    docs = np.concatenate([np.arange(len(texts))[::-2], [3, 3]]).astype(np.int64)  # any order, repeats
    sets = shingle_sets(norm, docs, ShingleConfig(kind, n, seed=11))
    assert sets.hashes.shape[0] == int(sets.sizes.sum())  # compact: the repeats' room is gone
    for j, d in enumerate(docs.tolist()):
        want = sorted(xxhash.xxh64_intdigest(s, seed=11) for s in _shingles(norm.text(d), kind, n))
        assert sets.get(j).tolist() == want, (j, d)
        assert int(sets.offsets[j]) == int(sets.sizes[:j].sum())
