"""Device code for the Bloom filter, the exact 128-bit set, paragraph splitting and span hashing, and the
word n-gram / word-offset scans of contamination screening.

The plain-Python device functions listed in DEVICE_FUNCTIONS are compiled twice by ``_build.build``
(together with core.py's): once with ``numba.njit`` for the CPU kernels (``bloom_cpu.py``) and once with
``cuda.jit(device=True)`` for the GPU kernels (``bloom_cuda.py``). Both targets therefore run the same source and
give bit-identical arrays (the Bloom bit array included). Kernels are array-in / array-out.

Bloom filter layout and hash functions (pinned; recorded in the stage statistics)
    bits: uint32 words, bit j lives in word j >> 5 at position j & 31 (the same layout on CPU and GPU).
    An item is a 128-bit key (h1, h2): XXH64 of its bytes with two seeds. Its k bit indexes come from
    double hashing: a = h1 mod m, b = 1 + (h2 mod (m - 1)) and g_i = (a + i * b) mod m for i < k, i.e.
    (h1 + i * h2') mod m with a step h2' that is never 0 mod m. Indexes are reduced MODULO the bit count
    m (any m >= 2, not only powers of two; a mask would silently use a power-of-two part of the array).
    g_i is computed incrementally (x += b; if x >= m: x -= m), which never overflows because m < 2^63.

Notation: n items / paragraphs / documents, k hash functions, m bits, T text bytes of the batch.
"""
import numpy as np

from .. import constants as C
from .core import utf8_decode  # the compiled twin replaces it in each target's namespace (_build)

U64 = np.uint64
U32 = np.uint32
B_ONE = U64(1)
B_FIVE = U64(5)
B_31 = U64(31)
NEWLINE = 0x0A
WORD_SPACE = 0x20
MAX_NGRAM = C.MAX_NGRAM  # the GPU ring buffer is a fixed-size local array


# ----------------------------------------------------------------------------------------------------
# Device functions (compiled for both targets)
# ----------------------------------------------------------------------------------------------------

def bloom_start(h1, h2, m):
    """First index a = h1 mod m and step b = 1 + (h2 mod (m - 1)) in [1, m - 1] (uint64; m >= 2)."""
    return h1 % m, B_ONE + h2 % (m - B_ONE)


def bloom_next(x, b, m):
    """(x + b) mod m for x, b < m < 2^63 (no wrap-around)."""
    x = x + b
    if x >= m:
        x = x - m
    return x


def bloom_word_mask(x):
    """Word index and uint32 bit mask of bit x."""
    return x >> B_FIVE, U32(B_ONE << (x & B_31))


def bloom_contains(bits, m, k, h1, h2):
    """True when all k bits of item (h1, h2) are set."""
    x, b = bloom_start(h1, h2, m)
    for _ in range(k):
        w, mask = bloom_word_mask(x)
        if (bits[w] & mask) == 0:
            return False
        x = bloom_next(x, b, m)
    return True


def bloom_add_range(bits, m, k, h1, h2, lo, hi):
    """Set the bits of item (h1, h2) that fall in words [lo, hi) (uint64). Callers that own disjoint word
    ranges can insert the same items in parallel without atomics and without races."""
    x, b = bloom_start(h1, h2, m)
    for _ in range(k):
        w, mask = bloom_word_mask(x)
        if w >= lo and w < hi:
            bits[w] = bits[w] | mask
        x = bloom_next(x, b, m)


def lower_bound128(k1, k2, q1, q2):
    """First position p with (k1[p], k2[p]) >= (q1, q2) in arrays sorted by (k1, k2)."""
    lo = 0
    hi = k1.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        a = k1[mid]
        if a < q1 or (a == q1 and k2[mid] < q2):
            lo = mid + 1
        else:
            hi = mid
    return lo


def contains128(k1, k2, q1, q2):
    p = lower_bound128(k1, k2, q1, q2)
    return p < k1.shape[0] and k1[p] == q1 and k2[p] == q2


