"""The CUDA kernels (kernels/core_cuda.py) against the CPU kernels, run under Numba's CUDA simulator.

conftest.py turns the simulator on when no real GPU is requested; with a real GPU
(GPU_DEDUP_REAL_GPU=1) the same tests run on the device. Inputs are small: the simulator executes
every GPU thread in Python.
"""
import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.config import LSHConfig, MinHashConfig, NormalizeConfig, ShingleConfig
from gpu_dedup.runtime.device import simulator, to_device, to_host
from gpu_dedup.lexical.exact import exact_hashes
from gpu_dedup.lexical.lsh import band_keys, group_buckets
from gpu_dedup.lexical.minhash import compute_signatures
from gpu_dedup.text.normalize import normalize_text
from gpu_dedup.lexical.verify import jaccard, shingle_sets

pytestmark = pytest.mark.skipif(not simulator() and not __import__("gpu_dedup.runtime.device", fromlist=["device"]).gpu_status()[0],
                                reason="needs the CUDA simulator or a GPU")

TEXTS = ["The quick brown fox jumps over the lazy dog again and again",
         "the QUICK brown fox jumps over the lazy dog again and again!",
         "Straße café naïve 日本語 テキスト ﬁne ① — with    spaces\tand\nlines",
         "", "one two", "ΣΊΣΥΦΟΣ σοφός и русский текст тоже здесь есть",
         "x " * 30, "emoji 👩\u200d💻 zero\u200bwidth soft\u00adhyphen tail words here"]


def _both(fn):
    cpu = fn("cpu")
    gpu = fn("cuda")
    return cpu, gpu


@pytest.mark.parametrize("cfg", [NormalizeConfig(), NormalizeConfig(True, True)])
def test_normalize_and_exact_hashes_match(cfg):
    arr = pa.array(TEXTS, pa.large_string())
    c, g = _both(lambda d: normalize_text(arr, cfg, d))
    assert np.array_equal(c.data, to_host(g.data)) and np.array_equal(c.offsets, to_host(g.offsets))
    assert np.array_equal(c.words, to_host(g.words)) and np.array_equal(c.codepoints, to_host(g.codepoints))
    assert np.array_equal(exact_hashes(c, "cpu"), to_host(exact_hashes(g, "cuda")))


@pytest.mark.parametrize("family", ["exact", "fss"])
@pytest.mark.parametrize("kind,n,width", [("word", 5, 32), ("word", 2, 64), ("char", 6, 32)])
def test_signatures_and_band_keys_match(kind, n, width, family, monkeypatch):
    """Both families. fss: documents of 1 to ~200 shingles for K = 16, so that some fill every bucket in round 0,
    some in a later round, and some leave buckets to the fill; CHUNK = 7 spreads them over several blocks."""
    from gpu_dedup.kernels import core_cuda as kc

    monkeypatch.setattr(kc, "CHUNK", 7)  # force long documents across several blocks (atomic-min merge)
    rng = np.random.default_rng(1)
    words = ["alpha", "beta", "gamma", "délta", "日本", "z"]
    texts = TEXTS + [" ".join(rng.choice(words, 40)) for _ in range(3)] + [
        " ".join(f"w{i}" for i in range(m)) for m in (6, 9, 14, 25, 60)]
    arr = pa.array(texts, pa.large_string())
    sh, mh, lsh = ShingleConfig(kind, n), MinHashConfig(16, 3, width, family), LSHConfig(4, 4)
    c, g = _both(lambda d: compute_signatures(normalize_text(arr, NormalizeConfig(), d), sh, mh, device=d))
    assert np.array_equal(c.nshingles, to_host(g.nshingles))
    long = c.nshingles > 0
    assert np.array_equal(c.values[long], to_host(g.values)[long])
    assert np.array_equal(band_keys(c.values, lsh, "cpu")[long], to_host(band_keys(g.values, lsh, "cuda"))[long])


