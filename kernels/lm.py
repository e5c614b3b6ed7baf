"""Device code of the n-gram language-model family ("lm"): word ids, n-gram keys, the backoff lookup and the
per-line / per-document scores. The functions in DEVICE_FUNCTIONS are compiled by ``_build.build`` for the CPU
(``lm_cpu.py``, numba.njit) and the GPU (``lm_cuda.py``, cuda.jit(device=True)) from this one source.

Keys (pinned; part of the loaded model, never written to disk)
    word     (h1, h2) = XXH64 of its UTF-8 bytes with WORD_SEED1 / WORD_SEED2; h1 == 0 is stored as 1 (0 marks
             an empty slot). A vocabulary table maps (h1, h2) -> word id by open addressing (linear probing,
             power-of-two capacity, load <= 1/2). 128-bit keys: two different words collide with probability
             ~2^-128 (distinct vocabulary keys are checked when the table is built).
    n-gram   key(w) = ext(KEY_SEED, w); key(v w ...) = ext(key(w ...), v): built from the predicted word
             leftwards, exactly the order in which the backoff lookup extends its match. ext = SplitMix64's
             finalizer of (k * GOLDEN + id + 1); 0 is stored as 1. One table holds every order's n-grams
             (keys checked distinct when built). As in KenLM's probing structure an unseen n-gram can match a
             stored key only by a 64-bit collision (about probes / 2^64 per lookup).

Scoring follows KenLM (lm/model.cc): the longest stored n-gram ending in the word within the history gives the
probability (log10, float32), then the backoffs of the history's stored contexts from that length up are
added in float32, in order of increasing length; a sentence's sum is a float32 like kenlm's ``score``.
Words are maximal runs of bytes other than ASCII whitespace (``\\t \\n \\v \\f \\r`` and space), the split
of Python's ``bytes.split()`` that kenlm's ``Model.score`` uses.
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
MIX1 = U64(0xBF58476D1CE4E5B9)
MIX2 = U64(0x94D049BB133111EB)
MAX_ORDER = 6      # config limit; the history is a fixed-size local array on the GPU
HIST = 8           # history slots (>= MAX_ORDER - 1)
# backoff scratch of score_doc (2 x HIST): a module constant because cuda.local.array needs a literal size,
# and numba-cuda types an expression such as 2 * HIST as a plain int64 (it cannot compile)
CBO = 2 * HIST


# ----------------------------------------------------------------------------------------------------
# Device functions (compiled for both targets)
# ----------------------------------------------------------------------------------------------------

def is_ascii_space(b):
    """True for the bytes Python's bytes.split() splits on: \\t \\n \\v \\f \\r and space."""
    return b == 32 or (b >= 9 and b <= 13)


def key_mix(x):
    """SplitMix64 finalizer (uint64 -> uint64)."""
    x = x ^ (x >> U64(30))
    x = x * MIX1
    x = x ^ (x >> U64(27))
    x = x * MIX2
    return x ^ (x >> U64(31))


def ngram_ext(key, word):
    """Key of the n-gram ``word`` + (n-gram of ``key``): extends a key one word to the left (never 0)."""
    k = key_mix(key * GOLDEN + U64(word) + U64(1))
    if k == U64(0):
        k = U64(1)
    return k


def word_hash(data, start, end):
    """The 128-bit key (h1, h2) of the word data[start:end] (h1 never 0)."""
    h1 = xxh64(data, start, end, WORD_SEED1)
    if h1 == U64(0):
        h1 = U64(1)
    return h1, xxh64(data, start, end, WORD_SEED2)


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


def vocab_find(vk1, vk2, vids, h1, h2):
    """Word id of the 128-bit key (h1, h2), or -1 when the word is not in the vocabulary."""
    mask = U64(vk1.shape[0] - 1)
    s = h1 & mask
    while True:
        k = vk1[s]
        if k == U64(0):
            return I64(-1)
        if k == h1 and vk2[s] == h2:
            return I64(vids[s])
        s = (s + U64(1)) & mask


