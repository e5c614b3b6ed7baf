"""Device code of the "features" family: DSIR's hashed word n-gram features and the per-document text
statistics of the Gopher heuristic rules.

DSIR features (``scan_features``; compiled for both targets by ``_build.build``, so the CPU and the GPU give
bit-identical ids and log weights). The input is text normalized by the normalization kernel (NFKC +
lowercase, punctuation -> space, runs of spaces collapsed, ends trimmed: words are separated by exactly one
U+0020). Word j contributes, in this order, the n-grams that END at it: words j (m = 1), j-1..j (m = 2), ...,
j-m+1..j for m <= n. An m-gram is the bytes of its words joined by one space (exactly ``" ".join(words)``),
its feature id is ``XXH64(bytes, DSIR_SEED) mod buckets``. Unigrams and bigrams share the one bucket space
(as in DSIR). A document of w words has ``sum_{m=1..n} max(w - m + 1, 0)`` features.

Gopher statistics (``word_scan``, ``line_scan``, ``stop_word_match``, ``ngram_fold``): codepoint walks over the
raw UTF-8 text driven by a per-codepoint class table (bit CLS_SPACE: ``chr(c).isspace()``, bit CLS_ALPHA:
``chr(c).isalpha()``, i.e. general category L*), so that words are exactly Python's ``str.split()`` and
trimming is ``str.strip()``. The sorting they feed (duplicate counts) is host code in ``features_cpu.py``.

Notation: n documents, T text bytes of the batch, w words / l lines of one document, B buckets.
"""
import numpy as np

from .core import P64_1, P64_2, P64_3, S29, S32, S33, U64, rotl64, utf8_decode, xxh64

# XXH64 seed of the DSIR feature hash (pinned: changing it changes every feature id and fitted model).
DSIR_SEED = U64(0x5D5A1B3C2E4F6071)
# XXH64 seed of the rules' line / paragraph / word hashes (only equality within a document matters).
RULES_SEED = U64(0x2545F4914F6CDD1D)
DSIR_MAX_NGRAM = 8      # the GPU keeps the last n word starts in a fixed-size local array
SPACE_BYTE = 0x20
NEWLINE = 0x0A
DOT = 0x2E
HASH_SIGN = 0x23
ELLIPSIS_CP = 0x2026    # '…'
CLS_SPACE = 1
CLS_ALPHA = 2
R31 = U64(31)

# Columns of the per-document statistics row written by features_cpu.rule_stats (then one column per
# requested top-n-gram size and one per duplicate-n-gram size, in the order given).
ST_WORDS = 0            # number of words (str.split())
ST_MEAN_WORD_LEN = 1    # mean codepoints per word (0 without words)
ST_HASH = 2             # number of '#' codepoints
ST_ELLIPSIS = 3         # number of "..." (non-overlapping, as str.count) plus '…'
ST_BULLET_LINES = 4     # fraction of non-blank lines whose first non-space codepoint is a bullet
ST_ELLIPSIS_LINES = 5   # fraction of non-blank lines ending (before trailing space) in "..." or '…'
ST_ALPHA_WORDS = 6      # fraction of words with at least one alphabetic codepoint
ST_STOP_WORDS = 7       # number of distinct stop words present
ST_DUP_LINES = 8        # duplicate (2nd and later occurrences) non-blank lines / non-blank lines
ST_DUP_LINE_CHARS = 9   # codepoints of those duplicate lines / codepoints of the document
ST_DUP_PARAS = 10       # the same for paragraphs (maximal runs of non-blank lines)
ST_DUP_PARA_CHARS = 11
N_BASE_STATS = 12

# Byte classes of char_class_counts' table (uint8 (256,)): every byte of a valid UTF-8 text is one of a codepoint
# start (not 10xxxxxx), which may also be a non-ASCII lead byte (>= 0xC0) or one of the ASCII bytes asked for.
CC_START = 1
CC_NON_ASCII = 2
CC_ASCII_SET = 4