def test_shingle_sets_and_jaccard_match():
    arr = pa.array(TEXTS, pa.large_string())
    docs = np.array([0, 1, 2, 5, 7], np.int64)
    sh = ShingleConfig("word", 2)
    c = shingle_sets(normalize_text(arr, NormalizeConfig(), "cpu"), docs, sh, "cpu")
    g = shingle_sets(normalize_text(arr, NormalizeConfig(), "cuda"), to_device(docs, "cuda"), sh, "cuda")
    for j in range(len(docs)):
        assert np.array_equal(c.get(j), to_host(g.get(j)))
    left, right = np.array([0, 0, 1, 3]), np.array([1, 2, 4, 3])
    assert np.array_equal(jaccard(c, left, right, "cpu"),
                          to_host(jaccard(g, to_device(left, "cuda"), to_device(right, "cuda"), "cuda")))
    # host index arrays are accepted too: copied to the device explicitly inside (CuPy would refuse them
    # in ascontiguousarray)
    assert np.array_equal(jaccard(c, left, right, "cpu"), to_host(jaccard(g, left, right, "cuda")))


def test_components_and_representatives_match():
    from gpu_dedup.lexical.policy import components_policy, connected_components, representative_policy
    from gpu_dedup.lexical.verify import ShingleSets

    rng = np.random.default_rng(2)
    m = 60
    u, v = rng.integers(0, m, 40), rng.integers(0, m, 40)
    du, dv = to_device(u, "cuda"), to_device(v, "cuda")
    assert np.array_equal(connected_components(m, u, v, "cpu"), to_host(connected_components(m, du, dv, "cuda")))
    base = [set(rng.integers(0, 40, 30).tolist()) for _ in range(m)]
    arrs = [np.array(sorted(s), np.uint64) for s in base]
    sizes = np.array([a.shape[0] for a in arrs], np.int64)
    sets = ShingleSets(np.concatenate(arrs), np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64), sizes)
    keys = rng.integers(0, 4, (m, 3)).astype(np.uint64)
    rank = rng.permutation(m).astype(np.int64)
    dsets = ShingleSets(*(to_device(a, "cuda") for a in (sets.hashes, sets.offsets, sets.sizes)))
    dkeys, drank = to_device(keys, "cuda"), to_device(rank, "cuda")
    for theta in (0.3, 0.5):
        c = representative_policy(group_buckets(keys), sets, rank, theta, 1000, "cpu")
        g = representative_policy(group_buckets(dkeys), dsets, drank, theta, 1000, "cuda")
        assert np.array_equal(c.rep, to_host(g.rep)) and np.allclose(c.jaccard, to_host(g.jaccard), equal_nan=True)
        c = components_policy(group_buckets(keys), rank, theta, sets, "cpu")
        g = components_policy(group_buckets(dkeys), drank, theta, dsets, "cuda")
        assert np.array_equal(c.rep, to_host(g.rep))

# The whole pipeline on the simulated GPU (every preset, index, budget, CLI) is in test_strict_pipeline.py.


# ---------------------------------------------------------------- cooperative text kernels: every cut
# The GPU cuts documents into chunks of bounded bytes (kernels/core_cuda.py). With tiny chunks every byte
# position becomes a cut, so these tests reach each case of the cut logic: a cut inside a multi-byte
# codepoint, inside a run of spaces, inside a run of deleted (format) characters, at the trailing space.
SHORT_CUTS = ["a\u200b\u200b\u200b\u200b", "a    ", "   a", "  ", "a \u200b \u200bb", "ß", "日本 語", "x,  y .z!",
              "A\u0301 Ⅻ ﬁ 😀\t\n 1,2", "\u200b\u200b", "é" * 5 + "  " + "b" * 9, TEXTS[2]]
CUT_TEXTS = SHORT_CUTS + TEXTS


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
@pytest.mark.parametrize("cfg", [NormalizeConfig(), NormalizeConfig(True, True)])
def test_normalization_chunks_cut_anywhere(cfg, chunk, monkeypatch):
    from gpu_dedup.kernels import core_cuda as kc

    monkeypatch.setattr(kc, "NORM_CHUNK", chunk)
    arr = pa.array(CUT_TEXTS, pa.large_string())
    c, g = _both(lambda d: normalize_text(arr, cfg, d))
    assert np.array_equal(c.offsets, to_host(g.offsets))
    assert np.array_equal(c.data, to_host(g.data))
    assert np.array_equal(c.words, to_host(g.words)) and np.array_equal(c.codepoints, to_host(g.codepoints))


