"""Device functions of the filter stage's domain rules: per document, letters per writing system (the
script pre-filter) and the byte/word/line counts of the code and math detectors. One source compiled for
both targets (``domain_cpu.py``, ``domain_cuda.py``) by ``_build.build``.

Letters: ASCII letters, plus every codepoint >= U+00C0 outside punctuation and symbol blocks (U+2000-U+2BFF,
U+3000-U+303F, U+FE30-U+FE4F, U+FF00-U+FF20, U+FFF0 and above in the BMP's specials, and U+1F000 and above:
emoji): a definition that needs no Unicode table and counts every script's letters, marks included.

Scripts: ``SCRIPT_RANGES`` rows (first, last codepoint, script index); ``SCRIPTS`` names each script and the
one language that writes it (only scripts written by one language among lid.176's: Devanagari, Arabic,
Cyrillic and Han are left to the model, since Hindi/Marathi/Nepali, Arabic/Persian/Urdu, Russian/Ukrainian
and Chinese/Japanese share them).
"""
import numpy as np

from .hashing import utf8_decode  # the compiled twin replaces it in each target's namespace (_build)

# (script, language) and its codepoint ranges
SCRIPTS = (("Hangul", "ko"), ("Kana", "ja"), ("Thai", "th"), ("Lao", "lo"), ("Greek", "el"), ("Hebrew", "he"),
           ("Armenian", "hy"), ("Georgian", "ka"), ("Khmer", "km"), ("Myanmar", "my"), ("Sinhala", "si"),
           ("Tamil", "ta"), ("Telugu", "te"), ("Kannada", "kn"), ("Malayalam", "ml"), ("Gujarati", "gu"),
           ("Gurmukhi", "pa"), ("Oriya", "or"), ("Tibetan", "bo"), ("Thaana", "dv"))
SCRIPT_RANGES = np.array([
    (0x1100, 0x11FF, 0), (0x3130, 0x318F, 0), (0xA960, 0xA97F, 0), (0xAC00, 0xD7FF, 0),
    (0x3040, 0x30FF, 1), (0x31F0, 0x31FF, 1), (0xFF66, 0xFF9F, 1),
    (0x0E00, 0x0E7F, 2), (0x0E80, 0x0EFF, 3), (0x0370, 0x03FF, 4), (0x1F00, 0x1FFF, 4), (0x0590, 0x05FF, 5),
    (0x0530, 0x058F, 6), (0x10A0, 0x10FF, 7), (0x2D00, 0x2D2F, 7), (0x1780, 0x17FF, 8), (0x1000, 0x109F, 9),
    (0x0D80, 0x0DFF, 10), (0x0B80, 0x0BFF, 11), (0x0C00, 0x0C7F, 12), (0x0C80, 0x0CFF, 13),
    (0x0D00, 0x0D7F, 14), (0x0A80, 0x0AFF, 15), (0x0A00, 0x0A7F, 16), (0x0B00, 0x0B7F, 17),
    (0x0F00, 0x0FFF, 18), (0x0780, 0x07BF, 19),
], dtype=np.int32)
N_SCRIPTS = len(SCRIPTS)
# columns of the per-document statistics after the N_SCRIPTS script columns
LETTERS, NONSPACE, CODE_SYMBOLS, WORDS, KEYWORDS, LINES, MATH_LINES = range(N_SCRIPTS, N_SCRIPTS + 7)
N_STATS = N_SCRIPTS + 7
CODE_SYMBOLS_ASCII = b"{}[]()<>;:=_#"
# words that are rare in prose and common in Python / C-family / JavaScript source
CODE_KEYWORDS = (b"def", b"class", b"import", b"return", b"elif", b"lambda", b"self", b"function", b"const",
                 b"var", b"let", b"void", b"int", b"include", b"struct", b"public", b"static", b"printf",
                 b"println", b"null", b"None", b"True", b"False", b"endif", b"namespace", b"std")


def keyword_table() -> tuple[np.ndarray, np.ndarray]:
    """(bytes uint8, offsets int64 (K+1,)) of CODE_KEYWORDS, for ``is_keyword``."""
    data = np.frombuffer(b"".join(CODE_KEYWORDS), np.uint8).copy()
    off = np.zeros(len(CODE_KEYWORDS) + 1, np.int64)
    off[1:] = np.cumsum([len(k) for k in CODE_KEYWORDS])
    return data, off


