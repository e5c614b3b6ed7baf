"""The lm family's keys (kernels/lm.py) against references written here: a short word's key is its bytes, a
long word's the two XXH64 of the xxhash package; the n-gram chain against Python big-int arithmetic."""
import numpy as np
import pytest
import xxhash
from numba import njit

from gpu_dedup.kernels import lm
from gpu_dedup.kernels.lm_cpu import _C

M64 = (1 << 64) - 1
_word_key = _C["word_key"]
_chain = _C["ngram_chain"]
_key = _C["ngram_key"]


@njit
def _keys_of(data, starts, ends, out):
    for i in range(starts.shape[0]):
        a, b = _word_key(data, starts[i], ends[i])
        out[i, 0] = a
        out[i, 1] = b


def ref_word_key(word: bytes) -> tuple[int, int]:
    """The module doc's word key, from the bytes with Python ints."""
    if len(word) <= lm.SHORT_WORD:
        return (int.from_bytes(word[:8].ljust(8, b"\0"), "little"),
                int.from_bytes(word[8:].ljust(7, b"\0"), "little") | ((len(word) + 1) << 56))
    return (xxhash.xxh64_intdigest(word, seed=int(lm.WORD_SEED1)),
            (xxhash.xxh64_intdigest(word, seed=int(lm.WORD_SEED2)) & ((1 << 56) - 1)) | (0xFF << 56))


def test_word_keys_are_the_bytes_of_short_words_and_two_xxh64_of_long_ones():
    rng = np.random.default_rng(3)
    words = [b"a", b"w1", b"w1\0", b"\0", b"12345678", b"123456789", "日本語".encode(), b"x" * 15, b"x" * 16,
             b"exactly15bytes!", b"sixteen_bytes_xx", b"\xff" * 15, b"a" * 100]
    words += [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in rng.integers(1, 40, 200)]
    # the words sit inside a buffer (not at its start or end): a key reads only its own bytes
    data = b"".join(b"#" + w + b"#" for w in words)
    starts, pos = [], 0
    for w in words:
        starts.append(pos + 1)
        pos += len(w) + 2
    starts = np.array(starts, np.int64)
    ends = starts + np.array([len(w) for w in words], np.int64)
    out = np.zeros((len(words), 2), np.uint64)
    _keys_of(np.frombuffer(data, np.uint8), starts, ends, out)
    got = [(int(a), int(b)) for a, b in out]
    assert got == [ref_word_key(w) for w in words]
    assert all(b != 0 for _, b in got)  # 0 marks an empty vocabulary slot
    # exact below 16 bytes: words that differ only by trailing zero bytes or by length keep distinct keys
    assert len({ref_word_key(w) for w in (b"w1", b"w1\0", b"w1\0\0", b"\0" * 15)}) == 4


def _mix(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


@pytest.mark.parametrize("ids", [[0], [5, 7], [7, 5], [1, 2, 3, 4, 5], [2**40, 3, 0]])
def test_ngram_key_is_the_chain_from_the_predicted_word_leftwards(ids):
    """key(v w ...) = mix(chain(chain(w ...), v)), chain(c, v) = c * CHAIN_MUL ^ (v + 1) * WORD_MUL."""
    c = int(lm.KEY_SEED)
    got = lm.KEY_SEED
    for w in reversed(ids):
        c = ((c * int(lm.CHAIN_MUL)) & M64) ^ (((w + 1) * int(lm.WORD_MUL)) & M64)
        got = np.uint64(_chain(got, np.int64(w)))  # (a compiled function returns a Python int)
    assert int(got) == c
    assert int(_key(got)) == (_mix(c) or 1)