def scan_features(norm, start, end, n, seed, buckets, ring, ids, pos, logdiff, write):
    """Walk the words of normalized document norm[start:end] and its m-grams (m = 1..n, order in the module
    doc). write=True: feature id k goes to ids[pos + k] (int32/int64 array); write=False: the features'
    logdiff values (float64 (buckets,)) are summed in feature order. ``ring``: int64 scratch >= n (the last
    n word starts). Returns (number of features, sum)."""
    count = 0
    total = 0.0
    if end <= start:
        return count, total
    nw = 0
    ws = start
    i = start
    while i <= end:
        if i == end or norm[i] == SPACE_BYTE:
            ring[nw % n] = ws
            nw += 1
            top = n if nw >= n else nw
            for m in range(1, top + 1):
                h = xxh64(norm, ring[(nw - m) % n], i, seed) % buckets
                if write:
                    ids[pos + count] = h
                else:
                    total += logdiff[h]
                count += 1
            ws = i + 1
        i += 1
    return count, total


def is_ascii_punct(c):
    """Python's string.punctuation: !"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"""
    return (0x21 <= c <= 0x2F) or (0x3A <= c <= 0x40) or (0x5B <= c <= 0x60) or (0x7B <= c <= 0x7E)


def stop_word_match(data, s, e, stop_key, stop_len):
    """Bit k set when word data[s:e], stripped of ASCII punctuation at both ends and with A-Z lowercased,
    equals stop word k (stop_key: uint64 (S,), its <= 8 ASCII bytes little-endian; stop_len: int64 (S,))."""
    while s < e and is_ascii_punct(data[s]):
        s += 1
    while e > s and is_ascii_punct(data[e - 1]):
        e -= 1
    n = e - s
    if n == 0 or n > 8:
        return U64(0)
    key = U64(0)
    for k in range(n):
        c = data[s + k]
        if c >= 0x80:
            return U64(0)
        if 0x41 <= c <= 0x5A:
            c = c + 0x20
        key |= U64(c) << U64(8 * k)
    found = U64(0)
    for k in range(stop_key.shape[0]):
        if stop_len[k] == n and stop_key[k] == key:
            found |= U64(1) << U64(k)
    return found


def popcount64(x):
    c = 0
    while x != U64(0):
        x &= x - U64(1)
        c += 1
    return c


def word_scan(data, start, end, cls, stop_key, stop_len, ws, we, wc, write):
    """Words of raw document data[start:end] (maximal runs of non-space codepoints: ``str.split()``). With
    write: word k's byte span -> ws[k], we[k] and its codepoint count -> wc[k] (int64 arrays >= w).
    Returns (words, words with an alphabetic codepoint, stop-word bit mask, codepoints of the document,
    '#' count, ellipsis count)."""
    nw = 0
    alpha_words = 0
    stops = U64(0)
    chars = 0
    hashes = 0
    ellipses = 0
    dots = 0
    in_word = False
    has_alpha = False
    w0 = start
    c0 = 0
    i = start
    while i < end:
        c = data[i]
        if c < 0x80:  # inline ASCII path: a call per codepoint measured 10x slower (not inlined by LLVM)
            cp = np.int64(c)
            step = 1
        else:
            cp, step = utf8_decode(data, i, end)
        k = cls[cp]
        if cp == DOT:
            dots += 1
        else:
            ellipses += dots // 3  # str.count("...") counts each run of dots non-overlapping: run // 3
            dots = 0
            if cp == HASH_SIGN:
                hashes += 1
            elif cp == ELLIPSIS_CP:
                ellipses += 1
        if k & CLS_SPACE:
            if in_word:
                if write:
                    ws[nw] = w0
                    we[nw] = i
                    wc[nw] = chars - c0
                stops |= stop_word_match(data, w0, i, stop_key, stop_len)
                alpha_words += 1 if has_alpha else 0
                nw += 1
                in_word = False
        else:
            if not in_word:
                in_word = True
                has_alpha = False
                w0 = i
                c0 = chars
            if k & CLS_ALPHA:
                has_alpha = True
        chars += 1
        i += step
    ellipses += dots // 3
    if in_word:
        if write:
            ws[nw] = w0
            we[nw] = end
            wc[nw] = chars - c0
        stops |= stop_word_match(data, w0, end, stop_key, stop_len)
        alpha_words += 1 if has_alpha else 0
        nw += 1
    return nw, alpha_words, stops, chars, hashes, ellipses