def symbol_table() -> np.ndarray:
    """uint8 (256,): 1 for the ASCII code symbols."""
    t = np.zeros(256, np.uint8)
    t[np.frombuffer(CODE_SYMBOLS_ASCII, np.uint8)] = 1
    return t


def is_space(b):
    return b == 32 or (b >= 9 and b <= 13)


def is_letter(cp):
    if cp < 0x80:
        return (cp >= 65 and cp <= 90) or (cp >= 97 and cp <= 122)
    if cp < 0xC0:
        return False
    if cp >= 0x2000 and cp <= 0x2BFF:
        return False
    if cp >= 0x3000 and cp <= 0x303F:
        return False
    if cp >= 0xFE30 and cp <= 0xFE4F:
        return False
    if cp >= 0xFF00 and cp <= 0xFF20:
        return False
    if cp >= 0xFFF0 and cp <= 0xFFFF:
        return False
    return cp < 0x1F000


def script_of(cp, ranges):
    """Index of the script whose range holds cp (ranges: int32 (R, 3)), or -1."""
    for r in range(ranges.shape[0]):
        if cp >= ranges[r, 0] and cp <= ranges[r, 1]:
            return ranges[r, 2]
    return -1


def is_keyword(data, s, e, kw_data, kw_off):
    """True when data[s:e] equals one of the keywords (kw_data, kw_off: ``keyword_table``)."""
    n = e - s
    for k in range(kw_off.shape[0] - 1):
        if kw_off[k + 1] - kw_off[k] == n:
            same = True
            for t in range(n):
                if data[s + t] != kw_data[kw_off[k] + t]:
                    same = False
                    break
            if same:
                return True
    return False


def domain_stats(data, start, end, ranges, symbols, kw_data, kw_off, stats, row):
    """Write document data[start:end]'s statistics into stats[row, :N_STATS] (int64): letters per script,
    letters, non-space bytes, code-symbol bytes, words (runs of non-space bytes), keyword words, non-blank
    lines and math lines (a non-blank line holding ``$`` or a backslash followed by two ASCII letters: a
    LaTeX command). O(end - start) time, no memory beyond the row."""
    for c in range(N_STATS):
        stats[row, c] = 0
    i = start
    word_start = -1
    line_blank = True
    line_math = False
    while i < end:
        cp, size = utf8_decode(data, i, end)
        if cp < 0x80 and is_space(cp):
            if word_start >= 0:
                stats[row, WORDS] += 1
                if is_keyword(data, word_start, i, kw_data, kw_off):
                    stats[row, KEYWORDS] += 1
                word_start = -1
            if cp == 10:
                if not line_blank:
                    stats[row, LINES] += 1
                    if line_math:
                        stats[row, MATH_LINES] += 1
                line_blank = True
                line_math = False
        else:
            line_blank = False
            stats[row, NONSPACE] += size
            if word_start < 0:
                word_start = i
            if cp < 0x80:
                if symbols[cp] != 0:
                    stats[row, CODE_SYMBOLS] += 1
                if cp == 36:  # '$'
                    line_math = True
                elif cp == 92 and i + 2 < end:  # '\' + two ASCII letters
                    b1 = data[i + 1]
                    b2 = data[i + 2]
                    if ((b1 | 32) >= 97 and (b1 | 32) <= 122) and ((b2 | 32) >= 97 and (b2 | 32) <= 122):
                        line_math = True
            if is_letter(cp):
                stats[row, LETTERS] += 1
                s = script_of(cp, ranges)
                if s >= 0:
                    stats[row, s] += 1
        i += size
    if word_start >= 0:
        stats[row, WORDS] += 1
        if is_keyword(data, word_start, end, kw_data, kw_off):
            stats[row, KEYWORDS] += 1
    if not line_blank:
        stats[row, LINES] += 1
        if line_math:
            stats[row, MATH_LINES] += 1


DEVICE_FUNCTIONS = ["is_space", "is_letter", "script_of", "is_keyword", "domain_stats"]