def score_word(w, hist, hlen, cbo, clen, keys, prob, bo):
    """(log10 p(w | history), matched n-gram length). hist[0] is the latest word, hist[j] the (j+1)-th latest;
    hlen <= order - 1 of them are used. cbo[j] (j < clen) is the backoff of the stored context of length
    j + 1 ending in hist[0]: the n-grams the previous word matched (KenLM's state), so a context is never
    looked up twice; on return cbo holds the n-grams ``w`` matched (cbo float32 (2 x HIST,): the upper half
    is scratch). Float32 sums in KenLM's order (module doc)."""
    k = ngram_ext(KEY_SEED, w)
    s = table_find(keys, k)
    if s < 0:  # cannot happen for ids of the model's vocabulary (every word has a unigram); defensive
        return F32(0.0), I64(0)
    p = prob[s]
    cbo[HIST] = bo[s]
    length = I64(1)
    for j in range(hlen):
        k = ngram_ext(k, hist[j])
        s = table_find(keys, k)
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
    s = table_find(keys, ngram_ext(KEY_SEED, bos))
    if s < 0:
        return I64(0)
    cbo[0] = bo[s]
    return I64(1)


def push_history(hist, hlen, w, cap):
    """Make ``w`` the latest word of the history (at most ``cap`` words kept); returns the new length."""
    if cap == 0:
        return I64(0)
    top = hlen if hlen < cap else cap - 1
    for j in range(top, 0, -1):
        hist[j] = hist[j - 1]
    hist[0] = w
    return I64(top + 1)


def score_line(data, start, end, hist, cbo, vk1, vk2, vids, keys, prob, bo, order, bos, eos, unk):
    """Score the line data[start:end] as one sentence <s> w1 ... wk </s> (kenlm's score(line, bos=True,
    eos=True)). Returns (float32 log10 probability, words k, OOV words); (0, 0, 0) for a line without words
    (not a sentence: no </s> is scored)."""
    cap = I64(order - 1)
    hlen = push_history(hist, I64(0), bos, cap)
    clen = start_context(bos, keys, bo, cbo)
    total = F32(0.0)
    words = I64(0)
    oov = I64(0)
    i = start
    while i < end:
        while i < end and is_ascii_space(data[i]):
            i += 1
        if i >= end:
            break
        j = i
        while j < end and not is_ascii_space(data[j]):
            j += 1
        h1, h2 = word_hash(data, i, j)
        w = vocab_find(vk1, vk2, vids, h1, h2)
        if w < 0:
            w = unk
            oov += 1
        lp, clen = score_word(w, hist, hlen, cbo, clen, keys, prob, bo)
        total = F32(total + lp)
        hlen = push_history(hist, hlen, w, cap)
        words += 1
        i = j
    if words == 0:
        return F32(0.0), I64(0), I64(0)
    lp, _ = score_word(eos, hist, hlen, cbo, clen, keys, prob, bo)
    return F32(total + lp), words, oov


def score_doc(data, line_off, first, last, hist, cbo, vk1, vk2, vids, keys, prob, bo, order, bos, eos, unk):
    """Sum over the document's lines first..last-1: (float64 log10 probability, tokens = words + one </s> per
    sentence, sentences, OOV words)."""
    lp = 0.0
    tokens = I64(0)
    sents = I64(0)
    oovs = I64(0)
    for li in range(first, last):
        s_lp, words, oov = score_line(data, line_off[li], line_off[li + 1], hist, cbo, vk1, vk2, vids, keys,
                                      prob, bo, order, bos, eos, unk)
        if words > 0:
            lp += float(s_lp)
            tokens += words + 1
            sents += 1
            oovs += oov
    return lp, tokens, sents, oovs


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


DEVICE_FUNCTIONS = ["is_ascii_space", "key_mix", "ngram_ext", "word_hash", "table_find", "vocab_find",
                    "score_word", "start_context", "push_history", "score_line", "score_doc", "count_words"]