@pytest.mark.parametrize("chunk,threads", [(2, 8), (4096, 128)])
def test_unit_starts_match_a_python_walk(chunk, threads, monkeypatch):
    from gpu_dedup.kernels import _launch
    from gpu_dedup.ops import core
    from gpu_dedup.ops.core import unit_starts

    monkeypatch.setattr(core, "UNIT_CHUNK", chunk)
    monkeypatch.setattr(_launch, "SIM_THREADS", threads)  # the launch geometry changes nothing
    norm = normalize_text(pa.array(SHORT_CUTS, pa.large_string()), NormalizeConfig(), "cuda")
    data, offsets = to_host(norm.data).tobytes(), to_host(norm.offsets)
    for kind_char in (False, True):
        ubase, units = (to_host(x) for x in unit_starts("cuda", norm, kind_char))
        for i in range(len(SHORT_CUTS)):
            s, e = int(offsets[i]), int(offsets[i + 1])
            if kind_char:  # the first byte of each codepoint
                sizes = [len(ch.encode("utf-8")) for ch in data[s:e].decode("utf-8")]
                starts = (s + np.cumsum([0] + sizes[:-1])).tolist() if sizes else []
            else:  # the first byte, and the byte after each space
                starts = ([s] if e > s else []) + [j + 1 for j in range(s, e) if data[j] == 0x20]
            assert units[ubase[i]:ubase[i + 1]].tolist() == starts, (i, kind_char)


def test_unit_chunks_refuses_a_chunk_larger_than_its_shared_tile(monkeypatch):
    """The tile is a compile-time constant (the machine code is cached): a larger orchestration chunk
    would write past it on a GPU, so the launch refuses it (review P0-2)."""
    from gpu_dedup.constants import BYTE_TILE
    from gpu_dedup.kernels import core_cuda as kc
    from gpu_dedup.ops import core

    assert kc.BYTE_TILE == BYTE_TILE and core.UNIT_CHUNK == BYTE_TILE
    monkeypatch.setattr(core, "UNIT_CHUNK", BYTE_TILE + 1)
    norm = normalize_text(pa.array(["a b"], pa.large_string()), NormalizeConfig(), "cuda")
    with pytest.raises(ValueError, match="UNIT_CHUNK=4097"):
        core.unit_starts("cuda", norm, False)

@pytest.mark.parametrize("threads", [8, 12, 32])
def test_exact_hashes_equal_xxhash_at_every_stripe_boundary(threads, monkeypatch):
    import xxhash
    from gpu_dedup.kernels import _launch
    from gpu_dedup.kernels.core import EXACT_SEED_HI, EXACT_SEED_LO

    from gpu_dedup.text.normalize import Normalized

    monkeypatch.setattr(_launch, "SIM_THREADS", threads)  # stripes per step: threads / 4

    lengths = [0, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 65, 255, 256, 257, 288, 1000]
    rng = np.random.default_rng(5)
    docs = [rng.integers(97, 123, k, dtype=np.uint8).tobytes() for k in lengths]
    data = np.frombuffer(b"".join(docs), np.uint8)
    offsets = np.cumsum([0] + lengths).astype(np.int64)
    zeros = np.zeros(len(docs), np.int64)
    norm = Normalized(to_device(data, "cuda"), to_device(offsets, "cuda"), to_device(zeros, "cuda"),
                      to_device(zeros, "cuda"))
    got = to_host(exact_hashes(norm, "cuda"))
    expected = [[xxhash.xxh64_intdigest(d, seed=int(EXACT_SEED_LO)), xxhash.xxh64_intdigest(d, seed=int(EXACT_SEED_HI))]
                for d in docs]
    assert got.tolist() == expected


def test_signatures_at_the_largest_num_perm_match():
    """K = MAX_NUM_PERM (9000): every thread of the MinHash block keeps up to MAX_K_PER_THREAD (72) minima."""
    from gpu_dedup.constants import MAX_NUM_PERM
    from gpu_dedup.kernels import core_cuda as kc

    assert kc.TILE * kc.MAX_K_PER_THREAD >= MAX_NUM_PERM
    arr = pa.array(["alpha beta gamma delta epsilon zeta", "one two three"], pa.large_string())
    sh, mh = ShingleConfig("word", 2), MinHashConfig(MAX_NUM_PERM, 5, 64)
    c, g = _both(lambda d: compute_signatures(normalize_text(arr, NormalizeConfig(), d), sh, mh, device=d))
    assert np.array_equal(c.values, to_host(g.values))
