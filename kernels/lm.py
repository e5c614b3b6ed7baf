"""Device code of the n-gram language-model family ("lm"): word keys, n-gram keys, the backoff lookup and the
per-token scores. The functions in DEVICE_FUNCTIONS are compiled by ``_build.build`` for the CPU (``lm_cpu.py``,
numba.njit) and the GPU (``lm_cuda.py``, cuda.jit(device=True)) from this one source.

Keys (pinned; part of the loaded model, never written to disk)
    word     (k1, k2): a word of at most 15 bytes is its own key, exactly: k1 = bytes 0-7, k2 = bytes 8-14 (little
             endian, zero padded) with its length + 1 in the top byte; a longer word is hashed: k1, k2 = XXH64 of
             its UTF-8 bytes with WORD_SEED1 / WORD_SEED2, k2's top byte set to 0xFF. So two different words of
             <= 15 bytes never share a key, and longer ones with probability ~2^-120; k2 is never 0 (0 marks an
             empty slot). A vocabulary table maps (k1, k2) -> word id by open addressing (linear probing from
             ``word_slot``, power-of-two capacity, load <= 1/2; distinct vocabulary keys are checked when built).
             Most words are short: packing their bytes costs a few instructions where two XXH64 cost ~50 ns.
    n-gram   a chain value per n-gram, built from the predicted word leftwards, exactly the order in which the
             backoff lookup extends its match: chain(w) = ngram_chain(KEY_SEED, w), chain(v w ...) =
             ngram_chain(chain(w ...), v), ngram_chain(c, v) = c * CHAIN_MUL ^ (v + 1) * WORD_MUL (KenLM's
             combining step, lm/model.cc); the table key is SplitMix64's finalizer of the chain (``ngram_key``; 0
             is stored as 1). The chain costs one multiply of latency per word of context and the finalizer is
             off that path, so a token's keys of every order are ready at once and their lookups overlap. One
             table holds every order's n-grams (keys checked distinct when built). As in KenLM's probing
             structure an unseen n-gram can match a stored key only by a 64-bit collision (about probes / 2^64
             per lookup).

Scoring follows KenLM (lm/model.cc): the longest stored n-gram ending in the word within the history gives the
probability (log10, float32), then the backoffs of the history's stored contexts from that length up are
added in float32, in order of increasing length; a sentence's sum is a float32 like kenlm's ``score``.
Words are maximal runs of bytes other than ASCII whitespace (``\\t \\n \\v \\f \\r`` and space), the split
of Python's ``bytes.split()`` that kenlm's ``Model.score`` uses. A token is a word of a sentence or the
sentence's closing ``</s>``; its history is the sentence's earlier tokens and ``<s>``, at most order - 1 of them.
"""
import numpy as np

from .core import xxh64  # the compiled twin replaces it in each target's namespace (_build)

U64 = np.uint64
F32 = np.float32
I64 = np.int64
WORD_SEED1 = U64(0x6C6D2D776F726431)  # "lm-word1"
WORD_SEED2 = U64(0x6C6D2D776F726432)  # "lm-word2"
KEY_SEED = U64(0x6C6D2D6E6772616D)    # "lm-ngram"
GOLDEN = U64(0x9E3779B97F4A7C15)
CHAIN_MUL = GOLDEN
WORD_MUL = U64(0xC2B2AE3D27D4EB4F)    # odd: (v + 1) * WORD_MUL is a bijection of the word id
MIX1 = U64(0xBF58476D1CE4E5B9)
MIX2 = U64(0x94D049BB133111EB)
LONG_TAG = U64(0xFF) << U64(56)       # k2's top byte of a hashed (longer than SHORT_WORD bytes) word
LOW56 = (U64(1) << U64(56)) - U64(1)
SHORT_WORD = 15    # words of at most this many bytes are their own key
MAX_ORDER = 6      # config limit; the history is a fixed-size local array on the GPU
HIST = 8           # n-gram keys of one token (>= MAX_ORDER), and history slots (>= MAX_ORDER - 1)
# backoff scratch of score_keys (2 x HIST): a module constant because cuda.local.array needs a literal size,
# and numba-cuda types an expression such as 2 * HIST as a plain int64 (it cannot compile)
CBO = 2 * HIST


# ----------------------------------------------------------------------------------------------------
# Device functions (compiled for both targets)
# ----------------------------------------------------------------------------------------------------

def is_ascii_space(b):
    """True for the bytes Python's bytes.split() splits on: \\t \\n \\v \\f \\r and space."""
    return b == 32 or (b >= 9 and b <= 13)


def key_mix(x):
    """SplitMix64 finalizer (uint64 -> uint64, a bijection)."""
    x = x ^ (x >> U64(30))
    x = x * MIX1
    x = x ^ (x >> U64(27))
    x = x * MIX2
    return x ^ (x >> U64(31))


def ngram_chain(c, word):
    """The chain value of the n-gram ``word`` + (the n-gram whose chain value is ``c``): one word to the left."""
    return (c * CHAIN_MUL) ^ ((U64(word) + U64(1)) * WORD_MUL)