def member_sorted(keys, bitmap, shift, q):
    """Position of q in the sorted distinct uint64 array keys, or -1. bitmap (uint32 words) has bit
    (h >> shift) set for every key h: most absent queries stop at that one read."""
    t = q >> shift
    if (bitmap[t >> B_FIVE] & U32(B_ONE << (t & B_31))) == 0:
        return -1
    lo = 0
    hi = keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    if lo < keys.shape[0] and keys[lo] == q:
        return lo
    return -1


def is_blank_byte(c):
    """ASCII whitespace other than the newline: space, tab, CR, VT, FF."""
    return c == 0x20 or c == 0x09 or c == 0x0D or c == 0x0B or c == 0x0C


SPLIT_PARAGRAPH = C.SPLIT_PARAGRAPH  # split_units' modes (gpu_dedup/text/split.py names them)
SPLIT_LINE = C.SPLIT_LINE
SPLIT_SENTENCE = C.SPLIT_SENTENCE


def is_terminal_ascii(c):
    """A sentence terminal of ASCII: '.', '!' or '?'."""
    return c == 0x2E or c == 0x21 or c == 0x3F


def is_closer(c):
    """ASCII bytes that close a sentence after its terminal: '"', "'", ')' and ']'."""
    return c == 0x22 or c == 0x27 or c == 0x29 or c == 0x5D


def is_terminal_wide(buf, i, end):
    """True when buf[i:i+3] (within end) is the UTF-8 of U+3002 IDEOGRAPHIC FULL STOP, U+FF01 FULLWIDTH
    EXCLAMATION MARK or U+FF1F FULLWIDTH QUESTION MARK: terminals that need no space after them."""
    if i + 2 >= end:
        return False
    c0 = buf[i]
    c1 = buf[i + 1]
    c2 = buf[i + 2]
    return (c0 == 0xE3 and c1 == 0x80 and c2 == 0x82) or (c0 == 0xEF and c1 == 0xBC and (c2 == 0x81 or c2 == 0x9F))


def split_sentences(buf, start, end, out_s, out_e, pos, write):
    """Split buf[start:end] into sentences; return their number (write=True: spans to out_s/out_e[pos:]).

    The rule (gpu_dedup/text/split.py states it for users): a sentence never runs over a newline. Inside a
    line, a terminal run is a maximal run, starting at a terminal, of terminals ('.', '!', '?', U+3002,
    U+FF01, U+FF1F) and closers ('"', "'", ')', ']'). A sentence ends after a terminal run that holds a wide
    terminal (U+3002 / U+FF01 / U+FF1F), or that is followed by the end of the line, or by ASCII blanks
    whose next byte is neither the line's end nor an ASCII lowercase letter ("e.g. the", "3.14", "a.m. on"
    do not end one). Spans are trimmed of ASCII blanks; every lookahead stops at the line's end, so a scan of
    line-aligned pieces gives a document's sentences exactly.
    """
    count = 0
    ss = -1
    le = -1
    i = start
    while i < end:
        c = buf[i]
        if c == NEWLINE:
            if ss >= 0:
                if write:
                    out_s[pos + count] = ss
                    out_e[pos + count] = le
                count += 1
                ss = -1
            i += 1
            continue
        if is_blank_byte(c):
            i += 1
            continue
        if ss < 0:
            ss = i
        wide = is_terminal_wide(buf, i, end)
        if not wide and not is_terminal_ascii(c):
            le = i + 1
            i += 1
            continue
        has_wide = False
        j = i
        while j < end:
            if is_terminal_wide(buf, j, end):
                has_wide = True
                j += 3
            elif is_terminal_ascii(buf[j]) or is_closer(buf[j]):
                j += 1
            else:
                break
        le = j
        boundary = has_wide
        if not has_wide:
            if j == end or buf[j] == NEWLINE:
                boundary = True
            elif is_blank_byte(buf[j]):
                k = j
                while k < end and is_blank_byte(buf[k]):
                    k += 1
                boundary = k == end or buf[k] == NEWLINE or buf[k] < 0x61 or buf[k] > 0x7A
        if boundary:
            if write:
                out_s[pos + count] = ss
                out_e[pos + count] = le
            count += 1
            ss = -1
        i = j
    if ss >= 0:
        if write:
            out_s[pos + count] = ss
            out_e[pos + count] = le
        count += 1
    return count


