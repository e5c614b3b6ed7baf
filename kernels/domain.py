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

from .core import utf8_decode  # the compiled twin replaces it in each target's namespace (_build)

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
# LaTeX commands that only mathematics uses: one of them (a backslash, the name, then no letter) makes a line
# math. Troff's font escapes (\fB), C's string escapes (\n, \t) and Windows paths are no such name.
MATH_COMMANDS = (b"frac", b"dfrac", b"tfrac", b"sqrt", b"sum", b"prod", b"int", b"iint", b"oint", b"lim",
                 b"infty", b"partial", b"nabla", b"alpha", b"beta", b"gamma", b"delta", b"epsilon",
                 b"varepsilon", b"theta", b"lambda", b"sigma", b"omega", b"varphi", b"rho", b"zeta", b"kappa",
                 b"Gamma", b"Delta", b"Theta", b"Lambda", b"Sigma", b"Omega", b"cdot", b"cdots", b"ldots",
                 b"times", b"leq", b"geq", b"neq", b"approx", b"equiv", b"subseteq", b"forall", b"exists",
                 b"mathbb", b"mathcal", b"mathrm", b"mathbf", b"operatorname", b"binom", b"mapsto", b"pmod",
                 b"rightarrow", b"Rightarrow", b"iff", b"emptyset", b"begin", b"end", b"displaystyle")
N_CODE_KEYWORDS = len(CODE_KEYWORDS)  # keyword_table: code keywords first, then the math commands


def keyword_table() -> tuple[np.ndarray, np.ndarray]:
    """(bytes uint8, offsets int64 (K+1,)) of CODE_KEYWORDS (entries 0 .. N_CODE_KEYWORDS - 1) then
    MATH_COMMANDS, for ``is_keyword``."""
    words = CODE_KEYWORDS + MATH_COMMANDS
    data = np.frombuffer(b"".join(words), np.uint8).copy()
    off = np.zeros(len(words) + 1, np.int64)
    off[1:] = np.cumsum([len(k) for k in words])
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


def is_ascii_letter(b):
    return (b | 32) >= 97 and (b | 32) <= 122


def is_math_operator(b):
    """The bytes inside a $...$ pair that make it mathematics (a '$' pair around a bare word, as in shell or
    Perl, is not): ^ _ = + < > and a command's backslash."""
    return b == 94 or b == 95 or b == 61 or b == 43 or b == 60 or b == 62 or b == 92  # ^ _ = + < > \\


def is_keyword(data, s, e, kw_data, kw_off, k0, k1):
    """True when data[s:e] equals one of the entries k0 .. k1 - 1 of the keyword table (kw_data, kw_off:
    ``keyword_table``)."""
    n = e - s
    for k in range(k0, k1):
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
    lines and math lines. A line is math when it holds a LaTeX math command (``MATH_COMMANDS``: ``\\frac``,
    ``\\begin``, ``\\alpha``, ...) or a ``$...$`` pair with math inside: the opening ``$`` not after a letter,
    digit or backslash and before a non-space, the closing one after a non-space and before no letter, digit,
    ``{`` or ``(``, and between them an ``is_math_operator`` byte or at most two letters/digits (``$n$``). A
    shell prompt (``$ ls``), ``$HOME/$USER``, ``${a}_${b}`` or Perl's ``$x = $y`` is no such pair.
    O(end - start) time, no memory beyond the row."""
    for c in range(N_STATS):
        stats[row, c] = 0
    kw_all = kw_off.shape[0] - 1
    i = start
    word_start = -1
    line_blank = True
    line_math = False
    prev = 10  # the previous byte ('\n' at the start)
    open_len = -1  # bytes since an opening '$' on this line (-1: none open)
    open_op = False  # a math operator since it
    while i < end:
        cp, size = utf8_decode(data, i, end)
        if cp < 0x80 and is_space(cp):
            if word_start >= 0:
                stats[row, WORDS] += 1
                if is_keyword(data, word_start, i, kw_data, kw_off, 0, N_CODE_KEYWORDS):
                    stats[row, KEYWORDS] += 1
                word_start = -1
            if cp == 10:
                if not line_blank:
                    stats[row, LINES] += 1
                    if line_math:
                        stats[row, MATH_LINES] += 1
                line_blank = True
                line_math = False
                open_len = -1
            elif open_len >= 0:
                open_len += 1
            prev = cp
        else:
            line_blank = False
            stats[row, NONSPACE] += size
            if word_start < 0:
                word_start = i
            if cp < 0x80:
                if symbols[cp] != 0:
                    stats[row, CODE_SYMBOLS] += 1
                nxt = data[i + 1] if i + 1 < end else 10
                if cp == 36:  # '$': closes a pair with math inside, or opens one
                    closes = (open_len > 0 and not is_space(prev) and prev != 36
                              and (open_op or open_len <= 2)
                              and not (is_ascii_letter(nxt) or (nxt >= 48 and nxt <= 57) or nxt == 123 or nxt == 40))
                    if closes:
                        line_math = True
                        open_len = -1
                    elif (not is_space(nxt) and nxt != 36 and not is_ascii_letter(prev)
                          and not (prev >= 48 and prev <= 57) and prev != 92):
                        open_len = 0
                        open_op = False
                    else:
                        open_len = -1
                else:
                    if open_len >= 0:
                        open_len += 1
                        if is_math_operator(cp):
                            open_op = True
                        elif not (is_ascii_letter(cp) or (cp >= 48 and cp <= 57)):
                            open_len += 2  # '$a/$', '$a.$': not a one- or two-character symbol
                    if cp == 92:  # '\\' + a math command's name, then no letter
                        k = i + 1
                        while k < end and is_ascii_letter(np.int64(data[k])):  # int64 as prev/nxt: one compile
                            k += 1
                        if k > i + 1 and is_keyword(data, i + 1, k, kw_data, kw_off, N_CODE_KEYWORDS, kw_all):
                            line_math = True
                prev = cp
            else:
                if open_len >= 0:
                    open_len += 3  # a non-ASCII character: more than a short symbol
                prev = 128
            if is_letter(cp):
                stats[row, LETTERS] += 1
                s = script_of(cp, ranges)
                if s >= 0:
                    stats[row, s] += 1
        i += size
    if word_start >= 0:
        stats[row, WORDS] += 1
        if is_keyword(data, word_start, end, kw_data, kw_off, 0, N_CODE_KEYWORDS):
            stats[row, KEYWORDS] += 1
    if not line_blank:
        stats[row, LINES] += 1
        if line_math:
            stats[row, MATH_LINES] += 1


DEVICE_FUNCTIONS = ["is_space", "is_letter", "script_of", "is_ascii_letter", "is_math_operator", "is_keyword",
                    "domain_stats"]