def count_newlines(data, start, end):
    c = 0
    for i in range(start, end):
        if data[i] == NEWLINE:
            c += 1
    return c


def is_bullet(cp, bullets):
    for k in range(bullets.shape[0]):
        if bullets[k] == cp:
            return True
    return False


def ends_with_ellipsis(data, s, e):
    """True when data[s:e] (a trimmed line, e > s) ends with "..." or '…' (UTF-8 E2 80 A6)."""
    if e - s >= 3 and data[e - 1] == DOT and data[e - 2] == DOT and data[e - 3] == DOT:
        return True
    return e - s >= 3 and data[e - 3] == 0xE2 and data[e - 2] == 0x80 and data[e - 1] == 0xA6


def line_scan(data, start, end, cls, bullets, ls, le, lc, lp):
    """Non-blank lines of raw document data[start:end]: lines are split at "\\n", trimmed of space codepoints
    (``str.strip()``), blank when nothing is left. Line k's trimmed byte span -> ls[k], le[k], its codepoints
    -> lc[k], its paragraph number -> lp[k] (paragraphs: maximal runs of non-blank lines). Arrays int64 >=
    newlines + 1. Returns (lines, paragraphs, lines starting with a bullet, lines ending with an ellipsis)."""
    nl = 0
    npara = 0
    bullet_lines = 0
    ellipsis_lines = 0
    prev_blank = True
    first = -1        # byte of the line's first non-space codepoint
    last_end = -1     # byte after its last non-space codepoint
    first_cp = 0
    c_first = 0       # codepoint index (within the line) of the first / after the last non-space codepoint
    c_last = 0
    ci = 0
    i = start
    while i <= end:
        if i == end or data[i] == NEWLINE:
            if first >= 0:
                if prev_blank:
                    npara += 1
                ls[nl] = first
                le[nl] = last_end
                lc[nl] = c_last - c_first
                lp[nl] = npara - 1
                if is_bullet(first_cp, bullets):
                    bullet_lines += 1
                if ends_with_ellipsis(data, first, last_end):
                    ellipsis_lines += 1
                nl += 1
                prev_blank = False
            else:
                prev_blank = True
            first = -1
            ci = 0
            i += 1
            continue
        c = data[i]
        if c < 0x80:
            cp = np.int64(c)
            step = 1
        else:
            cp, step = utf8_decode(data, i, end)
        k = cls[cp]
        if not (k & CLS_SPACE):
            if first < 0:
                first = i
                first_cp = cp
                c_first = ci
            last_end = i + step
            c_last = ci + 1
        ci += 1
        i += step
    return nl, npara, bullet_lines, ellipsis_lines


def char_class_counts(data, s, e, table):
    """(codepoints, non-ASCII codepoints, bytes of the table's ASCII set) of UTF-8 text data[s:e]: one table
    lookup per byte (table uint8 (256,), bits CC_*); no decoding, so work is bounded by the bytes."""
    chars = 0
    non_ascii = 0
    in_set = 0
    for i in range(s, e):
        k = table[data[i]]
        if k & CC_START:
            chars += 1
        if k & CC_NON_ASCII:
            non_ascii += 1
        if k & CC_ASCII_SET:
            in_set += 1
    return chars, non_ascii, in_set


def ngram_fold(h, w):
    """Fold the next word hash w into the running state h of a word n-gram (XXH64's round). The state of
    wh[j:j+n] is ngram_fold(state of wh[j:j+n-1], wh[j+n-1]), starting from wh[j]: all n-gram sizes of a
    document are built in one pass per size."""
    h = h + w * P64_2
    return rotl64(h, R31) * P64_1


def ngram_finish(h):
    """64-bit key of an n-gram from its state (XXH64's avalanche): equal n-grams give equal keys, different
    ones collide with probability ~2^-64."""
    h = h ^ (h >> S33)
    h = h * P64_2
    h = h ^ (h >> S29)
    h = h * P64_3
    return h ^ (h >> S32)


DEVICE_FUNCTIONS = ["scan_features", "is_ascii_punct", "stop_word_match", "popcount64", "word_scan",
                    "count_newlines", "is_bullet", "ends_with_ellipsis", "line_scan", "char_class_counts", "ngram_fold",
                    "ngram_finish"]