def split_units(buf, start, end, mode, out_s, out_e, pos, write):
    """Split buf[start:end] into units; return their number (write=True: spans to out_s/out_e[pos:]).

    Lines are separated by "\\n"; a line is blank when it holds only ASCII whitespace. mode SPLIT_PARAGRAPH:
    a unit is a maximal run of non-blank lines (one or more blank lines separate units). SPLIT_LINE: a unit
    is one non-blank line. SPLIT_SENTENCE: ``split_sentences``. Spans are absolute byte positions [s, e),
    trimmed of ASCII whitespace at both ends; the bytes between two units (newlines, blank lines,
    indentation) are their separator.
    """
    if mode == SPLIT_SENTENCE:
        return split_sentences(buf, start, end, out_s, out_e, pos, write)
    line_mode = mode == SPLIT_LINE
    count = 0
    ps = -1
    pe = -1
    fs = -1
    ls = -1
    i = start
    while i <= end:
        if i == end or buf[i] == NEWLINE:
            if fs >= 0:
                if line_mode:
                    if write:
                        out_s[pos + count] = fs
                        out_e[pos + count] = ls + 1
                    count += 1
                else:
                    if ps < 0:
                        ps = fs
                    pe = ls + 1
            elif ps >= 0:
                if write:
                    out_s[pos + count] = ps
                    out_e[pos + count] = pe
                count += 1
                ps = -1
            fs = -1
            ls = -1
        elif not is_blank_byte(buf[i]):
            if fs < 0:
                fs = i
            ls = i
        i += 1
    if ps >= 0:
        if write:
            out_s[pos + count] = ps
            out_e[pos + count] = pe
        count += 1
    return count


def word_span_scan(src, start, end, map_off, map_cp, out_s, out_e, pos, write, in_word, cur_end, closes):
    """word_spans over a piece src[start:end] of a document entered in state ``in_word`` (the last image
    codepoint before ``start`` was not a space) with the open word's end so far ``cur_end`` (the piece's
    start, when entered at a ``chunk_entry`` boundary: its previous codepoint has a non-empty image); returns
    the number of words that START in the piece. With write, word k of the piece has out_s[pos + k]; a word
    gets out_e when it closes: at the space image that ends it, or at the piece's end when ``closes`` (the
    piece ends its document). A word open at entry is word pos - 1 (it began in an earlier piece). Each
    out_e is written once, by the piece where its word closes (no race between pieces)."""
    n = 0
    i = start
    while i < end:
        cp, step = utf8_decode(src, i, end)
        for j in range(map_off[cp], map_off[cp + 1]):
            if map_cp[j] == WORD_SPACE:
                if in_word and write:
                    out_e[pos + n - 1] = cur_end
                in_word = False
            else:
                if not in_word:
                    if write:
                        out_s[pos + n] = i
                    n += 1
                    in_word = True
                cur_end = i + step
        i += step
    if closes and in_word and write:
        out_e[pos + n - 1] = cur_end
    return n


def word_spans(src, start, end, map_off, map_cp, out_s, out_e, pos, write):
    """Original byte span of every word of the normalized text of src[start:end]; return the number of
    words (equal to normalize_doc's). A normalized word is a maximal run of non-space image codepoints
    (normalize_doc's rule); its span runs from the start of the source codepoint that produced its first
    image codepoint to the end of the one that produced its last. With write, spans (absolute byte
    positions) go to out_s/out_e[pos:]. The whole document as one piece of word_span_scan."""
    return word_span_scan(src, start, end, map_off, map_cp, out_s, out_e, pos, write, False, start, True)


DEVICE_FUNCTIONS = ["bloom_start", "bloom_next", "bloom_word_mask", "bloom_contains", "bloom_add_range",
                    "lower_bound128", "contains128", "member_sorted", "is_blank_byte", "is_terminal_ascii", "is_closer",
                    "is_terminal_wide", "split_sentences", "split_units", "word_span_scan", "word_spans"]
