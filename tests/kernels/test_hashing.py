"""Device functions (kernels/core.py) compiled for the CPU, against independent references."""
import numpy as np
import pytest
import xxhash
from numba import njit

from gpu_dedup.kernels import core_cpu as cpu
from gpu_dedup.kernels._build import build

D = build(njit)
P = (1 << 61) - 1


@njit
def _xxh(buf, seed):
    return D_xxh64(buf, 0, buf.shape[0], seed)


D_xxh64 = D["xxh64"]
_permute = D["permute61"]
_reduce = D["reduce61"]
_decode = D["utf8_decode"]


def test_xxh64_published_vectors():
    # values from the XXH64 reference implementation's documentation/sanity tests
    assert int(_xxh(np.frombuffer(b"", np.uint8), np.uint64(0))) == 0xEF46DB3751D8E999
    assert int(_xxh(np.frombuffer(b"a", np.uint8), np.uint64(0))) == 0xD24EC4F1A98C6E5B
    assert int(_xxh(np.frombuffer(b"abc", np.uint8), np.uint64(0))) == 0x44BC2CF5AD770999


@pytest.mark.parametrize("length", [0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 100, 1000])
def test_xxh64_matches_xxhash_package(length):
    rng = np.random.default_rng(length)
    for seed in (0, 1, 2**63 + 12345, 2**64 - 1):
        buf = rng.integers(0, 256, length, dtype=np.uint8)
        assert int(_xxh(buf, np.uint64(seed))) == xxhash.xxh64_intdigest(buf.tobytes(), seed=seed)


def test_xxh64_of_a_slice_uses_only_the_slice():
    buf = np.frombuffer(b"xxhello worldyy", np.uint8)
    assert int(D["xxh64"](buf, 2, 13, np.uint64(7))) == xxhash.xxh64_intdigest(b"hello world", seed=7)


@njit
def _xxh_short_all(buf, seed, out):
    """xxh64_short of buf[s:s + length] for every start s and length 0..69 that fit: out[s, length]."""
    for s in range(buf.shape[0]):
        for length in range(min(70, buf.shape[0] - s + 1)):
            out[s, length] = D_xxh64_short(buf, s, s + length, seed)


D_xxh64_short = D["xxh64_short"]


def test_xxh64_short_equals_xxhash_at_every_length_and_near_the_buffer_end():
    """xxh64_short (the select tail of the CPU's shingle hashes) at every length below 70 (0..31: the select
    path; 32 and up: xxh64's stripes), from every start of a 100-byte buffer: its last 31 starts cannot read 32
    bytes and take xxh64's tail, the others the selects, which read past the slice's end."""
    rng = np.random.default_rng(9)
    buf = rng.integers(0, 256, 100, dtype=np.uint8)
    for seed in (0, 2**64 - 1):
        out = np.zeros((100, 70), np.uint64)
        _xxh_short_all(buf, np.uint64(seed), out)
        for s in range(100):
            for length in range(min(70, 100 - s + 1)):
                assert int(out[s, length]) == xxhash.xxh64_intdigest(buf[s:s + length].tobytes(), seed=seed), \
                    (s, length)


def test_permute61_is_exact_mulmod():
    rng = np.random.default_rng(1)
    edge = [0, 1, 2, P - 1, P - 2, (1 << 32) - 1, 1 << 32, (1 << 60) + 12345]
    vals = edge + [int(x) for x in rng.integers(0, P, 2000, dtype=np.uint64)]
    for i, h in enumerate(vals):
        a = vals[(i * 7 + 3) % len(vals)] or 1
        b = vals[(i * 13 + 5) % len(vals)]
        assert int(_permute(np.uint64(a), np.uint64(b), np.uint64(h))) == (a * h + b) % P


def test_permute61_differs_from_the_wrapping_numpy_recipe():
    # the common numpy recipe computes (a*h mod 2^64 + b) mod p; ours must not
    a, h, b = P - 2, P - 3, 5
    wrapped = ((a * h) % 2**64 + b) % P
    exact = (a * h + b) % P
    assert wrapped != exact
    assert int(_permute(np.uint64(a), np.uint64(b), np.uint64(h))) == exact


def test_reduce61():
    for x in [0, 1, P - 1, P, P + 1, 2**64 - 1, 2**62, 3 * P]:
        assert int(_reduce(np.uint64(x))) == x % P


def test_utf8_decode_valid_and_invalid():
    for ch in ["a", "é", "€", "𝄞", "\u07ff", "\uffff", "\U0010ffff"]:
        b = np.frombuffer(ch.encode(), np.uint8)
        cp, n = _decode(b, 0, b.shape[0])
        assert (cp, n) == (ord(ch), len(ch.encode()))
    for bad in [b"\x80", b"\xc0\xaf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xff"]:
        b = np.frombuffer(bad, np.uint8)
        assert _decode(b, 0, b.shape[0]) == (0xFFFD, 1)


def test_band_key_is_xxh64_of_band_bytes():
    sig = np.arange(20, dtype=np.uint32).reshape(2, 10)
    out = np.empty((2, 5), np.uint64)
    cpu.band_keys(sig.view(np.uint8).reshape(2, -1), 5, 8, out)
    for i in range(2):
        for band in range(5):
            raw = sig[i, band * 2:(band + 1) * 2].astype("<u4").tobytes()
            assert int(out[i, band]) == xxhash.xxh64_intdigest(raw, seed=band)


def test_union_find_labels_are_component_minimum():
    u = np.array([5, 3, 8, 1], np.int64)
    v = np.array([3, 7, 9, 5], np.int64)
    lab = cpu.union_find(10, u, v)
    assert lab.tolist() == [0, 1, 2, 1, 4, 1, 6, 1, 8, 8]