def ngram_key(c):
    """The table key of chain value ``c`` (never 0: 0 marks an empty slot)."""
    k = key_mix(c)
    if k == U64(0):
        k = U64(1)
    return k


def word_key(data, start, end):
    """The 128-bit key (k1, k2) of the word data[start:end] (module doc; k2 never 0)."""
    n = end - start
    if n > SHORT_WORD:
        return xxh64(data, start, end, WORD_SEED1), (xxh64(data, start, end, WORD_SEED2) & LOW56) | LONG_TAG
    k1 = U64(0)
    k2 = U64(n + 1) << U64(56)
    for i in range(n):
        if i < 8:
            k1 = k1 | (U64(data[start + i]) << U64(8 * i))
        else:
            k2 = k2 | (U64(data[start + i]) << U64(8 * (i - 8)))
    return k1, k2


def word_slot(k1, k2):
    """Where the vocabulary table's probe for word key (k1, k2) starts (before the capacity mask): a short
    word's key is its bytes, far from uniform, so both halves are mixed."""
    return key_mix(k1 ^ (k2 * GOLDEN))


def table_find(keys, key):
    """Slot of ``key`` in the open-addressing table ``keys`` (uint64, power-of-two size, 0 = empty), or -1."""
    mask = U64(keys.shape[0] - 1)
    s = key & mask
    while True:
        k = keys[s]
        if k == key:
            return I64(s)
        if k == U64(0):
            return I64(-1)
        s = (s + U64(1)) & mask


def vocab_find(vk1, vk2, vids, k1, k2):
    """Word id of the key (k1, k2), or -1 when the word is not in the vocabulary (vk2 == 0: an empty slot)."""
    mask = U64(vk1.shape[0] - 1)
    s = word_slot(k1, k2) & mask
    while True:
        k = vk2[s]
        if k == U64(0):
            return I64(-1)
        if k == k2 and vk1[s] == k1:
            return I64(vids[s])
        s = (s + U64(1)) & mask


def token_keys(w, ids, prev, p, cap, bos, kk, base):
    """The table keys of the n-grams a token can match: the token ``w`` (a word id, or </s>) at position p of
    its sentence (p earlier words), whose earlier words are ids[prev], ids[prev - 1], ... (the latest first),
    then <s>. kk[base] = its unigram's key, kk[base + j + 1] = the key of it with its j + 1 latest history
    tokens; returns the history length hlen = min(p + 1, cap) (cap = order - 1), so hlen + 1 keys are written."""
    hlen = p + 1
    if hlen > cap:
        hlen = cap
    c = ngram_chain(KEY_SEED, w)
    kk[base] = ngram_key(c)
    for j in range(hlen):
        h = bos
        if j < p:
            h = ids[prev - j]
        c = ngram_chain(c, h)
        kk[base + j + 1] = ngram_key(c)
    return I64(hlen)


def score_keys(kk, base, hlen, cbo, clen, keys, prob, bo):
    """(log10 p(token | history), matched n-gram length) of the token whose n-gram keys are kk[base ..
    base + hlen] (``token_keys``). cbo[j] (j < clen) is the backoff of the stored context of length j + 1
    ending in the latest history token: the n-grams the previous token matched (KenLM's state), so a context
    is never looked up twice; on return cbo holds the n-grams this token matched (cbo float32 (2 x HIST,):
    the upper half is scratch). Float32 sums in KenLM's order (module doc)."""
    s = table_find(keys, kk[base])
    if s < 0:  # cannot happen for ids of the model's vocabulary (every word has a unigram); defensive
        return F32(0.0), I64(0)
    p = prob[s]
    cbo[HIST] = bo[s]
    length = I64(1)
    for j in range(hlen):
        s = table_find(keys, kk[base + j + 1])
        if s < 0:
            break
        p = prob[s]
        cbo[HIST + j + 1] = bo[s]
        length = I64(j + 2)
    total = F32(p)
    # the backoffs of the history's stored contexts of length >= the match, in increasing length (the
    # stored contexts are the consecutive lengths 1 .. clen: a longer one implies its suffixes)
    both = hlen if hlen < clen else clen  # not min(): numba-cuda 0.30 cannot compile min(int64, int64)
    for j in range(both):
        if j + 1 >= length:
            total = F32(total + cbo[j])
    for j in range(length):
        cbo[j] = cbo[HIST + j]
    return total, length


def start_context(bos, keys, bo, cbo):
    """The context after <s>: cbo[0] = its unigram's backoff; returns the stored contexts (1, or 0)."""
    s = table_find(keys, ngram_key(ngram_chain(KEY_SEED, bos)))
    if s < 0:
        return I64(0)
    cbo[0] = bo[s]
    return I64(1)


def count_words(data, start, end):
    """Words (runs of non-ASCII-whitespace bytes) in data[start:end]."""
    n = I64(0)
    inside = False
    for i in range(start, end):
        sp = is_ascii_space(data[i])
        if not sp and not inside:
            n += 1
        inside = not sp
    return n


DEVICE_FUNCTIONS = ["is_ascii_space", "key_mix", "ngram_chain", "ngram_key", "word_key", "word_slot", "table_find",
                    "vocab_find", "token_keys", "score_keys", "start_context", "count_words"]
